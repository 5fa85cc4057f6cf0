//===- CpuTarget.cpp - LLVM dialect to an optimized object file -----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Objects do not depend on the machine that compiles them: by default the
// host triple at x86-64-v3 (AVX2 and FMA: 8-wide vectors and fused
// multiply-adds, which every x86 server CPU since 2013 has; the runtime
// refuses to start on a CPU without them, naming the fix). "generic" is the
// architecture's baseline (x86-64 without AVX) for older machines; `native`
// trades portability for this machine's vector units.
//
//===----------------------------------------------------------------------===//

#include "weft/Target/CPU.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/Transforms/Utils/SplitModule.h"

#include "llvm/MC/MCSubtargetInfo.h"

#include <thread>

using namespace mlir;

std::unique_ptr<llvm::TargetMachine>
weft::createCpuTargetMachine(const CpuTargetOptions &options, Location loc) {
  std::string error;
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  // Module-level assembly (the embedded weights) needs the asm parser.
  llvm::InitializeNativeTargetAsmParser();

  llvm::Triple triple(llvm::sys::getProcessTriple());
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) {
    emitError(loc) << error;
    return nullptr;
  }
  std::string cpu = options.cpu, features;
  if (cpu == "native") {
    cpu = llvm::sys::getHostCPUName().str();
    // Sorted: StringMap order is not deterministic.
    std::vector<std::pair<std::string, bool>> host;
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      host.emplace_back(feature.getKey().str(), feature.getValue());
    llvm::sort(host);
    llvm::SubtargetFeatures list;
    for (const auto &[name, enabled] : host)
      list.AddFeature(name, enabled);
    features = list.getString();
  } else if (cpu == "default") {
    cpu = triple.getArch() == llvm::Triple::x86_64 ? "x86-64-v3" : "generic";
  } else if (cpu == "generic" && triple.getArch() == llvm::Triple::x86_64) {
    cpu = "x86-64";
  }
  if (options.optLevel > 3) {
    emitError(loc) << "optimization level must be 0 to 3";
    return nullptr;
  }
  // LLVM aborts on a CPU it does not know; say so before it gets there.
  std::unique_ptr<llvm::MCSubtargetInfo> subtarget(
      target->createMCSubtargetInfo(triple, "", ""));
  if (!subtarget || !subtarget->isCPUStringValid(cpu)) {
    std::string known;
    if (subtarget)
      for (const llvm::SubtargetSubTypeKV &kv : subtarget->getAllProcessorDescriptions())
        if (known.size() < 400)
          known += std::string(known.empty() ? "" : ", ") + kv.Key;
    emitError(loc) << "--cpu=" << options.cpu << ": '" << cpu
                   << "' is not a CPU LLVM knows for " << triple.str()
                   << "; use generic, native or one of: " << known
                   << (known.size() >= 400 ? ", ..." : "");
    return nullptr;
  }
  static const llvm::CodeGenOptLevel levels[] = {
      llvm::CodeGenOptLevel::None, llvm::CodeGenOptLevel::Less,
      llvm::CodeGenOptLevel::Default, llvm::CodeGenOptLevel::Aggressive};
  llvm::TargetOptions targetOptions;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, cpu, features, targetOptions, llvm::Reloc::PIC_,
      llvm::CodeModel::Small, levels[options.optLevel]));
  if (!machine)
    emitError(loc) << "cannot create a target machine for " << triple.str()
                   << " (cpu " << cpu << ")";
  return machine;
}

std::vector<std::string>
weft::checkableCpuFeatures(const llvm::TargetMachine &machine) {
  if (machine.getTargetTriple().getArch() != llvm::Triple::x86_64)
    return {};
  // The extensions that decide whether generated kernels run at all; the
  // runtime checks each with __builtin_cpu_supports before the first step.
  static const char *const checked[] = {
      "avx",      "avx2",     "avx512bf16", "avx512bw", "avx512dq",
      "avx512f",  "avx512vl", "avx512vnni", "bmi",      "bmi2",
      "f16c",     "fma",      "popcnt",     "sse4.1",   "sse4.2"};
  const llvm::MCSubtargetInfo *info = machine.getMCSubtargetInfo();
  std::vector<std::string> features;
  for (const char *feature : checked)
    if (info->checkFeatures(std::string("+") + feature))
      features.push_back(feature);
  return features;
}

void weft::optimizeLLVMModule(llvm::Module &module,
                              llvm::TargetMachine &machine, unsigned optLevel) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = optLevel >= 2;
  tuning.SLPVectorization = optLevel >= 2;
  llvm::PassBuilder builder(&machine, tuning);
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  static const llvm::OptimizationLevel levels[] = {
      llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1,
      llvm::OptimizationLevel::O2, llvm::OptimizationLevel::O3};
  llvm::ModulePassManager passes =
      optLevel == 0 ? builder.buildO0DefaultPipeline(levels[0])
                    : builder.buildPerModuleDefaultPipeline(levels[optLevel]);
  passes.run(module, mam);
}

std::unique_ptr<llvm::Module>
weft::buildModelModule(ModuleOp module, llvm::LLVMContext &context,
                       llvm::TargetMachine &machine, llvm::StringRef stepName,
                       const ModelDescriptor &descriptor, unsigned optLevel,
                       bool optimize) {
  // Weft's argument attributes (names, kinds) are in the descriptor; LLVM
  // IR has no place for them.
  module.walk([](LLVM::LLVMFuncOp fn) {
    for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i) {
      SmallVector<NamedAttribute> kept;
      for (NamedAttribute attr :
           mlir::function_interface_impl::getArgAttrs(fn, i))
        if (attr.getName().strref().starts_with("llvm."))
          kept.push_back(attr);
      fn.setArgAttrs(i, kept);
    }
  });
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, context, "weft_model");
  if (!llvmModule) {
    module.emitError("cannot translate the module to LLVM IR");
    return nullptr;
  }
  llvmModule->setTargetTriple(machine.getTargetTriple());
  llvmModule->setDataLayout(machine.createDataLayout());
  // Machine-independent output: no host path in the module.
  llvmModule->setSourceFileName("weft_model");
  if (std::string error = addModelDescriptor(*llvmModule, stepName, descriptor);
      !error.empty()) {
    module.emitError(error);
    return nullptr;
  }
  // Only weft_get_model is exported. The step's kernels stay separate
  // functions: inlined back into the step, LLVM's time would grow with the
  // square of the model.
  std::string kernelPrefix = (stepName + ".").str();
  for (llvm::Function &fn : *llvmModule) {
    if (fn.isDeclaration() || fn.getName() == "weft_get_model")
      continue;
    fn.setLinkage(llvm::GlobalValue::InternalLinkage);
    if (fn.getName().starts_with(kernelPrefix))
      fn.addFnAttr(llvm::Attribute::NoInline);
  }
  std::string verifierMessage;
  llvm::raw_string_ostream os(verifierMessage);
  if (llvm::verifyModule(*llvmModule, &os)) {
    module.emitError("generated LLVM IR is invalid: ") << verifierMessage;
    return nullptr;
  }
  if (optimize)
    optimizeLLVMModule(*llvmModule, machine, optLevel);
  return llvmModule;
}

LogicalResult weft::emitObjectFile(llvm::Module &module,
                                   llvm::TargetMachine &machine,
                                   llvm::StringRef path, Location loc) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return emitError(loc) << "cannot write " << path << ": " << ec.message();
  llvm::legacy::PassManager passes;
  if (machine.addPassesToEmitFile(passes, os, nullptr,
                                  llvm::CodeGenFileType::ObjectFile))
    return emitError(loc) << "the target cannot emit object files";
  passes.run(module);
  os.flush();
  if (os.has_error())
    return emitError(loc) << "cannot write " << path << ": "
                          << os.error().message();
  return success();
}

LogicalResult weft::emitObjectFiles(
    std::unique_ptr<llvm::Module> module, const CpuTargetOptions &options,
    unsigned parts, llvm::function_ref<std::string(unsigned)> pathFor,
    SmallVectorImpl<std::string> &written, Location loc, bool optimize) {
  // Object emission is single-threaded in LLVM; each part gets a context
  // of its own (a context is not thread-safe), reached through bitcode.
  // Functions are dealt to parts largest first, so parts take similar time.
  if (parts <= 1 || !module->getModuleInlineAsm().empty()) {
    std::unique_ptr<llvm::TargetMachine> machine =
        createCpuTargetMachine(options, loc);
    if (!machine)
      return failure();
    if (optimize)
      optimizeLLVMModule(*module, *machine, options.optLevel);
    written.push_back(pathFor(0));
    return emitObjectFile(*module, *machine, written.back(), loc);
  }
  SmallVector<SmallVector<char, 0>> bitcode;
  llvm::SplitModule(
      *module, parts,
      [&](std::unique_ptr<llvm::Module> part) {
        llvm::raw_svector_ostream os(bitcode.emplace_back());
        llvm::WriteBitcodeToFile(*part, os);
      },
      /*PreserveLocals=*/false, /*RoundRobin=*/true);
  module.reset();
  SmallVector<std::unique_ptr<llvm::TargetMachine>> machines;
  for (unsigned i = 0; i < bitcode.size(); ++i) {
    machines.push_back(createCpuTargetMachine(options, loc));
    if (!machines.back())
      return failure();
    written.push_back(pathFor(i));
  }
  SmallVector<std::string> errors(bitcode.size());
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < bitcode.size(); ++i)
    threads.emplace_back([&, i] {
      llvm::LLVMContext context;
      llvm::Expected<std::unique_ptr<llvm::Module>> part =
          llvm::parseBitcodeFile(
              llvm::MemoryBufferRef(
                  StringRef(bitcode[i].data(), bitcode[i].size()), "part"),
              context);
      if (!part) {
        errors[i] = llvm::toString(part.takeError());
        return;
      }
      if (optimize)
        optimizeLLVMModule(**part, *machines[i], options.optLevel);
      std::error_code ec;
      llvm::raw_fd_ostream os(written[i], ec, llvm::sys::fs::OF_None);
      if (ec) {
        errors[i] = "cannot write " + written[i] + ": " + ec.message();
        return;
      }
      llvm::legacy::PassManager passes;
      if (machines[i]->addPassesToEmitFile(passes, os, nullptr,
                                           llvm::CodeGenFileType::ObjectFile)) {
        errors[i] = "the target cannot emit object files";
        return;
      }
      passes.run(**part);
      os.flush();
      if (os.has_error())
        errors[i] = "cannot write " + written[i] + ": " + os.error().message();
    });
  for (std::thread &thread : threads)
    thread.join();
  for (const std::string &error : errors)
    if (!error.empty())
      return emitError(loc) << error;
  return success();
}
