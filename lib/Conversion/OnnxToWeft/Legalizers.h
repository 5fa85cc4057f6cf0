//===- Legalizers.h - Per-op ONNX legalizers --------------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Internal to --weft-legalize-onnx: the context a legalizer builds weft ops
// through, and the registry that maps (op type, opset) to a legalizer. Each
// op family registers its legalizers from its own file.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_CONVERSION_ONNXTOWEFT_LEGALIZERS_H
#define WEFT_LIB_CONVERSION_ONNXTOWEFT_LEGALIZERS_H

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/Support/LLVM.h"

#include <functional>
#include <string>
#include <vector>

namespace weft {
namespace onnxtoweft {

/// Highest opset any legalizer claims; semantics changes up to it are
/// handled where they exist (e.g. Reduce* axes moving to an input at 18).
constexpr int64_t kMaxOpset = 21;

/// What a legalizer sees of the node it rewrites: typed access to inputs and
/// attributes that reports misuse as an error on the node, and builders that
/// infer and verify result types instead of crashing on bad shapes. Every op
/// built through it is recorded so the driver can fold it afterwards.
class LegalizeContext {
public:
  LegalizeContext(mlir::OpBuilder &builder, OnnxNodeOp node);

  mlir::OpBuilder &builder;
  OnnxNodeOp node;
  int64_t opset;
  /// Legalize train-mode semantics (the pass's `training` option).
  bool training = false;
  /// Ops built for this node, in creation order.
  llvm::SmallVector<mlir::Operation *> created;

  mlir::MLIRContext *getContext() { return builder.getContext(); }
  mlir::Location getLoc() { return node.getLoc(); }

  /// Starts an error on the node, prefixed "<OpType> node '<name>': ".
  mlir::InFlightDiagnostic emitError();

  //===--------------------------------------------------------------------===//
  // Inputs
  //===--------------------------------------------------------------------===//

  /// True when input `i` exists and is not a `weft.onnx.none`.
  bool hasInput(unsigned i);
  /// Input `i` as a statically shaped ranked tensor; an error names `what`
  /// when it is missing or has no static shape.
  mlir::FailureOr<mlir::TypedValue<mlir::RankedTensorType>>
  getTensor(unsigned i, llvm::StringRef what);
  /// Inputs 0..n-1 as static tensors, all required; `names` name them in
  /// errors.
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  getTensors(llvm::ArrayRef<llvm::StringRef> names);
  /// Every input, for variadic ops: all must be present static tensors.
  mlir::FailureOr<llvm::SmallVector<mlir::Value>> getVariadicTensors();
  /// The constant value of input `i`, which must be computable at compile
  /// time (after folding); the error names `what` and suggests
  /// --input-shape, since a dynamic dimension is the usual cause.
  mlir::FailureOr<mlir::ElementsAttr> getConstant(unsigned i,
                                                  llvm::StringRef what);
  /// Integer elements of a scalar or 1-D input `i`, which must be constant
  /// as for getConstant.
  mlir::FailureOr<llvm::SmallVector<int64_t>>
  getConstInts(unsigned i, llvm::StringRef what);
  /// The constant value of input `i`, or null when it is not a constant.
  mlir::ElementsAttr matchConstant(unsigned i);

  //===--------------------------------------------------------------------===//
  // Attributes: each getter leaves `value` alone when the attribute is
  // absent, so callers initialize it with the ONNX default.
  //===--------------------------------------------------------------------===//

  mlir::Attribute getAttr(llvm::StringRef name);
  bool hasAttr(llvm::StringRef name) {
    return static_cast<bool>(getAttr(name));
  }
  mlir::LogicalResult getInt(llvm::StringRef name, int64_t &value);
  mlir::LogicalResult getFloat(llvm::StringRef name, double &value);
  mlir::LogicalResult getString(llvm::StringRef name, std::string &value);
  mlir::LogicalResult getInts(llvm::StringRef name,
                              llvm::SmallVectorImpl<int64_t> &value);
  /// Error for an attribute value outside what weft supports.
  mlir::LogicalResult unsupportedAttr(llvm::StringRef name,
                                      llvm::StringRef value,
                                      llvm::StringRef supported);

  /// Maps an ONNX axis in [-rank, rank) to [0, rank).
  mlir::FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                         llvm::StringRef what = "axis");

  //===--------------------------------------------------------------------===//
  // Building
  //===--------------------------------------------------------------------===//

  /// Builds a single-result weft op. Without `resultType` the type comes
  /// from InferTypeOpInterface. A failed inference or verification erases
  /// the op and reports the reason on the node.
  mlir::FailureOr<mlir::Value>
  build(llvm::StringRef opName, mlir::ValueRange operands,
        llvm::ArrayRef<mlir::NamedAttribute> attrs = {},
        mlir::Type resultType = {});
  /// build() for an op with `numResults` results, all inferred unless
  /// `resultType` gives their common type.
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  buildResults(llvm::StringRef opName, mlir::ValueRange operands,
               llvm::ArrayRef<mlir::NamedAttribute> attrs,
               unsigned numResults, mlir::Type resultType = {});
  template <typename OpTy>
  mlir::FailureOr<mlir::Value>
  create(mlir::ValueRange operands,
         llvm::ArrayRef<mlir::NamedAttribute> attrs = {},
         mlir::Type resultType = {}) {
    return build(OpTy::getOperationName(), operands, attrs, resultType);
  }

  /// A `weft.constant`; fails (with an error) on element types weft lacks.
  mlir::FailureOr<mlir::Value> constant(mlir::ElementsAttr value);
  /// A rank-0 constant of `elementType` holding `value`.
  mlir::FailureOr<mlir::Value> scalar(mlir::Type elementType, double value);
  /// `weft.reshape` of `input` to `shape`.
  mlir::FailureOr<mlir::Value> reshape(mlir::Value input,
                                       llvm::ArrayRef<int64_t> shape);

  mlir::NamedAttribute i64Attr(llvm::StringRef name, int64_t value);
  mlir::NamedAttribute f64Attr(llvm::StringRef name, double value);
  mlir::NamedAttribute boolAttr(llvm::StringRef name, bool value);
  mlir::NamedAttribute arrayAttr(llvm::StringRef name,
                                 llvm::ArrayRef<int64_t> value);
};

/// Shape and element type of a value known to be a ranked tensor.
inline llvm::ArrayRef<int64_t> shapeOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType()).getShape();
}
inline mlir::Type elementTypeOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType()).getElementType();
}

/// Number of elements of a shape (1 for rank 0).
inline int64_t product(llvm::ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

/// What a legalizer returns: the values of the node's leading outputs.
using LegalizeResult = mlir::FailureOr<llvm::SmallVector<mlir::Value>>;

/// The single result of a legalizer that produces one value.
inline LegalizeResult one(mlir::FailureOr<mlir::Value> value) {
  if (mlir::failed(value))
    return mlir::failure();
  return llvm::SmallVector<mlir::Value>{*value};
}

/// Builds `OpTy` on operands that are Values or results of earlier builds,
/// so that compositions read as formulas: a failed operand (already
/// reported) fails the whole expression. C++ leaves the order in which
/// arguments are evaluated open, so at most one operand expression of a
/// call may build ops; otherwise the IR's op order depends on the compiler.
inline bool isBuilt(mlir::Value) { return true; }
inline bool isBuilt(const mlir::FailureOr<mlir::Value> &v) {
  return mlir::succeeded(v);
}
inline mlir::Value builtValue(mlir::Value v) { return v; }
inline mlir::Value builtValue(const mlir::FailureOr<mlir::Value> &v) {
  return *v;
}
template <typename OpTy, typename... Operands>
mlir::FailureOr<mlir::Value> make(LegalizeContext &ctx,
                                  const Operands &...operands) {
  if (!(isBuilt(operands) && ...))
    return mlir::failure();
  return ctx.create<OpTy>(
      llvm::SmallVector<mlir::Value>{builtValue(operands)...});
}

/// `weft.cmp` with `predicate`, operands as for make().
template <typename A, typename B>
mlir::FailureOr<mlir::Value> makeCmp(LegalizeContext &ctx,
                                     CmpPredicate predicate, const A &lhs,
                                     const B &rhs) {
  if (!isBuilt(lhs) || !isBuilt(rhs))
    return mlir::failure();
  return ctx.create<CmpOp>(
      {builtValue(lhs), builtValue(rhs)},
      {ctx.builder.getNamedAttr(
          "predicate", CmpPredicateAttr::get(ctx.getContext(), predicate))});
}

/// "[4, -1, 0]": how shape-like inputs and attributes appear in errors.
std::string formatList(llvm::ArrayRef<int64_t> values);

/// Decodes the elements of an integer (or i1) constant in row-major order;
/// failure when its encoding cannot be read.
mlir::FailureOr<llvm::SmallVector<int64_t>>
getIntValues(mlir::ElementsAttr attr);
/// Decodes the elements of a float constant as doubles.
mlir::FailureOr<llvm::SmallVector<double>>
getFloatValues(mlir::ElementsAttr attr);

/// Rewrites one node: returns the values of its leading outputs (trailing
/// outputs it does not produce must be unused), or failure after an error.
using LegalizeFn = std::function<LegalizeResult(LegalizeContext &, OnnxNodeOp,
                                                mlir::ValueRange)>;

/// Legalizers keyed by ONNX op type and inclusive opset range.
class LegalizerRegistry {
public:
  void add(llvm::StringRef opType, int64_t minOpset, int64_t maxOpset,
           LegalizeFn fn);
  /// The legalizer for `opType` at `opset`, or null.
  const LegalizeFn *lookup(llvm::StringRef opType, int64_t opset) const;
  /// Whether any opset of `opType` has a legalizer.
  bool contains(llvm::StringRef opType) const;
  /// The opset ranges of `opType`, adjacent ones merged, e.g. "17-21".
  std::string describeRanges(llvm::StringRef opType) const;
  /// All supported op types, sorted, comma-separated.
  std::string describeOpTypes() const;

private:
  struct Entry {
    std::string opType;
    int64_t minOpset, maxOpset;
    LegalizeFn fn;
  };
  std::vector<Entry> entries;
};

void populateActivationLegalizers(LegalizerRegistry &registry);
void populateElementwiseLegalizers(LegalizerRegistry &registry);
void populateConvolutionLegalizers(LegalizerRegistry &registry);
void populateReductionLegalizers(LegalizerRegistry &registry);
void populateResampleLegalizers(LegalizerRegistry &registry);
void populateLinalgLegalizers(LegalizerRegistry &registry);
void populateNormalizationLegalizers(LegalizerRegistry &registry);
void populateShapeLegalizers(LegalizerRegistry &registry);
void populateDataMovementLegalizers(LegalizerRegistry &registry);
void populateWhereLegalizers(LegalizerRegistry &registry);
void populateSelectionLegalizers(LegalizerRegistry &registry);
/// Conv, MaxPool (`isMax`) and AveragePool on NCDHW inputs, composed from
/// the 2-D window ops (Convolution3D.cpp).
LegalizeResult legalizeConv3D(LegalizeContext &ctx);
LegalizeResult legalizePool3D(LegalizeContext &ctx, bool isMax);
void populateEinsumLegalizers(LegalizerRegistry &registry);
void populateRecurrentLegalizers(LegalizerRegistry &registry);

} // namespace onnxtoweft
} // namespace weft

#endif // WEFT_LIB_CONVERSION_ONNXTOWEFT_LEGALIZERS_H
