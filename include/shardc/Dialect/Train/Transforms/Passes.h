//===- Passes.h - Passes of the train dialect -------------------*- C++ -*-===//

#ifndef SHARDC_DIALECT_TRAIN_TRANSFORMS_PASSES_H
#define SHARDC_DIALECT_TRAIN_TRANSFORMS_PASSES_H

#include "shardc/Dialect/Train/IR/TrainOps.h"
#include "mlir/Pass/Pass.h"

namespace shardc::train {
#define GEN_PASS_DECL
#include "shardc/Dialect/Train/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "shardc/Dialect/Train/Transforms/Passes.h.inc"
} // namespace shardc::train

#endif // SHARDC_DIALECT_TRAIN_TRANSFORMS_PASSES_H
