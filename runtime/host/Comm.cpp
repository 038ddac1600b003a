//===- Comm.cpp - Groups of ranks and non-blocking collectives ------------===//
//
// Ranks are laid out row-major over the mesh axes, as `dist.mesh` reads. Each
// set of axes names a group: the ranks that agree on every other axis. Each
// collective runs on its group's communicator as one non-blocking MPI call;
// shardc_rt_wait completes it where the schedule says.
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
  std::chrono::steady_clock::time_point started;
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

int64_t shardc_rt_context::groupSize(shardc_rt_axes axes) const {
  int64_t size = 1;
  for (int32_t a = 0; a < model->mesh_rank; ++a)
    if (axes & (1u << a))
      size *= model->mesh_shape[a];
  return size;
}

int64_t shardc_rt_context::groupIndex(shardc_rt_axes axes) const {
  int64_t index = 0;
  for (int32_t a = 0; a < model->mesh_rank; ++a)
    if (axes & (1u << a))
      index = index * model->mesh_shape[a] + coords[a];
  return index;
}

Range shardc_rt_context::rangeOf(const std::vector<int64_t> &shape,
                                 shardc_rt_split split) const {
  int64_t numel = 1;
  for (int64_t d : shape)
    numel *= d;
  int64_t group = groupSize(split.axes);
  if (group == 1 || shape.empty())
    return {0, numel, numel};
  int64_t rows = shape[0], rowSize = numel / rows;
  int64_t perRank = (rows + group - 1) / group;
  int64_t index = groupIndex(split.axes);
  int64_t first = std::min(index * perRank, rows);
  int64_t last = std::min(first + perRank, rows);
  return {first * rowSize, last * rowSize, perRank * rowSize};
}

bool shardc_rt_context::firstReplica(shardc_rt_split split) const {
  for (int32_t a = 0; a < model->mesh_rank; ++a)
    if (!(split.axes & (1u << a)) && coords[a] != 0)
      return false;
  return true;
}

extern "C" {

int64_t shardc_rt_group_index(shardc_rt_context *ctx, shardc_rt_axes axes) {
  return ctx->groupIndex(axes);
}

static shardc_rt_request *start(shardc_rt_context *ctx, const char *call,
                                float *out, int64_t count) {
  auto *r = new shardc_rt_request;
  r->call = call;
  r->out = out;
  r->count = count;
  r->started = std::chrono::steady_clock::now();
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
    std::copy(in, in + used, static_cast<float *>(r->staging));
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
  ctx->timers.commSeconds += secondsSince(r->started);
  if (r->scale != 1.0f)
    for (int64_t i = 0; i < r->count; ++i)
      r->out[i] *= r->scale;
  if (r->staging)
    shardc_rt_free(ctx, r->staging);
  ctx->pending.erase(
      std::find(ctx->pending.begin(), ctx->pending.end(), r));
  delete r;
}

} // extern "C"
