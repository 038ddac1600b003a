//===- Kernels.cu - CUDA kernels of every train op ------------------------===//
//
// The CUDA counterparts of runtime/host/Kernels.cpp (the specification of
// every kernel: same ops, shapes, semantics; shardc_rt/CudaKernels.h lists
// what differs), as the C ABI's ops; the object they run on, and its
// lifecycle, are KernelState.h's and KernelState.cpp's. Structure:
//  - matrix products go through cuBLAS (cublasSgemm, or
//    cublasSgemmStridedBatched for batches), row-major by the usual trick: a
//    row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T;
//  - GEMM epilogues (on unless set_gemm_epilogues turns them off): linear's
//    bias, linear_gelu's bias, preactivation and GELU, and (bf16)
//    matmul_gelu_grad's GELU derivative are applied by one cuBLASLt matmul
//    to the f32 accumulator, and matmul_bias_grad's bias gradient is
//    summed beside its product (EpilogueGemms.h); where cuBLASLt declines
//    a shape or a call, it runs the cuBLAS GEMM and the elementwise kernel
//    instead;
//  - attention reads q, k and v in place from the fused qkv through cuBLAS
//    leading dimensions (3C) and batch strides, as the CPU kernel does:
//    per chunk of heads (or of batch elements), the full T x T scores are one
//    strided-batched GEMM, a causal softmax kernel (one warp per row) turns
//    them into probabilities with zeros above the diagonal, and y = P v is a
//    second GEMM writing each head's columns of out[B, T, C]; the backward
//    recomputes P and uses GEMMs likewise (dP = dy v^T, dv = P^T dy,
//    dS = P (dP - rowsum(P dP)), dq = dS k / sqrt(d), dk = dS^T q / sqrt(d));
//    with set_flash_attention on, the fused kernels of FlashAttention.h
//    (no T x T scores in memory) run it instead where the head size allows:
//    for bf16, and for f32 where TF32 is allowed (TF32 tensor cores; with
//    TF32 off, f32 keeps the GEMMs' full fp32 products); with
//    set_cudnn_attention on, bf16 runs through cuDNN's fused attention
//    (CudnnAttention.h) where cuDNN takes the shape;
//  - layernorm and its gradient: one warp per row, fp32 accumulation; rows
//    of whole 16-byte chunks up to 8 a lane (2048 bf16, 1024 f32) are held
//    in the warp's registers, each tensor read once (in 16-byte loads where
//    aligned), other rows read element by element; dweight and dbias are
//    column sums over rows, in two deterministic stages, the first in the
//    gradient's own pass where a block's shared memory holds its warps'
//    sums (c up to 3,632 on an H200), else a pass of its own.
//    add_layernorm is the layernorm kernel with a second input: y is
//    layernorm's of the stored (for bf16: rounded) sum; layernorm_grad_add
//    is the gradient kernel adding an addend to the gradient as
//    layernorm_grad stores it;
//  - cross-entropy: one block per row, per-row losses (double) in the
//    workspace, then one block sums them in a fixed order: the loss is
//    deterministic. A row that fits shared memory is staged there and
//    read three times (max, f32 exponentials' sum, gradient); a longer one
//    is read twice, an online softmax summing its exponentials in double;
//  - embedding_grad: the positions sorted by id (a stable counting sort),
//    then each id's dy rows summed in position order, as the CPU kernel
//    does: no atomics, so deterministic;
//  - elementwise kernels: grid-stride loops, 64-bit indices;
//  - bf16 (mixed precision): GEMMs take bf16 operands and accumulate in f32
//    (cublasGemmEx, or cuBLASLt with bf16 A/B/C/D, bias and preactivation);
//    elementwise kernels are the f32 ones as templates over
//    the stored type, loading to f32 and rounding their stores; attention
//    is the f32 one over bf16 GEMMs, its probabilities rounded to bf16 where
//    a GEMM reads them; cross-entropy, layernorm, sum_to and embedding_grad
//    are templates too, reading bf16 in place; the f32 sums of the last
//    three (dweight and dbias, the column sums, the table's gradient) are
//    rounded from a second workspace.
// Every CUDA, cuBLAS and cuBLASLt call is checked (SHARDC_CUDA_CHECK,
// SHARDC_CUBLAS_CHECK): an error prints the call and aborts; only cuBLASLt's
// "not supported" answers are expected, and choose the unfused path.
//
//===----------------------------------------------------------------------===//

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

using namespace shardc::rt::cuda;

namespace {

constexpr int kThreads = 256;

/// Blocks of a grid-stride loop over n elements: enough to fill the GPU,
/// capped so that each thread handles several elements of a large n.
unsigned gridFor(const Kernels *k, int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  int64_t cap = static_cast<int64_t>(k->smCount) * 32;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, cap)));
}

/// Aborts when a dimension does not fit the int of cuBLAS (or of a grid).
void checkIntRange(const char *what, int64_t value) {
  if (value > INT_MAX) {
    std::fprintf(stderr,
                 "shardc: %s = %lld exceeds the int range of cuBLAS "
                 "(runtime/cuda/Kernels.cu)\n",
                 what, static_cast<long long>(value));
    std::abort();
  }
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

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

__device__ bool failed(const ErrorSlot *slot) {
  return slot->position != kNoError;
}

//===----------------------------------------------------------------------===//
// Elementwise kernels
//===----------------------------------------------------------------------===//

#define SHARDC_GRID_STRIDE(i, n)                                               \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x +             \
                   threadIdx.x;                                                \
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

template <typename T>
__global__ void geluKernel(const T *x, T *y, int64_t n) {
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
    float derivative =
        sig + 2.0f * v * sigSlope * kGeluScale * (1.0f + 3.0f * kGeluCubic * v * v);
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

__global__ void iotaKernel(int32_t *out, int64_t n) {
  SHARDC_GRID_STRIDE(i, n) out[i] = static_cast<int32_t>(i);
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

/// The last s of the `count` with first[s] <= x (first nondecreasing,
/// first[0] <= x), by bisection: the piece holding item x where piece s's
/// items begin at first[s] (a multi-tensor launch's tensor of a chunk,
/// embedding_grad's id of a group).
__device__ int64_t pieceOf(const int64_t *first, int64_t count, int64_t x) {
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

//===----------------------------------------------------------------------===//
// Index checks
//===----------------------------------------------------------------------===//

/// One block: the first i with ids[i] outside [0, v), recorded in the slot
/// unless an earlier call already failed (one block, so that the min over
/// the block is final before it is committed; ids are a step's tokens, a
/// few hundred thousand at most, read once).
__global__ void checkIdsKernel(const int32_t *ids, int64_t n, int64_t v,
                               ErrorSlot *slot, int op) {
  __shared__ unsigned long long first;
  if (threadIdx.x == 0)
    first = kNoError;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    int32_t id = ids[i];
    if (id < 0 || id >= v) {
      atomicMin(&first, static_cast<unsigned long long>(i));
      break; // this thread's later positions are larger
    }
  }
  __syncthreads();
  if (threadIdx.x == 0 && first != kNoError && !failed(slot)) {
    slot->position = first;
    slot->op = op;
  }
}

/// Checks the ids of `op` called on elements of T (float or __nv_bfloat16),
/// which names its f32 or bf16 entry point.
template <typename T>
void checkIds(Kernels *k, const int32_t *ids, int64_t n, int64_t v,
              CheckedOp op) {
  if (n <= 0)
    return;
  int named = op + (std::is_same_v<T, float> ? 0 : kCheckedOps);
  checkIdsKernel<<<1, 1024, 0, k->stream>>>(ids, n, v, k->slot, named);
  SHARDC_CUDA_CHECK_LAUNCH();
}

//===----------------------------------------------------------------------===//
// Row kernels (one warp per row)
//===----------------------------------------------------------------------===//

constexpr int kWarpsPerBlock = kThreads / 32;

/// The row of this warp, and its lane.
__device__ int64_t warpRow() {
  return static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
}

/// Mean and 1 / sqrt(var + eps) of a row of c, two passes (the variance of
/// centered values), every lane getting both.
template <typename T>
__device__ void rowStats(const T *x, int64_t c, float eps, int lane,
                         float &mean, float &rstd) {
  float sum = 0.0f;
  for (int64_t j = lane; j < c; j += 32)
    sum += load(x[j]);
  mean = warpReduce(sum, SumOp()) / static_cast<float>(c);
  float squares = 0.0f;
  for (int64_t j = lane; j < c; j += 32) {
    float centered = load(x[j]) - mean;
    squares += centered * centered;
  }
  float var = warpReduce(squares, SumOp()) / static_cast<float>(c);
  rstd = 1.0f / sqrtf(var + eps);
}

/// y = layernorm(x) row by row; with `rhs` (add_layernorm), sum = x + rhs
/// first and y = layernorm(sum) of the stored (for bf16: rounded) sum: each
/// lane stores its elements of the row, then reads the row back with the
/// same lane-to-element mapping (its own stores: program order, no barrier),
/// so the statistics and y are layernorm's of the stored sum, bit for bit.
template <typename T>
__global__ void layerNormKernel(const T *x, const T *rhs, const T *w,
                                const T *b, T *sum, T *y, int64_t rows,
                                int64_t c, float eps) {
  int64_t row = warpRow();
  if (row >= rows)
    return; // whole warps only
  int lane = threadIdx.x & 31;
  const T *xr = x + row * c;
  T *yr = y + row * c;
  if (rhs) {
    const T *rr = rhs + row * c;
    T *sr = sum + row * c;
    for (int64_t j = lane; j < c; j += 32)
      sr[j] = store<T>(load(xr[j]) + load(rr[j]));
    xr = sr;
  }
  float mean, rstd;
  rowStats(xr, c, eps, lane, mean, rstd);
  for (int64_t j = lane; j < c; j += 32)
    yr[j] = store<T>((load(xr[j]) - mean) * rstd * load(w[j]) + load(b[j]));
}

/// dx of layernorm, row by row: with xhat = (x - mean) rstd and g = dy w,
/// dx = rstd (g - mean(g) - xhat mean(g xhat)). With `addend`
/// (layernorm_grad_add), dx = addend + that gradient as layernorm_grad
/// stores it: rounded to T first, then added in one IEEE-rounded addition
/// (__fadd_rn: no FMA contraction with the gradient's last product), as
/// accumulate would add it. The grid's warps take rows w, w + warps, ...
///
/// dweight and dbias (column sums of dy xhat and dy) come one of two ways.
/// With `partials` (layerNormGrad's fused plan, where the block's shared
/// memory holds two rows of c floats per warp), in the same pass: each
/// lane adds its columns' terms to its warp's rows (no other lane's), then
/// the block sums its warps' rows in warp order into partials[0][block]
/// (dweight) and partials[1][block] (dbias), of gridDim.x rows of c each;
/// dy and x are read once, and the sums depend on the shape and the grid
/// alone. Without, each row keeps its mean and rstd for columnSums' pass.
template <typename T>
__global__ void layerNormGradKernel(const T *dy, const T *x, const T *w,
                                    const T *addend, T *dx, float *means,
                                    float *rstds, float *partials, int64_t rows,
                                    int64_t c, float eps) {
  extern __shared__ float warpSums[]; // [warp][dweight, dbias][c]
  int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  float *sums = partials ? warpSums + 2 * c * warp : nullptr;
  if (sums)
    for (int64_t j = lane; j < 2 * c; j += 32)
      sums[j] = 0.0f;
  int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = warpRow(); row < rows; row += warps) {
    const T *xr = x + row * c, *dyr = dy + row * c;
    const T *ar = addend ? addend + row * c : nullptr;
    T *dxr = dx + row * c;
    float mean, rstd;
    rowStats(xr, c, eps, lane, mean, rstd);
    float sumG = 0.0f, sumGXhat = 0.0f;
    for (int64_t j = lane; j < c; j += 32) {
      float xhat = (load(xr[j]) - mean) * rstd;
      float g = load(dyr[j]) * load(w[j]);
      sumG += g;
      sumGXhat += g * xhat;
    }
    float meanG = warpReduce(sumG, SumOp()) / static_cast<float>(c);
    float meanGXhat = warpReduce(sumGXhat, SumOp()) / static_cast<float>(c);
    for (int64_t j = lane; j < c; j += 32) {
      float xhat = (load(xr[j]) - mean) * rstd, dyj = load(dyr[j]);
      T grad = store<T>(rstd * (dyj * load(w[j]) - meanG - xhat * meanGXhat));
      dxr[j] = ar ? store<T>(__fadd_rn(load(ar[j]), load(grad))) : grad;
      if (sums) {
        sums[j] += dyj * xhat;
        sums[c + j] += dyj;
      }
    }
    if (!sums && lane == 0) {
      means[row] = mean;
      rstds[row] = rstd;
    }
  }
  if (!partials)
    return;
  __syncthreads();
  for (int64_t j = threadIdx.x; j < 2 * c; j += blockDim.x) {
    float sum = 0.0f;
    for (int i = 0; i < kWarpsPerBlock; ++i)
      sum += warpSums[2 * c * i + j];
    partials[(j / c * gridDim.x + blockIdx.x) * c + j % c] = sum;
  }
}

//===----------------------------------------------------------------------===//
// Row kernels over lanes' chunks (one warp per row, the row in registers)
//===----------------------------------------------------------------------===//

/// The chunks of a row each lane of the chunked row kernels holds at most:
/// rows up to 2048 bf16 or 1024 f32 elements. Past that, the row kernels
/// above run (a lane's share would spill from registers).
constexpr int kMaxLaneChunks = 8;

/// Which elements of a row of c a lane of the chunked row kernels holds:
/// the row's 16-byte chunks lane, lane + 32, ..., kChunks of them (those
/// past the row's end read as zeros and are not written). c must be a whole
/// number of chunks (chunkedRowChunks).
template <typename T, int kChunks> struct LaneLayout {
  static constexpr int kVector = 16 / sizeof(T);
  static constexpr int kSize = kChunks * kVector;

  /// Whether chunk `chunk` of lane `lane` lies in a row of c.
  __device__ static bool inRow(int chunk, int lane, int64_t c) {
    return (static_cast<int64_t>(chunk) * 32 + lane) * kVector < c;
  }
  /// The row's column of element i of lane `lane`.
  __device__ static int64_t column(int i, int lane) {
    return (static_cast<int64_t>(i / kVector) * 32 + lane) * kVector +
           i % kVector;
  }

  /// The mean and 1 / sqrt(var + eps) of the warp's row, whose lane's
  /// element i is value(i) (zero past the row), for every lane: the
  /// variance of the centered values.
  template <typename Value>
  __device__ static void stats(Value value, int64_t c, float eps, int lane,
                               float &mean, float &rstd) {
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kSize; ++i)
      sum += value(i); // the zeros past the row add nothing
    mean = warpReduce(sum, SumOp()) / static_cast<float>(c);
    float squares = 0.0f;
#pragma unroll
    for (int i = 0; i < kSize; ++i) {
      float centered = value(i) - mean;
      if (inRow(i / kVector, lane, c))
        squares += centered * centered;
    }
    float var = warpReduce(squares, SumOp()) / static_cast<float>(c);
    rstd = 1.0f / sqrtf(var + eps);
  }
};

/// A lane's share of a row as stored: its chunks' bits, each element
/// converted to f32 where it is used (at). Half the registers of
/// LaneChunks' f32 for bf16, so that a kernel may hold several tensors'
/// shares with their loads issued together. The warp reads each of its
/// row's tensors once, kChunks loads in flight a lane, and writes each
/// once; the row kernels above read x two to four times, element by
/// element. Where a call's tensors are all 16-byte aligned (`aligned`) a
/// chunk is one 16-byte access, else kVector element ones of the same
/// elements: the lanes, their values and every sum's order, so the
/// results, are the same either way.
template <typename T, int kChunks> struct LaneBits : LaneLayout<T, kChunks> {
  using Layout = LaneLayout<T, kChunks>;
  using Layout::inRow, Layout::kVector;
  uint4 bits[kChunks];

  __device__ void read(const T *row, int64_t c, int lane, bool aligned) {
#pragma unroll
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      bool inside = inRow(chunk, lane, c);
      if (aligned) {
        bits[chunk] =
            inside ? reinterpret_cast<const uint4 *>(row)[chunk * 32 + lane]
                   : make_uint4(0, 0, 0, 0);
        continue;
      }
      T x[kVector];
#pragma unroll
      for (int e = 0; e < kVector; ++e)
        x[e] = inside ? row[(chunk * 32 + lane) * kVector + e] : store<T>(0.0f);
      set(chunk, x);
    }
  }
  /// Stores the chunks that lie in the row.
  __device__ void write(T *row, int64_t c, int lane, bool aligned) const {
#pragma unroll
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      if (!inRow(chunk, lane, c))
        continue;
      if (aligned) {
        reinterpret_cast<uint4 *>(row)[chunk * 32 + lane] = bits[chunk];
        continue;
      }
      T x[kVector];
      memcpy(x, &bits[chunk], sizeof(uint4));
#pragma unroll
      for (int e = 0; e < kVector; ++e)
        row[(chunk * 32 + lane) * kVector + e] = x[e];
    }
  }
  /// Element i as f32.
  __device__ float at(int i) const {
    T x[kVector];
    memcpy(x, &bits[i / kVector], sizeof(uint4));
    return load(x[i % kVector]);
  }
  /// Chunk `chunk` = x. Through memcpy, not a cast: cudasim's host compiler
  /// assumes that a T and a uint4 never alias.
  __device__ void set(int chunk, const T (&x)[kVector]) {
    memcpy(&bits[chunk], x, sizeof(uint4));
  }
};

/// A lane's share of a row (LaneLayout) as f32, read and written as
/// LaneBits.
template <typename T, int kChunks> struct LaneChunks : LaneLayout<T, kChunks> {
  using Layout = LaneLayout<T, kChunks>;
  using Layout::kSize, Layout::kVector;
  float v[kSize];

  __device__ void read(const T *row, int64_t c, int lane, bool aligned) {
    LaneBits<T, kChunks> stored;
    stored.read(row, c, lane, aligned);
#pragma unroll
    for (int i = 0; i < kSize; ++i)
      v[i] = stored.at(i);
  }

  /// Stores v rounded to T.
  __device__ void write(T *row, int64_t c, int lane, bool aligned) const {
    LaneBits<T, kChunks> stored;
#pragma unroll
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      T x[kVector];
#pragma unroll
      for (int e = 0; e < kVector; ++e)
        x[e] = store<T>(v[chunk * kVector + e]);
      stored.set(chunk, x);
    }
    stored.write(row, c, lane, aligned);
  }

  /// Layout::stats of the warp's row.
  __device__ void stats(int64_t c, float eps, int lane, float &mean,
                        float &rstd) const {
    Layout::stats([&](int i) { return v[i]; }, c, eps, lane, mean, rstd);
  }
};

/// Whether every tensor (null: none) is 16-byte aligned.
bool allChunkAligned(std::initializer_list<const void *> tensors) {
  return std::all_of(tensors.begin(), tensors.end(), [](const void *tensor) {
    return !tensor || shardc::rt::cuda::isChunkAligned(tensor);
  });
}

/// The chunks a lane of the chunked row kernels holds for rows of c
/// elements of T, or 0 where those kernels do not take them: c a whole
/// number of 16-byte chunks, at most kMaxLaneChunks a lane. By c alone, so
/// that calls whose results must agree bit for bit (add_layernorm with add
/// and layernorm, layernorm_grad_add with layernorm_grad and accumulate)
/// take the same kernels whatever their tensors' alignment.
template <typename T> int chunkedRowChunks(int64_t c) {
  constexpr int64_t kVector = 16 / sizeof(T);
  int64_t chunks = (c / kVector + 31) / 32;
  if (c <= 0 || c % kVector != 0 || chunks > kMaxLaneChunks)
    return 0;
  return static_cast<int>(chunks);
}

/// f(std::integral_constant<int, chunks>()) for chunks in [1,
/// kMaxLaneChunks]: the chunked row kernels' instantiation.
template <int kChunks = 1, typename F> void withLaneChunks(int chunks, F f) {
  if constexpr (kChunks <= kMaxLaneChunks) {
    if (chunks == kChunks)
      return f(std::integral_constant<int, kChunks>());
    withLaneChunks<kChunks + 1>(chunks, f);
  }
}

/// layerNormKernel over lanes' chunks: the same results but for the order
/// of the row's sums. With `rhs`, sum = x + rhs rounded to T, and y is
/// layernorm's of those rounded values (what the kernel would read back).
template <typename T, int kChunks>
__global__ void chunkedLayerNormKernel(const T *x, const T *rhs, const T *w,
                                       const T *b, T *sum, T *y, int64_t rows,
                                       int64_t c, float eps, bool aligned) {
  using Lane = LaneChunks<T, kChunks>;
  int64_t row = warpRow();
  if (row >= rows)
    return; // whole warps only
  int lane = threadIdx.x & 31;
  Lane values, other;
  values.read(x + row * c, c, lane, aligned);
  if (rhs) {
    other.read(rhs + row * c, c, lane, aligned);
#pragma unroll
    for (int i = 0; i < Lane::kSize; ++i)
      values.v[i] = load(store<T>(values.v[i] + other.v[i]));
    values.write(sum + row * c, c, lane, aligned);
  }
  float mean, rstd;
  values.stats(c, eps, lane, mean, rstd);
  Lane weight, bias;
  weight.read(w, c, lane, aligned);
  bias.read(b, c, lane, aligned);
#pragma unroll
  for (int i = 0; i < Lane::kSize; ++i)
    values.v[i] = (values.v[i] - mean) * rstd * weight.v[i] + bias.v[i];
  values.write(y + row * c, c, lane, aligned);
}

/// layerNormGradKernel's fused plan over lanes' chunks: the same results
/// but for the order of the row's sums. Each warp's dweight and dbias sums
/// lie in shared memory by lane (slot i * 32 + lane for the lane's element
/// i: no bank conflicts), 2 kSize * 32 floats a warp; the block sums its
/// warps' in warp order into partials[0][block] and partials[1][block], as
/// layerNormGradKernel. A row's x, dy, weight and addend loads are issued
/// together, one trip to memory a row (the addend's used to wait for the
/// row's sums), and held as stored (LaneBits), xhat computed again for dx.
template <typename T, int kChunks>
__global__ void chunkedLayerNormGradKernel(const T *dy, const T *x, const T *w,
                                           const T *addend, T *dx,
                                           float *partials, int64_t rows,
                                           int64_t c, float eps, bool aligned) {
  using Bits = LaneBits<T, kChunks>;
  constexpr int kSize = Bits::kSize, kVector = Bits::kVector;
  constexpr int kSlots = 2 * kSize * 32; // a warp's: dweight, dbias
  extern __shared__ float warpSums[];    // [warp][kSlots]
  int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  float *sums = warpSums + kSlots * warp;
  for (int i = lane; i < kSlots; i += 32)
    sums[i] = 0.0f;
  int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = warpRow(); row < rows; row += warps) {
    Bits xs, g, weight, a{}; // a: zeros where there is no addend
    xs.read(x + row * c, c, lane, aligned);
    g.read(dy + row * c, c, lane, aligned);
    weight.read(w, c, lane, aligned);
    if (addend)
      a.read(addend + row * c, c, lane, aligned);
    float mean, rstd;
    Bits::stats([&](int i) { return xs.at(i); }, c, eps, lane, mean, rstd);
    auto xhat = [&](int i) { return (xs.at(i) - mean) * rstd; };
    float sumG = 0.0f, sumGXhat = 0.0f;
#pragma unroll
    for (int i = 0; i < kSize; ++i) {
      float gw = g.at(i) * weight.at(i); // 0 past the row: dy reads 0
      sumG += gw;
      sumGXhat += gw * xhat(i);
    }
    float meanG = warpReduce(sumG, SumOp()) / static_cast<float>(c);
    float meanGXhat = warpReduce(sumGXhat, SumOp()) / static_cast<float>(c);
    Bits grad;
#pragma unroll
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      T out[kVector];
#pragma unroll
      for (int e = 0; e < kVector; ++e) {
        int i = chunk * kVector + e;
        float dyi = g.at(i), xh = xhat(i);
        float value = load(
            store<T>(rstd * (dyi * weight.at(i) - meanG - xh * meanGXhat)));
        sums[i * 32 + lane] += dyi * xh;
        sums[(kSize + i) * 32 + lane] += dyi;
        out[e] = store<T>(addend ? __fadd_rn(a.at(i), value) : value);
      }
      grad.set(chunk, out);
    }
    grad.write(dx + row * c, c, lane, aligned);
  }
  __syncthreads();
  for (int slot = threadIdx.x; slot < kSlots; slot += blockDim.x) {
    int which = slot / (kSlots / 2), i = slot % (kSlots / 2) / 32;
    int64_t column = Bits::column(i, slot % 32);
    if (column >= c)
      continue;
    float sum = 0.0f;
    for (int from = 0; from < kWarpsPerBlock; ++from)
      sum += warpSums[kSlots * from + slot];
    partials[(which * gridDim.x + blockIdx.x) * c + column] = sum;
  }
}

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

unsigned warpRowGrid(int64_t rows) {
  int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  checkIntRange("row blocks", blocks);
  return static_cast<unsigned>(blocks);
}

//===----------------------------------------------------------------------===//
// Column sums (sum_to, layernorm's dweight and dbias)
//===----------------------------------------------------------------------===//

/// A row is read once, so the latency of its loads is its cost: the row
/// loops of the cross-entropy kernels (forThreadsElements) and the chunked
/// column sums keep this many loads in flight per thread.
constexpr int kRowLoads = 4;

/// How the rows of a column sum are split: `chunks` blocks of rows, each
/// summed into a partial row, the partials then summed in chunk order; each
/// thread sums `vector` adjacent columns (1, or a 16-byte chunk's). The
/// split depends only on the shape, the type and the GPU, so results are
/// deterministic.
struct ColumnPlan {
  int64_t chunks;
  int64_t rowsPerChunk;
  int vector = 1;
};

constexpr int kColumnWidth = 32, kColumnDepth = 8;

ColumnPlan planColumns(const Kernels *k, int64_t outer, int64_t inner,
                       int vector = 1) {
  if (outer <= 0 || inner <= 0)
    return {1, 0, vector}; // nothing to split (columnSums writes zeros)
  int64_t columnBlocks =
      (inner + kColumnWidth * vector - 1) / (kColumnWidth * vector);
  int64_t target = static_cast<int64_t>(k->smCount) * 4;
  int64_t chunks = (target + columnBlocks - 1) / columnBlocks;
  // At least 64 rows per chunk, at most 1024 chunks (grid.y <= 65535).
  chunks = std::min<int64_t>({chunks, (outer + 63) / 64, 1024});
  chunks = std::max<int64_t>(chunks, 1);
  int64_t rowsPerChunk = (outer + chunks - 1) / chunks;
  chunks = (outer + rowsPerChunk - 1) / rowsPerChunk;
  return {chunks, rowsPerChunk, vector};
}

/// x[outer, inner] summed over outer (x float or __nv_bfloat16).
template <typename T> struct SumRows {
  const T *x;
  int64_t inner;
  __device__ float2 operator()(int64_t r, int64_t j) const {
    return make_float2(load(x[r * inner + j]), 0.0f);
  }
};

template <typename Terms> constexpr bool isSumRows = false;
template <typename T> constexpr bool isSumRows<SumRows<T>> = true;

/// layernorm's dweight (dy xhat) and dbias (dy) terms.
template <typename T> struct LayerNormParamTerms {
  const T *dy, *x;
  const float *means, *rstds;
  int64_t c;
  __device__ float2 operator()(int64_t r, int64_t j) const {
    float g = load(dy[r * c + j]);
    float xhat = (load(x[r * c + j]) - means[r]) * rstds[r];
    return make_float2(g * xhat, g);
  }
};

/// Block (x: 32 columns, y: chunk of rows): partial column sums of the
/// terms' two components into out0 / out1 [chunks, inner] (out1 may be
/// null). blockDim = (32, 8).
template <typename Terms>
__global__ void columnPartialsKernel(Terms terms, int64_t outer, int64_t inner,
                                     int64_t rowsPerChunk, float *out0,
                                     float *out1) {
  __shared__ float sum0[kColumnDepth][kColumnWidth + 1];
  __shared__ float sum1[kColumnDepth][kColumnWidth + 1];
  int64_t j = static_cast<int64_t>(blockIdx.x) * kColumnWidth + threadIdx.x;
  int64_t r0 = static_cast<int64_t>(blockIdx.y) * rowsPerChunk;
  int64_t r1 = r0 + rowsPerChunk < outer ? r0 + rowsPerChunk : outer;
  float a0 = 0.0f, a1 = 0.0f;
  if (j < inner)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kColumnDepth) {
      float2 term = terms(r, j);
      a0 += term.x;
      a1 += term.y;
    }
  sum0[threadIdx.y][threadIdx.x] = a0;
  sum1[threadIdx.y][threadIdx.x] = a1;
  __syncthreads();
  if (threadIdx.y == 0 && j < inner) {
    float s0 = 0.0f, s1 = 0.0f;
    for (int i = 0; i < kColumnDepth; ++i) {
      s0 += sum0[i][threadIdx.x];
      s1 += sum1[i][threadIdx.x];
    }
    out0[blockIdx.y * inner + j] = s0;
    if (out1)
      out1[blockIdx.y * inner + j] = s1;
  }
}

/// columnPartialsKernel for SumRows over 16-byte chunks of columns (inner
/// a whole number of chunks): block (x: 32 chunks, y: rows of the chunk of
/// rows); each thread sums its chunk's kVector columns, kRowLoads rows in
/// flight, so that a warp reads 512 contiguous bytes of a row where
/// columnPartialsKernel reads 32 elements. The block then sums its rows'
/// partials in row order, as columnPartialsKernel. A chunk is one 16-byte
/// load where x is 16-byte `aligned`, else kVector element loads: the same
/// sums either way.
template <typename T>
__global__ void chunkedColumnPartialsKernel(const T *x, int64_t outer,
                                            int64_t inner, int64_t rowsPerChunk,
                                            float *out, bool aligned) {
  constexpr int kVector = 16 / sizeof(T);
  __shared__ float sums[kColumnDepth][kVector][kColumnWidth];
  int64_t chunks = inner / kVector;
  int64_t chunk = static_cast<int64_t>(blockIdx.x) * kColumnWidth + threadIdx.x;
  int64_t r0 = static_cast<int64_t>(blockIdx.y) * rowsPerChunk;
  int64_t r1 = r0 + rowsPerChunk < outer ? r0 + rowsPerChunk : outer;
  float acc[kVector] = {};
  auto add = [&](uint4 bits) {
    // Through memcpy, not a cast: cudasim's host compiler assumes that a
    // T and a uint4 never alias.
    T values[kVector];
    memcpy(values, &bits, sizeof bits);
#pragma unroll
    for (int e = 0; e < kVector; ++e)
      acc[e] += load(values[e]);
  };
  // Row r's chunk.
  auto chunkOf = [&](int64_t r) {
    int64_t at = r * chunks + chunk;
    if (aligned)
      return reinterpret_cast<const uint4 *>(x)[at];
    T values[kVector];
#pragma unroll
    for (int e = 0; e < kVector; ++e)
      values[e] = x[at * kVector + e];
    uint4 bits;
    memcpy(&bits, values, sizeof bits);
    return bits;
  };
  if (chunk < chunks) {
    int64_t r = r0 + threadIdx.y;
    for (; r + (kRowLoads - 1) * kColumnDepth < r1;
         r += kRowLoads * kColumnDepth) {
      uint4 bits[kRowLoads];
#pragma unroll
      for (int u = 0; u < kRowLoads; ++u)
        bits[u] = chunkOf(r + u * kColumnDepth);
#pragma unroll
      for (int u = 0; u < kRowLoads; ++u)
        add(bits[u]);
    }
    for (; r < r1; r += kColumnDepth)
      add(chunkOf(r));
  }
#pragma unroll
  for (int e = 0; e < kVector; ++e)
    sums[threadIdx.y][e][threadIdx.x] = acc[e];
  __syncthreads();
  for (int slot = threadIdx.y * kColumnWidth + threadIdx.x;
       slot < kVector * kColumnWidth; slot += kColumnDepth * kColumnWidth) {
    int e = slot / kColumnWidth, lane = slot % kColumnWidth;
    int64_t mine = static_cast<int64_t>(blockIdx.x) * kColumnWidth + lane;
    if (mine >= chunks)
      continue;
    float sum = 0.0f;
    for (int i = 0; i < kColumnDepth; ++i)
      sum += sums[i][e][lane];
    out[blockIdx.y * inner + mine * kVector + e] = sum;
  }
}

/// y[j] = sum over chunks of partials[chunk, j], in chunk order.
__global__ void columnFinishKernel(const float *partials, int64_t chunks,
                                   int64_t inner, float *y) {
  SHARDC_GRID_STRIDE(j, inner) {
    float s = 0.0f;
    for (int64_t c = 0; c < chunks; ++c)
      s += partials[c * inner + j];
    y[j] = s;
  }
}

/// y0[inner] (and y1 when not null) = column sums of the terms over `outer`
/// rows, following `plan`; partials0/1 hold plan.chunks * inner floats each
/// when plan.chunks > 1 (else they are unused). plan.vector > 1 is for
/// SumRows alone (chunkedColumnPartialsKernel; y1 null).
template <typename Terms>
void columnSums(Kernels *k, Terms terms, int64_t outer, int64_t inner,
                ColumnPlan plan, float *y0, float *y1, float *partials0,
                float *partials1) {
  if (inner <= 0)
    return;
  if (outer <= 0) {
    fillKernel<<<gridFor(k, inner), kThreads, 0, k->stream>>>(y0, 0.0f, inner,
                                                              nullptr);
    SHARDC_CUDA_CHECK_LAUNCH();
    if (y1) {
      fillKernel<<<gridFor(k, inner), kThreads, 0, k->stream>>>(y1, 0.0f, inner,
                                                                nullptr);
      SHARDC_CUDA_CHECK_LAUNCH();
    }
    return;
  }
  bool split = plan.chunks > 1;
  int vector = 1; // chunked columns: SumRows only
  if constexpr (isSumRows<Terms>)
    vector = plan.vector;
  int64_t columnsPerBlock = int64_t(kColumnWidth) * vector;
  int64_t columnBlocks = (inner + columnsPerBlock - 1) / columnsPerBlock;
  checkIntRange("column blocks", columnBlocks);
  dim3 grid(static_cast<unsigned>(columnBlocks),
            static_cast<unsigned>(plan.chunks));
  dim3 block(kColumnWidth, kColumnDepth);
  if constexpr (isSumRows<Terms>) {
    if (vector > 1) {
      using T = std::remove_cv_t<std::remove_pointer_t<decltype(terms.x)>>;
      chunkedColumnPartialsKernel<T><<<grid, block, 0, k->stream>>>(
          terms.x, outer, inner, plan.rowsPerChunk, split ? partials0 : y0,
          shardc::rt::cuda::isChunkAligned(terms.x));
    }
  }
  if (vector == 1)
    columnPartialsKernel<<<grid, block, 0, k->stream>>>(
        terms, outer, inner, plan.rowsPerChunk, split ? partials0 : y0,
        split ? (y1 ? partials1 : nullptr) : y1);
  SHARDC_CUDA_CHECK_LAUNCH();
  if (!split)
    return;
  columnFinishKernel<<<gridFor(k, inner), kThreads, 0, k->stream>>>(
      partials0, plan.chunks, inner, y0);
  SHARDC_CUDA_CHECK_LAUNCH();
  if (y1) {
    columnFinishKernel<<<gridFor(k, inner), kThreads, 0, k->stream>>>(
        partials1, plan.chunks, inner, y1);
    SHARDC_CUDA_CHECK_LAUNCH();
  }
}

//===----------------------------------------------------------------------===//
// Embedding and cross-entropy
//===----------------------------------------------------------------------===//

/// out's rows = table's by id, copied a Piece at a time: uint4 where a row
/// is whole 16-byte pieces and both tensors are aligned to them, else T
/// (the same bits either way); `pieces` a row.
template <typename Piece>
__global__ void embeddingKernel(const int32_t *ids, const Piece *table,
                                Piece *out, int64_t n, int64_t pieces,
                                const ErrorSlot *slot) {
  if (failed(slot))
    return;
  SHARDC_GRID_STRIDE(i, n * pieces) {
    int64_t row = i / pieces;
    out[i] = table[static_cast<int64_t>(ids[row]) * pieces + i % pieces];
  }
}

// embedding_grad sums each id's dy rows in cpu::embeddingGrad's order
// (shardc_rt/Kernels.h), in f32, so bit for bit its f32 result, with no
// atomics: the same ids and dy give the same bits, as PyTorch's sorted
// embedding backward. The positions are sorted by id, stably, by a
// counting sort of kDigitBits of the id a pass (least significant first);
// each id's run in the sorted order is marked; a thread per (group, column)
// sums a group of a run longer than one (kGroup positions); then a thread
// per (id, column) sums its run's rows, or its groups' sums.

constexpr int64_t kGroup = SHARDC_RT_EMBEDDING_GRAD_GROUP;

constexpr int kDigitBits = 4, kDigits = 1 << kDigitBits;

/// The ids a sorting thread takes: a tile of consecutive positions, so that
/// tiles in thread order are in position order (what keeps the sort
/// stable).
constexpr int64_t kSortTile = 64;

/// The end of tile `tile`'s positions.
__device__ int64_t tileEnd(int64_t tile, int64_t n) {
  int64_t end = (tile + 1) * kSortTile;
  return end < n ? end : n;
}

__device__ int digitOf(int32_t id, int shift) {
  return static_cast<int>(static_cast<uint32_t>(id) >> shift) & (kDigits - 1);
}

/// counts[d * tiles + tile] = the ids of tile `tile` whose digit at `shift`
/// is d: digit-major, so that the counts' exclusive prefix sums are where
/// each tile's ids of each digit go.
__global__ void digitCountsKernel(const int32_t *ids, int64_t n, int shift,
                                  int64_t *counts, int64_t tiles,
                                  const ErrorSlot *guard) {
  if (failed(guard))
    return;
  SHARDC_GRID_STRIDE(tile, tiles) {
    int64_t count[kDigits] = {};
    for (int64_t i = tile * kSortTile, end = tileEnd(tile, n); i < end; ++i)
      ++count[digitOf(ids[i], shift)];
    for (int d = 0; d < kDigits; ++d)
      counts[d * tiles + tile] = count[d];
  }
}

/// x[0, n) = its exclusive prefix sums, by one block of kScanThreads: each
/// thread sums a slice of consecutive elements, the block scans the slices'
/// sums, and each thread rewrites its slice.
constexpr int kScanThreads = 1024;

__global__ void __launch_bounds__(kScanThreads)
    exclusiveScanKernel(int64_t *x, int64_t n, const ErrorSlot *guard) {
  __shared__ int64_t before[kScanThreads];
  if (failed(guard))
    return; // every thread alike
  int self = static_cast<int>(threadIdx.x);
  int64_t slice = (n + kScanThreads - 1) / kScanThreads;
  int64_t begin = self * slice < n ? self * slice : n;
  int64_t end = begin + slice < n ? begin + slice : n;
  int64_t sum = 0;
  for (int64_t i = begin; i < end; ++i)
    sum += x[i];
  before[self] = sum;
  __syncthreads();
  for (int offset = 1; offset < kScanThreads; offset <<= 1) {
    int64_t add = self >= offset ? before[self - offset] : 0;
    __syncthreads();
    before[self] += add;
    __syncthreads();
  }
  int64_t running = before[self] - sum; // the slices before this one
  for (int64_t i = begin; i < end; ++i) {
    int64_t own = x[i];
    x[i] = running;
    running += own;
  }
}

/// One pass of the counting sort: each tile's ids, in order, to the next
/// slot of their digit (offsets: digitCountsKernel's counts, scanned), their
/// positions with them (positions null: the first pass, position i).
__global__ void digitScatterKernel(const int32_t *ids, const int64_t *positions,
                                   int64_t n, int shift, const int64_t *offsets,
                                   int64_t tiles, int32_t *sortedIds,
                                   int64_t *sortedPositions,
                                   const ErrorSlot *guard) {
  if (failed(guard))
    return;
  SHARDC_GRID_STRIDE(tile, tiles) {
    int64_t next[kDigits];
    for (int d = 0; d < kDigits; ++d)
      next[d] = offsets[d * tiles + tile];
    for (int64_t i = tile * kSortTile, end = tileEnd(tile, n); i < end; ++i) {
      int64_t at = next[digitOf(ids[i], shift)]++;
      sortedIds[at] = ids[i];
      sortedPositions[at] = positions ? positions[i] : i;
    }
  }
}

/// [runBegin[id], runEnd[id]) = the run of id in sorted (both zeroed
/// before: ids absent from it keep an empty run).
__global__ void markRunsKernel(const int32_t *sorted, int64_t n,
                               int64_t *runBegin, int64_t *runEnd,
                               const ErrorSlot *guard) {
  if (failed(guard))
    return;
  SHARDC_GRID_STRIDE(i, n) {
    int32_t id = sorted[i];
    if (i == 0 || sorted[i - 1] != id)
      runBegin[id] = i;
    if (i == n - 1 || sorted[i + 1] != id)
      runEnd[id] = i + 1;
  }
}

/// The sum of dy[positions[p], j] over p in [first, last), from 0, in f32.
template <typename T>
__device__ float sumRows(const T *dy, const int64_t *positions, int64_t first,
                         int64_t last, int64_t c, int64_t j) {
  float sum = 0.0f;
#pragma unroll 4
  for (int64_t p = first; p < last; ++p)
    sum += load(dy[positions[p] * c + j]);
  return sum;
}

/// groups[id] = the groups id's run is summed in, for id in [0, v]:
/// ceil(run / kGroup) for a run longer than kGroup, else 0 (none for v,
/// so that the exclusive scan leaves the total in groups[v]).
__global__ void groupCountsKernel(const int64_t *runBegin,
                                  const int64_t *runEnd, int64_t v,
                                  int64_t *groups, const ErrorSlot *guard) {
  if (failed(guard))
    return;
  SHARDC_GRID_STRIDE(id, v + 1) {
    int64_t run = id < v ? runEnd[id] - runBegin[id] : 0;
    groups[id] = run > kGroup ? (run + kGroup - 1) / kGroup : 0;
  }
}

/// partials[group, j] = sumRows over the group-th of the groups[v] groups
/// (groupCountsKernel's counts, scanned: id's are groups[id] on), for
/// group < groups[v] <= maxGroups.
template <typename T>
__global__ void embeddingGradGroupsKernel(
    const T *dy, const int64_t *positions, const int64_t *runBegin,
    const int64_t *runEnd, const int64_t *groups, float *partials, int64_t v,
    int64_t c, int64_t maxGroups, const ErrorSlot *guard) {
  if (failed(guard))
    return;
  int64_t count = groups[v];
  SHARDC_GRID_STRIDE(i, maxGroups * c) {
    int64_t group = i / c, j = i % c;
    if (group >= count)
      return; // so are the thread's later ones
    // The group's id: the last whose groups begin at or before it (the ids
    // between have none, and begin there too).
    int64_t lo = pieceOf(groups, v, group);
    int64_t first = runBegin[lo] + (group - groups[lo]) * kGroup;
    int64_t last = first + kGroup < runEnd[lo] ? first + kGroup : runEnd[lo];
    partials[i] = sumRows(dy, positions, first, last, c, j);
  }
}

/// dtable[id, j] = the sum of dy[p, j] over id's positions p (its run of
/// the sorted positions), in f32: a run of up to kGroup in increasing p
/// from 0; a longer one its groups' partials in turn, from 0.
template <typename T>
__global__ void
embeddingGradKernel(const T *dy, const int64_t *positions,
                    const int64_t *runBegin, const int64_t *runEnd,
                    const int64_t *groups, const float *partials, float *dtable,
                    int64_t v, int64_t c, const ErrorSlot *guard) {
  if (failed(guard))
    return;
  SHARDC_GRID_STRIDE(i, v * c) {
    int64_t id = i / c, j = i % c;
    if (runEnd[id] - runBegin[id] <= kGroup) {
      dtable[i] = sumRows(dy, positions, runBegin[id], runEnd[id], c, j);
      continue;
    }
    float sum = 0.0f;
    for (int64_t group = groups[id]; group < groups[id + 1]; ++group)
      sum += partials[group * c + j];
    dtable[i] = sum;
  }
}

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
                                   T *dlogits, int64_t n, int64_t v,
                                   int64_t ld, const ErrorSlot *slot) {
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

//===----------------------------------------------------------------------===//
// GEMM
//===----------------------------------------------------------------------===//

/// Row-major c = alpha op(a) op(b) + beta c for `batch` matrix triples
/// strideA / strideB / strideC elements apart, op(a) [m, kd], op(b) [kd, n];
/// lda, ldb, ldc are the row strides of the stored matrices (as CBLAS
/// row-major). beta is 0 or 1. cuBLAS is column-major: it computes
/// c^T = op(b)^T op(a)^T, reading the row-major b and a as their transposes.
/// All float: cublasSgemm (TF32 where the handle allows it). bf16 operands
/// (T = __nv_bfloat16), with a bf16 or f32 result C: cublasGemmEx on bf16
/// tensor cores, accumulating in f32, c rounded once.
template <typename T> constexpr cudaDataType_t cudaTypeOf() {
  return std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
}

template <typename T, typename C = T>
void gemm(Kernels *k, bool transA, bool transB, int64_t m, int64_t n,
          int64_t kd, float alpha, const T *a, int64_t lda, int64_t strideA,
          const T *b, int64_t ldb, int64_t strideB, float beta, C *c,
          int64_t ldc, int64_t strideC, int64_t batch) {
  static_assert(!std::is_same_v<T, float> || std::is_same_v<C, float>,
                "f32 operands give an f32 result");
  if (m <= 0 || n <= 0 || batch <= 0)
    return;
  if (kd <= 0) {
    // Nothing to multiply (and a leading dimension of 0 that cuBLAS would
    // reject): c = beta c.
    if (beta == 0.0f) {
      zeroMatricesKernel<<<gridFor(k, batch * m * n), kThreads, 0,
                           k->stream>>>(c, batch, m, n, ldc, strideC);
      SHARDC_CUDA_CHECK_LAUNCH();
    }
    return;
  }
  checkIntRange("gemm m", m);
  checkIntRange("gemm n", n);
  checkIntRange("gemm k", kd);
  checkIntRange("gemm lda", lda);
  checkIntRange("gemm ldb", ldb);
  checkIntRange("gemm ldc", ldc);
  checkIntRange("gemm batch", batch);
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  if constexpr (!std::is_same_v<T, float>) {
    SHARDC_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        k->blas, opB, opA, static_cast<int>(n), static_cast<int>(m),
        static_cast<int>(kd), &alpha, b, cudaTypeOf<T>(),
        static_cast<int>(ldb), strideB, a, cudaTypeOf<T>(),
        static_cast<int>(lda), strideA, &beta, c, cudaTypeOf<C>(),
        static_cast<int>(ldc), strideC, static_cast<int>(batch),
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else if (batch == 1) {
    SHARDC_CUBLAS_CHECK(cublasSgemm(
        k->blas, opB, opA, static_cast<int>(n), static_cast<int>(m),
        static_cast<int>(kd), &alpha, b, static_cast<int>(ldb), a,
        static_cast<int>(lda), &beta, c, static_cast<int>(ldc)));
  } else {
    SHARDC_CUBLAS_CHECK(cublasSgemmStridedBatched(
        k->blas, opB, opA, static_cast<int>(n), static_cast<int>(m),
        static_cast<int>(kd), &alpha, b, static_cast<int>(ldb), strideB, a,
        static_cast<int>(lda), strideA, &beta, c, static_cast<int>(ldc),
        strideC, static_cast<int>(batch)));
  }
}

//===----------------------------------------------------------------------===//
// GEMM epilogues (cuBLASLt: EpilogueGemms.h)
//===----------------------------------------------------------------------===//

/// Row-major d[m, n] = epilogue(op(a) op(b)) in one cuBLASLt matmul
/// (EpilogueGemms::run). Returns false, having enqueued nothing, where the
/// epilogues are off, where f32 without TF32 asks for a GELU, or where
/// cuBLASLt cannot run it: the caller then runs the unfused kernels.
template <typename T>
bool gemmEpilogue(Kernels *k, cublasLtEpilogue_t epilogue, bool transA,
                  bool transB, int64_t m, int64_t n, int64_t kd, const T *a,
                  const T *b, T *d, const void *bias, const void *aux) {
  // kd = 0: the unfused path writes the bias (or zeros) and its elementwise
  // kernel, without a GEMM cuBLASLt would have to take.
  if (!k->gemmEpilogues || m <= 0 || n <= 0 || kd <= 0)
    return false;
  // cuBLASLt does not document the accuracy of its GELU (CUTLASS's GELU
  // epilogues take a fast tanh, about 2^-11 relative): within the rounding
  // of TF32 GEMMs and of bf16, not of full fp32. fp32 without TF32 keeps
  // GELU and its derivative in the elementwise kernels.
  if (std::is_same_v<T, float> && !k->allowTf32 &&
      epilogue != CUBLASLT_EPILOGUE_BIAS &&
      epilogue != CUBLASLT_EPILOGUE_BGRADB)
    return false;
  return k->epilogues->run(
      {m, n, kd, transA, transB, cudaTypeOf<T>(), epilogue, k->allowTf32}, a, b,
      d, bias, aux);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

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

/// linear and matmul for T = float or __nv_bfloat16 (see gemm).
template <typename T>
void linear(Kernels *k, const T *x, const T *w, const T *b, T *y, int64_t m,
            int64_t kdim, int64_t n) {
  if (m <= 0 || n <= 0)
    return;
  // With epilogues, one cuBLASLt GEMM adds the bias to the f32 accumulator.
  if (b && gemmEpilogue(k, CUBLASLT_EPILOGUE_BIAS, false, true, m, n, kdim, x,
                        w, y, b, nullptr))
    return;
  // Else the bias goes in first and the GEMM accumulates onto it.
  if (b) {
    broadcastRowsKernel<<<gridFor(k, m * n), kThreads, 0, k->stream>>>(
        y, b, m * n, n);
    SHARDC_CUDA_CHECK_LAUNCH();
  }
  gemm(k, false, true, m, n, kdim, 1.0f, x, kdim, 0, w, kdim, 0,
       b ? 1.0f : 0.0f, y, n, 0, 1);
}

template <typename T>
void matmul(Kernels *k, const T *lhs, const T *rhs, T *out, int64_t batch,
            int64_t m, int64_t kdim, int64_t n, int transposeLhs,
            int transposeRhs) {
  int64_t lda = transposeLhs ? m : kdim;
  int64_t ldb = transposeRhs ? kdim : n;
  gemm(k, transposeLhs != 0, transposeRhs != 0, m, n, kdim, 1.0f, lhs, lda,
       m * kdim, rhs, ldb, kdim * n, 0.0f, out, n, m * n, batch);
}

/// dst[n] = src[n], on the kernels' stream.
template <typename T> void copy(Kernels *k, T *dst, const T *src, int64_t n) {
  if (n <= 0)
    return;
  SHARDC_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(T),
                                    cudaMemcpyDeviceToDevice, k->stream));
}

/// Launches an elementwise kernel over n elements on the kernels' stream.
template <typename... Params, typename... Args>
void launch(Kernels *k, int64_t n, void (*kernel)(Params...), Args... args) {
  if (n <= 0)
    return;
  kernel<<<gridFor(k, n), kThreads, 0, k->stream>>>(args...);
  SHARDC_CUDA_CHECK_LAUNCH();
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

/// linear_gelu: pre = linear(x, w, b), y = gelu(pre). With epilogues, one
/// cuBLASLt GEMM whose epilogue adds the bias, stores pre (aux) and applies
/// GELU to the f32 preactivation (for bf16 before its rounding, where the
/// unfused path takes gelu of the rounded pre: one bf16 rounding apart).
template <typename T>
void linearGelu(Kernels *k, const T *x, const T *w, const T *b, T *pre, T *y,
                int64_t m, int64_t kdim, int64_t n) {
  if (m <= 0 || n <= 0)
    return;
  cublasLtEpilogue_t epilogue =
      b ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  if (gemmEpilogue(k, epilogue, false, true, m, n, kdim, x, w, y, b,
                   static_cast<const void *>(pre)))
    return;
  linear(k, x, w, b, pre, m, kdim, n);
  launch(k, m * n, geluKernel<T>, pre, y, m * n);
}

/// matmul_gelu_grad: dx = gelu_grad(op(lhs) op(rhs), pre), batch 1. With
/// epilogues, for bf16, one cuBLASLt GEMM whose epilogue multiplies the f32
/// product by gelu'(pre) before rounding it (the unfused path rounds it
/// first); else, and for f32, matmul into dx, then gelu_grad in place. On
/// an H200 (GPT-2 small, 12 layers) the DGELU epilogue took bf16's from
/// 31.6 to 14.1 ms a step but f32's (TF32) from 22.2 to 27.7.
template <typename T>
void matmulGeluGrad(Kernels *k, const T *lhs, const T *rhs, const T *pre, T *dx,
                    int64_t m, int64_t kdim, int64_t n, int transposeLhs,
                    int transposeRhs) {
  if (m <= 0 || n <= 0)
    return;
  if (!std::is_same_v<T, float> &&
      gemmEpilogue(k, CUBLASLT_EPILOGUE_DGELU, transposeLhs != 0,
                   transposeRhs != 0, m, n, kdim, lhs, rhs, dx, nullptr,
                   static_cast<const void *>(pre)))
    return;
  matmul(k, lhs, rhs, dx, 1, m, kdim, n, transposeLhs, transposeRhs);
  launch(k, m * n, geluGradKernel<T>, dx, pre, dx, m * n);
}

/// matmul_bias_grad's weight gradient dw[m, n] = lhs^T op(rhs), lhs [kdim,
/// m], batch 1. With epilogues, one cuBLASLt GEMM whose BGRADB epilogue also
/// writes db[m], lhs's rows summed in f32 and rounded to T once, from the
/// same read of lhs (Transformer Engine's wgrad GEMM): returns true. Else
/// (false) dw alone, and the caller sums db as sum_to does.
template <typename T>
bool matmulBiasGrad(Kernels *k, const T *lhs, const T *rhs, T *dw, T *db,
                    int64_t m, int64_t kdim, int64_t n, int transposeRhs) {
  if (m <= 0)
    return true; // no columns: nothing to write
  if (k->biasGradEpilogue &&
      gemmEpilogue(k, CUBLASLT_EPILOGUE_BGRADB, true, transposeRhs != 0, m, n,
                   kdim, lhs, rhs, dw, static_cast<const void *>(db), nullptr))
    return true;
  matmul(k, lhs, rhs, dw, 1, m, kdim, n, 1, transposeRhs);
  return false;
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

/// Whether attention of element type T runs the fused kernels
/// (FlashAttention.h) rather than GEMMs over the full scores: switched on
/// (set_flash_attention), a head size they take, and for f32 only where
/// TF32 is allowed (create's allowTf32: SHARDC_TF32 on), since they multiply
/// on TF32 tensor cores; with TF32 off the caller asked for full fp32
/// products, which f32 keeps through the GEMMs; qkv and dy (null in the
/// forward) as the kernels read them (flashAttentionTakes, for the
/// backward's flashBackwardPlan). The GEMMs' forward writes the lse a fused
/// backward reads.
template <typename T>
bool useFlash(const Kernels *k, int64_t c, int64_t heads, const T *qkv,
              const T *dy) {
  if (!k->flashAttention)
    return false;
  if (std::is_same_v<T, float> && !k->allowTf32)
    return false;
  return shardc::rt::cuda::flashAttentionTakes<T>(c / heads, qkv, dy,
                                                  flashBackwardPlan(k));
}

/// Says on stderr, once per shape and reason, why cuDNN declines a call
/// of it: `why`, cuDNN's reason (planning, or its first call that cuDNN
/// refused) where null.
void sayCudnnDeclines(Kernels *k, const shardc::rt::cuda::AttentionShape &s,
                      const char *why = nullptr) {
  std::string reason = why ? why : k->cudnn->declines(s);
  if (!k->cudnnDeclinesSaid.insert({s, reason}).second)
    return;
  std::fprintf(stderr,
               "shardc: cuDNN attention declines bf16 b=%lld t=%lld c=%lld "
               "heads=%lld (%s): the flash kernels (else GEMMs) run it\n",
               static_cast<long long>(s.b), static_cast<long long>(s.t),
               static_cast<long long>(s.c), static_cast<long long>(s.heads),
               reason.c_str());
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
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    shardc::rt::cuda::AttentionShape shape{b, t, c, heads};
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
  if (useFlash<T>(k, c, heads, qkv, nullptr)) {
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
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    shardc::rt::cuda::AttentionShape shape{b, t, c, heads};
    if (useCudnn(k, shape, {dy, qkv, out, lse, dqkv})) {
      void *work = scratch(k, k->cudnn->backwardWorkspaceBytes(shape));
      if (k->cudnn->backward(shape, dy, qkv, out, lse, dqkv, work))
        return;
      sayCudnnDeclines(k, shape);
    }
  }
  if (useFlash<T>(k, c, heads, qkv, dy)) {
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
      gemm(k, false, true, t, t, d, 1.0f, dyh, c, sy, v, ld, s, 0.0f, dprobs,
           t, t * t, count);
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

/// out[n, c] = the rows of table (T = float or __nv_bfloat16) by id.
template <typename T>
void embedding(Kernels *k, const int32_t *ids, const T *table, T *out,
               int64_t n, int64_t v, int64_t c) {
  checkIds<T>(k, ids, n, v, kOpEmbedding);
  if (c <= 0)
    return;
  const ErrorSlot *slot = k->slot;
  constexpr int64_t kVector = 16 / sizeof(T);
  if (c % kVector == 0 && shardc::rt::cuda::isChunkAligned(table) &&
      shardc::rt::cuda::isChunkAligned(out))
    return launch(k, n * c / kVector, embeddingKernel<uint4>, ids,
                  reinterpret_cast<const uint4 *>(table),
                  reinterpret_cast<uint4 *>(out), n, c / kVector, slot);
  launch(k, n * c, embeddingKernel<T>, ids, table, out, n, c, slot);
}

/// dtable[v, c] (f32) = the rows of dy (T = float or __nv_bfloat16)
/// summed by id in cpu::embeddingGrad's order (embeddingGradKernel): the
/// positions sorted by id, kDigitBits of the id (enough for v - 1) a pass.
/// Runs longer than kGroup (at least kGroup + 1 positions each) take
/// ceil(run / kGroup) < 2 run / kGroup groups, fewer than maxGroups.
template <typename T>
void embeddingGrad(Kernels *k, const T *dy, const int32_t *ids, float *dtable,
                   int64_t n, int64_t v, int64_t c) {
  checkIds<T>(k, ids, n, v, kOpEmbeddingGrad);
  const ErrorSlot *guard = k->slot;
  if (v <= 0 || c <= 0)
    return;
  int64_t tiles = (n + kSortTile - 1) / kSortTile;
  int64_t maxGroups = 2 * ((n + kGroup - 1) / kGroup);
  char *cursor = static_cast<char *>(scratch(
      k, 2 * pieceBytes<int32_t>(n) + 2 * pieceBytes<int64_t>(n) +
             pieceBytes<int64_t>(kDigits * tiles) + 2 * pieceBytes<int64_t>(v) +
             pieceBytes<int64_t>(v + 1) + pieceBytes<float>(maxGroups * c)));
  int32_t *sortedIds[2] = {carve<int32_t>(cursor, n),
                           carve<int32_t>(cursor, n)};
  int64_t *sortedPositions[2] = {carve<int64_t>(cursor, n),
                                 carve<int64_t>(cursor, n)};
  int64_t *counts = carve<int64_t>(cursor, kDigits * tiles);
  int64_t *runBegin = carve<int64_t>(cursor, v);
  int64_t *runEnd = carve<int64_t>(cursor, v);
  int64_t *groups = carve<int64_t>(cursor, v + 1);
  float *partials = carve<float>(cursor, maxGroups * c);
  const int32_t *keys = ids;
  const int64_t *positions = nullptr;
  int bits = 1; // of the largest id, v - 1
  while (bits < 31 && ((v - 1) >> bits) != 0)
    ++bits;
  for (int shift = 0, pass = 0; n > 0 && shift < bits;
       shift += kDigitBits, ++pass) {
    launch(k, tiles, digitCountsKernel, keys, n, shift, counts, tiles, guard);
    exclusiveScanKernel<<<1, kScanThreads, 0, k->stream>>>(
        counts, kDigits * tiles, guard);
    SHARDC_CUDA_CHECK_LAUNCH();
    launch(k, tiles, digitScatterKernel, keys, positions, n, shift, counts,
           tiles, sortedIds[pass % 2], sortedPositions[pass % 2], guard);
    keys = sortedIds[pass % 2];
    positions = sortedPositions[pass % 2];
  }
  SHARDC_CUDA_CHECK(cudaMemsetAsync(
      runBegin, 0, static_cast<size_t>(v) * sizeof(int64_t), k->stream));
  SHARDC_CUDA_CHECK(cudaMemsetAsync(
      runEnd, 0, static_cast<size_t>(v) * sizeof(int64_t), k->stream));
  launch(k, n, markRunsKernel, keys, n, runBegin, runEnd, guard);
  launch(k, v + 1, groupCountsKernel, runBegin, runEnd, v, groups, guard);
  exclusiveScanKernel<<<1, kScanThreads, 0, k->stream>>>(groups, v + 1, guard);
  SHARDC_CUDA_CHECK_LAUNCH();
  if (maxGroups > 0)
    launch(k, maxGroups * c, embeddingGradGroupsKernel<T>, dy, positions,
           runBegin, runEnd, groups, partials, v, c, maxGroups, guard);
  launch(k, v * c, embeddingGradKernel<T>, dy, positions, runBegin, runEnd,
         groups, partials, dtable, v, c, guard);
}

/// layernorm and its gradient for T = float or __nv_bfloat16; dweight and
/// dbias are f32 column sums either way. With `rhs` and `sum`,
/// add_layernorm (sum = x + rhs, y = layernorm(sum)); with `addend`,
/// layernorm_grad_add (dx = addend + the input's gradient).
template <typename T>
void layerNorm(Kernels *k, const T *x, const T *rhs, const T *w, const T *b,
               T *sum, T *y, int64_t rows, int64_t c, double eps) {
  if (rows <= 0 || c <= 0)
    return;
  if (int chunks = chunkedRowChunks<T>(c)) {
    bool aligned = allChunkAligned({x, rhs, w, b, sum, y});
    withLaneChunks(chunks, [&](auto kChunks) {
      chunkedLayerNormKernel<T, decltype(kChunks)::value>
          <<<warpRowGrid(rows), kThreads, 0, k->stream>>>(
              x, rhs, w, b, sum, y, rows, c, static_cast<float>(eps), aligned);
    });
  } else {
    layerNormKernel<<<warpRowGrid(rows), kThreads, 0, k->stream>>>(
        x, rhs, w, b, sum, y, rows, c, static_cast<float>(eps));
  }
  SHARDC_CUDA_CHECK_LAUNCH();
}

/// layerNormGradKernel's fused plan: its blocks (a few a multiprocessor, as
/// their shared memory allows, and no more than the rows' warps fill) and
/// their shared bytes; none (0 blocks) where two rows of `slots` floats per
/// warp (c, or a chunked kernel's lanes' slots) pass what a block may have.
struct FusedColumnPlan {
  int64_t blocks = 0;
  size_t sharedBytes = 0;
};

FusedColumnPlan planFusedColumns(const Kernels *k, int64_t rows,
                                 int64_t slots) {
  FusedColumnPlan plan;
  plan.sharedBytes =
      2 * kWarpsPerBlock * static_cast<size_t>(slots) * sizeof(float);
  if (plan.sharedBytes > static_cast<size_t>(k->sharedOptin))
    return plan;
  int64_t perSm = std::clamp<int64_t>(
      k->sharedOptin / static_cast<int64_t>(plan.sharedBytes), 1, 4);
  plan.blocks = std::min<int64_t>(k->smCount * perSm,
                                  (rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  return plan;
}

template <typename T>
void layerNormGrad(Kernels *k, const T *dy, const T *x, const T *w,
                   const T *addend, T *dx, float *dw, float *db, int64_t rows,
                   int64_t c, double eps) {
  if (c <= 0)
    return;
  ColumnPlan plan = planColumns(k, rows, c);
  if (rows <= 0) {
    columnSums(k, SumRows<T>{x, c}, 0, c, plan, dw, db, nullptr, nullptr);
    return;
  }
  int chunks = chunkedRowChunks<T>(c);
  bool aligned = allChunkAligned({dy, x, w, addend, dx});
  int64_t slots = chunks > 0 ? int64_t(chunks) * 32 * (16 / sizeof(T)) : c;
  if (FusedColumnPlan fused = planFusedColumns(k, rows, slots);
      fused.blocks > 0) {
    float *partials = static_cast<float *>(
        scratch(k, pieceBytes<float>(2 * fused.blocks * c)));
    auto blocks = static_cast<unsigned>(fused.blocks);
    auto sharedBytes = static_cast<int>(fused.sharedBytes);
    if (chunks > 0) {
      withLaneChunks(chunks, [&](auto kChunks) {
        constexpr int kLaneChunks = decltype(kChunks)::value;
        SHARDC_CUDA_CHECK(cudaFuncSetAttribute(
            chunkedLayerNormGradKernel<T, kLaneChunks>,
            cudaFuncAttributeMaxDynamicSharedMemorySize, sharedBytes));
        chunkedLayerNormGradKernel<T, kLaneChunks>
            <<<blocks, kThreads, sharedBytes, k->stream>>>(
                dy, x, w, addend, dx, partials, rows, c,
                static_cast<float>(eps), aligned);
      });
    } else {
      SHARDC_CUDA_CHECK(cudaFuncSetAttribute(
          layerNormGradKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
          sharedBytes));
      layerNormGradKernel<T><<<blocks, kThreads, sharedBytes, k->stream>>>(
          dy, x, w, addend, dx, nullptr, nullptr, partials, rows, c,
          static_cast<float>(eps));
    }
    SHARDC_CUDA_CHECK_LAUNCH();
    columnFinishKernel<<<gridFor(k, c), kThreads, 0, k->stream>>>(
        partials, fused.blocks, c, dw);
    SHARDC_CUDA_CHECK_LAUNCH();
    columnFinishKernel<<<gridFor(k, c), kThreads, 0, k->stream>>>(
        partials + fused.blocks * c, fused.blocks, c, db);
    SHARDC_CUDA_CHECK_LAUNCH();
    return;
  }
  int64_t partialCount = plan.chunks > 1 ? plan.chunks * c : 0;
  char *cursor = static_cast<char *>(
      scratch(k, 2 * pieceBytes<float>(rows) +
                     2 * pieceBytes<float>(partialCount)));
  float *means = carve<float>(cursor, rows);
  float *rstds = carve<float>(cursor, rows);
  float *partialsW = carve<float>(cursor, partialCount);
  float *partialsB = carve<float>(cursor, partialCount);
  layerNormGradKernel<<<warpRowGrid(rows), kThreads, 0, k->stream>>>(
      dy, x, w, addend, dx, means, rstds, nullptr, rows, c,
      static_cast<float>(eps));
  SHARDC_CUDA_CHECK_LAUNCH();
  columnSums(k, LayerNormParamTerms<T>{dy, x, means, rstds, c}, rows, c, plan,
             dw, db, partialsW, partialsB);
}

/// y[inner] (f32) = x[outer, inner] (T = float or __nv_bfloat16) summed
/// over outer.
template <typename T>
void sumTo(Kernels *k, const T *x, float *y, int64_t outer, int64_t inner) {
  if (inner <= 0)
    return;
  // 16-byte chunks of columns where the rows are whole chunks.
  constexpr int kVector = 16 / sizeof(T);
  ColumnPlan plan =
      planColumns(k, outer, inner, inner % kVector == 0 ? kVector : 1);
  float *partials = nullptr;
  if (outer > 0 && plan.chunks > 1)
    partials = static_cast<float *>(
        scratch(k, pieceBytes<float>(plan.chunks * inner)));
  columnSums(k, SumRows<T>{x, inner}, outer, inner, plan, y, nullptr,
             partials, nullptr);
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
  double *rowLoss = loss && n > 0 ? static_cast<double *>(
                                        scratch(k, pieceBytes<double>(n)))
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

//===----------------------------------------------------------------------===//
// C ABI (the ops; KernelState.cpp has the object's lifecycle)
//===----------------------------------------------------------------------===//

extern "C" {

void shardc_rt_cuda_linear_f32(shardc_rt_cuda_kernels *k, const float *x,
                               const float *w, const float *b, float *y,
                               int64_t m, int64_t kdim, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "linear_f32");
  linear(k, x, w, b, y, m, kdim, n);
}

void shardc_rt_cuda_matmul_f32(shardc_rt_cuda_kernels *k, const float *lhs,
                               const float *rhs, float *out, int64_t batch,
                               int64_t m, int64_t kdim, int64_t n,
                               int transposeLhs, int transposeRhs) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "matmul_f32");
  matmul(k, lhs, rhs, out, batch, m, kdim, n, transposeLhs, transposeRhs);
}

void shardc_rt_cuda_add_f32(shardc_rt_cuda_kernels *k, const float *lhs,
                            const float *rhs, float *y, int64_t n, int64_t m) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "add_f32");
  if (m > 0)
    add(k, lhs, rhs, y, n, m);
}

void shardc_rt_cuda_scale_f32(shardc_rt_cuda_kernels *k, const float *x,
                              float *y, int64_t n, double factor) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "scale_f32");
  launch(k, n, scaleKernel<float>, x, y, n, static_cast<float>(factor));
}

void shardc_rt_cuda_gelu_f32(shardc_rt_cuda_kernels *k, const float *x,
                             float *y, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "gelu_f32");
  launch(k, n, geluKernel<float>, x, y, n);
}

void shardc_rt_cuda_relu_f32(shardc_rt_cuda_kernels *k, const float *x,
                             float *y, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "relu_f32");
  launch(k, n, reluKernel<float>, x, y, n);
}

void shardc_rt_cuda_layernorm_f32(shardc_rt_cuda_kernels *k, const float *x,
                                  const float *w, const float *b, float *y,
                                  int64_t rows, int64_t c, double eps) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "layernorm_f32");
  layerNorm(k, x, static_cast<const float *>(nullptr), w, b,
            static_cast<float *>(nullptr), y, rows, c, eps);
}

void shardc_rt_cuda_linear_gelu_f32(shardc_rt_cuda_kernels *k, const float *x,
                                    const float *w, const float *b, float *pre,
                                    float *y, int64_t m, int64_t kdim,
                                    int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "linear_gelu_f32");
  linearGelu(k, x, w, b, pre, y, m, kdim, n);
}

void shardc_rt_cuda_add_layernorm_f32(shardc_rt_cuda_kernels *k,
                                      const float *lhs, const float *rhs,
                                      const float *w, const float *b,
                                      float *sum, float *y, int64_t rows,
                                      int64_t c, double eps) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "add_layernorm_f32");
  layerNorm(k, lhs, rhs, w, b, sum, y, rows, c, eps);
}

void shardc_rt_cuda_embedding_f32(shardc_rt_cuda_kernels *k,
                                  const int32_t *ids, const float *table,
                                  float *out, int64_t n, int64_t v,
                                  int64_t c) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "embedding_f32");
  embedding(k, ids, table, out, n, v, c);
}

void shardc_rt_cuda_attention_f32(shardc_rt_cuda_kernels *k, const float *qkv,
                                  float *out, float *lse, int64_t b, int64_t t,
                                  int64_t c, int64_t heads) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "attention_f32");
  attention(k, qkv, out, lse, b, t, c, heads);
}

void shardc_rt_cuda_cross_entropy_f32(shardc_rt_cuda_kernels *k,
                                      const float *logits,
                                      const int32_t *targets, float *loss,
                                      int64_t n, int64_t v, int64_t ld) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "cross_entropy_f32");
  crossEntropy(k, kOpCrossEntropy, logits, targets, n, v, ld, loss, nullptr,
               static_cast<float *>(nullptr));
}

void shardc_rt_cuda_iota_i32(shardc_rt_cuda_kernels *k, int32_t *out,
                             int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "iota_i32");
  launch(k, n, iotaKernel, out, n);
}

void shardc_rt_cuda_sum_to_f32(shardc_rt_cuda_kernels *k, const float *x,
                               float *y, int64_t outer, int64_t inner) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "sum_to_f32");
  sumTo(k, x, y, outer, inner);
}

void shardc_rt_cuda_copy_f32(shardc_rt_cuda_kernels *k, float *dst,
                             const float *src, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "copy_f32");
  copy(k, dst, src, n);
}

void shardc_rt_cuda_fill_f32(shardc_rt_cuda_kernels *k, float *dst,
                             float value, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "fill_f32");
  launch(k, n, fillKernel<float>, dst, value, n,
         static_cast<const ErrorSlot *>(nullptr));
}

void shardc_rt_cuda_accumulate_f32(shardc_rt_cuda_kernels *k, float *dst,
                                   const float *src, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "accumulate_f32");
  launch(k, n, accumulateKernel<float>, dst, src, n);
}

void shardc_rt_cuda_gelu_grad_f32(shardc_rt_cuda_kernels *k, const float *dy,
                                  const float *x, float *dx, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "gelu_grad_f32");
  launch(k, n, geluGradKernel<float>, dy, x, dx, n);
}

void shardc_rt_cuda_relu_grad_f32(shardc_rt_cuda_kernels *k, const float *dy,
                                  const float *x, float *dx, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "relu_grad_f32");
  launch(k, n, reluGradKernel<float>, dy, x, dx, n);
}

void shardc_rt_cuda_layernorm_grad_f32(shardc_rt_cuda_kernels *k,
                                       const float *dy, const float *x,
                                       const float *w, float *dx, float *dw,
                                       float *db, int64_t rows, int64_t c,
                                       double eps) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "layernorm_grad_f32");
  layerNormGrad(k, dy, x, w, static_cast<const float *>(nullptr), dx, dw, db,
                rows, c, eps);
}

void shardc_rt_cuda_matmul_gelu_grad_f32(shardc_rt_cuda_kernels *k,
                                         const float *lhs, const float *rhs,
                                         const float *pre, float *dx, int64_t m,
                                         int64_t kdim, int64_t n,
                                         int transposeLhs, int transposeRhs) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "matmul_gelu_grad_f32");
  matmulGeluGrad(k, lhs, rhs, pre, dx, m, kdim, n, transposeLhs, transposeRhs);
}

void shardc_rt_cuda_matmul_bias_grad_f32(shardc_rt_cuda_kernels *k,
                                         const float *lhs, const float *rhs,
                                         float *dw, float *db, int64_t m,
                                         int64_t kdim, int64_t n,
                                         int transposeLhs, int transposeRhs) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "matmul_bias_grad_f32");
  (void)transposeLhs; // always set (train.matmul_bias_grad's verifier)
  if (!matmulBiasGrad(k, lhs, rhs, dw, db, m, kdim, n, transposeRhs))
    sumTo(k, lhs, db, kdim, m);
}

void shardc_rt_cuda_layernorm_grad_add_f32(shardc_rt_cuda_kernels *k,
                                           const float *dy, const float *x,
                                           const float *w, const float *addend,
                                           float *dx, float *dw, float *db,
                                           int64_t rows, int64_t c,
                                           double eps) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "layernorm_grad_add_f32");
  layerNormGrad(k, dy, x, w, addend, dx, dw, db, rows, c, eps);
}

void shardc_rt_cuda_embedding_grad_f32(shardc_rt_cuda_kernels *k,
                                       const float *dy, const int32_t *ids,
                                       float *dtable, int64_t n, int64_t v,
                                       int64_t c) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "embedding_grad_f32");
  embeddingGrad(k, dy, ids, dtable, n, v, c);
}

void shardc_rt_cuda_attention_grad_f32(shardc_rt_cuda_kernels *k,
                                       const float *dy, const float *qkv,
                                       const float *out, const float *lse,
                                       float *dqkv, int64_t b, int64_t t,
                                       int64_t c, int64_t heads) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "attention_grad_f32");
  attentionGrad(k, dy, qkv, out, lse, dqkv, b, t, c, heads);
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

void shardc_rt_cuda_adamw_multi_f32(shardc_rt_cuda_kernels *k,
                                    const shardc_rt_cuda_adamw_tensor *tensors,
                                    int32_t count, float lr, float beta1,
                                    float beta2, float eps, float weightDecay,
                                    int64_t step) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "adamw_f32");
  // The scalars exactly as runtime/host/Backend.cpp computes them from its
  // double hyperparameters (here the floats, widened).
  double correction1 = 1.0 - std::pow(static_cast<double>(beta1),
                                      static_cast<double>(step));
  double correction2 = 1.0 - std::pow(static_cast<double>(beta2),
                                      static_cast<double>(step));
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
                 "1 to %d (runtime/cuda/Kernels.cu)\n",
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

//===----------------------------------------------------------------------===//
// Mixed precision
//===----------------------------------------------------------------------===//

namespace {

using bf16 = __nv_bfloat16;

const bf16 *bf(const shardc_rt_bf16 *p) {
  return reinterpret_cast<const bf16 *>(p);
}
bf16 *bf(shardc_rt_bf16 *p) { return reinterpret_cast<bf16 *>(p); }

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

/// sum_to on bf16: the rows read in place; the sums (inner floats) rounded
/// from f32.
void sumToBf16(shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *x,
               shardc_rt_bf16 *y, int64_t outer, int64_t inner) {
  F32Results sums(k, {inner});
  float *fy = sums.take(inner);
  sumTo(k, bf(x), fy, outer, inner);
  sums.store(y, fy, inner);
}

/// layernorm_grad(_add) on bf16: the rows read and written in place (the
/// addend, where not null, added to each rounded gradient element); dweight
/// and dbias (column sums of c floats each) rounded from f32.
void layerNormGradBf16(shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *dy,
                       const shardc_rt_bf16 *x, const shardc_rt_bf16 *w,
                       const shardc_rt_bf16 *addend, shardc_rt_bf16 *dx,
                       shardc_rt_bf16 *dw, shardc_rt_bf16 *db, int64_t rows,
                       int64_t c, double eps) {
  F32Results sums(k, {c, c});
  float *fdw = sums.take(c), *fdb = sums.take(c);
  layerNormGrad(k, bf(dy), bf(x), bf(w), addend ? bf(addend) : nullptr, bf(dx),
                fdw, fdb, rows, c, eps);
  sums.store(dw, fdw, c);
  sums.store(db, fdb, c);
}

} // namespace

extern "C" {

void shardc_rt_cuda_convert_f32_bf16(shardc_rt_cuda_kernels *k,
                                     shardc_rt_bf16 *dst, const float *src,
                                     int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "convert_f32_bf16");
  launch(k, n, convertKernel<float, bf16>, bf(dst), src, n,
         static_cast<const ErrorSlot *>(nullptr));
}

void shardc_rt_cuda_convert_bf16_f32(shardc_rt_cuda_kernels *k, float *dst,
                                     const shardc_rt_bf16 *src, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "convert_bf16_f32");
  launch(k, n, convertKernel<bf16, float>, dst, bf(src), n,
         static_cast<const ErrorSlot *>(nullptr));
}

void shardc_rt_cuda_linear_bf16(shardc_rt_cuda_kernels *k,
                                const shardc_rt_bf16 *x,
                                const shardc_rt_bf16 *w,
                                const shardc_rt_bf16 *b, shardc_rt_bf16 *y,
                                int64_t m, int64_t kdim, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "linear_bf16");
  linear(k, bf(x), bf(w), b ? bf(b) : nullptr, bf(y), m, kdim, n);
}

void shardc_rt_cuda_matmul_bf16(shardc_rt_cuda_kernels *k,
                                const shardc_rt_bf16 *lhs,
                                const shardc_rt_bf16 *rhs, shardc_rt_bf16 *out,
                                int64_t batch, int64_t m, int64_t kdim,
                                int64_t n, int transposeLhs,
                                int transposeRhs) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "matmul_bf16");
  matmul(k, bf(lhs), bf(rhs), bf(out), batch, m, kdim, n, transposeLhs,
         transposeRhs);
}

void shardc_rt_cuda_add_bf16(shardc_rt_cuda_kernels *k,
                             const shardc_rt_bf16 *lhs,
                             const shardc_rt_bf16 *rhs, shardc_rt_bf16 *y,
                             int64_t n, int64_t m) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "add_bf16");
  if (m > 0)
    add(k, bf(lhs), bf(rhs), bf(y), n, m);
}

void shardc_rt_cuda_scale_bf16(shardc_rt_cuda_kernels *k,
                               const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                               int64_t n, double factor) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "scale_bf16");
  launch(k, n, scaleKernel<bf16>, bf(x), bf(y), n,
         static_cast<float>(factor));
}

void shardc_rt_cuda_gelu_bf16(shardc_rt_cuda_kernels *k,
                              const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                              int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "gelu_bf16");
  launch(k, n, geluKernel<bf16>, bf(x), bf(y), n);
}

void shardc_rt_cuda_relu_bf16(shardc_rt_cuda_kernels *k,
                              const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                              int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "relu_bf16");
  launch(k, n, reluKernel<bf16>, bf(x), bf(y), n);
}

void shardc_rt_cuda_gelu_grad_bf16(shardc_rt_cuda_kernels *k,
                                   const shardc_rt_bf16 *dy,
                                   const shardc_rt_bf16 *x,
                                   shardc_rt_bf16 *dx, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "gelu_grad_bf16");
  launch(k, n, geluGradKernel<bf16>, bf(dy), bf(x), bf(dx), n);
}

void shardc_rt_cuda_relu_grad_bf16(shardc_rt_cuda_kernels *k,
                                   const shardc_rt_bf16 *dy,
                                   const shardc_rt_bf16 *x,
                                   shardc_rt_bf16 *dx, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "relu_grad_bf16");
  launch(k, n, reluGradKernel<bf16>, bf(dy), bf(x), bf(dx), n);
}

void shardc_rt_cuda_copy_bf16(shardc_rt_cuda_kernels *k, shardc_rt_bf16 *dst,
                              const shardc_rt_bf16 *src, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "copy_bf16");
  copy(k, dst, src, n);
}

void shardc_rt_cuda_fill_bf16(shardc_rt_cuda_kernels *k, shardc_rt_bf16 *dst,
                              float value, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "fill_bf16");
  launch(k, n, fillKernel<bf16>, bf(dst), value, n,
         static_cast<const ErrorSlot *>(nullptr));
}

void shardc_rt_cuda_accumulate_bf16(shardc_rt_cuda_kernels *k,
                                    shardc_rt_bf16 *dst,
                                    const shardc_rt_bf16 *src, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "accumulate_bf16");
  launch(k, n, accumulateKernel<bf16>, bf(dst), bf(src), n);
}

void shardc_rt_cuda_embedding_bf16(shardc_rt_cuda_kernels *k,
                                   const int32_t *ids,
                                   const shardc_rt_bf16 *table,
                                   shardc_rt_bf16 *out, int64_t n, int64_t v,
                                   int64_t c) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "embedding_bf16");
  embedding(k, ids, bf(table), bf(out), n, v, c);
}

void shardc_rt_cuda_layernorm_bf16(shardc_rt_cuda_kernels *k,
                                   const shardc_rt_bf16 *x,
                                   const shardc_rt_bf16 *w,
                                   const shardc_rt_bf16 *b, shardc_rt_bf16 *y,
                                   int64_t rows, int64_t c, double eps) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "layernorm_bf16");
  layerNorm(k, bf(x), static_cast<const bf16 *>(nullptr), bf(w), bf(b),
            static_cast<bf16 *>(nullptr), bf(y), rows, c, eps);
}

void shardc_rt_cuda_add_layernorm_bf16(shardc_rt_cuda_kernels *k,
                                       const shardc_rt_bf16 *lhs,
                                       const shardc_rt_bf16 *rhs,
                                       const shardc_rt_bf16 *w,
                                       const shardc_rt_bf16 *b,
                                       shardc_rt_bf16 *sum, shardc_rt_bf16 *y,
                                       int64_t rows, int64_t c, double eps) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "add_layernorm_bf16");
  layerNorm(k, bf(lhs), bf(rhs), bf(w), bf(b), bf(sum), bf(y), rows, c, eps);
}

void shardc_rt_cuda_layernorm_grad_bf16(
    shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *dy,
    const shardc_rt_bf16 *x, const shardc_rt_bf16 *w, shardc_rt_bf16 *dx,
    shardc_rt_bf16 *dw, shardc_rt_bf16 *db, int64_t rows, int64_t c,
    double eps) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "layernorm_grad_bf16");
  layerNormGradBf16(k, dy, x, w, nullptr, dx, dw, db, rows, c, eps);
}

void shardc_rt_cuda_layernorm_grad_add_bf16(
    shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *dy,
    const shardc_rt_bf16 *x, const shardc_rt_bf16 *w,
    const shardc_rt_bf16 *addend, shardc_rt_bf16 *dx, shardc_rt_bf16 *dw,
    shardc_rt_bf16 *db, int64_t rows, int64_t c, double eps) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "layernorm_grad_add_bf16");
  layerNormGradBf16(k, dy, x, w, addend, dx, dw, db, rows, c, eps);
}

void shardc_rt_cuda_linear_gelu_bf16(shardc_rt_cuda_kernels *k,
                                     const shardc_rt_bf16 *x,
                                     const shardc_rt_bf16 *w,
                                     const shardc_rt_bf16 *b,
                                     shardc_rt_bf16 *pre, shardc_rt_bf16 *y,
                                     int64_t m, int64_t kdim, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "linear_gelu_bf16");
  linearGelu(k, bf(x), bf(w), b ? bf(b) : nullptr, bf(pre), bf(y), m, kdim, n);
}

void shardc_rt_cuda_matmul_gelu_grad_bf16(
    shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *lhs,
    const shardc_rt_bf16 *rhs, const shardc_rt_bf16 *pre, shardc_rt_bf16 *dx,
    int64_t m, int64_t kdim, int64_t n, int transposeLhs, int transposeRhs) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "matmul_gelu_grad_bf16");
  matmulGeluGrad(k, bf(lhs), bf(rhs), bf(pre), bf(dx), m, kdim, n, transposeLhs,
                 transposeRhs);
}

void shardc_rt_cuda_matmul_bias_grad_bf16(
    shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *lhs,
    const shardc_rt_bf16 *rhs, shardc_rt_bf16 *dw, shardc_rt_bf16 *db,
    int64_t m, int64_t kdim, int64_t n, int transposeLhs, int transposeRhs) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "matmul_bias_grad_bf16");
  (void)transposeLhs;
  if (!matmulBiasGrad(k, bf(lhs), bf(rhs), bf(dw), bf(db), m, kdim, n,
                      transposeRhs))
    sumToBf16(k, lhs, db, kdim, m);
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

void shardc_rt_cuda_cross_entropy_bf16(shardc_rt_cuda_kernels *k,
                                       const shardc_rt_bf16 *logits,
                                       const int32_t *targets, float *loss,
                                       int64_t n, int64_t v, int64_t ld) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "cross_entropy_bf16");
  crossEntropy(k, kOpCrossEntropy, bf(logits), targets, n, v, ld, loss,
               nullptr, static_cast<bf16 *>(nullptr));
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

void shardc_rt_cuda_sum_to_bf16(shardc_rt_cuda_kernels *k,
                                const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                                int64_t outer, int64_t inner) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "sum_to_bf16");
  sumToBf16(k, x, y, outer, inner);
}

void shardc_rt_cuda_embedding_grad_bf16(shardc_rt_cuda_kernels *k,
                                        const shardc_rt_bf16 *dy,
                                        const int32_t *ids,
                                        shardc_rt_bf16 *dtable, int64_t n,
                                        int64_t v, int64_t c) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "embedding_grad_bf16");
  // dy read in place; the table's gradient sums in f32, then is rounded.
  F32Results sums(k, {v * c});
  float *fdt = sums.take(v * c);
  embeddingGrad(k, bf(dy), ids, fdt, n, v, c);
  sums.store(dtable, fdt, v * c, /*guarded=*/true);
}

} // extern "C"
