//===- GradCheck.cpp - Kernels against finite differences and naive code --===//
//
// Checks, in double precision with the templated kernels:
//  - every backward kernel against central finite differences of its
//    forward: with random x and a random cotangent r, L(x) = sum(f(x) * r),
//    the VJP must equal (L(x + h e_i) - L(x - h e_i)) / 2h for every i;
//  - the VJPs that the compiler's --train-autodiff builds from forward
//    kernels (linear and matmul through matmuls with transpose flags, add's
//    and linear's bias through sum_to, sum_to through add, scale through
//    scale), composed exactly as lib/Dialect/Train/Transforms/Autodiff.cpp
//    composes them, against the same finite differences;
//  - every forward kernel against a naive reference on small shapes, with
//    an edge case per op;
//  - the f32 C ABI against the f64 kernels, and the id validation.
// One line per check; the exit status is non-zero when any check fails.
//
// Build and run (from the repository root):
//   g++ -std=c++17 -O2 -Wall -Wextra -Iruntime/include
//       runtime/host/Kernels.cpp runtime/test/GradCheck.cpp -lopenblas
//       -o /tmp/gradcheck && /tmp/gradcheck
//
//===----------------------------------------------------------------------===//

#include "shardc_rt/BFloat16.h"
#include "shardc_rt/Kernels.h"

#include "TestRandom.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace cpu = shardc::rt::cpu;

namespace {

using Vec = std::vector<double>;
using Ids = std::vector<int32_t>;

/// The finite-difference step and the tolerance on its error. A central
/// difference in fp64 errs by truncation, h^2 / 6 |L'''| ~ 1e-13 for our
/// O(1) inputs, plus rounding, ~ eps |L| / h ~ 1e-16 * 10 / 1e-6 = 1e-9 for
/// the |L| <~ 10 of a few dozen O(1) terms. A tolerance of 1e-6, relative
/// to max(1, |gradient|), sits three orders of magnitude above both, and far
/// below the O(1e-2..1) errors of a wrong term, index or factor. (Seen: at
/// most a few 1e-9, on the largest case, attention over 70 positions.)
constexpr double kStep = 1e-6;
constexpr double kTolerance = 1e-6;

/// f32 kernels against the f64 ones: f32 rounding (6e-8) grown by the sums
/// of a few dozen terms, and by the 1 / std of a layernorm.
constexpr double kF32Tolerance = 1e-5;

std::mt19937_64 rng(0x5eed5a4dc0ffeeULL);

int numPassed = 0, numFailed = 0;

Vec random(size_t n, double lo = -1, double hi = 1) {
  return shardc::rt::test::randomValues(rng, n, lo, hi);
}

Ids randomIds(size_t n, int32_t v) {
  return shardc::rt::test::randomIds(rng, n, v);
}

double contract(const Vec &a, const Vec &b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i)
    sum += a[i] * b[i];
  return sum;
}

/// Prints one line: the largest |got - want|, the largest
/// |got - want| / max(1, |want|) (relative for large values, absolute for
/// small ones, so a gradient that is exactly 0 is not judged relatively to
/// finite-difference noise), and PASS when the latter is within tolerance.
/// A size mismatch or a NaN fails.
bool check(const std::string &name, const Vec &got, const Vec &want,
           double tolerance = kTolerance) {
  double maxAbs = 0, maxRel = 0;
  bool ok = got.size() == want.size();
  for (size_t i = 0; ok && i < got.size(); ++i) {
    double err = std::fabs(got[i] - want[i]);
    if (!(err <= std::numeric_limits<double>::max())) {
      ok = false;
      maxAbs = maxRel = std::numeric_limits<double>::infinity();
      break;
    }
    maxAbs = std::max(maxAbs, err);
    maxRel = std::max(maxRel, err / std::max(1.0, std::fabs(want[i])));
  }
  ok = ok && maxRel <= tolerance;
  std::printf("%-50s abs %9.2e  rel %9.2e  %s\n", name.c_str(), maxAbs, maxRel,
              ok ? "PASS" : "FAIL");
  // A kernel bug may crash the next check: keep what was printed.
  std::fflush(stdout);
  ++(ok ? numPassed : numFailed);
  return ok;
}

/// dL/dx_i by central differences, for every i; x is restored. The step
/// actually taken, (x + h) - (x - h), is used rather than 2h.
Vec numericGradient(Vec &x, const std::function<double()> &loss) {
  Vec grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double saved = x[i];
    double up = saved + kStep, down = saved - kStep;
    x[i] = up;
    double lossUp = loss();
    x[i] = down;
    double lossDown = loss();
    x[i] = saved;
    grad[i] = (lossUp - lossDown) / (up - down);
  }
  return grad;
}

std::vector<float> toFloat(const Vec &v) { return {v.begin(), v.end()}; }
Vec toDouble(const std::vector<float> &v) { return {v.begin(), v.end()}; }

//===----------------------------------------------------------------------===//
// Naive references
//===----------------------------------------------------------------------===//

/// op(a)[m, k] op(b)[k, n] of one matrix pair, by the definition.
Vec naiveMatmul(const Vec &a, const Vec &b, int64_t m, int64_t k, int64_t n,
                bool ta, bool tb) {
  Vec c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t l = 0; l < k; ++l)
        c[i * n + j] += (ta ? a[l * m + i] : a[i * k + l]) *
                        (tb ? b[j * k + l] : b[l * n + j]);
  return c;
}

/// Causal attention from its definition; `lse` (when given) receives each
/// (batch, head, query)'s log-sum-exp of its scaled scores.
Vec naiveAttention(const Vec &qkv, int64_t b, int64_t t, int64_t c,
                   int64_t heads, Vec *lse = nullptr) {
  int64_t d = c / heads;
  Vec out(b * t * c, 0.0), p(t);
  if (lse)
    lse->assign(b * heads * t, 0.0);
  auto at = [&](int64_t batch, int64_t row, int64_t col) {
    return qkv[(batch * t + row) * 3 * c + col];
  };
  for (int64_t batch = 0; batch < b; ++batch)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < t; ++i) {
        // softmax(q k^T / sqrt(d) + mask) with the mask as -inf.
        double maxScore = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < t; ++j) {
          double s = 0;
          for (int64_t e = 0; e < d; ++e)
            s += at(batch, i, h * d + e) * at(batch, j, c + h * d + e);
          p[j] = j > i ? -std::numeric_limits<double>::infinity()
                       : s / std::sqrt(double(d));
          maxScore = std::max(maxScore, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < t; ++j)
          sum += p[j] = std::exp(p[j] - maxScore);
        if (lse)
          (*lse)[(batch * heads + h) * t + i] = maxScore + std::log(sum);
        for (int64_t j = 0; j < t; ++j)
          for (int64_t e = 0; e < d; ++e)
            out[(batch * t + i) * c + h * d + e] +=
                p[j] / sum * at(batch, j, 2 * c + h * d + e);
      }
  return out;
}

Vec naiveLayerNorm(const Vec &x, const Vec &w, const Vec &b, int64_t rows,
                   int64_t c, double eps) {
  Vec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < c; ++j)
      mean += x[r * c + j] / double(c);
    for (int64_t j = 0; j < c; ++j)
      var += (x[r * c + j] - mean) * (x[r * c + j] - mean) / double(c);
    for (int64_t j = 0; j < c; ++j)
      y[r * c + j] = (x[r * c + j] - mean) / std::sqrt(var + eps) * w[j] + b[j];
  }
  return y;
}

/// The mean of log(sum_j exp(l_j)) - l_t, the formula itself (no max
/// subtraction: only for moderate logits).
double naiveCrossEntropy(const Vec &logits, const Ids &targets, int64_t n,
                         int64_t v) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < v; ++j)
      sum += std::exp(logits[i * v + j]);
    total += std::log(sum) - logits[i * v + targets[i]];
  }
  return total / double(n);
}

double naiveGelu(double x) {
  long double v = x;
  return double(0.5L * v *
                (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846264338L) *
                               (v + 0.044715L * v * v * v))));
}

//===----------------------------------------------------------------------===//
// Linear ops: forward against naive code, VJPs built from forward kernels
//===----------------------------------------------------------------------===//

void checkLinear() {
  const int64_t m = 3, k = 4, n = 5;
  Vec x = random(m * k), w = random(n * k), b = random(n), r = random(m * n);
  Vec y(m * n), want = naiveMatmul(x, w, m, k, n, false, true);
  cpu::linear(x.data(), w.data(), static_cast<const double *>(nullptr),
              y.data(), m, k, n);
  check("linear forward, no bias", y, want);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      want[i * n + j] += b[j];
  cpu::linear(x.data(), w.data(), b.data(), y.data(), m, k, n);
  check("linear forward", y, want);

  // Edge: k = 0, an empty sum: y = b, or 0 without bias, over garbage.
  Vec empty, yEmpty(2 * n, 7.0), wantEmpty(2 * n, 0.0);
  cpu::linear(empty.data(), empty.data(), static_cast<const double *>(nullptr),
              yEmpty.data(), 2, 0, n);
  check("linear forward, k = 0", yEmpty, wantEmpty);

  // The VJP as Autodiff.cpp builds it: dx = matmul(dy, w),
  // dw = matmul(dy, x) {transpose_lhs}, db = sum_to(dy).
  auto loss = [&] {
    Vec out(m * n);
    cpu::linear(x.data(), w.data(), b.data(), out.data(), m, k, n);
    return contract(out, r);
  };
  Vec dx(m * k), dw(n * k), db(n);
  cpu::matmul(r.data(), w.data(), dx.data(), 1, m, n, k, false, false);
  cpu::matmul(r.data(), x.data(), dw.data(), 1, n, m, k, true, false);
  cpu::sumTo(r.data(), db.data(), m, n);
  check("linear vjp dx = matmul(dy, w)", dx, numericGradient(x, loss));
  check("linear vjp dw = matmul(dy^T, x)", dw, numericGradient(w, loss));
  check("linear vjp db = sum_to(dy)", db, numericGradient(b, loss));
}

void checkMatmul() {
  const int64_t batch = 2, m = 3, k = 4, n = 2;
  for (int flags = 0; flags < 4; ++flags) {
    bool ta = flags & 1, tb = flags & 2;
    std::string suffix = std::string(ta ? " tl" : "") + (tb ? " tr" : "");
    Vec a = random(batch * m * k), b = random(batch * k * n),
        r = random(batch * m * n);
    Vec c(batch * m * n), want;
    for (int64_t i = 0; i < batch; ++i) {
      Vec ai(a.begin() + i * m * k, a.begin() + (i + 1) * m * k);
      Vec bi(b.begin() + i * k * n, b.begin() + (i + 1) * k * n);
      Vec ci = naiveMatmul(ai, bi, m, k, n, ta, tb);
      want.insert(want.end(), ci.begin(), ci.end());
    }
    cpu::matmul(a.data(), b.data(), c.data(), batch, m, k, n, ta, tb);
    check("matmul forward" + suffix, c, want);

    // Autodiff.cpp's rule, C = op(A) op(B):
    //   dA = ta ? matmul(B, dC, tb, true) : matmul(dC, B, false, !tb)
    //   dB = tb ? matmul(dC, A, true, ta) : matmul(A, dC, !ta, false)
    auto loss = [&] {
      Vec out(batch * m * n);
      cpu::matmul(a.data(), b.data(), out.data(), batch, m, k, n, ta, tb);
      return contract(out, r);
    };
    Vec da(a.size()), db(b.size());
    if (ta)
      cpu::matmul(b.data(), r.data(), da.data(), batch, k, n, m, tb, true);
    else
      cpu::matmul(r.data(), b.data(), da.data(), batch, m, n, k, false, !tb);
    if (tb)
      cpu::matmul(r.data(), a.data(), db.data(), batch, n, m, k, true, ta);
    else
      cpu::matmul(a.data(), r.data(), db.data(), batch, k, m, n, !ta, false);
    check("matmul vjp dA" + suffix, da, numericGradient(a, loss));
    check("matmul vjp dB" + suffix, db, numericGradient(b, loss));
  }

  // Edge: k = 1, an outer product.
  Vec a = random(4), b = random(5), c(20);
  cpu::matmul(a.data(), b.data(), c.data(), 1, 4, 1, 5, false, false);
  check("matmul forward, k = 1", c, naiveMatmul(a, b, 4, 1, 5, false, false));
}

void checkAddAndSumTo() {
  const int64_t outer = 3, m = 8, n = outer * m;
  Vec lhs = random(n), rhs = random(m), r = random(n), y(n), want(n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = lhs[i] + rhs[i % m];
  cpu::add(lhs.data(), rhs.data(), y.data(), n, m);
  check("add forward, broadcast", y, want);
  Vec inPlace = lhs;
  cpu::add(inPlace.data(), rhs.data(), inPlace.data(), n, m);
  check("add forward, in place", inPlace, want);
  // Edge: no broadcast (m == n).
  Vec other = random(n), same(n), wantSame(n);
  for (int64_t i = 0; i < n; ++i)
    wantSame[i] = lhs[i] + other[i];
  cpu::add(lhs.data(), other.data(), same.data(), n, n);
  check("add forward, same shape", same, wantSame);

  // VJP: dlhs = dy, drhs = sum_to(dy).
  auto loss = [&] {
    Vec out(n);
    cpu::add(lhs.data(), rhs.data(), out.data(), n, m);
    return contract(out, r);
  };
  Vec drhs(m);
  cpu::sumTo(r.data(), drhs.data(), outer, m);
  check("add vjp dlhs = dy", r, numericGradient(lhs, loss));
  check("add vjp drhs = sum_to(dy)", drhs, numericGradient(rhs, loss));

  // sum_to against the definition, and with one leading row (a copy).
  Vec x = random(n), s(m), wantS(m, 0.0);
  for (int64_t i = 0; i < n; ++i)
    wantS[i % m] += x[i];
  cpu::sumTo(x.data(), s.data(), outer, m);
  check("sum_to forward", s, wantS);
  Vec one(m, 7.0);
  cpu::sumTo(rhs.data(), one.data(), 1, m);
  check("sum_to forward, outer = 1", one, rhs);

  // sum_to is the adjoint of add's broadcast: <sum_to(x), z> equals
  // <x, add(0, z)>.
  Vec z = random(m), zeros(n, 0.0), broadcast(n);
  cpu::add(zeros.data(), z.data(), broadcast.data(), n, m);
  check("sum_to adjoint of broadcast", {contract(s, z)},
        {contract(x, broadcast)});

  // VJP of sum_to as Autodiff.cpp builds it: dx = add(zeros, dy).
  Vec rs = random(m);
  auto sumLoss = [&] {
    Vec out(m);
    cpu::sumTo(x.data(), out.data(), outer, m);
    return contract(out, rs);
  };
  Vec dx(n);
  cpu::add(zeros.data(), rs.data(), dx.data(), n, m);
  check("sum_to vjp dx = add(0, dy)", dx, numericGradient(x, sumLoss));
}

void checkScale() {
  const int64_t n = 20;
  const double factor = -0.37;
  Vec x = random(n), r = random(n), y(n), want(n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = x[i] * factor;
  cpu::scale(x.data(), y.data(), n, factor);
  check("scale forward", y, want);
  auto loss = [&] {
    Vec out(n);
    cpu::scale(x.data(), out.data(), n, factor);
    return contract(out, r);
  };
  Vec dx(n);
  cpu::scale(r.data(), dx.data(), n, factor);
  check("scale vjp dx = scale(dy)", dx, numericGradient(x, loss));
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

void checkGelu() {
  // Both tails and the curved middle.
  Vec x = random(40, -4, 4), r = random(40);
  x[0] = 0;
  x[1] = 10;
  x[2] = -10;
  const int64_t n = x.size();
  Vec y(n), want(n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = naiveGelu(x[i]);
  cpu::gelu(x.data(), y.data(), n);
  check("gelu forward", y, want);

  auto loss = [&] {
    Vec out(n);
    cpu::gelu(x.data(), out.data(), n);
    return contract(out, r);
  };
  Vec dx(n);
  cpu::geluGrad(r.data(), x.data(), dx.data(), n);
  check("gelu_grad", dx, numericGradient(x, loss));

  // Edge: far tails, where exp overflows: gelu is x or 0, gelu' 1 or 0, and
  // nothing is NaN, in f64 and in f32.
  Vec tails = {-1000, 1000}, ones = {1, 1}, tailY(2), tailDx(2);
  cpu::gelu(tails.data(), tailY.data(), 2);
  cpu::geluGrad(ones.data(), tails.data(), tailDx.data(), 2);
  std::vector<float> tailsF = toFloat(tails), onesF = toFloat(ones), tailYF(2),
                     tailDxF(2);
  shardc_rt_gelu_f32(tailsF.data(), tailYF.data(), 2);
  shardc_rt_gelu_grad_f32(onesF.data(), tailsF.data(), tailDxF.data(), 2);
  check("gelu and gelu_grad at -1000, 1000",
        {tailY[0], tailY[1], tailDx[0], tailDx[1], tailYF[0], tailYF[1],
         tailDxF[0], tailDxF[1]},
        {0, 1000, 0, 1, 0, 1000, 0, 1});
}

void checkRelu() {
  // Keep x away from the kink, where the function has no derivative and a
  // central difference straddling 0 gives 1/2.
  Vec x = random(30), r = random(30);
  for (double &v : x)
    if (std::fabs(v) < 1e-3)
      v = 0.5;
  const int64_t n = x.size();
  Vec y(n), want(n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = x[i] > 0 ? x[i] : 0;
  cpu::relu(x.data(), y.data(), n);
  check("relu forward", y, want);

  auto loss = [&] {
    Vec out(n);
    cpu::relu(x.data(), out.data(), n);
    return contract(out, r);
  };
  Vec dx(n);
  cpu::reluGrad(r.data(), x.data(), dx.data(), n);
  check("relu_grad", dx, numericGradient(x, loss));

  // Edge: at 0 the gradient is 0, as in PyTorch.
  Vec zero = {0.0, -0.0}, dy = {3.0, 3.0}, dzero(2);
  cpu::reluGrad(dy.data(), zero.data(), dzero.data(), 2);
  check("relu_grad at 0 is 0", dzero, {0.0, 0.0});
}

//===----------------------------------------------------------------------===//
// Layernorm, embedding, attention, cross-entropy
//===----------------------------------------------------------------------===//

void checkLayerNormCase(const std::string &name, Vec x, int64_t rows, int64_t c,
                        double eps) {
  Vec w = random(c, 0.5, 1.5), b = random(c), r = random(rows * c);
  Vec y(rows * c);
  cpu::layerNorm(x.data(), w.data(), b.data(), y.data(), rows, c, eps);
  check("layernorm forward" + name, y, naiveLayerNorm(x, w, b, rows, c, eps));

  auto loss = [&] {
    Vec out(rows * c);
    cpu::layerNorm(x.data(), w.data(), b.data(), out.data(), rows, c, eps);
    return contract(out, r);
  };
  Vec dx(rows * c), dw(c), db(c);
  cpu::layerNormGrad(r.data(), x.data(), w.data(), dx.data(), dw.data(),
                     db.data(), rows, c, eps);
  check("layernorm_grad dx" + name, dx, numericGradient(x, loss));
  check("layernorm_grad dw" + name, dw, numericGradient(w, loss));
  check("layernorm_grad db" + name, db, numericGradient(b, loss));
}

void checkLayerNorm() {
  const int64_t rows = 3, c = 8;
  // A mean far from 0 too: the two-pass statistics must not lose it.
  Vec x = random(rows * c);
  for (int64_t j = 0; j < c; ++j)
    x[2 * c + j] += 5;
  checkLayerNormCase("", x, rows, c, 1e-5);

  // Edge: a constant row has variance 0: x - mean = 0 exactly, so y = b, and
  // the gradient is (g - mean(g)) / sqrt(eps), large but finite.
  Vec constant(2 * c, 0.7);
  for (int64_t j = 0; j < c; ++j)
    constant[c + j] = random(1)[0];
  checkLayerNormCase(", constant row", constant, 2, c, 1e-5);
  Vec w(c, 2.0), b = random(c), y(c);
  cpu::layerNorm(constant.data(), w.data(), b.data(), y.data(), 1, c, 1e-5);
  check("layernorm forward, constant row is bias", y, b);
}

void checkEmbedding() {
  const int64_t n = 7, v = 5, c = 3;
  // Repeated ids and both ends of the table.
  Ids ids = {0, 4, 2, 4, 0, 1, 4};
  Vec table = random(v * c), r = random(n * c), out(n * c), want;
  for (int32_t id : ids)
    want.insert(want.end(), table.begin() + id * c,
                table.begin() + (id + 1) * c);
  int64_t status =
      cpu::embedding(ids.data(), table.data(), out.data(), n, v, c);
  check("embedding forward", out, want);
  check("embedding returns -1 when ids are valid", {double(status)}, {-1});

  auto loss = [&] {
    Vec rows(n * c);
    cpu::embedding(ids.data(), table.data(), rows.data(), n, v, c);
    return contract(rows, r);
  };
  // Start from garbage: the kernel zeroes the table first (row 3 is unused).
  Vec dtable(v * c, 7.0);
  status = cpu::embeddingGrad(r.data(), ids.data(), dtable.data(), n, v, c);
  check("embedding_grad", dtable, numericGradient(table, loss));
  check("embedding_grad returns -1 when valid", {double(status)}, {-1});

  // Bad ids: the position of the first is returned and nothing is written.
  for (int32_t bad : {-1, int32_t(v)}) {
    Ids badIds = ids;
    badIds[3] = bad;
    badIds[5] = bad;
    std::string what = bad < 0 ? "-1" : "V";
    Vec untouched(n * c, 7.0);
    status =
        cpu::embedding(badIds.data(), table.data(), untouched.data(), n, v, c);
    check("embedding id " + what + ": position, no write",
          {double(status),
           *std::max_element(untouched.begin(), untouched.end()),
           *std::min_element(untouched.begin(), untouched.end())},
          {3, 7, 7});
    Vec grad(v * c, 7.0);
    status = cpu::embeddingGrad(r.data(), badIds.data(), grad.data(), n, v, c);
    check("embedding_grad id " + what + ": position, no write",
          {double(status), *std::max_element(grad.begin(), grad.end()),
           *std::min_element(grad.begin(), grad.end())},
          {3, 7, 7});
  }
}

void checkAttentionCase(const std::string &name, int64_t b, int64_t t,
                        int64_t c, int64_t heads, bool withGradient = true) {
  Vec qkv = random(b * t * 3 * c, -2, 2), r = random(b * t * c);
  Vec y(b * t * c), lse(b * heads * t), wantLse;
  cpu::attention(qkv.data(), y.data(), lse.data(), b, t, c, heads);
  check("attention forward" + name, y,
        naiveAttention(qkv, b, t, c, heads, &wantLse));
  check("attention lse" + name, lse, wantLse);
  if (!withGradient)
    return;

  auto loss = [&] {
    Vec out(b * t * c);
    cpu::attention(qkv.data(), out.data(), static_cast<double *>(nullptr), b, t,
                   c, heads);
    return contract(out, r);
  };
  // Start from garbage: every element of dqkv must be written.
  Vec dqkv(qkv.size(), 7.0);
  cpu::attentionGrad(r.data(), qkv.data(), y.data(), lse.data(), dqkv.data(), b,
                     t, c, heads);
  check("attention_grad" + name, dqkv, numericGradient(qkv, loss));
}

void checkAttention() {
  checkAttentionCase(", b2 t5 c8 h2", 2, 5, 8, 2);
  checkAttentionCase(", b1 t6 c6 h3", 1, 6, 6, 3);
  // Past one block of query rows (64): a full block and a ragged one.
  checkAttentionCase(", b1 t70 c4 h2", 1, 70, 4, 2);
  checkAttentionCase(", b2 t129 c4 h2 (no grad)", 2, 129, 4, 2, false);

  // Edge: t = 1 attends only to itself: y = v, dq = dk = 0, dv = dy.
  checkAttentionCase(", t1", 2, 1, 4, 2);
  const int64_t c = 4;
  Vec qkv = random(3 * c), y(c), lse(2), dy = random(c), dqkv(3 * c, 7.0);
  cpu::attention(qkv.data(), y.data(), lse.data(), 1, 1, c, 2);
  check("attention forward, t1 is v", y, Vec(qkv.begin() + 2 * c, qkv.end()));
  cpu::attentionGrad(dy.data(), qkv.data(), y.data(), lse.data(), dqkv.data(),
                     1, 1, c, 2);
  Vec want(2 * c, 0.0);
  want.insert(want.end(), dy.begin(), dy.end());
  check("attention_grad, t1 is (0, 0, dy)", dqkv, want);
}

void checkCrossEntropy() {
  const int64_t n = 4, v = 7;
  // Targets at both ends of the vocabulary.
  Ids targets = {0, 6, 3, 6};
  Vec logits = random(n * v, -3, 3);
  double loss = 0;
  int64_t status =
      cpu::crossEntropy(logits.data(), targets.data(), &loss, n, v, v);
  check("cross_entropy forward", {loss},
        {naiveCrossEntropy(logits, targets, n, v)});
  check("cross_entropy returns -1 when valid", {double(status)}, {-1});

  // Edge: logits near 1000 overflow exp() without the max subtraction; the
  // loss is invariant to a shift of every logit.
  Vec shifted = logits;
  for (double &l : shifted)
    l += 1000;
  double shiftedLoss = 0;
  cpu::crossEntropy(shifted.data(), targets.data(), &shiftedLoss, n, v, v);
  check("cross_entropy forward, logits + 1000", {shiftedLoss}, {loss});

  const double dloss = 0.7;
  auto lossFn = [&] {
    double value = 0;
    cpu::crossEntropy(logits.data(), targets.data(), &value, n, v, v);
    return value * dloss;
  };
  Vec dlogits(n * v);
  status = cpu::crossEntropyGrad(&dloss, logits.data(), targets.data(),
                                 dlogits.data(), n, v, v);
  check("cross_entropy_grad", dlogits, numericGradient(logits, lossFn));
  check("cross_entropy_grad returns -1 when valid", {double(status)}, {-1});

  // Edge: one class: softmax is 1, the loss and its gradient 0.
  Vec single = random(3);
  Ids zeros = {0, 0, 0};
  double singleLoss = 5;
  Vec dsingle(3, 7.0);
  cpu::crossEntropy(single.data(), zeros.data(), &singleLoss, 3, 1, 1);
  cpu::crossEntropyGrad(&dloss, single.data(), zeros.data(), dsingle.data(), 3,
                        1, 1);
  check("cross_entropy, one class: loss 0, grad 0",
        {singleLoss, dsingle[0], dsingle[1], dsingle[2]}, {0, 0, 0, 0});

  // Bad targets: the position of the first, nothing written.
  for (int32_t bad : {-1, int32_t(v)}) {
    Ids badTargets = targets;
    badTargets[2] = bad;
    std::string what = bad < 0 ? "-1" : "V";
    double untouched = 7;
    status = cpu::crossEntropy(logits.data(), badTargets.data(), &untouched, n,
                               v, v);
    check("cross_entropy target " + what + ": position, no write",
          {double(status), untouched}, {2, 7});
    Vec grad(n * v, 7.0);
    status = cpu::crossEntropyGrad(&dloss, logits.data(), badTargets.data(),
                                   grad.data(), n, v, v);
    check("cross_entropy_grad target " + what + ": position, no write",
          {double(status), *std::max_element(grad.begin(), grad.end()),
           *std::min_element(grad.begin(), grad.end())},
          {2, 7, 7});
  }

  // Padding (train.cross_entropy's `classes`): rows of ld = v + 3 logits,
  // the first v of them classes. The loss and the classes' gradient are the
  // unpadded ones, whatever the padding holds; the padding's gradient is 0,
  // also in place; a target in the padding is out of range.
  const int64_t ld = v + 3;
  Vec padded(n * ld), gradPadded(n * ld, 7.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < ld; ++j)
      padded[i * ld + j] = j < v ? logits[i * v + j] : 50.0 + double(j);
  double paddedLoss = 0;
  status =
      cpu::crossEntropy(padded.data(), targets.data(), &paddedLoss, n, v, ld);
  check("cross_entropy with padding: the unpadded loss",
        {paddedLoss, double(status)}, {loss, -1});
  Vec wantPadded(n * ld, 0.0);
  for (int64_t i = 0; i < n; ++i)
    std::copy_n(dlogits.begin() + i * v, v, wantPadded.begin() + i * ld);
  cpu::crossEntropyGrad(&dloss, padded.data(), targets.data(),
                        gradPadded.data(), n, v, ld);
  check("cross_entropy_grad with padding: padding 0", gradPadded, wantPadded);
  cpu::crossEntropyGrad(&dloss, padded.data(), targets.data(), padded.data(), n,
                        v, ld);
  check("cross_entropy_grad with padding, in place", padded, wantPadded);
  Ids inPadding = targets;
  inPadding[1] = int32_t(v + 1);
  Vec untouched(n * ld, 7.0);
  check("cross_entropy target in the padding: out of range",
        {double(cpu::crossEntropy(padded.data(), inPadding.data(), &paddedLoss,
                                  n, v, ld)),
         double(cpu::crossEntropyGrad(&dloss, padded.data(), inPadding.data(),
                                      untouched.data(), n, v, ld)),
         *std::min_element(untouched.begin(), untouched.end()),
         *std::max_element(untouched.begin(), untouched.end())},
        {1, 1, 7, 7});
}

void checkHelpers() {
  std::vector<int32_t> ids(5, -9);
  cpu::iota(ids.data(), 5);
  check("iota", Vec(ids.begin(), ids.end()), {0, 1, 2, 3, 4});
  Vec src = random(9), dst(9, 7.0);
  cpu::copy(dst.data(), src.data(), 9);
  check("copy", dst, src);
  cpu::fill(dst.data(), -2.5, 9);
  check("fill", dst, Vec(9, -2.5));
  Vec want(9);
  for (int i = 0; i < 9; ++i)
    want[i] = dst[i] + src[i];
  cpu::accumulate(dst.data(), src.data(), 9);
  check("accumulate", dst, want);
}

//===----------------------------------------------------------------------===//
// The f32 C ABI against the f64 kernels
//===----------------------------------------------------------------------===//

void checkFloatAbi() {
  auto compare = [](const std::string &name, const std::vector<float> &got,
                    const Vec &want) {
    check("f32 " + name, toDouble(got), want, kF32Tolerance);
  };
  // Inputs exactly representable in f32, so that both see the same data.
  auto input = [](size_t n, double lo = -1, double hi = 1) {
    return toDouble(toFloat(random(n, lo, hi)));
  };
  const int64_t m = 6, k = 16, n = 5;
  {
    Vec x = input(m * k), w = input(n * k), b = input(n), y(m * n);
    std::vector<float> yf(m * n);
    cpu::linear(x.data(), w.data(), b.data(), y.data(), m, k, n);
    shardc_rt_linear_f32(toFloat(x).data(), toFloat(w).data(),
                         toFloat(b).data(), yf.data(), m, k, n);
    compare("linear", yf, y);
    Vec c(2 * m * n);
    std::vector<float> cf(2 * m * n);
    Vec a = input(2 * k * m), bb = input(2 * n * k);
    cpu::matmul(a.data(), bb.data(), c.data(), 2, m, k, n, true, true);
    shardc_rt_matmul_f32(toFloat(a).data(), toFloat(bb).data(), cf.data(), 2, m,
                         k, n, 1, 1);
    compare("matmul tl tr", cf, c);
  }
  const int64_t size = 48, inner = 16;
  // Wide enough to reach the tails of gelu.
  Vec x = input(size, -12, 12), rhs = input(inner), dy = input(size), y(size);
  std::vector<float> xf = toFloat(x), dyf = toFloat(dy), yf(size);
  cpu::add(x.data(), rhs.data(), y.data(), size, inner);
  shardc_rt_add_f32(xf.data(), toFloat(rhs).data(), yf.data(), size, inner);
  compare("add", yf, y);
  cpu::scale(x.data(), y.data(), size, 0.125);
  shardc_rt_scale_f32(xf.data(), yf.data(), size, 0.125);
  compare("scale", yf, y);
  cpu::gelu(x.data(), y.data(), size);
  shardc_rt_gelu_f32(xf.data(), yf.data(), size);
  compare("gelu", yf, y);
  cpu::relu(x.data(), y.data(), size);
  shardc_rt_relu_f32(xf.data(), yf.data(), size);
  compare("relu", yf, y);
  cpu::geluGrad(dy.data(), x.data(), y.data(), size);
  shardc_rt_gelu_grad_f32(dyf.data(), xf.data(), yf.data(), size);
  compare("gelu_grad", yf, y);
  cpu::reluGrad(dy.data(), x.data(), y.data(), size);
  shardc_rt_relu_grad_f32(dyf.data(), xf.data(), yf.data(), size);
  compare("relu_grad", yf, y);
  Vec s(inner);
  std::vector<float> sf(inner);
  cpu::sumTo(x.data(), s.data(), size / inner, inner);
  shardc_rt_sum_to_f32(xf.data(), sf.data(), size / inner, inner);
  compare("sum_to", sf, s);
  std::vector<float> helper(size, 7.0f);
  shardc_rt_copy_f32(helper.data(), xf.data(), size);
  shardc_rt_accumulate_f32(helper.data(), xf.data(), size);
  Vec twice(size);
  for (int64_t i = 0; i < size; ++i)
    twice[i] = 2 * x[i];
  compare("copy, accumulate", helper, twice);
  shardc_rt_fill_f32(helper.data(), 1.5f, size);
  compare("fill", helper, Vec(size, 1.5));
  std::vector<int32_t> positions(4, -9);
  shardc_rt_iota_i32(positions.data(), 4);
  check("i32 iota", Vec(positions.begin(), positions.end()), {0, 1, 2, 3});

  {
    const int64_t rows = 3, c = 16;
    Vec lx = input(rows * c), w = input(c, 0.5, 1.5), b = input(c),
        ldy = input(rows * c), ly(rows * c), dw(c), db(c);
    std::vector<float> lyf(rows * c), dwf(c), dbf(c);
    cpu::layerNorm(lx.data(), w.data(), b.data(), ly.data(), rows, c, 1e-5);
    shardc_rt_layernorm_f32(toFloat(lx).data(), toFloat(w).data(),
                            toFloat(b).data(), lyf.data(), rows, c, 1e-5);
    compare("layernorm", lyf, ly);
    cpu::layerNormGrad(ldy.data(), lx.data(), w.data(), ly.data(), dw.data(),
                       db.data(), rows, c, 1e-5);
    shardc_rt_layernorm_grad_f32(toFloat(ldy).data(), toFloat(lx).data(),
                                 toFloat(w).data(), lyf.data(), dwf.data(),
                                 dbf.data(), rows, c, 1e-5);
    compare("layernorm_grad dx", lyf, ly);
    compare("layernorm_grad dw", dwf, dw);
    compare("layernorm_grad db", dbf, db);
  }
  {
    const int64_t count = 6, v = 9, c = 4;
    Ids ids = randomIds(count, v);
    Vec table = input(v * c), out(count * c), edy = input(count * c),
        dtable(v * c);
    std::vector<float> outf(count * c), dtablef(v * c);
    cpu::embedding(ids.data(), table.data(), out.data(), count, v, c);
    int64_t status = shardc_rt_embedding_f32(ids.data(), toFloat(table).data(),
                                             outf.data(), count, v, c);
    compare("embedding", outf, out);
    cpu::embeddingGrad(edy.data(), ids.data(), dtable.data(), count, v, c);
    int64_t gradStatus = shardc_rt_embedding_grad_f32(
        toFloat(edy).data(), ids.data(), dtablef.data(), count, v, c);
    compare("embedding_grad", dtablef, dtable);
    Ids bad = ids;
    bad[4] = -3;
    check("f32 embedding statuses",
          {double(status), double(gradStatus),
           double(shardc_rt_embedding_f32(bad.data(), toFloat(table).data(),
                                          outf.data(), count, v, c)),
           double(shardc_rt_embedding_grad_f32(toFloat(edy).data(), bad.data(),
                                               dtablef.data(), count, v, c))},
          {-1, -1, 4, 4});
  }
  // Attention within one block of query rows, and over three.
  for (auto [b, t, c, heads] : {std::array<int64_t, 4>{2, 9, 8, 2},
                                std::array<int64_t, 4>{1, 150, 32, 4}}) {
    std::string shape = " t" + std::to_string(t);
    Vec qkv = input(b * t * 3 * c, -2, 2), ady = input(b * t * c),
        out(b * t * c), lse(b * heads * t), dqkv(qkv.size());
    std::vector<float> outf(out.size()), lsef(lse.size()), dqkvf(qkv.size());
    cpu::attention(qkv.data(), out.data(), lse.data(), b, t, c, heads);
    shardc_rt_attention_f32(toFloat(qkv).data(), outf.data(), lsef.data(), b, t,
                            c, heads);
    compare("attention" + shape, outf, out);
    compare("attention lse" + shape, lsef, lse);
    cpu::attentionGrad(ady.data(), qkv.data(), out.data(), lse.data(),
                       dqkv.data(), b, t, c, heads);
    shardc_rt_attention_grad_f32(toFloat(ady).data(), toFloat(qkv).data(),
                                 outf.data(), lsef.data(), dqkvf.data(), b, t,
                                 c, heads);
    compare("attention_grad" + shape, dqkvf, dqkv);
  }
  {
    const int64_t count = 5, v = 11;
    Ids targets = randomIds(count, v);
    Vec logits = input(count * v, -4, 4), dlogits(count * v);
    std::vector<float> dlogitsf(count * v);
    double loss = 0, dloss = 1.5;
    float lossf = 0, dlossf = 1.5f;
    cpu::crossEntropy(logits.data(), targets.data(), &loss, count, v, v);
    int64_t status = shardc_rt_cross_entropy_f32(
        toFloat(logits).data(), targets.data(), &lossf, count, v, v);
    compare("cross_entropy", {lossf}, {loss});
    cpu::crossEntropyGrad(&dloss, logits.data(), targets.data(), dlogits.data(),
                          count, v, v);
    int64_t gradStatus = shardc_rt_cross_entropy_grad_f32(
        &dlossf, toFloat(logits).data(), targets.data(), dlogitsf.data(), count,
        v, v);
    compare("cross_entropy_grad", dlogitsf, dlogits);
    // Written over the logits, as a step does where they die there.
    std::vector<float> inPlace = toFloat(logits);
    shardc_rt_cross_entropy_grad_f32(&dlossf, inPlace.data(), targets.data(),
                                     inPlace.data(), count, v, v);
    compare("cross_entropy_grad in place", inPlace, dlogits);
    // Fused (train.cross_entropy_and_grad): the pair's loss and gradient, to
    // the bit, in place too; a bad target writes neither.
    float lossBoth = 0;
    std::vector<float> both = toFloat(logits);
    int64_t bothStatus = shardc_rt_cross_entropy_and_grad_f32(
        &dlossf, both.data(), targets.data(), &lossBoth, both.data(), count, v,
        v);
    std::vector<float> pairGrad = toFloat(logits);
    shardc_rt_cross_entropy_grad_f32(&dlossf, pairGrad.data(), targets.data(),
                                     pairGrad.data(), count, v, v);
    check("cross_entropy_and_grad in place: the pair's bits",
          {double(bothStatus), double(lossBoth == lossf),
           double(both == pairGrad)},
          {-1, 1, 1});
    Ids bad = targets;
    bad[1] = int32_t(v);
    check("f32 cross_entropy statuses",
          {double(status), double(gradStatus),
           double(shardc_rt_cross_entropy_f32(toFloat(logits).data(),
                                              bad.data(), &lossf, count, v, v)),
           double(shardc_rt_cross_entropy_grad_f32(
               &dlossf, toFloat(logits).data(), bad.data(), dlogitsf.data(),
               count, v, v))},
          {-1, -1, 1, 1});
    std::vector<float> kept = toFloat(logits);
    float keptLoss = 9.0f;
    check("cross_entropy_and_grad with a bad target: position, no write",
          {double(shardc_rt_cross_entropy_and_grad_f32(
               &dlossf, kept.data(), bad.data(), &keptLoss, kept.data(), count,
               v, v)),
           double(keptLoss), double(kept == toFloat(logits))},
          {1, 9, 1});
  }
}

/// The bf16 cross-entropy kernels over padded rows: the loss and the
/// classes' gradient are the f32 kernels' on the widened classes (the
/// gradient rounded once), the padding's gradient is 0, and the fused
/// kernel gives the pair's bits, in place.
void checkBf16CrossEntropy() {
  const int64_t count = 5, v = 11, ld = 16;
  Ids targets = randomIds(count, v);
  Vec classes = random(count * v, -4, 4);
  std::vector<shardc_rt_bf16> padded(count * ld);
  std::vector<float> wide(count * v);
  for (int64_t i = 0; i < count; ++i)
    for (int64_t j = 0; j < ld; ++j) {
      shardc_rt_bf16 h = shardc::rt::narrow(j < v ? float(classes[i * v + j])
                                                  : 50.0f + float(j));
      padded[i * ld + j] = h;
      if (j < v)
        wide[i * v + j] = shardc::rt::widen(h);
    }
  float dloss = 1.5f, loss = 0, wideLoss = 0;
  std::vector<float> wideGrad(count * v);
  shardc_rt_cross_entropy_f32(wide.data(), targets.data(), &wideLoss, count, v,
                              v);
  shardc_rt_cross_entropy_grad_f32(&dloss, wide.data(), targets.data(),
                                   wideGrad.data(), count, v, v);
  std::vector<shardc_rt_bf16> want(count * ld, 0), grad(count * ld, 0x4000);
  for (int64_t i = 0; i < count; ++i)
    for (int64_t j = 0; j < v; ++j)
      want[i * ld + j] = shardc::rt::narrow(wideGrad[i * v + j]);
  shardc_rt_cross_entropy_bf16(padded.data(), targets.data(), &loss, count, v,
                               ld);
  shardc_rt_cross_entropy_grad_bf16(&dloss, padded.data(), targets.data(),
                                    grad.data(), count, v, ld);
  float lossBoth = 0;
  std::vector<shardc_rt_bf16> both = padded;
  shardc_rt_cross_entropy_and_grad_bf16(&dloss, both.data(), targets.data(),
                                        &lossBoth, both.data(), count, v, ld);
  check("bf16 cross_entropy over padded rows: the classes' loss and "
        "gradient, padding 0, fused the same bits",
        {double(loss == wideLoss), double(grad == want),
         double(lossBoth == loss), double(both == want)},
        {1, 1, 1, 1});
}

void checkGemmTimer() {
  shardc_rt_gemm_seconds_reset();
  double afterReset = shardc_rt_gemm_seconds();
  const int64_t size = 128;
  std::vector<float> a(size * size, 0.5f), c(size * size);
  shardc_rt_gelu_f32(a.data(), c.data(), size * size);
  double afterGelu = shardc_rt_gemm_seconds();
  shardc_rt_matmul_f32(a.data(), a.data(), c.data(), 1, size, size, size, 0, 0);
  double afterGemm = shardc_rt_gemm_seconds();
  shardc_rt_gemm_seconds_reset();
  check("gemm timer: 0, 0 after gelu, > 0 after gemm, 0",
        {afterReset, afterGelu, afterGemm > 0 ? 1.0 : 0.0,
         shardc_rt_gemm_seconds()},
        {0, 0, 1, 0});
}

} // namespace

int main() {
  checkLinear();
  checkMatmul();
  checkAddAndSumTo();
  checkScale();
  checkGelu();
  checkRelu();
  checkLayerNorm();
  checkEmbedding();
  checkAttention();
  checkCrossEntropy();
  checkHelpers();
  checkFloatAbi();
  checkBf16CrossEntropy();
  checkGemmTimer();
  std::printf("gradcheck: %d ops passed, %d failed\n", numPassed, numFailed);
  return numFailed == 0 ? 0 : 1;
}
