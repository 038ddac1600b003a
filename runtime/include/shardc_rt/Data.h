//===- Data.h - Training data sources ---------------------------*- C++ -*-===//
//
// Two sources of real training data (synthetic data is in Init.h). Both give
// each rank its rows of the GLOBAL batch, so the batch a step sees, and so
// the loss, does not depend on how many ranks split it.
//
// Each reader has a try* core that returns an error string ("" on success);
// the plain versions make the error a rank-local fatal error reported under
// the purpose given at open ("--data" by default).
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_DATA_H
#define SHARDC_RT_DATA_H

#include "shardc_rt/SafeTensors.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardc::rt {

/// Where `count` floats at `data` (of any alignment, as in a mapped file)
/// first hold a NaN or an infinity, with its name ("nan", "inf", "-inf");
/// index -1 where every one is finite. Inputs and weights to start from
/// are checked with it: either would train to NaN params, silently.
struct NonFinite {
  int64_t index = -1;
  const char *name = "";
};
NonFinite findNonFinite(const void *data, int64_t count);

/// Inputs stored per step in a .safetensors file: the tensor named after an
/// input of global shape [B, ...] has shape [steps, B, ...], F32 for float
/// inputs, I32 or I64 for integer inputs. Step s reads slice s mod steps, so
/// a short file is cycled over a long run.
class StepData {
public:
  static StepData open(const std::string &path,
                       const std::string &purpose = "--data");
  /// open() without failing: "" or the error.
  static std::string tryOpen(const std::string &path,
                             const std::string &purpose, StepData &out);

  /// Rows [rowBegin, rowEnd) of float input `input` (global shape
  /// `globalShape`, rank >= 1, batch first) at step `step` >= 0, into out,
  /// row-major. "" or the error (missing tensor, wrong dtype, wrong shape,
  /// bad rows).
  std::string tryReadFloats(const std::string &input,
                            const std::vector<int64_t> &globalShape,
                            int64_t step, int64_t rowBegin, int64_t rowEnd,
                            float *out) const;
  /// The same for an integer input; I64 values must fit in int32.
  std::string tryReadInts(const std::string &input,
                          const std::vector<int64_t> &globalShape, int64_t step,
                          int64_t rowBegin, int64_t rowEnd, int32_t *out) const;

  /// Checks, before any step runs, what the reads would: that the file holds
  /// a tensor for input `input` (global shape `globalShape`, batch first) of
  /// shape [steps, ...globalShape] with steps >= 1, F32 for a float input and
  /// I32 or I64 for an `integer` one, that every value of a float input is
  /// finite, and for an integer input with
  /// `bound` > 1 that every value of every step lies in [0, bound). ("" or
  /// the error, naming the file, the input and the first bad element.)
  /// Bound 1 is not checked: the compiler gives an integer input that
  /// indexes nothing bound 1, so it says nothing about the values.
  std::string tryCheckInput(const std::string &input,
                            const std::vector<int64_t> &globalShape,
                            bool integer, int64_t bound) const;

  /// tryReadFloats; an error is fatal.
  void readFloats(const std::string &input,
                  const std::vector<int64_t> &globalShape, int64_t step,
                  int64_t rowBegin, int64_t rowEnd, float *out) const;
  /// tryReadInts; an error is fatal.
  void readInts(const std::string &input,
                const std::vector<int64_t> &globalShape, int64_t step,
                int64_t rowBegin, int64_t rowEnd, int32_t *out) const;

  const SafeTensorsFile &file() const { return data; }

private:
  SafeTensorsFile data;
};

/// An llm.c token file (.bin) for a GPT whose two integer inputs of global
/// shape [B, T] are the tokens and the next-token targets.
///
/// Format: 256 little-endian int32 (header[0] = 20240520, header[1] = 1 for
/// uint16 tokens, header[2] = the number of tokens N), then N uint16 tokens;
/// the file holds exactly that.
///
/// Windows: the file holds P = floor((N - 1) / (B * T)) batches (N >= B * T
/// + 1: one batch at least), and at step s, global row b reads the T + 1
/// tokens starting at
///
///   start(s, b) = ((s mod P) * B + b) * T
///
/// with tokens = window[0, T), targets = window[1, T + 1): consecutive rows
/// and steps walk the file T tokens at a time, and start over at its
/// beginning where the next batch would run past its end, as llm.c's loader
/// does.
class TokenData {
public:
  /// Maps and validates `path` for batches of `batch` = B rows of `seqLen`
  /// = T tokens: the header, the file size against N, N >= B * T + 1, and
  /// every token below `vocab`.
  static TokenData open(const std::string &path, int64_t batch, int64_t seqLen,
                        int64_t vocab, const std::string &purpose = "--data");
  /// open() without failing: "" or the error.
  static std::string tryOpen(const std::string &path, int64_t batch,
                             int64_t seqLen, int64_t vocab,
                             const std::string &purpose, TokenData &out);
  /// Whether `path` is meant as a token file: named FILE.bin, or starting
  /// with an llm.c token file's magic number whatever its name.
  static bool isTokenFile(const std::string &path);

  /// N, the number of tokens in the file.
  int64_t numTokens() const { return count; }
  /// T, the window length the file was opened for.
  int64_t seqLen() const { return length; }
  /// P of the rule above for a global batch of `globalBatch` rows: the
  /// batches the file holds before it starts over (0 where it holds none).
  int64_t batchesHeld(int64_t globalBatch) const;
  /// A hash of the file's bytes: ranks compare theirs.
  uint64_t contentHash() const { return file.contentHash(); }
  /// start(step, row) of the rule above for a global batch of `globalBatch`
  /// rows.
  int64_t windowStart(int64_t step, int64_t globalBatch, int64_t row) const;
  /// Rows [rowBegin, rowEnd) of the global batch of `globalBatch` rows at
  /// `step`: tokens and targets, each (rowEnd - rowBegin) x T, row-major.
  /// Bad arguments are a fatal error, and so is a token not below the
  /// vocabulary (the file changed since open).
  void read(int64_t step, int64_t globalBatch, int64_t rowBegin, int64_t rowEnd,
            int32_t *tokens, int32_t *targets) const;

private:
  MappedFile file;
  std::string why;
  const uint16_t *tokensBase = nullptr;
  int64_t count = 0;
  int64_t length = 0;
  int64_t vocab = 0;
};

} // namespace shardc::rt

#endif // SHARDC_RT_DATA_H
