//===- Allocator.h - Caching allocator with a high-water mark ---*- C++ -*-===//
//
// Blocks are cached per size class and reused, so a step that allocates the
// same buffers every iteration stops calling malloc after the first one. The
// figure that matters is the bytes handed out and not yet returned, whose
// maximum is the measured peak that --shardc-ledger predicts.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_RT_HOST_ALLOCATOR_H
#define SHARDC_RT_HOST_ALLOCATOR_H

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

struct shardc_rt_context;

namespace shardc::rt {

/// Blocks come from the backend (host or device memory); on a device, a
/// block is reused in the order of the step's stream.
class Allocator {
public:
  Allocator() = default;
  Allocator(const Allocator &) = delete;
  Allocator &operator=(const Allocator &) = delete;
  ~Allocator();

  /// `bytes` uninitialised bytes, 256-byte aligned: the step writes every
  /// buffer before reading it (the emitter zeroes padding and sums).
  void *allocate(int64_t bytes);
  /// Returns a block to the cache; a pointer not from allocate() is fatal.
  void release(void *ptr);

  int64_t liveBytes() const { return live; }
  int64_t peakBytes() const { return peak; }
  /// Starts a new high-water mark (a step's, an evaluation's) from now.
  void resetPeak() { peak = live; }
  /// Bytes held from the system, cached blocks included.
  int64_t reservedBytes() const { return reserved; }

private:
  struct Block {
    int64_t requested, capacity;
  };
  std::unordered_map<void *, Block> inUse;
  std::multimap<int64_t, void *> cached; // capacity -> block
  int64_t live = 0, peak = 0, reserved = 0;
};

} // namespace shardc::rt

#endif // SHARDC_RT_HOST_ALLOCATOR_H
