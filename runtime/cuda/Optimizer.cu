//===- Optimizer.cu - AdamW and the gradient norm -------------------------===//
//
// AdamW over many tensors in one launch (adamw_multi; adamw for one), the
// sum of squares of the gradients in a fixed order, and the clipping
// coefficient: each update's roundings as runtime/host/Backend.cpp's loop,
// so the same bits on either backend.
//
//===----------------------------------------------------------------------===//

#include "Elementwise.cuh"
#include "KernelUtils.cuh"

using namespace shardc::rt::cuda;

namespace {

/// AdamW's scalars for one step, as runtime/host/Backend.cpp computes them.
struct AdamWScalars {
  float beta1, beta2, eps, decay, stepSize, rootCorrection2;
};

/// The tensors of one multi-tensor launch (AdamW, the sum of squares; a
/// kernel parameter, under 4 KiB): tensor s holds chunks [firstChunk[s],
/// firstChunk[s + 1]), each kAdamWChunk elements of it.
constexpr int kAdamWTensors = 48;

constexpr int64_t kAdamWChunk = 4096;

template <typename T> struct TensorBatch {
  T tensors[kAdamWTensors];
  int64_t firstChunk[kAdamWTensors + 1];
  int count;
};

using AdamWBatch = TensorBatch<shardc_rt_cuda_adamw_tensor>;

/// Calls launch(batch) on each run of up to kAdamWTensors of the non-empty
/// ones of `tensors`, in order.
template <typename T, typename Launch>
void forEachBatch(const T *tensors, int32_t count, Launch launch) {
  TensorBatch<T> batch;
  batch.count = 0;
  batch.firstChunk[0] = 0;
  for (int32_t i = 0; i < count; ++i) {
    if (tensors[i].n <= 0)
      continue;
    batch.tensors[batch.count] = tensors[i];
    batch.firstChunk[batch.count + 1] =
        batch.firstChunk[batch.count] +
        (tensors[i].n + kAdamWChunk - 1) / kAdamWChunk;
    if (++batch.count == kAdamWTensors) {
      launch(batch);
      batch.count = 0;
    }
  }
  if (batch.count > 0)
    launch(batch);
}

/// AdamW on element i of tensor t. Explicitly rounded operations: no FMA
/// contraction, so that every result is the one of runtime/host/Backend.cpp's
/// loop (same order, same roundings; sqrt and division are IEEE-rounded on
/// the device). `rounded`, where not null, receives the updated param
/// rounded to bf16 (a bf16 param's value, from its f32 master).
template <typename G>
__device__ void adamwElement(const shardc_rt_cuda_adamw_tensor &t, int64_t i,
                             const AdamWScalars &c) {
  float g = load(static_cast<const G *>(t.grad)[i]);
  if (t.clip)
    g = __fmul_rn(g, *t.clip);
  float m = __fadd_rn(__fmul_rn(c.beta1, t.exp_avg[i]),
                      __fmul_rn(__fsub_rn(1.0f, c.beta1), g));
  float v = __fadd_rn(__fmul_rn(c.beta2, t.exp_avg_sq[i]),
                      __fmul_rn(__fmul_rn(__fsub_rn(1.0f, c.beta2), g), g));
  t.exp_avg[i] = m;
  t.exp_avg_sq[i] = v;
  float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), c.rootCorrection2), c.eps);
  float decay = t.no_decay ? 1.0f : c.decay;
  float updated = __fsub_rn(__fmul_rn(t.param[i], decay),
                            __fdiv_rn(__fmul_rn(c.stepSize, m), denom));
  t.param[i] = updated;
  if (t.rounded)
    reinterpret_cast<__nv_bfloat16 *>(t.rounded)[i] =
        __float2bfloat16_rn(updated);
}

using SquaresBatch = TensorBatch<shardc_rt_cuda_squares_tensor>;

/// The sum of squares' fixed grid: its partial sums, one per block, are
/// added in one order whatever the tensors.
constexpr int kSquaresBlocks = 1024;

/// Block b adds the squares of chunks b, b + gridDim.x, ... to
/// partials[b].
__global__ void sumSquaresKernel(SquaresBatch batch, double *partials) {
  double acc = 0.0;
  int64_t chunks = batch.firstChunk[batch.count];
  for (int64_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
    int lo = static_cast<int>(pieceOf(batch.firstChunk, batch.count, chunk));
    const shardc_rt_cuda_squares_tensor &t = batch.tensors[lo];
    int64_t begin = (chunk - batch.firstChunk[lo]) * kAdamWChunk;
    int64_t end = begin + kAdamWChunk < t.n ? begin + kAdamWChunk : t.n;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      double x =
          t.bf16 ? static_cast<double>(
                       load(static_cast<const __nv_bfloat16 *>(t.data)[i]))
                 : static_cast<double>(static_cast<const float *>(t.data)[i]);
      acc = __dadd_rn(acc, __dmul_rn(x, x));
    }
  }
  acc = blockReduce(acc, SumOp(), 0.0);
  if (threadIdx.x == 0)
    partials[blockIdx.x] += acc;
}

/// One block: *sum = the partials' sum, rounded to f32.
__global__ void finishSumSquaresKernel(const double *partials, float *sum) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < kSquaresBlocks; i += blockDim.x)
    acc += partials[i];
  acc = blockReduce(acc, SumOp(), 0.0);
  if (threadIdx.x == 0)
    *sum = static_cast<float>(acc);
}

/// shardc_rt_cuda_clip_coefficient's sums (a kernel parameter).
constexpr int kClipSums = SHARDC_RT_MAX_CLIP_SUMS;

struct ClipSums {
  const float *sums[kClipSums];
  int count;
};

__global__ void clipCoefficientKernel(ClipSums s, float maxNorm, float *coef,
                                      float *norm) {
  float total = 0.0f;
  for (int i = 0; i < s.count; ++i)
    total = __fadd_rn(total, *s.sums[i]);
  float n = __fsqrt_rn(total);
  *norm = n;
  float coefficient = __fdiv_rn(maxNorm, __fadd_rn(n, 1e-6f));
  *coef = coefficient > 1.0f ? 1.0f : coefficient; // NaN stays NaN
}

/// One block: kAdamWChunk elements of the tensor whose blocks hold
/// blockIdx.x.
__global__ void adamwMultiKernel(AdamWBatch batch, AdamWScalars c) {
  int64_t block = blockIdx.x;
  int lo = static_cast<int>(pieceOf(batch.firstChunk, batch.count, block));
  const shardc_rt_cuda_adamw_tensor &t = batch.tensors[lo];
  int64_t begin = (block - batch.firstChunk[lo]) * kAdamWChunk;
  int64_t end = begin + kAdamWChunk < t.n ? begin + kAdamWChunk : t.n;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    if (t.grad_bf16)
      adamwElement<__nv_bfloat16>(t, i, c);
    else
      adamwElement<float>(t, i, c);
  }
}

} // namespace

extern "C" {

void shardc_rt_cuda_adamw_multi_f32(shardc_rt_cuda_kernels *k,
                                    const shardc_rt_cuda_adamw_tensor *tensors,
                                    int32_t count, float lr, float beta1,
                                    float beta2, float eps, float weightDecay,
                                    int64_t step) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "adamw_f32");
  // The scalars exactly as runtime/host/Backend.cpp computes them from its
  // double hyperparameters (here the floats, widened).
  double correction1 =
      1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  double correction2 =
      1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  double decay = 1.0 - static_cast<double>(lr) * weightDecay;
  AdamWScalars c = {beta1,
                    beta2,
                    eps,
                    static_cast<float>(decay),
                    static_cast<float>(lr / correction1),
                    static_cast<float>(std::sqrt(correction2))};
  forEachBatch(tensors, count, [&](const AdamWBatch &batch) {
    adamwMultiKernel<<<static_cast<unsigned>(batch.firstChunk[batch.count]),
                       kThreads, 0, k->stream>>>(batch, c);
    SHARDC_CUDA_CHECK_LAUNCH();
  });
}

void shardc_rt_cuda_sum_squares(shardc_rt_cuda_kernels *k,
                                const shardc_rt_cuda_squares_tensor *tensors,
                                int32_t count, float *sum) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "sum_squares");
  auto *partials =
      static_cast<double *>(scratch(k, kSquaresBlocks * sizeof(double)));
  SHARDC_CUDA_CHECK(
      cudaMemsetAsync(partials, 0, kSquaresBlocks * sizeof(double), k->stream));
  forEachBatch(tensors, count, [&](const SquaresBatch &batch) {
    sumSquaresKernel<<<kSquaresBlocks, kThreads, 0, k->stream>>>(batch,
                                                                 partials);
    SHARDC_CUDA_CHECK_LAUNCH();
  });
  finishSumSquaresKernel<<<1, kThreads, 0, k->stream>>>(partials, sum);
  SHARDC_CUDA_CHECK_LAUNCH();
}

void shardc_rt_cuda_clip_coefficient(shardc_rt_cuda_kernels *k,
                                     const float *const *sums, int32_t count,
                                     float maxNorm, float *coef, float *norm) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "clip_coefficient");
  if (count <= 0 || count > kClipSums) {
    std::fprintf(stderr,
                 "shardc: shardc_rt_cuda_clip_coefficient: %d sums, expected "
                 "1 to %d (runtime/cuda/Optimizer.cu)\n",
                 static_cast<int>(count), kClipSums);
    std::abort();
  }
  ClipSums s;
  s.count = count;
  for (int32_t i = 0; i < count; ++i)
    s.sums[i] = sums[i];
  clipCoefficientKernel<<<1, 1, 0, k->stream>>>(s, maxNorm, coef, norm);
  SHARDC_CUDA_CHECK_LAUNCH();
}

void shardc_rt_cuda_adamw_f32(shardc_rt_cuda_kernels *k, float *param,
                              float *expAvg, float *expAvgSq, const void *grad,
                              int gradBf16, shardc_rt_bf16 *rounded, int64_t n,
                              float lr, float beta1, float beta2, float eps,
                              float weightDecay, int64_t step) {
  shardc_rt_cuda_adamw_tensor tensor = {param,   expAvg, expAvgSq, grad,
                                        rounded, n,      gradBf16};
  shardc_rt_cuda_adamw_multi_f32(k, &tensor, 1, lr, beta1, beta2, eps,
                                 weightDecay, step);
}

} // extern "C"
