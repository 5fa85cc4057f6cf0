//===- SharedMemory.h - Small collectives through host memory --*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// A group whose ranks share a host moves its small collectives through a
// segment of shared memory instead of gloo's TCP: on the 2-core
// development VM a 4 KiB all-reduce between two ranks over loopback is a
// dozen system calls on three threads of each rank (gloo's event loop
// reads, the waiter is woken), and the demo GPT's tensor-parallel step,
// 13 such all-reduces, spent three times its compute in the kernel. Large
// collectives stay on gloo.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_SHAREDMEMORY_H
#define WEFT_RUNTIME_SHAREDMEMORY_H

#include "weft/Runtime/Collectives.h"
#include "weft/Runtime/Rendezvous.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

namespace weft {
namespace rt {

/// One segment per group, mapped by each of its ranks: a slot per rank in
/// each of two sets, and a counter per rank of the collectives it has
/// written. A collective writes this rank's part into its slot of set
/// (number mod 2), raises the counter, waits for every other rank's and
/// reads their slots. Two sets are enough: a rank writes collective k + 2
/// over collective k's slots only after seeing every rank arrive at
/// k + 1, which each does after reading k. Every rank sums the slots in
/// rank order, so all hold the same bits.
class SharedMemoryLane {
public:
  /// Every rank of the group calls this at once, after the group's gloo
  /// context has connected (its store keys live under `prefix`). `out`
  /// stays empty where the ranks do not share one kernel, IPC and network
  /// namespace (emulated nodes stay apart), where WEFT_SHM_COLLECTIVES=0,
  /// or where the segment cannot be made (a warning says why); the group
  /// then keeps to gloo.
  static Status create(StoreClient &store, const std::string &prefix, int rank,
                       int size, std::chrono::milliseconds timeout,
                       std::unique_ptr<SharedMemoryLane> &out);
  ~SharedMemoryLane();
  SharedMemoryLane(const SharedMemoryLane &) = delete;
  SharedMemoryLane &operator=(const SharedMemoryLane &) = delete;

  /// The most bytes one rank writes in one collective: an all-reduce's
  /// buffer, an all-gather's input, a reduce-scatter's whole input.
  size_t slotBytes() const { return slot; }

  /// The collectives, as Communicator's; they throw std::runtime_error
  /// (a rank that left, or one that did not join within the timeout), as
  /// gloo's do.
  void allReduceSum(float *data, size_t count);
  void allGather(const float *in, size_t count, float *out);
  void reduceScatterSum(const float *in, size_t count, float *out);
  void allToAll(const float *in, size_t count, float *out);

  struct Header;
  struct RankControl;

private:
  SharedMemoryLane(int rank, int size, void *base, size_t bytes, size_t slot,
                   std::chrono::milliseconds timeout);
  /// One collective: `write(slot)` fills this rank's slot, then, once
  /// every rank has written, `read(set)` takes the result.
  template <typename Write, typename Read>
  void round(const char *what, Write write, Read read);
  void waitFor(int peer, uint32_t number, const char *what);
  RankControl &control(int r) const;
  float *slotOf(uint32_t set, int r) const;
  /// out = the sum over ranks, in rank order, of `count` floats at
  /// `offset` in their slots of `set`.
  void sumSlots(uint32_t set, size_t offset, size_t count, float *out) const;

  int rank, size;
  void *base;
  size_t bytes, slot;
  std::chrono::milliseconds timeout;
  /// Where in `base` the ranks' controls and the slots start.
  RankControl *controls;
  char *slots;
  uint32_t number = 0;
};

} // namespace rt
} // namespace weft

#endif // WEFT_RUNTIME_SHAREDMEMORY_H
