//===- Gemm.cu - Matrix products through cuBLAS and cuBLASLt --------------===//
//
// Matrix products go through cuBLAS (cublasSgemm, or
// cublasSgemmStridedBatched for batches; bf16 through cublasGemmEx on bf16
// tensor cores, accumulating in f32), row-major by the usual trick: a
// row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T.
// GEMM epilogues (on unless set_gemm_epilogues turns them off): linear's
// bias, linear_gelu's bias, preactivation and GELU, and (bf16)
// matmul_gelu_grad's GELU derivative are applied by one cuBLASLt matmul to
// the f32 accumulator, and matmul_bias_grad's bias gradient is summed
// beside its product (EpilogueGemms.h); where cuBLASLt declines a shape or
// a call, it runs the cuBLAS GEMM and the elementwise kernel instead (and
// sum_to for the bias gradient).
//
//===----------------------------------------------------------------------===//

#include "Elementwise.cuh"
#include "KernelUtils.cuh"

using namespace shardc::rt::cuda;

namespace shardc::rt::cuda {

/// Row-major c = alpha op(a) op(b) + beta c for `batch` matrix triples
/// strideA / strideB / strideC elements apart, op(a) [m, kd], op(b) [kd, n];
/// lda, ldb, ldc are the row strides of the stored matrices (as CBLAS
/// row-major). beta is 0 or 1. cuBLAS is column-major: it computes
/// c^T = op(b)^T op(a)^T, reading the row-major b and a as their transposes.
/// All float: cublasSgemm (TF32 where the handle allows it). bf16 operands
/// (T = __nv_bfloat16), with a bf16 or f32 result C: cublasGemmEx on bf16
/// tensor cores, accumulating in f32, c rounded once.
template <typename T> constexpr cudaDataType_t cudaTypeOf() {
  return std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
}

template <typename T, typename C>
void gemm(Kernels *k, bool transA, bool transB, int64_t m, int64_t n,
          int64_t kd, float alpha, const T *a, int64_t lda, int64_t strideA,
          const T *b, int64_t ldb, int64_t strideB, float beta, C *c,
          int64_t ldc, int64_t strideC, int64_t batch) {
  static_assert(!std::is_same_v<T, float> || std::is_same_v<C, float>,
                "f32 operands give an f32 result");
  if (m <= 0 || n <= 0 || batch <= 0)
    return;
  if (kd <= 0) {
    // Nothing to multiply (and a leading dimension of 0 that cuBLAS would
    // reject): c = beta c.
    if (beta == 0.0f) {
      zeroMatricesKernel<<<gridFor(k, batch * m * n), kThreads, 0, k->stream>>>(
          c, batch, m, n, ldc, strideC);
      SHARDC_CUDA_CHECK_LAUNCH();
    }
    return;
  }
  checkIntRange("gemm m", m);
  checkIntRange("gemm n", n);
  checkIntRange("gemm k", kd);
  checkIntRange("gemm lda", lda);
  checkIntRange("gemm ldb", ldb);
  checkIntRange("gemm ldc", ldc);
  checkIntRange("gemm batch", batch);
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  if constexpr (!std::is_same_v<T, float>) {
    SHARDC_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        k->blas, opB, opA, static_cast<int>(n), static_cast<int>(m),
        static_cast<int>(kd), &alpha, b, cudaTypeOf<T>(), static_cast<int>(ldb),
        strideB, a, cudaTypeOf<T>(), static_cast<int>(lda), strideA, &beta, c,
        cudaTypeOf<C>(), static_cast<int>(ldc), strideC,
        static_cast<int>(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else if (batch == 1) {
    SHARDC_CUBLAS_CHECK(
        cublasSgemm(k->blas, opB, opA, static_cast<int>(n), static_cast<int>(m),
                    static_cast<int>(kd), &alpha, b, static_cast<int>(ldb), a,
                    static_cast<int>(lda), &beta, c, static_cast<int>(ldc)));
  } else {
    SHARDC_CUBLAS_CHECK(cublasSgemmStridedBatched(
        k->blas, opB, opA, static_cast<int>(n), static_cast<int>(m),
        static_cast<int>(kd), &alpha, b, static_cast<int>(ldb), strideB, a,
        static_cast<int>(lda), strideA, &beta, c, static_cast<int>(ldc),
        strideC, static_cast<int>(batch)));
  }
}

template void gemm<float, float>(Kernels *, bool, bool, int64_t, int64_t,
                                 int64_t, float, const float *, int64_t,
                                 int64_t, const float *, int64_t, int64_t,
                                 float, float *, int64_t, int64_t, int64_t);
template void gemm<__nv_bfloat16, __nv_bfloat16>(
    Kernels *, bool, bool, int64_t, int64_t, int64_t, float,
    const __nv_bfloat16 *, int64_t, int64_t, const __nv_bfloat16 *, int64_t,
    int64_t, float, __nv_bfloat16 *, int64_t, int64_t, int64_t);
template void gemm<__nv_bfloat16, float>(Kernels *, bool, bool, int64_t,
                                         int64_t, int64_t, float,
                                         const __nv_bfloat16 *, int64_t,
                                         int64_t, const __nv_bfloat16 *,
                                         int64_t, int64_t, float, float *,
                                         int64_t, int64_t, int64_t);

} // namespace shardc::rt::cuda

namespace {

/// Row-major d[m, n] = epilogue(op(a) op(b)) in one cuBLASLt matmul
/// (EpilogueGemms::run). Returns false, having enqueued nothing, where the
/// epilogues are off, where f32 without TF32 asks for a GELU, or where
/// cuBLASLt cannot run it: the caller then runs the unfused kernels.
template <typename T>
bool gemmEpilogue(Kernels *k, cublasLtEpilogue_t epilogue, bool transA,
                  bool transB, int64_t m, int64_t n, int64_t kd, const T *a,
                  const T *b, T *d, const void *bias, const void *aux) {
  // kd = 0: the unfused path writes the bias (or zeros) and its elementwise
  // kernel, without a GEMM cuBLASLt would have to take.
  if (!k->gemmEpilogues || m <= 0 || n <= 0 || kd <= 0)
    return false;
  // cuBLASLt does not document the accuracy of its GELU (CUTLASS's GELU
  // epilogues take a fast tanh, about 2^-11 relative): within the rounding
  // of TF32 GEMMs and of bf16, not of full fp32. fp32 without TF32 keeps
  // GELU and its derivative in the elementwise kernels.
  if (std::is_same_v<T, float> && !k->allowTf32 &&
      epilogue != CUBLASLT_EPILOGUE_BIAS &&
      epilogue != CUBLASLT_EPILOGUE_BGRADB)
    return false;
  return k->epilogues->run(
      {m, n, kd, transA, transB, cudaTypeOf<T>(), epilogue, k->allowTf32}, a, b,
      d, bias, aux);
}

/// linear and matmul for T = float or __nv_bfloat16 (see gemm).
template <typename T>
void linear(Kernels *k, const T *x, const T *w, const T *b, T *y, int64_t m,
            int64_t kdim, int64_t n) {
  if (m <= 0 || n <= 0)
    return;
  // With epilogues, one cuBLASLt GEMM adds the bias to the f32 accumulator.
  if (b && gemmEpilogue(k, CUBLASLT_EPILOGUE_BIAS, false, true, m, n, kdim, x,
                        w, y, b, nullptr))
    return;
  // Else the bias goes in first and the GEMM accumulates onto it.
  if (b) {
    broadcastRowsKernel<<<gridFor(k, m * n), kThreads, 0, k->stream>>>(
        y, b, m * n, n);
    SHARDC_CUDA_CHECK_LAUNCH();
  }
  gemm(k, false, true, m, n, kdim, 1.0f, x, kdim, 0, w, kdim, 0,
       b ? 1.0f : 0.0f, y, n, 0, 1);
}

template <typename T>
void matmul(Kernels *k, const T *lhs, const T *rhs, T *out, int64_t batch,
            int64_t m, int64_t kdim, int64_t n, int transposeLhs,
            int transposeRhs) {
  int64_t lda = transposeLhs ? m : kdim;
  int64_t ldb = transposeRhs ? kdim : n;
  gemm(k, transposeLhs != 0, transposeRhs != 0, m, n, kdim, 1.0f, lhs, lda,
       m * kdim, rhs, ldb, kdim * n, 0.0f, out, n, m * n, batch);
}

/// linear_gelu: pre = linear(x, w, b), y = gelu(pre). With epilogues, one
/// cuBLASLt GEMM whose epilogue adds the bias, stores pre (aux) and applies
/// GELU to the f32 preactivation (for bf16 before its rounding, where the
/// unfused path takes gelu of the rounded pre: one bf16 rounding apart).
template <typename T>
void linearGelu(Kernels *k, const T *x, const T *w, const T *b, T *pre, T *y,
                int64_t m, int64_t kdim, int64_t n) {
  if (m <= 0 || n <= 0)
    return;
  cublasLtEpilogue_t epilogue =
      b ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  if (gemmEpilogue(k, epilogue, false, true, m, n, kdim, x, w, y, b,
                   static_cast<const void *>(pre)))
    return;
  linear(k, x, w, b, pre, m, kdim, n);
  launch(k, m * n, geluKernel<T>, pre, y, m * n);
}

/// matmul_gelu_grad: dx = gelu_grad(op(lhs) op(rhs), pre), batch 1. With
/// epilogues, for bf16, one cuBLASLt GEMM whose epilogue multiplies the f32
/// product by gelu'(pre) before rounding it (the unfused path rounds it
/// first); else, and for f32, matmul into dx, then gelu_grad in place. On
/// an H200 (GPT-2 small, 12 layers) the DGELU epilogue took bf16's from
/// 31.6 to 14.1 ms a step but f32's (TF32) from 22.2 to 27.7.
template <typename T>
void matmulGeluGrad(Kernels *k, const T *lhs, const T *rhs, const T *pre, T *dx,
                    int64_t m, int64_t kdim, int64_t n, int transposeLhs,
                    int transposeRhs) {
  if (m <= 0 || n <= 0)
    return;
  if (!std::is_same_v<T, float> &&
      gemmEpilogue(k, CUBLASLT_EPILOGUE_DGELU, transposeLhs != 0,
                   transposeRhs != 0, m, n, kdim, lhs, rhs, dx, nullptr,
                   static_cast<const void *>(pre)))
    return;
  matmul(k, lhs, rhs, dx, 1, m, kdim, n, transposeLhs, transposeRhs);
  launch(k, m * n, geluGradKernel<T>, dx, pre, dx, m * n);
}

/// matmul_bias_grad's weight gradient dw[m, n] = lhs^T op(rhs), lhs [kdim,
/// m], batch 1. With epilogues, one cuBLASLt GEMM whose BGRADB epilogue also
/// writes db[m], lhs's rows summed in f32 and rounded to T once, from the
/// same read of lhs (Transformer Engine's wgrad GEMM): returns true. Else
/// (false) dw alone, and the caller sums db as sum_to does.
template <typename T>
bool matmulBiasGrad(Kernels *k, const T *lhs, const T *rhs, T *dw, T *db,
                    int64_t m, int64_t kdim, int64_t n, int transposeRhs) {
  if (m <= 0)
    return true; // no columns: nothing to write
  if (k->biasGradEpilogue &&
      gemmEpilogue(k, CUBLASLT_EPILOGUE_BGRADB, true, transposeRhs != 0, m, n,
                   kdim, lhs, rhs, dw, static_cast<const void *>(db), nullptr))
    return true;
  matmul(k, lhs, rhs, dw, 1, m, kdim, n, 1, transposeRhs);
  return false;
}

} // namespace

extern "C" {

void shardc_rt_cuda_linear_f32(shardc_rt_cuda_kernels *k, const float *x,
                               const float *w, const float *b, float *y,
                               int64_t m, int64_t kdim, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "linear_f32");
  linear(k, x, w, b, y, m, kdim, n);
}

void shardc_rt_cuda_matmul_f32(shardc_rt_cuda_kernels *k, const float *lhs,
                               const float *rhs, float *out, int64_t batch,
                               int64_t m, int64_t kdim, int64_t n,
                               int transposeLhs, int transposeRhs) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "matmul_f32");
  matmul(k, lhs, rhs, out, batch, m, kdim, n, transposeLhs, transposeRhs);
}

void shardc_rt_cuda_linear_gelu_f32(shardc_rt_cuda_kernels *k, const float *x,
                                    const float *w, const float *b, float *pre,
                                    float *y, int64_t m, int64_t kdim,
                                    int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "linear_gelu_f32");
  linearGelu(k, x, w, b, pre, y, m, kdim, n);
}

void shardc_rt_cuda_matmul_gelu_grad_f32(shardc_rt_cuda_kernels *k,
                                         const float *lhs, const float *rhs,
                                         const float *pre, float *dx, int64_t m,
                                         int64_t kdim, int64_t n,
                                         int transposeLhs, int transposeRhs) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "matmul_gelu_grad_f32");
  matmulGeluGrad(k, lhs, rhs, pre, dx, m, kdim, n, transposeLhs, transposeRhs);
}

void shardc_rt_cuda_matmul_bias_grad_f32(shardc_rt_cuda_kernels *k,
                                         const float *lhs, const float *rhs,
                                         float *dw, float *db, int64_t m,
                                         int64_t kdim, int64_t n,
                                         int transposeLhs, int transposeRhs) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "matmul_bias_grad_f32");
  (void)transposeLhs; // always set (train.matmul_bias_grad's verifier)
  if (!matmulBiasGrad(k, lhs, rhs, dw, db, m, kdim, n, transposeRhs))
    shardc_rt_cuda_sum_to_f32(k, lhs, db, kdim, m);
}

void shardc_rt_cuda_linear_bf16(shardc_rt_cuda_kernels *k,
                                const shardc_rt_bf16 *x,
                                const shardc_rt_bf16 *w,
                                const shardc_rt_bf16 *b, shardc_rt_bf16 *y,
                                int64_t m, int64_t kdim, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "linear_bf16");
  linear(k, bf(x), bf(w), b ? bf(b) : nullptr, bf(y), m, kdim, n);
}

void shardc_rt_cuda_matmul_bf16(shardc_rt_cuda_kernels *k,
                                const shardc_rt_bf16 *lhs,
                                const shardc_rt_bf16 *rhs, shardc_rt_bf16 *out,
                                int64_t batch, int64_t m, int64_t kdim,
                                int64_t n, int transposeLhs, int transposeRhs) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "matmul_bf16");
  matmul(k, bf(lhs), bf(rhs), bf(out), batch, m, kdim, n, transposeLhs,
         transposeRhs);
}

void shardc_rt_cuda_linear_gelu_bf16(shardc_rt_cuda_kernels *k,
                                     const shardc_rt_bf16 *x,
                                     const shardc_rt_bf16 *w,
                                     const shardc_rt_bf16 *b,
                                     shardc_rt_bf16 *pre, shardc_rt_bf16 *y,
                                     int64_t m, int64_t kdim, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "linear_gelu_bf16");
  linearGelu(k, bf(x), bf(w), b ? bf(b) : nullptr, bf(pre), bf(y), m, kdim, n);
}

void shardc_rt_cuda_matmul_gelu_grad_bf16(
    shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *lhs,
    const shardc_rt_bf16 *rhs, const shardc_rt_bf16 *pre, shardc_rt_bf16 *dx,
    int64_t m, int64_t kdim, int64_t n, int transposeLhs, int transposeRhs) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "matmul_gelu_grad_bf16");
  matmulGeluGrad(k, bf(lhs), bf(rhs), bf(pre), bf(dx), m, kdim, n, transposeLhs,
                 transposeRhs);
}

void shardc_rt_cuda_matmul_bias_grad_bf16(
    shardc_rt_cuda_kernels *k, const shardc_rt_bf16 *lhs,
    const shardc_rt_bf16 *rhs, shardc_rt_bf16 *dw, shardc_rt_bf16 *db,
    int64_t m, int64_t kdim, int64_t n, int transposeLhs, int transposeRhs) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "matmul_bias_grad_bf16");
  (void)transposeLhs;
  if (!matmulBiasGrad(k, bf(lhs), bf(rhs), bf(dw), bf(db), m, kdim, n,
                      transposeRhs))
    shardc_rt_cuda_sum_to_bf16(k, lhs, db, kdim, m);
}

} // extern "C"
