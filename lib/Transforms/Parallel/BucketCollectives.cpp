//===- BucketCollectives.cpp - Reductions in buckets -----------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Sending every gradient alone costs a round of latency per tensor, and a
// step that waits for each reduction where it stands computes nothing while
// the bytes travel. Grouping consecutive reductions into buckets (as
// PyTorch DDP does with its gradient buckets) pays the latency once per
// bucket; waiting only where a result is first used lets the backward pass
// go on while a bucket travels. This pass only decides the groups; the
// runtime calls that realise them come from --weft-lower-collectives.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Transforms/Parallel/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"


namespace weft {
#define GEN_PASS_DEF_BUCKETCOLLECTIVESPASS
#include "weft/Transforms/Parallel/Passes.h.inc"
} // namespace weft

using namespace mlir;
using weft::WeftDialect;

namespace {

/// The collectives a bucket may hold: f32 tensors (the partitioner widens
/// other types around collectives), with static shapes.
bool isBucketable(Operation *op) {
  if (!isa<weft::AllReduceOp, weft::ReduceScatterOp, weft::AllGatherOp>(op))
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  return type && type.hasStaticShape() && type.getElementType().isF32();
}

/// A gather of a step argument (a ZeRO-3 parameter shard): its input
/// exists from the start, so it can be issued ahead of its use.
bool isPrefetchable(Operation *op, Block &block) {
  auto arg = dyn_cast<BlockArgument>(op->getOperand(0));
  return isa<weft::AllGatherOp>(op) && arg && arg.getOwner() == &block;
}

/// Bytes the op puts into its bucket: its whole input.
int64_t bytesOf(Operation *op) {
  auto type = cast<RankedTensorType>(op->getOperand(0).getType());
  return type.getNumElements() * 4;
}

/// The first op of `block` that uses a result of `op` (directly or through
/// an op nested in it); null when nothing does.
Operation *firstUser(Block &block, Operation *op) {
  Operation *first = nullptr;
  for (Operation *user : op->getUsers()) {
    Operation *top = block.findAncestorOpInBlock(*user);
    if (top && (!first || top->isBeforeInBlock(first)))
      first = top;
  }
  return first;
}

struct BucketCollectivesPass
    : public weft::impl::BucketCollectivesPassBase<BucketCollectivesPass> {
  using Base::Base;

  void runOnOperation() override {
    if (bucketMB < 0) {
      getOperation().emitError()
          << "--weft-bucket-collectives: bucket-mb must be >= 0, got "
          << bucketMB;
      return signalPassFailure();
    }
    if (bucketMB == 0)
      return;
    auto capacity = int64_t(bucketMB * double(1 << 20));
    int64_t next = 0;
    getOperation().walk([&](func::FuncOp fn) {
      for (Block &block : fn.getBody()) {
        prefetchGathers(block);
        bucketBlock(block, capacity, next);
      }
    });
  }

  /// ZeRO-3 gathers every parameter where it is used. Each such gather is
  /// moved up to where the previous one stands, so it travels while the
  /// ops between compute; at most one gathered parameter more than without
  /// prefetching is alive at a time.
  void prefetchGathers(Block &block) {
    SmallVector<Operation *> gathers;
    for (Operation &op : block)
      if (isBucketable(&op) && isPrefetchable(&op, block))
        gathers.push_back(&op);
    // Back to front, so each moves after its predecessor's own place.
    for (size_t i = gathers.size(); i-- > 1;)
      gathers[i]->moveAfter(gathers[i - 1]);
  }

  struct OpenBucket {
    SmallVector<Operation *> members;
    int64_t bytes = 0;
    Operation *firstUse = nullptr;
  };

  /// Greedy in program order, one open bucket per kind and axes: an op
  /// joins its open bucket when it fits and no result of the bucket has
  /// been used yet (the bucket starts after its last member, so a use
  /// before that would wait for a collective not yet started). A
  /// prefetched gather travels alone, so that waiting for it does not
  /// wait for the next one.
  void bucketBlock(Block &block, int64_t capacity, int64_t &next) {
    MLIRContext *context = &getContext();
    // In order of first appearance, so that bucket ids follow the program.
    SmallVector<std::pair<std::pair<OperationName, Attribute>, OpenBucket>>
        open;
    auto openFor = [&](Operation &op) -> OpenBucket & {
      std::pair<OperationName, Attribute> key{op.getName(),
                                              op.getAttr("axes")};
      for (auto &[k, bucket] : open)
        if (k == key)
          return bucket;
      return open.emplace_back(key, OpenBucket()).second;
    };
    auto close = [&](OpenBucket &bucket) {
      if (!bucket.members.empty()) {
        auto id = IntegerAttr::get(IntegerType::get(context, 64), next++);
        for (Operation *member : bucket.members)
          member->setAttr(WeftDialect::kBucketAttrName, id);
      }
      bucket = OpenBucket();
    };
    for (Operation &op : block) {
      for (auto &[key, bucket] : open)
        if (bucket.firstUse == &op)
          close(bucket);
      if (!isBucketable(&op))
        continue;
      OpenBucket &bucket = openFor(op);
      int64_t bytes = bytesOf(&op);
      bool alone = isPrefetchable(&op, block);
      if (alone || bucket.bytes + bytes > capacity)
        close(bucket);
      bucket.members.push_back(&op);
      bucket.bytes += bytes;
      Operation *use = firstUser(block, &op);
      if (use && (!bucket.firstUse || use->isBeforeInBlock(bucket.firstUse)))
        bucket.firstUse = use;
      if (alone)
        close(bucket);
    }
    for (auto &[key, bucket] : open)
      close(bucket);
  }
};

} // namespace
