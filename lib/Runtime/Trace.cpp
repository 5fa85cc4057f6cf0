//===- Trace.cpp - A timeline of a rank's communication -------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Trace.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

using namespace weft::rt;

namespace {

struct Span {
  std::string name;
  trace::Clock::time_point begin, end;
  int lane;
  int64_t bytes;
};

struct Recorder {
  std::mutex mutex;
  std::vector<Span> spans;
  std::atomic<int> lanes{1};
  // Times are written relative to the first use, so that a rank's trace
  // starts near zero (ranks' clocks are one machine's steady clock per
  // node; across nodes only the shapes compare).
  trace::Clock::time_point origin = trace::Clock::now();
};

Recorder &recorder() {
  static Recorder r;
  return r;
}

/// Read at each use, not once: a process forked after an earlier read
/// (a rank of a test) sees its own environment.
const char *directory() {
  const char *d = std::getenv("WEFT_TRACE");
  return d && *d ? d : nullptr;
}

} // namespace

bool trace::enabled() { return directory() != nullptr; }

int trace::newLane() { return recorder().lanes++; }

void trace::record(const std::string &name, Clock::time_point begin,
                   Clock::time_point end, int lane, int64_t bytes) {
  if (!enabled())
    return;
  Recorder &r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.spans.push_back({name, begin, end, lane, bytes});
}

Status trace::write(int rank) {
  if (!enabled())
    return Status::success();
  std::string path =
      std::string(directory()) + "/rank" + std::to_string(rank) + ".json";
  Recorder &r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::FILE *f = std::fopen(path.c_str(), "w");
  if (!f)
    return Status::error("WEFT_TRACE: cannot write " + path + ": " +
                         std::strerror(errno) +
                         " (WEFT_TRACE names an existing directory)");
  auto us = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t - r.origin).count();
  };
  std::fprintf(f, "{\"traceEvents\":[\n");
  for (size_t i = 0; i < r.spans.size(); ++i) {
    const Span &s = r.spans[i];
    std::fprintf(f,
                 "{\"name\":%s,\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                 "\"ts\":%.1f,\"dur\":%.1f",
                 nlohmann::json(s.name).dump().c_str(), rank, s.lane,
                 us(s.begin), us(s.end) - us(s.begin));
    if (s.bytes >= 0)
      std::fprintf(f, ",\"args\":{\"bytes\":%lld}", (long long)s.bytes);
    std::fprintf(f, "}%s\n", i + 1 < r.spans.size() ? "," : "");
  }
  std::fprintf(f, "]}\n");
  if (std::fclose(f) != 0)
    return Status::error("WEFT_TRACE: cannot write " + path + ": " +
                         std::strerror(errno));
  return Status::success();
}
