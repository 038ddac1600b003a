//===- AttentionGraph.h - Causal attention as operation graphs --*- C++ -*-===//
//
// The forward and backward of causal multi-head attention of bf16 qkv
// (shardc_rt/Kernels.h's layout: qkv[b, t, 3c], out[b, t, c], lse[b, heads,
// t]) as the operation graphs cuDNN's frontend (NVIDIA/cudnn-frontend, the
// library PyTorch and llm.c build theirs with) lowers its scaled-dot-product
// flash attention node to for a causal mask, no dropout, no bias, training:
// the scores q k^T, their scale, the mask, the softmax with its log-sum-exps,
// P v; the backward likewise. cuDNN's fused attention engines match each
// graph as a whole (CudnnAttention.h hands them over); a CPU evaluator of
// the same data checks what they compute
// (runtime/test/AttentionGraphsTest.cpp).
//
// Plain data, no cuDNN: tensors by uid (their dimensions, strides in
// elements, type, and whether the caller binds them), operations in order.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_CUDA_ATTENTIONGRAPH_H
#define SHARDC_RT_CUDA_ATTENTIONGRAPH_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <vector>

namespace shardc::rt::cuda {

/// One (batch, sequence, channels, heads) shape of attention.
struct AttentionShape {
  int64_t b, t, c, heads;
  bool operator<(const AttentionShape &o) const {
    return std::tie(b, t, c, heads) < std::tie(o.b, o.t, o.c, o.heads);
  }
};

struct AttentionGraph {
  /// A 4-d tensor's dimensions or strides: [batch, head, row, column].
  using Dims = std::array<int64_t, 4>;
  enum class Type { F32, Bf16, I32, Bool };
  struct Tensor {
    int64_t uid;
    Dims dims, strides;
    Type type;
    /// Lives only inside the fused kernel (else the caller binds it).
    bool isVirtual;
    /// A host f32 scalar, bound by its value's address.
    bool byValue;
  };
  enum class Kind { Matmul, Pointwise, Reduction, Reshape };
  /// Pointwise: y = x * b, x + b, x - b, x / b, exp x, log x, x, x's index
  /// along `axis`, x >= b, t ? x : b (b and t broadcast); reduction: the
  /// max or sum of x over the dimensions where y's is 1.
  enum class Mode {
    None,
    Mul,
    Add,
    Sub,
    Div,
    Exp,
    Log,
    Identity,
    GenIndex,
    CmpGe,
    Select,
    Max,
    Sum
  };
  /// y = kind(x, b, t) by uid (0: no such operand); Matmul: y = x b over
  /// the last two dimensions; Reshape: y is x's memory seen with y's
  /// strides (a transpose, where they swap).
  struct Operation {
    Kind kind;
    Mode mode;
    int64_t x, b, t, y;
    int64_t axis;
  };

  std::vector<Tensor> tensors;
  std::vector<Operation> operations;

  /// The tensor of `uid` (one the graph has).
  const Tensor &tensor(int64_t uid) const;
};

/// The uids of the tensors the caller binds: qkv's rows and out's, the
/// stats, the gradients; the host scalars; the backward's f32 tensors in
/// its workspace (dq's accumulator, the rows' dot(do, o)).
enum AttentionUid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kScale,
  kNegativeInfinity,
  kOne,
  kRowDots,
  kDqAccumulator,
};

/// out = softmax(causal(scale q k^T)) v and stats = each row's log-sum-exp
/// of causal(scale q k^T), scale = 1 / sqrt(d); k bound as k^T (strides
/// swapped).
AttentionGraph attentionForwardGraph(const AttentionShape &shape);

/// dq, dk, dv from do, o, the stats, q, k and v: P = exp(causal(scale q k^T)
/// - stats), dv = P^T do, dS = scale P (do v^T - rowdot(do, o)), dk = dS^T q,
/// dq = dS k through an f32 accumulator; v bound as v^T.
AttentionGraph attentionBackwardGraph(const AttentionShape &shape);

/// Where each tensor a graph binds lies: in which of the caller's tensors
/// (qkv[b, t, 3c], out and dy [b, t, c], lse [b, heads, t], dqkv; the
/// backward's workspace pieces) and how many elements in, or for a scalar
/// its value.
struct AttentionBinding {
  enum class Buffer { Qkv, Out, Lse, Dy, Dqkv, DqAccumulator, RowDots, Scalar };
  int64_t uid;
  Buffer buffer;
  int64_t offset;
  float value;
};

/// The forward's bindings (qkv, out, lse, the scale and -infinity) and the
/// backward's (those and dy, dqkv, 1, the workspace's two tensors), in
/// uid order.
std::vector<AttentionBinding>
attentionForwardBindings(const AttentionShape &shape);
std::vector<AttentionBinding>
attentionBackwardBindings(const AttentionShape &shape);

/// The backward's own workspace ahead of cuDNN's: dq's f32 accumulator
/// ([b, heads, t, d], packed), then the rows' dot(do, o) ([b, heads, t]),
/// each rounded up to 256 bytes.
size_t attentionDqAccumulatorBytes(const AttentionShape &shape);
size_t attentionRowDotsBytes(const AttentionShape &shape);

} // namespace shardc::rt::cuda

#endif // SHARDC_RT_CUDA_ATTENTIONGRAPH_H
