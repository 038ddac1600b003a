//===- Files.h - Paths that name one file -----------------------*- C++ -*-===//

#ifndef SHARDC_SUPPORT_FILES_H
#define SHARDC_SUPPORT_FILES_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/LogicalResult.h"

#include <memory>
#include <string>

namespace shardc {
/// Whether two paths name one file: the same file where both exist, else
/// the same name in the same (resolved) directory. How the tools refuse an
/// output over their input, or over another output.
bool isSameFile(llvm::StringRef a, llvm::StringRef b);

/// Whether -o's `output` would replace `input` ("-" never does), said on
/// stderr as `tool`'s error: a tool then exits 1 before reading anything.
bool isOutputOverInput(llvm::StringRef tool, llvm::StringRef input,
                       llvm::StringRef output);

/// Sets `target` to the file `output` names: through symbolic links
/// (dangling ones too, as open(2) writes through them), the file the last
/// one names; `output` itself otherwise. Fails, with `error` set, on a loop
/// of links.
llvm::LogicalResult resolveOutput(llvm::StringRef output, std::string &target,
                                  std::string &error);

/// An output file while a tool writes it: path(), a new file beside the
/// file `output` names (through a symlink, the file the link names, which
/// is the one replaced: the link stays), which commit() moves into place;
/// removed otherwise, by the destructor or if the tool is interrupted. Its
/// name is unique, so it is never the input or another output.
class PendingOutput {
public:
  /// Fails, with `error` set, where the file beside `output` cannot be made.
  static std::unique_ptr<PendingOutput> create(llvm::StringRef output,
                                               std::string &error);
  ~PendingOutput();
  PendingOutput(const PendingOutput &) = delete;
  PendingOutput &operator=(const PendingOutput &) = delete;

  const std::string &path() const { return temp; }
  /// Guards path() against interruption again, after a writer that guards
  /// the files it writes (LLVM's ToolOutputFile) has dropped that guard.
  void guardAgain() const;
  /// Moves path() into place; fails, with `error` set, where it cannot.
  llvm::LogicalResult commit(std::string &error);

private:
  PendingOutput(std::string output, std::string target, std::string temp);
  std::string output, target, temp;
  bool pending = true;
};

/// Runs `write`, which writes a tool's output to the path it is given: a new
/// file beside `output` that replaces it only once `write` succeeds, so that
/// a failed run leaves `output` as it was (or absent), and an interrupted
/// one leaves nothing (PendingOutput). `output` itself where it is "-" or
/// exists and is not a regular file (a device, a pipe). Fails, with `error`
/// set, where the file beside it cannot be made or moved into place; where
/// `write` fails, with `error` empty (it has said why).
llvm::LogicalResult writeOutputOnSuccess(
    llvm::StringRef output,
    llvm::function_ref<llvm::LogicalResult(llvm::StringRef)> write,
    std::string &error);
} // namespace shardc

#endif // SHARDC_SUPPORT_FILES_H
