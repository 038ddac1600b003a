//===- InitAll.cpp - Register every shardc dialect and pass ---------------===//

#include "shardc/InitAll.h"

#include "shardc/Dialect/Dist/IR/DistOps.h"
#include "shardc/Dialect/Dist/Transforms/Passes.h"
#include "shardc/Dialect/Train/IR/TrainOps.h"
#include "shardc/Dialect/Train/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/Passes.h"

void shardc::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<train::TrainDialect, dist::DistDialect,
                  mlir::arith::ArithDialect, mlir::func::FuncDialect>();
}

void shardc::registerAllPasses() {
  train::registerTrainPasses();
  dist::registerDistPasses();
  dist::registerShardcPipeline();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
}
