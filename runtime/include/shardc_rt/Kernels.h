//===- Kernels.h - CPU kernels of every train op ----------------*- C++ -*-===//
//
// The kernels the host target's emitted code calls, one per `train` compute
// op (include/shardc/Dialect/Train/IR/TrainOps.td is their specification).
//
// Conventions of the C ABI:
//  - each kernel is there in f32 and, for mixed precision, in bf16 (suffix
//    _bf16, shardc_rt/BFloat16.h): the bf16 ones read bf16, compute as the
//    f32 ones do on the exact f32 values and round what they write; the
//    loss of cross_entropy and the dloss of cross_entropy_grad stay f32.
//    Tensors are raw pointers to row-major contiguous memory, with
//    their dimensions as int64_t; leading dimensions are flattened by the
//    caller (a linear on [B, T, C] is one with M = B * T).
//  - compute kernels take their inputs, then their outputs, then dimensions,
//    then attributes; the memory helpers (copy, fill, accumulate) take the
//    destination first, as memcpy does.
//  - outputs are allocated by the caller and fully overwritten, unless a
//    comment says otherwise; outputs never alias inputs, except for the
//    elementwise kernels (add, scale, gelu, relu, their grads, accumulate)
//    and cross_entropy_grad (and cross_entropy_and_grad), which may run in
//    place (output == an input; the emitted steps rely on it:
//    train::InPlaceOpInterface).
//  - ids and targets are int32_t. They come from user data, so the kernels
//    that read them check them: they return -1 when every id is in range, or
//    the position of the first bad one, and then write nothing. The caller
//    turns that into an error naming the rank and the input; a kernel never
//    aborts on user data.
//
// The fused kernels (train.linear_gelu and the like) run the kernels of the
// two ops they fuse in turn (runtime/host/FusedKernels.cpp): the results are
// the unfused pair's to the bit.
//
// The unfused kernels are templates in shardc::rt::cpu, instantiated for float
// and double: the C functions forward to the float ones, and the double ones
// exist for the finite-difference gradient check (runtime/test/GradCheck.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_KERNELS_H
#define SHARDC_RT_KERNELS_H

#include "shardc_rt/BFloat16.h"
#include "shardc_rt/KernelTime.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

//===----------------------------------------------------------------------===//
// GEMM timer
//===----------------------------------------------------------------------===//

/// Seconds spent inside BLAS gemm calls (every matrix product of the kernels
/// below, attention's included) since the start or the last reset, summed
/// over all threads. A step's time minus this is the time outside GEMMs.
double shardc_rt_gemm_seconds(void);
/// Sets the GEMM timer back to zero.
void shardc_rt_gemm_seconds_reset(void);

/// Per-kernel timing (shardc_rt/KernelTime.h), off until enabled.
void shardc_rt_kernel_times_enable(int on);
/// Copies up to `capacity` entries, one per kernel called since the last
/// reset in the order of their first call, to `out`; returns how many
/// there are.
int32_t shardc_rt_kernel_times(shardc_rt_kernel_time *out, int32_t capacity);
void shardc_rt_kernel_times_reset(void);
/// Recording of each call (--trace), off until enabled.
void shardc_rt_kernel_calls_enable(int on);
/// Copies up to `capacity` of the calls since the last reset, in the order
/// they ended, to `out`; returns how many there are.
int32_t shardc_rt_kernel_calls(shardc_rt_kernel_call *out, int32_t capacity);
void shardc_rt_kernel_calls_reset(void);

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// y[m, n] = x[m, k] w[n, k]^T + b[n]; b may be null (no bias).
void shardc_rt_linear_f32(const float *x, const float *w, const float *b,
                          float *y, int64_t m, int64_t k, int64_t n);

/// out[batch, m, n] = op(lhs) op(rhs) for each of `batch` matrix pairs.
/// lhs is [batch, m, k], or [batch, k, m] when transposeLhs != 0; rhs is
/// [batch, k, n], or [batch, n, k] when transposeRhs != 0.
void shardc_rt_matmul_f32(const float *lhs, const float *rhs, float *out,
                          int64_t batch, int64_t m, int64_t k, int64_t n,
                          int transposeLhs, int transposeRhs);

/// y[n] = lhs[n] + rhs broadcast: y[i] = lhs[i] + rhs[i % m]. rhs's shape is
/// a suffix of lhs's, so m divides n. May run in place (y == lhs).
void shardc_rt_add_f32(const float *lhs, const float *rhs, float *y, int64_t n,
                       int64_t m);

/// y[n] = x[n] * factor (factor rounded to f32 once). May run in place.
void shardc_rt_scale_f32(const float *x, float *y, int64_t n, double factor);

/// y[n] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), GPT-2's GELU.
/// May run in place.
void shardc_rt_gelu_f32(const float *x, float *y, int64_t n);

/// y[n] = max(x, 0). May run in place.
void shardc_rt_relu_f32(const float *x, float *y, int64_t n);

/// y[rows, c] = (x - mean) / sqrt(var + eps) * w[c] + b[c], statistics per
/// row of x[rows, c] (biased variance, as nn.LayerNorm).
void shardc_rt_layernorm_f32(const float *x, const float *w, const float *b,
                             float *y, int64_t rows, int64_t c, double eps);

/// Fused linear then gelu (train.linear_gelu): pre[m, n] = x[m, k] w[n, k]^T
/// + b[n] (b may be null), as linear, and y[m, n] = gelu(pre) of the stored
/// pre.
void shardc_rt_linear_gelu_f32(const float *x, const float *w, const float *b,
                               float *pre, float *y, int64_t m, int64_t k,
                               int64_t n);

/// Fused residual add then layernorm (train.add_layernorm): sum[rows, c] =
/// lhs + rhs (same shape) and y = layernorm(sum) of the stored sum, as
/// layernorm.
void shardc_rt_add_layernorm_f32(const float *lhs, const float *rhs,
                                 const float *w, const float *b, float *sum,
                                 float *y, int64_t rows, int64_t c,
                                 double eps);

/// out[n, c] = table[ids[i], :] for ids[n] and table[v, c]. Returns -1, or
/// the position of the first id outside [0, v) (out is then untouched).
int64_t shardc_rt_embedding_f32(const int32_t *ids, const float *table,
                                float *out, int64_t n, int64_t v, int64_t c);

/// Causal multi-head self-attention. qkv[b, t, 3c] holds q, k and v side by
/// side along the last dimension, each split into `heads` heads of
/// d = c / heads (head h of q is columns [h d, (h+1) d) of the q block).
/// out[b, t, c] = per head softmax(q k^T / sqrt(d) + causal mask) v, heads
/// concatenated. heads divides c. lse[b, heads, t] (f32; skipped where null)
/// receives each (batch, head, query)'s log-sum-exp of its scaled scores.
void shardc_rt_attention_f32(const float *qkv, float *out, float *lse,
                             int64_t b, int64_t t, int64_t c, int64_t heads);

/// *loss = mean over the n rows of logits[n, ld] of
/// -log softmax(row[0:v])[targets[i]], accumulated in double (0 when
/// n == 0): the first v <= ld logits of a row are its classes, the rest
/// padding that is not read (train.cross_entropy's `classes`). Returns -1,
/// or the position of the first target outside [0, v) (*loss is then
/// untouched).
int64_t shardc_rt_cross_entropy_f32(const float *logits, const int32_t *targets,
                                    float *loss, int64_t n, int64_t v,
                                    int64_t ld);

/// out[n] = 0, 1, ..., n - 1.
void shardc_rt_iota_i32(int32_t *out, int64_t n);

/// y[inner] = sum over the leading dimensions of x[outer, inner]; the
/// backward of add's broadcast and of linear's bias.
void shardc_rt_sum_to_f32(const float *x, float *y, int64_t outer,
                          int64_t inner);

/// dst[n] = src[n]. The buffers do not overlap.
void shardc_rt_copy_f32(float *dst, const float *src, int64_t n);
/// dst[n] = value.
void shardc_rt_fill_f32(float *dst, float value, int64_t n);
/// dst[n] += src[n] (dst is read, not overwritten).
void shardc_rt_accumulate_f32(float *dst, const float *src, int64_t n);

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// dx[n] = dy[n] * gelu'(x[n]). May run in place (dx == dy).
void shardc_rt_gelu_grad_f32(const float *dy, const float *x, float *dx,
                             int64_t n);

/// dx[n] = x > 0 ? dy : 0 (the derivative at 0 is taken as 0, as PyTorch
/// does). May run in place (dx == dy).
void shardc_rt_relu_grad_f32(const float *dy, const float *x, float *dx,
                             int64_t n);

/// The VJP of layernorm: dx[rows, c], dw[c], db[c] from dy[rows, c],
/// x[rows, c] and w[c]; mean and 1/std are recomputed from x.
void shardc_rt_layernorm_grad_f32(const float *dy, const float *x,
                                  const float *w, float *dx, float *dw,
                                  float *db, int64_t rows, int64_t c,
                                  double eps);

/// Fused matmul then gelu_grad (train.matmul_gelu_grad): dx[m, n] =
/// gelu_grad(op(lhs) op(rhs), pre) for pre[m, n], the matrix product as
/// matmul's with batch 1 and rounded as it stores it.
void shardc_rt_matmul_gelu_grad_f32(const float *lhs, const float *rhs,
                                    const float *pre, float *dx, int64_t m,
                                    int64_t k, int64_t n, int transposeLhs,
                                    int transposeRhs);

/// Fused matmul and sum_to (train.matmul_bias_grad), a linear's weight and
/// bias gradients: dw[m, n] = lhs^T op(rhs) for lhs [k, m] (transposeLhs is
/// 1), the product as matmul's with batch 1, and db[m] = sum_to of lhs's k
/// rows, as sum_to's.
void shardc_rt_matmul_bias_grad_f32(const float *lhs, const float *rhs,
                                    float *dw, float *db, int64_t m, int64_t k,
                                    int64_t n, int transposeLhs,
                                    int transposeRhs);

/// Fused layernorm_grad then add (train.layernorm_grad_add): as
/// layernorm_grad, with dx[rows, c] = addend + the input's gradient (as
/// layernorm_grad stores it); dx does not alias addend.
void shardc_rt_layernorm_grad_add_f32(const float *dy, const float *x,
                                      const float *w, const float *addend,
                                      float *dx, float *dw, float *db,
                                      int64_t rows, int64_t c, double eps);

/// dtable[v, c] = sum over i with ids[i] == row of dy[i, :], for dy[n, c]
/// and ids[n] (zeroed by the kernel first). Returns -1, or the position of the
/// first id outside [0, v) (dtable is then untouched). Every backend sums in
/// one order, so their f32 results agree to the bit: an id's positions in
/// increasing order, in groups of SHARDC_RT_EMBEDDING_GRAD_GROUP, each group
/// summed from 0, then the groups' sums from 0 in turn. A GPU sums an id as
/// frequent as real text's commonest tokens (a few % of a batch) by many
/// threads, a group each, rather than one thread along the whole run.
#define SHARDC_RT_EMBEDDING_GRAD_GROUP 64
int64_t shardc_rt_embedding_grad_f32(const float *dy, const int32_t *ids,
                                     float *dtable, int64_t n, int64_t v,
                                     int64_t c);

/// The VJP of attention: dqkv[b, t, 3c] from dy[b, t, c], qkv[b, t, 3c] and
/// the forward's lse: the probabilities are recomputed as exp(scores - lse)
/// rather than kept. out (the forward's output, from which the CUDA fused
/// kernels take sum_j P dP = dy . out) is not read: the host sums P dP,
/// exact where a bf16 out is rounded.
void shardc_rt_attention_grad_f32(const float *dy, const float *qkv,
                                  const float *out, const float *lse,
                                  float *dqkv, int64_t b, int64_t t, int64_t c,
                                  int64_t heads);

/// dlogits[n, ld] = (softmax(logits) - onehot(targets)) * *dloss / n, for
/// the scalar cotangent *dloss of the mean loss, with the softmax over the
/// first v <= ld logits of a row and 0 in the padding columns [v, ld).
/// Returns -1, or the position of the first target outside [0, v) (dlogits
/// is then untouched). May run in place (dlogits == logits).
int64_t shardc_rt_cross_entropy_grad_f32(const float *dloss,
                                         const float *logits,
                                         const int32_t *targets, float *dlogits,
                                         int64_t n, int64_t v, int64_t ld);

/// Fused cross_entropy then cross_entropy_grad
/// (train.cross_entropy_and_grad): *loss and dlogits as the two write them,
/// for the cotangent *dloss known before the loss (loss is not dloss).
/// Returns -1, or the position of the first target outside [0, v) (then
/// neither is written). May run in place (dlogits == logits).
int64_t shardc_rt_cross_entropy_and_grad_f32(const float *dloss,
                                             const float *logits,
                                             const int32_t *targets,
                                             float *loss, float *dlogits,
                                             int64_t n, int64_t v, int64_t ld);

//===----------------------------------------------------------------------===//
// Mixed precision: the kernels above on bf16 tensors, and the casts
//===----------------------------------------------------------------------===//

void shardc_rt_convert_f32_bf16(shardc_rt_bf16 *dst, const float *src,
                                int64_t n);
void shardc_rt_convert_bf16_f32(float *dst, const shardc_rt_bf16 *src,
                                int64_t n);

void shardc_rt_linear_bf16(const shardc_rt_bf16 *x, const shardc_rt_bf16 *w,
                           const shardc_rt_bf16 *b, shardc_rt_bf16 *y,
                           int64_t m, int64_t k, int64_t n);
void shardc_rt_matmul_bf16(const shardc_rt_bf16 *lhs,
                           const shardc_rt_bf16 *rhs, shardc_rt_bf16 *out,
                           int64_t batch, int64_t m, int64_t k, int64_t n,
                           int transposeLhs, int transposeRhs);
void shardc_rt_add_bf16(const shardc_rt_bf16 *lhs, const shardc_rt_bf16 *rhs,
                        shardc_rt_bf16 *y, int64_t n, int64_t m);
void shardc_rt_scale_bf16(const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                          int64_t n, double factor);
void shardc_rt_gelu_bf16(const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                         int64_t n);
void shardc_rt_relu_bf16(const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                         int64_t n);
void shardc_rt_layernorm_bf16(const shardc_rt_bf16 *x,
                              const shardc_rt_bf16 *w,
                              const shardc_rt_bf16 *b, shardc_rt_bf16 *y,
                              int64_t rows, int64_t c, double eps);
void shardc_rt_linear_gelu_bf16(const shardc_rt_bf16 *x,
                                const shardc_rt_bf16 *w,
                                const shardc_rt_bf16 *b, shardc_rt_bf16 *pre,
                                shardc_rt_bf16 *y, int64_t m, int64_t k,
                                int64_t n);
void shardc_rt_add_layernorm_bf16(const shardc_rt_bf16 *lhs,
                                  const shardc_rt_bf16 *rhs,
                                  const shardc_rt_bf16 *w,
                                  const shardc_rt_bf16 *b, shardc_rt_bf16 *sum,
                                  shardc_rt_bf16 *y, int64_t rows, int64_t c,
                                  double eps);
int64_t shardc_rt_embedding_bf16(const int32_t *ids,
                                 const shardc_rt_bf16 *table,
                                 shardc_rt_bf16 *out, int64_t n, int64_t v,
                                 int64_t c);
void shardc_rt_attention_bf16(const shardc_rt_bf16 *qkv, shardc_rt_bf16 *out,
                              float *lse, int64_t b, int64_t t, int64_t c,
                              int64_t heads);
int64_t shardc_rt_cross_entropy_bf16(const shardc_rt_bf16 *logits,
                                     const int32_t *targets, float *loss,
                                     int64_t n, int64_t v, int64_t ld);
void shardc_rt_sum_to_bf16(const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                           int64_t outer, int64_t inner);
void shardc_rt_copy_bf16(shardc_rt_bf16 *dst, const shardc_rt_bf16 *src,
                         int64_t n);
/// dst[n] = value rounded to bf16.
void shardc_rt_fill_bf16(shardc_rt_bf16 *dst, float value, int64_t n);
void shardc_rt_accumulate_bf16(shardc_rt_bf16 *dst, const shardc_rt_bf16 *src,
                               int64_t n);
void shardc_rt_gelu_grad_bf16(const shardc_rt_bf16 *dy,
                              const shardc_rt_bf16 *x, shardc_rt_bf16 *dx,
                              int64_t n);
void shardc_rt_relu_grad_bf16(const shardc_rt_bf16 *dy,
                              const shardc_rt_bf16 *x, shardc_rt_bf16 *dx,
                              int64_t n);
void shardc_rt_layernorm_grad_bf16(const shardc_rt_bf16 *dy,
                                   const shardc_rt_bf16 *x,
                                   const shardc_rt_bf16 *w, shardc_rt_bf16 *dx,
                                   shardc_rt_bf16 *dw, shardc_rt_bf16 *db,
                                   int64_t rows, int64_t c, double eps);
void shardc_rt_matmul_gelu_grad_bf16(const shardc_rt_bf16 *lhs,
                                     const shardc_rt_bf16 *rhs,
                                     const shardc_rt_bf16 *pre,
                                     shardc_rt_bf16 *dx, int64_t m, int64_t k,
                                     int64_t n, int transposeLhs,
                                     int transposeRhs);
void shardc_rt_matmul_bias_grad_bf16(const shardc_rt_bf16 *lhs,
                                     const shardc_rt_bf16 *rhs,
                                     shardc_rt_bf16 *dw, shardc_rt_bf16 *db,
                                     int64_t m, int64_t k, int64_t n,
                                     int transposeLhs, int transposeRhs);
void shardc_rt_layernorm_grad_add_bf16(
    const shardc_rt_bf16 *dy, const shardc_rt_bf16 *x, const shardc_rt_bf16 *w,
    const shardc_rt_bf16 *addend, shardc_rt_bf16 *dx, shardc_rt_bf16 *dw,
    shardc_rt_bf16 *db, int64_t rows, int64_t c, double eps);
int64_t shardc_rt_embedding_grad_bf16(const shardc_rt_bf16 *dy,
                                      const int32_t *ids,
                                      shardc_rt_bf16 *dtable, int64_t n,
                                      int64_t v, int64_t c);
void shardc_rt_attention_grad_bf16(const shardc_rt_bf16 *dy,
                                   const shardc_rt_bf16 *qkv,
                                   const shardc_rt_bf16 *out, const float *lse,
                                   shardc_rt_bf16 *dqkv, int64_t b, int64_t t,
                                   int64_t c, int64_t heads);
int64_t shardc_rt_cross_entropy_grad_bf16(const float *dloss,
                                          const shardc_rt_bf16 *logits,
                                          const int32_t *targets,
                                          shardc_rt_bf16 *dlogits, int64_t n,
                                          int64_t v, int64_t ld);
int64_t shardc_rt_cross_entropy_and_grad_bf16(
    const float *dloss, const shardc_rt_bf16 *logits, const int32_t *targets,
    float *loss, shardc_rt_bf16 *dlogits, int64_t n, int64_t v, int64_t ld);

#ifdef __cplusplus
} // extern "C"

namespace shardc::rt::cpu {

// The kernels above, for T = float and T = double (explicitly instantiated in
// Kernels.cpp; other types do not link). Same arguments, same contracts.

template <typename T>
void linear(const T *x, const T *w, const T *b, T *y, int64_t m, int64_t k,
            int64_t n);
template <typename T>
void matmul(const T *lhs, const T *rhs, T *out, int64_t batch, int64_t m,
            int64_t k, int64_t n, bool transposeLhs, bool transposeRhs);
template <typename T>
void add(const T *lhs, const T *rhs, T *y, int64_t n, int64_t m);
template <typename T> void scale(const T *x, T *y, int64_t n, double factor);
template <typename T> void gelu(const T *x, T *y, int64_t n);
template <typename T> void relu(const T *x, T *y, int64_t n);
template <typename T>
void layerNorm(const T *x, const T *w, const T *b, T *y, int64_t rows,
               int64_t c, double eps);
template <typename T>
int64_t embedding(const int32_t *ids, const T *table, T *out, int64_t n,
                  int64_t v, int64_t c);
template <typename T>
void attention(const T *qkv, T *out, T *lse, int64_t b, int64_t t, int64_t c,
               int64_t heads);
template <typename T>
int64_t crossEntropy(const T *logits, const int32_t *targets, T *loss,
                     int64_t n, int64_t v, int64_t ld);
void iota(int32_t *out, int64_t n);
template <typename T>
void sumTo(const T *x, T *y, int64_t outer, int64_t inner);
template <typename T> void copy(T *dst, const T *src, int64_t n);
template <typename T> void fill(T *dst, T value, int64_t n);
template <typename T> void accumulate(T *dst, const T *src, int64_t n);

template <typename T> void geluGrad(const T *dy, const T *x, T *dx, int64_t n);
template <typename T> void reluGrad(const T *dy, const T *x, T *dx, int64_t n);
template <typename T>
void layerNormGrad(const T *dy, const T *x, const T *w, T *dx, T *dw, T *db,
                   int64_t rows, int64_t c, double eps);
template <typename T>
int64_t embeddingGrad(const T *dy, const int32_t *ids, T *dtable, int64_t n,
                      int64_t v, int64_t c);
template <typename T>
void attentionGrad(const T *dy, const T *qkv, const T *out, const T *lse,
                   T *dqkv, int64_t b, int64_t t, int64_t c, int64_t heads);
template <typename T>
int64_t crossEntropyGrad(const T *dloss, const T *logits,
                         const int32_t *targets, T *dlogits, int64_t n,
                         int64_t v, int64_t ld);

} // namespace shardc::rt::cpu

#endif // __cplusplus

#endif // SHARDC_RT_KERNELS_H
