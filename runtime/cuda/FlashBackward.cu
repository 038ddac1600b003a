//===- FlashBackward.cu - The flash backward on tensor cores --------------===//
//
// Causal attention's backward, 64 keys a block (128 with two row tiles a
// warp), its delta kernel, the deterministic dq's kernel (dqKernel), and
// their launch: FlashKernels.cuh describes the schedule.
//
//===----------------------------------------------------------------------===//

#include "FlashKernels.cuh"

#include "Workspace.h"

#include <cmath>
#include <cstring>

namespace shardc::rt::cuda {
using namespace flash;
namespace {

/// Whether the backward loads its bf16 fragments by ldmatrix (Tiles<bf16>).
/// On an H200 (GPT-2 small, bf16, batch 128, 12 layers) ldmatrix took the
/// backward from 93.7 to 104.7 ms (and the forward from 28.6 to 27.1 ms:
/// kForwardByMatrix, FlashForward.cu). ptxas says why: the backward then
/// took 185 registers a thread, so 2 blocks fit a multiprocessor's 64K
/// where 3 had (165). It now asks for 4 at d = 64, its steps in halves
/// (backwardBlocks): 128 registers with ldmatrix. Not yet timed on a GPU.
constexpr bool kBackwardByMatrix = true;

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
/// (flashAttentionDeclines), out where `aligned`: either way the same sums.
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
/// a 16-byte chunk of T (c a multiple of its elements:
/// flashAttentionDeclines), stored as one where dqkv is chunk aligned
/// (`aligned`).
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

} // namespace

template <typename T>
std::string flashAttentionDeclines(int64_t d, const T *qkv, const T *dy,
                                   FlashBackwardPlan plan) {
  if (d <= 0 || d % 16 != 0 || d > 128)
    return "heads of " + std::to_string(d) +
           " elements: its kernels take multiples of 16 up to 128";
  if (!isChunkAligned(qkv) || !isChunkAligned(dy))
    return "a tensor not 16-byte aligned";
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
  if (bytes > static_cast<size_t>(limit))
    return "heads of " + std::to_string(d) + " elements: its backward needs " +
           std::to_string(bytes) +
           " bytes of shared memory a block, the device has " +
           std::to_string(limit);
  return "";
}

size_t flashBackwardScratchBytes(int64_t b, int64_t t, int64_t c, int64_t heads,
                                 FlashDq dq) {
  return flashForwardScratchBytes(b, t, heads) +
         (dq == FlashDq::SecondKernel ? 0 : pieceBytes<float>(b * t * c));
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
template std::string flashAttentionDeclines<bf16>(int64_t, const bf16 *,
                                                  const bf16 *,
                                                  FlashBackwardPlan);
template std::string flashAttentionDeclines<float>(int64_t, const float *,
                                                   const float *,
                                                   FlashBackwardPlan);
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
