//===- Trace.cpp - --trace: a timeline of every rank's steps --------------===//

#include "Trace.h"

#include "Context.h"

#include "shardc_rt/SafeTensors.h"

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdio>

namespace shardc::rt {

// Processes and threads count from 1: trace viewers treat pid 0 and tid 0
// as the kernel's idle task.
static int processOf(int rank) { return rank + 1; }
constexpr int kComputeTrack = 1;
static int laneTrack(size_t lane) { return static_cast<int>(lane) + 2; }
/// A time in microseconds to the nanosecond the file is written in.
static int64_t nanoseconds(double micros) { return std::llround(micros * 1e3); }

Trace::Trace(const shardc_rt_model &model, int rank)
    : origin(std::chrono::steady_clock::now()), model(model), rank(rank) {}

double Trace::since(std::chrono::steady_clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin).count();
}

void Trace::span(std::string name, TraceMark begin, TraceMark end,
                 std::string args) {
  spans.push_back({std::move(name), std::move(args), begin, end, 0});
}

void Trace::collective(shardc_rt_axes axes, std::string name, TraceMark begin,
                       TraceMark end, std::string args) {
  collectives.push_back({std::move(name), std::move(args), begin, end, axes});
}

void Trace::liveBytes(TraceMark at, int64_t bytes) {
  counters.push_back({at, bytes});
}

void Trace::openSpan(std::string name, TraceMark begin) {
  open.push_back({std::move(name), "", begin, begin, 0});
}

bool Trace::closeSpan(TraceMark end) {
  if (open.empty())
    return false;
  open.back().end = end;
  spans.push_back(std::move(open.back()));
  open.pop_back();
  return true;
}

void Trace::event(const char *phase, int track, const std::string &name,
                  double time, const std::string &rest) {
  char head[128];
  std::snprintf(head, sizeof head,
                ",\n{\"ph\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f",
                phase, processOf(rank), track, nanoseconds(time) / 1e3);
  text += head;
  text += ", \"name\": " + jsonQuote(name) + rest + "}";
}

bool Trace::finishStep(const std::vector<double> &times,
                       const std::vector<Call> &calls) {
  bool closed = open.empty();
  open.clear();
  // From the endpoints as written (to the nanosecond): spans that touch
  // are written touching.
  auto duration = [](double begin, double end) {
    char d[48];
    std::snprintf(d, sizeof d, ", \"dur\": %.3f",
                  static_cast<double>(std::max<int64_t>(
                      nanoseconds(end) - nanoseconds(begin), 0)) /
                      1e3);
    return std::string(d);
  };
  auto withArgs = [](const std::string &args) {
    return args.empty() ? std::string() : ", \"args\": {" + args + "}";
  };
  for (const Span &s : spans)
    event("X", kComputeTrack, s.name, times[s.begin],
          duration(times[s.begin], times[s.end]) + withArgs(s.args));
  for (const Call &c : calls)
    event("X", kComputeTrack, c.kernel, c.begin, duration(c.begin, c.end));
  // Each collective takes the first lane of its communicator that is free
  // when it starts, in the order they start.
  std::stable_sort(collectives.begin(), collectives.end(),
                   [&](const Span &a, const Span &b) {
                     return times[a.begin] < times[b.begin];
                   });
  for (const Span &c : collectives) {
    double begin = times[c.begin], end = times[c.end];
    auto lane = std::find_if(lanes.begin(), lanes.end(), [&](const Lane &l) {
      return l.axes == c.axes && l.busyUntil <= begin;
    });
    if (lane == lanes.end()) {
      int index = static_cast<int>(
          std::count_if(lanes.begin(), lanes.end(),
                        [&](const Lane &l) { return l.axes == c.axes; }));
      lane = lanes.insert(lanes.end(), {c.axes, index, begin});
    }
    lane->busyUntil = end;
    event("X", laneTrack(lane - lanes.begin()), c.name, begin,
          duration(begin, end) + withArgs(c.args));
  }
  for (const Counter &c : counters)
    event("C", kComputeTrack, "memory", times[c.at],
          ", \"args\": {\"live bytes\": " + std::to_string(c.bytes) + "}");
  spans.clear();
  collectives.clear();
  counters.clear();
  return closed;
}

std::string Trace::events(const shardc_rt_context &ctx) const {
  std::string out;
  auto metadata = [&](const char *what, int track, const std::string &args) {
    out += ",\n{\"ph\": \"M\", \"pid\": " + std::to_string(processOf(rank)) +
           ", \"tid\": " + std::to_string(track) + ", \"name\": \"" + what +
           "\", \"args\": {" + args + "}}";
  };
  std::string coords;
  for (size_t a = 0; a < ctx.coords.size(); ++a)
    coords += (a ? ", " : "") + std::string(model.axis_names[a]) + " " +
              std::to_string(ctx.coords[a]);
  metadata("process_name", kComputeTrack,
           "\"name\": " +
               jsonQuote("rank " + std::to_string(ctx.worldRank) +
                         (coords.empty() ? "" : " (" + coords + ")")));
  metadata("process_sort_index", kComputeTrack,
           "\"sort_index\": " + std::to_string(ctx.worldRank));
  metadata("thread_name", kComputeTrack, "\"name\": \"compute\"");
  for (size_t i = 0; i < lanes.size(); ++i) {
    std::string axes;
    for (int32_t a = 0; a < model.mesh_rank; ++a)
      if (lanes[i].axes & (1u << a))
        axes += (axes.empty() ? "" : "+") + std::string(model.axis_names[a]);
    std::string name = "comm " + axes;
    if (lanes[i].index > 0)
      name += " #" + std::to_string(lanes[i].index + 1);
    // A communicator's lanes together, below the compute track.
    auto before = std::count_if(lanes.begin(), lanes.end(), [&](const Lane &l) {
      return std::make_pair(l.axes, l.index) <
             std::make_pair(lanes[i].axes, lanes[i].index);
    });
    int track = laneTrack(i);
    metadata("thread_name", track, "\"name\": " + jsonQuote(name));
    metadata("thread_sort_index", track,
             "\"sort_index\": " + std::to_string(laneTrack(before)));
  }
  return out + text;
}

std::string collectiveName(shardc_rt_collective kind, const char *what) {
  std::string name = kind == SHARDC_RT_ALL_GATHER       ? "all_gather"
                     : kind == SHARDC_RT_REDUCE_SCATTER ? "reduce_scatter"
                                                        : "all_reduce";
  if (what && *what)
    name += std::string(" ") + what;
  return name;
}

std::string collectiveArgs(const shardc_rt_context &ctx,
                           shardc_rt_collective kind, shardc_rt_axes axes,
                           shardc_rt_dtype dtype, int64_t count,
                           int32_t calls) {
  int64_t group = ctx.groupSize(axes);
  return "\"elements\": " + std::to_string(count) + ", \"dtype\": \"" +
         (dtype == SHARDC_RT_BF16 ? "bf16" : "f32") +
         "\", \"group\": " + std::to_string(group) + ", \"bytes sent\": " +
         std::to_string(bytesSent(kind, group, count, dtype)) +
         (calls > 1 ? ", \"calls\": " + std::to_string(calls) : "");
}

std::string writeTrace(shardc_rt_context &ctx, const Trace &trace,
                       const std::string &path) {
  std::string mine = trace.events(ctx);
  int64_t length = static_cast<int64_t>(mine.size()), total = 0;
  MPI_Reduce(&length, &total, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  int tooLong = ctx.worldRank == 0 && total > INT_MAX;
  MPI_Bcast(&tooLong, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (tooLong)
    return path + ": the ranks' events take " + std::to_string(total) +
           " bytes, more than one file of them can gather (2^31 - 1): trace "
           "fewer steps";
  int mineLength = static_cast<int>(length);
  std::vector<int> lengths(ctx.worldSize), offsets(ctx.worldSize);
  MPI_Gather(&mineLength, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0,
             MPI_COMM_WORLD);
  std::string all;
  if (ctx.worldRank == 0) {
    for (int r = 1; r < ctx.worldSize; ++r)
      offsets[r] = offsets[r - 1] + lengths[r - 1];
    all.resize(static_cast<size_t>(total));
  }
  MPI_Gatherv(mine.data(), mineLength, MPI_CHAR, all.data(), lengths.data(),
              offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (ctx.worldRank != 0)
    return "";
  const shardc_rt_model &m = *ctx.model;
  char other[256];
  std::snprintf(other, sizeof other,
                "\"ranks\": %d, \"predicted_peak_bytes\": %" PRId64,
                ctx.worldSize, m.predicted.peak);
  // Every rank's text starts with its metadata: drop the first comma.
  std::string file = "{\"traceEvents\": [" + all.substr(1) +
                     "\n],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": "
                     "{\"model\": " +
                     jsonQuote(m.name) +
                     ", \"strategy\": " + jsonQuote(m.strategy) + ", " + other +
                     "}}\n";
  return tryWriteFileAtomic(path, file);
}

} // namespace shardc::rt
