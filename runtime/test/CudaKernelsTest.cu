//===- CudaKernelsTest.cu - CUDA kernels against the CPU kernels ----------===//
//
// Runs every kernel of shardc_rt/CudaKernels.h on random inputs of a few
// shapes (T = 1 attention, odd sizes, C not a multiple of 32, more than 1024
// rows, empty dimensions, in-place elementwise calls, the attention chunking)
// and compares it with the CPU kernel of shardc_rt/Kernels.h, plus the
// device-side index checks, AdamW against runtime/host/Optimizer.cpp's
// arithmetic, the TF32 switch, the bf16 kernels of mixed precision
// against the CPU's bf16 kernels, and the fused kernels (linear_gelu,
// matmul_gelu_grad, add_layernorm, layernorm_grad_add, linear's bias) with
// cuBLASLt's GEMM epilogues on and off, f32 and bf16, up to GPT-2's shapes
// (names tagged "[gemm epilogue on]" / "[gemm epilogue off]" for the GEMMs:
// bench/gpu/run.sh turns the epilogues off where an "on" check fails), and
// the fused (flash) attention kernels, bf16 (names tagged "(flash)" and
// "(flash: ...)") and f32 on TF32 tensor cores (tagged "(flash tf32"):
// bench/gpu/run.sh keeps the fused attention (the CUDA default) for its runs
// only where this test ran to its end with every flash check passed; and
// bf16 attention through cuDNN (tagged "(cudnn)"), which run.sh times only
// where such checks ran and all passed.
//
// The reference is the CPU kernel instantiated for double (the same code as
// the f32 C ABI, shardc::rt::cpu<double>) run on the same f32 inputs, so
// that the tolerance budgets the GPU's f32 rounding alone, not the CPU's
// too. One line per check, then "cudakernels: N passed, M failed"; the exit
// status is 0 when everything passed, 1 otherwise, and 77 (skipped) when
// there is no CUDA device.
//
// The build runs it on a GPU as shardc-rt-cudakernels, and on the CPU as
// shardc-rt-cudakernels-sim, through cudasim (runtime/cudasim: CI runs it
// there). Build and run one alone (from the repository root):
//   ninja -C build shardc-rt-cudakernels && build/bin/shardc-rt-cudakernels
//
//===----------------------------------------------------------------------===//

#include "shardc_rt/CudaKernels.h"
#include "shardc_rt/Kernels.h"

#include "TestRandom.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace cpu = shardc::rt::cpu;

#define TEST_CUDA_CHECK(call)                                                  \
  do {                                                                         \
    cudaError_t testError_ = (call);                                           \
    if (testError_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "cudakernels: %s: %s (%s:%d)\n", #call,             \
                   cudaGetErrorString(testError_), __FILE__, __LINE__);        \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

namespace {

using Floats = std::vector<float>;
using Doubles = std::vector<double>;
using Ids = std::vector<int32_t>;

/// Every check passes when, for every element,
///   |gpu - reference| <= kTolerance * (|reference| + mean |reference|),
/// a mixed relative / absolute bound: relative for the elements of the
/// tensor's usual magnitude or above, absolute at 1e-5 of that magnitude for
/// the elements near zero (cancellations: a sum of O(1) terms that happens
/// to be small has an O(1) rounding error, not a small one). The absolute
/// part is scaled to the tensor, rather than fixed at 1e-5, so that a wrong
/// factor in a tensor of small values (cross-entropy gradients are O(1 / V))
/// cannot hide under it. The f32 errors are far below: f32 rounding is 6e-8,
/// grown by sums of at most a few hundred terms (~sqrt(n) in practice) and
/// the 1 / std of a layernorm, so a few 1e-7; an indexing or formula bug
/// gives O(1e-2..1).
constexpr double kTolerance = 1e-5;

std::mt19937_64 rng(0xc0dac0ffee5eedULL);
cudaStream_t stream;
shardc_rt_cuda_kernels *kernels;

int numPassed = 0, numFailed = 0;

void report(bool ok, const std::string &name, const std::string &detail) {
  ok ? ++numPassed : ++numFailed;
  std::printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", name.c_str(),
              detail.empty() ? "" : ": ", detail.c_str());
  std::fflush(stdout);
}

Floats random(size_t n, float lo = -1.0f, float hi = 1.0f) {
  return shardc::rt::test::randomValues(rng, n, lo, hi);
}

using Halves = std::vector<shardc_rt_bf16>;

Halves halves(const Floats &f) {
  Halves h(f.size());
  for (size_t i = 0; i < f.size(); ++i)
    h[i] = shardc::rt::narrow(f[i]);
  return h;
}

Ids randomIds(size_t n, int32_t v) {
  return shardc::rt::test::randomIds(rng, n, v);
}

Doubles widen(const Floats &v) { return Doubles(v.begin(), v.end()); }

std::string shape(std::initializer_list<int64_t> dims) {
  std::string s = "[";
  for (int64_t d : dims)
    s += (s.size() > 1 ? "x" : "") + std::to_string(d);
  return s + "]";
}

/// A device buffer of n elements (at least one is allocated, so that empty
/// tensors have a valid pointer).
template <typename T> class Buffer {
public:
  explicit Buffer(size_t n) : size(n) {
    TEST_CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)));
  }
  explicit Buffer(const std::vector<T> &v) : Buffer(v.size()) { upload(v); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  ~Buffer() { cudaFree(ptr); }

  T *get() const { return ptr; }
  void upload(const std::vector<T> &v) {
    if (v.empty())
      return;
    TEST_CUDA_CHECK(cudaMemcpyAsync(ptr, v.data(), v.size() * sizeof(T),
                                    cudaMemcpyHostToDevice, stream));
    TEST_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  /// Waits for the stream (the kernels writing the buffer), then copies.
  std::vector<T> download() const {
    std::vector<T> v(size);
    if (size > 0)
      TEST_CUDA_CHECK(cudaMemcpyAsync(v.data(), ptr, size * sizeof(T),
                                      cudaMemcpyDeviceToHost, stream));
    TEST_CUDA_CHECK(cudaStreamSynchronize(stream));
    return v;
  }

private:
  T *ptr = nullptr;
  size_t size;
};

/// Compares a GPU result with the reference (see kTolerance).
void compare(const std::string &name, const Floats &got, const Doubles &want,
             double tolerance = kTolerance) {
  if (got.size() != want.size()) {
    report(false, name, "size " + std::to_string(got.size()) + ", expected " +
                            std::to_string(want.size()));
    return;
  }
  double scale = 0;
  for (double w : want)
    scale += std::fabs(w);
  scale = want.empty() ? 0 : scale / static_cast<double>(want.size());
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
    double bound = std::fabs(want[i]) + scale;
    double error = diff == 0 ? 0 : bound > 0 ? diff / bound : INFINITY;
    if (!(error <= worst)) { // NaN included
      worst = std::isnan(error) ? INFINITY : error;
      at = i;
    }
  }
  char detail[200];
  if (worst <= tolerance)
    std::snprintf(detail, sizeof(detail), "max error %.2e", worst);
  else
    std::snprintf(detail, sizeof(detail),
                  "error %.2e > %.0e at %zu: got %.9g, expected %.9g", worst,
                  tolerance, at, static_cast<double>(got[at]), want[at]);
  report(worst <= tolerance, name, detail);
}

/// The bits of two results of the same arithmetic, in the same order.
template <typename E>
void checkSameBits(const std::string &name, const std::vector<E> &got,
                   const std::vector<E> &want) {
  bool same = got.size() == want.size() &&
              std::memcmp(got.data(), want.data(), got.size() * sizeof(E)) == 0;
  report(same, name + (std::is_same_v<E, float> ? "" : " (bf16)"), "");
}

/// The error slot must be clear after calls with valid ids.
void expectNoIndexError(const std::string &name) {
  const char *op = nullptr;
  int64_t bad = shardc_rt_cuda_kernels_check(kernels, &op);
  report(bad == -1 && op == nullptr, name + ": no index error",
         bad == -1 ? "" : "got " + std::to_string(bad) + " in " + (op ? op : "?"));
}

//===----------------------------------------------------------------------===//
// GEMMs
//===----------------------------------------------------------------------===//

void testLinear(shardc_rt_cuda_kernels *k, int64_t m, int64_t kd, int64_t n,
                bool bias, double tolerance = kTolerance,
                const char *tag = "") {
  Floats x = random(m * kd), w = random(n * kd), b = random(n);
  Buffer<float> dx(x), dw(w), db(b), dy(m * n);
  shardc_rt_cuda_fill_f32(kernels, dy.get(), 123.0f, m * n); // overwritten
  shardc_rt_cuda_linear_f32(k, dx.get(), dw.get(), bias ? db.get() : nullptr,
                            dy.get(), m, kd, n);
  Doubles y(m * n), bb = widen(b);
  cpu::linear<double>(widen(x).data(), widen(w).data(),
                      bias ? bb.data() : nullptr, y.data(), m, kd, n);
  compare(std::string("linear") + tag + " " + shape({m, kd}) + " x " +
              shape({n, kd}) + "^T" + (bias ? " + b" : ""),
          dy.download(), y, tolerance);
}

void testMatmul(int64_t batch, int64_t m, int64_t kd, int64_t n, bool tl,
                bool tr) {
  Floats lhs = random(batch * m * kd), rhs = random(batch * kd * n);
  Buffer<float> dl(lhs), dr(rhs), dout(batch * m * n);
  shardc_rt_cuda_matmul_f32(kernels, dl.get(), dr.get(), dout.get(), batch, m,
                            kd, n, tl, tr);
  Doubles out(batch * m * n);
  cpu::matmul<double>(widen(lhs).data(), widen(rhs).data(), out.data(), batch,
                      m, kd, n, tl, tr);
  compare("matmul batch " + std::to_string(batch) + " " +
              shape({m, kd, n}) + (tl ? " lhs^T" : "") + (tr ? " rhs^T" : ""),
          dout.download(), out);
}

//===----------------------------------------------------------------------===//
// Elementwise and memory
//===----------------------------------------------------------------------===//

void testElementwise(int64_t n) {
  std::string size = " n=" + std::to_string(n);
  Floats x = random(n, -6.0f, 6.0f), dy = random(n);
  // Edge values: zero, both signs of large, where gelu's exp overflows.
  if (n >= 6) {
    x[0] = 0.0f;
    x[1] = -100.0f;
    x[2] = 100.0f;
    x[3] = -1e-30f;
    x[4] = 30.0f;
    x[5] = -30.0f;
  }
  Doubles wx = widen(x), wdy = widen(dy);
  {
    // The first of a few suffixes that divides n, else 1 (96: whole
    // 16-byte chunks, which add takes a chunk a thread where n is too).
    int64_t m = 1;
    for (int64_t candidate : {int64_t(37), int64_t(13), int64_t(96)})
      if (n % candidate == 0) {
        m = candidate;
        break;
      }
    Floats rhs = random(m);
    Buffer<float> a(x), r(rhs), y(n);
    shardc_rt_cuda_add_f32(kernels, a.get(), r.get(), y.get(), n, m);
    Doubles want(n);
    cpu::add<double>(wx.data(), widen(rhs).data(), want.data(), n, m);
    compare("add" + size + " m=" + std::to_string(m), y.download(), want);
    shardc_rt_cuda_add_f32(kernels, a.get(), r.get(), a.get(), n, m);
    Floats sum = a.download();
    compare("add in place" + size, sum, want);
    Buffer<float> full(dy);
    shardc_rt_cuda_add_f32(kernels, a.get(), full.get(), y.get(), n, n);
    Doubles want2(n);
    cpu::add<double>(widen(sum).data(), wdy.data(), want2.data(), n, n);
    compare("add same shape" + size, y.download(), want2);
  }
  {
    Buffer<float> a(x), y(n);
    double factor = 0.3; // not a float: rounded once, as the CPU kernel
    shardc_rt_cuda_scale_f32(kernels, a.get(), y.get(), n, factor);
    Doubles want(n);
    cpu::scale<double>(wx.data(), want.data(), n, factor);
    compare("scale" + size, y.download(), want);
    shardc_rt_cuda_scale_f32(kernels, a.get(), a.get(), n, factor);
    compare("scale in place" + size, a.download(), want);
  }
  {
    Buffer<float> a(x), y(n);
    shardc_rt_cuda_gelu_f32(kernels, a.get(), y.get(), n);
    Doubles want(n);
    cpu::gelu<double>(wx.data(), want.data(), n);
    compare("gelu" + size, y.download(), want);
    shardc_rt_cuda_gelu_f32(kernels, a.get(), a.get(), n);
    compare("gelu in place" + size, a.download(), want);
  }
  {
    Buffer<float> a(x), y(n);
    shardc_rt_cuda_relu_f32(kernels, a.get(), y.get(), n);
    Doubles want(n);
    cpu::relu<double>(wx.data(), want.data(), n);
    compare("relu" + size, y.download(), want);
    shardc_rt_cuda_relu_f32(kernels, a.get(), a.get(), n);
    compare("relu in place" + size, a.download(), want);
  }
  {
    Buffer<float> a(x), g(dy), dx(n);
    shardc_rt_cuda_gelu_grad_f32(kernels, g.get(), a.get(), dx.get(), n);
    Doubles want(n);
    cpu::geluGrad<double>(wdy.data(), wx.data(), want.data(), n);
    compare("gelu_grad" + size, dx.download(), want);
    shardc_rt_cuda_gelu_grad_f32(kernels, g.get(), a.get(), g.get(), n);
    compare("gelu_grad in place" + size, g.download(), want);
  }
  {
    Buffer<float> a(x), g(dy), dx(n);
    shardc_rt_cuda_relu_grad_f32(kernels, g.get(), a.get(), dx.get(), n);
    Doubles want(n);
    cpu::reluGrad<double>(wdy.data(), wx.data(), want.data(), n);
    compare("relu_grad" + size, dx.download(), want);
    shardc_rt_cuda_relu_grad_f32(kernels, g.get(), a.get(), g.get(), n);
    compare("relu_grad in place" + size, g.download(), want);
  }
  {
    Buffer<float> src(x), dst(n);
    shardc_rt_cuda_copy_f32(kernels, dst.get(), src.get(), n);
    compare("copy" + size, dst.download(), wx);
    shardc_rt_cuda_fill_f32(kernels, dst.get(), -2.5f, n);
    compare("fill" + size, dst.download(), Doubles(n, -2.5));
    Buffer<float> acc(dy);
    shardc_rt_cuda_accumulate_f32(kernels, acc.get(), src.get(), n);
    Doubles want = wdy;
    cpu::accumulate<double>(want.data(), wx.data(), n);
    compare("accumulate" + size, acc.download(), want);
  }
  {
    Buffer<int32_t> out(n);
    shardc_rt_cuda_iota_i32(kernels, out.get(), n);
    Ids got = out.download(), want(n);
    cpu::iota(want.data(), n);
    report(got == want, "iota_i32" + size, "");
  }
}

void testSumTo(int64_t outer, int64_t inner) {
  Floats x = random(outer * inner);
  Buffer<float> dx(x), dy(inner);
  shardc_rt_cuda_fill_f32(kernels, dy.get(), 123.0f, inner); // overwritten
  shardc_rt_cuda_sum_to_f32(kernels, dx.get(), dy.get(), outer, inner);
  Doubles y(inner);
  cpu::sumTo<double>(widen(x).data(), y.data(), outer, inner);
  compare("sum_to " + shape({outer, inner}) + " -> " + shape({inner}),
          dy.download(), y);
}

//===----------------------------------------------------------------------===//
// Layernorm, embedding, attention, cross-entropy
//===----------------------------------------------------------------------===//

void testLayerNorm(int64_t rows, int64_t c, float offset) {
  double eps = 1e-5;
  Floats x = random(rows * c), w = random(c, 0.5f, 1.5f), b = random(c);
  for (float &v : x)
    v += offset; // a large mean: the variance must be of centered values
  Buffer<float> dx(x), dw(w), db(b), dy(rows * c);
  shardc_rt_cuda_layernorm_f32(kernels, dx.get(), dw.get(), db.get(), dy.get(),
                               rows, c, eps);
  Doubles y(rows * c);
  cpu::layerNorm<double>(widen(x).data(), widen(w).data(), widen(b).data(),
                         y.data(), rows, c, eps);
  compare("layernorm " + shape({rows, c}) +
              (offset != 0 ? " mean " + std::to_string(int(offset)) : ""),
          dy.download(), y);
}

void testLayerNormGrad(int64_t rows, int64_t c) {
  double eps = 1e-5;
  Floats g = random(rows * c), x = random(rows * c), w = random(c, 0.5f, 1.5f);
  Buffer<float> dg(g), dx(x), dw(w), ddx(rows * c), ddw(c), ddb(c);
  shardc_rt_cuda_fill_f32(kernels, ddw.get(), 123.0f, c); // overwritten
  shardc_rt_cuda_fill_f32(kernels, ddb.get(), 123.0f, c);
  shardc_rt_cuda_layernorm_grad_f32(kernels, dg.get(), dx.get(), dw.get(),
                                    ddx.get(), ddw.get(), ddb.get(), rows, c,
                                    eps);
  Doubles wdx(rows * c), wdw(c), wdb(c);
  cpu::layerNormGrad<double>(widen(g).data(), widen(x).data(), widen(w).data(),
                             wdx.data(), wdw.data(), wdb.data(), rows, c, eps);
  std::string name = "layernorm_grad " + shape({rows, c});
  compare(name + " dx", ddx.download(), wdx);
  compare(name + " dweight", ddw.download(), wdw);
  compare(name + " dbias", ddb.download(), wdb);
}

void testEmbedding(int64_t n, int64_t v, int64_t c) {
  Ids ids = randomIds(n, static_cast<int32_t>(v));
  Floats table = random(v * c);
  Buffer<int32_t> dids(ids);
  Buffer<float> dtable(table), dout(n * c);
  shardc_rt_cuda_embedding_f32(kernels, dids.get(), dtable.get(), dout.get(), n,
                               v, c);
  Doubles out(n * c);
  cpu::embedding<double>(ids.data(), widen(table).data(), out.data(), n, v, c);
  std::string name = "embedding " + shape({n}) + " of " + shape({v, c});
  compare(name, dout.download(), out);
  expectNoIndexError(name);
}

/// embedding_grad against the double reference, and against the CPU's f32
/// kernel bit for bit: both sum each id's rows in one order (positions in
/// order, in groups: shardc_rt/Kernels.h), so a sum in another order
/// (atomics, an unstable sort, other groups) shows in the last bits.
/// `ids` (default: random in [0, v)) picks the repeats.
void testEmbeddingGrad(int64_t n, int64_t v, int64_t c, Ids ids = {}) {
  if (ids.empty())
    ids = randomIds(n, static_cast<int32_t>(v)); // many repeats when n > v
  Floats dy = random(n * c);
  Buffer<int32_t> dids(ids);
  Buffer<float> ddy(dy), dtable(v * c);
  shardc_rt_cuda_fill_f32(kernels, dtable.get(), 123.0f, v * c); // zeroed
  shardc_rt_cuda_embedding_grad_f32(kernels, ddy.get(), dids.get(),
                                    dtable.get(), n, v, c);
  Doubles table(v * c);
  cpu::embeddingGrad<double>(widen(dy).data(), ids.data(), table.data(), n, v,
                             c);
  std::string name = "embedding_grad " + shape({n, c}) + " into " +
                     shape({v, c});
  Floats got = dtable.download();
  compare(name, got, table);
  Floats inOrder(v * c);
  cpu::embeddingGrad<float>(dy.data(), ids.data(), inOrder.data(), n, v, c);
  checkSameBits(name + ": the CPU's f32 sums bit for bit", got, inOrder);
  expectNoIndexError(name);
}

/// f32 flash attention (the fused kernels on TF32 tensor cores) against the
/// double reference. TF32 keeps 10 mantissa bits: rounding q, k, v, dy, P
/// and dS to it errs by up to 2^-11 = 4.9e-4 of each (the f32 accumulation
/// adds nothing comparable). An output sums terms of up to O(1) that can
/// cancel to near zero (an early query's few keys; a key's dv over every
/// later query), while the bound's absolute part is the tensor's mean
/// magnitude, small where long rows average out (~0.03 to 0.1 here): errors
/// of ~u * sum |terms| / mean, 1e-2 at most in a CPU emulation of these
/// kernels (FlashForward.cu and FlashBackward.cu compiled for the host,
/// cvt.rna's rounding) on these shapes, d = 16..128 and t = 1..200; the exact
/// attention of the TF32-rounded inputs alone is off by 4e-3 already. Seeded
/// bugs there (a mask off by one key, a missing scale, another row's lse or
/// delta, no online-softmax rescale) were off by 4e-2 to 50.
constexpr double kFlashTf32Tolerance = 3e-2;

void testAttention(shardc_rt_cuda_kernels *k, int64_t b, int64_t t, int64_t c,
                   int64_t heads, float range, const char *tag = "",
                   double tolerance = kTolerance) {
  Floats qkv = random(b * t * 3 * c, -range, range), dy = random(b * t * c);
  Buffer<float> dqkv(qkv), ddy(dy), dout(b * t * c), dlse(b * heads * t),
      dgrad(b * t * 3 * c), dbare(b * t * c);
  shardc_rt_cuda_attention_f32(k, dqkv.get(), dout.get(), dlse.get(), b, t, c,
                               heads);
  // Without lse (a forward nothing differentiates): the same output.
  shardc_rt_cuda_attention_f32(k, dqkv.get(), dbare.get(), nullptr, b, t, c,
                               heads);
  shardc_rt_cuda_fill_f32(kernels, dgrad.get(), 123.0f, b * t * 3 * c);
  // As a step calls it: with the forward's own out and lse.
  shardc_rt_cuda_attention_grad_f32(k, ddy.get(), dqkv.get(), dout.get(),
                                    dlse.get(), dgrad.get(), b, t, c, heads);
  Doubles wqkv = widen(qkv), out(b * t * c), lse(b * heads * t),
          grad(b * t * 3 * c);
  cpu::attention<double>(wqkv.data(), out.data(), lse.data(), b, t, c, heads);
  cpu::attentionGrad<double>(widen(dy).data(), wqkv.data(), out.data(),
                             lse.data(), grad.data(), b, t, c, heads);
  std::string name = shape({b, t, c}) + " heads " + std::to_string(heads) + tag;
  compare("attention " + name, dout.download(), out, tolerance);
  compare("attention lse " + name, dlse.download(), lse, tolerance);
  compare("attention without lse " + name, dbare.download(), out, tolerance);
  compare("attention_grad " + name, dgrad.download(), grad, tolerance);
}

/// Rows of ld logits, the first v of them classes (ld > v: padding, as
/// train.cross_entropy's `classes` makes; its gradient must be written 0).
/// `wide`: logits rising along each row by 0.1 a class (a thread's next
/// one 51 higher: the kernel moves its sum's reference at most of them),
/// every 7th -inf but the target's.
void testCrossEntropy(int64_t n, int64_t v, int64_t ld, bool wide = false) {
  Floats logits = random(n * ld, -3.0f, 3.0f);
  Ids targets = randomIds(n, static_cast<int32_t>(std::max<int64_t>(v, 1)));
  if (wide)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < v; ++j)
        logits[i * ld + j] =
            j % 7 == 3 && j != targets[i]
                ? -INFINITY
                : 0.1f * static_cast<float>(j) + 0.01f * logits[i * ld + j];
  Buffer<float> dlogits(logits), dloss(1), dgrad(Floats(n * ld, 6.0f));
  Buffer<int32_t> dtargets(targets);
  shardc_rt_cuda_fill_f32(kernels, dloss.get(), 5.0f, 1); // overwritten
  shardc_rt_cuda_cross_entropy_f32(kernels, dlogits.get(), dtargets.get(),
                                   dloss.get(), n, v, ld);
  Doubles wlogits = widen(logits), loss(1);
  cpu::crossEntropy<double>(wlogits.data(), targets.data(), loss.data(), n, v,
                            ld);
  std::string name = shape({n, v}) + (ld > v ? " of " + shape({n, ld}) : "") +
                     (wide ? " rising, -inf" : "");
  compare("cross_entropy " + name, dloss.download(), loss);
  // dloss = 2.5 n: per-row cotangent 2.5, gradients of O(1 / v) and O(1).
  float seed = 2.5f * static_cast<float>(n);
  Buffer<float> dseed(Floats{seed});
  shardc_rt_cuda_cross_entropy_grad_f32(kernels, dseed.get(), dlogits.get(),
                                        dtargets.get(), dgrad.get(), n, v, ld);
  Doubles grad(n * ld), wseed{seed};
  if (n > 0)
    cpu::crossEntropyGrad<double>(wseed.data(), wlogits.data(), targets.data(),
                                  grad.data(), n, v, ld);
  compare("cross_entropy_grad " + name, dgrad.download(), grad);
  // Both from the fused kernel, into fresh buffers, then in place.
  Buffer<float> dlossBoth(Floats{5.0f}), dgradBoth(Floats(n * ld, 6.0f));
  shardc_rt_cuda_cross_entropy_and_grad_f32(kernels, dseed.get(), dlogits.get(),
                                            dtargets.get(), dlossBoth.get(),
                                            dgradBoth.get(), n, v, ld);
  compare("cross_entropy_and_grad loss " + name, dlossBoth.download(), loss);
  compare("cross_entropy_and_grad " + name, dgradBoth.download(), grad);
  Buffer<float> dlogitsBoth(logits);
  shardc_rt_cuda_fill_f32(kernels, dlossBoth.get(), 5.0f, 1); // overwritten
  shardc_rt_cuda_cross_entropy_and_grad_f32(
      kernels, dseed.get(), dlogitsBoth.get(), dtargets.get(), dlossBoth.get(),
      dlogitsBoth.get(), n, v, ld);
  compare("cross_entropy_and_grad in place, loss " + name, dlossBoth.download(),
          loss);
  compare("cross_entropy_and_grad in place " + name, dlogitsBoth.download(),
          grad);
  // Written over the logits, as a step does where they die there.
  shardc_rt_cuda_cross_entropy_grad_f32(kernels, dseed.get(), dlogits.get(),
                                        dtargets.get(), dlogits.get(), n, v,
                                        ld);
  compare("cross_entropy_grad in place " + name, dlogits.download(), grad);
  expectNoIndexError("cross_entropy " + name);
}

//===----------------------------------------------------------------------===//
// Index checks
//===----------------------------------------------------------------------===//

void expectIndexError(const std::string &name, int64_t position,
                      const char *opName) {
  const char *op = nullptr;
  int64_t bad = shardc_rt_cuda_kernels_check(kernels, &op);
  bool ok = bad == position && op && std::strcmp(op, opName) == 0;
  report(ok, name,
         "got " + std::to_string(bad) + " in " + (op ? op : "(null)") +
             ", expected " + std::to_string(position) + " in " + opName);
}

void expectUntouched(const std::string &name, const Floats &got, float value) {
  bool ok = std::all_of(got.begin(), got.end(),
                        [&](float x) { return x == value; });
  report(ok, name + " leaves its output untouched", "");
}

void testIndexChecks() {
  int64_t n = 2000, v = 50, c = 33;
  Ids ids = randomIds(n, static_cast<int32_t>(v));
  ids[1800] = static_cast<int32_t>(v); // one past the end
  ids[1500] = -1;                      // negative: the first bad one
  Floats table = random(v * c);
  Buffer<int32_t> dids(ids);
  Buffer<float> dtable(table), dout(n * c);
  shardc_rt_cuda_fill_f32(kernels, dout.get(), 7.0f, n * c);
  shardc_rt_cuda_embedding_f32(kernels, dids.get(), dtable.get(), dout.get(), n,
                               v, c);
  // The CPU kernel's answer, through its f32 C ABI.
  Floats hostOut(n * c, 7.0f);
  int64_t cpuBad = shardc_rt_embedding_f32(ids.data(), table.data(),
                                           hostOut.data(), n, v, c);
  report(cpuBad == 1500, "embedding: the CPU kernel finds position 1500",
         "got " + std::to_string(cpuBad));
  expectUntouched("embedding with a bad id", dout.download(), 7.0f);
  expectIndexError("embedding: first bad id at 1500", 1500,
                   "shardc_rt_cuda_embedding_f32");
  expectNoIndexError("check resets the slot");

  // Two failing calls in a step: the first one is reported; the second,
  // and every checked call after, write nothing.
  int64_t rows = 20, vocab = 11;
  Floats logits = random(rows * vocab);
  Ids targets = randomIds(rows, static_cast<int32_t>(vocab));
  targets[3] = static_cast<int32_t>(vocab);
  targets[7] = static_cast<int32_t>(vocab) + 5;
  Buffer<float> dlogits(logits), dloss(Floats{5.0f}),
      dgrad(Floats(rows * vocab, 6.0f));
  Buffer<int32_t> dtargets(targets);
  shardc_rt_cuda_cross_entropy_f32(kernels, dlogits.get(), dtargets.get(),
                                   dloss.get(), rows, vocab, vocab);
  Ids goodIdsButOne = randomIds(n, static_cast<int32_t>(v));
  goodIdsButOne[1] = 1 << 30;
  Buffer<int32_t> dids2(goodIdsButOne);
  Buffer<float> dy(random(n * c)), dtableGrad(Floats(v * c, 9.0f));
  shardc_rt_cuda_embedding_grad_f32(kernels, dy.get(), dids2.get(),
                                    dtableGrad.get(), n, v, c);
  Ids goodIds = randomIds(n, static_cast<int32_t>(v));
  Buffer<int32_t> dgoodIds(goodIds);
  shardc_rt_cuda_embedding_f32(kernels, dgoodIds.get(), dtable.get(),
                               dout.get(), n, v, c);
  Floats hostLoss(1, 5.0f);
  cpuBad = shardc_rt_cross_entropy_f32(logits.data(), targets.data(),
                                       hostLoss.data(), rows, vocab, vocab);
  report(cpuBad == 3, "cross_entropy: the CPU kernel finds position 3",
         "got " + std::to_string(cpuBad));
  expectUntouched("cross_entropy with a bad target", dloss.download(), 5.0f);
  expectUntouched("embedding_grad after a failed call",
                  dtableGrad.download(), 9.0f);
  expectUntouched("embedding after a failed call", dout.download(), 7.0f);
  expectIndexError("cross_entropy then embedding_grad: the first is reported",
                   3, "shardc_rt_cuda_cross_entropy_f32");

  // Alone, after the reset: embedding_grad, then cross_entropy_grad.
  shardc_rt_cuda_embedding_grad_f32(kernels, dy.get(), dids2.get(),
                                    dtableGrad.get(), n, v, c);
  expectUntouched("embedding_grad with a bad id", dtableGrad.download(), 9.0f);
  expectIndexError("embedding_grad: bad id at 1", 1,
                   "shardc_rt_cuda_embedding_grad_f32");
  targets.assign(rows, 0);
  targets[rows - 1] = -7;
  dtargets.upload(targets);
  Buffer<float> dseed(Floats{1.0f});
  shardc_rt_cuda_cross_entropy_grad_f32(kernels, dseed.get(), dlogits.get(),
                                        dtargets.get(), dgrad.get(), rows,
                                        vocab, vocab);
  expectUntouched("cross_entropy_grad with a bad target", dgrad.download(),
                  6.0f);
  expectIndexError("cross_entropy_grad: bad target at the last row", rows - 1,
                   "shardc_rt_cuda_cross_entropy_grad_f32");
  // The fused kernel writes neither its loss nor its gradient, in place
  // neither: the logits stay as they were.
  Buffer<float> dlossBoth(Floats{5.0f});
  shardc_rt_cuda_cross_entropy_and_grad_f32(kernels, dseed.get(), dlogits.get(),
                                            dtargets.get(), dlossBoth.get(),
                                            dgrad.get(), rows, vocab, vocab);
  expectUntouched("cross_entropy_and_grad with a bad target: loss",
                  dlossBoth.download(), 5.0f);
  expectUntouched("cross_entropy_and_grad with a bad target: gradient",
                  dgrad.download(), 6.0f);
  expectIndexError("cross_entropy_and_grad: bad target at the last row",
                   rows - 1, "shardc_rt_cuda_cross_entropy_and_grad_f32");
  Buffer<float> dinPlace(Floats(rows * vocab, 4.0f));
  shardc_rt_cuda_cross_entropy_and_grad_f32(
      kernels, dseed.get(), dinPlace.get(), dtargets.get(), dlossBoth.get(),
      dinPlace.get(), rows, vocab, vocab);
  expectUntouched("cross_entropy_and_grad in place with a bad target",
                  dinPlace.download(), 4.0f);
  expectIndexError(
      "cross_entropy_and_grad in place: bad target at the last row", rows - 1,
      "shardc_rt_cuda_cross_entropy_and_grad_f32");
  // A target in the padding of rows of 8 logits, 6 of them classes.
  Ids inPadding(rows, 0);
  inPadding[2] = 7;
  dtargets.upload(inPadding);
  Buffer<float> dpadded(random(rows * 8));
  shardc_rt_cuda_cross_entropy_f32(kernels, dpadded.get(), dtargets.get(),
                                   dlossBoth.get(), rows, 6, 8);
  expectUntouched("cross_entropy with a target in the padding",
                  dlossBoth.download(), 5.0f);
  expectIndexError("cross_entropy: a target in the padding", 2,
                   "shardc_rt_cuda_cross_entropy_f32");
  // A bf16 call is named as the bf16 entry point it is.
  Buffer<shardc_rt_bf16> dtableBf16(halves(table)), doutBf16(n * c);
  shardc_rt_cuda_embedding_bf16(kernels, dids.get(), dtableBf16.get(),
                                doutBf16.get(), n, v, c);
  expectIndexError("embedding_bf16: first bad id at 1500", 1500,
                   "shardc_rt_cuda_embedding_bf16");
  expectNoIndexError("after the index checks");
}

//===----------------------------------------------------------------------===//
// AdamW
//===----------------------------------------------------------------------===//

/// runtime/host/Optimizer.cpp's adamw, its hyperparameters being the double
/// fields of shardc_rt_model (here the f32 ones widened, as the runtime
/// passes them to the CUDA kernel).
void referenceAdamw(double mlr, double mbeta1, double mbeta2, double meps,
                    double mweightDecay, int64_t step, float *value,
                    float *expAvg, float *expAvgSq, const float *grad,
                    int64_t used) {
  double correction1 = 1.0 - std::pow(mbeta1, static_cast<double>(step));
  double correction2 = 1.0 - std::pow(mbeta2, static_cast<double>(step));
  float lr = static_cast<float>(mlr), decay = 1.0f - lr * mweightDecay;
  float beta1 = mbeta1, beta2 = mbeta2, eps = meps;
  float stepSize = static_cast<float>(mlr / correction1);
  float rootCorrection2 = static_cast<float>(std::sqrt(correction2));
  for (int64_t i = 0; i < used; ++i) {
    float g = grad[i];
    expAvg[i] = beta1 * expAvg[i] + (1.0f - beta1) * g;
    expAvgSq[i] = beta2 * expAvgSq[i] + (1.0f - beta2) * g * g;
    float denom = std::sqrt(expAvgSq[i]) / rootCorrection2 + eps;
    value[i] = value[i] * decay - stepSize * expAvg[i] / denom;
  }
}

void testAdamw() {
  int64_t n = 10007;
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, wd = 0.1f;
  Floats param = random(n), m(n, 0.0f), v(n, 0.0f);
  Buffer<float> dparam(param), dm(m), dv(v), dgrad(n);
  for (int64_t step = 1; step <= 3; ++step) {
    Floats grad = random(n, -0.1f, 0.1f);
    if (step == 2)
      grad[0] = 0.0f; // a zero gradient: sqrt(v) of a decayed moment
    dgrad.upload(grad);
    shardc_rt_cuda_adamw_f32(kernels, dparam.get(), dm.get(), dv.get(),
                             dgrad.get(), /*gradBf16=*/0, nullptr, n, lr,
                             beta1, beta2, eps, wd, step);
    referenceAdamw(lr, beta1, beta2, eps, wd, step, param.data(), m.data(),
                   v.data(), grad.data(), n);
  }
  Floats gotParam = dparam.download(), gotM = dm.download(),
         gotV = dv.download();
  compare("adamw n=10007, 3 steps: param", gotParam, widen(param));
  compare("adamw n=10007, 3 steps: exp_avg", gotM, widen(m));
  compare("adamw n=10007, 3 steps: exp_avg_sq", gotV, widen(v));
  // Same operations in the same order, IEEE-rounded on both sides (no FMA
  // contraction in the kernel, none on x86-64 without -mfma): the same bits.
  bool exact = gotParam == param && gotM == m && gotV == v;
  report(exact, "adamw matches Optimizer.cpp bit for bit", "");
}

//===----------------------------------------------------------------------===//
// Mixed precision
//===----------------------------------------------------------------------===//

Floats floatsOf(const Halves &h) {
  Floats f(h.size());
  for (size_t i = 0; i < h.size(); ++i)
    f[i] = shardc::rt::widen(h[i]);
  return f;
}

/// A bf16 kernel against the CPU's on the same bf16 inputs: both compute in
/// f32 and round to bf16 (2^-8 relative), so results agree to a rounding
/// flip of an ulp or two where f32 sums ran in another order: 1e-2 of the
/// mixed bound. A wrong index or formula is off by far more.
constexpr double kBf16Tolerance = 1e-2;

void compareBf16(const std::string &name, const Halves &got, const Halves &want,
                 double tolerance = kBf16Tolerance) {
  compare(name + " (bf16)", floatsOf(got), widen(floatsOf(want)), tolerance);
}

/// bf16 attention rounds the probabilities P (and dS) to bf16 for the
/// GEMMs or tensor-core products that read them (as FlashAttention-2 does);
/// the CPU's bf16 attention keeps them f32. Each rounding moves P v by up
/// to 2^-9 sum_j P_j |v_j| <= 2^-9 max |v| = 2e-3 on inputs in [-1, 1],
/// which the mixed bound sees as up to 5e-2 where an output cancels to
/// ~0 against a mean |out| of ~0.04 (550 keys); cudasim measured 2.5e-2
/// (forward) and 5.0e-2 (gradient) at worst. A wrong index, mask or
/// rescaling is off by O(1).
constexpr double kBf16AttentionTolerance = 1e-1;

/// bf16 cross entropy over rows of v classes padded to ld logits (the
/// padding's gradient written 0): loss, gradient, both fused in place, and
/// the gradient over the logits, against the CPU's. Rows of whole 16-byte
/// chunks (ld a multiple of 8) run staged in shared memory where two fit a
/// multiprocessor (crossEntropyStagedKernel), the others online.
void testCrossEntropyBf16(int64_t rows, int64_t v, int64_t ld,
                          const std::string &tag,
                          shardc_rt_cuda_kernels *k = kernels) {
  Halves logits = halves(random(rows * ld, -3.0f, 3.0f));
  Ids targets = randomIds(rows, static_cast<int32_t>(v));
  Buffer<shardc_rt_bf16> dlogits(logits),
      dgrad(halves(Floats(rows * ld, 6.0f)));
  Buffer<int32_t> dtargets(targets);
  Buffer<float> dloss(1), dseed(Floats{1.0f});
  shardc_rt_cuda_cross_entropy_bf16(k, dlogits.get(), dtargets.get(),
                                    dloss.get(), rows, v, ld);
  float loss = 0.0f, seed = 1.0f;
  shardc_rt_cross_entropy_bf16(logits.data(), targets.data(), &loss, rows, v,
                               ld);
  compare("cross_entropy" + tag + " (bf16 logits)", dloss.download(),
          Doubles{loss}, kTolerance);
  shardc_rt_cuda_cross_entropy_grad_bf16(
      k, dseed.get(), dlogits.get(), dtargets.get(), dgrad.get(), rows, v, ld);
  Halves gw(rows * ld);
  shardc_rt_cross_entropy_grad_bf16(&seed, logits.data(), targets.data(),
                                    gw.data(), rows, v, ld);
  compareBf16("cross_entropy_grad" + tag, dgrad.download(), gw);
  // Both from the fused kernel, in place.
  Buffer<shardc_rt_bf16> dboth(logits);
  Buffer<float> dlossBoth(Floats{5.0f});
  shardc_rt_cuda_cross_entropy_and_grad_bf16(k, dseed.get(), dboth.get(),
                                             dtargets.get(), dlossBoth.get(),
                                             dboth.get(), rows, v, ld);
  compare("cross_entropy_and_grad loss" + tag, dlossBoth.download(),
          Doubles{loss}, kTolerance);
  compareBf16("cross_entropy_and_grad in place" + tag, dboth.download(), gw);
  // Written over the logits, as a step does where they die there.
  shardc_rt_cuda_cross_entropy_grad_bf16(k, dseed.get(), dlogits.get(),
                                         dtargets.get(), dlogits.get(), rows, v,
                                         ld);
  compareBf16("cross_entropy_grad in place" + tag, dlogits.download(), gw);
}

/// sum_to on bf16 rows against the CPU's (f32 sums, rounded once);
/// `offset`: x starts that many elements into its allocation.
void testSumToBf16(int64_t outer, int64_t inner, int64_t offset = 0) {
  Halves x = halves(random(outer * inner)), want(inner);
  Halves shifted(offset);
  shifted.insert(shifted.end(), x.begin(), x.end());
  Buffer<shardc_rt_bf16> dx(shifted), dy(inner);
  shardc_rt_cuda_sum_to_bf16(kernels, dx.get() + offset, dy.get(), outer,
                             inner);
  shardc_rt_sum_to_bf16(x.data(), want.data(), outer, inner);
  compareBf16("sum_to " + shape({outer, inner}) + " -> " + shape({inner}) +
                  (offset ? " (x misaligned)" : ""),
              dy.download(), want);
}

void testBf16(int64_t rows, int64_t c, int64_t v) {
  int64_t n = rows * c;
  std::string tag = " " + shape({rows, c});
  Halves x = halves(random(n)), y2 = halves(random(n)), w = halves(random(c * c));
  Halves bias = halves(random(c)), lnw = halves(random(c, 0.5f, 1.5f));
  Buffer<shardc_rt_bf16> dx(x), dy2(y2), dw(w), db(bias), dlnw(lnw);
  Buffer<shardc_rt_bf16> out(n), out2(n), outc(c), outc2(c);
  Halves want(n), want2(n), wantc(c), wantc2(c);

  shardc_rt_cuda_linear_bf16(kernels, dx.get(), dw.get(), db.get(), out.get(),
                             rows, c, c);
  shardc_rt_linear_bf16(x.data(), w.data(), bias.data(), want.data(), rows, c,
                        c);
  compareBf16("linear" + tag, out.download(), want);
  shardc_rt_cuda_matmul_bf16(kernels, dx.get(), dy2.get(), outc2.get(), 1, c,
                             rows, 1, 1, 0);
  Halves mm(c);
  shardc_rt_matmul_bf16(x.data(), y2.data(), mm.data(), 1, c, rows, 1, 1, 0);
  compareBf16("matmul^T" + tag, outc2.download(), mm);

  shardc_rt_cuda_add_bf16(kernels, dx.get(), db.get(), out.get(), n, c);
  shardc_rt_add_bf16(x.data(), bias.data(), want.data(), n, c);
  compareBf16("add" + tag, out.download(), want);
  shardc_rt_cuda_gelu_bf16(kernels, dx.get(), out.get(), n);
  shardc_rt_gelu_bf16(x.data(), want.data(), n);
  compareBf16("gelu" + tag, out.download(), want);
  shardc_rt_cuda_gelu_grad_bf16(kernels, dy2.get(), dx.get(), out.get(), n);
  shardc_rt_gelu_grad_bf16(y2.data(), x.data(), want.data(), n);
  compareBf16("gelu_grad" + tag, out.download(), want);
  shardc_rt_cuda_copy_bf16(kernels, out.get(), dx.get(), n);
  shardc_rt_cuda_accumulate_bf16(kernels, out.get(), dy2.get(), n);
  want = x;
  shardc_rt_accumulate_bf16(want.data(), y2.data(), n);
  compareBf16("accumulate" + tag, out.download(), want);

  shardc_rt_cuda_layernorm_bf16(kernels, dx.get(), dlnw.get(), db.get(),
                                out.get(), rows, c, 1e-5);
  shardc_rt_layernorm_bf16(x.data(), lnw.data(), bias.data(), want.data(),
                           rows, c, 1e-5);
  compareBf16("layernorm" + tag, out.download(), want);
  shardc_rt_cuda_layernorm_grad_bf16(kernels, dy2.get(), dx.get(), dlnw.get(),
                                     out.get(), outc.get(), outc2.get(), rows,
                                     c, 1e-5);
  shardc_rt_layernorm_grad_bf16(y2.data(), x.data(), lnw.data(), want.data(),
                                wantc.data(), wantc2.data(), rows, c, 1e-5);
  compareBf16("layernorm_grad dx" + tag, out.download(), want);
  compareBf16("layernorm_grad dw" + tag, outc.download(), wantc);
  compareBf16("layernorm_grad db" + tag, outc2.download(), wantc2);
  shardc_rt_cuda_sum_to_bf16(kernels, dx.get(), outc.get(), rows, c);
  shardc_rt_sum_to_bf16(x.data(), wantc.data(), rows, c);
  compareBf16("sum_to" + tag, outc.download(), wantc);

  testCrossEntropyBf16(rows, v, v + 3, tag);
  // The embedding of v rows.
  Ids targets = randomIds(rows, static_cast<int32_t>(v));
  Buffer<int32_t> dtargets(targets);
  Halves table = halves(random(v * c));
  Buffer<shardc_rt_bf16> dtable(table), dtgrad(v * c);
  shardc_rt_cuda_embedding_bf16(kernels, dtargets.get(), dtable.get(),
                                out.get(), rows, v, c);
  shardc_rt_embedding_bf16(targets.data(), table.data(), want.data(), rows, v,
                           c);
  compareBf16("embedding" + tag, out.download(), want);
  shardc_rt_cuda_embedding_grad_bf16(kernels, dx.get(), dtargets.get(),
                                     dtgrad.get(), rows, v, c);
  Halves tgw(v * c);
  shardc_rt_embedding_grad_bf16(x.data(), targets.data(), tgw.data(), rows, v,
                                c);
  checkSameBits("embedding_grad" + tag + ": the CPU's bit for bit",
                dtgrad.download(), tgw);
  expectNoIndexError("bf16" + tag);
}

/// bf16 GEMMs (cublasGemmStridedBatchedEx) in every transpose combination
/// of a batch, and the remaining elementwise kernels, against the CPU's.
void testBf16Batched(int64_t batch, int64_t m, int64_t kd, int64_t n) {
  for (int tl = 0; tl < 2; ++tl)
    for (int tr = 0; tr < 2; ++tr) {
      Halves lhs = halves(random(batch * m * kd)),
             rhs = halves(random(batch * kd * n)), want(batch * m * n);
      Buffer<shardc_rt_bf16> dl(lhs), dr(rhs), dout(batch * m * n);
      shardc_rt_cuda_matmul_bf16(kernels, dl.get(), dr.get(), dout.get(),
                                 batch, m, kd, n, tl, tr);
      shardc_rt_matmul_bf16(lhs.data(), rhs.data(), want.data(), batch, m, kd,
                            n, tl, tr);
      compareBf16("matmul " + shape({batch, m, kd, n}) + (tl ? " lhs^T" : "") +
                      (tr ? " rhs^T" : ""),
                  dout.download(), want);
    }
  int64_t count = batch * m * kd;
  Halves x = halves(random(count)), dy = halves(random(count)), want(count);
  Buffer<shardc_rt_bf16> dx(x), ddy(dy), out(count);
  shardc_rt_cuda_scale_bf16(kernels, dx.get(), out.get(), count, 0.37);
  shardc_rt_scale_bf16(x.data(), want.data(), count, 0.37);
  compareBf16("scale " + shape({count}), out.download(), want);
  shardc_rt_cuda_relu_bf16(kernels, dx.get(), out.get(), count);
  shardc_rt_relu_bf16(x.data(), want.data(), count);
  compareBf16("relu " + shape({count}), out.download(), want);
  shardc_rt_cuda_relu_grad_bf16(kernels, ddy.get(), dx.get(), out.get(), count);
  shardc_rt_relu_grad_bf16(dy.data(), x.data(), want.data(), count);
  compareBf16("relu_grad " + shape({count}), out.download(), want);
  shardc_rt_cuda_fill_bf16(kernels, out.get(), 0.1f, count);
  shardc_rt_fill_bf16(want.data(), 0.1f, count);
  compareBf16("fill " + shape({count}), out.download(), want);
  Buffer<float> dwide(count);
  shardc_rt_cuda_convert_bf16_f32(kernels, dwide.get(), dx.get(), count);
  shardc_rt_cuda_convert_f32_bf16(kernels, out.get(), dwide.get(), count);
  report(out.download() == x, "convert bf16 -> f32 -> bf16 " + shape({count}) +
                                  " round-trips",
         "");
}

/// Attention in bf16: f32 scores and softmax, the probabilities rounded to
/// bf16 where a GEMM reads them (flash attention's rounding; the CPU keeps
/// them f32), well inside the bf16 tolerance.
/// `offset`: qkv and dy start that many elements into their allocations
/// (1: 2 bytes off the 16-byte alignment flash attention's copies need).
/// The gradient runs on `backward` where not null (a forward path's out
/// and lse read by another's backward), else on k. `outputOffset`: out and
/// dqkv start that many elements into theirs (the flash kernels take
/// outputs off the alignment: they store them element by element).
void testAttentionBf16(shardc_rt_cuda_kernels *k, int64_t b, int64_t t,
                       int64_t c, int64_t heads, const char *tag = "",
                       int64_t offset = 0,
                       shardc_rt_cuda_kernels *backward = nullptr,
                       int64_t outputOffset = 0) {
  Halves qkv = halves(random(b * t * 3 * c)), dy = halves(random(b * t * c));
  Halves shiftedQkv(offset), shiftedDy(offset);
  shiftedQkv.insert(shiftedQkv.end(), qkv.begin(), qkv.end());
  shiftedDy.insert(shiftedDy.end(), dy.begin(), dy.end());
  Buffer<shardc_rt_bf16> dqkv(shiftedQkv), ddy(shiftedDy),
      dout(outputOffset + b * t * c), dgrad(outputOffset + b * t * 3 * c);
  Buffer<float> dlse(b * heads * t);
  Halves out(b * t * c), grad(b * t * 3 * c);
  Floats lse(b * heads * t);
  shardc_rt_cuda_attention_bf16(k, dqkv.get() + offset,
                                dout.get() + outputOffset, dlse.get(), b, t, c,
                                heads);
  shardc_rt_attention_bf16(qkv.data(), out.data(), lse.data(), b, t, c, heads);
  shardc_rt_cuda_attention_grad_bf16(
      backward ? backward : k, ddy.get() + offset, dqkv.get() + offset,
      dout.get() + outputOffset, dlse.get(), dgrad.get() + outputOffset, b, t,
      c, heads);
  shardc_rt_attention_grad_bf16(dy.data(), qkv.data(), out.data(), lse.data(),
                                grad.data(), b, t, c, heads);
  auto withoutOffset = [&](Halves all) {
    all.erase(all.begin(), all.begin() + outputOffset);
    return all;
  };
  std::string name = shape({b, t, c}) + " heads " + std::to_string(heads) + tag;
  compareBf16("attention " + name, withoutOffset(dout.download()), out,
              kBf16AttentionTolerance);
  compare("attention lse " + name + " (bf16 qkv)", dlse.download(), widen(lse),
          kBf16Tolerance);
  compareBf16("attention_grad " + name, withoutOffset(dgrad.download()), grad,
              kBf16AttentionTolerance);
}

/// Sets `setting` = `value` on k (a SHARDC_RT_CUDA_* setting, as create
/// reads them from the environment); a name configure does not know fails.
void configure(shardc_rt_cuda_kernels *k, const char *setting,
               const char *value) {
  if (!shardc_rt_cuda_kernels_configure(k, setting, value))
    report(false, std::string("configure ") + setting, "not a setting");
}

/// Kernels with flash attention on and `setting` = `value`:
/// SHARDC_RT_CUDA_FLASH_DQ=bulk, dq by bulk reductions;
/// SHARDC_RT_CUDA_FLASH_STEPS=whole, whole steps;
/// SHARDC_RT_CUDA_FLASH_FORWARD_TILES=2 and _BACKWARD_TILES=2, the
/// forward's and the backward's two row tiles.
shardc_rt_cuda_kernels *createFlashWith(const char *setting, const char *value,
                                        int allowTf32) {
  shardc_rt_cuda_kernels *k = shardc_rt_cuda_kernels_create(stream, allowTf32);
  configure(k, setting, value);
  shardc_rt_cuda_kernels_set_flash_attention(k, 1);
  return k;
}

/// Columns [from, from + c) of every row of a [rows, 3c] gradient: its dq
/// (from 0), dk (c) or dv (2c).
Halves qkvColumns(const Halves &g, int64_t rows, int64_t c, int64_t from) {
  Halves part;
  for (int64_t r = 0; r < rows; ++r)
    part.insert(part.end(), g.begin() + r * 3 * c + from,
                g.begin() + r * 3 * c + from + c);
  return part;
}

/// testAttentionBf16 through `k`'s flash kernels at the shapes every flash
/// variant is checked on: head sizes (c / heads) 16, 32, 64, 80 and 128,
/// T below, at and past the 64-row blocks, one query.
void testFlashShapesBf16(shardc_rt_cuda_kernels *k, const char *tag) {
  testAttentionBf16(k, 2, 70, 64, 4, tag);
  testAttentionBf16(k, 1, 130, 128, 2, tag);
  testAttentionBf16(k, 2, 64, 256, 2, tag);
  testAttentionBf16(k, 3, 1, 32, 2, tag);
  testAttentionBf16(k, 1, 200, 96, 3, tag);
  testAttentionBf16(k, 1, 100, 160, 2, tag);
}

/// A flash backward `variant` beside the default one (dq by atomics, steps
/// fitted) on the same bf16 inputs: dk and dv come from the same
/// arithmetic (bit for bit), dq from the same products, summed in another
/// order or not (within the bf16 tolerance); where `deterministic`, a
/// second run gives the same bits. Named with `tag`.
void testFlashVariantBf16(shardc_rt_cuda_kernels *variant, const char *tag,
                          bool deterministic, int64_t b, int64_t t, int64_t c,
                          int64_t heads) {
  shardc_rt_cuda_kernels *atomic =
      shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/0);
  shardc_rt_cuda_kernels_set_flash_attention(atomic, 1);
  Halves qkv = halves(random(b * t * 3 * c)), dy = halves(random(b * t * c));
  Buffer<shardc_rt_bf16> dqkv(qkv), ddy(dy), dout(b * t * c),
      dgrad(b * t * 3 * c);
  Buffer<float> dlse(b * heads * t);
  shardc_rt_cuda_attention_bf16(atomic, dqkv.get(), dout.get(), dlse.get(), b,
                                t, c, heads);
  auto gradient = [&](shardc_rt_cuda_kernels *k) {
    shardc_rt_cuda_fill_bf16(kernels, dgrad.get(), 123.0f, b * t * 3 * c);
    shardc_rt_cuda_attention_grad_bf16(k, ddy.get(), dqkv.get(), dout.get(),
                                       dlse.get(), dgrad.get(), b, t, c, heads);
    return dgrad.download();
  };
  Halves viaAtomics = gradient(atomic), first = gradient(variant);
  auto columns = [&](const Halves &g, int64_t from) {
    return qkvColumns(g, b * t, c, from);
  };
  std::string name = "attention_grad " + shape({b, t, c}) + " heads " +
                     std::to_string(heads) + tag;
  checkSameBits(name + ": dk the default kernel's", columns(first, c),
                columns(viaAtomics, c));
  checkSameBits(name + ": dv the default kernel's", columns(first, 2 * c),
                columns(viaAtomics, 2 * c));
  compareBf16(name + ": dq against the default kernel's", columns(first, 0),
              columns(viaAtomics, 0), kBf16AttentionTolerance);
  if (deterministic)
    checkSameBits(name + ": a second run", gradient(variant), first);
  shardc_rt_cuda_kernels_destroy(atomic);
}

/// A flash forward `variant` beside the default one on the same bf16
/// inputs: the same out and lse bits, each row's softmax taking the same
/// key blocks in the same order (a variant skips only the products of
/// scores masked whole). Named with `tag`.
void testForwardVariantBf16(shardc_rt_cuda_kernels *variant, const char *tag,
                            int64_t b, int64_t t, int64_t c, int64_t heads) {
  shardc_rt_cuda_kernels *plain =
      shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/0);
  shardc_rt_cuda_kernels_set_flash_attention(plain, 1);
  Buffer<shardc_rt_bf16> dqkv(halves(random(b * t * 3 * c))), dout(b * t * c);
  Buffer<float> dlse(b * heads * t);
  auto forward = [&](shardc_rt_cuda_kernels *k) {
    shardc_rt_cuda_attention_bf16(k, dqkv.get(), dout.get(), dlse.get(), b, t,
                                  c, heads);
    return std::make_pair(dout.download(), dlse.download());
  };
  auto [out, lse] = forward(plain);
  auto [variantOut, variantLse] = forward(variant);
  std::string name =
      "attention " + shape({b, t, c}) + " heads " + std::to_string(heads) + tag;
  checkSameBits(name + ": out the default kernel's", variantOut, out);
  checkSameBits(name + ": lse the default kernel's", variantLse, lse);
  shardc_rt_cuda_kernels_destroy(plain);
}

/// The deterministic flash backward (set_deterministic) beside the default
/// one (testFlashVariantBf16).
void testDeterministicAttentionBf16(int64_t b, int64_t t, int64_t c,
                                    int64_t heads) {
  shardc_rt_cuda_kernels *fixed =
      shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/0);
  shardc_rt_cuda_kernels_set_flash_attention(fixed, 1);
  shardc_rt_cuda_kernels_set_deterministic(fixed, 1);
  testFlashVariantBf16(fixed, " (deterministic flash)", true, b, t, c, heads);
  shardc_rt_cuda_kernels_destroy(fixed);
}

/// The flash kernels' phase counters (shardc_rt_cuda_flash_phases_enable):
/// the instrumented kernels give the unmarked ones' out, lse, dk and dv
/// bit for bit (dq within the bf16 tolerance: its atomics add in any
/// order), every phase counts cycles, and each kernel counts its warps'
/// steps: 4 warps a block, block i of a head's n taking n - i steps (the
/// backward's key blocks) or i + 1 (the forward's query blocks), n (n +
/// 1) / 2 a head either way. Where the forward keeps two key blocks in
/// flight (d = 64 in bf16), its "wait v" phase is two clock reads in a
/// row; d = 128 runs its one-stage schedule, which waits there. Tagged
/// "(flash phases)", which run.sh's choice of attention does not read.
void testFlashPhasesBf16(int64_t b, int64_t t, int64_t c, int64_t heads) {
  shardc_rt_cuda_kernels *plain =
      shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/0);
  shardc_rt_cuda_kernels *phased =
      shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/0);
  shardc_rt_cuda_kernels_set_flash_attention(plain, 1);
  shardc_rt_cuda_kernels_set_flash_attention(phased, 1);
  shardc_rt_cuda_flash_phases_enable(phased, 1);
  Buffer<shardc_rt_bf16> dqkv(halves(random(b * t * 3 * c))),
      ddy(halves(random(b * t * c))), dout(b * t * c), dgrad(b * t * 3 * c);
  Buffer<float> dlse(b * heads * t);
  struct Results {
    Halves out, grad;
    Floats lse;
  };
  auto run = [&](shardc_rt_cuda_kernels *k) {
    shardc_rt_cuda_attention_bf16(k, dqkv.get(), dout.get(), dlse.get(), b, t,
                                  c, heads);
    shardc_rt_cuda_attention_grad_bf16(k, ddy.get(), dqkv.get(), dout.get(),
                                       dlse.get(), dgrad.get(), b, t, c, heads);
    return Results{dout.download(), dgrad.download(), dlse.download()};
  };
  Results want = run(plain), got = run(phased);
  std::string name =
      shape({b, t, c}) + " heads " + std::to_string(heads) + " (flash phases)";
  checkSameBits("attention " + name, got.out, want.out);
  checkSameBits("attention lse " + name, got.lse, want.lse);
  auto columns = [&](const Halves &g, int64_t from) {
    return qkvColumns(g, b * t, c, from);
  };
  checkSameBits("attention_grad " + name + ": dk", columns(got.grad, c),
                columns(want.grad, c));
  checkSameBits("attention_grad " + name + ": dv", columns(got.grad, 2 * c),
                columns(want.grad, 2 * c));
  compareBf16("attention_grad " + name + ": dq", columns(got.grad, 0),
              columns(want.grad, 0), kBf16AttentionTolerance);

  std::vector<shardc_rt_flash_phase> phases(32);
  int32_t count = shardc_rt_cuda_flash_phases(
      phased, phases.data(), static_cast<int32_t>(phases.size()));
  phases.resize(std::min<size_t>(count, phases.size()));
  int64_t blocks = (t + 63) / 64;
  uint64_t steps = 4 * b * heads * blocks * (blocks + 1) / 2;
  for (const char *kernel : {"attention", "attention_grad"}) {
    std::string said;
    bool ok = true;
    int found = 0;
    for (const shardc_rt_flash_phase &p : phases) {
      if (std::strcmp(p.kernel, kernel) != 0)
        continue;
      ++found;
      ok = ok && p.cycles > 0 && p.warpSteps == steps;
      said += std::string(said.empty() ? "" : ", ") + p.phase + " " +
              std::to_string(p.cycles) + " in " + std::to_string(p.warpSteps);
    }
    int wanted = std::strcmp(kernel, "attention") == 0 ? 6 : 8;
    report(ok && found == wanted,
           std::string(kernel) + " " + name + ": " + std::to_string(wanted) +
               " phases, each with cycles, " + std::to_string(steps) +
               " warp steps",
           said);
  }
  // Reset: nothing counted until the next call.
  shardc_rt_cuda_flash_phases_reset(phased);
  shardc_rt_cuda_flash_phases(phased, phases.data(),
                              static_cast<int32_t>(phases.size()));
  report(std::all_of(phases.begin(), phases.end(),
                     [](const shardc_rt_flash_phase &p) {
                       return p.cycles == 0 && p.warpSteps == 0;
                     }),
         "flash phases " + name + ": reset clears every count", "");
  shardc_rt_cuda_kernels_destroy(phased);
  shardc_rt_cuda_kernels_destroy(plain);
}

/// bf16 attention through cuDNN's fused attention (set_cudnn_attention):
/// heads of 16 to 128 elements (80: not a power of two), T below, at and
/// past cuDNN's tiles, up to GPT-2's 1024. A shape cuDNN declines (T = 1,
/// whose backward cudnn-frontend refuses; d = 4), and tensors off the
/// 16-byte alignment, run as if cuDNN attention were off (the flash
/// kernels, else GEMMs): tagged "(cudnn declines)" and "(cudnn:
/// misaligned)". Where cuDNN does not run at all (not installed; cudasim,
/// which simulates none) one line says so and nothing is checked:
/// bench/gpu/run.sh times cuDNN's attention only where at least one
/// "(cudnn)" check ran and every one passed (the mixed paths' checks,
/// "(cudnn forward, flash backward)" and the reverse, included). Run last,
/// so that a cuDNN failure cannot cut the other checks short.
void testCudnnAttention() {
  shardc_rt_cuda_kernels *k =
      shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/0);
  shardc_rt_cuda_kernels_set_flash_attention(k, 1);
  shardc_rt_cuda_kernels_set_cudnn_attention(k, 1);
  if (const char *why =
          shardc_rt_cuda_kernels_cudnn_attention_declines(k, 2, 70, 64, 4)) {
    std::printf("note: cuDNN attention not checked: %s\n", why);
    shardc_rt_cuda_kernels_destroy(k);
    return;
  }
  struct Shape {
    int64_t b, t, c, heads, offset;
  };
  // Each new shape costs cuDNN two plans (kernels compiled by NVRTC): the
  // misaligned case reuses one.
  for (Shape s : {Shape{2, 70, 64, 4, 0}, Shape{1, 130, 128, 2, 0},
                  Shape{2, 64, 256, 2, 0}, Shape{1, 100, 160, 2, 0},
                  Shape{2, 1024, 128, 2, 0}, Shape{3, 1, 32, 2, 0},
                  Shape{2, 9, 20, 5, 0}, Shape{1, 130, 128, 2, 1}}) {
    const char *why = shardc_rt_cuda_kernels_cudnn_attention_declines(
        k, s.b, s.t, s.c, s.heads);
    std::string tag = why        ? " (cudnn declines)"
                      : s.offset ? " (cudnn: misaligned)"
                                 : " (cudnn)";
    if (why)
      std::printf("note: cuDNN declines %s heads %lld: %s\n",
                  shape({s.b, s.t, s.c}).c_str(),
                  static_cast<long long>(s.heads), why);
    testAttentionBf16(k, s.b, s.t, s.c, s.heads, tag.c_str(), s.offset);
  }
  // A cuDNN forward with the flash kernels' backward, and the reverse: each
  // reads the other's out and lse (the rows' natural log-sum-exp of the
  // scaled scores, [b, heads, t], written alike by every forward path).
  shardc_rt_cuda_kernels *flash =
      shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/0);
  shardc_rt_cuda_kernels_set_flash_attention(flash, 1);
  testAttentionBf16(k, 2, 70, 64, 4, " (cudnn forward, flash backward)", 0,
                    flash);
  testAttentionBf16(flash, 2, 70, 64, 4, " (flash forward, cudnn backward)", 0,
                    k);
  shardc_rt_cuda_kernels_destroy(flash);
  shardc_rt_cuda_kernels_destroy(k);
}

/// AdamW on an f32 master from a bf16 gradient, rounding the value: the
/// master as the f32 reference from the widened gradient, the value its
/// rounding, bit for bit.
void testAdamwBf16() {
  int64_t n = 4099;
  Floats master = random(n), m(n, 0.0f), v(n, 0.0f);
  Halves grad = halves(random(n, -0.1f, 0.1f));
  Buffer<float> dmaster(master), dm(m), dv(v);
  Buffer<shardc_rt_bf16> dgrad(grad), dvalue(n);
  shardc_rt_cuda_adamw_f32(kernels, dmaster.get(), dm.get(), dv.get(),
                           dgrad.get(), /*gradBf16=*/1, dvalue.get(), n, 1e-3f,
                           0.9f, 0.999f, 1e-8f, 0.1f, 1);
  referenceAdamw(1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 1, master.data(), m.data(),
                 v.data(), floatsOf(grad).data(), n);
  Floats gotMaster = dmaster.download();
  Halves gotValue = dvalue.download();
  bool exact = std::memcmp(gotMaster.data(), master.data(), n * 4) == 0 &&
               gotValue == halves(master);
  report(exact, "adamw from a bf16 gradient: master and rounded value exact",
         "");
}

/// The multi-tensor AdamW (one launch per 48 tensors) on 53 tensors: empty
/// ones, sizes either side of its 4096-element blocks, f32 and bf16
/// gradients, some rounded into a bf16 value, some without weight decay; 2
/// steps, each tensor bit for bit the f32 reference alone.
void testAdamwMulti() {
  const int64_t sizes[] = {0, 1, 31, 4095, 4096, 4097, 10007, 12288};
  const int count = 53;
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, wd = 0.1f;
  struct Tensor {
    Floats param, m, v;
    std::unique_ptr<Buffer<float>> dparam, dm, dv, dgrad;
    std::unique_ptr<Buffer<shardc_rt_bf16>> dgradBf16, drounded;
  };
  std::vector<Tensor> tensors(count);
  for (int i = 0; i < count; ++i) {
    Tensor &t = tensors[i];
    int64_t n = sizes[(i * 5) % 8];
    t.param = random(n);
    t.m.assign(n, 0.0f);
    t.v.assign(n, 0.0f);
    t.dparam = std::make_unique<Buffer<float>>(t.param);
    t.dm = std::make_unique<Buffer<float>>(t.m);
    t.dv = std::make_unique<Buffer<float>>(t.v);
    if (i % 2)
      t.dgradBf16 = std::make_unique<Buffer<shardc_rt_bf16>>(n);
    else
      t.dgrad = std::make_unique<Buffer<float>>(n);
    if (i % 3 == 0)
      t.drounded = std::make_unique<Buffer<shardc_rt_bf16>>(n);
  }
  for (int64_t step = 1; step <= 2; ++step) {
    std::vector<shardc_rt_cuda_adamw_tensor> list;
    for (Tensor &t : tensors) {
      int64_t n = t.param.size();
      Floats grad = random(n, -0.1f, 0.1f);
      if (t.dgradBf16) {
        Halves rounded = halves(grad);
        t.dgradBf16->upload(rounded);
        grad = floatsOf(rounded);
      } else {
        t.dgrad->upload(grad);
      }
      // Every fourth tensor (from the second) takes no weight decay.
      bool noDecay = (&t - tensors.data()) % 4 == 1;
      referenceAdamw(lr, beta1, beta2, eps, noDecay ? 0.0f : wd, step,
                     t.param.data(), t.m.data(), t.v.data(), grad.data(), n);
      list.push_back({t.dparam->get(), t.dm->get(), t.dv->get(),
                      t.dgradBf16
                          ? static_cast<const void *>(t.dgradBf16->get())
                          : t.dgrad->get(),
                      t.drounded ? t.drounded->get() : nullptr, n,
                      t.dgradBf16 ? 1 : 0, nullptr, noDecay ? 1 : 0});
    }
    shardc_rt_cuda_adamw_multi_f32(kernels, list.data(), count, lr, beta1,
                                   beta2, eps, wd, step);
  }
  int wrong = 0;
  for (Tensor &t : tensors) {
    bool exact = t.dparam->download() == t.param && t.dm->download() == t.m &&
                 t.dv->download() == t.v &&
                 (!t.drounded || t.drounded->download() == halves(t.param));
    wrong += exact ? 0 : 1;
  }
  report(wrong == 0, "adamw multi-tensor: 53 tensors, 2 steps, bit for bit",
         wrong ? std::to_string(wrong) + " tensors differ" : "");
}

/// Gradient clipping's kernels. The sum of squares over 53 tensors (two of
/// its 48-tensor launches; empty ones, f32 and bf16) is the f64 sum rounded
/// to f32 (within one f32 ulp: the orders differ), the same bits twice; the
/// coefficient of two sums is clip_grad_norm_'s, in f32, bit for bit, and 1
/// under the bound; the multi-tensor AdamW taking it is the reference on
/// g * clip, bit for bit.
void testGradientClipping() {
  const int64_t sizes[] = {0, 1, 31, 4095, 4096, 4097, 10007, 12288};
  const int count = 53;
  std::vector<std::unique_ptr<Buffer<float>>> f32s;
  std::vector<std::unique_ptr<Buffer<shardc_rt_bf16>>> bf16s;
  std::vector<shardc_rt_cuda_squares_tensor> list;
  double want = 0;
  for (int i = 0; i < count; ++i) {
    int64_t n = sizes[(i * 5) % 8];
    Floats x = random(n);
    if (i % 2) {
      Halves h = halves(x);
      x = floatsOf(h);
      bf16s.push_back(std::make_unique<Buffer<shardc_rt_bf16>>(h));
      list.push_back({bf16s.back()->get(), n, 1});
    } else {
      f32s.push_back(std::make_unique<Buffer<float>>(x));
      list.push_back({f32s.back()->get(), n, 0});
    }
    for (float v : x)
      want += static_cast<double>(v) * v;
  }
  Buffer<float> sum(1), again(1);
  shardc_rt_cuda_sum_squares(kernels, list.data(), count, sum.get());
  shardc_rt_cuda_sum_squares(kernels, list.data(), count, again.get());
  float got = sum.download()[0];
  double error = std::fabs(got - want) / want;
  char detail[64];
  std::snprintf(detail, sizeof(detail), "%.6g vs %.6g in f64, error %.1e", got,
                want, error);
  report(error <= std::ldexp(1.0, -23) && again.download()[0] == got,
         "sum_squares: 53 tensors, f32 and bf16", detail);

  // clip_grad_norm_ in f32: norm = sqrt(s0 + s1), min(1, max / (norm + 1e-6)).
  Buffer<float> sums(Floats{3.0f, 13.0f}), coef(1), norm(1);
  const float *parts[] = {sums.get(), sums.get() + 1};
  float expected = std::min(1.0f, 1.5f / (std::sqrt(3.0f + 13.0f) + 1e-6f));
  shardc_rt_cuda_clip_coefficient(kernels, parts, 2, 1.5f, coef.get(),
                                  norm.get());
  bool exact = norm.download()[0] == 4.0f && coef.download()[0] == expected;
  shardc_rt_cuda_clip_coefficient(kernels, parts, 2, 5.0f, coef.get(),
                                  norm.get());
  exact = exact && coef.download()[0] == 1.0f;
  // A NaN norm makes every gradient NaN, as torch's clamp(max=1) does.
  sums.upload({3.0f, NAN});
  shardc_rt_cuda_clip_coefficient(kernels, parts, 2, 1.5f, coef.get(),
                                  norm.get());
  report(exact && std::isnan(coef.download()[0]),
         "clip_coefficient: norm 4, max 1.5 and 5; a NaN norm", "");

  int64_t n = 4099;
  Floats param = random(n), m(n, 0.0f), v(n, 0.0f), grad = random(n);
  Buffer<float> dparam(param), dm(m), dv(v), dgrad(grad),
      dclip(Floats{expected});
  shardc_rt_cuda_adamw_tensor t = {
      dparam.get(), dm.get(), dv.get(), dgrad.get(),
      nullptr,      n,        0,        dclip.get()};
  shardc_rt_cuda_adamw_multi_f32(kernels, &t, 1, 1e-3f, 0.9f, 0.999f, 1e-8f,
                                 0.1f, 1);
  for (float &g : grad)
    g *= expected;
  referenceAdamw(1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 1, param.data(), m.data(),
                 v.data(), grad.data(), n);
  report(dparam.download() == param && dm.download() == m && dv.download() == v,
         "adamw multi-tensor with a clip coefficient: bit for bit", "");
}

//===----------------------------------------------------------------------===//
// Fused kernels and GEMM epilogues
//===----------------------------------------------------------------------===//

/// A kernels object of the fused checks and the tags of its checks' names:
/// GEMM epilogues on (create's default) or off (set_gemm_epilogues).
/// bench/gpu/run.sh turns the epilogues off for its runs when a check tagged
/// "[gemm epilogue on]" fails; add_layernorm and layernorm_grad_add, not
/// GEMMs, run on both objects under the plain tags.
struct Switch {
  shardc_rt_cuda_kernels *k;
  const char *gemmTag, *tag;
  bool on;
  /// The least tolerance of its checks (TF32: 1e-2, as the TF32 linear).
  double floor;
};
std::vector<Switch> switches;

/// The outputs of cuBLASLt's GELU epilogue (linear_gelu's y, fused).
/// CUTLASS's GELU epilogues evaluate tanh with tanh.approx.f32 (relative
/// error 2^-11), and cuBLASLt's may too: y = 0.5 x (1 + tanh u) is then off
/// by up to 2.5e-4 |x|, ~2.5e-3 of the mixed bound at the tails of these
/// checks' preactivations (|pre| < 6, mean |y| ~ 0.6), where f32 rounding
/// alone gives 1e-7; bf16 adds the rounding of pre before the CPU's gelu
/// (up to ~6e-3). A bias added after GELU, a missing GELU, a wrong layout
/// or transpose are off by 1e-1 or more. The checks print their largest
/// error: where cuBLASLt turns out to be exact, this can come down.
constexpr double kGeluEpilogueTolerance = 2e-2;
/// The outputs of cuBLASLt's DGELU epilogue (matmul_gelu_grad, fused) where
/// pre is in GELU's curved part (here |pre| < 3): an approximate tanh t in
/// gelu' = 0.5 (1 + t) + 0.5 x (1 - t^2) s (1 + 3 a x^2) is off by up to
/// 3e-3 at |x| = 3, times the product's |dy| of up to ~4 of its standard
/// deviation: up to 3e-2 of the mixed bound (mean |dx| ~ 0.4 of that
/// deviation). GELU's derivative in place of its value, or at the wrong
/// elements of pre, is off by O(1). Where pre saturates GELU (|pre| = 12:
/// gelu' is 0 or 1 for any tanh that rounds tanh(71) to 1, as f32 does), the
/// DGELU checks are exact (kTolerance), which pins the product's accuracy
/// and pre's layout.
constexpr double kDGeluEpilogueTolerance = 1e-1;

/// linear_gelu's y in bf16 where GELU runs apart from the GEMM: a rounding
/// flip of the bf16 pre (one ulp) carried through GELU's slope (up to 1.13)
/// plus y's own rounding make two ulps of y, 2^-6 relative just above a
/// power of two. An H200 showed it: 2.046875 against the CPU's 2.015625,
/// 1.2e-2 of the mixed bound, epilogue on (n = 65: not fused) and off alike.
constexpr double kBf16GeluTolerance = 1.6e-2;

/// The tolerance of a fused check of E (f32 or bf16): the usual one, or
/// `looser` (an epilogue's approximate GELU), and at least the switch's.
template <typename E> double toleranceOf(const Switch &s, double looser = 0) {
  return std::max({std::is_same_v<E, float> ? kTolerance : kBf16Tolerance,
                   looser, s.floor});
}

/// Values of type E (f32, or bf16: rounded).
template <typename E> std::vector<E> stored(const Floats &f) {
  if constexpr (std::is_same_v<E, float>)
    return f;
  else
    return halves(f);
}

/// A fused check: f32 results against the double reference, bf16 ones
/// against the CPU's bf16 kernel.
void check(const std::string &name, const Floats &got, const Doubles &want,
           double tolerance) {
  compare(name, got, want, tolerance);
}
void check(const std::string &name, const Halves &got, const Halves &want,
           double tolerance) {
  compare(name + " (bf16)", floatsOf(got), widen(floatsOf(want)), tolerance);
}

/// The reference's type: double for f32 results, bf16 for bf16 ones.
template <typename E>
using Reference = std::conditional_t<std::is_same_v<E, float>, Doubles, Halves>;

// The CUDA calls by element type.
void cudaFill(shardc_rt_cuda_kernels *k, float *p, int64_t n) {
  shardc_rt_cuda_fill_f32(k, p, 123.0f, n);
}
void cudaFill(shardc_rt_cuda_kernels *k, shardc_rt_bf16 *p, int64_t n) {
  shardc_rt_cuda_fill_bf16(k, p, 123.0f, n);
}
void cudaLinear(shardc_rt_cuda_kernels *k, const float *x, const float *w,
                const float *b, float *y, int64_t m, int64_t kd, int64_t n) {
  shardc_rt_cuda_linear_f32(k, x, w, b, y, m, kd, n);
}
void cudaLinear(shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *x,
                const shardc_rt_bf16 *w, const shardc_rt_bf16 *b,
                shardc_rt_bf16 *y, int64_t m, int64_t kd, int64_t n) {
  shardc_rt_cuda_linear_bf16(k, x, w, b, y, m, kd, n);
}
void cudaLinearGelu(shardc_rt_cuda_kernels *k, const float *x, const float *w,
                    const float *b, float *pre, float *y, int64_t m, int64_t kd,
                    int64_t n) {
  shardc_rt_cuda_linear_gelu_f32(k, x, w, b, pre, y, m, kd, n);
}
void cudaLinearGelu(shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *x,
                    const shardc_rt_bf16 *w, const shardc_rt_bf16 *b,
                    shardc_rt_bf16 *pre, shardc_rt_bf16 *y, int64_t m,
                    int64_t kd, int64_t n) {
  shardc_rt_cuda_linear_gelu_bf16(k, x, w, b, pre, y, m, kd, n);
}
void cudaMatmulGeluGrad(shardc_rt_cuda_kernels *k, const float *lhs,
                        const float *rhs, const float *pre, float *dx,
                        int64_t m, int64_t kd, int64_t n, int tl, int tr) {
  shardc_rt_cuda_matmul_gelu_grad_f32(k, lhs, rhs, pre, dx, m, kd, n, tl, tr);
}
void cudaMatmulGeluGrad(shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *lhs,
                        const shardc_rt_bf16 *rhs, const shardc_rt_bf16 *pre,
                        shardc_rt_bf16 *dx, int64_t m, int64_t kd, int64_t n,
                        int tl, int tr) {
  shardc_rt_cuda_matmul_gelu_grad_bf16(k, lhs, rhs, pre, dx, m, kd, n, tl, tr);
}
void cudaMatmulBiasGrad(shardc_rt_cuda_kernels *k, const float *lhs,
                        const float *rhs, float *dw, float *db, int64_t m,
                        int64_t kd, int64_t n, int tr) {
  shardc_rt_cuda_matmul_bias_grad_f32(k, lhs, rhs, dw, db, m, kd, n, 1, tr);
}
void cudaMatmulBiasGrad(shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *lhs,
                        const shardc_rt_bf16 *rhs, shardc_rt_bf16 *dw,
                        shardc_rt_bf16 *db, int64_t m, int64_t kd, int64_t n,
                        int tr) {
  shardc_rt_cuda_matmul_bias_grad_bf16(k, lhs, rhs, dw, db, m, kd, n, 1, tr);
}
void cudaAdd(shardc_rt_cuda_kernels *k, const float *a, const float *b,
             float *y, int64_t n) {
  shardc_rt_cuda_add_f32(k, a, b, y, n, n);
}
void cudaAdd(shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *a,
             const shardc_rt_bf16 *b, shardc_rt_bf16 *y, int64_t n) {
  shardc_rt_cuda_add_bf16(k, a, b, y, n, n);
}
void cudaLayerNorm(shardc_rt_cuda_kernels *k, const float *x, const float *w,
                   const float *b, float *y, int64_t rows, int64_t c) {
  shardc_rt_cuda_layernorm_f32(k, x, w, b, y, rows, c, 1e-5);
}
void cudaLayerNorm(shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *x,
                   const shardc_rt_bf16 *w, const shardc_rt_bf16 *b,
                   shardc_rt_bf16 *y, int64_t rows, int64_t c) {
  shardc_rt_cuda_layernorm_bf16(k, x, w, b, y, rows, c, 1e-5);
}
void cudaAddLayerNorm(shardc_rt_cuda_kernels *k, const float *lhs,
                      const float *rhs, const float *w, const float *b,
                      float *sum, float *y, int64_t rows, int64_t c) {
  shardc_rt_cuda_add_layernorm_f32(k, lhs, rhs, w, b, sum, y, rows, c, 1e-5);
}
void cudaAddLayerNorm(shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *lhs,
                      const shardc_rt_bf16 *rhs, const shardc_rt_bf16 *w,
                      const shardc_rt_bf16 *b, shardc_rt_bf16 *sum,
                      shardc_rt_bf16 *y, int64_t rows, int64_t c) {
  shardc_rt_cuda_add_layernorm_bf16(k, lhs, rhs, w, b, sum, y, rows, c, 1e-5);
}
void cudaLayerNormGrad(shardc_rt_cuda_kernels *k, const float *dy,
                       const float *x, const float *w, float *dx, float *dw,
                       float *db, int64_t rows, int64_t c) {
  shardc_rt_cuda_layernorm_grad_f32(k, dy, x, w, dx, dw, db, rows, c, 1e-5);
}
void cudaLayerNormGrad(shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *dy,
                       const shardc_rt_bf16 *x, const shardc_rt_bf16 *w,
                       shardc_rt_bf16 *dx, shardc_rt_bf16 *dw,
                       shardc_rt_bf16 *db, int64_t rows, int64_t c) {
  shardc_rt_cuda_layernorm_grad_bf16(k, dy, x, w, dx, dw, db, rows, c, 1e-5);
}
void cudaLayerNormGradAdd(shardc_rt_cuda_kernels *k, const float *dy,
                          const float *x, const float *w, const float *addend,
                          float *dx, float *dw, float *db, int64_t rows,
                          int64_t c) {
  shardc_rt_cuda_layernorm_grad_add_f32(k, dy, x, w, addend, dx, dw, db, rows,
                                        c, 1e-5);
}
void cudaLayerNormGradAdd(shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *dy,
                          const shardc_rt_bf16 *x, const shardc_rt_bf16 *w,
                          const shardc_rt_bf16 *addend, shardc_rt_bf16 *dx,
                          shardc_rt_bf16 *dw, shardc_rt_bf16 *db, int64_t rows,
                          int64_t c) {
  shardc_rt_cuda_layernorm_grad_add_bf16(k, dy, x, w, addend, dx, dw, db, rows,
                                         c, 1e-5);
}
void cudaAccumulate(shardc_rt_cuda_kernels *k, float *dst, const float *src,
                    int64_t n) {
  shardc_rt_cuda_accumulate_f32(k, dst, src, n);
}
void cudaAccumulate(shardc_rt_cuda_kernels *k, shardc_rt_bf16 *dst,
                    const shardc_rt_bf16 *src, int64_t n) {
  shardc_rt_cuda_accumulate_bf16(k, dst, src, n);
}

/// The rows a GEMM check's reference is computed for: all of them up to
/// kSampledRows, else kSampledRows spread over [0, rows), the first and the
/// last included. A GPT-2-sized product on every row would take the CPU
/// reference (the device machine's reference BLAS, in double) minutes; a
/// wrong layout or transpose shows on any row.
constexpr int64_t kSampledRows = 64;

std::vector<int64_t> sampledRows(int64_t rows) {
  std::vector<int64_t> picked;
  if (rows <= kSampledRows) {
    for (int64_t r = 0; r < rows; ++r)
      picked.push_back(r);
    return picked;
  }
  for (int64_t i = 0; i < kSampledRows; ++i)
    picked.push_back(i * (rows - 1) / (kSampledRows - 1));
  return picked;
}

/// The picked rows of a row-major [*, cols] matrix, as a [picked, cols] one.
template <typename V>
std::vector<V> gatherRows(const std::vector<V> &matrix, int64_t cols,
                          const std::vector<int64_t> &rows) {
  std::vector<V> out;
  out.reserve(rows.size() * cols);
  for (int64_t r : rows)
    out.insert(out.end(), matrix.begin() + r * cols,
               matrix.begin() + (r + 1) * cols);
  return out;
}

/// The picked rows of op(lhs) as a row-major [picked, kd] matrix: rows of
/// lhs [m, kd], or columns of lhs [kd, m] where it is transposed.
template <typename V>
std::vector<V> gatherOpRows(const std::vector<V> &lhs, int64_t m, int64_t kd,
                            bool transposed, const std::vector<int64_t> &rows) {
  if (!transposed)
    return gatherRows(lhs, kd, rows);
  std::vector<V> out;
  out.reserve(rows.size() * kd);
  for (int64_t r : rows)
    for (int64_t j = 0; j < kd; ++j)
      out.push_back(lhs[j * m + r]);
  return out;
}

std::string linearName(const char *op, int64_t m, int64_t kd, int64_t n,
                       bool bias) {
  return std::string(op) + " " + shape({m, kd}) + " x " + shape({n, kd}) +
         "^T" + (bias ? " + b" : "");
}

/// linear with a bias (cuBLASLt's BIAS epilogue, any n) on every switch.
template <typename E> void testLinearBias(int64_t m, int64_t kd, int64_t n) {
  std::vector<E> x = stored<E>(random(m * kd)), w = stored<E>(random(n * kd)),
                 b = stored<E>(random(n));
  std::vector<int64_t> rows = sampledRows(m);
  int64_t r = static_cast<int64_t>(rows.size());
  std::vector<E> xs = gatherRows(x, kd, rows);
  Reference<E> want(r * n);
  if constexpr (std::is_same_v<E, float>) {
    Doubles bb = widen(b);
    cpu::linear<double>(widen(xs).data(), widen(w).data(), bb.data(),
                        want.data(), r, kd, n);
  } else {
    shardc_rt_linear_bf16(xs.data(), w.data(), b.data(), want.data(), r, kd, n);
  }
  Buffer<E> dx(x), dw(w), db(b), dy(m * n);
  for (const Switch &s : switches) {
    cudaFill(s.k, dy.get(), m * n); // overwritten
    cudaLinear(s.k, dx.get(), dw.get(), db.get(), dy.get(), m, kd, n);
    check(linearName("linear", m, kd, n, true) + s.gemmTag,
          gatherRows(dy.download(), n, rows), want, toleranceOf<E>(s));
  }
}

/// linear_gelu on every switch: pre (the epilogue's aux output, exact) and
/// y (its GELU). x in [-1, 1), w scaled so that pre has a standard
/// deviation of about 1.5 (GELU's curved part and both tails); b may be
/// null; `misaligned` offsets x by one element (4 or 2 bytes: the fused
/// path must fall back, and the results not change).
template <typename E>
void testLinearGelu(int64_t m, int64_t kd, int64_t n, bool bias,
                    bool misaligned = false) {
  float scale =
      kd > 0 ? std::min(1.0f, 4.5f / std::sqrt(static_cast<float>(kd))) : 1.0f;
  std::vector<E> x = stored<E>(random(m * kd)),
                 w = stored<E>(random(n * kd, -scale, scale)),
                 b = stored<E>(random(n, -0.5f, 0.5f));
  std::vector<int64_t> rows = sampledRows(m);
  int64_t r = static_cast<int64_t>(rows.size());
  std::vector<E> xs = gatherRows(x, kd, rows);
  Reference<E> wantPre(r * n), wantY(r * n);
  if constexpr (std::is_same_v<E, float>) {
    Doubles bb = widen(b);
    cpu::linear<double>(widen(xs).data(), widen(w).data(),
                        bias ? bb.data() : nullptr, wantPre.data(), r, kd, n);
    cpu::gelu<double>(wantPre.data(), wantY.data(), r * n);
  } else {
    shardc_rt_linear_gelu_bf16(xs.data(), w.data(), bias ? b.data() : nullptr,
                               wantPre.data(), wantY.data(), r, kd, n);
  }
  std::vector<E> padded = x;
  if (misaligned)
    padded.insert(padded.begin(), E{});
  Buffer<E> dx(padded), dw(w), db(b), dpre(m * n), dy(m * n);
  const E *xp = dx.get() + (misaligned ? 1 : 0);
  std::string name = linearName("linear_gelu", m, kd, n, bias) +
                     (misaligned ? " (x misaligned)" : "");
  for (const Switch &s : switches) {
    cudaFill(s.k, dpre.get(), m * n); // overwritten
    cudaFill(s.k, dy.get(), m * n);
    cudaLinearGelu(s.k, xp, dw.get(), bias ? db.get() : nullptr, dpre.get(),
                   dy.get(), m, kd, n);
    // Where cuBLASLt's GELU may have run (else the GELU kernel's, exact).
    bool fused = s.on && n % 8 == 0 && kd > 0 && !misaligned;
    check(name + ": pre" + s.gemmTag, gatherRows(dpre.download(), n, rows),
          wantPre, toleranceOf<E>(s));
    check(name + ": y" + s.gemmTag, gatherRows(dy.download(), n, rows), wantY,
          toleranceOf<E>(s, fused                      ? kGeluEpilogueTolerance
                            : std::is_same_v<E, float> ? 0
                                                       : kBf16GeluTolerance));
  }
}

/// matmul_gelu_grad on every switch. `saturated`: pre is +-12 (gelu' is 1
/// or 0 to the bit however GELU is evaluated: dx is the product or 0,
/// checked exactly); else pre in [-3, 3) (GELU's curved part).
template <typename E>
void testMatmulGeluGrad(int64_t m, int64_t kd, int64_t n, bool tl, bool tr,
                        bool saturated) {
  std::vector<E> lhs = stored<E>(random(m * kd)),
                 rhs = stored<E>(random(kd * n));
  Floats preValues = random(m * n, -3.0f, 3.0f);
  if (saturated)
    for (float &v : preValues)
      v = v < 0.0f ? -12.0f : 12.0f;
  std::vector<E> pre = stored<E>(preValues);
  std::vector<int64_t> rows = sampledRows(m);
  int64_t r = static_cast<int64_t>(rows.size());
  std::vector<E> ls = gatherOpRows(lhs, m, kd, tl, rows),
                 ps = gatherRows(pre, n, rows);
  Reference<E> want(r * n);
  if constexpr (std::is_same_v<E, float>) {
    Doubles product(r * n);
    cpu::matmul<double>(widen(ls).data(), widen(rhs).data(), product.data(), 1,
                        r, kd, n, false, tr);
    cpu::geluGrad<double>(product.data(), widen(ps).data(), want.data(), r * n);
  } else {
    shardc_rt_matmul_gelu_grad_bf16(ls.data(), rhs.data(), ps.data(),
                                    want.data(), r, kd, n, 0, tr);
  }
  Buffer<E> dl(lhs), dr(rhs), dpre(pre), ddx(m * n);
  std::string name = "matmul_gelu_grad " + shape({m, kd, n}) +
                     (tl ? " lhs^T" : "") + (tr ? " rhs^T" : "") +
                     (saturated ? " pre +-12" : " pre in [-3, 3)");
  for (const Switch &s : switches) {
    cudaFill(s.k, ddx.get(), m * n); // overwritten
    cudaMatmulGeluGrad(s.k, dl.get(), dr.get(), dpre.get(), ddx.get(), m, kd, n,
                       tl, tr);
    // Where cuBLASLt's DGELU may have run: bf16 alone (Kernels.cu).
    bool fused =
        s.on && !std::is_same_v<E, float> && n % 8 == 0 && kd > 0 && !saturated;
    check(name + s.gemmTag, gatherRows(ddx.download(), n, rows), want,
          toleranceOf<E>(s, fused ? kDGeluEpilogueTolerance : 0));
  }
}

/// matmul_bias_grad on every switch: dw = lhs^T op(rhs) [m, n] and db = the
/// kd rows of lhs [kd, m] summed, against the CPU (f32: in double; bf16:
/// its matmul and sum_to kernels); fused (cuBLASLt's BGRADB) where the
/// epilogues are on and cuBLASLt takes the shape, else matmul, then sum_to.
template <typename E>
void testMatmulBiasGrad(int64_t kd, int64_t m, int64_t n, bool tr) {
  std::vector<E> lhs = stored<E>(random(kd * m)),
                 rhs = stored<E>(random(kd * n));
  std::vector<int64_t> rows = sampledRows(m);
  int64_t r = static_cast<int64_t>(rows.size());
  std::vector<E> ls = gatherOpRows(lhs, m, kd, true, rows);
  Reference<E> wantDw(r * n), wantDb(m);
  if constexpr (std::is_same_v<E, float>) {
    cpu::matmul<double>(widen(ls).data(), widen(rhs).data(), wantDw.data(), 1,
                        r, kd, n, false, tr);
    cpu::sumTo<double>(widen(lhs).data(), wantDb.data(), kd, m);
  } else {
    shardc_rt_matmul_bf16(ls.data(), rhs.data(), wantDw.data(), 1, r, kd, n, 0,
                          tr);
    shardc_rt_sum_to_bf16(lhs.data(), wantDb.data(), kd, m);
  }
  Buffer<E> dl(lhs), dr(rhs), ddw(m * n), ddb(m);
  std::string name =
      "matmul_bias_grad " + shape({kd, m, n}) + (tr ? " rhs^T" : "");
  for (const Switch &s : switches) {
    cudaFill(s.k, ddw.get(), m * n); // overwritten
    cudaFill(s.k, ddb.get(), m);
    cudaMatmulBiasGrad(s.k, dl.get(), dr.get(), ddw.get(), ddb.get(), m, kd, n,
                       tr);
    check(name + ": dw" + s.gemmTag, gatherRows(ddw.download(), n, rows),
          wantDw, toleranceOf<E>(s));
    check(name + ": db" + s.gemmTag, ddb.download(), wantDb, toleranceOf<E>(s));
  }
}

/// add_layernorm on every switch (not a GEMM: the switch must not matter):
/// sum and y against the CPU, and against the GPU's unfused pair bit for
/// bit (sum is add's; y is layernorm's of the stored sum). `misaligned`:
/// rhs starts an element into its allocation (16-byte loads cannot take
/// it), the unfused pair's tensors aligned.
template <typename E>
void testAddLayerNorm(int64_t rows, int64_t c, bool misaligned = false) {
  int64_t n = rows * c;
  Floats lhsValues = random(n);
  for (float &v : lhsValues)
    v += 3.0f; // a large mean: the variance must be of centered values
  std::vector<E> lhs = stored<E>(lhsValues), rhs = stored<E>(random(n)),
                 w = stored<E>(random(c, 0.5f, 1.5f)), b = stored<E>(random(c));
  Reference<E> wantSum(n), wantY(n);
  if constexpr (std::is_same_v<E, float>) {
    cpu::add<double>(widen(lhs).data(), widen(rhs).data(), wantSum.data(), n,
                     n);
    cpu::layerNorm<double>(wantSum.data(), widen(w).data(), widen(b).data(),
                           wantY.data(), rows, c, 1e-5);
  } else {
    shardc_rt_add_layernorm_bf16(lhs.data(), rhs.data(), w.data(), b.data(),
                                 wantSum.data(), wantY.data(), rows, c, 1e-5);
  }
  std::vector<E> shiftedRhs(misaligned ? 1 : 0);
  shiftedRhs.insert(shiftedRhs.end(), rhs.begin(), rhs.end());
  Buffer<E> dl(lhs), dr(shiftedRhs), dw(w), db(b), dsum(n), dy(n), usum(n),
      uy(n), alignedRhs(rhs);
  const E *rhsAt = dr.get() + (misaligned ? 1 : 0);
  std::string name = "add_layernorm " + shape({rows, c}) +
                     (misaligned ? " (rhs misaligned)" : "");
  cudaAdd(kernels, dl.get(), alignedRhs.get(), usum.get(), n);
  cudaLayerNorm(kernels, usum.get(), dw.get(), db.get(), uy.get(), rows, c);
  std::vector<E> unfusedSum = usum.download(), unfusedY = uy.download();
  for (const Switch &s : switches) {
    cudaFill(s.k, dsum.get(), n); // overwritten
    cudaFill(s.k, dy.get(), n);
    cudaAddLayerNorm(s.k, dl.get(), rhsAt, dw.get(), db.get(), dsum.get(),
                     dy.get(), rows, c);
    std::vector<E> sum = dsum.download(), y = dy.download();
    check(name + ": sum" + s.tag, sum, wantSum, toleranceOf<E>(s));
    check(name + ": y" + s.tag, y, wantY, toleranceOf<E>(s));
    checkSameBits(name + ": sum is add's" + s.tag, sum, unfusedSum);
    checkSameBits(name + ": y is layernorm's of the stored sum" + s.tag, y,
                  unfusedY);
  }
}

/// layernorm_grad_add on every switch (not a GEMM): dx, dweight, dbias
/// against the CPU, and against the GPU's unfused pair bit for bit (dx is
/// accumulate's addend + layernorm_grad's dx; dweight and dbias are
/// layernorm_grad's). `misaligned`: the addend starts an element into its
/// allocation, the unfused pair's tensors aligned.
template <typename E>
void testLayerNormGradAdd(int64_t rows, int64_t c, bool misaligned = false) {
  int64_t n = rows * c;
  std::vector<E> dy = stored<E>(random(n)), x = stored<E>(random(n)),
                 w = stored<E>(random(c, 0.5f, 1.5f)),
                 addend = stored<E>(random(n));
  Reference<E> wantDx(n), wantDw(c), wantDb(c);
  if constexpr (std::is_same_v<E, float>) {
    Doubles grad(n);
    cpu::layerNormGrad<double>(widen(dy).data(), widen(x).data(),
                               widen(w).data(), grad.data(), wantDw.data(),
                               wantDb.data(), rows, c, 1e-5);
    cpu::add<double>(widen(addend).data(), grad.data(), wantDx.data(), n, n);
  } else {
    shardc_rt_layernorm_grad_add_bf16(
        dy.data(), x.data(), w.data(), addend.data(), wantDx.data(),
        wantDw.data(), wantDb.data(), rows, c, 1e-5);
  }
  std::vector<E> shiftedAddend(misaligned ? 1 : 0);
  shiftedAddend.insert(shiftedAddend.end(), addend.begin(), addend.end());
  Buffer<E> ddy(dy), dx(x), dw(w), da(shiftedAddend), ddx(n), ddw(c), ddb(c);
  const E *addendAt = da.get() + (misaligned ? 1 : 0);
  Buffer<E> udx(n), udw(c), udb(c), usum(addend);
  cudaLayerNormGrad(kernels, ddy.get(), dx.get(), dw.get(), udx.get(),
                    udw.get(), udb.get(), rows, c);
  cudaAccumulate(kernels, usum.get(), udx.get(), n);
  std::vector<E> unfusedDx = usum.download(), unfusedDw = udw.download(),
                 unfusedDb = udb.download();
  std::string name = "layernorm_grad_add " + shape({rows, c}) +
                     (misaligned ? " (addend misaligned)" : "");
  for (const Switch &s : switches) {
    cudaFill(s.k, ddx.get(), n); // overwritten
    cudaFill(s.k, ddw.get(), c);
    cudaFill(s.k, ddb.get(), c);
    cudaLayerNormGradAdd(s.k, ddy.get(), dx.get(), dw.get(), addendAt,
                         ddx.get(), ddw.get(), ddb.get(), rows, c);
    std::vector<E> gotDx = ddx.download(), gotDw = ddw.download(),
                   gotDb = ddb.download();
    check(name + ": dx" + s.tag, gotDx, wantDx, toleranceOf<E>(s));
    check(name + ": dweight" + s.tag, gotDw, wantDw, toleranceOf<E>(s));
    check(name + ": dbias" + s.tag, gotDb, wantDb, toleranceOf<E>(s));
    checkSameBits(name + ": dx is addend + layernorm_grad's dx" + s.tag, gotDx,
                  unfusedDx);
    checkSameBits(name + ": dweight is layernorm_grad's" + s.tag, gotDw,
                  unfusedDw);
    checkSameBits(name + ": dbias is layernorm_grad's" + s.tag, gotDb,
                  unfusedDb);
  }
}

/// Every fused check of one element type E.
template <typename E> void testFused() {
  // The plain linear's bias through the BIAS epilogue: n odd (no aux: it
  // fuses), GPT-2's attention and MLP output projections.
  testLinearBias<E>(37, 33, 65);
  testLinearBias<E>(1500, 96, 64);
  testLinearBias<E>(1024, 3072, 768);
  // linear_gelu: with and without bias, n a multiple of 8 (fused), n odd
  // (cuBLASLt needs pre's leading dimension a multiple of 8: unfused), one
  // row, k = 0 (unfused: pre = b), x misaligned (unfused), more than 1024
  // rows, GPT-2's MLP (m = 4 x 1024, k = 768, n = 3072).
  testLinearGelu<E>(37, 33, 64, true);
  testLinearGelu<E>(37, 33, 64, false);
  testLinearGelu<E>(37, 33, 65, true);
  testLinearGelu<E>(1, 20, 8, true);
  testLinearGelu<E>(5, 0, 8, true);
  testLinearGelu<E>(37, 32, 64, true, /*misaligned=*/true);
  testLinearGelu<E>(1500, 96, 256, false);
  testLinearGelu<E>(4096, 768, 3072, true);
  // matmul_gelu_grad: every transpose combination (the compiler emits
  // them), saturated and curved pre; n odd (unfused); k = 0; GPT-2's MLP
  // backward (dh = dy w_proj: m = 4 x 1024, k = 768, n = 3072).
  for (int tl = 0; tl < 2; ++tl)
    for (int tr = 0; tr < 2; ++tr)
      for (bool saturated : {true, false})
        testMatmulGeluGrad<E>(37, 33, 64, tl, tr, saturated);
  testMatmulGeluGrad<E>(40, 7, 33, false, true, false);
  testMatmulGeluGrad<E>(40, 7, 33, true, false, true);
  testMatmulGeluGrad<E>(3, 0, 8, false, false, false);
  testMatmulGeluGrad<E>(4096, 768, 3072, false, false, true);
  testMatmulGeluGrad<E>(4096, 768, 3072, false, false, false);
  // matmul_bias_grad (lhs [kd, m]): odd sizes, rhs transposed, no rows (dw
  // and db zeros), GPT-2's MLP output projection (4 x 1024 rows, 768 out,
  // 3072 in).
  testMatmulBiasGrad<E>(37, 33, 65, false);
  testMatmulBiasGrad<E>(1500, 64, 96, true);
  testMatmulBiasGrad<E>(0, 16, 8, false);
  testMatmulBiasGrad<E>(4096, 768, 3072, false);
  // add_layernorm and layernorm_grad_add: one element, C not a multiple of
  // 32, more than 1024 rows, GPT-2's (4 x 1024 rows of 768). The chunked
  // row kernels take rows of whole 16-byte chunks up to 8 a lane: 100 (f32:
  // lanes without a chunk), 768, 256 (one chunk a lane in bf16), 1600
  // (bf16: 7 a lane, the last in part), 2048 (bf16: 8); 2056 is 9 a lane in
  // bf16, so the element-wise kernels take it, as they take 1600 and 2048
  // in f32 and 33 and 100 in bf16.
  for (int64_t c : {1, 33, 100, 256, 768, 1600, 2048, 2056}) {
    int64_t rows = c == 100 ? 1500 : c == 768 ? 4096 : c == 1 ? 1 : 7;
    testAddLayerNorm<E>(rows, c);
    testLayerNormGradAdd<E>(rows, c);
  }
  // A misaligned rhs or addend: element loads in the same lanes, the same
  // bits as the aligned unfused pair.
  testAddLayerNorm<E>(9, 768, /*misaligned=*/true);
  testLayerNormGradAdd<E>(9, 1600, /*misaligned=*/true);
}

} // namespace

int main() {
  int devices = 0;
  cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("cudakernels: no CUDA device (%s), skipped\n",
                status != cudaSuccess ? cudaGetErrorString(status)
                                      : "0 devices");
    return 77;
  }
  TEST_CUDA_CHECK(cudaSetDevice(0));
  TEST_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  kernels = shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/0);
  report(
      !shardc_rt_cuda_kernels_configure(kernels, "SHARDC_RT_CUDA_FLASH", "2"),
      "configure: SHARDC_RT_CUDA_FLASH is not a setting", "");

  // GEMMs: odd sizes, a single element, more than 1024 rows, k = 0.
  testLinear(kernels, 1, 1, 1, true);
  testLinear(kernels, 37, 33, 65, true);
  testLinear(kernels, 37, 33, 65, false);
  testLinear(kernels, 1500, 96, 50, true);
  testLinear(kernels, 5, 0, 7, true);
  testLinear(kernels, 5, 0, 7, false);
  for (int tl = 0; tl < 2; ++tl)
    for (int tr = 0; tr < 2; ++tr) {
      testMatmul(3, 17, 33, 9, tl, tr);
      testMatmul(1, 40, 7, 1, tl, tr);
    }
  testMatmul(2, 3, 0, 4, false, false);

  testElementwise(1);
  testElementwise(10007);
  testElementwise(37 * 1001);
  testElementwise(96 * 500);
  testSumTo(1500, 77);
  testSumTo(3, 33);
  testSumTo(1, 5);
  testSumTo(0, 5);
  testSumTo(20000, 3);
  // Rows of whole 16-byte chunks (4 floats, 8 bf16) are summed a chunk a
  // thread: one chunk, GPT-2's biases (768, 2304, 3072 columns) over more
  // rows than a block's share, and 100 bf16 columns (not whole chunks).
  testSumTo(9, 4);
  testSumTo(5000, 768);
  testSumTo(300, 3072);
  testSumToBf16(130, 8);
  testSumToBf16(5000, 768);
  testSumToBf16(700, 2304);
  testSumToBf16(50, 100);
  testSumToBf16(700, 2304, /*offset=*/1);

  testLayerNorm(1, 1, 0.0f);
  testLayerNorm(1500, 100, 0.0f);
  testLayerNorm(7, 768, 3.0f);
  testLayerNorm(3, 1000, 0.0f);
  testLayerNormGrad(1500, 100);
  testLayerNormGrad(7, 768);
  testLayerNormGrad(2, 33);
  testLayerNormGrad(0, 5);
  // Fused column sums with more rows than the grid's warps (cudasim's 132
  // multiprocessors, 4 blocks each of 8 warps: 4,224), so that a warp sums
  // several rows; and c past a block's shared memory (3,632 floats per
  // warp pair): the separate column pass.
  testLayerNormGrad(9000, 40);
  testLayerNormGrad(3, 4000);

  testEmbedding(1100, 50, 33);
  testEmbedding(3, 7, 1);
  testEmbedding(300, 40, 64); // rows of 16-byte chunks: copied by chunk
  testEmbeddingGrad(1100, 50, 33);
  testEmbeddingGrad(5, 40, 20);
  testEmbeddingGrad(0, 6, 3);
  // GPT-2's vocabulary: four 4-bit passes of the sort; one id in every
  // position (one run of all of them); positions as ids, as wpe's gradient
  // (each id once per sequence, the runs strided).
  testEmbeddingGrad(4100, 50304, 5);
  testEmbeddingGrad(3000, 1, 7);
  testEmbeddingGrad(3000, 9, 4, Ids(3000, 8));
  Ids positions(4 * 700);
  for (size_t i = 0; i < positions.size(); ++i)
    positions[i] = static_cast<int32_t>(i % 700);
  testEmbeddingGrad(4 * 700, 700, 6, positions);
  // Runs at and either side of one and two groups, among text-like ids
  // (id k about as frequent as 1 / (k + 1), its run of many groups), in
  // random order.
  constexpr int32_t kGroup = SHARDC_RT_EMBEDDING_GRAD_GROUP;
  Ids mixed;
  for (int32_t run : {kGroup - 1, kGroup, kGroup + 1, 2 * kGroup,
                      2 * kGroup + 1, 3 * kGroup - 1})
    mixed.insert(mixed.end(), run, 1000 + run);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int i = 0; i < 5000; ++i) // P(id < k) = log(k + 1) / log(1001)
    mixed.push_back(static_cast<int32_t>(
        std::min(999.0, std::exp(unit(rng) * std::log(1001.0)) - 1.0)));
  std::shuffle(mixed.begin(), mixed.end(), rng);
  testEmbeddingGrad(static_cast<int64_t>(mixed.size()), 1200, 9, mixed);

  // Attention: T = 1, C not a multiple of 32, batches over heads (heads >= B)
  // and over batch elements (B > heads), one head of one sequence.
  testAttention(kernels, 2, 1, 12, 3, 1.0f);
  testAttention(kernels, 2, 37, 48, 4, 1.0f);
  testAttention(kernels, 3, 70, 20, 5, 1.0f);
  testAttention(kernels, 5, 9, 6, 2, 1.0f);
  testAttention(kernels, 1, 33, 16, 1, 3.0f);
  testAttention(kernels, 4, 64, 96, 2, 2.0f);

  testCrossEntropy(1100, 77, 77);
  testCrossEntropy(3, 5003, 5003);
  testCrossEntropy(3, 5003, 5003, /*wide=*/true);
  testCrossEntropy(1, 1, 1);
  testCrossEntropy(0, 10, 10);
  testCrossEntropy(300, 5003, 5056); // padded to a multiple of 64
  testCrossEntropy(5, 1, 8);
  // Rows of whole 16-byte chunks, staged in shared memory
  // (crossEntropyStagedKernel), the wide ones too; past what two blocks'
  // shared memory holds (f32 at GPT-2's vocabulary), online.
  testCrossEntropy(3, 5003, 5008, /*wide=*/true);
  testCrossEntropy(4, 50257, 50304);
  testCrossEntropyBf16(300, 5003, 5008, " [300x5003] ld 5008");
  testCrossEntropyBf16(5, 50257, 50304, " [5x50257] ld 50304");
  testCrossEntropyBf16(2, 60000, 60000, " [2x60000] (past shared memory)");
  testCrossEntropyBf16(9, 1, 8, " [9x1] ld 8");
  {
    // The online kernel on the rows the staged one takes.
    shardc_rt_cuda_kernels *online =
        shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/0);
    configure(online, "SHARDC_RT_CUDA_CROSS_ENTROPY", "online");
    testCrossEntropyBf16(5, 50257, 50304, " [5x50257] ld 50304 (online)",
                         online);
    shardc_rt_cuda_kernels_destroy(online);
  }

  testIndexChecks();
  testAdamw();
  testAdamwBf16();
  testAdamwMulti();
  testGradientClipping();
  testBf16(1100, 96, 77);
  testBf16(6, 33, 5);
  testBf16Batched(3, 17, 33, 9);
  testBf16Batched(1, 40, 7, 1);
  testAttentionBf16(kernels, 2, 550, 32, 4);
  testAttentionBf16(kernels, 3, 70, 20, 5);
  testAttentionBf16(kernels, 1, 1, 12, 3);

  // The attention scores computed in chunks: at most two (batch, head)
  // pairs' scores at a time, for a walk over heads and one over batch.
  {
    shardc_rt_cuda_kernels *chunked =
        shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/0);
    configure(chunked, "SHARDC_RT_CUDA_ATTENTION_SCORES",
              std::to_string(2 * 9 * 9).c_str());
    testAttention(chunked, 2, 9, 20, 5, 1.0f, " (chunks of 2 heads)");
    testAttention(chunked, 5, 9, 6, 2, 1.0f, " (chunks of 2 sequences)");
    testAttentionBf16(chunked, 2, 9, 20, 5, " (chunks of 2 heads)");
    shardc_rt_cuda_kernels_destroy(chunked);
  }
  {
    // Fused (flash) bf16 attention: head sizes 16 to 128 (48 and 80: rows
    // of 16-byte chunks that do not divide the block's threads), T below,
    // at and past the 64-row blocks, one query; d = 4, and qkv and dy off
    // the 16-byte alignment, fall back to the GEMMs (cudasim would report
    // a flash kernel's misaligned cp.async).
    shardc_rt_cuda_kernels *flash =
        shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/0);
    shardc_rt_cuda_kernels_set_flash_attention(flash, 1);
    testFlashShapesBf16(flash, " (flash)");
    testAttentionBf16(flash, 1, 150, 96, 2, " (flash)");
    testAttentionBf16(flash, 2, 9, 20, 5, " (flash: d = 4, GEMMs)");
    testAttentionBf16(flash, 1, 70, 128, 2, " (flash: misaligned, GEMMs)", 1);
    testAttentionBf16(flash, 2, 70, 64, 4, " (flash: misaligned out, dqkv)", 0,
                      nullptr, 1);
    shardc_rt_cuda_kernels_destroy(flash);
  }
  {
    // The deterministic flash backward (set_deterministic): dq by query
    // blocks. Head sizes 16 to 128, T below, at and past the blocks, one
    // query, against the CPU; beside the atomic backward at two shapes.
    shardc_rt_cuda_kernels *fixed =
        shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/0);
    shardc_rt_cuda_kernels_set_flash_attention(fixed, 1);
    shardc_rt_cuda_kernels_set_deterministic(fixed, 1);
    testFlashShapesBf16(fixed, " (deterministic flash)");
    shardc_rt_cuda_kernels_destroy(fixed);
    testDeterministicAttentionBf16(2, 70, 64, 4);
    testDeterministicAttentionBf16(1, 200, 96, 3);
    // dq through sm_90's bulk reductions (SHARDC_RT_CUDA_FLASH_DQ=bulk,
    // which the kernel bench times beside the atomics): head sizes 16 to
    // 128, T below, at and past the blocks, one query. Not the default: its
    // tag gates nothing in run.sh.
    shardc_rt_cuda_kernels *bulk =
        createFlashWith("SHARDC_RT_CUDA_FLASH_DQ", "bulk", /*allowTf32=*/0);
    testFlashShapesBf16(bulk, " (bulk dq flash)");
    shardc_rt_cuda_kernels_destroy(bulk);
    // The backward's steps whole (SHARDC_RT_CUDA_FLASH_STEPS=whole, which
    // the kernel bench times beside the default halves at d = 32 to 64):
    // every shape, and beside the default at d = 32 and 64 (the same dk
    // and dv bits). Its tag gates nothing in run.sh either.
    shardc_rt_cuda_kernels *whole =
        createFlashWith("SHARDC_RT_CUDA_FLASH_STEPS", "whole", 0);
    testFlashShapesBf16(whole, " (whole-step flash)");
    testFlashVariantBf16(whole, " (whole-step flash)", false, 2, 70, 128, 2);
    testFlashVariantBf16(whole, " (whole-step flash)", false, 1, 200, 96, 3);
    shardc_rt_cuda_kernels_destroy(whole);
    // The forward's warps taking two row tiles of 16 queries
    // (SHARDC_RT_CUDA_FLASH_FORWARD_TILES=2, which the kernel bench times
    // beside the default): every shape (two tiles up to d = 64), and
    // beside the default (the same bits) where a block's last key block
    // leaves some warps' queries masked whole (T = 200, d = 32) or not.
    shardc_rt_cuda_kernels *twoTiles =
        createFlashWith("SHARDC_RT_CUDA_FLASH_FORWARD_TILES", "2", 0);
    const char *twoTag = " (two-tile flash forward)";
    testFlashShapesBf16(twoTiles, twoTag);
    testForwardVariantBf16(twoTiles, twoTag, 1, 200, 96, 3);
    testForwardVariantBf16(twoTiles, twoTag, 2, 130, 128, 2);
    testForwardVariantBf16(twoTiles, twoTag, 2, 256, 64, 1);
    shardc_rt_cuda_kernels_destroy(twoTiles);
    // The backward's warps taking two row tiles of 16 keys
    // (SHARDC_RT_CUDA_FLASH_BACKWARD_TILES=2, timed likewise): every shape,
    // beside the default (the same dk and dv bits: the same products in the
    // same order, those of keys masked whole skipped) where the first
    // query block leaves half the warps idle, T past and at the blocks;
    // then deterministic, and with dq by bulk reductions.
    shardc_rt_cuda_kernels *keyTiles =
        createFlashWith("SHARDC_RT_CUDA_FLASH_BACKWARD_TILES", "2", 0);
    const char *keyTag = " (two-tile flash backward)";
    testFlashShapesBf16(keyTiles, keyTag);
    testFlashVariantBf16(keyTiles, keyTag, false, 2, 70, 128, 2);
    testFlashVariantBf16(keyTiles, keyTag, false, 1, 200, 96, 3);
    testFlashVariantBf16(keyTiles, keyTag, false, 1, 256, 64, 1);
    shardc_rt_cuda_kernels_set_deterministic(keyTiles, 1);
    testFlashShapesBf16(keyTiles, " (two-tile deterministic flash)");
    shardc_rt_cuda_kernels_destroy(keyTiles);
    shardc_rt_cuda_kernels *keyTilesBulk =
        createFlashWith("SHARDC_RT_CUDA_FLASH_DQ", "bulk", 0);
    configure(keyTilesBulk, "SHARDC_RT_CUDA_FLASH_BACKWARD_TILES", "2");
    testFlashShapesBf16(keyTilesBulk, " (two-tile bulk dq flash)");
    shardc_rt_cuda_kernels_destroy(keyTilesBulk);
    testFlashPhasesBf16(2, 130, 64, 2);
    testFlashPhasesBf16(1, 130, 256, 2);
  }

  // TF32: a 10-bit mantissa, so ~5e-4 per product; the sum of 96 products
  // stays within 1e-2 of the tensor's magnitude. Checks that the switch
  // works, not its accuracy; with epilogues on (create's default), the
  // linear's bias and linear_gelu run on cuBLASLt's TF32 compute type.
  {
    shardc_rt_cuda_kernels *tf32 =
        shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/1);
    testLinear(tf32, 300, 96, 50, true, 1e-2, " (tf32)");
    switches = {{tf32, " [gemm epilogue on] (tf32)", " (tf32)", true, 1e-2}};
    testLinearGelu<float>(300, 96, 64, true);
    testMatmulGeluGrad<float>(300, 96, 64, true, false, true);
    shardc_rt_cuda_kernels_destroy(tf32);
  }

  // The fused kernels, with GEMM epilogues on and off, f32 and bf16; each
  // new cuBLASLt plan is printed to stderr (fused, or why not).
  {
    shardc_rt_cuda_kernels *on =
        shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/0);
    shardc_rt_cuda_kernels *off =
        shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/0);
    configure(on, "SHARDC_RT_CUDA_GEMM_EPILOGUE_LOG", "1");
    configure(off, "SHARDC_RT_CUDA_GEMM_EPILOGUE_LOG", "1");
    shardc_rt_cuda_kernels_set_gemm_epilogues(off, 0);
    switches = {{on, " [gemm epilogue on]", " (epilogues on)", true, 0},
                {off, " [gemm epilogue off]", " (epilogues off)", false, 0}};
    testFused<float>();
    testFused<shardc_rt_bf16>();
    switches.clear();
    shardc_rt_cuda_kernels_destroy(on);
    shardc_rt_cuda_kernels_destroy(off);
  }

  // Fused (flash) f32 attention on TF32 tensor cores (create's allowTf32):
  // the bf16 flash checks' shapes (head sizes 16 to 128, T below, at and
  // past the 64-row blocks, one query, batch and heads > 1) and larger
  // scores (range 2 and 3: peakier rows, more rescaling in the online
  // softmax), against the double reference within kFlashTf32Tolerance;
  // d = 4 falls back to the GEMMs (TF32 too). Last, so that a fault in
  // these kernels cannot take the checks above with it: bench/gpu/run.sh
  // times its fp32 flash row only where every "(flash tf32" check passed.
  {
    shardc_rt_cuda_kernels *flash =
        shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/1);
    shardc_rt_cuda_kernels_set_flash_attention(flash, 1);
    const char *tag = " (flash tf32)";
    testAttention(flash, 2, 70, 64, 4, 1.0f, tag, kFlashTf32Tolerance);
    testAttention(flash, 1, 130, 128, 2, 1.0f, tag, kFlashTf32Tolerance);
    testAttention(flash, 2, 64, 256, 2, 1.0f, tag, kFlashTf32Tolerance);
    testAttention(flash, 3, 1, 32, 2, 1.0f, tag, kFlashTf32Tolerance);
    testAttention(flash, 1, 200, 96, 3, 1.0f, tag, kFlashTf32Tolerance);
    testAttention(flash, 1, 150, 96, 2, 1.0f, tag, kFlashTf32Tolerance);
    testAttention(flash, 1, 100, 160, 2, 1.0f, tag, kFlashTf32Tolerance);
    testAttention(flash, 1, 129, 256, 2, 2.0f, tag, kFlashTf32Tolerance);
    testAttention(flash, 2, 150, 128, 2, 3.0f, tag, kFlashTf32Tolerance);
    testAttention(flash, 2, 9, 20, 5, 1.0f, " (flash tf32: d = 4, GEMMs)",
                  kFlashTf32Tolerance);
    shardc_rt_cuda_kernels_set_deterministic(flash, 1);
    tag = " (deterministic flash tf32)";
    testAttention(flash, 2, 70, 64, 4, 1.0f, tag, kFlashTf32Tolerance);
    testAttention(flash, 1, 129, 256, 2, 2.0f, tag, kFlashTf32Tolerance);
    testAttention(flash, 2, 150, 128, 2, 3.0f, tag, kFlashTf32Tolerance);
    shardc_rt_cuda_kernels_destroy(flash);
    shardc_rt_cuda_kernels *bulk =
        createFlashWith("SHARDC_RT_CUDA_FLASH_DQ", "bulk", /*allowTf32=*/1);
    tag = " (bulk dq flash tf32)";
    testAttention(bulk, 2, 70, 64, 4, 1.0f, tag, kFlashTf32Tolerance);
    testAttention(bulk, 1, 129, 256, 2, 2.0f, tag, kFlashTf32Tolerance);
    testAttention(bulk, 2, 150, 128, 2, 3.0f, tag, kFlashTf32Tolerance);
    shardc_rt_cuda_kernels_destroy(bulk);
    // Two row tiles a warp: the forward's, then the backward's.
    const char *const twoTiles[][2] = {{"SHARDC_RT_CUDA_FLASH_FORWARD_TILES",
                                        " (two-tile flash forward tf32)"},
                                       {"SHARDC_RT_CUDA_FLASH_BACKWARD_TILES",
                                        " (two-tile flash backward tf32)"}};
    for (const auto &[variable, variantTag] : twoTiles) {
      shardc_rt_cuda_kernels *variant = createFlashWith(variable, "2", 1);
      struct Case {
        int64_t b, t, c, heads;
        float scale;
      };
      for (Case x : {Case{2, 70, 64, 4, 1.0f}, Case{2, 150, 128, 2, 3.0f},
                     Case{1, 200, 96, 3, 2.0f}})
        testAttention(variant, x.b, x.t, x.c, x.heads, x.scale, variantTag,
                      kFlashTf32Tolerance);
      shardc_rt_cuda_kernels_destroy(variant);
    }
    // TF32 off: f32 attention keeps the GEMMs' full fp32 products with
    // flash attention on, within f32's kTolerance (which the fused TF32
    // kernels, ~1e-3 and more here, would fail); its tag is not a flash
    // check's, so it does not gate the fused kernels in bench/gpu/run.sh.
    shardc_rt_cuda_kernels *fp32 =
        shardc_rt_cuda_kernels_create(stream, /*allowTf32=*/0);
    shardc_rt_cuda_kernels_set_flash_attention(fp32, 1);
    testAttention(fp32, 2, 70, 64, 4, 1.0f, " (tf32 off, flash on: GEMMs)");
    shardc_rt_cuda_kernels_destroy(fp32);
  }

  testCudnnAttention();

  expectNoIndexError("at the end");
  TEST_CUDA_CHECK(cudaStreamSynchronize(stream));
  TEST_CUDA_CHECK(cudaGetLastError());
  shardc_rt_cuda_kernels_destroy(kernels);
  TEST_CUDA_CHECK(cudaStreamDestroy(stream));

  std::printf("cudakernels: %d passed, %d failed\n", numPassed, numFailed);
  return numFailed == 0 ? 0 : 1;
}
