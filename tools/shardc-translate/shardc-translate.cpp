//===- shardc-translate.cpp - Emit source from sharded models -------------===//

#include "shardc/Target/Cpp/StepEmitter.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  shardc::registerStepTranslations();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "shardc source emitters"));
}
