//===- FlashAttention.cu - Fused causal attention on tensor cores ---------===//
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
//===----------------------------------------------------------------------===//

#include "FlashAttention.h"

#include "Check.h"
#include "Ptx.h"
#include "Workspace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <type_traits>

using bf16 = __nv_bfloat16;

namespace shardc::rt::cuda {
namespace {

constexpr int kBlock = 64; // queries (forward) or keys (backward) per block
constexpr int kWarps = 4;  // each owns 16 of the block's rows
constexpr int kThreads = 32 * kWarps;
constexpr int kTiles = kBlock / 8; // 8-column accumulator tiles of a row

/// Softmaxes run in base 2: exp(x scale - m) = exp2(x scale log2(e) - m'),
/// the scale and the row's max in one fma and exp2 one instruction
/// (exp2Approx), as FlashAttention-2 does; log-sum-exps are stored in
/// natural units (kLog2e: Ptx.h).
constexpr float kLn2 = 0.6931471805599453f;

/// Whether each kernel loads its bf16 fragments by ldmatrix (Tiles<bf16>).
/// On an H200 (GPT-2 small, bf16, batch 128, 12 layers) ldmatrix took the
/// forward from 28.6 to 27.1 ms but the backward from 93.7 to 104.7 ms.
/// ptxas says why: the backward then took 185 registers a thread, so 2
/// blocks fit a multiprocessor's 64K where 3 had (165). It now asks for 4
/// at d = 64, its steps in halves (backwardBlocks): 128 registers with
/// ldmatrix. Not yet timed on a GPU.
constexpr bool kForwardByMatrix = true;
constexpr bool kBackwardByMatrix = true;

/// The forward blocks a multiprocessor should hold at once, which its
/// registers (__launch_bounds__) then allow, its warps taking `tiles` row
/// tiles of 16 queries each (rowTiles). One: 4 up to d = 64 (128
/// registers a thread; unbounded, ptxas took 129 at d = 48), 3 past that.
/// Two (up to d = 64): 2, each thread's accumulators (scores and output)
/// twice one tile's. None spills (ptxas, sm_90, either type).
constexpr int forwardBlocks(int d, int tiles = 1) {
  if (tiles == 2)
    return 2;
  return d <= 64 ? 4 : 3;
}

/// The backward blocks a multiprocessor should hold at once, which its
/// registers (__launch_bounds__) then allow, as many as spill a few words
/// at most (ptxas, sm_90), the main kernel taking its steps' scores in
/// `parts` parts (backwardParts). Whole (and dqKernel): 4 at d = 16; 3 up
/// to 64 (128 registers are fewer than its accumulators take: dk, dv, S^T
/// and dP^T, 128 floats a thread at d = 64; 4 bytes spilled there in bf16,
/// 60 at most); 2 past that, where 3 spills 96 to 988 bytes. In halves
/// (S^T and dP^T 32 floats a thread fewer): 4 up to d = 64, spilling 24
/// bytes at d = 64 in bf16 (dq by atomics; 4 by bulk reductions, none for
/// dk and dv alone), 44 at d = 48. Two row tiles of keys a warp
/// (rowTiles, in quarters): 2, none spilling.
constexpr int backwardBlocks(int d, int parts = 1, int tiles = 1) {
  if (tiles == 2)
    return 2;
  if (parts == 2 && d <= 64)
    return 4;
  return d <= 16 ? 4 : d <= 64 ? 3 : 2;
}

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

__device__ float quadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

__device__ float quadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

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
/// padded by 16 bytes, and qkv and dy 16-byte aligned (flashAttentionTakes).
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
__device__ HeadBlock headBlock(int64_t t, int rows = kBlock) {
  int64_t blocks = blocksOf(t, rows), x = blockIdx.x;
  return {x / blocks, x % blocks};
}

/// An sm_90 multiprocessor's shared memory, and what each block resident
/// there takes besides its own (1 KiB, the CUDA programming guide's). The
/// stages below are chosen for it: on a GPU with less (sm_80's 164 KiB)
/// fewer blocks may share a multiprocessor, which is slower, not wrong; a
/// kernel over the device's limit a block (sm_80's 163 KiB: f32's backward
/// from d = 96, 172,032 bytes there) is declined by flashAttentionTakes,
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

/// The forward's shared memory with `stages` key blocks in flight: the
/// query block's q tile (kBlock queries per row tile of its warps), and per
/// stage a key block's k and v tiles.
template <typename T>
constexpr size_t forwardSharedBytes(int d, int stages, int tiles) {
  return size_t(tiles + 2 * stages) * kBlock * (d + kPad<T>)*sizeof(T);
}

/// The key blocks the forward keeps in flight: 2, the next one's k and v
/// landing during this one's whole step, where that leaves as many blocks
/// on a multiprocessor as 1 (on sm_90, one row tile: bf16 up to d = 112,
/// f32 up to d = 32; two: either type up to d = 64); else 1, v landing
/// while the warps compute S and its softmax, the next k while they
/// compute P v.
template <typename T> constexpr int forwardStages(int d, int tiles) {
  return stagesKeepingBlocks(forwardSharedBytes<T>(d, 2, tiles),
                             forwardSharedBytes<T>(d, 1, tiles),
                             forwardBlocks(d, tiles));
}

template <typename T> constexpr size_t forwardSharedBytes(int d, int tiles) {
  return forwardSharedBytes<T>(d, forwardStages<T>(d, tiles), tiles);
}

/// forwardStages for the kernel (a constant, which device code may read).
template <typename T, int D, int Tiles>
constexpr int kForwardStages = forwardStages<T>(D, Tiles);

// What the comments above say of sm_90.
static_assert(forwardStages<bf16>(64, 1) == 2 &&
              forwardStages<bf16>(64, 2) == 2 &&
              forwardStages<float>(64, 2) == 2 &&
              forwardStages<float>(64, 1) == 1);

/// grid: headBlock's, the query blocks of kBlock Tiles queries: each warp
/// takes Tiles row tiles of 16 of them, each k and v fragment it loads
/// feeding every tile's products. Phased: adds its warps' phases to
/// `phases` (PhaseClock).
template <typename T, int D, int Tiles, bool Phased>
__global__ void __launch_bounds__(kThreads, forwardBlocks(D, Tiles))
    forwardKernel(const T *qkv, T *out, float *lse, int64_t t, int64_t c,
                  int heads, float scaleLog2, FlashPhaseCounters *phases) {
  PhaseClock<Phased> clock;
  constexpr int kStages = kForwardStages<T, D, Tiles>;
  constexpr int kQueries = kBlock * Tiles, kWarpRows = 16 * Tiles;
  constexpr int ld = D + kPad<T>;
  extern __shared__ __align__(128) unsigned char shared[];
  T *qs = reinterpret_cast<T *>(shared);
  T *stageTiles = qs + kQueries * ld; // per stage: k, then v

  // A head's last query blocks, which see the most keys, are scheduled
  // first (blocks start roughly in index order), as FlashAttention-2
  // schedules them.
  HeadBlock at = headBlock(t, kQueries);
  int64_t bh = at.bh, qb = blocksOf(t, kQueries) - 1 - at.block;
  int64_t batch = bh / heads, h = bh % heads, q0 = qb * kQueries, ldg = 3 * c;
  const T *head = qkv + batch * t * ldg + h * D;
  int warp = threadIdx.x / 32, lane = threadIdx.x & 31, r0 = warp * kWarpRows;
  int g = lane / 4, q = lane & 3;

  const T *keys = head + c, *values = head + 2 * c;
  // The key blocks the queries see: up to the one holding the last query
  // before t, from the last; those from `masked` on hold keys after some
  // query (or at or after t), the others none. With one tile, qb: the
  // same block, in the form that keeps ptxas's one-tile registers.
  int64_t last =
      Tiles == 1 ? qb : ((q0 + kQueries < t ? q0 + kQueries : t) - 1) / kBlock;
  int64_t masked = q0 / kBlock;
  // Key block kb's stage, that of its step last - kb: its k tile, then v.
  auto stageOf = [&](int64_t kb) {
    return stageTiles + (last - kb) % kStages * 2 * kBlock * ld;
  };
  // Issues key block kb's k (and with two stages its v) into its stage.
  auto issue = [&](int64_t kb) {
    int64_t k0 = kb * kBlock;
    T *ks = stageOf(kb);
    copyTile<T, D>(ks, keys + k0 * ldg, ldg, t - k0);
    if constexpr (kStages == 2)
      copyTile<T, D>(ks + kBlock * ld, values + k0 * ldg, ldg, t - k0);
  };
  copyTile<T, D, kQueries>(qs, head + q0 * ldg, ldg, t - q0);
  issue(last);
  copyAsyncCommit();
  float o[Tiles][D / 8][4] = {};
  // Rows g and g + 8 of each of the warp's tiles: running max (of scaled
  // scores, in log2 units) and sum.
  float m[Tiles][2], l[Tiles][2];
  for (int i = 0; i < Tiles; ++i)
    for (int half = 0; half < 2; ++half)
      m[i][half] = -INFINITY, l[i][half] = 0.0f;
  clock.mark(kForwardSetup);
  // Causal: the key blocks up to the query block's last, that one first.
  // Only the blocks from `masked` on hold keys after a query and keys at
  // or after t (every block before them is whole): the mask is compiled
  // into their steps alone, as FlashAttention-2 splits its loop; a warp
  // whose queries all come before such a block's keys skips its products
  // (its scores would all be masked). With two stages the next block's k
  // and v land during the whole step, one barrier a step; with one, as in
  // FlashAttention-2, v's tile lands while the warps compute S and its
  // softmax, and the next block's k while they multiply P v.
  auto step = [&](int64_t kb, auto diagonal) {
    int64_t k0 = kb * kBlock;
    T *ks = stageOf(kb), *vs = ks + kBlock * ld;
    copyAsyncWait<0>();
    // k (two stages: and v) has landed; every warp is done with the last
    // step's v (two stages: with the other stage, which the next step
    // takes).
    __syncthreads();
    if constexpr (kStages == 2) {
      if (kb > 0)
        issue(kb - 1);
    } else {
      copyTile<T, D>(vs, values + k0 * ldg, ldg, t - k0);
    }
    copyAsyncCommit();
    clock.mark(kWaitTiles);
    // The block's first query less the step's first key in a masked step:
    // 0 with one tile (the one masked step's keys are the queries), else 0
    // or -kBlock.
    int shift = Tiles == 1 ? 0 : static_cast<int>(q0 - k0);
    bool idle =
        Tiles > 1 && decltype(diagonal)::value && shift + r0 + kWarpRows <= 0;
    RowAccumulators s[Tiles] = {};
    float alpha[Tiles][2];
    if (!idle) {
      warpABT<T, D, kForwardByMatrix>(s, qs + r0 * ld, ks);
      clock.mark(kScores);
      for (int i = 0; i < Tiles; ++i)
        for (int half = 0; half < 2; ++half) {
          int row = r0 + 16 * i + g + 8 * half; // of the block
          bool inside = q0 + row < t;
          float rowMax = -INFINITY; // of the unscaled scores
          for (int n = 0; n < kTiles; ++n)
            for (int e = 0; e < 2; ++e) {
              float &x = s[i][n][2 * half + e];
              // Keys from k0 on; the query's index less k0 is row + shift.
              if (decltype(diagonal)::value &&
                  !(inside && n * 8 + 2 * q + e <= row + shift))
                x = -INFINITY; // key < t follows
              rowMax = fmaxf(rowMax, x);
            }
          // The scale is positive: the max of the scaled scores, rounded
          // alike.
          float mNew = fmaxf(m[i][half], quadMax(rowMax) * scaleLog2);
          // A row masked whole so far (past t) subtracts 0, not
          // -inf - -inf.
          float mSafe = mNew == -INFINITY ? 0.0f : mNew;
          float sum = 0.0f;
          for (int n = 0; n < kTiles; ++n)
            for (int e = 0; e < 2; ++e) {
              float &x = s[i][n][2 * half + e];
              // P over S, the scale in the exponent's fma; exp2(-inf) = 0.
              x = exp2Approx(fmaf(x, scaleLog2, -mSafe));
              sum += x;
            }
          // The output so far was weighted by 2^-mOld: now by 2^-mNew.
          alpha[i][half] = exp2Approx(m[i][half] - mSafe);
          l[i][half] = l[i][half] * alpha[i][half] + quadSum(sum);
          m[i][half] = mNew;
        }
      clock.mark(kSoftmax);
    }
    if constexpr (kStages == 1) {
      copyAsyncWait<0>();
      __syncthreads(); // v has landed; every warp is done with k
      if (kb > 0) {
        issue(kb - 1);
        copyAsyncCommit();
      }
    }
    clock.mark(kWaitV);
    if (!idle) {
      for (int i = 0; i < Tiles; ++i)
        for (int n = 0; n < D / 8; ++n)
          for (int e = 0; e < 4; ++e)
            o[i][n][e] *= alpha[i][e / 2];
      warpAccumulatePB<T, D, kForwardByMatrix>(o, s, vs);
      clock.mark(kPv);
    }
    clock.step();
  };
  step(last, std::true_type()); // with one tile, the only masked one
  int64_t kb = last - 1;
  if constexpr (Tiles > 1)
    for (; kb >= masked; --kb)
      step(kb, std::true_type());
  for (; kb >= 0; --kb)
    step(kb, std::false_type());
  for (int i = 0; i < Tiles; ++i) {
    int64_t first = q0 + r0 + 16 * i;
    const float inverse[2] = {1.0f / l[i][0], 1.0f / l[i][1]};
    storeWarpRows<T, D>(out + batch * t * c + h * D, c, first, t, o[i],
                        inverse);
    for (int half = 0; half < 2; ++half) {
      int64_t qi = first + g + 8 * half;
      if (qi < t && q == 0) // natural log: m and log2(l) are log2 units
        lse[bh * t + qi] = (m[i][half] + log2f(l[i][half])) * kLn2;
    }
  }
  clock.mark(kForwardSetup);
  clock.flush(phases);
}

/// A 16-byte chunk of a row of T: loaded as one vector where `aligned`,
/// else element by element (the same values either way).
template <typename T> struct Chunk {
  static constexpr int kSize = 16 / sizeof(T);
  T at[kSize];
  __device__ void load(const T *p, bool aligned) {
    if (aligned) {
      uint4 bits = *reinterpret_cast<const uint4 *>(p);
      std::memcpy(at, &bits, sizeof bits);
      return;
    }
    for (int e = 0; e < kSize; ++e)
      at[e] = p[e];
  }
  __device__ void store(T *p, bool aligned) const {
    if (aligned) {
      uint4 bits;
      std::memcpy(&bits, at, sizeof bits);
      *reinterpret_cast<uint4 *>(p) = bits;
      return;
    }
    for (int e = 0; e < kSize; ++e)
      p[e] = at[e];
  }
};

/// The lanes that take a row in deltaKernel.
constexpr int kDeltaLanes = 8;

/// delta[row] = dot(dy, out) over a (batch, head, query) row's d elements,
/// in f32: kDeltaLanes lanes a row, lane l taking its chunks l, l +
/// kDeltaLanes, ... (a row is 2 to 16 chunks in bf16, 4 to 32 in f32), the
/// lanes' sums combined by shuffles. dy is chunk aligned
/// (flashAttentionTakes), out where `aligned`: either way the same sums.
template <typename T>
__global__ void deltaKernel(const T *dy, const T *out, float *delta,
                            int64_t rows, int64_t t, int64_t c, int heads,
                            int d, bool aligned) {
  constexpr int kRows = kThreads / kDeltaLanes, kSize = Chunk<T>::kSize;
  int64_t row =
      static_cast<int64_t>(blockIdx.x) * kRows + threadIdx.x / kDeltaLanes;
  int lane = threadIdx.x % kDeltaLanes;
  float sum = 0.0f;
  if (row < rows) {
    int64_t bh = row / t, qi = row % t;
    int64_t at = (bh / heads * t + qi) * c + bh % heads * d;
    for (int j = lane * kSize; j < d; j += kDeltaLanes * kSize) {
      Chunk<T> x, y;
      x.load(dy + at + j, true);
      y.load(out + at + j, aligned);
      for (int e = 0; e < kSize; ++e)
        sum += Tiles<T>::toFloat(x.at[e]) * Tiles<T>::toFloat(y.at[e]);
    }
  }
  // Every lane shuffles, a row past the last one with its zero.
  for (int offset = kDeltaLanes / 2; offset > 0; offset >>= 1)
    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (row < rows && lane == 0)
    delta[row] = sum;
}

/// The stride of a warp's dq staging rows (FlashDq::BulkReduce): half of
/// d's columns, padded by 8 floats so that a half warp's float2 stores hit
/// 32 different banks.
__host__ __device__ constexpr int dqStageStride(int d) { return d / 2 + 8; }

/// The backward's shared memory with `stages` query blocks in flight, its
/// warps taking `tiles` row tiles of keys: k, v and dS^T (kBlock tiles
/// keys by kBlock queries) tiles, and per stage a query block's q and dy
/// tiles (T), then per stage its log-sum-exps and deltas (f32), then with
/// BulkReduce each warp's dq staging (16 rows of dqStageStride floats).
template <typename T>
constexpr size_t backwardSharedBytes(int d, int stages, FlashDq dq,
                                     int tiles = 1) {
  size_t tile = size_t(kBlock) * (d + kPad<T>)*sizeof(T);
  size_t staging = dq == FlashDq::BulkReduce
                       ? size_t(kWarps) * 16 * dqStageStride(d) * sizeof(float)
                       : 0;
  return size_t(tiles) *
             (2 * tile + size_t(kBlock) * (kBlock + kPad<T>)*sizeof(T)) +
         size_t(stages) * (2 * tile + 2 * kBlock * sizeof(float)) + staging;
}

/// The query blocks the backward keeps in flight, its steps in `parts`
/// parts: 2, the next one's tiles landing while the warps compute on this
/// one's, where that leaves as many blocks on a multiprocessor as 1 (on
/// sm_90, whole steps: bf16 at every d, with BulkReduce's staging up to
/// d = 96); else 1, the next one's landing while the warps compute dq
/// (halves at d = 64: 2 would leave 3 blocks of the 4 their registers
/// allow).
template <typename T>
constexpr int backwardStages(int d, FlashDq dq, int parts, int tiles = 1) {
  return stagesKeepingBlocks(backwardSharedBytes<T>(d, 2, dq, tiles),
                             backwardSharedBytes<T>(d, 1, dq, tiles),
                             backwardBlocks(d, parts, tiles));
}

/// The backward's shared memory, its steps in `parts` parts, its warps
/// taking `tiles` row tiles.
template <typename T>
constexpr size_t backwardKernelSharedBytes(int d, FlashDq dq, int parts,
                                           int tiles = 1) {
  return backwardSharedBytes<T>(d, backwardStages<T>(d, dq, parts, tiles), dq,
                                tiles);
}

/// The backward's blocks a multiprocessor holds, its steps in `parts`
/// parts: as many as its registers allow (backwardBlocks) and its shared
/// memory.
template <typename T>
constexpr int backwardResidentBlocks(int d, FlashDq dq, int parts) {
  return residentBlocks(backwardKernelSharedBytes<T>(d, dq, parts),
                        backwardBlocks(d, parts));
}

/// The parts the backward's main kernel takes a step's scores in: with
/// FlashSteps::Fitted, 2 (halves of 32 queries) where that lets more of
/// its blocks share a multiprocessor (on sm_90: bf16 from d = 32 to 64,
/// f32 at d = 32), else 1.
template <typename T>
constexpr int backwardParts(int d, FlashDq dq, FlashSteps steps) {
  return steps == FlashSteps::Fitted && backwardResidentBlocks<T>(d, dq, 2) >
                                            backwardResidentBlocks<T>(d, dq, 1)
             ? 2
             : 1;
}

/// The parts of a plan's steps: two row tiles take theirs in quarters of
/// 16 queries (halves spill 8 to 36 bytes at d = 64 in bf16, ptxas sm_90:
/// two tiles' scores and their gradient take twice one's registers),
/// else backwardParts.
template <typename T>
constexpr int backwardParts(int d, FlashBackwardPlan plan) {
  return rowTiles(d, plan.tiles) == 2
             ? 4
             : backwardParts<T>(d, plan.dq, plan.steps);
}

/// backwardStages for the kernel (a constant, which device code may read).
template <typename T, int D, FlashDq Dq, int Parts, int KeyTiles>
constexpr int kBackwardStages = backwardStages<T>(D, Dq, Parts, KeyTiles);

// What the comments above say of sm_90.
static_assert(
    backwardParts<bf16>(64, FlashDq::Atomics, FlashSteps::Fitted) == 2 &&
    backwardParts<bf16>(64, FlashDq::BulkReduce, FlashSteps::Fitted) == 2 &&
    backwardParts<bf16>(16, FlashDq::Atomics, FlashSteps::Fitted) == 1 &&
    backwardParts<float>(64, FlashDq::Atomics, FlashSteps::Fitted) == 1 &&
    backwardParts<bf16>(96, FlashDq::Atomics, FlashSteps::Fitted) == 1);
static_assert(backwardResidentBlocks<bf16>(64, FlashDq::Atomics, 2) == 4 &&
              backwardStages<bf16>(64, FlashDq::Atomics, 2) == 1 &&
              backwardResidentBlocks<bf16>(64, FlashDq::Atomics, 1) == 3 &&
              backwardStages<bf16>(64, FlashDq::Atomics, 1) == 2 &&
              backwardStages<bf16>(64, FlashDq::Atomics, 4, 2) == 2);

/// grid: headBlock's, the key blocks (the first, which sees the most
/// queries, first). With Atomics or BulkReduce, dq accumulates, unscaled,
/// in f32 (storeDqKernel scales it); with SecondKernel, dk and dv only
/// (dqKernel computes dq). A step's scores in Parts parts (backwardParts).
/// Each warp takes KeyTiles row tiles of 16 keys (kBlock KeyTiles keys a
/// block), each q and dy fragment it loads feeding every tile's products.
/// Phased: adds its warps' phases to `phases` (PhaseClock).
template <typename T, int D, FlashDq Dq, int Parts, int KeyTiles, bool Phased>
__global__ void __launch_bounds__(kThreads, backwardBlocks(D, Parts, KeyTiles))
    backwardKernel(const T *qkv, const T *dy, const float *lse,
                   const float *delta, float *dq, T *dqkv, int64_t t, int64_t c,
                   int heads, float scale, FlashPhaseCounters *phases) {
  PhaseClock<Phased> clock;
  constexpr bool kDqHere = Dq != FlashDq::SecondKernel;
  constexpr int kStages = kBackwardStages<T, D, Dq, Parts, KeyTiles>;
  constexpr int kPartTiles = kTiles / Parts; // 8-query tiles of a part
  constexpr int kKeys = kBlock * KeyTiles, kWarpKeys = 16 * KeyTiles;
  const float scaleLog2 = scale * kLog2e;
  constexpr int ld = D + kPad<T>, ldS = kBlock + kPad<T>, kK = Tiles<T>::kK;
  extern __shared__ __align__(128) unsigned char shared[];
  T *ks = reinterpret_cast<T *>(shared);
  T *vs = ks + kKeys * ld;
  T *dsT = vs + kKeys * ld;          // [key][query]
  T *stageTiles = dsT + kKeys * ldS; // per stage: q, then dy
  // Per stage: log-sum-exps, then deltas.
  float *stageRows =
      reinterpret_cast<float *>(stageTiles + kStages * 2 * kBlock * ld);
  // BulkReduce: per warp, 16 rows of half of its dq columns.
  float *dqStage = stageRows + kStages * 2 * kBlock;

  HeadBlock at = headBlock(t, kKeys);
  int64_t bh = at.bh, k0 = at.block * kKeys;
  int64_t batch = bh / heads, h = bh % heads, ldg = 3 * c;
  const T *head = qkv + batch * t * ldg + h * D;
  const T *dyHead = dy + batch * t * c + h * D;
  // The warp's keys (rows r0 on) and, for dq, its queries (rows w0 on).
  int warp = threadIdx.x / 32, lane = threadIdx.x & 31, r0 = warp * kWarpKeys;
  int w0 = warp * 16, g = lane / 4, q = lane & 3;

  // Causal: the query blocks from the key block's first on, the first
  // KeyTiles of them first, the only ones the mask cuts (compiled into
  // their steps alone); a warp whose keys all come after such a step's
  // queries skips its products (its scores would all be masked). Queries
  // and keys at or after t need none: their q, dy (and lse, delta), k and
  // v rows are zeros, so their P reaches only dk, dv and dq rows that are
  // never stored, and the others through zeros.
  int64_t firstBlock = k0 / kBlock, steps = blocksOf(t) - firstBlock;
  // Issues query block firstBlock + i's q, dy, lse and delta into its
  // stage.
  auto issue = [&](int64_t i) {
    int64_t q0 = (firstBlock + i) * kBlock;
    int stage = static_cast<int>(i % kStages);
    T *qs = stageTiles + stage * 2 * kBlock * ld;
    copyTile<T, D>(qs, head + q0 * ldg, ldg, t - q0);
    copyTile<T, D>(qs + kBlock * ld, dyHead + q0 * c, c, t - q0);
    float *rows = stageRows + stage * 2 * kBlock;
    for (int r = threadIdx.x; r < kBlock; r += kThreads) {
      bool inside = q0 + r < t;
      int64_t at = bh * t + q0 + (inside ? r : 0);
      copyAsync<4>(rows + r, lse + at, inside ? 4 : 0);
      copyAsync<4>(rows + kBlock + r, delta + at, inside ? 4 : 0);
    }
  };
  copyTile<T, D, kKeys>(ks, head + c + k0 * ldg, ldg, t - k0);
  copyTile<T, D, kKeys>(vs, head + 2 * c + k0 * ldg, ldg, t - k0);
  for (int i = 0; i < kStages; ++i) { // k and v land with the first
    if (i < steps)
      issue(i);
    copyAsyncCommit();
  }
  // The warp's keys (rows g and g + 8 of each of its row tiles).
  float dk[KeyTiles][D / 8][4] = {}, dv[KeyTiles][D / 8][4] = {};
  clock.mark(kBackwardSetup);
  // Step i: query block firstBlock + i, group i of the thread's copies.
  auto step = [&](int64_t i, auto diagonal) {
    int64_t q0 = (firstBlock + i) * kBlock;
    int stage = static_cast<int>(i % kStages);
    const T *qs = stageTiles + stage * 2 * kBlock * ld;
    const T *dys = qs + kBlock * ld;
    const float *lses = stageRows + stage * 2 * kBlock;
    const float *deltas = lses + kBlock;
    copyAsyncWait<kStages - 1>();
    // The step's tiles have landed; every warp is done with the last dS^T.
    __syncthreads();
    clock.mark(kWaitQ);
    // The step's first query less the block's first key in a masked step:
    // 0 with one tile (the one masked step's queries are the keys), else 0
    // or kBlock. A warp whose keys all come after the step's queries has
    // dS^T rows of zeros.
    int shift = KeyTiles == 1 ? 0 : static_cast<int>(q0 - k0);
    bool idle =
        KeyTiles > 1 && decltype(diagonal)::value && r0 >= shift + kBlock;
    if (kDqHere && idle)
      for (int e = lane; e < kWarpKeys * kBlock; e += 32)
        dsT[(r0 + e / kBlock) * ldS + e % kBlock] = Tiles<T>::fromFloat(0.0f);
    // The warp's keys against the block's queries, a part at a time (its
    // first query `first`): S^T = k q^T and dP^T = v dy^T; P^T and dS^T
    // over them; then dv += P^T dy, dk += dS^T q.
    for (int first = 0; !idle && first < kBlock; first += kBlock / Parts) {
      Accumulators<kPartTiles> s[KeyTiles] = {}, dp[KeyTiles] = {};
      warpABT<T, D, kBackwardByMatrix>(s, ks + r0 * ld, qs + first * ld);
      warpABT<T, D, kBackwardByMatrix>(dp, vs + r0 * ld, dys + first * ld);
      clock.mark(kScoresT);
      for (int n = 0; n < kPartTiles; ++n) {
        int col = first + n * 8 + 2 * q;
        float lseLog2[2], rowDelta[2];
        for (int e = 0; e < 2; ++e) {
          lseLog2[e] = lses[col + e] * kLog2e;
          rowDelta[e] = deltas[col + e];
        }
        for (int tile = 0; tile < KeyTiles; ++tile)
          for (int half = 0; half < 2; ++half) {
            int r = r0 + 16 * tile + g + 8 * half;
            float ds[2];
            for (int e = 0; e < 2; ++e) {
              float &x = s[tile][n][2 * half + e];
              bool valid = !decltype(diagonal)::value || r <= col + e + shift;
              float p = valid ? exp2Approx(x * scaleLog2 - lseLog2[e]) : 0.0f;
              ds[e] = p * (dp[tile][n][2 * half + e] - rowDelta[e]);
              x = p;
              dp[tile][n][2 * half + e] = ds[e];
            }
            if (kDqHere)
              Tiles<T>::storePair(dsT + r * ldS + col, ds[0], ds[1]);
          }
      }
      clock.mark(kGradScores);
      warpAccumulatePB<T, D, kBackwardByMatrix>(dv, s, dys + first * ld);
      warpAccumulatePB<T, D, kBackwardByMatrix>(dk, dp, qs + first * ld);
      clock.mark(kDvDk);
    }
    // dS^T of every key; every warp is done with the stage's q and dy,
    // which the step kStages on takes.
    __syncthreads();
    if (i + kStages < steps)
      issue(i + kStages);
    copyAsyncCommit(); // one group per step, empty or not
    clock.mark(kIssue);
    clock.step();
    if (!kDqHere)
      return;
    // The warp's 16 queries: dq += dS k over the block's keys (scaled
    // once, by storeDqKernel), dS(query, key) = dS^T's (key, query).
    float accTile[1][D / 8][4] = {};
    auto &acc = accTile[0];
    for (int j = 0; j < kKeys / kK; ++j) {
      uint32_t fa[1][4];
      Tiles<T>::template loadA<kBackwardByMatrix>(
          fa[0], dsT + j * kK * ldS + w0, 1, ldS);
      warpMmaTiles<T, D / 8, kBackwardByMatrix>(accTile, fa, ks + j * kK * ld,
                                                ld, 1);
    }
    clock.mark(kDq);
    if constexpr (Dq == FlashDq::Atomics) {
      for (int half = 0; half < 2; ++half) {
        int64_t qi = q0 + w0 + g + 8 * half;
        if (qi >= t)
          continue;
        float *row = dq + (batch * t + qi) * c + h * D;
        for (int n = 0; n < D / 8; ++n)
          atomicAddPair(row + n * 8 + 2 * q, acc[n][2 * half],
                        acc[n][2 * half + 1]);
      }
    } else {
      // Each half of the warp's columns through its staging rows: once the
      // last bulk reductions have read them, written, fenced for the bulk
      // copies' proxy, then one bulk reduction a row (lane r, row r).
      constexpr int ldq = dqStageStride(D), kTilesHalf = D / 16;
      float *stage = dqStage + warp * 16 * ldq;
      int64_t qi = q0 + w0 + lane;
      for (int part = 0; part < 2; ++part) {
        bulkWaitRead();
        __syncwarp();
        for (int n = 0; n < kTilesHalf; ++n)
          for (int half = 0; half < 2; ++half) {
            const float *x = acc[part * kTilesHalf + n] + 2 * half;
            *reinterpret_cast<float2 *>(stage + (g + 8 * half) * ldq + n * 8 +
                                        2 * q) = make_float2(x[0], x[1]);
          }
        fenceProxyAsync();
        __syncwarp();
        if (lane < 16 && qi < t)
          bulkReduceAdd(dq + (batch * t + qi) * c + h * D + part * (D / 2),
                        stage + lane * ldq, 2 * D); // D / 2 floats
        bulkCommit();
      }
    }
    clock.mark(kDqAdds);
  };
  step(0, std::true_type()); // with one tile, the only masked one
  int64_t i = 1;
  if constexpr (KeyTiles > 1)
    for (; i < KeyTiles && i < steps; ++i)
      step(i, std::true_type());
  for (; i < steps; ++i)
    step(i, std::false_type());
  T *rows = dqkv + batch * t * ldg + h * D;
  for (int tile = 0; tile < KeyTiles; ++tile) {
    int64_t keys = k0 + r0 + 16 * tile;
    storeWarpRows<T, D>(rows + c, ldg, keys, t, dk[tile], {scale, scale});
    storeWarpRows<T, D>(rows + 2 * c, ldg, keys, t, dv[tile], {1.0f, 1.0f});
  }
  if constexpr (Dq == FlashDq::BulkReduce)
    bulkWaitRead(); // the staging must outlive its reads
  clock.mark(kBackwardSetup);
  clock.flush(phases);
}

/// dqkv's q columns = scale dq (rounded to T), for dq[n / c, c]: a thread
/// a 16-byte chunk of T (c a multiple of its elements: flashAttentionTakes),
/// stored as one where dqkv is chunk aligned (`aligned`).
template <typename T>
__global__ void storeDqKernel(const float *dq, T *dqkv, int64_t n, int64_t c,
                              float scale, bool aligned) {
  constexpr int kSize = Chunk<T>::kSize;
  for (int64_t i =
           (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) *
           kSize;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x * kSize) {
    Chunk<T> chunk;
    for (int e = 0; e < kSize; e += 4) {
      float4 four = *reinterpret_cast<const float4 *>(dq + i + e);
      chunk.at[e] = Tiles<T>::fromFloat(four.x * scale);
      chunk.at[e + 1] = Tiles<T>::fromFloat(four.y * scale);
      chunk.at[e + 2] = Tiles<T>::fromFloat(four.z * scale);
      chunk.at[e + 3] = Tiles<T>::fromFloat(four.w * scale);
    }
    chunk.store(dqkv + i / c * 3 * c + i % c, aligned);
  }
}

/// dqKernel's shared memory with `stages` key blocks in flight: its
/// queries' q and dy tiles, and per stage a key block's k and v tiles.
template <typename T> constexpr size_t dqSharedBytes(int d, int stages) {
  return size_t(2 + 2 * stages) * kBlock * (d + kPad<T>)*sizeof(T);
}

/// The key blocks dqKernel keeps in flight: 2, the next one's k and v
/// landing while the warps compute on this one's, where that leaves as
/// many blocks on a multiprocessor as 1; else 1, the next one's landing
/// after the step.
template <typename T> constexpr int dqStages(int d) {
  return stagesKeepingBlocks(dqSharedBytes<T>(d, 2), dqSharedBytes<T>(d, 1),
                             backwardBlocks(d));
}

template <typename T> constexpr size_t dqSharedBytes(int d) {
  return dqSharedBytes<T>(d, dqStages<T>(d));
}

template <typename T, int D> constexpr int kDqStages = dqStages<T>(D);

/// dq without atomics, for the deterministic backward: grid: headBlock's,
/// the query blocks, as the forward's. Each warp's 16 queries walk the key
/// blocks at or before their block, that one first (the only one the mask
/// cuts), computing S = q k^T and dP = dy v^T again (backwardKernel's,
/// per query block instead of per key block), P from the forward's
/// log-sum-exps, dS = P (dP - delta), and dq += dS k in registers: the same
/// sums in the same order every run. Scaled and rounded into dqkv's q
/// columns at the end. Queries at or after t have zero q and dy rows, so
/// zero dS, and are never stored.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads, backwardBlocks(D))
    dqKernel(const T *qkv, const T *dy, const float *lse, const float *delta,
             T *dqkv, int64_t t, int64_t c, int heads, float scale) {
  constexpr int kStages = kDqStages<T, D>;
  constexpr int ld = D + kPad<T>;
  const float scaleLog2 = scale * kLog2e;
  extern __shared__ __align__(128) unsigned char shared[];
  T *qs = reinterpret_cast<T *>(shared);
  T *dys = qs + kBlock * ld;
  T *stageTiles = dys + kBlock * ld; // per stage: k, then v

  // A head's last query blocks, which see the most keys, first (as the
  // forward).
  HeadBlock at = headBlock(t);
  int64_t bh = at.bh, qb = blocksOf(t) - 1 - at.block;
  int64_t batch = bh / heads, h = bh % heads, q0 = qb * kBlock, ldg = 3 * c;
  const T *head = qkv + batch * t * ldg + h * D;
  int warp = threadIdx.x / 32, lane = threadIdx.x & 31, r0 = warp * 16;
  int g = lane / 4, q = lane & 3;

  // Issues step i's key block, qb - i, into its stage.
  auto issue = [&](int64_t i) {
    int64_t k0 = (qb - i) * kBlock;
    T *ks = stageTiles + (i % kStages) * 2 * kBlock * ld;
    copyTile<T, D>(ks, head + c + k0 * ldg, ldg, t - k0);
    copyTile<T, D>(ks + kBlock * ld, head + 2 * c + k0 * ldg, ldg, t - k0);
  };
  copyTile<T, D>(qs, head + q0 * ldg, ldg, t - q0);
  copyTile<T, D>(dys, dy + (batch * t + q0) * c + h * D, c, t - q0);
  issue(0);
  copyAsyncCommit();
  // Rows g and g + 8 of the warp's: log-sum-exp (log2 units) and delta.
  float lseLog2[2] = {}, rowDelta[2] = {};
  for (int half = 0; half < 2; ++half) {
    int64_t qi = q0 + r0 + g + 8 * half;
    if (qi < t) {
      lseLog2[half] = lse[bh * t + qi] * kLog2e;
      rowDelta[half] = delta[bh * t + qi];
    }
  }
  float acc[1][D / 8][4] = {}; // one row tile
  auto step = [&](int64_t i, auto diagonal) {
    copyAsyncWait<0>();
    // Step i's tiles have landed; every warp is done with the other stage.
    __syncthreads();
    if (kStages == 2 && i < qb) {
      issue(i + 1);
      copyAsyncCommit();
    }
    const T *ks = stageTiles + (i % kStages) * 2 * kBlock * ld;
    const T *vs = ks + kBlock * ld;
    RowAccumulators sTile[1] = {}, dsTile[1] = {};
    auto &s = sTile[0], &ds = dsTile[0];
    warpABT<T, D, kBackwardByMatrix>(sTile, qs + r0 * ld, ks);
    warpABT<T, D, kBackwardByMatrix>(dsTile, dys + r0 * ld, vs);
    for (int n = 0; n < kTiles; ++n)
      for (int half = 0; half < 2; ++half)
        for (int e = 0; e < 2; ++e) {
          int row = r0 + g + 8 * half, col = n * 8 + 2 * q + e;
          bool valid = !decltype(diagonal)::value || col <= row;
          float &x = ds[n][2 * half + e];
          float p =
              valid ? exp2Approx(s[n][2 * half + e] * scaleLog2 - lseLog2[half])
                    : 0.0f;
          x = p * (x - rowDelta[half]);
        }
    warpAccumulatePB<T, D, kBackwardByMatrix>(acc, dsTile, ks);
    if (kStages == 1 && i < qb) {
      __syncthreads(); // every warp is done with the stage
      issue(i + 1);
      copyAsyncCommit();
    }
  };
  step(0, std::true_type());
  for (int64_t i = 1; i <= qb; ++i)
    step(i, std::false_type());
  storeWarpRows<T, D>(dqkv + batch * t * ldg + h * D, ldg, q0 + r0, t, acc[0],
                      {scale, scale});
}

/// Launches a kernel with more than the default 48 KiB of shared memory.
template <typename Kernel> void allowShared(Kernel kernel, size_t bytes) {
  SHARDC_CUDA_CHECK(cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
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
                 "(flashAttentionTakes)\n",
                 d);
    std::abort();
  }
}

} // namespace

template <typename T>
bool flashAttentionTakes(int64_t d, const T *qkv, const T *dy,
                         FlashBackwardPlan plan) {
  if (d <= 0 || d % 16 != 0 || d > 128)
    return false;
  if (!isChunkAligned(qkv) || !isChunkAligned(dy))
    return false;
  // The backward's tiles must fit the device's shared memory (sm_90: d up
  // to 128 either type; sm_80: bf16 up to 128, f32 up to 80).
  int device = 0, limit = 0;
  SHARDC_CUDA_CHECK(cudaGetDevice(&device));
  SHARDC_CUDA_CHECK(cudaDeviceGetAttribute(
      &limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  int size = static_cast<int>(d);
  size_t bytes = backwardKernelSharedBytes<T>(
      size, plan.dq, backwardParts<T>(size, plan), rowTiles(size, plan.tiles));
  if (plan.dq == FlashDq::SecondKernel)
    bytes = std::max(bytes, dqSharedBytes<T>(size));
  return bytes <= static_cast<size_t>(limit);
}

const char *flashPhaseName(FlashKernel kernel, int phase) {
  static const char *const forward[] = {
      "setup and store", "wait tiles, issue",  "S = q k^T",
      "softmax",         "wait v (one stage)", "P v"};
  static const char *const backward[] = {
      "setup and store", "wait q, dy",  "S^T, dP^T", "P^T, dS^T",
      "dv, dk",          "sync, issue", "dq = dS k", "dq adds"};
  static_assert(std::size(forward) == kForwardPhases &&
                std::size(backward) == kBackwardPhases &&
                kBackwardPhases <= FlashPhaseCounters::kPhases);
  if (phase < 0)
    return nullptr;
  if (kernel == FlashKernel::Forward)
    return phase < int(std::size(forward)) ? forward[phase] : nullptr;
  return phase < int(std::size(backward)) ? backward[phase] : nullptr;
}

size_t flashForwardScratchBytes(int64_t b, int64_t t, int64_t heads) {
  return pieceBytes<float>(b * heads * t);
}

size_t flashBackwardScratchBytes(int64_t b, int64_t t, int64_t c, int64_t heads,
                                 FlashDq dq) {
  return flashForwardScratchBytes(b, t, heads) +
         (dq == FlashDq::SecondKernel ? 0 : pieceBytes<float>(b * t * c));
}

template <typename T>
void flashAttentionForward(cudaStream_t stream, const T *qkv, T *out,
                           float *lse, int64_t b, int64_t t, int64_t c,
                           int64_t heads, FlashTiles tiles,
                           FlashPhaseCounters *phases) {
  if (b <= 0 || t <= 0 || c <= 0)
    return;
  int d = static_cast<int>(c / heads);
  float scaleLog2 =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))) * kLog2e;
  int warpTiles = rowTiles(d, tiles);
  dim3 grid(static_cast<unsigned>(b * heads * blocksOf(t, kBlock * warpTiles)));
  size_t shared = forwardSharedBytes<T>(d, warpTiles);
  withHeadSize(d, [&](auto size) {
    constexpr int D = decltype(size)::value;
    // Two row tiles compiled only where rowTiles takes them.
    constexpr int kTwo = rowTiles(D, FlashTiles::Two);
    auto kernel =
        phases ? forwardKernel<T, D, 1, true> : forwardKernel<T, D, 1, false>;
    if (warpTiles == 2)
      kernel = phases ? forwardKernel<T, D, kTwo, true>
                      : forwardKernel<T, D, kTwo, false>;
    allowShared(kernel, shared);
    kernel<<<grid, kThreads, shared, stream>>>(
        qkv, out, lse, t, c, static_cast<int>(heads), scaleLog2, phases);
    SHARDC_CUDA_CHECK_LAUNCH();
  });
}

template <typename T>
void flashAttentionBackward(cudaStream_t stream, const T *dy, const T *qkv,
                            const T *out, const float *lse, T *dqkv,
                            void *scratch, int64_t b, int64_t t, int64_t c,
                            int64_t heads, FlashBackwardPlan plan,
                            FlashPhaseCounters *phases) {
  if (b <= 0 || t <= 0 || c <= 0)
    return;
  int d = static_cast<int>(c / heads);
  char *cursor = static_cast<char *>(scratch);
  auto *delta = reinterpret_cast<float *>(cursor);
  cursor += flashForwardScratchBytes(b, t, heads);
  auto *dqSum = reinterpret_cast<float *>(cursor);

  int64_t rows = b * heads * t;
  constexpr int kDeltaRows = kThreads / kDeltaLanes;
  deltaKernel<T><<<static_cast<unsigned>((rows + kDeltaRows - 1) / kDeltaRows),
                   kThreads, 0, stream>>>(dy, out, delta, rows, t, c,
                                          static_cast<int>(heads), d,
                                          isChunkAligned(out));
  SHARDC_CUDA_CHECK_LAUNCH();
  FlashDq dq = plan.dq;
  bool secondKernel = dq == FlashDq::SecondKernel;
  if (!secondKernel)
    SHARDC_CUDA_CHECK(cudaMemsetAsync(
        dqSum, 0, static_cast<size_t>(b * t * c) * sizeof(float), stream));
  float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  int keyTiles = rowTiles(d, plan.tiles);
  dim3 grid(static_cast<unsigned>(b * heads * blocksOf(t))); // dqKernel's
  dim3 keyGrid(
      static_cast<unsigned>(b * heads * blocksOf(t, kBlock * keyTiles)));
  withHeadSize(d, [&](auto size) {
    constexpr int D = decltype(size)::value;
    // The main kernel for dq mode Q (a std::integral_constant), its steps
    // in the parts plan says (compiled in halves only where Fitted or two
    // row tiles take them, and with two row tiles only where rowTiles
    // takes them).
    auto launch = [&](auto mode) {
      constexpr FlashDq Q = decltype(mode)::value;
      constexpr int kFitted = backwardParts<T>(D, Q, FlashSteps::Fitted);
      constexpr int kTwo = rowTiles(D, FlashTiles::Two);
      constexpr int kTwoParts = backwardParts<T>(
          D, FlashBackwardPlan{Q, FlashSteps::Fitted, FlashTiles::Two});
      int parts = backwardParts<T>(D, {Q, plan.steps, plan.tiles});
      auto kernel = phases ? backwardKernel<T, D, Q, 1, 1, true>
                           : backwardKernel<T, D, Q, 1, 1, false>;
      if (keyTiles == 2)
        kernel = phases ? backwardKernel<T, D, Q, kTwoParts, kTwo, true>
                        : backwardKernel<T, D, Q, kTwoParts, kTwo, false>;
      else if (parts == 2)
        kernel = phases ? backwardKernel<T, D, Q, kFitted, 1, true>
                        : backwardKernel<T, D, Q, kFitted, 1, false>;
      size_t shared = backwardKernelSharedBytes<T>(D, Q, parts, keyTiles);
      allowShared(kernel, shared);
      kernel<<<keyGrid, kThreads, shared, stream>>>(
          qkv, dy, lse, delta, dqSum, dqkv, t, c, static_cast<int>(heads),
          scale, phases);
      SHARDC_CUDA_CHECK_LAUNCH();
    };
    using Atomics = std::integral_constant<FlashDq, FlashDq::Atomics>;
    using Bulk = std::integral_constant<FlashDq, FlashDq::BulkReduce>;
    using Second = std::integral_constant<FlashDq, FlashDq::SecondKernel>;
    if (dq == FlashDq::Atomics)
      return launch(Atomics());
    if (dq == FlashDq::BulkReduce)
      return launch(Bulk());
    launch(Second());
    size_t dqShared = dqSharedBytes<T>(d);
    allowShared(dqKernel<T, D>, dqShared);
    dqKernel<T, D><<<grid, kThreads, dqShared, stream>>>(
        qkv, dy, lse, delta, dqkv, t, c, static_cast<int>(heads), scale);
    SHARDC_CUDA_CHECK_LAUNCH();
  });
  if (secondKernel)
    return;
  int64_t chunks = b * t * c / Chunk<T>::kSize;
  unsigned blocks = static_cast<unsigned>(
      std::min<int64_t>((chunks + 255) / 256, int64_t(1) << 16));
  storeDqKernel<T><<<blocks, 256, 0, stream>>>(dqSum, dqkv, b * t * c, c, scale,
                                               isChunkAligned(dqkv));
  SHARDC_CUDA_CHECK_LAUNCH();
}

// The two stored types.
template bool flashAttentionTakes<bf16>(int64_t, const bf16 *, const bf16 *,
                                        FlashBackwardPlan);
template bool flashAttentionTakes<float>(int64_t, const float *, const float *,
                                         FlashBackwardPlan);
template void flashAttentionForward<bf16>(cudaStream_t, const bf16 *, bf16 *,
                                          float *, int64_t, int64_t, int64_t,
                                          int64_t, FlashTiles,
                                          FlashPhaseCounters *);
template void flashAttentionForward<float>(cudaStream_t, const float *, float *,
                                           float *, int64_t, int64_t, int64_t,
                                           int64_t, FlashTiles,
                                           FlashPhaseCounters *);
template void flashAttentionBackward<bf16>(cudaStream_t, const bf16 *,
                                           const bf16 *, const bf16 *,
                                           const float *, bf16 *, void *,
                                           int64_t, int64_t, int64_t, int64_t,
                                           FlashBackwardPlan,
                                           FlashPhaseCounters *);
template void flashAttentionBackward<float>(cudaStream_t, const float *,
                                            const float *, const float *,
                                            const float *, float *, void *,
                                            int64_t, int64_t, int64_t, int64_t,
                                            FlashBackwardPlan,
                                            FlashPhaseCounters *);

} // namespace shardc::rt::cuda
