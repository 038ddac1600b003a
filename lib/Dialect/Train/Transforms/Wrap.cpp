//===- Wrap.cpp - Group a model's layers into units by policy -------------===//

#include "shardc/Dialect/Train/Transforms/Passes.h"
#include "shardc/Support/PassOptions.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#define DEBUG_TYPE "shardc-wrap"

namespace shardc::train {
#define GEN_PASS_DEF_SHARDCWRAPPASS
#include "shardc/Dialect/Train/Transforms/Passes.h.inc"
} // namespace shardc::train

using namespace mlir;
using namespace shardc::train;

namespace {

/// Contiguous ops of the model body that become one unit, and the params
/// only they read.
struct Layer {
  SmallVector<Operation *> ops;
  llvm::SetVector<ParamOp> params;
  int64_t numParams() const {
    int64_t n = 0;
    for (ParamOp p : params)
      n += p.getNumElements();
    return n;
  }
};

/// The params `op` reads.
SmallVector<ParamOp> paramsRead(Operation *op) {
  SmallVector<ParamOp> params;
  for (Value v : op->getOperands())
    if (auto param = v.getDefiningOp<ParamOp>())
      params.push_back(param);
  return params;
}

/// Splits the body into layers; ops reading a param shared with another
/// layer stay in the root (they end the layer before them).
SmallVector<Layer> findLayers(Block &body) {
  // Which layer-start op reads each param first; a param read by two layer
  // starts is shared.
  llvm::DenseMap<Operation *, Operation *> owner; // param -> reader
  llvm::DenseSet<Operation *> shared;
  for (Operation &op : body)
    for (ParamOp param : paramsRead(&op)) {
      auto [it, inserted] = owner.try_emplace(param, &op);
      if (!inserted && it->second != &op)
        shared.insert(param);
    }

  SmallVector<Layer> layers;
  Layer *current = nullptr;
  for (Operation &op : body) {
    if (isa<ParamOp, InputOp, ReturnOp>(op))
      continue;
    SmallVector<ParamOp> params = paramsRead(&op);
    bool readsShared = llvm::any_of(
        params, [&](ParamOp p) { return shared.contains(p); });
    if (readsShared) {
      current = nullptr; // stays in the root
      continue;
    }
    if (!params.empty()) {
      layers.emplace_back();
      current = &layers.back();
    }
    if (!current)
      continue; // before the first layer
    current->ops.push_back(&op);
    for (ParamOp p : params)
      current->params.insert(p);
  }
  return layers;
}

/// The longest common dotted prefix of the params' names.
std::string unitName(const Layer &layer) {
  SmallVector<StringRef> prefix;
  bool first = true;
  for (ParamOp p : layer.params) {
    SmallVector<StringRef> parts;
    p.getName().split(parts, '.');
    parts.pop_back(); // "weight", "bias"
    if (first) {
      prefix = parts;
      first = false;
      continue;
    }
    size_t n = 0;
    while (n < prefix.size() && n < parts.size() && prefix[n] == parts[n])
      ++n;
    prefix.resize(n);
  }
  return llvm::join(prefix, ".");
}

/// Moves `layer` into a new train.unit in place.
void outline(const Layer &layer, StringRef name) {
  llvm::SmallPtrSet<Operation *, 16> inside(layer.ops.begin(), layer.ops.end());
  for (ParamOp p : layer.params)
    inside.insert(p);
  llvm::SetVector<Value> inputs, outputs;
  for (Operation *op : layer.ops) {
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!def || !inside.contains(def))
        inputs.insert(v);
    }
    for (Value r : op->getResults())
      if (llvm::any_of(r.getUsers(),
                       [&](Operation *u) { return !inside.contains(u); }))
        outputs.insert(r);
  }

  OpBuilder b(layer.ops.front());
  SmallVector<Type> resultTypes;
  for (Value v : outputs)
    resultTypes.push_back(v.getType());
  auto unit = UnitOp::create(b, layer.ops.front()->getLoc(), name,
                             resultTypes, inputs.getArrayRef());
  Block &inner = unit.getBody().front();
  for (ParamOp p : layer.params)
    p->moveBefore(&inner, inner.end());
  for (Operation *op : layer.ops)
    op->moveBefore(&inner, inner.end());
  for (auto [input, arg] : llvm::zip(inputs, inner.getArguments()))
    Value(input).replaceUsesWithIf(arg, [&](OpOperand &use) {
      return unit->isProperAncestor(use.getOwner());
    });
  b.setInsertionPointToEnd(&inner);
  YieldOp::create(b, unit.getLoc(), outputs.getArrayRef());
  for (auto [output, result] : llvm::zip(outputs, unit.getResults()))
    Value(output).replaceUsesWithIf(result, [&](OpOperand &use) {
      return !unit->isProperAncestor(use.getOwner());
    });
}

struct ShardcWrapPass
    : shardc::NamedOptionErrors<
          shardc::train::impl::ShardcWrapPassBase<ShardcWrapPass>> {
  using NamedOptionErrors::NamedOptionErrors;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t minParams = 0;
    StringRef text = policy;
    if (text != "per-layer") {
      if (!text.consume_front("min-params=") || text.getAsInteger(10, minParams) ||
          minParams <= 0) {
        module.emitError()
            << "wrap policy '" << policy
            << "': expected per-layer or min-params=P with P > 0";
        return signalPassFailure();
      }
    }
    FailureOr<SmallVector<ModelOp>> models = getModels(module);
    if (failed(models))
      return signalPassFailure();
    for (ModelOp model : *models) {
      Block &body = model.getBody().front();
      if (!body.getOps<UnitOp>().empty() ||
          !body.getOps<BackwardOp>().empty()) {
        model.emitOpError()
            << "already has units or a backward: wrap a forward-only model "
               "written without units";
        return signalPassFailure();
      }
      // Inputs and params declare values from nothing: first, in order, so
      // that a unit made where its layer starts can take any of them.
      Operation *before = &body.front();
      for (Operation &op : llvm::make_early_inc_range(body))
        if (isa<InputOp, ParamOp>(op)) {
          if (&op == before)
            before = op.getNextNode();
          else
            op.moveBefore(before);
        }
      SmallVector<Layer> layers = findLayers(body);
      // min-params: merge consecutive layers until each holds enough.
      SmallVector<Layer> units;
      for (Layer &layer : layers) {
        if (minParams == 0 || units.empty() ||
            units.back().numParams() >= minParams) {
          units.push_back(std::move(layer));
          continue;
        }
        // Only contiguous layers merge: nothing of the root between them.
        if (units.back().ops.back()->getNextNode() != layer.ops.front() &&
            llvm::any_of(llvm::make_range(
                             Block::iterator(units.back().ops.back()->getNextNode()),
                             Block::iterator(layer.ops.front())),
                         [](Operation &op) { return !isa<ParamOp>(op); })) {
          units.push_back(std::move(layer));
          continue;
        }
        units.back().ops.append(layer.ops.begin(), layer.ops.end());
        units.back().params.insert(layer.params.begin(), layer.params.end());
      }
      if (minParams > 0 && !units.empty() &&
          units.back().numParams() < minParams)
        units.pop_back(); // the remainder stays in the root

      // Each unit is named by its params' prefix; one without, or whose
      // prefix an earlier unit took, is "unit.<i>", unless a prefix is
      // that too (a param named "unit.1.weight"): then "unit.<i>.<k>".
      std::vector<std::string> preferred;
      llvm::StringSet<> taken;
      for (const auto &unit : units)
        taken.insert(preferred.emplace_back(unitName(unit)));
      llvm::StringSet<> names;
      for (auto [i, unit] : llvm::enumerate(units)) {
        std::string name = preferred[i];
        if (name.empty() || names.contains(name)) {
          name = "unit." + std::to_string(i);
          for (int k = 1; taken.contains(name) || names.contains(name); ++k)
            name = "unit." + std::to_string(i) + "." + std::to_string(k);
        }
        names.insert(name);
        outline(unit, name);
      }
    }
  }
};

} // namespace
