//===- Init.cpp - Deterministic parameter init and synthetic data ---------===//

#include "shardc_rt/Init.h"

#include "shardc_rt/Error.h"

#include <cmath>

using namespace shardc::rt;

namespace {

constexpr uint64_t golden = 0x9e3779b97f4a7c15ULL;
constexpr double twoPi = 6.283185307179586476925286766559;
// Separate domains so that a parameter and an input that share a name (or
// a hash) still draw unrelated values.
constexpr uint64_t initDomain = 0x696e6974ULL;      // "init"
constexpr uint64_t syntheticDomain = 0x64617461ULL; // "data"

/// The splitmix64 finalizer: a bijection with full avalanche.
uint64_t fmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// Output n of the splitmix64 sequence started at `key`.
uint64_t bitsAt(uint64_t key, uint64_t n) {
  return fmix64(key + (n + 1) * golden);
}

/// Uniform in [0, 1), 53 random bits.
double unitClosedOpen(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

/// Uniform in (0, 1): never 0, so the logarithm in Box-Muller is finite.
double unitOpen(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

/// Standard normal for element i of stream `key`.
double normalAt(uint64_t key, uint64_t i) {
  double u1 = unitOpen(bitsAt(key, 2 * i));
  double u2 = unitClosedOpen(bitsAt(key, 2 * i + 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(twoPi * u2);
}

uint64_t streamKey(uint64_t domain, uint64_t seed, const std::string &name) {
  return fmix64(fmix64(seed ^ domain) ^ hashName(name));
}

void checkRange(const char *call, const std::string &name, int64_t begin,
                int64_t end) {
  SHARDC_RT_CHECK(begin >= 0 && begin <= end, call,
                  "'" + name + "': bad element range [" +
                      std::to_string(begin) + ", " + std::to_string(end) + ")");
}

} // namespace

uint64_t shardc::rt::hashName(const std::string &text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

void shardc::rt::initRange(const InitSpec &spec, uint64_t seed,
                           const std::string &name, int64_t begin, int64_t end,
                           float *out) {
  checkRange("init", name, begin, end);
  int64_t count = end - begin;
  switch (spec.kind) {
  case InitKind::Zeros:
  case InitKind::Ones: {
    float value = spec.kind == InitKind::Ones ? 1.0f : 0.0f;
    for (int64_t i = 0; i < count; ++i)
      out[i] = value;
    return;
  }
  case InitKind::Normal: {
    SHARDC_RT_CHECK(
        std::isfinite(spec.a) && std::isfinite(spec.b) && spec.b >= 0, "init",
        "'" + name +
            "': normal needs a finite mean and std >= 0, "
            "got mean " +
            std::to_string(spec.a) + ", std " + std::to_string(spec.b));
    uint64_t key = streamKey(initDomain, seed, name);
    for (int64_t i = 0; i < count; ++i)
      out[i] = static_cast<float>(
          spec.a + spec.b * normalAt(key, static_cast<uint64_t>(begin + i)));
    return;
  }
  case InitKind::Uniform: {
    SHARDC_RT_CHECK(
        std::isfinite(spec.a) && std::isfinite(spec.b) && spec.a <= spec.b,
        "init",
        "'" + name + "': uniform needs finite low <= high, got [" +
            std::to_string(spec.a) + ", " + std::to_string(spec.b) + ")");
    uint64_t key = streamKey(initDomain, seed, name);
    float low = static_cast<float>(spec.a), high = static_cast<float>(spec.b);
    for (int64_t i = 0; i < count; ++i) {
      double u =
          unitClosedOpen(bitsAt(key, 2 * static_cast<uint64_t>(begin + i)));
      float value = static_cast<float>(spec.a + (spec.b - spec.a) * u);
      // Rounding to float can land on `high`; keep the interval half-open.
      if (value >= high && high > low)
        value = std::nextafter(high, low);
      out[i] = value;
    }
    return;
  }
  }
  SHARDC_RT_FAIL("init", "'" + name + "': unknown initializer kind");
}

/// The stream of input `inputName` at `step`.
static uint64_t syntheticKey(uint64_t seed, const std::string &inputName,
                             int64_t step) {
  return fmix64(streamKey(syntheticDomain, seed, inputName) ^
                fmix64(static_cast<uint64_t>(step) + golden));
}

void shardc::rt::syntheticFloats(uint64_t seed, const std::string &inputName,
                                 int64_t step, int64_t begin, int64_t end,
                                 float *out) {
  checkRange("synthetic data", inputName, begin, end);
  uint64_t key = syntheticKey(seed, inputName, step);
  for (int64_t i = 0; i < end - begin; ++i)
    out[i] =
        static_cast<float>(normalAt(key, static_cast<uint64_t>(begin + i)));
}

void shardc::rt::syntheticInts(uint64_t seed, const std::string &inputName,
                               int64_t step, int64_t begin, int64_t end,
                               int64_t bound, int32_t *out) {
  checkRange("synthetic data", inputName, begin, end);
  SHARDC_RT_CHECK(bound >= 1 && bound <= (int64_t(1) << 31), "synthetic data",
                  "'" + inputName + "': integer bound " +
                      std::to_string(bound) + " is not in [1, 2^31]");
  uint64_t key = syntheticKey(seed, inputName, step);
  for (int64_t i = 0; i < end - begin; ++i) {
    uint64_t bits = bitsAt(key, 2 * static_cast<uint64_t>(begin + i));
    // The high half of bits * bound (Lemire's reduction): no division, and
    // the bias, below bound / 2^64, is far under anything a test can see.
    out[i] = static_cast<int32_t>(
        (static_cast<unsigned __int128>(bits) * static_cast<uint64_t>(bound)) >>
        64);
  }
}
