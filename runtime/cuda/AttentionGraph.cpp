//===- AttentionGraph.cpp - Causal attention as operation graphs ----------===//
//
// The graphs follow cudnn-frontend's CompositeSDPANode and
// CompositeSDPABackwardNode as they expand for cuDNN 9.19 (no single
// attention operation takes a causal mask before 9.21): the operations,
// their order, each intermediate's type (f32, except P and the transposed
// P and dS that a bf16 matmul reads), k^T and v^T as strides swapped on
// the caller's tensor, the other transposes as reshapes, and the
// backward's two f32 tensors in the workspace.
//
//===----------------------------------------------------------------------===//

#include "AttentionGraph.h"
#include "Workspace.h"

#include <cmath>
#include <cstdlib>

namespace shardc::rt::cuda {

const AttentionGraph::Tensor &AttentionGraph::tensor(int64_t uid) const {
  for (const Tensor &t : tensors)
    if (t.uid == uid)
      return t;
  std::abort(); // a uid the graph's own operations named
}

namespace {

using Dims = AttentionGraph::Dims;
using Type = AttentionGraph::Type;
using Kind = AttentionGraph::Kind;
using Mode = AttentionGraph::Mode;

/// Where a shape's tensors lie: q, k and v (and dq, dk, dv) are [b, heads,
/// t, d] views of the rows of qkv[b, t, 3c] (k, v c and 2c elements on), o
/// and do of out[b, t, c], the stats lse[b, heads, t, 1].
struct Layout {
  int64_t b, t, c, heads, d;
  explicit Layout(const AttentionShape &s)
      : b(s.b), t(s.t), c(s.c), heads(s.heads), d(s.c / s.heads) {}
  Dims rows() const { return {b, heads, t, d}; }
  Dims qkvStrides() const { return {t * 3 * c, d, 3 * c, 1}; }
  Dims outStrides() const { return {t * c, d, c, 1}; }
  /// k's (v's) transpose, [b, heads, d, t]: the same elements.
  Dims transposed() const { return {b, heads, d, t}; }
  Dims qkvTransposedStrides() const { return {t * 3 * c, d, 1, 3 * c}; }
  Dims stats() const { return {b, heads, t, 1}; }
  Dims statsStrides() const { return {heads * t, t, 1, 1}; }
  Dims scores() const { return {b, heads, t, t}; }
  /// The scores' transpose, as a reshape writes it.
  Dims scoresTransposedStrides() const { return {heads * t * t, t * t, 1, t}; }
};

/// Appends tensors and operations; virtual tensors get uids from 1000.
class Builder {
public:
  AttentionGraph graph;

  int64_t tensor(int64_t uid, const Dims &dims, const Dims &strides,
                 Type type) {
    graph.tensors.push_back({uid, dims, strides, type, false, false});
    return uid;
  }

  /// A host f32 scalar (cuDNN 9.19 takes them 4-d).
  int64_t scalar(int64_t uid) {
    graph.tensors.push_back(
        {uid, {1, 1, 1, 1}, {1, 1, 1, 1}, Type::F32, false, true});
    return uid;
  }

  /// A virtual tensor of `dims`, packed unless `strides` are given.
  int64_t temporary(const Dims &dims, Type type = Type::F32,
                    const Dims *strides = nullptr) {
    Dims packed{dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
    graph.tensors.push_back(
        {nextVirtual, dims, strides ? *strides : packed, type, true, false});
    return nextVirtual++;
  }

  void pointwise(Mode mode, int64_t x, int64_t b, int64_t t, int64_t y,
                 int64_t axis = -1) {
    graph.operations.push_back({Kind::Pointwise, mode, x, b, t, y, axis});
  }
  void matmul(int64_t a, int64_t b, int64_t c) {
    graph.operations.push_back({Kind::Matmul, Mode::None, a, b, 0, c, -1});
  }
  void reduction(Mode mode, int64_t x, int64_t y) {
    graph.operations.push_back({Kind::Reduction, mode, x, 0, 0, y, -1});
  }
  void reshape(int64_t x, int64_t y) {
    graph.operations.push_back({Kind::Reshape, Mode::None, x, 0, 0, y, -1});
  }

private:
  int64_t nextVirtual = 1000;
};

/// scores with those above the diagonal (key after query) -infinity: the
/// frontend's diagonal band mask, right bound 0, aligned top left.
int64_t causalMask(Builder &g, const Layout &l, int64_t scores,
                   int64_t negInfinity) {
  int64_t row = g.temporary(l.scores(), Type::I32),
          column = g.temporary(l.scores(), Type::I32),
          keep = g.temporary(l.scores(), Type::Bool),
          masked = g.temporary(l.scores());
  g.pointwise(Mode::GenIndex, scores, 0, 0, row, 2);
  g.pointwise(Mode::GenIndex, scores, 0, 0, column, 3);
  g.pointwise(Mode::CmpGe, row, column, 0, keep);
  g.pointwise(Mode::Select, scores, negInfinity, keep, masked);
  return masked;
}

} // namespace

AttentionGraph attentionForwardGraph(const AttentionShape &shape) {
  Layout l(shape);
  Builder g;
  Type io = Type::Bf16;
  int64_t q = g.tensor(kQ, l.rows(), l.qkvStrides(), io),
          kt = g.tensor(kK, l.transposed(), l.qkvTransposedStrides(), io),
          v = g.tensor(kV, l.rows(), l.qkvStrides(), io),
          o = g.tensor(kO, l.rows(), l.outStrides(), io),
          stats = g.tensor(kStats, l.stats(), l.statsStrides(), Type::F32),
          scale = g.scalar(kScale), negInfinity = g.scalar(kNegativeInfinity);
  int64_t raw = g.temporary(l.scores()), scaled = g.temporary(l.scores());
  g.matmul(q, kt, raw);
  g.pointwise(Mode::Mul, raw, scale, 0, scaled);
  int64_t masked = causalMask(g, l, scaled, negInfinity);
  int64_t max = g.temporary(l.stats()), shifted = g.temporary(l.scores()),
          exp = g.temporary(l.scores()), sum = g.temporary(l.stats()),
          logSum = g.temporary(l.stats()), p = g.temporary(l.scores(), io);
  g.reduction(Mode::Max, masked, max);
  g.pointwise(Mode::Sub, masked, max, 0, shifted);
  g.pointwise(Mode::Exp, shifted, 0, 0, exp);
  g.reduction(Mode::Sum, exp, sum);
  g.pointwise(Mode::Log, sum, 0, 0, logSum);
  g.pointwise(Mode::Add, max, logSum, 0, stats);
  g.pointwise(Mode::Div, exp, sum, 0, p);
  g.matmul(p, v, o);
  return g.graph;
}

AttentionGraph attentionBackwardGraph(const AttentionShape &shape) {
  Layout l(shape);
  Builder g;
  Type io = Type::Bf16;
  Dims transposed = l.scoresTransposedStrides(), kStrides = l.qkvStrides(),
       packedRows{l.heads * l.t * l.d, l.t * l.d, l.d, 1};
  int64_t q = g.tensor(kQ, l.rows(), l.qkvStrides(), io),
          kt = g.tensor(kK, l.transposed(), l.qkvTransposedStrides(), io),
          vt = g.tensor(kV, l.transposed(), l.qkvTransposedStrides(), io),
          o = g.tensor(kO, l.rows(), l.outStrides(), io),
          dO = g.tensor(kDO, l.rows(), l.outStrides(), io),
          stats = g.tensor(kStats, l.stats(), l.statsStrides(), Type::F32),
          dq = g.tensor(kDQ, l.rows(), l.qkvStrides(), io),
          dk = g.tensor(kDK, l.rows(), l.qkvStrides(), io),
          dv = g.tensor(kDV, l.rows(), l.qkvStrides(), io),
          scale = g.scalar(kScale), negInfinity = g.scalar(kNegativeInfinity),
          one = g.scalar(kOne),
          rowDots = g.tensor(kRowDots, l.stats(), l.statsStrides(), Type::F32),
          dqAccumulator =
              g.tensor(kDqAccumulator, l.rows(), packedRows, Type::F32);
  // rowdot(do, o), times the dropout scale's inverse the frontend keeps.
  int64_t products = g.temporary(l.rows()), sums = g.temporary(l.stats());
  g.pointwise(Mode::Mul, dO, o, 0, products);
  g.reduction(Mode::Sum, products, sums);
  g.pointwise(Mode::Mul, sums, one, 0, rowDots);
  // P from the stats, and dv = P^T do.
  int64_t raw = g.temporary(l.scores()), scaled = g.temporary(l.scores()),
          shifted = g.temporary(l.scores());
  g.matmul(q, kt, raw);
  g.pointwise(Mode::Mul, raw, scale, 0, scaled);
  g.pointwise(Mode::Sub, scaled, stats, 0, shifted);
  int64_t masked = causalMask(g, l, shifted, negInfinity);
  int64_t p = g.temporary(l.scores()),
          pt = g.temporary(l.scores(), io, &transposed);
  g.pointwise(Mode::Exp, masked, 0, 0, p);
  g.reshape(p, pt);
  g.matmul(pt, dO, dv);
  // dS, then dk = dS^T q and dq = dS k.
  int64_t dp = g.temporary(l.scores()), centred = g.temporary(l.scores()),
          weighted = g.temporary(l.scores()), ds = g.temporary(l.scores()),
          dst = g.temporary(l.scores(), io, &transposed);
  g.matmul(dO, vt, dp);
  g.pointwise(Mode::Sub, dp, rowDots, 0, centred);
  g.pointwise(Mode::Mul, centred, p, 0, weighted);
  g.pointwise(Mode::Mul, weighted, scale, 0, ds);
  g.reshape(ds, dst);
  g.matmul(dst, q, dk);
  int64_t k = g.temporary(l.rows(), Type::F32, &kStrides);
  g.reshape(kt, k);
  g.matmul(ds, k, dqAccumulator);
  g.pointwise(Mode::Identity, dqAccumulator, 0, 0, dq);
  return g.graph;
}

std::vector<AttentionBinding>
attentionForwardBindings(const AttentionShape &s) {
  using Buffer = AttentionBinding::Buffer;
  float scale =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.c / s.heads)));
  return {{kQ, Buffer::Qkv, 0, 0},
          {kK, Buffer::Qkv, s.c, 0},
          {kV, Buffer::Qkv, 2 * s.c, 0},
          {kO, Buffer::Out, 0, 0},
          {kStats, Buffer::Lse, 0, 0},
          {kScale, Buffer::Scalar, 0, scale},
          {kNegativeInfinity, Buffer::Scalar, 0, -INFINITY}};
}

std::vector<AttentionBinding>
attentionBackwardBindings(const AttentionShape &s) {
  using Buffer = AttentionBinding::Buffer;
  std::vector<AttentionBinding> bindings = attentionForwardBindings(s);
  bindings.insert(bindings.begin() + 5, {{kDO, Buffer::Dy, 0, 0},
                                         {kDQ, Buffer::Dqkv, 0, 0},
                                         {kDK, Buffer::Dqkv, s.c, 0},
                                         {kDV, Buffer::Dqkv, 2 * s.c, 0}});
  bindings.push_back({kOne, Buffer::Scalar, 0, 1.0f});
  bindings.push_back({kRowDots, Buffer::RowDots, 0, 0});
  bindings.push_back({kDqAccumulator, Buffer::DqAccumulator, 0, 0});
  return bindings;
}

size_t attentionDqAccumulatorBytes(const AttentionShape &s) {
  return pieceBytes<float>(s.b * s.t * s.c);
}

size_t attentionRowDotsBytes(const AttentionShape &s) {
  return pieceBytes<float>(s.b * s.heads * s.t);
}

} // namespace shardc::rt::cuda
