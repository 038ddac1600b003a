//===- CrossEntropy.cu - Cross entropy and its gradient -------------------===//
//
// One block per row, per-row losses (double) in the workspace, then one
// block sums them in a fixed order: the loss is deterministic. A row that
// fits shared memory is staged there and read three times (max, f32
// exponentials' sum, gradient); a longer one is read twice, an online
// softmax summing its exponentials in double. bf16 logits are read in
// place.
//
//===----------------------------------------------------------------------===//

#include "Elementwise.cuh"
#include "KernelUtils.cuh"

using namespace shardc::rt::cuda;

namespace {

constexpr int kRowThreads = 512;

/// A row's largest logit and sum_j exp(l_j - max), the exponentials in f32
/// and their sum in double (as the CPU kernel), in one pass over the row:
/// each thread keeps its max and a sum against a reference it seldom moves
/// (SoftmaxShare, an online softmax), then the block merges them. A
/// vocabulary-wide row is read once instead of twice (for the max, then the
/// sum): it is the largest tensor of a language model's step.
struct RowSoftmax {
  float max;
  double sum;
};

/// Calls f(j, l[j]) (as f32) for this thread's elements of a row of v, each
/// element once, in increasing j for the thread. Where f returns a value,
/// out[j] = f's (rounded to T; out may be l: a thread reads an element
/// before it writes it). Where l (and out) are 16-byte aligned the thread
/// takes 16-byte chunks, threadIdx.x, + blockDim.x, ..., each one load and
/// one store; the rest of the row, or a misaligned one, element by element.
/// kRowLoads loads in flight either way. On an H200 the chunks took GPT-2
/// small's cross entropy from 12.6 to 10.6 ms in f32 (batch 64) but only
/// from 23.7 to 22.3 in bf16 (batch 128, the same bytes, twice the
/// elements): its time goes with the elements, not the bytes (SoftmaxShare
/// says what we think held it).
template <typename T, typename F>
__device__ void forThreadsElements(const T *l, int64_t v, F f,
                                   T *out = nullptr) {
  constexpr bool kWrites =
      !std::is_void_v<std::invoke_result_t<F, int64_t, float>>;
  constexpr int kVector = 16 / sizeof(T);
  int64_t stride = blockDim.x, j = threadIdx.x;
  if (shardc::rt::cuda::isChunkAligned(l) &&
      (!kWrites || shardc::rt::cuda::isChunkAligned(out))) {
    int64_t chunks = v / kVector, c = threadIdx.x;
    // Through memcpy, not a cast: cudasim's host compiler assumes that a
    // T and a uint4 never alias.
    auto chunk = [&](int64_t at, uint4 bits) {
      T x[kVector];
      memcpy(x, &bits, sizeof bits);
#pragma unroll
      for (int e = 0; e < kVector; ++e) {
        if constexpr (kWrites)
          x[e] = store<T>(f(at * kVector + e, load(x[e])));
        else
          f(at * kVector + e, load(x[e]));
      }
      if constexpr (kWrites) {
        memcpy(&bits, x, sizeof bits);
        reinterpret_cast<uint4 *>(out)[at] = bits;
      }
    };
    const uint4 *chunksOfL = reinterpret_cast<const uint4 *>(l);
    for (; c + (kRowLoads - 1) * stride < chunks; c += kRowLoads * stride) {
      uint4 bits[kRowLoads];
#pragma unroll
      for (int u = 0; u < kRowLoads; ++u)
        bits[u] = chunksOfL[c + u * stride];
#pragma unroll
      for (int u = 0; u < kRowLoads; ++u)
        chunk(c + u * stride, bits[u]);
    }
    for (; c < chunks; c += stride)
      chunk(c, chunksOfL[c]);
    j = chunks * kVector + threadIdx.x;
  }
  auto element = [&](int64_t at, float x) {
    if constexpr (kWrites)
      out[at] = store<T>(f(at, x));
    else
      f(at, x);
  };
  for (; j + (kRowLoads - 1) * stride < v; j += kRowLoads * stride) {
    float x[kRowLoads];
#pragma unroll
    for (int u = 0; u < kRowLoads; ++u)
      x[u] = load(l[j + u * stride]);
#pragma unroll
    for (int u = 0; u < kRowLoads; ++u)
      element(j + u * stride, x[u]);
  }
  for (; j < v; j += stride)
    element(j, load(l[j]));
}

/// A thread's share of a row's softmax: its largest logit, and the sum of
/// exp(x - ref) over its logits for a reference ref (in double). The sum
/// moves to a new reference (rescaled by a double exp) only where a logit
/// exceeds ref by more than kSoftmaxMargin, in practice at a thread's first
/// logit alone: moving it at every new max, as the plain online softmax
/// does, ran a double exp in most iterations of a warp (some lane of 32
/// sees a new max while its elements are few), which held the cross
/// entropy at twice its bandwidth floor on an H200. exp(64) in f32 leaves
/// the terms far from overflow, and each term is one expf either way.
struct SoftmaxShare {
  float max = -INFINITY, ref = -INFINITY;
  double sum = 0.0;
};

constexpr float kSoftmaxMargin = 64.0f;

/// Adds logit x to a thread's share (rowSoftmax).
__device__ void addToSoftmax(float x, SoftmaxShare &share) {
  share.max = fmaxf(share.max, x); // skips NaN: the sum carries it
  if (x > share.ref + kSoftmaxMargin) {
    share.sum = share.sum * exp(static_cast<double>(share.ref) -
                                static_cast<double>(x)) +
                1.0;
    share.ref = x;
  } else if (x != -INFINITY) { // exp(-inf) is 0, even where ref is -inf
    share.sum += static_cast<double>(expf(x - share.ref)); // NaN stays NaN
  }
}

template <typename T> __device__ RowSoftmax rowSoftmax(const T *l, int64_t v) {
  SoftmaxShare share;
  forThreadsElements(l, v, [&](int64_t, float x) { addToSoftmax(x, share); });
  float rowMax = blockReduce(share.max, MaxOp(), -INFINITY);
  // A thread that saw only -inf (or nothing) adds 0, not 0 x exp(NaN).
  double sum = share.sum;
  if (sum != 0.0)
    sum *= exp(static_cast<double>(share.ref) - static_cast<double>(rowMax));
  return {rowMax, blockReduce(sum, SumOp(), 0.0)};
}

/// A row's loss, log sum_j exp(l_j - max) + max - l_t, from its softmax
/// and its target's logit l_t.
__device__ double rowLossOf(RowSoftmax softmax, float targetLogit) {
  return log(softmax.sum) + static_cast<double>(softmax.max) -
         static_cast<double>(targetLogit);
}

/// One block: *loss = mean of rowLoss[n] (0 when n == 0), summed in double
/// in a fixed order.
__global__ void meanLossKernel(const double *rowLoss, int64_t n, float *loss,
                               const ErrorSlot *slot) {
  if (failed(slot))
    return;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    sum += rowLoss[i];
  sum = blockReduce(sum, SumOp(), 0.0);
  if (threadIdx.x == 0)
    *loss = n == 0 ? 0.0f : static_cast<float>(sum / static_cast<double>(n));
}

/// A block writes a row's gradient out = (softmax - onehot(target)) *
/// perRow over its first v logits l, and 0 in its padding [v, ld): a pass
/// over the row after rowSoftmax's. The exponentials are computed again,
/// not stored, so that a bf16 output is rounded once. out may be l: each
/// thread reads an element before it writes it.
template <typename T>
__device__ void writeRowGrad(const T *l, T *out, RowSoftmax softmax,
                             double perRow, int64_t target, int64_t v,
                             int64_t ld) {
  float factor = static_cast<float>(perRow / softmax.sum);
  float perRowF = static_cast<float>(perRow);
  forThreadsElements(
      l, v,
      [&](int64_t j, float x) {
        float value = expf(x - softmax.max) * factor;
        return j == target ? value - perRowF : value;
      },
      out);
  for (int64_t j = v + threadIdx.x; j < ld; j += blockDim.x)
    out[j] = store<T>(0.0f);
}

/// One block per row of v classes (rows ld apart): where rowLoss is not
/// null, the row's loss (rowLossOf); where dlogits is not null, its
/// gradient (softmax - onehot) * *dloss / n (writeRowGrad). Both at once are
/// llm.c's fused classifier: a row is read twice, not three times. dlogits
/// may be logits: every read of another thread's elements, the target's
/// logit included, comes before rowSoftmax's last barrier.
template <typename T>
__global__ void crossEntropyKernel(const T *logits, const int32_t *targets,
                                   double *rowLoss, const float *dloss,
                                   T *dlogits, int64_t n, int64_t v, int64_t ld,
                                   const ErrorSlot *slot) {
  if (failed(slot))
    return; // uniform over the block
  double perRow =
      dlogits ? static_cast<double>(*dloss) / static_cast<double>(n) : 0.0;
  bool lossWriter = rowLoss && threadIdx.x == 0; // uniform but for thread 0
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const T *l = logits + row * ld;
    int64_t target = targets[row];
    float targetLogit = lossWriter ? load(l[target]) : 0.0f;
    RowSoftmax softmax = rowSoftmax(l, v);
    if (lossWriter)
      rowLoss[row] = rowLossOf(softmax, targetLogit);
    if (dlogits)
      writeRowGrad(l, dlogits + row * ld, softmax, perRow, target, v, ld);
  }
}

/// crossEntropyKernel for rows staged in shared memory (stagedRowBytes
/// says where): a block copies its row's first v logits in (cp.async,
/// 16-byte chunks) once, then reads them there for the max, for
/// sum_j exp(l_j - max) and for the gradient, each exponential one ex2 in
/// f32 (exp2f of (l_j - max) log2(e)); a thread's sum is f32, the block's
/// double. The row leaves HBM once and its gradient is written once;
/// crossEntropyKernel's online softmax, with its double add and an accurate
/// expf an element, bound GPT-2 small's bf16 cross entropy by its elements,
/// not its bytes (on an H200, 22.3 ms for the bytes f32 moves in 10.6).
/// dlogits may be logits.
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    crossEntropyStagedKernel(const T *logits, const int32_t *targets,
                             double *rowLoss, const float *dloss, T *dlogits,
                             int64_t n, int v, int ld, const ErrorSlot *slot) {
  if (failed(slot))
    return; // uniform over the block
  constexpr int kVector = 16 / sizeof(T);
  using shardc::rt::cuda::kLog2e;
  extern __shared__ __align__(16) unsigned char stagedRow[];
  const uint4 *chunks = reinterpret_cast<const uint4 *>(stagedRow);
  int vChunks = (v + kVector - 1) / kVector, ldChunks = ld / kVector;
  // f(j, l_j) for the thread's logits of the staged row, chunk by chunk.
  auto forElements = [&](auto f) {
    for (int c = threadIdx.x; c < vChunks; c += blockDim.x) {
      uint4 bits = chunks[c];
      T x[kVector];
      memcpy(x, &bits, sizeof bits);
#pragma unroll
      for (int e = 0; e < kVector; ++e)
        if (c * kVector + e < v)
          f(c * kVector + e, load(x[e]));
    }
  };
  double perRow =
      dlogits ? static_cast<double>(*dloss) / static_cast<double>(n) : 0.0;
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const T *l = logits + row * ld;
    for (int c = threadIdx.x; c < vChunks; c += blockDim.x)
      shardc::rt::cuda::copyAsync<16>(stagedRow + 16 * c, l + c * kVector, 16);
    shardc::rt::cuda::copyAsyncCommit();
    shardc::rt::cuda::copyAsyncWait<0>();
    __syncthreads();          // the row has landed
    float rowMax = -INFINITY; // skips NaN: the sum carries it
    forElements([&](int, float x) { rowMax = fmaxf(rowMax, x); });
    rowMax = blockReduce(rowMax, MaxOp(), -INFINITY);
    // exp(l_j - max) = exp2((l_j - max) log2(e)): 1 for the max itself. A
    // row of -inf subtracts 0: its terms are exp2(-inf) = 0.
    float shift = rowMax == -INFINITY ? 0.0f : rowMax;
    auto term = [&](float x) { return exp2f((x - shift) * kLog2e); };
    float sum = 0.0f;
    forElements([&](int, float x) { sum += term(x); });
    double total = blockReduce(static_cast<double>(sum), SumOp(), 0.0);
    int target = targets[row];
    if (rowLoss && threadIdx.x == 0)
      rowLoss[row] =
          rowLossOf({rowMax, total},
                    load(reinterpret_cast<const T *>(stagedRow)[target]));
    if (dlogits) {
      float factor = static_cast<float>(perRow / total);
      float perRowF = static_cast<float>(perRow);
      uint4 *out = reinterpret_cast<uint4 *>(dlogits + row * ld);
      for (int c = threadIdx.x; c < ldChunks; c += blockDim.x) {
        T y[kVector];
        uint4 bits = c < vChunks ? chunks[c] : make_uint4(0, 0, 0, 0);
        memcpy(y, &bits, sizeof bits);
#pragma unroll
        for (int e = 0; e < kVector; ++e) {
          int j = c * kVector + e;
          float value = j < v ? term(load(y[e])) * factor : 0.0f;
          y[e] = store<T>(j == target ? value - perRowF : value);
        }
        memcpy(&bits, y, sizeof bits);
        out[c] = bits;
      }
    }
    __syncthreads(); // every thread is done with the staged row
  }
}

/// The bytes crossEntropyStagedKernel stages a row in, or 0 where it does
/// not take these rows: staging is on (Kernels::stagedCrossEntropy), two
/// blocks' rows must fit a multiprocessor's shared memory (bf16 rows up to
/// about 57,000 logits on an H200), v and ld fit int, and the rows' 16-byte
/// chunks must be aligned (logits and dlogits 16-byte aligned, ld a whole
/// number of chunks).
template <typename T>
size_t stagedRowBytes(const Kernels *k, const T *logits, const T *dlogits,
                      int64_t v, int64_t ld) {
  size_t bytes = (static_cast<size_t>(v) * sizeof(T) + 15) & ~size_t(15);
  size_t half = static_cast<size_t>(k->sharedOptin) / 2;
  size_t perBlock = half > 1024 ? half - 1024 : 0;
  if (!k->stagedCrossEntropy || v < 1 || ld > INT_MAX || bytes > perBlock ||
      !allChunkAligned({logits, dlogits}) || (ld * sizeof(T)) % 16 != 0)
    return 0;
  return bytes;
}

unsigned rowBlockGrid(const Kernels *k, int64_t n) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(n, int64_t(k->smCount) * 16)));
}

/// cross_entropy (loss), cross_entropy_grad (dloss, dlogits) or both
/// (cross_entropy_and_grad) for logits of T = float or __nv_bfloat16 (read
/// as f32; the loss is f32, the gradient rounded once); `op` names the call
/// in the error slot.
template <typename T>
void crossEntropy(Kernels *k, CheckedOp op, const T *logits,
                  const int32_t *targets, int64_t n, int64_t v, int64_t ld,
                  float *loss, const float *dloss, T *dlogits) {
  checkIds<T>(k, targets, n, v, op);
  double *rowLoss =
      loss && n > 0 ? static_cast<double *>(scratch(k, pieceBytes<double>(n)))
                    : nullptr;
  if (size_t bytes = n > 0 ? stagedRowBytes(k, logits, dlogits, v, ld) : 0) {
    SHARDC_CUDA_CHECK(cudaFuncSetAttribute(
        crossEntropyStagedKernel<T>,
        cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    crossEntropyStagedKernel<T>
        <<<rowBlockGrid(k, n), kRowThreads, bytes, k->stream>>>(
            logits, targets, rowLoss, dloss, dlogits, n, static_cast<int>(v),
            static_cast<int>(ld), k->slot);
    SHARDC_CUDA_CHECK_LAUNCH();
  } else if (n > 0) {
    crossEntropyKernel<<<rowBlockGrid(k, n), kRowThreads, 0, k->stream>>>(
        logits, targets, rowLoss, dloss, dlogits, n, v, ld, k->slot);
    SHARDC_CUDA_CHECK_LAUNCH();
  }
  if (loss) {
    meanLossKernel<<<1, 1024, 0, k->stream>>>(rowLoss, n, loss, k->slot);
    SHARDC_CUDA_CHECK_LAUNCH();
  }
}

} // namespace

extern "C" {

void shardc_rt_cuda_cross_entropy_f32(shardc_rt_cuda_kernels *k,
                                      const float *logits,
                                      const int32_t *targets, float *loss,
                                      int64_t n, int64_t v, int64_t ld) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "cross_entropy_f32");
  crossEntropy(k, kOpCrossEntropy, logits, targets, n, v, ld, loss, nullptr,
               static_cast<float *>(nullptr));
}

void shardc_rt_cuda_cross_entropy_grad_f32(
    shardc_rt_cuda_kernels *k, const float *dloss, const float *logits,
    const int32_t *targets, float *dlogits, int64_t n, int64_t v, int64_t ld) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "cross_entropy_grad_f32");
  crossEntropy(k, kOpCrossEntropyGrad, logits, targets, n, v, ld, nullptr,
               dloss, dlogits);
}

void shardc_rt_cuda_cross_entropy_and_grad_f32(
    shardc_rt_cuda_kernels *k, const float *dloss, const float *logits,
    const int32_t *targets, float *loss, float *dlogits, int64_t n, int64_t v,
    int64_t ld) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "cross_entropy_and_grad_f32");
  crossEntropy(k, kOpCrossEntropyAndGrad, logits, targets, n, v, ld, loss,
               dloss, dlogits);
}

void shardc_rt_cuda_cross_entropy_bf16(shardc_rt_cuda_kernels *k,
                                       const shardc_rt_bf16 *logits,
                                       const int32_t *targets, float *loss,
                                       int64_t n, int64_t v, int64_t ld) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "cross_entropy_bf16");
  crossEntropy(k, kOpCrossEntropy, bf(logits), targets, n, v, ld, loss, nullptr,
               static_cast<bf16 *>(nullptr));
}

void shardc_rt_cuda_cross_entropy_grad_bf16(shardc_rt_cuda_kernels *k,
                                            const float *dloss,
                                            const shardc_rt_bf16 *logits,
                                            const int32_t *targets,
                                            shardc_rt_bf16 *dlogits, int64_t n,
                                            int64_t v, int64_t ld) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "cross_entropy_grad_bf16");
  crossEntropy(k, kOpCrossEntropyGrad, bf(logits), targets, n, v, ld, nullptr,
               dloss, bf(dlogits));
}

void shardc_rt_cuda_cross_entropy_and_grad_bf16(
    shardc_rt_cuda_kernels *k, const float *dloss, const shardc_rt_bf16 *logits,
    const int32_t *targets, float *loss, shardc_rt_bf16 *dlogits, int64_t n,
    int64_t v, int64_t ld) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "cross_entropy_and_grad_bf16");
  crossEntropy(k, kOpCrossEntropyAndGrad, bf(logits), targets, n, v, ld, loss,
               dloss, bf(dlogits));
}

} // extern "C"
