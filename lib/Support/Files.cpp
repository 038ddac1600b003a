//===- Files.cpp - Paths that name one file -------------------------------===//

#include "shardc/Support/Files.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

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
