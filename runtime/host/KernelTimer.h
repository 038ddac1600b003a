//===- KernelTimer.h - Timing the CPU kernels' calls ------------*- C++ -*-===//
//
// SHARDC_RT_TIME_KERNEL("linear_f32") at the top of a C ABI kernel adds the
// call's wall time to that kernel's entry of shardc_rt_kernel_times while
// timing is on, and the call to shardc_rt_kernel_calls while recording is
// (--trace); it costs two relaxed atomic loads when both are off.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_HOST_KERNELTIMER_H
#define SHARDC_RT_HOST_KERNELTIMER_H

#include <chrono>

namespace shardc::rt {

class KernelTimer {
public:
  explicit KernelTimer(const char *kernel);
  ~KernelTimer();
  KernelTimer(const KernelTimer &) = delete;
  KernelTimer &operator=(const KernelTimer &) = delete;

private:
  bool counted = false;         // timing was on: the call is in `depth`
  const char *kernel = nullptr; // the outermost timed call's name
  std::chrono::steady_clock::time_point start;
};

} // namespace shardc::rt

#define SHARDC_RT_TIME_KERNEL(name)                                            \
  ::shardc::rt::KernelTimer shardcKernelTimer_(name)

#endif // SHARDC_RT_HOST_KERNELTIMER_H
