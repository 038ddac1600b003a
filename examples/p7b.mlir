// Exactly 7e9 parameters in one unit, no root params: the ZeRO paper's
// 7B example. Activations are tiny next to the model state.
train.model @p7b batch 16 optimizer #train.adamw<lr = 1.0e-04, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1> {
  %x = train.input "x" : tensor<16x100000xf32>
  %y = train.input "y" : tensor<16xi32>
  %logits = train.unit "layer" (%x) : (tensor<16x100000xf32>) -> tensor<16x70000xf32> {
  ^bb0(%a: tensor<16x100000xf32>):
    %w = train.param "layer.weight" init(#train.normal<std = 0.02>) : tensor<70000x100000xf32>
    %o = train.linear %a, %w : (tensor<16x100000xf32>, tensor<70000x100000xf32>) -> tensor<16x70000xf32>
    train.yield %o : tensor<16x70000xf32>
  }
  %loss = train.cross_entropy %logits, %y : (tensor<16x70000xf32>, tensor<16xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
