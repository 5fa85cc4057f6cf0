//===- SplitFusedProjections.cpp - One matmul per slice of a projection ---===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Transforms/Parallel/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/GlobPattern.h"

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

/// A parameter that the pass may hold as a view: an argument of a
/// function nothing calls (the model's forward, before the step is built),
/// read only by the projection, through at most one transpose. Its `dim`
/// holds the product's columns.
struct Viewable {
  BlockArgument arg;
  TransposeOp transpose;
  int64_t dim = 0;
};

std::optional<Viewable> viewable(Value operand, int64_t columns,
                                 ArrayRef<llvm::GlobPattern> given) {
  Viewable v;
  v.transpose = operand.getDefiningOp<TransposeOp>();
  if (v.transpose) {
    if (!v.transpose->hasOneUse())
      return std::nullopt;
    operand = v.transpose.getInput();
    columns = v.transpose.getPermutation()[columns];
  }
  v.arg = dyn_cast<BlockArgument>(operand);
  if (!v.arg || !v.arg.hasOneUse())
    return std::nullopt;
  auto fn = dyn_cast<func::FuncOp>(v.arg.getOwner()->getParentOp());
  if (!fn || v.arg.getOwner() != &fn.front() ||
      !fn.getArgAttr(v.arg.getArgNumber(), WeftDialect::kParamAttrName) ||
      fn.getArgAttr(v.arg.getArgNumber(), WeftDialect::kStoredShapeAttrName))
    return std::nullopt;
  auto name = fn.getArgAttrOfType<StringAttr>(v.arg.getArgNumber(),
                                              WeftDialect::kParamAttrName);
  for (const llvm::GlobPattern &pattern : given)
    if (name && pattern.match(name.getValue()))
      return std::nullopt;
  auto module = fn->getParentOfType<ModuleOp>();
  if (module && !SymbolTable::symbolKnownUseEmpty(fn, module))
    return std::nullopt;
  v.dim = columns;
  return v;
}

/// Holds `v.arg` as a view whose dimension `v.dim` of g * width elements
/// is [g, width], recording the shape the weights know it by.
void holdAsView(Viewable v, int64_t width) {
  auto type = cast<RankedTensorType>(v.arg.getType());
  auto fn = cast<func::FuncOp>(v.arg.getOwner()->getParentOp());
  SmallVector<int64_t> shape(type.getShape());
  shape[v.dim] = width;
  shape.insert(shape.begin() + v.dim, type.getDimSize(v.dim) / width);
  fn.setArgAttr(v.arg.getArgNumber(), WeftDialect::kStoredShapeAttrName,
                DenseI64ArrayAttr::get(fn.getContext(), type.getShape()));
  v.arg.setType(type.clone(shape));
  fn.setType(FunctionType::get(fn.getContext(), fn.front().getArgumentTypes(),
                               fn.getResultTypes()));
}

/// Part `index` of a viewed parameter: [.., width, ..], as it was held.
Value partOfView(OpBuilder &b, Location loc, const Viewable &v,
                 int64_t index) {
  Value slab = sliceAlong(b, loc, v.arg, v.dim, index, 1);
  auto type = cast<RankedTensorType>(slab.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape.erase(shape.begin() + v.dim);
  return ReshapeOp::create(b, loc, type.clone(shape), slab);
}

struct SplitFusedProjectionsPass
    : public weft::impl::SplitFusedProjectionsPassBase<
          SplitFusedProjectionsPass> {
  using Base::Base;

  void runOnOperation() override {
    for (const std::string &glob : given) {
      llvm::Expected<llvm::GlobPattern> pattern =
          llvm::GlobPattern::create(glob);
      if (!pattern) {
        // --weft-apply-mesh reports the malformed --shard entry.
        llvm::consumeError(pattern.takeError());
        continue;
      }
      patterns.push_back(std::move(*pattern));
    }
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
    // A weight that is a parameter read here alone is held as a view
    // [.., parts, width, ..], so a tp split of `width` is a block per rank
    // of every part (its heads of q, k and v) and the parameter and its
    // optimizer state are split with its parts rather than kept whole.
    std::optional<Viewable> weightView = viewable(matmul.getRhs(), columns, patterns);
    std::optional<Viewable> biasView;
    if (bias) {
      Value vector = bias.getRhs() == matmul.getResult() ? bias.getLhs()
                                                         : bias.getRhs();
      biasView = viewable(vector, 0, patterns);
    }
    if (weightView)
      holdAsView(*weightView, width);
    if (biasView)
      holdAsView(*biasView, width);
    for (Operation *user : llvm::make_early_inc_range(product.getUsers())) {
      auto slice = cast<SliceOp>(user);
      OpBuilder b(slice);
      Location loc = matmul.getLoc();
      int64_t start = slice.getStarts().back();
      Value part;
      if (weightView) {
        part = partOfView(b, loc, *weightView, start / width);
        if (TransposeOp t = weightView->transpose)
          part = TransposeOp::create(b, loc, part, t.getPermutation());
      } else {
        part = sliceAlong(b, loc, matmul.getRhs(), columns, start, width);
      }
      auto partial = cast<MatMulOp>(b.clone(*matmul));
      partial.getRhsMutable().assign(part);
      partial.getResult().setType(slice.getType());
      Value out = partial.getResult();
      if (bias) {
        bool biasFirst = bias.getRhs() == matmul.getResult();
        Value vector = biasFirst ? bias.getLhs() : bias.getRhs();
        Value piece = biasView ? partOfView(b, loc, *biasView, start / width)
                               : sliceAlong(b, loc, vector, 0, start, width);
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
    if (weightView && weightView->transpose)
      weightView->transpose.erase();
  }

  SmallVector<llvm::GlobPattern> patterns;
};
} // namespace
