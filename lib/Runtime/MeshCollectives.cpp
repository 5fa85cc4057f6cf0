//===- MeshCollectives.cpp - A mesh's communicators, as generated code sees --===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// A step compiled for a mesh runs on meshDevices() ranks. Rank r sits at
// coordinates row-major over the mesh's axes (major first); the group of
// axis a is the ranks that share r's coordinates on every other axis, and
// r's rank in it is its coordinate on a. RuntimeContext::joinMesh builds one
// communicator per axis group and lists them in the WeftRuntimeContext; the
// `weft_rt_*` functions (Kernels.h), which --weft-lower-collectives calls,
// find the group's communicator through the context and run on it.
//
//===----------------------------------------------------------------------===//

#include "MeshInternal.h"

#include "weft/Runtime/Context.h"
#include "weft/Runtime/Kernels.h"
#include "weft/Runtime/Trace.h"

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

using namespace weft::rt;

namespace {

/// Seconds since `start`: what a rank spent waiting in a transfer or a
/// collective.
double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       start)
      .count();
}

/// "dp=2,tp=4".
std::string describe(const std::vector<MeshAxisSpec> &mesh) {
  std::string out;
  for (const MeshAxisSpec &a : mesh)
    out += (out.empty() ? "" : ",") + a.name + "=" + std::to_string(a.size);
  return out;
}

} // namespace

Status RuntimeContext::joinMesh(const std::vector<MeshAxisSpec> &mesh,
                                std::chrono::milliseconds timeout) {
  int64_t devices = 1;
  for (const MeshAxisSpec &a : mesh)
    devices *= a.size;
  if (devices != info.worldSize) {
    std::string who = info.launcher.empty()
                          ? "this process was started alone (no launcher's "
                            "environment)"
                          : info.launcher + "'s environment says " +
                                std::to_string(info.worldSize) + " ranks";
    std::string recompile =
        mesh.size() == 1 ? "recompile with --mesh " + mesh[0].name + "=" +
                               std::to_string(info.worldSize)
                         : "recompile for a mesh of " +
                               std::to_string(info.worldSize) + " devices";
    return Status::error(
        who + ", but this executable was compiled for the mesh " +
        describe(mesh) + " (" + std::to_string(devices) + " ranks): start " +
        std::to_string(devices) + " ranks (weftrun --nproc-per-node " +
        std::to_string(devices) + ", torchrun, mpirun) or " + recompile);
  }

  // A peer that died closes its sockets; writing to one must be an error
  // the collective reports (EPIPE), not a SIGPIPE that kills this rank
  // without a word.
  std::signal(SIGPIPE, SIG_IGN);

  // Rank 0 hosts the store; on several nodes it listens on every interface.
  bool oneNode = info.localWorldSize >= info.worldSize;
  if (info.rank == 0)
    if (Status s = StoreServer::start(oneNode ? info.masterAddr : "0.0.0.0",
                                      info.masterPort, storeServer);
        !s.ok())
      return s;
  if (Status s =
          StoreClient::connect(info.masterAddr, info.masterPort, timeout, store);
      !s.ok())
    return s;

  std::string host = peerAddress(info);
  axisNames.clear();
  axisGroups.clear();
  axes.clear();
  // This rank's coordinate on each axis, row-major (major axis first).
  size_t n = mesh.size();
  std::vector<int64_t> strides(n), coords(n);
  for (size_t i = n, s = 1; i-- > 0;) {
    strides[i] = int64_t(s);
    coords[i] = (info.rank / strides[i]) % mesh[i].size;
    s *= size_t(mesh[i].size);
  }
  // One group per non-empty set of axes (bit i: axis i), in mask order on
  // every rank: the ranks sharing this rank's coordinates on the other
  // axes, numbered row-major over the set's axes (weft_rt_axis_index).
  axisGroups.resize(size_t(1) << n);
  // A switch to measure what receiving ahead saves (bench/RESULTS.md).
  const char *aheadEnv = std::getenv("WEFT_RECV_AHEAD");
  bool recvAhead = !(aheadEnv && std::string(aheadEnv) == "0");
  for (uint64_t mask = 1; mask < (uint64_t(1) << n); ++mask) {
    std::vector<size_t> in;
    for (size_t i = 0; i < n; ++i)
      if (mask & (uint64_t(1) << i))
        in.push_back(i);
    int64_t size = 1, index = 0, first = info.rank;
    for (size_t i : in) {
      size *= mesh[i].size;
      index = index * mesh[i].size + coords[i];
      first -= coords[i] * strides[i];
    }
    // Members on this node: ranks are numbered node by node.
    int64_t nodeBegin = info.rank - info.localRank;
    int64_t nodeEnd = nodeBegin + info.localWorldSize;
    int local = 0;
    for (int64_t g = 0; g < size; ++g) {
      int64_t member = first, rest = g;
      for (size_t k = in.size(); k-- > 0;) {
        member += (rest % mesh[in[k]].size) * strides[in[k]];
        rest /= mesh[in[k]].size;
      }
      local += member >= nodeBegin && member < nodeEnd;
    }
    std::string names;
    for (size_t i : in)
      names += (names.empty() ? "" : ",") + mesh[i].name;
    // The group's first rank (coordinate 0 on its axes) names it.
    std::string prefix =
        "weft/axis/" + names + "/" + std::to_string(first);
    std::unique_ptr<Communicator> comm;
    Status s =
        local > 1 && local < size && size % local == 0
            ? createHierarchicalCommunicator(*store, prefix, int(index),
                                             int(size), local, host, timeout,
                                             comm)
            : createGlooCommunicator(*store, prefix, int(index), int(size),
                                     host, timeout, comm);
    if (!s.ok())
      return Status::error("mesh axis " + quote(names) + ": " + s.message);
    axisGroups[mask] = std::make_unique<AxisGroup>(std::move(comm));
    axisGroups[mask]->mesh = &axisGroups;
    axisGroups[mask]->store = store.get();
    axisGroups[mask]->prefix = prefix;
    axisGroups[mask]->timeout = timeout;
    if (!recvAhead)
      axisGroups[mask]->recvThread.reset();
  }
  for (size_t i = 0; i < n; ++i) {
    axisNames.push_back(mesh[i].name);
    axes.push_back({nullptr, int32_t(mesh[i].size), int32_t(coords[i]),
                    nullptr});
  }
  for (size_t i = 0; i < n; ++i) {
    axes[i].name = axisNames[i].c_str();
    axes[i].comm = axisGroups[size_t(1) << i].get();
  }
  context.numAxes = int32_t(axes.size());
  context.axes = axes.data();
  return Status::success();
}

std::string RuntimeContext::describeCollectives() const {
  std::string text;
  for (size_t i = 0; i < axes.size(); ++i) {
    const AxisGroup *group = axisGroups[size_t(1) << i].get();
    if (!group || !group->comm || axes[i].size < 2)
      continue;
    std::string how = group->comm->describe();
    text += (text.empty() ? "" : "; ") + axisNames[i] + "=" +
            std::to_string(axes[i].size) + ": " +
            (how.empty() ? "(no description)" : how);
  }
  return text.empty() ? "none (every axis has one rank)" : text;
}

double RuntimeContext::takeTransferSeconds() {
  double total = 0;
  for (std::unique_ptr<AxisGroup> &group : axisGroups)
    if (group) {
      total += group->transferSeconds;
      group->transferSeconds = 0;
    }
  return total;
}

double RuntimeContext::takeCollectiveSeconds() {
  double total = 0;
  for (std::unique_ptr<AxisGroup> &group : axisGroups)
    if (group) {
      total += group->collectiveSeconds;
      group->collectiveSeconds = 0;
    }
  return total;
}

namespace {
/// Posts the group's next early recvs, up to AxisGroup::kRecvsAhead.
void postEarlyRecvs(AxisGroup &group) {
  while (group.recvThread && group.early.size() < AxisGroup::kRecvsAhead &&
         group.nextEarly < group.lastStepRecvs.size()) {
    const AxisGroup::RecvKey &key = group.lastStepRecvs[group.nextEarly++];
    AxisGroup::EarlyRecv &e = group.early.emplace_back();
    e.key = key;
    if (!group.spareRecvBuffers.empty()) {
      e.data = std::move(group.spareRecvBuffers.back());
      group.spareRecvBuffers.pop_back();
    }
    e.data.resize(size_t(key.count));
    // Posted by the communicator where it can: the data then wakes the
    // step's own thread, not a thread of ours that wakes it in turn (a
    // pipelined step of the demo GPT on this host's two busy cores: 4.5
    // ms against 6.1 with 4 micro-batches, 1.9 against 2.4 with one).
    // Recvs of one tag match in order, so only once recvThread has none
    // queued.
    if (group.recvThread->finished(group.lastThreadRecv))
      e.posted = group.comm->startRecv(e.data.data(), size_t(key.count),
                                       int(key.peer), uint64_t(key.tag));
    if (!e.posted)
      e.ticket = group.lastThreadRecv = group.recvThread->recv(
          e.data.data(), size_t(key.count), int(key.peer), uint64_t(key.tag));
  }
}
} // namespace

void RuntimeContext::beginStep() {
  for (std::unique_ptr<AxisGroup> &group : axisGroups) {
    if (!group)
      continue;
    group->inStep = true;
    group->stepRecvs.clear();
    group->nextEarly = 0;
    postEarlyRecvs(*group);
  }
}

Status RuntimeContext::drainTransfers() {
  for (std::unique_ptr<AxisGroup> &group : axisGroups) {
    if (!group)
      continue;
    if (group->inStep) {
      group->inStep = false;
      // A compiled step's recvs do not change; were they to, the early
      // recvs left would take messages meant for later ones.
      if (group->recvThread && (!group->early.empty() ||
                                group->nextEarly < group->lastStepRecvs.size()))
        return Status::error(
            "this step issued other receives than the step before (" +
            std::to_string(group->stepRecvs.size()) + " against " +
            std::to_string(group->lastStepRecvs.size()) +
            "), so the receives posted ahead of it were not all taken; run "
            "with WEFT_RECV_AHEAD=0 and report it");
      group->lastStepRecvs = std::move(group->stepRecvs);
    }
    if (group->sends.empty())
      continue;
    auto start = std::chrono::steady_clock::now();
    Status s = group->sender().waitAll();
    group->sends.clear();
    group->transferSeconds += secondsSince(start);
    if (!s.ok())
      return s;
  }
  return Status::success();
}

Status RuntimeContext::finishDeviceCollectives() {
  for (std::unique_ptr<AxisGroup> &group : axisGroups)
    if (group && group->device)
      if (Status s = group->device->finish(); !s.ok())
        return s;
  return Status::success();
}

Status RuntimeContext::allReduceSum(std::vector<float> &values) {
  if (axisGroups.empty() || values.empty())
    return Status::success();
  // The group of every axis: the whole mesh.
  AxisGroup *all = axisGroups.back().get();
  if (!all)
    return Status::error("the mesh has no communicator over all its axes");
  return all->thread->wait(
      all->thread->allReduceSum(values.data(), values.size()));
}

//===----------------------------------------------------------------------===//
// What generated code calls
//===----------------------------------------------------------------------===//

namespace {

/// "dp,pp": the names of the axes in `axisMask`.
std::string axesOf(const WeftRuntimeContext *ctx, int64_t axisMask) {
  std::string axes;
  for (int i = 0; ctx && i < ctx->numAxes; ++i)
    if (axisMask & (int64_t(1) << i))
      axes += std::string(axes.empty() ? "" : ",") + ctx->axes[i].name;
  return axes;
}

/// A span of the step's own thread in the trace (WEFT_TRACE): `what` over
/// the axes of `axisMask`, from `start` until now, where `group` traces.
void traceWait(const WeftRuntimeContext *ctx, const AxisGroup &group,
               const char *what, int64_t axisMask,
               trace::Clock::time_point start, int64_t bytes = -1) {
  if (group.thread->traced())
    trace::record(std::string(what) + " " + axesOf(ctx, axisMask), start,
                  trace::Clock::now(), 0, bytes);
}

} // namespace

[[noreturn]] void weft::rt::detail::meshDie(const WeftRuntimeContext *ctx,
                                            const char *what, int64_t axisMask,
                                            const std::string &why) {
  std::string axes = axesOf(ctx, axisMask);
  std::string line = "error: rank " + std::to_string(ctx ? ctx->rank : -1) +
                     ": " + what + " over mesh axis " +
                     (axes.empty() ? "(mask " + std::to_string(axisMask) + ")"
                                   : axes) +
                     " failed: " + why + "\n";
  // One write, so that ranks sharing stderr do not interleave a line.
  ssize_t ignored = ::write(2, line.data(), line.size());
  (void)ignored;
  ::_exit(1);
}

AxisGroup &weft::rt::detail::meshGroup(const WeftRuntimeContext *ctx,
                                       const char *what, int64_t axisMask) {
  if (!ctx || ctx->numAxes <= 0)
    detail::meshDie(
        ctx, what, axisMask,
        "the runtime context has no mesh axes (the executable's model JSON "
        "lacks its mesh)");
  if (axisMask <= 0 || axisMask >= (int64_t(1) << ctx->numAxes))
    detail::meshDie(ctx, what, axisMask,
                    "the mask names axes the runtime context does not have");
  // Every group of the mesh is reachable from any axis's (joinMesh).
  auto *any = static_cast<AxisGroup *>(ctx->axes[0].comm);
  AxisGroup *group =
      any && any->mesh && size_t(axisMask) < any->mesh->size()
          ? (*any->mesh)[size_t(axisMask)].get()
          : nullptr;
  if (!group)
    detail::meshDie(ctx, what, axisMask, "the group has no communicator");
  return *group;
}

using detail::meshCheck;
using detail::meshDie;
using detail::meshGroup;

namespace {

/// Runs `ticket` to completion: collectives run on the group's thread,
/// behind any bucket still in flight.
void finish(const WeftRuntimeContext *ctx, const char *what, int64_t axisMask,
            AxisGroup &group, CommThread::Ticket ticket) {
  auto start = std::chrono::steady_clock::now();
  meshCheck(ctx, what, axisMask, group.thread->wait(ticket));
  traceWait(ctx, group, what, axisMask, start);
  // A receive's wait is pipeline time (transferSeconds), not a
  // collective's.
  if (std::strcmp(what, "recv") != 0)
    group.collectiveSeconds += secondsSince(start);
}

} // namespace

extern "C" void weft_rt_all_reduce_f32(const WeftRuntimeContext *ctx,
                                       int64_t axisMask, const float *in,
                                       float *out, int64_t count) {
  AxisGroup &group = meshGroup(ctx, "all_reduce", axisMask);
  std::memcpy(out, in, size_t(count) * sizeof(float));
  finish(ctx, "all_reduce", axisMask, group,
         group.thread->allReduceSum(out, size_t(count)));
}

BlockCopy RankBlocks::copy(size_t g) const {
  // The interleaved side: rows n * inner apart, rank g's at g * inner.
  if (toRanks)
    return {g * stride, g * inner, inner, n * inner, inner, outer};
  return {g * inner, g * stride, n * inner, inner, inner, outer};
}

void RankBlocks::run(const float *src, float *dst) const {
  for (size_t g = 0; g < n; ++g) {
    BlockCopy c = copy(g);
    for (size_t row = 0; row < c.height; ++row)
      std::memcpy(dst + c.dstOffset + row * c.dstPitch,
                  src + c.srcOffset + row * c.srcPitch,
                  c.width * sizeof(float));
  }
}

DeviceQueue::~DeviceQueue() = default;
DeviceGroup::~DeviceGroup() = default;

namespace {
void blocksByRank(const float *in, size_t n, int64_t outer, int64_t inner,
                  float *dst, size_t stride) {
  RankBlocks{n, size_t(outer), size_t(inner), stride, true}.run(in, dst);
}

void interleaveByRank(const float *from, size_t n, int64_t outer,
                      int64_t inner, size_t stride, float *out) {
  RankBlocks{n, size_t(outer), size_t(inner), stride, false}.run(from, out);
}
} // namespace

extern "C" void weft_rt_all_gather_f32(const WeftRuntimeContext *ctx,
                                       int64_t axisMask, const float *in,
                                       float *out, int64_t outer,
                                       int64_t inner) {
  AxisGroup &group = meshGroup(ctx, "all_gather", axisMask);
  size_t n = size_t(group.comm->size()),
         block = size_t(outer) * size_t(inner);
  if (outer == 1) {
    finish(ctx, "all_gather", axisMask, group,
           group.thread->allGather(in, block, out));
    return;
  }
  // The communicator gathers whole buffers in rank order ([g][o][i]); the
  // dim being gathered is inside, so interleave ([o][g][i]).
  std::vector<float> gathered(n * block);
  finish(ctx, "all_gather", axisMask, group,
         group.thread->allGather(in, block, gathered.data()));
  interleaveByRank(gathered.data(), n, outer, inner, block, out);
}


extern "C" void weft_rt_reduce_scatter_f32(const WeftRuntimeContext *ctx,
                                           int64_t axisMask, const float *in,
                                           float *out, int64_t outer,
                                           int64_t inner) {
  AxisGroup &group = meshGroup(ctx, "reduce_scatter", axisMask);
  size_t n = size_t(group.comm->size()),
         block = size_t(outer) * size_t(inner);
  if (outer == 1) {
    finish(ctx, "reduce_scatter", axisMask, group,
           group.thread->reduceScatterSum(in, block, out));
    return;
  }
  std::vector<float> blocks(n * block);
  blocksByRank(in, n, outer, inner, blocks.data(), block);
  finish(ctx, "reduce_scatter", axisMask, group,
         group.thread->reduceScatterSum(blocks.data(), block, out));
}

extern "C" void weft_rt_all_to_all_f32(const WeftRuntimeContext *ctx,
                                       int64_t axisMask, const float *in,
                                       float *out, int64_t splitOuter,
                                       int64_t splitInner, int64_t concatOuter,
                                       int64_t concatInner) {
  AxisGroup &group = meshGroup(ctx, "all_to_all", axisMask);
  detail::meshCheckAllToAll(ctx, axisMask, splitOuter, splitInner, concatOuter,
                            concatInner);
  size_t n = size_t(group.comm->size()),
         block = size_t(splitOuter) * size_t(splitInner);
  // The communicator sends and receives whole blocks in rank order
  // ([g][o][i]); where a dim comes before the split (or the concatenated)
  // one, the blocks are interleaved ([o][g][i]) and are copied.
  std::vector<float> sent, received;
  const float *send = in;
  if (splitOuter != 1) {
    sent.resize(n * block);
    blocksByRank(in, n, splitOuter, splitInner, sent.data(), block);
    send = sent.data();
  }
  float *receive = out;
  if (concatOuter != 1) {
    received.resize(n * block);
    receive = received.data();
  }
  finish(ctx, "all_to_all", axisMask, group,
         group.thread->allToAll(send, block, receive));
  if (concatOuter != 1)
    interleaveByRank(received.data(), n, concatOuter, concatInner, block, out);
}

namespace {
/// Checks what the communicator's types cannot hold (a negative count,
/// peer or tag) before it sees them.
void checkTransferArgs(const WeftRuntimeContext *ctx, const char *what,
                       int64_t axisMask, int64_t count, int64_t peer,
                       int64_t tag) {
  if (count < 0 || peer < 0 || tag < 0 || peer > INT32_MAX)
    meshDie(ctx, what, axisMask,
        "count " + std::to_string(count) + ", peer " + std::to_string(peer) +
            " or tag " + std::to_string(tag) +
            " is out of range (none may be negative; the peer is a rank of "
            "the group)");
}
} // namespace

extern "C" void weft_rt_send_f32(const WeftRuntimeContext *ctx,
                                 int64_t axisMask, const float *in,
                                 int64_t count, int64_t peer, int64_t tag) {
  AxisGroup &group = meshGroup(ctx, "send", axisMask);
  checkTransferArgs(ctx, "send", axisMask, count, peer, tag);
  auto start = std::chrono::steady_clock::now();
  // The step goes on while the data travels: the runtime sends its own
  // copy (the step may reuse `in` at once) and the thread keeps the
  // order of transfers; RuntimeContext::drainTransfers waits for the
  // rest once the step is done.
  while (!group.sends.empty() &&
         group.sender().finished(group.sends.front().first))
    group.sends.pop_front();
  // A bad peer or tag fails here, at the op, not at the drain.
  meshCheck(ctx, "send", axisMask,
        group.comm->checkTransfer(
            group.comm->transferText(true, size_t(count) * sizeof(float),
                                     int(peer), uint64_t(tag)),
            int(peer), uint64_t(tag)));
  std::vector<float> copy(in, in + count);
  CommThread::Ticket ticket =
      group.sender().send(copy.data(), size_t(count), int(peer), uint64_t(tag));
  group.sends.emplace_back(ticket, std::move(copy));
  group.transferSeconds += secondsSince(start);
}

extern "C" void weft_rt_recv_f32(const WeftRuntimeContext *ctx,
                                 int64_t axisMask, float *out, int64_t count,
                                 int64_t peer, int64_t tag) {
  AxisGroup &group = meshGroup(ctx, "recv", axisMask);
  checkTransferArgs(ctx, "recv", axisMask, count, peer, tag);
  auto start = std::chrono::steady_clock::now();
  AxisGroup::RecvKey key{peer, tag, count};
  if (group.inStep && group.recvThread)
    group.stepRecvs.push_back(key);
  if (!group.early.empty()) {
    AxisGroup::EarlyRecv &e = group.early.front();
    if (!(e.key == key))
      meshDie(ctx, "recv", axisMask,
          "this step's receives differ from the step before's: expected " +
              group.comm->transferText(false,
                                       size_t(e.key.count) * sizeof(float),
                                       int(e.key.peer), uint64_t(e.key.tag)) +
              ", got " +
              group.comm->transferText(false, size_t(count) * sizeof(float),
                                       int(peer), uint64_t(tag)) +
              "; run with WEFT_RECV_AHEAD=0 and report it");
    meshCheck(ctx, "recv", axisMask,
              e.posted ? e.posted->wait() : group.recvThread->wait(e.ticket));
    std::memcpy(out, e.data.data(), size_t(count) * sizeof(float));
    traceWait(ctx, group, "recv (posted ahead)", axisMask, start,
              count * int64_t(sizeof(float)));
    group.spareRecvBuffers.push_back(std::move(e.data));
    group.early.pop_front();
    postEarlyRecvs(group);
  } else {
    finish(ctx, "recv", axisMask, group,
           group.thread->recv(out, size_t(count), int(peer), uint64_t(tag)));
  }
  group.transferSeconds += secondsSince(start);
}

//===----------------------------------------------------------------------===//
// Buckets (--weft-bucket-collectives, --weft-lower-collectives)
//===----------------------------------------------------------------------===//

using detail::bucketWhat;
using detail::kAllGather;
using detail::kAllReduce;
using detail::kReduceScatter;

extern "C" void weft_rt_bucket_put_f32(const WeftRuntimeContext *ctx,
                                       int64_t axisMask, int64_t id,
                                       int64_t kind, int64_t region,
                                       int64_t offset, const float *in,
                                       int64_t outer, int64_t inner) {
  AxisGroup &group = meshGroup(ctx, "bucket", axisMask);
  AxisGroup::Bucket &bucket = detail::meshBucket(ctx, axisMask, group.buckets, id);
  detail::meshCheckBucketPut(ctx, axisMask, id, bucket.inFlight, kind, region,
                             offset, outer, inner);
  // A reduce-scatter's input holds every rank's block; the others' only
  // this rank's.
  size_t n = kind == kReduceScatter ? size_t(group.comm->size()) : 1;
  bucket.data.resize(n * size_t(region));
  bucket.started = false;
  blocksByRank(in, n, outer, inner, bucket.data.data() + offset,
               size_t(region));
}

extern "C" void weft_rt_bucket_start(const WeftRuntimeContext *ctx,
                                     int64_t axisMask, int64_t id,
                                     int64_t kind, int64_t region) {
  AxisGroup &group = meshGroup(ctx, "bucket", axisMask);
  AxisGroup::Bucket &bucket = detail::meshBucket(ctx, axisMask, group.buckets, id);
  size_t n = size_t(group.comm->size());
  size_t filled = kind == kReduceScatter ? n * size_t(region) : size_t(region);
  detail::meshCheckBucketStart(ctx, axisMask, id, kind,
                               !bucket.inFlight && !bucket.started &&
                                   bucket.data.size() == filled);
  bucket.kind = kind;
  switch (kind) {
  case kReduceScatter:
    bucket.result.resize(size_t(region));
    bucket.ticket = group.thread->reduceScatterSum(
        bucket.data.data(), size_t(region), bucket.result.data());
    break;
  case kAllGather:
    bucket.result.resize(n * size_t(region));
    bucket.ticket = group.thread->allGather(bucket.data.data(), size_t(region),
                                            bucket.result.data());
    break;
  default:
    bucket.ticket =
        group.thread->allReduceSum(bucket.data.data(), size_t(region));
  }
  bucket.inFlight = true;
  bucket.started = true;
}

extern "C" void weft_rt_bucket_get_f32(const WeftRuntimeContext *ctx,
                                       int64_t axisMask, int64_t id,
                                       int64_t offset, float *out,
                                       int64_t outer, int64_t inner) {
  AxisGroup &group = meshGroup(ctx, "bucket", axisMask);
  AxisGroup::Bucket &bucket = detail::meshBucket(ctx, axisMask, group.buckets, id);
  if (bucket.inFlight) {
    finish(ctx, bucketWhat(bucket.kind), axisMask, group, bucket.ticket);
    bucket.inFlight = false;
  }
  size_t n = size_t(group.comm->size());
  size_t block = size_t(outer) * size_t(inner);
  bool gather = bucket.kind == kAllGather;
  const std::vector<float> &from =
      bucket.kind == kAllReduce ? bucket.data : bucket.result;
  size_t region = gather ? from.size() / n : from.size();
  detail::meshCheckBucketGet(ctx, axisMask, id, bucket.kind, bucket.started,
                             offset, outer, inner, region);
  if (!gather) {
    std::memcpy(out, from.data() + offset, block * sizeof(float));
    return;
  }
  // Rank g's block sits at g * region.
  interleaveByRank(from.data() + offset, n, outer, inner, region, out);
}

extern "C" int64_t weft_rt_axis_index(const WeftRuntimeContext *ctx,
                                      int64_t axisMask) {
  // Row-major over the mask's axes, in mesh order.
  int64_t index = 0;
  for (int i = 0; ctx && i < ctx->numAxes; ++i)
    if (axisMask & (int64_t(1) << i))
      index = index * ctx->axes[i].size + ctx->axes[i].index;
  if (!ctx || axisMask <= 0 || axisMask >= (int64_t(1) << ctx->numAxes))
    meshDie(ctx, "shard_slice", axisMask,
        "the mask names axes the runtime context does not have");
  return index;
}
