//===- OpsAttention.cpp - Evaluating attention and its adjoint ------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Direct loops written from the equations in WeftAttentionOps.td, not from
// the runtime kernel, so the two check each other: every score row is
// computed whole, in double, with an exact softmax; only results are
// rounded, each to its own element type (a bf16 attention's log-sum-exp is
// f32). The adjoint takes its softmax row term from the probabilities and
// their adjoints (sum_j p dp) rather than from the stored result, as the
// unfused chain's softmax rule does.
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

/// Heads, T, S, D and Dv of an attention, from its query, key and value.
struct Dims {
  int64_t heads, t, s, d, dv;
};

Dims dimsOf(const Tensor &q, const Tensor &k, const Tensor &v) {
  size_t r = q.shape.size();
  return {product(ArrayRef<int64_t>(q.shape).drop_back(2)), q.shape[r - 2],
          k.shape[r - 2], q.shape[r - 1], v.shape[r - 1]};
}

/// Probabilities of row `i` of head `h` into `p` (size S; masked keys 0),
/// and the row's log-sum-exp.
double probabilities(const Dims &n, const Tensor &q, const Tensor &k,
                     double scale, bool causal, int64_t h, int64_t i,
                     std::vector<double> &p) {
  p.assign(n.s, 0.0);
  double mx = -std::numeric_limits<double>::infinity();
  int64_t seen = causal ? std::min(n.s, i + 1) : n.s;
  const double *qrow = q.fp.data() + (h * n.t + i) * n.d;
  for (int64_t j = 0; j < seen; ++j) {
    const double *krow = k.fp.data() + (h * n.s + j) * n.d;
    double dot = 0;
    for (int64_t c = 0; c < n.d; ++c)
      dot += qrow[c] * krow[c];
    p[j] = scale * dot;
    mx = std::max(mx, p[j]);
  }
  double sum = 0;
  for (int64_t j = 0; j < seen; ++j)
    sum += std::exp(p[j] - mx);
  double lse = mx + std::log(sum);
  for (int64_t j = 0; j < seen; ++j)
    p[j] = std::exp(p[j] - lse);
  return lse;
}

SmallVector<Tensor> evalAttention(AttentionOp op, ArrayRef<Tensor> in) {
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  SmallVector<Tensor> out = {resultFor(op, 0), resultFor(op, 1)};
  Dims n = dimsOf(q, k, v);
  Rounder round(out[0].elementType), roundLse(out[1].elementType);
  double scale = op.getScale().convertToDouble();
  std::vector<double> p, row(n.dv);
  for (int64_t h = 0; h < n.heads; ++h)
    for (int64_t i = 0; i < n.t; ++i) {
      out[1].fp[h * n.t + i] =
          roundLse(probabilities(n, q, k, scale, op.getCausal(), h, i, p));
      std::fill(row.begin(), row.end(), 0.0);
      for (int64_t j = 0; j < n.s; ++j)
        for (int64_t c = 0; c < n.dv; ++c)
          row[c] += p[j] * v.fp[(h * n.s + j) * n.dv + c];
      for (int64_t c = 0; c < n.dv; ++c)
        out[0].fp[(h * n.t + i) * n.dv + c] = round(row[c]);
    }
  return out;
}

SmallVector<Tensor> evalAttentionGrad(AttentionGradOp op, ArrayRef<Tensor> in) {
  const Tensor &dout = in[0], &q = in[1], &k = in[2], &v = in[3];
  SmallVector<Tensor> out = {resultFor(op, 0), resultFor(op, 1),
                             resultFor(op, 2)};
  Dims n = dimsOf(q, k, v);
  Rounder round(out[0].elementType);
  double scale = op.getScale().convertToDouble();
  std::vector<double> p, dp(n.s), dq(n.t * n.d), dk(n.s * n.d),
      dv(n.s * n.dv);
  for (int64_t h = 0; h < n.heads; ++h) {
    std::fill(dq.begin(), dq.end(), 0.0);
    std::fill(dk.begin(), dk.end(), 0.0);
    std::fill(dv.begin(), dv.end(), 0.0);
    for (int64_t i = 0; i < n.t; ++i) {
      probabilities(n, q, k, scale, op.getCausal(), h, i, p);
      const double *g = dout.fp.data() + (h * n.t + i) * n.dv;
      double rowTerm = 0;
      for (int64_t j = 0; j < n.s; ++j) {
        const double *vrow = v.fp.data() + (h * n.s + j) * n.dv;
        double dot = 0;
        for (int64_t c = 0; c < n.dv; ++c)
          dot += g[c] * vrow[c];
        dp[j] = dot;
        rowTerm += p[j] * dot;
      }
      const double *qrow = q.fp.data() + (h * n.t + i) * n.d;
      for (int64_t j = 0; j < n.s; ++j) {
        if (p[j] == 0)
          continue;
        double ds = scale * p[j] * (dp[j] - rowTerm);
        const double *krow = k.fp.data() + (h * n.s + j) * n.d;
        for (int64_t c = 0; c < n.d; ++c) {
          dq[i * n.d + c] += ds * krow[c];
          dk[j * n.d + c] += ds * qrow[c];
        }
        for (int64_t c = 0; c < n.dv; ++c)
          dv[j * n.dv + c] += p[j] * g[c];
      }
    }
    for (int64_t x = 0; x < n.t * n.d; ++x)
      out[0].fp[h * n.t * n.d + x] = round(dq[x]);
    for (int64_t x = 0; x < n.s * n.d; ++x)
      out[1].fp[h * n.s * n.d + x] = round(dk[x]);
    for (int64_t x = 0; x < n.s * n.dv; ++x)
      out[2].fp[h * n.s * n.dv + x] = round(dv[x]);
  }
  return out;
}

} // namespace

std::optional<SmallVector<Tensor>>
weft::eval::detail::evaluateAttentionOp(Operation *op,
                                        ArrayRef<Tensor> operands) {
  return llvm::TypeSwitch<Operation *, std::optional<SmallVector<Tensor>>>(op)
      .Case([&](AttentionOp a) { return evalAttention(a, operands); })
      .Case([&](AttentionGradOp g) { return evalAttentionGrad(g, operands); })
      .Default([](Operation *) { return std::nullopt; });
}
