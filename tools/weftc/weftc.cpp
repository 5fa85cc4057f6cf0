//===- weftc.cpp - The Weft compiler driver -------------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// weftc MODEL [-o OUT] --emit=STAGE: imports an ONNX model (or reads weft
// IR) and runs the pipeline up to STAGE: the model (weft), the training
// step (train), fused kernels on tensors (linalg), planned buffers with
// BLAS calls (memref), LLVM IR (llvm), an object file (obj) or a training
// executable linked with the runtime (exe, the default for an output name
// without extension).
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Import/OnnxImporter.h"
#include "weft/Import/Weights.h"
#include "weft/Pipelines/Pipelines.h"
#include "weft/Runtime/SafeTensors.h"
#include "weft/Support/Diagnostics.h"
#include "weft/Target/CPU.h"
#include "weft/Target/Registration.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <chrono>

// WEFT_VERSION_NUMBER comes from CMake's project(VERSION), unquoted.
#define WEFT_STRINGIFY_(x) #x
#define WEFT_STRINGIFY(x) WEFT_STRINGIFY_(x)
#include <optional>

using namespace mlir;
using namespace weft;
namespace cl = llvm::cl;

namespace {
enum class Emit { Onnx, Weft, Train, Linalg, Memref, Llvm, Obj, Exe };

// Sorted first in --help (LLVM lists categories by name).
cl::OptionCategory weftcCategory("Basic options");

cl::opt<std::string> inputFilename(cl::Positional,
                                   cl::desc("<model.onnx | model.mlir>"),
                                   cl::Required, cl::cat(weftcCategory));
cl::opt<std::string> outputFilename("o",
                                    cl::desc("Output file (default: stdout); its extension names the "
                                             "stage: .mlir IR, .ll LLVM IR, .o "
                                             "an object, none/.exe/.bin an "
                                             "executable"),
                                    cl::value_desc("file"), cl::init("-"),
                                    cl::cat(weftcCategory));
cl::opt<Emit> emit(
    "emit", cl::desc("Stage to stop at and print"), cl::init(Emit::Weft),
    cl::values(clEnumValN(Emit::Onnx, "onnx",
                          "imported ONNX nodes, not yet legalized"),
               clEnumValN(Emit::Weft, "weft", "the model in the weft dialect"),
               clEnumValN(Emit::Train, "train",
                          "the training step: @loss, @loss_grad, "
                          "@train_step"),
               clEnumValN(Emit::Linalg, "linalg",
                          "@train_step as fused kernels on tensors"),
               clEnumValN(Emit::Memref, "memref",
                          "@train_step on buffers: BLAS calls, planned "
                          "workspace"),
               clEnumValN(Emit::Llvm, "llvm",
                          "optimized LLVM IR of the step and its "
                          "descriptor (weights not embedded)"),
               clEnumValN(Emit::Obj, "obj",
                          "an object file defining weft_get_model(), "
                          "weights embedded (default -o model.o)"),
               clEnumValN(Emit::Exe, "exe",
                          "a training executable linked with the Weft "
                          "runtime (default -o train; the stage when -o "
                          "has no extension, .exe or .bin)")),
    cl::cat(weftcCategory));
cl::list<std::string> inputShapes(
    "input-shape",
    cl::desc("Static shape of a model input, e.g. --input-shape input=4x48 "
             "(needed for dynamic dimensions; repeat or comma-separate)"),
    cl::value_desc("name=DxD..."), cl::CommaSeparated, cl::cat(weftcCategory));
cl::list<std::string> frozen(
    "freeze",
    cl::desc("Float initializers to load but not train (PyTorch buffers)"),
    cl::value_desc("name"), cl::CommaSeparated, cl::cat(weftcCategory));
cl::opt<std::string> weightsOut(
    "weights-out",
    cl::desc("Write the parameters' initial values to this safetensors file "
             "and point the IR at it (default: the IR points at the .onnx)"),
    cl::value_desc("file.safetensors"), cl::cat(weftcCategory));
cl::OptionCategory trainCategory("Training step options (--emit=train)");
cl::opt<std::string> loss("loss",
                          cl::desc("Loss: cross-entropy (class axis last, "
                                   "int64 labels), mse, or none (the model "
                                   "outputs its loss)"),
                          cl::init("cross-entropy"), cl::cat(trainCategory));
cl::opt<std::string> optimizer("optimizer", cl::desc("sgd or adamw"),
                               cl::init("adamw"), cl::cat(trainCategory));
cl::opt<double> momentum("momentum", cl::desc("SGD momentum (default 0)"),
                         cl::init(0.0), cl::cat(trainCategory));
cl::opt<bool> nesterov("nesterov", cl::desc("SGD Nesterov momentum"),
                       cl::init(false), cl::cat(trainCategory));
cl::opt<double>
    weightDecay("weight-decay",
                cl::desc("Weight decay (default: 0 for sgd, 0.01 for adamw)"),
                cl::init(-1.0), cl::cat(trainCategory));
cl::opt<double> beta1("beta1", cl::desc("AdamW beta1"), cl::init(0.9),
                      cl::cat(trainCategory));
cl::opt<double> beta2("beta2", cl::desc("AdamW beta2"), cl::init(0.999),
                      cl::cat(trainCategory));
cl::opt<double> adamEps("eps", cl::desc("AdamW epsilon"), cl::init(1e-8),
                        cl::cat(trainCategory));
cl::opt<double> clipNorm("clip-norm",
                         cl::desc("Clip gradients to this global norm (0: "
                                  "off)"),
                         cl::init(0.0), cl::cat(trainCategory));
cl::opt<int64_t> accumSteps("accum-steps",
                            cl::desc("Micro-batches per step; batch inputs "
                                     "grow by this factor along axis 0"),
                            cl::init(1), cl::cat(trainCategory));
cl::opt<std::string> lrSchedule("lr-schedule",
                                cl::desc("constant, warmup or cosine"),
                                cl::init("constant"), cl::cat(trainCategory));
cl::opt<int64_t> warmupSteps("warmup-steps", cl::desc("Linear warmup steps"),
                             cl::init(0), cl::cat(trainCategory));
cl::opt<int64_t> totalSteps("total-steps",
                            cl::desc("Steps of the cosine schedule"),
                            cl::init(0), cl::cat(trainCategory));
cl::opt<double> minLrRatio("min-lr-ratio",
                           cl::desc("Cosine floor as a fraction of the base "
                                    "learning rate"),
                           cl::init(0.0), cl::cat(trainCategory));
cl::opt<cl::boolOrDefault> runtimeHyperparameters(
    "runtime-hyperparameters",
    cl::desc("Make the optimizer's hyperparameters run-time inputs "
             "hp.<name>: flags of the executable, defaulting to the values "
             "given here (default: on for --emit=llvm|obj|exe, off for IR)"),
    cl::cat(trainCategory));
cl::opt<std::string> batchNorm(
    "batchnorm",
    cl::desc("BatchNorm in the training step: 'train' normalizes with batch "
             "statistics and updates the running ones, as PyTorch's train "
             "mode; 'inference' uses the running statistics, frozen"),
    cl::value_desc("train|inference"), cl::init("train"),
    cl::cat(trainCategory));
cl::opt<std::string> precision("precision",
                               cl::desc("fp32, or bf16 (bf16 compute, f32 "
                                        "master weights and optimizer "
                                        "state)"),
                               cl::init("fp32"), cl::cat(trainCategory));

cl::opt<bool> summary("summary",
                      cl::desc("Print parameter and input counts, planned "
                               "peak memory and compile time to stderr"),
                      cl::init(false), cl::cat(weftcCategory));

cl::OptionCategory codegenCategory(
    "Code generation options (--emit=linalg|memref|llvm|obj|exe)");
cl::opt<std::string> cpu("cpu",
                         cl::desc("CPU to generate code for: generic (the "
                                  "default; runs on any machine of the "
                                  "host's architecture), native, or an LLVM "
                                  "CPU name"),
                         cl::init("generic"), cl::cat(codegenCategory));
cl::opt<unsigned> optLevel("O", cl::desc("LLVM optimization level 0-3"),
                           cl::init(2), cl::Prefix, cl::cat(codegenCategory));
cl::opt<std::string>
    runtimeDir("runtime-dir",
               cl::desc("Folder with libWeftRuntimeMain.a and libWeftRuntime.a "
                        "(default: next to weftc)"),
               cl::value_desc("dir"), cl::cat(codegenCategory));
cl::list<std::string> linkArgs("link-arg",
                               cl::desc("Extra argument for the link"),
                               cl::value_desc("arg"), cl::cat(codegenCategory));
cl::opt<bool> saveTemps("save-temps",
                        cl::desc("Keep the temporary folder with the object "
                                 "and weights (its path goes to stderr)"),
                        cl::init(false), cl::cat(codegenCategory));

/// `target` relative to `fromDir` when both are on disk; keeps the IR free of
/// machine-specific absolute paths.
std::string relativePath(StringRef target, StringRef fromDir) {
  SmallString<256> absTarget(target), absFrom(fromDir);
  if (llvm::sys::fs::make_absolute(absTarget) ||
      llvm::sys::fs::make_absolute(absFrom))
    return target.str();
  llvm::sys::path::remove_dots(absTarget, true);
  llvm::sys::path::remove_dots(absFrom, true);
  SmallVector<StringRef> t(llvm::sys::path::begin(absTarget),
                           llvm::sys::path::end(absTarget));
  SmallVector<StringRef> f(llvm::sys::path::begin(absFrom),
                           llvm::sys::path::end(absFrom));
  size_t common = 0;
  while (common < t.size() && common < f.size() && t[common] == f[common])
    ++common;
  SmallString<256> rel;
  for (size_t i = common; i < f.size(); ++i)
    llvm::sys::path::append(rel, "..");
  for (size_t i = common; i < t.size(); ++i)
    llvm::sys::path::append(rel, t[i]);
  return rel.empty() ? std::string(".") : std::string(rel);
}

std::string outputDir() {
  if (outputFilename == "-")
    return ".";
  StringRef dir = llvm::sys::path::parent_path(outputFilename);
  return dir.empty() ? "." : dir.str();
}

/// Reads every argument's initial value from the module's weights file and
/// writes them to --weights-out, so the IR no longer needs the .onnx.
LogicalResult writeWeights(ModuleOp module, StringRef irPath) {
  auto attr = module->getAttrOfType<StringAttr>(WeftDialect::kWeightsAttrName);
  if (!attr)
    return module.emitError("no weft.weights attribute: nothing to write");
  std::vector<std::string> names;
  module.walk([&](func::FuncOp fn) {
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      for (StringRef key :
           {WeftDialect::kParamAttrName, WeftDialect::kBufferAttrName})
        if (auto name = fn.getArgAttrOfType<StringAttr>(i, key))
          if (!llvm::is_contained(names, name.str()))
            names.push_back(name.str());
  });
  rt::SafeTensorsFile file;
  std::vector<rt::HostArray> arrays;
  // An imported model's attribute is relative to the output; its weights
  // are the input itself.
  std::string source = irPath.empty()
                           ? inputFilename.getValue()
                           : weft::resolveWeightsPath(attr.str(), irPath.str());
  if (rt::Status s = weft::readWeights(source, names, arrays); !s.ok())
    return module.emitError(s.message);
  for (size_t i = 0; i < names.size(); ++i)
    file.tensors.emplace_back(names[i], std::move(arrays[i]));
  file.metadata.emplace_back("format", "weft-weights");
  if (rt::Status s = rt::writeSafeTensors(weightsOut, file); !s.ok())
    return module.emitError(s.message);
  module->setAttr(WeftDialect::kWeightsAttrName,
                  StringAttr::get(module.getContext(),
                                  relativePath(weightsOut, outputDir())));
  return success();
}

/// How the importer classified the ONNX model's tensors (for --summary).
std::vector<weft::onnximport::GraphTensor> importedTensors;

/// One line per initializer (and Identity of one): what it became and why,
/// so a user sees at once whether Weft trains what PyTorch trains.
void printTensorTable() {
  if (importedTensors.empty())
    return;
  size_t width = 0;
  for (const auto &t : importedTensors)
    width = std::max(width, t.onnxName.size());
  width = std::min<size_t>(width, 48);
  llvm::errs() << "weftc: " << inputFilename << ": tensors\n";
  for (const auto &t : importedTensors) {
    llvm::errs() << "  " << llvm::left_justify(t.onnxName, width) << "  "
                 << llvm::left_justify(weft::onnximport::roleName(t.role), 9)
                 << "  ";
    if (t.name != t.onnxName && t.role != weft::onnximport::TensorRole::Tied)
      llvm::errs() << "as '" << t.name << "'"
                   << (t.transposed ? " (transposed)" : "") << ": ";
    llvm::errs() << t.reason << "\n";
  }
}

void printSummary(ModuleOp module) {
  printTensorTable();
  int64_t params = 0, values = 0, bytes = 0, buffers = 0, state = 0, inputs = 0;
  // A training step's arguments describe the model; the functions it was
  // built from repeat them.
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  module.walk([&](func::FuncOp fn) {
    if (step && fn != step)
      return;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      auto type = dyn_cast<RankedTensorType>(fn.getArgument(i).getType());
      if (fn.getArgAttr(i, WeftDialect::kParamAttrName) && type) {
        ++params;
        values += type.getNumElements();
        bytes += type.getNumElements() * type.getElementTypeBitWidth() / 8;
      } else if (fn.getArgAttr(i, WeftDialect::kBufferAttrName)) {
        ++buffers;
      } else if (fn.getArgAttr(i, "weft.state")) {
        ++state;
      } else {
        ++inputs;
      }
    }
  });
  llvm::errs() << "weftc: " << inputFilename << ": " << params
               << " parameter tensors, " << values << " trainable values ("
               << llvm::format("%.1f", bytes / 1048576.0) << " MiB), "
               << buffers << " buffers, ";
  if (state)
    llvm::errs() << state << " optimizer state tensors, ";
  llvm::errs() << inputs << " inputs\n";
}

OwningOpRef<ModuleOp> loadInput(MLIRContext &context) {
  if (StringRef(inputFilename).ends_with(".onnx")) {
    weft::OnnxImportOptions options;
    for (const std::string &spec : inputShapes) {
      std::string name, error;
      std::vector<int64_t> shape;
      if (!weft::parseInputShape(spec, name, shape, error)) {
        llvm::errs() << "weftc: " << error << "\n";
        return nullptr;
      }
      options.inputShapes[name] = shape;
    }
    options.frozen.assign(frozen.begin(), frozen.end());
    options.weightsAttr = relativePath(inputFilename, outputDir());
    if (summary)
      options.tensorReport = &importedTensors;
    options.forTraining = emit >= Emit::Train;
    return weft::importOnnxModel(&context, inputFilename, options);
  }
  if (!inputShapes.empty() || !frozen.empty())
    llvm::errs() << "weftc: warning: --input-shape and --freeze apply to "
                    ".onnx inputs only; ignored for "
                 << inputFilename << "\n";
  std::string error;
  auto file = openInputFile(inputFilename, &error);
  if (!file) {
    llvm::errs() << "weftc: " << error << "\n";
    return nullptr;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, &context);
}

/// Records the training options on the module, so the model's JSON can
/// describe them even when the step is compiled later from its .mlir.
void recordTrainConfig(ModuleOp module) {
  Builder b(module.getContext());
  double decay =
      weightDecay >= 0 ? weightDecay : (optimizer == "adamw" ? 0.01 : 0.0);
  NamedAttribute entries[] = {
      b.getNamedAttr("loss", b.getStringAttr(loss)),
      b.getNamedAttr("optimizer", b.getStringAttr(optimizer)),
      b.getNamedAttr("momentum", b.getF64FloatAttr(momentum)),
      b.getNamedAttr("nesterov", b.getBoolAttr(nesterov)),
      b.getNamedAttr("weight_decay", b.getF64FloatAttr(decay)),
      b.getNamedAttr("beta1", b.getF64FloatAttr(beta1)),
      b.getNamedAttr("beta2", b.getF64FloatAttr(beta2)),
      b.getNamedAttr("eps", b.getF64FloatAttr(adamEps)),
      b.getNamedAttr("clip_norm", b.getF64FloatAttr(clipNorm)),
      b.getNamedAttr("accum_steps", b.getI64IntegerAttr(accumSteps)),
      b.getNamedAttr("lr_schedule", b.getStringAttr(lrSchedule)),
      b.getNamedAttr("warmup_steps", b.getI64IntegerAttr(warmupSteps)),
      b.getNamedAttr("total_steps", b.getI64IntegerAttr(totalSteps)),
      b.getNamedAttr("min_lr_ratio", b.getF64FloatAttr(minLrRatio)),
      b.getNamedAttr("precision", b.getStringAttr(precision))};
  module->setAttr("weft.train_config", b.getDictionaryAttr(entries));
}

/// For a cross-entropy loss, the number of classes (the last axis of
/// @forward's output, the vocabulary of a language model): the runtime
/// range-checks labels and tokens against it.
std::optional<int64_t> numClasses(ModuleOp module) {
  auto config = module->getAttrOfType<DictionaryAttr>("weft.train_config");
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!config || !forward || forward.getNumResults() == 0 ||
      config.getAs<StringAttr>("loss") != "cross-entropy")
    return std::nullopt;
  auto type = dyn_cast<RankedTensorType>(forward.getResultTypes().front());
  if (!type || type.getRank() == 0 || type.isDynamicDim(type.getRank() - 1))
    return std::nullopt;
  return type.getShape().back();
}

/// The model's JSON: where it came from, how it trains, what it needs.
std::string modelJson(ModuleOp module, const ModelAbi &abi,
                      std::optional<int64_t> classes) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream json(os);
  json.object([&] {
    json.attribute("weft_version", kWeftVersion);
    json.attribute("source", llvm::sys::path::filename(inputFilename).str());
    json.attribute("entry", "train_step");
    if (classes)
      json.attribute("num_classes", *classes);
    if (auto config =
            module->getAttrOfType<DictionaryAttr>("weft.train_config")) {
      for (NamedAttribute entry : config) {
        StringRef key = entry.getName().strref();
        if (auto s = dyn_cast<StringAttr>(entry.getValue()))
          json.attribute(key, s.str());
        else if (auto f = dyn_cast<FloatAttr>(entry.getValue()))
          json.attribute(key, f.getValueAsDouble());
        else if (auto i = dyn_cast<IntegerAttr>(entry.getValue()))
          json.attribute(key, i.getInt());
        else if (auto bAttr = dyn_cast<BoolAttr>(entry.getValue()))
          json.attribute(key, bAttr.getValue());
      }
    }
    // Defaults of the hp.* inputs (--runtime-hyperparameters), which the
    // runtime turns into flags.
    if (auto hyper =
            module->getAttrOfType<DictionaryAttr>("weft.hyperparameters"))
      json.attributeObject("hyperparameters", [&] {
        for (NamedAttribute entry : hyper)
          if (auto value = dyn_cast<FloatAttr>(entry.getValue()))
            json.attribute(entry.getName().strref(), value.getValueAsDouble());
      });
    auto bytes = [&](StringRef name) -> int64_t {
      auto attr = module->getAttrOfType<IntegerAttr>(name);
      return attr ? attr.getInt() : 0;
    };
    json.attribute("workspace_bytes", bytes("weft.workspace_bytes"));
    json.attribute("peak_bytes", bytes("weft.peak_bytes"));
    json.attribute("num_args", static_cast<int64_t>(abi.args.size()));
    json.attribute("num_results", static_cast<int64_t>(abi.results.size()));
  });
  return text;
}

/// A private temporary folder, removed on exit unless --save-temps.
struct TempDir {
  SmallString<128> path;
  ~TempDir() {
    if (path.empty())
      return;
    if (saveTemps)
      llvm::errs() << "weftc: temporary files kept in " << path << "\n";
    else
      llvm::sys::fs::remove_directories(path);
  }
  bool create() {
    std::error_code ec = llvm::sys::fs::createUniqueDirectory("weftc", path);
    if (ec) {
      llvm::errs() << "weftc: error: cannot create a temporary folder: "
                   << ec.message() << "\n";
      path.clear();
      return false;
    }
    return true;
  }
  std::string file(StringRef name) const {
    SmallString<256> p(path);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
};

/// Writes the initial value of every param and buffer argument to a
/// safetensors file in `dir`, the image the executable embeds.
LogicalResult writeEmbeddedWeights(ModuleOp module, const ModelAbi &abi,
                                   const TempDir &dir, std::string &path,
                                   uint64_t &size) {
  std::vector<std::string> names = abi.weightNames();
  if (names.empty())
    return success();
  auto attr = module->getAttrOfType<StringAttr>(WeftDialect::kWeightsAttrName);
  if (!attr)
    return module.emitError("no weft.weights attribute: the initial values "
                            "of the parameters are unknown");
  // An imported model's attribute is relative to the output's folder; a
  // .mlir file's to the file's own.
  bool fromOnnx = StringRef(inputFilename).ends_with(".onnx");
  std::string source =
      weft::resolveWeightsPath(attr.str(), fromOnnx ? outputFilename.getValue()
                                                    : inputFilename.getValue());
  rt::SafeTensorsFile file;
  {
    std::vector<rt::HostArray> arrays;
    if (rt::Status s = weft::readWeights(source, names, arrays); !s.ok())
      return module.emitError(s.message);
    for (size_t i = 0; i < names.size(); ++i)
      file.tensors.emplace_back(names[i], std::move(arrays[i]));
  }
  file.metadata.emplace_back("format", "weft-weights");
  path = dir.file("weights.safetensors");
  if (rt::Status s = rt::writeSafeTensors(path, file); !s.ok())
    return module.emitError(s.message);
  if (std::error_code ec = llvm::sys::fs::file_size(path, size))
    return module.emitError("cannot read back " + path + ": " + ec.message());
  return success();
}

std::string mib(uint64_t bytes) {
  return llvm::formatv("{0:F1} MiB", bytes / 1048576.0).str();
}

/// "planned peak memory 12.3 MiB: workspace ..., params+state+batch ...,
/// results ...".
std::string memorySummary(ModuleOp module, const ModelAbi &abi) {
  uint64_t args = 0, results = 0;
  for (const AbiTensor &t : abi.args)
    args += t.bytes();
  for (const AbiTensor &t : abi.results)
    results += t.bytes();
  auto attr = module->getAttrOfType<IntegerAttr>("weft.workspace_bytes");
  uint64_t workspace = attr ? attr.getInt() : 0;
  return "planned peak memory " + mib(workspace + args + results) +
         " (workspace " + mib(workspace) + ", params+state+batch " + mib(args) +
         ", results " + mib(results) + ")";
}

/// --emit=llvm|obj|exe: LLVM IR, object file, executable.
LogicalResult emitNative(ModuleOp module, const ModelAbi &abi,
                         std::optional<int64_t> classes, TimingScope &timing,
                         const char *argv0) {
  TempDir temps;
  std::string weightsPath, error;
  uint64_t weightsSize = 0;
  if (emit != Emit::Llvm) {
    if (!temps.create())
      return failure();
    TimingScope t = timing.nest("Embed weights");
    if (failed(
            writeEmbeddedWeights(module, abi, temps, weightsPath, weightsSize)))
      return failure();
  }
  std::string runtime;
  if (emit == Emit::Exe) {
    // Fail before the expensive part when the runtime is missing.
    runtime = findRuntimeDir(argv0, runtimeDir, error);
    if (runtime.empty()) {
      llvm::errs() << "weftc: error: " << error << "\n";
      return failure();
    }
  }

  CpuTargetOptions target;
  target.cpu = cpu;
  target.optLevel = optLevel;
  std::unique_ptr<llvm::TargetMachine> machine =
      createCpuTargetMachine(target, error);
  if (!machine) {
    llvm::errs() << "weftc: error: " << error << "\n";
    return failure();
  }
  ModelDescriptor descriptor;
  descriptor.abi = abi;
  descriptor.modelJson = modelJson(module, abi, classes);
  if (auto ws = module->getAttrOfType<IntegerAttr>("weft.workspace_bytes"))
    descriptor.workspaceBytes = ws.getInt();
  descriptor.weightsPath = weightsPath;
  descriptor.weightsSize = weightsSize;

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule;
  {
    TimingScope t = timing.nest("LLVM translation and O" +
                                std::to_string(optLevel.getValue()));
    llvmModule = buildModelModule(module, llvmContext, *machine, "train_step",
                                  descriptor, optLevel, error);
  }
  if (!llvmModule) {
    llvm::errs() << "weftc: error: " << error << "\n";
    return failure();
  }
  if (emit == Emit::Llvm) {
    std::string openError;
    auto output = openOutputFile(outputFilename, &openError);
    if (!output) {
      llvm::errs() << "weftc: " << openError << "\n";
      return failure();
    }
    llvmModule->print(output->os(), nullptr);
    output->keep();
    return success();
  }
  std::string object =
      emit == Emit::Obj ? outputFilename.getValue() : temps.file("model.o");
  {
    TimingScope t = timing.nest("Object emission");
    error = emitObjectFile(*llvmModule, *machine, object);
  }
  if (!error.empty()) {
    llvm::errs() << "weftc: error: " << error << "\n";
    return failure();
  }
  if (emit == Emit::Obj)
    return success();
  LinkOptions link;
  link.output = outputFilename;
  link.objects = {object};
  link.runtimeDir = runtime;
  link.extraArgs.assign(linkArgs.begin(), linkArgs.end());
  link.verbose = saveTemps;
  TimingScope t = timing.nest("Link");
  error = linkExecutable(link);
  if (!error.empty()) {
    llvm::errs() << "weftc: error: " << error << "\n";
    return failure();
  }
  return success();
}
/// LLVM's backends register hundreds of developer flags (AMDGPU, ARM, ...)
/// that would bury weftc's own in --help. Keep weftc's categories, MLIR's
/// --mlir-* debugging flags, and the generic ones.
const char *emitName(Emit e) {
  static const char *names[] = {"onnx",   "weft", "train", "linalg",
                                "memref", "llvm", "obj",   "exe"};
  return names[static_cast<int>(e)];
}

/// The stage -o's extension names: IR text, LLVM IR, an object, or an
/// executable; nullopt for names that say nothing (IR text by default).
std::optional<Emit> stageOfExtension(StringRef path) {
  std::string ext = llvm::sys::path::extension(path).lower();
  if (ext == ".ll")
    return Emit::Llvm;
  if (ext == ".o")
    return Emit::Obj;
  if (ext.empty() || ext == ".exe" || ext == ".bin")
    return Emit::Exe;
  return std::nullopt;
}

/// Takes the stage from -o's extension when --emit is not given, and
/// refuses names that would overwrite an input, disagree with --emit, or
/// point into a folder that does not exist.
LogicalResult checkOutput() {
  auto fail = [](const Twine &message) {
    llvm::errs() << "weftc: error: " << message << "\n";
    return failure();
  };
  if (outputFilename == "-" || outputFilename == "/dev/null")
    return success();
  std::pair<const char *, StringRef> outputs[] = {
      {"-o", outputFilename}, {"--weights-out", weightsOut}};
  for (auto [flag, out] : outputs) {
    if (out.empty())
      continue;
    if (llvm::sys::fs::equivalent(out, inputFilename))
      return fail(Twine(flag) + " " + out + " is the input " + inputFilename +
                  "; refusing to overwrite it");
    StringRef dir = llvm::sys::path::parent_path(out);
    if (!dir.empty() && !llvm::sys::fs::is_directory(dir))
      return fail("cannot write " + out + ": the folder " + dir +
                  " does not exist");
  }
  std::optional<Emit> byName = stageOfExtension(outputFilename);
  bool isIrText = llvm::sys::path::extension(outputFilename).lower() == ".mlir";
  if (!emit.getNumOccurrences()) {
    if (byName)
      emit = *byName;
    return success();
  }
  bool textStage = emit <= Emit::Memref;
  const char *nameSays = isIrText || (!byName && textStage)
                             ? "IR text"
                         : byName == Emit::Exe ? "an executable"
                         : byName == Emit::Obj ? "an object file"
                         : byName == Emit::Llvm ? "LLVM IR"
                                                : "IR text";
  if ((isIrText && !textStage) || (byName && *byName != emit) ||
      (!byName && !isIrText && !textStage))
    return fail(Twine("-o ") + outputFilename + " names " + nameSays +
                ", but --emit=" + emitName(emit) +
                " writes something else; name the output after the stage "
                "(.mlir for IR; .ll; .o; no extension, .exe or .bin for an "
                "executable) or leave out --emit");
  return success();
}

void hideUnrelatedOptions() {
  const cl::OptionCategory *ours[] = {&weftcCategory, &trainCategory,
                                      &codegenCategory};
  for (auto &entry : cl::getRegisteredOptions()) {
    cl::Option *option = entry.second;
    StringRef name = entry.first;
    bool ourCategory = false;
    for (const cl::OptionCategory *category : option->Categories)
      ourCategory |= llvm::is_contained(ours, category);
    // MLIR's pass-manager and printing flags work but are not Weft's: they
    // are listed by --help-hidden, after --help's own options.
    if (name.starts_with("mlir-") && !ourCategory)
      option->setHiddenFlag(cl::Hidden);
    else if (!ourCategory && name != "help" && name != "help-hidden" &&
             name != "version")
      option->setHiddenFlag(cl::ReallyHidden);
  }
}
} // namespace

int main(int argc, char **argv) {
  auto startTime = std::chrono::steady_clock::now();
  llvm::InitLLVM y(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  hideUnrelatedOptions();
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "weftc (Weft) " << WEFT_STRINGIFY(WEFT_VERSION_NUMBER) << "\n";
  });
  cl::ParseCommandLineOptions(
      argc, argv,
      "Weft: ahead-of-time compiler for training\n"
      "(MLIR's pass-manager flags, --mlir-print-ir-after-all, --mlir-timing "
      "and the rest, are listed by --help-hidden)\n\n"
      "  weftc model.onnx --emit=weft            print the imported model\n"
      "  weftc model.onnx --input-shape input=4x48 --emit=weft -o m.mlir\n"
      "  weftc model.onnx --emit=train --loss cross-entropy --optimizer adamw\n"
      "  weftc model.onnx -o train               a training executable\n");

  if (failed(checkOutput()))
    return 1;
  if (outputFilename == "-" && emit == Emit::Exe)
    outputFilename = "train";
  if (outputFilename == "-" && emit == Emit::Obj)
    outputFilename = "model.o";

  DialectRegistry registry;
  registry.insert<weft::WeftDialect, func::FuncDialect>();
  if (emit >= Emit::Linalg)
    weft::registerCodegenDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  ToolDiagnosticHandler diagnostics(&context, "weftc");
  // The failing op is named in the message; its generic dump is noise.
  context.printOpOnDiagnostic(false);

  OwningOpRef<ModuleOp> module = loadInput(context);
  if (!module)
    return 1;

  DefaultTimingManager tm;
  applyDefaultTimingManagerCLOptions(tm);
  TimingScope timing = tm.getRootScope();
  if (emit != Emit::Onnx) {
    PassManager pm(&context);
    if (failed(applyPassManagerCLOptions(pm)))
      return 1;
    pm.enableTiming(timing);
    // The training step runs the model in train mode (BatchNorm's batch
    // statistics); a forward-only import is the model in eval mode.
    bool hasStep =
        static_cast<bool>(module->lookupSymbol<func::FuncOp>("train_step"));
    bool buildStep = emit == Emit::Train || (emit > Emit::Train && !hasStep);
    if (batchNorm != "train" && batchNorm != "inference") {
      llvm::errs() << "weftc: --batchnorm must be train or inference, got '"
                   << batchNorm << "'\n";
      return 1;
    }
    weft::buildImportPipeline(pm, buildStep && batchNorm == "train");
    // A training step given as input is compiled as it is.
    if (buildStep) {
      if (precision != "fp32" && precision != "bf16") {
        llvm::errs() << "weftc: --precision must be fp32 or bf16, got '"
                     << precision << "'\n";
        return 1;
      }
      weft::TrainPipelineOptions train;
      train.bf16 = precision == "bf16";
      train.loss.kind = loss;
      train.optimizer.optimizer = optimizer;
      train.optimizer.momentum = momentum;
      train.optimizer.nesterov = nesterov;
      train.optimizer.weightDecay = weightDecay;
      train.optimizer.beta1 = beta1;
      train.optimizer.beta2 = beta2;
      train.optimizer.eps = adamEps;
      train.optimizer.clipNorm = clipNorm;
      train.optimizer.accumSteps = accumSteps;
      train.optimizer.schedule = lrSchedule;
      train.optimizer.warmupSteps = warmupSteps;
      train.optimizer.totalSteps = totalSteps;
      train.optimizer.minLrRatio = minLrRatio;
      // An executable should let users retune without recompiling; IR
      // dumps stay readable with constants.
      bool codegen = emit == Emit::Llvm || emit == Emit::Obj ||
                     emit == Emit::Exe;
      train.optimizer.runtimeHyperparameters =
          runtimeHyperparameters == cl::BOU_UNSET
              ? codegen
              : runtimeHyperparameters == cl::BOU_TRUE;
      weft::buildTrainPipeline(pm, train);
    }
    if (failed(pm.run(*module)))
      return 1;
    if (buildStep)
      recordTrainConfig(*module);
  }
  if (!weightsOut.empty() &&
      failed(writeWeights(*module, StringRef(inputFilename).ends_with(".onnx")
                                       ? StringRef()
                                       : StringRef(inputFilename))))
    return 1;
  if (summary)
    printSummary(*module);

  if (emit >= Emit::Linalg) {
    auto step = module->lookupSymbol<func::FuncOp>("train_step");
    if (!step) {
      llvm::errs() << "weftc: error: " << inputFilename
                   << " has no @train_step to compile\n";
      return 1;
    }
    FailureOr<ModelAbi> abi = collectModelAbi(step);
    if (failed(abi))
      return 1;
    std::optional<int64_t> classes = numClasses(*module);
    PassManager pm(&context);
    if (failed(applyPassManagerCLOptions(pm)))
      return 1;
    pm.enableTiming(timing);
    weft::CodegenPipelineOptions codegen;
    codegen.stopAfter =
        emit == Emit::Linalg   ? weft::CodegenPipelineOptions::Stage::Kernels
        : emit == Emit::Memref ? weft::CodegenPipelineOptions::Stage::Buffers
                               : weft::CodegenPipelineOptions::Stage::LLVM;
    weft::buildCodegenPipeline(pm, codegen);
    if (failed(pm.run(*module)))
      return 1;
    std::string memory =
        emit >= Emit::Memref ? memorySummary(*module, *abi) : std::string();
    auto report = [&] {
      double seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - startTime)
                           .count();
      llvm::errs() << "weftc: "
                   << (emit == Emit::Exe ? "wrote " + outputFilename + ": "
                                         : std::string())
                   << (memory.empty() ? "" : memory + "; ") << "compiled in "
                   << llvm::formatv("{0:F2}", seconds) << " s\n";
    };
    if (emit >= Emit::Llvm) {
      if (failed(emitNative(*module, *abi, classes, timing, argv[0])))
        return 1;
      if (summary || emit == Emit::Exe)
        report();
      return 0;
    }
    if (summary)
      report();
  }

  std::string error;
  auto output = openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << "weftc: " << error << "\n";
    return 1;
  }
  module->print(output->os());
  output->os() << "\n";
  output->keep();
  return 0;
}
