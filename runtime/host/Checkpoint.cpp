//===- Checkpoint.cpp - Sharded checkpoints that reshard on load ----------===//

#include "shardc_rt/Checkpoint.h"

#include "shardc_rt/Error.h"
#include "shardc_rt/SafeTensors.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <optional>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

using namespace shardc::rt;

namespace {

const char *const manifestName = "checkpoint.json";
const char *const manifestFormat = "shardc-checkpoint";
const char *const shardFormat = "shardc-checkpoint-shard";
/// Version 2 adds each stored piece's CRC-32; version 1 (no checksums)
/// still loads.
constexpr int64_t manifestVersion = 2;
/// checkpoint.json's last member, the CRC-32 of its bytes before the comma
/// that precedes it: a flipped digit in a step or a range is an error, not
/// a resumed run at another step. Optional, so that a hand-edited
/// checkpoint.json loads with its line removed (a reader before it ignores
/// it).
const char *const manifestCrcKey = "\"crc32\"";

/// CRC-32 (IEEE 802.3, zlib's) of `bytes` bytes at `data`.
uint32_t crc32(const void *data, size_t bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  const auto *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < bytes; ++i)
    crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

std::string hex32(uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", value);
  return text;
}

/// `value` as hex32 wrote it (8 hex digits, in a JSON string).
bool parseHex32(const JsonValue &value, uint32_t &crc) {
  const std::string &text = value.text;
  if (value.kind != JsonValue::Kind::String || text.size() != 8 ||
      text.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    return false;
  crc = static_cast<uint32_t>(std::strtoul(text.c_str(), nullptr, 16));
  return true;
}

/// A save's rank file: its id in the name, so that a save writes beside
/// the checkpoint it replaces, never over it.
std::string rankFileName(int rank, const std::string &id) {
  return "rank-" + std::to_string(rank) + "." + id + ".safetensors";
}

/// What a rank file's name says: rank-<r>.<id>.safetensors, or
/// rank-<r>.safetensors (the names before ids, id ""), or a save's
/// temporary rank-<r>.<id>.safetensors.tmp.<letters or digits>
/// (tryWriteSafeTensors's); nullopt for other names.
struct RankFileName {
  std::string id;
  bool temporary = false;
};
std::optional<RankFileName> parseRankFileName(const std::string &name) {
  auto all = [](const std::string &text, const char *chars) {
    return !text.empty() && text.find_first_not_of(chars) == std::string::npos;
  };
  const std::string prefix = "rank-", suffix = ".safetensors";
  if (name.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  RankFileName parsed;
  size_t end = name.rfind(suffix);
  if (end == std::string::npos)
    return std::nullopt;
  std::string after = name.substr(end + suffix.size());
  if (!after.empty()) {
    if (after.compare(0, 5, ".tmp.") != 0 ||
        !all(after.substr(5), "0123456789abcdefghijklmnopqrstuvwxyz"
                              "ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
      return std::nullopt;
    parsed.temporary = true;
  }
  std::string middle = name.substr(prefix.size(), end - prefix.size());
  size_t dot = middle.find('.');
  if (!all(middle.substr(0, dot), "0123456789"))
    return std::nullopt;
  if (dot != std::string::npos) {
    parsed.id = middle.substr(dot + 1);
    if (!all(parsed.id, "0123456789abcdef"))
      return std::nullopt;
  }
  return parsed;
}

/// Whether `name` is a rank file of some save (not a temporary one).
bool isRankFileName(const std::string &name) {
  std::optional<RankFileName> parsed = parseRankFileName(name);
  return parsed && !parsed->temporary;
}

/// The rank files dir/checkpoint.json lists ({} where there is none, or it
/// cannot be read).
std::vector<std::string> listedRankFiles(const std::string &dir);

} // namespace

bool shardc::rt::isCheckpointFileName(const std::string &name) {
  return name == manifestName || isRankFileName(name);
}

std::string shardc::rt::tryRemoveCheckpoint(const std::string &dir) {
  std::string manifest = dir + "/" + manifestName;
  if (::unlink(manifest.c_str()) != 0 && errno != ENOENT)
    return manifest + ": cannot remove: " + std::strerror(errno);
  DIR *listing = ::opendir(dir.c_str());
  if (!listing)
    return dir + ": cannot list: " + std::strerror(errno);
  std::vector<std::string> names, others;
  while (const dirent *entry = ::readdir(listing)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..")
      continue;
    // Rank files, and temporary ones of a save killed before its commit.
    (parseRankFileName(name) ? names : others).push_back(name);
  }
  ::closedir(listing);
  for (const std::string &name : names)
    if (::unlink((dir + "/" + name).c_str()) != 0)
      return dir + "/" + name + ": cannot remove: " + std::strerror(errno);
  if (!others.empty())
    return dir +
           ": checkpoint removed; the directory stays, holding files "
           "of no checkpoint ('" +
           others.front() + "')";
  if (::rmdir(dir.c_str()) != 0)
    return dir + ": cannot remove: " + std::strerror(errno);
  return "";
}

namespace {

/// After save `id` committed: removes the rank files of the checkpoint it
/// replaced (`replaced`, as that checkpoint.json listed them) and those of
/// saves that were killed before their commit (a fresh id's rank files and
/// temporary files: one save at a time writes to a directory). Best effort:
/// what stays is clutter, never read.
void removeStaleRankFiles(const std::string &dir, const std::string &id,
                          const std::vector<std::string> &replaced) {
  std::vector<std::string> stale;
  for (const std::string &name : replaced) {
    std::optional<RankFileName> parsed = parseRankFileName(name);
    if (parsed && parsed->id != id)
      stale.push_back(name);
  }
  if (DIR *listing = ::opendir(dir.c_str())) {
    while (const dirent *entry = ::readdir(listing)) {
      std::optional<RankFileName> parsed = parseRankFileName(entry->d_name);
      if (parsed && parsed->id.size() == id.size() && parsed->id != id)
        stale.push_back(entry->d_name);
    }
    ::closedir(listing);
  }
  for (const std::string &name : stale)
    ::unlink((dir + "/" + name).c_str());
}

/// The name of a stored range inside a rank file.
std::string pieceKey(const std::string &tensor, int64_t begin, int64_t end) {
  return tensor + "@" + std::to_string(begin) + ":" + std::to_string(end);
}

std::string rangeText(int64_t begin, int64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

/// mkdir -p: every rank may race to create the same directories, so EEXIST
/// is success; what matters is that a directory is there at the end.
std::string makeDirectories(const std::string &dir) {
  if (dir.empty())
    return "the checkpoint directory name is empty";
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    std::string prefix = dir.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return "cannot create directory " + prefix + ": " + strerror(errno);
    if (slash == std::string::npos)
      break;
  }
  struct stat info;
  if (::stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    return dir + " is not a directory";
  return "";
}

/// Fails every rank of `comm` when any rank passes ok = false; otherwise
/// returns on every rank. `file` and `line` are the caller's, through
/// AGREE, so that messages point at the step that failed.
void agree(MPI_Comm comm, bool ok, const char *file, int line,
           const std::string &call, const std::string &message) {
  int comparison = MPI_UNEQUAL;
  MPI_Comm_compare(comm, MPI_COMM_WORLD, &comparison);
  if (comparison == MPI_IDENT || comparison == MPI_CONGRUENT) {
    checkAll(ok, file, line, call, message);
    return;
  }
  // On a sub-communicator checkAll would wait for ranks outside it. Share
  // the first failed rank's message instead, so that whichever rank's fatal
  // error ends the job first, the real cause is what gets printed.
  int rank;
  MPI_Comm_rank(comm, &rank);
  int mine = ok ? INT_MAX : rank, first = INT_MAX;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == INT_MAX)
    return;
  int length = static_cast<int>(message.size());
  MPI_Bcast(&length, 1, MPI_INT, first, comm);
  std::string shared = rank == first ? message : std::string(length, ' ');
  MPI_Bcast(shared.data(), length, MPI_CHAR, first, comm);
  if (!ok)
    fatal(file, line, call, message);
  fatal(file, line, call,
        "rank " + std::to_string(first) +
            " of the communicator failed: " + shared);
}

#define AGREE(comm, ok, call, message)                                         \
  agree((comm), (ok), __FILE__, __LINE__, (call), (message))

/// The splitmix64 finalizer, to turn a clock and a pid into an id.
uint64_t fmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::string freshId() {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  uint64_t seed = static_cast<uint64_t>(now.tv_sec) * 1000000000ULL +
                  static_cast<uint64_t>(now.tv_nsec);
  char buffer[17];
  snprintf(buffer, sizeof(buffer), "%016llx",
           static_cast<unsigned long long>(
               fmix64(seed ^ (static_cast<uint64_t>(getpid()) << 40))));
  return buffer;
}

/// Rank-local checks on the pieces to save.
std::string checkPieces(const std::vector<Piece> &pieces) {
  std::map<std::string, const Piece *> shapes;
  std::map<std::string, bool> keys;
  for (const Piece &piece : pieces) {
    std::string what = "tensor '" + piece.tensor + "'";
    int64_t count = numElements(piece.fullShape);
    if (count < 0)
      return what + " has a bad shape " + formatShape(piece.fullShape);
    if (piece.begin < 0 || piece.begin > piece.end || piece.end > count)
      return what + ": range " + rangeText(piece.begin, piece.end) +
             " is not within its " + std::to_string(count) + " elements";
    if (piece.end > piece.begin && !piece.data)
      return what + ": range " + rangeText(piece.begin, piece.end) +
             " has no data";
    auto [it, inserted] = shapes.emplace(piece.tensor, &piece);
    if (!inserted && it->second->fullShape != piece.fullShape)
      return what + " has shape " + formatShape(it->second->fullShape) +
             " in one piece and " + formatShape(piece.fullShape) +
             " in another";
    if (piece.write && piece.end > piece.begin &&
        !keys.emplace(pieceKey(piece.tensor, piece.begin, piece.end), true)
             .second)
      return what + ": range " + rangeText(piece.begin, piece.end) +
             " is written twice by this rank";
  }
  return "";
}

/// This rank's part of checkpoint.json, sent to rank 0:
/// {"bytes": B, "pieces": [["<tensor>", begin, end, [shape], write, crc],
/// ...]}, crc the CRC-32 of the stored floats as 8 hex digits.
/// Pieces with write = false come along so that rank 0 sees a tensor that
/// nobody writes rather than silently leaving it out.
std::string describePieces(const std::vector<Piece> &pieces, int64_t bytes) {
  std::string out = "{\"bytes\":" + std::to_string(bytes) + ",\"pieces\":[";
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece &piece = pieces[i];
    out += (i ? ",[" : "[") + jsonQuote(piece.tensor) + "," +
           std::to_string(piece.begin) + "," + std::to_string(piece.end) + ",[";
    for (size_t d = 0; d < piece.fullShape.size(); ++d)
      out += (d ? "," : "") + std::to_string(piece.fullShape[d]);
    // An empty range stores nothing; it only tells rank 0 the tensor exists.
    bool stored = piece.write && piece.end > piece.begin;
    uint32_t crc = stored ? crc32(piece.data,
                                  static_cast<size_t>(piece.end - piece.begin) *
                                      sizeof(float))
                          : 0;
    out +=
        std::string("],") + (stored ? "1" : "0") + ",\"" + hex32(crc) + "\"]";
  }
  return out + "]}";
}

struct Range {
  int64_t begin, end;
};

/// Rank 0: checks the ranks' descriptions against each other and writes
/// checkpoint.json.
std::string writeManifest(const std::string &dir, const std::string &id,
                          const std::vector<std::string> &descriptions,
                          const std::map<std::string, std::string> &metadata) {
  struct TensorInfo {
    std::vector<int64_t> shape;
    int shapeRank = 0;
    std::vector<Range> written;
  };
  std::map<std::string, TensorInfo> tensors;
  std::string files;
  // The descriptions come from describePieces on every rank, so beyond a
  // parse check their structure is trusted.
  for (size_t rank = 0; rank < descriptions.size(); ++rank) {
    JsonValue root;
    std::string error = parseJson(descriptions[rank], root);
    int64_t bytes;
    const JsonValue *pieces = root.get("pieces");
    if (!error.empty() || !root.get("bytes") ||
        !root.get("bytes")->getInt64(bytes) || !pieces)
      return "garbled piece list from rank " + std::to_string(rank) + ": " +
             error;
    // The file where rank 0 sees it: ranks given different directories,
    // or one that is not shared between nodes, would otherwise commit a
    // checkpoint that cannot load.
    std::string file = rankFileName(static_cast<int>(rank), id);
    struct stat info;
    if (::stat((dir + "/" + file).c_str(), &info) != 0)
      return "rank " + std::to_string(rank) + " wrote " + file +
             ", which rank 0 does not find in " + dir +
             ": every rank must save to one directory that all of them see";
    if (info.st_size != bytes)
      return "rank " + std::to_string(rank) + " wrote " +
             std::to_string(bytes) + " bytes to " + file + ", rank 0 finds " +
             std::to_string(info.st_size) +
             ": a directory whose writes some ranks do not see yet";
    std::string filePieces;
    for (const JsonValue &entry : pieces->elements) {
      const std::string &name = entry.elements[0].text;
      int64_t begin, end, write;
      std::vector<int64_t> shape;
      entry.elements[1].getInt64(begin);
      entry.elements[2].getInt64(end);
      for (const JsonValue &dim : entry.elements[3].elements) {
        shape.push_back(0);
        dim.getInt64(shape.back());
      }
      entry.elements[4].getInt64(write);
      auto [it, inserted] = tensors.emplace(name, TensorInfo());
      if (inserted) {
        it->second.shape = shape;
        it->second.shapeRank = static_cast<int>(rank);
      } else if (it->second.shape != shape) {
        return "tensor '" + name + "' has shape " +
               formatShape(it->second.shape) + " on rank " +
               std::to_string(it->second.shapeRank) + " and " +
               formatShape(shape) + " on rank " + std::to_string(rank);
      }
      if (!write)
        continue;
      it->second.written.push_back({begin, end});
      filePieces += std::string(filePieces.empty() ? "" : ", ") + "[" +
                    jsonQuote(name) + ", " + std::to_string(begin) + ", " +
                    std::to_string(end) + ", " +
                    jsonQuote(entry.elements[5].text) + "]";
    }
    files += std::string(rank ? ",\n" : "") + "    {\"name\": " +
             jsonQuote(rankFileName(static_cast<int>(rank), id)) +
             ", \"rank\": " + std::to_string(rank) +
             ", \"bytes\": " + std::to_string(bytes) + ",\n     \"pieces\": [" +
             filePieces + "]}";
  }

  // A range that every holder marked write = false would be lost without a
  // word; refuse to call such a directory a checkpoint.
  std::string tensorList;
  for (auto &[name, info] : tensors) {
    std::sort(info.written.begin(), info.written.end(),
              [](Range a, Range b) { return a.begin < b.begin; });
    int64_t covered = 0, count = numElements(info.shape);
    for (Range range : info.written) {
      if (range.begin > covered)
        break;
      covered = std::max(covered, range.end);
    }
    if (covered < count) {
      int64_t gapEnd = count;
      for (Range range : info.written)
        if (range.begin > covered) {
          gapEnd = range.begin;
          break;
        }
      return "elements " + rangeText(covered, gapEnd) + " of tensor '" + name +
             "' are written by no rank (every piece holding them has write "
             "= false)";
    }
    tensorList += std::string(tensorList.empty() ? "" : ",\n") + "    " +
                  jsonQuote(name) + ": {\"dtype\": \"F32\", \"shape\": [";
    for (size_t d = 0; d < info.shape.size(); ++d)
      tensorList += (d ? ", " : "") + std::to_string(info.shape[d]);
    tensorList += "]}";
  }

  std::string metadataList;
  for (const auto &[key, value] : metadata)
    metadataList += std::string(metadataList.empty() ? "" : ",\n") + "    " +
                    jsonQuote(key) + ": " + jsonQuote(value);

  std::string text =
      std::string("{\n  \"format\": ") + jsonQuote(manifestFormat) +
      ",\n  \"version\": " + std::to_string(manifestVersion) +
      ",\n  \"id\": " + jsonQuote(id) +
      ",\n  \"world\": " + std::to_string(descriptions.size()) +
      ",\n  \"metadata\": {\n" + metadataList + "\n  },\n  \"tensors\": {\n" +
      tensorList + "\n  },\n  \"files\": [\n" + files + "\n  ]";
  text += ",\n  " + std::string(manifestCrcKey) + ": \"" +
          hex32(crc32(text.data(), text.size())) + "\"\n}\n";
  return tryWriteFileAtomic(dir + "/" + manifestName, text);
}

} // namespace

void shardc::rt::saveCheckpoint(
    const std::string &dir, MPI_Comm world, const std::vector<Piece> &pieces,
    const std::map<std::string, std::string> &metadata) {
  const std::string call = "checkpoint save";
  const std::string where = "checkpoint " + dir + ": ";
  int rank, size;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);

  // 1. Check the pieces and make the directory; a bad piece list must not
  // cost an existing checkpoint.
  // Whether `dir` was there before any rank made it: a failed save removes
  // one it made (rank 0 looks before the others may create it; each other
  // rank looks too, for a directory of its own where it was given another).
  struct stat before;
  int existed = rank == 0 && ::stat(dir.c_str(), &before) == 0;
  MPI_Bcast(&existed, 1, MPI_INT, 0, world);
  if (rank != 0)
    existed = ::stat(dir.c_str(), &before) == 0;
  std::string error = checkPieces(pieces);
  if (error.empty())
    error = makeDirectories(dir);
  AGREE(world, error.empty(), call, where + error);

  char id[17] = {0};
  if (rank == 0)
    snprintf(id, sizeof(id), "%s", freshId().c_str());
  MPI_Bcast(id, sizeof(id), MPI_CHAR, 0, world);

  // 2. Every rank writes its file, under a name of this save's: the
  // checkpoint in `dir` stays whole until step 3 replaces checkpoint.json.
  std::vector<NamedTensor> tensors;
  for (const Piece &piece : pieces)
    if (piece.write && piece.end > piece.begin)
      tensors.push_back({pieceKey(piece.tensor, piece.begin, piece.end),
                         "F32",
                         {piece.end - piece.begin},
                         piece.data});
  std::string path = dir + "/" + rankFileName(rank, id);
  error = tryWriteSafeTensors(path, tensors,
                              {{"format", shardFormat},
                               {"id", id},
                               {"rank", std::to_string(rank)},
                               {"world", std::to_string(size)}});
  struct stat info = {};
  if (error.empty() && ::stat(path.c_str(), &info) != 0)
    error = path + ": cannot stat after writing: " + strerror(errno);
  // A failed save removes what it wrote, on every rank, and leaves `dir`
  // as it found it.
  auto abandonOnFailure = [&](const std::string &message) {
    int failed = error.empty() ? 0 : 1, anyFailed = 0;
    MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, world);
    if (anyFailed) {
      ::unlink(path.c_str());
      MPI_Barrier(world); // every rank's file is gone
      if (!existed)
        ::rmdir(dir.c_str()); // only where the save left it empty
    }
    AGREE(world, error.empty(), call, message);
  };
  abandonOnFailure(error);

  // 3. Rank 0 collects what each file holds and commits checkpoint.json in
  // one rename over the old one.
  std::string description =
      describePieces(pieces, static_cast<int64_t>(info.st_size));
  int length = static_cast<int>(description.size());
  std::vector<int> lengths(rank == 0 ? size : 0), offsets;
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, world);
  std::string all;
  if (rank == 0) {
    int64_t total = 0;
    for (int l : lengths) {
      offsets.push_back(static_cast<int>(total));
      total += l;
    }
    // MPI counts are ints; a piece list beyond 2 GiB is not a realistic model.
    SHARDC_RT_CHECK(total <= INT_MAX, call,
                    where + "piece lists too large to gather");
    all.resize(static_cast<size_t>(total));
  }
  MPI_Gatherv(description.data(), length, MPI_CHAR, all.data(), lengths.data(),
              offsets.data(), MPI_CHAR, 0, world);
  error.clear();
  std::vector<std::string> replaced; // rank 0: the old checkpoint's files
  if (rank == 0) {
    std::vector<std::string> descriptions;
    for (int r = 0; r < size; ++r)
      descriptions.push_back(all.substr(offsets[r], lengths[r]));
    replaced = listedRankFiles(dir);
    error = writeManifest(dir, id, descriptions, metadata);
  }
  abandonOnFailure(where + error);

  // 4. The replaced checkpoint's rank files, now unreferenced, and those
  // of saves killed before their commit. One left behind (a failed unlink)
  // is only clutter: loads follow checkpoint.json.
  if (rank == 0)
    removeStaleRankFiles(dir, id, replaced);
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

namespace {

struct ManifestFile {
  std::string name;
  int64_t rank = 0;
  int64_t bytes = 0;
};

/// Where a stored range lives, and its CRC-32 where the manifest has one.
struct Source {
  size_t file;
  int64_t begin, end;
  std::optional<uint32_t> crc;
};

} // namespace

struct shardc::rt::CheckpointManifest {
  std::string id;
  std::map<std::string, std::string> metadata;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::vector<ManifestFile> files;
  /// Per tensor, the stored ranges sorted by begin.
  std::map<std::string, std::vector<Source>> sources;
};

namespace {

using Manifest = CheckpointManifest;

std::string readManifest(const std::string &dir, Manifest &manifest) {
  std::string path = dir + "/" + manifestName;
  struct stat info;
  if (::stat(dir.c_str(), &info) != 0)
    return "checkpoint " + dir + ": cannot open: " + strerror(errno);
  if (::stat(path.c_str(), &info) != 0 && errno == ENOENT)
    return "checkpoint " + dir + ": no " + manifestName +
           ", so not a checkpoint (a save that did not finish leaves none)";
  MappedFile file;
  std::string error = MappedFile::tryMap(path, file);
  if (!error.empty())
    return error;
  std::string text(file.data(), file.size());
  JsonValue root;
  error = parseJson(text, root);
  if (!error.empty())
    return path + ": not valid JSON: " + error;
  auto corrupt = [&](const std::string &what) { return path + ": " + what; };
  if (const JsonValue *crc = root.get("crc32")) {
    // The bytes before the comma ahead of the last "crc32" key.
    uint32_t saved;
    size_t key = text.rfind(manifestCrcKey);
    size_t comma = text.find_last_not_of(" \t\r\n", key - 1);
    if (!parseHex32(*crc, saved) || root.members.back().first != "crc32" ||
        key == std::string::npos || comma == std::string::npos ||
        text[comma] != ',')
      return corrupt("expected \"crc32\" last, a string of 8 hex digits");
    uint32_t actual = crc32(text.data(), comma);
    if (actual != saved)
      return corrupt("its text has CRC-32 " + hex32(actual) +
                     ", its \"crc32\" says " + hex32(saved) +
                     ": the file is corrupt (a checkpoint.json edited on "
                     "purpose loads without its \"crc32\" line)");
  }
  const JsonValue *format = root.get("format");
  int64_t version = 0, world = 0;
  if (!format || format->text != manifestFormat)
    return corrupt("\"format\" is not \"" + std::string(manifestFormat) + "\"");
  if (!root.get("version") || !root.get("version")->getInt64(version) ||
      version < 1 || version > manifestVersion)
    return corrupt("unsupported \"version\" (this runtime reads 1 to " +
                   std::to_string(manifestVersion) + ")");
  const JsonValue *id = root.get("id");
  if (!id || id->kind != JsonValue::Kind::String)
    return corrupt("no \"id\" string");
  manifest.id = id->text;
  if (!root.get("world") || !root.get("world")->getInt64(world) || world < 1)
    return corrupt("no positive \"world\"");
  const JsonValue *metadata = root.get("metadata");
  if (!metadata || metadata->kind != JsonValue::Kind::Object)
    return corrupt("no \"metadata\" object");
  for (const auto &[key, value] : metadata->members) {
    if (value.kind != JsonValue::Kind::String)
      return corrupt("metadata '" + printable(key) + "' is not a string");
    manifest.metadata[key] = value.text;
  }
  const JsonValue *tensors = root.get("tensors");
  if (!tensors || tensors->kind != JsonValue::Kind::Object)
    return corrupt("no \"tensors\" object");
  for (const auto &[name, value] : tensors->members) {
    const JsonValue *dtype = value.get("dtype");
    const JsonValue *shape = value.get("shape");
    std::vector<int64_t> dims;
    if (!dtype || dtype->text != "F32" || !shape ||
        shape->kind != JsonValue::Kind::Array)
      return corrupt("tensor '" + printable(name) +
                     "' is not {\"dtype\": \"F32\", "
                     "\"shape\": [...]}");
    for (const JsonValue &dim : shape->elements) {
      dims.push_back(0);
      if (!dim.getInt64(dims.back()) || dims.back() < 0)
        return corrupt("tensor '" + printable(name) + "' has a bad shape");
    }
    if (numElements(dims) < 0)
      return corrupt("tensor '" + printable(name) + "' has a bad shape");
    manifest.shapes[name] = dims;
  }
  const JsonValue *files = root.get("files");
  if (!files || files->kind != JsonValue::Kind::Array)
    return corrupt("no \"files\" list");
  for (const JsonValue &entry : files->elements) {
    ManifestFile file;
    const JsonValue *name = entry.get("name");
    const JsonValue *pieces = entry.get("pieces");
    // A name is a file of the checkpoint's directory: no path elsewhere
    // (../x, /etc/x), nor one cut short by a NUL.
    if (name && name->kind == JsonValue::Kind::String &&
        (name->text.empty() || name->text == "." || name->text == ".." ||
         name->text.find_first_of(std::string("/\0", 2)) != std::string::npos))
      return corrupt("a \"files\" entry's name '" + printable(name->text) +
                     "' is not a file name in the checkpoint's directory");
    if (!name || name->kind != JsonValue::Kind::String || !entry.get("rank") ||
        !entry.get("rank")->getInt64(file.rank) || !entry.get("bytes") ||
        !entry.get("bytes")->getInt64(file.bytes) || !pieces ||
        pieces->kind != JsonValue::Kind::Array)
      return corrupt("a \"files\" entry is not {\"name\", \"rank\", "
                     "\"bytes\", \"pieces\"}");
    file.name = name->text;
    // Version 1's pieces have no checksum.
    size_t fields = version == 1 ? 3 : 4;
    for (const JsonValue &piece : pieces->elements) {
      Source source{manifest.files.size(), 0, 0, std::nullopt};
      if (piece.kind != JsonValue::Kind::Array ||
          piece.elements.size() != fields ||
          piece.elements[0].kind != JsonValue::Kind::String ||
          !piece.elements[1].getInt64(source.begin) ||
          !piece.elements[2].getInt64(source.end))
        return corrupt(file.name + ": a piece is not [tensor, begin, end" +
                       (fields == 4 ? ", crc32]" : "]"));
      if (fields == 4) {
        uint32_t crc;
        if (!parseHex32(piece.elements[3], crc))
          return corrupt(file.name + ": a piece's crc32 is not 8 hex digits");
        source.crc = crc;
      }
      const std::string &tensor = piece.elements[0].text;
      auto shape = manifest.shapes.find(tensor);
      if (shape == manifest.shapes.end())
        return corrupt(file.name + " holds tensor '" + printable(tensor) +
                       "', which \"tensors\" does not list");
      if (source.begin < 0 || source.begin > source.end ||
          source.end > numElements(shape->second))
        return corrupt(file.name + ": range " +
                       rangeText(source.begin, source.end) + " of tensor '" +
                       tensor + "' is out of bounds");
      manifest.sources[tensor].push_back(source);
    }
    manifest.files.push_back(std::move(file));
  }
  // One file per rank of the world that saved it.
  if (static_cast<int64_t>(manifest.files.size()) != world)
    return corrupt("\"world\" is " + std::to_string(world) +
                   " but \"files\" lists " +
                   std::to_string(manifest.files.size()) + " rank files");
  std::vector<bool> seen(world, false);
  for (const ManifestFile &file : manifest.files) {
    if (file.rank < 0 || file.rank >= world || seen[file.rank])
      return corrupt(file.name + ": rank " + std::to_string(file.rank) +
                     " is outside [0, " + std::to_string(world) +
                     ") or listed twice");
    seen[file.rank] = true;
  }
  auto savedWorld = manifest.metadata.find("world");
  if (savedWorld != manifest.metadata.end() &&
      savedWorld->second != std::to_string(world))
    return corrupt("metadata \"world\" is " + savedWorld->second +
                   " but \"world\" is " + std::to_string(world));
  for (auto &[tensor, sources] : manifest.sources)
    std::sort(sources.begin(), sources.end(),
              [](const Source &a, const Source &b) {
                return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
              });
  return "";
}

std::vector<std::string> listedRankFiles(const std::string &dir) {
  Manifest manifest;
  std::vector<std::string> names;
  if (readManifest(dir, manifest).empty())
    for (const ManifestFile &file : manifest.files)
      names.push_back(file.name);
  return names;
}

/// Opens rank files on first use, so a rank reads only the files that hold
/// its ranges, and checks each against checkpoint.json.
class FileCache {
public:
  FileCache(const std::string &dir, const Manifest &manifest)
      : dir(dir), manifest(manifest) {}

  std::string get(size_t index, const SafeTensorsFile *&out) {
    auto it = open.find(index);
    if (it != open.end()) {
      out = &it->second;
      return "";
    }
    const ManifestFile &entry = manifest.files[index];
    std::string path = dir + "/" + entry.name;
    // The size first: it names the likely cause of a bad rank file, where a
    // header check would only find some tensor past the end.
    struct stat info;
    if (::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        info.st_size != entry.bytes)
      return path + ": " + std::to_string(info.st_size) +
             " bytes, checkpoint.json says " + std::to_string(entry.bytes) +
             ": truncated or replaced";
    SafeTensorsFile file;
    std::string error = SafeTensorsFile::tryOpen(path, "checkpoint load", file);
    if (!error.empty())
      return error;
    if (file.fileBytes() != entry.bytes)
      return path + ": " + std::to_string(file.fileBytes()) +
             " bytes, checkpoint.json says " + std::to_string(entry.bytes) +
             ": truncated or replaced";
    auto meta = file.metadata();
    if (meta["format"] != shardFormat || meta["id"] != manifest.id ||
        meta["rank"] != std::to_string(entry.rank))
      return path + ": belongs to another save (id '" + printable(meta["id"]) +
             "', rank '" + printable(meta["rank"]) +
             "'; checkpoint.json says id '" + printable(manifest.id) +
             "', rank " + std::to_string(entry.rank) + ")";
    out = &open.emplace(index, std::move(file)).first->second;
    return "";
  }

  /// Checks stored range `key` of `file` (opened by get) against its
  /// CRC-32 in checkpoint.json, once per range: a flipped bit on disk or in
  /// a copy otherwise loads as a silently different model.
  std::string verify(const Source &source, const std::string &key,
                     const SafeTensorsFile &file) {
    if (!source.crc || !verified.insert({source.file, key}).second)
      return "";
    uint32_t crc =
        crc32(file.find(key)->data,
              static_cast<size_t>(source.end - source.begin) * sizeof(float));
    if (crc == *source.crc)
      return "";
    return dir + "/" + manifest.files[source.file].name + ": piece '" + key +
           "' has CRC-32 " + hex32(crc) + ", checkpoint.json says " +
           hex32(*source.crc) + ": the file is corrupt";
  }

private:
  const std::string &dir;
  const Manifest &manifest;
  std::map<size_t, SafeTensorsFile> open;
  std::set<std::pair<size_t, std::string>> verified;
};

} // namespace

std::string shardc::rt::tryLoadCheckpoint(const CheckpointHeader &header,
                                          const std::vector<Piece> &pieces) {
  const std::string &dir = header.dir;
  const Manifest &manifest = *header.manifest;
  std::string where = "checkpoint " + dir + ": ";
  std::string error;
  FileCache cache(dir, manifest);
  for (const Piece &piece : pieces) {
    std::string what = "tensor '" + piece.tensor + "'";
    auto shape = manifest.shapes.find(piece.tensor);
    if (shape == manifest.shapes.end())
      return where + what + " is not in the checkpoint (it holds " +
             countOf(static_cast<int64_t>(manifest.shapes.size()), "tensor") +
             ")";
    if (shape->second != piece.fullShape)
      return where + what + " has shape " + formatShape(shape->second) +
             " in the checkpoint, the model wants " +
             formatShape(piece.fullShape);
    int64_t count = numElements(piece.fullShape);
    if (piece.begin < 0 || piece.begin > piece.end || piece.end > count)
      return where + what + ": range " + rangeText(piece.begin, piece.end) +
             " requested of " + std::to_string(count) + " elements";
    // Walk the stored ranges in order, copying each one's part of what is
    // still missing; a stored range that starts past that point is a hole.
    int64_t filled = piece.begin;
    static const std::vector<Source> none;
    auto stored = manifest.sources.find(piece.tensor);
    const auto &sources =
        stored == manifest.sources.end() ? none : stored->second;
    for (const Source &source : sources) {
      if (filled == piece.end)
        break;
      if (source.end <= filled)
        continue;
      if (source.begin > filled)
        break;
      const SafeTensorsFile *file = nullptr;
      error = cache.get(source.file, file);
      if (!error.empty())
        return error;
      std::string key = pieceKey(piece.tensor, source.begin, source.end);
      error = checkTensor(*file, key, "F32", {source.end - source.begin});
      if (!error.empty())
        return error + " (checkpoint.json lists it)";
      error = cache.verify(source, key, *file);
      if (!error.empty())
        return error;
      int64_t stop = std::min(piece.end, source.end);
      memcpy(piece.data + (filled - piece.begin),
             file->find(key)->data + (filled - source.begin) * 4,
             static_cast<size_t>(stop - filled) * 4);
      filled = stop;
    }
    if (filled < piece.end) {
      int64_t gapEnd = piece.end;
      for (const Source &source : sources)
        if (source.begin > filled) {
          gapEnd = std::min(gapEnd, source.begin);
          break;
        }
      return where + "elements " + rangeText(filled, gapEnd) + " of " + what +
             " are in no file of the checkpoint";
    }
  }
  return "";
}

std::string shardc::rt::tryReadCheckpointHeader(const std::string &dir,
                                                CheckpointHeader &header) {
  auto manifest = std::make_shared<Manifest>();
  std::string error = readManifest(dir, *manifest);
  if (!error.empty())
    return error;
  header.dir = dir;
  header.id = manifest->id;
  header.metadata = manifest->metadata;
  header.tensors.clear();
  for (const auto &shape : manifest->shapes)
    header.tensors.push_back(shape.first);
  header.manifest = std::move(manifest);
  return "";
}

std::string
shardc::rt::tryLoadCheckpoint(const std::string &dir,
                              const std::vector<Piece> &pieces,
                              std::map<std::string, std::string> &metadata) {
  CheckpointHeader header;
  std::string error = tryReadCheckpointHeader(dir, header);
  if (error.empty())
    error = tryLoadCheckpoint(header, pieces);
  if (error.empty())
    metadata = header.metadata;
  return error;
}

std::map<std::string, std::string>
shardc::rt::loadCheckpoint(const std::string &dir, MPI_Comm world,
                           const std::vector<Piece> &pieces) {
  std::map<std::string, std::string> metadata;
  std::string error = tryLoadCheckpoint(dir, pieces, metadata);
  AGREE(world, error.empty(), "checkpoint load", error);
  return metadata;
}

std::string shardc::rt::tryCheckCheckpointDir(const std::string &dir) {
  if (dir.empty())
    return "the checkpoint directory name is empty";
  // The nearest of `dir` and its parents that exists must be a directory in
  // which a directory can be made (a probe, made and removed: access() says
  // yes to root even on /proc).
  std::string existing = dir;
  struct stat info;
  while (::stat(existing.c_str(), &info) != 0) {
    if (errno != ENOENT && errno != ENOTDIR)
      return "cannot use " + existing + ": " + strerror(errno);
    existing = directoryOf(existing);
  }
  if (!S_ISDIR(info.st_mode))
    return existing + " is not a directory";
  // The manifest a save commits by renaming over it, found now rather than
  // after the steps it would save.
  std::string manifest = dir + "/" + manifestName;
  if (existing == dir && ::stat(manifest.c_str(), &info) == 0 &&
      !S_ISREG(info.st_mode))
    return manifest +
           " exists and is not a regular file (a directory, a pipe), "
           "which the save would replace";
  std::string probe =
      existing + "/.shardc-save-probe-" + std::to_string(::getpid());
  if (::mkdir(probe.c_str(), 0700) != 0) {
    if (errno == EEXIST)
      return "";
    return "cannot create directories in " + existing + ": " + strerror(errno);
  }
  ::rmdir(probe.c_str());
  return "";
}
