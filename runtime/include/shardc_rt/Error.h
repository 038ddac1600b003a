//===- Error.h - One way for the runtime to fail ---------------*- C++ -*-===//
//
// Every failure reaches the user as one line naming the rank, the call that
// failed, what was wrong and where in the runtime it was detected:
//
//   shardc: rank 2: --init: 'layers.0.weight' has shape [4, 8], the model
//   wants [8, 8] (runtime/host/Init.cpp:120)
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_ERROR_H
#define SHARDC_RT_ERROR_H

#include <cstdint>
#include <string>

namespace shardc::rt {

/// Prints the message and ends the whole job: exit(1) in a single process,
/// MPI_Abort under mpirun so that no rank is left waiting in a collective.
/// Use it for errors one rank may meet alone (a write failed, a request
/// errored).
[[noreturn]] void fatal(const char *file, int line, const std::string &call,
                        const std::string &message);

/// "1 rank", "2 ranks", "2 batches": `n` and `noun`, in the plural but at 1
/// (for messages).
std::string countOf(int64_t n, const std::string &noun);

/// `text` (a name read from a file) on one line for a message: its control
/// characters, a NUL among them, as \xNN.
std::string printable(const std::string &text);

/// For checks every rank makes on the same facts (flags, files): each rank
/// that failed prints its message, then every rank exits 1. Collective: all
/// ranks must call it, with ok = true where nothing is wrong.
void checkAll(bool ok, const char *file, int line, const std::string &call,
              const std::string &message);

/// This process's rank in MPI_COMM_WORLD, or 0 before MPI is up.
int worldRank();

} // namespace shardc::rt

#define SHARDC_RT_FAIL(call, message)                                          \
  ::shardc::rt::fatal(__FILE__, __LINE__, (call), (message))
#define SHARDC_RT_CHECK(cond, call, message)                                   \
  do {                                                                         \
    if (!(cond))                                                               \
      SHARDC_RT_FAIL((call), (message));                                       \
  } while (0)
#define SHARDC_RT_CHECK_ALL(cond, call, message)                               \
  ::shardc::rt::checkAll((cond), __FILE__, __LINE__, (call), (message))

#endif // SHARDC_RT_ERROR_H
