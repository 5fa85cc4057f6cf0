//===- Search.cpp - The layout search -------------------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Prices are built bottom-up so that a candidate costs a few dozen
// floating-point operations: per (tp, sequence parallel, recompute) the
// seconds and bytes of one sample through each distinct layer; per
// (pipeline degree, virtual stages) the cut of the blocks and what each
// rank holds, with ranks of identical contents priced once. The search
// and the brute force call the same evaluator, so where pruning keeps a
// candidate both see the same doubles.
//
//===----------------------------------------------------------------------===//

#include "weft/Planner/Search.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

namespace weft {
namespace planner {

const char *recomputeName(Recompute r) {
  switch (r) {
  case Recompute::None:
    return "none";
  case Recompute::Selective:
    return "selective";
  case Recompute::Full:
    return "full";
  }
  return "?";
}

Status parseRecompute(const std::string &name, Recompute &r) {
  for (Recompute k : {Recompute::None, Recompute::Selective, Recompute::Full})
    if (name == recomputeName(k)) {
      r = k;
      return Status::success();
    }
  return Status::error("unknown recomputation '" + name +
                       "'; use none, selective or full");
}

Status parseRecompute(const std::string &name, Recompute &r, int &blocks) {
  blocks = 0;
  llvm::StringRef mode(name), count;
  std::tie(mode, count) = mode.split(':');
  if (mode.size() == name.size())
    return parseRecompute(name, r);
  unsigned k = 0;
  if (mode != "full" || count.getAsInteger(10, k) || k < 1 || k > 1000000)
    return Status::error("unknown recomputation '" + name +
                         "'; use none, selective, full or full:K (the first "
                         "K >= 1 blocks of each pipeline rank)");
  r = Recompute::Full;
  blocks = int(k);
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Cost pieces
//===----------------------------------------------------------------------===//

std::vector<int> balancedCut(const std::vector<double> &costs, double first,
                             double last, int parts) {
  const int n = int(costs.size());
  // Greedy: each stage takes blocks while it stays within `limit` and
  // leaves a block for every later stage. With positive costs it succeeds
  // iff some cut has every stage within `limit`, and then returns the cut
  // that front-loads the most blocks.
  auto cutWithin = [&](double limit, std::vector<int> *out) {
    int i = 0;
    for (int stage = 0; stage < parts; ++stage) {
      if (i >= n)
        return false;
      double sum = (stage == 0 ? first : 0) + costs[i] + (i == n - 1 ? last : 0);
      if (sum > limit)
        return false;
      int j = i + 1;
      int mustLeave = parts - stage - 1;
      while (j < n && n - j - 1 >= mustLeave) {
        double next = sum + costs[j] + (j == n - 1 ? last : 0);
        if (next > limit)
          break;
        sum = next;
        ++j;
      }
      if (stage == parts - 1 && j < n)
        return false;
      if (out)
        out->push_back(j - i);
      i = j;
    }
    return i == n;
  };
  // The optimum is the cost of some stage: a contiguous run of blocks plus
  // the first/last extras where it touches an end.
  std::vector<double> limits;
  limits.reserve(size_t(n) * (n + 1) / 2);
  for (int i = 0; i < n; ++i) {
    double sum = i == 0 ? first : 0;
    for (int j = i; j < n; ++j) {
      sum += costs[j];
      limits.push_back(sum + (j == n - 1 ? last : 0));
    }
  }
  std::sort(limits.begin(), limits.end());
  limits.erase(std::unique(limits.begin(), limits.end()), limits.end());
  size_t lo = 0, hi = limits.size() - 1;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (cutWithin(limits[mid], nullptr))
      hi = mid;
    else
      lo = mid + 1;
  }
  std::vector<int> cut;
  cutWithin(limits[lo], &cut);
  return cut;
}

double tpCommSeconds(const ClusterSpec &spec,
                     const std::vector<double> &allReduceBytes, int tp,
                     bool sequenceParallel, bool recomputed) {
  if (tp < 2)
    return 0;
  bool crosses = tp > spec.devicesPerNode;
  double once = 0;
  for (double bytes : allReduceBytes) {
    if (sequenceParallel)
      once += collectiveSeconds(spec, Collective::ReduceScatter, bytes, tp,
                                crosses, Algorithm::Ring) +
              collectiveSeconds(spec, Collective::AllGather, bytes, tp,
                                crosses, Algorithm::Ring);
    else
      once += collectiveSeconds(spec, Collective::AllReduce, bytes, tp, crosses,
                                Algorithm::Ring);
  }
  // Forward, its conjugate in the backward, and the recomputed forward.
  return once * (recomputed ? 3 : 2);
}

double dpExposedSeconds(const ClusterSpec &spec, int zeroStage,
                        const GroupPlacement &dp, double gradBytes,
                        double paramBytes, double forwardSeconds,
                        double backwardSeconds, int m) {
  if (dp.size < 2)
    return 0;
  auto coll = [&](Collective kind, double bytes) {
    return groupCollectiveSeconds(spec, kind, bytes, dp);
  };
  // Only the share of the computation the device overlaps for real hides
  // communication (none on CPU ranks).
  forwardSeconds *= spec.device.commOverlap;
  backwardSeconds *= spec.device.commOverlap;
  switch (zeroStage) {
  case 0:
    return exposedCommSeconds(coll(Collective::AllReduce, gradBytes),
                              backwardSeconds);
  case 1:
    return exposedCommSeconds(coll(Collective::ReduceScatter, gradBytes),
                              backwardSeconds) +
           coll(Collective::AllGather, paramBytes);
  case 2:
    return m * exposedCommSeconds(coll(Collective::ReduceScatter, gradBytes),
                                  backwardSeconds) +
           coll(Collective::AllGather, paramBytes);
  default: {
    double gather = coll(Collective::AllGather, paramBytes);
    return m * (exposedCommSeconds(gather, forwardSeconds) +
                exposedCommSeconds(gather, backwardSeconds) +
                exposedCommSeconds(coll(Collective::ReduceScatter, gradBytes),
                                   backwardSeconds));
  }
  }
}

/// `x` rounded to 36 significant bits (about 11 digits), exactly (frexp,
/// ldexp and nearbyint are exact), so that two step times an ulp apart are
/// one time: a step bound by an exposed reduction comes out the same with
/// and without recomputation, give or take the order of the additions.
static double significant(double x) {
  if (!std::isfinite(x) || x == 0)
    return x;
  int e = 0;
  double m = std::frexp(x, &e);
  return std::ldexp(std::nearbyint(std::ldexp(m, 36)), e - 36);
}

bool planBefore(const Plan &a, const Plan &b) {
  auto key = [](const Plan &p) {
    const LayoutChoice &l = p.layout;
    return std::make_tuple(significant(p.stepSeconds), p.computeSeconds,
                           p.memory.total, l.dp, l.tp, l.pp, p.microBatchSize,
                           l.zeroStage, l.sequenceParallel, int(p.recompute),
                           p.recomputeBlocks, int(l.schedule), l.virtualStages,
                           p.tpReplicatedMask);
  };
  return key(a) < key(b);
}

std::vector<std::vector<int>>
blocksOfRanks(const std::vector<int> &blocksPerRank, int pp, int v,
              int numBlocks) {
  std::vector<std::vector<int>> out(size_t(std::max(pp, 0)));
  if (pp < 1 || numBlocks < 1)
    return {};
  if (v > 1) {
    if (numBlocks % (pp * v) != 0)
      return {};
    int chunk = numBlocks / (pp * v);
    for (int c = 0; c < pp * v; ++c)
      for (int k = 0; k < chunk; ++k)
        out[size_t(c % pp)].push_back(c * chunk + k);
    return out;
  }
  if (blocksPerRank.size() != size_t(pp))
    return {};
  int b = 0;
  for (int r = 0; r < pp; ++r)
    for (int k = 0; k < blocksPerRank[size_t(r)]; ++k)
      out[size_t(r)].push_back(b++);
  if (b != numBlocks)
    return {};
  return out;
}

/// Ok if a count of blocks recomputed goes with full recomputation.
static Status checkRecomputeBlocks(Recompute recompute, int blocks) {
  if (blocks < 0 || (blocks > 0 && recompute != Recompute::Full))
    return Status::error("recomputing the first " + std::to_string(blocks) +
                         " blocks of each rank applies to full recomputation "
                         "only, with a count of at least 0: pin full:K");
  return Status::success();
}

std::string recomputeText(const Plan &plan, bool brief) {
  std::string name = recomputeName(plan.recompute);
  if (plan.recompute != Recompute::Full || plan.recomputeBlocks == 0)
    return name;
  std::string k = std::to_string(plan.recomputeBlocks);
  return brief ? name + ":" + k
               : name + ", first " + k + " block" +
                     (plan.recomputeBlocks == 1 ? "" : "s") + " of each stage";
}

std::vector<int> recomputedBlocks(const Plan &plan) {
  std::vector<int> out;
  if (plan.recompute != Recompute::Full)
    return out;
  int numBlocks = 0;
  for (int b : plan.blocksPerRank)
    numBlocks += b;
  for (const std::vector<int> &rank :
       blocksOfRanks(plan.blocksPerRank, plan.layout.pp,
                     plan.layout.virtualStages, numBlocks))
    for (size_t k = 0; k < rank.size(); ++k)
      if (plan.recomputeBlocks == 0 || k < size_t(plan.recomputeBlocks))
        out.push_back(rank[k]);
  std::sort(out.begin(), out.end());
  return out;
}

//===----------------------------------------------------------------------===//
// Prices
//===----------------------------------------------------------------------===//

namespace {

struct DTypeBytes {
  double activation, param, grad, optimizer;
  /// A gradient as the data-parallel reduction (and the tied swap) sends it.
  double reducedGrad;
};

DTypeBytes bytesFor(const SearchOptions &options) {
  // Mixed precision: 16-bit weights and gradients, f32 master weights and
  // AdamW's two f32 moments.
  DTypeBytes b = options.dtype == "fp32" ? DTypeBytes{4, 4, 4, 8, 4}
                                         : DTypeBytes{2, 2, 2, 12, 2};
  if (options.fp32GradReduce)
    b.reducedGrad = 4;
  return b;
}

/// One sample through one layer, for one (tp, sp, recompute).
struct LayerPrice {
  double forward = 0;   // seconds
  double recompute = 0; // seconds the backward reruns
  double saved = 0;     // bytes kept for the backward
  double working = 0;   // bytes rematerialized for the block being run back
  double boundary = 0;  // bytes a stage boundary before it sends
  std::vector<double> allReduce; // bytes of each tp all-reduce
  /// Parameter elements on one tp rank.
  double params = 0;
  /// Of params, those of whole parts under sequence parallelism: their
  /// gradients are all-reduced over tp once a step.
  double seqWholeParams = 0;
  /// Channels of each BatchNorm (LayerStats::batchNormChannels).
  std::vector<double> batchNormChannels;
  /// Seconds a micro-batch costs whatever its size (device.op_overhead_us
  /// per op): the forward's third, and what recomputation reruns.
  double fixedForward = 0, fixedRecompute = 0;
  double compute() const { return 3 * forward + recompute; }
  double fixedCompute() const { return 3 * fixedForward + fixedRecompute; }
};

/// What one pipeline rank holds; ranks with equal contents share a group.
struct RankGroup {
  int firstRank = 0;
  std::vector<int> classCount;
  /// Of classCount, the blocks recomputed in full under per-block
  /// recomputation (empty otherwise).
  std::vector<int> recomputedCount;
  bool prologue = false, epilogue = false;
  double forward = 0, compute = 0, saved = 0, working = 0, params = 0;
  double seqWholeParams = 0;
  /// Per micro-batch, whatever its size (LayerPrice::fixedForward).
  double fixedForward = 0, fixedCompute = 0;
  /// Channels of each BatchNorm the rank runs.
  std::vector<double> batchNormChannels;
};

struct RankLayout {
  std::vector<int> blocksPerRank;
  std::vector<RankGroup> groups;
  /// Per pipeline rank, the index of its group.
  std::vector<int> groupOfRank;
  double boundary = 0;
  /// max over ranks of compute seconds per sample: with B/dp samples
  /// through the slowest rank, a lower bound on any step.
  double maxCompute = 0;
};

struct Key {
  int tp;
  bool sp;
  uint32_t replicated;
  Recompute rec;
  int mbs; // Pricer::classKey
  bool operator<(const Key &o) const {
    return std::tie(tp, sp, replicated, rec, mbs) <
           std::tie(o.tp, o.sp, o.replicated, o.rec, o.mbs);
  }
};

/// How a candidate splits its layers over tp: the degree, sequence
/// parallelism, and the parts kept replicated.
struct TpLayout {
  int tp;
  bool sp;
  uint32_t replicated;
};

class Pricer {
public:
  Pricer(const ModelStats &model, const ClusterSpec &spec,
         const SearchOptions &options)
      : model(model), spec(spec), options(options), bytes(bytesFor(options)),
        peak(spec.device.peakTFLOPs.at(options.dtype) * 1e12),
        // The option wins; else the spec's measured bandwidth, if it has
        // one (0: memory traffic is not priced).
        bandwidth(options.memoryBandwidthGBps > 0
                      ? options.memoryBandwidthGBps
                      : spec.device.memoryBandwidthGBps),
        updateBandwidth(options.memoryBandwidthGBps <= 0 &&
                                spec.device.updateBandwidthGBps > 0
                            ? spec.device.updateBandwidthGBps
                            : bandwidth),
        byClass(spec.device.gemmEfficiency.count(options.dtype) > 0),
        // Only with the memory's rate priced: the ops that do not fit
        // move theirs at that.
        cacheBytes(bandwidth > 0 ? spec.device.cacheMB * 1e6 : 0),
        cacheBandwidth(spec.device.cacheBandwidthGBps) {}

  /// What per-sample prices depend on of the micro-batch size: with GEMM
  /// efficiencies per shape class in the spec, a micro-batch of b samples
  /// stacks them into products b times as large, so it is b; without,
  /// nothing (0). 0 also asks for every product at the fastest class: a
  /// lower bound on every micro-batch size's prices.
  /// With a cache in the spec, likewise: whether an op's data for a
  /// micro-batch fits depends on its size; 0 fits everything, the fastest.
  int classKey(int mbs) const { return byClass || cacheBytes > 0 ? mbs : 0; }

  /// Per-sample prices of every class, the prologue and the epilogue, at
  /// micro-batch `mbs` (classKey's).
  const std::vector<LayerPrice> &prices(TpLayout t, Recompute rec, int mbs) {
    auto [it, isNew] =
        priceCache.try_emplace(Key{t.tp, t.sp, t.replicated, rec, mbs});
    if (isNew) {
      // Classes first, then the prologue and the epilogue.
      for (const LayerStats &c : model.classes)
        it->second.push_back(price(c, t, rec, /*isBlock=*/true, mbs));
      it->second.push_back(price(model.prologue, t, rec, false, mbs));
      it->second.push_back(price(model.epilogue, t, rec, false, mbs));
    }
    return it->second;
  }

  /// The rank layout, or null if the blocks cannot be cut so. With
  /// `fullBlocks` k > 0 the first k blocks of each rank recompute in full
  /// and the rest keep everything; the cut is the one without
  /// recomputation.
  const RankLayout *ranks(TpLayout t, Recompute rec, int pp, int v,
                          int fullBlocks, int mbs) {
    mbs = classKey(mbs);
    auto key = std::make_tuple(t.tp, t.sp, t.replicated, int(rec), pp, v,
                               fullBlocks, mbs);
    if (auto it = rankCache.find(key); it != rankCache.end())
      return it->second.blocksPerRank.empty() ? nullptr : &it->second;
    RankLayout out;
    if (mbs) {
      // The stages are cut once, at the fastest classes, whatever the
      // micro-batch: then memory still only grows with it (the search's
      // pruning relies on that) and a plan's cut does not hinge on a
      // class boundary.
      if (const RankLayout *base = ranks(t, rec, pp, v, fullBlocks, 0))
        out = layout(prices(t, fullBlocks ? Recompute::None : rec, mbs),
                     fullBlocks ? &prices(t, Recompute::Full, mbs) : nullptr,
                     base->blocksPerRank, pp, v, fullBlocks);
    } else if (!fullBlocks) {
      out = layout(prices(t, rec, 0), nullptr, cut(prices(t, rec, 0), pp, v),
                   pp, v, 0);
    } else if (const RankLayout *none =
                   ranks(t, Recompute::None, pp, v, 0, 0)) {
      out =
          layout(prices(t, Recompute::None, 0), &prices(t, Recompute::Full, 0),
                 none->blocksPerRank, pp, v, fullBlocks);
    }
    RankLayout &stored = rankCache[key] = std::move(out);
    return stored.blocksPerRank.empty() ? nullptr : &stored;
  }

  /// Per-micro-batch tp seconds of each class, the prologue and epilogue.
  std::vector<double> tpSeconds(const std::vector<LayerPrice> &lp, TpLayout t,
                                Recompute rec, int mbs) {
    std::vector<double> out;
    std::vector<double> scaled;
    for (size_t i = 0; i < lp.size(); ++i) {
      scaled.clear();
      for (double b : lp[i].allReduce)
        scaled.push_back(b * mbs);
      bool isBlock = i < model.classes.size();
      out.push_back(tpCommSeconds(spec, scaled, t.tp, t.sp,
                                  isBlock && rec == Recompute::Full));
    }
    return out;
  }

  const ModelStats &model;
  const ClusterSpec &spec;
  const SearchOptions &options;
  DTypeBytes bytes;
  double peak;
  /// Device memory bandwidth in GB/s.
  double bandwidth;
  /// The rate the optimizer's pass over the parameters runs at.
  double updateBandwidth;
  /// The spec prices products by shape class (gemm_efficiency).
  bool byClass;
  /// Data per op and micro-batch that stays in cache (0: no cache priced),
  /// and the rate it moves at there.
  double cacheBytes;
  double cacheBandwidth;

private:
  LayerPrice price(const LayerStats &s, TpLayout t, Recompute rec, bool isBlock,
                   int mbs) {
    const int tp = t.tp;
    const bool sp = t.sp;
    auto replicated = [&](int part) {
      return part >= 0 && (t.replicated >> part & 1);
    };
    LayerPrice p;
    double attention = 0;
    // An op's forward and backward kernels together cost the overhead; a
    // third of it is the forward's (as the FLOPs split).
    const double fixed = spec.device.opOverheadUs * 1e-6 / 3;
    int attentionOps = 0;
    for (const OpCost &op : s.ops) {
      p.fixedForward += fixed;
      attentionOps += op.attentionCore;
      // A whole part runs all its ops on every tp rank; with sequence
      // parallelism (token-wise parts only: masksFor) on the rank's share
      // of the tokens.
      double d = sp || (op.tpSplit && !replicated(op.tpPart)) ? tp : 1;
      double traffic = bandwidth > 0 ? op.elements * bytes.activation / d : 0;
      // The op's data for the micro-batch in cache moves at its rate.
      double rate = bandwidth > 0 ? bandwidth : 1;
      if (cacheBytes > 0 && traffic * mbs <= cacheBytes)
        rate = cacheBandwidth;
      double t;
      if (op.productFlops > 0 && mbs > 0) {
        // The GEMM's shape class: a product with a weight holds the
        // micro-batch's samples, split as the op is; one of two
        // activations is a sample's and a head's whatever the layout.
        double product =
            op.foldsBatch ? mbs * op.productFlops / d : op.productFlops;
        t = gemmSeconds(spec, op.flops / d, product, traffic, rate,
                        options.dtype);
      } else {
        t = computeSeconds(spec, op.flops / d, traffic, rate, options.dtype);
      }
      p.forward += t;
      if (op.attentionCore)
        attention += t;
    }
    double rep = sp ? tp : 1;
    double all = s.saved.split / tp + s.saved.replicated / rep;
    double att = s.attentionSaved.split / tp + s.attentionSaved.replicated / rep;
    double replicatedParams = 0;
    for (const TpPartShare &share : s.tpShares)
      if (replicated(share.part)) {
        // Sequence-split, a whole part keeps a tp-th of its activations.
        if (!sp) {
          all += share.saved * (1 - 1.0 / tp);
          att += share.attentionSaved * (1 - 1.0 / tp);
        } else {
          p.seqWholeParams += share.params;
        }
        replicatedParams += share.params;
      }
    Recompute r = isBlock ? rec : Recompute::None;
    switch (r) {
    case Recompute::None:
      p.saved = all;
      break;
    case Recompute::Selective:
      p.saved = all - att;
      p.working = att;
      p.recompute = attention;
      p.fixedRecompute = attentionOps * fixed;
      break;
    case Recompute::Full:
      p.saved = s.inputElements / rep;
      p.working = all;
      p.recompute = p.forward;
      p.fixedRecompute = p.fixedForward;
      break;
    }
    p.saved *= bytes.activation;
    p.working *= bytes.activation;
    // The whole boundary activation: the tp ranks split what crosses
    // (--weft-apply-mesh), with sequence parallelism or without.
    p.boundary = s.inputElements * bytes.activation;
    // A whole part all-reduces no activation: its input and output are
    // whole on every tp rank already, or (sequence parallel) each rank's
    // tokens are all it needs.
    for (size_t i = 0; i < s.tpAllReduceElements.size(); ++i) {
      int part = i < s.tpAllReducePart.size() ? s.tpAllReducePart[i] : -1;
      if (!replicated(part))
        p.allReduce.push_back(s.tpAllReduceElements[i] * bytes.activation);
    }
    p.params = (s.params - replicatedParams) / tp + replicatedParams;
    p.batchNormChannels = s.batchNormChannels;
    return p;
  }

  /// Blocks per rank: the balanced cut by `lp`'s compute, or with v > 1
  /// virtual stages equal chunks (blocksOfRanks places them). Empty if
  /// the blocks cannot be cut so.
  std::vector<int> cut(const std::vector<LayerPrice> &lp, int pp, int v) {
    const int n = int(model.blocks.size());
    const size_t pro = model.classes.size(), epi = pro + 1;
    if (v > 1)
      return n % (pp * v) ? std::vector<int>{} : std::vector<int>(pp, n / pp);
    if (pp > n)
      return {};
    std::vector<double> costs;
    for (int c : model.blocks)
      costs.push_back(lp[c].compute());
    return balancedCut(costs, lp[pro].compute(), lp[epi].compute(), pp);
  }

  /// The ranks holding `blocksPerRank` blocks, priced by `lp`; with `full`,
  /// each rank's first `fullBlocks` blocks priced by it instead.
  RankLayout layout(const std::vector<LayerPrice> &lp,
                    const std::vector<LayerPrice> *full,
                    const std::vector<int> &blocksPerRank, int pp, int v,
                    int fullBlocks) {
    RankLayout out;
    const size_t pro = model.classes.size(), epi = pro + 1;
    std::vector<std::vector<int>> rankBlocks =
        blocksOfRanks(blocksPerRank, pp, v, int(model.blocks.size()));
    if (rankBlocks.empty())
      return out;
    std::map<std::tuple<std::vector<int>, std::vector<int>, bool, bool>, int>
        groupOf;
    for (int r = 0; r < pp; ++r) {
      RankGroup g;
      g.firstRank = r;
      g.classCount.assign(model.classes.size(), 0);
      for (int b : rankBlocks[r])
        ++g.classCount[model.blocks[b]];
      if (full) {
        g.recomputedCount.assign(model.classes.size(), 0);
        for (size_t k = 0; k < rankBlocks[r].size() && k < size_t(fullBlocks);
             ++k)
          ++g.recomputedCount[model.blocks[rankBlocks[r][k]]];
      }
      g.prologue = r == 0;
      g.epilogue = r == pp - 1;
      out.blocksPerRank.push_back(int(rankBlocks[r].size()));
      auto [it, isNew] =
          groupOf.try_emplace(std::make_tuple(g.classCount, g.recomputedCount,
                                              g.prologue, g.epilogue),
                              int(out.groups.size()));
      out.groupOfRank.push_back(it->second);
      if (!isNew)
        continue;
      auto add = [&](const LayerPrice &p, int count) {
        g.forward += count * p.forward;
        g.compute += count * p.compute();
        g.fixedForward += count * p.fixedForward;
        g.fixedCompute += count * p.fixedCompute();
        g.saved += count * p.saved;
        g.params += count * p.params;
        g.seqWholeParams += count * p.seqWholeParams;
        for (int k = 0; k < count; ++k)
          llvm::append_range(g.batchNormChannels, p.batchNormChannels);
        if (count)
          g.working = std::max(g.working, p.working);
      };
      double keptSaved = 0;
      for (size_t c = 0; c < model.classes.size(); ++c) {
        int recomputed = full ? g.recomputedCount[c] : 0;
        add(lp[c], g.classCount[c] - recomputed);
        keptSaved += (g.classCount[c] - recomputed) * lp[c].saved;
        if (full)
          add((*full)[c], recomputed);
      }
      // The recomputed blocks are the rank's first, run back last: by
      // then the other blocks of that micro-batch have freed what they
      // kept, and the rerun forward lives in that room (the test GPT's
      // workspace: 997 KiB keeping all, 670 recomputing both layers, 640
      // recomputing h.0, 1059 recomputing h.1).
      if (full)
        g.working = std::max(0.0, g.working - keptSaved);
      if (g.prologue)
        add(lp[pro], 1);
      if (g.epilogue)
        add(lp[epi], 1);
      out.maxCompute = std::max(out.maxCompute, g.compute);
      out.groups.push_back(std::move(g));
    }
    for (size_t c = 0; c < model.classes.size(); ++c)
      out.boundary = std::max(out.boundary, lp[c].boundary);
    return out;
  }

public:
  /// The schedule of `kind` on p ranks over m micro-batches without
  /// virtual stages, built once: its order of computations depends only on
  /// kind, p and m. Null where it is too large to simulate in a search
  /// (kMaxSimulatedActions) or cannot be built.
  const pipeline::Schedule *schedule(Schedule kind, int p, int m) {
    auto [it, isNew] = scheduleCache.try_emplace(std::make_tuple(kind, p, m));
    if (isNew && int64_t(p) * m * 4 <= kMaxSimulatedActions &&
        !pipeline::buildSchedule(kind, p, m, 1, it->second).ok())
      it->second.perRank.clear();
    return it->second.perRank.empty() ? nullptr : &it->second;
  }

  /// The largest schedule simulated per candidate (computations and
  /// transfers over all ranks): pipelines of a few ranks and micro-batches,
  /// where uneven stages move the bubble most. Larger ones take the
  /// formula (bubbleFraction), which assumes even stages.
  static constexpr int64_t kMaxSimulatedActions = 4096;

private:
  std::map<Key, std::vector<LayerPrice>> priceCache;
  std::map<std::tuple<Schedule, int, int>, pipeline::Schedule> scheduleCache;
  std::map<std::tuple<int, bool, uint32_t, int, int, int, int, int>, RankLayout>
      rankCache;
};

/// `here`: parameter elements on one tp rank.
double staticBytes(const Pricer &pr, double here, int dp, int zero) {
  return here * (pr.bytes.param / (zero >= 3 ? dp : 1) +
                 pr.bytes.grad / (zero >= 2 ? dp : 1) +
                 pr.bytes.optimizer / (zero >= 1 ? dp : 1));
}

/// The heart of evaluatePlan, on prepared prices.
void price(Pricer &pr, const RankLayout &rl, const LayoutChoice &l,
           uint32_t replicated, int mbs, Recompute rec, Plan &plan,
           int fullBlocks = 0) {
  const ClusterSpec &spec = pr.spec;
  // Per-block recomputation: blocks priced without, and the recomputed
  // ones' tp collectives as full recomputation's.
  Recompute base = fullBlocks ? Recompute::None : rec;
  const TpLayout t{l.tp, l.sequenceParallel, replicated};
  const std::vector<LayerPrice> &lp = pr.prices(t, base, pr.classKey(mbs));
  std::vector<double> tp = pr.tpSeconds(lp, t, base, mbs);
  std::vector<double> tpFull;
  if (fullBlocks)
    tpFull = pr.tpSeconds(pr.prices(t, Recompute::Full, pr.classKey(mbs)), t,
                          Recompute::Full, mbs);
  const size_t pro = pr.model.classes.size(), epi = pro + 1;
  const int p = l.pp, m = l.microBatches, v = l.virtualStages;
  const int dpn = int(spec.devicesPerNode);

  // Pipeline transfers. On gloo the runtime sends while the step computes
  // and posts each recv ahead of its op (docs/runtime.md), so a
  // boundary's transfer is hidden behind the stages' work but for the
  // pipeline's fill and drain: the first micro-batch's forward and the
  // last one's backward each wait every hop of the chain of stages, and a
  // link slower than a stage's work paces the steady state. NCCL pairs
  // transfers in issue order, so a recv cannot be posted ahead: each
  // micro-batch's stage waits for its transfers (as Megatron-LM's
  // blocking ones do), on the slowest boundary.
  const bool ahead = spec.collectiveLibrary == ClusterSpec::Library::Gloo;
  double hops = 0, linkMB = 0, gatherMB = 0, blockingMB = 0, afterSchedule = 0;
  if (p > 1) {
    // Ranks are laid out pp-major: stage s's dp x tp ranks start at rank
    // s * dp * tp, so a boundary crosses nodes where that changes node.
    // Each of a stage's dp x tp ranks sends at once, so a crossing node
    // link carries as many transfers as the node holds of them.
    auto nodeOf = [&](int stage) { return int64_t(stage) * l.dp * l.tp / dpn; };
    GroupPlacement inside, across;
    inside.size = inside.perNode = across.size = 2;
    across.groupsPerNode = std::min(l.dp * l.tp, dpn);
    // Each tp rank sends 1/tp of the boundary; without sequence
    // parallelism the receiving tp ranks gather it inside their node.
    double boundary = mbs * rl.boundary;
    double hopInside = groupCollectiveSeconds(spec, Collective::SendRecv,
                                              boundary / l.tp, inside);
    double hopAcross = groupCollectiveSeconds(spec, Collective::SendRecv,
                                              boundary / l.tp, across);
    // The chain runs through every chunk: p * v - 1 hops, chunk k on
    // stage k mod p (the last stage hands chunk k to the first).
    for (int k = 0; k + 1 < p * v; ++k) {
      bool crosses = nodeOf(k % p) != nodeOf((k + 1) % p);
      hops += crosses ? hopAcross : hopInside;
      linkMB = std::max(linkMB, v * (crosses ? hopAcross : hopInside));
    }
    hops *= 2;
    if (!ahead) {
      blockingMB = 2 * linkMB;
      hops = linkMB = 0;
    }
    if (l.tp > 1 && !l.sequenceParallel)
      gatherMB = 2.0 * v *
                 collectiveSeconds(spec, Collective::AllGather, boundary, l.tp,
                                   l.tp > dpn, Algorithm::Ring);
    // After the schedule the first and last stages swap their shares of a
    // tied parameter's gradient (both ways at once), exposed. Each rank
    // sends its own block of it, split over tp and over dp as the ranks
    // hold it (docs/pipeline.md, "Pipelines with dp and tp"; the bench
    // GPT's 8192 x 256 embedding at pp=2 x dp=2 crosses as 4096 x 256 per
    // rank).
    if (pr.model.tiedElements > 0)
      afterSchedule = groupCollectiveSeconds(
          spec, Collective::SendRecv,
          pr.model.tiedElements / (double(l.tp) * l.dp) * pr.bytes.reducedGrad,
          nodeOf(0) != nodeOf(p - 1) ? across : inside);
    // Then the last stage sends the step's loss to rank 0, and each
    // pipeline rank sends its part of the squared gradient norm to every
    // other (docs/pipeline.md): a message of 4 bytes each, exposed, a
    // round of latency per peer. On this host's gloo that is 0.1-0.2 ms a
    // message: most of a tiny model's pipelined step.
    afterSchedule +=
        double(p) *
        groupCollectiveSeconds(spec, Collective::SendRecv, 4,
                               nodeOf(0) != nodeOf(p - 1) ? across : inside);
  }
  double slowest = -1, compute = 0, comm = 0, dpExposed = 0, update = 0;
  // Stages of unequal cost (the embedding on the first, the head and loss
  // on the last, blocks that do not divide evenly) idle in other places
  // than the formula's even stages, zero-bubble's weight gradients most:
  // where the schedule is small, it runs with each rank's costs. Per group,
  // what one micro-batch costs its ranks: forward, input gradient, weight
  // gradient (the forward's products again; the rest of the backward and
  // any recomputation are the input gradient), communication spread over
  // the three.
  const pipeline::Schedule *sched =
      p > 1 && v == 1 && rl.groupOfRank.size() == size_t(p)
          ? pr.schedule(l.schedule, p, m)
          : nullptr;
  std::vector<std::array<double, 3>> groupCosts(sched ? rl.groups.size() : 0);
  // Whole parts under sequence parallelism: each tp rank's gradient is its
  // tokens' share, all-reduced over tp once a step, after the backward.
  double tpGradExposed = 0;
  MemoryEstimate worst;
  worst.total = -1;
  int worstRank = 0;
  // Ranks are numbered pp, dp, tp (tp fastest): a dp group wider than a
  // node has dpn / tp members on each node, and a node holds tp such
  // groups.
  GroupPlacement dpGroup;
  dpGroup.size = dpGroup.perNode = l.dp;
  if (l.dp * l.tp > dpn) {
    dpGroup.perNode = std::max(1, dpn / l.tp);
    dpGroup.groupsPerNode = std::min(l.tp, dpn);
  }
  for (const RankGroup &g : rl.groups) {
    double tpMB = 0;
    for (size_t c = 0; c < pro; ++c) {
      tpMB += g.classCount[c] * tp[c];
      if (!g.recomputedCount.empty())
        tpMB += g.recomputedCount[c] * (tpFull[c] - tp[c]);
    }
    if (g.prologue)
      tpMB += tp[pro];
    if (g.epilogue)
      tpMB += tp[epi];
    double computeMB = mbs * g.compute + g.fixedCompute;
    double perMB = computeMB + tpMB + gatherMB + blockingMB;
    if (sched) {
      double f = mbs * g.forward + g.fixedForward, extra = perMB - computeMB;
      groupCosts[size_t(&g - rl.groups.data())] = {
          f + extra / 3, std::max(0.0, computeMB - 2 * f) + 2 * extra / 3, f};
    }
    if (perMB > slowest) {
      slowest = perMB;
      compute = computeMB;
      comm = tpMB + gatherMB + blockingMB;
    }
    double forwardMB = mbs * g.forward + g.fixedForward;
    double here = g.params;
    if (g.seqWholeParams > 0)
      tpGradExposed =
          std::max(tpGradExposed,
                   collectiveSeconds(spec, Collective::AllReduce,
                                     g.seqWholeParams * pr.bytes.reducedGrad,
                                     l.tp, l.tp > dpn, Algorithm::Ring));
    update = std::max(update,
                      updateSeconds(here, here / (l.zeroStage >= 1 ? l.dp : 1),
                                    m, pr.bytes.param, pr.bytes.grad,
                                    pr.bytes.optimizer, pr.updateBandwidth));
    // Reduced after the backward, nothing of the step hides it.
    bool overlap = pr.options.dpOverlap;
    // A pipeline's ends reduce a tied parameter's gradient over dp as a
    // reduce-scatter (each rank swaps its block), then gather: at ZeRO 0
    // the summed gradient, and every dp rank updates the whole parameter;
    // above, the parameter its blocks were updated into (the bench GPT's
    // 8192 x 256 embedding at dp=2 x pp=2: 4 MiB scattered and 4 MiB
    // gathered per rank, docs/pipeline.md).
    double tiedHere = p > 1 && l.dp > 1 && (g.prologue || g.epilogue)
                          ? std::min(here, pr.model.tiedElements / l.tp)
                          : 0;
    double tiedDp = 0;
    if (tiedHere > 0)
      tiedDp =
          groupCollectiveSeconds(spec, Collective::ReduceScatter,
                                 tiedHere * pr.bytes.reducedGrad, dpGroup) +
          groupCollectiveSeconds(spec, Collective::AllGather,
                                 tiedHere * (l.zeroStage == 0
                                                 ? pr.bytes.reducedGrad
                                                 : pr.bytes.param),
                                 dpGroup);
    // The stage with the loss averages it over dp once a step for the
    // step's report (weft.all_reduce of one f32): its latency, after the
    // last micro-batch's forward, waited for at the step's end.
    double lossDp =
        g.epilogue && l.dp > 1
            ? groupCollectiveSeconds(spec, Collective::AllReduce, 4, dpGroup)
            : 0;
    // Each BatchNorm all-reduces its statistics over dp, and their
    // gradients in the backward, every micro-batch (f32, latency-bound):
    // nothing computes while the layer waits for them.
    double batchNorm = 0;
    if (l.dp > 1)
      for (double channels : g.batchNormChannels)
        batchNorm += 4 * groupCollectiveSeconds(spec, Collective::AllReduce,
                                                channels * 4, dpGroup);
    dpExposed =
        std::max(dpExposed,
                 m * batchNorm + lossDp + tiedDp +
                     dpExposedSeconds(spec, l.zeroStage, dpGroup,
                                      (here - tiedHere) * pr.bytes.reducedGrad,
                                      (here - tiedHere) * pr.bytes.param,
                                      overlap ? forwardMB : 0,
                                      overlap ? computeMB - forwardMB : 0, m));

    // Memory: on the group's first rank, which has the most in flight.
    MemoryEstimate e;
    e.params = here * pr.bytes.param / (l.zeroStage >= 3 ? l.dp : 1);
    e.grads = here * pr.bytes.grad / (l.zeroStage >= 2 ? l.dp : 1);
    e.optimizerState = here * pr.bytes.optimizer / (l.zeroStage >= 1 ? l.dp : 1);
    e.activations =
        mbs * (g.saved * inFlightMicroBatchesOnRank(l.schedule, p, m, v,
                                                    g.firstRank) +
               g.working);
    if (pr.options.executableMemory) {
      double gradBytes = here * pr.bytes.grad;
      e.stepOutputs = e.params + e.optimizerState;
      e.weightImage = here * pr.bytes.param;
      // Two output-sized tensors: the slope of weftc's workspace in the
      // vocabulary and the batch (docs/planner.md). They die before the
      // first block is run back, so they share their room with the block
      // a recomputation reruns: counted is what exceeds it (the GPT L4
      // H256 V4096 B8 with full recomputation measured 173.7 MB, 207.0
      // predicted counting both, 175.5 counting the larger).
      // The logits are split over tp unless their part is replicated.
      int head = pr.model.outputTpPart;
      double logitsTp = head >= 0 && (replicated >> head & 1) ? 1 : l.tp;
      if (g.epilogue)
        e.lossBuffers = std::max(0.0, 2 * mbs * pr.model.outputElements *
                                              pr.bytes.activation / logitsTp -
                                          mbs * g.working);
      if (l.dp > 1)
        e.commBuffers =
            l.zeroStage == 0
                ? gradBytes
                : gradBytes * (2 + 1.0 / l.dp) +
                      here * pr.bytes.param * (1 + 1.0 / l.dp);
    }
    e.total = e.params + e.grads + e.optimizerState + e.activations +
              e.stepOutputs + e.weightImage + e.lossBuffers + e.commBuffers;
    if (e.total > worst.total) {
      worst = e;
      worstRank = g.firstRank;
    }
  }
  // The gradient norm (reported every step, and what clipping divides by)
  // sums its squares over tp once a step, on every rank: one f32
  // all-reduce.
  if (l.tp > 1)
    dpExposed += collectiveSeconds(spec, Collective::AllReduce, 4, l.tp,
                                   l.tp > dpn, Algorithm::Ring);
  double paced = std::max(0.0, linkMB - slowest);
  double busy = m * (slowest + paced);
  double makespan = busy / (1.0 - bubbleFraction(l.schedule, p, m, v)) + hops;
  if (sched) {
    pipeline::Costs costs;
    for (int gi : rl.groupOfRank) {
      const std::array<double, 3> &c = groupCosts[size_t(gi)];
      costs.forward.push_back(c[0]);
      costs.inputGrad.push_back(c[1]);
      costs.weightGrad.push_back(c[2]);
    }
    double simulated = 0;
    if (pipeline::simulateMakespan(*sched, costs, simulated).ok())
      makespan = simulated + m * paced + hops;
  }
  plan.layout = l;
  plan.microBatchSize = mbs;
  plan.recompute = rec;
  plan.recomputeBlocks = fullBlocks;
  plan.blocksPerRank = rl.blocksPerRank;
  plan.tpReplicatedMask = replicated;
  plan.stepSeconds =
      makespan + dpExposed + update + afterSchedule + tpGradExposed;
  plan.computeSeconds = m * compute + update;
  plan.exposedCommSeconds =
      m * (comm + paced) + hops + dpExposed + afterSchedule + tpGradExposed;
  plan.bubbleSeconds = makespan - busy - hops;
  plan.memory = worst;
  plan.memoryRank = worstRank;
  const ModelStats &model = pr.model;
  double devices = double(l.dp) * l.tp * l.pp;
  plan.tokensPerSecond = double(model.batch) * model.seq / plan.stepSeconds;
  double modelFlops = 3.0 * model.forwardFlopsPerSample() * model.batch;
  plan.tflopsPerDevice = modelFlops / plan.stepSeconds / devices / 1e12;
  plan.mfu = plan.tflopsPerDevice * 1e12 / pr.peak;
  plan.feasible = worst.total <= spec.device.memoryGB * 1e9;
  plan.why.clear();
}

std::vector<int> divisorsOf(int64_t n) {
  std::vector<int> d;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0)
      d.push_back(int(i));
  return d;
}

/// Bytes for a person: GB with one decimal, or MB or KB below 0.1 GB, so
/// that a small model's "needs 0.76 MB; the device has 0.70 MB" does not
/// read "needs 0.0 GB; the device has 0.0 GB".
std::string gb(double bytes) {
  char buf[32];
  if (bytes >= 0.1e9 || bytes == 0)
    std::snprintf(buf, sizeof buf, "%.1f GB", bytes / 1e9);
  else if (bytes >= 0.1e6)
    std::snprintf(buf, sizeof buf, "%.2f MB", bytes / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.2f KB", bytes / 1e3);
  return buf;
}

} // namespace

//===----------------------------------------------------------------------===//
// Evaluation and search
//===----------------------------------------------------------------------===//

/// Why a layout cannot be sequence parallel.
static std::string noSequenceParallel(int tp) {
  return "sequence parallelism splits layer norms along the sequence, and "
         "the model has none whose sequence divides by tp=" +
         std::to_string(tp);
}

uint32_t forcedTpReplicated(const ModelStats &model, int tp) {
  uint32_t forced = 0;
  for (size_t k = 0; k < model.tpParts.size(); ++k) {
    int64_t d = model.tpParts[k].divisor;
    if (tp > 1 && ((d && d % tp) || model.tpParts[k].keptWhole))
      forced |= 1u << k;
  }
  return forced;
}

/// The parts that may be whole under sequence parallelism.
static uint32_t tokenWiseParts(const ModelStats &model) {
  uint32_t mask = 0;
  for (size_t k = 0; k < model.tpParts.size(); ++k)
    if (model.tpParts[k].tokenWise)
      mask |= 1u << k;
  return mask;
}

/// The parts with a matmul: tensor parallelism splits one of them at
/// least, or it is tp devices doing one device's work.
static uint32_t matmulParts(const ModelStats &model) {
  uint32_t mask = 0;
  for (size_t k = 0; k < model.tpParts.size(); ++k)
    if (!model.tpParts[k].gatherOnly)
      mask |= 1u << k;
  return mask;
}

bool tpSplitsSomething(const ModelStats &model, int tp) {
  if (tp <= 1)
    return true;
  if (model.tpSplitsNothing ||
      (model.requiredTpDivisor && model.requiredTpDivisor % tp))
    return false;
  uint32_t matmuls = matmulParts(model);
  return !matmuls || (forcedTpReplicated(model, tp) & matmuls) != matmuls;
}

Status tpPartMask(const ModelStats &model,
                  const std::vector<std::string> &names, uint32_t &mask) {
  mask = 0;
  for (const std::string &name : names) {
    size_t k = 0;
    while (k < model.tpParts.size() && model.tpParts[k].name != name)
      ++k;
    if (k == model.tpParts.size()) {
      std::vector<std::string> names;
      for (const TpPart &part : model.tpParts)
        names.push_back(part.name);
      std::string known = llvm::join(names, ", ");
      return Status::error(
          "--tp-replicated: the model has no tensor-parallel part '" + name +
          "'; its parts are " + (known.empty() ? "none" : known) +
          " (weft-plan stats lists them)");
    }
    mask |= 1u << k;
  }
  return Status::success();
}

void nameTpParts(const ModelStats &model, Plan &plan) {
  plan.tpReplicated.clear();
  plan.tpReplicatedParams.clear();
  plan.tpRowSplitParams.clear();
  if (plan.layout.tp < 2)
    return;
  for (size_t k = 0; k < model.tpParts.size(); ++k) {
    const TpPart &part = model.tpParts[k];
    if (plan.tpReplicatedMask >> k & 1) {
      plan.tpReplicated.push_back(part.name);
      for (const std::string &param : part.params)
        plan.tpReplicatedParams.push_back(param);
    } else if (part.gatherOnly) {
      for (const std::string &param : part.params)
        plan.tpRowSplitParams.push_back(param);
    }
  }
}

/// Ok if `mask`'s parts may be whole at tp (sp: with sequence
/// parallelism): it keeps those tp cannot split (when tp >= 2 is known),
/// under sequence parallelism only token-wise ones, and not every part
/// with a matmul. Errors start with `what`, what named the parts.
static Status checkTpParts(const ModelStats &model, int tp, bool sp,
                           uint32_t mask, const std::string &what) {
  uint32_t missing = tp > 1 ? forcedTpReplicated(model, tp) & ~mask : 0;
  if (missing) {
    const TpPart &part = model.tpParts[size_t(__builtin_ctz(missing))];
    if (part.keptWhole)
      return Status::error(
          what + ": weftc splits no weight of tensor-parallel part '" +
          part.name +
          "' without gathering an activation: keep it "
          "replicated");
    return Status::error(
        what + ": tp=" + std::to_string(tp) +
        " cannot split tensor-parallel part '" + part.name +
        "' (its heads and widths have " + std::to_string(part.divisor) +
        " as common divisor): keep it replicated or pick a tp dividing it");
  }
  if (uint32_t mixing = mask & ~tokenWiseParts(model); mixing && sp)
    return Status::error(
        what + " " + model.tpParts[size_t(__builtin_ctz(mixing))].name +
        " with --sequence-parallel=on: that part mixes tokens (an "
        "attention), which weftc then gathers along the sequence at a cost "
        "the planner does not price; keep only token-wise parts (an MLP) "
        "whole, or drop --sequence-parallel");
  uint32_t matmuls = matmulParts(model);
  if (matmuls && (mask & matmuls) == matmuls)
    return Status::error(what +
                         " keeps every layer with a matmul "
                         "replicated: tp ranks would all do one device's "
                         "work; leave a part split, or plan without tp");
  return Status::success();
}

static Status checkOptions(const ModelStats &model, const ClusterSpec &spec,
                           const SearchOptions &o, int &devices) {
  if (Status st = checkDType(o.dtype); !st.ok())
    return Status::error("--dtype: " + st.message);
  devices = o.devices ? o.devices : int(spec.numDevices());
  if (o.devices < 0)
    return Status::error("--devices must be positive, got " +
                         std::to_string(o.devices));
  if (devices > spec.numDevices())
    return Status::error("--devices " + std::to_string(devices) +
                         " is more than cluster '" + spec.name + "' has (" +
                         std::to_string(spec.numDevices()) +
                         "); raise `nodes` in the spec or ask for fewer");
  if (model.blocks.empty() || model.batch <= 0)
    return Status::error("the model has no blocks to plan");
  auto divides = [&](const char *flag, int value, int64_t whole,
                     const std::string &what) -> Status {
    if (value < 0 || (value > 0 && whole % value != 0))
      return Status::error(std::string(flag) + "=" + std::to_string(value) +
                           " does not divide " + what + " (" +
                           std::to_string(whole) + "); pick a divisor of it");
    return Status::success();
  };
  for (Status st :
       {divides("--mesh dp", o.dp, devices, "the devices"),
        divides("--mesh tp", o.tp, devices, "the devices"),
        divides("--mesh pp", o.pp, devices, "the devices"),
        divides("--mesh dp", o.dp, model.batch, "the global batch")})
    if (!st.ok())
      return st;
  if (o.tp && !tpSplitsSomething(model, o.tp)) {
    std::string why;
    if (model.tpSplitsNothing)
      why = "weftc finds no split of a weight that does not gather an "
            "activation (an op after it needs whole rows), so every tp rank "
            "would do one device's work; plan without tp";
    else
      why = "it must divide " +
            (model.requiredTpDivisor && model.requiredTpDivisor % o.tp
                 ? std::to_string(model.requiredTpDivisor)
                 : "the heads and widths of a layer (" +
                       std::to_string(model.tpDivisor) + " divides them all)") +
            "; pick a divisor of it";
    return Status::error("--mesh tp=" + std::to_string(o.tp) +
                         " splits none of the model's layers: " + why);
  }
  if (o.tpReplicated) {
    uint32_t mask = 0;
    if (Status st = tpPartMask(model, *o.tpReplicated, mask); !st.ok())
      return st;
    if (Status st =
            checkTpParts(model, o.tp, o.sequenceParallel.value_or(false), mask,
                         "--tp-replicated");
        !st.ok())
      return st;
  }
  if (o.dp && o.tp && o.pp && int64_t(o.dp) * o.tp * o.pp != devices)
    return Status::error("--mesh dp x tp x pp = " + std::to_string(o.dp) +
                         " x " + std::to_string(o.tp) + " x " +
                         std::to_string(o.pp) + " is not the " +
                         std::to_string(devices) +
                         " devices planned for; change a degree or --devices");
  if (o.pp > int(model.blocks.size()))
    return Status::error("--mesh pp=" + std::to_string(o.pp) +
                         " is more stages than the model's " +
                         std::to_string(model.blocks.size()) +
                         " blocks; use at most that");
  if (o.microBatchSize < 0 ||
      (o.microBatchSize && model.batch % o.microBatchSize != 0))
    return Status::error("--micro-batch-size " +
                         std::to_string(o.microBatchSize) +
                         " does not divide the global batch (" +
                         std::to_string(model.batch) + ")");
  if (o.zeroStage < -1 || o.zeroStage > 3)
    return Status::error("--zero must be 0, 1, 2 or 3, got " +
                         std::to_string(o.zeroStage));
  if (o.virtualStages < 0 ||
      (o.virtualStages > 1 && o.schedule != Schedule::Interleaved))
    return Status::error("--virtual-stages applies to --schedule=interleaved "
                         "only; add it or drop --virtual-stages");
  if (o.virtualStages == 1 && o.schedule == Schedule::Interleaved)
    return Status::error("--virtual-stages for interleaved must be at least "
                         "2; with 1, use --schedule=1f1b");
  if (o.schedule == Schedule::Interleaved && o.pp == 1)
    return Status::error("--schedule=interleaved needs pp >= 2; pin a "
                         "larger --mesh pp or another schedule");
  if (Status st = checkRecomputeBlocks(o.recompute.value_or(Recompute::None),
                                       o.recomputeBlocks);
      !st.ok())
    return st;
  if (o.sequenceParallel.value_or(false) && o.tp == 1)
    return Status::error("--sequence-parallel=on needs tp >= 2 (it splits "
                         "what tensor parallelism replicates)");
  if (o.sequenceParallel.value_or(false) && o.tp > 1 &&
      !model.sequenceParallelSplits(o.tp))
    return Status::error("--sequence-parallel=on: " + noSequenceParallel(o.tp) +
                         "; leave it out");
  return Status::success();
}

Status evaluatePlan(const ModelStats &model, const ClusterSpec &spec,
                    const SearchOptions &options, const LayoutChoice &layout,
                    int microBatchSize, Recompute recompute, Plan &plan,
                    int recomputeBlocks, uint32_t tpReplicatedMask) {
  LayoutChoice l = layout;
  if (microBatchSize < 1 || model.batch % (int64_t(l.dp) * microBatchSize))
    return Status::error("micro-batch size " + std::to_string(microBatchSize) +
                         " x dp " + std::to_string(l.dp) +
                         " does not divide the global batch " +
                         std::to_string(model.batch));
  l.microBatches = int(model.batch / (int64_t(l.dp) * microBatchSize));
  if (Status st = checkLayout(l, spec); !st.ok())
    return st;
  if (Status st = checkDType(options.dtype); !st.ok())
    return st;
  if (Status st = checkRecomputeBlocks(recompute, recomputeBlocks); !st.ok())
    return st;
  if (tpReplicatedMask >> model.tpParts.size())
    return Status::error("the replicated tensor-parallel parts name part " +
                         std::to_string(31 - __builtin_clz(tpReplicatedMask)) +
                         "; the model has " +
                         std::to_string(model.tpParts.size()));
  if (l.tp > 1 && !tpSplitsSomething(model, l.tp))
    return Status::error("tp=" + std::to_string(l.tp) +
                         " splits none of the model's layers");
  if (l.sequenceParallel && !model.sequenceParallelSplits(l.tp))
    return Status::error(noSequenceParallel(l.tp));
  if (l.tp > 1)
    if (Status st = checkTpParts(model, l.tp, l.sequenceParallel,
                                 tpReplicatedMask, "the whole parts");
        !st.ok())
      return st;
  Pricer pr(model, spec, options);
  uint32_t rep = l.tp > 1 ? tpReplicatedMask : 0;
  const RankLayout *rl =
      pr.ranks(TpLayout{l.tp, l.sequenceParallel, rep}, recompute, l.pp,
               l.virtualStages, recomputeBlocks, microBatchSize);
  if (!rl)
    return Status::error("the model's " + std::to_string(model.blocks.size()) +
                         " blocks cannot be cut into " +
                         std::to_string(l.pp * l.virtualStages) +
                         " equal stages");
  price(pr, *rl, l, rep, microBatchSize, recompute, plan, recomputeBlocks);
  nameTpParts(model, plan);
  return Status::success();
}

namespace {

std::string describeChoice(const Plan &p) {
  const LayoutChoice &l = p.layout;
  std::string s =
      "dp=" + std::to_string(l.dp) + ", tp=" + std::to_string(l.tp) +
      ", pp=" + std::to_string(l.pp) + ", zero=" + std::to_string(l.zeroStage) +
      ", " + recomputeText(p) + " recompute";
  if (l.sequenceParallel)
    s += ", sequence parallel";
  s += ", micro-batch size " + std::to_string(p.microBatchSize) + ", " +
       pipeline::getScheduleKindName(l.schedule);
  if (l.schedule == Schedule::Interleaved)
    s += " v=" + std::to_string(l.virtualStages);
  return s;
}

struct Mesh {
  int dp, tp, pp;
  double lowerBound = 0;
};

} // namespace

static Status searchDevices(const ModelStats &model, const ClusterSpec &spec,
                            const SearchOptions &o, SearchResult &result) {
  int devices = 0;
  if (Status st = checkOptions(model, spec, o, devices); !st.ok())
    return st;
  result = SearchResult();
  PlanContext &ctx = result.context;
  ctx.cluster = spec.name;
  ctx.devices = devices;
  ctx.devicesPerNode = int(spec.devicesPerNode);
  ctx.deviceMemoryBytes = spec.device.memoryGB * 1e9;
  ctx.dtype = o.dtype;
  ctx.globalBatch = model.batch;
  ctx.seq = model.seq;
  ctx.numBlocks = int(model.blocks.size());
  ctx.params = model.totalParams();
  const double limit = ctx.deviceMemoryBytes;
  const int numBlocks = int(model.blocks.size());
  Pricer pr(model, spec, o);

  // The space, in the order the pins leave it.
  std::vector<Mesh> meshes;
  for (int pp : divisorsOf(devices)) {
    if (pp > numBlocks || (o.pp && pp != o.pp))
      continue;
    for (int tp : divisorsOf(devices / pp)) {
      if ((o.tp && tp != o.tp) || !tpSplitsSomething(model, tp))
        continue;
      int dp = devices / pp / tp;
      if ((o.dp && dp != o.dp) || model.batch % dp)
        continue;
      meshes.push_back({dp, tp, pp});
    }
  }
  if (meshes.empty())
    return Status::error(
        "no mesh dp x tp x pp of " + std::to_string(devices) +
        " devices fits this model: dp must divide the batch (" +
        std::to_string(model.batch) + "), tp the heads and split sizes (" +
        std::to_string(model.tpDivisor) + "), pp at most the blocks (" +
        std::to_string(numBlocks) + "); relax a --mesh pin or --devices");
  struct Sched {
    Schedule kind;
    int v;
  };
  auto schedulesFor = [&](int pp) {
    std::vector<Sched> out;
    if (pp == 1) {
      out.push_back({o.schedule.value_or(Schedule::OneFOneB), 1});
      return out;
    }
    for (Schedule s : {Schedule::GPipe, Schedule::OneFOneB,
                       Schedule::Interleaved, Schedule::ZeroBubble}) {
      if (o.schedule && s != *o.schedule)
        continue;
      if (s != Schedule::Interleaved) {
        out.push_back({s, 1});
        continue;
      }
      for (int v = 2; v * pp <= numBlocks; ++v)
        if (numBlocks % (v * pp) == 0 && (!o.virtualStages || v == o.virtualStages))
          out.push_back({s, v});
    }
    return out;
  };
  // A candidate's layout; its micro-batches are set per size.
  auto layoutOf = [](const Mesh &mesh, int zero, bool sp, Sched s) {
    LayoutChoice l;
    l.dp = mesh.dp, l.tp = mesh.tp, l.pp = mesh.pp;
    l.zeroStage = zero;
    l.sequenceParallel = sp;
    l.schedule = s.kind;
    l.virtualStages = s.v;
    return l;
  };
  auto spsFor = [&](int tp) {
    if (o.sequenceParallel)
      return std::vector<bool>{*o.sequenceParallel};
    return model.sequenceParallelSplits(tp) ? std::vector<bool>{false, true}
                                            : std::vector<bool>{false};
  };
  // The replicated parts: every set containing those tp cannot split,
  // or the pinned one.
  std::optional<uint32_t> pinnedParts;
  if (o.tpReplicated) {
    uint32_t mask = 0;
    (void)tpPartMask(model, *o.tpReplicated, mask); // checked above
    pinnedParts = mask;
  }
  // Under sequence parallelism weftc keeps a whole part split along the
  // sequence, as it does a layer norm: a token-wise part (an MLP) then
  // all-reduces its weight gradients over tp once a step, which the model
  // prices; an attention gathers its keys, values and scores
  // (test/e2e/dist/tensor-parallel-replicated.test), which it does not,
  // so with sequence parallelism only token-wise parts may be whole.
  auto masksFor = [&](int tp, bool sp) {
    std::vector<uint32_t> out;
    if (tp == 1) {
      out.push_back(0);
      return out;
    }
    uint32_t forced = forcedTpReplicated(model, tp);
    uint32_t allowed = sp ? tokenWiseParts(model) : ~0u;
    if (pinnedParts) {
      if ((*pinnedParts & forced) == forced && !(*pinnedParts & ~allowed))
        out.push_back(*pinnedParts);
      return out;
    }
    uint32_t all = (1u << model.tpParts.size()) - 1;
    uint32_t matmuls = matmulParts(model);
    for (uint32_t m = 0; m <= all; ++m)
      if ((m & forced) == forced && !(m & ~allowed) &&
          (!matmuls || (m & matmuls) != matmuls))
        out.push_back(m);
    return out;
  };
  std::vector<Recompute> recs = {Recompute::None, Recompute::Selective,
                                 Recompute::Full};
  if (o.recompute)
    recs = {*o.recompute};
  auto zerosFor = [&](int dp) {
    if (o.zeroStage >= 0)
      return std::vector<int>{o.zeroStage};
    return dp == 1 ? std::vector<int>{0} : std::vector<int>{0, 1, 2, 3};
  };
  auto mbsFor = [&](int dp) {
    std::vector<int> out;
    for (int b : divisorsOf(model.batch / dp))
      if ((!o.microBatchSize || b == o.microBatchSize) &&
          (!o.oneMicroBatch || b == model.batch / dp))
        out.push_back(b);
    return out;
  };

  // Recomputation per block: the first k blocks of each rank recompute in
  // full, the rest keep everything. Each block more costs time and saves
  // memory, so of these choices the fewest blocks that fit is the fastest:
  // that one is the candidate (searched only when --recompute is not
  // pinned; full recomputation of every block is its own candidate). A
  // pinned count (`full:K`) is one fixed candidate.
  struct RecChoice {
    Recompute rec;
    bool perBlock;
    int blocks;
  };
  std::vector<RecChoice> choices;
  for (Recompute rec : recs)
    choices.push_back({rec, false, o.recompute ? o.recomputeBlocks : 0});
  if (!o.recompute)
    choices.push_back({Recompute::Full, true, 0});
  // Per block: bounded and cut as without recomputation.
  // `mbs` 0: every product at its fastest class, a bound on all sizes.
  auto ranksFor = [&](RecChoice c, TpLayout t, int pp, int v, int mbs) {
    return c.perBlock ? pr.ranks(t, Recompute::None, pp, v, 0, mbs)
                      : pr.ranks(t, c.rec, pp, v, c.blocks, mbs);
  };
  // Compute alone, B/dp samples through the slowest rank, bounds every
  // plan of a mesh from below; trying low bounds first finds fast plans
  // early, so later meshes are cut off sooner.
  for (Mesh &mesh : meshes) {
    mesh.lowerBound = INFINITY;
    for (bool sp : spsFor(mesh.tp))
      for (uint32_t parts : masksFor(mesh.tp, sp))
        for (RecChoice choice : choices)
          for (Sched s : schedulesFor(mesh.pp))
            if (const RankLayout *rl = ranksFor(
                    choice, TpLayout{mesh.tp, sp, parts}, mesh.pp, s.v, 0))
              mesh.lowerBound =
                  std::min(mesh.lowerBound,
                           double(model.batch / mesh.dp) * rl->maxCompute);
  }
  std::stable_sort(meshes.begin(), meshes.end(), [](const Mesh &a, const Mesh &b) {
    return a.lowerBound < b.lowerBound;
  });

  // The fastest feasible plan of each mesh; `cutoff` is the step time of
  // the (alternatives+1)-th best mesh so far: a candidate slower than
  // both it and its own mesh's best can be neither the answer nor a
  // reported alternative.
  const size_t keep = size_t(std::max(0, o.alternatives)) + 1;
  std::vector<Plan> meshBests;
  std::vector<double> topTimes;
  auto cutoff = [&]() {
    return topTimes.size() < keep ? INFINITY : topTimes[keep - 1];
  };
  // A lower bound computed in another order of additions may exceed the
  // plan's own time by an ulp; the margin keeps ties from being pruned.
  const double margin = 1 - 1e-9;
  // Prices the per-block candidate of `l`: false if no k fits (`plan` is
  // then the last tried, or untouched when the ranks hold one block each).
  auto pricePerBlock = [&](const RankLayout &none, const LayoutChoice &l,
                           uint32_t parts, int mbs, Plan &plan) {
    int most =
        *std::max_element(none.blocksPerRank.begin(), none.blocksPerRank.end());
    for (int k = 1; k < most; ++k) {
      const RankLayout *rl =
          pr.ranks(TpLayout{l.tp, l.sequenceParallel, parts}, Recompute::Full,
                   l.pp, l.virtualStages, k, mbs);
      price(pr, *rl, l, parts, mbs, Recompute::Full, plan, k);
      ++result.evaluated;
      if (plan.feasible)
        return true;
    }
    return false;
  };
  std::vector<const Mesh *> unfit;
  for (const Mesh &mesh : meshes) {
    if (o.prune && mesh.lowerBound * margin > cutoff())
      continue;
    Plan best;
    bool found = false;
    for (bool sp : spsFor(mesh.tp))
      for (uint32_t parts : masksFor(mesh.tp, sp))
        for (RecChoice choice : choices)
          for (Sched s : schedulesFor(mesh.pp)) {
            Recompute rec = choice.rec;
            const RankLayout *rl =
                ranksFor(choice, TpLayout{mesh.tp, sp, parts}, mesh.pp, s.v, 0);
            if (!rl)
              continue;
            double bound = double(model.batch / mesh.dp) * rl->maxCompute;
            double bar =
                std::min(found ? best.stepSeconds : INFINITY, cutoff());
            if (o.prune && bound * margin > bar)
              continue;
            for (int zero : zerosFor(mesh.dp)) {
              if (o.prune) {
                // Parameters, gradients and optimizer state do not depend
                // on the micro-batch: over the limit here, over for all.
                bool over = false;
                for (const RankGroup &g : rl->groups)
                  over |= staticBytes(pr, g.params, mesh.dp, zero) > limit;
                if (over)
                  continue;
              }
              LayoutChoice l = layoutOf(mesh, zero, sp, s);
              for (int mbs : mbsFor(mesh.dp)) {
                l.microBatches = int(model.batch / (int64_t(mesh.dp) * mbs));
                if (s.kind == Schedule::Interleaved && l.microBatches % mesh.pp)
                  continue;
                Plan plan;
                const RankLayout *at = ranksFor(
                    choice, TpLayout{mesh.tp, sp, parts}, mesh.pp, s.v, mbs);
                if (choice.perBlock) {
                  pricePerBlock(*at, l, parts, mbs, plan);
                } else {
                  price(pr, *at, l, parts, mbs, rec, plan, choice.blocks);
                  ++result.evaluated;
                }
                if (!plan.feasible) {
                  // Memory grows with the micro-batch size (activations are
                  // mbs x min(in flight, m), and mbs x m is fixed), so no
                  // larger one fits either (for every k, per block).
                  if (o.prune)
                    break;
                  continue;
                }
                if (!found || planBefore(plan, best)) {
                  best = plan;
                  found = true;
                }
              }
            }
          }
    if (!found) {
      unfit.push_back(&mesh);
      continue;
    }
    meshBests.push_back(best);
    topTimes.insert(std::upper_bound(topTimes.begin(), topTimes.end(),
                                     best.stepSeconds),
                    best.stepSeconds);
  }
  std::sort(meshBests.begin(), meshBests.end(), planBefore);

  // Meshes where nothing fits, by the least memory any choice needs:
  // memory grows with the micro-batch size, so the smallest valid one
  // holds the minimum (the brute force tries them all).
  auto leastMemory = [&](const Mesh &mesh, Plan &out) {
    bool found = false;
    auto better = [](const Plan &a, const Plan &b) {
      if (a.memory.total != b.memory.total)
        return a.memory.total < b.memory.total;
      return planBefore(a, b);
    };
    // Per block needs more memory than every block recomputed, and a part
    // replicated more than split: left out.
    for (bool sp : spsFor(mesh.tp)) {
      std::vector<uint32_t> masks = masksFor(mesh.tp, sp);
      if (masks.empty())
        continue;
      uint32_t parts = masks.front();
      for (RecChoice choice : choices)
        for (Sched s : schedulesFor(mesh.pp)) {
          if (choice.perBlock)
            continue;
          Recompute rec = choice.rec;
          const RankLayout *rl =
              ranksFor(choice, TpLayout{mesh.tp, sp, parts}, mesh.pp, s.v, 0);
          if (!rl)
            continue;
          for (int zero : zerosFor(mesh.dp)) {
            LayoutChoice l = layoutOf(mesh, zero, sp, s);
            double loopMin = -1;
            for (int mbs : mbsFor(mesh.dp)) {
              l.microBatches = int(model.batch / (int64_t(mesh.dp) * mbs));
              if (s.kind == Schedule::Interleaved && l.microBatches % mesh.pp)
                continue;
              Plan plan;
              price(pr,
                    *ranksFor(choice, TpLayout{mesh.tp, sp, parts}, mesh.pp,
                              s.v, mbs),
                    l, parts, mbs, rec, plan, choice.blocks);
              ++result.evaluated;
              if (!found || better(plan, out)) {
                out = plan;
                found = true;
              }
              // Memory never shrinks as the micro-batch grows: past the
              // first size that needs more than the smallest, none can be
              // the least.
              if (loopMin < 0)
                loopMin = plan.memory.total;
              else if (o.prune && plan.memory.total > loopMin)
                break;
            }
          }
        }
    }
    return found;
  };
  std::vector<Plan> closest;
  if (meshBests.size() < keep) {
    for (const Mesh *mesh : unfit) {
      Plan p;
      if (leastMemory(*mesh, p))
        closest.push_back(p);
    }
    std::sort(closest.begin(), closest.end(), [](const Plan &a, const Plan &b) {
      if (a.memory.total != b.memory.total)
        return a.memory.total < b.memory.total;
      return planBefore(a, b);
    });
  }

  auto explain = [&](Plan &p, const Plan &winner) {
    char buf[64];
    if (!p.feasible) {
      p.why = "over memory by " + gb(p.memory.total - limit);
    } else {
      std::snprintf(buf, sizeof buf, "slower by %.1f %%",
                    100.0 * (p.stepSeconds / winner.stepSeconds - 1));
      p.why = buf;
    }
  };
  // The returned plans' parts by name (priced plans carry only the mask).
  auto nameResult = [&] {
    nameTpParts(model, result.best);
    for (Plan &p : result.alternatives)
      nameTpParts(model, p);
  };
  if (!meshBests.empty()) {
    result.best = meshBests.front();
    for (size_t i = 1; i < meshBests.size() && result.alternatives.size() + 1 < keep; ++i)
      result.alternatives.push_back(meshBests[i]);
    for (size_t i = 0; i < closest.size() && result.alternatives.size() + 1 < keep; ++i)
      result.alternatives.push_back(closest[i]);
    for (Plan &p : result.alternatives)
      explain(p, result.best);
    nameResult();
    return Status::success();
  }
  if (closest.empty())
    return Status::error("no candidate layout exists for these pins; relax "
                         "--schedule, --micro-batch-size or --mesh");
  result.best = closest.front();
  for (size_t i = 1; i < closest.size() && i < keep; ++i) {
    result.alternatives.push_back(closest[i]);
    explain(result.alternatives.back(), result.best);
  }
  nameResult();
  const Plan &c = result.best;
  bool pinned = o.dp || o.tp || o.pp || o.microBatchSize || o.oneMicroBatch ||
                o.zeroStage >= 0 || o.schedule || o.recompute ||
                o.sequenceParallel;
  return Status::error(
      std::string(pinned ? "with the pinned choices, " : "") + "needs " +
      gb(c.memory.total) + " per device at best (" + describeChoice(c) +
      "; params " + gb(c.memory.params) + ", grads " + gb(c.memory.grads) +
      ", optimizer " + gb(c.memory.optimizerState) + ", activations " +
      gb(c.memory.activations) + "); the device has " + gb(limit) +
      (pinned ? "; relax a pin, add devices or use a larger device"
              : "; add devices or use a larger device"));
}

Status searchPlan(const ModelStats &model, const ClusterSpec &spec,
                  const SearchOptions &o, SearchResult &result) {
  Status st = searchDevices(model, spec, o, result);
  if (!st.ok() || result.context.devices <= 1)
    return st;
  // A model too small to gain from its devices (each collective costs more
  // than the work it divides) is faster on one: the plan says so. The
  // layout pins do not apply to one device; the rest do.
  SearchOptions one = o;
  one.devices = 1;
  one.dp = one.tp = one.pp = 0;
  one.zeroStage = -1;
  one.schedule.reset();
  one.virtualStages = 0;
  one.sequenceParallel.reset();
  one.tpReplicated.reset();
  one.alternatives = 0;
  SearchResult single;
  if (searchDevices(model, spec, one, single).ok() && single.best.feasible &&
      single.best.stepSeconds < result.best.stepSeconds)
    result.oneDeviceStepSeconds = single.best.stepSeconds;
  return st;
}

} // namespace planner
} // namespace weft
