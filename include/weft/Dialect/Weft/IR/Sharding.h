//===- Sharding.h - Meshes, shardings and sharding rules --------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The value types behind #weft.mesh and #weft.sharding, and the rule an op
// states through ShardingRuleOpInterface. Propagation and partitioning
// (lib/Transforms/Parallel) work on these; the attributes are how they are
// stored in, and printed with, the IR.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_SHARDING_H
#define WEFT_DIALECT_WEFT_IR_SHARDING_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace weft {

class MeshAttr;
class ShardingAttr;

/// Mesh axes, major first.
using AxisList = llvm::SmallVector<mlir::StringAttr, 1>;

/// The sharding of a global tensor: per dimension the axes it is split
/// over, and the axes of a pending sum. Empty everywhere: replicated.
struct TensorSharding {
  llvm::SmallVector<AxisList> dims;
  AxisList partial;

  static TensorSharding replicated(unsigned rank) {
    TensorSharding s;
    s.dims.resize(rank);
    return s;
  }
  static TensorSharding fromAttr(ShardingAttr attr);
  ShardingAttr toAttr(mlir::MLIRContext *context) const;

  unsigned rank() const { return dims.size(); }
  bool isReplicated() const;
  bool isPartial() const { return !partial.empty(); }
  /// Whether `axis` splits a dimension or is pending.
  bool usesAxis(mlir::StringAttr axis) const;
  /// How many dimension splits it has (a measure of how sharded it is).
  unsigned numSplits() const;
  /// The same dims without the pending sum.
  TensorSharding withoutPartial() const {
    TensorSharding s = *this;
    s.partial.clear();
    return s;
  }
  bool operator==(const TensorSharding &other) const {
    return dims == other.dims && partial == other.partial;
  }
  bool operator!=(const TensorSharding &other) const {
    return !(*this == other);
  }
};

/// The product of `axes`' sizes on `mesh`.
int64_t axesSize(MeshAttr mesh, llvm::ArrayRef<mlir::StringAttr> axes);

/// The per-rank shape of a global `shape` sharded as `sharding`; an error
/// message when a split dimension does not divide by its axes.
mlir::FailureOr<llvm::SmallVector<int64_t>>
localShape(MeshAttr mesh, llvm::ArrayRef<int64_t> shape,
           const TensorSharding &sharding, std::string *why = nullptr);

/// An op's sharding rule: factors, each appearing in some dimensions of its
/// operands and results. A factor absent from every result is a reduction:
/// splitting it leaves the results partial (kind Sum), or partial once
/// scaled by the ranks it is split over (kind Mean, as in a mean over the
/// batch). A factor of kind Whole is never split (a layer-norm axis, a
/// sliced dimension); neither is a dimension with no factor. A factor of
/// kind Combined is an axis the op reduces over that may still be split:
/// the partitioner combines the ranks' parts inside the op (a softmax or a
/// cross-entropy over vocabulary shards: a maximum and a sum over ranks).
struct ShardingRule {
  enum class Kind { Parallel, Sum, Mean, Whole, Combined };
  struct Factor {
    int64_t size;
    Kind kind;
  };
  /// Per value, per dimension: the factors it is made of, major first (a
  /// reshape's merged dimension has several; only the major one may be
  /// split).
  using ValueFactors = llvm::SmallVector<llvm::SmallVector<int64_t, 1>>;

  llvm::SmallVector<Factor> factors;
  llvm::SmallVector<ValueFactors> operands, results;
  /// The results are linear in every operand together (add, sub, neg, a
  /// reshape): operands that are all partial over the same axes give
  /// results partial over them, with nothing to communicate.
  bool additive = false;

  int64_t addFactor(int64_t size, Kind kind = Kind::Parallel) {
    factors.push_back({size, kind});
    return factors.size() - 1;
  }
  /// An op whose every dimension must stay whole: its operands are
  /// gathered and its results replicated.
  static ShardingRule whole(mlir::Operation *op);
};

/// Attaches ShardingRuleOpInterface to the weft ops (WeftShardingRules.cpp);
/// the dialect does it when it loads.
void registerShardingRules(mlir::MLIRContext *context);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_SHARDING_H
