// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=4 reshard-last-unit=true" | FileCheck %s --check-prefix=ZERO3
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=fsdp mesh=4 reshard-last-unit=true" | FileCheck %s --check-prefix=ZERO3
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=2 reshard-after-forward=false" | FileCheck %s --check-prefix=KEEP
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=2" | FileCheck %s --check-prefix=KEEP
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=ddp mesh=2 param-dtype=bf16 reduce-dtype=f32 bucket-mb=0" | FileCheck %s --check-prefix=DDP
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=ddp mesh=2" | FileCheck %s --check-prefix=BUCKET
// Buckets of 1 MiB: the 512x512 f32 weights are 1 MiB each; in the order
// the backward produces them (layers.2 first), a bucket closes once it
// holds 1 MiB or more: [w2, b2, w1], [b1, w0], [b0].
// RUN: shardc-gen mlp --sizes 512,512,512,10 --batch 4 | shardc-opt --train-autodiff --shardc-shard="strategy=ddp mesh=2 bucket-mb=1" | FileCheck %s --check-prefix=BUCKETS
// A fraction of a MiB, as DDP's bucket_cap_mb: 0.01 MiB (10486 bytes)
// closes a bucket at w2's 20 KiB: [w2], [b2, w1], [b1, w0], [b0].
// RUN: shardc-gen mlp --sizes 512,512,512,10 --batch 4 | shardc-opt --train-autodiff --shardc-shard="strategy=ddp mesh=2 bucket-mb=0.01" | FileCheck %s --check-prefix=FRACTION
// FRACTION: dist.pack %{{.*}}#1 : tensor<10x512xf32> -> tensor<5120xf32>
// FRACTION: dist.pack %{{.*}}#2, %{{.*}}#1 : tensor<10xf32>, tensor<512x512xf32> -> tensor<262154xf32>
// FRACTION: dist.pack %{{.*}}#2, %{{.*}}#0 : tensor<512xf32>, tensor<512x512xf32> -> tensor<262656xf32>
// FRACTION: dist.pack %{{.*}}#1 : tensor<512xf32> -> tensor<512xf32>
// FRACTION-NOT: dist.pack
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero1 mesh=2" | FileCheck %s --check-prefix=ZERO1
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero2 mesh=2" | FileCheck %s --check-prefix=ZERO2
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=hsdp mesh=2x2" | FileCheck %s --check-prefix=HSDP
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=2 param-dtype=bf16 reduce-dtype=f32" | FileCheck %s --check-prefix=MIXED
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=2 grad-accum=2" | FileCheck %s --check-prefix=ACCUM
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=4 layout=flat" | FileCheck %s --check-prefix=FLAT
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=4 layout=flat unit-bucket-mb=1 reshard-last-unit=true" | FileCheck %s --check-prefix=MERGED
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=4 layout=flat unit-bucket-mb=1" | FileCheck %s --check-prefix=MERGED-KEPT
// In fractions of a MiB: the two units' flat params, padded over 4 ranks,
// take 96 bytes: 0.0001 MiB (105 bytes) holds both, 0.00005 (52) neither.
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=4 layout=flat unit-bucket-mb=0.0001" | FileCheck %s --check-prefix=MERGED-FRACTION
// MERGED-FRACTION: dist.adamw_flat "fc0+fc1"
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=4 layout=flat unit-bucket-mb=0.00005" | FileCheck %s --check-prefix=APART-FRACTION
// APART-FRACTION-DAG: dist.adamw_flat "fc0" ["fc0.weight", "fc0.bias"]
// APART-FRACTION-DAG: dist.adamw_flat "fc1" ["fc1.weight"]
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero1 mesh=2 layout=flat" | FileCheck %s --check-prefix=FLAT1
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero2 mesh=2 layout=flat bucket-mb=0" | FileCheck %s --check-prefix=FLAT2
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=ddp mesh=2 layout=flat bucket-mb=0" 2>&1 | FileCheck %s --check-prefix=DDP-FLAT
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero2 mesh=2 reshard-after-forward=false unit-bucket-mb=5" 2>&1 | FileCheck %s --check-prefix=UNUSED
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=2 bucket-mb=1" 2>&1 | FileCheck %s --check-prefix=UNUSED-BUCKET
// RUN: shardc-gen mlp --sizes 4,3 --batch 8 --dtype bf16 > %t.bf16.mlir
// RUN: shardc-opt %t.bf16.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BF16-MODEL
// RUN: shardc-opt %t.bf16.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=2 param-dtype=bf16" -o /dev/null 2>&1 | FileCheck %s --check-prefix=USED --allow-empty
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=2 layout=flat unit-bucket-mb=5 bucket-mb=25" 2>&1 | FileCheck %s --check-prefix=USED --allow-empty
// Collectives over one rank fold away: a unit reads its params' storage,
// the updates read the gradients, a DDP bucket is not packed; HSDP keeps
// the collectives of its axis of more than one rank. Each verifies.
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=1" | shardc-opt | FileCheck %s --check-prefix=ONE
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=1 layout=flat" | shardc-opt | FileCheck %s --check-prefix=ONE-FLAT
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=ddp mesh=1" | shardc-opt | FileCheck %s --check-prefix=ONE-DDP
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero2 mesh=1" | shardc-opt | FileCheck %s --check-prefix=ONE-ZERO2
// One rank in mixed precision: a bf16 gradient reduced in f32 becomes an
// f32 copy, and an f32 one reduced in bf16 a bf16 copy (dist.convert).
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=1 param-dtype=bf16" | shardc-opt | FileCheck %s --check-prefix=ONE-BF16
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=1 reduce-dtype=bf16" | shardc-opt | FileCheck %s --check-prefix=ONE-WIRE
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=hsdp mesh=2x1" | shardc-opt | FileCheck %s --check-prefix=HSDP-2X1
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=hsdp mesh=1x2" | shardc-opt | FileCheck %s --check-prefix=HSDP-1X2
// Every strategy's output verifies and parses back.
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=hsdp mesh=2x2 layout=flat grad-accum=2" | shardc-opt | FileCheck %s --check-prefix=ROUNDTRIP-FLAT
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero2 mesh=4 param-dtype=bf16 reduce-dtype=bf16" | shardc-opt | FileCheck %s --check-prefix=ROUNDTRIP

// Two units; fc0.weight has 3 rows (uneven over 2 and 4 ranks), fc1.weight
// 2 rows (empty shards over 4 ranks). The first unit's input is data, so its
// backward reads no param.

// ONE:        %[[W0:.*]] = train.param "fc0.weight" of unit "fc0" {{.*}} of tensor<3x4xf32> : tensor<3x4xf32>
// ONE:        train.unit "fc0"(%{{.*}}, %[[W0]],
// ONE:        train.adamw "fc0.weight", %
// ONE-NOT:    dist.all_gather
// ONE-NOT:    dist.reduce_scatter
// ONE-NOT:    dist.all_reduce
// ONE-NOT:    dist.free %[[W0]]
// ONE-FLAT:   %[[F:.*]] = dist.flat_param "fc0"
// ONE-FLAT:   dist.unpack %[[F]]
// ONE-FLAT:   dist.adamw_flat "fc0"
// ONE-FLAT-NOT: dist.all_gather
// ONE-FLAT-NOT: dist.free %[[F]]
// ONE-DDP-NOT:  dist.pack
// ONE-DDP-NOT:  dist.all_reduce
// ONE-DDP:      train.adamw "fc0.weight"
// ONE-ZERO2:    %[[U:.*]] = dist.adamw_shard "fc0.weight"
// ONE-ZERO2-NEXT: dist.set_param "fc0.weight", %[[U]]
// ONE-ZERO2-NOT: dist.all_gather
// ONE-BF16:     %[[G:.*]] = dist.convert %{{.*}} : tensor<3x4xbf16> -> tensor<3x4xf32>
// ONE-BF16:     train.adamw "fc0.weight", %[[G]] : tensor<3x4xf32>
// ONE-BF16-NOT: dist.reduce_scatter
// ONE-WIRE:     %[[G:.*]] = dist.convert %{{.*}} : tensor<3x4xf32> -> tensor<3x4xbf16>
// ONE-WIRE-NOT: dist.reduce_scatter
// HSDP-2X1-NOT: dist.all_gather
// HSDP-2X1:     dist.all_reduce %{{.*}} on @mesh ["replicate"] avg
// HSDP-2X1-NOT: dist.reduce_scatter
// HSDP-1X2:     dist.all_gather %{{.*}} on @mesh ["shard"]
// HSDP-1X2:     dist.reduce_scatter %{{.*}} on @mesh ["shard"]
// HSDP-1X2-NOT: dist.all_reduce %{{.*}} on @mesh ["replicate"]

// ZERO3:      dist.mesh @mesh axes ["shard"] shape [4]
// ZERO3:      train.model @mlp batch 8 split 4
// The batch of 8 is 2 examples per rank.
// ZERO3:      train.input "x" : tensor<2x4xf32>
// ZERO3:      train.input "y" : tensor<2xi32>
// 3 rows over 4 ranks: shards of ceil(3/4) = 1 row.
// ZERO3:      %[[W0:.*]] = train.param "fc0.weight" of unit "fc0" {{.*}} sharded(#dist.shard<layout = dim0, mesh = @mesh, axes = ["shard"]>) of tensor<3x4xf32> : tensor<1x4xf32>
// ZERO3:      %[[B0:.*]] = train.param "fc0.bias" of unit "fc0" {{.*}} of tensor<3xf32> : tensor<1xf32>
// ZERO3:      %[[G0W:.*]] = dist.all_gather %[[W0]] on @mesh ["shard"] dim0 : tensor<1x4xf32> -> tensor<3x4xf32>
// ZERO3:      %[[G0B:.*]] = dist.all_gather %[[B0]] on @mesh ["shard"] dim0 : tensor<1xf32> -> tensor<3xf32>
// ZERO3:      %[[H0:.*]]:2 = train.unit "fc0"(%{{.*}}, %[[G0W]], %[[G0B]])
// ZERO3:      dist.free %[[G0B]]
// ZERO3:      dist.free %[[G0W]]
// 2 rows over 4 ranks: shards of 1 row, the last two ranks' empty.
// ZERO3:      %[[W1:.*]] = train.param "fc1.weight" of unit "fc1" {{.*}} of tensor<2x3xf32> : tensor<1x3xf32>
// ZERO3:      %[[G1:.*]] = dist.all_gather %[[W1]] on @mesh ["shard"] dim0 : tensor<1x3xf32> -> tensor<2x3xf32>
// ZERO3:      train.unit "fc1"(%[[H0]]#0, %[[G1]])
// ZERO3:      dist.free %[[G1]]
// With reshard-last-unit=true, gathered again for the backward, freed after
// it.
// ZERO3:      %[[G1B:.*]] = dist.all_gather %[[W1]] on @mesh ["shard"] dim0
// ZERO3:      %[[BW1:.*]]:2 = train.backward "fc1"(%{{.*}}, %[[H0]]#0, %[[G1B]]) params ["fc1.weight"]
// ZERO3-NOT:  train.param_ref
// ZERO3:      %[[RS1:.*]] = dist.reduce_scatter %[[BW1]]#1 on @mesh ["shard"] avg dim0 : tensor<2x3xf32> -> tensor<1x3xf32>
// ZERO3-NEXT: dist.free %[[BW1]]#1
// ZERO3-NEXT: dist.free %[[G1B]]
// ZERO3:      %[[BW0:.*]]:2 = train.backward "fc0"
// ZERO3:      %[[RS0W:.*]] = dist.reduce_scatter %[[BW0]]#0 on @mesh ["shard"] avg dim0 : tensor<3x4xf32> -> tensor<1x4xf32>
// ZERO3:      %[[RS0B:.*]] = dist.reduce_scatter %[[BW0]]#1
// The optimizer updates shards in place.
// ZERO3:      train.adamw "fc0.weight", %[[RS0W]] : tensor<1x4xf32>
// ZERO3:      train.adamw "fc0.bias", %[[RS0B]] : tensor<1xf32>
// ZERO3:      train.adamw "fc1.weight", %[[RS1]] : tensor<1x3xf32>
// The loss is averaged over ranks.
// ZERO3:      %[[LOSS:.*]] = dist.all_reduce %{{.*}} on @mesh ["shard"] avg : tensor<f32> -> tensor<f32>
// ZERO3-NEXT: train.return %[[LOSS]]

// reshard-after-forward=false: the forward's gather serves the backward. So
// it does by default for the last unit, fc1, whose backward follows at once
// (fc0's backward reads no param).
// KEEP:       %[[G1:.*]] = dist.all_gather %{{.*}} on @mesh ["shard"] dim0 : tensor<1x3xf32> -> tensor<2x3xf32>
// KEEP:       train.unit "fc1"(%{{.*}}, %[[G1]])
// KEEP-NOT:   dist.all_gather
// KEEP:       train.backward "fc1"(%{{.*}}, %{{.*}}, %[[G1]])
// KEEP:       dist.free %[[G1]]
// KEEP-NOT:   dist.all_gather

// DDP in bf16: whole bf16 params, gradients all-reduced in f32 as backward
// produces them.
// DDP:        train.input "x" : tensor<4x4xbf16>
// DDP:        train.param "fc0.weight" of unit "fc0" {{.*}} : tensor<3x4xbf16>
// DDP-NOT:    dist.all_gather
// DDP:        %[[BW1:.*]]:2 = train.backward "fc1"
// DDP:        %[[AR1:.*]] = dist.all_reduce %[[BW1]]#1 on @mesh ["shard"] avg wire f32 : tensor<2x3xbf16> -> tensor<2x3xf32>
// DDP-NEXT:   train.backward "fc0"
// DDP:        train.adamw "fc1.weight", %[[AR1]] : tensor<2x3xf32>

// One 25 MiB bucket holds all three gradients, in the order the backward
// produced them, reduced once the last exists.
// BUCKET:      %[[BW1:.*]]:2 = train.backward "fc1"
// BUCKET:      %[[BW0:.*]]:2 = train.backward "fc0"
// BUCKET:      train.yield
// BUCKET-NEXT: }
// BUCKET-NEXT: %[[P:.*]] = dist.pack %[[BW1]]#1, %[[BW0]]#0, %[[BW0]]#1 : tensor<2x3xf32>, tensor<3x4xf32>, tensor<3xf32> -> tensor<21xf32>
// BUCKET-NEXT: %[[R:.*]] = dist.all_reduce %[[P]] on @mesh ["shard"] avg : tensor<21xf32> -> tensor<21xf32>
// BUCKET-NEXT: %[[U:.*]]:3 = dist.unpack %[[R]] : tensor<21xf32> -> tensor<2x3xf32>, tensor<3x4xf32>, tensor<3xf32>
// BUCKET-NEXT: train.adamw "fc0.weight", %[[U]]#1
// BUCKET-NEXT: train.adamw "fc0.bias", %[[U]]#2
// BUCKET-NEXT: train.adamw "fc1.weight", %[[U]]#0

// BUCKETS:     %[[B2:.*]]:3 = train.backward "layers.2"
// BUCKETS:     %[[B1:.*]]:3 = train.backward "layers.1"
// BUCKETS:     train.yield
// BUCKETS-NEXT: }
// BUCKETS-NEXT: dist.pack %[[B2]]#1, %[[B2]]#2, %[[B1]]#1 : tensor<10x512xf32>, tensor<10xf32>, tensor<512x512xf32> -> tensor<267274xf32>
// BUCKETS:     %[[B0:.*]]:2 = train.backward "layers.0"
// BUCKETS:     train.yield
// BUCKETS-NEXT: }
// BUCKETS-NEXT: dist.pack %[[B1]]#2, %[[B0]]#0 : tensor<512xf32>, tensor<512x512xf32> -> tensor<262656xf32>
// BUCKETS:     dist.pack %[[B0]]#1 : tensor<512xf32> -> tensor<512xf32>
// BUCKETS:     dist.unpack
// BUCKETS-NOT: dist.pack

// ZeRO-1: whole gradients until after the backward, then reduce-scatter,
// update the shard, gather it back.
// ZERO1-NOT:  dist.all_gather
// ZERO1:      train.backward "fc0"
// ZERO1:      train.yield
// ZERO1-NEXT: }
// ZERO1-NEXT: %[[R0:.*]] = dist.reduce_scatter %{{.*}}#0 on @mesh ["shard"] avg dim0 : tensor<3x4xf32> -> tensor<2x4xf32>
// ZERO1-NEXT: %[[R1:.*]] = dist.reduce_scatter
// ZERO1-NEXT: %[[R2:.*]] = dist.reduce_scatter
// ZERO1-NEXT: %[[U0:.*]] = dist.adamw_shard "fc0.weight", %[[R0]] on @mesh ["shard"] : tensor<2x4xf32> -> tensor<2x4xf32>
// ZERO1-NEXT: %[[A0:.*]] = dist.all_gather %[[U0]] on @mesh ["shard"] dim0 : tensor<2x4xf32> -> tensor<3x4xf32>
// ZERO1-NEXT: dist.set_param "fc0.weight", %[[A0]] : tensor<3x4xf32>
// ZERO1-NOT:  train.adamw

// ZeRO-2: reduce-scatter as each gradient appears, free it at once.
// ZERO2:      %[[BW1:.*]]:2 = train.backward "fc1"
// ZERO2:      train.yield
// ZERO2-NEXT: }
// ZERO2-NEXT: %[[R:.*]] = dist.reduce_scatter %[[BW1]]#1
// ZERO2-NEXT: dist.free %[[BW1]]#1
// ZERO2-NEXT: train.backward "fc0"
// ZERO2:      dist.adamw_shard "fc1.weight", %[[R]]

// Hybrid sharding is zero3 over the shard axis, then an all-reduce of the shard over the
// replicate axis.
// HSDP:       dist.mesh @mesh axes ["replicate", "shard"] shape [2, 2]
// HSDP:       train.model @mlp batch 8 split 4
// HSDP:       train.param "fc0.weight" {{.*}} of tensor<3x4xf32> : tensor<2x4xf32>
// HSDP:       %[[R:.*]] = dist.reduce_scatter %{{.*}}#1 on @mesh ["shard"] avg dim0 : tensor<2x3xf32> -> tensor<1x3xf32>
// HSDP-NEXT:  %[[A:.*]] = dist.all_reduce %[[R]] on @mesh ["replicate"] avg : tensor<1x3xf32> -> tensor<1x3xf32>
// HSDP:       train.adamw "fc1.weight", %[[A]]
// HSDP:       dist.all_reduce %{{.*}} on @mesh ["replicate", "shard"] avg : tensor<f32> -> tensor<f32>

// FSDP2's mixed precision: bf16 shards gathered and computed in bf16,
// gradients reduce-scattered in f32.
// MIXED:      train.param "fc0.weight" {{.*}} of tensor<3x4xbf16> : tensor<2x4xbf16>
// MIXED:      dist.all_gather %{{.*}} : tensor<2x4xbf16> -> tensor<3x4xbf16>
// MIXED:      dist.reduce_scatter %{{.*}} on @mesh ["shard"] avg dim0 wire f32 : tensor<3x4xbf16> -> tensor<2x4xf32>
// MIXED:      train.adamw "fc0.weight", %{{.*}} : tensor<2x4xf32>

// grad-accum=2: the forward and backward run per micro-batch of 2 of the
// rank's 4 examples, each loss counting 1/2; the gradients are reduced
// once, after the loop.
// ACCUM:      %[[X:.*]] = train.input "x" : tensor<4x4xf32>
// ACCUM:      %[[Y:.*]] = train.input "y" : tensor<4xi32>
// ACCUM:      %[[ACC:.*]]:4 = train.microbatches 2(%[[X]], %[[Y]]) : (tensor<4x4xf32>, tensor<4xi32>) -> (tensor<3x4xf32>, tensor<3xf32>, tensor<2x3xf32>, tensor<f32>) {
// ACCUM-NEXT: ^bb0(%[[XM:.*]]: tensor<2x4xf32>, %[[YM:.*]]: tensor<2xi32>):
// ACCUM:        dist.all_gather
// ACCUM:        %[[L:.*]] = train.cross_entropy %{{.*}}, %[[YM]]
// ACCUM:        %[[SEED:.*]] = arith.constant dense<5.000000e-01> : tensor<f32>
// ACCUM-NEXT:   train.cross_entropy_grad %[[SEED]]
// ACCUM-NOT:    dist.reduce_scatter
// ACCUM:        %[[LS:.*]] = train.scale %[[L]] by 5.000000e-01
// ACCUM-NEXT:   train.yield %{{.*}}, %{{.*}}, %{{.*}}, %[[LS]]
// ACCUM:      dist.reduce_scatter %[[ACC]]#0 on @mesh ["shard"] avg dim0 : tensor<3x4xf32> -> tensor<2x4xf32>
// ACCUM:      dist.all_reduce %[[ACC]]#3

// FSDP1: a flat parameter per unit. fc0's 12 + 3 elements over 4 ranks are
// pieces of 4 (16 with padding); the members keep their full type, unread.
// FLAT:      %[[F0:.*]] = dist.flat_param "fc0" ["fc0.weight", "fc0.bias"] on @mesh ["shard"] : tensor<4xf32>
// FLAT:      train.param "fc0.weight" of unit "fc0" {{.*}} sharded(#dist.shard<layout = flat, mesh = @mesh, axes = ["shard"]>) of tensor<3x4xf32> : tensor<3x4xf32>
// FLAT:      %[[G0:.*]] = dist.all_gather %[[F0]] on @mesh ["shard"] flat : tensor<4xf32> -> tensor<16xf32>
// FLAT-NEXT: %[[V0:.*]]:2 = dist.unpack %[[G0]] : tensor<16xf32> -> tensor<3x4xf32>, tensor<3xf32>
// FLAT-NEXT: train.unit "fc0"(%{{.*}}, %[[V0]]#0, %[[V0]]#1)
// FLAT:      dist.free %[[G0]] : tensor<16xf32>
// FLAT:      %[[F1:.*]] = dist.flat_param "fc1" ["fc1.weight"] on @mesh ["shard"] : tensor<2xf32>
// fc1's backward reads its weight: gathered again.
// FLAT:      %[[G1:.*]] = dist.all_gather %[[F1]] on @mesh ["shard"] flat : tensor<2xf32> -> tensor<8xf32>
// FLAT:      %[[BW1:.*]]:2 = train.backward "fc1"
// FLAT:      %[[P1:.*]] = dist.pack %[[BW1]]#1 : tensor<2x3xf32> -> tensor<8xf32>
// FLAT-NEXT: %[[RS1:.*]] = dist.reduce_scatter %[[P1]] on @mesh ["shard"] avg flat : tensor<8xf32> -> tensor<2xf32>
// FLAT-NEXT: dist.free %[[P1]]
// FLAT:      %[[BW0:.*]]:2 = train.backward "fc0"
// FLAT:      %[[P0:.*]] = dist.pack %[[BW0]]#0, %[[BW0]]#1 : tensor<3x4xf32>, tensor<3xf32> -> tensor<16xf32>
// FLAT-NEXT: %[[RS0:.*]] = dist.reduce_scatter %[[P0]] on @mesh ["shard"] avg flat : tensor<16xf32> -> tensor<4xf32>
// FLAT:      dist.adamw_flat "fc0" ["fc0.weight", "fc0.bias"], %[[RS0]] on @mesh ["shard"] : tensor<4xf32>
// FLAT-NEXT: dist.adamw_flat "fc1" ["fc1.weight"], %[[RS1]] on @mesh ["shard"] : tensor<2xf32>
// FLAT-NOT:  train.adamw

// Small units bucketed: fc0 and fc1 (21 elements) share one flat parameter,
// gathered once before fc0's forward and (with reshard-last-unit=true)
// freed after fc1's, gathered once around the backwards (only fc1's reads
// it), reduce-scattered once.
// MERGED:      %[[F:.*]] = dist.flat_param "fc0+fc1" ["fc0.weight", "fc0.bias", "fc1.weight"] on @mesh ["shard"] : tensor<6xf32>
// MERGED:      %[[G:.*]] = dist.all_gather %[[F]] on @mesh ["shard"] flat : tensor<6xf32> -> tensor<24xf32>
// MERGED-NEXT: %[[V:.*]]:3 = dist.unpack %[[G]]
// MERGED-NEXT: train.unit "fc0"(%{{.*}}, %[[V]]#0, %[[V]]#1)
// MERGED:      train.unit "fc1"(%{{.*}}, %[[V]]#2)
// MERGED:      dist.free %[[G]]
// MERGED:      %[[GB:.*]] = dist.all_gather %[[F]]
// MERGED:      train.backward "fc1"
// MERGED:      dist.free %[[GB]]
// MERGED:      %[[BW0:.*]]:2 = train.backward "fc0"
// MERGED:      dist.pack %[[BW0]]#0, %[[BW0]]#1, %{{.*}} : tensor<3x4xf32>, tensor<3xf32>, tensor<2x3xf32> -> tensor<24xf32>
// MERGED-NEXT: dist.reduce_scatter
// MERGED:      dist.adamw_flat "fc0+fc1" ["fc0.weight", "fc0.bias", "fc1.weight"]
// MERGED-NOT:  dist.all_gather
// By default the group, which holds the last unit, keeps its gather for the
// backwards.
// MERGED-KEPT:     %[[G:.*]] = dist.all_gather %{{.*}} on @mesh ["shard"] flat : tensor<6xf32> -> tensor<24xf32>
// MERGED-KEPT:     train.unit "fc1"
// MERGED-KEPT-NOT: dist.all_gather
// MERGED-KEPT-NOT: dist.free %[[G]]
// MERGED-KEPT:     train.backward "fc1"
// MERGED-KEPT:     dist.free %[[G]]
// MERGED-KEPT-NOT: dist.all_gather

// ZeRO-1 with flat pieces (DeepSpeed's layout): whole params; after the
// backward the gradients, in the order the backward produced them, fill a
// 25 MiB bucket: packed, reduce-scattered once, the piece updated, gathered,
// unpacked and written back.
// FLAT1:      train.param "fc0.weight" of unit "fc0" init({{.*}}) : tensor<3x4xf32>
// FLAT1-NOT:  dist.flat_param
// FLAT1:      %[[BW1:.*]]:2 = train.backward "fc1"
// FLAT1:      %[[BW0:.*]]:2 = train.backward "fc0"
// FLAT1:      %[[P:.*]] = dist.pack %[[BW1]]#1, %[[BW0]]#0, %[[BW0]]#1 : tensor<2x3xf32>, tensor<3x4xf32>, tensor<3xf32> -> tensor<22xf32>
// FLAT1-NEXT: %[[RS:.*]] = dist.reduce_scatter %[[P]] on @mesh ["shard"] avg flat : tensor<22xf32> -> tensor<11xf32>
// FLAT1:      %[[U:.*]] = dist.adamw_flat "bucket0" ["fc1.weight", "fc0.weight", "fc0.bias"], %[[RS]] on @mesh ["shard"] : tensor<11xf32> -> tensor<11xf32>
// FLAT1-NEXT: %[[W:.*]] = dist.all_gather %[[U]] on @mesh ["shard"] flat : tensor<11xf32> -> tensor<22xf32>
// FLAT1-NEXT: %[[V:.*]]:3 = dist.unpack %[[W]] : tensor<22xf32> -> tensor<2x3xf32>, tensor<3x4xf32>, tensor<3xf32>
// FLAT1-NEXT: dist.set_param "fc1.weight", %[[V]]#0
// FLAT1-NEXT: dist.set_param "fc0.weight", %[[V]]#1
// FLAT1-NEXT: dist.set_param "fc0.bias", %[[V]]#2

// ZeRO-2 with bucket-mb=0: a bucket per gradient, each reduce-scattered as
// soon as the backward produces it.
// FLAT2:      %[[BW1:.*]]:2 = train.backward "fc1"
// FLAT2:      dist.pack %[[BW1]]#1 : tensor<2x3xf32> -> tensor<6xf32>
// FLAT2-NEXT: dist.reduce_scatter
// FLAT2:      %[[BW0:.*]]:2 = train.backward "fc0"
// FLAT2:      dist.pack %[[BW0]]#0 : tensor<3x4xf32> -> tensor<12xf32>
// FLAT2:      dist.pack %[[BW0]]#1 : tensor<3xf32> -> tensor<4xf32>
// FLAT2:      dist.adamw_flat "bucket1" ["fc0.weight"]

// DDP shards nothing: the layout changes nothing, and a warning says so.
// DDP-FLAT:     warning: layout=flat: ignored by strategy ddp, which shards nothing
// DDP-FLAT-NOT: flat
// DDP-FLAT:     train.adamw "fc0.weight"

// Other options a strategy does not use: a warning each, not silence.
// UNUSED-DAG: warning: reshard-after-forward=false: ignored by strategy zero2, which does not gather params (it applies to zero3 and hsdp)
// UNUSED-DAG: warning: unit-bucket-mb: ignored by strategy zero2 with layout=dim0 (it applies to zero3 and hsdp with layout=flat)
// UNUSED-BUCKET: warning: bucket-mb: ignored by strategy zero3 with layout=dim0 (it applies to ddp, and zero1/zero2 with layout=flat)
// A model written in bf16 that param-dtype=f32 (the default) retypes.
// BF16-MODEL: warning: param-dtype=f32 stores the model's bf16 params in f32; param-dtype=bf16 keeps them in bf16 (with f32 masters in the optimizer)
// Options that apply (or keep their default) are not warned of.
// USED-NOT: warning

// ROUNDTRIP-FLAT: dist.flat_param "fc0" ["fc0.weight", "fc0.bias"] on @mesh ["shard"] : tensor<8xf32>
// ROUNDTRIP-FLAT: train.microbatches 2
// ROUNDTRIP-FLAT: dist.all_reduce %{{.*}} on @mesh ["replicate"] avg : tensor<8xf32> -> tensor<8xf32>
// ROUNDTRIP-FLAT: dist.adamw_flat "fc0"

// ROUNDTRIP:  dist.adamw_shard "fc0.weight", %{{.*}} : tensor<1x4xbf16> -> tensor<1x4xbf16>
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
