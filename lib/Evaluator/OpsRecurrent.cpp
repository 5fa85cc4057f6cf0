//===- OpsRecurrent.cpp - Evaluating lstm, gru and their adjoints ---------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Direct loops over time, written from the equations in WeftOps.td rather
// than from the lowering, so the two check each other. Each step computes
// in double; the states carried to the next step are the stored results,
// rounded to the element type, as the compiled loop carries them. With
// `recompute` the forward ops store no gates and the adjoints recompute
// them from the input gates and the stored states, unrounded.
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

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

/// Sizes of a recurrence: steps, batch, hidden, and gate blocks in the
/// recurrence matrix.
struct Dims {
  int64_t t, b, h, gates;
  /// Step `s` of the loop in time order: the forward op walks it from the
  /// end when reversed.
  int64_t step(int64_t s, bool reverse) const {
    return reverse ? t - 1 - s : s;
  }
  /// The time index of the state before step `t`, or -1 for the initial one.
  int64_t previous(int64_t at, bool reverse) const {
    int64_t p = reverse ? at + 1 : at - 1;
    return (p < 0 || p >= t) ? -1 : p;
  }
};

Dims dimsOf(const Tensor &state, const Tensor &recurrence) {
  return {state.shape[0], state.shape[1], state.shape[2],
          recurrence.shape[0] / recurrence.shape[1]};
}

/// `out[b, j] = sum_k h[b, k] * r[j, k]` for a [B, H] slice at `hAt`.
void recurrent(const Dims &d, const double *h, const Tensor &r,
               std::vector<double> &out) {
  int64_t rows = d.gates * d.h;
  out.assign(d.b * rows, 0.0);
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t j = 0; j < rows; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < d.h; ++k)
        acc += h[b * d.h + k] * r.fp[j * d.h + k];
      out[b * rows + j] = acc;
    }
}

/// `dh[b, k] += sum_j da[b, j] * r[j, k]`.
void backRecurrent(const Dims &d, const std::vector<double> &da,
                   const Tensor &r, std::vector<double> &dh) {
  int64_t rows = d.gates * d.h;
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t k = 0; k < d.h; ++k) {
      double acc = 0;
      for (int64_t j = 0; j < rows; ++j)
        acc += da[b * rows + j] * r.fp[j * d.h + k];
      dh[b * d.h + k] += acc;
    }
}

/// The [B, H] state before step `at`: a slice of `states` or `initial`.
const double *before(const Dims &d, const Tensor &states, const Tensor &initial,
                     int64_t at, bool reverse) {
  int64_t p = d.previous(at, reverse);
  return p < 0 ? initial.fp.data() : states.fp.data() + p * d.b * d.h;
}

SmallVector<Tensor> evalLstm(LstmOp op, ArrayRef<Tensor> in) {
  const Tensor &x = in[0], &r = in[1], &h0 = in[2], &c0 = in[3];
  bool recompute = op.getRecompute();
  SmallVector<Tensor> out = {resultFor(op, 0), resultFor(op, 1)};
  if (!recompute)
    out.push_back(resultFor(op, 2));
  Tensor &y = out[0], &c = out[1];
  Dims d = dimsOf(y, r);
  Rounder round(y.elementType);
  bool reverse = op.getReverse();
  std::vector<double> a;
  for (int64_t s = 0; s < d.t; ++s) {
    int64_t t = d.step(s, reverse);
    const double *h = before(d, y, h0, t, reverse);
    const double *cPrev = before(d, c, c0, t, reverse);
    recurrent(d, h, r, a);
    for (int64_t b = 0; b < d.b; ++b)
      for (int64_t j = 0; j < d.h; ++j) {
        auto pre = [&](int64_t g) {
          int64_t col = g * d.h + j;
          return x.fp[(t * d.b + b) * 4 * d.h + col] + a[b * 4 * d.h + col];
        };
        double i = sigmoid(pre(0)), o = sigmoid(pre(1)), f = sigmoid(pre(2)),
               g = std::tanh(pre(3));
        double cell = round(f * cPrev[b * d.h + j] + i * g);
        int64_t at = (t * d.b + b) * d.h + j;
        c.fp[at] = cell;
        y.fp[at] = round(o * std::tanh(cell));
        if (recompute)
          continue;
        double *saved = out[2].fp.data() + (t * d.b + b) * 4 * d.h + j;
        saved[0] = round(i);
        saved[d.h] = round(o);
        saved[2 * d.h] = round(f);
        saved[3 * d.h] = round(g);
      }
  }
  return out;
}

SmallVector<Tensor> evalLstmGrad(LstmGradOp op, ArrayRef<Tensor> in) {
  // h0 and hidden (in[3], in[5]) serve only to recompute the gates: the
  // stored gates hold o, and the cell states give tanh(c).
  const Tensor &dy = in[0], &dcell = in[1], &r = in[2], &h0 = in[3],
               &c0 = in[4], &y = in[5], &c = in[6], &gates = in[7];
  bool recompute = op.getRecompute();
  SmallVector<Tensor> out = {resultFor(op, 0), resultFor(op, 1),
                             resultFor(op, 2)};
  Tensor &dx = out[0];
  Dims d = dimsOf(dy, r);
  Rounder round(dx.elementType);
  bool reverse = op.getReverse();
  std::vector<double> dh(d.b * d.h, 0.0), dc(d.b * d.h, 0.0), da, a;
  for (int64_t s = 0; s < d.t; ++s) {
    int64_t t = d.step(d.t - 1 - s, reverse);
    const double *cPrev = before(d, c, c0, t, reverse);
    if (recompute)
      recurrent(d, before(d, y, h0, t, reverse), r, a);
    da.assign(d.b * 4 * d.h, 0.0);
    for (int64_t b = 0; b < d.b; ++b)
      for (int64_t j = 0; j < d.h; ++j) {
        int64_t at = (t * d.b + b) * d.h + j;
        const double *g = gates.fp.data() + (t * d.b + b) * 4 * d.h + j;
        double i, o, f, cand;
        if (recompute) {
          auto pre = [&](int64_t k) {
            return g[k * d.h] + a[b * 4 * d.h + k * d.h + j];
          };
          i = sigmoid(pre(0));
          o = sigmoid(pre(1));
          f = sigmoid(pre(2));
          cand = std::tanh(pre(3));
        } else {
          i = g[0];
          o = g[d.h];
          f = g[2 * d.h];
          cand = g[3 * d.h];
        }
        double tc = std::tanh(c.fp[at]);
        double dhh = dy.fp[at] + dh[b * d.h + j];
        double dcc = dc[b * d.h + j] + dcell.fp[at] + dhh * o * (1 - tc * tc);
        double *row = da.data() + b * 4 * d.h + j;
        row[0] = dcc * cand * i * (1 - i);
        row[d.h] = dhh * tc * o * (1 - o);
        row[2 * d.h] = dcc * cPrev[b * d.h + j] * f * (1 - f);
        row[3 * d.h] = dcc * i * (1 - cand * cand);
        dc[b * d.h + j] = dcc * f;
      }
    for (int64_t k = 0; k < d.b * 4 * d.h; ++k)
      dx.fp[t * d.b * 4 * d.h + k] = round(da[k]);
    std::fill(dh.begin(), dh.end(), 0.0);
    backRecurrent(d, da, r, dh);
  }
  for (int64_t k = 0; k < d.b * d.h; ++k) {
    out[1].fp[k] = round(dh[k]);
    out[2].fp[k] = round(dc[k]);
  }
  return out;
}

SmallVector<Tensor> evalGru(GruOp op, ArrayRef<Tensor> in) {
  const Tensor &x = in[0], &r = in[1], &rb = in[2], &h0 = in[3];
  bool recompute = op.getRecompute();
  SmallVector<Tensor> out = {resultFor(op, 0)};
  if (!recompute)
    out.push_back(resultFor(op, 1));
  Tensor &y = out[0];
  Dims d = dimsOf(y, r);
  Rounder round(y.elementType);
  bool reverse = op.getReverse();
  std::vector<double> p;
  for (int64_t s = 0; s < d.t; ++s) {
    int64_t t = d.step(s, reverse);
    const double *h = before(d, y, h0, t, reverse);
    recurrent(d, h, r, p);
    for (int64_t b = 0; b < d.b; ++b)
      for (int64_t j = 0; j < d.h; ++j) {
        auto xAt = [&](int64_t g) {
          return x.fp[(t * d.b + b) * 3 * d.h + g * d.h + j];
        };
        auto pAt = [&](int64_t g) {
          return p[b * 3 * d.h + g * d.h + j] + rb.fp[g * d.h + j];
        };
        double z = sigmoid(xAt(0) + pAt(0)), rg = sigmoid(xAt(1) + pAt(1));
        double pn = pAt(2);
        double n = std::tanh(xAt(2) + rg * pn);
        y.fp[(t * d.b + b) * d.h + j] = round((1 - z) * n + z * h[b * d.h + j]);
        if (recompute)
          continue;
        double *saved = out[1].fp.data() + (t * d.b + b) * 4 * d.h + j;
        saved[0] = round(z);
        saved[d.h] = round(rg);
        saved[2 * d.h] = round(n);
        saved[3 * d.h] = round(pn);
      }
  }
  return out;
}

SmallVector<Tensor> evalGruGrad(GruGradOp op, ArrayRef<Tensor> in) {
  const Tensor &dy = in[0], &r = in[1], &h0 = in[2], &y = in[3], &gates = in[4];
  SmallVector<Tensor> out = {resultFor(op, 0), resultFor(op, 1),
                             resultFor(op, 2)};
  Dims d = dimsOf(dy, r);
  Rounder round(out[0].elementType);
  bool reverse = op.getReverse();
  // With recompute, `gates` is the input gates and in[5] the recurrent
  // bias.
  bool recompute = op.getRecompute();
  std::vector<double> dh(d.b * d.h, 0.0), dp, p;
  for (int64_t s = 0; s < d.t; ++s) {
    int64_t t = d.step(d.t - 1 - s, reverse);
    const double *hPrev = before(d, y, h0, t, reverse);
    if (recompute)
      recurrent(d, hPrev, r, p);
    dp.assign(d.b * 3 * d.h, 0.0);
    for (int64_t b = 0; b < d.b; ++b)
      for (int64_t j = 0; j < d.h; ++j) {
        double z, rg, n, pn;
        if (recompute) {
          const double *x = gates.fp.data() + (t * d.b + b) * 3 * d.h + j;
          auto pAt = [&](int64_t g) {
            return p[b * 3 * d.h + g * d.h + j] + in[5].fp[g * d.h + j];
          };
          z = sigmoid(x[0] + pAt(0));
          rg = sigmoid(x[d.h] + pAt(1));
          pn = pAt(2);
          n = std::tanh(x[2 * d.h] + rg * pn);
        } else {
          const double *g = gates.fp.data() + (t * d.b + b) * 4 * d.h + j;
          z = g[0];
          rg = g[d.h];
          n = g[2 * d.h];
          pn = g[3 * d.h];
        }
        double dhh = dy.fp[(t * d.b + b) * d.h + j] + dh[b * d.h + j];
        double dan = dhh * (1 - z) * (1 - n * n);
        double daz = dhh * (hPrev[b * d.h + j] - n) * z * (1 - z);
        double dar = dan * pn * rg * (1 - rg);
        int64_t row = (t * d.b + b) * 3 * d.h + j;
        out[0].fp[row] = round(daz);
        out[0].fp[row + d.h] = round(dar);
        out[0].fp[row + 2 * d.h] = round(dan);
        double *dpRow = dp.data() + b * 3 * d.h + j;
        dpRow[0] = daz;
        dpRow[d.h] = dar;
        dpRow[2 * d.h] = dan * rg;
        for (int64_t g3 = 0; g3 < 3; ++g3)
          out[1].fp[row + g3 * d.h] = round(dpRow[g3 * d.h]);
        dh[b * d.h + j] = dhh * z;
      }
    backRecurrent(d, dp, r, dh);
  }
  for (int64_t k = 0; k < d.b * d.h; ++k)
    out[2].fp[k] = round(dh[k]);
  return out;
}

} // namespace

std::optional<SmallVector<Tensor>>
weft::eval::detail::evaluateRecurrentOp(Operation *op,
                                        ArrayRef<Tensor> operands) {
  return llvm::TypeSwitch<Operation *, std::optional<SmallVector<Tensor>>>(op)
      .Case([&](LstmOp lstm) { return evalLstm(lstm, operands); })
      .Case([&](LstmGradOp grad) { return evalLstmGrad(grad, operands); })
      .Case([&](GruOp gru) { return evalGru(gru, operands); })
      .Case([&](GruGradOp grad) { return evalGruGrad(grad, operands); })
      .Default([](Operation *) { return std::nullopt; });
}
