//===- FlashAttention.cu - Fused causal attention on tensor cores ---------===//
//
// FlashAttention-2's schedule with wmma (16x16x16 bf16 tiles, f32
// accumulators). A block of 4 warps takes 64 rows; each warp owns 16 of
// them: in the forward 16 queries, whose scores against a block of 64 keys
// it computes, softmaxes online (running max and sum per row, one row at a
// time across the warp's 32 lanes) and multiplies into its 16 output rows,
// all in shared memory. The backward takes 64 keys per block and walks the
// query blocks at or after them: P from the scores and the forward's
// log-sum-exp, dS = P (dP - delta) with dP = dy v^T and delta = rowsum(dy o),
// then dv += P^T dy and dk += dS^T q for the block's keys, and dq += dS k for
// the queries through f32 atomics, rounded into dqkv at the end.
//
//===----------------------------------------------------------------------===//

#include "FlashAttention.h"

#include "Check.h"

#include <mma.h>

#include <algorithm>
#include <cmath>

using namespace nvcuda;
using bf16 = __nv_bfloat16;

namespace shardc::rt::cuda {
namespace {

constexpr int kBlock = 64; // queries (forward) or keys (backward) per block
constexpr int kWarps = 4;  // each owns 16 of the block's rows
constexpr int kThreads = 32 * kWarps;

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragAT =
    wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBT =
    wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

__device__ float warpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ float warpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/// dst[kBlock][d] = rows [0, valid) of src (row stride ld), zeros after.
__device__ void loadTile(bf16 *dst, const bf16 *src, int64_t ld,
                         int64_t valid, int d) {
  for (int i = threadIdx.x; i < kBlock * d; i += kThreads) {
    int r = i / d, j = i % d;
    dst[i] = r < valid ? src[r * ld + j] : __float2bfloat16(0.0f);
  }
}

/// acc += the sum over `steps` 16-wide k steps of a-tile * b-tile, the
/// tiles `aStep` and `bStep` elements apart (FA, FB: their fragment kinds).
template <typename FA, typename FB>
__device__ void mmaSteps(FragC &acc, const bf16 *a, int64_t aStep, int lda,
                         const bf16 *b, int64_t bStep, int ldb, int steps) {
  for (int k = 0; k < steps; ++k) {
    FA fa;
    FB fb;
    wmma::load_matrix_sync(fa, a + k * aStep, lda);
    wmma::load_matrix_sync(fb, b + k * bStep, ldb);
    wmma::mma_sync(acc, fa, fb, acc);
  }
}

/// One warp: s[16][kBlock] (row stride kBlock) = a[16][d] b[kBlock][d]^T.
__device__ void warpABT(const bf16 *a, const bf16 *b, float *s, int d) {
  for (int n = 0; n < kBlock / 16; ++n) {
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
    mmaSteps<FragA, FragBT>(acc, a, 16, d, b + n * 16 * d, 16, d, d / 16);
    wmma::store_matrix_sync(s + n * 16, acc, kBlock, wmma::mem_row_major);
  }
}

/// One warp: o[16][d] (f32) += a[16][kBlock] b[kBlock][d].
__device__ void warpAccumulateAB(const bf16 *a, const bf16 *b, float *o,
                                 int d) {
  for (int n = 0; n < d / 16; ++n) {
    FragC acc;
    wmma::load_matrix_sync(acc, o + n * 16, d, wmma::mem_row_major);
    mmaSteps<FragA, FragB>(acc, a, 16, kBlock, b + n * 16, 16 * d, d,
                           kBlock / 16);
    wmma::store_matrix_sync(o + n * 16, acc, d, wmma::mem_row_major);
  }
}

/// One warp: o[16][d] (f32) += a^T b, where the 16 rows of a^T are columns
/// [col0, col0 + 16) of a[kBlock][kBlock], and b is [kBlock][d].
__device__ void warpAccumulateATB(const bf16 *a, int col0, const bf16 *b,
                                  float *o, int d) {
  for (int n = 0; n < d / 16; ++n) {
    FragC acc;
    wmma::load_matrix_sync(acc, o + n * 16, d, wmma::mem_row_major);
    mmaSteps<FragAT, FragB>(acc, a + col0, 16 * kBlock, kBlock, b + n * 16,
                            16 * d, d, kBlock / 16);
    wmma::store_matrix_sync(o + n * 16, acc, d, wmma::mem_row_major);
  }
}

/// One warp: dq[16 rows][d] (global f32, row stride ldq; the first `valid`
/// rows exist) += scale a[16][kBlock] b[kBlock][d], a 16 x 16 tile at a time
/// through tmp (256 floats of the warp's own).
__device__ void warpAtomicAB(const bf16 *a, const bf16 *b, float *tmp,
                             float *dq, int64_t ldq, int valid, int d,
                             float scale) {
  int lane = threadIdx.x & 31;
  for (int n = 0; n < d / 16; ++n) {
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
    mmaSteps<FragA, FragB>(acc, a, 16, kBlock, b + n * 16, 16 * d, d,
                           kBlock / 16);
    wmma::store_matrix_sync(tmp, acc, 16, wmma::mem_row_major);
    __syncwarp();
    for (int i = lane; i < 256; i += 32) {
      int r = i / 16, j = i % 16;
      if (r < valid)
        atomicAdd(dq + r * ldq + n * 16 + j, scale * tmp[i]);
    }
    __syncwarp();
  }
}

/// Shared memory of the forward: q, k, v tiles (bf16), the warps' scores
/// (f32) and probabilities (bf16), their outputs (f32), running max and sum.
size_t forwardSharedBytes(int d) {
  return 3 * kBlock * d * sizeof(bf16) + kBlock * kBlock * sizeof(float) +
         kBlock * kBlock * sizeof(bf16) + kBlock * d * sizeof(float) +
         2 * kBlock * sizeof(float);
}

/// grid (batch x heads, query blocks).
__global__ void __launch_bounds__(kThreads)
    forwardKernel(const bf16 *qkv, bf16 *out, float *lse, int64_t t, int64_t c,
                  int heads, int d, float scale) {
  extern __shared__ __align__(128) unsigned char shared[];
  bf16 *qs = reinterpret_cast<bf16 *>(shared);
  bf16 *ks = qs + kBlock * d, *vs = ks + kBlock * d;
  float *ss = reinterpret_cast<float *>(vs + kBlock * d);
  bf16 *ps = reinterpret_cast<bf16 *>(ss + kBlock * kBlock);
  float *os = reinterpret_cast<float *>(ps + kBlock * kBlock);
  float *ms = os + kBlock * d, *ls = ms + kBlock;

  int64_t bh = blockIdx.x, qb = blockIdx.y;
  int64_t batch = bh / heads, h = bh % heads, q0 = qb * kBlock, ld = 3 * c;
  const bf16 *head = qkv + batch * t * ld + h * d;
  int warp = threadIdx.x / 32, lane = threadIdx.x & 31, r0 = warp * 16;

  loadTile(qs, head + q0 * ld, ld, t - q0, d);
  for (int i = threadIdx.x; i < kBlock * d; i += kThreads)
    os[i] = 0.0f;
  for (int i = threadIdx.x; i < kBlock; i += kThreads) {
    ms[i] = -INFINITY;
    ls[i] = 0.0f;
  }
  // Causal: the key blocks up to the query block's own.
  for (int64_t kb = 0; kb <= qb; ++kb) {
    int64_t k0 = kb * kBlock;
    __syncthreads(); // every warp is done with the previous k and v
    loadTile(ks, head + c + k0 * ld, ld, t - k0, d);
    loadTile(vs, head + 2 * c + k0 * ld, ld, t - k0, d);
    __syncthreads();
    warpABT(qs + r0 * d, ks, ss + r0 * kBlock, d);
    __syncwarp();
    for (int r = r0; r < r0 + 16; ++r) {
      int64_t qi = q0 + r;
      float s[2], rowMax = -INFINITY;
      bool valid[2];
      for (int e = 0; e < 2; ++e) {
        int col = lane + 32 * e;
        valid[e] = qi < t && k0 + col <= qi; // k < t follows
        s[e] = valid[e] ? ss[r * kBlock + col] * scale : -INFINITY;
        rowMax = fmaxf(rowMax, s[e]);
      }
      float mOld = ms[r];
      float mNew = fmaxf(mOld, warpMax(rowMax));
      float sum = 0.0f;
      for (int e = 0; e < 2; ++e) {
        float p = valid[e] ? expf(s[e] - mNew) : 0.0f;
        sum += p;
        ps[r * kBlock + lane + 32 * e] = __float2bfloat16(p);
      }
      sum = warpSum(sum);
      // The output so far was weighted by exp(-mOld): now by exp(-mNew).
      float alpha = mOld == -INFINITY ? 0.0f : expf(mOld - mNew);
      __syncwarp(); // every lane has read ms[r]
      if (lane == 0) {
        ms[r] = mNew;
        ls[r] = ls[r] * alpha + sum;
      }
      for (int j = lane; j < d; j += 32)
        os[r * d + j] *= alpha;
    }
    __syncwarp();
    warpAccumulateAB(ps + r0 * kBlock, vs, os + r0 * d, d);
  }
  __syncwarp();
  for (int r = r0; r < r0 + 16; ++r) {
    int64_t qi = q0 + r;
    if (qi >= t)
      break; // the same for every lane
    float l = ls[r];
    bf16 *o = out + (batch * t + qi) * c + h * d;
    for (int j = lane; j < d; j += 32)
      o[j] = __float2bfloat16(os[r * d + j] / l);
    if (lane == 0)
      lse[bh * t + qi] = ms[r] + logf(l);
  }
}

/// delta[(batch, head, query)] = sum over the head's d columns of dy * out:
/// one warp per row.
__global__ void deltaKernel(const bf16 *dy, const bf16 *out, float *delta,
                            int64_t rows, int64_t t, int64_t c, int heads,
                            int d) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (row >= rows)
    return;
  int lane = threadIdx.x & 31;
  int64_t bh = row / t, qi = row % t;
  int64_t at = (bh / heads * t + qi) * c + bh % heads * d;
  float sum = 0.0f;
  for (int j = lane; j < d; j += 32)
    sum += __bfloat162float(dy[at + j]) * __bfloat162float(out[at + j]);
  sum = warpSum(sum);
  if (lane == 0)
    delta[row] = sum;
}

/// Shared memory of the backward: k, v, q, dy tiles (bf16), the block's dk
/// and dv (f32), scores and dP (f32), P and dS (bf16), a query block's
/// log-sum-exps and deltas.
size_t backwardSharedBytes(int d) {
  return 4 * kBlock * d * sizeof(bf16) + 2 * kBlock * d * sizeof(float) +
         2 * kBlock * kBlock * sizeof(float) +
         2 * kBlock * kBlock * sizeof(bf16) + 2 * kBlock * sizeof(float);
}

/// grid (batch x heads, key blocks). dq accumulates (scaled) in f32.
__global__ void __launch_bounds__(kThreads)
    backwardKernel(const bf16 *qkv, const bf16 *dy, const float *lse,
                   const float *delta, float *dq, bf16 *dqkv, int64_t t,
                   int64_t c, int heads, int d, float scale) {
  extern __shared__ __align__(128) unsigned char shared[];
  bf16 *ks = reinterpret_cast<bf16 *>(shared);
  bf16 *vs = ks + kBlock * d, *qs = vs + kBlock * d, *dys = qs + kBlock * d;
  float *dks = reinterpret_cast<float *>(dys + kBlock * d);
  float *dvs = dks + kBlock * d;
  float *ss = dvs + kBlock * d, *dps = ss + kBlock * kBlock;
  bf16 *ps = reinterpret_cast<bf16 *>(dps + kBlock * kBlock);
  bf16 *dss = ps + kBlock * kBlock;
  float *lses = reinterpret_cast<float *>(dss + kBlock * kBlock);
  float *deltas = lses + kBlock;

  int64_t bh = blockIdx.x, kb = blockIdx.y;
  int64_t batch = bh / heads, h = bh % heads, k0 = kb * kBlock, ld = 3 * c;
  const bf16 *head = qkv + batch * t * ld + h * d;
  const bf16 *dyHead = dy + batch * t * c + h * d;
  int warp = threadIdx.x / 32, lane = threadIdx.x & 31, r0 = warp * 16;

  loadTile(ks, head + c + k0 * ld, ld, t - k0, d);
  loadTile(vs, head + 2 * c + k0 * ld, ld, t - k0, d);
  for (int i = threadIdx.x; i < kBlock * d; i += kThreads)
    dks[i] = dvs[i] = 0.0f;
  // Causal: the query blocks from the key block's own on.
  int64_t queryBlocks = (t + kBlock - 1) / kBlock;
  for (int64_t qb = kb; qb < queryBlocks; ++qb) {
    int64_t q0 = qb * kBlock;
    __syncthreads(); // every warp is done with the previous query block
    loadTile(qs, head + q0 * ld, ld, t - q0, d);
    loadTile(dys, dyHead + q0 * c, c, t - q0, d);
    for (int i = threadIdx.x; i < kBlock; i += kThreads) {
      bool in = q0 + i < t;
      lses[i] = in ? lse[bh * t + q0 + i] : 0.0f;
      deltas[i] = in ? delta[bh * t + q0 + i] : 0.0f;
    }
    __syncthreads();
    // The warp's 16 queries against the block's keys: S and dP = dy v^T.
    warpABT(qs + r0 * d, ks, ss + r0 * kBlock, d);
    warpABT(dys + r0 * d, vs, dps + r0 * kBlock, d);
    __syncwarp();
    for (int r = r0; r < r0 + 16; ++r) {
      int64_t qi = q0 + r;
      for (int e = 0; e < 2; ++e) {
        int col = lane + 32 * e;
        bool valid = qi < t && k0 + col <= qi;
        int at = r * kBlock + col;
        float p = valid ? expf(ss[at] * scale - lses[r]) : 0.0f;
        ps[at] = __float2bfloat16(p);
        dss[at] = __float2bfloat16(p * (dps[at] - deltas[r]));
      }
    }
    __syncthreads(); // P and dS of every query row
    // The warp's 16 keys: dv += P^T dy, dk += dS^T q.
    warpAccumulateATB(ps, r0, dys, dvs + r0 * d, d);
    warpAccumulateATB(dss, r0, qs, dks + r0 * d, d);
    // The warp's 16 queries: dq += scale dS k (its scores are done with:
    // their first 256 floats hold each tile on the way).
    int64_t rows = t - (q0 + r0);
    rows = rows < 16 ? rows : 16;
    if (rows > 0)
      warpAtomicAB(dss + r0 * kBlock, ks, ss + r0 * kBlock,
                   dq + (batch * t + q0 + r0) * c + h * d, c,
                   static_cast<int>(rows), d, scale);
  }
  __syncwarp();
  for (int r = r0; r < r0 + 16; ++r) {
    int64_t kj = k0 + r;
    if (kj >= t)
      break; // the same for every lane
    bf16 *row = dqkv + (batch * t + kj) * ld + h * d;
    for (int j = lane; j < d; j += 32) {
      row[c + j] = __float2bfloat16(dks[r * d + j] * scale);
      row[2 * c + j] = __float2bfloat16(dvs[r * d + j]);
    }
  }
}

/// dqkv's q columns = dq rounded.
__global__ void dqKernel(const float *dq, bf16 *dqkv, int64_t n, int64_t c) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dqkv[i / c * 3 * c + i % c] = __float2bfloat16(dq[i]);
}

size_t aligned(size_t bytes) { return (bytes + 255) & ~size_t(255); }

/// Launches a kernel with more than the default 48 KiB of shared memory.
template <typename Kernel> void allowShared(Kernel kernel, size_t bytes) {
  SHARDC_CUDA_CHECK(cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(bytes)));
}

} // namespace

bool flashAttentionSupports(int64_t d) {
  if (d <= 0 || d % 16 != 0 || d > 128)
    return false;
  // The backward's tiles must fit the device's shared memory (sm_90: d up
  // to 128; sm_80: up to 112).
  int device = 0, limit = 0;
  SHARDC_CUDA_CHECK(cudaGetDevice(&device));
  SHARDC_CUDA_CHECK(cudaDeviceGetAttribute(
      &limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return backwardSharedBytes(static_cast<int>(d)) <=
         static_cast<size_t>(limit);
}

size_t flashForwardScratchBytes(int64_t b, int64_t t, int64_t heads) {
  return aligned(static_cast<size_t>(b * heads * t) * sizeof(float));
}

size_t flashBackwardScratchBytes(int64_t b, int64_t t, int64_t c,
                                 int64_t heads) {
  return aligned(static_cast<size_t>(b * t * c) * sizeof(bf16)) +
         2 * flashForwardScratchBytes(b, t, heads) +
         aligned(static_cast<size_t>(b * t * c) * sizeof(float));
}

void flashAttentionForward(cudaStream_t stream, const bf16 *qkv, bf16 *out,
                           float *lse, int64_t b, int64_t t, int64_t c,
                           int64_t heads) {
  if (b <= 0 || t <= 0 || c <= 0)
    return;
  int d = static_cast<int>(c / heads);
  size_t shared = forwardSharedBytes(d);
  allowShared(forwardKernel, shared);
  dim3 grid(static_cast<unsigned>(b * heads),
            static_cast<unsigned>((t + kBlock - 1) / kBlock));
  forwardKernel<<<grid, kThreads, shared, stream>>>(
      qkv, out, lse, t, c, static_cast<int>(heads), d,
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))));
  SHARDC_CUDA_CHECK_LAUNCH();
}

void flashAttentionBackward(cudaStream_t stream, const bf16 *dy,
                            const bf16 *qkv, bf16 *dqkv, void *scratch,
                            int64_t b, int64_t t, int64_t c, int64_t heads) {
  if (b <= 0 || t <= 0 || c <= 0)
    return;
  int d = static_cast<int>(c / heads);
  char *cursor = static_cast<char *>(scratch);
  auto *out = reinterpret_cast<bf16 *>(cursor);
  cursor += aligned(static_cast<size_t>(b * t * c) * sizeof(bf16));
  auto *lse = reinterpret_cast<float *>(cursor);
  cursor += flashForwardScratchBytes(b, t, heads);
  auto *delta = reinterpret_cast<float *>(cursor);
  cursor += flashForwardScratchBytes(b, t, heads);
  auto *dq = reinterpret_cast<float *>(cursor);

  flashAttentionForward(stream, qkv, out, lse, b, t, c, heads);
  int64_t rows = b * heads * t;
  deltaKernel<<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kThreads,
                0, stream>>>(dy, out, delta, rows, t, c,
                             static_cast<int>(heads), d);
  SHARDC_CUDA_CHECK_LAUNCH();
  SHARDC_CUDA_CHECK(cudaMemsetAsync(
      dq, 0, static_cast<size_t>(b * t * c) * sizeof(float), stream));
  size_t shared = backwardSharedBytes(d);
  allowShared(backwardKernel, shared);
  dim3 grid(static_cast<unsigned>(b * heads),
            static_cast<unsigned>((t + kBlock - 1) / kBlock));
  backwardKernel<<<grid, kThreads, shared, stream>>>(
      qkv, dy, lse, delta, dq, dqkv, t, c, static_cast<int>(heads), d,
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))));
  SHARDC_CUDA_CHECK_LAUNCH();
  int64_t n = b * t * c;
  unsigned blocks = static_cast<unsigned>(
      std::min<int64_t>((n + 255) / 256, int64_t(1) << 16));
  dqKernel<<<blocks, 256, 0, stream>>>(dq, dqkv, n, c);
  SHARDC_CUDA_CHECK_LAUNCH();
}

} // namespace shardc::rt::cuda
