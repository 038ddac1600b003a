//===- Passes.h - Sharding passes -------------------------------*- C++ -*-===//

#ifndef SHARDC_DIALECT_DIST_TRANSFORMS_PASSES_H
#define SHARDC_DIALECT_DIST_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/Pass.h"
#include "shardc/Dialect/Dist/Analysis/Ledger.h"
#include "shardc/Dialect/Dist/IR/DistOps.h"
#include "shardc/Dialect/Train/IR/TrainOps.h"

namespace shardc::dist {

/// What each rank keeps whole and what it shards (the seeds' table).
enum class Strategy { ddp, zero1, zero2, zero3, hsdp };

/// "ddp", "zero1", ...: the name shardc-shard records and options take.
const char *strategyName(Strategy strategy);

/// The model attribute where shardc-shard records the strategy's name.
constexpr llvm::StringLiteral kStrategyAttrName = "dist.strategy";

/// The model attribute where shardc-shard records offload-optimizer: the
/// optimizer state (moments, f32 masters) lives in host memory and the
/// update runs on the host CPU (DeepSpeed's ZeRO-Offload).
constexpr llvm::StringLiteral kOffloadOptimizerAttrName =
    "dist.offload_optimizer";

/// The model attribute where shardc-shard records offload-params: the
/// stored params (zero3's and hsdp's shards) live in host memory, beside
/// the offloaded optimizer state that updates them there, and each gather
/// first copies its shard to the device (FSDP2's CPUOffloadPolicy,
/// DeepSpeed's offload_param).
constexpr llvm::StringLiteral kOffloadParamsAttrName = "dist.offload_params";

/// The mesh axis of reshard-after-forward=K: K consecutive ranks (a node's
/// GPUs where K is their number), over which a unit's backward gathers the
/// shard its forward kept.
constexpr llvm::StringLiteral kLocalAxisName = "local";

/// Element types a step can compute and communicate in.
enum class DType { f32, bf16 };

/// With micro-batches (grad-accum), when gradients are reduced: once per
/// step, after the last micro-batch (DDP's no_sync), or each micro-batch's,
/// accumulated in the rank's shard (FSDP2's and DeepSpeed's default).
enum class GradSync { step, microbatch };

/// bucket-mb's default (DDP's 25 MiB): shardc-shard's and the pipeline's.
constexpr double kDefaultBucketMB = 25;
/// bucket-mb's and unit-bucket-mb's range, 0 to 2^40 MiB (a bucket's bytes
/// then fit in 64 bits); false for NaN.
constexpr bool isBucketMBInRange(double mb) { return mb >= 0 && mb <= 0x1p40; }

#define GEN_PASS_DECL
#include "shardc/Dialect/Dist/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "shardc/Dialect/Dist/Transforms/Passes.h.inc"

/// Reduces `model`'s step to its evaluation step (shardc-eval-step): what
/// the loss depends on, in the step's order and schedule.
void reduceToEvalStep(train::ModelOp model);

/// A copy of a model's module in which the model is its evaluation step;
/// fails, with an error on `model`, where the copy does not verify.
struct EvalStep {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  train::ModelOp model;
};
mlir::FailureOr<EvalStep> buildEvalStep(train::ModelOp model);

/// The per-rank peak of the evaluation step `eval` of the step `step`
/// reports: the evaluation's own ledger, plus the optimizer state it
/// leaves in memory untouched.
int64_t predictEvalPeak(const LedgerReport &step, train::ModelOp eval);

/// Registers `--shardc-pipeline="strategy=... mesh=..."`: shardc-wrap (with
/// `wrap=POLICY`), train-autodiff, shardc-shard, shardc-schedule and
/// shardc-ledger with one option string.
void registerShardcPipeline();
} // namespace shardc::dist

#endif // SHARDC_DIALECT_DIST_TRANSFORMS_PASSES_H
