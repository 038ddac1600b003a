//===- Ledger.cpp - Per-rank memory and bytes on the wire of a step -------===//
//
// A sweep over the step's buffers (BufferLiveness), each in a category:
// activations, gradients, gathered params, communication staging.
//
//===----------------------------------------------------------------------===//

#include "shardc/Dialect/Dist/Analysis/Ledger.h"

#include "shardc/Dialect/Dist/Analysis/BufferLiveness.h"
#include "shardc/Dialect/Dist/IR/DistOps.h"
#include "shardc/Dialect/Dist/Transforms/Passes.h"

#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace shardc;
using namespace shardc::dist;
using train::ModelOp;
using train::ParamOp;

namespace {

enum Category { Activations, Grads, Gathered, Comm, NumCategories };

int64_t bytesOf(RankedTensorType type) {
  return type.getNumElements() *
         ((type.getElementType().getIntOrFloatBitWidth() + 7) / 8);
}

/// a * b and a + b, or kFlopsOverflow where int64 cannot hold them (shapes
/// of up to 2^40 elements can ask for more FLOPs than that).
int64_t saturatingMul(int64_t a, int64_t b) {
  int64_t product;
  return llvm::MulOverflow(a, b, product) ? kFlopsOverflow : product;
}
int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  return llvm::AddOverflow(a, b, sum) ? kFlopsOverflow : sum;
}

/// Runs of `op` per step: once per micro-batch of each loop around it.
int64_t runsPerStep(Operation *op) {
  int64_t runs = 1;
  for (auto loop = op->getParentOfType<train::MicrobatchesOp>(); loop;
       loop = loop->getParentOfType<train::MicrobatchesOp>())
    runs *= loop.getCount();
  return runs;
}

class Ledger {
public:
  Ledger(ModelOp model) : model(model), liveness(model) {}
  LedgerReport build();
  /// One line per unit: its stored params, gathered params and kept
  /// activations.
  void explainUnits(InFlightDiagnostic &diag);

private:
  void categorize();
  void markGrads();
  void countTraffic(LedgerReport &report);

  ModelOp model;
  BufferLiveness liveness;
  llvm::DenseMap<Value, Category> categories;
  SymbolTableCollection symbols;
};

/// Gathered parameters: a gather of a stored param, of an updated shard or
/// of the shard a unit keeps from its forward to its backward, and that
/// shard.
void Ledger::categorize() {
  model.walk([&](Operation *op) {
    if (isa<TakeShardOp>(op)) {
      categories[op->getResult(0)] = Gathered;
      return;
    }
    if (!isa<AllGatherOp, AllGatherStartOp>(op))
      return;
    Operation *src = op->getOperand(0).getDefiningOp();
    if (isa_and_nonnull<ParamOp, AdamWShardOp, FlatParamOp, AdamWFlatOp,
                        TakeShardOp>(src))
      categories[op->getResult(0)] = Gathered;
  });
}

/// Gradients: what the optimizer takes, back through reductions (or the
/// conversions they fold to on one rank), buckets and the sums that
/// accumulate a param used twice.
void Ledger::markGrads() {
  SmallVector<Value> work;
  model.walk([&](Operation *op) {
    if (auto update = dyn_cast<train::OptimizerUpdateOpInterface>(op))
      work.push_back(update.getGrad());
    if (auto bwd = dyn_cast<train::BackwardOp>(op))
      for (Value grad : bwd.getParamGrads())
        work.push_back(grad);
  });
  while (!work.empty()) {
    Value v = work.pop_back_val();
    // The value whose op wrote v: a buffer written in place holds a gradient
    // only from there on.
    Value writer = liveness.getWriter(v);
    if (!liveness.getBuffers().count(liveness.getRoot(writer)) ||
        categories.lookup(writer) == Grads)
      continue;
    categories[writer] = Grads;
    Operation *def = writer.getDefiningOp();
    if (auto wait = dyn_cast_or_null<WaitOp>(def))
      def = wait.getToken().getDefiningOp();
    if (isa_and_nonnull<ReduceScatterOp, ReduceScatterStartOp, AllReduceOp,
                        AllReduceStartOp, PackOp, ConvertOp, train::AddOp>(def))
      for (Value operand : def->getOperands())
        work.push_back(operand);
  }
}

void Ledger::countTraffic(LedgerReport &report) {
  model.walk([&](Operation *op) {
    // A stored shard in host memory, copied to the device for each gather.
    if (readsHostMemory(op))
      report.hostCopyBytes +=
          runsPerStep(op) * getBufferBytes(op->getOperand(0));
    auto account = [&](ArrayAttr axes, LedgerTraffic &traffic,
                       LedgerTraffic *local = nullptr) {
      // A collective in a micro-batch loop runs once per micro-batch.
      int64_t runs = runsPerStep(op), once = getBytesSent(op);
      traffic.bytes += runs * once;
      traffic.count += runs;
      if (local && axes.size() == 1 &&
          cast<StringAttr>(axes[0]).getValue() == kLocalAxisName) {
        local->bytes += runs * once;
        local->count += runs;
      }
    };
    TypeSwitch<Operation *>(op)
        .Case<AllGatherOp, AllGatherStartOp>([&](auto c) {
          account(c.getAxes(), report.allGather, &report.localAllGather);
        })
        .Case<ReduceScatterOp, ReduceScatterStartOp>(
            [&](auto c) { account(c.getAxes(), report.reduceScatter); })
        .Case<AllReduceOp, AllReduceStartOp>(
            [&](auto c) { account(c.getAxes(), report.allReduce); });
  });
}

LedgerReport Ledger::build() {
  LedgerReport report;
  report.model = model.getSymName().str();
  auto strategy = model->getAttrOfType<StringAttr>(kStrategyAttrName);
  report.strategy = strategy ? strategy.getValue().str() : "none";
  report.offloadsOptimizer = model->hasAttr(kOffloadOptimizerAttrName);
  report.offloadsParams = model->hasAttr(kOffloadParamsAttrName);
  if (auto mesh = symbols.lookupNearestSymbolFrom<MeshOp>(
          model, FlatSymbolRefAttr::get(model.getContext(), "mesh")))
    report.world = mesh.getNumRanks();

  categorize();
  markGrads();

  // Model state.
  llvm::StringMap<ParamOp> params = model.getParamsByName();
  model.walk([&](Operation *op) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      report.params += param.getNumElements();
      // A flat parameter's members are stored in it.
      auto sharding = dyn_cast_or_null<ShardAttr>(param.getShardingAttr());
      if (!sharding || sharding.getLayout() != Layout::flat)
        report.paramBytes += bytesOf(param.getType());
      return;
    }
    if (auto flat = dyn_cast<FlatParamOp>(op)) {
      report.paramBytes += bytesOf(flat.getType());
      return;
    }
    auto update = dyn_cast<train::OptimizerUpdateOpInterface>(op);
    if (!update)
      return;
    auto user = cast<train::ParamUserOpInterface>(op);
    ParamOp param = params.lookup(user.getParamNames().front());
    Value grad = update.getGrad();
    int64_t count = cast<RankedTensorType>(grad.getType()).getNumElements();
    bool master = !param.getType().getElementType().isF32();
    report.optimizerBytes += count * (8 + (master ? 4 : 0));
    // The gradient out; the value written back (an f32 one out too), but
    // where the params are in host memory as well.
    if (report.offloadsOptimizer)
      report.hostCopyBytes +=
          bytesOf(cast<RankedTensorType>(grad.getType())) +
          (report.offloadsParams ? 0 : count * (master ? 2 : 8));
    // The gradient held for the optimizer: zero1 holds it whole, as
    // backward produced it, until its reduce-scatter.
    Value held = grad;
    for (Value v = grad; v;) {
      Operation *def = v.getDefiningOp();
      if (auto wait = dyn_cast_or_null<WaitOp>(def))
        def = wait.getToken().getDefiningOp();
      // Accumulated over micro-batches: held whole until reduced, or the
      // sum of the reduced shards (grad-sync=microbatch).
      if (isa_and_nonnull<train::MicrobatchesOp>(def)) {
        held = v;
        break;
      }
      // A flat parameter's gradients, accumulated and then packed: held
      // whole until reduced.
      if (auto pack = dyn_cast_or_null<PackOp>(def)) {
        if (llvm::any_of(pack.getInputs(), [](Value in) {
              return isa_and_nonnull<train::MicrobatchesOp>(in.getDefiningOp());
            }))
          held = v;
        break;
      }
      // Reductions, and the conversions they fold to on one rank.
      if (!isa_and_nonnull<ReduceScatterOp, ReduceScatterStartOp, AllReduceOp,
                           AllReduceStartOp, ConvertOp>(def))
        break;
      v = def->getOperand(0);
      // zero1 holds the gradient whole until its reduce-scatter.
      if (report.strategy == "zero1" &&
          isa<ReduceScatterOp, ReduceScatterStartOp, ConvertOp>(def))
        held = v;
    }
    report.gradBytes += getBufferBytes(held);
  });

  // Liveness: a sweep over positions, per category.
  int64_t positions = liveness.getNumPositions();
  std::array<std::vector<int64_t>, NumCategories> delta;
  for (auto &d : delta)
    d.assign(positions + 2, 0);
  for (auto &[value, buffer] : liveness.getBuffers()) {
    // Each writer's category from its op on (results written in place
    // take the buffer over as their op ends).
    int64_t from = buffer.def;
    Category category = categories.lookup(value);
    for (Value writer : buffer.writtenInPlace) {
      int64_t at = liveness.getEnd(writer.getDefiningOp());
      delta[category][from] += buffer.bytes;
      delta[category][at] -= buffer.bytes;
      from = at;
      category = categories.lookup(writer);
    }
    delta[category][from] += buffer.bytes;
    delta[category][buffer.last + 1] -= buffer.bytes;
  }
  // Collectives that cast to the wire type or pad uneven shards stage a
  // copy from their start until their wait.
  model.walk([&](Operation *op) {
    int64_t bytes = getStagingBytes(op);
    if (!bytes)
      return;
    int64_t until = liveness.getEnd(op);
    if (isa<AllGatherStartOp, ReduceScatterStartOp, AllReduceStartOp>(op))
      for (Operation *wait : op->getResult(0).getUsers())
        until = std::max(until, liveness.getEnd(wait));
    delta[Comm][liveness.getStart(op)] += bytes;
    delta[Comm][until + 1] -= bytes;
  });

  // Where the forward ends: the loss; where the loss is fused with its
  // gradient, as that op starts, when the logits are still activations (the
  // gradient takes their buffer over as it ends).
  int64_t lossAt = positions;
  model.walk([&](Operation *op) {
    if (isa<train::CrossEntropyOp>(op))
      lossAt = liveness.getEnd(op);
    else if (isa<train::CrossEntropyAndGradOp>(op))
      lossAt = liveness.getStart(op);
  });

  std::array<int64_t, NumCategories> live{};
  int64_t persistent =
      report.deviceParamBytes() + report.deviceOptimizerBytes();
  int64_t peakTransient = 0;
  for (int64_t p = 0; p <= positions; ++p) {
    int64_t total = 0;
    for (int c = 0; c < NumCategories; ++c) {
      live[c] += delta[c][p];
      total += live[c];
    }
    peakTransient = std::max(peakTransient, total);
    report.gatheredBytes = std::max(report.gatheredBytes, live[Gathered]);
    report.commBytes = std::max(report.commBytes, live[Comm]);
    if (p == lossAt)
      report.activationBytes = live[Activations];
  }
  report.peak = persistent + peakTransient;
  countTraffic(report);
  // The forward's ops: those the walk (in program order, wherever the loss
  // is) reaches before the loss, whose gradient starts the backward, but
  // the backwards' (where a recomputed forward runs).
  // A step without one (an evaluation step) counts its forward once.
  // A step that updates params trains, with or without units.
  model.walk([&](train::OptimizerUpdateOpInterface) { report.trains = true; });
  int64_t passes = report.trains ? 3 : 1;
  bool forward = true;
  int64_t recomputed = 0;
  model.walk([&](Operation *op) {
    if (isa<train::CrossEntropyOp, train::CrossEntropyAndGradOp>(op))
      forward = false;
    else if (!op->getParentOfType<train::BackwardOp>())
      report.modelFlops = saturatingAdd(
          report.modelFlops,
          forward ? saturatingMul(passes * runsPerStep(op), getMatmulFlops(op))
                  : 0);
    else if (op->hasAttr(train::kRecomputedAttrName))
      recomputed = saturatingAdd(
          recomputed, saturatingMul(runsPerStep(op), getMatmulFlops(op)));
  });
  report.hardwareFlops = saturatingAdd(report.modelFlops, recomputed);
  return report;
}

void Ledger::explainUnits(InFlightDiagnostic &diag) {
  // params, gathered, activations kept, shards kept (reshard-after-forward=K)
  llvm::MapVector<StringRef, std::array<int64_t, 4>> units;
  units[""] = {0, 0, 0, 0};
  StringRef lastUnit;
  // The step's ops, a micro-batch loop's in its place (its units run there).
  SmallVector<Operation *> ops;
  for (Operation &op : model.getBody().front()) {
    if (auto loop = dyn_cast<train::MicrobatchesOp>(op))
      for (Operation &inner : loop.getBody().front())
        ops.push_back(&inner);
    else
      ops.push_back(&op);
  }
  for (Operation *op : ops) {
    if (auto param = dyn_cast<ParamOp>(op))
      units[param.getUnitName()][0] += bytesOf(param.getType());
    // A shard kept after a unit's forward, for its backward.
    if (isa<TakeShardOp>(op))
      units[lastUnit][3] += getBufferBytes(op->getResult(0));
    auto unit = dyn_cast<train::UnitOp>(op);
    if (!unit)
      continue;
    lastUnit = unit.getName();
    for (Value input : unit.getInputs())
      if (isa_and_nonnull<AllGatherOp, WaitOp, UnpackOp>(input.getDefiningOp()))
        units[unit.getName()][1] += getBufferBytes(input);
    for (Value result : unit.getResults())
      if (llvm::any_of(result.getUsers(), [](Operation *u) {
            return isa<train::BackwardOp>(u);
          }))
        units[unit.getName()][2] += getBufferBytes(result);
  }
  // With offload-params, the stored params are in host memory.
  const char *params =
      model->hasAttr(kOffloadParamsAttrName) ? ": params (host) " : ": params ";
  for (auto &[name, b] : units)
    diag.attachNote() << (name.empty() ? std::string("the root unit")
                                       : ("unit '" + name + "'").str())
                      << params << b[0] << " bytes, gathered " << b[1]
                      << " bytes, activations kept for backward " << b[2]
                      << " bytes"
                      << (b[3] ? ", param shards kept for backward " +
                                     std::to_string(b[3]) + " bytes"
                               : std::string());
}

} // namespace

int64_t dist::getMatmulFlops(Operation *op) {
  auto shape = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  };
  auto numel = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getNumElements();
  };
  // Each of the result's elements sums K products.
  auto matmul = [&](auto o) {
    ArrayRef<int64_t> lhs = shape(o.getLhs());
    int64_t k = lhs[lhs.size() - (o.getTransposeLhs() ? 2 : 1)];
    return saturatingMul(2 * numel(o.getResult()), k);
  };
  // [B, T, 3C]: Q K^T or P V over the causal half, 2 B T^2 C / 2.
  auto causalProduct = [&](Value qkv) {
    ArrayRef<int64_t> s = shape(qkv);
    return saturatingMul(saturatingMul(s[0] * s[1], s[1]), s[2] / 3);
  };
  return TypeSwitch<Operation *, int64_t>(op)
      // [M, K] x [N, K]^T: 2 M K N.
      .Case<train::LinearOp, train::LinearGeluOp>([&](auto o) {
        return saturatingMul(2 * numel(o.getInput()), shape(o.getWeight())[0]);
      })
      .Case<train::MatmulOp, train::MatmulGeluGradOp, train::MatmulBiasGradOp>(
          matmul)
      .Case([&](train::AttentionOp o) {
        return saturatingMul(2, causalProduct(o.getQkv()));
      })
      .Case([&](train::AttentionGradOp o) {
        return saturatingMul(5, causalProduct(o.getQkv()));
      })
      .Default([](Operation *) { return int64_t(0); });
}

LedgerReport dist::computeLedger(ModelOp model) { return Ledger(model).build(); }

void dist::explainLedgerByUnit(ModelOp model, InFlightDiagnostic &diag) {
  Ledger(model).explainUnits(diag);
}
