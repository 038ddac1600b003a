//===- Main.cpp - The training executable: setup and the step loop --------===//
//
// Every emitted step links this main. It brings MPI up, checks the rank count
// against the compiled mesh, builds one communicator per set of mesh axes,
// initializes or loads this rank's params and optimizer state, runs the steps
// with a line per step, and writes what was asked (export, checkpoint).
//
//===----------------------------------------------------------------------===//

#include "Backend.h"
#include "Context.h"
#include "Flags.h"
#include "GradCheck.h"

#include "shardc_rt/Checkpoint.h"
#include "shardc_rt/Data.h"
#include "shardc_rt/Error.h"
#include "shardc_rt/Init.h"
#include "shardc_rt/SafeTensors.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <sched.h>
#include <set>
#include <stdio_ext.h>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace shardc::rt;

namespace shardc::rt {

/// Where a step's inputs come from: a file, or synthetic data from the seed.
class DataSource {
public:
  std::optional<StepData> steps;
  std::optional<TokenData> tokens;

  /// The distinct batches of `m`'s inputs this source holds before it
  /// wraps around: a file's steps, or a token file's batches (TokenData);
  /// synthetic data never wraps.
  int64_t batchesHeld(const shardc_rt_model &m) const {
    if (steps)
      return steps->file().find(m.inputs[0].name)->shape[0];
    if (!tokens)
      return INT64_MAX;
    return tokens->batchesHeld(m.inputs[0].shape[0]);
  }

  /// A hash of the file's bytes; 0 for synthetic data.
  uint64_t contentHash() const {
    return steps    ? steps->file().contentHash()
           : tokens ? tokens->contentHash()
                    : 0;
  }
};

} // namespace shardc::rt

namespace {

std::string formatBytes(int64_t bytes) {
  char text[32];
  double b = static_cast<double>(bytes);
  if (b >= 1e9)
    std::snprintf(text, sizeof text, "%.2f GB", b / 1e9);
  else if (b >= 1e6)
    std::snprintf(text, sizeof text, "%.2f MB", b / 1e6);
  else if (b >= 1e3)
    std::snprintf(text, sizeof text, "%.2f kB", b / 1e3);
  else
    std::snprintf(text, sizeof text, "%" PRId64 " B", bytes);
  return text;
}

/// A rate of FLOPs, as "12.3 TFLOP/s".
std::string formatFlopRate(double flopsPerSecond) {
  const char *unit = "MFLOP/s";
  double scale = 1e6;
  if (flopsPerSecond >= 1e12)
    unit = "TFLOP/s", scale = 1e12;
  else if (flopsPerSecond >= 1e9)
    unit = "GFLOP/s", scale = 1e9;
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", flopsPerSecond / scale, unit);
  return text;
}

std::vector<int64_t> shapeOf(int32_t rank, const int64_t *shape) {
  return std::vector<int64_t>(shape, shape + rank);
}

void buildCommunicators(shardc_rt_context &ctx) {
  const shardc_rt_model &m = *ctx.model;
  int64_t rest = ctx.worldRank;
  ctx.coords.assign(m.mesh_rank, 0);
  for (int32_t a = m.mesh_rank - 1; a >= 0; --a) {
    ctx.coords[a] = rest % m.mesh_shape[a];
    rest /= m.mesh_shape[a];
  }
  uint32_t all = (1u << m.mesh_rank) - 1;
  ctx.comms.assign(all + 1, MPI_COMM_NULL);
  for (uint32_t axes = 0; axes <= all; ++axes) {
    // Ranks that agree on every axis outside `axes` form one group.
    int color = static_cast<int>(ctx.groupIndex(all & ~axes));
    int key = static_cast<int>(ctx.groupIndex(axes));
    MPI_Comm_split(MPI_COMM_WORLD, color, key, &ctx.comms[axes]);
  }
}

/// offload_optimizer: how the host's updates run (ctx.host). Threads:
/// OMP_NUM_THREADS where set (its first entry, as torch's CPU ops read it),
/// else this node's cores shared among the node's ranks, within this
/// process's affinity. Staging: halves of SHARDC_OFFLOAD_STAGING_KB KiB
/// where set. Collective: every rank checks (and fails) together, whatever
/// its environment.
void setUpHostUpdates(shardc_rt_context &ctx) {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                      &node);
  int ranks = 1;
  MPI_Comm_size(node, &ranks);
  MPI_Comm_free(&node);
  // The node's cores shared among its ranks, and no more than the cores
  // this process may run on (its affinity: mpirun's binding, a scheduler's
  // or a container's limit).
  int64_t shared = std::thread::hardware_concurrency() / ranks;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0)
    shared = std::min<int64_t>(shared, CPU_COUNT(&allowed));
  const char *env = std::getenv("OMP_NUM_THREADS");
  std::string text = env ? env : "";
  char *end = nullptr;
  long threads = std::strtol(text.c_str(), &end, 10);
  bool valid =
      text.empty() || (end != text.c_str() && (*end == '\0' || *end == ',') &&
                       threads >= 1 && threads <= 4096);
  SHARDC_RT_CHECK_ALL(valid, "OMP_NUM_THREADS",
                      "expected a thread count from 1 to 4096, got '" + text +
                          "'");
  ctx.host.threads = text.empty() ? std::max<int64_t>(shared, 1) : threads;
  // The copies of one half overlap the update of the other.
  env = std::getenv("SHARDC_OFFLOAD_STAGING_KB");
  int64_t kib = 0;
  valid = !env || (parseInt(env, kib) && kib >= 1 && kib <= (1 << 30));
  SHARDC_RT_CHECK_ALL(valid, "SHARDC_OFFLOAD_STAGING_KB",
                      std::string("expected KiB from 1 to 2^30, got '") +
                          (env ? env : "") + "'");
  if (env)
    ctx.host.stagingHalfBytes = kib << 10;
}

/// Why a save into `dir`'s step-K checkpoints of steps (first, last], each
/// K-th (--save-every), would fail: a step-K there that is not a directory
/// (a file, a link to nothing), or a directory a save cannot go into (as
/// --save's is checked: its checkpoint.json a directory); "" where none is.
std::string blockedStepCheckpoint(const std::string &dir, int64_t first,
                                  int64_t last, int64_t every) {
  std::string blocked;
  if (DIR *listing = ::opendir(dir.c_str())) {
    while (blocked.empty()) {
      const dirent *entry = ::readdir(listing);
      if (!entry)
        break;
      int64_t step = stepOfCheckpointName(entry->d_name);
      if (step <= first || step > last || step % every != 0)
        continue;
      std::string path = dir + "/" + entry->d_name;
      std::string because =
          "step " + std::to_string(step) + "'s checkpoint would be saved there";
      // A directory (an older checkpoint, through a link too) is saved into.
      struct stat info;
      if (::stat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
        blocked = path + " is not a directory: " + because + " (move it away)";
      else if (std::string why = tryCheckCheckpointDir(path); !why.empty())
        blocked = why + ": " + because;
    }
    ::closedir(listing);
  }
  return blocked;
}

/// --save-keep M: after DIR/step-`saved` was written, removes the
/// DIR/step-K checkpoints of earlier steps but the latest M - 1, as
/// torchtitan's keep_latest_k. A candidate is a directory (not a link)
/// holding a checkpoint.json that reads as shardc's. One of a step after
/// `last`, this run's last, is another run's (one this run rolled back
/// from by resuming an earlier checkpoint, or one it started over from):
/// it is left as it is and said once (`saidLater`); one between is this
/// run's to write again. Rank 0. Returns the names removed; one that
/// cannot be is said on stderr, and the run goes on (its state is saved).
std::vector<std::string> pruneStepCheckpoints(const std::string &dir,
                                              int64_t saved, int64_t last,
                                              int64_t keep, bool &saidLater) {
  std::vector<int64_t> earlier;
  std::string later;
  if (DIR *listing = ::opendir(dir.c_str())) {
    while (const dirent *entry = ::readdir(listing)) {
      std::string name = entry->d_name;
      std::string path = dir + "/" + name;
      int64_t step = stepOfCheckpointName(name);
      struct stat link;
      CheckpointHeader header;
      if (step == 0 || step == saved || ::lstat(path.c_str(), &link) != 0 ||
          !S_ISDIR(link.st_mode) ||
          !tryReadCheckpointHeader(path, header).empty())
        continue;
      if (step < saved)
        earlier.push_back(step);
      else if (step > last)
        later += (later.empty() ? "" : ", ") + name;
    }
    ::closedir(listing);
  }
  if (!later.empty() && !saidLater)
    std::fprintf(stderr,
                 "shardc: rank 0: --save-keep: %s holds checkpoints of steps "
                 "after this run's last (%s), another run's: they are left "
                 "as they are\n",
                 dir.c_str(), later.c_str());
  saidLater = saidLater || !later.empty();
  std::sort(earlier.rbegin(), earlier.rend());
  std::vector<std::string> removed;
  for (size_t i = keep - 1; i < earlier.size(); ++i) {
    std::string name = "step-" + std::to_string(earlier[i]);
    std::string error = tryRemoveCheckpoint(dir + "/" + name);
    if (error.empty())
      removed.push_back(name);
    else
      std::fprintf(stderr,
                   "shardc: rank 0: --save-keep: %s (the run goes on)\n",
                   error.c_str());
  }
  return removed;
}

InitSpec initSpec(const shardc_rt_param_info &info) {
  InitKind kinds[] = {InitKind::Zeros, InitKind::Ones, InitKind::Normal,
                      InitKind::Uniform};
  return {kinds[info.init], info.a, info.b};
}

/// Zeroed state: shard padding stays zero, moments start at zero.
void *allocateZeroed(shardc_rt_context &ctx, int64_t bytes) {
  void *ptr = ctx.allocator.allocate(bytes);
  backendZero(ctx, ptr, bytes);
  return ptr;
}

float *allocateFloats(shardc_rt_context &ctx, int64_t count) {
  return static_cast<float *>(allocateZeroed(ctx, count * 4));
}

/// `bytes` of zeroed host memory (backendAllocateHost), released at
/// tear-down; `option` asked for them, and they hold `what` (for the
/// error).
void *allocateHostZeroed(shardc_rt_context &ctx, int64_t bytes,
                         const char *option, const char *what) {
  // At least a byte: a param of no elements still gets a pointer.
  void *ptr = backendAllocateHost(std::max<int64_t>(bytes, 1));
  SHARDC_RT_CHECK(ptr, option,
                  "out of host memory for " + std::to_string(bytes) +
                      " bytes of " + what);
  std::memset(ptr, 0, bytes);
  ctx.host.blocks.push_back(ptr);
  return ptr;
}

/// Zeroed optimizer state (moments, masters): backend memory, or host
/// memory where the model offloads it.
float *allocateOptimizerState(shardc_rt_context &ctx, int64_t count) {
  if (!ctx.model->offload_optimizer)
    return allocateFloats(ctx, count);
  ctx.host.stateBytes += count * 4;
  return static_cast<float *>(allocateHostZeroed(
      ctx, count * 4, "offload_optimizer", "optimizer state"));
}

/// A zeroed stored value (a param's, or a flat parameter's piece): backend
/// memory, or host memory where the model offloads params.
void *allocateStoredValue(shardc_rt_context &ctx, int64_t bytes) {
  if (!ctx.model->offload_params)
    return allocateZeroed(ctx, bytes);
  ctx.host.paramBytes += bytes;
  return allocateHostZeroed(ctx, bytes, "offload_params", "params");
}

/// Copies `count` elements of state at `data`, of `dtype`, in backend memory
/// or in host memory (`onHost`: offloaded), to or from host floats.
void copyStateOut(float *out, const void *data, shardc_rt_dtype dtype,
                  bool onHost, int64_t count) {
  if (!onHost)
    copyOutFloats(out, data, dtype, count);
  else if (dtype == SHARDC_RT_BF16)
    for (int64_t i = 0; i < count; ++i)
      out[i] = widen(static_cast<const shardc_rt_bf16 *>(data)[i]);
  else
    std::memcpy(out, data, count * 4);
}
void copyStateIn(void *data, shardc_rt_dtype dtype, bool onHost,
                 const float *in, int64_t count) {
  if (!onHost)
    copyInFloats(data, dtype, in, count);
  else if (dtype == SHARDC_RT_BF16)
    for (int64_t i = 0; i < count; ++i)
      static_cast<shardc_rt_bf16 *>(data)[i] = narrow(in[i]);
  else
    std::memcpy(data, in, count * 4);
}

/// A piece of state: a checkpoint Piece whose data points at `dtype`
/// elements in backend memory, or in host memory (`onHost`).
struct StatePiece {
  Piece piece;
  shardc_rt_dtype dtype;
  bool onHost;
};

/// Host copies of state, for files: fill() reads the pieces' data into
/// host floats and points the pieces there; store() writes the host floats
/// back, rounded where the state is bf16.
class HostMirror {
public:
  explicit HostMirror(std::vector<StatePiece> state) : state(std::move(state)) {
    for (StatePiece &s : this->state) {
      host.emplace_back(s.piece.end - s.piece.begin);
      pieces.push_back(s.piece);
      pieces.back().data = host.back().data();
    }
  }
  /// The pieces, pointing at host memory.
  std::vector<Piece> &get() { return pieces; }
  void fill() {
    for (size_t i = 0; i < pieces.size(); ++i)
      copyStateOut(host[i].data(), state[i].piece.data, state[i].dtype,
                   state[i].onHost, host[i].size());
  }
  void store() {
    for (size_t i = 0; i < pieces.size(); ++i)
      copyStateIn(state[i].piece.data, state[i].dtype, state[i].onHost,
                  host[i].data(), host[i].size());
  }

private:
  std::vector<StatePiece> state;
  std::vector<Piece> pieces;
  std::vector<std::vector<float>> host;
};

/// A contiguous part of a param's value this rank holds: elements
/// [begin, end) of param `index`, at `data`, of `dtype`. A BF16 param's
/// value is its f32 master rounded: pieces of both are filled from the
/// same values, and the master's are the ones written to files. A master
/// is in host memory (`onHost`) where the optimizer is offloaded, a stored
/// value where the params are.
struct ValuePiece {
  int32_t index;
  int64_t begin, end;
  void *data;
  shardc_rt_dtype dtype;
  bool writes;
  bool onHost = false;
};

/// Where this rank holds each param's values: its own storage, or its
/// unit's flat parameter, and the master copies.
std::vector<ValuePiece> valuePieces(shardc_rt_context &ctx) {
  std::vector<ValuePiece> pieces;
  bool offloaded = ctx.model->offload_optimizer;
  bool paramsOffloaded = ctx.model->offload_params;
  for (size_t i = 0; i < ctx.params.size(); ++i) {
    ParamState &p = ctx.params[i];
    auto index = static_cast<int32_t>(i);
    // Trainable BF16 params have a master (their own or their flat's).
    bool mastered = p.dtype == SHARDC_RT_BF16 && !p.info->frozen;
    if (p.value)
      pieces.push_back({index, p.stored.begin, p.stored.end, p.value, p.dtype,
                        p.writesStored && !mastered, paramsOffloaded});
    if (p.master)
      pieces.push_back({index, p.optimized.begin, p.optimized.end, p.master,
                        SHARDC_RT_F32, p.writesOptimized, offloaded});
  }
  for (FlatState &f : ctx.flats)
    forEachMemberRange(ctx, f, [&](ParamState &p, int64_t from, int64_t to,
                                   int64_t offset) {
      auto index = static_cast<int32_t>(&p - ctx.params.data());
      if (f.value)
        pieces.push_back({index, from, to, elementAt(f.value, offset, f.dtype),
                          f.dtype, f.writes && !f.master, paramsOffloaded});
      if (f.master)
        pieces.push_back({index, from, to, f.master + offset, SHARDC_RT_F32,
                          f.writes, offloaded});
    });
  return pieces;
}

/// A param's AdamW moments in checkpoints: its name and these.
constexpr const char *kExpAvg = ".exp_avg", *kExpAvgSq = ".exp_avg_sq";

/// The names of the tensors of `ctx`'s model: its params', and with
/// `moments` the AdamW moments a checkpoint may hold for each (a frozen
/// param's too: a checkpoint saved before it was frozen).
std::set<std::string> modelTensorNames(const shardc_rt_context &ctx,
                                       bool moments) {
  std::set<std::string> names;
  for (const ParamState &p : ctx.params) {
    names.insert(p.info->name);
    if (moments) {
      names.insert(std::string(p.info->name) + kExpAvg);
      names.insert(std::string(p.info->name) + kExpAvgSq);
    }
  }
  return names;
}

/// The tensors of a file, `stored`, that the model lacks (`model`), as
/// "'a', 'b' (and N more)", or "" where there is none.
std::string unexpectedTensors(const std::vector<std::string> &stored,
                              const std::set<std::string> &model) {
  std::vector<std::string> unexpected;
  for (const std::string &tensor : stored)
    if (!model.count(tensor))
      unexpected.push_back(tensor);
  return listNames(unexpected, 3);
}

/// Fails every rank whose copy of a file that every rank reads (`flag`'s
/// `path`) differs from rank 0's by its `contentHash`: node-local copies
/// of one file will do; another file, say another shard of a dataset,
/// would not (a step training on a mix of two, replicas starting from
/// other weights). Collective.
void checkSameAsRankZero(uint64_t contentHash, const std::string &flag,
                         const std::string &path) {
  uint64_t first = contentHash;
  MPI_Bcast(&first, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  SHARDC_RT_CHECK_ALL(first == contentHash, flag,
                      path + ": its contents differ from the file rank 0 "
                             "reads: give every rank the same file (or "
                             "copies of it)");
}

void setUpParams(shardc_rt_context &ctx, const Flags &flags) {
  const shardc_rt_model &m = *ctx.model;
  for (int32_t i = 0; i < m.num_params; ++i) {
    const shardc_rt_param_info &info = m.params[i];
    ParamState p;
    p.info = &info;
    p.shape = shapeOf(info.rank, info.shape);
    p.numel = numElements(p.shape);
    p.dtype = info.dtype;
    p.stored = ctx.rangeOf(p.shape, info.storage);
    // ZeRO-1/2 update a shard of a whole param; otherwise the stored part.
    p.optimized = info.optimizer.axes == info.storage.axes
                      ? p.stored
                      : ctx.rangeOf(p.shape, info.optimizer);
    p.writesStored = ctx.firstReplica(info.storage);
    p.writesOptimized = ctx.firstReplica(info.optimizer);
    // A flat parameter holds its members' optimizer state, and their
    // values when it is their storage.
    bool flat = info.flat >= 0;
    if (!flat || !m.flats[info.flat].stores)
      p.value =
          allocateStoredValue(ctx, p.stored.count * elementBytes(p.dtype));
    if (!info.frozen && !flat) {
      p.expAvg = allocateOptimizerState(ctx, p.optimized.count);
      p.expAvgSq = allocateOptimizerState(ctx, p.optimized.count);
      if (p.dtype == SHARDC_RT_BF16)
        p.master = allocateOptimizerState(ctx, p.optimized.count);
    }
    ctx.params.push_back(p);
  }
  for (int32_t g = 0; g < m.num_flats; ++g) {
    FlatState f;
    f.info = &m.flats[g];
    f.dtype = ctx.params[f.info->members[0]].dtype;
    for (int32_t i = 0; i < f.info->num_members; ++i) {
      const ParamState &member = ctx.params[f.info->members[i]];
      SHARDC_RT_CHECK(member.dtype == f.dtype, "flat parameter",
                      std::string("unit '") + f.info->unit +
                          "' mixes dtypes: '" + member.info->name +
                          "' differs from its first member");
      f.offsets.push_back(f.total);
      f.total += member.numel;
    }
    int64_t group = ctx.groupSize(f.info->split.axes);
    f.count = (f.total + group - 1) / group;
    f.begin = ctx.groupIndex(f.info->split.axes) * f.count;
    f.used = std::max<int64_t>(0, std::min(f.count, f.total - f.begin));
    f.writes = ctx.firstReplica(f.info->split);
    if (f.info->stores)
      f.value = allocateStoredValue(ctx, f.count * elementBytes(f.dtype));
    f.expAvg = allocateOptimizerState(ctx, f.count);
    f.expAvgSq = allocateOptimizerState(ctx, f.count);
    if (f.dtype == SHARDC_RT_BF16)
      f.master = allocateOptimizerState(ctx, f.count);
    ctx.flats.push_back(f);
  }

  // Values: the same full tensors whatever the strategy and rank count.
  std::optional<SafeTensorsFile> init;
  if (!flags.init.empty()) {
    SafeTensorsFile file;
    std::string error = SafeTensorsFile::tryOpen(flags.init, "--init", file);
    SHARDC_RT_CHECK_ALL(error.empty(), "--init", error);
    // Replicas, and a param's shards, start from the same weights.
    checkSameAsRankZero(file.contentHash(), "--init", flags.init);
    init = std::move(file);
  }
  std::string error;
  for (const ValuePiece &piece : valuePieces(ctx)) {
    const ParamState &p = ctx.params[piece.index];
    std::vector<float> host(piece.end - piece.begin);
    if (!init)
      initRange(initSpec(*p.info), ctx.seed, p.info->name, piece.begin,
                piece.end, host.data());
    else if (error.empty())
      error = tryReadF32(*init, p.info->name, p.shape, piece.begin, piece.end,
                         host.data());
    if (init && error.empty()) {
      NonFinite bad =
          findNonFinite(host.data(), static_cast<int64_t>(host.size()));
      if (bad.index >= 0)
        error = flags.init + ": tensor '" + p.info->name + "' element " +
                std::to_string(piece.begin + bad.index) + " is " + bad.name +
                ": the weights to start from must be finite";
    }
    copyStateIn(piece.data, piece.dtype, piece.onHost, host.data(),
                host.size());
  }
  SHARDC_RT_CHECK_ALL(error.empty(), "--init", error);
  // --init starts a run from weights, such as a file of another framework's
  // that holds more (buffers, a separate head): what it does not read is
  // said, not refused.
  std::string unread =
      init ? unexpectedTensors(init->names(), modelTensorNames(ctx, false))
           : "";
  if (!unread.empty() && ctx.worldRank == 0)
    std::fprintf(stderr,
                 "shardc: rank 0: --init: %s holds tensors @%s does not "
                 "have, which it ignores: %s\n",
                 flags.init.c_str(), ctx.model->name, unread.c_str());
}

/// Every piece of state this rank holds, for checkpoints.
std::vector<StatePiece> statePieces(shardc_rt_context &ctx) {
  std::vector<StatePiece> pieces;
  for (const ValuePiece &v : valuePieces(ctx)) {
    ParamState &p = ctx.params[v.index];
    // Checkpoint pieces point at floats; HostMirror converts.
    pieces.push_back({{p.info->name, p.shape, v.begin, v.end,
                       static_cast<float *>(v.data), v.writes},
                      v.dtype,
                      v.onHost});
  }
  bool offloaded = ctx.model->offload_optimizer;
  auto moments = [&](ParamState &p, int64_t begin, int64_t end, float *expAvg,
                     float *expAvgSq, bool writes) {
    std::string name = p.info->name;
    pieces.push_back({{name + kExpAvg, p.shape, begin, end, expAvg, writes},
                      SHARDC_RT_F32,
                      offloaded});
    pieces.push_back({{name + kExpAvgSq, p.shape, begin, end, expAvgSq, writes},
                      SHARDC_RT_F32,
                      offloaded});
  };
  for (ParamState &p : ctx.params)
    if (p.expAvg)
      moments(p, p.optimized.begin, p.optimized.end, p.expAvg, p.expAvgSq,
              p.writesOptimized);
  for (FlatState &f : ctx.flats)
    forEachMemberRange(ctx, f, [&](ParamState &p, int64_t from, int64_t to,
                                   int64_t at) {
      moments(p, from, to, f.expAvg + at, f.expAvgSq + at, f.writes);
    });
  return pieces;
}

/// Whether `m` takes llm.c's tokens: two integer inputs [B, T], tokens then
/// targets (a GPT).
bool isTokenModel(const shardc_rt_model &m) {
  bool gpt = m.num_inputs == 2;
  for (int32_t i = 0; i < m.num_inputs && gpt; ++i)
    gpt = m.inputs[i].dtype == SHARDC_RT_I32 && m.inputs[i].rank == 2 &&
          m.inputs[i].shape[1] == m.inputs[0].shape[1];
  return gpt;
}

/// The bound of a token model's tokens. A token is an input and, a
/// position later, a target: it lies below both bounds (a padded embedding
/// has more rows than the loss has classes).
int64_t tokenBound(const shardc_rt_model &m) {
  return std::min(m.inputs[0].bound, m.inputs[1].bound);
}

/// Opens --log-json's `path` for writing, emptied: a regular file, or a
/// pipe or FIFO that a process reads (the log streams to it line by line).
/// A FIFO that no process reads is refused at once rather than waited on:
/// rank 0 would block in the open, the other ranks in their first
/// collective; where the reader goes later, the log fails as on a full
/// disk. Null, with `error` set, where it cannot be opened.
std::FILE *openLog(const std::string &path, std::string &error) {
  // O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of blocking;
  // cleared once open, so that a slow reader slows the log, not loses it.
  int fd = ::open(path.c_str(),
                  O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0666);
  int status = fd < 0 ? -1 : ::fcntl(fd, F_GETFL);
  std::FILE *log = nullptr;
  if (status >= 0 && ::fcntl(fd, F_SETFL, status & ~O_NONBLOCK) == 0)
    log = ::fdopen(fd, "w");
  if (log)
    return log;
  int reason = errno;
  struct stat info;
  bool fifo = ::stat(path.c_str(), &info) == 0 && S_ISFIFO(info.st_mode);
  error = path + ": " +
          (reason == ENXIO && fifo
               ? std::string("a FIFO that no process reads (start its reader "
                             "first)")
               : std::string(std::strerror(reason)));
  if (fd >= 0)
    ::close(fd);
  return nullptr;
}

/// The batches in `path` (--data, --eval-data): a token file (FILE.bin, or
/// one by its magic number), a
/// safetensors file of steps, or synthetic ones from the seed where `path`
/// is empty. Every rank checks every input now, rather than one rank
/// failing alone in the step that first reads a bad one, and that its file
/// is rank 0's (checkSameAsRankZero).
std::unique_ptr<DataSource> openData(const shardc_rt_model &m,
                                     const std::string &path,
                                     const std::string &flag) {
  auto source = std::make_unique<DataSource>();
  if (path.empty())
    return source;
  std::string error;
  if (TokenData::isTokenFile(path)) {
    if (!isTokenModel(m)) {
      error = path +
              ": a token file feeds a model with two integer "
              "inputs [B, T] (tokens, targets); @" +
              std::string(m.name) + " has other inputs";
    } else {
      TokenData data;
      error =
          TokenData::tryOpen(path, m.inputs[0].shape[0], m.inputs[0].shape[1],
                             tokenBound(m), flag, data);
      if (error.empty())
        source->tokens = std::move(data);
    }
  } else {
    StepData data;
    error = StepData::tryOpen(path, flag, data);
    for (int32_t i = 0; i < m.num_inputs && error.empty(); ++i)
      error = data.tryCheckInput(
          m.inputs[i].name, shapeOf(m.inputs[i].rank, m.inputs[i].shape),
          m.inputs[i].dtype == SHARDC_RT_I32, m.inputs[i].bound);
    // Step s reads step s (mod steps) of every input: they must agree on
    // the steps, or a step would pair one input's examples with another's.
    for (int32_t i = 1; i < m.num_inputs && error.empty(); ++i) {
      int64_t first = data.file().find(m.inputs[0].name)->shape[0];
      int64_t steps = data.file().find(m.inputs[i].name)->shape[0];
      if (steps != first)
        error = path + ": tensor '" + m.inputs[i].name + "' has " +
                std::to_string(steps) + " steps and '" + m.inputs[0].name +
                "' " + std::to_string(first) +
                ": every input needs the same number of steps (dimension 0)";
    }
    if (error.empty())
      source->steps = std::move(data);
  }
  SHARDC_RT_CHECK_ALL(error.empty(), flag, error);
  // Every rank reads its rows of the same global batches.
  checkSameAsRankZero(source->contentHash(), flag, path);
  return source;
}

/// Gathers each param's full value on rank 0 and writes them in one file.
void exportParams(shardc_rt_context &ctx, const std::string &path) {
  std::vector<std::vector<ValuePiece>> piecesOf(ctx.params.size());
  for (const ValuePiece &piece : valuePieces(ctx))
    if (piece.writes)
      piecesOf[piece.index].push_back(piece);
  std::vector<std::vector<float>> full(ctx.params.size());
  for (size_t i = 0; i < ctx.params.size(); ++i) {
    ParamState &p = ctx.params[i];
    std::vector<float> mine(p.numel, 0.0f);
    for (const ValuePiece &piece : piecesOf[i])
      copyStateOut(mine.data() + piece.begin, piece.data, piece.dtype,
                   piece.onHost, piece.end - piece.begin);
    if (ctx.worldRank == 0)
      full[i].assign(p.numel, 0.0f);
    // Each element is written by exactly one rank; the others add zeros.
    MPI_Reduce(mine.data(), ctx.worldRank == 0 ? full[i].data() : nullptr,
               static_cast<int>(p.numel), MPI_FLOAT, MPI_SUM, 0,
               MPI_COMM_WORLD);
  }
  std::string error;
  if (ctx.worldRank == 0) {
    std::vector<NamedTensor> tensors;
    for (size_t i = 0; i < ctx.params.size(); ++i)
      tensors.push_back(
          {ctx.params[i].info->name, "F32", ctx.params[i].shape, full[i].data()});
    error = tryWriteSafeTensors(path, tensors,
                                {{"model", ctx.model->name},
                                 {"step", std::to_string(ctx.step)}});
  }
  SHARDC_RT_CHECK_ALL(error.empty(), "--export", error);
}

std::map<std::string, std::string> checkpointMetadata(shardc_rt_context &ctx) {
  return {{"model", ctx.model->name},
          {"strategy", ctx.model->strategy},
          {"world", std::to_string(ctx.worldSize)},
          {"step", std::to_string(ctx.step)},
          {"seed", std::to_string(ctx.seed)}};
}

/// Loads --load's checkpoint into `ctx`'s state and step, and its seed
/// unless --seed was given, so that synthetic batches go on as in the run
/// that saved it.
void loadState(shardc_rt_context &ctx, const std::string &dir, bool seedGiven) {
  CheckpointHeader header;
  std::map<std::string, std::string> &meta = header.metadata;
  // The model before any tensor: another model's checkpoint would otherwise
  // fail on its first tensor name, which hides the cause.
  std::string error = tryReadCheckpointHeader(dir, header);
  // Every rank reads rank 0's save (ranks given different directories
  // would each load a part of another model).
  // A save's id is 16 hex digits (compared as far as that on an edited
  // one); "" where rank 0 failed.
  char first[17] = {0};
  if (ctx.worldRank == 0 && error.empty())
    std::snprintf(first, sizeof(first), "%s", header.id.c_str());
  MPI_Bcast(first, sizeof(first), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (error.empty() && first[0] && ctx.worldRank != 0 &&
      header.id.compare(0, sizeof(first) - 1, first) != 0)
    error = dir + ": not the save rank 0 reads (checkpoint id " + header.id +
            ", rank 0's " + first +
            "): give every rank the same --load directory";
  int64_t step = 0, seed = -1;
  if (error.empty()) {
    auto model = meta.find("model");
    std::string unexpected;
    if (model == meta.end() || model->second != ctx.model->name)
      error =
          dir + ": a checkpoint of @" +
          (model == meta.end() ? std::string("?") : printable(model->second)) +
          ", not of @" + ctx.model->name;
    else if (!parseInt(meta["step"].c_str(), step) || step < 0)
      error = dir + ": bad step '" + printable(meta["step"]) +
              "' in checkpoint.json";
    // A resumed run is the run it continues: a checkpoint of another
    // version of the model (a layer more) is refused, as torch's strict
    // load_state_dict refuses unexpected keys.
    else if (!(unexpected = unexpectedTensors(header.tensors,
                                              modelTensorNames(ctx, true)))
                  .empty())
      error = dir + ": holds tensors that @" + ctx.model->name +
              " does not have: " + unexpected +
              " (a checkpoint of another version of the model?)";
    else if (meta.count("seed") &&
             (!parseInt(meta["seed"].c_str(), seed) || seed < 0))
      error = dir + ": bad seed '" + printable(meta["seed"]) +
              "' in checkpoint.json";
  }
  HostMirror state(statePieces(ctx));
  if (error.empty())
    error = tryLoadCheckpoint(header, state.get());
  // A save of a run gone to NaN resumes to "loss nan": refused, as --init
  // refuses such weights, naming the first such element.
  for (const Piece &piece : state.get()) {
    if (!error.empty())
      break;
    NonFinite bad = findNonFinite(piece.data, piece.end - piece.begin);
    if (bad.index >= 0)
      error = dir + ": tensor '" + piece.tensor + "' element " +
              std::to_string(piece.begin + bad.index) + " is " + bad.name +
              " (a save of a run that diverged?): resume from an earlier "
              "checkpoint";
  }
  SHARDC_RT_CHECK_ALL(error.empty(), "--load", error);
  state.store();
  ctx.step = step;
  if (!seedGiven && seed >= 0)
    ctx.seed = static_cast<uint64_t>(seed);
}

/// Rank 0's time in the steps --profile times, and the parts of it that
/// are not kernels'.
struct ProfiledTime {
  double steps = 0;
  double waits = 0;       // Timers::commWaitSeconds
  double hostUpdates = 0; // Timers::hostUpdateSeconds
};

/// --profile's table: each kernel's calls and time per step on rank 0
/// (wall time on the CPU, GPU time between events on a GPU), against the
/// steps' time; the time blocked waiting for collectives (the host
/// target; a GPU's compute stream waits on events instead) and the
/// offloaded optimizer's AdamW on the host; the rest is the runtime,
/// copies and launch gaps.
void printProfile(const std::vector<shardc_rt_kernel_time> &times,
                  int64_t steps, const ProfiledTime &profiled) {
  double stepSeconds = profiled.steps;
  std::vector<shardc_rt_kernel_time> sorted = times;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto &a, const auto &b) { return a.seconds > b.seconds; });
  double perStep = stepSeconds / static_cast<double>(steps), kernels = 0;
  std::printf("profile: %" PRId64 " steps after the first, %.3f ms per step "
              "on rank 0\n  %-28s %10s %10s %7s\n",
              steps, perStep * 1e3, "kernel", "calls/step", "ms/step",
              "share");
  for (const shardc_rt_kernel_time &t : sorted) {
    double ms = t.seconds / static_cast<double>(steps) * 1e3;
    kernels += t.seconds;
    std::printf("  %-28s %10.1f %10.3f %6.1f%%\n", t.kernel,
                static_cast<double>(t.calls) / static_cast<double>(steps), ms,
                100.0 * t.seconds / stepSeconds);
  }
  // A row of time that is no kernel's.
  auto other = [&](const char *what, double seconds) {
    std::printf("  %-28s %10s %10.3f %6.1f%%\n", what, "",
                seconds / static_cast<double>(steps) * 1e3,
                100.0 * seconds / stepSeconds);
  };
  if (profiled.waits > 0)
    other("(blocked in MPI waits)", profiled.waits);
  if (profiled.hostUpdates > 0)
    other("(AdamW on the host)", profiled.hostUpdates);
  other("(the rest)",
        stepSeconds - kernels - profiled.waits - profiled.hostUpdates);
}

/// Everything a step (or an evaluation step) allocated, it freed, and every
/// collective it started it waited on: the schedule is complete.
void checkComplete(shardc_rt_context &ctx, int64_t persistent,
                   const char *what) {
  SHARDC_RT_CHECK(ctx.pending.empty(), what,
                  std::to_string(ctx.pending.size()) +
                      " collectives started and never waited on");
  SHARDC_RT_CHECK(ctx.allocator.liveBytes() == persistent, what,
                  std::string("the ") + what + " ended holding " +
                      std::to_string(ctx.allocator.liveBytes() - persistent) +
                      " bytes it allocated");
}

/// What one call of the step or the evaluation step gives.
struct Ran {
  float loss;
  double seconds; // from starting the call to its last kernel's end
};

/// Calls `function` (the model's step or evaluation step) once, and checks
/// it complete (`what` it is). With `trace`, the call is the span `span` on
/// the timeline, around every kernel call it made.
Ran runOnce(shardc_rt_context &ctx,
            void (*function)(shardc_rt_context *, float *), int64_t persistent,
            const char *what, Trace *trace, const std::string &span) {
  ctx.trace = trace;
  backendStartStep(ctx);
  auto started = std::chrono::steady_clock::now();
  float loss = 0.0f;
  TraceMark begins = trace ? backendTraceMark(ctx) : 0;
  function(&ctx, &loss);
  TraceMark ends = trace ? backendTraceMark(ctx) : 0;
  backendFinishStep(ctx);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  checkComplete(ctx, persistent, what);
  if (trace) {
    trace->span(span, begins, ends);
    // The calls first: on a GPU they are timed from the call's first mark,
    // which resolving the marks releases.
    std::vector<Trace::Call> calls = backendKernelCalls(ctx);
    SHARDC_RT_CHECK(trace->finishStep(backendTraceTimes(ctx), calls), what,
                    std::string("a region of the ") + what +
                        " was never ended");
    ctx.trace = nullptr; // nothing between calls is marked
  }
  return {loss, seconds};
}

/// What --eval-every reports.
struct Evaluation {
  float loss;     // the mean over the batches
  double seconds; // of all the batches, on rank 0
  int64_t peak;   // the most bytes a rank held
};

/// The evaluation step over batches [0, batches) of `source`: the loss
/// without an update, every batch's averaged over the ranks as the step's
/// is. Untimed by --profile, traced where `trace` is set (a span per
/// batch), and leaving the training data where it was.
Evaluation evaluate(shardc_rt_context &ctx, DataSource &source, int64_t batches,
                    int64_t persistent, Trace *trace) {
  DataSource *training = ctx.data;
  // The step's comm timers stay the step's.
  Timers stepTimers = ctx.timers;
  ctx.data = &source;
  ctx.tokenWindowBatch = -1;
  backendKernelTimesEnable(ctx, false);
  backendKernelCallsEnable(ctx, trace != nullptr);
  ctx.allocator.resetPeak();
  double sum = 0;
  auto started = std::chrono::steady_clock::now();
  for (int64_t b = 0; b < batches; ++b) {
    ctx.batch = b;
    sum +=
        runOnce(ctx, ctx.model->eval_step, persistent, "evaluation step", trace,
                "eval at step " + std::to_string(ctx.step) + " batch " +
                    std::to_string(b))
            .loss;
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  ctx.data = training;
  ctx.tokenWindowBatch = -1;
  ctx.timers = stepTimers;
  int64_t peak = ctx.allocator.peakBytes();
  MPI_Allreduce(MPI_IN_PLACE, &peak, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  return {static_cast<float>(sum / static_cast<double>(batches)), seconds,
          peak};
}

} // namespace

extern "C" {

void *shardc_rt_input(shardc_rt_context *ctx, int32_t index) {
  const shardc_rt_model &m = *ctx->model;
  SHARDC_RT_CHECK(index >= 0 && index < m.num_inputs, "shardc_rt_input",
                  "no input " + std::to_string(index));
  const shardc_rt_input_info &info = m.inputs[index];
  // --trace: reading the rows, and copying them where the step reads them.
  TraceMark reading = ctx->trace ? backendTraceMark(*ctx) : 0;
  std::vector<int64_t> shape = shapeOf(info.rank, info.shape);
  int64_t globalRows = shape[0], rows = globalRows / ctx->worldSize;
  int64_t rowSize = numElements(shape) / globalRows;
  int64_t first = ctx->worldRank * rows;
  // Read on the host, copied to backend memory; the staging buffer lives
  // until the step ends.
  if (ctx->inputStaging.size() < static_cast<size_t>(m.num_inputs))
    ctx->inputStaging.resize(m.num_inputs);
  std::vector<int32_t> &staging = ctx->inputStaging[index];
  try {
    staging.resize(rows * rowSize);
  } catch (const std::bad_alloc &) {
    SHARDC_RT_FAIL("shardc_rt_input",
                   std::string("out of host memory reading input '") +
                       info.name + "': " + std::to_string(rows) + " rows of " +
                       std::to_string(rowSize) + " elements on this rank (" +
                       std::to_string(rows * rowSize * 4) + " bytes)");
  }
  void *out = staging.data();
  int64_t batch = ctx->batch;
  if (ctx->data->tokens) {
    // Both inputs (tokens, targets) come from one window: the step's first
    // call reads both, the second finds its half staged.
    if (ctx->tokenWindowBatch != batch) {
      ctx->inputStaging[1 - index].resize(rows * rowSize);
      ctx->data->tokens->read(batch, globalRows, first, first + rows,
                              ctx->inputStaging[0].data(),
                              ctx->inputStaging[1].data());
      ctx->tokenWindowBatch = batch;
    }
  } else if (ctx->data->steps) {
    if (info.dtype == SHARDC_RT_I32)
      ctx->data->steps->readInts(info.name, shape, batch, first, first + rows,
                                 static_cast<int32_t *>(out));
    else
      ctx->data->steps->readFloats(info.name, shape, batch, first, first + rows,
                                   static_cast<float *>(out));
  } else if (info.dtype == SHARDC_RT_I32) {
    // Synthetic tokens lie below the vocabulary, as real ones do.
    syntheticInts(ctx->seed, info.name, batch, first * rowSize,
                  (first + rows) * rowSize,
                  isTokenModel(m) ? tokenBound(m) : info.bound,
                  static_cast<int32_t *>(out));
  } else {
    syntheticFloats(ctx->seed, info.name, batch, first * rowSize,
                    (first + rows) * rowSize, static_cast<float *>(out));
  }
  int64_t bytes = rows * rowSize * elementBytes(info.dtype);
  if (info.dtype == SHARDC_RT_BF16) {
    // Rounded in place: element i's two bytes land before float i + 1.
    char *base = static_cast<char *>(out);
    for (int64_t i = 0; i < rows * rowSize; ++i) {
      float f;
      std::memcpy(&f, base + 4 * i, 4);
      shardc_rt_bf16 h = narrow(f);
      std::memcpy(base + 2 * i, &h, 2);
    }
  }
  void *buffer = shardc_rt_alloc(ctx, bytes);
  backendCopyInput(*ctx, buffer, out, bytes);
  if (ctx->trace)
    ctx->trace->span(std::string("input ") + info.name, reading,
                     backendTraceMark(*ctx));
  return buffer;
}

void shardc_rt_bad_index(shardc_rt_context *ctx, const char *op,
                         int64_t position) {
  (void)ctx;
  SHARDC_RT_FAIL(
      op,
      "index at position " + std::to_string(position) +
          " is out of range (check --data or --eval-data against the model)");
}

static int runMain(int argc, char **argv, const shardc_rt_model *model) {
  // A write past a file size limit (ulimit -f) fails with EFBIG, which the
  // writer reports with the file, rather than killing the rank.
  std::signal(SIGXFSZ, SIG_IGN);
  MPI_Init(&argc, &argv);
  shardc_rt_context ctx;
  ctx.model = model;
  MPI_Comm_rank(MPI_COMM_WORLD, &ctx.worldRank);
  MPI_Comm_size(MPI_COMM_WORLD, &ctx.worldSize);
  int64_t meshRanks = 1;
  std::string mesh, axes;
  for (int32_t a = 0; a < model->mesh_rank; ++a) {
    meshRanks *= model->mesh_shape[a];
    mesh += (a ? "x" : "") + std::to_string(model->mesh_shape[a]);
    axes += (a ? " x " : "") + std::string(model->axis_names[a]);
  }
  // The axes of a mesh of several: 2x2 is hsdp's (replicate x shard) or a
  // shard axis cut by reshard-after-forward (node x local).
  if (model->mesh_rank > 1)
    mesh += " (" + axes + ")";
  Flags flags = parseFlags(argc, argv, *model, static_cast<int>(meshRanks));
  checkRanksAgree(flags, *model);
  // A rebuild for the ranks it runs on is advice only where the global
  // batch divides over them and each rank's over the micro-batches (the
  // pipeline refuses it otherwise).
  std::string world = std::to_string(ctx.worldSize);
  int64_t batch = model->num_inputs > 0 && model->inputs[0].rank > 0
                      ? model->inputs[0].shape[0]
                      : 0;
  int64_t microbatches = std::max<int64_t>(model->microbatches, 1);
  std::string rebuild =
      batch % (ctx.worldSize * microbatches) != 0
          ? "; its global batch of " + std::to_string(batch) +
                " does not divide over " + countOf(ctx.worldSize, "rank") +
                (microbatches > 1 ? " times " + std::to_string(microbatches) +
                                        " micro-batches"
                                  : "")
      : model->mesh_rank > 1
          ? ", or rebuild for " + countOf(ctx.worldSize, "rank")
          : ", or rebuild with --mesh " + world;
  SHARDC_RT_CHECK_ALL(ctx.worldSize == meshRanks, "startup",
                      "this executable was compiled for mesh " + mesh + " (" +
                          countOf(meshRanks, "rank") + ") but runs on " +
                          world + ": use mpirun -np " +
                          std::to_string(meshRanks) + rebuild);
  // Rank 0 writes the export after the last step: find out now.
  std::string exportError = flags.exportPath.empty() || ctx.worldRank != 0
                                ? ""
                                : tryCheckWritable(flags.exportPath);
  SHARDC_RT_CHECK_ALL(exportError.empty(), "--export", exportError);
  std::string traceError = flags.trace.empty() || ctx.worldRank != 0
                               ? ""
                               : tryCheckWritable(flags.trace);
  SHARDC_RT_CHECK_ALL(traceError.empty(), "--trace", traceError);
  // Every rank writes its piece of a checkpoint: each finds out now.
  std::string saveError =
      flags.save.empty() ? "" : tryCheckCheckpointDir(flags.save);
  SHARDC_RT_CHECK_ALL(saveError.empty(), "--save", saveError);
  ctx.seed = flags.seed;
  buildCommunicators(ctx);
  // Params in host memory are read only by gathers (zero3's, hsdp's) and
  // written only by the host's updates: the other strategies' paths
  // treat a stored value as backend memory.
  std::string strategy = model->strategy;
  SHARDC_RT_CHECK(
      !model->offload_params || (model->offload_optimizer &&
                                 (strategy == "zero3" || strategy == "hsdp")),
      "offload_params",
      "needs offload_optimizer and strategy zero3 or hsdp, got " + strategy +
          (model->offload_optimizer ? "" : " without offload_optimizer"));
  if (model->offload_optimizer)
    setUpHostUpdates(ctx);
  backendSetUp(ctx);
  if (model->max_grad_norm > 0) {
    ctx.gradNorm = static_cast<float *>(backendAllocate(sizeof(float)));
    SHARDC_RT_CHECK(ctx.gradNorm, "set-up",
                    "out of memory for the gradient norm");
    backendZero(ctx, ctx.gradNorm, sizeof(float));
  }
  // What backendSetUp and the line above acquired.
  auto tearDown = [&] {
    if (ctx.gradNorm)
      backendRelease(ctx.gradNorm);
    for (void *block : ctx.host.blocks)
      backendReleaseHost(block);
    backendReleaseHost(ctx.host.staging);
    backendTearDown(ctx);
  };
  setUpParams(ctx, flags);
  std::unique_ptr<DataSource> data = openData(*model, flags.data, "--data");
  ctx.data = data.get();
  // --eval-every without --eval-data evaluates the training data's first
  // batches.
  std::unique_ptr<DataSource> evalData =
      flags.evalData.empty() ? nullptr
                             : openData(*model, flags.evalData, "--eval-data");
  if (!flags.load.empty())
    loadState(ctx, flags.load, flags.seedGiven);
  SHARDC_RT_CHECK_ALL(ctx.step <= INT64_MAX - flags.steps, "--steps",
                      countOf(flags.steps, "step") + " after step " +
                          std::to_string(ctx.step) + " of " + flags.load +
                          " pass the largest step count, 2^63 - 1");
  // Given --trace-steps, one of this run's steps (after --load's) is traced.
  bool traceStepsGiven = flags.traceFirst != 1 || flags.traceLast != INT64_MAX;
  SHARDC_RT_CHECK_ALL(
      !traceStepsGiven || flags.checkGrads > 0 ||
          (flags.traceFirst <= ctx.step + flags.steps &&
           flags.traceLast > ctx.step),
      "flags",
      "--trace-steps " + std::to_string(flags.traceFirst) + ":" +
          std::to_string(flags.traceLast) + " traces none of this run's " +
          (flags.steps == 0 ? std::string("0 steps")
                            : "steps " + std::to_string(ctx.step + 1) + " to " +
                                  std::to_string(ctx.step + flags.steps)));
  // A file of fewer batches than the run's steps is read again, wrapping
  // around as llm.c's loader does: said once, not silently.
  int64_t held = data->batchesHeld(*model);
  if (ctx.worldRank == 0 && flags.checkGrads == 0 && flags.steps > 0 &&
      ctx.step + flags.steps > held)
    std::fprintf(stderr,
                 "shardc: rank 0: --data: %s holds %" PRId64
                 " batch%s: the steps after step %" PRId64
                 " read it again, wrapping around\n",
                 flags.data.c_str(), held, held == 1 ? "" : "es", held);
  if (flags.checkGrads > 0) {
    int rc = checkGradients(ctx, flags.checkGrads);
    tearDown();
    MPI_Finalize();
    return rc;
  }

  // A DIR/step-K this run saves into: found now, not at step K.
  std::string stepDirError =
      flags.saveEvery > 0
          ? blockedStepCheckpoint(flags.save, ctx.step, ctx.step + flags.steps,
                                  flags.saveEvery)
          : "";
  SHARDC_RT_CHECK_ALL(stepDirError.empty(), "--save-every", stepDirError);
  // --eval-every: the evaluation step's loss, before the first step, after
  // every K-th (counted across --load) and after the last; rank 0 says it.
  DataSource &evalSource = evalData ? *evalData : *data;
  // A mean over batches read twice would weigh some twice: a source
  // holding fewer than --eval-batches is evaluated once over. Every rank
  // evaluates as many batches (each is a collective step): their files
  // are copies of one (openData).
  const std::string &evalPath =
      flags.evalData.empty() ? flags.data : flags.evalData;
  int64_t evalBatches =
      std::min(flags.evalBatches, evalSource.batchesHeld(*model));
  std::FILE *log = nullptr;
  std::string logOpenError;
  if (!flags.logJson.empty() && ctx.worldRank == 0)
    log = openLog(flags.logJson, logOpenError);
  SHARDC_RT_CHECK_ALL(logOpenError.empty(), "--log-json", logOpenError);

  const shardc_rt_prediction &predicted = model->predicted;
  int64_t persistent = ctx.allocator.liveBytes();
  // What stays in backend memory between steps: the params and the
  // optimizer state, but what is offloaded to the host.
  bool offloaded = model->offload_optimizer;
  bool paramsOffloaded = model->offload_params;
  int64_t predictedPersistent = (paramsOffloaded ? 0 : predicted.params) +
                                (offloaded ? 0 : predicted.optimizer);
  int64_t hostBytes = ctx.host.stateBytes + ctx.host.paramBytes;
  int64_t predictedHostBytes = (offloaded ? predicted.optimizer : 0) +
                               (paramsOffloaded ? predicted.params : 0);
  if (ctx.worldRank == 0 && !flags.quiet) {
    std::printf("@%s: %s over %s, %s; per rank: %s "
                "%s (predicted %s), ",
                model->name, model->strategy,
                countOf(ctx.worldSize, "rank").c_str(),
                countOf(flags.steps, "step").c_str(),
                paramsOffloaded ? "device state"
                : offloaded     ? "params"
                                : "params + optimizer",
                formatBytes(persistent).c_str(),
                formatBytes(predictedPersistent).c_str());
    if (offloaded)
      std::printf("%s in host memory %s (predicted %s, updated on "
                  "%" PRId64 " thread%s), ",
                  paramsOffloaded ? "params + optimizer" : "optimizer",
                  formatBytes(hostBytes).c_str(),
                  formatBytes(predictedHostBytes).c_str(), ctx.host.threads,
                  ctx.host.threads == 1 ? "" : "s");
    std::printf("predicted peak %s\n", formatBytes(predicted.peak).c_str());
  }
  // --profile times the steps after the first (which sizes workspaces).
  ProfiledTime profiled;
  // Rank 0's failure to write --log-json (a full disk): said at once, then
  // the run goes on without the log, saves and exports what it trained,
  // and exits 1 at the end, on every rank.
  // The log keeps whole lines: a line cut short by the failed write is
  // cut off a regular file (logEnd: where its last whole line ends), so
  // that every line parses.
  std::string logError;
  struct stat logInfo;
  off_t logEnd =
      log && ::fstat(::fileno(log), &logInfo) == 0 && S_ISREG(logInfo.st_mode)
          ? 0
          : -1;
  // A pipe's reader may go: the write then fails (EPIPE) as a full disk's
  // does, rather than SIGPIPE killing rank 0.
  if (log && logEnd < 0)
    std::signal(SIGPIPE, SIG_IGN);
  auto endLogLine = [&] {
    if (std::fflush(log) == 0 && !std::ferror(log)) {
      if (logEnd >= 0)
        logEnd = ::lseek(::fileno(log), 0, SEEK_CUR);
      return;
    }
    logError = flags.logJson + ": cannot write: " + std::strerror(errno);
    // The line's unwritten rest is dropped, not flushed by fclose after
    // the cut (into the room the cut made).
    __fpurge(log);
    if (logEnd >= 0 && ::ftruncate(::fileno(log), logEnd) != 0)
      logError += std::string(" (its last line is left cut short: ") +
                  std::strerror(errno) + ")";
    std::fprintf(stderr,
                 "shardc: rank 0: --log-json: %s (the run goes on "
                 "without it, and exits 1 at the end)\n",
                 logError.c_str());
    std::fclose(log);
    log = nullptr;
  };
  // --trace: every rank's clock starts here, at once.
  std::unique_ptr<Trace> trace;
  if (!flags.trace.empty()) {
    MPI_Barrier(MPI_COMM_WORLD);
    trace = std::make_unique<Trace>(*model, ctx.worldRank);
  }
  // A checkpoint of the state as it is now (after ctx.step steps) in `dir`.
  // --save-keep: whether later steps' checkpoints were said to stay.
  bool saidLaterCheckpoints = false;
  auto saveState = [&](const std::string &dir) {
    HostMirror state(statePieces(ctx));
    state.fill();
    saveCheckpoint(dir, MPI_COMM_WORLD, state.get(), checkpointMetadata(ctx));
  };
  if (flags.evalEvery > 0 && evalBatches < flags.evalBatches &&
      ctx.worldRank == 0 && !flags.quiet)
    std::printf("--eval-batches: %s holds %" PRId64
                " distinct batches; each evaluation reads those\n",
                evalPath.c_str(), evalBatches);
  auto reportEvaluation = [&](const Evaluation &e) {
    if (!flags.quiet)
      std::printf("eval at step %" PRId64 ": loss %.6f over %" PRId64
                  " batches  %.1f ms  peak %s (predicted %s)\n",
                  ctx.step, e.loss, evalBatches, e.seconds * 1e3,
                  formatBytes(e.peak).c_str(),
                  formatBytes(predicted.eval_peak).c_str());
    std::fflush(stdout);
    if (!log)
      return;
    char lossText[32] = "null";
    if (std::isfinite(e.loss))
      std::snprintf(lossText, sizeof(lossText), "%.9g", e.loss);
    std::fprintf(log,
                 "{\"step\": %" PRId64 ", \"eval_loss\": %s, "
                 "\"eval_batches\": %" PRId64 ", \"eval_ms\": %.4f, "
                 "\"eval_peak_bytes\": %" PRId64
                 ", \"predicted_eval_peak_bytes\": %" PRId64 "}\n",
                 ctx.step, lossText, evalBatches, e.seconds * 1e3, e.peak,
                 predicted.eval_peak);
    endLogLine();
  };
  // An evaluation is traced where a step next to it is: the one before
  // or the one after.
  auto evaluateNow = [&] {
    bool tracing = trace && ctx.step >= flags.traceFirst - 1 &&
                   ctx.step <= flags.traceLast;
    return evaluate(ctx, evalSource, evalBatches, persistent,
                    tracing ? trace.get() : nullptr);
  };
  if (flags.evalEvery > 0) {
    Evaluation e = evaluateNow();
    if (ctx.worldRank == 0)
      reportEvaluation(e);
  }
  const int64_t lastStep = ctx.step + flags.steps; // --load's steps counted
  // Steps count across --load, so a short run may save none of DIR/step-K.
  if (flags.saveEvery > 0 &&
      ctx.step / flags.saveEvery == lastStep / flags.saveEvery &&
      ctx.worldRank == 0)
    std::fprintf(stderr,
                 "shardc: rank 0: --save-every %" PRId64
                 ": no step of this run is a multiple of it, so no "
                 "%s/step-K is saved (--save's checkpoint of the last step "
                 "is)\n",
                 flags.saveEvery, flags.save.c_str());
  for (int64_t s = 0; s < flags.steps; ++s) {
    ++ctx.step;
    ctx.timers = {};
    // Rank 0 prints the table: the others need not time. (An evaluation
    // turns timing off.)
    if (flags.profile && s >= 1 && ctx.worldRank == 0)
      backendKernelTimesEnable(ctx, true);
    // --trace-steps: the runtime records only while ctx.trace is set.
    bool tracing =
        trace && ctx.step >= flags.traceFirst && ctx.step <= flags.traceLast;
    if (trace)
      backendKernelCallsEnable(ctx, tracing);
    ctx.batch = ctx.step - 1; // steps count from 1; batches from 0
    ctx.allocator.resetPeak();
    auto [loss, seconds] = runOnce(ctx, model->step, persistent, "step",
                                   tracing ? trace.get() : nullptr,
                                   "step " + std::to_string(ctx.step));
    if (flags.profile && s >= 1) {
      profiled.steps += seconds;
      profiled.waits += ctx.timers.commWaitSeconds;
      profiled.hostUpdates += ctx.timers.hostUpdateSeconds;
      // Collected each step: a GPU's events are then reused, not piled up.
      if (ctx.worldRank == 0)
        backendKernelTimes(ctx);
    }
    // The norm before clipping, as clip_grad_norm_ returns it.
    float gradNorm = 0.0f;
    if (ctx.gradNorm)
      backendCopyOut(&gradNorm, ctx.gradNorm, sizeof(float));
    double gemm = backendGemmSeconds(ctx);
    int64_t local[4] = {ctx.allocator.peakBytes(), ctx.timers.bytesSent,
                        ctx.timers.hostCopyBytes, backendWorkspaceBytes(ctx)};
    int64_t worst[4];
    MPI_Allreduce(local, worst, 4, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    // --save-every N: each N-th step (counted across --load) in a
    // checkpoint of its own, to resume or roll back to.
    std::string savedTo;
    std::vector<std::string> pruned;
    if (flags.saveEvery > 0 && ctx.step % flags.saveEvery == 0) {
      savedTo = flags.save + "/step-" + std::to_string(ctx.step);
      saveState(savedTo);
      if (flags.saveKeep > 0 && ctx.worldRank == 0)
        pruned = pruneStepCheckpoints(flags.save, ctx.step, lastStep,
                                      flags.saveKeep, saidLaterCheckpoints);
    }
    // --eval-every: said after the step's line.
    std::optional<Evaluation> evaluated;
    if (flags.evalEvery > 0 &&
        (ctx.step % flags.evalEvery == 0 || s == flags.steps - 1))
      evaluated = evaluateNow();
    if (ctx.worldRank != 0)
      continue;
    if (!flags.quiet) {
      std::printf("step %" PRId64 "/%" PRId64 "  loss %.6f  ", ctx.step,
                  lastStep, loss);
      if (ctx.gradNorm)
        std::printf("grad norm %.4f  ", gradNorm);
      // Model FLOPs per second on this rank (the figure MFU divides by the
      // device's peak), and where the backward recomputes, hardware FLOPs
      // (HFU's).
      std::printf(
          "%.1f ms  %s  ", seconds * 1e3,
          formatFlopRate(static_cast<double>(predicted.model_flops) / seconds)
              .c_str());
      if (predicted.hardware_flops != predicted.model_flops)
        std::printf("(hardware %s)  ",
                    formatFlopRate(
                        static_cast<double>(predicted.hardware_flops) / seconds)
                        .c_str());
      std::printf("peak %s (predicted %s)  ", formatBytes(worst[0]).c_str(),
                  formatBytes(predicted.peak).c_str());
      // The kernels' workspaces, which the ledger leaves out (a GPU's).
      if (worst[3] > 0)
        std::printf("workspace %s  ", formatBytes(worst[3]).c_str());
      std::printf("sent %s", formatBytes(worst[1]).c_str());
      if (offloaded)
        std::printf("  host copies %s (predicted %s)",
                    formatBytes(worst[2]).c_str(),
                    formatBytes(predicted.host_copies).c_str());
      std::printf("\n");
      if (!savedTo.empty()) {
        std::printf("checkpoint: step %" PRId64 " saved to %s", ctx.step,
                    savedTo.c_str());
        for (size_t i = 0; i < pruned.size(); ++i)
          std::printf("%s%s", i == 0 ? "; removed " : ", ", pruned[i].c_str());
        std::printf("\n");
      }
    }
    std::fflush(stdout);
    if (log) {
      // JSON has no NaN or infinity: a diverged loss is null.
      char lossText[32] = "null";
      if (std::isfinite(loss))
        std::snprintf(lossText, sizeof(lossText), "%.9g", loss);
      // Only where the step clips; null where the norm is not finite.
      char normText[48] = "";
      if (ctx.gradNorm)
        std::snprintf(normText, sizeof(normText),
                      std::isfinite(gradNorm) ? ", \"grad_norm\": %.9g"
                                              : ", \"grad_norm\": null",
                      gradNorm);
      // Only where the optimizer is offloaded.
      char hostText[192] = "";
      if (offloaded)
        std::snprintf(
            hostText, sizeof(hostText),
            ", \"host_bytes\": %" PRId64 ", \"predicted_host_bytes\": %" PRId64
            ", \"host_copy_bytes\": %" PRId64
            ", \"predicted_host_copy_bytes\": %" PRId64,
            hostBytes, predictedHostBytes, worst[2], predicted.host_copies);
      std::fprintf(
          log,
          "{\"step\": %" PRId64 ", \"loss\": %s%s, \"lr\": %.9g, "
          "\"step_ms\": %.4f, \"model_flops\": %" PRId64
          ", \"model_tflops_per_s\": %.6g, \"hardware_flops\": %" PRId64
          ", \"hardware_tflops_per_s\": %.6g, "
          "\"peak_bytes\": %" PRId64 ", \"predicted_peak_bytes\": %" PRId64
          ", \"persistent_bytes\": %" PRId64
          ", \"predicted_persistent_bytes\": %" PRId64
          ", \"workspace_bytes\": %" PRId64 ", \"bytes_sent\": %" PRId64
          ", \"predicted_bytes_sent\": %" PRId64
          "%s, \"gemm_ms\": %.4f, \"comm_wait_ms\": %.4f, \"comm_ms\": "
          "%.4f}\n",
          ctx.step, lossText, normText, learningRate(*ctx.model, ctx.step),
          seconds * 1e3, predicted.model_flops,
          static_cast<double>(predicted.model_flops) / seconds / 1e12,
          predicted.hardware_flops,
          static_cast<double>(predicted.hardware_flops) / seconds / 1e12,
          worst[0], predicted.peak, persistent, predictedPersistent, worst[3],
          worst[1],
          predicted.all_gather + predicted.reduce_scatter +
              predicted.all_reduce,
          hostText, gemm * 1e3, ctx.timers.commWaitSeconds * 1e3,
          ctx.timers.commSeconds * 1e3);
      endLogLine();
    }
    if (evaluated)
      reportEvaluation(*evaluated);
  }
  if (log && std::fclose(log) != 0)
    logError = flags.logJson + ": cannot write: " + std::strerror(errno);
  if (flags.profile && ctx.worldRank == 0)
    printProfile(backendKernelTimes(ctx), flags.steps - 1, profiled);
  if (!flags.save.empty())
    saveState(flags.save);
  if (!flags.exportPath.empty())
    exportParams(ctx, flags.exportPath);
  if (trace) {
    backendKernelCallsEnable(ctx, false);
    ctx.trace = nullptr;
    traceError = writeTrace(ctx, *trace, flags.trace);
    SHARDC_RT_CHECK_ALL(traceError.empty(), "--trace", traceError);
  }
  SHARDC_RT_CHECK_ALL(logError.empty(), "--log-json", logError);
  tearDown();
  MPI_Finalize();
  return 0;
}

int shardc_rt_main(int argc, char **argv, const shardc_rt_model *model) {
  // A host allocation past what the process may take (the host's memory,
  // ulimit -v) fails as anything else does, not by std::bad_alloc's abort.
  try {
    return runMain(argc, argv, model);
  } catch (const std::bad_alloc &) {
    SHARDC_RT_FAIL("host memory", "out of memory: an allocation failed (the "
                                  "host's memory, or ulimit -v)");
  }
}

} // extern "C"
