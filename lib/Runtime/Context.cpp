//===- Context.cpp - The process a step runs in ---------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Context.h"
#include "weft/Runtime/Cuda.h"
#include "weft/Runtime/Kernels.h"

#include <cblas.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>

using namespace weft::rt;

namespace {
/// Parses a non-negative decimal int; false for anything else.
bool parseCount(const char *text, int &out) {
  const char *end = text + std::strlen(text);
  if (text == end)
    return false;
  auto r = std::from_chars(text, end, out);
  return r.ec == std::errc() && r.ptr == end && out >= 0;
}

struct Names {
  const char *launcher, *rank, *world, *localRank, *localWorld;
};
} // namespace

Status weft::rt::readLaunchInfo(
    const std::function<const char *(const char *)> &getenv, LaunchInfo &out) {
  static const Names launchers[] = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
      {"OpenMPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
       "SLURM_NTASKS_PER_NODE"}};
  LaunchInfo info;
  if (const char *heartbeat = getenv("WEFT_HEARTBEAT_FILE"))
    info.heartbeatFile = heartbeat;
  for (const Names &names : launchers) {
    const char *rank = getenv(names.rank);
    const char *world = getenv(names.world);
    if (!rank && !world)
      continue;
    if (!rank || !world)
      return Status::error(std::string(rank ? names.rank : names.world) +
                           " is set but " + (rank ? names.world : names.rank) +
                           " is not; " + names.launcher +
                           " sets both (unset the one left over, or launch "
                           "with " + names.launcher + ")");
    auto read = [&](const char *name, const char *text, int &value,
                    int minimum) -> Status {
      if (!parseCount(text, value) || value < minimum)
        return Status::error(std::string(name) + "=" + quote(text) +
                             " must be an integer >= " +
                             std::to_string(minimum));
      return Status::success();
    };
    if (Status s = read(names.rank, rank, info.rank, 0); !s.ok())
      return s;
    if (Status s = read(names.world, world, info.worldSize, 1); !s.ok())
      return s;
    if (info.rank >= info.worldSize)
      return Status::error(std::string(names.rank) + "=" +
                           std::to_string(info.rank) + " is outside " +
                           names.world + "=" +
                           std::to_string(info.worldSize));
    info.localRank = info.rank;
    info.localWorldSize = info.worldSize;
    if (const char *local = getenv(names.localRank))
      if (Status s = read(names.localRank, local, info.localRank, 0); !s.ok())
        return s;
    // Slurm's tasks per node may read "2(x3)" on uneven allocations; only a
    // plain number says how many share this node.
    if (const char *local = getenv(names.localWorld)) {
      int value = 0;
      if (parseCount(local, value) && value >= 1)
        info.localWorldSize = value;
      else if (std::strcmp(names.launcher, "Slurm") != 0)
        return Status::error(std::string(names.localWorld) + "=" +
                             quote(local) + " must be an integer >= 1");
    }
    if (info.localRank >= info.localWorldSize ||
        info.localWorldSize > info.worldSize)
      return Status::error(std::string(names.localRank) + "=" +
                           std::to_string(info.localRank) + " and " +
                           names.localWorld + "=" +
                           std::to_string(info.localWorldSize) +
                           " do not fit " + names.world + "=" +
                           std::to_string(info.worldSize));
    info.launcher = names.launcher;
    break;
  }

  if (const char *port = getenv("MASTER_PORT")) {
    int value = 0;
    if (!parseCount(port, value) || value < 1 || value > 65535)
      return Status::error("MASTER_PORT=" + quote(port) +
                           " must be a port number in [1, 65535]");
    info.masterPort = value;
  }
  // torchrun's own agent already serves its store on MASTER_PORT for the
  // whole job (weftrun sets no TORCHELASTIC_RUN_ID and serves none), so
  // rank 0's store takes the next port.
  if (const char *runId = getenv("TORCHELASTIC_RUN_ID"); runId && *runId)
    info.masterPort += info.masterPort < 65535 ? 1 : -1;
  if (const char *addr = getenv("MASTER_ADDR"); addr && *addr) {
    info.masterAddr = addr;
  } else if (const char *nodes = info.launcher == "Slurm"
                                     ? getenv("SLURM_JOB_NODELIST")
                                     : nullptr) {
    info.masterAddr = firstSlurmHost(nodes);
  } else if (info.localWorldSize < info.worldSize) {
    return Status::error(
        std::to_string(info.worldSize) + " ranks span several nodes (" +
        std::to_string(info.localWorldSize) +
        " on this one), but MASTER_ADDR is not set: give rank 0's host "
        "(with mpirun: -x MASTER_ADDR=host)");
  }
  out = info;
  return Status::success();
}

namespace {

bool isLoopback(const sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in *>(sa)->sin_addr.s_addr) >>
            24) == 127;
  if (sa->sa_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(
        &reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr);
  return false;
}

std::string numericHost(const sockaddr *sa, socklen_t len) {
  char host[NI_MAXHOST];
  if (::getnameinfo(sa, len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST))
    return "";
  return host;
}

/// The IPv4 address of interface `name` (any interface but loopback when
/// `name` is empty) that is up, or "".
std::string interfaceAddress(const std::string &name) {
  ifaddrs *list = nullptr;
  if (::getifaddrs(&list) != 0)
    return "";
  std::string found;
  for (ifaddrs *i = list; i && found.empty(); i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
        !(i->ifa_flags & IFF_UP))
      continue;
    if (name.empty() ? isLoopback(i->ifa_addr) || (i->ifa_flags & IFF_LOOPBACK)
                     : name != i->ifa_name)
      continue;
    found = numericHost(i->ifa_addr, sizeof(sockaddr_in));
  }
  ::freeifaddrs(list);
  return found;
}

/// The local address of the route to host:port (connecting a UDP socket
/// sends nothing), or "".
std::string routeAddress(const std::string &host, int port, bool &loopback) {
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo *res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints,
                    &res) != 0)
    return "";
  std::string found;
  for (addrinfo *a = res; a && found.empty(); a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0)
      continue;
    sockaddr_storage local;
    socklen_t len = sizeof(local);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr *>(&local), &len) == 0) {
      loopback = isLoopback(reinterpret_cast<sockaddr *>(&local));
      found = numericHost(reinterpret_cast<sockaddr *>(&local), len);
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return found;
}

} // namespace

std::string weft::rt::peerAddress(const LaunchInfo &info) {
  if (info.localWorldSize >= info.worldSize)
    return "127.0.0.1";
  if (const char *name = std::getenv("GLOO_SOCKET_IFNAME"); name && *name)
    if (std::string a = interfaceAddress(name); !a.empty())
      return a;
  bool loopback = false;
  std::string route = routeAddress(info.masterAddr, info.masterPort, loopback);
  if (!route.empty() && !loopback)
    return route;
  if (std::string a = interfaceAddress(""); !a.empty())
    return a;
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) == 0 && *name)
    return name;
  return route.empty() ? "127.0.0.1" : route;
}

std::string weft::rt::firstSlurmHost(const std::string &list) {
  // "node[07-09,12],gpu3" -> "node07"; "a,b" -> "a"; "x" -> "x".
  size_t comma = list.find(',');
  size_t bracket = list.find('[');
  if (bracket == std::string::npos || (comma != std::string::npos &&
                                       comma < bracket))
    return list.substr(0, comma);
  std::string prefix = list.substr(0, bracket);
  size_t end = list.find_first_of("-,]", bracket + 1);
  return prefix + list.substr(bracket + 1, end - bracket - 1);
}

//===----------------------------------------------------------------------===//
// ThreadPool
//===----------------------------------------------------------------------===//

ThreadPool::ThreadPool(int numThreads) : numThreads(std::max(1, numThreads)) {}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  for (std::thread &t : workers)
    t.join();
}

void ThreadPool::start() {
  for (int i = 1; i < numThreads; ++i)
    workers.emplace_back([this] { work(); });
}

/// Takes chunks of the loop in flight until none is left; `lock` holds
/// `mutex` on entry and exit, not while the calls run.
void ThreadPool::drain(std::unique_lock<std::mutex> &lock) {
  while (next < total) {
    int64_t begin = next, end = std::min(total, next + chunk);
    next = end;
    auto *f = fn;
    void *a = arg;
    lock.unlock();
    for (int64_t i = begin; i < end; ++i)
      f(a, i);
    lock.lock();
  }
}

void ThreadPool::work() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    wake.wait(lock, [&] { return stopping || generation != seen; });
    if (stopping)
      return;
    seen = generation;
    ++busy;
    drain(lock);
    if (--busy == 0)
      done.notify_all();
  }
}

void ThreadPool::parallelFor(int64_t n, void (*f)(void *, int64_t), void *a) {
  if (n <= 0)
    return;
  if (numThreads == 1 || n == 1) {
    for (int64_t i = 0; i < n; ++i)
      f(a, i);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex);
  if (workers.empty())
    start();
  fn = f;
  arg = a;
  total = n;
  next = 0;
  // A few chunks per thread balance uneven iterations without a lock
  // round trip per index.
  chunk = std::max<int64_t>(1, n / (int64_t(numThreads) * 4));
  ++generation;
  wake.notify_all();
  ++busy;
  drain(lock);
  --busy;
  // Workers still running a chunk finish before the loop counts as done.
  done.wait(lock, [&] { return busy == 0; });
  fn = nullptr;
  arg = nullptr;
}

//===----------------------------------------------------------------------===//
// RuntimeContext
//===----------------------------------------------------------------------===//

namespace {
/// Without --threads: OMP_NUM_THREADS or OPENBLAS_NUM_THREADS when the user
/// set one (0 leaves the libraries to read it), else the CPUs this process
/// may run on shared among the ranks of its node, so that N local ranks do
/// not each start a thread per core and spin against each other.
int defaultComputeThreads(int localWorldSize) {
  for (const char *name : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
    const char *value = std::getenv(name);
    if (value && *value)
      return 0;
  }
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof(set), &set) == 0
                 ? CPU_COUNT(&set)
                 : int(std::thread::hardware_concurrency());
  return std::max(1, cpus / std::max(1, localWorldSize));
}

void parallelForThunk(void *pool, int64_t n, void (*fn)(void *, int64_t),
                      void *arg) {
  static_cast<ThreadPool *>(pool)->parallelFor(n, fn, arg);
}
} // namespace

RuntimeContext::RuntimeContext(const LaunchInfo &launch, int threads)
    : info(launch) {
  // The one place that sets compute threads: BLAS, the OpenMP team of the
  // fused kernels (OpenBLAS's OpenMP build sets it too) and the pool agree.
  if (threads <= 0)
    threads = defaultComputeThreads(info.localWorldSize);
  if (threads > 0)
    weft_rt_set_gemm_threads(threads);
  int count = threads > 0 ? threads : std::max(1, openblas_get_num_threads());
  pool = std::make_unique<ThreadPool>(count);
  context.abiVersion = WEFT_MODEL_ABI_VERSION;
  context.rank = info.rank;
  context.worldSize = info.worldSize;
  context.localRank = info.localRank;
  context.localWorldSize = info.localWorldSize;
  context.numAxes = 0;
  context.axes = nullptr;
  context.deviceType = WEFT_DEVICE_CPU;
  context.deviceIndex = 0;
  context.stream = nullptr;
  context.numThreads = count;
  context.threadPool = pool.get();
  context.parallelFor = &parallelForThunk;
}

int weft::rt::cudaDeviceForLocalRank(int localRank, int deviceCount) {
  return deviceCount > 0 ? std::max(localRank, 0) % deviceCount : 0;
}

Status RuntimeContext::useCudaDevice() {
  int device = cudaDeviceForLocalRank(info.localRank, cuda::deviceCount());
  if (Status s = cuda::initialize(device); !s.ok())
    return s;
  context.deviceType = WEFT_DEVICE_CUDA;
  context.deviceIndex = device;
  context.stream = cuda::stream();
  return Status::success();
}

void RuntimeContext::beat(int64_t progress) const {
  if (info.heartbeatFile.empty())
    return;
  int fd = ::open(info.heartbeatFile.c_str(),
                  O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  std::string text = std::to_string(progress) + "\n";
  if (::write(fd, text.data(), text.size()) != ssize_t(text.size()))
    ::futimens(fd, nullptr);
  ::close(fd);
}
