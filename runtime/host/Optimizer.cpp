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

#include <cmath>

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
          AdamWTensor t = piece;
          t.value += at;
          t.expAvg += at;
          t.expAvgSq += at;
          t.grad = elementAt(piece.grad, at, piece.gradDtype);
          if (t.rounded)
            t.rounded += at;
          t.count = to - from;
          t.noDecay = none;
          out.push_back(t);
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

} // namespace

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
  backendAdamW(*ctx, {storedPart(*ctx, p, grad, gradDtype, clip)});
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
    backendAdamW(*ctx, tensors);
}

void shardc_rt_adamw_shard(shardc_rt_context *ctx, int32_t index,
                           const void *grad, shardc_rt_dtype gradDtype,
                           const float *clip, void *updated) {
  ParamState &p = paramAt(ctx, index, "shardc_rt_adamw_shard");
  int64_t used = p.optimized.end - p.optimized.begin;
  if (p.master) {
    backendAdamW(*ctx, {{p.master, p.expAvg, p.expAvgSq, grad, gradDtype, used,
                         static_cast<shardc_rt_bf16 *>(updated), clip,
                         noDecay(*ctx, p)}});
  } else {
    float *shard = static_cast<float *>(p.value) + p.optimized.begin;
    backendAdamW(*ctx, {{shard, p.expAvg, p.expAvgSq, grad, gradDtype, used,
                         nullptr, clip, noDecay(*ctx, p)}});
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
    backendAdamW(*ctx, tensors);
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
  backendAdamW(*ctx, tensors);
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
  SHARDC_RT_CHECK(count > 0 && count <= 16 && sums && coef && maxNorm > 0,
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
