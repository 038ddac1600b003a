//===- Context.h - What one rank holds while it trains ----------*- C++ -*-===//

#ifndef SHARDC_RT_HOST_CONTEXT_H
#define SHARDC_RT_HOST_CONTEXT_H

#include "Allocator.h"

#include "shardc_rt/shardc_rt.h"

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

namespace shardc::rt {

class DataSource;

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
  float *value = nullptr;             // `stored.count` elements
  float *expAvg = nullptr;            // `optimized.count` elements
  float *expAvgSq = nullptr;
  /// Whether this rank writes its stored part to files: one replica does.
  bool writesStored = false, writesOptimized = false;
};

/// Where time went, for the per-step line and the benchmarks.
struct Timers {
  double commWaitSeconds = 0; // blocked in MPI (exposed communication)
  double commSeconds = 0;     // from each collective's start to its wait
  int64_t bytesSent = 0;      // ring formulas, as the ledger counts
};

} // namespace shardc::rt

struct shardc_rt_context {
  const shardc_rt_model *model = nullptr;
  int worldRank = 0, worldSize = 1;
  std::vector<int64_t> coords;   // per mesh axis
  std::vector<MPI_Comm> comms;   // per set of axes (bit mask)
  shardc::rt::Allocator allocator;
  std::vector<shardc::rt::ParamState> params;
  int64_t step = 0;              // 1-based while a step runs
  uint64_t seed = 0;
  shardc::rt::DataSource *data = nullptr;
  shardc::rt::Timers timers;
  std::vector<shardc_rt_request *> pending;

  /// Ranks in the group spanning `axes` and this rank's index in it.
  int64_t groupSize(shardc_rt_axes axes) const;
  int64_t groupIndex(shardc_rt_axes axes) const;
  /// The part of a tensor of `shape` this rank holds under a split.
  shardc::rt::Range rangeOf(const std::vector<int64_t> &shape,
                            shardc_rt_split split) const;
  /// Whether this rank is the first replica of what it holds under a split.
  bool firstReplica(shardc_rt_split split) const;
};

#endif // SHARDC_RT_HOST_CONTEXT_H
