// Logits padded past the classes (train.cross_entropy's `classes`, as
// `shardc-gen gpt --pad-vocab` makes them): the kernels get the classes and
// the row length, 6 of 8 here; the labels' bound is the classes, not the
// logits' width.
// RUN: shardc-opt %s --shardc-pipeline="strategy=ddp mesh=1 fuse=false output=/dev/null" | shardc-translate --shardc-to-host-cpp | FileCheck %s --check-prefix=HOST
// HOST: {"y", SHARDC_RT_I32, 1, kInputShape1, 6},
// HOST: shardc_rt_cross_entropy_f32({{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, 16, 6, 8)
// HOST: shardc_rt_cross_entropy_grad_f32({{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, 16, 6, 8)
//
// Fused (train.cross_entropy_and_grad) the pair keeps its classes.
// RUN: shardc-opt %s --shardc-pipeline="strategy=ddp mesh=1 output=/dev/null" | shardc-translate --shardc-to-host-cpp | FileCheck %s --check-prefix=FUSED
// FUSED: {"y", SHARDC_RT_I32, 1, kInputShape1, 6},
// FUSED: shardc_rt_cross_entropy_and_grad_f32({{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, 16, 6, 8)
//
// On the GPU, over 2 ranks of 8 rows each, in bf16.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 param-dtype=bf16 output=/dev/null" | shardc-translate --shardc-to-cuda | FileCheck %s --check-prefix=CUDA
// CUDA: {"y", SHARDC_RT_I32, 1, kInputShape1, 6},
// CUDA: shardc_rt_cuda_cross_entropy_and_grad_bf16(K, {{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, 8, 6, 8)
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 param-dtype=bf16 fuse=false output=/dev/null" | shardc-translate --shardc-to-cuda | FileCheck %s --check-prefix=CUDA-UNFUSED
// CUDA-UNFUSED: shardc_rt_cuda_cross_entropy_bf16(K, {{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, 8, 6, 8)
// CUDA-UNFUSED: shardc_rt_cuda_cross_entropy_grad_bf16(K, {{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, 8, 6, 8)
//
// The step's gradients match finite differences of its loss, the padding
// rows of the weight's included (their gradient is 0, and so is the loss's
// change when they move).
// RUN: %shardc run %s --strategy ddp --np 1 --quiet -- --check-grads 16 | FileCheck %s --check-prefix=GRADS
// GRADS: check-grads: 16 elements, 0 off

train.model @classifier batch 16 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.01> {
  %x = train.input "x" : tensor<16x2xf32>
  %y = train.input "y" : tensor<16xi32>
  %logits = train.unit "head" (%x) : (tensor<16x2xf32>) -> tensor<16x8xf32> {
  ^bb0(%a: tensor<16x2xf32>):
    %w = train.param "head.weight" init(#train.normal<mean = 0.0, std = 2.0e-02>) : tensor<8x2xf32>
    %o = train.linear %a, %w : (tensor<16x2xf32>, tensor<8x2xf32>) -> tensor<16x8xf32>
    train.yield %o : tensor<16x8xf32>
  }
  %loss = train.cross_entropy %logits, %y classes 6 : (tensor<16x8xf32>, tensor<16xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
