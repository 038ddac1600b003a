//===- Passes.td - Passes of the train dialect -------------*- tablegen -*-===//

#ifndef SHARDC_DIALECT_TRAIN_TRANSFORMS_PASSES_TD
#define SHARDC_DIALECT_TRAIN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def TrainAutodiffPass : Pass<"train-autodiff", "::mlir::ModuleOp"> {
  let summary = "Derive the backward and the AdamW update of a training step";
  let description = [{
    Reverse-mode differentiation of each `train.model` of the module (there
    must be at least one) whose body is forward only. The pass

    1. finds the active values: those depending on a trainable parameter;
    2. walks the forward in reverse, applying each op's vector-Jacobian
       product rule, seeding the loss's cotangent with 1 and summing the
       contributions of a value used more than once (the tied GPT token
       embedding and LM head get one gradient);
    3. emits, for each `train.unit` in reverse order, one `train.backward`
       region holding that unit's backward: it takes the cotangents of the
       unit's results and the activations the forward kept (the unit now
       also yields them), and gives the cotangents of the unit's inputs and
       one gradient per trainable parameter of the unit. The backward of the
       root unit stays in the model body;
    4. appends one `train.adamw` per trainable parameter. Frozen parameters
       get no gradient and no optimizer state.

    A unit whose results do not reach the loss, and a trainable parameter
    that does not (it would hold optimizer state and never change), are
    refused, as DDP refuses unused parameters: `frozen` declares the latter.

    Before:

    ```mlir
    %h = train.unit "fc0" (%x) : (tensor<8x16xf32>) -> tensor<8x4xf32> {
    ^bb0(%a: tensor<8x16xf32>):
      %w = train.param "fc0.w" init(#train.normal<std = 2.0e-02>)
          : tensor<4x16xf32>
      %o = train.linear %a, %w : (tensor<8x16xf32>, tensor<4x16xf32>)
          -> tensor<8x4xf32>
      train.yield %o : tensor<8x4xf32>
    }
    %loss = train.cross_entropy %h, %y
        : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
    train.return %loss : tensor<f32>
    ```

    After:

    ```mlir
    %h = train.unit "fc0" (%x) ... { ... train.yield %o : tensor<8x4xf32> }
    %loss = train.cross_entropy %h, %y ...
    %one = arith.constant dense<1.0> : tensor<f32>
    %dh = train.cross_entropy_grad %one, %h, %y ...
    %gw = train.backward "fc0" (%dh, %x) params ["fc0.w"]
        : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> {
    ^bb0(%g: tensor<8x4xf32>, %a: tensor<8x16xf32>):
      %w = train.param_ref "fc0.w" : tensor<4x16xf32>
      %dw = train.matmul %g, %a {transpose_lhs} ...
      train.yield %dw : tensor<4x16xf32>
    }
    train.adamw "fc0.w", %gw : tensor<4x16xf32>
    train.return %loss : tensor<f32>
    ```

    Rationale: activations a unit's backward needs are yielded by its forward
    and passed in explicitly, so they are visible (and costed by the ledger)
    as what the step keeps alive between forward and backward. Parameters are
    read again inside the backward by name, because under ZeRO-3 a unit's
    parameters are gathered anew for its backward. Layer-norm recomputes its
    statistics in the backward instead of keeping them. Attention keeps its
    output and its rows' log-sum-exps (`B x heads x T` f32, the pass adds
    the `lse` result to each attention it differentiates), as
    FlashAttention-2 does: the backward then recomputes the probabilities
    tile by tile without running the forward again.

    Activation checkpointing (`torch.utils.checkpoint`, FSDP's
    `apply_activation_checkpointing`, DeepSpeed's activation checkpointing,
    XLA's rematerialization): a unit named by `recompute` keeps only its
    inputs. Its backward runs the unit's forward again, reading the
    parameters with `train.param_ref` as the rest of the backward does, and
    recomputes from those inputs each value its vector-Jacobian products
    read, before the first of them. The forward then frees its activations
    as it goes; the backward holds one unit's at a time. The recomputed
    values are the forward's to the bit on the host target (the same
    kernels on the same operands), so the trained model is the same; the
    cost is a second forward of the unit (a forward is about a third of a
    step's compute; bench/recompute.sh measures the step).
    Under ZeRO-3 the backward gathers the params the forward alone reads
    (biases, layer-norm shifts) as well, a few KB per block. The last unit
    before the loss gains nothing: its activations are live when its
    backward starts, kept or recomputed.

    `recompute-policy=save-matmuls` is selective checkpointing (torchtitan's
    per-op policy, which saves matmul and attention outputs): the named
    units keep the results of `train.linear`, `train.matmul` and
    `train.attention` their gradients read, and recompute only what lies
    between them (layer norms, GELU, reshapes), which costs little compute.

    ```mlir
    // --train-autodiff="recompute=fc0": the unit yields no residual
    %gw = train.backward "fc0" (%dh, %x) params ["fc0.w"] ... {
    ^bb0(%g: tensor<8x4xf32>, %a: tensor<8x16xf32>):
      %w = train.param_ref "fc0.w" : tensor<4x16xf32>
      %h = train.linear %a, %w ...  // the forward's %h, recomputed
      %dh2 = train.relu_grad %g, %h ...
      ...
    }
    ```

    Precondition: no `train.backward` or `train.adamw` yet; the pass fails on
    a model that is already differentiated.
  }];
  let options = [
    ListOption<"recompute", "recompute", "std::string",
               "units whose backward recomputes their forward instead of "
               "keeping its activations: names or globs (h*, h.{0,1}, * for all; "
               "shardc-pipeline's recompute=auto chooses them)">,
    Option<"recomputePolicy", "recompute-policy", "std::string", "\"full\"",
           "full: recompute every value the backward reads; save-matmuls: "
           "keep the results of GEMMs and attention, recompute the rest">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def TrainFusePass : Pass<"train-fuse", "::mlir::ModuleOp"> {
  let summary = "Fuse adjacent ops of a differentiated step into one kernel each";
  let description = [{
    Rewrites six pairs of ops, forward and backward, into the fused ops of
    the train dialect, so that the intermediate between them never makes a
    round trip through memory (on a GPU: a GEMM epilogue, or one pass per
    row), or an input is read once for both:

    | pair                                      | fused op                   |
    |-------------------------------------------|----------------------------|
    | `train.linear` -> `train.gelu`            | `train.linear_gelu`        |
    | `train.add` -> `train.layernorm`          | `train.add_layernorm`      |
    | `train.matmul` (-> reshape) -> `train.gelu_grad` | `train.matmul_gelu_grad` |
    | `train.layernorm_grad` -> `train.add`     | `train.layernorm_grad_add` |
    | `train.matmul` {transpose_lhs} and `train.sum_to` of its lhs | `train.matmul_bias_grad` |
    | `train.cross_entropy` ... `train.cross_entropy_grad` | `train.cross_entropy_and_grad` |

    These are a GPT block's MLP (c_fc and its GELU), its residual adds and
    the norms after them, their gradients, each linear's weight and bias
    gradients (both reduce the output's gradient over its rows: one read of
    it, as cuBLASLt's BGRADB epilogue and Transformer Engine's wgrad
    GEMMs take it), and the loss with the logits'
    gradient (llm.c's fused classifier: the logits, the step's largest
    tensor, are read twice instead of three times). The loss and its
    gradient fuse in the gradient's place when they read the same logits,
    targets and classes, no other such loss reads those logits, and nothing
    reads the loss before the gradient (the backward's seed, defined
    between them, is not a function of the loss). A weight gradient
    `matmul(g, x) {transpose_lhs}` of a matrix g (the gradient as [K, N],
    or a reshape of it) fuses with the `sum_to` of that gradient to [N] in
    the same block, in the place of whichever comes first, where the other
    one's operands are defined before it. Another pair fuses when

    - both ops are in the same block and the second reads the first's result;
    - the add has operands of one shape (no broadcast);
    - the matmul is of matrices, and its product (the gelu_grad's `grad`)
      is read by nothing else; likewise the input gradient of
      layernorm_grad is read only by the add;
    - the second op's other operands are defined before the first op, where
      the fused op takes its place.

    A result the pair produced and something else still reads (the linear's
    preactivation, kept for the backward; the residual sum) is a result of
    the fused op. Every fused op computes what the pair computed, to the
    bit on the host target: fusion changes where values live, never what
    they are.

    Memory: the backward fusions never store their intermediate (the
    product before GELU's derivative, a norm's input gradient before the
    residual's). A fused op also keeps the first op's operands until the
    second's result is written, where the pair could free them in between:
    a transient of up to their size, which the ledger counts. In a GPT step
    the peak falls where the loss is, not inside a block, and fusion lowers
    it; a model whose peak falls inside such a pair can build with
    `fuse=false` (shardc `--fuse false`) instead.

    `exclude` names fused ops not to form (`exclude=matmul_bias_grad`), to
    tell one fusion's effect on a step's numbers or time from the others'
    (XLA's `--xla_disable_hlo_passes` for one pass): what a step built
    before that fusion existed ran, say.

    Run after `--train-autodiff` (which does not differentiate fused ops),
    before `--shardc-shard`; `--shardc-pipeline` does, unless `fuse=false`.
    A module without a model is an error, as for every pass.

    ```mlir
    %h = train.linear %x, %w, %b : ...
    %g = train.gelu %h : tensor<8x64xf32>
    ```

    becomes

    ```mlir
    %h, %g = train.linear_gelu %x, %w, %b : ...
    ```
  }];
  let options = [
    ListOption<"exclude", "exclude", "std::string",
               "fused ops not to form: linear_gelu, add_layernorm, "
               "matmul_gelu_grad, matmul_bias_grad, layernorm_grad_add, "
               "cross_entropy_and_grad">,
  ];
}

def ShardcWrapPass : Pass<"shardc-wrap", "::mlir::ModuleOp"> {
  let summary = "Group the layers of a model written without units into units";
  let description = [{
    FSDP's auto-wrap policies for a `train.model` whose parameters all sit in
    the root. A layer starts at each op that reads a parameter and takes the
    parameter-free ops after it (a Linear and its GELU); ops before the
    first layer stay in the root.

    - `policy=per-layer`: one unit per layer (FSDP wrapping each Linear).
    - `policy=min-params=P`: consecutive layers are merged until a unit holds
      at least P parameters (`size_based_auto_wrap_policy`); what is left at
      the end stays in the root if it holds fewer.

    A parameter read by ops of two layers (a tied embedding and LM head)
    stays in the root, and so do the ops that read it. Each unit takes the
    values it uses from outside as inputs and yields those used after it;
    it is named after the longest common dotted prefix of its parameters'
    names (`layers.0` for `layers.0.weight` and `layers.0.bias`).

    Before (`policy=per-layer`):

    ```mlir
    %w0 = train.param "fc0.weight" ... : tensor<8x4xf32>
    %w1 = train.param "fc1.weight" ... : tensor<2x8xf32>
    %h = train.linear %x, %w0 ...
    %g = train.gelu %h ...
    %o = train.linear %g, %w1 ...
    ```

    After:

    ```mlir
    %g = train.unit "fc0" (%x) ... {
      %w0 = train.param "fc0.weight" ...
      %h = train.linear %a, %w0 ...
      %g = train.gelu %h ...
      train.yield %g ...
    }
    %o = train.unit "fc1" (%g) ... { ... }
    ```

    Precondition: a forward-only model with no units.
  }];
  let options = [
    Option<"policy", "policy", "std::string", "\"per-layer\"",
           "per-layer, or min-params=P">,
  ];
}

def TrainSummaryPass : Pass<"train-summary", "::mlir::ModuleOp"> {
  let summary = "Print each model's parameters, units and op counts";
  let description = [{
    An analysis: prints, for each `train.model`, what a user checks first
    about a model, to stderr (stdout keeps the IR, so the pass can sit in a
    pipeline). The IR is unchanged. A module without a model is an error,
    as for every pass.

    ```
    model @gpt: 124439808 params (124439808 trainable), 497.76 MB as stored, 13 units, batch 8
      unit                          params     share
      (root)                      39385344     31.7%
      transformer.h.0              7087872      5.7%
      ...
      optimizer: AdamW lr 0.0006, betas (0.9, 0.95), eps 1e-08, weight decay 0.1; warm-up 700 steps; cosine to 6e-05 at step 19073; clip grad norm 1
      ops: 171 forward, 207 backward, 148 update
        train.linear                 49 forward
        ...
    ```

    Forward ops are those of the units and of the root before the loss's
    cotangent is seeded; backward ops are those of `train.backward` regions
    and of the root after it; update ops are the `train.adamw`.
  }];
}

#endif // SHARDC_DIALECT_TRAIN_TRANSFORMS_PASSES_TD
