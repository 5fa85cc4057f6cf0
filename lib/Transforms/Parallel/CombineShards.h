//===- CombineShards.h - Ops over an axis split across ranks ----*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The per-rank forms of ops whose rule lets a reduced or indexed axis be
// split (Kind::Combined, a gather's table axis): a vocabulary-parallel
// output head and embedding. Each builds, at `b`, from `op`'s operands
// (already local), the value standing for `op`'s local result.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TRANSFORMS_PARALLEL_COMBINESHARDS_H
#define WEFT_TRANSFORMS_PARALLEL_COMBINESHARDS_H

#include "weft/Dialect/Weft/IR/WeftOps.h"

namespace weft {

/// softmax, log_softmax, cross_entropy or layer_norm over an axis split
/// over `axes` (`ranks` of them):
/// the row maximum is the maximum of the ranks' (an all-gather of one
/// value per row and a local maximum), the sum of exponentials an
/// all-reduce, and cross-entropy's target logit an all-reduce of each
/// rank's pick (zero where the label is another rank's). The logits are
/// never gathered.
mlir::Value combineOverShards(mlir::OpBuilder &b, mlir::Operation *op,
                              llvm::ArrayRef<mlir::StringAttr> axes,
                              int64_t ranks);

/// A gather from a table split along the gathered axis over `axes`: each
/// rank looks up the indices that fall in its block of rows and gives
/// zero for the others; the result is one term of a sum over the ranks.
mlir::Value lookupInShard(mlir::OpBuilder &b, GatherOp gather,
                          llvm::ArrayRef<mlir::StringAttr> axes);

} // namespace weft

#endif // WEFT_TRANSFORMS_PARALLEL_COMBINESHARDS_H
