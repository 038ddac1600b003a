//===- Kernels.cpp - CPU kernels of every train op ------------------------===//
//
// Every matrix product goes through CBLAS gemm (OpenBLAS), attention's too:
// per batch and head, the scores of a block of query rows are one gemm, the
// weighted sum of values another, reading q, k and v in place from the fused
// qkv through BLAS leading dimensions (no copies). Everything else is a
// simple loop over contiguous memory that allocates nothing; what remains
// of a step's time outside GEMMs is mostly the exponentials of softmax,
// cross-entropy and gelu, one libm call each.
//
//===----------------------------------------------------------------------===//

#include "KernelTimer.h"

#include "shardc_rt/Kernels.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

using namespace shardc::rt::cpu;

//===----------------------------------------------------------------------===//
// GEMM
//===----------------------------------------------------------------------===//

namespace {

/// Nanoseconds spent inside BLAS gemm, summed over threads. An integer so
/// that threads can add to it with one atomic instruction.
std::atomic<int64_t> gemmNanoseconds{0};

void blasGemm(CBLAS_TRANSPOSE transA, CBLAS_TRANSPOSE transB, blasint m,
              blasint n, blasint k, float alpha, const float *a, blasint lda,
              const float *b, blasint ldb, float beta, float *c, blasint ldc) {
  cblas_sgemm(CblasRowMajor, transA, transB, m, n, k, alpha, a, lda, b, ldb,
              beta, c, ldc);
}

void blasGemm(CBLAS_TRANSPOSE transA, CBLAS_TRANSPOSE transB, blasint m,
              blasint n, blasint k, double alpha, const double *a, blasint lda,
              const double *b, blasint ldb, double beta, double *c,
              blasint ldc) {
  cblas_dgemm(CblasRowMajor, transA, transB, m, n, k, alpha, a, lda, b, ldb,
              beta, c, ldc);
}

/// c[m, n] = alpha op(a) op(b) + beta c, row-major, with op(a) [m, k] and
/// op(b) [k, n]; lda, ldb, ldc are the row strides of the stored matrices.
/// Handles the empty cases itself: BLAS rejects a leading dimension of 0, and
/// k == 0 must still give beta c.
template <typename T>
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, T alpha,
          const T *a, int64_t lda, const T *b, int64_t ldb, T beta, T *c,
          int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  // A 32-bit BLAS takes int dimensions. Only a single matrix with more than
  // 2^31 rows or columns gets here; no tensor that fits in memory with a
  // useful width does, so this is a limit of the runtime, not a user error.
  constexpr int64_t maxDim = std::numeric_limits<blasint>::max();
  if (m > maxDim || n > maxDim || k > maxDim || lda > maxDim || ldb > maxDim ||
      ldc > maxDim) {
    std::fprintf(stderr,
                 "shardc: gemm of [%lld, %lld] x [%lld, %lld] exceeds the "
                 "BLAS integer range (runtime/host/Kernels.cpp)\n",
                 static_cast<long long>(m), static_cast<long long>(k),
                 static_cast<long long>(k), static_cast<long long>(n));
    std::abort();
  }
  auto start = std::chrono::steady_clock::now();
  blasGemm(transA ? CblasTrans : CblasNoTrans,
           transB ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
           static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
           static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
           static_cast<blasint>(ldc));
  auto stop = std::chrono::steady_clock::now();
  gemmNanoseconds.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(stop - start)
          .count(),
      std::memory_order_relaxed);
}

/// Mean and 1 / sqrt(var + eps) of one layernorm row, in double: two passes,
/// so that a row with a large mean loses no precision in its variance.
struct RowStats {
  double mean;
  double rstd;
};

template <typename T> RowStats rowStats(const T *x, int64_t c, double eps) {
  double sum = 0;
  for (int64_t j = 0; j < c; ++j)
    sum += x[j];
  double mean = sum / static_cast<double>(c);
  double squares = 0;
  for (int64_t j = 0; j < c; ++j) {
    double centered = x[j] - mean;
    squares += centered * centered;
  }
  double var = squares / static_cast<double>(c);
  return {mean, 1.0 / std::sqrt(var + eps)};
}

/// -1 when every id is in [0, v), else the position of the first that is not.
int64_t firstBadId(const int32_t *ids, int64_t n, int64_t v) {
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= v)
      return i;
  return -1;
}

/// Query rows of one attention gemm. Blocks let the causal mask skip the
/// scores above the diagonal (the keys of block [r0, r1) are [0, r1)), which
/// saves about half of the flops and exponentials once t exceeds a block,
/// and bound the scratch to kRowBlock x t per thread.
constexpr int64_t kRowBlock = 64;

/// The scratch rows of attention, reused across calls of a thread.
template <typename T> std::vector<T> &attentionScratch(size_t size) {
  thread_local std::vector<T> scratch;
  if (scratch.size() < size)
    scratch.resize(size);
  return scratch;
}

/// Turns the scores of query `row` (cols of them, row-major) into causal
/// softmax probabilities: keys [0, row] are softmaxed, the rest (the future)
/// set to 0 so that the gemms over the whole block ignore them. Returns the
/// log-sum-exp of the scores softmaxed.
template <typename T> T causalSoftmaxRow(T *scores, int64_t row, int64_t cols) {
  int64_t seen = row + 1;
  T maxScore = scores[0];
  for (int64_t j = 1; j < seen; ++j)
    maxScore = std::max(maxScore, scores[j]);
  T sum = 0;
  for (int64_t j = 0; j < seen; ++j) {
    scores[j] = std::exp(scores[j] - maxScore);
    sum += scores[j];
  }
  T inverse = T(1) / sum;
  for (int64_t j = 0; j < seen; ++j)
    scores[j] *= inverse;
  for (int64_t j = seen; j < cols; ++j)
    scores[j] = 0;
  return maxScore + std::log(sum);
}

/// Computes into scores[r1 - r0, r1] (row stride r1) the scaled scores
/// q k^T / sqrt(d) of query rows [r0, r1) of one head over keys [0, r1).
/// q and k point at the head's first row, with row stride ld.
template <typename T>
void blockScores(const T *q, const T *k, int64_t ld, int64_t d, int64_t r0,
                 int64_t r1, T *scores) {
  T alpha = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d)));
  gemm<T>(false, true, r1 - r0, r1, d, alpha, q + r0 * ld, ld, k, ld, T(0),
          scores, r1);
}

/// As blockScores, then the causal softmax of each row, in place; lse[i - r0]
/// (where lse is not null) receives row i's log-sum-exp.
template <typename T>
void blockProbabilities(const T *q, const T *k, int64_t ld, int64_t d,
                        int64_t r0, int64_t r1, T *probs, T *lse) {
  blockScores(q, k, ld, d, r0, r1, probs);
  for (int64_t i = r0; i < r1; ++i) {
    T rowLse = causalSoftmaxRow(probs + (i - r0) * r1, i, r1);
    if (lse)
      lse[i - r0] = rowLse;
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

template <typename T>
void shardc::rt::cpu::linear(const T *x, const T *w, const T *b, T *y,
                             int64_t m, int64_t k, int64_t n) {
  // The bias goes in first and the gemm accumulates onto it: no second pass.
  if (b)
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(y + i * n, b, n * sizeof(T));
  gemm<T>(false, true, m, n, k, T(1), x, k, w, k, b ? T(1) : T(0), y, n);
}

template <typename T>
void shardc::rt::cpu::matmul(const T *lhs, const T *rhs, T *out, int64_t batch,
                             int64_t m, int64_t k, int64_t n, bool transposeLhs,
                             bool transposeRhs) {
  int64_t lda = transposeLhs ? m : k;
  int64_t ldb = transposeRhs ? k : n;
  for (int64_t i = 0; i < batch; ++i)
    gemm<T>(transposeLhs, transposeRhs, m, n, k, T(1), lhs + i * m * k, lda,
            rhs + i * k * n, ldb, T(0), out + i * m * n, n);
}

template <typename T>
void shardc::rt::cpu::add(const T *lhs, const T *rhs, T *y, int64_t n,
                          int64_t m) {
  if (m == 0)
    return;
  // Row by row rather than i % m: the inner loop is a plain vector add.
  for (int64_t base = 0; base < n; base += m)
    for (int64_t j = 0; j < m; ++j)
      y[base + j] = lhs[base + j] + rhs[j];
}

template <typename T>
void shardc::rt::cpu::scale(const T *x, T *y, int64_t n, double factor) {
  T f = static_cast<T>(factor);
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] * f;
}

namespace {
/// sqrt(2 / pi) and the cubic coefficient of GPT-2's GELU.
constexpr double kGeluScale = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;
} // namespace

template <typename T> void shardc::rt::cpu::gelu(const T *x, T *y, int64_t n) {
  // 0.5 (1 + tanh u) is sigmoid(2 u): one exp instead of a tanh, which is
  // about five times slower in glibc. Where exp overflows, x / inf is the
  // limit 0; no cancellation anywhere, unlike 1 + tanh u for u << 0.
  const T s = static_cast<T>(kGeluScale), a = static_cast<T>(kGeluCubic);
  for (int64_t i = 0; i < n; ++i) {
    T v = x[i];
    y[i] = v / (T(1) + std::exp(T(-2) * s * (v + a * v * v * v)));
  }
}

template <typename T> void shardc::rt::cpu::relu(const T *x, T *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] > T(0) ? x[i] : T(0);
}

template <typename T>
void shardc::rt::cpu::layerNorm(const T *x, const T *w, const T *b, T *y,
                                int64_t rows, int64_t c, double eps) {
  if (c == 0)
    return;
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * c;
    T *yr = y + r * c;
    RowStats stats = rowStats(xr, c, eps);
    T mean = static_cast<T>(stats.mean), rstd = static_cast<T>(stats.rstd);
    for (int64_t j = 0; j < c; ++j)
      yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
  }
}

template <typename T>
int64_t shardc::rt::cpu::embedding(const int32_t *ids, const T *table, T *out,
                                   int64_t n, int64_t v, int64_t c) {
  // Check every id before writing anything: a bad one leaves out untouched.
  int64_t bad = firstBadId(ids, n, v);
  if (bad >= 0)
    return bad;
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out + i * c, table + static_cast<int64_t>(ids[i]) * c,
                c * sizeof(T));
  return -1;
}

template <typename T>
void shardc::rt::cpu::attention(const T *qkv, T *out, T *lse, int64_t b,
                                int64_t t, int64_t c, int64_t heads) {
  if (b == 0 || t == 0 || c == 0)
    return;
  int64_t d = c / heads, ld = 3 * c;
  T *probs = attentionScratch<T>(std::min(t, kRowBlock) * t).data();
  for (int64_t batch = 0; batch < b; ++batch) {
    for (int64_t h = 0; h < heads; ++h) {
      const T *q = qkv + batch * t * ld + h * d;
      const T *k = q + c, *v = q + 2 * c;
      T *y = out + batch * t * c + h * d;
      T *rowLse = lse ? lse + (batch * heads + h) * t : nullptr;
      for (int64_t r0 = 0; r0 < t; r0 += kRowBlock) {
        int64_t r1 = std::min(t, r0 + kRowBlock);
        blockProbabilities(q, k, ld, d, r0, r1, probs,
                           rowLse ? rowLse + r0 : nullptr);
        // y[r0:r1] = P[r0:r1, 0:r1] v[0:r1].
        gemm<T>(false, false, r1 - r0, d, r1, T(1), probs, r1, v, ld, T(0),
                y + r0 * c, c);
      }
    }
  }
}

template <typename T>
int64_t shardc::rt::cpu::crossEntropy(const T *logits, const int32_t *targets,
                                      T *loss, int64_t n, int64_t v,
                                      int64_t ld) {
  int64_t bad = firstBadId(targets, n, v);
  if (bad >= 0)
    return bad;
  // -log softmax(l)[t] = log sum_j exp(l_j - max) + max - l_t: subtracting
  // the max keeps every exponential in (0, 1]; sums are in double so that a
  // large vocabulary and many rows lose nothing in f32.
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const T *row = logits + i * ld;
    T maxLogit = *std::max_element(row, row + v);
    double sum = 0;
    for (int64_t j = 0; j < v; ++j)
      sum += std::exp(row[j] - maxLogit);
    total += std::log(sum) + static_cast<double>(maxLogit) -
             static_cast<double>(row[targets[i]]);
  }
  *loss = n == 0 ? T(0) : static_cast<T>(total / static_cast<double>(n));
  return -1;
}

void shardc::rt::cpu::iota(int32_t *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<int32_t>(i);
}

template <typename T>
void shardc::rt::cpu::sumTo(const T *x, T *y, int64_t outer, int64_t inner) {
  // Row after row, so that the inner loop is a contiguous vector add.
  std::fill(y, y + inner, T(0));
  for (int64_t o = 0; o < outer; ++o) {
    const T *row = x + o * inner;
    for (int64_t j = 0; j < inner; ++j)
      y[j] += row[j];
  }
}

template <typename T>
void shardc::rt::cpu::copy(T *dst, const T *src, int64_t n) {
  if (n > 0)
    std::memcpy(dst, src, n * sizeof(T));
}

template <typename T> void shardc::rt::cpu::fill(T *dst, T value, int64_t n) {
  std::fill(dst, dst + n, value);
}

template <typename T>
void shardc::rt::cpu::accumulate(T *dst, const T *src, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] += src[i];
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

template <typename T>
void shardc::rt::cpu::geluGrad(const T *dy, const T *x, T *dx, int64_t n) {
  // With u = s (x + a x^3) and, as in gelu, 0.5 (1 + tanh u) = sig =
  // 1 / (1 + e), e = exp(-2 u): gelu = x sig and
  //   gelu' = sig + 2 x sig (1 - sig) s (1 + 3 a x^2).
  // sig (1 - sig) is computed as e sig^2, which keeps its relative precision
  // where sig is near 1 (1 - sig would cancel); where e overflows, sig is 0
  // and so is the product (inf * 0 would be NaN).
  const T s = static_cast<T>(kGeluScale), a = static_cast<T>(kGeluCubic);
  for (int64_t i = 0; i < n; ++i) {
    T v = x[i];
    T e = std::exp(T(-2) * s * (v + a * v * v * v));
    T sig = T(1) / (T(1) + e);
    T sigSlope = std::isinf(e) ? T(0) : e * sig * sig;
    T derivative = sig + T(2) * v * sigSlope * s * (T(1) + T(3) * a * v * v);
    dx[i] = dy[i] * derivative;
  }
}

template <typename T>
void shardc::rt::cpu::reluGrad(const T *dy, const T *x, T *dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dx[i] = x[i] > T(0) ? dy[i] : T(0);
}

template <typename T>
void shardc::rt::cpu::layerNormGrad(const T *dy, const T *x, const T *w, T *dx,
                                    T *dw, T *db, int64_t rows, int64_t c,
                                    double eps) {
  std::fill(dw, dw + c, T(0));
  std::fill(db, db + c, T(0));
  if (c == 0)
    return;
  // With xhat = (x - mean) rstd and g = dy w, the VJP through mean and rstd
  // is dx = rstd (g - mean(g) - xhat mean(g xhat)).
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * c, *dyr = dy + r * c;
    T *dxr = dx + r * c;
    RowStats stats = rowStats(xr, c, eps);
    T mean = static_cast<T>(stats.mean), rstd = static_cast<T>(stats.rstd);
    double sumG = 0, sumGXhat = 0;
    for (int64_t j = 0; j < c; ++j) {
      T xhat = (xr[j] - mean) * rstd;
      T g = dyr[j] * w[j];
      sumG += g;
      sumGXhat += g * xhat;
      dw[j] += dyr[j] * xhat;
      db[j] += dyr[j];
    }
    T meanG = static_cast<T>(sumG / static_cast<double>(c));
    T meanGXhat = static_cast<T>(sumGXhat / static_cast<double>(c));
    for (int64_t j = 0; j < c; ++j) {
      T xhat = (xr[j] - mean) * rstd;
      dxr[j] = rstd * (dyr[j] * w[j] - meanG - xhat * meanGXhat);
    }
  }
}

template <typename T>
int64_t shardc::rt::cpu::embeddingGrad(const T *dy, const int32_t *ids,
                                       T *dtable, int64_t n, int64_t v,
                                       int64_t c) {
  int64_t bad = firstBadId(ids, n, v);
  if (bad >= 0)
    return bad;
  std::fill(dtable, dtable + v * c, T(0));
  // Each id's positions in increasing order (a stable counting sort):
  // byId[runs[id], runs[id + 1]).
  std::vector<int64_t> runs(v + 1, 0), byId(n);
  for (int64_t i = 0; i < n; ++i)
    ++runs[ids[i] + 1];
  std::partial_sum(runs.begin(), runs.end(), runs.begin());
  std::vector<int64_t> next(runs.begin(), runs.end() - 1);
  for (int64_t i = 0; i < n; ++i)
    byId[next[ids[i]]++] = i;
  std::vector<T> group(c);
  for (int64_t id = 0; id < v; ++id) {
    T *row = dtable + id * c;
    for (int64_t first = runs[id]; first < runs[id + 1];
         first += SHARDC_RT_EMBEDDING_GRAD_GROUP) {
      int64_t last =
          std::min(first + SHARDC_RT_EMBEDDING_GRAD_GROUP, runs[id + 1]);
      std::fill(group.begin(), group.end(), T(0));
      for (int64_t p = first; p < last; ++p) {
        const T *g = dy + byId[p] * c;
        for (int64_t j = 0; j < c; ++j)
          group[j] += g[j];
      }
      for (int64_t j = 0; j < c; ++j)
        row[j] += group[j];
    }
  }
  return -1;
}

template <typename T>
void shardc::rt::cpu::attentionGrad(const T *dy, const T *qkv, const T *out,
                                    const T *lse, T *dqkv, int64_t b, int64_t t,
                                    int64_t c, int64_t heads) {
  (void)out; // not read on the host (Kernels.h)
  if (b == 0 || t == 0 || c == 0)
    return;
  int64_t d = c / heads, ld = 3 * c;
  T alpha = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d)));
  int64_t blockSize = std::min(t, kRowBlock) * t;
  // P and dP of one block of query rows, side by side.
  T *probs = attentionScratch<T>(2 * blockSize).data();
  T *dprobs = probs + blockSize;
  for (int64_t batch = 0; batch < b; ++batch) {
    // Every block adds to the dk and dv rows of its keys: start from zero.
    for (int64_t i = 0; i < t; ++i)
      std::fill(dqkv + (batch * t + i) * ld + c,
                dqkv + (batch * t + i + 1) * ld, T(0));
    for (int64_t h = 0; h < heads; ++h) {
      int64_t offset = batch * t * ld + h * d;
      const T *q = qkv + offset, *k = q + c, *v = q + 2 * c;
      T *dq = dqkv + offset, *dk = dq + c, *dv = dq + 2 * c;
      const T *dyh = dy + batch * t * c + h * d;
      const T *rowLse = lse + (batch * heads + h) * t;
      for (int64_t r0 = 0; r0 < t; r0 += kRowBlock) {
        int64_t r1 = std::min(t, r0 + kRowBlock), rows = r1 - r0;
        const T *dyBlock = dyh + r0 * c;
        // P = exp(S - lse) from the forward's log-sum-exps; the future 0.
        blockScores(q, k, ld, d, r0, r1, probs);
        for (int64_t i = 0; i < rows; ++i) {
          T *p = probs + i * r1;
          int64_t seen = r0 + i + 1;
          for (int64_t j = 0; j < seen; ++j)
            p[j] = std::exp(p[j] - rowLse[r0 + i]);
          std::fill(p + seen, p + r1, T(0));
        }
        // y = P v: dP = dy v^T and dv += P^T dy.
        gemm<T>(false, true, rows, r1, d, T(1), dyBlock, c, v, ld, T(0), dprobs,
                r1);
        gemm<T>(true, false, r1, d, rows, T(1), probs, r1, dyBlock, c, T(1), dv,
                ld);
        // Through the softmax, dS = P (dP - delta), in place of dP, with
        // delta = sum_j P dP (which is dy . out, but exact here, where a
        // bf16 out is rounded); the masked entries have P = 0 and so dS = 0.
        for (int64_t i = 0; i < rows; ++i) {
          T *p = probs + i * r1, *dp = dprobs + i * r1;
          T delta = 0;
          for (int64_t j = 0; j < r1; ++j)
            delta += p[j] * dp[j];
          for (int64_t j = 0; j < r1; ++j)
            dp[j] = p[j] * (dp[j] - delta);
        }
        // S = alpha q k^T: dq = alpha dS k and dk += alpha dS^T q.
        gemm<T>(false, false, rows, d, r1, alpha, dprobs, r1, k, ld, T(0),
                dq + r0 * ld, ld);
        gemm<T>(true, false, r1, d, rows, alpha, dprobs, r1, q + r0 * ld, ld,
                T(1), dk, ld);
      }
    }
  }
}

template <typename T>
int64_t shardc::rt::cpu::crossEntropyGrad(const T *dloss, const T *logits,
                                          const int32_t *targets, T *dlogits,
                                          int64_t n, int64_t v, int64_t ld) {
  int64_t bad = firstBadId(targets, n, v);
  if (bad >= 0)
    return bad;
  double perRow = static_cast<double>(*dloss) / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) {
    const T *row = logits + i * ld;
    T *out = dlogits + i * ld;
    // The exponentials go straight into the output, then get normalized:
    // one exp per logit.
    T maxLogit = *std::max_element(row, row + v);
    double sum = 0;
    for (int64_t j = 0; j < v; ++j) {
      out[j] = std::exp(row[j] - maxLogit);
      sum += out[j];
    }
    T factor = static_cast<T>(perRow / sum);
    for (int64_t j = 0; j < v; ++j)
      out[j] *= factor;
    out[targets[i]] -= static_cast<T>(perRow);
    std::fill(out + v, out + ld, T(0));
  }
  return -1;
}

//===----------------------------------------------------------------------===//
// Instantiations
//===----------------------------------------------------------------------===//

#define SHARDC_RT_INSTANTIATE(T)                                               \
  template void shardc::rt::cpu::linear<T>(const T *, const T *, const T *,    \
                                           T *, int64_t, int64_t, int64_t);    \
  template void shardc::rt::cpu::matmul<T>(const T *, const T *, T *, int64_t, \
                                           int64_t, int64_t, int64_t, bool,    \
                                           bool);                              \
  template void shardc::rt::cpu::add<T>(const T *, const T *, T *, int64_t,    \
                                        int64_t);                              \
  template void shardc::rt::cpu::scale<T>(const T *, T *, int64_t, double);    \
  template void shardc::rt::cpu::gelu<T>(const T *, T *, int64_t);             \
  template void shardc::rt::cpu::relu<T>(const T *, T *, int64_t);             \
  template void shardc::rt::cpu::layerNorm<T>(const T *, const T *, const T *, \
                                              T *, int64_t, int64_t, double);  \
  template int64_t shardc::rt::cpu::embedding<T>(                              \
      const int32_t *, const T *, T *, int64_t, int64_t, int64_t);             \
  template void shardc::rt::cpu::attention<T>(const T *, T *, T *, int64_t,    \
                                              int64_t, int64_t, int64_t);      \
  template int64_t shardc::rt::cpu::crossEntropy<T>(                           \
      const T *, const int32_t *, T *, int64_t, int64_t, int64_t);             \
  template void shardc::rt::cpu::sumTo<T>(const T *, T *, int64_t, int64_t);   \
  template void shardc::rt::cpu::copy<T>(T *, const T *, int64_t);             \
  template void shardc::rt::cpu::fill<T>(T *, T, int64_t);                     \
  template void shardc::rt::cpu::accumulate<T>(T *, const T *, int64_t);       \
  template void shardc::rt::cpu::geluGrad<T>(const T *, const T *, T *,        \
                                             int64_t);                         \
  template void shardc::rt::cpu::reluGrad<T>(const T *, const T *, T *,        \
                                             int64_t);                         \
  template void shardc::rt::cpu::layerNormGrad<T>(const T *, const T *,        \
                                                  const T *, T *, T *, T *,    \
                                                  int64_t, int64_t, double);   \
  template int64_t shardc::rt::cpu::embeddingGrad<T>(                          \
      const T *, const int32_t *, T *, int64_t, int64_t, int64_t);             \
  template void shardc::rt::cpu::attentionGrad<T>(                             \
      const T *, const T *, const T *, const T *, T *, int64_t, int64_t,       \
      int64_t, int64_t);                                                       \
  template int64_t shardc::rt::cpu::crossEntropyGrad<T>(                       \
      const T *, const T *, const int32_t *, T *, int64_t, int64_t, int64_t);

SHARDC_RT_INSTANTIATE(float)
SHARDC_RT_INSTANTIATE(double)

#undef SHARDC_RT_INSTANTIATE

//===----------------------------------------------------------------------===//
// C ABI
//===----------------------------------------------------------------------===//

extern "C" {

double shardc_rt_gemm_seconds(void) {
  return static_cast<double>(gemmNanoseconds.load(std::memory_order_relaxed)) *
         1e-9;
}

void shardc_rt_gemm_seconds_reset(void) {
  gemmNanoseconds.store(0, std::memory_order_relaxed);
}

void shardc_rt_linear_f32(const float *x, const float *w, const float *b,
                          float *y, int64_t m, int64_t k, int64_t n) {
  SHARDC_RT_TIME_KERNEL("linear_f32");
  linear(x, w, b, y, m, k, n);
}

void shardc_rt_matmul_f32(const float *lhs, const float *rhs, float *out,
                          int64_t batch, int64_t m, int64_t k, int64_t n,
                          int transposeLhs, int transposeRhs) {
  SHARDC_RT_TIME_KERNEL("matmul_f32");
  matmul(lhs, rhs, out, batch, m, k, n, transposeLhs != 0, transposeRhs != 0);
}

void shardc_rt_add_f32(const float *lhs, const float *rhs, float *y, int64_t n,
                       int64_t m) {
  SHARDC_RT_TIME_KERNEL("add_f32");
  add(lhs, rhs, y, n, m);
}

void shardc_rt_scale_f32(const float *x, float *y, int64_t n, double factor) {
  SHARDC_RT_TIME_KERNEL("scale_f32");
  scale(x, y, n, factor);
}

void shardc_rt_gelu_f32(const float *x, float *y, int64_t n) {
  SHARDC_RT_TIME_KERNEL("gelu_f32");
  gelu(x, y, n);
}

void shardc_rt_relu_f32(const float *x, float *y, int64_t n) {
  SHARDC_RT_TIME_KERNEL("relu_f32");
  relu(x, y, n);
}

void shardc_rt_layernorm_f32(const float *x, const float *w, const float *b,
                             float *y, int64_t rows, int64_t c, double eps) {
  SHARDC_RT_TIME_KERNEL("layernorm_f32");
  layerNorm(x, w, b, y, rows, c, eps);
}

int64_t shardc_rt_embedding_f32(const int32_t *ids, const float *table,
                                float *out, int64_t n, int64_t v, int64_t c) {
  SHARDC_RT_TIME_KERNEL("embedding_f32");
  return embedding(ids, table, out, n, v, c);
}

void shardc_rt_attention_f32(const float *qkv, float *out, float *lse,
                             int64_t b, int64_t t, int64_t c, int64_t heads) {
  SHARDC_RT_TIME_KERNEL("attention_f32");
  attention(qkv, out, lse, b, t, c, heads);
}

int64_t shardc_rt_cross_entropy_f32(const float *logits, const int32_t *targets,
                                    float *loss, int64_t n, int64_t v,
                                    int64_t ld) {
  SHARDC_RT_TIME_KERNEL("cross_entropy_f32");
  return crossEntropy(logits, targets, loss, n, v, ld);
}

void shardc_rt_iota_i32(int32_t *out, int64_t n) {
  SHARDC_RT_TIME_KERNEL("iota_i32");
  iota(out, n);
}

void shardc_rt_sum_to_f32(const float *x, float *y, int64_t outer,
                          int64_t inner) {
  SHARDC_RT_TIME_KERNEL("sum_to_f32");
  sumTo(x, y, outer, inner);
}

void shardc_rt_copy_f32(float *dst, const float *src, int64_t n) {
  SHARDC_RT_TIME_KERNEL("copy_f32");
  copy(dst, src, n);
}

void shardc_rt_fill_f32(float *dst, float value, int64_t n) {
  SHARDC_RT_TIME_KERNEL("fill_f32");
  fill(dst, value, n);
}

void shardc_rt_accumulate_f32(float *dst, const float *src, int64_t n) {
  SHARDC_RT_TIME_KERNEL("accumulate_f32");
  accumulate(dst, src, n);
}

void shardc_rt_gelu_grad_f32(const float *dy, const float *x, float *dx,
                             int64_t n) {
  SHARDC_RT_TIME_KERNEL("gelu_grad_f32");
  geluGrad(dy, x, dx, n);
}

void shardc_rt_relu_grad_f32(const float *dy, const float *x, float *dx,
                             int64_t n) {
  SHARDC_RT_TIME_KERNEL("relu_grad_f32");
  reluGrad(dy, x, dx, n);
}

void shardc_rt_layernorm_grad_f32(const float *dy, const float *x,
                                  const float *w, float *dx, float *dw,
                                  float *db, int64_t rows, int64_t c,
                                  double eps) {
  SHARDC_RT_TIME_KERNEL("layernorm_grad_f32");
  layerNormGrad(dy, x, w, dx, dw, db, rows, c, eps);
}

int64_t shardc_rt_embedding_grad_f32(const float *dy, const int32_t *ids,
                                     float *dtable, int64_t n, int64_t v,
                                     int64_t c) {
  SHARDC_RT_TIME_KERNEL("embedding_grad_f32");
  return embeddingGrad(dy, ids, dtable, n, v, c);
}

void shardc_rt_attention_grad_f32(const float *dy, const float *qkv,
                                  const float *out, const float *lse,
                                  float *dqkv, int64_t b, int64_t t, int64_t c,
                                  int64_t heads) {
  SHARDC_RT_TIME_KERNEL("attention_grad_f32");
  attentionGrad(dy, qkv, out, lse, dqkv, b, t, c, heads);
}

int64_t shardc_rt_cross_entropy_grad_f32(const float *dloss,
                                         const float *logits,
                                         const int32_t *targets, float *dlogits,
                                         int64_t n, int64_t v, int64_t ld) {
  SHARDC_RT_TIME_KERNEL("cross_entropy_grad_f32");
  return crossEntropyGrad(dloss, logits, targets, dlogits, n, v, ld);
}

} // extern "C"
