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

#define SHARDC_CUDA_CHECK(call)                                                \
  do {                                                                         \
    cudaError_t shardcError_ = (call);                                         \
    if (shardcError_ != cudaSuccess) {                                         \
      std::fprintf(stderr, "shardc: CUDA error: %s: %s (%s:%d)\n", #call,      \
                   cudaGetErrorString(shardcError_), __FILE__, __LINE__);      \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

#define SHARDC_CUBLAS_CHECK(call)                                              \
  do {                                                                         \
    cublasStatus_t shardcStatus_ = (call);                                     \
    if (shardcStatus_ != CUBLAS_STATUS_SUCCESS) {                              \
      std::fprintf(stderr, "shardc: cuBLAS error: %s: %s (%s:%d)\n", #call,    \
                   cublasGetStatusString(shardcStatus_), __FILE__, __LINE__);  \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

/// Checks the launch just made (configuration errors; faults inside the
/// kernel surface at the next synchronising call).
#define SHARDC_CUDA_CHECK_LAUNCH() SHARDC_CUDA_CHECK(cudaGetLastError())

#endif // SHARDC_RT_CUDA_CHECK_H
