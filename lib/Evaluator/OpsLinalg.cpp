//===- OpsLinalg.cpp - Evaluating matmul, convolution and pooling ---------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Matmul, convolution and pooling. Direct loops, no tiling: the evaluator is
// an oracle, and straightforward loops are easiest to trust. Strides are
// computed once per op and products accumulate in double, so a transformer
// of a few million FLOPs evaluates in well under a second.
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

/// Batched matmul with numpy batch broadcasting; every sum runs in double.
void evalMatMul(MatMulOp op, const Tensor &a, const Tensor &b, Tensor &r) {
  Rounder round(r.elementType);
  ArrayRef<int64_t> as = a.shape, bs = b.shape;
  int64_t aRows = as[as.size() - 2], aCols = as.back();
  int64_t bRows = bs[bs.size() - 2], bCols = bs.back();
  // Transposes only swap strides: element (i, k) of lhs' is at
  // i * aIStride + k * aKStride within its matrix, likewise (k, j) of rhs'.
  bool ta = op.getTransposeLhs(), tb = op.getTransposeRhs();
  int64_t m = ta ? aCols : aRows, k = ta ? aRows : aCols;
  int64_t n = tb ? bRows : bCols;
  int64_t aIStride = ta ? 1 : aCols, aKStride = ta ? aCols : 1;
  int64_t bKStride = tb ? 1 : bCols, bJStride = tb ? bCols : 1;

  ArrayRef<int64_t> batch = ArrayRef<int64_t>(r.shape).drop_back(2);
  std::vector<int64_t> aBatch = broadcastOffsets(batch, as.drop_back(2));
  std::vector<int64_t> bBatch = broadcastOffsets(batch, bs.drop_back(2));
  // One row of sums at a time, walking rhs rows contiguously when it is not
  // transposed; every sum still adds its products in order of k.
  std::vector<double> row(n);
  for (size_t bi = 0, e = aBatch.size(); bi < e; ++bi) {
    const double *aMat = a.fp.data() + aBatch[bi] * aRows * aCols;
    const double *bMat = b.fp.data() + bBatch[bi] * bRows * bCols;
    double *rMat = r.fp.data() + bi * m * n;
    for (int64_t i = 0; i < m; ++i) {
      std::fill(row.begin(), row.end(), 0.0);
      for (int64_t kk = 0; kk < k; ++kk) {
        double av = aMat[i * aIStride + kk * aKStride];
        const double *bRow = bMat + kk * bKStride;
        for (int64_t j = 0; j < n; ++j)
          row[j] += av * bRow[j * bJStride];
      }
      for (int64_t j = 0; j < n; ++j)
        rMat[i * n + j] = round(row[j]);
    }
  }
}

/// Rounds every element of a result accumulated in place in double.
void roundAll(Tensor &r) {
  Rounder round(r.elementType);
  for (double &v : r.fp)
    v = round(v);
}

/// Sums in double, adds the bias last and rounds once.
void evalConv2D(Conv2DOp op, const Tensor &x, const Tensor &w,
                const Tensor *bias, Tensor &r) {
  ConvGeometry g(op, x.shape, w.shape, r.shape);
  g.forEachTap([&](int64_t xi, int64_t wi, int64_t ri) {
    r.fp[ri] += x.fp[xi] * w.fp[wi];
  });
  if (bias) {
    int64_t plane = g.oh * g.ow;
    for (size_t i = 0, e = r.fp.size(); i < e; ++i)
      r.fp[i] += bias->fp[(i / plane) % g.outChannels];
  }
  roundAll(r);
}

/// Takes the argMax cell's value, so the forward op and PyTorch's index
/// choice agree.
void evalMaxPool(MaxPool2DOp op, const Tensor &x, Tensor &r) {
  PoolGeometry g(op, x.shape, r.shape);
  g.forEachWindow([&](int64_t out, ArrayRef<int64_t> cells) {
    // The verifier keeps padding below the kernel size, so every window
    // holds a real cell; the guard only keeps unverified IR memory-safe.
    r.fp[out] = cells.empty() ? -std::numeric_limits<double>::infinity()
                              : x.fp[argMax(x, cells)];
  });
}

/// Averages the real cells; padding only changes the divisor.
void evalAvgPool(AvgPool2DOp op, const Tensor &x, Tensor &r) {
  Rounder round(r.elementType);
  PoolGeometry g(op, x.shape, r.shape);
  g.forEachWindow([&](int64_t out, ArrayRef<int64_t> cells) {
    double sum = 0;
    for (int64_t c : cells)
      sum += x.fp[c];
    r.fp[out] = round(sum / g.divisor(op.getCountIncludePad(), cells.size()));
  });
}

/// Means over all spatial axes of each (batch, channel) plane.
void evalGlobalAvgPool(const Tensor &x, Tensor &r) {
  Rounder round(r.elementType);
  int64_t planes = x.shape[0] * x.shape[1];
  int64_t size = product(ArrayRef<int64_t>(x.shape).drop_front(2));
  for (int64_t p = 0; p < planes; ++p) {
    double sum = 0;
    for (int64_t i = 0; i < size; ++i)
      sum += x.fp[p * size + i];
    r.fp[p] = round(sum / static_cast<double>(size));
  }
}

} // namespace

int64_t weft::eval::detail::argMax(const Tensor &x, ArrayRef<int64_t> cells) {
  int64_t best = cells.front();
  double bestValue = -std::numeric_limits<double>::infinity();
  for (int64_t c : cells) {
    double v = x.fp[c];
    if (v > bestValue || std::isnan(v)) {
      best = c;
      bestValue = v;
    }
  }
  return best;
}

std::optional<LogicalResult>
weft::eval::detail::evaluateLinalgOp(Operation *op, ArrayRef<Tensor> operands,
                                     Tensor &result) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](MatMulOp matmul) {
        evalMatMul(matmul, operands[0], operands[1], result);
        return success();
      })
      .Case([&](Conv2DOp conv) {
        const Tensor *bias = operands.size() > 2 ? &operands[2] : nullptr;
        evalConv2D(conv, operands[0], operands[1], bias, result);
        return success();
      })
      .Case([&](MaxPool2DOp pool) {
        evalMaxPool(pool, operands[0], result);
        return success();
      })
      .Case([&](AvgPool2DOp pool) {
        evalAvgPool(pool, operands[0], result);
        return success();
      })
      .Case([&](GlobalAvgPoolOp) {
        evalGlobalAvgPool(operands[0], result);
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
