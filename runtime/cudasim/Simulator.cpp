//===- Simulator.cpp - Blocks of fibers, barriers and shuffles ------------===//
//
// A launch runs its blocks one after another. A block's threads are fibers
// on stacks of their own, switched by a few instructions of x86-64 assembly
// (swapcontext costs a system call per switch): the scheduler starts or
// resumes each runnable thread in turn until it returns or waits, then
// releases the warps whose lanes all wait at the same warp operation, else
// the block when all its threads wait at __syncthreads, else reports the
// deadlock. A shuffle's result is computed at the release, from the values
// every lane passed in, before any lane resumes.
//
//===----------------------------------------------------------------------===//

#include "Simulator.h"
#include "Runtime.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
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
  .text
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
)");

namespace cudasim {
namespace {

constexpr size_t kStackBytes = size_t(256) << 10;
constexpr unsigned kFullMask = 0xffffffffu;

enum class State { NotStarted, Runnable, Waiting, Done };
enum class Wait { Block, Warp, Shuffle };

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
};

/// The launch running (launches do not nest), its block's threads, and
/// the stacks and shared memory they reuse.
struct Engine {
  const Launch *launch = nullptr;
  void (*body)(void *) = nullptr;
  void *context = nullptr;
  std::vector<SimThread> threads;
  SimThread *current = nullptr;
  void *schedulerSp = nullptr;
  std::vector<char *> freeStacks;
  char *stackLow = nullptr, *stackHigh = nullptr; // all stacks, for faults
  unsigned char *sharedEnd = nullptr;             // a guard page follows
  unsigned char *shared = nullptr;
  std::string error;
};

Engine engine;

std::string format(const dim3 &d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," +
         std::to_string(d.z) + ")";
}

/// "kernel (file:line)", and the block and thread where there is one.
std::string where() {
  if (!engine.launch)
    return "outside any kernel";
  std::string text = std::string(engine.launch->kernel) + " (launched at " +
                     engine.launch->file + ":" +
                     std::to_string(engine.launch->line) + ")";
  if (engine.current) {
    const ThreadIndex &i = engine.current->index;
    text += " block " + format(dim3(i.blockIdx.x, i.blockIdx.y, i.blockIdx.z)) +
            " thread " +
            format(dim3(i.threadIdx.x, i.threadIdx.y, i.threadIdx.z));
  }
  return text;
}

[[noreturn]] void fail(const std::string &message) {
  std::fflush(stdout);
  std::fprintf(stderr, "cudasim: %s: %s\n", where().c_str(), message.c_str());
  std::exit(1);
}

//===----------------------------------------------------------------------===//
// Faults
//===----------------------------------------------------------------------===//

void onFault(int signal, siginfo_t *info, void *) {
  char detail[256] = "";
  const char *address = static_cast<const char *>(info->si_addr);
  if (engine.stackLow && address >= engine.stackLow &&
      address < engine.stackHigh)
    std::snprintf(detail, sizeof(detail),
                  " (the guard page of a simulated thread's %zu KiB stack: "
                  "too much local memory)",
                  kStackBytes >> 10);
  else if (engine.sharedEnd &&
           address >= reinterpret_cast<const char *>(engine.sharedEnd) &&
           address <
               reinterpret_cast<const char *>(engine.sharedEnd) + getpagesize())
    std::snprintf(detail, sizeof(detail),
                  " (past the end of the block's dynamic shared memory)");
  else
    describeAddress(address, detail, sizeof(detail));
  char at[32];
  std::snprintf(at, sizeof(at), "%p", static_cast<const void *>(address));
  std::string text = "cudasim: " + where() + ": " + strsignal(signal) +
                     " at address " + at + detail + "\n";
  std::fflush(stdout);
  ssize_t ignored = write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
  _exit(1);
}

/// Reports faults (kernels running on fiber stacks: on a stack of its own).
void installFaultHandler() {
  static bool installed = false;
  if (installed)
    return;
  installed = true;
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
}

/// Maps `bytes` (whole pages) followed by an inaccessible page.
char *mapWithGuard(size_t bytes) {
  size_t page = getpagesize();
  void *base = mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    std::fprintf(stderr, "cudasim: cannot map %zu bytes\n", bytes + page);
    std::exit(1);
  }
  mprotect(static_cast<char *>(base) + bytes, page, PROT_NONE);
  return static_cast<char *>(base);
}

//===----------------------------------------------------------------------===//
// Fibers
//===----------------------------------------------------------------------===//

[[noreturn]] void fiberMain() {
  engine.body(engine.context);
  engine.current->state = State::Done;
  cudasim_switch(&engine.current->sp, engine.schedulerSp);
  __builtin_unreachable();
}

/// A stack from the pool; stacks grow down onto the guard page below.
char *takeStack() {
  if (!engine.freeStacks.empty()) {
    char *stack = engine.freeStacks.back();
    engine.freeStacks.pop_back();
    return stack;
  }
  // 32 stacks at a time, each above a guard page.
  constexpr int kBatch = 32;
  size_t page = getpagesize(), slot = kStackBytes + page;
  char *base =
      static_cast<char *>(mmap(nullptr, slot * kBatch, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (base == MAP_FAILED) {
    std::fprintf(stderr, "cudasim: cannot map the threads' stacks\n");
    std::exit(1);
  }
  for (int i = 0; i < kBatch; ++i) {
    mprotect(base + i * slot, page, PROT_NONE);
    engine.freeStacks.push_back(base + i * slot + page);
  }
  // Guard pages of all batches count as stack faults: track the hull.
  if (!engine.stackLow || base < engine.stackLow)
    engine.stackLow = base;
  if (base + slot * kBatch > engine.stackHigh)
    engine.stackHigh = base + slot * kBatch;
  return takeStack();
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

/// Releases the warps whose waiting lanes can all go on; reports a warp
/// operation that can never complete.
bool releaseWarps() {
  bool released = false;
  size_t count = engine.threads.size();
  for (size_t first = 0; first < count; first += 32) {
    size_t last = std::min(count, first + 32);
    // A warp is released when each waiting lane's mask names only lanes
    // that wait at the same operation with the same mask.
    bool any = false, ready = true;
    for (size_t i = first; i < last && ready; ++i) {
      SimThread &t = engine.threads[i];
      if (!isWarpWait(t))
        continue;
      any = true;
      for (int lane = 0; lane < 32; ++lane) {
        if (!(t.mask >> lane & 1u))
          continue;
        size_t other = first + lane;
        engine.current = &t;
        if (other >= last)
          fail("the mask " + std::to_string(t.mask) + " names lane " +
               std::to_string(lane) + ", which the block does not have");
        SimThread &o = engine.threads[other];
        if (o.state == State::Done)
          fail(std::string(t.wait == Wait::Shuffle ? "a shuffle"
                                                   : "__syncwarp") +
               " waits for lane " + std::to_string(lane) +
               ", which has returned");
        if (!isWarpWait(o)) {
          ready = false; // it waits at __syncthreads: maybe a deadlock
          break;
        }
        if (o.wait != t.wait || o.mask != t.mask ||
            (t.wait == Wait::Shuffle && o.kind != t.kind))
          fail("the lanes of a warp wait at different warp operations "
               "(shuffle against __syncwarp, or different masks)");
      }
      engine.current = nullptr;
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
      if (!(t.mask >> source & 1u) || first + source >= last)
        fail("a shuffle reads lane " + std::to_string(source) +
             ", which is not in its mask " + std::to_string(t.mask));
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
  for (;;) {
    for (SimThread &t : engine.threads)
      if (t.state == State::NotStarted || t.state == State::Runnable)
        resume(t);
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

void deviceError(const char *message) {
  running("a device error");
  engine.error = message;
  cudasim_switch(&engine.current->sp, engine.schedulerSp);
  __builtin_unreachable();
}

void run(const Launch &launch, void (*body)(void *), void *context) {
  if (engine.launch) {
    std::fprintf(stderr, "cudasim: %s launched inside a kernel\n",
                 launch.kernel);
    std::exit(1);
  }
  cudaError_t error;
  if (const char *why = refusal(launch, error)) {
    std::fprintf(stderr, "cudasim: %s (launched at %s:%d) refused: %s\n",
                 launch.kernel, launch.file, launch.line, why);
    setLaunchError(error);
    return;
  }
  installFaultHandler();
  if (!engine.sharedEnd)
    engine.sharedEnd =
        reinterpret_cast<unsigned char *>(mapWithGuard(kMaxSharedBytes)) +
        kMaxSharedBytes;
  // The dynamic shared memory ends at the guard page, 128-byte aligned.
  size_t sharedBytes = (launch.shared + 127) & ~size_t(127);
  engine.shared = engine.sharedEnd - sharedBytes;

  engine.launch = &launch;
  engine.body = body;
  engine.context = context;
  const dim3 &b = launch.block, &g = launch.grid;
  engine.threads.assign(size_t(b.x) * b.y * b.z, SimThread{});
  for (unsigned bz = 0; bz < g.z; ++bz)
    for (unsigned by = 0; by < g.y; ++by)
      for (unsigned bx = 0; bx < g.x; ++bx) {
        std::memset(engine.shared, 0xff, sharedBytes);
        size_t linear = 0;
        for (unsigned tz = 0; tz < b.z; ++tz)
          for (unsigned ty = 0; ty < b.y; ++ty)
            for (unsigned tx = 0; tx < b.x; ++tx, ++linear) {
              SimThread &t = engine.threads[linear];
              t = SimThread{};
              t.index = ThreadIndex{uint3{tx, ty, tz}, uint3{bx, by, bz}, b, g};
              t.lane = static_cast<int>(linear % 32);
              t.warp = static_cast<int>(linear / 32);
            }
        runBlock();
      }
  engine.launch = nullptr;
}

} // namespace cudasim
