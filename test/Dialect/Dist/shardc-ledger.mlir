// The ZeRO paper's model-state figures, mixed-precision Adam (bf16 params
// and grads; f32 master, m, v): 16Ψ, 4Ψ+12Ψ/N, 2Ψ+14Ψ/N, 16Ψ/N bytes.

// 13B on 16 ranks: ZeRO-1 61.75 GB, ZeRO-2 37.375 GB, ZeRO-3 13 GB.
// RUN: shardc-opt %S/Inputs/13b.mlir --train-autodiff --shardc-shard="strategy=zero1 mesh=16 param-dtype=bf16 reduce-dtype=bf16" --shardc-ledger="format=json output=-" -o /dev/null | FileCheck %s --check-prefix=Z1-13B
// Z1-13B:     "params": 13000000000,
// Z1-13B:       "grads_bytes": 26000000000,
// Z1-13B:       "model_state_bytes": 61750000000,
// Z1-13B:       "optimizer_bytes": 9750000000,
// Z1-13B:       "params_bytes": 26000000000,
// Z1-13B:     "strategy": "zero1",
// Z1-13B:     "world": 16
// The same once scheduled (asynchronous reduce-scatters).
// RUN: shardc-opt %S/Inputs/13b.mlir --shardc-pipeline="strategy=zero1 mesh=16 param-dtype=bf16 reduce-dtype=bf16 format=json output=-" -o /dev/null | FileCheck %s --check-prefix=Z1-13B
// RUN: shardc-opt %S/Inputs/13b.mlir --train-autodiff --shardc-shard="strategy=zero2 mesh=16 param-dtype=bf16 reduce-dtype=bf16" --shardc-ledger="format=json output=-" -o /dev/null | FileCheck %s --check-prefix=Z2-13B
// Z2-13B:       "grads_bytes": 1625000000,
// Z2-13B:       "model_state_bytes": 37375000000,
// RUN: shardc-opt %S/Inputs/13b.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=16 param-dtype=bf16 reduce-dtype=bf16" --shardc-ledger="format=json output=-" -o /dev/null | FileCheck %s --check-prefix=Z3-13B
// Z3-13B:       "grads_bytes": 1625000000,
// Z3-13B:       "model_state_bytes": 13000000000,
// Z3-13B:       "optimizer_bytes": 9750000000,
// Z3-13B:       "params_bytes": 1625000000,

// 7B on 8 ranks: DDP 112 GB, ZeRO-2 26.25 GB, ZeRO-3 14 GB.
// RUN: shardc-opt %S/Inputs/7b.mlir --train-autodiff --shardc-shard="strategy=ddp mesh=8 param-dtype=bf16 reduce-dtype=bf16" --shardc-ledger="format=json output=-" -o /dev/null | FileCheck %s --check-prefix=DDP-7B
// RUN: shardc-opt %S/Inputs/7b.mlir --train-autodiff --shardc-shard="strategy=zero2 mesh=8 param-dtype=bf16 reduce-dtype=bf16" --shardc-ledger="format=json output=-" -o /dev/null | FileCheck %s --check-prefix=Z2-7B
// Z2-7B:        "model_state_bytes": 26250000000,
// RUN: shardc-opt %S/Inputs/7b.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=8 param-dtype=bf16 reduce-dtype=bf16" --shardc-ledger="format=json output=-" -o /dev/null | FileCheck %s --check-prefix=Z3-7B

// Bytes on the wire for 7B in bf16 on 8 ranks, D = 2Ψ = 14e9 bytes: ZeRO-3
// gathers for the forward and reduce-scatters once, 7/8 x D each; its only
// unit reads data, so its backward needs no input gradient, hence no weight
// and no second gather (FSDP would gather anyway). DDP all-reduces once:
// 2 x 7/8 x D. The loss's all-reduce adds 2 x 7/8 x 4 = 7 bytes.
// Z3-7B:        "all_gather_bytes": 12250000000,
// Z3-7B-NEXT:   "all_gather_count": 1,
// Z3-7B-NEXT:   "all_reduce_bytes": 7,
// Z3-7B-NEXT:   "all_reduce_count": 1,
// Z3-7B-NEXT:   "reduce_scatter_bytes": 12250000000,
// Z3-7B-NEXT:   "reduce_scatter_count": 1
// On one rank the reductions fold to conversions (dist.convert): zero1 still
// holds the f32 gradient whole (28 GB) until its conversion to bf16.
// RUN: shardc-opt %S/Inputs/7b.mlir --shardc-pipeline="strategy=zero1 mesh=1 reduce-dtype=bf16 format=json output=-" -o /dev/null | FileCheck %s --check-prefix=Z1-ONE
// Z1-ONE:       "grads_bytes": 28000000000,
// Z1-ONE:       "model_state_bytes": 112000000000,
// DDP-7B:       "all_reduce_bytes": 24500000007,
// DDP-7B-NEXT:  "all_reduce_count": 2,
// DDP-7B:       "model_state_bytes": 112000000000,
// Z3-7B:        "model_state_bytes": 14000000000,

// The small MLP of shardc-shard.mlir, zero3 over 4 ranks, f32, 2 examples a
// rank, counted by hand:
//   params: shards fc0.weight 1x4, fc0.bias 1, fc1.weight 1x3 = 8 floats = 32 B
//   grads: the same shards = 32 B; optimizer: m and v of them = 64 B
//   activations at the loss: x 2x4 (32 B), y 2 (8 B), fc0's output and its
//     pre-gelu 2x3 each (48 B), logits 2x2 (16 B), the loss (4 B) = 108 B
//   gathered: fc0's weight and bias as the 4 ranks' padded shards, 4 x 4 +
//     4 x 1 floats = 80 B (the whole tensors are 12 + 3: the rest is padding)
//   comm buffers: fc0.weight's gradient (3 rows) reduce-scattered into
//     1-row shards stages a padded 4 x 4 copy = 64 B
//   all_gather: 3/4 of the padded whole, (4-1) x shard: fc0 48 + 12, fc1 36
//     (the last unit, its gather kept for its backward) = 96 B in 3;
//     reduce_scatter: 48 + 12 + 36 = 96 B in 3;
//     all_reduce: the loss, 2 x 3/4 x 4 = 6 B.
// A step without units trains too: its linear's 2 x 4 x 4 x 2 = 64 FLOPs,
// times 3.
// RUN: shardc-opt %S/Inputs/no-units.mlir --shardc-pipeline="strategy=ddp mesh=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NO-UNITS
// NO-UNITS: model FLOPs 192 (forward + backward, for MFU)
// Shapes of 2^40 elements (2^20 x 2^20 products) run more FLOPs than an
// int64 holds: an error, not a wrapped count.
// RUN: not shardc-opt %S/Inputs/flops-overflow.mlir --shardc-pipeline="strategy=ddp mesh=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OVERFLOW
// OVERFLOW: error: 'train.model' op runs more than 9223372036854775807 FLOPs a step per rank, more than the ledger counts
// RUN: shardc-opt %S/../../tools/shardc-opt/Inputs/mlp.mlir --train-autodiff --shardc-ledger -o /dev/null 2>&1 | FileCheck %s --check-prefix=NONE
// NONE: ledger @mlp: none over 1 ranks, 864 params
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=4" --shardc-ledger -o /dev/null 2>&1 | FileCheck %s --check-prefix=TEXT
// TEXT:      ledger @mlp: zero3 over 4 ranks, 21 params
// TEXT-NEXT:   per rank bytes
// TEXT-NEXT:   params 32 32.00 B
// TEXT-NEXT:   grads 32 32.00 B
// TEXT-NEXT:   optimizer 64 64.00 B
// TEXT-NEXT:   model state 128 128.00 B
// TEXT-NEXT:   activations 108 108.00 B
// TEXT-NEXT:   gathered params 80 80.00 B
// TEXT-NEXT:   comm buffers 64 64.00 B
// TEXT-NEXT:   peak {{[0-9]+}}
// TEXT-NEXT:   eval peak {{[0-9]+}}
// TEXT-NEXT:   per step count bytes sent
// TEXT-NEXT:   all_gather 3 96 96.00 B
// TEXT-NEXT:   reduce_scatter 3 96 96.00 B
// TEXT-NEXT:   all_reduce 1 6 6.00 B
// Model FLOPs: the forward's products on the rank's 2 rows, fc0 2 x 2 x 4 x 3
// and fc1 2 x 2 x 3 x 2 = 72, times 3 with the backward.
// TEXT-NEXT:   model FLOPs 216 (forward + backward, for MFU)

// With 2 micro-batches the gathers run per micro-batch, (2-1) x shard bytes
// each: 2 x (fc0.weight 32 + fc0.bias 8 + fc1.weight 12) = 104 B in 6;
// the reduce-scatters run once; the rank holds its accumulated gradients
// whole: 21 floats = 84 B.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 grad-accum=2 format=json output=-" -o /dev/null | FileCheck %s --check-prefix=ACCUM
// ACCUM:      "all_gather_bytes": 104,
// ACCUM-NEXT: "all_gather_count": 6,
// ACCUM:      "reduce_scatter_count": 3
// ACCUM:      "grads_bytes": 84,
// Model FLOPs: the rank's 4 rows in 2 micro-batches of 2, 2 x 72 x 3 = 432.
// ACCUM:      "model_flops": 432,

// Mixed precision stages an f32 copy of each bf16 gradient for the wire.
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=4 param-dtype=bf16 reduce-dtype=f32" --shardc-ledger="format=json output=-" -o /dev/null | FileCheck %s --check-prefix=STAGE
// The largest is fc0.weight's: its 3x4 bf16 gradient cast to f32 and padded
// to the 4 shards of 1x4 its uneven reduce-scatter sends, one copy of 64 B.
// STAGE: "comm_buffer_bytes": 64,

// A budget below the peak fails, naming each unit.
// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=4" --shardc-ledger="memory-budget=100" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BUDGET
// BUDGET: error: 'train.model' op needs a predicted peak of {{[0-9]+}} bytes per rank, over the memory budget of 100 bytes
// BUDGET: note: the root unit: params 0 bytes, gathered 0 bytes, activations kept for backward 0 bytes
// BUDGET: note: unit 'fc0': params 20 bytes, gathered 60 bytes, activations kept for backward 48 bytes
// BUDGET: note: unit 'fc1': params 12 bytes, gathered 24 bytes, activations kept for backward 0 bytes
// With micro-batches the units run in the loop: one micro-batch's figures
// (2 ranks x 2 micro-batches: fc0's activations as over 4 ranks).
// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=2 grad-accum=2" --shardc-ledger="memory-budget=100" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BUDGET-ACCUM
// BUDGET-ACCUM: note: unit 'fc0': params 40 bytes, gathered 60 bytes, activations kept for backward 48 bytes
// BUDGET-ACCUM: note: unit 'fc1': params 12 bytes, gathered 24 bytes, activations kept for backward 0 bytes
// RUN: not shardc-opt %s --train-autodiff --shardc-ledger="format=yaml" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FORMAT
// FORMAT: error: unknown ledger format 'yaml': expected text or json
// RUN: not shardc-opt %s --train-autodiff --shardc-ledger="memory-budget=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGBUDGET
// NEGBUDGET: error: expected memory-budget >= 0 bytes, got -1
// RUN: not shardc-opt %s --train-autodiff --shardc-ledger="output=/dev/full" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FULL
// FULL: error: cannot write the ledger to '/dev/full': No space left on device

train.model @mlp batch 8 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<8x4xf32>
  %y = train.input "y" : tensor<8xi32>
  %h = train.unit "fc0" (%x) : (tensor<8x4xf32>) -> tensor<8x3xf32> {
  ^bb0(%a: tensor<8x4xf32>):
    %w = train.param "fc0.weight" init(#train.uniform<low = -0.5, high = 0.5>) : tensor<3x4xf32>
    %b = train.param "fc0.bias" init(#train.zeros) : tensor<3xf32>
    %o = train.linear %a, %w, %b : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<8x3xf32>
    %g = train.gelu %o : tensor<8x3xf32>
    train.yield %g : tensor<8x3xf32>
  }
  %logits = train.unit "fc1" (%h) : (tensor<8x3xf32>) -> tensor<8x2xf32> {
  ^bb0(%a: tensor<8x3xf32>):
    %w = train.param "fc1.weight" init(#train.uniform<low = -0.5, high = 0.5>) : tensor<2x3xf32>
    %o = train.linear %a, %w : (tensor<8x3xf32>, tensor<2x3xf32>) -> tensor<8x2xf32>
    train.yield %o : tensor<8x2xf32>
  }
  %loss = train.cross_entropy %logits, %y : (tensor<8x2xf32>, tensor<8xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
