//===- SharedMemory.cpp - Small collectives through host memory -----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "SharedMemory.h"

#include "weft/Formats/HostArray.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <linux/futex.h>
#include <random>
#include <signal.h>
#include <stdexcept>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

using namespace weft::rt;

struct SharedMemoryLane::Header {
  uint64_t magic;
  uint64_t ranks;
  uint64_t slotBytes;
  /// Ranks asleep in waitFor: a rank that arrives wakes them only then.
  alignas(64) std::atomic<uint32_t> sleepers;
};

/// A cache line per rank, so that a rank's counter is not the line its
/// neighbours spin on.
struct alignas(64) SharedMemoryLane::RankControl {
  /// The number of the last collective this rank has written its part of.
  std::atomic<uint32_t> arrived{0};
  /// Its process, to tell a rank that died from a slow one.
  int32_t pid = 0;
};

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kMagic = 0x31656e614c6d6873; // "shmLane1"
/// Largest slot: the all-reduces below GlooCommunicator's small size.
constexpr size_t kMostSlotBytes = size_t(256) << 10;
/// What the segment may take of /dev/shm, which containers often keep at
/// 64 MB: two sets of a slot per rank.
constexpr size_t kSegmentBudget = size_t(8) << 20;
/// How long a waiter spins before it sleeps: a peer a few microseconds
/// behind is caught without a system call, and one computing for longer
/// does not lose its core to the spinning. Longer than a wake-up: on this
/// VM a futex wake takes 40-50 us to run the sleeper, so with 20 us two
/// ranks calling back to back fell into taking turns to sleep (a 4 KiB
/// all-reduce: median 1.7 us, 48 us from the 75th percentile on); with
/// 50 us, 1.2 and 1.4 us.
constexpr auto kSpin = std::chrono::microseconds(50);

/// The segment: the header, a control per rank, then (from the next page)
/// two sets of a slot per rank.
SharedMemoryLane::RankControl *controlsIn(void *base) {
  return reinterpret_cast<SharedMemoryLane::RankControl *>(
      static_cast<SharedMemoryLane::Header *>(base) + 1);
}

size_t dataOffset(int size) {
  size_t header = sizeof(SharedMemoryLane::Header) +
                  size_t(size) * sizeof(SharedMemoryLane::RankControl);
  return (header + 4095) & ~size_t(4095);
}

/// A mapping of the segment, unmapped unless released to the lane.
struct Mapping {
  void *base = MAP_FAILED;
  size_t bytes = 0;
  ~Mapping() {
    if (base != MAP_FAILED)
      ::munmap(base, bytes);
  }
  void *release() { return std::exchange(base, MAP_FAILED); }
};

void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Not FUTEX_PRIVATE: the word is in memory other processes map.
void futexWait(std::atomic<uint32_t> &word, uint32_t seen,
               std::chrono::milliseconds limit) {
  struct timespec ts;
  ts.tv_sec = time_t(limit.count() / 1000);
  ts.tv_nsec = long(limit.count() % 1000) * 1000000L;
  ::syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAIT, seen,
            &ts, nullptr, 0);
}

void futexWakeAll(std::atomic<uint32_t> &word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAKE, INT_MAX,
            nullptr, nullptr, 0);
}

bool readLine(const char *path, std::string &out) {
  FILE *f = std::fopen(path, "r");
  if (!f)
    return false;
  char buf[256];
  bool ok = std::fgets(buf, sizeof buf, f) != nullptr;
  std::fclose(f);
  if (ok)
    out += buf;
  return ok;
}

/// What ranks must have in common to map one segment and see each other's
/// processes: the kernel (its boot), /dev/shm, and the IPC, PID and network
/// namespaces. The network namespace keeps emulated nodes (one namespace
/// each, scripts/cluster.sh) on their links. Empty where any cannot be
/// read.
std::string hostIdentity() {
  std::string id;
  if (!readLine("/proc/sys/kernel/random/boot_id", id))
    return "";
  for (const char *ns : {"ipc", "pid", "net"}) {
    char link[128];
    std::string path = std::string("/proc/self/ns/") + ns;
    ssize_t n = ::readlink(path.c_str(), link, sizeof link - 1);
    if (n <= 0)
      return "";
    id.append(link, size_t(n)).push_back('\n');
  }
  struct stat st;
  if (::stat("/dev/shm", &st) != 0)
    return "";
  id += std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  return id;
}

/// Whether process `pid` has ended: gone, or a zombie its parent has not
/// reaped yet (a launcher that waits for its ranks in order).
bool processEnded(int32_t pid) {
  if (::kill(pid, 0) != 0)
    return errno == ESRCH;
  std::string stat;
  if (!readLine(("/proc/" + std::to_string(pid) + "/stat").c_str(), stat))
    return false;
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() &&
         (stat[paren + 2] == 'Z' || stat[paren + 2] == 'X');
}

std::vector<char> bytesOf(const std::string &s) {
  return std::vector<char>(s.begin(), s.end());
}

} // namespace

SharedMemoryLane::SharedMemoryLane(int rank, int size, void *base, size_t bytes,
                                   size_t slot,
                                   std::chrono::milliseconds timeout)
    : rank(rank), size(size), base(base), bytes(bytes), slot(slot),
      timeout(timeout), controls(controlsIn(base)),
      slots(static_cast<char *>(base) + dataOffset(size)) {}

SharedMemoryLane::~SharedMemoryLane() { ::munmap(base, bytes); }

SharedMemoryLane::RankControl &SharedMemoryLane::control(int r) const {
  return controls[r];
}

float *SharedMemoryLane::slotOf(uint32_t set, int r) const {
  return reinterpret_cast<float *>(
      slots + (size_t(set) * size_t(size) + size_t(r)) * slot);
}

Status SharedMemoryLane::create(StoreClient &store, const std::string &prefix,
                                int rank, int size,
                                std::chrono::milliseconds timeout,
                                std::unique_ptr<SharedMemoryLane> &out) {
  out.reset();
  if (size < 2)
    return Status::success();
  if (const char *env = std::getenv("WEFT_SHM_COLLECTIVES");
      env && std::strcmp(env, "0") == 0)
    return Status::success();
  size_t slot = std::min(kMostSlotBytes,
                         (kSegmentBudget / (2 * size_t(size))) & ~size_t(4095));
  if (slot == 0)
    return Status::success();
  std::string key = prefix + "/shm/";
  auto gather = [&](const std::string &what, const std::string &mine,
                    std::vector<std::string> &all) -> Status {
    if (Status s =
            store.set(key + what + "/" + std::to_string(rank), bytesOf(mine));
        !s.ok())
      return s;
    all.assign(size_t(size), "");
    for (int r = 0; r < size; ++r) {
      std::vector<char> value;
      if (Status s =
              store.get(key + what + "/" + std::to_string(r), timeout, value);
          !s.ok())
        return s;
      all[size_t(r)].assign(value.begin(), value.end());
    }
    return Status::success();
  };
  auto fail = [&](const std::string &why) {
    return Status::error("shared memory for communicator " + quote(prefix) +
                         ": " + why);
  };

  // Every rank decides from the same list, so all take the lane or none.
  std::string id = hostIdentity();
  std::vector<std::string> ids;
  if (Status s = gather("host", id, ids); !s.ok())
    return fail(s.message);
  if (id.empty() || std::count(ids.begin(), ids.end(), id) != size)
    return Status::success();

  // Rank 0 makes the segment and fills its header before it names it;
  // the others map it and check the header; one round of flags then says
  // whether every rank has it.
  size_t total = dataOffset(size) + 2 * size_t(size) * slot;
  Mapping mapping;
  mapping.bytes = total;
  std::string name, problem;
  auto map = [&](int fd) {
    mapping.base =
        ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mapping.base == MAP_FAILED)
      problem = "mmap: " + std::string(std::strerror(errno));
    ::close(fd);
  };
  if (rank == 0) {
    std::random_device device;
    char buf[64];
    std::snprintf(buf, sizeof buf, "/weft-%d-%08x%08x", int(::getpid()),
                  unsigned(device()), unsigned(device()));
    name = buf;
    int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0)
      problem = "shm_open: " + std::string(std::strerror(errno));
    // Reserved now, so that a full /dev/shm is this error and not a
    // SIGBUS at the first write.
    else if (int e = ::posix_fallocate(fd, 0, off_t(total)); e != 0) {
      problem = "reserving " + std::to_string(total >> 10) +
                " KiB in /dev/shm: " + std::strerror(e);
      ::close(fd);
    } else
      map(fd);
    if (mapping.base != MAP_FAILED) {
      auto *header = static_cast<Header *>(mapping.base);
      header->magic = kMagic;
      header->ranks = uint64_t(size);
      header->slotBytes = slot;
      new (&header->sleepers) std::atomic<uint32_t>(0);
      for (int r = 0; r < size; ++r)
        new (&controlsIn(mapping.base)[r]) RankControl();
    } else if (fd >= 0) {
      ::shm_unlink(name.c_str());
    }
    if (mapping.base == MAP_FAILED)
      name.clear();
  }
  std::vector<std::string> names;
  Status named = gather("name", name, names);
  if (named.ok() && rank != 0 && !names[0].empty()) {
    name = names[0];
    int fd = ::shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0)
      problem = "shm_open " + name + ": " + std::strerror(errno);
    else
      map(fd);
    if (mapping.base != MAP_FAILED) {
      auto *header = static_cast<Header *>(mapping.base);
      if (header->magic != kMagic || header->ranks != uint64_t(size) ||
          header->slotBytes != slot) {
        problem = "the segment " + name + " is not this group's";
        ::munmap(mapping.release(), total);
      }
    }
  }
  if (mapping.base != MAP_FAILED)
    controlsIn(mapping.base)[rank].pid = int32_t(::getpid());
  std::vector<std::string> mapped;
  Status agreed =
      named.ok()
          ? gather("mapped", mapping.base != MAP_FAILED ? "1" : "0", mapped)
          : named;
  // Every rank has mapped it or given up: the name can go, and the memory
  // goes with the last mapping, however the ranks end.
  if (rank == 0 && !name.empty())
    ::shm_unlink(name.c_str());
  if (!agreed.ok())
    return fail(agreed.message);
  if (std::count(mapped.begin(), mapped.end(), "1") != size) {
    if (!problem.empty())
      std::fprintf(stderr, "weft: rank %d: collectives of %s stay on TCP: %s\n",
                   rank, quote(prefix).c_str(), problem.c_str());
    return Status::success();
  }
  out.reset(new SharedMemoryLane(rank, size, mapping.release(), total, slot,
                                 timeout));
  return Status::success();
}

void SharedMemoryLane::waitFor(int peer, uint32_t target, const char *what) {
  std::atomic<uint32_t> &arrived = control(peer).arrived;
  auto behind = [&](uint32_t v) { return int32_t(v - target) < 0; };
  if (!behind(arrived.load(std::memory_order_acquire)))
    return;
  Clock::time_point start = Clock::now();
  while (Clock::now() - start < kSpin)
    for (int i = 0; i < 32; ++i) {
      if (!behind(arrived.load(std::memory_order_acquire)))
        return;
      cpuRelax();
    }
  std::atomic<uint32_t> &sleepers = static_cast<Header *>(base)->sleepers;
  Clock::time_point checked = Clock::now();
  for (;;) {
    // Counted before the last look, so that a rank arriving after it
    // sees a sleeper and wakes it (both sequentially consistent).
    sleepers.fetch_add(1);
    uint32_t seen = arrived.load();
    if (behind(seen))
      futexWait(arrived, seen, std::chrono::milliseconds(50));
    sleepers.fetch_sub(1);
    if (!behind(arrived.load(std::memory_order_acquire)))
      return;
    Clock::time_point now = Clock::now();
    if (now - start >= timeout)
      throw std::runtime_error(
          "rank " + std::to_string(peer) + " did not join the " + what +
          " within " + std::to_string(timeout.count()) +
          " ms (is it running, and does it call the same collectives in the "
          "same order?)");
    if (now - checked >= std::chrono::milliseconds(500)) {
      checked = now;
      int32_t pid = control(peer).pid;
      if (pid > 0 && processEnded(pid))
        throw std::runtime_error("rank " + std::to_string(peer) + " (process " +
                                 std::to_string(pid) + ") exited before the " +
                                 what);
    }
  }
}

template <typename Write, typename Read>
void SharedMemoryLane::round(const char *what, Write write, Read read) {
  uint32_t k = ++number, set = k & 1;
  write(slotOf(set, rank));
  control(rank).arrived.store(k);
  if (static_cast<Header *>(base)->sleepers.load() != 0)
    futexWakeAll(control(rank).arrived);
  for (int r = 1; r < size; ++r)
    waitFor((rank + r) % size, k, what);
  read(set);
}

void SharedMemoryLane::sumSlots(uint32_t set, size_t offset, size_t count,
                                float *out) const {
  std::memcpy(out, slotOf(set, 0) + offset, count * sizeof(float));
  for (int r = 1; r < size; ++r) {
    const float *from = slotOf(set, r) + offset;
    for (size_t i = 0; i < count; ++i)
      out[i] += from[i];
  }
}

void SharedMemoryLane::allReduceSum(float *data, size_t count) {
  if (count == 0)
    return;
  round(
      "all-reduce",
      [&](float *mine) { std::memcpy(mine, data, count * sizeof(float)); },
      [&](uint32_t set) { sumSlots(set, 0, count, data); });
}

void SharedMemoryLane::allGather(const float *in, size_t count, float *out) {
  if (count == 0)
    return;
  round(
      "all-gather",
      [&](float *mine) { std::memcpy(mine, in, count * sizeof(float)); },
      [&](uint32_t set) {
        for (int r = 0; r < size; ++r)
          std::memcpy(out + size_t(r) * count, slotOf(set, r),
                      count * sizeof(float));
      });
}

void SharedMemoryLane::allToAll(const float *in, size_t count, float *out) {
  if (count == 0)
    return;
  size_t n = size_t(size), offset = size_t(rank) * count;
  round(
      "all-to-all",
      [&](float *mine) { std::memcpy(mine, in, n * count * sizeof(float)); },
      [&](uint32_t set) {
        for (int r = 0; r < size; ++r)
          std::memcpy(out + size_t(r) * count, slotOf(set, r) + offset,
                      count * sizeof(float));
      });
}

void SharedMemoryLane::reduceScatterSum(const float *in, size_t count,
                                        float *out) {
  if (count == 0)
    return;
  size_t n = size_t(size), offset = size_t(rank) * count;
  round(
      "reduce-scatter",
      [&](float *mine) { std::memcpy(mine, in, n * count * sizeof(float)); },
      [&](uint32_t set) { sumSlots(set, offset, count, out); });
}
