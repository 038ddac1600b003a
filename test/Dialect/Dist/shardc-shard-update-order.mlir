// The updates form one optimizer step after the whole backward: an update
// written where its gradient exists, before the backward of "layers.0"
// (Inputs/updates-interleaved.mlir), moves after the last gradient, so the
// reductions that span units (DDP's buckets, ZeRO-1's reduce-scatters after
// the backward, flat buckets) come before every update that reads them.
// RUN: sed 's/, max_grad_norm = 1.0//' %S/Inputs/updates-interleaved.mlir | shardc-opt --shardc-shard="strategy=ddp mesh=2 bucket-mb=1" | FileCheck %s --check-prefix=DDP
// RUN: sed 's/, max_grad_norm = 1.0//' %S/Inputs/updates-interleaved.mlir | shardc-opt --shardc-shard="strategy=zero1 mesh=2" | FileCheck %s --check-prefix=ZERO1
// RUN: sed 's/, max_grad_norm = 1.0//' %S/Inputs/updates-interleaved.mlir | shardc-opt --shardc-shard="strategy=zero1 mesh=2 layout=flat" | FileCheck %s --check-prefix=ZERO1-FLAT
// RUN: sed 's/, max_grad_norm = 1.0//' %S/Inputs/updates-interleaved.mlir | shardc-opt --shardc-shard="strategy=zero2 mesh=2 layout=flat bucket-mb=1" | FileCheck %s --check-prefix=ZERO2-FLAT
// Clipped, each still verifies and every update takes the coefficient.
// RUN: shardc-opt %S/Inputs/updates-interleaved.mlir --shardc-shard="strategy=zero1 mesh=2" | FileCheck %s --check-prefix=CLIPPED
// RUN: shardc-opt %S/Inputs/updates-interleaved.mlir --shardc-shard="strategy=zero1 mesh=2 layout=flat bucket-mb=0" | FileCheck %s --check-prefix=CLIPPED
// RUN: shardc-opt %S/Inputs/updates-interleaved.mlir --shardc-shard="strategy=ddp mesh=2 bucket-mb=1" | FileCheck %s --check-prefix=CLIPPED

// One bucket of all four gradients, reduced after both backwards.
// DDP: train.backward "layers.1"
// DDP: train.backward "layers.0"
// DDP: %[[R:.*]] = dist.all_reduce %{{.*}} avg : tensor<30xf32>
// DDP: %[[G:.*]]:4 = dist.unpack %[[R]]
// DDP-NEXT: train.adamw "layers.1.weight", %[[G]]#0
// DDP-NEXT: train.adamw "layers.1.bias", %[[G]]#1
// DDP-NEXT: train.adamw "layers.0.weight", %[[G]]#2

// ZERO1: train.backward "layers.0"
// ZERO1-NOT: dist.adamw_shard
// ZERO1: dist.reduce_scatter
// ZERO1: dist.adamw_shard "layers.1.weight"
// ZERO1: dist.adamw_shard "layers.1.bias"
// ZERO1: dist.adamw_shard "layers.0.weight"

// ZERO1-FLAT: train.backward "layers.0"
// ZERO1-FLAT-NOT: dist.adamw_flat
// ZERO1-FLAT: dist.adamw_flat {{.*}}["layers.1.weight", "layers.1.bias", "layers.0.weight", "layers.0.bias"]

// ZERO2-FLAT: train.backward "layers.0"
// ZERO2-FLAT-NOT: dist.adamw_flat
// ZERO2-FLAT: dist.adamw_flat {{.*}}["layers.1.weight", "layers.1.bias", "layers.0.weight", "layers.0.bias"]

// CLIPPED: train.backward "layers.0"
// CLIPPED: %[[C:.*]] = dist.clip_coefficient
// CLIPPED-COUNT-4: clip %[[C]]
