//===- OpsGradient.cpp - Evaluating the backward ops ----------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The ops gradient rules build: scatter_add, pad, one_hot and the conv2d and
// pool2d adjoints. Each walks the forward op's own index arithmetic
// (resolveIndices, ConvGeometry, PoolGeometry) with the data flow reversed
// (read the gradient, accumulate into the input or filter), accumulating in
// double and rounding once at the end, so that a finite-difference check of
// a rule compares it against the forward loops.
//
//===----------------------------------------------------------------------===//

#include "EvaluatorInternal.h"

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace weft;
using namespace weft::eval;
using namespace weft::eval::detail;

namespace {

/// Rounds an accumulator into `r`'s element type.
void store(const std::vector<double> &acc, Tensor &r) {
  Rounder round(r.elementType);
  for (size_t i = 0, e = acc.size(); i < e; ++i)
    r.fp[i] = round(acc[i]);
}

LogicalResult evalScatterAdd(ScatterAddOp op, const Tensor &x,
                             const Tensor &indices, const Tensor &updates,
                             Tensor &r) {
  int64_t axis = static_cast<int64_t>(op.getAxis());
  AxisView v(x.shape, axis);
  FailureOr<std::vector<int64_t>> rows =
      resolveIndices(op, indices, axis, v.size);
  if (failed(rows))
    return failure();
  int64_t count = static_cast<int64_t>(rows->size());
  std::vector<double> acc = x.fp;
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t j = 0; j < count; ++j)
      for (int64_t i = 0; i < v.inner; ++i)
        acc[(o * v.size + (*rows)[j]) * v.inner + i] +=
            updates.fp[(o * count + j) * v.inner + i];
  store(acc, r);
  return success();
}

void evalPad(PadOp op, const Tensor &x, Tensor &r) {
  std::fill(r.fp.begin(), r.fp.end(),
            Rounder(r.elementType)(op.getValue().convertToDouble()));
  // Input element `index` lands at `low + index * (interior + 1)`.
  SmallVector<int64_t> outStrides = stridesOf(r.shape);
  ArrayRef<int64_t> low = op.getLow(), interior = op.getInterior();
  SmallVector<int64_t> strides;
  int64_t base = 0;
  for (size_t d = 0; d < outStrides.size(); ++d) {
    base += low[d] * outStrides[d];
    strides.push_back(outStrides[d] * (interior[d] + 1));
  }
  std::vector<int64_t> targets = stridedOffsets(x.shape, strides, base);
  for (size_t i = 0, e = targets.size(); i < e; ++i)
    r.fp[targets[i]] = x.fp[i];
}

LogicalResult evalOneHot(OneHotOp op, const Tensor &indices, Tensor &r) {
  int64_t classes = r.shape.back();
  for (int64_t p = 0, e = indices.numElements(); p < e; ++p) {
    int64_t index = indices.ints[p];
    if (index < 0 || index >= classes)
      return op.emitError("index ")
             << index << " at position " << p << " is out of range for "
             << classes << " classes (expected 0 <= index < " << classes << ")";
    r.fp[p * classes + index] = 1.0;
  }
  return success();
}

void evalConvBackwardInput(Conv2DBackwardInputOp op, const Tensor &grad,
                           const Tensor &w, Tensor &r) {
  ConvGeometry g(op, r.shape, w.shape, grad.shape);
  std::vector<double> acc(r.fp.size(), 0.0);
  g.forEachTap([&](int64_t in, int64_t filter, int64_t out) {
    acc[in] += grad.fp[out] * w.fp[filter];
  });
  store(acc, r);
}

void evalConvBackwardFilter(Conv2DBackwardFilterOp op, const Tensor &grad,
                            const Tensor &x, Tensor &r) {
  ConvGeometry g(op, x.shape, r.shape, grad.shape);
  std::vector<double> acc(r.fp.size(), 0.0);
  g.forEachTap([&](int64_t in, int64_t filter, int64_t out) {
    acc[filter] += grad.fp[out] * x.fp[in];
  });
  store(acc, r);
}

/// Routes each window's gradient to the cell max_pool2d took from it (the
/// window's first maximum, NaN winning).
void evalMaxPoolGrad(MaxPool2DGradOp op, const Tensor &grad, const Tensor &x,
                     Tensor &r) {
  PoolGeometry g(op, r.shape, grad.shape);
  std::vector<double> acc(r.fp.size(), 0.0);
  g.forEachWindow([&](int64_t out, ArrayRef<int64_t> cells) {
    if (!cells.empty())
      acc[argMax(x, cells)] += grad.fp[out];
  });
  store(acc, r);
}

/// Spreads each window's gradient over its real cells, divided as the
/// forward average divides.
void evalAvgPoolGrad(AvgPool2DGradOp op, const Tensor &grad, Tensor &r) {
  PoolGeometry g(op, r.shape, grad.shape);
  std::vector<double> acc(r.fp.size(), 0.0);
  g.forEachWindow([&](int64_t out, ArrayRef<int64_t> cells) {
    double divisor = g.divisor(op.getCountIncludePad(), cells.size());
    for (int64_t cell : cells)
      acc[cell] += grad.fp[out] / divisor;
  });
  store(acc, r);
}

} // namespace

std::optional<LogicalResult>
weft::eval::detail::evaluateGradientOp(Operation *op, ArrayRef<Tensor> operands,
                                       Tensor &result) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](ScatterAddOp scatter) {
        return evalScatterAdd(scatter, operands[0], operands[1], operands[2],
                              result);
      })
      .Case([&](PadOp pad) {
        evalPad(pad, operands[0], result);
        return success();
      })
      .Case([&](OneHotOp oneHot) {
        return evalOneHot(oneHot, operands[0], result);
      })
      .Case([&](Conv2DBackwardInputOp conv) {
        evalConvBackwardInput(conv, operands[0], operands[1], result);
        return success();
      })
      .Case([&](Conv2DBackwardFilterOp conv) {
        evalConvBackwardFilter(conv, operands[0], operands[1], result);
        return success();
      })
      .Case([&](MaxPool2DGradOp pool) {
        evalMaxPoolGrad(pool, operands[0], operands[1], result);
        return success();
      })
      .Case([&](AvgPool2DGradOp pool) {
        evalAvgPoolGrad(pool, operands[0], result);
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
