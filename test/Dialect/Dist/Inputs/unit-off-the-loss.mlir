train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<4x4xf32>
  %w = train.param "w" of unit "u" init(#train.zeros) : tensor<4x4xf32>
  %h = train.unit "u"(%x, %w) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>):
    %y = train.linear %a, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    train.yield %y : tensor<4x4xf32>
  }
  %v = train.param "v" init(#train.zeros) : tensor<1xf32>
  %r = train.reshape %v : tensor<1xf32> to tensor<f32>
  train.return %r : tensor<f32>
}
