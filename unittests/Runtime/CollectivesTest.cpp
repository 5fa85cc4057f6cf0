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

#include <cmath>
#include <functional>
#include <string>
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

TEST(CollectivesTest, GlooMatchesTheArithmetic) {
  const int size = 3;
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start("127.0.0.1", 0, server).ok());
  int port = server->port();
  std::vector<int> codes = runRanks(size, [&](int rank) {
    std::unique_ptr<StoreClient> client;
    std::unique_ptr<Communicator> comm;
    if (!joinGroup(port, rank, size, 10s, client, comm))
      return 3;
    // All-reduce: sum over ranks of (rank + 1) * (i + 1).
    std::vector<float> x(1000);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = float((rank + 1) * (i + 1));
    if (!comm->allReduceSum(x.data(), x.size()).ok())
      return 4;
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i] != float(6 * (i + 1)))
        return 5;
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
    std::vector<float> x(257);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = float((rank + 1) * (i + 1));
    if (!comm->allReduceSum(x.data(), x.size()).ok())
      return 4;
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i] != float(10 * (i + 1)))
        return 5;
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
