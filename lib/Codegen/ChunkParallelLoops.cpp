//===- ChunkParallelLoops.cpp - Kernels' parallel loops as a few chunks ---===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Each fused kernel is one scf.forall over rows, and its iterations run on
// the threads of an OpenMP team. An iteration's scratch buffers (a row's
// running max, a partial sum in f64) must then be private to it, and
// --weft-plan-buffers gives every iteration of a forall its own copy. With
// thousands of rows that would multiply the scratch by thousands, so this
// pass first regroups the rows of a large forall into at most `chunks`
// parallel iterations, each a sequential loop over its rows: the scratch is
// copied `chunks` times and reused row after row.
//
// Rows are dealt to chunks round-robin (chunk c takes rows c, c + K,
// c + 2K, ...), so every chunk sees the same mix of cheap and expensive rows
// (causal attention's early rows are cheap) whatever schedule the runtime
// uses. Where every chunk still gets four deals or more, rows are dealt in
// blocks of up to 16 consecutive ones (chunk c takes blocks c, c + K, ...):
// a kernel that reads a column of a row-major buffer (a transposed product
// summed over the batch, a bias gradient) then uses each 64-byte line for
// 16 rows in a row, where single rows dealt round-robin made every chunk
// pull every line (a bf16 GPT's tied-embedding gradient spent 43 % of the
// step there).
//
//===----------------------------------------------------------------------===//

#include "weft/Codegen/Passes.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"

namespace weft {
#define GEN_PASS_DEF_CHUNKPARALLELLOOPSPASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {
/// The trip counts of a forall with static bounds from 0 in steps of 1;
/// nothing for any other forall.
std::optional<SmallVector<int64_t>> normalizedTripCounts(scf::ForallOp loop) {
  for (auto [lb, ub, step] :
       llvm::zip(loop.getStaticLowerBound(), loop.getStaticUpperBound(),
                 loop.getStaticStep()))
    if (lb != 0 || step != 1 || ShapedType::isDynamic(ub))
      return std::nullopt;
  return llvm::to_vector(loop.getStaticUpperBound());
}

/// Bytes of the statically shaped buffers allocated inside `loop`'s body:
/// what each of its iterations needs for itself.
int64_t scratchBytes(scf::ForallOp loop, const DataLayout &layout) {
  int64_t bytes = 0;
  loop.getBody()->walk([&](memref::AllocOp alloc) {
    MemRefType type = alloc.getType();
    if (type.hasStaticShape())
      bytes += type.getNumElements() *
               int64_t(layout.getTypeSize(type.getElementType()));
  });
  return bytes;
}

/// Rows dealt together: the most, up to 16 (one 64-byte line of f32), that
/// divides `rows` and still deals every one of `chunks` chunks 4 blocks.
int64_t rowsPerBlock(int64_t rows, int64_t chunks) {
  for (int64_t block : {16, 8, 4, 2})
    if (rows % block == 0 && rows / block >= 4 * chunks)
      return block;
  return 1;
}

struct ChunkParallelLoopsPass
    : public weft::impl::ChunkParallelLoopsPassBase<ChunkParallelLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (chunks < 1) {
      getOperation().emitError() << "--weft-chunk-parallel-loops: chunks must "
                                    "be at least 1 (got "
                                 << chunks << ")";
      return signalPassFailure();
    }
    SmallVector<scf::ForallOp> loops;
    getOperation().walk([&](scf::ForallOp loop) {
      if (!loop->getParentOfType<scf::ForallOp>())
        loops.push_back(loop);
    });
    for (scf::ForallOp loop : loops)
      chunk(loop);
  }

  void chunk(scf::ForallOp loop) {
    if (!loop.getOutputs().empty() || loop.getMapping())
      return;
    std::optional<SmallVector<int64_t>> counts = normalizedTripCounts(loop);
    if (!counts)
      return;
    int64_t rows = 1;
    for (int64_t count : *counts)
      rows *= count;
    int64_t scratch =
        scratchBytes(loop, DataLayout::closest(loop.getOperation()));
    int64_t target = std::min<int64_t>(chunks, rows);
    while (target > 1 && scratch > 0 && target * scratch > scratchBudget)
      target = (target + 1) / 2;
    if (target >= rows)
      return;

    OpBuilder b(loop);
    Location loc = loop.getLoc();
    auto outer = scf::ForallOp::create(
        b, loc, ArrayRef<OpFoldResult>{b.getIndexAttr(target)},
        ValueRange{}, std::nullopt);
    // The kernel keeps its name (`weft.kernel`), which outlining gives its
    // function: the same as on a GPU, where rows are not chunked.
    if (Attribute tag = loop->getAttr(weft::WeftDialect::kKernelAttrName))
      outer->setAttr(weft::WeftDialect::kKernelAttrName, tag);
    b.setInsertionPointToStart(outer.getBody());
    int64_t block = rowsPerBlock(rows, target);
    Value blockCount = arith::ConstantIndexOp::create(b, loc, rows / block);
    Value stride = arith::ConstantIndexOp::create(b, loc, target);
    auto blockLoop = scf::ForOp::create(b, loc, outer.getInductionVar(0),
                                        blockCount, stride);
    b.setInsertionPointToStart(blockLoop.getBody());
    Value flat = blockLoop.getInductionVar();
    if (block > 1) {
      Value size = arith::ConstantIndexOp::create(b, loc, block);
      Value first = arith::MulIOp::create(b, loc, flat, size);
      Value last = arith::AddIOp::create(b, loc, first, size);
      Value one = arith::ConstantIndexOp::create(b, loc, 1);
      auto rowLoop = scf::ForOp::create(b, loc, first, last, one);
      b.setInsertionPointToStart(rowLoop.getBody());
      flat = rowLoop.getInductionVar();
    }

    // Row-major delinearization of the flat row back to the old indices.
    IRMapping mapping;
    for (int64_t d = int64_t(counts->size()) - 1; d >= 0; --d) {
      Value iv = loop.getInductionVar(d);
      if (d == 0) {
        mapping.map(iv, flat);
        break;
      }
      Value extent = arith::ConstantIndexOp::create(b, loc, (*counts)[d]);
      mapping.map(iv, arith::RemUIOp::create(b, loc, flat, extent));
      flat = arith::DivUIOp::create(b, loc, flat, extent);
    }
    for (Operation &op : loop.getBody()->without_terminator())
      b.clone(op, mapping);
    loop->erase();
  }
};
} // namespace
