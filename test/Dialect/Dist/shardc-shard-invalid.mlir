// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=0" 2>&1 | FileCheck %s --check-prefix=MESH0
// MESH0: error: invalid mesh '0': expected N, or RxS for hsdp, with positive sizes and at most 16777216 ranks
// A step without inputs has nothing to cut into micro-batches.
// RUN: not shardc-opt %S/Inputs/no-inputs.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=1 grad-accum=2" 2>&1 | FileCheck %s --check-prefix=NO-INPUTS
// NO-INPUTS: error: 'train.model' op has no train.input for grad-accum=2 to split into micro-batches
// An op the batch's split breaks is named with the split, by ranks and by
// micro-batches, not left to the verifier after the pass.
// RUN: not shardc-opt %S/Inputs/batch-sized-param.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=2" 2>&1 | FileCheck %s --check-prefix=BATCH-PARAM
// BATCH-PARAM: batch-sized-param.mlir:9:10: error: 'train.add' op does not follow the split of the batch: 4 over 2 data-parallel ranks is 2 a rank, where it expected rhs shape 4x3 to be a suffix of lhs shape 2x3 (an operand sized by the whole batch, such as a param, does not split with it)
// RUN: not shardc-opt %S/Inputs/batch-sized-param.mlir --train-autodiff --shardc-shard="strategy=ddp mesh=1 grad-accum=2" 2>&1 | FileCheck %s --check-prefix=BATCH-PARAM-MICRO
// BATCH-PARAM-MICRO: error: 'train.add' op does not follow the split of the batch: 4 over 1 data-parallel rank and 2 micro-batches is 2 a micro-batch, where it expected
// A loss summed over the batch (at the model's level, or in a unit): split
// over ranks or micro-batches and averaged, it would be divided by their
// count. Unsplit, it trains (its gradient broadcast by an add to the input
// times 0, which the split would follow). A sum over a param whose dim 0
// equals the batch is no sum over the batch.
// RUN: not shardc-opt %S/Inputs/sum-loss.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=2" 2>&1 | FileCheck %s --check-prefix=SUM-LOSS
// SUM-LOSS: sum-loss.mlir:11:8: error: 'train.sum_to' op sums the loss over the batch, which the step splits 2 ways (ranks times micro-batches) and averages: the loss and its gradients would be 1/2 of the unsplit step's (a loss averaged over the batch, as train.cross_entropy's, is the same maths split)
// RUN: not shardc-opt %S/Inputs/sum-loss.mlir --train-autodiff --shardc-shard="strategy=ddp mesh=1 grad-accum=4" 2>&1 | FileCheck %s --check-prefix=SUM-LOSS-MICRO
// SUM-LOSS-MICRO: error: 'train.sum_to' op sums the loss over the batch, which the step splits 4 ways
// RUN: not shardc-opt %S/Inputs/sum-loss-in-unit.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=2" 2>&1 | FileCheck %s --check-prefix=SUM-LOSS-UNIT
// SUM-LOSS-UNIT: sum-loss-in-unit.mlir:9:10: error: 'train.sum_to' op sums the loss over the batch
// RUN: shardc-opt %S/Inputs/param-penalty.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=2" -o /dev/null
// RUN: shardc-opt %S/Inputs/sum-loss.mlir --shardc-pipeline="strategy=zero3 mesh=1" | FileCheck %s --check-prefix=SUM-LOSS-ONE
// SUM-LOSS-ONE: %[[ZEROS:.*]] = train.scale %{{.*}} by 0.000000e+00 : tensor<4x4xf32>
// SUM-LOSS-ONE: train.add %[[ZEROS]], %{{.*}} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>

// A reshape whose size the split leaves alone (a loss reshaped to a scalar)
// follows its input.
// RUN: shardc-opt %S/Inputs/reshape-to-scalar.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=2" | FileCheck %s --check-prefix=TO-SCALAR
// TO-SCALAR: train.reshape %{{.*}} : tensor<1xf32> to tensor<f32>
// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=hsdp mesh=4294967296x4294967296" 2>&1 | FileCheck %s --check-prefix=MESHBIG
// MESHBIG: error: invalid mesh '4294967296x4294967296'
// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=hsdp mesh=65536x65536" 2>&1 | FileCheck %s --check-prefix=MESHBIG2
// MESHBIG2: error: invalid mesh '65536x65536'

// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=2x" 2>&1 | FileCheck %s --check-prefix=MESHBAD
// MESHBAD: error: invalid mesh '2x': expected N, or RxS for hsdp
// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=hsdp mesh=4" 2>&1 | FileCheck %s --check-prefix=HSDP1D
// HSDP1D: error: strategy hsdp needs a 2-D mesh RxS (replicate x shard), got mesh=4
// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=zero2 mesh=2x2" 2>&1 | FileCheck %s --check-prefix=ZERO2D
// ZERO2D: error: strategy zero2 needs a 1-D mesh N, got mesh=2x2
// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=zero4 mesh=2" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: for the --strategy option: Cannot find option named 'zero4'!
// UNKNOWN-NEXT: error: invalid options for pass 'shardc-shard': 'strategy=zero4 mesh=2'
// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=3" 2>&1 | FileCheck %s --check-prefix=BATCH
// BATCH: error: 'train.model' op has a global batch of 8 that does not divide over 3 data-parallel ranks (mesh=3)
// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=2 grad-accum=3" 2>&1 | FileCheck %s --check-prefix=ACCUM
// ACCUM: error: 'train.model' op has a global batch of 8 that does not divide over 2 data-parallel ranks (mesh=2) times 3 micro-batches
// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=2 grad-accum=0" 2>&1 | FileCheck %s --check-prefix=ACCUM0
// ACCUM0: error: expected grad-accum >= 1, got 0
// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=hsdp mesh=4096x4096 grad-accum=1099511627776" 2>&1 | FileCheck %s --check-prefix=ACCUMBIG
// ACCUMBIG: error: 'train.model' op has a global batch of 8 that does not divide over 16777216 data-parallel ranks
// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=ddp mesh=2 bucket-mb=9223372036854775807" 2>&1 | FileCheck %s --check-prefix=BUCKETBIG
// BUCKETBIG: error: expected 0 <= bucket-mb <= 2^40, got 9.22337e+18
// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=2 layout=flat unit-bucket-mb=-1" 2>&1 | FileCheck %s --check-prefix=UNITBUCKET
// UNITBUCKET: error: expected 0 <= unit-bucket-mb <= 2^40, got -1
// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=ddp mesh=2 bucket-mb=nan" 2>&1 | FileCheck %s --check-prefix=BUCKETNAN
// BUCKETNAN: error: expected 0 <= bucket-mb <= 2^40, got nan
// RUN: not shardc-opt %s --shardc-shard="strategy=zero3 mesh=2" 2>&1 | FileCheck %s --check-prefix=NOGRAD
// NOGRAD: error: 'train.model' op has no optimizer step: run --train-autodiff first
// RUN: not shardc-opt %s --train-autodiff --shardc-shard="strategy=zero3 mesh=2" --shardc-shard="strategy=zero3 mesh=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: 'train.model' op is already sharded
// A scalar param has no dim 0 to split: every strategy but DDP refuses it.
// RUN: not shardc-opt %S/Inputs/scalar-param.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=2" 2>&1 | FileCheck %s --check-prefix=SCALAR
// RUN: not shardc-opt %S/Inputs/scalar-param.mlir --train-autodiff --shardc-shard="strategy=zero1 mesh=2" 2>&1 | FileCheck %s --check-prefix=SCALAR1
// RUN: not shardc-opt %S/Inputs/scalar-param.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=2 layout=flat" 2>&1 | FileCheck %s --check-prefix=SCALAR
// RUN: shardc-opt %S/Inputs/scalar-param.mlir --train-autodiff --shardc-shard="strategy=ddp mesh=2" | FileCheck %s --check-prefix=SCALAR-DDP
// SCALAR: scalar-param.mlir:6:8: error: 'train.param' op is a scalar: strategy zero3 splits params or their optimizer state along dim 0; give it one (tensor<1x...>), or use strategy ddp
// SCALAR1: error: 'train.param' op is a scalar: strategy zero1 splits
// SCALAR-DDP: train.adamw "offset"
// An activation whose leading dimension cannot follow the batch split.
// RUN: not shardc-opt %S/Inputs/odd-reshape.mlir --train-autodiff --shardc-shard="strategy=zero3 mesh=4" 2>&1 | FileCheck %s --check-prefix=RESHAPE
// RESHAPE: error: 'train.reshape' op cannot follow its input from 8 to 2 elements
train.model @mlp batch 8 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0> {
  %x = train.input "x" : tensor<8x4xf32>
  %y = train.input "y" : tensor<8xi32>
  %h = train.unit "fc0" (%x) : (tensor<8x4xf32>) -> tensor<8x3xf32> {
  ^bb0(%a: tensor<8x4xf32>):
    %w = train.param "fc0.weight" init(#train.uniform<low = -0.5, high = 0.5>) : tensor<3x4xf32>
    %b = train.param "fc0.bias" init(#train.zeros) : tensor<3xf32>
    %o = train.linear %a, %w, %b : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<8x3xf32>
    %g = train.gelu %o : tensor<8x3xf32>
    train.yield %g : tensor<8x3xf32>
  }
  %logits = train.unit "fc1" (%h) : (tensor<8x3xf32>) -> tensor<8x2xf32> {
  ^bb0(%a: tensor<8x3xf32>):
    %w = train.param "fc1.weight" init(#train.uniform<low = -0.5, high = 0.5>) : tensor<2x3xf32>
    %o = train.linear %a, %w : (tensor<8x3xf32>, tensor<2x3xf32>) -> tensor<8x2xf32>
    train.yield %o : tensor<8x2xf32>
  }
  %loss = train.cross_entropy %logits, %y : (tensor<8x2xf32>, tensor<8xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
