//===- Runtime.cpp - The CUDA runtime API on the CPU, for cudasim ---------===//
//
// One simulated device per process, sm_90 and H200-sized (132
// multiprocessors, or CUDASIM_SM_COUNT; 227 KiB of shared memory per block
// with opt-in; memory pools), its UUID the process's own: each rank of an
// MPI job has a GPU of its own, as NCCL needs. Everything runs at once, in
// issue order: streams and events are handles that are checked for being live,
// events take the host's time, and the asynchronous calls are synchronous ones.
//
// Device memory is checked: each allocation is fresh pages filled with 0xff
// bytes, 256-byte aligned, ending within 255 bytes of an inaccessible page,
// and unmapped when freed; copies and memsets must lie inside one live
// allocation.
//
//===----------------------------------------------------------------------===//

#include "Runtime.h"
#include "Simulator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace cudasim {
namespace {

constexpr size_t kTotalBytes = size_t(141) << 30;

struct Allocation {
  size_t bytes;  // as asked for
  char *mapping; // the pages, then the guard page
  size_t mapped; // bytes of pages before the guard page
};

struct Event {
  bool timing = true;
  bool recorded = false;
  std::chrono::steady_clock::time_point time;
};

struct State {
  std::map<uintptr_t, Allocation> allocations;    // by start
  std::deque<std::pair<uintptr_t, size_t>> freed; // the last few
  size_t allocatedBytes = 0;
  std::set<cudaStream_t> streams;
  std::map<const void *, size_t> dynamicShared; // per kernel
  cudaError_t launchError = cudaSuccess;
  int device = 0;
};

State &state() {
  static State s;
  return s;
}

int smCount() {
  const char *value = std::getenv("CUDASIM_SM_COUNT");
  int count = value ? std::atoi(value) : 0;
  return count > 0 ? count : 132;
}

[[noreturn]] void misuse(const std::string &message) {
  std::fflush(stdout);
  std::fprintf(stderr, "cudasim: %s\n", message.c_str());
  std::exit(1);
}

std::string pointer(const void *p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", p);
  return text;
}

/// The live allocation holding `p`, or nullptr.
const Allocation *find(const void *p, uintptr_t *start = nullptr) {
  auto &allocations = state().allocations;
  uintptr_t address = reinterpret_cast<uintptr_t>(p);
  auto it = allocations.upper_bound(address);
  if (it == allocations.begin())
    return nullptr;
  --it;
  if (address >= it->first + std::max<size_t>(it->second.bytes, 1))
    return nullptr;
  if (start)
    *start = it->first;
  return &it->second;
}

cudaError_t allocate(void **p, size_t bytes) {
  if (!p)
    return cudaErrorInvalidValue;
  *p = nullptr;
  if (bytes == 0)
    return cudaSuccess;
  State &s = state();
  if (bytes > kTotalBytes - s.allocatedBytes)
    return cudaErrorMemoryAllocation;
  size_t page = getpagesize();
  size_t padded = (bytes + 255) & ~size_t(255);
  size_t mapped = (padded + page - 1) / page * page;
  void *mapping = mmap(nullptr, mapped + page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED)
    return cudaErrorMemoryAllocation;
  char *pages = static_cast<char *>(mapping);
  mprotect(pages + mapped, page, PROT_NONE);
  char *start = pages + mapped - padded;
  std::memset(start, 0xff, padded);
  s.allocations[reinterpret_cast<uintptr_t>(start)] = {bytes, pages, mapped};
  s.allocatedBytes += bytes;
  *p = start;
  return cudaSuccess;
}

cudaError_t release(void *p) {
  if (!p)
    return cudaSuccess;
  State &s = state();
  auto it = s.allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == s.allocations.end())
    return cudaErrorInvalidValue;
  Allocation a = it->second;
  s.allocations.erase(it);
  s.allocatedBytes -= a.bytes;
  munmap(a.mapping, a.mapped + getpagesize());
  s.freed.emplace_back(reinterpret_cast<uintptr_t>(p), a.bytes);
  if (s.freed.size() > 256)
    s.freed.pop_front();
  return cudaSuccess;
}

const char *errorName(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "cudaSuccess";
  case cudaErrorInvalidValue:
    return "cudaErrorInvalidValue";
  case cudaErrorMemoryAllocation:
    return "cudaErrorMemoryAllocation";
  case cudaErrorInvalidConfiguration:
    return "cudaErrorInvalidConfiguration";
  case cudaErrorInvalidDevice:
    return "cudaErrorInvalidDevice";
  case cudaErrorInvalidResourceHandle:
    return "cudaErrorInvalidResourceHandle";
  case cudaErrorNotReady:
    return "cudaErrorNotReady";
  default:
    return "cudaErrorUnknown";
  }
}

} // namespace

void setLaunchError(cudaError_t error) { state().launchError = error; }

size_t maxDynamicShared(const void *entry) {
  auto &limits = state().dynamicShared;
  auto it = limits.find(entry);
  return it == limits.end() ? kDefaultSharedBytes : it->second;
}

bool isLiveStream(cudaStream_t stream) {
  return !stream || state().streams.count(stream);
}

void describeAddress(const void *address, char *buffer, size_t size) {
  uintptr_t a = reinterpret_cast<uintptr_t>(address);
  for (const auto &[start, allocation] : state().allocations) {
    uintptr_t end =
        reinterpret_cast<uintptr_t>(allocation.mapping) + allocation.mapped;
    if (a >= start && a < end + getpagesize()) {
      std::snprintf(buffer, size,
                    " (%zu bytes past the end of a %zu-byte device "
                    "allocation at 0x%zx)",
                    size_t(a - start - allocation.bytes), allocation.bytes,
                    size_t(start));
      return;
    }
  }
  for (const auto &[start, bytes] : state().freed)
    if (a >= start && a < start + bytes) {
      std::snprintf(buffer, size,
                    " (in a %zu-byte device allocation at 0x%zx, freed)", bytes,
                    size_t(start));
      return;
    }
}

void checkDeviceRange(const void *ptr, size_t bytes, const char *what) {
  if (bytes == 0)
    return;
  uintptr_t start;
  const Allocation *a = find(ptr, &start);
  if (!a)
    misuse(std::string(what) + ": " + pointer(ptr) +
           " is not in a live device allocation");
  uintptr_t end = reinterpret_cast<uintptr_t>(ptr) + bytes;
  if (end > start + a->bytes)
    misuse(std::string(what) + ": " + std::to_string(bytes) + " bytes at " +
           pointer(ptr) + " run " + std::to_string(end - start - a->bytes) +
           " bytes past the end of a " + std::to_string(a->bytes) +
           "-byte device allocation");
}

} // namespace cudasim

using namespace cudasim;

//===----------------------------------------------------------------------===//
// Device
//===----------------------------------------------------------------------===//

cudaError_t cudaGetDeviceCount(int *count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device != 0)
    return cudaErrorInvalidDevice;
  state().device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  *device = state().device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
  if (device != 0)
    return cudaErrorInvalidDevice;
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof(prop->name), "cudasim (sm_90)");
  prop->totalGlobalMem = kTotalBytes;
  prop->sharedMemPerBlock = kDefaultSharedBytes;
  prop->sharedMemPerBlockOptin = kMaxSharedBytes;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->multiProcessorCount = smCount();
  prop->major = 9;
  prop->minor = 0;
  prop->memoryPoolsSupported = 1;
  static const pid_t process = getpid();
  std::memcpy(prop->uuid.bytes, &process, sizeof(process));
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr,
                                   int device) {
  if (device != 0)
    return cudaErrorInvalidDevice;
  switch (attr) {
  case cudaDevAttrMultiProcessorCount:
    *value = smCount();
    return cudaSuccess;
  case cudaDevAttrMemoryPoolsSupported:
    *value = 1;
    return cudaSuccess;
  case cudaDevAttrMaxSharedMemoryPerBlockOptin:
    *value = static_cast<int>(kMaxSharedBytes);
    return cudaSuccess;
  case cudaDevAttrMaxSharedMemoryPerBlock:
    *value = static_cast<int>(kDefaultSharedBytes);
    return cudaSuccess;
  case cudaDevAttrComputeCapabilityMajor:
    *value = 9;
    return cudaSuccess;
  case cudaDevAttrComputeCapabilityMinor:
    *value = 0;
    return cudaSuccess;
  case cudaDevAttrWarpSize:
    *value = 32;
    return cudaSuccess;
  default:
    misuse("cudaDeviceGetAttribute: attribute " + std::to_string(attr) +
           " is not simulated");
  }
}

cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr,
                                 int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || size_t(value) > kMaxSharedBytes)
      return cudaErrorInvalidValue;
    state().dynamicShared[func] = size_t(value);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaGetLastError() {
  cudaError_t error = state().launchError;
  state().launchError = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError() { return state().launchError; }

const char *cudaGetErrorName(cudaError_t error) { return errorName(error); }

const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorInvalidConfiguration:
    return "invalid configuration argument";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  case cudaErrorInvalidResourceHandle:
    return "invalid resource handle";
  case cudaErrorNotReady:
    return "device not ready";
  default:
    return "unknown error (cudasim)";
  }
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

cudaError_t cudaMalloc(void **devPtr, size_t size) {
  return allocate(devPtr, size);
}

cudaError_t cudaFree(void *devPtr) { return release(devPtr); }

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream) {
  if (!isLiveStream(stream))
    return cudaErrorInvalidResourceHandle;
  return allocate(devPtr, size);
}

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream) {
  if (!isLiveStream(stream))
    return cudaErrorInvalidResourceHandle;
  return release(devPtr);
}

cudaError_t cudaMallocHost(void **ptr, size_t size) {
  *ptr = std::aligned_alloc(256, (std::max<size_t>(size, 1) + 255) & ~255ul);
  return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned) {
  return cudaMallocHost(ptr, size);
}

cudaError_t cudaFreeHost(void *ptr) {
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free, size_t *total) {
  *total = kTotalBytes;
  *free = kTotalBytes - state().allocatedBytes;
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                       cudaMemcpyKind kind) {
  if (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice)
    checkDeviceRange(dst, count, "cudaMemcpy: the destination");
  if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice)
    checkDeviceRange(src, count, "cudaMemcpy: the source");
  if (count)
    std::memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                            cudaMemcpyKind kind, cudaStream_t stream) {
  if (!isLiveStream(stream))
    return cudaErrorInvalidResourceHandle;
  return cudaMemcpy(dst, src, count, kind);
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
  checkDeviceRange(devPtr, count, "cudaMemset");
  if (count)
    std::memset(devPtr, value, count);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count,
                            cudaStream_t stream) {
  if (!isLiveStream(stream))
    return cudaErrorInvalidResourceHandle;
  return cudaMemset(devPtr, value, count);
}

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned) {
  *stream = reinterpret_cast<cudaStream_t>(new char);
  state().streams.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithFlags(stream, 0);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream || !state().streams.erase(stream))
    return cudaErrorInvalidResourceHandle;
  delete reinterpret_cast<char *>(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return isLiveStream(stream) ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return cudaStreamSynchronize(stream);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned) {
  if (!isLiveStream(stream) || !event)
    return cudaErrorInvalidResourceHandle;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
  auto *e = new Event;
  e->timing = !(flags & cudaEventDisableTiming);
  *event = reinterpret_cast<cudaEvent_t>(e);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete reinterpret_cast<Event *>(event);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event || !isLiveStream(stream))
    return cudaErrorInvalidResourceHandle;
  auto *e = reinterpret_cast<Event *>(event);
  e->recorded = true;
  e->time = std::chrono::steady_clock::now();
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return event ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  return cudaEventSynchronize(event);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                 cudaEvent_t end) {
  auto *a = reinterpret_cast<Event *>(start);
  auto *b = reinterpret_cast<Event *>(end);
  if (!a || !b || !a->timing || !b->timing)
    return cudaErrorInvalidResourceHandle;
  if (!a->recorded || !b->recorded)
    return cudaErrorInvalidResourceHandle;
  *ms = std::chrono::duration<float, std::milli>(b->time - a->time).count();
  return cudaSuccess;
}
