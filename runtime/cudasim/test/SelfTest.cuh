//===- SelfTest.cuh - Device code in a header, for the test -----*- C++ -*-===//
//
// translate.py rewrites a .cuh header as it rewrites a .cu file: its launches
// and its __shared__ variables; and a .cu file that includes it launches its
// template kernels with deduced arguments (SelfTest.cu's runChecks).
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_CUDASIM_SELFTEST_CUH
#define SHARDC_CUDASIM_SELFTEST_CUH

#include <cuda_runtime.h>

/// out[b] = the sum of block b's values of x, through shared memory.
template <typename T> __global__ void headerSumKernel(const T *x, T *out) {
  __shared__ T partial[64];
  partial[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) {
    T sum = 0;
    for (unsigned i = 0; i < blockDim.x; ++i)
      sum += partial[i];
    out[blockIdx.x] = sum;
  }
}

/// headerSumKernel over `blocks` blocks of 64, launched in the header.
template <typename T> void headerSum(const T *x, T *out, int blocks) {
  headerSumKernel<T><<<blocks, 64>>>(x, out);
}

#endif // SHARDC_CUDASIM_SELFTEST_CUH
