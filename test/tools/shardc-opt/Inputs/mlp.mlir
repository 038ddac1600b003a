train.model @mlp batch 8 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.01> {
  %x = train.input "x" : tensor<8x16xf32>
  %y = train.input "y" : tensor<8xi32>
  %h = train.unit "fc0" (%x) : (tensor<8x16xf32>) -> tensor<8x32xf32> {
  ^bb0(%a: tensor<8x16xf32>):
    %w = train.param "fc0.weight" init(#train.normal<mean = 0.0, std = 2.0e-02>) : tensor<32x16xf32>
    %b = train.param "fc0.bias" init(#train.zeros) : tensor<32xf32>
    %o = train.linear %a, %w, %b : (tensor<8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<8x32xf32>
    %g = train.gelu %o : tensor<8x32xf32>
    train.yield %g : tensor<8x32xf32>
  }
  %h2 = train.unit "fc1" (%h) : (tensor<8x32xf32>) -> tensor<8x10xf32> {
  ^bb0(%a: tensor<8x32xf32>):
    %w = train.param "fc1.weight" init(#train.uniform<low = -0.1, high = 0.1>) : tensor<10x32xf32>
    %o = train.linear %a, %w : (tensor<8x32xf32>, tensor<10x32xf32>) -> tensor<8x10xf32>
    train.yield %o : tensor<8x10xf32>
  }
  %loss = train.cross_entropy %h2, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
