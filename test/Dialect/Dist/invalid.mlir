// RUN: shardc-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{'dist.mesh' op expected a positive size for axis 'shard', got 0}}
dist.mesh @world axes ["shard"] shape [0]

// -----

// expected-error @+1 {{'dist.mesh' op expected one size per axis, got 1 sizes for 2 axes}}
dist.mesh @world axes ["replicate", "shard"] shape [4]

// -----

// expected-error @+1 {{'dist.mesh' op duplicate axis 'shard'}}
dist.mesh @world axes ["shard", "shard"] shape [2, 2]

// -----

// expected-error @+1 {{'dist.mesh' op expected 1 to 3 axes, got 4}}
dist.mesh @world axes ["a", "b", "c", "d"] shape [2, 2, 2, 2]

// -----

dist.mesh @world axes ["shard"] shape [4]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<4x16xf32>
  // expected-error @+1 {{'dist.all_gather' op unknown axis 'replicate' of mesh @world (axes: 'shard')}}
  %f = dist.all_gather %x on @world ["replicate"] dim0 : tensor<4x16xf32> -> tensor<16x16xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<4x16xf32>
  // expected-error @+1 {{'dist.all_gather' op unknown mesh @nowhere}}
  %f = dist.all_gather %x on @nowhere ["shard"] dim0 : tensor<4x16xf32> -> tensor<16x16xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// A dim0 shard of 3 rows over 2 ranks has ceil(3/2) = 2 rows.
dist.mesh @world axes ["shard"] shape [2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.param "x" init(#train.zeros) : tensor<1x16xf32>
  // expected-error @+1 {{'dist.all_gather' op expected a dim0 shard of 2 rows for 3 rows over 2 ranks, got 1}}
  %f = dist.all_gather %x on @world ["shard"] dim0 : tensor<1x16xf32> -> tensor<3x16xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.param "x" init(#train.zeros) : tensor<2x16xf32>
  // expected-error @+1 {{'dist.all_gather' op expected equal trailing dimensions, got 2x16 and 4x8}}
  %f = dist.all_gather %x on @world ["shard"] dim0 : tensor<2x16xf32> -> tensor<4x8xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [4]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.param "x" init(#train.zeros) : tensor<50xf32>
  // expected-error @+1 {{'dist.reduce_scatter' op expected the flat buffer of 50 elements to be the shard of 13 times 4 ranks}}
  %f = dist.reduce_scatter %x on @world ["shard"] sum flat : tensor<50xf32> -> tensor<13xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [4]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<4x4xf32>
  // expected-error @+1 {{'dist.all_gather' op expected 1-D tensors for a flat layout, got 4x4 and 16x4}}
  %f = dist.all_gather %x on @world ["shard"] flat : tensor<4x4xf32> -> tensor<16x4xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// The group of an HSDP mesh's two axes is 2 x 4 = 8 ranks.
dist.mesh @hsdp axes ["replicate", "shard"] shape [2, 4]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.param "x" init(#train.zeros) : tensor<13xf32>
  // expected-error @+1 {{'dist.all_gather' op expected the flat buffer of 52 elements to be the shard of 13 times 8 ranks}}
  %f = dist.all_gather %x on @hsdp ["replicate", "shard"] flat : tensor<13xf32> -> tensor<52xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [4]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.param "x" init(#train.zeros) : tensor<13xf32>
  // expected-error @+1 {{'dist.all_reduce' op expected the result shape 13, got 12}}
  %f = dist.all_reduce %x on @world ["shard"] sum : tensor<13xf32> -> tensor<12xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [4]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.param "x" init(#train.zeros) : tensor<13xf32>
  // expected-error @+1 {{'dist.all_reduce' op duplicate mesh axis 'shard'}}
  %f = dist.all_reduce %x on @world ["shard", "shard"] sum : tensor<13xf32> -> tensor<13xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [4]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.param "x" init(#train.zeros) : tensor<13xf32>
  // expected-error @+1 {{'dist.all_reduce' op expected a float wire type, got 'i32'}}
  %f = dist.all_reduce %x on @world ["shard"] sum wire i32 : tensor<13xf32> -> tensor<13xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// Every token is waited on exactly once.
dist.mesh @world axes ["shard"] shape [4]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.param "x" init(#train.zeros) : tensor<13xf32>
  // expected-error @+1 {{'dist.all_gather_start' op expected its token to be waited on exactly once, got 0 waits and 0 other uses}}
  %t = dist.all_gather_start %x on @world ["shard"] flat : tensor<13xf32> -> !dist.token<tensor<52xf32>>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [4]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.param "x" init(#train.zeros) : tensor<52xf32>
  // expected-error @+1 {{'dist.reduce_scatter_start' op expected its token to be waited on exactly once, got 2 waits and 0 other uses}}
  %t = dist.reduce_scatter_start %x on @world ["shard"] sum flat : tensor<52xf32> -> !dist.token<tensor<13xf32>>
  %a = dist.wait %t : !dist.token<tensor<13xf32>>
  %b = dist.wait %t : !dist.token<tensor<13xf32>>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// Nothing reads a buffer after its free.
dist.mesh @world axes ["shard"] shape [4]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.param "x" init(#train.zeros) : tensor<13xf32>
  %f = dist.all_gather %x on @world ["shard"] flat : tensor<13xf32> -> tensor<52xf32>
  // expected-note @+1 {{freed here}}
  dist.free %f : tensor<52xf32>
  // expected-error @+1 {{'dist.reduce_scatter' op reads a value after its dist.free}}
  %g = dist.reduce_scatter %f on @world ["shard"] sum flat : tensor<52xf32> -> tensor<13xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// Also inside a later region.
dist.mesh @world axes ["shard"] shape [4]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.param "x" init(#train.zeros) : tensor<13xf32>
  %f = dist.all_gather %x on @world ["shard"] flat : tensor<13xf32> -> tensor<52xf32>
  // expected-note @+1 {{freed here}}
  dist.free %f : tensor<52xf32>
  %u = train.unit "u" (%f) : (tensor<52xf32>) -> tensor<52xf32> {
  ^bb0(%a: tensor<52xf32>):
    train.yield %a : tensor<52xf32>
  }
  // expected-error @+1 {{'dist.free' op frees a value that is already freed}}
  dist.free %f : tensor<52xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [4]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.param "x" init(#train.zeros) : tensor<13xf32>
  %f = dist.all_gather %x on @world ["shard"] flat : tensor<13xf32> -> tensor<52xf32>
  // expected-note @+1 {{freed here}}
  dist.free %f : tensor<52xf32>
  // expected-error @+1 {{'train.unit' op reads a value after its dist.free}}
  %u = train.unit "u" (%f) : (tensor<52xf32>) -> tensor<52xf32> {
  ^bb0(%a: tensor<52xf32>):
    train.yield %a : tensor<52xf32>
  }
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// A sharding names each mesh axis once.
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-error @+1 {{duplicate mesh axis 'shard'}}
  %l = train.input "l" {s = #dist.shard<layout = dim0, mesh = @world, axes = ["shard", "shard"]>} : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-error @+2 {{expected one of [flat, dim0] for how a tensor is split over ranks, got: rows}}
  // expected-error @+1 {{failed to parse Dist_ShardAttr parameter 'layout'}}
  %l = train.input "l" {s = #dist.shard<layout = rows, mesh = @world, axes = ["shard"]>} : tensor<1xf32>
}

// -----

// expected-error @+1 {{'dist.mesh' op expected at most 16777216 ranks, got 33554432}}
dist.mesh @world axes ["replicate", "shard"] shape [8192, 4096]

// -----

// expected-error @+1 {{expected 'dist.strategy' on a train.model to be one of ddp, zero1, zero2, zero3, hsdp, got "zero9"}}
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> attributes {dist.strategy = "zero9"} {
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// expected-error @+1 {{expected 'dist.offload_optimizer' to be a unit attribute on a train.model}}
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> attributes {dist.offload_optimizer = "cpu"} {
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// expected-error @+1 {{expected 'dist.offload_params' with 'dist.offload_optimizer': params in host memory are updated there}}
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> attributes {dist.offload_params} {
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %g = dist.all_gather %l on @world ["shard"] dim0 : tensor<1xf32> -> tensor<4xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [4]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> attributes {dist.offload_optimizer, dist.offload_params} {
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %g = dist.all_gather %l on @world ["shard"] dim0 : tensor<1xf32> -> tensor<4xf32>
  // expected-error @+1 {{'train.reshape' op reads a param in host memory ('dist.offload_params' on the model): only a gather may, bringing it to the device}}
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [4]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" init(#train.zeros) sharded(#dist.shard<layout = flat, mesh = @world, axes = ["shard"]>) of tensor<3x2xf32> : tensor<3x2xf32>
  // expected-error @+1 {{'dist.flat_param' op expected a piece of 2 elements for 6 parameter elements over 4 ranks, got 3}}
  %f = dist.flat_param "" ["w"] on @world ["shard"] : tensor<3xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [4]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-error @+1 {{'dist.flat_param' op unknown param 'ghost'}}
  %f = dist.flat_param "" ["ghost"] on @world ["shard"] : tensor<3xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" frozen init(#train.zeros) : tensor<4xf32>
  // expected-error @+1 {{'dist.adamw_flat' op updates frozen param 'w'}}
  dist.adamw_flat "" ["w"], %w on @world ["shard"] : tensor<4xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" init(#train.zeros) : tensor<4xf32>
  %g = train.param "g" init(#train.zeros) : tensor<2xf32>
  dist.adamw_flat "" ["w"], %g on @world ["shard"] : tensor<2xf32>
  // expected-error @+1 {{'dist.adamw_flat' op updates param 'w' a second time}}
  dist.adamw_flat "" ["w"], %g on @world ["shard"] : tensor<2xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<4x16xbf16>
  // expected-error @+1 {{'dist.convert' op requires the same shape for all operands and results}}
  %y = dist.convert %x : tensor<4x16xbf16> -> tensor<16x4xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0, max_grad_norm = 1.0> {
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  // expected-error @+1 {{'dist.clip_coefficient' op expected a max_norm > 0 and finite as an f32, got 0}}
  %c = dist.clip_coefficient %s max_norm 0.0
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  // expected-error @+1 {{'dist.sum_squares' op expected at least one tensor to sum}}
  %q = "dist.sum_squares"() : () -> tensor<f32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0, max_grad_norm = 1.0> {
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  // expected-error @+1 {{'dist.clip_coefficient' op expected at least one sum of squares}}
  %c = "dist.clip_coefficient"() <{max_norm = 1.0 : f64}> : () -> tensor<f32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @hpz axes ["node", "local"] shape [2, 2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.param "x" init(#train.zeros) : tensor<5x16xf32>
  // expected-error @+1 {{'dist.take_shard' op expected a dim0 shard of 3 rows for 5 rows over 2 ranks, got 2}}
  %k = dist.take_shard %x on @hpz ["local"] dim0 : tensor<5x16xf32> -> tensor<2x16xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @hpz axes ["node", "local"] shape [2, 2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<4x16xf32>
  // expected-error @+1 {{'dist.take_shard' op unknown axis 'shard' of mesh @hpz (axes: 'node', 'local')}}
  %k = dist.take_shard %x on @hpz ["shard"] dim0 : tensor<4x16xf32> -> tensor<2x16xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @hpz axes ["node", "local"] shape [2, 2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<4x16xf32>
  // expected-error @+1 {{'dist.take_shard' op expected the input's element type, got 'bf16'}}
  %k = dist.take_shard %x on @hpz ["local"] dim0 : tensor<4x16xf32> -> tensor<2x16xbf16>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// A gather started before a micro-batch loop and waited in it would be
// waited once a micro-batch: refused.
dist.mesh @world axes ["shard"] shape [4]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<4x13xf32>
  %w = train.param "w" init(#train.zeros) : tensor<13xf32>
  // expected-error @+1 {{'dist.all_gather_start' op expected its wait outside the train.microbatches it starts before (started once, it would be waited once a micro-batch)}}
  %t = dist.all_gather_start %w on @world ["shard"] flat : tensor<13xf32> -> !dist.token<tensor<52xf32>>
  %r = train.microbatches 2 (%x) : (tensor<4x13xf32>) -> tensor<f32> {
  ^bb0(%slice: tensor<2x13xf32>):
    // expected-note @+1 {{the wait}}
    %g = dist.wait %t : !dist.token<tensor<52xf32>>
    dist.free %g : tensor<52xf32>
    %s = train.sum_to %slice : tensor<2x13xf32> to tensor<f32>
    train.yield %s : tensor<f32>
  }
  train.return %r : tensor<f32>
}

// -----

// So would a buffer made before the loop and freed in it.
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<4x13xf32>
  %r = train.microbatches 2 (%x) : (tensor<4x13xf32>) -> tensor<f32> {
  ^bb0(%slice: tensor<2x13xf32>):
    // expected-error @+1 {{'dist.free' op frees a value made before the train.microbatches it is in (it would be freed once a micro-batch)}}
    dist.free %x : tensor<4x13xf32>
    %s = train.sum_to %slice : tensor<2x13xf32> to tensor<f32>
    train.yield %s : tensor<f32>
  }
  train.return %r : tensor<f32>
}

// -----

// A flat parameter's members are marked flat and keep their full type.
dist.mesh @world axes ["shard"] shape [2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" init(#train.zeros) : tensor<3x2xf32>
  // expected-error @+1 {{'dist.flat_param' op expected member 'w' sharded with layout = flat, got no sharding}}
  %f = dist.flat_param "" ["w"] on @world ["shard"] : tensor<3xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" init(#train.zeros) sharded(#dist.shard<layout = flat, mesh = @world, axes = ["shard"]>) of tensor<4x2xf32> : tensor<2x2xf32>
  // expected-error @+1 {{'dist.flat_param' op expected member 'w' of its full type 'tensor<4x2xf32>', got 'tensor<2x2xf32>'}}
  %f = dist.flat_param "" ["w"] on @world ["shard"] : tensor<4xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// A param marked flat is gathered in its flat parameter, not on its own.
dist.mesh @world axes ["shard"] shape [2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" init(#train.zeros) sharded(#dist.shard<layout = flat, mesh = @world, axes = ["shard"]>) of tensor<4x2xf32> : tensor<2x2xf32>
  // expected-error @+1 {{'dist.all_gather' op gathers param 'w' as dim0, but it is sharded flat}}
  %g = dist.all_gather %w on @world ["shard"] dim0 : tensor<2x2xf32> -> tensor<4x2xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// The runtime lays a flat parameter out in its list's order: its unpack
// yields the members in that order, as the pack of their gradients takes
// them.
dist.mesh @world axes ["shard"] shape [2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" init(#train.zeros) sharded(#dist.shard<layout = flat, mesh = @world, axes = ["shard"]>) of tensor<3x2xf32> : tensor<3x2xf32>
  %b = train.param "b" init(#train.zeros) sharded(#dist.shard<layout = flat, mesh = @world, axes = ["shard"]>) of tensor<3xf32> : tensor<3xf32>
  // expected-note @+1 {{the params' order}}
  %f = dist.flat_param "" ["w", "b"] on @world ["shard"] : tensor<5xf32>
  %g = dist.all_gather %f on @world ["shard"] flat : tensor<5xf32> -> tensor<10xf32>
  // expected-error @+1 {{'dist.unpack' op expected the pieces of dist.flat_param's params in its order ('w' 3x2, 'b' 3), got 2 of shapes 3, 3x2}}
  %u:2 = dist.unpack %g : tensor<10xf32> -> tensor<3xf32>, tensor<3x2xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" init(#train.zeros) : tensor<3x2xf32>
  %b = train.param "b" init(#train.zeros) : tensor<3xf32>
  %gw = train.param "gw" frozen init(#train.zeros) : tensor<3x2xf32>
  %gb = train.param "gb" frozen init(#train.zeros) : tensor<3xf32>
  // expected-error @+1 {{'dist.pack' op expected the pieces of dist.adamw_flat's params in its order ('w' 3x2, 'b' 3), got 2 of shapes 3, 3x2}}
  %p = dist.pack %gb, %gw : tensor<3xf32>, tensor<3x2xf32> -> tensor<10xf32>
  %t = dist.reduce_scatter_start %p on @world ["shard"] avg flat : tensor<10xf32> -> !dist.token<tensor<5xf32>>
  %r = dist.wait %t : !dist.token<tensor<5xf32>>
  // expected-note @+1 {{the params' order}}
  dist.adamw_flat "" ["w", "b"], %r on @world ["shard"] : tensor<5xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// Members of one shape (a layer norm's weight and bias): the gradients a
// train.backward names are packed in the params' order too.
dist.mesh @world axes ["shard"] shape [2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %g = train.param "g" of unit "u" init(#train.zeros) sharded(#dist.shard<layout = flat, mesh = @world, axes = ["shard"]>) of tensor<3xf32> : tensor<3xf32>
  %b = train.param "b" of unit "u" init(#train.zeros) sharded(#dist.shard<layout = flat, mesh = @world, axes = ["shard"]>) of tensor<3xf32> : tensor<3xf32>
  %dy = train.param "dy" frozen init(#train.zeros) : tensor<3xf32>
  %y = train.unit "u"(%dy, %g, %b) : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32> {
  ^bb0(%x: tensor<3xf32>, %pg: tensor<3xf32>, %pb: tensor<3xf32>):
    %z = train.add %x, %pg : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %z2 = train.add %z, %pb : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    train.yield %z2 : tensor<3xf32>
  }
  %d:2 = train.backward "u"(%dy) params ["g", "b"] : (tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  ^bb0(%x: tensor<3xf32>):
    train.yield %x, %x : tensor<3xf32>, tensor<3xf32>
  }
  // expected-error @+1 {{'dist.pack' op expected piece 0 to be the gradient of 'g', got the gradient of 'b'}}
  %p = dist.pack %d#1, %d#0 : tensor<3xf32>, tensor<3xf32> -> tensor<6xf32>
  %t = dist.reduce_scatter_start %p on @world ["shard"] avg flat : tensor<6xf32> -> !dist.token<tensor<3xf32>>
  %r = dist.wait %t : !dist.token<tensor<3xf32>>
  // expected-note @+1 {{the params' order}}
  dist.adamw_flat "u" ["g", "b"], %r on @world ["shard"] : tensor<3xf32>
  %l = train.param "l" frozen init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// ZeRO-1/2: an updated shard is gathered and written back to its param.
dist.mesh @world axes ["shard"] shape [2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" init(#train.zeros) : tensor<4x2xf32>
  %g = train.param "g" frozen init(#train.zeros) : tensor<2x2xf32>
  // expected-error @+1 {{'dist.adamw_shard' op updates param 'w', which no dist.set_param writes back: it would not change}}
  %u = dist.adamw_shard "w", %g on @world ["shard"] : tensor<2x2xf32> -> tensor<2x2xf32>
  %f = dist.all_gather %u on @world ["shard"] dim0 : tensor<2x2xf32> -> tensor<4x2xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" init(#train.zeros) : tensor<4x2xf32>
  %v = train.param "v" init(#train.zeros) : tensor<4x2xf32>
  %g = train.param "g" frozen init(#train.zeros) : tensor<2x2xf32>
  %u = dist.adamw_shard "w", %g on @world ["shard"] : tensor<2x2xf32> -> tensor<2x2xf32>
  %f = dist.all_gather %u on @world ["shard"] dim0 : tensor<2x2xf32> -> tensor<4x2xf32>
  // expected-error @+1 {{'dist.set_param' op writes param 'v' with the update of param 'w'}}
  dist.set_param "v", %f : tensor<4x2xf32>
  %uv = dist.adamw_shard "v", %g on @world ["shard"] : tensor<2x2xf32> -> tensor<2x2xf32>
  %fv = dist.all_gather %uv on @world ["shard"] dim0 : tensor<2x2xf32> -> tensor<4x2xf32>
  dist.set_param "w", %fv : tensor<4x2xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// Every dist op's tensors are static, of positive sizes and at most 2^40
// elements (the StaticShapes trait, as train's ops): a `?` would reach the
// emitters as an element count of INT64_MIN, 2^62 elements as a byte count
// wrapped to 0.
dist.mesh @world axes ["shard"] shape [2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.param "x" init(#train.zeros) : tensor<10xf32>
  // expected-error @+1 {{'dist.unpack' op expected positive static dimensions, got ? in dimension 0 of result #1}}
  %p:2 = dist.unpack %x : tensor<10xf32> -> tensor<2x4xf32>, tensor<?xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.param "x" init(#train.zeros) : tensor<2x4xf32>
  // expected-error @+1 {{'dist.pack' op expected at most 2^40 elements in 'tensor<4611686018427387904xf32>'}}
  %b = dist.pack %x : tensor<2x4xf32> -> tensor<4611686018427387904xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [2]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  // expected-error @+1 {{'dist.free' op frees the storage of param 'l', which the step keeps for the next}}
  dist.free %l : tensor<1xf32>
  train.return %s : tensor<f32>
}

// -----

// A sharded model divides its batch over every rank of @mesh: a split of
// another count would run each rank on another share of the batch.
dist.mesh @mesh axes ["shard"] shape [4]
// expected-error @+1 {{'train.model' op expected 'split 4': a sharded model divides its batch over every rank of @mesh, got split 2}}
train.model @m batch 4 split 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> attributes {dist.strategy = "ddp"} {
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @mesh axes ["shard"] shape [2]
// expected-error @+1 {{'train.model' op expected 'split 2': a sharded model divides its batch over every rank of @mesh, got none}}
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> attributes {dist.strategy = "zero3"} {
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

dist.mesh @world axes ["shard"] shape [4]
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" init(#train.zeros) sharded(#dist.shard<layout = flat, mesh = @world, axes = ["shard"]>) of tensor<4x2xf32> : tensor<4x2xf32>
  %f = dist.flat_param "" ["w"] on @world ["shard"] : tensor<2xf32>
  // expected-error @+1 {{'dist.free' op frees the storage of the flat param of '', which the step keeps for the next}}
  dist.free %f : tensor<2xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}
