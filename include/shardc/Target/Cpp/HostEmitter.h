//===- HostEmitter.h - A sharded step as C++ over MPI -----------*- C++ -*-===//
//
// target=host: turns a scheduled model (after --shardc-schedule) into one C++
// file that calls runtime/ (shardc_rt.h): kernels on the CPU, collectives as
// non-blocking MPI calls waited where the schedule waits, every buffer
// allocated where it is defined and freed after its last use as
// BufferLiveness (and so --shardc-ledger) sees it.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_TARGET_CPP_HOSTEMITTER_H
#define SHARDC_TARGET_CPP_HOSTEMITTER_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace shardc {

/// Emits the module's single sharded model; fails with located errors on a
/// model it cannot lower (not sharded, a type or op the host target lacks).
mlir::LogicalResult emitHostCpp(mlir::ModuleOp module, llvm::raw_ostream &os);

/// Registers `--shardc-to-host-cpp` with mlir-translate style tools.
void registerToHostCppTranslation();

} // namespace shardc

#endif // SHARDC_TARGET_CPP_HOSTEMITTER_H
