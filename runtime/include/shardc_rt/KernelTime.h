/*===- KernelTime.h - Time spent per kernel, and each call ---------*- C
 *-*-===//
 *
 * The kernel libraries (shardc_rt/Kernels.h on the CPU, shardc_rt/
 * CudaKernels.h on a GPU) can time every call of their C ABI by kernel name,
 * for `--profile`: wall time on the CPU, the time between events recorded
 * around the call on the GPU; and, for `--trace`, record every call. A call
 * made inside another timed call (a bf16 kernel running its f32 one) counts
 * for the outer one only.
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

/* One call, for --trace: when it began and ended, in seconds (the CPU: of
 * the steady clock, since its epoch). */
typedef struct {
  const char *kernel;
  double begin, end;
} shardc_rt_kernel_call;

#ifdef __cplusplus
#include <algorithm>
#include <cstring>
#include <vector>

namespace shardc::rt {

/// The per-kernel totals both kernel libraries keep: one entry per kernel,
/// in the order of their first call.
class KernelTimes {
public:
  /// Adds one call of `kernel` that took `seconds`.
  void add(const char *kernel, double seconds) {
    auto it = std::find_if(times.begin(), times.end(), [&](const auto &t) {
      return std::strcmp(t.kernel, kernel) == 0;
    });
    if (it == times.end())
      it = times.insert(times.end(), {kernel, 0, 0.0});
    ++it->calls;
    it->seconds += seconds;
  }
  /// Copies up to `capacity` entries to `out`; returns how many there are.
  int32_t copy(shardc_rt_kernel_time *out, int32_t capacity) const {
    auto count = static_cast<int32_t>(times.size());
    std::copy_n(times.begin(), std::min(count, std::max(capacity, 0)), out);
    return count;
  }
  void clear() { times.clear(); }

private:
  std::vector<shardc_rt_kernel_time> times;
};

} // namespace shardc::rt
#endif /* __cplusplus */

#endif /* SHARDC_RT_KERNELTIME_H */
