//===- TestRandom.h - Random inputs for the runtime's tests -----*- C++ -*-===//

#ifndef SHARDC_RT_TEST_TESTRANDOM_H
#define SHARDC_RT_TEST_TESTRANDOM_H

#include <cstdint>
#include <random>
#include <vector>

namespace shardc::rt::test {

/// n values uniform in [lo, hi).
template <typename T>
std::vector<T> randomValues(std::mt19937_64 &rng, size_t n, T lo, T hi) {
  std::uniform_real_distribution<T> dist(lo, hi);
  std::vector<T> v(n);
  for (T &x : v)
    x = dist(rng);
  return v;
}

/// n ids uniform in [0, v).
inline std::vector<int32_t> randomIds(std::mt19937_64 &rng, size_t n,
                                      int32_t v) {
  std::uniform_int_distribution<int32_t> dist(0, v - 1);
  std::vector<int32_t> ids(n);
  for (int32_t &id : ids)
    id = dist(rng);
  return ids;
}

} // namespace shardc::rt::test

#endif // SHARDC_RT_TEST_TESTRANDOM_H
