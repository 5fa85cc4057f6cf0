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
#include <tuple>

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
  // A send never blocks (the runtime's sender thread carries a copy); a
  // receive waits until its peer has sent that tag. Each rank runs as far
  // as it can, round after round, until all are done or none can move.
  std::map<int64_t, size_t> next;
  for (auto &[r, list] : ranks)
    next[r] = 0;
  auto current = [&](int64_t r) -> const Transfer * {
    auto it = ranks.find(r);
    if (it == ranks.end() || next[r] >= it->second.size())
      return nullptr;
    return &it->second[next[r]];
  };
  // Sent and not yet received: (from, to, tag) -> the send.
  std::map<std::tuple<int64_t, int64_t, int64_t>, const Transfer *> sent;
  auto doNotMeet = [](const Transfer &mine, int64_t r, const Transfer &theirs,
                      int64_t peer) {
    InFlightDiagnostic diag =
        mine.op->emitError()
        << "pipeline transfers do not meet: " << mine.describe(r)
        << ", while " << theirs.describe(peer)
        << "; the receive would wait until the runtime's timeout";
    diag.attachNote(theirs.op->getLoc()) << "the other transfer";
    return diag;
  };
  while (true) {
    bool moved = false, left = false;
    for (auto &[r, list] : ranks) {
      while (const Transfer *mine = current(r)) {
        if (!ranks.count(mine->peer))
          return mine->op->emitError()
                 << mine->describe(r) << ", but no function is rank "
                 << mine->peer << "'s step";
        if (mine->send) {
          auto [it, fresh] =
              sent.try_emplace({r, mine->peer, mine->tag}, mine);
          if (!fresh)
            return mine->op->emitError()
                   << mine->describe(r) << " while its earlier send of tag "
                   << mine->tag << " is not received yet";
        } else {
          auto it = sent.find({mine->peer, r, mine->tag});
          if (it == sent.end())
            break;
          if (it->second->type != mine->type)
            return doNotMeet(*mine, r, *it->second, mine->peer);
          sent.erase(it);
        }
        ++next[r];
        moved = true;
      }
      left |= current(r) != nullptr;
    }
    if (!left) {
      if (!sent.empty()) {
        auto [key, send] = *sent.begin();
        return send->op->emitError()
               << send->describe(std::get<0>(key))
               << ", which that rank never receives";
      }
      return success();
    }
    if (!moved) {
      // A receive waiting for a tag its peer never sends, while the peer
      // sent another: name both.
      for (auto &[r, list] : ranks)
        if (const Transfer *mine = current(r))
          for (auto &[key, theirs] : sent)
            if (std::get<0>(key) == mine->peer && std::get<1>(key) == r)
              return doNotMeet(*mine, r, *theirs, mine->peer);
      std::string waits;
      for (auto &[r, list] : ranks)
        if (const Transfer *t = current(r))
          waits += "\n  " + t->describe(r);
      for (auto &[r, list] : ranks)
        if (const Transfer *t = current(r))
          return t->op->emitError()
                 << "pipeline ranks wait on each other and none can go on "
                    "(each receives what its peer sends only later):"
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
