//===- WeftDialect.cpp - The weft dialect ---------------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/Transforms/InliningUtils.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace weft;

#include "weft/Dialect/Weft/IR/WeftDialect.cpp.inc"
#include "weft/Dialect/Weft/IR/WeftEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "weft/Dialect/Weft/IR/WeftAttrs.cpp.inc"

namespace {
/// Weft ops are pure tensor functions of their operands: any of them may
/// be inlined, which the parallel stage does to partition a whole step.
struct WeftInlinerInterface : public DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Operation *, bool) const final {
    return true;
  }
  bool isLegalToInline(Operation *, Region *, bool,
                       IRMapping &) const final {
    return true;
  }
};
} // namespace

void WeftDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "weft/Dialect/Weft/IR/WeftOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "weft/Dialect/Weft/IR/WeftAttrs.cpp.inc"
      >();
  addInterfaces<WeftInlinerInterface>();
  registerShardingRules(getContext());
}

Operation *WeftDialect::materializeConstant(OpBuilder &builder,
                                            Attribute value, Type type,
                                            Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}
