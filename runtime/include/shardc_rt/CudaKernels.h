//===- CudaKernels.h - CUDA kernels of every train op -------------*- C -*-===//
//
// The CUDA counterparts of shardc_rt/Kernels.h, for target=cuda: the same
// kernels, with the same names after the prefix shardc_rt_cuda_, the same
// arguments in the same order and the same semantics (Kernels.h documents
// each one; include/shardc/Dialect/Train/IR/TrainOps.td specifies the ops),
// preceded by a shardc_rt_cuda_kernels object.
//
// Conventions, besides those of Kernels.h:
//  - every pointer is a DEVICE pointer, the scalars included (the loss of
//    cross_entropy, the dloss of cross_entropy_grad);
//  - every call only enqueues work on the object's stream and returns: no
//    synchronisation, no host <-> device copy. Scratch memory comes from one
//    workspace of the object that grows, stream-ordered
//    (cudaFreeAsync + cudaMallocAsync on the object's stream), when a call
//    needs more than it holds. A training step repeats the same shapes, so it
//    grows during the first step only, to the largest need of one call:
//      attention       the scores of up to max(B, H) (batch element, head)
//                      pairs at a time, max(B, H) * T * T floats, bounded
//                      to 2^26 floats (256 MiB) or one pair's T * T;
//      attention_grad  twice that (scores and their gradient); the bf16
//                      kernels add a bf16 copy of the scores;
//      attention,      with flash attention (set_flash_attention), instead:
//      attention_grad  b * heads * t floats (the rows' log-sum-exps, where
//                      the caller passes no lse); for the gradient, the
//                      deltas (b * heads * t floats) and an f32 dq
//                      (b * t * c floats; none when deterministic, see
//                      set_deterministic); with cuDNN attention
//                      (set_cudnn_attention), for a shape cuDNN takes,
//                      its plan's workspace, and for the gradient an f32
//                      dq and the rows' dot(dy, out) besides;
//      layernorm_grad  2 * rows + 2 * chunks * C floats (per-row stats and
//                      partial column sums of dweight and dbias);
//      sum_to          chunks * inner floats when the rows are split;
//      cross_entropy, cross_entropy_and_grad
//                      n doubles (per-row losses, summed in a fixed order);
//      embedding_grad  the ids sorted with their positions (2 * n int32 and
//                      2 * n int64), 16 * ceil(n / 64) digit counts, each
//                      id's run (2 * v int64) and first group (v + 1
//                      int64), and the sums of long runs' groups
//                      (2 * ceil(n / 64) * c floats);
//      layernorm_grad_add, add_layernorm: as layernorm_grad, layernorm;
//    (chunks <= 1024). Besides, cuBLAS and cuBLASLt have a fixed 32 MiB
//    workspace each (allocated by create; the GEMM epilogues of linear,
//    linear_gelu, matmul_gelu_grad and matmul_bias_grad use cuBLASLt's;
//    matmul_bias_grad unfused takes sum_to's scratch), and the object keeps
//    one cuBLASLt plan per GEMM shape with an epilogue (descriptors,
//    layouts, the heuristic's algorithm: host memory, made by a shape's
//    first call). The environment variable SHARDC_RT_CUDA_ATTENTION_SCORES,
//    read by create, overrides the 2^26 bound (a number of floats; the unit
//    test uses it to exercise the chunking); SHARDC_RT_CUDA_GEMM_EPILOGUE_LOG
//    (non-empty, not 0) prints each new plan to stderr: fused, or why not;
//    SHARDC_RT_CUDA_FLASH_DQ=bulk makes the flash backward add dq by sm_90's
//    bulk reductions of rows staged in shared memory instead of atomics,
//    SHARDC_RT_CUDA_FLASH_STEPS=whole keeps its steps' scores whole
//    where it would take them in halves to fit more blocks on a
//    multiprocessor, and SHARDC_RT_CUDA_FLASH_FORWARD_TILES=2 gives each
//    of the flash forward's warps two row tiles of 16 queries (128 a
//    block) instead of one, SHARDC_RT_CUDA_FLASH_BACKWARD_TILES=2 each of
//    its backward's warps two of 16 keys (the kernel bench times each
//    beside the default); SHARDC_RT_CUDA_CROSS_ENTROPY=online keeps
//    cross entropy's rows out of shared memory, read online where they
//    would be staged. shardc_rt_cuda_kernels_configure sets any of
//    these on one object, as create does from the environment.
//  - results are deterministic (same inputs, same bits), except the flash
//    and cuDNN attention_grad's dq (shardc_rt_cuda_kernels_set_flash_attention,
//    _set_cudnn_attention), which sums by atomicAdd unless
//    shardc_rt_cuda_kernels_set_deterministic is on.
//  - ids and targets cannot be checked synchronously. embedding,
//    embedding_grad, cross_entropy, cross_entropy_grad and
//    cross_entropy_and_grad check theirs on the device and record the
//    position of the first bad one in the object's error slot; the failing
//    call then writes nothing (as the CPU kernels), and so does every later
//    call of these five until the slot is read and reset by
//    shardc_rt_cuda_kernels_check, which the runtime calls once at the end
//    of a step. Only the first failing call is recorded.
//  - a CUDA or cuBLAS error (a bad launch, an out-of-memory) prints the call,
//    the error, the file and the line, and aborts.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_CUDA_KERNELS_H
#define SHARDC_RT_CUDA_KERNELS_H

#include "shardc_rt/BFloat16.h"
#include "shardc_rt/KernelTime.h"

#include <cuda_runtime.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The stream the kernels run on, a cuBLAS handle bound to it and a cuBLASLt
/// handle (each with its own workspace), the scratch workspace, the
/// cuBLASLt plans and the device-side error slot.
typedef struct shardc_rt_cuda_kernels shardc_rt_cuda_kernels;

//===----------------------------------------------------------------------===//
// Lifetime and errors
//===----------------------------------------------------------------------===//

/// cudaSuccess where the current device can run this build's kernels: the
/// build holds machine code for its architecture, or PTX that the driver
/// compiles for it (CMAKE_CUDA_ARCHITECTURES: 90, the default, is sm_90
/// code and compute_90 PTX, which runs on sm_90 and later GPUs); else the
/// error loading them gives (cudaErrorNoKernelImageForDevice on an sm_80
/// GPU), cleared from the last-error state. Call it before create: every
/// kernel launch on such a device fails.
cudaError_t shardc_rt_cuda_kernels_image_status(void);

/// Creates the kernels' state on the current device, for `stream` (which
/// must belong to that device; 0 is the legacy default stream). allowTf32 != 0
/// runs fp32 GEMMs on TF32 tensor cores (CUBLAS_TF32_TENSOR_OP_MATH; with
/// cuBLASLt, CUBLAS_COMPUTE_32F_FAST_TF32), else in full fp32
/// (CUBLAS_PEDANTIC_MATH; CUBLAS_COMPUTE_32F). GEMM epilogues are on.
/// Synchronous (it allocates).
shardc_rt_cuda_kernels *shardc_rt_cuda_kernels_create(cudaStream_t stream,
                                                      int allowTf32);

/// Sets one of the SHARDC_RT_CUDA_* settings above on k (all three not
/// null), as create does where the environment holds `name`=`value`: so
/// that a test or a benchmark makes variants side by side. Returns 0,
/// changing nothing, where `name` is none of them.
int shardc_rt_cuda_kernels_configure(shardc_rt_cuda_kernels *k,
                                     const char *name, const char *value);

/// Waits for the stream, then frees everything create and the calls
/// allocated. Null is a no-op. The stream itself is the caller's.
void shardc_rt_cuda_kernels_destroy(shardc_rt_cuda_kernels *k);

/// Reads the error slot back (this synchronises k's stream), resets it and
/// returns -1 when no id or target was out of range since the last call, or
/// the position of the first bad one of the first failing call; *op (when op
/// is not null) is then that call's C function name, e.g.
/// "shardc_rt_cuda_embedding_f32", a static string, and null otherwise.
int64_t shardc_rt_cuda_kernels_check(shardc_rt_cuda_kernels *k,
                                     const char **op);

/// The device memory k holds for its kernels outside their callers'
/// tensors: cuBLAS's and cuBLASLt's workspaces (32 MiB each), and the
/// scratch workspaces, which grow (in whole MiBs) to the largest call's
/// needs so far: attention's, cuDNN's plans', cross entropy's rows', column
/// sums' partials, bf16 kernels' f32 sums.
int64_t shardc_rt_cuda_kernels_workspace_bytes(const shardc_rt_cuda_kernels *k);

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// y[m, n] = x[m, kdim] w[n, kdim]^T + b[n]; b may be null (no bias). With
/// a bias and epilogues on, one cuBLASLt GEMM adds it
/// (CUBLASLT_EPILOGUE_BIAS).
void shardc_rt_cuda_linear_f32(shardc_rt_cuda_kernels *k, const float *x,
                               const float *w, const float *b, float *y,
                               int64_t m, int64_t kdim, int64_t n);

/// out[batch, m, n] = op(lhs) op(rhs); lhs [batch, m, kdim] (or
/// [batch, kdim, m] when transposeLhs != 0), rhs [batch, kdim, n] (or
/// [batch, n, kdim] when transposeRhs != 0).
void shardc_rt_cuda_matmul_f32(shardc_rt_cuda_kernels *k, const float *lhs,
                               const float *rhs, float *out, int64_t batch,
                               int64_t m, int64_t kdim, int64_t n,
                               int transposeLhs, int transposeRhs);

/// y[i] = lhs[i] + rhs[i % m], m divides n. May run in place (y == lhs).
void shardc_rt_cuda_add_f32(shardc_rt_cuda_kernels *k, const float *lhs,
                            const float *rhs, float *y, int64_t n, int64_t m);

/// y[n] = x[n] * (float)factor. May run in place.
void shardc_rt_cuda_scale_f32(shardc_rt_cuda_kernels *k, const float *x,
                              float *y, int64_t n, double factor);

/// GPT-2's GELU (tanh form). May run in place.
void shardc_rt_cuda_gelu_f32(shardc_rt_cuda_kernels *k, const float *x,
                             float *y, int64_t n);

/// y[n] = max(x, 0). May run in place.
void shardc_rt_cuda_relu_f32(shardc_rt_cuda_kernels *k, const float *x,
                             float *y, int64_t n);

/// Layer normalization of the rows of x[rows, c] (biased variance).
void shardc_rt_cuda_layernorm_f32(shardc_rt_cuda_kernels *k, const float *x,
                                  const float *w, const float *b, float *y,
                                  int64_t rows, int64_t c, double eps);

/// pre[m, n] = linear(x, w, b) and y = gelu(pre) (train.linear_gelu; b may
/// be null): one GEMM whose epilogue adds the bias, stores pre and applies
/// GELU (cuBLASLt, CUBLASLT_EPILOGUE_GELU_AUX(_BIAS)), unless epilogues are
/// off (set_gemm_epilogues); else linear into pre, then gelu. Fused, GELU
/// is applied to the f32 preactivation, not to pre as stored: for bf16 one
/// rounding apart from the CPU's gelu of the stored pre; and cuBLASLt may
/// evaluate tanh approximately (see CudaKernelsTest.cu's tolerances).
void shardc_rt_cuda_linear_gelu_f32(shardc_rt_cuda_kernels *k, const float *x,
                                    const float *w, const float *b, float *pre,
                                    float *y, int64_t m, int64_t kdim,
                                    int64_t n);

/// sum[rows, c] = lhs + rhs and y = layernorm(sum) (train.add_layernorm),
/// one warp per row: y is layernorm's of the stored (bf16: rounded) sum,
/// bit for bit. Not a GEMM: set_gemm_epilogues does not affect it.
void shardc_rt_cuda_add_layernorm_f32(shardc_rt_cuda_kernels *k,
                                      const float *lhs, const float *rhs,
                                      const float *w, const float *b,
                                      float *sum, float *y, int64_t rows,
                                      int64_t c, double eps);

/// out[n, c] = table[ids[i], :]; ids checked against [0, v) (error slot).
void shardc_rt_cuda_embedding_f32(shardc_rt_cuda_kernels *k,
                                  const int32_t *ids, const float *table,
                                  float *out, int64_t n, int64_t v, int64_t c);

/// Causal multi-head self-attention on qkv[b, t, 3c] into out[b, t, c];
/// lse[b, heads, t] (f32; skipped where null) receives each (batch, head,
/// query)'s log-sum-exp of its scaled scores.
void shardc_rt_cuda_attention_f32(shardc_rt_cuda_kernels *k, const float *qkv,
                                  float *out, float *lse, int64_t b, int64_t t,
                                  int64_t c, int64_t heads);

/// *loss (one device float) = mean over the n rows of logits[n, ld] of
/// -log softmax(row[0:v])[targets[i]] (0 when n == 0): the columns [v, ld)
/// are padding, not read; targets checked against [0, v) (error slot).
void shardc_rt_cuda_cross_entropy_f32(shardc_rt_cuda_kernels *k,
                                      const float *logits,
                                      const int32_t *targets, float *loss,
                                      int64_t n, int64_t v, int64_t ld);

/// out[n] = 0, 1, ..., n - 1.
void shardc_rt_cuda_iota_i32(shardc_rt_cuda_kernels *k, int32_t *out,
                             int64_t n);

/// y[inner] = sum over the leading dimensions of x[outer, inner].
void shardc_rt_cuda_sum_to_f32(shardc_rt_cuda_kernels *k, const float *x,
                               float *y, int64_t outer, int64_t inner);

/// dst[n] = src[n] (no overlap).
void shardc_rt_cuda_copy_f32(shardc_rt_cuda_kernels *k, float *dst,
                             const float *src, int64_t n);
/// dst[n] = value.
void shardc_rt_cuda_fill_f32(shardc_rt_cuda_kernels *k, float *dst,
                             float value, int64_t n);
/// dst[n] += src[n].
void shardc_rt_cuda_accumulate_f32(shardc_rt_cuda_kernels *k, float *dst,
                                   const float *src, int64_t n);

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// dx[n] = dy[n] * gelu'(x[n]). May run in place (dx == dy).
void shardc_rt_cuda_gelu_grad_f32(shardc_rt_cuda_kernels *k, const float *dy,
                                  const float *x, float *dx, int64_t n);

/// dx[n] = x > 0 ? dy : 0. May run in place (dx == dy).
void shardc_rt_cuda_relu_grad_f32(shardc_rt_cuda_kernels *k, const float *dy,
                                  const float *x, float *dx, int64_t n);

/// dx[rows, c], dw[c], db[c] of layernorm (dw, db are overwritten).
void shardc_rt_cuda_layernorm_grad_f32(shardc_rt_cuda_kernels *k,
                                       const float *dy, const float *x,
                                       const float *w, float *dx, float *dw,
                                       float *db, int64_t rows, int64_t c,
                                       double eps);

/// dx[m, n] = gelu_grad(op(lhs) op(rhs), pre) (train.matmul_gelu_grad; the
/// transposes as matmul's, batch 1): one GEMM whose epilogue multiplies the
/// product by GELU's derivative at pre (cuBLASLt, CUBLASLT_EPILOGUE_DGELU),
/// unless epilogues are off; else matmul into dx, then gelu_grad in place.
/// Fused, the product is not rounded before the multiplication (bf16: one
/// rounding apart from the CPU's).
void shardc_rt_cuda_matmul_gelu_grad_f32(shardc_rt_cuda_kernels *k,
                                         const float *lhs, const float *rhs,
                                         const float *pre, float *dx,
                                         int64_t m, int64_t kdim, int64_t n,
                                         int transposeLhs, int transposeRhs);

/// dw[m, n] = lhs^T op(rhs) and db[m] = lhs's kdim rows summed, for lhs
/// [kdim, m] (train.matmul_bias_grad: a linear's weight and bias gradients;
/// transposeLhs is 1, transposeRhs as matmul's, batch 1): one GEMM whose
/// epilogue also writes db from the same read of lhs (cuBLASLt,
/// CUBLASLT_EPILOGUE_BGRADB), unless epilogues are off or cuBLASLt has no
/// algorithm for the shape; else matmul, then sum_to. Fused, db is summed
/// in cuBLASLt's order (f32, rounded once to the stored type).
void shardc_rt_cuda_matmul_bias_grad_f32(shardc_rt_cuda_kernels *k,
                                         const float *lhs, const float *rhs,
                                         float *dw, float *db, int64_t m,
                                         int64_t kdim, int64_t n,
                                         int transposeLhs, int transposeRhs);

/// layernorm_grad with dx = addend + the input's gradient
/// (train.layernorm_grad_add), in the same pass over the rows: the gradient
/// rounded as layernorm_grad stores it, then added (one more rounding), so
/// dx is accumulate's addend + layernorm_grad's dx bit for bit; dweight and
/// dbias are layernorm_grad's. dx does not alias addend. Not a GEMM.
void shardc_rt_cuda_layernorm_grad_add_f32(
    shardc_rt_cuda_kernels *k, const float *dy, const float *x, const float *w,
    const float *addend, float *dx, float *dw, float *db, int64_t rows,
    int64_t c, double eps);

/// dtable[v, c] = the rows of dy[n, c] summed by ids[n], each id's in
/// position order in f32 (no atomics: deterministic, and the f32 result
/// is the CPU kernel's bit for bit); ids checked against [0, v) (error
/// slot).
void shardc_rt_cuda_embedding_grad_f32(shardc_rt_cuda_kernels *k,
                                       const float *dy, const int32_t *ids,
                                       float *dtable, int64_t n, int64_t v,
                                       int64_t c);

/// dqkv[b, t, 3c] of attention from dy[b, t, c], qkv[b, t, 3c] and the
/// forward's out and lse (which the fused kernels read instead of running
/// the forward again; the GEMMs recompute the probabilities and read
/// neither).
void shardc_rt_cuda_attention_grad_f32(shardc_rt_cuda_kernels *k,
                                       const float *dy, const float *qkv,
                                       const float *out, const float *lse,
                                       float *dqkv, int64_t b, int64_t t,
                                       int64_t c, int64_t heads);

/// dlogits[n, ld] = (softmax(logits) - onehot(targets)) * *dloss / n, the
/// softmax over the first v columns and 0 in the padding [v, ld); dloss a
/// device pointer to one float; targets checked against [0, v) (error
/// slot). May run in place (dlogits == logits).
void shardc_rt_cuda_cross_entropy_grad_f32(
    shardc_rt_cuda_kernels *k, const float *dloss, const float *logits,
    const int32_t *targets, float *dlogits, int64_t n, int64_t v, int64_t ld);

/// cross_entropy then cross_entropy_grad (train.cross_entropy_and_grad) in
/// one kernel that reads each row twice, not three times: *loss and dlogits
/// as the two write them. May run in place (dlogits == logits).
void shardc_rt_cuda_cross_entropy_and_grad_f32(
    shardc_rt_cuda_kernels *k, const float *dloss, const float *logits,
    const int32_t *targets, float *loss, float *dlogits, int64_t n, int64_t v,
    int64_t ld);

/// attention (and its gradient) through fused FlashAttention-2 style kernels
/// on tensor cores (runtime/cuda/FlashAttention.h) where the head size d
/// allows it (d % 16 == 0, d <= 128), instead of GEMMs over the full T x T
/// scores; off until set (the CUDA backend sets it unless
/// SHARDC_ATTENTION=gemm). bf16 runs on bf16 tensor cores;
/// f32 on TF32 tensor cores (q, k, v, dy, the probabilities and their
/// gradient rounded to a 10-bit mantissa, f32 accumulation), and so only
/// where create's allowTf32 is set: with it off, f32 attention keeps the
/// GEMMs' full fp32 products.
/// Their workspace: the rows' log-sum-exps where the forward's caller passes
/// no lse, and the deltas and an f32 dq (backward: b heads t + b t c
/// floats).
void shardc_rt_cuda_kernels_set_flash_attention(shardc_rt_cuda_kernels *k,
                                                int on);

/// Deterministic attention_grad (off until set; the CUDA backend sets it
/// with SHARDC_DETERMINISTIC=1): the flash kernels compute dq by a second
/// kernel per block of queries, in a fixed order, instead of f32 atomics
/// (two more of the backward's five products, and no f32 dq in the
/// workspace); cuDNN attention declines (its backward's dq sums by
/// atomics), so bf16 runs the flash kernels. Every other kernel is
/// deterministic either way.
void shardc_rt_cuda_kernels_set_deterministic(shardc_rt_cuda_kernels *k,
                                              int on);

/// bf16 attention (and its gradient) through cuDNN's fused flash attention
/// (runtime/cuda/CudnnAttention.h: cuDNN 9.16 or later through its backend
/// graph API, libcudnn loaded when this first turns it on) where cuDNN
/// takes the shape (d % 8 == 0, d <= 256, T > 1) and qkv, out, lse, dy and
/// dqkv are 16-byte aligned, instead of what set_flash_attention says; off
/// until set (the CUDA backend sets it with SHARDC_ATTENTION=cudnn). A
/// shape's forward and backward are planned together, by its first call;
/// one cuDNN declines, there or at a later call, runs as if this were off
/// (stderr says why, once per shape). f32 attention is unchanged.
/// Workspace: the cuDNN plan's; the forward's rows' log-sum-exps where its
/// caller passes no lse; the gradient's f32 dq and rows' dot(dy, out).
void shardc_rt_cuda_kernels_set_cudnn_attention(shardc_rt_cuda_kernels *k,
                                                int on);

/// Null where cuDNN attention is on and cuDNN runs bf16 attention of this
/// shape (planning it where not yet planned), else why not: off, cuDNN not
/// loaded, or cuDNN's words on the graph (a string the object owns, valid
/// until the next call on k: a later refusal rewrites it).
const char *shardc_rt_cuda_kernels_cudnn_attention_declines(
    shardc_rt_cuda_kernels *k, int64_t b, int64_t t, int64_t c, int64_t heads);

/// Whether linear, linear_gelu, matmul_gelu_grad and matmul_bias_grad fuse
/// their bias, GELU, GELU-derivative and bias-gradient work into the GEMM
/// through cuBLASLt epilogues (on by default), or run a cuBLAS GEMM followed
/// by an elementwise kernel or a column sum (off;
/// also, decided once per shape, where cuBLASLt finds no algorithm or n is
/// not a multiple of 8 for linear_gelu and matmul_gelu_grad, and for a call
/// with a pointer not 16-byte aligned). fp32 without TF32 (create's
/// allowTf32 == 0) keeps GELU and its derivative out of the epilogues, whose
/// tanh may be approximate: only the bias and its gradient fuse there. The
/// runtime sets it from SHARDC_GEMM_EPILOGUES=on|off|no-bias-grad.
void shardc_rt_cuda_kernels_set_gemm_epilogues(shardc_rt_cuda_kernels *k,
                                               int on);

/// With the epilogues on, whether matmul_bias_grad takes its bias gradient
/// from the GEMM's epilogue (BGRADB; on by default) or from sum_to (off:
/// SHARDC_GEMM_EPILOGUES=no-bias-grad, which bench/gpu/run.sh sets where
/// only the kernel test's matmul_bias_grad epilogue checks fail).
void shardc_rt_cuda_kernels_set_bias_grad_epilogue(shardc_rt_cuda_kernels *k,
                                                   int on);

//===----------------------------------------------------------------------===//
// Per-kernel timing and the record of calls (shardc_rt/KernelTime.h)
//===----------------------------------------------------------------------===//

/// Off until enabled: events recorded on the stream around each call.
void shardc_rt_cuda_kernel_times_enable(shardc_rt_cuda_kernels *k, int on);
/// Waits for the stream, adds the calls since the last collection to their
/// kernels' entries, and copies up to `capacity` entries (in the order of
/// their first call) to `out`; returns how many there are.
int32_t shardc_rt_cuda_kernel_times(shardc_rt_cuda_kernels *k,
                                    shardc_rt_kernel_time *out,
                                    int32_t capacity);
void shardc_rt_cuda_kernel_times_reset(shardc_rt_cuda_kernels *k);
/// Recording of each call (--trace), off until enabled, with the same
/// events.
void shardc_rt_cuda_kernel_calls_enable(shardc_rt_cuda_kernels *k, int on);
/// Waits for the stream, adds the calls since the last collection (by this
/// or shardc_rt_cuda_kernel_times, which drops their record: while
/// recording, collect here first) to the record, their times in seconds
/// after event `origin` (recorded on the stream before them), and copies
/// up to `capacity` calls since the last reset to `out`; returns how many
/// there are.
int32_t shardc_rt_cuda_kernel_calls(shardc_rt_cuda_kernels *k,
                                    cudaEvent_t origin,
                                    shardc_rt_kernel_call *out,
                                    int32_t capacity);
void shardc_rt_cuda_kernel_calls_reset(shardc_rt_cuda_kernels *k);

/// One phase of a flash attention kernel's steps: the cycles (clock64) its
/// warps spent in it, summed over every warp of every call, and the warp
/// steps they took (a step: a block of 64 keys in the forward, of 64
/// queries in the backward), the same for each phase of a kernel.
typedef struct {
  const char *kernel; /* "attention" or "attention_grad"; static storage */
  const char *phase;  /* e.g. "S = q k^T"; static storage */
  uint64_t cycles, warpSteps;
} shardc_rt_flash_phase;

/// Where the flash attention kernels' warps spend their cycles, to find
/// their bottleneck on a GPU without a profiler: off until enabled; on, the
/// flash forward and the backward's main kernel (not the deterministic
/// backward's dq kernel) run instrumented builds of themselves, which read
/// the clock between phases of each step (slower, by the reads and their
/// counters' registers) and count, until reset. Waits for the stream and
/// copies up to `capacity` phases to `out` (the forward's in order, then
/// the backward's); returns how many there are.
void shardc_rt_cuda_flash_phases_enable(shardc_rt_cuda_kernels *k, int on);
int32_t shardc_rt_cuda_flash_phases(shardc_rt_cuda_kernels *k,
                                    shardc_rt_flash_phase *out,
                                    int32_t capacity);
void shardc_rt_cuda_flash_phases_reset(shardc_rt_cuda_kernels *k);

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

/// AdamW over n f32 elements of a rank's shard (a bf16 param's master), from
/// a gradient in f32 (gradBf16 = 0) or bf16; where `rounded` is not null it
/// receives the updated elements rounded to bf16. As torch.optim.AdamW (decoupled
/// weight decay, bias-corrected moments, step >= 1) and with the operation
/// order and roundings of runtime/host/Optimizer.cpp's adamw: bit for bit
/// the same results when its double hyperparameters hold these float values
/// (else the bias corrections differ, being computed here from the floats:
/// 1 - 0.999f is 1.3e-5 off 1 - 0.999, so the first steps' updates differ by
/// up to ~1e-5 relative, less as step grows):
///   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g g;
///   param = param (1 - lr wd) - lr / (1 - beta1^step) m
///           / (sqrt(v) / sqrt(1 - beta2^step) + eps).
void shardc_rt_cuda_adamw_f32(shardc_rt_cuda_kernels *k, float *param,
                              float *expAvg, float *expAvgSq, const void *grad,
                              int gradBf16, shardc_rt_bf16 *rounded, int64_t n,
                              float lr, float beta1, float beta2, float eps,
                              float weightDecay, int64_t step);

/// One tensor of shardc_rt_cuda_adamw_multi_f32: shardc_rt_cuda_adamw_f32's
/// param, expAvg, expAvgSq, grad, rounded, n and gradBf16; where `clip`
/// (device memory) is not null, the update takes the gradient times *clip;
/// where `no_decay` is set, the tensor takes no weight decay.
typedef struct {
  float *param;
  float *exp_avg;
  float *exp_avg_sq;
  const void *grad;
  shardc_rt_bf16 *rounded;
  int64_t n;
  int32_t grad_bf16;
  const float *clip;
  int32_t no_decay;
} shardc_rt_cuda_adamw_tensor;

/// shardc_rt_cuda_adamw_f32 on each of `count` tensors, each bit for bit
/// what it gives alone, in one launch per 48 non-empty tensors (torch's
/// multi-tensor fused AdamW): a block takes 4096 elements of one tensor.
/// The tensors must not overlap.
void shardc_rt_cuda_adamw_multi_f32(shardc_rt_cuda_kernels *k,
                                    const shardc_rt_cuda_adamw_tensor *tensors,
                                    int32_t count, float lr, float beta1,
                                    float beta2, float eps, float weightDecay,
                                    int64_t step);

/// One tensor of shardc_rt_cuda_sum_squares: n elements, f32 or bf16.
typedef struct {
  const void *data;
  int64_t n;
  int32_t bf16;
} shardc_rt_cuda_squares_tensor;

/// *sum = the sum of x * x over every element of the `count` tensors, in
/// double, rounded to f32 (device memory). Deterministic: blocks take 4096
/// elements at a time in a fixed grid, and their partial sums are added in
/// a fixed order, so a run gives the same bits on any GPU.
void shardc_rt_cuda_sum_squares(shardc_rt_cuda_kernels *k,
                                const shardc_rt_cuda_squares_tensor *tensors,
                                int32_t count, float *sum);

/// torch.nn.utils.clip_grad_norm_'s coefficient from `count` (at most
/// SHARDC_RT_MAX_CLIP_SUMS)
/// squared-norm sums in device memory: *norm = sqrt(sum of the sums, added
/// in order in f32) and *coef = min(1, maxNorm / (*norm + 1e-6)), in f32, as
/// runtime/host/Backend.cpp computes them.
void shardc_rt_cuda_clip_coefficient(shardc_rt_cuda_kernels *k,
                                     const float *const *sums, int32_t count,
                                     float maxNorm, float *coef, float *norm);

//===----------------------------------------------------------------------===//
// Mixed precision: the kernels above on bf16 tensors, and the casts
//===----------------------------------------------------------------------===//
//
// As shardc_rt/Kernels.h's _bf16 kernels: f32 compute on the exact values,
// results rounded to bf16; GEMMs (linear, matmul) run on bf16 tensor cores
// accumulating in f32 and round once. attention(_grad) computes its scores
// and softmax in f32 from bf16 GEMMs and rounds the probabilities (and their
// gradient) to bf16 for the GEMMs that read them, as flash attention does:
// a bf16 copy of the scores joins its workspace. The others read and write
// bf16 in place; layernorm_grad's dweight and dbias, sum_to's sums and
// embedding_grad's table gradient accumulate in f32 (c, inner, v * c floats)
// in a second workspace that grows as the first does, then are rounded.

void shardc_rt_cuda_convert_f32_bf16(shardc_rt_cuda_kernels *k,
                                     shardc_rt_bf16 *dst, const float *src,
                                     int64_t n);
void shardc_rt_cuda_convert_bf16_f32(shardc_rt_cuda_kernels *k, float *dst,
                                     const shardc_rt_bf16 *src, int64_t n);
void shardc_rt_cuda_linear_bf16(shardc_rt_cuda_kernels *k,
                                const shardc_rt_bf16 *x,
                                const shardc_rt_bf16 *w,
                                const shardc_rt_bf16 *b, shardc_rt_bf16 *y,
                                int64_t m, int64_t k_, int64_t n);
void shardc_rt_cuda_matmul_bf16(shardc_rt_cuda_kernels *k,
                                const shardc_rt_bf16 *lhs,
                                const shardc_rt_bf16 *rhs, shardc_rt_bf16 *out,
                                int64_t batch, int64_t m, int64_t k_,
                                int64_t n, int transposeLhs, int transposeRhs);
void shardc_rt_cuda_add_bf16(shardc_rt_cuda_kernels *k,
                             const shardc_rt_bf16 *lhs,
                             const shardc_rt_bf16 *rhs, shardc_rt_bf16 *y,
                             int64_t n, int64_t m);
void shardc_rt_cuda_scale_bf16(shardc_rt_cuda_kernels *k,
                               const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                               int64_t n, double factor);
void shardc_rt_cuda_gelu_bf16(shardc_rt_cuda_kernels *k,
                              const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                              int64_t n);
void shardc_rt_cuda_relu_bf16(shardc_rt_cuda_kernels *k,
                              const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                              int64_t n);
void shardc_rt_cuda_layernorm_bf16(shardc_rt_cuda_kernels *k,
                                   const shardc_rt_bf16 *x,
                                   const shardc_rt_bf16 *w,
                                   const shardc_rt_bf16 *b, shardc_rt_bf16 *y,
                                   int64_t rows, int64_t c, double eps);
void shardc_rt_cuda_linear_gelu_bf16(shardc_rt_cuda_kernels *k,
                                     const shardc_rt_bf16 *x,
                                     const shardc_rt_bf16 *w,
                                     const shardc_rt_bf16 *b,
                                     shardc_rt_bf16 *pre, shardc_rt_bf16 *y,
                                     int64_t m, int64_t k_, int64_t n);
void shardc_rt_cuda_add_layernorm_bf16(
    shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *lhs,
    const shardc_rt_bf16 *rhs, const shardc_rt_bf16 *w,
    const shardc_rt_bf16 *b, shardc_rt_bf16 *sum, shardc_rt_bf16 *y,
    int64_t rows, int64_t c, double eps);
void shardc_rt_cuda_embedding_bf16(shardc_rt_cuda_kernels *k,
                                   const int32_t *ids,
                                   const shardc_rt_bf16 *table,
                                   shardc_rt_bf16 *out, int64_t n, int64_t v,
                                   int64_t c);
void shardc_rt_cuda_attention_bf16(shardc_rt_cuda_kernels *k,
                                   const shardc_rt_bf16 *qkv,
                                   shardc_rt_bf16 *out, float *lse, int64_t b,
                                   int64_t t, int64_t c, int64_t heads);
void shardc_rt_cuda_cross_entropy_bf16(shardc_rt_cuda_kernels *k,
                                       const shardc_rt_bf16 *logits,
                                       const int32_t *targets, float *loss,
                                       int64_t n, int64_t v, int64_t ld);
void shardc_rt_cuda_sum_to_bf16(shardc_rt_cuda_kernels *k,
                                const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                                int64_t outer, int64_t inner);
void shardc_rt_cuda_copy_bf16(shardc_rt_cuda_kernels *k, shardc_rt_bf16 *dst,
                              const shardc_rt_bf16 *src, int64_t n);
void shardc_rt_cuda_fill_bf16(shardc_rt_cuda_kernels *k, shardc_rt_bf16 *dst,
                              float value, int64_t n);
void shardc_rt_cuda_accumulate_bf16(shardc_rt_cuda_kernels *k,
                                    shardc_rt_bf16 *dst,
                                    const shardc_rt_bf16 *src, int64_t n);
void shardc_rt_cuda_gelu_grad_bf16(shardc_rt_cuda_kernels *k,
                                   const shardc_rt_bf16 *dy,
                                   const shardc_rt_bf16 *x,
                                   shardc_rt_bf16 *dx, int64_t n);
void shardc_rt_cuda_relu_grad_bf16(shardc_rt_cuda_kernels *k,
                                   const shardc_rt_bf16 *dy,
                                   const shardc_rt_bf16 *x,
                                   shardc_rt_bf16 *dx, int64_t n);
void shardc_rt_cuda_layernorm_grad_bf16(
    shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *dy,
    const shardc_rt_bf16 *x, const shardc_rt_bf16 *w, shardc_rt_bf16 *dx,
    shardc_rt_bf16 *dw, shardc_rt_bf16 *db, int64_t rows, int64_t c,
    double eps);
void shardc_rt_cuda_matmul_gelu_grad_bf16(
    shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *lhs,
    const shardc_rt_bf16 *rhs, const shardc_rt_bf16 *pre, shardc_rt_bf16 *dx,
    int64_t m, int64_t k_, int64_t n, int transposeLhs, int transposeRhs);
void shardc_rt_cuda_matmul_bias_grad_bf16(
    shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *lhs,
    const shardc_rt_bf16 *rhs, shardc_rt_bf16 *dw, shardc_rt_bf16 *db,
    int64_t m, int64_t k_, int64_t n, int transposeLhs, int transposeRhs);
void shardc_rt_cuda_layernorm_grad_add_bf16(
    shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *dy,
    const shardc_rt_bf16 *x, const shardc_rt_bf16 *w,
    const shardc_rt_bf16 *addend, shardc_rt_bf16 *dx, shardc_rt_bf16 *dw,
    shardc_rt_bf16 *db, int64_t rows, int64_t c, double eps);
void shardc_rt_cuda_embedding_grad_bf16(shardc_rt_cuda_kernels *k,
                                        const shardc_rt_bf16 *dy,
                                        const int32_t *ids,
                                        shardc_rt_bf16 *dtable, int64_t n,
                                        int64_t v, int64_t c);
void shardc_rt_cuda_attention_grad_bf16(
    shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *dy,
    const shardc_rt_bf16 *qkv, const shardc_rt_bf16 *out, const float *lse,
    shardc_rt_bf16 *dqkv, int64_t b, int64_t t, int64_t c, int64_t heads);
void shardc_rt_cuda_cross_entropy_grad_bf16(shardc_rt_cuda_kernels *k,
                                            const float *dloss,
                                            const shardc_rt_bf16 *logits,
                                            const int32_t *targets,
                                            shardc_rt_bf16 *dlogits, int64_t n,
                                            int64_t v, int64_t ld);
void shardc_rt_cuda_cross_entropy_and_grad_bf16(
    shardc_rt_cuda_kernels *k, const float *dloss, const shardc_rt_bf16 *logits,
    const int32_t *targets, float *loss, shardc_rt_bf16 *dlogits, int64_t n,
    int64_t v, int64_t ld);

#ifdef __cplusplus
} // extern "C"
#endif

#endif // SHARDC_RT_CUDA_KERNELS_H
