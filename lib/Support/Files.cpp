//===- Files.cpp - Paths that name one file -------------------------------===//

#include "shardc/Support/Files.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

bool shardc::isSameFile(llvm::StringRef a, llvm::StringRef b) {
  bool equivalent = false;
  if (!llvm::sys::fs::equivalent(a, b, equivalent))
    return equivalent;
  auto resolved = [](llvm::StringRef path) {
    llvm::SmallString<256> dir = llvm::sys::path::parent_path(path);
    if (dir.empty())
      dir = ".";
    llvm::SmallString<256> real;
    if (llvm::sys::fs::real_path(dir, real))
      real = dir;
    llvm::sys::path::append(real, llvm::sys::path::filename(path));
    return std::string(real);
  };
  return resolved(a) == resolved(b);
}

bool shardc::isOutputOverInput(llvm::StringRef tool, llvm::StringRef input,
                               llvm::StringRef output) {
  if (output == "-" || !isSameFile(input, output))
    return false;
  llvm::errs() << tool << ": -o '" << output
               << "' is the input file: write the output elsewhere\n";
  return true;
}

llvm::LogicalResult shardc::writeOutputOnSuccess(
    llvm::StringRef output,
    llvm::function_ref<llvm::LogicalResult(llvm::StringRef)> write,
    std::string &error) {
  error.clear();
  if (output == "-" || (llvm::sys::fs::exists(output) &&
                        !llvm::sys::fs::is_regular_file(output)))
    return write(output);
  // Through a symlink, the file it names is the one replaced.
  llvm::SmallString<256> target(output), resolved, temp;
  if (llvm::sys::fs::exists(output) &&
      !llvm::sys::fs::real_path(output, resolved))
    target = resolved;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueFile(target + ".tmp-%%%%%%", temp)) {
    error = "cannot write '" + output.str() + "': " + ec.message();
    return llvm::failure();
  }
  llvm::sys::RemoveFileOnSignal(temp);
  llvm::LogicalResult written = write(temp);
  std::error_code moved;
  if (llvm::succeeded(written))
    moved = llvm::sys::fs::rename(temp, target);
  if (llvm::failed(written) || moved)
    llvm::sys::fs::remove(temp);
  llvm::sys::DontRemoveFileOnSignal(temp);
  if (moved) {
    error = "cannot write '" + output.str() + "': " + moved.message();
    return llvm::failure();
  }
  return written;
}
