//===- Data.cpp - Training data sources -----------------------------------===//

#include "shardc_rt/Data.h"

#include "shardc_rt/Error.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

using namespace shardc::rt;

static std::string callFor(const std::string &purpose) {
  return purpose.empty() ? "--data" : purpose;
}

//===----------------------------------------------------------------------===//
// StepData
//===----------------------------------------------------------------------===//

NonFinite shardc::rt::findNonFinite(const void *data, int64_t count) {
  const char *bytes = static_cast<const char *>(data);
  for (int64_t i = 0; i < count; ++i) {
    float value;
    memcpy(&value, bytes + i * 4, 4);
    if (!std::isfinite(value))
      return {i, std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf"};
  }
  return {};
}

std::string StepData::tryOpen(const std::string &path,
                              const std::string &purpose, StepData &out) {
  return SafeTensorsFile::tryOpen(path, purpose, out.data);
}

StepData StepData::open(const std::string &path, const std::string &purpose) {
  StepData result;
  std::string error = tryOpen(path, purpose, result);
  if (!error.empty())
    SHARDC_RT_FAIL(callFor(purpose), error);
  return result;
}

namespace {
/// Where one read lands in the file's tensor.
struct StepSlice {
  const TensorView *view = nullptr;
  int64_t firstElement = 0; ///< Flat index in the [steps, B, ...] tensor.
  int64_t count = 0;
  int64_t step = 0; ///< After wrapping.
};
} // namespace

/// Checks the tensor for `input` against its global shape and `dtypes`, and
/// finds rows [rowBegin, rowEnd) of step `step`.
static std::string locate(const SafeTensorsFile &file, const std::string &input,
                          const std::vector<int64_t> &globalShape,
                          const std::vector<std::string> &dtypes,
                          const char *kind, int64_t step, int64_t rowBegin,
                          int64_t rowEnd, StepSlice &slice) {
  std::string what = file.path() + ": tensor '" + input + "'";
  if (globalShape.empty() || numElements(globalShape) < 0)
    return what + ": input '" + input + "' has global shape " +
           formatShape(globalShape) + ", which has no batch dimension";
  std::vector<int64_t> wanted = globalShape;
  wanted.insert(wanted.begin(), -1);
  std::string wantedText = formatShape(globalShape);
  wantedText = "[steps, " + wantedText.substr(1);
  const TensorView *view = file.find(input);
  if (!view) {
    std::string error = checkTensor(file, input, dtypes[0], wanted);
    return error + "; input '" + input + "' wants " + wantedText;
  }
  bool dtypeOk = false;
  for (const std::string &dtype : dtypes)
    dtypeOk |= view->dtype == dtype;
  if (!dtypeOk) {
    std::string accepted;
    for (size_t i = 0; i < dtypes.size(); ++i)
      accepted += (i ? " or " : "") + dtypes[i];
    return what + " has dtype " + view->dtype + ", " + kind + " input '" +
           input + "' wants " + accepted;
  }
  if (view->shape.size() != wanted.size() || view->shape[0] < 1 ||
      !std::equal(globalShape.begin(), globalShape.end(),
                  view->shape.begin() + 1))
    return what + " has shape " + formatShape(view->shape) + ", input '" +
           input + "' wants " + wantedText + " with steps >= 1";
  int64_t batch = globalShape[0];
  if (step < 0 || rowBegin < 0 || rowBegin > rowEnd || rowEnd > batch)
    return what + ": step " + std::to_string(step) + ", rows [" +
           std::to_string(rowBegin) + ", " + std::to_string(rowEnd) +
           ") requested of a batch of " + std::to_string(batch);
  int64_t rowElements = batch == 0 ? 0 : numElements(globalShape) / batch;
  slice.view = view;
  slice.step = step % view->shape[0];
  slice.firstElement = (slice.step * batch + rowBegin) * rowElements;
  slice.count = (rowEnd - rowBegin) * rowElements;
  return "";
}

std::string StepData::tryReadFloats(const std::string &input,
                                    const std::vector<int64_t> &globalShape,
                                    int64_t step, int64_t rowBegin,
                                    int64_t rowEnd, float *out) const {
  StepSlice slice;
  std::string error = locate(data, input, globalShape, {"F32"}, "float", step,
                             rowBegin, rowEnd, slice);
  if (!error.empty())
    return error;
  if (slice.count > 0)
    memcpy(out, slice.view->data + slice.firstElement * 4,
           static_cast<size_t>(slice.count) * 4);
  return "";
}

std::string StepData::tryReadInts(const std::string &input,
                                  const std::vector<int64_t> &globalShape,
                                  int64_t step, int64_t rowBegin,
                                  int64_t rowEnd, int32_t *out) const {
  StepSlice slice;
  std::string error = locate(data, input, globalShape, {"I32", "I64"},
                             "integer", step, rowBegin, rowEnd, slice);
  if (!error.empty())
    return error;
  if (slice.view->dtype == "I32") {
    if (slice.count > 0)
      memcpy(out, slice.view->data + slice.firstElement * 4,
             static_cast<size_t>(slice.count) * 4);
    return "";
  }
  // I64 is what numpy and torch write by default; accept it, but never wrap a
  // value silently.
  const char *base = slice.view->data + slice.firstElement * 8;
  for (int64_t i = 0; i < slice.count; ++i) {
    int64_t value;
    memcpy(&value, base + i * 8, 8);
    if (value < std::numeric_limits<int32_t>::min() ||
        value > std::numeric_limits<int32_t>::max())
      return data.path() + ": tensor '" + input + "' element " +
             std::to_string(slice.firstElement + i) + " (step " +
             std::to_string(slice.step) + ") is " + std::to_string(value) +
             ", outside int32";
    out[i] = static_cast<int32_t>(value);
  }
  return "";
}

/// Element `flat` of a tensor of `shape` as "[i, j, ...]".
static std::string formatIndex(const std::vector<int64_t> &shape,
                               int64_t flat) {
  std::vector<int64_t> index(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] > 0) {
      index[d] = flat % shape[d];
      flat /= shape[d];
    }
  }
  return formatShape(index);
}

std::string StepData::tryCheckInput(const std::string &input,
                                    const std::vector<int64_t> &globalShape,
                                    bool integer, int64_t bound) const {
  StepSlice slice;
  int64_t batch = globalShape.empty() ? 0 : globalShape[0];
  std::string error = integer ? locate(data, input, globalShape, {"I32", "I64"},
                                       "integer", 0, 0, batch, slice)
                              : locate(data, input, globalShape, {"F32"},
                                       "float", 0, 0, batch, slice);
  if (!error.empty())
    return error;
  const TensorView &view = *slice.view;
  if (!integer) {
    NonFinite bad = findNonFinite(view.data, view.bytes / 4);
    if (bad.index < 0)
      return "";
    return data.path() + ": tensor '" + input + "' at " +
           formatIndex(view.shape, bad.index) + " is " + bad.name +
           ", input '" + input + "' takes finite values";
  }
  int64_t elementBytes = view.dtype == "I64" ? 8 : 4;
  int64_t count = view.bytes / elementBytes;
  for (int64_t i = 0; i < count; ++i) {
    int64_t value;
    if (elementBytes == 8) {
      memcpy(&value, view.data + i * 8, 8);
    } else {
      int32_t narrow;
      memcpy(&narrow, view.data + i * 4, 4);
      value = narrow;
    }
    if (value < 0 || value >= bound)
      return data.path() + ": tensor '" + input + "' at " +
             formatIndex(view.shape, i) + " is " + std::to_string(value) +
             ", input '" + input + "' takes values in [0, " +
             std::to_string(bound) + ")";
  }
  return "";
}

void StepData::readFloats(const std::string &input,
                          const std::vector<int64_t> &globalShape, int64_t step,
                          int64_t rowBegin, int64_t rowEnd, float *out) const {
  std::string error =
      tryReadFloats(input, globalShape, step, rowBegin, rowEnd, out);
  if (!error.empty())
    SHARDC_RT_FAIL(callFor(data.purpose()), error);
}

void StepData::readInts(const std::string &input,
                        const std::vector<int64_t> &globalShape, int64_t step,
                        int64_t rowBegin, int64_t rowEnd, int32_t *out) const {
  std::string error =
      tryReadInts(input, globalShape, step, rowBegin, rowEnd, out);
  if (!error.empty())
    SHARDC_RT_FAIL(callFor(data.purpose()), error);
}

//===----------------------------------------------------------------------===//
// TokenData
//===----------------------------------------------------------------------===//

namespace {
constexpr int64_t headerInts = 256;
constexpr int64_t headerBytes = headerInts * 4;
constexpr int32_t tokenMagic = 20240520;
constexpr int32_t tokenVersion = 1;

/// Token `token` at `position` of `path`, at or above the vocabulary.
std::string tokenOutOfRange(const std::string &path, uint16_t token,
                            int64_t position, int64_t vocab) {
  return path + ": token " + std::to_string(token) + " at position " +
         std::to_string(position) + " is not below the vocabulary size " +
         std::to_string(vocab);
}
} // namespace

bool TokenData::isTokenFile(const std::string &path) {
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".bin") == 0)
    return true;
  // Mapped, so that what is not a regular file (a FIFO would block a
  // read) is no token file, and then refused as safetensors.
  MappedFile file;
  int32_t magic = 0;
  if (!MappedFile::tryMap(path, file).empty() ||
      file.size() < static_cast<int64_t>(sizeof magic))
    return false;
  std::memcpy(&magic, file.data(), sizeof magic);
  return magic == tokenMagic;
}

std::string TokenData::tryOpen(const std::string &path, int64_t batch,
                               int64_t seqLen, int64_t vocab,
                               const std::string &purpose, TokenData &out) {
  out = TokenData();
  out.why = purpose;
  // A vocabulary above 65536 is fine: every uint16 token is below it.
  if (batch < 1 || seqLen < 1 || vocab < 1)
    return path + ": batch " + std::to_string(batch) + ", sequence length " +
           std::to_string(seqLen) + " and vocabulary size " +
           std::to_string(vocab) + " must be at least 1";
  std::string error = MappedFile::tryMap(path, out.file);
  if (!error.empty())
    return error;
  int64_t size = out.file.size();
  if (size < headerBytes)
    return path + ": the file has " + std::to_string(size) +
           " bytes, fewer than the " + std::to_string(headerBytes) +
           "-byte header of an llm.c token file";
  int32_t header[3];
  memcpy(header, out.file.data(), sizeof(header));
  if (header[0] != tokenMagic)
    return path + ": magic number " + std::to_string(header[0]) +
           ", an llm.c token file has " + std::to_string(tokenMagic);
  if (header[1] != tokenVersion)
    return path + ": version " + std::to_string(header[1]) +
           ", only version 1 (uint16 tokens) is supported";
  int64_t count = header[2];
  if (count < 0 || size - headerBytes != count * 2)
    return path + ": the header says " + std::to_string(count) + " tokens (" +
           std::to_string(count * 2) + " bytes), the file has " +
           std::to_string(size - headerBytes) +
           " bytes after the header: truncated or corrupt";
  // One batch needs B * T + 1 tokens (the last target follows the last
  // window), as llm.c's loader requires; B * T may overflow, the quotient
  // not.
  if (count < 1 || (count - 1) / seqLen < batch) {
    std::string need =
        std::to_string(batch) + " x " + std::to_string(seqLen) + " + 1";
    if (batch <= (INT64_MAX - 1) / seqLen)
      need += " = " + std::to_string(batch * seqLen + 1);
    return path + ": " + std::to_string(count) +
           " tokens, fewer than one batch of " + std::to_string(batch) +
           " rows of " + std::to_string(seqLen) + " tokens reads (" + need +
           ")";
  }
  const char *base = out.file.data() + headerBytes;
  // One pass over the whole file at open: an out-of-range token would
  // otherwise index past the embedding table many steps into a run.
  for (int64_t i = 0; i < count; ++i) {
    uint16_t token;
    memcpy(&token, base + 2 * i, 2);
    if (token >= vocab)
      return tokenOutOfRange(path, token, i, vocab);
  }
  out.tokensBase = reinterpret_cast<const uint16_t *>(base);
  out.count = count;
  out.length = seqLen;
  out.vocab = vocab;
  return "";
}

TokenData TokenData::open(const std::string &path, int64_t batch,
                          int64_t seqLen, int64_t vocab,
                          const std::string &purpose) {
  TokenData result;
  std::string error = tryOpen(path, batch, seqLen, vocab, purpose, result);
  if (!error.empty())
    SHARDC_RT_FAIL(callFor(purpose), error);
  return result;
}

int64_t TokenData::batchesHeld(int64_t globalBatch) const {
  return globalBatch < 1 || count < 1 ? 0 : (count - 1) / length / globalBatch;
}

int64_t TokenData::windowStart(int64_t step, int64_t globalBatch,
                               int64_t row) const {
  int64_t held = batchesHeld(globalBatch);
  SHARDC_RT_CHECK(step >= 0 && held >= 1 && row >= 0 && row < globalBatch,
                  callFor(why),
                  file.path() + ": step " + std::to_string(step) + ", row " +
                      std::to_string(row) + " of a batch of " +
                      std::to_string(globalBatch) + " requested (the file " +
                      "holds " + countOf(held, "batch") + ")");
  // No product overflows: the start is below N.
  return ((step % held) * globalBatch + row) * length;
}

void TokenData::read(int64_t step, int64_t globalBatch, int64_t rowBegin,
                     int64_t rowEnd, int32_t *tokens, int32_t *targets) const {
  SHARDC_RT_CHECK(rowBegin >= 0 && rowBegin <= rowEnd && rowEnd <= globalBatch,
                  callFor(why),
                  file.path() + ": rows [" + std::to_string(rowBegin) + ", " +
                      std::to_string(rowEnd) + ") of a batch of " +
                      std::to_string(globalBatch) + " requested");
  for (int64_t row = rowBegin; row < rowEnd; ++row) {
    int64_t start = windowStart(step, globalBatch, row);
    const uint16_t *window = tokensBase + start;
    int32_t *tokenRow = tokens + (row - rowBegin) * length;
    int32_t *targetRow = targets + (row - rowBegin) * length;
    // Checked at open, and again as read, each token read once: a file
    // rewritten in place during the run is named here, not by the
    // embedding's index check.
    for (int64_t t = 0; t <= length; ++t) {
      uint16_t token = window[t];
      if (token >= vocab)
        SHARDC_RT_FAIL(callFor(why),
                       tokenOutOfRange(file.path(), token, start + t, vocab) +
                           " (the file changed during the run?)");
      if (t < length)
        tokenRow[t] = token;
      if (t > 0)
        targetRow[t - 1] = token;
    }
  }
}
