//===- Passes.td - Sharding passes -------------------------*- tablegen -*-===//

#ifndef SHARDC_DIALECT_DIST_TRANSFORMS_PASSES_TD
#define SHARDC_DIALECT_DIST_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def ShardcShardPass : Pass<"shardc-shard", "::mlir::ModuleOp"> {
  let summary = "Shard a differentiated step by a data-parallel strategy";
  let description = [{
    Turns the single-rank step written by `--train-autodiff` into the step
    every rank of a data-parallel job runs, inserting the collectives of the
    chosen strategy (the seeds' table; Ψ parameters, N ranks):

    | strategy | params | grads | optimizer | collectives |
    |---|---|---|---|---|
    | `ddp` | whole | whole | whole | All-Reduce of gradient buckets as backward fills them |
    | `zero1` | whole | whole | 1/N | after backward: Reduce-Scatter, shard update, All-Gather |
    | `zero2` | whole | 1/N | 1/N | Reduce-Scatter as backward produces each gradient, free the rest |
    | `zero3` (`fsdp`) | 1/N | 1/N | 1/N | per unit: All-Gather before forward, free after; again before backward; Reduce-Scatter |
    | `hsdp` | 1/S | 1/S | 1/S | `zero3` over the shard axis, All-Reduce of gradient shards over the replicate axis |

    The pass

    1. adds `dist.mesh @mesh`: `axes ["shard"] shape [N]` for `mesh=N`,
       `axes ["replicate", "shard"] shape [R, S]` for `mesh=RxS` (HSDP);
       with `reshard-after-forward=K` (1 < K < S) the shard axis is cut in
       two, `node` of S / K and `local` of K (`axes ["node", "local"]
       shape [N / K, K]`), shards spanning both;
    2. moves each unit's parameters out to the model body (`of unit`), so a
       unit takes its gathered parameters as inputs, and a backward takes
       them in place of `train.param_ref`;
    3. stores parameters in `param-dtype` and, for `zero3`/`hsdp`, as dim0
       shards (`sharded(...)`, uneven and empty shards allowed), gathered
       per unit as above; with `reshard-after-forward=false` the forward's
       gather is kept for the backward (one All-Gather fewer per unit);
       with `reshard-after-forward=K` (FSDP2's `reshard_after_forward=K`,
       ZeRO++'s hpZ) the unit keeps, from its forward to its backward, its
       shard over the K ranks of axis `local` (`dist.take_shard` of the
       gathered params, 1/K of them), and the backward gathers over `local`
       alone: K consecutive ranks, a node's GPUs where K is their number,
       so the backward's gathers stay inside a node;
       under `true` and K alike, the unit whose forward runs last keeps
       its gather whole for its backward, which follows at once (only the
       root's head and loss run between): torchtitan's default, the gather
       it saves being one no prefetch could hide; `reshard-last-unit=true`
       reshards it too;
       with `layout=flat` each unit's trainable parameters are one
       `dist.flat_param` instead (FSDP1), gathered whole and viewed through
       `dist.unpack`, their gradients packed and reduce-scattered in one
       call and updated by one `dist.adamw_flat`; `zero1`/`zero2` with
       `layout=flat` keep whole parameters and cut the optimizer state of
       each `bucket-mb` gradient bucket into flat pieces (DeepSpeed);
    4. splits the global batch over the data-parallel ranks: every input's
       leading dimension, and every activation with it, is divided by the
       number of ranks, and the compute runs in `param-dtype`;
    5. with `grad-accum=K`, wraps the forward and backward in a
       `train.microbatches K` loop over slices of the rank's batch, scaling
       the loss by 1/K; the gradients it sums are reduced once, after it,
       or with `grad-sync=microbatch` (zero2, zero3, hsdp) each
       micro-batch's right after the backward producing it, the loop
       summing the rank's reduced shards in f32: a rank never holds a
       whole gradient past its reduction, at K times the reduce-scatters
       (hsdp's all-reduce over the replicas stays after the loop, once, on
       the summed shard: FSDP2's set_requires_all_reduce(False) until the
       last micro-batch);
    6. reduces each gradient (averaging over ranks, in `reduce-dtype` on the
       wire) and updates what the rank owns; the returned loss is averaged
       over ranks, so it equals the single-rank loss;
    7. folds every collective over a group of one rank (`mesh=1`, HSDP's
       `Rx1` and `1xS`) that neither casts nor pads (nor, with
       `offload-params`, brings a param from host memory): its result is its
       input, as XLA folds single-replica collectives, so a unit reads its
       parameters' storage in place and a DDP bucket is not packed;
    8. records the strategy on the model (`dist.strategy`), and with
       `offload-optimizer=true` marks it `dist.offload_optimizer`: the
       optimizer state (the moments, and the f32 masters of bf16 params) is
       kept in host memory rather than on the device, and each update runs
       on the host CPU: the gradients it takes are copied to the host, the
       values it writes copied back (DeepSpeed's ZeRO-Offload,
       `offload_optimizer`). The ledger counts the state as host memory,
       off the device's peak, and the bytes copied each step. With
       `offload-params=true` too (zero3, hsdp) it marks the model
       `dist.offload_params`: the stored shards live in host memory as
       well, where the update writes them, and each gather of one copies
       it into its slot of the gathered buffer and gathers in place, even
       over a group of one rank (FSDP2's CPUOffloadPolicy, DeepSpeed's
       `offload_param`): the shards leave the device's peak, the gradients
       still come to the host, and no updated value goes back, but each
       gather copies its shard in.

    Before (one unit, one param):

    ```mlir
    %h:2 = train.unit "fc0" (%x) ... {
      %w = train.param "fc0.w" init(...) : tensor<4x16xf32>
      ...
    }
    %gw = train.backward "fc0" (%dh, %x) params ["fc0.w"] ... {
      %w = train.param_ref "fc0.w" : tensor<4x16xf32>
      ...
    }
    train.adamw "fc0.w", %gw : tensor<4x16xf32>
    ```

    After `--shardc-shard="strategy=zero3 mesh=2 reshard-last-unit=true"`
    (without the option, fc0, the last unit, keeps `%w0` for its backward):

    ```mlir
    dist.mesh @mesh axes ["shard"] shape [2]
    %w = train.param "fc0.w" of unit "fc0" init(...)
        sharded(#dist.shard<layout = dim0, mesh = @mesh, axes = ["shard"]>)
        of tensor<4x16xf32> : tensor<2x16xf32>
    %w0 = dist.all_gather %w on @mesh ["shard"] dim0 : ... -> tensor<4x16xf32>
    %h:2 = train.unit "fc0" (%x, %w0) ... { ... }
    dist.free %w0 : tensor<4x16xf32>
    %w1 = dist.all_gather %w on @mesh ["shard"] dim0 : ... -> tensor<4x16xf32>
    %gw = train.backward "fc0" (%dh, %x, %w1) params ["fc0.w"] ... { ... }
    dist.free %w1 : tensor<4x16xf32>
    %gs = dist.reduce_scatter %gw on @mesh ["shard"] avg dim0 : ...
    dist.free %gw : tensor<4x16xf32>
    train.adamw "fc0.w", %gs : tensor<2x16xf32>
    ```

    Errors: an unknown strategy or layout, a mesh that is not `N` or `RxS`
    with positive sizes, a `reshard-after-forward` that is not `true`,
    `false` or a number of ranks from 2 dividing the shard axis, `hsdp`
    without a 2-D mesh or a 2-D mesh for any other strategy, a global batch or an activation that does not divide over
    the data-parallel ranks (times `grad-accum`), a model that is not
    differentiated yet or is sharded already.

    Rationale: parameters move out of their units so that a later pass can
    start a unit's All-Gather anywhere before the unit (prefetch), which a
    gather inside the unit's region could not express.
  }];
  let options = [
    Option<"strategy", "strategy", "::shardc::dist::Strategy",
           "::shardc::dist::Strategy::zero3", "what each rank shards",
           [{::llvm::cl::values(
             clEnumValN(::shardc::dist::Strategy::ddp, "ddp",
                        "DDP: All-Reduce gradients (NO_SHARD)"),
             clEnumValN(::shardc::dist::Strategy::zero1, "zero1",
                        "ZeRO-1: shard the optimizer state"),
             clEnumValN(::shardc::dist::Strategy::zero2, "zero2",
                        "ZeRO-2: shard gradients and optimizer state (SHARD_GRAD_OP)"),
             clEnumValN(::shardc::dist::Strategy::zero3, "zero3",
                        "ZeRO-3: shard everything (FSDP FULL_SHARD)"),
             clEnumValN(::shardc::dist::Strategy::zero3, "fsdp",
                        "alias of zero3"),
             clEnumValN(::shardc::dist::Strategy::hsdp, "hsdp",
                        "HSDP: zero3 on the shard axis, replicas on the other (HYBRID_SHARD)"))}]>,
    Option<"mesh", "mesh", "std::string", "\"1\"",
           "ranks: N, or RxS (replicate x shard) for hsdp">,
    Option<"reshardAfterForward", "reshard-after-forward", "std::string",
           "\"true\"",
           "zero3/hsdp: true frees gathered params after a unit's forward "
           "and gathers them again for its backward; false keeps them; K "
           "keeps 1/K of them, sharded over K ranks, and gathers the "
           "backward's over those K">,
    Option<"reshardLastUnit", "reshard-last-unit", "bool", "false",
           "zero3/hsdp with reshard-after-forward true or K: the unit whose "
           "forward runs last reshards too, instead of keeping its gathered "
           "params for its backward, which follows at once">,
    Option<"layout", "layout", "::shardc::dist::Layout",
           "::shardc::dist::Layout::dim0", "how shards are cut",
           [{::llvm::cl::values(
             clEnumValN(::shardc::dist::Layout::dim0, "dim0",
                        "FSDP2: per-parameter dim-0 shards"),
             clEnumValN(::shardc::dist::Layout::flat, "flat",
                        "FSDP1: one flat parameter per unit, padded, cut in "
                        "equal pieces (zero1/zero2: the optimizer state's "
                        "pieces, as DeepSpeed)"))}]>,
    Option<"paramDType", "param-dtype", "::shardc::dist::DType",
           "::shardc::dist::DType::f32",
           "element type parameters are stored, gathered and computed in",
           [{::llvm::cl::values(
             clEnumValN(::shardc::dist::DType::f32, "f32", "float32"),
             clEnumValN(::shardc::dist::DType::bf16, "bf16", "bfloat16"))}]>,
    Option<"reduceDType", "reduce-dtype", "::shardc::dist::DType",
           "::shardc::dist::DType::f32",
           "element type gradients are reduced in",
           [{::llvm::cl::values(
             clEnumValN(::shardc::dist::DType::f32, "f32", "float32"),
             clEnumValN(::shardc::dist::DType::bf16, "bf16", "bfloat16"))}]>,
    Option<"bucketMB", "bucket-mb", "double",
           "::shardc::dist::kDefaultBucketMB",
           "ddp, and zero1/zero2 with layout=flat: gradients are packed, in "
           "the order the backward produces them, into buckets of up to "
           "this many MiB (fractions too, as DDP's bucket_cap_mb), one "
           "All-Reduce (ddp) or Reduce-Scatter each (0: one per gradient)">,
    Option<"unitBucketMB", "unit-bucket-mb", "double", "0",
           "zero3/hsdp with layout=flat: consecutive units whose flat "
           "parameters together stay within this many MiB (fractions too) "
           "share one (one All-Gather and one Reduce-Scatter for all of "
           "them; 0: one per unit)">,
    Option<"gradAccum", "grad-accum", "int64_t", "1",
           "micro-batches per step: forward and backward run in a "
           "train.microbatches loop, the loss scaled by 1/K, and gradient "
           "collectives run as grad-sync says">,
    Option<"gradSync", "grad-sync", "::shardc::dist::GradSync",
           "::shardc::dist::GradSync::step",
           "with grad-accum: when gradients are reduced",
           [{::llvm::cl::values(
             clEnumValN(::shardc::dist::GradSync::step, "step",
                        "once, after the last micro-batch (DDP's no_sync): "
                        "the loop sums whole gradients"),
             clEnumValN(::shardc::dist::GradSync::microbatch, "microbatch",
                        "zero2/zero3/hsdp: each micro-batch's, the loop "
                        "summing this rank's reduced shards in f32 (FSDP2's "
                        "and DeepSpeed's default): K times the reduce-scatters, "
                        "gradients held sharded"))}]>,
    Option<"offloadOptimizer", "offload-optimizer", "bool", "false",
           "keep the optimizer state in host memory and update on the host "
           "CPU (ZeRO-Offload): off the device's peak, for copies of the "
           "gradients and updated values each step">,
    Option<"offloadParams", "offload-params", "bool", "false",
           "with offload-optimizer, zero3 and hsdp: keep the stored param "
           "shards in host memory too, each gather copying its shard to the "
           "device first (FSDP2's CPUOffloadPolicy)">,
  ];
  let dependentDialects = ["::shardc::dist::DistDialect"];
}

def ShardcSchedulePass : Pass<"shardc-schedule", "::mlir::ModuleOp"> {
  let summary = "Make collectives asynchronous and place them for overlap";
  let description = [{
    Takes the step `--shardc-shard` wrote and decides when each collective
    starts and where the step waits for it:

    - parameter All-Gathers become `dist.all_gather_start` + `dist.wait`.
      A unit's forward gathers start `prefetch` units early, while the
      earlier units compute (forward prefetch); a unit's backward gathers
      start before the backward `prefetch` units earlier (FSDP's
      BACKWARD_PRE). The wait sits right before the unit. Parameter
      declarations move to the top of the step so that a gather can start
      anywhere;
    - gradient Reduce-Scatters and All-Reduces start where the gradient
      appears; the step waits for one after the next unit's backward has
      been issued (so it overlaps that compute), or before its result is
      first used if that comes first. What reads the result without
      needing it yet moves down first: a DDP bucket's `dist.unpack` views
      to the updates that read them, and HSDP's All-Reduce over the replicas
      of a Reduce-Scatter's shard to after the next backward, so neither
      pulls the wait up to right after the start. The whole gradient is freed after the
      wait, not before, since the collective reads it until then; unless the
      collective sends a staged copy (cast to a `wire` type, or padded for
      uneven shards), which the step makes as it starts: then the gradient
      is freed right after the start (as FSDP2 frees the unsharded gradient
      once copied into its reduce-scatter input);
    - every `dist.free` moves up to right after the last use of its buffer.

    Before (zero3, one unit shown):

    ```mlir
    %g = dist.all_gather %w on @mesh ["shard"] dim0 : ...
    %h = train.unit "h.1" (%x, %g) ...
    dist.free %g
    ```

    After `--shardc-schedule="prefetch=1"`:

    ```mlir
    %t = dist.all_gather_start %w on @mesh ["shard"] dim0 : ...
    %h0 = train.unit "h.0" (...)          // runs while h.1's params arrive
    %g = dist.wait %t : !dist.token<...>
    %h = train.unit "h.1" (%h0, %g) ...
    dist.free %g
    ```

    The pass then checks that every rank issues the same collectives in the
    same order: each collective and wait must run unconditionally, in the
    step's own block or its micro-batch loop's (which every rank runs the
    same number of times), so no rank can skip or reorder one (the hang FSDP and
    DeepSpeed users meet at run time when ranks take different paths). It
    fails naming the op otherwise.

    Precondition: a step sharded by `--shardc-shard`, not yet scheduled.
  }];
  let options = [
    Option<"prefetch", "prefetch", "int64_t", "1",
           "how many units ahead a parameter All-Gather starts (0: none)">,
  ];
}

def ShardcEvalStepPass : Pass<"shardc-eval-step", "::mlir::ModuleOp"> {
  let summary = "Reduce a step to its evaluation: the forward and the loss";
  let description = [{
    Keeps of each model's step what its loss depends on, in the step's own
    order and schedule: the forward units, their parameter gathers (with
    their prefetch), the micro-batch loop and the loss's all-reduce. The
    backward, the gradient reductions, clipping and the optimizer updates
    go; a unit yields only what the loss reads, and a loss fused with its
    gradient (`train.cross_entropy_and_grad`) becomes `train.cross_entropy`.
    Parameter declarations stay: they are the state evaluation reads. The
    `dist.free`s go too: every buffer dies after its last use, which for a
    gather the step keeps for its backward (`reshard-after-forward=false`)
    comes earlier than its free.

    This is the step `--eval-every` runs in a training executable (PyTorch's
    `model.eval()` under `torch.no_grad()`, llm.c's validation loss): the
    loss on a batch under the current parameters, with no update. Its
    buffers live as the training step's do, but nothing is kept for a
    backward, so `--shardc-ledger` after this pass predicts its peak (less
    the optimizer state, which it neither reads nor frees).

    Before (one micro-batch, one unit):

    ```mlir
    %h = train.unit "l0" (%x, %g) ...                 // yields out, residual
    %loss, %dlogits = train.cross_entropy_and_grad %seed, %h#0, %y ...
    %dx:3 = train.backward "l0" (%dlogits, %h#1, %g) ...
    dist.free %g
    train.adamw "l0.w", %dx#1 ...
    %l = dist.all_reduce %loss on @mesh ["shard"] avg ...
    train.return %l
    ```

    After:

    ```mlir
    %h = train.unit "l0" (%x, %g) ...                 // yields out
    %loss = train.cross_entropy %h, %y ...
    %l = dist.all_reduce %loss on @mesh ["shard"] avg ...
    train.return %l
    ```
  }];
}

def ShardcLedgerPass : Pass<"shardc-ledger", "::mlir::ModuleOp"> {
  let summary = "Per-rank memory and bytes on the wire of a sharded step";
  let description = [{
    An analysis of the step each rank runs, from a liveness walk over the IR
    (the model is never allocated: a 70B-parameter step is costed in
    milliseconds). Per rank:

    - model state: `params` (the stored parameters: whole, or shards),
      `optimizer` (first and second moments in f32, and an f32 master copy
      of what the rank updates when parameters are stored in lower
      precision), `grads` (the gradients a rank holds for its optimizer:
      whole for `ddp` and `zero1`, which reduce late or keep them whole, the
      reduced shard otherwise);
    - `activations`: bytes live at the end of the forward that the backward
      reads (what units yield besides their outputs, and the root's);
    - `gathered`: the peak of gathered parameters in flight;
    - `comm_buffers`: the peak of staging buffers of collectives that cast
      to another type on the wire;
    - `peak`: the most bytes live at any point of the step, every category
      included: each buffer lives from the op defining it to its last use
      or `dist.free`; reshapes, unit and backward arguments and results are
      views of the buffers they name, and so is a result written in place
      over an operand that dies at its op (`train::InPlaceOpInterface`:
      the logits' gradient over the logits, an activation's gradient over
      the gradient it is given);
    - `eval peak` (a step that trains): the peak of its evaluation step
      (`--shardc-eval-step`, what an executable's `--eval-every` runs): the
      params and optimizer state, and the forward's buffers, none kept for
      a backward.

    Per step, each collective's bytes sent by a rank, ring algorithms over
    the group of N ranks of its axes, D the bytes of the whole tensor in the
    wire type (shards padded): All-Gather and Reduce-Scatter (N-1)/N·D,
    All-Reduce 2(N-1)/N·D; and their counts.

    `format=text` prints a table, `format=json` an object with `params`,
    `world`, `strategy`, `per_rank.{params_bytes, grads_bytes,
    optimizer_bytes, model_state_bytes, activation_bytes, gathered_bytes,
    comm_buffer_bytes, peak_bytes, eval_peak_bytes, model_flops}`,
    `comm.{all_gather, reduce_scatter, all_reduce}_{bytes,count}`. The report goes to `output` (stderr when
    empty, `-` for stdout). With `memory-budget=BYTES`, compilation fails
    when the peak exceeds it, with a per-unit breakdown.

    With `machine=h100`, `h200` or `a100` (SXM GPUs, 8 a node, or
    `ranks-per-node`), the report adds a timeline: the scheduled step
    played as the CUDA executable runs it, the compute stream running every
    kernel in program order, each collective running on its communicator's
    stream from its start (once that stream is free), and each `dist.wait`
    holding the compute stream until its collective ends. A kernel takes
    its matrix-product FLOPs at the peak of its operands' type (bf16, or
    TF32 for f32) or its bytes in and out at HBM's bandwidth, whichever is
    longer, each at the share the CUDA target's kernels of that type
    reached on an H200 (GEMMs 74% of the bf16 peak and 48% of TF32's, flash
    attention 7.2% and 8.8%, the other kernels 32% and 53% of the
    bandwidth: lookupMachine says how they were measured); a collective takes its bytes sent (as above) at
    NCCL's bus bandwidth, 360 GB/s for a group inside a node (its ranks
    within `ranks-per-node` consecutive ones) and 45 GB/s for one across
    nodes, plus 15 us per NCCL launch (all-gathers or reduce-scatters
    started together on one communicator share one, as the CUDA target
    groups them; each all-reduce is its own). It prints the compute stream's time (matrix
    products, the rest), each collective kind's time on its streams, the
    time the compute stream waits on them (`exposed communication`: what
    the schedule does not hide), the step's time, its MFU (the model FLOPs
    at the peak of the params' type), and the longest waits, named by the
    collective's kind and the unit it holds up. The figures are a
    calibrated roofline, not a measurement (GPT-2 small at world size 1
    within 2% of the H200's step, test/e2e/timeline-measured.test): it
    ranks schedules (prefetch depth,
    `reshard-after-forward`, bucket sizes, a node's share of a group)
    before anything runs. `format=json` adds `timeline.{machine,
    ranks_per_node, matmul_ms, memory_ms, all_gather_ms,
    reduce_scatter_ms, all_reduce_ms, exposed_ms, step_ms, mfu, waits}`.
    A step offloading its optimizer has no timeline: its updates run at the
    host CPU's speed, which no machine figure gives.

    Sizes are in bytes; GB below means 10^9 bytes. Mixed-precision Adam
    (`param-dtype=bf16 reduce-dtype=bf16`) reproduces the ZeRO paper's
    model state: 16Ψ (ddp), 4Ψ + 12Ψ/N (zero1), 2Ψ + 14Ψ/N (zero2),
    16Ψ/N (zero3), up to shard padding.
  }];
  let options = [
    Option<"format", "format", "std::string", "\"text\"",
           "text or json">,
    Option<"output", "output", "std::string", "\"\"",
           "where the report goes: a file, - for stdout, stderr when empty">,
    Option<"memoryBudget", "memory-budget", "int64_t", "0",
           "fail when the predicted per-rank peak exceeds this many bytes "
           "(0: no budget)">,
    Option<"machine", "machine", "std::string", "\"\"",
           "also predict the step's time on this machine (h100, h200, "
           "a100)">,
    Option<"ranksPerNode", "ranks-per-node", "int64_t", "0",
           "with machine: ranks per node, in place of the machine's (8)">,
  ];
}

#endif // SHARDC_DIALECT_DIST_TRANSFORMS_PASSES_TD
