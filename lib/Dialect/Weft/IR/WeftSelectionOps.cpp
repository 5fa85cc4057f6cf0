//===- WeftSelectionOps.cpp - Rounding, cumsum, arg_max/min, top_k --------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Shape inference, verifiers and planner costs of the rounding, scan and
// selection ops. Their costs count one operation per comparison or add a
// straightforward kernel does, so the planner weighs a top_k over a long
// axis as the selection it is rather than as free data movement.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"

using namespace mlir;
using namespace weft;

namespace {
LogicalResult checkAxis(std::optional<Location> loc, int64_t axis,
                        int64_t rank) {
  if (axis < 0 || axis >= rank)
    return emitOptionalError(loc, "axis ", axis, " is out of range for rank ",
                             rank, " (expected 0 <= axis < ", rank, ")");
  return success();
}

double elementsOf(Value v) {
  return static_cast<double>(
      cast<RankedTensorType>(v.getType()).getNumElements());
}

/// The input's shape with `axis` replaced by `size` (dropped when negative).
LogicalResult inferAlongAxis(std::optional<Location> loc, Value input,
                             int64_t axis, int64_t size, Type elementType,
                             SmallVectorImpl<Type> &inferred) {
  auto t = dyn_cast<RankedTensorType>(input.getType());
  if (!t)
    return emitOptionalError(loc, "input must be a ranked tensor");
  if (failed(checkAxis(loc, axis, t.getRank())))
    return failure();
  SmallVector<int64_t> shape(t.getShape());
  if (size < 0)
    shape.erase(shape.begin() + axis);
  else
    shape[axis] = size;
  inferred.push_back(RankedTensorType::get(shape, elementType));
  return success();
}

LogicalResult inferTopK(std::optional<Location> loc, Value input, int64_t axis,
                        int64_t k, Type elementType,
                        SmallVectorImpl<Type> &inferred) {
  if (failed(inferAlongAxis(loc, input, axis, k, elementType, inferred)))
    return failure();
  int64_t size = cast<RankedTensorType>(input.getType()).getDimSize(axis);
  if (k < 1 || k > size)
    return emitOptionalError(loc, "k = ", k, " is out of range for an axis of ",
                             size, " (expected 1 <= k <= ", size, ")");
  return success();
}

LogicalResult inferArgReduce(std::optional<Location> loc, Value input,
                             int64_t axis, bool keepDims,
                             SmallVectorImpl<Type> &inferred) {
  Type i64 = IntegerType::get(input.getContext(), 64);
  if (failed(
          inferAlongAxis(loc, input, axis, keepDims ? 1 : -1, i64, inferred)))
    return failure();
  if (cast<RankedTensorType>(input.getType()).getDimSize(axis) == 0)
    return emitOptionalError(loc, "axis ", axis,
                             " is empty: it has no extreme element");
  return success();
}
} // namespace

double FloorOp::getFlops() { return elementsOf(getInput()); }
double CeilOp::getFlops() { return elementsOf(getInput()); }
double RoundOp::getFlops() { return elementsOf(getInput()); }

LogicalResult CumSumOp::verify() {
  return checkAxis(getLoc(), getAxis(), getType().getRank());
}
double CumSumOp::getFlops() { return elementsOf(getInput()); }

#define WEFT_ARG_REDUCE(OP)                                                    \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, Adaptor adaptor,             \
      SmallVectorImpl<Type> &inferred) {                                       \
    return inferArgReduce(loc, adaptor.getInput(), adaptor.getAxis(),          \
                          adaptor.getKeepDims(), inferred);                    \
  }                                                                            \
  double OP::getFlops() { return elementsOf(getInput()); }
WEFT_ARG_REDUCE(ArgMaxOp)
WEFT_ARG_REDUCE(ArgMinOp)
#undef WEFT_ARG_REDUCE

LogicalResult TopKOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  return inferTopK(
      loc, adaptor.getInput(), adaptor.getAxis(), adaptor.getK(),
      cast<RankedTensorType>(adaptor.getInput().getType()).getElementType(),
      inferred);
}

LogicalResult TopKIndicesOp::inferReturnTypes(MLIRContext *context,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  return inferTopK(loc, adaptor.getInput(), adaptor.getAxis(), adaptor.getK(),
                   IntegerType::get(context, 64), inferred);
}

// A selection of k from n compares every element with the k kept so far.
double TopKOp::getFlops() {
  return elementsOf(getInput()) * static_cast<double>(getK());
}
double TopKIndicesOp::getFlops() {
  return elementsOf(getInput()) * static_cast<double>(getK());
}
