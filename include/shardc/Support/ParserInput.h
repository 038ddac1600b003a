//===- ParserInput.h - Input MLIR's parser would mishandle ------*- C++ -*-===//

#ifndef SHARDC_SUPPORT_PARSERINPUT_H
#define SHARDC_SUPPORT_PARSERINPUT_H

#include "llvm/ADT/StringRef.h"

namespace shardc {
/// The deepest bracket nesting the tools hand MLIR's parser. It recurses
/// per bracket, so that textual IR nested some thousands deep overflows the
/// stack (a segfault, not an error); models nest a few dozen deep.
constexpr unsigned kMaxNesting = 1000;

/// Whether MLIR's parser can take the textual IR `text` (from `path`): it
/// is no UTF-16 or UTF-32 and begins with no UTF-8 byte-order mark (the
/// parser's error would be a bare "unexpected character"), and it nests its
/// brackets within kMaxNesting: (), [], {}, and the <> after a type's or
/// attribute's name, outside strings and comments. Where it cannot, says why on stderr, at the place
/// (path:line:column, as the parser's diagnostics), and returns false.
/// Bytecode (MLIR's magic number) passes unread.
bool checkParserInput(llvm::StringRef path, llvm::StringRef text);

/// checkParserInput of the file at `path`, which the caller is about to hand
/// the parser; true where it cannot be read (the parser says why) and for
/// standard input ("-"), which only the parser may read.
bool checkParserInputFile(llvm::StringRef path);
} // namespace shardc

#endif // SHARDC_SUPPORT_PARSERINPUT_H
