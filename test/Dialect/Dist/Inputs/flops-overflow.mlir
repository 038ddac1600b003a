train.model @m batch 1048576 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<1048576x1048576xf32>
  %y = train.input "y" : tensor<1048576xi32>
  %h = train.unit "u"(%x) : (tensor<1048576x1048576xf32>) -> tensor<1048576x1048576xf32> {
  ^bb0(%a: tensor<1048576x1048576xf32>):
    %w = train.param "w" init(#train.zeros) : tensor<1048576x1048576xf32>
    %o = train.linear %a, %w : (tensor<1048576x1048576xf32>, tensor<1048576x1048576xf32>) -> tensor<1048576x1048576xf32>
    train.yield %o : tensor<1048576x1048576xf32>
  }
  %p = train.matmul %h, %x : (tensor<1048576x1048576xf32>, tensor<1048576x1048576xf32>) -> tensor<1048576x1048576xf32>
  %l = train.cross_entropy %p, %y : (tensor<1048576x1048576xf32>, tensor<1048576xi32>) -> tensor<f32>
  train.return %l : tensor<f32>
}
