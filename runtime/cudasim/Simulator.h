//===- Simulator.h - CUDA kernels on the CPU, for testing -------*- C++ -*-===//
//
// cudasim runs the CUDA runtime (runtime/cuda) and its kernel test on a
// machine without a GPU, so that CI executes every kernel, not only compiles
// it. The .cu files are compiled as C++ against the real CUDA headers, after
// translate.py has rewritten their launches (`k<<<grid, block, shared,
// stream>>>(args)` becomes `cudasim::launch(...)`), their static and dynamic
// shared memory; include/ puts the device built-ins (threadIdx,
// __syncthreads, warp shuffles, atomics, wmma) in front of the real headers;
// Runtime.cpp, Blas.cpp and Nccl.cpp implement the host APIs on the CPU.
//
// A launch runs block after block on the calling thread; each CUDA thread of
// a block is a fiber that runs until it reaches a barrier (__syncthreads, a
// warp shuffle, __syncwarp) or returns, so barriers order memory as they
// must on a GPU. Threads run in ascending order in even blocks and in
// descending order in odd ones, so a missing barrier between a write and
// another thread's read shows as a wrong result in one of any two blocks.
// What a GPU only tolerates is an error here, with the kernel, its launch
// site, the block and the thread: a __syncthreads some threads of the block
// never reach, a shuffle reading a lane that has returned, a deadlock, a
// wmma tile misaligned, a launch configuration a GPU refuses (a block over
// 1024 threads, dynamic shared memory over 48 KiB without
// cudaFuncSetAttribute or over the 227 KiB of an sm_90 block, static shared
// memory over 48 KiB), a launch that never ends (CUDASIM_TIMEOUT). Device
// memory, static and dynamic shared memory start each allocation or block
// as 0xff bytes (NaN as f32 and bf16); each device allocation ends within
// 255 bytes of an inaccessible page, the slack either side is checked at
// free and synchronisation, and freed memory stays inaccessible for a
// while, so reading memory never written, reading or writing past an
// allocation's end, and touching freed memory show too.
//
// Not modelled: concurrency between streams (everything runs in issue
// order, so a missing cross-stream wait does not show), and the speed of
// anything. Each lane of a warp holds whole wmma a and b tiles
// (include/mma.h); PTX's mma.sync (mmaSync) exchanges the lanes' fragments,
// and ldmatrix (ldMatrix) the rows they address. cp.async (copyAsync)
// writes its bytes only at the wait for its group, so a read that does not
// wait sees stale bytes.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_CUDASIM_SIMULATOR_H
#define SHARDC_CUDASIM_SIMULATOR_H

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple> // translate.py's launches
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

/// The PTX tensor-core instructions runtime/cuda/Ptx.h names.
enum class Mma {
  Bf16M16N8K16, // mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
  Tf32M16N8K8,  // mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
};

/// c += a b for the running warp, each lane passing the fragments the PTX
/// ISA assigns it (Ptx.h lists them): waits for all 32 lanes, which
/// must all be running (.aligned), then computes the lane's four elements
/// of c. Products are exact (tf32 inputs keep their top 10 mantissa bits,
/// the rest truncated, as on the tensor cores), sums f32 in k order.
void mmaSync(Mma kind, float (&c)[4], const uint32_t (&a)[4],
             const uint32_t (&b)[2]);

/// ldmatrix.sync.aligned.m8n8.x`count`{.trans}.shared.b16 for the running
/// warp (Ptx.h's ldMatrix): each lane passes `row`, lane 8 i + r the
/// address of row r of matrix i (16 bytes, 16-byte aligned, in the block's
/// dynamic shared memory; for x2 only lanes 0-15's are read); waits for all
/// 32 lanes, then sets the lane's registers r[0, count).
void ldMatrix(int count, bool trans, uint32_t *r, const void *row);

/// cp.async.{ca,cg}.shared.global for the running thread (Ptx.h's
/// copyAsync): `bytes` (4, 8 or 16; dst and src aligned to it) to dst in
/// the block's dynamic shared memory, the first srcBytes of them read from
/// src now, the rest zeros. They land only when the thread waits for their
/// group (copyAsyncWait) or returns: until then dst keeps what it held, so
/// a read before the wait, or by another thread before a barrier after it,
/// sees stale bytes.
void copyAsync(void *dst, const void *src, int bytes, int srcBytes);

/// cp.async.commit_group: the running thread's copies since its last commit
/// form a group (possibly empty).
void copyAsyncCommit();

/// cp.async.wait_group `pending`: lands the running thread's committed
/// groups but the `pending` newest.
void copyAsyncWait(int pending);

/// cvt.rna.tf32.f32: x rounded to TF32 (nearest, ties away from zero),
/// as f32 bits with the low 13 mantissa bits zero.
uint32_t roundToTf32(float x);

/// Reports a device-side error of the running kernel and exits.
[[noreturn]] void deviceError(const char *message);

/// A `static` variable that stands for a block's `__shared__` one
/// (translate.py): filled with 0xff at its first use in each block, and
/// counted against the block's shared memory.
void sharedOnce(void *variable, size_t bytes);

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

/// Whether a GPU takes `launch`; if not, reports why, records the launch
/// error (cudaGetLastError) and returns false.
bool accept(const Launch &launch);

/// Runs `body` once per thread of every block of `launch`'s grid.
void run(const Launch &launch, void (*body)(void *), void *context);

/// Runs `work` on `stream`, now or when the stream's work is needed
/// (Runtime.cpp: CUDASIM_STREAMS).
void enqueue(cudaStream_t stream, std::function<void()> work);

/// A launch's `<<<grid, block, shared, stream>>>`.
struct Config {
  Config(dim3 grid, dim3 block, size_t shared = 0,
         cudaStream_t stream = nullptr)
      : grid(grid), block(block), shared(shared), stream(stream) {}
  dim3 grid, block;
  size_t shared;
  cudaStream_t stream;
};

/// `kernel<<<grid, block, shared, stream>>>(args...)` as translate.py
/// writes it: `body` calls the kernel on the arguments, evaluated once.
template <typename Body>
void launch(const char *name, const char *file, int line, const void *entry,
            const Config &config, const Body &body) {
  Launch launch{name,        file,         line,          entry,
                config.grid, config.block, config.shared, config.stream};
  if (!accept(launch))
    return;
  enqueue(config.stream, [launch, body] {
    run(
        launch, [](void *context) { (*static_cast<const Body *>(context))(); },
        const_cast<Body *>(&body));
  });
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
