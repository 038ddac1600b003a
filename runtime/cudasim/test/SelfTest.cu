//===- SelfTest.cu - What cudasim computes and what it reports ------------===//
//
// `shardc-cudasim-selftest ok` runs kernels whose results only a faithful
// simulation gets right (block reductions through shuffles and barriers,
// each shuffle form, wmma tiles accumulated in shared memory by a warp,
// PTX's mma.sync on fragments laid out as the PTX ISA lays them, cp.async
// landing at its waits, dynamic shared memory over 48 KiB, static shared
// memory fresh in each block, a __syncwarp after some lanes returned,
// atomics across blocks, fresh device memory reading as NaN, a .cuh
// header's kernels) and prints one line per check. Every other case is a
// bug a GPU may not report; cudasim must name it and exit 1
// (test/runtime/cudasim.test).
//
//===----------------------------------------------------------------------===//

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include "Ptx.h"
#include "SelfTest.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace nvcuda;

namespace {

int failures = 0;

void check(bool ok, const char *what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  failures += !ok;
}

template <typename T> T *deviceCopy(const std::vector<T> &host) {
  T *p = nullptr;
  cudaMalloc(&p, host.size() * sizeof(T));
  cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  return p;
}

template <typename T> std::vector<T> hostCopy(const T *p, size_t n) {
  std::vector<T> host(n);
  cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
  return host;
}

//===----------------------------------------------------------------------===//
// Kernels that must compute the right thing
//===----------------------------------------------------------------------===//

/// sums[block] = the sum of the block's 256 values: warp shuffles, then a
/// barrier and the warps' partial sums in shared memory.
__global__ void blockSumKernel(const float *x, float *sums) {
  __shared__ float partial[8];
  float v = x[blockIdx.x * blockDim.x + threadIdx.x];
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0)
    partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0;
    for (int w = 0; w < 8; ++w)
      total += partial[w];
    sums[blockIdx.x] = total;
  }
}

/// Each lane's results of the other shuffle forms, on value = lane.
__global__ void shuffleKernel(int *down, int *up, int *index16) {
  int lane = threadIdx.x;
  down[lane] = __shfl_down_sync(0xffffffffu, lane, 3);
  up[lane] = __shfl_up_sync(0xffffffffu, lane, 2);
  index16[lane] = __shfl_sync(0xffffffffu, lane, 5, 16);
}

/// c[16 x 16] += a[16 x 16] b[16 x 16] (bf16), through a tile in shared
/// memory that one warp loads, multiplies into and stores, twice.
__global__ void wmmaKernel(const __nv_bfloat16 *a, const __nv_bfloat16 *b,
                           float *c) {
  __shared__ float tile[256];
  for (int i = threadIdx.x; i < 256; i += 32)
    tile[i] = c[i];
  __syncwarp();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  for (int pass = 0; pass < 2; ++pass) {
    wmma::load_matrix_sync(acc, tile, 16, wmma::mem_row_major);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(tile, acc, 16, wmma::mem_row_major);
    __syncwarp();
  }
  for (int i = threadIdx.x; i < 256; i += 32)
    c[i] = tile[i];
}

/// c16 (16 x 8) += 2 a16 b16 (bf16, m16n8k16) and c8 (16 x 8) += a8 b8
/// (TF32, m16n8k8), all row-major, each lane loading and storing the
/// elements Ptx.h's table (the PTX ISA's figures) assigns it.
__global__ void mmaSyncKernel(const __nv_bfloat16 *a16,
                              const __nv_bfloat16 *b16, const float *a8,
                              const float *b8, float *c16, float *c8) {
  using namespace shardc::rt::cuda;
  int g = threadIdx.x / 4, q = threadIdx.x % 4;
  uint32_t a[4], b[2];
  float c[4];
  for (int i = 0; i < 4; ++i)
    a[i] = packBf16(a16[(g + 8 * (i % 2)) * 16 + 2 * q + 8 * (i / 2)],
                    a16[(g + 8 * (i % 2)) * 16 + 2 * q + 1 + 8 * (i / 2)]);
  for (int i = 0; i < 2; ++i)
    b[i] = packBf16(b16[(2 * q + 8 * i) * 8 + g],
                    b16[(2 * q + 1 + 8 * i) * 8 + g]);
  for (int i = 0; i < 4; ++i)
    c[i] = c16[(g + 8 * (i / 2)) * 8 + 2 * q + i % 2];
  mmaBf16(c, a, b);
  mmaBf16(c, a, b);
  for (int i = 0; i < 4; ++i)
    c16[(g + 8 * (i / 2)) * 8 + 2 * q + i % 2] = c[i];

  for (int i = 0; i < 4; ++i)
    a[i] = toTf32(a8[(g + 8 * (i % 2)) * 8 + q + 4 * (i / 2)]);
  for (int i = 0; i < 2; ++i)
    b[i] = toTf32(b8[(q + 4 * i) * 8 + g]);
  for (int i = 0; i < 4; ++i)
    c[i] = c8[(g + 8 * (i / 2)) * 8 + 2 * q + i % 2];
  mmaTf32(c, a, b);
  for (int i = 0; i < 4; ++i)
    c8[(g + 8 * (i / 2)) * 8 + 2 * q + i % 2] = c[i];
}

/// Each lane copies by cp.async x[4 lane, 4 lane + 4) to its 8 floats of
/// shared memory in one group, then the first 2 of them with 2 zeros after
/// in a second: out[3 lane] = 1 where neither had landed before the waits
/// (the floats still fresh NaN) and the first wait landed the first group
/// alone; after the last wait and a barrier, out[3 lane + 1] and
/// out[3 lane + 2] are the next lane's x[4 next + 3] and x[4 next + 1] + 0
/// + 0.
__global__ void copyAsyncKernel(const float *x, float *out) {
  using namespace shardc::rt::cuda;
  extern __shared__ __align__(16) float lanes[];
  int lane = threadIdx.x;
  float *mine = lanes + 8 * lane;
  copyAsync<16>(mine, x + 4 * lane, 16);
  copyAsyncCommit();
  copyAsync<16>(mine + 4, x + 4 * lane, 8);
  copyAsyncCommit();
  bool before = std::isnan(mine[0]) && std::isnan(mine[4]);
  copyAsyncWait<1>();
  bool firstGroup = mine[3] == x[4 * lane + 3] && std::isnan(mine[4]);
  copyAsyncWait<0>();
  __syncthreads();
  const float *next = lanes + 8 * ((lane + 1) % 32);
  out[3 * lane] = before && firstGroup ? 1.0f : 0.0f;
  out[3 * lane + 1] = next[3];
  out[3 * lane + 2] = next[5] + next[6] + next[7];
}

/// out[block] = 1 where the block's 64 KiB of dynamic shared memory all
/// read as NaN before it wrote them (fresh per block), then its sum.
__global__ void bigSharedKernel(float *out) {
  extern __shared__ float big[];
  int n = (64 << 10) / sizeof(float);
  bool fresh = true;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    fresh = fresh && std::isnan(big[i]);
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    big[i] = 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0;
    for (int i = 0; i < n; ++i)
      sum += big[i];
    out[2 * blockIdx.x] = fresh ? 1.0f : 0.0f;
    out[2 * blockIdx.x + 1] = sum;
  }
}

/// out[block] = whether the block's static shared array read as NaN before
/// the block wrote it (the previous block left its values there).
__global__ void staticSharedKernel(float *out) {
  __shared__ float cache[64];
  bool fresh = std::isnan(cache[threadIdx.x]);
  __syncthreads();
  cache[threadIdx.x] = 1.0f;
  __syncthreads();
  if (threadIdx.x == 0)
    out[blockIdx.x] = fresh ? 1.0f : 0.0f;
}

/// Lanes 16 and up return; the others still meet at __syncwarp.
__global__ void exitedLanesKernel(int *out) {
  if (threadIdx.x >= 16)
    return;
  out[threadIdx.x] = 1;
  __syncwarp(); // the full mask: lanes 16 to 31 have returned
  out[16 + threadIdx.x] = out[threadIdx.x] + out[(threadIdx.x + 1) % 16];
}

__global__ void atomicKernel(unsigned long long *count, int *firstOdd) {
  atomicAdd(count, 1ull);
  int id = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (id % 2)
    atomicMin(firstOdd, id);
}

__global__ void readKernel(const float *x, int *isNan) {
  *isNan = std::isnan(x[threadIdx.x]) ? 1 : 0;
}

int runChecks() {
  std::vector<float> x(3 * 256);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(i % 7) - 3.0f;
  float *dx = deviceCopy(x), *dsums = nullptr;
  cudaMalloc(&dsums, 3 * sizeof(float));
  blockSumKernel<<<3, 256>>>(dx, dsums);
  std::vector<float> sums = hostCopy(dsums, 3);
  bool right = true;
  for (int b = 0; b < 3; ++b) {
    float want = 0;
    for (int i = 0; i < 256; ++i)
      want += x[b * 256 + i];
    right = right && sums[b] == want;
  }
  check(right, "block sums through shuffles, a barrier and shared memory");

  // A header's template kernel (SelfTest.cuh), launched there and here
  // with its arguments deduced.
  int *ix = nullptr, *isums = nullptr;
  cudaMalloc(&ix, 128 * sizeof(int));
  cudaMalloc(&isums, 4 * sizeof(int));
  std::vector<int> ones(128, 1);
  cudaMemcpy(ix, ones.data(), 128 * sizeof(int), cudaMemcpyHostToDevice);
  headerSum(ix, isums, 2);
  headerSumKernel<<<2, 64>>>(ix, isums + 2);
  std::vector<int> isum = hostCopy(isums, 4);
  check(isum == std::vector<int>{64, 64, 64, 64},
        "a .cuh header's kernel, launched in the header and in the .cu file");

  int *down = nullptr, *up = nullptr, *index16 = nullptr;
  cudaMalloc(&down, 32 * sizeof(int));
  cudaMalloc(&up, 32 * sizeof(int));
  cudaMalloc(&index16, 32 * sizeof(int));
  shuffleKernel<<<1, 32>>>(down, up, index16);
  std::vector<int> d = hostCopy(down, 32), u = hostCopy(up, 32),
                   i16 = hostCopy(index16, 32);
  right = true;
  for (int lane = 0; lane < 32; ++lane)
    right = right && d[lane] == (lane + 3 < 32 ? lane + 3 : lane) &&
            u[lane] == (lane >= 2 ? lane - 2 : lane) &&
            i16[lane] == (lane / 16) * 16 + 5;
  check(right, "shfl_down, shfl_up and shfl with width 16");

  std::vector<__nv_bfloat16> a(256), b(256);
  std::vector<float> c(256);
  for (int i = 0; i < 256; ++i) {
    a[i] = __float2bfloat16(static_cast<float>(i % 5) - 2.0f);
    b[i] = __float2bfloat16(static_cast<float>(i % 3) - 1.0f);
    c[i] = static_cast<float>(i % 4);
  }
  __nv_bfloat16 *da = deviceCopy(a), *db = deviceCopy(b);
  float *dc = deviceCopy(c);
  wmmaKernel<<<1, 32>>>(da, db, dc);
  std::vector<float> got = hostCopy(dc, 256);
  right = true;
  for (int r = 0; r < 16; ++r)
    for (int col = 0; col < 16; ++col) {
      float product = 0;
      for (int k = 0; k < 16; ++k) // b is column-major
        product +=
            __bfloat162float(a[r * 16 + k]) * __bfloat162float(b[col * 16 + k]);
      right = right && got[r * 16 + col] == c[r * 16 + col] + 2 * product;
    }
  check(right, "wmma: a warp's tile loaded, multiplied into and stored twice");

  std::vector<__nv_bfloat16> a16(256), b16(128);
  std::vector<float> a8(128), b8(64), c16(128), c8(128);
  for (int i = 0; i < 256; ++i)
    a16[i] = __float2bfloat16(static_cast<float>(i % 5) - 2.0f);
  for (int i = 0; i < 128; ++i) {
    b16[i] = __float2bfloat16(static_cast<float>(i % 7) - 3.0f);
    a8[i] = static_cast<float>(i % 3) - 1.0f;
    c16[i] = static_cast<float>(i % 4);
    c8[i] = static_cast<float>(i % 6);
  }
  for (int i = 0; i < 64; ++i)
    b8[i] = static_cast<float>(i % 11) - 5.0f;
  float *dc16 = deviceCopy(c16), *dc8 = deviceCopy(c8);
  mmaSyncKernel<<<1, 32>>>(deviceCopy(a16), deviceCopy(b16), deviceCopy(a8),
                           deviceCopy(b8), dc16, dc8);
  std::vector<float> got16 = hostCopy(dc16, 128), got8 = hostCopy(dc8, 128);
  right = true;
  for (int r = 0; r < 16; ++r)
    for (int col = 0; col < 8; ++col) {
      float p16 = 0, p8 = 0;
      for (int k = 0; k < 16; ++k)
        p16 += __bfloat162float(a16[r * 16 + k]) *
               __bfloat162float(b16[k * 8 + col]);
      for (int k = 0; k < 8; ++k)
        p8 += a8[r * 8 + k] * b8[k * 8 + col];
      right = right && got16[r * 8 + col] == c16[r * 8 + col] + 2 * p16 &&
              got8[r * 8 + col] == c8[r * 8 + col] + p8;
    }
  check(right, "mma.sync: m16n8k16 bf16 twice and m16n8k8 tf32, each lane's "
               "fragments as the PTX ISA lays them out");

  std::vector<float> source(128);
  for (int i = 0; i < 128; ++i)
    source[i] = static_cast<float>(i + 1);
  float *copied = nullptr;
  cudaMalloc(&copied, 96 * sizeof(float));
  copyAsyncKernel<<<1, 32, 32 * 8 * sizeof(float)>>>(deviceCopy(source),
                                                     copied);
  std::vector<float> landed = hostCopy(copied, 96);
  right = true;
  for (int lane = 0; lane < 32; ++lane) {
    int next = (lane + 1) % 32;
    right = right && landed[3 * lane] == 1.0f &&
            landed[3 * lane + 1] == source[4 * next + 3] &&
            landed[3 * lane + 2] == source[4 * next + 1];
  }
  check(right, "cp.async: groups land at their waits, zeros past the bytes "
               "read, seen by other lanes after a barrier");

  float *dout = nullptr;
  cudaMalloc(&dout, 4 * sizeof(float));
  cudaFuncSetAttribute(bigSharedKernel,
                       cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10);
  bigSharedKernel<<<2, 128, 64 << 10>>>(dout);
  std::vector<float> big = hostCopy(dout, 4);
  check(cudaGetLastError() == cudaSuccess && big[0] == 1 && big[2] == 1 &&
            big[1] == 16384 && big[3] == 16384,
        "64 KiB of dynamic shared memory, fresh (NaN) in each block");

  unsigned long long *count = nullptr;
  int *firstOdd = nullptr;
  cudaMalloc(&count, sizeof(unsigned long long));
  cudaMalloc(&firstOdd, sizeof(int));
  cudaMemset(count, 0, sizeof(unsigned long long));
  int big32 = 1 << 30;
  cudaMemcpy(firstOdd, &big32, sizeof(int), cudaMemcpyHostToDevice);
  atomicKernel<<<5, 64>>>(count, firstOdd);
  check(hostCopy(count, 1)[0] == 320 && hostCopy(firstOdd, 1)[0] == 1,
        "atomicAdd and atomicMin across blocks");

  float *freshShared = nullptr;
  cudaMalloc(&freshShared, 3 * sizeof(float));
  staticSharedKernel<<<3, 64>>>(freshShared);
  std::vector<float> blocks = hostCopy(freshShared, 3);
  check(blocks[0] == 1 && blocks[1] == 1 && blocks[2] == 1,
        "static shared memory, fresh (NaN) in each block");

  int *lanes = nullptr;
  cudaMalloc(&lanes, 32 * sizeof(int));
  exitedLanesKernel<<<1, 32>>>(lanes);
  std::vector<int> met = hostCopy(lanes, 32);
  check(std::count(met.begin() + 16, met.end(), 2) == 16,
        "__syncwarp among the lanes that have not returned");

  float *fresh = nullptr;
  int *isNan = nullptr;
  cudaMalloc(&fresh, sizeof(float));
  cudaMalloc(&isNan, sizeof(int));
  readKernel<<<1, 1>>>(fresh, isNan);
  check(hostCopy(isNan, 1)[0] == 1, "fresh device memory reads as NaN");

  std::printf("selftest: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}

//===----------------------------------------------------------------------===//
// Bugs cudasim must report
//===----------------------------------------------------------------------===//

__global__ void divergentBarrierKernel(float *x) {
  if (threadIdx.x < 32)
    return;
  __syncthreads();
  x[threadIdx.x] = 1.0f;
}

/// Lane 4 reads lane 5, which has returned.
__global__ void exitedLaneKernel(float *x) {
  if (threadIdx.x == 5)
    return;
  x[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

/// Each thread reads its right neighbour's write with no barrier between:
/// in one of two blocks (threads run in opposite orders) the neighbour has
/// not written yet.
__global__ void missingBarrierKernel(int *out) {
  __shared__ int value[32];
  value[threadIdx.x] = static_cast<int>(threadIdx.x);
  out[blockIdx.x * 32 + threadIdx.x] = value[(threadIdx.x + 1) % 32];
}

__global__ void sharedOverrunKernel() {
  extern __shared__ float dynamic[];
  dynamic[threadIdx.x + 1024] = 1.0f; // 4 KiB given: the next page
}

__global__ void misalignedTileKernel(const float *x, float *y) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32,
                 wmma::row_major>
      a;
  wmma::load_matrix_sync(a, x + 1, 8);
  y[threadIdx.x] = a.x[0];
}

/// Lane 31 returns before the warp's mma.sync, which needs every lane.
__global__ void mmaExitedLaneKernel(float *x) {
  if (threadIdx.x == 31)
    return;
  uint32_t a[4] = {}, b[2] = {};
  float c[4] = {};
  shardc::rt::cuda::mmaBf16(c, a, b);
  x[threadIdx.x] = c[0];
}

/// A 16-byte cp.async to a shared address 4 bytes past a 16-byte boundary.
__global__ void misalignedCopyKernel(const float *x) {
  extern __shared__ __align__(16) float tile[];
  shardc::rt::cuda::copyAsync<16>(tile + 1, x, 16);
  shardc::rt::cuda::copyAsyncCommit();
  shardc::rt::cuda::copyAsyncWait<0>();
}

__global__ void deadlockKernel(float *x) {
  if (threadIdx.x == 0)
    __syncthreads();
  else if (threadIdx.x < 32)
    __syncwarp();
  else
    __syncthreads();
  x[threadIdx.x] = 1.0f;
}

__global__ void writeKernel(float *x, int at) { x[at] = 1.0f; }

__global__ void idleKernel() {}

} // namespace

int main(int argc, char **argv) {
  std::string what = argc > 1 ? argv[1] : "";
  if (what == "ok")
    return runChecks();
  float *x = nullptr;
  cudaMalloc(&x, 1000 * sizeof(float));
  if (what == "divergent-barrier")
    divergentBarrierKernel<<<1, 64>>>(x);
  else if (what == "exited-lane")
    exitedLaneKernel<<<1, 32>>>(x);
  else if (what == "mma-exited-lane")
    mmaExitedLaneKernel<<<1, 32>>>(x);
  else if (what == "deadlock")
    deadlockKernel<<<1, 64>>>(x);
  else if (what == "out-of-bounds")
    writeKernel<<<1, 1>>>(x, 1024); // past the 4000 bytes, rounded to 4096
  else if (what == "use-after-free") {
    cudaFree(x);
    writeKernel<<<1, 1>>>(x, 0);
  } else if (what == "reused-after-free") {
    cudaFree(x);
    float *again = nullptr;
    cudaMalloc(&again, 1000 * sizeof(float)); // not at x: x stays freed
    writeKernel<<<1, 1>>>(x, 0);
  } else if (what == "slack-overrun") {
    writeKernel<<<1, 1>>>(x, 1010); // within the page: found at the free
    cudaFree(x);
  } else if (what == "missing-barrier") {
    int *out = nullptr;
    cudaMalloc(&out, 64 * sizeof(int));
    missingBarrierKernel<<<2, 32>>>(out);
    std::vector<int> got = hostCopy(out, 64);
    for (int i = 0; i < 64; ++i)
      if (got[i] != (i % 32 + 1) % 32) {
        std::printf("missing-barrier: block %d thread %d read %d\n", i / 32,
                    i % 32, got[i]);
        return 1;
      }
  } else if (what == "shared-overrun") {
    sharedOverrunKernel<<<1, 32, 4096>>>();
  } else if (what == "misaligned-tile") {
    misalignedTileKernel<<<1, 32>>>(x, x + 512);
  } else if (what == "misaligned-copy") {
    misalignedCopyKernel<<<1, 32, 256>>>(x);
  } else if (what == "copy-past-the-end") {
    std::vector<float> host(1001);
    cudaMemcpy(x, host.data(), host.size() * sizeof(float),
               cudaMemcpyHostToDevice);
  } else if (what == "late-copies") {
    // Under CUDASIM_STREAMS=lazy the first stream's copies to and from the
    // host run at its next synchronisation: the host sees a copy's result
    // only then, and the copy reads its host source only then.
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    float *pinned = nullptr;
    cudaMallocHost(&pinned, 2 * sizeof(float));
    pinned[0] = 0.0f;
    pinned[1] = 2.0f;
    writeKernel<<<1, 1, 0, stream>>>(x, 0);
    cudaMemcpyAsync(pinned, x, sizeof(float), cudaMemcpyDeviceToHost, stream);
    cudaMemcpyAsync(x + 1, pinned + 1, sizeof(float), cudaMemcpyHostToDevice,
                    stream);
    float before = pinned[0];
    pinned[1] = 3.0f;
    cudaStreamSynchronize(stream);
    std::vector<float> device = hostCopy(x, 2);
    std::printf("late-copies: to the host %g before the synchronisation, %g "
                "after; from the host %g\n",
                before, pinned[0], device[1]);
    return 0;
  } else if (what == "shared-limit" || what == "big-block") {
    if (what == "shared-limit")
      idleKernel<<<1, 32, 64 << 10>>>();
    else
      idleKernel<<<1, 2048>>>();
    cudaError_t error = cudaGetLastError();
    std::printf("launch: %s\n", cudaGetErrorName(error));
    return error == cudaSuccess ? 0 : 1;
  } else {
    std::fprintf(stderr, "usage: shardc-cudasim-selftest ok|divergent-barrier|"
                         "exited-lane|mma-exited-lane|deadlock|out-of-bounds|"
                         "use-after-free|"
                         "reused-after-free|slack-overrun|missing-barrier|"
                         "shared-overrun|misaligned-tile|misaligned-copy|"
                         "copy-past-the-end|"
                         "late-copies|shared-limit|big-block\n");
    return 2;
  }
  std::printf("selftest: %s was not reported\n", what.c_str());
  return 0;
}
