//===- LayerNorm.cu - layernorm, its gradient and column sums -------------===//
//
// layernorm and its gradient: one warp per row, fp32 accumulation; rows
// of whole 16-byte chunks up to 8 a lane (2048 bf16, 1024 f32) are held
// in the warp's registers, each tensor read once (in 16-byte loads where
// aligned), other rows read element by element; dweight and dbias are
// column sums over rows, in two deterministic stages, the first in the
// gradient's own pass where a block's shared memory holds its warps'
// sums (c up to 3,632 on an H200), else a pass of its own; sum_to is such
// a column sum. add_layernorm is the layernorm kernel with a second input:
// y is layernorm's of the stored (for bf16: rounded) sum; layernorm_grad_add
// is the gradient kernel adding an addend to the gradient as layernorm_grad
// stores it. For bf16, the rows are read and written in place; dweight,
// dbias and sum_to's sums are f32, rounded from the second workspace.
//
//===----------------------------------------------------------------------===//

#include "Elementwise.cuh"
#include "KernelUtils.cuh"

using namespace shardc::rt::cuda;

namespace {

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
  char *cursor = static_cast<char *>(scratch(
      k, 2 * pieceBytes<float>(rows) + 2 * pieceBytes<float>(partialCount)));
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
  columnSums(k, SumRows<T>{x, inner}, outer, inner, plan, y, nullptr, partials,
             nullptr);
}

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

void shardc_rt_cuda_layernorm_f32(shardc_rt_cuda_kernels *k, const float *x,
                                  const float *w, const float *b, float *y,
                                  int64_t rows, int64_t c, double eps) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "layernorm_f32");
  layerNorm(k, x, static_cast<const float *>(nullptr), w, b,
            static_cast<float *>(nullptr), y, rows, c, eps);
}

void shardc_rt_cuda_add_layernorm_f32(shardc_rt_cuda_kernels *k,
                                      const float *lhs, const float *rhs,
                                      const float *w, const float *b,
                                      float *sum, float *y, int64_t rows,
                                      int64_t c, double eps) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "add_layernorm_f32");
  layerNorm(k, lhs, rhs, w, b, sum, y, rows, c, eps);
}

void shardc_rt_cuda_sum_to_f32(shardc_rt_cuda_kernels *k, const float *x,
                               float *y, int64_t outer, int64_t inner) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "sum_to_f32");
  sumTo(k, x, y, outer, inner);
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

void shardc_rt_cuda_layernorm_grad_add_f32(shardc_rt_cuda_kernels *k,
                                           const float *dy, const float *x,
                                           const float *w, const float *addend,
                                           float *dx, float *dw, float *db,
                                           int64_t rows, int64_t c,
                                           double eps) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "layernorm_grad_add_f32");
  layerNormGrad(k, dy, x, w, addend, dx, dw, db, rows, c, eps);
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

void shardc_rt_cuda_layernorm_grad_bf16(shardc_rt_cuda_kernels *k,
                                        const shardc_rt_bf16 *dy,
                                        const shardc_rt_bf16 *x,
                                        const shardc_rt_bf16 *w,
                                        shardc_rt_bf16 *dx, shardc_rt_bf16 *dw,
                                        shardc_rt_bf16 *db, int64_t rows,
                                        int64_t c, double eps) {
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

void shardc_rt_cuda_sum_to_bf16(shardc_rt_cuda_kernels *k,
                                const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                                int64_t outer, int64_t inner) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "sum_to_bf16");
  sumToBf16(k, x, y, outer, inner);
}

} // extern "C"
