//===- Attention.cu - Causal multi-head attention and its gradient --------===//
//
// attention reads q, k and v in place from the fused qkv through cuBLAS
// leading dimensions (3C) and batch strides, as the CPU kernel does: per
// chunk of heads (or of batch elements), the full T x T scores are one
// strided-batched GEMM, a causal softmax kernel (one warp per row) turns
// them into probabilities with zeros above the diagonal, and y = P v is a
// second GEMM writing each head's columns of out[B, T, C]; the backward
// recomputes P and uses GEMMs likewise (dP = dy v^T, dv = P^T dy,
// dS = P (dP - rowsum(P dP)), dq = dS k / sqrt(d), dk = dS^T q / sqrt(d));
// for bf16 the GEMMs read bf16 operands, the probabilities rounded to bf16
// where a GEMM reads them. With set_flash_attention on, the fused kernels
// of FlashAttention.h (no T x T scores in memory) run it instead where the
// head size allows: for bf16, and for f32 where TF32 is allowed (TF32
// tensor cores; with TF32 off, f32 keeps the GEMMs' full fp32 products);
// with set_cudnn_attention on, bf16 runs through cuDNN's fused attention
// (CudnnAttention.h) where cuDNN takes the shape.
//
//===----------------------------------------------------------------------===//

#include "Elementwise.cuh"
#include "KernelUtils.cuh"

using namespace shardc::rt::cuda;

namespace {

/// Causal softmax of `rows` rows of t scores, in place; row r is query
/// r % t, which sees keys [0, r % t]; the future is set to 0 so that the
/// GEMMs over whole rows ignore it (as the CPU kernel). Where lse is not
/// null, lse[(r / t) * lseStride + r % t] receives the row's log-sum-exp.
__global__ void causalSoftmaxKernel(float *scores, int64_t rows, int64_t t,
                                    float *lse, int64_t lseStride) {
  int64_t row = warpRow();
  if (row >= rows)
    return;
  int lane = threadIdx.x & 31;
  float *p = scores + row * t;
  int64_t seen = row % t + 1;
  float maxScore = -INFINITY;
  for (int64_t j = lane; j < seen; j += 32)
    maxScore = fmaxf(maxScore, p[j]);
  maxScore = warpReduce(maxScore, MaxOp());
  float sum = 0.0f;
  for (int64_t j = lane; j < seen; j += 32) {
    float e = expf(p[j] - maxScore);
    p[j] = e;
    sum += e;
  }
  sum = warpReduce(sum, SumOp());
  if (lse && lane == 0)
    lse[(row / t) * lseStride + row % t] = maxScore + logf(sum);
  float inverse = 1.0f / sum;
  // Each lane rescales the entries it wrote itself.
  for (int64_t j = lane; j < t; j += 32)
    p[j] = j < seen ? p[j] * inverse : 0.0f;
}

/// Through the causal softmax: dS = P (dP - sum_j P dP), in place of dP
/// (rows as causalSoftmaxKernel; masked entries get 0).
__global__ void causalSoftmaxGradKernel(const float *probs, float *dprobs,
                                        int64_t rows, int64_t t) {
  int64_t row = warpRow();
  if (row >= rows)
    return;
  int lane = threadIdx.x & 31;
  const float *p = probs + row * t;
  float *dp = dprobs + row * t;
  int64_t seen = row % t + 1;
  float dot = 0.0f;
  for (int64_t j = lane; j < seen; j += 32)
    dot += p[j] * dp[j];
  dot = warpReduce(dot, SumOp());
  for (int64_t j = lane; j < t; j += 32)
    dp[j] = j < seen ? p[j] * (dp[j] - dot) : 0.0f;
}

/// How the B x H (batch element, head) pairs are walked: a loop over the
/// `outer` dimension, and strided-batched GEMMs over chunks of the `inner`
/// one, the larger of the two (fewer launches). Strides are in elements:
/// of qkv / dqkv (row stride 3C), of out / dy (row stride C) and of the
/// log-sum-exps lse[B, H, T].
struct HeadWalk {
  int64_t outer, inner;
  int64_t qkvOuter, qkvInner;
  int64_t outOuter, outInner;
  int64_t lseOuter, lseInner;
  int64_t chunk; // inner pairs per GEMM
};

HeadWalk planHeads(const Kernels *k, int64_t b, int64_t t, int64_t c,
                   int64_t heads) {
  int64_t d = c / heads;
  HeadWalk walk;
  if (heads >= b)
    walk = {b, heads, t * 3 * c, d, t * c, d, heads * t, t, 0};
  else
    walk = {heads, b, d, t * 3 * c, d, t * c, t, heads * t, 0};
  walk.chunk = std::max<int64_t>(
      1, std::min(walk.inner, k->attentionScoreFloats / (t * t)));
  return walk;
}

/// probs[count, t, t] = causal softmax(q k^T / sqrt(d)) of `count` pairs of
/// the walk, q and k at the first pair's head; lse (null, or at the first
/// pair's rows) receives the rows' log-sum-exps.
template <typename T>
void attentionProbabilities(Kernels *k, const HeadWalk &walk, const T *q,
                            const T *kk, int64_t t, int64_t c, int64_t d,
                            int64_t count, float *probs, float *lse) {
  float alpha = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  gemm(k, false, true, t, t, d, alpha, q, 3 * c, walk.qkvInner, kk, 3 * c,
       walk.qkvInner, 0.0f, probs, t, t * t, count);
  int64_t rows = count * t;
  causalSoftmaxKernel<<<warpRowGrid(rows), kThreads, 0, k->stream>>>(
      probs, rows, t, lse, walk.lseInner);
  SHARDC_CUDA_CHECK_LAUNCH();
}

/// The probabilities (or their gradient) as the GEMMs that read them take
/// them: the f32 scores themselves, or (bf16) a rounded copy in `narrow`.
template <typename T>
const T *asOperand(Kernels *k, float *scores, T *narrow, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return scores;
  } else {
    launch(k, n, convertKernel<float, T>, narrow, scores, n,
           static_cast<const ErrorSlot *>(nullptr));
    return narrow;
  }
}

/// Scratch per chunk of pairs: the f32 scores (`f32Pieces` of them) and,
/// for bf16, one rounded copy.
template <typename T> size_t attentionScratch(int64_t scores, int f32Pieces) {
  return f32Pieces * pieceBytes<float>(scores) +
         (std::is_same_v<T, float> ? 0 : pieceBytes<T>(scores));
}

/// How the flash backward runs: dq by a second kernel where deterministic,
/// else by atomics, or bulk reductions (flashBulkDq); its steps fitted, or
/// whole (flashWholeSteps); its warps' row tiles (flashBackwardTwoTiles).
shardc::rt::cuda::FlashBackwardPlan flashBackwardPlan(const Kernels *k) {
  using namespace shardc::rt::cuda;
  FlashDq dq = k->deterministic ? FlashDq::SecondKernel
               : k->flashBulkDq ? FlashDq::BulkReduce
                                : FlashDq::Atomics;
  return {dq, k->flashWholeSteps ? FlashSteps::Whole : FlashSteps::Fitted,
          k->flashBackwardTwoTiles ? FlashTiles::Two : FlashTiles::One};
}

/// Says on stderr, once per shape and words, that `who` (cuDNN attention,
/// flash attention) declines attention of this shape in `type`, `why`,
/// and what runs it instead (`instead`): a model whose heads the fast
/// paths do not take learns why its attention runs slower.
void sayDeclines(Kernels *k, const char *who, const char *type,
                 const shardc::rt::cuda::AttentionShape &s,
                 const std::string &why, const char *instead) {
  std::string words = std::string(who) + type + why;
  if (!k->attentionDeclinesSaid.insert({s, words}).second)
    return;
  std::fprintf(stderr,
               "shardc: %s declines %s b=%lld t=%lld c=%lld heads=%lld (%s): "
               "%s\n",
               who, type, static_cast<long long>(s.b),
               static_cast<long long>(s.t), static_cast<long long>(s.c),
               static_cast<long long>(s.heads), why.c_str(), instead);
}

/// Whether attention of element type T, this shape, runs the fused kernels
/// (FlashAttention.h) rather than GEMMs over the full scores: switched on
/// (set_flash_attention), a head size they take (sayDeclines where not),
/// and for f32 only where TF32 is allowed (create's allowTf32: SHARDC_TF32
/// on), since they multiply on TF32 tensor cores; with TF32 off the caller
/// asked for full fp32 products, which f32 keeps through the GEMMs; qkv
/// and dy (null in the forward) as the kernels read them
/// (flashAttentionDeclines, for the backward's flashBackwardPlan). The
/// GEMMs' forward writes the lse a fused backward reads.
template <typename T>
bool useFlash(Kernels *k, const shardc::rt::cuda::AttentionShape &shape,
              const T *qkv, const T *dy) {
  if (!k->flashAttention)
    return false;
  if (std::is_same_v<T, float> && !k->allowTf32)
    return false;
  std::string why = shardc::rt::cuda::flashAttentionDeclines<T>(
      shape.c / shape.heads, qkv, dy, flashBackwardPlan(k));
  if (why.empty())
    return true;
  sayDeclines(k, "flash attention", std::is_same_v<T, float> ? "f32" : "bf16",
              shape, why, "GEMMs over the full scores run it");
  return false;
}

/// Says on stderr, once per shape and reason, why cuDNN declines a call
/// of it: `why`, cuDNN's reason (planning, or its first call that cuDNN
/// refused) where null.
void sayCudnnDeclines(Kernels *k, const shardc::rt::cuda::AttentionShape &s,
                      const char *why = nullptr) {
  sayDeclines(k, "cuDNN attention", "bf16", s,
              why ? why : k->cudnn->declines(s),
              "the flash kernels (else GEMMs) run it");
}

/// Whether bf16 attention of this shape runs through cuDNN: switched on
/// (set_cudnn_attention), cuDNN takes the shape, and the tensors 16-byte
/// aligned as the graphs declare them (a null one: the forward's lse where
/// the caller passes none, which the workspace holds), and not asked to be
/// deterministic (set_deterministic); sayCudnnDeclines where cuDNN is on
/// but does not run it.
bool useCudnn(Kernels *k, const shardc::rt::cuda::AttentionShape &shape,
              std::initializer_list<const void *> tensors) {
  if (!k->cudnnAttention)
    return false;
  if (k->deterministic) {
    sayCudnnDeclines(k, shape,
                     "deterministic: its backward sums dq by atomics");
    return false;
  }
  if (!allChunkAligned(tensors)) {
    sayCudnnDeclines(k, shape, "a tensor not 16-byte aligned");
    return false;
  }
  if (k->cudnn->declines(shape).empty())
    return true;
  sayCudnnDeclines(k, shape);
  return false;
}

/// attention and its gradient for T = float or __nv_bfloat16, through
/// cuDNN where useCudnn says so (bf16), else the fused kernels where
/// useFlash says so, else GEMMs. The scores and the
/// softmax are f32 either way; with bf16 the probabilities (and their
/// gradient) are rounded to bf16 for the GEMMs that read them, as the fused
/// kernels round P before P v (their f32 kernels round it to TF32, as
/// cuBLAS's TF32 GEMMs do here).
template <typename T>
void attention(Kernels *k, const T *qkv, T *out, float *lse, int64_t b,
               int64_t t, int64_t c, int64_t heads) {
  if (b <= 0 || t <= 0 || c <= 0)
    return;
  shardc::rt::cuda::AttentionShape shape{b, t, c, heads};
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (useCudnn(k, shape, {qkv, out, lse})) {
      size_t lseBytes = lse ? 0 : pieceBytes<float>(b * heads * t);
      char *work = static_cast<char *>(
          scratch(k, lseBytes + k->cudnn->forwardWorkspaceBytes(shape)));
      // cuDNN writes the rows' lse anyway: where the caller passes none,
      // into the workspace.
      float *rows = lse ? lse : carve<float>(work, b * heads * t);
      if (k->cudnn->forward(shape, qkv, out, rows, work))
        return;
      sayCudnnDeclines(k, shape); // refused at run time: as without cuDNN
    }
  }
  if (useFlash<T>(k, shape, qkv, nullptr)) {
    if (!lse) // the fused kernels write it anyway
      lse = static_cast<float *>(
          scratch(k, shardc::rt::cuda::flashForwardScratchBytes(b, t, heads)));
    using shardc::rt::cuda::FlashTiles;
    shardc::rt::cuda::flashAttentionForward<T>(
        k->stream, qkv, out, lse, b, t, c, heads,
        k->flashForwardTwoTiles ? FlashTiles::Two : FlashTiles::One,
        k->flashPhasesOn ? k->flashPhases : nullptr);
    return;
  }
  int64_t d = c / heads;
  HeadWalk walk = planHeads(k, b, t, c, heads);
  int64_t scores = walk.chunk * t * t;
  char *cursor =
      static_cast<char *>(scratch(k, attentionScratch<T>(scores, 1)));
  float *probs = carve<float>(cursor, scores);
  T *narrow = std::is_same_v<T, float> ? nullptr : carve<T>(cursor, scores);
  for (int64_t o = 0; o < walk.outer; ++o)
    for (int64_t i0 = 0; i0 < walk.inner; i0 += walk.chunk) {
      int64_t count = std::min(walk.chunk, walk.inner - i0);
      const T *q = qkv + o * walk.qkvOuter + i0 * walk.qkvInner;
      const T *kk = q + c, *v = q + 2 * c;
      T *y = out + o * walk.outOuter + i0 * walk.outInner;
      float *rowLse =
          lse ? lse + o * walk.lseOuter + i0 * walk.lseInner : nullptr;
      attentionProbabilities(k, walk, q, kk, t, c, d, count, probs, rowLse);
      // y = P v, each head into its columns of out.
      gemm(k, false, false, t, d, t, 1.0f,
           asOperand(k, probs, narrow, count * t * t), t, t * t, v, 3 * c,
           walk.qkvInner, 0.0f, y, c, walk.outInner, count);
    }
}

/// cuDNN and the fused kernels take the forward's out and lse (which every
/// forward path writes alike: the rows' natural log-sum-exp of the scaled
/// scores, [b, heads, t]); the GEMMs recompute the probabilities (and read
/// neither), which gives the same bits every run.
template <typename T>
void attentionGrad(Kernels *k, const T *dy, const T *qkv, const T *out,
                   const float *lse, T *dqkv, int64_t b, int64_t t, int64_t c,
                   int64_t heads) {
  if (b <= 0 || t <= 0 || c <= 0)
    return;
  shardc::rt::cuda::AttentionShape shape{b, t, c, heads};
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (useCudnn(k, shape, {dy, qkv, out, lse, dqkv})) {
      void *work = scratch(k, k->cudnn->backwardWorkspaceBytes(shape));
      if (k->cudnn->backward(shape, dy, qkv, out, lse, dqkv, work))
        return;
      sayCudnnDeclines(k, shape);
    }
  }
  if (useFlash<T>(k, shape, qkv, dy)) {
    shardc::rt::cuda::FlashBackwardPlan plan = flashBackwardPlan(k);
    void *work = scratch(k, shardc::rt::cuda::flashBackwardScratchBytes(
                                b, t, c, heads, plan.dq));
    shardc::rt::cuda::flashAttentionBackward<T>(
        k->stream, dy, qkv, out, lse, dqkv, work, b, t, c, heads, plan,
        k->flashPhasesOn ? k->flashPhases + 1 : nullptr);
    return;
  }
  int64_t d = c / heads, ld = 3 * c;
  float alpha = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  HeadWalk walk = planHeads(k, b, t, c, heads);
  int64_t scores = walk.chunk * t * t;
  char *cursor =
      static_cast<char *>(scratch(k, attentionScratch<T>(scores, 2)));
  float *probs = carve<float>(cursor, scores);
  float *dprobs = carve<float>(cursor, scores);
  T *narrow = std::is_same_v<T, float> ? nullptr : carve<T>(cursor, scores);
  // Every element of dqkv is written once: dq, dk and dv of every head and
  // row, by the GEMMs below with beta = 0.
  for (int64_t o = 0; o < walk.outer; ++o)
    for (int64_t i0 = 0; i0 < walk.inner; i0 += walk.chunk) {
      int64_t count = std::min(walk.chunk, walk.inner - i0);
      int64_t offset = o * walk.qkvOuter + i0 * walk.qkvInner;
      const T *q = qkv + offset, *kk = q + c, *v = q + 2 * c;
      T *dq = dqkv + offset, *dk = dq + c, *dv = dq + 2 * c;
      const T *dyh = dy + o * walk.outOuter + i0 * walk.outInner;
      int64_t s = walk.qkvInner, sy = walk.outInner, n = count * t * t;
      attentionProbabilities(k, walk, q, kk, t, c, d, count, probs,
                             static_cast<float *>(nullptr));
      // y = P v: dP = dy v^T, dv = P^T dy.
      gemm(k, false, true, t, t, d, 1.0f, dyh, c, sy, v, ld, s, 0.0f, dprobs, t,
           t * t, count);
      gemm(k, true, false, t, d, t, 1.0f, asOperand(k, probs, narrow, n), t,
           t * t, dyh, c, sy, 0.0f, dv, ld, s, count);
      int64_t rows = count * t;
      causalSoftmaxGradKernel<<<warpRowGrid(rows), kThreads, 0, k->stream>>>(
          probs, dprobs, rows, t);
      SHARDC_CUDA_CHECK_LAUNCH();
      // S = alpha q k^T: dq = alpha dS k, dk = alpha dS^T q.
      const T *dscores = asOperand(k, dprobs, narrow, n);
      gemm(k, false, false, t, d, t, alpha, dscores, t, t * t, kk, ld, s, 0.0f,
           dq, ld, s, count);
      gemm(k, true, false, t, d, t, alpha, dscores, t, t * t, q, ld, s, 0.0f,
           dk, ld, s, count);
    }
}

} // namespace

extern "C" {

void shardc_rt_cuda_attention_f32(shardc_rt_cuda_kernels *k, const float *qkv,
                                  float *out, float *lse, int64_t b, int64_t t,
                                  int64_t c, int64_t heads) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "attention_f32");
  attention(k, qkv, out, lse, b, t, c, heads);
}

void shardc_rt_cuda_attention_grad_f32(shardc_rt_cuda_kernels *k,
                                       const float *dy, const float *qkv,
                                       const float *out, const float *lse,
                                       float *dqkv, int64_t b, int64_t t,
                                       int64_t c, int64_t heads) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "attention_grad_f32");
  attentionGrad(k, dy, qkv, out, lse, dqkv, b, t, c, heads);
}

void shardc_rt_cuda_attention_bf16(shardc_rt_cuda_kernels *k,
                                   const shardc_rt_bf16 *qkv,
                                   shardc_rt_bf16 *out, float *lse, int64_t b,
                                   int64_t t, int64_t c, int64_t heads) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "attention_bf16");
  attention(k, bf(qkv), bf(out), lse, b, t, c, heads);
}

void shardc_rt_cuda_attention_grad_bf16(
    shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *dy,
    const shardc_rt_bf16 *qkv, const shardc_rt_bf16 *out, const float *lse,
    shardc_rt_bf16 *dqkv, int64_t b, int64_t t, int64_t c, int64_t heads) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "attention_grad_bf16");
  attentionGrad(k, bf(dy), bf(qkv), bf(out), lse, bf(dqkv), b, t, c, heads);
}

} // extern "C"
