//===- CollectivesTest.cpp - Rendezvous store and gloo collectives --------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Ranks are real processes (fork), as in a job: each connects to the store
// the parent hosts, joins a gloo group and checks the collectives' numbers.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Collectives.h"
#include "weft/Runtime/Rendezvous.h"

#include "RankProcesses.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <sys/wait.h>
#include <unistd.h>

using namespace weft::rt;
using weft::rt::test::runRanks;
using namespace std::chrono_literals;

namespace {

/// Connects to the store at `port` and joins the gloo group "dp" of `size`
/// ranks; false, with the error on stderr, when it cannot.
bool joinGroup(int port, int rank, int size, std::chrono::milliseconds timeout,
               std::unique_ptr<StoreClient> &client,
               std::unique_ptr<Communicator> &comm) {
  Status s = StoreClient::connect("127.0.0.1", port, 10s, client);
  if (s.ok())
    s = createGlooCommunicator(*client, "dp", rank, size, "127.0.0.1", timeout,
                               comm);
  if (!s.ok())
    std::fprintf(stderr, "%s\n", s.message.c_str());
  return s.ok();
}

/// All-reduces `count` floats, (rank + 1) * (i + 1) on each rank, and
/// checks each is `ranksTotal` (the sum of rank + 1) times i + 1: 0, or 4
/// when the call fails and 5 when a number is wrong.
int checkAllReduce(Communicator &comm, int rank, size_t count, int ranksTotal) {
  std::vector<float> x(count);
  for (size_t i = 0; i < count; ++i)
    x[i] = float((rank + 1) * (i + 1));
  if (!comm.allReduceSum(x.data(), count).ok())
    return 4;
  for (size_t i = 0; i < count; ++i)
    if (x[i] != float(ranksTotal * int(i + 1)))
      return 5;
  return 0;
}

TEST(RendezvousTest, SetAndWaitingGet) {
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
  int port = server->port();
  ASSERT_GT(port, 0);
  std::vector<int> codes = runRanks(2, [&](int rank) {
    std::unique_ptr<StoreClient> client;
    if (!StoreClient::connect("127.0.0.1", port, 5s, client).ok())
      return 2;
    if (rank == 1) {
      // Rank 0 waits for this.
      ::usleep(100000);
      return client->set("from1", {'h', 'i'}).ok() ? 0 : 3;
    }
    std::vector<char> value;
    Status s = client->get("from1", 5s, value);
    return s.ok() && value == std::vector<char>{'h', 'i'} ? 0 : 4;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(RendezvousTest, ErrorsSayWhatIsMissing) {
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
  // The port is taken.
  std::unique_ptr<StoreServer> second;
  Status busy = StoreServer::start("127.0.0.1", server->port(), second);
  EXPECT_FALSE(busy.ok());
  EXPECT_NE(busy.message.find("cannot listen on 127.0.0.1:" +
                              std::to_string(server->port())),
            std::string::npos)
      << busy.message;
  // A key no rank sets.
  std::unique_ptr<StoreClient> client;
  ASSERT_TRUE(
      StoreClient::connect("127.0.0.1", server->port(), 5s, client).ok());
  std::vector<char> value;
  Status missing = client->get("never", 200ms, value);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message.find("'never' was not set within 200 ms"),
            std::string::npos)
      << missing.message;
  // No store at all.
  int port = server->port();
  server.reset();
  client.reset();
  std::unique_ptr<StoreClient> orphan;
  Status unreachable = StoreClient::connect("127.0.0.1", port, 300ms, orphan);
  EXPECT_FALSE(unreachable.ok());
  EXPECT_NE(unreachable.message.find("cannot reach rank 0's store at "
                                     "127.0.0.1:" +
                                     std::to_string(port)),
            std::string::npos)
      << unreachable.message;
}

// Twice: small collectives through the shared-memory lane (ranks on one
// host), then, with WEFT_SHM_COLLECTIVES=0, all of them over gloo's TCP.
TEST(CollectivesTest, GlooMatchesTheArithmetic) {
  for (bool shared : {true, false}) {
    SCOPED_TRACE(shared ? "shared memory" : "TCP only");
    const int size = 3;
    std::unique_ptr<StoreServer> server;
    ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
    int port = server->port();
    std::vector<int> codes = runRanks(size, [&](int rank) {
      if (!shared)
        ::setenv("WEFT_SHM_COLLECTIVES", "0", 1);
      std::unique_ptr<StoreClient> client;
      std::unique_ptr<Communicator> comm;
      if (!joinGroup(port, rank, size, 10s, client, comm))
        return 3;
      bool lane = comm->describe().find("shared memory") != std::string::npos;
      if (lane != shared) {
        std::fprintf(stderr, "%s\n", comm->describe().c_str());
        return 19;
      }
      if (int code = checkAllReduce(*comm, rank, 1000, 6))
        return code;
      // All-gather: rank r contributes {r, r}.
      float mine[2] = {float(rank), float(rank)};
      std::vector<float> all(2 * size);
      if (!comm->allGather(mine, 2, all.data()).ok())
        return 6;
      for (int r = 0; r < size; ++r)
        if (all[2 * r] != float(r) || all[2 * r + 1] != float(r))
          return 7;
      // Reduce-scatter: rank q holds 0..5 times q + 1; rank r gets slice r
      // of the sum, 6x (each rank's term differs, so a ring that adds the
      // wrong rank's block is caught).
      std::vector<float> in(2 * size), out(2);
      for (size_t i = 0; i < in.size(); ++i)
        in[i] = float(i) * float(rank + 1);
      if (!comm->reduceScatterSum(in.data(), 2, out.data()).ok())
        return 8;
      if (out[0] != float(6 * 2 * rank) || out[1] != float(6 * (2 * rank + 1)))
        return 9;
      // Blocks of 1.2 MB move in three uneven segments, two in flight.
      const size_t big = 300001;
      std::vector<float> bigIn(big * size), bigOut(big);
      for (size_t i = 0; i < bigIn.size(); ++i)
        bigIn[i] = float(i % 1000) * float(rank + 1);
      if (!comm->reduceScatterSum(bigIn.data(), big, bigOut.data()).ok())
        return 15;
      for (size_t i = 0; i < big; ++i)
        if (bigOut[i] != float(6 * ((size_t(rank) * big + i) % 1000)))
          return 16;
      // And back, gathered the same way: rank q's block is q + i % 7.
      std::vector<float> gathered(big * size);
      for (size_t i = 0; i < big; ++i)
        bigOut[i] = float(rank + int(i % 7));
      if (!comm->allGather(bigOut.data(), big, gathered.data()).ok())
        return 17;
      for (size_t i = 0; i < gathered.size(); ++i)
        if (gathered[i] != float(i / big + (i % big) % 7))
          return 18;
      // All-to-all: rank q sends 100 q + 10 g + i to rank g (i < 2); rank r
      // gets 100 q + 10 r + i from each q, in rank order.
      std::vector<float> blocks(2 * size), got(2 * size);
      for (int g = 0; g < size; ++g)
        for (int i = 0; i < 2; ++i)
          blocks[2 * g + i] = float(100 * rank + 10 * g + i);
      if (!comm->allToAll(blocks.data(), 2, got.data()).ok())
        return 13;
      for (int q = 0; q < size; ++q)
        for (int i = 0; i < 2; ++i)
          if (got[2 * q + i] != float(100 * q + 10 * rank + i))
            return 14;
      // Broadcast from rank 2.
      float b[3] = {float(rank), 0, 0};
      if (!comm->broadcast(b, 3, 2).ok() || b[0] != 2.0f)
        return 10;
      if (comm->broadcast(b, 3, 7).ok())
        return 11;
      return comm->barrier().ok() ? 0 : 12;
    });
    EXPECT_EQ(codes, (std::vector<int>{0, 0, 0}));
  }
}

// Many collectives in a row, of sizes on both sides of the lane's slot, so
// that a rank reusing a set of slots before every rank has read it, or a
// counter compared the wrong way, shows as a wrong sum.
TEST(CollectivesTest, SharedMemoryLaneKeepsCollectivesApart) {
  const int size = 3;
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
  int port = server->port();
  std::vector<int> codes = runRanks(size, [&](int rank) {
    std::unique_ptr<StoreClient> client;
    std::unique_ptr<Communicator> comm;
    if (!joinGroup(port, rank, size, 10s, client, comm))
      return 3;
    const size_t sizes[] = {1, 7, 1000, 65536, 65537, 4096};
    for (int k = 0; k < 300; ++k) {
      size_t count = sizes[size_t(k) % 6];
      std::vector<float> x(count);
      for (size_t i = 0; i < count; ++i)
        x[i] = float((rank + 1) * (k + int(i % 100)));
      // Rank 1 lags now and then, so that the others run ahead into the
      // next collective's slots.
      if (rank == 1 && k % 7 == 0)
        ::usleep(2000);
      if (!comm->allReduceSum(x.data(), count).ok())
        return 4;
      for (size_t i = 0; i < count; ++i)
        if (x[i] != float(6 * (k + int(i % 100))))
          return 5;
      // All-to-all: rank q sends 100 q + 10 g + k % 10 to rank g.
      float blocks[3], got[3];
      for (int g = 0; g < size; ++g)
        blocks[g] = float(100 * rank + 10 * g + k % 10);
      if (!comm->allToAll(blocks, 1, got).ok())
        return 8;
      for (int q = 0; q < size; ++q)
        if (got[q] != float(100 * q + 10 * rank + k % 10))
          return 9;
      float mine[3] = {float(rank), float(k), float(rank * k)};
      float all[9];
      if (!comm->allGather(mine, 3, all).ok())
        return 6;
      for (int r = 0; r < size; ++r)
        if (all[3 * r] != float(r) || all[3 * r + 1] != float(k) ||
            all[3 * r + 2] != float(r * k))
          return 7;
    }
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 0}));
}

// A rank that exits without joining: its peer's wait names it at once
// rather than after the group's timeout.
TEST(CollectivesTest, SharedMemoryLaneNamesARankThatExited) {
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
  int port = server->port();
  std::vector<int> codes = runRanks(2, [&](int rank) {
    std::unique_ptr<StoreClient> client;
    std::unique_ptr<Communicator> comm;
    if (!joinGroup(port, rank, 2, 60s, client, comm))
      return 3;
    if (rank == 1)
      return 0;
    float x[4] = {1, 2, 3, 4};
    auto start = std::chrono::steady_clock::now();
    Status s = comm->allReduceSum(x, 4);
    auto took = std::chrono::steady_clock::now() - start;
    bool named =
        !s.ok() &&
        s.message.find("all-reduce on rank 0 of 2 failed: rank 1 "
                       "(process ") != std::string::npos &&
        s.message.find("exited before the all-reduce") != std::string::npos;
    if (!named || took > 10s) {
      std::fprintf(stderr, "%s\n", s.message.c_str());
      return 4;
    }
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(CollectivesTest, HierarchicalAllReduceAcrossTwoNodes) {
  // 2 nodes of 2 ranks: within, across the nodes' first ranks, within.
  const int size = 4, localSize = 2;
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
  int port = server->port();
  std::vector<int> codes = runRanks(size, [&](int rank) {
    std::unique_ptr<StoreClient> client;
    if (!StoreClient::connect("127.0.0.1", port, 10s, client).ok())
      return 2;
    std::unique_ptr<Communicator> comm;
    Status s = createHierarchicalCommunicator(*client, "dp", rank, size,
                                              localSize, "127.0.0.1", 10s,
                                              comm);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.message.c_str());
      return 3;
    }
    if (int code = checkAllReduce(*comm, rank, 257, 10))
      return code;
    std::vector<float> in(2 * size), out(2);
    for (size_t i = 0; i < in.size(); ++i)
      in[i] = float(i);
    if (!comm->reduceScatterSum(in.data(), 2, out.data()).ok() ||
        out[0] != float(4 * 2 * rank))
      return 6;
    float mine = float(rank), all[size];
    if (!comm->allGather(&mine, 1, all).ok() || all[3] != 3.0f)
      return 7;
    // All-to-all over all four ranks, across the nodes.
    float blocks[size], got[size];
    for (int g = 0; g < size; ++g)
      blocks[g] = float(10 * rank + g);
    if (!comm->allToAll(blocks, 1, got).ok())
      return 9;
    for (int q = 0; q < size; ++q)
      if (got[q] != float(10 * q + rank))
        return 10;
    // Send and recv across the nodes: rank 0 to rank 3, which answers
    // with its own rank.
    float pair[2] = {float(rank), 7};
    if (rank == 0 && (!comm->send(pair, 2, 3, 1).ok() ||
                      !comm->recv(pair, 2, 3, 2).ok() || pair[0] != 3))
      return 11;
    if (rank == 3) {
      if (!comm->recv(pair, 2, 0, 1).ok() || pair[0] != 0 || pair[1] != 7)
        return 12;
      pair[0] = 3;
      if (!comm->send(pair, 2, 0, 2).ok())
        return 13;
    }
    return comm->barrier().ok() ? 0 : 8;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 0, 0}));
  // Ranks that do not split into nodes are refused.
  std::unique_ptr<StoreClient> client;
  ASSERT_TRUE(StoreClient::connect("127.0.0.1", port, 5s, client).ok());
  std::unique_ptr<Communicator> comm;
  Status s = createHierarchicalCommunicator(*client, "x", 0, 3, 2, "127.0.0.1",
                                            1s, comm);
  EXPECT_NE(s.message.find("3 ranks do not split into nodes of 2"),
            std::string::npos)
      << s.message;
}

/// Prints a failed Status (so that the test shows it) and says whether it
/// failed.
bool failed(const Status &s, const char *what) {
  if (s.ok())
    return false;
  std::fprintf(stderr, "%s: %s\n", what, s.message.c_str());
  return true;
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

/// Element i of what a test's `from` sends with `tag`: distinct over both.
float sent(int from, uint64_t tag, size_t i) {
  return float(1000000 * from + 1000 * int(tag) + int(i));
}

std::vector<float> message(int from, uint64_t tag, size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i)
    values[i] = sent(from, tag, i);
  return values;
}

/// The element of `got` that is not what `from` sends with `tag`, or -1.
long firstWrong(const std::vector<float> &got, int from, uint64_t tag) {
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != sent(from, tag, i))
      return long(i);
  return -1;
}

TEST(CollectivesTest, SendAndRecvRoundTrip) {
  // Rank 0 sends to rank 1, which returns each value plus one; then an
  // empty message each way (the sizes still have to agree).
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
  int port = server->port();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(2, [&](int rank) {
    std::unique_ptr<StoreClient> client;
    std::unique_ptr<Communicator> comm;
    if (!joinGroup(port, rank, 2, 10s, client, comm))
      return 3;
    const size_t n = 100003; // Several socket writes, not a multiple of 4.
    std::vector<float> x(n, -1.0f);
    if (rank == 0) {
      std::vector<float> mine = message(0, 3, n);
      if (failed(comm->send(mine.data(), n, 1, 3), "send"))
        return 4;
      if (failed(comm->recv(x.data(), n, 1, 4), "recv"))
        return 5;
      for (size_t i = 0; i < n; ++i)
        if (x[i] != mine[i] + 1)
          return 6;
      return failed(comm->send(nullptr, 0, 1, 5), "empty send") ? 7 : 0;
    }
    if (failed(comm->recv(x.data(), n, 0, 3), "recv"))
      return 4;
    if (firstWrong(x, 0, 3) >= 0)
      return 5;
    for (float &v : x)
      v += 1;
    if (failed(comm->send(x.data(), n, 0, 4), "send"))
      return 6;
    return failed(comm->recv(nullptr, 0, 0, 5), "empty recv") ? 7 : 0;
  }, &errs);
  EXPECT_EQ(codes, (std::vector<int>{0, 0})) << errs[0] << errs[1];
}

TEST(CollectivesTest, SendAndRecvAroundARingOfThree) {
  // Rank r sends to r + 1 and receives from r - 1. Sends block until the
  // peer receives, so even ranks send first and odd ranks receive first:
  // with all sending first, the ring would wait until the timeout. The
  // ring goes round twice, through the communicator and through a
  // CommThread, as generated code calls it.
  const int size = 3;
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
  int port = server->port();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(size, [&](int rank) {
    std::unique_ptr<StoreClient> client;
    std::unique_ptr<Communicator> comm;
    if (!joinGroup(port, rank, size, 10s, client, comm))
      return 3;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    std::vector<float> mine = message(rank, 1, 257), got(257);
    bool sendFirst = rank % 2 == 0;
    for (int round = 0; round < 2; ++round) {
      Status first, second;
      if (round == 0) {
        first = sendFirst ? comm->send(mine.data(), mine.size(), next, 1)
                          : comm->recv(got.data(), got.size(), prev, 1);
        second = sendFirst ? comm->recv(got.data(), got.size(), prev, 1)
                           : comm->send(mine.data(), mine.size(), next, 1);
      } else {
        CommThread thread(*comm);
        CommThread::Ticket a =
            sendFirst ? thread.send(mine.data(), mine.size(), next, 1)
                      : thread.recv(got.data(), got.size(), prev, 1);
        CommThread::Ticket b =
            sendFirst ? thread.recv(got.data(), got.size(), prev, 1)
                      : thread.send(mine.data(), mine.size(), next, 1);
        first = thread.wait(a);
        second = thread.wait(b);
      }
      if (failed(first, "first") || failed(second, "second"))
        return 4;
      if (long i = firstWrong(got, prev, 1); i >= 0) {
        std::fprintf(stderr, "round %d: element %ld is %g\n", round, i,
                     double(got[size_t(i)]));
        return 5;
      }
      std::fill(got.begin(), got.end(), -1.0f);
    }
    return 0;
  }, &errs);
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 0}))
      << errs[0] << errs[1] << errs[2];
}

TEST(CollectivesTest, AnAxisGroupSendDoesNotHoldUpItsRecvs) {
  // Both ranks send, then receive what the other sent, as two pipeline
  // stages do (an activation one way, a gradient the other). A send
  // returns once the peer has posted its recv: behind it, on one thread,
  // each rank's recv would never be posted, and both would wait until the
  // timeout. The group runs gloo's sends on a thread of their own.
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
  int port = server->port();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(
      2,
      [&](int rank) {
        std::unique_ptr<StoreClient> client;
        std::unique_ptr<Communicator> comm;
        if (!joinGroup(port, rank, 2, 5s, client, comm))
          return 3;
        if (!comm->concurrentTransfers())
          return 4;
        AxisGroup group(std::move(comm));
        int peer = 1 - rank;
        std::vector<float> mine = message(rank, 1, 4099), got(4099);
        CommThread::Ticket sent =
            group.sender().send(mine.data(), mine.size(), peer, uint64_t(rank));
        CommThread::Ticket received =
            group.thread->recv(got.data(), got.size(), peer, uint64_t(peer));
        if (failed(group.thread->wait(received), "recv") ||
            failed(group.sender().wait(sent), "send"))
          return 5;
        return firstWrong(got, peer, 1) >= 0 ? 6 : 0;
      },
      &errs);
  EXPECT_EQ(codes, (std::vector<int>{0, 0})) << errs[0] << errs[1];
}

TEST(CollectivesTest, RecvsMatchSendsByTagInAnyOrder) {
  // Rank 0 sends eight messages of different sizes with tags 10..17, each
  // from a thread of its own; rank 1 receives them one at a time in the
  // reverse order, so every recv is posted while other tags' sends are
  // waiting, and must take the message with its own tag.
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
  int port = server->port();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(2, [&](int rank) {
    std::unique_ptr<StoreClient> client;
    std::unique_ptr<Communicator> comm;
    if (!joinGroup(port, rank, 2, 20s, client, comm))
      return 3;
    const uint64_t first = 10, tags = 8;
    auto countOf = [](uint64_t tag) { return size_t(100 * tag + 7); };
    if (rank == 0) {
      std::vector<std::thread> senders;
      std::vector<int> ok(tags, 0);
      std::vector<std::vector<float>> messages;
      for (uint64_t t = first; t < first + tags; ++t)
        messages.push_back(message(0, t, countOf(t)));
      for (uint64_t t = first; t < first + tags; ++t)
        senders.emplace_back([&, t] {
          const std::vector<float> &m = messages[t - first];
          ok[t - first] = !failed(comm->send(m.data(), m.size(), 1, t),
                                  "threaded send");
        });
      for (std::thread &t : senders)
        t.join();
      return std::count(ok.begin(), ok.end(), 1) == long(tags) ? 0 : 4;
    }
    for (uint64_t t = first + tags; t-- > first;) {
      std::vector<float> got(countOf(t), -1.0f);
      if (failed(comm->recv(got.data(), got.size(), 0, t), "recv"))
        return 5;
      if (long i = firstWrong(got, 0, t); i >= 0) {
        std::fprintf(stderr, "tag %llu: element %ld is %g\n",
                     (unsigned long long)t, i, double(got[size_t(i)]));
        return 6;
      }
    }
    return 0;
  }, &errs);
  EXPECT_EQ(codes, (std::vector<int>{0, 0})) << errs[0] << errs[1];
}

/// Runs `body` on `size` ranks, each in a gloo group with `timeout`, and
/// expects every one to return 0 (else shows its stderr).
void expectInGroup(
    int size, std::chrono::milliseconds timeout,
    const std::function<int(int, StoreClient &, Communicator &)> &body) {
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
  int port = server->port();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(
      size,
      [&](int rank) {
        std::unique_ptr<StoreClient> client;
        std::unique_ptr<Communicator> comm;
        if (!joinGroup(port, rank, size, timeout, client, comm))
          return 3;
        return body(rank, *client, *comm);
      },
      &errs);
  for (size_t r = 0; r < size_t(size); ++r)
    EXPECT_EQ(codes[r], 0) << "rank " << r << ": " << errs[r];
}

TEST(CollectivesTest, RecvsArePostedWithoutAThreadOnceTheirSizeIsAgreed) {
  // A (peer, tag, size) gloo has not agreed yet is not posted (the caller
  // runs recv, which agrees it); after that a posted recv takes the next
  // message of its tag, even one sent before it is waited for, and one
  // whose peer sends nothing fails at the timeout naming who and what.
  expectInGroup(
      2, 1500ms, [](int rank, StoreClient &storeClient, Communicator &group) {
        StoreClient *client = &storeClient;
        Communicator *comm = &group;
        const size_t n = 5003;
        if (rank == 0) {
          for (uint64_t tag : {3, 3, 4}) {
            std::vector<float> m = message(0, tag, n);
            if (failed(comm->send(m.data(), n, 1, tag), "send"))
              return 4;
          }
          if (failed(comm->barrier(), "barrier"))
            return 5;
          // Alive (its connections open) until rank 1's posted recv of a
          // third tag 4 message has timed out.
          std::vector<char> done;
          return failed(client->get("timed-out", 20s, done), "get") ? 15 : 0;
        }
        std::vector<float> got(n, -1.0f);
        if (comm->startRecv(got.data(), n, 0, 3))
          return 6; // not agreed yet
        if (failed(comm->recv(got.data(), n, 0, 3), "recv") ||
            firstWrong(got, 0, 3) >= 0)
          return 7;
        if (comm->startRecv(got.data(), n - 1, 0, 3) ||
            comm->startRecv(got.data(), n, 0, 4) ||
            comm->startRecv(got.data(), n, 1, 3))
          return 8; // another size or tag, or itself: not agreed
        std::fill(got.begin(), got.end(), -1.0f);
        auto posted = comm->startRecv(got.data(), n, 0, 3);
        if (!posted)
          return 9;
        ::usleep(200000); // rank 0's send lands before the wait
        if (failed(posted->wait(), "posted recv") || firstWrong(got, 0, 3) >= 0)
          return 10;
        if (failed(comm->recv(got.data(), n, 0, 4), "recv"))
          return 11;
        if (failed(comm->barrier(), "barrier"))
          return 12;
        // Rank 0 sends nothing more.
        auto never = comm->startRecv(got.data(), n, 0, 4);
        if (!never)
          return 13;
        Status s = never->wait();
        if (s.ok() || !contains(s.message, "recv of 20012 bytes with tag 4") ||
            !contains(s.message, "rank 0 sent nothing within 1500 ms")) {
          std::fprintf(stderr, "%s\n", s.message.c_str());
          return 14;
        }
        return failed(client->set("timed-out", {'y'}), "set") ? 16 : 0;
      });
}

TEST(CollectivesTest, SendAndRecvOfDifferentSizesFailOnBothRanks) {
  // A send of 4 floats meets a recv of 8, then one of 8 a recv of 4 (gloo
  // alone would end rank 1's process there). Both ranks get an error
  // naming both sizes, no data moves, and the next transfer works.
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
  int port = server->port();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(2, [&](int rank) {
    std::unique_ptr<StoreClient> client;
    std::unique_ptr<Communicator> comm;
    if (!joinGroup(port, rank, 2, 10s, client, comm))
      return 3;
    std::vector<float> x = message(rank, 2, 8), keep = x;
    Status small = rank == 0 ? comm->send(x.data(), 4, 1, 2)
                             : comm->recv(x.data(), 8, 0, 2);
    Status large = rank == 0 ? comm->send(x.data(), 8, 1, 2)
                             : comm->recv(x.data(), 4, 0, 2);
    if (small.ok() || large.ok())
      return 4;
    std::fprintf(stderr, "%s\n%s\n", small.message.c_str(),
                 large.message.c_str());
    if (x != keep)
      return 5;
    std::vector<float> got(3);
    Status s = rank == 0 ? comm->send(x.data(), 3, 1, 2)
                         : comm->recv(got.data(), 3, 0, 2);
    if (failed(s, "matching transfer after the mismatches"))
      return 6;
    return rank == 1 && (got[0] != sent(0, 2, 0) || got[2] != sent(0, 2, 2))
               ? 7
               : 0;
  }, &errs);
  ASSERT_EQ(codes, (std::vector<int>{0, 0})) << errs[0] << errs[1];
  EXPECT_TRUE(contains(errs[0], "send of 16 bytes with tag 2 from rank 0 to "
                                "rank 1 of 2 failed: rank 1 receives 32 bytes "
                                "with this tag; a send and its recv must "
                                "have the same size"))
      << errs[0];
  EXPECT_TRUE(contains(errs[1], "recv of 32 bytes with tag 2 on rank 1 from "
                                "rank 0 of 2 failed: rank 0 sends 16 bytes"))
      << errs[1];
  EXPECT_TRUE(contains(errs[0], "send of 32 bytes with tag 2 from rank 0 to "
                                "rank 1 of 2 failed: rank 1 receives 16 "
                                "bytes"))
      << errs[0];
  EXPECT_TRUE(contains(errs[1], "recv of 16 bytes with tag 2 on rank 1 from "
                                "rank 0 of 2 failed: rank 0 sends 32 bytes"))
      << errs[1];
}

TEST(CollectivesTest, APeerThatNeverAnswersTimesOut) {
  // Of three ranks, rank 1 joins and then does nothing: rank 0's send to
  // it and rank 2's recv from it fail after the timeout, naming both ranks,
  // the tag and the size, instead of hanging.
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
  int port = server->port();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(3, [&](int rank) {
    std::unique_ptr<StoreClient> client;
    std::unique_ptr<Communicator> comm;
    if (!joinGroup(port, rank, 3, 500ms, client, comm))
      return 3;
    if (rank == 1) {
      ::sleep(3);
      return 0;
    }
    float x[4] = {1, 2, 3, 4};
    auto start = std::chrono::steady_clock::now();
    Status s = rank == 0 ? comm->send(x, 4, 1, 9) : comm->recv(x, 4, 1, 9);
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    if (s.ok())
      return 4;
    std::fprintf(stderr, "%s\n", s.message.c_str());
    return seconds < 2.5 ? 0 : 5;
  }, &errs);
  ASSERT_EQ(codes, (std::vector<int>{0, 0, 0})) << errs[0] << errs[2];
  EXPECT_TRUE(contains(errs[0], "send of 16 bytes with tag 9 from rank 0 to "
                                "rank 1 of 3 failed: rank 1 did not take it "
                                "within 500 ms (is it running, and does it "
                                "call recv from rank 0 with tag 9?)"))
      << errs[0];
  EXPECT_TRUE(contains(errs[2], "recv of 16 bytes with tag 9 on rank 2 from "
                                "rank 1 of 3 failed: rank 1 sent nothing "
                                "within 500 ms (is it running, and does it "
                                "call send to rank 2 with tag 9?)"))
      << errs[2];
}

TEST(CollectivesTest, SendAndRecvRefuseBadPeersAndTags) {
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
  int port = server->port();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(2, [&](int rank) {
    std::unique_ptr<StoreClient> client;
    std::unique_ptr<Communicator> comm;
    if (!joinGroup(port, rank, 2, 10s, client, comm))
      return 3;
    float x[2] = {};
    std::vector<Status> refused = {
        comm->send(x, 2, 2, 0), comm->recv(x, 2, -1, 0),
        comm->send(x, 2, rank, 0),
        comm->recv(x, 2, 1 - rank, Communicator::kMaxTag + 1)};
    for (const Status &s : refused) {
      if (s.ok())
        return 4;
      std::fprintf(stderr, "%s\n", s.message.c_str());
    }
    // Refusing sent nothing: the group is still in step.
    return failed(comm->barrier(), "barrier") ? 5 : 0;
  }, &errs);
  ASSERT_EQ(codes, (std::vector<int>{0, 0})) << errs[0] << errs[1];
  const std::string &err = errs[0];
  EXPECT_TRUE(contains(err, "send of 8 bytes with tag 0 from rank 0 to rank 2 "
                            "of 2: rank 2 is not in the group (ranks 0 to 1)"))
      << err;
  EXPECT_TRUE(contains(err, "rank -1 is not in the group")) << err;
  EXPECT_TRUE(contains(err, "send of 8 bytes with tag 0 from rank 0 to rank 0 "
                            "of 2: a rank cannot send to or receive from "
                            "itself"))
      << err;
  EXPECT_TRUE(contains(err, "the tag is above the largest, 281474976710655"))
      << err;
}

TEST(CollectivesTest, CommThreadRunsCollectivesInOrderAlongsideWork) {
  const int size = 2;
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
  int port = server->port();
  std::vector<int> codes = runRanks(size, [&](int rank) {
    std::unique_ptr<StoreClient> client;
    std::unique_ptr<Communicator> comm;
    if (!joinGroup(port, rank, size, 10s, client, comm))
      return 3;
    // Eight buckets issued one after another, as a backward pass would,
    // with local work between them; then one all-gather.
    std::vector<std::vector<float>> buckets(8, std::vector<float>(4096));
    CommThread comms(*comm);
    std::vector<CommThread::Ticket> tickets;
    double local = 0;
    for (size_t b = 0; b < buckets.size(); ++b) {
      for (size_t i = 0; i < buckets[b].size(); ++i)
        buckets[b][i] = float((rank + 1) * (b + 1));
      tickets.push_back(comms.allReduceSum(buckets[b].data(),
                                           buckets[b].size()));
      for (int k = 0; k < 10000; ++k)
        local += std::sqrt(double(k));
    }
    float mine[2] = {float(rank), float(rank)}, all[2 * size];
    CommThread::Ticket gather = comms.allGather(mine, 2, all);
    // Waiting for an early bucket does not need the later ones.
    if (!comms.wait(tickets[2]).ok() || buckets[2][0] != float(3 * 3))
      return 4;
    if (!comms.waitAll().ok())
      return 5;
    for (size_t b = 0; b < buckets.size(); ++b)
      for (float v : buckets[b])
        if (v != float(3 * (b + 1)))
          return 6;
    if (!comms.wait(gather).ok() || all[2] != 1.0f)
      return 7;
    return local > 0 ? 0 : 8;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(CollectivesTest, CommThreadReportsTheFirstFailure) {
  // Rank 1 of a group of 2 never joins the all-reduce: rank 0's wait
  // returns the timeout, and so does every later wait.
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
  int port = server->port();
  std::vector<int> codes = runRanks(2, [&](int rank) {
    std::unique_ptr<StoreClient> client;
    std::unique_ptr<Communicator> comm;
    if (!joinGroup(port, rank, 2, 1s, client, comm))
      return 3;
    if (rank == 1) {
      ::sleep(2);
      return 0;
    }
    float x[4] = {1, 2, 3, 4};
    CommThread comms(*comm);
    CommThread::Ticket first = comms.allReduceSum(x, 4);
    CommThread::Ticket second = comms.allReduceSum(x, 4);
    Status s = comms.wait(first);
    if (s.ok() || s.message.find("all-reduce on rank 0 of 2 failed") ==
                      std::string::npos) {
      std::fprintf(stderr, "%s\n", s.message.c_str());
      return 4;
    }
    return comms.wait(second).message == s.message ? 0 : 5;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(CollectivesTest, AMissingRankTimesOut) {
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
  int port = server->port();
  // Only rank 0 of 2 shows up.
  std::vector<int> codes = runRanks(1, [&](int) {
    std::unique_ptr<StoreClient> client;
    if (!StoreClient::connect("127.0.0.1", port, 5s, client).ok())
      return 2;
    std::unique_ptr<Communicator> comm;
    Status s = createGlooCommunicator(*client, "dp", 0, 2, "127.0.0.1", 500ms,
                                      comm);
    if (s.ok())
      return 3;
    bool named =
        s.message.find("rank 0 of 2 could not connect to its peers") !=
            std::string::npos &&
        s.message.find("was not set within 500 ms") != std::string::npos;
    if (!named)
      std::fprintf(stderr, "%s\n", s.message.c_str());
    return named ? 0 : 4;
  });
  EXPECT_EQ(codes, (std::vector<int>{0}));
}

TEST(CollectivesTest, ASilentStoreIsAnError) {
  // A listener that accepts and never answers: rank 0's node gone without
  // closing its connections. A get must end after its wait and a grace,
  // not block for ever.
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)),
            0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr *>(&addr), &len),
            0);
  int port = ntohs(addr.sin_port);
  std::unique_ptr<StoreClient> client;
  ASSERT_TRUE(StoreClient::connect("127.0.0.1", port, 5s, client).ok());
  auto start = std::chrono::steady_clock::now();
  std::vector<char> value;
  Status s = client->get("k", 100ms, value);
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  ::close(listener);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("did not answer within"), std::string::npos)
      << s.message;
  EXPECT_LT(seconds, 10.0);
}

} // namespace
