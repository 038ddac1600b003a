//===- Fuse.cpp - Fuse adjacent ops into the fused ops --------------------===//

#include "shardc/Dialect/Train/Transforms/Passes.h"
#include "shardc/Support/PassOptions.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"

#include <functional>

#define DEBUG_TYPE "train-fuse"

namespace shardc::train {
#define GEN_PASS_DEF_TRAINFUSEPASS
#include "shardc/Dialect/Train/Transforms/Passes.h.inc"
} // namespace shardc::train

using namespace mlir;
using namespace shardc::train;

namespace {

/// Whether `second` can fuse with `first`, the fused op taking `first`'s
/// place: same block, and `operands` (second's others) defined before it.
bool canFuseAt(Operation *first, Operation *second, ValueRange operands,
               DominanceInfo &dominance) {
  if (first->getBlock() != second->getBlock())
    return false;
  return llvm::all_of(
      operands, [&](Value v) { return dominance.properlyDominates(v, first); });
}

/// `v` as `type`'s shape (a view), or `v` itself when it has it.
Value reshapeTo(OpBuilder &b, Value v, Type type) {
  if (v.getType() == type)
    return v;
  return ReshapeOp::create(b, v.getLoc(), cast<RankedTensorType>(type), v);
}

/// A fused op recomputes a forward where its parts did.
void keepRecomputed(Operation *fused,
                    std::initializer_list<Operation *> parts) {
  if (llvm::all_of(parts, [](Operation *part) {
        return part->hasAttr(kRecomputedAttrName);
      }))
    fused->setAttr(kRecomputedAttrName, UnitAttr::get(fused->getContext()));
}

/// linear -> gelu: train.linear_gelu.
void fuseLinearGelu(GeluOp gelu, DominanceInfo &dominance) {
  auto linear = gelu.getInput().getDefiningOp<LinearOp>();
  if (!linear || !canFuseAt(linear, gelu, {}, dominance))
    return;
  OpBuilder b(linear);
  Type type = linear.getResult().getType();
  auto fused = LinearGeluOp::create(
      b, b.getFusedLoc({linear.getLoc(), gelu.getLoc()}), type, type,
      linear.getInput(), linear.getWeight(), linear.getBias());
  keepRecomputed(fused, {linear, gelu});
  gelu.getResult().replaceAllUsesWith(fused.getResult());
  gelu.erase();
  linear.getResult().replaceAllUsesWith(fused.getPreactivation());
  linear.erase();
}

/// add -> layernorm: train.add_layernorm.
void fuseAddLayerNorm(LayerNormOp norm, DominanceInfo &dominance) {
  auto add = norm.getInput().getDefiningOp<AddOp>();
  if (!add || add.getLhs().getType() != add.getRhs().getType() ||
      !canFuseAt(add, norm, {norm.getWeight(), norm.getBias()}, dominance))
    return;
  OpBuilder b(add);
  Type type = add.getResult().getType();
  auto fused = AddLayerNormOp::create(
      b, b.getFusedLoc({add.getLoc(), norm.getLoc()}), type,
      norm.getResult().getType(), add.getLhs(), add.getRhs(), norm.getWeight(),
      norm.getBias(), norm.getEpsAttr());
  keepRecomputed(fused, {add, norm});
  norm.getResult().replaceAllUsesWith(fused.getResult());
  norm.erase();
  add.getResult().replaceAllUsesWith(fused.getSum());
  add.erase();
}

/// matmul (-> reshape) -> gelu_grad: train.matmul_gelu_grad.
void fuseMatmulGeluGrad(GeluGradOp geluGrad, DominanceInfo &dominance) {
  Value grad = geluGrad.getGrad();
  auto view = grad.getDefiningOp<ReshapeOp>();
  if (view) {
    if (!view.getResult().hasOneUse())
      return;
    grad = view.getInput();
  }
  auto matmul = grad.getDefiningOp<MatmulOp>();
  if (!matmul || !matmul.getResult().hasOneUse() ||
      matmul.getResult().getType().getRank() != 2 ||
      !canFuseAt(matmul, geluGrad, {geluGrad.getInput()}, dominance))
    return;
  OpBuilder b(matmul);
  Location loc = b.getFusedLoc({matmul.getLoc(), geluGrad.getLoc()});
  Type productType = matmul.getResult().getType();
  auto fused = MatmulGeluGradOp::create(
      b, loc, productType, matmul.getLhs(), matmul.getRhs(),
      reshapeTo(b, geluGrad.getInput(), productType),
      matmul.getTransposeLhsAttr(), matmul.getTransposeRhsAttr());
  geluGrad.getResult().replaceAllUsesWith(
      reshapeTo(b, fused.getResult(), geluGrad.getResult().getType()));
  geluGrad.erase();
  if (view)
    view.erase();
  matmul.erase();
}

/// The matmul lhs^T rhs whose lhs is `grad` as a matrix [K, N] (itself, or a
/// reshape of it), or null.
MatmulOp transposedMatmulOf(Value grad, int64_t n) {
  auto isLhs = [&](Value matrix) -> MatmulOp {
    auto type = cast<RankedTensorType>(matrix.getType());
    if (type.getRank() != 2 || type.getDimSize(1) != n)
      return nullptr;
    for (Operation *user : matrix.getUsers())
      if (auto matmul = dyn_cast<MatmulOp>(user);
          matmul && matmul.getLhs() == matrix && matmul.getTransposeLhs() &&
          matmul.getLhs() != matmul.getRhs())
        return matmul;
    return nullptr;
  };
  if (MatmulOp matmul = isLhs(grad))
    return matmul;
  for (Operation *user : grad.getUsers())
    if (auto view = dyn_cast<ReshapeOp>(user))
      if (MatmulOp matmul = isLhs(view.getResult()))
        return matmul;
  return nullptr;
}

/// sum_to [.., N] -> [N] and matmul (reshape(grad))^T rhs of the same
/// gradient: train.matmul_bias_grad, a linear's weight and bias gradients,
/// in the place of whichever comes first.
void fuseMatmulBiasGrad(SumToOp sum, DominanceInfo &dominance) {
  Value grad = sum.getInput();
  auto gradType = cast<RankedTensorType>(grad.getType());
  auto sumType = cast<RankedTensorType>(sum.getResult().getType());
  if (gradType.getRank() < 2 || sumType.getRank() != 1 ||
      sumType.getDimSize(0) != gradType.getShape().back())
    return;
  MatmulOp matmul = transposedMatmulOf(grad, sumType.getDimSize(0));
  if (!matmul || matmul->getBlock() != sum->getBlock())
    return;
  Operation *first = matmul, *second = sum;
  if (sum->isBeforeInBlock(matmul))
    std::swap(first, second);
  if (!canFuseAt(first, second, {grad, matmul.getRhs()}, dominance))
    return;
  OpBuilder b(first);
  Value lhs = matmul.getLhs();
  if (lhs.getDefiningOp() && !dominance.properlyDominates(lhs, first))
    lhs = reshapeTo(b, grad, lhs.getType()); // the view comes after sum_to
  auto fused = MatmulBiasGradOp::create(
      b, b.getFusedLoc({matmul.getLoc(), sum.getLoc()}),
      matmul.getResult().getType(), sum.getResult().getType(), lhs,
      matmul.getRhs(), matmul.getTransposeLhsAttr(),
      matmul.getTransposeRhsAttr());
  Operation *view = matmul.getLhs().getDefiningOp<ReshapeOp>();
  matmul.getResult().replaceAllUsesWith(fused.getResult());
  matmul.erase();
  sum.getResult().replaceAllUsesWith(fused.getBiasGrad());
  sum.erase();
  if (view && view->use_empty())
    view->erase();
}

/// layernorm_grad -> add: train.layernorm_grad_add.
void fuseLayerNormGradAdd(LayerNormGradOp normGrad, DominanceInfo &dominance) {
  Value inputGrad = normGrad.getInputGrad();
  if (!inputGrad.hasOneUse())
    return;
  auto add = dyn_cast<AddOp>(*inputGrad.getUsers().begin());
  if (!add || add.getLhs().getType() != add.getRhs().getType())
    return;
  Value addend = add.getLhs() == inputGrad ? add.getRhs() : add.getLhs();
  if (!canFuseAt(normGrad, add, {addend}, dominance))
    return;
  OpBuilder b(normGrad);
  auto fused = LayerNormGradAddOp::create(
      b, b.getFusedLoc({normGrad.getLoc(), add.getLoc()}),
      normGrad.getResultTypes(), normGrad.getGrad(), normGrad.getInput(),
      normGrad.getWeight(), addend, normGrad.getEpsAttr());
  add.getResult().replaceAllUsesWith(fused.getInputGrad());
  add.erase();
  normGrad.getWeightGrad().replaceAllUsesWith(fused.getWeightGrad());
  normGrad.getBiasGrad().replaceAllUsesWith(fused.getBiasGrad());
  normGrad.erase();
}

/// cross_entropy ... cross_entropy_grad of the same logits:
/// train.cross_entropy_and_grad, in the gradient's place (its seed is
/// defined between the two), where nothing reads the loss before it.
void fuseCrossEntropyAndGrad(CrossEntropyGradOp grad,
                             DominanceInfo &dominance) {
  CrossEntropyOp loss;
  for (Operation *user : grad.getLogits().getUsers()) {
    auto ce = dyn_cast<CrossEntropyOp>(user);
    if (!ce || ce.getTargets() != grad.getTargets() ||
        ce.getNumClasses() != grad.getNumClasses())
      continue;
    if (loss)
      return; // two losses of the same logits: which one is ambiguous
    loss = ce;
  }
  if (!loss || loss->getBlock() != grad->getBlock() ||
      !loss->isBeforeInBlock(grad) ||
      llvm::any_of(loss.getResult().getUsers(), [&](Operation *user) {
        return !dominance.properlyDominates(grad.getOperation(), user);
      }))
    return;
  OpBuilder b(grad);
  auto fused = CrossEntropyAndGradOp::create(
      b, b.getFusedLoc({loss.getLoc(), grad.getLoc()}),
      loss.getResult().getType(), grad.getResult().getType(), grad.getGrad(),
      grad.getLogits(), grad.getTargets(), grad.getClassesAttr());
  loss.getResult().replaceAllUsesWith(fused.getLoss());
  loss.erase();
  grad.getResult().replaceAllUsesWith(fused.getLogitsGrad());
  grad.erase();
}

/// Collects the ops of type Op under `root`, then fuses each: the walk does
/// not see the rewrites.
template <typename Op>
void fuseEach(Operation *root, DominanceInfo &dominance,
              void (*fuse)(Op, DominanceInfo &)) {
  SmallVector<Op> anchors;
  root->walk([&](Op op) { anchors.push_back(op); });
  for (Op op : anchors)
    fuse(op, dominance);
}

struct TrainFusePass
    : shardc::NamedOptionErrors<
          shardc::train::impl::TrainFusePassBase<TrainFusePass>> {
  using NamedOptionErrors::NamedOptionErrors;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(getModels(module)))
      return signalPassFailure();
    DominanceInfo dominance(module);
    // Each fusion by the name of its fused op, in the order they run. Each
    // rewrite erases its anchor and the op before it and creates ops only
    // where one of them was: the remaining anchors and the dominance of
    // values defined elsewhere are untouched.
    std::pair<StringLiteral, std::function<void()>> fusions[] = {
        {"layernorm_grad_add",
         [&] { fuseEach(module, dominance, fuseLayerNormGradAdd); }},
        {"add_layernorm",
         [&] { fuseEach(module, dominance, fuseAddLayerNorm); }},
        {"linear_gelu", [&] { fuseEach(module, dominance, fuseLinearGelu); }},
        {"matmul_gelu_grad",
         [&] { fuseEach(module, dominance, fuseMatmulGeluGrad); }},
        {"matmul_bias_grad",
         [&] { fuseEach(module, dominance, fuseMatmulBiasGrad); }},
        {"cross_entropy_and_grad",
         [&] { fuseEach(module, dominance, fuseCrossEntropyAndGrad); }},
    };
    auto names = llvm::map_range(fusions, [](auto &f) { return f.first; });
    for (const std::string &name : exclude)
      if (!llvm::is_contained(names, name)) {
        module->emitError()
            << "unknown fused op '" << name << "' in exclude: expected one of "
            << llvm::join(names, ", ");
        return signalPassFailure();
      }
    for (auto &[name, fuse] : fusions)
      if (!llvm::is_contained(exclude, name))
        fuse();
  }
};

} // namespace
