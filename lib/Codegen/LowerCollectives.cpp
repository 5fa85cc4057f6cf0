//===- LowerCollectives.cpp - Collectives to runtime calls ----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// A partitioned step moves data between ranks with weft.all_reduce,
// weft.all_gather, weft.reduce_scatter and weft.all_to_all, between
// pipeline stages with weft.send and weft.recv, and slices its own block
// with weft.shard_slice. The runtime owns the communicators (one
// per mesh axis, reached through the WeftRuntimeContext), so each
// collective becomes a call of a runtime C function
// (include/weft/Runtime/Collectives.h's `weft_rt_*`) that takes the
// context, the mesh axes as a bit mask, and plain pointers. The calls live
// on tensors, bracketed by bufferization.to_buffer / to_tensor, so the rest
// of the pipeline (bufferization, out-parameters, buffer planning) sees an
// ordinary producer of a fresh buffer.
//
// A bucket of collectives (`weft.bucket`, --weft-bucket-collectives) runs as
// one collective on the runtime's communication thread: each member's
// input is copied into the bucket's flat buffer where the member stands
// (`put`), the collective starts after the last member (`start`), and each
// result is copied out of the buffer where the first result of the bucket
// is used (`get`, which waits for the collective). Every call is
// synchronous on the buffers the step sees, so bufferization and buffer
// planning need no notion of work in flight.
//
//===----------------------------------------------------------------------===//

#include "weft/Codegen/Passes.h"
#include "weft/Dialect/Weft/IR/RuntimeCalls.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <map>

namespace weft {
#define GEN_PASS_DEF_LOWERCOLLECTIVESPASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;
using weft::WeftDialect;

namespace {
// The runtime's entry points (lib/Runtime/CollectivesC.cpp).
constexpr llvm::StringLiteral kAllReduceName = "weft_rt_all_reduce_f32";
constexpr llvm::StringLiteral kAllGatherName = "weft_rt_all_gather_f32";
constexpr llvm::StringLiteral kReduceScatterName =
    "weft_rt_reduce_scatter_f32";
constexpr llvm::StringLiteral kAllToAllName = "weft_rt_all_to_all_f32";
constexpr llvm::StringLiteral kSendName = "weft_rt_send_f32";
constexpr llvm::StringLiteral kRecvName = "weft_rt_recv_f32";
constexpr llvm::StringLiteral kAxisIndexName = "weft_rt_axis_index";
constexpr llvm::StringLiteral kBucketPutName = "weft_rt_bucket_put_f32";
constexpr llvm::StringLiteral kBucketStartName = "weft_rt_bucket_start";
constexpr llvm::StringLiteral kBucketGetName = "weft_rt_bucket_get_f32";

int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

struct LowerCollectivesPass
    : public weft::impl::LowerCollectivesPassBase<LowerCollectivesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto entryFn = module.lookupSymbol<func::FuncOp>(entry);
    SmallVector<Operation *> collectives;
    bool misplaced = false;
    module.walk([&](Operation *op) {
      if (!isa<weft::AllReduceOp, weft::AllGatherOp, weft::ReduceScatterOp,
               weft::AllToAllOp, weft::SendOp, weft::RecvOp, weft::ShardSliceOp,
               weft::AxisIndexOp>(op))
        return;
      if (op->getParentOfType<func::FuncOp>() != entryFn) {
        // Only the entry receives the context; the partitioner works on the
        // inlined step.
        op->emitError() << "is outside @" << entry
                        << ", the only function that receives the runtime "
                           "context";
        misplaced = true;
        return;
      }
      collectives.push_back(op);
    });
    if (misplaced)
      return signalPassFailure();
    if (collectives.empty())
      return;
    mesh = module->getAttrOfType<weft::MeshAttr>(WeftDialect::kMeshAttrName);
    if (!mesh) {
      collectives.front()->emitError()
          << "needs the module's " << WeftDialect::kMeshAttrName
          << " to know the mesh its axes belong to";
      return signalPassFailure();
    }
    Value context = getOrAddContextArg(entryFn);
    // Buckets by id, members in program order (the walk's order).
    std::map<int64_t, SmallVector<Operation *>> buckets;
    for (Operation *op : collectives) {
      if (auto id = op->getAttrOfType<IntegerAttr>(
              WeftDialect::kBucketAttrName)) {
        buckets[id.getInt()].push_back(op);
        continue;
      }
      if (failed(lower(op, context)))
        return signalPassFailure();
    }
    for (auto &[id, members] : buckets)
      if (failed(lowerBucket(id, members, context)))
        return signalPassFailure();
  }

private:
  weft::MeshAttr mesh;

  /// The entry's `weft.context` argument, added first when missing.
  Value getOrAddContextArg(func::FuncOp fn) {
    for (BlockArgument arg : fn.getArguments())
      if (fn.getArgAttr(arg.getArgNumber(), WeftDialect::kContextAttrName))
        return arg;
    MLIRContext *ctx = &getContext();
    auto attrs = DictionaryAttr::get(
        ctx, {NamedAttribute(StringAttr::get(ctx, WeftDialect::kContextAttrName),
                             UnitAttr::get(ctx))});
    if (failed(fn.insertArgument(0, LLVM::LLVMPointerType::get(ctx), attrs,
                                 fn.getLoc())))
      return nullptr;
    return fn.getArgument(0);
  }

  /// The axes as a bit mask over the mesh's axes (bit i: axis i, major
  /// first). The runtime numbers a group's ranks row-major in mesh order,
  /// so the op must list its axes in that order.
  FailureOr<int64_t> axisMask(Operation *op, ArrayAttr axes) {
    int64_t mask = 0;
    int last = -1;
    ArrayRef<StringAttr> names = mesh.getNames();
    for (Attribute a : axes) {
      auto name = cast<StringAttr>(a);
      auto it = llvm::find(names, name);
      if (it == names.end())
        return op->emitError() << "names axis \"" << name.getValue()
                               << "\", which the mesh " << mesh
                               << " does not have";
      int index = int(it - names.begin());
      if (index <= last)
        return op->emitError() << "lists its axes " << axes
                               << " in another order than the mesh " << mesh;
      last = index;
      mask |= int64_t(1) << index;
    }
    if (!mask)
      return op->emitError() << "names no mesh axis";
    return mask;
  }

  func::FuncOp getOrDeclare(Operation *op, StringRef name, FunctionType type) {
    OpBuilder b(op->getContext());
    return weft::getOrDeclareRuntimeFunction(b, getOperation(), op, name, type);
  }

  /// One bucket: a put per member where it stands, the start after the
  /// last, the gets before the first use of any result.
  LogicalResult lowerBucket(int64_t id, ArrayRef<Operation *> members,
                            Value context) {
    Operation *front = members.front();
    Block *block = front->getBlock();
    if (!isa<weft::AllReduceOp, weft::ReduceScatterOp, weft::AllGatherOp>(
            front))
      return front->emitError()
             << "has " << WeftDialect::kBucketAttrName << " " << id
             << ", but a bucket holds all_reduce, reduce_scatter or "
                "all_gather ops only";
    // The runtime's kinds: 0 all-reduce, 1 reduce-scatter, 2 all-gather.
    int64_t kind = isa<weft::ReduceScatterOp>(front) ? 1
                   : isa<weft::AllGatherOp>(front)   ? 2
                                                     : 0;
    auto axes = front->getAttrOfType<ArrayAttr>("axes");
    for (Operation *op : members)
      if (op->getBlock() != block || op->getName() != front->getName() ||
          op->getAttr("axes") != axes)
        return op->emitError()
               << "shares " << WeftDialect::kBucketAttrName << " " << id
               << " with " << *front
               << ", but a bucket holds collectives of one kind over the "
                  "same axes, in one block";
    FailureOr<int64_t> mask = axisMask(front, axes);
    if (failed(mask))
      return failure();
    for (Operation *op : members)
      if (Type element = cast<RankedTensorType>(op->getOperand(0).getType())
                             .getElementType();
          !element.isF32())
        return op->emitError()
               << "has element type " << element
               << ": the runtime's collectives take f32 (cast around them)";

    // Where the results are first needed: before the first op using any
    // of them, or the block's end when nothing does.
    Operation *last = members.back();
    Operation *waitAt = block->getTerminator();
    for (Operation *op : members)
      for (Operation *user : op->getUsers()) {
        Operation *top = block->findAncestorOpInBlock(*user);
        if (top && top->isBeforeInBlock(waitAt))
          waitAt = top;
      }
    if (waitAt->isBeforeInBlock(last) || waitAt == last)
      return waitAt->emitError()
             << "uses a result of bucket " << id
             << " before its last member, " << *last
             << ", starts it (the step changed after "
                "--weft-bucket-collectives)";

    MLIRContext *ctx = &getContext();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    Type i64 = IntegerType::get(ctx, 64);
    auto constI64 = [&](OpBuilder &b, Location loc, int64_t v) -> Value {
      return arith::ConstantIntOp::create(b, loc, i64, v);
    };
    func::FuncOp put = getOrDeclare(
        front, kBucketPutName,
        FunctionType::get(ctx, {ptr, i64, i64, i64, i64, i64, ptr, i64, i64},
                          {}));
    func::FuncOp start = getOrDeclare(
        front, kBucketStartName,
        FunctionType::get(ctx, {ptr, i64, i64, i64, i64}, {}));
    func::FuncOp get = getOrDeclare(
        front, kBucketGetName,
        FunctionType::get(ctx, {ptr, i64, i64, i64, ptr, i64, i64}, {}));
    if (!put || !start || !get)
      return failure();

    // Each member's rank block is [outer][inner]: the result of a
    // reduce-scatter, the input of an all-gather (split along `dim`), the
    // whole tensor for an all-reduce. Members sit one after another in the
    // flat buffer (in each rank's region, for a reduce-scatter or gather).
    SmallVector<int64_t> offsets, outers, inners;
    int64_t region = 0;
    for (Operation *op : members) {
      Value local = kind == 2 ? op->getOperand(0) : op->getResult(0);
      auto localType = cast<RankedTensorType>(local.getType());
      int64_t outer = 1, inner = localType.getNumElements();
      if (kind != 0) {
        int64_t dim = op->getAttrOfType<IntegerAttr>("dim").getInt();
        outer = product(localType.getShape().take_front(dim));
        inner = product(localType.getShape().drop_front(dim));
      }
      offsets.push_back(region);
      outers.push_back(outer);
      inners.push_back(inner);
      region += outer * inner;
    }

    for (auto [i, op] : llvm::enumerate(members)) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      Value input = op->getOperand(0);
      auto inType = cast<RankedTensorType>(input.getType());
      Value inBuf = bufferization::ToBufferOp::create(
          b, loc, MemRefType::get(inType.getShape(), inType.getElementType()),
          input, /*read_only=*/true);
      func::CallOp::create(
          b, loc, put,
          ValueRange{context, constI64(b, loc, *mask), constI64(b, loc, id),
                     constI64(b, loc, kind), constI64(b, loc, region),
                     constI64(b, loc, offsets[i]),
                     weft::pointerToBuffer(b, loc, inBuf),
                     constI64(b, loc, outers[i]), constI64(b, loc, inners[i])});
    }
    {
      OpBuilder b = OpBuilder::atBlockEnd(block);
      b.setInsertionPointAfter(last);
      Location loc = last->getLoc();
      func::CallOp::create(b, loc, start,
                           ValueRange{context, constI64(b, loc, *mask),
                                      constI64(b, loc, id),
                                      constI64(b, loc, kind),
                                      constI64(b, loc, region)});
    }
    OpBuilder b(waitAt);
    for (auto [i, op] : llvm::enumerate(members)) {
      Location loc = op->getLoc();
      auto outType = cast<RankedTensorType>(op->getResult(0).getType());
      auto outBufType =
          MemRefType::get(outType.getShape(), outType.getElementType());
      Value outBuf = memref::AllocOp::create(b, loc, outBufType,
                                             b.getI64IntegerAttr(64));
      func::CallOp::create(
          b, loc, get,
          ValueRange{context, constI64(b, loc, *mask), constI64(b, loc, id),
                     constI64(b, loc, offsets[i]),
                     weft::pointerToBuffer(b, loc, outBuf),
                     constI64(b, loc, outers[i]), constI64(b, loc, inners[i])});
      Value result = bufferization::ToTensorOp::create(
          b, loc, outType, outBuf, /*restrict=*/true, /*writable=*/true);
      op->getResult(0).replaceAllUsesWith(result);
    }
    for (Operation *op : members)
      op->erase();
    return success();
  }

  LogicalResult lower(Operation *op, Value context) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    auto axes = op->getAttrOfType<ArrayAttr>("axes");
    FailureOr<int64_t> mask = axisMask(op, axes);
    if (failed(mask))
      return failure();
    Type ptr = LLVM::LLVMPointerType::get(b.getContext());
    Type i64 = b.getI64Type();
    auto constI64 = [&](int64_t v) -> Value {
      return arith::ConstantIntOp::create(b, loc, i64, v);
    };

    if (isa<weft::AxisIndexOp>(op)) {
      func::FuncOp fn = getOrDeclare(op, kAxisIndexName,
                                     b.getFunctionType({ptr, i64}, {i64}));
      if (!fn)
        return failure();
      Value index =
          func::CallOp::create(b, loc, fn, ValueRange{context, constI64(*mask)})
              .getResult(0);
      Value result = tensor::FromElementsOp::create(
          b, loc, RankedTensorType::get({}, i64), ValueRange{index});
      op->getResult(0).replaceAllUsesWith(result);
      op->erase();
      return success();
    }

    if (auto slice = dyn_cast<weft::ShardSliceOp>(op)) {
      // No communication: this rank's block, at its coordinate times the
      // block size.
      func::FuncOp fn = getOrDeclare(op, kAxisIndexName,
                                     b.getFunctionType({ptr, i64}, {i64}));
      if (!fn)
        return failure();
      auto type = cast<RankedTensorType>(slice.getResult().getType());
      int64_t dim = int64_t(slice.getDim());
      Value coord =
          func::CallOp::create(b, loc, fn, ValueRange{context, constI64(*mask)})
              .getResult(0);
      Value offset = arith::MulIOp::create(b, loc, coord,
                                           constI64(type.getDimSize(dim)));
      SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
      offsets[dim] =
          arith::IndexCastOp::create(b, loc, b.getIndexType(), offset)
              .getResult();
      SmallVector<OpFoldResult> sizes, strides(type.getRank(),
                                               b.getIndexAttr(1));
      for (int64_t size : type.getShape())
        sizes.push_back(b.getIndexAttr(size));
      Value result = tensor::ExtractSliceOp::create(
          b, loc, type, slice.getInput(), offsets, sizes, strides);
      op->getResult(0).replaceAllUsesWith(result);
      op->erase();
      return success();
    }

    if (isa<weft::SendOp, weft::RecvOp>(op))
      return lowerTransfer(b, op, context, *mask);

    Value input = op->getOperand(0);
    auto inType = cast<RankedTensorType>(input.getType());
    auto outType = cast<RankedTensorType>(op->getResult(0).getType());
    if (!inType.getElementType().isF32())
      return op->emitError()
             << "has element type " << inType.getElementType()
             << ": the runtime's collectives take f32 (cast around them)";

    // Runtime layout of the call: (ctx, mask, in, out, sizes...).
    StringRef name;
    SmallVector<int64_t> sizes;
    if (isa<weft::AllReduceOp>(op)) {
      name = kAllReduceName;
      sizes = {product(inType.getShape())};
    } else if (auto allToAll = dyn_cast<weft::AllToAllOp>(op)) {
      // Every block sent or received has the input's shape with split_dim
      // cut into the group's n (= the result's with concat_dim cut): the
      // input is [outer][n][inner] split where split_dim starts, the
      // result [outer][n][inner] split where concat_dim starts.
      name = kAllToAllName;
      int64_t split = int64_t(allToAll.getSplitDim());
      int64_t concat = int64_t(allToAll.getConcatDim());
      SmallVector<int64_t> block(outType.getShape());
      block[concat] = inType.getDimSize(concat);
      ArrayRef<int64_t> shape(block);
      sizes = {
          product(shape.take_front(split)), product(shape.drop_front(split)),
          product(shape.take_front(concat)), product(shape.drop_front(concat))};
    } else {
      // Along `dim`: the elements before it (outer) and this rank's block
      // from it on (inner), so the runtime interleaves the ranks' blocks.
      int64_t dim = int64_t(op->getAttrOfType<IntegerAttr>("dim").getInt());
      bool gather = isa<weft::AllGatherOp>(op);
      name = gather ? kAllGatherName : kReduceScatterName;
      ArrayRef<int64_t> local =
          gather ? inType.getShape() : outType.getShape();
      sizes = {product(local.take_front(dim)), product(local.drop_front(dim))};
    }
    SmallVector<Type> argTypes = {ptr, i64, ptr, ptr};
    argTypes.append(sizes.size(), i64);
    func::FuncOp fn =
        getOrDeclare(op, name, b.getFunctionType(argTypes, TypeRange{}));
    if (!fn)
      return failure();

    auto inBufType = MemRefType::get(inType.getShape(), inType.getElementType());
    auto outBufType =
        MemRefType::get(outType.getShape(), outType.getElementType());
    Value inBuf = bufferization::ToBufferOp::create(b, loc, inBufType, input,
                                                    /*read_only=*/true);
    Value outBuf = memref::AllocOp::create(b, loc, outBufType,
                                           b.getI64IntegerAttr(64));
    SmallVector<Value> args = {context, constI64(*mask),
                               weft::pointerToBuffer(b, loc, inBuf),
                               weft::pointerToBuffer(b, loc, outBuf)};
    for (int64_t size : sizes)
      args.push_back(constI64(size));
    func::CallOp::create(b, loc, fn, args);
    // The buffer is fresh and written only by the call: later ops may
    // update it in place.
    Value result = bufferization::ToTensorOp::create(
        b, loc, outType, outBuf, /*restrict=*/true, /*writable=*/true);
    op->getResult(0).replaceAllUsesWith(result);
    op->erase();
    return success();
  }

  /// weft.send -> weft_rt_send_f32(ctx, mask, in, count, peer, tag), its
  /// input read as a collective's is; weft.recv -> weft_rt_recv_f32(ctx,
  /// mask, out, count, peer, tag) into a fresh buffer. The calls keep the
  /// ops' program order (nothing moves or drops a call of an external
  /// function).
  LogicalResult lowerTransfer(OpBuilder &b, Operation *op, Value context,
                              int64_t mask) {
    Location loc = op->getLoc();
    auto send = dyn_cast<weft::SendOp>(op);
    auto recv = dyn_cast<weft::RecvOp>(op);
    auto type = cast<RankedTensorType>(send ? send.getInput().getType()
                                            : recv.getResult().getType());
    // A bf16 step's activations travel widened to f32 (exactly: every bf16
    // is an f32) and are narrowed back on arrival, so the runtime keeps one
    // element type for transfers.
    RankedTensorType narrow;
    if (isa<BFloat16Type, Float16Type>(type.getElementType())) {
      narrow = type;
      type = type.clone(b.getF32Type());
    }
    if (!type.getElementType().isF32())
      return op->emitError()
             << "has element type " << type.getElementType()
             << ": the runtime's send and recv take f32 (cast around them)";
    Type ptr = LLVM::LLVMPointerType::get(b.getContext());
    Type i64 = b.getI64Type();
    func::FuncOp fn =
        getOrDeclare(op, send ? kSendName : kRecvName,
                     b.getFunctionType({ptr, i64, ptr, i64, i64, i64}, {}));
    if (!fn)
      return failure();
    auto bufType = MemRefType::get(type.getShape(), type.getElementType());
    Value input = send ? send.getInput() : Value();
    if (send && narrow)
      input = weft::CastOp::create(b, loc, type, input);
    Value buffer =
        send ? Value(bufferization::ToBufferOp::create(
                   b, loc, bufType, input, /*read_only=*/true))
             : Value(memref::AllocOp::create(b, loc, bufType,
                                             b.getI64IntegerAttr(64)));
    int64_t peer = int64_t(send ? send.getPeer() : recv.getPeer());
    int64_t tag = int64_t(send ? send.getTag() : recv.getTag());
    auto constI64 = [&](int64_t v) -> Value {
      return arith::ConstantIntOp::create(b, loc, i64, v);
    };
    func::CallOp::create(b, loc, fn,
                         ValueRange{context, constI64(mask),
                                    weft::pointerToBuffer(b, loc, buffer),
                                    constI64(type.getNumElements()),
                                    constI64(peer), constI64(tag)});
    if (recv) {
      Value result = bufferization::ToTensorOp::create(
          b, loc, type, buffer, /*restrict=*/true, /*writable=*/true);
      if (narrow)
        result = weft::CastOp::create(b, loc, narrow, result);
      recv.getResult().replaceAllUsesWith(result);
    }
    op->erase();
    return success();
  }
};
} // namespace
