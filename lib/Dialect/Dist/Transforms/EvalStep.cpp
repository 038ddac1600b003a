//===- EvalStep.cpp - A step reduced to its forward and loss --------------===//
//
// The evaluation step is the part of the training step its loss depends on:
// a walk back from train.return through operands, into a region through the
// value it yields, and out of it through the operand its block argument
// binds. Everything else goes, and the regions kept shrink to what is read.
//
//===----------------------------------------------------------------------===//

#include "shardc/Dialect/Dist/Transforms/Passes.h"

#include "shardc/Dialect/Dist/Analysis/Ledger.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSet.h"

#define DEBUG_TYPE "shardc-eval-step"

namespace shardc::dist {
#define GEN_PASS_DEF_SHARDCEVALSTEPPASS
#include "shardc/Dialect/Dist/Transforms/Passes.h.inc"
} // namespace shardc::dist

using namespace mlir;
using namespace shardc;
using namespace shardc::dist;
using train::ModelOp;

namespace {

/// The loss alone, where the step computes it with the logits' gradient.
void unfuseLosses(ModelOp model) {
  SmallVector<train::CrossEntropyAndGradOp> fused;
  model.walk([&](train::CrossEntropyAndGradOp op) { fused.push_back(op); });
  for (train::CrossEntropyAndGradOp op : fused) {
    OpBuilder b(op);
    auto loss = train::CrossEntropyOp::create(
        b, op.getLoc(), op.getLoss().getType(), op.getLogits(), op.getTargets(),
        op.getClassesAttr());
    op.getLoss().replaceAllUsesWith(loss.getResult());
  }
}

/// Shrinks a region op kept in the evaluation step to the results and
/// arguments it reads. Runs after the ops it no longer needs have dropped
/// their references, and rebuilds the op where results go.
class RegionPruner {
public:
  explicit RegionPruner(const llvm::DenseSet<Value> &read) : read(read) {}

  /// Drops the yielded values and the arguments nothing reads.
  void dropUnread(Operation *op) {
    Block &body = op->getRegion(0).front();
    Operation *yield = body.getTerminator();
    for (int i = static_cast<int>(op->getNumResults()) - 1; i >= 0; --i)
      if (!read.contains(op->getResult(i)))
        yield->eraseOperand(i);
    for (int i = static_cast<int>(body.getNumArguments()) - 1; i >= 0; --i)
      if (!read.contains(body.getArgument(i))) {
        body.eraseArgument(i);
        op->eraseOperand(i);
      }
  }

  /// The op with only the results its terminator still yields.
  void rebuild(Operation *op) {
    SmallVector<Value> kept;
    for (Value result : op->getResults())
      if (read.contains(result))
        kept.push_back(result);
    if (kept.size() == op->getNumResults())
      return;
    OperationState state(op->getLoc(), op->getName());
    state.addOperands(op->getOperands());
    state.addAttributes(op->getAttrs());
    for (Value result : kept)
      state.addTypes(result.getType());
    state.addRegion()->takeBody(op->getRegion(0));
    OpBuilder b(op);
    Operation *shrunk = b.create(state);
    for (auto [old, now] : llvm::zip(kept, shrunk->getResults()))
      old.replaceAllUsesWith(now);
    op->erase();
  }

private:
  const llvm::DenseSet<Value> &read;
};

} // namespace

void dist::reduceToEvalStep(ModelOp model) {
  unfuseLosses(model);

  // What the loss depends on: `kept` ops, and the values they `read`.
  llvm::DenseSet<Operation *> kept;
  llvm::DenseSet<Value> read;
  Operation *ret = model.getBody().front().getTerminator();
  kept.insert(ret);
  SmallVector<Value> work{model.getLoss()};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!read.insert(v).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      // A unit's, backward's or micro-batch loop's argument: its operand.
      work.push_back(
          arg.getOwner()->getParentOp()->getOperand(arg.getArgNumber()));
      continue;
    }
    Operation *def = v.getDefiningOp();
    kept.insert(def);
    if (def->getNumRegions()) {
      Operation *yield = def->getRegion(0).front().getTerminator();
      kept.insert(yield);
      work.push_back(yield->getOperand(cast<OpResult>(v).getResultNumber()));
      continue;
    }
    llvm::append_range(work, def->getOperands());
  }
  // Parameter declarations are the state evaluation reads (the ledger
  // counts them whether read or not). The frees go: a buffer dies after
  // its last use (BufferLiveness), which without a backward may come
  // before the free the training step placed (a gather kept for the
  // backward, reshard-after-forward=false).
  // So does a unit they name, which the loss may not read (then emptied):
  // a param's unit must exist.
  llvm::StringSet<> owners;
  model.walk([&](train::ParamOp param) {
    if (std::optional<StringRef> unit = param.getUnit())
      owners.insert(*unit);
  });
  auto stays = [&](Operation *op) {
    if (kept.contains(op) || isa<train::ParamOp, FlatParamOp>(op))
      return true;
    auto unit = dyn_cast<train::UnitOp>(op);
    if (!unit || !owners.contains(unit.getName()))
      return false;
    kept.insert(unit.getBody().front().getTerminator());
    return true;
  };

  SmallVector<Operation *> dead, regions;
  model.getBody().walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (!stays(op)) {
      dead.push_back(op);
      return WalkResult::skip();
    }
    if (op->getNumRegions())
      regions.push_back(op);
    return WalkResult::advance();
  });
  for (Operation *op : dead)
    op->dropAllReferences();
  // Inner regions first: an outer argument an inner op passes on is read
  // until the inner op drops that operand.
  RegionPruner pruner(read);
  for (Operation *op : llvm::reverse(regions))
    pruner.dropUnread(op);
  for (Operation *op : llvm::reverse(dead))
    op->erase();
  for (Operation *op : regions)
    pruner.rebuild(op);
}

FailureOr<EvalStep> dist::buildEvalStep(ModelOp model) {
  auto module = model->getParentOfType<ModuleOp>();
  EvalStep eval{OwningOpRef<ModuleOp>(module.clone()), nullptr};
  eval.module->walk([&](ModelOp copy) {
    if (copy.getSymName() == model.getSymName())
      eval.model = copy;
  });
  reduceToEvalStep(eval.model);
  // The pass manager verifies what the pass makes; this copy, made outside
  // one, is verified here.
  if (failed(verify(eval.model))) {
    model.emitOpError("reduces to an evaluation step that does not verify "
                      "(a shardc bug: the errors above are the copy's)");
    return failure();
  }
  return eval;
}

int64_t dist::predictEvalPeak(const LedgerReport &step, ModelOp eval) {
  // The evaluation step has no update: its ledger counts no optimizer
  // state, which stays in memory all the same (in the host's, offloaded).
  return computeLedger(eval).peak + step.deviceOptimizerBytes();
}

namespace {

struct ShardcEvalStepPass
    : shardc::dist::impl::ShardcEvalStepPassBase<ShardcEvalStepPass> {
  void runOnOperation() override {
    FailureOr<SmallVector<ModelOp>> models = train::getModels(getOperation());
    if (failed(models))
      return signalPassFailure();
    for (ModelOp model : *models)
      reduceToEvalStep(model);
  }
};

} // namespace
