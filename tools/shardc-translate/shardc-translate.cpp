//===- shardc-translate.cpp - Emit source from sharded models -------------===//

#include "shardc/Support/Files.h"
#include "shardc/Support/ParserInput.h"
#include "shardc/Target/Cpp/StepEmitter.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

int main(int argc, char **argv) {
  // mlirTranslateMain parses the options, so -o's file and the input's are
  // found here first. -o's (-o F, -o=F, --o F, --o=F) is taken out of the
  // arguments and given back as a file beside it, which replaces it once
  // the translation succeeds.
  std::vector<char *> args{argv[0]};
  std::string output = "-";
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if ((arg == "-o" || arg == "--o") && i + 1 < argc)
      output = argv[++i];
    else if (arg.consume_front("-o=") || arg.consume_front("--o="))
      output = arg.str();
    else
      args.push_back(argv[i]);
  }
  // The input before the parser reads it (checkParserInput): every argument
  // that names a regular file.
  for (llvm::StringRef arg : llvm::ArrayRef(args).drop_front()) {
    if (arg.starts_with("-") || !llvm::sys::fs::is_regular_file(arg))
      continue;
    if (!shardc::checkParserInputFile(arg) ||
        shardc::isOutputOverInput("shardc-translate", arg, output))
      return 1;
  }
  shardc::registerStepTranslations();
  std::string outputFlag, error;
  auto translate = [&](llvm::StringRef path) {
    outputFlag = "-o=" + path.str();
    args.push_back(outputFlag.data());
    return mlir::mlirTranslateMain(static_cast<int>(args.size()), args.data(),
                                   "shardc source emitters");
  };
  if (mlir::failed(shardc::writeOutputOnSuccess(output, translate, error))) {
    if (!error.empty())
      llvm::errs() << "shardc-translate: " << error << "\n";
    return 1;
  }
  return 0;
}
