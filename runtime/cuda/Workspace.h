//===- Workspace.h - Pieces of the CUDA kernels' workspace ------*- C++ -*-===//
//
// The kernels, the flash attention kernels and the cuDNN attention carve
// their scratch workspace into pieces, each rounded up to 256 bytes, so that
// every piece starts as aligned as cuBLAS, cuDNN and 16-byte loads need.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_CUDA_WORKSPACE_H
#define SHARDC_RT_CUDA_WORKSPACE_H

#include <cstddef>
#include <cstdint>

namespace shardc::rt::cuda {

/// Bytes of `count` elements of T, rounded up to 256.
template <typename T> constexpr size_t pieceBytes(int64_t count) {
  size_t bytes = static_cast<size_t>(count) * sizeof(T);
  return (bytes + 255) & ~size_t(255);
}

} // namespace shardc::rt::cuda

#endif // SHARDC_RT_CUDA_WORKSPACE_H
