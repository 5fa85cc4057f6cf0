//===- DataMovement.cpp - Lowering data movement and index ops ------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// reshape, broadcast, transpose, slice, concat and pad become tensor ops
// (or a copying generic); gather and one_hot are generics over the result;
// scatter_add is an scf.for over the indices that adds one slice of updates
// per index into an accumulator. Only scatter_add does arithmetic (in the
// compute type, rounded once at the end); the rest move elements of any
// type, i1 included.
//
//===----------------------------------------------------------------------===//

#include "Lowerings.h"

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace weft;
using namespace weft::lowering;

namespace {

/// An index tensor element as a row along an axis of `size`: negative
/// values count from the end (once), then the row is clamped into range so
/// that an index the evaluator rejects cannot read or write out of bounds.
Value resolveRow(OpBuilder &b, Location loc, Value raw, int64_t size) {
  Value i = arith::IndexCastOp::create(b, loc, b.getIndexType(), raw);
  Value zero = indexConstant(b, loc, 0);
  Value negative =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, zero);
  Value wrapped = arith::SelectOp::create(
      b, loc, negative,
      arith::AddIOp::create(b, loc, i, indexConstant(b, loc, size)), i);
  Value clamped = arith::MaxSIOp::create(b, loc, wrapped, zero);
  return arith::MinSIOp::create(
      b, loc, clamped, indexConstant(b, loc, std::max<int64_t>(size - 1, 0)));
}

SmallVector<OpFoldResult> indexAttrs(OpBuilder &b, ArrayRef<int64_t> values) {
  SmallVector<OpFoldResult> attrs;
  for (int64_t v : values)
    attrs.push_back(b.getIndexAttr(v));
  return attrs;
}

struct ReshapeLowering : OpConversionPattern<ReshapeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ReshapeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, reshapeTo(rewriter, op.getLoc(), adaptor.getInput(),
                                     op.getType().getShape()));
    return success();
  }
};

struct BroadcastLowering : OpConversionPattern<BroadcastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(BroadcastOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value r = buildElementwise(
        rewriter, op.getLoc(), op.getType(), adaptor.getInput(),
        [](OpBuilder &, Location, ValueRange args) -> SmallVector<Value> {
          return {args[0]};
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

struct TransposeLowering : OpConversionPattern<TransposeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TransposeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    Value init = emptyTensor(rewriter, op.getLoc(), type.getShape(),
                             type.getElementType());
    // Both ops define result axis i as input axis permutation[i].
    rewriter.replaceOp(op, linalg::TransposeOp::create(rewriter, op.getLoc(),
                                                       adaptor.getInput(), init,
                                                       op.getPermutation())
                               .getResult());
    return success();
  }
};

struct SliceLowering : OpConversionPattern<SliceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SliceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<tensor::ExtractSliceOp>(
        op, op.getType(), adaptor.getInput(),
        indexAttrs(rewriter, op.getStarts()),
        indexAttrs(rewriter, op.getType().getShape()),
        indexAttrs(rewriter, op.getStrides()));
    return success();
  }
};

struct ConcatLowering : OpConversionPattern<ConcatOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ConcatOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getType();
    int64_t axis = static_cast<int64_t>(op.getAxis());
    Value result =
        emptyTensor(rewriter, loc, type.getShape(), type.getElementType());
    SmallVector<int64_t> offsets(type.getRank(), 0);
    SmallVector<int64_t> strides(type.getRank(), 1);
    for (Value input : adaptor.getInputs()) {
      auto shape = cast<RankedTensorType>(input.getType()).getShape();
      result = tensor::InsertSliceOp::create(
          rewriter, loc, input, result, indexAttrs(rewriter, offsets),
          indexAttrs(rewriter, shape), indexAttrs(rewriter, strides));
      offsets[axis] += shape[axis];
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct PadLowering : OpConversionPattern<PadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(PadOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op,
                       padTensor(rewriter, op.getLoc(), adaptor.getInput(),
                                 op.getLow(), op.getHigh(), op.getInterior(),
                                 op.getValue().convertToDouble()));
    return success();
  }
};

/// A generic over the result reads the index, then the input element with
/// tensor.extract (the row is data dependent).
struct GatherLowering : OpConversionPattern<GatherOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GatherOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    MLIRContext *ctx = rewriter.getContext();
    RankedTensorType type = op.getType();
    Value input = adaptor.getInput();
    int64_t axis = static_cast<int64_t>(op.getAxis());
    int64_t size = cast<RankedTensorType>(input.getType()).getDimSize(axis);
    int64_t indexRank =
        cast<RankedTensorType>(adaptor.getIndices().getType()).getRank();
    int64_t rank = type.getRank();
    SmallVector<AffineExpr> indexDims;
    for (int64_t d = axis; d < axis + indexRank; ++d)
      indexDims.push_back(getAffineDimExpr(d, ctx));
    AffineMap indexMap = AffineMap::get(rank, 0, indexDims, ctx);
    Value r = buildParallel(
        rewriter, op.getLoc(), type, adaptor.getIndices(), indexMap,
        [&](OpBuilder &b, Location loc, ValueRange args) -> SmallVector<Value> {
          SmallVector<Value> coords;
          for (int64_t d = 0; d < axis; ++d)
            coords.push_back(linalg::IndexOp::create(b, loc, d));
          coords.push_back(resolveRow(b, loc, args[0], size));
          for (int64_t d = axis + indexRank; d < rank; ++d)
            coords.push_back(linalg::IndexOp::create(b, loc, d));
          return {tensor::ExtractOp::create(b, loc, input, coords)};
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

/// Viewing input as [outer, size, inner] and updates as [outer, count,
/// inner], index j adds updates[:, j, :] to result[:, row(j), :]: an
/// scf.for over the indices of slice-sized adds, O(updates) work, in order
/// of j as the evaluator (repeated rows accumulate). The adds happen in the
/// compute type and the result is rounded once.
struct ScatterAddLowering : OpConversionPattern<ScatterAddOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ScatterAddOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getType();
    Type elementType = type.getElementType();
    Type acc = computeType(elementType);
    ArrayRef<int64_t> shape = type.getShape();
    int64_t axis = static_cast<int64_t>(op.getAxis());
    int64_t outer = ShapedType::getNumElements(shape.take_front(axis));
    int64_t size = shape[axis];
    int64_t inner = ShapedType::getNumElements(shape.drop_front(axis + 1));
    int64_t count =
        cast<RankedTensorType>(adaptor.getIndices().getType()).getNumElements();

    Value input =
        reshapeTo(rewriter, loc, adaptor.getInput(), {outer, size, inner});
    Value updates =
        reshapeTo(rewriter, loc, adaptor.getUpdates(), {outer, count, inner});
    Value indices = reshapeTo(rewriter, loc, adaptor.getIndices(), {count});
    if (acc != elementType)
      input = mapTensor(
          rewriter, loc, input, acc,
          [](OpBuilder &b, Location l, Value x) { return toCompute(b, l, x); });

    auto sliceType = RankedTensorType::get({outer, 1, inner}, acc);
    SmallVector<OpFoldResult> sizes = indexAttrs(rewriter, {outer, 1, inner});
    SmallVector<OpFoldResult> ones = indexAttrs(rewriter, {1, 1, 1});
    AffineMap id = rewriter.getMultiDimIdentityMap(3);
    SmallVector<utils::IteratorType> parallel(3, utils::IteratorType::parallel);
    auto loop = scf::ForOp::create(
        rewriter, loc, indexConstant(rewriter, loc, 0),
        indexConstant(rewriter, loc, count), indexConstant(rewriter, loc, 1),
        ValueRange{input},
        [&](OpBuilder &b, Location l, Value j, ValueRange iterArgs) {
          Value raw = tensor::ExtractOp::create(b, l, indices, j);
          Value row = resolveRow(b, l, raw, size);
          SmallVector<OpFoldResult> at = {b.getIndexAttr(0), row,
                                          b.getIndexAttr(0)};
          SmallVector<OpFoldResult> from = {b.getIndexAttr(0), j,
                                            b.getIndexAttr(0)};
          Value current = tensor::ExtractSliceOp::create(
              b, l, sliceType, iterArgs[0], at, sizes, ones);
          Value update = tensor::ExtractSliceOp::create(
              b, l, RankedTensorType::get({outer, 1, inner}, elementType),
              updates, from, sizes, ones);
          Value sum =
              linalg::GenericOp::create(
                  b, l, TypeRange{sliceType}, ValueRange{update},
                  ValueRange{current}, ArrayRef<AffineMap>{id, id}, parallel,
                  [](OpBuilder &nb, Location nl, ValueRange args) {
                    Value s = arith::AddFOp::create(nb, nl, args[1],
                                                    toCompute(nb, nl, args[0]));
                    linalg::YieldOp::create(nb, nl, s);
                  })
                  .getResult(0);
          Value next = tensor::InsertSliceOp::create(b, l, sum, iterArgs[0], at,
                                                     sizes, ones);
          scf::YieldOp::create(b, l, next);
        });
    Value result = roundTensor(rewriter, loc, loop.getResult(0), elementType);
    rewriter.replaceOp(op, reshapeTo(rewriter, loc, result, shape));
    return success();
  }
};

/// `result[..., c] = indices[...] == c`; an index outside [0, C) (an
/// evaluator error) gives an all-zero row.
struct OneHotLowering : OpConversionPattern<OneHotOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OneHotOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    int64_t rank = type.getRank();
    Type elementType = type.getElementType();
    Value r = buildParallel(
        rewriter, op.getLoc(), type, adaptor.getIndices(),
        projectionMap(rewriter.getContext(), rank, rank - 1),
        [&](OpBuilder &b, Location loc, ValueRange args) -> SmallVector<Value> {
          Value c = arith::IndexCastOp::create(
              b, loc, args[0].getType(),
              linalg::IndexOp::create(b, loc, rank - 1));
          Value hit = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, c,
                                            args[0]);
          return {arith::SelectOp::create(
              b, loc, hit, scalarConstant(b, loc, elementType, 1),
              scalarConstant(b, loc, elementType, 0))};
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

} // namespace

void lowering::populateDataMovementPatterns(RewritePatternSet &patterns) {
  patterns.add<ReshapeLowering, BroadcastLowering, TransposeLowering,
               SliceLowering, ConcatLowering, PadLowering, GatherLowering,
               ScatterAddLowering, OneHotLowering>(patterns.getContext());
}
