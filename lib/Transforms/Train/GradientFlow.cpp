//===- GradientFlow.cpp - Why a parameter gets no gradient ----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "GradientFlow.h"

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "llvm/ADT/DenseSet.h"

using namespace mlir;

std::string weft::explainNoGradient(Block &body, Value param,
                                    ValueRange targets, StringRef what) {
  if (!isDifferentiableType(param.getType()))
    return "it is not a float tensor";
  // Values computed from `param` by any op, gradient or not, in one scan in
  // block order (users follow their operands, so one scan is enough).
  llvm::DenseSet<Value> derived{param};
  Operation *blocker = nullptr;
  for (Operation &op : body) {
    bool readsFloat = false, reads = false;
    op.walk([&](Operation *nested) {
      for (Value v : nested->getOperands())
        if (derived.contains(v)) {
          reads = true;
          readsFloat |= isDifferentiableType(v.getType());
        }
    });
    if (!reads)
      continue;
    bool floatResult = llvm::any_of(op.getResultTypes(), isDifferentiableType);
    if (!blocker && readsFloat && (!passesGradients(&op) || !floatResult))
      blocker = &op;
    for (Value result : op.getResults())
      derived.insert(result);
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  if (llvm::none_of(targets, [&](Value t) { return derived.contains(t); })) {
    os << "it does not reach " << what;
  } else if (blocker) {
    os << "every path to " << what << " crosses '" << blocker->getName()
       << "', ";
    if (!passesGradients(blocker))
      os << "which is not differentiable";
    else
      os << "whose result is not a float tensor";
  } else {
    os << "no gradient flows back to it from " << what;
  }
  return text;
}

StringRef weft::untrainedParameterNote() {
  return "it stays a buffer (loaded, never updated or decayed), as "
         "torch.optim skips a parameter whose .grad stays None";
}
