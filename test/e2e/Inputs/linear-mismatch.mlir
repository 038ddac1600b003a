// Parses, but does not verify: the weight's in-features (32) are not the
// input's last dimension (64).
module {
  train.model @mismatch batch 32 optimizer <lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.01> {
    %x = train.input "x" : tensor<32x64xf32>
    %y = train.input "y" : tensor<32xi32>
    %w = train.param "w" init(#train.zeros) : tensor<10x32xf32>
    %h = train.linear %x, %w : (tensor<32x64xf32>, tensor<10x32xf32>) -> tensor<32x10xf32>
    %loss = train.cross_entropy %h, %y : (tensor<32x10xf32>, tensor<32xi32>) -> tensor<f32>
    train.return %loss : tensor<f32>
  }
}
