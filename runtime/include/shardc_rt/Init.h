//===- Init.h - Deterministic parameter init and synthetic data -*- C++ -*-===//
//
// Sharding must not change the maths, so the initial weights must not depend
// on how many ranks there are or which slice each holds. Every value here is
// a pure function of (seed, tensor name, flat element index): element i of a
// tensor comes out the same whether one rank fills the whole tensor or four
// ranks fill a quarter each, and the full tensor assembled from any split is
// bit-identical.
//
// The generator is counter-based: element i of stream K uses outputs 2i and
// 2i + 1 of a splitmix64 sequence started at K, that is
// fmix64(K + (n + 1) * 0x9e3779b97f4a7c15) for n = 2i, 2i + 1, where K mixes
// the seed with the 64-bit FNV-1a hash of the name (and, for synthetic data,
// the step). Nothing is sequential, so any range is computed directly.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_INIT_H
#define SHARDC_RT_INIT_H

#include <cstdint>
#include <string>

namespace shardc::rt {

/// How a parameter's initial values are drawn.
enum class InitKind { Zeros, Ones, Normal, Uniform };

/// An initializer. Normal: a = mean, b = standard deviation (>= 0). Uniform:
/// values in [a, b) (a <= b). Zeros and Ones ignore a and b.
struct InitSpec {
  InitKind kind = InitKind::Zeros;
  double a = 0.0;
  double b = 0.0;
};

/// 64-bit FNV-1a of `text`, which keys each tensor's stream by its name.
uint64_t hashName(const std::string &text);

/// Fills out[0, end - begin) with elements [begin, end) of the flattened full
/// tensor `name` initialized by `spec` from `seed`. Normal uses Box-Muller
/// on the element's own two uniforms (the cosine branch only), so no element
/// depends on another. A bad range or spec is a rank-local fatal error.
void initRange(const InitSpec &spec, uint64_t seed, const std::string &name,
               int64_t begin, int64_t end, float *out);

/// Synthetic float input: elements [begin, end) of the flattened global batch
/// of input `inputName` at training step `step`, standard normal.
void syntheticFloats(uint64_t seed, const std::string &inputName, int64_t step,
                     int64_t begin, int64_t end, float *out);

/// Synthetic integer input (token ids, class labels): elements [begin, end)
/// of the flattened global batch of `inputName` at `step`, uniform in
/// [0, bound). 1 <= bound <= 2^31.
void syntheticInts(uint64_t seed, const std::string &inputName, int64_t step,
                   int64_t begin, int64_t end, int64_t bound, int32_t *out);

} // namespace shardc::rt

#endif // SHARDC_RT_INIT_H
