//===- GradCheck.cpp - The compiled step against finite differences -------===//
//
// `--check-grads K` runs the step as compiled (autodiff, kernels, emitter and
// runtime together) on one rank with the optimizer turned into a recorder of
// the gradients it is handed, then compares K elements of each trainable
// param's gradient with central differences of the step's loss.
//
//===----------------------------------------------------------------------===//

#include "GradCheck.h"

#include "Backend.h"
#include "Context.h"

#include "shardc_rt/Error.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

namespace shardc::rt {

namespace {

/// Where element `e` of param `i` lives: in backend memory, or host memory
/// (offload_params).
float *elementOf(shardc_rt_context &ctx, int32_t i, int64_t e) {
  ParamState &p = ctx.params[i];
  if (p.value)
    return static_cast<float *>(p.value) + (e - p.stored.begin);
  FlatState &f = ctx.flats[p.info->flat];
  int32_t member = 0;
  while (f.info->members[member] != i)
    ++member;
  return static_cast<float *>(f.value) + (f.offsets[member] + e - f.begin);
}

float runStep(shardc_rt_context &ctx) {
  float loss = 0.0f;
  backendStartStep(ctx);
  ctx.model->step(&ctx, &loss);
  backendFinishStep(ctx);
  return loss;
}

} // namespace

bool captureGradient(shardc_rt_context &ctx, int32_t param, int32_t flat,
                     const void *grad, shardc_rt_dtype gradDtype) {
  if (!ctx.capturedGrads)
    return false;
  // f32 params' gradients: f32, or bf16 under --reduce-dtype bf16.
  std::vector<std::vector<float>> &grads = *ctx.capturedGrads;
  if (param >= 0) {
    ParamState &p = ctx.params[param];
    copyOutFloats(grads[param].data(), grad, gradDtype, p.numel);
    return true;
  }
  FlatState &f = ctx.flats[flat];
  forEachMemberRange(ctx, f, [&](ParamState &p, int64_t from, int64_t to,
                                 int64_t at) {
    copyOutFloats(grads[&p - ctx.params.data()].data() + from,
                  elementAt(grad, at, gradDtype), gradDtype, to - from);
  });
  return true;
}

int checkGradients(shardc_rt_context &ctx, int64_t perParam) {
  SHARDC_RT_CHECK_ALL(ctx.worldSize == 1, "--check-grads",
                      "runs on one rank: build with --mesh 1");
  for (ParamState &p : ctx.params) {
    bool whole = p.stored.end - p.stored.begin == p.numel;
    bool updatedInPlace =
        p.info->frozen || p.info->optimizer.axes == p.info->storage.axes;
    if (p.info->flat >= 0)
      updatedInPlace = ctx.model->flats[p.info->flat].stores;
    SHARDC_RT_CHECK_ALL(whole && updatedInPlace, "--check-grads",
                        "needs --strategy ddp, zero3 or hsdp (zero1/zero2 "
                        "write updates back through all-gathers)");
    SHARDC_RT_CHECK_ALL(p.dtype == SHARDC_RT_F32, "--check-grads",
                        std::string("needs f32 params: '") + p.info->name +
                            "' is bf16 (--param-dtype bf16), too coarse for "
                            "finite differences");
  }
  std::vector<std::vector<float>> grads(ctx.params.size());
  for (size_t i = 0; i < ctx.params.size(); ++i)
    grads[i].assign(ctx.params[i].numel, 0.0f);
  ctx.capturedGrads = &grads;
  ctx.step = 1;
  float loss = runStep(ctx);
  // The perturbed steps' gradients go elsewhere: only the loss counts.
  std::vector<std::vector<float>> scratch = grads;
  ctx.capturedGrads = &scratch;

  // Central differences of the f32 loss, D(h) = (L(x + h) - L(x - h)) / 2h,
  // err by h^2 L''' / 6 (truncation) and about eps_f32 |L| / h (rounding).
  // Richardson's (4 D(h/2) - D(h)) / 3 cancels the h^2 term: a param that
  // adds straight into a small residual stream (a tiny GPT's biases and
  // position embeddings, std 0.02 against h = 1e-2) has an L''' that puts
  // D(h) alone 1e-3 off, the extrapolation 1e-5. The extrapolation's
  // rounding is up to 3 eps_f32 |L| / h, which a gradient is allowed
  // (at least 1e-4) besides 1e-2 |g|.
  const float h = 1e-2f;
  double absolute = std::max(1e-4, 3.0 * FLT_EPSILON * std::fabs(loss) / h);
  int failures = 0;
  int64_t checked = 0;
  std::printf("check-grads: loss %.6f, central differences at h = %g and "
              "%g extrapolated, |fd - g| <= %.1e + 1e-2 |g|\n",
              loss, h, h / 2, absolute);
  for (size_t i = 0; i < ctx.params.size(); ++i) {
    ParamState &p = ctx.params[i];
    if (p.info->frozen)
      continue;
    // The largest gradients, and evenly spread others.
    std::vector<int64_t> order(p.numel);
    std::iota(order.begin(), order.end(), 0);
    int64_t largest = std::min<int64_t>(perParam / 2 + perParam % 2, p.numel);
    std::partial_sort(order.begin(), order.begin() + largest, order.end(),
                      [&](int64_t a, int64_t b) {
                        return std::fabs(grads[i][a]) > std::fabs(grads[i][b]);
                      });
    std::vector<int64_t> elements(order.begin(), order.begin() + largest);
    for (int64_t k = 0; k < perParam / 2 && k < p.numel; ++k)
      elements.push_back((k * 7919 + 13) % p.numel);
    double worst = 0, worstAllowed = 0;
    for (int64_t e : elements) {
      float *where = elementOf(ctx, static_cast<int32_t>(i), e);
      // A stored value in host memory (offload_params) is read as it is.
      bool onHost = ctx.model->offload_params;
      auto read = [&](float *to) {
        if (onHost)
          std::memcpy(to, where, 4);
        else
          backendCopyOut(to, where, 4);
      };
      auto write = [&](const float *from) {
        if (onHost)
          std::memcpy(where, from, 4);
        else
          backendCopyIn(where, from, 4);
      };
      float value;
      read(&value);
      // The central difference with step `step`, between the values the
      // f32 param takes (value + step rounds).
      auto central = [&](float step) {
        float shifted[2] = {value + step, value - step};
        double losses[2];
        for (int side = 0; side < 2; ++side) {
          write(&shifted[side]);
          losses[side] = runStep(ctx);
        }
        write(&value);
        return (losses[0] - losses[1]) /
               (static_cast<double>(shifted[0]) - shifted[1]);
      };
      double fd = (4 * central(h / 2) - central(h)) / 3;
      double g = grads[i][e];
      double error = std::fabs(fd - g),
             allowed = absolute + 1e-2 * std::fabs(g);
      if (error / allowed > worst / std::max(worstAllowed, 1e-30)) {
        worst = error;
        worstAllowed = allowed;
      }
      failures += error > allowed;
      ++checked;
    }
    std::printf("  %-32s %3zu elements  max |fd - g| %.2e (allowed %.2e) %s\n",
                p.info->name, elements.size(), worst, worstAllowed,
                worst <= worstAllowed ? "ok" : "FAIL");
  }
  ctx.capturedGrads = nullptr;
  std::printf("check-grads: %lld elements, %d off\n",
              static_cast<long long>(checked), failures);
  return failures ? 1 : 0;
}

} // namespace shardc::rt
