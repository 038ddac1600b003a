/*===- KernelTime.h - Time spent per kernel -------------------------*- C -*-===//
 *
 * The kernel libraries (shardc_rt/Kernels.h on the CPU, shardc_rt/
 * CudaKernels.h on a GPU) can time every call of their C ABI by kernel name,
 * for `--profile`: wall time on the CPU, the time between events recorded
 * around the call on the GPU. A call made inside another timed call (a bf16
 * kernel running its f32 one) counts for the outer one only.
 *
 *===----------------------------------------------------------------------===*/

#ifndef SHARDC_RT_KERNELTIME_H
#define SHARDC_RT_KERNELTIME_H

#include <stdint.h>

typedef struct {
  const char *kernel; /* e.g. "linear_f32"; static storage */
  int64_t calls;
  double seconds;
} shardc_rt_kernel_time;

#endif /* SHARDC_RT_KERNELTIME_H */
