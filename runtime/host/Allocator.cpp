//===- Allocator.cpp - Caching allocator with a high-water mark -----------===//

#include "Allocator.h"

#include "Backend.h"

#include "shardc_rt/Error.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace shardc::rt {

/// Size classes: multiples of 512 bytes up to 1 MiB, then of 1 MiB, so that a
/// cached block is reused only for a request of nearly its size.
static int64_t roundUp(int64_t bytes) {
  int64_t quantum = bytes <= (1 << 20) ? 512 : (1 << 20);
  return (bytes + quantum - 1) / quantum * quantum;
}

Allocator::~Allocator() {
  for (auto &[capacity, ptr] : cached)
    backendRelease(ptr);
  for (auto &[ptr, block] : inUse)
    backendRelease(ptr);
}

void *Allocator::allocate(int64_t bytes) {
  SHARDC_RT_CHECK(bytes >= 0, "shardc_rt_alloc",
                  "negative size " + std::to_string(bytes));
  int64_t capacity = roundUp(bytes > 0 ? bytes : 1);
  void *ptr = nullptr;
  auto it = cached.find(capacity);
  if (it != cached.end()) {
    ptr = it->second;
    cached.erase(it);
  } else {
    ptr = backendAllocate(capacity);
    SHARDC_RT_CHECK(ptr, "shardc_rt_alloc",
                    "out of memory allocating " + std::to_string(capacity) +
                        " bytes (" + std::to_string(reserved) +
                        " already held)");
    reserved += capacity;
  }
  inUse[ptr] = {bytes, capacity};
  live += bytes;
  if (live > peak)
    peak = live;
  return ptr;
}

void Allocator::release(void *ptr) {
  auto it = inUse.find(ptr);
  SHARDC_RT_CHECK(it != inUse.end(), "shardc_rt_free",
                  "pointer not allocated by the runtime, or freed twice");
  live -= it->second.requested;
  cached.emplace(it->second.capacity, ptr);
  inUse.erase(it);
}

} // namespace shardc::rt
