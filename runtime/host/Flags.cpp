//===- Flags.cpp - The training executable's flags ------------------------===//
//
// The usage text, the parsing of every flag, the checks of the files they
// name against each other, and the check that every rank was given the
// same run.
//
//===----------------------------------------------------------------------===//

#include "Flags.h"

#include "shardc_rt/Checkpoint.h"
#include "shardc_rt/Error.h"
#include "shardc_rt/SafeTensors.h"

#include <mpi.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <sys/stat.h>
#include <utility>

using namespace shardc::rt;

namespace {

const char *kUsage =
    "usage: %s [--steps K] [--seed S] [--init FILE.safetensors]\n"
    "          [--data FILE.safetensors|FILE.bin] [--export FILE.safetensors]\n"
    "          [--save DIR] [--save-every N]  (also DIR/step-K every N steps)\n"
    "          [--save-keep M]  (only the latest M of DIR/step-K)\n"
    "          [--load DIR] [--log-json FILE] [--quiet]\n"
    "          [--profile]  (time per kernel, steps after the first)\n"
    "          [--trace FILE.json]  (every rank's timeline, for Perfetto)\n"
    "          [--trace-steps FIRST:LAST]  (the steps traced; default all)\n"
    "          [--check-grads K]  (one rank: K elements of each gradient\n"
    "                              against finite differences of the loss)\n"
    "          [--eval-every K]  (the loss without an update, at the start,\n"
    "                             every K steps and at the end)\n"
    "          [--eval-batches M]  (batches per evaluation, default 20)\n"
    "          [--eval-data FILE.safetensors|FILE.bin]  (held-out batches;\n"
    "                             default the training data's first M)\n"
    "Trains model @%s (%s over %s)%s.\n";

/// The field of a flag that names a file or a directory, or null.
std::string *pathFlag(Flags &flags, const std::string &flag) {
  if (flag == "--init")
    return &flags.init;
  if (flag == "--data")
    return &flags.data;
  if (flag == "--export")
    return &flags.exportPath;
  if (flag == "--save")
    return &flags.save;
  if (flag == "--load")
    return &flags.load;
  if (flag == "--log-json")
    return &flags.logJson;
  if (flag == "--trace")
    return &flags.trace;
  if (flag == "--eval-data")
    return &flags.evalData;
  return nullptr;
}

/// A path's directory (directoryOf) and name.
std::pair<std::string, std::string> splitPath(const std::string &path) {
  return {directoryOf(path), path.substr(path.find_last_of('/') + 1)};
}

/// What tells two paths apart: the file's device and inode where it
/// exists, else its directory's (resolved) path and its name.
std::string fileIdentity(const std::string &path) {
  struct stat info;
  if (::stat(path.c_str(), &info) == 0)
    return "inode " + std::to_string(info.st_dev) + ":" +
           std::to_string(info.st_ino);
  auto [dir, name] = splitPath(path);
  char resolved[PATH_MAX];
  if (::realpath(dir.c_str(), resolved))
    dir = resolved;
  return "path " + dir + "/" + name;
}

/// Why an output file would overwrite what the run reads or writes
/// elsewhere (--data, --init, another output, a checkpoint file of
/// --load or --save, or of a --save-every checkpoint DIR/step-K), or "".
std::string checkOutputsApart(const Flags &flags) {
  struct Named {
    const char *flag;
    const std::string *path;
  };
  const Named files[] = {
      {"--data", &flags.data},        {"--eval-data", &flags.evalData},
      {"--init", &flags.init},        {"--export", &flags.exportPath},
      {"--log-json", &flags.logJson}, {"--trace", &flags.trace}};
  const Named dirs[] = {{"--load", &flags.load}, {"--save", &flags.save}};
  for (const Named &output : {files[3], files[4], files[5]}) {
    const std::string &path = *output.path;
    if (path.empty())
      continue;
    std::string id = fileIdentity(path);
    for (const Named &other : files)
      // --init X --export X updates X in place: read at startup, replaced
      // by a rename at the end.
      if (other.path != output.path && !other.path->empty() &&
          !(output.path == &flags.exportPath && other.path == &flags.init) &&
          fileIdentity(*other.path) == id)
        return std::string(output.flag) + ": '" + path + "' is also " +
               other.flag + "'s file '" + *other.path +
               "': one would overwrite the other";
    auto [parent, name] = splitPath(path);
    auto [grandparent, parentName] = splitPath(parent);
    bool everySave = !flags.save.empty() && flags.saveEvery > 0;
    std::string saveId = everySave ? fileIdentity(flags.save) : "";
    // --save-every's DIR/step-K itself, which a save makes a directory.
    if (everySave && stepOfCheckpointName(name) > 0 &&
        fileIdentity(parent) == saveId)
      return std::string(output.flag) + ": '" + path +
             "' is --save-every's checkpoint directory (or would be): one "
             "would overwrite the other";
    if (!isCheckpointFileName(name))
      continue;
    for (const Named &dir : dirs)
      if (!dir.path->empty() && fileIdentity(parent) == fileIdentity(*dir.path))
        return std::string(output.flag) + ": '" + path + "' is a file of " +
               dir.flag + "'s checkpoint '" + *dir.path +
               "': one would overwrite the other";
    if (everySave && stepOfCheckpointName(parentName) > 0 &&
        fileIdentity(grandparent) == saveId)
      return std::string(output.flag) + ": '" + path +
             "' is a file of --save-every's checkpoint '" + parent +
             "' (or would be): one would overwrite the other";
  }
  return "";
}

/// FNV-1a over `bytes`, continuing from `hash`.
uint64_t fnv1a(uint64_t hash, const void *bytes, size_t size) {
  for (size_t i = 0; i < size; ++i)
    hash = (hash ^ static_cast<const unsigned char *>(bytes)[i]) *
           0x100000001b3ULL;
  return hash;
}

uint64_t fnv1a(uint64_t hash, const std::string &text) {
  return fnv1a(hash, text.c_str(), text.size() + 1); // with its terminator
}

} // namespace

bool shardc::rt::parseInt(const char *text, int64_t &value) {
  // strtoll would skip leading blanks and take a '+': neither ' 3' nor '+3'
  // is a number here (no save writes one, nor a '+' in JSON).
  if (std::isspace(static_cast<unsigned char>(*text)) || *text == '+')
    return false;
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno || end == text || *end)
    return false;
  value = v;
  return true;
}

int64_t shardc::rt::stepOfCheckpointName(const std::string &name) {
  std::string digits = name.substr(std::min<size_t>(5, name.size()));
  int64_t step = 0;
  if (name.rfind("step-", 0) != 0 || digits.empty() || digits[0] == '0' ||
      digits.find_first_not_of("0123456789") != std::string::npos ||
      !parseInt(digits.c_str(), step))
    return 0;
  return step;
}

/// Every rank parses the same arguments, so every rank reports a bad one.
Flags shardc::rt::parseFlags(int argc, char **argv,
                             const shardc_rt_model &model, int world) {
  Flags flags;
  std::string error;
  std::map<std::string, std::string> given; // flag -> its value
  for (int i = 1; i < argc && error.empty(); ++i) {
    std::string flag = argv[i];
    // --flag=value, as --flag value.
    std::optional<std::string> inlined;
    if (size_t equals = flag.find('=');
        flag.rfind("--", 0) == 0 && equals != std::string::npos) {
      inlined = flag.substr(equals + 1);
      flag.resize(equals);
    }
    auto value = [&]() -> const char * {
      if (inlined) {
        std::string v = std::move(*inlined);
        inlined.reset();
        // The value lives in `given` (where a second one is compared).
        auto [it, inserted] = given.try_emplace(flag, v);
        if (!inserted && it->second != v)
          error = "given twice ('" + it->second + "', '" + v + "')";
        return it->second.c_str();
      }
      if (i + 1 >= argc) {
        error = "missing value";
        return "";
      }
      // "--export --steps 3": the value was forgotten, not a file named
      // --steps meant (./--steps names one).
      if (std::strncmp(argv[i + 1], "--", 2) == 0) {
        error = std::string("missing value ('") + argv[i + 1] +
                "' is a flag; a path that starts with -- is written ./" +
                argv[i + 1] + ")";
        return "";
      }
      const char *v = argv[++i];
      // Given twice with different values: which one was meant is unknown.
      if (auto [it, inserted] = given.try_emplace(flag, v);
          !inserted && it->second != v)
        error = "given twice ('" + it->second + "', '" + v + "')";
      return v;
    };
    if (flag == "--help" || flag == "-h") {
      // `shardc run` names itself: the executable is its temporary file.
      const char *program = std::getenv("SHARDC_PROGRAM");
      std::string launch = "; run under mpirun -np " + std::to_string(world);
      if (worldRank() == 0)
        std::printf(kUsage, program ? program : argv[0], model.name,
                    model.strategy, countOf(world, "rank").c_str(),
                    program ? "" : launch.c_str());
      MPI_Finalize();
      std::exit(0);
    } else if (flag == "--steps") {
      const char *v = value();
      if (error.empty() && (!parseInt(v, flags.steps) || flags.steps < 0))
        error = std::string("expected a step count >= 0, got '") + v + "'";
    } else if (flag == "--seed") {
      const char *v = value();
      int64_t seed = 0;
      if (error.empty() && (!parseInt(v, seed) || seed < 0))
        error = std::string("expected a seed >= 0, got '") + v + "'";
      flags.seed = static_cast<uint64_t>(seed);
      flags.seedGiven = true;
    } else if (std::string *path = pathFlag(flags, flag)) {
      *path = value();
      if (error.empty() && path->empty())
        error = "expected a path, got ''";
    } else if (flag == "--quiet") {
      flags.quiet = true;
    } else if (flag == "--profile") {
      flags.profile = true;
    } else if (flag == "--trace-steps") {
      std::string v = value();
      size_t colon = v.find(':');
      if (error.empty() &&
          (colon == std::string::npos ||
           !parseInt(v.substr(0, colon).c_str(), flags.traceFirst) ||
           !parseInt(v.substr(colon + 1).c_str(), flags.traceLast) ||
           flags.traceFirst < 1 || flags.traceLast < flags.traceFirst))
        error = "expected FIRST:LAST with 1 <= FIRST <= LAST, got '" + v + "'";
    } else if (flag == "--save-every") {
      const char *v = value();
      if (error.empty() &&
          (!parseInt(v, flags.saveEvery) || flags.saveEvery < 1))
        error = std::string("expected a step count >= 1, got '") + v + "'";
    } else if (flag == "--save-keep") {
      const char *v = value();
      if (error.empty() && (!parseInt(v, flags.saveKeep) || flags.saveKeep < 1))
        error =
            std::string("expected a checkpoint count >= 1, got '") + v + "'";
    } else if (flag == "--eval-every" || flag == "--eval-batches") {
      const char *v = value();
      int64_t &count =
          flag == "--eval-every" ? flags.evalEvery : flags.evalBatches;
      if (error.empty() && (!parseInt(v, count) || count < 1))
        error = std::string("expected a count >= 1, got '") + v + "'";
    } else if (flag == "--check-grads") {
      const char *v = value();
      if (error.empty() &&
          (!parseInt(v, flags.checkGrads) || flags.checkGrads < 1))
        error =
            std::string("expected elements per param >= 1, got '") + v + "'";
    } else {
      error = "unknown flag (see --help)";
    }
    if (error.empty() && inlined)
      error = "takes no value, got '" + *inlined + "'";
    if (!error.empty())
      error = flag + ": " + error;
  }
  if (error.empty() && !flags.init.empty() && !flags.load.empty())
    error = "--init: cannot be combined with --load (the checkpoint holds "
            "the params)";
  if (error.empty() && flags.saveEvery > 0 && flags.save.empty())
    error = "--save-every: needs --save DIR (each N-th step's state goes to "
            "DIR/step-K)";
  if (error.empty() && flags.saveKeep > 0 && flags.saveEvery == 0)
    error = "--save-keep: needs --save-every N (it keeps the latest of the "
            "DIR/step-K checkpoints that writes)";
  if (error.empty() && flags.trace.empty() &&
      (flags.traceFirst != 1 || flags.traceLast != INT64_MAX))
    error = "--trace-steps: needs --trace FILE.json";
  if (error.empty() && flags.evalEvery == 0 &&
      (flags.evalBatches > 0 || !flags.evalData.empty()))
    error =
        std::string(flags.evalBatches > 0 ? "--eval-batches" : "--eval-data") +
        ": needs --eval-every K (when to evaluate)";
  // --check-grads trains no step: what concerns steps would be ignored.
  if (error.empty() && flags.checkGrads > 0) {
    const char *stepFlag = !flags.trace.empty()        ? "--trace"
                           : flags.evalEvery > 0       ? "--eval-every"
                           : given.count("--steps")    ? "--steps"
                           : !flags.save.empty()       ? "--save"
                           : !flags.exportPath.empty() ? "--export"
                           : !flags.logJson.empty()    ? "--log-json"
                           : flags.profile             ? "--profile"
                                                       : nullptr;
    if (stepFlag)
      error = std::string(stepFlag) +
              ": cannot be combined with --check-grads (which trains no step)";
  }
  // Found before the run, as a --trace-steps range that traces no step.
  if (error.empty() && flags.profile && flags.steps < 2)
    error = "--profile: needs --steps 2 or more (it times the steps after "
            "the first, which sizes workspaces; this run has " +
            std::to_string(flags.steps) + ")";
  if (flags.evalEvery > 0 && flags.evalBatches == 0)
    flags.evalBatches = 20; // llm.c's val_max_steps
  if (error.empty())
    error = checkOutputsApart(flags);
  SHARDC_RT_CHECK_ALL(error.empty(), "flags", error);
  return flags;
}

/// Fails every rank unless all run rank 0's model with the flags that
/// decide what a rank computes and which collectives it reaches (the step
/// count, the seed, the gradient check, --save-every, the evaluations,
/// which of --init, --data, --eval-data, --load, --save, --export and
/// --trace are given): a rank running
/// other steps, or another model, would wait forever in a collective the
/// others never reach. Paths
/// may differ (node-local copies of the data); --log-json, --quiet and
/// --profile concern rank 0's output only.
void shardc::rt::checkRanksAgree(const Flags &flags, const shardc_rt_model &m) {
  uint64_t basis = 0xcbf29ce484222325ULL;
  uint64_t mine[2] = {basis, basis};
  int64_t decisive[] = {flags.steps,
                        static_cast<int64_t>(flags.seed),
                        flags.checkGrads,
                        !flags.init.empty(),
                        !flags.data.empty(),
                        !flags.load.empty(),
                        !flags.save.empty(),
                        !flags.exportPath.empty(),
                        !flags.trace.empty(),
                        flags.saveEvery,
                        flags.evalEvery,
                        flags.evalBatches,
                        !flags.evalData.empty(),
                        flags.seedGiven};
  mine[0] = fnv1a(mine[0], decisive, sizeof(decisive));
  mine[1] = fnv1a(fnv1a(mine[1], m.name), m.strategy);
  mine[1] = fnv1a(mine[1], m.mesh_shape, m.mesh_rank * sizeof(int64_t));
  for (int32_t p = 0; p < m.num_params; ++p)
    mine[1] = fnv1a(mine[1], m.params[p].name);
  mine[1] = fnv1a(mine[1], &m.predicted, sizeof(m.predicted));
  uint64_t first[2] = {mine[0], mine[1]};
  MPI_Bcast(first, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  SHARDC_RT_CHECK_ALL(
      first[1] == mine[1], "startup",
      "this rank's executable compiles another model than rank 0's (@" +
          std::string(m.name) + ", " + m.strategy +
          "): start every rank with the same executable");
  SHARDC_RT_CHECK_ALL(first[0] == mine[0], "startup",
                      "this rank's flags differ from rank 0's (--steps, "
                      "--seed or whether it is given, --check-grads, "
                      "--save-every, --eval-every, --eval-batches, or which "
                      "files are given): "
                      "start every rank with the same flags");
}
