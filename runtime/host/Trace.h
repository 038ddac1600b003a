//===- Trace.h - --trace: a timeline of every rank's steps ------*- C++ -*-===//
//
// --trace FILE writes Chrome's trace event format (JSON, which Perfetto and
// chrome://tracing open): one process per rank, a `compute` track with each
// step, each unit's forward, backward and recomputation, each kernel
// call, the reading of each input and (on the CPU) each wait for a
// collective, one `comm` track per communicator (more where collectives
// overlap on it) with each collective from its start to its completion,
// named by what it carries, and the allocator's live bytes as a counter,
// whose maximum is the peak --shardc-ledger predicts.
//
// Times are points a backend marks as the step runs (the host's clock on
// the CPU, events on a stream on a GPU) and resolves once the step has
// completed; the recorder knows neither.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_HOST_TRACE_H
#define SHARDC_RT_HOST_TRACE_H

#include "shardc_rt/shardc_rt.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

struct shardc_rt_context;

namespace shardc::rt {

/// A point in time, recorded by backendTraceMark; an index into the step's
/// marks.
using TraceMark = int32_t;

class Trace {
public:
  /// Starts recording; every rank calls it at once (after a barrier), so
  /// that their times share an origin.
  Trace(const shardc_rt_model &model, int rank);

  /// Microseconds since the origin.
  double since(std::chrono::steady_clock::time_point t) const;

  /// A span on the compute track between two marks, with `args` (members
  /// of a JSON object, or "").
  void span(std::string name, TraceMark begin, TraceMark end,
            std::string args = "");
  /// A collective on the communicator of `axes`, from its start to its
  /// completion; it takes the first lane of that communicator free then.
  void collective(shardc_rt_axes axes, std::string name, TraceMark begin,
                  TraceMark end, std::string args);
  /// The allocator's live bytes from `at` on.
  void liveBytes(TraceMark at, int64_t bytes);
  /// Opens a span on the compute track, closed by the next closeSpan.
  void openSpan(std::string name, TraceMark begin);
  /// Closes the innermost open span; false where none is open.
  bool closeSpan(TraceMark end);

  /// A kernel call, in microseconds since the origin.
  struct Call {
    const char *kernel;
    double begin, end;
  };
  /// Writes the step's spans, counters and `calls` as events, with each
  /// mark's time from `times` (microseconds since the origin, by mark).
  /// Returns false where a span is still open (an emitted step's bug).
  bool finishStep(const std::vector<double> &times,
                  const std::vector<Call> &calls);

  /// This rank's events and its tracks' names, each with a leading comma.
  std::string events(const shardc_rt_context &ctx) const;

  const std::chrono::steady_clock::time_point origin;
  /// The CPU backend's marks of this step: their times.
  std::vector<double> hostMarks;

private:
  struct Span {
    std::string name, args;
    TraceMark begin, end;
    shardc_rt_axes axes; // a collective's
  };
  struct Counter {
    TraceMark at;
    int64_t bytes;
  };
  /// A comm track: a communicator's lane, and when its last span ends.
  struct Lane {
    shardc_rt_axes axes;
    int index;
    double busyUntil;
  };
  void event(const char *phase, int track, const std::string &name, double time,
             const std::string &rest);

  const shardc_rt_model &model;
  int rank;
  std::vector<Span> spans, open, collectives;
  std::vector<Counter> counters;
  std::vector<Lane> lanes; // track i + 1; kept across steps
  std::string text;
};

/// "all_gather", "reduce_scatter" or "all_reduce", and what it carries
/// where that is not "": "all_gather h.0.attn.c_attn.weight".
std::string collectiveName(shardc_rt_collective kind, const char *what);
/// A collective's args in the trace: its elements per rank, dtype, group
/// and the bytes this rank sends (as the ledger counts them), and for an
/// NCCL group the number of its calls.
std::string collectiveArgs(const shardc_rt_context &ctx,
                           shardc_rt_collective kind, shardc_rt_axes axes,
                           shardc_rt_dtype dtype, int64_t count,
                           int32_t calls = 1);

/// Writes every rank's events to `path` on rank 0 (a temporary file renamed
/// over it); returns "" or what went wrong, on rank 0. Every rank calls it.
std::string writeTrace(shardc_rt_context &ctx, const Trace &trace,
                       const std::string &path);

} // namespace shardc::rt

#endif // SHARDC_RT_HOST_TRACE_H
