//===- Error.cpp - One way for the runtime to fail ------------------------===//

#include "shardc_rt/Error.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace shardc::rt {

/// MPI_COMM_WORLD's rank and size, or 0 and 1 outside MPI_Init/Finalize.
static std::pair<int, int> world() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return {0, 1};
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return {rank, size};
}

int worldRank() { return world().first; }

static int worldSize() { return world().second; }

static void print(const char *file, int line, const std::string &call,
                  const std::string &message) {
  // Runtime sources are reported relative to the repository.
  const char *shortFile = std::strstr(file, "runtime/");
  std::fprintf(stderr, "shardc: rank %d: %s: %s (%s:%d)\n", worldRank(),
               call.c_str(), message.c_str(), shortFile ? shortFile : file,
               line);
  std::fflush(stderr);
}

std::string countOf(int64_t n, const std::string &noun) {
  if (n == 1)
    return "1 " + noun;
  char last = noun.empty() ? ' ' : noun.back();
  bool es = last == 'h' || last == 's' || last == 'x'; // batches
  return std::to_string(n) + " " + noun + (es ? "es" : "s");
}

std::string printable(const std::string &text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
      continue;
    }
    char escaped[5];
    std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
    out += escaped;
  }
  return out;
}

void fatal(const char *file, int line, const std::string &call,
           const std::string &message) {
  print(file, line, call, message);
  if (worldSize() > 1)
    MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

void checkAll(bool ok, const char *file, int line, const std::string &call,
              const std::string &message) {
  int failed = ok ? 0 : 1, anyFailed = failed;
  if (worldSize() > 1)
    MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!anyFailed)
    return;
  if (failed)
    print(file, line, call, message);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized)
    MPI_Finalize();
  std::exit(1);
}

} // namespace shardc::rt
