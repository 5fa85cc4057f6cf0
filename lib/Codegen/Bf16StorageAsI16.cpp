//===- Bf16StorageAsI16.cpp - bf16 values as i16 in the LLVM dialect ------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// x86 before AVX512-BF16 has no bfloat vector registers: LLVM legalizes a
// `select` or `store` of `<8 x bfloat>` one lane at a time. Weft's kernels
// never compute in bf16 (arith-expand turned every extf/truncf into
// integer arithmetic on the bits), so bf16 here is storage only, and i16
// carries it without loss and vectorizes.
//
//===----------------------------------------------------------------------===//

#include "weft/Codegen/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace weft {
#define GEN_PASS_DEF_BF16STORAGEASI16PASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

bool holdsBf16(Type type) {
  if (isa<BFloat16Type>(type))
    return true;
  // Scalars and pointers, nearly every type here, have nothing inside.
  if (type.isIntOrIndexOrFloat() || isa<LLVM::LLVMPointerType>(type))
    return false;
  bool found = false;
  type.walk([&](BFloat16Type) { found = true; });
  return found;
}

/// Operations that move bf16 bits without interpreting them.
bool movesBitsOnly(Operation *op) {
  return isa<LLVM::LoadOp, LLVM::StoreOp, LLVM::BitcastOp, LLVM::ConstantOp,
             LLVM::SelectOp, LLVM::GEPOp, LLVM::BrOp, LLVM::CondBrOp,
             LLVM::SwitchOp, LLVM::UndefOp, LLVM::PoisonOp, LLVM::ZeroOp,
             LLVM::ExtractElementOp, LLVM::InsertElementOp,
             LLVM::ShuffleVectorOp, LLVM::MaskedLoadOp, LLVM::MaskedStoreOp>(
      op);
}

/// True when every use of bf16 in `func` only moves bits; `found` tells
/// whether there is any.
bool storageOnly(LLVM::LLVMFuncOp func, bool &found) {
  found = false;
  if (holdsBf16(func.getFunctionType()))
    return false;
  WalkResult result = func.walk([&](Operation *op) {
    bool touches = llvm::any_of(op->getOperandTypes(), holdsBf16) ||
                   llvm::any_of(op->getResultTypes(), holdsBf16);
    for (Region &region : op->getRegions())
      for (Block &block : region)
        touches |= llvm::any_of(block.getArgumentTypes(), holdsBf16);
    found |= touches;
    if (touches && !movesBitsOnly(op) && !isa<LLVM::LLVMFuncOp>(op))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return !result.wasInterrupted();
}

struct Bf16StorageAsI16Pass
    : weft::impl::Bf16StorageAsI16PassBase<Bf16StorageAsI16Pass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    auto i16 = IntegerType::get(ctx, 16);
    AttrTypeReplacer replacer;
    replacer.addReplacement([&](BFloat16Type) -> Type { return i16; });
    replacer.addReplacement([&](FloatAttr attr) -> std::optional<Attribute> {
      if (!isa<BFloat16Type>(attr.getType()))
        return std::nullopt;
      return IntegerAttr::get(i16, attr.getValue().bitcastToAPInt());
    });
    replacer.addReplacement(
        [&](DenseFPElementsAttr attr) -> std::optional<Attribute> {
          if (!isa<BFloat16Type>(attr.getElementType()))
            return std::nullopt;
          auto type = attr.getType().clone(i16);
          return DenseElementsAttr::getFromRawBuffer(type, attr.getRawData());
        });

    for (auto func : getOperation().getOps<LLVM::LLVMFuncOp>()) {
      if (func.isExternal())
        continue;
      bool found;
      if (!storageOnly(func, found)) {
        ++numFunctionsKept;
        continue;
      }
      if (!found)
        continue;
      replacer.recursivelyReplaceElementsIn(func, /*replaceAttrs=*/true,
                                            /*replaceLocs=*/false,
                                            /*replaceTypes=*/true);
      // The expansions' casts between the bits and bf16 are now i16 to i16.
      func.walk([](LLVM::BitcastOp cast) {
        if (cast.getArg().getType() == cast.getType()) {
          cast.replaceAllUsesWith(cast.getArg());
          cast.erase();
        }
      });
    }
  }
};

} // namespace
