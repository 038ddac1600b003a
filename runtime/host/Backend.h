//===- Backend.h - Where a rank's memory lives: host or device --*- C++ -*-===//
//
// What differs between the CPU runtime (host/) and the CUDA runtime (cuda/)
// below the step: raw memory, copies between the host and that memory, and
// the set-up around the steps. Everything else (flags, init, data, files,
// the step loop) is shared and reaches the memory only through these.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_HOST_BACKEND_H
#define SHARDC_RT_HOST_BACKEND_H

#include "Trace.h"

#include "shardc_rt/KernelTime.h"
#include "shardc_rt/shardc_rt.h"

#include <algorithm>
#include <cstdint>
#include <vector>

struct shardc_rt_context;

namespace shardc::rt {

/// `bytes` of raw memory, 256-byte aligned, or null when there is none.
void *backendAllocate(int64_t bytes);
void backendRelease(void *ptr);
/// Zeroes `bytes` at `ptr`, in order with the step's work.
void backendZero(shardc_rt_context &ctx, void *ptr, int64_t bytes);
/// Copies between the host and backend memory; the copy is complete when
/// the call returns (set-up and files, not the step's hot path).
void backendCopyIn(void *dst, const void *hostSrc, int64_t bytes);
void backendCopyOut(void *hostDst, const void *src, int64_t bytes);
/// As backendCopyOut / backendCopyIn, for `count` elements of `dtype` (F32
/// or BF16) in backend memory and floats on the host, widened on the way out
/// and rounded on the way in (host/Context.cpp, on top of the two above).
void copyOutFloats(float *host, const void *src, shardc_rt_dtype dtype,
                   int64_t count);
void copyInFloats(void *dst, shardc_rt_dtype dtype, const float *host,
                  int64_t count);
/// Copies a step input into backend memory, in order with the step's work.
/// `hostSrc` stays valid until the step ends.
void backendCopyInput(shardc_rt_context &ctx, void *dst, const void *hostSrc,
                      int64_t bytes);

/// A copy within backend memory, in order with the step's work.
void backendCopy(shardc_rt_context &ctx, void *dst, const void *src,
                 int64_t bytes);
/// One tensor of an AdamW update: `count` f32 elements of `value` and its
/// moments, from a gradient of `gradDtype`, times *clip where `clip` (backend
/// memory) is not null, with no weight decay where `noDecay`. Where
/// `rounded` is not null it receives the updated values rounded to bf16 (a
/// BF16 param's value).
struct AdamWTensor {
  float *value;
  float *expAvg;
  float *expAvgSq;
  const void *grad;
  shardc_rt_dtype gradDtype;
  int64_t count;
  shardc_rt_bf16 *rounded;
  const float *clip;
  bool noDecay;
};
/// AdamW as torch.optim.AdamW (decoupled weight decay, bias-corrected
/// moments, step ctx.step, learning rate learningRate(model, ctx.step)) on
/// each of `tensors`, in order with the step; each tensor's result is the one
/// it would have alone (the GPU takes them in one multi-tensor launch).
void backendAdamW(shardc_rt_context &ctx,
                  const std::vector<AdamWTensor> &tensors);
/// shardc_rt_sum_squares: the sum of the squares of the tensors' elements,
/// accumulated in double in an order that depends only on the tensors,
/// rounded to f32 into `sum` (backend memory), in order with the step.
void backendSumSquares(shardc_rt_context &ctx,
                       const std::vector<shardc_rt_tensor_ref> &tensors,
                       float *sum);
/// shardc_rt_clip_coefficient: `norm` = sqrt of the sum of the `sums`
/// (added in f32, in order), `coef` = min(1, maxNorm / (norm + 1e-6)); all
/// three in backend memory, in order with the step.
void backendClipCoefficient(shardc_rt_context &ctx,
                            const std::vector<const float *> &sums,
                            double maxNorm, float *coef, float *norm);
/// backendAdamW's update run by this CPU over host memory: the CPU
/// backend's backendAdamW, and on either backend the update of an
/// offloaded optimizer (host/Optimizer.cpp).
void hostAdamW(shardc_rt_context &ctx, const std::vector<AdamWTensor> &tensors);

/// offload_optimizer's memory: `bytes` of host memory the backend copies to
/// and from fastest (pinned on a GPU), 256-byte aligned, or null when there
/// is none; outside the allocator's count.
void *backendAllocateHost(int64_t bytes);
void backendReleaseHost(void *ptr);
/// Copies `bytes` of backend memory at `src` to host memory from
/// backendAllocateHost, in order with the step's work: the copy has landed
/// once backendWaitForHost returns.
void backendCopyToHost(shardc_rt_context &ctx, void *hostDst, const void *src,
                       int64_t bytes);
/// Returns once the work the step has enqueued so far has completed.
void backendWaitForHost(shardc_rt_context &ctx);
/// The learning rate of step `step` (from 1) under `model`'s schedule, as
/// train.adamw's description defines it (host/Optimizer.cpp).
double learningRate(const shardc_rt_model &model, int64_t step);

/// Before params are allocated (MPI and the communicators are up): select
/// the device, create streams and communicators.
void backendSetUp(shardc_rt_context &ctx);
/// Around a step: backendFinishStep returns once everything the step
/// enqueued has completed.
void backendStartStep(shardc_rt_context &ctx);
void backendFinishStep(shardc_rt_context &ctx);
/// Seconds of the last step spent in GEMMs, where the backend measures it
/// (0 where it does not).
double backendGemmSeconds(shardc_rt_context &ctx);
/// The memory the backend's kernels hold outside the allocator, so far:
/// on a GPU their workspaces (shardc_rt_cuda_kernels_workspace_bytes),
/// which the ledger does not predict; 0 on the CPU.
int64_t backendWorkspaceBytes(shardc_rt_context &ctx);
/// Per-kernel timing (--profile), off until enabled; backendKernelTimes
/// returns the totals since enabled, after backendFinishStep (on a GPU it
/// collects the step's events, to be reused: call it every step).
void backendKernelTimesEnable(shardc_rt_context &ctx, bool on);
std::vector<shardc_rt_kernel_time> backendKernelTimes(shardc_rt_context &ctx);
/// --trace (host/Trace.h): marks this point of the step, in the order of
/// its work (on a GPU: an event recorded on the compute stream).
TraceMark backendTraceMark(shardc_rt_context &ctx);
/// After backendFinishStep: each of the step's marks in microseconds since
/// ctx.trace's origin; the next step's marks start afresh.
std::vector<double> backendTraceTimes(shardc_rt_context &ctx);
/// Recording of every kernel call, off until enabled; backendKernelCalls
/// returns the step's calls after backendFinishStep (and before
/// backendTraceTimes, whose marks time them on a GPU), in microseconds since
/// ctx.trace's origin, and starts the next step's afresh.
void backendKernelCallsEnable(shardc_rt_context &ctx, bool on);
std::vector<Trace::Call> backendKernelCalls(shardc_rt_context &ctx);

/// Every entry of a kernel library's C ABI list (shardc_rt_kernel_times and
/// its kin), through `copy(out, capacity)`, which copies up to `capacity`
/// entries and returns how many there are.
template <typename T, typename Copy> std::vector<T> copyAll(Copy copy) {
  std::vector<T> all(copy(nullptr, 0));
  all.resize(std::min<size_t>(
      copy(all.data(), static_cast<int32_t>(all.size())), all.size()));
  return all;
}
void backendTearDown(shardc_rt_context &ctx);

} // namespace shardc::rt

#endif // SHARDC_RT_HOST_BACKEND_H
