/*===- BFloat16.h - The storage type of mixed precision -----------*- C -*-===//
 *
 * bfloat16 is the upper half of an IEEE f32: 8 exponent bits, 7 mantissa
 * bits. Under mixed precision (param-dtype=bf16) tensors are stored in it and
 * every kernel computes on their f32 values (exact), rounding what it writes
 * to the nearest bfloat16, ties to even, as __float2bfloat16_rn does on a
 * GPU. GEMMs accumulate in f32.
 *
 *===----------------------------------------------------------------------===*/

#ifndef SHARDC_RT_BFLOAT16_H
#define SHARDC_RT_BFLOAT16_H

#include <stdint.h>

/* A bfloat16's bits. */
typedef uint16_t shardc_rt_bf16;

#ifdef __cplusplus
#include <cstring>

namespace shardc::rt {

/// The f32 a bfloat16 stands for (exact).
inline float widen(shardc_rt_bf16 h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// The nearest bfloat16 to f, ties to even; NaN stays a (quiet) NaN and
/// what overflows becomes infinity.
inline shardc_rt_bf16 narrow(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<shardc_rt_bf16>((bits >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<shardc_rt_bf16>((bits + rounding) >> 16);
}

} // namespace shardc::rt
#endif // __cplusplus

#endif /* SHARDC_RT_BFLOAT16_H */
