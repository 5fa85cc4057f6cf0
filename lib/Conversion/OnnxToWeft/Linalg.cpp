//===- Linalg.cpp - ONNX Gemm and MatMul to weft --------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Gemm and MatMul become weft.matmul (with transposes, scales and bias).
// Convolutions and pooling are in Convolution.cpp.
//
//===----------------------------------------------------------------------===//

#include "Legalizers.h"

using namespace mlir;
using namespace weft;
using namespace weft::onnxtoweft;

namespace {

/// `alpha * A' B' + beta * C` with optional transposes. The scale
/// multiplications are only built when they are not 1.
LegalizeResult legalizeGemm(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"A", "B"});
  double alpha = 1.0, beta = 1.0;
  int64_t transA = 0, transB = 0;
  if (failed(in) || failed(ctx.getFloat("alpha", alpha)) ||
      failed(ctx.getFloat("beta", beta)) ||
      failed(ctx.getInt("transA", transA)) ||
      failed(ctx.getInt("transB", transB)))
    return failure();
  Value a = (*in)[0], b = (*in)[1];
  if (shapeOf(a).size() != 2 || shapeOf(b).size() != 2)
    return ctx.emitError() << "inputs A and B must be 2-D, got "
                           << formatShape(shapeOf(a)) << " and "
                           << formatShape(shapeOf(b));
  FailureOr<Value> y = ctx.create<MatMulOp>(
      {a, b}, {ctx.boolAttr("transpose_lhs", transA != 0),
               ctx.boolAttr("transpose_rhs", transB != 0)});
  if (failed(y))
    return failure();
  Type element = elementTypeOf(*y);
  if (alpha != 1.0) {
    FailureOr<Value> scale = ctx.scalar(element, alpha);
    if (failed(scale) || failed(y = ctx.create<MulOp>({*y, *scale})))
      return failure();
  }
  if (!ctx.hasInput(2) || beta == 0.0)
    return SmallVector<Value>{*y};

  FailureOr<TypedValue<RankedTensorType>> c = ctx.getTensor(2, "C");
  if (failed(c))
    return failure();
  ArrayRef<int64_t> resultShape = shapeOf(*y);
  std::optional<SmallVector<int64_t>> broadcast =
      broadcastShapes(shapeOf(*c), resultShape);
  if (!broadcast || ArrayRef<int64_t>(*broadcast) != resultShape)
    return ctx.emitError() << "input 2 (C) of shape "
                           << formatShape(shapeOf(*c))
                           << " does not broadcast to the result shape "
                           << formatShape(resultShape);
  Value bias = *c;
  if (beta != 1.0) {
    FailureOr<Value> scale = ctx.scalar(element, beta);
    FailureOr<Value> scaled;
    if (failed(scale) || failed(scaled = ctx.create<MulOp>({bias, *scale})))
      return failure();
    bias = *scaled;
  }
  return one(ctx.create<AddOp>({*y, bias}));
}

/// numpy matmul: a 1-D operand becomes a matrix for the product and its
/// axis is dropped from the result; batch axes broadcast in weft.matmul.
LegalizeResult legalizeMatMul(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"A", "B"});
  if (failed(in))
    return failure();
  Value a = (*in)[0], b = (*in)[1];
  size_t rankA = shapeOf(a).size(), rankB = shapeOf(b).size();
  if (rankA == 0 || rankB == 0)
    return ctx.emitError() << "inputs must have rank >= 1, got "
                           << formatShape(shapeOf(a)) << " and "
                           << formatShape(shapeOf(b));
  FailureOr<Value> lhs =
      rankA == 1 ? ctx.reshape(a, {1, shapeOf(a)[0]}) : FailureOr<Value>(a);
  FailureOr<Value> rhs =
      rankB == 1 ? ctx.reshape(b, {shapeOf(b)[0], 1}) : FailureOr<Value>(b);
  if (failed(lhs) || failed(rhs))
    return failure();
  FailureOr<Value> y = ctx.create<MatMulOp>({*lhs, *rhs});
  if (failed(y) || (rankA > 1 && rankB > 1))
    return one(y);
  // The product is [..., M, N]; drop N for a 1-D B, then M for a 1-D A.
  SmallVector<int64_t> shape(shapeOf(*y));
  if (rankB == 1)
    shape.pop_back();
  if (rankA == 1)
    shape.erase(shape.end() - (rankB == 1 ? 1 : 2));
  return one(ctx.reshape(*y, shape));
}

} // namespace

void weft::onnxtoweft::populateLinalgLegalizers(LegalizerRegistry &registry) {
  registry.add("Gemm", 7, kMaxOpset, legalizeGemm);
  registry.add("MatMul", 1, kMaxOpset, legalizeMatMul);
}
