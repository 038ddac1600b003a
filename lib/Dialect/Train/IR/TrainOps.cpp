//===- TrainOps.cpp - Verifiers and builders of the train dialect ---------===//

#include "shardc/Dialect/Train/IR/TrainOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace shardc::train;

#define GET_OP_CLASSES
#include "shardc/Dialect/Train/IR/TrainOps.cpp.inc"

#include "shardc/Dialect/Train/IR/TrainInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// Shape helpers shared by the verifiers
//===----------------------------------------------------------------------===//

namespace {
/// Prints a shape as `2x8x16` (`scalar` for rank 0).
std::string formatShape(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, "x");
  return s;
}

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

Type elementOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

/// All non-scalar floating-point operands and results share one element
/// type: mixed precision casts are explicit. `statistics` (attention's
/// log-sum-exps) is f32 whatever the rest, and its op checks it.
LogicalResult verifySameFloatElementType(Operation *op, Value statistics) {
  Type expected;
  auto check = [&](Value v) -> LogicalResult {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type || type.getRank() == 0 ||
        !isa<FloatType>(type.getElementType()) || v == statistics)
      return success();
    if (!expected) {
      expected = type.getElementType();
      return success();
    }
    if (type.getElementType() != expected)
      return op->emitOpError()
             << "expected element type " << expected << " throughout, got "
             << type.getElementType();
    return success();
  };
  for (Value v : op->getOperands())
    if (failed(check(v)))
      return failure();
  for (Value v : op->getResults())
    if (failed(check(v)))
      return failure();
  return success();
}

LogicalResult verifyShapeIs(Operation *op, StringRef what, Value v,
                            ArrayRef<int64_t> expected) {
  if (shapeOf(v) != expected)
    return op->emitOpError() << "expected " << what << " of shape "
                             << formatShape(expected) << ", got "
                             << formatShape(shapeOf(v));
  return success();
}

/// Common checks of every compute op, then the op's own.
LogicalResult verifyCompute(Operation *op, Value statistics = {}) {
  if (failed(verifyStaticShapes(op)))
    return failure();
  return verifySameFloatElementType(op, statistics);
}

bool isSuffix(ArrayRef<int64_t> suffix, ArrayRef<int64_t> shape) {
  return suffix.size() <= shape.size() &&
         shape.take_back(suffix.size()) == suffix;
}

SmallVector<int64_t> concat(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  SmallVector<int64_t> r(a);
  r.append(b.begin(), b.end());
  return r;
}

/// The unit that `op` runs in: the enclosing `train.unit` or
/// `train.backward`, or the model itself for the root unit.
Operation *enclosingScope(Operation *op) {
  for (Operation *p = op->getParentOp(); p; p = p->getParentOp())
    if (isa<UnitOp, BackwardOp, ModelOp>(p))
      return p;
  return nullptr;
}

StringRef scopeName(Operation *scope) {
  if (auto unit = dyn_cast_or_null<UnitOp>(scope))
    return unit.getName();
  if (auto bwd = dyn_cast_or_null<BackwardOp>(scope))
    return bwd.getUnit();
  return "";
}

std::string describeUnit(StringRef name) {
  return name.empty() ? std::string("the root unit")
                      : ("unit '" + name + "'").str();
}

/// A unit or backward region sees the rest of the model only through its
/// block arguments; `kind` names the op in messages.
LogicalResult verifyClosedRegion(Operation *op, StringRef name,
                                 ValueRange inputs, TypeRange resultTypes) {
  Region &region = op->getRegion(0);
  Block &block = region.front();
  if (block.getNumArguments() != inputs.size())
    return op->emitOpError()
           << "expected " << inputs.size()
           << " block arguments to match the inputs, got "
           << block.getNumArguments();
  for (auto [i, pair] : llvm::enumerate(
           llvm::zip(block.getArgumentTypes(), inputs.getTypes())))
    if (std::get<0>(pair) != std::get<1>(pair))
      return op->emitOpError() << "expected block argument #" << i
                               << " of type " << std::get<1>(pair)
                               << ", got " << std::get<0>(pair);
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return op->emitOpError() << "expected the body to end in train.yield";
  if (yield.getValues().getTypes() != resultTypes)
    return yield.emitOpError()
           << "expected " << resultTypes.size()
           << " values matching the results of " << describeUnit(name)
           << ", got " << yield.getValues().size()
           << (yield.getValues().size() == resultTypes.size()
                   ? " of other types"
                   : "");
  WalkResult walk = region.walk([&](Operation *inner) {
    for (Value operand : inner->getOperands()) {
      if (region.isAncestor(operand.getParentRegion()))
        continue;
      if (auto param = operand.getDefiningOp<ParamOp>()) {
        inner->emitOpError()
            << "uses param '" << param.getName() << "' of "
            << describeUnit(param.getUnitName()) << " inside "
            << describeUnit(name);
      } else {
        inner->emitOpError() << "uses a value defined outside "
                             << describeUnit(name)
                             << "; pass it as an input";
      }
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}
} // namespace

LogicalResult shardc::train::verifyStaticShapes(Operation *op) {
  auto check = [&](Value v, StringRef what, unsigned idx) -> LogicalResult {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type)
      return success();
    for (auto [dim, size] : llvm::enumerate(type.getShape()))
      if (ShapedType::isDynamic(size) || size <= 0)
        return op->emitOpError()
               << "expected positive static dimensions, got "
               << (ShapedType::isDynamic(size) ? std::string("?")
                                               : std::to_string(size))
               << " in dimension " << dim << " of " << what << " #" << idx;
    return success();
  };
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (failed(check(v, "operand", i)))
      return failure();
  for (auto [i, v] : llvm::enumerate(op->getResults()))
    if (failed(check(v, "result", i)))
      return failure();
  // Sizes in bytes must fit in 64 bits for every later cost computation.
  for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults())) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type)
      continue;
    int64_t elements = 1;
    for (int64_t size : type.getShape())
      if (llvm::MulOverflow(elements, size, elements) ||
          elements > ModelOp::kMaxElements)
        return op->emitOpError()
               << "expected at most 2^40 elements in " << type;
  }
  return success();
}

//===--- train.model ------------------------------------------------------===//

FailureOr<SmallVector<ModelOp>> shardc::train::getModels(ModuleOp module) {
  auto models = llvm::to_vector(module.getOps<ModelOp>());
  if (models.empty()) {
    // Two `module {...}` in one file parse as modules inside an implicit one.
    auto nested = llvm::to_vector(module.getOps<ModuleOp>());
    if (nested.size() > 1)
      return nested[1].emitError()
             << "expected one module in the input, got " << nested.size()
             << " (one train.model per file)";
    return module.emitError() << "expected a train.model in the input";
  }
  return models;
}

FailureOr<ModelOp> shardc::train::getSingleModel(ModuleOp module,
                                                 StringRef purpose) {
  FailureOr<SmallVector<ModelOp>> models = getModels(module);
  if (failed(models))
    return failure();
  if (models->size() == 1)
    return models->front();
  InFlightDiagnostic diag = (*models)[1].emitOpError()
                            << "@" << (*models)[1].getSymName()
                            << " is a second model in the input, of "
                            << models->size() << ": " << purpose
                            << " takes one (a file per model)";
  diag.attachNote(models->front().getLoc())
      << "the first, @" << models->front().getSymName();
  return diag;
}

Value ModelOp::getLoss() {
  return cast<ReturnOp>(getBody().front().getTerminator()).getLoss();
}

ParamOp ModelOp::lookupParam(StringRef name) {
  ParamOp found;
  walk([&](ParamOp param) {
    if (param.getName() != name)
      return WalkResult::advance();
    found = param;
    return WalkResult::interrupt();
  });
  return found;
}

llvm::StringMap<ParamOp> ModelOp::getParamsByName() {
  llvm::StringMap<ParamOp> params;
  walk([&](ParamOp param) { params.try_emplace(param.getName(), param); });
  return params;
}

LogicalResult ModelOp::verify() {
  // I64Attr's getters read the value unsigned: -4 would pass as 2^64 - 4.
  auto batch = static_cast<int64_t>(getBatch());
  if (batch <= 0)
    return emitOpError() << "expected batch > 0, got " << batch;
  if (std::optional<uint64_t> unsignedSplit = getSplit()) {
    auto split = static_cast<int64_t>(*unsignedSplit);
    if (split <= 0 || batch % split != 0)
      return emitOpError() << "expected a split dividing the batch " << batch
                           << ", got " << split;
  }
  return success();
}

LogicalResult ModelOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.empty() || !isa<ReturnOp>(body.back()))
    return emitOpError() << "expected the body to end in train.return";

  // Names are what users, checkpoints and the runtime know things by.
  llvm::StringMap<Operation *> params, units, inputs;
  auto unique = [](llvm::StringMap<Operation *> &seen, StringRef kind,
                   StringRef name, Operation *op) -> LogicalResult {
    auto [it, inserted] = seen.try_emplace(name, op);
    if (inserted)
      return success();
    InFlightDiagnostic diag = op->emitOpError()
                              << "duplicate " << kind << " name '" << name
                              << "'";
    diag.attachNote(it->second->getLoc()) << "first declared here";
    return diag;
  };
  WalkResult walk = getOperation()->walk<WalkOrder::PreOrder>([&](Operation *op) {
    LogicalResult ok = success();
    if (auto param = dyn_cast<ParamOp>(op))
      ok = unique(params, "param", param.getName(), op);
    else if (auto unit = dyn_cast<UnitOp>(op))
      ok = unique(units, "unit", unit.getName(), op);
    else if (auto input = dyn_cast<InputOp>(op))
      ok = unique(inputs, "input", input.getName(), op);
    return failed(ok) ? WalkResult::interrupt() : WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  // Checkpoints and exports store each param under its name, its moments
  // under NAME.exp_avg and NAME.exp_avg_sq, in safetensors files (whose
  // header keeps __metadata__ for itself).
  for (auto &entry : params) {
    StringRef name = entry.getKey();
    if (name == "__metadata__")
      return entry.second->emitOpError()
             << "param name '__metadata__' is reserved by safetensors files";
    for (StringRef moment : {".exp_avg", ".exp_avg_sq"})
      if (auto it = params.find((name + moment).str()); it != params.end()) {
        InFlightDiagnostic diag = it->second->emitOpError()
                                  << "param name '" << it->getKey()
                                  << "' is the checkpoint name of param '"
                                  << name << "''s optimizer moment";
        diag.attachNote(entry.second->getLoc())
            << "param '" << name << "' declared here";
        return diag;
      }
  }

  int64_t numParams = 0;
  for (auto &entry : params) {
    auto param = cast<ParamOp>(entry.second);
    numParams += param.getNumElements();
    if (std::optional<StringRef> unit = param.getUnit(); unit &&
        !units.contains(*unit))
      return param.emitOpError() << "belongs to unknown unit '" << *unit
                                 << "'";
  }
  if (numParams > kMaxElements)
    return emitOpError() << "expected at most 2^40 parameters, got "
                         << numParams;

  // Every name of a param resolves, once, here; a param is updated once, a
  // unit differentiated once, and a param that a backward differentiates is
  // updated (else its gradient would be computed and dropped, the param
  // never trained, and nothing would say so).
  llvm::StringSet<> updated, differentiated;
  SmallVector<std::pair<BackwardOp, StringRef>> gradients;
  auto lookup = [&](Operation *user, StringRef name) -> FailureOr<ParamOp> {
    auto it = params.find(name);
    if (it == params.end())
      return user->emitOpError() << "unknown param '" << name << "'";
    return cast<ParamOp>(it->second);
  };
  walk = getOperation()->walk([&](Operation *op) {
    if (auto user = dyn_cast<ParamUserOpInterface>(op)) {
      SmallVector<Operation *> named;
      for (StringRef name : user.getParamNames()) {
        FailureOr<ParamOp> param = lookup(op, name);
        if (failed(param))
          return WalkResult::interrupt();
        named.push_back(*param);
        if (user.isParamUpdate() && !updated.insert(name).second) {
          op->emitOpError() << "updates param '" << name
                            << "' a second time";
          return WalkResult::interrupt();
        }
      }
      if (failed(user.verifyParams(named)))
        return WalkResult::interrupt();
    }
    if (auto bwd = dyn_cast<BackwardOp>(op)) {
      if (!differentiated.insert(bwd.getUnit()).second) {
        op->emitOpError() << "is a second backward of "
                          << describeUnit(bwd.getUnit());
        return WalkResult::interrupt();
      }
      for (auto [nameAttr, grad] :
           llvm::zip(bwd.getParams(), bwd.getParamGrads())) {
        StringRef name = cast<StringAttr>(nameAttr).getValue();
        FailureOr<ParamOp> param = lookup(op, name);
        if (failed(param) || failed(bwd.verifyGradient(*param, grad)))
          return WalkResult::interrupt();
        gradients.push_back({bwd, name});
      }
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  for (auto [bwd, name] : gradients)
    if (!updated.contains(name))
      return bwd.emitOpError()
             << "differentiates param '" << name
             << "', which no optimizer update updates: its gradient would "
                "be dropped and the param never trained (update it, or drop "
                "it from the backward's params)";
  // Once there are updates, every trainable param has one: the runtime
  // keeps optimizer state for each, which one without would hold for
  // nothing, unaccounted for by the ledger.
  if (!updated.empty())
    for (auto &entry : params)
      if (auto param = cast<ParamOp>(entry.second);
          param.isTrainable() && !updated.contains(entry.getKey()))
        return param.emitOpError()
               << "is trainable but no optimizer update updates it: mark "
                  "it frozen, or update it";
  return success();
}

//===--- train.unit -------------------------------------------------------===//

/// The operands, results and a body whose arguments mirror the operands.
static void buildClosedRegion(OperationState &state, TypeRange resultTypes,
                              ValueRange inputs) {
  state.addOperands(inputs);
  state.addTypes(resultTypes);
  Block *block = new Block();
  state.addRegion()->push_back(block);
  for (Value input : inputs)
    block->addArgument(input.getType(), input.getLoc());
}

/// A unit's, param's or input's name, which the runtime keys its tensors,
/// checkpoints and data by as C strings: non-empty, and without a NUL,
/// which would cut it short there (where two names could then meet). Any
/// other byte is the user's: the emitted C++ quotes every one.
static LogicalResult verifyName(Operation *op, StringRef name, StringRef what) {
  if (name.empty())
    return op->emitOpError() << "expected a non-empty " << what << " name";
  if (name.contains('\0')) {
    std::string escaped;
    llvm::raw_string_ostream os(escaped);
    llvm::printEscapedString(name, os);
    return op->emitOpError() << "expected no NUL in the " << what
                             << " name, got \"" << escaped << "\"";
  }
  return success();
}

void UnitOp::build(OpBuilder &builder, OperationState &state, StringRef name,
                   TypeRange resultTypes, ValueRange inputs) {
  state.addAttribute(getNameAttrName(state.name), builder.getStringAttr(name));
  buildClosedRegion(state, resultTypes, inputs);
}

LogicalResult UnitOp::verifyRegions() {
  if (failed(verifyName(*this, getName(), "unit")))
    return failure();
  return verifyClosedRegion(*this, getName(), getInputs(),
                            getResults().getTypes());
}

//===--- train.backward ---------------------------------------------------===//

void BackwardOp::build(OpBuilder &builder, OperationState &state,
                       StringRef unit, ArrayRef<StringRef> params,
                       TypeRange resultTypes, ValueRange inputs) {
  state.addAttribute(getUnitAttrName(state.name), builder.getStringAttr(unit));
  state.addAttribute(getParamsAttrName(state.name),
                     builder.getStrArrayAttr(params));
  buildClosedRegion(state, resultTypes, inputs);
}

LogicalResult BackwardOp::verifyRegions() {
  if (failed(verifyClosedRegion(*this, getUnit(), getInputs(),
                                getResults().getTypes())))
    return failure();
  if (getParams().size() > getNumResults())
    return emitOpError() << "expected at least " << getParams().size()
                         << " results for the gradients of 'params', got "
                         << getNumResults();
  return success();
}

LogicalResult BackwardOp::verifyGradient(ParamOp param, Value grad) {
  if (param.getUnitName() != getUnit())
    return emitOpError() << "gradient of param '" << param.getName()
                         << "' of " << describeUnit(param.getUnitName())
                         << " in the backward of " << describeUnit(getUnit());
  if (grad.getType() != param.getFullType())
    return emitOpError() << "expected the gradient of '" << param.getName()
                         << "' of type " << param.getFullType() << ", got "
                         << grad.getType();
  return success();
}

//===--- train.microbatches -----------------------------------------------===//

LogicalResult MicrobatchesOp::verifyRegions() {
  int64_t count = getCount();
  if (count <= 0)
    return emitOpError() << "expected a positive count, got " << count;
  if (getInputs().empty())
    return emitOpError() << "expected at least one input to split into "
                            "micro-batches";
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "expected " << getInputs().size()
                         << " block arguments to match the inputs, got "
                         << body.getNumArguments();
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(getInputs(), body.getArguments()))) {
    auto whole = cast<RankedTensorType>(std::get<0>(pair).getType());
    if (whole.getRank() == 0 || whole.getDimSize(0) % count != 0)
      return emitOpError() << "expected input #" << i
                           << " to split into " << count
                           << " micro-batches along dimension 0, got "
                           << whole;
    SmallVector<int64_t> shape(whole.getShape());
    shape[0] /= count;
    Type slice = whole.clone(shape);
    if (std::get<1>(pair).getType() != slice)
      return emitOpError() << "expected block argument #" << i << " of type "
                           << slice << ", got " << std::get<1>(pair).getType();
  }
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "expected the body to yield one value per result";
  return success();
}

//===--- train.param ------------------------------------------------------===//

StringRef ParamOp::getUnitName() {
  if (std::optional<StringRef> unit = getUnit())
    return *unit;
  return scopeName(enclosingScope(*this));
}

RankedTensorType ParamOp::getFullType() {
  if (std::optional<Type> full = getFull())
    return cast<RankedTensorType>(*full);
  return getType();
}

LogicalResult ParamOp::verify() {
  if (!isa<UnitOp, ModelOp>((*this)->getParentOp()))
    return emitOpError()
           << "expected to be declared in a train.unit or train.model";
  if (failed(verifyName(*this, getName(), "param")))
    return failure();
  if (!isInitializer(getInit()))
    return emitOpError() << "unknown initializer " << getInit();
  if (failed(verifyStaticShapes(*this)))
    return failure();
  if (getSharding().has_value() != getFull().has_value())
    return emitOpError() << "expected both a sharding and a full type, or "
                            "neither";
  if (getFull()) {
    auto full = dyn_cast<RankedTensorType>(*getFull());
    if (!full)
      return emitOpError() << "expected a ranked tensor full type";
    ArrayRef<int64_t> piece = getType().getShape();
    if (full.getElementType() != getType().getElementType() ||
        full.getRank() != getType().getRank() || full.getRank() == 0 ||
        piece.drop_front() != full.getShape().drop_front() ||
        piece[0] > full.getDimSize(0))
      return emitOpError() << "expected the storage " << getType()
                           << " to be a dim0 piece of the full " << full;
  }
  // A param moved out of its unit is read at the model level only, by the
  // collectives and units that take it as an input.
  if (getUnit()) {
    if (!isa<ModelOp>((*this)->getParentOp()))
      return emitOpError() << "expected a param of unit '" << *getUnit()
                           << "' to be declared in the model body";
    return success();
  }
  // A param belongs to the unit declaring it: FSDP gathers and frees it
  // with that unit, so no other unit may read it.
  Operation *scope = (*this)->getParentOp();
  for (Operation *user : getResult().getUsers()) {
    Operation *userScope = enclosingScope(user);
    if (userScope != scope)
      return user->emitOpError()
             << "uses param '" << getName() << "' of "
             << describeUnit(getUnitName()) << " inside "
             << describeUnit(scopeName(userScope));
  }
  return success();
}

//===--- train.param_ref --------------------------------------------------===//

SmallVector<StringRef, 1> ParamRefOp::getParamNames() { return {getName()}; }

LogicalResult ParamRefOp::verifyParams(ArrayRef<Operation *> params) {
  Operation *paramOp = params.front();
  auto param = cast<ParamOp>(paramOp);
  if (param.getFullType() != getType())
    return emitOpError() << "expected type " << param.getFullType()
                         << " of param '" << getName() << "', got "
                         << getType();
  StringRef unit = (*this)->getParentOfType<BackwardOp>().getUnit();
  if (param.getUnitName() != unit)
    return emitOpError() << "reads param '" << getName() << "' of "
                         << describeUnit(param.getUnitName())
                         << " in the backward of " << describeUnit(unit);
  return success();
}

//===--- train.input ------------------------------------------------------===//

LogicalResult InputOp::verify() {
  if (failed(verifyName(*this, getName(), "input")))
    return failure();
  if (getType().getRank() == 0)
    return emitOpError() << "expected a leading batch dimension";
  if (failed(verifyStaticShapes(*this)))
    return failure();
  int64_t batch = (*this)->getParentOfType<ModelOp>().getLocalBatch();
  if (getType().getDimSize(0) != batch)
    return emitOpError() << "expected leading dimension " << batch
                         << " (the model's batch per rank), got "
                         << getType().getDimSize(0);
  return success();
}

//===--- train.adamw ------------------------------------------------------===//

SmallVector<StringRef, 1> AdamWOp::getParamNames() { return {getName()}; }

Value shardc::train::summedFrom(Value value) {
  auto result = dyn_cast<OpResult>(value);
  auto loop = result ? dyn_cast<MicrobatchesOp>(result.getOwner()) : nullptr;
  if (!loop || loop.getBody().empty() || loop.getBody().front().empty())
    return nullptr;
  auto yield = dyn_cast<YieldOp>(loop.getBody().front().back());
  if (!yield || result.getResultNumber() >= yield.getNumOperands())
    return nullptr;
  return yield.getOperand(result.getResultNumber());
}

std::optional<BackwardYield>
shardc::train::backwardYieldOf(Value value,
                               function_ref<Value(Value)> through) {
  for (;;) {
    if (Value summed = summedFrom(value))
      value = summed;
    else if (Value cast = through ? through(value) : nullptr)
      value = cast;
    else
      break;
  }
  auto result = dyn_cast<OpResult>(value);
  auto backward = result ? dyn_cast<BackwardOp>(result.getOwner()) : nullptr;
  if (!backward)
    return std::nullopt;
  unsigned firstGrad = backward.getNumResults() - backward.getParams().size();
  if (result.getResultNumber() < firstGrad)
    return BackwardYield{backward.getUnit(), std::nullopt};
  return BackwardYield{
      backward.getUnit(),
      cast<StringAttr>(
          backward.getParams()[result.getResultNumber() - firstGrad])
          .getValue()};
}

LogicalResult AdamWOp::verifyParams(ArrayRef<Operation *> params) {
  Operation *paramOp = params.front();
  auto param = cast<ParamOp>(paramOp);
  if (!param.isTrainable())
    return emitOpError() << "updates frozen param '" << getName() << "'";
  // The gradient may be reduced in a wider type than the parameter is
  // stored in (mixed precision); its shape is the storage's.
  if (param.getType().getShape() != getGrad().getType().getShape())
    return emitOpError() << "expected a gradient of the shape of "
                         << param.getType() << " for param '" << getName()
                         << "', got " << getGrad().getType();
  // Where a backward yields it as a param's gradient, it is this param's:
  // two params of one shape (a layer norm's weight and bias) swapped would
  // each be updated with the other's gradient. (A param passed into a unit
  // as an operand gets the unit's input cotangent; a sharded step's
  // gradient comes through collectives and buckets, which the dist ops
  // check.)
  std::optional<BackwardYield> yielded = backwardYieldOf(getGrad());
  if (!yielded || !yielded->param || yielded->param == getName())
    return success();
  return emitOpError() << "expected the gradient of '" << getName()
                       << "', got the gradient of '" << *yielded->param << "'";
}

//===--- train.linear -----------------------------------------------------===//

/// linear's and linear_gelu's shape rules, `result` being the product.
static LogicalResult verifyLinear(Operation *op, Value input, Value weight,
                                  Value bias, Value result) {
  if (failed(verifyCompute(op)))
    return failure();
  ArrayRef<int64_t> x = shapeOf(input), w = shapeOf(weight);
  if (x.empty())
    return op->emitOpError() << "expected input of rank >= 1";
  if (w.size() != 2)
    return op->emitOpError() << "expected a weight of rank 2 [out, in], got "
                             << formatShape(w);
  if (x.back() != w[1])
    return op->emitOpError()
           << "expected input's last dimension " << x.back()
           << " to equal the weight's in-features " << w[1];
  if (bias && failed(verifyShapeIs(op, "bias", bias, {w[0]})))
    return failure();
  return verifyShapeIs(op, "result", result, concat(x.drop_back(), {w[0]}));
}
LogicalResult LinearOp::verify() {
  return verifyLinear(*this, getInput(), getWeight(), getBias(), getResult());
}

//===--- train.matmul -----------------------------------------------------===//

/// matmul's, matmul_gelu_grad's and matmul_bias_grad's shape rules,
/// `result` being the product.
static LogicalResult verifyMatmul(Operation *op, Value lhs, Value rhs,
                                  bool transposeLhs, bool transposeRhs,
                                  Value result) {
  if (failed(verifyCompute(op)))
    return failure();
  ArrayRef<int64_t> a = shapeOf(lhs), b = shapeOf(rhs);
  if (a.size() < 2 || a.size() != b.size())
    return op->emitOpError() << "expected operands of equal rank >= 2, got "
                             << formatShape(a) << " and " << formatShape(b);
  if (a.drop_back(2) != b.drop_back(2))
    return op->emitOpError() << "expected equal batch dimensions, got "
                             << formatShape(a) << " and " << formatShape(b);
  size_t r = a.size();
  int64_t m = transposeLhs ? a[r - 1] : a[r - 2];
  int64_t ka = transposeLhs ? a[r - 2] : a[r - 1];
  int64_t kb = transposeRhs ? b[r - 1] : b[r - 2];
  int64_t n = transposeRhs ? b[r - 2] : b[r - 1];
  if (ka != kb)
    return op->emitOpError()
           << "expected contracting dimensions to agree, got " << ka
           << " and " << kb;
  return verifyShapeIs(op, "result", result, concat(a.drop_back(2), {m, n}));
}
LogicalResult MatmulOp::verify() {
  return verifyMatmul(*this, getLhs(), getRhs(), getTransposeLhs(),
                      getTransposeRhs(), getResult());
}

//===--- train.add --------------------------------------------------------===//

LogicalResult AddOp::verify() {
  if (failed(verifyCompute(*this)))
    return failure();
  if (!isSuffix(shapeOf(getRhs()), shapeOf(getLhs())))
    return emitOpError() << "expected rhs shape " << formatShape(shapeOf(getRhs()))
                         << " to be a suffix of lhs shape "
                         << formatShape(shapeOf(getLhs()));
  return verifyShapeIs(*this, "result", getResult(), shapeOf(getLhs()));
}

//===--- elementwise ------------------------------------------------------===//

LogicalResult ScaleOp::verify() {
  if (failed(verifyCompute(*this)))
    return failure();
  return verifyFiniteF32([&] { return emitOpError(); }, {"factor"},
                         {getFactor().convertToDouble()});
}
LogicalResult GeluOp::verify() { return verifyCompute(*this); }
LogicalResult ReluOp::verify() { return verifyCompute(*this); }
LogicalResult GeluGradOp::verify() { return verifyCompute(*this); }
LogicalResult ReluGradOp::verify() { return verifyCompute(*this); }

//===--- train.layernorm --------------------------------------------------===//

static LogicalResult verifyNormParams(Operation *op, Value input, Value weight,
                                      double eps) {
  ArrayRef<int64_t> x = shapeOf(input);
  if (x.empty())
    return op->emitOpError() << "expected input of rank >= 1";
  if (failed(
          verifyFiniteF32([&] { return op->emitOpError(); }, {"eps"}, {eps})))
    return failure();
  if (!(eps > 0))
    return op->emitOpError() << "expected eps > 0, got " << eps;
  return verifyShapeIs(op, "weight", weight, {x.back()});
}

/// layernorm's (and add_layernorm's) rules for its input, params and result.
static LogicalResult verifyLayerNorm(Operation *op, Value input, Value weight,
                                     Value bias, double eps, Value result) {
  if (failed(verifyCompute(op)) ||
      failed(verifyNormParams(op, input, weight, eps)) ||
      failed(verifyShapeIs(op, "bias", bias, {shapeOf(input).back()})))
    return failure();
  return verifyShapeIs(op, "result", result, shapeOf(input));
}
LogicalResult LayerNormOp::verify() {
  return verifyLayerNorm(*this, getInput(), getWeight(), getBias(),
                         getEps().convertToDouble(), getResult());
}
/// layernorm_grad's (and layernorm_grad_add's) rules.
template <typename Op> static LogicalResult verifyLayerNormGrad(Op op) {
  if (failed(verifyCompute(op)) ||
      failed(verifyNormParams(op, op.getInput(), op.getWeight(),
                              op.getEps().convertToDouble())) ||
      failed(verifyShapeIs(op, "grad", op.getGrad(),
                           shapeOf(op.getInput()))) ||
      failed(verifyShapeIs(op, "input_grad", op.getInputGrad(),
                           shapeOf(op.getInput()))) ||
      failed(verifyShapeIs(op, "weight_grad", op.getWeightGrad(),
                           shapeOf(op.getWeight()))))
    return failure();
  return verifyShapeIs(op, "bias_grad", op.getBiasGrad(),
                       shapeOf(op.getWeight()));
}
LogicalResult LayerNormGradOp::verify() { return verifyLayerNormGrad(*this); }

//===--- fused ops --------------------------------------------------------===//

LogicalResult LinearGeluOp::verify() {
  if (failed(verifyLinear(*this, getInput(), getWeight(), getBias(),
                          getPreactivation())))
    return failure();
  return verifyShapeIs(*this, "result", getResult(),
                       shapeOf(getPreactivation()));
}
LogicalResult AddLayerNormOp::verify() {
  if (shapeOf(getLhs()).empty())
    return emitOpError() << "expected lhs of rank >= 1";
  if (failed(verifyCompute(*this)) ||
      failed(verifyShapeIs(*this, "rhs", getRhs(), shapeOf(getLhs()))) ||
      failed(verifyShapeIs(*this, "sum", getSum(), shapeOf(getLhs()))))
    return failure();
  return verifyLayerNorm(*this, getSum(), getWeight(), getBias(),
                         getEps().convertToDouble(), getResult());
}
LogicalResult MatmulGeluGradOp::verify() {
  if (failed(verifyMatmul(*this, getLhs(), getRhs(), getTransposeLhs(),
                          getTransposeRhs(), getResult())))
    return failure();
  if (shapeOf(getLhs()).size() != 2)
    return emitOpError() << "expected matrices, got an operand of shape "
                         << formatShape(shapeOf(getLhs()));
  return verifyShapeIs(*this, "preactivation", getPreactivation(),
                       shapeOf(getResult()));
}
LogicalResult MatmulBiasGradOp::verify() {
  if (failed(verifyMatmul(*this, getLhs(), getRhs(), getTransposeLhs(),
                          getTransposeRhs(), getResult())))
    return failure();
  ArrayRef<int64_t> lhs = shapeOf(getLhs());
  if (lhs.size() != 2)
    return emitOpError() << "expected matrices, got an operand of shape "
                         << formatShape(lhs);
  if (!getTransposeLhs())
    return emitOpError() << "expected transpose_lhs: bias_grad sums the "
                            "lhs's rows [K, N] over K";
  return verifyShapeIs(*this, "bias_grad", getBiasGrad(), {lhs[1]});
}
LogicalResult LayerNormGradAddOp::verify() {
  if (failed(verifyLayerNormGrad(*this)))
    return failure();
  return verifyShapeIs(*this, "addend", getAddend(), shapeOf(getInput()));
}

//===--- train.embedding --------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  if (failed(verifyCompute(*this)))
    return failure();
  ArrayRef<int64_t> t = shapeOf(getTable());
  if (t.size() != 2)
    return emitOpError() << "expected a table of rank 2 [V, C], got "
                         << formatShape(t);
  // Positions from train.iota are known here: each must have its row.
  if (auto iota = getIds().getDefiningOp<IotaOp>()) {
    int64_t positions = shapeOf(iota.getResult())[0];
    if (positions > t[0])
      return emitOpError() << "expected a table of at least " << positions
                           << " rows for the positions of train.iota, got "
                           << t[0];
  }
  return verifyShapeIs(*this, "result", getResult(),
                       concat(shapeOf(getIds()), {t[1]}));
}

LogicalResult EmbeddingGradOp::verify() {
  if (failed(verifyCompute(*this)))
    return failure();
  ArrayRef<int64_t> t = shapeOf(getResult());
  if (t.size() != 2)
    return emitOpError() << "expected a result of rank 2 [V, C], got "
                         << formatShape(t);
  return verifyShapeIs(*this, "grad", getGrad(),
                       concat(shapeOf(getIds()), {t[1]}));
}

//===--- train.attention --------------------------------------------------===//

static LogicalResult verifyAttentionShapes(Operation *op, Value qkv,
                                           Value out, int64_t heads) {
  ArrayRef<int64_t> s = shapeOf(qkv);
  if (s.size() != 3)
    return op->emitOpError() << "expected qkv of rank 3 [B, T, 3C], got "
                             << formatShape(s);
  if (s[2] % 3 != 0)
    return op->emitOpError()
           << "expected qkv's last dimension to be 3C, got " << s[2];
  int64_t c = s[2] / 3;
  if (heads <= 0 || c % heads != 0)
    return op->emitOpError() << "expected heads to divide " << c << ", got "
                             << heads;
  return verifyShapeIs(op, "output", out, {s[0], s[1], c});
}

/// lse: [B, heads, T] for qkv [B, T, 3C] (f32, by the op's type constraint).
static LogicalResult verifyLseShape(Operation *op, Value qkv, Value lse,
                                    int64_t heads) {
  ArrayRef<int64_t> s = shapeOf(qkv);
  return verifyShapeIs(op, "lse", lse, {s[0], heads, s[1]});
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyCompute(*this, getLse())) ||
      failed(verifyAttentionShapes(*this, getQkv(), getResult(), getHeads())))
    return failure();
  if (getLse())
    return verifyLseShape(*this, getQkv(), getLse(), getHeads());
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyCompute(*this, getLse())) ||
      failed(verifyAttentionShapes(*this, getQkv(), getGrad(), getHeads())) ||
      failed(verifyShapeIs(*this, "out", getOut(), shapeOf(getGrad()))) ||
      failed(verifyLseShape(*this, getQkv(), getLse(), getHeads())))
    return failure();
  return verifyShapeIs(*this, "result", getResult(), shapeOf(getQkv()));
}

//===--- train.cross_entropy ----------------------------------------------===//

/// A cross-entropy op (train.cross_entropy and its gradients): targets of
/// the logits' shape but the last dimension, `classes` from 1 to all of a
/// position's logits and, where it has one, a gradient `grad` (named `name`)
/// of the logits' shape.
template <typename Op>
static LogicalResult verifyCrossEntropy(Op op, StringRef name = {},
                                        Value grad = {}) {
  if (failed(verifyCompute(op)))
    return failure();
  ArrayRef<int64_t> l = shapeOf(op.getLogits());
  if (l.empty())
    return op.emitOpError() << "expected logits of rank >= 1";
  std::optional<int64_t> classes = op.getClasses();
  if (classes && (*classes < 1 || *classes > l.back()))
    return op.emitOpError()
           << "expected classes in [1, " << l.back()
           << "] (the logits' last dimension), got " << *classes;
  if (failed(verifyShapeIs(op, "targets", op.getTargets(), l.drop_back())))
    return failure();
  return grad ? verifyShapeIs(op, name, grad, l) : success();
}

LogicalResult CrossEntropyOp::verify() { return verifyCrossEntropy(*this); }

LogicalResult CrossEntropyGradOp::verify() {
  return verifyCrossEntropy(*this, "result", getResult());
}

LogicalResult CrossEntropyAndGradOp::verify() {
  return verifyCrossEntropy(*this, "logits_grad", getLogitsGrad());
}

//===--- shape ops --------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  if (elementOf(getInput()) != elementOf(getResult()))
    return emitOpError() << "expected the element type to be kept, got "
                         << elementOf(getInput()) << " and "
                         << elementOf(getResult());
  if (getInput().getType().getNumElements() !=
      getResult().getType().getNumElements())
    return emitOpError() << "expected " << getInput().getType().getNumElements()
                         << " elements in the result, got "
                         << getResult().getType().getNumElements();
  return success();
}

LogicalResult IotaOp::verify() { return verifyStaticShapes(*this); }

LogicalResult SumToOp::verify() {
  if (failed(verifyCompute(*this)))
    return failure();
  if (!isSuffix(shapeOf(getResult()), shapeOf(getInput())))
    return emitOpError() << "expected result shape "
                         << formatShape(shapeOf(getResult()))
                         << " to be a suffix of input shape "
                         << formatShape(shapeOf(getInput()));
  return success();
}
