//===- Elementwise.cuh - Elementwise kernels of every family ----*- C++ -*-===//
//
// Grid-stride loops with 64-bit indices, templates over the stored type
// (f32 or bf16); the bf16 ops' f32 results (F32Results), rounded from the
// second workspace. Elementwise.cu holds the elementwise ops' C ABI; the
// other families launch these kernels in their unfused paths.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_CUDA_ELEMENTWISE_CUH
#define SHARDC_RT_CUDA_ELEMENTWISE_CUH

#include "KernelUtils.cuh"

namespace shardc::rt::cuda {

template <typename T>
__global__ void addKernel(const T *lhs, const T *rhs, T *y, int64_t n,
                          int64_t m) {
  // No 64-bit remainder where rhs is whole (a residual add): i < m.
  SHARDC_GRID_STRIDE(i, n)
  y[i] = store<T>(load(lhs[i]) + load(rhs[i < m ? i : i % m]));
}

/// addKernel over 16-byte chunks, a chunk a thread (n and m whole chunks,
/// the tensors 16-byte aligned: add): the same bits.
template <typename T>
__global__ void chunkedAddKernel(const T *lhs, const T *rhs, T *y,
                                 int64_t chunks, int64_t rhsChunks) {
  constexpr int kVector = 16 / sizeof(T);
  const uint4 *l = reinterpret_cast<const uint4 *>(lhs),
              *r = reinterpret_cast<const uint4 *>(rhs);
  uint4 *out = reinterpret_cast<uint4 *>(y);
  SHARDC_GRID_STRIDE(i, chunks) {
    uint4 a = l[i], b = r[i < rhsChunks ? i : i % rhsChunks];
    // Through memcpy, not a cast: cudasim's host compiler assumes that a
    // T and a uint4 never alias.
    T x[kVector], z[kVector];
    memcpy(x, &a, sizeof a);
    memcpy(z, &b, sizeof b);
#pragma unroll
    for (int e = 0; e < kVector; ++e)
      x[e] = store<T>(load(x[e]) + load(z[e]));
    memcpy(&a, x, sizeof a);
    out[i] = a;
  }
}

template <typename T>
__global__ void scaleKernel(const T *x, T *y, int64_t n, float f) {
  SHARDC_GRID_STRIDE(i, n) y[i] = store<T>(load(x[i]) * f);
}

/// dst[n] = src[n] converted (rounded where narrower); skipped when `guard`
/// (may be null) records an error.
template <typename From, typename To>
__global__ void convertKernel(To *dst, const From *src, int64_t n,
                              const ErrorSlot *guard) {
  if (guard && failed(guard))
    return;
  SHARDC_GRID_STRIDE(i, n) dst[i] = store<To>(load(src[i]));
}

/// sqrt(2 / pi) and the cubic coefficient of GPT-2's GELU.
constexpr float kGeluScale = 0.7978845608028654f;

constexpr float kGeluCubic = 0.044715f;

template <typename T> __global__ void geluKernel(const T *x, T *y, int64_t n) {
  // As the CPU kernel: 0.5 (1 + tanh u) = sigmoid(2 u), x / inf = 0 where
  // the exponential overflows.
  SHARDC_GRID_STRIDE(i, n) {
    float v = load(x[i]);
    y[i] = store<T>(
        v / (1.0f + expf(-2.0f * kGeluScale * (v + kGeluCubic * v * v * v))));
  }
}

template <typename T> __global__ void reluKernel(const T *x, T *y, int64_t n) {
  SHARDC_GRID_STRIDE(i, n) {
    float v = load(x[i]);
    y[i] = store<T>(v > 0.0f ? v : 0.0f);
  }
}

template <typename T>
__global__ void geluGradKernel(const T *dy, const T *x, T *dx, int64_t n) {
  // gelu' = sig + 2 x sig (1 - sig) s (1 + 3 a x^2), sig (1 - sig) = e sig^2
  // (see the CPU kernel); 0 where e overflows.
  SHARDC_GRID_STRIDE(i, n) {
    float v = load(x[i]);
    float e = expf(-2.0f * kGeluScale * (v + kGeluCubic * v * v * v));
    float sig = 1.0f / (1.0f + e);
    float sigSlope = isinf(e) ? 0.0f : e * sig * sig;
    float derivative = sig + 2.0f * v * sigSlope * kGeluScale *
                                 (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] = store<T>(load(dy[i]) * derivative);
  }
}

template <typename T>
__global__ void reluGradKernel(const T *dy, const T *x, T *dx, int64_t n) {
  SHARDC_GRID_STRIDE(i, n)
  dx[i] = store<T>(load(x[i]) > 0.0f ? load(dy[i]) : 0.0f);
}

/// dst[n] = value; skipped when `guard` (may be null) records an error.
template <typename T>
__global__ void fillKernel(T *dst, float value, int64_t n,
                           const ErrorSlot *guard) {
  if (guard && failed(guard))
    return;
  SHARDC_GRID_STRIDE(i, n) dst[i] = store<T>(value);
}

template <typename T>
__global__ void accumulateKernel(T *dst, const T *src, int64_t n) {
  SHARDC_GRID_STRIDE(i, n) dst[i] = store<T>(load(dst[i]) + load(src[i]));
}

/// y[m, n] = b[n] broadcast over rows (linear's bias, before its GEMM).
template <typename T>
__global__ void broadcastRowsKernel(T *y, const T *b, int64_t total,
                                    int64_t n) {
  SHARDC_GRID_STRIDE(i, total) y[i] = b[i % n];
}

/// Zeroes `batch` matrices [m, n] of row stride ldc, `stride` apart.
template <typename T>
__global__ void zeroMatricesKernel(T *c, int64_t batch, int64_t m, int64_t n,
                                   int64_t ldc, int64_t stride) {
  SHARDC_GRID_STRIDE(i, batch * m * n) {
    int64_t matrix = i / (m * n), rest = i % (m * n);
    c[matrix * stride + (rest / n) * ldc + rest % n] = store<T>(0.0f);
  }
}

/// dst[n] = src[n], on the kernels' stream.
template <typename T> void copy(Kernels *k, T *dst, const T *src, int64_t n) {
  if (n <= 0)
    return;
  SHARDC_CUDA_CHECK(cudaMemcpyAsync(dst, src,
                                    static_cast<size_t>(n) * sizeof(T),
                                    cudaMemcpyDeviceToDevice, k->stream));
}

/// y[i] = lhs[i] + rhs[i % m] (m > 0): a 16-byte chunk a thread where n
/// and m are whole chunks and the tensors 16-byte aligned, else an element.
template <typename T>
void add(Kernels *k, const T *lhs, const T *rhs, T *y, int64_t n, int64_t m) {
  constexpr int kVector = 16 / sizeof(T);
  if (n % kVector == 0 && m % kVector == 0 && allChunkAligned({lhs, rhs, y}))
    launch(k, n / kVector, chunkedAddKernel<T>, lhs, rhs, y, n / kVector,
           m / kVector);
  else
    launch(k, n, addKernel<T>, lhs, rhs, y, n, m);
}

/// The f32 results of a bf16 kernel that sums in f32 (column sums, scatter-
/// adds) before rounding, in the second workspace (the first is the f32
/// kernels' scratch): declare every piece's size up front, then take them in
/// that order.
class F32Results {
public:
  F32Results(Kernels *k, std::initializer_list<int64_t> counts) : k(k) {
    size_t bytes = 0;
    for (int64_t count : counts)
      bytes += pieceBytes<float>(count);
    cursor = static_cast<char *>(grow(k, k->sums, k->sumsBytes, bytes));
  }
  float *take(int64_t n) { return carve<float>(cursor, n); }
  /// Rounds a result into dst; with `guarded`, not after a recorded bad
  /// index (the kernel then wrote nothing).
  void store(shardc_rt_bf16 *dst, const float *piece, int64_t n,
             bool guarded = false) {
    launch(k, n, convertKernel<float, bf16>, bf(dst), piece, n,
           guarded ? static_cast<const ErrorSlot *>(k->slot) : nullptr);
  }

private:
  Kernels *k;
  char *cursor;
};

} // namespace shardc::rt::cuda

#endif // SHARDC_RT_CUDA_ELEMENTWISE_CUH
