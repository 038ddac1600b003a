//===- Ledger.h - Per-rank memory and bytes on the wire of a step -*- C++ -*-===//

#ifndef SHARDC_DIALECT_DIST_ANALYSIS_LEDGER_H
#define SHARDC_DIALECT_DIST_ANALYSIS_LEDGER_H

#include "shardc/Dialect/Train/IR/TrainOps.h"

#include <cstdint>
#include <string>

namespace shardc::dist {

/// What a rank sends for one collective kind in one step.
struct LedgerTraffic {
  int64_t bytes = 0, count = 0;
};

/// The FLOPs a count saturates at, where int64 cannot hold them.
constexpr int64_t kFlopsOverflow = INT64_MAX;

/// One rank's bytes (and FLOPs) for one step of a sharded model.
struct LedgerReport {
  std::string model, strategy;
  int64_t params = 0, world = 1;
  int64_t paramBytes = 0, gradBytes = 0, optimizerBytes = 0;
  int64_t activationBytes = 0, gatheredBytes = 0, commBytes = 0, peak = 0;
  LedgerTraffic allGather, reduceScatter, allReduce;
  /// Of allGather, the gathers over axis `local` alone (reshard-after-
  /// forward=K's backward gathers): within a node.
  LedgerTraffic localAllGather;
  /// The step's model FLOPs on this rank, as llm.c counts them for MFU: the
  /// forward's matrix products (2 per multiply-add, a causal attention's
  /// half of the scores and of their product with the values; nanoGPT and
  /// PaLM count the whole square), times 3 for the forward and a backward
  /// of twice its work where the step has one (`trains`); recomputation is
  /// not counted.
  int64_t modelFlops = 0;
  /// The FLOPs the step runs: modelFlops plus the forward ops the backward
  /// recomputes (`train.recomputed`), counted alike. Megatron's and PaLM's
  /// hardware FLOPs, the numerator of HFU.
  int64_t hardwareFlops = 0;
  bool trains = false;
  /// offload-optimizer: optimizerBytes are host memory, off the device's
  /// peak, and each update copies its gradient to the host and the values
  /// it writes back: hostCopyBytes per step, as the rank whose pieces are
  /// not padding counts them (a gradient's elements in its dtype; an f32
  /// param's value both ways, a bf16 param's rounded value back).
  bool offloadsOptimizer = false;
  /// offload-params: paramBytes are host memory too; the updates write the
  /// values there (no copy back), and each gather of a stored shard copies
  /// it into its slot of the gathered buffer, counted in hostCopyBytes once
  /// per run.
  bool offloadsParams = false;
  int64_t hostCopyBytes = 0;
  int64_t modelState() const {
    return paramBytes + gradBytes + optimizerBytes;
  }
  /// The optimizer state on the device: none where it is offloaded.
  int64_t deviceOptimizerBytes() const {
    return offloadsOptimizer ? 0 : optimizerBytes;
  }
  /// The stored params on the device: none where they are offloaded.
  int64_t deviceParamBytes() const { return offloadsParams ? 0 : paramBytes; }
};

LedgerReport computeLedger(train::ModelOp model);

/// An op's matrix-product FLOPs on this rank (0 for an op without any): a
/// forward's (2 per multiply-add, a causal attention's half of the scores
/// and of their product with the values) and a backward's (a GEMM with a
/// GELU' epilogue as its GEMM; attention's backward 2.5 times its forward:
/// the scores again, and the gradients of the values, the probabilities,
/// the queries and the keys).
int64_t getMatmulFlops(mlir::Operation *op);

/// Attaches a note per unit: its stored params, gathered params and kept
/// activations.
void explainLedgerByUnit(train::ModelOp model, mlir::InFlightDiagnostic &diag);

} // namespace shardc::dist

#endif // SHARDC_DIALECT_DIST_ANALYSIS_LEDGER_H
