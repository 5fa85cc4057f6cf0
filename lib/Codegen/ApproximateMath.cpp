//===- ApproximateMath.cpp - Inline polynomial transcendentals ------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Kernels that call libm element by element cannot be vectorized by LLVM.
// This pass replaces f32 exp, expm1, tanh, erf, log and log1p with MLIR's
// polynomial approximations (mlir/Dialect/Math/Transforms/Passes.h), which
// are plain arithmetic, in loops LLVM can vectorize (reductions too, once
// --weft-promote-accumulators keeps their sums in registers), and adjusts
// them to the CPU target:
//
// - bf16 operands are computed in f32 (extf, op, truncf);
// - log scales denormal inputs by 2^24 first: the approximation flushes
//   them to the smallest normal, which would be wrong by up to 16.6;
// - tanh returns exactly +-1 where that is the rounded result;
// - the approximations' math.fma becomes a multiply and an add that LLVM
//   may contract: on a CPU without FMA (x86-64 baseline, weftc's default)
//   llvm.fma is a call of fmaf per element;
// - their math.floor becomes a conversion to i32 and back, for the same
//   reason (roundps needs SSE4.1).
//
// Error bounds against double-precision libm: unittests/Codegen and
// docs/codegen.md, "Transcendental functions".
//
//===----------------------------------------------------------------------===//

#include "weft/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/MathExtras.h"

namespace weft {
#define GEN_PASS_DEF_APPROXIMATEMATHPASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// The math ops this pass approximates (operation names).
bool isApproximated(StringRef name) {
  return llvm::is_contained(
      {math::ExpOp::getOperationName(), math::ExpM1Op::getOperationName(),
       math::TanhOp::getOperationName(), math::ErfOp::getOperationName(),
       math::LogOp::getOperationName(), math::Log1pOp::getOperationName()},
      name);
}

/// A float constant of `type` (f32 or a vector of f32).
Value floatConstant(OpBuilder &b, Location loc, Type type, double value) {
  auto attr = b.getFloatAttr(getElementTypeOrSelf(type), value);
  if (auto shaped = dyn_cast<ShapedType>(type))
    return arith::ConstantOp::create(b, loc,
                                     DenseElementsAttr::get(shaped, attr));
  return arith::ConstantOp::create(b, loc, attr);
}

/// `type` with its element type replaced by `element`.
Type withElementType(Type type, Type element) {
  if (auto shaped = dyn_cast<ShapedType>(type))
    return shaped.clone(element);
  return element;
}

/// Replaces `op` (one operand, one result, bf16) by the same op on f32
/// between an extf and a truncf. Returns the f32 op.
Operation *computeInF32(Operation *op) {
  OpBuilder b(op);
  Location loc = op->getLoc();
  Type type = op->getResult(0).getType();
  Type f32 = withElementType(type, b.getF32Type());
  Value wide = arith::ExtFOp::create(b, loc, f32, op->getOperand(0));
  OperationState state(loc, op->getName(), ValueRange{wide}, TypeRange{f32},
                       op->getAttrs());
  Operation *wideOp = b.create(state);
  Value narrow = arith::TruncFOp::create(b, loc, type, wideOp->getResult(0));
  op->getResult(0).replaceAllUsesWith(narrow);
  op->erase();
  return wideOp;
}

/// log(x) = log(x * 2^24) - 24 ln 2 for x below the smallest normal float,
/// which the polynomial would otherwise flush to it. Zero, negative and
/// NaN inputs keep their results (-inf, NaN).
void scaleDenormalLogInput(math::LogOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value x = op.getOperand();
  Type type = x.getType();
  Value minNormal = floatConstant(b, loc, type, 0x1p-126);
  Value small =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, minNormal);
  Value scaled =
      arith::MulFOp::create(b, loc, x, floatConstant(b, loc, type, 0x1p24));
  Value input = arith::SelectOp::create(b, loc, small, scaled, x);
  op.getOperandMutable().assign(input);
  b.setInsertionPointAfter(op);
  Value shift = arith::SelectOp::create(
      b, loc, small, floatConstant(b, loc, type, 24 * llvm::numbers::ln2),
      floatConstant(b, loc, type, 0.0));
  Value result = arith::SubFOp::create(b, loc, op.getResult(), shift);
  op.getResult().replaceAllUsesExcept(result, result.getDefiningOp());
}

/// tanh(x) = +-1 where that is the rounded result (|x| > 13 ln 2): the
/// polynomial, evaluated at its clamp |x| = 7.99881172, stays ulps below 1.
void saturateTanh(math::TanhOp op) {
  OpBuilder b(op);
  b.setInsertionPointAfter(op);
  Location loc = op.getLoc();
  Value x = op.getOperand();
  Type type = x.getType();
  Value saturated = arith::CmpFOp::create(
      b, loc, arith::CmpFPredicate::OGT, math::AbsFOp::create(b, loc, x),
      floatConstant(b, loc, type, 13 * llvm::numbers::ln2));
  Value one =
      math::CopySignOp::create(b, loc, floatConstant(b, loc, type, 1.0), x);
  Value result =
      arith::SelectOp::create(b, loc, saturated, one, op.getResult());
  op.getResult().replaceAllUsesExcept(result, result.getDefiningOp());
}

/// a * b + c as two ops LLVM may fuse into one FMA where the CPU has it.
void expandFma(math::FmaOp op) {
  OpBuilder b(op);
  auto contract = arith::FastMathFlagsAttr::get(b.getContext(),
                                                arith::FastMathFlags::contract);
  Value product =
      arith::MulFOp::create(b, op.getLoc(), op.getA(), op.getB(), contract);
  Value sum =
      arith::AddFOp::create(b, op.getLoc(), product, op.getC(), contract);
  op.replaceAllUsesWith(sum);
  op.erase();
}

/// floor(y) for f32 without roundps: truncate through i32 and step down
/// where that rounded up; |y| >= 2^23, inf and NaN are already integral
/// (the i32 conversion's poison there is never selected). copysign keeps
/// floor(-0) = -0.
void expandFloor(math::FloorOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value y = op.getOperand();
  Type type = y.getType();
  Type i32 = withElementType(type, b.getI32Type());
  Value truncated = arith::SIToFPOp::create(
      b, loc, type, arith::FPToSIOp::create(b, loc, i32, y));
  Value roundedUp =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, truncated, y);
  Value step = arith::SelectOp::create(b, loc, roundedUp,
                                       floatConstant(b, loc, type, 1.0),
                                       floatConstant(b, loc, type, 0.0));
  Value down = math::CopySignOp::create(
      b, loc, arith::SubFOp::create(b, loc, truncated, step), y);
  Value fractional = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT,
                                           math::AbsFOp::create(b, loc, y),
                                           floatConstant(b, loc, type, 0x1p23));
  Value floor = arith::SelectOp::create(b, loc, fractional, down, y);
  op.replaceAllUsesWith(floor);
  op.erase();
}

/// Records the math.fma and math.floor ops the approximations create, so
/// that only those are expanded (a model's own floor keeps its op).
struct CreatedOps : public RewriterBase::Listener {
  llvm::SetVector<Operation *> ops;
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    if (isa<math::FmaOp, math::FloorOp>(op))
      ops.insert(op);
  }
  void notifyOperationErased(Operation *op) override { ops.remove(op); }
};

struct ApproximateMathPass
    : public weft::impl::ApproximateMathPassBase<ApproximateMathPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<Operation *> targets;
    func.walk([&](Operation *op) {
      if (!isApproximated(op->getName().getStringRef()))
        return;
      Type element = getElementTypeOrSelf(op->getResult(0).getType());
      if (element.isBF16())
        op = computeInF32(op);
      else if (!element.isF32())
        return; // f64 and f16 stay libm calls.
      if (auto log = dyn_cast<math::LogOp>(op))
        scaleDenormalLogInput(log);
      else if (auto tanh = dyn_cast<math::TanhOp>(op))
        saturateTanh(tanh);
      targets.push_back(op);
    });
    if (targets.empty())
      return;

    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns, isApproximated);
    CreatedOps created;
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps)
        .setScope(&func.getBody())
        .setListener(&created);
    if (failed(applyOpPatternsGreedily(targets, std::move(patterns), config))) {
      func.emitError("polynomial approximation of math ops did not converge");
      return signalPassFailure();
    }
    for (Operation *op : created.ops) {
      if (auto fma = dyn_cast<math::FmaOp>(op))
        expandFma(fma);
      else
        expandFloor(cast<math::FloorOp>(op));
    }
  }
};
} // namespace
