//===- Check.h - CUDA and cuBLAS status checks of the kernels ---*- C++ -*-===//
//
// A failed CUDA or cuBLAS call inside a kernel library prints the call, the
// error, the file and the line, and aborts: the kernels only enqueue work,
// and a failure there (a bad launch, an out-of-memory) is not recoverable by
// the step.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_CUDA_CHECK_H
#define SHARDC_RT_CUDA_CHECK_H

#include <cublas_api.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

/// Aborts, naming `library`, the call's text, `describe`'s words for its
/// status, the file and the line, where `call` returns other than
/// `success`. The callers stringize the call, before its macros expand
/// (cuBLAS's v2 names).
#define SHARDC_STATUS_CHECK(call, text, library, Status, success, describe)    \
  do {                                                                         \
    Status shardcStatus_ = (call);                                             \
    if (shardcStatus_ != (success)) {                                          \
      std::fprintf(stderr, "shardc: " library " error: %s: %s (%s:%d)\n",      \
                   text, describe(shardcStatus_), __FILE__, __LINE__);         \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

#define SHARDC_CUDA_CHECK(call)                                                \
  SHARDC_STATUS_CHECK(call, #call, "CUDA", cudaError_t, cudaSuccess,           \
                      cudaGetErrorString)

#define SHARDC_CUBLAS_CHECK(call)                                              \
  SHARDC_STATUS_CHECK(call, #call, "cuBLAS", cublasStatus_t,                   \
                      CUBLAS_STATUS_SUCCESS, cublasGetStatusString)

/// Checks the launch just made (configuration errors; faults inside the
/// kernel surface at the next synchronising call).
#define SHARDC_CUDA_CHECK_LAUNCH() SHARDC_CUDA_CHECK(cudaGetLastError())

#endif // SHARDC_RT_CUDA_CHECK_H
