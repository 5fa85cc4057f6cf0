//===- GpuMapStep.cpp - The step's loop nests as gpu.launch ---------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// For --target cuda every buffer the step touches lives in device memory,
// so nothing may read or write one on the host: the step keeps only
// address arithmetic, GEMM calls (cuBLASLt, through the runtime), fused
// attention calls (the runtime's kernels) and launches. Kernels are the CPU
// path's outlined kernels, unchanged up to here (docs/gpu.md, Numerics); this
// pass only decides which thread runs which iteration.
//
//===----------------------------------------------------------------------===//

#include "weft/Target/CUDA/Passes.h"

#include "VectorLanes.h"
#include "ViewRoot.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

namespace weft {
#define GEN_PASS_DEF_GPUMAPSTEPPASS
#include "weft/Target/CUDA/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// The runtime's GEMMs and fused attention kernels and their device
/// versions (Cuda.h): the same signatures on device pointers; the host
/// calls them and they launch their own kernels. Also the kernel dump
/// (KernelDump.h), which reads device memory from the host.
const llvm::StringMap<StringRef> &deviceCalls() {
  static const llvm::StringMap<StringRef> map = {
      {"weft_rt_sgemm", "weft_rt_cuda_sgemm"},
      {"weft_rt_sgemm_batch_sum", "weft_rt_cuda_sgemm_batch_sum"},
      {"weft_rt_sgemm_accumulate", "weft_rt_cuda_sgemm_accumulate"},
      {"weft_rt_sbgemm", "weft_rt_cuda_sbgemm"},
      {"weft_rt_sbgemm_bf16", "weft_rt_cuda_sbgemm_bf16"},
      // Device-only: --weft-gpu-gemm-epilogue calls them by these names.
      {"weft_rt_cuda_sgemm_bias", "weft_rt_cuda_sgemm_bias"},
      {"weft_rt_cuda_sbgemm_bias", "weft_rt_cuda_sbgemm_bias"},
      {"weft_rt_cuda_sbgemm_bf16_bias", "weft_rt_cuda_sbgemm_bf16_bias"},
      // --weft-gpu-scatter-rows: the embedding gradient.
      {"weft_rt_cuda_scatter_add_rows_f32",
       "weft_rt_cuda_scatter_add_rows_f32"},
      {"weft_rt_cuda_scatter_add_rows_bf16",
       "weft_rt_cuda_scatter_add_rows_bf16"},
      {"weft_rt_attention_f32", "weft_rt_cuda_attention_f32"},
      {"weft_rt_attention_bf16", "weft_rt_cuda_attention_bf16"},
      {"weft_rt_attention_grad_f32", "weft_rt_cuda_attention_grad_f32"},
      {"weft_rt_attention_grad_bf16", "weft_rt_cuda_attention_grad_bf16"},
      // weftc --dump-kernel-outputs: copies a kernel's output to the host.
      {"weft_rt_dump_kernel_output", "weft_rt_cuda_dump_kernel_output"},
      // A mesh's collectives on NCCL (CudaMeshCollectives.cpp), on device
      // buffers; the axis index is the host's.
      {"weft_rt_all_reduce_f32", "weft_rt_cuda_all_reduce_f32"},
      {"weft_rt_all_gather_f32", "weft_rt_cuda_all_gather_f32"},
      {"weft_rt_reduce_scatter_f32", "weft_rt_cuda_reduce_scatter_f32"},
      {"weft_rt_all_to_all_f32", "weft_rt_cuda_all_to_all_f32"},
      {"weft_rt_bucket_put_f32", "weft_rt_cuda_bucket_put_f32"},
      {"weft_rt_bucket_start", "weft_rt_cuda_bucket_start"},
      {"weft_rt_bucket_get_f32", "weft_rt_cuda_bucket_get_f32"},
      // A pipeline's transfers, through the host (CudaMeshCollectives.cpp).
      {"weft_rt_send_f32", "weft_rt_cuda_send_f32"},
      {"weft_rt_recv_f32", "weft_rt_cuda_recv_f32"},
      {"weft_rt_axis_index", "weft_rt_axis_index"}};
  return map;
}

/// What to do instead, for a runtime call without a device version.
std::string fixFor(StringRef callee) {
  return "leave out --target cuda to compile for the CPU";
}

/// Ops that stay on the host: they only compute addresses, sizes and
/// scalars from values the host has.
bool isHostOp(Operation *op) {
  if (isa<arith::ConstantOp, arith::IndexCastOp, arith::IndexCastUIOp,
          memref::ExtractStridedMetadataOp,
          memref::ExtractAlignedPointerAsIndexOp, memref::ViewOp,
          memref::SubViewOp, memref::ExpandShapeOp, memref::CollapseShapeOp,
          memref::ReinterpretCastOp, memref::CastOp, memref::DimOp,
          LLVM::IntToPtrOp, LLVM::GEPOp, LLVM::ConstantOp, LLVM::AddressOfOp,
          func::CallOp, func::ReturnOp, memref::GetGlobalOp>(op))
    return true;
  // Other pure arithmetic on host values (a scalar computed from sizes).
  if (op->getDialect() && isa<arith::ArithDialect>(op->getDialect()) &&
      isMemoryEffectFree(op))
    return true;
  return false;
}

Value cst(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// The memref.get_global (or a view of one) that `v` is, if any.
Operation *constantRoot(Value v) {
  Operation *def = v.getDefiningOp();
  while (def && isa<ViewLikeOpInterface>(def) && def->getNumOperands() >= 1)
    def = def->getOperand(0).getDefiningOp();
  return def && isa<memref::GetGlobalOp>(def) ? def : nullptr;
}

/// The host values the views of a constant take as offsets or sizes (a
/// rank's block of a constant under sequence parallelism starts at its
/// axis index): the kernel reading the constant takes them as arguments.
void collectDynamicOperands(Value v, SetVector<Value> &out) {
  Operation *def = v.getDefiningOp();
  if (!def || isa<memref::GetGlobalOp>(def))
    return;
  for (auto [i, operand] : llvm::enumerate(def->getOperands())) {
    if (i == 0)
      collectDynamicOperands(operand, out);
    else if (!matchPattern(operand, m_Constant()))
      out.insert(operand);
  }
}

/// Clones the ops that make `v` (a get_global and views of it) at `b`;
/// `map` holds the kernel's arguments for the views' host operands.
Value cloneConstant(OpBuilder &b, Value v, IRMapping &map) {
  Operation *def = v.getDefiningOp();
  if (map.contains(v))
    return map.lookup(v);
  for (Value operand : def->getOperands()) {
    if (map.contains(operand) || !operand.getDefiningOp())
      continue;
    if (constantRoot(operand))
      cloneConstant(b, operand, map);
    else if (matchPattern(operand, m_Constant()))
      b.clone(*operand.getDefiningOp(), map);
  }
  return b.clone(*def, map)->getResult(0);
}

/// The kernels `step` calls, each once. A kernel called with a constant
/// (a module's memref.global) reads it in its own body instead: the
/// constant becomes data of the kernel module, the argument the host
/// passes is left unread. A kernel called with constants from several
/// call sites gets a copy per call.
FailureOr<SmallVector<func::FuncOp>> collectKernels(ModuleOp module,
                                                    func::FuncOp step) {
  SymbolTable symbols(module);
  SetVector<func::FuncOp> kernels;
  SmallVector<func::CallOp> calls;
  step.walk([&](func::CallOp call) { calls.push_back(call); });
  for (func::CallOp call : calls) {
    auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
    if (!callee || callee.isDeclaration())
      continue;
    if (!callee.getBody().hasOneBlock())
      return callee.emitError("kernel ")
             << callee.getName()
             << " has more than one block: --target cuda expects the "
                "structured loops --weft-outline-kernels makes";
    SmallVector<unsigned> constantArgs;
    for (auto [i, operand] : llvm::enumerate(call.getOperands()))
      if (constantRoot(operand))
        constantArgs.push_back(i);
    if (!constantArgs.empty()) {
      auto copy = cast<func::FuncOp>(callee->clone());
      copy.setName((callee.getName() + ".const").str());
      symbols.insert(copy, Block::iterator(callee));
      Block &entry = copy.getBody().front();
      OpBuilder b = OpBuilder::atBlockBegin(&entry);
      IRMapping map;
      SetVector<Value> dynamic;
      for (unsigned i : constantArgs)
        collectDynamicOperands(call.getOperand(i), dynamic);
      for (Value d : dynamic)
        map.map(d, entry.addArgument(d.getType(), d.getLoc()));
      if (!dynamic.empty()) {
        copy.setFunctionType(FunctionType::get(copy.getContext(),
                                               entry.getArgumentTypes(),
                                               copy.getResultTypes()));
        call.getOperandsMutable().append(dynamic.getArrayRef());
      }
      for (unsigned i : constantArgs)
        copy.getArgument(i).replaceAllUsesWith(
            cloneConstant(b, call.getOperand(i), map));
      call.setCallee(copy.getName());
      if (callee.symbolKnownUseEmpty(module)) {
        kernels.remove(callee);
        callee.erase();
      }
      callee = copy;
    }
    kernels.insert(callee);
  }
  return SmallVector<func::FuncOp>(kernels.begin(), kernels.end());
}

/// Loops in place of linalg ops and copies, parallel dimensions outermost;
/// scf.forall as scf.parallel.
linalg::LinalgOp parallelFirst(RewriterBase &rewriter, linalg::LinalgOp op);

LogicalResult lowerToLoops(func::FuncOp step) {
  IRRewriter rewriter(step.getContext());
  SmallVector<scf::ForallOp> foralls;
  step.walk([&](scf::ForallOp f) { foralls.push_back(f); });
  for (scf::ForallOp f : foralls) {
    rewriter.setInsertionPoint(f);
    if (failed(scf::forallToParallelLoop(rewriter, f)))
      return f.emitError("cannot run this scf.forall as scf.parallel");
  }
  SmallVector<memref::CopyOp> copies;
  step.walk([&](memref::CopyOp c) { copies.push_back(c); });
  for (memref::CopyOp c : copies) {
    rewriter.setInsertionPoint(c);
    linalg::CopyOp::create(rewriter, c.getLoc(), c.getSource(), c.getTarget());
    rewriter.eraseOp(c);
  }
  SmallVector<linalg::LinalgOp> ops;
  step.walk([&](linalg::LinalgOp op) { ops.push_back(op); });
  for (linalg::LinalgOp op : ops) {
    op = parallelFirst(rewriter, op);
    rewriter.setInsertionPoint(op);
    if (failed(linalg::linalgOpToParallelLoops(rewriter, op)))
      return op->emitError("cannot lower this op to loops for the GPU");
    rewriter.eraseOp(op);
  }
  return success();
}

bool isConstantIndex(Value v) { return matchPattern(v, m_Constant()); }

/// `outer` whose body is pure address arithmetic around one scf.parallel
/// with constant bounds: one scf.parallel over both iteration spaces.
scf::ParallelOp collapseNest(scf::ParallelOp outer) {
  while (true) {
    if (outer.getNumResults())
      return outer;
    scf::ParallelOp inner;
    for (Operation &op : outer.getBody()->without_terminator()) {
      if (auto p = dyn_cast<scf::ParallelOp>(op)) {
        if (inner)
          return outer;
        inner = p;
        continue;
      }
      if (!isMemoryEffectFree(&op) || op.getNumRegions())
        return outer;
    }
    if (!inner || inner.getNumResults() ||
        !llvm::all_of(inner.getLowerBound(), isConstantIndex) ||
        !llvm::all_of(inner.getUpperBound(), isConstantIndex) ||
        !llvm::all_of(inner.getStep(), isConstantIndex))
      return outer;
    OpBuilder b(outer);
    IRMapping outside;
    auto hoist = [&](ValueRange values) {
      SmallVector<Value> out;
      for (Value v : values)
        out.push_back(b.clone(*v.getDefiningOp(), outside)->getResult(0));
      return out;
    };
    SmallVector<Value> lbs(outer.getLowerBound()), ubs(outer.getUpperBound()),
        steps(outer.getStep());
    llvm::append_range(lbs, hoist(inner.getLowerBound()));
    llvm::append_range(ubs, hoist(inner.getUpperBound()));
    llvm::append_range(steps, hoist(inner.getStep()));
    auto merged = scf::ParallelOp::create(b, outer.getLoc(), lbs, ubs, steps);
    Block *body = merged.getBody();
    OpBuilder in = OpBuilder::atBlockBegin(body);
    IRMapping map;
    unsigned n = outer.getNumLoops();
    for (unsigned i = 0; i < n; ++i)
      map.map(outer.getInductionVars()[i], merged.getInductionVars()[i]);
    for (unsigned i = 0; i < inner.getNumLoops(); ++i)
      map.map(inner.getInductionVars()[i], merged.getInductionVars()[n + i]);
    for (Operation &op : outer.getBody()->without_terminator())
      if (&op != inner.getOperation())
        in.clone(op, map);
    for (Operation &op : inner.getBody()->without_terminator())
      in.clone(op, map);
    outer.erase();
    outer = merged;
  }
}

/// A new launch of `grid` x `block` threads at `b`'s insertion point, with
/// an empty body ending in gpu.terminator; `b` is left inside it.
gpu::LaunchOp createLaunch(OpBuilder &b, Location loc, Value grid, Value block,
                           TypeRange shared = {}) {
  Value one = cst(b, loc, 1);
  auto launch = gpu::LaunchOp::create(b, loc, grid, one, one, block, one, one,
                                      /*dynamicSharedMemorySize=*/nullptr,
                                      /*asyncTokenType=*/nullptr,
                                      /*asyncDependencies=*/{}, shared);
  b.setInsertionPointToEnd(&launch.getBody().front());
  gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointToStart(&launch.getBody().front());
  return launch;
}

/// Thread `launch`'s global index along x: block x times `threads` plus
/// thread x.
Value globalThread(OpBuilder &b, Location loc, gpu::LaunchOp launch,
                   int64_t threads) {
  return arith::AddIOp::create(b, loc,
                               arith::MulIOp::create(b, loc,
                                                     launch.getBlockIds().x,
                                                     cst(b, loc, threads)),
                               launch.getThreadIds().x);
}

/// Trip counts of `loop`'s dimensions as index values before it.
SmallVector<Value> tripCounts(OpBuilder &b, scf::ParallelOp loop) {
  Location loc = loop.getLoc();
  SmallVector<Value> counts;
  for (auto [lb, ub, step] :
       llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    Value span = arith::SubIOp::create(b, loc, ub, lb);
    counts.push_back(arith::CeilDivSIOp::create(b, loc, span, step));
  }
  return counts;
}

/// The indices of linear iteration `i` (row-major) of a space of `counts`.
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value i,
                               ArrayRef<Value> counts) {
  SmallVector<Value> idx(counts.size());
  Value rest = i;
  for (int d = int(counts.size()) - 1; d >= 0; --d) {
    idx[d] = d == 0 ? rest : arith::RemSIOp::create(b, loc, rest, counts[d]);
    if (d > 0)
      rest = arith::DivSIOp::create(b, loc, rest, counts[d]);
  }
  return idx;
}

/// The same for constant `ranges`.
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value i,
                               ArrayRef<int64_t> ranges) {
  SmallVector<Value> counts;
  for (int64_t r : ranges)
    counts.push_back(cst(b, loc, r));
  return delinearize(b, loc, i, counts);
}

/// The induction variables of `nest` at linear iteration `i` of `counts`,
/// whose innermost count is in units of `lanes` iterations.
SmallVector<Value> delinearizeNest(OpBuilder &b, Location loc,
                                   scf::ParallelOp nest, ArrayRef<Value> counts,
                                   Value i, int64_t lanes) {
  SmallVector<Value> ivs = delinearize(b, loc, i, counts);
  for (size_t d = 0; d < ivs.size(); ++d) {
    Value step = nest.getStep()[d];
    if (d + 1 == ivs.size() && lanes > 1)
      step = cst(b, loc, lanes); // vectorLanes: lower bound 0, step 1
    ivs[d] = arith::AddIOp::create(b, loc, nest.getLowerBound()[d],
                                   arith::MulIOp::create(b, loc, ivs[d], step));
  }
  return ivs;
}

/// Trip counts of `nest` with its innermost one in units of `lanes`
/// iterations (weft::cuda::vectorLanes).
SmallVector<Value> laneTripCounts(OpBuilder &b, scf::ParallelOp nest,
                                  int64_t lanes) {
  SmallVector<Value> counts = tripCounts(b, nest);
  if (lanes > 1)
    counts.back() =
        cst(b, nest.getLoc(),
            *getConstantIntValue(nest.getUpperBound().back()) / lanes);
  return counts;
}

/// Runs `loop` with one thread per iteration, or per `lanes` consecutive
/// innermost iterations where their loads and stores can be vectors
/// (VectorLanes.h).
void launchParallel(scf::ParallelOp loop, int64_t blockSize, bool vectorize) {
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  int64_t lanes = vectorize ? weft::cuda::vectorLanes(loop) : 1;
  SmallVector<Value> counts = laneTripCounts(b, loop, lanes);
  Value total = cst(b, loc, 1);
  for (Value c : counts)
    total = arith::MulIOp::create(b, loc, total, c);
  // Fewer threads than a block when there are fewer iterations.
  Value block = arith::MinSIOp::create(b, loc, total, cst(b, loc, blockSize));
  block = arith::MaxSIOp::create(b, loc, block, cst(b, loc, 1));
  Value grid = arith::CeilDivSIOp::create(b, loc, total, block);
  grid = arith::MaxSIOp::create(b, loc, grid, cst(b, loc, 1));
  gpu::LaunchOp launch = createLaunch(b, loc, grid, block);
  Value g = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, launch.getBlockIds().x,
                            launch.getBlockSize().x),
      launch.getThreadIds().x);
  Value inRange =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, g, total);
  auto guard = scf::IfOp::create(b, loc, inRange, /*withElseRegion=*/false);
  b.setInsertionPointToStart(&guard.getThenRegion().front());
  // Row-major: the last dimension varies fastest across threads.
  weft::cuda::emitLanes(b, loc, loop,
                        delinearizeNest(b, loc, loop, counts, g, lanes), lanes);
  loop.erase();
}

/// The combining op of a linalg reduction whose yielded value is
/// `combine(out, f(ins))` with `out` used only there, and its kind.
std::optional<std::pair<Operation *, arith::AtomicRMWKind>>
matchCombiner(linalg::GenericOp op, unsigned result = 0) {
  Block &body = op.getRegion().front();
  BlockArgument out = op.getMatchingBlockArgument(op.getDpsInitOperand(result));
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  Operation *combine = yield.getOperand(result).getDefiningOp();
  if (!combine || !out.hasOneUse() || combine->getNumOperands() != 2 ||
      (combine->getOperand(0) != out && combine->getOperand(1) != out))
    return std::nullopt;
  std::optional<arith::AtomicRMWKind> kind =
      llvm::TypeSwitch<Operation *, std::optional<arith::AtomicRMWKind>>(
          combine)
          .Case([](arith::AddFOp) { return arith::AtomicRMWKind::addf; })
          .Case([](arith::MulFOp) { return arith::AtomicRMWKind::mulf; })
          .Case(
              [](arith::MaximumFOp) { return arith::AtomicRMWKind::maximumf; })
          .Case(
              [](arith::MinimumFOp) { return arith::AtomicRMWKind::minimumf; })
          .Case([](arith::MaxNumFOp) { return arith::AtomicRMWKind::maxnumf; })
          .Case([](arith::MinNumFOp) { return arith::AtomicRMWKind::minnumf; })
          .Default([](Operation *) { return std::nullopt; });
  if (!kind)
    return std::nullopt;
  return std::make_pair(combine, *kind);
}

/// A linalg reduction into one element (per output): every parallel loop
/// has extent 1, the loops are static, each output element is a float and
/// the yield combines it with its own running value (matchCombiner).
/// Several outputs reduce together (one generic summing two things over a
/// row) only where `several`.
struct ElementReduction {
  SmallVector<arith::AtomicRMWKind> kinds;
  int64_t total;
  SmallVector<Type> types;
};
std::optional<ElementReduction> matchElementReduction(linalg::GenericOp op,
                                                      bool several = false) {
  if (op.getNumDpsInits() == 0 || (op.getNumDpsInits() > 1 && !several) ||
      !op.hasPureBufferSemantics() || op.getNumReductionLoops() == 0)
    return std::nullopt;
  ElementReduction red;
  for (unsigned i = 0; i < op.getNumDpsInits(); ++i) {
    auto outType =
        dyn_cast<MemRefType>(op.getDpsInitOperand(i)->get().getType());
    if (!outType || !isa<FloatType>(outType.getElementType()))
      return std::nullopt;
    std::optional<std::pair<Operation *, arith::AtomicRMWKind>> combiner =
        matchCombiner(op, i);
    if (!combiner)
      return std::nullopt;
    red.kinds.push_back(combiner->second);
    red.types.push_back(outType.getElementType());
  }
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  int64_t total = 1;
  for (auto [r, it] : llvm::zip(ranges, iters)) {
    if (ShapedType::isDynamic(r) ||
        (it == utils::IteratorType::parallel && r != 1))
      return std::nullopt;
    total *= r;
  }
  red.total = total;
  return red;
}

/// `op`'s operand `operand` indexed at `ivs` through its indexing map.
SmallVector<Value> indicesAt(OpBuilder &b, Location loc, linalg::GenericOp op,
                             OpOperand *operand, ValueRange ivs) {
  AffineMap m = op.getMatchingIndexingMap(operand);
  SmallVector<Value> indices;
  for (AffineExpr e : m.getResults())
    indices.push_back(affine::AffineApplyOp::create(
        b, loc, AffineMap::get(m.getNumDims(), 0, e), ivs));
  return indices;
}

/// Emits at `b` one iteration of `op`'s body, at loop indices `ivs`: its
/// memory inputs loaded there, its outputs' block arguments bound to
/// `accumulators` (one per result), linalg.index read from `ivs`. Returns
/// what the body yields.
SmallVector<Value> emitBodyAt(OpBuilder &b, Location loc, linalg::GenericOp op,
                              ValueRange ivs, ValueRange accumulators) {
  IRMapping map;
  for (OpOperand *input : op.getDpsInputOperands()) {
    Value v = input->get();
    Value loaded = isa<MemRefType>(v.getType())
                       ? memref::LoadOp::create(
                             b, loc, v, indicesAt(b, loc, op, input, ivs))
                             .getResult()
                       : v;
    map.map(op.getMatchingBlockArgument(input), loaded);
  }
  for (auto [init, acc] : llvm::zip(op.getDpsInitsMutable(), accumulators))
    map.map(op.getMatchingBlockArgument(&init), acc);
  Block &body = op.getRegion().front();
  for (Operation &inner : body.without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      map.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    b.clone(inner, map);
  }
  SmallVector<Value> yielded;
  for (Value v : body.getTerminator()->getOperands())
    yielded.push_back(map.lookup(v));
  return yielded;
}

/// Combines the `threads` values in `shared` into its element 0: at each
/// level the lower half adds the upper half, a barrier between levels.
void emitTree(OpBuilder &b, Location loc, arith::AtomicRMWKind kind,
              Value shared, Value tid, int64_t threads) {
  for (int64_t half = threads / 2; half >= 1; half /= 2) {
    Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, tid,
                                         cst(b, loc, half));
    auto ifOp = scf::IfOp::create(b, loc, active, false);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifOp.getThenRegion().front());
      Value mine = memref::LoadOp::create(b, loc, shared, tid);
      Value other = memref::LoadOp::create(
          b, loc, shared,
          ValueRange{arith::AddIOp::create(b, loc, tid, cst(b, loc, half))});
      memref::StoreOp::create(b, loc,
                              arith::getReductionOp(kind, b, loc, mine, other),
                              shared, tid);
    }
    gpu::BarrierOp::create(b, loc);
  }
}

/// Combines `total` into `op`'s output element of result `result`.
void emitCombineInto(OpBuilder &b, linalg::GenericOp op,
                     arith::AtomicRMWKind kind, Value total,
                     unsigned result = 0) {
  Location loc = op.getLoc();
  OpOperand *init = op.getDpsInitOperand(result);
  SmallVector<Value> zeros(op.getNumLoops(), cst(b, loc, 0));
  SmallVector<Value> at = indicesAt(b, loc, op, init, zeros);
  Value old = memref::LoadOp::create(b, loc, init->get(), at);
  memref::StoreOp::create(
      b, loc, arith::getReductionOp(kind, b, loc, old, total), init->get(), at);
}

/// Emits, at `b`, `op` (an ElementReduction) computed by the `threads`
/// threads of a block with ids `tid`: thread t combines iterations
/// `start`, `start + step`, ... (`start` from t, `step` at least
/// `threads`) into registers (one per output), the block combines the
/// partials in `shared` (per output, `threads` elements of workgroup
/// memory) as trees, and thread 0 hands the block's totals to `finish`.
/// Every thread of the block must reach it (it holds barriers).
void emitBlockReduction(OpBuilder &b, linalg::GenericOp op,
                        const ElementReduction &red, Value tid, int64_t threads,
                        ValueRange shared, Value start, Value step,
                        function_ref<void(OpBuilder &, ValueRange)> finish) {
  Location loc = op.getLoc();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<Value> identities;
  for (auto [kind, type] : llvm::zip(red.kinds, red.types))
    identities.push_back(arith::getIdentityValue(kind, type, b, loc));
  auto loop = scf::ForOp::create(b, loc, start, cst(b, loc, red.total), step,
                                 identities);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    SmallVector<Value> ivs =
        delinearize(b, loc, loop.getInductionVar(), ranges);
    scf::YieldOp::create(b, loc,
                         emitBodyAt(b, loc, op, ivs, loop.getRegionIterArgs()));
  }
  for (auto [partial, buffer] : llvm::zip(loop.getResults(), shared))
    memref::StoreOp::create(b, loc, partial, buffer, tid);
  gpu::BarrierOp::create(b, loc);
  for (auto [kind, buffer] : llvm::zip(red.kinds, shared))
    emitTree(b, loc, kind, buffer, tid, threads);
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                                      cst(b, loc, 0));
  auto ifOp = scf::IfOp::create(b, loc, first, false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  SmallVector<Value> totals;
  for (Value buffer : shared)
    totals.push_back(memref::LoadOp::create(b, loc, buffer, cst(b, loc, 0)));
  finish(b, totals);
}

/// The single-block form: thread 0 combines the totals into the outputs.
void emitBlockReduction(OpBuilder &b, linalg::GenericOp op,
                        const ElementReduction &red, Value tid, int64_t threads,
                        ValueRange shared) {
  emitBlockReduction(b, op, red, tid, threads, shared, tid,
                     cst(b, op.getLoc(), threads),
                     [&](OpBuilder &b, ValueRange totals) {
                       for (auto [i, total] : llvm::enumerate(totals))
                         emitCombineInto(b, op, red.kinds[i], total, i);
                     });
}

MemRefType sharedBuffer(MLIRContext *ctx, int64_t threads, Type type) {
  return MemRefType::get(
      {threads}, type, MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
}

/// A linalg op of a kernel function that reduces its whole iteration space
/// into one element (a sum of squares of the gradient norm, a mean loss):
/// below `blocksFrom` iterations on one block of up to `threads` threads
/// (emitBlockReduction), from there on many blocks whose totals the last
/// one combines in block order. Either way the result does not depend on
/// scheduling. Returns false (changing nothing) for other ops.
bool launchFullReduction(linalg::GenericOp op, int64_t threads,
                         int64_t blocksFrom) {
  std::optional<ElementReduction> red = matchElementReduction(op);
  if (!red)
    return false;
  threads = std::min<int64_t>(threads, llvm::PowerOf2Ceil(red->total));
  threads = std::max<int64_t>(threads, 32);
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  OpBuilder b(op);
  if (red->total < blocksFrom) {
    gpu::LaunchOp launch =
        createLaunch(b, loc, cst(b, loc, 1), cst(b, loc, threads),
                     {sharedBuffer(ctx, threads, red->types[0])});
    emitBlockReduction(b, op, *red, launch.getThreadIds().x, threads,
                       launch.getWorkgroupAttributions().take_front());
    op.erase();
    return true;
  }
  // Long reductions on many blocks (one block is bound by one SM's memory
  // latency): each block reduces a grid-strided slice and leaves its total
  // in a device buffer; the last block to finish (an atomic count) combines
  // the totals in block order. The result does not depend on which block
  // finishes last, so it is the same every run.
  int64_t blocks =
      std::min<int64_t>(llvm::divideCeil(red->total, threads * 8), 256);
  auto module = op->getParentOfType<ModuleOp>();
  SymbolTable symbols(module);
  OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
  auto partialsType = MemRefType::get({blocks}, red->types[0]);
  auto counterType = MemRefType::get({1}, mb.getI32Type());
  auto partialsGlobal = memref::GlobalOp::create(
      mb, loc, "__weft_block_totals", mb.getStringAttr("private"), partialsType,
      mb.getUnitAttr(), /*constant=*/false,
      /*alignment=*/nullptr);
  symbols.insert(partialsGlobal);
  auto counterGlobal = memref::GlobalOp::create(
      mb, loc, "__weft_blocks_done", mb.getStringAttr("private"), counterType,
      DenseElementsAttr::get(RankedTensorType::get({1}, mb.getI32Type()),
                             mb.getI32IntegerAttr(0).getValue()),
      /*constant=*/false, /*alignment=*/nullptr);
  symbols.insert(counterGlobal);

  auto flagType = MemRefType::get(
      {1}, b.getI32Type(), MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
  gpu::LaunchOp launch =
      createLaunch(b, loc, cst(b, loc, blocks), cst(b, loc, threads),
                   {sharedBuffer(ctx, threads, red->types[0]), flagType});
  Value shared = launch.getWorkgroupAttributions()[0];
  Value flag = launch.getWorkgroupAttributions()[1];
  Value tid = launch.getThreadIds().x, bid = launch.getBlockIds().x;
  Value partials = memref::GetGlobalOp::create(b, loc, partialsType,
                                               partialsGlobal.getSymName());
  Value counter = memref::GetGlobalOp::create(b, loc, counterType,
                                              counterGlobal.getSymName());
  Value start = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, bid, cst(b, loc, threads)), tid);
  Value zero = cst(b, loc, 0);
  emitBlockReduction(
      b, op, *red, tid, threads, shared, start, cst(b, loc, blocks * threads),
      [&](OpBuilder &b, ValueRange totals) {
        memref::StoreOp::create(b, loc, totals[0], partials, bid);
        // The total is visible to every block before the count says so.
        NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
        Value one = arith::ConstantIntOp::create(b, loc, 1, 32);
        Value done = memref::AtomicRMWOp::create(
            b, loc, arith::AtomicRMWKind::addi, one, counter, zero);
        Value last = arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::eq, done,
            arith::ConstantIntOp::create(b, loc, blocks - 1, 32));
        memref::StoreOp::create(
            b, loc, arith::ExtUIOp::create(b, loc, b.getI32Type(), last), flag,
            zero);
      });
  gpu::BarrierOp::create(b, loc);
  Value isLast =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                            memref::LoadOp::create(b, loc, flag, zero),
                            arith::ConstantIntOp::create(b, loc, 0, 32));
  // isLast is the same for the whole block, so its barriers are uniform.
  auto lastBlock = scf::IfOp::create(b, loc, isLast, false);
  b.setInsertionPointToStart(&lastBlock.getThenRegion().front());
  NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
  arith::AtomicRMWKind kind = red->kinds[0];
  Type type = red->types[0];
  Value identity = arith::getIdentityValue(kind, type, b, loc);
  auto loop = scf::ForOp::create(b, loc, tid, cst(b, loc, blocks),
                                 cst(b, loc, threads), ValueRange{identity});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    // Read through the atomic unit: other blocks' totals, never a stale
    // cached line.
    Value zeroValue =
        arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, 0.0));
    Value other = memref::AtomicRMWOp::create(
        b, loc, arith::AtomicRMWKind::addf, zeroValue, partials,
        loop.getInductionVar());
    scf::YieldOp::create(b, loc,
                         arith::getReductionOp(kind, b, loc,
                                               loop.getRegionIterArgs().front(),
                                               other));
  }
  memref::StoreOp::create(b, loc, loop.getResult(0), shared, tid);
  gpu::BarrierOp::create(b, loc);
  emitTree(b, loc, kind, shared, tid, threads);
  Value first =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, zero);
  auto write = scf::IfOp::create(b, loc, first, false);
  b.setInsertionPointToStart(&write.getThenRegion().front());
  emitCombineInto(b, op, kind, memref::LoadOp::create(b, loc, shared, zero));
  // Ready for the next launch of this kernel.
  memref::StoreOp::create(b, loc, arith::ConstantIntOp::create(b, loc, 0, 32),
                          counter, zero);
  op.erase();
  return true;
}

/// A reduction of a kernel function into several elements over a long
/// reduction (the bias gradients' sums over every row, a column of a
/// weight's statistics) on blocks of two-dimensional threads: one axis of
/// the block walks output elements, the other splits each element's
/// reduction, and the partials meet in a shared-memory tree along that
/// axis. The axis over the input's innermost dimension takes consecutive
/// threads, so a warp reads consecutive addresses whether the reduction
/// runs along rows or columns. Returns false (changing nothing) for other
/// ops: those with a short reduction keep a thread per output element.
bool launchPartialReduction(RewriterBase &rewriter, linalg::GenericOp op) {
  if (op.getNumDpsInits() == 0 || !op.hasPureBufferSemantics() ||
      op.getNumReductionLoops() == 0 || op.getNumParallelLoops() == 0 ||
      op.getNumDpsInputs() == 0)
    return false;
  // Every output a float combined with its own running value (the
  // cross-entropy's sum of exponentials and picked logit reduce together).
  unsigned numResults = op.getNumDpsInits();
  SmallVector<arith::AtomicRMWKind> kinds;
  SmallVector<Type> types;
  AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  for (unsigned r = 0; r < numResults; ++r) {
    OpOperand *init = op.getDpsInitOperand(r);
    auto outType = dyn_cast<MemRefType>(init->get().getType());
    if (!outType || !isa<FloatType>(outType.getElementType()) ||
        op.getMatchingIndexingMap(init) != outMap)
      return false;
    std::optional<std::pair<Operation *, arith::AtomicRMWKind>> combiner =
        matchCombiner(op, r);
    if (!combiner)
      return false;
    kinds.push_back(combiner->second);
    types.push_back(outType.getElementType());
  }
  auto swapped = dyn_cast<linalg::GenericOp>(
      parallelFirst(rewriter, cast<linalg::LinalgOp>(op.getOperation()))
          .getOperation());
  if (!swapped)
    return false;
  op = swapped;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  unsigned numParallel = op.getNumParallelLoops();
  int64_t outputs = 1, length = 1;
  for (auto [d, r] : llvm::enumerate(ranges)) {
    if (ShapedType::isDynamic(r))
      return false;
    (d < numParallel ? outputs : length) *= r;
  }
  if (length < 32 || outputs < 2)
    return false;
  // Reduce along x (consecutive threads) when the first input's innermost
  // index is a reduction loop.
  AffineMap inMap = op.getMatchingIndexingMap(op.getDpsInputOperand(0));
  bool alongX = false;
  if (inMap.getNumResults())
    if (auto dim = dyn_cast<AffineDimExpr>(inMap.getResults().back()))
      alongX = dim.getPosition() >= numParallel;
  int64_t tx = alongX ? 32 : std::min<int64_t>(32, llvm::PowerOf2Ceil(outputs));
  int64_t ty = 256 / tx;
  int64_t perBlock = alongX ? ty : tx, lanes = alongX ? tx : ty;
  int64_t columnBlocks = llvm::divideCeil(outputs, perBlock);
  // Few blocks (a bias gradient: 768 columns summed over 8192 rows is 24
  // blocks of 32 columns) leave most of a GPU idle and each thread walking
  // a long strided range: the reduction range is cut into `slices` along
  // the grid's y, each block leaving its partial results in a device
  // buffer, and a second launch combines each element's slices in slice
  // order (the same result every run). Each slice keeps at least 32
  // iterations per lane.
  int64_t slices = 1;
  if (columnBlocks < 128)
    slices = std::min<int64_t>(llvm::divideCeil(512, columnBlocks),
                               length / (lanes * 32));
  slices = std::max<int64_t>(slices, 1);
  int64_t sliceLength = llvm::divideCeil(length, slices);
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  SmallVector<Type> sharedTypes;
  for (Type t : types)
    sharedTypes.push_back(MemRefType::get(
        {ty, tx}, t, MemRefLayoutAttrInterface(),
        gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup)));
  OpBuilder b(op);
  Value one = cst(b, loc, 1);
  SmallVector<Value> partials;
  if (slices > 1) {
    auto module = op->getParentOfType<ModuleOp>();
    SymbolTable symbols(module);
    OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
    for (Type t : types) {
      auto type = MemRefType::get({slices, outputs}, t);
      auto global = memref::GlobalOp::create(
          mb, loc, "__weft_reduction_slices", mb.getStringAttr("private"), type,
          mb.getUnitAttr(), /*constant=*/false, /*alignment=*/nullptr);
      symbols.insert(global);
      partials.push_back(
          memref::GetGlobalOp::create(b, loc, type, global.getSymName()));
    }
  }
  auto launch = gpu::LaunchOp::create(
      b, loc, cst(b, loc, columnBlocks), cst(b, loc, slices), one,
      cst(b, loc, tx), cst(b, loc, ty), one, nullptr, nullptr, {}, sharedTypes);
  b.setInsertionPointToEnd(&launch.getBody().front());
  gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointToStart(&launch.getBody().front());
  ValueRange shared = launch.getWorkgroupAttributions();
  Value x = launch.getThreadIds().x, y = launch.getThreadIds().y;
  Value lane = alongX ? x : y;
  Value element = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, launch.getBlockIds().x,
                            cst(b, loc, perBlock)),
      alongX ? y : x);
  Value valid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                      element, cst(b, loc, outputs));
  SmallVector<Value> identities;
  for (auto [kind, type] : llvm::zip(kinds, types))
    identities.push_back(arith::getIdentityValue(kind, type, b, loc));
  ArrayRef<int64_t> parallelRanges(ranges.begin(), numParallel);
  ArrayRef<int64_t> reductionRanges(ranges.begin() + numParallel, ranges.end());
  auto partial = scf::IfOp::create(b, loc, TypeRange(types), valid, true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&partial.getElseRegion().front());
    scf::YieldOp::create(b, loc, identities);
    b.setInsertionPointToStart(&partial.getThenRegion().front());
    SmallVector<Value> outer = delinearize(b, loc, element, parallelRanges);
    Value from = lane, to = cst(b, loc, length);
    if (slices > 1) {
      Value begin = arith::MulIOp::create(b, loc, launch.getBlockIds().y,
                                          cst(b, loc, sliceLength));
      from = arith::AddIOp::create(b, loc, begin, lane);
      to = arith::MinSIOp::create(
          b, loc, to,
          arith::AddIOp::create(b, loc, begin, cst(b, loc, sliceLength)));
    }
    auto loop =
        scf::ForOp::create(b, loc, from, to, cst(b, loc, lanes), identities);
    scf::YieldOp::create(b, loc, loop.getResults());
    b.setInsertionPointToStart(loop.getBody());
    SmallVector<Value> ivs(outer);
    llvm::append_range(
        ivs, delinearize(b, loc, loop.getInductionVar(), reductionRanges));
    scf::YieldOp::create(b, loc,
                         emitBodyAt(b, loc, op, ivs, loop.getRegionIterArgs()));
  }
  for (unsigned r = 0; r < numResults; ++r)
    memref::StoreOp::create(b, loc, partial.getResult(r), shared[r],
                            ValueRange{y, x});
  gpu::BarrierOp::create(b, loc);
  for (int64_t half = lanes / 2; half >= 1; half /= 2) {
    Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                         lane, cst(b, loc, half));
    auto ifOp = scf::IfOp::create(b, loc, active, false);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifOp.getThenRegion().front());
      Value step = cst(b, loc, half);
      Value otherY = alongX ? y : arith::AddIOp::create(b, loc, y, step);
      Value otherX = alongX ? arith::AddIOp::create(b, loc, x, step) : x;
      for (unsigned r = 0; r < numResults; ++r) {
        Value mine =
            memref::LoadOp::create(b, loc, shared[r], ValueRange{y, x});
        Value other = memref::LoadOp::create(b, loc, shared[r],
                                             ValueRange{otherY, otherX});
        memref::StoreOp::create(
            b, loc, arith::getReductionOp(kinds[r], b, loc, mine, other),
            shared[r], ValueRange{y, x});
      }
    }
    gpu::BarrierOp::create(b, loc);
  }
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane,
                                      cst(b, loc, 0));
  auto write = scf::IfOp::create(
      b, loc, arith::AndIOp::create(b, loc, first, valid), false);
  b.setInsertionPointToStart(&write.getThenRegion().front());
  // Combines `total` of result `r` into the output element `element`.
  auto combineInto = [&](OpBuilder &b, unsigned r, Value element, Value total) {
    SmallVector<Value> ivs = delinearize(b, loc, element, parallelRanges);
    ivs.append(reductionRanges.size(), cst(b, loc, 0));
    OpOperand *init = op.getDpsInitOperand(r);
    SmallVector<Value> at = indicesAt(b, loc, op, init, ivs);
    Value old = memref::LoadOp::create(b, loc, init->get(), at);
    memref::StoreOp::create(b, loc,
                            arith::getReductionOp(kinds[r], b, loc, old, total),
                            init->get(), at);
  };
  for (unsigned r = 0; r < numResults; ++r) {
    Value total = memref::LoadOp::create(b, loc, shared[r], ValueRange{y, x});
    if (slices > 1)
      memref::StoreOp::create(b, loc, total, partials[r],
                              ValueRange{launch.getBlockIds().y, element});
    else
      combineInto(b, r, element, total);
  }
  if (slices > 1) {
    // The slices of each element, in slice order: a thread per element.
    b.setInsertionPointAfter(launch);
    int64_t threads = std::min<int64_t>(256, llvm::PowerOf2Ceil(outputs));
    gpu::LaunchOp combine =
        createLaunch(b, loc, cst(b, loc, llvm::divideCeil(outputs, threads)),
                     cst(b, loc, threads));
    Value e = globalThread(b, loc, combine, threads);
    auto inRange = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, e,
                              cst(b, loc, outputs)),
        false);
    b.setInsertionPointToStart(&inRange.getThenRegion().front());
    SmallVector<Value> start;
    for (auto [kind, type] : llvm::zip(kinds, types))
      start.push_back(arith::getIdentityValue(kind, type, b, loc));
    auto loop = scf::ForOp::create(b, loc, cst(b, loc, 0), cst(b, loc, slices),
                                   cst(b, loc, 1), start);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      SmallVector<Value> next;
      for (unsigned r = 0; r < numResults; ++r) {
        Value slice = memref::LoadOp::create(
            b, loc, partials[r], ValueRange{loop.getInductionVar(), e});
        next.push_back(arith::getReductionOp(
            kinds[r], b, loc, loop.getRegionIterArgs()[r], slice));
      }
      scf::YieldOp::create(b, loc, next);
    }
    for (unsigned r = 0; r < numResults; ++r)
      combineInto(b, r, e, loop.getResult(r));
  }
  op.erase();
  return true;
}

/// A sequential loop around a row-parallel loop, as a scatter-add leaves
/// it (the embedding gradient: for each token in order, add its gradient
/// row into the row of its id), with the loops swapped: a thread per
/// column runs the whole sequential loop for its column. Each element
/// still sees the tokens in order, so the result is the CPU's, bit for
/// bit. Legal when every access of the inner loop's body reads or writes
/// column j of its buffer at its innermost index, from a buffer whose
/// innermost dimension is the column (stride 1, offset 0, the loop's
/// extent): then no thread touches another's column. Returns false
/// (changing nothing) for other loops.
bool launchColumnsOfSequentialLoop(scf::ForOp loop, int64_t blockSize) {
  if (loop.getNumResults())
    return false;
  scf::ParallelOp inner;
  SmallVector<Value> readRoots;
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (auto p = dyn_cast<scf::ParallelOp>(op)) {
      if (inner)
        return false;
      inner = p;
      continue;
    }
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      readRoots.push_back(weft::cuda::viewRoot(load.getMemRef()));
      continue;
    }
    if (op.getNumRegions() || !isMemoryEffectFree(&op))
      return false;
  }
  if (!inner || inner.getNumResults())
    return false;
  // One dimension of columns; the others (a row's unit dimensions) have
  // one iteration.
  std::optional<unsigned> columns;
  std::optional<int64_t> ub;
  for (unsigned d = 0; d < inner.getNumLoops(); ++d) {
    std::optional<int64_t> l = getConstantIntValue(inner.getLowerBound()[d]);
    std::optional<int64_t> u = getConstantIntValue(inner.getUpperBound()[d]);
    std::optional<int64_t> st = getConstantIntValue(inner.getStep()[d]);
    if (!l || !u || !st || *l != 0 || *st != 1)
      return false;
    if (*u == 1)
      continue;
    if (columns)
      return false;
    columns = d;
    ub = *u;
  }
  if (!columns)
    return false;
  Value j = inner.getInductionVars()[*columns];
  // Whether `index` is j (directly, or through the identity affine.apply
  // the loop lowering leaves).
  auto isColumn = [&](Value index) {
    if (auto apply = index.getDefiningOp<affine::AffineApplyOp>())
      if (apply.getAffineMap().isIdentity() && apply.getNumOperands() == 1)
        index = apply.getOperand(0);
    return index == j;
  };
  auto columnAccess = [&](Value memref, ValueRange indices) {
    auto type = dyn_cast<MemRefType>(memref.getType());
    if (!type || indices.empty() || !isColumn(indices.back()) ||
        type.getShape().back() != *ub)
      return false;
    if (llvm::any_of(indices.drop_back(), isColumn))
      return false;
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(type.getStridesAndOffset(strides, offset)) ||
        strides.back() != 1)
      return false;
    // Through subviews: each keeps the innermost dimension whole.
    for (Value v = memref; Operation *def = v.getDefiningOp();) {
      auto sub = dyn_cast<memref::SubViewOp>(def);
      if (!sub)
        break;
      if (sub.getStaticOffsets().back() != 0 ||
          sub.getStaticSizes().back() != *ub ||
          sub.getStaticStrides().back() != 1 ||
          cast<MemRefType>(sub.getSource().getType()).getShape().back() != *ub)
        return false;
      v = sub.getSource();
    }
    return true;
  };
  SmallVector<Value> writeRoots;
  for (Operation &op : inner.getBody()->without_terminator()) {
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      if (!columnAccess(load.getMemRef(), load.getIndices()))
        return false;
      continue;
    }
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      if (!columnAccess(store.getMemRef(), store.getIndices()))
        return false;
      writeRoots.push_back(weft::cuda::viewRoot(store.getMemRef()));
      continue;
    }
    if (op.getNumRegions() || !isMemoryEffectFree(&op))
      return false;
  }
  // What the sequential loop reads for itself (the ids) is not written.
  for (Value root : readRoots)
    if (llvm::is_contained(writeRoots, root))
      return false;

  OpBuilder b(loop);
  Location loc = loop.getLoc();
  int64_t threads = std::min<int64_t>(*ub, blockSize);
  gpu::LaunchOp launch =
      createLaunch(b, loc, cst(b, loc, llvm::divideCeil(*ub, threads)),
                   cst(b, loc, threads));
  Value column = globalThread(b, loc, launch, threads);
  Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                        column, cst(b, loc, *ub));
  auto guard = scf::IfOp::create(b, loc, inRange, false);
  b.setInsertionPointToStart(&guard.getThenRegion().front());
  IRMapping map;
  for (Value iv : inner.getInductionVars())
    map.map(iv, iv == j ? column : cst(b, loc, 0));
  auto seq = scf::ForOp::create(b, loc, loop.getLowerBound(),
                                loop.getUpperBound(), loop.getStep());
  map.map(loop.getInductionVar(), seq.getInductionVar());
  b.setInsertionPointToStart(seq.getBody());
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (&op == inner.getOperation()) {
      for (Operation &o : inner.getBody()->without_terminator())
        b.clone(o, map);
      continue;
    }
    b.clone(op, map);
  }
  loop.erase();
  return true;
}

/// Moves the parallel loops of a generic op first (no-op for others).
linalg::LinalgOp parallelFirst(RewriterBase &rewriter, linalg::LinalgOp op) {
  auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
  if (!generic)
    return op;
  SmallVector<unsigned> perm;
  SmallVector<utils::IteratorType> iters = generic.getIteratorTypesArray();
  for (unsigned i = 0; i < iters.size(); ++i)
    if (iters[i] == utils::IteratorType::parallel)
      perm.push_back(i);
  for (unsigned i = 0; i < iters.size(); ++i)
    if (iters[i] != utils::IteratorType::parallel)
      perm.push_back(i);
  if (llvm::equal(perm, llvm::seq<unsigned>(0, perm.size())))
    return op;
  rewriter.setInsertionPoint(generic);
  FailureOr<linalg::GenericOp> swapped =
      linalg::interchangeGenericOp(rewriter, generic, perm);
  return failed(swapped) ? op : linalg::LinalgOp(*swapped);
}

/// The workgroup buffers (indices into `slots`, their element types) of a
/// block reduction of outputs of `types`: the k-th output of a type takes
/// the k-th slot of that type, added to `slots` when missing. Ops run one
/// after another, so they share slots.
SmallVector<unsigned> sharedSlots(ArrayRef<Type> types,
                                  SmallVector<Type> &slots) {
  SmallVector<unsigned> taken;
  for (auto [i, type] : llvm::enumerate(types)) {
    unsigned before = llvm::count(types.take_front(i), type);
    unsigned seen = 0, slot = slots.size();
    for (auto [j, t] : llvm::enumerate(slots))
      if (t == type && seen++ == before) {
        slot = j;
        break;
      }
    if (slot == slots.size())
      slots.push_back(type);
    taken.push_back(slot);
  }
  return taken;
}

/// A kernel's rows as blocks, for row kernels with reductions (softmax,
/// layer norm, cross-entropy and their gradients): block r runs iteration
/// r of `forall`, its threads sharing each op of the row. An op of
/// parallel loops is split over the threads (thread t takes elements t,
/// t + threads, ...: consecutive threads, consecutive addresses); a
/// reduction of the row into one element is a block reduction in shared
/// memory (emitBlockReduction); a reduction into several elements is a
/// thread per element; a barrier follows each op, since the next reads
/// what other threads wrote. Returns false (changing nothing) when the
/// body holds anything else, or is a single elementwise op (a thread per
/// element of the whole nest is better).
FailureOr<bool> launchRowsAsBlocks(scf::ForallOp forall, int64_t maxThreads,
                                   bool vectorize) {
  if (!forall.getOutputs().empty() || forall.getMapping() ||
      !forall.isNormalized())
    return false;
  std::optional<SmallVector<int64_t>> rowRanges =
      getConstantIntValues(forall.getMixedUpperBound());
  if (!rowRanges)
    return false;
  bool reduces = false;
  int64_t widest = 1, memoryOps = 0;
  SmallVector<Type> sharedTypes;
  for (Operation &op : forall.getBody()->without_terminator()) {
    if (isa<memref::CopyOp>(op)) {
      ++memoryOps;
      auto type = cast<MemRefType>(op.getOperand(0).getType());
      if (!type.hasStaticShape())
        return false;
      widest = std::max(widest, type.getNumElements());
      continue;
    }
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
      if (!linalgOp.hasPureBufferSemantics())
        return false;
      int64_t work = 1;
      for (int64_t r : linalgOp.getStaticLoopRanges()) {
        if (ShapedType::isDynamic(r))
          return false;
        work *= r;
      }
      widest = std::max(widest, work);
      ++memoryOps;
      reduces |= linalgOp.getNumReductionLoops() > 0;
      if (auto generic = dyn_cast<linalg::GenericOp>(op))
        if (std::optional<ElementReduction> red =
                matchElementReduction(generic, /*several=*/true))
          sharedSlots(red->types, sharedTypes);
      continue;
    }
    if (op.getNumRegions() || !isMemoryEffectFree(&op))
      return false;
  }
  // One elementwise op: a thread per element of the whole nest is better.
  if (!reduces && memoryOps <= 1)
    return false;
  int64_t rows = 1;
  for (int64_t r : *rowRanges)
    rows *= r;
  // Fewer rows than a GPU has multiprocessors (an attention head's
  // T x T block per row): the largest blocks, or most of the GPU idles.
  if (rows < 128)
    maxThreads = 1024;
  int64_t threads =
      std::clamp<int64_t>(llvm::PowerOf2Ceil(widest), 32, maxThreads);
  MLIRContext *ctx = forall.getContext();
  Location loc = forall.getLoc();
  OpBuilder b(forall);
  SmallVector<Type> shared;
  for (Type t : sharedTypes)
    shared.push_back(sharedBuffer(ctx, threads, t));
  gpu::LaunchOp launch =
      createLaunch(b, loc, cst(b, loc, rows), cst(b, loc, threads), shared);
  Value tid = launch.getThreadIds().x;
  IRMapping map;
  SmallVector<Value> rowIvs =
      delinearize(b, loc, launch.getBlockIds().x, *rowRanges);
  map.map(forall.getInductionVars(), rowIvs);
  IRRewriter rewriter(ctx);
  for (Operation &original : forall.getBody()->without_terminator()) {
    Operation *op = b.clone(original, map);
    if (auto copy = dyn_cast<memref::CopyOp>(op)) {
      op = linalg::CopyOp::create(b, loc, copy.getSource(), copy.getTarget());
      copy.erase();
    }
    auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
    if (!linalgOp)
      continue;
    auto generic = dyn_cast<linalg::GenericOp>(op);
    std::optional<ElementReduction> red =
        generic ? matchElementReduction(generic, /*several=*/true)
                : std::nullopt;
    if (red) {
      SmallVector<Value> buffers;
      for (unsigned slot : sharedSlots(red->types, sharedTypes))
        buffers.push_back(launch.getWorkgroupAttributions()[slot]);
      emitBlockReduction(b, generic, *red, tid, threads, buffers);
      generic.erase();
    } else if (linalgOp.getNumLoops() == 0) {
      // A scalar op: one thread, or the others would race on its output.
      Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                                          cst(b, loc, 0));
      auto ifOp = scf::IfOp::create(b, loc, first, false);
      linalgOp->moveBefore(ifOp.getThenRegion().front().getTerminator());
      rewriter.setInsertionPoint(linalgOp);
      if (failed(linalg::linalgOpToLoops(rewriter, linalgOp)))
        return linalgOp->emitError("cannot lower this op to loops");
      rewriter.eraseOp(linalgOp);
    } else {
      // Parallel loops over the threads; a remaining reduction loop (a
      // reduction into several elements) runs inside each thread.
      linalgOp = parallelFirst(rewriter, linalgOp);
      rewriter.setInsertionPoint(linalgOp);
      FailureOr<linalg::LinalgLoops> loops =
          linalg::linalgOpToParallelLoops(rewriter, linalgOp);
      if (failed(loops) || loops->empty())
        return linalgOp->emitError("cannot lower this op to parallel loops");
      rewriter.eraseOp(linalgOp);
      auto nest = cast<scf::ParallelOp>(loops->front());
      b.setInsertionPoint(nest);
      int64_t lanes = vectorize ? weft::cuda::vectorLanes(nest) : 1;
      SmallVector<Value> counts = laneTripCounts(b, nest, lanes);
      Value total = cst(b, loc, 1);
      for (Value c : counts)
        total = arith::MulIOp::create(b, loc, total, c);
      auto strided =
          scf::ForOp::create(b, loc, tid, total, cst(b, loc, threads));
      OpBuilder in = OpBuilder::atBlockBegin(strided.getBody());
      weft::cuda::emitLanes(in, loc, nest,
                            delinearizeNest(in, loc, nest, counts,
                                            strided.getInductionVar(), lanes),
                            lanes);
      nest.erase();
    }
    b.setInsertionPoint(launch.getBody().front().getTerminator());
    gpu::BarrierOp::create(b, loc);
  }
  forall.erase();
  return true;
}

/// Runs `ops` (consecutive, sequential) on one thread.
void launchSequential(ArrayRef<Operation *> ops) {
  OpBuilder b(ops.front());
  Location loc = ops.front()->getLoc();
  Value one = cst(b, loc, 1);
  gpu::LaunchOp launch = createLaunch(b, loc, one, one);
  Block &body = launch.getBody().front();
  for (Operation *op : ops)
    op->moveBefore(body.getTerminator());
}

/// Clones a chain of host ops rooted at a memref.get_global into `launch`
/// for each use inside it: constants are data of the kernel module.
LogicalResult sinkGlobals(gpu::LaunchOp launch) {
  Block &body = launch.getBody().front();
  DenseMap<Value, Value> cloned;
  std::function<Value(Value)> sink = [&](Value v) -> Value {
    if (Value c = cloned.lookup(v))
      return c;
    Operation *def = v.getDefiningOp();
    if (!def || launch->isAncestor(def))
      return v;
    bool fromGlobal = isa<memref::GetGlobalOp>(def);
    if (!fromGlobal && isa<ViewLikeOpInterface>(def))
      fromGlobal = sink(def->getOperand(0)) != def->getOperand(0);
    if (!fromGlobal)
      return v;
    OpBuilder b = OpBuilder::atBlockBegin(&body);
    IRMapping map;
    for (Value operand : def->getOperands()) {
      Value s = sink(operand);
      if (s != operand)
        map.map(operand, s);
    }
    // After the values it reads, which were cloned first.
    Operation *last = nullptr;
    for (Value operand : def->getOperands())
      if (Operation *d = map.lookupOrDefault(operand).getDefiningOp())
        if (launch->isAncestor(d) && (!last || last->isBeforeInBlock(d)))
          last = d;
    if (last)
      b.setInsertionPointAfter(last);
    Value c = b.clone(*def, map)->getResult(0);
    cloned[v] = c;
    return c;
  };
  launch.getBody().walk([&](Operation *op) {
    for (OpOperand &operand : op->getOpOperands()) {
      Value s = sink(operand.get());
      if (s != operand.get())
        operand.set(s);
    }
  });
  return success();
}

struct GpuMapStepPass : weft::impl::GpuMapStepPassBase<GpuMapStepPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>(function);
    if (!step || step.isDeclaration()) {
      module.emitError("--weft-gpu-map-step: no function @") << function;
      return signalPassFailure();
    }
    if (blockSize < 1 || blockSize > 1024) {
      module.emitError("--weft-gpu-map-step: block-size must be 1 to 1024");
      return signalPassFailure();
    }
    if (reduceBlockSize < 32 || reduceBlockSize > 1024 ||
        !llvm::isPowerOf2_64(reduceBlockSize)) {
      module.emitError("--weft-gpu-map-step: reduce-block-size must be a "
                       "power of two from 32 to 1024");
      return signalPassFailure();
    }
    FailureOr<SmallVector<func::FuncOp>> kernels = collectKernels(module, step);
    if (failed(kernels) || failed(mapCalls(module, step)))
      return signalPassFailure();
    // Each kernel function launches its loops: the host code stays many
    // small functions, which LLVM optimizes in linear time, and a kernel
    // shared by several layers is compiled once.
    for (func::FuncOp f : *kernels)
      if (failed(mapFunction(f)))
        return signalPassFailure();
    if (failed(mapFunction(step)))
      return signalPassFailure();
  }

  LogicalResult mapFunction(func::FuncOp f) {
    if (!f.getBody().hasOneBlock())
      return f.emitError("--target cuda expects functions of one block");
    Block &block = f.getBody().front();
    IRRewriter rewriter(f.getContext());
    for (auto op :
         llvm::make_early_inc_range(block.getOps<linalg::GenericOp>()))
      if (!launchFullReduction(op, reduceBlockSize, reduceBlocksFrom) &&
          partialReductions)
        launchPartialReduction(rewriter, op);
    if (rowBlocks)
      for (auto forall :
           llvm::make_early_inc_range(block.getOps<scf::ForallOp>()))
        if (failed(launchRowsAsBlocks(forall, rowBlockSize, vectorLanes)))
          return failure();
    if (failed(lowerToLoops(f)))
      return failure();
    // Parallel nests first; what is left and is not host arithmetic runs
    // on one thread, in runs of consecutive ops.
    SmallVector<scf::ParallelOp> nests;
    for (auto p : block.getOps<scf::ParallelOp>())
      nests.push_back(p);
    for (scf::ParallelOp p : nests) {
      if (p.getNumResults())
        return p.emitError("--target cuda: a parallel loop with results");
      launchParallel(collapseNest(p), blockSize, vectorLanes);
    }
    for (auto loop : llvm::make_early_inc_range(block.getOps<scf::ForOp>()))
      launchColumnsOfSequentialLoop(loop, blockSize);
    SmallVector<SmallVector<Operation *>> runs;
    SmallVector<Operation *> run;
    // Arithmetic on a value loaded from device memory is device code too.
    DenseSet<Operation *> onDevice;
    for (Operation &op : block) {
      bool device =
          !isa<gpu::LaunchOp>(op) &&
          (!isHostOp(&op) || llvm::any_of(op.getOperands(), [&](Value v) {
            return onDevice.contains(v.getDefiningOp());
          }));
      if (device) {
        onDevice.insert(&op);
        run.push_back(&op);
        continue;
      }
      if (!run.empty())
        runs.push_back(std::move(run));
      run.clear();
    }
    for (ArrayRef<Operation *> r : runs) {
      // A value computed on the device cannot be read by the host.
      for (Operation *op : r)
        for (Value result : op->getResults())
          for (Operation *user : result.getUsers())
            if (!llvm::is_contained(r, user) &&
                !llvm::any_of(
                    r, [&](Operation *o) { return o->isProperAncestor(user); }))
              return op->emitError("--target cuda: this value is computed "
                                   "on the GPU but used outside its kernel");
      launchSequential(r);
    }
    WalkResult sunk = f.walk([&](gpu::LaunchOp launch) {
      return failed(sinkGlobals(launch)) ? WalkResult::interrupt()
                                         : WalkResult::advance();
    });
    if (sunk.wasInterrupted())
      return failure();
    // A constant left on the host would hand a host pointer to device
    // code; a kernel function it is passed to reads its own copy.
    ModuleOp module = f->getParentOfType<ModuleOp>();
    for (auto global :
         llvm::make_early_inc_range(block.getOps<memref::GetGlobalOp>())) {
      SmallVector<Operation *> dead;
      std::function<bool(Operation *)> harmless = [&](Operation *op) {
        for (Operation *user : op->getUsers()) {
          if (auto call = dyn_cast<func::CallOp>(user)) {
            auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
            if (callee && !callee.isDeclaration())
              continue;
            return false;
          }
          if (!isa<ViewLikeOpInterface>(user) || !harmless(user))
            return false;
        }
        if (op->use_empty())
          dead.push_back(op);
        return true;
      };
      if (harmless(global)) {
        for (Operation *op : dead)
          op->erase();
        continue;
      }
      return global.emitError("--target cuda: the constant ")
             << global.getName()
             << " is read by a GEMM or another host call; device code can "
                "only read constants inside its kernels";
    }
    return success();
  }

  /// GEMM and attention calls to their device versions; every other
  /// runtime call is an error.
  LogicalResult mapCalls(ModuleOp module, func::FuncOp step) {
    SmallVector<func::CallOp> calls;
    step.walk([&](func::CallOp call) { calls.push_back(call); });
    for (func::CallOp call : calls) {
      StringRef callee = call.getCallee();
      auto kernel = module.lookupSymbol<func::FuncOp>(callee);
      if (kernel && !kernel.isDeclaration())
        continue;
      auto it = deviceCalls().find(callee);
      if (it == deviceCalls().end())
        return call.emitError("--target cuda: ")
               << callee << " has no GPU version: " << fixFor(callee);
      auto decl = module.lookupSymbol<func::FuncOp>(callee);
      auto device = module.lookupSymbol<func::FuncOp>(it->second);
      if (!device) {
        OpBuilder b(decl);
        device = cast<func::FuncOp>(b.clone(*decl));
        device.setName(it->second);
      }
      call.setCallee(it->second);
    }
    for (auto &[name, device] : deviceCalls()) {
      auto decl = module.lookupSymbol<func::FuncOp>(name);
      if (decl && decl.symbolKnownUseEmpty(module))
        decl.erase();
    }
    return success();
  }
};

} // namespace
