// Sharded IR whose loss all-reduce (%9) nothing reads: --shardc-schedule
// still waits for it within the step.
module {
  dist.mesh @mesh axes ["shard"] shape [2]
  train.model @m batch 4 split 2 optimizer <lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.01> attributes {dist.strategy = "zero3"} {
    %0 = train.input "x" : tensor<2x4xf32>
    %1 = train.input "y" : tensor<2xi32>
    %2 = train.param "w" of unit "u" init(#train.zeros) sharded(#dist.shard<layout = dim0, mesh = @mesh, axes = ["shard"]>) of tensor<2x4xf32> : tensor<1x4xf32>
    %3 = dist.all_gather %2 on @mesh ["shard"]  dim0 : tensor<1x4xf32> -> tensor<2x4xf32>
    %4 = train.unit "u"(%0, %3) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x2xf32> {
    ^bb0(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>):
      %10 = train.linear %arg0, %arg1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x2xf32>
      train.yield %10 : tensor<2x2xf32>
    }
    dist.free %3 : tensor<2x4xf32>
    %5 = train.cross_entropy %4, %1 : (tensor<2x2xf32>, tensor<2xi32>) -> tensor<f32>
    %cst = arith.constant dense<1.000000e+00> : tensor<f32>
    %6 = train.cross_entropy_grad %cst, %4, %1 : (tensor<f32>, tensor<2x2xf32>, tensor<2xi32>) -> tensor<2x2xf32>
    %7 = train.backward "u"(%6, %0) params ["w"] : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> {
    ^bb0(%arg0: tensor<2x2xf32>, %arg1: tensor<2x4xf32>):
      %10 = train.matmul %arg0, %arg1 {transpose_lhs} : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
      train.yield %10 : tensor<2x4xf32>
    }
    %8 = dist.reduce_scatter %7 on @mesh ["shard"]  avg  dim0 : tensor<2x4xf32> -> tensor<1x4xf32>
    dist.free %7 : tensor<2x4xf32>
    train.adamw "w", %8 : tensor<1x4xf32>
    %9 = dist.all_reduce %5 on @mesh ["shard"]  avg : tensor<f32> -> tensor<f32>
    train.return %5 : tensor<f32>
  }
}

