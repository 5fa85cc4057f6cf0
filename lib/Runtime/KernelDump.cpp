//===- KernelDump.cpp - Kernel outputs written to .npy files --------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// What a step compiled with `weftc --dump-kernel-outputs` calls after each
// kernel (include/weft/Runtime/KernelDump.h): with WEFT_DUMP_KERNELS=DIR,
// one step's kernel outputs as DIR/<call>_<kernel>_<operand>.npy, the
// input of test/lib/compare_kernel_dumps.py. The CUDA version, which first
// copies from the device, is CudaKernelDump.cpp.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/KernelDump.h"

#include "weft/Formats/HostArray.h"
#include "weft/Formats/Npy.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <sys/stat.h>
#include <vector>

using namespace weft::rt;

namespace {

[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "error: WEFT_DUMP_KERNELS: %s\n", message.c_str());
  std::exit(1);
}

/// The environment, read once.
struct Config {
  std::string dir;
  int64_t step = 1;
};

const Config &config() {
  static const Config config = [] {
    Config c;
    const char *dir = std::getenv("WEFT_DUMP_KERNELS");
    if (!dir || !*dir)
      return c;
    c.dir = dir;
    if (const char *step = std::getenv("WEFT_DUMP_KERNELS_STEP")) {
      char *end = nullptr;
      long long n = std::strtoll(step, &end, 10);
      if (!*step || *end || n < 1)
        die("WEFT_DUMP_KERNELS_STEP must be a step number from 1, got '" +
            std::string(step) + "'");
      c.step = n;
    }
    if (::mkdir(c.dir.c_str(), 0777) != 0 && errno != EEXIST)
      die("cannot make the folder " + quote(c.dir) + ": " +
          std::strerror(errno));
    return c;
  }();
  return config;
}

/// Where the calls are: the step (from 1) and its last (call, operand).
struct Position {
  std::mutex mutex;
  int64_t step = 0;
  int64_t call = -1, operand = -1;
};

Position &position() {
  static Position p;
  return p;
}

DType checkedDType(int32_t code) {
  if (code < int32_t(DType::F64) || code > int32_t(DType::Bool))
    die("unknown element type code " + std::to_string(code) +
        " (a runtime older than the compiler?)");
  return DType(code);
}

} // namespace

bool kernel_dump::wanted(int64_t call, int64_t operand) {
  const Config &c = config();
  if (c.dir.empty())
    return false;
  Position &p = position();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.step == 0 || call < p.call ||
      (call == p.call && operand <= p.operand)) {
    ++p.step;
    if (p.step == c.step)
      std::fprintf(stderr,
                   "note: WEFT_DUMP_KERNELS: writing the kernel outputs of "
                   "step %lld to %s\n",
                   (long long)p.step, c.dir.c_str());
  }
  p.call = call;
  p.operand = operand;
  return p.step == c.step;
}

int64_t kernel_dump::spanBytes(int32_t dtype, const int64_t *layout) {
  int64_t rank = layout[0];
  const int64_t *sizes = layout + 1, *strides = layout + 1 + rank;
  int64_t last = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (sizes[d] == 0)
      return 0;
    if (strides[d] < 0)
      die("a view with a negative stride is not supported");
    last += (sizes[d] - 1) * strides[d];
  }
  return (last + 1) * int64_t(dtypeSize(checkedDType(dtype)));
}

void kernel_dump::write(const char *kernel, int64_t call, int64_t operand,
                        const void *data, int32_t dtype,
                        const int64_t *layout) {
  DType type = checkedDType(dtype);
  size_t bytes = dtypeSize(type);
  int64_t rank = layout[0];
  const int64_t *sizes = layout + 1, *strides = layout + 1 + rank;
  HostArray array;
  // .npy has no bf16: its bits, as uint16 (compare_kernel_dumps.py reads
  // them back).
  array.dtype = type == DType::BF16 ? DType::U16 : type;
  array.shape.assign(sizes, sizes + rank);
  int64_t count = array.numElements();
  array.data.resize(size_t(count) * bytes);

  // Row-major over the view: an odometer over the outer dimensions, the
  // innermost copied in one piece where it is contiguous.
  const auto *src = static_cast<const uint8_t *>(data);
  uint8_t *dst = array.data.data();
  int64_t inner = rank ? sizes[rank - 1] : 1;
  int64_t innerStride = rank ? strides[rank - 1] : 1;
  std::vector<int64_t> index(rank > 1 ? rank - 1 : 0, 0);
  for (int64_t done = 0; count && done < count; done += inner) {
    int64_t offset = 0;
    for (size_t d = 0; d < index.size(); ++d)
      offset += index[d] * strides[d];
    const uint8_t *row = src + offset * int64_t(bytes);
    if (innerStride == 1) {
      std::memcpy(dst, row, size_t(inner) * bytes);
    } else {
      for (int64_t i = 0; i < inner; ++i)
        std::memcpy(dst + i * bytes, row + i * innerStride * int64_t(bytes),
                    bytes);
    }
    dst += inner * bytes;
    for (int64_t d = int64_t(index.size()) - 1; d >= 0; --d) {
      if (++index[d] < sizes[d])
        break;
      index[d] = 0;
    }
  }

  char number[32];
  std::snprintf(number, sizeof(number), "%04lld", (long long)call);
  std::string path = config().dir + "/" + number + "_" + kernel + "_" +
                     std::to_string(operand) + ".npy";
  if (Status s = writeNpy(path, array); !s.ok())
    die(s.message);
}

extern "C" void weft_rt_dump_kernel_output(const char *kernel, int64_t call,
                                           int64_t operand, const void *data,
                                           int32_t dtype,
                                           const int64_t *layout) {
  if (kernel_dump::wanted(call, operand))
    kernel_dump::write(kernel, call, operand, data, dtype, layout);
}
