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

#include "shardc_rt/BFloat16.h"
#include "shardc_rt/Error.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

using namespace shardc::rt;

namespace {

/// AdamW's tensor for `count` elements of a stored f32 `value`, or of a
/// stored bf16 `value`'s f32 `master`, rounded into the value as it goes.
AdamWTensor storedTensor(void *value, float *master, float *expAvg,
                         float *expAvgSq, int64_t count, const void *grad,
                         shardc_rt_dtype gradDtype, const float *clip) {
  AdamWTensor t = {master,    expAvg, expAvgSq, grad,
                   gradDtype, count,  nullptr,  clip};
  if (master)
    t.rounded = static_cast<shardc_rt_bf16 *>(value);
  else
    t.value = static_cast<float *>(value);
  return t;
}

/// Whether param `p` goes without weight decay (#train.adamw's
/// decay_min_rank above its rank).
bool noDecay(const shardc_rt_context &ctx, const ParamState &p) {
  return static_cast<int64_t>(p.shape.size()) < ctx.model->decay_min_rank;
}

/// Param `p`'s stored part.
AdamWTensor storedPart(const shardc_rt_context &ctx, ParamState &p,
                       const void *grad, shardc_rt_dtype gradDtype,
                       const float *clip) {
  AdamWTensor t =
      storedTensor(p.value, p.master, p.expAvg, p.expAvgSq,
                   p.stored.end - p.stored.begin, grad, gradDtype, clip);
  t.noDecay = noDecay(ctx, p);
  return t;
}

/// Elements [from, from + count) of `t`'s update.
AdamWTensor sliceOf(const AdamWTensor &t, int64_t from, int64_t count) {
  AdamWTensor slice = t;
  slice.value += from;
  slice.expAvg += from;
  slice.expAvgSq += from;
  slice.grad = elementAt(t.grad, from, t.gradDtype);
  if (slice.rounded)
    slice.rounded += from;
  slice.count = count;
  return slice;
}

/// Appends `piece`, the update of this rank's piece of flat parameter `f`
/// (its elements [0, used)), cut where its members' weight decay changes.
void appendPiece(shardc_rt_context &ctx, FlatState &f, const AdamWTensor &piece,
                 std::vector<AdamWTensor> &out) {
  size_t first = out.size();
  int64_t end = 0;
  forEachMemberRange(
      ctx, f, [&](ParamState &p, int64_t from, int64_t to, int64_t at) {
        bool none = noDecay(ctx, p);
        if (out.size() > first && out.back().noDecay == none && at == end) {
          out.back().count += to - from;
        } else {
          out.push_back(sliceOf(piece, at, to - from));
          out.back().noDecay = none;
        }
        end = at + (to - from);
      });
}

/// The stored piece of flat parameter `f` (ZeRO-3, HSDP).
void appendStoredPiece(shardc_rt_context &ctx, FlatState &f, const void *grad,
                       shardc_rt_dtype gradDtype, const float *clip,
                       std::vector<AdamWTensor> &out) {
  appendPiece(ctx, f,
              storedTensor(f.value, f.master, f.expAvg, f.expAvgSq, f.used,
                           grad, gradDtype, clip),
              out);
}

constexpr double kPi = 3.14159265358979323846;

/// The update loop, one per gradient type, rounding into `rounded` or not
/// (kept apart so that the f32 loop stays a plain vectorisable loop).
struct AdamWScalars {
  float beta1, beta2, eps, decay, stepSize, rootCorrection2;
};

float gradValue(float g) { return g; }
float gradValue(shardc_rt_bf16 g) { return widen(g); }

/// `clip` is 1 when the update takes the gradient as it is (g * 1 is g), and
/// `decay` 1 without weight decay.
template <typename G>
void adamwLoop(const AdamWScalars &c, float *value, float *expAvg,
               float *expAvgSq, const G *grad, float clip, float decay,
               int64_t count, shardc_rt_bf16 *rounded) {
  for (int64_t i = 0; i < count; ++i) {
    float g = gradValue(grad[i]) * clip;
    expAvg[i] = c.beta1 * expAvg[i] + (1.0f - c.beta1) * g;
    expAvgSq[i] = c.beta2 * expAvgSq[i] + (1.0f - c.beta2) * g * g;
    float denom = std::sqrt(expAvgSq[i]) / c.rootCorrection2 + c.eps;
    value[i] = value[i] * decay - c.stepSize * expAvg[i] / denom;
  }
  if (rounded)
    for (int64_t i = 0; i < count; ++i)
      rounded[i] = narrow(value[i]);
}

/// `tensors` cut, in order, into runs of at most `budget`, where `count`
/// elements of a tensor cost count * perElement(t) + `perSlice` (a tensor
/// that does not fit is sliced; a run takes at least one element). Empty
/// tensors are dropped: their update does nothing.
template <typename PerElement>
std::vector<std::vector<AdamWTensor>>
cutIntoRuns(const std::vector<AdamWTensor> &tensors, int64_t budget,
            int64_t perSlice, PerElement perElement) {
  std::vector<std::vector<AdamWTensor>> runs(1);
  int64_t used = 0;
  for (const AdamWTensor &t : tensors)
    for (int64_t from = 0; from < t.count;) {
      int64_t room =
          std::max<int64_t>(budget - used - perSlice, 0) / perElement(t);
      if (room == 0 && !runs.back().empty()) {
        runs.emplace_back();
        used = 0;
        continue;
      }
      int64_t take = std::min(t.count - from, std::max<int64_t>(room, 1));
      runs.back().push_back(sliceOf(t, from, take));
      used += take * perElement(t) + perSlice;
      from += take;
    }
  return runs;
}

/// Fewest elements worth a thread of their own.
constexpr int64_t kElementsPerThread = int64_t(1) << 16;

/// hostAdamW on up to ctx.host.threads threads, each taking a run of about
/// as many elements: an element's update reads no other, so the result is
/// one thread's, bit for bit.
void parallelHostAdamW(shardc_rt_context &ctx,
                       const std::vector<AdamWTensor> &tensors) {
  int64_t total = 0;
  for (const AdamWTensor &t : tensors)
    total += t.count;
  int64_t threads = std::max<int64_t>(
      1, std::min<int64_t>(ctx.host.threads, total / kElementsPerThread));
  if (threads == 1)
    return hostAdamW(ctx, tensors);
  // At most `threads` runs: each but the last holds total / threads
  // elements, rounded up.
  std::vector<std::vector<AdamWTensor>> runs =
      cutIntoRuns(tensors, (total + threads - 1) / threads, 0,
                  [](const AdamWTensor &) { return int64_t(1); });
  std::vector<std::thread> helpers;
  for (size_t i = 1; i < runs.size(); ++i)
    helpers.emplace_back([&ctx, &runs, i] { hostAdamW(ctx, runs[i]); });
  hostAdamW(ctx, runs[0]);
  for (std::thread &helper : helpers)
    helper.join();
}

/// Bytes of staging a piece takes: rounded to 256, so that every piece
/// stays aligned.
int64_t stagingBytes(int64_t bytes) { return (bytes + 255) / 256 * 256; }

/// The bytes of `t`'s value an update stages per element: the f32 value
/// (copied both ways) or the master rounded (copied back); none where the
/// values are in host memory too (`valuesOnHost`, offload_params).
int64_t valueBytes(const AdamWTensor &t, bool valuesOnHost) {
  return valuesOnHost ? 0 : t.rounded ? 2 : 4;
}

/// The staging `count` elements of `t`'s update take: the gradient, the
/// clip coefficient, and the value (valueBytes).
int64_t stagingOf(const AdamWTensor &t, int64_t count, bool valuesOnHost) {
  return stagingBytes(count * elementBytes(t.gradDtype)) +
         stagingBytes(t.clip ? 4 : 0) +
         stagingBytes(count * valueBytes(t, valuesOnHost));
}

/// offload_optimizer: `tensors`' moments and masters are host memory
/// (backendAllocateHost), their gradients backend memory, and their values
/// backend memory too unless the params are offloaded (offload_params). In
/// runs that fit half the staging (ctx.host.stagingHalfBytes), copies each
/// gradient, its clip coefficient and a master-less (f32) value in backend
/// memory into the host's staging, updates there, and copies the values
/// written in backend memory (the f32 value, or the master rounded) back,
/// in order with the step: the next run's copies to the host, into the
/// other half, overlap this run's update.
void offloadedAdamW(shardc_rt_context &ctx,
                    const std::vector<AdamWTensor> &tensors) {
  HostMemory &host = ctx.host;
  bool valuesOnHost = ctx.model->offload_params;
  // Runs whose staging fits a half: a slice's three pieces are rounded to
  // 256 bytes each.
  std::vector<std::vector<AdamWTensor>> runs = cutIntoRuns(
      tensors, host.stagingHalfBytes, 3 * 256, [&](const AdamWTensor &t) {
        return elementBytes(t.gradDtype) + valueBytes(t, valuesOnHost);
      });
  int64_t half = 0;
  for (const std::vector<AdamWTensor> &run : runs) {
    int64_t needed = 0;
    for (const AdamWTensor &t : run)
      needed += stagingOf(t, t.count, valuesOnHost);
    half = std::max(half, needed);
  }
  // --trace's span of the copies and the update (on a GPU, between events
  // of the compute stream, which idles while the host updates).
  shardc_rt_region_begin(&ctx, "update on host");
  if (2 * half > host.stagingBytes) {
    // The staging's last copies back to the device must land first.
    backendWaitForHost(ctx);
    backendReleaseHost(host.staging);
    host.staging = backendAllocateHost(2 * half);
    SHARDC_RT_CHECK(host.staging, "offload_optimizer",
                    "out of host memory for " + std::to_string(2 * half) +
                        " bytes of update staging");
    host.stagingBytes = 2 * half;
  }
  // Run `r`'s copies to the host, into half r % 2; its tensors pointing
  // there.
  auto stageIn = [&](size_t r) {
    char *at = static_cast<char *>(host.staging) + (r % 2) * half;
    auto stage = [&](int64_t bytes) {
      char *piece = at;
      at += stagingBytes(bytes);
      return piece;
    };
    // Copies of `bytes` (none where a shard is empty), counted.
    auto toHost = [&](const void *src, int64_t bytes, bool counted) {
      char *dst = stage(bytes);
      if (bytes > 0)
        backendCopyToHost(ctx, dst, src, bytes);
      ctx.timers.hostCopyBytes += counted ? bytes : 0;
      return dst;
    };
    std::vector<AdamWTensor> staged = runs[r];
    for (AdamWTensor &t : staged) {
      t.grad = toHost(t.grad, t.count * elementBytes(t.gradDtype), true);
      // The coefficient, 4 bytes, is not counted (as the ledger does not).
      if (t.clip)
        t.clip = reinterpret_cast<const float *>(toHost(t.clip, 4, false));
      // Where there is a master, `value` is it, in host memory, and the
      // bf16 value is written rounded; else `value` is the f32 value. The
      // values in host memory are updated in place.
      if (valuesOnHost)
        continue;
      if (t.rounded)
        t.rounded = reinterpret_cast<shardc_rt_bf16 *>(stage(t.count * 2));
      else
        t.value = reinterpret_cast<float *>(toHost(t.value, t.count * 4, true));
    }
    return staged;
  };
  std::vector<AdamWTensor> staged[2];
  staged[0] = stageIn(0);
  for (size_t r = 0; r < runs.size(); ++r) {
    // Run r's copies to the host have landed, and run r - 1's back to the
    // device, which read the half run r + 1 now copies into.
    backendWaitForHost(ctx);
    if (r + 1 < runs.size())
      staged[(r + 1) % 2] = stageIn(r + 1);
    auto started = std::chrono::steady_clock::now();
    parallelHostAdamW(ctx, staged[r % 2]);
    ctx.timers.hostUpdateSeconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                      started)
            .count();
    for (size_t i = 0; i < runs[r].size() && !valuesOnHost; ++i) {
      const AdamWTensor &t = runs[r][i], &s = staged[r % 2][i];
      void *dst = t.rounded ? static_cast<void *>(t.rounded) : t.value;
      const void *src =
          t.rounded ? static_cast<const void *>(s.rounded) : s.value;
      int64_t bytes = t.count * (t.rounded ? 2 : 4);
      if (bytes > 0)
        backendCopyInput(ctx, dst, src, bytes);
      ctx.timers.hostCopyBytes += bytes;
    }
  }
  shardc_rt_region_end(&ctx);
}

/// The AdamW update of `tensors`, where the optimizer state lives.
void adamW(shardc_rt_context &ctx, const std::vector<AdamWTensor> &tensors) {
  if (ctx.model->offload_optimizer)
    offloadedAdamW(ctx, tensors);
  else
    backendAdamW(ctx, tensors);
}

} // namespace

void shardc::rt::hostAdamW(shardc_rt_context &ctx,
                           const std::vector<AdamWTensor> &tensors) {
  const shardc_rt_model &m = *ctx.model;
  double step = static_cast<double>(ctx.step);
  double correction1 = 1.0 - std::pow(m.beta1, step);
  double correction2 = 1.0 - std::pow(m.beta2, step);
  double rate = learningRate(m, ctx.step);
  float lr = static_cast<float>(rate);
  AdamWScalars c = {static_cast<float>(m.beta1),
                    static_cast<float>(m.beta2),
                    static_cast<float>(m.eps),
                    static_cast<float>(1.0f - lr * m.weight_decay),
                    static_cast<float>(rate / correction1),
                    static_cast<float>(std::sqrt(correction2))};
  for (const AdamWTensor &t : tensors) {
    float clip = t.clip ? *t.clip : 1.0f;
    float decay = t.noDecay ? 1.0f : c.decay;
    if (t.gradDtype == SHARDC_RT_BF16)
      adamwLoop(c, t.value, t.expAvg, t.expAvgSq,
                static_cast<const shardc_rt_bf16 *>(t.grad), clip, decay,
                t.count, t.rounded);
    else
      adamwLoop(c, t.value, t.expAvg, t.expAvgSq,
                static_cast<const float *>(t.grad), clip, decay, t.count,
                t.rounded);
  }
}

double shardc::rt::learningRate(const shardc_rt_model &model, int64_t step) {
  if (model.warmup > 0 && step <= model.warmup)
    return model.lr * static_cast<double>(step) /
           static_cast<double>(model.warmup);
  if (model.decay_steps == 0)
    return model.lr;
  if (step >= model.decay_steps)
    return model.min_lr;
  double progress = static_cast<double>(step - model.warmup) /
                    static_cast<double>(model.decay_steps - model.warmup);
  return model.min_lr +
         (model.lr - model.min_lr) * 0.5 * (1.0 + std::cos(kPi * progress));
}

extern "C" {

void shardc_rt_adamw(shardc_rt_context *ctx, int32_t index, const void *grad,
                     shardc_rt_dtype gradDtype, const float *clip) {
  ParamState &p = paramAt(ctx, index, "shardc_rt_adamw");
  if (captureGradient(*ctx, index, -1, grad, gradDtype))
    return;
  adamW(*ctx, {storedPart(*ctx, p, grad, gradDtype, clip)});
}

void shardc_rt_adamw_group(shardc_rt_context *ctx, int32_t count,
                           const shardc_rt_adamw_update *updates) {
  SHARDC_RT_CHECK(count >= 0 && (count == 0 || updates),
                  "shardc_rt_adamw_group",
                  "a group of " + std::to_string(count) + " updates" +
                      (updates ? "" : " and no update list"));
  std::vector<AdamWTensor> tensors;
  tensors.reserve(count);
  for (int32_t i = 0; i < count; ++i) {
    const shardc_rt_adamw_update &u = updates[i];
    if (u.flat) {
      FlatState &f = flatAt(ctx, u.index, "shardc_rt_adamw_group");
      SHARDC_RT_CHECK(f.value, "shardc_rt_adamw_group",
                      "flat parameter " + std::to_string(u.index) +
                          " is stored whole: its update needs an output "
                          "buffer (shardc_rt_adamw_flat)");
      if (!captureGradient(*ctx, -1, u.index, u.grad, u.grad_dtype))
        appendStoredPiece(*ctx, f, u.grad, u.grad_dtype, u.clip, tensors);
    } else {
      ParamState &p = paramAt(ctx, u.index, "shardc_rt_adamw_group");
      if (!captureGradient(*ctx, u.index, -1, u.grad, u.grad_dtype))
        tensors.push_back(storedPart(*ctx, p, u.grad, u.grad_dtype, u.clip));
    }
  }
  if (!tensors.empty())
    adamW(*ctx, tensors);
}

void shardc_rt_adamw_shard(shardc_rt_context *ctx, int32_t index,
                           const void *grad, shardc_rt_dtype gradDtype,
                           const float *clip, void *updated) {
  ParamState &p = paramAt(ctx, index, "shardc_rt_adamw_shard");
  int64_t used = p.optimized.end - p.optimized.begin;
  if (p.master) {
    adamW(*ctx,
          {{p.master, p.expAvg, p.expAvgSq, grad, gradDtype, used,
            static_cast<shardc_rt_bf16 *>(updated), clip, noDecay(*ctx, p)}});
  } else {
    float *shard = static_cast<float *>(p.value) + p.optimized.begin;
    adamW(*ctx, {{shard, p.expAvg, p.expAvgSq, grad, gradDtype, used, nullptr,
                  clip, noDecay(*ctx, p)}});
    backendCopy(*ctx, updated, shard, used * 4);
  }
  backendZero(*ctx, elementAt(updated, used, p.dtype),
              (p.optimized.count - used) * elementBytes(p.dtype));
}

void shardc_rt_adamw_flat(shardc_rt_context *ctx, int32_t group,
                          const void *grad, shardc_rt_dtype gradDtype,
                          const float *clip, void *updated) {
  FlatState &f = flatAt(ctx, group, "shardc_rt_adamw_flat");
  int64_t size = elementBytes(f.dtype);
  if (f.value) {
    if (captureGradient(*ctx, -1, group, grad, gradDtype))
      return;
    std::vector<AdamWTensor> tensors;
    appendStoredPiece(*ctx, f, grad, gradDtype, clip, tensors);
    adamW(*ctx, tensors);
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
  std::vector<AdamWTensor> tensors;
  if (f.master) {
    appendPiece(*ctx, f,
                {f.master, f.expAvg, f.expAvgSq, grad, gradDtype, f.used,
                 static_cast<shardc_rt_bf16 *>(updated), clip},
                tensors);
  } else {
    forEachMemberRange(*ctx, f, [&](ParamState &p, int64_t from, int64_t to,
                                    int64_t at) {
      backendCopy(*ctx, elementAt(updated, at, f.dtype),
                  elementAt(p.value, from, f.dtype), (to - from) * size);
    });
    appendPiece(*ctx, f,
                {static_cast<float *>(updated), f.expAvg, f.expAvgSq, grad,
                 gradDtype, f.used, nullptr, clip},
                tensors);
  }
  adamW(*ctx, tensors);
  forEachMemberRange(*ctx, f, [&](ParamState &p, int64_t from, int64_t to,
                                  int64_t at) {
    backendCopy(*ctx, elementAt(p.value, from, f.dtype),
                elementAt(updated, at, f.dtype), (to - from) * size);
  });
}

void shardc_rt_sum_squares(shardc_rt_context *ctx, int32_t count,
                           const shardc_rt_tensor_ref *tensors, float *sum) {
  SHARDC_RT_CHECK(count > 0 && tensors && sum, "shardc_rt_sum_squares",
                  "a sum of " + std::to_string(count) + " tensors" +
                      (tensors && sum ? "" : " without tensors or an output"));
  for (int32_t i = 0; i < count; ++i)
    SHARDC_RT_CHECK((tensors[i].dtype == SHARDC_RT_F32 ||
                     tensors[i].dtype == SHARDC_RT_BF16) &&
                        tensors[i].count >= 0 &&
                        (tensors[i].data || tensors[i].count == 0),
                    "shardc_rt_sum_squares",
                    "tensor " + std::to_string(i) + " of dtype " +
                        std::to_string(tensors[i].dtype) + " and " +
                        std::to_string(tensors[i].count) +
                        " elements: expected F32 or BF16 data");
  backendSumSquares(*ctx, {tensors, tensors + count}, sum);
}

void shardc_rt_clip_coefficient(shardc_rt_context *ctx, int32_t count,
                                const float *const *sums, double maxNorm,
                                float *coef) {
  SHARDC_RT_CHECK(count > 0 && count <= SHARDC_RT_MAX_CLIP_SUMS && sums &&
                      coef && maxNorm > 0,
                  "shardc_rt_clip_coefficient",
                  "max_norm " + std::to_string(maxNorm) + " over " +
                      std::to_string(count) + " sums" +
                      (sums && coef ? "" : " without sums or an output"));
  SHARDC_RT_CHECK(ctx->gradNorm, "shardc_rt_clip_coefficient",
                  "the step clips gradients but the model's max_grad_norm "
                  "is " +
                      std::to_string(ctx->model->max_grad_norm));
  backendClipCoefficient(*ctx, {sums, sums + count}, maxNorm, coef,
                         ctx->gradNorm);
}

void shardc_rt_set_param(shardc_rt_context *ctx, int32_t index,
                         const void *full) {
  ParamState &p = paramAt(ctx, index, "shardc_rt_set_param");
  backendCopy(*ctx, p.value, full, p.numel * elementBytes(p.dtype));
}

} // extern "C"
