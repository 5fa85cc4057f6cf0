//===- LinalgToBlas.cpp - GEMMs on buffers to runtime BLAS calls ----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// A matmul is the one op generated loops cannot compete on: OpenBLAS is an
// order of magnitude faster. After bufferization every contraction of the
// form C[b?, m, n] = sum_k op(A)[b?, m, k] * op(B)[b?, k, n] whose C was
// just zero-filled becomes one call of a runtime GEMM, which takes plain
// pointers, row strides and batch strides:
//
//   A, B   C      call
//   f32    f32    weft_rt_sgemm
//   bf16   f32    weft_rt_sbgemm       (--precision bf16's products)
//   bf16   bf16   weft_rt_sbgemm_bf16  (sums in f32, C rounded to bf16)
//
// A batch-reduce contraction C[m, n] = sum_b sum_k op(A)[b, m, k] *
// op(B)[b, k, n] (linalg.batch_reduce_matmul or the same generic: two
// reduction loops, one of them the leading dimension of both A and B) on
// f32 becomes one weft_rt_sgemm_batch_sum: C is written by the first
// product and accumulated by the others, so a convolution's filter
// gradient multiplies the forward's im2col buffer as it is.
//
//===----------------------------------------------------------------------===//

#include "weft/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace weft {
#define GEN_PASS_DEF_LINALGTOBLASPASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {
constexpr llvm::StringLiteral kSgemmName = "weft_rt_sgemm";
constexpr llvm::StringLiteral kSbgemmName = "weft_rt_sbgemm";
constexpr llvm::StringLiteral kSbgemmBf16Name = "weft_rt_sbgemm_bf16";
constexpr llvm::StringLiteral kSgemmBatchSumName = "weft_rt_sgemm_batch_sum";

/// The runtime GEMM for these element types, or an empty name when there
/// is none (a mixed f32 x bf16 product, f16, integers).
StringRef gemmFor(Type a, Type b, Type c) {
  if (a != b)
    return {};
  if (a.isF32() && c.isF32())
    return kSgemmName;
  if (a.isBF16() && c.isF32())
    return kSbgemmName;
  if (a.isBF16() && c.isBF16())
    return kSbgemmBf16Name;
  return {};
}

/// How one operand of a GEMM is laid out: which of its memref dimensions
/// hold the batch (if any), the rows and the columns of the stored matrix,
/// and whether the GEMM reads it transposed.
struct OperandLayout {
  std::optional<unsigned> batchDim;
  unsigned rowDim = 0, colDim = 0;
  bool transposed = false;
};

/// Matches `map` against (batch?, first, second) or (batch?, second, first)
/// in terms of loop dimensions; `batch` is optional in the map only when
/// `allowBroadcast`.
std::optional<OperandLayout> matchOperand(AffineMap map,
                                          std::optional<unsigned> batch,
                                          unsigned first, unsigned second,
                                          bool allowBroadcast) {
  SmallVector<unsigned> dims;
  for (AffineExpr e : map.getResults()) {
    auto d = dyn_cast<AffineDimExpr>(e);
    if (!d)
      return std::nullopt;
    dims.push_back(d.getPosition());
  }
  OperandLayout layout;
  unsigned next = 0;
  if (batch && dims.size() == 3) {
    if (dims[0] != *batch)
      return std::nullopt;
    layout.batchDim = 0;
    next = 1;
  } else if (dims.size() != 2 || (batch && !allowBroadcast)) {
    return std::nullopt;
  }
  layout.rowDim = next;
  layout.colDim = next + 1;
  if (dims[next] == first && dims[next + 1] == second)
    layout.transposed = false;
  else if (dims[next] == second && dims[next + 1] == first)
    layout.transposed = true;
  else
    return std::nullopt;
  return layout;
}

/// The memref must have unit stride in its last dimension; the row and
/// batch strides can be anything (read at run time).
bool hasUnitInnerStride(MemRefType type) {
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) || strides.empty())
    return false;
  return strides.back() == 1 || type.getShape().back() == 1;
}

/// True when the op right before `op` (skipping ops without memory
/// effects and allocations) zero-fills exactly `buffer`.
linalg::FillOp findZeroFill(Operation *op, Value buffer) {
  Operation *prev = op->getPrevNode();
  while (prev && (isMemoryEffectFree(prev) ||
                  isa<memref::AllocOp, memref::AllocaOp>(prev)))
    prev = prev->getPrevNode();
  auto fill = dyn_cast_or_null<linalg::FillOp>(prev);
  if (!fill || fill.getOutputs().front() != buffer ||
      !matchPattern(fill.getInputs().front(), m_AnyZeroFloat()))
    return nullptr;
  return fill;
}

struct LinalgToBlasPass
    : public weft::impl::LinalgToBlasPassBase<LinalgToBlasPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<linalg::LinalgOp> candidates;
    module.walk([&](linalg::LinalgOp op) {
      if (op.hasPureBufferSemantics() && op.getNumDpsInputs() == 2 &&
          op.getNumDpsInits() == 1 && linalg::isaContractionOpInterface(op))
        candidates.push_back(op);
    });
    for (linalg::LinalgOp op : candidates)
      if (failed(rewrite(module, op)))
        return signalPassFailure();
    // A product into bf16 (--weft-fold-gemm-rounding) promised one rounding
    // of f32 sums; its loops would sum in bf16 instead.
    WalkResult left = module.walk([&](linalg::LinalgOp op) {
      if (!linalg::isaContractionOpInterface(op) || op.getNumDpsInits() != 1)
        return WalkResult::advance();
      Type element = getElementTypeOrSelf(op.getDpsInits()[0].getType());
      if (!element.isBF16())
        return WalkResult::advance();
      op.emitError("internal: a product into bf16 did not become a "
                   "weft_rt_sbgemm_bf16 call, and its loops would sum in "
                   "bf16; compile with --precision fp32, or report the model");
      return WalkResult::interrupt();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }

  /// The runtime function `name`; the three GEMMs share one signature
  /// (pointers are untyped), the batch sum lacks C's batch stride.
  func::FuncOp getOrDeclareGemm(ModuleOp module, StringRef name) {
    MLIRContext *ctx = &getContext();
    Type i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64);
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    SmallVector<Type> params{i64, i32, i32, i64, i64, i64, ptr, i64,
                             i64, ptr, i64, i64, ptr, i64, i64};
    if (name == kSgemmBatchSumName)
      params.pop_back();
    auto type = FunctionType::get(ctx, params, {});
    if (auto existing = module.lookupSymbol<func::FuncOp>(name)) {
      if (existing.getFunctionType() == type)
        return existing;
      existing.emitError() << "@" << name << " is declared as "
                           << existing.getFunctionType() << ", expected "
                           << type;
      return nullptr;
    }
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    auto fn = func::FuncOp::create(b, module.getLoc(), name, type);
    fn.setPrivate();
    return fn;
  }

  /// Replaces `op` and its zero fill by a GEMM call when the op is one;
  /// fails only when the runtime function's name is taken.
  LogicalResult rewrite(ModuleOp module, linalg::LinalgOp op) {
    Value a = op.getDpsInputs()[0], b = op.getDpsInputs()[1];
    Value c = op.getDpsInits()[0];
    auto aType = cast<MemRefType>(a.getType());
    auto bType = cast<MemRefType>(b.getType());
    auto cType = cast<MemRefType>(c.getType());
    StringRef gemmName = gemmFor(aType.getElementType(),
                                 bType.getElementType(), cType.getElementType());
    if (gemmName.empty())
      return success();
    // C names the batch, M and N loops; the one reduction loop is K. (The
    // upstream classification would call a batch loop that A lacks an N.)
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    SmallVector<unsigned> reductions;
    op.getReductionDims(reductions);
    unsigned numLoops = op.getNumLoops();
    AffineMap cMap = maps[2];
    if (!cMap.isProjectedPermutation())
      return success();
    std::optional<unsigned> batch;
    unsigned m, n, k;
    // A batch-reduce GEMM: C is [m, n]; of the two reductions the batch is
    // the one that leads both A and B, K the other.
    bool batchSum = reductions.size() == 2 && numLoops == 4 &&
                    cMap.getNumResults() == 2;
    if (batchSum) {
      if (gemmName != kSgemmName)
        return success(); // No bf16 batch sum in the runtime.
      AffineMap aMap = maps[0], bMap = maps[1];
      if (aMap.getNumResults() != 3 || bMap.getNumResults() != 3 ||
          aMap.getResult(0) != bMap.getResult(0))
        return success();
      auto lead = dyn_cast<AffineDimExpr>(aMap.getResult(0));
      if (!lead || !llvm::is_contained(reductions, lead.getPosition()))
        return success();
      batch = lead.getPosition();
      k = reductions[0] == *batch ? reductions[1] : reductions[0];
      m = cMap.getDimPosition(0);
      n = cMap.getDimPosition(1);
    } else {
      if (reductions.size() != 1 || cMap.getNumResults() + 1 != numLoops ||
          numLoops < 3 || numLoops > 4)
        return success();
      if (numLoops == 4)
        batch = cMap.getDimPosition(0);
      m = cMap.getDimPosition(numLoops - 3);
      n = cMap.getDimPosition(numLoops - 2);
      k = reductions.front();
    }
    // A and B must have the batch when the batch is summed: a broadcast
    // side would be a GEMM of the summed other side, not this call.
    std::optional<OperandLayout> la =
        matchOperand(maps[0], batch, m, k, !batchSum);
    std::optional<OperandLayout> lb =
        matchOperand(maps[1], batch, k, n, !batchSum);
    std::optional<OperandLayout> lc = matchOperand(
        maps[2], batchSum ? std::nullopt : batch, m, n, false);
    if (!la || !lb || !lc || lc->transposed || !hasUnitInnerStride(aType) ||
        !hasUnitInnerStride(bType) || !hasUnitInnerStride(cType))
      return success();
    linalg::FillOp fill = findZeroFill(op, c);
    if (!fill)
      return success(); // Accumulates into C: the GEMMs overwrite it.

    if (batchSum)
      gemmName = kSgemmBatchSumName;
    func::FuncOp gemm = getOrDeclareGemm(module, gemmName);
    if (!gemm)
      return failure();

    OpBuilder builder(op);
    Location loc = op.getLoc();
    Type i32 = builder.getI32Type(), i64 = builder.getI64Type();
    auto toI64 = [&](Value index) -> Value {
      return arith::IndexCastOp::create(builder, loc, i64, index);
    };
    auto constI64 = [&](int64_t v) -> Value {
      return arith::ConstantIntOp::create(builder, loc, i64, v);
    };
    // (pointer, row stride, batch stride) of one operand, and its metadata.
    struct Operand {
      Value ptr, ld, batchStride;
      memref::ExtractStridedMetadataOp meta;
    };
    auto unpack = [&](Value memref, const OperandLayout &layout,
                      MemRefType type) -> Operand {
      Operand result;
      result.meta =
          memref::ExtractStridedMetadataOp::create(builder, loc, memref);
      Value aligned =
          memref::ExtractAlignedPointerAsIndexOp::create(builder, loc, memref);
      Value base = LLVM::IntToPtrOp::create(
          builder, loc, LLVM::LLVMPointerType::get(builder.getContext()),
          toI64(aligned));
      result.ptr = LLVM::GEPOp::create(
          builder, loc, base.getType(), type.getElementType(), base,
          ValueRange{toI64(result.meta.getOffset())});
      // A single stored row may carry any stride; BLAS wants >= its width.
      if (type.getShape()[layout.rowDim] == 1)
        result.ld = toI64(result.meta.getSizes()[layout.colDim]);
      else
        result.ld = toI64(result.meta.getStrides()[layout.rowDim]);
      result.batchStride =
          layout.batchDim ? toI64(result.meta.getStrides()[*layout.batchDim])
                          : constI64(0);
      return result;
    };
    Operand pa = unpack(a, *la, aType), pb = unpack(b, *lb, bType),
            pc = unpack(c, *lc, cType);
    Value batchCount =
        batchSum ? toI64(pa.meta.getSizes()[*la->batchDim])
        : lc->batchDim ? toI64(pc.meta.getSizes()[*lc->batchDim])
                       : constI64(1);
    Value rows = toI64(pc.meta.getSizes()[lc->rowDim]);
    Value cols = toI64(pc.meta.getSizes()[lc->colDim]);
    Value depth =
        toI64(pa.meta.getSizes()[la->transposed ? la->rowDim : la->colDim]);
    Value transA =
        arith::ConstantIntOp::create(builder, loc, i32, la->transposed ? 1 : 0);
    Value transB =
        arith::ConstantIntOp::create(builder, loc, i32, lb->transposed ? 1 : 0);
    SmallVector<Value> args{batchCount, transA, transB, rows, cols,
                            depth, pa.ptr, pa.ld, pa.batchStride,
                            pb.ptr, pb.ld, pb.batchStride, pc.ptr,
                            pc.ld};
    if (!batchSum)
      args.push_back(pc.batchStride);
    func::CallOp::create(builder, loc, gemm, args);
    fill->erase();
    op->erase();
    return success();
  }
};
} // namespace
