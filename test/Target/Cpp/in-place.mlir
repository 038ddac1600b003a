// A result written over an operand that dies at its op takes that operand's
// buffer (train::InPlaceOpInterface): the ledger counts it once, the step
// allocates nothing for it, and the measured peak is the predicted one.
//
// Counted by hand, f32, one rank, unfused: params head.weight 8x2 = 64 B,
// optimizer (m, v) 128 B. Live at the loss: x 16x2 (128 B), y 16 (64 B),
// the logits 16x8 (512 B), the loss (4 B) = 708 B. The logits' gradient is
// written over the logits, which nothing reads after it: at
// cross_entropy_grad 708 B + the seed (4 B) and at the weight's gradient x,
// the loss, the gradient in the logits' buffer and the 8x2 weight gradient
// (64 B) = 708 B; peak 712 + 192 = 904 B. A separate gradient buffer would
// make it 1416 B.
// RUN: shardc-opt %s --shardc-pipeline="strategy=ddp mesh=1 fuse=false" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LEDGER
// LEDGER: activations 708
// LEDGER: peak 904
//
// Fused (train.cross_entropy_and_grad, the default), the same peak; at the
// loss, as the fused op starts, the seed is live instead of the loss (708).
// RUN: shardc-opt %s --shardc-pipeline="strategy=ddp mesh=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FUSED-LEDGER
// FUSED-LEDGER: activations 708
// FUSED-LEDGER: peak 904
// RUN: shardc-opt %s --shardc-pipeline="strategy=ddp mesh=1 output=/dev/null" | shardc-translate --shardc-to-host-cpp | FileCheck %s --check-prefix=FUSED
// FUSED: float *[[L:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 512));
// FUSED-NEXT: shardc_rt_linear_f32({{.*}}, [[L]], 16, 2, 8);
// FUSED-NOT: shardc_rt_alloc(ctx, 512)
// FUSED: float *[[D:v[0-9]+]] = [[L]]; // in place: [[L]] dies here
// FUSED-NEXT: shardc_rt_cross_entropy_and_grad_f32({{v[0-9]+}}, [[L]], {{v[0-9]+}}, {{v[0-9]+}}, [[D]], 16, 8, 8)
// FUSED-NOT: shardc_rt_alloc(ctx, 512)
// FUSED: shardc_rt_matmul_f32([[D]],
//
// RUN: shardc-opt %s --shardc-pipeline="strategy=ddp mesh=1 fuse=false output=/dev/null" | shardc-translate --shardc-to-host-cpp | FileCheck %s --check-prefix=HOST
// HOST: float *[[L:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 512));
// HOST-NEXT: shardc_rt_linear_f32({{.*}}, [[L]], 16, 2, 8);
// HOST-NOT: shardc_rt_alloc(ctx, 512)
// HOST: float *[[D:v[0-9]+]] = [[L]]; // in place: [[L]] dies here
// HOST-NEXT: shardc_rt_cross_entropy_grad_f32({{v[0-9]+}}, [[L]], {{v[0-9]+}}, [[D]], 16, 8, 8)
// HOST-NOT: shardc_rt_alloc(ctx, 512)
// HOST: shardc_rt_matmul_f32([[D]],
// HOST: shardc_rt_free(ctx, [[L]]);
// HOST-NOT: shardc_rt_free(ctx, [[L]]);
// HOST-NOT: shardc_rt_free(ctx, [[D]]);
//
// The executable measures the same peak.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %shardc build %s --strategy ddp --mesh 1 --quiet -o %t/step
// RUN: %t/step --steps 2 --quiet --log-json %t/log.json
// RUN: FileCheck %s --check-prefix=MEASURED < %t/log.json
// MEASURED: "step": 1, {{.*}} "peak_bytes": 904, "predicted_peak_bytes": 904,
// MEASURED: "step": 2, {{.*}} "peak_bytes": 904, "predicted_peak_bytes": 904,
//
// In bf16 on the GPU, over 2 ranks: the same, in the stored type.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 param-dtype=bf16 output=/dev/null" | shardc-translate --shardc-to-cuda | FileCheck %s --check-prefix=CUDA
// CUDA: shardc_rt_bf16 *[[D:v[0-9]+]] = [[L:v[0-9]+]]; // in place: [[L]] dies here
// CUDA-NEXT: shardc_rt_cuda_cross_entropy_and_grad_bf16(K, {{v[0-9]+}}, [[L]], {{v[0-9]+}}, {{v[0-9]+}}, [[D]], 8, 8, 8)
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 param-dtype=bf16 fuse=false output=/dev/null" | shardc-translate --shardc-to-cuda | FileCheck %s --check-prefix=CUDA-UNFUSED
// CUDA-UNFUSED: shardc_rt_bf16 *[[D:v[0-9]+]] = [[L:v[0-9]+]]; // in place: [[L]] dies here
// CUDA-UNFUSED-NEXT: shardc_rt_cuda_cross_entropy_grad_bf16(K, {{v[0-9]+}}, [[L]], {{v[0-9]+}}, [[D]], 8, 8, 8)
//
// An operand read later keeps its buffer: the GELU's input is its
// gradient's too. The gradient reaching the GELU dies there: GELU's
// gradient is written over it.
// RUN: shardc-opt %S/../../tools/shardc-opt/Inputs/mlp.mlir --shardc-pipeline="strategy=zero3 mesh=2 fuse=false output=/dev/null" | shardc-translate --shardc-to-host-cpp | FileCheck %s --check-prefix=GELU
// GELU: shardc_rt_linear_f32({{.*}}, [[X:v[0-9]+]], 4, 16, 32);
// GELU-NEXT: float *[[Y:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 512));
// GELU-NEXT: shardc_rt_gelu_f32([[X]], [[Y]], 128);
// GELU: // backward "fc0"
// GELU-NEXT: shardc_rt_region_begin(ctx, "backward fc0");
// GELU-NEXT: float *[[DX:v[0-9]+]] = [[DY:v[0-9]+]]; // in place: [[DY]] dies here
// GELU-NEXT: shardc_rt_gelu_grad_f32([[DY]], [[X]], [[DX]], 128);
//
// Chains, through reshapes and unit boundaries: forward scales, a relu and a
// gelu whose inputs die there, and in the backward the logits' gradient, the
// scales' and the activations' gradients, 13 results written in place; the
// step's gradients still match finite differences.
// RUN: %shardc emit %S/Inputs/in-place-chain.mlir --strategy ddp --mesh 1 --quiet -o %t/chain.cpp
// RUN: sed -n '/^void step(/,/^}/p' %t/chain.cpp | grep -c "in place" | FileCheck %s --check-prefix=CHAIN-SITES
// CHAIN-SITES: 13
// The evaluation step keeps nothing for a backward: 8 of its forward's
// results are written over inputs that die there.
// RUN: sed -n '/^void eval_step(/,/^}/p' %t/chain.cpp | grep -c "in place" | FileCheck %s --check-prefix=EVAL-SITES
// EVAL-SITES: 8
// RUN: %shardc run %S/Inputs/in-place-chain.mlir --strategy ddp --np 1 --quiet -- --check-grads 8 | FileCheck %s --check-prefix=CHAIN
// CHAIN: check-grads: 16 elements, 0 off
//
// The ledger's categories follow each writer of a buffer: fc1.p's gradient
// is the logits' gradient, written over the logits, which are still counted
// as activations at the loss: x (512 B), y (32 B), the loss (4 B) and the
// 8x1000 logits (32000 B) = 32548 B; fused, the seed (4 B) instead of the
// loss, and the logits still counted (the fused op writes its gradient over
// them as it ends).
// RUN: shardc-opt %S/Inputs/in-place-grad.mlir --shardc-pipeline="strategy=ddp mesh=1 fuse=false" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CATEGORY
// RUN: shardc-opt %S/Inputs/in-place-grad.mlir --shardc-pipeline="strategy=ddp mesh=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CATEGORY
// CATEGORY: activations 32548

train.model @classifier batch 16 optimizer #train.adamw<lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.01> {
  %x = train.input "x" : tensor<16x2xf32>
  %y = train.input "y" : tensor<16xi32>
  %logits = train.unit "head" (%x) : (tensor<16x2xf32>) -> tensor<16x8xf32> {
  ^bb0(%a: tensor<16x2xf32>):
    %w = train.param "head.weight" init(#train.normal<mean = 0.0, std = 2.0e-02>) : tensor<8x2xf32>
    %o = train.linear %a, %w : (tensor<16x2xf32>, tensor<8x2xf32>) -> tensor<16x8xf32>
    train.yield %o : tensor<16x8xf32>
  }
  %loss = train.cross_entropy %logits, %y : (tensor<16x8xf32>, tensor<16xi32>) -> tensor<f32>
  train.return %loss : tensor<f32>
}
