//===- ParserInput.cpp - Input MLIR's parser would mishandle --------------===//

#include "shardc/Support/ParserInput.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <utility>

bool shardc::checkParserInput(llvm::StringRef path, llvm::StringRef text) {
  if (text.starts_with("ML\xefR")) // bytecode: its reader does not recurse so
    return true;
  if (text.starts_with("\xef\xbb\xbf")) {
    llvm::errs() << path
                 << ":1:1: error: the file begins with a UTF-8 byte-order "
                    "mark, which MLIR's parser does not read: save it "
                    "without one\n";
    return false;
  }
  // UTF-32's marks first: UTF-32LE's begins as UTF-16LE's.
  for (auto [mark, encoding] :
       {std::pair<llvm::StringRef, llvm::StringRef>{
            llvm::StringRef("\xff\xfe\0\0", 4), "UTF-32"},
        {llvm::StringRef("\0\0\xfe\xff", 4), "UTF-32"},
        {"\xff\xfe", "UTF-16"},
        {"\xfe\xff", "UTF-16"}})
    if (text.starts_with(mark)) {
      llvm::errs() << path << ":1:1: error: the file is " << encoding
                   << " (its byte-order mark says so), and MLIR's parser "
                      "reads UTF-8: save it as UTF-8\n";
      return false;
    }
  llvm::SmallVector<char> open; // the closers awaited, innermost last
  unsigned line = 1, column = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    ++column;
    if (c == '\n') {
      ++line, column = 0;
      continue;
    }
    if (c == '"') { // a string: to its unescaped quote, on its line
      for (++i; i < text.size() && text[i] != '"' && text[i] != '\n'; ++i) {
        ++column;
        if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] != '\n')
          ++i, ++column;
      }
      if (i < text.size() && text[i] == '\n')
        ++line, column = 0;
      else
        ++column;
      continue;
    }
    if (c == '/' && text.substr(i).starts_with("//")) { // a comment
      size_t end = text.find('\n', i);
      if (end == llvm::StringRef::npos)
        break;
      i = end, ++line, column = 0;
      continue;
    }
    char closer = c == '(' ? ')' : c == '[' ? ']' : c == '{' ? '}' : 0;
    // `<` opens after a name (tensor<, array<, #dialect.attr<), not in
    // `->` or a comparison.
    if (c == '<' && i > 0 &&
        (llvm::isAlnum(text[i - 1]) || text[i - 1] == '_' ||
         text[i - 1] == '.'))
      closer = '>';
    if (closer) {
      open.push_back(closer);
      if (open.size() > kMaxNesting) {
        llvm::errs() << path << ":" << line << ":" << column
                     << ": error: brackets nested deeper than " << kMaxNesting
                     << " (the parser's limit)\n";
        return false;
      }
    } else if (!open.empty() && c == open.back() &&
               !(c == '>' && text[i - 1] == '-')) { // not `->`
      open.pop_back();
    }
  }
  return true;
}

bool shardc::checkParserInputFile(llvm::StringRef path) {
  if (path == "-")
    return true;
  auto file = llvm::MemoryBuffer::getFile(path);
  return !file || checkParserInput(path, (*file)->getBuffer());
}
