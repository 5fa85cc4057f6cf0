//===- GradientFlow.h - Why a parameter gets no gradient --------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// --weft-mark-buffers (at import) and --weft-autodiff (on the loss) both
// leave a parameter that gets no gradient untrained, and both must say so
// and why, in the same words. Not installed: a helper of those passes.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_TRANSFORMS_GRADIENTFLOW_H
#define WEFT_LIB_TRANSFORMS_GRADIENTFLOW_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Value.h"
#include "mlir/IR/ValueRange.h"

#include <string>

namespace weft {

/// Why no gradient reaches `param` (an argument of `body`) from `targets`
/// (the loss, or a function's results), which `what` names ("the loss"):
/// the text after "gets no gradient: ". Either the parameter does not reach
/// them at all, or every path crosses an op through which no gradient flows
/// (one marked NotDifferentiable, or one whose results are not float), and
/// then the first such op is named. One forward scan of `body`; meant for
/// the few parameters that get no gradient, not for every parameter.
std::string explainNoGradient(mlir::Block &body, mlir::Value param,
                              mlir::ValueRange targets, llvm::StringRef what);

/// The tail of every "gets no gradient" warning: what happens to the
/// parameter instead of training.
llvm::StringRef untrainedParameterNote();

} // namespace weft

#endif // WEFT_LIB_TRANSFORMS_GRADIENTFLOW_H
