// A scalar trainable param (a learned logit offset).
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-02, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<4x4xf32>
  %y = train.input "y" : tensor<4xi32>
  %w = train.param "w" init(#train.uniform<low = -0.5, high = 0.5>) : tensor<2x4xf32>
  %t = train.param "offset" init(#train.zeros) : tensor<f32>
  %h = train.linear %x, %w : (tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<4x2xf32>
  %s = train.add %h, %t : (tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>
  %loss = train.cross_entropy %s, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
