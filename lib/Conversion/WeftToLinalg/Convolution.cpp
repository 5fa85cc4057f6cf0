//===- Convolution.cpp - Lowering conv2d and its adjoints -----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// conv2d: tensor.pad, then the convolution proper, then the bias and the
// rounding to the element type in one elementwise generic.
//
// Without groups the convolution is im2col + GEMM, so that it runs in BLAS
// (--weft-linalg-to-blas) rather than in generated loops: one parallel
// generic gathers cols[n, (c, i, j), (y, x)] = x[n, c, y * s + i * d,
// x * s + j * d] from the padded input, and a linalg.batch_matmul over n
// multiplies the filter, read as one [O, C * kh * kw] matrix for every
// batch, by it. With groups the input and filter are expanded to NGCHW /
// GFCHW for linalg.conv_2d_ngchw_gfchw.
//
// conv2d_backward_input is the transposed convolution: the gradient is
// spread by the stride (interior padding), padded so that every input cell
// sees the taps that read it, and convolved (stride 1, the forward
// dilation, so im2col + GEMM again without groups) with the filter flipped
// spatially and with its channel roles swapped per group.
//
// conv2d_backward_filter without groups on f32 is a batch-reduce GEMM over
// the forward's own im2col: dW[o, (c, i, j)] = sum over n of g[n] (O x
// oh * ow, the gradient as it is stored) times cols[n]^T, where cols is
// gathered exactly as the forward gathers it, so that CSE leaves one
// buffer for both (--weft-linalg-to-blas calls weft_rt_sgemm_batch_sum).
// Other element types (no bf16 batch sum in the runtime) take one GEMM
// whose K runs over the batch and the output positions, with the gradient
// transposed to [O, N, oh, ow] and the input gathered in that order. With
// groups it is a linalg.generic reduction over (batch, output rows, output
// columns) of gradient times padded input.
//
// All accumulate in the compute type and round once, as the evaluator.
//
//===----------------------------------------------------------------------===//

#include "Lowerings.h"

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace weft;
using namespace weft::lowering;

namespace {

/// Gathers the windows of a padded NCHW `input` read by a [*, C, kh, kw]
/// filter: an all-parallel generic over loops that `order` lists as
/// positions of (n, c, i, j, y, x) in the result, reading input[n, c,
/// y * s + i * d, x * s + j * d]. The result has the loops' shape.
Value gatherWindows(OpBuilder &b, Location loc, Value input,
                    ArrayRef<int64_t> kernel, ArrayRef<int64_t> outSpatial,
                    ArrayRef<int64_t> strides, ArrayRef<int64_t> dilations,
                    ArrayRef<unsigned> order) {
  MLIRContext *ctx = b.getContext();
  auto type = cast<RankedTensorType>(input.getType());
  int64_t sizes[6] = {type.getDimSize(0), type.getDimSize(1), kernel[0],
                      kernel[1],          outSpatial[0],      outSpatial[1]};
  SmallVector<int64_t> shape(6);
  SmallVector<AffineExpr> d(6);
  for (unsigned k = 0; k < 6; ++k) {
    shape[order[k]] = sizes[k];
    d[k] = getAffineDimExpr(order[k], ctx);
  }
  AffineMap read = AffineMap::get(
      6, 0,
      {d[0], d[1], d[4] * strides[0] + d[2] * dilations[0],
       d[5] * strides[1] + d[3] * dilations[1]},
      ctx);
  return buildParallel(
      b, loc, RankedTensorType::get(shape, type.getElementType()), input, read,
      [](OpBuilder &, Location, ValueRange args) -> SmallVector<Value> {
        return {args[0]};
      });
}

/// Convolves an already padded NCHW `input` with an OIHW `filter` (I = C /
/// groups) into an accumulator of `outShape` ([N, O, oh, ow]) and type
/// `acc`.
Value convolve(OpBuilder &b, Location loc, Value input, Value filter,
               int64_t groups, ArrayRef<int64_t> strides,
               ArrayRef<int64_t> dilations, Type acc,
               ArrayRef<int64_t> outShape) {
  auto stridesAttr = b.getI64TensorAttr(strides);
  auto dilationsAttr = b.getI64TensorAttr(dilations);
  if (groups == 1) {
    // out[n] = W[O, C * kh * kw] x cols[n]: the filter is shared by every
    // batch (a 2-D map, so BLAS gets a zero batch stride for it).
    MLIRContext *ctx = b.getContext();
    auto w = cast<RankedTensorType>(filter.getType()).getShape();
    int64_t depth = w[1] * w[2] * w[3];
    int64_t positions = outShape[2] * outShape[3];
    Value cols = gatherWindows(b, loc, input, w.drop_front(2),
                               outShape.drop_front(2), strides, dilations,
                               {0, 1, 2, 3, 4, 5});
    cols = reshapeTo(b, loc, cols, {outShape[0], depth, positions});
    Value matrix = reshapeTo(b, loc, filter, {w[0], depth});
    Value init =
        filledTensor(b, loc, {outShape[0], w[0], positions}, acc, 0.0);
    AffineExpr n = getAffineDimExpr(0, ctx), m = getAffineDimExpr(1, ctx),
               p = getAffineDimExpr(2, ctx), k = getAffineDimExpr(3, ctx);
    auto matmul = linalg::BatchMatmulOp::create(
        b, loc, TypeRange{init.getType()}, ValueRange{matrix, cols},
        ValueRange{init});
    matmul.setIndexingMapsAttr(
        b.getAffineMapArrayAttr({AffineMap::get(4, 0, {m, k}, ctx),
                                 AffineMap::get(4, 0, {n, k, p}, ctx),
                                 AffineMap::get(4, 0, {n, m, p}, ctx)}));
    return reshapeTo(b, loc, matmul.getResult(0), outShape);
  }
  auto in = cast<RankedTensorType>(input.getType()).getShape();
  auto w = cast<RankedTensorType>(filter.getType()).getShape();
  Value groupedInput =
      reshapeTo(b, loc, input, {in[0], groups, in[1] / groups, in[2], in[3]});
  Value groupedFilter =
      reshapeTo(b, loc, filter, {groups, w[0] / groups, w[1], w[2], w[3]});
  Value init = filledTensor(
      b, loc,
      {outShape[0], groups, outShape[1] / groups, outShape[2], outShape[3]},
      acc, 0.0);
  Value out = linalg::Conv2DNgchwGfchwOp::create(
                  b, loc, TypeRange{init.getType()},
                  ValueRange{groupedInput, groupedFilter}, ValueRange{init},
                  stridesAttr, dilationsAttr)
                  .getResult(0);
  return reshapeTo(b, loc, out, outShape);
}

struct Conv2DLowering : OpConversionPattern<Conv2DOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(Conv2DOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getType();
    Type elementType = type.getElementType();
    Type acc = computeType(elementType);
    Value input =
        padSpatial(rewriter, loc, adaptor.getInput(), op.getPadding(), 0.0);
    Value conv =
        convolve(rewriter, loc, input, adaptor.getFilter(), op.getGroups(),
                 op.getStrides(), op.getDilations(), acc, type.getShape());
    Value bias = adaptor.getBias();
    if (!bias) {
      rewriter.replaceOp(op, roundTensor(rewriter, loc, conv, elementType));
      return success();
    }
    // The evaluator adds the bias to the finished sum and rounds once.
    MLIRContext *ctx = rewriter.getContext();
    AffineMap channel = AffineMap::get(4, 0, getAffineDimExpr(1, ctx));
    Value r = buildParallel(
        rewriter, loc, type, ValueRange{conv, bias},
        {rewriter.getMultiDimIdentityMap(4), channel},
        [&](OpBuilder &b, Location l, ValueRange args) -> SmallVector<Value> {
          Value v =
              arith::AddFOp::create(b, l, args[0], toCompute(b, l, args[1]));
          return {fromCompute(b, l, v, elementType)};
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

struct Conv2DBackwardInputLowering
    : OpConversionPattern<Conv2DBackwardInputOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(Conv2DBackwardInputOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    RankedTensorType type = op.getType();
    Type elementType = type.getElementType();
    Type acc = computeType(elementType);
    Value grad = adaptor.getGrad(), filter = adaptor.getFilter();
    auto g = cast<RankedTensorType>(grad.getType()).getShape();
    auto w = cast<RankedTensorType>(filter.getType()).getShape();
    ArrayRef<int64_t> strides = op.getStrides(), padding = op.getPadding(),
                      dilations = op.getDilations();
    int64_t groups = op.getGroups();
    int64_t outChannels = w[0], groupChannels = w[1];
    int64_t perGroup = outChannels / groups;
    int64_t channels = type.getDimSize(1);

    // Along each spatial axis, input cell t sums grad[y] * w[i] over
    // y * s - p + i * d = t. Spreading grad by s and shifting it by
    // (k - 1) * d - p turns that into a stride-1 convolution with the
    // flipped filter; the high side is padded (or cropped) to the input size.
    SmallVector<int64_t> low{0, 0}, high{0, 0}, interior{0, 0};
    for (int d = 0; d < 2; ++d) {
      int64_t k = w[2 + d], in = type.getDimSize(2 + d), out = g[2 + d];
      low.push_back((k - 1) * dilations[d] - padding[d]);
      high.push_back(in + padding[d] - (out - 1) * strides[d] - 1);
      interior.push_back(strides[d] - 1);
    }
    Value spread = padTensor(rewriter, loc, grad, low, high, interior, 0.0);

    // Flipped filter, [C, O / groups, kh, kw]: row g * I + c of group g
    // holds w[g * (O / groups) + o, c] reversed in both spatial axes.
    int64_t kh = w[2], kw = w[3];
    AffineExpr cc = getAffineDimExpr(0, ctx), o = getAffineDimExpr(1, ctx),
               i = getAffineDimExpr(2, ctx), j = getAffineDimExpr(3, ctx);
    AffineExpr row =
        groups == 1 ? o : cc.floorDiv(groupChannels) * perGroup + o;
    AffineExpr col = groups == 1 ? cc : cc % groupChannels;
    AffineMap read =
        AffineMap::get(4, 0, {row, col, kh - 1 - i, kw - 1 - j}, ctx);
    auto flippedType = RankedTensorType::get(
        {channels, perGroup, kh, kw},
        cast<RankedTensorType>(filter.getType()).getElementType());
    Value flipped = buildParallel(
        rewriter, loc, flippedType, filter, read,
        [](OpBuilder &, Location, ValueRange args) -> SmallVector<Value> {
          return {args[0]};
        });

    Value conv = convolve(rewriter, loc, spread, flipped, groups, {1, 1},
                          dilations, acc, type.getShape());
    rewriter.replaceOp(op, roundTensor(rewriter, loc, conv, elementType));
    return success();
  }
};

struct Conv2DBackwardFilterLowering
    : OpConversionPattern<Conv2DBackwardFilterOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(Conv2DBackwardFilterOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    RankedTensorType type = op.getType();
    Type elementType = type.getElementType();
    Type acc = computeType(elementType);
    Value grad = adaptor.getGrad();
    Value input =
        padSpatial(rewriter, loc, adaptor.getInput(), op.getPadding(), 0.0);
    auto g = cast<RankedTensorType>(grad.getType()).getShape();
    ArrayRef<int64_t> w = type.getShape();
    ArrayRef<int64_t> strides = op.getStrides(), dilations = op.getDilations();
    int64_t groups = op.getGroups();
    int64_t perGroup = w[0] / groups, groupChannels = w[1];

    auto gradElement =
        cast<RankedTensorType>(grad.getType()).getElementType();
    auto inputElement =
        cast<RankedTensorType>(input.getType()).getElementType();
    if (groups == 1 && elementType.isF32() && gradElement.isF32() &&
        inputElement.isF32() && acc.isF32()) {
      // dW[O, C * kh * kw] = sum over n of g[n] [O, (y, x)] x
      // cols[n] [C * kh * kw, (y, x)]^T. The gather is the forward's
      // (same input, padding, windows and loop order): CSE merges them.
      int64_t depth = w[1] * w[2] * w[3];
      int64_t positions = g[2] * g[3];
      Value cols = gatherWindows(rewriter, loc, input, w.drop_front(2),
                                 g.drop_front(2), strides, dilations,
                                 {0, 1, 2, 3, 4, 5});
      cols = reshapeTo(rewriter, loc, cols, {g[0], depth, positions});
      Value rows = reshapeTo(rewriter, loc, grad, {g[0], g[1], positions});
      Value init = filledTensor(rewriter, loc, {w[0], depth}, acc, 0.0);
      AffineExpr bb = getAffineDimExpr(0, ctx), m = getAffineDimExpr(1, ctx),
                 n = getAffineDimExpr(2, ctx), k = getAffineDimExpr(3, ctx);
      auto matmul = linalg::BatchReduceMatmulOp::create(
          rewriter, loc, TypeRange{init.getType()}, ValueRange{rows, cols},
          ValueRange{init});
      matmul.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(
          {AffineMap::get(4, 0, {bb, m, k}, ctx),
           AffineMap::get(4, 0, {bb, n, k}, ctx),
           AffineMap::get(4, 0, {m, n}, ctx)}));
      Value sum = reshapeTo(rewriter, loc, matmul.getResult(0), w);
      rewriter.replaceOp(op, roundTensor(rewriter, loc, sum, elementType));
      return success();
    }

    if (groups == 1) {
      // dW[O, C * kh * kw] = g[O, (n, y, x)] x cols[C * kh * kw, (n, y, x)]^T:
      // one GEMM with the batch folded into K.
      int64_t depth = w[1] * w[2] * w[3];
      int64_t reduced = g[0] * g[2] * g[3];
      Value gradT = buildParallel(
          rewriter, loc,
          RankedTensorType::get({g[1], g[0], g[2], g[3]},
                                cast<RankedTensorType>(grad.getType())
                                    .getElementType()),
          grad,
          AffineMap::getPermutationMap(ArrayRef<unsigned>{1, 0, 2, 3}, ctx),
          [](OpBuilder &, Location, ValueRange args) -> SmallVector<Value> {
            return {args[0]};
          });
      gradT = reshapeTo(rewriter, loc, gradT, {g[1], reduced});
      // Loops (c, i, j, n, y, x): order[k] is where loop k of gatherWindows'
      // (n, c, i, j, y, x) goes.
      Value cols = gatherWindows(rewriter, loc, input, w.drop_front(2),
                                 g.drop_front(2), strides, dilations,
                                 {3, 0, 1, 2, 4, 5});
      cols = reshapeTo(rewriter, loc, cols, {depth, reduced});
      Value init = filledTensor(rewriter, loc, {w[0], depth}, acc, 0.0);
      AffineExpr m = getAffineDimExpr(0, ctx), n = getAffineDimExpr(1, ctx),
                 k = getAffineDimExpr(2, ctx);
      auto matmul = linalg::MatmulOp::create(
          rewriter, loc, TypeRange{init.getType()}, ValueRange{gradT, cols},
          ValueRange{init});
      matmul.setIndexingMapsAttr(
          rewriter.getAffineMapArrayAttr({AffineMap::get(3, 0, {m, k}, ctx),
                                          AffineMap::get(3, 0, {n, k}, ctx),
                                          AffineMap::get(3, 0, {m, n}, ctx)}));
      Value sum = reshapeTo(rewriter, loc, matmul.getResult(0), w);
      rewriter.replaceOp(op, roundTensor(rewriter, loc, sum, elementType));
      return success();
    }

    // Grouped: loops (o, c, i, j, n, y, x); the last three are reduced.
    SmallVector<AffineExpr> d;
    for (unsigned k = 0; k < 7; ++k)
      d.push_back(getAffineDimExpr(k, ctx));
    AffineExpr channel = d[0].floorDiv(perGroup) * groupChannels + d[1];
    AffineMap gradMap = AffineMap::get(7, 0, {d[4], d[0], d[5], d[6]}, ctx);
    AffineMap inputMap =
        AffineMap::get(7, 0,
                       {d[4], channel, d[5] * strides[0] + d[2] * dilations[0],
                        d[6] * strides[1] + d[3] * dilations[1]},
                       ctx);
    SmallVector<int64_t> loops{w[0], w[1], w[2], w[3], g[0], g[2], g[3]};
    SmallVector<int64_t> reduced{4, 5, 6};
    Value sum =
        buildReduction(rewriter, loc, loops, reduced, ValueRange{grad, input},
                       {gradMap, inputMap}, acc, 0.0,
                       [](OpBuilder &b, Location l,
                          ValueRange args) -> SmallVector<Value> {
                         Value p = arith::MulFOp::create(
                             b, l, toCompute(b, l, args[0]),
                             toCompute(b, l, args[1]));
                         return {arith::AddFOp::create(b, l, args[2], p)};
                       })
            .front();
    rewriter.replaceOp(op, roundTensor(rewriter, loc, sum, elementType));
    return success();
  }
};

} // namespace

void lowering::populateConvolutionPatterns(RewritePatternSet &patterns) {
  patterns.add<Conv2DLowering, Conv2DBackwardInputLowering,
               Conv2DBackwardFilterLowering>(patterns.getContext());
}
