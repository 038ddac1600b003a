//===- Context.h - What one rank holds while it trains ----------*- C++ -*-===//

#ifndef SHARDC_RT_HOST_CONTEXT_H
#define SHARDC_RT_HOST_CONTEXT_H

#include "Allocator.h"
#include "Trace.h"

#include "shardc_rt/shardc_rt.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace shardc::rt {

class DataSource;

/// Bytes of one element of `dtype`.
inline int64_t elementBytes(shardc_rt_dtype dtype) {
  return dtype == SHARDC_RT_BF16 ? 2 : 4;
}

/// Bytes one rank sends in `kind` over a group of `group` ranks, `count`
/// elements of `dtype` each (the all-gather's input, the reduce-scatter's
/// output, the all-reduce's buffer), as the ledger counts them: a ring
/// all-gather or reduce-scatter sends (group - 1) blocks; a ring
/// all-reduce 2 (group - 1) / group of its buffer, rounded.
inline int64_t bytesSent(shardc_rt_collective kind, int64_t group,
                         int64_t count, shardc_rt_dtype dtype) {
  int64_t bytes = count * elementBytes(dtype);
  if (kind == SHARDC_RT_ALL_REDUCE)
    return (2 * (group - 1) * bytes + group / 2) / group;
  return (group - 1) * bytes;
}

/// Element `element` of an array of `dtype` at `base`.
inline void *elementAt(void *base, int64_t element, shardc_rt_dtype dtype) {
  return static_cast<char *>(base) + element * elementBytes(dtype);
}
inline const void *elementAt(const void *base, int64_t element,
                             shardc_rt_dtype dtype) {
  return static_cast<const char *>(base) + element * elementBytes(dtype);
}

/// The part of a tensor one rank holds under a split: elements
/// [begin, end) of the flattened full tensor, stored in `count` elements
/// (count >= end - begin: a dim-0 shard is padded to ceil(rows / group)
/// rows).
struct Range {
  int64_t begin = 0, end = 0, count = 0;
};

struct ParamState {
  const shardc_rt_param_info *info;
  std::vector<int64_t> shape;
  int64_t numel = 1;
  Range stored, optimized;
  shardc_rt_dtype dtype = SHARDC_RT_F32; // of `value`
  void *value = nullptr;              // `stored.count` elements
  float *expAvg = nullptr;            // `optimized.count` elements
  float *expAvgSq = nullptr;
  /// A BF16 param's f32 master copy of what this rank updates
  /// (`optimized.count` elements); the value is it rounded.
  float *master = nullptr;
  /// Whether this rank writes its stored part to files: one replica does.
  bool writesStored = false, writesOptimized = false;
};

/// FSDP1's flat parameter of a unit: the members' elements one after the
/// other, padded to `group` pieces of `count`; this rank holds the elements
/// [begin, begin + count) of it, of which `used` are not padding.
struct FlatState {
  const shardc_rt_flat_info *info;
  std::vector<int64_t> offsets; // of each member in the flat buffer
  int64_t total = 0, begin = 0, count = 0, used = 0;
  shardc_rt_dtype dtype = SHARDC_RT_F32; // its members'
  void *value = nullptr; // the piece, when it is the members' storage
  float *expAvg = nullptr, *expAvgSq = nullptr;
  float *master = nullptr; // BF16 members: the piece in f32
  bool writes = false; // the first replica writes the piece to files
};

/// Where time went, for the per-step line and the benchmarks.
struct Timers {
  double commWaitSeconds = 0; // blocked in MPI (exposed communication)
  double commSeconds = 0;     // while any collective is in flight
  int64_t bytesSent = 0;      // ring formulas, as the ledger counts
  /// offload_optimizer: bytes the updates copied between host and device.
  int64_t hostCopyBytes = 0;
  /// offload_optimizer: wall time the host spent in AdamW loops (--profile;
  /// a GPU's compute stream has no work meanwhile).
  double hostUpdateSeconds = 0;
};

/// offload_optimizer's host side: the optimizer state's blocks of host
/// memory (backendAllocateHost), and with offload_params the stored params'
/// too, released at tear-down; one staging buffer
/// the updates copy gradients and values through, in two halves of up to
/// `stagingHalfBytes` (SHARDC_OFFLOAD_STAGING_KB), grown as needed; and the
/// threads an update may run on (this node's cores over its ranks, or
/// OMP_NUM_THREADS).
struct HostMemory {
  std::vector<void *> blocks;
  int64_t stateBytes = 0; // the optimizer state's
  int64_t paramBytes = 0; // offload_params: the stored params'
  void *staging = nullptr;
  int64_t stagingBytes = 0;
  int64_t stagingHalfBytes = int64_t(32) << 20;
  int64_t threads = 1;
};

} // namespace shardc::rt

struct shardc_rt_context;

namespace shardc::rt {
/// Param i or flat param g; a bad index (an emitter bug) is fatal.
ParamState &paramAt(shardc_rt_context *ctx, int32_t index, const char *call);
FlatState &flatAt(shardc_rt_context *ctx, int32_t group, const char *call);

/// Calls fn(member, from, to, at) for each member overlapping this rank's
/// piece of `flat`: the member's elements [from, to) are the piece's
/// elements [at, at + to - from).
template <typename Fn>
void forEachMemberRange(shardc_rt_context &ctx, FlatState &flat, Fn fn);
} // namespace shardc::rt

struct shardc_rt_context {
  const shardc_rt_model *model = nullptr;
  int worldRank = 0, worldSize = 1;
  std::vector<int64_t> coords;   // per mesh axis
  std::vector<MPI_Comm> comms;   // per set of axes (bit mask)
  shardc::rt::Allocator allocator;
  std::vector<shardc::rt::ParamState> params;
  std::vector<shardc::rt::FlatState> flats;
  int64_t step = 0;              // 1-based while a step runs
  /// The batch of `data` the inputs read: step - 1 while a step runs, the
  /// evaluation's own count while --eval-every evaluates.
  int64_t batch = 0;
  uint64_t seed = 0;
  shardc::rt::DataSource *data = nullptr;
  shardc::rt::Timers timers;
  shardc::rt::HostMemory host;
  std::vector<shardc_rt_request *> pending;
  /// When the oldest collective still in flight started.
  std::chrono::steady_clock::time_point inFlightSince;
  /// Each input's rows for the current batch, on the host.
  std::vector<std::vector<int32_t>> inputStaging;
  /// The batch whose token window (both inputs) inputStaging holds; -1
  /// when `data` changes.
  int64_t tokenWindowBatch = -1;
  /// The backend's own state (device, streams, communicators).
  void *backend = nullptr;
  /// Where the model clips gradients (max_grad_norm > 0): the step's
  /// gradient norm, in backend memory (outside the allocator's count).
  float *gradNorm = nullptr;
  /// While --trace records: the timeline of this rank's steps.
  shardc::rt::Trace *trace = nullptr;
  /// While --check-grads runs: each param's gradient, whole.
  std::vector<std::vector<float>> *capturedGrads = nullptr;

  /// Ranks in the group spanning `axes` and this rank's index in it.
  int64_t groupSize(shardc_rt_axes axes) const;
  int64_t groupIndex(shardc_rt_axes axes) const;
  /// The part of a tensor of `shape` this rank holds under a split.
  shardc::rt::Range rangeOf(const std::vector<int64_t> &shape,
                            shardc_rt_split split) const;
  /// Whether this rank is the first replica of what it holds under a split.
  bool firstReplica(shardc_rt_split split) const;
};

template <typename Fn>
void shardc::rt::forEachMemberRange(shardc_rt_context &ctx, FlatState &flat,
                                    Fn fn) {
  int64_t end = flat.begin + flat.used;
  for (int32_t i = 0; i < flat.info->num_members; ++i) {
    ParamState &member = ctx.params[flat.info->members[i]];
    int64_t first = std::max(flat.begin, flat.offsets[i]);
    int64_t last = std::min(end, flat.offsets[i] + member.numel);
    if (first < last)
      fn(member, first - flat.offsets[i], last - flat.offsets[i],
         first - flat.begin);
  }
}

#endif // SHARDC_RT_HOST_CONTEXT_H
