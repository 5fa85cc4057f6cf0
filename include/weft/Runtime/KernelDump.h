/*===- KernelDump.h - Kernel outputs written to files for checking --------===*\
|*                                                                            *|
|* Part of the Weft project.                                                  *|
|*                                                                            *|
|* A step compiled with `weftc --dump-kernel-outputs` calls these after each  *|
|* kernel, once per buffer the kernel wrote. With WEFT_DUMP_KERNELS=DIR set   *|
|* they write, for one step, DIR/<call>_<kernel>_<operand>.npy; unset, they   *|
|* return at once. test/lib/compare_kernel_dumps.py compares two such         *|
|* folders, the CPU's and the GPU's (docs/gpu.md, Checking kernels).          *|
\*===----------------------------------------------------------------------===*/

#ifndef WEFT_RUNTIME_KERNELDUMP_H
#define WEFT_RUNTIME_KERNELDUMP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One buffer `kernel` (its function's name) wrote at the step's kernel
   call number `call` (from 0, in the step's order), its argument number
   `operand`: `data` points at its first element, `dtype` is a
   weft::rt::DType, `layout` is [rank, sizes..., strides...], strides in
   elements. The file holds the view's elements in row-major order; bf16 as
   its bits, uint16 (.npy has no bf16; weft kernels write no uint16). The
   step is the first, or WEFT_DUMP_KERNELS_STEP=N (from 1); <call> has four
   digits or more. Host memory. */
void weft_rt_dump_kernel_output(const char *kernel, int64_t call,
                                int64_t operand, const void *data,
                                int32_t dtype, const int64_t *layout);

/* The same for device memory (--target cuda, lib/Runtime/CudaKernelDump.cpp):
   waits for the step stream, then copies the view's span to the host. */
void weft_rt_cuda_dump_kernel_output(const char *kernel, int64_t call,
                                     int64_t operand, const void *data,
                                     int32_t dtype, const int64_t *layout);

#ifdef __cplusplus
} /* extern "C" */

namespace weft::rt::kernel_dump {

/// Whether the buffer of (`call`, `operand`) is to be written:
/// WEFT_DUMP_KERNELS is set (read once) and this is the chosen step. Steps are
/// told apart by (call, operand), which grows within a step: a pair not above
/// the last one starts the next step.
bool wanted(int64_t call, int64_t operand);

/// Bytes from the view's first element to the end of its last (what a copy
/// of the view's span holds), from `layout`; 0 for an empty view.
int64_t spanBytes(int32_t dtype, const int64_t *layout);

/// Writes the view at `data` (host memory holding at least its span) as
/// DIR/<call>_<kernel>_<operand>.npy; ends the process with a message when
/// the dtype is unknown or the file cannot be written.
void write(const char *kernel, int64_t call, int64_t operand, const void *data,
           int32_t dtype, const int64_t *layout);

} // namespace weft::rt::kernel_dump
#endif

#endif /* WEFT_RUNTIME_KERNELDUMP_H */
