//===- TrainMain.h - The training executable's loop and CLI -----*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// `weftc model.onnx -o train` links the generated step with this runtime;
// WeftRuntimeMain's main() calls runTraining(*weft_get_model(), argc, argv).
// Tests call runTraining directly with a hand-written WeftModel, so they run
// exactly the code the executable runs. See docs/runtime.md for the flags.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_TRAINMAIN_H
#define WEFT_RUNTIME_TRAINMAIN_H

#include "weft/Runtime/ModelABI.h"

#include <ostream>

namespace weft {
namespace rt {

/// Exit codes of runTraining besides 0 (success) and 1 (any error): a run
/// stopped by SIGINT or SIGTERM finishes its step, checkpoints, and returns
/// 128 + the signal number.
constexpr int kExitInterrupted = 130; // SIGINT
constexpr int kExitTerminated = 143;  // SIGTERM

/// Parses the command line (argv[0] is the program name), trains `model`
/// and returns the process exit code. Progress goes to `out`, warnings and
/// errors to `err`. Installs SIGINT/SIGTERM handlers for its duration and
/// restores the previous ones before returning. Never throws.
int runTraining(const WeftModel &model, int argc, const char *const *argv,
                std::ostream &out, std::ostream &err);

/// Same, on std::cout and std::cerr.
int runTraining(const WeftModel &model, int argc, const char *const *argv);

} // namespace rt
} // namespace weft

#endif // WEFT_RUNTIME_TRAINMAIN_H
