//===- shardc-opt.cpp - Run shardc passes on train/dist IR ----------------===//

#include "shardc/InitAll.h"
#include "shardc/Support/Files.h"
#include "shardc/Support/Nesting.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

/// The ledger's output= (in any pass's or pipeline's options) that names
/// -o's file `output`, or "": the IR, written last, would replace the
/// ledger. As shardc build refuses --ledger-json onto -o, before anything
/// runs. A device or a pipe (/dev/null for both) replaces nothing.
static std::string ledgerOverOutput(llvm::ArrayRef<char *> args,
                                    llvm::StringRef output) {
  if (output.empty() || output == "-" ||
      (llvm::sys::fs::exists(output) &&
       !llvm::sys::fs::is_regular_file(output)))
    return "";
  for (llvm::StringRef arg : args.drop_front()) {
    for (size_t at = arg.find("output="); at != llvm::StringRef::npos;
         at = arg.find("output=", at + 1)) {
      llvm::StringRef value = arg.substr(at + 7);
      if (value.consume_front("\"") || value.consume_front("'"))
        value = value.take_until([](char c) { return c == '"' || c == '\''; });
      else
        value = value.take_until([](char c) { return c == ' ' || c == '}'; });
      if (!value.empty() && value != "-" && shardc::isSameFile(value, output))
        return value.str();
    }
  }
  return "";
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
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
  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "shardc optimizer: train and dist dialect passes\n",
      registry);
  if (std::string both = ledgerOverOutput(args, output); !both.empty()) {
    llvm::errs() << "shardc-opt: the ledger's output '" << both
                 << "' is also -o's file, which the IR would replace\n";
    return 1;
  }
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, input, output, registry));
  // As MlirOptMain(argc, argv, ...), but the input checked before the
  // parser reads it (checkNesting), and a failed write an error naming
  // the file, not LLVM's fatal one.
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file = mlir::openInputFile(input, &error);
  if (!file) {
    llvm::errs() << "shardc-opt: " << error << "\n";
    return 1;
  }
  if (!shardc::checkNesting(file->getBufferIdentifier(), file->getBuffer()))
    return 1;
  if (shardc::isOutputOverInput("shardc-opt", input, output))
    return 1;
  // The output replaces -o's file only once every pass has succeeded.
  auto run = [&](llvm::StringRef path) -> llvm::LogicalResult {
    std::unique_ptr<llvm::ToolOutputFile> out =
        mlir::openOutputFile(path, &error);
    if (!out) {
      llvm::errs() << "shardc-opt: " << error << "\n";
      return llvm::failure();
    }
    if (mlir::failed(
            mlir::MlirOptMain(out->os(), std::move(file), registry, config)))
      return llvm::failure();
    out->os().flush();
    if (std::error_code failed = out->os().error()) {
      llvm::errs() << "shardc-opt: cannot write '" << output
                   << "': " << failed.message() << "\n";
      out->os().clear_error();
      return llvm::failure();
    }
    out->keep();
    return llvm::success();
  };
  if (llvm::failed(shardc::writeOutputOnSuccess(output, run, error))) {
    if (!error.empty())
      llvm::errs() << "shardc-opt: " << error << "\n";
    return 1;
  }
  return 0;
}
