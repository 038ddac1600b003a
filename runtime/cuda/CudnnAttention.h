//===- CudnnAttention.h - Attention through cuDNN's fused SDPA --*- C++ -*-===//
//
// Causal multi-head attention of bf16 qkv (shardc_rt/Kernels.h's layout:
// qkv[b, t, 3c], out[b, t, c], lse[b, heads, t]) through cuDNN 9's fused
// flash attention, the engine PyTorch's cuDNN SDPA backend and llm.c run:
// per shape, AttentionGraph.h's forward and backward graphs as cuDNN's
// backend descriptors, the engine cuDNN's heuristics rank first that takes
// each, and its execution plan, kept for the shape's later calls.
//
// cuDNN is loaded when an object is made (dlopen of libcudnn.so.9, 9.16
// or later), so an executable runs where cuDNN is not installed: the object
// then declines every shape, and says why, as it does for a shape no engine
// takes. The caller runs its own kernels there. A shape's forward and
// backward are planned together, by its first call, and a call cuDNN fails
// at run time declines the shape from then on. The lse cuDNN's forward
// writes is the other kernels' ([b, heads, t], the natural log-sum-exp of
// the scaled scores), so a backward may read one any forward wrote.
//
// CudnnAttention.cpp holds the class where cuDNN is; CudnnUnavailable.cpp
// where it cannot be (cudasim, which simulates none, and a toolkit without
// cuDNN's headers), declining every shape.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_CUDA_CUDNNATTENTION_H
#define SHARDC_RT_CUDA_CUDNNATTENTION_H

#include "AttentionGraph.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

namespace shardc::rt::cuda {

class CudnnAttention {
public:
  /// Loads cuDNN and makes its handle on `stream`; where either fails,
  /// every shape is declined with the reason.
  explicit CudnnAttention(cudaStream_t stream);

  /// A device as cuDNN describes its properties (its JSON representation,
  /// CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION): what cuDNN would run there,
  /// asked without a GPU. Such an object plans no further than cuDNN's
  /// heuristics: declines() and engineCounts() only.
  struct DeviceProperties {
    std::string json;
  };
  explicit CudnnAttention(const DeviceProperties &device);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention &) = delete;
  CudnnAttention &operator=(const CudnnAttention &) = delete;

  /// Empty where cuDNN runs this shape's forward and backward (both planned
  /// by the shape's first call), else why not: cuDNN not loaded, or the
  /// graph, the heuristics or every engine's plan refused (cuDNN's words).
  const std::string &declines(const AttentionShape &shape);

  /// Workspace bytes the forward and the backward of a shape cuDNN takes
  /// need.
  size_t forwardWorkspaceBytes(const AttentionShape &shape);
  size_t backwardWorkspaceBytes(const AttentionShape &shape);

  /// out and lse (the scaled scores' log-sum-exp per row) of qkv, on the
  /// stream, for a shape declines() is empty for; qkv, out, lse and
  /// workspace 16-byte aligned. False where cuDNN refused the call (nothing
  /// written; the shape is declined from then on, with cuDNN's words).
  bool forward(const AttentionShape &shape, const __nv_bfloat16 *qkv,
               __nv_bfloat16 *out, float *lse, void *workspace);

  /// dqkv from dy and the forward's qkv, out and lse, on the stream; as
  /// forward.
  bool backward(const AttentionShape &shape, const __nv_bfloat16 *dy,
                const __nv_bfloat16 *qkv, const __nv_bfloat16 *out,
                const float *lse, __nv_bfloat16 *dqkv, void *workspace);

  /// How many engines cuDNN's heuristics ranked for the shape's forward and
  /// backward graphs (0 for one not reached).
  std::pair<int64_t, int64_t> engineCounts(const AttentionShape &shape);

  /// The loaded cuDNN's version (cudnnGetVersion, e.g. 91900), 0 where none.
  size_t version() const;

  // Defined in the implementation file (CudnnAttention.cpp's anonymous
  // namespace uses them).
  struct Library;
  struct Plans;

private:
  std::unique_ptr<Library> library;
  std::string unavailable; // why cuDNN is not there, or empty
  std::map<AttentionShape, std::unique_ptr<Plans>> plans;

  Plans &plansFor(const AttentionShape &shape);
};

} // namespace shardc::rt::cuda

#endif // SHARDC_RT_CUDA_CUDNNATTENTION_H
