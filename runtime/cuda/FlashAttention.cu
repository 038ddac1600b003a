//===- FlashAttention.cu - Fused causal attention on tensor cores ---------===//
//
// FlashAttention-2's schedule with wmma, one algorithm for two stored types
// (Tiles<T> below): bf16 on 16x16x16 bf16 tiles, f32 on 16x16x8 TF32 tiles,
// f32 accumulators either way. A block of 4 warps takes 64 rows; each warp
// owns 16 of them: in the forward 16 queries, whose scores against a block
// of 64 keys it computes, softmaxes online (running max and sum per row, one
// row at a time across the warp's 32 lanes) and multiplies into its 16
// output rows, all in shared memory. The backward takes 64 keys per block
// and walks the query blocks at or after them: P from the scores and the
// forward's log-sum-exp, dS = P (dP - delta) with dP = dy v^T and
// delta = rowsum(dy o), then dv += P^T dy and dk += dS^T q for the block's
// keys, and dq += dS k for the queries through f32 atomics, rounded into
// dqkv at the end.
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

/// What the kernels need of the stored type T (qkv, out, dy, dqkv): the
/// tensor-core tiles of its products (wmma fragments 16 x 16 by kK; the
/// a and b fragments in both layouts), how a fragment's elements become
/// tensor-core inputs, the conversions to and from f32, and whether P and dS
/// overwrite the f32 scores (and dP) they are computed from.
template <typename T> struct Tiles;

/// bf16: 16x16x16 bf16 tiles, loaded as stored; P and dS are rounded to
/// bf16 in buffers of their own (half the size of the f32 scores').
template <> struct Tiles<bf16> {
  static constexpr int kK = 16;
  static constexpr bool kInPlace = false;
  template <typename Use, typename Layout>
  using Fragment = wmma::fragment<Use, 16, 16, 16, bf16, Layout>;
  using Accumulator = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
  template <typename F> __device__ static void round(F &) {}
  __device__ static bf16 fromFloat(float x) { return __float2bfloat16(x); }
  __device__ static float toFloat(bf16 x) { return __bfloat162float(x); }
};

/// f32: 16x16x8 TF32 tiles read from f32 in shared memory, every element
/// rounded to TF32 (10-bit mantissa) as its fragment is loaded: the q, k, v
/// and dy tiles, and P and dS (as the bf16 kernels round them to bf16).
/// P and dS stay f32 in shared memory, over the scores and dP they come from
/// (each element is read, then overwritten, by the same thread): the f32
/// tiles are twice the bf16 ones', and the backward's must fit 227 KiB.
template <> struct Tiles<float> {
  static constexpr int kK = 8;
  static constexpr bool kInPlace = true;
  template <typename Use, typename Layout>
  using Fragment =
      wmma::fragment<Use, 16, 16, 8, wmma::precision::tf32, Layout>;
  using Accumulator = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;
  template <typename F> __device__ static void round(F &f) {
    for (int i = 0; i < f.num_elements; ++i)
      f.x[i] = wmma::__float_to_tf32(f.x[i]);
  }
  __device__ static float fromFloat(float x) { return x; }
  __device__ static float toFloat(float x) { return x; }
};

template <typename T>
using FragA =
    typename Tiles<T>::template Fragment<wmma::matrix_a, wmma::row_major>;
template <typename T>
using FragAT =
    typename Tiles<T>::template Fragment<wmma::matrix_a, wmma::col_major>;
template <typename T>
using FragB =
    typename Tiles<T>::template Fragment<wmma::matrix_b, wmma::row_major>;
template <typename T>
using FragBT =
    typename Tiles<T>::template Fragment<wmma::matrix_b, wmma::col_major>;
template <typename T> using FragC = typename Tiles<T>::Accumulator;

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

/// dst[kBlock][d] = rows [0, valid) of src (row stride ld), zeros after:
/// 16 bytes per load and store where the rows allow it (d a multiple of 16
/// bytes, both tiles' rows 16-byte aligned: every call here, given the
/// heads flashAttentionSupports and allocated buffers), else one element at
/// a time. The same bits either way.
template <typename T>
__device__ void loadTile(T *dst, const T *src, int64_t ld, int64_t valid,
                         int d) {
  constexpr int kVector = 16 / sizeof(T);
  auto aligned = [](const void *p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
  };
  if (d % kVector == 0 && (ld * sizeof(T)) % 16 == 0 && aligned(src) &&
      aligned(dst)) {
    int perRow = d / kVector;
    for (int i = threadIdx.x; i < kBlock * perRow; i += kThreads) {
      int r = i / perRow, j = (i % perRow) * kVector;
      uint4 value = make_uint4(0, 0, 0, 0); // +0 in f32 and in bf16
      if (r < valid)
        value = *reinterpret_cast<const uint4 *>(src + r * ld + j);
      *reinterpret_cast<uint4 *>(dst + r * d + j) = value;
    }
    return;
  }
  for (int i = threadIdx.x; i < kBlock * d; i += kThreads) {
    int r = i / d, j = i % d;
    dst[i] = r < valid ? src[r * ld + j] : Tiles<T>::fromFloat(0.0f);
  }
}

/// acc += a b over k in [0, depth), Tiles<T>::kK at a time: step k's tiles
/// are at a + k aStride and b + k bStride (the distances between
/// consecutive k of a, of b), their elements made tensor-core inputs by
/// Tiles<T>::round (FA, FB: the fragment kinds).
template <typename T, typename FA, typename FB>
__device__ void mmaSteps(FragC<T> &acc, const T *a, int64_t aStride, int lda,
                         const T *b, int64_t bStride, int ldb, int depth) {
  for (int k = 0; k < depth; k += Tiles<T>::kK) {
    FA fa;
    FB fb;
    wmma::load_matrix_sync(fa, a + k * aStride, lda);
    wmma::load_matrix_sync(fb, b + k * bStride, ldb);
    Tiles<T>::round(fa);
    Tiles<T>::round(fb);
    wmma::mma_sync(acc, fa, fb, acc);
  }
}

/// One warp: s[16][kBlock] (row stride kBlock) = a[16][d] b[kBlock][d]^T.
template <typename T>
__device__ void warpABT(const T *a, const T *b, float *s, int d) {
  for (int n = 0; n < kBlock / 16; ++n) {
    FragC<T> acc;
    wmma::fill_fragment(acc, 0.0f);
    mmaSteps<T, FragA<T>, FragBT<T>>(acc, a, 1, d, b + n * 16 * d, 1, d, d);
    wmma::store_matrix_sync(s + n * 16, acc, kBlock, wmma::mem_row_major);
  }
}

/// One warp: o[16][d] (f32) += a[16][kBlock] b[kBlock][d].
template <typename T>
__device__ void warpAccumulateAB(const T *a, const T *b, float *o, int d) {
  for (int n = 0; n < d / 16; ++n) {
    FragC<T> acc;
    wmma::load_matrix_sync(acc, o + n * 16, d, wmma::mem_row_major);
    mmaSteps<T, FragA<T>, FragB<T>>(acc, a, 1, kBlock, b + n * 16, d, d,
                                    kBlock);
    wmma::store_matrix_sync(o + n * 16, acc, d, wmma::mem_row_major);
  }
}

/// One warp: o[16][d] (f32) += a^T b, where the 16 rows of a^T are columns
/// [col0, col0 + 16) of a[kBlock][kBlock], and b is [kBlock][d].
template <typename T>
__device__ void warpAccumulateATB(const T *a, int col0, const T *b, float *o,
                                  int d) {
  for (int n = 0; n < d / 16; ++n) {
    FragC<T> acc;
    wmma::load_matrix_sync(acc, o + n * 16, d, wmma::mem_row_major);
    mmaSteps<T, FragAT<T>, FragB<T>>(acc, a + col0, kBlock, kBlock, b + n * 16,
                                     d, d, kBlock);
    wmma::store_matrix_sync(o + n * 16, acc, d, wmma::mem_row_major);
  }
}

/// One warp: dq[16 rows][d] (global f32, row stride ldq; the first `valid`
/// rows exist) += scale a[16][kBlock] b[kBlock][d], a 16 x 16 tile at a time
/// through tmp (256 floats of the warp's own).
template <typename T>
__device__ void warpAtomicAB(const T *a, const T *b, float *tmp, float *dq,
                             int64_t ldq, int valid, int d, float scale) {
  int lane = threadIdx.x & 31;
  for (int n = 0; n < d / 16; ++n) {
    FragC<T> acc;
    wmma::fill_fragment(acc, 0.0f);
    mmaSteps<T, FragA<T>, FragB<T>>(acc, a, 1, kBlock, b + n * 16, d, d,
                                    kBlock);
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

/// Byte offsets into shared memory, carved in order: `take` returns the
/// offset of n elements of U and moves past them.
struct Carve {
  size_t at = 0;
  template <typename U> __host__ __device__ size_t take(size_t n) {
    size_t offset = at;
    at += n * sizeof(U);
    return offset;
  }
};

/// The forward's shared memory: q, k, v tiles (T), the warps' scores (f32)
/// and probabilities (T; for f32 over the scores), their outputs (f32),
/// running max and sum.
template <typename T> struct ForwardShared {
  size_t q, k, v, s, p, o, m, l, bytes;
  __host__ __device__ explicit ForwardShared(int d) {
    size_t tile = static_cast<size_t>(kBlock) * d;
    Carve c;
    q = c.take<T>(tile);
    k = c.take<T>(tile);
    v = c.take<T>(tile);
    s = c.take<float>(kBlock * kBlock);
    p = Tiles<T>::kInPlace ? s : c.take<T>(kBlock * kBlock);
    o = c.take<float>(tile);
    m = c.take<float>(kBlock);
    l = c.take<float>(kBlock);
    bytes = c.at;
  }
};

/// grid (batch x heads, query blocks).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    forwardKernel(const T *qkv, T *out, float *lse, int64_t t, int64_t c,
                  int heads, int d, float scale) {
  extern __shared__ __align__(128) unsigned char shared[];
  ForwardShared<T> at(d);
  T *qs = reinterpret_cast<T *>(shared + at.q);
  T *ks = reinterpret_cast<T *>(shared + at.k);
  T *vs = reinterpret_cast<T *>(shared + at.v);
  float *ss = reinterpret_cast<float *>(shared + at.s);
  T *ps = reinterpret_cast<T *>(shared + at.p);
  float *os = reinterpret_cast<float *>(shared + at.o);
  float *ms = reinterpret_cast<float *>(shared + at.m);
  float *ls = reinterpret_cast<float *>(shared + at.l);

  // The last query blocks, which see the most keys, are scheduled first
  // (blocks start roughly in index order, x fastest): no long one at the
  // tail, as FlashAttention-2 schedules them.
  int64_t bh = blockIdx.x, qb = gridDim.y - 1 - blockIdx.y;
  int64_t batch = bh / heads, h = bh % heads, q0 = qb * kBlock, ld = 3 * c;
  const T *head = qkv + batch * t * ld + h * d;
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
      // P over the scores it comes from (f32): this lane read them above.
      for (int e = 0; e < 2; ++e) {
        float p = valid[e] ? expf(s[e] - mNew) : 0.0f;
        sum += p;
        ps[r * kBlock + lane + 32 * e] = Tiles<T>::fromFloat(p);
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
    T *o = out + (batch * t + qi) * c + h * d;
    for (int j = lane; j < d; j += 32)
      o[j] = Tiles<T>::fromFloat(os[r * d + j] / l);
    if (lane == 0)
      lse[bh * t + qi] = ms[r] + logf(l);
  }
}

/// delta[(batch, head, query)] = sum over the head's d columns of dy * out:
/// one warp per row.
template <typename T>
__global__ void deltaKernel(const T *dy, const T *out, float *delta,
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
    sum += Tiles<T>::toFloat(dy[at + j]) * Tiles<T>::toFloat(out[at + j]);
  sum = warpSum(sum);
  if (lane == 0)
    delta[row] = sum;
}

/// The backward's shared memory: k, v, q, dy tiles (T), the block's dk and
/// dv (f32), scores and dP (f32), P and dS (T; for f32 over the scores and
/// dP), a query block's log-sum-exps and deltas.
template <typename T> struct BackwardShared {
  size_t k, v, q, dy, dk, dv, s, dp, p, ds, lse, delta, bytes;
  __host__ __device__ explicit BackwardShared(int d) {
    size_t tile = static_cast<size_t>(kBlock) * d;
    Carve c;
    k = c.take<T>(tile);
    v = c.take<T>(tile);
    q = c.take<T>(tile);
    dy = c.take<T>(tile);
    dk = c.take<float>(tile);
    dv = c.take<float>(tile);
    s = c.take<float>(kBlock * kBlock);
    dp = c.take<float>(kBlock * kBlock);
    p = Tiles<T>::kInPlace ? s : c.take<T>(kBlock * kBlock);
    ds = Tiles<T>::kInPlace ? dp : c.take<T>(kBlock * kBlock);
    lse = c.take<float>(kBlock);
    delta = c.take<float>(kBlock);
    bytes = c.at;
  }
};

/// grid (batch x heads, key blocks). dq accumulates (scaled) in f32.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    backwardKernel(const T *qkv, const T *dy, const float *lse,
                   const float *delta, float *dq, T *dqkv, int64_t t, int64_t c,
                   int heads, int d, float scale) {
  extern __shared__ __align__(128) unsigned char shared[];
  BackwardShared<T> at(d);
  T *ks = reinterpret_cast<T *>(shared + at.k);
  T *vs = reinterpret_cast<T *>(shared + at.v);
  T *qs = reinterpret_cast<T *>(shared + at.q);
  T *dys = reinterpret_cast<T *>(shared + at.dy);
  float *dks = reinterpret_cast<float *>(shared + at.dk);
  float *dvs = reinterpret_cast<float *>(shared + at.dv);
  float *ss = reinterpret_cast<float *>(shared + at.s);
  float *dps = reinterpret_cast<float *>(shared + at.dp);
  T *ps = reinterpret_cast<T *>(shared + at.p);
  T *dss = reinterpret_cast<T *>(shared + at.ds);
  float *lses = reinterpret_cast<float *>(shared + at.lse);
  float *deltas = reinterpret_cast<float *>(shared + at.delta);

  int64_t bh = blockIdx.x, kb = blockIdx.y;
  int64_t batch = bh / heads, h = bh % heads, k0 = kb * kBlock, ld = 3 * c;
  const T *head = qkv + batch * t * ld + h * d;
  const T *dyHead = dy + batch * t * c + h * d;
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
    // P and dS (for f32 over S and dP: each element read, then written, by
    // the same lane).
    for (int r = r0; r < r0 + 16; ++r) {
      int64_t qi = q0 + r;
      for (int e = 0; e < 2; ++e) {
        int col = lane + 32 * e;
        bool valid = qi < t && k0 + col <= qi;
        int at = r * kBlock + col;
        float p = valid ? expf(ss[at] * scale - lses[r]) : 0.0f;
        float ds = p * (dps[at] - deltas[r]);
        ps[at] = Tiles<T>::fromFloat(p);
        dss[at] = Tiles<T>::fromFloat(ds);
      }
    }
    __syncthreads(); // P and dS of every query row
    // The warp's 16 keys: dv += P^T dy, dk += dS^T q.
    warpAccumulateATB(ps, r0, dys, dvs + r0 * d, d);
    warpAccumulateATB(dss, r0, qs, dks + r0 * d, d);
    // The warp's 16 queries: dq += scale dS k, each tile on the way through
    // the first 256 floats of the warp's rows of the scores, done with. For
    // f32 those hold P, which every warp read for dv just above: once they
    // all have.
    if constexpr (Tiles<T>::kInPlace)
      __syncthreads();
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
    T *row = dqkv + (batch * t + kj) * ld + h * d;
    for (int j = lane; j < d; j += 32) {
      row[c + j] = Tiles<T>::fromFloat(dks[r * d + j] * scale);
      row[2 * c + j] = Tiles<T>::fromFloat(dvs[r * d + j]);
    }
  }
}

/// dqkv's q columns = dq (rounded to T).
template <typename T>
__global__ void dqKernel(const float *dq, T *dqkv, int64_t n, int64_t c) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dqkv[i / c * 3 * c + i % c] = Tiles<T>::fromFloat(dq[i]);
}

size_t aligned(size_t bytes) { return (bytes + 255) & ~size_t(255); }

/// Launches a kernel with more than the default 48 KiB of shared memory.
template <typename Kernel> void allowShared(Kernel kernel, size_t bytes) {
  SHARDC_CUDA_CHECK(cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(bytes)));
}

} // namespace

template <typename T> bool flashAttentionSupports(int64_t d) {
  if (d <= 0 || d % 16 != 0 || d > 128)
    return false;
  // The backward's tiles must fit the device's shared memory (sm_90: d up
  // to 128 either way; sm_80: bf16 up to 112, f32 up to 80).
  int device = 0, limit = 0;
  SHARDC_CUDA_CHECK(cudaGetDevice(&device));
  SHARDC_CUDA_CHECK(cudaDeviceGetAttribute(
      &limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return BackwardShared<T>(static_cast<int>(d)).bytes <=
         static_cast<size_t>(limit);
}

size_t flashForwardScratchBytes(int64_t b, int64_t t, int64_t heads) {
  return aligned(static_cast<size_t>(b * heads * t) * sizeof(float));
}

size_t flashBackwardScratchBytes(int64_t b, int64_t t, int64_t c,
                                 int64_t heads) {
  return flashForwardScratchBytes(b, t, heads) +
         aligned(static_cast<size_t>(b * t * c) * sizeof(float));
}

template <typename T>
void flashAttentionForward(cudaStream_t stream, const T *qkv, T *out,
                           float *lse, int64_t b, int64_t t, int64_t c,
                           int64_t heads) {
  if (b <= 0 || t <= 0 || c <= 0)
    return;
  int d = static_cast<int>(c / heads);
  size_t shared = ForwardShared<T>(d).bytes;
  allowShared(forwardKernel<T>, shared);
  dim3 grid(static_cast<unsigned>(b * heads),
            static_cast<unsigned>((t + kBlock - 1) / kBlock));
  forwardKernel<T><<<grid, kThreads, shared, stream>>>(
      qkv, out, lse, t, c, static_cast<int>(heads), d,
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))));
  SHARDC_CUDA_CHECK_LAUNCH();
}

template <typename T>
void flashAttentionBackward(cudaStream_t stream, const T *dy, const T *qkv,
                            const T *out, const float *lse, T *dqkv,
                            void *scratch, int64_t b, int64_t t, int64_t c,
                            int64_t heads) {
  if (b <= 0 || t <= 0 || c <= 0)
    return;
  int d = static_cast<int>(c / heads);
  char *cursor = static_cast<char *>(scratch);
  auto *delta = reinterpret_cast<float *>(cursor);
  cursor += flashForwardScratchBytes(b, t, heads);
  auto *dq = reinterpret_cast<float *>(cursor);

  int64_t rows = b * heads * t;
  deltaKernel<T>
      <<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kThreads, 0,
         stream>>>(dy, out, delta, rows, t, c, static_cast<int>(heads), d);
  SHARDC_CUDA_CHECK_LAUNCH();
  SHARDC_CUDA_CHECK(cudaMemsetAsync(
      dq, 0, static_cast<size_t>(b * t * c) * sizeof(float), stream));
  size_t shared = BackwardShared<T>(d).bytes;
  allowShared(backwardKernel<T>, shared);
  dim3 grid(static_cast<unsigned>(b * heads),
            static_cast<unsigned>((t + kBlock - 1) / kBlock));
  backwardKernel<T><<<grid, kThreads, shared, stream>>>(
      qkv, dy, lse, delta, dq, dqkv, t, c, static_cast<int>(heads), d,
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))));
  SHARDC_CUDA_CHECK_LAUNCH();
  int64_t n = b * t * c;
  unsigned blocks = static_cast<unsigned>(
      std::min<int64_t>((n + 255) / 256, int64_t(1) << 16));
  dqKernel<T><<<blocks, 256, 0, stream>>>(dq, dqkv, n, c);
  SHARDC_CUDA_CHECK_LAUNCH();
}

// The two stored types.
template bool flashAttentionSupports<bf16>(int64_t);
template bool flashAttentionSupports<float>(int64_t);
template void flashAttentionForward<bf16>(cudaStream_t, const bf16 *, bf16 *,
                                          float *, int64_t, int64_t, int64_t,
                                          int64_t);
template void flashAttentionForward<float>(cudaStream_t, const float *, float *,
                                           float *, int64_t, int64_t, int64_t,
                                           int64_t);
template void flashAttentionBackward<bf16>(cudaStream_t, const bf16 *,
                                           const bf16 *, const bf16 *,
                                           const float *, bf16 *, void *,
                                           int64_t, int64_t, int64_t, int64_t);
template void flashAttentionBackward<float>(cudaStream_t, const float *,
                                            const float *, const float *,
                                            const float *, float *, void *,
                                            int64_t, int64_t, int64_t, int64_t);

} // namespace shardc::rt::cuda
