//===- OpsReduction.cpp - Evaluating normalizations, reductions, losses ---===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Softmax, log-softmax, layer norm, reduce_sum/mean/max and the losses. All
// of them accumulate in double (int64 for integer sums) and round once per
// result element, so the evaluator is at least as accurate as any kernel it
// checks.
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

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Softmax (or its log) along `axis`, max-subtracted so that large logits
/// neither overflow exp nor lose the small ones.
void evalSoftmax(const Tensor &x, int64_t axis, bool logarithm, Tensor &r) {
  Rounder round(r.elementType);
  AxisView v(x.shape, axis);
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      int64_t base = o * v.size * v.inner + i;
      double max = -kInf;
      for (int64_t k = 0; k < v.size; ++k)
        max = nanMax(max, x.fp[base + k * v.inner]);
      double sum = 0;
      for (int64_t k = 0; k < v.size; ++k)
        sum += std::exp(x.fp[base + k * v.inner] - max);
      double logSum = std::log(sum);
      for (int64_t k = 0; k < v.size; ++k) {
        double shifted = x.fp[base + k * v.inner] - max;
        r.fp[base + k * v.inner] =
            round(logarithm ? shifted - logSum : std::exp(shifted) / sum);
      }
    }
  }
}

/// PyTorch's LayerNorm: biased variance, epsilon inside the square root.
void evalLayerNorm(LayerNormOp op, const Tensor &x, const Tensor &scale,
                   const Tensor &bias, Tensor &r) {
  Rounder round(r.elementType);
  int64_t axis = static_cast<int64_t>(op.getAxis());
  double epsilon = op.getEpsilon().convertToDouble();
  int64_t outer = product(ArrayRef<int64_t>(x.shape).take_front(axis));
  int64_t inner = product(ArrayRef<int64_t>(x.shape).drop_front(axis));
  for (int64_t o = 0; o < outer; ++o) {
    const double *row = x.fp.data() + o * inner;
    double sum = 0;
    for (int64_t i = 0; i < inner; ++i)
      sum += row[i];
    double mean = sum / inner;
    // Two passes: the centred sum of squares does not cancel catastrophically.
    double squares = 0;
    for (int64_t i = 0; i < inner; ++i)
      squares += (row[i] - mean) * (row[i] - mean);
    double rstd = 1 / std::sqrt(squares / inner + epsilon);
    for (int64_t i = 0; i < inner; ++i)
      r.fp[o * inner + i] =
          round((row[i] - mean) * rstd * scale.fp[i] + bias.fp[i]);
  }
}

/// The reductions share one walk; they differ in the initial value and how
/// an element joins the accumulator.
enum class Reduce { Sum, Mean, Max };

/// Reduces `axes` of `x` into `r` (which already has the keep_dims shape).
void evalReduce(Reduce kind, const Tensor &x, ArrayRef<int64_t> axes,
                Tensor &r) {
  // Map every input element to its result element: reduced axes do not move
  // in the result; kept axes use the result's strides (size-1 axes kept by
  // keep_dims do not change the row-major layout).
  SmallVector<int64_t> kept;
  SmallVector<bool> reduced(x.shape.size(), false);
  for (int64_t a : axes)
    reduced[a] = true;
  for (size_t d = 0; d < x.shape.size(); ++d)
    if (!reduced[d])
      kept.push_back(x.shape[d]);
  SmallVector<int64_t> keptStrides = stridesOf(kept);
  SmallVector<int64_t> strides(x.shape.size(), 0);
  for (size_t d = 0, k = 0; d < x.shape.size(); ++d)
    if (!reduced[d])
      strides[d] = keptStrides[k++];
  std::vector<int64_t> target = stridedOffsets(x.shape, strides);
  int64_t n = x.numElements();
  int64_t resultSize = r.numElements();

  if (!r.isFloat()) {
    Wrapper wrap(r.elementType);
    std::vector<int64_t> acc(
        resultSize,
        kind == Reduce::Max ? std::numeric_limits<int64_t>::min() : 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t &a = acc[target[i]];
      if (kind == Reduce::Max)
        a = std::max(a, x.ints[i]);
      else // Wrapping add; see wrappingAdd in OpsElementwise.cpp.
        a = static_cast<int64_t>(static_cast<uint64_t>(a) +
                                 static_cast<uint64_t>(x.ints[i]));
    }
    for (int64_t i = 0; i < resultSize; ++i)
      r.ints[i] = wrap(acc[i]);
    return;
  }

  Rounder round(r.elementType);
  std::vector<double> acc(resultSize, kind == Reduce::Max ? -kInf : 0.0);
  for (int64_t i = 0; i < n; ++i) {
    double &a = acc[target[i]];
    a = kind == Reduce::Max ? nanMax(a, x.fp[i]) : a + x.fp[i];
  }
  double count = resultSize == 0 ? 0 : static_cast<double>(n / resultSize);
  for (int64_t i = 0; i < resultSize; ++i)
    r.fp[i] = round(kind == Reduce::Mean ? acc[i] / count : acc[i]);
}

/// Mean over label positions of logsumexp(logits) - logits[label], as
/// F.cross_entropy with the default mean reduction and no ignore_index.
LogicalResult evalCrossEntropy(Operation *op, const Tensor &logits,
                               const Tensor &labels, Tensor &r) {
  int64_t classes = logits.shape.back();
  int64_t positions = labels.numElements();
  double total = 0;
  for (int64_t p = 0; p < positions; ++p) {
    int64_t label = labels.ints[p];
    if (label < 0 || label >= classes) {
      InFlightDiagnostic diag =
          op->emitError("label ")
          << label << " at position " << p << " is out of range for " << classes
          << " classes (expected 0 <= label < " << classes << ")";
      if (label == -100)
        diag << "; PyTorch's ignore_index=-100 is not supported";
      return diag;
    }
    const double *row = logits.fp.data() + p * classes;
    double max = -kInf;
    for (int64_t c = 0; c < classes; ++c)
      max = nanMax(max, row[c]);
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      sum += std::exp(row[c] - max);
    total += max + std::log(sum) - row[label];
  }
  // No positions gives 0/0 = NaN, as PyTorch's mean reduction does.
  r.fp[0] = Rounder(r.elementType)(total / static_cast<double>(positions));
  return success();
}

/// Mean of squared differences, summed in double.
void evalMse(const Tensor &prediction, const Tensor &target, Tensor &r) {
  int64_t n = prediction.numElements();
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = prediction.fp[i] - target.fp[i];
    sum += d * d;
  }
  r.fp[0] = Rounder(r.elementType)(sum / static_cast<double>(n));
}

} // namespace

std::optional<LogicalResult> weft::eval::detail::evaluateReductionOp(
    Operation *op, ArrayRef<Tensor> operands, Tensor &result) {
  auto reduce = [&](Reduce kind, ArrayRef<int64_t> axes) {
    evalReduce(kind, operands[0], axes, result);
    return success();
  };
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](SoftmaxOp softmax) {
        evalSoftmax(operands[0], static_cast<int64_t>(softmax.getAxis()),
                    /*logarithm=*/false, result);
        return success();
      })
      .Case([&](LogSoftmaxOp softmax) {
        evalSoftmax(operands[0], static_cast<int64_t>(softmax.getAxis()),
                    /*logarithm=*/true, result);
        return success();
      })
      .Case([&](LayerNormOp norm) {
        evalLayerNorm(norm, operands[0], operands[1], operands[2], result);
        return success();
      })
      .Case([&](ReduceSumOp r) { return reduce(Reduce::Sum, r.getAxes()); })
      .Case([&](ReduceMeanOp r) { return reduce(Reduce::Mean, r.getAxes()); })
      .Case([&](ReduceMaxOp r) { return reduce(Reduce::Max, r.getAxes()); })
      .Case([&](CrossEntropyOp) {
        return evalCrossEntropy(op, operands[0], operands[1], result);
      })
      .Case([&](MseOp) {
        evalMse(operands[0], operands[1], result);
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
