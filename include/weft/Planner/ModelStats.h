//===- ModelStats.h - What the planner needs to know of a model -*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The search ranks layouts from per-sample numbers of each layer: forward
// FLOPs and memory traffic per op, the activations the backward reads, the
// parameters, and the tensor-parallel all-reduces Megatron's split would
// need. computeModelStats reads them off a weft-dialect @forward (what
// weft-modelgen writes, or `weftc model.onnx --emit=weft`) and groups the
// repeated blocks (transformer layers) by structure, so the search costs
// each distinct block once and multiplies. The structs are plain data, so
// tests can also write small models by hand. docs/planner.md ("Model
// statistics") states the rules.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_PLANNER_MODELSTATS_H
#define WEFT_PLANNER_MODELSTATS_H

#include "weft/Planner/ClusterSpec.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace weft {
namespace planner {

/// One op of a layer, per sample of the batch (the IR's numbers divided by
/// its batch size). Sizes are in elements, so the search can price them in
/// whatever dtype it trains in.
struct OpCost {
  /// Forward FLOPs: 2·M·N·K for a matmul, one per result element otherwise.
  double flops = 0;
  /// Memory traffic: operand and result elements (views cost nothing).
  double elements = 0;
  /// Tensor parallelism splits this op's work; otherwise every tp rank does
  /// all of it (norms and residual adds, unless sequence parallel).
  bool tpSplit = false;
  /// The op makes an attention-score tensor (last two dims the sequence
  /// length): selective recomputation reruns it instead of keeping it.
  bool attentionCore = false;
  /// The choosable tensor-parallel part (ModelStats::tpParts) the op is
  /// split in, or -1: a part kept replicated runs whole on every tp rank.
  int tpPart = -1;
  /// A matrix product's size, for its GEMM shape class: the FLOPs of one
  /// product. Where `foldsBatch` (a product with a weight: the samples of
  /// a micro-batch stack into its rows, so b samples make one product b
  /// times this, split as the op is over tp) it is per sample; otherwise
  /// (a product of two activations, one per sample and head) it is each
  /// product's, whatever the batch. 0: not a matrix product.
  double productFlops = 0;
  bool foldsBatch = false;
};

/// The activations a layer's backward reads, per sample, in elements, by
/// how tensor parallelism treats them.
struct SavedActivations {
  double split = 0;      ///< divided by tp
  double replicated = 0; ///< whole on every tp rank unless sequence parallel
  double total() const { return split + replicated; }
};

/// What one choosable tensor-parallel part holds in one layer.
struct TpPartShare {
  int part = -1;
  /// Parameter elements of the layer the part splits.
  double params = 0;
  /// Of the layer's saved.split (and attentionSaved.split), the part's.
  double saved = 0, attentionSaved = 0;
};

/// One layer: a repeated block, or what comes before or after the blocks.
struct LayerStats {
  std::vector<OpCost> ops;
  /// Parameter elements the layer owns (a parameter used by two layers
  /// belongs to the first; GPT's tied head is counted in the embedding).
  double params = 0;
  /// Everything the backward reads, kept from the forward (no recompute).
  SavedActivations saved;
  /// The part of `saved` made by attentionCore ops: what selective
  /// recomputation drops.
  SavedActivations attentionSaved;
  /// Elements entering the layer from before it (the residual stream):
  /// what full recomputation keeps, and what a pipeline stage boundary
  /// sends, per sample.
  double inputElements = 0;
  /// Elements of each tensor the layer's forward all-reduces over tp
  /// (outputs of row-parallel matmuls; the embedding's vocab-parallel
  /// gather), per sample. The backward has as many, of the same size.
  std::vector<double> tpAllReduceElements;
  /// The part each of tpAllReduceElements closes (-1: none to choose).
  std::vector<int> tpAllReducePart;
  /// Per BatchNorm of the layer (a `running_mean` buffer it reads), its
  /// channels: trained, it normalizes by the batch's statistics, which dp
  /// ranks all-reduce (mean and variance in the forward, their gradients
  /// in the backward) every micro-batch, whatever the batch.
  std::vector<double> batchNormChannels;
  /// The layer's share of each part it has ops of, by part.
  std::vector<TpPartShare> tpShares;

  double forwardFlops() const;
};

/// A tensor-parallel region the search may keep replicated instead of
/// splitting it Megatron's way: the ops from a column-parallel matmul (or a
/// vocab-parallel embedding) to the row-parallel matmul that closes it,
/// with the weights they split, joined where they share a weight (a tied
/// embedding and head are one part). A block class's part stands for the
/// same region in each block of the class.
struct TpPart {
  /// Readable and unique: the common prefix of its parameters with the
  /// layer number as * ("h.*.attn", "h.*.mlp", "wte").
  std::string name;
  /// Every parameter the part splits, in all blocks of its class.
  std::vector<std::string> params;
  /// tp must divide this to split the part (heads, column widths); 0: no
  /// constraint.
  int64_t divisor = 0;
  /// The part only gathers from its tables (an embedding no matmul reads):
  /// split, its rows are (vocab-parallel), which weftc's Megatron plan
  /// does only when told (--shard NAME=[{tp}, {}]).
  bool gatherOnly = false;
  /// A block's part that works token by token (no attention core): with
  /// sequence parallelism weftc runs it whole on each rank's tokens, and
  /// all-reduces its weight gradients over tp once a step instead of
  /// gathering and scattering its activations.
  bool tokenWise = false;
  /// weftc's tensor-parallel plan (propagation, not this pattern) splits
  /// none of the part's parameters: every plan keeps it replicated. Set by
  /// markPartsWeftcKeepsWhole (weftc's plans, and weft-plan's).
  bool keptWhole = false;
};

/// More regions than this (a model of many distinct block structures) are
/// all split: the search tries every subset of the parts.
constexpr int kMaxTpParts = 8;

struct ModelStats {
  /// The batch and sequence length of the IR (its first input's shape).
  int64_t batch = 0, seq = 0;
  /// Embedding and whatever runs before the first block.
  LayerStats prologue;
  /// Final norm, head and whatever follows the last block.
  LayerStats epilogue;
  /// Distinct block structures; blocks of one structure share an entry.
  std::vector<LayerStats> classes;
  /// The class of each block, in model order.
  std::vector<int> blocks;
  /// The layer names of each block, in model order ("h.3"; "conv1"; a
  /// block of several modules joins them with commas).
  std::vector<std::string> blockNames;
  /// tp must divide this to split every part (heads, split weight dims);
  /// 0: no constraint.
  int64_t tpDivisor = 0;
  /// The regions the search may keep replicated; at most kMaxTpParts.
  std::vector<TpPart> tpParts;
  /// tp must divide this whatever is replicated: regions that cannot be
  /// chosen alone (one spanning blocks); 0: no constraint.
  int64_t requiredTpDivisor = 0;
  /// Elements of @forward's results per sample (a language model's logits,
  /// S x V): what the training step's loss turns into probabilities and
  /// their gradient, outside the layers' saved activations.
  double outputElements = 0;
  /// The part whose split the results are in (a vocab-parallel head's
  /// logits), or -1.
  int outputTpPart = -1;
  /// Parameter elements the epilogue reads that the prologue owns (GPT's
  /// embedding, tied to the head): under pipeline parallelism the first
  /// and last stages each hold them and swap their gradient shares once a
  /// step.
  double tiedElements = 0;
  /// The token dimensions of each layer norm over a sequence (those after
  /// the batch and before the normalized ones): weftc's sequence
  /// parallelism splits a norm's input along one that tp divides, and
  /// without one (RMSNorm written out, a model without norms) it splits
  /// nothing.
  std::vector<int64_t> normTokenDims;
  /// weftc's tensor-parallel plan splits no parameter of the model (each
  /// split would gather an activation: top-k over the split features), so
  /// tp ranks would each do the whole step. Set by
  /// markPartsWeftcKeepsWhole.
  bool tpSplitsNothing = false;

  double totalParams() const;
  /// Whether sequence parallelism at `tp` splits a layer norm.
  bool sequenceParallelSplits(int tp) const;
  /// Forward FLOPs of one sample, all layers.
  double forwardFlopsPerSample() const;
};

/// Reads `module`'s @forward. Blocks are the model's layers (getModelLayers:
/// parameter names with a layer number, `h.3.`, `layers.12.`, as PyTorch's
/// state_dict and weft-modelgen name them; else its modules): every op is
/// given the latest block its operands
/// come from, ops past the last block's parameters that read an unnumbered
/// parameter (the final norm, the head) start the epilogue, and ops that
/// read no weight and feed only later layers join the earliest of them
/// (docs/planner.md, "Model statistics"). A model with no layer at all is
/// one block. Errors name what is missing: no @forward, no
/// batch.
Status computeModelStats(mlir::ModuleOp module, ModelStats &out);

/// Parses the file at `path` (weft dialect) and computes its stats; then,
/// for `partsCheckTp` >= 2, marks the parts weftc keeps whole at that tp
/// (markPartsWeftcKeepsWhole).
Status loadModelStats(const std::string &path, ModelStats &out,
                      int partsCheckTp = 0);

/// Marks the tensor-parallel parts of `stats` (Megatron's pattern) whose
/// parameters weftc's own tensor-parallel plan at `tp` splits none of
/// (TpPart::keptWhole), and whether it splits nothing at all, so that
/// plans price what compiles. Models of up to 60,000 parameters x ops
/// only: on larger ones the check would take longer than the search.
void markPartsWeftcKeepsWhole(mlir::ModuleOp module, int tp, ModelStats &stats);

struct SearchOptions;
/// The tp markPartsWeftcKeepsWhole checks a search at: the pinned tp, else
/// the smallest divisor above 1 of the devices (a larger tp only splits
/// less); 0 for one device.
int partsCheckTp(const ClusterSpec &spec, const SearchOptions &options);

} // namespace planner
} // namespace weft

#endif // WEFT_PLANNER_MODELSTATS_H
