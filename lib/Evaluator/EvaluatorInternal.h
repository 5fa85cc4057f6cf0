//===- EvaluatorInternal.h - Helpers shared by op evaluators ----*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The evaluator is split by op family (elementwise, reductions, linear
// algebra and windows, data movement); this header holds the index
// arithmetic they share and the per-family entry points Evaluator.cpp
// dispatches to. Not installed: nothing outside lib/Evaluator includes it.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_EVALUATOR_EVALUATORINTERNAL_H
#define WEFT_LIB_EVALUATOR_EVALUATORINTERNAL_H

#include "weft/Evaluator/Evaluator.h"

#include "mlir/IR/Operation.h"

#include <cmath>
#include <optional>

namespace weft {
namespace eval {
namespace detail {

/// Product of `shape` (1 for rank 0).
int64_t product(llvm::ArrayRef<int64_t> shape);

/// "tensor<4x8xf32>" for a message, or "an uninitialized value".
std::string describeValue(const Tensor &t);

/// Row-major strides of `shape`.
llvm::SmallVector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape);

/// For every element of `shape` in row-major order, the flat source offset
/// `base + sum_d index[d] * strides[d]`. Transpose, slice, broadcast and
/// reductions are all this with different strides, so the odometer that
/// walks the indices is written once.
std::vector<int64_t> stridedOffsets(llvm::ArrayRef<int64_t> shape,
                                    llvm::ArrayRef<int64_t> strides,
                                    int64_t base = 0);

/// A tensor seen as [outer, size, inner] around one axis: element (o, k, i)
/// is at `(o * size + k) * inner + i`.
struct AxisView {
  int64_t outer, size, inner;
  AxisView(llvm::ArrayRef<int64_t> shape, int64_t axis)
      : outer(product(shape.take_front(axis))), size(shape[axis]),
        inner(product(shape.drop_front(axis + 1))) {}
};

/// Resolves gather (and scatter_add) indices along axis `axis` of `size`:
/// negative indices wrap once; anything still out of range is reported on
/// `op`.
mlir::FailureOr<std::vector<int64_t>> resolveIndices(mlir::Operation *op,
                                                     const Tensor &indices,
                                                     int64_t axis,
                                                     int64_t size);

/// Source offsets of `source` (right-aligned against `result`, size-1 axes
/// stretched) for every element of `result`.
std::vector<int64_t> broadcastOffsets(llvm::ArrayRef<int64_t> result,
                                      llvm::ArrayRef<int64_t> source);

/// A tensor of `type` whose element `i` is `source`'s element `offsets[i]`.
Tensor takeElements(const Tensor &source, mlir::RankedTensorType type,
                    llvm::ArrayRef<int64_t> offsets);

/// Rounds `v` to a binary format with `mantissaBits` stored mantissa bits,
/// smallest normal exponent `minExponent` and largest finite value
/// `maxFinite`, ties to even.
double roundNarrow(double v, int mantissaBits, int minExponent,
                   double maxFinite);

/// Rounds doubles to one element type. Element loops call it per element, so
/// the type dispatch happens once, in the constructor.
class Rounder {
public:
  explicit Rounder(mlir::Type elementType);
  double operator()(double v) const {
    switch (kind) {
    case Kind::F64:
      return v;
    case Kind::F32:
      return static_cast<double>(static_cast<float>(v));
    case Kind::BF16:
      return roundNarrow(v, 7, -126, 0x1.fep+127);
    case Kind::F16:
      return roundNarrow(v, 10, -14, 0x1.ffcp+15);
    case Kind::Other:
      return roundToFloat(type, v);
    }
    return v;
  }

private:
  enum class Kind { F64, F32, BF16, F16, Other };
  Kind kind = Kind::F64;
  mlir::FloatType type;
};

/// Wraps int64 results to one integer element type, hoisting the width test
/// out of element loops like Rounder.
class Wrapper {
public:
  explicit Wrapper(mlir::Type elementType);
  int64_t operator()(int64_t v) const {
    return width >= 64 ? v : wrapToInteger(type, v);
  }

private:
  mlir::IntegerType type;
  unsigned width = 64;
};

/// The sticky-NaN maximum of PyTorch's max, amax and max_pool2d.
inline double nanMax(double acc, double x) {
  return (std::isnan(x) || x > acc) ? x : acc;
}

/// The index arithmetic of a conv2d. `Op` is conv2d or one of its adjoints
/// (anything with strides, padding, dilations and groups), so the forward op
/// and its adjoints visit the same products.
struct ConvGeometry {
  int64_t batch, channels, h, w;              // input, NCHW
  int64_t outChannels, groupChannels, kh, kw; // filter, OIHW
  int64_t oh, ow;                             // result spatial sizes
  llvm::ArrayRef<int64_t> strides, padding, dilations;
  int64_t groups;

  template <typename Op>
  ConvGeometry(Op op, llvm::ArrayRef<int64_t> input,
               llvm::ArrayRef<int64_t> filter, llvm::ArrayRef<int64_t> output)
      : batch(input[0]), channels(input[1]), h(input[2]), w(input[3]),
        outChannels(filter[0]), groupChannels(filter[1]), kh(filter[2]),
        kw(filter[3]), oh(output[2]), ow(output[3]), strides(op.getStrides()),
        padding(op.getPadding()), dilations(op.getDilations()),
        groups(static_cast<int64_t>(op.getGroups())) {}

  /// Calls `visit(input, filter, output)` with flat offsets for every
  /// product the convolution sums, in the order a direct loop adds them up
  /// for each output element (channel, then filter row, then column).
  template <typename F> void forEachTap(F visit) const {
    int64_t perGroup = outChannels / groups;
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t o = 0; o < outChannels; ++o) {
        int64_t firstChannel = (o / perGroup) * groupChannels;
        for (int64_t y = 0; y < oh; ++y) {
          for (int64_t x = 0; x < ow; ++x) {
            int64_t out = ((n * outChannels + o) * oh + y) * ow + x;
            for (int64_t c = 0; c < groupChannels; ++c) {
              int64_t plane = (n * channels + firstChannel + c) * h * w;
              int64_t taps = (o * groupChannels + c) * kh * kw;
              for (int64_t i = 0; i < kh; ++i) {
                int64_t iy = y * strides[0] - padding[0] + i * dilations[0];
                if (iy < 0 || iy >= h)
                  continue;
                for (int64_t j = 0; j < kw; ++j) {
                  int64_t ix = x * strides[1] - padding[1] + j * dilations[1];
                  if (ix < 0 || ix >= w)
                    continue;
                  visit(plane + iy * w + ix, taps + i * kw + j, out);
                }
              }
            }
          }
        }
      }
    }
  }
};

/// The windows of a 2-D pooling op over an NCHW input. `Op` is a pooling op
/// or its adjoint (anything with kernel, strides and padding), so the
/// forward op and its adjoint visit the same cells.
struct PoolGeometry {
  int64_t planes, h, w, oh, ow;
  llvm::ArrayRef<int64_t> kernel, strides, padding;

  template <typename Op>
  PoolGeometry(Op op, llvm::ArrayRef<int64_t> input,
               llvm::ArrayRef<int64_t> output)
      : planes(input[0] * input[1]), h(input[2]), w(input[3]), oh(output[2]),
        ow(output[3]), kernel(op.getKernel()), strides(op.getStrides()),
        padding(op.getPadding()) {}

  /// Calls `visit(window, cells)` for every output element with the flat
  /// input offsets of the real (non-padding) cells under its window, in
  /// row-major window order.
  template <typename F> void forEachWindow(F visit) const {
    llvm::SmallVector<int64_t> cells;
    for (int64_t p = 0; p < planes; ++p) {
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t x = 0; x < ow; ++x) {
          cells.clear();
          for (int64_t i = 0; i < kernel[0]; ++i) {
            int64_t iy = y * strides[0] - padding[0] + i;
            if (iy < 0 || iy >= h)
              continue;
            for (int64_t j = 0; j < kernel[1]; ++j) {
              int64_t ix = x * strides[1] - padding[1] + j;
              if (ix >= 0 && ix < w)
                cells.push_back((p * h + iy) * w + ix);
            }
          }
          visit((p * oh + y) * ow + x, llvm::ArrayRef<int64_t>(cells));
        }
      }
    }
  }

  /// The average's divisor for a window with `cells` real cells.
  double divisor(bool countIncludePad, size_t cells) const {
    return countIncludePad ? static_cast<double>(kernel[0] * kernel[1])
                           : static_cast<double>(cells);
  }
};

/// The cell max_pool2d returns for a window of `x`: PyTorch's rule, the
/// first strict maximum in row-major order, except that a NaN always takes
/// over. `cells` must not be empty.
int64_t argMax(const Tensor &x, llvm::ArrayRef<int64_t> cells);

/// The zero-filled result tensor for result `index` of `op`.
Tensor resultFor(mlir::Operation *op, unsigned index = 0);

/// Each family evaluates the ops it knows into `result` and returns
/// std::nullopt for any other op, so Evaluator.cpp can try them in turn.
/// A failure has already been reported on the op.
std::optional<mlir::LogicalResult>
evaluateElementwiseOp(mlir::Operation *op, llvm::ArrayRef<Tensor> operands,
                      Tensor &result);
std::optional<mlir::LogicalResult>
evaluateReductionOp(mlir::Operation *op, llvm::ArrayRef<Tensor> operands,
                    Tensor &result);
std::optional<mlir::LogicalResult>
evaluateLinalgOp(mlir::Operation *op, llvm::ArrayRef<Tensor> operands,
                 Tensor &result);
std::optional<mlir::LogicalResult>
evaluateDataMovementOp(mlir::Operation *op, llvm::ArrayRef<Tensor> operands,
                       Tensor &result);
std::optional<mlir::LogicalResult>
evaluateGradientOp(mlir::Operation *op, llvm::ArrayRef<Tensor> operands,
                   Tensor &result);
std::optional<mlir::LogicalResult>
evaluateSelectionOp(mlir::Operation *op, llvm::ArrayRef<Tensor> operands,
                    Tensor &result);

/// The multi-result recurrences (lstm, gru and their adjoints): all their
/// results, or std::nullopt for any other op. Operands are checked by type
/// before, and the ops have nothing else to fail on.
std::optional<llvm::SmallVector<Tensor>>
evaluateRecurrentOp(mlir::Operation *op, llvm::ArrayRef<Tensor> operands);

/// weft.attention and weft.attention_grad (OpsAttention.cpp), likewise.
std::optional<llvm::SmallVector<Tensor>>
evaluateAttentionOp(mlir::Operation *op, llvm::ArrayRef<Tensor> operands);

} // namespace detail
} // namespace eval
} // namespace weft

#endif // WEFT_LIB_EVALUATOR_EVALUATORINTERNAL_H
