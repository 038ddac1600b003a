//===- Blas.cpp - cuBLAS and cuBLASLt on the CPU, for cudasim -------------===//
//
// The cuBLAS and cuBLASLt functions runtime/cuda calls, computed on the CPU:
// column-major GEMMs (op(A), op(B) transposed or not, leading dimensions,
// strided batches) of f32, or of bf16 operands with an f32 or bf16 result,
// through OpenBLAS's sgemm on f32 copies of the operands; f32 products on
// TF32 tensor cores (the handle's CUBLAS_TF32_TENSOR_OP_MATH, or
// CUBLAS_COMPUTE_32F_FAST_TF32) see operands rounded to TF32 first. The
// result is alpha op(A) op(B) + beta C in f32, rounded once to C's (D's)
// type; C is not read where beta is 0 (device memory may hold NaN). The
// cuBLASLt epilogues runtime/cuda uses (BIAS, GELU, GELU_AUX, their _BIAS
// forms, DGELU; GELU as the tanh approximation) act on that f32 value;
// BGRADB writes op(B)'s columns summed over k in f32, rounded to D's type.
// Handles and descriptors are heap structs; streams and workspaces are
// accepted and unused (everything runs synchronously); alpha and beta are
// host pointers.
//
// Where the real libraries refuse, so does this: invalid arguments (negative
// sizes, leading dimensions below the rows, a misaligned cuBLAS workspace)
// are CUBLAS_STATUS_INVALID_VALUE; type and compute type combinations
// outside the documented tables, and cuBLASLt configurations no algorithm
// takes (an aux leading dimension not a multiple of 8, a bias or aux type
// other than D's, alignment preferences below an element) are
// CUBLAS_STATUS_NOT_SUPPORTED from the heuristic, which otherwise returns
// one algorithm holding the alignments it was promised (the preferences for
// A, B, C, D; the descriptor's bias and aux pointers). cublasLtMatmul
// refuses (NOT_SUPPORTED) an A, B, C or D less aligned than that, and
// reports and exits on a bias or aux pointer less aligned, where a GPU
// faults. Every matrix a call reads or writes is first checked to lie in a
// live device allocation (cudasim::checkDeviceRange).
//
//===----------------------------------------------------------------------===//

#include "Runtime.h"
#include "Simulator.h"

#include <cblas.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

struct cublasContext {
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

struct cublasLtContext {};

namespace {

//===----------------------------------------------------------------------===//
// Matrices and arithmetic
//===----------------------------------------------------------------------===//

/// A column-major rows x cols matrix in device memory, f32 or bf16.
struct Matrix {
  const void *data;
  cudaDataType_t type;
  int64_t rows, cols, ld;
};

size_t elementSize(cudaDataType_t type) { return type == CUDA_R_32F ? 4 : 2; }

/// Checks with the simulator that the bytes `x` spans lie in one live
/// device allocation; `call` and `name` say whose they are.
void checkRange(const Matrix &x, const char *call, const char *name) {
  if (x.rows <= 0 || x.cols <= 0)
    return;
  size_t bytes =
      static_cast<size_t>((x.cols - 1) * x.ld + x.rows) * elementSize(x.type);
  cudasim::checkDeviceRange(x.data, bytes,
                            (std::string(call) + ": " + name).c_str());
}

float load(const void *data, cudaDataType_t type, int64_t i) {
  if (type == CUDA_R_32F)
    return static_cast<const float *>(data)[i];
  return __bfloat162float(static_cast<const __nv_bfloat16 *>(data)[i]);
}

/// Stores `value` rounded to `type` (bf16: to nearest even).
void store(void *data, cudaDataType_t type, int64_t i, float value) {
  if (type == CUDA_R_32F)
    static_cast<float *>(data)[i] = value;
  else
    static_cast<__nv_bfloat16 *>(data)[i] = __float2bfloat16_rn(value);
}

/// `value` as a TF32 tensor core takes it: 10 mantissa bits, rounded to
/// nearest with ties away from zero (cvt.rna.tf32.f32).
float toTf32(float value) {
  if (!std::isfinite(value))
    return value;
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  bits = (bits + 0x1000u) & 0xffffe000u;
  std::memcpy(&value, &bits, 4);
  return value;
}

/// `x` as packed column-major f32 (leading dimension x.rows), each element
/// rounded to TF32 where `tf32`.
std::vector<float> unpack(const Matrix &x, bool tf32) {
  std::vector<float> out(static_cast<size_t>(x.rows) * x.cols);
  for (int64_t j = 0; j < x.cols; ++j)
    for (int64_t i = 0; i < x.rows; ++i) {
      float value = load(x.data, x.type, i + j * x.ld);
      out[i + j * x.rows] = tf32 ? toTf32(value) : value;
    }
  return out;
}

constexpr float kGeluScale = 0.7978845608028654f; // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

/// GELU's tanh approximation, and its derivative.
float gelu(float x) {
  return 0.5f * x *
         (1.0f + std::tanh(kGeluScale * (x + kGeluCubic * x * x * x)));
}

float geluGrad(float x) {
  float t = std::tanh(kGeluScale * (x + kGeluCubic * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluScale *
                                 (1.0f + 3.0f * kGeluCubic * x * x);
}

//===----------------------------------------------------------------------===//
// The product and its epilogue
//===----------------------------------------------------------------------===//

/// What a modelled cuBLASLt epilogue does after alpha op(A) op(B) + beta C:
/// add the bias (one element per row of D, broadcast over its columns),
/// store that value as aux (the GELU input, of D's type, aux's leading
/// dimension), apply GELU, or multiply by gelu'(aux); or, besides D, write
/// the bias gradient (biasGradB: one element per column of D, op(B)'s
/// column summed over k) where the bias pointer points.
struct Epilogue {
  bool bias = false, auxOut = false, gelu = false, dgelu = false;
  bool biasGradB = false;
  const void *biasData = nullptr;
  void *aux = nullptr;
  int64_t auxLd = 0;

  bool usesAux() const { return auxOut || dgelu; }
  bool usesBias() const { return bias || biasGradB; }
};

/// The steps of `epilogue`; false where it is not modelled (ReLU, BGRADA,
/// DGELU_BGRAD): cuBLASLt's heuristic then answers "not supported".
bool epilogueSteps(uint32_t epilogue, Epilogue &steps) {
  switch (epilogue) {
  case CUBLASLT_EPILOGUE_DEFAULT:
    return true;
  case CUBLASLT_EPILOGUE_BIAS:
    steps.bias = true;
    return true;
  case CUBLASLT_EPILOGUE_GELU:
  case CUBLASLT_EPILOGUE_GELU_BIAS:
  case CUBLASLT_EPILOGUE_GELU_AUX:
  case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    steps.gelu = true;
    steps.bias = (epilogue & CUBLASLT_EPILOGUE_BIAS) != 0;
    steps.auxOut =
        (epilogue & CUBLASLT_EPILOGUE_GELU_AUX) == CUBLASLT_EPILOGUE_GELU_AUX;
    return true;
  case CUBLASLT_EPILOGUE_DGELU:
    steps.dgelu = true;
    return true;
  case CUBLASLT_EPILOGUE_BGRADB:
    steps.biasGradB = true;
    return true;
  default:
    return false;
  }
}

/// D [m, n] = epilogue(alpha op(A) op(B) + beta C), op(A) [m, k], op(B)
/// [k, n], in f32 from f32 copies of A and B (TF32 where `tf32`), rounded
/// once to D's type. A and B are not read where k or alpha is 0, C where
/// beta is 0. `output` names D in range reports (cuBLAS writes C).
void multiply(const char *call, bool transA, bool transB, const Matrix &a,
              const Matrix &b, float alpha, float beta, const Matrix &c,
              const Matrix &d, const Epilogue &epilogue, bool tf32,
              const char *output) {
  // A GEMM runs as it is called: the copies its stream holds back first.
  cudasim::flushAllHostCopies();
  int64_t m = d.rows, n = d.cols, k = transA ? a.rows : a.cols;
  bool product = m > 0 && n > 0 && k > 0 && alpha != 0.0f;
  if (product) {
    checkRange(a, call, "A");
    checkRange(b, call, "B");
  }
  if (beta != 0.0f && c.data != d.data)
    checkRange(c, call, "C");
  checkRange(d, call, output);
  if (epilogue.bias)
    checkRange({epilogue.biasData, d.type, m, 1, m}, call, "bias");
  if (epilogue.biasGradB)
    checkRange({epilogue.biasData, d.type, n, 1, n}, call, "bias gradient");
  Matrix aux{epilogue.aux, d.type, m, n, epilogue.auxLd};
  if (epilogue.usesAux())
    checkRange(aux, call, "aux");

  std::vector<float> p, fa, fb;
  if (product) {
    p.resize(static_cast<size_t>(m) * n);
    fa = unpack(a, tf32);
    fb = unpack(b, tf32);
    cblas_sgemm(CblasColMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, static_cast<int>(m),
                static_cast<int>(n), static_cast<int>(k), 1.0f, fa.data(),
                static_cast<int>(std::max<int64_t>(a.rows, 1)), fb.data(),
                static_cast<int>(std::max<int64_t>(b.rows, 1)), 0.0f, p.data(),
                static_cast<int>(m));
  }
  void *out = const_cast<void *>(d.data);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      float value = product ? alpha * p[i + j * m] : 0.0f;
      if (beta != 0.0f)
        value += beta * load(c.data, c.type, i + j * c.ld);
      if (epilogue.bias)
        value += load(epilogue.biasData, d.type, i);
      if (epilogue.auxOut)
        store(epilogue.aux, d.type, i + j * aux.ld, value);
      if (epilogue.gelu)
        value = gelu(value);
      if (epilogue.dgelu)
        value *= geluGrad(load(aux.data, d.type, i + j * aux.ld));
      store(out, d.type, i + j * d.ld, value);
    }
  // op(B)[kk, j] of the unpacked (dense, leading dimension b.rows) B.
  for (int64_t j = 0; epilogue.biasGradB && j < n; ++j) {
    float sum = 0.0f;
    for (int64_t kk = 0; product && kk < k; ++kk)
      sum += fb[transB ? j + kk * b.rows : kk + j * b.rows];
    store(const_cast<void *>(epilogue.biasData), d.type, j, sum);
  }
}

//===----------------------------------------------------------------------===//
// cuBLAS
//===----------------------------------------------------------------------===//

bool isOperation(int op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

/// cublas<t>gemm(StridedBatched)(Ex): checks the arguments as cuBLAS does,
/// then computes `batch` GEMMs (C = alpha op(A) op(B) + beta C) strides
/// apart (in elements). Supported: f32 (compute 32F, TF32 where the handle's
/// math mode allows it, or 32F_FAST_TF32) and bf16 A and B with a bf16 or
/// f32 C (compute 32F).
cublasStatus_t gemm(const char *call, cublasHandle_t handle,
                    cublasOperation_t transa, cublasOperation_t transb, int m,
                    int n, int k, const void *alpha, const void *A,
                    cudaDataType_t typeA, int lda, long long strideA,
                    const void *B, cudaDataType_t typeB, int ldb,
                    long long strideB, const void *beta, void *C,
                    cudaDataType_t typeC, int ldc, long long strideC, int batch,
                    cublasComputeType_t compute) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  bool transA = transa != CUBLAS_OP_N, transB = transb != CUBLAS_OP_N;
  if (!isOperation(transa) || !isOperation(transb) || m < 0 || n < 0 || k < 0 ||
      batch < 0 || lda < std::max(1, transA ? k : m) ||
      ldb < std::max(1, transB ? n : k) || ldc < std::max(1, m) || !alpha ||
      !beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  bool f32 = typeA == CUDA_R_32F && typeC == CUDA_R_32F;
  bool bf16 =
      typeA == CUDA_R_16BF && (typeC == CUDA_R_16BF || typeC == CUDA_R_32F);
  bool fullCompute =
      compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_PEDANTIC;
  if (typeA != typeB || !(f32 || bf16) ||
      !(fullCompute || (f32 && compute == CUBLAS_COMPUTE_32F_FAST_TF32)))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  bool tf32 = f32 && (compute == CUBLAS_COMPUTE_32F_FAST_TF32 ||
                      (compute == CUBLAS_COMPUTE_32F &&
                       (handle->math & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH));
  float a = *static_cast<const float *>(alpha);
  float b = *static_cast<const float *>(beta);
  int64_t sizeA = elementSize(typeA), sizeC = elementSize(typeC);
  for (int i = 0; i < batch; ++i) {
    Matrix ma{static_cast<const char *>(A) + i * strideA * sizeA, typeA,
              transA ? k : m, transA ? m : k, lda};
    Matrix mb{static_cast<const char *>(B) + i * strideB * sizeA, typeB,
              transB ? n : k, transB ? k : n, ldb};
    Matrix mc{static_cast<char *>(C) + i * strideC * sizeC, typeC, m, n, ldc};
    multiply(call, transA, transB, ma, mb, a, b, mc, mc, Epilogue(), tf32, "C");
  }
  return CUBLAS_STATUS_SUCCESS;
}

//===----------------------------------------------------------------------===//
// cuBLASLt
//===----------------------------------------------------------------------===//

/// A matmul descriptor's attributes (cublasLtMatmulDescAttributes_t); -1
/// types default to D's.
struct LtDesc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  int32_t pointerMode = CUBLASLT_POINTER_MODE_HOST;
  int32_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N, transC = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  int32_t biasType = -1;
  void *aux = nullptr;
  int64_t auxLd = 0;
  int32_t auxType = -1;
};

/// A matrix layout (column order, one matrix: the attributes are not
/// settable here).
struct LtLayout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};

/// A heuristic's preferences: the alignments promised for A, B, C, D
/// (default 256 bytes).
struct LtPreference {
  uint32_t alignment[4] = {256, 256, 256, 256};
};

/// The one algorithm the heuristic returns, in cublasLtMatmulAlgo_t: the
/// alignments of A, B, C, D, bias and aux it relies on.
struct LtAlgo {
  uint64_t magic;
  uint64_t alignment[6];
};
constexpr uint64_t kAlgoMagic = 0x63756461'73696d4cull;
static_assert(sizeof(LtAlgo) <= sizeof(cublasLtMatmulAlgo_t),
              "LtAlgo does not fit cublasLtMatmulAlgo_t");

LtDesc &state(cublasLtMatmulDesc_t desc) {
  return *reinterpret_cast<LtDesc *>(desc);
}
LtLayout &state(cublasLtMatrixLayout_t layout) {
  return *reinterpret_cast<LtLayout *>(layout);
}
LtPreference &state(cublasLtMatmulPreference_t preference) {
  return *reinterpret_cast<LtPreference *>(preference);
}

/// A SetAttribute's copy of `buf` into `field`: INVALID_VALUE where buf is
/// null or its size is not the attribute's.
template <typename T>
cublasStatus_t setField(T &field, const void *buf, size_t size) {
  if (!buf || size != sizeof(T))
    return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t unmodelled(const char *call, int attribute) {
  std::fprintf(stderr, "cudasim: %s: attribute %d is not modelled\n", call,
               attribute);
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

/// The alignment of a pointer, up to 256 bytes (null: 256).
uint64_t alignmentOf(const void *pointer) {
  uint64_t address = reinterpret_cast<uintptr_t>(pointer);
  return address == 0 ? 256 : std::min<uint64_t>(address & -address, 256);
}

/// Whether cuBLASLt takes `desc` over these layouts: SUCCESS, with the
/// epilogue's steps; INVALID_VALUE where they conflict (D is op(A) op(B)'s
/// m x n, C is D's shape, leading dimensions hold the rows); NOT_SUPPORTED
/// where no algorithm takes them. The types are those of cublasLtMatmul's table
/// (scale 32F; 32F or 32F_FAST_TF32 on f32; 32F on bf16 A and B, with a bf16 or
/// f32 C = D type); bias and aux have D's type, aux's leading dimension is at
/// least m and a multiple of 8.
cublasStatus_t checkLt(const LtDesc &desc, const LtLayout &a, const LtLayout &b,
                       const LtLayout &c, const LtLayout &d, Epilogue &steps) {
  bool f32 = a.type == CUDA_R_32F && d.type == CUDA_R_32F &&
             (desc.compute == CUBLAS_COMPUTE_32F ||
              desc.compute == CUBLAS_COMPUTE_32F_FAST_TF32);
  bool bf16 = a.type == CUDA_R_16BF &&
              (d.type == CUDA_R_16BF || d.type == CUDA_R_32F) &&
              desc.compute == CUBLAS_COMPUTE_32F;
  if (a.type != b.type || c.type != d.type || !(f32 || bf16) ||
      desc.scale != CUDA_R_32F ||
      desc.pointerMode != CUBLASLT_POINTER_MODE_HOST ||
      desc.transC != CUBLAS_OP_N || !epilogueSteps(desc.epilogue, steps))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!isOperation(desc.transA) || !isOperation(desc.transB))
    return CUBLAS_STATUS_INVALID_VALUE;
  for (const LtLayout *layout : {&a, &b, &c, &d}) {
    if (layout->rows > INT_MAX || layout->cols > INT_MAX)
      return CUBLAS_STATUS_NOT_SUPPORTED;
    if (layout->ld < std::max<int64_t>(layout->rows, 1))
      return CUBLAS_STATUS_INVALID_VALUE;
  }
  bool transA = desc.transA != CUBLAS_OP_N, transB = desc.transB != CUBLAS_OP_N;
  uint64_t m = transA ? a.cols : a.rows, k = transA ? a.rows : a.cols;
  if ((transB ? b.cols : b.rows) != k || d.rows != m ||
      d.cols != (transB ? b.rows : b.cols) || c.rows != d.rows ||
      c.cols != d.cols)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (steps.usesBias() && desc.biasType != -1 && desc.biasType != d.type)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (steps.usesAux()) {
    if (desc.auxLd < static_cast<int64_t>(m))
      return CUBLAS_STATUS_INVALID_VALUE;
    if (desc.auxLd % 8 != 0 || (desc.auxType != -1 && desc.auxType != d.type))
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  steps.biasData = desc.bias;
  steps.aux = desc.aux;
  steps.auxLd = desc.auxLd;
  return CUBLAS_STATUS_SUCCESS;
}

/// The matrix at `data` laid out as `layout` (checked by checkLt).
Matrix matrix(const void *data, const LtLayout &layout) {
  return {data, layout.type, static_cast<int64_t>(layout.rows),
          static_cast<int64_t>(layout.cols), layout.ld};
}

bool sameLayout(const LtLayout &x, const LtLayout &y) {
  return x.type == y.type && x.rows == y.rows && x.cols == y.cols &&
         x.ld == y.ld;
}

/// GEMMs run as they are called: on a stream whose work is queued
/// (CUDASIM_STREAMS=lazy) they would run out of its order.
void checkEager(cudaStream_t stream, const char *call) {
  if (!cudasim::isEager(stream))
    cudasim::misuse(std::string(call) +
                    " on a stream other than the first created, with "
                    "CUDASIM_STREAMS=lazy: not simulated");
}

/// cublasCreate and cublasLtCreate: a heap object behind the handle.
template <typename Context> cublasStatus_t createHandle(Context **handle) {
  if (!handle)
    return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new Context();
  return CUBLAS_STATUS_SUCCESS;
}

template <typename Context> cublasStatus_t destroyHandle(Context *handle) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

} // namespace

extern "C" {

//===----------------------------------------------------------------------===//
// cuBLAS API
//===----------------------------------------------------------------------===//

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
  return createHandle(handle);
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  return destroyHandle(handle);
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  checkEager(stream, "cublasSetStream");
  return handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

/// The workspace must be 256-byte aligned, as cuBLAS requires.
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace,
                                     size_t workspaceSizeInBytes) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (workspaceSizeInBytes > 0)
    cudasim::checkDeviceRange(workspace, workspaceSizeInBytes,
                              "cublasSetWorkspace: workspace");
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "the operation completed successfully";
  case CUBLAS_STATUS_NOT_INITIALIZED:
    return "the library was not initialized";
  case CUBLAS_STATUS_ALLOC_FAILED:
    return "the resource allocation failed";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "an invalid numeric value was used as an argument";
  case CUBLAS_STATUS_ARCH_MISMATCH:
    return "an absent device architectural feature is required";
  case CUBLAS_STATUS_MAPPING_ERROR:
    return "an access to GPU memory space failed";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "the GPU program failed to execute";
  case CUBLAS_STATUS_INTERNAL_ERROR:
    return "an internal operation failed";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "the functionality requested is not supported";
  case CUBLAS_STATUS_LICENSE_ERROR:
    return "error detected trying to check the license";
  }
  return "unknown error";
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k,
                              const float *alpha, const float *A, int lda,
                              const float *B, int ldb, const float *beta,
                              float *C, int ldc) {
  return gemm("cublasSgemm", handle, transa, transb, m, n, k, alpha, A,
              CUDA_R_32F, lda, 0, B, CUDA_R_32F, ldb, 0, beta, C, CUDA_R_32F,
              ldc, 0, 1, CUBLAS_COMPUTE_32F);
}

cublasStatus_t
cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                          cublasOperation_t transb, int m, int n, int k,
                          const float *alpha, const float *A, int lda,
                          long long int strideA, const float *B, int ldb,
                          long long int strideB, const float *beta, float *C,
                          int ldc, long long int strideC, int batchCount) {
  return gemm("cublasSgemmStridedBatched", handle, transa, transb, m, n, k,
              alpha, A, CUDA_R_32F, lda, strideA, B, CUDA_R_32F, ldb, strideB,
              beta, C, CUDA_R_32F, ldc, strideC, batchCount,
              CUBLAS_COMPUTE_32F);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k,
                            const void *alpha, const void *A,
                            cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta,
                            void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t) {
  return gemm("cublasGemmEx", handle, transa, transb, m, n, k, alpha, A, Atype,
              lda, 0, B, Btype, ldb, 0, beta, C, Ctype, ldc, 0, 1, computeType);
}

cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
    int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype,
    int lda, long long int strideA, const void *B, cudaDataType Btype, int ldb,
    long long int strideB, const void *beta, void *C, cudaDataType Ctype,
    int ldc, long long int strideC, int batchCount,
    cublasComputeType_t computeType, cublasGemmAlgo_t) {
  return gemm("cublasGemmStridedBatchedEx", handle, transa, transb, m, n, k,
              alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C,
              Ctype, ldc, strideC, batchCount, computeType);
}

//===----------------------------------------------------------------------===//
// cuBLASLt API
//===----------------------------------------------------------------------===//

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle) {
  return createHandle(lightHandle);
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  return destroyHandle(lightHandle);
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  if (!matmulDesc)
    return CUBLAS_STATUS_INVALID_VALUE;
  LtDesc *desc = new LtDesc();
  desc->compute = computeType;
  desc->scale = scaleType;
  *matmulDesc = reinterpret_cast<cublasLtMatmulDesc_t>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  delete reinterpret_cast<LtDesc *>(matmulDesc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                               cublasLtMatmulDescAttributes_t attr,
                               const void *buf, size_t sizeInBytes) {
  if (!matmulDesc)
    return CUBLAS_STATUS_INVALID_VALUE;
  LtDesc &desc = state(matmulDesc);
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
    return setField(desc.compute, buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
    return setField(desc.scale, buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_POINTER_MODE:
    return setField(desc.pointerMode, buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_TRANSA:
    return setField(desc.transA, buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_TRANSB:
    return setField(desc.transB, buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_TRANSC:
    return setField(desc.transC, buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    return setField(desc.epilogue, buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return setField(desc.bias, buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    return setField(desc.biasType, buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    return setField(desc.aux, buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    return setField(desc.auxLd, buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
    return setField(desc.auxType, buf, sizeInBytes);
  default:
    return unmodelled("cublasLtMatmulDescSetAttribute", attr);
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout,
                                          cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (!matLayout)
    return CUBLAS_STATUS_INVALID_VALUE;
  *matLayout = reinterpret_cast<cublasLtMatrixLayout_t>(
      new LtLayout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  delete reinterpret_cast<LtLayout *>(matLayout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  if (!pref)
    return CUBLAS_STATUS_INVALID_VALUE;
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new LtPreference());
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete reinterpret_cast<LtPreference *>(pref);
  return CUBLAS_STATUS_SUCCESS;
}

/// The workspace bound and the reduction scheme mask are checked and have no
/// effect: the one algorithm needs no workspace and never splits k.
cublasStatus_t
cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                     cublasLtMatmulPreferenceAttributes_t attr,
                                     const void *buf, size_t sizeInBytes) {
  if (!pref)
    return CUBLAS_STATUS_INVALID_VALUE;
  LtPreference &preference = state(pref);
  uint64_t workspace;
  uint32_t mask;
  switch (attr) {
  case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
    return setField(workspace, buf, sizeInBytes);
  case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
    return setField(mask, buf, sizeInBytes);
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
    return setField(
        preference.alignment[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES],
        buf, sizeInBytes);
  default:
    return unmodelled("cublasLtMatmulPreferenceSetAttribute", attr);
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
    cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
    cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
    int *returnAlgoCount) {
  if (!lightHandle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!operationDesc || !Adesc || !Bdesc || !Cdesc || !Ddesc || !preference ||
      !heuristicResultsArray || !returnAlgoCount || requestedAlgoCount <= 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  *returnAlgoCount = 0;
  const LtDesc &desc = state(operationDesc);
  const LtPreference &pref = state(preference);
  Epilogue steps;
  cublasStatus_t status = checkLt(desc, state(Adesc), state(Bdesc),
                                  state(Cdesc), state(Ddesc), steps);
  if (status != CUBLAS_STATUS_SUCCESS)
    return status;
  // An algorithm reads whole elements: none works below their alignment.
  LtAlgo algo{kAlgoMagic,
              {pref.alignment[0], pref.alignment[1], pref.alignment[2],
               pref.alignment[3], alignmentOf(desc.bias),
               alignmentOf(desc.aux)}};
  size_t sizes[6] = {
      elementSize(state(Adesc).type), elementSize(state(Bdesc).type),
      elementSize(state(Cdesc).type), elementSize(state(Ddesc).type),
      elementSize(state(Ddesc).type), elementSize(state(Ddesc).type)};
  for (int i = 0; i < 6; ++i)
    if (algo.alignment[i] < sizes[i])
      return CUBLAS_STATUS_NOT_SUPPORTED;
  cublasLtMatmulHeuristicResult_t &result = heuristicResultsArray[0];
  result = cublasLtMatmulHeuristicResult_t();
  std::memcpy(&result.algo, &algo, sizeof(algo));
  result.workspaceSize = 0;
  result.state = CUBLAS_STATUS_SUCCESS;
  result.wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

/// algo null takes the default preferences (256-byte A, B, C, D).
cublasStatus_t
cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
               const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
               const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
               const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
               cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
               void *workspace, size_t workspaceSizeInBytes,
               cudaStream_t stream) {
  checkEager(stream, "cublasLtMatmul");
  if (!lightHandle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!computeDesc || !Adesc || !Bdesc || !Cdesc || !Ddesc || !alpha || !beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  const LtDesc &desc = state(computeDesc);
  const LtLayout &a = state(Adesc), &b = state(Bdesc), &c = state(Cdesc),
                 &d = state(Ddesc);
  Epilogue steps;
  cublasStatus_t status = checkLt(desc, a, b, c, d, steps);
  if (status != CUBLAS_STATUS_SUCCESS)
    return status;
  LtAlgo chosen{
      kAlgoMagic,
      {256, 256, 256, 256, alignmentOf(desc.bias), alignmentOf(desc.aux)}};
  if (algo)
    std::memcpy(&chosen, algo, sizeof(chosen));
  float alphaValue = *static_cast<const float *>(alpha);
  float betaValue = *static_cast<const float *>(beta);
  // In place (C == D) takes one layout for both.
  if (chosen.magic != kAlgoMagic || (C == D && !sameLayout(c, d)) ||
      (steps.usesBias() && !desc.bias) || (steps.usesAux() && !desc.aux))
    return CUBLAS_STATUS_INVALID_VALUE;
  // Less aligned than the algorithm's: A, B, C or D are refused, a bias or
  // aux faults on a GPU.
  const char *names[6] = {"A", "B", "C", "D", "bias", "aux"};
  const void *bias = steps.usesBias() ? desc.bias : nullptr;
  const void *aux = steps.usesAux() ? desc.aux : nullptr;
  const void *pointers[6] = {A, B, C, D, bias, aux};
  for (int i = 0; i < 6; ++i) {
    if (reinterpret_cast<uintptr_t>(pointers[i]) % chosen.alignment[i] == 0)
      continue;
    if (i < 4)
      return CUBLAS_STATUS_NOT_SUPPORTED;
    std::fprintf(stderr,
                 "cudasim: cublasLtMatmul: the %s pointer %p is less aligned "
                 "than the %llu bytes the heuristic saw: on a GPU the kernel "
                 "faults (misaligned address)\n",
                 names[i], pointers[i],
                 static_cast<unsigned long long>(chosen.alignment[i]));
    std::exit(1);
  }
  if (workspaceSizeInBytes > 0)
    cudasim::checkDeviceRange(workspace, workspaceSizeInBytes,
                              "cublasLtMatmul: workspace");
  multiply("cublasLtMatmul", desc.transA != CUBLAS_OP_N,
           desc.transB != CUBLAS_OP_N, matrix(A, a), matrix(B, b), alphaValue,
           betaValue, matrix(C, c), matrix(D, d), steps,
           desc.compute == CUBLAS_COMPUTE_32F_FAST_TF32, "D");
  return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
