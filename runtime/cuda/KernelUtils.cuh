//===- KernelUtils.cuh - What the CUDA kernels share ------------*- C++ -*-===//
//
// The CUDA counterparts of runtime/host/Kernels.cpp (the specification of
// every kernel: same ops, shapes, semantics; shardc_rt/CudaKernels.h lists
// what differs) are the C ABI's ops, one file per family: Elementwise.cu,
// Optimizer.cu (AdamW, the gradient norm), LayerNorm.cu (layernorm and
// the column sums of sum_to), Embedding.cu, CrossEntropy.cu, Gemm.cu (with
// EpilogueGemms.h) and Attention.cu (with FlashAttention.h and
// CudnnAttention.h); the object they run on is KernelState.h's. Here: the
// launch geometry, the reductions, the loads and stores of either stored
// type (f32 or bf16: elementwise kernels are templates over it, loading to
// f32 and rounding their stores), the id checks and the GEMM every family
// may run. Every CUDA, cuBLAS and cuBLASLt call is checked
// (SHARDC_CUDA_CHECK, SHARDC_CUBLAS_CHECK): an error prints the call and
// aborts; only cuBLASLt's "not supported" answers are expected, and choose
// the unfused path.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_CUDA_KERNELUTILS_CUH
#define SHARDC_RT_CUDA_KERNELUTILS_CUH

#include "shardc_rt/CudaKernels.h"
#include "shardc_rt/Kernels.h"   // SHARDC_RT_EMBEDDING_GRAD_GROUP
#include "shardc_rt/shardc_rt.h" // SHARDC_RT_MAX_CLIP_SUMS

#include "Check.h"
#include "CudnnAttention.h"
#include "EpilogueGemms.h"
#include "FlashAttention.h"
#include "KernelState.h"
#include "Ptx.h"
#include "Workspace.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace shardc::rt::cuda {

constexpr int kThreads = 256;

/// Blocks of a grid-stride loop over n elements: enough to fill the GPU,
/// capped so that each thread handles several elements of a large n.
inline unsigned gridFor(const Kernels *k, int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  int64_t cap = static_cast<int64_t>(k->smCount) * 32;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, cap)));
}

/// Aborts when a dimension does not fit the int of cuBLAS (or of a grid).
inline void checkIntRange(const char *what, int64_t value) {
  if (value > INT_MAX) {
    std::fprintf(stderr,
                 "shardc: %s = %lld exceeds the int range of cuBLAS "
                 "(runtime/cuda/KernelUtils.cuh)\n",
                 what, static_cast<long long>(value));
    std::abort();
  }
}

struct SumOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/// Reduces over the 32 lanes of a warp; every lane gets the result.
template <typename T, typename Op> __device__ T warpReduce(T value, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

/// Reduces over a block (blockDim.x a multiple of 32, at most 1024); every
/// thread gets the result. Every thread of the block must call it.
template <typename T, typename Op>
__device__ T blockReduce(T value, Op op, T identity) {
  __shared__ T partial[32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  value = warpReduce(value, op);
  __syncthreads(); // the readers of a previous call are done with partial
  if (lane == 0)
    partial[warp] = value;
  __syncthreads();
  value = lane < static_cast<int>(blockDim.x >> 5) ? partial[lane] : identity;
  return warpReduce(value, op);
}

__device__ inline bool failed(const ErrorSlot *slot) {
  return slot->position != kNoError;
}

#define SHARDC_GRID_STRIDE(i, n)                                               \
  for (int64_t i =                                                             \
           static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;        \
       i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

/// Elementwise kernels are templates over the stored type T (float or
/// __nv_bfloat16): they load to f32, compute in f32 and round their stores.
__device__ __forceinline__ float load(float x) { return x; }

__device__ __forceinline__ float load(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <typename T> __device__ __forceinline__ T store(float v);

template <> __device__ __forceinline__ float store<float>(float v) { return v; }

template <>
__device__ __forceinline__ __nv_bfloat16 store<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/// The last s of the `count` with first[s] <= x (first nondecreasing,
/// first[0] <= x), by bisection: the piece holding item x where piece s's
/// items begin at first[s] (a multi-tensor launch's tensor of a chunk,
/// embedding_grad's id of a group).
__device__ inline int64_t pieceOf(const int64_t *first, int64_t count,
                                  int64_t x) {
  int64_t lo = 0, hi = count - 1;
  while (lo < hi) {
    int64_t mid = (lo + hi + 1) / 2;
    if (first[mid] <= x)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/// Checks the ids of `op` called on elements of T (float or __nv_bfloat16),
/// which names its f32 or bf16 entry point: the first i with ids[i] outside
/// [0, v) is recorded in the error slot unless an earlier call already
/// failed (Embedding.cu; for T = float and __nv_bfloat16).
template <typename T>
void checkIds(Kernels *k, const int32_t *ids, int64_t n, int64_t v,
              CheckedOp op);

constexpr int kWarpsPerBlock = kThreads / 32;

/// The row of this warp, and its lane.
__device__ inline int64_t warpRow() {
  return static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
}

inline unsigned warpRowGrid(int64_t rows) {
  int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  checkIntRange("row blocks", blocks);
  return static_cast<unsigned>(blocks);
}

/// A row is read once, so the latency of its loads is its cost: the row
/// loops of the cross-entropy kernels (forThreadsElements) and the chunked
/// column sums keep this many loads in flight per thread.
constexpr int kRowLoads = 4;

/// Whether every tensor (null: none) is 16-byte aligned.
inline bool allChunkAligned(std::initializer_list<const void *> tensors) {
  return std::all_of(tensors.begin(), tensors.end(), [](const void *tensor) {
    return !tensor || shardc::rt::cuda::isChunkAligned(tensor);
  });
}

/// Launches an elementwise kernel over n elements on the kernels' stream.
template <typename... Params, typename... Args>
void launch(Kernels *k, int64_t n, void (*kernel)(Params...), Args... args) {
  if (n <= 0)
    return;
  kernel<<<gridFor(k, n), kThreads, 0, k->stream>>>(args...);
  SHARDC_CUDA_CHECK_LAUNCH();
}

using bf16 = __nv_bfloat16;

inline const bf16 *bf(const shardc_rt_bf16 *p) {
  return reinterpret_cast<const bf16 *>(p);
}

inline bf16 *bf(shardc_rt_bf16 *p) { return reinterpret_cast<bf16 *>(p); }

/// Row-major c = alpha op(a) op(b) + beta c for `batch` matrix triples
/// strideA / strideB / strideC elements apart (Gemm.cu; for T = float, and
/// T = __nv_bfloat16 with C = T or float).
template <typename T, typename C = T>
void gemm(Kernels *k, bool transA, bool transB, int64_t m, int64_t n,
          int64_t kd, float alpha, const T *a, int64_t lda, int64_t strideA,
          const T *b, int64_t ldb, int64_t strideB, float beta, C *c,
          int64_t ldc, int64_t strideC, int64_t batch);

} // namespace shardc::rt::cuda

#endif // SHARDC_RT_CUDA_KERNELUTILS_CUH
