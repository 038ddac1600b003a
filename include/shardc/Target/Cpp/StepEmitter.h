//===- StepEmitter.h - A sharded step as C++ (MPI) or CUDA (NCCL) -*- C++ -*-===//
//
// Turns a scheduled model (after --shardc-schedule) into one source file
// that calls runtime/ (shardc_rt.h): every buffer allocated where it is
// defined and freed after its last use as BufferLiveness (and so
// --shardc-ledger) sees it, every collective started and waited where the
// schedule says.
//
// - target=host: C++, the CPU kernels, non-blocking MPI collectives.
// - target=cuda: CUDA C++, the CUDA kernels on a compute stream, NCCL on a
//   stream per communicator, ordered by events (shardc_rt_cuda.h).
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_TARGET_CPP_STEPEMITTER_H
#define SHARDC_TARGET_CPP_STEPEMITTER_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace shardc {

/// Emit the module's single sharded model; they fail with located errors on
/// a model they cannot lower (not sharded, a type or op not lowered).
mlir::LogicalResult emitHostCpp(mlir::ModuleOp module, llvm::raw_ostream &os);
mlir::LogicalResult emitCudaCpp(mlir::ModuleOp module, llvm::raw_ostream &os);

/// Registers `--shardc-to-host-cpp` and `--shardc-to-cuda` with
/// mlir-translate style tools.
void registerStepTranslations();

} // namespace shardc

#endif // SHARDC_TARGET_CPP_STEPEMITTER_H
