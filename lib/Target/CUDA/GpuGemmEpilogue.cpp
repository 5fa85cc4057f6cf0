//===- GpuGemmEpilogue.cpp - A GEMM's bias in cuBLASLt's epilogue ---------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// A linear layer's bias is a kernel of its own after the GEMM: the product
// written to the workspace, read back and written again with the bias
// added. cuBLASLt adds a bias per column of C to the f32 sum before C is
// stored (CUBLASLT_EPILOGUE_BIAS), which is the same arithmetic: the sum,
// already f32, plus the bias, rounded once to C's type. Where that is
// exactly what the kernel does, and nothing else reads the product, the
// GEMM and the kernel become one call that writes the kernel's output.
//
// Only where the numbers stay the same: a kernel that adds the bias to a
// product rounded to bf16 first (weft_rt_sbgemm_bf16, or a rounding in the
// kernel) rounds twice, which no epilogue does, and stays.
//
//===----------------------------------------------------------------------===//

#include "weft/Target/CUDA/Passes.h"

#include "weft/Codegen/BufferPlace.h"

#include "weft/Dialect/Weft/IR/RuntimeCalls.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace weft {
#define GEN_PASS_DEF_GPUGEMMEPILOGUEPASS
#include "weft/Target/CUDA/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// weft_rt_sgemm's operands (Kernels.h) that the epilogue call changes.
constexpr unsigned kA = 6, kB = 9, kC = 12, kGemmOperands = 15;

/// The memref whose aligned pointer `ptr` is (through index_cast, inttoptr
/// and a GEP by the memref's own offset, as --weft-linalg-to-blas makes
/// it), or null.
Value bufferOfPointer(Value ptr) {
  Value offset;
  if (auto gep = ptr.getDefiningOp<LLVM::GEPOp>()) {
    if (gep.getDynamicIndices().size() != 1 || gep.getIndices().size() != 1)
      return {};
    offset = gep.getDynamicIndices()[0];
    ptr = gep.getBase();
  }
  auto toPtr = ptr.getDefiningOp<LLVM::IntToPtrOp>();
  auto cast = toPtr ? toPtr.getArg().getDefiningOp<arith::IndexCastOp>()
                    : arith::IndexCastOp();
  auto aligned =
      cast
          ? cast.getIn().getDefiningOp<memref::ExtractAlignedPointerAsIndexOp>()
          : memref::ExtractAlignedPointerAsIndexOp();
  if (!aligned)
    return {};
  Value buffer = aligned.getSource();
  if (offset && !matchPattern(offset, m_Zero())) {
    auto offsetCast = offset.getDefiningOp<arith::IndexCastOp>();
    auto meta = offsetCast
                    ? offsetCast.getIn()
                          .getDefiningOp<memref::ExtractStridedMetadataOp>()
                    : memref::ExtractStridedMetadataOp();
    if (!meta || meta.getSource() != buffer ||
        offsetCast.getIn() != meta.getOffset())
      return {};
  }
  return buffer;
}

/// Whether `aligned` (an extract_aligned_pointer_as_index) is used only to
/// make `ptr`, and `ptr` only by one call.
bool onlyPointerOf(Operation *aligned, Value ptr) {
  Operation *op = aligned;
  while (op->hasOneUse() && op->getResult(0) != ptr)
    op = *op->user_begin();
  return op->getResult(0) == ptr && ptr.hasOneUse();
}

/// Where a buffer lives, as --weft-mark-disjoint-args tracks it; every
/// constant (a memref.get_global) is one root, kConstant.
using Place = weft::BufferPlace;
constexpr int64_t kConstant = Place::kWorkspace + 1;

Place placeOf(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (!fn || arg.getOwner() != &fn.getBody().front())
      return {};
    if (fn.getArgAttr(arg.getArgNumber(),
                      weft::WeftDialect::kWorkspaceAttrName))
      return {Place::kWorkspace, -1, -1};
    return {Place::kExternal, -1, -1};
  }
  Operation *op = v.getDefiningOp();
  if (auto view = dyn_cast<memref::ViewOp>(op)) {
    Place p = placeOf(view.getSource());
    APInt shift;
    if (p.root == Place::kWorkspace && view.getType().hasStaticShape() &&
        matchPattern(view.getByteShift(), m_ConstantInt(&shift))) {
      p.offset = shift.getSExtValue();
      p.size = view.getType().getNumElements() *
               ((view.getType().getElementTypeBitWidth() + 7) / 8);
    }
    return p;
  }
  // Other views stay within their source's range.
  if (auto view = dyn_cast<ViewLikeOpInterface>(op))
    return placeOf(view.getViewSource());
  if (isa<memref::GetGlobalOp>(op))
    return {kConstant, -1, -1};
  return {};
}

bool isIdentityStatic(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  return memref && memref.hasStaticShape() && memref.getLayout().isIdentity();
}

/// What a matched kernel computes: out = in + bias[last index], or
/// out = bf16(in + f32(bias)) with bf16 out and bias.
struct BiasKernel {
  unsigned out, bias;
  bool roundsToBf16;
};

/// The body of `generic`: the bias added to `in` (block argument `inArg`),
/// nothing else.
std::optional<bool> matchBiasBody(linalg::GenericOp generic, unsigned inArg,
                                  unsigned biasArg) {
  Block &body = generic.getRegion().front();
  Value in = body.getArgument(inArg), bias = body.getArgument(biasArg);
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  Value result = yield.getOperand(0);
  bool rounds = false;
  if (auto trunc = result.getDefiningOp<arith::TruncFOp>()) {
    if (trunc.getRoundingmodeAttr() || !trunc.getType().isBF16())
      return std::nullopt;
    result = trunc.getIn();
    auto ext = llvm::find_if(body, [&](Operation &op) {
      return isa<arith::ExtFOp>(op) && op.getOperand(0) == bias;
    });
    if (ext == body.end() || !bias.getType().isBF16())
      return std::nullopt;
    bias = ext->getResult(0);
    rounds = true;
  }
  auto add = result.getDefiningOp<arith::AddFOp>();
  if (!add || !add.getType().isF32() ||
      !((add.getLhs() == in && add.getRhs() == bias) ||
        (add.getLhs() == bias && add.getRhs() == in)))
    return std::nullopt;
  // The add, the extension and rounding when there, the yield.
  if (body.getOperations().size() != (rounds ? 4u : 2u))
    return std::nullopt;
  return rounds;
}

/// Matches kernel `fn` whose argument `in` (an f32 buffer of static shape)
/// is read: exactly out = in + bias along the last dimension, over all of
/// `in`, either as one linalg.generic on the arguments or as an
/// scf.forall over leading dimensions whose body takes the rows
/// (memref.subview at the forall's indices) and runs the generic on them.
std::optional<BiasKernel> matchBiasKernel(func::FuncOp fn, unsigned in) {
  auto inType = dyn_cast<MemRefType>(fn.getArgument(in).getType());
  if (fn.getNumArguments() != 3 || !inType || !inType.hasStaticShape() ||
      inType.getRank() < 1 || !inType.getElementType().isF32())
    return std::nullopt;
  ArrayRef<int64_t> shape = inType.getShape();
  int64_t rank = inType.getRank();
  Block &entry = fn.getBody().front();
  Operation *first = &entry.front();
  if (entry.getOperations().size() != 2 || !isa<func::ReturnOp>(entry.back()))
    return std::nullopt;

  // The generic, and the argument each of its buffers is (a row of).
  linalg::GenericOp generic;
  auto forall = dyn_cast<scf::ForallOp>(first);
  // Row views: offsets the forall's indices then 0, sizes 1 then the rest.
  auto rowOf = [&](Value v) -> Value {
    auto sub = v.getDefiningOp<memref::SubViewOp>();
    if (!sub || sub->getBlock() != forall.getBody() || !sub.hasUnitStride() ||
        !isa<BlockArgument>(sub.getSource()))
      return {};
    auto offsets = sub.getMixedOffsets();
    auto sizes = sub.getMixedSizes();
    unsigned r = forall.getRank();
    for (int64_t d = 0; d < rank; ++d) {
      std::optional<int64_t> size = getConstantIntValue(sizes[d]);
      bool inForall = d < int64_t(r);
      Value offset = dyn_cast<Value>(offsets[d]);
      if (!size || *size != (inForall ? 1 : shape[d]) ||
          (inForall ? offset != forall.getInductionVars()[d]
                    : !isZeroInteger(offsets[d])))
        return {};
    }
    return sub.getSource();
  };
  if (forall) {
    auto ubs = forall.getStaticUpperBound();
    if (forall.getNumResults() || !forall.isNormalized() ||
        int64_t(ubs.size()) >= rank ||
        ArrayRef<int64_t>(ubs) != shape.take_front(ubs.size()))
      return std::nullopt;
    for (Operation &op : forall.getBody()->without_terminator()) {
      if (auto g = dyn_cast<linalg::GenericOp>(op)) {
        if (generic)
          return std::nullopt;
        generic = g;
      } else if (!isa<memref::SubViewOp>(op)) {
        return std::nullopt;
      }
    }
  } else {
    generic = dyn_cast<linalg::GenericOp>(first);
  }
  if (!generic || generic.getNumDpsInputs() != 2 ||
      generic.getNumDpsInits() != 1 || generic.getNumLoops() != rank ||
      generic.getNumParallelLoops() != rank)
    return std::nullopt;
  auto argOf = [&](Value v, bool row) -> std::optional<unsigned> {
    if (row && forall)
      v = rowOf(v);
    auto arg = dyn_cast_or_null<BlockArgument>(v);
    if (!arg || arg.getOwner() != &entry)
      return std::nullopt;
    return arg.getArgNumber();
  };
  MLIRContext *ctx = fn.getContext();
  AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, ctx);
  AffineMap last = AffineMap::get(rank, 0, getAffineDimExpr(rank - 1, ctx));
  auto maps = generic.getIndexingMapsArray();
  std::optional<unsigned> out = argOf(generic.getDpsInits()[0], true);
  if (!out || maps[2] != identity)
    return std::nullopt;
  for (unsigned i : {0u, 1u}) {
    std::optional<unsigned> read = argOf(generic.getDpsInputs()[i], true);
    std::optional<unsigned> bias = argOf(generic.getDpsInputs()[1 - i], false);
    if (!read || *read != in || maps[i] != identity || !bias ||
        maps[1 - i] != last || *bias == in || *bias == *out || *out == in)
      continue;
    auto biasType = cast<MemRefType>(fn.getArgument(*bias).getType());
    if (biasType.getRank() != 1 || !biasType.getLayout().isIdentity() ||
        biasType.getDimSize(0) != shape.back())
      return std::nullopt;
    std::optional<bool> rounds = matchBiasBody(generic, i, 1 - i);
    if (!rounds)
      return std::nullopt;
    return BiasKernel{*out, *bias, *rounds};
  }
  return std::nullopt;
}

struct GpuGemmEpiloguePass
    : weft::impl::GpuGemmEpiloguePassBase<GpuGemmEpiloguePass> {
  using Base::Base;

  /// Replaces `gemm` and the kernel call after it by the epilogue GEMM
  /// where they match; false where they are left alone.
  bool fuse(ModuleOp module, func::CallOp gemm) {
    StringRef callee = gemm.getCallee();
    bool bf16In = callee == "weft_rt_sbgemm";
    if ((callee != "weft_rt_sgemm" && !bf16In) ||
        gemm.getNumOperands() != kGemmOperands)
      return false;
    // The product: a workspace buffer only this GEMM writes.
    Value product = bufferOfPointer(gemm.getOperand(kC));
    if (!product || !isIdentityStatic(product.getType()) ||
        !product.getDefiningOp<memref::ViewOp>() ||
        placeOf(product).root != Place::kWorkspace)
      return false;
    // The kernel: the next op with effects, nothing in between but
    // address arithmetic.
    Operation *next = gemm->getNextNode();
    while (next && isMemoryEffectFree(next))
      next = next->getNextNode();
    auto call = dyn_cast_or_null<func::CallOp>(next);
    auto kernel =
        call ? module.lookupSymbol<func::FuncOp>(call.getCallee()) : nullptr;
    if (!kernel || kernel.isDeclaration() ||
        !kernel->hasAttr(weft::WeftDialect::kKernelAttrName))
      return false;
    // Nothing else reads the product: its pointer goes to this GEMM, its
    // reshapes to this kernel, once.
    std::optional<unsigned> in;
    SmallVector<Value> worklist = {product};
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        if (isa<memref::ExpandShapeOp, memref::CollapseShapeOp>(user)) {
          worklist.push_back(user->getResult(0));
        } else if (user == call && !in) {
          in = use.getOperandNumber();
        } else if (auto meta =
                       dyn_cast<memref::ExtractStridedMetadataOp>(user)) {
          if (!meta.getBaseBuffer().use_empty())
            return false;
        } else if (isa<memref::ExtractAlignedPointerAsIndexOp>(user)) {
          if (!onlyPointerOf(user, gemm.getOperand(kC)))
            return false;
        } else {
          return false;
        }
      }
    }
    if (!in)
      return false;
    auto productType = cast<MemRefType>(product.getType());
    auto inType = cast<MemRefType>(call.getOperand(*in).getType());
    if (!isIdentityStatic(inType) ||
        inType.getShape().back() != productType.getShape().back())
      return false;
    std::optional<BiasKernel> match = matchBiasKernel(kernel, *in);
    if (!match || (match->roundsToBf16 && !bf16In))
      return false;
    Value out = call.getOperand(match->out),
          bias = call.getOperand(match->bias);
    if (!isIdentityStatic(out.getType()) ||
        cast<MemRefType>(out.getType()).getShape() != inType.getShape())
      return false;
    // The call writes the output while it reads A, B and the bias, which
    // the planner may have placed where the output is once the GEMM was
    // done with them.
    Value a = bufferOfPointer(gemm.getOperand(kA));
    Value b = bufferOfPointer(gemm.getOperand(kB));
    Place outPlace = placeOf(out), biasPlace = placeOf(bias);
    if (!a || !b || biasPlace.root == kConstant ||
        !outPlace.disjointFrom(placeOf(a)) ||
        !outPlace.disjointFrom(placeOf(b)) || !outPlace.disjointFrom(biasPlace))
      return false;

    StringRef name = !bf16In               ? "weft_rt_cuda_sgemm_bias"
                     : match->roundsToBf16 ? "weft_rt_cuda_sbgemm_bf16_bias"
                                           : "weft_rt_cuda_sbgemm_bias";
    OpBuilder builder(call);
    Location loc = call.getLoc();
    SmallVector<Value> operands(gemm.getOperands().take_front(kC));
    operands.push_back(weft::pointerToBuffer(builder, loc, bias));
    operands.push_back(weft::pointerToBuffer(builder, loc, out));
    operands.append(gemm.getOperands().begin() + kC + 1,
                    gemm.getOperands().end());
    auto type =
        builder.getFunctionType(ValueRange(operands).getTypes(), TypeRange());
    func::FuncOp fn =
        weft::getOrDeclareRuntimeFunction(builder, module, gemm, name, type);
    if (!fn)
      return false;
    func::CallOp::create(builder, loc, fn, operands);
    SmallVector<Operation *> dead = {gemm, call};
    while (!dead.empty()) {
      Operation *op = dead.pop_back_val();
      SmallVector<Value> operands(op->getOperands());
      op->erase();
      for (Value v : operands)
        if (Operation *def = v.getDefiningOp())
          if (isOpTriviallyDead(def) && !llvm::is_contained(dead, def))
            dead.push_back(def);
    }
    if (kernel.symbolKnownUseEmpty(module))
      kernel.erase();
    ++numFused;
    return true;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>(function);
    if (!step || step.isDeclaration())
      return;
    // Only GEMMs: fusing erases the kernel call after one.
    SmallVector<func::CallOp> gemms;
    for (auto call : step.getBody().front().getOps<func::CallOp>())
      if (call.getCallee() == "weft_rt_sgemm" ||
          call.getCallee() == "weft_rt_sbgemm")
        gemms.push_back(call);
    for (func::CallOp gemm : gemms)
      fuse(module, gemm);
    for (StringRef name : {"weft_rt_sgemm", "weft_rt_sbgemm"})
      if (auto decl = module.lookupSymbol<func::FuncOp>(name))
        if (decl.symbolKnownUseEmpty(module))
          decl.erase();
  }
};

} // namespace
