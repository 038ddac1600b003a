/*===- shardc_rt_cuda.h - What emitted CUDA code calls ------------*- C -*-===//
 *
 * target=cuda: the step calls the same ABI as target=host (shardc_rt.h) for
 * memory, params and the optimizer, the CUDA kernels (CudaKernels.h) on the
 * compute stream, and NCCL itself: each collective runs on its
 * communicator's stream, ordered against the compute stream by events the
 * step records and waits on. Nothing synchronises the device inside a step.
 *
 *===----------------------------------------------------------------------===*/

#ifndef SHARDC_RT_SHARDC_RT_CUDA_H
#define SHARDC_RT_SHARDC_RT_CUDA_H

#include "shardc_rt/CudaKernels.h"
#include "shardc_rt/shardc_rt.h"

#include <cuda_runtime.h>
#include <nccl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The kernels object bound to the compute stream. */
shardc_rt_cuda_kernels *shardc_rt_cuda_kernels_of(shardc_rt_context *ctx);
cudaStream_t shardc_rt_cuda_compute_stream(shardc_rt_context *ctx);
/* The NCCL communicator of the group spanning `axes`, and its stream. */
ncclComm_t shardc_rt_cuda_comm(shardc_rt_context *ctx, shardc_rt_axes axes);
cudaStream_t shardc_rt_cuda_comm_stream(shardc_rt_context *ctx,
                                        shardc_rt_axes axes);
/* Around each NCCL call, or NCCL group of `calls` calls, on `axes`'s
 * stream: shardc_rt_cuda_collective_start before it (marks its start on the
 * stream for --trace, with `what` it carries, as
 * shardc_rt_all_gather_start's), shardc_rt_cuda_sent after it: counts the
 * bytes it sends, `count` elements per rank in all (the host backend's
 * count, for the step lines and --log-json), and marks its end. */
void shardc_rt_cuda_collective_start(shardc_rt_context *ctx,
                                     shardc_rt_axes axes, const char *what);
void shardc_rt_cuda_sent(shardc_rt_context *ctx, shardc_rt_collective kind,
                         shardc_rt_axes axes, shardc_rt_dtype dtype,
                         int64_t count, int32_t calls);
/* offload_params: copies `bytes` of a stored param in host memory into this
 * member's slot of `out` (a gather's result) on `axes`'s stream, between
 * shardc_rt_cuda_collective_start and the gather, counted as a host copy;
 * returns the slot, the in-place gather's sendbuff. */
void *shardc_rt_cuda_copy_to_gather_slot(shardc_rt_context *ctx,
                                         shardc_rt_axes axes, void *out,
                                         const void *host_in, int64_t bytes);
/* Event i of the model's num_events, created once. */
cudaEvent_t shardc_rt_cuda_event(shardc_rt_context *ctx, int32_t index);
/* Reports a failed CUDA or NCCL call with the rank and ends the job. */
void shardc_rt_cuda_fail(shardc_rt_context *ctx, const char *call,
                         const char *error, const char *file, int line);

#ifdef __cplusplus
}
#endif

#define SHARDC_CUDA(call)                                                      \
  do {                                                                         \
    cudaError_t shardcError = (call);                                          \
    if (shardcError != cudaSuccess)                                            \
      shardc_rt_cuda_fail(ctx, #call, cudaGetErrorString(shardcError),         \
                          __FILE__, __LINE__);                                 \
  } while (0)
#define SHARDC_NCCL(call)                                                      \
  do {                                                                         \
    ncclResult_t shardcResult = (call);                                        \
    if (shardcResult != ncclSuccess)                                           \
      shardc_rt_cuda_fail(ctx, #call, ncclGetErrorString(shardcResult),        \
                          __FILE__, __LINE__);                                 \
  } while (0)

#endif /* SHARDC_RT_SHARDC_RT_CUDA_H */
