//===- SplitFusedProjections.cpp - One matmul per slice of a projection ---===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Transforms/Parallel/Passes.h"

namespace weft {
#define GEN_PASS_DEF_SPLITFUSEDPROJECTIONSPASS
#include "weft/Transforms/Parallel/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
/// `v` sliced to [start, start + width) along `dim`.
Value sliceAlong(OpBuilder &b, Location loc, Value v, int64_t dim,
                 int64_t start, int64_t width) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> starts(type.getRank(), 0), strides(type.getRank(), 1);
  SmallVector<int64_t> limits(type.getShape());
  starts[dim] = start;
  limits[dim] = start + width;
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = width;
  return SliceOp::create(b, loc,
                         RankedTensorType::get(shape, type.getElementType()),
                         v, b.getDenseI64ArrayAttr(starts),
                         b.getDenseI64ArrayAttr(limits),
                         b.getDenseI64ArrayAttr(strides));
}

/// The common width of `product`'s users if each is a unit-stride slice of
/// its last dimension only, aligned to that width; else 0.
int64_t sliceWidth(Value product) {
  auto type = cast<RankedTensorType>(product.getType());
  int64_t last = type.getRank() - 1, width = 0;
  if (product.use_empty())
    return 0;
  for (Operation *user : product.getUsers()) {
    auto slice = dyn_cast<SliceOp>(user);
    if (!slice)
      return 0;
    for (int64_t d = 0; d <= last; ++d) {
      bool whole = slice.getStarts()[d] == 0 &&
                   slice.getLimits()[d] == type.getDimSize(d);
      if (slice.getStrides()[d] != 1 || (d < last && !whole))
        return 0;
    }
    int64_t w = slice.getLimits()[last] - slice.getStarts()[last];
    if ((width && w != width) || w <= 0 || slice.getStarts()[last] % w != 0)
      return 0;
    width = w;
  }
  return width < type.getDimSize(last) && type.getDimSize(last) % width == 0
             ? width
             : 0;
}

struct SplitFusedProjectionsPass
    : public weft::impl::SplitFusedProjectionsPassBase<
          SplitFusedProjectionsPass> {
  void runOnOperation() override {
    SmallVector<MatMulOp> matmuls;
    getOperation().walk([&](MatMulOp op) { matmuls.push_back(op); });
    for (MatMulOp matmul : matmuls)
      split(matmul);
  }

  void split(MatMulOp matmul) {
    auto weight = cast<RankedTensorType>(matmul.getRhs().getType());
    if (weight.getRank() != 2 || matmul.getTransposeLhs())
      return;
    int64_t columns = matmul.getTransposeRhs() ? 0 : 1;
    int64_t n = weight.getDimSize(columns);
    // The bias add, if the product's one user adds a vector of n.
    AddOp bias;
    Value product = matmul.getResult();
    if (product.hasOneUse())
      if (auto add = dyn_cast<AddOp>(*product.getUsers().begin())) {
        Value other =
            add.getLhs() == product ? add.getRhs() : add.getLhs();
        auto type = cast<RankedTensorType>(other.getType());
        if (type.getRank() == 1 && type.getDimSize(0) == n &&
            add.getResult().getType() == product.getType()) {
          bias = add;
          product = add.getResult();
        }
      }
    int64_t width = sliceWidth(product);
    if (!width)
      return;
    for (Operation *user : llvm::make_early_inc_range(product.getUsers())) {
      auto slice = cast<SliceOp>(user);
      OpBuilder b(slice);
      Location loc = matmul.getLoc();
      int64_t start = slice.getStarts().back();
      Value part = sliceAlong(b, loc, matmul.getRhs(), columns, start, width);
      auto partial = cast<MatMulOp>(b.clone(*matmul));
      partial.getRhsMutable().assign(part);
      partial.getResult().setType(slice.getType());
      Value out = partial.getResult();
      if (bias) {
        bool biasFirst = bias.getRhs() == matmul.getResult();
        Value vector = biasFirst ? bias.getLhs() : bias.getRhs();
        Value piece = sliceAlong(b, loc, vector, 0, start, width);
        auto add = cast<AddOp>(b.clone(*bias));
        add->setOperand(biasFirst ? 0 : 1, piece);
        add->setOperand(biasFirst ? 1 : 0, out);
        add.getResult().setType(slice.getType());
        out = add.getResult();
      }
      slice.getResult().replaceAllUsesWith(out);
      slice.erase();
    }
    if (bias)
      bias.erase();
    matmul.erase();
  }
};
} // namespace
