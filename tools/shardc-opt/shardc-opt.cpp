//===- shardc-opt.cpp - Run shardc passes on train/dist IR ----------------===//

#include "shardc/InitAll.h"
#include "shardc/Support/Files.h"
#include "shardc/Support/ParserInput.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

/// Where an argument that builds a ledger (--shardc-pipeline,
/// --shardc-ledger, or a pass pipeline naming either) gives its output=.
struct LedgerOutput {
  size_t arg, begin, length;
  std::string value;
};

/// The ledger outputs of `args` that name a file: not "-", and not an
/// existing non-regular file (/dev/null), which a write replaces nothing of.
static std::vector<LedgerOutput>
findLedgerOutputs(llvm::ArrayRef<char *> args) {
  std::vector<LedgerOutput> found;
  for (size_t i = 1; i < args.size(); ++i) {
    llvm::StringRef arg = args[i];
    if (!arg.contains("shardc-pipeline") && !arg.contains("shardc-ledger"))
      continue;
    for (size_t at = arg.find("output="); at != llvm::StringRef::npos;
         at = arg.find("output=", at + 1)) {
      size_t begin = at + 7;
      llvm::StringRef value = arg.substr(begin);
      if (value.consume_front("\"") || value.consume_front("'")) {
        ++begin;
        value = value.take_until([](char c) { return c == '"' || c == '\''; });
      } else {
        value = value.take_until([](char c) { return c == ' ' || c == '}'; });
      }
      if (value.empty() || value == "-" ||
          (llvm::sys::fs::exists(value) &&
           !llvm::sys::fs::is_regular_file(value)))
        continue;
      found.push_back({i, begin, value.size(), value.str()});
    }
  }
  return found;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // Diagnostics name the place and the value; dumping the whole operation
  // under each one buries them. `--mlir-print-op-on-diagnostic` restores it.
  std::vector<char *> args(argv, argv + argc);
  std::string quiet = "--mlir-print-op-on-diagnostic=false";
  args.insert(args.begin() + 1, quiet.data());
  // Each ledger writes beside its output, moved into place once every pass
  // has succeeded, as -o's file is: a failed run leaves neither.
  std::vector<LedgerOutput> ledgers = findLedgerOutputs(args);
  std::map<std::string, std::unique_ptr<shardc::PendingOutput>> pending;
  // The option parser exits on --help, --version or a bad flag, past the
  // pending files' destructors: removed at exit (once moved into place,
  // their names are free).
  static std::vector<std::string> temps;
  std::atexit([] {
    for (const std::string &temp : temps)
      ::unlink(temp.c_str());
  });
  std::vector<std::string> rewritten(args.size());
  std::string error;
  for (const LedgerOutput &ledger : llvm::reverse(ledgers)) {
    auto &file = pending[ledger.value];
    if (!file && !(file = shardc::PendingOutput::create(ledger.value, error))) {
      llvm::errs() << "shardc-opt: the ledger's output: " << error << "\n";
      return 1;
    }
    temps.push_back(file->path());
    file->guardAgain();
    if (rewritten[ledger.arg].empty())
      rewritten[ledger.arg] = args[ledger.arg];
    rewritten[ledger.arg].replace(ledger.begin, ledger.length, file->path());
  }
  for (size_t i = 0; i < args.size(); ++i)
    if (!rewritten[i].empty())
      args[i] = rewritten[i].data();
  argc = static_cast<int>(args.size());
  argv = args.data();

  shardc::registerAllPasses();
  mlir::DialectRegistry registry;
  shardc::registerAllDialects(registry);
  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "shardc optimizer: train and dist dialect passes\n",
      registry);
  // Checked here, as the ledger pass now sees the file beside its output.
  for (const LedgerOutput &ledger : ledgers) {
    const char *over =
        shardc::isSameFile(ledger.value, input)
            ? "the input file, which the ledger would replace"
        : output != "-" && shardc::isSameFile(ledger.value, output)
            ? "also -o's file, which the IR would replace"
            : nullptr;
    if (over) {
      llvm::errs() << "shardc-opt: the ledger's output '" << ledger.value
                   << "' is " << over << "\n";
      return 1;
    }
  }
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, input, output, registry));
  // As MlirOptMain(argc, argv, ...), but the input checked before the
  // parser reads it (checkParserInput), and a failed write an error naming
  // the file, not LLVM's fatal one.
  std::unique_ptr<llvm::MemoryBuffer> file = mlir::openInputFile(input, &error);
  if (!file) {
    llvm::errs() << "shardc-opt: " << error << "\n";
    return 1;
  }
  if (!shardc::checkParserInput(file->getBufferIdentifier(), file->getBuffer()))
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
  for (auto &[path, file] : pending) {
    // An argument that named a ledger no pass ran leaves its file as it was.
    uint64_t size = 0;
    if (llvm::sys::fs::file_size(file->path(), size) || size == 0)
      continue;
    if (llvm::failed(file->commit(error))) {
      llvm::errs() << "shardc-opt: the ledger's output: " << error << "\n";
      return 1;
    }
  }
  return 0;
}
