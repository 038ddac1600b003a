//===- Backend.cpp - The CPU backend: host memory -------------------------===//

#include "Backend.h"
#include "Context.h"
#include "KernelTimer.h"

#include "shardc_rt/Kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace shardc::rt {

void *backendAllocate(int64_t bytes) {
  return std::aligned_alloc(256, (bytes + 255) / 256 * 256);
}

void backendRelease(void *ptr) { std::free(ptr); }

void backendZero(shardc_rt_context &, void *ptr, int64_t bytes) {
  std::memset(ptr, 0, bytes);
}

void backendCopyIn(void *dst, const void *hostSrc, int64_t bytes) {
  std::memcpy(dst, hostSrc, bytes);
}

void backendCopyOut(void *hostDst, const void *src, int64_t bytes) {
  std::memcpy(hostDst, src, bytes);
}

void backendCopyInput(shardc_rt_context &, void *dst, const void *hostSrc,
                      int64_t bytes) {
  std::memcpy(dst, hostSrc, bytes);
}

void backendCopy(shardc_rt_context &, void *dst, const void *src,
                 int64_t bytes) {
  std::memmove(dst, src, bytes);
}

void *backendAllocateHost(int64_t bytes) { return backendAllocate(bytes); }

void backendReleaseHost(void *ptr) { backendRelease(ptr); }

void backendCopyToHost(shardc_rt_context &, void *hostDst, const void *src,
                       int64_t bytes) {
  std::memcpy(hostDst, src, bytes);
}

void backendWaitForHost(shardc_rt_context &) {}

void backendAdamW(shardc_rt_context &ctx,
                  const std::vector<AdamWTensor> &tensors) {
  SHARDC_RT_TIME_KERNEL("adamw_f32");
  hostAdamW(ctx, tensors);
}

void backendSumSquares(shardc_rt_context &,
                       const std::vector<shardc_rt_tensor_ref> &tensors,
                       float *sum) {
  SHARDC_RT_TIME_KERNEL("sum_squares");
  double total = 0;
  for (const shardc_rt_tensor_ref &t : tensors) {
    if (t.dtype == SHARDC_RT_BF16) {
      auto *x = static_cast<const shardc_rt_bf16 *>(t.data);
      for (int64_t i = 0; i < t.count; ++i) {
        double v = widen(x[i]);
        total += v * v;
      }
    } else {
      auto *x = static_cast<const float *>(t.data);
      for (int64_t i = 0; i < t.count; ++i) {
        double v = x[i];
        total += v * v;
      }
    }
  }
  *sum = static_cast<float>(total);
}

void backendClipCoefficient(shardc_rt_context &,
                            const std::vector<const float *> &sums,
                            double maxNorm, float *coef, float *norm) {
  float total = 0.0f;
  for (const float *s : sums)
    total += *s;
  // In f32, as torch's clip_grad_norm_ on f32 gradients; a NaN norm gives
  // a NaN coefficient, as torch's clamp(max=1).
  *norm = std::sqrt(total);
  float coefficient = static_cast<float>(maxNorm) / (*norm + 1e-6f);
  *coef = coefficient > 1.0f ? 1.0f : coefficient;
}

void backendSetUp(shardc_rt_context &) {}
void backendStartStep(shardc_rt_context &) { shardc_rt_gemm_seconds_reset(); }
void backendFinishStep(shardc_rt_context &) {}
double backendGemmSeconds(shardc_rt_context &) {
  return shardc_rt_gemm_seconds();
}
int64_t backendWorkspaceBytes(shardc_rt_context &) { return 0; }
void backendKernelTimesEnable(shardc_rt_context &, bool on) {
  shardc_rt_kernel_times_enable(on ? 1 : 0);
}

std::vector<shardc_rt_kernel_time> backendKernelTimes(shardc_rt_context &) {
  return copyAll<shardc_rt_kernel_time>(shardc_rt_kernel_times);
}

// The CPU's marks are the times themselves.
TraceMark backendTraceMark(shardc_rt_context &ctx) {
  std::vector<double> &marks = ctx.trace->hostMarks;
  marks.push_back(ctx.trace->since(std::chrono::steady_clock::now()));
  return static_cast<TraceMark>(marks.size() - 1);
}

std::vector<double> backendTraceTimes(shardc_rt_context &ctx) {
  return std::exchange(ctx.trace->hostMarks, {});
}

void backendKernelCallsEnable(shardc_rt_context &, bool on) {
  shardc_rt_kernel_calls_enable(on ? 1 : 0);
}

std::vector<Trace::Call> backendKernelCalls(shardc_rt_context &ctx) {
  std::vector<shardc_rt_kernel_call> calls =
      copyAll<shardc_rt_kernel_call>(shardc_rt_kernel_calls);
  shardc_rt_kernel_calls_reset();
  std::vector<Trace::Call> out;
  for (const shardc_rt_kernel_call &c : calls) {
    auto at = [&](double seconds) {
      return ctx.trace->since(std::chrono::steady_clock::time_point(
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
              std::chrono::duration<double>(seconds))));
    };
    out.push_back({c.kernel, at(c.begin), at(c.end)});
  }
  return out;
}

void backendTearDown(shardc_rt_context &) {}

} // namespace shardc::rt
