//===- Embedding.cu - Embedding lookups and their gradient ----------------===//
//
// embedding copies a row per id (16-byte chunks where aligned);
// embedding_grad sorts the positions by id (a stable counting sort), then
// sums each id's dy rows in position order, as the CPU kernel does: no
// atomics, so deterministic; bf16's sums are f32, rounded from the second
// workspace. Both check their ids first (checkIds: CrossEntropy.cu checks
// its targets by it too).
//
//===----------------------------------------------------------------------===//

#include "Elementwise.cuh"
#include "KernelUtils.cuh"

using namespace shardc::rt::cuda;

namespace shardc::rt::cuda {

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

template void checkIds<float>(Kernels *, const int32_t *, int64_t, int64_t,
                              CheckedOp);
template void checkIds<__nv_bfloat16>(Kernels *, const int32_t *, int64_t,
                                      int64_t, CheckedOp);

} // namespace shardc::rt::cuda

namespace {

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

} // namespace

extern "C" {

void shardc_rt_cuda_embedding_f32(shardc_rt_cuda_kernels *k, const int32_t *ids,
                                  const float *table, float *out, int64_t n,
                                  int64_t v, int64_t c) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "embedding_f32");
  embedding(k, ids, table, out, n, v, c);
}

void shardc_rt_cuda_embedding_grad_f32(shardc_rt_cuda_kernels *k,
                                       const float *dy, const int32_t *ids,
                                       float *dtable, int64_t n, int64_t v,
                                       int64_t c) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "embedding_grad_f32");
  embeddingGrad(k, dy, ids, dtable, n, v, c);
}

void shardc_rt_cuda_embedding_bf16(shardc_rt_cuda_kernels *k,
                                   const int32_t *ids,
                                   const shardc_rt_bf16 *table,
                                   shardc_rt_bf16 *out, int64_t n, int64_t v,
                                   int64_t c) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "embedding_bf16");
  embedding(k, ids, bf(table), bf(out), n, v, c);
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
