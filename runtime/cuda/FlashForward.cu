//===- FlashForward.cu - The flash forward on tensor cores ----------------===//
//
// Causal attention's forward, 64 queries a block (128 with two row tiles a
// warp), and its launch: FlashKernels.cuh describes the schedule.
//
//===----------------------------------------------------------------------===//

#include "FlashKernels.cuh"

#include "Workspace.h"

#include <cmath>
#include <iterator>

namespace shardc::rt::cuda {
using namespace flash;
namespace {

/// Softmaxes run in base 2: exp(x scale - m) = exp2(x scale log2(e) - m'),
/// the scale and the row's max in one fma and exp2 one instruction
/// (exp2Approx), as FlashAttention-2 does; log-sum-exps are stored in
/// natural units (kLog2e: Ptx.h).
constexpr float kLn2 = 0.6931471805599453f;

/// Whether the forward loads its bf16 fragments by ldmatrix (Tiles<bf16>):
/// on an H200 (GPT-2 small, bf16, batch 128, 12 layers) that took it from
/// 28.6 to 27.1 ms (kBackwardByMatrix: FlashBackward.cu).
constexpr bool kForwardByMatrix = true;

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

__device__ float quadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

__device__ float quadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
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

} // namespace

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

// The two stored types.
template void flashAttentionForward<bf16>(cudaStream_t, const bf16 *, bf16 *,
                                          float *, int64_t, int64_t, int64_t,
                                          int64_t, FlashTiles,
                                          FlashPhaseCounters *);
template void flashAttentionForward<float>(cudaStream_t, const float *, float *,
                                           float *, int64_t, int64_t, int64_t,
                                           int64_t, FlashTiles,
                                           FlashPhaseCounters *);

} // namespace shardc::rt::cuda
