//===- Launcher.cpp - Start, watch and restart the ranks of a run ---------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// One loop watches everything: the ranks' output pipes, their exits, their
// heartbeat files and weftrun's own signals (through a self-pipe, so a
// signal never races the loop). Each rank runs in its own process group: a
// Ctrl-C at the terminal reaches weftrun once and is forwarded once, and a
// rank's children are stopped with it.
//
//===----------------------------------------------------------------------===//

#include "weft/Launcher/Launcher.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <sstream>
#include <utility>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

using namespace weft::launcher;

namespace {

using Clock = std::chrono::steady_clock;

/// Written by the signal handler, read by the loop.
int signalPipe[2] = {-1, -1};

void onSignal(int sig) {
  int saved = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(signalPipe[1], &byte, 1);
  errno = saved;
}

/// Installs the forwarding handlers for the job's lifetime.
class SignalForwarding {
public:
  SignalForwarding() {
    if (::pipe(signalPipe) == 0) {
      for (int fd : signalPipe)
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
      ::fcntl(signalPipe[0], F_SETFD, FD_CLOEXEC);
      ::fcntl(signalPipe[1], F_SETFD, FD_CLOEXEC);
    }
    struct sigaction action = {};
    action.sa_handler = onSignal;
    sigemptyset(&action.sa_mask);
    for (int i = 0; i < 3; ++i)
      ::sigaction(kSignals[i], &action, &previous[i]);
  }
  ~SignalForwarding() {
    for (int i = 0; i < 3; ++i)
      ::sigaction(kSignals[i], &previous[i], nullptr);
    for (int &fd : signalPipe) {
      ::close(fd);
      fd = -1;
    }
  }
  /// The next signal received, or 0.
  int take() {
    unsigned char byte;
    return ::read(signalPipe[0], &byte, 1) == 1 ? byte : 0;
  }

private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction previous[3];
};

const char *signalName(int sig) {
  switch (sig) {
  case SIGINT:
    return "SIGINT";
  case SIGTERM:
    return "SIGTERM";
  case SIGHUP:
    return "SIGHUP";
  case SIGKILL:
    return "SIGKILL";
  case SIGSEGV:
    return "SIGSEGV";
  case SIGABRT:
    return "SIGABRT";
  case SIGBUS:
    return "SIGBUS";
  case SIGFPE:
    return "SIGFPE";
  default:
    return nullptr;
  }
}

std::string describeSignal(int sig) {
  const char *name = signalName(sig);
  return name ? std::string(name) : "signal " + std::to_string(sig);
}

/// The wall clock in ns (heartbeat files' times and error files'
/// timestamps are on it).
int64_t wallNanos() {
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  return int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
}

/// A heartbeat file: when it was last written (ns; -1: never) and the
/// progress the runtime wrote into it (-1: none, e.g. a bare touch).
struct Heartbeat {
  int64_t nanos = -1, progress = -1;
};

Heartbeat readHeartbeat(const std::string &path) {
  Heartbeat hb;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return hb;
  hb.nanos = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (FILE *f = std::fopen(path.c_str(), "r")) {
    long long v;
    if (std::fscanf(f, "%lld", &v) == 1 && v >= 0)
      hb.progress = v;
    std::fclose(f);
  }
  return hb;
}

/// A rank's error file (WEFT_ERROR_FILE): "<unix ns> <exit code>", written
/// by the runtime as it fails, before it closes its connections.
bool readErrorFile(const std::string &path, int64_t &nanos, int &code) {
  FILE *f = std::fopen(path.c_str(), "r");
  if (!f)
    return false;
  long long t;
  int c;
  bool ok = std::fscanf(f, "%lld %d", &t, &c) == 2;
  std::fclose(f);
  if (ok) {
    nanos = t;
    code = c;
  }
  return ok;
}

/// One output stream of one rank, split into prefixed lines.
struct Stream {
  int fd = -1;
  std::ostream *sink = nullptr;
  std::string partial;
};

struct Rank {
  int localRank = 0, globalRank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  Stream out, err;
  std::deque<std::string> last;
  std::string heartbeatFile, errorFile;
};

/// How one attempt ended.
struct Outcome {
  enum Kind { Success, Failure, Signalled } kind = Success;
  /// For Failure: the rank and what happened to it.
  int rank = -1;
  std::string what;
  /// For Failure: the first failure weftrun saw (its rank and what), when
  /// `rank` is another: a peer that failed because `rank` had.
  int seenRank = -1;
  std::string seenWhat;
  std::deque<std::string> lastLines;
  /// For Signalled: the signal weftrun received.
  int signal = 0;
};

class Job {
public:
  Job(const LaunchOptions &options, std::ostream &out, std::ostream &err,
      SignalForwarding &signals)
      : options(options), out(out), err(err), signals(signals) {}

  /// Starts every rank and watches them until all are gone.
  Outcome attempt(int restartCount, const std::string &runDir);

private:
  bool spawn(Rank &rank, int restartCount);
  void pump(Rank &rank, Stream &stream, bool flush);
  /// Forwards what every rank has written so far (with `flush`, also the
  /// last unterminated lines).
  void pumpAll(bool flush) {
    for (Rank &rank : ranks) {
      pump(rank, rank.out, flush);
      pump(rank, rank.err, flush);
    }
  }
  void emitLine(Rank &rank, Stream &stream, const std::string &line);
  void reap(bool block);
  void stopAll(int sig);
  bool anyRunning() const {
    return std::any_of(ranks.begin(), ranks.end(),
                       [](const Rank &r) { return r.running; });
  }

  const LaunchOptions &options;
  std::ostream &out, &err;
  SignalForwarding &signals;
  std::vector<Rank> ranks;
};

bool Job::spawn(Rank &rank, int restartCount) {
  int outPipe[2], errPipe[2];
  if (::pipe(outPipe) != 0 || ::pipe(errPipe) != 0) {
    err << "weftrun: cannot create pipes: " << std::strerror(errno) << "\n";
    return false;
  }
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e)
    env.emplace_back(*e);
  std::vector<std::string> extra =
      rankEnvironment(options, rank.localRank, restartCount,
                      rank.heartbeatFile, rank.errorFile);
  // Ours replace inherited variables of the same name.
  for (const std::string &var : extra) {
    std::string name = var.substr(0, var.find('=') + 1);
    env.erase(std::remove_if(env.begin(), env.end(),
                             [&](const std::string &e) {
                               return e.compare(0, name.size(), name) == 0;
                             }),
              env.end());
    env.push_back(var);
  }
  std::vector<char *> envp, argv;
  for (std::string &e : env)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> command = options.command;
  for (std::string &a : command)
    argv.push_back(a.data());
  argv.push_back(nullptr);

  // Until the child has dropped weftrun's handlers, a signal sent to it
  // (stopping a previous attempt's ranks, say) would run weftrun's handler
  // in the child and write into weftrun's own signal pipe: block them
  // across fork; the child unblocks them with default dispositions.
  sigset_t blocked, previous;
  sigemptyset(&blocked);
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    sigaddset(&blocked, sig);
  ::pthread_sigmask(SIG_BLOCK, &blocked, &previous);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    err << "weftrun: cannot start rank " << rank.globalRank << ": "
        << std::strerror(errno) << "\n";
    return false;
  }
  if (pid == 0) {
    // Default dispositions, whatever weftrun had, then signals again.
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE})
      ::signal(sig, SIG_DFL);
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    ::setpgid(0, 0);
    ::dup2(outPipe[1], STDOUT_FILENO);
    ::dup2(errPipe[1], STDERR_FILENO);
    ::close(outPipe[0]);
    ::close(outPipe[1]);
    ::close(errPipe[0]);
    ::close(errPipe[1]);
    ::execvpe(argv[0], argv.data(), envp.data());
    std::fprintf(stderr, "weftrun: cannot run %s: %s\n", argv[0],
                 std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  ::close(outPipe[1]);
  ::close(errPipe[1]);
  rank.pid = pid;
  rank.running = true;
  rank.out = {outPipe[0], &out, {}};
  rank.err = {errPipe[0], &err, {}};
  for (int fd : {outPipe[0], errPipe[0]}) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  return true;
}

void Job::emitLine(Rank &rank, Stream &stream, const std::string &line) {
  *stream.sink << "[rank " << rank.globalRank << "] " << line << "\n";
  stream.sink->flush();
  rank.last.push_back(line);
  while (int(rank.last.size()) > options.lastLines)
    rank.last.pop_front();
}

/// Reads what is available; with `flush`, also the last unterminated line.
void Job::pump(Rank &rank, Stream &stream, bool flush) {
  if (stream.fd < 0)
    return;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(stream.fd, buf, sizeof(buf));
    if (n > 0) {
      stream.partial.append(buf, size_t(n));
      size_t start = 0, nl;
      while ((nl = stream.partial.find('\n', start)) != std::string::npos) {
        emitLine(rank, stream, stream.partial.substr(start, nl - start));
        start = nl + 1;
      }
      stream.partial.erase(0, start);
      continue;
    }
    if (n == 0) {
      ::close(stream.fd);
      stream.fd = -1;
      flush = true;
    }
    break;
  }
  if (flush && !stream.partial.empty()) {
    emitLine(rank, stream, stream.partial);
    stream.partial.clear();
  }
}

void Job::reap(bool block) {
  for (Rank &rank : ranks) {
    if (!rank.running)
      continue;
    int status = 0;
    pid_t r = ::waitpid(rank.pid, &status, block ? 0 : WNOHANG);
    if (r == rank.pid) {
      rank.running = false;
      rank.status = status;
    }
  }
}

/// Sends `sig` to every running rank's group, then SIGKILL after the grace.
void Job::stopAll(int sig) {
  for (Rank &rank : ranks)
    if (rank.running)
      ::kill(-rank.pid, sig);
  auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(options.stopGrace));
  while (anyRunning() && Clock::now() < deadline) {
    pumpAll(false);
    reap(false);
    ::usleep(20000);
  }
  for (Rank &rank : ranks)
    if (rank.running)
      ::kill(-rank.pid, SIGKILL);
  reap(true);
}

Outcome Job::attempt(int restartCount, const std::string &runDir) {
  ranks.assign(options.nprocPerNode, Rank());
  for (int i = 0; i < options.nprocPerNode; ++i) {
    Rank &rank = ranks[i];
    rank.localRank = i;
    rank.globalRank = options.nodeRank * options.nprocPerNode + i;
    if (options.heartbeatTimeout > 0)
      rank.heartbeatFile =
          runDir + "/heartbeat." + std::to_string(rank.globalRank);
    rank.errorFile = runDir + "/error." + std::to_string(rank.globalRank);
    // The previous attempt's files say nothing about this one.
    ::unlink(rank.heartbeatFile.c_str());
    ::unlink(rank.errorFile.c_str());
  }
  Outcome outcome;
  for (Rank &rank : ranks) {
    if (!spawn(rank, restartCount)) {
      stopAll(SIGTERM);
      outcome.kind = Outcome::Failure;
      outcome.rank = rank.globalRank;
      outcome.what = "could not be started";
      return outcome;
    }
  }
  Clock::time_point started = Clock::now();
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };

  while (anyRunning()) {
    std::vector<pollfd> fds;
    fds.push_back({signalPipe[0], POLLIN, 0});
    for (Rank &rank : ranks)
      for (Stream *s : {&rank.out, &rank.err})
        if (s->fd >= 0)
          fds.push_back({s->fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    pumpAll(false);

    if (int sig = signals.take()) {
      // A user's or scheduler's signal: the ranks checkpoint and exit;
      // nothing is restarted.
      err << "weftrun: received " << describeSignal(sig)
          << "; forwarding it to the ranks\n";
      for (Rank &rank : ranks)
        if (rank.running)
          ::kill(-rank.pid, sig);
      while (anyRunning()) {
        pumpAll(false);
        reap(false);
        if (int again = signals.take())
          for (Rank &rank : ranks)
            if (rank.running)
              ::kill(-rank.pid, again == SIGINT ? SIGKILL : again);
        ::usleep(20000);
      }
      outcome.kind = Outcome::Signalled;
      outcome.signal = sig;
      break;
    }

    reap(false);
    // The kernel closes a killed rank's connections while tearing it down,
    // before it can be reaped, so a peer may see the reset and exit first.
    // Before blaming an exit, give a rank killed by a signal a moment
    // (at most 0.5 s) to show up.
    auto exitedWithError = [](const Rank &r) {
      return !r.running && WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0;
    };
    auto signalled = [](const Rank &r) {
      return !r.running && WIFSIGNALED(r.status);
    };
    if (std::any_of(ranks.begin(), ranks.end(), exitedWithError))
      for (int i = 0; i < 25 && std::none_of(ranks.begin(), ranks.end(), signalled); ++i) {
        ::usleep(20000);
        reap(false);
      }
    // Every rank found failed in this pass: one whose failure makes the
    // others fail follows it closely, so pick the cause. A rank killed by a
    // signal goes first (a peer left waiting exits with an error, never a
    // signal); then exits, by rank; then hung ranks, the one least far
    // along first (the others wait for it in a collective), then the one
    // quiet longest.
    int64_t now = wallNanos();
    // Each running rank's last beat (read once per poll) and how long it
    // has been quiet since, or since its start when it has not beaten yet.
    std::vector<Heartbeat> beats(ranks.size());
    std::vector<double> quiet(ranks.size(), 0);
    // Ranks stuck in one collective went quiet within moments of each
    // other, not in the same poll: once one is past the timeout, every rank
    // quiet for half of it is a suspect too, so the one least far along is
    // named whichever crossed first.
    double hungAfter = options.heartbeatTimeout;
    if (options.heartbeatTimeout > 0)
      for (size_t i = 0; i < ranks.size(); ++i) {
        if (!ranks[i].running)
          continue;
        quiet[i] = since(started);
        beats[i] = readHeartbeat(ranks[i].heartbeatFile);
        if (beats[i].nanos >= 0)
          quiet[i] = std::min(quiet[i],
                              std::max(0.0, double(now - beats[i].nanos) / 1e9));
        if (quiet[i] > options.heartbeatTimeout)
          hungAfter = options.heartbeatTimeout / 2;
      }
    Rank *failed = nullptr;
    std::string what;
    int failedClass = 3;
    Heartbeat failedBeat;
    for (size_t i = 0; i < ranks.size(); ++i) {
      Rank &rank = ranks[i];
      if (rank.running) {
        if (options.heartbeatTimeout <= 0 || quiet[i] <= hungAfter)
          continue;
        const Heartbeat &hb = beats[i];
        auto key = [](const Heartbeat &b) {
          return std::make_pair(b.progress < 0 ? INT64_MAX : b.progress,
                                b.nanos);
        };
        if (failedClass < 2 || (failedClass == 2 && key(hb) >= key(failedBeat)))
          continue;
        failed = &rank;
        failedClass = 2;
        failedBeat = hb;
        std::ostringstream text;
        text << "sent no heartbeat for " << options.heartbeatTimeout
             << " s (hung?)";
        what = text.str();
      } else if (WIFEXITED(rank.status) && WEXITSTATUS(rank.status) == 0) {
        continue;
      } else if (WIFSIGNALED(rank.status)) {
        if (failedClass <= 0)
          continue;
        failed = &rank;
        failedClass = 0;
        what = "was killed by " + describeSignal(WTERMSIG(rank.status));
      } else {
        if (failedClass <= 1)
          continue;
        failed = &rank;
        failedClass = 1;
        what = "exited with code " + std::to_string(WEXITSTATUS(rank.status));
      }
    }
    if (failed) {
      outcome.kind = Outcome::Failure;
      outcome.rank = failed->globalRank;
      outcome.what = what;
      stopAll(SIGTERM);
      // A rank that failed on its own said when in its error file, before
      // its peers could notice: the earliest such failure before this one
      // was seen is the cause (this rank, say, exited because that one
      // closed its connections). A rank killed by a signal writes nothing
      // and is the cause itself.
      if (failedClass != 0) {
        int64_t first = now;
        for (Rank &rank : ranks) {
          int64_t nanos;
          int code;
          if (readErrorFile(rank.errorFile, nanos, code) && nanos < first) {
            first = nanos;
            outcome.rank = rank.globalRank;
            outcome.what = "exited with code " + std::to_string(code);
          }
        }
        if (outcome.rank != failed->globalRank) {
          outcome.seenRank = failed->globalRank;
          outcome.seenWhat = what;
        }
      }
      break;
    }
  }
  pumpAll(true);
  for (Rank &rank : ranks)
    if (rank.globalRank == outcome.rank)
      outcome.lastLines = rank.last;
  return outcome;
}

} // namespace

std::string weft::launcher::checkOptions(const LaunchOptions &o) {
  if (o.command.empty())
    return "no command to run: weftrun [options] ./train [args...]";
  if (o.nprocPerNode < 1)
    return "--nproc-per-node must be >= 1 (got " +
           std::to_string(o.nprocPerNode) + ")";
  if (o.nnodes < 1)
    return "--nnodes must be >= 1 (got " + std::to_string(o.nnodes) + ")";
  if (o.nodeRank < 0 || o.nodeRank >= o.nnodes)
    return "--node-rank must lie in [0, --nnodes) (got " +
           std::to_string(o.nodeRank) + " of " + std::to_string(o.nnodes) +
           ")";
  if (o.masterPort < 1 || o.masterPort > 65535)
    return "--master-port must lie in [1, 65535] (got " +
           std::to_string(o.masterPort) + ")";
  if (o.maxRestarts < 0)
    return "--max-restarts must be >= 0 (got " +
           std::to_string(o.maxRestarts) + ")";
  if (o.heartbeatTimeout < 0)
    return "--heartbeat-timeout must be >= 0 (0: off)";
  if (o.stopGrace < 0)
    return "--stop-grace must be >= 0";
  return "";
}

std::vector<std::string>
weft::launcher::rankEnvironment(const LaunchOptions &o, int localRank,
                                int restartCount,
                                const std::string &heartbeatFile,
                                const std::string &errorFile) {
  int world = o.nnodes * o.nprocPerNode;
  int rank = o.nodeRank * o.nprocPerNode + localRank;
  std::vector<std::string> env = {
      "RANK=" + std::to_string(rank),
      "LOCAL_RANK=" + std::to_string(localRank),
      "WORLD_SIZE=" + std::to_string(world),
      "LOCAL_WORLD_SIZE=" + std::to_string(o.nprocPerNode),
      "GROUP_RANK=" + std::to_string(o.nodeRank),
      "MASTER_ADDR=" + o.masterAddr,
      "MASTER_PORT=" + std::to_string(o.masterPort),
      "TORCHELASTIC_RESTART_COUNT=" + std::to_string(restartCount)};
  if (!heartbeatFile.empty())
    env.push_back("WEFT_HEARTBEAT_FILE=" + heartbeatFile);
  if (!errorFile.empty())
    env.push_back("WEFT_ERROR_FILE=" + errorFile);
  return env;
}

int weft::launcher::runJob(const LaunchOptions &options, std::ostream &out,
                           std::ostream &err) {
  if (std::string error = checkOptions(options); !error.empty()) {
    err << "weftrun: error: " << error << "\n";
    return 2;
  }
  // Heartbeat and error files.
  char dirTemplate[] = "/tmp/weftrun-XXXXXX";
  if (!::mkdtemp(dirTemplate)) {
    err << "weftrun: error: cannot create a folder for the ranks' heartbeat "
           "and error files in /tmp: "
        << std::strerror(errno) << "\n";
    return 1;
  }
  std::string runDir = dirTemplate;
  SignalForwarding signals;
  Job job(options, out, err, signals);
  int code = 1;
  for (int restart = 0;; ++restart) {
    Outcome outcome = job.attempt(restart, runDir);
    if (outcome.kind == Outcome::Success) {
      code = 0;
      break;
    }
    if (outcome.kind == Outcome::Signalled) {
      code = 128 + outcome.signal;
      break;
    }
    err << "weftrun: rank " << outcome.rank << " " << outcome.what;
    if (outcome.seenRank >= 0)
      err << " (first seen: rank " << outcome.seenRank << " "
          << outcome.seenWhat << ")";
    if (restart < options.maxRestarts) {
      err << "; stopped the others, restarting all ranks (restart "
          << restart + 1 << " of " << options.maxRestarts << ")\n";
      continue;
    }
    err << "; stopped the others"
        << (options.maxRestarts ? " (no restarts left)" : "") << ".";
    if (outcome.lastLines.empty()) {
      err << " It printed nothing.\n";
    } else {
      err << " Its last lines:\n";
      for (const std::string &line : outcome.lastLines)
        err << "  " << line << "\n";
    }
    code = 1;
    break;
  }
  for (int r = 0; r < options.nnodes * options.nprocPerNode; ++r)
    for (const char *file : {"/heartbeat.", "/error."})
      ::unlink((runDir + file + std::to_string(r)).c_str());
  ::rmdir(runDir.c_str());
  return code;
}
