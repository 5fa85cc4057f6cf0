//===- FuseAttention.cpp - The attention chain as one weft.attention ------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// --weft-fuse-attention: matches matmul -> scale -> causal_mask -> softmax
// -> matmul backwards from each softmax and replaces the chain by
// weft.attention (see the pass description in Passes.td for what matches
// and why a near miss does not).
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Transforms/Train/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"

#include <cmath>

namespace weft {
#define GEN_PASS_DEF_FUSEATTENTIONPASS
#include "weft/Transforms/Train/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// A matched chain: the values it reads and the ops it replaces (last
/// first, so that they can be erased in that order).
struct Chain {
  Value query, keyT, value;
  bool keyTransposed = false; // keyT is k^T (else k itself).
  bool valueTransposed = false;
  double scale = 1.0;
  bool causal = false;
  MatMulOp output;
  SmallVector<Operation *> ops;
};

/// The value of a splat f32 constant holding one element per broadcast
/// (rank 0, or all sizes 1).
std::optional<double> scalarConstant(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  if (llvm::any_of(attr.getType().getShape(), [](int64_t d) { return d != 1; }))
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}

bool hasOneUse(Operation *op) { return op->getResult(0).hasOneUse(); }

/// The chain whose softmax is `softmax`, or std::nullopt. Its element type
/// is f32, or bf16 where `bf16` allows it.
std::optional<Chain> matchChain(SoftmaxOp softmax, bool bf16) {
  Chain chain;
  auto type = cast<RankedTensorType>(softmax.getType());
  Type elementType = type.getElementType();
  int64_t rank = type.getRank();
  if (rank < 2 || static_cast<int64_t>(softmax.getAxis()) != rank - 1 ||
      !(elementType.isF32() || (bf16 && elementType.isBF16())) ||
      !hasOneUse(softmax))
    return std::nullopt;
  auto output = dyn_cast<MatMulOp>(*softmax->getUsers().begin());
  if (!output || output.getLhs() != softmax.getResult() ||
      output.getTransposeLhs())
    return std::nullopt;
  chain.output = output;
  chain.value = output.getRhs();
  chain.valueTransposed = output.getTransposeRhs();
  chain.ops = {output, softmax};

  Value scores = softmax.getInput();
  if (auto mask = scores.getDefiningOp<CausalMaskOp>()) {
    if (mask.getDiagonal() != 0 || !std::isinf(mask.getFill().convertToDouble()) ||
        mask.getFill().convertToDouble() > 0 || !hasOneUse(mask))
      return std::nullopt;
    chain.causal = true;
    chain.ops.push_back(mask);
    scores = mask.getInput();
  }
  if (auto mul = scores.getDefiningOp<MulOp>()) {
    std::optional<double> c = scalarConstant(mul.getRhs());
    Value other = mul.getLhs();
    if (!c) {
      c = scalarConstant(mul.getLhs());
      other = mul.getRhs();
    }
    if (!c || !hasOneUse(mul) || other.getType() != mul.getType())
      return std::nullopt;
    chain.scale = *c;
    chain.ops.push_back(mul);
    scores = other;
  } else if (auto div = scores.getDefiningOp<DivOp>()) {
    std::optional<double> c = scalarConstant(div.getRhs());
    if (!c || *c == 0 || !hasOneUse(div) ||
        div.getLhs().getType() != div.getType())
      return std::nullopt;
    chain.scale = 1.0 / *c;
    chain.ops.push_back(div);
    scores = div.getLhs();
  }
  if (!(chain.scale > 0) || !std::isfinite(chain.scale))
    return std::nullopt;
  auto product = scores.getDefiningOp<MatMulOp>();
  if (!product || product.getTransposeLhs() || !hasOneUse(product))
    return std::nullopt;
  chain.ops.push_back(product);
  chain.query = product.getLhs();
  chain.keyT = product.getRhs();
  chain.keyTransposed = !product.getTransposeRhs();

  // No broadcast batch: q, k and v have the same rank and leading axes.
  // One element type: the kernels do not convert.
  auto lead = [&](Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    return t.getRank() == rank ? SmallVector<int64_t>(t.getShape().drop_back(2))
                               : SmallVector<int64_t>{-1};
  };
  SmallVector<int64_t> q = lead(chain.query);
  if (q != lead(chain.keyT) || q != lead(chain.value) ||
      q != lead(output.getResult()))
    return std::nullopt;
  for (Value v : {chain.query, chain.keyT, chain.value,
                  Value(output.getResult()), Value(product.getResult())})
    if (cast<RankedTensorType>(v.getType()).getElementType() != elementType)
      return std::nullopt;
  return chain;
}

/// `v` with its last two axes swapped; a weft.transpose producer is
/// composed into one transpose (or none, when that is the identity). A
/// new transpose gets the pipeline `stage`, if any.
Value swapLastTwo(OpBuilder &b, Location loc, Value v, Attribute stage) {
  int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  if (auto inner = v.getDefiningOp<TransposeOp>()) {
    ArrayRef<int64_t> p = inner.getPermutation();
    for (int64_t &x : perm)
      x = p[x];
    v = inner.getInput();
  }
  if (llvm::equal(perm, llvm::seq<int64_t>(0, rank)))
    return v;
  auto transpose = TransposeOp::create(b, loc, v, perm);
  if (stage)
    transpose->setAttr(WeftDialect::kStageAttrName, stage);
  return transpose;
}

/// Score elements of one (batch, head): T x S.
int64_t scoresPerHead(const Chain &chain) {
  auto q = cast<RankedTensorType>(chain.query.getType());
  auto kt = cast<RankedTensorType>(chain.keyT.getType());
  int64_t s = kt.getDimSize(kt.getRank() - (chain.keyTransposed ? 1 : 2));
  return q.getDimSize(q.getRank() - 2) * s;
}

/// The wider of the query/key width D and the value width Dv.
int64_t headDim(Chain &chain) {
  auto q = cast<RankedTensorType>(chain.query.getType());
  return std::max(q.getShape().back(),
                  chain.output.getType().getShape().back());
}

struct FuseAttentionPass
    : public weft::impl::FuseAttentionPassBase<FuseAttentionPass> {
  using Base::Base;

  void runOnOperation() override {
    if (mode != "on" && mode != "off" && mode != "auto") {
      getOperation().emitError()
          << "--weft-fuse-attention: mode must be on, off or auto, got '"
          << mode << "'";
      return signalPassFailure();
    }
    if (minScores < 0 || maxHeadDim < 0) {
      getOperation().emitError()
          << "--weft-fuse-attention: min-scores and max-head-dim must be "
             ">= 0, got "
          << static_cast<int64_t>(minScores) << " and "
          << static_cast<int64_t>(maxHeadDim);
      return signalPassFailure();
    }
    if (mode == "off")
      return;
    SmallVector<SoftmaxOp> softmaxes;
    getOperation().walk([&](SoftmaxOp op) { softmaxes.push_back(op); });
    for (SoftmaxOp softmax : softmaxes) {
      std::optional<Chain> chain = matchChain(softmax, bf16);
      if (!chain || (mode == "auto" && scoresPerHead(*chain) < minScores) ||
          (maxHeadDim > 0 && headDim(*chain) > maxHeadDim))
        continue;
      fuse(*chain);
    }
  }

  void fuse(Chain &chain) {
    // A pipeline stage (--weft-assign-stages ran on the model) goes to the
    // ops that replace the chain; a chain cut between stages stays.
    Attribute stage = chain.output->getAttr(WeftDialect::kStageAttrName);
    for (Operation *op : chain.ops)
      if (op->getAttr(WeftDialect::kStageAttrName) != stage)
        return;
    OpBuilder b(chain.output);
    Location loc = chain.output.getLoc();
    Value key = chain.keyTransposed ? swapLastTwo(b, loc, chain.keyT, stage)
                                    : chain.keyT;
    Value value = chain.valueTransposed
                      ? swapLastTwo(b, loc, chain.value, stage)
                      : chain.value;
    auto attention = AttentionOp::create(
        b, loc, chain.query, key, value, b.getF64FloatAttr(chain.scale),
        chain.causal ? b.getUnitAttr() : UnitAttr());
    if (stage)
      attention->setAttr(WeftDialect::kStageAttrName, stage);
    chain.output.getResult().replaceAllUsesWith(attention.getResult());
    for (Operation *op : chain.ops)
      op->erase();
    // The k^T and v^T the chain read, now composed into the new transposes.
    auto eraseIfDead = [](Value v) {
      if (auto t = v.getDefiningOp<TransposeOp>(); t && t->use_empty())
        t->erase();
    };
    eraseIfDead(chain.keyT);
    if (chain.value != chain.keyT)
      eraseIfDead(chain.value);
  }
};

} // namespace
