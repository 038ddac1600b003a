//===- shardc-translate.cpp - Emit source from sharded models -------------===//

#include "shardc/Support/Files.h"
#include "shardc/Support/ParserInput.h"
#include "shardc/Target/Cpp/StepEmitter.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <string>
#include <system_error>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

namespace {
/// Whether `arg` asks for the options or the version, which mlirTranslateMain
/// prints without reading its input.
bool isInformational(llvm::StringRef arg) {
  llvm::StringRef name = arg.ltrim('-').split('=').first;
  return name.starts_with("help") || name == "version" ||
         name == "print-options" || name == "print-all-options";
}

/// Reads standard input, checks it (checkParserInput), and puts a copy of it
/// in its place on file descriptor 0, an anonymous file in memory, for
/// mlirTranslateMain to read as it would have read the original.
bool checkStdin() {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> text =
      llvm::MemoryBuffer::getSTDIN();
  if (!text) {
    llvm::errs() << "shardc-translate: cannot read standard input: "
                 << text.getError().message() << "\n";
    return false;
  }
  if (!shardc::checkParserInput("<stdin>", (*text)->getBuffer()))
    return false;
  int fd = ::memfd_create("shardc-translate-stdin", MFD_CLOEXEC);
  std::error_code ec;
  if (fd < 0)
    ec = std::error_code(errno, std::generic_category());
  else {
    llvm::raw_fd_ostream copy(fd, /*shouldClose=*/false);
    copy << (*text)->getBuffer();
    copy.flush();
    ec = copy.error();
    copy.clear_error(); // said below, not by its destructor's fatal error
    if (!ec && (::lseek(fd, 0, SEEK_SET) != 0 || ::dup2(fd, 0) != 0))
      ec = std::error_code(errno, std::generic_category());
    ::close(fd);
  }
  if (ec) {
    llvm::errs() << "shardc-translate: cannot keep a copy of standard input: "
                 << ec.message() << "\n";
    return false;
  }
  return true;
}
} // namespace

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
  // that names a regular file, or standard input where none names the input.
  bool readsStdin = true;
  for (llvm::StringRef arg : llvm::ArrayRef(args).drop_front()) {
    if (!arg.starts_with("-") || isInformational(arg))
      readsStdin = false;
    if (arg.starts_with("-") || !llvm::sys::fs::is_regular_file(arg))
      continue;
    if (!shardc::checkParserInputFile(arg) ||
        shardc::isOutputOverInput("shardc-translate", arg, output))
      return 1;
  }
  // A terminal is left to the parser, which reads what is typed (and to
  // the options' errors, which come first).
  if (readsStdin && !::isatty(0) && !checkStdin())
    return 1;
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
