train.model @chain batch 8 optimizer #train.adamw<lr = 1.0e-02, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-06, weight_decay = 0.01> {
  %x = train.input "x" : tensor<8x16xf32>
  %y = train.input "y" : tensor<8xi32>
  %x2 = train.scale %x by 3.0 : tensor<8x16xf32>
  %x3 = train.gelu %x2 : tensor<8x16xf32>
  %h = train.unit "fc0" (%x3) : (tensor<8x16xf32>) -> tensor<8x32xf32> {
  ^bb0(%a: tensor<8x16xf32>):
    %w = train.param "fc0.weight" init(#train.normal<mean = 0.0, std = 2.0e-01>) : tensor<32x16xf32>
    %o = train.linear %a, %w : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
    %s = train.scale %o by 5.0e-01 : tensor<8x32xf32>
    %s2 = train.scale %s by 3.0 : tensor<8x32xf32>
    %r = train.relu %s2 : tensor<8x32xf32>
    %r2 = train.reshape %r : tensor<8x32xf32> to tensor<256xf32>
    %r4 = train.scale %r2 by 2.0 : tensor<256xf32>
    %r3 = train.reshape %r4 : tensor<256xf32> to tensor<8x32xf32>
    %g = train.gelu %r3 : tensor<8x32xf32>
    train.yield %g : tensor<8x32xf32>
  }
  %h2 = train.unit "fc1" (%h) : (tensor<8x32xf32>) -> tensor<8x10xf32> {
  ^bb0(%a: tensor<8x32xf32>):
    %w = train.param "fc1.weight" init(#train.uniform<low = -0.3, high = 0.3>) : tensor<10x32xf32>
    %o = train.linear %a, %w : (tensor<8x32xf32>, tensor<10x32xf32>) -> tensor<8x10xf32>
    %o2 = train.scale %o by 2.0 : tensor<8x10xf32>
    train.yield %o2 : tensor<8x10xf32>
  }
  %loss = train.cross_entropy %h2, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
