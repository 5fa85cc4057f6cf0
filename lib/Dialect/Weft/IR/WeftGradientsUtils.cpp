//===- WeftGradientsUtils.cpp - Helpers shared by the gradient rules ------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "WeftGradients.h"

using namespace mlir;
using namespace weft;

Value weft::reduceToShape(OpBuilder &builder, Location loc, Value grad,
                          RankedTensorType target) {
  RankedTensorType type = grad::typeOf(grad);
  if (type.getShape() == target.getShape())
    return grad;
  ArrayRef<int64_t> from = type.getShape(), to = target.getShape();
  int64_t extra = type.getRank() - target.getRank();
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    // Leading axes the target lacks, and axes the broadcast stretched.
    if (d < extra || (to[d - extra] == 1 && from[d] != 1))
      axes.push_back(d);
  }
  Value summed = grad;
  if (!axes.empty())
    summed = ReduceSumOp::create(builder, loc, grad, axes, /*keep_dims=*/false);
  return grad::reshape(builder, loc, summed, to);
}

RankedTensorType grad::typeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

bool grad::noGradientFlows(Operation *op, ValueRange resultGrads,
                           SmallVectorImpl<Value> &operandGrads) {
  bool flows = false;
  for (auto [result, g] : llvm::zip(op->getResults(), resultGrads))
    flows |= g && isDifferentiableType(result.getType());
  if (flows)
    return false;
  operandGrads.append(op->getNumOperands(), Value());
  return true;
}

Value grad::ifDifferentiable(Value operand, Value grad) {
  return isDifferentiableType(operand.getType()) ? grad : Value();
}

Value grad::scalar(OpBuilder &builder, Location loc, Type elementType,
                   double value) {
  auto type = RankedTensorType::get({}, elementType);
  return splat(builder, loc, type, value);
}

Value grad::splat(OpBuilder &builder, Location loc, RankedTensorType type,
                  double value) {
  auto attr = DenseElementsAttr::get(
      type, FloatAttr::get(type.getElementType(), value));
  return ConstantOp::create(builder, loc, attr);
}

Value grad::scale(OpBuilder &builder, Location loc, Value value,
                  double factor) {
  Value c = scalar(builder, loc, typeOf(value).getElementType(), factor);
  return MulOp::create(builder, loc, value, c);
}

Value grad::reshape(OpBuilder &builder, Location loc, Value value,
                    ArrayRef<int64_t> shape) {
  RankedTensorType type = typeOf(value);
  if (type.getShape() == shape)
    return value;
  return ReshapeOp::create(builder, loc, type.clone(shape), value);
}

Value grad::broadcastTo(OpBuilder &builder, Location loc, Value value,
                        ArrayRef<int64_t> shape) {
  RankedTensorType type = typeOf(value);
  if (type.getShape() == shape)
    return value;
  return BroadcastOp::create(builder, loc, type.clone(shape), value);
}

SmallVector<int64_t> grad::keptShape(ArrayRef<int64_t> shape,
                                     ArrayRef<int64_t> axes) {
  SmallVector<int64_t> kept(shape);
  for (int64_t axis : axes)
    kept[axis] = 1;
  return kept;
}

Value grad::unreduce(OpBuilder &builder, Location loc, Value grad,
                     RankedTensorType input, ArrayRef<int64_t> axes) {
  Value kept = reshape(builder, loc, grad, keptShape(input.getShape(), axes));
  return broadcastTo(builder, loc, kept, input.getShape());
}
