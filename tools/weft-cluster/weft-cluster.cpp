//===- weft-cluster.cpp - Check cluster specs -----------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
//   weft-cluster check FILE...    validate cluster specs; one summary line
//                                 per good file, the error for each bad one
//
// Exit status 1 when any file is refused, so scripts and CI can run it over
// a folder of specs before a long compile reads one of them.
//
//===----------------------------------------------------------------------===//

#include "weft/Planner/ClusterSpec.h"

#include <cstring>
#include <iostream>

using namespace weft::planner;

namespace {

const char *const kUsage =
    "usage: weft-cluster check FILE...\n"
    "  Validates cluster specs (YAML; see docs/planner.md and\n"
    "  examples/clusters/) and prints a one-line summary of each.\n";

} // namespace

int main(int argc, char **argv) {
  if (argc >= 2 &&
      (!std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help"))) {
    std::cout << kUsage;
    return 0;
  }
  if (argc < 2 || std::strcmp(argv[1], "check") != 0) {
    std::cerr << "weft-cluster: error: "
              << (argc < 2 ? "no command given"
                           : "unknown command '" + std::string(argv[1]) + "'")
              << "\n"
              << kUsage;
    return 1;
  }
  if (argc < 3) {
    std::cerr << "weft-cluster: error: check needs at least one file\n"
              << kUsage;
    return 1;
  }
  int rc = 0;
  for (int i = 2; i < argc; ++i) {
    ClusterSpec spec;
    Status s = loadClusterSpec(argv[i], spec);
    if (!s.ok()) {
      std::cerr << "weft-cluster: error: " << s.message << "\n";
      rc = 1;
      continue;
    }
    std::cout << spec.describe() << "\n";
  }
  return rc;
}
