//===- Gloo.cpp - Collectives over gloo's TCP transport -------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// gloo reports failures by throwing; this file (compiled with exceptions)
// turns them into Status at every entry point, so nothing escapes into the
// training loop.
//
//===----------------------------------------------------------------------===//

#include "SharedMemory.h"

#include "weft/Runtime/Collectives.h"
#include "weft/Runtime/Trace.h"

#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

using namespace weft::rt;

Communicator::~Communicator() = default;
Communicator::PendingTransfer::~PendingTransfer() = default;

/// An all-reduce of the whole buffer, then this rank's slice: the same
/// numbers as a ring reduce-scatter at twice its traffic. For
/// communicators without a reduce-scatter of their own (the hierarchical
/// one, whose all-reduce already keeps the slow link to one crossing).
Status Communicator::reduceScatterSum(const float *in, size_t count,
                                      float *out) {
  std::vector<float> sum(in, in + count * size_t(size()));
  if (Status s = allReduceSum(sum.data(), sum.size()); !s.ok())
    return s;
  std::memcpy(out, sum.data() + count * size_t(rank()), count * sizeof(float));
  return Status::success();
}

std::string Communicator::transferText(bool sending, size_t bytes, int peer,
                                       uint64_t tag) const {
  std::string head = std::string(sending ? "send" : "recv") + " of " +
                     std::to_string(bytes) + " bytes with tag " +
                     std::to_string(tag);
  std::string me = std::to_string(rank()), them = std::to_string(peer);
  return head +
         (sending ? " from rank " + me + " to rank " + them
                  : " on rank " + me + " from rank " + them) +
         " of " + std::to_string(size());
}

Status Communicator::checkTransfer(const std::string &what, int peer,
                                   uint64_t tag) const {
  if (peer < 0 || peer >= size())
    return Status::error(what + ": rank " + std::to_string(peer) +
                         " is not in the group (ranks 0 to " +
                         std::to_string(size() - 1) + ")");
  // A blocking send to itself could never meet its recv.
  if (peer == rank())
    return Status::error(what + ": a rank cannot send to or receive from "
                                "itself; name another rank of the group");
  if (tag > kMaxTag)
    return Status::error(what + ": the tag is above the largest, " +
                         std::to_string(kMaxTag));
  return Status::success();
}

namespace {

/// gloo's view of the rendezvous store.
class StoreAdapter : public gloo::rendezvous::Store {
public:
  StoreAdapter(StoreClient &client, std::chrono::milliseconds timeout)
      : client(client), timeout(timeout) {}

  void set(const std::string &key, const std::vector<char> &data) override {
    if (Status s = client.set(key, data); !s.ok())
      throw std::runtime_error(s.message);
  }
  std::vector<char> get(const std::string &key) override {
    std::vector<char> value;
    if (Status s = client.get(key, timeout, value); !s.ok())
      throw std::runtime_error(s.message);
    return value;
  }
  void wait(const std::vector<std::string> &keys) override {
    wait(keys, timeout);
  }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &limit) override {
    // One deadline for all the keys: waiting `limit` for each in turn
    // would let a missing group of peers take a multiple of it.
    auto deadline = std::chrono::steady_clock::now() + limit;
    std::vector<char> ignored;
    for (const std::string &key : keys) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (Status s = client.get(
              key, std::max(left, std::chrono::milliseconds(1)), ignored);
          !s.ok())
        throw std::runtime_error(s.message);
    }
  }

private:
  StoreClient &client;
  std::chrono::milliseconds timeout;
};

class GlooCommunicator : public Communicator {
public:
  GlooCommunicator(int rank, int size, std::shared_ptr<gloo::Context> context,
                   std::unique_ptr<SharedMemoryLane> lane,
                   std::chrono::milliseconds timeout)
      : Communicator(rank, size), context(std::move(context)),
        lane(std::move(lane)), timeout(timeout) {}

  std::string describe() const override {
    std::string d = "gloo over TCP";
    if (lane)
      d += " (collectives of up to " + std::to_string(lane->slotBytes() >> 10) +
           " KiB a rank through shared memory)";
    return d;
  }

  /// Within the shared-memory lane's slot (ranks on one host): the lane.
  /// Other small buffers: this rank's ring reduce-scatter, then its
  /// all-gather (padded to n equal blocks). gloo's all-reduce of 4 KiB between
  /// two ranks on this host took 1321 us where its 64 KiB took 344 and an
  /// all-gather of 4 KiB 50 (weft-profile-cluster), which made the demo
  /// GPT's tp=2 step, 13 small all-reduces, 20 ms. Large ones stay gloo's,
  /// which runs at the link's floor.
  Status allReduceSum(float *data, size_t count) override {
    if (fitsLane(count))
      return guard("all-reduce", [&] { lane->allReduceSum(data, count); });
    size_t n = size_t(size());
    if (n > 1 && count > 0 && count * sizeof(float) < kSmallAllReduceBytes)
      return guard("all-reduce", [&] {
        size_t block = (count + n - 1) / n;
        std::vector<float> padded(n * block, 0.0f), mine(block);
        std::memcpy(padded.data(), data, count * sizeof(float));
        ringReduceScatter(padded.data(), block, mine.data());
        ringAllGather(mine.data(), block, padded.data());
        std::memcpy(data, padded.data(), count * sizeof(float));
      });
    return guard("all-reduce", [&] {
      gloo::AllreduceOptions opts(context);
      opts.setOutput(data, count);
      opts.setReduceFunction(
          static_cast<void (*)(void *, const void *, const void *, size_t)>(
              &gloo::sum<float>));
      opts.setTag(nextTag());
      opts.setTimeout(timeout);
      gloo::allreduce(opts);
    });
  }

  /// A ring: in n - 1 steps each rank passes on the block it received
  /// the step before, starting with its own.
  Status allGather(const float *in, size_t count, float *out) override {
    if (fitsLane(count))
      return guard("all-gather", [&] { lane->allGather(in, count, out); });
    return guard("all-gather", [&] { ringAllGather(in, count, out); });
  }

  /// A ring: in n - 1 steps each rank passes a partial sum of one block to
  /// its right neighbour and adds the block coming from its left, so each
  /// rank sends (n - 1) / n of the buffer, half what an all-reduce sends.
  /// The partial sums travel the same ring whatever the data, so the result
  /// is the same on every run.
  Status reduceScatterSum(const float *in, size_t count, float *out) override {
    if (fitsLane(count * size_t(size())))
      return guard("reduce-scatter",
                   [&] { lane->reduceScatterSum(in, count, out); });
    return guard("reduce-scatter", [&] { ringReduceScatter(in, count, out); });
  }

  /// gloo's exchange: a send of one block to each peer and a receive of
  /// one from each, all in flight at once; this rank's own block is
  /// copied.
  Status allToAll(const float *in, size_t count, float *out) override {
    if (count == 0)
      return Status::success();
    if (fitsLane(count * size_t(size())))
      return guard("all-to-all", [&] { lane->allToAll(in, count, out); });
    return guard("all-to-all", [&] {
      gloo::AlltoallOptions opts(context);
      opts.setInput(const_cast<float *>(in), count * size_t(size()));
      opts.setOutput(out, count * size_t(size()));
      opts.setTag(nextTag());
      opts.setTimeout(timeout);
      gloo::alltoall(opts);
    });
  }

  Status broadcast(float *data, size_t count, int root) override {
    if (root < 0 || root >= size())
      return Status::error("broadcast: root " + std::to_string(root) +
                           " is not a rank of a group of " +
                           std::to_string(size()));
    return guard("broadcast", [&] {
      gloo::BroadcastOptions opts(context);
      opts.setOutput(data, count);
      opts.setRoot(root);
      opts.setTag(nextTag());
      opts.setTimeout(timeout);
      gloo::broadcast(opts);
    });
  }

  Status barrier() override {
    return guard("barrier", [&] {
      gloo::BarrierOptions opts(context);
      opts.setTag(nextTag());
      opts.setTimeout(timeout);
      gloo::barrier(opts);
    });
  }

  Status send(const float *data, size_t count, int peer,
              uint64_t tag) override {
    return transfer(/*sending=*/true, const_cast<float *>(data), count, peer,
                    tag);
  }

  Status recv(float *data, size_t count, int peer, uint64_t tag) override {
    return transfer(/*sending=*/false, data, count, peer, tag);
  }

  /// Each transfer has its own slots (kTransferSlotPrefix, kind, tag), and
  /// gloo's pairs take unbound-buffer operations from any thread.
  bool concurrentTransfers() const override { return true; }

  /// gloo's unbound buffers post a recv without blocking; its event loop
  /// fills it and wakes the waiter, the step's own thread.
  std::unique_ptr<PendingTransfer> startRecv(float *data, size_t count,
                                             int peer, uint64_t tag) override {
    // Only what a first transfer agreed, which checkTransfer passed; an
    // empty one moves no payload.
    size_t bytes = count * sizeof(float);
    if (bytes == 0)
      return nullptr;
    {
      std::lock_guard<std::mutex> lock(agreedMutex);
      if (!agreedSizes.count(std::make_tuple(false, peer, tag, bytes)))
        return nullptr;
    }
    auto pending = std::make_unique<PostedRecv>(*this, peer, tag, bytes);
    try {
      pending->buffer = context->createUnboundBuffer(data, bytes);
      pending->buffer->recv(peer, transferSlot(kData, tag));
    } catch (const std::exception &e) {
      pending->buffer.reset();
      pending->failed = transferFailure(/*sending=*/false, peer, tag, bytes,
                                        Clock::now() + timeout, e);
    }
    return pending;
  }

private:
  using Clock = std::chrono::steady_clock;

  /// A recv startRecv posted.
  struct PostedRecv : PendingTransfer {
    PostedRecv(GlooCommunicator &comm, int peer, uint64_t tag, size_t bytes)
        : comm(comm), peer(peer), tag(tag), bytes(bytes) {}
    /// Waits up to the timeout from now: posted a step ahead, a recv may
    /// rightly wait that long before the step needs it.
    Status wait() override {
      if (!buffer)
        return failed;
      Clock::time_point deadline = Clock::now() + comm.timeout;
      try {
        if (!buffer->waitRecv(comm.timeout))
          throw std::runtime_error("the transfer was aborted");
      } catch (const std::exception &e) {
        failed = comm.transferFailure(/*sending=*/false, peer, tag, bytes,
                                      deadline, e);
      }
      buffer.reset();
      return failed;
    }
    GlooCommunicator &comm;
    int peer;
    uint64_t tag;
    size_t bytes;
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
    Status failed;
  };

  /// The error of a transfer gloo failed: what it was, and past its
  /// deadline who did not take part.
  Status transferFailure(bool sending, int peer, uint64_t tag, size_t bytes,
                         Clock::time_point deadline,
                         const std::exception &e) const {
    std::string what = transferText(sending, bytes, peer, tag);
    if (Clock::now() < deadline)
      return Status::error(what + " failed: " + e.what());
    std::string partner =
        sending ? " (is it running, and does it call recv from rank " +
                      std::to_string(rank()) + " with tag " +
                      std::to_string(tag) + "?)"
                : " (is it running, and does it call send to rank " +
                      std::to_string(rank()) + " with tag " +
                      std::to_string(tag) + "?)";
    return Status::error(what + " failed: rank " + std::to_string(peer) +
                         (sending ? " did not take it" : " sent nothing") +
                         " within " + std::to_string(timeout.count()) + " ms" +
                         partner + " [gloo: " + e.what() + "]");
  }

  /// The kinds of message a transfer sends, in the slot's second byte: the
  /// sender's byte count, the receiver's, then the data. Each kind goes one
  /// way only, so two ranks sending to each other with one tag at once
  /// never take each other's counts for replies.
  enum TransferMessage : uint64_t { kSenderSize, kReceiverSize, kData };

  static uint64_t transferSlot(TransferMessage kind, uint64_t tag) {
    return (uint64_t(kTransferSlotPrefix) << 56) | (uint64_t(kind) << 48) | tag;
  }

  /// First the two sides swap their byte counts, then the data moves. gloo
  /// does not check sizes itself: more bytes than the recv posted end the
  /// receiving process (an exception on gloo's event-loop thread), fewer
  /// arrive as if they were all. With the counts swapped first, both ranks
  /// see a mismatch and return it, and the pair stays usable.
  Status transfer(bool sending, float *data, size_t count, int peer,
                  uint64_t tag) {
    size_t bytes = count * sizeof(float);
    std::string what = transferText(sending, bytes, peer, tag);
    if (Status s = checkTransfer(what, peer, tag); !s.ok())
      return s;
    Clock::time_point deadline = Clock::now() + timeout;
    auto left = [&] {
      return std::max(
          std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()),
          std::chrono::milliseconds(0));
    };
    std::string them = "rank " + std::to_string(peer);
    // A compiled step sends the same sizes under the same tags every step:
    // once both sides have agreed on one, the swap (two more messages,
    // each a round trip through both ranks' threads) is skipped.
    auto key = std::make_tuple(sending, peer, tag, bytes);
    bool agreed;
    {
      std::lock_guard<std::mutex> lock(agreedMutex);
      agreed = agreedSizes.count(key) != 0;
    }
    try {
      if (!agreed) {
        uint64_t mine = bytes, theirs = 0;
        auto out = context->createUnboundBuffer(&mine, sizeof mine);
        auto in = context->createUnboundBuffer(&theirs, sizeof theirs);
        out->send(peer,
                  transferSlot(sending ? kSenderSize : kReceiverSize, tag));
        in->recv(peer,
                 transferSlot(sending ? kReceiverSize : kSenderSize, tag));
        if (!in->waitRecv(left()) || !out->waitSend(left()))
          throw std::runtime_error("the transfer was aborted");
        if (theirs != mine)
          return Status::error(
              what + " failed: " + them + (sending ? " receives " : " sends ") +
              std::to_string(theirs) +
              " bytes with this tag; a send and its recv must have the same "
              "size (no data moved)");
        std::lock_guard<std::mutex> lock(agreedMutex);
        agreedSizes.insert(key);
      }
      if (bytes == 0)
        return Status::success();
      auto payload = context->createUnboundBuffer(data, bytes);
      if (sending) {
        payload->send(peer, transferSlot(kData, tag));
        if (!payload->waitSend(left()))
          throw std::runtime_error("the transfer was aborted");
      } else {
        payload->recv(peer, transferSlot(kData, tag));
        if (!payload->waitRecv(left()))
          throw std::runtime_error("the transfer was aborted");
      }
      return Status::success();
    } catch (const std::exception &e) {
      return transferFailure(sending, peer, tag, bytes, deadline, e);
    }
  }

  template <typename F> Status guard(const char *what, F &&body) {
    try {
      body();
      return Status::success();
    } catch (const std::exception &e) {
      return Status::error(std::string(what) + " on rank " +
                           std::to_string(rank()) + " of " +
                           std::to_string(size()) + " failed: " + e.what());
    }
  }
  uint32_t nextTag() { return tag++; }

  /// Whether a collective writing `count` floats a rank goes through the
  /// shared-memory lane.
  bool fitsLane(size_t count) const {
    return lane && count * sizeof(float) <= lane->slotBytes();
  }

  /// allGather, throwing on failure.
  void ringAllGather(const float *in, size_t count, float *out) {
    size_t n = size_t(size()), r = size_t(rank()),
           bytes = count * sizeof(float);
    if (out + r * count != in)
      std::memmove(out + r * count, in, bytes);
    if (n == 1 || count == 0)
      return;
    auto outBuf = context->createUnboundBuffer(out, n * bytes);
    gloo::Slot slot = gloo::Slot::build(kRingSlotPrefix, nextTag());
    int right = int((r + 1) % n), left = int((r + n - 1) % n);
    ring(
        count, *outBuf, *outBuf,
        [&](size_t step, size_t first, size_t size, size_t) {
          size_t sendBlock = (r + n - step) % n;
          size_t recvBlock = (r + 2 * n - step - 1) % n;
          outBuf->send(right, slot, (sendBlock * count + first) * sizeof(float),
                       size * sizeof(float));
          outBuf->recv(left, slot, (recvBlock * count + first) * sizeof(float),
                       size * sizeof(float));
        },
        [](size_t, size_t, size_t, size_t) {});
  }

  /// reduceScatterSum, throwing on failure.
  void ringReduceScatter(const float *in, size_t count, float *out) {
    size_t n = size_t(size()), r = size_t(rank());
    if (n == 1 || count == 0) {
      std::memcpy(out, in, count * sizeof(float));
      return;
    }
    std::vector<float> sums(in, in + n * count);
    // Segments arrive in a staging buffer of two, one per segment in
    // flight.
    size_t segments = ringSegments(count);
    size_t most = (count + segments - 1) / segments;
    std::vector<float> incoming(2 * most);
    auto sumsBuf =
        context->createUnboundBuffer(sums.data(), sums.size() * sizeof(float));
    auto inBuf = context->createUnboundBuffer(incoming.data(),
                                              incoming.size() * sizeof(float));
    gloo::Slot slot = gloo::Slot::build(kRingSlotPrefix, nextTag());
    int right = int((r + 1) % n), left = int((r + n - 1) % n);
    ring(
        count, *sumsBuf, *inBuf,
        [&](size_t step, size_t first, size_t size, size_t parity) {
          // Rank r holds a sum of step + 1 ranks' terms for block
          // r - step - 1 and sends it on.
          size_t sendBlock = (r + 2 * n - step - 1) % n;
          sumsBuf->send(right, slot,
                        (sendBlock * count + first) * sizeof(float),
                        size * sizeof(float));
          inBuf->recv(left, slot, parity * most * sizeof(float),
                      size * sizeof(float));
        },
        [&](size_t step, size_t first, size_t size, size_t parity) {
          // The block from the left is r - step - 2; after n - 1 steps
          // that is r itself.
          size_t recvBlock = (r + 2 * n - step - 2) % n;
          float *block = sums.data() + recvBlock * count + first;
          const float *from = incoming.data() + parity * most;
          for (size_t i = 0; i < size; ++i)
            block[i] += from[i];
        });
    std::memcpy(out, sums.data() + r * count, count * sizeof(float));
  }

  /// How many segments a ring moves a block of `count` floats in: about
  /// kRingSegmentBytes each.
  static size_t ringSegments(size_t count) {
    return std::max<size_t>(1, (count * sizeof(float) + kRingSegmentBytes - 1) /
                                   kRingSegmentBytes);
  }

  /// The n - 1 steps of a ring over blocks of `count` floats, each block in
  /// ringSegments(count) segments with two in flight. More cannot be:
  /// segment k of a step sends on what segment k of the step before
  /// received. `post(step, first, size, parity)` posts a segment's send on
  /// `sender` and its recv on `receiver` (parity: which of two in flight);
  /// `arrived(step, first, size, parity)` runs once its recv is in.
  template <typename Post, typename Arrived>
  void ring(size_t count, gloo::transport::UnboundBuffer &sender,
            gloo::transport::UnboundBuffer &receiver, Post post,
            Arrived arrived) {
    size_t segments = ringSegments(count);
    size_t depth = std::min<size_t>(segments, 2);
    size_t ops = (size_t(size()) - 1) * segments;
    auto run = [&](size_t op, auto &&fn) {
      size_t k = op % segments, first = k * count / segments;
      fn(op / segments, first, (k + 1) * count / segments - first, op % 2);
    };
    for (size_t op = 0; op < std::min(depth, ops); ++op)
      run(op, post);
    for (size_t op = 0; op < ops; ++op) {
      // One pair, one slot: sends and recvs complete in the order posted.
      if (!receiver.waitRecv(timeout) || !sender.waitSend(timeout))
        throw std::runtime_error("a peer went away mid-ring");
      run(op, arrived);
      if (op + depth < ops)
        run(op + depth, post);
    }
  }

  /// Not one of gloo's own prefixes (types.h), so the rings' messages
  /// never meet theirs.
  static constexpr uint8_t kRingSlotPrefix = 0x51;
  /// Two segments in flight keep the link busy while one is summed: one
  /// send of a whole 5.33 MB block over a 400 Mbit link took 311 ms
  /// (median of 10) where segments of this size took 233 ms and gloo's
  /// all-reduce of the same traffic 225 ms (bench/allreduce.sh).
  static constexpr size_t kRingSegmentBytes = size_t(512) << 10;
  /// All-reduces below this size run on the rings (allReduceSum).
  static constexpr size_t kSmallAllReduceBytes = size_t(256) << 10;
  /// Likewise for send and recv.
  static constexpr uint8_t kTransferSlotPrefix = 0x52;

  std::shared_ptr<gloo::Context> context;
  /// Small collectives, where every rank of the group is on this host.
  std::unique_ptr<SharedMemoryLane> lane;
  /// (sending, peer, tag, bytes) of the transfers whose sizes both sides
  /// have swapped and agreed on.
  std::mutex agreedMutex;
  std::set<std::tuple<bool, int, uint64_t, size_t>> agreedSizes;
  std::chrono::milliseconds timeout;
  uint32_t tag = 0;
};

} // namespace

Status weft::rt::createGlooCommunicator(StoreClient &store,
                                        const std::string &prefix, int rank,
                                        int size, const std::string &hostname,
                                        std::chrono::milliseconds timeout,
                                        std::unique_ptr<Communicator> &out) {
  if (size < 1 || rank < 0 || rank >= size)
    return Status::error("communicator: rank " + std::to_string(rank) +
                         " is not in a group of " + std::to_string(size));
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = hostname;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(timeout);
    StoreAdapter adapter(store, timeout);
    gloo::rendezvous::PrefixStore prefixed(prefix, adapter);
    context->connectFullMesh(prefixed, device);
    std::unique_ptr<SharedMemoryLane> lane;
    if (Status s =
            SharedMemoryLane::create(store, prefix, rank, size, timeout, lane);
        !s.ok())
      return s;
    out = std::make_unique<GlooCommunicator>(rank, size, std::move(context),
                                             std::move(lane), timeout);
    return Status::success();
  } catch (const std::exception &e) {
    return Status::error("communicator " + quote(prefix) + ": rank " +
                         std::to_string(rank) + " of " + std::to_string(size) +
                         " could not connect to its peers: " + e.what());
  }
}

namespace {
/// Three gloo groups: every rank, this node's ranks, and (on each node's
/// first rank) the nodes' first ranks.
class HierarchicalCommunicator : public Communicator {
public:
  HierarchicalCommunicator(int rank, int size,
                           std::unique_ptr<Communicator> world,
                           std::unique_ptr<Communicator> local,
                           std::unique_ptr<Communicator> leaders)
      : Communicator(rank, size), world(std::move(world)),
        local(std::move(local)), leaders(std::move(leaders)) {}

  Status allReduceSum(float *data, size_t count) override {
    if (Status s = local->allReduceSum(data, count); !s.ok())
      return s;
    if (leaders)
      if (Status s = leaders->allReduceSum(data, count); !s.ok())
        return s;
    return local->broadcast(data, count, 0);
  }
  Status allGather(const float *in, size_t count, float *out) override {
    return world->allGather(in, count, out);
  }
  Status allToAll(const float *in, size_t count, float *out) override {
    return world->allToAll(in, count, out);
  }
  Status broadcast(float *data, size_t count, int root) override {
    return world->broadcast(data, count, root);
  }
  Status barrier() override { return world->barrier(); }
  std::string describe() const override {
    return "all-reduce within each node over " + local->describe() +
           ", then between nodes, everything else over " + world->describe();
  }
  Status send(const float *data, size_t count, int peer,
              uint64_t tag) override {
    return world->send(data, count, peer, tag);
  }
  Status recv(float *data, size_t count, int peer, uint64_t tag) override {
    return world->recv(data, count, peer, tag);
  }
  bool concurrentTransfers() const override {
    return world->concurrentTransfers();
  }
  std::unique_ptr<PendingTransfer> startRecv(float *data, size_t count,
                                             int peer, uint64_t tag) override {
    return world->startRecv(data, count, peer, tag);
  }

private:
  std::unique_ptr<Communicator> world, local, leaders;
};
} // namespace

Status weft::rt::createHierarchicalCommunicator(
    StoreClient &store, const std::string &prefix, int rank, int size,
    int localSize, const std::string &hostname,
    std::chrono::milliseconds timeout, std::unique_ptr<Communicator> &out) {
  if (localSize < 1 || size % localSize != 0)
    return Status::error(
        "communicator " + quote(prefix) + ": " + std::to_string(size) +
        " ranks do not split into nodes of " + std::to_string(localSize));
  std::unique_ptr<Communicator> world, local, leaders;
  if (Status s = createGlooCommunicator(store, prefix + "/world", rank, size,
                                        hostname, timeout, world);
      !s.ok())
    return s;
  if (localSize == size) {
    out = std::move(world);
    return Status::success();
  }
  int node = rank / localSize, localRank = rank % localSize;
  if (Status s = createGlooCommunicator(
          store, prefix + "/node" + std::to_string(node), localRank, localSize,
          hostname, timeout, local);
      !s.ok())
    return s;
  if (localRank == 0)
    if (Status s = createGlooCommunicator(store, prefix + "/leaders", node,
                                          size / localSize, hostname, timeout,
                                          leaders);
        !s.ok())
      return s;
  out = std::make_unique<HierarchicalCommunicator>(
      rank, size, std::move(world), std::move(local), std::move(leaders));
  return Status::success();
}

//===----------------------------------------------------------------------===//
// CommThread
//===----------------------------------------------------------------------===//

CommThread::CommThread(Communicator &comm)
    : comm(comm), lane(trace::newLane()), tracing(trace::enabled()) {
  thread = std::thread([this] { run(); });
}

CommThread::~CommThread() {
  (void)waitAll();
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  changed.notify_all();
  thread.join();
}

CommThread::Ticket CommThread::issue(const char *what, size_t bytes,
                                     std::function<Status()> work) {
  std::lock_guard<std::mutex> lock(mutex);
  Ticket ticket = ++issued;
  queue.push_back({ticket, what, bytes, std::move(work)});
  changed.notify_all();
  return ticket;
}

CommThread::Ticket CommThread::allReduceSum(float *data, size_t count) {
  return issue("all_reduce", count * sizeof(float),
               [this, data, count] { return comm.allReduceSum(data, count); });
}

CommThread::Ticket CommThread::allGather(const float *in, size_t count,
                                         float *out) {
  return issue("all_gather", count * sizeof(float), [this, in, count, out] {
    return comm.allGather(in, count, out);
  });
}

CommThread::Ticket CommThread::reduceScatterSum(const float *in, size_t count,
                                                float *out) {
  return issue("reduce_scatter", count * sizeof(float), [this, in, count, out] {
    return comm.reduceScatterSum(in, count, out);
  });
}

CommThread::Ticket CommThread::allToAll(const float *in, size_t count,
                                        float *out) {
  return issue("all_to_all", count * sizeof(float), [this, in, count, out] {
    return comm.allToAll(in, count, out);
  });
}

CommThread::Ticket CommThread::send(const float *data, size_t count, int peer,
                                    uint64_t tag) {
  return issue("send", count * sizeof(float), [this, data, count, peer, tag] {
    return comm.send(data, count, peer, tag);
  });
}

CommThread::Ticket CommThread::recv(float *data, size_t count, int peer,
                                    uint64_t tag) {
  return issue("recv", count * sizeof(float), [this, data, count, peer, tag] {
    return comm.recv(data, count, peer, tag);
  });
}

void CommThread::run() {
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    changed.wait(lock, [&] { return stopping || !queue.empty(); });
    if (queue.empty())
      return;
    Work work = std::move(queue.front());
    queue.pop_front();
    Ticket ticket = work.ticket;
    // After a failure the group is out of step; what follows is not run.
    bool skip = !failed.ok();
    lock.unlock();
    // Untraced, a collective pays neither the clock nor the name.
    trace::Clock::time_point start;
    if (tracing)
      start = trace::Clock::now();
    Status status = skip ? Status::success() : work.run();
    if (tracing)
      trace::record(work.what, start, trace::Clock::now(), lane,
                    int64_t(work.bytes));
    lock.lock();
    if (!status.ok() && failed.ok())
      failed = status;
    completed = ticket;
    changed.notify_all();
  }
}

Status CommThread::wait(Ticket ticket) {
  std::unique_lock<std::mutex> lock(mutex);
  changed.wait(lock, [&] { return completed >= ticket; });
  return failed;
}

bool CommThread::finished(Ticket ticket) {
  std::lock_guard<std::mutex> lock(mutex);
  return completed >= ticket;
}

Status CommThread::waitAll() {
  Ticket last;
  {
    std::lock_guard<std::mutex> lock(mutex);
    last = issued;
  }
  return wait(last);
}
