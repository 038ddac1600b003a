train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<4x4xf32>
  %y = train.input "y" : tensor<4xi32>
  %w0 = train.param "unit.1.weight" init(#train.zeros) : tensor<4x4xf32>
  %w1 = train.param "w" init(#train.zeros) : tensor<2x4xf32>
  %h0 = train.linear %x, %w0 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %h = train.linear %h0, %w1 : (tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<4x2xf32>
  %loss = train.cross_entropy %h, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
