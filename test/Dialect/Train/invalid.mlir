// RUN: shardc-opt %s -split-input-file -verify-diagnostics

// A shape mismatch in linear names both dimensions.
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x16xf32>
  %w = train.param "w" init(#train.zeros) : tensor<4x8xf32>
  // expected-error @+1 {{'train.linear' op expected input's last dimension 16 to equal the weight's in-features 8}}
  %y = train.linear %x, %w : (tensor<2x16xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %l = train.cross_entropy %y, %x : (tensor<2x4xf32>, tensor<2x16xf32>) -> tensor<f32>
  train.return %l : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x16xf32>
  %w = train.param "w" init(#train.zeros) : tensor<4x16xf32>
  // expected-error @+1 {{'train.linear' op expected result of shape 2x4, got 2x5}}
  %y = train.linear %x, %w : (tensor<2x16xf32>, tensor<4x16xf32>) -> tensor<2x5xf32>
  %t = train.input "t" : tensor<2xi32>
  %l = train.cross_entropy %y, %t : (tensor<2x5xf32>, tensor<2xi32>) -> tensor<f32>
  train.return %l : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x16xf32>
  %w = train.param "w" init(#train.zeros) : tensor<4x16xf32>
  %b = train.param "b" init(#train.zeros) : tensor<5xf32>
  // expected-error @+1 {{'train.linear' op expected bias of shape 4, got 5}}
  %y = train.linear %x, %w, %b : (tensor<2x16xf32>, tensor<4x16xf32>, tensor<5xf32>) -> tensor<2x4xf32>
  %t = train.input "t" : tensor<2xi32>
  %l = train.cross_entropy %y, %t : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  train.return %l : tensor<f32>
}

// -----

// Mixed element types are rejected: casts are explicit.
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x16xbf16>
  %w = train.param "w" init(#train.zeros) : tensor<4x16xf32>
  // expected-error @+1 {{'train.linear' op expected element type 'bf16' throughout, got 'f32'}}
  %y = train.linear %x, %w : (tensor<2x16xbf16>, tensor<4x16xf32>) -> tensor<2x4xf32>
  %t = train.input "t" : tensor<2xi32>
  %l = train.cross_entropy %y, %t : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  train.return %l : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-error @+1 {{'train.param' op expected positive static dimensions, got 0 in dimension 1 of result #0}}
  %w = train.param "w" init(#train.zeros) : tensor<4x0xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.sum_to %l : tensor<1xf32> to tensor<1xf32>
  %r = train.reshape %s : tensor<1xf32> to tensor<f32>
  train.return %r : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-error @+1 {{'train.input' op expected positive static dimensions, got ? in dimension 0 of result #0}}
  %x = train.input "x" : tensor<?x4xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %r = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %r : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-note @+1 {{first declared here}}
  %a = train.param "w" init(#train.zeros) : tensor<4xf32>
  // expected-error @+1 {{'train.param' op duplicate param name 'w'}}
  %b = train.param "w" init(#train.zeros) : tensor<4xf32>
  %r = train.sum_to %b : tensor<4xf32> to tensor<4xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// The note points at the first declaration.
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-note @+1 {{first declared here}}
  train.unit "u" () : () -> () {
    train.yield
  }
  // expected-error @+1 {{'train.unit' op duplicate unit name 'u'}}
  train.unit "u" () : () -> () {
    train.yield
  }
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-note @+1 {{first declared here}}
  %a = train.input "x" : tensor<2xf32>
  // expected-error @+1 {{'train.input' op duplicate input name 'x'}}
  %b = train.input "x" : tensor<2xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// A root param may not be read inside a unit: FSDP frees it with the root.
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4xf32>
  %w = train.param "root.w" init(#train.zeros) : tensor<4x4xf32>
  %y = train.unit "u" (%x) : (tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    // expected-error @+1 {{'train.linear' op uses param 'root.w' of the root unit inside unit 'u'}}
    %o = train.linear %a, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    train.yield %o : tensor<2x4xf32>
  }
  %t = train.input "t" : tensor<2xi32>
  %l = train.cross_entropy %y, %t : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  train.return %l : tensor<f32>
}

// -----

// Activations enter a unit as inputs.
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4xf32>
  %y = train.unit "u" () : () -> tensor<2x4xf32> {
    // expected-error @+1 {{'train.gelu' op uses a value defined outside unit 'u'; pass it as an input}}
    %o = train.gelu %x : tensor<2x4xf32>
    train.yield %o : tensor<2x4xf32>
  }
  %t = train.input "t" : tensor<2xi32>
  %l = train.cross_entropy %y, %t : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  train.return %l : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4xf32>
  %y = train.unit "u" (%x) : (tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    // expected-error @+1 {{'train.yield' op expected 1 values matching the results of unit 'u', got 2}}
    train.yield %a, %a : tensor<2x4xf32>, tensor<2x4xf32>
  }
  %t = train.input "t" : tensor<2xi32>
  %l = train.cross_entropy %y, %t : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  train.return %l : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-error @+1 {{'train.param' op unknown initializer 5 : i64}}
  %w = train.param "w" init(5) : tensor<4xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-error @+1 {{expected std >= 0, got -1}}
  %w = train.param "w" init(#train.normal<std = -1.0>) : tensor<4xf32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-note @+1 {{param 'w' declared here}}
  %w = train.param "w" init(#train.zeros) : tensor<4xf32>
  // expected-error @+1 {{param name 'w.exp_avg' is the checkpoint name of param 'w''s optimizer moment}}
  %m = train.param "w.exp_avg" init(#train.zeros) : tensor<4xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-error @+1 {{param name '__metadata__' is reserved by safetensors files}}
  %w = train.param "__metadata__" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %w : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// The runtime computes in f32: a value that overflows it is refused.
// expected-error @+1 {{expected a finite lr (as an f32, at most 3.4e38 in magnitude), got 1.0e+300}}
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e+300, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
}

// -----

// ... and one that underflows it would be 0: no step would change a param.
// expected-error @+1 {{expected lr > 0 as an f32 (at least its smallest normal, 1.17549435e-38), got 1.000000e-50}}
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-50, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
}

// -----

// expected-error @+1 {{expected eps > 0 as an f32 (at least its smallest normal, 1.17549435e-38), got 1.000000e-45}}
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-45, weight_decay = 0.0> {
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-error @+1 {{expected a finite high (as an f32, at most 3.4e38 in magnitude), got inf}}
  %w = train.param "w" init(#train.uniform<low = 0.0, high = 0x7FF0000000000000>) : tensor<4xf32>
}

// -----

// expected-error @+1 {{expected 0 <= beta2 < 1, got 1}}
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 1.0, eps = 1.0e-08, weight_decay = 0.0> {
}

// -----

// Inputs carry the global batch in their leading dimension.
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-error @+1 {{'train.input' op expected leading dimension 4 (the model's batch per rank), got 3}}
  %x = train.input "x" : tensor<3x16xf32>
}

// -----

// expected-error @+1 {{'train.model' op expected batch > 0, got 0}}
train.model @m batch 0 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// expected-error @+1 {{'train.model' op expected batch > 0, got -4}}
train.model @m batch -4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// expected-error @+1 {{'train.model' op expected a split dividing the batch 4, got -2}}
train.model @m batch 4 split -2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// A step ends in train.return.
train.model @m batch 1 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-error @+1 {{block with no terminator}}
  %l = train.input "l" : tensor<1xf32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %q = train.input "q" : tensor<2x8x48xf32>
  // expected-error @+1 {{'train.attention' op expected heads to divide 16, got 5}}
  %o = train.attention %q heads 5 : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %q = train.input "q" : tensor<2x8x40xf32>
  // expected-error @+1 {{'train.attention' op expected qkv's last dimension to be 3C, got 40}}
  %o = train.attention %q heads 2 : (tensor<2x8x40xf32>) -> tensor<2x8x16xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %q = train.input "q" : tensor<2x8x48xf32>
  // expected-error @+1 {{'train.attention' op expected lse of shape 2x2x8, got 2x8x2}}
  %o, %lse = train.attention %q heads 2 : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x2xf32>)
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %q = train.input "q" : tensor<2x8x48xbf16>
  // expected-error @+1 {{'train.attention' op result #1 must be ranked tensor of 32-bit float values, but got 'tensor<2x2x8xbf16>'}}
  %o, %lse = train.attention %q heads 2 : (tensor<2x8x48xbf16>) -> (tensor<2x8x16xbf16>, tensor<2x2x8xbf16>)
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %q = train.input "q" : tensor<2x8x48xf32>
  %dy = train.input "dy" : tensor<2x8x16xf32>
  %o, %lse = train.attention %q heads 2 : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x2x8xf32>)
  // expected-error @+1 {{'train.attention_grad' op expected out of shape 2x8x16, got 2x8x48}}
  %d = train.attention_grad %dy, %q, %q, %lse heads 2 : (tensor<2x8x16xf32>, tensor<2x8x48xf32>, tensor<2x8x48xf32>, tensor<2x2x8xf32>) -> tensor<2x8x48xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x8xf32>
  %t = train.input "t" : tensor<2x4xi32>
  // expected-error @+1 {{'train.cross_entropy' op expected targets of shape 2, got 2x4}}
  %l = train.cross_entropy %x, %t : (tensor<2x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  train.return %l : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x8xf32>
  %t = train.input "t" : tensor<2xi32>
  // expected-error @+1 {{'train.cross_entropy' op expected classes in [1, 8] (the logits' last dimension), got 9}}
  %l = train.cross_entropy %x, %t classes 9 : (tensor<2x8xf32>, tensor<2xi32>) -> tensor<f32>
  train.return %l : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x8xf32>
  %t = train.input "t" : tensor<2xi32>
  %one = arith.constant dense<1.0> : tensor<f32>
  // expected-error @+1 {{'train.cross_entropy_grad' op expected classes in [1, 8] (the logits' last dimension), got 0}}
  %d = train.cross_entropy_grad %one, %x, %t classes 0 : (tensor<f32>, tensor<2x8xf32>, tensor<2xi32>) -> tensor<2x8xf32>
  %l = train.cross_entropy %x, %t : (tensor<2x8xf32>, tensor<2xi32>) -> tensor<f32>
  train.return %l : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x8xf32>
  // expected-error @+1 {{'train.reshape' op expected 16 elements in the result, got 15}}
  %r = train.reshape %x : tensor<2x8xf32> to tensor<3x5xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x8xf32>
  %y = train.param "y" init(#train.zeros) : tensor<3x8xf32>
  // expected-error @+1 {{'train.add' op expected rhs shape 3x8 to be a suffix of lhs shape 2x8}}
  %r = train.add %x, %y : (tensor<2x8xf32>, tensor<3x8xf32>) -> tensor<2x8xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x8xf32>
  %y = train.param "y" init(#train.zeros) : tensor<4x3xf32>
  // expected-error @+1 {{'train.matmul' op expected contracting dimensions to agree, got 8 and 4}}
  %r = train.matmul %x, %y : (tensor<2x8xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x8xf32>
  %g = train.param "g" init(#train.ones) : tensor<4xf32>
  // expected-error @+1 {{'train.layernorm' op expected weight of shape 8, got 4}}
  %r = train.layernorm %x, %g, %g : (tensor<2x8xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x8xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %ids = train.input "ids" : tensor<2x8xi32>
  %t = train.param "t" init(#train.ones) : tensor<16x4xf32>
  // expected-error @+1 {{'train.embedding' op expected result of shape 2x8x4, got 2x8x5}}
  %r = train.embedding %ids, %t : (tensor<2x8xi32>, tensor<16x4xf32>) -> tensor<2x8x5xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// A position embedding with fewer rows than train.iota has positions.
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %pos = train.iota : tensor<8xi32>
  %wpe = train.param "wpe" init(#train.ones) : tensor<4x4xf32>
  // expected-error @+1 {{'train.embedding' op expected a table of at least 8 rows for the positions of train.iota, got 4}}
  %r = train.embedding %pos, %wpe : (tensor<8xi32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %g = train.param "g" init(#train.zeros) : tensor<4xf32>
  // expected-error @+1 {{'train.adamw' op unknown param 'nope'}}
  train.adamw "nope", %g : tensor<4xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" frozen init(#train.ones) : tensor<4xf32>
  %g = train.param "g" init(#train.zeros) : tensor<4xf32>
  // expected-error @+1 {{'train.adamw' op updates frozen param 'w'}}
  train.adamw "w", %g : tensor<4xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// A backward may only read the params of its own unit.
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.param "x" init(#train.zeros) : tensor<4xf32>
  %y = train.unit "a" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%v: tensor<4xf32>):
    %w = train.param "a.w" init(#train.ones) : tensor<4xf32>
    %o = train.add %v, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    train.yield %o : tensor<4xf32>
  }
  %d = train.backward "b" (%y) params [] : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%g: tensor<4xf32>):
    // expected-error @+1 {{'train.param_ref' op reads param 'a.w' of unit 'a' in the backward of unit 'b'}}
    %w = train.param_ref "a.w" : tensor<4xf32>
    train.yield %w : tensor<4xf32>
  }
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" init(#train.ones) : tensor<4xf32>
  %x = train.param "x" init(#train.zeros) : tensor<3xf32>
  // expected-error @+1 {{'train.backward' op expected the gradient of 'w' of type 'tensor<4xf32>', got 'tensor<3xf32>'}}
  %d = train.backward "" (%x) params ["w"] : (tensor<3xf32>) -> tensor<3xf32> {
  ^bb0(%g: tensor<3xf32>):
    train.yield %g : tensor<3xf32>
  }
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// A param that a backward differentiates needs its optimizer update: else
// its gradient is dropped and it never trains.
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" init(#train.ones) : tensor<4xf32>
  %v = train.param "v" init(#train.ones) : tensor<4xf32>
  // expected-error @+1 {{'train.backward' op differentiates param 'v', which no optimizer update updates: its gradient would be dropped and the param never trained (update it, or drop it from the backward's params)}}
  %d:2 = train.backward "" (%w) params ["w", "v"] : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%g: tensor<4xf32>):
    train.yield %g, %g : tensor<4xf32>, tensor<4xf32>
  }
  train.adamw "w", %d#0 : tensor<4xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// Once a model has updates, every trainable param has one: the runtime
// would keep optimizer state for it, which the ledger does not count.
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" init(#train.ones) : tensor<4xf32>
  // expected-error @+1 {{'train.param' op is trainable but no optimizer update updates it: mark it frozen, or update it}}
  %v = train.param "v" init(#train.ones) : tensor<4xf32>
  %f = train.param "f" frozen init(#train.ones) : tensor<4xf32>
  train.adamw "w", %w : tensor<4xf32>
  %l = train.reshape %w : tensor<4xf32> to tensor<4xf32>
  %s = train.sum_to %l : tensor<4xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// Garbage: the parser reports it.
train.model batch 2 // expected-error {{custom op 'train.model' expected valid '@'-identifier for symbol name}}

// -----

// One optimizer update per param.
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" init(#train.ones) : tensor<4xf32>
  %g = train.param "g" frozen init(#train.ones) : tensor<4xf32>
  train.adamw "w", %g : tensor<4xf32>
  // expected-error @+1 {{'train.adamw' op updates param 'w' a second time}}
  train.adamw "w", %g : tensor<4xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

// One backward per unit.
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.param "x" frozen init(#train.ones) : tensor<4xf32>
  %a = train.backward "u" (%x) params [] : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%g: tensor<4xf32>):
    train.yield %g : tensor<4xf32>
  }
  // expected-error @+1 {{'train.backward' op is a second backward of unit 'u'}}
  %b = train.backward "u" (%x) params [] : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%g: tensor<4xf32>):
    train.yield %g : tensor<4xf32>
  }
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-error @+1 {{'train.param' op belongs to unknown unit 'ghost'}}
  %w = train.param "w" of unit "ghost" init(#train.ones) : tensor<4xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-error @+1 {{'train.param' op expected the storage 'tensor<7x16xf32>' to be a dim0 piece of the full 'tensor<3x16xf32>'}}
  %w = train.param "w" init(#train.ones) sharded(#train.zeros) of tensor<3x16xf32> : tensor<7x16xf32>
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-error @+1 {{'train.param' op expected at most 2^40 elements in 'tensor<1073741824x536870912xf32>'}}
  %w = train.param "w" init(#train.ones) : tensor<1073741824x536870912xf32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  // expected-error @+1 {{'train.microbatches' op expected at least one input to split into micro-batches}}
  %r = train.microbatches 2 () : () -> tensor<f32> {
    %s = train.reshape %l : tensor<1xf32> to tensor<f32>
    train.yield %s : tensor<f32>
  }
  train.return %r : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x16xf32>
  %w = train.param "w" init(#train.zeros) : tensor<4x16xf32>
  // expected-error @+1 {{'train.linear_gelu' op expected result of shape 2x4, got 2x5}}
  %pre, %y = train.linear_gelu %x, %w : (tensor<2x16xf32>, tensor<4x16xf32>) -> (tensor<2x4xf32>, tensor<2x5xf32>)
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x16xf32>
  %r = train.param "r" init(#train.zeros) : tensor<16xf32>
  // expected-error @+1 {{'train.add_layernorm' op expected rhs of shape 2x16, got 16}}
  %s, %y = train.add_layernorm %x, %r, %r, %r : (tensor<2x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16xf32>, tensor<2x16xf32>)
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4x4xf32>
  // expected-error @+1 {{'train.matmul_gelu_grad' op expected matrices, got an operand of shape 2x4x4}}
  %d = train.matmul_gelu_grad %x, %x, %x : (tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4xf32>
  %pre = train.input "pre" : tensor<2x3xf32>
  %w = train.param "w" init(#train.zeros) : tensor<4x4xf32>
  // expected-error @+1 {{'train.matmul_gelu_grad' op expected preactivation of shape 2x4, got 2x3}}
  %d = train.matmul_gelu_grad %x, %w, %pre : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<2x3xf32>) -> tensor<2x4xf32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4xf32>
  %w = train.param "w" init(#train.zeros) : tensor<4x8xf32>
  // expected-error @+1 {{'train.matmul_bias_grad' op expected transpose_lhs: bias_grad sums the lhs's rows [K, N] over K}}
  %dw, %db = train.matmul_bias_grad %x, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> (tensor<2x8xf32>, tensor<4xf32>)
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4xf32>
  %y = train.input "y" : tensor<2x8xf32>
  // expected-error @+1 {{'train.matmul_bias_grad' op expected bias_grad of shape 4, got 8}}
  %dw, %db = train.matmul_bias_grad %x, %y {transpose_lhs} : (tensor<2x4xf32>, tensor<2x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4x4xf32>
  // expected-error @+1 {{'train.matmul_bias_grad' op expected matrices, got an operand of shape 2x4x4}}
  %dw, %db = train.matmul_bias_grad %x, %x {transpose_lhs} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<4xf32>)
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x16xf32>
  %r = train.input "r" : tensor<2x8xf32>
  %g = train.param "g" init(#train.ones) : tensor<16xf32>
  // expected-error @+1 {{'train.layernorm_grad_add' op expected addend of shape 2x16, got 2x8}}
  %dx, %dg, %db = train.layernorm_grad_add %x, %x, %g, %r : (tensor<2x16xf32>, tensor<2x16xf32>, tensor<16xf32>, tensor<2x8xf32>) -> (tensor<2x16xf32>, tensor<16xf32>, tensor<16xf32>)
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x8xf32>
  %t = train.input "t" : tensor<2xi32>
  %one = arith.constant dense<1.0> : tensor<f32>
  // expected-error @+1 {{'train.cross_entropy_and_grad' op expected logits_grad of shape 2x8, got 2x4}}
  %l, %d = train.cross_entropy_and_grad %one, %x, %t : (tensor<f32>, tensor<2x8xf32>, tensor<2xi32>) -> (tensor<f32>, tensor<2x4xf32>)
  train.return %l : tensor<f32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x8xf32>
  %t = train.input "t" : tensor<2xi32>
  %one = arith.constant dense<1.0> : tensor<f32>
  // expected-error @+1 {{'train.cross_entropy_and_grad' op expected classes in [1, 8] (the logits' last dimension), got 9}}
  %l, %d = train.cross_entropy_and_grad %one, %x, %t classes 9 : (tensor<f32>, tensor<2x8xf32>, tensor<2xi32>) -> (tensor<f32>, tensor<2x8xf32>)
  train.return %l : tensor<f32>
}

// -----

// The learning-rate schedule: a decay ends after the warm-up, at a rate
// between 0 and the peak, and min_lr is only where a decay ends.
// expected-error @+1 {{expected warmup >= 0 steps, got -1}}
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0, warmup = -1> {
}

// -----

// expected-error @+1 {{expected decay_steps > warmup (10), or 0 for no decay, got 10}}
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0, warmup = 10, decay_steps = 10> {
}

// -----

// expected-error @+1 {{expected 0 <= min_lr <= lr (1.000000e-03), got 2.000000e-03}}
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0, decay_steps = 10, min_lr = 2.0e-03> {
}

// -----

// expected-error @+1 {{min_lr 1.000000e-04 is where the decay ends: expected decay_steps}}
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0, min_lr = 1.0e-04> {
}

// -----

// Clipping: max_grad_norm >= 0 (0: none), a finite f32.
// expected-error @+1 {{expected max_grad_norm >= 0 (0: no clipping), got -1.000000e+00}}
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0, max_grad_norm = -1.0> {
}

// -----

// expected-error @+1 {{max_grad_norm}}
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0, max_grad_norm = 1.0e+39> {
}

// -----

// expected-error @+1 {{expected decay_min_rank >= 0 (0: every parameter decays), got -1}}
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.1, decay_min_rank = -1> {
}

// -----

// Names the runtime keys tensors by as C strings: no NUL, which would cut
// "a\00b" to "a" (other bytes are quoted in the emitted C++).
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x16xf32>
  // expected-error @+1 {{'train.param' op expected no NUL in the param name, got "a\00b"}}
  %w = train.param "a\00b" init(#train.zeros) : tensor<4x16xf32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  // expected-error @+1 {{'train.input' op expected no NUL in the input name, got "x\00"}}
  %x = train.input "x\00" : tensor<2x16xf32>
}

// -----

// An op's float attributes are finite as f32s too: the emitted C++ would
// otherwise spell inf and nan, which it cannot compile, or compute with
// them from the first step.
train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.scale' op expected a finite factor (as an f32, at most 3.4e38 in magnitude), got nan}}
  %s = train.scale %x by 0x7FF8000000000000 : tensor<2x4xf32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{'train.scale' op expected a finite factor (as an f32, at most 3.4e38 in magnitude), got -1.0e+40}}
  %s = train.scale %x by -1.0e+40 : tensor<2x4xf32>
}

// -----

train.model @m batch 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x4xf32>
  %w = train.param "w" init(#train.ones) : tensor<4xf32>
  %b = train.param "b" init(#train.zeros) : tensor<4xf32>
  // expected-error @+1 {{'train.layernorm' op expected a finite eps (as an f32, at most 3.4e38 in magnitude), got inf}}
  %l = train.layernorm %x, %w, %b {eps = 0x7FF0000000000000 : f64} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
}

// -----

// An update takes the gradient a backward yields for its param: two of one
// shape swapped (a layer norm's weight and bias) would each be updated
// with the other's gradient.
train.model @m batch 2 optimizer <lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<2x2xf32>
  %y = train.input "y" : tensor<2xi32>
  %u = train.unit "u"(%x) : (tensor<2x2xf32>) -> tensor<2x2xf32> {
  ^bb0(%a: tensor<2x2xf32>):
    %w = train.param "w" init(#train.zeros) : tensor<2x2xf32>
    %v = train.param "v" init(#train.zeros) : tensor<2x2xf32>
    %h = train.matmul %a, %w : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    %o = train.matmul %h, %v : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    train.yield %o : tensor<2x2xf32>
  }
  %loss = train.cross_entropy %u, %y : (tensor<2x2xf32>, tensor<2xi32>) -> tensor<f32>
  %one = arith.constant dense<1.000000e+00> : tensor<f32>
  %d = train.cross_entropy_grad %one, %u, %y : (tensor<f32>, tensor<2x2xf32>, tensor<2xi32>) -> tensor<2x2xf32>
  %g:3 = train.backward "u"(%d) params ["w", "v"] : (tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) {
  ^bb0(%b: tensor<2x2xf32>):
    train.yield %b, %b, %b : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>
  }
  // expected-error @+1 {{'train.adamw' op expected the gradient of 'w', got the gradient of 'v'}}
  train.adamw "w", %g#2 : tensor<2x2xf32>
  train.adamw "v", %g#1 : tensor<2x2xf32>
  train.return %loss : tensor<f32>
}
