// A micro-batch loop written by hand, before the autodiff: grad-accum makes it.
train.model @m batch 4 optimizer <lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.01> {
  %x = train.input "x" : tensor<4x8xf32>
  %y = train.input "y" : tensor<4xi32>
  %w = train.param "w" init(#train.zeros) : tensor<4x8xf32>
  %l = train.microbatches 2 (%x, %y) : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%xm: tensor<2x8xf32>, %ym: tensor<2xi32>):
    %o = train.linear %xm, %w : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %lm = train.cross_entropy %o, %ym : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
    train.yield %lm : tensor<f32>
  }
  train.return %l : tensor<f32>
}
