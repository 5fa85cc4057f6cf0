//===- TensorParallelPlan.h - Megatron layouts from propagation -*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TRANSFORMS_PARALLEL_TENSORPARALLELPLAN_H
#define WEFT_TRANSFORMS_PARALLEL_TENSORPARALLELPLAN_H

#include "weft/Dialect/Weft/IR/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

namespace weft {

/// The tensor-parallel layouts of the parameters of `forward` (the model's
/// forward function, arguments named by `weft.param`) over a `tp` axis of
/// `size` ranks, by parameter name. Parameters in `given` keep the layout
/// given; with `automatic`, the others are chosen the way Megatron-LM
/// splits a transformer, but found by propagation rather than by pattern:
/// in program order, each weight of a matmul or convolution is split along
/// the dimension that adds no gather of an activation and the fewest
/// reductions (column-parallel where its input is whole, row-parallel
/// where its input arrives split on the contraction); a weight whose every
/// split would gather an activation (a fused projection sliced whole, a
/// head whose logits are returned) stays replicated. Then each other
/// parameter (a bias) takes the split its users already want, if that
/// adds no communication. Parameters not in the result are replicated.
/// The slices of a parameter that propagation splits are recorded too:
/// the plan's decisions as much as the parameters' own layouts.
struct TensorParallelLayouts {
  llvm::StringMap<TensorSharding> params;
  /// Split slices of parameters (a fused projection's parts, split
  /// column-parallel while the parameter stays whole), by sliceKey().
  llvm::StringMap<TensorSharding> slices;
};
TensorParallelLayouts
planTensorParallel(mlir::func::FuncOp forward, mlir::StringAttr tpAxis,
                   int64_t size, const llvm::StringMap<TensorSharding> &given,
                   bool automatic);

/// Names a slice of parameter `param` (through transposes, reshapes and
/// casts) the same way in every function that repeats it; empty when
/// `slice` does not slice a parameter of `fn`.
std::string sliceKey(mlir::func::FuncOp fn, mlir::Operation *slice);

} // namespace weft

#endif // WEFT_TRANSFORMS_PARALLEL_TENSORPARALLELPLAN_H
