//===- Einsum.cpp - ONNX Einsum as transposes, reshapes and matmuls -------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Einsum has no op of its own: after parsing the equation, operands are
// contracted left to right, two at a time, each pair as one batched
// weft.matmul between transposes and reshapes (a weft.mul when nothing is
// summed), and labels no later operand
// or the output needs are summed out with weft.reduce_sum first. Gradients,
// sharding rules and lowering are then those of matmul, transpose, reshape
// and reduce_sum; the batch dimension of a model stays a matmul batch
// dimension, so data parallelism splits it as for any matmul.
//
// Supported: any number of operands, explicit or implicit output, `...`
// (broadcast dimensions, aligned from the right as in numpy), size-1
// dimensions broadcast against the same label elsewhere, and a label
// repeated within one float operand (a diagonal `ii->i`, or a trace `ii`),
// taken by masking with an identity and summing.
//
//===----------------------------------------------------------------------===//

#include "Legalizers.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <map>

using namespace mlir;
using namespace weft;
using namespace weft::onnxtoweft;

namespace {

/// A label: a letter's character code, or kEllipsisBase + i for the i-th
/// broadcast dimension of `...`, counted over the widest ellipsis.
using Label = int;
constexpr Label kEllipsisBase = 256;

/// One operand's term of the equation.
struct Term {
  std::string letters; // Letters before and after `...`, in order.
  int ellipsisAt = -1; // Position of `...` among the letters, -1 if absent.
};

struct Operand {
  Value value;
  SmallVector<Label> labels;
};

class EinsumLegalizer {
public:
  EinsumLegalizer(LegalizeContext &ctx, std::string equation)
      : ctx(ctx), equation(std::move(equation)) {}

  LegalizeResult run(ArrayRef<Value> inputs);

private:
  LegalizeContext &ctx;
  std::string equation;
  std::map<Label, int64_t> sizes;

  InFlightDiagnostic error() {
    return ctx.emitError() << "equation '" << equation << "': ";
  }
  FailureOr<Term> parseTerm(StringRef text, StringRef what);
  FailureOr<SmallVector<Label>> labelsOf(const Term &term, int64_t rank,
                                         int64_t ellipsisRank, StringRef what);
  FailureOr<Operand> sumOut(Operand x, ArrayRef<Label> needed);
  FailureOr<Operand> takeDiagonals(Operand x, StringRef what);
  FailureOr<Operand> permute(Operand x, ArrayRef<Label> order);
  FailureOr<Operand> contract(Operand a, Operand b, ArrayRef<Label> needed);
  SmallVector<int64_t> sizesOf(ArrayRef<Label> labels) {
    return llvm::map_to_vector(labels, [&](Label l) { return sizes[l]; });
  }
};

FailureOr<Term> EinsumLegalizer::parseTerm(StringRef text, StringRef what) {
  Term term;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.substr(i).starts_with("...")) {
      if (term.ellipsisAt >= 0)
        return error() << what << " has more than one '...'";
      term.ellipsisAt = term.letters.size();
      i += 2;
      continue;
    }
    if (!llvm::isAlpha(text[i]))
      return error() << what << " has '" << text[i]
                     << "', expected letters and '...'";
    term.letters.push_back(text[i]);
  }
  return term;
}

FailureOr<SmallVector<Label>> EinsumLegalizer::labelsOf(const Term &term,
                                                        int64_t rank,
                                                        int64_t ellipsisRank,
                                                        StringRef what) {
  int64_t letters = term.letters.size();
  int64_t covered = term.ellipsisAt >= 0 ? rank - letters : 0;
  if (covered < 0 || (term.ellipsisAt < 0 && rank != letters))
    return error() << what << " names " << letters
                   << " dimensions but has rank " << rank;
  SmallVector<Label> labels;
  for (int64_t i = 0; i < letters; ++i) {
    if (i == term.ellipsisAt)
      for (int64_t e = ellipsisRank - covered; e < ellipsisRank; ++e)
        labels.push_back(kEllipsisBase + e);
    labels.push_back(static_cast<unsigned char>(term.letters[i]));
  }
  if (term.ellipsisAt == letters)
    for (int64_t e = ellipsisRank - covered; e < ellipsisRank; ++e)
      labels.push_back(kEllipsisBase + e);
  return labels;
}

/// Sums `x` over its labels not in `needed`.
FailureOr<Operand> EinsumLegalizer::sumOut(Operand x, ArrayRef<Label> needed) {
  SmallVector<int64_t> axes;
  Operand kept{x.value, {}};
  for (auto [d, label] : llvm::enumerate(x.labels)) {
    if (llvm::is_contained(needed, label))
      kept.labels.push_back(label);
    else
      axes.push_back(d);
  }
  if (axes.empty())
    return x;
  FailureOr<Value> sum =
      ctx.create<ReduceSumOp>({x.value}, {ctx.arrayAttr("axes", axes),
                                          ctx.boolAttr("keep_dims", false)});
  if (failed(sum))
    return failure();
  kept.value = *sum;
  return kept;
}

/// `x` with each label that repeats in it (`ii->i`, a diagonal) kept once:
/// the elements whose repeated indices differ are masked to zero by an
/// identity and summed away, so only matmul-style ops (mul, reduce_sum)
/// are involved and their gradients apply unchanged.
FailureOr<Operand> EinsumLegalizer::takeDiagonals(Operand x, StringRef what) {
  for (;;) {
    ArrayRef<int64_t> shape = shapeOf(x.value);
    std::optional<std::pair<size_t, size_t>> pair;
    for (size_t p = 0; p < x.labels.size() && !pair; ++p)
      for (size_t q = p + 1; q < x.labels.size() && !pair; ++q)
        if (x.labels[p] == x.labels[q])
          pair = {p, q};
    if (!pair)
      return x;
    auto [p, q] = *pair;
    if (shape[p] != shape[q])
      return error() << "label '" << static_cast<char>(x.labels[p])
                     << "' repeats in " << what << " over dimensions of sizes "
                     << shape[p] << " and " << shape[q];
    auto floatType = dyn_cast<FloatType>(elementTypeOf(x.value));
    if (!floatType)
      return error() << "label '" << static_cast<char>(x.labels[p])
                     << "' repeats in " << what
                     << " (a diagonal), which needs a float operand";
    int64_t n = shape[p];
    SmallVector<int64_t> maskShape(shape.size(), 1);
    maskShape[p] = maskShape[q] = n;
    SmallVector<Attribute> eye(n * n, FloatAttr::get(floatType, 0.0));
    for (int64_t i = 0; i < n; ++i)
      eye[i * n + i] = FloatAttr::get(floatType, 1.0);
    FailureOr<Value> mask = ctx.constant(DenseElementsAttr::get(
        RankedTensorType::get(maskShape, floatType), eye));
    if (failed(mask))
      return failure();
    FailureOr<Value> masked = ctx.create<MulOp>({x.value, *mask});
    if (failed(masked))
      return failure();
    FailureOr<Value> diagonal = ctx.create<ReduceSumOp>(
        {*masked}, {ctx.arrayAttr("axes", {static_cast<int64_t>(q)}),
                    ctx.boolAttr("keep_dims", false)});
    if (failed(diagonal))
      return failure();
    x.value = *diagonal;
    x.labels.erase(x.labels.begin() + q);
  }
}

/// `x` with its dimensions in the order of `order` (its labels permuted).
FailureOr<Operand> EinsumLegalizer::permute(Operand x, ArrayRef<Label> order) {
  if (ArrayRef<Label>(x.labels) == order)
    return x;
  SmallVector<int64_t> perm = llvm::map_to_vector(order, [&](Label l) {
    return static_cast<int64_t>(llvm::find(x.labels, l) - x.labels.begin());
  });
  FailureOr<Value> t =
      ctx.create<TransposeOp>({x.value}, {ctx.arrayAttr("permutation", perm)});
  if (failed(t))
    return failure();
  return Operand{*t, SmallVector<Label>(order)};
}

/// `a` times `b` summed over the labels they share that `needed` lacks:
/// [batch, a-only, shared] x [batch, shared, b-only] as one matmul of
/// [B, M, K] by [B, K, N], whose result is [batch, a-only, b-only].
FailureOr<Operand> EinsumLegalizer::contract(Operand a, Operand b,
                                             ArrayRef<Label> needed) {
  SmallVector<Label> neededA(needed), neededB(needed);
  llvm::append_range(neededA, b.labels);
  llvm::append_range(neededB, a.labels);
  FailureOr<Operand> sa = sumOut(a, neededA), sb = sumOut(b, neededB);
  if (failed(sa) || failed(sb))
    return failure();
  SmallVector<Label> batch, summed, onlyA, onlyB;
  for (Label l : sa->labels) {
    if (!llvm::is_contained(sb->labels, l))
      onlyA.push_back(l);
    else if (llvm::is_contained(needed, l))
      batch.push_back(l);
    else
      summed.push_back(l);
  }
  for (Label l : sb->labels)
    if (!llvm::is_contained(sa->labels, l))
      onlyB.push_back(l);
  Operand result{Value(), batch};
  llvm::append_range(result.labels, onlyA);
  llvm::append_range(result.labels, onlyB);
  // Nothing to sum: an outer (or elementwise) product, a broadcasting mul
  // of [batch, a-only, 1...] and [batch, 1..., b-only].
  if (summed.empty()) {
    SmallVector<Label> orderA(batch), orderB(batch);
    llvm::append_range(orderA, onlyA);
    llvm::append_range(orderB, onlyB);
    FailureOr<Operand> pa = permute(*sa, orderA);
    if (failed(pa))
      return failure();
    FailureOr<Operand> pb = permute(*sb, orderB);
    if (failed(pb))
      return failure();
    SmallVector<int64_t> shapeA = sizesOf(orderA), shapeB = sizesOf(batch);
    shapeA.append(onlyB.size(), 1);
    shapeB.append(onlyA.size(), 1);
    llvm::append_range(shapeB, sizesOf(onlyB));
    FailureOr<Value> lhs = ctx.reshape(pa->value, shapeA);
    if (failed(lhs))
      return failure();
    FailureOr<Value> rhs = ctx.reshape(pb->value, shapeB);
    if (failed(rhs))
      return failure();
    FailureOr<Value> product = make<MulOp>(ctx, *lhs, *rhs);
    if (failed(product))
      return failure();
    result.value = *product;
    return result;
  }
  int64_t bs = product(sizesOf(batch)), m = product(sizesOf(onlyA)),
          k = product(sizesOf(summed)), n = product(sizesOf(onlyB));
  auto matrix = [&](Operand x, ArrayRef<Label> rows, ArrayRef<Label> cols,
                    int64_t r, int64_t c) -> FailureOr<Value> {
    SmallVector<Label> order(batch);
    llvm::append_range(order, rows);
    llvm::append_range(order, cols);
    FailureOr<Operand> p = permute(x, order);
    if (failed(p))
      return failure();
    SmallVector<int64_t> shape = {r, c};
    if (!batch.empty())
      shape.insert(shape.begin(), bs);
    return ctx.reshape(p->value, shape);
  };
  FailureOr<Value> lhs = matrix(*sa, onlyA, summed, m, k);
  if (failed(lhs))
    return failure();
  FailureOr<Value> rhs = matrix(*sb, summed, onlyB, k, n);
  if (failed(rhs))
    return failure();
  FailureOr<Value> product = ctx.create<MatMulOp>({*lhs, *rhs});
  if (failed(product))
    return failure();
  FailureOr<Value> shaped = ctx.reshape(*product, sizesOf(result.labels));
  if (failed(shaped))
    return failure();
  result.value = *shaped;
  return result;
}

LegalizeResult EinsumLegalizer::run(ArrayRef<Value> inputs) {
  std::string compact;
  for (char c : equation)
    if (!llvm::isSpace(c))
      compact.push_back(c);
  StringRef text(compact);
  auto [lhs, rhs] = text.split("->");
  bool explicitOutput = text.contains("->");
  SmallVector<StringRef> termTexts;
  lhs.split(termTexts, ',');
  if (termTexts.size() != inputs.size())
    return error() << "it has " << termTexts.size() << " operand terms but the "
                   << "node has " << inputs.size() << " inputs";

  SmallVector<Term> terms;
  int64_t ellipsisRank = 0;
  for (auto [i, t] : llvm::enumerate(termTexts)) {
    FailureOr<Term> term = parseTerm(t, "operand " + std::to_string(i));
    if (failed(term))
      return failure();
    if (term->ellipsisAt >= 0)
      ellipsisRank = std::max<int64_t>(
          ellipsisRank, static_cast<int64_t>(shapeOf(inputs[i]).size()) -
                            static_cast<int64_t>(term->letters.size()));
    terms.push_back(*term);
  }

  // Labels, their sizes, and how often each occurs across the operands.
  SmallVector<Operand> operands;
  std::map<Label, int> occurrences;
  for (auto [i, term] : llvm::enumerate(terms)) {
    std::string what = "operand " + std::to_string(i);
    ArrayRef<int64_t> shape = shapeOf(inputs[i]);
    FailureOr<SmallVector<Label>> labels =
        labelsOf(term, shape.size(), ellipsisRank, what);
    if (failed(labels))
      return failure();
    for (auto [d, label] : llvm::enumerate(*labels)) {
      // A label repeated within the operand counts twice, so numpy's
      // implicit output sums it away (`ii`, a trace).
      ++occurrences[label];
      int64_t &size = sizes.try_emplace(label, shape[d]).first->second;
      if (size == 1)
        size = shape[d];
      else if (shape[d] != size && shape[d] != 1)
        return error() << "dimension " << d << " of " << what << " has size "
                       << shape[d] << " but its label has size " << size
                       << " elsewhere";
    }
    FailureOr<Operand> distinct = takeDiagonals({inputs[i], *labels}, what);
    if (failed(distinct))
      return failure();
    operands.push_back(*distinct);
  }

  SmallVector<Label> output;
  if (explicitOutput) {
    FailureOr<Term> term = parseTerm(rhs, "the output");
    if (failed(term))
      return failure();
    if (term->ellipsisAt < 0 && ellipsisRank > 0)
      return error() << "the output drops the '...' dimensions; summing over "
                        "them is not supported";
    FailureOr<SmallVector<Label>> labels = labelsOf(
        *term,
        term->letters.size() + (term->ellipsisAt >= 0 ? ellipsisRank : 0),
        ellipsisRank, "the output");
    if (failed(labels))
      return failure();
    for (Label l : *labels) {
      if (llvm::count(*labels, l) > 1)
        return error() << "label '" << static_cast<char>(l)
                       << "' repeats in the output";
      if (!occurrences.count(l))
        return error() << "output label '" << static_cast<char>(l)
                       << "' appears in no operand";
    }
    output = *labels;
  } else {
    // numpy's implicit output: the broadcast dimensions, then the letters
    // that occur once, alphabetically.
    for (int64_t e = 0; e < ellipsisRank; ++e)
      output.push_back(kEllipsisBase + e);
    for (auto [label, count] : occurrences)
      if (label < kEllipsisBase && count == 1)
        output.push_back(label);
  }

  // A size-1 dimension whose label is larger elsewhere stretches first.
  for (Operand &x : operands) {
    SmallVector<int64_t> full = sizesOf(x.labels);
    if (ArrayRef<int64_t>(full) == shapeOf(x.value))
      continue;
    FailureOr<Value> b = ctx.create<BroadcastOp>(
        {x.value}, {}, RankedTensorType::get(full, elementTypeOf(x.value)));
    if (failed(b))
      return failure();
    x.value = *b;
  }

  Operand acc = operands.front();
  for (size_t i = 1; i < operands.size(); ++i) {
    SmallVector<Label> needed(output);
    for (size_t j = i + 1; j < operands.size(); ++j)
      llvm::append_range(needed, operands[j].labels);
    FailureOr<Operand> next = contract(acc, operands[i], needed);
    if (failed(next))
      return failure();
    acc = *next;
  }
  FailureOr<Operand> reduced = sumOut(acc, output);
  if (failed(reduced))
    return failure();
  FailureOr<Operand> result = permute(*reduced, output);
  if (failed(result))
    return failure();
  return SmallVector<Value>{result->value};
}

LegalizeResult legalizeEinsum(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  std::string equation;
  if (!ctx.hasAttr("equation"))
    return ctx.emitError() << "attribute 'equation' is required";
  if (failed(ctx.getString("equation", equation)))
    return failure();
  FailureOr<SmallVector<Value>> inputs = ctx.getVariadicTensors();
  if (failed(inputs))
    return failure();
  if (inputs->empty())
    return ctx.emitError() << "needs at least one input";
  return EinsumLegalizer(ctx, equation).run(*inputs);
}

} // namespace

void weft::onnxtoweft::populateEinsumLegalizers(LegalizerRegistry &registry) {
  registry.add("Einsum", 12, kMaxOpset, legalizeEinsum);
}
