//===- RankProcesses.h - Ranks as real processes, for tests -----*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The collectives tests run each rank as a forked process, as in a job:
// communicators, stores and the runtime's per-process state are then what
// they are in production, and a rank that dies takes only itself down.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_UNITTESTS_RUNTIME_RANKPROCESSES_H
#define WEFT_UNITTESTS_RUNTIME_RANKPROCESSES_H

#include "weft/Runtime/Rendezvous.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace weft {
namespace rt {
namespace test {

/// Runs `body(rank)` in `size` child processes and returns their exit codes
/// (128 for a signal). A child is killed by SIGALRM after 120 s, so a hang
/// is a failure rather than a stuck test run. With `errs`, each child's
/// stderr is captured and `errs[rank]` holds it afterwards.
inline std::vector<int> runRanks(int size,
                                 const std::function<int(int)> &body,
                                 std::vector<std::string> *errs = nullptr) {
  std::vector<pid_t> pids;
  std::vector<std::string> paths;
  for (int r = 0; r < size; ++r) {
    int fd = -1;
    if (errs) {
      char path[] = "/tmp/weft-rank-XXXXXX";
      fd = ::mkstemp(path);
      paths.push_back(path);
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      if (fd >= 0)
        ::dup2(fd, 2);
      ::alarm(120);
      int code = 1;
      try {
        code = body(r);
      } catch (...) {
      }
      std::fflush(stderr);
      ::_exit(code);
    }
    if (fd >= 0)
      ::close(fd);
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128);
  }
  if (errs) {
    errs->clear();
    for (const std::string &path : paths) {
      std::ifstream in(path);
      std::stringstream text;
      text << in.rdbuf();
      errs->push_back(text.str());
      ::unlink(path.c_str());
    }
  }
  return codes;
}

/// A port nothing listens on now.
inline int freePort() {
  std::unique_ptr<StoreServer> probe;
  if (!StoreServer::start("127.0.0.1", 0, probe).ok())
    return 29500;
  return probe->port();
}

} // namespace test
} // namespace rt
} // namespace weft

#endif // WEFT_UNITTESTS_RUNTIME_RANKPROCESSES_H
