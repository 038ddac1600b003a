//===- shardc-translate.cpp - Emit source from sharded models -------------===//

#include "shardc/Support/Nesting.h"
#include "shardc/Target/Cpp/StepEmitter.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"

int main(int argc, char **argv) {
  // The input before the parser reads it (checkNesting): every argument
  // that names a regular file, but -o's (mlirTranslateMain parses the
  // options, so the input's is not known here).
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if (arg == "-o" || arg == "--o") {
      ++i;
      continue;
    }
    if (!arg.starts_with("-") && llvm::sys::fs::is_regular_file(arg) &&
        !shardc::checkFileNesting(arg))
      return 1;
  }
  shardc::registerStepTranslations();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "shardc source emitters"));
}
