//===- Backend.cpp - The CPU backend: host memory -------------------------===//

#include "Backend.h"

#include "shardc_rt/Kernels.h"

#include <cstdlib>
#include <cstring>

namespace shardc::rt {

void *backendAllocate(int64_t bytes) {
  return std::aligned_alloc(256, (bytes + 255) / 256 * 256);
}

void backendRelease(void *ptr) { std::free(ptr); }

void backendZero(shardc_rt_context &, void *ptr, int64_t bytes) {
  std::memset(ptr, 0, bytes);
}

void backendCopyIn(void *dst, const void *hostSrc, int64_t bytes) {
  std::memcpy(dst, hostSrc, bytes);
}

void backendCopyOut(void *hostDst, const void *src, int64_t bytes) {
  std::memcpy(hostDst, src, bytes);
}

void backendCopyInput(shardc_rt_context &, void *dst, const void *hostSrc,
                      int64_t bytes) {
  std::memcpy(dst, hostSrc, bytes);
}

void backendSetUp(shardc_rt_context &) {}
void backendStartStep(shardc_rt_context &) { shardc_rt_gemm_seconds_reset(); }
void backendFinishStep(shardc_rt_context &) {}
double backendGemmSeconds(shardc_rt_context &) {
  return shardc_rt_gemm_seconds();
}
void backendTearDown(shardc_rt_context &) {}

} // namespace shardc::rt
