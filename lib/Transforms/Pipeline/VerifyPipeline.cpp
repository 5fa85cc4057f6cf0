//===- VerifyPipeline.cpp - The rank steps' transfers meet -----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The schedule library proves a schedule safe; this checks the programs
// built from it, so that a transfer placed wrong (by a pass, or by a
// person editing the IR) is a compile error naming the ranks and the
// message, not a run that hangs until the runtime's timeout.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Transforms/Pipeline/Passes.h"

#include <map>

namespace weft {
#define GEN_PASS_DEF_VERIFYPIPELINEPASS
#include "weft/Transforms/Pipeline/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
/// One send or receive of a rank, in program order.
struct Transfer {
  Operation *op;
  bool send;
  int64_t peer, tag;
  Type type;

  std::string describe(int64_t rank) const {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "rank " << rank << (send ? " sends tag " : " receives tag ") << tag
       << " (" << type;
    if (auto what = op->getAttrOfType<StringAttr>(kMessageAttrName))
      os << ", " << what.getValue();
    os << (send ? ") to rank " : ") from rank ") << peer;
    return text;
  }
};
} // namespace

LogicalResult weft::verifyPipelineTransfers(ModuleOp module) {
  std::map<int64_t, SmallVector<Transfer>> ranks;
  std::map<int64_t, func::FuncOp> functions;
  for (auto fn : module.getOps<func::FuncOp>()) {
    auto rank = fn->getAttrOfType<IntegerAttr>("weft.pipeline_rank");
    if (!rank)
      continue;
    functions[rank.getInt()] = fn;
    SmallVector<Transfer> &list = ranks[rank.getInt()];
    fn.walk([&](Operation *op) {
      if (auto send = dyn_cast<SendOp>(op))
        list.push_back({op, true, send.getPeer(), send.getTag(),
                        send.getInput().getType()});
      else if (auto recv = dyn_cast<RecvOp>(op))
        list.push_back({op, false, recv.getPeer(), recv.getTag(),
                        recv.getType()});
    });
  }
  std::map<int64_t, size_t> next;
  for (auto &[r, list] : ranks)
    next[r] = 0;
  auto current = [&](int64_t r) -> const Transfer * {
    auto it = ranks.find(r);
    if (it == ranks.end() || next[r] >= it->second.size())
      return nullptr;
    return &it->second[next[r]];
  };
  while (true) {
    bool moved = false, left = false;
    for (auto &[r, list] : ranks) {
      const Transfer *mine = current(r);
      if (!mine)
        continue;
      left = true;
      if (!ranks.count(mine->peer))
        return mine->op->emitError()
               << mine->describe(r) << ", but no function is rank "
               << mine->peer << "'s step";
      const Transfer *theirs = current(mine->peer);
      // Both must be at the matching pair: rendezvous, as on the runtime.
      if (!theirs || theirs->peer != r || theirs->send == mine->send)
        continue;
      if (theirs->tag != mine->tag || theirs->type != mine->type) {
        InFlightDiagnostic diag =
            mine->op->emitError()
            << "pipeline transfers do not meet: " << mine->describe(r)
            << ", while " << theirs->describe(mine->peer)
            << "; both would wait until the runtime's timeout";
        diag.attachNote(theirs->op->getLoc()) << "the other transfer";
        return diag;
      }
      ++next[r];
      ++next[mine->peer];
      moved = true;
    }
    if (!left)
      return success();
    if (!moved) {
      std::string waits;
      for (auto &[r, list] : ranks)
        if (const Transfer *t = current(r))
          waits += "\n  " + t->describe(r);
      for (auto &[r, list] : ranks)
        if (const Transfer *t = current(r))
          return t->op->emitError()
                 << "pipeline ranks wait on each other and none can go on "
                    "(each blocks until its peer reaches the matching "
                    "transfer):"
                 << waits;
      return success();
    }
  }
}

namespace {
struct VerifyPipelinePass
    : public weft::impl::VerifyPipelinePassBase<VerifyPipelinePass> {
  void runOnOperation() override {
    if (failed(verifyPipelineTransfers(getOperation())))
      signalPassFailure();
  }
};
} // namespace
