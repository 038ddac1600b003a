//===- TrainOps.td - Operations of the train dialect -------*- tablegen -*-===//

#ifndef SHARDC_DIALECT_TRAIN_IR_TRAINOPS_TD
#define SHARDC_DIALECT_TRAIN_IR_TRAINOPS_TD

include "shardc/Dialect/Train/IR/TrainDialect.td"
include "shardc/Dialect/Train/IR/TrainAttrs.td"
include "shardc/Dialect/Train/IR/TrainInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Train_FloatTensor : RankedTensorOf<[F32, BF16]>;
def Train_IndexTensor : RankedTensorOf<[I32, I64]>;
def Train_AnyTensor : RankedTensorOf<[F32, BF16, I32, I64]>;
def Train_Scalar : 0DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;

//===----------------------------------------------------------------------===//
// Structure: model, units, params, inputs
//===----------------------------------------------------------------------===//

def Train_ModelOp : Train_Op<"model", [
    Symbol, IsolatedFromAbove, SingleBlock, NoRegionArguments]> {
  let summary = "one training step of a model";
  let description = [{
    The step of a model: parameters, inputs and forward compute in one block,
    ending in `train.return` of the scalar loss. `batch` is the global batch
    (summed over data-parallel ranks); `optimizer` is the update applied to
    every trainable parameter.

    Once sharded, `split N` says that the global batch is divided over N
    data-parallel ranks: each rank's inputs hold `batch / N` examples. N is
    the number of ranks of the mesh the model is sharded over (the dist
    dialect's `dist.strategy` checks it against `@mesh`).

    The model verifies that parameter, unit and input names are unique.

    ```mlir
    train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9,
        beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
      ...
      train.return %loss : tensor<f32>
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$batch,
                       OptionalAttr<I64Attr>:$split,
                       Train_AdamWAttr:$optimizer);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `batch` $batch (`split` $split^)? `optimizer` $optimizer
    attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The loss returned by the step.
    ::mlir::Value getLoss();
    /// The `train.param` declaring `name`, or null. A walk: to look up many,
    /// use getParamsByName().
    ParamOp lookupParam(::llvm::StringRef name);
    /// Every `train.param` of the model by name.
    ::llvm::StringMap<ParamOp> getParamsByName();
    /// The most elements a tensor, and the most parameters a model, holds
    /// (2^40): every byte count of a step then fits in 64 bits.
    static constexpr int64_t kMaxElements = int64_t(1) << 40;
    /// The examples each rank's inputs hold.
    int64_t getLocalBatch() { return getBatch() / getSplit().value_or(1); }
  }];
}

def Train_ReturnOp : Train_Op<"return", [Terminator, HasParent<"ModelOp">,
                                          Pure]> {
  let summary = "ends the step, returning the loss";
  let arguments = (ins Train_Scalar:$loss);
  let assemblyFormat = "$loss attr-dict `:` type($loss)";
}

def Train_UnitOp : Train_Op<"unit", [
    ParentOneOf<["ModelOp", "MicrobatchesOp"]>, SingleBlock]> {
  let summary = "an FSDP unit: layers whose parameters are gathered together";
  let description = [{
    A named group of layers, FSDP's unit of all-gather and free: the
    parameters it declares are gathered before its forward and its backward
    and freed after. The region's block arguments are bound to `inputs`;
    every other value it uses is declared inside it, so a unit's dependence
    on the rest of the model is explicit. `train.yield` gives the results.

    ```mlir
    %y = train.unit "h0" (%x) : (tensor<8x16xf32>) -> tensor<8x16xf32> {
    ^bb0(%a: tensor<8x16xf32>):
      %w = train.param "h0.w" init(#train.normal<std = 2.0e-02>)
          : tensor<16x16xf32>
      %o = train.linear %a, %w : (tensor<8x16xf32>, tensor<16x16xf32>)
          -> tensor<8x16xf32>
      train.yield %o : tensor<8x16xf32>
    }
    ```

    After `--train-autodiff` a unit also yields the values its backward needs
    (the activations kept for backward).
  }];
  let arguments = (ins StrAttr:$name, Variadic<Train_AnyTensor>:$inputs);
  let results = (outs Variadic<Train_AnyTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $name `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)
    $body
  }];
  let hasRegionVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::llvm::StringRef":$name,
                                "::mlir::TypeRange":$resultTypes,
                                "::mlir::ValueRange":$inputs)>];
}

def Train_BackwardOp : Train_Op<"backward", [
    ParentOneOf<["ModelOp", "MicrobatchesOp"]>, SingleBlock]> {
  let summary = "the backward of one unit, produced by --train-autodiff";
  let description = [{
    The vector-Jacobian product of unit `unit`. Operands are the cotangents
    of the unit's results followed by the activations its forward kept;
    results are the cotangents of the unit's differentiable inputs followed
    by one gradient per parameter named in `params`, in that order.
    Parameters are read with `train.param_ref`.

    ```mlir
    %dx, %gw = train.backward "h0" (%dy, %a) params ["h0.w"]
        : (tensor<8x16xf32>, tensor<8x16xf32>)
          -> (tensor<8x16xf32>, tensor<16x16xf32>) {
    ^bb0(%g: tensor<8x16xf32>, %x: tensor<8x16xf32>):
      %w = train.param_ref "h0.w" : tensor<16x16xf32>
      ...
      train.yield %gx, %gw : tensor<8x16xf32>, tensor<16x16xf32>
    }
    ```
  }];
  let arguments = (ins StrAttr:$unit, StrArrayAttr:$params,
                       Variadic<Train_AnyTensor>:$inputs);
  let results = (outs Variadic<Train_AnyTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $unit `(` $inputs `)` `params` $params attr-dict `:`
    functional-type($inputs, $results) $body
  }];
  let hasRegionVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::llvm::StringRef":$unit,
                                "::llvm::ArrayRef<::llvm::StringRef>":$params,
                                "::mlir::TypeRange":$resultTypes,
                                "::mlir::ValueRange":$inputs)>];
  let extraClassDeclaration = [{
    /// The gradients, one per name in `params`.
    ::mlir::ResultRange getParamGrads() {
      return getResults().take_back(getParams().size());
    }
    /// Checks `grad`, the gradient of `param` (the model resolves names).
    ::mlir::LogicalResult verifyGradient(ParamOp param, ::mlir::Value grad);
  }];
}

def Train_MicrobatchesOp : Train_Op<"microbatches", [
    HasParent<"ModelOp">, SingleBlock]> {
  let summary = "runs its body once per micro-batch and sums what it yields";
  let description = [{
    Gradient accumulation: the body, a forward and backward, runs `count`
    times; block argument i is the k-th of `count` equal slices along
    dimension 0 of `inputs[i]`, and each result is the sum over the runs of
    the value yielded. The body yields gradients of the loss scaled by
    1/count and the loss scaled by 1/count, so the results are the
    gradients and the loss of the whole batch. shardc-shard reduces the
    gradients it sums after it, once per step (DDP's `no_sync`), or with
    `grad-sync=microbatch` inside it, each micro-batch's as its backward
    produces them: the body then yields the loss and the rank's reduced
    shards (in f32), which the loop sums.

    ```mlir
    %g, %loss = train.microbatches 2 (%x) : (tensor<8x4xf32>)
        -> (tensor<3x4xf32>, tensor<f32>) {
    ^bb0(%xm: tensor<4x4xf32>):
      ...
      train.yield %gm, %lm : tensor<3x4xf32>, tensor<f32>
    }
    ```
  }];
  let arguments = (ins I64Attr:$count, Variadic<Train_AnyTensor>:$inputs);
  let results = (outs Variadic<Train_AnyTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $count `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)
    $body
  }];
  let hasRegionVerifier = 1;
}

def Train_YieldOp : Train_Op<"yield", [
    Terminator, ParentOneOf<["UnitOp", "BackwardOp", "MicrobatchesOp"]>,
    Pure]> {
  let summary = "the results of a unit or a backward";
  let arguments = (ins Variadic<Train_AnyTensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

def Train_ParamOp : Train_Op<"param"> {
  let summary = "declares a parameter and reads its value";
  let description = [{
    A parameter of the model: its unique `name` (as in a PyTorch state dict),
    shape and element type (the result type), initializer (`#train.zeros`,
    `#train.ones`, `#train.normal<...>`, `#train.uniform<...>`) and whether it
    is trained (`frozen` parameters get no gradient and no optimizer state).
    The parameter belongs to the unit that declares it (the root unit when
    declared in the model body) and may be used only there.

    ```mlir
    %w = train.param "h0.attn.qkv.weight" init(#train.normal<std = 2.0e-02>)
        : tensor<192x64xf32>
    %p = train.param "pos" frozen init(#train.zeros) : tensor<16x64xf32>
    ```

    Sharding (`--shardc-shard`) moves a unit's parameters out to the model
    body, recording the owner in `of unit`, and, where a rank stores only a
    piece of the parameter, the layout in `sharded(...)` and the full type
    after `of`: the result is then this rank's storage.

    ```mlir
    %w = train.param "h0.w" of unit "h0" init(#train.zeros)
        sharded(#dist.shard<layout = dim0, mesh = @mesh, axes = ["shard"]>)
        of tensor<3x16xf32> : tensor<2x16xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, UnitAttr:$frozen, AnyAttr:$init,
                       OptionalAttr<StrAttr>:$unit,
                       OptionalAttr<AnyAttr>:$sharding,
                       OptionalAttr<TypeAttr>:$full);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $name (`frozen` $frozen^)? (`of` `unit` $unit^)? `init` `(` $init `)`
    (`sharded` `(` $sharding^ `)` `of` $full)? attr-dict `:` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$type, "::llvm::StringRef":$name,
                   "bool":$frozen, "::mlir::Attribute":$init), [{
      build($_builder, $_state, type, name, frozen, init,
            /*unit=*/nullptr, /*sharding=*/nullptr, /*full=*/nullptr);
    }]>];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    bool isTrainable() { return !getFrozen(); }
    /// The name of the unit owning this parameter; "" for the root unit.
    ::llvm::StringRef getUnitName();
    /// The whole parameter's type; the result's unless sharded.
    ::mlir::RankedTensorType getFullType();
    /// Number of elements of the whole parameter.
    int64_t getNumElements() { return getFullType().getNumElements(); }
  }];
}

def Train_ParamRefOp : Train_Op<"param_ref", [
    HasParent<"BackwardOp">, Pure,
    DeclareOpInterfaceMethods<Train_ParamUserOpInterface>]> {
  let summary = "reads a parameter inside its unit's backward";
  let description = [{
    The value of parameter `name` where its declaration is out of reach: in
    the `train.backward` of the unit that declares it.

    ```mlir
    %w = train.param_ref "h0.w" : tensor<16x16xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Train_InputOp : Train_Op<"input", [HasParent<"ModelOp">]> {
  let summary = "a named batch input";
  let description = [{
    One tensor of the global batch fed to each step: token ids, targets,
    features. The leading dimension is the batch.

    ```mlir
    %t = train.input "tokens" : tensor<8x64xi32>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Train_AnyTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Train_AdamWOp : Train_Op<"adamw", [
    HasParent<"ModelOp">, Train_OptimizerUpdateOpInterface,
    DeclareOpInterfaceMethods<Train_ParamUserOpInterface>]> {
  let summary = "updates one parameter with AdamW";
  let description = [{
    Applies the model's `#train.adamw` to parameter `name` with gradient
    `grad`, owning the parameter's first and second moments. Inserted by
    `--train-autodiff`, one per trainable parameter, after the backward.
    With `clip`, the update takes `grad * clip`: the coefficient of
    `max_grad_norm` (`dist.clip_coefficient`). Where a `train.backward`
    yields `grad` (through micro-batch sums) as a param's gradient, that
    param is `name`.

    ```mlir
    train.adamw "h0.w", %gw : tensor<16x16xf32>
    train.adamw "h0.w", %gw clip %c : tensor<16x16xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, Train_FloatTensor:$grad,
                       Optional<Train_Scalar>:$clip);
  let assemblyFormat = [{
    $name `,` $grad (`clip` $clip^)? attr-dict `:` type($grad)
  }];
}

//===----------------------------------------------------------------------===//
// Forward compute
//===----------------------------------------------------------------------===//

class Train_ComputeOp<string mnemonic, list<Trait> traits = []>
    : Train_Op<mnemonic, !listconcat(traits, [Pure])> {
  let hasVerifier = 1;
}

/// A compute op whose result `result` may be written over its operand
/// `operand` where that operand dies (Train_InPlaceOpInterface).
class Train_InPlaceComputeOp<string mnemonic, string operand,
                             list<Trait> traits = [],
                             string result = "Result">
    : Train_ComputeOp<mnemonic,
                      !listconcat(traits, [Train_InPlaceOpInterface])> {
  /// The interface's methods; an op that declares more adds to them.
  code inPlaceDeclaration =
      "::mlir::Value getInPlaceOperand() { return get" # operand # "(); }\n"
      "::mlir::Value getInPlaceResult() { return get" # result # "(); }";
  let extraClassDeclaration = inPlaceDeclaration;
}

def Train_LinearOp : Train_ComputeOp<"linear"> {
  let summary = "y = x W^T + b, as nn.Linear";
  let description = [{
    `x` is `[..., in]`, `weight` is stored `[out, in]` as in `nn.Linear`,
    the optional `bias` is `[out]`; the result is `[..., out]`.

    ```mlir
    %y = train.linear %x, %w, %b
        : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$input, Train_FloatTensor:$weight,
                       Optional<Train_FloatTensor>:$bias);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Train_MatmulOp : Train_ComputeOp<"matmul"> {
  let summary = "batched matrix product with optional transposes";
  let description = [{
    `lhs` is `[b..., M, K]` (`[b..., K, M]` with `transpose_lhs`), `rhs` is
    `[b..., K, N]` (`[b..., N, K]` with `transpose_rhs`), both of the same
    rank, rank >= 2; the result is `[b..., M, N]`.

    ```mlir
    %c = train.matmul %a, %b {transpose_rhs}
        : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$lhs, Train_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

def Train_AddOp : Train_ComputeOp<"add"> {
  let summary = "elementwise sum, rhs broadcast over leading dimensions";
  let description = [{
    The shape of `rhs` is a suffix of the shape of `lhs` (numpy broadcasting
    over leading dimensions, as a position embedding `[T, C]` added to
    `[B, T, C]`); the result has the shape of `lhs`.

    ```mlir
    %s = train.add %a, %b : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$lhs, Train_FloatTensor:$rhs);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

def Train_ScaleOp
    : Train_InPlaceComputeOp<"scale", "Input", [SameOperandsAndResultType]> {
  let summary = "multiplies by a constant";
  let arguments = (ins Train_FloatTensor:$input, F64Attr:$factor);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input `by` $factor attr-dict `:` type($result)";
}

def Train_GeluOp
    : Train_InPlaceComputeOp<"gelu", "Input", [SameOperandsAndResultType]> {
  let summary = "GELU, tanh approximation (GPT-2's)";
  let description = [{
    `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
  }];
  let arguments = (ins Train_FloatTensor:$input);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Train_ReluOp
    : Train_InPlaceComputeOp<"relu", "Input", [SameOperandsAndResultType]> {
  let summary = "max(x, 0)";
  let arguments = (ins Train_FloatTensor:$input);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Train_LayerNormOp : Train_ComputeOp<"layernorm"> {
  let summary = "layer normalization over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + eps) * weight + bias`, statistics over the last
    dimension `C` (biased variance, as nn.LayerNorm); `weight` and `bias` are
    `[C]`.

    ```mlir
    %y = train.layernorm %x, %g, %b {eps = 1.0e-05 : f64}
        : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$input, Train_FloatTensor:$weight,
                       Train_FloatTensor:$bias,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$eps);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias attr-dict `:` functional-type(operands, results)
  }];
}

def Train_EmbeddingOp : Train_ComputeOp<"embedding"> {
  let summary = "gathers rows of a table";
  let description = [{
    `result[i..., :] = table[ids[i...], :]`: `ids` `[...]` of integers in
    `[0, V)`, `table` `[V, C]`, result `[..., C]`.

    ```mlir
    %e = train.embedding %ids, %wte
        : (tensor<2x8xi32>, tensor<64x16xf32>) -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins Train_IndexTensor:$ids, Train_FloatTensor:$table);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $table attr-dict `:` functional-type(operands, results)
  }];
}

def Train_AttentionOp : Train_ComputeOp<"attention"> {
  let summary = "causal multi-head self-attention on a fused qkv";
  let description = [{
    `qkv` is `[B, T, 3C]`: queries, keys and values side by side, each split
    into `heads` heads of `C / heads`. Per head,
    `softmax(q k^T / sqrt(C / heads) + causal mask) v`; heads are
    concatenated into the `[B, T, C]` result (before the output projection).

    `lse`, where present, is each (batch, head, query)'s log-sum-exp of its
    scaled, masked scores, `[B, heads, T]` in f32: what FlashAttention-2's
    forward keeps for its backward. `--train-autodiff` adds it to every
    attention it differentiates, for `train.attention_grad`.

    ```mlir
    %y = train.attention %qkv heads 4
        : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
    %y2, %lse = train.attention %qkv heads 4
        : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x4x8xf32>)
    ```
  }];
  let arguments = (ins Train_FloatTensor:$qkv, I64Attr:$heads);
  let results = (outs Train_FloatTensor:$result,
                      Optional<RankedTensorOf<[F32]>>:$lse);
  let assemblyFormat = [{
    $qkv `heads` $heads attr-dict `:` functional-type(operands, results)
  }];
}

/// The cross-entropy ops' getNumClasses: `classes`, or every logit of a
/// position.
defvar Train_NumClassesDeclaration = [{
  int64_t getNumClasses() {
    return getClasses().value_or(
        ::llvm::cast<::mlir::ShapedType>(getLogits().getType()).getShape().back());
  }
}];

def Train_CrossEntropyOp : Train_ComputeOp<"cross_entropy"> {
  let summary = "softmax cross-entropy, mean over positions";
  let description = [{
    `logits` `[..., V]`, integer `targets` `[...]`; the result is the scalar
    mean over positions of `-log softmax(logits)[target]`.

    With `classes` K < V, only the first K logits of each position are
    classes: the softmax runs over them, targets must be below K, and the
    last V - K columns are padding that the loss ignores. It lets a model
    pad its vocabulary to a multiple of 64 or 128 (llm.c and nanoGPT pad
    GPT-2's 50257 to 50304) so that every row of the vocabulary-wide GEMMs
    is aligned, without changing the loss.

    ```mlir
    %l = train.cross_entropy %logits, %t
        : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
    %p = train.cross_entropy %padded, %t classes 10
        : (tensor<8x16xf32>, tensor<8xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$logits, Train_IndexTensor:$targets,
                       OptionalAttr<I64Attr>:$classes);
  let results = (outs Train_Scalar:$result);
  let assemblyFormat = [{
    $logits `,` $targets (`classes` $classes^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let extraClassDeclaration = Train_NumClassesDeclaration;
}

def Train_ReshapeOp : Train_ComputeOp<"reshape"> {
  let summary = "same elements, another shape";
  let description = [{
    A view: the element type and the number of elements are unchanged.

    ```mlir
    %r = train.reshape %x : tensor<2x8x16xf32> to tensor<16x16xf32>
    ```
  }];
  let arguments = (ins Train_AnyTensor:$input);
  let results = (outs Train_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
}

def Train_IotaOp : Train_ComputeOp<"iota"> {
  let summary = "0, 1, ..., n-1";
  let description = [{
    A 1-D integer tensor counting from 0: the positions fed to a position
    embedding.

    ```mlir
    %pos = train.iota : tensor<8xi32>
    ```
  }];
  let results = (outs 1DTensorOf<[I32, I64]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Train_SumToOp : Train_ComputeOp<"sum_to"> {
  let summary = "sums leading dimensions away";
  let description = [{
    The result shape is a suffix of the input shape; the leading dimensions
    are summed. The backward of a broadcast and of a bias.

    ```mlir
    %s = train.sum_to %x : tensor<2x4x8xf32> to tensor<8xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$input);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
}

//===----------------------------------------------------------------------===//
// Backward compute (produced by --train-autodiff)
//===----------------------------------------------------------------------===//

def Train_GeluGradOp
    : Train_InPlaceComputeOp<"gelu_grad", "Grad", [SameOperandsAndResultType]> {
  let summary = "dx of gelu given dy and x";
  let arguments = (ins Train_FloatTensor:$grad, Train_FloatTensor:$input);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($result)";
}

def Train_ReluGradOp
    : Train_InPlaceComputeOp<"relu_grad", "Grad", [SameOperandsAndResultType]> {
  let summary = "dx of relu given dy and x";
  let arguments = (ins Train_FloatTensor:$grad, Train_FloatTensor:$input);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($result)";
}

def Train_LayerNormGradOp : Train_ComputeOp<"layernorm_grad"> {
  let summary = "dx, dweight, dbias of layernorm given dy, x and weight";
  let description = [{
    Recomputes the statistics from `input` rather than keeping them.

    ```mlir
    %dx, %dw, %db = train.layernorm_grad %dy, %x, %w {eps = 1.0e-05 : f64}
        : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>)
          -> (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins Train_FloatTensor:$grad, Train_FloatTensor:$input,
                       Train_FloatTensor:$weight,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$eps);
  let results = (outs Train_FloatTensor:$input_grad,
                      Train_FloatTensor:$weight_grad,
                      Train_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
}

def Train_EmbeddingGradOp : Train_ComputeOp<"embedding_grad"> {
  let summary = "scatter-adds dy rows into a table-shaped gradient";
  let description = [{
    `result[v, :] = sum over i with ids[i] == v of grad[i, :]`.

    Every runtime sums in one order, so their f32 results agree to the bit
    and a run repeats its bits (no atomics): an id's positions in increasing
    order, in groups of 64 each summed from 0, then the groups' sums in turn
    (shardc_rt/Kernels.h's SHARDC_RT_EMBEDDING_GRAD_GROUP). A GPU sums a
    frequent id's groups side by side.

    ```mlir
    %dt = train.embedding_grad %dy, %ids
        : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<64x16xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$grad, Train_IndexTensor:$ids);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $ids attr-dict `:` functional-type(operands, results)
  }];
}

def Train_AttentionGradOp : Train_ComputeOp<"attention_grad"> {
  let summary = "dqkv of causal self-attention given dy and the forward's state";
  let description = [{
    The exact VJP, given the forward's result `out` and log-sum-exps `lse`
    (FlashAttention-2's saved state): the probabilities are recomputed from
    `qkv` as `exp(s - lse)` (no pass for a row's max and sum), and a target
    may take `delta = rowsum(P * dP)` as `rowsum(dy * out)` (the CUDA fused
    kernels do), rather than keep P or run the forward again.

    ```mlir
    %dqkv = train.attention_grad %dy, %qkv, %y, %lse heads 4
        : (tensor<2x8x16xf32>, tensor<2x8x48xf32>, tensor<2x8x16xf32>,
           tensor<2x4x8xf32>) -> tensor<2x8x48xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$grad, Train_FloatTensor:$qkv,
                       Train_FloatTensor:$out, RankedTensorOf<[F32]>:$lse,
                       I64Attr:$heads);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $qkv `,` $out `,` $lse `heads` $heads attr-dict `:`
    functional-type(operands, results)
  }];
}

def Train_CrossEntropyGradOp
    : Train_InPlaceComputeOp<"cross_entropy_grad", "Logits"> {
  let summary = "dlogits of cross_entropy given dloss";
  let description = [{
    `(softmax(logits) - onehot(targets)) * grad / positions`, written over
    `logits` where they die here (Train_InPlaceOpInterface). With `classes`
    (train.cross_entropy's), the softmax runs over the first `classes`
    logits of a position and the padding columns' gradient is zero.

    ```mlir
    %dl = train.cross_entropy_grad %g, %logits, %t
        : (tensor<f32>, tensor<8x10xf32>, tensor<8xi32>) -> tensor<8x10xf32>
    ```
  }];
  let arguments = (ins Train_Scalar:$grad, Train_FloatTensor:$logits,
                       Train_IndexTensor:$targets,
                       OptionalAttr<I64Attr>:$classes);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $logits `,` $targets (`classes` $classes^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let extraClassDeclaration =
      !strconcat(inPlaceDeclaration, Train_NumClassesDeclaration);
}

//===----------------------------------------------------------------------===//
// Fused compute (produced by --train-fuse)
//===----------------------------------------------------------------------===//
//
// Each fused op computes what two adjacent ops compute, named after them in
// order, in one kernel: on a GPU the intermediate stays in registers (or a
// GEMM's epilogue) instead of a round trip through memory. Every value the
// pair stored and another op reads is still a result. They come after
// --train-autodiff, which does not differentiate them.

def Train_LinearGeluOp : Train_ComputeOp<"linear_gelu"> {
  let summary = "train.linear then train.gelu: a GEMM with a GELU epilogue";
  let description = [{
    `preactivation` is `train.linear`'s result (`x W^T + b`, `bias`
    optional), kept for `train.gelu_grad`; `result` is `train.gelu` of it.

    ```mlir
    %pre, %y = train.linear_gelu %x, %w, %b
        : (tensor<8x16xf32>, tensor<64x16xf32>, tensor<64xf32>)
          -> (tensor<8x64xf32>, tensor<8x64xf32>)
    ```
  }];
  let arguments = (ins Train_FloatTensor:$input, Train_FloatTensor:$weight,
                       Optional<Train_FloatTensor>:$bias);
  let results = (outs Train_FloatTensor:$preactivation,
                      Train_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Train_AddLayerNormOp : Train_ComputeOp<"add_layernorm"> {
  let summary = "train.add then train.layernorm: a residual add and its norm";
  let description = [{
    `sum` is `lhs + rhs` (same shapes: the residual stream), `result` is
    `train.layernorm` of it with `weight`, `bias` and `eps`.

    ```mlir
    %sum, %y = train.add_layernorm %a, %b, %g, %beta {eps = 1.0e-05 : f64}
        : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>)
          -> (tensor<8x16xf32>, tensor<8x16xf32>)
    ```
  }];
  let arguments = (ins Train_FloatTensor:$lhs, Train_FloatTensor:$rhs,
                       Train_FloatTensor:$weight, Train_FloatTensor:$bias,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$eps);
  let results = (outs Train_FloatTensor:$sum, Train_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $weight `,` $bias attr-dict `:`
    functional-type(operands, results)
  }];
}

def Train_MatmulGeluGradOp : Train_ComputeOp<"matmul_gelu_grad"> {
  let summary = "train.matmul then train.gelu_grad: a GEMM with a GELU' epilogue";
  let description = [{
    `gelu_grad(matmul(lhs, rhs), preactivation)`: the gradient reaching a
    GELU's input through the linear after it. `lhs` and `rhs` are matrices
    (rank 2, transposes as `train.matmul`); `preactivation` and the result
    have the product's shape.

    ```mlir
    %dpre = train.matmul_gelu_grad %dy, %w, %pre
        : (tensor<8x16xf32>, tensor<16x64xf32>, tensor<8x64xf32>)
          -> tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$lhs, Train_FloatTensor:$rhs,
                       Train_FloatTensor:$preactivation,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Train_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $preactivation attr-dict `:`
    functional-type(operands, results)
  }];
}

def Train_MatmulBiasGradOp : Train_ComputeOp<"matmul_bias_grad"> {
  let summary = "train.matmul then train.sum_to of its lhs: a linear's weight "
                "and bias gradients";
  let description = [{
    `matmul(lhs, rhs) {transpose_lhs}` and `sum_to(lhs)` over lhs's rows:
    with `lhs` the gradient reaching a linear's output as a matrix [K, N]
    and `rhs` the linear's input [K, M], `result` = lhs^T rhs [N, M] is the
    weight's gradient and `bias_grad` [N] the bias's, both reductions over
    the K rows, from one read of lhs (cuBLASLt's BGRADB epilogue on a GPU).
    `lhs` and `rhs` are matrices; `transpose_lhs` is required,
    `transpose_rhs` as `train.matmul`'s.

    ```mlir
    %dw, %db = train.matmul_bias_grad %dy, %x {transpose_lhs}
        : (tensor<32x16xf32>, tensor<32x64xf32>)
          -> (tensor<16x64xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins Train_FloatTensor:$lhs, Train_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Train_FloatTensor:$result,
                      Train_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

def Train_LayerNormGradAddOp : Train_ComputeOp<"layernorm_grad_add"> {
  let summary = "train.layernorm_grad then train.add: the residual's gradient";
  let description = [{
    As `train.layernorm_grad`, with `input_grad` = `addend` + the input's
    gradient: the residual stream's gradient gathers the norm's in the same
    pass. `addend` has the input's shape.

    ```mlir
    %dx, %dw, %db = train.layernorm_grad_add %dy, %x, %w, %dr
        : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<8x16xf32>)
          -> (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins Train_FloatTensor:$grad, Train_FloatTensor:$input,
                       Train_FloatTensor:$weight, Train_FloatTensor:$addend,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$eps);
  let results = (outs Train_FloatTensor:$input_grad,
                      Train_FloatTensor:$weight_grad,
                      Train_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight `,` $addend attr-dict `:`
    functional-type(operands, results)
  }];
}

def Train_CrossEntropyAndGradOp
    : Train_InPlaceComputeOp<"cross_entropy_and_grad", "Logits", [],
                             "LogitsGrad"> {
  let summary = "train.cross_entropy then train.cross_entropy_grad: llm.c's "
                "fused classifier";
  let description = [{
    `loss` is `train.cross_entropy` of `logits` and `targets` (over the
    first `classes` logits of a position, as there), `logits_grad` is
    `train.cross_entropy_grad` of `grad`, the loss's cotangent: one pass
    over a position's logits gives both its softmax's normalizer and its
    loss, where the pair read the largest tensor of a language model's step
    once more. `logits_grad` is written over `logits` where they die here
    (Train_InPlaceOpInterface). `grad` is known before the loss: the seed of
    the backward, not a function of it.

    ```mlir
    %loss, %dl = train.cross_entropy_and_grad %g, %logits, %t classes 10
        : (tensor<f32>, tensor<8x16xf32>, tensor<8xi32>)
          -> (tensor<f32>, tensor<8x16xf32>)
    ```
  }];
  let arguments = (ins Train_Scalar:$grad, Train_FloatTensor:$logits,
                       Train_IndexTensor:$targets,
                       OptionalAttr<I64Attr>:$classes);
  let results = (outs Train_Scalar:$loss, Train_FloatTensor:$logits_grad);
  let assemblyFormat = [{
    $grad `,` $logits `,` $targets (`classes` $classes^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let extraClassDeclaration =
      !strconcat(inPlaceDeclaration, Train_NumClassesDeclaration);
}

#endif // SHARDC_DIALECT_TRAIN_IR_TRAINOPS_TD
