//===- TrainDialect.h - The train dialect -----------------------*- C++ -*-===//

#ifndef SHARDC_DIALECT_TRAIN_IR_TRAINDIALECT_H
#define SHARDC_DIALECT_TRAIN_IR_TRAINDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Dialect.h"

#include "shardc/Dialect/Train/IR/TrainDialect.h.inc"

#endif // SHARDC_DIALECT_TRAIN_IR_TRAINDIALECT_H
