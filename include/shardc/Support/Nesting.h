//===- Nesting.h - Input nested too deep for the parser ---------*- C++ -*-===//

#ifndef SHARDC_SUPPORT_NESTING_H
#define SHARDC_SUPPORT_NESTING_H

#include "llvm/ADT/StringRef.h"

namespace shardc {
/// The deepest bracket nesting the tools hand MLIR's parser. It recurses
/// per bracket, so that textual IR nested some thousands deep overflows the
/// stack (a segfault, not an error); models nest a few dozen deep.
constexpr unsigned kMaxNesting = 1000;

/// Whether the textual IR `text` (from `path`) nests its brackets within
/// kMaxNesting: (), [], {}, and the <> after a type's or attribute's name,
/// outside strings and comments. Where it does not, says so on stderr at
/// the bracket past the limit (path:line:column, as the parser's
/// diagnostics) and returns false. Bytecode (MLIR's magic number) passes
/// unread.
bool checkNesting(llvm::StringRef path, llvm::StringRef text);

/// checkNesting of the file at `path`, which the caller is about to hand
/// the parser; true where it cannot be read (the parser says why) and for
/// standard input ("-"), which only the parser may read.
bool checkFileNesting(llvm::StringRef path);
} // namespace shardc

#endif // SHARDC_SUPPORT_NESTING_H
