//===- KernelTimes.cpp - Wall time per CPU kernel -------------------------===//

#include "KernelTimer.h"

#include "shardc_rt/Kernels.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

namespace {

std::atomic<bool> enabled{false};
std::mutex mutex;
std::vector<shardc_rt_kernel_time> times; // guarded by mutex
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
  auto it = std::find_if(times.begin(), times.end(), [&](const auto &t) {
    return std::strcmp(t.kernel, kernel) == 0;
  });
  if (it == times.end())
    it = times.insert(times.end(), {kernel, 0, 0.0});
  ++it->calls;
  it->seconds += seconds;
}

extern "C" {

void shardc_rt_kernel_times_enable(int on) { enabled.store(on != 0); }

int32_t shardc_rt_kernel_times(shardc_rt_kernel_time *out, int32_t capacity) {
  std::lock_guard<std::mutex> lock(mutex);
  auto count = static_cast<int32_t>(times.size());
  std::copy_n(times.begin(), std::min(count, std::max(capacity, 0)), out);
  return count;
}

void shardc_rt_kernel_times_reset(void) {
  std::lock_guard<std::mutex> lock(mutex);
  times.clear();
}

} // extern "C"
