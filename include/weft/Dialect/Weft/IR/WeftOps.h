//===- WeftOps.h - weft dialect operations ------------------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_WEFTOPS_H
#define WEFT_DIALECT_WEFT_IR_WEFTOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "weft/Dialect/Weft/IR/Sharding.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"

#include <limits>

#include "weft/Dialect/Weft/IR/WeftEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "weft/Dialect/Weft/IR/WeftAttrs.h.inc"

#include "weft/Dialect/Weft/IR/WeftInterfaces.h.inc"

namespace weft::OpTrait {
/// Marks an op through which no gradient flows (Weft_NotDifferentiable in
/// WeftInterfaces.td): autodiff propagates nothing through it, and a
/// parameter whose every path to the loss crosses one gets no gradient.
template <typename ConcreteType>
class NotDifferentiable
    : public mlir::OpTrait::TraitBase<ConcreteType, NotDifferentiable> {};
} // namespace weft::OpTrait

#define GET_OP_CLASSES
#include "weft/Dialect/Weft/IR/WeftOps.h.inc"

namespace weft {

/// Numpy broadcast of two shapes; std::nullopt when they do not broadcast.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);

/// "4x16x32" (or "scalar" for rank 0): how shapes appear in diagnostics.
std::string formatShape(llvm::ArrayRef<int64_t> shape);

/// Whether gradients can flow through `op`: every op except those marked
/// NotDifferentiable. An op that lets gradients flow but has no
/// GradientOpInterface rule is an error when autodiff reaches it.
inline bool passesGradients(mlir::Operation *op) {
  return !op->hasTrait<OpTrait::NotDifferentiable>();
}

/// Whether values of `type` carry gradients: float tensors do; integer and
/// i1 tensors (indices, labels, masks) do not. Autodiff, the gradient rules
/// and the no-gradient diagnostics all ask this one question.
inline bool isDifferentiableType(mlir::Type type) {
  auto shaped = mlir::dyn_cast<mlir::ShapedType>(type);
  return shaped && mlir::isa<mlir::FloatType>(shaped.getElementType());
}

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_WEFTOPS_H
