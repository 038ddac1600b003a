// A param as large as the whole batch, added to an activation: data
// parallelism splits the activation and not the param.
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<4x3xf32>
  %y = train.input "y" : tensor<4xi32>
  %o = train.unit "u" (%x) : (tensor<4x3xf32>) -> tensor<4x3xf32> {
  ^bb0(%a: tensor<4x3xf32>):
    %p = train.param "p" init(#train.uniform<low = -0.5, high = 0.5>) : tensor<4x3xf32>
    %s = train.add %a, %p : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    train.yield %s : tensor<4x3xf32>
  }
  %loss = train.cross_entropy %o, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
