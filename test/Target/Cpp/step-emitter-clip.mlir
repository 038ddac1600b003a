// Gradient clipping (max_grad_norm, as torch.nn.utils.clip_grad_norm_) as
// both targets emit it: each rank sums the squares of the gradient pieces it
// updates, the partial sums are all-reduced over the axes the pieces are
// sharded on, one coefficient min(1, max / (norm + 1e-6)) is computed on the
// device, and every update reads it.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 output=/dev/null" | shardc-translate --shardc-to-host-cpp | FileCheck %s
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 output=/dev/null" | shardc-translate --shardc-to-cuda | FileCheck %s --check-prefix=CUDA
// RUN: shardc-opt %s --shardc-pipeline="strategy=ddp mesh=1 output=/dev/null" | shardc-translate --shardc-to-host-cpp | FileCheck %s --check-prefix=ONE --implicit-check-not=shardc_rt_all_reduce_start
// The coefficient must be the one the model asks for, and no update may
// bypass it while the model clips.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 output=/dev/null" | sed 's/max_norm 1.0/max_norm 2.0/' | not shardc-translate --shardc-to-host-cpp 2>&1 | FileCheck %s --check-prefix=MISMATCH
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 output=/dev/null" | sed -E 's/(train.adamw "l0.b", %%[0-9]+) clip %%[0-9]+/\1 clip %%loss/' | not shardc-translate --shardc-to-host-cpp 2>&1 | FileCheck %s --check-prefix=NOT-COEFFICIENT
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 output=/dev/null" | sed -E 's/^( *)(%%[0-9]+) = dist.clip_coefficient (.*)$/&\n\1%%again = dist.clip_coefficient \3/' | not shardc-translate --shardc-to-host-cpp 2>&1 | FileCheck %s --check-prefix=SECOND
// The runtime takes at most SHARDC_RT_MAX_CLIP_SUMS (16) sums: 17 are refused.
// RUN: shardc-opt %s --shardc-pipeline="strategy=zero3 mesh=2 output=/dev/null" | sed -E 's/dist.clip_coefficient (%%[0-9]+)/dist.clip_coefficient \1, \1, \1, \1, \1, \1, \1, \1, \1, \1, \1, \1, \1, \1, \1, \1, \1/' | not shardc-translate --shardc-to-host-cpp 2>&1 | FileCheck %s --check-prefix=MANY
// RUN: sed 's/, max_grad_norm = 1.0//' %s | shardc-opt --shardc-pipeline="strategy=zero3 mesh=2 output=/dev/null" | sed 's/weight_decay = 0.0>/weight_decay = 0.0, max_grad_norm = 1.0>/' | not shardc-translate --shardc-to-host-cpp 2>&1 | FileCheck %s --check-prefix=UNCLIPPED

// CHECK-LABEL: void step(shardc_rt_context *ctx, float *loss) {
// CHECK: shardc_rt_reduce_scatter_start(ctx, 1u, SHARDC_RT_F32, {{v[0-9]+}}, [[GW:v[0-9]+]], 9, 1, "l0.w");
// CHECK: shardc_rt_reduce_scatter_start(ctx, 1u, SHARDC_RT_F32, {{v[0-9]+}}, [[GB:v[0-9]+]], 3, 1, "l0.b");
// CHECK: float *[[PART:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 4));
// CHECK-NEXT: {
// CHECK-NEXT: const shardc_rt_tensor_ref squared[] = {{[{][{]}}[[GW]], SHARDC_RT_F32, 9}, {[[GB]], SHARDC_RT_F32, 3}};
// CHECK-NEXT: shardc_rt_sum_squares(ctx, 2, squared, [[PART]]);
// CHECK-NEXT: }
// CHECK-NEXT: float *[[SUM:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 4));
// CHECK-NEXT: shardc_rt_request *[[R:r[0-9]+]] = shardc_rt_all_reduce_start(ctx, 1u, SHARDC_RT_F32, [[PART]], [[SUM]], 1, 0, "grad norm");
// CHECK-NEXT: shardc_rt_wait(ctx, [[R]]);
// CHECK: float *[[COEF:v[0-9]+]] = static_cast<float *>(shardc_rt_alloc(ctx, 4));
// CHECK-NEXT: {
// CHECK-NEXT: const float *const sums[] = {[[SUM]]};
// CHECK-NEXT: shardc_rt_clip_coefficient(ctx, 1, sums, 1.{{0+}}e+00, [[COEF]]);
// CHECK-NEXT: }
// CHECK: {0, 0, [[GW]], SHARDC_RT_F32, [[COEF]]}, // l0.w
// CHECK-NEXT: {1, 0, [[GB]], SHARDC_RT_F32, [[COEF]]}, // l0.b
// CHECK: model.max_grad_norm = 1.{{0+}}e+00;
// CHECK-NEXT: model.decay_min_rank = 0;

// On the GPU the partial sum crosses to the communication stream and back by
// events, like any all-reduce.
// CUDA: shardc_rt_sum_squares(ctx, 2, squared, [[PART:v[0-9]+]]);
// CUDA: SHARDC_CUDA(cudaEventRecord(shardc_rt_cuda_event(ctx, [[E:[0-9]+]]), compute));
// CUDA-NEXT: SHARDC_CUDA(cudaStreamWaitEvent(comm1, shardc_rt_cuda_event(ctx, [[E]]), 0));
// CUDA-NEXT: shardc_rt_cuda_collective_start(ctx, 1u, "grad norm");
// CUDA-NEXT: SHARDC_NCCL(ncclAllReduce([[PART]], [[SUM:v[0-9]+]], 1, ncclFloat, ncclSum, nccl1, comm1));
// CUDA: shardc_rt_clip_coefficient(ctx, 1, sums, 1.{{0+}}e+00, [[COEF:v[0-9]+]]);
// CUDA: shardc_rt_adamw_group(ctx, 2, updates);
// CUDA: model.max_grad_norm = 1.{{0+}}e+00;

// One rank: nothing to all-reduce; the coefficient reads the local sum.
// ONE: shardc_rt_sum_squares(ctx, 2, squared, [[PART:v[0-9]+]]);
// ONE: const float *const sums[] = {[[PART]]};
// ONE: shardc_rt_clip_coefficient(ctx, 1, sums, 1.{{0+}}e+00, [[COEF:v[0-9]+]]);

// MISMATCH: error: 'dist.clip_coefficient' op clips to max_norm 2.{{0+}}e+00, but the model's optimizer has max_grad_norm 1.{{0+}}e+00
// NOT-COEFFICIENT: error: 'train.adamw' op takes a clip that is not a dist.clip_coefficient
// SECOND: error: 'dist.clip_coefficient' op is a second clip coefficient of the step
// MANY: error: 'dist.clip_coefficient' op takes 17 sums of squares; the runtime's shardc_rt_clip_coefficient takes at most 16
// UNCLIPPED: error: 'train.adamw' op takes its gradient unclipped, but the model's optimizer has max_grad_norm 1.{{0+}}e+00 (--shardc-shard inserts the clipping)

module {
  train.model @tiny batch 4 optimizer <lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0, max_grad_norm = 1.0> {
    %x = train.input "x" : tensor<4x3xf32>
    %y = train.input "y" : tensor<4xi32>
    %h = train.unit "l0"(%x) : (tensor<4x3xf32>) -> tensor<4x5xf32> {
    ^bb0(%a: tensor<4x3xf32>):
      %w = train.param "l0.w" init(#train.normal<std = 0.5>) : tensor<5x3xf32>
      %b = train.param "l0.b" init(#train.zeros) : tensor<5xf32>
      %l = train.linear %a, %w, %b : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
      %g = train.gelu %l : tensor<4x5xf32>
      train.yield %g : tensor<4x5xf32>
    }
    %loss = train.cross_entropy %h, %y : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
    train.return %loss : tensor<f32>
  }
}
