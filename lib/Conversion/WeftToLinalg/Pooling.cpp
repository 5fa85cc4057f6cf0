//===- Pooling.cpp - Lowering 2-D pooling and its adjoints ----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// max_pool2d and avg_pool2d pad the input (with -inf and 0) and use
// linalg.pooling_nchw_max / _sum; the average divides by the kernel area or
// by the number of real cells under the window, computed from the window
// position.
//
// The adjoints are gathers, not scatters, so they stay parallel over the
// input cells: input cell (h, w) sums over the windows (y, x) that cover
// it. Those are y = (h + top) / stride - a for a < ceil(kernel / stride)
// (likewise x); the window tensors are padded so that every candidate is in
// bounds, which keeps every access an affine map. max_pool2d_grad first
// computes each window's winner (the first maximum in row-major window
// order, NaN winning, as the evaluator's scan) as a flat input index, then
// a cell takes the gradient of the windows it won. Windows that tile the
// input (kernel <= stride, no padding: the usual 2x2/2) need no sum: the
// gradient is written once per cell, with no sum.
//
//===----------------------------------------------------------------------===//

#include "Lowerings.h"

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <limits>

using namespace mlir;
using namespace weft;
using namespace weft::lowering;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// One spatial axis of a pooling window.
struct Axis {
  int64_t kernel, stride, pad, size, out;
  /// Candidate windows per cell: ceil(kernel / stride).
  int64_t candidates() const { return (kernel + stride - 1) / stride; }
  /// Padding of the window tensors so that every candidate is in bounds.
  int64_t lowPad() const { return candidates() - 1; }
  int64_t highPad() const {
    int64_t last = (size - 1 + pad) / stride;
    return std::max<int64_t>(0, last - (out - 1));
  }
};

Axis axisOf(ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
            ArrayRef<int64_t> padding, ArrayRef<int64_t> inShape,
            ArrayRef<int64_t> outShape, int d) {
  return {kernel[d], strides[d], padding[d], inShape[2 + d], outShape[2 + d]};
}

Value idx(OpBuilder &b, Location loc, int64_t v) {
  return indexConstant(b, loc, v);
}

/// Number of real cells under window `y` (an index value) along `axis`:
/// min(y * s - p + k, size) - max(y * s - p, 0).
Value realCells(OpBuilder &b, Location loc, Value y, const Axis &axis) {
  Value start = arith::SubIOp::create(
      b, loc, arith::MulIOp::create(b, loc, y, idx(b, loc, axis.stride)),
      idx(b, loc, axis.pad));
  Value end = arith::MinSIOp::create(
      b, loc, arith::AddIOp::create(b, loc, start, idx(b, loc, axis.kernel)),
      idx(b, loc, axis.size));
  return arith::SubIOp::create(
      b, loc, end, arith::MaxSIOp::create(b, loc, start, idx(b, loc, 0)));
}

/// An index value as a float of `type`.
Value indexToFloat(OpBuilder &b, Location loc, Value v, Type type) {
  Value i = arith::IndexCastOp::create(b, loc, b.getI64Type(), v);
  return arith::SIToFPOp::create(b, loc, type, i);
}

/// The average's divisor for window (y, x).
Value divisor(OpBuilder &b, Location loc, Value y, Value x, const Axis &ay,
              const Axis &ax, bool countIncludePad, Type type) {
  if (countIncludePad)
    return scalarConstant(b, loc, type,
                          static_cast<double>(ay.kernel * ax.kernel));
  Value cells = arith::MulIOp::create(b, loc, realCells(b, loc, y, ay),
                                      realCells(b, loc, x, ax));
  return indexToFloat(b, loc, cells, type);
}

template <typename OpTy>
Value pool(OpBuilder &b, Location loc, Value input, ArrayRef<int64_t> kernel,
           ArrayRef<int64_t> strides, ArrayRef<int64_t> padding,
           ArrayRef<int64_t> outShape, Type acc, double padValue) {
  Value padded = padSpatial(b, loc, input, padding, padValue);
  Value init = filledTensor(b, loc, outShape, acc, padValue);
  // The window operand only carries the kernel's shape.
  Value window = emptyTensor(b, loc, kernel, acc);
  return OpTy::create(b, loc, TypeRange{init.getType()},
                      ValueRange{padded, window}, ValueRange{init},
                      b.getI64TensorAttr(strides), b.getI64TensorAttr({1, 1}))
      .getResult(0);
}

struct MaxPool2DLowering : OpConversionPattern<MaxPool2DOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MaxPool2DOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type elementType = op.getType().getElementType();
    // Padding cells are -inf and never win; the named op's max propagates
    // NaN like the evaluator's scan.
    Value r = pool<linalg::PoolingNchwMaxOp>(
        rewriter, op.getLoc(), adaptor.getInput(), op.getKernel(),
        op.getStrides(), op.getPadding(), op.getType().getShape(),
        computeType(elementType), -kInf);
    rewriter.replaceOp(op, roundTensor(rewriter, op.getLoc(), r, elementType));
    return success();
  }
};

struct AvgPool2DLowering : OpConversionPattern<AvgPool2DOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(AvgPool2DOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getType();
    Type elementType = type.getElementType();
    Type acc = computeType(elementType);
    auto inShape =
        cast<RankedTensorType>(adaptor.getInput().getType()).getShape();
    Axis ay = axisOf(op.getKernel(), op.getStrides(), op.getPadding(), inShape,
                     type.getShape(), 0);
    Axis ax = axisOf(op.getKernel(), op.getStrides(), op.getPadding(), inShape,
                     type.getShape(), 1);
    bool countIncludePad = op.getCountIncludePad();
    Value sum = pool<linalg::PoolingNchwSumOp>(
        rewriter, loc, adaptor.getInput(), op.getKernel(), op.getStrides(),
        op.getPadding(), type.getShape(), acc, 0.0);
    Value r =
        mapTensor(rewriter, loc, sum, elementType,
                  [&](OpBuilder &b, Location l, Value s) {
                    Value y = linalg::IndexOp::create(b, l, 2);
                    Value x = linalg::IndexOp::create(b, l, 3);
                    Value d = divisor(b, l, y, x, ay, ax, countIncludePad, acc);
                    return fromCompute(b, l, arith::DivFOp::create(b, l, s, d),
                                       elementType);
                  });
    rewriter.replaceOp(op, r);
    return success();
  }
};

/// The loops (n, c, h, w, a, b) of an adjoint gather, reading a window
/// tensor padded by `padWindows` at the candidate window of (h, w).
struct Gather {
  AffineMap windowMap, candidateMap;
  SmallVector<int64_t> loops;
  Value candidates; // Carries the (a, b) loop sizes.
};

Gather gatherLoops(OpBuilder &b, Location loc, ArrayRef<int64_t> inShape,
                   const Axis &ay, const Axis &ax) {
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineExpr> d;
  for (unsigned k = 0; k < 6; ++k)
    d.push_back(getAffineDimExpr(k, ctx));
  AffineExpr y = (d[2] + ay.pad).floorDiv(ay.stride) - d[4] + ay.lowPad();
  AffineExpr x = (d[3] + ax.pad).floorDiv(ax.stride) - d[5] + ax.lowPad();
  Gather g;
  g.windowMap = AffineMap::get(6, 0, {d[0], d[1], y, x}, ctx);
  g.candidateMap = AffineMap::get(6, 0, {d[4], d[5]}, ctx);
  g.loops = {inShape[0], inShape[1],      inShape[2],
             inShape[3], ay.candidates(), ax.candidates()};
  g.candidates =
      emptyTensor(b, loc, {ay.candidates(), ax.candidates()}, b.getI1Type());
  return g;
}

Value padWindows(OpBuilder &b, Location loc, Value v, const Axis &ay,
                 const Axis &ax, double value) {
  return padSpatial(
      b, loc, v, {ay.lowPad(), ax.lowPad(), ay.highPad(), ax.highPad()}, value);
}

/// Windows that never overlap and leave no cell out of place: kernel <=
/// stride, no padding, and the input is exactly `out` windows long. Each
/// cell then belongs to at most one window.
bool tilesInput(const Axis &a) {
  return a.kernel <= a.stride && a.pad == 0 && a.size == a.out * a.stride;
}

/// max_pool2d_grad of non-overlapping windows (`tilesInput`): cell (h, w)
/// takes window (h / sy, w / sx)'s gradient if it won it. No sum, so no
/// fill and no read-modify-write of the result. The loops are
/// (n, c, h, x, j) with w = x * sx + j: the innermost loop (j, sx long) is
/// unrolled and the x loop vectorizes, reading windows contiguously and
/// storing interleaved; a loop over w would read window w / sx, which LLVM
/// can only gather.
Value gradOfTiles(OpBuilder &b, Location loc, Value winners, Value grad,
                  ArrayRef<int64_t> in, const Axis &ay, const Axis &ax,
                  Type elementType) {
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineExpr> d;
  for (unsigned k = 0; k < 5; ++k)
    d.push_back(getAffineDimExpr(k, ctx));
  AffineMap windowMap =
      AffineMap::get(5, 0, {d[0], d[1], d[2].floorDiv(ay.stride), d[3]}, ctx);
  AffineMap tapMap = AffineMap::get(5, 0, {d[4]}, ctx);
  AffineMap cellMap =
      AffineMap::get(5, 0, {d[0], d[1], d[2], d[3] * ax.stride + d[4]}, ctx);
  Type acc = computeType(elementType);
  // The taps appear only inside the cell map: an operand of the stride's
  // length gives the j loop its size.
  Value taps = emptyTensor(b, loc, {ax.stride}, b.getI1Type());
  auto type = RankedTensorType::get(in, elementType);
  Value init = emptyTensor(b, loc, in, elementType);
  SmallVector<utils::IteratorType> iterators(5, utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, TypeRange{type}, ValueRange{winners, grad, taps},
             ValueRange{init},
             ArrayRef<AffineMap>{windowMap, windowMap, tapMap, cellMap},
             iterators,
             [&](OpBuilder &b, Location l, ValueRange args) {
               Value w = arith::AddIOp::create(
                   b, l,
                   arith::MulIOp::create(b, l, linalg::IndexOp::create(b, l, 3),
                                         idx(b, l, ax.stride)),
                   linalg::IndexOp::create(b, l, 4));
               Value cell = arith::AddIOp::create(
                   b, l,
                   arith::MulIOp::create(b, l, linalg::IndexOp::create(b, l, 2),
                                         idx(b, l, ax.size)),
                   w);
               Value won = arith::CmpIOp::create(
                   b, l, arith::CmpIPredicate::eq, args[0],
                   arith::IndexCastOp::create(b, l, b.getI64Type(), cell));
               Value term =
                   arith::SelectOp::create(b, l, won, toCompute(b, l, args[1]),
                                           scalarConstant(b, l, acc, 0));
               linalg::YieldOp::create(
                   b, l, ValueRange{fromCompute(b, l, term, elementType)});
             })
      .getResult(0);
}

struct MaxPool2DGradLowering : OpConversionPattern<MaxPool2DGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MaxPool2DGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    RankedTensorType type = op.getType();
    Type elementType = type.getElementType();
    Type acc = computeType(elementType);
    Type i64 = rewriter.getI64Type();
    ArrayRef<int64_t> in = type.getShape();
    auto out = cast<RankedTensorType>(adaptor.getGrad().getType()).getShape();
    ArrayRef<int64_t> kernel = op.getKernel(), strides = op.getStrides(),
                      padding = op.getPadding();
    Axis ay = axisOf(kernel, strides, padding, in, out, 0);
    Axis ax = axisOf(kernel, strides, padding, in, out, 1);

    // Winner of every window: loops (n, c, y, x, i, j) over the padded
    // input; padding cells are skipped by position, not by value. The
    // (i, j) reduction is order-dependent (the first maximum wins ties), so
    // it must run in row-major order: no reassociation or splitting.
    Value padded = padSpatial(rewriter, loc, adaptor.getInput(), padding, 0.0);
    SmallVector<AffineExpr> d;
    for (unsigned k = 0; k < 6; ++k)
      d.push_back(getAffineDimExpr(k, ctx));
    AffineMap cellMap = AffineMap::get(
        6, 0, {d[0], d[1], d[2] * ay.stride + d[4], d[3] * ax.stride + d[5]},
        ctx);
    SmallVector<int64_t> windowLoops{out[0], out[1],    out[2],
                                     out[3], ay.kernel, ax.kernel};
    // The taps (i, j) appear only inside the cell map: an operand of the
    // kernel's shape gives the loops their sizes, as in the named pooling ops.
    Value window = emptyTensor(rewriter, loc, kernel, rewriter.getI1Type());
    AffineMap tapMap = AffineMap::get(6, 0, {d[4], d[5]}, ctx);
    SmallVector<Value> best = buildReduction(
        rewriter, loc, windowLoops, {4, 5}, ValueRange{padded, window},
        {cellMap, tapMap}, {acc, i64}, {-kInf, -1.0},
        [&](OpBuilder &b, Location l, ValueRange args) -> SmallVector<Value> {
          Value v = toCompute(b, l, args[0]);
          Value bestValue = args[2], winner = args[3];
          auto coordinate = [&](unsigned window, unsigned tap, const Axis &a) {
            Value start = arith::MulIOp::create(
                b, l, linalg::IndexOp::create(b, l, window),
                idx(b, l, a.stride));
            return arith::SubIOp::create(
                b, l,
                arith::AddIOp::create(b, l, start,
                                      linalg::IndexOp::create(b, l, tap)),
                idx(b, l, a.pad));
          };
          Value iy = coordinate(2, 4, ay), ix = coordinate(3, 5, ax);
          auto inside = [&](Value c, int64_t size) {
            Value nonNegative = arith::CmpIOp::create(
                b, l, arith::CmpIPredicate::sge, c, idx(b, l, 0));
            Value below = arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt,
                                                c, idx(b, l, size));
            return arith::AndIOp::create(b, l, nonNegative, below);
          };
          Value real = arith::AndIOp::create(b, l, inside(iy, ay.size),
                                             inside(ix, ax.size));
          Value first =
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, winner,
                                    scalarConstant(b, l, i64, -1));
          Value isNan =
              arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNO, v, v);
          Value greater = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT,
                                                v, bestValue);
          Value take = arith::AndIOp::create(
              b, l, real,
              arith::OrIOp::create(b, l, first,
                                   arith::OrIOp::create(b, l, isNan, greater)));
          Value flat = arith::AddIOp::create(
              b, l, arith::MulIOp::create(b, l, iy, idx(b, l, ax.size)), ix);
          Value flat64 = arith::IndexCastOp::create(b, l, i64, flat);
          return {arith::SelectOp::create(b, l, take, v, bestValue),
                  arith::SelectOp::create(b, l, take, flat64, winner)};
        });

    if (tilesInput(ay) && tilesInput(ax)) {
      rewriter.replaceOp(op,
                         gradOfTiles(rewriter, loc, best[1], adaptor.getGrad(),
                                     in, ay, ax, elementType));
      return success();
    }

    // Every input cell sums the gradients of the windows it won.
    Gather g = gatherLoops(rewriter, loc, in, ay, ax);
    Value winners = padWindows(rewriter, loc, best[1], ay, ax, -1.0);
    Value grads = padWindows(rewriter, loc, adaptor.getGrad(), ay, ax, 0.0);
    Value sum =
        buildReduction(
            rewriter, loc, g.loops, {4, 5},
            ValueRange{winners, grads, g.candidates},
            {g.windowMap, g.windowMap, g.candidateMap}, acc, 0.0,
            [&](OpBuilder &b, Location l,
                ValueRange args) -> SmallVector<Value> {
              Value h = linalg::IndexOp::create(b, l, 2);
              Value w = linalg::IndexOp::create(b, l, 3);
              Value cell = arith::AddIOp::create(
                  b, l, arith::MulIOp::create(b, l, h, idx(b, l, ax.size)), w);
              Value won = arith::CmpIOp::create(
                  b, l, arith::CmpIPredicate::eq, args[0],
                  arith::IndexCastOp::create(b, l, i64, cell));
              Value term =
                  arith::SelectOp::create(b, l, won, toCompute(b, l, args[1]),
                                          scalarConstant(b, l, acc, 0));
              return {arith::AddFOp::create(b, l, args[3], term)};
            })
            .front();
    rewriter.replaceOp(op, roundTensor(rewriter, loc, sum, elementType));
    return success();
  }
};

struct AvgPool2DGradLowering : OpConversionPattern<AvgPool2DGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(AvgPool2DGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getType();
    Type elementType = type.getElementType();
    Type acc = computeType(elementType);
    ArrayRef<int64_t> in = type.getShape();
    auto out = cast<RankedTensorType>(adaptor.getGrad().getType()).getShape();
    Axis ay =
        axisOf(op.getKernel(), op.getStrides(), op.getPadding(), in, out, 0);
    Axis ax =
        axisOf(op.getKernel(), op.getStrides(), op.getPadding(), in, out, 1);
    bool countIncludePad = op.getCountIncludePad();

    Gather g = gatherLoops(rewriter, loc, in, ay, ax);
    Value grads = padWindows(rewriter, loc, adaptor.getGrad(), ay, ax, 0.0);
    Value sum =
        buildReduction(
            rewriter, loc, g.loops, {4, 5}, ValueRange{grads, g.candidates},
            {g.windowMap, g.candidateMap}, acc, 0.0,
            [&](OpBuilder &b, Location l,
                ValueRange args) -> SmallVector<Value> {
              // Window (y, x) = ((h + top) / s - a, (w + left) / s - b)
              // covers (h, w) when it exists and reaches down to h.
              auto window = [&](unsigned cellDim, unsigned candDim,
                                const Axis &a, Value &valid) {
                Value cell = linalg::IndexOp::create(b, l, cellDim);
                Value shifted =
                    arith::AddIOp::create(b, l, cell, idx(b, l, a.pad));
                Value y = arith::SubIOp::create(
                    b, l,
                    arith::DivUIOp::create(b, l, shifted, idx(b, l, a.stride)),
                    linalg::IndexOp::create(b, l, candDim));
                Value offset = arith::SubIOp::create(
                    b, l, shifted,
                    arith::MulIOp::create(b, l, y, idx(b, l, a.stride)));
                Value ok = arith::AndIOp::create(
                    b, l,
                    arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, y,
                                          idx(b, l, 0)),
                    arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, y,
                                          idx(b, l, a.out)));
                ok = arith::AndIOp::create(
                    b, l, ok,
                    arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt,
                                          offset, idx(b, l, a.kernel)));
                valid =
                    valid ? Value(arith::AndIOp::create(b, l, valid, ok)) : ok;
                return y;
              };
              Value valid;
              Value y = window(2, 4, ay, valid);
              Value x = window(3, 5, ax, valid);
              Value div = divisor(b, l, y, x, ay, ax, countIncludePad, acc);
              Value term =
                  arith::DivFOp::create(b, l, toCompute(b, l, args[0]), div);
              term = arith::SelectOp::create(b, l, valid, term,
                                             scalarConstant(b, l, acc, 0));
              return {arith::AddFOp::create(b, l, args[2], term)};
            })
            .front();
    rewriter.replaceOp(op, roundTensor(rewriter, loc, sum, elementType));
    return success();
  }
};

} // namespace

void lowering::populatePoolingPatterns(RewritePatternSet &patterns) {
  patterns.add<MaxPool2DLowering, AvgPool2DLowering, MaxPool2DGradLowering,
               AvgPool2DGradLowering>(patterns.getContext());
}
