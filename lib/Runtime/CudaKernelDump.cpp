//===- CudaKernelDump.cpp - Kernel outputs from device memory -------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The --target cuda version of weft_rt_dump_kernel_output (KernelDump.h):
// the step's kernels are queued on the step stream, so the copy waits for
// it, then the view's span comes to the host and is written as the CPU
// version writes it. Only the dumped step pays: other steps return before
// touching the driver.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/KernelDump.h"

#include "CudaInternal.h"

#include <vector>

using namespace weft::rt;
namespace detail = weft::rt::cuda::detail;

extern "C" void weft_rt_cuda_dump_kernel_output(const char *kernel,
                                                int64_t call, int64_t operand,
                                                const void *data, int32_t dtype,
                                                const int64_t *layout) {
  if (!kernel_dump::wanted(call, operand))
    return;
  const char *entry = "weft_rt_cuda_dump_kernel_output";
  detail::requireInitialized(entry, kernel);
  const detail::Driver &d = detail::driver();
  cuda::api::CUstream stream = detail::stepStream();
  // The kernel (and everything before it) has run when the stream is idle.
  detail::check(d.cuStreamSynchronize(stream), entry, kernel,
                "cuStreamSynchronize");
  std::vector<uint8_t> host(size_t(kernel_dump::spanBytes(dtype, layout)));
  if (!host.empty()) {
    detail::check(d.cuMemcpyDtoHAsync(host.data(), cuda::api::CUdeviceptr(data),
                                      host.size(), stream),
                  entry, kernel, "cuMemcpyDtoHAsync");
    detail::check(d.cuStreamSynchronize(stream), entry, kernel,
                  "cuStreamSynchronize");
  }
  kernel_dump::write(kernel, call, operand, host.data(), dtype, layout);
}
