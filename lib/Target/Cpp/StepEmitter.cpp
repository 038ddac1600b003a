//===- StepEmitter.cpp - A sharded step as C++ (MPI) or CUDA (NCCL) -------===//
//
// The step becomes straight-line code, and so does its evaluation step
// (shardc-eval-step: its forward and loss, for --eval-every), over the same
// tables of params and inputs: units and backwards are inlined, a
// micro-batch loop becomes a for loop, every value is a pointer. A buffer is
// allocated where BufferLiveness says it is defined and freed after its last
// user; a view (reshape, unpacked slice, region argument, wait) is the
// pointer of the buffer it views, offset where it is a slice.
//
// target=host calls the CPU kernels and non-blocking MPI collectives through
// the runtime. target=cuda enqueues the CUDA kernels on one compute stream
// and calls NCCL itself, each collective on its communicator's stream after
// an event of the compute stream, its wait an event the compute stream
// waits on: the schedule's overlap, with no device-wide synchronisation.
//
//===----------------------------------------------------------------------===//

#include "shardc/Target/Cpp/StepEmitter.h"

#include "shardc/Dialect/Dist/Analysis/BufferLiveness.h"
#include "shardc/Dialect/Dist/Analysis/Ledger.h"
#include "shardc/Dialect/Dist/IR/DistOps.h"
#include "shardc/Dialect/Dist/Transforms/Passes.h"
#include "shardc/Dialect/Train/IR/TrainOps.h"
#include "shardc/InitAll.h"
#include "shardc_rt/shardc_rt.h" // the ABI the emitted code calls

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/Support/IndentedOstream.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <set>
#include <type_traits>

using namespace mlir;
using namespace shardc;
using namespace shardc::dist;
using train::ModelOp;

namespace {

/// A value's tensor type; a token's is the tensor it completes to.
RankedTensorType tensorType(Value v) {
  if (auto token = dyn_cast<TokenType>(v.getType()))
    return token.getResult();
  return cast<RankedTensorType>(v.getType());
}

int64_t numel(Value v) { return tensorType(v).getNumElements(); }

ArrayRef<int64_t> shapeOf(Value v) { return tensorType(v).getShape(); }

std::string cType(Type elementType) {
  if (elementType.isInteger(32))
    return "int32_t";
  return elementType.isBF16() ? "shardc_rt_bf16" : "float";
}

/// The suffix of a kernel on `elementType`: f32, bf16 or i32.
StringRef dtypeSuffix(Type elementType) {
  if (elementType.isInteger(32))
    return "i32";
  return elementType.isBF16() ? "bf16" : "f32";
}

/// The runtime's shardc_rt_dtype of `elementType`.
StringRef dtypeEnum(Type elementType) {
  if (elementType.isInteger(32))
    return "SHARDC_RT_I32";
  return elementType.isBF16() ? "SHARDC_RT_BF16" : "SHARDC_RT_F32";
}

Type elementTypeOf(Value v) { return tensorType(v).getElementType(); }

/// `text` as the inside of a C string literal: `\`, `"` and `?` escaped, and
/// every byte outside printable ASCII as an octal escape, so that no name in
/// the IR can end the literal (or a line) early.
std::string escaped(StringRef text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '\\' || c == '"' || c == '?') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += '\\';
      out += static_cast<char>('0' + (c >> 6));
      out += static_cast<char>('0' + ((c >> 3) & 7));
      out += static_cast<char>('0' + (c & 7));
    }
  }
  return out;
}

/// `text` as a C string literal.
std::string quoted(StringRef text) { return "\"" + escaped(text) + "\""; }

/// `text` for the rest of a `//` comment: escaped, and never ending in a
/// backslash (which would splice the next line into the comment).
std::string commented(StringRef text) {
  std::string out = escaped(text);
  if (!out.empty() && out.back() == '\\')
    out += ' ';
  return out;
}

/// A double as C++ reads it back exactly.
std::string literal(double value) { return llvm::formatv("{0:e17}", value); }

std::string literal(const llvm::APFloat &value) {
  return literal(value.convertToDouble());
}

enum class Target { host, cuda };

class StepEmitter {
public:
  StepEmitter(ModelOp model, MeshOp mesh, Target target, llvm::raw_ostream &os)
      : model(model), mesh(mesh), target(target), os(os) {}

  LogicalResult emit();

private:
  LogicalResult checkLowerable();
  /// `void NAME(shardc_rt_context *ctx, float *loss)` running `body`'s step:
  /// the model's own, or its evaluation step, which share the tables.
  LogicalResult emitFunction(StringRef name, ModelOp body);
  /// The buffer a collective sends from: its input, or a copy cast to the
  /// wire type and (reduce-scatter) padded to the group's equal pieces, of
  /// getStagingBytes; the copy is freed at the wait.
  std::string emitStaging(Operation *op, Value in, Type wire);
  void emitTables();
  /// main(), with what the ledger predicts of the step and of its
  /// evaluation step `eval`.
  void emitMain(const LedgerReport &ledger, ModelOp eval);
  LogicalResult emitBlock(Block &block);
  /// One shardc_rt_adamw_group for a run of updates of what is stored
  /// (isStoredUpdate).
  void emitAdamWGroup(llvm::iterator_range<Block::iterator> run);
  /// Frees the buffers whose last user is `lastUser`.
  void emitFrees(Operation *lastUser);
  LogicalResult emitOp(Operation *op);
  LogicalResult emitCompute(Operation *op);
  /// A collective whose buffers are in place: it sends `count` elements of
  /// its wire type per rank from `source` into `out`.
  struct PreparedCollective {
    Operation *op;
    std::string source, out;
    int64_t count;
    uint32_t mask;
    bool average;
  };
  /// Emits a collective's staging copy and allocates its result.
  PreparedCollective prepareCollective(Operation *op);
  LogicalResult emitCollective(Operation *op);
  /// target=cuda: the NCCL calls of collectives on one communicator, one
  /// NCCL group (one launch) where there are several.
  void emitNcclCollectives(ArrayRef<PreparedCollective> collectives);

  /// "shardc_rt_NAME(" on the host, "shardc_rt_cuda_NAME(K, " on a device.
  std::string kernel(StringRef name) {
    return target == Target::cuda ? ("shardc_rt_cuda_" + name + "(K, ").str()
                                  : ("shardc_rt_" + name + "(").str();
  }
  /// The kernel NAME for the element type of `typed`: NAME_f32 or NAME_bf16.
  std::string kernel(StringRef name, Value typed) {
    return kernel((name + "_" + dtypeSuffix(elementTypeOf(typed))).str());
  }
  /// A fresh event of the function's pool (target=cuda); the functions
  /// never run at once, and share one.
  std::string event() {
    numEvents = std::max(numEvents, nextEvent + 1);
    return llvm::formatv("shardc_rt_cuda_event(ctx, {0})", nextEvent++);
  }

  /// The C expression for a value's data.
  std::string name(Value v) { return names.lookup(v); }
  /// An update's `clip` argument: the coefficient's data, or nullptr.
  std::string clipOf(Value clip) { return clip ? name(clip) : "nullptr"; }
  /// `{ const type array[] = {entry(v0), ...}; call(ctx, N, array, rest); }`
  /// over `values`: a runtime call taking a list.
  void emitListCall(StringRef call, StringRef type, StringRef array,
                    ValueRange values, llvm::function_ref<void(Value)> entry,
                    StringRef rest) {
    os << "{\n";
    os.indent();
    os << "const " << type << " " << array << "[] = {";
    llvm::interleaveComma(values, os, entry);
    os << "};\n"
       << call << "(ctx, " << values.size() << ", " << array << ", " << rest
       << ");\n";
    os.unindent();
    os << "}\n";
  }
  /// The call (up to its arguments: destination, source, count) that copies
  /// `in` into a buffer of element type `to`, converting where they differ.
  std::string copyKernel(Value in, Type to);
  /// Declares and allocates the buffer of `v`, of the size BufferLiveness
  /// gives it (a gathered buffer holds every rank's padded shard), or names
  /// its in-place operand's buffer where BufferLiveness writes it there.
  std::string allocate(Value v);
  std::string fresh(StringRef prefix = "v") {
    return (prefix + Twine(counter++)).str();
  }
  uint32_t axesMask(ArrayAttr axes);
  int64_t paramIndex(StringRef param) { return paramIndices.lookup(param); }
  /// For integer inputs: the bound their users (embedding tables, logits)
  /// put on the values.
  int64_t integerBound(Value input);
  std::string where(Operation *op);

  ModelOp model;
  MeshOp mesh;
  Target target;
  raw_indented_ostream os;
  /// The buffers of the function being emitted.
  std::optional<BufferLiveness> liveness;
  llvm::DenseMap<Value, std::string> names, requests;
  llvm::DenseMap<Operation *, SmallVector<Value>> freesAfter;
  /// Indices in the tables, by name: the evaluation step's ops are copies.
  llvm::StringMap<int64_t> paramIndices, inputIndices;
  SmallVector<train::ParamOp> params;
  SmallVector<train::InputOp> inputs;
  /// FSDP1 flat parameters: their dist.flat_param (ZeRO-3) or
  /// dist.adamw_flat (ZeRO-1/2), by unit.
  llvm::MapVector<StringRef, Operation *> flats;
  int counter = 0;
  int numEvents = 0, nextEvent = 0;
  /// target=cuda: the event each token's wait waits on. Both targets: the
  /// staging copy (emitStaging) a collective frees at its wait.
  llvm::DenseMap<Value, std::string> tokenEvents, stagings;
  /// target=cuda: the events the compute stream has waited for.
  llvm::StringSet<> waitedEvents;
};

std::string StepEmitter::where(Operation *op) {
  std::string text;
  llvm::raw_string_ostream s(text);
  s << op->getName();
  if (auto loc = dyn_cast<FileLineColLoc>(op->getLoc()))
    s << " at " << loc.getFilename().getValue() << ":" << loc.getLine() << ":"
      << loc.getColumn();
  return escaped(text);
}

uint32_t StepEmitter::axesMask(ArrayAttr axes) {
  uint32_t mask = 0;
  for (Attribute axis : axes)
    mask |= 1u << mesh.getAxisIndex(cast<StringAttr>(axis).getValue());
  return mask;
}

std::string StepEmitter::allocate(Value v) {
  std::string n = fresh();
  std::string type = cType(tensorType(v).getElementType());
  if (liveness->isInPlace(v)) {
    std::string over = name(
        cast<train::InPlaceOpInterface>(v.getDefiningOp()).getInPlaceOperand());
    os << type << " *" << n << " = " << over << "; // in place: " << over
       << " dies here\n";
    names[v] = n;
    return n;
  }
  int64_t bytes = liveness->getBuffers().lookup(v).bytes;
  os << type << " *" << n << " = static_cast<" << type
     << " *>(shardc_rt_alloc(ctx, " << bytes << "));\n";
  names[v] = n;
  return n;
}

LogicalResult StepEmitter::checkLowerable() {
  auto checkType = [&](Operation *op, Type type) -> LogicalResult {
    if (auto token = dyn_cast<TokenType>(type))
      type = token.getResult();
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor)
      return success();
    Type element = tensor.getElementType();
    if (element.isF32() || element.isBF16() || element.isInteger(32))
      return success();
    return op->emitOpError()
           << "has type " << type
           << ": the emitted steps compute on f32 or bf16 tensors with i32 "
              "indices";
  };
  // The runtime builds the communicators of one mesh, @mesh's.
  auto checkMesh = [&](Operation *op, FlatSymbolRefAttr ref) -> LogicalResult {
    if (!ref || ref == FlatSymbolRefAttr::get(mesh.getSymNameAttr()))
      return success();
    return op->emitOpError() << "is on mesh " << ref
                             << ", but the emitted step runs over one mesh, @"
                             << mesh.getSymName();
  };
  WalkResult result = model.walk([&](Operation *op) {
    for (Value v : op->getResults())
      if (failed(checkType(op, v.getType())))
        return WalkResult::interrupt();
    if (failed(checkMesh(op, op->getAttrOfType<FlatSymbolRefAttr>("mesh"))))
      return WalkResult::interrupt();
    WalkResult shards = op->getAttrDictionary().walk([&](ShardAttr shard) {
      return failed(checkMesh(op, shard.getMesh())) ? WalkResult::interrupt()
                                                    : WalkResult::advance();
    });
    if (shards.wasInterrupted())
      return WalkResult::interrupt();
    if (Type wire = getWireType(op)) {
      if (elementTypeOf(op->getResult(0)) != wire) {
        op->emitOpError() << "receives " << elementTypeOf(op->getResult(0))
                          << " from a " << wire
                          << " wire: the emitted steps keep the wire type";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  if (result.wasInterrupted())
    return failure();
  // The step clips as the model's #train.adamw says: one coefficient of
  // its max_grad_norm (whose norm the runtime reports), taken by every
  // update where max_grad_norm > 0.
  double maxNorm = model.getOptimizer().getMaxGradNorm().convertToDouble();
  ClipCoefficientOp coefficient;
  result = model.walk([&](Operation *op) {
    if (auto clip = dyn_cast<ClipCoefficientOp>(op)) {
      if (coefficient) {
        op->emitOpError() << "is a second clip coefficient of the step";
        return WalkResult::interrupt();
      }
      coefficient = clip;
      if (clip.getSums().size() > SHARDC_RT_MAX_CLIP_SUMS) {
        op->emitOpError() << "takes " << clip.getSums().size()
                          << " sums of squares; the runtime's "
                             "shardc_rt_clip_coefficient takes at most "
                          << SHARDC_RT_MAX_CLIP_SUMS;
        return WalkResult::interrupt();
      }
      if (clip.getMaxNorm().convertToDouble() != maxNorm) {
        op->emitOpError() << "clips to max_norm "
                          << clip.getMaxNorm().convertToDouble()
                          << ", but the model's optimizer has max_grad_norm "
                          << maxNorm;
        return WalkResult::interrupt();
      }
    }
    auto update = dyn_cast<train::OptimizerUpdateOpInterface>(op);
    if (!update)
      return WalkResult::advance();
    Value clip = update.getClip();
    if (!clip && maxNorm > 0) {
      op->emitOpError() << "takes its gradient unclipped, but the model's "
                           "optimizer has max_grad_norm "
                        << maxNorm << " (--shardc-shard inserts the clipping)";
      return WalkResult::interrupt();
    }
    if (clip && !clip.getDefiningOp<ClipCoefficientOp>()) {
      op->emitOpError() << "takes a clip that is not a dist.clip_coefficient";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

int64_t StepEmitter::integerBound(Value input) {
  int64_t bound = std::numeric_limits<int64_t>::max();
  SmallVector<Value> work{input};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (isa<train::UnitOp, train::BackwardOp, train::MicrobatchesOp>(user))
        work.push_back(user->getRegion(0).getArgument(use.getOperandNumber()));
      else if (auto reshape = dyn_cast<train::ReshapeOp>(user))
        work.push_back(reshape.getResult());
      else if (auto e = dyn_cast<train::EmbeddingOp>(user))
        bound = std::min(bound, shapeOf(e.getTable())[0]);
      else if (auto e = dyn_cast<train::EmbeddingGradOp>(user))
        bound = std::min(bound, shapeOf(e.getResult())[0]);
      else if (std::optional<int64_t> classes =
                   TypeSwitch<Operation *, std::optional<int64_t>>(user)
                       .Case<train::CrossEntropyOp, train::CrossEntropyGradOp,
                             train::CrossEntropyAndGradOp>(
                           [](auto ce) { return ce.getNumClasses(); })
                       .Default(std::optional<int64_t>()))
        bound = std::min(bound, *classes);
    }
  }
  // Unread by any bounded op: any non-negative int32.
  return std::min<int64_t>(bound, int64_t(1) << 31);
}

void StepEmitter::emitTables() {
  model.walk([&](Operation *op) {
    if (auto param = dyn_cast<train::ParamOp>(op)) {
      paramIndices[param.getName()] = params.size();
      params.push_back(param);
    } else if (auto input = dyn_cast<train::InputOp>(op)) {
      inputIndices[input.getName()] = inputs.size();
      inputs.push_back(input);
    }
  });
  // The part of each param its optimizer updates: ZeRO-1/2 a shard of a
  // whole param.
  llvm::StringMap<uint32_t> optimizerAxes;
  model.walk([&](AdamWShardOp op) {
    optimizerAxes[op.getName()] = axesMask(op.getAxes());
  });
  llvm::StringMap<int64_t> flatOf;
  model.walk([&](Operation *op) {
    if (!isa<FlatParamOp, AdamWFlatOp>(op))
      return;
    StringRef unit = isa<FlatParamOp>(op) ? cast<FlatParamOp>(op).getUnit()
                                          : cast<AdamWFlatOp>(op).getUnit();
    if (flats.count(unit))
      return;
    for (StringRef member :
         cast<train::ParamUserOpInterface>(op).getParamNames())
      flatOf[member] = flats.size();
    flats[unit] = op;
  });

  os << "namespace {\n\n";
  for (auto [i, param] : llvm::enumerate(params)) {
    os << "const int64_t kParamShape" << i << "[] = {";
    llvm::interleaveComma(param.getFullType().getShape(), os);
    os << "};\n";
  }
  for (auto [i, input] : llvm::enumerate(inputs)) {
    // The global batch: this rank's rows times the ranks splitting it.
    SmallVector<int64_t> global(shapeOf(input.getResult()));
    global[0] = model.getBatch();
    os << "const int64_t kInputShape" << i << "[] = {";
    llvm::interleaveComma(global, os);
    os << "};\n";
  }
  os << "\nconst shardc_rt_param_info kParams[] = {\n";
  os.indent();
  for (auto [i, param] : llvm::enumerate(params)) {
    std::string init = "SHARDC_RT_INIT_ZEROS", a = "0", b = "0";
    Attribute attr = param.getInit();
    if (isa<train::OnesInitAttr>(attr)) {
      init = "SHARDC_RT_INIT_ONES";
    } else if (auto normal = dyn_cast<train::NormalInitAttr>(attr)) {
      init = "SHARDC_RT_INIT_NORMAL";
      a = literal(normal.getMean());
      b = literal(normal.getStd());
    } else if (auto uniform = dyn_cast<train::UniformInitAttr>(attr)) {
      init = "SHARDC_RT_INIT_UNIFORM";
      a = literal(uniform.getLow());
      b = literal(uniform.getHigh());
    }
    uint32_t stored = 0;
    if (auto shard = dyn_cast_or_null<ShardAttr>(param.getShardingAttr()))
      for (StringAttr axis : shard.getAxes())
        stored |= 1u << mesh.getAxisIndex(axis.getValue());
    uint32_t optimized = optimizerAxes.lookup(param.getName());
    if (!optimizerAxes.count(param.getName()))
      optimized = stored;
    int64_t flat = flatOf.count(param.getName())
                       ? flatOf.lookup(param.getName())
                       : -1;
    os << "{" << quoted(param.getName()) << ", "
       << param.getFullType().getRank() << ", kParamShape" << i << ", " << init
       << ", " << a << ", " << b << ", " << (param.getFrozen() ? 1 : 0) << ", {"
       << stored << "u}, {" << optimized << "u}, " << flat << ", "
       << dtypeEnum(param.getType().getElementType()) << "},\n";
  }
  os.unindent();
  os << "};\n\nconst shardc_rt_input_info kInputs[] = {\n";
  os.indent();
  for (auto [i, input] : llvm::enumerate(inputs)) {
    Type element = cast<RankedTensorType>(input.getType()).getElementType();
    bool integer = element.isInteger(32);
    os << "{" << quoted(input.getName()) << ", " << dtypeEnum(element) << ", "
       << shapeOf(input.getResult()).size() << ", kInputShape" << i << ", "
       << (integer ? integerBound(input.getResult()) : 0) << "},\n";
  }
  os.unindent();
  os << "};\n\n";
  for (auto [g, entry] : llvm::enumerate(flats)) {
    os << "const int32_t kFlatMembers" << g << "[] = {";
    llvm::interleaveComma(
        cast<train::ParamUserOpInterface>(entry.second).getParamNames(), os,
        [&](StringRef member) { os << paramIndex(member); });
    os << "};\n";
  }
  os << "const shardc_rt_flat_info kFlats[] = {\n";
  os.indent();
  for (auto [g, entry] : llvm::enumerate(flats)) {
    Operation *op = entry.second;
    ArrayAttr axes = isa<FlatParamOp>(op) ? cast<FlatParamOp>(op).getAxes()
                                          : cast<AdamWFlatOp>(op).getAxes();
    os << "{" << quoted(entry.first) << ", "
       << cast<train::ParamUserOpInterface>(op).getParamNames().size()
       << ", kFlatMembers" << g << ", {" << axesMask(axes) << "u}, "
       << (isa<FlatParamOp>(op) ? 1 : 0) << "},\n";
  }
  os.unindent();
  os << "};\n\n";
}

void StepEmitter::emitMain(const LedgerReport &ledger, ModelOp eval) {
  auto optimizer = model.getOptimizer();
  auto strategy = model->getAttrOfType<StringAttr>(kStrategyAttrName);
  os << "} // namespace\n\n";
  os << "int main(int argc, char **argv) {\n";
  os.indent();
  os << "static const char *const axisNames[] = {";
  llvm::interleaveComma(mesh.getAxes(), os, [&](Attribute axis) {
    os << quoted(cast<StringAttr>(axis).getValue());
  });
  os << "};\nstatic const int64_t meshShape[] = {";
  llvm::interleaveComma(mesh.getShape(), os);
  os << "};\n";
  os << "shardc_rt_model model = {};\n";
  os << "model.name = " << quoted(model.getSymName()) << ";\n";
  os << "model.strategy = " << quoted(strategy.getValue()) << ";\n";
  os << "model.mesh_rank = " << mesh.getShape().size() << ";\n";
  os << "model.axis_names = axisNames;\nmodel.mesh_shape = meshShape;\n";
  os << "model.params = kParams;\nmodel.num_params = " << params.size()
     << ";\n";
  os << "model.inputs = kInputs;\nmodel.num_inputs = " << inputs.size()
     << ";\n";
  os << "model.flats = kFlats;\nmodel.num_flats = " << flats.size()
     << ";\n";
  os << "model.lr = " << literal(optimizer.getLr()) << ";\n";
  os << "model.beta1 = " << literal(optimizer.getBeta1()) << ";\n";
  os << "model.beta2 = " << literal(optimizer.getBeta2()) << ";\n";
  os << "model.eps = " << literal(optimizer.getEps()) << ";\n";
  os << "model.weight_decay = " << literal(optimizer.getWeightDecay())
     << ";\n";
  os << "model.warmup = " << optimizer.getWarmup() << ";\n";
  os << "model.decay_steps = " << optimizer.getDecaySteps() << ";\n";
  os << "model.min_lr = " << literal(optimizer.getMinLr()) << ";\n";
  os << "model.max_grad_norm = " << literal(optimizer.getMaxGradNorm())
     << ";\n";
  os << "model.decay_min_rank = " << optimizer.getDecayMinRank() << ";\n";
  os << "model.offload_optimizer = " << (ledger.offloadsOptimizer ? 1 : 0)
     << ";\n";
  os << "model.offload_params = " << (ledger.offloadsParams ? 1 : 0) << ";\n";
  os << "// What --shardc-ledger predicts per rank: bytes, model FLOPs, the "
        "evaluation step's peak, hardware FLOPs, host copies.\n";
  os << "model.predicted = {" << ledger.paramBytes << ", " << ledger.gradBytes
     << ", " << ledger.optimizerBytes << ", " << ledger.modelState() << ", "
     << ledger.activationBytes << ", " << ledger.peak << ", "
     << ledger.allGather.bytes << ", " << ledger.reduceScatter.bytes << ", "
     << ledger.allReduce.bytes << ", " << ledger.modelFlops << ", "
     << predictEvalPeak(ledger, eval) << ", " << ledger.hardwareFlops << ", "
     << ledger.hostCopyBytes << "};\n";
  os << "model.num_events = " << numEvents << ";\n";
  int64_t microbatches = 1;
  model.walk([&](train::MicrobatchesOp loop) {
    microbatches = static_cast<int64_t>(loop.getCount());
  });
  os << "model.microbatches = " << microbatches << ";\n";
  os << "model.step = step;\nmodel.eval_step = eval_step;\n";
  os << "return shardc_rt_main(argc, argv, &model);\n";
  os.unindent();
  os << "}\n";
}

LogicalResult StepEmitter::emit() {
  if (failed(checkLowerable()))
    return failure();
  bool cuda = target == Target::cuda;
  auto strategy = model->getAttrOfType<StringAttr>(kStrategyAttrName);
  os << "// Generated by shardc (target=" << (cuda ? "cuda" : "host")
     << ") from @" << commented(model.getSymName()) << ": "
     << commented(strategy.getValue()) << " over mesh [";
  llvm::interleaveComma(mesh.getShape(), os);
  os << "]. Do not edit.\n";
  if (cuda)
    os << "#include \"shardc_rt/shardc_rt_cuda.h\"\n\n";
  else
    os << "#include \"shardc_rt/Kernels.h\"\n#include \"shardc_rt/shardc_rt.h\"\n\n";
  emitTables();
  FailureOr<EvalStep> eval = buildEvalStep(model);
  if (failed(eval) || failed(emitFunction("step", model)) ||
      failed(emitFunction("eval_step", eval->model)))
    return failure();
  emitMain(computeLedger(model), eval->model);
  return success();
}

LogicalResult StepEmitter::emitFunction(StringRef name, ModelOp body) {
  liveness.emplace(body);
  freesAfter.clear();
  for (auto &[value, buffer] : liveness->getBuffers())
    freesAfter[buffer.lastUser].push_back(value);
  nextEvent = 0;
  waitedEvents.clear();
  os << "void " << name << "(shardc_rt_context *ctx, float *loss) {\n";
  os.indent();
  if (target == Target::cuda) {
    // The compute stream, and a communicator and stream per group the
    // function's collectives run on.
    os << "shardc_rt_cuda_kernels *K = shardc_rt_cuda_kernels_of(ctx);\n";
    os << "cudaStream_t compute = shardc_rt_cuda_compute_stream(ctx);\n";
    std::set<uint32_t> masks;
    body.walk([&](Operation *op) {
      TypeSwitch<Operation *>(op)
          .Case<AllGatherOp, AllGatherStartOp, ReduceScatterOp,
                ReduceScatterStartOp, AllReduceOp, AllReduceStartOp>(
              [&](auto c) { masks.insert(axesMask(c.getAxes())); });
    });
    for (uint32_t mask : masks)
      os << "ncclComm_t nccl" << mask << " = shardc_rt_cuda_comm(ctx, " << mask
         << "u);\ncudaStream_t comm" << mask
         << " = shardc_rt_cuda_comm_stream(ctx, " << mask << "u);\n";
  }
  if (failed(emitBlock(body.getBody().front())))
    return failure();
  os.unindent();
  os << "}\n\n";
  return success();
}

/// Whether `op` updates a param's stored part or a flat parameter's stored
/// piece and allocates nothing: a run of these is one multi-tensor AdamW.
/// The buffers they free go after the run, which changes no peak since
/// nothing is allocated in it.
static bool isStoredUpdate(Operation &op) {
  if (isa<train::AdamWOp>(op))
    return true;
  auto flat = dyn_cast<AdamWFlatOp>(op);
  return flat && !flat.getUpdated();
}

LogicalResult StepEmitter::emitBlock(Block &block) {
  // A backward's recomputation of its unit's forward: a region of --trace's
  // timeline.
  bool recomputing = false;
  auto recomputes = [&](Operation &op) {
    bool marked = op.hasAttr(train::kRecomputedAttrName);
    if (marked && !recomputing) {
      auto backward = dyn_cast<train::BackwardOp>(block.getParentOp());
      os << "shardc_rt_region_begin(ctx, "
         << quoted("recompute" +
                   (backward ? " " + backward.getUnit().str() : ""))
         << ");\n";
    }
    if (!marked && recomputing)
      os << "shardc_rt_region_end(ctx);\n";
    recomputing = marked;
  };
  for (auto it = block.begin(); it != block.end();) {
    auto runEnd = std::find_if_not(it, block.end(), isStoredUpdate);
    if (std::distance(it, runEnd) > 1) {
      auto run = llvm::make_range(it, runEnd);
      emitAdamWGroup(run);
      for (Operation &op : run)
        emitFrees(&op);
      it = runEnd;
      continue;
    }
    // Started collectives one after the other on one communicator (with
    // only dist.frees between them): each staged and allocated, with the
    // frees that follow it, in turn, then one NCCL group.
    Operation &first = *it;
    auto groupEnd = std::find_if_not(it, block.end(), [&](Operation &op) {
      return isa<FreeOp>(op) || joinsNcclGroup(&first, &op);
    });
    auto run = llvm::make_range(it, groupEnd);
    if (target == Target::cuda && joinsNcclGroup(&first, &first) &&
        llvm::count_if(run, [](Operation &op) { return !isa<FreeOp>(op); }) >
            1) {
      SmallVector<PreparedCollective> group;
      for (Operation &op : run) {
        if (!isa<FreeOp>(op))
          group.push_back(prepareCollective(&op));
        emitFrees(&op);
      }
      emitNcclCollectives(group);
      it = groupEnd;
      continue;
    }
    Operation &op = *it++;
    recomputes(op);
    if (failed(emitOp(&op)))
      return failure();
    if (!isa<train::UnitOp, train::BackwardOp>(op))
      emitFrees(&op);
  }
  if (recomputing)
    os << "shardc_rt_region_end(ctx);\n";
  return success();
}

void StepEmitter::emitAdamWGroup(llvm::iterator_range<Block::iterator> run) {
  os << "{\n";
  os.indent();
  os << "const shardc_rt_adamw_update updates[] = {\n";
  os.indent();
  int64_t count = 0;
  for (Operation &op : run) {
    ++count;
    if (auto adamw = dyn_cast<train::AdamWOp>(op)) {
      os << "{" << paramIndex(adamw.getName()) << ", 0, "
         << name(adamw.getGrad()) << ", "
         << dtypeEnum(elementTypeOf(adamw.getGrad())) << ", "
         << clipOf(adamw.getClip()) << "}, // " << commented(adamw.getName())
         << "\n";
      continue;
    }
    auto flat = cast<AdamWFlatOp>(op);
    os << "{" << flats.find(flat.getUnit()) - flats.begin() << ", 1, "
       << name(flat.getGrad()) << ", "
       << dtypeEnum(elementTypeOf(flat.getGrad())) << ", "
       << clipOf(flat.getClip()) << "}, // unit \"" << commented(flat.getUnit())
       << "\"\n";
  }
  os.unindent();
  os << "};\n";
  os << "shardc_rt_adamw_group(ctx, " << count << ", updates);\n";
  os.unindent();
  os << "}\n";
}

void StepEmitter::emitFrees(Operation *lastUser) {
  for (Value dead : freesAfter.lookup(lastUser))
    os << "shardc_rt_free(ctx, " << name(dead) << ");\n";
}

/// Inlines a unit or a backward: its arguments are its operands' pointers,
/// its results the yielded ones.
static void bindRegion(Operation *op, llvm::DenseMap<Value, std::string> &names) {
  for (auto [arg, operand] :
       llvm::zip(op->getRegion(0).getArguments(), op->getOperands()))
    names[arg] = names.lookup(operand);
}

LogicalResult StepEmitter::emitOp(Operation *op) {
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](train::ParamOp param) {
        // A flat parameter's member is stored in it, and not read.
        if (param.getResult().use_empty())
          return success();
        std::string n = fresh();
        std::string type = cType(param.getType().getElementType());
        os << type << " *" << n << " = static_cast<" << type
           << " *>(shardc_rt_param(ctx, " << paramIndex(param.getName())
           << ")); // " << commented(param.getName()) << "\n";
        names[param.getResult()] = n;
        return success();
      })
      .Case([&](train::InputOp input) {
        std::string n = fresh();
        std::string type = cType(
            cast<RankedTensorType>(input.getType()).getElementType());
        int64_t index = inputIndices.lookup(input.getName());
        os << type << " *" << n << " = static_cast<" << type
           << " *>(shardc_rt_input(ctx, " << index << ")); // "
           << commented(input.getName()) << "\n";
        names[input.getResult()] = n;
        return success();
      })
      .Case<train::UnitOp, train::BackwardOp>([&](Operation *region) {
        StringRef unitName = isa<train::UnitOp>(region)
                                 ? cast<train::UnitOp>(region).getName()
                                 : cast<train::BackwardOp>(region).getUnit();
        os << "// " << region->getName().stripDialect() << " \""
           << commented(unitName) << "\"\n";
        bindRegion(region, names);
        // Operands the region does not read die as it starts.
        emitFrees(region);
        // A span of --trace's timeline.
        os << "shardc_rt_region_begin(ctx, "
           << quoted((isa<train::UnitOp>(region) ? "forward " : "backward ") +
                     unitName.str())
           << ");\n";
        Block &body = region->getRegion(0).front();
        if (failed(emitBlock(body)))
          return failure();
        os << "shardc_rt_region_end(ctx);\n";
        for (auto [result, yielded] :
             llvm::zip(region->getResults(), body.getTerminator()->getOperands()))
          names[result] = name(yielded);
        return success();
      })
      .Case([&](train::MicrobatchesOp loop) {
        // The results accumulate the yields of every micro-batch.
        for (Value acc : loop.getResults()) {
          std::string sum = allocate(acc);
          os << kernel("fill", acc) << sum << ", 0.0f, " << numel(acc)
             << ");\n";
        }
        os << "for (int64_t mb = 0; mb < " << loop.getCount() << "; ++mb) {\n";
        os.indent();
        Block &body = loop.getBody().front();
        for (auto [arg, operand] :
             llvm::zip(body.getArguments(), loop.getInputs()))
          names[arg] =
              llvm::formatv("({0} + mb * {1})", name(operand), numel(arg));
        if (failed(emitBlock(body)))
          return failure();
        os.unindent();
        os << "}\n";
        return success();
      })
      .Case([&](train::YieldOp yield) {
        if (auto loop = dyn_cast<train::MicrobatchesOp>(yield->getParentOp()))
          for (auto [acc, value] :
               llvm::zip(loop.getResults(), yield.getValues()))
            os << kernel("accumulate", acc) << name(acc) << ", "
               << name(value) << ", " << numel(value) << ");\n";
        return success();
      })
      .Case([&](train::ReturnOp ret) {
        if (target == Target::cuda)
          os << "SHARDC_CUDA(cudaMemcpyAsync(loss, " << name(ret.getLoss())
             << ", sizeof(float), cudaMemcpyDeviceToHost, compute));\n";
        else
          os << "*loss = " << name(ret.getLoss()) << "[0];\n";
        return success();
      })
      .Case([&](train::AdamWOp adamw) {
        os << "shardc_rt_adamw(ctx, " << paramIndex(adamw.getName()) << ", "
           << name(adamw.getGrad()) << ", "
           << dtypeEnum(elementTypeOf(adamw.getGrad())) << ", "
           << clipOf(adamw.getClip()) << "); // " << commented(adamw.getName())
           << "\n";
        return success();
      })
      .Case([&](AdamWShardOp adamw) {
        std::string out = allocate(adamw.getResult());
        os << "shardc_rt_adamw_shard(ctx, " << paramIndex(adamw.getName())
           << ", " << name(adamw.getGrad()) << ", "
           << dtypeEnum(elementTypeOf(adamw.getGrad())) << ", "
           << clipOf(adamw.getClip()) << ", " << out << "); // "
           << commented(adamw.getName()) << "\n";
        return success();
      })
      .Case([&](FlatParamOp flat) {
        std::string n = fresh();
        std::string type = cType(elementTypeOf(flat.getResult()));
        os << type << " *" << n << " = static_cast<" << type
           << " *>(shardc_rt_flat_param(ctx, "
           << flats.find(flat.getUnit()) - flats.begin() << ")); // unit \""
           << commented(flat.getUnit()) << "\"\n";
        names[flat.getResult()] = n;
        return success();
      })
      .Case([&](AdamWFlatOp adamw) {
        std::string out =
            adamw.getUpdated() ? allocate(adamw.getUpdated()) : "nullptr";
        os << "shardc_rt_adamw_flat(ctx, "
           << flats.find(adamw.getUnit()) - flats.begin() << ", "
           << name(adamw.getGrad()) << ", "
           << dtypeEnum(elementTypeOf(adamw.getGrad())) << ", "
           << clipOf(adamw.getClip()) << ", " << out << "); // unit \""
           << commented(adamw.getUnit()) << "\"\n";
        return success();
      })
      .Case([&](SumSquaresOp op) {
        std::string sum = allocate(op.getResult());
        emitListCall(
            "shardc_rt_sum_squares", "shardc_rt_tensor_ref", "squared",
            op.getInputs(),
            [&](Value in) {
              os << "{" << name(in) << ", " << dtypeEnum(elementTypeOf(in))
                 << ", " << numel(in) << "}";
            },
            sum);
        return success();
      })
      .Case([&](ClipCoefficientOp op) {
        std::string coef = allocate(op.getResult());
        emitListCall(
            "shardc_rt_clip_coefficient", "float *const", "sums", op.getSums(),
            [&](Value sum) { os << name(sum); },
            literal(op.getMaxNorm()) + ", " + coef);
        return success();
      })
      .Case([&](SetParamOp set) {
        os << "shardc_rt_set_param(ctx, " << paramIndex(set.getName()) << ", "
           << name(set.getValue()) << "); // " << commented(set.getName())
           << "\n";
        return success();
      })
      .Case([&](FreeOp) { return success(); })
      .Case([&](ConvertOp convert) {
        std::string out = allocate(convert.getResult());
        os << copyKernel(convert.getInput(), elementTypeOf(convert.getResult()))
           << out << ", " << name(convert.getInput()) << ", "
           << numel(convert.getInput()) << ");\n";
        return success();
      })
      .Case([&](PackOp pack) {
        std::string out = allocate(pack.getResult());
        int64_t offset = 0;
        for (Value in : pack.getInputs()) {
          os << kernel("copy", in) << out << " + " << offset << ", "
             << name(in) << ", " << numel(in) << ");\n";
          offset += numel(in);
        }
        // Padding to the ranks' equal pieces reduces as zeros.
        if (int64_t padding = numel(pack.getResult()) - offset)
          os << kernel("fill", pack.getResult()) << out << " + " << offset
             << ", 0.0f, "
             << padding << ");\n";
        return success();
      })
      .Case([&](UnpackOp unpack) {
        int64_t offset = 0;
        for (Value piece : unpack.getResults()) {
          names[piece] =
              llvm::formatv("({0} + {1})", name(unpack.getInput()), offset);
          offset += numel(piece);
        }
        return success();
      })
      .Case([&](TakeShardOp take) {
        // The rank's piece of the group's whole tensor: its rows past the
        // tensor's end (uneven dim-0 shards) are zeros.
        std::string out = allocate(take.getResult());
        std::string first = fresh("first"), taken = fresh("taken");
        int64_t count = numel(take.getResult()), total = numel(take.getInput());
        os << "const int64_t " << first << " = shardc_rt_group_index(ctx, "
           << axesMask(take.getAxes()) << "u) * " << count << ";\n";
        os << "const int64_t " << taken << " = " << first << " >= " << total
           << " ? 0 : " << first << " + " << count << " > " << total << " ? "
           << total << " - " << first << " : " << count << ";\n";
        os << kernel("copy", take.getResult()) << out << ", "
           << name(take.getInput()) << " + " << first << ", " << taken
           << ");\n";
        os << kernel("fill", take.getResult()) << out << " + " << taken
           << ", 0.0f, " << count << " - " << taken << ");\n";
        return success();
      })
      .Case([&](WaitOp wait) {
        names[wait.getResult()] = name(wait.getToken());
        if (target == Target::host)
          os << "shardc_rt_wait(ctx, " << requests.lookup(wait.getToken())
             << ");\n";
        // The collectives of an NCCL group share one event: the compute
        // stream waits for it once.
        else if (std::string done = tokenEvents.lookup(wait.getToken());
                 waitedEvents.insert(done).second)
          os << "SHARDC_CUDA(cudaStreamWaitEvent(compute, " << done
             << ", 0));\n";
        if (std::string staging = stagings.lookup(wait.getToken());
            !staging.empty())
          os << "shardc_rt_free(ctx, " << staging << ");\n";
        return success();
      })
      .Case<AllGatherOp, AllGatherStartOp, ReduceScatterOp,
            ReduceScatterStartOp, AllReduceOp, AllReduceStartOp>(
          [&](Operation *op) { return emitCollective(op); })
      .Case([&](arith::ConstantOp constant) {
        auto dense = dyn_cast<DenseFPElementsAttr>(constant.getValue());
        if (!dense || !dense.isSplat())
          return LogicalResult(constant.emitOpError(
              "only splat float constants lower to an executable"));
        std::string out = allocate(constant.getResult());
        os << kernel("fill", constant.getResult()) << out << ", "
           << literal(dense.getSplatValue<APFloat>()) << "f, "
           << numel(constant.getResult()) << ");\n";
        return success();
      })
      .Default([&](Operation *op) { return emitCompute(op); });
}

std::string StepEmitter::copyKernel(Value in, Type to) {
  if (elementTypeOf(in) == to)
    return kernel("copy", in);
  return kernel(
      ("convert_" + dtypeSuffix(elementTypeOf(in)) + "_" + dtypeSuffix(to))
          .str());
}

std::string StepEmitter::emitStaging(Operation *op, Value in, Type wire) {
  int64_t bytes = getStagingBytes(op);
  if (!bytes)
    return name(in);
  std::string staging = fresh(), type = cType(wire);
  os << type << " *" << staging << " = static_cast<" << type
     << " *>(shardc_rt_alloc(ctx, " << bytes << "));\n";
  os << copyKernel(in, wire) << staging << ", " << name(in) << ", " << numel(in)
     << ");\n";
  int64_t sent = bytes / (wire.getIntOrFloatBitWidth() / 8);
  // Uneven dim-0 shards: the last ranks' rows are padding, reduced as zeros.
  if (sent > numel(in))
    os << kernel(("fill_" + dtypeSuffix(wire)).str()) << staging << " + "
       << numel(in) << ", 0.0f, " << sent - numel(in) << ");\n";
  stagings[op->getResult(0)] = staging;
  return staging;
}

/// What `count` things carry, named by the first and the last: "first ..
/// last (count)", or `first` alone.
static std::string firstToLast(StringRef first, StringRef last, size_t count) {
  if (count == 1)
    return first.str();
  return (first + " .. " + last + " (" + Twine(count) + ")").str();
}

/// What a collective carries, for --trace's timeline: the param (or flat
/// unit) whose values, or updated shards, a gather brings; the params whose
/// gradients a reduction brings to their updates (of a bucket, the first and
/// the last, and how many), through a micro-batch loop's sums; the loss;
/// the gradient norm. "" for the rest.
static std::string carriedBy(Operation *collective) {
  // The root's flat parameter has no unit name.
  auto unit = [](StringRef name) {
    return name.empty() ? std::string("(root unit)") : name.str();
  };
  Value in = collective->getOperand(0);
  while (auto convert = in.getDefiningOp<ConvertOp>())
    in = convert.getInput();
  // A shard kept from the forward's gather (reshard-after-forward=K): what
  // that gather brought.
  if (auto take = in.getDefiningOp<TakeShardOp>()) {
    Operation *gather = take.getInput().getDefiningOp();
    if (auto wait = dyn_cast<WaitOp>(gather))
      gather = wait.getToken().getDefiningOp();
    return carriedBy(gather);
  }
  Operation *src = in.getDefiningOp();
  if (auto param = dyn_cast_or_null<train::ParamOp>(src))
    return param.getName().str();
  if (auto shard = dyn_cast_or_null<AdamWShardOp>(src))
    return shard.getName().str();
  if (auto flat = dyn_cast_or_null<FlatParamOp>(src))
    return unit(flat.getUnit());
  if (auto flat = dyn_cast_or_null<AdamWFlatOp>(src))
    return unit(flat.getUnit());
  if (isa_and_nonnull<SumSquaresOp>(src))
    return "grad norm";
  // Forward, through waits, casts, unpacking and further reductions, to the
  // updates the result reaches, or the step's loss.
  SmallVector<std::pair<Operation *, std::string>> updates;
  SmallVector<Value> work(collective->getResults());
  llvm::DenseSet<Operation *> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (!seen.insert(user).second)
        continue;
      if (isa<train::ReturnOp>(user))
        return "loss";
      if (auto flat = dyn_cast<AdamWFlatOp>(user))
        updates.push_back({user, unit(flat.getUnit())});
      else if (isa<train::OptimizerUpdateOpInterface>(user))
        updates.push_back(
            {user,
             cast<train::ParamUserOpInterface>(user).getParamNames()[0].str()});
      else if (isa<WaitOp, ConvertOp, UnpackOp, ReduceScatterOp,
                   ReduceScatterStartOp, AllReduceOp, AllReduceStartOp>(user))
        llvm::append_range(work, user->getResults());
      // A micro-batch's shard (grad-sync=microbatch): out to the sum.
      else if (auto loop = dyn_cast<train::MicrobatchesOp>(user->getParentOp());
               loop && isa<train::YieldOp>(user))
        for (OpOperand &yielded : user->getOpOperands())
          if (yielded.get() == v)
            work.push_back(loop.getResult(yielded.getOperandNumber()));
    }
  }
  if (updates.empty())
    return "";
  // In program order (the updates of one step share the model's block).
  Block *block = updates.front().first->getBlock();
  if (llvm::all_of(updates,
                   [&](const auto &u) { return u.first->getBlock() == block; }))
    llvm::sort(updates, [](const auto &a, const auto &b) {
      return a.first->isBeforeInBlock(b.first);
    });
  return firstToLast(updates.front().second, updates.back().second,
                     updates.size());
}

StepEmitter::PreparedCollective StepEmitter::prepareCollective(Operation *op) {
  Value in = op->getOperand(0), result = op->getResult(0);
  ArrayAttr axes;
  bool average = false;
  TypeSwitch<Operation *>(op)
      .Case<AllGatherOp, AllGatherStartOp>([&](auto c) { axes = c.getAxes(); })
      .Case<ReduceScatterOp, ReduceScatterStartOp, AllReduceOp,
            AllReduceStartOp>([&](auto c) {
        axes = c.getAxes();
        average = c.getReduction() == Reduction::avg;
      });
  std::string source = emitStaging(op, in, getWireType(op));
  // Elements per rank: a gather's padded piece (the gathered buffer has room
  // for every rank's, BufferLiveness), a reduce-scatter's shard (its source
  // holds every rank's), an all-reduce's whole tensor.
  int64_t count = isa<ReduceScatterOp, ReduceScatterStartOp>(op)
                      ? numel(result)
                      : numel(in);
  return {op, source, allocate(result), count, axesMask(axes), average};
}

LogicalResult StepEmitter::emitCollective(Operation *op) {
  PreparedCollective c = prepareCollective(op);
  if (target == Target::cuda) {
    emitNcclCollectives(c);
    return success();
  }
  Value result = op->getResult(0);
  std::string call;
  std::string common =
      llvm::formatv("ctx, {0}u, {1}, {2}, {3}, {4}", c.mask,
                    dtypeEnum(getWireType(op)), c.source, c.out, c.count);
  std::string what = quoted(carriedBy(op));
  // A shard in host memory is copied into its slot of the result and
  // gathered in place.
  if (isa<AllGatherOp, AllGatherStartOp>(op))
    call = (readsHostMemory(op) ? "shardc_rt_all_gather_from_host_start("
                                : "shardc_rt_all_gather_start(") +
           common + ", " + what + ")";
  else if (isa<ReduceScatterOp, ReduceScatterStartOp>(op))
    call = "shardc_rt_reduce_scatter_start(" + common + ", " +
           (c.average ? "1" : "0") + ", " + what + ")";
  else
    call = "shardc_rt_all_reduce_start(" + common + ", " +
           (c.average ? "1" : "0") + ", " + what + ")";
  std::string request = fresh("r");
  os << "shardc_rt_request *" << request << " = " << call << ";\n";
  if (isa<AllGatherStartOp, ReduceScatterStartOp, AllReduceStartOp>(op)) {
    requests[result] = request;
    return success();
  }
  os << "shardc_rt_wait(ctx, " << request << ");\n";
  if (std::string staging = stagings.lookup(result); !staging.empty())
    os << "shardc_rt_free(ctx, " << staging << ");\n";
  return success();
}

/// Collectives on their communicator's stream: they start once the compute
/// stream has produced their inputs (and released their output buffers),
/// and the compute stream waits for their event where the schedule waits.
/// Several are one NCCL group, one launch, as FSDP2 gathers a unit's params
/// in one call.
void StepEmitter::emitNcclCollectives(
    ArrayRef<PreparedCollective> collectives) {
  const PreparedCollective &first = collectives.front();
  Operation *op = first.op;
  std::string comm = "nccl" + std::to_string(first.mask);
  std::string stream = "comm" + std::to_string(first.mask);
  const char *reduction = first.average ? "ncclAvg" : "ncclSum";
  const char *type = getWireType(op).isBF16() ? "ncclBfloat16" : "ncclFloat";
  const char *kind = isa<AllGatherOp, AllGatherStartOp>(op)
                         ? "SHARDC_RT_ALL_GATHER"
                     : isa<ReduceScatterOp, ReduceScatterStartOp>(op)
                         ? "SHARDC_RT_REDUCE_SCATTER"
                         : "SHARDC_RT_ALL_REDUCE";
  std::string what = carriedBy(op);
  if (collectives.size() > 1)
    what =
        firstToLast(what, carriedBy(collectives.back().op), collectives.size());
  std::string ready = event(), done = event();
  os << "SHARDC_CUDA(cudaEventRecord(" << ready << ", compute));\n";
  os << "SHARDC_CUDA(cudaStreamWaitEvent(" << stream << ", " << ready
     << ", 0));\n";
  os << "shardc_rt_cuda_collective_start(ctx, " << first.mask << "u, "
     << quoted(what) << ");\n";
  if (collectives.size() > 1)
    os << "SHARDC_NCCL(ncclGroupStart());\n";
  int64_t count = 0;
  for (const PreparedCollective &c : collectives) {
    count += c.count;
    // A shard in host memory comes into its slot of the result on this
    // stream (the copy overlapping the compute stream's work as the gather
    // does), and is gathered in place.
    std::string source = c.source;
    if (readsHostMemory(c.op)) {
      source = fresh("slot");
      os << "void *" << source << " = shardc_rt_cuda_copy_to_gather_slot(ctx, "
         << c.mask << "u, " << c.out << ", " << c.source << ", "
         << getBufferBytes(c.op->getOperand(0)) << ");\n";
    }
    if (isa<AllGatherOp, AllGatherStartOp>(c.op))
      os << llvm::formatv(
          "SHARDC_NCCL(ncclAllGather({0}, {1}, {2}, {3}, {4}, {5}));\n", source,
          c.out, c.count, type, comm, stream);
    else if (isa<ReduceScatterOp, ReduceScatterStartOp>(c.op))
      os << llvm::formatv(
          "SHARDC_NCCL(ncclReduceScatter({0}, {1}, {2}, {3}, {4}, {5}, "
          "{6}));\n",
          source, c.out, c.count, type, reduction, comm, stream);
    else
      os << llvm::formatv(
          "SHARDC_NCCL(ncclAllReduce({0}, {1}, {2}, {3}, {4}, {5}, {6}));\n",
          source, c.out, c.count, type, reduction, comm, stream);
  }
  if (collectives.size() > 1)
    os << "SHARDC_NCCL(ncclGroupEnd());\n";
  os << "shardc_rt_cuda_sent(ctx, " << kind << ", " << first.mask << "u, "
     << dtypeEnum(getWireType(op)) << ", " << count << ", "
     << collectives.size() << ");\n";
  os << "SHARDC_CUDA(cudaEventRecord(" << done << ", " << stream << "));\n";
  if (isa<AllGatherStartOp, ReduceScatterStartOp, AllReduceStartOp>(op)) {
    for (const PreparedCollective &c : collectives)
      tokenEvents[c.op->getResult(0)] = done;
    return;
  }
  Value result = op->getResult(0);
  os << "SHARDC_CUDA(cudaStreamWaitEvent(compute, " << done << ", 0));\n";
  if (std::string staging = stagings.lookup(result); !staging.empty())
    os << "shardc_rt_free(ctx, " << staging << ");\n";
}

LogicalResult StepEmitter::emitCompute(Operation *op) {
  // Kernels that read indices check them: on the host at once, on a
  // device at the end of the step (the kernel records the position).
  auto checkIds = [&](StringRef call, StringRef args) {
    if (target == Target::cuda) {
      os << call << args << ");\n";
      return;
    }
    os << "if (int64_t bad = " << call << args << "); bad >= 0)\n";
    os << "  shardc_rt_bad_index(ctx, \"" << where(op) << "\", bad);\n";
  };
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case<train::LinearOp, train::LinearGeluOp>([&](auto o) {
        // linear: y; linear_gelu: its preactivation, then y.
        SmallVector<std::string> outs;
        for (Value result : o->getResults())
          outs.push_back(allocate(result));
        int64_t k = shapeOf(o.getWeight())[1], n = shapeOf(o.getWeight())[0];
        os << kernel(o->getName().stripDialect(), o.getInput())
           << name(o.getInput()) << ", " << name(o.getWeight()) << ", "
           << (o.getBias() ? name(o.getBias()) : "nullptr") << ", "
           << llvm::join(outs, ", ") << ", " << numel(o.getInput()) / k
           << ", " << k << ", " << n << ");\n";
        return success();
      })
      .Case<train::MatmulOp, train::MatmulGeluGradOp, train::MatmulBiasGradOp>(
          [&](auto o) {
            // matmul: lhs, rhs, out, batch, ...; matmul_gelu_grad (matrices):
            // lhs, rhs, preactivation, dx, m, ...; matmul_bias_grad (matrices):
            // lhs, rhs, out, bias_grad, m, ...
            using Op = decltype(o);
            std::string c = allocate(o.getResult()), biasGrad;
            if constexpr (std::is_same_v<Op, train::MatmulBiasGradOp>)
              biasGrad = allocate(o.getBiasGrad());
            ArrayRef<int64_t> lhs = shapeOf(o.getLhs()),
                              res = shapeOf(o.getResult());
            int64_t m = res[res.size() - 2], n = res.back();
            int64_t k = o.getTransposeLhs() ? lhs[lhs.size() - 2] : lhs.back();
            os << kernel(o->getName().stripDialect(), o.getResult())
               << name(o.getLhs()) << ", " << name(o.getRhs()) << ", ";
            if constexpr (std::is_same_v<Op, train::MatmulGeluGradOp>)
              os << name(o.getPreactivation()) << ", " << c << ", ";
            else if constexpr (std::is_same_v<Op, train::MatmulBiasGradOp>)
              os << c << ", " << biasGrad << ", ";
            else
              os << c << ", " << numel(o.getResult()) / (m * n) << ", ";
            os << m << ", " << k << ", " << n << ", "
               << (o.getTransposeLhs() ? 1 : 0) << ", "
               << (o.getTransposeRhs() ? 1 : 0) << ");\n";
            return success();
          })
      .Case([&](train::AddOp o) {
        std::string y = allocate(o.getResult());
        os << kernel("add", o.getResult()) << name(o.getLhs()) << ", "
           << name(o.getRhs()) << ", " << y << ", " << numel(o.getLhs())
           << ", " << numel(o.getRhs()) << ");\n";
        return success();
      })
      .Case([&](train::ScaleOp o) {
        std::string y = allocate(o.getResult());
        os << kernel("scale", o.getResult()) << name(o.getInput()) << ", " << y
           << ", " << numel(o.getInput()) << ", "
           << literal(o.getFactor().convertToDouble()) << ");\n";
        return success();
      })
      .Case<train::GeluOp, train::ReluOp>([&](Operation *o) {
        std::string y = allocate(o->getResult(0));
        os << kernel(o->getName().stripDialect(), o->getResult(0))
           << name(o->getOperand(0)) << ", " << y << ", "
           << numel(o->getResult(0)) << ");\n";
        return success();
      })
      .Case<train::GeluGradOp, train::ReluGradOp>([&](Operation *o) {
        std::string dx = allocate(o->getResult(0));
        os << kernel(o->getName().stripDialect(), o->getResult(0))
           << name(o->getOperand(0)) << ", " << name(o->getOperand(1)) << ", "
           << dx << ", " << numel(o->getResult(0)) << ");\n";
        return success();
      })
      .Case([&](train::LayerNormOp o) {
        std::string y = allocate(o.getResult());
        int64_t c = shapeOf(o.getInput()).back();
        os << kernel("layernorm", o.getResult()) << name(o.getInput()) << ", "
           << name(o.getWeight()) << ", " << name(o.getBias()) << ", " << y
           << ", " << numel(o.getInput()) / c << ", " << c << ", "
           << literal(o.getEps().convertToDouble()) << ");\n";
        return success();
      })
      .Case([&](train::AddLayerNormOp o) {
        std::string sum = allocate(o.getSum());
        std::string y = allocate(o.getResult());
        int64_t c = shapeOf(o.getLhs()).back();
        os << kernel("add_layernorm", o.getResult()) << name(o.getLhs())
           << ", " << name(o.getRhs()) << ", " << name(o.getWeight()) << ", "
           << name(o.getBias()) << ", " << sum << ", " << y << ", "
           << numel(o.getLhs()) / c << ", " << c << ", "
           << literal(o.getEps().convertToDouble()) << ");\n";
        return success();
      })
      .Case<train::LayerNormGradOp, train::LayerNormGradAddOp>([&](auto o) {
        std::string dx = allocate(o.getInputGrad());
        std::string dw = allocate(o.getWeightGrad());
        std::string db = allocate(o.getBiasGrad());
        int64_t c = shapeOf(o.getInput()).back();
        os << kernel(o->getName().stripDialect(), o.getInputGrad())
           << name(o.getGrad()) << ", " << name(o.getInput()) << ", "
           << name(o.getWeight()) << ", ";
        if constexpr (std::is_same_v<decltype(o), train::LayerNormGradAddOp>)
          os << name(o.getAddend()) << ", ";
        os << dx << ", " << dw << ", " << db << ", " << numel(o.getInput()) / c
           << ", " << c << ", " << literal(o.getEps().convertToDouble())
           << ");\n";
        return success();
      })
      .Case([&](train::EmbeddingOp o) {
        std::string y = allocate(o.getResult());
        ArrayRef<int64_t> table = shapeOf(o.getTable());
        checkIds(kernel("embedding", o.getResult()), llvm::formatv("{0}, {1}, {2}, {3}, "
                               "{4}, {5}",
                               name(o.getIds()), name(o.getTable()), y,
                               numel(o.getIds()), table[0], table[1])
                     .str());
        return success();
      })
      .Case([&](train::EmbeddingGradOp o) {
        std::string dt = allocate(o.getResult());
        ArrayRef<int64_t> table = shapeOf(o.getResult());
        checkIds(kernel("embedding_grad", o.getResult()), llvm::formatv("{0}, {1}, {2}, "
                               "{3}, {4}, {5}",
                               name(o.getGrad()), name(o.getIds()), dt,
                               numel(o.getIds()), table[0], table[1])
                     .str());
        return success();
      })
      .Case([&](train::AttentionOp o) {
        std::string y = allocate(o.getResult());
        std::string lse = o.getLse() ? allocate(o.getLse()) : "nullptr";
        ArrayRef<int64_t> res = shapeOf(o.getResult());
        os << kernel("attention", o.getResult()) << name(o.getQkv()) << ", "
           << y << ", " << lse << ", " << res[0] << ", " << res[1] << ", "
           << res[2] << ", " << o.getHeads() << ");\n";
        return success();
      })
      .Case([&](train::AttentionGradOp o) {
        std::string dqkv = allocate(o.getResult());
        ArrayRef<int64_t> dy = shapeOf(o.getGrad());
        os << kernel("attention_grad", o.getResult()) << name(o.getGrad())
           << ", " << name(o.getQkv()) << ", " << name(o.getOut()) << ", "
           << name(o.getLse()) << ", " << dqkv << ", " << dy[0] << ", " << dy[1]
           << ", " << dy[2] << ", " << o.getHeads() << ");\n";
        return success();
      })
      .Case([&](train::CrossEntropyOp o) {
        std::string l = allocate(o.getResult());
        checkIds(kernel("cross_entropy", o.getLogits()),
                 llvm::formatv("{0}, {1}, {2}, {3}, {4}, {5}",
                               name(o.getLogits()), name(o.getTargets()), l,
                               numel(o.getTargets()), o.getNumClasses(),
                               shapeOf(o.getLogits()).back())
                     .str());
        return success();
      })
      .Case([&](train::CrossEntropyGradOp o) {
        std::string d = allocate(o.getResult());
        checkIds(kernel("cross_entropy_grad", o.getResult()),
                 llvm::formatv("{0}, {1}, {2}, {3}, {4}, {5}, {6}",
                               name(o.getGrad()), name(o.getLogits()),
                               name(o.getTargets()), d, numel(o.getTargets()),
                               o.getNumClasses(), shapeOf(o.getLogits()).back())
                     .str());
        return success();
      })
      .Case([&](train::CrossEntropyAndGradOp o) {
        std::string l = allocate(o.getLoss());
        std::string d = allocate(o.getLogitsGrad());
        checkIds(kernel("cross_entropy_and_grad", o.getLogits()),
                 llvm::formatv("{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}",
                               name(o.getGrad()), name(o.getLogits()),
                               name(o.getTargets()), l, d,
                               numel(o.getTargets()), o.getNumClasses(),
                               shapeOf(o.getLogits()).back())
                     .str());
        return success();
      })
      .Case([&](train::IotaOp o) {
        std::string y = allocate(o.getResult());
        os << kernel("iota_i32") << y << ", " << numel(o.getResult())
           << ");\n";
        return success();
      })
      .Case([&](train::SumToOp o) {
        std::string y = allocate(o.getResult());
        int64_t inner = numel(o.getResult());
        os << kernel("sum_to", o.getResult()) << name(o.getInput()) << ", " << y
           << ", " << numel(o.getInput()) / inner << ", " << inner << ");\n";
        return success();
      })
      .Case([&](train::ReshapeOp o) {
        names[o.getResult()] = name(o.getInput());
        return success();
      })
      .Default([&](Operation *o) {
        return LogicalResult(o->emitOpError("has no lowering to an executable"));
      });
}

} // namespace

static LogicalResult emitStep(ModuleOp module, Target target,
                              llvm::raw_ostream &os) {
  FailureOr<ModelOp> single = train::getSingleModel(module, "emitting");
  if (failed(single))
    return failure();
  ModelOp model = *single;
  if (!model->getAttrOfType<StringAttr>(kStrategyAttrName))
    return model.emitOpError(
        "is not sharded: run --shardc-shard (and --shardc-schedule) first");
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(
      model, FlatSymbolRefAttr::get(model.getContext(), "mesh"));
  if (!mesh)
    return model.emitOpError("has no dist.mesh @mesh");
  return StepEmitter(model, mesh, target, os).emit();
}

LogicalResult shardc::emitHostCpp(ModuleOp module, llvm::raw_ostream &os) {
  return emitStep(module, Target::host, os);
}

LogicalResult shardc::emitCudaCpp(ModuleOp module, llvm::raw_ostream &os) {
  return emitStep(module, Target::cuda, os);
}

void shardc::registerStepTranslations() {
  auto registerOne = [](StringRef flag, StringRef description,
                        LogicalResult (*emit)(ModuleOp, llvm::raw_ostream &)) {
    TranslateFromMLIRRegistration(
        flag, description,
        [emit](Operation *op, llvm::raw_ostream &os) {
          auto module = dyn_cast<ModuleOp>(op);
          if (!module)
            return LogicalResult(op->emitError("expected a builtin.module"));
          return emit(module, os);
        },
        [](DialectRegistry &registry) {
          registerAllDialects(registry);
          // mlirTranslateMain has every diagnostic print the whole model
          // after it; the location says where, as in shardc-opt. Turned off
          // as the registry joins the translation's context, where the
          // builtin dialect is loaded: before the parser, the verifier or
          // the emitter can report anything.
          registry.addExtension(+[](MLIRContext *context, BuiltinDialect *) {
            context->printOpOnDiagnostic(false);
          });
        });
  };
  registerOne("shardc-to-host-cpp",
              "emit a sharded training step as C++ calling the shardc "
              "runtime (CPU kernels, MPI)",
              emitHostCpp);
  registerOne("shardc-to-cuda",
              "emit a sharded training step as CUDA C++ (CUDA kernels, NCCL "
              "on per-communicator streams)",
              emitCudaCpp);
}
