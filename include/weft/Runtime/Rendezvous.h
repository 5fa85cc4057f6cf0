//===- Rendezvous.h - The key-value store ranks meet through ----*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Ranks find each other through a small TCP key-value store that rank 0
// hosts at MASTER_ADDR:MASTER_PORT (gloo's own stores are file, hash and
// redis only). Every rank, rank 0 included, talks to it as a client: set a
// key, get a key (waiting until some rank sets it, up to a timeout). Every
// failure is a Status that names the address and what to check.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_RENDEZVOUS_H
#define WEFT_RUNTIME_RENDEZVOUS_H

#include "weft/Formats/HostArray.h"

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <string>
#include <thread>
#include <vector>

namespace weft {
namespace rt {

/// Rank 0's side: a thread serving the store until destroyed.
class StoreServer {
public:
  /// Listens on `host`:`port`; an error names the address when it is in
  /// use or cannot be bound.
  static Status start(const std::string &host, int port,
                      std::unique_ptr<StoreServer> &out);
  ~StoreServer();
  StoreServer(const StoreServer &) = delete;
  /// The port it listens on (the one asked for, or the one the system
  /// chose for port 0).
  int port() const { return boundPort; }
  StoreServer &operator=(const StoreServer &) = delete;

private:
  StoreServer() = default;
  void serve();
  void handle(int fd);

  int listenFd = -1;
  int boundPort = 0;
  int wakeFd[2] = {-1, -1};
  std::thread acceptor;
  std::vector<std::thread> handlers;
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, std::vector<char>> values;
  std::atomic<bool> stopping{false};
};

/// A connection to the store.
class StoreClient {
public:
  /// Connects, retrying until `timeout` (rank 0 may start later than the
  /// others).
  static Status connect(const std::string &host, int port,
                        std::chrono::milliseconds timeout,
                        std::unique_ptr<StoreClient> &out);
  ~StoreClient();
  StoreClient(const StoreClient &) = delete;
  StoreClient &operator=(const StoreClient &) = delete;

  Status set(const std::string &key, const std::vector<char> &value);
  /// Waits until `key` is set, up to `timeout`; the error names the key.
  Status get(const std::string &key, std::chrono::milliseconds timeout,
             std::vector<char> &value);

private:
  StoreClient() = default;
  int fd = -1;
  std::string address;
  std::mutex mutex;
};

} // namespace rt
} // namespace weft

#endif // WEFT_RUNTIME_RENDEZVOUS_H
