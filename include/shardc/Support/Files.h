//===- Files.h - Paths that name one file -----------------------*- C++ -*-===//

#ifndef SHARDC_SUPPORT_FILES_H
#define SHARDC_SUPPORT_FILES_H

#include "llvm/ADT/StringRef.h"

namespace shardc {
/// Whether two paths name one file: the same file where both exist, else
/// the same name in the same (resolved) directory. How the tools refuse an
/// output over their input, or over another output.
bool isSameFile(llvm::StringRef a, llvm::StringRef b);
} // namespace shardc

#endif // SHARDC_SUPPORT_FILES_H
