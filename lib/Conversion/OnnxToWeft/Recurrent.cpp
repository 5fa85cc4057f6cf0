//===- Recurrent.cpp - ONNX LSTM and GRU to weft --------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// One weft.lstm / weft.gru per direction. What does not depend on the
// previous step leaves the loop: the input projection x W^T (+ biases) is
// one matmul over all T * B rows before it, so only `h @ R^T` and the gates
// run per step. Outputs are assembled as ONNX lays them out: Y is
// [T, directions, B, H] (a reverse direction's Y is in time order too),
// Y_h and Y_c are the states after each direction's last step.
//
// What PyTorch's nn.LSTM / nn.GRU export is supported: default
// activations, no clip, layout 0 (batch_first is a Transpose around the
// node), no peepholes, sequence_lens absent or all T, and for GRU
// linear_before_reset = 1. Anything else is refused naming the node and
// the attribute.
//
//===----------------------------------------------------------------------===//

#include "Legalizers.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace weft;
using namespace weft::onnxtoweft;

namespace {

enum class Cell { Lstm, Gru };

struct Recurrence {
  Cell cell;
  int64_t gates() const { return cell == Cell::Lstm ? 4 : 3; }
  StringRef name() const { return cell == Cell::Lstm ? "LSTM" : "GRU"; }
};

/// Refuses the attributes and inputs PyTorch never sets, whose semantics
/// the weft ops do not implement.
LogicalResult checkSupported(LegalizeContext &ctx, Recurrence rnn,
                             int64_t directions, int64_t steps) {
  if (Attribute attr = ctx.getAttr("activations")) {
    SmallVector<StringRef> defaults =
        rnn.cell == Cell::Lstm
            ? SmallVector<StringRef>{"Sigmoid", "Tanh", "Tanh"}
            : SmallVector<StringRef>{"Sigmoid", "Tanh"};
    auto list = dyn_cast<ArrayAttr>(attr);
    bool isDefault = list && list.size() == defaults.size() * directions;
    for (unsigned i = 0; isDefault && i < list.size(); ++i) {
      auto s = dyn_cast<StringAttr>(list[i]);
      isDefault =
          s && s.getValue().equals_insensitive(defaults[i % defaults.size()]);
    }
    if (!isDefault) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << attr;
      return ctx.unsupportedAttr("activations", text,
                                 llvm::join(defaults, ", ") + " per direction");
    }
  }
  for (StringRef name : {"activation_alpha", "activation_beta", "clip"})
    if (ctx.hasAttr(name))
      return ctx.emitError()
             << "attribute '" << name << "' is not supported (weft's "
             << rnn.name() << " has default activations and no clipping)";
  int64_t layout = 0, inputForget = 0, linearBeforeReset = 0;
  if (failed(ctx.getInt("layout", layout)) ||
      failed(ctx.getInt("input_forget", inputForget)) ||
      failed(ctx.getInt("linear_before_reset", linearBeforeReset)))
    return failure();
  if (layout != 0)
    return ctx.unsupportedAttr("layout", std::to_string(layout),
                               "0, [T, B, ...]; PyTorch's batch_first "
                               "exports a Transpose instead");
  if (inputForget != 0)
    return ctx.unsupportedAttr("input_forget", std::to_string(inputForget),
                               "0");
  if (rnn.cell == Cell::Gru && linearBeforeReset != 1)
    return ctx.unsupportedAttr("linear_before_reset",
                               std::to_string(linearBeforeReset),
                               "1, as PyTorch's nn.GRU exports");
  if (rnn.cell == Cell::Lstm && ctx.hasInput(7))
    return ctx.emitError() << "input 7 (P, peepholes) is not supported";
  if (ctx.hasInput(4)) {
    FailureOr<SmallVector<int64_t>> lens = ctx.getConstInts(4, "sequence_lens");
    if (failed(lens))
      return failure();
    for (int64_t len : *lens)
      if (len != steps)
        return ctx.emitError()
               << "input 4 (sequence_lens) holds " << formatList(*lens)
               << "; only sequences of the full length " << steps
               << " are supported";
  }
  return success();
}

/// `v[d]` of a tensor with a leading directions axis, without that axis.
FailureOr<Value> direction(LegalizeContext &ctx, Value v, int64_t d) {
  ArrayRef<int64_t> shape = shapeOf(v);
  SmallVector<int64_t> starts(shape.size(), 0), limits(shape),
      strides(shape.size(), 1);
  starts[0] = d;
  limits[0] = d + 1;
  FailureOr<Value> slice = ctx.create<SliceOp>(
      {v}, {ctx.arrayAttr("starts", starts), ctx.arrayAttr("limits", limits),
            ctx.arrayAttr("strides", strides)});
  if (failed(slice))
    return failure();
  return ctx.reshape(*slice, shape.drop_front());
}

/// Elements `[begin, end)` of a 1-D tensor.
FailureOr<Value> range(LegalizeContext &ctx, Value v, int64_t begin,
                       int64_t end) {
  return ctx.create<SliceOp>({v}, {ctx.arrayAttr("starts", {begin}),
                                   ctx.arrayAttr("limits", {end}),
                                   ctx.arrayAttr("strides", {1})});
}

FailureOr<Value> zeros(LegalizeContext &ctx, ArrayRef<int64_t> shape,
                       Type elementType) {
  auto type = RankedTensorType::get(shape, elementType);
  return ctx.constant(
      DenseElementsAttr::get(type, ctx.builder.getFloatAttr(elementType, 0.0)));
}

/// Initial state `d` ([B, H]) from input `index`, zeros when absent.
FailureOr<Value> initialState(LegalizeContext &ctx, unsigned index,
                              StringRef what, int64_t d,
                              ArrayRef<int64_t> expected, Type elementType) {
  if (!ctx.hasInput(index))
    return zeros(ctx, expected.drop_front(), elementType);
  FailureOr<TypedValue<RankedTensorType>> v = ctx.getTensor(index, what);
  if (failed(v))
    return failure();
  if (shapeOf(*v) != expected)
    return ctx.emitError() << "input " << index << " (" << what << ") must be "
                           << formatList(expected) << ", got "
                           << formatList(shapeOf(*v));
  return direction(ctx, *v, d);
}

LegalizeResult legalizeRecurrence(LegalizeContext &ctx, Recurrence rnn) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X", "W", "R"});
  if (failed(in))
    return failure();
  Value x = (*in)[0], w = (*in)[1], r = (*in)[2];
  std::string dir = "forward";
  int64_t hiddenSize = -1;
  if (failed(ctx.getString("direction", dir)) ||
      failed(ctx.getInt("hidden_size", hiddenSize)))
    return failure();
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return ctx.unsupportedAttr("direction", dir,
                               "forward, reverse, bidirectional");
  int64_t directions = dir == "bidirectional" ? 2 : 1;
  ArrayRef<int64_t> xs = shapeOf(x), ws = shapeOf(w), rs = shapeOf(r);
  if (xs.size() != 3)
    return ctx.emitError() << "input 0 (X) must be [T, B, input_size], got "
                           << formatList(xs);
  int64_t steps = xs[0], batch = xs[1], inputs = xs[2];
  int64_t h = rs.size() == 3 ? rs[2] : -1, g = rnn.gates();
  if (rs.size() != 3 || rs[0] != directions || rs[1] != g * h)
    return ctx.emitError() << "input 2 (R) must be [" << directions << ", " << g
                           << "H, H], got " << formatList(rs);
  if (hiddenSize >= 0 && hiddenSize != h)
    return ctx.emitError() << "hidden_size = " << hiddenSize
                           << " disagrees with R " << formatList(rs);
  if (ws != ArrayRef<int64_t>{directions, g * h, inputs})
    return ctx.emitError() << "input 1 (W) must be "
                           << formatList({directions, g * h, inputs})
                           << ", got " << formatList(ws);
  if (steps < 1)
    return ctx.emitError() << "the sequence is empty: X is " << formatList(xs);
  if (failed(checkSupported(ctx, rnn, directions, steps)))
    return failure();
  Type elementType = elementTypeOf(x);
  Value bias;
  if (ctx.hasInput(3)) {
    FailureOr<TypedValue<RankedTensorType>> b = ctx.getTensor(3, "B");
    if (failed(b))
      return failure();
    if (shapeOf(*b) != ArrayRef<int64_t>{directions, 2 * g * h})
      return ctx.emitError()
             << "input 3 (B) must be " << formatList({directions, 2 * g * h})
             << ", got " << formatList(shapeOf(*b));
    bias = *b;
  }
  SmallVector<int64_t> stateShape = {directions, batch, h};

  SmallVector<Value> ys, lastHidden, lastCell;
  for (int64_t d = 0; d < directions; ++d) {
    bool reverse = dir == "reverse" || d == 1;
    FailureOr<Value> wd = direction(ctx, w, d);
    FailureOr<Value> rd = direction(ctx, r, d);
    if (failed(wd) || failed(rd))
      return failure();
    FailureOr<Value> gatesIn =
        ctx.create<MatMulOp>({x, *wd}, {ctx.boolAttr("transpose_rhs", true)});
    if (failed(gatesIn))
      return failure();
    FailureOr<Value> recurrentBias;
    if (bias) {
      FailureOr<Value> bd = direction(ctx, bias, d);
      if (failed(bd))
        return failure();
      FailureOr<Value> wb = range(ctx, *bd, 0, g * h);
      recurrentBias = range(ctx, *bd, g * h, 2 * g * h);
      if (failed(wb) || failed(recurrentBias))
        return failure();
      // The LSTM's two biases add to the same pre-activation; the GRU's
      // recurrent one is scaled by the reset gate inside the loop.
      FailureOr<Value> added = rnn.cell == Cell::Lstm
                                   ? make<AddOp>(ctx, *wb, *recurrentBias)
                                   : FailureOr<Value>(*wb);
      gatesIn = make<AddOp>(ctx, *gatesIn, added);
    } else {
      recurrentBias = zeros(ctx, {g * h}, elementType);
    }
    FailureOr<Value> h0 =
        initialState(ctx, 5, "initial_h", d, stateShape, elementType);
    if (failed(gatesIn) || failed(recurrentBias) || failed(h0))
      return failure();
    FailureOr<SmallVector<Value>> results;
    SmallVector<NamedAttribute> attrs = {ctx.boolAttr("reverse", reverse)};
    if (rnn.cell == Cell::Lstm) {
      FailureOr<Value> c0 =
          initialState(ctx, 6, "initial_c", d, stateShape, elementType);
      if (failed(c0))
        return failure();
      results = ctx.buildResults(LstmOp::getOperationName(),
                                 {*gatesIn, *rd, *h0, *c0}, attrs, 3);
    } else {
      results =
          ctx.buildResults(GruOp::getOperationName(),
                           {*gatesIn, *rd, *recurrentBias, *h0}, attrs, 2);
    }
    if (failed(results))
      return failure();
    // The state after the direction's last step.
    int64_t last = reverse ? 0 : steps - 1;
    auto final = [&](Value states) {
      return ctx.create<SliceOp>({states},
                                 {ctx.arrayAttr("starts", {last, 0, 0}),
                                  ctx.arrayAttr("limits", {last + 1, batch, h}),
                                  ctx.arrayAttr("strides", {1, 1, 1})});
    };
    FailureOr<Value> y = ctx.reshape((*results)[0], {steps, 1, batch, h});
    FailureOr<Value> yh = final((*results)[0]);
    if (failed(y) || failed(yh))
      return failure();
    ys.push_back(*y);
    lastHidden.push_back(*yh);
    if (rnn.cell == Cell::Lstm) {
      FailureOr<Value> yc = final((*results)[1]);
      if (failed(yc))
        return failure();
      lastCell.push_back(*yc);
    }
  }

  auto join = [&](ArrayRef<Value> parts, int64_t axis) -> FailureOr<Value> {
    if (parts.size() == 1)
      return parts.front();
    return ctx.create<ConcatOp>(parts, {ctx.i64Attr("axis", axis)});
  };
  SmallVector<Value> outputs;
  for (auto [parts, axis] :
       {std::pair(ArrayRef<Value>(ys), int64_t{1}),
        std::pair(ArrayRef<Value>(lastHidden), int64_t{0}),
        std::pair(ArrayRef<Value>(lastCell), int64_t{0})}) {
    if (parts.empty())
      continue;
    FailureOr<Value> joined = join(parts, axis);
    if (failed(joined))
      return failure();
    outputs.push_back(*joined);
  }
  return outputs;
}

} // namespace

void weft::onnxtoweft::populateRecurrentLegalizers(
    LegalizerRegistry &registry) {
  registry.add("LSTM", 7, kMaxOpset,
               [](LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
                 return legalizeRecurrence(ctx, {Cell::Lstm});
               });
  registry.add("GRU", 7, kMaxOpset,
               [](LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
                 return legalizeRecurrence(ctx, {Cell::Gru});
               });
}
