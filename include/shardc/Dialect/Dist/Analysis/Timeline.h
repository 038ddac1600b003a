//===- Timeline.h - A step's predicted time on a machine --------*- C++ -*-===//
//
// The scheduled step played on two kinds of stream, as the CUDA executable
// runs it: the compute stream runs every kernel in program order, each
// collective runs on the stream of its communicator from the moment it is
// started (and its stream is free), and a `dist.wait` holds the compute
// stream until its collective ends. Each kernel and collective is priced by
// a roofline of the machine's figures, so the timeline shows how much
// communication the schedule hides, and which waits do not, before anything
// runs.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_DIALECT_DIST_ANALYSIS_TIMELINE_H
#define SHARDC_DIALECT_DIST_ANALYSIS_TIMELINE_H

#include "shardc/Dialect/Train/IR/TrainOps.h"

#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace shardc::dist {

/// What the CUDA target's kernels reach of a machine's peaks, for one
/// operand type: GEMMs (cuBLAS, cuBLASLt) and the flash attention kernels
/// of the FLOP peak, the other kernels of the memory bandwidth.
struct KernelEfficiency {
  double matmul, attention, memory;
};

/// One GPU of a machine, and the links between them, as a timeline prices
/// them. Rates are per second.
struct Machine {
  std::string name;
  /// Dense matrix-product peaks with bf16 operands, and with f32 ones
  /// (TF32 tensor cores, which the CUDA target allows for f32).
  double bf16Flops, f32Flops;
  /// HBM bytes per second.
  double memoryBandwidth;
  /// Kernels with bf16 operands, and with f32 ones.
  KernelEfficiency bf16, f32;
  /// NCCL's bus bandwidth (the bytes a rank sends per second, as
  /// nccl-tests report it) for a group inside a node (NVLink) and for one
  /// spanning nodes (the network, per GPU), and the latency each NCCL
  /// launch adds (one per NCCL group, joinsNcclGroup).
  double nodeBusBandwidth, networkBusBandwidth, collectiveLatency;
  int64_t ranksPerNode;
};

/// The machine named `name` (`h100`, `h200`, `a100`: SXM, 8 GPUs a node), with
/// `ranksPerNode` in place of its own where positive; nullopt for another
/// name.
std::optional<Machine> lookupMachine(llvm::StringRef name,
                                     int64_t ranksPerNode = 0);
/// lookupMachine's machine, or an error on `where` naming the value: an
/// unknown name, or ranksPerNode < 0 (0 keeps the machine's).
mlir::FailureOr<Machine> getMachine(mlir::Operation *where,
                                    llvm::StringRef name, int64_t ranksPerNode);
/// An error on `where` where `world` ranks span more than one of
/// `machine`'s nodes without filling whole ones, as a job's ranks do.
mlir::LogicalResult verifyFillsNodes(mlir::Operation *where, int64_t world,
                                     const Machine &machine);

/// One step of a sharded model on a machine, in seconds.
/// (A field added here that sums over the step is also extrapolated over a
/// micro-batch loop's repeated runs: Timeline.cpp's repeatRun.)
struct TimelineReport {
  std::string machine;
  int64_t ranksPerNode = 0;
  /// The compute stream's kernels: those with matrix products (priced by
  /// FLOPs or bytes, whichever takes longer), and the rest (by bytes).
  double matmulSeconds = 0, memorySeconds = 0;
  /// The communication streams' busy time, per collective kind.
  double allGatherSeconds = 0, reduceScatterSeconds = 0, allReduceSeconds = 0;
  /// The time the compute stream waits on collectives.
  double exposedSeconds = 0;
  double stepSeconds = 0;
  /// The model FLOPs (the ledger's) over the step's time at the peak of
  /// the params' type.
  double mfu = 0;
  /// Where the compute stream waits, longest first: what it waits on and
  /// for what ("all_gather before unit 'h.0' backward"), summed over runs.
  llvm::SmallVector<std::pair<std::string, double>> waits;
};

/// Plays `model`'s step on `machine`; `modelFlops` (the ledger's) gives
/// the MFU. Fails, with an error on the model, where the step offloads its
/// optimizer to the host, whose speed the machine's figures do not give,
/// or runs more FLOPs than the ledger counts (kFlopsOverflow).
mlir::FailureOr<TimelineReport> predictTimeline(train::ModelOp model,
                                                const Machine &machine,
                                                int64_t modelFlops);

} // namespace shardc::dist

#endif // SHARDC_DIALECT_DIST_ANALYSIS_TIMELINE_H
