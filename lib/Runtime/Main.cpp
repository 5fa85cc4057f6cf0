//===- Main.cpp - main() of a compiled training executable ----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The only object file of WeftRuntimeMain: kept apart from the loop in
// WeftRuntime so that tests can link the loop without this main().
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/ModelABI.h"
#include "weft/Runtime/TrainMain.h"

#include <cstdio>

int main(int argc, char **argv) {
  const WeftModel *model = weft_get_model();
  if (!model) {
    std::fprintf(stderr, "error: the executable holds no compiled model\n");
    return 1;
  }
  return weft::rt::runTraining(*model, argc, argv);
}
