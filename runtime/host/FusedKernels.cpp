//===- FusedKernels.cpp - The fused kernels on the host -------------------===//
//
// The host's fused kernels (train.linear_gelu, train.add_layernorm,
// train.matmul_gelu_grad, train.matmul_bias_grad, train.layernorm_grad_add,
// train.cross_entropy_and_grad) run the kernels of the
// two ops they fuse in turn, on the intermediate as stored: their results are
// those of the unfused pair to the bit, in f32 and in bf16. The fusion pays
// on a GPU, where the intermediate skips a round trip through memory
// (runtime/cuda: KernelUtils.cuh lists the CUDA kernels); here it only
// changes which buffers are live when (the --train-fuse pass says how).
//
//===----------------------------------------------------------------------===//

#include "KernelTimer.h"

#include "shardc_rt/Kernels.h"

namespace {

/// The fused kernels of one element type T, from that type's kernels.
template <typename T> struct Fused {
  void (*linear)(const T *, const T *, const T *, T *, int64_t, int64_t,
                 int64_t);
  void (*gelu)(const T *, T *, int64_t);
  void (*add)(const T *, const T *, T *, int64_t, int64_t);
  void (*layerNorm)(const T *, const T *, const T *, T *, int64_t, int64_t,
                    double);
  void (*matmul)(const T *, const T *, T *, int64_t, int64_t, int64_t, int64_t,
                 int, int);
  void (*geluGrad)(const T *, const T *, T *, int64_t);
  void (*sumTo)(const T *, T *, int64_t, int64_t);
  void (*layerNormGrad)(const T *, const T *, const T *, T *, T *, T *, int64_t,
                        int64_t, double);
  int64_t (*crossEntropy)(const T *, const int32_t *, float *, int64_t, int64_t,
                          int64_t);
  int64_t (*crossEntropyGrad)(const float *, const T *, const int32_t *, T *,
                              int64_t, int64_t, int64_t);

  void linearGelu(const T *x, const T *w, const T *b, T *pre, T *y, int64_t m,
                  int64_t k, int64_t n) const {
    linear(x, w, b, pre, m, k, n);
    gelu(pre, y, m * n);
  }
  void addLayerNorm(const T *lhs, const T *rhs, const T *w, const T *b, T *sum,
                    T *y, int64_t rows, int64_t c, double eps) const {
    add(lhs, rhs, sum, rows * c, rows * c);
    layerNorm(sum, w, b, y, rows, c, eps);
  }
  void matmulGeluGrad(const T *lhs, const T *rhs, const T *pre, T *dx,
                      int64_t m, int64_t k, int64_t n, int transposeLhs,
                      int transposeRhs) const {
    matmul(lhs, rhs, dx, 1, m, k, n, transposeLhs, transposeRhs);
    geluGrad(dx, pre, dx, m * n);
  }
  void matmulBiasGrad(const T *lhs, const T *rhs, T *dw, T *db, int64_t m,
                      int64_t k, int64_t n, int transposeRhs) const {
    matmul(lhs, rhs, dw, 1, m, k, n, 1, transposeRhs);
    sumTo(lhs, db, k, m); // lhs [k, m]: its rows summed
  }
  void layerNormGradAdd(const T *dy, const T *x, const T *w, const T *addend,
                        T *dx, T *dw, T *db, int64_t rows, int64_t c,
                        double eps) const {
    layerNormGrad(dy, x, w, dx, dw, db, rows, c, eps);
    // dx + addend: the unfused add's addend + dx, as addition commutes.
    add(dx, addend, dx, rows * c, rows * c);
  }
  int64_t crossEntropyAndGrad(const float *dloss, const T *logits,
                              const int32_t *targets, float *loss, T *dlogits,
                              int64_t n, int64_t v, int64_t ld) const {
    // The loss reads the logits before the gradient may overwrite them.
    int64_t bad = crossEntropy(logits, targets, loss, n, v, ld);
    if (bad >= 0)
      return bad;
    return crossEntropyGrad(dloss, logits, targets, dlogits, n, v, ld);
  }
};

constexpr Fused<float> f32{
    shardc_rt_linear_f32,        shardc_rt_gelu_f32,
    shardc_rt_add_f32,           shardc_rt_layernorm_f32,
    shardc_rt_matmul_f32,        shardc_rt_gelu_grad_f32,
    shardc_rt_sum_to_f32,        shardc_rt_layernorm_grad_f32,
    shardc_rt_cross_entropy_f32, shardc_rt_cross_entropy_grad_f32};
constexpr Fused<shardc_rt_bf16> bf16{
    shardc_rt_linear_bf16,        shardc_rt_gelu_bf16,
    shardc_rt_add_bf16,           shardc_rt_layernorm_bf16,
    shardc_rt_matmul_bf16,        shardc_rt_gelu_grad_bf16,
    shardc_rt_sum_to_bf16,        shardc_rt_layernorm_grad_bf16,
    shardc_rt_cross_entropy_bf16, shardc_rt_cross_entropy_grad_bf16};

} // namespace

void shardc_rt_linear_gelu_f32(const float *x, const float *w, const float *b,
                               float *pre, float *y, int64_t m, int64_t k,
                               int64_t n) {
  SHARDC_RT_TIME_KERNEL("linear_gelu_f32");
  f32.linearGelu(x, w, b, pre, y, m, k, n);
}

void shardc_rt_add_layernorm_f32(const float *lhs, const float *rhs,
                                 const float *w, const float *b, float *sum,
                                 float *y, int64_t rows, int64_t c,
                                 double eps) {
  SHARDC_RT_TIME_KERNEL("add_layernorm_f32");
  f32.addLayerNorm(lhs, rhs, w, b, sum, y, rows, c, eps);
}

void shardc_rt_matmul_gelu_grad_f32(const float *lhs, const float *rhs,
                                    const float *pre, float *dx, int64_t m,
                                    int64_t k, int64_t n, int transposeLhs,
                                    int transposeRhs) {
  SHARDC_RT_TIME_KERNEL("matmul_gelu_grad_f32");
  f32.matmulGeluGrad(lhs, rhs, pre, dx, m, k, n, transposeLhs, transposeRhs);
}

void shardc_rt_matmul_bias_grad_f32(const float *lhs, const float *rhs,
                                    float *dw, float *db, int64_t m, int64_t k,
                                    int64_t n, int transposeLhs,
                                    int transposeRhs) {
  SHARDC_RT_TIME_KERNEL("matmul_bias_grad_f32");
  (void)transposeLhs; // always set (train.matmul_bias_grad's verifier)
  f32.matmulBiasGrad(lhs, rhs, dw, db, m, k, n, transposeRhs);
}

void shardc_rt_layernorm_grad_add_f32(const float *dy, const float *x,
                                      const float *w, const float *addend,
                                      float *dx, float *dw, float *db,
                                      int64_t rows, int64_t c, double eps) {
  SHARDC_RT_TIME_KERNEL("layernorm_grad_add_f32");
  f32.layerNormGradAdd(dy, x, w, addend, dx, dw, db, rows, c, eps);
}

int64_t shardc_rt_cross_entropy_and_grad_f32(const float *dloss,
                                             const float *logits,
                                             const int32_t *targets,
                                             float *loss, float *dlogits,
                                             int64_t n, int64_t v, int64_t ld) {
  SHARDC_RT_TIME_KERNEL("cross_entropy_and_grad_f32");
  return f32.crossEntropyAndGrad(dloss, logits, targets, loss, dlogits, n, v,
                                 ld);
}

void shardc_rt_linear_gelu_bf16(const shardc_rt_bf16 *x,
                                const shardc_rt_bf16 *w,
                                const shardc_rt_bf16 *b, shardc_rt_bf16 *pre,
                                shardc_rt_bf16 *y, int64_t m, int64_t k,
                                int64_t n) {
  SHARDC_RT_TIME_KERNEL("linear_gelu_bf16");
  bf16.linearGelu(x, w, b, pre, y, m, k, n);
}

void shardc_rt_add_layernorm_bf16(const shardc_rt_bf16 *lhs,
                                  const shardc_rt_bf16 *rhs,
                                  const shardc_rt_bf16 *w,
                                  const shardc_rt_bf16 *b, shardc_rt_bf16 *sum,
                                  shardc_rt_bf16 *y, int64_t rows, int64_t c,
                                  double eps) {
  SHARDC_RT_TIME_KERNEL("add_layernorm_bf16");
  bf16.addLayerNorm(lhs, rhs, w, b, sum, y, rows, c, eps);
}

void shardc_rt_matmul_gelu_grad_bf16(const shardc_rt_bf16 *lhs,
                                     const shardc_rt_bf16 *rhs,
                                     const shardc_rt_bf16 *pre,
                                     shardc_rt_bf16 *dx, int64_t m, int64_t k,
                                     int64_t n, int transposeLhs,
                                     int transposeRhs) {
  SHARDC_RT_TIME_KERNEL("matmul_gelu_grad_bf16");
  bf16.matmulGeluGrad(lhs, rhs, pre, dx, m, k, n, transposeLhs, transposeRhs);
}

void shardc_rt_matmul_bias_grad_bf16(const shardc_rt_bf16 *lhs,
                                     const shardc_rt_bf16 *rhs,
                                     shardc_rt_bf16 *dw, shardc_rt_bf16 *db,
                                     int64_t m, int64_t k, int64_t n,
                                     int transposeLhs, int transposeRhs) {
  SHARDC_RT_TIME_KERNEL("matmul_bias_grad_bf16");
  (void)transposeLhs;
  bf16.matmulBiasGrad(lhs, rhs, dw, db, m, k, n, transposeRhs);
}

void shardc_rt_layernorm_grad_add_bf16(
    const shardc_rt_bf16 *dy, const shardc_rt_bf16 *x, const shardc_rt_bf16 *w,
    const shardc_rt_bf16 *addend, shardc_rt_bf16 *dx, shardc_rt_bf16 *dw,
    shardc_rt_bf16 *db, int64_t rows, int64_t c, double eps) {
  SHARDC_RT_TIME_KERNEL("layernorm_grad_add_bf16");
  bf16.layerNormGradAdd(dy, x, w, addend, dx, dw, db, rows, c, eps);
}

int64_t shardc_rt_cross_entropy_and_grad_bf16(
    const float *dloss, const shardc_rt_bf16 *logits, const int32_t *targets,
    float *loss, shardc_rt_bf16 *dlogits, int64_t n, int64_t v, int64_t ld) {
  SHARDC_RT_TIME_KERNEL("cross_entropy_and_grad_bf16");
  return bf16.crossEntropyAndGrad(dloss, logits, targets, loss, dlogits, n, v,
                                  ld);
}
