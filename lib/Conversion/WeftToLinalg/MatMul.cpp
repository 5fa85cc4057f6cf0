//===- MatMul.cpp - Lowering weft.matmul ----------------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// weft.matmul becomes linalg.matmul or linalg.batch_matmul whose indexing
// maps express the transposes, so that a later rewrite can hand them to a
// GEMM kernel with transpose flags. The init is zero-filled in the compute
// type: bf16 and f16 products accumulate in f32 (the named ops extend their
// inputs to the output type) and are truncated once at the end, as the
// evaluator rounds each dot product once.
//
// Batch axes:
//   - none: linalg.matmul;
//   - lhs batched, rhs 2-D (or all-ones batch), lhs not transposed: the
//     batch axes collapse into M (x @ W^T of a linear layer stays a single
//     GEMM);
//   - otherwise linalg.batch_matmul over the collapsed batch. An operand
//     whose batch is all ones is read through a 2-D broadcast map, so
//     weights are not copied per batch (batch_matmul only accepts the
//     non-transposed layout there: a transposed one is transposed once);
//     a partial batch broadcast is materialized.
//
//===----------------------------------------------------------------------===//

#include "Lowerings.h"

#include "weft/Dialect/Weft/IR/WeftOps.h"

using namespace mlir;
using namespace weft;
using namespace weft::lowering;

namespace {

bool allOnes(ArrayRef<int64_t> shape) {
  return llvm::all_of(shape, [](int64_t d) { return d == 1; });
}

/// `shape` with leading ones up to `rank` axes.
SmallVector<int64_t> padLeft(ArrayRef<int64_t> shape, size_t rank) {
  SmallVector<int64_t> padded(rank - shape.size(), 1);
  padded.append(shape.begin(), shape.end());
  return padded;
}

/// An operand of a batch_matmul: the value and how the (b, m, n, k) loops
/// read it.
struct BatchOperand {
  Value value;
  AffineMap map;
};

/// Prepares one operand for a batch_matmul over `batch` (the result's
/// batch axes). `rows` and `cols` are the loops indexing the operand's
/// matrix before any transpose: (m, k) for lhs, (k, n) for rhs.
BatchOperand prepareBatchOperand(OpBuilder &b, Location loc, Value v,
                                 ArrayRef<int64_t> batch, AffineExpr rows,
                                 AffineExpr cols, bool transposed) {
  MLIRContext *ctx = b.getContext();
  auto type = cast<RankedTensorType>(v.getType());
  ArrayRef<int64_t> shape = type.getShape();
  int64_t r = shape[shape.size() - 2], c = shape.back();
  ArrayRef<int64_t> own = shape.drop_back(2);
  if (allOnes(own)) {
    // One matrix for every batch: batch_matmul reads it through a 2-D map,
    // which it accepts only in the non-transposed layout, so a transposed
    // one is transposed once (weight-sized) rather than copied per batch.
    Value matrix = reshapeTo(b, loc, v, {r, c});
    if (transposed) {
      Value init = emptyTensor(b, loc, {c, r}, type.getElementType());
      matrix = linalg::TransposeOp::create(b, loc, matrix, init,
                                           ArrayRef<int64_t>{1, 0})
                   .getResult()[0];
    }
    return {matrix, AffineMap::get(4, 0, {rows, cols}, ctx)};
  }
  SmallVector<int64_t> padded = padLeft(own, batch.size());
  if (ArrayRef<int64_t>(padded) != batch) {
    // Partial batch broadcast: materialize the operand at the full batch.
    SmallVector<int64_t> full(batch);
    full.append({r, c});
    v = buildElementwise(
        b, loc, RankedTensorType::get(full, type.getElementType()), v,
        [](OpBuilder &, Location, ValueRange args) -> SmallVector<Value> {
          return {args[0]};
        });
  }
  AffineExpr batchDim = getAffineDimExpr(0, ctx);
  return {reshapeTo(b, loc, v, {ShapedType::getNumElements(batch), r, c}),
          transposed ? AffineMap::get(4, 0, {batchDim, cols, rows}, ctx)
                     : AffineMap::get(4, 0, {batchDim, rows, cols}, ctx)};
}

struct MatMulLowering : OpConversionPattern<MatMulOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(MatMulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    Value lhs = adaptor.getLhs(), rhs = adaptor.getRhs();
    RankedTensorType type = op.getType();
    Type elementType = type.getElementType();
    Type acc = computeType(elementType);
    bool tl = op.getTransposeLhs(), tr = op.getTransposeRhs();
    ArrayRef<int64_t> shape = type.getShape();
    int64_t m = shape[shape.size() - 2], n = shape.back();
    ArrayRef<int64_t> batch = shape.drop_back(2);
    auto lhsShape = cast<RankedTensorType>(lhs.getType()).getShape();
    auto rhsShape = cast<RankedTensorType>(rhs.getType()).getShape();

    Value result;
    if (batch.empty() || (allOnes(rhsShape.drop_back(2)) && !tl)) {
      // One GEMM: any lhs batch axes fold into M (a transposed lhs is 2-D
      // here, so the reshape leaves it alone).
      Value a = reshapeTo(
          rewriter, loc, lhs,
          {ShapedType::getNumElements(lhsShape.drop_back(1)), lhsShape.back()});
      Value bm = reshapeTo(rewriter, loc, rhs, rhsShape.take_back(2));
      int64_t rows = ShapedType::getNumElements(batch) * m;
      AffineExpr dm = getAffineDimExpr(0, ctx), dn = getAffineDimExpr(1, ctx),
                 dk = getAffineDimExpr(2, ctx);
      auto map = [&](AffineExpr r, AffineExpr c) {
        return AffineMap::get(3, 0, {r, c}, ctx);
      };
      SmallVector<AffineMap> maps = {tl ? map(dk, dm) : map(dm, dk),
                                     tr ? map(dn, dk) : map(dk, dn),
                                     map(dm, dn)};
      Value init = filledTensor(rewriter, loc, {rows, n}, acc, 0.0);
      auto matmul =
          linalg::MatmulOp::create(rewriter, loc, TypeRange{init.getType()},
                                   ValueRange{a, bm}, ValueRange{init});
      if (tl || tr)
        matmul.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
      result = matmul.getResult(0);
    } else {
      AffineExpr dm = getAffineDimExpr(1, ctx), dn = getAffineDimExpr(2, ctx),
                 dk = getAffineDimExpr(3, ctx);
      BatchOperand a =
          prepareBatchOperand(rewriter, loc, lhs, batch, dm, dk, tl);
      BatchOperand bm =
          prepareBatchOperand(rewriter, loc, rhs, batch, dk, dn, tr);
      int64_t batchSize = ShapedType::getNumElements(batch);
      Value init = filledTensor(rewriter, loc, {batchSize, m, n}, acc, 0.0);
      AffineMap out =
          AffineMap::get(4, 0, {getAffineDimExpr(0, ctx), dm, dn}, ctx);
      auto matmul = linalg::BatchMatmulOp::create(
          rewriter, loc, TypeRange{init.getType()},
          ValueRange{a.value, bm.value}, ValueRange{init});
      AffineMap defaults[] = {
          AffineMap::get(4, 0, {getAffineDimExpr(0, ctx), dm, dk}, ctx),
          AffineMap::get(4, 0, {getAffineDimExpr(0, ctx), dk, dn}, ctx), out};
      if (a.map != defaults[0] || bm.map != defaults[1])
        matmul.setIndexingMapsAttr(
            rewriter.getAffineMapArrayAttr({a.map, bm.map, out}));
      result = matmul.getResult(0);
    }
    if (acc != elementType)
      result = mapTensor(rewriter, loc, result, elementType,
                         [&](OpBuilder &b, Location l, Value v) {
                           return fromCompute(b, l, v, elementType);
                         });
    rewriter.replaceOp(op, reshapeTo(rewriter, loc, result, shape));
    return success();
  }
};

} // namespace

void lowering::populateMatMulPatterns(RewritePatternSet &patterns) {
  patterns.add<MatMulLowering>(patterns.getContext());
}
