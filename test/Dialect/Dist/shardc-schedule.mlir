// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=2" --shardc-schedule | FileCheck %s
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=2" --shardc-schedule="prefetch=0" | FileCheck %s --check-prefix=NOPREFETCH
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=ddp mesh=2 bucket-mb=0" --shardc-schedule | FileCheck %s --check-prefix=DDP
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=hsdp mesh=2x2" --shardc-schedule | shardc-opt | FileCheck %s --check-prefix=HSDP
// RUN: shardc-gen mlp --sizes 512,512,512,10 --batch 4 | shardc-opt --train-autodiff --shardc-shard="strategy=ddp mesh=2 bucket-mb=1" --shardc-schedule | FileCheck %s --check-prefix=BUCKETS
// RUN: shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=2 param-dtype=bf16" --shardc-schedule | FileCheck %s --check-prefix=STAGED
// A reduction whose result nothing reads completes before the step returns.
// RUN: shardc-opt %S/Inputs/unused-reduction.mlir --shardc-schedule | FileCheck %s --check-prefix=UNUSED-REDUCTION
// UNUSED-REDUCTION-LABEL: train.model @m
// UNUSED-REDUCTION: %[[T:.+]] = dist.all_reduce_start %{{.+}} on @mesh ["shard"] avg
// UNUSED-REDUCTION-NEXT: %{{.+}} = dist.wait %[[T]]
// UNUSED-REDUCTION-NEXT: train.return

// Params first; fc1's forward gather starts before fc0 runs (prefetch 1)
// and is waited on right before fc1.
// CHECK:      %[[W0:.*]] = train.param "fc0.weight"
// CHECK-NEXT: %[[B0:.*]] = train.param "fc0.bias"
// CHECK-NEXT: %[[W1:.*]] = train.param "fc1.weight"
// CHECK:      %[[T0:.*]] = dist.all_gather_start %[[W0]] on @mesh ["shard"] dim0 : tensor<2x4xf32> -> !dist.token<tensor<3x4xf32>>
// CHECK-NEXT: %[[T1:.*]] = dist.all_gather_start %[[B0]]
// CHECK-NEXT: %[[G0:.*]] = dist.wait %[[T0]] : !dist.token<tensor<3x4xf32>>
// CHECK-NEXT: %[[G1:.*]] = dist.wait %[[T1]]
// CHECK-NEXT: %[[T2:.*]] = dist.all_gather_start %[[W1]]
// CHECK-NEXT: %[[H0:.*]]:2 = train.unit "fc0"(%{{.*}}, %[[G0]], %[[G1]])
// Freed right after their last use.
// CHECK:      dist.free %[[G0]]
// CHECK-NEXT: dist.free %[[G1]]
// CHECK-NEXT: %[[G2:.*]] = dist.wait %[[T2]]
// CHECK-NEXT: train.unit "fc1"(%[[H0]]#0, %[[G2]])
// fc1, the last unit, keeps its gather for its backward, which frees it.
// CHECK-NOT:  dist.free %[[G2]]
// CHECK:      %[[BW1:.*]]:2 = train.backward "fc1"(%{{.*}}, %{{.*}}, %[[G2]])
// CHECK:      dist.free %[[G2]]
// The gradient's reduce-scatter overlaps fc0's backward; its input is freed
// once the collective is done with it.
// CHECK:      %[[RS:.*]] = dist.reduce_scatter_start %[[BW1]]#1 on @mesh ["shard"] avg dim0 : tensor<2x3xf32> -> !dist.token<tensor<1x3xf32>>
// CHECK-NEXT: train.backward "fc0"
// CHECK:      train.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[R:.*]] = dist.wait %[[RS]]
// CHECK-NEXT: dist.free %[[BW1]]#1
// CHECK:      train.adamw "fc1.weight", %[[R]]
// CHECK-NOT:  dist.all_gather {{.*}}:
// CHECK-NOT:  dist.reduce_scatter {{.*}}:

// A collective that sends a staged copy (here the bf16 gradient cast to the
// f32 wire) no longer reads its input once started: freed right there, as
// FSDP2 frees the unsharded gradient once copied.
// STAGED:      %[[BW1:.*]]:2 = train.backward "fc1"
// STAGED:      %[[RS:.*]] = dist.reduce_scatter_start %[[BW1]]#1 on @mesh ["shard"] avg dim0 wire f32 : tensor<2x3xbf16> -> !dist.token<tensor<1x3xf32>>
// STAGED-NEXT: dist.free %[[BW1]]#1
// STAGED-NEXT: train.backward "fc0"

// NOPREFETCH:      %[[H0:.*]]:2 = train.unit "fc0"
// NOPREFETCH:      %[[T:.*]] = dist.all_gather_start
// NOPREFETCH-NEXT: %[[G:.*]] = dist.wait %[[T]]
// NOPREFETCH-NEXT: train.unit "fc1"(%[[H0]]#0, %[[G]])

// DDP-NOT:    dist.all_gather
// DDP:        %[[BW1:.*]]:2 = train.backward "fc1"
// DDP:        %[[AR:.*]] = dist.all_reduce_start %[[BW1]]#1
// DDP-NEXT:   train.backward "fc0"
// DDP:        dist.wait %[[AR]]

// hsdp: fc1's reduce-scatter overlaps fc0's backward; its all-reduce over
// the replicas starts once it is done (after fc0's backward), and is waited
// on before the update.
// HSDP:       %[[RS:.*]] = dist.reduce_scatter_start %{{.*}} on @mesh ["shard"]
// HSDP-NEXT:  train.backward "fc0"
// HSDP:       %[[S:.*]] = dist.wait %[[RS]]
// HSDP:       %[[AR:.*]] = dist.all_reduce_start %[[S]] on @mesh ["replicate"] avg
// HSDP:       %[[R:.*]] = dist.wait %[[AR]]
// HSDP-NEXT:  train.adamw "fc1.weight", %[[R]]

// ddp's buckets: a bucket's all-reduce overlaps the next backward, its
// views (dist.unpack) made where the updates read them.
// BUCKETS:      %[[P:.*]] = dist.pack
// BUCKETS-NEXT: %[[T:.*]] = dist.all_reduce_start %[[P]] on @mesh ["shard"] avg
// BUCKETS-NEXT: train.backward "layers.0"
// BUCKETS:      %[[R:.*]] = dist.wait %[[T]]
// BUCKETS-NOT:  dist.unpack %[[R]]
// BUCKETS:      train.adamw "layers.0.weight"
// BUCKETS:      %[[V:.*]]:3 = dist.unpack %[[R]]
// BUCKETS-NEXT: train.adamw "layers.1.weight", %[[V]]#2

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
