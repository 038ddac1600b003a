//===- Ledger.cpp - Per-rank memory and bytes on the wire of a step -------===//
//
// Prints the ledger analysis as a table or JSON and enforces the memory
// budget.
//
//===----------------------------------------------------------------------===//

#include "shardc/Dialect/Dist/Analysis/Ledger.h"
#include "shardc/Dialect/Dist/Analysis/Timeline.h"
#include "shardc/Dialect/Dist/Transforms/Passes.h"
#include "shardc/Support/Bytes.h"
#include "shardc/Support/Files.h"
#include "shardc/Support/PassOptions.h"

#include "mlir/IR/TypeUtilities.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "shardc-ledger"

namespace shardc::dist {
#define GEN_PASS_DEF_SHARDCLEDGERPASS
#include "shardc/Dialect/Dist/Transforms/Passes.h.inc"
} // namespace shardc::dist

using namespace mlir;
using namespace shardc;
using namespace shardc::dist;
using train::ModelOp;
using train::ParamOp;

namespace {

/// `evalPeak`: the evaluation step's peak (predictEvalPeak) where the step
/// trains.
void printText(const LedgerReport &r, int64_t evalPeak, llvm::raw_ostream &os) {
  os << "ledger @" << r.model << ": " << r.strategy << " over " << r.world
     << " ranks, " << r.params << " params\n";
  auto row = [&](StringRef name, int64_t bytes) {
    os << llvm::format("  %-22s %16lld  %s\n", name.str().c_str(),
                       static_cast<long long>(bytes), formatBytes(bytes).c_str());
  };
  os << "  per rank                          bytes\n";
  row(r.offloadsParams ? "params (host)" : "params", r.paramBytes);
  row("grads", r.gradBytes);
  row(r.offloadsOptimizer ? "optimizer (host)" : "optimizer", r.optimizerBytes);
  row("model state", r.modelState());
  row("activations", r.activationBytes);
  row("gathered params", r.gatheredBytes);
  row("comm buffers", r.commBytes);
  row("peak", r.peak);
  if (r.trains)
    row("eval peak", evalPeak);
  os << "  per step         count       bytes sent\n";
  auto comm = [&](StringRef name, const LedgerTraffic &t) {
    os << llvm::format("  %-14s %7lld %16lld  %s\n", name.str().c_str(),
                       static_cast<long long>(t.count),
                       static_cast<long long>(t.bytes), formatBytes(t.bytes).c_str());
  };
  comm("all_gather", r.allGather);
  if (r.localAllGather.count)
    comm("  over local", r.localAllGather);
  comm("reduce_scatter", r.reduceScatter);
  comm("all_reduce", r.allReduce);
  if (r.offloadsOptimizer)
    os << llvm::format("  %-22s %16lld  %s (%s)\n", "host copies",
                       static_cast<long long>(r.hostCopyBytes),
                       formatBytes(r.hostCopyBytes).c_str(),
                       r.offloadsParams
                           ? "gradients to the host, shards to the device "
                             "for their gathers"
                           : "gradients to the host, updated values back");
  os << llvm::format("  %-22s %16lld  (%s)\n", "model FLOPs",
                     static_cast<long long>(r.modelFlops),
                     r.trains ? "forward + backward, for MFU" : "forward");
  if (r.hardwareFlops != r.modelFlops)
    os << llvm::format("  %-22s %16lld  (%s)\n", "hardware FLOPs",
                       static_cast<long long>(r.hardwareFlops),
                       "with recomputation, for HFU");
}

/// The timeline's rows, in milliseconds.
void printText(const TimelineReport &t, llvm::raw_ostream &os) {
  os << "  timeline on " << t.machine << ", " << t.ranksPerNode
     << " ranks per node    ms  (a calibrated roofline, not a measurement)\n";
  auto row = [&](StringRef name, double seconds, StringRef note = "") {
    os << llvm::format("  %-22s %16.3f", name.str().c_str(), seconds * 1e3);
    if (!note.empty())
      os << "  " << note;
    os << "\n";
  };
  row("compute", t.matmulSeconds + t.memorySeconds,
      llvm::formatv("matmuls {0:F3}, the rest {1:F3}", t.matmulSeconds * 1e3,
                    t.memorySeconds * 1e3)
          .str());
  row("all_gather", t.allGatherSeconds, "on the communicators' streams");
  row("reduce_scatter", t.reduceScatterSeconds);
  row("all_reduce", t.allReduceSeconds);
  row("exposed communication", t.exposedSeconds,
      "the compute stream waiting on collectives");
  row("step", t.stepSeconds, llvm::formatv("MFU {0:F1}%", t.mfu * 100).str());
  for (auto [what, seconds] : ArrayRef(t.waits).take_front(3))
    row("  wait", seconds, what);
}

llvm::json::Value toJson(const TimelineReport &t) {
  llvm::json::Array waits;
  for (auto [what, seconds] : t.waits)
    waits.push_back(llvm::json::Object{{"what", what}, {"ms", seconds * 1e3}});
  return llvm::json::Object{{"machine", t.machine},
                            {"ranks_per_node", t.ranksPerNode},
                            {"matmul_ms", t.matmulSeconds * 1e3},
                            {"memory_ms", t.memorySeconds * 1e3},
                            {"all_gather_ms", t.allGatherSeconds * 1e3},
                            {"reduce_scatter_ms", t.reduceScatterSeconds * 1e3},
                            {"all_reduce_ms", t.allReduceSeconds * 1e3},
                            {"exposed_ms", t.exposedSeconds * 1e3},
                            {"step_ms", t.stepSeconds * 1e3},
                            {"mfu", t.mfu},
                            {"waits", std::move(waits)}};
}

llvm::json::Value toJson(const LedgerReport &r, int64_t evalPeak) {
  llvm::json::Object json{
      {"model", r.model},
      {"params", r.params},
      {"world", r.world},
      {"strategy", r.strategy},
      {"per_rank", llvm::json::Object{{"params_bytes", r.paramBytes},
                                      {"grads_bytes", r.gradBytes},
                                      {"optimizer_bytes", r.optimizerBytes},
                                      {"model_state_bytes", r.modelState()},
                                      {"activation_bytes", r.activationBytes},
                                      {"gathered_bytes", r.gatheredBytes},
                                      {"comm_buffer_bytes", r.commBytes},
                                      {"peak_bytes", r.peak},
                                      {"model_flops", r.modelFlops},
                                      {"hardware_flops", r.hardwareFlops}}},
      {"comm",
       llvm::json::Object{{"all_gather_bytes", r.allGather.bytes},
                          {"all_gather_count", r.allGather.count},
                          {"reduce_scatter_bytes", r.reduceScatter.bytes},
                          {"reduce_scatter_count", r.reduceScatter.count},
                          {"all_reduce_bytes", r.allReduce.bytes},
                          {"all_reduce_count", r.allReduce.count}}}};
  if (r.trains)
    json.getObject("per_rank")->try_emplace("eval_peak_bytes", evalPeak);
  if (r.localAllGather.count) {
    json.getObject("comm")->try_emplace("local_all_gather_bytes",
                                        r.localAllGather.bytes);
    json.getObject("comm")->try_emplace("local_all_gather_count",
                                        r.localAllGather.count);
  }
  if (r.offloadsOptimizer) {
    json.try_emplace("offload_optimizer", true);
    if (r.offloadsParams)
      json.try_emplace("offload_params", true);
    json.getObject("comm")->try_emplace("host_copy_bytes", r.hostCopyBytes);
  }
  return json;
}

struct ShardcLedgerPass
    : shardc::NamedOptionErrors<
          shardc::dist::impl::ShardcLedgerPassBase<ShardcLedgerPass>> {
  using NamedOptionErrors::NamedOptionErrors;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (memoryBudget < 0) {
      module.emitError() << "expected memory-budget >= 0 bytes, got "
                         << static_cast<int64_t>(memoryBudget);
      return signalPassFailure();
    }
    if (format != "text" && format != "json") {
      module.emitError() << "unknown ledger format '" << format
                         << "': expected text or json";
      return signalPassFailure();
    }
    std::optional<Machine> onMachine;
    if (!machine.empty()) {
      FailureOr<Machine> found = getMachine(module, machine, ranksPerNode);
      if (failed(found))
        return signalPassFailure();
      onMachine = *found;
    } else if (ranksPerNode != 0) {
      module.emitWarning() << "ranks-per-node: ignored without machine";
    }
    FailureOr<SmallVector<ModelOp>> models = train::getModels(module);
    if (failed(models))
      return signalPassFailure();
    std::string text;
    llvm::raw_string_ostream os(text);
    for (ModelOp model : *models) {
      LedgerReport report = computeLedger(model);
      if (report.hardwareFlops == kFlopsOverflow) {
        model.emitOpError() << "runs more than " << kFlopsOverflow
                            << " FLOPs a step per rank, more than the "
                               "ledger counts";
        return signalPassFailure();
      }
      int64_t evalPeak = report.peak;
      if (report.trains) {
        FailureOr<EvalStep> eval = buildEvalStep(model);
        if (failed(eval))
          return signalPassFailure();
        evalPeak = predictEvalPeak(report, eval->model);
      }
      std::optional<TimelineReport> timeline;
      if (onMachine &&
          failed(verifyFillsNodes(model, report.world, *onMachine)))
        return signalPassFailure();
      if (onMachine) {
        FailureOr<TimelineReport> played =
            predictTimeline(model, *onMachine, report.modelFlops);
        if (failed(played))
          return signalPassFailure();
        timeline = *played;
      }
      if (format == "json") {
        llvm::json::Value json = toJson(report, evalPeak);
        if (timeline)
          json.getAsObject()->try_emplace("timeline", toJson(*timeline));
        os << llvm::formatv("{0:2}", std::move(json)) << "\n";
      } else {
        printText(report, evalPeak, os);
        if (timeline)
          printText(*timeline, os);
      }
      if (memoryBudget > 0 && report.peak > memoryBudget) {
        InFlightDiagnostic diag =
            model.emitOpError()
            << "needs a predicted peak of " << report.peak
            << " bytes per rank, over the memory budget of "
            << static_cast<int64_t>(memoryBudget)
            << " bytes";
        explainLedgerByUnit(model, diag);
        // What host memory could take, as DeepSpeed's offload advice.
        bool gathers = report.strategy == "zero3" || report.strategy == "hsdp";
        if (!report.offloadsOptimizer && report.optimizerBytes > 0)
          diag.attachNote() << "offload-optimizer=true would keep the "
                            << report.optimizerBytes
                            << " bytes of optimizer state in host memory";
        else if (report.offloadsOptimizer && !report.offloadsParams && gathers)
          diag.attachNote()
              << "offload-params=true would keep the " << report.paramBytes
              << " bytes of stored params in host memory (over a shard "
                 "axis of one rank, the peak falls by less: its gathers "
                 "stay, as copies)";
        return signalPassFailure();
      }
    }
    if (output.empty()) {
      llvm::errs() << text;
    } else if (output == "-") {
      llvm::outs() << text;
    } else {
      // The model's own file (where its module was parsed from) would be
      // replaced: refused, as a compiler refuses an output over its input.
      auto input = dyn_cast<FileLineColLoc>(module.getLoc());
      if (input && isSameFile(input.getFilename(), output)) {
        module.emitError() << "output '" << output
                           << "' is the input file, which the ledger would "
                              "replace";
        return signalPassFailure();
      }
      std::string error;
      auto file = openOutputFile(output, &error);
      if (!file) {
        module.emitError() << "cannot write the ledger to '" << output
                           << "': " << error;
        return signalPassFailure();
      }
      file->os() << text;
      file->os().flush();
      if (std::error_code ec = file->os().error()) {
        file->os().clear_error();
        module.emitError() << "cannot write the ledger to '" << output
                           << "': " << ec.message();
        return signalPassFailure();
      }
      file->keep();
      // Kept and closed, it stays guarded against an interrupt (the
      // ToolOutputFile dropped that): shardc and shardc-opt give a file
      // beside the output, moved into place only once every pass has
      // succeeded.
      file.reset();
      if (llvm::sys::fs::is_regular_file(output))
        llvm::sys::RemoveFileOnSignal(output);
    }
    markAllAnalysesPreserved();
  }
};

} // namespace
