//===- Summary.cpp - Print a model's params, units and op counts ----------===//

#include "shardc/Dialect/Train/Transforms/Passes.h"
#include "shardc/Support/Bytes.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "train-summary"

namespace shardc::train {
#define GEN_PASS_DEF_TRAINSUMMARYPASS
#include "shardc/Dialect/Train/Transforms/Passes.h.inc"
} // namespace shardc::train

using namespace mlir;
using namespace shardc::train;

namespace {

enum Phase { Forward, Backward, Update, NumPhases };
const char *const phaseNames[NumPhases] = {"forward", "backward", "update"};

/// Op counts per name and phase, names in order of first appearance.
using OpCounts = llvm::MapVector<StringRef, std::array<int64_t, NumPhases>>;

int64_t byteWidth(Type elementType) {
  return (elementType.getIntOrFloatBitWidth() + 7) / 8;
}

void printModel(ModelOp model, llvm::raw_ostream &os) {
  // Parameters per unit, root first.
  llvm::MapVector<StringRef, int64_t> unitParams;
  unitParams[""] = 0;
  int64_t total = 0, trainable = 0, bytes = 0;
  model.walk([&](Operation *op) {
    if (auto unit = dyn_cast<UnitOp>(op))
      unitParams.insert({unit.getName(), 0});
    auto param = dyn_cast<ParamOp>(op);
    if (!param)
      return;
    int64_t n = param.getNumElements();
    unitParams[param.getUnitName()] += n;
    total += n;
    trainable += param.isTrainable() ? n : 0;
    bytes += n * byteWidth(param.getType().getElementType());
  });

  // Ops per phase. The root's backward starts at the loss's seed: the first
  // root op after the loss that is not part of the forward, or the seed of
  // the loss fused with its gradient (train.cross_entropy_and_grad), which
  // counts as backward.
  OpCounts counts;
  std::array<int64_t, NumPhases> totals{};
  auto count = [&](Operation *op, Phase phase) {
    if (op->hasTrait<OpTrait::IsTerminator>() || isa<ParamOp, ParamRefOp>(op))
      return;
    ++counts[op->getName().getStringRef()][phase];
    ++totals[phase];
  };
  Value loss = model.getLoss();
  bool pastLoss = false;
  auto isFusedSeed = [](OpOperand &use) {
    auto fused = dyn_cast<CrossEntropyAndGradOp>(use.getOwner());
    return fused && &use == &fused.getGradMutable();
  };
  for (Operation &op : model.getBody().front()) {
    if (isa<CrossEntropyAndGradOp>(op) ||
        llvm::any_of(op.getUses(), isFusedSeed))
      pastLoss = true;
    Phase phase = pastLoss ? Backward : Forward;
    if (isa<AdamWOp>(op))
      phase = Update;
    if (isa<UnitOp, BackwardOp>(op)) {
      Phase inner = isa<UnitOp>(op) ? Forward : Backward;
      op.walk([&](Operation *nested) {
        if (nested != &op)
          count(nested, inner);
      });
    } else {
      count(&op, phase);
    }
    if (llvm::is_contained(op.getResults(), loss))
      pastLoss = true;
  }

  os << "model @" << model.getSymName() << ": " << total << " params ("
     << trainable << " trainable), "
     << shardc::formatBytes(bytes) << " as stored, " << unitParams.size() << " units, batch "
     << model.getBatch() << "\n";
  os << llvm::format("  %-28s %12s %8s\n", "unit", "params", "share");
  for (auto &[name, n] : unitParams)
    os << llvm::format("  %-28s %12lld %7.1f%%\n",
                       name.empty() ? "(root)" : name.str().c_str(),
                       static_cast<long long>(n),
                       total ? 100.0 * n / total : 0.0);
  // The optimizer, as torch.optim.AdamW's arguments, its schedule and
  // clip_grad_norm_'s bound.
  AdamWAttr adamw = model.getOptimizer();
  auto number = [](const APFloat &value) {
    return llvm::format("%g", value.convertToDouble());
  };
  os << "  optimizer: AdamW lr " << number(adamw.getLr()) << ", betas ("
     << number(adamw.getBeta1()) << ", " << number(adamw.getBeta2())
     << "), eps " << number(adamw.getEps()) << ", weight decay "
     << number(adamw.getWeightDecay());
  if (adamw.getDecayMinRank() > 0)
    os << " (params of rank " << adamw.getDecayMinRank() << " or more)";
  if (adamw.getWarmup() > 0)
    os << "; warm-up " << adamw.getWarmup() << " steps";
  if (adamw.getDecaySteps() > 0)
    os << "; cosine to " << number(adamw.getMinLr()) << " at step "
       << adamw.getDecaySteps();
  if (!adamw.getMaxGradNorm().isZero())
    os << "; clip grad norm " << number(adamw.getMaxGradNorm());
  os << "\n";
  os << "  ops: " << totals[Forward] << " forward, " << totals[Backward]
     << " backward, " << totals[Update] << " update\n";
  for (auto &[name, perPhase] : counts) {
    os << llvm::format("    %-30s", name.str().c_str());
    for (int p = 0; p < NumPhases; ++p)
      if (perPhase[p])
        os << llvm::format(" %6lld %s", static_cast<long long>(perPhase[p]),
                           phaseNames[p]);
    os << "\n";
  }
}

struct TrainSummaryPass
    : shardc::train::impl::TrainSummaryPassBase<TrainSummaryPass> {
  void runOnOperation() override {
    FailureOr<SmallVector<ModelOp>> models = getModels(getOperation());
    if (failed(models))
      return signalPassFailure();
    for (ModelOp model : *models)
      printModel(model, llvm::errs());
    markAllAnalysesPreserved();
  }
};

} // namespace
