//===- Autodiff.cpp - Derive the backward and the optimizer step ----------===//
//
// Reverse-mode differentiation of a train.model: one train.backward region
// per unit, the root unit's backward in the model body, then train.adamw.
//
//===----------------------------------------------------------------------===//

#include "shardc/Dialect/Train/Transforms/Passes.h"
#include "shardc/Support/PassOptions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/GlobPattern.h"

#include <functional>

#define DEBUG_TYPE "train-autodiff"

namespace shardc::train {
#define GEN_PASS_DEF_TRAINAUTODIFFPASS
#include "shardc/Dialect/Train/Transforms/Passes.h.inc"
} // namespace shardc::train

using namespace mlir;
using namespace shardc::train;

namespace {

bool isFloatTensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa<FloatType>(type.getElementType());
}

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

//===----------------------------------------------------------------------===//
// Activity: which values depend on a trainable parameter
//===----------------------------------------------------------------------===//

class Activity {
public:
  explicit Activity(ModelOp model) {
    for (Operation &op : model.getBody().front())
      visit(&op);
  }
  bool isActive(Value v) const { return active.contains(v); }
  bool isActive(Operation *op) const {
    return llvm::any_of(op->getResults(),
                        [&](Value r) { return isActive(r); });
  }

private:
  void visit(Operation *op) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      if (param.isTrainable())
        active.insert(param.getResult());
      return;
    }
    if (auto unit = dyn_cast<UnitOp>(op)) {
      Block &body = unit.getBody().front();
      for (auto [input, arg] : llvm::zip(unit.getInputs(), body.getArguments()))
        if (isActive(input))
          active.insert(arg);
      for (Operation &inner : body)
        visit(&inner);
      for (auto [res, yielded] :
           llvm::zip(unit.getResults(), body.getTerminator()->getOperands()))
        if (isActive(yielded))
          active.insert(res);
      return;
    }
    if (llvm::none_of(op->getOperands(),
                      [&](Value v) { return isActive(v); }))
      return;
    for (Value r : op->getResults())
      if (isFloatTensor(r))
        active.insert(r);
  }

  llvm::DenseSet<Value> active;
};

//===----------------------------------------------------------------------===//
// Reverse sweep over one scope (the root body or one unit body)
//===----------------------------------------------------------------------===//

/// Emits the backward of the ops of one scope with `builder`. Forward values
/// are reached through `forward`, which makes them available where the
/// backward is built (identity in the root; residuals and param_refs inside
/// a train.backward).
class ReverseSweep {
public:
  ReverseSweep(OpBuilder &builder, const Activity &activity,
               std::function<Value(Value)> forward)
      : b(builder), activity(activity), forward(forward) {}

  /// Adds `cot` to the cotangent of forward value `v`.
  void accumulate(Value v, Value cot) {
    if (!activity.isActive(v))
      return;
    auto [it, inserted] = cotangents.try_emplace(v, cot);
    if (!inserted)
      it->second = AddOp::create(b, cot.getLoc(), cot.getType(), it->second,
                                 cot);
  }

  /// The cotangent of `v`, or null when nothing flowed into it.
  Value cotangentOf(Value v) const { return cotangents.lookup(v); }

  /// The cotangent of `v`, zeros when nothing flowed into it.
  Value cotangentOrZero(Value v) {
    if (Value c = cotangentOf(v))
      return c;
    return arith::ConstantOp::create(b, v.getLoc(),
                                     b.getZeroAttr(tensorType(v)));
  }

  /// Applies the VJP rule of `op` to the cotangents of its results.
  LogicalResult differentiate(Operation *op);

private:
  Value reshapeTo(Value v, ArrayRef<int64_t> shape) {
    auto type = tensorType(v);
    if (type.getShape() == shape)
      return v;
    return ReshapeOp::create(b, v.getLoc(), type.clone(shape), v);
  }

  /// A `[..., n]` value as the matrix `[prod(...), n]`.
  Value flattenToMatrix(Value v) {
    ArrayRef<int64_t> s = tensorType(v).getShape();
    return reshapeTo(v, {tensorType(v).getNumElements() / s.back(), s.back()});
  }

  Value matmul(Value lhs, Value rhs, bool tl, bool tr, Type resultType) {
    auto op = MatmulOp::create(b, lhs.getLoc(), resultType, lhs, rhs);
    op.setTransposeLhs(tl);
    op.setTransposeRhs(tr);
    return op;
  }

  LogicalResult linear(LinearOp op, Value dy);
  LogicalResult matmul(MatmulOp op, Value dy);

  OpBuilder &b;
  const Activity &activity;
  std::function<Value(Value)> forward;
  llvm::DenseMap<Value, Value> cotangents;
};

LogicalResult ReverseSweep::linear(LinearOp op, Value dy) {
  Location loc = op.getLoc();
  auto xType = tensorType(op.getInput());
  Value dy2 = flattenToMatrix(dy);
  if (activity.isActive(op.getInput())) {
    Value w = forward(op.getWeight());
    ArrayRef<int64_t> dyShape = tensorType(dy2).getShape();
    Type t = xType.clone({dyShape[0], xType.getShape().back()});
    accumulate(op.getInput(),
               reshapeTo(matmul(dy2, w, false, false, t), xType.getShape()));
  }
  if (activity.isActive(op.getWeight())) {
    Value x2 = flattenToMatrix(forward(op.getInput()));
    accumulate(op.getWeight(), matmul(dy2, x2, /*tl=*/true, false,
                                      op.getWeight().getType()));
  }
  if (op.getBias() && activity.isActive(op.getBias()))
    accumulate(op.getBias(), SumToOp::create(b, loc, op.getBias().getType(),
                                             dy));
  return success();
}

// C = op(A) op(B): d op(A) = dC op(B)^T and d op(B) = op(A)^T dC, each
// transposed back when the operand itself was transposed.
LogicalResult ReverseSweep::matmul(MatmulOp op, Value dy) {
  bool ta = op.getTransposeLhs(), tb = op.getTransposeRhs();
  Value a = op.getLhs(), bv = op.getRhs();
  if (activity.isActive(a)) {
    Value fb = forward(bv);
    accumulate(a, ta ? matmul(fb, dy, tb, true, a.getType())
                     : matmul(dy, fb, false, !tb, a.getType()));
  }
  if (activity.isActive(bv)) {
    Value fa = forward(a);
    accumulate(bv, tb ? matmul(dy, fa, true, ta, bv.getType())
                      : matmul(fa, dy, !ta, false, bv.getType()));
  }
  return success();
}

LogicalResult ReverseSweep::differentiate(Operation *op) {
  if (!activity.isActive(op))
    return success();
  if (isa<LinearGeluOp, AddLayerNormOp, MatmulGeluGradOp, MatmulBiasGradOp,
          LayerNormGradAddOp, CrossEntropyAndGradOp>(op))
    return op->emitOpError()
           << "is a fused op: --train-fuse runs after --train-autodiff";
  // Every differentiable op has one result, but for attention's second, its
  // log-sum-exps: statistics for the backward, through which no gradient
  // flows.
  if (op->getNumResults() != 1 && !isa<AttentionOp>(op))
    return op->emitOpError() << "has no vector-Jacobian product rule";
  if (auto attention = dyn_cast<AttentionOp>(op);
      attention && attention.getLse() && cotangentOf(attention.getLse()))
    return op->emitOpError()
           << "has log-sum-exps the loss depends on: they are statistics for "
              "the backward, and carry no gradient";
  Value dy = cotangentOf(op->getResult(0));
  if (!dy)
    return success();
  Location loc = op->getLoc();
  auto active = [&](Value v) { return activity.isActive(v); };

  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<LinearOp>([&](auto op) { return linear(op, dy); })
      .Case<MatmulOp>([&](auto op) { return matmul(op, dy); })
      .Case<AddOp>([&](AddOp op) {
        accumulate(op.getLhs(), dy);
        if (active(op.getRhs()))
          accumulate(op.getRhs(),
                     op.getRhs().getType() == dy.getType()
                         ? dy
                         : SumToOp::create(b, loc, op.getRhs().getType(), dy)
                               .getResult());
        return success();
      })
      .Case<ScaleOp>([&](ScaleOp op) {
        accumulate(op.getInput(),
                   ScaleOp::create(b, loc, dy, op.getFactorAttr()));
        return success();
      })
      .Case<GeluOp>([&](GeluOp op) {
        accumulate(op.getInput(),
                   GeluGradOp::create(b, loc, dy, forward(op.getInput())));
        return success();
      })
      .Case<ReluOp>([&](ReluOp op) {
        accumulate(op.getInput(),
                   ReluGradOp::create(b, loc, dy, forward(op.getInput())));
        return success();
      })
      .Case<LayerNormOp>([&](LayerNormOp op) {
        auto grad = LayerNormGradOp::create(
            b, loc, op.getInput().getType(), op.getWeight().getType(),
            op.getBias().getType(), dy, forward(op.getInput()),
            forward(op.getWeight()), op.getEpsAttr());
        accumulate(op.getInput(), grad.getInputGrad());
        accumulate(op.getWeight(), grad.getWeightGrad());
        accumulate(op.getBias(), grad.getBiasGrad());
        return success();
      })
      .Case<EmbeddingOp>([&](EmbeddingOp op) {
        if (!active(op.getTable()))
          return success();
        accumulate(op.getTable(),
                   EmbeddingGradOp::create(b, loc, op.getTable().getType(), dy,
                                           forward(op.getIds())));
        return success();
      })
      .Case<AttentionOp>([&](AttentionOp op) -> LogicalResult {
        if (!op.getLse()) // keepAttentionStatistics gives every one its lse
          return op.emitOpError() << "has no log-sum-exps to differentiate";
        accumulate(op.getQkv(),
                   AttentionGradOp::create(
                       b, loc, op.getQkv().getType(), dy, forward(op.getQkv()),
                       forward(op.getResult()), forward(op.getLse()),
                       op.getHeadsAttr()));
        return success();
      })
      .Case<CrossEntropyOp>([&](CrossEntropyOp op) {
        accumulate(op.getLogits(),
                   CrossEntropyGradOp::create(b, loc, op.getLogits().getType(),
                                              dy, forward(op.getLogits()),
                                              forward(op.getTargets()),
                                              op.getClassesAttr()));
        return success();
      })
      .Case<ReshapeOp>([&](ReshapeOp op) {
        accumulate(op.getInput(),
                   reshapeTo(dy, tensorType(op.getInput()).getShape()));
        return success();
      })
      .Case<SumToOp>([&](SumToOp op) {
        // Broadcasting dy back: zeros of the input's shape plus dy, the
        // zeros the input times 0, which follow sharding's split of the
        // batch and its dtypes as a constant of the input's shape would not
        // (an inf or NaN in the input makes its gradient NaN).
        Value zeros = ScaleOp::create(b, loc, forward(op.getInput()),
                                      b.getF64FloatAttr(0.0));
        accumulate(op.getInput(),
                   AddOp::create(b, loc, op.getInput().getType(), zeros, dy));
        return success();
      })
      .Default([&](Operation *op) {
        return op->emitOpError() << "has no vector-Jacobian product rule";
      });
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct TrainAutodiffPass
    : shardc::NamedOptionErrors<
          shardc::train::impl::TrainAutodiffPassBase<TrainAutodiffPass>> {
  using NamedOptionErrors::NamedOptionErrors;
  void runOnOperation() override;

private:
  LogicalResult differentiateModel(ModelOp model);
  /// Emits the train.backward of `unit` given the root sweep's cotangents;
  /// with `recompute`, the backward runs the unit's forward again instead
  /// of reading activations the forward kept.
  LogicalResult differentiateUnit(UnitOp unit, ReverseSweep &root, OpBuilder &b,
                                  bool recompute);
  /// The units `recompute` names, or failure where a pattern is malformed
  /// or names no unit of `model`.
  FailureOr<llvm::DenseSet<Operation *>> unitsToRecompute(ModelOp model);

  const Activity *activity = nullptr;
  /// recompute-policy=save-matmuls.
  bool keepMatmuls = false;
  /// The gradient of each trainable param that received one.
  llvm::MapVector<StringRef, Value> paramGrads;
};

LogicalResult TrainAutodiffPass::differentiateUnit(UnitOp unit,
                                                   ReverseSweep &root,
                                                   OpBuilder &b,
                                                   bool recompute) {
  Block &fwdBody = unit.getBody().front();
  auto yield = cast<YieldOp>(fwdBody.getTerminator());

  // Backward inputs: the cotangents of active results that received one.
  SmallVector<Value> bwdInputs;
  auto *bwdBody = new Block();
  SmallVector<std::pair<Value, BlockArgument>> seeds;
  for (auto [res, yielded] : llvm::zip(unit.getResults(), yield.getValues())) {
    Value cot = root.cotangentOf(res);
    if (!cot)
      continue;
    bwdInputs.push_back(cot);
    seeds.push_back({yielded, bwdBody->addArgument(cot.getType(), res.getLoc())});
  }
  if (bwdInputs.empty())
    return success(); // nothing trainable reaches the loss through this unit

  // Forward values used by the backward: unit inputs are passed in again,
  // params are re-read by name, other values are kept by the forward
  // (yielded as extra results) and passed in, or, with `recompute`,
  // computed again (under recompute-policy=save-matmuls, but for the
  // results of GEMMs and attention, which are kept). The backward block is
  // then: param_refs, recomputed ops (each after its operands), the
  // vector-Jacobian products.
  OpBuilder inner(unit.getContext());
  inner.setInsertionPointToEnd(bwdBody);
  SmallVector<Value> residualsToYield;
  SmallVector<std::pair<unsigned, Value>> outerResiduals; // arg index, value
  llvm::DenseMap<Value, Value> mapped;
  Operation *lastRecomputed = nullptr;
  std::function<Value(Value)> forward = [&](Value v) -> Value {
    if (Value m = mapped.lookup(v))
      return m;
    Value m;
    Operation *def = v.getDefiningOp();
    if (auto param = dyn_cast_or_null<ParamOp>(def)) {
      OpBuilder::InsertionGuard guard(inner);
      inner.setInsertionPointToStart(bwdBody);
      m = ParamRefOp::create(inner, v.getLoc(), param.getType(),
                             param.getNameAttr());
    } else if (recompute && def &&
               !(keepMatmuls && isa<LinearOp, MatmulOp, AttentionOp>(def))) {
      IRMapping operands;
      for (Value operand : def->getOperands())
        operands.map(operand, forward(operand));
      OpBuilder::InsertionGuard guard(inner);
      if (lastRecomputed)
        inner.setInsertionPointAfter(lastRecomputed);
      else
        inner.setInsertionPoint(bwdBody, llvm::find_if(*bwdBody, [](auto &op) {
                                  return !isa<ParamRefOp>(op);
                                }));
      lastRecomputed = inner.clone(*def, operands);
      lastRecomputed->setAttr(kRecomputedAttrName, inner.getUnitAttr());
      for (auto [result, again] :
           llvm::zip(def->getResults(), lastRecomputed->getResults()))
        mapped[result] = again;
      return mapped.lookup(v);
    } else {
      m = bwdBody->addArgument(v.getType(), v.getLoc());
      if (auto arg = dyn_cast<BlockArgument>(v);
          arg && arg.getOwner() == &fwdBody)
        outerResiduals.push_back(
            {bwdBody->getNumArguments() - 1, unit.getInputs()[arg.getArgNumber()]});
      else
        residualsToYield.push_back(v);
    }
    mapped[v] = m;
    return m;
  };

  ReverseSweep sweep(inner, *activity, forward);
  for (auto [yielded, arg] : seeds)
    sweep.accumulate(yielded, arg);
  for (Operation &op : llvm::reverse(fwdBody.without_terminator()))
    if (!isa<ParamOp>(op) && failed(sweep.differentiate(&op)))
      return failure();

  // Results: cotangents of active inputs, then gradients of params.
  SmallVector<Value> yields;
  SmallVector<Value> activeInputs;
  for (auto [input, arg] : llvm::zip(unit.getInputs(), fwdBody.getArguments()))
    if (activity->isActive(arg)) {
      activeInputs.push_back(input);
      yields.push_back(sweep.cotangentOrZero(arg));
    }
  SmallVector<StringRef> gradParams;
  for (auto param : fwdBody.getOps<ParamOp>())
    if (Value g = sweep.cotangentOf(param.getResult())) {
      gradParams.push_back(param.getName());
      yields.push_back(g);
    }
  YieldOp::create(inner, unit.getLoc(), yields);

  // Keep the residuals alive past the forward: the unit yields them too.
  unsigned numResults = unit.getNumResults();
  if (!residualsToYield.empty()) {
    yield->insertOperands(yield->getNumOperands(), residualsToYield);
    OpBuilder before(unit);
    SmallVector<Type> types(unit.getResultTypes());
    for (Value v : residualsToYield)
      types.push_back(v.getType());
    OperationState state(unit.getLoc(), UnitOp::getOperationName());
    state.addOperands(unit.getInputs());
    state.addAttributes(unit->getAttrs());
    state.addTypes(types);
    state.addRegion()->takeBody(unit.getBody());
    Operation *grown = before.create(state);
    unit->replaceAllUsesWith(grown->getResults().take_front(numResults));
    unit->erase();
    unit = cast<UnitOp>(grown);
  }
  // Residual block arguments were added in first-use order; bind each.
  unsigned nextKept = numResults;
  for (unsigned i = bwdInputs.size(); i < bwdBody->getNumArguments(); ++i) {
    auto outer = llvm::find_if(outerResiduals,
                               [&](auto &p) { return p.first == i; });
    bwdInputs.push_back(outer != outerResiduals.end()
                            ? outer->second
                            : unit.getResult(nextKept++));
  }

  SmallVector<Type> resultTypes;
  for (Value v : yields)
    resultTypes.push_back(v.getType());
  auto bwd = BackwardOp::create(b, unit.getLoc(), unit.getName(), gradParams,
                                resultTypes, bwdInputs);
  bwd.getBody().front().erase();
  bwd.getBody().push_back(bwdBody);

  for (auto [input, cot] : llvm::zip(activeInputs, bwd.getResults()))
    root.accumulate(input, cot);
  for (auto [name, grad] : llvm::zip(gradParams, bwd.getParamGrads()))
    paramGrads[name] = grad;
  return success();
}

void TrainAutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  FailureOr<SmallVector<ModelOp>> models = getModels(module);
  if (failed(models))
    return signalPassFailure();
  for (ModelOp model : *models)
    if (failed(differentiateModel(model)))
      return signalPassFailure();
}

/// Gives every attention the backward differentiates its log-sum-exps,
/// which train.attention_grad reads (FlashAttention-2's saved state).
void keepAttentionStatistics(ModelOp model) {
  Activity activity(model);
  SmallVector<AttentionOp> missing;
  model.walk([&](AttentionOp op) {
    if (!op.getLse() && activity.isActive(op.getResult()))
      missing.push_back(op);
  });
  for (AttentionOp op : missing) {
    OpBuilder b(op);
    RankedTensorType qkv = tensorType(op.getQkv());
    auto lse = RankedTensorType::get({qkv.getDimSize(0),
                                      static_cast<int64_t>(op.getHeads()),
                                      qkv.getDimSize(1)},
                                     b.getF32Type());
    auto kept = AttentionOp::create(b, op.getLoc(), op.getResult().getType(),
                                    lse, op.getQkv(), op.getHeadsAttr());
    op.getResult().replaceAllUsesWith(kept.getResult());
    op.erase();
  }
}

FailureOr<llvm::DenseSet<Operation *>>
TrainAutodiffPass::unitsToRecompute(ModelOp model) {
  llvm::DenseSet<Operation *> units;
  for (const std::string &text : recompute) {
    if (text == "auto")
      return model.emitOpError()
             << "recompute: 'auto' is shardc-pipeline's (it chooses with "
                "the ledger); train-autodiff takes unit names or globs";
    // Brace alternatives on (h.{0,1}); the bound only guards the expansion.
    llvm::Expected<llvm::GlobPattern> pattern =
        llvm::GlobPattern::create(text, /*MaxSubPatterns=*/1024);
    if (!pattern)
      return model.emitOpError()
             << "recompute: '" << text << "' is not a unit name or glob: "
             << llvm::toString(pattern.takeError());
    bool matched = false;
    for (auto unit : model.getBody().front().getOps<UnitOp>())
      if (pattern->match(unit.getName())) {
        units.insert(unit);
        matched = true;
      }
    if (!matched)
      return model.emitOpError()
             << "recompute: '" << text << "' names no unit of the model";
  }
  return units;
}

LogicalResult TrainAutodiffPass::differentiateModel(ModelOp model) {
  Block &body = model.getBody().front();
  if (!body.getOps<BackwardOp>().empty() || !body.getOps<AdamWOp>().empty())
    return model.emitOpError() << "is already differentiated";
  if (auto loops = body.getOps<MicrobatchesOp>(); !loops.empty())
    return (*loops.begin()).emitOpError()
           << "in a model to differentiate: shardc-shard's grad-accum=K "
              "makes the micro-batch loop, after the autodiff (give the "
              "forward of the whole batch)";
  FailureOr<llvm::DenseSet<Operation *>> recomputed = unitsToRecompute(model);
  if (failed(recomputed))
    return failure();
  if (recomputePolicy != "full" && recomputePolicy != "save-matmuls")
    return model.emitOpError()
           << "recompute-policy: expected full or save-matmuls, got '"
           << recomputePolicy << "'";
  keepMatmuls = recomputePolicy == "save-matmuls";
  if (keepMatmuls && recompute.empty())
    model.emitWarning() << "recompute-policy=save-matmuls: ignored without "
                           "recompute (no unit runs its forward again)";
  keepAttentionStatistics(model);
  Activity act(model);
  activity = &act;
  paramGrads.clear();

  auto ret = cast<ReturnOp>(body.getTerminator());
  // A unit off the loss would run in every step for nothing, and its params
  // would belong to no unit of the evaluation step, which keeps only what
  // the loss depends on.
  llvm::DenseSet<Operation *> reachesLoss;
  SmallVector<Value> work{ret.getLoss()};
  while (!work.empty())
    if (Operation *def = work.pop_back_val().getDefiningOp();
        def && reachesLoss.insert(def).second)
      llvm::append_range(work, def->getOperands());
  for (auto unit : body.getOps<UnitOp>())
    if (!reachesLoss.contains(unit))
      return unit.emitOpError() << "'" << unit.getName()
                                << "' does not reach the loss: remove it, "
                                   "or use its results";
  OpBuilder b(ret);
  ReverseSweep root(b, act, [](Value v) { return v; });
  Value loss = ret.getLoss();
  if (!act.isActive(loss))
    return model.emitOpError()
           << "has a loss that depends on no trainable param";
  root.accumulate(loss, arith::ConstantOp::create(
                            b, loss.getLoc(),
                            DenseElementsAttr::get(tensorType(loss), 1.0f)));

  SmallVector<Operation *> forwardOps;
  for (Operation &op : body.without_terminator())
    forwardOps.push_back(&op);
  for (Operation *op : llvm::reverse(forwardOps)) {
    LogicalResult ok = success();
    if (auto unit = dyn_cast<UnitOp>(op))
      ok = differentiateUnit(unit, root, b, recomputed->contains(unit));
    else if (auto param = dyn_cast<ParamOp>(op)) {
      if (Value g = root.cotangentOf(param.getResult()))
        paramGrads[param.getName()] = g;
    } else
      ok = root.differentiate(op);
    if (failed(ok))
      return failure();
  }

  // A trainable param without a gradient would never be trained, yet hold
  // optimizer state: refused, as DDP refuses unused parameters, where
  // `frozen` says what is meant.
  WalkResult unused = model.walk([&](ParamOp param) {
    if (param.getFrozen() || paramGrads.contains(param.getName()))
      return WalkResult::advance();
    param.emitOpError() << "'" << param.getName()
                        << "' is trainable but does not reach the loss: "
                           "mark it frozen, or use it";
    return WalkResult::interrupt();
  });
  if (unused.wasInterrupted())
    return failure();

  // One update per trainable param, in declaration order.
  model.walk([&](ParamOp param) {
    if (Value g = paramGrads.lookup(param.getName()))
      AdamWOp::create(b, param.getLoc(), param.getNameAttr(), g,
                      /*clip=*/Value());
  });
  return success();
}

} // namespace
