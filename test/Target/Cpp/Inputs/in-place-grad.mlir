train.model @grad batch 8 optimizer #train.adamw<lr = 1.0e-02, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-06, weight_decay = 0.01> {
  %x = train.input "x" : tensor<8x16xf32>
  %y = train.input "y" : tensor<8xi32>
  %h2 = train.unit "fc1" (%x) : (tensor<8x16xf32>) -> tensor<8x1000xf32> {
  ^bb0(%a: tensor<8x16xf32>):
    %w = train.param "fc1.weight" init(#train.uniform<low = -0.1, high = 0.1>) : tensor<1000x16xf32>
    %p = train.param "fc1.p" init(#train.zeros) : tensor<8x1000xf32>
    %o = train.linear %a, %w : (tensor<8x16xf32>, tensor<1000x16xf32>) -> tensor<8x1000xf32>
    %q = train.add %o, %p : (tensor<8x1000xf32>, tensor<8x1000xf32>) -> tensor<8x1000xf32>
    train.yield %q : tensor<8x1000xf32>
  }
  %loss = train.cross_entropy %h2, %y : (tensor<8x1000xf32>, tensor<8xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
