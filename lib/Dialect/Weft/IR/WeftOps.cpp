//===- WeftOps.cpp - Shape inference, verifiers and folders ---------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Result types come from inferReturnTypes; the InferTypeOpInterface verifier
// compares them with the spelled ones, so a shape error is reported once,
// here, with the shapes that disagree.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "WeftShapeUtils.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"

#include <cmath>

using namespace mlir;
using namespace weft;
using weft::detail::gatherShape;
using weft::detail::getRanked;
using weft::detail::inferPoolShape;
using weft::detail::inferWindow;

#include "weft/Dialect/Weft/IR/WeftInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

std::optional<SmallVector<int64_t>>
weft::broadcastShapes(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t l = i < lhs.size() ? lhs[lhs.size() - 1 - i] : 1;
    int64_t r = i < rhs.size() ? rhs[rhs.size() - 1 - i] : 1;
    if (l != r && l != 1 && r != 1)
      return std::nullopt;
    result[rank - 1 - i] = l == 1 ? r : l;
  }
  return result;
}

std::string weft::formatShape(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, "x");
  return s;
}

RankedTensorType weft::detail::getRanked(std::optional<Location> loc, Value v,
                                         StringRef what) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type)
    (void)emitOptionalError(loc, what, " must be a ranked tensor, got ",
                            v.getType());
  return type;
}

LogicalResult weft::detail::expectShape(std::optional<Location> loc, Value v,
                                        StringRef what,
                                        ArrayRef<int64_t> expected) {
  RankedTensorType t = getRanked(loc, v, what);
  if (!t)
    return failure();
  if (t.getShape() != expected)
    return emitOptionalError(loc, what, " must be ", formatShape(expected),
                             ", got ", formatShape(t.getShape()));
  return success();
}

SmallVector<int64_t> weft::detail::gatherShape(ArrayRef<int64_t> input,
                                               ArrayRef<int64_t> indices,
                                               int64_t axis) {
  SmallVector<int64_t> shape(input.take_front(axis));
  llvm::append_range(shape, indices);
  llvm::append_range(shape, input.drop_front(axis + 1));
  return shape;
}

LogicalResult
weft::detail::inferWindow(std::optional<Location> loc, ArrayRef<int64_t> in,
                          ArrayRef<int64_t> window, ArrayRef<int64_t> strides,
                          ArrayRef<int64_t> padding,
                          ArrayRef<int64_t> dilations,
                          SmallVectorImpl<int64_t> &out, bool checkWindow) {
  if ((checkWindow && window.size() != 2) || strides.size() != 2 ||
      padding.size() != 4 || dilations.size() != 2)
    return emitOptionalError(loc, "expected ",
                             checkWindow ? "a 2-D window, " : "",
                             "2 strides, 2 dilations and 4 paddings [top, "
                             "left, bottom, right]");
  for (int d = 0; d < 2; ++d) {
    if (strides[d] < 1 || dilations[d] < 1 || (checkWindow && window[d] < 1))
      return emitOptionalError(
          loc, checkWindow ? "window sizes, strides" : "strides",
          " and dilations must be >= 1");
    if (padding[d] < 0 || padding[d + 2] < 0)
      return emitOptionalError(loc, "padding must be >= 0");
    int64_t span = dilations[d] * (window[d] - 1) + 1;
    int64_t padded = in[d] + padding[d] + padding[d + 2];
    if (padded < span)
      return emitOptionalError(loc, "window of ", span,
                               " does not fit in padded spatial size ", padded);
    out.push_back((padded - span) / strides[d] + 1);
  }
  return success();
}

LogicalResult weft::detail::inferPoolShape(std::optional<Location> loc,
                                           ArrayRef<int64_t> input,
                                           ArrayRef<int64_t> kernel,
                                           ArrayRef<int64_t> strides,
                                           ArrayRef<int64_t> padding,
                                           SmallVectorImpl<int64_t> &out,
                                           bool checkWindow) {
  if (kernel.size() == 2 && padding.size() == 4)
    for (int d = 0; d < 4; ++d)
      if (padding[d] >= kernel[d % 2])
        return emitOptionalError(loc, "padding ", padding[d],
                                 " must be smaller than the kernel size ",
                                 kernel[d % 2]);
  llvm::append_range(out, input.take_front(2));
  int64_t ones[] = {1, 1};
  return inferWindow(loc, input.drop_front(2), kernel, strides, padding, ones,
                     out, checkWindow);
}

namespace {
LogicalResult checkAxis(std::optional<Location> loc, int64_t axis,
                        int64_t rank, StringRef what = "axis") {
  if (axis < 0 || axis >= rank)
    return emitOptionalError(loc, what, " ", axis, " is out of range for rank ",
                             rank, " (expected 0 <= ", what, " < ", rank, ")");
  return success();
}

LogicalResult inferBroadcast(std::optional<Location> loc, ValueRange operands,
                             Type elementType,
                             SmallVectorImpl<Type> &inferred) {
  SmallVector<int64_t> shape;
  for (Value v : operands) {
    RankedTensorType t = getRanked(loc, v, "operand");
    if (!t)
      return failure();
    std::optional<SmallVector<int64_t>> b = broadcastShapes(shape, t.getShape());
    if (!b) {
      std::string shapes;
      llvm::raw_string_ostream os(shapes);
      llvm::interleave(
          operands, os,
          [&](Value o) {
            os << formatShape(cast<RankedTensorType>(o.getType()).getShape());
          },
          " and ");
      return emitOptionalError(loc, "operand shapes ", shapes,
                               " do not broadcast");
    }
    shape = *b;
    if (!elementType)
      elementType = t.getElementType();
  }
  inferred.push_back(RankedTensorType::get(shape, elementType));
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &inferred) {
  inferred.push_back(adaptor.getValue().getType());
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// MatMulOp
//===----------------------------------------------------------------------===//

namespace {
/// matmul(transpose(x)) where the transpose swaps only the last two axes is
/// matmul(x) with that operand's flag flipped: the GEMM reads an operand
/// transposed for free, where the transpose copies it. PyTorch exports a
/// tied embedding's head as MatMul(h, Transpose(wte)): a V x d copy of the
/// weight in every forward, and its gradient computed as [d, V] and copied
/// back in every backward.
struct FoldSwapIntoMatMul : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;

  static Value swappedSource(Value v) {
    auto transpose = v.getDefiningOp<TransposeOp>();
    if (!transpose)
      return {};
    ArrayRef<int64_t> perm = transpose.getPermutation();
    int64_t rank = int64_t(perm.size());
    if (rank < 2 || perm[rank - 2] != rank - 1 || perm[rank - 1] != rank - 2)
      return {};
    for (int64_t i = 0; i + 2 < rank; ++i)
      if (perm[i] != i)
        return {};
    return transpose.getInput();
  }

  LogicalResult matchAndRewrite(MatMulOp op,
                                PatternRewriter &rewriter) const override {
    Value lhs = op.getLhs(), rhs = op.getRhs();
    bool transposeLhs = op.getTransposeLhs();
    bool transposeRhs = op.getTransposeRhs();
    if (Value source = swappedSource(lhs)) {
      lhs = source;
      transposeLhs = !transposeLhs;
    }
    if (Value source = swappedSource(rhs)) {
      rhs = source;
      transposeRhs = !transposeRhs;
    }
    if (lhs == op.getLhs() && rhs == op.getRhs())
      return rewriter.notifyMatchFailure(op, "no operand swapped");
    auto folded = MatMulOp::create(rewriter, op.getLoc(), lhs, rhs,
                                   transposeLhs, transposeRhs);
    // Stage and other discardable annotations stay with the product.
    folded->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    rewriter.replaceOp(op, folded.getResult());
    return success();
  }
};
} // namespace

void MatMulOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                           MLIRContext *context) {
  results.add<FoldSwapIntoMatMul>(context);
}

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  RankedTensorType lhs = getRanked(loc, adaptor.getLhs(), "lhs");
  RankedTensorType rhs = getRanked(loc, adaptor.getRhs(), "rhs");
  if (!lhs || !rhs)
    return failure();
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOptionalError(loc, "operands must have rank >= 2, got ",
                             formatShape(lhs.getShape()), " and ",
                             formatShape(rhs.getShape()));
  ArrayRef<int64_t> ls = lhs.getShape(), rs = rhs.getShape();
  int64_t m = ls[ls.size() - 2], kl = ls.back();
  if (adaptor.getTransposeLhs())
    std::swap(m, kl);
  int64_t kr = rs[rs.size() - 2], n = rs.back();
  if (adaptor.getTransposeRhs())
    std::swap(kr, n);
  if (kl != kr)
    return emitOptionalError(loc, "contracted sizes differ: lhs ",
                             formatShape(ls), " gives K=", kl, ", rhs ",
                             formatShape(rs), " gives K=", kr);
  std::optional<SmallVector<int64_t>> batch =
      broadcastShapes(ls.drop_back(2), rs.drop_back(2));
  if (!batch)
    return emitOptionalError(loc, "batch axes of ", formatShape(ls), " and ",
                             formatShape(rs), " do not broadcast");
  batch->push_back(m);
  batch->push_back(n);
  inferred.push_back(RankedTensorType::get(*batch, lhs.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

#define WEFT_BINARY_INFER(OP)                                                  \
  LogicalResult OP::inferReturnTypes(MLIRContext *,                            \
                                     std::optional<Location> loc,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    return inferBroadcast(loc, adaptor.getOperands(), Type(), inferred);       \
  }
WEFT_BINARY_INFER(AddOp)
WEFT_BINARY_INFER(SubOp)
WEFT_BINARY_INFER(MulOp)
WEFT_BINARY_INFER(DivOp)
WEFT_BINARY_INFER(PowOp)
WEFT_BINARY_INFER(MaxOp)
WEFT_BINARY_INFER(MinOp)
#undef WEFT_BINARY_INFER

LogicalResult CmpOp::inferReturnTypes(MLIRContext *context,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  return inferBroadcast(loc, adaptor.getOperands(),
                        IntegerType::get(context, 1), inferred);
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  RankedTensorType onTrue = getRanked(loc, adaptor.getOnTrue(), "on_true");
  if (!onTrue)
    return failure();
  return inferBroadcast(loc, adaptor.getOperands(), onTrue.getElementType(),
                        inferred);
}


OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// Softmax, layer norm, reductions
//===----------------------------------------------------------------------===//

// Result types of same-type ops are inferred by ODS; only axes need checks.
LogicalResult SoftmaxOp::verify() {
  return checkAxis(getLoc(), getAxis(), getType().getRank());
}
LogicalResult LogSoftmaxOp::verify() {
  return checkAxis(getLoc(), getAxis(), getType().getRank());
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  RankedTensorType t = getRanked(loc, adaptor.getInput(), "input");
  RankedTensorType scale = getRanked(loc, adaptor.getScale(), "scale");
  RankedTensorType bias = getRanked(loc, adaptor.getBias(), "bias");
  if (!t || !scale || !bias)
    return failure();
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, t.getRank())))
    return failure();
  ArrayRef<int64_t> normalized = t.getShape().drop_front(axis);
  if (scale.getShape() != normalized || bias.getShape() != normalized)
    return emitOptionalError(
        loc, "scale (", formatShape(scale.getShape()), ") and bias (",
        formatShape(bias.getShape()), ") must have the normalized shape ",
        formatShape(normalized));
  inferred.push_back(t);
  return success();
}

namespace {
LogicalResult inferReduce(std::optional<Location> loc, Value input,
                          ArrayRef<int64_t> axes, bool keepDims,
                          SmallVectorImpl<Type> &inferred) {
  RankedTensorType t = getRanked(loc, input, "input");
  if (!t)
    return failure();
  llvm::SmallBitVector reduced(t.getRank());
  int64_t previous = -1;
  for (int64_t axis : axes) {
    if (failed(checkAxis(loc, axis, t.getRank())))
      return failure();
    if (axis <= previous)
      return emitOptionalError(loc, "axes must be sorted and distinct");
    previous = axis;
    reduced.set(axis);
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < t.getRank(); ++i) {
    if (!reduced.test(i))
      shape.push_back(t.getDimSize(i));
    else if (keepDims)
      shape.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(shape, t.getElementType()));
  return success();
}
} // namespace

#define WEFT_REDUCE_INFER(OP)                                                  \
  LogicalResult OP::inferReturnTypes(MLIRContext *,                            \
                                     std::optional<Location> loc,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    return inferReduce(loc, adaptor.getInput(), adaptor.getAxes(),             \
                       adaptor.getKeepDims(), inferred);                       \
  }
WEFT_REDUCE_INFER(ReduceSumOp)
WEFT_REDUCE_INFER(ReduceMeanOp)
WEFT_REDUCE_INFER(ReduceMaxOp)
#undef WEFT_REDUCE_INFER

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  RankedTensorType t = getRanked(loc, adaptor.getInput(), "input");
  RankedTensorType idx = getRanked(loc, adaptor.getIndices(), "indices");
  if (!t || !idx)
    return failure();
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, t.getRank())))
    return failure();
  SmallVector<int64_t> shape = gatherShape(t.getShape(), idx.getShape(), axis);
  inferred.push_back(RankedTensorType::get(shape, t.getElementType()));
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getType());
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << formatShape(in.getShape()) << " (" << in.getNumElements()
           << " elements) to " << formatShape(out.getShape()) << " ("
           << out.getNumElements() << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // reshape(reshape(x)) only depends on x's elements.
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput()))
    return dense.reshape(cast<ShapedType>(getType()));
  return {};
}

LogicalResult BroadcastOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getType());
  std::optional<SmallVector<int64_t>> b =
      broadcastShapes(in.getShape(), out.getShape());
  if (!b || ArrayRef<int64_t>(*b) != out.getShape())
    return emitOpError("cannot broadcast ")
           << formatShape(in.getShape()) << " to "
           << formatShape(out.getShape());
  return success();
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput()))
    if (dense.isSplat())
      return DenseElementsAttr::get(cast<ShapedType>(getType()),
                                    dense.getSplatValue<Attribute>());
  return {};
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  RankedTensorType t = getRanked(loc, adaptor.getInput(), "input");
  if (!t)
    return failure();
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if (static_cast<int64_t>(perm.size()) != t.getRank())
    return emitOptionalError(loc, "permutation has ", perm.size(),
                             " entries but the input has rank ", t.getRank());
  llvm::SmallBitVector seen(t.getRank());
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= t.getRank() || seen.test(p))
      return emitOptionalError(loc, "permutation is not a permutation of [0, ",
                               t.getRank(), ")");
    seen.set(p);
    shape.push_back(t.getDimSize(p));
  }
  inferred.push_back(RankedTensorType::get(shape, t.getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> perm = getPermutation();
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return getInput();
  // transpose(transpose(x, p), q) = transpose(x, p[q]).
  if (auto producer = getInput().getDefiningOp<TransposeOp>()) {
    ArrayRef<int64_t> inner = producer.getPermutation();
    SmallVector<int64_t> composed;
    for (int64_t p : perm)
      composed.push_back(inner[p]);
    setPermutation(composed);
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  return {};
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  RankedTensorType t = getRanked(loc, adaptor.getInput(), "input");
  if (!t)
    return failure();
  ArrayRef<int64_t> starts = adaptor.getStarts(), limits = adaptor.getLimits(),
                    strides = adaptor.getStrides();
  int64_t rank = t.getRank();
  if (static_cast<int64_t>(starts.size()) != rank ||
      static_cast<int64_t>(limits.size()) != rank ||
      static_cast<int64_t>(strides.size()) != rank)
    return emitOptionalError(loc, "starts, limits and strides need one entry "
                                  "per axis (rank ",
                             rank, ")");
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t size = t.getDimSize(i);
    if (starts[i] < 0 || starts[i] > limits[i] || limits[i] > size)
      return emitOptionalError(loc, "axis ", i, ": slice [", starts[i], ", ",
                               limits[i], ") is not within [0, ", size, "]");
    if (strides[i] < 1)
      return emitOptionalError(loc, "axis ", i, ": stride ", strides[i],
                               " must be >= 1");
    shape.push_back((limits[i] - starts[i] + strides[i] - 1) / strides[i]);
  }
  inferred.push_back(RankedTensorType::get(shape, t.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return emitOptionalError(loc, "needs at least one input");
  RankedTensorType first = getRanked(loc, inputs.front(), "input");
  if (!first)
    return failure();
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, first.getRank())))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  for (auto [i, v] : llvm::enumerate(inputs.drop_front())) {
    RankedTensorType t = getRanked(loc, v, "input");
    if (!t)
      return failure();
    if (t.getElementType() != first.getElementType())
      return emitOptionalError(loc, "input ", i + 1, " has element type ",
                               t.getElementType(), ", input 0 has ",
                               first.getElementType());
    bool fits = t.getRank() == first.getRank();
    for (int64_t d = 0; fits && d < t.getRank(); ++d)
      fits = d == axis || t.getDimSize(d) == first.getDimSize(d);
    if (!fits)
      return emitOptionalError(loc, "input ", i + 1, " (",
                               formatShape(t.getShape()),
                               ") does not match input 0 (",
                               formatShape(first.getShape()),
                               ") off axis ", axis);
    shape[axis] += t.getDimSize(axis);
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult CausalMaskOp::verify() {
  if (getType().getRank() < 2)
    return emitOpError("input must have rank >= 2, got ")
           << formatShape(getType().getShape());
  return success();
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

LogicalResult DropoutOp::verify() {
  double ratio = getRatio().convertToDouble();
  if (!(ratio >= 0 && ratio < 1))
    return emitOpError("ratio must be in [0, 1), got ") << ratio;
  if (std::optional<ArrayRef<int64_t>> global = getGlobalShape()) {
    auto type = cast<RankedTensorType>(getInput().getType());
    if (int64_t(global->size()) != type.getRank())
      return emitOpError("global_shape has ")
             << global->size() << " dimensions, the input " << type.getRank();
    for (auto [g, l] : llvm::zip(*global, type.getShape()))
      if (g < l)
        return emitOpError("global_shape is smaller than the input's shape");
  }
  return success();
}

SmallVector<int64_t> DropoutOp::maskStrides() {
  auto type = cast<RankedTensorType>(getInput().getType());
  SmallVector<int64_t> shape(type.getShape());
  if (std::optional<ArrayRef<int64_t>> global = getGlobalShape())
    shape.assign(global->begin(), global->end());
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

namespace {
/// SplitMix64's finalizer: a bijective 64-bit mix, cheap in scalar C++
/// and in arith (the lowering computes the same bits).
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}
} // namespace

uint64_t DropoutOp::keyOf(int64_t seed, int64_t opId) {
  return mix64(uint64_t(seed) ^ mix64(uint64_t(opId) + 0x9E3779B97F4A7C15ull));
}

uint64_t DropoutOp::threshold(double ratio) {
  return uint64_t(std::ceil(ratio * double(1 << 24)));
}

bool DropoutOp::keeps(uint64_t key, uint64_t index, double ratio) {
  // The top 24 bits as a uniform integer: kept with probability 1 - ratio.
  uint64_t u = mix64(key + index * 0x9E3779B97F4A7C15ull) >> 40;
  return u >= threshold(ratio);
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

namespace {
LogicalResult inferPool(std::optional<Location> loc, Value input,
                        ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                        ArrayRef<int64_t> padding,
                        SmallVectorImpl<Type> &inferred) {
  RankedTensorType t = getRanked(loc, input, "input");
  if (!t)
    return failure();
  if (t.getRank() != 4)
    return emitOptionalError(loc, "input must be NCHW (rank 4), got ",
                             formatShape(t.getShape()));
  if (kernel.size() != 2 || kernel[0] < 1 || kernel[1] < 1)
    return emitOptionalError(loc, "kernel must be two sizes >= 1");
  SmallVector<int64_t> shape;
  if (failed(
          inferPoolShape(loc, t.getShape(), kernel, strides, padding, shape)))
    return failure();
  inferred.push_back(RankedTensorType::get(shape, t.getElementType()));
  return success();
}
} // namespace

LogicalResult Conv2DOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  RankedTensorType x = getRanked(loc, adaptor.getInput(), "input");
  RankedTensorType w = getRanked(loc, adaptor.getFilter(), "filter");
  if (!x || !w)
    return failure();
  if (x.getRank() != 4 || w.getRank() != 4)
    return emitOptionalError(loc, "input (", formatShape(x.getShape()),
                             ") and filter (", formatShape(w.getShape()),
                             ") must both have rank 4 (NCHW, OIHW)");
  int64_t groups = adaptor.getGroups();
  int64_t c = x.getDimSize(1), o = w.getDimSize(0), i = w.getDimSize(1);
  if (groups < 1 || c != i * groups || o % groups != 0)
    return emitOptionalError(loc, "input has ", c, " channels but the filter ",
                             formatShape(w.getShape()), " with groups=", groups,
                             " expects ", i * groups);
  if (Value bias = adaptor.getBias()) {
    RankedTensorType b = getRanked(loc, bias, "bias");
    if (!b || b.getShape() != ArrayRef<int64_t>{o})
      return emitOptionalError(loc, "bias must have shape ", o);
  }
  SmallVector<int64_t> shape{x.getDimSize(0), o};
  if (failed(inferWindow(loc, x.getShape().drop_front(2),
                         w.getShape().drop_front(2), adaptor.getStrides(),
                         adaptor.getPadding(), adaptor.getDilations(), shape)))
    return failure();
  inferred.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

LogicalResult MaxPool2DOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferPool(loc, adaptor.getInput(), adaptor.getKernel(),
                   adaptor.getStrides(), adaptor.getPadding(), inferred);
}

LogicalResult AvgPool2DOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferPool(loc, adaptor.getInput(), adaptor.getKernel(),
                   adaptor.getStrides(), adaptor.getPadding(), inferred);
}

LogicalResult GlobalAvgPoolOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  RankedTensorType t = getRanked(loc, adaptor.getInput(), "input");
  if (!t)
    return failure();
  if (t.getRank() < 3)
    return emitOptionalError(loc, "input must have rank >= 3 (N, C, "
                                  "spatial...), got ",
                             formatShape(t.getShape()));
  SmallVector<int64_t> shape(t.getShape().take_front(2));
  shape.append(t.getRank() - 2, 1);
  inferred.push_back(RankedTensorType::get(shape, t.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  RankedTensorType logits = getRanked(loc, adaptor.getLogits(), "logits");
  RankedTensorType labels = getRanked(loc, adaptor.getLabels(), "labels");
  if (!logits || !labels)
    return failure();
  if (logits.getRank() < 1)
    return emitOptionalError(loc, "logits must have a class axis");
  ArrayRef<int64_t> expected = logits.getShape().drop_back();
  if (labels.getShape() != expected)
    return emitOptionalError(
        loc, "labels shape ", formatShape(labels.getShape()),
        " does not fit logits ", formatShape(logits.getShape()),
        ": expected the logits shape without its class axis (",
        formatShape(expected), ")");
  inferred.push_back(RankedTensorType::get({}, logits.getElementType()));
  return success();
}

LogicalResult MseOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  RankedTensorType p = getRanked(loc, adaptor.getPrediction(), "prediction");
  RankedTensorType t = getRanked(loc, adaptor.getTarget(), "target");
  if (!p || !t)
    return failure();
  if (p.getShape() != t.getShape())
    return emitOptionalError(loc, "prediction ", formatShape(p.getShape()),
                             " and target ", formatShape(t.getShape()),
                             " must have the same shape");
  inferred.push_back(RankedTensorType::get({}, p.getElementType()));
  return success();
}

#define GET_OP_CLASSES
#include "weft/Dialect/Weft/IR/WeftOps.cpp.inc"
