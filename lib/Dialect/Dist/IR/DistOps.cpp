//===- DistOps.cpp - The dist dialect: mesh, layouts, collectives ---------===//

#include "shardc/Dialect/Dist/IR/DistOps.h"
#include "shardc/Dialect/Train/IR/TrainOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <optional>

using namespace mlir;
using namespace shardc::dist;

#include "shardc/Dialect/Dist/IR/DistDialect.cpp.inc"
#include "shardc/Dialect/Dist/IR/DistEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "shardc/Dialect/Dist/IR/DistTypes.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "shardc/Dialect/Dist/IR/DistAttrs.cpp.inc"

#define GET_OP_CLASSES
#include "shardc/Dialect/Dist/IR/DistOps.cpp.inc"

void DistDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "shardc/Dialect/Dist/IR/DistOps.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "shardc/Dialect/Dist/IR/DistTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "shardc/Dialect/Dist/IR/DistAttrs.cpp.inc"
      >();
}

/// What shardc-shard sets on a model beyond its ops: `dist.strategy`,
/// `dist.offload_optimizer` where the optimizer state lives in host memory,
/// and `dist.offload_params` where the stored params do too.
LogicalResult DistDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  bool onModel = isa<shardc::train::ModelOp>(op);
  if (attr.getName() == "dist.offload_optimizer" ||
      attr.getName() == "dist.offload_params") {
    if (!onModel || !isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "expected '" << attr.getName().getValue()
                             << "' to be a unit attribute on a train.model";
    if (attr.getName() == "dist.offload_optimizer")
      return success();
    if (!op->hasAttr("dist.offload_optimizer"))
      return op->emitError() << "expected 'dist.offload_params' with "
                                "'dist.offload_optimizer': params in host "
                                "memory are updated there";
    // Host memory is read only by the gathers that bring it to the device.
    WalkResult read = op->walk([](Operation *stored) -> WalkResult {
      if (!isa<shardc::train::ParamOp, FlatParamOp>(stored))
        return WalkResult::advance();
      for (Operation *user : stored->getResult(0).getUsers())
        if (!isa<AllGatherOp, AllGatherStartOp>(user))
          return user->emitOpError()
                 << "reads a param in host memory ('dist.offload_params' "
                    "on the model): only a gather may, bringing it to the "
                    "device";
      return WalkResult::advance();
    });
    return failure(read.wasInterrupted());
  }
  if (attr.getName() != "dist.strategy")
    return op->emitError() << "unknown attribute '" << attr.getName()
                           << "' of the dist dialect";
  auto name = dyn_cast<StringAttr>(attr.getValue());
  if (!onModel || !name ||
      !llvm::is_contained({"ddp", "zero1", "zero2", "zero3", "hsdp"},
                          name.getValue()))
    return op->emitError()
           << "expected 'dist.strategy' on a train.model to be one of ddp, "
              "zero1, zero2, zero3, hsdp, got "
           << attr.getValue();
  // Every strategy splits the global batch over every rank of the mesh:
  // each rank's inputs hold batch / ranks rows.
  auto model = cast<shardc::train::ModelOp>(op);
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(
      op, FlatSymbolRefAttr::get(op->getContext(), "mesh"));
  if (!mesh)
    return success(); // the emitters refuse a model without one
  // The mesh's own verifier bounds its sizes; unverified yet (a mesh after
  // the model), a bad one is left to it.
  int64_t ranks = 1;
  for (int64_t size : mesh.getShape())
    if (size <= 0 || llvm::MulOverflow(ranks, size, ranks))
      return success();
  if (model.getSplit() != static_cast<uint64_t>(ranks))
    return model.emitOpError()
           << "expected 'split " << ranks << "': a sharded model divides "
           << "its batch over every rank of @mesh, got "
           << (model.getSplit() ? "split " + std::to_string(*model.getSplit())
                                : std::string("none"));
  return success();
}

//===--- #dist.shard ------------------------------------------------------===//

LogicalResult ShardAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                Layout, FlatSymbolRefAttr,
                                ArrayRef<StringAttr> axes) {
  if (axes.empty())
    return emitError() << "expected at least one mesh axis";
  llvm::StringSet<> seen;
  for (StringAttr axis : axes)
    if (!seen.insert(axis.getValue()).second)
      return emitError() << "duplicate mesh axis '" << axis.getValue() << "'";
  return success();
}

//===--- dist.mesh --------------------------------------------------------===//

int64_t MeshOp::getAxisIndex(StringRef name) {
  for (auto [i, axis] : llvm::enumerate(getAxes()))
    if (cast<StringAttr>(axis).getValue() == name)
      return i;
  return -1;
}

int64_t MeshOp::getNumRanks() {
  int64_t n = 1;
  for (int64_t size : getShape())
    n *= size;
  return n;
}

LogicalResult MeshOp::verify() {
  if (getAxes().empty() || getAxes().size() > 3)
    return emitOpError() << "expected 1 to 3 axes, got " << getAxes().size();
  if (getAxes().size() != getShape().size())
    return emitOpError() << "expected one size per axis, got "
                         << getShape().size() << " sizes for "
                         << getAxes().size() << " axes";
  llvm::StringSet<> seen;
  for (auto [axis, size] : llvm::zip(getAxes(), getShape())) {
    StringRef name = cast<StringAttr>(axis).getValue();
    if (name.empty())
      return emitOpError() << "expected non-empty axis names";
    if (!seen.insert(name).second)
      return emitOpError() << "duplicate axis '" << name << "'";
    if (size <= 0)
      return emitOpError() << "expected a positive size for axis '" << name
                           << "', got " << size;
    if (size > kMaxRanks)
      return emitOpError() << "expected at most " << kMaxRanks
                           << " ranks, got " << size << " on axis '" << name
                           << "'";
  }
  if (getNumRanks() > kMaxRanks)
    return emitOpError() << "expected at most " << kMaxRanks
                         << " ranks, got " << getNumRanks();
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

namespace {
std::string formatShape(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, "x");
  return s.empty() ? "scalar" : s;
}

/// Resolves the mesh and returns the size of the group over `axes`.
FailureOr<int64_t> groupSize(Operation *op, FlatSymbolRefAttr meshRef,
                             ArrayAttr axes,
                             SymbolTableCollection &symbolTable) {
  auto mesh = symbolTable.lookupNearestSymbolFrom<MeshOp>(op, meshRef);
  if (!mesh)
    return op->emitOpError() << "unknown mesh " << meshRef;
  if (axes.empty())
    return op->emitOpError() << "expected at least one mesh axis";
  int64_t n = 1;
  llvm::StringSet<> seen;
  for (Attribute a : axes) {
    StringRef name = cast<StringAttr>(a).getValue();
    int64_t idx = mesh.getAxisIndex(name);
    if (idx < 0) {
      std::string known;
      llvm::raw_string_ostream os(known);
      llvm::interleaveComma(mesh.getAxes(), os, [&](Attribute x) {
        os << "'" << cast<StringAttr>(x).getValue() << "'";
      });
      return op->emitOpError() << "unknown axis '" << name << "' of mesh "
                               << meshRef << " (axes: " << known << ")";
    }
    if (!seen.insert(name).second)
      return op->emitOpError() << "duplicate mesh axis '" << name << "'";
    n *= mesh.getShape()[idx];
  }
  return n;
}

/// Checks that `shard` is this rank's piece of `full` under `layout` over
/// `n` ranks.
LogicalResult verifyShardOf(Operation *op, Layout layout,
                            RankedTensorType shard, RankedTensorType full,
                            int64_t n) {
  ArrayRef<int64_t> s = shard.getShape(), f = full.getShape();
  if (layout == Layout::flat) {
    if (s.size() != 1 || f.size() != 1)
      return op->emitOpError() << "expected 1-D tensors for a flat layout, got "
                               << formatShape(s) << " and " << formatShape(f);
    if (ShapedType::isDynamic(f[0]) || ShapedType::isDynamic(s[0]) ||
        f[0] != s[0] * n)
      return op->emitOpError()
             << "expected the flat buffer of " << f[0]
             << " elements to be the shard of " << s[0] << " times " << n
             << " ranks";
    return success();
  }
  if (s.empty() || s.size() != f.size())
    return op->emitOpError() << "expected shard and full tensor of equal rank "
                                ">= 1, got "
                             << formatShape(s) << " and " << formatShape(f);
  if (s.drop_front() != f.drop_front())
    return op->emitOpError() << "expected equal trailing dimensions, got "
                             << formatShape(s) << " and " << formatShape(f);
  int64_t rows = llvm::divideCeil(f[0], n);
  if (s[0] != rows)
    return op->emitOpError() << "expected a dim0 shard of " << rows
                             << " rows for " << f[0] << " rows over " << n
                             << " ranks, got " << s[0];
  return success();
}

template <typename OpT>
RankedTensorType resultTensor(OpT op) {
  if constexpr (std::is_same_v<OpT, AllGatherStartOp> ||
                std::is_same_v<OpT, ReduceScatterStartOp> ||
                std::is_same_v<OpT, AllReduceStartOp>)
    return op.getToken().getType().getResult();
  else
    return op.getResult().getType();
}

/// A token is waited on exactly once, as often as it is started: in the
/// `train.microbatches` body it starts in, or outside any.
LogicalResult verifyWaitedOnce(Operation *op, Value token) {
  size_t waits = llvm::count_if(token.getUsers(),
                                [](Operation *u) { return isa<WaitOp>(u); });
  if (!token.hasOneUse() || waits != 1)
    return op->emitOpError() << "expected its token to be waited on exactly "
                                "once, got "
                             << waits << " waits and "
                             << (llvm::range_size(token.getUses()) - waits)
                             << " other uses";
  // A token made inside a loop is not seen after it; one made before it
  // must not be waited in it.
  Operation *wait = *token.getUsers().begin();
  using shardc::train::MicrobatchesOp;
  if (wait->getParentOfType<MicrobatchesOp>() !=
      op->getParentOfType<MicrobatchesOp>()) {
    InFlightDiagnostic diag = op->emitOpError()
                              << "expected its wait outside the "
                                 "train.microbatches it starts before (started "
                                 "once, it would be waited once a micro-batch)";
    diag.attachNote(wait->getLoc()) << "the wait";
    return diag;
  }
  return success();
}

template <typename OpT>
LogicalResult verifyCollective(OpT op, SymbolTableCollection &symbolTable) {
  FailureOr<int64_t> n =
      groupSize(op, op.getMeshAttr(), op.getAxes(), symbolTable);
  if (failed(n))
    return failure();
  RankedTensorType in = op.getInput().getType(), out = resultTensor(op);
  if (op.getWire() && !isa<FloatType>(*op.getWire()))
    return op.emitOpError() << "expected a float wire type, got "
                            << *op.getWire();
  if constexpr (std::is_same_v<OpT, AllGatherOp> ||
                std::is_same_v<OpT, AllGatherStartOp>) {
    // A param's storage is gathered as its sharding lays it out (a flat
    // one's members are gathered in their dist.flat_param).
    if (auto param =
            op.getInput().template getDefiningOp<shardc::train::ParamOp>())
      if (auto shard = dyn_cast_or_null<ShardAttr>(param.getShardingAttr());
          shard && shard.getLayout() != op.getLayout())
        return op.emitOpError()
               << "gathers param '" << param.getName() << "' as "
               << stringifyLayout(op.getLayout()) << ", but it is sharded "
               << stringifyLayout(shard.getLayout());
    return verifyShardOf(op, op.getLayout(), in, out, *n);
  } else if constexpr (std::is_same_v<OpT, ReduceScatterOp> ||
                       std::is_same_v<OpT, ReduceScatterStartOp>)
    return verifyShardOf(op, op.getLayout(), out, in, *n);
  else if (in.getShape() != out.getShape())
    return op.emitOpError() << "expected the result shape "
                            << formatShape(in.getShape()) << ", got "
                            << formatShape(out.getShape());
  return success();
}
} // namespace

#define DIST_COLLECTIVE_METHODS(OpT)                                           \
  Type OpT::getWireType() {                                                    \
    return getWire() ? *getWire() : getResultTensorType().getElementType();    \
  }                                                                            \
  RankedTensorType OpT::getResultTensorType() { return resultTensor(*this); } \
  LogicalResult OpT::verifySymbolUses(SymbolTableCollection &symbolTable) {    \
    return verifyCollective(*this, symbolTable);                               \
  }

DIST_COLLECTIVE_METHODS(AllGatherOp)
DIST_COLLECTIVE_METHODS(AllGatherStartOp)
DIST_COLLECTIVE_METHODS(ReduceScatterOp)
DIST_COLLECTIVE_METHODS(ReduceScatterStartOp)
DIST_COLLECTIVE_METHODS(AllReduceOp)
DIST_COLLECTIVE_METHODS(AllReduceStartOp)
#undef DIST_COLLECTIVE_METHODS

//===--- dist.take_shard --------------------------------------------------===//

LogicalResult
TakeShardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<int64_t> n =
      groupSize(*this, getMeshAttr(), getAxes(), symbolTable);
  if (failed(n))
    return failure();
  if (getInput().getType().getElementType() !=
      getResult().getType().getElementType())
    return emitOpError() << "expected the input's element type, got "
                         << getResult().getType().getElementType();
  return verifyShardOf(*this, getLayout(), getResult().getType(),
                       getInput().getType(), *n);
}

//===--- dist.wait --------------------------------------------------------===//

LogicalResult WaitOp::verify() {
  Operation *start = getToken().getDefiningOp();
  if (!isa_and_nonnull<AllGatherStartOp, ReduceScatterStartOp,
                       AllReduceStartOp>(start))
    return emitOpError() << "expected a token from a dist.*_start op";
  return success();
}

LogicalResult AllGatherStartOp::verify() {
  return verifyWaitedOnce(*this, getToken());
}
LogicalResult ReduceScatterStartOp::verify() {
  return verifyWaitedOnce(*this, getToken());
}
LogicalResult AllReduceStartOp::verify() {
  return verifyWaitedOnce(*this, getToken());
}

//===--- dist.free --------------------------------------------------------===//

LogicalResult FreeOp::verify() {
  Operation *self = getOperation();
  // A param's storage (a flat param's too) lives across steps: the update
  // writes it, by name.
  Operation *def = getValue().getDefiningOp();
  if (auto param = dyn_cast_or_null<shardc::train::ParamOp>(def))
    return emitOpError() << "frees the storage of param '" << param.getName()
                         << "', which the step keeps for the next";
  if (auto flat = dyn_cast_or_null<FlatParamOp>(def))
    return emitOpError() << "frees the storage of the flat param of '"
                         << flat.getUnit()
                         << "', which the step keeps for the next";
  // Freed in a loop that it is made before, it would be freed once a
  // micro-batch.
  auto loop = self->getParentOfType<shardc::train::MicrobatchesOp>();
  if (loop && !loop.getBody().isAncestor(getValue().getParentRegion()))
    return emitOpError() << "frees a value made before the "
                            "train.microbatches it is in (it would be freed "
                            "once a micro-batch)";
  for (OpOperand &use : getValue().getUses()) {
    Operation *user = use.getOwner();
    if (user == self)
      continue;
    // The user's ancestor in the free's block decides the order.
    Operation *anc = self->getBlock()->findAncestorOpInBlock(*user);
    if (!anc || anc == self || !self->isBeforeInBlock(anc))
      continue;
    InFlightDiagnostic diag =
        isa<FreeOp>(user)
            ? user->emitOpError() << "frees a value that is already freed"
            : user->emitOpError() << "reads a value after its dist.free";
    diag.attachNote(getLoc()) << "freed here";
    return diag;
  }
  return success();
}

//===--- dist.pack, dist.unpack -------------------------------------------===//

namespace {
/// The pieces fit the buffer, all of its element type.
LogicalResult verifyBucket(Operation *op, RankedTensorType buffer,
                           TypeRange pieces) {
  if (pieces.empty())
    return op->emitOpError() << "expected at least one tensor in the bucket";
  int64_t total = 0;
  for (Type t : pieces) {
    auto piece = cast<RankedTensorType>(t);
    if (piece.getElementType() != buffer.getElementType())
      return op->emitOpError() << "expected every tensor of element type "
                               << buffer.getElementType() << ", got "
                               << piece.getElementType();
    total += piece.getNumElements();
  }
  if (total > buffer.getNumElements())
    return op->emitOpError() << "expected a buffer of at least " << total
                             << " elements, got " << buffer.getNumElements();
  return success();
}
} // namespace

LogicalResult PackOp::verify() {
  return verifyBucket(*this, getResult().getType(), getInputs().getTypes());
}

LogicalResult UnpackOp::verify() {
  return verifyBucket(*this, getInput().getType(), getResultTypes());
}

//===--- dist.adamw_shard, dist.set_param ---------------------------------===//
// The model resolves the param's name (ParamUserOpInterface).

namespace {
/// Calls `f` on each user of `value` and of what it becomes gathered
/// (dist.all_gather, or _start and its wait) and converted, the value's
/// journey to a dist.unpack or dist.set_param.
void forEachGatheredUser(Value value, function_ref<void(Operation *)> f) {
  SmallVector<Value> values = {value};
  while (!values.empty()) {
    for (Operation *user : values.pop_back_val().getUsers()) {
      f(user);
      if (auto start = dyn_cast<AllGatherStartOp>(user)) {
        for (Operation *tokenUser : start.getToken().getUsers())
          if (auto wait = dyn_cast<WaitOp>(tokenUser))
            values.push_back(wait.getResult());
      } else if (isa<AllGatherOp, ConvertOp>(user)) {
        values.push_back(user->getResult(0));
      }
    }
  }
}

/// An updated value that reaches no dist.set_param of `name`, or one of
/// another param: the param would not change, or take another's values.
LogicalResult verifyWrittenBack(Operation *op, StringRef name, Value updated) {
  bool written = false;
  SetParamOp wrong;
  forEachGatheredUser(updated, [&](Operation *user) {
    if (auto set = dyn_cast<SetParamOp>(user)) {
      written |= set.getName() == name;
      if (set.getName() != name && !wrong)
        wrong = set;
    }
  });
  if (wrong)
    return wrong.emitOpError() << "writes param '" << wrong.getName()
                               << "' with the update of param '" << name << "'";
  if (!written)
    return op->emitOpError() << "updates param '" << name
                             << "', which no dist.set_param writes back: it "
                                "would not change";
  return success();
}
} // namespace

LogicalResult
AdamWShardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return groupSize(*this, getMeshAttr(), getAxes(), symbolTable);
}

SmallVector<StringRef, 1> AdamWShardOp::getParamNames() { return {getName()}; }

LogicalResult AdamWShardOp::verifyParams(ArrayRef<Operation *> params) {
  Operation *paramOp = params.front();
  auto param = cast<shardc::train::ParamOp>(paramOp);
  if (!param.isTrainable())
    return emitOpError() << "updates frozen param '" << getName() << "'";
  SymbolTableCollection symbolTable;
  FailureOr<int64_t> n =
      groupSize(*this, getMeshAttr(), getAxes(), symbolTable);
  if (failed(n))
    return failure();
  RankedTensorType storage = param.getType();
  if (failed(verifyShardOf(*this, Layout::dim0, getGrad().getType(), storage,
                           *n)))
    return failure();
  RankedTensorType updated =
      getGrad().getType().clone(storage.getElementType());
  if (getResult().getType() != updated)
    return emitOpError() << "expected the updated shard of type " << updated
                         << ", got " << getResult().getType();
  return verifyWrittenBack(*this, getName(), getResult());
}

SmallVector<StringRef, 1> SetParamOp::getParamNames() { return {getName()}; }

LogicalResult SetParamOp::verifyParams(ArrayRef<Operation *> params) {
  Operation *paramOp = params.front();
  auto param = cast<shardc::train::ParamOp>(paramOp);
  if (param.getType() != getValue().getType())
    return emitOpError() << "expected a value of the storage type "
                         << param.getType() << " of param '" << getName()
                         << "', got " << getValue().getType();
  return success();
}

//===--- dist.flat_param, dist.adamw_flat ---------------------------------===//

namespace {
/// The flat piece of `params` over `n` ranks: ceil(total / n) elements.
LogicalResult verifyFlatPiece(Operation *op, ArrayRef<Operation *> params,
                              RankedTensorType piece, int64_t n,
                              bool update) {
  if (params.empty())
    return op->emitOpError() << "expected at least one param";
  int64_t total = 0;
  Type element;
  for (Operation *paramOp : params) {
    auto param = cast<shardc::train::ParamOp>(paramOp);
    if (update && !param.isTrainable())
      return op->emitOpError()
             << "updates frozen param '" << param.getName() << "'";
    RankedTensorType full = param.getFullType();
    if (element && full.getElementType() != element)
      return op->emitOpError() << "expected params of one element type, got "
                               << element << " and " << full.getElementType();
    element = full.getElementType();
    total += full.getNumElements();
  }
  int64_t expected = llvm::divideCeil(total, n);
  if (piece.getNumElements() != expected)
    return op->emitOpError() << "expected a piece of " << expected
                             << " elements for " << total
                             << " parameter elements over " << n
                             << " ranks, got " << piece.getNumElements();
  return success();
}

/// The pieces of a flat buffer (a dist.pack's inputs, a dist.unpack's
/// results) against the full shapes of the params of `op` (a
/// dist.flat_param or dist.adamw_flat), in order: the runtime lays the
/// params out by `op`'s list, so a piece out of that order would read or
/// update another param's elements. (Shapes alone: two pieces of one shape
/// swapped pass.)
LogicalResult verifyFlatOrder(Operation *op, ArrayRef<Operation *> params,
                              Operation *bucket, TypeRange pieces) {
  auto shapeOf = [](Type t) { return cast<RankedTensorType>(t).getShape(); };
  bool same = pieces.size() == params.size();
  for (auto [piece, param] : llvm::zip(pieces, params))
    same = same &&
           shapeOf(piece) ==
               cast<shardc::train::ParamOp>(param).getFullType().getShape();
  if (same)
    return success();
  std::string expected;
  llvm::raw_string_ostream os(expected);
  llvm::interleaveComma(params, os, [&](Operation *param) {
    auto p = cast<shardc::train::ParamOp>(param);
    os << "'" << p.getName() << "' " << formatShape(p.getFullType().getShape());
  });
  InFlightDiagnostic diag = bucket->emitOpError()
                            << "expected the pieces of " << op->getName()
                            << "'s params in its order (" << expected
                            << "), got " << pieces.size() << " of shapes ";
  llvm::interleaveComma(pieces, diag,
                        [&](Type t) { diag << formatShape(shapeOf(t)); });
  diag.attachNote(op->getLoc()) << "the params' order";
  return diag;
}

/// What a train.backward yields as `value`, looking through dist.convert
/// (a mixed-precision cast) as well as micro-batch sums.
std::optional<shardc::train::BackwardYield> backwardYieldOf(Value value) {
  return shardc::train::backwardYieldOf(value, [](Value v) -> Value {
    auto convert = v.getDefiningOp<ConvertOp>();
    return convert ? convert.getInput() : nullptr;
  });
}

/// The gradients `pack` flattens for `op`'s params (whose shapes
/// verifyFlatOrder checked), in its order where a train.backward yields
/// them: two members of one shape (a layer norm's weight and bias) swapped
/// would update each with the other's gradient.
LogicalResult verifyPackedGradients(Operation *op, ArrayRef<Operation *> params,
                                    PackOp pack) {
  for (auto [i, grad, param] : llvm::enumerate(pack.getInputs(), params)) {
    StringRef expected = cast<shardc::train::ParamOp>(param).getName();
    std::optional<shardc::train::BackwardYield> yielded = backwardYieldOf(grad);
    if (!yielded || !yielded->param || yielded->param == expected)
      continue;
    InFlightDiagnostic diag = pack.emitOpError()
                              << "expected piece " << i
                              << " to be the gradient of '" << expected
                              << "', got the gradient of '" << *yielded->param
                              << "'";
    diag.attachNote(op->getLoc()) << "the params' order";
    return diag;
  }
  return success();
}

/// Each dist.unpack of `flat`, a flat buffer (or a piece of one), against
/// the order of `op`'s params; with `writtenBack` (the updated piece of
/// ZeRO-1/2's dist.adamw_flat), each of its views written back to its
/// param.
LogicalResult verifyUnpackedOrder(Operation *op, ArrayRef<Operation *> params,
                                  Value flat, bool writtenBack) {
  LogicalResult result = success();
  forEachGatheredUser(flat, [&](Operation *user) {
    auto unpack = dyn_cast<UnpackOp>(user);
    if (!unpack || failed(result))
      return;
    result = verifyFlatOrder(op, params, unpack, unpack.getResultTypes());
    for (auto [view, param] : llvm::zip(unpack.getResults(), params))
      if (succeeded(result) && writtenBack)
        result = verifyWrittenBack(
            op, cast<shardc::train::ParamOp>(param).getName(), view);
  });
  return result;
}
} // namespace

LogicalResult
FlatParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return groupSize(*this, getMeshAttr(), getAxes(), symbolTable);
}

SmallVector<StringRef, 1> FlatParamOp::getParamNames() {
  return llvm::to_vector<1>(getParams().getAsValueRange<StringAttr>());
}

LogicalResult FlatParamOp::verifyParams(ArrayRef<Operation *> params) {
  SymbolTableCollection symbolTable;
  FailureOr<int64_t> n = groupSize(*this, getMeshAttr(), getAxes(), symbolTable);
  if (failed(n))
    return failure();
  if (getResult().getType().getElementType() !=
      cast<shardc::train::ParamOp>(params.front()).getType().getElementType())
    return emitOpError() << "expected the params' element type";
  // Its members are stored in it: each is marked so, and keeps its full
  // type, which declares its shape.
  for (Operation *paramOp : params) {
    auto param = cast<shardc::train::ParamOp>(paramOp);
    auto shard = dyn_cast_or_null<ShardAttr>(param.getShardingAttr());
    if (!shard || shard.getLayout() != Layout::flat)
      return emitOpError() << "expected member '" << param.getName()
                           << "' sharded with layout = flat, got "
                           << (shard ? "layout = dim0" : "no sharding");
    if (param.getType() != param.getFullType())
      return emitOpError() << "expected member '" << param.getName()
                           << "' of its full type " << param.getFullType()
                           << ", got " << param.getType();
  }
  if (failed(verifyFlatPiece(*this, params, getResult().getType(), *n,
                             /*update=*/false)))
    return failure();
  return verifyUnpackedOrder(*this, params, getResult(),
                             /*writtenBack=*/false);
}

LogicalResult
AdamWFlatOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return groupSize(*this, getMeshAttr(), getAxes(), symbolTable);
}

SmallVector<StringRef, 1> AdamWFlatOp::getParamNames() {
  return llvm::to_vector<1>(getParams().getAsValueRange<StringAttr>());
}

LogicalResult AdamWFlatOp::verifyParams(ArrayRef<Operation *> params) {
  SymbolTableCollection symbolTable;
  FailureOr<int64_t> n = groupSize(*this, getMeshAttr(), getAxes(), symbolTable);
  if (failed(n))
    return failure();
  if (getUpdated() && getUpdated().getType().getShape() !=
                          getGrad().getType().getShape())
    return emitOpError() << "expected the updated piece of the gradient's "
                            "shape, got "
                         << getUpdated().getType();
  if (failed(verifyFlatPiece(*this, params, getGrad().getType(), *n,
                             /*update=*/true)))
    return failure();
  // The gradients' dist.pack, through its reductions (or their _start and
  // wait), conversions and micro-batch sums; the updated piece's
  // dist.unpack (ZeRO-1/2).
  for (Value grad = getGrad(); grad;) {
    if (Value yielded = shardc::train::summedFrom(grad)) {
      grad = yielded;
      continue;
    }
    Operation *def = grad.getDefiningOp();
    grad = nullptr;
    if (auto pack = dyn_cast_or_null<PackOp>(def)) {
      if (failed(verifyFlatOrder(*this, params, pack,
                                 pack.getInputs().getTypes())) ||
          failed(verifyPackedGradients(*this, params, pack)))
        return failure();
      break;
    }
    if (auto wait = dyn_cast_or_null<WaitOp>(def))
      def = wait.getToken().getDefiningOp();
    if (isa_and_nonnull<ReduceScatterOp, ReduceScatterStartOp, AllReduceOp,
                        AllReduceStartOp, ConvertOp>(def))
      grad = def->getOperand(0);
  }
  return getUpdated() ? verifyUnpackedOrder(*this, params, getUpdated(),
                                            /*writtenBack=*/true)
                      : success();
}

//===--- dist.sum_squares, dist.clip_coefficient --------------------------===//

LogicalResult SumSquaresOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "expected at least one tensor to sum";
  return success();
}

LogicalResult ClipCoefficientOp::verify() {
  // One sum per group of shard axes (how many an executable takes is the
  // emitter's to check).
  if (getSums().empty())
    return emitOpError() << "expected at least one sum of squares";
  double maxNorm = getMaxNorm().convertToDouble();
  if (!(maxNorm > 0 && maxNorm <= std::numeric_limits<float>::max()))
    return emitOpError() << "expected a max_norm > 0 and finite as an f32, got "
                         << maxNorm;
  return success();
}
