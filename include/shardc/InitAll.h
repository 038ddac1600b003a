//===- InitAll.h - Register every shardc dialect and pass -------*- C++ -*-===//

#ifndef SHARDC_INITALL_H
#define SHARDC_INITALL_H

#include "mlir/IR/DialectRegistry.h"

namespace shardc {
/// Our dialects and the upstream ones our IR uses.
void registerAllDialects(mlir::DialectRegistry &registry);
/// Every shardc pass, with its command-line flag.
void registerAllPasses();
} // namespace shardc

#endif // SHARDC_INITALL_H
