//===- Comm.cpp - Groups of ranks and non-blocking collectives ------------===//
//
// Each collective runs on its group's communicator (Context.cpp) as one
// non-blocking MPI call; shardc_rt_wait completes it where the schedule says.
//
//===----------------------------------------------------------------------===//

#include "Context.h"

#include "shardc_rt/Error.h"

#include <algorithm>
#include <chrono>
#include <string>

using namespace shardc::rt;

struct shardc_rt_request {
  MPI_Request request = MPI_REQUEST_NULL;
  const char *call;
  float *out;
  int64_t count;
  float scale = 1.0f;         // 1 / group for an average
  void *staging = nullptr;    // a padded copy of the input, freed at the wait
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

extern "C" {

static shardc_rt_request *start(shardc_rt_context *ctx, const char *call,
                                float *out, int64_t count) {
  auto *r = new shardc_rt_request;
  r->call = call;
  r->out = out;
  r->count = count;
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
                                              const float *in, float *out,
                                              int64_t count) {
  const char *call = "MPI_Iallgather";
  shardc_rt_request *r = start(ctx, call, out, count);
  int64_t group = ctx->groupSize(axes);
  checkMpi(MPI_Iallgather(in, mpiCount(count, call), MPI_FLOAT, out,
                          mpiCount(count, call), MPI_FLOAT, ctx->comms[axes],
                          &r->request),
           call);
  ctx->timers.bytesSent += (group - 1) * count * 4;
  return r;
}

shardc_rt_request *
shardc_rt_reduce_scatter_start(shardc_rt_context *ctx, shardc_rt_axes axes,
                               const float *in, int64_t used, float *out,
                               int64_t count, int32_t average) {
  const char *call = "MPI_Ireduce_scatter_block";
  shardc_rt_request *r = start(ctx, call, out, count);
  int64_t group = ctx->groupSize(axes);
  if (used < group * count) {
    // Uneven dim-0 shards: the last ranks' rows are padding.
    r->staging = shardc_rt_alloc(ctx, group * count * 4);
    float *staging = static_cast<float *>(r->staging);
    std::copy(in, in + used, staging);
    std::fill(staging + used, staging + group * count, 0.0f);
    in = static_cast<const float *>(r->staging);
  }
  if (average)
    r->scale = 1.0f / static_cast<float>(group);
  checkMpi(MPI_Ireduce_scatter_block(in, out, mpiCount(count, call),
                                     MPI_FLOAT, MPI_SUM, ctx->comms[axes],
                                     &r->request),
           call);
  ctx->timers.bytesSent += (group - 1) * count * 4;
  return r;
}

shardc_rt_request *shardc_rt_all_reduce_start(shardc_rt_context *ctx,
                                              shardc_rt_axes axes,
                                              const float *in, float *out,
                                              int64_t count, int32_t average) {
  const char *call = "MPI_Iallreduce";
  shardc_rt_request *r = start(ctx, call, out, count);
  int64_t group = ctx->groupSize(axes);
  if (average)
    r->scale = 1.0f / static_cast<float>(group);
  checkMpi(MPI_Iallreduce(in, out, mpiCount(count, call), MPI_FLOAT, MPI_SUM,
                          ctx->comms[axes], &r->request),
           call);
  ctx->timers.bytesSent += (2 * (group - 1) * count * 4 + group / 2) / group;
  return r;
}

void shardc_rt_wait(shardc_rt_context *ctx, shardc_rt_request *r) {
  auto waitStarted = std::chrono::steady_clock::now();
  checkMpi(MPI_Wait(&r->request, MPI_STATUS_IGNORE), r->call);
  ctx->timers.commWaitSeconds += secondsSince(waitStarted);
  if (r->scale != 1.0f)
    for (int64_t i = 0; i < r->count; ++i)
      r->out[i] *= r->scale;
  if (r->staging)
    shardc_rt_free(ctx, r->staging);
  ctx->pending.erase(
      std::find(ctx->pending.begin(), ctx->pending.end(), r));
  if (ctx->pending.empty())
    ctx->timers.commSeconds += secondsSince(ctx->inFlightSince);
  delete r;
}

} // extern "C"
