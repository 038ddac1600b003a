//===- shardc.cpp - Build and run sharded training executables ------------===//
//
//   shardc build model.mlir --strategy zero3 --mesh 4 -o step
//   shardc run model.mlir --strategy zero3 --np 4 -- --steps 20
//   shardc emit model.mlir --strategy zero3 --mesh 4 -o step.cpp
//
// build runs the pipeline (wrap?, autodiff, shard, schedule, ledger), emits
// the step as C++, and compiles it against the runtime with the MPI compiler;
// run also launches it with mpirun.
//
//===----------------------------------------------------------------------===//

#include "Config.h"

#include "shardc/Dialect/Dist/Transforms/Passes.h"
#include "shardc/InitAll.h"
#include "shardc/Support/Bytes.h"
#include "shardc/Support/Files.h"
#include "shardc/Support/ParserInput.h"
#include "shardc/Target/Cpp/StepEmitter.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <sys/wait.h>

using namespace mlir;

namespace {

constexpr int kUsageError = 2;

const char *kUsage = R"(usage:
  shardc build MODEL.mlir [options] -o EXECUTABLE
  shardc run MODEL.mlir [options] [--np N] [-- EXECUTABLE-FLAGS...]
  shardc emit MODEL.mlir [options] -o FILE.cpp
  (MODEL.mlir -: the model from standard input; emit -o -: the source to
  standard output)

options (as --shardc-pipeline's):
  --strategy ddp|zero1|zero2|zero3|fsdp|hsdp|auto   (default zero3; auto:
                               the first of ddp, zero1, zero2, zero3 whose
                               predicted peak fits --memory-budget; with
                               --machine, the fastest predicted that fits,
                               zero3's reshard-after-forward settings too
                               where it is not given)
  --mesh N|RxS                 ranks (RxS: hsdp's replicate x shard)
  --target host|cuda|cudasim   (default host: C++ over MPI, BLAS; cudasim:
                               target=cuda's code run on the CPU by
                               runtime/cudasim, to test it without a GPU)
  --wrap per-layer|min-params=P
  --recompute UNITS            activation checkpointing: the backward of
                               these units runs their forward again instead
                               of keeping activations (names or globs,
                               comma-separated; '*' for every unit; auto:
                               the fewest leading units that fit
                               --memory-budget)
  --recompute-policy full|save-matmuls
                               save-matmuls: the recomputed units keep GEMM
                               and attention results, recompute the rest
  --reshard-after-forward true|false|K
                               zero3/hsdp: gather again for the backward,
                               keep the forward's gather, or keep its shard
                               over K consecutive ranks (a node) and gather
                               the backward's over those (FSDP2's int form,
                               ZeRO++'s hpZ)
  --reshard-last-unit true|false
                               zero3/hsdp: the unit whose forward runs last
                               reshards too (default false: it keeps its
                               gather for its backward, which follows at
                               once, as torchtitan does)
  --layout dim0|flat           FSDP2 per-param shards, or FSDP1 flat params
  --param-dtype f32|bf16  --reduce-dtype f32|bf16
  --bucket-mb MB  --grad-accum K  --prefetch D
  --grad-sync step|microbatch  with --grad-accum: reduce gradients once per
                               step (default), or each micro-batch's into
                               the rank's shard (zero2/zero3/hsdp: FSDP2's
                               and DeepSpeed's way; sharded gradients, K
                               times the reduce-scatters)
  --unit-bucket-mb MB          zero3/hsdp flat: small units share a flat param
  --offload-optimizer true|false
                               the optimizer state in host memory, updated
                               on the host CPU (ZeRO-Offload): off the
                               device, for a copy of the gradients and
                               updated values each step
  --offload-params true|false  with --offload-optimizer (zero3, hsdp): the
                               stored param shards in host memory too,
                               each gather copying its shard to the device
                               (FSDP2's CPUOffloadPolicy)
  --fuse true|false            fused kernels: linear+gelu, add+layernorm,
                               their gradients, a linear's weight and bias
                               gradients, and the loss with its gradient
                               (default true)
  --fuse-exclude OPS           with --fuse: fused ops not to form, comma-
                               separated (matmul_bias_grad, linear_gelu,
                               ...: shardc-opt --help's train-fuse exclude)
  --memory-budget SIZE         fail when the predicted peak is larger
                               (bytes, or 80GB, 75GiB: GB = 10^9 bytes;
                               0: no budget)
  --machine h100|h200|a100     the ledger also predicts the step's time on
                               this machine (a roofline of the scheduled
                               step: compute, collectives, exposed waits)
  --ranks-per-node N           with --machine: ranks per node (default 8)
  --ledger-json FILE           the ledger as JSON (- for stdout; else a table
                               on stderr)
  --quiet                      no ledger table
run: --np N (the mesh's rank count; --mesh defaults to N); flags after --
go to the executable (--steps, --seed, --init, --data, --export, --save,
--load, --log-json).
environment: SHARDC_MPICXX, SHARDC_MPIRUN, SHARDC_NVCC name the MPI compiler,
the launcher and nvcc instead of those found when shardc was configured.
)";

struct Options {
  std::string command, input, output;
  std::string target = "host";
  std::map<std::string, std::string> pipeline; // option -> value
  std::optional<int64_t> np;
  std::string ledgerJson;
  bool quiet = false;
  std::vector<std::string> runArgs;
};

[[noreturn]] void usageError(const llvm::Twine &message) {
  llvm::errs() << "shardc: " << message << "\n(shardc --help for usage)\n";
  std::exit(kUsageError);
}

/// The mesh's rank count: N, or R*S; -1 when `mesh` is not of that form
/// (checkPipelineValue refuses it).
int64_t meshRanks(const std::string &mesh) {
  int64_t ranks = 1;
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(mesh).split(parts, 'x');
  if (parts.size() > 2)
    return -1;
  for (llvm::StringRef part : parts) {
    int64_t n = 0;
    if (part.getAsInteger(10, n) || n < 1 ||
        __builtin_mul_overflow(ranks, n, &ranks))
      return -1;
  }
  return ranks;
}

/// What is wrong with `value` for pipeline option `name`, or "": checked
/// here because the option parser's own message misleads ("Cannot find
/// option named 'bogus'!") and goes straight to stderr. The values mirror
/// ShardcPipelineOptions (lib/Dialect/Dist/Transforms/Pipeline.cpp), as
/// pipelineOptions below mirrors its names; ranges are the passes' to check.
/// A good value is rewritten as the pipeline takes it (memory-budget's size
/// in bytes).
std::string checkPipelineValue(const std::string &name, std::string &value) {
  auto expect = [&](llvm::ArrayRef<llvm::StringRef> allowed,
                    llvm::StringRef what) -> std::string {
    if (llvm::is_contained(allowed, value))
      return "";
    return "--" + name + ": expected " + what.str() + ", got '" + value + "'";
  };
  if (name == "strategy")
    return expect({"ddp", "zero1", "zero2", "zero3", "fsdp", "hsdp", "auto"},
                  "ddp, zero1, zero2, zero3, fsdp, hsdp or auto");
  if (name == "param-dtype" || name == "reduce-dtype")
    return expect({"f32", "bf16"}, "f32 or bf16");
  if (name == "layout")
    return expect({"dim0", "flat"}, "dim0 or flat");
  if (name == "grad-sync")
    return expect({"step", "microbatch"}, "step or microbatch");
  if (name == "recompute-policy")
    return expect({"full", "save-matmuls"}, "full or save-matmuls");
  if (name == "fuse" || name == "offload-optimizer" ||
      name == "offload-params" || name == "reshard-last-unit")
    return expect({"true", "false", "1", "0"}, "true or false");
  int64_t number;
  if (name == "reshard-after-forward" && value != "true" && value != "false" &&
      (llvm::StringRef(value).getAsInteger(10, number) || number < 2))
    return "--" + name + ": expected true, false or a number of ranks " +
           "from 2, got '" + value + "'";
  double mb;
  if ((name == "bucket-mb" || name == "unit-bucket-mb") &&
      (llvm::StringRef(value).getAsDouble(mb) ||
       !shardc::dist::isBucketMBInRange(mb)))
    return "--" + name + ": expected a number of MiB from 0 to 2^40, got '" +
           value + "'";
  if (name == "memory-budget") {
    std::optional<int64_t> bytes = shardc::parseBytes(value);
    if (!bytes)
      return "--" + name +
             ": expected a byte count (80GB, 75GiB, 1e9): a decimal number, "
             "then B, KB, MB, GB, TB, KiB, MiB, GiB or TiB (bytes: a capital "
             "B), from 1 byte to 2^62 (0: none), got '" +
             value + "'";
    value = std::to_string(*bytes);
  }
  // Ranges here too, so that the error names the flag (the pipeline's
  // would point at the model).
  int64_t least = name == "prefetch" ? 0 : 1;
  if ((name == "grad-accum" || name == "prefetch" ||
       name == "ranks-per-node") &&
      (llvm::StringRef(value).getAsInteger(10, number) || number < least))
    return "--" + name + ": expected an integer >= " + std::to_string(least) +
           ", got '" + value + "'";
  if (name == "mesh" && meshRanks(value) < 1)
    return "--mesh: expected N or RxS (numbers of ranks >= 1), got '" + value +
           "'";
  llvm::StringRef minParams(value);
  if (name == "wrap" && value != "per-layer" &&
      (!minParams.consume_front("min-params=") ||
       minParams.getAsInteger(10, number) || number < 1))
    return "--wrap: expected per-layer or min-params=P with P >= 1, got '" +
           value + "'";
  return "";
}

/// Fails unless shardc can write `path` (`flag` names it in errors): its
/// directory must exist and be writable, and the path must name nothing or a
/// regular file, which the write replaces (by rename, so never a device such
/// as /dev/null). Checked before any work, so that a long build does not end
/// in a write error.
void checkOutputPath(llvm::StringRef flag, const std::string &output) {
  // Through a symlink, the file it names is the one written.
  std::string path, error;
  if (llvm::failed(shardc::resolveOutput(output, path, error)))
    usageError((flag + " ").str() + error);
  llvm::StringRef dir = llvm::sys::path::parent_path(path);
  if (dir.empty())
    dir = ".";
  std::string what = (flag + " " + output).str();
  if (path != output)
    what += " (a link to " + path + ")";
  if (!llvm::sys::fs::is_directory(dir))
    usageError(what + ": no directory '" + dir.str() + "'");
  if (llvm::sys::fs::access(dir, llvm::sys::fs::AccessMode::Write))
    usageError(what + ": cannot write in directory '" + dir.str() + "'");
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(path, status))
    return; // nothing there yet
  if (llvm::sys::fs::is_directory(status))
    usageError(what + ": is a directory");
  if (!llvm::sys::fs::is_regular_file(status))
    usageError(what + ": exists and is not a regular file (a device, a pipe "
                      "or a socket), which the write would replace");
}

/// Whether every '}' of `value` closes a '{' before it, and every '{' is
/// closed: an unbalanced one would end, or open, a pipeline option.
bool balancedBraces(llvm::StringRef value) {
  int depth = 0;
  for (char c : value) {
    depth += c == '{' ? 1 : c == '}' ? -1 : 0;
    if (depth < 0)
      return false;
  }
  return depth == 0;
}

Options parseArgs(int argc, char **argv) {
  Options o;
  std::map<std::string, std::string> given; // flag -> its value
  if (argc < 2)
    usageError("expected a command: build, run or emit");
  o.command = argv[1];
  if (o.command == "--help" || o.command == "-h") {
    llvm::outs() << kUsage;
    std::exit(0);
  }
  if (o.command != "build" && o.command != "run" && o.command != "emit")
    usageError("unknown command '" + o.command + "': expected build, run or emit");
  static const char *pipelineOptions[] = {"strategy",
                                          "mesh",
                                          "wrap",
                                          "reshard-after-forward",
                                          "reshard-last-unit",
                                          "param-dtype",
                                          "reduce-dtype",
                                          "bucket-mb",
                                          "grad-accum",
                                          "grad-sync",
                                          "prefetch",
                                          "memory-budget",
                                          "layout",
                                          "unit-bucket-mb",
                                          "fuse",
                                          "fuse-exclude",
                                          "recompute",
                                          "recompute-policy",
                                          "offload-optimizer",
                                          "offload-params",
                                          "machine",
                                          "ranks-per-node"};
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      if (o.command != "run")
        usageError("'--' passes flags to the executable: only with run");
      o.runArgs.assign(argv + i + 1, argv + argc);
      break;
    }
    if (arg == "--help" || arg == "-h") {
      llvm::outs() << kUsage;
      std::exit(0);
    }
    if (arg == "--quiet") {
      o.quiet = true;
      continue;
    }
    if (arg == "-" || arg.rfind("-", 0) != 0) { // -: standard input
      if (!o.input.empty())
        usageError("two inputs: '" + o.input + "' and '" + arg + "'");
      o.input = arg;
      continue;
    }
    // --flag value or --flag=value
    std::string flag = arg, value;
    bool inlineValue = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inlineValue = true;
    }
    std::string name = flag.substr(flag.rfind('-', 1) == 1 ? 2 : 1);
    // An unknown flag is said as such, before its value is looked for.
    bool known =
        flag == "-o" || flag == "--target" || flag == "--np" ||
        flag == "--ledger-json" ||
        (flag.rfind("--", 0) == 0 && llvm::is_contained(pipelineOptions, name));
    if (!known) {
      static const char *executableFlags[] = {
          "--steps",       "--seed",       "--init",         "--data",
          "--export",      "--save",       "--load",         "--save-every",
          "--save-keep",   "--log-json",   "--profile",      "--trace",
          "--trace-steps", "--eval-every", "--eval-batches", "--eval-data",
          "--check-grads"};
      if (o.command == "run" && llvm::is_contained(executableFlags, flag))
        usageError("unknown option '" + flag +
                   "': the executable's flags go after --");
      usageError("unknown option '" + flag + "'");
    }
    if (!inlineValue) {
      // A flag's value may not look like a flag: `--mesh --strategy zero3`
      // lacks the mesh, not an input named zero3.
      const char *next = i + 1 < argc ? argv[i + 1] : nullptr;
      if (!next || (next[0] == '-' && next[1] != '\0' &&
                    !std::isdigit(static_cast<unsigned char>(next[1]))))
        usageError(flag + ": missing value" +
                   (next ? " (got '" + std::string(next) + "')" : ""));
      value = argv[++i];
    }
    // Given twice with different values: which one was meant is unknown.
    if (auto [it, inserted] = given.try_emplace(flag, value);
        !inserted && it->second != value)
      usageError(flag + " given twice ('" + it->second + "', '" + value + "')");
    if (flag == "-o") {
      if (value.empty())
        usageError("-o: an empty path (an unset shell variable?)");
      o.output = value;
    } else if (flag == "--target") {
      if (value != "host" && value != "cuda" && value != "cudasim")
        usageError("--target: expected host, cuda or cudasim, got '" + value +
                   "'");
      o.target = value;
    } else if (flag == "--np") {
      char *end = nullptr;
      long long n = std::strtoll(value.c_str(), &end, 10);
      if (*end || n < 1 || n > (1 << 24))
        usageError("--np: expected a rank count from 1 to 2^24, got '" + value +
                   "'");
      o.np = n;
    } else if (flag == "--ledger-json") {
      // The pipeline takes the path double-quoted (pipelineOptions).
      if (value.find('"') != std::string::npos)
        usageError("--ledger-json: a path with a '\"' is not supported, got '" +
                   value + "'");
      if (value.empty())
        usageError("--ledger-json: an empty path (an unset shell variable?)");
      o.ledgerJson = value;
    } else { // a pipeline option (known)
      // Braces would end the pipeline's options; a recompute glob's
      // alternatives ({0,1}) nest there and are allowed, balanced.
      bool globs = name == "recompute";
      if (value.empty())
        usageError(flag + ": an empty value (an unset shell variable?)");
      if (value.find_first_of(globs ? " \"'" : " {}\"'") != std::string::npos ||
          !balancedBraces(value))
        usageError(flag + ": a value with " +
                   (globs ? "a space, a quote or unbalanced braces"
                          : "a space, a quote or a brace") +
                   " cannot pass into the pipeline's options, got '" + value +
                   "'");
      // The pass options read a value in braces without them: "{}" is "".
      if (value.find_first_not_of("{}") == std::string::npos)
        usageError(flag + ": expected unit names or globs, got '" + value +
                   "'");
      if (std::string why = checkPipelineValue(name, value); !why.empty())
        usageError(why);
      o.pipeline[name] = value;
    }
  }
  if (o.input.empty())
    usageError("expected a model file (.mlir)");
  // A file, standard input, or a pipe (<(shardc-gen ...)); a device such as
  // /dev/zero would be read until memory runs out.
  llvm::sys::fs::file_status input;
  if (o.input != "-" && !llvm::sys::fs::status(o.input, input) &&
      !llvm::sys::fs::is_regular_file(input) &&
      input.type() != llvm::sys::fs::file_type::fifo_file)
    usageError("'" + o.input + "': " +
               (llvm::sys::fs::is_directory(input)
                    ? "is a directory, not a model file (.mlir)"
                    : "is a device or a socket, not a model file (.mlir)"));
  if (o.command != "run" && o.output.empty())
    usageError("expected -o OUTPUT");
  if (o.np && o.command != "run")
    usageError("--np: only with run (build takes --mesh)");
  if (o.command == "run") {
    if (!o.np && !o.pipeline.count("mesh"))
      usageError("run: expected --np N (or --mesh)");
    if (!o.pipeline.count("mesh"))
      o.pipeline["mesh"] = std::to_string(*o.np);
    // Before any work: mpirun would otherwise start the wrong rank count.
    int64_t ranks = meshRanks(o.pipeline["mesh"]);
    if (o.np && ranks > 0 && *o.np != ranks)
      usageError("--np " + std::to_string(*o.np) + " does not match --mesh " +
                 o.pipeline["mesh"] + " (" + std::to_string(ranks) +
                 (ranks == 1 ? " rank)" : " ranks)"));
  }
  // What the searches need, in this command's words (the pipeline's own
  // errors, the same rules, say memory-budget=BYTES). Under --strategy
  // auto, --recompute auto only acts where no strategy fits a budget.
  auto has = [&](const char *name) { return o.pipeline.count(name) != 0; };
  bool budget = has("memory-budget") && o.pipeline["memory-budget"] != "0";
  bool autoStrategy = has("strategy") && o.pipeline["strategy"] == "auto";
  if (autoStrategy && !budget && !has("machine"))
    usageError("--strategy auto: expected --memory-budget SIZE > 0 (the "
               "first strategy that fits) or --machine (the fastest)");
  if (!autoStrategy && !budget && has("recompute") &&
      o.pipeline["recompute"] == "auto")
    usageError("--recompute auto: expected --memory-budget SIZE > 0 (the "
               "fewest units that fit)");
  // As the pipeline's own warnings of an option another makes moot.
  if (o.pipeline.count("fuse-exclude") && o.pipeline.count("fuse") &&
      o.pipeline["fuse"] == "false")
    llvm::errs() << "shardc: warning: --fuse-exclude: ignored with --fuse "
                    "false (nothing is fused)\n";
  // -o -: emit's source on standard output, as --ledger-json -'s JSON.
  if (o.output == "-" && o.command != "emit")
    usageError("-o -: an executable does not go to standard output (only "
               "emit's source does): name a file");
  if (o.output == "-" && o.ledgerJson == "-")
    usageError("-o - and --ledger-json -: both would go to standard output");
  if (!o.output.empty() && o.output != "-")
    checkOutputPath("-o", o.output);
  if (!o.ledgerJson.empty() && o.ledgerJson != "-")
    checkOutputPath("--ledger-json", o.ledgerJson);
  // As gcc: an output over the input, or over the other output, is refused.
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!o.output.empty() && o.output != "-")
    outputs.push_back({"-o", o.output});
  if (!o.ledgerJson.empty() && o.ledgerJson != "-")
    outputs.push_back({"--ledger-json", o.ledgerJson});
  for (const auto &[flag, path] : outputs)
    if (shardc::isSameFile(path, o.input))
      usageError(flag + " " + path + ": is the input model '" + o.input +
                 "', which the write would replace");
  if (outputs.size() == 2 && shardc::isSameFile(o.output, o.ledgerJson))
    usageError("--ledger-json " + o.ledgerJson + ": is also -o's file '" +
               o.output + "'");
  if (o.target == "cuda" && !SHARDC_RT_CUDA_AVAILABLE)
    usageError("--target cuda: this shardc was built without nvcc and NCCL; "
               "use --target host");
  if (o.target == "cudasim" && !SHARDC_RT_CUDASIM_AVAILABLE)
    usageError("--target cudasim: this shardc was built without the CUDA "
               "headers (or not on x86-64); use --target host");
  return o;
}

/// --shardc-pipeline's options, as one string its own parser reads (not a
/// textual pipeline, whose braces a quoted path could not hold).
std::string pipelineOptions(const Options &o,
                            const shardc::PendingOutput *ledger) {
  std::string text;
  for (auto &[name, value] : o.pipeline)
    text += name + "=" + value + " ";
  // The ledger always runs (it enforces --memory-budget); --quiet only
  // drops its table.
  // A file's JSON goes to `ledger`, moved into place once the build
  // succeeded (finishLedger); "-" is stdout.
  if (o.ledgerJson == "-")
    text += "format=json output=- ";
  else if (ledger)
    text += "format=json output=\"" + ledger->path() + "\" ";
  else if (o.quiet)
    text += "output=/dev/null ";
  return text;
}

/// A file removed if shardc is interrupted (SIGINT, SIGTERM) while this
/// lives, as LLVM's tools guard theirs (RemoveFileOnSignal): the emitted
/// step, a run's executable.
class RemovedOnSignal {
public:
  explicit RemovedOnSignal(llvm::StringRef path) : path(path.str()) {
    llvm::sys::RemoveFileOnSignal(this->path);
  }
  ~RemovedOnSignal() { llvm::sys::DontRemoveFileOnSignal(path); }
  RemovedOnSignal(const RemovedOnSignal &) = delete;
  RemovedOnSignal &operator=(const RemovedOnSignal &) = delete;

private:
  std::string path;
};

/// A write to a closed pipe (`shardc build ... 2>&1 | head -1`, the
/// compiler's errors then shardc's own) ends shardc as by default, its
/// RemovedOnSignal files removed first, as for SIGINT and SIGTERM (LLVM's
/// handlers leave SIGPIPE to the program). A caught signal is back to its
/// default in the programs shardc starts.
void removeFilesOnBrokenPipe(int signal) {
  llvm::sys::RunInterruptHandlers();
  std::signal(signal, SIG_DFL);
  raise(signal);
}

/// The program `execute` waits on (0: none), and whether shardc was
/// interrupted (SIGINT, SIGTERM, SIGHUP) while it waited.
std::atomic<pid_t> waitedProgram{0};
std::atomic<bool> interrupted{false};

/// LLVM's interrupt function while `execute` waits, called by its signal
/// handler once it has removed the RemovedOnSignal files and restored the
/// default actions: stops the program, which a signal sent to shardc alone
/// (not to its process group, as a terminal's Ctrl-C is) would leave
/// running, writing where those files were. `execute` then ends shardc.
void stopWaitedProgram() {
  interrupted = true;
  if (pid_t pid = waitedProgram)
    kill(pid, SIGTERM);
}

/// Runs a program, its output passing through; its exit code. Interrupted
/// meanwhile, shardc stops the program and ends by the signal the program
/// ended by (SIGTERM where it exited): as a terminal's Ctrl-C would have
/// ended both. With `scratch`, the program's TMPDIR is a new directory,
/// removed with whatever it holds once the program has ended, interrupted
/// or not: nvcc, stopped, leaves its temporaries there.
int execute(llvm::StringRef program, llvm::ArrayRef<std::string> args,
            bool scratch = false) {
  llvm::SmallVector<llvm::StringRef> argv{program};
  for (const std::string &a : args)
    argv.push_back(a);
  std::string error;
  llvm::SmallString<128> scratchDir;
  std::vector<std::string> environment;
  std::optional<llvm::SmallVector<llvm::StringRef>> env;
  if (scratch) {
    if (std::error_code ec =
            llvm::sys::fs::createUniqueDirectory("shardc-tmp", scratchDir)) {
      llvm::errs() << "shardc: cannot create a temporary directory (TMPDIR): "
                   << ec.message() << "\n";
      return 1;
    }
    for (char **variable = environ; *variable; ++variable)
      if (std::strncmp(*variable, "TMPDIR=", 7) != 0)
        environment.push_back(*variable);
    environment.push_back("TMPDIR=" + scratchDir.str().str());
    env.emplace(environment.begin(), environment.end());
  }
  auto removeScratch = [&] {
    if (!scratchDir.empty())
      llvm::sys::fs::remove_directories(scratchDir);
  };
  interrupted = false;
  llvm::sys::SetInterruptFunction(stopWaitedProgram);
  llvm::sys::ProcessInfo started = llvm::sys::ExecuteNoWait(
      program, argv,
      env ? std::optional<llvm::ArrayRef<llvm::StringRef>>(*env) : std::nullopt,
      {}, 0, &error);
  pid_t pid = started.Pid;
  waitedProgram = pid;
  if (interrupted && pid != 0) // before its pid was known
    kill(pid, SIGTERM);
  int status = 0;
  while (pid != 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  llvm::sys::SetInterruptFunction(nullptr);
  waitedProgram = 0;
  removeScratch();
  if (interrupted)
    raise(pid != 0 && WIFSIGNALED(status) ? WTERMSIG(status) : SIGTERM);
  if (pid == 0) {
    llvm::errs() << "shardc: " << program << ": " << error << "\n";
    return 1;
  }
  if (WIFSIGNALED(status)) {
    // Ended by a signal: a failure, and exit codes are not negative.
    llvm::errs() << "shardc: " << program << ": " << strsignal(WTERMSIG(status))
                 << "\n";
    return 1;
  }
  return WEXITSTATUS(status);
}

/// The tool `name`: the path in environment variable `variable` when set,
/// else the one found at configure time, else `name` on PATH. Called before
/// any work, so that a missing tool leaves nothing behind.
std::string findTool(const char *variable, llvm::StringRef configured,
                     llvm::StringRef name) {
  if (const char *chosen = std::getenv(variable)) {
    if (!llvm::sys::fs::can_execute(chosen) ||
        llvm::sys::fs::is_directory(chosen)) {
      llvm::errs() << "shardc: " << variable << "=" << chosen
                   << ": no such executable\n";
      std::exit(1);
    }
    return chosen;
  }
  if (!configured.empty() && llvm::sys::fs::can_execute(configured))
    return configured.str();
  if (auto found = llvm::sys::findProgramByName(name))
    return *found;
  llvm::errs() << "shardc: cannot find " << name
               << " (install openmpi-bin and libopenmpi-dev, or set "
               << variable << ")\n";
  std::exit(1);
}

/// Appends the space-separated words of `list`, each prefixed.
void appendWords(std::vector<std::string> &args, llvm::StringRef list,
                 llvm::StringRef prefix = "") {
  llvm::SmallVector<llvm::StringRef> words;
  list.split(words, ' ', -1, false);
  for (llvm::StringRef word : words)
    args.push_back((prefix + word).str());
}

/// The compiler command for an emitted step: the MPI compiler wrapper for
/// target=host, and for target=cudasim (target=cuda's source as C++, with
/// cudasim's headers in front of CUDA's); nvcc for target=cuda, given MPI's
/// and NCCL's paths.
std::vector<std::string> compileArgs(const std::string &target,
                                     const std::string &source,
                                     const std::string &output) {
  if (target == "cuda") {
    std::vector<std::string> args = {
        "-std=c++17",           "-O3", SHARDC_CUDA_ARCH_FLAG,
        "-DOMPI_SKIP_MPICXX=1", "-I",  SHARDC_RT_INCLUDE_DIR};
    appendWords(args, SHARDC_RT_CUDA_INCLUDES, "-I");
    args.insert(args.end(), {source, "-o", output, SHARDC_RT_CUDA_LIBRARY});
    appendWords(args, SHARDC_RT_CUDA_LINK_LIBRARIES);
    args.insert(args.end(), {"-lcublasLt", "-lcublas", "-lcudart"});
    return args;
  }
  std::vector<std::string> args = {"-std=c++17", "-O2", "-DOMPI_SKIP_MPICXX=1"};
  if (target == "cudasim") {
    args.push_back("-ffp-contract=off");
    appendWords(args, SHARDC_CUDASIM_INCLUDES, "-I");
    args.insert(args.end(), {"-I", SHARDC_RT_INCLUDE_DIR, "-x", "c++", source,
                             "-x", "none", "-o", output});
    appendWords(args, SHARDC_RT_CUDASIM_LIBRARIES);
  } else {
    args.insert(args.end(), {"-I", SHARDC_RT_INCLUDE_DIR, source, "-o", output,
                             SHARDC_RT_LIBRARY});
  }
  appendWords(args, SHARDC_BLAS_LIBRARIES);
  return args;
}

/// Compiles the emitted step into `output`, atomically: what was at
/// `output` stays when compiling fails (a PendingOutput).
int compile(const std::string &compiler, const std::string &target,
            const std::string &source, const std::string &output) {
  std::string error;
  std::unique_ptr<shardc::PendingOutput> exe =
      shardc::PendingOutput::create(output, error);
  if (!exe) {
    llvm::errs() << "shardc: " << error << "\n";
    return 1;
  }
  int rc = execute(compiler, compileArgs(target, source, exe->path()),
                   /*scratch=*/target == "cuda");
  if (rc != 0) {
    llvm::errs() << "shardc: compiling the emitted step failed (" << compiler
                 << " exited " << rc << ")\n";
    return 1;
  }
  uint64_t size = 0;
  if (llvm::sys::fs::file_size(exe->path(), size) || size == 0) {
    llvm::errs() << "shardc: compiling the emitted step wrote no executable ("
                 << compiler << " exited 0 and wrote nothing for '" << output
                 << "')\n";
    return 1;
  }
  if (llvm::failed(exe->commit(error))) {
    llvm::errs() << "shardc: " << error << "\n";
    return 1;
  }
  return 0;
}

/// Writes `contents` to `path`, replacing it only once all is written
/// (writeOutputOnSuccess), or to standard output for "-": 0, or 1 having
/// said why.
int writeFile(const std::string &path, llvm::StringRef contents) {
  std::string where = path == "-" ? "to standard output" : "'" + path + "'",
              error;
  auto write = [&](llvm::StringRef to) -> llvm::LogicalResult {
    std::error_code ec;
    llvm::raw_fd_ostream os(to, ec);
    if (!ec) {
      os << contents;
      os.flush();
      ec = os.error();
      os.clear_error();
    }
    if (ec)
      llvm::errs() << "shardc: cannot write " << where << ": " << ec.message()
                   << "\n";
    return llvm::failure(bool(ec));
  };
  if (llvm::failed(shardc::writeOutputOnSuccess(path, write, error))) {
    if (!error.empty())
      llvm::errs() << "shardc: " << error << "\n";
    return 1;
  }
  return 0;
}

/// `rc`, once the ledger's JSON (--ledger-json) is moved into place where
/// rc is 0, or removed: a failed build leaves what was there.
int finishLedger(std::unique_ptr<shardc::PendingOutput> &ledger, int rc) {
  if (!ledger)
    return rc;
  std::string error;
  if (rc == 0 && llvm::failed(ledger->commit(error))) {
    llvm::errs() << "shardc: " << error << "\n";
    rc = 1;
  }
  ledger.reset();
  return rc;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  std::signal(SIGPIPE, removeFilesOnBrokenPipe);
  Options o = parseArgs(argc, argv);
  std::string compiler, launcher;
  if (o.command != "emit") {
    bool cuda = o.target == "cuda";
    compiler = cuda ? findTool("SHARDC_NVCC", SHARDC_NVCC, "nvcc")
                    : findTool("SHARDC_MPICXX", SHARDC_MPICXX, "mpicxx");
    llvm::StringRef libraries = cuda ? SHARDC_RT_CUDA_LIBRARY
                                : o.target == "cudasim"
                                    ? SHARDC_RT_CUDASIM_LIBRARIES
                                    : SHARDC_RT_LIBRARY;
    llvm::SmallVector<llvm::StringRef> paths;
    libraries.split(paths, ' ', -1, false);
    for (llvm::StringRef library : paths)
      if (!llvm::sys::fs::exists(library)) {
        llvm::errs() << "shardc: no runtime library " << library
                     << " (build the "
                     << llvm::sys::path::stem(library).drop_front(3)
                     << " target)\n";
        return 1;
      }
  }
  if (o.command == "run" && meshRanks(o.pipeline["mesh"]) != 1)
    launcher = findTool("SHARDC_MPIRUN", SHARDC_MPIEXEC, "mpirun");

  DialectRegistry registry;
  shardc::registerAllDialects(registry);
  shardc::registerAllPasses();
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);

  // The ledger's JSON, which the pipeline writes, until finishLedger moves
  // it into place.
  std::string error;
  std::unique_ptr<shardc::PendingOutput> ledger;
  if (!o.ledgerJson.empty() && o.ledgerJson != "-" &&
      !(ledger = shardc::PendingOutput::create(o.ledgerJson, error))) {
    llvm::errs() << "shardc: " << error << "\n";
    return 1;
  }

  // The options before the model: a typo should not wait for a large parse.
  PassManager pm(&context, ModuleOp::getOperationName());
  if (failed(PassPipelineInfo::lookup("shardc-pipeline")
                 ->addToPipeline(pm, pipelineOptions(o, ledger.get()),
                                 [](const Twine &msg) {
                                   llvm::errs() << "shardc: " << msg << "\n";
                                   return failure();
                                 })))
    return kUsageError;

  auto file = openInputFile(o.input, &error);
  if (!file) {
    llvm::errs() << "shardc: cannot read '" << o.input << "': " << error
                 << "\n";
    return 1;
  }
  if (!shardc::checkParserInput(file->getBufferIdentifier(), file->getBuffer()))
    return 1;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;
  bool piped = succeeded(pm.run(*module));
  if (ledger) // the ledger pass's own guard ended with its writing
    ledger->guardAgain();
  if (!piped)
    return finishLedger(ledger, 1);

  std::string source;
  llvm::raw_string_ostream os(source);
  bool cudaSource = o.target == "cuda" || o.target == "cudasim";
  if (failed(cudaSource ? shardc::emitCudaCpp(*module, os)
                        : shardc::emitHostCpp(*module, os)))
    return finishLedger(ledger, 1);
  if (o.command == "emit")
    return finishLedger(ledger, writeFile(o.output, source));

  // build, or the build half of run: the emitted step, and a run's
  // executable where -o names none, in temporary files.
  llvm::SmallString<128> sourcePath, runExe;
  std::error_code ec = llvm::sys::fs::createTemporaryFile(
      "shardc-step", cudaSource ? "cu" : "cpp", sourcePath);
  if (!ec && o.output.empty())
    ec = llvm::sys::fs::createTemporaryFile("shardc-step", "", runExe);
  if (ec) {
    if (!sourcePath.empty())
      llvm::sys::fs::remove(sourcePath);
    llvm::SmallString<128> temp;
    llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, temp);
    llvm::errs() << "shardc: cannot create a temporary file in '" << temp
                 << "' (TMPDIR): " << ec.message() << "\n";
    return finishLedger(ledger, 1);
  }
  RemovedOnSignal sourceGuard(sourcePath);
  std::optional<RemovedOnSignal> runExeGuard;
  if (!runExe.empty())
    runExeGuard.emplace(runExe);
  std::string exe = o.output.empty() ? runExe.str().str() : o.output;
  int rc = writeFile(sourcePath.str().str(), source);
  if (rc == 0)
    rc = compile(compiler, o.target, sourcePath.str().str(), exe);
  llvm::sys::fs::remove(sourcePath);
  rc = finishLedger(ledger, rc);
  if (rc != 0 || o.command == "build") {
    if (!runExe.empty())
      llvm::sys::fs::remove(runExe);
    return rc;
  }

  // run: the executable's usage names `shardc run`, not its temporary file,
  // and one process needs no mpirun.
  std::string program = "shardc run " + o.input + " [options] --";
  ::setenv("SHARDC_PROGRAM", program.c_str(), /*overwrite=*/1);
  int64_t ranks = meshRanks(o.pipeline["mesh"]);
  if (ranks == 1) {
    rc = execute(exe, o.runArgs);
  } else {
    // -x passes a variable to every rank, set as here or as given.
    std::vector<std::string> args = {"--allow-run-as-root", "--oversubscribe"};
    for (const char *variable : {"OPENBLAS_NUM_THREADS=1", "SHARDC_PROGRAM"})
      args.insert(args.end(), {"-x", variable});
    args.insert(args.end(), {"-np", std::to_string(ranks), exe});
    args.insert(args.end(), o.runArgs.begin(), o.runArgs.end());
    rc = execute(launcher, args);
  }
  // The executable says what went wrong; a launcher may say nothing. The
  // model names the run: a temporary executable is gone by now.
  if (rc != 0) {
    std::string by = ranks > 1 ? launcher : o.output;
    llvm::errs() << "shardc: the run of " << o.input << " exited " << rc
                 << (by.empty() ? "" : " (" + by + ")") << "\n";
  }
  if (!runExe.empty())
    llvm::sys::fs::remove(runExe);
  return rc;
}
