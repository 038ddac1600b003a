//===- Simulator.h - CUDA kernels on the CPU, for testing --------*- C++
//-*-===//
//
// cudasim runs the CUDA runtime (runtime/cuda) and its kernel test on a
// machine without a GPU, so that CI executes every kernel, not only compiles
// it. The .cu files are compiled as C++ against the real CUDA headers, after
// translate.py has rewritten their launches (`k<<<grid, block, shared,
// stream>>>(args)` becomes `cudasim::launch(...)(args)`) and their dynamic
// shared memory; include/ puts the device built-ins (threadIdx,
// __syncthreads, warp shuffles, atomics, wmma) in front of the real headers;
// Runtime.cpp, Blas.cpp and Nccl.cpp implement the host APIs on the CPU.
//
// A launch runs block after block on the calling thread; each CUDA thread of
// a block is a fiber that runs until it reaches a barrier (__syncthreads, a
// warp shuffle, __syncwarp) or returns, so barriers order memory exactly as
// they must on a GPU and a missing one shows as a wrong result. What a GPU
// only tolerates is an error here, with the kernel, its launch site, the
// block and the thread: a barrier some threads of the block (or lanes of a
// warp) never reach, a shuffle whose source lane has exited, a launch
// configuration a GPU refuses (block over 1024 threads, dynamic shared
// memory over 48 KiB without cudaFuncSetAttribute, or over the 227 KiB of
// an sm_90 block). Device memory is fresh pages filled with 0xff bytes (NaN
// as f32 and bf16) ending at an inaccessible page, so reading memory never
// written, reading or writing past an allocation's end, and touching freed
// memory show too.
//
// Not modelled: concurrency between streams (everything runs in issue
// order, so a missing cross-stream wait does not show), and the speed of
// anything. Each simulated thread computes whole wmma tiles (include/mma.h).
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_CUDASIM_SIMULATOR_H
#define SHARDC_CUDASIM_SIMULATOR_H

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace cudasim {

//===----------------------------------------------------------------------===//
// Device state of the running simulated thread
//===----------------------------------------------------------------------===//

/// The built-in variables of the running thread.
struct ThreadIndex {
  uint3 threadIdx, blockIdx;
  dim3 blockDim, gridDim;
};

/// The running thread's built-ins (valid inside a kernel only).
const ThreadIndex &index();

/// The running thread's lane in its warp.
int lane();

/// The running block's dynamic shared memory (`extern __shared__`).
unsigned char *dynamicShared();

/// Waits for every thread of the block (__syncthreads).
void syncThreads();

/// Waits for the lanes of `mask` in the running thread's warp (__syncwarp).
void syncWarp(unsigned mask);

/// How a shuffle picks its source lane.
enum class Shuffle { Index, Up, Down, Xor };

/// A warp shuffle of up to 8 bytes: waits for the lanes of `mask`, then
/// returns the bits the source lane passed in.
uint64_t shuffle(unsigned mask, uint64_t bits, Shuffle kind, int operand,
                 int width);

/// Reports a device-side error of the running kernel and exits.
[[noreturn]] void deviceError(const char *message);

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

/// Exits with a report unless [ptr, ptr + bytes) lies inside one live
/// device allocation (the host libraries' check of their arguments).
void checkDeviceRange(const void *ptr, size_t bytes, const char *what);

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//

/// A launch's configuration, and where it was written.
struct Launch {
  const char *kernel; // the kernel as written, e.g. "forwardKernel<T>"
  const char *file;
  int line;
  const void *entry; // cudaFuncSetAttribute's key, or null (translate.py)
  dim3 grid, block;
  size_t shared;
  cudaStream_t stream;
};

/// Runs `body` once per thread of every block of `launch`'s grid, or
/// records a launch error (cudaGetLastError) and runs nothing.
void run(const Launch &launch, void (*body)(void *), void *context);

/// `kernel<<<grid, block, shared, stream>>>(args...)` as translate.py
/// writes it: `body` is `[=] { kernel(args...); }`, run by every thread.
template <typename Body>
void launch(const char *name, const char *file, int line, const void *entry,
            const Body &body, dim3 grid, dim3 block, size_t shared = 0,
            cudaStream_t stream = nullptr) {
  run(
      Launch{name, file, line, entry, grid, block, shared, stream},
      [](void *context) { (*static_cast<const Body *>(context))(); },
      const_cast<Body *>(&body));
}

/// A value's bits for shuffle, and back.
template <typename T> uint64_t toBits(T value) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>,
                "cudasim: shuffles move at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}
template <typename T> T fromBits(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

} // namespace cudasim

#endif // SHARDC_CUDASIM_SIMULATOR_H
