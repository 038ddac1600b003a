//===- Simulator.cpp - Blocks of fibers, barriers and shuffles ------------===//
//
// A launch runs its blocks one after another. A block's threads are fibers
// on stacks of their own, switched by a few instructions of x86-64 assembly
// (swapcontext costs a system call per switch): the scheduler starts or
// resumes each runnable thread in turn until it returns or waits, then
// releases the warps whose lanes all wait at the same warp operation, else
// the block when all its threads wait at __syncthreads, else reports the
// deadlock. A shuffle's result is computed at the release, from the values
// every lane passed in, before any lane resumes. Odd blocks run their
// threads in descending order, even blocks in ascending order
// (CUDASIM_REVERSE=1 swaps them, and runs the blocks last to first), so
// that a thread reading another's write without a barrier between them
// reads it too early in one of two blocks.
//
//===----------------------------------------------------------------------===//

#include "Simulator.h"
#include "Runtime.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <pthread.h>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#if !defined(__x86_64__)
#error "cudasim switches fibers in x86-64 assembly"
#endif

/// Saves the callee-saved registers on the running stack and its stack
/// pointer in *save, then continues on `to` (a stack saved the same way).
extern "C" void cudasim_switch(void **save, void *to);
asm(R"(
  .pushsection .text
  .globl cudasim_switch
  .type cudasim_switch, @function
cudasim_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cudasim_switch, .-cudasim_switch
  .popsection
)");

namespace cudasim {
namespace {

constexpr size_t kStackBytes = size_t(256) << 10;
/// Static shared memory of a block (a GPU's limit).
constexpr size_t kStaticSharedBytes = 48 << 10;
/// A launch running longer than this (seconds) is reported: a thread that
/// spins on another's write never ends here (threads run until they block).
constexpr unsigned kDefaultTimeout = 600;

/// Where a simulated thread is.
enum class State { NotStarted, Runnable, Waiting, Done };
/// What a waiting thread waits at.
enum class Wait { Block, Warp, Shuffle };

/// A cp.async whose bytes have not landed: read at issue, written at the
/// wait for its group.
struct PendingCopy {
  unsigned char *dst;
  unsigned char bytes[16];
  int size;
  uint64_t group;
};

struct SimThread {
  ThreadIndex index;
  int lane = 0, warp = 0;
  State state = State::NotStarted;
  Wait wait = Wait::Block;
  void *sp = nullptr;    // while suspended
  char *stack = nullptr; // while started and not done
  unsigned mask = 0;     // of a warp wait
  uint64_t bits = 0;     // a shuffle's value, then its result
  Shuffle kind = Shuffle::Index;
  int operand = 0, width = 32;
  std::vector<PendingCopy> copies; // cp.async's, oldest first
  uint64_t groups = 0;             // cp.async groups committed
};

/// The launch running (launches do not nest), its block's threads, and
/// the stacks and shared memory they reuse.
struct Engine {
  const Launch *launch = nullptr;
  void (*body)(void *) = nullptr;
  void *context = nullptr;
  std::vector<SimThread> threads;
  std::vector<uint32_t> fragments; // mmaSync's: a and b, 6 words per thread
  std::vector<const void *> matrixRows; // ldMatrix's: a row per thread
  SimThread *current = nullptr;
  void *schedulerSp = nullptr;
  bool reverse = false; // the running block's threads in descending order
  std::vector<char *> freeStacks;
  std::vector<char *> stackBatches;   // each kStackBatch stacks, for faults
  unsigned char *sharedEnd = nullptr; // a guard page follows
  unsigned char *shared = nullptr;
  std::vector<const void *> staticShared; // filled in the running block
  size_t staticBytes = 0;
  std::string error;
  pthread_t owner{};
  bool started = false;
};

Engine engine;

/// "kernel (launched at file:line)", and the block and thread where there
/// is one; into a fixed buffer (the fault handler calls it).
const char *where() {
  static char text[512];
  if (!engine.launch)
    return "outside any kernel";
  int n = std::snprintf(text, sizeof(text), "%s (launched at %s:%d)",
                        engine.launch->kernel, engine.launch->file,
                        engine.launch->line);
  if (engine.current && n > 0 && size_t(n) < sizeof(text)) {
    const ThreadIndex &i = engine.current->index;
    std::snprintf(text + n, sizeof(text) - n,
                  " block (%u,%u,%u) thread (%u,%u,%u)", i.blockIdx.x,
                  i.blockIdx.y, i.blockIdx.z, i.threadIdx.x, i.threadIdx.y,
                  i.threadIdx.z);
  }
  return text;
}

[[noreturn]] void fail(const std::string &message) {
  std::fflush(stdout);
  std::fprintf(stderr, "cudasim: %s: %s\n", where(), message.c_str());
  std::exit(1);
}

std::string hex(unsigned mask) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", mask);
  return text;
}

//===----------------------------------------------------------------------===//
// Faults
//===----------------------------------------------------------------------===//

constexpr int kStackBatch = 32;

/// Whether `address` is the guard page below a simulated thread's stack.
bool isStackGuard(const char *address) {
  size_t page = getpagesize(), slot = kStackBytes + page;
  for (char *base : engine.stackBatches)
    if (address >= base && address < base + slot * kStackBatch &&
        size_t(address - base) % slot < page)
      return true;
  return false;
}

/// Reports a fault in a kernel (or in a host library called outside one),
/// formatting into fixed buffers only.
void onFault(int signal, siginfo_t *info, void *) {
  char detail[256] = "";
  const char *address = static_cast<const char *>(info->si_addr);
  const char *sharedEnd = reinterpret_cast<const char *>(engine.sharedEnd);
  if (isStackGuard(address))
    std::snprintf(detail, sizeof(detail),
                  " (the guard page of a simulated thread's %zu KiB stack: "
                  "too much local memory)",
                  kStackBytes >> 10);
  else if (sharedEnd && address >= sharedEnd &&
           address < sharedEnd + getpagesize())
    std::snprintf(
        detail, sizeof(detail),
        " (%zu bytes past the end of the block's %zu bytes of "
        "dynamic shared memory)",
        size_t(address - reinterpret_cast<const char *>(engine.shared)) -
            engine.launch->shared,
        engine.launch->shared);
  else
    describeAddress(address, detail, sizeof(detail));
  char text[1024];
  int n = std::snprintf(text, sizeof(text), "cudasim: %s: %s at address %p%s\n",
                        where(), strsignal(signal),
                        static_cast<const void *>(address), detail);
  std::fflush(stdout);
  ssize_t ignored =
      write(STDERR_FILENO, text, std::min<size_t>(n, sizeof(text)));
  (void)ignored;
  _exit(1);
}

/// Reports a launch that does not end (alarm at kDefaultTimeout seconds,
/// or CUDASIM_TIMEOUT).
void onTimeout(int) {
  char text[1024];
  int n = std::snprintf(
      text, sizeof(text),
      "cudasim: %s: no end after CUDASIM_TIMEOUT seconds (a thread "
      "spinning on another's write never ends here: threads run until "
      "they reach a barrier)\n",
      where());
  std::fflush(stdout);
  ssize_t ignored =
      write(STDERR_FILENO, text, std::min<size_t>(n, sizeof(text)));
  (void)ignored;
  _exit(1);
}

unsigned timeoutSeconds() {
  return unsigned(envCount("CUDASIM_TIMEOUT", kDefaultTimeout));
}

/// Once, on the first launch: the fault and timeout handlers (kernels run
/// on fiber stacks: the handlers on a stack of their own) and the thread
/// that launches (the engine is one thread's).
void start() {
  if (engine.started) {
    if (!pthread_equal(engine.owner, pthread_self()))
      fail("a launch from a second host thread (cudasim runs one)");
    return;
  }
  engine.started = true;
  engine.owner = pthread_self();
  static std::vector<char> altStack(size_t(64) << 10);
  stack_t stack{};
  stack.ss_sp = altStack.data();
  stack.ss_size = altStack.size();
  sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_sigaction = onFault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigaction(SIGSEGV, &action, nullptr);
  sigaction(SIGBUS, &action, nullptr);
  sigaction(SIGFPE, &action, nullptr);
  struct sigaction alarm {};
  alarm.sa_handler = onTimeout;
  alarm.sa_flags = SA_ONSTACK;
  sigaction(SIGALRM, &alarm, nullptr);
  size_t mapped = 0;
  unsigned char *shared =
      reinterpret_cast<unsigned char *>(mapGuarded(kMaxSharedBytes, &mapped));
  engine.sharedEnd = shared + mapped;
}

//===----------------------------------------------------------------------===//
// Fibers
//===----------------------------------------------------------------------===//

/// Writes the running thread's pending copies of groups before `group`.
void landCopies(SimThread &thread, uint64_t group) {
  auto first = thread.copies.begin(), end = first;
  for (; end != thread.copies.end() && end->group < group; ++end)
    std::memcpy(end->dst, end->bytes, end->size);
  thread.copies.erase(first, end);
}

[[noreturn]] void fiberMain() {
  engine.body(engine.context);
  // A GPU thread's copies land even when it returns without waiting.
  landCopies(*engine.current, UINT64_MAX);
  engine.current->state = State::Done;
  cudasim_switch(&engine.current->sp, engine.schedulerSp);
  __builtin_unreachable();
}

/// A stack from the pool; stacks grow down onto the guard page below.
char *takeStack() {
  if (engine.freeStacks.empty()) {
    size_t page = getpagesize(), slot = kStackBytes + page;
    void *mapping = mmap(nullptr, slot * kStackBatch, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapping == MAP_FAILED)
      fail("cannot map the threads' stacks");
    char *base = static_cast<char *>(mapping);
    for (int i = 0; i < kStackBatch; ++i) {
      if (mprotect(base + i * slot, page, PROT_NONE) != 0)
        fail("cannot protect a stack's guard page");
      engine.freeStacks.push_back(base + i * slot + page);
    }
    engine.stackBatches.push_back(base);
  }
  char *stack = engine.freeStacks.back();
  engine.freeStacks.pop_back();
  return stack;
}

/// The stack pointer that starts fiberMain on `stack`: six callee-saved
/// registers for cudasim_switch to pop, then fiberMain as its return
/// address, entered with the stack 8 bytes off 16 as after a call.
void *initialStack(char *stack) {
  auto *top = reinterpret_cast<uintptr_t *>(stack + kStackBytes);
  top[-1] = 0;
  top[-2] = reinterpret_cast<uintptr_t>(&fiberMain);
  for (int i = 3; i <= 8; ++i)
    top[-i] = 0;
  return top - 8;
}

void resume(SimThread &thread) {
  engine.current = &thread;
  if (thread.state == State::NotStarted) {
    thread.stack = takeStack();
    thread.sp = initialStack(thread.stack);
  }
  thread.state = State::Runnable;
  cudasim_switch(&engine.schedulerSp, thread.sp);
  if (!engine.error.empty())
    fail(engine.error);
  engine.current = nullptr;
  if (thread.state == State::Done) {
    engine.freeStacks.push_back(thread.stack);
    thread.stack = nullptr;
  }
}

/// Suspends the running thread at a barrier.
void suspend(Wait wait) {
  SimThread &thread = *engine.current;
  thread.state = State::Waiting;
  thread.wait = wait;
  cudasim_switch(&thread.sp, engine.schedulerSp);
}

SimThread &running(const char *what) {
  if (!engine.current) {
    std::fprintf(stderr, "cudasim: %s called outside a kernel\n", what);
    std::exit(1);
  }
  return *engine.current;
}

//===----------------------------------------------------------------------===//
// Barriers
//===----------------------------------------------------------------------===//

bool isWarpWait(const SimThread &t) {
  return t.state == State::Waiting && t.wait != Wait::Block;
}

/// The lane a shuffle of `t` reads, or -1 for its own value.
int shuffleSource(const SimThread &t) {
  int segment = t.lane / t.width * t.width;
  switch (t.kind) {
  case Shuffle::Index:
    return segment + ((t.operand % t.width) + t.width) % t.width;
  case Shuffle::Up:
    return t.lane - t.operand >= segment ? t.lane - t.operand : -1;
  case Shuffle::Down:
    return t.lane + t.operand < segment + t.width ? t.lane + t.operand : -1;
  case Shuffle::Xor: {
    int source = t.lane ^ t.operand;
    return source < segment + t.width ? source : -1;
  }
  }
  return -1;
}

/// Releases the warps whose waiting lanes can all go on: each waiting
/// lane's mask names only lanes that wait at the same operation with the
/// same mask, or have returned, or do not exist (CUDA asks only the lanes
/// of the mask that have not exited to take part). A shuffle reading a
/// lane that has returned, does not exist, or is not in its mask is
/// reported (its value is undefined on a GPU).
bool releaseWarps() {
  bool released = false;
  size_t count = engine.threads.size();
  for (size_t first = 0; first < count; first += 32) {
    size_t last = std::min(count, first + 32);
    bool any = false, ready = true;
    for (size_t i = first; i < last && ready; ++i) {
      SimThread &t = engine.threads[i];
      if (!isWarpWait(t))
        continue;
      any = true;
      for (size_t other = first; other < last; ++other) {
        SimThread &o = engine.threads[other];
        if (!(t.mask >> (other - first) & 1u) || o.state == State::Done)
          continue;
        if (!isWarpWait(o)) {
          ready = false; // it waits at __syncthreads: maybe a deadlock
          break;
        }
        engine.current = &t;
        if (o.wait != t.wait || o.mask != t.mask ||
            (t.wait == Wait::Shuffle && o.kind != t.kind))
          fail("the lanes of a warp wait at different warp operations "
               "(shuffle against __syncwarp, or different masks)");
        engine.current = nullptr;
      }
    }
    if (!any || !ready)
      continue;
    uint64_t results[32];
    for (size_t i = first; i < last; ++i) {
      SimThread &t = engine.threads[i];
      if (!isWarpWait(t) || t.wait != Wait::Shuffle)
        continue;
      int source = shuffleSource(t);
      results[i - first] = t.bits;
      if (source < 0)
        continue;
      engine.current = &t;
      if (first + source >= last)
        fail("a shuffle reads lane " + std::to_string(source) +
             ", which the block does not have");
      if (!(t.mask >> source & 1u))
        fail("a shuffle reads lane " + std::to_string(source) +
             ", which is not in its mask " + hex(t.mask));
      if (engine.threads[first + source].state == State::Done)
        fail("a shuffle reads lane " + std::to_string(source) +
             ", which has returned");
      engine.current = nullptr;
      results[i - first] = engine.threads[first + source].bits;
    }
    for (size_t i = first; i < last; ++i) {
      SimThread &t = engine.threads[i];
      if (!isWarpWait(t))
        continue;
      if (t.wait == Wait::Shuffle)
        t.bits = results[i - first];
      t.state = State::Runnable;
    }
    released = true;
  }
  return released;
}

/// Releases the block when every thread waits at __syncthreads.
bool releaseBlock() {
  size_t waiting = 0, done = 0;
  for (SimThread &t : engine.threads) {
    if (t.state == State::Done)
      ++done;
    else if (t.state == State::Waiting && t.wait == Wait::Block)
      ++waiting;
  }
  if (waiting == 0 || waiting + done < engine.threads.size())
    return false;
  if (done > 0) {
    for (SimThread &t : engine.threads)
      if (t.state == State::Waiting)
        engine.current = &t;
    fail("__syncthreads reached by " + std::to_string(waiting) + " of " +
         std::to_string(engine.threads.size()) +
         " threads: the others have returned");
  }
  for (SimThread &t : engine.threads)
    t.state = State::Runnable;
  return true;
}

void runBlock() {
  size_t count = engine.threads.size();
  for (;;) {
    for (size_t i = 0; i < count; ++i) {
      SimThread &t = engine.threads[engine.reverse ? count - 1 - i : i];
      if (t.state == State::NotStarted || t.state == State::Runnable)
        resume(t);
    }
    bool finished = true;
    for (SimThread &t : engine.threads)
      finished = finished && t.state == State::Done;
    if (finished)
      return;
    if (releaseWarps() || releaseBlock())
      continue;
    for (SimThread &t : engine.threads)
      if (t.state == State::Waiting && t.wait == Wait::Block)
        engine.current = &t;
    fail("deadlock: some threads wait at __syncthreads while others wait "
         "at a warp operation");
  }
}

/// Why a GPU refuses `launch`, or nullptr.
const char *refusal(const Launch &launch, cudaError_t &error) {
  const dim3 &b = launch.block, &g = launch.grid;
  error = cudaErrorInvalidConfiguration;
  if (b.x == 0 || b.y == 0 || b.z == 0 || b.x > 1024 || b.y > 1024 ||
      b.z > 64 || uint64_t(b.x) * b.y * b.z > 1024)
    return "a block of more than 1024 threads (or an empty one)";
  if (g.x == 0 || g.y == 0 || g.z == 0 || g.y > 65535 || g.z > 65535 ||
      g.x > 0x7fffffffu)
    return "an empty grid or one over the grid limits";
  error = cudaErrorInvalidValue;
  if (launch.shared > maxDynamicShared(launch.entry))
    return "more dynamic shared memory than cudaFuncSetAttribute allows "
           "(48 KiB without it)";
  error = cudaErrorInvalidResourceHandle;
  if (!isLiveStream(launch.stream))
    return "a stream that is not live";
  error = cudaErrorNoKernelImageForDevice;
  static const std::string noImage =
      "no kernel image for the device (CUDASIM_SM below " +
      std::to_string(kImageCapability) + ")";
  if (!hasKernelImage())
    return noImage.c_str();
  return nullptr;
}

} // namespace

//===----------------------------------------------------------------------===//
// Device built-ins
//===----------------------------------------------------------------------===//

const ThreadIndex &index() { return running("a built-in variable").index; }

int lane() { return running("a warp matrix function").lane; }

unsigned char *dynamicShared() {
  running("extern __shared__");
  return engine.shared;
}

void syncThreads() {
  running("__syncthreads");
  suspend(Wait::Block);
}

void syncWarp(unsigned mask) {
  SimThread &thread = running("__syncwarp");
  if (!(mask >> thread.lane & 1u))
    deviceError("__syncwarp's mask leaves out the calling lane");
  thread.mask = mask;
  suspend(Wait::Warp);
}

uint64_t shuffle(unsigned mask, uint64_t bits, Shuffle kind, int operand,
                 int width) {
  SimThread &thread = running("a warp shuffle");
  if (!(mask >> thread.lane & 1u))
    deviceError("a shuffle's mask leaves out the calling lane");
  if (width < 1 || width > 32 || (width & (width - 1)))
    deviceError("a shuffle's width is not a power of 2 up to 32");
  thread.mask = mask;
  thread.bits = bits;
  thread.kind = kind;
  thread.operand = operand;
  thread.width = width;
  suspend(Wait::Shuffle);
  return thread.bits;
}

uint32_t roundToTf32(float x) {
  uint32_t bits = toBits(x);
  if (!std::isfinite(x))
    return bits;
  return (bits + 0x1000u) & ~0x1fffu;
}

namespace {
/// An mma.sync input element of `reg`: bf16 half `half`, or tf32 (its top
/// 10 mantissa bits: the tensor cores ignore the rest).
float bf16Input(uint32_t reg, int half) {
  return fromBits<float>((reg >> (16 * half) & 0xffffu) << 16);
}
float tf32Input(uint32_t reg) { return fromBits<float>(reg & ~0x1fffu); }
} // namespace

namespace {
/// After a warp-wide instruction's syncWarp: a device error naming `what`
/// unless all 32 lanes of the warp from thread `first` execute it
/// (.aligned).
void requireWholeWarp(size_t first, const char *what) {
  for (int lane = 0; lane < 32; ++lane)
    if (engine.threads[first + lane].state == State::Done)
      deviceError((std::string(what) + ": lane " + std::to_string(lane) +
                   " of the warp has returned (.aligned: every lane must "
                   "execute it)")
                      .c_str());
}
} // namespace

void mmaSync(Mma kind, float (&c)[4], const uint32_t (&a)[4],
             const uint32_t (&b)[2]) {
  SimThread &thread = running("mma.sync");
  size_t first = size_t(thread.warp) * 32;
  if (first + 32 > engine.threads.size())
    deviceError("mma.sync in a warp of fewer than 32 threads");
  if (engine.fragments.size() < engine.threads.size() * 6)
    engine.fragments.resize(engine.threads.size() * 6);
  uint32_t *mine = &engine.fragments[(first + thread.lane) * 6];
  std::copy(a, a + 4, mine);
  std::copy(b, b + 2, mine + 4);
  syncWarp(0xffffffffu);
  requireWholeWarp(first, "mma.sync");
  // The whole a (16 x k) and b (k x 8) from every lane's registers.
  bool bf16 = kind == Mma::Bf16M16N8K16;
  int depth = bf16 ? 16 : 8;
  float tileA[16][16], tileB[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const uint32_t *f = &engine.fragments[(first + lane) * 6];
    int g = lane / 4, q = lane % 4;
    for (int i = 0; i < 4; ++i) {
      if (bf16) {
        for (int h = 0; h < 2; ++h)
          tileA[g + 8 * (i % 2)][2 * q + h + 8 * (i / 2)] = bf16Input(f[i], h);
      } else {
        tileA[g + 8 * (i % 2)][q + 4 * (i / 2)] = tf32Input(f[i]);
      }
    }
    for (int i = 0; i < 2; ++i) {
      if (bf16) {
        for (int h = 0; h < 2; ++h)
          tileB[2 * q + h + 8 * i][g] = bf16Input(f[4 + i], h);
      } else {
        tileB[q + 4 * i][g] = tf32Input(f[4 + i]);
      }
    }
  }
  int g = thread.lane / 4, q = thread.lane % 4;
  for (int i = 0; i < 4; ++i) {
    int row = g + 8 * (i / 2), column = 2 * q + i % 2;
    float sum = c[i];
    for (int k = 0; k < depth; ++k)
      sum += tileA[row][k] * tileB[k][column];
    c[i] = sum;
  }
  // No lane passes its next fragments before every lane has read these.
  syncWarp(0xffffffffu);
}

void ldMatrix(int count, bool trans, uint32_t *r, const void *row) {
  SimThread &thread = running("ldmatrix");
  size_t first = size_t(thread.warp) * 32;
  if (first + 32 > engine.threads.size())
    deviceError("ldmatrix in a warp of fewer than 32 threads");
  if (engine.matrixRows.size() < engine.threads.size())
    engine.matrixRows.resize(engine.threads.size());
  engine.matrixRows[first + thread.lane] = row;
  syncWarp(0xffffffffu);
  requireWholeWarp(first, "ldmatrix");
  for (int lane = 0; lane < 8 * count; ++lane) {
    auto *p = static_cast<const unsigned char *>(
        engine.matrixRows[first + lane]);
    if (p < engine.shared || p + 16 > engine.sharedEnd ||
        reinterpret_cast<uintptr_t>(p) % 16 != 0)
      deviceError(("ldmatrix: lane " + std::to_string(lane) +
                   "'s row is not 16 aligned bytes of dynamic shared memory")
                      .c_str());
  }
  // Register i: matrix i's row lane / 4 (.trans: its column), elements
  // 2 (lane % 4) and 2 (lane % 4) + 1.
  int l = thread.lane;
  for (int i = 0; i < count; ++i) {
    uint32_t value = 0;
    for (int h = 0; h < 2; ++h) {
      int rowIndex = trans ? 2 * (l % 4) + h : l / 4;
      int column = trans ? l / 4 : 2 * (l % 4) + h;
      uint16_t element;
      std::memcpy(&element,
                  static_cast<const unsigned char *>(
                      engine.matrixRows[first + 8 * i + rowIndex]) +
                      2 * column,
                  2);
      value |= uint32_t(element) << (16 * h);
    }
    r[i] = value;
  }
  // No lane passes its next row before every lane has read these.
  syncWarp(0xffffffffu);
}

void copyAsync(void *dst, const void *src, int bytes, int srcBytes) {
  SimThread &thread = running("cp.async");
  auto *to = static_cast<unsigned char *>(dst);
  if (bytes != 4 && bytes != 8 && bytes != 16)
    deviceError(("cp.async of " + std::to_string(bytes) +
                 " bytes: PTX copies 4, 8 or 16")
                    .c_str());
  if (srcBytes < 0 || srcBytes > bytes)
    deviceError(("cp.async reads " + std::to_string(srcBytes) +
                 " source bytes of a " + std::to_string(bytes) + "-byte copy")
                    .c_str());
  if (to < engine.shared || to + bytes > engine.sharedEnd ||
      reinterpret_cast<uintptr_t>(to) % bytes != 0)
    deviceError(("cp.async: the destination is not " + std::to_string(bytes) +
                 " aligned bytes of dynamic shared memory")
                    .c_str());
  if (reinterpret_cast<uintptr_t>(src) % bytes != 0)
    deviceError(("cp.async: the source is not " + std::to_string(bytes) +
                 "-byte aligned")
                    .c_str());
  PendingCopy copy{to, {}, bytes, thread.groups};
  std::memcpy(copy.bytes, src, srcBytes); // zeros after
  thread.copies.push_back(copy);
}

void copyAsyncCommit() { ++running("cp.async.commit_group").groups; }

void copyAsyncWait(int pending) {
  SimThread &thread = running("cp.async.wait_group");
  if (static_cast<uint64_t>(pending) < thread.groups)
    landCopies(thread, thread.groups - pending);
}

void deviceError(const char *message) {
  running("a device error");
  engine.error = message;
  cudasim_switch(&engine.current->sp, engine.schedulerSp);
  __builtin_unreachable();
}

void sharedOnce(void *variable, size_t bytes) {
  running("__shared__");
  if (std::find(engine.staticShared.begin(), engine.staticShared.end(),
                variable) != engine.staticShared.end())
    return;
  engine.staticShared.push_back(variable);
  engine.staticBytes += bytes;
  if (engine.staticBytes > kStaticSharedBytes)
    deviceError("more than 48 KiB of static __shared__ memory");
  if (engine.staticBytes + engine.launch->shared > kMaxSharedBytes)
    deviceError("static and dynamic shared memory together exceed the "
                "227 KiB of an sm_90 block");
  std::memset(variable, 0xff, bytes);
}

bool accept(const Launch &launch) {
  if (engine.launch) {
    std::fprintf(stderr, "cudasim: %s launched inside a kernel\n",
                 launch.kernel);
    std::exit(1);
  }
  start();
  cudaError_t error;
  if (const char *why = refusal(launch, error)) {
    std::fprintf(stderr, "cudasim: %s (launched at %s:%d) refused: %s\n",
                 launch.kernel, launch.file, launch.line, why);
    setLaunchError(error);
    return false;
  }
  return true;
}

void run(const Launch &launch, void (*body)(void *), void *context) {
  // The dynamic shared memory ends at the guard page, 128-byte aligned
  // (the runtime's kernels declare it __align__(128)).
  size_t sharedBytes = (launch.shared + 127) & ~size_t(127);
  engine.shared = engine.sharedEnd - sharedBytes;

  engine.launch = &launch;
  engine.body = body;
  engine.context = context;
  static const bool reverse =
      envChoice("CUDASIM_REVERSE", "0", {"0", "1"}) == "1";
  alarm(timeoutSeconds());
  const dim3 &b = launch.block, &g = launch.grid;
  engine.threads.assign(size_t(b.x) * b.y * b.z, SimThread{});
  uint64_t blocks = uint64_t(g.x) * g.y * g.z;
  for (uint64_t n = 0; n < blocks; ++n) {
    uint64_t linear = reverse ? blocks - 1 - n : n;
    uint3 block{unsigned(linear % g.x), unsigned(linear / g.x % g.y),
                unsigned(linear / g.x / g.y)};
    engine.reverse = (linear % 2 == 1) != reverse;
    engine.staticShared.clear();
    engine.staticBytes = 0;
    std::memset(engine.shared, 0xff, sharedBytes);
    size_t thread = 0;
    for (unsigned tz = 0; tz < b.z; ++tz)
      for (unsigned ty = 0; ty < b.y; ++ty)
        for (unsigned tx = 0; tx < b.x; ++tx, ++thread) {
          SimThread &t = engine.threads[thread];
          t = SimThread{};
          t.index = ThreadIndex{uint3{tx, ty, tz}, block, b, g};
          t.lane = static_cast<int>(thread % 32);
          t.warp = static_cast<int>(thread / 32);
        }
    runBlock();
  }
  alarm(0);
  engine.launch = nullptr;
}

} // namespace cudasim
