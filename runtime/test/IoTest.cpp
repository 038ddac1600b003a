//===- IoTest.cpp - File formats, init, data and checkpoints --------------===//
//
// Runs as one process or under mpirun with any number of ranks:
//
//   iotest
//   mpirun -np 3 iotest
//
// Every rank runs every check in the same order; a check passes when it
// passes on every rank. Rank 0 prints one line per check and a final
// "iotest: N passed, M failed"; the exit status is non-zero on any failure.
// Failures that the runtime would make fatal are tested through the try*
// cores, which return the message instead of ending the process.
//
//===----------------------------------------------------------------------===//

#include "shardc_rt/Checkpoint.h"
#include "shardc_rt/Data.h"
#include "shardc_rt/Init.h"
#include "shardc_rt/SafeTensors.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <ftw.h>
#include <sstream>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace shardc::rt;

namespace {

int rank = 0;
int worldSize = 1;
int passed = 0;
int failed = 0;
/// A directory every rank sees, and one per rank under it.
std::string shared;
std::string scratch;

/// Records one check. Collective: it fails when it fails on any rank, and
/// the failing ranks say why on stderr.
void check(const std::string &name, bool ok, const std::string &detail = "") {
  if (!ok)
    fprintf(stderr, "iotest: rank %d: %s: %s\n", rank, name.c_str(),
            detail.c_str());
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  all ? ++passed : ++failed;
  if (rank == 0) {
    printf("%s %s\n", all ? "PASS" : "FAIL", name.c_str());
    fflush(stdout);
  }
}

/// Expects `error` to be non-empty and to contain `needle`; shows the
/// message, as the messages are part of what is being tested.
void checkError(const std::string &name, const std::string &error,
                const std::string &needle) {
  bool ok = !error.empty() && error.find(needle) != std::string::npos;
  check(name, ok,
        error.empty() ? "no error" : "error lacks '" + needle + "': " + error);
  if (ok && rank == 0)
    printf("     -> %s\n", error.c_str());
}

void checkOk(const std::string &name, const std::string &error) {
  check(name, error.empty(), error);
}

bool writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool exists(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

/// Names in `dir` that contain `part`.
std::vector<std::string> listing(const std::string &dir,
                                 const std::string &part) {
  std::vector<std::string> names;
  if (DIR *handle = opendir(dir.c_str())) {
    while (struct dirent *entry = readdir(handle))
      if (std::string(entry->d_name).find(part) != std::string::npos)
        names.push_back(entry->d_name);
    closedir(handle);
  }
  return names;
}

void removeTree(const std::string &dir) {
  nftw(
      dir.c_str(),
      [](const char *path, const struct stat *, int, struct FTW *) {
        return ::remove(path);
      },
      16, FTW_DEPTH | FTW_PHYS);
}

/// A safetensors file from a hand-written header.
std::string rawSafeTensors(const std::string &header, const std::string &data) {
  uint64_t length = header.size();
  std::string bytes(reinterpret_cast<const char *>(&length), 8);
  return bytes + header + data;
}

/// Splits [0, n) into `parts` uneven ranges (the first ones get the extra
/// elements, as FSDP's chunking does), some possibly empty.
std::vector<std::pair<int64_t, int64_t>> split(int64_t n, int parts) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t base = n / parts, extra = n % parts, begin = 0;
  for (int p = 0; p < parts; ++p) {
    int64_t size = base + (p < extra ? 1 : 0);
    ranges.push_back({begin, begin + size});
    begin += size;
  }
  return ranges;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         (a.empty() || memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

void testJson() {
  JsonValue value;
  std::string error = parseJson(
      " {\"a\": [1, -2.5e3, true, false, null], \"s\": \"x\\\"\\\\\\/\\n\\u00e9"
      "\\ud83d\\ude00\", \"o\": {}} ",
      value);
  int64_t one = 0;
  bool ok = error.empty() && value.kind == JsonValue::Kind::Object &&
            value.get("a") && value.get("a")->elements.size() == 5 &&
            value.get("a")->elements[0].getInt64(one) && one == 1 &&
            value.get("a")->elements[1].text == "-2.5e3" &&
            value.get("a")->elements[2].boolean &&
            value.get("s")->text == "x\"\\/\n\xc3\xa9\xf0\x9f\x98\x80" &&
            value.get("o")->kind == JsonValue::Kind::Object &&
            !value.get("missing");
  check("json: parses objects, arrays, literals, escapes and surrogates", ok,
        error);

  int64_t number = 0;
  JsonValue big;
  parseJson("9223372036854775807", big);
  bool max = big.getInt64(number) && number == INT64_MAX;
  parseJson("-9223372036854775808", big);
  bool min = big.getInt64(number) && number == INT64_MIN;
  parseJson("9223372036854775808", big);
  bool over = !big.getInt64(number);
  parseJson("1.0", big);
  bool fraction = !big.getInt64(number);
  parseJson("1e3", big);
  bool exponent = !big.getInt64(number);
  check("json: getInt64 is exact at the int64 limits, rejects 2^63, 1.0, 1e3",
        max && min && over && fraction && exponent);

  const std::pair<const char *, const char *> bad[] = {
      {"{\"a\": 1,}", "expected a string key"},
      {"[1, 2,]", "expected a JSON value"},
      {"{\"a\": 1, \"a\": 2}", "duplicate key 'a'"},
      {"01", "leading zero"},
      {"\"abc", "unterminated string"},
      {"\"\\ud800\"", "unpaired high surrogate"},
      {"\"\\udc00\"", "unpaired low surrogate"},
      {"\"a\tb\"", "raw control character"},
      {"\"\\x\"", "bad escape"},
      {"{} x", "after the JSON value"},
      {"", "found end of text"},
      {"tru", "expected 'true'"},
      {"-", "expected a digit"},
      {"1.", "expected a digit"},
      {"{\"a\" 1}", "expected ':'"},
  };
  for (const auto &[text, needle] : bad) {
    JsonValue ignored;
    checkError(std::string("json: rejects ") + jsonQuote(text),
               parseJson(text, ignored), needle);
  }
  JsonValue ignored;
  checkError("json: rejects nesting deeper than 64",
             parseJson(std::string(100, '[') + std::string(100, ']'), ignored),
             "nested deeper than 64");

  std::string odd = std::string("q\"b\\s\n\t\x01 \xc3\xa9", 12);
  JsonValue quoted;
  error = parseJson(jsonQuote(odd), quoted);
  check("json: jsonQuote round-trips quotes, backslashes, control bytes",
        error.empty() && quoted.text == odd, error);
}

//===----------------------------------------------------------------------===//
// safetensors
//===----------------------------------------------------------------------===//

void testSafeTensorsRoundTrip() {
  std::string path = scratch + "/round.safetensors";
  std::vector<float> weights = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f};
  std::vector<int64_t> ids = {1, -2, INT64_MAX, INT64_MIN};
  std::vector<uint16_t> halves = {0x3f80, 0x4000, 0xbf80};
  double scalar = 3.141592653589793;
  std::map<std::string, std::string> metadata = {{"step", "3"},
                                                 {"quote\"key", "line\nbreak"}};
  std::string error = tryWriteSafeTensors(path,
                                          {{"w", "F32", {2, 3}, weights.data()},
                                           {"ids", "I64", {4}, ids.data()},
                                           {"half", "BF16", {3}, halves.data()},
                                           {"empty", "U16", {0, 5}, nullptr},
                                           {"pi", "F64", {}, &scalar}},
                                          metadata);
  checkOk("safetensors: write", error);

  SafeTensorsFile file;
  error = SafeTensorsFile::tryOpen(path, "--init", file);
  checkOk("safetensors: reopen", error);
  if (!error.empty())
    return;
  const TensorView *w = file.find("w"), *i = file.find("ids"),
                   *h = file.find("half"), *e = file.find("empty"),
                   *p = file.find("pi");
  bool found = w && i && h && e && p && !file.find("nope");
  check("safetensors: every tensor found, names in order",
        found && file.names() == std::vector<std::string>{"w", "ids", "half",
                                                          "empty", "pi"});
  if (!found)
    return;
  check("safetensors: dtypes and shapes survive",
        w->dtype == "F32" && w->shape == std::vector<int64_t>{2, 3} &&
            i->dtype == "I64" && h->dtype == "BF16" &&
            e->shape == std::vector<int64_t>{0, 5} && e->bytes == 0 &&
            p->shape.empty() && p->bytes == 8);
  check("safetensors: bytes survive",
        memcmp(w->data, weights.data(), 24) == 0 &&
            memcmp(i->data, ids.data(), 32) == 0 &&
            memcmp(h->data, halves.data(), 6) == 0 &&
            memcmp(p->data, &scalar, 8) == 0);
  check("safetensors: metadata survives, quotes and newlines included",
        file.metadata() == metadata);
  std::string bytes = readFile(path);
  uint64_t headerBytes = 0;
  memcpy(&headerBytes, bytes.data(), 8);
  check("safetensors: header padded so the data starts 8-byte aligned",
        (8 + headerBytes) % 8 == 0);

  std::vector<float> all(6, 7.0f), part(2, 7.0f);
  checkOk("safetensors: tryReadF32 whole tensor",
          tryReadF32(file, "w", {2, 3}, 0, 6, all.data()));
  checkOk("safetensors: tryReadF32 range",
          tryReadF32(file, "w", {2, 3}, 3, 5, part.data()));
  check("safetensors: read values match", sameBits(all, weights) &&
                                              part[0] == weights[3] &&
                                              part[1] == weights[4]);
  checkError("safetensors: shape mismatch names file, tensor and both shapes",
             tryReadF32(file, "w", {3, 2}, 0, 6, all.data()),
             path + ": tensor 'w' has shape [2, 3], the model wants [3, 2]");
  checkError("safetensors: dtype mismatch",
             tryReadF32(file, "ids", {4}, 0, 4, all.data()),
             "tensor 'ids' has dtype I64, the model wants F32");
  checkError("safetensors: missing tensor lists what is there",
             tryReadF32(file, "wte", {2, 3}, 0, 6, all.data()),
             "no tensor 'wte' (the file holds 5 tensors: 'w', 'ids'");
  checkError("safetensors: range past the end",
             tryReadF32(file, "w", {2, 3}, 4, 7, all.data()),
             "elements [4, 7) of tensor 'w' requested, it has 6");
  checkError("safetensors: writer rejects duplicate names",
             tryWriteSafeTensors(scratch + "/dup.safetensors",
                                 {{"a", "F32", {1}, weights.data()},
                                  {"a", "F32", {1}, weights.data()}},
                                 {}),
             "tensor 'a' is written twice");
  checkError("safetensors: writer rejects unknown dtypes",
             tryWriteSafeTensors(scratch + "/dtype.safetensors",
                                 {{"a", "F31", {1}, weights.data()}}, {}),
             "unknown dtype 'F31'");
}

void testSafeTensorsCorrupt() {
  struct Case {
    const char *name;
    std::string bytes;
    const char *needle;
  };
  std::string f32x6(24, '\0');
  const Case cases[] = {
      {"empty file", "", "fewer than the 8-byte header length"},
      {"5-byte file", "abcde", "the file has 5 bytes"},
      {"header length past the end",
       rawSafeTensors("{}", "").replace(0, 1, "d") + "{}",
       "header length 100 is larger than the rest of the file (4 bytes)"},
      {"malformed JSON", rawSafeTensors("{\"w\": ", ""), "not valid JSON"},
      {"header not an object", rawSafeTensors("[1]", ""), "not a JSON object"},
      {"unknown dtype",
       rawSafeTensors("{\"w\":{\"dtype\":\"F31\",\"shape\":[6],"
                      "\"data_offsets\":[0,24]}}",
                      f32x6),
       "tensor 'w' has unknown dtype 'F31'"},
      {"offsets past the data",
       rawSafeTensors("{\"w\":{\"dtype\":\"F32\",\"shape\":[6],"
                      "\"data_offsets\":[0,24]}}",
                      f32x6.substr(0, 20)),
       "go past the end of the data (20 bytes)"},
      {"offsets not matching shape x dtype",
       rawSafeTensors("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                      "\"data_offsets\":[0,20]}}",
                      f32x6),
       "shape [2, 3] of F32 needs 24 bytes, data_offsets [0, 20] hold 20"},
      {"offsets reversed",
       rawSafeTensors("{\"w\":{\"dtype\":\"F32\",\"shape\":[0],"
                      "\"data_offsets\":[8,4]}}",
                      f32x6),
       "end before they begin"},
      {"overlapping tensors",
       rawSafeTensors("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],"
                      "\"data_offsets\":[0,16]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[4],"
                      "\"data_offsets\":[8,24]}}",
                      f32x6),
       "tensors 'a' and 'b' overlap"},
      {"missing data_offsets",
       rawSafeTensors("{\"w\":{\"dtype\":\"F32\",\"shape\":[6]}}", f32x6),
       "tensor 'w' lacks data_offsets"},
      {"unknown field",
       rawSafeTensors("{\"w\":{\"dtype\":\"F32\",\"shape\":[6],"
                      "\"data_offsets\":[0,24],\"x\":1}}",
                      f32x6),
       "unknown field 'x'"},
      {"negative dimension",
       rawSafeTensors("{\"w\":{\"dtype\":\"F32\",\"shape\":[-6],"
                      "\"data_offsets\":[0,24]}}",
                      f32x6),
       "shape is not a list of non-negative integers"},
      {"fractional offset",
       rawSafeTensors("{\"w\":{\"dtype\":\"F32\",\"shape\":[6],"
                      "\"data_offsets\":[0,24.0]}}",
                      f32x6),
       "data_offsets is not [begin, end]"},
      {"non-string metadata",
       rawSafeTensors("{\"__metadata__\":{\"step\":3}}", ""),
       "__metadata__ entry 'step' is not a string"},
      {"bytes before the first tensor",
       rawSafeTensors("{\"w\":{\"dtype\":\"F32\",\"shape\":[5],"
                      "\"data_offsets\":[4,24]}}",
                      f32x6),
       "bytes [0, 4) of the data belong to no tensor (before 'w')"},
      {"bytes between tensors",
       rawSafeTensors("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
                      "\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[3],"
                      "\"data_offsets\":[12,24]}}",
                      f32x6),
       "bytes [8, 12) of the data belong to no tensor (before 'b')"},
      {"bytes after the last tensor",
       rawSafeTensors("{\"w\":{\"dtype\":\"F32\",\"shape\":[5],"
                      "\"data_offsets\":[0,20]}}",
                      f32x6),
       "bytes [20, 24) at the end of the data belong to no tensor"},
      {"overflowing shape",
       rawSafeTensors("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,"
                      "4294967296],\"data_offsets\":[0,24]}}",
                      f32x6),
       "is too large"},
  };
  for (const Case &c : cases) {
    std::string path = scratch + "/corrupt.safetensors";
    writeFile(path, c.bytes);
    SafeTensorsFile file;
    std::string error = SafeTensorsFile::tryOpen(path, "--init", file);
    checkError(std::string("safetensors corrupt: ") + c.name, error, c.needle);
    check(std::string("safetensors corrupt: ") + c.name + ": names the file",
          error.rfind(path + ": ", 0) == 0, error);
  }

  // A real file cut short, as a crashed copy would leave it.
  std::string good = readFile(scratch + "/round.safetensors");
  std::string path = scratch + "/truncated.safetensors";
  writeFile(path, good.substr(0, good.size() - 4));
  SafeTensorsFile file;
  checkError("safetensors corrupt: a written file cut by 4 bytes",
             SafeTensorsFile::tryOpen(path, "--init", file), "truncated");
  checkError(
      "safetensors: missing file",
      SafeTensorsFile::tryOpen(scratch + "/absent.safetensors", "--init", file),
      "absent.safetensors: cannot open: No such file or directory");
  checkError("safetensors: a directory is not a file",
             SafeTensorsFile::tryOpen(scratch, "--init", file),
             "not a regular file");
  // Trailing spaces are how the reference writer pads headers.
  writeFile(path, rawSafeTensors("{}      ", ""));
  checkOk("safetensors: header padded with spaces is accepted",
          SafeTensorsFile::tryOpen(path, "--init", file));
  // Zero-size tensors hold no bytes, wherever their offsets say.
  writeFile(path, rawSafeTensors("{\"e\":{\"dtype\":\"F32\",\"shape\":[0],"
                                 "\"data_offsets\":[0,0]},"
                                 "\"w\":{\"dtype\":\"F32\",\"shape\":[6],"
                                 "\"data_offsets\":[0,24]},"
                                 "\"z\":{\"dtype\":\"BF16\",\"shape\":[2,0],"
                                 "\"data_offsets\":[24,24]}}",
                                 std::string(24, '\0')));
  checkOk("safetensors: zero-size tensors first and last are accepted",
          SafeTensorsFile::tryOpen(path, "--init", file));
}

void testAtomicWrite() {
  float values[4] = {1, 2, 3, 4};
  std::string missingDir = scratch + "/no/such/dir";
  std::string target = missingDir + "/x.safetensors";
  std::string error =
      tryWriteSafeTensors(target, {{"v", "F32", {4}, values}}, {});
  checkError("atomic write: missing directory is an error naming the path",
             error, target + ": cannot create");
  check("atomic write: nothing left behind when the directory is missing",
        !exists(target) && !exists(missingDir));

  std::string path = scratch + "/atomic.safetensors";
  checkOk("atomic write: first version",
          tryWriteSafeTensors(path, {{"v", "F32", {4}, values}}, {}));
  std::string before = readFile(path);

  // A write that fails half way (file size limit, standing in for a full
  // disk) must leave the old file untouched and no temporary file.
  std::vector<float> big(1 << 16, 5.0f);
  struct rlimit saved;
  getrlimit(RLIMIT_FSIZE, &saved);
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  signal(SIGXFSZ, SIG_IGN);
  setrlimit(RLIMIT_FSIZE, &small);
  error = tryWriteSafeTensors(path, {{"v", "F32", {1 << 16}, big.data()}}, {});
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, SIG_DFL);
  checkError("atomic write: a failed write is reported", error,
             "cannot write " + path + ".tmp.");
  check("atomic write: the old file survives a failed write",
        readFile(path) == before);
  check("atomic write: no temporary file survives a failed write",
        listing(scratch, ".tmp.").empty());

  float newer[4] = {5, 6, 7, 8};
  checkOk("atomic write: overwrite",
          tryWriteSafeTensors(path, {{"v", "F32", {4}, newer}}, {}));
  SafeTensorsFile file;
  std::vector<float> read(4);
  error = SafeTensorsFile::tryOpen(path, "", file);
  if (error.empty())
    error = tryReadF32(file, "v", {4}, 0, 4, read.data());
  check("atomic write: overwrite replaces the contents",
        error.empty() && read == std::vector<float>(newer, newer + 4), error);
  check("atomic write: no temporary files after success",
        listing(scratch, ".tmp.").empty());
}

//===----------------------------------------------------------------------===//
// Init and synthetic data
//===----------------------------------------------------------------------===//

void testInit() {
  const int64_t n = 1237;
  const std::pair<const char *, InitSpec> specs[] = {
      {"normal", {InitKind::Normal, 0.0, 0.02}},
      {"uniform", {InitKind::Uniform, -0.5, 0.25}},
      {"ones", {InitKind::Ones, 0, 0}},
      {"zeros", {InitKind::Zeros, 0, 0}},
  };
  for (const auto &[kind, spec] : specs) {
    std::vector<float> full(n);
    initRange(spec, 42, "layers.0.weight", 0, n, full.data());
    bool same = true;
    for (int parts = 1; parts <= 4; ++parts) {
      std::vector<float> assembled(n, NAN);
      for (auto [begin, end] : split(n, parts))
        initRange(spec, 42, "layers.0.weight", begin, end,
                  assembled.data() + begin);
      same &= sameBits(full, assembled);
    }
    check(std::string("init ") + kind +
              ": the full tensor is the same from 1, 2, 3 and 4 ranges",
          same);

    // Across ranks: each computes its own slice of a worldSize split.
    auto ranges = split(n, worldSize);
    auto [begin, end] = ranges[rank];
    std::vector<float> mine(end - begin);
    initRange(spec, 42, "layers.0.weight", begin, end, mine.data());
    std::vector<int> counts, displs;
    for (auto [b, e] : ranges) {
      counts.push_back(static_cast<int>(e - b));
      displs.push_back(static_cast<int>(b));
    }
    std::vector<float> gathered(n);
    MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_FLOAT,
                   gathered.data(), counts.data(), displs.data(), MPI_FLOAT,
                   MPI_COMM_WORLD);
    check(std::string("init ") + kind + ": slices computed on " +
              std::to_string(worldSize) + " ranks assemble to the same tensor",
          sameBits(full, gathered));
  }

  std::vector<float> ones(10), zeros(10);
  initRange({InitKind::Ones, 0, 0}, 1, "b", 0, 10, ones.data());
  initRange({InitKind::Zeros, 0, 0}, 1, "b", 0, 10, zeros.data());
  check("init: ones and zeros",
        std::all_of(ones.begin(), ones.end(), [](float v) { return v == 1; }) &&
            std::all_of(zeros.begin(), zeros.end(),
                        [](float v) { return v == 0 && !std::signbit(v); }));

  const int64_t count = 100000;
  std::vector<float> normal(count);
  initRange({InitKind::Normal, 0.5, 2.0}, 7, "wte", 0, count, normal.data());
  double sum = 0, squares = 0;
  for (float v : normal)
    sum += v;
  double mean = sum / count;
  for (float v : normal)
    squares += (v - mean) * (v - mean);
  double std = std::sqrt(squares / (count - 1));
  // Standard errors are 0.0063 (mean) and 0.0045 (std): 0.03 is ~5 sigma.
  char stats[96];
  snprintf(stats, sizeof(stats), "mean %.4f std %.4f", mean, std);
  check(std::string("init normal(0.5, 2) over 1e5 elements: ") + stats,
        std::fabs(mean - 0.5) < 0.03 && std::fabs(std - 2.0) < 0.03, stats);
  int64_t beyond3 = std::count_if(normal.begin(), normal.end(), [](float v) {
    return std::fabs(v - 0.5f) > 6.0f;
  });
  // P(|z| > 3) = 0.27%: 270 expected; a broken transform misses by far.
  check("init normal: tail mass beyond 3 sigma is about 0.27%",
        beyond3 > 170 && beyond3 < 370, std::to_string(beyond3));

  std::vector<float> uniform(count);
  initRange({InitKind::Uniform, -1.0, 3.0}, 7, "u", 0, count, uniform.data());
  double usum = 0;
  bool inside = true;
  for (float v : uniform) {
    usum += v;
    inside &= v >= -1.0f && v < 3.0f;
  }
  check("init uniform[-1, 3): within bounds, mean about 1",
        inside && std::fabs(usum / count - 1.0) < 0.03);

  std::vector<float> a(64), b(64), c(64), d(64);
  initRange({InitKind::Normal, 0, 1}, 1, "x", 0, 64, a.data());
  initRange({InitKind::Normal, 0, 1}, 2, "x", 0, 64, b.data());
  initRange({InitKind::Normal, 0, 1}, 1, "y", 0, 64, c.data());
  initRange({InitKind::Normal, 0, 1}, 1, "x", 0, 64, d.data());
  check("init: seed and name change the values, nothing else does",
        !sameBits(a, b) && !sameBits(a, c) && sameBits(a, d));

  // Pinned values: a change of generator changes every checkpoint and every
  // reference run, so it must be deliberate.
  check("init: FNV-1a test vectors",
        hashName("") == 0xcbf29ce484222325ULL &&
            hashName("a") == 0xaf63dc4c8601ec8cULL);
  float pinned[3];
  initRange({InitKind::Normal, 0, 1}, 1234, "w", 0, 3, pinned);
  char text[96];
  snprintf(text, sizeof(text), "%.9g %.9g %.9g", pinned[0], pinned[1],
           pinned[2]);
  check(std::string("init: pinned normal values (") + text + ")",
        std::string(text) == "-0.641264498 -1.30459428 -1.85952461", text);
}

void testSynthetic() {
  const int64_t n = 1000;
  std::vector<float> full(n);
  std::vector<int32_t> fullInts(n);
  syntheticFloats(9, "x", 3, 0, n, full.data());
  syntheticInts(9, "tokens", 3, 0, n, 7, fullInts.data());
  bool same = true;
  for (int parts = 1; parts <= 4; ++parts) {
    std::vector<float> floats(n);
    std::vector<int32_t> ints(n);
    for (auto [begin, end] : split(n, parts)) {
      syntheticFloats(9, "x", 3, begin, end, floats.data() + begin);
      syntheticInts(9, "tokens", 3, begin, end, 7, ints.data() + begin);
    }
    same &= sameBits(full, floats) && ints == fullInts;
  }
  check("synthetic: any split of the global batch gives the same data", same);
  std::vector<int> histogram(7, 0);
  bool inRange = true;
  for (int32_t v : fullInts) {
    inRange &= v >= 0 && v < 7;
    if (v >= 0 && v < 7)
      ++histogram[v];
  }
  check("synthetic ints: in [0, 7), every value drawn",
        inRange && *std::min_element(histogram.begin(), histogram.end()) > 90);
  std::vector<float> nextStep(n);
  syntheticFloats(9, "x", 4, 0, n, nextStep.data());
  std::vector<float> otherInput(n);
  syntheticFloats(9, "y", 3, 0, n, otherInput.data());
  check("synthetic: each step and input has its own data",
        !sameBits(full, nextStep) && !sameBits(full, otherInput));
  std::vector<float> param(n);
  initRange({InitKind::Normal, 0, 1}, 9, "x", 0, n, param.data());
  check("synthetic: an input and a parameter of one name differ",
        !sameBits(full, param));
}

//===----------------------------------------------------------------------===//
// Training data
//===----------------------------------------------------------------------===//

void testStepData() {
  std::string path = scratch + "/data.safetensors";
  // x: [3 steps, B = 4, 2] floats; y: [3, 4] I64; z: [3, 4] I32.
  std::vector<float> x(24);
  std::vector<int64_t> y(12), big(12, 1);
  std::vector<int32_t> z(12);
  for (int i = 0; i < 24; ++i)
    x[i] = static_cast<float>(i);
  for (int i = 0; i < 12; ++i) {
    y[i] = 100 + i;
    z[i] = 200 + i;
  }
  big[7] = int64_t(1) << 40;
  checkOk("data: write a step file",
          tryWriteSafeTensors(path,
                              {{"x", "F32", {3, 4, 2}, x.data()},
                               {"y", "I64", {3, 4}, y.data()},
                               {"z", "I32", {3, 4}, z.data()},
                               {"big", "I64", {3, 4}, big.data()}},
                              {}));
  StepData data;
  std::string error = StepData::tryOpen(path, "--data", data);
  checkOk("data: open", error);
  if (!error.empty())
    return;
  // Step 4 wraps to step 1; rows [1, 3) of 4.
  std::vector<float> floats(4, -1);
  error = data.tryReadFloats("x", {4, 2}, 4, 1, 3, floats.data());
  check("data: floats for step 4 (wraps to 1), rows [1, 3)",
        error.empty() && floats == std::vector<float>{10, 11, 12, 13}, error);
  std::vector<int32_t> ints(2, -1), narrow(2, -1);
  error = data.tryReadInts("z", {4}, 2, 2, 4, ints.data());
  std::string error2 = data.tryReadInts("y", {4}, 0, 0, 2, narrow.data());
  check("data: I32 and I64 integer inputs",
        error.empty() && error2.empty() &&
            ints == std::vector<int32_t>{210, 211} &&
            narrow == std::vector<int32_t>{100, 101},
        error + error2);
  checkError("data: missing input",
             data.tryReadFloats("q", {4, 2}, 0, 0, 4, floats.data()),
             "no tensor 'q'");
  checkError("data: wrong trailing shape",
             data.tryReadFloats("x", {4, 3}, 0, 0, 4, floats.data()),
             path + ": tensor 'x' has shape [3, 4, 2], input 'x' wants "
                    "[steps, 4, 3]");
  checkError("data: wrong dtype for a float input",
             data.tryReadFloats("y", {4}, 0, 0, 4, floats.data()),
             "tensor 'y' has dtype I64, float input 'y' wants F32");
  checkError("data: wrong dtype for an integer input",
             data.tryReadInts("x", {4, 2}, 0, 0, 4, ints.data()),
             "integer input 'x' wants I32 or I64");
  std::vector<int32_t> four(4);
  checkError("data: I64 beyond int32 is refused, not wrapped",
             data.tryReadInts("big", {4}, 1, 0, 4, four.data()),
             "tensor 'big' element 7 (step 1) is 1099511627776, outside int32");
  checkError("data: rows past the batch",
             data.tryReadFloats("x", {4, 2}, 0, 3, 5, floats.data()),
             "rows [3, 5) requested of a batch of 4");
}

std::string tokenFile(int32_t magic, int32_t version, int32_t declared,
                      const std::vector<uint16_t> &tokens) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = declared;
  std::string bytes(reinterpret_cast<const char *>(header.data()), 1024);
  bytes.append(reinterpret_cast<const char *>(tokens.data()),
               tokens.size() * 2);
  return bytes;
}

void testTokenData() {
  const int64_t numTokens = 100, T = 8, B = 4;
  std::vector<uint16_t> tokens(numTokens);
  for (int64_t i = 0; i < numTokens; ++i)
    tokens[i] = static_cast<uint16_t>(i % 50);
  std::string path = scratch + "/tokens.bin";
  writeFile(path, tokenFile(20240520, 1, numTokens, tokens));
  TokenData data;
  std::string error = TokenData::tryOpen(path, B, T, 50, "--data", data);
  checkOk("tokens: open", error);
  if (!error.empty())
    return;
  // (100 - 1) / (4 * 8): 3 batches, then the file starts over.
  bool ok = data.numTokens() == numTokens && data.batchesHeld(B) == 3;
  for (int64_t step = 0; step < 5; ++step) {
    std::vector<int32_t> x(B * T), y(B * T);
    data.read(step, B, 0, B, x.data(), y.data());
    for (int64_t b = 0; b < B; ++b) {
      int64_t start = ((step % 3) * B + b) * T;
      ok &= data.windowStart(step, B, b) == start;
      for (int64_t t = 0; t < T; ++t)
        ok &= x[b * T + t] == (start + t) % 50 &&
              y[b * T + t] == (start + t + 1) % 50;
    }
    // A rank holding rows [1, 3) sees the same rows.
    std::vector<int32_t> px(2 * T), py(2 * T);
    data.read(step, B, 1, 3, px.data(), py.data());
    ok &= std::equal(px.begin(), px.end(), x.begin() + T) &&
          std::equal(py.begin(), py.end(), y.begin() + T);
  }
  check("tokens: windows follow ((s mod P) * B + b) * T, targets shifted by "
        "one, any row range",
        ok);
  check("tokens: a huge step does not overflow",
        data.windowStart(int64_t(1) << 62, B, 3) >= 0 &&
            data.windowStart(int64_t(1) << 62, B, 3) + T < numTokens);

  checkOk("tokens: a vocabulary larger than uint16 (100277) is accepted",
          TokenData::tryOpen(path, B, T, 100277, "--data", data));

  // Exactly one batch, B * T + 1 tokens: every window read, the last one
  // ending at the last token, at every step.
  std::vector<uint16_t> one(B * T + 1);
  for (size_t i = 0; i < one.size(); ++i)
    one[i] = static_cast<uint16_t>(i % 50);
  writeFile(path, tokenFile(20240520, 1, B * T + 1, one));
  error = TokenData::tryOpen(path, B, T, 50, "--data", data);
  std::vector<int32_t> x(B * T), y(B * T);
  if (error.empty())
    data.read(5, B, 0, B, x.data(), y.data());
  check("tokens: exactly B * T + 1 tokens give one batch, its last window "
        "included",
        error.empty() && data.batchesHeld(B) == 1 &&
            data.windowStart(5, B, B - 1) == (B - 1) * T &&
            y.back() == one.back(),
        error);

  struct Case {
    const char *name;
    std::string bytes;
    int64_t batch, seqLen, vocab;
    const char *needle;
  };
  const Case cases[] = {
      {"bad magic", tokenFile(1234, 1, numTokens, tokens), B, T, 50,
       "magic number 1234, an llm.c token file has 20240520"},
      {"version 2", tokenFile(20240520, 2, numTokens, tokens), B, T, 50,
       "version 2, only version 1"},
      {"size does not match the header",
       tokenFile(20240520, 1, numTokens + 1, tokens), B, T, 50,
       "the header says 101 tokens (202 bytes), the file has 200 bytes"},
      {"short header", std::string(100, '\0'), B, T, 50,
       "fewer than the 1024-byte header"},
      {"fewer than one batch", tokenFile(20240520, 1, numTokens, tokens), 4, 25,
       50,
       "100 tokens, fewer than one batch of 4 rows of 25 tokens reads (4 x 25 "
       "+ 1 = 101)"},
      {"a batch past int64", tokenFile(20240520, 1, numTokens, tokens),
       int64_t(1) << 62, 8, 50, "reads (4611686018427387904 x 8 + 1)"},
      {"token beyond the vocabulary", tokenFile(20240520, 1, numTokens, tokens),
       B, T, 49, "token 49 at position 49 is not below the vocabulary size 49"},
  };
  for (const Case &c : cases) {
    writeFile(path, c.bytes);
    checkError(
        std::string("tokens: ") + c.name,
        TokenData::tryOpen(path, c.batch, c.seqLen, c.vocab, "--data", data),
        c.needle);
  }
}

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

struct TensorDef {
  std::string name;
  std::vector<int64_t> shape;
};

const std::vector<TensorDef> &modelTensors() {
  static const std::vector<TensorDef> defs = {
      {"layers.0.weight", {5, 7}},
      {"layers.0.weight.exp_avg", {5, 7}},
      {"layers.0.bias", {13}}, // Replicated: one rank writes it.
      {"scale", {}},           // A scalar.
      {"empty", {0, 3}},
  };
  return defs;
}

/// The full value of a tensor in save number `version`.
std::vector<float> fullValue(const TensorDef &def, uint64_t version) {
  std::vector<float> value(numElements(def.shape));
  initRange({InitKind::Normal, 0, 1}, version, def.name, 0,
            static_cast<int64_t>(value.size()), value.data());
  return value;
}

/// The pieces rank `r` of `size` saves: two uneven chunks of a 2 x size
/// split per sharded tensor; the bias replicated with only the last rank
/// writing it; the scalar on every rank, written by rank 0.
std::vector<Piece> savePieces(int r, int size, uint64_t version,
                              std::vector<std::vector<float>> &storage) {
  std::vector<Piece> pieces;
  for (const TensorDef &def : modelTensors()) {
    std::vector<float> full = fullValue(def, version);
    int64_t n = static_cast<int64_t>(full.size());
    std::vector<std::pair<int64_t, int64_t>> ranges;
    std::vector<bool> writes;
    if (def.name == "layers.0.bias" || def.name == "scale") {
      ranges.push_back({0, n});
      writes.push_back(def.name == "scale" ? r == 0 : r == size - 1);
    } else {
      auto chunks = split(n, 2 * size);
      ranges = {chunks[2 * r], chunks[2 * r + 1]};
      writes = {true, true};
    }
    for (size_t i = 0; i < ranges.size(); ++i) {
      auto [begin, end] = ranges[i];
      storage.emplace_back(full.begin() + begin, full.begin() + end);
      pieces.push_back(
          {def.name, def.shape, begin, end, storage.back().data(), writes[i]});
    }
  }
  return pieces;
}

/// Pieces cut differently from any save: the whole tensor, a 3-way split
/// and a range that skips both ends, each crossing saved piece boundaries.
std::vector<Piece> loadPieces(std::vector<std::vector<float>> &storage,
                              std::vector<std::vector<float>> &expected,
                              uint64_t version, int part, int parts) {
  std::vector<Piece> pieces;
  for (const TensorDef &def : modelTensors()) {
    std::vector<float> full = fullValue(def, version);
    int64_t n = static_cast<int64_t>(full.size());
    std::vector<std::pair<int64_t, int64_t>> ranges = {{0, n}};
    for (auto range : split(n, 3))
      ranges.push_back(range);
    if (n > 2)
      ranges.push_back({1, n - 1});
    ranges.push_back(split(n, parts)[part]);
    for (auto [begin, end] : ranges) {
      storage.emplace_back(end - begin, NAN);
      expected.emplace_back(full.begin() + begin, full.begin() + end);
      pieces.push_back(
          {def.name, def.shape, begin, end, storage.back().data(), true});
    }
  }
  return pieces;
}

bool allMatch(const std::vector<std::vector<float>> &storage,
              const std::vector<std::vector<float>> &expected) {
  for (size_t i = 0; i < storage.size(); ++i)
    if (!sameBits(storage[i], expected[i]))
      return false;
  return true;
}

void copyTree(const std::string &from, const std::string &to) {
  ::mkdir(to.c_str(), 0755);
  for (const std::string &name : listing(from, ""))
    if (name != "." && name != "..")
      writeFile(to + "/" + name, readFile(from + "/" + name));
}

/// The rank files dir/checkpoint.json lists, in its order ({} where it
/// cannot be read).
std::vector<std::string> rankFiles(const std::string &dir) {
  JsonValue manifest;
  std::vector<std::string> names;
  if (!parseJson(readFile(dir + "/checkpoint.json"), manifest).empty() ||
      !manifest.get("files"))
    return names;
  for (const JsonValue &file : manifest.get("files")->elements)
    if (const JsonValue *name = file.get("name"))
      names.push_back(name->text);
  return names;
}

void testCheckpoint() {
  std::string dir = shared + "/ckpt/nested";
  std::map<std::string, std::string> metadata = {
      {"step", "3"},
      {"strategy", "zero3"},
      {"world", std::to_string(worldSize)},
      {"layout", "flat"},
      {"model", "test"}};

  // Save with every rank.
  {
    std::vector<std::vector<float>> storage;
    saveCheckpoint(dir, MPI_COMM_WORLD, savePieces(rank, worldSize, 1, storage),
                   metadata);
  }
  JsonValue manifest;
  std::string error = parseJson(readFile(dir + "/checkpoint.json"), manifest);
  std::vector<std::string> firstFiles = rankFiles(dir);
  bool files = error.empty() && firstFiles.size() == size_t(worldSize) &&
               listing(dir, "rank-").size() == size_t(worldSize);
  for (const std::string &name : firstFiles)
    files &= exists(dir + "/" + name);
  check("checkpoint: save with " + std::to_string(worldSize) +
            " ranks creates the directory, every rank file and "
            "checkpoint.json",
        files && listing(dir, ".tmp.").empty());
  int64_t savedWorld = 0;
  check("checkpoint: checkpoint.json records world, tensors and files",
        error.empty() && manifest.get("world") &&
            manifest.get("world")->getInt64(savedWorld) &&
            savedWorld == worldSize &&
            manifest.get("tensors")->members.size() == modelTensors().size() &&
            manifest.get("files")->elements.size() ==
                static_cast<size_t>(worldSize),
        error);

  // Load on every rank with pieces cut differently.
  {
    std::vector<std::vector<float>> storage, expected;
    std::vector<Piece> pieces =
        loadPieces(storage, expected, 1, rank, worldSize);
    std::map<std::string, std::string> loaded =
        loadCheckpoint(dir, MPI_COMM_WORLD, pieces);
    check("checkpoint: load with pieces crossing the saved boundaries gives "
          "identical values",
          allMatch(storage, expected));
    check("checkpoint: load returns the metadata", loaded == metadata);
  }

  // A smaller world: ranks 0 and 1 load as a 2-rank job (zero3 on W ranks
  // to zero2 on 2), then save from that 2-rank job for everyone to load.
  MPI_Comm pair;
  int inPair = rank < 2 ? 1 : 0;
  MPI_Comm_split(MPI_COMM_WORLD, inPair, rank, &pair);
  int pairRank, pairSize;
  MPI_Comm_rank(pair, &pairRank);
  MPI_Comm_size(pair, &pairSize);
  {
    std::vector<std::vector<float>> storage, expected;
    std::vector<Piece> pieces =
        loadPieces(storage, expected, 1, pairRank, pairSize);
    loadCheckpoint(dir, pair, pieces);
    check("checkpoint: load on a " + std::to_string(pairSize) +
              "-rank communicator",
          allMatch(storage, expected));
  }
  // Left by saves killed before their commit: removed by the next one; a
  // file of another name is not.
  if (rank == 0) {
    writeFile(dir + "/rank-7.0123456789abcdef.safetensors", "orphan");
    writeFile(dir + "/rank-7.0123456789abcdef.safetensors.tmp.Ab3xYz",
              "orphan");
    writeFile(dir + "/rank-7.notes", "kept");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  {
    std::vector<std::vector<float>> storage;
    if (inPair)
      saveCheckpoint(dir, pair, savePieces(pairRank, pairSize, 2, storage),
                     {{"step", "4"}});
  }
  MPI_Barrier(MPI_COMM_WORLD);
  {
    std::vector<std::vector<float>> storage, expected;
    std::vector<Piece> pieces =
        loadPieces(storage, expected, 2, rank, worldSize);
    std::map<std::string, std::string> loaded =
        loadCheckpoint(dir, MPI_COMM_WORLD, pieces);
    check("checkpoint: overwritten by a " +
              std::to_string(std::min(2, worldSize)) +
              "-rank save, loaded on " + std::to_string(worldSize),
          allMatch(storage, expected) && loaded.at("step") == "4");
  }
  bool replaced =
      listing(dir, ".safetensors").size() == size_t(std::min(2, worldSize));
  for (const std::string &name : firstFiles)
    replaced &= !exists(dir + "/" + name);
  check("checkpoint: the overwriting save removed the first save's rank files",
        replaced);
  check("checkpoint: and those of a killed save, but not other files",
        !exists(dir + "/rank-7.0123456789abcdef.safetensors") &&
            !exists(dir + "/rank-7.0123456789abcdef.safetensors.tmp.Ab3xYz") &&
            exists(dir + "/rank-7.notes"));
  MPI_Comm_free(&pair);

  // Failures, each on a private copy.
  std::string copy = scratch + "/ckpt";
  copyTree(dir, copy);
  std::vector<float> buffer(64);
  std::map<std::string, std::string> ignored;
  auto load = [&](const std::string &tensor, std::vector<int64_t> shape,
                  int64_t begin, int64_t end, const std::string &from) {
    return tryLoadCheckpoint(
        from, {{tensor, shape, begin, end, buffer.data(), true}}, ignored);
  };
  checkOk("checkpoint: the copy loads",
          load("layers.0.weight", {5, 7}, 0, 35, copy));
  std::vector<float> saved(buffer.begin(), buffer.begin() + 35);
  CheckpointHeader header;
  checkOk("checkpoint: its header reads",
          tryReadCheckpointHeader(copy, header));
  std::vector<Piece> whole{{"layers.0.weight", {5, 7}, 0, 35, buffer.data()}};
  checkError("checkpoint: missing tensor",
             load("layers.1.weight", {5, 7}, 0, 35, copy),
             "tensor 'layers.1.weight' is not in the checkpoint");
  checkError("checkpoint: full shape differs",
             load("layers.0.weight", {7, 5}, 0, 35, copy),
             "tensor 'layers.0.weight' has shape [5, 7] in the checkpoint, "
             "the model wants [7, 5]");
  checkError("checkpoint: range beyond the tensor",
             load("layers.0.weight", {5, 7}, 30, 40, copy),
             "range [30, 40) requested of 35 elements");

  std::string manifestText = readFile(copy + "/checkpoint.json");
  std::string idField = "\"id\": \"";
  size_t at = manifestText.find(idField) + idField.size();
  std::string otherId = manifestText;
  otherId[at] = otherId[at] == '0' ? '1' : '0';
  writeFile(copy + "/checkpoint.json", otherId);
  checkError("checkpoint: checkpoint.json's own CRC-32 catches a changed id",
             load("layers.0.weight", {5, 7}, 0, 35, copy),
             "its \"crc32\" says");
  // Edited on purpose: without its last member, "crc32".
  size_t crc = otherId.rfind(",\n  \"crc32\"");
  writeFile(copy + "/checkpoint.json", otherId.substr(0, crc) + "\n}\n");
  checkError("checkpoint: a rank file from another save",
             load("layers.0.weight", {5, 7}, 0, 35, copy),
             "belongs to another save");
  writeFile(copy + "/checkpoint.json", "{\"format\": ");
  checkError("checkpoint: corrupt checkpoint.json",
             load("layers.0.weight", {5, 7}, 0, 35, copy), "not valid JSON");
  // checkpoint.json is read once: a load after its header needs it no more,
  // so a save committed in between is never mixed in.
  std::fill(buffer.begin(), buffer.end(), 0.0f);
  checkOk("checkpoint: the header's save loads without checkpoint.json",
          tryLoadCheckpoint(header, whole));
  check("checkpoint: and gives what the directory's load gave",
        std::equal(saved.begin(), saved.end(), buffer.begin()));
  writeFile(copy + "/checkpoint.json", manifestText);

  std::string rank0Name = rankFiles(copy).at(0);
  std::string rank0Path = copy + "/" + rank0Name;
  std::string rank0 = readFile(rank0Path);
  writeFile(rank0Path, rank0.substr(0, rank0.size() - 8));
  checkError("checkpoint: truncated rank file",
             load("layers.0.weight", {5, 7}, 0, 35, copy), "truncated");
  std::string garbled = rank0;
  garbled[8] = '[';
  writeFile(rank0Path, garbled);
  checkError("checkpoint: corrupt rank file header",
             load("layers.0.weight", {5, 7}, 0, 35, copy),
             rank0Name + ": header is not valid JSON");
  ::unlink(rank0Path.c_str());
  checkError("checkpoint: missing rank file",
             load("layers.0.weight", {5, 7}, 0, 35, copy),
             rank0Name + ": cannot open");
  ::unlink((copy + "/checkpoint.json").c_str());
  checkError("checkpoint: a directory without checkpoint.json",
             load("layers.0.weight", {5, 7}, 0, 35, copy),
             "no checkpoint.json, so not a checkpoint");

  // A hand-made checkpoint with a hole at [4, 6) and replicas overlapping
  // at [7, 9).
  std::string holes = scratch + "/holes";
  ::mkdir(holes.c_str(), 0755);
  std::vector<float> t(10);
  for (int i = 0; i < 10; ++i)
    t[i] = static_cast<float>(i);
  std::map<std::string, std::string> meta0 = {
      {"format", "shardc-checkpoint-shard"}, {"id", "abc"}, {"rank", "0"}};
  std::map<std::string, std::string> meta1 = meta0;
  meta1["rank"] = "1";
  tryWriteSafeTensors(
      holes + "/rank-0.safetensors",
      {{"t@0:4", "F32", {4}, t.data()}, {"t@6:9", "F32", {3}, t.data() + 6}},
      meta0);
  tryWriteSafeTensors(holes + "/rank-1.safetensors",
                      {{"t@7:10", "F32", {3}, t.data() + 7}}, meta1);
  auto size = [&](const char *name) {
    struct stat info;
    ::stat((holes + "/" + name).c_str(), &info);
    return std::to_string(info.st_size);
  };
  writeFile(holes + "/checkpoint.json",
            "{\"format\": \"shardc-checkpoint\", \"version\": 1, \"id\": "
            "\"abc\", \"world\": 2, \"metadata\": {}, \"tensors\": {\"t\": "
            "{\"dtype\": \"F32\", \"shape\": [10]}}, \"files\": [{\"name\": "
            "\"rank-0.safetensors\", \"rank\": 0, \"bytes\": " +
                size("rank-0.safetensors") +
                ", \"pieces\": [[\"t\", 0, 4], [\"t\", 6, 9]]}, {\"name\": "
                "\"rank-1.safetensors\", \"rank\": 1, \"bytes\": " +
                size("rank-1.safetensors") +
                ", \"pieces\": [[\"t\", 7, 10]]}]}");
  checkError("checkpoint: a range no file covers",
             load("t", {10}, 0, 10, holes),
             "elements [4, 6) of tensor 't' are in no file of the checkpoint");
  checkError("checkpoint: a range starting inside the hole",
             load("t", {10}, 5, 8, holes), "elements [5, 6) of tensor 't'");
  std::fill(buffer.begin(), buffer.end(), NAN);
  error = load("t", {10}, 6, 10, holes);
  check("checkpoint: overlapping replicas across files load",
        error.empty() && buffer[0] == 6 && buffer[1] == 7 && buffer[2] == 8 &&
            buffer[3] == 9,
        error);
  std::fill(buffer.begin(), buffer.end(), NAN);
  error = load("t", {10}, 2, 4, holes);
  check("checkpoint: a range inside one file piece",
        error.empty() && buffer[0] == 2 && buffer[1] == 3, error);
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);

  char base[64] = "/tmp/iotest-XXXXXX";
  if (rank == 0 && !mkdtemp(base)) {
    perror("iotest: mkdtemp");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Bcast(base, sizeof(base), MPI_CHAR, 0, MPI_COMM_WORLD);
  shared = base;
  scratch = shared + "/scratch-" + std::to_string(rank);
  ::mkdir(scratch.c_str(), 0755);

  testJson();
  testSafeTensorsRoundTrip();
  testSafeTensorsCorrupt();
  testAtomicWrite();
  testInit();
  testSynthetic();
  testStepData();
  testTokenData();
  testCheckpoint();

  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    removeTree(shared);
    printf("iotest: %d passed, %d failed\n", passed, failed);
  }
  MPI_Finalize();
  return failed ? 1 : 0;
}
