//===- Shard.cpp - Insert the collectives of a data-parallel strategy -----===//

#include "shardc/Dialect/Dist/Analysis/BufferLiveness.h"
#include "shardc/Dialect/Dist/Transforms/Passes.h"
#include "shardc/Support/PassOptions.h"

#include "Retype.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#define DEBUG_TYPE "shardc-shard"

namespace shardc::dist {
#define GEN_PASS_DEF_SHARDCSHARDPASS
#include "shardc/Dialect/Dist/Transforms/Passes.h.inc"
} // namespace shardc::dist

using namespace mlir;
using namespace shardc;
using namespace shardc::dist;
using train::ModelOp;
using train::ParamOp;

const char *dist::strategyName(Strategy strategy) {
  switch (strategy) {
  case Strategy::ddp:
    return "ddp";
  case Strategy::zero1:
    return "zero1";
  case Strategy::zero2:
    return "zero2";
  case Strategy::zero3:
    return "zero3";
  case Strategy::hsdp:
    return "hsdp";
  }
  return "?";
}

namespace {

/// An option's number for an error, in %g's 6 digits: 0.5, 25,
/// 9.22337e+18, nan.
std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

constexpr StringLiteral kMeshName = "mesh";
constexpr StringLiteral kShardAxis = "shard";
constexpr StringLiteral kReplicateAxis = "replicate";
// The shard axis cut in two by reshard-after-forward=K: `local` groups K
// consecutive ranks, `node` the S / K such groups.
constexpr StringLiteral kNodeAxis = "node";
constexpr StringLiteral kLocalAxis = kLocalAxisName;

Type elementTypeOf(MLIRContext *ctx, DType d) {
  return d == DType::bf16 ? Type(BFloat16Type::get(ctx))
                          : Type(Float32Type::get(ctx));
}

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// This rank's dim0 shard of `full` over `n` ranks (torch.chunk sizes, padded
/// to the largest chunk).
RankedTensorType dim0Shard(RankedTensorType full, int64_t n) {
  SmallVector<int64_t> shape(full.getShape());
  shape[0] = llvm::divideCeil(shape[0], n);
  return full.clone(shape);
}

/// Everything the pass decides once per run.
struct Plan {
  Strategy strategy;
  SmallVector<int64_t> meshShape; // [N] or [R, S], as the option says
  /// The ranks a unit's gathered params stay sharded over from its forward
  /// to its backward (reshard-after-forward): the shard axis's (true, which
  /// on an axis of one rank still frees them: offloaded params come from
  /// host memory again), 0 (false: kept whole), or K between them.
  int64_t reshardRanks;
  /// Whether the unit whose forward runs last reshards too (else it keeps
  /// its gather whole for its backward, which follows at once).
  bool reshardLastUnit;
  Type paramType, reduceType;
  int64_t gradAccum;
  GradSync gradSync;
  int64_t bucketBytes; // ddp, zero1/zero2 flat; 0: a collective per gradient
  Layout layout;
  int64_t unitBucketBytes; // zero3/hsdp flat: small units share a flat param

  bool shardsParams() const {
    return strategy == Strategy::zero3 || strategy == Strategy::hsdp;
  }
  bool shardsOptimizer() const { return strategy != Strategy::ddp; }
  /// zero2, zero3 and hsdp reduce-scatter each gradient as the backward
  /// produces it; ddp and zero1 hold it whole until the optimizer step.
  bool shardsGrads() const {
    return strategy == Strategy::zero2 || shardsParams();
  }
  /// FSDP1's flat parameters (zero3, hsdp) or flat optimizer pieces
  /// (zero1, zero2).
  bool flat() const {
    return layout == Layout::flat && strategy != Strategy::ddp;
  }
  int64_t shardRanks() const { return meshShape.back(); }
  /// reshard-after-forward=K with 1 < K < S: the shard axis is cut in two.
  bool reshardsPartly() const {
    return reshardRanks > 1 && reshardRanks < shardRanks();
  }
  /// The axes a shard spans: `shard`, or `node` and `local`.
  SmallVector<StringRef> shardAxisNames() const {
    if (reshardsPartly())
      return {kNodeAxis, kLocalAxis};
    return {kShardAxis};
  }
  int64_t dataParallelRanks() const {
    int64_t n = 1;
    for (int64_t s : meshShape)
      n *= s;
    return n;
  }
  SmallVector<StringRef> allAxes() const {
    SmallVector<StringRef> axes;
    if (meshShape.size() == 2)
      axes.push_back(kReplicateAxis);
    llvm::append_range(axes, shardAxisNames());
    return axes;
  }
  /// The sizes of allAxes().
  SmallVector<int64_t> meshOpShape() const {
    SmallVector<int64_t> shape(meshShape.begin(), meshShape.end() - 1);
    if (reshardsPartly())
      llvm::append_values(shape, shardRanks() / reshardRanks, reshardRanks);
    else
      shape.push_back(shardRanks());
    return shape;
  }
};

/// Parses `N` or `RxS`, at most kMaxRanks ranks in all.
FailureOr<SmallVector<int64_t>> parseMesh(StringRef text) {
  SmallVector<StringRef> parts;
  text.split(parts, 'x');
  if (parts.empty() || parts.size() > 2)
    return failure();
  SmallVector<int64_t> shape;
  int64_t ranks = 1;
  for (StringRef part : parts) {
    int64_t size;
    if (part.getAsInteger(10, size) || size <= 0 || size > MeshOp::kMaxRanks)
      return failure();
    ranks *= size;
    if (ranks > MeshOp::kMaxRanks)
      return failure();
    shape.push_back(size);
  }
  return shape;
}

/// Gradients in the order the backward produces them, in buckets of up to
/// `bucketBytes` on the wire, as DDP's compute_bucket_assignment_by_size: a
/// bucket closes once it holds the cap or more (0: a gradient each).
SmallVector<SmallVector<train::AdamWOp>>
fillBuckets(ArrayRef<train::AdamWOp> updates, const Plan &plan) {
  auto producedBefore = [](train::AdamWOp a, train::AdamWOp b) {
    Value ga = a.getGrad(), gb = b.getGrad();
    Operation *da = ga.getDefiningOp(), *db = gb.getDefiningOp();
    if (da != db)
      return da->isBeforeInBlock(db);
    return cast<OpResult>(ga).getResultNumber() <
           cast<OpResult>(gb).getResultNumber();
  };
  SmallVector<train::AdamWOp> order(updates);
  llvm::stable_sort(order, producedBefore);
  SmallVector<SmallVector<train::AdamWOp>> buckets(1);
  int64_t filled = 0;
  for (train::AdamWOp update : order) {
    if (filled >= plan.bucketBytes && !buckets.back().empty()) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(update);
    filled += typeOf(update.getGrad()).getNumElements() *
              plan.reduceType.getIntOrFloatBitWidth() / 8;
  }
  return buckets;
}

class Sharder {
public:
  Sharder(ModelOp model, const Plan &plan)
      : model(model), plan(plan), ctx(model.getContext()),
        meshRef(FlatSymbolRefAttr::get(ctx, kMeshName)) {}

  LogicalResult run();

private:
  ArrayAttr axesAttr(ArrayRef<StringRef> axes) {
    return Builder(ctx).getStrArrayAttr(axes);
  }
  ArrayAttr shardAxes() { return axesAttr(plan.shardAxisNames()); }
  ArrayAttr localAxes() { return axesAttr({kLocalAxis}); }
  ShardAttr shardingOf(Layout layout) {
    SmallVector<StringAttr> axes;
    for (StringRef axis : plan.shardAxisNames())
      axes.push_back(StringAttr::get(ctx, axis));
    return ShardAttr::get(ctx, layout, meshRef, axes);
  }

  void hoistParams();
  void accumulateMicrobatches();
  void groupFlatParams();
  void shardStorage();
  void flattenStorage();
  void gatherAroundUsers(
      SmallVector<Operation *> users,
      function_ref<Value(OpBuilder &, Operation *, Value)> gatherFor);
  void gatherForUnits(ParamOp param);
  void gatherForRoot(ParamOp param);
  void gatherFlatForUnit(FlatParamOp flat, ArrayRef<ParamOp> members);
  void gatherFlatForRoot(FlatParamOp flat, ArrayRef<ParamOp> members);
  LogicalResult splitInputs();
  LogicalResult verifySplit();
  void updateAfterBackward();
  Value reduce(Value grad, Operation *firstUpdate,
               llvm::DenseMap<Operation *, Operation *> &lastAfter);
  void allReduceBuckets(ArrayRef<train::AdamWOp> updates);
  void reduceFlatGradients(ArrayRef<train::AdamWOp> updates,
                           Operation *firstUpdate);
  void reduceGradients();
  void reduceEachMicrobatch();
  void averageLoss();
  void clipGradients();
  void foldSingleRankCollectives();

  Value allGather(OpBuilder &b, Value shard, RankedTensorType full,
                  Layout layout = Layout::dim0, ArrayAttr axes = {}) {
    return AllGatherOp::create(b, shard.getLoc(), full, shard, meshRef,
                               axes ? axes : shardAxes(), /*wire=*/TypeAttr(),
                               LayoutAttr::get(ctx, layout));
  }
  /// reshard-after-forward=K: after `forward`, keeps this rank's shard over
  /// `local` of the params it gathered, and frees them.
  Value keepLocalShard(Operation *forward, Value gathered, Layout layout) {
    OpBuilder b(ctx);
    b.setInsertionPointAfter(forward);
    RankedTensorType full = typeOf(gathered);
    RankedTensorType shard =
        layout == Layout::flat
            ? full.clone({full.getNumElements() / plan.reshardRanks})
            : dim0Shard(full, plan.reshardRanks);
    Value kept =
        TakeShardOp::create(b, forward->getLoc(), shard, gathered, meshRef,
                            localAxes(), LayoutAttr::get(ctx, layout));
    FreeOp::create(b, forward->getLoc(), gathered);
    return kept;
  }
  /// Whether the unit run by `forward` keeps its gathered params whole until
  /// its backward: with reshard-after-forward=false, and for the unit whose
  /// forward runs last unless reshard-last-unit.
  bool keepsWhole(Operation *forward) const {
    return plan.reshardRanks == 0 ||
           (forward == lastForward && !plan.reshardLastUnit);
  }
  /// Gathers a kept shard over `local` for the backward, and frees it.
  Value regatherLocalShard(OpBuilder &b, Value kept, RankedTensorType full,
                           Layout layout) {
    Value gathered = allGather(b, kept, full, layout, localAxes());
    FreeOp::create(b, kept.getLoc(), kept);
    return gathered;
  }
  /// The whole flat buffer of a piece: N pieces.
  RankedTensorType flatWhole(RankedTensorType piece) {
    return piece.clone({piece.getNumElements() * plan.shardRanks()});
  }
  /// Gathers a flat piece and views the members' full tensors in it.
  UnpackOp gatherMembers(OpBuilder &b, Location loc, Value piece,
                         ArrayRef<ParamOp> members) {
    return unpackMembers(
        b, loc, allGather(b, piece, flatWhole(typeOf(piece)), Layout::flat),
        members);
  }
  UnpackOp unpackMembers(OpBuilder &b, Location loc, Value whole,
                         ArrayRef<ParamOp> members) {
    SmallVector<Type> types;
    for (ParamOp member : members)
      types.push_back(member.getFullType());
    return UnpackOp::create(b, loc, types, whole);
  }

  ModelOp model;
  const Plan &plan;
  /// The train.unit whose forward runs last.
  Operation *lastForward = nullptr;
  MLIRContext *ctx;
  FlatSymbolRefAttr meshRef;
  /// With a flat layout: each unit's trainable params, in order ("" is the
  /// root unit), and the group each param belongs to.
  llvm::MapVector<std::string, SmallVector<ParamOp>,
                  std::map<std::string, unsigned>>
      flatGroups;
  llvm::StringMap<std::string> flatGroupOf;
};

//===----------------------------------------------------------------------===//
// The optimizer step after the backward
//===----------------------------------------------------------------------===//

/// The updates form one optimizer step after the whole backward, as
/// --train-autodiff places them: an update written earlier, where its
/// gradient exists (an optimizer overlapped with the backward), moves after
/// the last gradient, keeping the updates' order. The reductions placed
/// before the first update (ZeRO-1's, after the backward) or after a
/// bucket's last gradient then precede every update that reads them.
void Sharder::updateAfterBackward() {
  Block &body = model.getBody().front();
  auto updates = llvm::to_vector(body.getOps<train::AdamWOp>());
  Operation *lastProducer = nullptr;
  for (train::AdamWOp update : updates) {
    Operation *def =
        body.findAncestorOpInBlock(*update.getGrad().getDefiningOp());
    if (!lastProducer || lastProducer->isBeforeInBlock(def))
      lastProducer = def;
  }
  Operation *after = lastProducer;
  for (train::AdamWOp update : updates) {
    if (!update->isBeforeInBlock(lastProducer))
      break;
    update->moveAfter(after);
    after = update;
  }
}

//===----------------------------------------------------------------------===//
// Parameters out of their units
//===----------------------------------------------------------------------===//

/// A unit takes its parameters as inputs and a backward takes them in place
/// of train.param_ref: the params live in the model body, where collectives
/// can be placed around the unit.
void Sharder::hoistParams() {
  Block &body = model.getBody().front();
  llvm::StringMap<ParamOp> byName = model.getParamsByName();
  for (auto unit : llvm::to_vector(body.getOps<train::UnitOp>())) {
    Block &inner = unit.getBody().front();
    for (auto param : llvm::to_vector(inner.getOps<ParamOp>())) {
      OpBuilder b(unit);
      auto hoisted = cast<ParamOp>(b.clone(*param));
      hoisted.setUnit(unit.getName());
      unit->insertOperands(unit->getNumOperands(), {hoisted.getResult()});
      BlockArgument arg = inner.addArgument(param.getType(), param.getLoc());
      param.getResult().replaceAllUsesWith(arg);
      param.erase();
      byName[hoisted.getName()] = hoisted;
    }
  }
  for (auto bwd : body.getOps<train::BackwardOp>()) {
    Block &inner = bwd.getBody().front();
    for (auto ref : llvm::to_vector(inner.getOps<train::ParamRefOp>())) {
      ParamOp param = byName.lookup(ref.getName());
      bwd->insertOperands(bwd->getNumOperands(), {param.getResult()});
      BlockArgument arg = inner.addArgument(ref.getType(), ref.getLoc());
      ref.getResult().replaceAllUsesWith(arg);
      ref.erase();
    }
  }
}

//===----------------------------------------------------------------------===//
// Gradient accumulation
//===----------------------------------------------------------------------===//

/// Moves the forward and backward into a train.microbatches loop: params
/// and inputs stay outside, the loop takes slices of the inputs and yields
/// the gradients the optimizer takes and the loss, each scaled by 1/K.
void Sharder::accumulateMicrobatches() {
  if (plan.gradAccum == 1)
    return;
  Block &body = model.getBody().front();
  Operation *firstDecl = &body.front();
  for (Operation &op : llvm::make_early_inc_range(body))
    if (isa<ParamOp, train::InputOp>(op)) {
      if (&op != firstDecl)
        op.moveBefore(firstDecl);
      firstDecl = op.getNextNode();
      if (!firstDecl)
        break;
    }
  auto updates = llvm::to_vector(body.getOps<train::AdamWOp>());
  auto ret = cast<train::ReturnOp>(body.getTerminator());
  SmallVector<Operation *> steps;
  for (Operation &op : body) {
    if (isa<ParamOp, train::InputOp>(op))
      continue;
    if (&op == updates.front().getOperation())
      break;
    steps.push_back(&op);
  }

  llvm::SetVector<Value> inputs;
  for (auto input : body.getOps<train::InputOp>())
    inputs.insert(input.getResult());
  SmallVector<Value> yields;
  for (train::AdamWOp update : updates)
    yields.push_back(update.getGrad());
  yields.push_back(ret.getLoss());

  OpBuilder b(steps.front());
  SmallVector<Type> types;
  for (Value v : yields)
    types.push_back(v.getType());
  auto loop = train::MicrobatchesOp::create(
      b, model.getLoc(), types, b.getI64IntegerAttr(plan.gradAccum),
      inputs.getArrayRef());
  Block *inner = new Block();
  loop.getBody().push_back(inner);
  for (Value input : inputs) {
    auto whole = cast<RankedTensorType>(input.getType());
    SmallVector<int64_t> shape(whole.getShape());
    shape[0] /= plan.gradAccum;
    BlockArgument slice = inner->addArgument(whole.clone(shape), input.getLoc());
    input.replaceUsesWithIf(slice, [&](OpOperand &use) {
      return llvm::is_contained(steps, body.findAncestorOpInBlock(*use.getOwner()));
    });
  }
  for (Operation *op : steps)
    op->moveBefore(inner, inner->end());

  // Each micro-batch's loss counts 1/K: seed its cotangent with 1/K.
  OpBuilder in = OpBuilder::atBlockEnd(inner);
  double scale = 1.0 / static_cast<double>(plan.gradAccum);
  auto seed = [&](auto grad) {
    OpBuilder at(grad);
    auto seedType = cast<RankedTensorType>(grad.getGrad().getType());
    grad.getGradMutable().assign(arith::ConstantOp::create(
        at, grad.getLoc(),
        DenseElementsAttr::get(seedType, static_cast<float>(scale))));
  };
  loop.walk([&](Operation *op) {
    if (auto grad = dyn_cast<train::CrossEntropyGradOp>(op))
      seed(grad);
    else if (auto fused = dyn_cast<train::CrossEntropyAndGradOp>(op))
      seed(fused);
  });
  Value loss = train::ScaleOp::create(in, ret.getLoc(), ret.getLoss(),
                                      in.getF64FloatAttr(scale));
  SmallVector<Value> yielded(yields.begin(), yields.end() - 1);
  yielded.push_back(loss);
  train::YieldOp::create(in, model.getLoc(), yielded);
  for (auto [update, sum] : llvm::zip(updates, loop.getResults()))
    update.getGradMutable().assign(sum);
  ret.getLossMutable().assign(loop.getResults().back());
  // Seeds the backward no longer uses.
  loop.walk([&](arith::ConstantOp c) {
    if (c.use_empty())
      c.erase();
  });
}

//===----------------------------------------------------------------------===//
// Storage and gathers
//===----------------------------------------------------------------------===//

/// The trainable params of each unit, in declaration order: one flat
/// parameter each (frozen params keep dim0 shards: they have no optimizer
/// state to share a piece of).
///
/// ZeRO-1/2 keep params whole, so their flat pieces need not follow units:
/// as DeepSpeed's reduce buckets, the gradients fill buckets of `bucket-mb`
/// in the order the backward produces them, and each bucket is
/// reduce-scattered once full.
void Sharder::groupFlatParams() {
  if (!plan.flat())
    return;
  Block &body = model.getBody().front();
  if (!plan.shardsParams()) {
    llvm::StringMap<ParamOp> params = model.getParamsByName();
    auto updates = llvm::to_vector(body.getOps<train::AdamWOp>());
    for (auto [i, bucket] : llvm::enumerate(fillBuckets(updates, plan)))
      for (train::AdamWOp update : bucket) {
        std::string name = "bucket" + std::to_string(i);
        flatGroups[name].push_back(params.lookup(update.getName()));
        flatGroupOf[update.getName()] = name;
      }
    return;
  }
  // Each unit's params, units in order; consecutive small units share one
  // flat parameter while it stays within unit-bucket-mb (never the root,
  // which is gathered around the whole step).
  llvm::MapVector<StringRef, SmallVector<ParamOp>> byUnit;
  for (auto param : body.getOps<ParamOp>())
    if (param.isTrainable())
      byUnit[param.getUnitName()].push_back(param);
  // A group is named by its units joined by '+', once it is whole (naming
  // and renaming it as each unit joined was quadratic in the units).
  SmallVector<std::pair<SmallVector<StringRef>, SmallVector<ParamOp>>> groups;
  bool open = false;
  int64_t openBytes = 0;
  for (auto &[unit, params] : byUnit) {
    int64_t bytes = 0;
    for (ParamOp param : params)
      bytes += param.getNumElements() *
               plan.paramType.getIntOrFloatBitWidth() / 8;
    bool joins =
        !unit.empty() && open && openBytes + bytes <= plan.unitBucketBytes;
    if (!joins)
      groups.emplace_back();
    groups.back().first.push_back(unit);
    llvm::append_range(groups.back().second, params);
    open = !unit.empty();
    openBytes = joins ? openBytes + bytes : bytes;
  }
  // (Units named a, b and a+b give two groups of one name: one flat
  // parameter holds both.)
  for (auto &[units, members] : groups) {
    std::string group = llvm::join(units, "+");
    for (ParamOp member : members)
      flatGroupOf[member.getName()] = group;
    llvm::append_range(flatGroups[group], members);
  }
}

void Sharder::shardStorage() {
  Block &body = model.getBody().front();
  if (plan.shardsParams() && plan.flat())
    flattenStorage();
  for (auto param : llvm::to_vector(body.getOps<ParamOp>())) {
    if (plan.shardsParams() && flatGroupOf.count(param.getName()))
      continue;
    RankedTensorType full = param.getType().clone(plan.paramType);
    if (!plan.shardsParams()) {
      param.getResult().setType(full);
      continue;
    }
    param.getResult().setType(dim0Shard(full, plan.shardRanks()));
    param.setShardingAttr(shardingOf(Layout::dim0));
    param.setFullAttr(TypeAttr::get(full));
    if (param.getUnit())
      gatherForUnits(param);
    else
      gatherForRoot(param);
  }
}

/// FSDP1: a unit's params live in its flat parameter; the members declare
/// them and are no longer read.
void Sharder::flattenStorage() {
  for (auto &[unit, members] : flatGroups) {
    int64_t total = 0;
    SmallVector<StringRef> names;
    for (ParamOp member : members) {
      RankedTensorType full = member.getType().clone(plan.paramType);
      member.getResult().setType(full);
      member.setShardingAttr(shardingOf(Layout::flat));
      member.setFullAttr(TypeAttr::get(full));
      total += full.getNumElements();
      names.push_back(member.getName());
    }
    OpBuilder b(members.front());
    auto piece = RankedTensorType::get(
        {static_cast<int64_t>(llvm::divideCeil(total, plan.shardRanks()))}, plan.paramType);
    auto flat = FlatParamOp::create(b, members.front().getLoc(), piece,
                                    b.getStringAttr(unit),
                                    b.getStrArrayAttr(names), meshRef,
                                    shardAxes());
    if (unit.empty())
      gatherFlatForRoot(flat, members);
    else
      gatherFlatForUnit(flat, members);
  }
}

/// zero3: gather before the unit's forward and again before its backward,
/// freeing each gather after; with reshard-after-forward=false, and for the
/// last unit (keepsWhole), the first gather serves both, and with K the
/// forward keeps its shard over `local`,
/// which the backward gathers. `gatherFor(b, user, kept)` rewires `user` to
/// a new gather, or to `kept`, and returns the gathered buffer.
void Sharder::gatherAroundUsers(
    SmallVector<Operation *> users,
    function_ref<Value(OpBuilder &, Operation *, Value)> gatherFor) {
  // The unit's forward first, then its backward.
  llvm::sort(users,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  Value kept, keptShard;
  RankedTensorType fullType;
  Operation *keptBy = nullptr;
  for (auto [i, user] : llvm::enumerate(users)) {
    OpBuilder b(user);
    bool forward = isa<train::UnitOp>(user);
    if (!forward && keptShard)
      kept = regatherLocalShard(b, keptShard, fullType, Layout::dim0);
    keptShard = nullptr;
    Value gathered = gatherFor(b, user, forward ? Value() : kept);
    if (forward && keepsWhole(user)) {
      kept = gathered;
      keptBy = user;
      continue;
    }
    kept = nullptr;
    bool backwardNext =
        i + 1 < users.size() && !isa<train::UnitOp>(users[i + 1]);
    if (forward && plan.reshardsPartly() && backwardNext) {
      fullType = typeOf(gathered);
      keptShard = keepLocalShard(user, gathered, Layout::dim0);
      continue;
    }
    b.setInsertionPointAfter(user);
    FreeOp::create(b, user->getLoc(), gathered);
  }
  // Kept for a backward that does not read the param.
  if (kept) {
    OpBuilder b(ctx);
    b.setInsertionPointAfter(keptBy);
    FreeOp::create(b, kept.getLoc(), kept);
  }
}

void Sharder::gatherForUnits(ParamOp param) {
  Value stored = param.getResult();
  SmallVector<Operation *> users;
  for (Operation *user : stored.getUsers())
    if (!llvm::is_contained(users, user))
      users.push_back(user);
  gatherAroundUsers(users, [&](OpBuilder &b, Operation *user, Value kept) {
    Value gathered = kept ? kept : allGather(b, stored, param.getFullType());
    stored.replaceUsesWithIf(
        gathered, [&](OpOperand &use) { return use.getOwner() == user; });
    return gathered;
  });
}

/// The root unit's params: FSDP2 does not reshard the root after forward,
/// its backward following at once; one gather serves every use.
void Sharder::gatherForRoot(ParamOp param) {
  Value stored = param.getResult();
  if (stored.use_empty())
    return;
  SmallVector<Operation *> users(stored.getUsers());
  Block *block = param->getBlock();
  auto byPosition = [&](Operation *a, Operation *b) {
    return block->findAncestorOpInBlock(*a)->isBeforeInBlock(
        block->findAncestorOpInBlock(*b));
  };
  llvm::sort(users, byPosition);
  OpBuilder b(block->findAncestorOpInBlock(*users.front()));
  Value gathered =
      allGather(b, stored, param.getFullType());
  stored.replaceAllUsesExcept(gathered, gathered.getDefiningOp());
  b.setInsertionPointAfter(block->findAncestorOpInBlock(*users.back()));
  FreeOp::create(b, param.getLoc(), gathered);
}

/// gatherForUnits for a flat parameter: one gather of the whole group of
/// units, the members unpacked from it. A group of several small units is
/// gathered once before the first unit's forward and freed after the last's
/// (after the last backward where keepsWhole; with K, its shard over
/// `local` kept), and gathered once more around their backwards.
void Sharder::gatherFlatForUnit(FlatParamOp flat, ArrayRef<ParamOp> members) {
  SmallVector<Operation *> forwards, backwards;
  for (ParamOp member : members)
    for (Operation *user : member.getResult().getUsers()) {
      auto &phase = isa<train::UnitOp>(user) ? forwards : backwards;
      if (!llvm::is_contained(phase, user))
        phase.push_back(user);
    }
  auto inOrder = [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  };
  llvm::sort(forwards, inOrder);
  llvm::sort(backwards, inOrder);
  auto rewire = [&](UnpackOp views, ArrayRef<Operation *> users) {
    for (auto [member, view] : llvm::zip(members, views.getResults()))
      ParamOp(member).getResult().replaceUsesWithIf(view, [&](OpOperand &use) {
        return llvm::is_contained(users, use.getOwner());
      });
  };
  auto freeAfter = [&](Operation *last, UnpackOp views) {
    OpBuilder b(ctx);
    b.setInsertionPointAfter(last);
    FreeOp::create(b, last->getLoc(), views.getInput());
  };
  UnpackOp kept;
  Value keptShard;
  if (!forwards.empty()) {
    OpBuilder b(forwards.front());
    kept = gatherMembers(b, forwards.front()->getLoc(), flat, members);
    rewire(kept, forwards);
    bool whole = keepsWhole(forwards.back());
    if (plan.reshardsPartly() && !whole && !backwards.empty()) {
      keptShard =
          keepLocalShard(forwards.back(), kept.getInput(), Layout::flat);
      kept = nullptr;
    } else if (!whole || backwards.empty()) {
      freeAfter(forwards.back(), kept);
      kept = nullptr;
    }
  }
  if (backwards.empty())
    return;
  UnpackOp views = kept;
  if (!views) {
    OpBuilder b(backwards.front());
    Location loc = backwards.front()->getLoc();
    views = keptShard
                ? unpackMembers(b, loc,
                                regatherLocalShard(b, keptShard,
                                                   flatWhole(typeOf(flat)),
                                                   Layout::flat),
                                members)
                : gatherMembers(b, loc, flat, members);
  }
  rewire(views, backwards);
  freeAfter(backwards.back(), views);
}

/// gatherForRoot for the root unit's flat parameter.
void Sharder::gatherFlatForRoot(FlatParamOp flat, ArrayRef<ParamOp> members) {
  Block *block = flat->getBlock();
  Operation *first = nullptr, *last = nullptr;
  for (ParamOp member : members)
    for (Operation *user : member.getResult().getUsers()) {
      Operation *anc = block->findAncestorOpInBlock(*user);
      if (!first || anc->isBeforeInBlock(first))
        first = anc;
      if (!last || last->isBeforeInBlock(anc))
        last = anc;
    }
  if (!first)
    return;
  OpBuilder b(first);
  UnpackOp views = gatherMembers(b, flat.getLoc(), flat, members);
  for (auto [member, view] : llvm::zip(members, views.getResults()))
    ParamOp(member).getResult().replaceAllUsesWith(view);
  b.setInsertionPointAfter(last);
  FreeOp::create(b, flat.getLoc(), views.getInput());
}

//===----------------------------------------------------------------------===//
// The batch
//===----------------------------------------------------------------------===//

/// The train.sum_to on the loss's path (through the units' bodies) that
/// sums over the batch, or null. The values split with the batch are those
/// computed from the step's inputs, while they have a dimension 0; a
/// sum_to of one sums the batch where its result drops or shrinks that
/// dimension (it aligns trailing dimensions).
static train::SumToOp findBatchSum(ModelOp model) {
  llvm::DenseSet<Value> split;
  model.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (auto unit = dyn_cast<train::UnitOp>(op)) {
      for (auto [arg, operand] :
           llvm::zip(unit.getBody().getArguments(), unit.getOperands()))
        if (split.contains(operand))
          split.insert(arg);
      return;
    }
    auto splitsIn = [&](Value v) { return split.contains(v); };
    bool fromBatch =
        isa<train::InputOp>(op) || llvm::any_of(op->getOperands(), splitsIn);
    if (isa<train::YieldOp>(op) && isa<train::UnitOp>(op->getParentOp())) {
      for (auto [result, yielded] :
           llvm::zip(op->getParentOp()->getResults(), op->getOperands()))
        if (split.contains(yielded))
          split.insert(result);
      return;
    }
    if (auto sum = dyn_cast<train::SumToOp>(op)) {
      RankedTensorType in = sum.getInput().getType(), out = sum.getType();
      if (in.getRank() > 0 && (out.getRank() < in.getRank() ||
                               out.getDimSize(0) != in.getDimSize(0)))
        return;
    }
    for (Value result : op->getResults())
      if (fromBatch && cast<ShapedType>(result.getType()).getRank() > 0)
        split.insert(result);
  });
  SmallVector<Value> values = {model.getLoss()};
  llvm::DenseSet<Value> seen;
  while (!values.empty()) {
    Value value = values.pop_back_val();
    if (!seen.insert(value).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      if (auto unit = dyn_cast<train::UnitOp>(arg.getOwner()->getParentOp()))
        values.push_back(unit.getOperand(arg.getArgNumber()));
      continue;
    }
    Operation *def = value.getDefiningOp();
    if (auto unit = dyn_cast<train::UnitOp>(def)) {
      Operation *yield = unit.getBody().front().getTerminator();
      values.push_back(
          yield->getOperand(cast<OpResult>(value).getResultNumber()));
      continue;
    }
    if (auto sum = dyn_cast<train::SumToOp>(def);
        sum && split.contains(sum.getInput()) &&
        !split.contains(sum.getResult()))
      return sum;
    llvm::append_range(values, def->getOperands());
  }
  return nullptr;
}

LogicalResult Sharder::splitInputs() {
  int64_t ranks = plan.dataParallelRanks();
  model.setSplit(ranks);
  for (auto input : model.getBody().front().getOps<train::InputOp>()) {
    RankedTensorType type = input.getType();
    SmallVector<int64_t> shape(type.getShape());
    shape[0] /= ranks;
    Type element = isa<FloatType>(type.getElementType())
                       ? plan.paramType
                       : type.getElementType();
    input.getResult().setType(RankedTensorType::get(shape, element));
  }
  if (failed(retypeModel(model)))
    return failure();
  return verifySplit();
}

/// An op whose operands no longer agree once the batch is split (one sized
/// by the whole batch, a param or a constant, meeting a split activation)
/// fails here, naming the split, rather than in the verifier after the pass
/// with shapes the model never had.
LogicalResult Sharder::verifySplit() {
  std::string why;
  Operation *bad = nullptr;
  {
    ScopedDiagnosticHandler capture(model.getContext(), [&](Diagnostic &d) {
      if (why.empty())
        why = d.str();
      return success();
    });
    model.walk([&](Operation *op) {
      if (op == model.getOperation() ||
          succeeded(mlir::verify(op, /*verifyRecursively=*/false)))
        return WalkResult::advance();
      bad = op;
      return WalkResult::interrupt();
    });
  }
  if (!bad)
    return success();
  StringRef reason(why);
  reason.consume_front(("'" + bad->getName().getStringRef() + "' op ").str());
  int64_t ranks = plan.dataParallelRanks();
  bool micro = plan.gradAccum > 1;
  return bad->emitOpError()
         << "does not follow the split of the batch: " << model.getBatch()
         << " over " << ranks << " data-parallel rank" << (ranks > 1 ? "s" : "")
         << (micro ? " and " + std::to_string(plan.gradAccum) + " micro-batches"
                   : std::string())
         << " is " << model.getBatch() / ranks / plan.gradAccum
         << (micro ? " a micro-batch" : " a rank") << ", where it " << reason
         << " (an operand sized by the whole batch, such as a param, does "
            "not split with it)";
}

//===----------------------------------------------------------------------===//
// Gradients and the optimizer
//===----------------------------------------------------------------------===//

/// Reduces `grad` as the strategy says and returns what the optimizer takes.
/// Reductions issued as gradients appear follow each other after the op
/// producing them (`lastAfter`), in parameter order; ZeRO-1's go before
/// `firstUpdate`.
Value Sharder::reduce(Value grad, Operation *firstUpdate,
                      llvm::DenseMap<Operation *, Operation *> &lastAfter) {
  Operation *def = grad.getDefiningOp();
  Operation *&last = lastAfter.try_emplace(def, def).first->second;
  OpBuilder b(ctx);
  b.setInsertionPointAfter(last);
  RankedTensorType gradType = typeOf(grad);
  TypeAttr wire = gradType.getElementType() == plan.reduceType
                      ? TypeAttr()
                      : TypeAttr::get(plan.reduceType);
  Location loc = grad.getLoc();
  auto avg = ReductionAttr::get(ctx, Reduction::avg);

  if (plan.strategy == Strategy::ddp) {
    auto ar = AllReduceOp::create(b, loc, gradType.clone(plan.reduceType),
                                  grad, meshRef, shardAxes(), wire, avg);
    last = ar;
    return ar;
  }
  // Reduce-scatter at once (zero2, zero3, hsdp), freeing the whole
  // gradient, or after the whole backward (zero1, which keeps whole
  // gradients until then).
  RankedTensorType shardType =
      dim0Shard(gradType, plan.shardRanks()).clone(plan.reduceType);
  auto dim0 = LayoutAttr::get(ctx, Layout::dim0);
  if (plan.strategy == Strategy::zero1) {
    b.setInsertionPoint(firstUpdate);
    return ReduceScatterOp::create(b, loc, shardType, grad, meshRef,
                                   shardAxes(), wire, avg, dim0);
  }
  Value shard = ReduceScatterOp::create(b, loc, shardType, grad, meshRef,
                                        shardAxes(), wire, avg, dim0);
  if (plan.strategy == Strategy::hsdp)
    shard = AllReduceOp::create(b, loc, shardType, shard, meshRef,
                                axesAttr({kReplicateAxis}), TypeAttr(), avg);
  last = FreeOp::create(b, loc, grad);
  return shard;
}

/// DDP's buckets, each all-reduced once its last gradient exists.
void Sharder::allReduceBuckets(ArrayRef<train::AdamWOp> updates) {
  SmallVector<SmallVector<train::AdamWOp>> buckets = fillBuckets(updates, plan);

  auto avg = ReductionAttr::get(ctx, Reduction::avg);
  llvm::DenseMap<Operation *, Operation *> lastAfter;
  for (MutableArrayRef<train::AdamWOp> bucket : buckets) {
    Operation *def = bucket.back().getGrad().getDefiningOp();
    Operation *&last = lastAfter.try_emplace(def, def).first->second;
    OpBuilder b(ctx);
    b.setInsertionPointAfter(last);
    Location loc = bucket.back().getLoc();
    SmallVector<Value> grads;
    int64_t count = 0;
    for (train::AdamWOp update : bucket) {
      grads.push_back(update.getGrad());
      count += typeOf(update.getGrad()).getNumElements();
    }
    Type element = typeOf(grads.front()).getElementType();
    TypeAttr wire =
        element == plan.reduceType ? TypeAttr() : TypeAttr::get(plan.reduceType);
    auto flat = RankedTensorType::get({count}, element);
    Value packed = PackOp::create(b, loc, flat, grads);
    Value reduced = AllReduceOp::create(b, loc, flat.clone(plan.reduceType),
                                        packed, meshRef, shardAxes(), wire, avg);
    SmallVector<Type> pieces;
    for (Value g : grads)
      pieces.push_back(typeOf(g).clone(plan.reduceType));
    auto unpack = UnpackOp::create(b, loc, pieces, reduced);
    last = unpack;
    for (auto [update, piece] : llvm::zip(bucket, unpack.getResults()))
      update.getGradMutable().assign(piece);
  }
}

/// With a flat layout each unit's gradients are packed as its flat
/// parameter lays them out, reduce-scattered in one call, and its piece
/// updated by one dist.adamw_flat; ZeRO-1/2 then gather the updated pieces
/// and write the whole params back.
void Sharder::reduceFlatGradients(ArrayRef<train::AdamWOp> updates,
                                  Operation *firstUpdate) {
  llvm::StringMap<train::AdamWOp> updateOf;
  for (train::AdamWOp update : updates)
    updateOf[update.getName()] = update;
  Block &body = model.getBody().front();
  llvm::DenseMap<Operation *, Operation *> lastAfter;
  auto avg = ReductionAttr::get(ctx, Reduction::avg);
  auto flatLayout = LayoutAttr::get(ctx, Layout::flat);
  for (auto &[unit, members] : flatGroups) {
    SmallVector<Value> grads;
    SmallVector<StringRef> names;
    Operation *producer = nullptr;
    for (ParamOp member : members) {
      Value grad = updateOf.lookup(member.getName()).getGrad();
      grads.push_back(grad);
      names.push_back(member.getName());
      Operation *def = body.findAncestorOpInBlock(*grad.getDefiningOp());
      if (!producer || producer->isBeforeInBlock(def))
        producer = def;
    }
    Location loc = updateOf.lookup(names.front()).getLoc();
    OpBuilder b(ctx);
    Operation *&last = lastAfter.try_emplace(producer, producer).first->second;
    if (plan.strategy == Strategy::zero1)
      b.setInsertionPoint(firstUpdate);
    else
      b.setInsertionPointAfter(last);
    Type element = typeOf(grads.front()).getElementType();
    int64_t total = 0;
    for (Value grad : grads)
      total += typeOf(grad).getNumElements();
    auto piece = RankedTensorType::get(
        {static_cast<int64_t>(llvm::divideCeil(total, plan.shardRanks()))}, plan.reduceType);
    TypeAttr wire =
        element == plan.reduceType ? TypeAttr() : TypeAttr::get(plan.reduceType);
    Value packed =
        PackOp::create(b, loc, flatWhole(piece.clone(element)), grads);
    Value shard = ReduceScatterOp::create(b, loc, piece, packed, meshRef,
                                          shardAxes(), wire, avg, flatLayout);
    if (plan.strategy == Strategy::hsdp)
      shard = AllReduceOp::create(b, loc, piece, shard, meshRef,
                                  axesAttr({kReplicateAxis}), TypeAttr(), avg);
    Operation *freed = FreeOp::create(b, loc, packed);
    if (plan.strategy != Strategy::zero1)
      last = freed;

    b.setInsertionPoint(updateOf.lookup(names.front()));
    ArrayAttr params = b.getStrArrayAttr(names);
    if (plan.shardsParams()) {
      AdamWFlatOp::create(b, loc, Type(), b.getStringAttr(unit), params, shard,
                          /*clip=*/Value(), meshRef, shardAxes());
    } else {
      Value updated =
          AdamWFlatOp::create(b, loc, piece.clone(plan.paramType),
                              b.getStringAttr(unit), params, shard,
                              /*clip=*/Value(), meshRef, shardAxes())
              .getUpdated();
      UnpackOp views = gatherMembers(b, loc, updated, members);
      for (auto [member, view] : llvm::zip(members, views.getResults()))
        SetParamOp::create(b, loc, ParamOp(member).getNameAttr(), view);
    }
  }
  // Erased last: the first update anchors ZeRO-1's reductions.
  for (train::AdamWOp update : updates)
    if (flatGroupOf.count(update.getName()))
      update.erase();
}

void Sharder::reduceGradients() {
  Block &body = model.getBody().front();
  auto updates = llvm::to_vector(body.getOps<train::AdamWOp>());
  if (updates.empty())
    return;
  if (plan.strategy == Strategy::ddp && plan.bucketBytes > 0)
    return allReduceBuckets(updates);
  Operation *firstUpdate = updates.front();
  if (plan.flat())
    return reduceFlatGradients(updates, firstUpdate);
  SmallVector<train::AdamWOp> replaced;
  llvm::DenseMap<Operation *, Operation *> lastAfter;
  llvm::StringMap<ParamOp> params = model.getParamsByName();

  // First the reductions, then the updates: ZeRO-1's reduce-scatters all
  // come after the backward, before the first update.
  SmallVector<Value> shards;
  for (train::AdamWOp update : updates)
    shards.push_back(reduce(update.getGrad(), firstUpdate, lastAfter));

  for (auto [update, shard] : llvm::zip(updates, shards)) {
    if (!plan.shardsOptimizer() || plan.shardsParams()) {
      update.getGradMutable().assign(shard);
      continue;
    }
    // ZeRO-1/2: update this rank's shard, gather it, write the param.
    ParamOp param = params.lookup(update.getName());
    Location loc = update.getLoc();
    OpBuilder b(update);
    RankedTensorType stored = param.getType();
    auto upd = AdamWShardOp::create(
        b, loc, typeOf(shard).clone(stored.getElementType()),
        update.getNameAttr(), shard, /*clip=*/Value(), meshRef, shardAxes());
    Value whole = allGather(b, upd, stored);
    SetParamOp::create(b, loc, update.getNameAttr(), whole);
    replaced.push_back(update);
  }
  // Erased last: the first update anchors ZeRO-1's reduce-scatters.
  for (train::AdamWOp update : replaced)
    update.erase();
}

/// grad-sync=microbatch: moves each reduction of gradients the micro-batch
/// loop sums into the loop, onto the micro-batch's gradients, right after
/// the op producing the last of them; the loop then sums the rank's
/// reduced shards, and frees each micro-batch's gradients once reduced.
/// A reduction is linear: the sum of the micro-batches' averages is the
/// average of their sums.
void Sharder::reduceEachMicrobatch() {
  if (plan.gradSync != GradSync::microbatch || !plan.shardsGrads())
    return;
  Block &body = model.getBody().front();
  auto loops = llvm::to_vector(body.getOps<train::MicrobatchesOp>());
  if (loops.empty())
    return;
  train::MicrobatchesOp loop = loops.front();
  Block &inner = loop.getBody().front();
  Operation *yield = inner.getTerminator();
  // What the micro-batch yields for a loop result, or null.
  auto yielded = [&](Value v) -> Value {
    auto result = dyn_cast<OpResult>(v);
    if (!result || result.getOwner() != loop)
      return nullptr;
    return yield->getOperand(result.getResultNumber());
  };
  // The op of the loop's body that computes it (a backward), or null.
  auto producerOf = [&](Value v) -> Operation * {
    Value in = yielded(v);
    Operation *def = in ? in.getDefiningOp() : nullptr;
    return def ? inner.findAncestorOpInBlock(*def) : nullptr;
  };

  // Each chain: [a pack of loop results], a reduce-scatter of them, and the
  // free of what was reduced. hsdp's all-reduce over the replicas stays
  // after the loop, once per step on the summed shard, as FSDP2's
  // set_requires_all_reduce(False) leaves it to the last micro-batch.
  struct Chain {
    SmallVector<Operation *> ops;
    Value reduced;
    AllReduceOp replicas;
  };
  SmallVector<Chain> chains;
  llvm::DenseSet<Operation *> moved;
  for (ReduceScatterOp rs : body.getOps<ReduceScatterOp>()) {
    Chain chain;
    Value input = rs.getInput();
    auto pack = input.getDefiningOp<PackOp>();
    SmallVector<Value> sums =
        pack ? SmallVector<Value>(pack.getInputs()) : SmallVector<Value>{input};
    if (!llvm::all_of(sums, [&](Value sum) { return producerOf(sum); }))
      continue;
    if (pack)
      chain.ops.push_back(pack);
    chain.ops.push_back(rs);
    chain.reduced = rs.getResult();
    if (rs->hasOneUse())
      chain.replicas = dyn_cast<AllReduceOp>(*rs->user_begin());
    for (Operation *user : input.getUsers())
      if (isa<FreeOp>(user))
        chain.ops.push_back(user);
    // Sums read by anything else stay whole, reduced after the loop.
    auto inChain = [&](Operation *user) {
      return llvm::is_contained(chain.ops, user);
    };
    if (!llvm::all_of(
            sums,
            [&](Value sum) { return llvm::all_of(sum.getUsers(), inChain); }) ||
        !llvm::all_of(input.getUsers(), inChain))
      continue;
    moved.insert(chain.ops.begin(), chain.ops.end());
    chains.push_back(std::move(chain));
  }

  // Into the loop, in the order the backward produces the gradients.
  llvm::DenseMap<Operation *, Operation *> lastAfter;
  SmallVector<Value> shards;
  for (Chain &chain : chains) {
    IRMapping inside;
    Operation *producer = nullptr;
    for (Operation *op : chain.ops)
      for (Value operand : op->getOperands())
        if (Operation *def = producerOf(operand)) {
          inside.map(operand, yielded(operand));
          if (!producer || producer->isBeforeInBlock(def))
            producer = def;
        }
    // After the producer, and the chains placed there before.
    Operation *&after = lastAfter.try_emplace(producer, producer).first->second;
    OpBuilder b(ctx);
    b.setInsertionPointAfter(after);
    for (Operation *op : chain.ops)
      after = b.clone(*op, inside);
    // A shard reduced in bf16 is summed in f32, as FSDP2 and DeepSpeed sum
    // theirs, converted at the micro-batch's end: the reduction's wait
    // stays after the next backward.
    Value shard = inside.lookup(chain.reduced);
    auto type = cast<RankedTensorType>(shard.getType());
    if (!type.getElementType().isF32()) {
      auto end = OpBuilder::atBlockTerminator(&inner);
      shard = ConvertOp::create(end, shard.getLoc(),
                                type.clone(end.getF32Type()), shard);
    }
    shards.push_back(shard);
  }

  // The loop again: the results read elsewhere (the loss), then the
  // shards it sums.
  SmallVector<Value> kept, yields;
  for (auto [result, value] :
       llvm::zip(loop.getResults(), yield->getOperands()))
    if (llvm::any_of(result.getUsers(),
                     [&](Operation *user) { return !moved.contains(user); })) {
      kept.push_back(result);
      yields.push_back(value);
    }
  llvm::append_range(yields, shards);
  SmallVector<Type> types;
  for (Value v : yields)
    types.push_back(v.getType());
  OpBuilder b(loop);
  auto summed = train::MicrobatchesOp::create(
      b, loop.getLoc(), types, loop.getCountAttr(), loop.getInputs());
  summed.getBody().takeBody(loop.getBody());
  OpBuilder end = OpBuilder::atBlockEnd(&summed.getBody().front());
  train::YieldOp::create(end, yield->getLoc(), yields);
  yield->erase();
  for (auto [old, now] : llvm::zip(kept, summed.getResults()))
    old.replaceAllUsesWith(now);
  for (auto [chain, now] :
       llvm::zip(chains, summed.getResults().drop_front(kept.size()))) {
    chain.reduced.replaceAllUsesWith(now);
    // A bf16 reduction's shards summed in f32 go to the replicas in bf16,
    // as the step's own all-reduce of an f32 gradient does.
    AllReduceOp replicas = chain.replicas;
    if (!replicas)
      continue;
    Type wire = typeOf(replicas.getResult()).getElementType();
    if (replicas.getWireAttr() || typeOf(now).getElementType() == wire)
      continue;
    OpBuilder b(replicas);
    auto wired = AllReduceOp::create(
        b, replicas.getLoc(), replicas.getType(), now, replicas.getMeshAttr(),
        replicas.getAxes(), TypeAttr::get(wire), replicas.getReductionAttr());
    replicas.replaceAllUsesWith(wired.getResult());
    replicas.erase();
  }
  for (Chain &chain : llvm::reverse(chains))
    for (Operation *op : llvm::reverse(chain.ops))
      op->erase();
  loop.erase();
}

/// Each rank's loss is the mean over its examples; their mean is the
/// single-rank loss.
void Sharder::averageLoss() {
  auto ret = cast<train::ReturnOp>(model.getBody().front().getTerminator());
  OpBuilder b(ret);
  Value loss = ret.getLoss();
  auto avg = AllReduceOp::create(b, loss.getLoc(), loss.getType(), loss,
                                 meshRef, axesAttr(plan.allAxes()), TypeAttr(),
                                 ReductionAttr::get(ctx, Reduction::avg));
  ret.getLossMutable().assign(avg);
}

/// #train.adamw's max_grad_norm: the squares of the gradients the updates
/// take, summed per rank (`dist.sum_squares`), each group of ranks holding
/// distinct pieces of them (ZeRO's shards; none under DDP, whose gradients
/// are whole, nor over HSDP's replicas, which hold the same pieces)
/// all-reducing its sum, and one `dist.clip_coefficient` that every update
/// takes. The updates, and what reads their results, move after it.
void Sharder::clipGradients() {
  double maxNorm = model.getOptimizer().getMaxGradNorm().convertToDouble();
  if (maxNorm <= 0)
    return;
  Block &body = model.getBody().front();
  SmallVector<train::OptimizerUpdateOpInterface> updates(
      body.getOps<train::OptimizerUpdateOpInterface>());
  if (updates.empty())
    return;
  // The ranks holding distinct pieces of an update's gradient span `axes`.
  auto axesOf = [&](Operation *update) {
    if (auto shard = dyn_cast<AdamWShardOp>(update))
      return shard.getAxes();
    if (auto flat = dyn_cast<AdamWFlatOp>(update))
      return flat.getAxes();
    return plan.shardsParams() ? shardAxes() : axesAttr({});
  };
  llvm::MapVector<ArrayAttr, SmallVector<Value>> gradsOver;
  Operation *lastProducer = nullptr;
  for (train::OptimizerUpdateOpInterface update : updates) {
    Value grad = update.getGrad();
    gradsOver[axesOf(update)].push_back(grad);
    Operation *def = body.findAncestorOpInBlock(*grad.getDefiningOp());
    if (!lastProducer || lastProducer->isBeforeInBlock(def))
      lastProducer = def;
  }
  OpBuilder b(ctx);
  b.setInsertionPointAfter(lastProducer);
  Location loc = model.getLoc();
  SmallVector<Value> sums;
  for (auto &[axes, grads] : gradsOver) {
    Value sum = SumSquaresOp::create(b, loc, grads);
    if (!axes.empty())
      sum = AllReduceOp::create(b, loc, sum.getType(), sum, meshRef, axes,
                                TypeAttr(),
                                ReductionAttr::get(ctx, Reduction::sum));
    sums.push_back(sum);
  }
  auto clip =
      ClipCoefficientOp::create(b, loc, sums, b.getF64FloatAttr(maxNorm));

  // Updates issued before the coefficient exists (ZeRO-1/2 flat buckets
  // update as each is reduced) wait for it, with their results' readers.
  llvm::SetVector<Operation *> moved;
  for (train::OptimizerUpdateOpInterface update : updates)
    if (update->isBeforeInBlock(clip))
      moved.insert(update);
  for (size_t i = 0; i < moved.size(); ++i)
    for (Value result : moved[i]->getResults())
      for (Operation *user : result.getUsers())
        if (Operation *anc = body.findAncestorOpInBlock(*user))
          if (anc->isBeforeInBlock(clip))
            moved.insert(anc);
  SmallVector<Operation *> order = moved.takeVector();
  llvm::sort(order,
             [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
  Operation *after = clip;
  for (Operation *op : order) {
    op->moveAfter(after);
    after = op;
  }
  for (train::OptimizerUpdateOpInterface update : updates)
    update.getClipMutable().assign(clip);
}

/// Whether `user` runs after `op`: in `op`'s block or an enclosing one.
static bool runsAfter(Operation *user, Operation *op) {
  for (Operation *at = op; at; at = at->getParentOp()) {
    Operation *ancestor = at->getBlock()->findAncestorOpInBlock(*user);
    if (ancestor)
      return ancestor != at && at->isBeforeInBlock(ancestor);
  }
  return false;
}

/// A collective over a group of one rank (an axis of size 1: mesh 1, or
/// HSDP's Rx1 and 1xS) moves nothing: where it neither casts nor pads (its
/// result has its input's type) its result is its input, as XLA folds
/// single-replica collectives, and a bucket it no longer carries is not
/// packed. One that casts (its input to the wire type, that to its result
/// type) is a dist.convert where one conversion does both: unless f32 goes
/// through a bf16 wire into an f32 result, which stays. Frees move with the
/// values: a free of the input that a folded result's reader now follows goes,
/// and a parameter's storage, which a folded gather made the unit read, is
/// never freed. With offload-params a gather of a stored shard stays: it
/// brings the shard from host memory.
void Sharder::foldSingleRankCollectives() {
  SmallVector<Operation *> folded;
  model.walk([&](Operation *op) {
    auto [input, axes, wire] =
        TypeSwitch<Operation *, std::tuple<Value, ArrayAttr, TypeAttr>>(op)
            .Case<AllGatherOp, ReduceScatterOp, AllReduceOp>([](auto c) {
              return std::make_tuple(c.getInput(), c.getAxes(),
                                     c.getWireAttr());
            })
            .Default([](Operation *) {
              return std::make_tuple(Value(), ArrayAttr(), TypeAttr());
            });
    if (!input || getGroupSize(op, meshRef, axes) != 1)
      return;
    // A stored shard in host memory: the gather is its copy to the device.
    if (readsHostMemory(op))
      return;
    auto in = typeOf(input), out = typeOf(op->getResult(0));
    Type element = in.getElementType();
    Type through = wire ? wire.getValue() : element;
    if (in.getShape() == out.getShape() &&
        (through == element || through == out.getElementType() ||
         (element.isBF16() && through.isF32())))
      folded.push_back(op);
  });
  for (Operation *op : folded) {
    Value input = op->getOperand(0), result = op->getResult(0);
    if (input.getType() != result.getType()) {
      OpBuilder b(op);
      input = ConvertOp::create(b, op->getLoc(), result.getType(), input);
    }
    result.replaceAllUsesWith(input);
    op->erase();
  }
  if (folded.empty())
    return;
  // A bucket that no longer travels (DDP's on one rank): its readers read
  // what was packed into it, and it goes.
  SmallVector<UnpackOp> unpacks;
  model.walk([&](UnpackOp unpack) { unpacks.push_back(unpack); });
  for (UnpackOp unpack : unpacks) {
    auto pack = unpack.getInput().getDefiningOp<PackOp>();
    if (!pack || pack.getInputs().getTypes() != unpack.getResultTypes())
      continue;
    unpack->replaceAllUsesWith(pack.getInputs());
    unpack.erase();
    if (llvm::all_of(pack->getUsers(),
                     [](Operation *user) { return isa<FreeOp>(user); })) {
      for (Operation *free : llvm::to_vector(pack->getUsers()))
        free->erase();
      pack.erase();
    }
  }
  SmallVector<FreeOp> frees;
  model.walk([&](FreeOp free) { frees.push_back(free); });
  llvm::DenseSet<Value> freed;
  // Last first: of a value's frees, the last one stays.
  for (FreeOp free : llvm::reverse(frees)) {
    Value value = free.getValue();
    bool persistent =
        isa_and_nonnull<ParamOp, FlatParamOp>(value.getDefiningOp());
    bool readLater = llvm::any_of(value.getUsers(), [&](Operation *user) {
      return !isa<FreeOp>(user) && runsAfter(user, free);
    });
    if (persistent || readLater || !freed.insert(value).second)
      free.erase();
  }
}

LogicalResult Sharder::run() {
  updateAfterBackward();
  hoistParams();
  groupFlatParams();
  accumulateMicrobatches();
  model.walk([&](train::UnitOp unit) { lastForward = unit; });
  shardStorage();
  if (failed(splitInputs()))
    return failure();
  reduceGradients();
  reduceEachMicrobatch();
  averageLoss();
  clipGradients();
  foldSingleRankCollectives();
  return success();
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct ShardcShardPass
    : shardc::NamedOptionErrors<
          shardc::dist::impl::ShardcShardPassBase<ShardcShardPass>> {
  using NamedOptionErrors::NamedOptionErrors;
  void runOnOperation() override;
};

void ShardcShardPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto fail = [&](const Twine &message) {
    module.emitError() << message;
    signalPassFailure();
  };

  FailureOr<SmallVector<int64_t>> meshShape = parseMesh(mesh);
  if (failed(meshShape))
    return fail("invalid mesh '" + mesh +
                "': expected N, or RxS for hsdp, with positive sizes and at "
                "most " + Twine(MeshOp::kMaxRanks) + " ranks");
  const char *name = strategyName(strategy);
  if (strategy == Strategy::hsdp && meshShape->size() != 2)
    return fail(Twine("strategy hsdp needs a 2-D mesh RxS (replicate x "
                      "shard), got mesh=") + mesh);
  if (strategy != Strategy::hsdp && meshShape->size() != 1)
    return fail(Twine("strategy ") + name + " needs a 1-D mesh N, got mesh=" +
                mesh);

  FailureOr<ModelOp> single = train::getSingleModel(module, "sharding");
  if (failed(single))
    return signalPassFailure();
  ModelOp model = *single;
  if (SymbolTable::lookupSymbolIn(module, kMeshName) || model.getSplit())
    return (void)(model.emitOpError() << "is already sharded"),
           signalPassFailure();
  if (model.getBody().getOps<train::AdamWOp>().empty())
    return (void)(model.emitOpError()
                  << "has no optimizer step: run --train-autodiff first"),
           signalPassFailure();

  if (gradAccum <= 0)
    return fail("expected grad-accum >= 1, got " +
                Twine(static_cast<int64_t>(gradAccum)));
  // MiB, fractions too, in whole bytes.
  auto bucketBytes = [](double mb) {
    return static_cast<int64_t>(std::llround(mb * (int64_t(1) << 20)));
  };
  for (auto [option, mb] : {std::pair<StringRef, double>{"bucket-mb", bucketMB},
                            {"unit-bucket-mb", unitBucketMB}})
    if (!isBucketMBInRange(mb))
      return fail("expected 0 <= " + option + " <= 2^40, got " +
                  formatNumber(mb));
  // An option the strategy does not use is a likely mistake: said, as a
  // compiler warns of an unused flag (its default aside), and ignored.
  bool shardsParams = strategy == Strategy::zero3 || strategy == Strategy::hsdp;
  bool flat = layout == Layout::flat;
  std::string setting =
      std::string("strategy ") + name + (flat ? " with layout=flat" : "");
  // For the options whose use turns on the layout: the default named too.
  std::string layoutSetting =
      strategy == Strategy::ddp
          ? setting
          : std::string("strategy ") + name +
                " with layout=" + (flat ? "flat" : "dim0");
  bool bucketsGrads =
      strategy == Strategy::ddp ||
      (flat && (strategy == Strategy::zero1 || strategy == Strategy::zero2));
  if (strategy == Strategy::ddp && flat)
    module.emitWarning() << "layout=flat: ignored by strategy ddp, which "
                            "shards nothing";
  // reshard-after-forward: true, false, or the ranks to reshard to.
  int64_t shardRanks = meshShape->back(), reshardRanks = shardRanks;
  StringRef reshard = reshardAfterForward;
  if (!shardsParams && reshard != "true")
    module.emitWarning() << "reshard-after-forward=" << reshard
                         << ": ignored by " << setting
                         << ", which does not gather params "
                         << "(it applies to zero3 and hsdp)";
  else if (reshard == "false")
    reshardRanks = 0;
  else if (reshard != "true" &&
           (reshard.getAsInteger(10, reshardRanks) || reshardRanks < 2 ||
            shardRanks % reshardRanks != 0))
    return fail("invalid reshard-after-forward '" + reshard +
                "': expected true, false, or a number of ranks from 2 "
                "dividing the shard axis's " +
                Twine(shardRanks) + " (mesh=" + mesh + ")");
  if (reshardLastUnit && !shardsParams)
    module.emitWarning() << "reshard-last-unit=true: ignored by " << setting
                         << ", which does not gather params (it applies to "
                            "zero3 and hsdp)";
  else if (reshardLastUnit && reshard == "false")
    module.emitWarning() << "reshard-last-unit=true: ignored with "
                            "reshard-after-forward=false, which keeps every "
                            "unit's gather";
  if (!bucketsGrads && bucketMB != kDefaultBucketMB)
    module.emitWarning() << "bucket-mb: ignored by " << layoutSetting
                         << " (it applies to ddp, and zero1/zero2 with "
                            "layout=flat)";
  if (!(shardsParams && flat) && unitBucketMB != 0)
    module.emitWarning() << "unit-bucket-mb: ignored by " << layoutSetting
                         << " (it applies to zero3 and hsdp with layout=flat)";
  // offload-params: the update writes host-resident shards, so it runs on
  // the host; a param used in place on the device (ddp, zero1, zero2)
  // cannot live there.
  if (offloadParams && !offloadOptimizer)
    return fail("offload-params=true needs offload-optimizer=true: the "
                "params in host memory are updated there, by the host's "
                "optimizer step");
  // A model written in bf16 (shardc-gen --dtype bf16) stored in f32: the
  // retyping is what param-dtype says, but the model's type is likely the
  // intent.
  bool bf16Model = false;
  model.walk([&](train::ParamOp param) {
    bf16Model |= param.getType().getElementType().isBF16();
  });
  if (bf16Model && paramDType == DType::f32)
    module.emitWarning()
        << "param-dtype=f32 stores the model's bf16 params in f32; "
           "param-dtype=bf16 keeps them in bf16 (with f32 masters in the "
           "optimizer)";
  if (offloadParams && !shardsParams)
    return fail(Twine("offload-params=true needs strategy zero3 or hsdp, "
                      "whose params are gathered before use; strategy ") +
                name + " reads them in place on the device");
  Plan plan{strategy,
            *meshShape,
            reshardRanks,
            reshardLastUnit,
            elementTypeOf(&getContext(), paramDType),
            elementTypeOf(&getContext(), reduceDType),
            gradAccum,
            gradSync,
            bucketBytes(bucketMB),
            layout,
            bucketBytes(unitBucketMB)};
  if (gradSync == GradSync::microbatch && gradAccum == 1)
    module.emitWarning() << "grad-sync=microbatch: ignored without "
                            "grad-accum > 1 (the step is one micro-batch)";
  else if (gradSync == GradSync::microbatch && !plan.shardsGrads())
    module.emitWarning() << "grad-sync=microbatch: ignored by strategy " << name
                         << ", which holds whole gradients until the "
                            "optimizer step (it applies to zero2, zero3 and "
                            "hsdp)";
  else if (gradSync == GradSync::microbatch && plan.shardRanks() == 1)
    module.emitWarning() << "grad-sync=microbatch: ignored over a shard axis "
                            "of one rank (mesh="
                         << mesh
                         << "): each gradient is whole there, with nothing to "
                            "reduce-scatter";
  // Params the plan cannot place. Params (ZeRO-3, HSDP) and optimizer state
  // (ZeRO-1/2) are split along dim 0, which a scalar does not have. (A flat
  // parameter is gathered, reduced and updated as one, which needs each
  // member's gradient: the model's verifier has every trainable param
  // updated.)
  WalkResult unplaceable = model.walk([&](ParamOp param) {
    bool trainable = param.isTrainable();
    if (plan.shardsOptimizer() && param.getFullType().getRank() == 0 &&
        (trainable || plan.shardsParams())) {
      param.emitOpError() << "is a scalar: strategy " << name
                          << " splits params or their optimizer state along "
                             "dim 0; give it one (tensor<1x...>), or use "
                             "strategy ddp";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (unplaceable.wasInterrupted())
    return signalPassFailure();
  // Divided in two steps: ranks times micro-batches could overflow.
  int64_t ranks = plan.dataParallelRanks();
  if (model.getBatch() % ranks != 0 ||
      (model.getBatch() / ranks) % gradAccum != 0)
    return (void)(model.emitOpError()
                  << "has a global batch of " << model.getBatch()
                  << " that does not divide over " << ranks
                  << " data-parallel ranks (mesh=" << mesh << ")"
                  << (gradAccum > 1 ? " times " + std::to_string(gradAccum) +
                                          " micro-batches"
                                    : std::string())),
           signalPassFailure();
  // Ranks and micro-batches average their losses and gradients (as DDP and
  // FSDP do), the same maths only for a loss that is a mean over the batch
  // (train.cross_entropy's): a sum over it would be divided by their count.
  if (int64_t ways = ranks * gradAccum; ways > 1)
    if (train::SumToOp sum = findBatchSum(model))
      return (void)(sum.emitOpError()
                    << "sums the loss over the batch, which the step splits "
                    << ways
                    << " ways (ranks times micro-batches) and averages: the "
                       "loss and its gradients would be 1/"
                    << ways
                    << " of the unsplit step's (a loss averaged over the "
                       "batch, as train.cross_entropy's, is the same maths "
                       "split)"),
             signalPassFailure();
  if (gradAccum > 1 && model.getBody().getOps<train::InputOp>().empty())
    return (void)(model.emitOpError() << "has no train.input for grad-accum="
                                      << static_cast<int64_t>(gradAccum)
                                      << " to split into micro-batches"),
           signalPassFailure();

  OpBuilder b(module.getBodyRegion());
  b.setInsertionPointToStart(module.getBody());
  MeshOp::create(b, model.getLoc(), kMeshName,
                 b.getStrArrayAttr(plan.allAxes()),
                 b.getDenseI64ArrayAttr(plan.meshOpShape()));

  // Where the state lives, before sharding: the fold of single-rank
  // gathers asks it (readsHostMemory).
  if (offloadOptimizer)
    model->setAttr(kOffloadOptimizerAttrName, b.getUnitAttr());
  if (offloadParams)
    model->setAttr(kOffloadParamsAttrName, b.getUnitAttr());
  if (failed(Sharder(model, plan).run()))
    return signalPassFailure();
  // What the ledger needs to know of the strategy beyond the IR: whether a
  // rank holds whole gradients until its optimizer step (ddp, zero1).
  model->setAttr(kStrategyAttrName, b.getStringAttr(name));
}

} // namespace
