//===- SafeTensors.cpp - Read and write .safetensors files ----------------===//
//
// A strict JSON reader, a memory map, the safetensors header checks and an
// atomic writer (temporary file, fsync, rename).
//
//===----------------------------------------------------------------------===//

#include "shardc_rt/SafeTensors.h"

#include "shardc_rt/Error.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <mutex>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// The format is little-endian and the reader copies bytes straight into
// host floats and integers.
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the shardc runtime assumes a little-endian host"
#endif

using namespace shardc::rt;

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

const JsonValue *JsonValue::get(const std::string &key) const {
  for (const auto &member : members)
    if (member.first == key)
      return &member.second;
  return nullptr;
}

bool JsonValue::getInt64(int64_t &value) const {
  if (kind != Kind::Number || text.empty())
    return false;
  size_t i = 0;
  bool negative = text[0] == '-';
  if (negative)
    i = 1;
  if (i == text.size())
    return false;
  // Accumulate as a negative number so that INT64_MIN fits.
  int64_t result = 0;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c < '0' || c > '9')
      return false; // A fraction or an exponent: not an integer literal.
    if (__builtin_mul_overflow(result, 10, &result) ||
        __builtin_sub_overflow(result, c - '0', &result))
      return false;
  }
  if (!negative) {
    if (result == INT64_MIN)
      return false;
    result = -result;
  }
  value = result;
  return true;
}

namespace {

/// Recursive descent over RFC 8259. Errors carry the byte offset, as a
/// header is one long line and a line number would not help.
class JsonParser {
public:
  explicit JsonParser(const std::string &text) : text(text) {}

  std::string parse(JsonValue &out) {
    skipSpace();
    if (!parseValue(out, 0))
      return error;
    skipSpace();
    if (pos != text.size()) {
      fail("unexpected " + describeHere() + " after the JSON value");
      return error;
    }
    return "";
  }

private:
  static constexpr int maxDepth = 64;

  const std::string &text;
  size_t pos = 0;
  std::string error;

  bool fail(const std::string &message) {
    if (error.empty())
      error = message + " at byte " + std::to_string(pos);
    return false;
  }

  std::string describeHere() const {
    if (pos >= text.size())
      return "end of text";
    unsigned char c = text[pos];
    if (c >= 0x20 && c < 0x7f)
      return std::string("'") + static_cast<char>(c) + "'";
    char buffer[16];
    snprintf(buffer, sizeof(buffer), "byte 0x%02x", c);
    return buffer;
  }

  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }

  bool consumeWord(const char *word) {
    size_t n = strlen(word);
    if (text.compare(pos, n, word) != 0)
      return fail(std::string("expected '") + word + "'");
    pos += n;
    return true;
  }

  bool parseValue(JsonValue &out, int depth) {
    if (depth > maxDepth)
      return fail("JSON nested deeper than " + std::to_string(maxDepth));
    if (pos >= text.size())
      return fail("expected a JSON value, found end of text");
    switch (text[pos]) {
    case '{':
      return parseObject(out, depth);
    case '[':
      return parseArray(out, depth);
    case '"':
      out.kind = JsonValue::Kind::String;
      return parseString(out.text);
    case 't':
      out.kind = JsonValue::Kind::Bool;
      out.boolean = true;
      return consumeWord("true");
    case 'f':
      out.kind = JsonValue::Kind::Bool;
      out.boolean = false;
      return consumeWord("false");
    case 'n':
      out.kind = JsonValue::Kind::Null;
      return consumeWord("null");
    default:
      if (text[pos] == '-' || (text[pos] >= '0' && text[pos] <= '9'))
        return parseNumber(out);
      return fail("expected a JSON value, found " + describeHere());
    }
  }

  bool parseObject(JsonValue &out, int depth) {
    out.kind = JsonValue::Kind::Object;
    ++pos; // '{'
    skipSpace();
    if (pos < text.size() && text[pos] == '}') {
      ++pos;
      return true;
    }
    while (true) {
      skipSpace();
      if (pos >= text.size() || text[pos] != '"')
        return fail("expected a string key, found " + describeHere());
      std::string key;
      if (!parseString(key))
        return false;
      if (out.get(key))
        return fail("duplicate key '" + printable(key) + "'");
      skipSpace();
      if (pos >= text.size() || text[pos] != ':')
        return fail("expected ':' after key '" + printable(key) + "', found " +
                    describeHere());
      ++pos;
      skipSpace();
      out.members.emplace_back(key, JsonValue());
      if (!parseValue(out.members.back().second, depth + 1))
        return false;
      skipSpace();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == '}') {
        ++pos;
        return true;
      }
      return fail("expected ',' or '}' in an object, found " + describeHere());
    }
  }

  bool parseArray(JsonValue &out, int depth) {
    out.kind = JsonValue::Kind::Array;
    ++pos; // '['
    skipSpace();
    if (pos < text.size() && text[pos] == ']') {
      ++pos;
      return true;
    }
    while (true) {
      skipSpace();
      out.elements.emplace_back();
      if (!parseValue(out.elements.back(), depth + 1))
        return false;
      skipSpace();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == ']') {
        ++pos;
        return true;
      }
      return fail("expected ',' or ']' in an array, found " + describeHere());
    }
  }

  bool parseHex4(unsigned &value) {
    if (pos + 4 > text.size())
      return fail("truncated \\u escape");
    value = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text[pos + i];
      value <<= 4;
      if (c >= '0' && c <= '9')
        value |= c - '0';
      else if (c >= 'a' && c <= 'f')
        value |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        value |= c - 'A' + 10;
      else
        return fail("bad hex digit in a \\u escape");
    }
    pos += 4;
    return true;
  }

  static void appendUtf8(std::string &out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xc0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xe0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    }
  }

  bool parseString(std::string &out) {
    ++pos; // '"'
    out.clear();
    while (true) {
      if (pos >= text.size())
        return fail("unterminated string");
      unsigned char c = text[pos];
      if (c == '"') {
        ++pos;
        return true;
      }
      if (c < 0x20)
        return fail("raw control character in a string");
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos;
        continue;
      }
      ++pos;
      if (pos >= text.size())
        return fail("unterminated string");
      char escape = text[pos++];
      switch (escape) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        unsigned code = 0;
        if (!parseHex4(code))
          return false;
        if (code >= 0xdc00 && code <= 0xdfff)
          return fail("unpaired low surrogate in a \\u escape");
        if (code >= 0xd800 && code <= 0xdbff) {
          unsigned low = 0;
          if (text.compare(pos, 2, "\\u") != 0)
            return fail("unpaired high surrogate in a \\u escape");
          pos += 2;
          if (!parseHex4(low))
            return false;
          if (low < 0xdc00 || low > 0xdfff)
            return fail("unpaired high surrogate in a \\u escape");
          code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
        }
        appendUtf8(out, code);
        break;
      }
      default:
        --pos;
        return fail(std::string("bad escape '\\") + escape + "'");
      }
    }
  }

  bool parseDigits() {
    size_t start = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9')
      ++pos;
    if (pos == start)
      return fail("expected a digit, found " + describeHere());
    return true;
  }

  bool parseNumber(JsonValue &out) {
    size_t start = pos;
    if (text[pos] == '-')
      ++pos;
    if (pos < text.size() && text[pos] == '0') {
      ++pos;
      if (pos < text.size() && text[pos] >= '0' && text[pos] <= '9')
        return fail("leading zero in a number");
    } else if (!parseDigits()) {
      return false;
    }
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      if (!parseDigits())
        return false;
    }
    if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
      ++pos;
      if (pos < text.size() && (text[pos] == '+' || text[pos] == '-'))
        ++pos;
      if (!parseDigits())
        return false;
    }
    out.kind = JsonValue::Kind::Number;
    out.text = text.substr(start, pos - start);
    return true;
  }
};

} // namespace

std::string shardc::rt::parseJson(const std::string &text, JsonValue &out) {
  out = JsonValue();
  return JsonParser(text).parse(out);
}

std::string shardc::rt::jsonQuote(const std::string &text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        char buffer[8];
        snprintf(buffer, sizeof(buffer), "\\u%04x", c);
        out += buffer;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  return out + "\"";
}

//===----------------------------------------------------------------------===//
// MappedFile
//===----------------------------------------------------------------------===//

namespace {

/// A file made shorter while mapped (rewritten by another process during a
/// run) raises SIGBUS where its pages past the new end are read. The
/// mappings are listed here so that the handler names the file: a slot is
/// in use while `begin` is not 0, its other fields written before it.
struct MappedRange {
  std::atomic<uintptr_t> begin{0};
  uintptr_t end = 0;
  int rank = 0;
  char path[256] = {};
};
/// The listed mappings (listMapping), read by onBusError.
MappedRange mappedRanges[64];
std::mutex mappedRangesMutex;
/// Whatever handled SIGBUS before onBusError: it gets the others.
struct sigaction busErrorBefore;

/// Writes `text` to stderr from a signal handler.
void writeSafely(const char *text) {
  ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

/// SIGBUS: a fault (si_code > 0; not a kill) in a listed mapping names
/// its file and ends the process with 1; any other goes to the handler
/// before, raised again where it would not recur.
void onBusError(int signal, siginfo_t *info, void *) {
  auto at = reinterpret_cast<uintptr_t>(info->si_addr);
  for (MappedRange &range : mappedRanges) {
    uintptr_t begin = range.begin.load(std::memory_order_acquire);
    if (info->si_code <= 0 || begin == 0 || at < begin || at >= range.end)
      continue;
    char rank[16], *digit = rank + sizeof rank;
    *--digit = '\0';
    int r = range.rank;
    do
      *--digit = static_cast<char>('0' + r % 10);
    while ((r /= 10) > 0 && digit > rank);
    writeSafely("shardc: rank ");
    writeSafely(digit);
    writeSafely(": ");
    writeSafely(range.path);
    writeSafely(": the file was made shorter, or could not be read, while "
                "the run read it (SIGBUS): a file a run reads must not "
                "change until it ends\n");
    ::_exit(1);
  }
  // Not a mapped file's: the handler before, at the fault again (a fault
  // recurs when this returns; a signal sent by a process does not).
  sigaction(signal, &busErrorBefore, nullptr);
  if (info->si_code <= 0)
    raise(signal);
}

/// Lists [begin, begin + length), the mapping of `path`, for onBusError
/// (installed with the first); a mapping past the list's 64 just goes
/// unnamed.
MappedRange *listMapping(const void *begin, size_t length,
                         const std::string &path) {
  std::lock_guard<std::mutex> lock(mappedRangesMutex);
  static bool installed = [] {
    struct sigaction action = {};
    action.sa_sigaction = onBusError;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    return sigaction(SIGBUS, &action, &busErrorBefore) == 0;
  }();
  (void)installed;
  for (MappedRange &range : mappedRanges) {
    if (range.begin.load(std::memory_order_relaxed) != 0)
      continue;
    range.end = reinterpret_cast<uintptr_t>(begin) + length;
    range.rank = worldRank();
    std::snprintf(range.path, sizeof range.path, "%s", path.c_str());
    range.begin.store(reinterpret_cast<uintptr_t>(begin),
                      std::memory_order_release);
    return &range;
  }
  return nullptr;
}

} // namespace

struct MappedFile::Mapping {
  void *address = nullptr;
  size_t length = 0;
  MappedRange *listed = nullptr;
  ~Mapping() {
    if (listed)
      listed->begin.store(0, std::memory_order_release);
    if (address)
      munmap(address, length);
  }
};

std::string MappedFile::tryMap(const std::string &path, MappedFile &out) {
  out = MappedFile();
  // O_NONBLOCK: a FIFO opens at once (to be refused below) instead of
  // waiting for a writer; it changes nothing for a regular file.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return path + ": cannot open: " + strerror(errno);
  struct stat info;
  if (fstat(fd, &info) != 0) {
    int err = errno;
    ::close(fd);
    return path + ": cannot stat: " + strerror(err);
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return path + ": not a regular file";
  }
  auto mapping = std::make_shared<Mapping>();
  if (info.st_size > 0) {
    void *address = mmap(nullptr, static_cast<size_t>(info.st_size), PROT_READ,
                         MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return path + ": cannot map: " + strerror(err);
    }
    mapping->address = address;
    mapping->length = static_cast<size_t>(info.st_size);
    mapping->listed = listMapping(address, mapping->length, path);
  }
  // The mapping keeps the file's pages reachable; the descriptor is no
  // longer needed and would only count against the process's limit.
  ::close(fd);
  out.mapping = std::move(mapping);
  out.bytes = static_cast<const char *>(out.mapping->address);
  out.length = static_cast<int64_t>(info.st_size);
  out.filePath = path;
  return "";
}

uint64_t MappedFile::contentHash() const {
  uint64_t hash = 0xcbf29ce484222325ULL;
  constexpr uint64_t prime = 0x100000001b3ULL;
  int64_t i = 0;
  for (; i + 8 <= length; i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    // The fold carries the product's high bits down: without it a word's
    // top bit reaches the hash's top bit alone, and two such flips cancel.
    hash = (hash ^ word) * prime;
    hash ^= hash >> 32;
  }
  for (; i < length; ++i)
    hash = (hash ^ static_cast<unsigned char>(bytes[i])) * prime;
  return (hash ^ static_cast<uint64_t>(length)) * prime;
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

int64_t shardc::rt::dtypeBytes(const std::string &dtype) {
  static const std::map<std::string, int64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"U16", 2},  {"I16", 2}, {"F16", 2}, {"BF16", 2},    {"U32", 4},
      {"I32", 4},  {"F32", 4}, {"U64", 8}, {"I64", 8},     {"F64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

int64_t shardc::rt::numElements(const std::vector<int64_t> &shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    if (dim < 0 || __builtin_mul_overflow(count, dim, &count))
      return -1;
  return count;
}

std::string shardc::rt::formatShape(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

/// Reads a JSON array of non-negative integers, for shapes and offsets.
static bool getIndexList(const JsonValue &value, std::vector<int64_t> &out) {
  if (value.kind != JsonValue::Kind::Array)
    return false;
  out.clear();
  for (const JsonValue &element : value.elements) {
    int64_t number;
    if (!element.getInt64(number) || number < 0)
      return false;
    out.push_back(number);
  }
  return true;
}

std::string shardc::rt::parseSafeTensors(const char *bytes, int64_t size,
                                         SafeTensorsHeader &header) {
  header = SafeTensorsHeader();
  if (size < 8)
    return "the file has " + std::to_string(size) +
           " bytes, fewer than the 8-byte header length";
  uint64_t headerBytes;
  memcpy(&headerBytes, bytes, 8);
  if (headerBytes > static_cast<uint64_t>(size - 8))
    return "header length " + std::to_string(headerBytes) +
           " is larger than the rest of the file (" + std::to_string(size - 8) +
           " bytes): truncated, or not a safetensors file";
  std::string json(bytes + 8, static_cast<size_t>(headerBytes));
  JsonValue root;
  std::string error = parseJson(json, root);
  if (!error.empty())
    return "header is not valid JSON: " + error;
  if (root.kind != JsonValue::Kind::Object)
    return "header is not a JSON object";

  int64_t dataBytes = size - 8 - static_cast<int64_t>(headerBytes);
  for (const auto &[name, value] : root.members) {
    if (name == "__metadata__") {
      if (value.kind != JsonValue::Kind::Object)
        return "__metadata__ is not an object";
      for (const auto &[key, entry] : value.members) {
        if (entry.kind != JsonValue::Kind::String)
          return "__metadata__ entry '" + printable(key) + "' is not a string";
        header.metadata[key] = entry.text;
      }
      continue;
    }
    std::string what = "tensor '" + printable(name) + "'";
    if (value.kind != JsonValue::Kind::Object)
      return what + " is not an object";
    for (const auto &member : value.members)
      if (member.first != "dtype" && member.first != "shape" &&
          member.first != "data_offsets")
        return what + " has unknown field '" + printable(member.first) + "'";
    const JsonValue *dtype = value.get("dtype");
    const JsonValue *shape = value.get("shape");
    const JsonValue *offsets = value.get("data_offsets");
    if (!dtype || !shape || !offsets)
      return what + " lacks " +
             (!dtype   ? "dtype"
              : !shape ? "shape"
                       : "data_offsets");
    SafeTensorsEntry entry;
    entry.name = name;
    if (dtype->kind != JsonValue::Kind::String)
      return what + ": dtype is not a string";
    entry.dtype = dtype->text;
    int64_t elementBytes = dtypeBytes(entry.dtype);
    if (elementBytes == 0)
      return what + " has unknown dtype '" + printable(entry.dtype) + "'";
    if (!getIndexList(*shape, entry.shape))
      return what + ": shape is not a list of non-negative integers";
    std::vector<int64_t> range;
    if (!getIndexList(*offsets, range) || range.size() != 2)
      return what + ": data_offsets is not [begin, end] of non-negative "
                    "integers";
    entry.begin = range[0];
    entry.end = range[1];
    std::string offsetsText = "data_offsets [" + std::to_string(entry.begin) +
                              ", " + std::to_string(entry.end) + "]";
    if (entry.begin > entry.end)
      return what + ": " + offsetsText + " end before they begin";
    if (entry.end > dataBytes)
      return what + ": " + offsetsText + " go past the end of the data (" +
             std::to_string(dataBytes) + " bytes): the file is truncated";
    int64_t count = numElements(entry.shape);
    int64_t needed;
    if (count < 0 || __builtin_mul_overflow(count, elementBytes, &needed))
      return what + ": shape " + formatShape(entry.shape) + " is too large";
    if (needed != entry.end - entry.begin)
      return what + ": shape " + formatShape(entry.shape) + " of " +
             entry.dtype + " needs " + std::to_string(needed) + " bytes, " +
             offsetsText + " hold " + std::to_string(entry.end - entry.begin);
    header.tensors.push_back(std::move(entry));
  }

  // In the order of their bytes, the tensors tile the data, as the
  // reference implementation requires: two sharing bytes would alias each
  // other's writes in any reader that maps the file, and bytes of no tensor
  // (a header length off by a few bytes) would shift every tensor's values
  // and read as valid.
  std::vector<const SafeTensorsEntry *> sorted;
  for (const SafeTensorsEntry &entry : header.tensors)
    if (entry.end > entry.begin)
      sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](auto *a, auto *b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  int64_t covered = 0; // the end of the tensors before
  const SafeTensorsEntry *previous = nullptr;
  for (const SafeTensorsEntry *entry : sorted) {
    if (entry->begin < covered)
      return "tensors '" + printable(previous->name) + "' and '" +
             printable(entry->name) + "' overlap (bytes [" +
             std::to_string(previous->begin) + ", " +
             std::to_string(previous->end) + ") and [" +
             std::to_string(entry->begin) + ", " + std::to_string(entry->end) +
             "))";
    if (entry->begin > covered)
      return "bytes [" + std::to_string(covered) + ", " +
             std::to_string(entry->begin) +
             ") of the data belong to no tensor (before '" +
             printable(entry->name) + "')";
    covered = entry->end, previous = entry;
  }
  if (covered != dataBytes)
    return "bytes [" + std::to_string(covered) + ", " +
           std::to_string(dataBytes) +
           ") at the end of the data belong to no tensor (bytes appended, or "
           "a header length that is off?)";
  header.dataStart = 8 + static_cast<int64_t>(headerBytes);
  return "";
}

std::string SafeTensorsFile::tryOpen(const std::string &path,
                                     const std::string &purpose,
                                     SafeTensorsFile &out) {
  out = SafeTensorsFile();
  out.why = purpose;
  std::string error = MappedFile::tryMap(path, out.file);
  if (!error.empty())
    return error;
  SafeTensorsHeader header;
  error = parseSafeTensors(out.file.data(), out.file.size(), header);
  if (!error.empty()) {
    out.file = MappedFile();
    return path + ": " + error;
  }
  for (SafeTensorsEntry &entry : header.tensors) {
    TensorView view;
    view.dtype = entry.dtype;
    view.shape = entry.shape;
    view.data = out.file.data() + header.dataStart + entry.begin;
    view.bytes = entry.end - entry.begin;
    out.order.push_back(entry.name);
    out.views.emplace(entry.name, std::move(view));
  }
  out.meta = std::move(header.metadata);
  return "";
}

/// The `call` that rank-local failures are reported under.
static std::string callFor(const std::string &purpose) {
  return purpose.empty() ? "safetensors" : purpose;
}

SafeTensorsFile SafeTensorsFile::open(const std::string &path,
                                      const std::string &purpose) {
  SafeTensorsFile file;
  std::string error = tryOpen(path, purpose, file);
  if (!error.empty())
    SHARDC_RT_FAIL(callFor(purpose), error);
  return file;
}

const TensorView *SafeTensorsFile::find(const std::string &name) const {
  auto it = views.find(name);
  return it == views.end() ? nullptr : &it->second;
}

std::string shardc::rt::listNames(const std::vector<std::string> &names,
                                  size_t shown) {
  std::string listed;
  for (size_t i = 0; i < names.size() && i < shown; ++i)
    listed += (i ? ", '" : "'") + printable(names[i]) + "'";
  if (names.size() > shown)
    listed += " (and " + std::to_string(names.size() - shown) + " more)";
  return listed;
}

std::string shardc::rt::checkTensor(const SafeTensorsFile &file,
                                    const std::string &name,
                                    const std::string &dtype,
                                    const std::vector<int64_t> &shape) {
  const TensorView *view = file.find(name);
  if (!view) {
    // Listing a few names catches the common mistake of a prefix that differs
    // ("transformer.wte" against "wte").
    const auto &names = file.names();
    return file.path() + ": no tensor '" + name + "' (the file holds " +
           std::to_string(names.size()) + " tensors" +
           (names.empty() ? "" : ": " + listNames(names, 8)) + ")";
  }
  if (view->dtype != dtype)
    return file.path() + ": tensor '" + name + "' has dtype " + view->dtype +
           ", the model wants " + dtype;
  if (view->shape != shape)
    return file.path() + ": tensor '" + name + "' has shape " +
           formatShape(view->shape) + ", the model wants " + formatShape(shape);
  return "";
}

std::string shardc::rt::tryReadF32(const SafeTensorsFile &file,
                                   const std::string &name,
                                   const std::vector<int64_t> &shape,
                                   int64_t begin, int64_t end, float *out) {
  std::string error = checkTensor(file, name, "F32", shape);
  if (!error.empty())
    return error;
  int64_t count = numElements(shape);
  if (begin < 0 || begin > end || end > count)
    return file.path() + ": elements [" + std::to_string(begin) + ", " +
           std::to_string(end) + ") of tensor '" + name +
           "' requested, it has " + std::to_string(count);
  if (end > begin)
    memcpy(out, file.find(name)->data + begin * 4,
           static_cast<size_t>(end - begin) * 4);
  return "";
}

void shardc::rt::readF32(const SafeTensorsFile &file, const std::string &name,
                         const std::vector<int64_t> &shape, float *out) {
  readF32Range(file, name, shape, 0, std::max<int64_t>(numElements(shape), 0),
               out);
}

void shardc::rt::readF32Range(const SafeTensorsFile &file,
                              const std::string &name,
                              const std::vector<int64_t> &shape, int64_t begin,
                              int64_t end, float *out) {
  std::string error = tryReadF32(file, name, shape, begin, end, out);
  if (!error.empty())
    SHARDC_RT_FAIL(callFor(file.purpose()), error);
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace {
struct Chunk {
  const void *data;
  size_t bytes;
};
} // namespace

/// write(2) until everything is out: a single call may write less than asked
/// (signals, pipes, writes over 2 GiB).
static bool writeAll(int fd, const void *data, size_t bytes) {
  const char *cursor = static_cast<const char *>(data);
  while (bytes > 0) {
    ssize_t written = ::write(fd, cursor, bytes);
    if (written < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    if (written == 0) {
      errno = ENOSPC;
      return false;
    }
    cursor += written;
    bytes -= static_cast<size_t>(written);
  }
  return true;
}

std::string shardc::rt::directoryOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// Why a rename onto `path` must not happen: it names a directory or
/// something other than a regular file; "" where nothing or a regular file
/// is there.
static std::string notReplaceable(const std::string &path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 || S_ISREG(info.st_mode))
    return "";
  return path + (S_ISDIR(info.st_mode)
                     ? ": is a directory"
                     : ": exists and is not a regular file (a device, a "
                       "pipe or a socket), which the write would replace");
}

/// Sets `path` to the file `output` names: through symlinks (dangling ones
/// too, as open(2) writes through them), the file the last one names.
/// "" or why not (a loop of links, as open(2) fails with ELOOP).
static std::string followLinks(const std::string &output, std::string &path) {
  char link[4096];
  struct stat info;
  path = output;
  for (int hops = 0; ::lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode);
       ++hops) {
    ssize_t length = ::readlink(path.c_str(), link, sizeof(link));
    if (hops == 40 || length <= 0 ||
        length == static_cast<ssize_t>(sizeof(link)))
      return output + ": cannot follow its symbolic links: " +
             strerror(hops == 40 ? ELOOP : errno);
    std::string next(link, static_cast<size_t>(length));
    path = next[0] == '/' ? next : directoryOf(path) + "/" + next;
  }
  return "";
}

/// Creates "<path>.tmp.<6 letters or digits>", a new name (O_EXCL: never a
/// file of the user's), mode 0644 less the umask as any file the runtime
/// writes; its descriptor, or -1 with errno set.
static int createTemporary(const std::string &path, std::string &temporary) {
  static const char alphabet[] =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  static uint64_t state =
      static_cast<uint64_t>(getpid()) * 0x9E3779B97F4A7C15ULL ^
      static_cast<uint64_t>(time(nullptr));
  for (int attempt = 0; attempt < 100; ++attempt) {
    temporary = path + ".tmp.";
    for (int i = 0; i < 6; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      temporary += alphabet[(state >> 33) % (sizeof(alphabet) - 1)];
    }
    int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                    0644);
    if (fd >= 0 || errno != EEXIST)
      return fd;
  }
  return -1;
}

static std::string writeChunksAtomic(const std::string &output,
                                     const std::vector<Chunk> &chunks) {
  // The rename below replaces the file `output` names (a symlink stays), so
  // refuse anything but a regular file (or nothing), such as /dev/null.
  std::string path, temporary;
  if (std::string bad = followLinks(output, path); !bad.empty())
    return bad;
  if (std::string bad = notReplaceable(path); !bad.empty())
    return bad;
  int fd = createTemporary(path, temporary);
  if (fd < 0)
    return path + ": cannot create " + temporary + ": " + strerror(errno);
  auto abandon = [&](const char *what) {
    int err = errno;
    if (fd >= 0)
      ::close(fd);
    ::unlink(temporary.c_str());
    return path + ": " + what + " " + temporary + ": " + strerror(err);
  };
  for (const Chunk &chunk : chunks)
    if (!writeAll(fd, chunk.data, chunk.bytes))
      return abandon("cannot write");
  // Without fsync a crash after the rename could leave the new name pointing
  // at a file whose blocks never reached the disk.
  if (::fsync(fd) != 0)
    return abandon("cannot fsync");
  int closed = ::close(fd);
  fd = -1;
  // Network filesystems may report a failed write only at close.
  if (closed != 0)
    return abandon("cannot close");
  if (::rename(temporary.c_str(), path.c_str()) != 0)
    return abandon("cannot rename");
  // Persist the rename itself. Best effort: the file is complete and in place
  // either way, and some filesystems refuse fsync on a directory.
  int dir =
      ::open(directoryOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
  return "";
}

std::string shardc::rt::tryCheckWritable(const std::string &output) {
  if (output.empty())
    return "the file name is empty";
  // Where the write goes: through a symlink, beside the file it names.
  std::string path;
  if (std::string bad = followLinks(output, path); !bad.empty())
    return bad;
  std::string dir = directoryOf(path);
  struct stat info;
  if (::stat(dir.c_str(), &info) != 0)
    return errno == ENOENT ? path + ": no directory " + dir
                           : path + ": cannot use directory " + dir + ": " +
                                 strerror(errno);
  if (!S_ISDIR(info.st_mode))
    return path + ": " + dir + " is not a directory";
  if (std::string bad = notReplaceable(path); !bad.empty())
    return bad;
  // The write's own temporary, made and removed: access() says yes to root
  // where creating fails (/proc, /sys, a root-squashed NFS mount).
  std::string probe;
  int fd = createTemporary(path, probe);
  if (fd < 0)
    return path + ": cannot create files in directory " + dir + ": " +
           strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

std::string shardc::rt::tryWriteFileAtomic(const std::string &path,
                                           const std::string &contents) {
  return writeChunksAtomic(path, {{contents.data(), contents.size()}});
}

std::string shardc::rt::tryWriteSafeTensors(
    const std::string &path, const std::vector<NamedTensor> &tensors,
    const std::map<std::string, std::string> &metadata) {
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto &[key, value] : metadata) {
      json += (first ? "" : ",") + jsonQuote(key) + ":" + jsonQuote(value);
      first = false;
    }
    json += "}";
  }
  std::vector<Chunk> chunks(2);
  std::map<std::string, bool> seen;
  int64_t offset = 0;
  for (const NamedTensor &tensor : tensors) {
    std::string what = path + ": tensor '" + tensor.name + "'";
    if (tensor.name == "__metadata__" ||
        !seen.emplace(tensor.name, true).second)
      return what + " is written twice or shadows __metadata__";
    int64_t elementBytes = dtypeBytes(tensor.dtype);
    if (elementBytes == 0)
      return what + " has unknown dtype '" + tensor.dtype + "'";
    int64_t count = numElements(tensor.shape);
    int64_t bytes;
    if (count < 0 || __builtin_mul_overflow(count, elementBytes, &bytes))
      return what + " has a bad shape " + formatShape(tensor.shape);
    if (bytes > 0 && !tensor.data)
      return what + " has no data";
    json += (json.size() > 1 ? "," : "") + jsonQuote(tensor.name) +
            ":{\"dtype\":" + jsonQuote(tensor.dtype) + ",\"shape\":[";
    for (size_t i = 0; i < tensor.shape.size(); ++i)
      json += (i ? "," : "") + std::to_string(tensor.shape[i]);
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," +
            std::to_string(offset + bytes) + "]}";
    offset += bytes;
    if (bytes > 0)
      chunks.push_back({tensor.data, static_cast<size_t>(bytes)});
  }
  json += "}";
  // Pad so that the data starts 8-byte aligned, as the reference writer does:
  // readers that map the file can then use F64/I64 tensors in place.
  json.append((8 - json.size() % 8) % 8, ' ');
  uint64_t headerBytes = json.size();
  chunks[0] = {&headerBytes, 8};
  chunks[1] = {json.data(), json.size()};
  return writeChunksAtomic(path, chunks);
}

void shardc::rt::writeSafeTensors(
    const std::string &path, const std::vector<NamedTensor> &tensors,
    const std::map<std::string, std::string> &metadata) {
  std::string error = tryWriteSafeTensors(path, tensors, metadata);
  if (!error.empty())
    SHARDC_RT_FAIL("save", error);
}
