//===- DistOps.h - The dist dialect -----------------------------*- C++ -*-===//

#ifndef SHARDC_DIALECT_DIST_IR_DISTOPS_H
#define SHARDC_DIALECT_DIST_IR_DISTOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "shardc/Dialect/Train/IR/TrainOps.h"

#include "shardc/Dialect/Dist/IR/DistDialect.h.inc"
#include "shardc/Dialect/Dist/IR/DistEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "shardc/Dialect/Dist/IR/DistTypes.h.inc"

#define GET_ATTRDEF_CLASSES
#include "shardc/Dialect/Dist/IR/DistAttrs.h.inc"

#define GET_OP_CLASSES
#include "shardc/Dialect/Dist/IR/DistOps.h.inc"

#endif // SHARDC_DIALECT_DIST_IR_DISTOPS_H
