//===- Optimizer.cpp - AdamW on the CPU -----------------------------------===//

#include "Context.h"
#include "GradCheck.h"

#include "shardc_rt/Error.h"

#include <cmath>
#include <string>

using namespace shardc::rt;

/// AdamW as torch.optim.AdamW: decoupled weight decay, bias-corrected
/// moments. Elements past `used` are shard padding and stay zero.
static void adamw(const shardc_rt_model &m, int64_t step, float *value,
                  float *expAvg, float *expAvgSq, const float *grad,
                  int64_t used) {
  double correction1 = 1.0 - std::pow(m.beta1, static_cast<double>(step));
  double correction2 = 1.0 - std::pow(m.beta2, static_cast<double>(step));
  float lr = static_cast<float>(m.lr), decay = 1.0f - lr * m.weight_decay;
  float beta1 = m.beta1, beta2 = m.beta2, eps = m.eps;
  float stepSize = static_cast<float>(m.lr / correction1);
  float rootCorrection2 = static_cast<float>(std::sqrt(correction2));
  for (int64_t i = 0; i < used; ++i) {
    float g = grad[i];
    expAvg[i] = beta1 * expAvg[i] + (1.0f - beta1) * g;
    expAvgSq[i] = beta2 * expAvgSq[i] + (1.0f - beta2) * g * g;
    float denom = std::sqrt(expAvgSq[i]) / rootCorrection2 + eps;
    value[i] = value[i] * decay - stepSize * expAvg[i] / denom;
  }
}

extern "C" {

void shardc_rt_adamw(shardc_rt_context *ctx, int32_t index,
                     const float *grad) {
  ParamState &p = paramAt(ctx, index, "shardc_rt_adamw");
  if (captureGradient(*ctx, index, -1, grad))
    return;
  adamw(*ctx->model, ctx->step, p.value, p.expAvg, p.expAvgSq, grad,
        p.stored.end - p.stored.begin);
}

void shardc_rt_adamw_shard(shardc_rt_context *ctx, int32_t index,
                           const float *grad, float *updated) {
  ParamState &p = paramAt(ctx, index, "shardc_rt_adamw_shard");
  int64_t used = p.optimized.end - p.optimized.begin;
  float *shard = p.value + p.optimized.begin;
  adamw(*ctx->model, ctx->step, shard, p.expAvg, p.expAvgSq, grad, used);
  std::copy(shard, shard + used, updated);
}

void shardc_rt_adamw_flat(shardc_rt_context *ctx, int32_t group,
                          const float *grad, float *updated) {
  FlatState &f = flatAt(ctx, group, "shardc_rt_adamw_flat");
  if (f.value && captureGradient(*ctx, -1, group, grad))
    return;
  if (f.value) {
    adamw(*ctx->model, ctx->step, f.value, f.expAvg, f.expAvgSq, grad, f.used);
    if (updated)
      std::copy(f.value, f.value + f.count, updated);
    return;
  }
  // ZeRO-1/2: the piece spans the members' whole values.
  std::vector<float> piece(f.count, 0.0f);
  forEachMemberRange(*ctx, f, [&](ParamState &p, int64_t from, int64_t to,
                                  int64_t at) {
    std::copy(p.value + from, p.value + to, piece.begin() + at);
  });
  adamw(*ctx->model, ctx->step, piece.data(), f.expAvg, f.expAvgSq, grad,
        f.used);
  forEachMemberRange(*ctx, f, [&](ParamState &p, int64_t from, int64_t to,
                                  int64_t at) {
    std::copy(piece.begin() + at, piece.begin() + at + (to - from),
              p.value + from);
  });
  if (updated)
    std::copy(piece.begin(), piece.end(), updated);
}

void shardc_rt_set_param(shardc_rt_context *ctx, int32_t index,
                         const float *full) {
  ParamState &p = paramAt(ctx, index, "shardc_rt_set_param");
  std::copy(full, full + p.numel, p.value);
}

} // extern "C"
