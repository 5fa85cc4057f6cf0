//===- weft-eval.cpp - Run a weft function on the reference evaluator -----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// weft-eval FILE.mlir [--fn=NAME] [--input NAME=X.npy]... [--scalar
//           NAME=VALUE]... [--param NAME=W.npy]... [--param-dir DIR]
//           [--weights=PATH] [-o PREFIX | --output-dir DIR] [--print]
//
// Binds the function's arguments from .npy files, numbers and the weights
// file, runs the reference evaluator and writes result i to PREFIX.i.npy, or
// each result to DIR/NAME.npy named by its result attribute. It is the
// oracle end-to-end tests compare compiled programs against, so every
// binding problem is reported with the argument, its type and the file.
//
// A training loop is a sequence of calls sharing one folder: `--fn
// train_step --param-dir S --output-dir S` reads the parameters and
// optimizer state the previous step wrote (the weights file and zeros on the
// first step) and overwrites them.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/TrainStep.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Evaluator/Evaluator.h"
#include "weft/Import/Weights.h"
#include "weft/Formats/Npy.h"
#include "weft/Support/Diagnostics.h"
#include "weft/Support/Version.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

using namespace mlir;
using namespace weft;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory evalCategory("weft-eval options");

cl::opt<std::string> inputFilename(cl::Positional, cl::desc("<file.mlir>"),
                                   cl::Required, cl::cat(evalCategory));
cl::opt<std::string>
    fnName("fn",
           cl::desc("Function to run (default: the only public function, "
                    "else @forward)"),
           cl::value_desc("name"), cl::cat(evalCategory));
cl::list<std::string>
    inputBindings("input",
                  cl::desc("Bind the argument tagged weft.input = \"NAME\" "
                           "(or untagged argument N as argN) to an .npy file"),
                  cl::value_desc("NAME=FILE.npy"), cl::cat(evalCategory));
cl::list<std::string> scalarBindings(
    "scalar",
    cl::desc("Bind a 0-d argument (weft.input name or argN) to a number, "
             "e.g. --scalar step=3 --scalar lr=0.01; integer arguments take "
             "integers"),
    cl::value_desc("NAME=VALUE"), cl::cat(evalCategory));
cl::list<std::string> paramBindings(
    "param",
    cl::desc("Bind a weft.param / weft.buffer / weft.state argument to an "
             ".npy file instead of the weights file (or zeros for state)"),
    cl::value_desc("NAME=FILE.npy"), cl::cat(evalCategory));
cl::opt<std::string> paramDir(
    "param-dir",
    cl::desc("Read each weft.param / weft.buffer / weft.state argument from "
             "DIR/NAME.npy when that file exists; otherwise parameters and "
             "buffers come from the weights file and optimizer state starts "
             "at zero"),
    cl::value_desc("dir"), cl::cat(evalCategory));
cl::opt<std::string> weightsPath(
    "weights",
    cl::desc("Weights file (.onnx or .safetensors; default: the module's "
             "weft.weights attribute)"),
    cl::value_desc("path"), cl::cat(evalCategory));
cl::opt<std::string> outputPrefix(
    "o",
    cl::desc("Write result i to PREFIX.i.npy (default: out, unless "
             "--output-dir is given)"),
    cl::value_desc("prefix"), cl::init("out"), cl::cat(evalCategory));
cl::opt<std::string> outputDir(
    "output-dir",
    cl::desc("Write each result to DIR/NAME.npy, named by its result "
             "attribute: weft.param, weft.state, weft.output -> NAME, "
             "weft.grad -> grad.NAME, none -> resultI (DIR is created)"),
    cl::value_desc("dir"), cl::cat(evalCategory));
cl::opt<bool>
    printResults("print", cl::desc("Print each result's type and first values"),
                 cl::init(false), cl::cat(evalCategory));

/// Reports a usage or binding error; returns the tool's exit code.
int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "weft-eval") << message << "\n";
  return 1;
}

std::string typeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

/// How one function argument gets its value.
struct ArgInfo {
  enum Kind { Input, Param, Buffer, State, Untagged } kind = Untagged;
  /// The weft.input / weft.param / weft.buffer / weft.state name, or "argN".
  std::string name;
  RankedTensorType type;

  std::string describe() const {
    switch (kind) {
    case Input:
      return "input '" + name + "'";
    case Param:
      return "parameter '" + name + "'";
    case Buffer:
      return "buffer '" + name + "'";
    case State:
      return "optimizer state '" + name + "'";
    case Untagged:
      return "argument " + name;
    }
    return name;
  }
};

/// Picks the function to run: --fn, else the only public function, else
/// @forward.
func::FuncOp selectFunction(ModuleOp module, std::string &error) {
  SmallVector<func::FuncOp> all, publicFns;
  for (func::FuncOp fn : module.getOps<func::FuncOp>()) {
    all.push_back(fn);
    if (fn.isPublic() && !fn.isExternal())
      publicFns.push_back(fn);
  }
  auto names = [&] {
    std::string s;
    for (func::FuncOp fn : all)
      s += (s.empty() ? "@" : ", @") + fn.getSymName().str();
    return s.empty() ? std::string("none") : s;
  };
  if (!fnName.empty()) {
    for (func::FuncOp fn : all)
      if (fn.getSymName() == fnName)
        return fn;
    error = "no function @" + fnName + " in " + inputFilename +
            " (functions: " + names() + ")";
    return nullptr;
  }
  if (publicFns.size() == 1)
    return publicFns.front();
  for (func::FuncOp fn : all)
    if (fn.getSymName() == "forward")
      return fn;
  error = inputFilename + " has " + std::to_string(publicFns.size()) +
          " public functions and no @forward; choose one with --fn=NAME "
          "(functions: " +
          names() + ")";
  return nullptr;
}

/// Splits "NAME=FILE" bindings of `flag` into an insertion-ordered map.
LogicalResult parseBindings(StringRef flag, ArrayRef<std::string> bindings,
                            llvm::MapVector<StringRef, StringRef> &out,
                            StringRef usage = "NAME=FILE.npy") {
  for (StringRef binding : bindings) {
    auto [name, file] = binding.split('=');
    if (name.empty() || file.empty()) {
      fail("--" + flag + " expects " + usage + ", got '" + binding + "'");
      return failure();
    }
    if (!out.insert({name, file}).second) {
      fail("--" + flag + " " + name + " is given twice");
      return failure();
    }
  }
  return success();
}

/// Reads `file` and converts it to `arg`'s type.
std::optional<eval::Tensor> loadNpy(const ArgInfo &arg, StringRef file) {
  rt::HostArray array;
  if (rt::Status s = rt::readNpy(file.str(), array); !s.ok()) {
    fail(arg.describe() + ": " + s.message);
    return std::nullopt;
  }
  // Data errors belong to no line of the IR: `weft-eval: error: ...`.
  MLIRContext *context = arg.type.getContext();
  ToolDiagnosticHandler diagnostics(context, "weft-eval");
  FailureOr<eval::Tensor> t = eval::Tensor::fromHostArray(
      array, arg.type, arg.describe() + ": " + file.str(),
      UnknownLoc::get(context));
  if (failed(t))
    return std::nullopt;
  return std::move(*t);
}

/// Parses `text` as the value of the 0-d argument `arg`: an integer for
/// integer (and i1) element types, any number for float ones.
std::optional<eval::Tensor> parseScalar(const ArgInfo &arg, StringRef name,
                                        StringRef text) {
  std::string what = "--scalar " + name.str() + "=" + text.str() + ": ";
  std::string type = typeString(arg.type);
  if (arg.type.getRank() != 0) {
    fail(what + arg.describe() + " has type " + type +
         ", not a 0-d tensor; bind it with --input " + name + "=FILE.npy");
    return std::nullopt;
  }
  eval::Tensor t = eval::Tensor::zeros(arg.type);
  Type elementType = arg.type.getElementType();
  if (auto floatType = dyn_cast<FloatType>(elementType)) {
    double v;
    if (text.trim().getAsDouble(v)) {
      fail(what + "not a number (" + arg.describe() + " is " + type + ")");
      return std::nullopt;
    }
    t.fp[0] = eval::roundToFloat(floatType, v);
    return t;
  }
  auto intType = dyn_cast<IntegerType>(elementType);
  int64_t v;
  if (!intType || text.trim().getAsInteger(10, v)) {
    fail(what + "not an integer (" + arg.describe() + " is " + type + ")");
    return std::nullopt;
  }
  if (eval::wrapToInteger(intType, v) != v) {
    fail(what + "out of range for " + type);
    return std::nullopt;
  }
  t.ints[0] = v;
  return t;
}

/// Whether `name` can be used as a file name inside a folder as is.
bool isFileName(StringRef name) {
  return !name.empty() && name != "." && name != ".." && !name.contains('/') &&
         !name.contains('\\') && !name.contains('\0');
}

/// The file name (without .npy) of result `i` for --output-dir.
std::string resultName(func::FuncOp fn, unsigned i) {
  std::optional<contract::Slot> slot = getResultSlot(fn, i);
  if (!slot || slot->role == contract::Role::Input)
    return "result" + std::to_string(i);
  if (slot->role == contract::Role::Grad)
    return "grad." + slot->name;
  return slot->name;
}

/// Writes `array` to `path` through a temporary file renamed into place, so
/// a reader never sees half a file. Unlike rt::writeNpy it does not fsync:
/// results are scratch files, and a training loop writes ~100 per step.
LogicalResult writeResult(const std::string &path, const rt::HostArray &array) {
  std::vector<uint8_t> bytes;
  if (rt::Status s = rt::serializeNpy(array, path, bytes); !s.ok()) {
    fail(s.message);
    return failure();
  }
  if (llvm::Error e = llvm::writeToOutput(path, [&](raw_ostream &os) {
        os.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
        return llvm::Error::success();
      })) {
    fail("cannot write " + path + ": " + llvm::toString(std::move(e)));
    return failure();
  }
  return success();
}

/// A name list for error messages, shortened for models with many
/// parameters.
std::string listNames(ArrayRef<std::string> names) {
  if (names.empty())
    return "none";
  constexpr size_t kShown = 12;
  std::string s = llvm::join(names.take_front(kShown), ", ");
  if (names.size() > kShown)
    s += ", ... (" + std::to_string(names.size()) + " in all)";
  return s;
}

void printTensor(unsigned index, const eval::Tensor &t,
                 const std::string &path) {
  llvm::outs() << "result " << index << ": " << t.getType() << " -> " << path
               << "\n  [";
  constexpr int64_t kShown = 8;
  int64_t n = t.numElements();
  for (int64_t i = 0; i < std::min(n, kShown); ++i) {
    if (i)
      llvm::outs() << ", ";
    if (t.isFloat())
      llvm::outs() << llvm::format("%.6g", t.fp[i]);
    else
      llvm::outs() << t.ints[i];
  }
  if (n > kShown)
    llvm::outs() << ", ... (" << n << " elements)";
  llvm::outs() << "]\n";
}

int run(MLIRContext &context) {
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file =
      openInputFile(inputFilename, &error);
  if (!file)
    return fail(error);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&context));
  if (!module)
    return 1;

  func::FuncOp fn = selectFunction(*module, error);
  if (!fn)
    return fail(error);
  std::string fnLabel = "@" + fn.getSymName().str();
  if (fn.isExternal())
    return fail("function " + fnLabel + " has no body");

  // Describe every argument and index them by the names bindings use.
  SmallVector<ArgInfo> args;
  llvm::StringMap<unsigned> inputIndex, paramIndex;
  std::vector<std::string> inputNames, paramNames;
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i) {
    ArgInfo info;
    info.type = dyn_cast<RankedTensorType>(fn.getArgumentTypes()[i]);
    if (!info.type || !info.type.hasStaticShape())
      return fail("argument #" + std::to_string(i) + " of " + fnLabel +
                  " has type " + typeString(fn.getArgumentTypes()[i]) +
                  "; the evaluator needs statically shaped tensors");
    std::optional<contract::Slot> slot = getArgSlot(fn, i);
    contract::Role role = slot ? slot->role : contract::Role::Output;
    if (role == contract::Role::Input) {
      info = {ArgInfo::Input, slot->name, info.type};
      inputIndex[info.name] = i;
      inputNames.push_back(info.name);
    } else if (role == contract::Role::Param) {
      info = {ArgInfo::Param, slot->name, info.type};
    } else if (role == contract::Role::Buffer) {
      info = {ArgInfo::Buffer, slot->name, info.type};
    } else if (role == contract::Role::State) {
      info = {ArgInfo::State, slot->name, info.type};
    } else {
      info.name = "arg" + std::to_string(i);
      inputIndex[info.name] = i;
      inputNames.push_back(info.name);
    }
    if (info.kind == ArgInfo::Param || info.kind == ArgInfo::Buffer ||
        info.kind == ArgInfo::State) {
      paramIndex[info.name] = i;
      paramNames.push_back(info.name);
    }
    args.push_back(std::move(info));
  }

  // Keys and values point into the cl::list storage, which outlives run().
  llvm::MapVector<StringRef, StringRef> inputs, scalars, params;
  if (failed(parseBindings("input", inputBindings, inputs)) ||
      failed(parseBindings("scalar", scalarBindings, scalars, "NAME=VALUE")) ||
      failed(parseBindings("param", paramBindings, params)))
    return 1;

  SmallVector<std::optional<eval::Tensor>> values(args.size());
  for (auto &[name, path] : inputs) {
    auto it = inputIndex.find(name);
    if (it == inputIndex.end()) {
      auto param = paramIndex.find(name);
      if (param != paramIndex.end())
        return fail("--input " + name + ": '" + name + "' is a parameter of " +
                    fnLabel + "; bind it with --param " + name + "=FILE.npy");
      return fail("--input " + name + ": " + fnLabel + " has no input named '" +
                  name + "' (inputs: " + listNames(inputNames) + ")");
    }
    if (!(values[it->second] = loadNpy(args[it->second], path)))
      return 1;
  }
  for (auto &[name, text] : scalars) {
    auto it = inputIndex.find(name);
    if (it == inputIndex.end())
      return fail("--scalar " + name + ": " + fnLabel +
                  " has no input named '" + name +
                  "' (inputs: " + listNames(inputNames) + ")");
    if (values[it->second])
      return fail("--scalar " + name + ": input '" + name +
                  "' is already bound by --input");
    if (!(values[it->second] = parseScalar(args[it->second], name, text)))
      return 1;
  }
  for (auto &[name, path] : params) {
    auto it = paramIndex.find(name);
    if (it == paramIndex.end())
      return fail("--param " + name + ": " + fnLabel +
                  " has no parameter, buffer or optimizer state named '" +
                  name + "' (parameters: " + listNames(paramNames) + ")");
    if (!(values[it->second] = loadNpy(args[it->second], path)))
      return 1;
  }
  if (!paramDir.empty()) {
    if (!llvm::sys::fs::is_directory(paramDir))
      return fail("--param-dir " + paramDir + ": no such directory");
    for (auto [i, arg] : llvm::enumerate(args)) {
      if (values[i] || arg.kind == ArgInfo::Input ||
          arg.kind == ArgInfo::Untagged || !isFileName(arg.name))
        continue;
      SmallString<256> path(paramDir);
      llvm::sys::path::append(path, arg.name + ".npy");
      if (llvm::sys::fs::exists(path) && !(values[i] = loadNpy(arg, path)))
        return 1;
    }
  }

  // Inputs must be bound explicitly; parameters fall back to the weights.
  std::vector<std::string> fromWeights;
  std::vector<unsigned> fromWeightsArgs;
  for (auto [i, arg] : llvm::enumerate(args)) {
    if (values[i])
      continue;
    if (arg.kind == ArgInfo::Input)
      return fail("input '" + arg.name + "' (" + typeString(arg.type) +
                  ") is not bound: pass --input " + arg.name + "=FILE.npy");
    if (arg.kind == ArgInfo::Untagged)
      return fail("argument #" + std::to_string(i) + " (" +
                  typeString(arg.type) +
                  ") has no weft.input or weft.param attribute and is not "
                  "bound: pass --input " +
                  arg.name + "=FILE.npy");
    // Optimizer state starts at zero (torch.optim's lazily created state).
    if (arg.kind == ArgInfo::State) {
      values[i] = eval::Tensor::zeros(arg.type);
      continue;
    }
    fromWeights.push_back(arg.name);
    fromWeightsArgs.push_back(i);
  }
  if (!fromWeights.empty()) {
    std::string path = weightsPath;
    if (path.empty()) {
      auto attr =
          (*module)->getAttrOfType<StringAttr>(WeftDialect::kWeightsAttrName);
      if (!attr)
        return fail(args[fromWeightsArgs.front()].describe() + " (" +
                    typeString(args[fromWeightsArgs.front()].type) +
                    ") has no value: pass --param " + fromWeights.front() +
                    "=FILE.npy or --weights=PATH (the module has no " +
                    WeftDialect::kWeightsAttrName.str() + " attribute)");
      path = resolveWeightsPath(attr.str(), inputFilename);
    }
    std::vector<rt::HostArray> arrays;
    if (rt::Status s = readWeights(path, fromWeights, arrays); !s.ok())
      return fail(s.message);
    if (arrays.size() != fromWeights.size())
      return fail("reading " + path + " returned " +
                  std::to_string(arrays.size()) + " arrays for " +
                  std::to_string(fromWeights.size()) + " names");
    for (auto [argIndex, array] : llvm::zip_equal(fromWeightsArgs, arrays)) {
      const ArgInfo &arg = args[argIndex];
      ToolDiagnosticHandler diagnostics(&context, "weft-eval");
      FailureOr<eval::Tensor> t = eval::Tensor::fromHostArray(
          array, arg.type, arg.describe() + " in " + path,
          UnknownLoc::get(&context));
      if (failed(t))
        return 1;
      values[argIndex] = std::move(*t);
    }
  }

  SmallVector<eval::Tensor> argValues;
  for (std::optional<eval::Tensor> &v : values)
    argValues.push_back(std::move(*v));
  FailureOr<SmallVector<eval::Tensor>> results =
      eval::evaluateFunction(fn, argValues);
  if (failed(results))
    return 1;

  // Result i goes to PREFIX.i.npy and/or DIR/NAME.npy.
  bool toDir = !outputDir.empty();
  bool toPrefix = !toDir || outputPrefix.getNumOccurrences() > 0;
  SmallVector<std::string> dirPaths;
  if (toDir) {
    llvm::StringMap<unsigned> seen;
    for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i) {
      std::string name = resultName(fn, i);
      if (!isFileName(name))
        return fail("result " + std::to_string(i) + " of " + fnLabel +
                    " is named '" + name +
                    "', which cannot be a file name in --output-dir");
      auto [it, inserted] = seen.try_emplace(name, i);
      if (!inserted)
        return fail("results " + std::to_string(it->second) + " and " +
                    std::to_string(i) + " of " + fnLabel + " are both named '" +
                    name + "'; --output-dir needs distinct names");
      SmallString<256> path(outputDir);
      llvm::sys::path::append(path, name + ".npy");
      dirPaths.push_back(std::string(path));
    }
    if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
      return fail("--output-dir " + outputDir + ": " + ec.message());
  }

  for (auto [i, result] : llvm::enumerate(*results)) {
    SmallVector<std::string, 2> paths;
    if (toPrefix)
      paths.push_back(outputPrefix + "." + std::to_string(i) + ".npy");
    if (toDir)
      paths.push_back(dirPaths[i]);
    rt::HostArray array = result.toHostArray();
    // NumPy has no bf16; f16 widens too so that every float result reads
    // back as f32 or f64.
    if (array.dtype == rt::DType::BF16 || array.dtype == rt::DType::F16) {
      rt::HostArray wide = rt::HostArray::zeros(rt::DType::F32, array.shape);
      for (int64_t k = 0, e = array.numElements(); k < e; ++k)
        wide.setFromDouble(k, array.getAsDouble(k));
      array = std::move(wide);
    }
    for (const std::string &path : paths)
      if (failed(writeResult(path, array)))
        return 1;
    if (printResults)
      printTensor(i, result, paths.back());
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(evalCategory);
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "weft-eval (Weft) " << weft::getWeftVersion() << "\n";
  });
  cl::ParseCommandLineOptions(
      argc, argv,
      "Weft reference evaluator: runs a weft function on .npy "
      "inputs and writes its results as .npy files\n");
  DialectRegistry registry;
  // Only what weft-eval reads: weft ops inside func.func.
  registry.insert<WeftDialect, func::FuncDialect>();
  MLIRContext context(registry);
  return run(context);
}
