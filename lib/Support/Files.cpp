//===- Files.cpp - Paths that name one file -------------------------------===//

#include "shardc/Support/Files.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstring>
#include <string>

#include <unistd.h>

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

shardc::PendingOutput::PendingOutput(std::string output, std::string target,
                                     std::string temp)
    : output(std::move(output)), target(std::move(target)),
      temp(std::move(temp)) {
  llvm::sys::RemoveFileOnSignal(this->temp);
}

llvm::LogicalResult shardc::resolveOutput(llvm::StringRef output,
                                          std::string &target,
                                          std::string &error) {
  llvm::SmallString<256> path(output);
  char link[4096];
  for (int hops = 0; llvm::sys::fs::is_symlink_file(path); ++hops) {
    ssize_t length = ::readlink(path.c_str(), link, sizeof(link));
    if (hops == 40 || length <= 0 ||
        length == static_cast<ssize_t>(sizeof(link))) {
      error = "'" + output.str() + "': cannot follow its symbolic links: " +
              std::strerror(hops == 40 ? ELOOP : errno);
      return llvm::failure();
    }
    llvm::StringRef next(link, length);
    llvm::SmallString<256> dir = llvm::sys::path::parent_path(path);
    if (llvm::sys::path::is_absolute(next) || dir.empty())
      path = next;
    else {
      llvm::sys::path::append(dir, next);
      path = dir;
    }
  }
  target = path.str().str();
  return llvm::success();
}

std::unique_ptr<shardc::PendingOutput>
shardc::PendingOutput::create(llvm::StringRef output, std::string &error) {
  std::string target;
  if (llvm::failed(resolveOutput(output, target, error)))
    return nullptr;
  llvm::SmallString<256> temp;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueFile(target + ".tmp-%%%%%%", temp)) {
    error = "cannot write '" + output.str() + "': " + ec.message();
    return nullptr;
  }
  return std::unique_ptr<PendingOutput>(
      new PendingOutput(output.str(), target, temp.str().str()));
}

void shardc::PendingOutput::guardAgain() const {
  llvm::sys::RemoveFileOnSignal(temp);
}

shardc::PendingOutput::~PendingOutput() {
  if (pending)
    llvm::sys::fs::remove(temp);
  llvm::sys::DontRemoveFileOnSignal(temp);
}

llvm::LogicalResult shardc::PendingOutput::commit(std::string &error) {
  pending = false;
  if (std::error_code ec = llvm::sys::fs::rename(temp, target)) {
    llvm::sys::fs::remove(temp);
    error = "cannot write '" + output + "': " + ec.message();
    return llvm::failure();
  }
  return llvm::success();
}

llvm::LogicalResult shardc::writeOutputOnSuccess(
    llvm::StringRef output,
    llvm::function_ref<llvm::LogicalResult(llvm::StringRef)> write,
    std::string &error) {
  error.clear();
  if (output == "-" || (llvm::sys::fs::exists(output) &&
                        !llvm::sys::fs::is_regular_file(output)))
    return write(output);
  std::unique_ptr<PendingOutput> pending = PendingOutput::create(output, error);
  if (!pending)
    return llvm::failure();
  if (llvm::failed(write(pending->path())))
    return llvm::failure();
  return pending->commit(error);
}
