//===- Retype.cpp - Recompute result types after inputs change ------------===//

#include "Retype.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "shardc/Dialect/Dist/IR/DistOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace shardc;
using namespace shardc::train;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

RankedTensorType withShape(RankedTensorType like, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, like.getElementType());
}

/// The result types of `op` given its operands' current types; the op's
/// current result types are the ones before the change.
FailureOr<SmallVector<Type>> inferResults(Operation *op) {
  auto same = [&](Value v) -> FailureOr<SmallVector<Type>> {
    return SmallVector<Type>{v.getType()};
  };
  auto one = [](Type t) -> FailureOr<SmallVector<Type>> {
    return SmallVector<Type>{t};
  };
  auto linearType = [](Value input, Value weight) -> Type {
    RankedTensorType x = typeOf(input);
    SmallVector<int64_t> shape(x.getShape().drop_back());
    shape.push_back(typeOf(weight).getDimSize(0));
    return withShape(x, shape);
  };
  auto matmulType = [](auto op) -> Type {
    ArrayRef<int64_t> a = typeOf(op.getLhs()).getShape();
    ArrayRef<int64_t> b = typeOf(op.getRhs()).getShape();
    size_t r = a.size();
    SmallVector<int64_t> shape(a.drop_back(2));
    shape.push_back(op.getTransposeLhs() ? a[r - 1] : a[r - 2]);
    shape.push_back(op.getTransposeRhs() ? b[r - 2] : b[r - 1]);
    return withShape(typeOf(op.getLhs()), shape);
  };
  return TypeSwitch<Operation *, FailureOr<SmallVector<Type>>>(op)
      .Case<LinearOp>([&](LinearOp op) {
        return one(linearType(op.getInput(), op.getWeight()));
      })
      .Case<LinearGeluOp>([&](LinearGeluOp op) {
        Type type = linearType(op.getInput(), op.getWeight());
        return FailureOr<SmallVector<Type>>(SmallVector<Type>{type, type});
      })
      .Case<MatmulOp, MatmulGeluGradOp>(
          [&](auto op) { return one(matmulType(op)); })
      .Case<MatmulBiasGradOp>([&](MatmulBiasGradOp op) {
        // The bias gradient: one per column of lhs [K, N].
        Type bias =
            withShape(typeOf(op.getLhs()), {typeOf(op.getLhs()).getDimSize(1)});
        return FailureOr<SmallVector<Type>>(
            SmallVector<Type>{matmulType(op), bias});
      })
      .Case<AddLayerNormOp>([&](AddLayerNormOp op) {
        Type type = op.getLhs().getType();
        return FailureOr<SmallVector<Type>>(SmallVector<Type>{type, type});
      })
      .Case<AddOp>([&](AddOp op) { return same(op.getLhs()); })
      .Case<ScaleOp, GeluOp, ReluOp, LayerNormOp>(
          [&](auto op) { return same(op.getInput()); })
      .Case<GeluGradOp, ReluGradOp>([&](auto op) { return same(op.getGrad()); })
      .Case<EmbeddingOp>([&](EmbeddingOp op) {
        SmallVector<int64_t> shape(typeOf(op.getIds()).getShape());
        shape.push_back(typeOf(op.getTable()).getDimSize(1));
        return one(withShape(typeOf(op.getTable()), shape));
      })
      .Case<AttentionOp>([&](AttentionOp op) -> FailureOr<SmallVector<Type>> {
        RankedTensorType qkv = typeOf(op.getQkv());
        int64_t b = qkv.getDimSize(0), t = qkv.getDimSize(1);
        SmallVector<Type> types{withShape(qkv, {b, t, qkv.getDimSize(2) / 3})};
        // The log-sum-exps stay f32.
        if (Value lse = op.getLse())
          types.push_back(
              typeOf(lse).clone({b, static_cast<int64_t>(op.getHeads()), t}));
        return types;
      })
      .Case<CrossEntropyOp, IotaOp>(
          [&](Operation *op) { return one(op->getResult(0).getType()); })
      .Case<ReshapeOp>([&](ReshapeOp op) -> FailureOr<SmallVector<Type>> {
        // A view: the leading dimension takes up the change in size.
        RankedTensorType oldResult = op.getResult().getType();
        RankedTensorType in = typeOf(op.getInput());
        int64_t oldCount = oldResult.getNumElements();
        int64_t newCount = in.getNumElements();
        SmallVector<int64_t> shape(oldResult.getShape());
        if (newCount == oldCount)
          return one(withShape(in, shape));
        if (shape.empty() || (shape[0] * newCount) % oldCount != 0)
          return op.emitOpError()
                 << "cannot follow its input from " << oldCount << " to "
                 << newCount << " elements: its result's leading dimension "
                 << "would have to take up the change";
        shape[0] = shape[0] * newCount / oldCount;
        return one(withShape(in, shape));
      })
      .Case<SumToOp>([&](SumToOp op) {
        RankedTensorType in = typeOf(op.getInput());
        RankedTensorType out = op.getResult().getType();
        if (out.getRank() == in.getRank())
          return one(in);
        return one(withShape(in, out.getShape()));
      })
      .Case<LayerNormGradOp, LayerNormGradAddOp>([&](auto op) {
        Type w = op.getWeight().getType();
        return FailureOr<SmallVector<Type>>(
            SmallVector<Type>{op.getInput().getType(), w, w});
      })
      .Case<EmbeddingGradOp>([&](EmbeddingGradOp op) {
        return one(withShape(typeOf(op.getGrad()),
                             op.getResult().getType().getShape()));
      })
      .Case<AttentionGradOp>(
          [&](AttentionGradOp op) { return same(op.getQkv()); })
      .Case<CrossEntropyGradOp>(
          [&](CrossEntropyGradOp op) { return same(op.getLogits()); })
      .Case<CrossEntropyAndGradOp>([&](CrossEntropyAndGradOp op) {
        // The loss stays an f32 scalar.
        return FailureOr<SmallVector<Type>>(SmallVector<Type>{
            op.getLoss().getType(), op.getLogits().getType()});
      })
      .Case<arith::ConstantOp>(
          [&](arith::ConstantOp op) -> FailureOr<SmallVector<Type>> {
            // Only the loss's seed: a scalar that keeps its type.
            auto type = dyn_cast<RankedTensorType>(op.getType());
            if (type && type.getRank() == 0)
              return one(type);
            return op.emitOpError()
                   << "cannot follow a change of batch or dtype";
          })
      .Default([&](Operation *op) -> FailureOr<SmallVector<Type>> {
        // Declarations, collectives (built with their final types) and ops
        // without results keep what they have.
        return SmallVector<Type>(op->getResultTypes());
      });
}

LogicalResult retypeBlock(Block &block);

LogicalResult retypeRegionOp(Operation *op) {
  Block &body = op->getRegion(0).front();
  // A micro-batch loop's arguments are slices of its operands.
  int64_t slices = 1;
  if (auto loop = dyn_cast<MicrobatchesOp>(op))
    slices = loop.getCount();
  for (auto [arg, operand] :
       llvm::zip(body.getArguments(), op->getOperands())) {
    auto type = cast<RankedTensorType>(operand.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[0] /= slices;
    arg.setType(type.clone(shape));
  }
  if (failed(retypeBlock(body)))
    return failure();
  for (auto [result, yielded] :
       llvm::zip(op->getResults(), body.getTerminator()->getOperands()))
    result.setType(yielded.getType());
  return success();
}

LogicalResult retypeBlock(Block &block) {
  for (Operation &op : block) {
    if (isa<UnitOp, BackwardOp, MicrobatchesOp>(op)) {
      if (failed(retypeRegionOp(&op)))
        return failure();
      continue;
    }
    FailureOr<SmallVector<Type>> types = inferResults(&op);
    if (failed(types))
      return failure();
    for (auto [result, type] : llvm::zip(op.getResults(), *types))
      result.setType(type);
  }
  return success();
}

} // namespace

LogicalResult shardc::dist::retypeModel(ModelOp model) {
  return retypeBlock(model.getBody().front());
}
