//===- Retype.h - Recompute result types after inputs change ----*- C++ -*-===//
//
// Private to the sharding passes: after sharding changes the types of a
// step's inputs and parameters (the per-rank batch, the compute dtype),
// every result type follows from the operands by the ops' shape rules.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_LIB_DIALECT_DIST_TRANSFORMS_RETYPE_H
#define SHARDC_LIB_DIALECT_DIST_TRANSFORMS_RETYPE_H

#include "shardc/Dialect/Train/IR/TrainOps.h"

namespace shardc::dist {
/// Recomputes, in program order, the result types of every op of `model`
/// (and block argument types of units and backwards) from the current types
/// of inputs and params. Fails, naming the op, where a result cannot follow
/// (a reshape whose leading dimension does not divide).
mlir::LogicalResult retypeModel(train::ModelOp model);
} // namespace shardc::dist

#endif // SHARDC_LIB_DIALECT_DIST_TRANSFORMS_RETYPE_H
