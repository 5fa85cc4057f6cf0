//===- MetricsTest.cpp - Tests for metrics lines and progress output ------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

using namespace weft::rt;

namespace {

TEST(MetricsTest, JsonLineHoldsEveryField) {
  StepMetrics m;
  m.step = 3;
  m.loss = 2.5;
  m.lr = 1e-3;
  m.stepTimeS = 0.25;
  m.dataWaitS = 0.001;
  m.samplesPerS = 128;
  EXPECT_EQ(metricsJsonLine(m),
            "{\"step\":3,\"loss\":2.5,\"lr\":0.001,\"step_time_s\":0.25,"
            "\"samples_per_s\":128,\"data_wait_s\":0.001}");
  m.tokensPerS = 4096;
  m.loss = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(metricsJsonLine(m),
            "{\"step\":3,\"loss\":null,\"lr\":0.001,\"step_time_s\":0.25,"
            "\"samples_per_s\":128,\"tokens_per_s\":4096,\"data_wait_s\":0."
            "001}");
}

TEST(MetricsTest, JsonLineHoldsMemoryWhenKnown) {
  StepMetrics m;
  m.peakRssBytes = 123456789;
  m.baselineRssBytes = 2048;
  EXPECT_EQ(metricsJsonLine(m),
            "{\"step\":0,\"loss\":0,\"lr\":0,\"step_time_s\":0,"
            "\"samples_per_s\":0,\"data_wait_s\":0,"
            "\"peak_rss_bytes\":123456789,\"baseline_rss_bytes\":2048}");
}

TEST(MetricsTest, RssGrowsWithTouchedMemory) {
  int64_t before = currentRssBytes();
  ASSERT_GT(before, 0);
  ASSERT_GT(peakRssBytes(), 0);
  // 64 MB written page by page must show in the current resident size, and
  // the peak is never below it (earlier tests may have set a higher peak,
  // so the peak need not grow).
  size_t bytes = size_t(64) << 20;
  std::vector<char> block(bytes, 1);
  int64_t now = currentRssBytes();
  EXPECT_GE(now, before + int64_t(bytes) - (int64_t(1) << 20));
  EXPECT_GE(peakRssBytes(), now - (int64_t(1) << 20));
  EXPECT_EQ(block[bytes - 1], 1);
}

TEST(MetricsTest, LossRoundTripsAsFloat) {
  StepMetrics m;
  m.loss = double(0.1f);
  std::string line = metricsJsonLine(m);
  size_t at = line.find("\"loss\":") + 7;
  EXPECT_EQ(float(std::strtod(line.c_str() + at, nullptr)), 0.1f);
}

TEST(MetricsTest, FormatsDurations) {
  EXPECT_EQ(formatDuration(0), "0s");
  EXPECT_EQ(formatDuration(45.4), "45s");
  EXPECT_EQ(formatDuration(123), "2m03s");
  EXPECT_EQ(formatDuration(3720), "1h02m");
  EXPECT_EQ(formatDuration(2 * 86400 + 5 * 3600), "2d05h");
  EXPECT_EQ(formatDuration(std::nan("")), "0s");
}

TEST(MetricsTest, ProgressLineAveragesItsWindow) {
  ProgressLog log(200, 8, 1024);
  StepMetrics m;
  m.loss = 2.34561;
  m.lr = 1e-3;
  for (int64_t s = 39; s <= 40; ++s) {
    m.step = s;
    m.stepTimeS = s == 39 ? 0.010 : 0.014;
    bool due = log.record(m, 20);
    EXPECT_EQ(due, s == 40);
  }
  // 12 ms/step on average; 1024 tokens per step; 160 steps left.
  EXPECT_EQ(log.line(), "step 40/200 (20%) loss 2.3456 lr 1.0e-03 12.0 "
                        "ms/step 85333 tok/s eta 2s");
}

} // namespace
