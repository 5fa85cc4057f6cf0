//===- ModelStats.cpp - Per-layer FLOPs, parameters, activations ----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// One walk over @forward in program order (no recursion over use-def
// chains, so a 1000-layer model is as safe as a 2-layer one). Each value
// carries the layer it belongs to and whether Megatron's tensor parallelism
// would leave it split over the tp ranks; each op adds its cost to its
// layer. Blocks of identical structure are then grouped, so the search
// prices one block per structure.
//
//===----------------------------------------------------------------------===//

#include "weft/Planner/ModelStats.h"

#include "weft/Dialect/Weft/IR/ModelLayers.h"
#include "weft/Dialect/Weft/IR/TrainStep.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <climits>
#include <map>
#include <numeric>
#include <set>

using namespace mlir;

namespace weft {
namespace planner {

double LayerStats::forwardFlops() const {
  double f = 0;
  for (const OpCost &op : ops)
    f += op.flops;
  return f;
}

double ModelStats::totalParams() const {
  double p = prologue.params + epilogue.params;
  for (int c : blocks)
    p += classes[c].params;
  return p;
}

bool ModelStats::sequenceParallelSplits(int tp) const {
  return tp > 1 &&
         llvm::any_of(normTokenDims, [&](int64_t d) { return d % tp == 0; });
}

double ModelStats::forwardFlopsPerSample() const {
  double f = prologue.forwardFlops() + epilogue.forwardFlops();
  for (int c : blocks)
    f += classes[c].forwardFlops();
  return f;
}

namespace {

/// Layer tags: blocks are 0..L-1, the epilogue L.
constexpr int kNeutral = -3; // constants and what only they feed
constexpr int kPrologue = -1;

struct ValueInfo {
  int tag = kNeutral;
  bool param = false;
  /// A parameter whose name has no layer number (embedding, final norm).
  bool unnumbered = false;
  /// A parameter, or a view made of parameters alone (an importer's
  /// transpose of a tied embedding): a weight to the ops that read it.
  bool weight = false;
  /// Megatron's tp would leave this value split over the tp ranks.
  bool split = false;
  /// An attention-score tensor: q k^T, and what elementwise ops, masks and
  /// softmax make of it in the same shape.
  bool score = false;
  /// The parameter (argument number) a weight is, or is a view of.
  int root = -1;
  /// The tensor-parallel region a split value is in (a raw id: regions
  /// merge as the walk goes, so read it through find).
  int region = -1;
};

double elementsOf(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape())
    return 0;
  return double(t.getNumElements());
}

/// The heads axis is read at q k^T itself; ops after it keep its shape.
bool readsScoreOnly(Operation &op, llvm::DenseMap<Value, ValueInfo> &info) {
  for (Value v : op.getOperands())
    if (info[v].score)
      return true;
  return false;
}

/// Per-layer accumulation while walking; per sample at the end.
struct LayerAcc {
  LayerStats stats;
  llvm::DenseSet<Value> saved, inputs;
  std::string fingerprint;
  /// Position of each op of the layer, for the fingerprint's operand refs.
  llvm::DenseMap<Operation *, int> local;
  /// Split saved activations by raw region: {saved, attention}.
  std::map<int, std::pair<double, double>> regionSaved;
};

/// Tensor-parallel regions as the walk finds them: union-find over raw
/// ids, each with the divisor tp must divide to split it.
struct Regions {
  std::vector<int> parent;
  std::vector<int64_t> divisor;
  int make() {
    parent.push_back(int(parent.size()));
    divisor.push_back(0);
    return parent.back();
  }
  int find(int r) {
    while (r >= 0 && parent[r] != r)
      r = parent[r] = parent[parent[r]];
    return r;
  }
  /// The joined region; a negative id (no region) joins nothing.
  int unite(int a, int b) {
    a = find(a), b = find(b);
    if (a < 0)
      return b;
    if (b < 0 || a == b)
      return a;
    if (b < a)
      std::swap(a, b);
    parent[b] = a;
    divisor[a] = std::gcd(divisor[a], divisor[b]);
    return a;
  }
  void constrain(int r, int64_t d) {
    if ((r = find(r)) >= 0)
      divisor[r] = std::gcd(divisor[r], d);
  }
};

/// The name of a part from its parameters: their common dotted prefix, with
/// the layer number as * if they span every one of the model's
/// `numberedLayers` layers ("h.*.attn"), else as the numbers they span
/// ("h.1-3.attn", "h.{0,2}.attn"); where that prefix is no deeper than the
/// layer, the modules under it in braces ("layers.*.{w1,w2,w3}").
std::string partName(const std::vector<std::string> &all,
                     size_t numberedLayers) {
  // Named by the parameters with a layer number where it has some (an
  // importer's `onnx::MatMul_254` says nothing).
  std::vector<std::string> params;
  std::set<std::string> layers;
  for (const std::string &name : all)
    if (!getLayerPrefix(name).empty()) {
      params.push_back(name);
      layers.insert(getLayerPrefix(name).str());
    }
  if (params.empty())
    params = all;
  if (params.empty())
    return "part";
  std::set<int64_t> numbers;
  for (const std::string &name : params)
    if (auto n = getLayerNumber(name))
      numbers.insert(*n);
  std::string span = "*";
  if (!numbers.empty() && numbers.size() < numberedLayers) {
    bool run = *numbers.rbegin() - *numbers.begin() + 1 ==
               int64_t(numbers.size());
    span = run ? std::to_string(*numbers.begin()) + "-" +
                     std::to_string(*numbers.rbegin())
               : "";
    for (int64_t n : numbers)
      if (!run)
        span += (span.empty() ? "{" : ",") + std::to_string(n);
    if (!run)
      span += "}";
  }
  size_t layerDepth = 0;
  std::vector<llvm::SmallVector<std::string, 8>> patterns;
  for (const std::string &name : params) {
    llvm::StringRef prefix = getLayerPrefix(name);
    std::string pattern = name;
    if (!prefix.empty() && layers.size() > 1) {
      size_t dot = prefix.rfind('.');
      pattern =
          prefix.substr(0, dot == llvm::StringRef::npos ? 0 : dot + 1).str() +
          span + name.substr(prefix.size());
    }
    if (!prefix.empty())
      layerDepth = size_t(prefix.count('.')) + 1;
    llvm::SmallVector<llvm::StringRef, 8> pieces;
    llvm::StringRef(pattern).split(pieces, '.');
    patterns.emplace_back();
    for (llvm::StringRef piece : pieces)
      patterns.back().push_back(piece.str());
  }
  auto join = [](llvm::ArrayRef<std::string> parts) {
    std::string out;
    for (const std::string &part : parts)
      out += (out.empty() ? "" : ".") + part;
    return out;
  };
  // The modules: each parameter's name without its last component
  // (weight, bias).
  std::set<std::string> modules;
  for (const auto &p : patterns)
    modules.insert(join(llvm::ArrayRef(p).drop_back()));
  if (modules.size() == 1 && !modules.begin()->empty())
    return *modules.begin();
  size_t common = patterns.front().size() - 1;
  for (const auto &p : patterns) {
    size_t i = 0;
    while (i < common && i + 1 < p.size() && p[i] == patterns.front()[i])
      ++i;
    common = i;
  }
  if (common > layerDepth)
    return join(llvm::ArrayRef(patterns.front()).take_front(common));
  std::set<std::string> below;
  for (const auto &p : patterns) {
    llvm::ArrayRef<std::string> rest = llvm::ArrayRef(p).drop_front(common);
    below.insert(rest.size() > 1 ? join(rest.drop_back()) : rest.back());
  }
  std::string list;
  for (const std::string &b : below)
    list += (list.empty() ? "" : ",") + b;
  std::string head = join(llvm::ArrayRef(patterns.front()).take_front(common));
  return (head.empty() ? "" : head + ".") + "{" + list + "}";
}

} // namespace

Status computeModelStats(ModuleOp module, ModelStats &out) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.isExternal())
    return Status::error("the module has no @forward with a body; give the "
                         "weft-dialect model (weft-modelgen's output, or "
                         "weftc model.onnx --emit=weft)");
  Block &body = forward.getBody().front();

  llvm::DenseMap<Value, ValueInfo> info;
  int64_t batch = 0, seq = 0;
  // The batch is the first model input's leading dimension: a buffer (a
  // causal mask registered as one, [1, 1, T, T]) is no input.
  bool namedInputs = false;
  for (BlockArgument arg : body.getArguments())
    namedInputs |=
        bool(forward.getArgAttr(arg.getArgNumber(), contract::kInputAttr));
  for (BlockArgument arg : body.getArguments()) {
    auto name = forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                     contract::kParamAttr);
    if (name)
      continue;
    if (forward.getArgAttr(arg.getArgNumber(), contract::kBufferAttr) ||
        (namedInputs &&
         !forward.getArgAttr(arg.getArgNumber(), contract::kInputAttr)))
      continue;
    if (batch == 0) {
      auto t = dyn_cast<RankedTensorType>(arg.getType());
      if (t && t.getRank() >= 1 && t.hasStaticShape()) {
        batch = t.getDimSize(0);
        seq = t.getRank() >= 2 ? t.getDimSize(1) : 0;
      }
    }
  }
  if (batch <= 0)
    return Status::error("@forward has no input with a static batch "
                         "dimension (an argument without weft.param); the "
                         "planner needs the batch to cost one sample");
  // The blocks are the layers a pipeline cut falls between: numbered
  // layers, or a model's modules in the order it reads them. No layer at
  // all (an LSTM whose weights export as `onnx::LSTM_225`): the whole model
  // is one block, which data and tensor parallelism, ZeRO and recomputation
  // still apply to; pipeline stages, cut between blocks, do not.
  // Views of weights. Those of a layer's (an LSTM's gates sliced and
  // concatenated) are tagged with the layer by the walk below, so they are
  // not `weight` values, but an op reading one still reads a weight.
  const llvm::DenseSet<Operation *> weightOps = findWeightOps(forward);
  const ModelLayers layers = getModelLayers(forward, weightOps);
  const bool oneBlock = layers.size() == 0;
  const int numBlocks = oneBlock ? 1 : int(layers.size());

  for (BlockArgument arg : body.getArguments()) {
    ValueInfo vi;
    auto name = forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                     contract::kParamAttr);
    if (name) {
      vi.param = true;
      vi.weight = true;
      vi.root = int(arg.getArgNumber());
      if (oneBlock)
        vi.tag = 0;
      else if (int layer = layers.ofArg[arg.getArgNumber()]; layer >= 0)
        vi.tag = layer;
      else
        vi.unnumbered = true;
    } else {
      vi.tag = kPrologue;
    }
    info[arg] = vi;
  }

  std::vector<LayerAcc> acc(numBlocks + 2); // prologue, blocks, epilogue
  auto accFor = [&](int tag) -> LayerAcc & {
    if (tag <= kPrologue)
      return acc[0];
    return acc[1 + std::min(tag, numBlocks)];
  };
  llvm::DenseSet<Value> tiedParams;
  llvm::DenseMap<Value, LayerAcc *> ownerOf;
  double tiedElements = 0;
  auto isSeqBySeq = [&](Value v) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return seq > 1 && t && t.getRank() >= 3 &&
           t.getDimSize(t.getRank() - 1) == seq &&
           t.getDimSize(t.getRank() - 2) == seq;
  };
  auto isScore = [&](Value v) { return info[v].score; };
  int64_t divisor = 0;
  // Heads of an attention no region splits: every tp must divide them.
  int64_t unsplitHeads = 0;
  Regions regions;
  // Regions a matmul is split in (raw ids): the others only gather.
  std::vector<int> matmulRegions;
  // The region each split parameter (argument number) is in.
  std::map<int, int> regionOfParam;
  auto joinParam = [&](Value weight, int region) {
    int root = info[weight].root;
    if (root < 0)
      return region;
    auto [it, isNew] = regionOfParam.try_emplace(root, region);
    if (!isNew)
      it->second = region = regions.unite(it->second, region);
    return region;
  };
  auto paramRegion = [&](Value weight) {
    auto it = regionOfParam.find(info[weight].root);
    return it == regionOfParam.end() ? -1 : regions.find(it->second);
  };

  // The epilogue can start only after the last block's own (numbered)
  // parameters are all read: an importer may leave a block's weights
  // unnumbered (`onnx::MatMul_305`), and those reads belong to the block.
  int lastBlockUse = -1, index = 0;
  for (Operation &op : body.getOperations()) {
    for (Value v : op.getOperands())
      if (info[v].param && !info[v].unnumbered && info[v].tag == numBlocks - 1)
        lastBlockUse = index;
    ++index;
  }

  // Pass 1, forward: the layer of each op is the latest block an operand
  // comes from; an op past the last block's parameters that reads an
  // unnumbered parameter (final norm, tied head) opens the epilogue, and
  // what it feeds stays there.
  llvm::DenseMap<Operation *, int> tagOf;
  llvm::DenseSet<Operation *> readsBlockParam;
  std::vector<Operation *> ops;
  index = -1;
  for (Operation &op : body.getOperations()) {
    ++index;
    if (isa<func::ReturnOp>(op))
      continue;
    ops.push_back(&op);
    int tag = kNeutral;
    bool readsUnnumbered = false, readsParam = false;
    for (Value v : op.getOperands()) {
      const ValueInfo &vi = info[v];
      readsParam |= vi.weight;
      if (vi.unnumbered) {
        readsUnnumbered = true;
        continue;
      }
      tag = std::max(tag, vi.tag);
    }
    if (readsUnnumbered && tag == numBlocks - 1 && index > lastBlockUse)
      tag = numBlocks;
    tagOf[&op] = tag;
    if (readsParam && tag >= 0)
      readsBlockParam.insert(&op);
    int root = -1;
    for (Value v : op.getOperands())
      if (root < 0 && info[v].weight)
        root = info[v].root;
    for (Value r : op.getResults()) {
      info[r].tag = tag;
      // A view of one layer's weights (a convolution's filter reshaped) is
      // tagged with the layer; it still stands for its parameter.
      if (weightOps.contains(&op))
        info[r].root = root;
      if (tag == kNeutral && readsParam) {
        info[r].weight = true;
        info[r].unnumbered = readsUnnumbered;
        info[r].root = root;
      }
    }
  }
  // Pass 2, backward: an op that reads no parameter and feeds only later
  // layers joins the earliest of them, so the start of a decomposed norm
  // (x*x, its mean, ...) that reads only the previous block's output is
  // costed with the block it normalizes, and blocks keep one structure.
  // An op reading what a block's weights made (the residual add closing
  // the block) stays: it is that block's output.
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    Operation *op = *it;
    int tag = tagOf[op];
    if (tag == kNeutral || tag >= numBlocks || op->getNumResults() == 0)
      continue;
    bool movable = true;
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      movable &=
          !info[v].weight &&
          !(def && (readsBlockParam.count(def) || weightOps.contains(def)));
    }
    int earliest = INT_MAX;
    for (Value r : op->getResults())
      for (Operation *user : r.getUsers()) {
        auto found = tagOf.find(user);
        if (found == tagOf.end() || found->second <= tag) {
          movable = false;
          break;
        }
        earliest = std::min(earliest, found->second);
      }
    if (!movable || earliest == INT_MAX)
      continue;
    tagOf[op] = earliest;
    for (Value r : op->getResults())
      info[r].tag = earliest;
  }

  // Pass 3: each op's cost to its layer.
  llvm::DenseSet<Value> runningMeans;
  for (Operation *opPtr : ops) {
    Operation &op = *opPtr;
    int tag = tagOf[&op];
    LayerAcc &layer = accFor(tag);
    bool inBlock = tag >= 0 && tag < numBlocks;

    // A BatchNorm reads its running mean (exported in eval form); the
    // training step normalizes by the batch's statistics instead.
    for (Value v : op.getOperands()) {
      auto arg = dyn_cast<BlockArgument>(v);
      if (!arg || arg.getOwner() != &body)
        continue;
      auto buffer = forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                         contract::kBufferAttr);
      if (buffer && buffer.getValue().ends_with("running_mean") &&
          runningMeans.insert(v).second)
        layer.stats.batchNormChannels.push_back(elementsOf(v));
    }

    // Parameters belong to the first layer that reads them. A view of
    // weights (tagged neutral) is made where it is read: its reader reads
    // the parameter.
    for (Value operand : op.getOperands()) {
      const ValueInfo &vi = info[operand];
      if (tag == kNeutral || !vi.weight || vi.root < 0)
        continue;
      Value v = vi.param ? operand : body.getArgument(unsigned(vi.root));
      auto [owner, first] = ownerOf.try_emplace(v, &layer);
      if (first) {
        layer.stats.params += elementsOf(v);
      } else if (owner->second == &acc.front() && &layer == &acc.back() &&
                 tiedParams.insert(v).second) {
        tiedElements += elementsOf(v);
      }
    }

    // Megatron's split: a matmul with a weight is column-parallel on a
    // replicated input (its output split) and row-parallel on a split one
    // (its output all-reduced, replicated again); a vocab-parallel
    // embedding gather is all-reduced too. Everything else is split if an
    // activation operand is.
    bool resultSplit = false, opSplit = false;
    // The region the op is split in: a column-parallel matmul or a
    // vocab-parallel gather opens one (or joins its weight's, a tied head
    // the embedding's), a row-parallel matmul closes its input's, and
    // split ops between join their split operands' (and a bias they add).
    int region = -1;
    auto mm = dyn_cast<weft::MatMulOp>(op);
    // weftc splits a convolution's filter as it does a matmul's weight: by
    // output channels on a whole input, by input channels (the output a
    // pending sum, all-reduced) on one split by channels. A grouped one
    // works channel by channel, as an elementwise op does.
    auto conv = dyn_cast<weft::Conv2DOp>(op);
    auto isWeight = [&](Value v) {
      Operation *def = v.getDefiningOp();
      return info[v].weight || (def && weightOps.contains(def));
    };
    Value weight, act, bias;
    if (mm) {
      if (isWeight(mm.getRhs()))
        weight = mm.getRhs(), act = mm.getLhs();
      else if (isWeight(mm.getLhs()))
        weight = mm.getLhs(), act = mm.getRhs();
    } else if (conv && conv.getGroups() == 1 && isWeight(conv.getFilter())) {
      weight = conv.getFilter(), act = conv.getInput(), bias = conv.getBias();
    }
    if (weight) {
      opSplit = true;
      if (info[act].split) {
        region = joinParam(weight, regions.find(info[act].region));
        layer.stats.tpAllReduceElements.push_back(elementsOf(op.getResult(0)));
        layer.stats.tpAllReducePart.push_back(region);
      } else {
        resultSplit = true;
        region = paramRegion(weight);
        region = joinParam(weight, region < 0 ? regions.make() : region);
        auto w = cast<RankedTensorType>(weight.getType());
        int64_t outDim = w.getDimSize(0);
        if (mm) {
          bool outIsRows = weight == mm.getRhs() ? mm.getTransposeRhs()
                                                 : !mm.getTransposeLhs();
          outDim = w.getDimSize(w.getRank() - (outIsRows ? 2 : 1));
        }
        // Split with the output channels.
        if (bias && isWeight(bias))
          region = joinParam(bias, region);
        if (inBlock) {
          divisor = std::gcd(divisor, outDim);
          regions.constrain(region, outDim);
        }
      }
    } else if (isa<weft::GatherOp>(op) && info[op.getOperand(0)].weight) {
      opSplit = true;
      Value table = op.getOperand(0);
      region = paramRegion(table);
      region = joinParam(table, region < 0 ? regions.make() : region);
      layer.stats.tpAllReduceElements.push_back(elementsOf(op.getResult(0)));
      layer.stats.tpAllReducePart.push_back(region);
    } else {
      for (Value v : op.getOperands())
        if (!info[v].weight && info[v].split) {
          resultSplit = true;
          region = regions.unite(region, info[v].region);
        }
      opSplit = resultSplit;
      if (resultSplit)
        for (Value v : op.getOperands())
          if (info[v].weight)
            region = joinParam(v, region);
    }

    // Activations the backward reads: a matmul its operands, a product the
    // factor the other operand's gradient needs, softmax its output;
    // additions, views, masks and gathers nothing; anything else its inputs.
    auto isActivation = [&](Value v) {
      const ValueInfo &vi = info[v];
      return !vi.weight && vi.tag != kNeutral;
    };
    auto needsGrad = [&](Value v) {
      return info[v].weight || info[v].tag != kNeutral;
    };
    // Scores: a product of two activations making [.., S, S] from
    // non-scores (q k^T, not probs v), then what keeps their shape.
    bool score = false;
    if (op.getNumResults() == 1 && isSeqBySeq(op.getResult(0))) {
      bool readsScore = false, allActivations = true;
      for (Value v : op.getOperands()) {
        readsScore |= isScore(v);
        allActivations &= isActivation(v);
      }
      score = mm ? (allActivations && !readsScore) : readsScore;
    }
    if (score && inBlock && !readsScoreOnly(op, info)) {
      auto t = cast<RankedTensorType>(op.getResult(0).getType());
      divisor = std::gcd(divisor, t.getDimSize(t.getRank() - 3));
      if (region >= 0)
        regions.constrain(region, t.getDimSize(t.getRank() - 3));
      else
        unsplitHeads = std::gcd(unsplitHeads, t.getDimSize(t.getRank() - 3));
    }
    llvm::SmallVector<Value, 4> reads;
    if (isa<weft::AddOp, weft::SubOp, weft::NegOp, weft::ReshapeOp,
            weft::TransposeOp, weft::SliceOp, weft::ConcatOp,
            weft::BroadcastOp, weft::CausalMaskOp, weft::GatherOp,
            weft::ReduceSumOp, weft::ReduceMeanOp, weft::CastOp>(op)) {
    } else if (isa<weft::MulOp>(op)) {
      if (needsGrad(op.getOperand(0)))
        reads.push_back(op.getOperand(1));
      if (needsGrad(op.getOperand(1)))
        reads.push_back(op.getOperand(0));
    } else if (isa<weft::SoftmaxOp, weft::LogSoftmaxOp>(op)) {
      reads.push_back(op.getResult(0));
    } else {
      reads.append(op.operand_begin(), op.operand_end());
    }
    for (Value v : reads) {
      if (!isActivation(v) || !layer.saved.insert(v).second)
        continue;
      // The op's own result (softmax) is not in `info` yet.
      bool own = v.getDefiningOp() == &op;
      bool vSplit = own ? resultSplit : info[v].split;
      bool vScore = own ? score : isScore(v);
      double n = elementsOf(v);
      (vSplit ? layer.stats.saved.split : layer.stats.saved.replicated) += n;
      if (vScore)
        (vSplit ? layer.stats.attentionSaved.split
                : layer.stats.attentionSaved.replicated) += n;
      int vRegion = own ? region : info[v].region;
      if (vSplit && vRegion >= 0) {
        auto &share = layer.regionSaved[regions.find(vRegion)];
        share.first += n;
        if (vScore)
          share.second += n;
      }
    }
    for (Value v : op.getOperands())
      if (isActivation(v) && info[v].tag < tag && layer.inputs.insert(v).second)
        layer.stats.inputElements += elementsOf(v);

    OpCost cost;
    double resultElements = 0;
    for (Value r : op.getResults())
      resultElements += elementsOf(r);
    if (mm) {
      auto lhs = cast<RankedTensorType>(mm.getLhs().getType());
      int64_t k = lhs.getDimSize(lhs.getRank() - (mm.getTransposeLhs() ? 2 : 1));
      cost.flops = 2.0 * resultElements * double(k);
      cost.foldsBatch = bool(weight);
      if (weight) {
        cost.productFlops = cost.flops;
      } else {
        auto result = cast<RankedTensorType>(mm.getResult().getType());
        int64_t rank = result.getRank();
        double rows = rank >= 2 ? double(result.getDimSize(rank - 2)) : 1;
        double cols = rank >= 1 ? double(result.getDimSize(rank - 1)) : 1;
        cost.productFlops = 2.0 * rows * cols * double(k);
      }
    } else if (conv) {
      // A multiply-add per output element and filter tap of its group (a
      // 3-D convolution is conv2ds over the depth taps).
      auto filter = cast<RankedTensorType>(conv.getFilter().getType());
      cost.flops = 2.0 * resultElements *
                   double(filter.getNumElements() / filter.getDimSize(0));
    } else if (auto own = dyn_cast<weft::CostOpInterface>(&op)) {
      // An op that knows its cost (a recurrence's time loop: its per-step
      // products, far more than its results).
      cost.flops = own.getFlops();
    } else if (!isa<weft::ReshapeOp>(op)) {
      cost.flops = resultElements;
    }
    if (!isa<weft::ReshapeOp>(op)) {
      cost.elements = resultElements;
      for (Value v : op.getOperands())
        cost.elements += elementsOf(v);
    }
    cost.tpSplit = opSplit;
    cost.attentionCore = score;
    cost.tpPart = opSplit ? region : -1;
    if (weight)
      matmulRegions.push_back(region);
    layer.stats.ops.push_back(cost);

    // The structure of the op for grouping blocks: name, attributes,
    // result types, and where each operand comes from (an op earlier in
    // the same layer by distance, a parameter by type, or from outside).
    if (inBlock) {
      std::string &fp = layer.fingerprint;
      llvm::raw_string_ostream os(fp);
      int here = int(layer.local.size());
      layer.local[&op] = here;
      os << op.getName() << op.getAttrDictionary();
      for (Value v : op.getOperands()) {
        Operation *def = v.getDefiningOp();
        auto it = def ? layer.local.find(def) : layer.local.end();
        if (it != layer.local.end())
          os << " %" << here - it->second;
        else if (info[v].weight)
          os << " p:" << v.getType();
        else // Split or not: a chain of one-layer blocks alternates.
          os << (info[v].split ? " xs:" : " x:") << v.getType();
      }
      for (Type t : op.getResultTypes())
        os << " ->" << t;
      os << ";";
    }

    for (Value r : op.getResults()) {
      info[r].split = resultSplit;
      info[r].score = score;
      info[r].region = resultSplit ? region : -1;
    }
  }

  // Blocks of one structure form a class.
  std::map<std::string, int> classOf;
  std::vector<int> classOfBlock, firstOfClass;
  for (int b = 0; b < numBlocks; ++b) {
    auto [it, isNew] =
        classOf.emplace(acc[1 + b].fingerprint, int(firstOfClass.size()));
    if (isNew)
      firstOfClass.push_back(b);
    classOfBlock.push_back(it->second);
  }

  // The parts the search may keep replicated. A region is one if its ops
  // lie in one block, or in the prologue and epilogue alone (a tied
  // embedding and head); a class's parts are its first block's regions in
  // op order, matched to each other block's by position.
  const int lastLayer = int(acc.size()) - 1;
  std::map<int, std::set<int>> layersOfRegion;
  std::set<int> withMatmul, withAttention;
  for (int raw : matmulRegions)
    withMatmul.insert(regions.find(raw));
  std::vector<std::vector<int>> regionsInOrder(acc.size());
  for (int li = 0; li <= lastLayer; ++li)
    for (OpCost &c : acc[li].stats.ops)
      if (c.tpPart >= 0) {
        c.tpPart = regions.find(c.tpPart);
        if (c.attentionCore)
          withAttention.insert(c.tpPart);
        if (layersOfRegion[c.tpPart].insert(li).second)
          regionsInOrder[li].push_back(c.tpPart);
      }
  auto choosable = [&](int r) {
    const std::set<int> &layers = layersOfRegion[r];
    bool edges = true;
    for (int li : layers)
      edges &= li == 0 || li == lastLayer;
    return layers.size() == 1 || edges;
  };
  // Each layer's choosable regions, in op order.
  std::vector<std::vector<int>> choosableIn(acc.size());
  for (int li = 0; li <= lastLayer; ++li)
    for (int r : regionsInOrder[li])
      if (choosable(r))
        choosableIn[li].push_back(r);
  std::map<int, int> partOf;
  std::vector<TpPart> parts;
  auto newPart = [&](int r) {
    if (parts.size() >= size_t(kMaxTpParts))
      return -1;
    parts.emplace_back();
    parts.back().divisor = regions.divisor[r];
    parts.back().gatherOnly = !withMatmul.count(r);
    return partOf[r] = int(parts.size()) - 1;
  };
  for (int li : {0, lastLayer})
    for (int r : choosableIn[li])
      if (!partOf.count(r))
        newPart(r);
  for (int c = 0; c < int(firstOfClass.size()); ++c) {
    const std::vector<int> &local = choosableIn[1 + firstOfClass[c]];
    bool same = true;
    for (int b = 0; b < numBlocks; ++b)
      same &= classOfBlock[b] != c || choosableIn[1 + b].size() == local.size();
    if (!same)
      continue;
    std::vector<int> ids;
    for (int r : local) {
      ids.push_back(newPart(r));
      if (ids.back() >= 0)
        parts[ids.back()].tokenWise = !withAttention.count(r);
    }
    for (int b = 0; b < numBlocks; ++b) {
      if (classOfBlock[b] != c || b == firstOfClass[c])
        continue;
      const std::vector<int> &mine = choosableIn[1 + b];
      for (size_t k = 0; k < mine.size(); ++k)
        if (ids[k] >= 0)
          partOf[mine[k]] = ids[k];
    }
  }
  auto partFor = [&](int raw) {
    auto it = partOf.find(regions.find(raw));
    return it == partOf.end() ? -1 : it->second;
  };
  int64_t required = unsplitHeads;
  for (auto &[r, layers] : layersOfRegion)
    if (!partOf.count(r))
      required = std::gcd(required, regions.divisor[r]);
  std::vector<std::map<int, TpPartShare>> shares(acc.size());
  for (auto [root, raw] : regionOfParam) {
    int part = partFor(raw);
    if (part < 0)
      continue;
    BlockArgument arg = body.getArgument(unsigned(root));
    parts[part].params.push_back(
        getArgName(forward, unsigned(root), contract::Role::Param)
            .getValue()
            .str());
    if (auto owner = ownerOf.find(arg); owner != ownerOf.end())
      shares[owner->second - &acc[0]][part].params += elementsOf(arg);
  }
  for (int li = 0; li <= lastLayer; ++li) {
    LayerAcc &a = acc[li];
    for (OpCost &c : a.stats.ops)
      c.tpPart = c.tpPart >= 0 ? partFor(c.tpPart) : -1;
    for (int &part : a.stats.tpAllReducePart)
      part = part >= 0 ? partFor(part) : -1;
    for (auto [raw, saved] : a.regionSaved) {
      int part = partFor(raw);
      if (part < 0)
        continue;
      shares[li][part].saved += saved.first;
      shares[li][part].attentionSaved += saved.second;
    }
    for (auto &[part, share] : shares[li]) {
      share.part = part;
      a.stats.tpShares.push_back(share);
    }
  }
  std::set<std::string> names;
  for (size_t k = 0; k < parts.size(); ++k) {
    std::string name =
        partName(parts[k].params, layers.numbered ? layers.size() : size_t(0));
    if (!names.insert(name).second)
      name += "#" + std::to_string(k);
    parts[k].name = name;
  }

  // Per sample: the IR's numbers divided by its batch.
  double perSample = 1.0 / double(batch);
  auto finish = [&](LayerStats &s) {
    for (OpCost &c : s.ops) {
      c.flops *= perSample;
      c.elements *= perSample;
      if (c.foldsBatch)
        c.productFlops *= perSample;
    }
    for (SavedActivations *a : {&s.saved, &s.attentionSaved}) {
      a->split *= perSample;
      a->replicated *= perSample;
    }
    s.inputElements *= perSample;
    for (double &e : s.tpAllReduceElements)
      e *= perSample;
    for (TpPartShare &share : s.tpShares) {
      share.saved *= perSample;
      share.attentionSaved *= perSample;
    }
  };

  ModelStats stats;
  stats.batch = batch;
  stats.seq = seq;
  stats.tpDivisor = divisor;
  bool outputSplit = false;
  for (Value v : body.getTerminator()->getOperands()) {
    outputSplit |= info[v].split;
    if (info[v].split && info[v].region >= 0 && stats.outputTpPart < 0)
      stats.outputTpPart = partFor(info[v].region);
  }
  stats.tpParts = std::move(parts);
  stats.requiredTpDivisor = required;
  stats.tiedElements = tiedElements;
  // As ApplyMesh's sequence parallelism reads them.
  std::set<int64_t> tokenDims;
  forward.walk([&](weft::LayerNormOp norm) {
    auto type = cast<RankedTensorType>(norm.getInput().getType());
    for (int64_t d = 1; d < type.getRank() && d < norm.getAxis(); ++d)
      tokenDims.insert(type.getDimSize(d));
  });
  stats.normTokenDims.assign(tokenDims.begin(), tokenDims.end());
  double outputRows = 0;
  for (Type t : forward.getFunctionType().getResults())
    if (auto ranked = dyn_cast<RankedTensorType>(t);
        ranked && ranked.hasStaticShape()) {
      stats.outputElements += double(ranked.getNumElements()) / double(batch);
      if (ranked.getRank() >= 1 && ranked.getDimSize(ranked.getRank() - 1))
        outputRows += double(ranked.getNumElements()) /
                      double(ranked.getDimSize(ranked.getRank() - 1)) /
                      double(batch);
    }
  finish(acc[0].stats);
  finish(acc.back().stats);
  stats.prologue = std::move(acc[0].stats);
  stats.epilogue = std::move(acc.back().stats);
  // The training step's loss over the outputs, which @forward does not
  // have: passes over the logits for their maximum, shifting and
  // exponentiating them, summing, taking the log and the target's entry,
  // and the backward's softmax less the target, each reading (most also
  // writing) the whole tensor: about 12 accesses an element, priced as a
  // memory-bound op of 4 whose backward is twice it. On this host a
  // vocabulary of 32768 instead of 8192 costs a step 29 ms beyond its
  // head's products, 1.2 ns a logit; 12 accesses of 4 bytes at the 41.8
  // GB/s measured are 1.15 ns. All of it falls on the pipeline's last
  // stage.
  if (stats.outputElements > 0) {
    OpCost loss;
    loss.elements = 4 * stats.outputElements;
    loss.tpSplit = outputSplit;
    loss.tpPart = stats.outputTpPart;
    stats.epilogue.ops.push_back(loss);
    // Over logits split by class (vocabulary-parallel), the loss reduces
    // each row's maximum and sum of exponentials over tp: two all-reduces
    // of a value a row, latency-bound unless the rows are many (the search
    // prices each with its conjugate in the backward: there, the head's
    // input gradient summed over tp).
    if (outputSplit && outputRows > 0)
      for (int k = 0; k < 2; ++k) {
        stats.epilogue.tpAllReduceElements.push_back(outputRows);
        stats.epilogue.tpAllReducePart.push_back(stats.outputTpPart);
      }
  }
  for (int b : firstOfClass) {
    finish(acc[1 + b].stats);
    stats.classes.push_back(std::move(acc[1 + b].stats));
  }
  stats.blocks = classOfBlock;
  for (const std::vector<std::string> &names : layers.names)
    stats.blockNames.push_back(llvm::join(names, ","));
  out = std::move(stats);
  return Status::success();
}

Status loadModelStats(const std::string &path, ModelStats &out,
                      int partsCheckTp) {
  MLIRContext context;
  context.loadDialect<func::FuncDialect, weft::WeftDialect>();
  llvm::SourceMgr sourceMgr;
  std::string diagnostics;
  llvm::raw_string_ostream diagStream(diagnostics);
  SourceMgrDiagnosticHandler handler(sourceMgr, &context, diagStream);
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(path);
  if (!buffer)
    return Status::error(path + ": cannot read: " +
                         buffer.getError().message());
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return Status::error(diagStream.str().empty()
                             ? path + ": not a weft-dialect module"
                             : diagStream.str());
  Status st = computeModelStats(*module, out);
  if (!st.ok())
    return Status::error(path + ": " + st.message);
  markPartsWeftcKeepsWhole(*module, partsCheckTp, out);
  return Status::success();
}

} // namespace planner
} // namespace weft
