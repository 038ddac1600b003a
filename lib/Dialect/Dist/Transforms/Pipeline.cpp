//===- Pipeline.cpp - shardc-pipeline, and the searches of its autos -----===//

#include "shardc/Dialect/Dist/Analysis/Ledger.h"
#include "shardc/Dialect/Dist/Analysis/Timeline.h"
#include "shardc/Dialect/Dist/Transforms/Passes.h"
#include "shardc/Dialect/Train/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace shardc;
using namespace shardc::dist;

namespace {
/// shardc-pipeline's strategy: shardc-shard's, or auto.
enum class StrategyChoice { ddp, zero1, zero2, zero3, hsdp, automatic };

struct ShardcPipelineOptions
    : public PassPipelineOptions<ShardcPipelineOptions> {
  Option<std::string> wrap{
      *this, "wrap",
      llvm::cl::desc("group layers into units first: per-layer or "
                     "min-params=P (none when empty)"),
      llvm::cl::init("")};
  ListOption<std::string> recompute{
      *this, "recompute",
      llvm::cl::desc("units whose backward recomputes their forward "
                     "(activation checkpointing): names or globs, or auto "
                     "(the fewest that fit memory-budget)")};
  Option<std::string> recomputePolicy{
      *this, "recompute-policy",
      llvm::cl::desc("full, or save-matmuls: the recomputed units keep GEMM "
                     "and attention results"),
      llvm::cl::init("full")};
  Option<StrategyChoice> strategy{
      *this, "strategy", llvm::cl::desc("what each rank shards"),
      llvm::cl::init(StrategyChoice::zero3),
      llvm::cl::values(
          clEnumValN(StrategyChoice::ddp, "ddp", "DDP"),
          clEnumValN(StrategyChoice::zero1, "zero1", "ZeRO-1"),
          clEnumValN(StrategyChoice::zero2, "zero2", "ZeRO-2"),
          clEnumValN(StrategyChoice::zero3, "zero3", "ZeRO-3"),
          clEnumValN(StrategyChoice::zero3, "fsdp", "alias of zero3"),
          clEnumValN(StrategyChoice::hsdp, "hsdp", "HSDP"),
          clEnumValN(StrategyChoice::automatic, "auto",
                     "the first of ddp, zero1, zero2, zero3 that fits "
                     "memory-budget; with machine, the fastest predicted "
                     "that fits, zero3's reshard-after-forward settings "
                     "too where it is not given"))};
  Option<std::string> mesh{*this, "mesh",
                           llvm::cl::desc("N, or RxS for hsdp"),
                           llvm::cl::init("1")};
  Option<std::string> reshardAfterForward{
      *this, "reshard-after-forward",
      llvm::cl::desc("zero3/hsdp: true gathers again for the backward, "
                     "false keeps the forward's gather, K keeps a shard "
                     "over K ranks and gathers over those"),
      llvm::cl::init("true")};
  Option<bool> reshardLastUnit{
      *this, "reshard-last-unit",
      llvm::cl::desc("zero3/hsdp: the unit whose forward runs last "
                     "reshards too, instead of keeping its gather for its "
                     "backward"),
      llvm::cl::init(false)};
  Option<Layout> layout{
      *this, "layout", llvm::cl::desc("how shards are cut"),
      llvm::cl::init(Layout::dim0),
      llvm::cl::values(clEnumValN(Layout::dim0, "dim0", "FSDP2 per-param"),
                       clEnumValN(Layout::flat, "flat", "FSDP1 flat"))};
  Option<DType> paramDType{
      *this, "param-dtype", llvm::cl::desc("stored, gathered, computed"),
      llvm::cl::init(DType::f32),
      llvm::cl::values(clEnumValN(DType::f32, "f32", "float32"),
                       clEnumValN(DType::bf16, "bf16", "bfloat16"))};
  Option<DType> reduceDType{
      *this, "reduce-dtype", llvm::cl::desc("gradients reduced in"),
      llvm::cl::init(DType::f32),
      llvm::cl::values(clEnumValN(DType::f32, "f32", "float32"),
                       clEnumValN(DType::bf16, "bf16", "bfloat16"))};
  Option<bool> fuse{*this, "fuse",
                    llvm::cl::desc("fuse adjacent ops (train-fuse)"),
                    llvm::cl::init(true)};
  ListOption<std::string> fuseExclude{
      *this, "fuse-exclude",
      llvm::cl::desc("fused ops train-fuse does not form (its exclude)")};
  Option<double> bucketMB{
      *this, "bucket-mb",
      llvm::cl::desc("ddp, zero1/zero2 flat: gradient bucket size in MiB"),
      llvm::cl::init(kDefaultBucketMB)};
  Option<double> unitBucketMB{
      *this, "unit-bucket-mb",
      llvm::cl::desc("zero3/hsdp flat: bucket small units (MiB, 0: off)"),
      llvm::cl::init(0)};
  Option<int64_t> gradAccum{*this, "grad-accum",
                            llvm::cl::desc("micro-batches per step"),
                            llvm::cl::init(1)};
  Option<GradSync> gradSync{
      *this, "grad-sync",
      llvm::cl::desc("with grad-accum: reduce gradients once per step, or "
                     "each micro-batch's (zero2/zero3/hsdp)"),
      llvm::cl::init(GradSync::step),
      llvm::cl::values(
          clEnumValN(GradSync::step, "step", "after the last micro-batch"),
          clEnumValN(GradSync::microbatch, "microbatch",
                     "each micro-batch's, summed in the shard"))};
  Option<bool> offloadOptimizer{
      *this, "offload-optimizer",
      llvm::cl::desc("optimizer state in host memory, updated on the host"),
      llvm::cl::init(false)};
  Option<bool> offloadParams{
      *this, "offload-params",
      llvm::cl::desc("with offload-optimizer (zero3, hsdp): the stored param "
                     "shards in host memory too"),
      llvm::cl::init(false)};
  Option<int64_t> prefetch{*this, "prefetch",
                           llvm::cl::desc("units a gather starts ahead"),
                           llvm::cl::init(1)};
  Option<std::string> format{*this, "format",
                             llvm::cl::desc("ledger: text or json"),
                             llvm::cl::init("text")};
  Option<std::string> output{
      *this, "output",
      llvm::cl::desc("ledger: a file, - for stdout, stderr when empty"),
      llvm::cl::init("")};
  Option<int64_t> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("fail over this many bytes per rank (0: none)"),
      llvm::cl::init(0)};
  Option<std::string> machine{
      *this, "machine",
      llvm::cl::desc("ledger: also predict the step's time on h100, h200 or "
                     "a100"),
      llvm::cl::init("")};
  Option<int64_t> ranksPerNode{
      *this, "ranks-per-node",
      llvm::cl::desc("ledger with machine: ranks per node (0: the "
                     "machine's)"),
      llvm::cl::init(0)};
};

/// What the pipeline runs, as the passes' own options.
struct PipelineSteps {
  std::string wrap;
  train::TrainAutodiffPassOptions autodiff;
  bool fuse = true;
  train::TrainFusePassOptions fusions;
  ShardcShardPassOptions shard;
  /// Whether reshard-after-forward was given (strategy=auto with a machine
  /// tries zero3's other settings where it was not).
  bool reshardGiven = false;
  ShardcSchedulePassOptions schedule;
  ShardcLedgerPassOptions ledger;
};

/// Adds the passes of `steps`; without `withLedger`, all but the ledger.
void addSteps(OpPassManager &pm, const PipelineSteps &steps,
              bool withLedger = true) {
  if (!steps.wrap.empty())
    pm.addPass(train::createShardcWrapPass({steps.wrap}));
  pm.addPass(train::createTrainAutodiffPass(steps.autodiff));
  if (steps.fuse)
    pm.addPass(train::createTrainFusePass(steps.fusions));
  pm.addPass(createShardcShardPass(steps.shard));
  pm.addPass(createShardcSchedulePass(steps.schedule));
  if (withLedger)
    pm.addPass(createShardcLedgerPass(steps.ledger));
}

/// What a probe of the pipeline predicts: the ledger, and the timeline on
/// `machine` where one is given.
struct Prediction {
  LedgerReport ledger;
  std::optional<TimelineReport> timeline;
};

/// The prediction for `module`'s one model compiled with `probe`, from the
/// pipeline run on a copy (its warnings and remarks dropped).
FailureOr<Prediction> predict(ModuleOp module, const PipelineSteps &probe,
                              const std::optional<Machine> &machine = {}) {
  OwningOpRef<ModuleOp> copy = module.clone();
  ScopedDiagnosticHandler errorsOnly(module.getContext(), [](Diagnostic &diag) {
    return success(diag.getSeverity() != DiagnosticSeverity::Error);
  });
  PassManager pm(module.getContext());
  addSteps(pm, probe, /*withLedger=*/false);
  if (failed(pm.run(*copy)))
    return failure();
  train::ModelOp model = train::getModels(*copy)->front();
  Prediction prediction{computeLedger(model), std::nullopt};
  if (machine) {
    FailureOr<TimelineReport> timeline =
        predictTimeline(model, *machine, prediction.ledger.modelFlops);
    if (failed(timeline))
      return failure();
    prediction.timeline = *timeline;
  }
  return prediction;
}

/// The pipeline of `steps`: through recompute=auto's search where it is
/// asked, else the passes themselves.
void addPipeline(OpPassManager &pm, const PipelineSteps &steps);

/// A search over runs of the pipeline (the autos), which runs its choice at
/// the end: it holds the steps and loads their dialects.
template <typename Derived>
class PipelineSearch : public PassWrapper<Derived, OperationPass<ModuleOp>> {
public:
  explicit PipelineSearch(PipelineSteps steps) : steps(std::move(steps)) {}
  void getDependentDialects(DialectRegistry &registry) const override {
    OpPassManager pm(ModuleOp::getOperationName());
    addSteps(pm, steps);
    pm.getDependentDialects(registry);
  }

protected:
  /// An error unless memory-budget is set: `search` ("recompute=auto
  /// chooses units") needs one.
  LogicalResult requireBudget(ModuleOp module, StringRef search) const {
    if (steps.ledger.memoryBudget > 0)
      return success();
    return module.emitError()
           << search << " to fit memory-budget: expected memory-budget=BYTES "
           << "> 0, got " << steps.ledger.memoryBudget;
  }

  /// Runs the pipeline of `chosen` on the module: the search's result.
  void runChosen(const PipelineSteps &chosen) {
    OpPassManager pm(ModuleOp::getOperationName());
    addPipeline(pm, chosen);
    if (failed(this->runPipeline(pm, this->getOperation())))
      this->signalPassFailure();
  }

  PipelineSteps steps;
};

/// recompute=auto: chooses the units to recompute, then runs the pipeline
/// with them. The choice is the fewest leading units (in forward order, as
/// Megatron-LM's block recomputation) whose recomputation brings the
/// ledger's predicted peak within memory-budget: a unit's activations live
/// from its forward to its backward, so the earliest live longest; the last
/// unit is never chosen (its activations are live when its backward starts
/// either way). The count is bisected, each probe the pipeline on a copy
/// of the module (its warnings and remarks dropped: the final run gives
/// them), and a remark names the units chosen, with the predicted peak they
/// give and the peak keeping every activation. When even every unit but
/// the last does not fit, the remark says so and the ledger fails as for
/// any model over budget.
class AutoRecomputePass : public PipelineSearch<AutoRecomputePass> {
public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(AutoRecomputePass)
  using PipelineSearch::PipelineSearch;
  StringRef getArgument() const override { return "shardc-auto-recompute"; }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    PipelineSteps base = steps;
    if (steps.autodiff.recompute.size() != 1) {
      module.emitError() << "recompute=auto chooses the units itself: "
                            "expected no unit names beside it, got '"
                         << llvm::join(steps.autodiff.recompute, ",") << "'";
      return signalPassFailure();
    }
    if (failed(requireBudget(module, "recompute=auto chooses units")))
      return signalPassFailure();
    // Units exist once wrapped.
    if (!steps.wrap.empty()) {
      OpPassManager wrap(ModuleOp::getOperationName());
      wrap.addPass(train::createShardcWrapPass({steps.wrap}));
      if (failed(runPipeline(wrap, module)))
        return signalPassFailure();
      base.wrap.clear();
    }
    FailureOr<train::ModelOp> found =
        train::getSingleModel(module, "recompute=auto");
    if (failed(found))
      return signalPassFailure();
    train::ModelOp model = *found;
    SmallVector<std::string> candidates;
    for (auto unit : model.getBody().front().getOps<train::UnitOp>())
      candidates.push_back(unit.getName().str());
    size_t units = candidates.size();
    if (!candidates.empty())
      candidates.pop_back();

    // The smallest count that fits, assuming fewer never fit once more do.
    // Names go to train-autodiff as globs: each is escaped to match itself.
    auto recomputingFirst = [&](size_t count) {
      PipelineSteps probe = base;
      probe.autodiff.recompute.clear();
      for (StringRef name : ArrayRef(candidates).take_front(count)) {
        std::string literal;
        for (char c : name) {
          if (StringRef("*?[]{}\\").contains(c))
            literal += '\\';
          literal += c;
        }
        probe.autodiff.recompute.push_back(literal);
      }
      return probe;
    };
    llvm::DenseMap<size_t, int64_t> peaks; // by count recomputed
    auto peakRecomputing = [&](size_t count) -> FailureOr<int64_t> {
      if (auto it = peaks.find(count); it != peaks.end())
        return it->second;
      FailureOr<Prediction> prediction =
          predict(module, recomputingFirst(count));
      if (failed(prediction))
        return failure();
      return peaks[count] = prediction->ledger.peak;
    };
    size_t lo = 0, hi = candidates.size();
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      FailureOr<int64_t> peak = peakRecomputing(mid);
      if (failed(peak))
        return signalPassFailure();
      if (*peak <= steps.ledger.memoryBudget)
        hi = mid;
      else
        lo = mid + 1;
    }
    // The remark shows what the choice saves: the peak kept and chosen.
    FailureOr<int64_t> kept = peakRecomputing(0);
    FailureOr<int64_t> peak = peakRecomputing(lo);
    if (failed(kept) || failed(peak))
      return signalPassFailure();
    // Nothing fits, and recomputing does not lower the peak (a model whose
    // peak is not its kept activations): none.
    bool raises = *peak > steps.ledger.memoryBudget && *kept <= *peak && lo;
    if (raises) {
      lo = 0;
      peak = kept;
    }
    InFlightDiagnostic remark = model.emitRemark()
                                << "recompute=auto: " << lo << " of " << units
                                << " units";
    if (lo > 0)
      remark << ": " << llvm::join(ArrayRef(candidates).take_front(lo), ", ");
    if (lo > 0 && lo == candidates.size())
      remark << " (all but the last, the most that lowers the peak)";
    if (raises)
      remark << " (recomputing all but the last does not lower the peak)";
    remark << "; predicted peak " << *peak << " bytes per rank, " << *kept
           << " keeping every activation";
    remark.report();

    runChosen(recomputingFirst(lo));
  }
};

/// A rung of strategy=auto's ladder: a strategy, with a setting of
/// reshard-after-forward where not empty.
struct Rung {
  Strategy strategy;
  std::string reshard;

  std::string name() const {
    std::string text = strategyName(strategy);
    return reshard.empty() ? text : text + " reshard-after-forward=" + reshard;
  }
  /// `steps` compiling this rung.
  PipelineSteps apply(PipelineSteps steps) const {
    steps.shard.strategy = strategy;
    if (!reshard.empty())
      steps.shard.reshardAfterForward = reshard;
    return steps;
  }
};

/// strategy=auto: the first rung of the ladder ddp, zero1, zero2, zero3
/// whose predicted peak fits memory-budget, DeepSpeed's advice (the lowest
/// ZeRO stage that fits: each rung up sends as many bytes or more, in more
/// collectives, to hold less), with the other options as given. Where no
/// rung fits and recompute=auto is asked, zero3 with recompute=auto's
/// choice; otherwise zero3, over budget, which the ledger reports as for
/// any model. A remark names the choice with its predicted peak and bytes
/// sent, and the peaks of the rungs below it. With offload-params the
/// ladder is zero3 alone: the lower rungs keep params on the device.
/// With machine=, the rung whose step the ledger's timeline predicts
/// fastest of those that fit (of all, without a budget), the remark adding
/// each one's predicted step; where reshard-after-forward is not given,
/// the ladder goes on with zero3's other settings of it, which users of
/// FSDP2 tune by hand: reshard to a node's ranks (`reshard-after-forward=`
/// ranks-per-node, where the mesh spans whole nodes), then not at all
/// (`false`, FSDP's SHARD_GRAD_OP), each chosen only when faster than the
/// rungs before it.
class AutoStrategyPass : public PipelineSearch<AutoStrategyPass> {
public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(AutoStrategyPass)
  using PipelineSearch::PipelineSearch;
  StringRef getArgument() const override { return "shardc-auto-strategy"; }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<Machine> machine;
    if (!steps.ledger.machine.empty()) {
      FailureOr<Machine> found =
          getMachine(module, steps.ledger.machine, steps.ledger.ranksPerNode);
      if (failed(found))
        return signalPassFailure();
      machine = *found;
    } else if (failed(
                   requireBudget(module, "strategy=auto chooses a strategy"))) {
      return signalPassFailure();
    }
    if (StringRef(steps.shard.mesh).contains('x')) {
      module.emitError() << "strategy=auto climbs ddp, zero1, zero2, zero3 "
                            "over a mesh of N ranks, got mesh '"
                         << steps.shard.mesh << "' (hsdp's: name it)";
      return signalPassFailure();
    }
    FailureOr<train::ModelOp> model =
        train::getSingleModel(module, "strategy=auto");
    if (failed(model))
      return signalPassFailure();
    // Refused before the search, which would otherwise pick a rung first.
    int64_t world = 0;
    if (machine && !StringRef(steps.shard.mesh).getAsInteger(10, world) &&
        failed(verifyFillsNodes(*model, world, *machine)))
      return signalPassFailure();
    bool recomputeAuto = llvm::is_contained(steps.autodiff.recompute, "auto");
    PipelineSteps probe = steps;
    if (recomputeAuto)
      probe.autodiff.recompute.clear();
    SmallVector<Rung, 6> ladder = {{Strategy::ddp, ""},
                                   {Strategy::zero1, ""},
                                   {Strategy::zero2, ""},
                                   {Strategy::zero3, ""}};
    if (machine && !steps.reshardGiven) {
      int64_t ranks = 0, perNode = machine->ranksPerNode;
      if (!StringRef(steps.shard.mesh).getAsInteger(10, ranks) && perNode > 1 &&
          perNode < ranks && ranks % perNode == 0)
        ladder.push_back({Strategy::zero3, std::to_string(perNode)});
      ladder.push_back({Strategy::zero3, "false"});
    }
    int64_t budget = steps.ledger.memoryBudget;
    std::string below;
    // The rungs that fit: without a machine the first, with one all.
    SmallVector<std::pair<Rung, Prediction>, 6> fits;
    for (const Rung &rung : ladder) {
      // offload-params: only zero3 gathers its params from host memory.
      if (steps.shard.offloadParams && rung.strategy != Strategy::zero3)
        continue;
      PipelineSteps rungProbe = rung.apply(probe);
      FailureOr<Prediction> prediction = predict(module, rungProbe, machine);
      if (failed(prediction))
        return signalPassFailure();
      if (budget > 0 && prediction->ledger.peak > budget) {
        below += (below.empty() ? "" : ", ") + rung.name() + " peaks at " +
                 std::to_string(prediction->ledger.peak);
        continue;
      }
      fits.push_back({rung, *prediction});
      if (!machine)
        break;
    }
    if (fits.empty()) {
      model->emitRemark() << "strategy=auto: no strategy fits memory-budget "
                          << budget << " (" << below << ")"
                          << (recomputeAuto ? "; zero3 with recompute=auto"
                                            : "; zero3");
      PipelineSteps last = steps;
      last.shard.strategy = Strategy::zero3;
      runChosen(last);
      return;
    }
    auto stepMs = [](const Prediction &p) {
      return p.timeline->stepSeconds * 1e3;
    };
    // The fastest, the lower rung on a tie.
    auto *chosen = fits.begin();
    if (machine)
      for (auto *fit = fits.begin(); fit != fits.end(); ++fit)
        if (stepMs(fit->second) < stepMs(chosen->second))
          chosen = fit;
    const LedgerReport &ledger = chosen->second.ledger;
    int64_t sent = ledger.allGather.bytes + ledger.reduceScatter.bytes +
                   ledger.allReduce.bytes;
    InFlightDiagnostic remark =
        model->emitRemark()
        << "strategy=auto: " << chosen->first.name() << ", predicted peak "
        << ledger.peak << " bytes per rank, " << sent << " bytes sent per step";
    if (machine) {
      std::string others;
      for (auto *fit = fits.begin(); fit != fits.end(); ++fit)
        if (fit != chosen)
          others +=
              llvm::formatv("{0}{1} {2:F3} ms", others.empty() ? ": " : ", ",
                            fit->first.name(), stepMs(fit->second))
                  .str();
      remark << llvm::formatv(", {0:F3} ms a step on {1} (the fastest{2}{3})",
                              stepMs(chosen->second), machine->name,
                              budget > 0 ? " that fits" : "", others)
                    .str();
    }
    if (!below.empty())
      remark << " (" << below << ")";
    remark.report();
    runChosen(chosen->first.apply(probe));
  }
};

void addPipeline(OpPassManager &pm, const PipelineSteps &steps) {
  if (llvm::is_contained(steps.autodiff.recompute, "auto"))
    pm.addPass(std::make_unique<AutoRecomputePass>(steps));
  else
    addSteps(pm, steps);
}

void buildShardcPipeline(OpPassManager &pm,
                         const ShardcPipelineOptions &options) {
  PipelineSteps steps;
  steps.wrap = options.wrap;
  steps.autodiff.recompute.assign(options.recompute.begin(),
                                  options.recompute.end());
  steps.autodiff.recomputePolicy = options.recomputePolicy;
  steps.fuse = options.fuse;
  steps.fusions.exclude.assign(options.fuseExclude.begin(),
                               options.fuseExclude.end());
  switch (options.strategy) {
  case StrategyChoice::ddp:
    steps.shard.strategy = Strategy::ddp;
    break;
  case StrategyChoice::zero1:
    steps.shard.strategy = Strategy::zero1;
    break;
  case StrategyChoice::zero2:
    steps.shard.strategy = Strategy::zero2;
    break;
  case StrategyChoice::zero3:
    steps.shard.strategy = Strategy::zero3;
    break;
  case StrategyChoice::hsdp:
    steps.shard.strategy = Strategy::hsdp;
    break;
  case StrategyChoice::automatic: // AutoStrategyPass sets it
    break;
  }
  steps.shard.mesh = options.mesh;
  steps.shard.reshardAfterForward = options.reshardAfterForward;
  steps.reshardGiven = options.reshardAfterForward.hasValue();
  steps.shard.reshardLastUnit = options.reshardLastUnit;
  steps.shard.layout = options.layout;
  steps.shard.paramDType = options.paramDType;
  steps.shard.reduceDType = options.reduceDType;
  steps.shard.gradAccum = options.gradAccum;
  steps.shard.gradSync = options.gradSync;
  steps.shard.offloadOptimizer = options.offloadOptimizer;
  steps.shard.offloadParams = options.offloadParams;
  steps.shard.bucketMB = options.bucketMB;
  steps.shard.unitBucketMB = options.unitBucketMB;
  steps.schedule.prefetch = options.prefetch;
  steps.ledger = {options.format, options.output, options.memoryBudget,
                  options.machine, options.ranksPerNode};
  if (options.strategy == StrategyChoice::automatic)
    pm.addPass(std::make_unique<AutoStrategyPass>(steps));
  else
    addPipeline(pm, steps);
}
} // namespace

void shardc::dist::registerShardcPipeline() {
  PassPipelineRegistration<ShardcPipelineOptions>(
      "shardc-pipeline",
      "The whole compiler in one option: (shardc-wrap), train-autodiff, "
      "(train-fuse), shardc-shard, shardc-schedule, shardc-ledger (options: "
      "those of the passes)",
      buildShardcPipeline);
}
