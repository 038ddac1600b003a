// mlp: sizes 64,256,256,10, batch 32: 85002 parameters in 4 units
module {
  train.model @mlp batch 32 optimizer <lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.01> {
    %0 = train.input "x" : tensor<32x64xf32>
    %1 = train.input "y" : tensor<32xi32>
    %2 = train.unit "layers.0"(%0) : (tensor<32x64xf32>) -> tensor<32x256xf32> {
    ^bb0(%arg0: tensor<32x64xf32>):
      %6 = train.param "layers.0.weight" init(#train.uniform<low = -0.125, high = 0.125>) : tensor<256x64xf32>
      %7 = train.param "layers.0.bias" init(#train.uniform<low = -0.125, high = 0.125>) : tensor<256xf32>
      %8 = train.linear %arg0, %6, %7 : (tensor<32x64xf32>, tensor<256x64xf32>, tensor<256xf32>) -> tensor<32x256xf32>
      %9 = train.gelu %8 : tensor<32x256xf32>
      train.yield %9 : tensor<32x256xf32>
    }
    %3 = train.unit "layers.1"(%2) : (tensor<32x256xf32>) -> tensor<32x256xf32> {
    ^bb0(%arg0: tensor<32x256xf32>):
      %6 = train.param "layers.1.weight" init(#train.uniform<low = -0.0625, high = 0.0625>) : tensor<256x256xf32>
      %7 = train.param "layers.1.bias" init(#train.uniform<low = -0.0625, high = 0.0625>) : tensor<256xf32>
      %8 = train.linear %arg0, %6, %7 : (tensor<32x256xf32>, tensor<256x256xf32>, tensor<256xf32>) -> tensor<32x256xf32>
      %9 = train.gelu %8 : tensor<32x256xf32>
      train.yield %9 : tensor<32x256xf32>
    }
    %4 = train.unit "layers.2"(%3) : (tensor<32x256xf32>) -> tensor<32x10xf32> {
    ^bb0(%arg0: tensor<32x256xf32>):
      %6 = train.param "layers.2.weight" init(#train.uniform<low = -0.0625, high = 0.0625>) : tensor<10x256xf32>
      %7 = train.param "layers.2.bias" init(#train.uniform<low = -0.0625, high = 0.0625>) : tensor<10xf32>
      %8 = train.linear %arg0, %6, %7 : (tensor<32x256xf32>, tensor<10x256xf32>, tensor<10xf32>) -> tensor<32x10xf32>
      train.yield %8 : tensor<32x10xf32>
    }
    %5 = train.cross_entropy %4, %1 : (tensor<32x10xf32>, tensor<32xi32>) -> tensor<f32>
    train.return %5 : tensor<f32>
  }
}
