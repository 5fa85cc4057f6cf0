//===- Metrics.cpp - Per-step training metrics and progress lines ---------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Metrics.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstring>

#include <sys/resource.h>
#include <unistd.h>

using namespace weft::rt;

namespace {

/// `%.*g` for finite values, `null` otherwise. Nine significant digits
/// round-trip an f32 loss exactly.
std::string number(double v, int digits) {
  if (!std::isfinite(v))
    return "null";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
  return buf;
}

} // namespace

std::string weft::rt::metricsJsonLine(const StepMetrics &m) {
  std::string out = "{\"step\":" + std::to_string(m.step) +
                    ",\"loss\":" + number(m.loss, 9) +
                    ",\"lr\":" + number(m.lr, 9) +
                    ",\"step_time_s\":" + number(m.stepTimeS, 6) +
                    ",\"samples_per_s\":" + number(m.samplesPerS, 6);
  if (m.tokensPerS >= 0)
    out += ",\"tokens_per_s\":" + number(m.tokensPerS, 6);
  if (m.gradNorm >= 0 || std::isnan(m.gradNorm))
    out += ",\"grad_norm\":" + number(m.gradNorm, 9);
  if (m.commWaitS >= 0)
    out += ",\"comm_wait_s\":" + number(m.commWaitS, 6);
  if (m.predictedStepTimeS >= 0)
    out += ",\"predicted_step_time_s\":" + number(m.predictedStepTimeS, 6);
  if (m.bubble >= 0)
    out += ",\"bubble\":" + number(m.bubble, 6) +
           ",\"bubble_predicted\":" + number(m.bubblePredicted, 6);
  if (m.skipped)
    out += ",\"skipped\":true";
  out += ",\"data_wait_s\":" + number(m.dataWaitS, 6);
  if (m.peakRssBytes >= 0)
    out += ",\"peak_rss_bytes\":" + std::to_string(m.peakRssBytes);
  if (m.baselineRssBytes >= 0)
    out += ",\"baseline_rss_bytes\":" + std::to_string(m.baselineRssBytes);
  return out + "}";
}

int64_t weft::rt::peakRssBytes() {
  struct rusage usage;
  if (::getrusage(RUSAGE_SELF, &usage) != 0)
    return -1;
  // Linux reports kilobytes (macOS bytes; Weft's runtime targets Linux).
  return int64_t(usage.ru_maxrss) * 1024;
}

int64_t weft::rt::currentRssBytes() {
  std::FILE *f = std::fopen("/proc/self/statm", "r");
  if (!f)
    return -1;
  long long size = 0, resident = 0;
  int n = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  if (n != 2)
    return -1;
  return int64_t(resident) * int64_t(::sysconf(_SC_PAGESIZE));
}

MetricsWriter::~MetricsWriter() {
  if (file)
    std::fclose(file);
}

Status MetricsWriter::open(const std::string &p, int64_t resumeStep) {
  path = p;
  if (resumeStep > 0) {
    // Keep what the resumed-from run logged up to its checkpoint.
    std::string kept;
    if (std::FILE *in = std::fopen(path.c_str(), "rb")) {
      std::string text;
      char buf[1 << 16];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof(buf), in)) > 0)
        text.append(buf, n);
      std::fclose(in);
      size_t pos = 0;
      while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos)
          break; // A torn last line from a crash.
        std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j.contains("step") &&
            j["step"].is_number_integer() &&
            j["step"].get<int64_t>() <= resumeStep)
          kept += line + "\n";
      }
    }
    if (Status s = writeFileAtomic(path, {{kept.data(), kept.size()}}); !s.ok())
      return s;
    file = std::fopen(path.c_str(), "ab");
  } else {
    file = std::fopen(path.c_str(), "wb");
  }
  if (!file)
    return Status::error(path +
                         ": cannot open for writing: " + std::strerror(errno));
  return Status::success();
}

Status MetricsWriter::write(const StepMetrics &m) {
  std::string line = metricsJsonLine(m) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file) != line.size() ||
      std::fflush(file) != 0)
    return Status::error(path + ": write failed: " + std::strerror(errno));
  return Status::success();
}

std::string weft::rt::formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    seconds = 0;
  int64_t s = int64_t(std::llround(seconds));
  char buf[48];
  if (s < 60)
    std::snprintf(buf, sizeof(buf), "%" PRId64 "s", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof(buf), "%" PRId64 "m%02" PRId64 "s", s / 60,
                  s % 60);
  else if (s < 86400)
    std::snprintf(buf, sizeof(buf), "%" PRId64 "h%02" PRId64 "m", s / 3600,
                  s / 60 % 60);
  else
    std::snprintf(buf, sizeof(buf), "%" PRId64 "d%02" PRId64 "h", s / 86400,
                  s / 3600 % 24);
  return buf;
}

ProgressLog::ProgressLog(int64_t totalSteps, int64_t samplesPerStep,
                         int64_t tokensPerStep)
    : total(totalSteps), samples(samplesPerStep), tokens(tokensPerStep) {}

bool ProgressLog::record(const StepMetrics &m, int64_t every) {
  last = m;
  windowTime += m.stepTimeS;
  ++windowSteps;
  return m.step == total || (every > 0 && m.step % every == 0);
}

std::string ProgressLog::line() {
  double perStep = windowSteps ? windowTime / double(windowSteps) : 0;
  double rate = perStep > 0 ? double(tokens ? tokens : samples) / perStep : 0;
  // Enough digits that tiny losses and sub-millisecond steps still show.
  double ms = perStep * 1e3;
  char loss[32];
  bool tiny = std::fabs(last.loss) < 1e-3 && last.loss != 0;
  std::snprintf(loss, sizeof(loss), tiny ? "%.3e" : "%.4f", last.loss);
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "step %" PRId64 "/%" PRId64 " (%d%%) loss %s lr %.1e %.*f "
                "ms/step %.0f %s eta %s",
                last.step, total, total ? int(100 * last.step / total) : 100,
                loss, last.lr, ms < 1 ? 3 : 1, ms, rate,
                tokens ? "tok/s" : "samples/s",
                formatDuration(perStep * double(total - last.step)).c_str());
  windowTime = 0;
  windowSteps = 0;
  return buf;
}
