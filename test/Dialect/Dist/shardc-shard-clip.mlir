// #train.adamw's max_grad_norm: --shardc-shard sums the squares of the
// gradients the updates take, all-reduces the sum over the ranks holding
// distinct pieces (none under DDP, the shard axis only under HSDP), and
// every update takes the one clip coefficient.
// RUN: shardc-gen mlp --sizes 8,16,10 --batch 8 --max-grad-norm 1 | shardc-opt --train-autodiff --shardc-shard="strategy=ddp mesh=2" | FileCheck %s --check-prefix=DDP
// RUN: shardc-gen mlp --sizes 8,16,10 --batch 8 --max-grad-norm 1 | shardc-opt --train-autodiff --shardc-shard="strategy=zero2 mesh=4" | FileCheck %s --check-prefix=ZERO2
// RUN: shardc-gen mlp --sizes 8,16,10 --batch 8 --max-grad-norm 1 | shardc-opt --train-autodiff --shardc-shard="strategy=zero3 mesh=2 layout=flat" | FileCheck %s --check-prefix=FLAT
// RUN: shardc-gen mlp --sizes 8,16,10 --batch 8 --max-grad-norm 1 | shardc-opt --train-autodiff --shardc-shard="strategy=hsdp mesh=2x2" | FileCheck %s --check-prefix=HSDP
// RUN: shardc-gen mlp --sizes 8,16,10 --batch 8 --max-grad-norm 1 | shardc-opt --train-autodiff --shardc-shard="strategy=hsdp mesh=2x2 layout=flat" | FileCheck %s --check-prefix=HSDP-FLAT
// RUN: shardc-gen mlp --sizes 8,16,10 --batch 8 --max-grad-norm 1 | shardc-opt --train-autodiff --shardc-shard="strategy=zero1 mesh=1" | FileCheck %s --check-prefix=ONE
// RUN: shardc-gen mlp --sizes 8,16,10 --batch 8 --max-grad-norm 0.5 | shardc-opt --train-autodiff --shardc-shard="strategy=zero3 mesh=2" --shardc-schedule | FileCheck %s --check-prefix=SCHEDULED
// RUN: shardc-gen mlp --sizes 8,16,10 --batch 8 --max-grad-norm 0.5 | shardc-opt --train-autodiff --shardc-shard="strategy=zero3 mesh=2" --shardc-schedule --shardc-ledger="format=json output=-" -o /dev/null | FileCheck %s --check-prefix=LEDGER
// RUN: shardc-gen mlp --sizes 8,16,10 --batch 8 | shardc-opt --train-autodiff --shardc-shard="strategy=zero3 mesh=2" | FileCheck %s --check-prefix=OFF
// RUN: shardc-gen mlp --sizes 8,16,10 --batch 8 --max-grad-norm 1 | shardc-opt --train-autodiff --shardc-shard="strategy=zero1 mesh=2 layout=flat bucket-mb=0" | FileCheck %s --check-prefix=MOVED

// DDP's gradients are whole on every rank: no sum crosses ranks.
// DDP: %[[R:.*]] = dist.all_reduce %{{.*}} avg : tensor<314xf32>
// DDP: %[[G:.*]]:4 = dist.unpack %[[R]]
// DDP: %[[S:.*]] = dist.sum_squares %[[G]]#2, %[[G]]#3, %[[G]]#0, %[[G]]#1 : tensor<16x8xf32>, tensor<16xf32>, tensor<10x16xf32>, tensor<10xf32>
// DDP-NOT: sum :
// DDP: %[[C:.*]] = dist.clip_coefficient %[[S]] max_norm 1.000000e+00
// DDP-COUNT-4: train.adamw "{{.*}}", %[[G]]#{{[0-3]}} clip %[[C]] :

// ZERO2: %[[S:.*]] = dist.sum_squares %{{.*}} : tensor<4x8xf32>, tensor<4xf32>, tensor<3x16xf32>, tensor<3xf32>
// ZERO2: %[[A:.*]] = dist.all_reduce %[[S]] on @mesh ["shard"]  sum : tensor<f32> -> tensor<f32>
// ZERO2: %[[C:.*]] = dist.clip_coefficient %[[A]] max_norm
// ZERO2-COUNT-4: dist.adamw_shard "{{.*}}", %{{.*}} clip %[[C]] on @mesh ["shard"]

// FLAT: %[[S:.*]] = dist.sum_squares %{{.*}}, %{{.*}} : tensor<72xf32>, tensor<85xf32>
// FLAT: %[[A:.*]] = dist.all_reduce %[[S]] on @mesh ["shard"]  sum
// FLAT: %[[C:.*]] = dist.clip_coefficient %[[A]]
// FLAT: dist.adamw_flat "layers.0" ["layers.0.weight", "layers.0.bias"], %{{.*}} clip %[[C]] on @mesh ["shard"]
// FLAT: dist.adamw_flat "layers.1" ["layers.1.weight", "layers.1.bias"], %{{.*}} clip %[[C]] on @mesh ["shard"]

// HSDP's replicas hold the same shards: the sum crosses the shard axis only.
// HSDP: %[[S:.*]] = dist.sum_squares
// HSDP: %[[A:.*]] = dist.all_reduce %[[S]] on @mesh ["shard"]  sum
// HSDP: %[[C:.*]] = dist.clip_coefficient %[[A]]
// HSDP-COUNT-4: train.adamw "{{.*}}", %{{.*}} clip %[[C]] :

// HSDP-FLAT: %[[R0:.*]] = dist.all_reduce %{{.*}} on @mesh ["replicate"]  avg : tensor<85xf32>
// HSDP-FLAT: %[[R1:.*]] = dist.all_reduce %{{.*}} on @mesh ["replicate"]  avg : tensor<72xf32>
// HSDP-FLAT-NEXT: %[[S:.*]] = dist.sum_squares %[[R1]], %[[R0]]
// HSDP-FLAT-NEXT: %[[A:.*]] = dist.all_reduce %[[S]] on @mesh ["shard"]  sum
// HSDP-FLAT-NEXT: %[[C:.*]] = dist.clip_coefficient %[[A]]
// HSDP-FLAT-COUNT-2: dist.adamw_flat {{.*}} clip %[[C]] on @mesh ["shard"]

// A group of one rank sums nothing across ranks: the all-reduce folds.
// ONE: %[[S:.*]] = dist.sum_squares
// ONE-NEXT: %[[C:.*]] = dist.clip_coefficient %[[S]]
// ONE-COUNT-4: dist.adamw_shard "{{.*}}", %{{.*}} clip %[[C]]

// The norm's all-reduce is asynchronous too, and the ledger counts its 4
// bytes per step beside the loss's.
// SCHEDULED: %[[S:.*]] = dist.sum_squares
// SCHEDULED-NEXT: %[[T:.*]] = dist.all_reduce_start %[[S]] on @mesh ["shard"]  sum
// SCHEDULED-NEXT: %[[W:.*]] = dist.wait %[[T]]
// SCHEDULED-NEXT: %[[C:.*]] = dist.clip_coefficient %[[W]] max_norm 5.000000e-01
// LEDGER: "all_reduce_bytes": 8,
// LEDGER-NEXT: "all_reduce_count": 2,

// OFF-NOT: sum_squares
// OFF-NOT: clip

// ZeRO-1/2's flat buckets update as each is reduced: those updates wait for
// the coefficient, and what reads their results moves with them.
// MOVED: train.backward "layers.0"
// MOVED-NOT: dist.adamw_flat
// MOVED: %[[C:.*]] = dist.clip_coefficient
// MOVED-NEXT: %[[U:.*]] = dist.adamw_flat "bucket{{[0-9]}}" [{{.*}}], %{{.*}} clip %[[C]]
// MOVED-NEXT: %[[F:.*]] = dist.all_gather %[[U]]
// MOVED-NEXT: %[[P:.*]] = dist.unpack %[[F]]
// MOVED-NEXT: dist.set_param "{{.*}}", %[[P]]
// MOVED-COUNT-3: clip %[[C]]
