// A loss summed over the batch inside a unit.
train.model @m batch 4 optimizer <lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.01> {
  %x = train.input "x" : tensor<4x8xf32>
  %y = train.input "y" : tensor<4xi32>
  %h = train.unit "u"(%x) : (tensor<4x8xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<4x8xf32>):
    %w = train.param "u.w" init(#train.zeros) : tensor<4x8xf32>
    %o = train.linear %a, %w : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
    %s = train.sum_to %o : tensor<4x4xf32> to tensor<f32>
    train.yield %s : tensor<f32>
  }
  train.return %h : tensor<f32>
}
