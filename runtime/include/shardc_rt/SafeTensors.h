//===- SafeTensors.h - Read and write .safetensors files --------*- C++ -*-===//
//
// The safetensors format carries initial weights (--init), training data and
// checkpoint shards. A file is an 8-byte little-endian header length, a JSON
// header and the raw tensor bytes:
//
//   {"__metadata__": {"step": "3"},
//    "wte": {"dtype": "F32", "shape": [8, 8], "data_offsets": [0, 256]}}
//
// data_offsets are relative to the first byte after the header. The reader
// checks everything before handing out a byte, so a truncated or corrupt file
// is an error naming the file, never a crash or garbage weights.
//
// The runtime has no JSON library, so the small strict JSON reader the header
// needs lives here too; checkpoint.json reuses it.
//
// Each reader has a try* core that returns an error string ("" on success)
// instead of ending the process, so that tests can exercise every failure and
// collective callers can agree on an error before failing together.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_SAFETENSORS_H
#define SHARDC_RT_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace shardc::rt {

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

/// One parsed JSON value. Numbers keep their literal text so that shapes and
/// offsets are checked as exact integers, never rounded through a double.
struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  /// A string's unescaped contents, or a number's literal text.
  std::string text;
  /// An array's elements.
  std::vector<JsonValue> elements;
  /// An object's members in file order; keys are unique.
  std::vector<std::pair<std::string, JsonValue>> members;

  /// The member named `key` of an object, or nullptr.
  const JsonValue *get(const std::string &key) const;
  /// True when this is an integer literal (no fraction or exponent) that fits
  /// in int64_t; stores it in `value`.
  bool getInt64(int64_t &value) const;
};

/// Parses `text` as exactly one JSON value (RFC 8259; whitespace around it is
/// allowed, nothing else). Rejects duplicate object keys, unpaired surrogates
/// and nesting deeper than 64. Returns "" on success, else what is wrong and
/// at which byte offset.
std::string parseJson(const std::string &text, JsonValue &out);

/// `text` as a JSON string literal, quotes included.
std::string jsonQuote(const std::string &text);

//===----------------------------------------------------------------------===//
// Files mapped into memory
//===----------------------------------------------------------------------===//

/// A read-only memory map of a whole file. Copies share the mapping, which is
/// unmapped with the last copy. Mapping rather than reading means a rank
/// touches only the pages it uses and ranks on one node share the page cache.
class MappedFile {
public:
  /// Maps `path`. Returns "" on success, else a message that starts with the
  /// path. An empty file maps to size() == 0 and data() == nullptr.
  static std::string tryMap(const std::string &path, MappedFile &out);

  const char *data() const { return bytes; }
  int64_t size() const { return length; }
  const std::string &path() const { return filePath; }
  /// A hash of the file's bytes (FNV-1a's step over 8-byte words, each
  /// product folded, high half into low), one read of the whole file:
  /// whether two ranks' files are copies of one file.
  uint64_t contentHash() const;

private:
  struct Mapping;
  std::shared_ptr<Mapping> mapping;
  const char *bytes = nullptr;
  int64_t length = 0;
  std::string filePath;
};

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

/// Bytes per element of a safetensors dtype ("F32", "BF16", "I64", ...), or 0
/// for a dtype this runtime does not know.
int64_t dtypeBytes(const std::string &dtype);

/// Number of elements of `shape` (1 for a scalar), or -1 when a dimension is
/// negative or the product overflows int64_t.
int64_t numElements(const std::vector<int64_t> &shape);

/// `shape` as "[4, 8]", the form every message uses.
std::string formatShape(const std::vector<int64_t> &shape);

/// One tensor of an open file. `data` points into the mapping and need not be
/// aligned for the element type: copy out with memcpy.
struct TensorView {
  std::string dtype;
  std::vector<int64_t> shape;
  const char *data = nullptr;
  int64_t bytes = 0;
};

/// A header entry as parsed, before it is tied to a mapping.
struct SafeTensorsEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  /// Byte range relative to the start of the data section.
  int64_t begin = 0, end = 0;
};

/// What parseSafeTensors found in a file.
struct SafeTensorsHeader {
  /// Tensors in header order.
  std::vector<SafeTensorsEntry> tensors;
  /// The optional "__metadata__" object (string values only).
  std::map<std::string, std::string> metadata;
  /// File offset of the data section: 8 + the header length.
  int64_t dataStart = 0;
};

/// Parses and validates the bytes of a whole file: the length prefix, the
/// JSON header, each dtype, shape and data_offsets (within the data section,
/// matching shape x dtype size, not overlapping another tensor). Gaps between
/// tensors and bytes after the last one are allowed, as no reader is misled
/// by them. Returns "" on success, else what is wrong (without the path).
std::string parseSafeTensors(const char *bytes, int64_t size,
                             SafeTensorsHeader &header);

/// A validated .safetensors file, mapped into memory.
class SafeTensorsFile {
public:
  /// Maps and validates `path`; any problem is a rank-local fatal error
  /// reported as "<purpose>: <path>: <what is wrong>". `purpose` names what
  /// the file is for in messages, e.g. "--init".
  static SafeTensorsFile open(const std::string &path,
                              const std::string &purpose);

  /// The core of open(): returns "" on success, else "<path>: <what is
  /// wrong>".
  static std::string tryOpen(const std::string &path,
                             const std::string &purpose, SafeTensorsFile &out);

  /// The tensor named `name`, or nullptr.
  const TensorView *find(const std::string &name) const;
  /// Tensor names in header order.
  const std::vector<std::string> &names() const { return order; }
  /// The "__metadata__" strings.
  const std::map<std::string, std::string> &metadata() const { return meta; }
  const std::string &path() const { return file.path(); }
  const std::string &purpose() const { return why; }
  /// Size of the file in bytes.
  int64_t fileBytes() const { return file.size(); }
  /// MappedFile::contentHash of the file.
  uint64_t contentHash() const { return file.contentHash(); }

private:
  MappedFile file;
  std::string why;
  std::map<std::string, TensorView> views;
  std::vector<std::string> order;
  std::map<std::string, std::string> meta;
};

/// Checks that `file` holds `name` with exactly `dtype` and `shape`. Returns
/// "" or a message such as "/tmp/x.safetensors: tensor 'wte' has shape [4, 8],
/// the model wants [8, 8]".
/// Up to `shown` of `names`, quoted and comma-separated, then " (and N
/// more)" where there are more: how messages list tensors.
std::string listNames(const std::vector<std::string> &names, size_t shown);

std::string checkTensor(const SafeTensorsFile &file, const std::string &name,
                        const std::string &dtype,
                        const std::vector<int64_t> &shape);

/// Copies elements [begin, end) of the flattened F32 tensor `name`, which
/// must have exactly `shape`, to out[0, end - begin). Returns "" or the error.
std::string tryReadF32(const SafeTensorsFile &file, const std::string &name,
                       const std::vector<int64_t> &shape, int64_t begin,
                       int64_t end, float *out);

/// tryReadF32 of the whole tensor; an error is fatal, reported under the
/// file's purpose.
void readF32(const SafeTensorsFile &file, const std::string &name,
             const std::vector<int64_t> &shape, float *out);

/// tryReadF32 of elements [begin, end), for a rank that holds a shard; an
/// error is fatal, reported under the file's purpose.
void readF32Range(const SafeTensorsFile &file, const std::string &name,
                  const std::vector<int64_t> &shape, int64_t begin, int64_t end,
                  float *out);

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

/// A tensor to write. Its byte size is shape x dtype size; `data` holds that
/// many bytes in little-endian order.
struct NamedTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  const void *data = nullptr;
};

/// Writes a .safetensors file atomically: the bytes go to a new
/// "<path>.tmp.<6 letters or digits>", which is fsync'ed and renamed over
/// `path` (through symlinks, the file they name), so `path`
/// holds either its old contents or the complete new file, never a prefix.
/// Tensors are laid out in the given order, the header padded with spaces to
/// a multiple of 8 bytes as the reference implementation does. Returns "" on
/// success, else "<path>: <what failed>" after removing the temporary file.
std::string
tryWriteSafeTensors(const std::string &path,
                    const std::vector<NamedTensor> &tensors,
                    const std::map<std::string, std::string> &metadata);

/// Writes `contents` to `path` atomically, the same way (checkpoint.json).
std::string tryWriteFileAtomic(const std::string &path,
                               const std::string &contents);

/// Whether a file could be written at `path` now, to find out before a long
/// run rather than after it: its directory exists and a file can be created
/// there (one is, and removed), and `path` names nothing or a regular file
/// (the atomic write renames over it).
/// Returns "" or "<path>: <what is wrong>".
std::string tryCheckWritable(const std::string &path);

/// The directory part of `path`: "." for a bare name, "/" for "/name".
std::string directoryOf(const std::string &path);

/// tryWriteSafeTensors; a failure is a rank-local fatal error.
void writeSafeTensors(const std::string &path,
                      const std::vector<NamedTensor> &tensors,
                      const std::map<std::string, std::string> &metadata);

} // namespace shardc::rt

#endif // SHARDC_RT_SAFETENSORS_H
