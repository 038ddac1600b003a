//===- Optimizer.cpp - AdamW on what each rank owns -----------------------===//
//
// The optimizer's ABI for emitted steps, on either backend: the update
// itself (backendAdamW) and in-order copies (backendCopy) are the backend's.
// A BF16 param is updated in its f32 master copy; the update rounds the
// master into the value (or the step's `updated` buffer) as it goes.
//
//===----------------------------------------------------------------------===//

#include "Backend.h"
#include "Context.h"
#include "GradCheck.h"

#include "shardc_rt/Error.h"

using namespace shardc::rt;

extern "C" {

void shardc_rt_adamw(shardc_rt_context *ctx, int32_t index, const void *grad,
                     shardc_rt_dtype gradDtype) {
  ParamState &p = paramAt(ctx, index, "shardc_rt_adamw");
  if (captureGradient(*ctx, index, -1, grad, gradDtype))
    return;
  int64_t used = p.stored.end - p.stored.begin;
  if (p.master)
    backendAdamW(*ctx, p.master, p.expAvg, p.expAvgSq, grad, gradDtype, used,
                 static_cast<shardc_rt_bf16 *>(p.value));
  else
    backendAdamW(*ctx, static_cast<float *>(p.value), p.expAvg, p.expAvgSq,
                 grad, gradDtype, used, nullptr);
}

void shardc_rt_adamw_shard(shardc_rt_context *ctx, int32_t index,
                           const void *grad, shardc_rt_dtype gradDtype,
                           void *updated) {
  ParamState &p = paramAt(ctx, index, "shardc_rt_adamw_shard");
  int64_t used = p.optimized.end - p.optimized.begin;
  if (p.master) {
    backendAdamW(*ctx, p.master, p.expAvg, p.expAvgSq, grad, gradDtype, used,
                 static_cast<shardc_rt_bf16 *>(updated));
  } else {
    float *shard = static_cast<float *>(p.value) + p.optimized.begin;
    backendAdamW(*ctx, shard, p.expAvg, p.expAvgSq, grad, gradDtype, used,
                 nullptr);
    backendCopy(*ctx, updated, shard, used * 4);
  }
  backendZero(*ctx, elementAt(updated, used, p.dtype),
              (p.optimized.count - used) * elementBytes(p.dtype));
}

void shardc_rt_adamw_flat(shardc_rt_context *ctx, int32_t group,
                          const void *grad, shardc_rt_dtype gradDtype,
                          void *updated) {
  FlatState &f = flatAt(ctx, group, "shardc_rt_adamw_flat");
  int64_t size = elementBytes(f.dtype);
  if (f.value) {
    if (captureGradient(*ctx, -1, group, grad, gradDtype))
      return;
    if (f.master)
      backendAdamW(*ctx, f.master, f.expAvg, f.expAvgSq, grad, gradDtype,
                   f.used, static_cast<shardc_rt_bf16 *>(f.value));
    else
      backendAdamW(*ctx, static_cast<float *>(f.value), f.expAvg, f.expAvgSq,
                   grad, gradDtype, f.used, nullptr);
    if (updated)
      backendCopy(*ctx, updated, f.value, f.count * size);
    return;
  }
  // ZeRO-1/2: the piece spans the members' whole values; it is updated in
  // `updated` (the step's buffer for it) and written back.
  SHARDC_RT_CHECK(updated, "shardc_rt_adamw_flat",
                  "a piece of whole params needs an output buffer");
  backendZero(*ctx, elementAt(updated, f.used, f.dtype),
              (f.count - f.used) * size);
  if (f.master) {
    backendAdamW(*ctx, f.master, f.expAvg, f.expAvgSq, grad, gradDtype,
                 f.used, static_cast<shardc_rt_bf16 *>(updated));
  } else {
    forEachMemberRange(*ctx, f, [&](ParamState &p, int64_t from, int64_t to,
                                    int64_t at) {
      backendCopy(*ctx, elementAt(updated, at, f.dtype),
                  elementAt(p.value, from, f.dtype), (to - from) * size);
    });
    backendAdamW(*ctx, static_cast<float *>(updated), f.expAvg, f.expAvgSq,
                 grad, gradDtype, f.used, nullptr);
  }
  forEachMemberRange(*ctx, f, [&](ParamState &p, int64_t from, int64_t to,
                                  int64_t at) {
    backendCopy(*ctx, elementAt(p.value, from, f.dtype),
                elementAt(updated, at, f.dtype), (to - from) * size);
  });
}

void shardc_rt_set_param(shardc_rt_context *ctx, int32_t index,
                         const void *full) {
  ParamState &p = paramAt(ctx, index, "shardc_rt_set_param");
  backendCopy(*ctx, p.value, full, p.numel * elementBytes(p.dtype));
}

} // extern "C"
