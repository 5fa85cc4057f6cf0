//===- Rendezvous.cpp - The key-value store ranks meet through ------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Wire format, little endian: a request is an op byte ('S' set, 'G' get),
// the key (u32 length, bytes), then for 'S' the value (u64 length, bytes)
// and for 'G' the timeout in milliseconds (u64). 'S' is answered with one
// byte 0; 'G' with 0 and the value (u64 length, bytes), or 1 on timeout.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Rendezvous.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace weft::rt;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kMaxKey = 1 << 16;
constexpr uint64_t kMaxValue = uint64_t(1) << 30;

std::string errnoText() { return std::strerror(errno); }

bool writeAll(int fd, const void *data, size_t n) {
  const char *p = static_cast<const char *>(data);
  while (n) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

bool readAll(int fd, void *data, size_t n) {
  char *p = static_cast<char *>(data);
  while (n) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

/// Waits up to `limit` for `fd` to have something to read (or be closed):
/// a store whose host vanished without closing the connection (its node
/// went down, its network was cut) never answers, and a blocking read
/// would wait for ever.
bool readable(int fd, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p = {fd, POLLIN, 0};
    int r = ::poll(&p, 1, int(std::max<int64_t>(0, std::min<int64_t>(
                                left.count(), 1 << 30))));
    if (r > 0)
      return true;
    if (r == 0 || errno != EINTR)
      return false;
  }
}

/// How long past the store's own reply deadline a silent store is waited
/// for: the reply is due at once (set) or after the wait (get).
std::chrono::milliseconds replyGrace(std::chrono::milliseconds wait) {
  return wait + std::chrono::milliseconds(2000) + wait / 4;
}

template <typename T> bool writeInt(int fd, T v) {
  unsigned char b[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i)
    b[i] = static_cast<unsigned char>(uint64_t(v) >> (8 * i));
  return writeAll(fd, b, sizeof(T));
}

template <typename T> bool readInt(int fd, T &v) {
  unsigned char b[sizeof(T)];
  if (!readAll(fd, b, sizeof(T)))
    return false;
  uint64_t x = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    x |= uint64_t(b[i]) << (8 * i);
  v = static_cast<T>(x);
  return true;
}

/// Resolves `host`:`port` (IPv4 or IPv6, first address that works).
Status resolve(const std::string &host, int port, bool passive,
               addrinfo **out) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, out);
  if (rc != 0)
    return Status::error("rendezvous: cannot resolve MASTER_ADDR " +
                         quote(host) + ": " + ::gai_strerror(rc));
  return Status::success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Server
//===----------------------------------------------------------------------===//

Status StoreServer::start(const std::string &host, int port,
                          std::unique_ptr<StoreServer> &out) {
  std::string address = host + ":" + std::to_string(port);
  addrinfo *addrs = nullptr;
  if (Status s = resolve(host, port, true, &addrs); !s.ok())
    return s;
  int fd = -1;
  std::string error = "no address";
  for (addrinfo *a = addrs; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0)
      continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0)
      break;
    error = errnoText();
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(addrs);
  if (fd < 0)
    return Status::error("rendezvous: rank 0 cannot listen on " + address +
                         ": " + error +
                         " (another job on this port? set MASTER_PORT or "
                         "weftrun --master-port)");
  std::unique_ptr<StoreServer> server(new StoreServer());
  server->listenFd = fd;
  sockaddr_storage bound = {};
  socklen_t len = sizeof(bound);
  if (::getsockname(fd, reinterpret_cast<sockaddr *>(&bound), &len) == 0)
    server->boundPort =
        bound.ss_family == AF_INET6
            ? ntohs(reinterpret_cast<sockaddr_in6 *>(&bound)->sin6_port)
            : ntohs(reinterpret_cast<sockaddr_in *>(&bound)->sin_port);
  if (::pipe2(server->wakeFd, O_CLOEXEC) != 0)
    return Status::error("rendezvous: cannot create a pipe: " + errnoText());
  server->acceptor = std::thread([s = server.get()] { s->serve(); });
  out = std::move(server);
  return Status::success();
}

StoreServer::~StoreServer() {
  stopping = true;
  changed.notify_all();
  if (wakeFd[1] >= 0)
    [[maybe_unused]] ssize_t n = ::write(wakeFd[1], "x", 1);
  if (acceptor.joinable())
    acceptor.join();
  // Handlers end when their client hangs up or the server stops.
  for (std::thread &t : handlers)
    t.join();
  for (int fd : {listenFd, wakeFd[0], wakeFd[1]})
    if (fd >= 0)
      ::close(fd);
}

void StoreServer::serve() {
  std::vector<int> clients;
  while (!stopping) {
    pollfd fds[2] = {{listenFd, POLLIN, 0}, {wakeFd[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR)
      break;
    if (fds[1].revents)
      break;
    if (!(fds[0].revents & POLLIN))
      continue;
    int fd = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    clients.push_back(fd);
    handlers.emplace_back([this, fd] { handle(fd); });
  }
  // Wake handlers blocked in recv.
  for (int fd : clients)
    ::shutdown(fd, SHUT_RDWR);
}

void StoreServer::handle(int fd) {
  for (;;) {
    char op = 0;
    uint32_t keyLen = 0;
    if (!readAll(fd, &op, 1) || !readInt(fd, keyLen) || keyLen > kMaxKey)
      break;
    std::string key(keyLen, '\0');
    if (!readAll(fd, key.data(), keyLen))
      break;
    if (op == 'S') {
      uint64_t n = 0;
      if (!readInt(fd, n) || n > kMaxValue)
        break;
      std::vector<char> value(n);
      if (!readAll(fd, value.data(), n))
        break;
      {
        std::lock_guard<std::mutex> lock(mutex);
        values[key] = std::move(value);
      }
      changed.notify_all();
      if (!writeInt<uint8_t>(fd, 0))
        break;
    } else if (op == 'G') {
      uint64_t timeoutMs = 0;
      if (!readInt(fd, timeoutMs))
        break;
      std::vector<char> value;
      bool found;
      {
        std::unique_lock<std::mutex> lock(mutex);
        found = changed.wait_for(lock, std::chrono::milliseconds(timeoutMs),
                                 [&] {
                                   return stopping || values.count(key) != 0;
                                 }) &&
                values.count(key) != 0;
        if (found)
          value = values[key];
      }
      if (!found) {
        if (!writeInt<uint8_t>(fd, 1))
          break;
        continue;
      }
      if (!writeInt<uint8_t>(fd, 0) || !writeInt<uint64_t>(fd, value.size()) ||
          !writeAll(fd, value.data(), value.size()))
        break;
    } else {
      break;
    }
  }
  ::close(fd);
}

//===----------------------------------------------------------------------===//
// Client
//===----------------------------------------------------------------------===//

Status StoreClient::connect(const std::string &host, int port,
                            std::chrono::milliseconds timeout,
                            std::unique_ptr<StoreClient> &out) {
  std::string address = host + ":" + std::to_string(port);
  Clock::time_point deadline = Clock::now() + timeout;
  std::string last = "no address";
  for (;;) {
    addrinfo *addrs = nullptr;
    if (Status s = resolve(host, port, false, &addrs); !s.ok())
      return s;
    for (addrinfo *a = addrs; a; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
      if (fd < 0)
        continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        ::freeaddrinfo(addrs);
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        std::unique_ptr<StoreClient> client(new StoreClient());
        client->fd = fd;
        client->address = address;
        out = std::move(client);
        return Status::success();
      }
      last = errnoText();
      ::close(fd);
    }
    ::freeaddrinfo(addrs);
    if (Clock::now() >= deadline)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::error(
      "rendezvous: cannot reach rank 0's store at " + address + " within " +
      std::to_string(timeout.count() / 1000.0).substr(0, 5) + " s (" + last +
      "); is rank 0 running, and do MASTER_ADDR and MASTER_PORT name it?");
}

StoreClient::~StoreClient() {
  if (fd >= 0)
    ::close(fd);
}

Status StoreClient::set(const std::string &key,
                        const std::vector<char> &value) {
  std::lock_guard<std::mutex> lock(mutex);
  uint8_t ack = 1;
  if (!writeAll(fd, "S", 1) || !writeInt<uint32_t>(fd, key.size()) ||
      !writeAll(fd, key.data(), key.size()) ||
      !writeInt<uint64_t>(fd, value.size()) ||
      !writeAll(fd, value.data(), value.size()))
    return Status::error("rendezvous: lost the connection to rank 0's store "
                         "at " +
                         address + " while setting " + quote(key));
  if (!readable(fd, replyGrace(std::chrono::seconds(60))))
    return Status::error("rendezvous: rank 0's store at " + address +
                         " did not answer within 60 s while setting " +
                         quote(key) + "; its node may be down or cut off");
  if (!readInt(fd, ack) || ack)
    return Status::error("rendezvous: lost the connection to rank 0's store "
                         "at " +
                         address + " while setting " + quote(key));
  return Status::success();
}

Status StoreClient::get(const std::string &key,
                        std::chrono::milliseconds timeout,
                        std::vector<char> &value) {
  std::lock_guard<std::mutex> lock(mutex);
  uint8_t status = 2;
  if (!writeAll(fd, "G", 1) || !writeInt<uint32_t>(fd, key.size()) ||
      !writeAll(fd, key.data(), key.size()) ||
      !writeInt<uint64_t>(fd, uint64_t(timeout.count())))
    return Status::error("rendezvous: lost the connection to rank 0's store "
                         "at " +
                         address + " while waiting for " + quote(key));
  if (!readable(fd, replyGrace(timeout)))
    return Status::error("rendezvous: rank 0's store at " + address +
                         " did not answer within " +
                         std::to_string(replyGrace(timeout).count()) +
                         " ms while waiting for " + quote(key) +
                         "; its node may be down or cut off");
  if (!readInt(fd, status))
    return Status::error("rendezvous: lost the connection to rank 0's store "
                         "at " +
                         address + " while waiting for " + quote(key));
  if (status == 1)
    return Status::error("rendezvous: " + quote(key) + " was not set within " +
                         std::to_string(timeout.count()) +
                         " ms; a rank is missing or stuck (check that every "
                         "rank started with the same WORLD_SIZE)");
  uint64_t n = 0;
  if (!readInt(fd, n) || n > kMaxValue)
    return Status::error("rendezvous: bad reply from " + address);
  value.resize(n);
  if (!readAll(fd, value.data(), n))
    return Status::error("rendezvous: lost the connection to rank 0's store "
                         "at " +
                         address);
  return Status::success();
}
