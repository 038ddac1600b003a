//===- PassOptions.h - Pass option errors that name the pass ----*- C++ -*-===//

#ifndef SHARDC_SUPPORT_PASSOPTIONS_H
#define SHARDC_SUPPORT_PASSOPTIONS_H

#include "mlir/Pass/Pass.h"

namespace shardc {
/// A pass (PassBase: its tablegen'd base) whose options, where they fail to
/// parse, fail with an error naming the pass and its option string. An
/// option's own parser (llvm::cl's) prints why to stderr and gives MLIR an
/// empty message, which it reports as a bare `<unknown>:0: error:`.
template <typename PassBase> struct NamedOptionErrors : PassBase {
  using PassBase::PassBase;

  mlir::LogicalResult
  initializeOptions(llvm::StringRef options,
                    llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)>
                        errorHandler) override {
    return PassBase::initializeOptions(
        options, [&](const llvm::Twine &message) {
          if (!message.str().empty())
            return errorHandler(message);
          return errorHandler("invalid options for pass '" +
                              this->getArgument() + "': '" + options + "'");
        });
  }
};
} // namespace shardc

#endif // SHARDC_SUPPORT_PASSOPTIONS_H
