//===- Runtime.cpp - The CUDA runtime API on the CPU, for cudasim ---------===//
//
// One simulated device per process, sm_90 (or CUDASIM_SM: below 90, a GPU
// the kernels have no image for, whose launches fail) and H200-sized (132
// multiprocessors, or CUDASIM_SM_COUNT; 227 KiB of shared memory per block
// with opt-in; memory pools), its UUID the process's own: each rank of an
// MPI job has a GPU of its own, as NCCL needs. Streams and events are
// handles checked for being live; events take the host's time. By default
// work runs as it is issued. With CUDASIM_STREAMS=lazy, the work of every
// stream but the first created (the runtime's compute stream) waits in a
// queue until something needs it: an event of it that another stream waits
// for or the host synchronises with, the stream's or the device's
// synchronisation, cudaFree; so work on the communication streams runs as
// late as the events allow, and a wait the code left out shows as a read
// too early or a write too late. The first stream's copies between host and
// device memory (cudaMemcpyAsync) wait too, until that stream's next
// operation, an event recorded on it, a GEMM or a synchronisation: a copy to
// the host lands late, as on a GPU, and one from the host reads its source
// late, so the host's reading a copy's result, or overwriting its source,
// before synchronising shows too.
//
// Device memory is checked: each allocation is fresh pages filled with 0xff
// bytes, 256-byte aligned, ending within 255 bytes of an inaccessible page;
// the bytes either side of it on its pages must still be 0xff when it is
// freed and at every synchronisation; a freed allocation's pages stay
// mapped inaccessible (its addresses are not reused) until 1 GiB or 4096
// allocations have been freed after it; copies and memsets must lie inside
// one live allocation.
//
//===----------------------------------------------------------------------===//

#include "Runtime.h"
#include "Simulator.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace cudasim {
namespace {

constexpr size_t kTotalBytes = size_t(141) << 30;
/// Freed allocations stay inaccessible until this many bytes, or this many
/// allocations, have been freed after them.
constexpr size_t kQuarantineBytes = size_t(1) << 30;
constexpr size_t kQuarantineCount = 4096;

struct Allocation {
  size_t bytes;  // as asked for
  char *mapping; // the pages, then the guard page
  size_t mapped; // bytes of pages before the guard page
};

/// A freed allocation, its pages inaccessible until it leaves quarantine.
struct Freed {
  uintptr_t start;
  size_t bytes;
  char *mapping;
  size_t mapped;
};

struct Event {
  bool timing = true;
  bool recorded = false;
  std::chrono::steady_clock::time_point time;
  /// Where it was recorded on a lazy stream: the stream and the number of
  /// its operation that records it (0: complete).
  cudaStream_t stream = nullptr;
  uint64_t op = 0;
};

/// A stream: whether its work waits in `queue` (CUDASIM_STREAMS=lazy), and
/// the operations issued, each numbered.
struct Stream {
  bool lazy = false;
  bool blocking = true; // not cudaStreamNonBlocking: syncs with stream 0
  uint64_t issued = 0;
  std::deque<std::pair<uint64_t, std::function<void()>>> queue;
  /// CUDASIM_STREAMS=lazy, on the stream whose work runs as issued: its
  /// copies between host and device, run before its next operation.
  std::vector<std::function<void()>> hostCopies;
};

struct State {
  std::map<uintptr_t, Allocation> allocations; // by start
  std::deque<Freed> freed;                     // oldest first
  size_t allocatedBytes = 0, quarantinedBytes = 0;
  std::map<cudaStream_t, Stream> streams;
  size_t streamsCreated = 0;
  std::set<cudaEvent_t> events;
  std::map<const void *, size_t> dynamicShared; // per kernel
  cudaError_t launchError = cudaSuccess;
  int device = 0;
};

State &state() {
  static State s;
  return s;
}

int smCount() { return envCount("CUDASIM_SM_COUNT", 132); }

/// The device's compute capability as major * 10 + minor: 90, or
/// CUDASIM_SM (80: an A100, whose kernels an sm_90 build lacks).
int computeCapability() {
  static const int capability =
      envCount("CUDASIM_SM", kImageCapability, 10, 999,
               "a compute capability such as 80 or 90");
  return capability;
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

bool isLiveEvent(cudaEvent_t event) { return state().events.count(event); }

bool lazyStreams() {
  static const bool lazy =
      envChoice("CUDASIM_STREAMS", "eager", {"eager", "lazy"}) == "lazy";
  return lazy;
}

/// Runs `stream`'s queued operations up to number `op` (all: UINT64_MAX).
void runUntil(cudaStream_t stream, uint64_t op) {
  auto it = state().streams.find(stream);
  if (it == state().streams.end())
    return;
  flushHostCopies(stream);
  auto &queue = it->second.queue;
  while (!queue.empty() && queue.front().first <= op) {
    std::function<void()> work = std::move(queue.front().second);
    queue.pop_front();
    work();
  }
}

void runAll() {
  flushAllHostCopies();
  for (auto &[stream, ignored] : state().streams)
    runUntil(stream, UINT64_MAX);
}

/// Runs the work up to `event`'s record.
void complete(const Event &event) {
  if (event.stream)
    runUntil(event.stream, event.op);
}

/// Exits with a report where a byte of `a`'s pages outside its `bytes`
/// is no longer 0xff (a kernel or copy wrote past its end or before its
/// start); `when` says where the check ran.
void checkSlack(uintptr_t start, const Allocation &a, const char *when) {
  const auto *first = reinterpret_cast<const unsigned char *>(a.mapping);
  const auto *begin = reinterpret_cast<const unsigned char *>(start);
  const unsigned char *end = begin + a.bytes, *last = first + a.mapped;
  for (const unsigned char *p = begin; p-- > first;)
    if (*p != 0xff)
      misuse("a " + std::to_string(a.bytes) + "-byte device allocation at " +
             pointer(begin) + " was written " + std::to_string(begin - p) +
             " bytes before its start (found " + when + ")");
  for (const unsigned char *p = end; p < last; ++p)
    if (*p != 0xff)
      misuse("a " + std::to_string(a.bytes) + "-byte device allocation at " +
             pointer(begin) + " was written " + std::to_string(p - end) +
             " bytes past its end (found " + when + ")");
}

void checkAllSlack(const char *when) {
  for (const auto &[start, allocation] : state().allocations)
    checkSlack(start, allocation, when);
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
  size_t padded = (bytes + 255) & ~size_t(255);
  size_t mapped = 0;
  char *pages = mapGuarded(padded, &mapped);
  char *start = pages + mapped - padded;
  std::memset(pages, 0xff, mapped);
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
  checkSlack(it->first, a, "when it was freed");
  s.allocations.erase(it);
  s.allocatedBytes -= a.bytes;
  // Drop the pages but keep the addresses: nothing else is mapped there
  // while the allocation is in quarantine.
  size_t page = getpagesize();
  if (mmap(a.mapping, a.mapped + page, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
           0) == MAP_FAILED)
    misuse("cannot unmap a freed allocation's pages");
  s.freed.push_back(
      {reinterpret_cast<uintptr_t>(p), a.bytes, a.mapping, a.mapped});
  s.quarantinedBytes += a.mapped;
  while (s.quarantinedBytes > kQuarantineBytes ||
         s.freed.size() > kQuarantineCount) {
    const Freed &oldest = s.freed.front();
    munmap(oldest.mapping, oldest.mapped + page);
    s.quarantinedBytes -= oldest.mapped;
    s.freed.pop_front();
  }
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
  case cudaErrorInvalidDeviceFunction:
    return "cudaErrorInvalidDeviceFunction";
  case cudaErrorNoKernelImageForDevice:
    return "cudaErrorNoKernelImageForDevice";
  default:
    return "cudaErrorUnknown";
  }
}

} // namespace

[[noreturn]] void misuse(const std::string &message) {
  std::fflush(stdout);
  std::fprintf(stderr, "cudasim: %s\n", message.c_str());
  std::exit(1);
}

std::string envChoice(const char *name, const char *fallback,
                      std::initializer_list<const char *> allowed) {
  const char *value = std::getenv(name);
  if (!value)
    return fallback;
  std::string expected;
  for (const char *choice : allowed) {
    if (std::strcmp(value, choice) == 0)
      return value;
    expected += (expected.empty() ? "" : " or ") + std::string(choice);
  }
  misuse(std::string(name) + "='" + value + "': expected " + expected);
}

int envCount(const char *name, int fallback, int least, int most,
             const char *expected) {
  const char *value = std::getenv(name);
  if (!value)
    return fallback;
  char *end = nullptr;
  errno = 0;
  long count = std::strtol(value, &end, 10);
  if (!std::isdigit(static_cast<unsigned char>(value[0])) || *end || errno ||
      count < least || count > most)
    misuse(std::string(name) + "='" + value + "': expected " + expected);
  return static_cast<int>(count);
}

char *mapGuarded(size_t bytes, size_t *mapped) {
  size_t page = getpagesize();
  *mapped = (bytes + page - 1) / page * page;
  void *base = mmap(nullptr, *mapped + page, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED)
    misuse("cannot map " + std::to_string(*mapped + page) + " bytes");
  if (mprotect(static_cast<char *>(base) + *mapped, page, PROT_NONE) != 0)
    misuse("cannot protect a guard page");
  return static_cast<char *>(base);
}

void setLaunchError(cudaError_t error) { state().launchError = error; }

size_t maxDynamicShared(const void *entry) {
  auto &limits = state().dynamicShared;
  auto it = limits.find(entry);
  return it == limits.end() ? kDefaultSharedBytes : it->second;
}

void flushHostCopies(cudaStream_t stream) {
  auto it = state().streams.find(stream);
  if (it == state().streams.end())
    return;
  std::vector<std::function<void()>> copies;
  copies.swap(it->second.hostCopies);
  for (std::function<void()> &copy : copies)
    copy();
}

void flushAllHostCopies() {
  for (auto &[stream, ignored] : state().streams)
    flushHostCopies(stream);
}

void enqueue(cudaStream_t stream, std::function<void()> work) {
  flushHostCopies(stream);
  auto it = state().streams.find(stream);
  if (it == state().streams.end() || !it->second.lazy) {
    work();
    return;
  }
  Stream &s = it->second;
  s.queue.emplace_back(++s.issued, std::move(work));
}

bool isEager(cudaStream_t stream) {
  auto it = state().streams.find(stream);
  return it == state().streams.end() || !it->second.lazy;
}

bool isLiveStream(cudaStream_t stream) {
  return !stream || stream == cudaStreamLegacy ||
         stream == cudaStreamPerThread || state().streams.count(stream);
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
  for (const Freed &f : state().freed)
    if (a >= reinterpret_cast<uintptr_t>(f.mapping) &&
        a < reinterpret_cast<uintptr_t>(f.mapping) + f.mapped) {
      std::snprintf(buffer, size,
                    " (in a %zu-byte device allocation at 0x%zx, freed)",
                    f.bytes, size_t(f.start));
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

bool hasKernelImage() { return computeCapability() >= kImageCapability; }

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
  std::snprintf(prop->name, sizeof(prop->name), "cudasim");
  prop->totalGlobalMem = kTotalBytes;
  prop->sharedMemPerBlock = kDefaultSharedBytes;
  prop->sharedMemPerBlockOptin = kMaxSharedBytes;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->multiProcessorCount = smCount();
  prop->major = computeCapability() / 10;
  prop->minor = computeCapability() % 10;
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
    *value = computeCapability() / 10;
    return cudaSuccess;
  case cudaDevAttrComputeCapabilityMinor:
    *value = computeCapability() % 10;
    return cudaSuccess;
  case cudaDevAttrWarpSize:
    *value = 32;
    return cudaSuccess;
  default:
    misuse("cudaDeviceGetAttribute: attribute " + std::to_string(attr) +
           " is not simulated");
  }
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attr, const void *func) {
  if (!func)
    return cudaErrorInvalidDeviceFunction;
  if (!hasKernelImage()) {
    setLaunchError(cudaErrorNoKernelImageForDevice);
    return cudaErrorNoKernelImageForDevice;
  }
  *attr = cudaFuncAttributes{};
  attr->maxThreadsPerBlock = 1024;
  attr->maxDynamicSharedSizeBytes = static_cast<int>(maxDynamicShared(func));
  attr->ptxVersion = attr->binaryVersion = kImageCapability;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr,
                                 int value) {
  if (!func)
    return cudaErrorInvalidDeviceFunction;
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || size_t(value) > kMaxSharedBytes)
      return cudaErrorInvalidValue;
    state().dynamicShared[func] = size_t(value);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  runAll();
  checkAllSlack("at cudaDeviceSynchronize");
  return cudaSuccess;
}

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
  case cudaErrorInvalidDeviceFunction:
    return "invalid device function";
  case cudaErrorNoKernelImageForDevice:
    return "no kernel image is available for execution on the device";
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

cudaError_t cudaFree(void *devPtr) {
  runAll(); // cudaFree synchronises the device
  return release(devPtr);
}

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream) {
  if (!isLiveStream(stream))
    return cudaErrorInvalidResourceHandle;
  return allocate(devPtr, size);
}

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream) {
  if (!isLiveStream(stream))
    return cudaErrorInvalidResourceHandle;
  if (devPtr && !state().allocations.count(reinterpret_cast<uintptr_t>(devPtr)))
    return cudaErrorInvalidValue;
  enqueue(stream, [devPtr] { release(devPtr); });
  return cudaSuccess;
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

/// A copy, when it runs.
void copy(void *dst, const void *src, size_t count, cudaMemcpyKind kind) {
  if (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice)
    checkDeviceRange(dst, count, "cudaMemcpy: the destination");
  if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice)
    checkDeviceRange(src, count, "cudaMemcpy: the source");
  if (count)
    std::memmove(dst, src, count);
}

void fill(void *devPtr, int value, size_t count) {
  checkDeviceRange(devPtr, count, "cudaMemset");
  if (count)
    std::memset(devPtr, value, count);
}

/// Runs the work of the streams that synchronise with the legacy default
/// stream (those created without cudaStreamNonBlocking).
void runBlocking() {
  for (auto &[stream, s] : state().streams)
    if (s.blocking)
      runUntil(stream, UINT64_MAX);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                       cudaMemcpyKind kind) {
  runBlocking();
  copy(dst, src, count, kind);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                            cudaMemcpyKind kind, cudaStream_t stream) {
  if (!isLiveStream(stream))
    return cudaErrorInvalidResourceHandle;
  if (lazyStreams() && isEager(stream) && stream &&
      (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToDevice)) {
    state().streams[stream].hostCopies.push_back(
        [=] { copy(dst, src, count, kind); });
    return cudaSuccess;
  }
  enqueue(stream, [=] { copy(dst, src, count, kind); });
  return cudaSuccess;
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
  runBlocking();
  fill(devPtr, value, count);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count,
                            cudaStream_t stream) {
  if (!isLiveStream(stream))
    return cudaErrorInvalidResourceHandle;
  enqueue(stream, [=] { fill(devPtr, value, count); });
  return cudaSuccess;
}

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
  *stream = reinterpret_cast<cudaStream_t>(new char);
  Stream &s = state().streams[*stream];
  s.lazy = lazyStreams() && state().streamsCreated++ > 0;
  s.blocking = !(flags & cudaStreamNonBlocking);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithFlags(stream, 0);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream || !state().streams.count(stream))
    return cudaErrorInvalidResourceHandle;
  runUntil(stream, UINT64_MAX);
  state().streams.erase(stream);
  delete reinterpret_cast<char *>(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!isLiveStream(stream))
    return cudaErrorInvalidResourceHandle;
  runUntil(stream, UINT64_MAX);
  checkAllSlack("at cudaStreamSynchronize");
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return cudaStreamSynchronize(stream);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned) {
  if (!isLiveStream(stream) || !isLiveEvent(event))
    return cudaErrorInvalidResourceHandle;
  // The event's work first: later work of `stream` runs after it.
  complete(*reinterpret_cast<Event *>(event));
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
  auto *e = new Event;
  e->timing = !(flags & cudaEventDisableTiming);
  *event = reinterpret_cast<cudaEvent_t>(e);
  state().events.insert(*event);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!state().events.erase(event))
    return cudaErrorInvalidResourceHandle;
  complete(*reinterpret_cast<Event *>(event)); // its record is queued
  delete reinterpret_cast<Event *>(event);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!isLiveEvent(event) || !isLiveStream(stream))
    return cudaErrorInvalidResourceHandle;
  flushHostCopies(stream);
  auto *e = reinterpret_cast<Event *>(event);
  e->recorded = true;
  e->stream = nullptr;
  e->time = std::chrono::steady_clock::now();
  if (!isEager(stream)) {
    Stream &s = state().streams[stream];
    uint64_t op = s.issued + 1;
    e->stream = stream;
    e->op = op;
    enqueue(stream, [e, op, stream] {
      if (e->stream != stream || e->op != op)
        return; // recorded again since: that record counts
      e->stream = nullptr;
      e->time = std::chrono::steady_clock::now();
    });
  }
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!isLiveEvent(event))
    return cudaErrorInvalidResourceHandle;
  complete(*reinterpret_cast<Event *>(event));
  checkAllSlack("at cudaEventSynchronize");
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  return cudaEventSynchronize(event);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                 cudaEvent_t end) {
  if (!isLiveEvent(start) || !isLiveEvent(end))
    return cudaErrorInvalidResourceHandle;
  auto *a = reinterpret_cast<Event *>(start);
  auto *b = reinterpret_cast<Event *>(end);
  complete(*a);
  complete(*b);
  if (!a->timing || !b->timing)
    return cudaErrorInvalidResourceHandle;
  if (!a->recorded || !b->recorded)
    return cudaErrorInvalidResourceHandle;
  *ms = std::chrono::duration<float, std::milli>(b->time - a->time).count();
  return cudaSuccess;
}
