//===- Timeline.cpp - A step's predicted time on a machine ----------------===//
//
// A walk over the scheduled step in program order, keeping a clock per
// stream; a micro-batch loop's runs are played until they repeat (playLoop).
//
//===----------------------------------------------------------------------===//

#include "shardc/Dialect/Dist/Analysis/Timeline.h"

#include "shardc/Dialect/Dist/Analysis/BufferLiveness.h"
#include "shardc/Dialect/Dist/Analysis/Ledger.h"
#include "shardc/Dialect/Dist/IR/DistOps.h"
#include "shardc/Dialect/Dist/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace shardc;
using namespace shardc::dist;

// The public figures of NVIDIA's SXM parts (dense, without sparsity). The
// kernels' efficiencies are what the CUDA target's reached on an H200
// (bench/RESULTS.md, 2026-12-04: GPT-2 small at world size 1, bf16 batch
// 128 and f32 batch 64, each kind's GPU time per step from --profile over
// the FLOPs or bytes this timeline counts for it), taken for the H100 too:
// bf16 GEMMs 132.8 ms for 97.2 TFLOP (0.74 of 989 TFLOP/s), f32 (TF32)
// 203.9 ms for 48.6 (0.48 of 494); flash attention 120.8 ms for 8.66 TFLOP
// (0.072) and 99.5 ms for 4.33 (0.088); the rest 62.8 and 37.4 ms for
// 95.8 and 95.5 GB (0.32 and 0.53 of 4.8 TB/s: a bf16 kernel does an f32
// kernel's work per element on half the bytes). The links are what
// nccl-tests reach: NVLink 4's 450 GB/s a direction gives about 360 GB/s
// of bus bandwidth to 8 GPUs; a 400 Gb/s NIC per GPU about 45 GB/s across
// nodes. The A100 (SXM4, 80 GB) takes the same efficiencies, unmeasured
// there: 312 and 156 TFLOP/s, 2.04 TB/s; NVLink 3's 300 GB/s a direction
// gives about 230 GB/s of bus bandwidth, a 200 Gb/s NIC per GPU about 22
// GB/s.
static ArrayRef<Machine> knownMachines() {
  static const KernelEfficiency bf16{0.74, 0.072, 0.32}, f32{0.48, 0.088, 0.53};
  static const Machine machines[] = {
      {"h100", 989e12, 494e12, 3.35e12, bf16, f32, 360e9, 45e9, 15e-6, 8},
      {"h200", 989e12, 494e12, 4.8e12, bf16, f32, 360e9, 45e9, 15e-6, 8},
      {"a100", 312e12, 156e12, 2.039e12, bf16, f32, 230e9, 22e9, 15e-6, 8}};
  return machines;
}

std::optional<Machine> dist::lookupMachine(StringRef name,
                                           int64_t ranksPerNode) {
  for (Machine m : knownMachines()) {
    if (m.name != name)
      continue;
    if (ranksPerNode > 0)
      m.ranksPerNode = ranksPerNode;
    return m;
  }
  return std::nullopt;
}

FailureOr<Machine> dist::getMachine(Operation *where, StringRef name,
                                    int64_t ranksPerNode) {
  if (ranksPerNode < 0)
    return where->emitError() << "expected ranks-per-node >= 1 (0: the "
                                 "machine's), got "
                              << ranksPerNode;
  std::optional<Machine> machine = lookupMachine(name, ranksPerNode);
  if (!machine) {
    InFlightDiagnostic diag = where->emitError() << "unknown machine '" << name
                                                 << "': expected one of ";
    llvm::interleaveComma(knownMachines(), diag,
                          [&](const Machine &m) { diag << m.name; });
    return diag;
  }
  return *machine;
}

LogicalResult dist::verifyFillsNodes(Operation *where, int64_t world,
                                     const Machine &machine) {
  if (world <= machine.ranksPerNode || world % machine.ranksPerNode == 0)
    return success();
  return where->emitOpError()
         << "spans " << world << " ranks, which do not fill nodes of "
         << machine.ranksPerNode << " (ranks-per-node of machine '"
         << machine.name << "'): expected a multiple of "
         << machine.ranksPerNode << ", or at most one node";
}

namespace {

/// The bytes a kernel moves through memory: its tensors in and out, but
/// for an optimizer update, which streams its gradient in, its f32 moments
/// and its master (or f32 param) in and out (24 bytes an element), and
/// writes its result; and for dist.take_shard, which copies its piece.
int64_t bytesMoved(Operation *op) {
  auto tensorBytes = [](ValueRange values) {
    int64_t bytes = 0;
    for (Value v : values)
      if (isa<RankedTensorType>(v.getType()))
        bytes += getBufferBytes(v);
    return bytes;
  };
  if (auto update = dyn_cast<train::OptimizerUpdateOpInterface>(op)) {
    Value grad = update.getGrad();
    return cast<RankedTensorType>(grad.getType()).getNumElements() * 24 +
           getBufferBytes(grad) + tensorBytes(op->getResults());
  }
  if (isa<TakeShardOp>(op))
    return 2 * tensorBytes(op->getResults());
  return tensorBytes(op->getOperands()) + tensorBytes(op->getResults());
}

/// Whether a kernel computes in bf16: the type of its first tensor operand,
/// or of its first tensor result where it has none (a fill).
bool runsInBf16(Operation *op) {
  for (Value v : op->getOperands())
    if (auto tensor = dyn_cast<RankedTensorType>(v.getType()))
      return tensor.getElementType().isBF16();
  for (Value v : op->getResults())
    if (auto tensor = dyn_cast<RankedTensorType>(v.getType()))
      return tensor.getElementType().isBF16();
  return false;
}

/// Ops that run no kernel: declarations, views, frees and terminators.
bool runsNoKernel(Operation *op) {
  return isa<train::ParamOp, FlatParamOp, train::ParamRefOp, train::InputOp,
             train::ReshapeOp, UnpackOp, train::YieldOp, train::ReturnOp,
             FreeOp, arith::ConstantOp>(op);
}

StringRef kindOf(Operation *collective) {
  return TypeSwitch<Operation *, StringRef>(collective)
      .Case<AllGatherOp, AllGatherStartOp>([](auto) { return "all_gather"; })
      .Case<ReduceScatterOp, ReduceScatterStartOp>(
          [](auto) { return "reduce_scatter"; })
      .Default([](Operation *) { return "all_reduce"; });
}

class Player {
public:
  Player(const Machine &machine, TimelineReport &report)
      : machine(machine), report(report) {}

  void playBlock(Block &block) {
    for (Operation &op : block)
      play(&op);
  }

  /// The step ends when the compute stream and every collective have.
  double finish() {
    double end = now;
    for (auto &stream : streams)
      end = std::max(end, stream.getValue());
    return end;
  }

private:
  void play(Operation *op) {
    if (auto loop = dyn_cast<train::MicrobatchesOp>(op)) {
      playLoop(loop.getBody().front(), loop.getCount());
      return;
    }
    if (isa<train::UnitOp, train::BackwardOp>(op)) {
      playBlock(op->getRegion(0).front());
      return;
    }
    if (runsNoKernel(op)) {
      // Only frees may stand between the members of an NCCL group.
      if (!isa<FreeOp>(op))
        lastStarted = nullptr;
      return;
    }
    if (auto wait = dyn_cast<WaitOp>(op)) {
      waitUntil(ends.lookup(wait.getToken()), wait);
      return;
    }
    if (isa<AllGatherOp, AllGatherStartOp, ReduceScatterOp,
            ReduceScatterStartOp, AllReduceOp, AllReduceStartOp>(op)) {
      double end = startCollective(op);
      if (op->getNumResults() && isa<TokenType>(op->getResult(0).getType()))
        ends[op->getResult(0)] = end;
      else
        waitUntil(end, op);
      return;
    }
    runKernel(op);
  }

  /// Where a run of a loop's body starts: what decides how it plays (each
  /// stream's lead over the compute stream, none where it is idle; the
  /// leads of collectives not yet waited; the collective an NCCL group may
  /// go on), and the clocks and totals it adds to.
  struct RunStart {
    double now;
    llvm::StringMap<double> streams;
    llvm::SmallVector<double> pending;
    Operation *lastStarted;
    TimelineReport report;

    RunStart(const Player &player)
        : now(player.now), streams(player.streams),
          lastStarted(player.lastStarted), report(player.report) {
      for (const auto &end : player.ends)
        if (end.second > now)
          pending.push_back(end.second - now);
      llvm::sort(pending);
    }

    bool playsAs(const RunStart &other) const {
      // Equal to a picosecond: clocks shifted by a run differ in rounding.
      auto same = [](double a, double b) { return std::abs(a - b) <= 1e-12; };
      if (lastStarted != other.lastStarted ||
          streams.size() != other.streams.size() ||
          pending.size() != other.pending.size())
        return false;
      for (size_t i = 0; i < pending.size(); ++i)
        if (!same(pending[i], other.pending[i]))
          return false;
      for (const auto &stream : streams) {
        auto it = other.streams.find(stream.getKey());
        if (it == other.streams.end() ||
            !same(std::max(stream.getValue() - now, 0.0),
                  std::max(it->getValue() - other.now, 0.0)))
          return false;
      }
      return true;
    }
  };

  /// Plays `count` runs of a micro-batch loop's `body`. Its collectives are
  /// waited within it, so the streams soon start each run as they started
  /// the one before: from then on every run plays as that one did, a period
  /// later, and the rest are added at once (so that any count costs a few
  /// runs, not one each).
  void playLoop(Block &body, uint64_t count) {
    std::optional<RunStart> previous;
    for (uint64_t run = 0; run < count; ++run) {
      RunStart start(*this);
      if (previous && start.playsAs(*previous)) {
        repeatRun(*previous, count - run);
        return;
      }
      playBlock(body);
      previous = std::move(start);
    }
  }

  /// Adds `times` more runs as the one from `from` to now.
  void repeatRun(const RunStart &from, uint64_t times) {
    double n = static_cast<double>(times), period = now - from.now;
    for (auto &end : ends)
      if (end.second > now)
        end.second += n * period;
    now += n * period;
    for (auto &stream : streams)
      stream.getValue() += n * period;
    const TimelineReport &before = from.report;
    for (double TimelineReport::*total :
         {&TimelineReport::matmulSeconds, &TimelineReport::memorySeconds,
          &TimelineReport::allGatherSeconds,
          &TimelineReport::reduceScatterSeconds,
          &TimelineReport::allReduceSeconds, &TimelineReport::exposedSeconds})
      report.*total += n * (report.*total - before.*total);
    for (size_t i = 0; i < report.waits.size(); ++i)
      report.waits[i].second +=
          n * (report.waits[i].second -
               (i < before.waits.size() ? before.waits[i].second : 0.0));
  }

  /// A kernel on the compute stream: its FLOPs at the peak of its first
  /// tensor's type, or its bytes at the memory's bandwidth, whichever takes
  /// longer, each at what that type's kernels reach of it.
  void runKernel(Operation *op) {
    bool bf16 = runsInBf16(op);
    const KernelEfficiency &efficiency = bf16 ? machine.bf16 : machine.f32;
    double memory =
        bytesMoved(op) / (machine.memoryBandwidth * efficiency.memory);
    int64_t flops = getMatmulFlops(op);
    if (!flops) {
      report.memorySeconds += memory;
      now += memory;
      lastStarted = nullptr;
      return;
    }
    double peak = bf16 ? machine.bf16Flops : machine.f32Flops;
    bool attention = isa<train::AttentionOp, train::AttentionGradOp>(op);
    double seconds =
        std::max(memory, flops / (peak * (attention ? efficiency.attention
                                                    : efficiency.matmul)));
    report.matmulSeconds += seconds;
    now += seconds;
    lastStarted = nullptr;
  }

  /// Starts `op` on its communicator's stream once the compute stream has
  /// reached it and that stream is free; returns when it ends. A collective
  /// joining the NCCL group of the one started before it (joinsNcclGroup:
  /// frees between them aside, as the CUDA target groups them) adds no
  /// launch latency.
  double startCollective(Operation *op) {
    auto axes = op->getAttrOfType<ArrayAttr>("axes");
    auto mesh = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
    std::string communicator = mesh.getValue().str() + ":";
    for (Attribute axis : axes)
      communicator += cast<StringAttr>(axis).getValue().str() + ",";
    auto [it, inserted] = inNode.try_emplace(communicator, false);
    if (inserted)
      it->second = isWithinNodes(op, mesh, axes, machine.ranksPerNode);
    double bandwidth =
        it->second ? machine.nodeBusBandwidth : machine.networkBusBandwidth;
    double seconds = getBytesSent(op) / bandwidth;
    if (!lastStarted || !joinsNcclGroup(lastStarted, op))
      seconds += machine.collectiveLatency;
    double &streamFree = streams[communicator];
    double start = std::max(now, streamFree);
    streamFree = start + seconds;
    StringRef kind = kindOf(op);
    if (kind == "all_gather")
      report.allGatherSeconds += seconds;
    else if (kind == "reduce_scatter")
      report.reduceScatterSeconds += seconds;
    else
      report.allReduceSeconds += seconds;
    lastStarted = op;
    return streamFree;
  }

  /// Holds the compute stream until `end`, charging the wait to what
  /// `waiter` feeds.
  void waitUntil(double end, Operation *waiter) {
    lastStarted = nullptr;
    if (end <= now)
      return;
    std::string what = describeWait(waiter);
    double waited = end - now;
    report.exposedSeconds += waited;
    auto [it, inserted] = waitIndex.try_emplace(what, report.waits.size());
    if (inserted)
      report.waits.push_back({what, 0.0});
    report.waits[it->second].second += waited;
    now = end;
  }

  /// "all_gather before unit 'h.0' backward": the collective's kind and the
  /// first op after the wait that runs a kernel on the compute stream.
  std::string describeWait(Operation *waiter) {
    StringRef kind = kindOf(waiter);
    if (auto wait = dyn_cast<WaitOp>(waiter))
      kind = kindOf(wait.getToken().getDefiningOp());
    // Declarations, views, frees, waits and collectives queue no kernel.
    auto queuesNoKernel = [](Operation *op) {
      return (runsNoKernel(op) && !op->hasTrait<OpTrait::IsTerminator>()) ||
             isa<WaitOp, AllGatherOp, AllGatherStartOp, ReduceScatterOp,
                 ReduceScatterStartOp, AllReduceOp, AllReduceStartOp>(op);
    };
    Operation *next = waiter->getNextNode();
    while (next && queuesNoKernel(next))
      next = next->getNextNode();
    std::string before;
    if (next && isa<train::MicrobatchesOp>(next->getParentOp()) &&
        next->hasTrait<OpTrait::IsTerminator>())
      before = "the end of a micro-batch";
    else if (!next || next->hasTrait<OpTrait::IsTerminator>())
      before = "the end of the step";
    else if (auto unit = dyn_cast<train::UnitOp>(next))
      before = ("unit '" + unit.getName() + "' forward").str();
    else if (auto backward = dyn_cast<train::BackwardOp>(next))
      before = ("unit '" + backward.getUnit() + "' backward").str();
    else if (isa<train::OptimizerUpdateOpInterface>(next))
      before = "the optimizer step";
    else
      before = next->getName().getStringRef().str();
    return (kind + " before " + before).str();
  }

  const Machine &machine;
  TimelineReport &report;
  double now = 0;
  llvm::DenseMap<Value, double> ends;
  llvm::StringMap<double> streams;
  llvm::StringMap<size_t> waitIndex;
  /// The collective started last, with only frees since (null otherwise).
  Operation *lastStarted = nullptr;
  /// Per communicator ("mesh:axis,..."), whether its groups lie within
  /// nodes.
  llvm::StringMap<bool> inNode;
};

} // namespace

FailureOr<TimelineReport> dist::predictTimeline(train::ModelOp model,
                                                const Machine &machine,
                                                int64_t modelFlops) {
  if (model->hasAttr(kOffloadOptimizerAttrName))
    return model.emitOpError()
           << "offloads its optimizer to the host (offload-optimizer), "
              "whose updates run at the CPU's speed: machine '"
           << machine.name << "' does not price them";
  if (modelFlops == kFlopsOverflow)
    return model.emitOpError()
           << "runs more than " << kFlopsOverflow
           << " FLOPs a step per rank: no timeline can price it";
  TimelineReport report;
  report.machine = machine.name;
  report.ranksPerNode = machine.ranksPerNode;
  Player player(machine, report);
  player.playBlock(model.getBody().front());
  report.stepSeconds = player.finish();
  // Longest first, to the picosecond: waits that equal each other but for
  // rounding keep the step's order.
  llvm::stable_sort(report.waits, [](const auto &a, const auto &b) {
    return std::round(a.second * 1e12) > std::round(b.second * 1e12);
  });
  // MFU at the peak of the params' type, as llm.c and nanoGPT report it.
  bool bf16 = false;
  model.walk([&](train::ParamOp param) {
    bf16 = param.getType().getElementType().isBF16();
  });
  double peak = bf16 ? machine.bf16Flops : machine.f32Flops;
  if (report.stepSeconds > 0)
    report.mfu = modelFlops / (report.stepSeconds * peak);
  return report;
}
