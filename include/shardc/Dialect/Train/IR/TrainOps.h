//===- TrainOps.h - Operations of the train dialect -------------*- C++ -*-===//

#ifndef SHARDC_DIALECT_TRAIN_IR_TRAINOPS_H
#define SHARDC_DIALECT_TRAIN_IR_TRAINOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"

#include <optional>

#include "shardc/Dialect/Train/IR/TrainAttrs.h"
#include "shardc/Dialect/Train/IR/TrainDialect.h"

#include "shardc/Dialect/Train/IR/TrainInterfaces.h.inc"

namespace shardc::train {
/// Every tensor `op` touches has a static shape of positive dimensions and
/// at most ModelOp::kMaxElements elements; an error on `op` where not.
mlir::LogicalResult verifyStaticShapes(mlir::Operation *op);

/// The trait of ops whose tensors verifyStaticShapes checks before the
/// op's own verifier (the dist ops; train's compute ops call it).
template <typename ConcreteType>
class StaticShapes
    : public mlir::OpTrait::TraitBase<ConcreteType, StaticShapes> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    return verifyStaticShapes(op);
  }
};
} // namespace shardc::train

#define GET_OP_CLASSES
#include "shardc/Dialect/Train/IR/TrainOps.h.inc"

namespace shardc::train {
/// The unit attribute of an op of a `train.backward` that runs its unit's
/// forward again (activation checkpointing, `--train-autodiff`'s
/// `recompute`).
constexpr llvm::StringLiteral kRecomputedAttrName = "train.recomputed";

/// The models of `module`; an error on the module when it holds none.
mlir::FailureOr<llvm::SmallVector<ModelOp>> getModels(mlir::ModuleOp module);
/// The one model of `module`, which `purpose` ("sharding", "emitting")
/// needs alone; getModels' error where there is none, else an error on the
/// second one, noting the first.
mlir::FailureOr<ModelOp> getSingleModel(mlir::ModuleOp module,
                                        llvm::StringRef purpose);

/// Where `value` is a result of a train.microbatches, what its body yields
/// for it (the result sums that over the micro-batches); else null.
mlir::Value summedFrom(mlir::Value value);

/// What a train.backward yields: its unit, and the param whose gradient it
/// is, or none for a cotangent of the unit's inputs (which is a param's
/// gradient where the param is passed into the unit as an operand).
struct BackwardYield {
  llvm::StringRef unit;
  std::optional<llvm::StringRef> param;
};

/// Where a train.backward yields `value`, looking through micro-batch sums
/// and what `through` looks through (a later dialect's casts: the value
/// it casts, else null), what it is; nullopt for a value no backward
/// yields as it is (gradients summed: a tied param's).
std::optional<BackwardYield>
backwardYieldOf(mlir::Value value,
                llvm::function_ref<mlir::Value(mlir::Value)> through = {});
} // namespace shardc::train

#endif // SHARDC_DIALECT_TRAIN_IR_TRAINOPS_H
