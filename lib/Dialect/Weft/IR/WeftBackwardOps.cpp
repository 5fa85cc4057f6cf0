//===- WeftBackwardOps.cpp - Inference and verifiers of backward ops ------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The ops gradient rules build (scatter_add, pad, one_hot, the conv2d and
// pool2d adjoints). Each backward op is checked against the forward op it
// inverts: its forward shape, computed from the result, must be the shape of
// the incoming gradient.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "WeftShapeUtils.h"

using namespace mlir;
using namespace weft;
using weft::detail::gatherShape;
using weft::detail::getRanked;
using weft::detail::inferPoolShape;
using weft::detail::inferWindow;

namespace {

/// Checks that conv2d of `input` by `filter` gives `grad`'s shape.
LogicalResult verifyConv(Operation *op, ArrayRef<int64_t> input,
                         ArrayRef<int64_t> filter, ArrayRef<int64_t> grad,
                         ArrayRef<int64_t> strides, ArrayRef<int64_t> padding,
                         ArrayRef<int64_t> dilations, int64_t groups) {
  if (input.size() != 4 || filter.size() != 4 || grad.size() != 4)
    return op->emitOpError("input (")
           << formatShape(input) << "), filter (" << formatShape(filter)
           << ") and gradient (" << formatShape(grad)
           << ") must have rank 4 (NCHW, OIHW, NCHW)";
  if (groups < 1 || input[1] != filter[1] * groups || filter[0] % groups != 0)
    return op->emitOpError("input has ")
           << input[1] << " channels but the filter " << formatShape(filter)
           << " with groups=" << groups << " expects " << filter[1] * groups;
  SmallVector<int64_t> forward{input[0], filter[0]};
  if (failed(inferWindow(op->getLoc(), input.drop_front(2),
                         filter.drop_front(2), strides, padding, dilations,
                         forward, /*checkWindow=*/true)))
    return failure();
  if (ArrayRef<int64_t>(forward) != grad)
    return op->emitOpError("gradient shape ")
           << formatShape(grad) << " is not the conv2d output shape "
           << formatShape(forward);
  return success();
}

/// Checks pooling of an `input`-shaped tensor, giving `grad`'s shape.
LogicalResult checkPool(std::optional<Location> loc, ArrayRef<int64_t> input,
                        ArrayRef<int64_t> grad, ArrayRef<int64_t> kernel,
                        ArrayRef<int64_t> strides, ArrayRef<int64_t> padding) {
  if (input.size() != 4 || grad.size() != 4)
    return emitOptionalError(loc, "input (", formatShape(input),
                             ") and gradient (", formatShape(grad),
                             ") must be NCHW (rank 4)");
  SmallVector<int64_t> forward;
  if (failed(inferPoolShape(loc, input, kernel, strides, padding, forward,
                            /*checkWindow=*/true)))
    return failure();
  if (ArrayRef<int64_t>(forward) != grad)
    return emitOptionalError(loc, "gradient shape ", formatShape(grad),
                             " is not the pooled shape ", formatShape(forward));
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// ScatterAddOp
//===----------------------------------------------------------------------===//

LogicalResult ScatterAddOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  RankedTensorType t = getRanked(loc, adaptor.getInput(), "input");
  RankedTensorType idx = getRanked(loc, adaptor.getIndices(), "indices");
  RankedTensorType updates = getRanked(loc, adaptor.getUpdates(), "updates");
  if (!t || !idx || !updates)
    return failure();
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= t.getRank())
    return emitOptionalError(loc, "axis ", axis, " is out of range for rank ",
                             t.getRank());
  SmallVector<int64_t> expected =
      gatherShape(t.getShape(), idx.getShape(), axis);
  if (updates.getShape() != ArrayRef<int64_t>(expected))
    return emitOptionalError(
        loc, "updates shape ", formatShape(updates.getShape()),
        " is not the gathered shape ", formatShape(expected));
  inferred.push_back(t);
  return success();
}

//===----------------------------------------------------------------------===//
// PadOp
//===----------------------------------------------------------------------===//

LogicalResult PadOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  RankedTensorType t = getRanked(loc, adaptor.getInput(), "input");
  if (!t)
    return failure();
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh(),
                    interior = adaptor.getInterior();
  int64_t rank = t.getRank();
  if (static_cast<int64_t>(low.size()) != rank ||
      static_cast<int64_t>(high.size()) != rank ||
      static_cast<int64_t>(interior.size()) != rank)
    return emitOptionalError(loc,
                             "low, high and interior need one entry per "
                             "axis (rank ",
                             rank, ")");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (low[d] < 0 || high[d] < 0 || interior[d] < 0)
      return emitOptionalError(loc, "axis ", d, ": padding (low ", low[d],
                               ", high ", high[d], ", interior ", interior[d],
                               ") must be >= 0");
    int64_t size = t.getDimSize(d);
    shape.push_back(low[d] + size +
                    std::max<int64_t>(size - 1, 0) * interior[d] + high[d]);
  }
  inferred.push_back(t.clone(shape));
  return success();
}

//===----------------------------------------------------------------------===//
// OneHotOp
//===----------------------------------------------------------------------===//

LogicalResult OneHotOp::verify() {
  ArrayRef<int64_t> indices = getIndices().getType().getShape();
  ArrayRef<int64_t> result = getType().getShape();
  if (result.size() != indices.size() + 1 || result.drop_back() != indices)
    return emitOpError("result shape ")
           << formatShape(result) << " must be the indices shape "
           << formatShape(indices) << " plus a class axis";
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling adjoints
//===----------------------------------------------------------------------===//

LogicalResult Conv2DBackwardInputOp::verify() {
  return verifyConv(*this, getType().getShape(),
                    getFilter().getType().getShape(),
                    getGrad().getType().getShape(), getStrides(), getPadding(),
                    getDilations(), static_cast<int64_t>(getGroups()));
}

LogicalResult Conv2DBackwardFilterOp::verify() {
  return verifyConv(*this, getInput().getType().getShape(),
                    getType().getShape(), getGrad().getType().getShape(),
                    getStrides(), getPadding(), getDilations(),
                    static_cast<int64_t>(getGroups()));
}

LogicalResult
MaxPool2DGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &inferred) {
  RankedTensorType grad = getRanked(loc, adaptor.getGrad(), "grad");
  RankedTensorType input = getRanked(loc, adaptor.getInput(), "input");
  if (!grad || !input)
    return failure();
  if (failed(checkPool(loc, input.getShape(), grad.getShape(),
                       adaptor.getKernel(), adaptor.getStrides(),
                       adaptor.getPadding())))
    return failure();
  inferred.push_back(input);
  return success();
}

LogicalResult AvgPool2DGradOp::verify() {
  return checkPool(getLoc(), getType().getShape(),
                   getGrad().getType().getShape(), getKernel(), getStrides(),
                   getPadding());
}
