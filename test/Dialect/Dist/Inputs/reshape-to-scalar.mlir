train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<4x2xf32>
  %y = train.input "y" : tensor<4xi32>
  %w = train.param "w" init(#train.ones) : tensor<2x2xf32>
  %h = train.linear %x, %w : (tensor<4x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
  %l = train.cross_entropy %h, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<f32>
  %v = train.reshape %l : tensor<f32> to tensor<1xf32>
  %s = train.reshape %v : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}
