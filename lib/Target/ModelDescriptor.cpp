//===- ModelDescriptor.cpp - weft_get_model() in LLVM IR ------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The descriptor is written as LLVM IR globals in the same module as the
// code, so one object file holds the whole model and no C compiler runs at
// compile time. The struct types mirror include/weft/Runtime/ModelABI.h;
// the target's data layout gives them C's padding. Weights are not copied
// into LLVM constants: an object file's module-level assembly `.incbin`s
// the safetensors file when the object is written, and an executable's
// weights skip LLVM and the linker altogether (appended after the link).
//
//===----------------------------------------------------------------------===//

#include "weft/Target/ModelDescriptor.h"
#include "weft/Dialect/Weft/IR/TrainStep.h"
#include "weft/Dialect/Weft/IR/Sharding.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Formats/HostArray.h"
#include "weft/Runtime/ModelABI.h"
#include "weft/Support/DTypes.h"
#include "weft/Support/Version.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Triple.h"

using namespace mlir;
using namespace weft;
namespace rt = weft::rt;

uint64_t weft::AbiTensor::bytes() const {
  uint64_t n = rt::dtypeSize(static_cast<rt::DType>(dtype));
  for (int64_t d : shape)
    n *= static_cast<uint64_t>(d);
  return n;
}

std::vector<std::string> weft::ModelAbi::weightNames() const {
  std::vector<std::string> names;
  for (const AbiTensor &t : args)
    if (t.kind == contract::roleName(contract::Role::Param) ||
        t.kind == contract::roleName(contract::Role::Buffer))
      names.push_back(t.name);
  return names;
}

namespace {
/// The runtime's dtype and shape of `type`, or an error naming the slot.
LogicalResult describe(func::FuncOp fn, Type type, const contract::Slot &slot,
                       weft::AbiTensor &tensor) {
  auto tensorType = dyn_cast<RankedTensorType>(type);
  std::optional<rt::DType> dtype;
  if (tensorType && tensorType.hasStaticShape())
    dtype = getDType(tensorType.getElementType());
  if (!dtype)
    return fn.emitError() << "'" << slot.name << "' of @" << fn.getName()
                          << " has type " << type
                          << ", which the runtime cannot pass: a statically "
                             "shaped tensor of f64, f32, f16, bf16, i64, i32, "
                             "i16, i8 or i1 is needed";
  tensor.kind = contract::roleName(slot.role);
  tensor.name = slot.name;
  tensor.dtype = static_cast<int32_t>(*dtype);
  tensor.shape.assign(tensorType.getShape().begin(),
                      tensorType.getShape().end());
  return success();
}

/// Records `sharding` (a `weft.sharding`, possibly null) of `tensor` when it
/// splits some dim, or when `stored` (a `weft.stored_shape`, possibly null)
/// says the step holds it as a view: the global shape is the local one
/// times the dim's axes.
LogicalResult describeSharding(func::FuncOp fn, Attribute attr,
                               Attribute stored, weft::MeshAttr mesh,
                               weft::AbiTensor &tensor) {
  auto sharding = dyn_cast_or_null<weft::ShardingAttr>(attr);
  weft::TensorSharding s =
      sharding ? weft::TensorSharding::fromAttr(sharding)
               : weft::TensorSharding::replicated(tensor.shape.size());
  if (s.rank() != tensor.shape.size())
    return fn.emitError() << "'" << tensor.name << "' of @" << fn.getName()
                          << " has rank " << tensor.shape.size()
                          << " but its sharding " << sharding << " has "
                          << s.rank() << " dims";
  if (auto shape = dyn_cast_or_null<DenseI64ArrayAttr>(stored))
    tensor.storedShape.assign(shape.asArrayRef().begin(),
                              shape.asArrayRef().end());
  if (s.isReplicated() && tensor.storedShape.empty())
    return success();
  if (!mesh)
    return fn.emitError() << "'" << tensor.name << "' of @" << fn.getName()
                          << (s.isReplicated()
                                  ? " is held as a view (weft.stored_shape, "
                                    "made for tensor parallelism)"
                                  : " is sharded")
                          << ", but the module has no "
                          << WeftDialect::kMeshAttrName
                          << "; compile the model with its --mesh";
  for (auto [size, axes] : llvm::zip_equal(tensor.shape, s.dims)) {
    tensor.globalShape.push_back(size * weft::axesSize(mesh, axes));
    auto &names = tensor.shardDims.emplace_back();
    for (StringAttr axis : axes)
      names.push_back(axis.str());
  }
  return success();
}
} // namespace

FailureOr<weft::ModelAbi> weft::collectModelAbi(func::FuncOp entry) {
  FailureOr<contract::StepSignature> signature = readStepSignature(entry);
  if (failed(signature))
    return failure();
  // A step's gradients are internal to it: only @loss_grad returns them.
  auto check = [&](const contract::Slot &slot, bool result) -> LogicalResult {
    bool allowed = result ? slot.role != contract::Role::Input
                          : slot.role != contract::Role::Output;
    if (slot.role == contract::Role::Grad || !allowed)
      return entry.emitError()
             << (result ? "result '" : "argument '") << slot.name << "' of @"
             << entry.getName() << " has the role '"
             << contract::roleName(slot.role)
             << "', which a compiled step cannot have there";
    return success();
  };
  ModelAbi abi;
  FunctionType type = entry.getFunctionType();
  // The runtime context (a step that communicates) is passed by the
  // wrapper, not through the argument table.
  SmallVector<Type> slotTypes;
  for (auto [i, argType] : llvm::enumerate(type.getInputs()))
    if (!isContextArg(entry, i))
      slotTypes.push_back(argType);
  auto module = entry->getParentOfType<ModuleOp>();
  auto mesh = module ? module->getAttrOfType<weft::MeshAttr>(
                           WeftDialect::kMeshAttrName)
                     : weft::MeshAttr();
  if (mesh)
    for (auto [name, size] : llvm::zip_equal(mesh.getNames(), mesh.getSizes()))
      abi.mesh.emplace_back(name.str(), size);
  SmallVector<unsigned> slotArgs;
  for (unsigned i = 0, e = entry.getNumArguments(); i < e; ++i)
    if (!isContextArg(entry, i))
      slotArgs.push_back(i);
  for (auto [slot, argType, arg] :
       llvm::zip_equal(signature->args, slotTypes, slotArgs)) {
    AbiTensor t;
    if (failed(check(slot, false)) ||
        failed(describe(entry, argType, slot, t)) ||
        failed(describeSharding(
            entry, entry.getArgAttr(arg, WeftDialect::kShardingAttrName),
            entry.getArgAttr(arg, WeftDialect::kStoredShapeAttrName), mesh,
            t)))
      return failure();
    abi.args.push_back(std::move(t));
  }
  for (auto [i, slot, resultType] :
       llvm::enumerate(signature->results, type.getResults())) {
    AbiTensor t;
    if (failed(check(slot, true)) ||
        failed(describe(entry, resultType, slot, t)) ||
        failed(describeSharding(
            entry, entry.getResultAttr(i, WeftDialect::kShardingAttrName),
            entry.getResultAttr(i, WeftDialect::kStoredShapeAttrName), mesh,
            t)))
      return failure();
    abi.results.push_back(std::move(t));
  }
  return abi;
}

std::optional<int64_t> weft::getNumClasses(ModuleOp module) {
  auto config =
      module->getAttrOfType<DictionaryAttr>(WeftDialect::kTrainConfigAttrName);
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!config || !forward || forward.getNumResults() == 0 ||
      config.getAs<StringAttr>("loss") != "cross-entropy")
    return std::nullopt;
  auto type = dyn_cast<RankedTensorType>(forward.getResultTypes().front());
  if (!type || type.getRank() == 0 || type.isDynamicDim(type.getRank() - 1))
    return std::nullopt;
  return type.getShape().back();
}

std::string weft::buildModelJson(ModuleOp module, const ModelAbi &abi,
                                 llvm::StringRef source,
                                 llvm::StringRef entry,
                                 std::optional<int64_t> numClasses) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream json(os);
  json.object([&] {
    json.attribute("weft_version", getWeftVersion());
    json.attribute("source", source.str());
    json.attribute("entry", entry.str());
    if (numClasses)
      json.attribute("num_classes", *numClasses);
    // How the step was built, as the training passes recorded it; a step
    // built without --weft-mixed-precision computes in fp32.
    auto config = module->getAttrOfType<DictionaryAttr>(
        WeftDialect::kTrainConfigAttrName);
    if (config && !config.get("precision"))
      json.attribute("precision", "fp32");
    if (config) {
      for (NamedAttribute entry : config) {
        StringRef key = entry.getName().strref();
        if (auto s = dyn_cast<StringAttr>(entry.getValue()))
          json.attribute(key, s.str());
        else if (auto f = dyn_cast<FloatAttr>(entry.getValue()))
          json.attribute(key, f.getValueAsDouble());
        else if (auto i = dyn_cast<IntegerAttr>(entry.getValue()))
          json.attribute(key, i.getInt());
        else if (auto b = dyn_cast<BoolAttr>(entry.getValue()))
          json.attribute(key, b.getValue());
      }
    }
    if (auto target = module->getAttrOfType<DictionaryAttr>(
            WeftDialect::kTargetAttrName))
      json.attributeObject("target", [&] {
        for (NamedAttribute entry : target) {
          if (auto s = dyn_cast<StringAttr>(entry.getValue()))
            json.attribute(entry.getName().strref(), s.str());
          else if (auto list = dyn_cast<ArrayAttr>(entry.getValue()))
            json.attributeArray(entry.getName().strref(), [&] {
              for (auto item : list.getAsRange<StringAttr>())
                json.value(item.str());
            });
        }
      });
    // Tied parameters' second names (weft-ckpt export writes both).
    if (auto aliases = module->getAttrOfType<DictionaryAttr>(
            WeftDialect::kAliasesAttrName))
      json.attributeObject("aliases", [&] {
        for (NamedAttribute entry : aliases)
          if (auto target = dyn_cast<StringAttr>(entry.getValue()))
            json.attribute(entry.getName().strref(), target.str());
      });
    // Defaults of the hp.* inputs, which the runtime turns into flags.
    if (auto hyper = module->getAttrOfType<DictionaryAttr>(
            WeftDialect::kHyperparametersAttrName))
      json.attributeObject("hyperparameters", [&] {
        for (NamedAttribute entry : hyper)
          if (auto value = dyn_cast<FloatAttr>(entry.getValue()))
            json.attribute(entry.getName().strref(), value.getValueAsDouble());
      });
    auto bytes = [&](StringRef name) -> int64_t {
      auto attr = module->getAttrOfType<IntegerAttr>(name);
      return attr ? attr.getInt() : 0;
    };
    json.attribute("workspace_bytes",
                   bytes(WeftDialect::kWorkspaceBytesAttrName));
    json.attribute("peak_bytes", bytes(WeftDialect::kPeakBytesAttrName));
    json.attribute("num_args", static_cast<int64_t>(abi.args.size()));
    json.attribute("num_results", static_cast<int64_t>(abi.results.size()));
    // A partitioned step: the mesh it runs on, and how each split slot
    // (by name: a param and its next value share one) cuts its global
    // tensor (docs/runtime.md).
    if (!abi.mesh.empty()) {
      json.attributeObject("mesh", [&] {
        json.attributeArray("axes", [&] {
          for (const auto &[name, size] : abi.mesh)
            json.object([&] {
              json.attribute("name", name);
              json.attribute("size", size);
            });
        });
      });
      llvm::StringSet<> written;
      json.attributeObject("shardings", [&] {
        for (const std::vector<AbiTensor> *list : {&abi.args, &abi.results})
          for (const AbiTensor &t : *list) {
            if (t.globalShape.empty() || !written.insert(t.name).second)
              continue;
            json.attributeObject(t.name, [&] {
              json.attributeArray("global_shape", [&] {
                for (int64_t d : t.globalShape)
                  json.value(d);
              });
              json.attributeArray("dims", [&] {
                for (const std::vector<std::string> &axes : t.shardDims)
                  json.array([&] {
                    for (const std::string &axis : axes)
                      json.value(axis);
                  });
              });
              if (!t.storedShape.empty())
                json.attributeArray("stored_shape", [&] {
                  for (int64_t d : t.storedShape)
                    json.value(d);
                });
            });
          }
      });
    }
  });
  return text;
}

namespace {
/// Builds the descriptor globals in one module.
class DescriptorBuilder {
public:
  explicit DescriptorBuilder(llvm::Module &module)
      : module(module), ctx(module.getContext()),
        ptr(llvm::PointerType::getUnqual(ctx)),
        i32(llvm::Type::getInt32Ty(ctx)), i64(llvm::Type::getInt64Ty(ctx)) {
    // struct WeftTensorInfo { name, kind, dtype, rank, shape }
    tensorInfo = llvm::StructType::create(ctx, {ptr, ptr, i32, i32, ptr},
                                          "struct.WeftTensorInfo");
    // struct WeftModel { abiVersion, modelJson, numArgs, args, numResults,
    //                    results, weights, weightsSize, weightsFile,
    //                    weightsFileSize, weightsFileChecksum,
    //                    workspaceBytes, trainStep, numPrograms,
    //                    programs, deviceType }
    model = llvm::StructType::create(
        ctx,
        {i32, ptr, i32, ptr, i32, ptr, ptr, i64, ptr, i64, i64, i64, ptr, i32,
         ptr, i32},
        "struct.WeftModel");
  }

  llvm::Constant *string(llvm::StringRef s) {
    auto [it, inserted] = strings.try_emplace(s, nullptr);
    if (inserted) {
      auto *init = llvm::ConstantDataArray::getString(ctx, s);
      auto *global = new llvm::GlobalVariable(
          module, init->getType(), /*isConstant=*/true,
          llvm::GlobalValue::PrivateLinkage, init, "weft.str");
      global->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
      global->setAlignment(llvm::Align(1));
      it->second = global;
    }
    return it->second;
  }

  llvm::Constant *tensorTable(llvm::ArrayRef<weft::AbiTensor> tensors,
                              llvm::StringRef name) {
    std::vector<llvm::Constant *> entries;
    for (const weft::AbiTensor &t : tensors) {
      llvm::Constant *shape = llvm::ConstantPointerNull::get(ptr);
      if (!t.shape.empty()) {
        std::vector<uint64_t> dims(t.shape.begin(), t.shape.end());
        auto *init = llvm::ConstantDataArray::get(ctx, dims);
        auto *global = new llvm::GlobalVariable(
            module, init->getType(), true, llvm::GlobalValue::PrivateLinkage,
            init, "weft.shape");
        global->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
        shape = global;
      }
      entries.push_back(llvm::ConstantStruct::get(
          tensorInfo,
          {string(t.name), string(t.kind), llvm::ConstantInt::get(i32, t.dtype),
           llvm::ConstantInt::get(i32, t.shape.size()), shape}));
    }
    if (entries.empty())
      return llvm::ConstantPointerNull::get(ptr);
    auto *type = llvm::ArrayType::get(tensorInfo, entries.size());
    return new llvm::GlobalVariable(
        module, type, true, llvm::GlobalValue::PrivateLinkage,
        llvm::ConstantArray::get(type, entries), name);
  }

  /// `void trainStep(const WeftRuntimeContext *ctx, void *const *args,
  /// void *const *results, void *ws)` calling `step(ctx?, args[0], ...,
  /// results[0], ..., ws)`: a step that communicates (`takesContext`)
  /// reaches its communicators through `ctx`.
  llvm::Function *wrapper(llvm::Function *step, bool takesContext,
                          size_t numArgs, size_t numResults) {
    auto *type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx),
                                         {ptr, ptr, ptr, ptr}, false);
    auto *fn = llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage,
                                      "weft.train_step", module);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
    std::vector<llvm::Value *> operands;
    auto load = [&](llvm::Value *array, size_t count, llvm::StringRef what) {
      for (size_t i = 0; i < count; ++i) {
        llvm::Value *slot =
            b.CreateConstInBoundsGEP1_64(ptr, array, i, what + ".slot");
        operands.push_back(b.CreateLoad(ptr, slot, what));
      }
    };
    fn->getArg(0)->setName("ctx");
    if (takesContext)
      operands.push_back(fn->getArg(0));
    load(fn->getArg(1), numArgs, "arg");
    load(fn->getArg(2), numResults, "result");
    operands.push_back(fn->getArg(3));
    b.CreateCall(step, operands);
    b.CreateRetVoid();
    return fn;
  }

  llvm::Module &module;
  llvm::LLVMContext &ctx;
  llvm::PointerType *ptr;
  llvm::IntegerType *i32, *i64;
  llvm::StructType *tensorInfo = nullptr, *model = nullptr;
  llvm::StringMap<llvm::Constant *> strings;
};

/// Escapes a path for a double-quoted assembler string.
std::string asmQuote(llvm::StringRef path) {
  std::string out;
  for (char c : path) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out;
}
} // namespace

std::string weft::addModelDescriptor(llvm::Module &module,
                                     llvm::StringRef stepName,
                                     const ModelDescriptor &descriptor) {
  llvm::Function *step = module.getFunction(stepName);
  const ModelAbi &abi = descriptor.abi;
  size_t expected = abi.args.size() + abi.results.size() + 1;
  if (!step || step->isDeclaration())
    return ("the LLVM module has no function '" + stepName + "'").str();
  // A step that communicates takes the runtime context first
  // (--weft-lower-collectives); it is the only parameter beyond these.
  bool takesContext = step->arg_size() == expected + 1;
  if ((step->arg_size() != expected && !takesContext) ||
      llvm::any_of(step->args(), [](llvm::Argument &a) {
        return !a.getType()->isPointerTy();
      }))
    return ("'" + stepName + "' takes " + llvm::Twine(step->arg_size()) +
            " parameters, expected " + llvm::Twine(expected) +
            " pointers (arguments, results, workspace), or one more before "
            "them for the runtime context")
        .str();
  step->setLinkage(llvm::GlobalValue::InternalLinkage);

  DescriptorBuilder b(module);
  llvm::Constant *weights = llvm::ConstantPointerNull::get(b.ptr);
  uint64_t weightsSize = 0;
  std::string symbol = "weft_weights";
  // Hidden and dso_local: every program refers to the weights directly.
  auto declareWeights = [&] {
    auto *global = new llvm::GlobalVariable(
        module,
        llvm::ArrayType::get(llvm::Type::getInt8Ty(module.getContext()), 0),
        true, llvm::GlobalValue::ExternalLinkage, nullptr, symbol);
    global->setVisibility(llvm::GlobalValue::HiddenVisibility);
    global->setDSOLocal(true);
    return global;
  };
  if (descriptor.weightsPath.empty() && descriptor.sharedWeights) {
    weights = declareWeights();
    weightsSize = descriptor.weightsSize;
  } else if (!descriptor.weightsPath.empty()) {
    // Defined by the assembler from the file; hidden and dso_local so the
    // descriptor refers to it directly. x86-64 keeps large data in .lrodata
    // (SHF_X86_64_LARGE), away from the code, so that weights past 2 GB do
    // not push RIP-relative references out of range.
    bool x86 = module.getTargetTriple().getArch() == llvm::Triple::x86_64;
    std::string text;
    llvm::raw_string_ostream os(text);
    os << ".pushsection " << (x86 ? ".lrodata" : ".rodata")
       << ".weft_weights,\"" << (x86 ? "al" : "a") << "\",@progbits\n"
       << ".p2align 6\n"
       << ".globl " << symbol << "\n"
       << ".hidden " << symbol << "\n"
       << symbol << ":\n"
       << ".incbin \"" << asmQuote(descriptor.weightsPath) << "\"\n"
       << ".size " << symbol << ", " << descriptor.weightsSize << "\n"
       << ".popsection\n";
    module.appendModuleInlineAsm(text);
    weights = declareWeights();
    weightsSize = descriptor.weightsSize;
  }

  // A pipeline's programs find each other by hidden symbols:
  // weft_program_<i> for each table, weft_programs for the list of them.
  int32_t numPrograms = descriptor.numPrograms;
  bool multi = numPrograms > 1;
  auto hidden = [](llvm::GlobalVariable *global) {
    global->setVisibility(llvm::GlobalValue::HiddenVisibility);
    global->setDSOLocal(true);
    return global;
  };
  auto programSymbol = [](int32_t i) {
    return "weft_program_" + std::to_string(i);
  };
  llvm::Constant *programs = llvm::ConstantPointerNull::get(b.ptr);
  llvm::ArrayType *programsType = llvm::ArrayType::get(b.ptr, numPrograms);
  llvm::GlobalVariable *programsTable = nullptr;
  if (multi)
    programsTable = hidden(new llvm::GlobalVariable(
        module, programsType, true, llvm::GlobalValue::ExternalLinkage,
        nullptr, "weft_programs"));
  if (programsTable)
    programs = programsTable;

  llvm::Constant *fields[] = {
      llvm::ConstantInt::get(b.i32, WEFT_MODEL_ABI_VERSION),
      b.string(descriptor.modelJson),
      llvm::ConstantInt::get(b.i32, abi.args.size()),
      b.tensorTable(abi.args, "weft.args"),
      llvm::ConstantInt::get(b.i32, abi.results.size()),
      b.tensorTable(abi.results, "weft.results"),
      weights,
      llvm::ConstantInt::get(b.i64, weightsSize),
      descriptor.weightsFile.empty() && !descriptor.weightsAppended
          ? llvm::ConstantPointerNull::get(b.ptr)
          : b.string(descriptor.weightsAppended ? "" : descriptor.weightsFile),
      llvm::ConstantInt::get(b.i64, descriptor.weightsFileSize),
      llvm::ConstantInt::get(b.i64, descriptor.weightsFileChecksum),
      llvm::ConstantInt::get(b.i64, descriptor.workspaceBytes),
      b.wrapper(step, takesContext, abi.args.size(), abi.results.size()),
      llvm::ConstantInt::get(b.i32, numPrograms),
      programs,
      llvm::ConstantInt::get(b.i32, descriptor.deviceType)};
  auto *model = new llvm::GlobalVariable(
      module, b.model, true,
      multi ? llvm::GlobalValue::ExternalLinkage
            : llvm::GlobalValue::PrivateLinkage,
      llvm::ConstantStruct::get(b.model, fields),
      multi ? programSymbol(descriptor.programIndex) : "weft.model");
  if (multi)
    hidden(model);
  if (multi && descriptor.programIndex != 0)
    return "";
  if (multi) {
    // Program 0's module lists every program and exports the entry point.
    std::vector<llvm::Constant *> entries;
    for (int32_t i = 0; i < numPrograms; ++i)
      entries.push_back(
          i == 0 ? model
                 : hidden(new llvm::GlobalVariable(
                       module, b.model, true,
                       llvm::GlobalValue::ExternalLinkage, nullptr,
                       programSymbol(i))));
    programsTable->setInitializer(
        llvm::ConstantArray::get(programsType, entries));
  }

  auto *getter = llvm::Function::Create(
      llvm::FunctionType::get(b.ptr, {}, false),
      llvm::GlobalValue::ExternalLinkage, "weft_get_model", module);
  llvm::IRBuilder<> builder(
      llvm::BasicBlock::Create(module.getContext(), "entry", getter));
  builder.CreateRet(model);
  return "";
}
