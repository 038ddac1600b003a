// RUN: shardc-opt %s | shardc-opt | FileCheck %s
// RUN: shardc-opt %s --mlir-print-op-generic | shardc-opt | FileCheck %s

// Meshes, layouts and every collective print and parse back.

// CHECK: dist.mesh @world axes ["shard"] shape [4]
dist.mesh @world axes ["shard"] shape [4]
// CHECK: dist.mesh @hsdp axes ["replicate", "shard"] shape [2, 4]
dist.mesh @hsdp axes ["replicate", "shard"] shape [2, 4]
// CHECK: dist.mesh @hpz axes ["node", "local"] shape [2, 2]
dist.mesh @hpz axes ["node", "local"] shape [2, 2]

// CHECK-LABEL: train.model @collectives
train.model @collectives batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  train.unit "u" () : () -> () {
    train.yield
  }
  // A param of unit "u" stored as its dim0 shard.
  // CHECK: train.param "w" of unit "u" init(#train.zeros) sharded(#dist.shard<layout = dim0, mesh = @world, axes = ["shard"]>) of tensor<3x16xf32> : tensor<1x16xf32>
  %shard = train.param "w" of unit "u" init(#train.zeros) sharded(#dist.shard<layout = dim0, mesh = @world, axes = ["shard"]>) of tensor<3x16xf32> : tensor<1x16xf32>
  // Uneven dim0: 3 rows over 4 ranks is a padded shard of 1 row.
  // CHECK: dist.all_gather %{{.*}} on @world ["shard"] dim0 : tensor<1x16xf32> -> tensor<3x16xf32>
  %full = dist.all_gather %shard on @world ["shard"] dim0 : tensor<1x16xf32> -> tensor<3x16xf32>
  // Mixed precision: the gather casts to bf16 before sending.
  // CHECK: dist.all_gather %{{.*}} on @world ["shard"] dim0 wire bf16 : tensor<1x16xf32> -> tensor<3x16xbf16>
  %lowp = dist.all_gather %shard on @world ["shard"] dim0 wire bf16 : tensor<1x16xf32> -> tensor<3x16xbf16>
  // CHECK: dist.reduce_scatter %{{.*}} on @world ["shard"] avg dim0 wire f32 : tensor<3x16xbf16> -> tensor<1x16xf32>
  %g = dist.reduce_scatter %lowp on @world ["shard"] avg dim0 wire f32 : tensor<3x16xbf16> -> tensor<1x16xf32>
  // reshard-after-forward=K: the shard of the gathered tensor over `local`
  // (3 rows over 2 ranks: 2 rows, the last rank's padded), gathered again.
  // CHECK: dist.take_shard %{{.*}} on @hpz ["local"] dim0 : tensor<3x16xf32> -> tensor<2x16xf32>
  %kept = dist.take_shard %full on @hpz ["local"] dim0 : tensor<3x16xf32> -> tensor<2x16xf32>
  // CHECK: dist.all_gather %{{.*}} on @hpz ["local"] dim0 : tensor<2x16xf32> -> tensor<3x16xf32>
  %again = dist.all_gather %kept on @hpz ["local"] dim0 : tensor<2x16xf32> -> tensor<3x16xf32>
  // CHECK: dist.take_shard %{{.*}} on @hpz ["node", "local"] flat : tensor<16xf32> -> tensor<4xf32>
  %flatWhole = train.reshape %shard : tensor<1x16xf32> to tensor<16xf32>
  %flatHalf = dist.take_shard %flatWhole on @hpz ["node", "local"] flat : tensor<16xf32> -> tensor<4xf32>
  // What a reduction over one rank casting to f32 folds to.
  // CHECK: dist.convert %{{.*}} : tensor<3x16xbf16> -> tensor<3x16xf32>
  %wide = dist.convert %lowp : tensor<3x16xbf16> -> tensor<3x16xf32>
  // CHECK: dist.free %{{.*}} : tensor<3x16xbf16>
  dist.free %lowp : tensor<3x16xbf16>
  // CHECK: dist.free %{{.*}} : tensor<3x16xf32>
  dist.free %full : tensor<3x16xf32>

  // FSDP1's flat parameter: 50 elements padded to 52 over 4 ranks.
  %flat = train.param "flat" init(#train.zeros) : tensor<13xf32>
  // CHECK: dist.all_gather %{{.*}} on @world ["shard"] flat : tensor<13xf32> -> tensor<52xf32>
  %fb = dist.all_gather %flat on @world ["shard"] flat : tensor<13xf32> -> tensor<52xf32>
  // CHECK: dist.reduce_scatter %{{.*}} on @world ["shard"] sum flat : tensor<52xf32> -> tensor<13xf32>
  %fs = dist.reduce_scatter %fb on @world ["shard"] sum flat : tensor<52xf32> -> tensor<13xf32>

  // HSDP: shard axis, then the replicate axis; or both axes at once.
  // CHECK: dist.all_reduce %{{.*}} on @hsdp ["replicate"] avg : tensor<13xf32> -> tensor<13xf32>
  %ar = dist.all_reduce %fs on @hsdp ["replicate"] avg : tensor<13xf32> -> tensor<13xf32>
  // CHECK: dist.all_gather %{{.*}} on @hsdp ["replicate", "shard"] flat : tensor<13xf32> -> tensor<104xf32>
  %both = dist.all_gather %ar on @hsdp ["replicate", "shard"] flat : tensor<13xf32> -> tensor<104xf32>

  // Async forms: a token per collective, waited on once.
  // CHECK: %[[T0:.*]] = dist.all_gather_start %{{.*}} on @world ["shard"] flat : tensor<13xf32> -> !dist.token<tensor<52xf32>>
  %t0 = dist.all_gather_start %flat on @world ["shard"] flat : tensor<13xf32> -> !dist.token<tensor<52xf32>>
  // CHECK: %[[T1:.*]] = dist.reduce_scatter_start %{{.*}} on @world ["shard"] avg flat : tensor<52xf32> -> !dist.token<tensor<13xf32>>
  %t1 = dist.reduce_scatter_start %fb on @world ["shard"] avg flat : tensor<52xf32> -> !dist.token<tensor<13xf32>>
  // CHECK: %[[T2:.*]] = dist.all_reduce_start %{{.*}} on @world ["shard"] sum wire bf16 : tensor<13xf32> -> !dist.token<tensor<13xf32>>
  %t2 = dist.all_reduce_start %fs on @world ["shard"] sum wire bf16 : tensor<13xf32> -> !dist.token<tensor<13xf32>>
  // CHECK: dist.wait %[[T0]] : !dist.token<tensor<52xf32>>
  %w0 = dist.wait %t0 : !dist.token<tensor<52xf32>>
  // CHECK: dist.wait %[[T1]] : !dist.token<tensor<13xf32>>
  %w1 = dist.wait %t1 : !dist.token<tensor<13xf32>>
  // CHECK: dist.wait %[[T2]] : !dist.token<tensor<13xf32>>
  %w2 = dist.wait %t2 : !dist.token<tensor<13xf32>>

  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// FSDP1's flat parameter: 6 + 3 elements over 4 ranks, pieces of 3.
// CHECK-LABEL: train.model @flat
train.model @flat batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" init(#train.zeros) sharded(#dist.shard<layout = flat, mesh = @world, axes = ["shard"]>) of tensor<3x2xf32> : tensor<3x2xf32>
  %b = train.param "b" init(#train.zeros) sharded(#dist.shard<layout = flat, mesh = @world, axes = ["shard"]>) of tensor<3xf32> : tensor<3xf32>
  // CHECK: %[[F:.*]] = dist.flat_param "" ["w", "b"] on @world ["shard"] : tensor<3xf32>
  %f = dist.flat_param "" ["w", "b"] on @world ["shard"] : tensor<3xf32>
  // CHECK: dist.adamw_flat "" ["w", "b"], %[[F]] on @world ["shard"] : tensor<3xf32>
  dist.adamw_flat "" ["w", "b"], %f on @world ["shard"] : tensor<3xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  // CHECK: dist.adamw_flat "" ["l"], %{{.*}} on @world ["shard"] : tensor<1xf32> -> tensor<1xf32>
  %u = dist.adamw_flat "" ["l"], %l on @world ["shard"] : tensor<1xf32> -> tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// Gradient clipping: each rank's sum of squares, the coefficient, and the
// updates taking it.
// CHECK-LABEL: train.model @clipped
// CHECK-SAME: max_grad_norm = 1.0>
train.model @clipped batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0, max_grad_norm = 1.0> {
  %w = train.param "w" init(#train.zeros) sharded(#dist.shard<layout = flat, mesh = @world, axes = ["shard"]>) of tensor<3x2xf32> : tensor<3x2xf32>
  %b = train.param "b" init(#train.zeros) sharded(#dist.shard<layout = flat, mesh = @world, axes = ["shard"]>) of tensor<3xf32> : tensor<3xf32>
  %f = dist.flat_param "" ["w", "b"] on @world ["shard"] : tensor<3xf32>
  %v = train.param "v" frozen init(#train.zeros) sharded(#dist.shard<layout = dim0, mesh = @world, axes = ["shard"]>) of tensor<4xbf16> : tensor<1xbf16>
  // CHECK: %[[Q:.*]] = dist.sum_squares %{{.*}}, %{{.*}} : tensor<3xf32>, tensor<1xbf16>
  %q = dist.sum_squares %f, %v : tensor<3xf32>, tensor<1xbf16>
  // CHECK: %[[C:.*]] = dist.clip_coefficient %[[Q]], %[[Q]] max_norm 1.000000e+00
  %c = dist.clip_coefficient %q, %q max_norm 1.0
  // CHECK: dist.adamw_flat "" ["w", "b"], %{{.*}} clip %[[C]] on @world ["shard"] : tensor<3xf32>
  dist.adamw_flat "" ["w", "b"], %f clip %c on @world ["shard"] : tensor<3xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  // CHECK: train.adamw "l", %{{.*}} clip %[[C]] : tensor<1xf32>
  train.adamw "l", %l clip %c : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}
