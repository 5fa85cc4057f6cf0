//===- GpuScatterRows.cpp - The embedding gradient as sorted runs ---------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The embedding gradient is a scatter-add kernel: for each token in order,
// its gradient row added into the table's row of its id. Each element must
// see its tokens in token order (the CPU's sums, bit for bit), and
// --weft-gpu-map-step keeps that by giving each column one thread that
// walks every token: GPT-2's 8192 tokens make that 3.8 ms of dependent
// loads on an H100. Where the kernel is exactly that scatter, its call
// becomes weft_rt_cuda_scatter_add_rows_f32, which sorts the tokens by
// (row, token) and adds each row's run in token order: the same sums, in
// parallel over rows.
//
//===----------------------------------------------------------------------===//

#include "weft/Target/CUDA/Passes.h"

#include "ViewRoot.h"

#include "weft/Dialect/Weft/IR/RuntimeCalls.h"
#include "weft/Runtime/Cuda.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace weft {
#define GEN_PASS_DEF_GPUSCATTERROWSPASS
#include "weft/Target/CUDA/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// The kernel's arguments, by role.
struct Scatter {
  unsigned ids, table, updates;
  int64_t tokens, rows, cols;
  bool bf16Updates;
};

/// Whether `memref` is an argument of `fn` of static shape [1.., n, d] with
/// an identity layout; its argument number.
std::optional<unsigned> rowsArgument(func::FuncOp fn, Value memref,
                                     Type element) {
  auto arg = dyn_cast<BlockArgument>(memref);
  if (!arg || arg.getOwner() != &fn.getBody().front())
    return std::nullopt;
  auto type = dyn_cast<MemRefType>(arg.getType());
  if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity() ||
      type.getRank() < 2 || type.getElementType() != element)
    return std::nullopt;
  for (int64_t d : type.getShape().drop_back(2))
    if (d != 1)
      return std::nullopt;
  return arg.getArgNumber();
}

/// A full row of `source` at row index `row`: a subview [0.., row, 0] of
/// sizes [1.., 1, d], unit strides.
bool isRowOf(memref::SubViewOp sub, Value row) {
  auto type = cast<MemRefType>(sub.getSource().getType());
  int64_t rank = type.getRank();
  auto offsets = sub.getMixedOffsets();
  auto sizes = sub.getMixedSizes();
  if (!sub.hasUnitStride() || int64_t(offsets.size()) != rank)
    return false;
  for (int64_t d = 0; d < rank; ++d) {
    if (d == rank - 2) {
      if (dyn_cast<Value>(offsets[d]) != row ||
          !isConstantIntValue(sizes[d], 1))
        return false;
      continue;
    }
    if (!isZeroInteger(offsets[d]) ||
        !isConstantIntValue(sizes[d], d == rank - 1 ? type.getShape()[d] : 1))
      return false;
  }
  return true;
}

/// `r` as the step's scatter computes a row from an id: idx = id < 0 ? id +
/// rows : id, clamped into [0, rows - 1], where id is `ids[iv]` read as an
/// index. The id's load, or null.
memref::LoadOp clampedId(Value r, int64_t rows, Value iv) {
  auto min = r.getDefiningOp<arith::MinSIOp>();
  if (!min || !isConstantIntValue(min.getRhs(), rows - 1))
    return {};
  auto max = min.getLhs().getDefiningOp<arith::MaxSIOp>();
  if (!max || !isConstantIntValue(max.getRhs(), 0))
    return {};
  auto select = max.getLhs().getDefiningOp<arith::SelectOp>();
  if (!select)
    return {};
  auto cmp = select.getCondition().getDefiningOp<arith::CmpIOp>();
  auto add = select.getTrueValue().getDefiningOp<arith::AddIOp>();
  Value id = select.getFalseValue();
  if (!cmp || !add || cmp.getPredicate() != arith::CmpIPredicate::slt ||
      cmp.getLhs() != id || !isConstantIntValue(cmp.getRhs(), 0) ||
      add.getLhs() != id || !isConstantIntValue(add.getRhs(), rows))
    return {};
  auto cast = id.getDefiningOp<arith::IndexCastOp>();
  auto load =
      cast ? cast.getIn().getDefiningOp<memref::LoadOp>() : memref::LoadOp();
  if (!load || load.getIndices().size() != 1 || load.getIndices()[0] != iv)
    return {};
  return load;
}

/// Matches kernel `fn`: one scf.for over the tokens whose body adds
/// updates[t] (a full row) into table[clamped ids[t]] with one
/// linalg.generic, reading ids and nothing else.
std::optional<Scatter> matchScatter(func::FuncOp fn) {
  if (fn.isDeclaration() || fn.getNumArguments() != 3 ||
      !fn.getFunctionType().getResults().empty())
    return std::nullopt;
  Block &entry = fn.getBody().front();
  scf::ForOp loop;
  for (Operation &op : entry) {
    if (auto f = dyn_cast<scf::ForOp>(op)) {
      if (loop)
        return std::nullopt;
      loop = f;
    } else if (!isa<arith::ConstantOp, func::ReturnOp>(op)) {
      return std::nullopt;
    }
  }
  if (!loop || loop.getNumResults() ||
      !isConstantIntValue(loop.getLowerBound(), 0) ||
      !isConstantIntValue(loop.getStep(), 1))
    return std::nullopt;
  std::optional<int64_t> tokens = getConstantIntValue(loop.getUpperBound());
  if (!tokens || *tokens < 1)
    return std::nullopt;
  Value iv = loop.getInductionVar();
  linalg::GenericOp generic;
  memref::LoadOp idLoad;
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (auto g = dyn_cast<linalg::GenericOp>(op)) {
      if (generic)
        return std::nullopt;
      generic = g;
    } else if (auto load = dyn_cast<memref::LoadOp>(op)) {
      if (idLoad)
        return std::nullopt;
      idLoad = load;
    } else if (!isMemoryEffectFree(&op)) {
      return std::nullopt;
    }
  }
  if (!generic || !idLoad || generic.getNumDpsInputs() != 1 ||
      generic.getNumDpsInits() != 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return std::nullopt;
  // The body: out + in in f32, in an f32 or a bf16 extended.
  Block &body = generic.getRegion().front();
  Value in = body.getArgument(0), out = body.getArgument(1);
  auto addf = dyn_cast<arith::AddFOp>(
      body.getTerminator()->getOperand(0).getDefiningOp());
  if (!addf || !addf.getType().isF32() || !out.getType().isF32())
    return std::nullopt;
  Value added = addf.getLhs() == out ? addf.getRhs() : addf.getLhs();
  if ((addf.getLhs() != out && addf.getRhs() != out) || added == out)
    return std::nullopt;
  bool bf16 = in.getType().isBF16();
  if (bf16) {
    auto ext = added.getDefiningOp<arith::ExtFOp>();
    if (!ext || ext.getIn() != in || body.getOperations().size() != 3)
      return std::nullopt;
  } else if (added != in || !in.getType().isF32() ||
             body.getOperations().size() != 2) {
    return std::nullopt;
  }
  auto outRow = generic.getDpsInits()[0].getDefiningOp<memref::SubViewOp>();
  auto inRow = generic.getDpsInputs()[0].getDefiningOp<memref::SubViewOp>();
  if (!outRow || !inRow)
    return std::nullopt;
  Type f32 = Float32Type::get(fn.getContext());
  std::optional<unsigned> table = rowsArgument(fn, outRow.getSource(), f32);
  std::optional<unsigned> updates =
      rowsArgument(fn, inRow.getSource(),
                   bf16 ? Type(BFloat16Type::get(fn.getContext())) : f32);
  if (!table || !updates || *table == *updates)
    return std::nullopt;
  auto tableType = cast<MemRefType>(outRow.getSource().getType());
  auto updatesType = cast<MemRefType>(inRow.getSource().getType());
  int64_t rows = tableType.getShape().drop_back().back();
  int64_t cols = tableType.getShape().back();
  if (updatesType.getShape().back() != cols ||
      updatesType.getShape().drop_back().back() != *tokens ||
      !isRowOf(inRow, iv))
    return std::nullopt;
  Value row =
      dyn_cast<Value>(outRow.getMixedOffsets()[tableType.getRank() - 2]);
  if (!row || !isRowOf(outRow, row) || clampedId(row, rows, iv) != idLoad)
    return std::nullopt;
  auto idsArg = dyn_cast<BlockArgument>(idLoad.getMemRef());
  auto idsType = dyn_cast<MemRefType>(idLoad.getMemRef().getType());
  if (!idsArg || idsArg.getOwner() != &entry || !idsType ||
      idsType.getRank() != 1 || idsType.getShape()[0] != *tokens ||
      !idsType.getLayout().isIdentity() ||
      !idsType.getElementType().isInteger(64) ||
      idsArg.getArgNumber() == *table || idsArg.getArgNumber() == *updates)
    return std::nullopt;
  return Scatter{
      idsArg.getArgNumber(), *table, *updates, *tokens, rows, cols, bf16};
}

struct GpuScatterRowsPass
    : weft::impl::GpuScatterRowsPassBase<GpuScatterRowsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>(function);
    if (!step || step.isDeclaration())
      return;
    SmallVector<func::CallOp> calls;
    for (auto call : step.getBody().front().getOps<func::CallOp>())
      calls.push_back(call);
    OpBuilder b(module.getContext());
    for (func::CallOp call : calls) {
      auto kernel = module.lookupSymbol<func::FuncOp>(call.getCallee());
      if (!kernel)
        continue;
      std::optional<Scatter> s = matchScatter(kernel);
      if (!s || s->tokens > weft::rt::cuda::kMaxScatterTokens ||
          s->rows > INT32_MAX)
        continue;
      // Constant ids (the positions) stay in the kernel: device code reads
      // constants only inside kernels (--weft-gpu-map-step copies them in).
      if (llvm::any_of(call.getOperands(), [](Value v) {
            Value root = weft::cuda::viewRoot(v);
            return root.getDefiningOp<memref::GetGlobalOp>() != nullptr;
          }))
        continue;
      // The table is written while ids and updates are read: the planner
      // must not have placed them over it, which a kernel's arguments
      // already promise (the scatter reads them while it writes).
      b.setInsertionPoint(call);
      Location loc = call.getLoc();
      auto i64 = [&](int64_t v) {
        return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v))
            .getResult();
      };
      SmallVector<Value> operands = {
          weft::pointerToBuffer(b, loc, call.getOperand(s->ids)),
          i64(s->tokens),
          weft::pointerToBuffer(b, loc, call.getOperand(s->table)),
          i64(s->rows),
          weft::pointerToBuffer(b, loc, call.getOperand(s->updates)),
          i64(s->cols)};
      auto type =
          b.getFunctionType(ValueRange(operands).getTypes(), TypeRange());
      func::FuncOp fn = weft::getOrDeclareRuntimeFunction(
          b, module, call,
          s->bf16Updates ? "weft_rt_cuda_scatter_add_rows_bf16"
                         : "weft_rt_cuda_scatter_add_rows_f32",
          type);
      if (!fn)
        return signalPassFailure();
      func::CallOp::create(b, loc, fn, operands);
      call.erase();
      if (kernel.symbolKnownUseEmpty(module))
        kernel.erase();
      ++numReplaced;
    }
  }
};

} // namespace
