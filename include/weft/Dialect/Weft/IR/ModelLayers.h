//===- ModelLayers.h - The layers of a model's @forward ---------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The units a pipeline cut falls between, the planner counts as blocks and
// per-layer recomputation picks. weftc's stage cutter, the planner's model
// statistics and the driver's `--plan` read them from here, so a plan's
// `blocks_per_stage` means the same layers to all three.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_MODELLAYERS_H
#define WEFT_DIALECT_WEFT_IR_MODELLAYERS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <string>
#include <vector>

namespace weft {

struct ModelLayers {
  /// Per layer, the names --recompute-layers and --stage-cuts take for it
  /// ("h.3"; "conv1"); one that others joined has several ("fc2", "hi").
  std::vector<std::vector<std::string>> names;
  /// The layer of each argument of @forward; -1 for inputs, buffers and
  /// parameters in no layer.
  std::vector<int> ofArg;
  /// Some parameter names a layer number (getLayerNumber): the layers are
  /// numbered ones, not modules.
  bool numbered = false;

  size_t size() const { return names.size(); }
};

/// A model's layers are keyed by its parameters' names: where any names a
/// layer number (`h.3.attn.c_attn.weight`), by the name up to that number
/// (`h.3`; `inp.1` and `blocks.1` are two layers), and parameters without
/// one (the embedding, the head) are in none; where none does (a model of
/// named modules: `conv1.weight`, `bn1.bias`), by its module, the name up
/// to its last dot, and a parameter without a dot (`onnx::LSTM_208`) is in
/// none. The layers are ordered as @forward's ops first read them (through
/// views of weights such as a transpose). A layer first read while an
/// integer tensor is live (top-k's indices on their way to a gather) joins
/// the layer before it, since a pipeline cut there would have to send the
/// integers. `weightOps` is findWeightOps(forward), for callers that have it.
ModelLayers getModelLayers(mlir::func::FuncOp forward);
ModelLayers getModelLayers(mlir::func::FuncOp forward,
                           const llvm::DenseSet<mlir::Operation *> &weightOps);

/// The ops of @forward that read only parameters, buffers and constants (a
/// tied embedding's transpose for the head): views of weights, which run
/// wherever they are read rather than in a layer or stage of their own.
llvm::DenseSet<mlir::Operation *> findWeightOps(mlir::func::FuncOp forward);

/// Where `v`, made by the op at `made` of a run of ops in program order
/// (`position` numbers them), is read last: the position of its last
/// reader in the run, `end` if the function returns it, else `made`.
size_t lastReader(mlir::Value v, size_t made,
                  const llvm::DenseMap<mlir::Operation *, size_t> &position,
                  size_t end);

/// For each position i of `ops` (a run in program order that `position`
/// numbers) and one past its end: how many values that are not float
/// tensors (integers, or types unknown yet) are made before ops[i] and read
/// at or after it. A pipeline cut before ops[i] would have to send them,
/// and stage transfers carry floats only.
std::vector<int64_t>
liveNonFloatValues(llvm::ArrayRef<mlir::Operation *> ops,
                   const llvm::DenseMap<mlir::Operation *, size_t> &position);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_MODELLAYERS_H
