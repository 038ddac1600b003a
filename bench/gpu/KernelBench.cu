//===- KernelBench.cu - The runtime's heaviest bf16 kernels, one by one ---===//
//
// Times the kernels that take most of a bf16 GPT-2 small step (--profile's
// table in bench/RESULTS.md) at that step's shapes, each alone, so that a
// change to one is measured in seconds rather than by a whole step: flash
// attention forward and backward (the deterministic backward, the backward
// with dq by bulk reductions, with its steps whole; both with two row
// tiles a warp), the instrumented kernels with where their warps spend
// their cycles, and cuDNN's fused attention,
// beside them where cuDNN is there and takes the shape), cross entropy with its
// gradient, layernorm_grad_add and add_layernorm, sum_to (a bias gradient), add
// (a residual) and embedding_grad (the token embedding's, of uniform ids and of
// text-like ones), a GEMM of the MLP's shape for scale, and the MLP's weight
// gradient GEMM alone and with its bias gradient fused (matmul_bias_grad:
// against it and sum_to). Each row prints milliseconds per call (cudaEvents
// around `iters` calls after one warm-up) and the floor the H200 allows it:
// FLOPs at its dense bf16 peak for the tensor-core kernels, bytes at its HBM
// bandwidth for the others. bench/gpu/torch_kernels.py times PyTorch's
// counterparts at the same shapes; bench/gpu/run.sh's kernels phase prints
// both.
//
//   shardc-rt-kernel-bench [--batch B] [--seq T] [--channels C]
//                          [--heads H] [--vocab V] [--iters N]
//
// Defaults: GPT-2 small (T 1024, C 768, 12 heads, vocabulary 50257 padded
// to 50304) at batch 16. Inputs are pseudo-random bf16 in [-1, 1) (targets
// in [0, V)), filled on the device.
//
//===----------------------------------------------------------------------===//

#include "shardc_rt/CudaKernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr double kPeakFlops = 989e12; // H200 dense bf16
constexpr double kBandwidth = 4.8e12; // H200 HBM3e, bytes per second

void check(cudaError_t status, const char *call) {
  if (status == cudaSuccess)
    return;
  std::fprintf(stderr, "shardc-rt-kernel-bench: %s: %s\n", call,
               cudaGetErrorString(status));
  std::exit(1);
}

/// A hash of (seed, i).
__device__ uint32_t hashOf(int64_t i, uint32_t seed) {
  uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
  h ^= h >> 15;
  h *= 2246822519u;
  return h ^ (h >> 13);
}

/// p[i] = hashOf(i, seed) as bf16 bits in [-1, 1).
__global__ void fillKernel(shardc_rt_bf16 *p, int64_t n, uint32_t seed) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = hashOf(i, seed);
    float x = static_cast<float>(h >> 8) / 8388608.0f - 1.0f;
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    p[i] = static_cast<shardc_rt_bf16>(bits >> 16);
  }
}

/// targets[i] in [0, v).
__global__ void targetsKernel(int32_t *p, int64_t n, int64_t v) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    p[i] = static_cast<int32_t>((static_cast<uint64_t>(i) * 2654435761u) % v);
}

/// ids[i] in [0, v), distributed as text's tokens roughly are: id k about as
/// frequent as 1 / (k + 1), P(id < k) = log(k + 1) / log(v + 1), so that id
/// 0 takes 6% of a GPT-2 batch (its commonest tokens, ',' and '.', take a
/// few % each).
__global__ void textIdsKernel(int32_t *p, int64_t n, int64_t v) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double u = (hashOf(i, 0) >> 8) / 16777216.0; // [0, 1)
    int64_t id = static_cast<int64_t>(exp(u * log(v + 1.0)) - 1.0);
    p[i] = static_cast<int32_t>(id < v - 1 ? id : v - 1);
  }
}

/// Every buffer allocate made, freed together at the end.
std::vector<void *> allocations;

template <typename T> T *allocate(int64_t count) {
  void *p = nullptr;
  check(cudaMalloc(&p, static_cast<size_t>(count) * sizeof(T)), "cudaMalloc");
  allocations.push_back(p);
  return static_cast<T *>(p);
}

shardc_rt_bf16 *randomBf16(int64_t n, uint32_t seed) {
  shardc_rt_bf16 *p = allocate<shardc_rt_bf16>(n);
  fillKernel<<<1024, 256>>>(p, n, seed);
  check(cudaGetLastError(), "fillKernel");
  return p;
}

int64_t option(int argc, char **argv, const char *name, int64_t fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) {
      char *end = nullptr;
      long long value = std::strtoll(argv[i + 1], &end, 10);
      if (*end != '\0' || value <= 0) {
        std::fprintf(stderr,
                     "shardc-rt-kernel-bench: %s takes a positive integer, "
                     "not '%s'\n",
                     name, argv[i + 1]);
        std::exit(2);
      }
      return value;
    }
  return fallback;
}

/// Milliseconds per call of `call` over `iters` calls, after one.
double msPerCall(cudaStream_t stream, int64_t iters,
                 const std::function<void()> &call) {
  call();
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int64_t i = 0; i < iters; ++i)
    call();
  check(cudaEventRecord(stop, stream), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(stop), "cudaEventDestroy");
  return ms / static_cast<double>(iters);
}

/// "# flash phases: KERNEL: N warp steps, C cycles a warp step: PHASE
/// S%, ..." for each flash kernel that `k`'s phase counters counted.
void printFlashPhases(shardc_rt_cuda_kernels *k, const char *variant = "") {
  std::vector<shardc_rt_flash_phase> phases(32);
  int32_t count = shardc_rt_cuda_flash_phases(
      k, phases.data(), static_cast<int32_t>(phases.size()));
  phases.resize(std::min<size_t>(count, phases.size()));
  for (const char *kernel : {"attention", "attention_grad"}) {
    uint64_t total = 0, steps = 0;
    for (const shardc_rt_flash_phase &p : phases)
      if (std::strcmp(p.kernel, kernel) == 0) {
        total += p.cycles;
        steps = p.warpSteps;
      }
    if (steps == 0 || total == 0)
      continue;
    std::printf("# flash phases: %s%s: %llu warp steps, %.0f cycles a warp "
                "step:",
                kernel, variant, static_cast<unsigned long long>(steps),
                static_cast<double>(total) / steps);
    const char *separator = " ";
    for (const shardc_rt_flash_phase &p : phases)
      if (std::strcmp(p.kernel, kernel) == 0) {
        std::printf("%s%s %.1f%%", separator, p.phase,
                    100.0 * p.cycles / total);
        separator = ", ";
      }
    std::printf("\n");
  }
}

void row(const char *kernel, const std::string &shape, double ms,
         double floorMs, const char *floorKind) {
  std::printf("%-30s %-26s %10.3f %10.3f %6.1f%%  %s\n", kernel, shape.c_str(),
              ms, floorMs, 100.0 * floorMs / ms, floorKind);
}

} // namespace

int main(int argc, char **argv) {
  int64_t b = option(argc, argv, "--batch", 16);
  int64_t t = option(argc, argv, "--seq", 1024);
  int64_t c = option(argc, argv, "--channels", 768);
  int64_t heads = option(argc, argv, "--heads", 12);
  int64_t vocab = option(argc, argv, "--vocab", 50257);
  int64_t iters = option(argc, argv, "--iters", 10);
  if (c % heads != 0) {
    std::fprintf(stderr,
                 "shardc-rt-kernel-bench: --heads %lld does not divide "
                 "--channels %lld\n",
                 static_cast<long long>(heads), static_cast<long long>(c));
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "shardc-rt-kernel-bench: no CUDA device\n");
    return 3;
  }
  int64_t n = b * t, ld = (vocab + 127) / 128 * 128;

  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  // Kernels on the stream with flash attention on and each setting
  // (SHARDC_RT_CUDA_*, as create reads them from the environment) given
  // its value: a variant timed beside the default.
  auto create = [&](std::initializer_list<std::pair<const char *, const char *>>
                        settings = {}) {
    shardc_rt_cuda_kernels *made =
        shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/1);
    for (auto [setting, value] : settings)
      if (!shardc_rt_cuda_kernels_configure(made, setting, value)) {
        std::fprintf(stderr, "shardc-rt-kernel-bench: %s is not a setting\n",
                     setting);
        std::exit(1);
      }
    shardc_rt_cuda_kernels_set_flash_attention(made, 1);
    return made;
  };
  shardc_rt_cuda_kernels *k = create();

  shardc_rt_bf16 *qkv = randomBf16(n * 3 * c, 1), *out = randomBf16(n * c, 2),
                 *dy = randomBf16(n * c, 3), *dqkv = randomBf16(n * 3 * c, 4);
  float *lse = allocate<float>(b * heads * t);
  shardc_rt_bf16 *x = randomBf16(n * c, 5), *addend = randomBf16(n * c, 6),
                 *w = randomBf16(c, 7), *bias = randomBf16(c, 8),
                 *dx = randomBf16(n * c, 9), *dw = randomBf16(c, 10),
                 *db = randomBf16(c, 11), *sum = randomBf16(n * c, 12);
  shardc_rt_bf16 *hidden = randomBf16(n * 4 * c, 13),
                 *fcw = randomBf16(4 * c * c, 14),
                 *dbias = randomBf16(4 * c, 17);
  shardc_rt_bf16 *logits = randomBf16(n * ld, 15),
                 *dlogits = randomBf16(n * ld, 16);
  int32_t *targets = allocate<int32_t>(n);
  targetsKernel<<<1024, 256>>>(targets, n, vocab);
  check(cudaGetLastError(), "targetsKernel");
  int32_t *textIds = allocate<int32_t>(n);
  textIdsKernel<<<1024, 256>>>(textIds, n, vocab);
  check(cudaGetLastError(), "textIdsKernel");
  float *loss = allocate<float>(1), *dloss = allocate<float>(1);
  const float one = 1.0f;
  check(cudaMemcpy(dloss, &one, sizeof one, cudaMemcpyHostToDevice),
        "cudaMemcpy");
  check(cudaDeviceSynchronize(), "fill");

  auto shape = [](std::initializer_list<int64_t> dims) {
    std::string s;
    for (int64_t d : dims)
      s += (s.empty() ? "" : "x") + std::to_string(d);
    return s;
  };
  std::printf("# shardc-rt-kernel-bench: batch %lld, T %lld, C %lld, %lld "
              "heads, vocabulary %lld (rows of %lld), %lld calls each\n",
              static_cast<long long>(b), static_cast<long long>(t),
              static_cast<long long>(c), static_cast<long long>(heads),
              static_cast<long long>(vocab), static_cast<long long>(ld),
              static_cast<long long>(iters));
  std::printf("%-30s %-26s %10s %10s %7s  %s\n", "kernel", "shape", "ms/call",
              "floor ms", "of it", "floor");
  // Causal attention: half the T x T scores; the forward's two GEMMs, the
  // backward's five (FlashAttention-2's count).
  double attention = 2.0 * b * t * t * c;
  std::string bthc = shape({b, t, heads, c / heads});
  // Attention's forward and backward rows through `via`'s kernels.
  auto forwardRow = [&](const char *name, shardc_rt_cuda_kernels *via) {
    row(name, bthc,
        msPerCall(stream, iters,
                  [&] {
                    shardc_rt_cuda_attention_bf16(via, qkv, out, lse, b, t, c,
                                                  heads);
                  }),
        1e3 * attention / kPeakFlops, "bf16 peak");
  };
  auto backwardRow = [&](const char *name, shardc_rt_cuda_kernels *via) {
    row(name, bthc,
        msPerCall(stream, iters,
                  [&] {
                    shardc_rt_cuda_attention_grad_bf16(via, dy, qkv, out, lse,
                                                       dqkv, b, t, c, heads);
                  }),
        1e3 * 2.5 * attention / kPeakFlops, "bf16 peak");
  };
  forwardRow("attention", k);
  backwardRow("attention_grad", k);
  // The deterministic backward (set_deterministic): dq by a second kernel
  // per query block instead of atomics.
  shardc_rt_cuda_kernels_set_deterministic(k, 1);
  backwardRow("attention_grad (deterministic)", k);
  shardc_rt_cuda_kernels_set_deterministic(k, 0);
  // dq through sm_90's bulk reductions instead of atomics
  // (SHARDC_RT_CUDA_FLASH_DQ=bulk).
  shardc_rt_cuda_kernels *bulk = create({{"SHARDC_RT_CUDA_FLASH_DQ", "bulk"}});
  backwardRow("attention_grad (bulk dq)", bulk);
  shardc_rt_cuda_kernels_destroy(bulk);
  // The main kernel's steps whole, where the default takes their scores in
  // halves to fit more blocks on a multiprocessor
  // (SHARDC_RT_CUDA_FLASH_STEPS=whole).
  shardc_rt_cuda_kernels *whole =
      create({{"SHARDC_RT_CUDA_FLASH_STEPS", "whole"}});
  backwardRow("attention_grad (whole steps)", whole);
  shardc_rt_cuda_kernels_destroy(whole);
  // The instrumented flash kernels (shardc_rt_cuda_flash_phases_enable):
  // their time beside the rows above is what the clock reads cost; then
  // where their warps spend their cycles, a line per kernel.
  shardc_rt_cuda_kernels *phased = create();
  shardc_rt_cuda_flash_phases_enable(phased, 1);
  forwardRow("attention (phases)", phased);
  backwardRow("attention_grad (phases)", phased);
  printFlashPhases(phased);
  shardc_rt_cuda_kernels_destroy(phased);
  // Each warp taking two row tiles of 16 rows, 128 a block: the forward's
  // of queries (SHARDC_RT_CUDA_FLASH_FORWARD_TILES=2), the backward's of
  // keys (SHARDC_RT_CUDA_FLASH_BACKWARD_TILES=2); then instrumented.
  shardc_rt_cuda_kernels *twoTiles =
      create({{"SHARDC_RT_CUDA_FLASH_FORWARD_TILES", "2"},
              {"SHARDC_RT_CUDA_FLASH_BACKWARD_TILES", "2"}});
  forwardRow("attention (two tiles)", twoTiles);
  backwardRow("attention_grad (two tiles)", twoTiles);
  shardc_rt_cuda_flash_phases_enable(twoTiles, 1);
  forwardRow("attention (two tiles) (phases)", twoTiles);
  backwardRow("attention_grad (two tiles) (phases)", twoTiles);
  printFlashPhases(twoTiles, " (two tiles)");
  shardc_rt_cuda_kernels_destroy(twoTiles);
  // The same attention through cuDNN's fused attention
  // (set_cudnn_attention), where cuDNN takes the shape; its backward reads
  // the lse its forward wrote.
  shardc_rt_cuda_kernels *viaCudnn = create();
  shardc_rt_cuda_kernels_set_cudnn_attention(viaCudnn, 1);
  if (const char *why = shardc_rt_cuda_kernels_cudnn_attention_declines(
          viaCudnn, b, t, c, heads)) {
    std::printf("# attention (cudnn): not timed: %s\n", why);
  } else {
    forwardRow("attention (cudnn)", viaCudnn);
    backwardRow("attention_grad (cudnn)", viaCudnn);
  }
  shardc_rt_cuda_kernels_destroy(viaCudnn);
  row("cross_entropy_and_grad", shape({n, ld}),
      msPerCall(stream, iters,
                [&] {
                  shardc_rt_cuda_cross_entropy_and_grad_bf16(
                      k, dloss, logits, targets, loss, dlogits, n, vocab, ld);
                }),
      1e3 * 2.0 * 2 * n * ld / kBandwidth, "HBM");
  // The same rows through the online kernel the staged one replaces where
  // rows fit shared memory (SHARDC_RT_CUDA_CROSS_ENTROPY=online).
  shardc_rt_cuda_kernels *online =
      create({{"SHARDC_RT_CUDA_CROSS_ENTROPY", "online"}});
  row("cross_entropy (online)", shape({n, ld}),
      msPerCall(stream, iters,
                [&] {
                  shardc_rt_cuda_cross_entropy_and_grad_bf16(
                      online, dloss, logits, targets, loss, dlogits, n, vocab,
                      ld);
                }),
      1e3 * 2.0 * 2 * n * ld / kBandwidth, "HBM");
  shardc_rt_cuda_kernels_destroy(online);
  row("layernorm_grad_add", shape({n, c}),
      msPerCall(stream, iters,
                [&] {
                  shardc_rt_cuda_layernorm_grad_add_bf16(
                      k, dy, x, w, addend, dx, dw, db, n, c, 1e-5);
                }),
      1e3 * 4.0 * 2 * n * c / kBandwidth, "HBM");
  row("add_layernorm", shape({n, c}),
      msPerCall(stream, iters,
                [&] {
                  shardc_rt_cuda_add_layernorm_bf16(k, x, addend, w, bias, sum,
                                                    dx, n, c, 1e-5);
                }),
      1e3 * 4.0 * 2 * n * c / kBandwidth, "HBM");
  // The largest bias gradient of a layer's backward (the MLP's first
  // linear, 4C columns) and a residual add (the forward's between layers).
  row("sum_to", shape({n, 4 * c}),
      msPerCall(
          stream, iters,
          [&] { shardc_rt_cuda_sum_to_bf16(k, hidden, dbias, n, 4 * c); }),
      1e3 * 2.0 * n * 4 * c / kBandwidth, "HBM");
  row("add", shape({n, c}),
      msPerCall(
          stream, iters,
          [&] { shardc_rt_cuda_add_bf16(k, x, addend, sum, n * c, n * c); }),
      1e3 * 3.0 * 2 * n * c / kBandwidth, "HBM");
  // The token embedding's gradient: dy summed by id into the table's ld
  // rows (the targets as ids, then text-like ones); its floor reads dy and
  // writes the table once.
  shardc_rt_bf16 *dtable = allocate<shardc_rt_bf16>(ld * c);
  const std::pair<const char *, const int32_t *> idSets[] = {
      {"embedding_grad", targets}, {"embedding_grad (text ids)", textIds}};
  for (const auto &idSet : idSets) {
    const int32_t *ids = idSet.second;
    row(idSet.first, shape({n, c, ld}),
        msPerCall(stream, iters,
                  [&] {
                    shardc_rt_cuda_embedding_grad_bf16(k, dy, ids, dtable, n,
                                                       ld, c);
                  }),
        1e3 * 2.0 * (n + ld) * c / kBandwidth, "HBM");
  }
  row("matmul (MLP proj)", shape({n, 4 * c, c}),
      msPerCall(stream, iters,
                [&] {
                  shardc_rt_cuda_matmul_bf16(k, hidden, fcw, out, 1, n, 4 * c,
                                             c, 0, 1);
                }),
      1e3 * 2.0 * n * 4 * c * c / kPeakFlops, "bf16 peak");
  // The MLP's first linear's weight gradient, dy^T x [4C, C], alone and
  // with its bias gradient (sum_to above) from the same read of dy.
  row("matmul (MLP fc wgrad)", shape({n, 4 * c, c}),
      msPerCall(stream, iters,
                [&] {
                  shardc_rt_cuda_matmul_bf16(k, hidden, x, fcw, 1, 4 * c, n, c,
                                             1, 0);
                }),
      1e3 * 2.0 * n * 4 * c * c / kPeakFlops, "bf16 peak");
  row("matmul_bias_grad (MLP fc)", shape({n, 4 * c, c}),
      msPerCall(stream, iters,
                [&] {
                  shardc_rt_cuda_matmul_bias_grad_bf16(k, hidden, x, fcw, dbias,
                                                       4 * c, n, c, 1, 0);
                }),
      1e3 * 2.0 * n * 4 * c * c / kPeakFlops, "bf16 peak");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  shardc_rt_cuda_kernels_destroy(k);
  for (void *p : allocations)
    check(cudaFree(p), "cudaFree");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return 0;
}
