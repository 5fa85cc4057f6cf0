//===- weft-eval.cpp - Run a weft function on the reference evaluator -----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// weft-eval FILE.mlir [--fn=NAME] [--input NAME=X.npy]... [--scalar
//           NAME=VALUE]... [--param NAME=W.npy]... [--param-dir DIR]
//           [--weights=PATH] [-o PREFIX | --output-dir DIR] [--print]
//           [--ranks N [--rank-fn PATTERN] [--recv-timeout SECONDS]]
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
// With --ranks N the module holds one function per pipeline rank, which
// pass tensors with weft.send / weft.recv: each rank runs its function in
// a thread of its own, all sharing the parsed module read-only, and the
// ranks' messages go through one eval::LocalMailbox. Bindings apply to
// every rank's function by name; each rank's results are written as in
// the one-function case (see --output-dir for names several ranks return).
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/TrainStep.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Evaluator/Evaluator.h"
#include "weft/Formats/Npy.h"
#include "weft/Import/Weights.h"
#include "weft/Support/Diagnostics.h"
#include "weft/Support/Version.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <thread>

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
                    "else @forward); with --ranks, rank R runs NAME.rank<R>"),
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
             "weft.grad -> grad.NAME, none -> resultI (DIR is created). "
             "With --ranks: unnamed results are rank<R>.resultI; a name "
             "several ranks return (a tied parameter) is written once and "
             "must have the same value on each, else it is an error"),
    cl::value_desc("dir"), cl::cat(evalCategory));
cl::opt<bool>
    printResults("print", cl::desc("Print each result's type and first values"),
                 cl::init(false), cl::cat(evalCategory));
cl::opt<unsigned> numRanks(
    "ranks",
    cl::desc("Run N ranks together, one thread each: rank R evaluates the "
             "function --rank-fn names, and weft.send / weft.recv pass "
             "tensors between them. Bindings apply to every rank's function "
             "by name; -o writes PREFIX.rank<R>.I.npy. Any rank failing stops "
             "all; a rank that returns with messages to it unread fails"),
    cl::value_desc("N"), cl::init(0), cl::cat(evalCategory));
cl::opt<std::string> rankFnPattern(
    "rank-fn",
    cl::desc("With --ranks: the function of rank R, {r} standing for R "
             "(default: NAME.rank{r} with NAME from --fn, else "
             "train_step.rank{r}, the names the pipeline split gives)"),
    cl::value_desc("pattern"), cl::cat(evalCategory));
cl::opt<double> recvTimeout(
    "recv-timeout",
    cl::desc("With --ranks: seconds a weft.recv waits for its message "
             "before failing (default 60; 0: no limit). A message that can "
             "never come "
             "(its sender returned, or every rank waits) fails at once"),
    cl::value_desc("seconds"), cl::init(60), cl::cat(evalCategory));

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

void printTensor(const std::string &label, const eval::Tensor &t,
                 const std::string &path) {
  llvm::outs() << label << ": " << t.getType() << " -> " << path << "\n  [";
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

/// A result as .npy writes it. NumPy has no bf16; f16 widens too so that
/// every float result reads back as f32 or f64.
rt::HostArray toNpyArray(const eval::Tensor &t) {
  rt::HostArray array = t.toHostArray();
  if (array.dtype == rt::DType::BF16 || array.dtype == rt::DType::F16) {
    rt::HostArray wide = rt::HostArray::zeros(rt::DType::F32, array.shape);
    for (int64_t k = 0, e = array.numElements(); k < e; ++k)
      wide.setFromDouble(k, array.getAsDouble(k));
    array = std::move(wide);
  }
  return array;
}

/// A function's arguments, indexed by the names bindings use.
struct Signature {
  func::FuncOp fn;
  std::string label; // "@name"
  SmallVector<ArgInfo> args;
  llvm::StringMap<unsigned> inputIndex, paramIndex;
  std::vector<std::string> inputNames, paramNames;
};

std::optional<Signature> describeArguments(func::FuncOp fn) {
  Signature sig;
  sig.fn = fn;
  sig.label = "@" + fn.getSymName().str();
  if (fn.isExternal()) {
    fail("function " + sig.label + " has no body");
    return std::nullopt;
  }
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i) {
    ArgInfo info;
    info.type = dyn_cast<RankedTensorType>(fn.getArgumentTypes()[i]);
    if (!info.type || !info.type.hasStaticShape()) {
      fail("argument #" + std::to_string(i) + " of " + sig.label +
           " has type " + typeString(fn.getArgumentTypes()[i]) +
           "; the evaluator needs statically shaped tensors");
      return std::nullopt;
    }
    std::optional<contract::Slot> slot = getArgSlot(fn, i);
    contract::Role role = slot ? slot->role : contract::Role::Output;
    if (role == contract::Role::Input) {
      info = {ArgInfo::Input, slot->name, info.type};
      sig.inputIndex[info.name] = i;
      sig.inputNames.push_back(info.name);
    } else if (role == contract::Role::Param) {
      info = {ArgInfo::Param, slot->name, info.type};
    } else if (role == contract::Role::Buffer) {
      info = {ArgInfo::Buffer, slot->name, info.type};
    } else if (role == contract::Role::State) {
      info = {ArgInfo::State, slot->name, info.type};
    } else {
      info.name = "arg" + std::to_string(i);
      sig.inputIndex[info.name] = i;
      sig.inputNames.push_back(info.name);
    }
    if (info.kind == ArgInfo::Param || info.kind == ArgInfo::Buffer ||
        info.kind == ArgInfo::State) {
      sig.paramIndex[info.name] = i;
      sig.paramNames.push_back(info.name);
    }
    sig.args.push_back(std::move(info));
  }
  return sig;
}

/// The --input, --scalar and --param flags. Keys and values point into the
/// cl::list storage, which outlives run().
struct Bindings {
  llvm::MapVector<StringRef, StringRef> inputs, scalars, params;
};

/// Where each argument of `sig.fn` gets its value, and the values. With
/// `shared` (--ranks), a binding that names no argument of this function is
/// left to the other ranks' functions, `where` ("rank R (@fn): ") starts
/// the errors about this function, and `used` collects "flag:NAME" for the
/// bindings it took, so bindings no rank takes can be reported afterwards.
std::optional<SmallVector<eval::Tensor>>
bindArguments(ModuleOp module, const Signature &sig, const Bindings &bindings,
              bool shared, const std::string &where, llvm::StringSet<> &used) {
  MLIRContext *context = module.getContext();
  const SmallVector<ArgInfo> &args = sig.args;
  const std::string &fnLabel = sig.label;
  SmallVector<std::optional<eval::Tensor>> values(args.size());
  for (auto &[name, path] : bindings.inputs) {
    auto it = sig.inputIndex.find(name);
    if (it == sig.inputIndex.end()) {
      if (sig.paramIndex.count(name)) {
        fail("--input " + name + ": '" + name + "' is a parameter of " +
             fnLabel + "; bind it with --param " + name + "=FILE.npy");
        return std::nullopt;
      }
      if (shared)
        continue;
      fail("--input " + name + ": " + fnLabel + " has no input named '" + name +
           "' (inputs: " + listNames(sig.inputNames) + ")");
      return std::nullopt;
    }
    used.insert(("input:" + name).str());
    if (!(values[it->second] = loadNpy(args[it->second], path)))
      return std::nullopt;
  }
  for (auto &[name, text] : bindings.scalars) {
    auto it = sig.inputIndex.find(name);
    if (it == sig.inputIndex.end()) {
      if (shared)
        continue;
      fail("--scalar " + name + ": " + fnLabel + " has no input named '" +
           name + "' (inputs: " + listNames(sig.inputNames) + ")");
      return std::nullopt;
    }
    used.insert(("scalar:" + name).str());
    if (values[it->second]) {
      fail("--scalar " + name + ": input '" + name +
           "' is already bound by --input");
      return std::nullopt;
    }
    if (!(values[it->second] = parseScalar(args[it->second], name, text)))
      return std::nullopt;
  }
  for (auto &[name, path] : bindings.params) {
    auto it = sig.paramIndex.find(name);
    if (it == sig.paramIndex.end()) {
      if (shared)
        continue;
      fail("--param " + name + ": " + fnLabel +
           " has no parameter, buffer or optimizer state named '" + name +
           "' (parameters: " + listNames(sig.paramNames) + ")");
      return std::nullopt;
    }
    used.insert(("param:" + name).str());
    if (!(values[it->second] = loadNpy(args[it->second], path)))
      return std::nullopt;
  }
  if (!paramDir.empty()) {
    for (auto [i, arg] : llvm::enumerate(args)) {
      if (values[i] || arg.kind == ArgInfo::Input ||
          arg.kind == ArgInfo::Untagged || !isFileName(arg.name))
        continue;
      SmallString<256> path(paramDir);
      llvm::sys::path::append(path, arg.name + ".npy");
      if (llvm::sys::fs::exists(path) && !(values[i] = loadNpy(arg, path)))
        return std::nullopt;
    }
  }

  // Inputs must be bound explicitly; parameters fall back to the weights.
  std::vector<std::string> fromWeights;
  std::vector<unsigned> fromWeightsArgs;
  for (auto [i, arg] : llvm::enumerate(args)) {
    if (values[i])
      continue;
    if (arg.kind == ArgInfo::Input) {
      fail(where + "input '" + arg.name + "' (" + typeString(arg.type) +
           ") is not bound: pass --input " + arg.name + "=FILE.npy");
      return std::nullopt;
    }
    if (arg.kind == ArgInfo::Untagged) {
      fail(where + "argument #" + std::to_string(i) + " (" +
           typeString(arg.type) +
           ") has no weft.input or weft.param attribute and is not "
           "bound: pass --input " +
           arg.name + "=FILE.npy");
      return std::nullopt;
    }
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
          module->getAttrOfType<StringAttr>(WeftDialect::kWeightsAttrName);
      if (!attr) {
        fail(where + args[fromWeightsArgs.front()].describe() + " (" +
             typeString(args[fromWeightsArgs.front()].type) +
             ") has no value: pass --param " + fromWeights.front() +
             "=FILE.npy or --weights=PATH (the module has no " +
             WeftDialect::kWeightsAttrName.str() + " attribute)");
        return std::nullopt;
      }
      path = resolveWeightsPath(attr.str(), inputFilename);
    }
    std::vector<rt::HostArray> arrays;
    if (rt::Status s = readWeights(path, fromWeights, arrays); !s.ok()) {
      fail(where + s.message);
      return std::nullopt;
    }
    if (arrays.size() != fromWeights.size()) {
      fail("reading " + path + " returned " + std::to_string(arrays.size()) +
           " arrays for " + std::to_string(fromWeights.size()) + " names");
      return std::nullopt;
    }
    for (auto [argIndex, array] : llvm::zip_equal(fromWeightsArgs, arrays)) {
      const ArgInfo &arg = args[argIndex];
      ToolDiagnosticHandler diagnostics(context, "weft-eval");
      FailureOr<eval::Tensor> t = eval::Tensor::fromHostArray(
          array, arg.type, arg.describe() + " in " + path,
          UnknownLoc::get(context));
      if (failed(t))
        return std::nullopt;
      values[argIndex] = std::move(*t);
    }
  }

  SmallVector<eval::Tensor> argValues;
  for (std::optional<eval::Tensor> &v : values)
    argValues.push_back(std::move(*v));
  return argValues;
}

/// Runs the one function --fn selects and writes its results.
int runOne(ModuleOp module, const Bindings &bindings) {
  std::string error;
  func::FuncOp fn = selectFunction(module, error);
  if (!fn)
    return fail(error);
  std::optional<Signature> sig = describeArguments(fn);
  if (!sig)
    return 1;
  const std::string &fnLabel = sig->label;
  llvm::StringSet<> used;
  std::optional<SmallVector<eval::Tensor>> argValues =
      bindArguments(module, *sig, bindings, /*shared=*/false, "", used);
  if (!argValues)
    return 1;
  FailureOr<SmallVector<eval::Tensor>> results =
      eval::evaluateFunction(fn, *argValues);
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
    rt::HostArray array = toNpyArray(result);
    for (const std::string &path : paths)
      if (failed(writeResult(path, array)))
        return 1;
    if (printResults)
      printTensor("result " + std::to_string(i), result, paths.back());
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// --ranks
//===----------------------------------------------------------------------===//

/// The rank a thread evaluates, so diagnostics land in that rank's log; -1
/// on the main thread.
thread_local int64_t diagnosticRank = -1;

/// A SourceMgrDiagnosticHandler whose rendering can be called directly, so
/// one dispatching handler can send each rank's diagnostics to its own log.
class RenderingHandler : public SourceMgrDiagnosticHandler {
public:
  using SourceMgrDiagnosticHandler::emitDiagnostic;
  using SourceMgrDiagnosticHandler::SourceMgrDiagnosticHandler;
};

/// Whether `a` and `b` hold the same type and bits (NaNs alike included).
/// Returns the first differing element in `at`, or -1 for a type mismatch.
bool sameValue(const eval::Tensor &a, const eval::Tensor &b, int64_t &at) {
  at = -1;
  if (a.getType() != b.getType())
    return false;
  for (int64_t i = 0, e = a.numElements(); i < e; ++i) {
    bool same = a.isFloat()
                    ? std::memcmp(&a.fp[i], &b.fp[i], sizeof(double)) == 0 ||
                          (std::isnan(a.fp[i]) && std::isnan(b.fp[i]))
                    : a.ints[i] == b.ints[i];
    if (!same) {
      at = i;
      return false;
    }
  }
  return true;
}

std::string elementString(const eval::Tensor &t, int64_t i) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (t.isFloat())
    os << llvm::format("%.9g", t.fp[i]);
  else
    os << t.ints[i];
  return s;
}

/// What --ranks runs: per rank its function and its argument values.
struct RankRun {
  std::string pattern; // --rank-fn, or its default
  SmallVector<Signature> sigs;
  SmallVector<SmallVector<eval::Tensor>> args;
};

/// Finds each rank's function and binds its arguments, on this thread:
/// reading files and weights reports through the context's handlers.
std::optional<RankRun> prepareRanks(ModuleOp module, const Bindings &bindings) {
  int64_t n = numRanks;
  RankRun run;
  if (!fnName.empty() && !rankFnPattern.empty()) {
    fail("--fn and --rank-fn both name the functions to run; with --ranks "
         "give --rank-fn PATTERN (or --fn NAME for NAME.rank{r})");
    return std::nullopt;
  }
  run.pattern = !rankFnPattern.empty() ? rankFnPattern
                : !fnName.empty()      ? fnName + ".rank{r}"
                                       : "train_step.rank{r}";
  const std::string &pattern = run.pattern;
  if (pattern.find("{r}") == std::string::npos) {
    fail("--rank-fn '" + pattern +
         "' has no {r}: each rank runs its own function, e.g. --rank-fn "
         "'train_step.rank{r}'");
    return std::nullopt;
  }
  if (!(recvTimeout >= 0) || recvTimeout > 1e6) {
    fail("--recv-timeout " + std::to_string(recvTimeout) +
         ": expected seconds between 0 (no limit) and 1000000");
    return std::nullopt;
  }
  if (auto mesh = module->getAttrOfType<MeshAttr>(WeftDialect::kMeshAttrName))
    if (mesh.getNumDevices() != n) {
      std::string meshText;
      llvm::raw_string_ostream os(meshText);
      os << mesh;
      fail("--ranks " + std::to_string(n) + ": the module's mesh " + meshText +
           " has " + std::to_string(mesh.getNumDevices()) +
           " ranks; pass --ranks " + std::to_string(mesh.getNumDevices()));
      return std::nullopt;
    }
  auto nameOf = [&](int64_t r) {
    std::string name = pattern;
    for (size_t pos; (pos = name.find("{r}")) != std::string::npos;)
      name.replace(pos, 3, std::to_string(r));
    return name;
  };
  std::vector<std::string> allNames;
  for (func::FuncOp fn : module.getOps<func::FuncOp>())
    allNames.push_back("@" + fn.getSymName().str());

  llvm::StringSet<> used;
  for (int64_t r = 0; r < n; ++r) {
    std::string name = nameOf(r);
    auto fn = module.lookupSymbol<func::FuncOp>(name);
    if (!fn) {
      fail("--ranks " + std::to_string(n) + ": no function @" + name +
           " for rank " + std::to_string(r) + " (--rank-fn '" + pattern +
           "'; functions: " + listNames(allNames) + ")");
      return std::nullopt;
    }
    std::optional<Signature> sig = describeArguments(fn);
    if (!sig)
      return std::nullopt;
    std::string where = "rank " + std::to_string(r) + " (" + sig->label + "): ";
    std::optional<SmallVector<eval::Tensor>> values =
        bindArguments(module, *sig, bindings, /*shared=*/true, where, used);
    if (!values)
      return std::nullopt;
    run.sigs.push_back(std::move(*sig));
    run.args.push_back(std::move(*values));
  }
  // One rank more than asked for is most likely a wrong --ranks, whose
  // messages to that rank would never be read.
  if (std::string extra = nameOf(n); module.lookupSymbol<func::FuncOp>(extra)) {
    fail("--ranks " + std::to_string(n) + " runs ranks 0 to " +
         std::to_string(n - 1) + ", but the module also has @" + extra +
         "; pass the number of ranks the module was split for");
    return std::nullopt;
  }
  // A binding no rank's function takes is a typo, as it is for one function.
  for (auto [flag, map] :
       {std::pair<StringRef, const llvm::MapVector<StringRef, StringRef> *>{
            "input", &bindings.inputs},
        {"scalar", &bindings.scalars},
        {"param", &bindings.params}})
    for (auto &entry : *map)
      if (!used.contains((flag + ":" + entry.first).str())) {
        fail("--" + flag + " " + entry.first + ": no rank's function has " +
             (flag == "param" ? "a parameter, buffer or optimizer state"
                              : "an input") +
             " named '" + entry.first + "' (--ranks " + std::to_string(n) +
             ", --rank-fn '" + pattern + "')");
        return std::nullopt;
      }
  return run;
}

/// Evaluates every rank in a thread of its own, all passing messages through
/// one mailbox. On failure prints the diagnostics of the ranks that failed
/// (not of those stopped because another failed) and says which.
std::optional<std::vector<SmallVector<eval::Tensor>>>
evaluateRanks(const RankRun &run, RenderingHandler &mainDiagnostics,
              llvm::SourceMgr &sourceMgr) {
  int64_t n = run.sigs.size();
  MLIRContext *context = func::FuncOp(run.sigs.front().fn).getContext();
  // Each rank's diagnostics go to its own log, printed once all have
  // stopped, so two ranks' errors never interleave. The engine calls
  // handlers under its own lock, so rendering is serialized.
  std::vector<std::string> logs(n);
  std::vector<std::unique_ptr<llvm::raw_string_ostream>> logStreams;
  std::vector<std::unique_ptr<RenderingHandler>> renderers;
  for (int64_t r = 0; r < n; ++r) {
    logStreams.push_back(std::make_unique<llvm::raw_string_ostream>(logs[r]));
    renderers.push_back(std::make_unique<RenderingHandler>(sourceMgr, context,
                                                           *logStreams.back()));
  }
  ScopedDiagnosticHandler dispatch(context, [&](Diagnostic &diag) {
    if (diagnosticRank < 0)
      mainDiagnostics.emitDiagnostic(diag);
    else
      renderers[diagnosticRank]->emitDiagnostic(diag);
    return success();
  });

  // The threads only read the module: evaluation walks ops and uses and
  // looks up callees, and builds types through the context's uniquer, which
  // locks while the context is multithreaded (the default).
  eval::LocalMailbox mailbox(n);
  std::vector<FailureOr<SmallVector<eval::Tensor>>> results(
      n, FailureOr<SmallVector<eval::Tensor>>(failure()));
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      diagnosticRank = r;
      eval::RankContext ctx;
      ctx.rank = r;
      ctx.mailbox = &mailbox;
      ctx.recvTimeout = std::chrono::milliseconds(
          static_cast<int64_t>(std::llround(recvTimeout * 1000)));
      results[r] = eval::evaluateFunction(run.sigs[r].fn, run.args[r], ctx);
      if (failed(results[r]))
        mailbox.stop();
    });
  }
  for (std::thread &t : threads)
    t.join();
  for (auto &stream : logStreams)
    stream->flush();

  // A rank that failed on its own has a log; one stopped because another
  // failed has none.
  std::vector<std::string> failedRanks, stoppedRanks;
  for (int64_t r = 0; r < n; ++r) {
    if (succeeded(results[r]))
      continue;
    if (logs[r].empty()) {
      stoppedRanks.push_back(std::to_string(r));
      continue;
    }
    llvm::errs() << logs[r];
    failedRanks.push_back(std::to_string(r) + " (" + run.sigs[r].label + ")");
  }
  auto ranks = [](ArrayRef<std::string> list) {
    return (list.size() == 1 ? "rank " : "ranks ") + llvm::join(list, ", ");
  };
  if (!failedRanks.empty()) {
    std::string message = ranks(failedRanks) + " failed";
    if (!stoppedRanks.empty())
      message += "; stopped " + ranks(stoppedRanks);
    fail(message);
    return std::nullopt;
  }
  if (!stoppedRanks.empty()) {
    fail(ranks(stoppedRanks) + " stopped without reporting why");
    return std::nullopt;
  }
  std::vector<SmallVector<eval::Tensor>> values;
  for (FailureOr<SmallVector<eval::Tensor>> &result : results)
    values.push_back(std::move(*result));
  return values;
}

/// Writes every rank's results: PREFIX.rank<R>.I.npy and/or DIR/NAME.npy.
int writeRankResults(const RankRun &run,
                     ArrayRef<SmallVector<eval::Tensor>> results) {
  int64_t n = run.sigs.size();
  bool toDir = !outputDir.empty();
  bool toPrefix = !toDir || outputPrefix.getNumOccurrences() > 0;
  struct Holder {
    int64_t rank;
    unsigned index;
  };
  llvm::StringMap<Holder> byName;
  // Per rank and result: its file in DIR, and whether another rank's equal
  // value is written there instead.
  std::vector<SmallVector<std::string>> dirPaths(n);
  std::vector<SmallVector<bool>> writtenByOther(n);
  for (int64_t r = 0; r < n; ++r) {
    func::FuncOp fn = run.sigs[r].fn;
    const std::string &fnLabel = run.sigs[r].label;
    dirPaths[r].resize(fn.getNumResults());
    writtenByOther[r].resize(fn.getNumResults());
    if (!toDir)
      continue;
    for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i) {
      std::optional<contract::Slot> slot = getResultSlot(fn, i);
      bool named = slot && slot->role != contract::Role::Input;
      std::string name =
          named ? resultName(fn, i)
                : "rank" + std::to_string(r) + ".result" + std::to_string(i);
      if (!isFileName(name))
        return fail("rank " + std::to_string(r) + ": result " +
                    std::to_string(i) + " of " + fnLabel + " is named '" +
                    name + "', which cannot be a file name in --output-dir");
      SmallString<256> path(outputDir);
      llvm::sys::path::append(path, name + ".npy");
      dirPaths[r][i] = std::string(path);
      auto [it, inserted] = byName.try_emplace(name, Holder{r, i});
      if (inserted)
        continue;
      Holder first = it->second;
      if (first.rank == r)
        return fail("results " + std::to_string(first.index) + " and " +
                    std::to_string(i) + " of " + fnLabel + " are both named '" +
                    name + "'; --output-dir needs distinct names");
      const eval::Tensor &a = results[first.rank][first.index];
      const eval::Tensor &b = results[r][i];
      int64_t at;
      if (sameValue(a, b, at)) {
        writtenByOther[r][i] = true; // A tied parameter kept in step.
        continue;
      }
      std::string why =
          at < 0 ? typeString(a.getType()) + " vs " + typeString(b.getType())
                 : "element " + std::to_string(at) + ": " +
                       elementString(a, at) + " vs " + elementString(b, at);
      return fail("ranks " + std::to_string(first.rank) + " and " +
                  std::to_string(r) + " both return '" + name +
                  "' with different values (" + why +
                  "); --output-dir writes one file per name, so ranks may "
                  "share a name only for equal values");
    }
  }
  if (toDir)
    if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
      return fail("--output-dir " + outputDir + ": " + ec.message());

  for (int64_t r = 0; r < n; ++r) {
    for (auto [i, result] : llvm::enumerate(results[r])) {
      SmallVector<std::string, 2> paths;
      if (toPrefix)
        paths.push_back(outputPrefix + ".rank" + std::to_string(r) + "." +
                        std::to_string(i) + ".npy");
      if (toDir && !writtenByOther[r][i])
        paths.push_back(dirPaths[r][i]);
      rt::HostArray array = toNpyArray(result);
      for (const std::string &path : paths)
        if (failed(writeResult(path, array)))
          return 1;
      if (printResults)
        printTensor("rank " + std::to_string(r) + " result " +
                        std::to_string(i),
                    result, toDir ? dirPaths[r][i] : paths.back());
    }
  }
  return 0;
}

/// --ranks: runs rank r's function for every r < N and writes every rank's
/// results.
int runRanks(ModuleOp module, const Bindings &bindings,
             RenderingHandler &mainDiagnostics, llvm::SourceMgr &sourceMgr) {
  std::optional<RankRun> run = prepareRanks(module, bindings);
  if (!run)
    return 1;
  std::optional<std::vector<SmallVector<eval::Tensor>>> results =
      evaluateRanks(*run, mainDiagnostics, sourceMgr);
  if (!results)
    return 1;
  return writeRankResults(*run, *results);
}

int run(MLIRContext &context) {
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file =
      openInputFile(inputFilename, &error);
  if (!file)
    return fail(error);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  RenderingHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&context));
  if (!module)
    return 1;

  if (numRanks == 0 &&
      (rankFnPattern.getNumOccurrences() || recvTimeout.getNumOccurrences()))
    return fail(std::string(rankFnPattern.getNumOccurrences()
                                ? "--rank-fn"
                                : "--recv-timeout") +
                " only applies with --ranks N");

  Bindings bindings;
  if (failed(parseBindings("input", inputBindings, bindings.inputs)) ||
      failed(parseBindings("scalar", scalarBindings, bindings.scalars,
                           "NAME=VALUE")) ||
      failed(parseBindings("param", paramBindings, bindings.params)))
    return 1;
  if (!paramDir.empty() && !llvm::sys::fs::is_directory(paramDir))
    return fail("--param-dir " + paramDir + ": no such directory");

  if (numRanks > 0)
    return runRanks(*module, bindings, diagnostics, sourceMgr);
  return runOne(*module, bindings);
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
