//===- Attention.cpp - weft.attention to runtime kernel calls -------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// weft.attention and weft.attention_grad become calls of the runtime's
// flash-style kernels (include/weft/Runtime/Attention.h): a composition of
// linalg ops would have to materialize the [T, S] scores, which is what the
// fused op exists to avoid. The calls live on tensors, bracketed by
// bufferization.to_buffer / to_tensor as --weft-lower-collectives' are: the
// operands are read through their buffers (identity layout, so a strided
// view is copied by bufferization), the results are fresh 64-byte aligned
// buffers the call writes, and later passes see ordinary producers.
//
// f32 ops call weft_rt_attention_f32 / _grad_f32, bf16 ops (whose
// log-sum-exp is f32) weft_rt_attention_bf16 / _grad_bf16, with the same
// arguments (the CPU runtime widens bf16 to f32 for its kernels; --target
// cuda renames both pairs to their weft_rt_cuda_ versions).
// --weft-fuse-attention builds bf16 ops only when asked to (bf16=true).
// Another element type is an error naming the op.
//
//===----------------------------------------------------------------------===//

#include "Lowerings.h"

#include "weft/Dialect/Weft/IR/RuntimeCalls.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace weft;

namespace {

/// The kernels of an element type; null names for one without kernels.
struct Kernels {
  StringRef forward, backward;
};

Kernels kernelsFor(Type elementType) {
  if (elementType.isF32())
    return {"weft_rt_attention_f32", "weft_rt_attention_grad_f32"};
  if (elementType.isBF16())
    return {"weft_rt_attention_bf16", "weft_rt_attention_grad_bf16"};
  return {};
}

/// The sizes the kernels take: heads (the product of the leading axes),
/// T, S, D and Dv.
struct Sizes {
  int64_t heads = 1, t, s, d, dv;
  static Sizes of(Value query, Value key, Value value) {
    auto q = cast<RankedTensorType>(query.getType());
    auto v = cast<RankedTensorType>(value.getType());
    Sizes n;
    int64_t r = q.getRank();
    for (int64_t x : q.getShape().drop_back(2))
      n.heads *= x;
    n.t = q.getDimSize(r - 2);
    n.d = q.getDimSize(r - 1);
    n.s = cast<RankedTensorType>(key.getType()).getDimSize(r - 2);
    n.dv = v.getDimSize(r - 1);
    return n;
  }
};

/// Declares `name(i64 x5, f32, i32, ptr x pointers)` once per module;
/// null after an error on `op` when the name is taken by another type.
func::FuncOp declareKernel(ConversionPatternRewriter &rewriter, Operation *op,
                           StringRef name, unsigned pointers) {
  auto module = op->getParentOfType<ModuleOp>();
  MLIRContext *ctx = op->getContext();
  Type i64 = IntegerType::get(ctx, 64);
  SmallVector<Type> args(5, i64);
  args.push_back(Float32Type::get(ctx));
  args.push_back(IntegerType::get(ctx, 32));
  args.append(pointers, LLVM::LLVMPointerType::get(ctx));
  return getOrDeclareRuntimeFunction(rewriter, module, op, name,
                                     FunctionType::get(ctx, args, {}));
}

/// The kernel call's leading scalar arguments.
SmallVector<Value> scalarArgs(OpBuilder &b, Location loc, const Sizes &n,
                              double scale, bool causal) {
  SmallVector<Value> args;
  for (int64_t x : {n.heads, n.t, n.s, n.d, n.dv})
    args.push_back(arith::ConstantIntOp::create(b, loc, b.getI64Type(), x));
  args.push_back(arith::ConstantFloatOp::create(
      b, loc, b.getF32Type(), APFloat(static_cast<float>(scale))));
  args.push_back(
      arith::ConstantIntOp::create(b, loc, b.getI32Type(), causal ? 1 : 0));
  return args;
}

/// A pointer to `tensor`'s buffer. The backward's reads are not marked
/// read-only, only so that they differ from the forward's: CSE would
/// otherwise merge the backward's bufferization.to_buffer of q, k and v
/// (Pure) into the forward's, and bufferization, seeing no later read of
/// the tensors, would let later ops reuse their buffers before the
/// backward's call reads them through the pointer. (Not read-only, a read
/// is at worst a copy, where the tensor has later users.)
Value readPointer(OpBuilder &b, Location loc, Value tensor, bool readOnly) {
  auto type = cast<RankedTensorType>(tensor.getType());
  Value buffer = bufferization::ToBufferOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType()), tensor,
      readOnly);
  return pointerToBuffer(b, loc, buffer);
}

/// A fresh buffer for a result of `type`.
Value freshBuffer(OpBuilder &b, Location loc, Type type) {
  auto t = cast<RankedTensorType>(type);
  return memref::AllocOp::create(
      b, loc, MemRefType::get(t.getShape(), t.getElementType()),
      b.getI64IntegerAttr(64));
}

/// Emits the call of the forward or backward kernel for `op`'s element type
/// (its query's) with `inputs` read and fresh buffers for the results of
/// `op`, and replaces `op` by the written buffers as tensors.
LogicalResult lowerToCall(ConversionPatternRewriter &rewriter, Operation *op,
                          Value query, bool backward, const Sizes &n,
                          double scale, bool causal, ValueRange inputs,
                          bool readOnly) {
  Type elementType = cast<RankedTensorType>(query.getType()).getElementType();
  Kernels kernels = kernelsFor(elementType);
  if (kernels.forward.empty())
    return op->emitError()
           << "lowers only on f32 or bf16 (the runtime's attention "
              "kernels); got "
           << elementType
           << ". --weft-fuse-attention builds it on those alone; unfuse it, "
              "or cast the operands to f32";
  StringRef name = backward ? kernels.backward : kernels.forward;
  func::FuncOp fn = declareKernel(rewriter, op, name,
                                  inputs.size() + op->getNumResults());
  if (!fn)
    return failure();
  Location loc = op->getLoc();
  SmallVector<Value> args = scalarArgs(rewriter, loc, n, scale, causal);
  for (Value input : inputs)
    args.push_back(readPointer(rewriter, loc, input, readOnly));
  SmallVector<Value> buffers;
  for (Type t : op->getResultTypes()) {
    buffers.push_back(freshBuffer(rewriter, loc, t));
    args.push_back(pointerToBuffer(rewriter, loc, buffers.back()));
  }
  func::CallOp::create(rewriter, loc, fn, args);
  SmallVector<Value> results;
  for (auto [buffer, t] : llvm::zip(buffers, op->getResultTypes()))
    results.push_back(bufferization::ToTensorOp::create(
        rewriter, loc, t, buffer, /*restrict=*/true, /*writable=*/true));
  rewriter.replaceOp(op, results);
  return success();
}

struct AttentionLowering : OpConversionPattern<AttentionOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(AttentionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Sizes n = Sizes::of(op.getQuery(), op.getKey(), op.getValue());
    return lowerToCall(
        rewriter, op, op.getQuery(), /*backward=*/false, n,
        op.getScale().convertToDouble(), op.getCausal(),
        {adaptor.getQuery(), adaptor.getKey(), adaptor.getValue()},
        /*readOnly=*/true);
  }
};

struct AttentionGradLowering : OpConversionPattern<AttentionGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(AttentionGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Sizes n = Sizes::of(op.getQuery(), op.getKey(), op.getValue());
    return lowerToCall(rewriter, op, op.getQuery(), /*backward=*/true, n,
                       op.getScale().convertToDouble(), op.getCausal(),
                       {adaptor.getResultGrad(), adaptor.getQuery(),
                        adaptor.getKey(), adaptor.getValue(),
                        adaptor.getResult(), adaptor.getLogsumexp()},
                       /*readOnly=*/false);
  }
};

} // namespace

void lowering::populateAttentionPatterns(RewritePatternSet &patterns) {
  patterns.add<AttentionLowering, AttentionGradLowering>(
      patterns.getContext());
}
