// The MLP of shardc-shard-clip.mlir after --train-autodiff, with the updates
// of "layers.1" moved up to where its gradients exist (before the backward
// of "layers.0"), as an optimizer overlapped with the backward would place them.
module {
  train.model @mlp batch 2 optimizer <lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.01, max_grad_norm = 1.0> {
    %0 = train.input "x" : tensor<2x4xf32>
    %1 = train.input "y" : tensor<2xi32>
    %2:2 = train.unit "layers.0"(%0) : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    ^bb0(%arg0: tensor<2x4xf32>):
      %8 = train.param "layers.0.weight" init(#train.uniform<low = -0.5, high = 0.5>) : tensor<4x4xf32>
      %9 = train.param "layers.0.bias" init(#train.uniform<low = -0.5, high = 0.5>) : tensor<4xf32>
      %10 = train.linear %arg0, %8, %9 : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
      %11 = train.gelu %10 : tensor<2x4xf32>
      train.yield %11, %10 : tensor<2x4xf32>, tensor<2x4xf32>
    }
    %3 = train.unit "layers.1"(%2#0) : (tensor<2x4xf32>) -> tensor<2x2xf32> {
    ^bb0(%arg0: tensor<2x4xf32>):
      %8 = train.param "layers.1.weight" init(#train.uniform<low = -0.5, high = 0.5>) : tensor<2x4xf32>
      %9 = train.param "layers.1.bias" init(#train.uniform<low = -0.5, high = 0.5>) : tensor<2xf32>
      %10 = train.linear %arg0, %8, %9 : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<2x2xf32>
      train.yield %10 : tensor<2x2xf32>
    }
    %4 = train.cross_entropy %3, %1 : (tensor<2x2xf32>, tensor<2xi32>) -> tensor<f32>
    %cst = arith.constant dense<1.000000e+00> : tensor<f32>
    %5 = train.cross_entropy_grad %cst, %3, %1 : (tensor<f32>, tensor<2x2xf32>, tensor<2xi32>) -> tensor<2x2xf32>
    %6:3 = train.backward "layers.1"(%5, %2#0) params ["layers.1.weight", "layers.1.bias"] : (tensor<2x2xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) {
    ^bb0(%arg0: tensor<2x2xf32>, %arg1: tensor<2x4xf32>):
      %8 = train.param_ref "layers.1.weight" : tensor<2x4xf32>
      %9 = train.matmul %arg0, %8 : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
      %10 = train.matmul %arg0, %arg1 {transpose_lhs} : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
      %11 = train.sum_to %arg0 : tensor<2x2xf32> to tensor<2xf32>
      train.yield %9, %10, %11 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>
    }
    train.adamw "layers.1.weight", %6#1 : tensor<2x4xf32>
    train.adamw "layers.1.bias", %6#2 : tensor<2xf32>
    %7:2 = train.backward "layers.0"(%6#0, %2#1, %0) params ["layers.0.weight", "layers.0.bias"] : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>) {
    ^bb0(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>, %arg2: tensor<2x4xf32>):
      %8 = train.gelu_grad %arg0, %arg1 : tensor<2x4xf32>
      %9 = train.matmul %8, %arg2 {transpose_lhs} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
      %10 = train.sum_to %8 : tensor<2x4xf32> to tensor<4xf32>
      train.yield %9, %10 : tensor<4x4xf32>, tensor<4xf32>
    }
    train.adamw "layers.0.weight", %7#0 : tensor<4x4xf32>
    train.adamw "layers.0.bias", %7#1 : tensor<4xf32>
    train.return %4 : tensor<f32>
  }
}

