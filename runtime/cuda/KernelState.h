//===- KernelState.h - What a CUDA kernels object holds ---------*- C++ -*-===//
//
// A shardc_rt_cuda_kernels object (shardc_rt/CudaKernels.h): its stream and
// library handles, the settings its setters and the environment make, its
// workspaces, its error slot and the timing of its calls; and what the
// kernels share of it (workspace growth, CallTimer). Host code:
// KernelState.cpp makes, configures, checks and times the object (the C
// ABI's lifecycle); the kernels run on it (KernelUtils.cuh lists their
// files).
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_CUDA_KERNELSTATE_H
#define SHARDC_RT_CUDA_KERNELSTATE_H

#include "shardc_rt/CudaKernels.h"
#include "shardc_rt/KernelTime.h"

#include "Check.h"
#include "CudnnAttention.h"
#include "EpilogueGemms.h"
#include "FlashAttention.h"
#include "Workspace.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace shardc::rt::cuda {

/// The device-side error slot: the first bad position of the first failing
/// checked call, or ~0 (no error; op is then -1). Reset by a 0xff memset.
struct ErrorSlot {
  unsigned long long position;
  int op;
  int padding;
};

constexpr unsigned long long kNoError = ~0ull;

/// The checked kernels, in the order of KernelState.cpp's kOpNames: their
/// f32 entry points, then (kCheckedOps on) their bf16 ones.
enum CheckedOp : int {
  kOpEmbedding = 0,
  kOpEmbeddingGrad = 1,
  kOpCrossEntropy = 2,
  kOpCrossEntropyGrad = 3,
  kOpCrossEntropyAndGrad = 4,
  kCheckedOps = 5,
};

/// cuBLAS's workspace: 32 MiB, NVIDIA's recommendation for Hopper (as
/// cuBLASLt's, EpilogueGemms::kWorkspaceBytes).
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;

/// Default bound on the attention scores computed at a time, in floats.
constexpr int64_t kAttentionScoreFloats = int64_t(1) << 26;

} // namespace shardc::rt::cuda

struct shardc_rt_cuda_kernels {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  void *blasWorkspace = nullptr;
  /// fp32 GEMMs on TF32 tensor cores (create's allowTf32).
  bool allowTf32 = false;
  /// The GEMMs with epilogues (set_gemm_epilogues), and their workspace
  /// (stream-ordered, allocated at create).
  bool gemmEpilogues = true;
  /// matmul_bias_grad's BGRADB, where gemmEpilogues
  /// (set_bias_grad_epilogue).
  bool biasGradEpilogue = true;
  std::unique_ptr<shardc::rt::cuda::EpilogueGemms> epilogues;
  void *ltWorkspace = nullptr;
  /// The scratch workspace (stream-ordered allocation) and its size.
  void *scratch = nullptr;
  size_t scratchBytes = 0;
  /// Attention through the flash kernels (FlashForward.cu, FlashBackward.cu)
  /// rather than GEMMs over the full scores (set_flash_attention): bf16, and
  /// f32 where allowTf32 is set, where the head size allows it (useFlash).
  bool flashAttention = false;
  /// bf16 attention through cuDNN (set_cudnn_attention) where it takes the
  /// shape (useCudnn), made when first set.
  std::unique_ptr<shardc::rt::cuda::CudnnAttention> cudnn;
  bool cudnnAttention = false;
  /// attention_grad's dq in a fixed order (set_deterministic): the flash
  /// kernels' dqKernel, not their atomics; cuDNN declines.
  bool deterministic = false;
  /// Otherwise dq through sm_90's bulk reductions rather than atomics
  /// (FlashDq::BulkReduce): SHARDC_RT_CUDA_FLASH_DQ=bulk, read by create, so
  /// that the kernel bench and test run both side by side.
  bool flashBulkDq = false;
  /// The flash backward's steps whole rather than fitted
  /// (FlashSteps::Whole): SHARDC_RT_CUDA_FLASH_STEPS=whole, read by create,
  /// as flashBulkDq.
  bool flashWholeSteps = false;
  /// The flash forward's warps taking two row tiles of 16 queries each
  /// rather than one (FlashTiles::Two):
  /// SHARDC_RT_CUDA_FLASH_FORWARD_TILES=2, read by create, as flashBulkDq.
  bool flashForwardTwoTiles = false;
  /// The flash backward's warps taking two row tiles of 16 keys each
  /// rather than one: SHARDC_RT_CUDA_FLASH_BACKWARD_TILES=2, as
  /// flashForwardTwoTiles.
  bool flashBackwardTwoTiles = false;
  /// The flash kernels' phase counters (shardc_rt_cuda_flash_phases_enable):
  /// device memory, the forward's then the backward's, made when first
  /// enabled; null to the kernels while off.
  shardc::rt::cuda::FlashPhaseCounters *flashPhases = nullptr;
  bool flashPhasesOn = false;
  /// What sayDeclines (Attention.cu) has said: a shape, and who declined
  /// it why.
  std::set<std::pair<shardc::rt::cuda::AttentionShape, std::string>>
      attentionDeclinesSaid;
  /// Cross entropy rows staged in shared memory where they fit
  /// (stagedRowBytes); SHARDC_RT_CUDA_CROSS_ENTROPY=online turns it off, so
  /// that the kernel bench and test run both kernels side by side.
  bool stagedCrossEntropy = true;
  /// bf16 kernels' f32 sums before rounding (a second workspace, since the
  /// kernels also use the first).
  void *sums = nullptr;
  size_t sumsBytes = 0;
  /// Per-kernel timing (shardc_rt_cuda_kernel_times) and the record of
  /// each call (shardc_rt_cuda_kernel_calls): events recorded around each
  /// outermost timed call not yet collected, two per call.
  bool timing = false, recording = false;
  int timingDepth = 0;
  std::vector<cudaEvent_t> events;
  std::vector<const char *> timedCalls;
  shardc::rt::KernelTimes times;
  std::vector<shardc_rt_kernel_call> calls;
  shardc::rt::cuda::ErrorSlot *slot = nullptr;     // device
  shardc::rt::cuda::ErrorSlot *hostSlot = nullptr; // pinned, for check
  int smCount = 1;
  /// The shared memory a block may opt in to (layernorm_grad's fused
  /// column sums).
  int sharedOptin = 0;
  int64_t attentionScoreFloats = shardc::rt::cuda::kAttentionScoreFloats;
  /// Whether the device has stream-ordered memory pools (allocateWorkspace).
  bool memoryPools = true;
};

namespace shardc::rt::cuda {

using Kernels = shardc_rt_cuda_kernels;

/// Workspace memory, stream-ordered (cudaMallocAsync) where the device
/// has memory pools; where it has none (some virtualised GPUs), cudaMalloc
/// after the stream's work, and cudaFree once it is done: workspaces only
/// grow in the first steps, so the waits cost nothing later.
void allocateWorkspace(Kernels *k, void **buffer, size_t bytes);
void freeWorkspace(Kernels *k, void *buffer);

/// A workspace, grown (stream-ordered) to at least `bytes`.
void *grow(Kernels *k, void *&buffer, size_t &size, size_t bytes);

/// The scratch workspace of the f32 kernels.
void *scratch(Kernels *k, size_t bytes);

/// The next `count` elements of T of a workspace cursor.
template <typename T> T *carve(char *&cursor, int64_t count) {
  T *piece = reinterpret_cast<T *>(cursor);
  cursor += pieceBytes<T>(count);
  return piece;
}

/// Times the enclosing C ABI call while timing or recording is on: events
/// on the stream before and after it (the outermost call only).
class CallTimer {
public:
  CallTimer(Kernels *k, const char *kernel) : k(k) {
    if (!k->timing && !k->recording)
      return;
    counted = true;
    if (k->timingDepth++ > 0)
      return;
    index = k->timedCalls.size();
    while (k->events.size() < 2 * (index + 1)) {
      cudaEvent_t event;
      SHARDC_CUDA_CHECK(cudaEventCreate(&event));
      k->events.push_back(event);
    }
    k->timedCalls.push_back(kernel);
    SHARDC_CUDA_CHECK(cudaEventRecord(k->events[2 * index], k->stream));
  }
  ~CallTimer() {
    if (!counted)
      return;
    if (--k->timingDepth == 0)
      SHARDC_CUDA_CHECK(cudaEventRecord(k->events[2 * index + 1], k->stream));
  }
  CallTimer(const CallTimer &) = delete;
  CallTimer &operator=(const CallTimer &) = delete;

private:
  Kernels *k;
  bool counted = false;
  size_t index = 0;
};

} // namespace shardc::rt::cuda

#define SHARDC_RT_CUDA_TIME_KERNEL(k, name)                                    \
  shardc::rt::cuda::CallTimer shardcCallTimer_(k, name)

#endif // SHARDC_RT_CUDA_KERNELSTATE_H
