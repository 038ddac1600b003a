//===- Schedule.cpp - Asynchronous collectives, prefetch, early frees -----===//

#include "shardc/Dialect/Dist/Transforms/Passes.h"
#include "shardc/Support/PassOptions.h"

#include "shardc/Dialect/Dist/Analysis/BufferLiveness.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#define DEBUG_TYPE "shardc-schedule"

namespace shardc::dist {
#define GEN_PASS_DEF_SHARDCSCHEDULEPASS
#include "shardc/Dialect/Dist/Transforms/Passes.h.inc"
} // namespace shardc::dist

using namespace mlir;
using namespace shardc;
using namespace shardc::dist;
using train::ModelOp;

namespace {

bool isCollective(Operation *op) {
  return isa<AllGatherOp, AllGatherStartOp, ReduceScatterOp,
             ReduceScatterStartOp, AllReduceOp, AllReduceStartOp, WaitOp>(op);
}

class Scheduler {
public:
  Scheduler(ModelOp model, int64_t prefetch)
      : model(model), body(model.getBody().front()), prefetch(prefetch) {}

  void run() {
    hoistParams();
    // Units run in the step's block, or in its micro-batch loop.
    Block *unitsBlock = &body;
    for (auto loop : body.getOps<train::MicrobatchesOp>())
      unitsBlock = &loop.getBody().front();
    for (Operation &op : *unitsBlock) {
      if (isa<train::UnitOp>(op))
        forwardUnits.push_back(&op);
      else if (isa<train::BackwardOp>(op))
        backwards.push_back(&op);
    }
    SmallVector<Block *> blocks = {&body};
    if (unitsBlock != &body)
      blocks.push_back(unitsBlock);
    SmallVector<AllGatherOp> gathers;
    for (Block *block : blocks)
      for (auto gather : block->getOps<AllGatherOp>())
        if (isa_and_nonnull<train::ParamOp, FlatParamOp, TakeShardOp>(
                gather.getInput().getDefiningOp()))
          gathers.push_back(gather);
    for (AllGatherOp gather : gathers)
      scheduleGather(gather);
    // Gradient reductions: after the loop, or in it (grad-sync=microbatch).
    Operation *loss = model.getLoss().getDefiningOp();
    SmallVector<Operation *> reductions;
    for (Block *block : blocks)
      for (Operation &op : *block)
        if (isa<ReduceScatterOp, AllReduceOp>(op) && &op != loss)
          reductions.push_back(&op);
    for (Operation *op : reductions)
      scheduleReduction(op);
    // Where each free goes, found before any moves: a move invalidates its
    // block's op order, which the next isBeforeInBlock recomputes whole
    // (quadratic in a model's units). A free reads only its buffer, so
    // moving one changes no other free's place.
    SmallVector<std::pair<FreeOp, Operation *>> moves;
    model.walk([&](FreeOp free) {
      if (Operation *last = lastRead(free))
        moves.push_back({free, last});
    });
    for (auto [free, last] : moves)
      free->moveAfter(last);
  }

private:
  /// Parameters are state: declared first, they can be gathered anywhere.
  void hoistParams() {
    Operation *after = nullptr;
    for (auto param : llvm::to_vector(body.getOps<train::ParamOp>())) {
      if (after)
        param->moveAfter(after);
      else
        param->moveBefore(&body.front());
      after = param;
    }
  }

  /// The ops of `block` using `v` (through nested regions), and through
  /// the views a dist.unpack makes of it when `throughViews`.
  SmallVector<Operation *> usersIn(Value v, Block &block, bool throughViews) {
    SmallVector<Operation *> users;
    for (Operation *user : v.getUsers()) {
      if (auto unpack = dyn_cast<UnpackOp>(user); unpack && throughViews)
        for (Value view : unpack.getResults())
          llvm::append_range(users, usersIn(view, block, true));
      if (Operation *anc = block.findAncestorOpInBlock(*user))
        users.push_back(anc);
    }
    return users;
  }

  /// The first op of `block` using `v` (through nested regions), or null.
  Operation *firstUser(Value v, Block &block, bool throughViews = false) {
    Operation *first = nullptr;
    for (Operation *anc : usersIn(v, block, throughViews))
      if (!first || anc->isBeforeInBlock(first))
        first = anc;
    return first;
  }

  /// `units[max(0, i - prefetch)]` where `op` is `units[i]`.
  Operation *ahead(ArrayRef<Operation *> units, Operation *op) {
    auto it = llvm::find(units, op);
    if (it == units.end())
      return op;
    int64_t i = it - units.begin();
    return units[std::max<int64_t>(0, i - prefetch)];
  }

  void scheduleGather(AllGatherOp gather) {
    Block &block = *gather->getBlock();
    Operation *consumer = firstUser(gather.getResult(), block);
    if (!consumer)
      return;
    // A flat parameter is read through the views dist.unpack makes.
    Operation *unit = firstUser(gather.getResult(), block, true);
    Operation *anchor = isa<train::UnitOp>(unit) ? ahead(forwardUnits, unit)
                        : isa<train::BackwardOp>(unit) ? ahead(backwards, unit)
                                                        : consumer;
    if (gather->isBeforeInBlock(anchor))
      anchor = gather;
    OpBuilder b(anchor);
    auto start = AllGatherStartOp::create(
        b, gather.getLoc(), TokenType::get(b.getContext(), gather.getType()),
        gather.getInput(), gather.getMeshAttr(), gather.getAxes(),
        gather.getWireAttr(), gather.getLayoutAttr());
    b.setInsertionPoint(consumer);
    auto wait = WaitOp::create(b, gather.getLoc(), start.getToken());
    gather.getResult().replaceAllUsesWith(wait.getResult());
    // A kept shard (reshard-after-forward=K) is a buffer, read until then.
    asyncReads[start] = wait;
    forget(gather);
    gather.erase();
  }

  /// The first backward after `op` in its block, or null. Every reduction
  /// asks, so the answers are kept: backwards never move, and another op
  /// moving or coming in changes no op's answer but its own (dropped,
  /// forget). A walk from each op would cross every reduction after it
  /// (ZeRO-1's, one a param, all after the backward); an order query
  /// (isBeforeInBlock) would renumber the block after each move (hsdp's
  /// deferred all-reduces).
  Operation *nextBackward(Operation *op) {
    SmallVector<Operation *> walked = {op};
    Operation *found = nullptr;
    for (Operation *next = op->getNextNode(); next;
         next = next->getNextNode()) {
      if (isa<train::BackwardOp>(next)) {
        found = next;
        break;
      }
      if (auto known = nextBackwardOf.find(next);
          known != nextBackwardOf.end()) {
        found = known->second;
        break;
      }
      walked.push_back(next);
    }
    for (Operation *each : walked)
      nextBackwardOf[each] = found;
    return found;
  }
  /// Drops what nextBackward knows of `op`, before it moves or goes.
  void forget(Operation *op) { nextBackwardOf.erase(op); }

  /// The op after the first backward following `op` and before `until`
  /// (where given), or null.
  Operation *afterNextBackward(Operation *op, Operation *until) {
    Operation *backward = nextBackward(op);
    if (!backward ||
        (until && (until == backward || nextBackward(until) == backward)))
      return nullptr;
    return backward->getNextNode();
  }

  /// Moves down what reads a reduction's result without needing it yet, so
  /// that its wait does not land right after its start: the views a
  /// dist.unpack makes of a bucket (ddp), to their first user, and a
  /// reduction of it (hsdp's all-reduce over the replicas of a
  /// reduce-scatter's shard), to after the next backward, which the first
  /// reduction then overlaps.
  void deferReaders(Value result, Block &block) {
    for (Operation *user : llvm::to_vector(result.getUsers())) {
      if (user->getBlock() != &block)
        continue;
      Operation *until = nullptr;
      if (auto unpack = dyn_cast<UnpackOp>(user)) {
        for (Value view : unpack.getResults())
          if (Operation *first = firstUser(view, block, true);
              first && (!until || first->isBeforeInBlock(until)))
            until = first;
        if (until) {
          forget(user);
          user->moveBefore(until);
        }
        continue;
      }
      if (!isa<ReduceScatterOp, AllReduceOp>(user))
        continue;
      until = firstUser(user->getResult(0), block);
      if (Operation *after = afterNextBackward(user, until)) {
        forget(user);
        user->moveBefore(after);
      }
    }
  }

  /// Starts where the gradient appears; waits after the next backward has
  /// been issued, or before the result's first use if earlier.
  void scheduleReduction(Operation *op) {
    Value result = op->getResult(0);
    Block &block = *op->getBlock();
    deferReaders(result, block);
    // A result nothing reads still completes within the step (or the
    // micro-batch).
    Operation *use = firstUser(result, block);
    if (!use)
      use = block.getTerminator();
    Operation *waitBefore = afterNextBackward(op, use);
    if (!waitBefore)
      waitBefore = use;
    OpBuilder b(op);
    auto tokenType =
        TokenType::get(b.getContext(), cast<RankedTensorType>(result.getType()));
    Operation *start;
    if (auto rs = dyn_cast<ReduceScatterOp>(op))
      start = ReduceScatterStartOp::create(
          b, rs.getLoc(), tokenType, rs.getInput(), rs.getMeshAttr(),
          rs.getAxes(), rs.getWireAttr(), rs.getReductionAttr(),
          rs.getLayoutAttr());
    else {
      auto ar = cast<AllReduceOp>(op);
      start = AllReduceStartOp::create(b, ar.getLoc(), tokenType,
                                       ar.getInput(), ar.getMeshAttr(),
                                       ar.getAxes(), ar.getWireAttr(),
                                       ar.getReductionAttr());
    }
    b.setInsertionPoint(waitBefore);
    auto wait = WaitOp::create(b, op->getLoc(), start->getResult(0));
    result.replaceAllUsesWith(wait.getResult());
    asyncReads[start] = wait;
    forget(op);
    op->erase();
  }

  /// Where `free` goes: right after the last use of the buffer (null where
  /// none is in its block); an asynchronous collective uses its input until
  /// its wait, unless it sends a staged copy (cast to the wire type or
  /// padded, getStagingBytes), made as it starts.
  Operation *lastRead(FreeOp free) {
    Operation *last = nullptr;
    Block &block = *free->getBlock();
    for (Operation *anc : usersIn(free.getValue(), block, true)) {
      if (anc == free)
        continue;
      Operation *wait = asyncReads.lookup(anc);
      if (wait && !getStagingBytes(anc))
        anc = wait;
      if (!last || last->isBeforeInBlock(anc))
        last = anc;
    }
    return last;
  }

  ModelOp model;
  Block &body;
  int64_t prefetch;
  SmallVector<Operation *> forwardUnits, backwards;
  llvm::DenseMap<Operation *, Operation *> asyncReads; // start -> wait
  llvm::DenseMap<Operation *, Operation *> nextBackwardOf;
};

/// Every rank runs the same straight-line step, and the same number of
/// micro-batches: a collective nested in any other region could be skipped
/// or reordered by some ranks.
LogicalResult checkSameOrderOnEveryRank(ModelOp model) {
  WalkResult walk = model.walk([&](Operation *op) {
    if (!isCollective(op) ||
        isa<ModelOp, train::MicrobatchesOp>(op->getParentOp()))
      return WalkResult::advance();
    op->emitOpError() << "is nested in '"
                      << op->getParentOp()->getName().getStringRef()
                      << "': every rank must issue each collective, in the "
                         "same order, in the step's own block or its "
                         "micro-batch loop";
    return WalkResult::interrupt();
  });
  return failure(walk.wasInterrupted());
}

struct ShardcSchedulePass
    : shardc::NamedOptionErrors<
          shardc::dist::impl::ShardcSchedulePassBase<ShardcSchedulePass>> {
  using NamedOptionErrors::NamedOptionErrors;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (prefetch < 0) {
      module.emitError() << "expected prefetch >= 0, got "
                         << static_cast<int64_t>(prefetch);
      return signalPassFailure();
    }
    FailureOr<SmallVector<ModelOp>> models = train::getModels(module);
    if (failed(models))
      return signalPassFailure();
    for (ModelOp model : *models) {
      if (!model.getSplit()) {
        model.emitOpError() << "is not sharded: run --shardc-shard first";
        return signalPassFailure();
      }
      bool scheduled = false;
      model.walk([&](Operation *op) {
        scheduled |= isa<AllGatherStartOp, ReduceScatterStartOp,
                         AllReduceStartOp>(op);
      });
      if (scheduled) {
        model.emitOpError() << "is already scheduled";
        return signalPassFailure();
      }
      if (failed(checkSameOrderOnEveryRank(model)))
        return signalPassFailure();
      Scheduler(model, prefetch).run();
    }
  }
};

} // namespace
