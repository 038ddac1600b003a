//===- shardc-opt.cpp - Run shardc passes on train/dist IR ----------------===//

#include "shardc/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include <string>
#include <vector>

int main(int argc, char **argv) {
  // Diagnostics name the place and the value; dumping the whole operation
  // under each one buries them. `--mlir-print-op-on-diagnostic` restores it.
  std::vector<char *> args(argv, argv + argc);
  std::string quiet = "--mlir-print-op-on-diagnostic=false";
  args.insert(args.begin() + 1, quiet.data());
  argc = static_cast<int>(args.size());
  argv = args.data();

  shardc::registerAllPasses();
  mlir::DialectRegistry registry;
  shardc::registerAllDialects(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "shardc optimizer: train and dist dialect passes\n",
      registry));
}
