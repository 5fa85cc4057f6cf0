//===- CudaProfile.cpp - Device time per kernel and GEMM ------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// WEFT_CUDA_PROFILE=FILE (or "-" for stderr): every launch, GEMM, copy and
// fill on the step stream is bracketed by two events, and at each
// synchronization the elapsed times are added up per name. At exit the
// totals are written as a table, largest first, with how much of the steps'
// span the device was busy: the breakdown that says which kernel to work on,
// on machines where no profiler is installed. The events cost two records
// per operation, so it is off by default.
//
// The first step is left out: its launches include loading each kernel
// and cuBLASLt's (lazy loading), which later steps do not pay. So are the
// windows before it (the upload of parameters and state), and, after it,
// windows of copies alone: the parameters and optimizer state copied to
// the host for a checkpoint or at exit, one window per tensor, which on
// GPT-2 124M took 40 % of a four-step profile and are no step's time.
//
// Only the step stream is timed, and everything on it is in queue order, so
// the interval between an operation's two events is its device time, and
// the span from the first start to the last end of a synchronization window
// minus the busy time is the device waiting for the host.
//
//===----------------------------------------------------------------------===//

#include "CudaInternal.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

using namespace weft::rt::cuda;
using namespace weft::rt::cuda::api;

namespace {

struct Interval {
  CUevent start = nullptr, end = nullptr;
  const char *what = nullptr;
};

struct Total {
  uint64_t calls = 0;
  double ms = 0;
};

struct Profile {
  std::mutex mutex;
  bool enabled = false;
  std::string path;
  /// Event pairs of the current window; pairs beyond `used` are reused.
  std::vector<Interval> pairs;
  size_t used = 0;
  /// Keyed by name, not pointer: a GEMM's label is interned per shape.
  std::map<std::string, Total> totals;
  std::set<std::string> labels;
  std::vector<std::string> notes;
  double busyMs = 0, spanMs = 0;
  uint64_t windows = 0;
  /// Windows of copies alone after the first step, left out.
  uint64_t copyWindows = 0;
  double copyMs = 0;
  /// Windows holding compute seen so far, and whether the current does.
  uint64_t steps = 0;
  bool computeInWindow = false;
};

Profile &profile() {
  static Profile *p = new Profile;
  return *p;
}

void checkProfile(CUresult r, const char *driverFunction) {
  detail::check(r, "WEFT_CUDA_PROFILE", nullptr, driverFunction);
}

void writeTable() {
  Profile &p = profile();
  std::lock_guard<std::mutex> lock(p.mutex);
  FILE *f = p.path == "-" ? stderr : std::fopen(p.path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr,
                 "warning: WEFT_CUDA_PROFILE: cannot write %s; the device "
                 "profile is lost\n",
                 p.path.c_str());
    return;
  }
  std::vector<std::pair<std::string, Total>> rows(p.totals.begin(),
                                                  p.totals.end());
  std::stable_sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return a.second.ms > b.second.ms;
  });
  std::fprintf(f,
               "# device time per operation on the step stream: %llu "
               "synchronization windows after the first step (left out: "
               "one-time loading)\n",
               static_cast<unsigned long long>(p.windows));
  std::fprintf(f,
               "# busy %.3f ms of a %.3f ms span (%.1f %%); the rest the "
               "device waited for the host\n",
               p.busyMs, p.spanMs,
               p.spanMs > 0 ? 100.0 * p.busyMs / p.spanMs : 0.0);
  if (p.copyWindows)
    std::fprintf(f,
                 "# left out: %llu windows of copies alone (%.3f ms): state "
                 "copied for checkpoints and at exit\n",
                 static_cast<unsigned long long>(p.copyWindows), p.copyMs);
  for (const std::string &note : p.notes)
    std::fprintf(f, "# %s\n", note.c_str());
  std::fprintf(f, "%10s %8s %10s %6s  %s\n", "ms", "calls", "us/call", "%",
               "operation");
  for (const auto &[name, t] : rows)
    std::fprintf(f, "%10.3f %8llu %10.2f %6.2f  %s\n", t.ms,
                 static_cast<unsigned long long>(t.calls),
                 t.calls ? 1000.0 * t.ms / double(t.calls) : 0.0,
                 p.busyMs > 0 ? 100.0 * t.ms / p.busyMs : 0.0, name.c_str());
  if (f != stderr)
    std::fclose(f);
}

} // namespace

void detail::profileInitialize() {
  const char *path = std::getenv("WEFT_CUDA_PROFILE");
  if (!path || !*path)
    return;
  Profile &p = profile();
  p.path = path;
  p.enabled = true;
  std::atexit(writeTable);
}

bool detail::profiling() { return profile().enabled; }

void detail::profileNote(const std::string &line) {
  Profile &p = profile();
  if (!p.enabled)
    return;
  std::lock_guard<std::mutex> lock(p.mutex);
  p.notes.push_back(line);
}

void detail::profileBefore(bool compute) {
  Profile &p = profile();
  if (!p.enabled)
    return;
  std::lock_guard<std::mutex> lock(p.mutex);
  p.computeInWindow |= compute;
  const Driver &d = driver();
  if (p.used == p.pairs.size()) {
    Interval i;
    checkProfile(d.cuEventCreate(&i.start, 0), "cuEventCreate");
    checkProfile(d.cuEventCreate(&i.end, 0), "cuEventCreate");
    p.pairs.push_back(i);
  }
  checkProfile(d.cuEventRecord(p.pairs[p.used].start, stepStream()),
               "cuEventRecord");
}

void detail::profileAfter(const char *what) {
  Profile &p = profile();
  if (!p.enabled)
    return;
  std::lock_guard<std::mutex> lock(p.mutex);
  Interval &i = p.pairs[p.used++];
  i.what = what;
  checkProfile(driver().cuEventRecord(i.end, stepStream()), "cuEventRecord");
}

const char *detail::profileLabel(const std::string &label) {
  Profile &p = profile();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.labels.insert(label).first->c_str();
}

void detail::profileCollect() {
  Profile &p = profile();
  if (!p.enabled)
    return;
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.used == 0)
    return;
  bool first = p.computeInWindow && p.steps == 0;
  bool copiesAlone = !p.computeInWindow;
  p.steps += p.computeInWindow;
  p.computeInWindow = false;
  if (p.steps == 0 || first) {
    p.used = 0;
    return;
  }
  const Driver &d = driver();
  if (copiesAlone) {
    for (size_t n = 0; n < p.used; ++n) {
      float ms = 0;
      checkProfile(d.cuEventElapsedTime(&ms, p.pairs[n].start, p.pairs[n].end),
                   "cuEventElapsedTime");
      p.copyMs += ms;
    }
    ++p.copyWindows;
    p.used = 0;
    return;
  }
  for (size_t n = 0; n < p.used; ++n) {
    Interval &i = p.pairs[n];
    float ms = 0;
    checkProfile(d.cuEventElapsedTime(&ms, i.start, i.end),
                 "cuEventElapsedTime");
    Total &t = p.totals[i.what ? i.what : "?"];
    ++t.calls;
    t.ms += ms;
    p.busyMs += ms;
  }
  float span = 0;
  checkProfile(
      d.cuEventElapsedTime(&span, p.pairs[0].start, p.pairs[p.used - 1].end),
      "cuEventElapsedTime");
  p.spanMs += span;
  ++p.windows;
  p.used = 0;
}
