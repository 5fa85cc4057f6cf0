//===- ShardingAnalysis.h - Shardings of a step's values --------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The fixed point behind --weft-propagate-shardings, shared with
// --weft-partition: the partitioner reruns it with every recorded sharding
// fixed, so both passes make the same decision per op (which mesh axes
// split which of its factors) from the same rules.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TRANSFORMS_PARALLEL_SHARDINGANALYSIS_H
#define WEFT_TRANSFORMS_PARALLEL_SHARDINGANALYSIS_H

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace weft {

/// Attribute names of the parallel stage.
inline constexpr llvm::StringLiteral kShardingAttrName =
    WeftDialect::kShardingAttrName;
inline constexpr llvm::StringLiteral kShardingsAttrName = "weft.shardings";
inline constexpr llvm::StringLiteral kMeshAttrName = WeftDialect::kMeshAttrName;
inline constexpr llvm::StringLiteral kRematerializeAttrName =
    "rematerialize";
/// On a weft.shard_as: the layout its input is given before propagation
/// starts (a weight gradient in its parameter's tp layout), so that the
/// op computing it splits the weight's dimensions before any activation
/// offers its own.
inline constexpr llvm::StringLiteral kPreferAttrName = "weft.prefer";

class ShardingAnalysis {
public:
  ShardingAnalysis(mlir::func::FuncOp fn, MeshAttr mesh);

  /// Seeds from the function's argument attributes and weft.shard_as ops;
  /// with `recorded`, every op's `weft.shardings` is fixed too.
  mlir::LogicalResult seed(bool recorded);
  /// Iterates forward and backward sweeps until nothing changes.
  void run();

  TensorSharding get(mlir::Value v) const;
  /// What consumers see of `v`: a partial value resolved into the layout
  /// its users want most, else `v`'s own.
  TensorSharding effective(mlir::Value v) const;
  /// The mesh axes split for each factor of `op`'s rule.
  llvm::SmallVector<AxisList> factorAxes(mlir::Operation *op,
                                         const ShardingRule &rule) const;
  /// The sharding of a value whose dims are made of `dims`' factors.
  TensorSharding project(const ShardingRule::ValueFactors &dims,
                         llvm::ArrayRef<AxisList> factorAxes) const;
  /// The results' shardings `op` produces from `factorAxes` (partial over
  /// the axes of split sum and mean factors, and over shared partial axes
  /// of additive ops' operands).
  TensorSharding resultSharding(mlir::Operation *op, const ShardingRule &rule,
                                llvm::ArrayRef<AxisList> factorAxes,
                                unsigned result) const;

  MeshAttr getMesh() const { return mesh; }

private:
  bool update(mlir::Operation *op);
  /// Sets `v` to `proposal` when that only adds splits to what it has.
  bool refine(mlir::Value v, const TensorSharding &proposal,
              llvm::DenseMap<mlir::Value, TensorSharding> &map);

  mlir::func::FuncOp fn;
  MeshAttr mesh;
  llvm::DenseMap<mlir::Value, TensorSharding> shardings, resolved;
  llvm::DenseSet<mlir::Value> fixed;
  /// Parameters and optimizer state, and values computed from them alone
  /// (a transposed weight): their splits are the plan's decisions, so an
  /// op gives them its mesh axes before the activations' (a column-
  /// parallel matmul of a sequence-split activation gathers the
  /// activation, it does not gather the weight).
  llvm::DenseSet<mlir::Value> decided;
};

/// The rule of `op`, or none for ops without ShardingRuleOpInterface.
std::optional<ShardingRule> getRule(mlir::Operation *op);

/// The axes of an operand's pending sum that an op of `rule` with
/// `numResults` results, reading it as `want`, passes on to its result
/// `result`: a linear op passes on those its result is pending over too
/// (the others are reduced first), except an axis it also splits the
/// operand over (each rank would sum its own block of its own term).
inline AxisList keptPartial(const ShardingRule &rule, unsigned numResults,
                            const TensorSharding &operand,
                            const TensorSharding &want,
                            const TensorSharding &result) {
  AxisList kept;
  if (!rule.additive || numResults != 1)
    return kept;
  for (mlir::StringAttr axis : operand.partial)
    if (llvm::is_contained(result.partial, axis) &&
        !want.withoutPartial().usesAxis(axis))
      kept.push_back(axis);
  return kept;
}

} // namespace weft

#endif // WEFT_TRANSFORMS_PARALLEL_SHARDINGANALYSIS_H
