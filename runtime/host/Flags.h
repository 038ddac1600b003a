//===- Flags.h - The training executable's flags ----------------*- C++ -*-===//
//
// What the command line of an emitted step's executable asks for, parsed
// and checked alike on every rank (Main.cpp runs the rest).
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_HOST_FLAGS_H
#define SHARDC_RT_HOST_FLAGS_H

#include "shardc_rt/shardc_rt.h"

#include <cstdint>
#include <string>

namespace shardc::rt {

/// The flags of a run (--help lists them: kUsage in Flags.cpp).
struct Flags {
  int64_t steps = 1;
  uint64_t seed = 0;
  bool seedGiven = false; // else --load's checkpoint's seed
  std::string init, data, exportPath, save, load, logJson, trace, evalData;
  bool quiet = false, profile = false;
  int64_t checkGrads = 0;
  int64_t saveEvery = 0; // --save-every: 0 for none
  int64_t saveKeep = 0;  // --save-keep: 0 keeps every DIR/step-K
  /// --eval-every K: the evaluation step's loss over --eval-batches
  /// batches, before the first step, after every K-th and after the last
  /// (0: never).
  int64_t evalEvery = 0, evalBatches = 0;
  /// --trace-steps FIRST:LAST: the steps traced (as the step lines number
  /// them), every one by default.
  int64_t traceFirst = 1, traceLast = INT64_MAX;
};

/// A decimal integer that is the whole of `text` (no blanks, no '+'), into
/// `value`; false otherwise (not a number, out of range).
bool parseInt(const char *text, int64_t &value);

/// K where `name` is "step-K" as --save-every names its checkpoints (K
/// without leading zeros); 0 otherwise.
int64_t stepOfCheckpointName(const std::string &name);

/// The flags of argv for `model`, compiled for `world` ranks: every rank
/// parses the same arguments, so every rank reports a bad one, and all
/// exit 1; --help prints the usage on rank 0 and exits 0.
Flags parseFlags(int argc, char **argv, const shardc_rt_model &model,
                 int world);

/// Fails every rank unless all run rank 0's model with the flags that
/// decide what a rank computes and which collectives it reaches.
void checkRanksAgree(const Flags &flags, const shardc_rt_model &m);

} // namespace shardc::rt

#endif // SHARDC_RT_HOST_FLAGS_H
