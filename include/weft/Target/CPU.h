//===- CPU.h - LLVM dialect to object file and executable ---------*- C++
//-*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The last steps of `weftc -o train`: translate the LLVM-dialect module to
// LLVM IR, add the model descriptor, optimize, write an object file for the
// host triple, and link it with the Weft runtime into an executable.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TARGET_CPU_H
#define WEFT_TARGET_CPU_H

#include "weft/Target/ModelDescriptor.h"

#include "mlir/IR/BuiltinOps.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
} // namespace llvm

namespace weft {

struct CpuTargetOptions {
  /// "generic" (the triple's baseline ISA: the object runs on any x86-64),
  /// "native" (this machine's CPU and features), or an LLVM CPU name.
  std::string cpu = "generic";
  /// LLVM optimization level, 0 to 3.
  unsigned optLevel = 2;
};

/// A TargetMachine for the host triple, position independent (the object
/// links into a PIE). Null with `error` set when the target is unknown.
std::unique_ptr<llvm::TargetMachine>
createCpuTargetMachine(const CpuTargetOptions &options, std::string &error);

/// Translates an LLVM-dialect module whose step function is `stepName`,
/// adds the descriptor and runs LLVM's O<optLevel> pipeline. Null with
/// `error` set on failure.
std::unique_ptr<llvm::Module>
buildModelModule(mlir::ModuleOp module, llvm::LLVMContext &context,
                 llvm::TargetMachine &machine, llvm::StringRef stepName,
                 const ModelDescriptor &descriptor, unsigned optLevel,
                 std::string &error);

/// Writes `module` as an object file to `path`. Returns "" or an error.
std::string emitObjectFile(llvm::Module &module, llvm::TargetMachine &machine,
                           llvm::StringRef path);

/// The folder holding libWeftRuntimeMain.a and libWeftRuntime.a: `override`
/// when given, else next to the compiler (`<bin>/../lib/Runtime` in a build
/// tree, `<bin>/../lib` installed). "" with `error` naming what is missing.
std::string findRuntimeDir(llvm::StringRef argv0, llvm::StringRef override,
                           std::string &error);

struct LinkOptions {
  std::string output;
  std::vector<std::string> objects;
  std::string runtimeDir;
  /// Appended after the libraries (--link-arg).
  std::vector<std::string> extraArgs;
  /// Print the command line to stderr.
  bool verbose = false;
};

/// Links with the system C++ compiler (`c++` on PATH): objects, the runtime
/// and `-lopenblas -lpthread -lm`. Returns "" or an error.
std::string linkExecutable(const LinkOptions &options);

} // namespace weft

#endif // WEFT_TARGET_CPU_H
