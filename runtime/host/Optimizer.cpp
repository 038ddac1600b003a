//===- Optimizer.cpp - AdamW on what each rank owns -----------------------===//
//
// The optimizer's ABI for emitted steps, on either backend: the update
// itself (backendAdamW) and in-order copies (backendCopy) are the backend's.
//
//===----------------------------------------------------------------------===//

#include "Backend.h"
#include "Context.h"
#include "GradCheck.h"

#include "shardc_rt/Error.h"

using namespace shardc::rt;

extern "C" {

void shardc_rt_adamw(shardc_rt_context *ctx, int32_t index,
                     const float *grad) {
  ParamState &p = paramAt(ctx, index, "shardc_rt_adamw");
  if (captureGradient(*ctx, index, -1, grad))
    return;
  backendAdamW(*ctx, p.value, p.expAvg, p.expAvgSq, grad,
               p.stored.end - p.stored.begin);
}

void shardc_rt_adamw_shard(shardc_rt_context *ctx, int32_t index,
                           const float *grad, float *updated) {
  ParamState &p = paramAt(ctx, index, "shardc_rt_adamw_shard");
  int64_t used = p.optimized.end - p.optimized.begin;
  float *shard = p.value + p.optimized.begin;
  backendAdamW(*ctx, shard, p.expAvg, p.expAvgSq, grad, used);
  backendCopy(*ctx, updated, shard, used);
  backendZero(*ctx, updated + used, (p.optimized.count - used) * 4);
}

void shardc_rt_adamw_flat(shardc_rt_context *ctx, int32_t group,
                          const float *grad, float *updated) {
  FlatState &f = flatAt(ctx, group, "shardc_rt_adamw_flat");
  if (f.value) {
    if (captureGradient(*ctx, -1, group, grad))
      return;
    backendAdamW(*ctx, f.value, f.expAvg, f.expAvgSq, grad, f.used);
    if (updated)
      backendCopy(*ctx, updated, f.value, f.count);
    return;
  }
  // ZeRO-1/2: the piece spans the members' whole values; it is updated in
  // `updated` (the step's buffer for it) and written back.
  SHARDC_RT_CHECK(updated, "shardc_rt_adamw_flat",
                  "a piece of whole params needs an output buffer");
  backendZero(*ctx, updated + f.used, (f.count - f.used) * 4);
  forEachMemberRange(*ctx, f, [&](ParamState &p, int64_t from, int64_t to,
                                  int64_t at) {
    backendCopy(*ctx, updated + at, p.value + from, to - from);
  });
  backendAdamW(*ctx, updated, f.expAvg, f.expAvgSq, grad, f.used);
  forEachMemberRange(*ctx, f, [&](ParamState &p, int64_t from, int64_t to,
                                  int64_t at) {
    backendCopy(*ctx, p.value + from, updated + at, to - from);
  });
}

void shardc_rt_set_param(shardc_rt_context *ctx, int32_t index,
                         const float *full) {
  ParamState &p = paramAt(ctx, index, "shardc_rt_set_param");
  backendCopy(*ctx, p.value, full, p.numel);
}

} // extern "C"
