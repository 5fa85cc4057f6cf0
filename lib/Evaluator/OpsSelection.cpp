//===- OpsSelection.cpp - Evaluating rounding, scans and selections -------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// floor, ceil, round, cumsum, arg_max, arg_min, top_k and top_k_indices.
// Float running sums accumulate in double and round each output, as
// PyTorch's CPU cumsum accumulates float in double.
//
//===----------------------------------------------------------------------===//

#include "EvaluatorInternal.h"

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <numeric>

using namespace mlir;
using namespace weft;
using namespace weft::eval;
using namespace weft::eval::detail;

namespace {

template <typename F> void rounding(const Tensor &x, Tensor &r, F f) {
  for (size_t i = 0; i < x.fp.size(); ++i)
    r.fp[i] = f(x.fp[i]);
}

void evalCumSum(CumSumOp op, const Tensor &x, Tensor &r) {
  AxisView v(x.shape, op.getAxis());
  bool exclusive = op.getExclusive(), reverse = op.getReverse();
  Rounder round(r.elementType);
  Wrapper wrap(r.elementType);
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      double fsum = 0;
      int64_t isum = 0;
      for (int64_t step = 0; step < v.size; ++step) {
        int64_t k = reverse ? v.size - 1 - step : step;
        int64_t at = (o * v.size + k) * v.inner + i;
        if (x.isFloat()) {
          if (!exclusive)
            fsum += x.fp[at];
          r.fp[at] = round(fsum);
          if (exclusive)
            fsum += x.fp[at];
          continue;
        }
        // Wrapping adds, as reduce_sum's integer sums.
        auto add = [](int64_t a, int64_t b) {
          return static_cast<int64_t>(static_cast<uint64_t>(a) +
                                      static_cast<uint64_t>(b));
        };
        if (!exclusive)
          isum = add(isum, x.ints[at]);
        r.ints[at] = wrap(isum);
        if (exclusive)
          isum = add(isum, x.ints[at]);
      }
    }
  }
}

/// The value of element `at` as a double (indices are exact below 2^53).
double valueAt(const Tensor &x, int64_t at) {
  return x.isFloat() ? x.fp[at] : static_cast<double>(x.ints[at]);
}

void evalArgReduce(const Tensor &x, int64_t axis, bool maximum, bool last,
                   Tensor &r) {
  AxisView v(x.shape, axis);
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      auto at = [&](int64_t k) { return (o * v.size + k) * v.inner + i; };
      int64_t best = 0;
      for (int64_t k = 1; k < v.size; ++k) {
        double a = valueAt(x, at(best)), b = valueAt(x, at(k));
        // A NaN beats any number; among NaNs the tie rule applies.
        bool better;
        if (std::isnan(a) || std::isnan(b))
          better = std::isnan(b) && (!std::isnan(a) || last);
        else
          better = maximum ? (b > a || (last && b == a))
                           : (b < a || (last && b == a));
        if (better)
          best = k;
      }
      r.ints[o * v.inner + i] = best;
    }
  }
}

/// For every slice along `axis`, the positions of its top `k` in result
/// order: a stable sort, so equal values keep their index order.
template <typename F>
void forEachTopK(const Tensor &x, int64_t axis, int64_t k, bool largest,
                 F emit) {
  AxisView v(x.shape, axis);
  std::vector<int64_t> order(v.size);
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      auto at = [&](int64_t j) { return (o * v.size + j) * v.inner + i; };
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        double p = x.fp[at(a)], q = x.fp[at(b)];
        return largest ? p > q : p < q;
      });
      for (int64_t j = 0; j < k; ++j)
        emit((o * k + j) * v.inner + i, order[j], at(order[j]));
    }
  }
}

} // namespace

std::optional<LogicalResult> weft::eval::detail::evaluateSelectionOp(
    Operation *op, ArrayRef<Tensor> operands, Tensor &result) {
  const Tensor &x = operands.front();
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](FloorOp) {
        rounding(x, result, [](double v) { return std::floor(v); });
        return success();
      })
      .Case([&](CeilOp) {
        rounding(x, result, [](double v) { return std::ceil(v); });
        return success();
      })
      .Case([&](RoundOp) {
        // Halves to even, as ONNX Round and torch.round.
        rounding(x, result, [](double v) { return std::nearbyint(v); });
        return success();
      })
      .Case([&](CumSumOp cumsum) {
        evalCumSum(cumsum, x, result);
        return success();
      })
      .Case([&](ArgMaxOp arg) {
        evalArgReduce(x, arg.getAxis(), true, arg.getSelectLastIndex(), result);
        return success();
      })
      .Case([&](ArgMinOp arg) {
        evalArgReduce(x, arg.getAxis(), false, arg.getSelectLastIndex(),
                      result);
        return success();
      })
      .Case([&](TopKOp top) {
        forEachTopK(x, top.getAxis(), top.getK(), top.getLargest(),
                    [&](int64_t out, int64_t, int64_t in) {
                      result.fp[out] = x.fp[in];
                    });
        return success();
      })
      .Case([&](TopKIndicesOp top) {
        forEachTopK(x, top.getAxis(), top.getK(), top.getLargest(),
                    [&](int64_t out, int64_t index, int64_t) {
                      result.ints[out] = index;
                    });
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
