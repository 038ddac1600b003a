//===- KernelTimes.cpp - Wall time per CPU kernel -------------------------===//

#include "KernelTimer.h"

#include "shardc_rt/Kernels.h"

#include <atomic>
#include <mutex>

namespace {

std::atomic<bool> enabled{false};
std::mutex mutex;
shardc::rt::KernelTimes times; // guarded by mutex
/// Timed calls in progress on this thread: only the outermost counts.
thread_local int depth = 0;

} // namespace

shardc::rt::KernelTimer::KernelTimer(const char *name) {
  if (!enabled.load(std::memory_order_relaxed))
    return;
  counted = true;
  if (depth++ > 0)
    return;
  kernel = name;
  start = std::chrono::steady_clock::now();
}

shardc::rt::KernelTimer::~KernelTimer() {
  if (!counted)
    return;
  --depth;
  if (!kernel)
    return;
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  std::lock_guard<std::mutex> lock(mutex);
  times.add(kernel, seconds);
}

extern "C" {

void shardc_rt_kernel_times_enable(int on) { enabled.store(on != 0); }

int32_t shardc_rt_kernel_times(shardc_rt_kernel_time *out, int32_t capacity) {
  std::lock_guard<std::mutex> lock(mutex);
  return times.copy(out, capacity);
}

void shardc_rt_kernel_times_reset(void) {
  std::lock_guard<std::mutex> lock(mutex);
  times.clear();
}

} // extern "C"
