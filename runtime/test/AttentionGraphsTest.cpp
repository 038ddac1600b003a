//===- AttentionGraphsTest.cpp - The cuDNN graphs, run on the CPU ---------===//
//
// Runs runtime/cuda/AttentionGraph.h's forward and backward graphs, the
// data CudnnAttention hands cuDNN, through an evaluator of their operations
// (exact: doubles, no rounding to the tensors' types), on random qkv and dy
// bound by the bindings CudnnAttention binds them by, and compares out, the
// stats (lse), dq, dk and dv with the CPU kernels' (shardc::rt::cpu::attention
// and attentionGrad for double). A wrong operation, operand, mask, stride or
// transpose in a graph is off by O(1) here, where cuDNN's heuristics take
// such graphs as well (cuDNN compiles the pointwise operations as they are
// written); whether cuDNN's kernels compute what the graphs say, the GPU
// kernel test checks (shardc-rt-cudakernels, "(cudnn)").
//
// One line per check, then "attention-graphs: N passed, M failed"; exit
// status 0 when all passed.
//
//===----------------------------------------------------------------------===//

#include "AttentionGraph.h"

#include "shardc_rt/Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace shardc::rt::cuda;

namespace {

using Graph = AttentionGraph;
using Memory = std::shared_ptr<std::vector<double>>;

/// A tensor's elements: its memory, where element 0 lies in it, and whether
/// an operation (or the caller) has written it.
struct View {
  Memory memory;
  int64_t base = 0;
  bool written = false;
};

/// Runs a graph's operations in order over bound and virtual tensors;
/// `error` names the first operation that read a tensor nothing wrote.
class Evaluator {
public:
  explicit Evaluator(Graph graph) : graph(std::move(graph)) {}

  /// Each binding's tensor at its offset into its memory (a scalar: its
  /// value). Bound tensors count as written: an output the graph never
  /// writes keeps the NaNs it starts with.
  void bindAll(const std::vector<AttentionBinding> &bindings,
               const std::map<AttentionBinding::Buffer, Memory> &memories) {
    for (const AttentionBinding &b : bindings)
      views[b.uid] =
          b.buffer == AttentionBinding::Buffer::Scalar
              ? View{std::make_shared<std::vector<double>>(1, b.value), 0, true}
              : View{memories.at(b.buffer), b.offset, true};
  }

  std::string run() {
    for (const Graph::Tensor &t : graph.tensors)
      if (!views.count(t.uid)) // virtual: memory of its own, as strided
        views[t.uid] = {std::make_shared<std::vector<double>>(span(t), 0.0), 0,
                        false};
    int index = 0;
    for (const Graph::Operation &op : graph.operations) {
      for (int64_t uid : {op.x, op.b, op.t})
        if (uid && !views[uid].written)
          return "operation " + std::to_string(index) + " reads tensor " +
                 std::to_string(uid) + ", which nothing wrote";
      switch (op.kind) {
      case Graph::Kind::Matmul:
        matmul(op);
        break;
      case Graph::Kind::Pointwise:
        pointwise(op);
        break;
      case Graph::Kind::Reduction:
        reduction(op);
        break;
      case Graph::Kind::Reshape: // y is x's memory, seen with y's strides
        views[op.y].memory =
            std::make_shared<std::vector<double>>(*views[op.x].memory);
        views[op.y].base = views[op.x].base;
        break;
      }
      views[op.y].written = true;
      ++index;
    }
    return "";
  }

private:
  using Index = std::array<int64_t, 4>;
  Graph graph;
  std::map<int64_t, View> views;

  static size_t span(const Graph::Tensor &t) {
    int64_t last = 0;
    for (int i = 0; i < 4; ++i)
      last += (t.dims[i] - 1) * t.strides[i];
    return static_cast<size_t>(last + 1);
  }

  /// Element i of tensor uid, broadcast along its dimensions of 1.
  double &at(int64_t uid, const Index &i) {
    const Graph::Tensor &t = graph.tensor(uid);
    View &v = views[uid];
    int64_t offset = v.base;
    for (int k = 0; k < 4; ++k)
      offset += (t.dims[k] == 1 ? 0 : i[k]) * t.strides[k];
    return (*v.memory)[offset];
  }

  template <typename F> void forEach(const Graph::Dims &dims, F f) {
    Index i;
    for (i[0] = 0; i[0] < dims[0]; ++i[0])
      for (i[1] = 0; i[1] < dims[1]; ++i[1])
        for (i[2] = 0; i[2] < dims[2]; ++i[2])
          for (i[3] = 0; i[3] < dims[3]; ++i[3])
            f(i);
  }

  void matmul(const Graph::Operation &op) {
    int64_t inner = graph.tensor(op.x).dims[3];
    forEach(graph.tensor(op.y).dims, [&](const Index &i) {
      double sum = 0;
      for (int64_t k = 0; k < inner; ++k)
        sum +=
            at(op.x, {i[0], i[1], i[2], k}) * at(op.b, {i[0], i[1], k, i[3]});
      at(op.y, i) = sum;
    });
  }

  void pointwise(const Graph::Operation &op) {
    forEach(graph.tensor(op.y).dims, [&](const Index &i) {
      double x = at(op.x, i), b = op.b ? at(op.b, i) : 0;
      double r = 0;
      switch (op.mode) {
      case Graph::Mode::Mul:
        r = x * b;
        break;
      case Graph::Mode::Add:
        r = x + b;
        break;
      case Graph::Mode::Sub:
        r = x - b;
        break;
      case Graph::Mode::Div:
        r = x / b;
        break;
      case Graph::Mode::Exp:
        r = std::exp(x);
        break;
      case Graph::Mode::Log:
        r = std::log(x);
        break;
      case Graph::Mode::Identity:
        r = x;
        break;
      case Graph::Mode::GenIndex:
        r = static_cast<double>(i[op.axis]);
        break;
      case Graph::Mode::CmpGe:
        r = x >= b ? 1 : 0;
        break;
      case Graph::Mode::Select:
        r = at(op.t, i) != 0 ? x : b;
        break;
      default:
        r = NAN;
      }
      at(op.y, i) = r;
    });
  }

  void reduction(const Graph::Operation &op) {
    const Graph::Dims &out = graph.tensor(op.y).dims;
    bool max = op.mode == Graph::Mode::Max;
    forEach(out, [&](const Index &i) { at(op.y, i) = max ? -INFINITY : 0; });
    forEach(graph.tensor(op.x).dims, [&](const Index &i) {
      double &y = at(op.y, i), x = at(op.x, i);
      y = max ? std::max(y, x) : y + x;
    });
  }
};

int passed = 0, failed = 0;

void report(bool ok, const std::string &name, const std::string &detail) {
  std::printf("%s: %s%s%s\n", ok ? "ok" : "FAIL", name.c_str(),
              detail.empty() ? "" : ": ", detail.c_str());
  ++(ok ? passed : failed);
}

/// got against want: the largest |got - want| within 1e-6 of max |want|
/// (the graphs' scale is an f32, 1 / sqrt(d) rounded: 6e-8 relative where
/// d is not a power of 4).
void compare(const std::string &name, const std::vector<double> &got,
             const std::vector<double> &want) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  char detail[96];
  std::snprintf(detail, sizeof detail, "max |diff| %.3g of max |want| %.3g",
                worst, scale);
  report(!std::isnan(worst) && worst <= 1e-6 * std::max(scale, 1.0), name,
         detail);
}

void check(const AttentionShape &s) {
  std::mt19937 rng(static_cast<uint32_t>(s.b * 1000003 + s.t * 1009 + s.c));
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  auto random = [&](int64_t n) {
    auto v = std::make_shared<std::vector<double>>(n);
    for (double &x : *v)
      x = uniform(rng);
    return v;
  };
  int64_t b = s.b, t = s.t, c = s.c, heads = s.heads;
  std::string name = "b " + std::to_string(b) + " t " + std::to_string(t) +
                     " c " + std::to_string(c) + " heads " +
                     std::to_string(heads);
  Memory qkv = random(b * t * 3 * c), dy = random(b * t * c);
  std::vector<double> out(b * t * c), lse(b * heads * t), dqkv(b * t * 3 * c);
  shardc::rt::cpu::attention<double>(qkv->data(), out.data(), lse.data(), b, t,
                                     c, heads);
  shardc::rt::cpu::attentionGrad<double>(dy->data(), qkv->data(), out.data(),
                                         lse.data(), dqkv.data(), b, t, c,
                                         heads);

  // Each graph bound by its bindings, as CudnnAttention binds it; the
  // backward from the reference's out and lse, its two f32 workspace
  // tensors in memory of their own.
  using Buffer = AttentionBinding::Buffer;
  auto nans = [](int64_t n) {
    return std::make_shared<std::vector<double>>(n, NAN);
  };
  std::map<Buffer, Memory> memories = {{Buffer::Qkv, qkv},
                                       {Buffer::Out, nans(b * t * c)},
                                       {Buffer::Lse, nans(b * heads * t)},
                                       {Buffer::Dy, dy},
                                       {Buffer::Dqkv, nans(b * t * 3 * c)},
                                       {Buffer::DqAccumulator, nans(b * t * c)},
                                       {Buffer::RowDots, nans(b * heads * t)}};
  Evaluator f(attentionForwardGraph(s));
  f.bindAll(attentionForwardBindings(s), memories);
  std::string error = f.run();
  report(error.empty(), "forward graph runs " + name, error);
  compare("forward graph's out " + name, *memories[Buffer::Out], out);
  compare("forward graph's stats (lse) " + name, *memories[Buffer::Lse], lse);

  memories[Buffer::Out] = std::make_shared<std::vector<double>>(out);
  memories[Buffer::Lse] = std::make_shared<std::vector<double>>(lse);
  Evaluator g(attentionBackwardGraph(s));
  g.bindAll(attentionBackwardBindings(s), memories);
  error = g.run();
  report(error.empty(), "backward graph runs " + name, error);
  compare("backward graph's dq, dk, dv " + name, *memories[Buffer::Dqkv], dqkv);
}

} // namespace

int main() {
  // Heads of 8 and 16 elements; T past a block of 64 and not a multiple of
  // it; one query.
  check({2, 9, 16, 2});
  check({1, 70, 48, 3});
  check({2, 1, 32, 2});
  std::printf("attention-graphs: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
