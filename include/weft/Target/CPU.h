//===- CPU.h - LLVM dialect to object file and executable ---------*- C++
//-*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The last steps of `weftc -o train`: translate the LLVM-dialect module to
// LLVM IR, add the model descriptor, optimize, write an object file for the
// host triple, link it with the Weft runtime into an executable, and
// append the initial weights to it.
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
  /// "default" (x86-64-v3 on x86-64: AVX2 and FMA, every x86 server CPU
  /// since 2013; the baseline elsewhere), "generic" (the triple's baseline
  /// ISA: the object runs on any x86-64), "native" (this machine's CPU and
  /// features), or an LLVM CPU name.
  std::string cpu = "default";
  /// LLVM optimization level, 0 to 3.
  unsigned optLevel = 2;
};

/// A TargetMachine for the host triple, position independent (the object
/// links into a PIE). Null, after an error at `loc`, when the target or the
/// CPU is unknown.
std::unique_ptr<llvm::TargetMachine>
createCpuTargetMachine(const CpuTargetOptions &options, mlir::Location loc);

/// LLVM's default pipeline at `optLevel` (0-3) for `machine`, with the loop
/// and SLP vectorizers from O2 up: what weftc runs on every model.
void optimizeLLVMModule(llvm::Module &module, llvm::TargetMachine &machine,
                        unsigned optLevel);

/// The instruction-set extensions code for `machine` may use, among those
/// the runtime can test on the CPU it starts on (the names of GCC's
/// __builtin_cpu_supports), sorted. Empty for other architectures.
std::vector<std::string> checkableCpuFeatures(const llvm::TargetMachine &machine);

/// Translates an LLVM-dialect module whose step function is `stepName`,
/// adds the descriptor and, when `optimize`, runs LLVM's O<optLevel>
/// pipeline (emitObjectFiles can run it on each part instead). Null, after
/// an error on `module`, on failure.
std::unique_ptr<llvm::Module>
buildModelModule(mlir::ModuleOp module, llvm::LLVMContext &context,
                 llvm::TargetMachine &machine, llvm::StringRef stepName,
                 const ModelDescriptor &descriptor, unsigned optLevel,
                 bool optimize = true);

/// Writes `module` as an object file to `path`; errors at `loc`.
mlir::LogicalResult emitObjectFile(llvm::Module &module,
                                   llvm::TargetMachine &machine,
                                   llvm::StringRef path, mlir::Location loc);

/// Writes `module` as up to `parts` object files to be linked together,
/// one per part of the module (llvm::SplitModule), each compiled by a
/// thread of its own with a target machine of `options`; `pathFor(i)`
/// names part i's file and `written` receives the files written. The parts
/// depend only on the module, not on this machine. A module with
/// module-level assembly (the .incbin of embedded weights) is written
/// whole, as one file. With `optimize`, each part first runs LLVM's
/// O<options.optLevel> pipeline on its thread (the step's kernels are
/// noinline, so the split loses no inlining). Errors at `loc`.
mlir::LogicalResult
emitObjectFiles(std::unique_ptr<llvm::Module> module,
                const CpuTargetOptions &options, unsigned parts,
                llvm::function_ref<std::string(unsigned)> pathFor,
                llvm::SmallVectorImpl<std::string> &written, mlir::Location loc,
                bool optimize = false);

/// The folder holding libWeftRuntimeMain.a, libWeftRuntime.a and
/// libWeftFormats.a: `override`
/// when given, else next to the compiler (`<bin>/../lib/Runtime` in a build
/// tree, `<bin>/../lib` installed). An error at `loc` names what is
/// missing.
mlir::FailureOr<std::string> findRuntimeDir(llvm::StringRef argv0,
                                            llvm::StringRef override,
                                            mlir::Location loc);

struct LinkOptions {
  std::string output;
  std::vector<std::string> objects;
  std::string runtimeDir;
  /// Appended after the libraries (--link-arg).
  std::vector<std::string> extraArgs;
  /// Print the command line to stderr.
  bool verbose = false;
  /// Also link the runtime's NCCL collectives (libWeftRuntimeNccl.a) with
  /// libcudart and libnccl: a --target cuda step on a mesh.
  bool nccl = false;
};

/// Whether this build of Weft can link NCCL collectives (LinkOptions::nccl):
/// the CUDA toolkit and NCCL were found when it was configured.
bool canLinkNccl();

/// Links with the system C++ compiler (`c++` on PATH): objects, the runtime
/// and `-lgloo -lopenblas -lpthread -lm`; errors at `loc`.
mlir::LogicalResult linkExecutable(const LinkOptions &options,
                                   mlir::Location loc);

/// Appends the weights file `weightsPath` to the linked `executable`,
/// after zeros up to a page boundary, so that the weights end the file
/// (a descriptor with `weightsAppended` finds them there): 500 MB cost one
/// copy instead of going through the assembler and the linker. Errors at
/// `loc`.
mlir::LogicalResult appendWeights(llvm::StringRef executable,
                                  llvm::StringRef weightsPath,
                                  mlir::Location loc);

} // namespace weft

#endif // WEFT_TARGET_CPU_H
