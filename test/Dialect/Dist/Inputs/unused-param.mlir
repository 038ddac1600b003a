// A trainable param the loss does not depend on: autodiff gives it no
// gradient and no train.adamw.
train.model @m batch 4 optimizer #train.adamw<lr = 1.0e-02, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<4x4xf32>
  %y = train.input "y" : tensor<4xi32>
  %l = train.unit "u"(%x) : (tensor<4x4xf32>) -> tensor<4x2xf32> {
  ^bb0(%a: tensor<4x4xf32>):
    %w = train.param "w" init(#train.uniform<low = -0.5, high = 0.5>) : tensor<2x4xf32>
    %unused = train.param "unused" init(#train.zeros) : tensor<2xf32>
    %h = train.linear %a, %w : (tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<4x2xf32>
    train.yield %h : tensor<4x2xf32>
  }
  %loss = train.cross_entropy %l, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
