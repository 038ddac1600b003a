//===- CudnnUnavailable.cpp - CudnnAttention where cuDNN cannot run -------===//
//
// CudnnAttention.h's class for builds that cannot reach cuDNN: cudasim
// (runtime/cudasim), which simulates none, and a CUDA toolkit without
// cuDNN's headers. Every shape is declined with that reason, so the caller
// runs its own kernels; CudnnAttention.cpp is the class where cuDNN is.
//
//===----------------------------------------------------------------------===//

#include "CudnnAttention.h"

namespace shardc::rt::cuda {

struct CudnnAttention::Library {};
struct CudnnAttention::Plans {};

namespace {

#ifdef SHARDC_CUDASIM
const char kWhy[] = "cudasim simulates no cuDNN";
#else
const char kWhy[] = "built without cuDNN's headers (cudnn_graph.h)";
#endif

} // namespace

CudnnAttention::CudnnAttention(cudaStream_t) : unavailable(kWhy) {}
CudnnAttention::CudnnAttention(const DeviceProperties &) : unavailable(kWhy) {}
CudnnAttention::~CudnnAttention() = default;

const std::string &CudnnAttention::declines(const AttentionShape &) {
  return unavailable;
}

std::pair<int64_t, int64_t>
CudnnAttention::engineCounts(const AttentionShape &) {
  return {0, 0};
}

size_t CudnnAttention::version() const { return 0; }

size_t CudnnAttention::forwardWorkspaceBytes(const AttentionShape &) {
  return 0;
}

size_t CudnnAttention::backwardWorkspaceBytes(const AttentionShape &) {
  return 0;
}

bool CudnnAttention::forward(const AttentionShape &, const __nv_bfloat16 *,
                             __nv_bfloat16 *, float *, void *) {
  return false;
}

bool CudnnAttention::backward(const AttentionShape &, const __nv_bfloat16 *,
                              const __nv_bfloat16 *, const __nv_bfloat16 *,
                              const float *, __nv_bfloat16 *, void *) {
  return false;
}

} // namespace shardc::rt::cuda
