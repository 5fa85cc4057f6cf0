//===- Where.cpp - ONNX Where to weft, recognizing causal masks -----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// PyTorch exports `scores.masked_fill(mask, -inf)` as a Where on a constant
// T x T boolean mask, or, without constant folding (training-mode exports),
// on a comparison of a float mask buffer (GPT-2's `attn.bias == 0`).
// Materializing that mask costs T^2 memory and a select per score;
// weft.causal_mask describes the same thing in an attribute.
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

/// A constant tensor's elements as floats in row-major order: a constant,
/// or a weft.slice of one. std::nullopt for anything else.
std::optional<std::vector<float>> constantFloats(Value v) {
  DenseElementsAttr attr;
  if (matchPattern(v, m_Constant(&attr))) {
    if (!attr.getElementType().isF32())
      return std::nullopt;
    auto values = attr.getValues<float>();
    int64_t n = cast<ShapedType>(v.getType()).getNumElements();
    if (attr.isSplat())
      return std::vector<float>(n, *values.begin());
    return std::vector<float>(values.begin(), values.end());
  }
  auto slice = v.getDefiningOp<SliceOp>();
  if (!slice)
    return std::nullopt;
  std::optional<std::vector<float>> in = constantFloats(slice.getInput());
  if (!in)
    return std::nullopt;
  ArrayRef<int64_t> inShape = shapeOf(slice.getInput());
  ArrayRef<int64_t> outShape = shapeOf(slice.getResult());
  int64_t rank = inShape.size(), n = 1;
  for (int64_t d : outShape)
    n *= d;
  std::vector<float> out(n);
  SmallVector<int64_t> index(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t offset = 0;
    for (int64_t a = 0; a < rank; ++a)
      offset = offset * inShape[a] + slice.getStarts()[a] +
               index[a] * slice.getStrides()[a];
    out[i] = (*in)[offset];
    for (int64_t a = rank - 1; a >= 0 && ++index[a] == outShape[a]; --a)
      index[a] = 0;
  }
  return out;
}

/// A boolean condition's elements, when they are known while importing: a
/// constant, or a comparison of a constant with a scalar constant (a causal
/// mask stored as a float buffer, `bias == 0`; its initializer is a
/// constant when only comparisons read it, onnximport::classifyTensors).
std::optional<std::vector<bool>> constantMask(Value cond) {
  DenseElementsAttr attr;
  if (matchPattern(cond, m_Constant(&attr))) {
    std::vector<bool> mask;
    for (bool b : attr.getValues<bool>())
      mask.push_back(b);
    return mask;
  }
  auto cmp = cond.getDefiningOp<CmpOp>();
  if (!cmp || shapeOf(cmp.getLhs()) != shapeOf(cmp.getResult()) ||
      llvm::any_of(shapeOf(cmp.getRhs()), [](int64_t d) { return d != 1; }))
    return std::nullopt;
  std::optional<std::vector<float>> lhs = constantFloats(cmp.getLhs());
  std::optional<std::vector<float>> rhs = constantFloats(cmp.getRhs());
  if (!lhs || !rhs || rhs->size() != 1)
    return std::nullopt;
  float c = rhs->front();
  std::vector<bool> mask(lhs->size());
  for (size_t i = 0; i < lhs->size(); ++i) {
    float x = (*lhs)[i];
    switch (cmp.getPredicate()) {
    case CmpPredicate::eq:
      mask[i] = x == c;
      break;
    case CmpPredicate::ne:
      mask[i] = x != c;
      break;
    case CmpPredicate::lt:
      mask[i] = x < c;
      break;
    case CmpPredicate::le:
      mask[i] = x <= c;
      break;
    case CmpPredicate::gt:
      mask[i] = x > c;
      break;
    case CmpPredicate::ge:
      mask[i] = x >= c;
      break;
    }
  }
  return mask;
}

/// Recognizes `where(j > i + d, fill, x)` and `where(j <= i + d, x, fill)`
/// with a constant mask on the last two axes and a constant splat fill, the
/// way PyTorch exports `masked_fill` with a causal mask, and builds
/// `weft.causal_mask` so the mask is never materialized. Null when the
/// pattern does not apply.
FailureOr<Value> matchCausalMask(LegalizeContext &ctx, Value cond, Value onTrue,
                                 Value onFalse) {
  ArrayRef<int64_t> maskShape = shapeOf(cond);
  if (maskShape.size() < 2 ||
      !llvm::all_of(maskShape.drop_back(2), [](int64_t d) { return d == 1; }))
    return Value();
  int64_t rows = maskShape[maskShape.size() - 2], cols = maskShape.back();
  std::optional<std::vector<bool>> known = constantMask(cond);
  if (!known)
    return Value();
  std::vector<bool> mask = std::move(*known);

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
