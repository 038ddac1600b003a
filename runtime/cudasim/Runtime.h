//===- Runtime.h - What the simulator's parts share -------------*- C++ -*-===//
//
// Between the launches (Simulator.cpp) and the CUDA runtime API
// (Runtime.cpp): launch errors for cudaGetLastError, the kernels' shared
// memory limits, the live streams, guarded pages, and what an address that
// faulted was.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_CUDASIM_RUNTIME_H
#define SHARDC_CUDASIM_RUNTIME_H

#include <cuda_runtime_api.h>

#include <climits>
#include <cstddef>
#include <initializer_list>
#include <string>

namespace cudasim {

/// Dynamic shared memory of a block without cudaFuncSetAttribute, and the
/// most an sm_90 block may have with it.
constexpr size_t kDefaultSharedBytes = 48 << 10;
constexpr size_t kMaxSharedBytes = 227 << 10;

/// Reports a misuse of a simulated API ("cudasim: " + message) and exits.
[[noreturn]] void misuse(const std::string &message);

/// Environment variable `name`'s value: `fallback` where it is unset, else
/// one of `allowed`; another value (a typo that would turn a check off) is
/// a misuse.
std::string envChoice(const char *name, const char *fallback,
                      std::initializer_list<const char *> allowed);

/// Environment variable `name` as a number in [least, most] (a count of at
/// least 1 by default), `fallback` where it is unset; anything else is a
/// misuse, saying what was `expected`.
int envCount(const char *name, int fallback, int least = 1, int most = INT_MAX,
             const char *expected = "a count >= 1");

/// The architecture the kernels count as built for (sm_90, with PTX that
/// later GPUs compile), as the real runtime by default: CMakeLists.txt's
/// SHARDC_CUDASIM_IMAGE_CAPABILITY, which also names it to the runtime.
constexpr int kImageCapability = SHARDC_CUDASIM_IMAGE_CAPABILITY;

/// Whether the device runs the kernels: not where CUDASIM_SM is below
/// kImageCapability (their launches are refused, as a real GPU refuses a
/// build without its architecture).
bool hasKernelImage();

/// Records the error the next cudaGetLastError returns (and clears).
void setLaunchError(cudaError_t error);

/// The dynamic shared memory a kernel may use (cudaFuncSetAttribute).
size_t maxDynamicShared(const void *entry);

/// Whether `stream` runs its work as it is issued.
bool isEager(cudaStream_t stream);

/// Runs the copies between host and device that `stream` (or every stream)
/// holds back (CUDASIM_STREAMS=lazy): before work that may read or write
/// what they copy.
void flushHostCopies(cudaStream_t stream);
void flushAllHostCopies();

/// Whether `stream` is 0 or a stream created and not yet destroyed.
bool isLiveStream(cudaStream_t stream);

/// Maps `bytes` rounded up to whole pages (`*mapped` of them), followed by
/// an inaccessible page; exits when it cannot.
char *mapGuarded(size_t bytes, size_t *mapped);

/// Writes what `address` is in terms of device allocations (past the end
/// of one, in a freed one), or nothing; for the fault handler.
void describeAddress(const void *address, char *buffer, size_t size);

} // namespace cudasim

#endif // SHARDC_CUDASIM_RUNTIME_H
