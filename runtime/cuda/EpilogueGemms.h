//===- EpilogueGemms.h - cuBLASLt GEMMs with fused epilogues ----*- C++ -*-===//
//
// The GEMMs of Gemm.cu whose elementwise epilogue cuBLASLt applies to the
// f32 accumulator in the same kernel: linear's bias (BIAS), linear_gelu's
// bias, preactivation and GELU (GELU_AUX, GELU_AUX_BIAS), matmul_gelu_grad's
// GELU derivative (DGELU), and matmul_bias_grad's bias gradient (BGRADB:
// its lhs's rows summed beside the product). Row-major as Gemm.cu's
// `gemm`: a row-major d = op(a) op(b) is the column-major d^T = op(b)^T
// op(a)^T, so cuBLASLt's A is our b, and the bias has n elements, one per
// row of the column-major D.
//
// Descriptors, layouts and the heuristic's algorithm are planned once per
// shape (LtKey) and kept. Where cuBLASLt has no algorithm, where the
// preactivation's leading dimension n is not a multiple of 8, or where a
// pointer is not 16-byte aligned, `run` enqueues nothing and returns false:
// the caller runs the cuBLAS GEMM and the elementwise kernel instead.
// cuBLASLt errors other than its "not supported" answers print the call
// and the shape, and abort (Check.h's convention).
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_CUDA_EPILOGUEGEMMS_H
#define SHARDC_RT_CUDA_EPILOGUEGEMMS_H

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>

namespace shardc::rt::cuda {

/// What a cached cuBLASLt matmul computes: row-major d[m, n] =
/// epilogue(op(a) op(b)), op(a) [m, kd], op(b) [kd, n], of one stored type,
/// with TF32 or full f32 products (f32 only).
struct LtKey {
  int64_t m, n, kd;
  bool transA, transB;
  cudaDataType_t type;
  cublasLtEpilogue_t epilogue;
  bool tf32;
  bool operator<(const LtKey &o) const {
    return std::tie(m, n, kd, transA, transB, type, epilogue, tf32) <
           std::tie(o.m, o.n, o.kd, o.transA, o.transB, o.type, o.epilogue,
                    o.tf32);
  }
};

/// A cuBLASLt matmul ready to run: its descriptor, the layouts of
/// cuBLASLt's A (our b), B (our a) and C = D, and the heuristic's algorithm;
/// or, in `unsupported`, why there is none, decided once for the shape (the
/// calls then run the unfused kernels).
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspaceBytes = 0;
  std::string unsupported;
  bool misalignedLogged = false;
};

/// cuBLASLt's handle, a plan per shape, and the workspace every fused GEMM
/// on the stream shares.
class EpilogueGemms {
public:
  /// The workspace a caller hands over: 32 MiB, NVIDIA's recommendation
  /// for Hopper.
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;

  /// GEMMs on `stream`, in `workspace` (kWorkspaceBytes of device memory,
  /// the caller's to free once the GEMMs enqueued are done); with `log`
  /// (SHARDC_RT_CUDA_GEMM_EPILOGUE_LOG), each new plan is printed to
  /// stderr, fused or why not.
  EpilogueGemms(cudaStream_t stream, void *workspace, bool log);
  ~EpilogueGemms();
  EpilogueGemms(const EpilogueGemms &) = delete;
  EpilogueGemms &operator=(const EpilogueGemms &) = delete;

  /// Row-major d[m, n] = epilogue(op(a) op(b)) of `key` in one cuBLASLt
  /// matmul, a and b contiguous (row strides as `gemm`'s), `bias` (BIAS,
  /// GELU_AUX_BIAS: [n] added; BGRADB: [m] written) and `aux` (the
  /// preactivation [m, n], GELU_AUX(_BIAS), DGELU) as the epilogue takes
  /// them (else null). Returns false, having enqueued nothing, where
  /// cuBLASLt cannot run it (see LtPlan; a pointer not 16-byte aligned).
  bool run(const LtKey &key, const void *a, const void *b, void *d,
           const void *bias, const void *aux);

  /// Prints each new plan from now on (or stops printing them).
  void setLog(bool on) { log = on; }

private:
  LtPlan &planFor(const LtKey &key);
  void makePlan(const LtKey &key, LtPlan &plan);

  cudaStream_t stream;
  void *workspace;
  bool log;
  cublasLtHandle_t handle = nullptr;
  std::map<LtKey, LtPlan> plans;
};

} // namespace shardc::rt::cuda

#endif // SHARDC_RT_CUDA_EPILOGUEGEMMS_H
