// A mean cross entropy plus a penalty summed over a param whose dim 0
// equals the batch: the same maths split.
train.model @m batch 4 optimizer <lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<4x8xf32>
  %y = train.input "y" : tensor<4xi32>
  %w = train.param "w" init(#train.zeros) : tensor<4x8xf32>
  %o = train.linear %x, %w : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
  %ce = train.cross_entropy %o, %y : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
  %g = train.gelu %w : tensor<4x8xf32>
  %pen = train.sum_to %g : tensor<4x8xf32> to tensor<f32>
  %l = train.add %ce, %pen : (tensor<f32>, tensor<f32>) -> tensor<f32>
  train.return %l : tensor<f32>
}
