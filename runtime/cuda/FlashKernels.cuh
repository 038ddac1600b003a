//===- FlashKernels.cuh - What the flash kernels share ----------*- C++ -*-===//
//
// FlashAttention-2's schedule on PTX's mma.sync (Ptx.h), one algorithm
// for two stored types (Tiles<T> below): bf16 on m16n8k16 bf16 tiles, f32 on
// m16n8k8 TF32 tiles, f32 accumulators either way, in registers. A block of
// 4 warps takes 64 rows; each warp owns 16 of them (a row tile).
//
// The forward takes 64 queries per block: per block of 64 keys (k and v in
// shared memory) each warp computes its 16 queries' scores S = q k^T into
// accumulators, softmaxes them online in registers (running max and sum
// per row; the four lanes holding a row combine theirs by shuffles), and
// multiplies P into its 16 output rows, P's accumulators becoming the a
// operand as they are (bf16; TF32 through four lanes' shuffles). Asked for
// two row tiles (FlashTiles::Two, up to d = 64), its warps take 32
// queries each, 128 a block, as FlashAttention-2's forward does at d = 64:
// each k and v fragment loaded from shared memory feeds both tiles.
//
// The backward takes 64 keys per block and walks the query blocks at or
// after them: each warp computes, for its 16 keys, S^T = k q^T and
// dP^T = v dy^T, then P^T from the forward's log-sum-exp and
// dS^T = P^T (dP^T - delta) with delta = rowsum(dy o), and accumulates
// dv += P^T dy and dk += dS^T q in registers (a step's S^T and dP^T in
// two halves of 32 queries where that fits more blocks on a multiprocessor:
// backwardParts); dS^T goes through shared
// memory so that each warp adds its 16 queries' dq += dS k to an f32
// accumulator by atomics (or, FlashDq::BulkReduce, by sm_90's bulk
// reductions of its rows staged in shared memory), rounded into dqkv at
// the end. Asked for two row tiles (up to d = 64), its warps take 32 keys
// each, 128 a block, each q and dy fragment feeding both tiles, a step in
// quarters of 16 queries, dq's adds once per 128 keys. The deterministic
// backward leaves dq to a second kernel (dqKernel) shaped as the forward: 64
// queries a block walk the key blocks at or before them, computing S and dP
// again, and accumulate dq = dS k in registers in a fixed order.
//
// Tiles reach shared memory by cp.async (copyTile), so that they land
// while the warps compute: in the forward the next key block's k and v
// while this one's products run (forwardStages: two blocks' buffers where
// shared memory allows; else one, as FlashAttention-2's, v landing while S
// and its softmax are computed, the next k while P v is); in the backward
// the next query block's q, dy, lse and delta while this one's products
// run (backwardStages: two blocks' buffers where shared memory allows,
// else one, filled during dq's products).
//
// Products round their inputs as cuBLAS does: bf16 as stored, f32 to TF32
// (q, k, v, dy, and P and dS, as the bf16 kernels round P and dS to bf16).
// bf16 fragments come from shared memory by ldmatrix, one instruction per
// a fragment or pair of b fragments (.trans for tiles read down their
// columns); f32 ones element by element. Softmaxes run in base 2 (kLog2e),
// and only the diagonal block's step compiles the causal mask. Shared rows
// are 16 bytes longer than their data, so that the 8 rows an ldmatrix
// phase reads, and a warp's element loads, hit 32 different banks: every
// bf16 load; for f32 the row-wise ones, while those reading a tile down
// its columns (v; in the backward q, dy and k as b operands of the
// accumulations, and dS^T as the a operand of dq's) meet
// 2-way conflicts.
//
// Each kernel is also built instrumented (Phased: PhaseClock), its warps
// reading the clock between the phases of their steps, for
// FlashPhaseCounters.
//
// The forward is FlashForward.cu; the backward, with its delta kernel and
// dqKernel, FlashBackward.cu. Here: the block geometry, the tiles and
// their products, the copies into shared memory, the phase clock.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_CUDA_FLASHKERNELS_CUH
#define SHARDC_RT_CUDA_FLASHKERNELS_CUH

#include "FlashAttention.h"

#include "Check.h"
#include "Ptx.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

namespace shardc::rt::cuda::flash {

using bf16 = __nv_bfloat16;

constexpr int kBlock = 64; // queries (forward) or keys (backward) per block
constexpr int kWarps = 4;  // each owns 16 of the block's rows
constexpr int kThreads = 32 * kWarps;
constexpr int kTiles = kBlock / 8; // 8-column accumulator tiles of a row

/// The accumulators of a warp's 16 rows by 8 N columns: tile n holds
/// columns [8n, 8n + 8) (Ptx.h's c layout).
template <int N> using Accumulators = float[N][4];
/// A warp's 16 rows by kBlock columns.
using RowAccumulators = Accumulators<kTiles>;

/// What the kernels need of the stored type T (qkv, out, dy, dqkv): its
/// tensor-core instruction, k deep; how its a and b fragments are read from
/// shared memory, and how accumulators become an a fragment (both rounded
/// to the instruction's input type); the conversions to and from f32; the
/// padding of shared rows (16 bytes).
template <typename T> struct Tiles;

/// bf16: m16n8k16, two elements per register.
template <> struct Tiles<bf16> {
  static constexpr int kK = 16;
  static constexpr int kPad = 8;
  __device__ static void mma(float (&c)[4], const uint32_t (&a)[4],
                             const uint32_t (&b)[2]) {
    mmaBf16(c, a, b);
  }
  /// p[0] and p[stride] in one register: a single load where adjacent.
  __device__ static uint32_t pair(const bf16 *p, int stride) {
    if (stride == 1)
      return *reinterpret_cast<const uint32_t *>(p);
    return packBf16(p[0], p[stride]);
  }
  /// a (16 x 16): a(r, k) = p[r rs + k ks]. ByMatrix: one ldmatrix where
  /// either stride is 1 (every call here): register i is the 8 x 8 matrix
  /// at rows 8 (i % 2), columns 8 (i / 2), whose rows lane 8 i + r
  /// addresses; transposed where a is stored down its columns. Else (or
  /// with neither stride 1) element by element.
  template <bool ByMatrix>
  __device__ static void loadA(uint32_t (&a)[4], const bf16 *p, int rs,
                               int ks) {
    int lane = threadIdx.x & 31, i = lane / 8, r = lane % 8;
    if (ByMatrix && ks == 1)
      return ldMatrix<4, false>(a, p + (r + 8 * (i % 2)) * rs + 8 * (i / 2));
    if (ByMatrix && rs == 1)
      return ldMatrix<4, true>(a, p + (r + 8 * (i / 2)) * ks + 8 * (i % 2));
    int g = lane / 4, q = lane & 3;
    for (int j = 0; j < 4; ++j)
      a[j] = pair(p + (g + 8 * (j % 2)) * rs + (2 * q + 8 * (j / 2)) * ks, ks);
  }
  /// Two b fragments (16 x 8 each): b0(k, n) = p[k ks + n ns] and b1 the
  /// next 8 columns (p + 8 ns). ByMatrix: one ldmatrix .x4 where either
  /// stride is 1: register i is the matrix at rows (k) 8 (i % 2) of
  /// fragment i / 2, transposed where b is stored along n. Else element by
  /// element.
  template <bool ByMatrix>
  __device__ static void loadBPair(uint32_t (&b0)[2], uint32_t (&b1)[2],
                                   const bf16 *p, int ks, int ns) {
    int lane = threadIdx.x & 31, i = lane / 8, r = lane % 8;
    uint32_t x[4];
    if (ByMatrix && (ks == 1 || ns == 1)) {
      if (ks == 1)
        ldMatrix<4, false>(x, p + (r + 8 * (i / 2)) * ns + 8 * (i % 2));
      else
        ldMatrix<4, true>(x, p + (r + 8 * (i % 2)) * ks + 8 * (i / 2));
      b0[0] = x[0], b0[1] = x[1], b1[0] = x[2], b1[1] = x[3];
      return;
    }
    int g = lane / 4, q = lane & 3;
    for (int j = 0; j < 2; ++j) {
      b0[j] = pair(p + (2 * q + 8 * j) * ks + g * ns, ks);
      b1[j] = pair(p + (2 * q + 8 * j) * ks + (g + 8) * ns, ks);
    }
  }
  /// The a fragment of columns [16j, 16j + 16) of c: tiles 2j and 2j + 1,
  /// whose layout is a's.
  template <int N>
  __device__ static void accumulatorsToA(uint32_t (&a)[4],
                                         const Accumulators<N> &c, int j) {
    for (int i = 0; i < 4; ++i) {
      const float *x = c[2 * j + i / 2] + 2 * (i % 2);
      a[i] = roundPackBf16(x[0], x[1]);
    }
  }
  __device__ static bf16 fromFloat(float x) { return __float2bfloat16(x); }
  /// p[0], p[1] = x, y in one store (p 4-byte aligned).
  __device__ static void storePair(bf16 *p, float x, float y) {
    *reinterpret_cast<uint32_t *>(p) = roundPackBf16(x, y);
  }
  __device__ static float toFloat(bf16 x) { return __bfloat162float(x); }
};

/// f32: m16n8k8 TF32, one element per register.
template <> struct Tiles<float> {
  static constexpr int kK = 8;
  static constexpr int kPad = 4;
  __device__ static void mma(float (&c)[4], const uint32_t (&a)[4],
                             const uint32_t (&b)[2]) {
    mmaTf32(c, a, b);
  }
  template <bool>
  __device__ static void loadA(uint32_t (&a)[4], const float *p, int rs,
                               int ks) {
    int g = (threadIdx.x & 31) / 4, q = threadIdx.x & 3;
    for (int i = 0; i < 4; ++i)
      a[i] = toTf32(p[(g + 8 * (i % 2)) * rs + (q + 4 * (i / 2)) * ks]);
  }
  template <bool>
  __device__ static void loadBPair(uint32_t (&b0)[2], uint32_t (&b1)[2],
                                   const float *p, int ks, int ns) {
    int g = (threadIdx.x & 31) / 4, q = threadIdx.x & 3;
    for (int i = 0; i < 2; ++i) {
      b0[i] = toTf32(p[(q + 4 * i) * ks + g * ns]);
      b1[i] = toTf32(p[(q + 4 * i) * ks + (g + 8) * ns]);
    }
  }
  /// The a fragment of columns [8j, 8j + 8) of c (tile j): a's column
  /// q + 4 (i / 2) is accumulator element i % 2 * 2 + q % 2 of lane
  /// q / 2 + 2 (i / 2) of the same four, fetched by shuffles (every lane
  /// sends both elements, the receiver keeps the one of its parity).
  template <int N>
  __device__ static void accumulatorsToA(uint32_t (&a)[4],
                                         const Accumulators<N> &c, int j) {
    int lane = threadIdx.x & 31, q = lane & 3;
    for (int i = 0; i < 4; ++i) {
      int source = (lane & ~3) + q / 2 + 2 * (i / 2);
      float even = __shfl_sync(0xffffffffu, c[j][2 * (i % 2)], source);
      float odd = __shfl_sync(0xffffffffu, c[j][2 * (i % 2) + 1], source);
      a[i] = toTf32(q % 2 ? odd : even);
    }
  }
  __device__ static float fromFloat(float x) { return x; }
  /// p[0], p[1] = x, y in one store (p 8-byte aligned).
  __device__ static void storePair(float *p, float x, float y) {
    *reinterpret_cast<float2 *>(p) = make_float2(x, y);
  }
  __device__ static float toFloat(float x) { return x; }
};

template <typename T> constexpr int kPad = Tiles<T>::kPad;

/// The phases of the kernels' steps (FlashPhaseCounters), in flashPhaseName's
/// order. The forward's: its setup and its stores; a step's wait for its
/// tiles (then the next issue: forwardStages), S = q k^T, the softmax, with
/// one stage the wait for v (then the next k's issue), and the rescale with
/// P v.
enum ForwardPhase {
  kForwardSetup,
  kWaitTiles,
  kScores,
  kSoftmax,
  kWaitV,
  kPv,
  kForwardPhases // their number
};
/// The backward's: its setup and its stores; a step's wait for its q, dy,
/// lse and delta, S^T and dP^T, P^T and dS^T (dS^T's stores included), dv
/// and dk, the sync after them with the next issue, dq = dS k, and dq's
/// adds (atomics or bulk reductions: FlashDq).
enum BackwardPhase {
  kBackwardSetup,
  kWaitQ,
  kScoresT,
  kGradScores,
  kDvDk,
  kIssue,
  kDq,
  kDqAdds,
  kBackwardPhases // their number
};

/// A warp's clock split into the phases of its steps where Phased:
/// mark(p) adds the cycles since the last mark to phase p, step() counts a
/// step, and flush adds lane 0's counts to the kernel's counters. Every
/// lane counts, in 32 bits (a warp's phase over all of its block's steps
/// takes far fewer than 2^32 cycles). The clock reads are where the warp
/// issues them: a product's latency shows in the phase that first reads its
/// result. Without Phased, nothing.
template <bool Phased> struct PhaseClock {
  __device__ void mark(int) {}
  __device__ void step() {}
  __device__ void flush(FlashPhaseCounters *) {}
};
template <> struct PhaseClock<true> {
  uint32_t cycles[FlashPhaseCounters::kPhases] = {}, steps = 0, last;
  __device__ PhaseClock() : last(now()) {}
  __device__ static uint32_t now() { return static_cast<uint32_t>(clock64()); }
  __device__ void mark(int phase) {
    uint32_t at = now();
    cycles[phase] += at - last;
    last = at;
  }
  __device__ void step() { ++steps; }
  __device__ void flush(FlashPhaseCounters *to) {
    if ((threadIdx.x & 31) != 0)
      return;
    for (int p = 0; p < FlashPhaseCounters::kPhases; ++p)
      atomicAdd(&to->cycles[p], static_cast<unsigned long long>(cycles[p]));
    atomicAdd(&to->warpSteps, static_cast<unsigned long long>(steps));
  }
};

/// Issues dst[Rows][D + padding] = rows [0, valid) of src[.][D] (row
/// stride ld), zeros after, as 16-byte cp.asyncs (copyAsync) that land at
/// the thread's wait for the group they are committed in. Rows and tiles
/// are 16-byte aligned: D a multiple of 16, ld of 3c or c, shared rows
/// padded by 16 bytes, and qkv and dy 16-byte aligned (flashAttentionDeclines).
template <typename T, int D, int Rows = kBlock>
__device__ void copyTile(T *dst, const T *src, int64_t ld, int64_t valid) {
  constexpr int kVector = 16 / sizeof(T), kPerRow = D / kVector;
  // Each pass copies kRows whole rows, a thread the same chunk of each.
  constexpr int kRows = kThreads / kPerRow, ldd = D + kPad<T>;
  int r = threadIdx.x / kPerRow, j = threadIdx.x % kPerRow * kVector;
  if (r >= kRows)
    return;                 // kThreads % kPerRow threads idle
  const T *first = src + j; // a row past valid reads nothing from here
  const T *from = first + r * ld;
  for (int u = 0; u < (Rows + kRows - 1) / kRows; ++u, from += kRows * ld) {
    int row = r + u * kRows;
    if (Rows % kRows != 0 && row >= Rows)
      break;
    bool inside = row < valid;
    copyAsync<16>(dst + row * ldd + j, inside ? from : first, inside ? 16 : 0);
  }
}

/// c[i][n] += a[i] b_n for a k-step's fragments a[i] of the warp's I tiles
/// of 16 rows and the N column tiles of b, b_n(k, j) = p[k ks + (8 n + j)
/// ns]: two column tiles' fragments loaded (one ldmatrix for bf16) before
/// their 2 I mmas, each b fragment feeding every row tile.
template <typename T, int N, bool ByMatrix, int I>
__device__ void warpMmaTiles(float (&c)[I][N][4], const uint32_t (&a)[I][4],
                             const T *p, int ks, int ns) {
  static_assert(N % 2 == 0, "column tiles go in pairs");
  for (int n = 0; n < N; n += 2) {
    uint32_t b0[2], b1[2];
    Tiles<T>::template loadBPair<ByMatrix>(b0, b1, p + 8 * n * ns, ks, ns);
    for (int i = 0; i < I; ++i) {
      Tiles<T>::mma(c[i][n], a[i], b0);
      Tiles<T>::mma(c[i][n + 1], a[i], b1);
    }
  }
}

/// c[i][n] += a b over the warp's I tiles of 16 rows (tile i: rows
/// [16 i, 16 i + 16)): a(r, k) = a[r ld + k] for k in [0, D), b(k, n) =
/// b[n ld + k] for the 8 N rows of b (S = a b^T).
template <typename T, int D, bool ByMatrix, int N, int I>
__device__ void warpABT(Accumulators<N> (&c)[I], const T *a, const T *b) {
  constexpr int ld = D + kPad<T>;
  for (int k = 0; k < D; k += Tiles<T>::kK) {
    uint32_t fa[I][4];
    for (int i = 0; i < I; ++i)
      Tiles<T>::template loadA<ByMatrix>(fa[i], a + 16 * i * ld + k, ld, 1);
    warpMmaTiles<T, N, ByMatrix, I>(c, fa, b + k, 1, ld);
  }
}

/// o[i] (16 x D) += p[i] b over the warp's I tiles of 16 rows, where p[i]
/// is tile i's 16 x 8N accumulators and b[8N][D] (row stride D + padding)
/// in shared memory.
template <typename T, int D, bool ByMatrix, int N, int I>
__device__ void warpAccumulatePB(float (&o)[I][D / 8][4],
                                 const Accumulators<N> (&p)[I], const T *b) {
  constexpr int ld = D + kPad<T>, kK = Tiles<T>::kK;
  for (int j = 0; j < 8 * N / kK; ++j) {
    uint32_t fa[I][4];
    for (int i = 0; i < I; ++i)
      Tiles<T>::accumulatorsToA(fa[i], p[i], j);
    warpMmaTiles<T, D / 8, ByMatrix, I>(o, fa, b + j * kK * ld, ld, 1);
  }
}

/// Stores the warp's 16 rows of acc, row half times factor[half] and
/// rounded to T, at rows[r ld + column] for its rows r = first + g and
/// first + g + 8 that come before t.
template <typename T, int D>
__device__ void storeWarpRows(T *rows, int64_t ld, int64_t first, int64_t t,
                              const float (&acc)[D / 8][4],
                              const float (&factor)[2]) {
  int lane = threadIdx.x & 31, g = lane / 4, q = lane & 3;
  for (int half = 0; half < 2; ++half) {
    int64_t r = first + g + 8 * half;
    if (r >= t)
      continue;
    for (int n = 0; n < D / 8; ++n)
      for (int e = 0; e < 2; ++e)
        rows[r * ld + n * 8 + 2 * q + e] =
            Tiles<T>::fromFloat(acc[n][2 * half + e] * factor[half]);
  }
}

/// A head's blocks of `rows` rows (queries in the forward and dqKernel,
/// keys in backwardKernel).
__host__ __device__ constexpr int64_t blocksOf(int64_t t, int rows = kBlock) {
  return (t + rows - 1) / rows;
}

/// The kernels' grid is one dimension, a head's blocks adjacent (heads, then
/// batch elements, after them), as FlashAttention-2's grid has them: the
/// blocks running together are mostly one head's, and read its k and v
/// (forward) or q and dy (backward) from L2 rather than each from memory.
/// Block `block` of head bh (batch * heads + head) of the grid's
/// blocksOf(t, rows) per head.
struct HeadBlock {
  int64_t bh, block;
};
__device__ inline HeadBlock headBlock(int64_t t, int rows = kBlock) {
  int64_t blocks = blocksOf(t, rows), x = blockIdx.x;
  return {x / blocks, x % blocks};
}

/// An sm_90 multiprocessor's shared memory, and what each block resident
/// there takes besides its own (1 KiB, the CUDA programming guide's). The
/// stages below are chosen for it: on a GPU with less (sm_80's 164 KiB)
/// fewer blocks may share a multiprocessor, which is slower, not wrong; a
/// kernel over the device's limit a block (sm_80's 163 KiB: f32's backward
/// from d = 96, 172,032 bytes there) is declined by flashAttentionDeclines,
/// and attention runs on GEMMs.
constexpr size_t kSharedPerMultiprocessor = 228 * 1024;
constexpr size_t kSharedReservedPerBlock = 1024;

/// The blocks of `bytes` of shared memory a multiprocessor holds, up to
/// `wanted`.
constexpr int residentBlocks(size_t bytes, int wanted) {
  return std::min<size_t>(wanted, kSharedPerMultiprocessor /
                                      (bytes + kSharedReservedPerBlock));
}

/// 2 stages of tiles in flight where a multiprocessor holds as many blocks
/// of `twoStages` bytes as of `oneStage` (up to `wanted`), else 1.
constexpr int stagesKeepingBlocks(size_t twoStages, size_t oneStage,
                                  int wanted) {
  return residentBlocks(twoStages, wanted) >= residentBlocks(oneStage, wanted)
             ? 2
             : 1;
}

/// The row tiles of 16 rows each warp of either kernel takes where `tiles`
/// are asked for: two up to d = 64, else one (two tiles' accumulators past
/// that would leave 1 block a multiprocessor).
constexpr int rowTiles(int d, FlashTiles tiles) {
  return tiles == FlashTiles::Two && d <= 64 ? 2 : 1;
}

/// Launches a kernel with more than the default 48 KiB of shared memory.
template <typename Kernel> void allowShared(Kernel kernel, size_t bytes) {
  SHARDC_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes)));
}

/// f(std::integral_constant<int, d>()): the kernels are compiled per head
/// size (their accumulators are registers), d a multiple of 16 up to 128.
template <typename F> void withHeadSize(int d, F &&f) {
  switch (d) {
  case 16:
    return f(std::integral_constant<int, 16>());
  case 32:
    return f(std::integral_constant<int, 32>());
  case 48:
    return f(std::integral_constant<int, 48>());
  case 64:
    return f(std::integral_constant<int, 64>());
  case 80:
    return f(std::integral_constant<int, 80>());
  case 96:
    return f(std::integral_constant<int, 96>());
  case 112:
    return f(std::integral_constant<int, 112>());
  case 128:
    return f(std::integral_constant<int, 128>());
  default:
    std::fprintf(stderr,
                 "shardc: flash attention has no kernel for head size %d "
                 "(flashAttentionDeclines)\n",
                 d);
    std::abort();
  }
}

} // namespace shardc::rt::cuda::flash

#endif // SHARDC_RT_CUDA_FLASHKERNELS_CUH
