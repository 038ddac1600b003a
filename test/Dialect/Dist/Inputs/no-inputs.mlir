train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %w = train.param "w" init(#train.zeros) : tensor<4x2xf32>
  %y = train.iota : tensor<4xi32>
  %l = train.cross_entropy %w, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<f32>
  train.return %l : tensor<f32>
}
