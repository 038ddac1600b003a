//===- Ptx.h - The PTX instructions the runtime's kernels issue -*- C++ -*-===//
//
// PTX the CUDA kernels issue by inline assembly, each with cudasim's
// stand-in (SHARDC_CUDASIM: runtime/cudasim's cuda_runtime.h declares
// them): the two tensor-core instructions of the flash attention kernels
// (mma.sync.aligned .row.col, f32 accumulators), ldmatrix, which loads
// their bf16 fragments from shared memory, cp.async (copyAsync), which
// fills shared memory while the warps compute, ex2 (exp2Approx) for
// softmaxes, and the packed bf16 conversion.
//
//   MmaBf16: m16n8k16, bf16 inputs, each .b32 register two bf16 (the lower
//            index in the low half);
//   MmaTf32: m16n8k8, tf32 inputs, one per .b32 register.
//
// A warp multiplies a 16 x K tile a by a K x 8 tile b into a 16 x 8 tile c,
// every lane holding the elements the PTX ISA assigns it; with g = lane / 4
// and q = lane % 4 (names as in the ISA's figures):
//
//   c[i]     row g + 8 (i / 2),        column 2q + i % 2
//   bf16 a   register i, half h: row g + 8 (i % 2), column 2q + h + 8 (i / 2)
//   bf16 b   register i, half h: row 2q + h + 8 i,  column g
//   tf32 a   register i: row g + 8 (i % 2), column q + 4 (i / 2)
//   tf32 b   register i: row q + 4 i,       column g
//
// Unlike wmma's fragments, these layouts are documented: a kernel computes
// on its accumulators in registers (the online softmax) and feeds them back
// as the a operand. cudasim runs the same instructions on the CPU, from the
// same layouts.
//
// The instructions sm_90 added (the bulk reduction, the float2 atomicAdd)
// are here too, each with what it falls back to before sm_90.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_CUDA_PTX_H
#define SHARDC_RT_CUDA_PTX_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace shardc::rt::cuda {

/// c += a b for the running warp's m16n8k16 bf16 fragments.
__device__ inline void mmaBf16(float (&c)[4], const uint32_t (&a)[4],
                               const uint32_t (&b)[2]) {
#ifdef SHARDC_CUDASIM
  ::cudasim::mmaSync(::cudasim::Mma::Bf16M16N8K16, c, a, b);
#else
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]));
#endif
}

/// c += a b for the running warp's m16n8k8 tf32 fragments.
__device__ inline void mmaTf32(float (&c)[4], const uint32_t (&a)[4],
                               const uint32_t (&b)[2]) {
#ifdef SHARDC_CUDASIM
  ::cudasim::mmaSync(::cudasim::Mma::Tf32M16N8K8, c, a, b);
#else
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]));
#endif
}

/// ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16: the running warp loads
/// N (2 or 4) 8 x 8 matrices of 16-bit elements from shared memory, lane
/// 8 i + r passing in `row` the address of matrix i's row r (16 bytes,
/// 16-byte aligned; for N = 2 lanes 16-31's are ignored). Register i of
/// lane l receives elements 2 (l % 4) and 2 (l % 4) + 1 (the first in the
/// low half) of matrix i's row l / 4, or with Trans of its column l / 4:
/// as an mma a or b register wants them (the ISA's figures; g = l / 4).
template <int N, bool Trans>
__device__ inline void ldMatrix(uint32_t (&r)[N], const void *row) {
  static_assert(N == 2 || N == 4, "ldmatrix here: x2 or x4");
#ifdef SHARDC_CUDASIM
  ::cudasim::ldMatrix(N, Trans, r, row);
#else
  auto address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  if constexpr (N == 4 && Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  else if constexpr (N == 4)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  else if constexpr (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 "
                 "{%0, %1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(address));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(address));
#endif
}

/// x rounded to TF32 (nearest, ties away from zero: cvt.rna.tf32.f32), as
/// the .b32 register an m16n8k8 tf32 operand takes.
__device__ inline uint32_t toTf32(float x) {
#ifdef SHARDC_CUDASIM
  return ::cudasim::roundToTf32(x);
#else
  uint32_t bits;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(bits) : "f"(x));
  return bits;
#endif
}

/// Two bf16 as one .b32 register: lo in the low half.
__device__ inline uint32_t packBf16(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  __nv_bfloat16_raw l = lo, h = hi;
  return uint32_t(l.x) | uint32_t(h.x) << 16;
}

/// lo and hi rounded to bf16 (nearest even) as one .b32 register, lo in
/// the low half: packBf16 of the two roundings in one instruction
/// (cvt.rn.bf16x2.f32).
__device__ inline uint32_t roundPackBf16(float lo, float hi) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  uint32_t bits;
  memcpy(&bits, &pair, sizeof bits);
  return bits;
}

/// log2(e): exp(x) = exp2(x log2(e)), for the softmaxes in base 2.
constexpr float kLog2e = 1.4426950408889634f;

/// 2^x by one ex2.approx.ftz.f32 (MUFU.EX2; 2 ulp at most), subnormal
/// inputs and results flushed to zero, as FlashAttention-2's softmax (built
/// with fast math) takes it: exp2f without ftz adds a range check and two
/// multiplies around it. exp2(-inf) = 0.
__device__ inline float exp2Approx(float x) {
#ifdef SHARDC_CUDASIM
  float r = std::exp2(std::fpclassify(x) == FP_SUBNORMAL ? 0.0f : x);
  return std::fpclassify(r) == FP_SUBNORMAL ? 0.0f : r;
#else
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#endif
}

/// Whether p is 16-byte aligned: the address a 16-byte copyAsync, or a
/// uint4 load or store, needs.
__host__ __device__ inline bool isChunkAligned(const void *p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

/// cp.async: copies Bytes (4, 8 or 16; both addresses aligned to it) from
/// global src to shared dst without holding them in registers; the first
/// srcBytes are read, the rest of dst is zeroed (srcBytes 0: a row past
/// the data, src any valid address). The copy lands once the thread has
/// waited for its group (copyAsyncWait); other threads see it after a
/// barrier that follows that wait.
template <int Bytes>
__device__ inline void copyAsync(void *dst, const void *src, int srcBytes) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16,
                "cp.async copies 4, 8 or 16 bytes");
#ifdef SHARDC_CUDASIM
  ::cudasim::copyAsync(dst, src, Bytes, srcBytes);
#else
  auto address = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  if constexpr (Bytes == 16) // .cg: through L2 only, as CUTLASS copies tiles
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(address),
                 "l"(src), "r"(srcBytes)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(address),
                 "l"(src), "n"(Bytes), "r"(srcBytes)
                 : "memory");
#endif
}

/// cp.async.commit_group: the thread's copies since its last commit form
/// a group (possibly empty).
__device__ inline void copyAsyncCommit() {
#ifdef SHARDC_CUDASIM
  ::cudasim::copyAsyncCommit();
#else
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

/// cp.async.wait_group Pending: waits until at most the Pending newest of
/// the thread's committed groups are still in flight.
template <int Pending> __device__ inline void copyAsyncWait() {
#ifdef SHARDC_CUDASIM
  ::cudasim::copyAsyncWait(Pending);
#else
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
#endif
}

// sm_90's bulk operations, where this compilation has them (the device
// pass for sm_90 and later; not cudasim).
#if !defined(SHARDC_CUDASIM) &&                                                \
    (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900)
#define SHARDC_PTX_BULK 1
#else
#define SHARDC_PTX_BULK 0
#endif

/// dst[0] += x and dst[1] += y (dst 8-byte aligned), each add atomic: one
/// float2 atomicAdd from sm_90 (and on cudasim), two float ones before.
__device__ inline void atomicAddPair(float *dst, float x, float y) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2 *>(dst), make_float2(x, y));
#else
  atomicAdd(dst, x);
  atomicAdd(dst + 1, y);
#endif
}

/// dst[i] += src[i] for the `bytes` / 4 floats of shared `src` into global
/// `dst` (both 16-byte aligned, bytes a multiple of 16), each add atomic
/// as an atomicAdd's: on sm_90 one bulk reduction
/// (cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32, as
/// FlashAttention-3 adds its dq), which reads src asynchronously: src must
/// not change until the thread has waited for its bulk groups
/// (bulkCommit, bulkWaitRead), and the thread's own earlier writes of src
/// must precede a fenceProxyAsync (other threads': their fence, then a
/// barrier). Before sm_90 (and on cudasim), atomicAdds now.
__device__ inline void bulkReduceAdd(float *dst, const float *src, int bytes) {
#if !SHARDC_PTX_BULK
  for (int i = 0; i < bytes / 4; ++i)
    atomicAdd(dst + i, src[i]);
#else
  auto address = static_cast<uint32_t>(__cvta_generic_to_shared(src));
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 "
               "[%0], [%1], %2;" ::"l"(dst),
               "r"(address), "r"(bytes)
               : "memory");
#endif
}

/// cp.async.bulk.commit_group: the thread's bulk operations since its last
/// commit form a group (possibly empty).
__device__ inline void bulkCommit() {
#if SHARDC_PTX_BULK
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}

/// cp.async.bulk.wait_group.read 0: waits until the thread's committed bulk
/// groups have read their shared sources (which may then change).
__device__ inline void bulkWaitRead() {
#if SHARDC_PTX_BULK
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#endif
}

/// fence.proxy.async.shared::cta: the thread's shared-memory writes so far
/// become visible to the bulk operations issued after it (bulkReduceAdd).
__device__ inline void fenceProxyAsync() {
#if SHARDC_PTX_BULK
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

} // namespace shardc::rt::cuda

#endif // SHARDC_RT_CUDA_PTX_H
