//===- shardc-opt.cpp - Run shardc passes on train/dist IR ----------------===//

#include "shardc/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  shardc::registerAllPasses();
  mlir::DialectRegistry registry;
  shardc::registerAllDialects(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "shardc optimizer: train and dist dialect passes\n",
      registry));
}
