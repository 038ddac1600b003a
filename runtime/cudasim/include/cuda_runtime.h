//===- cuda_runtime.h - The real header, plus device built-ins --*- C++ -*-===//
//
// cudasim's stand-in for <cuda_runtime.h>: the real header (types and host
// API declarations; Runtime.cpp defines the functions), then what device
// code uses that the real header declares only for nvcc: the built-in
// variables, __shared__, barriers and warp shuffles, atomics (the simulated
// threads of a launch run one at a time: plain read-modify-writes), and the
// intrinsics with an explicit rounding mode (IEEE f32 operations on the CPU
// too; cudasim builds with -ffp-contract=off).
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_CUDASIM_CUDA_RUNTIME_H
#define SHARDC_CUDASIM_CUDA_RUNTIME_H

#include_next <cuda_runtime.h>

#include "../Simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <type_traits>

// translate.py rewrites each __shared__ variable into a static one (blocks
// run one after another) that cudasim::sharedOnce fills per block.
#undef __shared__
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

#define threadIdx (::cudasim::index().threadIdx)
#define blockIdx (::cudasim::index().blockIdx)
#define blockDim (::cudasim::index().blockDim)
#define gridDim (::cudasim::index().gridDim)
constexpr int warpSize = 32;

// The C++ API's overloads for kernels (the real ones are nvcc's only).
template <typename... Params>
cudaError_t cudaFuncSetAttribute(void (*kernel)(Params...),
                                 cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void *>(kernel), attr,
                                value);
}
template <typename... Params>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attr,
                                  void (*kernel)(Params...)) {
  return ::cudaFuncGetAttributes(attr, reinterpret_cast<const void *>(kernel));
}

inline void __syncthreads() { ::cudasim::syncThreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::cudasim::syncWarp(mask);
}
inline void __threadfence() {}
inline void __threadfence_block() {}

template <typename T>
T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize) {
  return ::cudasim::fromBits<T>(::cudasim::shuffle(
      mask, ::cudasim::toBits(var), ::cudasim::Shuffle::Index, srcLane, width));
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return ::cudasim::fromBits<T>(
      ::cudasim::shuffle(mask, ::cudasim::toBits(var), ::cudasim::Shuffle::Up,
                         static_cast<int>(delta), width));
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return ::cudasim::fromBits<T>(
      ::cudasim::shuffle(mask, ::cudasim::toBits(var), ::cudasim::Shuffle::Down,
                         static_cast<int>(delta), width));
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize) {
  return ::cudasim::fromBits<T>(::cudasim::shuffle(
      mask, ::cudasim::toBits(var), ::cudasim::Shuffle::Xor, laneMask, width));
}

// The clock: simulated threads take no cycles, so it counts the steady
// clock's nanoseconds, which say nothing of a GPU's cycles.
inline long long clock64() {
  return std::chrono::steady_clock::now().time_since_epoch().count();
}

template <typename T> T atomicAdd(T *address, T value) {
  T old = *address;
  *address = old + value;
  return old;
}
// sm_90's vector add: both elements, each as its own float.
inline float2 atomicAdd(float2 *address, float2 value) {
  float *elements = reinterpret_cast<float *>(address);
  float2 old = make_float2(elements[0], elements[1]);
  elements[0] += value.x;
  elements[1] += value.y;
  return old;
}
template <typename T> T atomicMin(T *address, T value) {
  static_assert(std::is_integral_v<T>, "CUDA's atomicMin takes integers");
  T old = *address;
  *address = std::min(old, value);
  return old;
}
template <typename T> T atomicMax(T *address, T value) {
  static_assert(std::is_integral_v<T>, "CUDA's atomicMax takes integers");
  T old = *address;
  *address = std::max(old, value);
  return old;
}
template <typename T> T atomicExch(T *address, T value) {
  T old = *address;
  *address = value;
  return old;
}
template <typename T> T atomicCAS(T *address, T compare, T value) {
  static_assert(std::is_integral_v<T>, "CUDA's atomicCAS takes integers");
  T old = *address;
  if (old == compare)
    *address = value;
  return old;
}

template <typename T> T __ldg(const T *address) { return *address; }

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __expf(float a) { return std::exp(a); }
inline float __logf(float a) { return std::log(a); }
inline float __saturatef(float a) {
  return a > 0.0f ? (a < 1.0f ? a : 1.0f) : 0.0f; // NaN: 0
}
inline float rsqrtf(float a) { return 1.0f / std::sqrt(a); }

#endif // SHARDC_CUDASIM_CUDA_RUNTIME_H
