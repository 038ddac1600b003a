// grad-sync=microbatch: with micro-batches, each micro-batch's gradients
// are reduced as its backward produces them, inside the loop, and the loop
// sums the rank's reduced shards in f32 (FSDP2's and DeepSpeed's
// accumulation);
// grad-sync=step (the default) reduces the summed whole gradients once,
// after the loop.

// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=zero3 mesh=2 grad-accum=2 grad-sync=microbatch" 2>/dev/null | FileCheck %s --check-prefix=Z3
// Z3:      %[[SUMS:.*]]:5 = train.microbatches 2(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<4xi32>) -> (tensor<f32>, tensor<8x8xf32>, tensor<8xf32>, tensor<2x16xf32>, tensor<2xf32>)
// Z3:      %[[B1:.*]]:3 = train.backward "layers.1"
// Z3:      %[[RS1W:.*]] = dist.reduce_scatter_start %[[B1]]#1 on @mesh ["shard"] avg dim0 : tensor<4x16xf32> -> !dist.token<tensor<2x16xf32>>
// Z3:      %[[RS1B:.*]] = dist.reduce_scatter_start %[[B1]]#2
// The reductions of layers.1 overlap the backward of layers.0.
// Z3-NEXT: %[[B0:.*]]:2 = train.backward "layers.0"
// Z3:      %[[S1B:.*]] = dist.wait %[[RS1B]]
// Z3-NEXT: dist.free %[[B1]]#2
// Z3-NEXT: %[[S1W:.*]] = dist.wait %[[RS1W]]
// Z3-NEXT: dist.free %[[B1]]#1
// Z3:      %[[RS0W:.*]] = dist.reduce_scatter_start %[[B0]]#0
// Z3:      %[[S0W:.*]] = dist.wait %[[RS0W]]
// Z3:      %[[S0B:.*]] = dist.wait
// Z3:      train.yield %{{.*}}, %[[S0W]], %[[S0B]], %[[S1W]], %[[S1B]] : tensor<f32>, tensor<8x8xf32>, tensor<8xf32>, tensor<2x16xf32>, tensor<2xf32>
// Z3-NEXT: }
// Z3-NOT:  dist.reduce_scatter
// Z3:      train.adamw "layers.0.weight", %[[SUMS]]#1 : tensor<8x8xf32>
// Z3-NEXT: train.adamw "layers.0.bias", %[[SUMS]]#2 : tensor<8xf32>

// Flat hsdp, a unit's gradients packed and reduce-scattered over the shard
// axis in the loop; the all-reduce over the replicas runs once, after it,
// on the summed shard.
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=hsdp mesh=2x2 layout=flat grad-accum=2 grad-sync=microbatch" 2>/dev/null | FileCheck %s --check-prefix=HSDP
// HSDP:      %[[SUMS:.*]]:3 = train.microbatches 2
// HSDP-SAME: -> (tensor<f32>, tensor<72xf32>, tensor<34xf32>)
// HSDP:      %[[PACKED:.*]] = dist.pack
// HSDP-NEXT: %[[RS:.*]] = dist.reduce_scatter_start %[[PACKED]] on @mesh ["shard"] avg flat : tensor<68xf32> -> !dist.token<tensor<34xf32>>
// With no all-reduce reading it at once, it overlaps the next backward.
// HSDP-NEXT: train.backward "layers.0"
// HSDP:      dist.wait %[[RS]]
// HSDP-NEXT: dist.free %[[PACKED]]
// HSDP-NOT:  dist.all_reduce
// HSDP:      train.yield {{.*}} : tensor<f32>, tensor<72xf32>, tensor<34xf32>
// HSDP-NOT:  dist.reduce_scatter
// HSDP:      %[[AR0:.*]] = dist.all_reduce_start %[[SUMS]]#1 on @mesh ["replicate"] avg : tensor<72xf32>
// HSDP:      %[[AR1:.*]] = dist.all_reduce_start %[[SUMS]]#2 on @mesh ["replicate"] avg : tensor<34xf32>
// HSDP:      %[[G0:.*]] = dist.wait %[[AR0]]
// HSDP-NEXT: dist.adamw_flat "layers.0" ["layers.0.weight", "layers.0.bias"], %[[G0]]

// The ledger: gradients held sharded (424 bytes, not 848), at twice the
// reduce-scatters, and a lower peak.
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=zero3 mesh=2 grad-accum=2 format=json output=-" -o /dev/null | FileCheck %s --check-prefix=STEP
// STEP:      "reduce_scatter_bytes": 424,
// STEP-NEXT: "reduce_scatter_count": 4
// STEP:      "grads_bytes": 848,
// STEP:      "peak_bytes": 3372
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=zero3 mesh=2 grad-accum=2 grad-sync=microbatch format=json output=-" -o /dev/null | FileCheck %s --check-prefix=MICRO
// MICRO:      "reduce_scatter_bytes": 848,
// MICRO-NEXT: "reduce_scatter_count": 8
// MICRO:      "grads_bytes": 424,
// MICRO:      "peak_bytes": 2960

// Every strategy that shards gradients moves them: zero2 in both layouts
// (flat: one bucket, reduce-scattered twice) and hsdp, whose all-reduces
// over the replicas run once per step (4 + the loss's).
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=zero2 mesh=2 grad-accum=2 grad-sync=microbatch format=json output=-" -o /dev/null | FileCheck %s --check-prefix=MOVED -DRS=8 -DAR=1
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=zero2 mesh=2 layout=flat grad-accum=2 grad-sync=microbatch format=json output=-" -o /dev/null | FileCheck %s --check-prefix=MOVED -DRS=2 -DAR=1
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=hsdp mesh=2x2 grad-accum=2 grad-sync=microbatch format=json output=-" -o /dev/null | FileCheck %s --check-prefix=MOVED -DRS=8 -DAR=5
// MOVED:      "all_reduce_count": [[AR]],
// MOVED:      "reduce_scatter_count": [[RS]]
// MOVED:      "grads_bytes": 424,

// Shards reduced in bf16 are summed in f32, converted at the micro-batch's
// end (after the next backward the reductions overlap).
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=zero3 mesh=2 param-dtype=bf16 reduce-dtype=bf16 grad-accum=2 grad-sync=microbatch" 2>/dev/null | FileCheck %s --check-prefix=BF16
// BF16:      %[[SUMS:.*]]:5 = train.microbatches 2({{.*}}) -> (tensor<f32>, tensor<8x8xf32>, tensor<8xf32>, tensor<2x16xf32>, tensor<2xf32>)
// BF16:      %[[RS:.*]] = dist.reduce_scatter_start %{{.*}} : tensor<4x16xbf16> -> !dist.token<tensor<2x16xbf16>>
// BF16-NEXT: dist.reduce_scatter_start
// BF16-NEXT: train.backward "layers.0"
// BF16:      %[[S:.*]] = dist.wait %[[RS]] : !dist.token<tensor<2x16xbf16>>
// BF16:      %[[F:.*]] = dist.convert %[[S]] : tensor<2x16xbf16> -> tensor<2x16xf32>
// BF16:      train.yield {{.*}}, %[[F]], %{{.*}} : tensor<f32>, tensor<8x8xf32>, tensor<8xf32>, tensor<2x16xf32>, tensor<2xf32>
// BF16:      train.adamw "layers.1.weight", %[[SUMS]]#3 : tensor<2x16xf32>

// Where it means nothing it is said, and ignored.
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=ddp mesh=2 grad-accum=2 grad-sync=microbatch" -o /dev/null 2>&1 | FileCheck %s --check-prefix=DDP
// DDP: warning: grad-sync=microbatch: ignored by strategy ddp, which holds whole gradients until the optimizer step (it applies to zero2, zero3 and hsdp)
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=zero1 mesh=2 grad-accum=2 grad-sync=microbatch" 2>&1 | FileCheck %s --check-prefix=ZERO1
// ZERO1: warning: grad-sync=microbatch: ignored by strategy zero1
// ZERO1: train.yield {{.*}} : tensor<16x8xf32>, tensor<16xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<f32>
// ZERO1: dist.reduce_scatter
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=zero3 mesh=2 grad-sync=microbatch" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ONE
// ONE: warning: grad-sync=microbatch: ignored without grad-accum > 1 (the step is one micro-batch)
// Over a shard axis of one rank (zero3 on one rank, hsdp Rx1) gradients
// stay whole; the ledger's figures are step's.
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=hsdp mesh=2x1 grad-accum=2 grad-sync=microbatch" -o /dev/null 2>&1 | FileCheck %s --check-prefix=AXIS1
// AXIS1: warning: grad-sync=microbatch: ignored over a shard axis of one rank (mesh=2x1): each gradient is whole there, with nothing to reduce-scatter
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=zero3 mesh=1 grad-accum=2 grad-sync=microbatch" -o /dev/null 2>&1 | FileCheck %s --check-prefix=RANK1
// RANK1: warning: grad-sync=microbatch: ignored over a shard axis of one rank (mesh=1)
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | shardc-opt --shardc-pipeline="strategy=hsdp mesh=1x2 grad-accum=2 grad-sync=microbatch" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SHARD2 --allow-empty
// SHARD2-NOT: warning
// RUN: shardc-gen mlp --sizes 8,16,4 --batch 8 | not shardc-opt --shardc-pipeline="strategy=zero3 mesh=2 grad-sync=always" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: grad-sync
