//===- VectorLanes.cpp - Several innermost iterations per GPU thread ------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// See VectorLanes.h. The iterations of an scf.parallel body are
// independent, so a thread may run its lanes' ops interleaved: each op for
// every lane before the next op. A load or store at the innermost index
// (the index is the innermost induction variable, the other indices and
// the buffer do not depend on it, the buffer's innermost stride is 1)
// touches `lanes` consecutive elements across the lanes, so it becomes one
// vector.load or vector.store with the vector's size as its alignment.
// That alignment is promised to LLVM (ld.global.v4 and st.global.v4 on
// NVPTX), so each thread first checks it: the buffer's aligned pointer
// plus the element offset of lane 0, for every such access. Where one is
// misaligned (a view at an odd offset) the thread runs its lanes one after
// another, as separate iterations.
//
//===----------------------------------------------------------------------===//

#include "VectorLanes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace {

/// Bytes moved by one thread's vector access.
constexpr int64_t kVectorBytes = 16;

/// What a value of a nest's body depends on, memoized.
class Dependences {
public:
  Dependences(scf::ParallelOp nest)
      : body(nest.getBody()), iv(nest.getInductionVars().back()) {}

  /// Whether `v` changes with the innermost induction variable.
  bool onLane(Value v) { return get(v).first; }
  /// Whether computing `v` reads memory.
  bool readsMemory(Value v) { return get(v).second; }

  /// `v` is the innermost induction variable itself, or an identity
  /// affine.apply of it.
  bool isLaneIndex(Value v) {
    if (v == iv)
      return true;
    auto apply = v.getDefiningOp<affine::AffineApplyOp>();
    if (!apply || apply->getBlock() != body)
      return false;
    AffineMap map = apply.getAffineMap();
    return map.getNumDims() == 1 && map.getNumSymbols() == 0 &&
           map.getNumResults() == 1 &&
           map.getResult(0) == getAffineDimExpr(0, map.getContext()) &&
           isLaneIndex(apply.getOperand(0));
  }

private:
  std::pair<bool, bool> get(Value v) {
    if (v == iv)
      return {true, false};
    auto it = memo.find(v);
    if (it != memo.end())
      return it->second;
    std::pair<bool, bool> result{false, false};
    if (Operation *def = v.getDefiningOp(); def && def->getBlock() == body) {
      result.second = !isMemoryEffectFree(def);
      for (Value operand : def->getOperands()) {
        auto [lane, reads] = get(operand);
        result.first |= lane;
        result.second |= reads;
      }
    }
    return memo[v] = result;
  }

  Block *body;
  Value iv;
  DenseMap<Value, std::pair<bool, bool>> memo;
};

struct Access {
  Value memref;
  SmallVector<Value> indices;
  Type element;
  int64_t bytes = 0;
};

/// The access `op` makes, if it is a load or store at the innermost index
/// of a buffer with innermost stride 1 whose other indices and buffer
/// neither change with the lane nor read memory.
std::optional<Access> laneAccess(Operation *op, Dependences &deps) {
  Access a;
  if (auto load = dyn_cast<memref::LoadOp>(op)) {
    // A load nothing reads (a copy loop's of its output) is left to DCE.
    if (load->use_empty())
      return std::nullopt;
    a.memref = load.getMemRef();
    a.indices.assign(load.getIndices().begin(), load.getIndices().end());
  } else if (auto store = dyn_cast<memref::StoreOp>(op)) {
    a.memref = store.getMemRef();
    a.indices.assign(store.getIndices().begin(), store.getIndices().end());
  } else {
    return std::nullopt;
  }
  auto type = cast<MemRefType>(a.memref.getType());
  a.element = type.getElementType();
  if (a.indices.empty() || !a.element.isIntOrFloat())
    return std::nullopt;
  unsigned bits = a.element.getIntOrFloatBitWidth();
  if (bits % 8 || !llvm::isPowerOf2_32(bits) || bits / 8 > kVectorBytes / 2)
    return std::nullopt;
  a.bytes = bits / 8;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) || strides.back() != 1)
    return std::nullopt;
  if (!deps.isLaneIndex(a.indices.back()) || deps.onLane(a.memref) ||
      deps.readsMemory(a.memref))
    return std::nullopt;
  for (Value index : ArrayRef<Value>(a.indices).drop_back())
    if (deps.onLane(index) || deps.readsMemory(index))
      return std::nullopt;
  return a;
}

Value cst(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// `v` at `b`, cloning the ops of the body it is computed by (pure ones:
/// laneAccess checked) under `map`.
Value materialize(OpBuilder &b, Value v, IRMapping &map, Block *body) {
  if (Value mapped = map.lookupOrNull(v))
    return mapped;
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != body)
    return v;
  for (Value operand : def->getOperands())
    materialize(b, operand, map, body);
  b.clone(*def, map);
  return map.lookup(v);
}

/// Emits at `b` one iteration of `body`, its induction variables `nestIvs`
/// at `ivs`.
void cloneIteration(OpBuilder &b, Block *body, ArrayRef<Value> nestIvs,
                    ValueRange ivs) {
  IRMapping map;
  map.map(nestIvs, ivs);
  for (Operation &op : body->without_terminator())
    b.clone(op, map);
}

} // namespace

int64_t weft::cuda::vectorLanes(scf::ParallelOp nest) {
  if (!llvm::all_of(nest.getLowerBound(),
                    [](Value v) { return isConstantIntValue(v, 0); }) ||
      !llvm::all_of(nest.getStep(),
                    [](Value v) { return isConstantIntValue(v, 1); }))
    return 1;
  std::optional<int64_t> extent =
      getConstantIntValue(nest.getUpperBound().back());
  if (!extent)
    return 1;
  Dependences deps(nest);
  int64_t widest = 0;
  for (Operation &op : nest.getBody()->without_terminator()) {
    if (isa<memref::LoadOp, memref::StoreOp>(op)) {
      if (std::optional<Access> a = laneAccess(&op, deps))
        widest = std::max(widest, a->bytes);
      continue;
    }
    if (op.getNumRegions() || !isMemoryEffectFree(&op))
      return 1;
  }
  if (widest == 0)
    return 1;
  int64_t lanes = kVectorBytes / widest;
  return *extent % lanes == 0 ? lanes : 1;
}

void weft::cuda::emitLanes(OpBuilder &b, Location loc, scf::ParallelOp nest,
                           ValueRange ivs, int64_t lanes) {
  Block *body = nest.getBody();
  // A copy: the op hands its induction variables out as a temporary.
  SmallVector<Value> nestIvs(nest.getInductionVars());
  if (lanes == 1) {
    cloneIteration(b, body, nestIvs, ivs);
    return;
  }
  // Each lane's induction variables.
  SmallVector<IRMapping> laneMaps(lanes);
  for (int64_t v = 0; v < lanes; ++v) {
    SmallVector<Value> laneIvs(ivs);
    if (v)
      laneIvs.back() =
          arith::AddIOp::create(b, loc, ivs.back(), cst(b, loc, v));
    laneMaps[v].map(nestIvs, laneIvs);
  }
  Dependences deps(nest);
  DenseMap<Operation *, Access> accesses;
  for (Operation &op : body->without_terminator())
    if (std::optional<Access> a = laneAccess(&op, deps))
      accesses[&op] = *a;

  // Every vector access of this thread aligned to its size.
  IRMapping first = laneMaps[0];
  Value aligned = arith::ConstantIntOp::create(b, loc, 1, 1);
  for (Operation &op : body->without_terminator()) {
    auto it = accesses.find(&op);
    if (it == accesses.end())
      continue;
    const Access &a = it->second;
    Value memref = materialize(b, a.memref, first, body);
    auto meta = memref::ExtractStridedMetadataOp::create(b, loc, memref);
    Value linear = meta.getOffset();
    for (auto [index, stride] : llvm::zip(a.indices, meta.getStrides()))
      linear = arith::AddIOp::create(
          b, loc, linear,
          arith::MulIOp::create(b, loc, materialize(b, index, first, body),
                                stride));
    Value address = arith::AddIOp::create(
        b, loc, memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref),
        arith::MulIOp::create(b, loc, linear, cst(b, loc, a.bytes)));
    Value rest =
        arith::RemUIOp::create(b, loc, address, cst(b, loc, lanes * a.bytes));
    aligned = arith::AndIOp::create(
        b, loc, aligned,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, rest,
                              cst(b, loc, 0)));
  }
  auto ifOp = scf::IfOp::create(b, loc, aligned, /*withElseRegion=*/true);

  // Vector accesses, the other ops once per lane.
  OpBuilder vb = ifOp.getThenBodyBuilder();
  for (Operation &op : body->without_terminator()) {
    auto it = accesses.find(&op);
    if (it == accesses.end()) {
      // The same in every lane (the row's scale, a subview): once. A
      // location every iteration reads, none writes (a parallel loop).
      if (op.getNumResults() && llvm::none_of(op.getResults(), [&](Value r) {
            return deps.onLane(r);
          })) {
        Operation *once = vb.clone(op, laneMaps[0]);
        for (int64_t v = 1; v < lanes; ++v)
          laneMaps[v].map(op.getResults(), once->getResults());
        continue;
      }
      for (IRMapping &map : laneMaps)
        vb.clone(op, map);
      continue;
    }
    const Access &a = it->second;
    auto type = VectorType::get({lanes}, a.element);
    Value memref = laneMaps[0].lookupOrDefault(a.memref);
    SmallVector<Value> indices;
    for (Value index : a.indices)
      indices.push_back(laneMaps[0].lookupOrDefault(index));
    llvm::MaybeAlign align(lanes * a.bytes);
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      Value vec = vector::LoadOp::create(vb, loc, type, memref, indices,
                                         /*nontemporal=*/false, align);
      for (int64_t v = 0; v < lanes; ++v)
        laneMaps[v].map(
            load.getResult(),
            vector::ExtractOp::create(vb, loc, vec, ArrayRef<int64_t>{v}));
      continue;
    }
    auto store = cast<memref::StoreOp>(op);
    SmallVector<Value> elements;
    for (IRMapping &map : laneMaps)
      elements.push_back(map.lookupOrDefault(store.getValueToStore()));
    Value vec = vector::FromElementsOp::create(vb, loc, type, elements);
    vector::StoreOp::create(vb, loc, vec, memref, indices,
                            /*nontemporal=*/false, align);
  }

  // Misaligned: the lanes one after another, a loop (not unrolled: rare,
  // and the kernel stays small).
  OpBuilder sb = ifOp.getElseBodyBuilder();
  auto loop = scf::ForOp::create(sb, loc, cst(sb, loc, 0), cst(sb, loc, lanes),
                                 cst(sb, loc, 1));
  OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
  SmallVector<Value> laneIvs(ivs);
  laneIvs.back() =
      arith::AddIOp::create(lb, loc, ivs.back(), loop.getInductionVar());
  cloneIteration(lb, body, nestIvs, laneIvs);
}
