//===- Pipeline.cpp - autodiff, fuse, shard, schedule, ledger in one ------===//

#include "shardc/Dialect/Dist/Transforms/Passes.h"
#include "shardc/Dialect/Train/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace shardc;
using namespace shardc::dist;

namespace {
struct ShardcPipelineOptions
    : public PassPipelineOptions<ShardcPipelineOptions> {
  Option<std::string> wrap{
      *this, "wrap",
      llvm::cl::desc("group layers into units first: per-layer or "
                     "min-params=P (none when empty)"),
      llvm::cl::init("")};
  ListOption<std::string> recompute{
      *this, "recompute",
      llvm::cl::desc("units whose backward recomputes their forward "
                     "(activation checkpointing): names or globs")};
  Option<Strategy> strategy{
      *this, "strategy", llvm::cl::desc("what each rank shards"),
      llvm::cl::init(Strategy::zero3),
      llvm::cl::values(clEnumValN(Strategy::ddp, "ddp", "DDP"),
                       clEnumValN(Strategy::zero1, "zero1", "ZeRO-1"),
                       clEnumValN(Strategy::zero2, "zero2", "ZeRO-2"),
                       clEnumValN(Strategy::zero3, "zero3", "ZeRO-3"),
                       clEnumValN(Strategy::zero3, "fsdp", "alias of zero3"),
                       clEnumValN(Strategy::hsdp, "hsdp", "HSDP"))};
  Option<std::string> mesh{*this, "mesh",
                           llvm::cl::desc("N, or RxS for hsdp"),
                           llvm::cl::init("1")};
  Option<bool> reshardAfterForward{
      *this, "reshard-after-forward",
      llvm::cl::desc("zero3/hsdp: gather again for the backward"),
      llvm::cl::init(true)};
  Option<Layout> layout{
      *this, "layout", llvm::cl::desc("how shards are cut"),
      llvm::cl::init(Layout::dim0),
      llvm::cl::values(clEnumValN(Layout::dim0, "dim0", "FSDP2 per-param"),
                       clEnumValN(Layout::flat, "flat", "FSDP1 flat"))};
  Option<DType> paramDType{
      *this, "param-dtype", llvm::cl::desc("stored, gathered, computed"),
      llvm::cl::init(DType::f32),
      llvm::cl::values(clEnumValN(DType::f32, "f32", "float32"),
                       clEnumValN(DType::bf16, "bf16", "bfloat16"))};
  Option<DType> reduceDType{
      *this, "reduce-dtype", llvm::cl::desc("gradients reduced in"),
      llvm::cl::init(DType::f32),
      llvm::cl::values(clEnumValN(DType::f32, "f32", "float32"),
                       clEnumValN(DType::bf16, "bf16", "bfloat16"))};
  Option<bool> fuse{*this, "fuse",
                    llvm::cl::desc("fuse adjacent ops (train-fuse)"),
                    llvm::cl::init(true)};
  Option<int64_t> bucketMB{
      *this, "bucket-mb",
      llvm::cl::desc("ddp, zero1/zero2 flat: gradient bucket size in MiB"),
      llvm::cl::init(kDefaultBucketMB)};
  Option<int64_t> unitBucketMB{
      *this, "unit-bucket-mb",
      llvm::cl::desc("zero3/hsdp flat: bucket small units (MiB, 0: off)"),
      llvm::cl::init(0)};
  Option<int64_t> gradAccum{*this, "grad-accum",
                            llvm::cl::desc("micro-batches per step"),
                            llvm::cl::init(1)};
  Option<int64_t> prefetch{*this, "prefetch",
                           llvm::cl::desc("units a gather starts ahead"),
                           llvm::cl::init(1)};
  Option<std::string> format{*this, "format",
                             llvm::cl::desc("ledger: text or json"),
                             llvm::cl::init("text")};
  Option<std::string> output{
      *this, "output",
      llvm::cl::desc("ledger: a file, - for stdout, stderr when empty"),
      llvm::cl::init("")};
  Option<int64_t> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("fail over this many bytes per rank (0: none)"),
      llvm::cl::init(0)};
};

void buildShardcPipeline(OpPassManager &pm,
                         const ShardcPipelineOptions &options) {
  if (!options.wrap.empty())
    pm.addPass(train::createShardcWrapPass({options.wrap}));
  train::TrainAutodiffPassOptions autodiff;
  autodiff.recompute.assign(options.recompute.begin(), options.recompute.end());
  pm.addPass(train::createTrainAutodiffPass(autodiff));
  if (options.fuse)
    pm.addPass(train::createTrainFusePass());
  ShardcShardPassOptions shard;
  shard.strategy = options.strategy;
  shard.mesh = options.mesh;
  shard.reshardAfterForward = options.reshardAfterForward;
  shard.layout = options.layout;
  shard.paramDType = options.paramDType;
  shard.reduceDType = options.reduceDType;
  shard.gradAccum = options.gradAccum;
  shard.bucketMB = options.bucketMB;
  shard.unitBucketMB = options.unitBucketMB;
  pm.addPass(createShardcShardPass(shard));
  pm.addPass(createShardcSchedulePass({options.prefetch}));
  pm.addPass(createShardcLedgerPass(
      {options.format, options.output, options.memoryBudget}));
}
} // namespace

void shardc::dist::registerShardcPipeline() {
  PassPipelineRegistration<ShardcPipelineOptions>(
      "shardc-pipeline",
      "The whole compiler in one option: (shardc-wrap), train-autodiff, "
      "(train-fuse), shardc-shard, shardc-schedule, shardc-ledger (options: "
      "those of the passes)",
      buildShardcPipeline);
}
