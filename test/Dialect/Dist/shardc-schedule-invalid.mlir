// RUN: not shardc-opt %S/shardc-schedule.mlir --train-autodiff --shardc-schedule 2>&1 | FileCheck %s --check-prefix=UNSHARDED
// UNSHARDED: error: 'train.model' op is not sharded: run --shardc-shard first
// RUN: not shardc-opt %S/shardc-schedule.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=2" --shardc-schedule --shardc-schedule 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: 'train.model' op is already scheduled
// RUN: not shardc-opt %S/shardc-schedule.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=2" --shardc-schedule="prefetch=-1" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: error: expected prefetch >= 0, got -1
// RUN: not shardc-opt %S/shardc-schedule.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=2" --shardc-schedule="prefetch=one" 2>&1 | FileCheck %s --check-prefix=NOT-INT
// NOT-INT: for the --prefetch option: 'one' value invalid for long argument!
// NOT-INT-NEXT: error: invalid options for pass 'shardc-schedule': 'prefetch=one'
// RUN: shardc-opt %s --shardc-schedule -split-input-file -verify-diagnostics

// A collective inside a unit could be skipped or reordered by some ranks.
dist.mesh @mesh axes ["shard"] shape [2]
train.model @m batch 2 split 2 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<1x4xf32>
  %h = train.unit "u" (%x) : (tensor<1x4xf32>) -> tensor<1x4xf32> {
  ^bb0(%a: tensor<1x4xf32>):
    // expected-error @+1 {{'dist.all_reduce' op is nested in 'train.unit': every rank must issue each collective, in the same order, in the step's own block or its micro-batch loop}}
    %r = dist.all_reduce %a on @mesh ["shard"] sum : tensor<1x4xf32> -> tensor<1x4xf32>
    train.yield %r : tensor<1x4xf32>
  }
  %l = train.param "l" init(#train.zeros) : tensor<1xf32>
  %s = train.reshape %l : tensor<1xf32> to tensor<f32>
  train.return %s : tensor<f32>
}
