//===- KernelState.cpp - Make, configure, check and time the kernels ------===//
//
// The C ABI's lifecycle of a shardc_rt_cuda_kernels object
// (shardc_rt/CudaKernels.h; KernelState.h says what it holds): create and
// destroy, the settings, the error check, and the kernel times and calls;
// and the workspaces every kernel grows.
//
//===----------------------------------------------------------------------===//

#include "KernelState.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>

using namespace shardc::rt::cuda;

namespace shardc::rt::cuda {

void allocateWorkspace(Kernels *k, void **buffer, size_t bytes) {
  if (k->memoryPools) {
    SHARDC_CUDA_CHECK(cudaMallocAsync(buffer, bytes, k->stream));
    return;
  }
  SHARDC_CUDA_CHECK(cudaMalloc(buffer, bytes));
}

void freeWorkspace(Kernels *k, void *buffer) {
  if (k->memoryPools) {
    SHARDC_CUDA_CHECK(cudaFreeAsync(buffer, k->stream));
    return;
  }
  SHARDC_CUDA_CHECK(cudaStreamSynchronize(k->stream));
  SHARDC_CUDA_CHECK(cudaFree(buffer));
}

void *grow(Kernels *k, void *&buffer, size_t &size, size_t bytes) {
  if (bytes > size) {
    if (buffer)
      freeWorkspace(k, buffer);
    buffer = nullptr;
    size = 0;
    // Whole MiBs: a few bytes more than the last call must not regrow.
    size_t grown = (bytes + (size_t(1) << 20) - 1) & ~((size_t(1) << 20) - 1);
    allocateWorkspace(k, &buffer, grown);
    size = grown;
  }
  return buffer;
}

void *scratch(Kernels *k, size_t bytes) {
  return grow(k, k->scratch, k->scratchBytes, bytes);
}

} // namespace shardc::rt::cuda

namespace {

/// The names of the checked kernels (CheckedOp), as the error check
/// reports them: their f32 entry points, then their bf16 ones.
const char *const kOpNames[] = {
    "shardc_rt_cuda_embedding_f32",
    "shardc_rt_cuda_embedding_grad_f32",
    "shardc_rt_cuda_cross_entropy_f32",
    "shardc_rt_cuda_cross_entropy_grad_f32",
    "shardc_rt_cuda_cross_entropy_and_grad_f32",
    "shardc_rt_cuda_embedding_bf16",
    "shardc_rt_cuda_embedding_grad_bf16",
    "shardc_rt_cuda_cross_entropy_bf16",
    "shardc_rt_cuda_cross_entropy_grad_bf16",
    "shardc_rt_cuda_cross_entropy_and_grad_bf16",
};

/// A setting create reads from the environment (and configure sets): its
/// name and what its value does to the object.
struct Setting {
  const char *name;
  void (*apply)(Kernels *k, const char *value);
};

/// Every setting, in the order create applies them.
const Setting kSettings[] = {
    {"SHARDC_RT_CUDA_ATTENTION_SCORES",
     [](Kernels *k, const char *value) {
       long long floats = std::atoll(value);
       if (floats > 0)
         k->attentionScoreFloats = floats;
     }},
    {"SHARDC_RT_CUDA_GEMM_EPILOGUE_LOG",
     [](Kernels *k, const char *value) {
       k->epilogues->setLog(*value != '\0' && std::strcmp(value, "0") != 0);
     }},
    {"SHARDC_RT_CUDA_CROSS_ENTROPY",
     [](Kernels *k, const char *value) {
       k->stagedCrossEntropy = std::strcmp(value, "online") != 0;
     }},
    {"SHARDC_RT_CUDA_FLASH_DQ",
     [](Kernels *k, const char *value) {
       k->flashBulkDq = std::strcmp(value, "bulk") == 0;
     }},
    {"SHARDC_RT_CUDA_FLASH_STEPS",
     [](Kernels *k, const char *value) {
       k->flashWholeSteps = std::strcmp(value, "whole") == 0;
     }},
    {"SHARDC_RT_CUDA_FLASH_FORWARD_TILES",
     [](Kernels *k, const char *value) {
       k->flashForwardTwoTiles = std::strcmp(value, "2") == 0;
     }},
    {"SHARDC_RT_CUDA_FLASH_BACKWARD_TILES",
     [](Kernels *k, const char *value) {
       k->flashBackwardTwoTiles = std::strcmp(value, "2") == 0;
     }},
};

} // namespace

extern "C" {

int shardc_rt_cuda_kernels_configure(shardc_rt_cuda_kernels *k,
                                     const char *name, const char *value) {
  for (const Setting &setting : kSettings)
    if (std::strcmp(name, setting.name) == 0) {
      setting.apply(k, value);
      return 1;
    }
  return 0;
}

shardc_rt_cuda_kernels *shardc_rt_cuda_kernels_create(cudaStream_t stream,
                                                      int allowTf32) {
  Kernels *k = new Kernels();
  k->stream = stream;
  int device = 0;
  SHARDC_CUDA_CHECK(cudaGetDevice(&device));
  SHARDC_CUDA_CHECK(cudaDeviceGetAttribute(
      &k->smCount, cudaDevAttrMultiProcessorCount, device));
  k->smCount = std::max(k->smCount, 1);
  SHARDC_CUDA_CHECK(cudaDeviceGetAttribute(
      &k->sharedOptin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  int pools = 0;
  SHARDC_CUDA_CHECK(
      cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device));
  k->memoryPools = pools != 0;
  SHARDC_CUBLAS_CHECK(cublasCreate(&k->blas));
  // cublasSetStream resets the workspace to cuBLAS's own pool: the
  // workspace goes in after it.
  SHARDC_CUBLAS_CHECK(cublasSetStream(k->blas, stream));
  SHARDC_CUDA_CHECK(cudaMalloc(&k->blasWorkspace, kCublasWorkspaceBytes));
  SHARDC_CUBLAS_CHECK(
      cublasSetWorkspace(k->blas, k->blasWorkspace, kCublasWorkspaceBytes));
  SHARDC_CUBLAS_CHECK(cublasSetMathMode(
      k->blas, allowTf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH));
  k->allowTf32 = allowTf32 != 0;
  // cuBLASLt (the GEMM epilogues): its handle and its own workspace, which
  // every fused GEMM on the stream shares.
  allocateWorkspace(k, &k->ltWorkspace,
                    shardc::rt::cuda::EpilogueGemms::kWorkspaceBytes);
  k->epilogues = std::make_unique<shardc::rt::cuda::EpilogueGemms>(
      stream, k->ltWorkspace, /*log=*/false);
  for (const Setting &setting : kSettings)
    if (const char *value = std::getenv(setting.name))
      setting.apply(k, value);
  SHARDC_CUDA_CHECK(cudaMalloc(&k->slot, sizeof(ErrorSlot)));
  SHARDC_CUDA_CHECK(cudaMallocHost(&k->hostSlot, sizeof(ErrorSlot)));
  SHARDC_CUDA_CHECK(cudaMemsetAsync(k->slot, 0xff, sizeof(ErrorSlot), stream));
  SHARDC_CUDA_CHECK(cudaStreamSynchronize(stream));
  return k;
}

void shardc_rt_cuda_kernels_destroy(shardc_rt_cuda_kernels *k) {
  if (!k)
    return;
  SHARDC_CUDA_CHECK(cudaStreamSynchronize(k->stream));
  for (void *workspace : {k->scratch, k->sums, k->ltWorkspace})
    if (workspace)
      freeWorkspace(k, workspace);
  SHARDC_CUDA_CHECK(cudaStreamSynchronize(k->stream));
  for (cudaEvent_t event : k->events)
    SHARDC_CUDA_CHECK(cudaEventDestroy(event));
  k->epilogues.reset();
  SHARDC_CUBLAS_CHECK(cublasDestroy(k->blas));
  SHARDC_CUDA_CHECK(cudaFree(k->blasWorkspace));
  SHARDC_CUDA_CHECK(cudaFree(k->slot));
  SHARDC_CUDA_CHECK(cudaFreeHost(k->hostSlot));
  SHARDC_CUDA_CHECK(cudaFree(k->flashPhases));
  delete k;
}

int64_t
shardc_rt_cuda_kernels_workspace_bytes(const shardc_rt_cuda_kernels *k) {
  return static_cast<int64_t>(kCublasWorkspaceBytes +
                              shardc::rt::cuda::EpilogueGemms::kWorkspaceBytes +
                              k->scratchBytes + k->sumsBytes);
}

int64_t shardc_rt_cuda_kernels_check(shardc_rt_cuda_kernels *k,
                                     const char **op) {
  SHARDC_CUDA_CHECK(cudaMemcpyAsync(k->hostSlot, k->slot, sizeof(ErrorSlot),
                                    cudaMemcpyDeviceToHost, k->stream));
  SHARDC_CUDA_CHECK(cudaStreamSynchronize(k->stream));
  ErrorSlot slot = *k->hostSlot;
  SHARDC_CUDA_CHECK(
      cudaMemsetAsync(k->slot, 0xff, sizeof(ErrorSlot), k->stream));
  if (slot.position == kNoError) {
    if (op)
      *op = nullptr;
    return -1;
  }
  if (op)
    *op = slot.op >= 0 && slot.op < static_cast<int>(std::size(kOpNames))
              ? kOpNames[slot.op]
              : "unknown";
  return static_cast<int64_t>(slot.position);
}

void shardc_rt_cuda_kernels_set_flash_attention(shardc_rt_cuda_kernels *k,
                                                int on) {
  k->flashAttention = on != 0;
}

void shardc_rt_cuda_kernels_set_deterministic(shardc_rt_cuda_kernels *k,
                                              int on) {
  k->deterministic = on != 0;
}

void shardc_rt_cuda_flash_phases_enable(shardc_rt_cuda_kernels *k, int on) {
  k->flashPhasesOn = on != 0;
  if (k->flashPhasesOn && !k->flashPhases) {
    SHARDC_CUDA_CHECK(cudaMalloc(&k->flashPhases, 2 * sizeof *k->flashPhases));
    shardc_rt_cuda_flash_phases_reset(k);
  }
}

void shardc_rt_cuda_flash_phases_reset(shardc_rt_cuda_kernels *k) {
  if (k->flashPhases)
    SHARDC_CUDA_CHECK(cudaMemsetAsync(k->flashPhases, 0,
                                      2 * sizeof *k->flashPhases, k->stream));
}

int32_t shardc_rt_cuda_flash_phases(shardc_rt_cuda_kernels *k,
                                    shardc_rt_flash_phase *out,
                                    int32_t capacity) {
  using shardc::rt::cuda::FlashKernel;
  shardc::rt::cuda::FlashPhaseCounters counters[2] = {};
  if (k->flashPhases) {
    SHARDC_CUDA_CHECK(cudaMemcpyAsync(counters, k->flashPhases, sizeof counters,
                                      cudaMemcpyDeviceToHost, k->stream));
    SHARDC_CUDA_CHECK(cudaStreamSynchronize(k->stream));
  }
  int32_t count = 0;
  for (int kernel = 0; kernel < 2; ++kernel) {
    auto which = kernel == 0 ? FlashKernel::Forward : FlashKernel::Backward;
    for (int p = 0; const char *name = flashPhaseName(which, p); ++p, ++count)
      if (count < capacity)
        out[count] = {kernel == 0 ? "attention" : "attention_grad", name,
                      counters[kernel].cycles[p], counters[kernel].warpSteps};
  }
  return count;
}

void shardc_rt_cuda_kernels_set_cudnn_attention(shardc_rt_cuda_kernels *k,
                                                int on) {
  k->cudnnAttention = on != 0;
  if (k->cudnnAttention && !k->cudnn)
    k->cudnn = std::make_unique<shardc::rt::cuda::CudnnAttention>(k->stream);
}

const char *shardc_rt_cuda_kernels_cudnn_attention_declines(
    shardc_rt_cuda_kernels *k, int64_t b, int64_t t, int64_t c, int64_t heads) {
  static const char off[] = "cuDNN attention is off (set_cudnn_attention)";
  if (!k->cudnnAttention)
    return off;
  const std::string &why = k->cudnn->declines({b, t, c, heads});
  return why.empty() ? nullptr : why.c_str();
}

void shardc_rt_cuda_kernels_set_gemm_epilogues(shardc_rt_cuda_kernels *k,
                                               int on) {
  k->gemmEpilogues = on != 0;
}

void shardc_rt_cuda_kernels_set_bias_grad_epilogue(shardc_rt_cuda_kernels *k,
                                                   int on) {
  k->biasGradEpilogue = on != 0;
}

void shardc_rt_cuda_kernel_times_enable(shardc_rt_cuda_kernels *k, int on) {
  k->timing = on != 0;
}

namespace {

/// Adds the calls not yet collected to the times where timing is on, and to
/// the calls (seconds after `origin`) where recording is on and there is
/// an origin; their events are then free again.
void collectCalls(Kernels *k, cudaEvent_t origin) {
  SHARDC_CUDA_CHECK(cudaStreamSynchronize(k->stream));
  auto seconds = [](cudaEvent_t from, cudaEvent_t to) {
    float ms = 0.0f;
    SHARDC_CUDA_CHECK(cudaEventElapsedTime(&ms, from, to));
    return static_cast<double>(ms) * 1e-3;
  };
  for (size_t i = 0; i < k->timedCalls.size(); ++i) {
    cudaEvent_t begin = k->events[2 * i], end = k->events[2 * i + 1];
    if (k->timing)
      k->times.add(k->timedCalls[i], seconds(begin, end));
    if (k->recording && origin)
      k->calls.push_back(
          {k->timedCalls[i], seconds(origin, begin), seconds(origin, end)});
  }
  k->timedCalls.clear();
}

} // namespace

int32_t shardc_rt_cuda_kernel_times(shardc_rt_cuda_kernels *k,
                                    shardc_rt_kernel_time *out,
                                    int32_t capacity) {
  collectCalls(k, nullptr);
  return k->times.copy(out, capacity);
}

void shardc_rt_cuda_kernel_calls_enable(shardc_rt_cuda_kernels *k, int on) {
  k->recording = on != 0;
}

int32_t shardc_rt_cuda_kernel_calls(shardc_rt_cuda_kernels *k,
                                    cudaEvent_t origin,
                                    shardc_rt_kernel_call *out,
                                    int32_t capacity) {
  collectCalls(k, origin);
  auto count = static_cast<int32_t>(k->calls.size());
  std::copy_n(k->calls.begin(), std::min(count, std::max(capacity, 0)), out);
  return count;
}

void shardc_rt_cuda_kernel_calls_reset(shardc_rt_cuda_kernels *k) {
  k->calls.clear();
}

void shardc_rt_cuda_kernel_times_reset(shardc_rt_cuda_kernels *k) {
  SHARDC_CUDA_CHECK(cudaStreamSynchronize(k->stream));
  k->timedCalls.clear();
  k->times.clear();
}

} // extern "C"
