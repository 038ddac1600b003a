//===- EpilogueGemms.cpp - cuBLASLt GEMMs with fused epilogues ------------===//
//
// EpilogueGemms.h says what runs here and when it declines.
//
//===----------------------------------------------------------------------===//

#include "EpilogueGemms.h"

#include "Check.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace shardc::rt::cuda {

namespace {

/// Every pointer of a fused GEMM must be aligned to this (checked per call;
/// the heuristic is told so): cudaMalloc'd tensors are, views at odd offsets
/// may not be.
constexpr uintptr_t kLtAlignment = 16;

/// Whether the epilogue takes the descriptor's bias pointer: the bias [n]
/// it adds (BIAS, GELU_AUX_BIAS), or the bias gradient [m] it writes
/// (BGRADB: op(a)'s rows summed over kd, matmul_bias_grad's).
bool epilogueHasBias(cublasLtEpilogue_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_BIAS ||
         epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
         epilogue == CUBLASLT_EPILOGUE_BGRADB;
}

/// The preactivation pre[m, n]: linear_gelu's output, matmul_gelu_grad's
/// input; laid out as D, leading dimension n.
bool epilogueHasAux(cublasLtEpilogue_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_GELU_AUX ||
         epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
         epilogue == CUBLASLT_EPILOGUE_DGELU;
}

const char *epilogueName(cublasLtEpilogue_t epilogue) {
  switch (epilogue) {
  case CUBLASLT_EPILOGUE_BIAS:
    return "linear (BIAS)";
  case CUBLASLT_EPILOGUE_GELU_AUX:
    return "linear_gelu (GELU_AUX)";
  case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    return "linear_gelu (GELU_AUX_BIAS)";
  case CUBLASLT_EPILOGUE_DGELU:
    return "matmul_gelu_grad (DGELU)";
  case CUBLASLT_EPILOGUE_BGRADB:
    return "matmul_bias_grad (BGRADB)";
  default:
    return "gemm";
  }
}

/// "linear_gelu (GELU_AUX_BIAS) bf16 m=4096 n=3072 k=768 a b^T": a plan's
/// shape in messages.
std::string describe(const LtKey &key) {
  char text[160];
  std::snprintf(text, sizeof(text), "%s %s m=%lld n=%lld k=%lld a%s b%s%s",
                epilogueName(key.epilogue),
                key.type == CUDA_R_32F ? "f32" : "bf16",
                static_cast<long long>(key.m), static_cast<long long>(key.n),
                static_cast<long long>(key.kd), key.transA ? "^T" : "",
                key.transB ? "^T" : "",
                key.type == CUDA_R_32F ? (key.tf32 ? " tf32" : " fp32") : "");
  return text;
}

/// SHARDC_CUBLAS_CHECK for the cuBLASLt calls of a plan: also names the
/// plan's shape.
void failLt(cublasStatus_t status, const char *call, const LtKey &key,
            const char *file, int line) {
  std::fprintf(stderr, "shardc: cuBLAS error: %s for %s: %s (%s:%d)\n", call,
               describe(key).c_str(), cublasGetStatusString(status), file,
               line);
  std::abort();
}

#define SHARDC_CUBLASLT_CHECK(call, key)                                       \
  do {                                                                         \
    cublasStatus_t shardcLtStatus_ = (call);                                   \
    if (shardcLtStatus_ != CUBLAS_STATUS_SUCCESS)                              \
      failLt(shardcLtStatus_, #call, (key), __FILE__, __LINE__);               \
  } while (0)

/// Sets an attribute of a plan's descriptor or of a heuristic preference,
/// failing as SHARDC_CUBLASLT_CHECK with the attribute's name.
template <typename V>
void setAttribute(const LtKey &key, cublasLtMatmulDesc_t desc,
                  cublasLtMatmulDescAttributes_t attribute, const V &value,
                  const char *name, int line) {
  cublasStatus_t status =
      cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(V));
  if (status != CUBLAS_STATUS_SUCCESS)
    failLt(
        status,
        (std::string("cublasLtMatmulDescSetAttribute(") + name + ")").c_str(),
        key, __FILE__, line);
}

template <typename V>
void setAttribute(const LtKey &key, cublasLtMatmulPreference_t preference,
                  cublasLtMatmulPreferenceAttributes_t attribute,
                  const V &value, const char *name, int line) {
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      preference, attribute, &value, sizeof(V));
  if (status != CUBLAS_STATUS_SUCCESS)
    failLt(status,
           (std::string("cublasLtMatmulPreferenceSetAttribute(") + name + ")")
               .c_str(),
           key, __FILE__, line);
}

#define SHARDC_CUBLASLT_SET(key, object, attribute, value)                     \
  setAttribute((key), (object), attribute, (value), #attribute, __LINE__)

void logPlan(const LtKey &key, const LtPlan &plan, const char *event) {
  std::fprintf(stderr, "shardc: gemm epilogue plan: %s: %s%s\n",
               describe(key).c_str(), event,
               plan.unsupported.empty() ? "" : plan.unsupported.c_str());
}

bool isAligned(const void *pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % kLtAlignment == 0;
}

} // namespace

EpilogueGemms::EpilogueGemms(cudaStream_t stream, void *workspace, bool log)
    : stream(stream), workspace(workspace), log(log) {
  SHARDC_CUBLAS_CHECK(cublasLtCreate(&handle));
}

EpilogueGemms::~EpilogueGemms() {
  for (auto &[key, plan] : plans) {
    for (cublasLtMatrixLayout_t layout : {plan.a, plan.b, plan.d})
      if (layout)
        SHARDC_CUBLASLT_CHECK(cublasLtMatrixLayoutDestroy(layout), key);
    if (plan.desc)
      SHARDC_CUBLASLT_CHECK(cublasLtMatmulDescDestroy(plan.desc), key);
  }
  SHARDC_CUBLAS_CHECK(cublasLtDestroy(handle));
}

/// Fills a new plan: the descriptor, the column-major layouts, and the
/// heuristic's best algorithm, or why there is none.
void EpilogueGemms::makePlan(const LtKey &key, LtPlan &plan) {
  bool bias = epilogueHasBias(key.epilogue), aux = epilogueHasAux(key.epilogue);
  if (aux && key.n % 8 != 0) {
    plan.unsupported = "n is not a multiple of 8 (cuBLASLt requires it of "
                       "the preactivation's leading dimension)";
    return;
  }
  // f32 as `gemm` runs it: TF32 tensor cores where allowed, else full f32;
  // bf16 operands accumulate in f32. The scale type (alpha, beta) is f32.
  cublasComputeType_t compute = key.type == CUDA_R_32F && key.tf32
                                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
  SHARDC_CUBLASLT_CHECK(
      cublasLtMatmulDescCreate(&plan.desc, compute, CUDA_R_32F), key);
  // Column-major D^T[n, m] = op(b)^T op(a)^T: cuBLASLt's A is our b.
  int32_t opA = key.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  int32_t opB = key.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  SHARDC_CUBLASLT_SET(key, plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, opA);
  SHARDC_CUBLASLT_SET(key, plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, opB);
  uint32_t epilogue = key.epilogue;
  SHARDC_CUBLASLT_SET(key, plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  // The heuristic reads the bias and aux pointers for their alignment only
  // (it does not dereference them): it sees an address aligned to exactly
  // kLtAlignment, so that its algorithm runs with any pointer the calls
  // check to be. The calls set the real pointers.
  const void *probe = static_cast<char *>(workspace) + kLtAlignment;
  if (bias) {
    // The bias has D's type (the stored type); n elements, one per row of
    // the column-major D, broadcast over its m columns; BGRADB's gradient,
    // m elements, one per column of D, sums its B (our a) over kd.
    int32_t biasType = key.type;
    SHARDC_CUBLASLT_SET(key, plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                        biasType);
    SHARDC_CUBLASLT_SET(key, plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                        probe);
  }
  if (aux) {
    // The preactivation: laid out as D (leading dimension n), of D's type,
    // cuBLASLt's default for GELU's aux (the stored type).
    int64_t auxLd = key.n;
    SHARDC_CUBLASLT_SET(key, plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                        auxLd);
    SHARDC_CUBLASLT_SET(key, plan.desc,
                        CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, probe);
  }
  // Stored row-major a [m, kd] (or [kd, m]) is column-major [kd, m] (or
  // [m, kd]) with leading dimension its row stride; likewise b.
  uint64_t rowsA = key.transB ? key.kd : key.n;
  uint64_t colsA = key.transB ? key.n : key.kd;
  uint64_t rowsB = key.transA ? key.m : key.kd;
  uint64_t colsB = key.transA ? key.kd : key.m;
  SHARDC_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&plan.a, key.type, rowsA,
                                                   colsA,
                                                   static_cast<int64_t>(rowsA)),
                        key);
  SHARDC_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&plan.b, key.type, rowsB,
                                                   colsB,
                                                   static_cast<int64_t>(rowsB)),
                        key);
  SHARDC_CUBLASLT_CHECK(
      cublasLtMatrixLayoutCreate(&plan.d, key.type, key.n, key.m, key.n), key);

  cublasLtMatmulPreference_t preference = nullptr;
  SHARDC_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&preference), key);
  uint64_t maxWorkspace = kWorkspaceBytes;
  SHARDC_CUBLASLT_SET(key, preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                      maxWorkspace);
  // Split-K only with f32 partial sums reduced in a fixed order: results
  // accumulate in f32 and are rounded once (no partial sums in bf16, as
  // INPLACE and OUTPUT_TYPE would keep them), and are deterministic.
  uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  SHARDC_CUBLASLT_SET(key, preference,
                      CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, reductions);
  uint32_t alignment = kLtAlignment;
  SHARDC_CUBLASLT_SET(key, preference,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment);
  SHARDC_CUBLASLT_SET(key, preference,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment);
  SHARDC_CUBLASLT_SET(key, preference,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment);
  SHARDC_CUBLASLT_SET(key, preference,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.a, plan.b, plan.d,
                                     plan.d, preference, 1, &result, &found);
  SHARDC_CUBLASLT_CHECK(cublasLtMatmulPreferenceDestroy(preference), key);
  // No algorithm for the combination: NOT_SUPPORTED, or INVALID_VALUE
  // where this cuBLASLt does not take an attribute for these types.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED ||
      status == CUBLAS_STATUS_INVALID_VALUE) {
    plan.unsupported = std::string("cublasLtMatmulAlgoGetHeuristic: ") +
                       cublasGetStatusString(status);
    return;
  }
  if (status != CUBLAS_STATUS_SUCCESS)
    failLt(status, "cublasLtMatmulAlgoGetHeuristic", key, __FILE__, __LINE__);
  if (found < 1 || result.state != CUBLAS_STATUS_SUCCESS) {
    plan.unsupported = "cublasLtMatmulAlgoGetHeuristic found no algorithm";
    return;
  }
  if (result.workspaceSize > kWorkspaceBytes) {
    plan.unsupported = "the algorithm needs more than the workspace";
    return;
  }
  plan.algo = result.algo;
  plan.workspaceBytes = result.workspaceSize;
}

/// The plan of `key`, made on its first use (the heuristic runs once per
/// shape; a training step repeats its shapes).
LtPlan &EpilogueGemms::planFor(const LtKey &key) {
  auto [it, inserted] = plans.try_emplace(key);
  LtPlan &plan = it->second;
  if (inserted) {
    makePlan(key, plan);
    if (log) {
      char fused[64];
      std::snprintf(fused, sizeof(fused), "fused (workspace %zu bytes)",
                    plan.workspaceBytes);
      logPlan(key, plan, plan.unsupported.empty() ? fused : "unfused: ");
    }
  }
  return plan;
}

bool EpilogueGemms::run(const LtKey &key, const void *a, const void *b, void *d,
                        const void *bias, const void *aux) {
  LtPlan &plan = planFor(key);
  if (!plan.unsupported.empty())
    return false;
  bool hasBias = epilogueHasBias(key.epilogue),
       hasAux = epilogueHasAux(key.epilogue);
  if (!isAligned(a) || !isAligned(b) || !isAligned(d) ||
      (hasBias && !isAligned(bias)) || (hasAux && !isAligned(aux))) {
    if (log && !plan.misalignedLogged) {
      plan.misalignedLogged = true;
      logPlan(key, plan,
              "unfused for calls with a pointer not 16-byte aligned");
    }
    return false;
  }
  if (hasBias)
    SHARDC_CUBLASLT_SET(key, plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                        bias);
  if (hasAux)
    SHARDC_CUBLASLT_SET(key, plan.desc,
                        CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
  float alpha = 1.0f, beta = 0.0f;
  cublasStatus_t status = cublasLtMatmul(
      handle, plan.desc, &alpha, b, plan.a, a, plan.b, &beta, d, plan.d, d,
      plan.d, &plan.algo, workspace, plan.workspaceBytes, stream);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
    // The heuristic's algorithm refused at launch: nothing was enqueued;
    // this shape runs unfused from now on.
    plan.unsupported = "cublasLtMatmul: the heuristic's algorithm is not "
                       "supported at launch";
    if (log)
      logPlan(key, plan, "unfused: ");
    return false;
  }
  if (status != CUBLAS_STATUS_SUCCESS)
    failLt(status, "cublasLtMatmul", key, __FILE__, __LINE__);
  return true;
}

} // namespace shardc::rt::cuda
