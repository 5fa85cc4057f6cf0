//===- Where.cpp - ONNX Where to weft, recognizing causal masks -----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// PyTorch exports `scores.masked_fill(mask, -inf)` as a Where on a constant
// T x T boolean mask. Materializing that mask costs T^2 memory and a select
// per score; weft.causal_mask describes the same thing in an attribute.
// Without constant folding the mask is `attn.bias == 0` on a float buffer:
// the importer reads a buffer only comparisons use as its exported value
// (onnximport::classifyTensors), and the legalization's folding evaluates
// the comparison (foldCreated), so the condition is a constant here too.
//
//===----------------------------------------------------------------------===//

#include "Legalizers.h"

#include "mlir/IR/Matchers.h"

#include <vector>

using namespace mlir;
using namespace weft;
using namespace weft::onnxtoweft;

namespace {

/// The diagonal `d` for which `mask[i][j] == (j > i + d)` over a T1 x T2
/// row-major mask, if there is one. Rows whose first true entry lies
/// strictly inside the row pin `d` down; every entry is then checked.
std::optional<int64_t> matchUpperTriangle(const std::vector<bool> &mask,
                                          int64_t rows, int64_t cols) {
  std::optional<int64_t> diagonal;
  for (int64_t i = 0; i < rows && !diagonal; ++i) {
    int64_t first = 0;
    while (first < cols && !mask[i * cols + first])
      ++first;
    if (first > 0 && first < cols)
      diagonal = first - i - 1;
  }
  if (!diagonal)
    return std::nullopt;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (mask[i * cols + j] != (j > i + *diagonal))
        return std::nullopt;
  return diagonal;
}

/// Recognizes `where(j > i + d, fill, x)` and `where(j <= i + d, x, fill)`
/// with a constant mask on the last two axes and a constant splat fill, the
/// way PyTorch exports `masked_fill` with a causal mask, and builds
/// `weft.causal_mask` so the mask is never materialized. Null when the
/// pattern does not apply.
FailureOr<Value> matchCausalMask(LegalizeContext &ctx, Value cond, Value onTrue,
                                 Value onFalse) {
  DenseElementsAttr maskAttr;
  ArrayRef<int64_t> maskShape = shapeOf(cond);
  if (maskShape.size() < 2 ||
      !llvm::all_of(maskShape.drop_back(2), [](int64_t d) { return d == 1; }) ||
      !matchPattern(cond, m_Constant(&maskAttr)))
    return Value();
  int64_t rows = maskShape[maskShape.size() - 2], cols = maskShape.back();
  std::vector<bool> mask;
  mask.reserve(rows * cols);
  for (bool b : maskAttr.getValues<bool>())
    mask.push_back(b);

  Value x, fillValue;
  std::optional<int64_t> diagonal = matchUpperTriangle(mask, rows, cols);
  if (diagonal) {
    fillValue = onTrue;
    x = onFalse;
  } else {
    mask.flip();
    diagonal = matchUpperTriangle(mask, rows, cols);
    if (!diagonal)
      return Value();
    fillValue = onFalse;
    x = onTrue;
  }

  DenseElementsAttr fill;
  if (!matchPattern(fillValue, m_Constant(&fill)) || !fill.isSplat() ||
      !isa<FloatType>(fill.getElementType()) ||
      fill.getElementType() != elementTypeOf(x))
    return Value();
  ArrayRef<int64_t> shape = shapeOf(x);
  if (shape.size() < 2 || shape.take_back(2) != maskShape.take_back(2))
    return Value();
  std::optional<SmallVector<int64_t>> result =
      broadcastShapes(maskShape, shapeOf(fillValue));
  if (result)
    result = broadcastShapes(*result, shape);
  if (!result || ArrayRef<int64_t>(*result) != shape)
    return Value();
  return ctx.create<CausalMaskOp>(
      {x},
      {ctx.i64Attr("diagonal", *diagonal),
       ctx.f64Attr("fill", fill.getSplatValue<APFloat>().convertToDouble())});
}

LegalizeResult legalizeWhere(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"condition", "X", "Y"});
  if (failed(in))
    return failure();
  if (elementTypeOf((*in)[0]).isInteger(1)) {
    FailureOr<Value> masked =
        matchCausalMask(ctx, (*in)[0], (*in)[1], (*in)[2]);
    if (failed(masked))
      return failure();
    if (*masked)
      return SmallVector<Value>{*masked};
  }
  return one(ctx.create<WhereOp>(*in));
}

} // namespace

void weft::onnxtoweft::populateWhereLegalizers(LegalizerRegistry &registry) {
  registry.add("Where", 9, kMaxOpset, legalizeWhere);
}
