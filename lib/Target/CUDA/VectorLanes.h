//===- VectorLanes.h - Several innermost iterations per GPU thread --------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// A thread that runs one iteration of an element-wise loop moves one
// element, 2 bytes in bf16: a warp's load is 64 bytes and GELU's gradient
// on GPT-2 ran at about 1.8 TB/s of the H200's 4.8. Running `lanes`
// consecutive innermost iterations per thread, the loads and stores at the
// innermost index become one 16-byte vector access each, where the address
// is aligned (checked per thread at run time; the iterations run one by
// one otherwise).
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TARGET_CUDA_VECTORLANES_H
#define WEFT_TARGET_CUDA_VECTORLANES_H

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace weft::cuda {

/// How many consecutive innermost iterations of `nest` one thread runs: 16
/// bytes of the widest element that the body loads or stores at the
/// innermost index (of a buffer whose innermost stride is 1), when the
/// innermost trip count is a multiple of that, the loop starts at 0 with
/// step 1, and the body holds only loads, stores and ops without memory
/// effects or regions. 1 otherwise.
int64_t vectorLanes(mlir::scf::ParallelOp nest);

/// Emits at `b` the iterations of `nest`'s body at induction variables
/// `ivs` and, for `lanes` > 1, the `lanes - 1` that follow along the
/// innermost dimension (`ivs.back()` a multiple of `lanes`): as vector
/// loads and stores where every such access of this thread is aligned to
/// its size, one iteration after another otherwise.
void emitLanes(mlir::OpBuilder &b, mlir::Location loc,
               mlir::scf::ParallelOp nest, mlir::ValueRange ivs, int64_t lanes);

} // namespace weft::cuda

#endif // WEFT_TARGET_CUDA_VECTORLANES_H
