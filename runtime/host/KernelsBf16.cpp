//===- KernelsBf16.cpp - The CPU kernels on bf16 tensors ------------------===//
//
// Mixed precision on the host: each bf16 kernel widens its inputs to f32
// (exact), runs the f32 kernel and rounds what it writes. The results are
// those of f32 compute on bf16 storage, which is what a GPU's bf16 kernels
// compute up to the order of f32 additions. The f32 copies are scratch of the
// call (reused from call to call), outside the step's allocator, as a GPU
// library's workspace is.
//
//===----------------------------------------------------------------------===//

#include "KernelTimer.h"

#include "shardc_rt/Kernels.h"

#include <algorithm>
#include <vector>

using shardc::rt::narrow;
using shardc::rt::widen;

namespace {

/// A call's f32 copy of n elements, in a buffer borrowed from a per-thread
/// pool and given back when the copy goes: steps reuse the same memory
/// rather than allocate and zero it per call (buffers only grow).
class Floats {
public:
  Floats() = default;
  explicit Floats(int64_t n) : count(n) {
    if (!pool.empty()) {
      buffer = std::move(pool.back());
      pool.pop_back();
    }
    if (static_cast<int64_t>(buffer.size()) < n)
      buffer.resize(n);
  }
  Floats(Floats &&other) noexcept
      : buffer(std::move(other.buffer)), count(other.count) {
    other.buffer.clear();
    other.count = 0;
  }
  Floats &operator=(Floats &&) = delete;
  ~Floats() {
    if (!buffer.empty())
      pool.push_back(std::move(buffer));
  }
  float *data() { return buffer.data(); }
  size_t size() const { return static_cast<size_t>(count); }
  float &operator[](size_t i) { return buffer[i]; }
  const float &operator[](size_t i) const { return buffer[i]; }

private:
  static thread_local std::vector<std::vector<float>> pool;
  std::vector<float> buffer;
  int64_t count = 0;
};

thread_local std::vector<std::vector<float>> Floats::pool;

Floats wide(const shardc_rt_bf16 *x, int64_t n) {
  Floats out(n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = widen(x[i]);
  return out;
}

void store(shardc_rt_bf16 *dst, const Floats &src) {
  for (size_t i = 0; i < src.size(); ++i)
    dst[i] = narrow(src[i]);
}

/// An elementwise f32 kernel y = f(x) on bf16.
void unary(void (*f32Kernel)(const float *, float *, int64_t),
           const shardc_rt_bf16 *x, shardc_rt_bf16 *y, int64_t n) {
  Floats fx = wide(x, n);
  f32Kernel(fx.data(), fx.data(), n);
  store(y, fx);
}

/// An elementwise f32 backward dx = f(dy, x) on bf16.
void unaryGrad(void (*f32Kernel)(const float *, const float *, float *,
                                 int64_t),
               const shardc_rt_bf16 *dy, const shardc_rt_bf16 *x,
               shardc_rt_bf16 *dx, int64_t n) {
  Floats fdy = wide(dy, n), fx = wide(x, n);
  f32Kernel(fdy.data(), fx.data(), fdy.data(), n);
  store(dx, fdy);
}

} // namespace

extern "C" {

void shardc_rt_convert_f32_bf16(shardc_rt_bf16 *dst, const float *src,
                                int64_t n) {
  SHARDC_RT_TIME_KERNEL("convert_f32_bf16");
  for (int64_t i = 0; i < n; ++i)
    dst[i] = narrow(src[i]);
}

void shardc_rt_convert_bf16_f32(float *dst, const shardc_rt_bf16 *src,
                                int64_t n) {
  SHARDC_RT_TIME_KERNEL("convert_bf16_f32");
  for (int64_t i = 0; i < n; ++i)
    dst[i] = widen(src[i]);
}

void shardc_rt_linear_bf16(const shardc_rt_bf16 *x, const shardc_rt_bf16 *w,
                           const shardc_rt_bf16 *b, shardc_rt_bf16 *y,
                           int64_t m, int64_t k, int64_t n) {
  SHARDC_RT_TIME_KERNEL("linear_bf16");
  Floats fx = wide(x, m * k), fw = wide(w, n * k), fy(m * n);
  Floats fb = b ? wide(b, n) : Floats();
  shardc_rt_linear_f32(fx.data(), fw.data(), b ? fb.data() : nullptr,
                       fy.data(), m, k, n);
  store(y, fy);
}

void shardc_rt_matmul_bf16(const shardc_rt_bf16 *lhs,
                           const shardc_rt_bf16 *rhs, shardc_rt_bf16 *out,
                           int64_t batch, int64_t m, int64_t k, int64_t n,
                           int transposeLhs, int transposeRhs) {
  SHARDC_RT_TIME_KERNEL("matmul_bf16");
  Floats fl = wide(lhs, batch * m * k), fr = wide(rhs, batch * k * n);
  Floats fo(batch * m * n);
  shardc_rt_matmul_f32(fl.data(), fr.data(), fo.data(), batch, m, k, n,
                       transposeLhs, transposeRhs);
  store(out, fo);
}

void shardc_rt_add_bf16(const shardc_rt_bf16 *lhs, const shardc_rt_bf16 *rhs,
                        shardc_rt_bf16 *y, int64_t n, int64_t m) {
  SHARDC_RT_TIME_KERNEL("add_bf16");
  Floats fl = wide(lhs, n), fr = wide(rhs, m), fy(n);
  shardc_rt_add_f32(fl.data(), fr.data(), fy.data(), n, m);
  store(y, fy);
}

void shardc_rt_scale_bf16(const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                          int64_t n, double factor) {
  SHARDC_RT_TIME_KERNEL("scale_bf16");
  Floats fx = wide(x, n);
  shardc_rt_scale_f32(fx.data(), fx.data(), n, factor);
  store(y, fx);
}

void shardc_rt_gelu_bf16(const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                         int64_t n) {
  SHARDC_RT_TIME_KERNEL("gelu_bf16");
  unary(shardc_rt_gelu_f32, x, y, n);
}

void shardc_rt_relu_bf16(const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                         int64_t n) {
  SHARDC_RT_TIME_KERNEL("relu_bf16");
  unary(shardc_rt_relu_f32, x, y, n);
}

void shardc_rt_layernorm_bf16(const shardc_rt_bf16 *x,
                              const shardc_rt_bf16 *w,
                              const shardc_rt_bf16 *b, shardc_rt_bf16 *y,
                              int64_t rows, int64_t c, double eps) {
  SHARDC_RT_TIME_KERNEL("layernorm_bf16");
  Floats fx = wide(x, rows * c), fw = wide(w, c), fb = wide(b, c);
  Floats fy(rows * c);
  shardc_rt_layernorm_f32(fx.data(), fw.data(), fb.data(), fy.data(), rows, c,
                          eps);
  store(y, fy);
}

int64_t shardc_rt_embedding_bf16(const int32_t *ids,
                                 const shardc_rt_bf16 *table,
                                 shardc_rt_bf16 *out, int64_t n, int64_t v,
                                 int64_t c) {
  SHARDC_RT_TIME_KERNEL("embedding_bf16");
  // A gather copies: no arithmetic, nothing to round.
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= v)
      return i;
  for (int64_t i = 0; i < n; ++i)
    shardc_rt_copy_bf16(out + i * c, table + ids[i] * c, c);
  return -1;
}

void shardc_rt_attention_bf16(const shardc_rt_bf16 *qkv, shardc_rt_bf16 *out,
                              float *lse, int64_t b, int64_t t, int64_t c,
                              int64_t heads) {
  SHARDC_RT_TIME_KERNEL("attention_bf16");
  Floats fq = wide(qkv, b * t * 3 * c), fo(b * t * c);
  shardc_rt_attention_f32(fq.data(), fo.data(), lse, b, t, c, heads);
  store(out, fo);
}

int64_t shardc_rt_cross_entropy_bf16(const shardc_rt_bf16 *logits,
                                     const int32_t *targets, float *loss,
                                     int64_t n, int64_t v, int64_t ld) {
  SHARDC_RT_TIME_KERNEL("cross_entropy_bf16");
  Floats fl = wide(logits, n * ld);
  return shardc_rt_cross_entropy_f32(fl.data(), targets, loss, n, v, ld);
}

void shardc_rt_sum_to_bf16(const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                           int64_t outer, int64_t inner) {
  SHARDC_RT_TIME_KERNEL("sum_to_bf16");
  Floats fx = wide(x, outer * inner), fy(inner);
  shardc_rt_sum_to_f32(fx.data(), fy.data(), outer, inner);
  store(y, fy);
}

void shardc_rt_copy_bf16(shardc_rt_bf16 *dst, const shardc_rt_bf16 *src,
                         int64_t n) {
  SHARDC_RT_TIME_KERNEL("copy_bf16");
  std::copy(src, src + n, dst);
}

void shardc_rt_fill_bf16(shardc_rt_bf16 *dst, float value, int64_t n) {
  SHARDC_RT_TIME_KERNEL("fill_bf16");
  std::fill(dst, dst + n, narrow(value));
}

void shardc_rt_accumulate_bf16(shardc_rt_bf16 *dst, const shardc_rt_bf16 *src,
                               int64_t n) {
  SHARDC_RT_TIME_KERNEL("accumulate_bf16");
  for (int64_t i = 0; i < n; ++i)
    dst[i] = narrow(widen(dst[i]) + widen(src[i]));
}

void shardc_rt_gelu_grad_bf16(const shardc_rt_bf16 *dy,
                              const shardc_rt_bf16 *x, shardc_rt_bf16 *dx,
                              int64_t n) {
  SHARDC_RT_TIME_KERNEL("gelu_grad_bf16");
  unaryGrad(shardc_rt_gelu_grad_f32, dy, x, dx, n);
}

void shardc_rt_relu_grad_bf16(const shardc_rt_bf16 *dy,
                              const shardc_rt_bf16 *x, shardc_rt_bf16 *dx,
                              int64_t n) {
  SHARDC_RT_TIME_KERNEL("relu_grad_bf16");
  unaryGrad(shardc_rt_relu_grad_f32, dy, x, dx, n);
}

void shardc_rt_layernorm_grad_bf16(const shardc_rt_bf16 *dy,
                                   const shardc_rt_bf16 *x,
                                   const shardc_rt_bf16 *w, shardc_rt_bf16 *dx,
                                   shardc_rt_bf16 *dw, shardc_rt_bf16 *db,
                                   int64_t rows, int64_t c, double eps) {
  SHARDC_RT_TIME_KERNEL("layernorm_grad_bf16");
  Floats fdy = wide(dy, rows * c), fx = wide(x, rows * c), fw = wide(w, c);
  Floats fdx(rows * c), fdw(c), fdb(c);
  shardc_rt_layernorm_grad_f32(fdy.data(), fx.data(), fw.data(), fdx.data(),
                               fdw.data(), fdb.data(), rows, c, eps);
  store(dx, fdx);
  store(dw, fdw);
  store(db, fdb);
}

int64_t shardc_rt_embedding_grad_bf16(const shardc_rt_bf16 *dy,
                                      const int32_t *ids,
                                      shardc_rt_bf16 *dtable, int64_t n,
                                      int64_t v, int64_t c) {
  SHARDC_RT_TIME_KERNEL("embedding_grad_bf16");
  Floats fdy = wide(dy, n * c), fdt(v * c);
  int64_t bad =
      shardc_rt_embedding_grad_f32(fdy.data(), ids, fdt.data(), n, v, c);
  if (bad < 0)
    store(dtable, fdt);
  return bad;
}

void shardc_rt_attention_grad_bf16(const shardc_rt_bf16 *dy,
                                   const shardc_rt_bf16 *qkv,
                                   const shardc_rt_bf16 *out, const float *lse,
                                   shardc_rt_bf16 *dqkv, int64_t b, int64_t t,
                                   int64_t c, int64_t heads) {
  SHARDC_RT_TIME_KERNEL("attention_grad_bf16");
  Floats fdy = wide(dy, b * t * c), fq = wide(qkv, b * t * 3 * c);
  Floats fdq(b * t * 3 * c);
  (void)out; // not read on the host (Kernels.h)
  shardc_rt_attention_grad_f32(fdy.data(), fq.data(), nullptr, lse, fdq.data(),
                               b, t, c, heads);
  store(dqkv, fdq);
}

int64_t shardc_rt_cross_entropy_grad_bf16(const float *dloss,
                                          const shardc_rt_bf16 *logits,
                                          const int32_t *targets,
                                          shardc_rt_bf16 *dlogits, int64_t n,
                                          int64_t v, int64_t ld) {
  SHARDC_RT_TIME_KERNEL("cross_entropy_grad_bf16");
  Floats fl = wide(logits, n * ld), fd(n * ld);
  int64_t bad = shardc_rt_cross_entropy_grad_f32(dloss, fl.data(), targets,
                                                 fd.data(), n, v, ld);
  if (bad < 0)
    store(dlogits, fd);
  return bad;
}

} // extern "C"
