//===- OpsGradient.cpp - Evaluating the backward ops ----------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The ops gradient rules build: scatter_add, pad, one_hot and the conv2d and
// pool2d adjoints. Each is written as the forward op's loop nest with the
// data flow reversed (read the gradient, accumulate into the input or
// filter), accumulating in double and rounding once at the end, so that a
// finite-difference check of a rule compares it against the forward loops.
//
//===----------------------------------------------------------------------===//

#include "EvaluatorInternal.h"

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "llvm/ADT/TypeSwitch.h"

#include <limits>

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
  ArrayRef<int64_t> shape = x.shape;
  int64_t outer = product(shape.take_front(axis));
  int64_t size = shape[axis];
  int64_t inner = product(shape.drop_front(axis + 1));
  int64_t count = indices.numElements();
  std::vector<int64_t> rows(count);
  for (int64_t j = 0; j < count; ++j) {
    int64_t index = indices.ints[j];
    int64_t row = index < 0 ? index + size : index;
    if (row < 0 || row >= size)
      return op.emitError("index ")
             << index << " (indices element " << j
             << ") is out of range for axis " << axis << " of size " << size
             << " (expected " << -size << " <= index < " << size << ")";
    rows[j] = row;
  }
  std::vector<double> acc = x.fp;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < count; ++j)
      for (int64_t i = 0; i < inner; ++i)
        acc[(o * size + rows[j]) * inner + i] +=
            updates.fp[(o * count + j) * inner + i];
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

/// The forward conv2d's geometry, shared by both adjoints.
struct ConvGeometry {
  int64_t batch, channels, h, w;
  int64_t outChannels, groupChannels, kh, kw;
  int64_t oh, ow, perGroup;
  ArrayRef<int64_t> strides, padding, dilations;

  /// Input row (or column) read by output `o` at tap `t` along axis `d`.
  int64_t source(int d, int64_t o, int64_t t) const {
    return o * strides[d] - padding[d] + t * dilations[d];
  }
};

/// Calls `f(inputOffset, filterOffset, gradOffset)` for every product the
/// forward conv2d computes, in the forward op's order.
template <typename F> void forEachConvProduct(const ConvGeometry &g, F f) {
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t o = 0; o < g.outChannels; ++o) {
      int64_t firstChannel = (o / g.perGroup) * g.groupChannels;
      for (int64_t y = 0; y < g.oh; ++y)
        for (int64_t xo = 0; xo < g.ow; ++xo) {
          int64_t out = ((n * g.outChannels + o) * g.oh + y) * g.ow + xo;
          for (int64_t c = 0; c < g.groupChannels; ++c) {
            int64_t plane = (n * g.channels + firstChannel + c) * g.h * g.w;
            int64_t filter = (o * g.groupChannels + c) * g.kh * g.kw;
            for (int64_t i = 0; i < g.kh; ++i) {
              int64_t iy = g.source(0, y, i);
              if (iy < 0 || iy >= g.h)
                continue;
              for (int64_t j = 0; j < g.kw; ++j) {
                int64_t ix = g.source(1, xo, j);
                if (ix < 0 || ix >= g.w)
                  continue;
                f(plane + iy * g.w + ix, filter + i * g.kw + j, out);
              }
            }
          }
        }
    }
}

template <typename OpTy>
ConvGeometry convGeometry(OpTy op, ArrayRef<int64_t> input,
                          ArrayRef<int64_t> filter, ArrayRef<int64_t> grad) {
  ConvGeometry g;
  g.batch = input[0];
  g.channels = input[1];
  g.h = input[2];
  g.w = input[3];
  g.outChannels = filter[0];
  g.groupChannels = filter[1];
  g.kh = filter[2];
  g.kw = filter[3];
  g.oh = grad[2];
  g.ow = grad[3];
  g.perGroup = g.outChannels / static_cast<int64_t>(op.getGroups());
  g.strides = op.getStrides();
  g.padding = op.getPadding();
  g.dilations = op.getDilations();
  return g;
}

void evalConvBackwardInput(Conv2DBackwardInputOp op, const Tensor &grad,
                           const Tensor &w, Tensor &r) {
  ConvGeometry g = convGeometry(op, r.shape, w.shape, grad.shape);
  std::vector<double> acc(r.fp.size(), 0.0);
  forEachConvProduct(g, [&](int64_t in, int64_t filter, int64_t out) {
    acc[in] += grad.fp[out] * w.fp[filter];
  });
  store(acc, r);
}

void evalConvBackwardFilter(Conv2DBackwardFilterOp op, const Tensor &grad,
                            const Tensor &x, Tensor &r) {
  ConvGeometry g = convGeometry(op, x.shape, r.shape, grad.shape);
  std::vector<double> acc(r.fp.size(), 0.0);
  forEachConvProduct(g, [&](int64_t in, int64_t filter, int64_t out) {
    acc[filter] += grad.fp[out] * x.fp[in];
  });
  store(acc, r);
}

/// Max (to the window's first maximum, NaN winning as in max_pool2d) or
/// average (spread over the real cells) pooling adjoint.
void evalPoolGrad(bool isMax, bool countIncludePad, ArrayRef<int64_t> kernel,
                  ArrayRef<int64_t> strides, ArrayRef<int64_t> padding,
                  const Tensor &grad, const Tensor *x, Tensor &r) {
  int64_t planes = r.shape[0] * r.shape[1], h = r.shape[2], w = r.shape[3];
  int64_t oh = grad.shape[2], ow = grad.shape[3];
  std::vector<double> acc(r.fp.size(), 0.0);
  SmallVector<int64_t> cells;
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t xo = 0; xo < ow; ++xo) {
        cells.clear();
        for (int64_t i = 0; i < kernel[0]; ++i) {
          int64_t iy = y * strides[0] - padding[0] + i;
          if (iy < 0 || iy >= h)
            continue;
          for (int64_t j = 0; j < kernel[1]; ++j) {
            int64_t ix = xo * strides[1] - padding[1] + j;
            if (ix >= 0 && ix < w)
              cells.push_back((p * h + iy) * w + ix);
          }
        }
        if (cells.empty())
          continue;
        double g = grad.fp[(p * oh + y) * ow + xo];
        if (isMax) {
          // The forward op's nanMax scan: a cell that beats the running
          // maximum, or is NaN, takes over, so the first maximum wins.
          double best = -std::numeric_limits<double>::infinity();
          int64_t winner = cells.front();
          for (int64_t cell : cells) {
            double v = x->fp[cell];
            if (std::isnan(v) || v > best) {
              best = v;
              winner = cell;
            }
          }
          acc[winner] += g;
          continue;
        }
        double divisor = countIncludePad
                             ? static_cast<double>(kernel[0] * kernel[1])
                             : static_cast<double>(cells.size());
        for (int64_t cell : cells)
          acc[cell] += g / divisor;
      }
    }
  }
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
        evalPoolGrad(/*isMax=*/true, /*countIncludePad=*/false,
                     pool.getKernel(), pool.getStrides(), pool.getPadding(),
                     operands[0], &operands[1], result);
        return success();
      })
      .Case([&](AvgPool2DGradOp pool) {
        evalPoolGrad(/*isMax=*/false, pool.getCountIncludePad(),
                     pool.getKernel(), pool.getStrides(), pool.getPadding(),
                     operands[0], nullptr, result);
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
