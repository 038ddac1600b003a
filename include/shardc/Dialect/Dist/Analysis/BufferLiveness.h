//===- BufferLiveness.h - Which buffers a step holds, and when --*- C++ -*-===//
//
// One rank's step as buffers: every op result that is not a view owns one,
// live from the op defining it to its last use. Views (reshapes, unpacked
// bucket slices, region arguments and results, waits) name the buffer they
// view, and so does a result written in place over an operand whose buffer
// dies at its op (train::InPlaceOpInterface). The ledger costs these
// buffers; the emitters allocate and free them, so the prediction and the
// executable agree by construction.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_DIALECT_DIST_ANALYSIS_BUFFERLIVENESS_H
#define SHARDC_DIALECT_DIST_ANALYSIS_BUFFERLIVENESS_H

#include "shardc/Dialect/Train/IR/TrainOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallVector.h"

namespace shardc::dist {

/// Bytes of a tensor, or of the tensor a token completes to.
int64_t getBufferBytes(mlir::Value value);

/// A collective's wire type; null for other ops.
mlir::Type getWireType(mlir::Operation *op);

/// Ranks in the group spanning `axes` of mesh `meshRef` (1 if unknown).
int64_t getGroupSize(mlir::Operation *op, mlir::FlatSymbolRefAttr meshRef,
                     mlir::ArrayAttr axes);

/// Whether every group over `axes` of mesh `meshRef` lies within a node of
/// `ranksPerNode` consecutive ranks, ranks numbering the mesh row-major
/// (the last axis fastest, as the runtimes split their communicators);
/// true if the mesh is unknown.
bool isWithinNodes(mlir::Operation *op, mlir::FlatSymbolRefAttr meshRef,
                   mlir::ArrayAttr axes, int64_t ranksPerNode);

/// Whether the started collective `next` joins the NCCL group of the
/// started collective `first` (target=cuda): the same kind over the same
/// axes in the same wire type and reduction. All-reduces stay alone, their
/// bytes sent being rounded per call.
bool joinsNcclGroup(mlir::Operation *first, mlir::Operation *next);

/// The bytes a rank sends for one run of a collective, by ring algorithms
/// over the group of N ranks of its axes, D the bytes of the whole tensor in
/// the wire type (shards padded): All-Gather and Reduce-Scatter (N-1)/N·D,
/// All-Reduce 2(N-1)/N·D (rounded to the nearest byte); 0 for another op.
int64_t getBytesSent(mlir::Operation *collective);

/// Whether a gather's input is a stored param in host memory (the model's
/// `dist.offload_params`): the gather copies it into its slot of the
/// result, and gathers in place.
bool readsHostMemory(mlir::Operation *collective);

/// The bytes of the copy a collective sends from and keeps until its wait
/// (0 when it sends its input itself): its input cast to the wire type
/// where the types differ (mixed precision), and for a reduce-scatter of
/// uneven dim-0 shards padded to N equal pieces.
int64_t getStagingBytes(mlir::Operation *collective);

class BufferLiveness {
public:
  struct Buffer {
    int64_t bytes;
    /// Positions (see getStart/getEnd) of the definition and the last use.
    int64_t def, last;
    /// The op after which the buffer is dead: its last user, the micro-batch
    /// loop holding that user when the buffer outlives the loop's
    /// iterations, or its definition when nothing reads it. A unit or a
    /// backward is the last user only when its region does not read the
    /// buffer: the buffer is dead as the region starts.
    mlir::Operation *lastUser;
    /// The results written over the buffer in place, in program order: each
    /// holds it from the end of its op (getWriter).
    llvm::SmallVector<mlir::Value, 0> writtenInPlace;
  };

  explicit BufferLiveness(train::ModelOp model);

  /// The value owning the buffer `value` views (itself if it owns one).
  mlir::Value getRoot(mlir::Value value);
  /// The value whose op wrote what `value` views: getRoot, but stopping at a
  /// result written in place (the ledger's categories follow the writer).
  mlir::Value getWriter(mlir::Value value);
  /// Whether `value` is written in place over its op's operand's buffer.
  bool isInPlace(mlir::Value value) const { return inPlace.count(value); }
  /// Buffers in definition order; params and flat params are not buffers
  /// (they persist).
  const llvm::MapVector<mlir::Value, Buffer> &getBuffers() const {
    return buffers;
  }
  /// Ops are numbered in walk order: an op starts, its regions run, it ends.
  int64_t getStart(mlir::Operation *op) const { return start.lookup(op); }
  int64_t getEnd(mlir::Operation *op) const { return end.lookup(op); }
  int64_t getNumPositions() const { return positions; }

private:
  void number(mlir::Operation *op);
  void collect(train::ModelOp model);
  /// Records in `inPlace` the results that may take their in-place
  /// operand's buffer; returns whether there are any.
  bool findInPlaceResults(train::ModelOp model);

  llvm::DenseMap<mlir::Operation *, int64_t> start, end;
  int64_t positions = 0;
  llvm::DenseMap<mlir::Value, mlir::Value> roots;
  /// A result written in place -> the operand whose buffer it takes, in
  /// program order.
  llvm::MapVector<mlir::Value, mlir::Value> inPlace;
  llvm::MapVector<mlir::Value, Buffer> buffers;
};

} // namespace shardc::dist

#endif // SHARDC_DIALECT_DIST_ANALYSIS_BUFFERLIVENESS_H
