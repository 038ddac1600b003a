//===- Optimizer.cpp - AdamW on the device --------------------------------===//

#include "../host/Context.h"
#include "../host/GradCheck.h"

#include "shardc_rt/Error.h"
#include "shardc_rt/shardc_rt_cuda.h"

using namespace shardc::rt;

namespace {

void adamw(shardc_rt_context *ctx, float *value, float *expAvg,
           float *expAvgSq, const float *grad, int64_t used) {
  const shardc_rt_model &m = *ctx->model;
  shardc_rt_cuda_adamw_f32(shardc_rt_cuda_kernels_of(ctx), value, expAvg,
                           expAvgSq, grad, used, static_cast<float>(m.lr),
                           static_cast<float>(m.beta1),
                           static_cast<float>(m.beta2),
                           static_cast<float>(m.eps),
                           static_cast<float>(m.weight_decay), ctx->step);
}

void copy(shardc_rt_context *ctx, float *dst, const float *src, int64_t n) {
  if (n > 0)
    SHARDC_CUDA(cudaMemcpyAsync(dst, src, n * 4, cudaMemcpyDeviceToDevice,
                                shardc_rt_cuda_compute_stream(ctx)));
}

} // namespace

extern "C" {

void shardc_rt_adamw(shardc_rt_context *ctx, int32_t index,
                     const float *grad) {
  ParamState &p = paramAt(ctx, index, "shardc_rt_adamw");
  if (captureGradient(*ctx, index, -1, grad))
    return;
  adamw(ctx, p.value, p.expAvg, p.expAvgSq, grad,
        p.stored.end - p.stored.begin);
}

void shardc_rt_adamw_shard(shardc_rt_context *ctx, int32_t index,
                           const float *grad, float *updated) {
  ParamState &p = paramAt(ctx, index, "shardc_rt_adamw_shard");
  int64_t used = p.optimized.end - p.optimized.begin;
  float *shard = p.value + p.optimized.begin;
  adamw(ctx, shard, p.expAvg, p.expAvgSq, grad, used);
  copy(ctx, updated, shard, used);
}

void shardc_rt_adamw_flat(shardc_rt_context *ctx, int32_t group,
                          const float *grad, float *updated) {
  FlatState &f = flatAt(ctx, group, "shardc_rt_adamw_flat");
  if (f.value && captureGradient(*ctx, -1, group, grad))
    return;
  if (f.value) {
    adamw(ctx, f.value, f.expAvg, f.expAvgSq, grad, f.used);
    if (updated)
      copy(ctx, updated, f.value, f.count);
    return;
  }
  // ZeRO-1/2: the piece spans the members' whole values; it is updated in
  // `updated` (the step's buffer for it) and written back.
  SHARDC_RT_CHECK(updated, "shardc_rt_adamw_flat",
                  "a piece of whole params needs an output buffer");
  forEachMemberRange(*ctx, f, [&](ParamState &p, int64_t from, int64_t to,
                                  int64_t at) {
    copy(ctx, updated + at, p.value + from, to - from);
  });
  adamw(ctx, updated, f.expAvg, f.expAvgSq, grad, f.used);
  forEachMemberRange(*ctx, f, [&](ParamState &p, int64_t from, int64_t to,
                                  int64_t at) {
    copy(ctx, p.value + from, updated + at, to - from);
  });
}

void shardc_rt_set_param(shardc_rt_context *ctx, int32_t index,
                         const float *full) {
  ParamState &p = paramAt(ctx, index, "shardc_rt_set_param");
  copy(ctx, p.value, full, p.numel);
}

} // extern "C"
