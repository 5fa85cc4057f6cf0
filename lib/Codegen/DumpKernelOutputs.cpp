//===- DumpKernelOutputs.cpp - Each kernel's outputs to the runtime -------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The reference evaluator checks the weft dialect, not the fused kernels a
// target generates. To check those, the step of one model runs on two
// targets with the same inputs and every kernel's outputs are compared
// (test/lib/compare_kernel_dumps.py): up to outlining both targets compile
// the same kernels (test/Target/CUDA/kernels-as-cpu.test), called in the
// same order. This pass makes the step hand each buffer a kernel has just
// written to the runtime, which writes it to a file when asked to
// (include/weft/Runtime/KernelDump.h).
//
//===----------------------------------------------------------------------===//

#include "weft/Codegen/Passes.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Formats/HostArray.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

namespace weft {
#define GEN_PASS_DEF_DUMPKERNELOUTPUTSPASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

constexpr llvm::StringLiteral kDumpFunction = "weft_rt_dump_kernel_output";

/// The runtime's code for a buffer's element type (weft::rt::DType), or
/// nothing for a type no .npy file holds.
std::optional<int32_t> dtypeCode(Type type) {
  using weft::rt::DType;
  std::optional<DType> dtype;
  if (type.isF64())
    dtype = DType::F64;
  else if (type.isF32())
    dtype = DType::F32;
  else if (type.isF16())
    dtype = DType::F16;
  else if (type.isBF16())
    dtype = DType::BF16;
  else if (type.isInteger(64))
    dtype = DType::I64;
  else if (type.isInteger(32))
    dtype = DType::I32;
  else if (type.isInteger(16))
    dtype = DType::I16;
  else if (type.isInteger(8))
    dtype = DType::I8;
  else if (type.isInteger(1))
    dtype = DType::Bool;
  if (!dtype)
    return std::nullopt;
  return int32_t(*dtype);
}

/// For each argument of `kernel`: whether its body may write it. Writes are
/// the write effects of the body's ops, followed through views back to the
/// entry block's arguments; a write to a buffer of unknown origin, or an op
/// whose effects are unknown, counts as a write to every buffer argument.
SmallVector<bool> writtenArguments(func::FuncOp kernel) {
  Block &entry = kernel.getBody().front();
  SmallVector<bool> written(kernel.getNumArguments(), false);
  auto writeAll = [&] {
    for (BlockArgument arg : entry.getArguments())
      if (isa<MemRefType>(arg.getType()))
        written[arg.getArgNumber()] = true;
  };
  auto writeTo = [&](Value buffer) {
    while (true) {
      if (auto arg = dyn_cast<BlockArgument>(buffer)) {
        if (arg.getOwner() == &entry)
          written[arg.getArgNumber()] = true;
        else
          writeAll();
        return;
      }
      Operation *def = buffer.getDefiningOp();
      if (auto view = dyn_cast<ViewLikeOpInterface>(def)) {
        buffer = view.getViewSource();
        continue;
      }
      // The kernel's own scratch or a constant: nothing the caller sees.
      if (isa<memref::GetGlobalOp>(def) ||
          hasEffect<MemoryEffects::Allocate>(def, buffer))
        return;
      writeAll();
      return;
    }
  };
  kernel.walk([&](Operation *op) {
    // A linalg op states its buffers' effects and has a body of its own:
    // its own effects count, and its body's ops are pure.
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects) {
      // Loops: the ops inside are visited themselves.
      if (op != kernel && !op->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
        writeAll();
      return;
    }
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    for (const MemoryEffects::EffectInstance &instance : instances) {
      if (!isa<MemoryEffects::Write>(instance.getEffect()))
        continue;
      if (Value buffer = instance.getValue())
        writeTo(buffer);
      else if (isa<SideEffects::DefaultResource>(instance.getResource()))
        writeAll();
    }
  });
  return written;
}

/// Whether `value` is the step's whole workspace: a kernel takes it to
/// place its rows' scratch buffers (--weft-plan-buffers), which hold
/// nothing to compare after the kernel.
bool isWorkspace(func::FuncOp step, Value value) {
  auto arg = dyn_cast<BlockArgument>(value);
  return arg && arg.getOwner() == &step.getBody().front() &&
         step.getArgAttr(arg.getArgNumber(),
                         weft::WeftDialect::kWorkspaceAttrName);
}

struct DumpKernelOutputsPass
    : public weft::impl::DumpKernelOutputsPassBase<DumpKernelOutputsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>(function);
    if (!step || step.isExternal())
      return;
    // Kernel calls, in program order (outlining leaves them at the top
    // level of the step).
    SmallVector<std::pair<func::CallOp, func::FuncOp>> calls;
    for (auto call : step.getBody().front().getOps<func::CallOp>()) {
      auto kernel = module.lookupSymbol<func::FuncOp>(call.getCallee());
      if (kernel && !kernel.isExternal())
        calls.push_back({call, kernel});
    }
    if (calls.empty())
      return;
    globals.clear();
    nextGlobal = 0;
    func::FuncOp dump = declareDump(module);
    if (!dump)
      return signalPassFailure();

    llvm::DenseMap<Operation *, SmallVector<bool>> written;
    for (auto [index, entry] : llvm::enumerate(calls)) {
      auto [call, kernel] = entry;
      auto it = written.find(kernel);
      if (it == written.end())
        it = written.insert({kernel, writtenArguments(kernel)}).first;
      OpBuilder b(call->getContext());
      b.setInsertionPointAfter(call);
      for (auto [operand, value] : llvm::enumerate(call.getOperands())) {
        if (!it->second[operand] || !isa<MemRefType>(value.getType()) ||
            isWorkspace(step, value))
          continue;
        if (failed(dumpOperand(b, module, call, index, operand, value)))
          return signalPassFailure();
      }
    }
  }

  /// The runtime function's declaration, made once; null (with an error)
  /// when the module declares it with another type.
  func::FuncOp declareDump(ModuleOp module) {
    MLIRContext *ctx = &getContext();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    Type i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64);
    auto type = FunctionType::get(ctx, {ptr, i64, i64, ptr, i32, ptr}, {});
    if (auto existing = module.lookupSymbol<func::FuncOp>(kDumpFunction)) {
      if (existing.getFunctionType() == type)
        return existing;
      existing.emitError() << "@" << kDumpFunction << " is declared as "
                           << existing.getFunctionType() << ", expected "
                           << type;
      return nullptr;
    }
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    auto fn = func::FuncOp::create(b, module.getLoc(), kDumpFunction, type);
    fn.setPrivate();
    return fn;
  }

  /// The address of a constant global holding `value` (a string or an i64
  /// array), one global per distinct value.
  Value constantAddress(OpBuilder &b, ModuleOp module, Location loc,
                        StringRef prefix, Type type, Attribute value) {
    std::string key;
    llvm::raw_string_ostream(key) << value;
    auto [it, inserted] = globals.try_emplace(key);
    if (inserted) {
      OpBuilder top = OpBuilder::atBlockEnd(module.getBody());
      SymbolTable symbols(module);
      std::string name;
      do
        name = (prefix + Twine(nextGlobal++)).str();
      while (symbols.lookup(name));
      auto global =
          LLVM::GlobalOp::create(top, loc, type, /*isConstant=*/true,
                                 LLVM::Linkage::Internal, name, value);
      it->second = global.getSymName().str();
    }
    return LLVM::AddressOfOp::create(
        b, loc, LLVM::LLVMPointerType::get(b.getContext()), it->second);
  }

  LogicalResult dumpOperand(OpBuilder &b, ModuleOp module, func::CallOp call,
                            int64_t index, int64_t operand, Value buffer) {
    Location loc = call.getLoc();
    auto type = cast<MemRefType>(buffer.getType());
    std::optional<int32_t> dtype = dtypeCode(type.getElementType());
    if (!dtype) {
      call.emitWarning() << "--weft-dump-kernel-outputs: operand " << operand
                         << " (" << type
                         << ") is not dumped: no .npy type for its elements";
      return success();
    }
    SmallVector<int64_t> strides;
    int64_t offset;
    if (!type.hasStaticShape() ||
        failed(type.getStridesAndOffset(strides, offset)) ||
        llvm::any_of(strides, ShapedType::isDynamic))
      return call.emitError()
             << "--weft-dump-kernel-outputs: operand " << operand << " ("
             << type << ") needs static sizes and strides";
    SmallVector<int64_t> layout{type.getRank()};
    llvm::append_range(layout, type.getShape());
    llvm::append_range(layout, strides);

    MLIRContext *ctx = b.getContext();
    Type i64 = b.getI64Type();
    Type ptrType = LLVM::LLVMPointerType::get(ctx);
    auto toI64 = [&](Value index) -> Value {
      return arith::IndexCastOp::create(b, loc, i64, index);
    };
    // The first element of the view: aligned pointer + offset.
    auto meta = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
    Value aligned =
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
    Value base = LLVM::IntToPtrOp::create(b, loc, ptrType, toI64(aligned));
    Value data = LLVM::GEPOp::create(b, loc, ptrType, type.getElementType(),
                                     base, ValueRange{toI64(meta.getOffset())});

    StringRef kernelName = call.getCallee();
    std::string text = kernelName.str();
    text.push_back('\0');
    Value name = constantAddress(
        b, module, loc, "__weft_dump_name_",
        LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), text.size()),
        b.getStringAttr(text));
    auto layoutType = RankedTensorType::get({int64_t(layout.size())}, i64);
    Value layoutPtr = constantAddress(
        b, module, loc, "__weft_dump_layout_",
        LLVM::LLVMArrayType::get(i64, layout.size()),
        DenseElementsAttr::get(layoutType, ArrayRef<int64_t>(layout)));
    Value callIndex = arith::ConstantIntOp::create(b, loc, i64, index);
    Value operandIndex = arith::ConstantIntOp::create(b, loc, i64, operand);
    Value dtypeValue =
        arith::ConstantIntOp::create(b, loc, b.getI32Type(), *dtype);
    func::CallOp::create(
        b, loc, kDumpFunction, TypeRange{},
        ValueRange{name, callIndex, operandIndex, data, dtypeValue, layoutPtr});
    return success();
  }

  /// Globals made so far, by their printed value.
  llvm::StringMap<std::string> globals;
  int64_t nextGlobal = 0;
};

} // namespace
