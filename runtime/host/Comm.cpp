//===- Comm.cpp - Groups of ranks and non-blocking collectives ------------===//
//
// Each collective runs on its group's communicator (Context.cpp) as one
// non-blocking MPI call; shardc_rt_wait completes it where the schedule says.
// bf16 travels as MPI_UINT16_T and is summed by a user-defined operation
// that rounds each partial sum to bf16, as a bf16 ring reduction does; an
// average then scales the sum and rounds once more. (NCCL's ncclAvg scales
// before summing: the same for groups of a power of two, otherwise an ulp
// apart at times.)
//
//===----------------------------------------------------------------------===//

#include "Backend.h"
#include "Context.h"

#include "shardc_rt/Error.h"

#include <algorithm>
#include <chrono>
#include <string>

using namespace shardc::rt;

struct shardc_rt_request {
  MPI_Request request = MPI_REQUEST_NULL;
  const char *call;
  void *out;
  shardc_rt_dtype dtype;
  int64_t count;
  float scale = 1.0f;         // 1 / group for an average
  shardc_rt_collective kind;
  shardc_rt_axes axes;
  const char *what;      // for --trace
  TraceMark started = 0; // while --trace records
};

static double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

static void checkMpi(int status, const char *call) {
  if (status == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  SHARDC_RT_FAIL(call, std::string(text, length));
}

static void sumBf16(void *in, void *inout, int *count, MPI_Datatype *) {
  auto *a = static_cast<const shardc_rt_bf16 *>(in);
  auto *b = static_cast<shardc_rt_bf16 *>(inout);
  for (int i = 0; i < *count; ++i)
    b[i] = narrow(widen(a[i]) + widen(b[i]));
}

static MPI_Datatype mpiType(shardc_rt_dtype dtype, const char *call) {
  SHARDC_RT_CHECK(dtype == SHARDC_RT_F32 || dtype == SHARDC_RT_BF16, call,
                  "collectives send f32 or bf16, not dtype " +
                      std::to_string(dtype));
  return dtype == SHARDC_RT_BF16 ? MPI_UINT16_T : MPI_FLOAT;
}

static MPI_Op mpiSum(shardc_rt_dtype dtype) {
  static MPI_Op bf16 = MPI_OP_NULL;
  if (dtype != SHARDC_RT_BF16)
    return MPI_SUM;
  if (bf16 == MPI_OP_NULL)
    MPI_Op_create(sumBf16, /*commute=*/1, &bf16);
  return bf16;
}

/// --trace: the wait on the compute track, and the collective from its
/// start to its completion on its communicator's.
static void traceCollective(shardc_rt_context &ctx, const shardc_rt_request &r,
                            TraceMark waiting) {
  TraceMark done = backendTraceMark(ctx);
  std::string name = collectiveName(r.kind, r.what);
  ctx.trace->span("wait " + name, waiting, done);
  ctx.trace->collective(r.axes, name, r.started, done,
                        collectiveArgs(ctx, r.kind, r.axes, r.dtype, r.count));
}

extern "C" {

static shardc_rt_request *start(shardc_rt_context *ctx, const char *call,
                                shardc_rt_collective kind, shardc_rt_axes axes,
                                shardc_rt_dtype dtype, void *out, int64_t count,
                                const char *what) {
  auto *r = new shardc_rt_request;
  r->call = call;
  r->out = out;
  r->dtype = dtype;
  r->count = count;
  r->kind = kind;
  r->axes = axes;
  r->what = what;
  if (ctx->trace)
    r->started = backendTraceMark(*ctx);
  // Communication time is the union of the collectives' lives: from the
  // first start to the last wait of each busy stretch.
  if (ctx->pending.empty())
    ctx->inFlightSince = std::chrono::steady_clock::now();
  ctx->pending.push_back(r);
  return r;
}

static int mpiCount(int64_t count, const char *call) {
  SHARDC_RT_CHECK(count <= INT32_MAX, call,
                  std::to_string(count) +
                      " elements exceed one MPI call's limit of 2^31-1");
  return static_cast<int>(count);
}

shardc_rt_request *shardc_rt_all_gather_start(shardc_rt_context *ctx,
                                              shardc_rt_axes axes,
                                              shardc_rt_dtype dtype,
                                              const void *in, void *out,
                                              int64_t count, const char *what) {
  // `in` is MPI_IN_PLACE where this member's elements are in its slot of
  // out already (shardc_rt_all_gather_from_host_start).
  const char *call = "MPI_Iallgather";
  shardc_rt_request *r =
      start(ctx, call, SHARDC_RT_ALL_GATHER, axes, dtype, out, count, what);
  int64_t group = ctx->groupSize(axes);
  MPI_Datatype type = mpiType(dtype, call);
  checkMpi(MPI_Iallgather(in, mpiCount(count, call), type, out,
                          mpiCount(count, call), type, ctx->comms[axes],
                          &r->request),
           call);
  ctx->timers.bytesSent += bytesSent(SHARDC_RT_ALL_GATHER, group, count, dtype);
  return r;
}

shardc_rt_request *shardc_rt_all_gather_from_host_start(
    shardc_rt_context *ctx, shardc_rt_axes axes, shardc_rt_dtype dtype,
    const void *host_in, void *out, int64_t count, const char *what) {
  int member = 0;
  MPI_Comm_rank(ctx->comms[axes], &member);
  int64_t bytes = count * elementBytes(dtype);
  backendCopyInput(*ctx, static_cast<char *>(out) + member * bytes, host_in,
                   bytes);
  ctx->timers.hostCopyBytes += bytes;
  return shardc_rt_all_gather_start(ctx, axes, dtype, MPI_IN_PLACE, out, count,
                                    what);
}

shardc_rt_request *
shardc_rt_reduce_scatter_start(shardc_rt_context *ctx, shardc_rt_axes axes,
                               shardc_rt_dtype dtype, const void *in, void *out,
                               int64_t count, int32_t average,
                               const char *what) {
  const char *call = "MPI_Ireduce_scatter_block";
  shardc_rt_request *r =
      start(ctx, call, SHARDC_RT_REDUCE_SCATTER, axes, dtype, out, count, what);
  int64_t group = ctx->groupSize(axes);
  if (average)
    r->scale = 1.0f / static_cast<float>(group);
  checkMpi(MPI_Ireduce_scatter_block(in, out, mpiCount(count, call),
                                     mpiType(dtype, call), mpiSum(dtype),
                                     ctx->comms[axes], &r->request),
           call);
  ctx->timers.bytesSent +=
      bytesSent(SHARDC_RT_REDUCE_SCATTER, group, count, dtype);
  return r;
}

shardc_rt_request *
shardc_rt_all_reduce_start(shardc_rt_context *ctx, shardc_rt_axes axes,
                           shardc_rt_dtype dtype, const void *in, void *out,
                           int64_t count, int32_t average, const char *what) {
  const char *call = "MPI_Iallreduce";
  shardc_rt_request *r =
      start(ctx, call, SHARDC_RT_ALL_REDUCE, axes, dtype, out, count, what);
  int64_t group = ctx->groupSize(axes);
  if (average)
    r->scale = 1.0f / static_cast<float>(group);
  checkMpi(MPI_Iallreduce(in, out, mpiCount(count, call),
                          mpiType(dtype, call), mpiSum(dtype),
                          ctx->comms[axes], &r->request),
           call);
  ctx->timers.bytesSent += bytesSent(SHARDC_RT_ALL_REDUCE, group, count, dtype);
  return r;
}

void shardc_rt_wait(shardc_rt_context *ctx, shardc_rt_request *r) {
  auto waitStarted = std::chrono::steady_clock::now();
  TraceMark waiting = ctx->trace ? backendTraceMark(*ctx) : 0;
  checkMpi(MPI_Wait(&r->request, MPI_STATUS_IGNORE), r->call);
  ctx->timers.commWaitSeconds += secondsSince(waitStarted);
  if (r->scale != 1.0f && r->dtype == SHARDC_RT_BF16) {
    auto *out = static_cast<shardc_rt_bf16 *>(r->out);
    for (int64_t i = 0; i < r->count; ++i)
      out[i] = narrow(widen(out[i]) * r->scale);
  } else if (r->scale != 1.0f) {
    auto *out = static_cast<float *>(r->out);
    for (int64_t i = 0; i < r->count; ++i)
      out[i] *= r->scale;
  }
  if (ctx->trace)
    traceCollective(*ctx, *r, waiting);
  ctx->pending.erase(
      std::find(ctx->pending.begin(), ctx->pending.end(), r));
  if (ctx->pending.empty())
    ctx->timers.commSeconds += secondsSince(ctx->inFlightSince);
  delete r;
}

} // extern "C"
