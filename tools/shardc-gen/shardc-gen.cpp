//===- shardc-gen.cpp - Generate train IR for MLP and GPT-2 models --------===//
//
// Writes a `builtin.module` holding one `train.model` to stdout: an MLP
// classifier (`mlp`) or a GPT-2 language model with nanoGPT's parameter names
// and initialization (`gpt`). The first line is a comment summarising the
// model and its parameter count. Bad arguments exit with code 2 and print
// nothing to stdout.
//
//===----------------------------------------------------------------------===//

#include "shardc/Dialect/Train/IR/TrainDialect.h"
#include "shardc/Dialect/Train/IR/TrainOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

using namespace mlir;
using namespace shardc::train;

namespace {

/// Exit codes: 2 for anything the user got wrong, 1 for a bug in this tool.
enum ExitCode : int { ExitSuccess = 0, ExitInternalError = 1, ExitUsage = 2 };

/// Sizes end up in i32 token ids, targets and positions, and their products
/// in int64 element counts.
constexpr int64_t kMaxSize = std::numeric_limits<int32_t>::max();
/// Bounds the IR built (about 20 ops a layer) so that a typo cannot exhaust
/// memory.
constexpr int64_t kMaxLayers = 10000;
/// AdamW's betas: torch's defaults for the MLP, GPT-2's (0.95) for the GPT.
constexpr double kBeta1 = 0.9, kMlpBeta2 = 0.999, kGptBeta2 = 0.95;

//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//

llvm::cl::OptionCategory genCategory("shardc-gen options");

llvm::cl::opt<std::string> modelKind(llvm::cl::Positional,
                                     llvm::cl::desc("<mlp|gpt>"),
                                     llvm::cl::cat(genCategory));

llvm::cl::opt<std::string>
    sizesOpt("sizes",
             llvm::cl::desc("mlp: layer widths, input first and classes last "
                            "(default 64,256,256,10)"),
             llvm::cl::value_desc("n,n,..."), llvm::cl::cat(genCategory));

llvm::cl::opt<int64_t>
    layersOpt("layers", llvm::cl::desc("gpt: transformer blocks (default 2)"),
              llvm::cl::value_desc("n"), llvm::cl::init(2),
              llvm::cl::cat(genCategory));
llvm::cl::opt<int64_t>
    hiddenOpt("hidden", llvm::cl::desc("gpt: embedding width (default 64)"),
              llvm::cl::value_desc("n"), llvm::cl::init(64),
              llvm::cl::cat(genCategory));
llvm::cl::opt<int64_t> headsOpt(
    "heads",
    llvm::cl::desc("gpt: attention heads, dividing --hidden (default 4)"),
    llvm::cl::value_desc("n"), llvm::cl::init(4), llvm::cl::cat(genCategory));
llvm::cl::opt<int64_t>
    vocabOpt("vocab", llvm::cl::desc("gpt: vocabulary size (default 256)"),
             llvm::cl::value_desc("n"), llvm::cl::init(256),
             llvm::cl::cat(genCategory));
llvm::cl::opt<int64_t> padVocabOpt(
    "pad-vocab",
    llvm::cl::desc("gpt: pad the token embedding's rows, and so the logits, "
                   "to a multiple of n; the loss ignores the padding "
                   "(default 1: none; 128 turns GPT-2's 50257 into llm.c's "
                   "50304)"),
    llvm::cl::value_desc("n"), llvm::cl::init(1), llvm::cl::cat(genCategory));
llvm::cl::opt<int64_t>
    seqOpt("seq", llvm::cl::desc("gpt: sequence length (default 32)"),
           llvm::cl::value_desc("n"), llvm::cl::init(32),
           llvm::cl::cat(genCategory));

llvm::cl::opt<int64_t>
    batchOpt("batch",
             llvm::cl::desc("global batch (default 32 for mlp, 4 for gpt)"),
             llvm::cl::value_desc("n"), llvm::cl::cat(genCategory));
llvm::cl::opt<std::string>
    dtypeOpt("dtype",
             llvm::cl::desc("element type of params and activations (default "
                            "f32)"),
             llvm::cl::value_desc("f32|bf16"), llvm::cl::init("f32"),
             llvm::cl::cat(genCategory));
llvm::cl::opt<double>
    lrOpt("lr",
          llvm::cl::desc("AdamW learning rate (default 1e-3 for mlp, 6e-4 for "
                         "gpt)"),
          llvm::cl::cat(genCategory));
llvm::cl::opt<double>
    epsOpt("eps", llvm::cl::desc("AdamW epsilon (default 1e-8)"),
           llvm::cl::init(1e-8), llvm::cl::cat(genCategory));
llvm::cl::opt<int64_t>
    warmupOpt("warmup",
              llvm::cl::desc("learning-rate schedule: linear warm-up steps "
                             "(default 0)"),
              llvm::cl::init(0), llvm::cl::cat(genCategory));
llvm::cl::opt<int64_t> decayStepsOpt(
    "decay-steps",
    llvm::cl::desc("learning-rate schedule: the step where the cosine decay "
                   "reaches --min-lr (default 0: no decay)"),
    llvm::cl::init(0), llvm::cl::cat(genCategory));
llvm::cl::opt<double>
    minLrOpt("min-lr",
             llvm::cl::desc("learning-rate schedule: the rate after "
                            "--decay-steps (default 0)"),
             llvm::cl::init(0), llvm::cl::cat(genCategory));
llvm::cl::opt<int64_t> decayMinRankOpt(
    "decay-min-rank",
    llvm::cl::desc("apply the weight decay only to params of this rank or "
                   "more (2: llm.c's and nanoGPT's groups, no decay for "
                   "biases and layer norms; default 0: every param)"),
    llvm::cl::init(0), llvm::cl::cat(genCategory));
llvm::cl::opt<double> maxGradNormOpt(
    "max-grad-norm",
    llvm::cl::desc("clip gradients to this global L2 norm before AdamW, as "
                   "torch.nn.utils.clip_grad_norm_ (default 0: no clipping)"),
    llvm::cl::init(0), llvm::cl::cat(genCategory));
llvm::cl::opt<double>
    weightDecayOpt("weight-decay",
                   llvm::cl::desc("AdamW weight decay (default 0.01 for mlp, "
                                  "0.1 for gpt)"),
                   llvm::cl::cat(genCategory));

/// Reports a usage error on stderr; returns the exit code to use.
int usageError(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "shardc-gen") << message << "\n";
  return ExitUsage;
}

std::string flag(const llvm::cl::Option &opt) {
  return ("--" + opt.ArgStr).str();
}

/// Refuses a flag given more than once: cl keeps the last value, which may
/// not be the one meant (shardc and the executables refuse a flag given
/// twice with two values). Reports the first such flag by name.
bool rejectRepeated() {
  std::vector<std::string> repeated;
  for (const auto &entry : llvm::cl::getRegisteredOptions())
    if (llvm::is_contained(entry.second->Categories, &genCategory) &&
        entry.second->getNumOccurrences() > 1)
      repeated.push_back(flag(*entry.second) + " given " +
                         std::to_string(entry.second->getNumOccurrences()) +
                         " times: give it once");
  if (repeated.empty())
    return true;
  usageError(*llvm::min_element(repeated));
  return false;
}

/// Checks that a size is in [1, max]; prints the error and returns false
/// otherwise.
bool checkSize(const llvm::Twine &what, int64_t value, int64_t max = kMaxSize) {
  if (value <= 0) {
    usageError(what + " must be positive, got " + llvm::Twine(value));
    return false;
  }
  if (value > max) {
    usageError(what + " must be at most " + llvm::Twine(max) + ", got " +
               llvm::Twine(value));
    return false;
  }
  return true;
}

/// Parses `--sizes`: at least two positive integers separated by commas.
std::optional<SmallVector<int64_t>> parseSizes(StringRef text) {
  SmallVector<StringRef> parts;
  text.split(parts, ',');
  SmallVector<int64_t> sizes;
  for (StringRef part : parts) {
    int64_t value;
    if (part.trim().getAsInteger(10, value)) {
      usageError("--sizes entry '" + part + "' is not an integer (in '" + text +
                 "')");
      return std::nullopt;
    }
    if (value <= 0 || value > kMaxSize) {
      usageError("--sizes entry " + llvm::Twine(value) + " must be " +
                 (value <= 0 ? llvm::Twine("positive")
                             : "at most " + llvm::Twine(kMaxSize)) +
                 " (in '" + text + "')");
      return std::nullopt;
    }
    sizes.push_back(value);
  }
  if (sizes.size() < 2) {
    usageError("--sizes needs at least 2 entries (input and output width), "
               "got '" +
               text + "'");
    return std::nullopt;
  }
  if (static_cast<int64_t>(sizes.size()) - 1 > kMaxLayers) {
    usageError("--sizes must have at most " + llvm::Twine(kMaxLayers + 1) +
               " entries, got " + llvm::Twine(sizes.size()));
    return std::nullopt;
  }
  return sizes;
}

/// Checks an optimizer hyper-parameter given on the command line.
bool checkHyperParameter(const llvm::cl::Option &opt, double value,
                         bool allowZero) {
  // The runtime computes in f32: a positive value must stay positive there
  // (at least its smallest normal), and none may overflow it.
  constexpr double kMin = std::numeric_limits<float>::min(),
                   kMax = std::numeric_limits<float>::max();
  bool ok = std::isfinite(value) && value <= kMax &&
            (allowZero ? value >= 0 : value >= kMin);
  if (!ok) {
    std::string got;
    llvm::raw_string_ostream os(got);
    printShortest(os, value);
    usageError(flag(opt) + " must be a finite f32 " +
               (allowZero ? ">= 0 (at most 3.4e38)"
                          : "> 0 (1.17549435e-38 to 3.4e38)") +
               ", got " + got);
  }
  return ok;
}

/// Errors out on an option that the chosen model does not use, rather than
/// silently ignoring a likely mistake.
bool rejectUnused(ArrayRef<const llvm::cl::Option *> options, StringRef model) {
  for (const llvm::cl::Option *opt : options) {
    if (opt->getNumOccurrences()) {
      usageError(flag(*opt) + " does not apply to model '" + model + "'");
      return false;
    }
  }
  return true;
}

//===----------------------------------------------------------------------===//
// IR construction
//===----------------------------------------------------------------------===//

/// Builds the ops of one `train.model`, inferring each result type from the
/// operands the way the op verifiers check it.
class ModelBuilder {
public:
  ModelBuilder(MLIRContext *context, Type floatType)
      : context(context), builder(context), loc(builder.getUnknownLoc()),
        floatType(floatType) {}

  /// Creates the module and the model, leaving the insertion point in the
  /// model body.
  OwningOpRef<ModuleOp> beginModel(StringRef name, int64_t batch,
                                   AdamWAttr optimizer) {
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    builder.setInsertionPointToEnd(module->getBody());
    auto model = ModelOp::create(builder, loc, name,
                                 static_cast<uint64_t>(batch), /*split=*/nullptr,
                                 optimizer);
    builder.setInsertionPointToEnd(&model.getBody().emplaceBlock());
    return module;
  }

  RankedTensorType floatTensor(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, floatType);
  }
  RankedTensorType indexTensor(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, builder.getI32Type());
  }

  Attribute zeros() { return ZerosInitAttr::get(context); }
  Attribute ones() { return OnesInitAttr::get(context); }
  Attribute normal(double std) {
    return NormalInitAttr::get(context, APFloat(0.0), APFloat(std));
  }
  Attribute uniform(double bound) {
    return UniformInitAttr::get(context, APFloat(-bound), APFloat(bound));
  }

  Value input(StringRef name, RankedTensorType type) {
    return InputOp::create(builder, loc, type, name);
  }
  Value param(StringRef name, ArrayRef<int64_t> shape, Attribute init) {
    return ParamOp::create(builder, loc, floatTensor(shape), name,
                           /*frozen=*/false, init);
  }

  /// `x W^T + b` with `weight` `[out, in]`; `bias` may be null.
  Value linear(Value x, Value weight, Value bias) {
    SmallVector<int64_t> shape(shapeOf(x).drop_back());
    shape.push_back(shapeOf(weight).front());
    return LinearOp::create(builder, loc, floatTensor(shape), x, weight, bias);
  }
  Value gelu(Value x) { return GeluOp::create(builder, loc, x); }
  Value add(Value lhs, Value rhs) {
    return AddOp::create(builder, loc, lhs.getType(), lhs, rhs);
  }
  Value layerNorm(Value x, Value weight, Value bias) {
    // nn.LayerNorm's default eps, as GPT-2 uses.
    return LayerNormOp::create(builder, loc, x.getType(), x, weight, bias,
                               APFloat(1e-5));
  }
  Value embedding(Value ids, Value table) {
    SmallVector<int64_t> shape(shapeOf(ids));
    shape.push_back(shapeOf(table).back());
    return EmbeddingOp::create(builder, loc, floatTensor(shape), ids, table);
  }
  Value iota(int64_t n) { return IotaOp::create(builder, loc, indexTensor(n)); }
  Value attention(Value qkv, int64_t heads) {
    SmallVector<int64_t> shape(shapeOf(qkv));
    shape.back() /= 3;
    // Without lse: --train-autodiff adds it.
    return AttentionOp::create(builder, loc, floatTensor(shape), Type(), qkv,
                               static_cast<uint64_t>(heads))
        .getResult();
  }
  /// The loss over the first `classes` logits of a position (all of them
  /// where classes is the last dimension).
  Value crossEntropy(Value logits, Value targets, int64_t classes) {
    // The loss is an f32 scalar whatever the activations' element type.
    auto scalar = RankedTensorType::get({}, builder.getF32Type());
    IntegerAttr classesAttr;
    if (classes != shapeOf(logits).back())
      classesAttr = builder.getI64IntegerAttr(classes);
    return CrossEntropyOp::create(builder, loc, scalar, logits, targets,
                                  classesAttr);
  }

  /// Builds `train.unit name (input) -> resultType`, its body given by `body`
  /// from the unit's block argument to the value yielded.
  Value unit(StringRef name, Value input, Type resultType,
             llvm::function_ref<Value(Value)> body) {
    auto unit = UnitOp::create(builder, loc, name, resultType, input);
    OpBuilder::InsertionGuard guard(builder);
    Block &block = unit.getBody().front();
    builder.setInsertionPointToEnd(&block);
    Value result = body(block.getArgument(0));
    YieldOp::create(builder, loc, result);
    return unit.getResult(0);
  }

  void finish(Value loss) { ReturnOp::create(builder, loc, loss); }

private:
  static ArrayRef<int64_t> shapeOf(Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  }

  MLIRContext *context;
  OpBuilder builder;
  Location loc;
  Type floatType;
};

/// An MLP classifier: Linear layers of widths `sizes`, GELU between them, as
/// `nn.Sequential` of `nn.Linear` with PyTorch's default initialization.
OwningOpRef<ModuleOp> buildMlp(ModelBuilder &b, ArrayRef<int64_t> sizes,
                               int64_t batch, AdamWAttr optimizer) {
  OwningOpRef<ModuleOp> module = b.beginModel("mlp", batch, optimizer);
  Value x = b.input("x", b.floatTensor({batch, sizes.front()}));
  Value y = b.input("y", b.indexTensor({batch}));
  size_t numLayers = sizes.size() - 1;
  for (size_t i = 0; i < numLayers; ++i) {
    int64_t in = sizes[i], out = sizes[i + 1];
    std::string name = ("layers." + llvm::Twine(i)).str();
    x = b.unit(name, x, b.floatTensor({batch, out}), [&](Value a) {
      // nn.Linear: weight and bias both from U(-1/sqrt(in), 1/sqrt(in)).
      double bound = 1.0 / std::sqrt(static_cast<double>(in));
      Value w = b.param(name + ".weight", {out, in}, b.uniform(bound));
      Value bias = b.param(name + ".bias", {out}, b.uniform(bound));
      Value h = b.linear(a, w, bias);
      return i + 1 < numLayers ? b.gelu(h) : h;
    });
  }
  b.finish(b.crossEntropy(x, y, sizes.back()));
  return module;
}

struct GptConfig {
  int64_t layers, hidden, heads, vocab, padVocab, seq, batch;

  /// Rows of the token embedding: vocab rounded up to a multiple of
  /// padVocab.
  int64_t paddedVocab() const {
    return llvm::divideCeil(vocab, padVocab) * padVocab;
  }
};

/// GPT-2 as nanoGPT's `GPT`: parameter names of its state dict, weights
/// `[out, in]`, N(0, 0.02) weights with the residual projections scaled by
/// 1/sqrt(2 layers), zero biases, LM head tied to the token embedding. With
/// padVocab, the embedding has paddedVocab() rows, as llm.c's: no token
/// reads the padding rows and the loss ignores their logits, so they only
/// make the vocabulary-wide GEMMs' rows aligned.
OwningOpRef<ModuleOp> buildGpt(ModelBuilder &b, const GptConfig &cfg,
                               AdamWAttr optimizer) {
  const int64_t batch = cfg.batch, seq = cfg.seq, c = cfg.hidden;
  const double initStd = 0.02;
  const double projStd =
      initStd / std::sqrt(2.0 * static_cast<double>(cfg.layers));
  OwningOpRef<ModuleOp> module = b.beginModel("gpt", batch, optimizer);

  Value tokens = b.input("tokens", b.indexTensor({batch, seq}));
  Value targets = b.input("targets", b.indexTensor({batch, seq}));
  Value wte = b.param("transformer.wte.weight", {cfg.paddedVocab(), c},
                      b.normal(initStd));
  Value wpe = b.param("transformer.wpe.weight", {seq, c}, b.normal(initStd));
  Value tokEmb = b.embedding(tokens, wte);
  Value posEmb = b.embedding(b.iota(seq), wpe);
  Value x = b.add(tokEmb, posEmb);

  for (int64_t i = 0; i < cfg.layers; ++i) {
    std::string name = ("transformer.h." + llvm::Twine(i)).str();
    x = b.unit(name, x, x.getType(), [&](Value in) {
      auto p = [&](StringRef suffix, ArrayRef<int64_t> shape, Attribute init) {
        return b.param(name + "." + suffix.str(), shape, init);
      };
      // Declared first, in the order of nanoGPT's state dict (arguments
      // would be evaluated in an unspecified order).
      Value ln1W = p("ln_1.weight", {c}, b.ones());
      Value ln1B = p("ln_1.bias", {c}, b.zeros());
      Value attnW = p("attn.c_attn.weight", {3 * c, c}, b.normal(initStd));
      Value attnB = p("attn.c_attn.bias", {3 * c}, b.zeros());
      Value attnProjW = p("attn.c_proj.weight", {c, c}, b.normal(projStd));
      Value attnProjB = p("attn.c_proj.bias", {c}, b.zeros());
      Value ln2W = p("ln_2.weight", {c}, b.ones());
      Value ln2B = p("ln_2.bias", {c}, b.zeros());
      Value fcW = p("mlp.c_fc.weight", {4 * c, c}, b.normal(initStd));
      Value fcB = p("mlp.c_fc.bias", {4 * c}, b.zeros());
      Value mlpProjW = p("mlp.c_proj.weight", {c, 4 * c}, b.normal(projStd));
      Value mlpProjB = p("mlp.c_proj.bias", {c}, b.zeros());

      Value qkv = b.linear(b.layerNorm(in, ln1W, ln1B), attnW, attnB);
      Value att = b.attention(qkv, cfg.heads);
      Value x1 = b.add(in, b.linear(att, attnProjW, attnProjB));
      Value h = b.gelu(b.linear(b.layerNorm(x1, ln2W, ln2B), fcW, fcB));
      Value mlp = b.linear(h, mlpProjW, mlpProjB);
      return b.add(x1, mlp);
    });
  }

  Value lnfW = b.param("transformer.ln_f.weight", {c}, b.ones());
  Value lnfB = b.param("transformer.ln_f.bias", {c}, b.zeros());
  Value lnf = b.layerNorm(x, lnfW, lnfB);
  // The LM head reads the token embedding: nanoGPT ties the two weights.
  Value logits = b.linear(lnf, wte, /*bias=*/Value());
  b.finish(b.crossEntropy(logits, targets, cfg.vocab));
  return module;
}

/// Element count of every `train.param` actually built; nullopt when the sum
/// does not fit in int64.
std::optional<int64_t> countParams(ModelOp model) {
  std::optional<int64_t> total = 0;
  model.walk([&](ParamOp param) {
    std::optional<int64_t> n = 1;
    for (int64_t dim : param.getType().getShape())
      n = n ? llvm::checkedMul(*n, dim) : std::nullopt;
    total = total && n ? llvm::checkedAdd(*total, *n) : std::nullopt;
  });
  return total;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  llvm::cl::HideUnrelatedOptions(genCategory);
  // With an error stream, parse errors return false instead of exiting 1.
  if (!llvm::cl::ParseCommandLineOptions(
          argc, argv,
          "shardc-gen: writes the train IR of a model to stdout\n\n"
          "  shardc-gen mlp [--sizes 64,256,256,10] [--batch 32]\n"
          "  shardc-gen gpt [--layers 2 --hidden 64 --heads 4 --vocab 256 "
          "--pad-vocab 1 --seq 32 --batch 4]\n",
          &llvm::errs()))
    return ExitUsage;
  if (!rejectRepeated())
    return ExitUsage;

  if (modelKind.empty())
    return usageError("missing model name: expected 'mlp' or 'gpt'");
  bool isMlp = modelKind == "mlp";
  if (!isMlp && modelKind != "gpt")
    return usageError("unknown model '" + modelKind +
                      "': expected 'mlp' or 'gpt'");

  MLIRContext context;
  context.loadDialect<TrainDialect>();
  Type floatType;
  if (dtypeOpt == "f32")
    floatType = Float32Type::get(&context);
  else if (dtypeOpt == "bf16")
    floatType = BFloat16Type::get(&context);
  else
    return usageError("unknown --dtype '" + dtypeOpt +
                      "': expected 'f32' or 'bf16'");

  int64_t batch = batchOpt.getNumOccurrences() ? int64_t(batchOpt)
                                               : int64_t(isMlp ? 32 : 4);
  double lr = lrOpt.getNumOccurrences() ? lrOpt : (isMlp ? 1e-3 : 6e-4);
  double weightDecay = weightDecayOpt.getNumOccurrences()
                           ? weightDecayOpt
                           : (isMlp ? 0.01 : 0.1);
  if (!checkSize("--batch", batch) ||
      !checkHyperParameter(lrOpt, lr, /*allowZero=*/false) ||
      !checkHyperParameter(epsOpt, epsOpt, /*allowZero=*/false) ||
      !checkHyperParameter(weightDecayOpt, weightDecay, /*allowZero=*/true))
    return ExitUsage;
  // The schedule's and clipping's rules are the optimizer attribute's
  // verifier's.
  AdamWAttr optimizer;
  {
    std::string why;
    ScopedDiagnosticHandler capture(&context, [&](Diagnostic &diag) {
      why = diag.str();
      return success();
    });
    optimizer = AdamWAttr::getChecked(
        [&] { return emitError(UnknownLoc::get(&context)); }, &context,
        APFloat(lr), APFloat(kBeta1), APFloat(isMlp ? kMlpBeta2 : kGptBeta2),
        APFloat(epsOpt.getValue()), APFloat(weightDecay), warmupOpt.getValue(),
        decayStepsOpt.getValue(), APFloat(minLrOpt.getValue()),
        APFloat(maxGradNormOpt.getValue()), decayMinRankOpt.getValue());
    if (!optimizer)
      return usageError("the optimizer (--warmup, --decay-steps, --min-lr, "
                        "--max-grad-norm, --decay-min-rank): " +
                        why);
  }

  ModelBuilder builder(&context, floatType);
  OwningOpRef<ModuleOp> module;
  std::string summary;
  if (isMlp) {
    if (!rejectUnused({&layersOpt, &hiddenOpt, &headsOpt, &vocabOpt,
                       &padVocabOpt, &seqOpt},
                      "mlp"))
      return ExitUsage;
    std::optional<SmallVector<int64_t>> sizes = parseSizes(
        sizesOpt.getNumOccurrences() ? StringRef(sizesOpt) : "64,256,256,10");
    if (!sizes)
      return ExitUsage;
    module = buildMlp(builder, *sizes, batch, optimizer);
    llvm::raw_string_ostream os(summary);
    os << "mlp: sizes ";
    llvm::interleave(*sizes, os, ",");
    os << ", batch " << batch;
  } else {
    if (!rejectUnused({&sizesOpt}, "gpt"))
      return ExitUsage;
    GptConfig cfg{layersOpt,   hiddenOpt, headsOpt, vocabOpt,
                  padVocabOpt, seqOpt,    batch};
    if (!checkSize("--layers", cfg.layers, kMaxLayers) ||
        !checkSize("--hidden", cfg.hidden) ||
        !checkSize("--heads", cfg.heads) || !checkSize("--vocab", cfg.vocab) ||
        !checkSize("--pad-vocab", cfg.padVocab) ||
        !checkSize("--vocab rounded up to --pad-vocab", cfg.paddedVocab()) ||
        !checkSize("--seq", cfg.seq))
      return ExitUsage;
    if (cfg.hidden % cfg.heads != 0)
      return usageError("--hidden " + llvm::Twine(cfg.hidden) +
                        " is not divisible by --heads " +
                        llvm::Twine(cfg.heads));
    module = buildGpt(builder, cfg, optimizer);
    summary =
        ("gpt: " + llvm::Twine(cfg.layers) + " layers, hidden " +
         llvm::Twine(cfg.hidden) + ", " + llvm::Twine(cfg.heads) +
         " heads, vocab " + llvm::Twine(cfg.vocab) +
         (cfg.paddedVocab() == cfg.vocab
              ? ""
              : " padded to " + std::to_string(cfg.paddedVocab())) +
         ", seq " + llvm::Twine(cfg.seq) + ", batch " + llvm::Twine(batch))
            .str();
  }

  auto model = *module->getOps<ModelOp>().begin();
  std::optional<int64_t> numParams = countParams(model);
  if (!numParams)
    return usageError("the model has more than " +
                      llvm::Twine(std::numeric_limits<int64_t>::max()) +
                      " parameters");
  if (*numParams > ModelOp::kMaxElements)
    return usageError(summary + " has " + llvm::Twine(*numParams) +
                      " parameters, past the 2^40 a model may hold");

  // A tensor past the dialect's 2^40 elements comes of the sizes asked for.
  std::string tooLarge;
  model.walk([&](Operation *op) {
    for (Type type : op->getResultTypes()) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      int64_t elements = 1;
      if (tensor && llvm::any_of(tensor.getShape(), [&](int64_t size) {
            return llvm::MulOverflow(elements, size, elements) ||
                   elements > ModelOp::kMaxElements;
          })) {
        llvm::raw_string_ostream(tooLarge) << tensor;
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  if (!tooLarge.empty())
    return usageError(summary + " makes a " + tooLarge +
                      ", past the 2^40 elements a tensor may hold");

  // A verifier failure here is a bug in the generator, not in the arguments.
  if (failed(verify(*module))) {
    llvm::WithColor::error(llvm::errs(), "shardc-gen")
        << "generated IR does not verify\n";
    return ExitInternalError;
  }
  // The root unit (the model body) counts as a unit.
  int64_t numUnits = 1 + llvm::range_size(model.getBody().getOps<UnitOp>());

  llvm::outs() << "// " << summary << ": " << *numParams << " parameters in "
               << numUnits << " units\n";
  module->print(llvm::outs());
  return ExitSuccess;
}
