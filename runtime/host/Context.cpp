//===- Context.cpp - Groups of ranks and what each rank holds -------------===//
//
// Ranks are laid out row-major over the mesh axes, as `dist.mesh` reads. Each
// set of axes names a group: the ranks that agree on every other axis.
//
//===----------------------------------------------------------------------===//

#include "Context.h"
#include "Backend.h"

#include "shardc_rt/Error.h"

#include <string>
#include <vector>

using namespace shardc::rt;

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

ParamState &shardc::rt::paramAt(shardc_rt_context *ctx, int32_t index,
                                const char *call) {
  SHARDC_RT_CHECK(index >= 0 && index < static_cast<int32_t>(ctx->params.size()),
                  call, "no param " + std::to_string(index));
  return ctx->params[index];
}

FlatState &shardc::rt::flatAt(shardc_rt_context *ctx, int32_t group,
                              const char *call) {
  SHARDC_RT_CHECK(group >= 0 && group < static_cast<int32_t>(ctx->flats.size()),
                  call, "no flat param " + std::to_string(group));
  return ctx->flats[group];
}

void shardc::rt::copyOutFloats(float *host, const void *src,
                               shardc_rt_dtype dtype, int64_t count) {
  if (dtype == SHARDC_RT_F32) {
    backendCopyOut(host, src, count * 4);
    return;
  }
  std::vector<shardc_rt_bf16> narrowed(count);
  backendCopyOut(narrowed.data(), src, count * 2);
  for (int64_t i = 0; i < count; ++i)
    host[i] = widen(narrowed[i]);
}

void shardc::rt::copyInFloats(void *dst, shardc_rt_dtype dtype,
                              const float *host, int64_t count) {
  if (dtype == SHARDC_RT_F32) {
    backendCopyIn(dst, host, count * 4);
    return;
  }
  std::vector<shardc_rt_bf16> narrowed(count);
  for (int64_t i = 0; i < count; ++i)
    narrowed[i] = narrow(host[i]);
  backendCopyIn(dst, narrowed.data(), count * 2);
}

extern "C" {

int64_t shardc_rt_group_index(shardc_rt_context *ctx, shardc_rt_axes axes) {
  return ctx->groupIndex(axes);
}

void *shardc_rt_alloc(shardc_rt_context *ctx, int64_t bytes) {
  void *ptr = ctx->allocator.allocate(bytes);
  if (ctx->trace)
    ctx->trace->liveBytes(backendTraceMark(*ctx), ctx->allocator.liveBytes());
  return ptr;
}

void shardc_rt_free(shardc_rt_context *ctx, void *ptr) {
  ctx->allocator.release(ptr);
  if (ctx->trace)
    ctx->trace->liveBytes(backendTraceMark(*ctx), ctx->allocator.liveBytes());
}

void shardc_rt_region_begin(shardc_rt_context *ctx, const char *name) {
  if (ctx->trace)
    ctx->trace->openSpan(name, backendTraceMark(*ctx));
}

void shardc_rt_region_end(shardc_rt_context *ctx) {
  if (ctx->trace)
    SHARDC_RT_CHECK(ctx->trace->closeSpan(backendTraceMark(*ctx)),
                    "shardc_rt_region_end", "no region is open");
}

void *shardc_rt_param(shardc_rt_context *ctx, int32_t index) {
  return paramAt(ctx, index, "shardc_rt_param").value;
}

void *shardc_rt_flat_param(shardc_rt_context *ctx, int32_t group) {
  return flatAt(ctx, group, "shardc_rt_flat_param").value;
}

} // extern "C"
