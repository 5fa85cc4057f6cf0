//===- weft-modelgen.cpp - Write weightless GPT and Llama models ----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
//   weft-modelgen gpt|llama --layers L --hidden H --heads A [--kv-heads K]
//                 [--ffn F] --seq S --vocab V --batch B [-o m.mlir]
//
// Builds @forward in the weft dialect directly with the op builders, in the
// same conventions as an imported model (parameters are arguments carrying
// `weft.param`, the token ids are `weft.input = "input"`, logits [B,S,V] are
// the result) but with no `weft.weights` attribute: nothing is materialized,
// so a 175B or 1T configuration is a few hundred kilobytes of IR and the
// planner can work on it on a laptop. `weftc m.mlir --emit=train` builds the
// training step of it like of any imported model.
//
// On stderr: the exact parameter count (the sum of the parameter shapes) and
// the FLOPs of one forward pass counted from the matmuls of the built IR.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/Builders.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include "llvm/Support/Format.h"

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

using namespace mlir;

namespace {

const char *const kUsage =
    "usage: weft-modelgen gpt|llama --layers L --hidden H --heads A\n"
    "                     [--kv-heads K] [--ffn F] --seq S --vocab V\n"
    "                     --batch B [-o m.mlir]\n"
    "  Writes @forward of a decoder-only transformer in the weft dialect,\n"
    "  without weights. B is the global batch. --ffn defaults to 4H (gpt)\n"
    "  or 8H/3 rounded up to a multiple of 256 (llama); --kv-heads (llama\n"
    "  only) defaults to --heads. Prints the parameter count and forward\n"
    "  FLOPs on stderr. Parameters are f32 (master weights); train in bf16\n"
    "  with weftc --precision=bf16. See docs/planner.md.\n";

struct Config {
  std::string model;
  int64_t layers = 0, hidden = 0, heads = 0, kvHeads = 0, ffn = 0, seq = 0,
          vocab = 0, batch = 0;
  std::string output = "-";
};

/// Prints `message` with the usage and returns the exit status for it.
int fail(const llvm::Twine &message) {
  llvm::errs() << "weft-modelgen: error: " << message << "\n" << kUsage;
  return 1;
}

/// Parses argv into `config`; on a bad command line returns the error text.
std::optional<std::string> parseArgs(int argc, char **argv, Config &config) {
  std::map<std::string, int64_t *> ints = {
      {"--layers", &config.layers}, {"--hidden", &config.hidden},
      {"--heads", &config.heads},   {"--kv-heads", &config.kvHeads},
      {"--ffn", &config.ffn},       {"--seq", &config.seq},
      {"--vocab", &config.vocab},   {"--batch", &config.batch}};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool hasValue = false;
    if (size_t eq = arg.find('=');
        arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      hasValue = true;
    }
    if (arg.empty() || arg[0] != '-') {
      if (!config.model.empty())
        return "two models given ('" + config.model + "' and '" + arg +
               "'); give one of gpt, llama";
      config.model = arg;
      continue;
    }
    if (arg == "--dtype")
      return "--dtype is not taken: the model keeps f32 parameters because "
             "training needs f32 master weights; for bf16 compute give "
             "weftc --precision=bf16";
    if (!ints.count(arg) && arg != "-o")
      return "unknown flag '" + arg + "'";
    if (!hasValue) {
      if (i + 1 >= argc)
        return "flag '" + arg + "' needs a value";
      value = argv[++i];
    }
    if (arg == "-o") {
      config.output = value;
    } else {
      int64_t n = 0;
      if (llvm::StringRef(value).getAsInteger(10, n) || n <= 0)
        return arg + " must be a positive integer, got '" + value + "'";
      *ints[arg] = n;
    }
  }
  if (config.model.empty())
    return "no model given; give one of gpt, llama";
  if (config.model != "gpt" && config.model != "llama")
    return "unknown model '" + config.model + "'; give one of gpt, llama";
  for (const char *flag :
       {"--layers", "--hidden", "--heads", "--seq", "--vocab", "--batch"})
    if (*ints[flag] == 0)
      return std::string(flag) + " is required";
  if (config.hidden % config.heads)
    return "--heads " + std::to_string(config.heads) +
           " must divide --hidden " + std::to_string(config.hidden) +
           " (the head size is hidden/heads)";
  if (config.model == "gpt" && config.kvHeads && config.kvHeads != config.heads)
    return "--kv-heads applies to llama only; GPT has one k/v head per "
           "query head (drop the flag)";
  if (!config.kvHeads)
    config.kvHeads = config.heads;
  if (config.heads % config.kvHeads)
    return "--kv-heads " + std::to_string(config.kvHeads) +
           " must divide --heads " + std::to_string(config.heads) +
           " (each k/v head serves heads/kv-heads query heads)";
  if (config.model == "llama" && (config.hidden / config.heads) % 2)
    return "the head size --hidden/--heads = " +
           std::to_string(config.hidden / config.heads) +
           " must be even for rotary embeddings; change --hidden or --heads";
  if (!config.ffn) {
    if (config.model == "gpt") {
      config.ffn = 4 * config.hidden;
    } else {
      // Meta's llama: int(2 * 4H / 3) rounded up to a multiple of 256.
      int64_t f = 8 * config.hidden / 3;
      config.ffn = (f + 255) / 256 * 256;
    }
  }
  return std::nullopt;
}

/// Builds @forward: collects parameters as arguments while the body is
/// emitted, then fixes the function type once all are known.
class ModelBuilder {
public:
  ModelBuilder(MLIRContext &ctx, const Config &config)
      : config(config), b(&ctx), loc(b.getUnknownLoc()), elt(b.getF32Type()) {
    module = ModuleOp::create(loc);
    b.setInsertionPointToEnd(module.getBody());
    func = func::FuncOp::create(b, loc, "forward", b.getFunctionType({}, {}));
    entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);
  }

  ModuleOp build() {
    Value logits = config.model == "gpt" ? buildGpt() : buildLlama();
    func::ReturnOp::create(b, loc, logits);
    // The token ids go last, as the ONNX importer orders them; the body
    // needed them before every parameter was known, so move them now.
    BlockArgument last = entry->addArgument(tokenArg.getType(), loc);
    tokenArg.replaceAllUsesWith(last);
    entry->eraseArgument(tokenArg.getArgNumber());
    argNames.push_back({last, "weft.input", "input"});
    SmallVector<Type> inputs(entry->getArgumentTypes());
    func.setFunctionType(b.getFunctionType(inputs, {logits.getType()}));
    // Argument attributes are sized by the function type, so they go on
    // only now that it lists every argument.
    for (auto &[arg, kind, name] : argNames)
      func.setArgAttr(arg.getArgNumber(), kind, b.getStringAttr(name));
    return module;
  }

private:
  RankedTensorType tensor(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, elt);
  }

  /// A new `weft.param` argument named as PyTorch's state_dict names it.
  Value param(const std::string &name, ArrayRef<int64_t> shape) {
    BlockArgument arg = entry->addArgument(tensor(shape), loc);
    argNames.push_back({arg, "weft.param", name});
    return arg;
  }

  /// The token ids [B,S] i64 (moved behind the parameters by build()).
  Value tokens() {
    tokenArg = entry->addArgument(
        RankedTensorType::get({config.batch, config.seq}, b.getI64Type()), loc);
    return tokenArg;
  }

  Value scalar(double v) { return weft::grad::scalar(b, loc, elt, v); }

  /// `x @ w^T (+ bias)` with `w` in nn.Linear's [out, in] layout.
  Value linear(Value x, Value w, Value bias = {}) {
    Value y = weft::MatMulOp::create(b, loc, x, w, /*transpose_lhs=*/false,
                                     /*transpose_rhs=*/true);
    return bias ? weft::AddOp::create(b, loc, y, bias).getResult() : y;
  }

  Value reshape(Value x, ArrayRef<int64_t> shape) {
    return weft::ReshapeOp::create(b, loc, tensor(shape), x);
  }

  Value transpose(Value x, ArrayRef<int64_t> perm) {
    return weft::TransposeOp::create(b, loc, x, perm);
  }

  /// The last-axis slice [lo, hi) of a rank-N tensor.
  Value sliceLast(Value x, int64_t lo, int64_t hi) {
    auto shape = cast<RankedTensorType>(x.getType()).getShape();
    SmallVector<int64_t> starts(shape.size(), 0), limits(shape),
        strides(shape.size(), 1);
    starts.back() = lo;
    limits.back() = hi;
    return weft::SliceOp::create(b, loc, x, starts, limits, strides);
  }

  /// [B,S,n*D] -> [B,n,S,D].
  Value splitHeads(Value x, int64_t n) {
    int64_t d = config.hidden / config.heads;
    return transpose(reshape(x, {config.batch, config.seq, n, d}),
                     {0, 2, 1, 3});
  }

  /// softmax(mask(q k^T / sqrt(D))) v merged back to [B,S,H].
  Value attend(Value q, Value k, Value v) {
    int64_t d = config.hidden / config.heads;
    Value scores = weft::MatMulOp::create(b, loc, q, k, false, true);
    scores = weft::MulOp::create(b, loc, scores, scalar(1.0 / std::sqrt(d)));
    scores = weft::CausalMaskOp::create(
        b, loc, scores, b.getI64IntegerAttr(0),
        b.getF64FloatAttr(-std::numeric_limits<double>::infinity()));
    Value probs = weft::SoftmaxOp::create(b, loc, scores, uint64_t(3));
    Value out = weft::MatMulOp::create(b, loc, probs, v);
    return reshape(transpose(out, {0, 2, 1, 3}),
                   {config.batch, config.seq, config.hidden});
  }

  Value layerNorm(Value x, const std::string &name) {
    Value w = param(name + ".weight", {config.hidden});
    Value bias = param(name + ".bias", {config.hidden}); // after the weight
    return weft::LayerNormOp::create(b, loc, x, w, bias, b.getI64IntegerAttr(2),
                                     b.getF64FloatAttr(1e-5));
  }

  Value buildGpt() {
    int64_t h = config.hidden, f = config.ffn, v = config.vocab;
    Value wte = param("wte.weight", {v, h});
    // Positions are 0..S-1 every step, so gathering them from wpe is wpe
    // itself: add the table, broadcast over the batch.
    Value wpe = param("wpe.weight", {config.seq, h});
    Value ids = tokens();
    Value x = weft::GatherOp::create(b, loc, wte, ids, uint64_t(0));
    x = weft::AddOp::create(b, loc, x, wpe);
    for (int64_t l = 0; l < config.layers; ++l) {
      std::string p = "h." + std::to_string(l) + ".";
      // Parameters are made one statement at a time: the order of function
      // arguments is unspecified in C++, and it fixes the argument order.
      Value a = layerNorm(x, p + "ln_1");
      Value qkvW = param(p + "attn.c_attn.weight", {3 * h, h});
      Value qkvB = param(p + "attn.c_attn.bias", {3 * h});
      Value qkv = linear(a, qkvW, qkvB);
      Value q = splitHeads(sliceLast(qkv, 0, h), config.heads);
      Value k = splitHeads(sliceLast(qkv, h, 2 * h), config.heads);
      Value vv = splitHeads(sliceLast(qkv, 2 * h, 3 * h), config.heads);
      Value projW = param(p + "attn.c_proj.weight", {h, h});
      Value projB = param(p + "attn.c_proj.bias", {h});
      x = weft::AddOp::create(b, loc, x,
                              linear(attend(q, k, vv), projW, projB));
      Value m = layerNorm(x, p + "ln_2");
      Value fcW = param(p + "mlp.c_fc.weight", {f, h});
      Value fcB = param(p + "mlp.c_fc.bias", {f});
      m = linear(m, fcW, fcB);
      // GPT-2's gelu_new is the tanh approximation.
      m = weft::GeluOp::create(b, loc, m, weft::GeluApproximation::Tanh);
      Value outW = param(p + "mlp.c_proj.weight", {h, f});
      Value outB = param(p + "mlp.c_proj.bias", {h});
      m = linear(m, outW, outB);
      x = weft::AddOp::create(b, loc, x, m);
    }
    x = layerNorm(x, "ln_f");
    // GPT-2 ties the output head to the token embedding.
    return linear(x, wte);
  }

  /// cos and sin of the rotary angles [S,D], computed in the graph from
  /// the S positions and D/2 frequencies so the IR stays small at any S.
  std::pair<Value, Value> rotaryTables() {
    int64_t d = config.hidden / config.heads, s = config.seq;
    std::vector<float> pos(s), freq(d / 2);
    for (int64_t i = 0; i < s; ++i)
      pos[i] = float(i);
    for (int64_t i = 0; i < d / 2; ++i)
      freq[i] = float(std::pow(10000.0, -2.0 * i / d));
    auto f32 = b.getF32Type();
    auto posType = RankedTensorType::get({s, 1}, f32);
    auto freqType = RankedTensorType::get({1, d / 2}, f32);
    Value p = weft::ConstantOp::create(
        b, loc, DenseElementsAttr::get(posType, ArrayRef<float>(pos)));
    Value fr = weft::ConstantOp::create(
        b, loc, DenseElementsAttr::get(freqType, ArrayRef<float>(freq)));
    Value angles = weft::MulOp::create(b, loc, p, fr);
    // HF's rotate_half layout: the D/2 angles repeated for both halves.
    angles =
        weft::ConcatOp::create(b, loc, ValueRange{angles, angles}, uint64_t(1));
    return {weft::CosOp::create(b, loc, angles),
            weft::SinOp::create(b, loc, angles)};
  }

  /// x * cos + rotate_half(x) * sin on [B,n,S,D].
  Value rotary(Value x, Value cos, Value sin) {
    int64_t d = config.hidden / config.heads;
    Value x1 = sliceLast(x, 0, d / 2), x2 = sliceLast(x, d / 2, d);
    Value rot = weft::ConcatOp::create(
        b, loc, ValueRange{weft::NegOp::create(b, loc, x2), x1}, uint64_t(3));
    return weft::AddOp::create(b, loc, weft::MulOp::create(b, loc, x, cos),
                               weft::MulOp::create(b, loc, rot, sin));
  }

  /// [B,K,S,D] -> [B,A,S,D], each k/v head serving A/K consecutive query
  /// heads (HF's repeat_kv).
  Value repeatKv(Value x) {
    int64_t a = config.heads, k = config.kvHeads;
    if (a == k)
      return x;
    int64_t d = config.hidden / a, bs = config.batch, s = config.seq;
    x = reshape(x, {bs, k, 1, s, d});
    x = weft::BroadcastOp::create(b, loc, tensor({bs, k, a / k, s, d}), x);
    return reshape(x, {bs, a, s, d});
  }

  Value buildLlama() {
    int64_t h = config.hidden, f = config.ffn, v = config.vocab;
    int64_t kvDim = config.kvHeads * (h / config.heads);
    Value emb = param("tok_embeddings.weight", {v, h});
    std::vector<std::array<Value, 9>> layers;
    // Parameters in Meta's state_dict order: all of a layer's weights
    // before its norms.
    for (int64_t l = 0; l < config.layers; ++l) {
      std::string p = "layers." + std::to_string(l) + ".";
      layers.push_back({param(p + "attention.wq.weight", {h, h}),
                        param(p + "attention.wk.weight", {kvDim, h}),
                        param(p + "attention.wv.weight", {kvDim, h}),
                        param(p + "attention.wo.weight", {h, h}),
                        param(p + "feed_forward.w1.weight", {f, h}),
                        param(p + "feed_forward.w2.weight", {h, f}),
                        param(p + "feed_forward.w3.weight", {f, h}),
                        param(p + "attention_norm.weight", {h}),
                        param(p + "ffn_norm.weight", {h})});
    }
    Value normW = param("norm.weight", {h});
    Value out = param("output.weight", {v, h});
    Value ids = tokens();
    auto [cos, sin] = rotaryTables();
    Value x = weft::GatherOp::create(b, loc, emb, ids, uint64_t(0));
    for (auto &w : layers) {
      Value a = rmsNormWith(x, w[7]);
      Value q = rotary(splitHeads(linear(a, w[0]), config.heads), cos, sin);
      Value k = rotary(splitHeads(linear(a, w[1]), config.kvHeads), cos, sin);
      Value vv = splitHeads(linear(a, w[2]), config.kvHeads);
      x = weft::AddOp::create(
          b, loc, x, linear(attend(q, repeatKv(k), repeatKv(vv)), w[3]));
      Value m = rmsNormWith(x, w[8]);
      Value gate = linear(m, w[4]);
      gate = weft::MulOp::create(b, loc, gate,
                                 weft::SigmoidOp::create(b, loc, gate));
      m = weft::MulOp::create(b, loc, gate, linear(m, w[6]));
      x = weft::AddOp::create(b, loc, x, linear(m, w[5]));
    }
    return linear(rmsNormWith(x, normW), out);
  }

  /// x * rsqrt(mean(x^2) + eps) * w (no bias, as Meta's RMSNorm).
  Value rmsNormWith(Value x, Value w) {
    Value sq = weft::MulOp::create(b, loc, x, x);
    Value mean = weft::ReduceMeanOp::create(b, loc, sq, ArrayRef<int64_t>{2},
                                            /*keep_dims=*/true);
    Value inv = weft::RsqrtOp::create(
        b, loc, weft::AddOp::create(b, loc, mean, scalar(1e-5)));
    return weft::MulOp::create(b, loc, weft::MulOp::create(b, loc, x, inv), w);
  }

  const Config &config;
  OpBuilder b;
  Location loc;
  Type elt;
  ModuleOp module;
  func::FuncOp func;
  Block *entry = nullptr;
  BlockArgument tokenArg;
  std::vector<std::tuple<BlockArgument, std::string, std::string>> argNames;
};

/// 2*M*N*K summed over the matmuls (batch axes multiplied in): the forward
/// FLOPs that matter; elementwise ops, norms and softmax are not counted.
double matmulFlops(ModuleOp module) {
  double flops = 0;
  module.walk([&](weft::MatMulOp op) {
    auto lhs = cast<RankedTensorType>(op.getLhs().getType());
    int64_t k = op.getTransposeLhs() ? lhs.getShape()[lhs.getRank() - 2]
                                     : lhs.getShape().back();
    auto result = cast<RankedTensorType>(op.getResult().getType());
    flops += 2.0 * double(result.getNumElements()) * double(k);
  });
  return flops;
}

} // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (llvm::StringRef(argv[i]) == "-h" ||
        llvm::StringRef(argv[i]) == "--help") {
      llvm::outs() << kUsage;
      return 0;
    }
  Config config;
  if (auto error = parseArgs(argc, argv, config))
    return fail(*error);

  auto start = std::chrono::steady_clock::now();
  MLIRContext ctx;
  ctx.loadDialect<weft::WeftDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = ModelBuilder(ctx, config).build();
  if (failed(verify(*module))) {
    llvm::errs() << "weft-modelgen: error: the built model does not verify "
                    "(a bug in weft-modelgen; the diagnostics above name the "
                    "op)\n";
    return 1;
  }

  uint64_t params = 0;
  auto func = cast<func::FuncOp>(module->getBody()->front());
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (func.getArgAttr(i, "weft.param"))
      params += cast<RankedTensorType>(func.getArgument(i).getType())
                    .getNumElements();

  std::error_code ec;
  llvm::raw_fd_ostream os(config.output, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    llvm::errs() << "weft-modelgen: error: cannot write -o " << config.output
                 << ": " << ec.message() << "\n";
    return 1;
  }
  module->print(os);
  os << "\n";
  os.close();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  llvm::errs() << "weft-modelgen: " << config.model << " L=" << config.layers
               << " H=" << config.hidden << " A=" << config.heads;
  if (config.model == "llama")
    llvm::errs() << " K=" << config.kvHeads;
  llvm::errs() << " F=" << config.ffn << " S=" << config.seq
               << " V=" << config.vocab << " B=" << config.batch << " f32\n"
               << "parameters: " << params << " ("
               << llvm::format("%.3g", double(params)) << ")\n"
               << "forward FLOPs (matmuls): "
               << llvm::format("%.4g", matmulFlops(*module)) << "\n"
               << "built in " << llvm::format("%.2f", seconds) << " s\n";
  return 0;
}
