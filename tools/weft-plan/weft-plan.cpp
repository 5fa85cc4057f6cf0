//===- weft-plan.cpp - Search a training layout; diff plans ---------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
//   weft-plan search MODEL.mlir --cluster FILE [options]
//   weft-plan diff A.json B.json
//
// Maps flags onto planner::SearchOptions and prints what the library
// returns; every decision is in lib/Planner.
//
//===----------------------------------------------------------------------===//

#include "weft/Planner/PlanFormat.h"
#include "weft/Planner/Search.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <map>
#include <optional>
#include <string>

using namespace weft::planner;

namespace {

const char *const kUsage =
    "usage: weft-plan search MODEL.mlir --cluster FILE [options]\n"
    "       weft-plan diff A.json B.json\n"
    "       weft-plan stats MODEL.mlir\n"
    "\n"
    "search: the fastest layout of MODEL's training step that fits the\n"
    "cluster's device memory (MODEL: weft dialect, from weft-modelgen or\n"
    "weftc model.onnx --emit=weft).\n"
    "  --cluster FILE            cluster spec (YAML, see weft-cluster)\n"
    "  --devices N               plan for N devices (default: all of the "
    "spec)\n"
    "  --mesh dp=A,tp=B,pp=C     pin degrees (any subset); the rest is "
    "searched\n"
    "  --zero K                  pin the ZeRO stage (0-3)\n"
    "  --schedule S              pin the schedule: gpipe, 1f1b, interleaved,\n"
    "                            zero-bubble\n"
    "  --virtual-stages V        pin interleaved's stages per rank (>= 2)\n"
    "  --micro-batch-size B      pin the micro-batch size\n"
    "  --recompute R             pin recomputation: none, selective, full,\n"
    "                            full:K (the first K blocks of each rank)\n"
    "  --sequence-parallel on|off  pin sequence parallelism\n"
    "  --tp-replicated P,...     pin the tensor-parallel parts kept whole on\n"
    "                            every tp rank (names as stats lists them);\n"
    "                            none: every part split, as Megatron-LM does\n"
    "  --dtype D                 training dtype: bf16 (default), fp16, fp32\n"
    "  --dp-overlap on|off       the data-parallel gradient reduction under\n"
    "                            the backward (on, Weft's runtime) or after\n"
    "                            it (off: Megatron-LM 2021's local DDP)\n"
    "  --fp32-grad-reduce        reduce gradients in fp32 (Megatron-LM in\n"
    "                            bf16); default: in the gradient dtype\n"
    "  --memory-bandwidth GBps   device memory bandwidth for the roofline\n"
    "                            (default: compute peak only)\n"
    "  --executable-memory       count what a Weft executable also holds\n"
    "                            (updated copies, weight image, loss and\n"
    "                            bucket buffers): its measured peak RSS\n"
    "  --alternatives K          runner-up meshes to report (default 5)\n"
    "  --emit plan|plan-json     the table (default) or the plan file\n"
    "  --brute-force             evaluate every candidate (no pruning)\n"
    "  -o FILE                   write there instead of stdout\n"
    "diff: what differs between two plan files and what it costs.\n"
    "stats: what the search reads off MODEL, per sample: each layer's\n"
    "parameters, forward FLOPs, saved activations and tp all-reduces,\n"
    "and the tensor-parallel parts the search may keep replicated.\n"
    "On stderr: the candidates evaluated and the search time.\n";

int fail(const std::string &message) {
  llvm::errs() << "weft-plan: error: " << message << "\n";
  return 1;
}

int usageError(const std::string &message) {
  llvm::errs() << "weft-plan: error: " << message << "\n" << kUsage;
  return 1;
}

bool readFile(const std::string &path, std::string &text, std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    error = path + ": cannot read: " + buffer.getError().message();
    return false;
  }
  text = (*buffer)->getBuffer().str();
  return true;
}

bool writeOutput(const std::string &path, const std::string &text,
                 std::string &error) {
  if (path == "-") {
    llvm::outs() << text;
    return true;
  }
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    error = path + ": cannot write: " + ec.message();
    return false;
  }
  os << text;
  return true;
}

std::optional<std::string> positive(const std::string &flag,
                                    const std::string &value, int &out,
                                    int min = 1) {
  int n = 0;
  if (llvm::StringRef(value).getAsInteger(10, n) || n < min)
    return flag + " must be an integer of at least " + std::to_string(min) +
           ", got '" + value + "'";
  out = n;
  return std::nullopt;
}

std::optional<std::string> parseMesh(const std::string &value,
                                     SearchOptions &o) {
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(value).split(parts, ',');
  for (llvm::StringRef part : parts) {
    auto [key, num] = part.split('=');
    int *slot = key == "dp" ? &o.dp : key == "tp" ? &o.tp : key == "pp" ? &o.pp
                                                                        : nullptr;
    if (!slot || num.empty())
      return "--mesh takes dp=A,tp=B,pp=C (any of them), got '" + value + "'";
    if (auto err = positive("--mesh " + key.str(), num.str(), *slot))
      return err;
  }
  return std::nullopt;
}

int runSearch(int argc, char **argv) {
  SearchOptions o;
  std::string model, cluster, emit = "plan", output = "-";
  static const char *const withValue[] = {"--cluster",
                                          "--devices",
                                          "--mesh",
                                          "--zero",
                                          "--schedule",
                                          "--virtual-stages",
                                          "--micro-batch-size",
                                          "--recompute",
                                          "--sequence-parallel",
                                          "--dtype",
                                          "--memory-bandwidth",
                                          "--alternatives",
                                          "--emit",
                                          "-o",
                                          "--dp-overlap",
                                          "--tp-replicated"};
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i], value;
    if (arg == "--help" || arg == "-h") {
      llvm::outs() << kUsage;
      return 0;
    }
    if (arg == "--brute-force") {
      o.prune = false;
      continue;
    }
    if (arg == "--executable-memory") {
      o.executableMemory = true;
      continue;
    }
    if (arg == "--fp32-grad-reduce") {
      o.fp32GradReduce = true;
      continue;
    }
    if (arg.empty() || arg[0] != '-' || arg == "-") {
      if (!model.empty())
        return usageError("two models given ('" + model + "' and '" + arg +
                          "'); give one");
      model = arg;
      continue;
    }
    bool hasValue = false;
    if (size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      hasValue = true;
    }
    bool known = false;
    for (const char *f : withValue)
      known |= arg == f;
    if (!known)
      return usageError("unknown flag '" + arg + "' for weft-plan search");
    if (!hasValue) {
      if (i + 1 >= argc)
        return usageError("flag '" + arg + "' needs a value");
      value = argv[++i];
    }
    std::optional<std::string> err;
    if (arg == "--cluster") {
      cluster = value;
    } else if (arg == "--devices") {
      err = positive(arg, value, o.devices);
    } else if (arg == "--mesh") {
      err = parseMesh(value, o);
    } else if (arg == "--zero") {
      err = positive(arg, value, o.zeroStage, 0);
      if (!err && o.zeroStage > 3)
        err = "--zero must be 0, 1, 2 or 3, got '" + value + "'";
    } else if (arg == "--schedule") {
      Schedule s;
      if (Status st = weft::pipeline::parseScheduleKind(value, s); !st.ok())
        err = "--schedule: " + st.message;
      else
        o.schedule = s;
    } else if (arg == "--virtual-stages") {
      err = positive(arg, value, o.virtualStages, 2);
    } else if (arg == "--micro-batch-size") {
      err = positive(arg, value, o.microBatchSize);
    } else if (arg == "--recompute") {
      Recompute r;
      if (Status st = parseRecompute(value, r, o.recomputeBlocks); !st.ok())
        err = "--recompute: " + st.message;
      else
        o.recompute = r;
    } else if (arg == "--sequence-parallel") {
      if (value != "on" && value != "off")
        err = "--sequence-parallel takes on or off, got '" + value + "'";
      else
        o.sequenceParallel = value == "on";
    } else if (arg == "--tp-replicated") {
      std::vector<std::string> names;
      if (value != "none") {
        // Commas separate parts, except inside a name's braces
        // ("layers.*.{w1,w2,w3}").
        std::string piece;
        int depth = 0;
        for (char c : value + ",") {
          depth += c == '{' ? 1 : c == '}' ? -1 : 0;
          if (c != ',' || depth > 0) {
            piece += c;
            continue;
          }
          if (!llvm::StringRef(piece).trim().empty())
            names.push_back(llvm::StringRef(piece).trim().str());
          piece.clear();
        }
        if (names.empty())
          err = "--tp-replicated takes part names separated by commas, or "
                "none";
      }
      o.tpReplicated = names;
    } else if (arg == "--dp-overlap") {
      if (value != "on" && value != "off")
        err = "--dp-overlap takes on or off, got '" + value + "'";
      else
        o.dpOverlap = value == "on";
    } else if (arg == "--dtype") {
      o.dtype = value;
    } else if (arg == "--memory-bandwidth") {
      double bw = 0;
      if (llvm::StringRef(value).getAsDouble(bw) || !(bw > 0))
        err = "--memory-bandwidth must be a positive number of GB/s (e.g. "
              "2039 for an A100 80GB), got '" + value + "'";
      o.memoryBandwidthGBps = bw;
    } else if (arg == "--alternatives") {
      err = positive(arg, value, o.alternatives, 0);
    } else if (arg == "--emit") {
      if (value != "plan" && value != "plan-json")
        err = "--emit takes plan or plan-json, got '" + value + "'";
      emit = value;
    } else if (arg == "-o") {
      output = value;
    }
    if (err)
      return usageError(*err);
  }
  if (model.empty())
    return usageError("no model given; weft-plan search MODEL.mlir --cluster "
                      "FILE");
  if (cluster.empty())
    return usageError("--cluster FILE is required (a cluster spec such as "
                      "examples/clusters/dgx-a100-80gb.yaml)");

  ClusterSpec spec;
  if (Status st = loadClusterSpec(cluster, spec); !st.ok())
    return fail(st.message);
  ModelStats stats;
  if (Status st = loadModelStats(model, stats, partsCheckTp(spec, o)); !st.ok())
    return fail(st.message);

  auto start = std::chrono::steady_clock::now();
  SearchResult result;
  Status st = searchPlan(stats, spec, o, result);
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  if (result.evaluated)
    llvm::errs() << "weft-plan: " << result.evaluated << " candidates in "
                 << llvm::format("%.2f", seconds) << " s\n";
  if (!st.ok())
    return fail(st.message);
  std::string text = emit == "plan" ? formatPlanTable(result)
                                    : formatPlanJSON(result);
  std::string error;
  if (!writeOutput(output, text, error))
    return fail(error);
  return 0;
}

int runDiff(int argc, char **argv) {
  std::vector<std::string> files;
  std::string output = "-";
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      llvm::outs() << kUsage;
      return 0;
    }
    if (arg == "-o" && i + 1 < argc) {
      output = argv[++i];
      continue;
    }
    if (!arg.empty() && arg[0] == '-')
      return usageError("unknown flag '" + arg + "' for weft-plan diff");
    files.push_back(arg);
  }
  if (files.size() != 2)
    return usageError("diff takes two plan files (weft-plan search "
                      "--emit=plan-json), got " +
                      std::to_string(files.size()));
  SearchResult plans[2];
  for (int k = 0; k < 2; ++k) {
    std::string text, error;
    if (!readFile(files[k], text, error))
      return fail(error);
    if (Status st = parsePlanJSON(text, files[k], plans[k]); !st.ok())
      return fail(st.message);
  }
  std::string error;
  if (!writeOutput(output,
                   formatPlanDiff(plans[0], files[0], plans[1], files[1]),
                   error))
    return fail(error);
  return 0;
}

int runStats(int argc, char **argv) {
  if (argc != 3 || argv[2][0] == '-')
    return usageError("stats takes one model: weft-plan stats MODEL.mlir");
  ModelStats stats;
  if (Status st = loadModelStats(argv[2], stats); !st.ok())
    return fail(st.message);
  llvm::outs() << "batch " << stats.batch << ", seq " << stats.seq << ", "
               << stats.blocks.size() << " blocks of " << stats.classes.size()
               << " distinct structure(s), tp divides "
               << stats.tpDivisor << "\n";
  // The layers pipeline cuts fall between, so a person can map a plan's
  // blocks_per_stage onto the model (the first and last few of a deep one).
  if (!stats.blockNames.empty()) {
    const size_t n = stats.blockNames.size(), shown = 12;
    llvm::outs() << "blocks:";
    for (size_t b = 0; b < n; ++b) {
      if (n > shown && b == shown / 2) {
        llvm::outs() << " | ... (" << n - shown << " more)";
        b = n - shown / 2;
      }
      llvm::outs() << (b ? " | " : " ") << stats.blockNames[b];
    }
    llvm::outs() << "\n";
  }
  llvm::outs() << "params " << llvm::format("%.0f", stats.totalParams())
               << ", forward FLOPs per sample "
               << llvm::format("%.6g", stats.forwardFlopsPerSample()) << "\n";
  auto print = [&](const std::string &name, const LayerStats &l) {
    llvm::outs() << name << ": params " << llvm::format("%.0f", l.params)
                 << ", ops " << l.ops.size() << ", forward FLOPs "
                 << llvm::format("%.6g", l.forwardFlops()) << ", saved "
                 << llvm::format("%.6g", l.saved.split) << " split + "
                 << llvm::format("%.6g", l.saved.replicated)
                 << " replicated (attention "
                 << llvm::format("%.6g", l.attentionSaved.total())
                 << "), input " << llvm::format("%.6g", l.inputElements)
                 << ", tp all-reduces";
    for (double e : l.tpAllReduceElements)
      llvm::outs() << " " << llvm::format("%.6g", e);
    llvm::outs() << "\n";
  };
  print("prologue", stats.prologue);
  for (size_t c = 0; c < stats.classes.size(); ++c) {
    int count = 0;
    for (int b : stats.blocks)
      count += b == int(c);
    print("block class " + std::to_string(c) + " (x" + std::to_string(count) +
              ")",
          stats.classes[c]);
  }
  print("epilogue", stats.epilogue);
  // The regions the search may keep whole on every tp rank: elements in
  // one block of their class (or the prologue and epilogue), per sample.
  for (size_t k = 0; k < stats.tpParts.size(); ++k) {
    const TpPart &part = stats.tpParts[k];
    double elements = 0, saved = 0;
    auto add = [&](const LayerStats &l) {
      for (const TpPartShare &share : l.tpShares)
        if (share.part == int(k)) {
          elements += share.params;
          saved += share.saved;
        }
    };
    add(stats.prologue);
    for (const LayerStats &c : stats.classes)
      add(c);
    add(stats.epilogue);
    llvm::outs() << "tp part " << part.name << ": " << part.params.size()
                 << " params of " << llvm::format("%.0f", elements)
                 << " elements, saved " << llvm::format("%.6g", saved)
                 << " split, tp divides " << part.divisor
                 << (part.gatherOnly ? ", gathers only" : "")
                 << (part.tokenWise ? ", token-wise" : "") << "\n";
  }
  if (stats.requiredTpDivisor)
    llvm::outs() << "tp must divide " << stats.requiredTpDivisor << "\n";
  // Per layer, its BatchNorms (their statistics are all-reduced over dp)
  // and the matrix products whose GEMM shape class the search prices
  // (device.gemm_efficiency): a product with a weight per sample (a
  // micro-batch stacks its samples into one), one of activations each.
  auto details = [&](const std::string &name, const LayerStats &l) {
    if (!l.batchNormChannels.empty()) {
      llvm::outs() << "batch norms in " << name
                   << " (statistics all-reduced over dp), channels";
      for (double c : l.batchNormChannels)
        llvm::outs() << " " << llvm::format("%.0f", c);
      llvm::outs() << "\n";
    }
    if (llvm::none_of(l.ops,
                      [](const OpCost &op) { return op.productFlops > 0; }))
      return;
    auto products = [&](bool foldsBatch) {
      bool any = false;
      for (const OpCost &op : l.ops)
        if (op.productFlops > 0 && op.foldsBatch == foldsBatch) {
          llvm::outs() << " " << llvm::format("%.6g", op.productFlops);
          any = true;
        }
      if (!any)
        llvm::outs() << " -";
    };
    llvm::outs() << "products in " << name << ": with a weight, FLOPs a sample";
    products(true);
    llvm::outs() << "; of activations, FLOPs each";
    products(false);
    llvm::outs() << "\n";
  };
  details("prologue", stats.prologue);
  for (size_t c = 0; c < stats.classes.size(); ++c)
    details("block class " + std::to_string(c), stats.classes[c]);
  details("epilogue", stats.epilogue);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2)
    return usageError("no command; give search, diff or stats");
  std::string command = argv[1];
  if (command == "--help" || command == "-h") {
    llvm::outs() << kUsage;
    return 0;
  }
  if (command == "search")
    return runSearch(argc, argv);
  if (command == "diff")
    return runDiff(argc, argv);
  if (command == "stats")
    return runStats(argc, argv);
  return usageError("unknown command '" + command + "'; give search, diff or stats");
}
