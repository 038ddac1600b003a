//===- BufferLiveness.cpp - Which buffers a step holds, and when ----------===//

#include "shardc/Dialect/Dist/Analysis/BufferLiveness.h"

#include "shardc/Dialect/Dist/IR/DistOps.h"
#include "shardc/Dialect/Dist/Transforms/Passes.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace shardc;
using namespace shardc::dist;

int64_t dist::getBufferBytes(Value value) {
  Type type = value.getType();
  if (auto token = dyn_cast<TokenType>(type))
    type = token.getResult();
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return 0;
  return tensor.getNumElements() *
         ((tensor.getElementType().getIntOrFloatBitWidth() + 7) / 8);
}

Type dist::getWireType(Operation *op) {
  return TypeSwitch<Operation *, Type>(op)
      .Case<AllGatherOp, AllGatherStartOp, ReduceScatterOp,
            ReduceScatterStartOp, AllReduceOp, AllReduceStartOp>(
          [](auto c) { return c.getWireType(); })
      .Default([](Operation *) { return Type(); });
}

int64_t dist::getGroupSize(Operation *op, FlatSymbolRefAttr meshRef,
                           ArrayAttr axes) {
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(op, meshRef);
  if (!mesh)
    return 1;
  int64_t size = 1;
  for (Attribute axis : axes)
    size *= mesh.getShape()[mesh.getAxisIndex(cast<StringAttr>(axis).getValue())];
  return size;
}

bool dist::isWithinNodes(Operation *op, FlatSymbolRefAttr meshRef,
                         ArrayAttr axes, int64_t ranksPerNode) {
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(op, meshRef);
  if (!mesh)
    return true;
  ArrayRef<int64_t> shape = mesh.getShape();
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t a = static_cast<int64_t>(shape.size()) - 2; a >= 0; --a)
    strides[a] = strides[a + 1] * shape[a + 1];
  SmallVector<int64_t> indices;
  for (Attribute axis : axes)
    indices.push_back(mesh.getAxisIndex(cast<StringAttr>(axis).getValue()));
  // Each rank shares a node with its group's first rank (its coordinates
  // on `axes` zeroed), or some group crosses a node's edge.
  for (int64_t rank = 0, n = mesh.getNumRanks(); rank < n; ++rank) {
    int64_t first = rank;
    for (int64_t a : indices)
      first -= (rank / strides[a]) % shape[a] * strides[a];
    if (rank / ranksPerNode != first / ranksPerNode)
      return false;
  }
  return true;
}

bool dist::joinsNcclGroup(Operation *first, Operation *next) {
  if (first->getName() != next->getName() ||
      !isa<AllGatherStartOp, ReduceScatterStartOp>(first) ||
      getWireType(first) != getWireType(next) ||
      first->getAttr("axes") != next->getAttr("axes"))
    return false;
  auto scatter = dyn_cast<ReduceScatterStartOp>(first);
  return !scatter || scatter.getReduction() ==
                         cast<ReduceScatterStartOp>(next).getReduction();
}

int64_t dist::getBytesSent(Operation *op) {
  int64_t sent = 0;
  auto ring = [&](auto coll, bool gathers, int64_t factor) {
    int64_t group = getGroupSize(op, coll.getMeshAttr(), coll.getAxes());
    RankedTensorType piece =
        gathers ? coll.getInput().getType() : coll.getResultTensorType();
    int64_t wireBytes = (coll.getWireType().getIntOrFloatBitWidth() + 7) / 8;
    int64_t d = piece.getNumElements() * wireBytes;
    sent = factor == 2 ? (2 * (group - 1) * d + group / 2) / group
                       : (group - 1) * d;
  };
  TypeSwitch<Operation *>(op)
      .Case<AllGatherOp, AllGatherStartOp>([&](auto c) { ring(c, true, 1); })
      .Case<ReduceScatterOp, ReduceScatterStartOp>(
          [&](auto c) { ring(c, false, 1); })
      .Case<AllReduceOp, AllReduceStartOp>([&](auto c) { ring(c, false, 2); });
  return sent;
}

bool dist::readsHostMemory(Operation *op) {
  if (!isa<AllGatherOp, AllGatherStartOp>(op))
    return false;
  Operation *src = op->getOperand(0).getDefiningOp();
  auto model = op->getParentOfType<train::ModelOp>();
  return isa_and_nonnull<train::ParamOp, FlatParamOp>(src) && model &&
         model->hasAttr(kOffloadParamsAttrName);
}

int64_t dist::getStagingBytes(Operation *op) {
  Type wire;
  int64_t sent = 0;
  Value input = op->getNumOperands() ? op->getOperand(0) : Value();
  TypeSwitch<Operation *>(op)
      .Case<AllGatherOp, AllGatherStartOp, AllReduceOp, AllReduceStartOp>(
          [&](auto c) {
            wire = c.getWireType();
            sent = c.getInput().getType().getNumElements();
          })
      .Case<ReduceScatterOp, ReduceScatterStartOp>([&](auto c) {
        wire = c.getWireType();
        int64_t group = getGroupSize(op, c.getMeshAttr(), c.getAxes());
        sent = c.getResultTensorType().getNumElements() * group;
      });
  if (!wire)
    return 0;
  auto inputType = cast<RankedTensorType>(input.getType());
  if (inputType.getElementType() == wire && inputType.getNumElements() == sent)
    return 0;
  return sent * ((wire.getIntOrFloatBitWidth() + 7) / 8);
}

BufferLiveness::BufferLiveness(train::ModelOp model) {
  number(model);
  collect(model);
  // Once the results written in place are known, their buffers are their
  // operands': collect again, with those results as views.
  if (findInPlaceResults(model)) {
    roots.clear();
    buffers.clear();
    collect(model);
    for (Value result : llvm::make_first_range(inPlace))
      buffers[getRoot(result)].writtenInPlace.push_back(result);
  }
}

bool BufferLiveness::findInPlaceResults(train::ModelOp model) {
  // In program order (the walk visits a block's ops in order, a region's
  // before its op), which each buffer's writtenInPlace keeps.
  model.walk([&](train::InPlaceOpInterface op) {
    Value result = op.getInPlaceResult(), operand = op.getInPlaceOperand();
    auto owned = buffers.find(getRoot(operand));
    auto written = buffers.find(result);
    // The operand's buffer must die here (not in a later use, nor at the
    // end of a micro-batch loop it was defined outside), hold exactly the
    // result, and be the step's own (not a param's storage).
    if (owned == buffers.end() || written == buffers.end() ||
        owned->second.lastUser != op || operand.getType() != result.getType() ||
        owned->second.bytes != written->second.bytes)
      return;
    inPlace[result] = operand;
  });
  return !inPlace.empty();
}

void BufferLiveness::number(Operation *op) {
  start[op] = positions++;
  for (Region &region : op->getRegions())
    for (Block &block : region)
      for (Operation &nested : block)
        number(&nested);
  end[op] = positions++;
}

/// The value `v` is a view of, one step along (null where `v` is defined by
/// an op that writes it).
static Value getViewed(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    Operation *owner = arg.getOwner()->getParentOp();
    if (isa<train::UnitOp, train::BackwardOp, train::MicrobatchesOp>(owner))
      return owner->getOperand(arg.getArgNumber());
    return {};
  }
  Operation *def = v.getDefiningOp();
  if (auto reshape = dyn_cast<train::ReshapeOp>(def))
    return reshape.getInput();
  if (auto unpack = dyn_cast<UnpackOp>(def))
    return unpack.getInput();
  if (isa<train::UnitOp, train::BackwardOp>(def))
    return def->getRegion(0).front().getTerminator()->getOperand(
        cast<OpResult>(v).getResultNumber());
  if (auto wait = dyn_cast<WaitOp>(def))
    return wait.getToken();
  return {};
}

Value BufferLiveness::getRoot(Value v) {
  if (Value known = roots.lookup(v))
    return known;
  Value next = inPlace.lookup(v);
  if (!next)
    next = getViewed(v);
  Value r = next ? getRoot(next) : v;
  roots[v] = r;
  return r;
}

Value BufferLiveness::getWriter(Value v) {
  while (Value next = getViewed(v))
    v = next;
  return v;
}

void BufferLiveness::collect(train::ModelOp model) {
  model.walk([&](Operation *op) {
    if (isa<train::ParamOp, FlatParamOp>(op) || op == model)
      return;
    // A micro-batch loop's results are its accumulators, live throughout.
    int64_t definedAt = isa<train::MicrobatchesOp>(op) ? start[op] : end[op];
    for (Value result : op->getResults())
      if (getRoot(result) == result && getBufferBytes(result) > 0)
        buffers[result] = {getBufferBytes(result), definedAt, definedAt, op};
    // Every rank sends its padded shard: a gathered buffer holds the last
    // shards' padding too.
    if (isa<AllGatherOp, AllGatherStartOp>(op)) {
      int64_t padded = getBufferBytes(op->getOperand(0)) *
                       getGroupSize(op, op->getAttrOfType<FlatSymbolRefAttr>(
                                            "mesh"),
                                    op->getAttrOfType<ArrayAttr>("axes"));
      Buffer &gathered = buffers[op->getResult(0)];
      gathered.bytes = std::max(gathered.bytes, padded);
    }
    // An asynchronous collective reads its input until its wait, unless it
    // sends a copy it stages as it starts.
    Operation *user = op;
    if (isa<AllGatherStartOp, ReduceScatterStartOp, AllReduceStartOp>(op) &&
        !getStagingBytes(op))
      for (Operation *wait : op->getResult(0).getUsers())
        if (start[wait] > start[user])
          user = wait;
    for (Value operand : op->getOperands()) {
      Value root = getRoot(operand);
      auto it = buffers.find(root);
      if (it == buffers.end())
        continue;
      // A buffer from outside a micro-batch loop is read by every
      // iteration: it lives until the loop ends.
      Operation *definedIn = root.getParentBlock()->getParentOp();
      // Live while its last user runs: a kernel reads its inputs while it
      // writes its outputs. An op with a region passes it on to its
      // arguments, whose uses count on their own.
      Operation *lastUser = user;
      int64_t usedAt = user->getNumRegions() ? start[user] : end[user];
      for (Operation *p = user->getParentOp(); p && p != model;
           p = p->getParentOp())
        if (isa<train::MicrobatchesOp>(p) && !p->isAncestor(definedIn)) {
          lastUser = p;
          usedAt = end[p];
        }
      if (usedAt >= it->second.last) {
        it->second.last = usedAt;
        it->second.lastUser = lastUser;
      }
    }
  });
}
