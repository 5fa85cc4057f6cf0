//===- Launcher.h - Start, watch and restart the ranks of a run -*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// What `weftrun` does on one node: start --nproc-per-node processes of a
// command with torchrun's environment, prefix their output with their rank,
// forward SIGINT, SIGTERM and SIGHUP, and when one fails (a non-zero exit, a
// signal, no heartbeat within the timeout) stop the others and either
// restart them all (the executable resumes from its newest complete
// checkpoint) or report the rank that failed with its last lines.
// Pure C++ over POSIX: no MLIR, no runtime.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LAUNCHER_LAUNCHER_H
#define WEFT_LAUNCHER_LAUNCHER_H

#include <ostream>
#include <string>
#include <vector>

namespace weft {
namespace launcher {

struct LaunchOptions {
  /// Processes on this node, nodes in the job, and this node's index.
  int nprocPerNode = 1;
  int nnodes = 1;
  int nodeRank = 0;
  /// Where rank 0 hosts the rendezvous store. Loopback unless given.
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  /// Times the whole group is restarted after a failure.
  int maxRestarts = 0;
  /// A rank that has not touched its heartbeat file (WEFT_HEARTBEAT_FILE,
  /// touched by the runtime after every step) for this many seconds counts
  /// as hung; 0 disables the check.
  double heartbeatTimeout = 0;
  /// Seconds between SIGTERM and SIGKILL when stopping ranks.
  double stopGrace = 10;
  /// Lines of each rank's output kept for the failure report.
  int lastLines = 10;
  /// The command and its arguments.
  std::vector<std::string> command;
};

/// Checks the options; an error message naming the flag, or "".
std::string checkOptions(const LaunchOptions &options);

/// The environment of local rank `localRank`: torchrun's variables (RANK,
/// LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,
/// MASTER_PORT, TORCHELASTIC_RESTART_COUNT), WEFT_HEARTBEAT_FILE when a
/// heartbeat is watched and WEFT_ERROR_FILE (where a failing executable
/// writes when it failed, so that weftrun names the rank whose failure
/// came first, not a peer that failed because of it), as NAME=VALUE
/// strings to add to the parent's.
std::vector<std::string> rankEnvironment(const LaunchOptions &options,
                                         int localRank, int restartCount,
                                         const std::string &heartbeatFile,
                                         const std::string &errorFile = "");

/// Runs the job; returns weftrun's exit code: 0 when every rank exited 0,
/// 128 + the signal when a forwarded signal ended it, 1 after a failure
/// with no restarts left. Ranks' output goes to `out` / `err` line by line
/// as "[rank R] ...", weftrun's own messages to `err` as "weftrun: ...".
int runJob(const LaunchOptions &options, std::ostream &out, std::ostream &err);

} // namespace launcher
} // namespace weft

#endif // WEFT_LAUNCHER_LAUNCHER_H
