//===- FlashAttention.h - Fused causal attention on tensor cores -*- C++ -*-=//
//
// Causal multi-head attention of bf16 or f32 qkv (shardc_rt/Kernels.h's
// layout) without the T x T scores in memory, as FlashAttention-2: per block
// of 64 queries the keys stream through shared memory in blocks of 64, the
// scores and an online softmax stay in registers (f32), and P v accumulates
// on tensor cores (mma.sync, f32 accumulation): bf16 tiles for bf16, TF32
// tiles for f32 (inputs and P rounded to a 10-bit mantissa, as cuBLAS's TF32
// GEMMs round theirs: the caller runs f32 here only where TF32 is allowed). The
// backward recomputes the probabilities from the forward's log-sum-exps, per
// block of 64 keys, and takes the forward's output for its deltas.
//
// The CUDA backend's default (SHARDC_ATTENTION=gemm opts out); heads of
// d = C / heads with d % 16 == 0 and d <= 128 (on sm_90, either type),
// qkv and dy 16-byte aligned. dq accumulates through f32 atomics, its last
// bits varying from run to run, unless the backward is asked to be
// deterministic: then a second kernel computes dq per block of queries,
// recomputing the scores and their gradient (two more products of the
// five), in registers and a fixed order.
// The templates below are instantiated for T = __nv_bfloat16 and float.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_CUDA_FLASHATTENTION_H
#define SHARDC_RT_CUDA_FLASHATTENTION_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace shardc::rt::cuda {

/// How the backward sums each query's dq over the key blocks.
enum class FlashDq {
  /// f32 atomics into a dq accumulator (a column pair each); the last bits
  /// vary from run to run.
  Atomics,
  /// The same accumulator, each warp's rows added by sm_90's bulk
  /// reductions from shared memory (a row's half each, where
  /// FlashAttention-3 adds whole tiles): as Atomics, in adds of 32 floats
  /// instead of 2 (atomics before sm_90).
  BulkReduce,
  /// A second kernel per query block, in a fixed order: deterministic.
  SecondKernel
};

/// How many row tiles of 16 rows each of a kernel's 4 warps takes: queries
/// in the forward, keys in the backward's main kernel.
enum class FlashTiles {
  /// One: 64 rows a block, 3 or 4 blocks a multiprocessor up to d = 64.
  One,
  /// Two up to d = 64 (else one): 128 rows a block, as FlashAttention-2's
  /// kernels at d = 64, each fragment of the other operand a warp loads
  /// from shared memory (k and v in the forward, q and dy in the backward)
  /// feeding both tiles' products (half the loads per product), and each
  /// barrier and softmax pass twice the products, in twice the
  /// accumulators (2 blocks a multiprocessor on sm_90; f32's backward at
  /// d = 64, 1 by its shared memory). The backward then takes its steps in
  /// quarters of 16 queries, and adds dq once per 128 keys.
  Two
};

/// How the backward's main kernel takes a block of 64 queries against its
/// 64 keys.
enum class FlashSteps {
  /// In two halves of 32 queries where that lets more of its blocks share
  /// a multiprocessor (a half's scores and their gradient take half the
  /// registers: on sm_90, 4 blocks of bf16 at d = 64 where whole steps
  /// leave 3), else whole.
  Fitted,
  /// Whole.
  Whole
};

/// How the backward runs (the kernel bench times each).
struct FlashBackwardPlan {
  FlashDq dq = FlashDq::Atomics;
  FlashSteps steps = FlashSteps::Fitted;
  FlashTiles tiles = FlashTiles::One;
};

/// Empty where the kernels of element type T take heads of size d on the
/// current device (their backward's shared memory fits it, run as `plan`
/// says) from these tensors: qkv, and dy where not null, 16-byte aligned
/// (the kernels copy 16-byte chunks of their rows by cp.async); else why
/// not.
template <typename T>
std::string flashAttentionDeclines(int64_t d, const T *qkv, const T *dy,
                                   FlashBackwardPlan plan);

/// Where a flash kernel's warps spend their cycles, for finding its
/// bottleneck on a GPU without a profiler (shardc_rt_cuda_flash_phases): the
/// cycles (clock64) its warps spent in each phase of their steps
/// (flashPhaseName), summed over the warps of every launch, and how many
/// steps they took (a step: one block of keys, forward; of queries,
/// backward). The instrumented kernels are builds of their own, with the
/// clock reads and ten more registers a thread.
struct FlashPhaseCounters {
  static constexpr int kPhases = 8;
  unsigned long long cycles[kPhases];
  unsigned long long warpSteps;
};

/// The kernels FlashPhaseCounters count: the forward, and the backward's
/// main kernel (the deterministic backward's dq kernel is not counted).
enum class FlashKernel { Forward, Backward };

/// The name of `kernel`'s phase `phase`, or null where it has none.
const char *flashPhaseName(FlashKernel kernel, int phase);

/// Scratch the forward needs: the rows' log-sum-exp, b * heads * t floats.
size_t flashForwardScratchBytes(int64_t b, int64_t t, int64_t heads);

/// out[b, t, c] = causal attention of qkv[b, t, 3c]; lse receives each
/// (batch, head, query)'s log-sum-exp of its scaled scores; each warp
/// takes `tiles` row tiles. With `phases` (device memory), the
/// instrumented kernel adds to them.
template <typename T>
void flashAttentionForward(cudaStream_t stream, const T *qkv, T *out,
                           float *lse, int64_t b, int64_t t, int64_t c,
                           int64_t heads, FlashTiles tiles = FlashTiles::One,
                           FlashPhaseCounters *phases = nullptr);

/// Scratch the backward needs, in this order: delta (b * heads * t floats)
/// and, unless dq is SecondKernel, the f32 accumulator of dq (b * t * c
/// floats);
/// each piece 256-byte aligned.
size_t flashBackwardScratchBytes(int64_t b, int64_t t, int64_t c, int64_t heads,
                                 FlashDq dq);

/// dqkv[b, t, 3c] from dy[b, t, c], qkv and the forward's out and lse:
/// delta = rowsum(dy * out) per (batch, head, query), then per key block
/// dk, dv, and dq into the f32 accumulator (Atomics, BulkReduce); with
/// SecondKernel, dq per query block instead, by a second kernel. Its
/// scratch is flashBackwardScratchBytes(..., plan.dq)'s. With `phases`
/// (device memory), the instrumented main kernel adds to them.
template <typename T>
void flashAttentionBackward(cudaStream_t stream, const T *dy, const T *qkv,
                            const T *out, const float *lse, T *dqkv,
                            void *scratch, int64_t b, int64_t t, int64_t c,
                            int64_t heads, FlashBackwardPlan plan,
                            FlashPhaseCounters *phases = nullptr);

} // namespace shardc::rt::cuda

#endif // SHARDC_RT_CUDA_FLASHATTENTION_H
