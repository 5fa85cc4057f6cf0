/*===- Kernels.h - Runtime kernels that generated code calls --------------===*\
|*                                                                            *|
|* Part of the Weft project.                                                  *|
|*                                                                            *|
|* Generated code calls these by name with plain C arguments; they wrap       *|
|* libraries (OpenBLAS) the compiler should not re-implement.                 *|
\*===----------------------------------------------------------------------===*/

#ifndef WEFT_RUNTIME_KERNELS_H
#define WEFT_RUNTIME_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* For b in [0, batch): C_b = op(A_b) * op(B_b), row-major, where op
   transposes when trans* != 0 and X_b = X + b * strideX (a stride of 0
   broadcasts one matrix over the batch). C is overwritten (beta = 0).
   m x k = op(A), k x n = op(B), m x n = C; lda/ldb/ldc are the row strides of
   A, B and C as stored. */
void weft_rt_sgemm(int64_t batch, int32_t transA, int32_t transB, int64_t m,
                   int64_t n, int64_t k, const float *a, int64_t lda,
                   int64_t strideA, const float *b, int64_t ldb,
                   int64_t strideB, float *c, int64_t ldc, int64_t strideC);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_RUNTIME_KERNELS_H */
