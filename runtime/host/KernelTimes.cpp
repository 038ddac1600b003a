//===- KernelTimes.cpp - Wall time of the CPU kernels --------------------===//

#include "KernelTimer.h"

#include "shardc_rt/Kernels.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace {

std::atomic<bool> enabled{false}, recording{false};
std::mutex mutex;
shardc::rt::KernelTimes times;            // guarded by mutex
std::vector<shardc_rt_kernel_call> calls; // guarded by mutex
/// Timed calls in progress on this thread: only the outermost counts.
thread_local int depth = 0;

} // namespace

shardc::rt::KernelTimer::KernelTimer(const char *name) {
  if (!enabled.load(std::memory_order_relaxed) &&
      !recording.load(std::memory_order_relaxed))
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
  auto end = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex);
  if (enabled.load(std::memory_order_relaxed))
    times.add(kernel, std::chrono::duration<double>(end - start).count());
  if (recording.load(std::memory_order_relaxed)) {
    auto seconds = [](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double>(t.time_since_epoch()).count();
    };
    calls.push_back({kernel, seconds(start), seconds(end)});
  }
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

void shardc_rt_kernel_calls_enable(int on) { recording.store(on != 0); }

int32_t shardc_rt_kernel_calls(shardc_rt_kernel_call *out, int32_t capacity) {
  std::lock_guard<std::mutex> lock(mutex);
  auto count = static_cast<int32_t>(calls.size());
  std::copy_n(calls.begin(), std::min(count, std::max(capacity, 0)), out);
  return count;
}

void shardc_rt_kernel_calls_reset(void) {
  std::lock_guard<std::mutex> lock(mutex);
  calls.clear();
}

} // extern "C"
