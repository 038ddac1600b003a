//===- TrainAttrs.h - Attributes of the train dialect -----------*- C++ -*-===//

#ifndef SHARDC_DIALECT_TRAIN_IR_TRAINATTRS_H
#define SHARDC_DIALECT_TRAIN_IR_TRAINATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

namespace shardc::train {
/// Prints `value` with the fewest digits that parse back to it, always as an
/// MLIR float literal (`0.999`, `1.0e-08`).
void printShortest(llvm::raw_ostream &os, double value);

/// Fails unless every one of `values` (named by `names`) is finite as an
/// f32, as the runtime computes with it (an attribute's or an op's).
llvm::LogicalResult
verifyFiniteF32(llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                llvm::ArrayRef<llvm::StringRef> names,
                llvm::ArrayRef<double> values);
} // namespace shardc::train

#define GET_ATTRDEF_CLASSES
#include "shardc/Dialect/Train/IR/TrainAttrs.h.inc"

namespace shardc::train {
/// True for the attributes `train.param` accepts as its initializer.
bool isInitializer(mlir::Attribute attr);
} // namespace shardc::train

#endif // SHARDC_DIALECT_TRAIN_IR_TRAINATTRS_H
