//===- KernelDumpTest.cpp - Kernel outputs written as .npy ----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/KernelDump.h"

#include "weft/Formats/HostArray.h"
#include "weft/Formats/Npy.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace weft::rt;

namespace {

/// One test: the environment is read once per process.
TEST(KernelDumpTest, WritesViewsOfTheFirstStepRowMajor) {
  char tmpl[] = "/tmp/weft-kernel-dump-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = std::string(tmpl) + "/dumps";
  ASSERT_EQ(setenv("WEFT_DUMP_KERNELS", dir.c_str(), 1), 0);
  unsetenv("WEFT_DUMP_KERNELS_STEP");

  // A 3x4 f32 buffer; the kernel wrote its transpose's view [1:4, 0:2] of
  // the 4x3 transpose: sizes [3, 2], strides [1, 4], offset 1.
  std::vector<float> buffer(12);
  for (int i = 0; i < 12; ++i)
    buffer[i] = float(i);
  const int64_t view[] = {2, 3, 2, 1, 4};
  weft_rt_dump_kernel_output("train_step.fused_7", 3, 2, buffer.data() + 1,
                             int32_t(DType::F32), view);
  // bf16 1.0 and -2.0, a scalar (rank 0) of i64.
  std::vector<uint16_t> bf16 = {0x3f80, 0xc000};
  const int64_t vector[] = {1, 2, 1};
  weft_rt_dump_kernel_output("train_step.kernel_9", 12, 0, bf16.data(),
                             int32_t(DType::BF16), vector);
  int64_t scalar = 42;
  const int64_t none[] = {0};
  weft_rt_dump_kernel_output("train_step.kernel_9", 12, 1, &scalar,
                             int32_t(DType::I64), none);
  // The next step starts at a lower call: not written.
  weft_rt_dump_kernel_output("train_step.fused_7", 3, 2, buffer.data(),
                             int32_t(DType::F32), view);

  HostArray a;
  ASSERT_TRUE(readNpy(dir + "/0003_train_step.fused_7_2.npy", a).ok());
  EXPECT_EQ(a.dtype, DType::F32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 2}));
  std::vector<double> expected = {1, 5, 2, 6, 3, 7};
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_EQ(a.getAsDouble(i), expected[i]) << i;

  HostArray b;
  ASSERT_TRUE(readNpy(dir + "/0012_train_step.kernel_9_0.npy", b).ok());
  EXPECT_EQ(b.dtype, DType::U16);
  EXPECT_EQ(b.getAsInt(0), 0x3f80);
  EXPECT_EQ(b.getAsInt(1), 0xc000);

  HostArray c;
  ASSERT_TRUE(readNpy(dir + "/0012_train_step.kernel_9_1.npy", c).ok());
  EXPECT_EQ(c.dtype, DType::I64);
  EXPECT_TRUE(c.shape.empty());
  EXPECT_EQ(c.getAsInt(0), 42);

  // The step-2 call would have rewritten fused_7 from buffer[0].
  HostArray again;
  ASSERT_TRUE(readNpy(dir + "/0003_train_step.fused_7_2.npy", again).ok());
  EXPECT_EQ(again.getAsDouble(0), 1.0);
  EXPECT_EQ(kernel_dump::spanBytes(int32_t(DType::F32), view), 4 * 7);
  std::filesystem::remove_all(tmpl);
}

} // namespace
