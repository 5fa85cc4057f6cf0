//===- OpsDataMovement.cpp - Evaluating constants and data movement -------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Ops that only move elements: no arithmetic, so no rounding; they work on
// every element type, i1 included.
//
//===----------------------------------------------------------------------===//

#include "EvaluatorInternal.h"

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace weft;
using namespace weft::eval;
using namespace weft::eval::detail;

namespace {

/// Decodes the constant's attribute; only an unreadable one (an elided
/// resource) fails.
LogicalResult evalConstant(ConstantOp op, Tensor &r) {
  std::string error;
  FailureOr<Tensor> value = Tensor::tryFromAttr(op.getValue(), error);
  if (failed(value))
    return op.emitError(error);
  r = std::move(*value);
  return success();
}

/// Copies `count` elements from `src` at `from` to `dst` at `to`, whichever
/// storage the element type uses.
void copyElements(const Tensor &src, int64_t from, Tensor &dst, int64_t to,
                  int64_t count) {
  if (src.isFloat())
    std::copy_n(src.fp.begin() + from, count, dst.fp.begin() + to);
  else
    std::copy_n(src.ints.begin() + from, count, dst.ints.begin() + to);
}

/// ONNX Gather: the indexed axis is replaced by the indices' shape.
LogicalResult evalGather(GatherOp op, const Tensor &x, const Tensor &indices,
                         Tensor &r) {
  int64_t axis = static_cast<int64_t>(op.getAxis());
  AxisView v(x.shape, axis);
  FailureOr<std::vector<int64_t>> rows =
      resolveIndices(op, indices, axis, v.size);
  if (failed(rows))
    return failure();
  int64_t count = static_cast<int64_t>(rows->size());
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t j = 0; j < count; ++j)
      copyElements(x, (o * v.size + (*rows)[j]) * v.inner, r,
                   (o * count + j) * v.inner, v.inner);
  return success();
}

/// Result axis i walks input axis permutation[i], so its stride is that
/// axis's input stride.
Tensor evalTranspose(TransposeOp op, const Tensor &x) {
  SmallVector<int64_t> inStrides = stridesOf(x.shape);
  SmallVector<int64_t> strides;
  for (int64_t p : op.getPermutation())
    strides.push_back(inStrides[p]);
  RankedTensorType type = op.getType();
  return takeElements(x, type, stridedOffsets(type.getShape(), strides));
}

/// A strided slice is a strided view: base offset from the starts, strides
/// multiplied by the steps.
Tensor evalSlice(SliceOp op, const Tensor &x) {
  SmallVector<int64_t> inStrides = stridesOf(x.shape);
  ArrayRef<int64_t> starts = op.getStarts(), steps = op.getStrides();
  SmallVector<int64_t> strides;
  int64_t base = 0;
  for (size_t d = 0; d < inStrides.size(); ++d) {
    base += starts[d] * inStrides[d];
    strides.push_back(inStrides[d] * steps[d]);
  }
  RankedTensorType type = op.getType();
  return takeElements(x, type, stridedOffsets(type.getShape(), strides, base));
}

/// Copies each input's contiguous block per outer index, inputs side by
/// side along the axis.
void evalConcat(ConcatOp op, ArrayRef<Tensor> inputs, Tensor &r) {
  int64_t axis = static_cast<int64_t>(op.getAxis());
  ArrayRef<int64_t> shape = r.shape;
  int64_t outer = product(shape.take_front(axis));
  int64_t inner = product(shape.drop_front(axis + 1));
  int64_t resultBlock = shape[axis] * inner;
  int64_t offset = 0;
  for (const Tensor &input : inputs) {
    int64_t block = input.shape[axis] * inner;
    for (int64_t o = 0; o < outer; ++o)
      copyElements(input, o * block, r, o * resultBlock + offset, block);
    offset += block;
  }
}

} // namespace

FailureOr<std::vector<int64_t>>
weft::eval::detail::resolveIndices(Operation *op, const Tensor &indices,
                                   int64_t axis, int64_t size) {
  int64_t count = indices.numElements();
  std::vector<int64_t> rows(count);
  for (int64_t j = 0; j < count; ++j) {
    int64_t index = indices.ints[j];
    int64_t row = index < 0 ? index + size : index;
    if (row < 0 || row >= size)
      return op->emitError("index ")
             << index << " (indices element " << j
             << ") is out of range for axis " << axis << " of size " << size
             << " (expected " << -size << " <= index < " << size << ")";
    rows[j] = row;
  }
  return rows;
}

std::optional<LogicalResult> weft::eval::detail::evaluateDataMovementOp(
    Operation *op, ArrayRef<Tensor> operands, Tensor &result) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](ConstantOp constant) { return evalConstant(constant, result); })
      .Case([&](GatherOp gather) {
        return evalGather(gather, operands[0], operands[1], result);
      })
      .Case([&](ReshapeOp) {
        // Row-major order is unchanged; only the shape is new.
        result.fp = operands[0].fp;
        result.ints = operands[0].ints;
        return success();
      })
      .Case([&](BroadcastOp) {
        result =
            takeElements(operands[0], result.getType(),
                         broadcastOffsets(result.shape, operands[0].shape));
        return success();
      })
      .Case([&](TransposeOp transpose) {
        result = evalTranspose(transpose, operands[0]);
        return success();
      })
      .Case([&](SliceOp slice) {
        result = evalSlice(slice, operands[0]);
        return success();
      })
      .Case([&](ConcatOp concat) {
        evalConcat(concat, operands, result);
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
