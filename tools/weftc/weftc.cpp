//===- weftc.cpp - The Weft compiler driver -------------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// weftc MODEL [-o OUT] --emit=STAGE: imports an ONNX model (or reads weft
// IR) and runs the pipeline up to STAGE. Later stages (training step, plan,
// executable) extend the --emit ladder.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Import/OnnxImporter.h"
#include "weft/Import/Weights.h"
#include "weft/Pipelines/Pipelines.h"
#include "weft/Runtime/SafeTensors.h"
#include "weft/Support/Diagnostics.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace weft;
namespace cl = llvm::cl;

namespace {
enum class Emit { Onnx, Weft, Train };

cl::OptionCategory weftcCategory("weftc options");

cl::opt<std::string> inputFilename(cl::Positional,
                                   cl::desc("<model.onnx | model.mlir>"),
                                   cl::Required, cl::cat(weftcCategory));
cl::opt<std::string> outputFilename("o", cl::desc("Output file (default: stdout)"),
                                    cl::value_desc("file"), cl::init("-"),
                                    cl::cat(weftcCategory));
cl::opt<Emit> emit(
    "emit", cl::desc("Stage to stop at and print"), cl::init(Emit::Weft),
    cl::values(clEnumValN(Emit::Onnx, "onnx",
                          "imported ONNX nodes, not yet legalized"),
               clEnumValN(Emit::Weft, "weft", "the model in the weft dialect"),
               clEnumValN(Emit::Train, "train",
                          "the training step: @loss, @loss_grad, "
                          "@train_step")),
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
cl::opt<double> weightDecay(
    "weight-decay",
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
cl::opt<std::string> precision("precision",
                               cl::desc("fp32, or bf16 (bf16 compute, f32 "
                                        "master weights and optimizer "
                                        "state)"),
                               cl::init("fp32"), cl::cat(trainCategory));

cl::opt<bool> summary("summary",
                      cl::desc("Print parameter and input counts to stderr"),
                      cl::init(false), cl::cat(weftcCategory));

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
  std::string source = weft::resolveWeightsPath(attr.str(), irPath.str());
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

void printSummary(ModuleOp module) {
  int64_t params = 0, values = 0, bytes = 0, buffers = 0, inputs = 0;
  module.walk([&](func::FuncOp fn) {
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      auto type = dyn_cast<RankedTensorType>(fn.getArgument(i).getType());
      if (fn.getArgAttr(i, WeftDialect::kParamAttrName) && type) {
        ++params;
        values += type.getNumElements();
        bytes += type.getNumElements() * type.getElementTypeBitWidth() / 8;
      } else if (fn.getArgAttr(i, WeftDialect::kBufferAttrName)) {
        ++buffers;
      } else {
        ++inputs;
      }
    }
  });
  llvm::errs() << "weftc: " << inputFilename << ": " << params
               << " parameter tensors, " << values << " trainable values ("
               << llvm::format("%.1f", bytes / 1048576.0) << " MiB), "
               << buffers << " buffers, " << inputs << " inputs\n";
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
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  cl::ParseCommandLineOptions(
      argc, argv,
      "Weft: ahead-of-time compiler for training\n\n"
      "  weftc model.onnx --emit=weft            print the imported model\n"
      "  weftc model.onnx --input-shape input=4x48 --emit=weft -o m.mlir\n"
      "  weftc model.onnx --emit=train --loss cross-entropy --optimizer adamw\n");

  DialectRegistry registry;
  registry.insert<weft::WeftDialect, func::FuncDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  ToolDiagnosticHandler diagnostics(&context, "weftc");
  // The failing op is named in the message; its generic dump is noise.
  context.printOpOnDiagnostic(false);

  OwningOpRef<ModuleOp> module = loadInput(context);
  if (!module)
    return 1;

  if (emit != Emit::Onnx) {
    PassManager pm(&context);
    if (failed(applyPassManagerCLOptions(pm)))
      return 1;
    DefaultTimingManager tm;
    applyDefaultTimingManagerCLOptions(tm);
    TimingScope timing = tm.getRootScope();
    pm.enableTiming(timing);
    weft::buildImportPipeline(pm);
    if (emit == Emit::Train) {
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
      weft::buildTrainPipeline(pm, train);
    }
    if (failed(pm.run(*module)))
      return 1;
  }
  if (!weightsOut.empty() &&
      failed(writeWeights(*module, StringRef(inputFilename).ends_with(".onnx")
                                       ? StringRef()
                                       : StringRef(inputFilename))))
    return 1;
  if (summary)
    printSummary(*module);

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
