//===- mma.h - nvcuda::wmma on the CPU, for cudasim -------------*- C++ -*-===//
//
// The warp matrix functions the runtime's kernels use. A fragment's
// distribution over the lanes of a warp is unspecified in CUDA, and code may
// only treat its elements x[0 .. num_elements) uniformly. Here each lane's
// fragment has room for the whole tile (row-major M x K for matrix_a, K x N
// for matrix_b, M x N for the accumulator): an a or b fragment is loaded
// whole by every lane; of an accumulator, a lane owns the elements whose
// index is its lane modulo 32 (8 of a 16 x 16 tile, as on the GPU), and
// loads, computes and stores only those, so that a warp's load, mma and
// store of a tile in memory reads and writes each element once. As CUDA
// requires, a tile's pointer must be 32-byte aligned and its leading
// dimension a multiple of 16 bytes, and a fragment loads from and stores
// to its own element type (float for tf32). TF32
// products see only their inputs' top 10 mantissa bits (the rest
// truncated), as on the tensor cores; bf16 products are exact; sums are
// f32.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_CUDASIM_MMA_H
#define SHARDC_CUDASIM_MMA_H

#include "../Simulator.h"

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
namespace precision {
struct tf32 {};
} // namespace precision

namespace detail {
template <typename Use, int M, int N, int K> struct Shape;
template <int M, int N, int K> struct Shape<matrix_a, M, N, K> {
  static constexpr int kRows = M, kCols = K;
};
template <int M, int N, int K> struct Shape<matrix_b, M, N, K> {
  static constexpr int kRows = K, kCols = N;
};
template <int M, int N, int K> struct Shape<accumulator, M, N, K> {
  static constexpr int kRows = M, kCols = N;
};
/// What a fragment holds: tf32 tiles hold f32.
template <typename T> struct Element { using type = T; };
template <> struct Element<precision::tf32> { using type = float; };

inline float toFloat(float x) { return x; }
inline float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

/// An f32's bits with the low `drop` mantissa bits cleared.
inline float truncateMantissa(float x, int drop) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits &= ~((uint32_t(1) << drop) - 1);
  std::memcpy(&x, &bits, 4);
  return x;
}
} // namespace detail

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
class fragment {
public:
  using Shape = detail::Shape<Use, M, N, K>;
  using element_type = typename detail::Element<T>::type;
  static constexpr int kRows = Shape::kRows, kCols = Shape::kCols;
  static constexpr int num_elements = kRows * kCols;
  static constexpr bool kTf32 = std::is_same_v<T, precision::tf32>;
  element_type x[num_elements];
};

namespace detail {
/// Reports a tile CUDA's load_matrix_sync or store_matrix_sync refuses.
template <typename E> void checkTile(const E *p, unsigned ldm) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0)
    ::cudasim::deviceError("a wmma tile's pointer is not 32-byte aligned");
  if (ldm * sizeof(E) % 16 != 0)
    ::cudasim::deviceError(
        "a wmma tile's leading dimension is not a multiple of 16 bytes");
}
} // namespace detail

/// Rounds to TF32 (nearest, ties away from zero: cvt.rna.tf32.f32).
inline float __float_to_tf32(float x) {
  return ::cudasim::fromBits<float>(::cudasim::roundToTf32(x));
}

template <typename Use, int M, int N, int K, typename T, typename Layout>
void load_matrix_sync(
    fragment<Use, M, N, K, T, Layout> &f,
    const typename fragment<Use, M, N, K, T, Layout>::element_type *p,
    unsigned ldm) {
  static_assert(!std::is_same_v<Use, accumulator>,
                "an accumulator's load takes a layout_t");
  using F = fragment<Use, M, N, K, T, Layout>;
  detail::checkTile(p, ldm);
  constexpr bool colMajor = std::is_same_v<Layout, col_major>;
  for (int r = 0; r < F::kRows; ++r)
    for (int c = 0; c < F::kCols; ++c)
      f.x[r * F::kCols + c] = colMajor ? p[c * ldm + r] : p[r * ldm + c];
}

template <int M, int N, int K, typename T>
void load_matrix_sync(fragment<accumulator, M, N, K, T> &f, const T *p,
                      unsigned ldm, layout_t layout) {
  detail::checkTile(p, ldm);
  for (int e = ::cudasim::lane(); e < M * N; e += 32) {
    int r = e / N, c = e % N;
    f.x[e] = layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c];
  }
}

template <int M, int N, int K, typename T>
void store_matrix_sync(T *p, const fragment<accumulator, M, N, K, T> &f,
                       unsigned ldm, layout_t layout) {
  detail::checkTile(p, ldm);
  for (int e = ::cudasim::lane(); e < M * N; e += 32) {
    int r = e / N, c = e % N;
    (layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = f.x[e];
  }
}

template <typename Use, int M, int N, int K, typename T, typename Layout>
void fill_fragment(
    fragment<Use, M, N, K, T, Layout> &f,
    typename fragment<Use, M, N, K, T, Layout>::element_type value) {
  for (auto &x : f.x)
    x = value;
}

template <int M, int N, int K, typename T, typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, M, N, K, float> &d,
              const fragment<matrix_a, M, N, K, T, LayoutA> &a,
              const fragment<matrix_b, M, N, K, T, LayoutB> &b,
              const fragment<accumulator, M, N, K, float> &c) {
  constexpr bool tf32 = std::is_same_v<T, precision::tf32>;
  auto input = [](auto x) {
    float f = detail::toFloat(x);
    return tf32 ? detail::truncateMantissa(f, 13) : f;
  };
  for (int e = ::cudasim::lane(); e < M * N; e += 32) {
    int i = e / N, j = e % N;
    float sum = c.x[e];
    for (int k = 0; k < K; ++k)
      sum += input(a.x[i * K + k]) * input(b.x[k * N + j]);
    d.x[e] = sum;
  }
}

} // namespace nvcuda::wmma

#endif // SHARDC_CUDASIM_MMA_H
