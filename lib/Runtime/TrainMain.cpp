//===- TrainMain.cpp - The training executable's loop and CLI -------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// One step of the loop: take a batch, set `step` and `lr`, run the compiled
// step into a second set of buffers, swap the new params and state into the
// argument slots, record metrics, checkpoint when due. Everything the step
// reads and writes is 64-byte aligned and allocated once, before the first
// step. A --target cuda step runs the same loop on device buffers (see
// Trainer: one arena, the state kept on the device, a host mirror for
// checkpoints). CLI11 reports errors by throwing, so this file is compiled
// with exceptions and runTraining catches everything at its boundary.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/TrainMain.h"

#include "weft/Runtime/AlignedBuffer.h"
#include "weft/Runtime/Checkpoint.h"
#include "weft/Runtime/Context.h"
#include "weft/Runtime/Cuda.h"
#include "weft/Runtime/DataLoader.h"
#include "weft/Runtime/Kernels.h"
#include "weft/Runtime/Metrics.h"
#include "weft/Runtime/ModelSpec.h"
#include "weft/Runtime/Trace.h"

#include <CLI/CLI.hpp>
#include <cstdlib>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstring>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <signal.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

using namespace weft::rt;

namespace {

/// How long ranks wait for each other, to meet and in every collective,
/// unless --collective-timeout says otherwise: long enough for rank 0 to
/// write a large checkpoint while the others wait in the next step's first
/// collective.
constexpr double kDefaultCollectiveTimeoutS = 30 * 60;

volatile std::sig_atomic_t gStopSignal = 0;

/// When a run fails (not when a signal stopped it), writes
/// "<unix time in ns> <exit code>" to WEFT_ERROR_FILE, set by weftrun, once:
/// before the communicators close, so that the launcher can tell this
/// rank's failure from the failures of the peers it leaves waiting in a
/// collective, which follow it. runTraining clears gFailureReported.
bool gFailureReported = false;
void reportFailure(int code) {
  if (code == 0 || code == 128 + SIGINT || code == 128 + SIGTERM ||
      code == 128 + SIGHUP || gFailureReported)
    return;
  gFailureReported = true;
  const char *path = std::getenv("WEFT_ERROR_FILE");
  if (!path || !*path)
    return;
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  std::string text = std::to_string(int64_t(now.tv_sec) * 1000000000 +
                                    int64_t(now.tv_nsec)) +
                     " " + std::to_string(code) + "\n";
  int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  ssize_t ignored = ::write(fd, text.data(), text.size());
  (void)ignored;
  ::close(fd);
}

/// The first signal asks the loop to stop after the current step; a second
/// one, for when that takes too long, kills the process the default way.
extern "C" void onStopSignal(int sig) {
  if (gStopSignal) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  gStopSignal = sig;
}

/// Routes SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session) to
/// gStopSignal while alive.
class SignalScope {
public:
  SignalScope() {
    gStopSignal = 0;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = onStopSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &oldInt);
    sigaction(SIGTERM, &sa, &oldTerm);
    sigaction(SIGHUP, &sa, &oldHup);
  }
  ~SignalScope() {
    sigaction(SIGINT, &oldInt, nullptr);
    sigaction(SIGTERM, &oldTerm, nullptr);
    sigaction(SIGHUP, &oldHup, nullptr);
  }

private:
  struct sigaction oldInt, oldTerm, oldHup;
};

/// What the command line asks for.
struct Options {
  std::vector<std::string> data;
  std::string labels;
  int64_t steps = 0;
  double lr = 0;
  uint64_t seed = 0;
  bool noShuffle = false;
  std::string metrics;
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  int keepCheckpoints = 3;
  int64_t logEvery = 10;
  int threads = 0;
  bool skipNonFinite = false;
  double collectiveTimeout = kDefaultCollectiveTimeoutS;
  /// One value per ModelSpec::hyperParams entry.
  std::vector<double> hyperParams;
};

/// A failure a test asks one rank to simulate (WEFT_FAULT, see parseFault).
struct Fault {
  enum Action { None, Exit, Kill, Hang, SlowStart } action = None;
  int rank = 0;
  /// The 1-based step the rank fails before (after step - 1 completed).
  int64_t step = 0;
};

/// WEFT_FAULT=RANK:STEP:ACTION, a test hook: rank RANK, about to run step
/// STEP (1-based, before taking its batch), exits with code 3 (`exit`),
/// kills itself with SIGKILL (`kill`) or stops forever without another
/// heartbeat (`hang`); `slow-start` instead sleeps 2 s before it sets up its
/// checkpoint folder (STEP unused), so that the other ranks get there
/// first. It fires only in a launcher's first attempt
/// (TORCHELASTIC_RESTART_COUNT unset or 0), so a restarted job runs through.
Status parseFault(const std::string &text, Fault &out) {
  auto bad = [&](const std::string &why) {
    return Status::error("WEFT_FAULT=" + quote(text) + ": " + why +
                         " (expected RANK:STEP:ACTION, ACTION one of exit, "
                         "kill, hang, slow-start)");
  };
  size_t a = text.find(':');
  size_t b = a == std::string::npos ? a : text.find(':', a + 1);
  if (b == std::string::npos)
    return bad("not three fields");
  std::string rank = text.substr(0, a), step = text.substr(a + 1, b - a - 1),
              action = text.substr(b + 1);
  auto parse = [](const std::string &t, int64_t &v) {
    auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    return !t.empty() && r.ec == std::errc() && r.ptr == t.data() + t.size();
  };
  int64_t r = 0;
  if (!parse(rank, r) || r < 0 || r > INT_MAX)
    return bad("the rank must be a non-negative integer");
  if (!parse(step, out.step) || out.step < 1)
    return bad("the step must be a positive integer");
  out.rank = int(r);
  if (action == "exit")
    out.action = Fault::Exit;
  else if (action == "kill")
    out.action = Fault::Kill;
  else if (action == "hang")
    out.action = Fault::Hang;
  else if (action == "slow-start")
    out.action = Fault::SlowStart;
  else
    return bad("unknown action " + quote(action));
  return Status::success();
}


bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

const char *const kBuiltinFlags[] = {"--data",
                                     "--labels",
                                     "--steps",
                                     "--lr",
                                     "--seed",
                                     "--no-shuffle",
                                     "--metrics",
                                     "--checkpoint-dir",
                                     "--checkpoint-every",
                                     "--keep-checkpoints",
                                     "--log-every",
                                     "--threads",
                                     "--skip-nonfinite",
                                     "--collective-timeout",
                                     "--help"};

/// Turns --data / --labels into loader options for `spec`'s batch inputs.
/// `batchInputs` are the model's: a pipeline rank's step takes some of
/// them, but every rank reads the same batches (the same files, order and
/// checkpointed position).
Status resolveData(const std::vector<BatchInputSpec> &batchInputs,
                   const ModelSpec &spec, const Options &opts,
                   DataLoaderOptions &out) {
  out.inputs = batchInputs;
  out.numClasses = spec.numClasses;
  out.shuffle = !opts.noShuffle;
  auto isInput = [&](const std::string &name) {
    for (const BatchInputSpec &in : out.inputs)
      if (in.name == name)
        return true;
    return false;
  };
  std::vector<std::string> others;
  for (const BatchInputSpec &in : out.inputs)
    if (in.name != out.labelsName)
      others.push_back(in.name);

  // (input name or "", path) for each argument.
  std::vector<std::pair<std::string, std::string>> given;
  for (const std::string &arg : opts.data) {
    size_t eq = arg.find('=');
    std::string name = eq == std::string::npos ? "" : arg.substr(0, eq);
    if (!name.empty() && isInput(name)) {
      given.emplace_back(name, arg.substr(eq + 1));
      continue;
    }
    struct stat st;
    if (!name.empty() && name.find('/') == std::string::npos &&
        ::stat(arg.c_str(), &st) != 0) {
      std::string list;
      for (const BatchInputSpec &in : out.inputs)
        list += (list.empty() ? "" : ", ") + in.name;
      return Status::error("--data " + arg + ": the model has no batch input " +
                           quote(name) + " (its batch inputs: " + list + ")");
    }
    given.emplace_back("", arg);
  }
  if (!opts.labels.empty()) {
    if (!isInput(out.labelsName))
      return Status::error("--labels: the model takes no " +
                           quote(out.labelsName) + " input");
    given.emplace_back(out.labelsName, opts.labels);
  }
  bool anyNpy = false, anyTokens = false;
  for (const auto &g : given)
    (endsWith(g.second, ".npy") ? anyNpy : anyTokens) = true;
  if (anyNpy && anyTokens)
    return Status::error("--data mixes .npy arrays with token files; give "
                         "either one .npy file per batch input or token "
                         "shards (.bin, a directory, or a glob)");

  if (anyTokens) {
    for (const auto &[name, path] : given) {
      if (name == out.labelsName)
        return Status::error(path + ": token data provides its own labels "
                                    "(the next token); drop --labels");
      if (Status s = expandDataPath(path, out.tokenShards); !s.ok())
        return s;
    }
    return Status::success();
  }

  for (const auto &[nameIn, path] : given) {
    std::string name = nameIn;
    if (name.empty()) {
      if (others.size() != 1) {
        std::string list;
        for (const std::string &o : others)
          list += (list.empty() ? "" : ", ") + o;
        return Status::error("--data " + path +
                             ": the model has several batch inputs; give "
                             "--data NAME=FILE for each of: " +
                             list);
      }
      name = others[0];
    }
    for (const auto &[have, havePath] : out.arrays)
      if (have == name)
        return Status::error("input " + quote(name) + " is given twice (" +
                             havePath + " and " + path + ")");
    out.arrays.emplace_back(name, path);
  }
  for (const BatchInputSpec &in : out.inputs) {
    bool found = false;
    for (const auto &a : out.arrays)
      found |= a.first == in.name;
    if (!found)
      return Status::error("no data for the model's batch input " +
                           quote(in.name) +
                           (in.name == out.labelsName
                                ? ": give --labels FILE.npy"
                                : ": give --data " + in.name + "=FILE.npy"));
  }
  return Status::success();
}

/// Stores `v` into a scalar of type `dtype`.
void storeScalar(DType dtype, void *dst, double v) {
  HostArray a = HostArray::zeros(dtype, {});
  a.setFromDouble(0, v);
  std::memcpy(dst, a.data.data(), a.data.size());
}

/// Device memory, released with its owner.
class DeviceAllocation {
public:
  DeviceAllocation() = default;
  DeviceAllocation(const DeviceAllocation &) = delete;
  DeviceAllocation &operator=(const DeviceAllocation &) = delete;
  ~DeviceAllocation() { cuda::release(ptr); }
  Status allocate(size_t bytes) { return cuda::allocate(bytes, &ptr); }
  uint8_t *data() const { return static_cast<uint8_t *>(ptr); }

private:
  void *ptr = nullptr;
};

/// Page-locked host memory, released with its owner: copies between it and
/// the device return at once.
class PinnedBuffer {
public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer &) = delete;
  PinnedBuffer &operator=(const PinnedBuffer &) = delete;
  ~PinnedBuffer() { cuda::releasePinned(ptr); }
  Status allocate(size_t n) {
    bytes = n;
    return cuda::allocatePinned(n, &ptr);
  }
  uint8_t *data() const { return static_cast<uint8_t *>(ptr); }
  size_t size() const { return bytes; }

private:
  void *ptr = nullptr;
  size_t bytes = 0;
};

/// The loop's state: the step's buffers and everything around them.
///
/// A --target cuda step (ModelSpec::deviceType CUDA) takes device pointers.
/// Its buffers are one device allocation planned from the spec
/// (planDeviceArena), made before the first step; the loop allocates
/// nothing. Params, state and buffers are loaded (weights, a checkpoint)
/// into host buffers, uploaded once, and from then on live on the device,
/// where each step's new values are swapped in by pointer, as the CPU path
/// swaps its buffers. Each step copies its scalar inputs in and its outputs
/// (loss, lr, grad norm) out, from and to page-locked memory; waiting for
/// the outputs is the step's one synchronization. The batch inputs have two
/// device slots: while step n computes from one, the host fetches batch
/// n + 1 and the copy stream moves it into the other. From its second step
/// the step runs as a CUDA graph, one per arrangement of its pointers
/// (swapped params and batch slots alternate, so two). The host buffers are
/// a mirror that is stale while the device trains; only checkpointTensors()
/// hands them out, and it brings them up to date first (syncHostMirror).
class Trainer {
public:
  Trainer(const WeftModel &model, const ModelSpec &spec,
          std::vector<BatchInputSpec> batchInputs, BatchLayout dataLayout,
          const Options &opts, const Fault &fault, RuntimeContext &context,
          std::ostream &out, std::ostream &err)
      : model(model), spec(spec), batchInputs(std::move(batchInputs)),
        dataLayout(std::move(dataLayout)), opts(opts), fault(fault),
        context(context),
        out(out), err(err) {}
  Trainer(const Trainer &) = delete;
  Trainer &operator=(const Trainer &) = delete;
  ~Trainer() {
    for (auto &g : graphs)
      cuda::destroyGraph(g.second);
  }

  int run(bool seedGiven);

private:
  const WeftModel &model;
  const ModelSpec &spec;
  /// What the loader reads: the model's batch inputs (a pipeline's, of
  /// every rank), of which the step takes spec.batchArgs.
  std::vector<BatchInputSpec> batchInputs;
  /// How the loader's batches split over the mesh: the step's own layout,
  /// or for a pipeline rank that takes no batch input, the first stage's.
  BatchLayout dataLayout;
  const Options &opts;
  const Fault &fault;
  /// The process's place among the run's ranks, its device and threads;
  /// every step receives it.
  RuntimeContext &context;
  std::ostream &out, &err;

  std::vector<AlignedBuffer> argBufs, resultBufs;
  AlignedBuffer workspace;
  /// The host's view of every argument and result: the step's own
  /// pointers on the CPU. On a device, params, state and buffers point to
  /// the mirror, scalar inputs and outputs into hostScalars and
  /// hostOutputs, and results that carry a next value to nothing.
  std::vector<void *> argPtrs, resultPtrs;

  /// A device step's buffers (empty on the CPU).
  bool onDevice = false;
  DeviceArenaPlan arenaPlan;
  DeviceAllocation arena;
  std::vector<void *> deviceArgs, deviceResults;
  void *deviceWorkspace = nullptr;
  /// Host copies of the arena's scalar-input and output blocks, laid out
  /// alike, so that each is one copy per step.
  PinnedBuffer hostScalars, hostOutputs;
  /// The batch inputs' two device slots (slot 0 in the arena, slot 1
  /// beside it) and their page-locked staging, per spec.batchArgs entry;
  /// `nextSlot` is the one the next step reads.
  DeviceAllocation batchSlot1;
  PinnedBuffer batchStaging[2];
  std::vector<void *> batchDevice[2];
  std::vector<size_t> batchStagingOffset;
  int nextSlot = 0;
  /// The next step's batch, fetched (and copied) while this step ran, and
  /// the loader's state before it, which a checkpoint records.
  bool haveAhead = false;
  Batch ahead;
  Status aheadStatus = Status::success();
  DataLoaderState stateBeforeAhead;
  /// Captured steps, by the pointers (arguments, results, workspace) they
  /// were captured with; whether to capture, and whether a step ran
  /// uncaptured yet (the first loads every kernel and sizes the scratch
  /// buffers, which a capture must not do).
  std::map<std::vector<void *>, void *> graphs;
  std::vector<void *> graphKey;
  bool useGraphs = false, warmedUp = false;
  /// Whether params, state and buffers are on the device (uploadState has
  /// run), and whether the host mirror still equals them.
  bool stateOnDevice = false, mirrorCurrent = true;
  std::unique_ptr<DataLoader> loader;
  /// How params, state and buffers are split over the mesh, for weights
  /// and checkpoints (empty without a mesh).
  ShardLayout layout;

  Status allocate();
  Status allocateOnDevice();
  /// Copies params, state and buffers from the host mirror to the device,
  /// once, after the weights and any checkpoint are loaded into it.
  Status uploadState();
  /// Brings the host mirror of params, state and buffers up to date with
  /// the device (a no-op on the CPU, or when it already is).
  Status syncHostMirror();
  /// Copies `b` into batch slot `slot` through its staging, on the copy
  /// stream.
  Status stageBatch(const Batch &b, const std::vector<size_t> &batchSlot,
                    int slot);
  /// One step on the device: scalars in, the step (a graph when it can),
  /// outputs out; before waiting for them, with `fetchNext`, the next batch
  /// fetched and staged into the other slot.
  Status runDeviceStep(const std::vector<size_t> &batchSlot, bool fetchNext);
  /// Queues the step on the step stream: its graph, captured on first use
  /// of these pointers, or its launches one by one.
  Status queueDeviceStep();
  /// The tensors checkpoints write and restore read, pointing to host
  /// buffers that are current (it syncs the mirror first).
  Status checkpointTensors(std::vector<CheckpointTensor> &tensors);
  /// "measured vs predicted (...): step ... ms vs ... ms (+x %), ...".
  std::string predictionSummary(int64_t baselineRss) const;
  /// Per step (the first left out): the step's own time, its wait for
  /// collectives, and a pipeline's bubble.
  std::vector<double> measuredStep, measuredComm, measuredBubble;
  Status checkpoint(int64_t completed);
  int fail(const Status &s) {
    err << ("error: " + s.message + "\n");
    return 1;
  }
};

Status Trainer::allocate() {
  if (onDevice)
    return allocateOnDevice();
  argBufs.resize(spec.args.size());
  resultBufs.resize(spec.results.size());
  std::set<int> batch(spec.batchArgs.begin(), spec.batchArgs.end());
  for (size_t i = 0; i < spec.args.size(); ++i)
    if (!batch.count(int(i)) && !argBufs[i].allocate(spec.args[i].bytes))
      return Status::error(
          "out of memory: " + std::to_string(spec.args[i].bytes) +
          " bytes for argument " + quote(spec.args[i].name));
  for (size_t i = 0; i < spec.results.size(); ++i)
    if (!resultBufs[i].allocate(spec.results[i].bytes))
      return Status::error(
          "out of memory: " + std::to_string(spec.results[i].bytes) +
          " bytes for result " + quote(spec.results[i].name));
  if (!workspace.allocate(size_t(spec.workspaceBytes)))
    return Status::error(
        "out of memory: " + std::to_string(spec.workspaceBytes) +
        " bytes of workspace");
  argPtrs.resize(argBufs.size());
  resultPtrs.resize(resultBufs.size());
  for (size_t i = 0; i < argBufs.size(); ++i)
    argPtrs[i] = argBufs[i].data();
  for (size_t i = 0; i < resultBufs.size(); ++i)
    resultPtrs[i] = resultBufs[i].data();
  return Status::success();
}

Status Trainer::allocateOnDevice() {
  arenaPlan = planDeviceArena(spec);
  if (Status s = arena.allocate(size_t(arenaPlan.totalBytes)); !s.ok())
    return Status::error("the step's device memory (every argument, result "
                         "and the workspace): " + s.message);
  uint8_t *base = arena.data();
  deviceArgs.resize(spec.args.size());
  deviceResults.resize(spec.results.size());
  for (size_t i = 0; i < spec.args.size(); ++i)
    deviceArgs[i] = base + arenaPlan.argOffsets[i];
  for (size_t r = 0; r < spec.results.size(); ++r)
    deviceResults[r] = base + arenaPlan.resultOffsets[r];
  deviceWorkspace = base + arenaPlan.workspaceOffset;

  auto hostBlock = [](PinnedBuffer &buf, uint64_t bytes, const char *what) {
    Status s = buf.allocate(size_t(bytes));
    return s.ok() ? s
                  : Status::error(std::string("the host's ") + what + ": " +
                                  s.message);
  };
  if (Status s = hostBlock(hostScalars,
                           arenaPlan.scalarsEnd - arenaPlan.scalarsBegin,
                           "scalar inputs");
      !s.ok())
    return s;
  if (Status s = hostBlock(hostOutputs,
                           arenaPlan.outputsEnd - arenaPlan.outputsBegin,
                           "outputs");
      !s.ok())
    return s;
  // Batch slot 0 is the arena's; slot 1 and both stagings hold the batch
  // inputs one after another, each at a 256-byte boundary.
  batchStagingOffset.clear();
  size_t batchBytes = 0;
  for (int i : spec.batchArgs) {
    batchStagingOffset.push_back(batchBytes);
    batchBytes += (size_t(spec.args[i].bytes) + 255) / 256 * 256;
  }
  if (Status s = batchSlot1.allocate(batchBytes); !s.ok())
    return Status::error("the device's second batch slot: " + s.message);
  for (int slot = 0; slot < 2; ++slot)
    if (Status s = hostBlock(batchStaging[slot], batchBytes, "batch staging");
        !s.ok())
      return s;
  for (int slot = 0; slot < 2; ++slot)
    batchDevice[slot].clear();
  for (size_t k = 0; k < spec.batchArgs.size(); ++k) {
    batchDevice[0].push_back(deviceArgs[spec.batchArgs[k]]);
    batchDevice[1].push_back(batchSlot1.data() + batchStagingOffset[k]);
  }
  argBufs.resize(spec.args.size());
  argPtrs.assign(spec.args.size(), nullptr);
  resultPtrs.assign(spec.results.size(), nullptr);
  for (const std::vector<int> *group :
       {&spec.paramArgs, &spec.stateArgs, &spec.bufferArgs})
    for (int i : *group) {
      if (!argBufs[i].allocate(spec.args[i].bytes))
        return Status::error("out of memory: " +
                             std::to_string(spec.args[i].bytes) +
                             " bytes for the host copy of argument " +
                             quote(spec.args[i].name));
      argPtrs[i] = argBufs[i].data();
    }
  for (size_t i = 0; i < spec.args.size(); ++i)
    if (arenaPlan.scalarArg[i])
      argPtrs[i] = hostScalars.data() +
                   (arenaPlan.argOffsets[i] - arenaPlan.scalarsBegin);
  for (size_t r = 0; r < spec.results.size(); ++r)
    if (arenaPlan.outputResult[r])
      resultPtrs[r] = hostOutputs.data() +
                      (arenaPlan.resultOffsets[r] - arenaPlan.outputsBegin);
  return Status::success();
}

Status Trainer::uploadState() {
  if (!onDevice)
    return Status::success();
  for (const std::vector<int> *group :
       {&spec.paramArgs, &spec.stateArgs, &spec.bufferArgs})
    for (int i : *group)
      if (Status s = cuda::copyToDevice(deviceArgs[i], argPtrs[i],
                                        spec.args[i].bytes);
          !s.ok())
        return Status::error("copying " + quote(spec.args[i].name) +
                             " to the GPU: " + s.message);
  stateOnDevice = true;
  mirrorCurrent = true;
  return Status::success();
}

Status Trainer::syncHostMirror() {
  if (!stateOnDevice || mirrorCurrent)
    return Status::success();
  for (const std::vector<int> *group :
       {&spec.paramArgs, &spec.stateArgs, &spec.bufferArgs})
    for (int i : *group)
      if (Status s = cuda::copyToHost(argPtrs[i], deviceArgs[i],
                                      spec.args[i].bytes);
          !s.ok())
        return Status::error("copying " + quote(spec.args[i].name) +
                             " from the GPU: " + s.message);
  mirrorCurrent = true;
  return Status::success();
}

Status Trainer::stageBatch(const Batch &b, const std::vector<size_t> &batchSlot,
                           int slot) {
  for (size_t k = 0; k < spec.batchArgs.size(); ++k) {
    int i = spec.batchArgs[k];
    uint8_t *staged = batchStaging[slot].data() + batchStagingOffset[k];
    std::memcpy(staged, b.inputs[batchSlot[k]].data(), spec.args[i].bytes);
    if (Status s =
            cuda::copyAhead(batchDevice[slot][k], staged, spec.args[i].bytes);
        !s.ok())
      return Status::error("copying the batch's " + quote(spec.args[i].name) +
                           " to the GPU: " + s.message);
  }
  return Status::success();
}

Status Trainer::queueDeviceStep() {
  auto direct = [](void *self) {
    auto *t = static_cast<Trainer *>(self);
    t->model.trainStep(t->context.get(), t->deviceArgs.data(),
                       t->deviceResults.data(), t->deviceWorkspace);
  };
  if (!useGraphs || !warmedUp) {
    direct(this);
    warmedUp = true;
    return Status::success();
  }
  // Refilled in place: no allocation a step once its size is reached.
  graphKey.assign(deviceArgs.begin(), deviceArgs.end());
  graphKey.insert(graphKey.end(), deviceResults.begin(), deviceResults.end());
  graphKey.push_back(deviceWorkspace);
  auto it = graphs.find(graphKey);
  // Two arrangements alternate; a skipped step (--skip-nonfinite) shifts
  // params against batch slots, which makes four at most.
  if (it == graphs.end() && graphs.size() < 4) {
    void *graph = nullptr;
    if (Status s = cuda::captureGraph(direct, this, &graph); !s.ok()) {
      err << "warning: " << s.message
          << "; the steps run without CUDA graphs\n";
      useGraphs = false;
      direct(this);
      return Status::success();
    }
    it = graphs.emplace(graphKey, graph).first;
  }
  if (it == graphs.end()) {
    direct(this);
    return Status::success();
  }
  return cuda::launchGraph(it->second);
}

Status Trainer::runDeviceStep(const std::vector<size_t> &batchSlot,
                              bool fetchNext) {
  int slot = nextSlot;
  nextSlot = 1 - slot;
  if (Status s = cuda::stepWaitsForCopiesAhead(); !s.ok())
    return s;
  for (size_t k = 0; k < spec.batchArgs.size(); ++k)
    deviceArgs[spec.batchArgs[k]] = batchDevice[slot][k];
  if (Status s =
          cuda::copyToDeviceAsync(arena.data() + arenaPlan.scalarsBegin,
                                  hostScalars.data(), hostScalars.size());
      !s.ok())
    return Status::error("copying step, lr and the other scalar inputs to "
                         "the GPU: " + s.message);
  if (Status s = queueDeviceStep(); !s.ok())
    return Status::error("the step on the GPU: " + s.message);
  if (Status s = cuda::copyToHostAsync(hostOutputs.data(),
                                       arena.data() + arenaPlan.outputsBegin,
                                       hostOutputs.size());
      !s.ok())
    return Status::error("the step on the GPU: " + s.message);
  // While the device computes: the next batch, into the slot the step
  // before this one read (finished: its outputs were waited for). A read
  // error is the next step's, as without fetching ahead.
  if (fetchNext) {
    stateBeforeAhead = loader->state();
    aheadStatus = loader->next(ahead);
    haveAhead = true;
    if (aheadStatus.ok())
      if (Status s = stageBatch(ahead, batchSlot, nextSlot); !s.ok())
        return s;
  }
  // The collectives first: a peer that died leaves the step stream
  // waiting on NCCL forever, which only their polled wait turns into an
  // error.
  if (Status s = context.finishDeviceCollectives(); !s.ok())
    return Status::error("the step on the GPU: " + s.message);
  if (Status s = cuda::synchronize(); !s.ok())
    return Status::error("the step on the GPU: " + s.message);
  return Status::success();
}

Status Trainer::checkpointTensors(std::vector<CheckpointTensor> &tensors) {
  if (Status s = syncHostMirror(); !s.ok())
    return s;
  tensors.clear();
  std::set<std::string> held;
  for (const auto *group : {&spec.paramArgs, &spec.stateArgs, &spec.bufferArgs})
    for (int i : *group) {
      tensors.push_back({spec.args[i].name, spec.args[i].kind,
                         spec.args[i].dtype, spec.args[i].shape,
                         argPtrs[i]});
      held.insert(spec.args[i].name);
    }
  // A pipeline rank describes the other ranks' tensors too, without data:
  // the manifest lists the whole model, and a checkpoint of another model
  // is refused on every rank.
  for (const PipelineTensorSpec &t : spec.pipeline.tensors) {
    if (held.count(t.name))
      continue;
    // The block a rank of its stage holds.
    std::vector<int64_t> local = t.shape;
    for (size_t d = 0; d < t.dims.size() && d < local.size(); ++d)
      for (const std::string &axis : t.dims[d])
        for (const MeshAxisSpec &a : spec.mesh)
          if (a.name == axis)
            local[d] /= a.size;
    tensors.push_back({t.name, t.kind, t.dtype, local, nullptr});
  }
  return Status::success();
}

std::string Trainer::predictionSummary(int64_t baselineRss) const {
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  auto ms = [](double s) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.3g ms", s * 1e3);
    return std::string(buf);
  };
  const PredictionSpec &p = spec.prediction;
  double step = median(measuredStep);
  char rel[32];
  std::snprintf(rel, sizeof(rel), "%+.0f %%",
                p.stepTimeS > 0 ? 100 * (step / p.stepTimeS - 1) : 0.0);
  std::string text = "measured vs predicted" +
                     (p.layout.empty() ? "" : " (plan " + p.layout + ")") +
                     ": step " + ms(step) + " vs " + ms(p.stepTimeS) + " (" +
                     rel + ")";
  if (!spec.mesh.empty() && !onDevice)
    text += ", exposed communication " + ms(median(measuredComm)) + " vs " +
            ms(p.exposedCommS);
  if (!measuredBubble.empty()) {
    char b[64];
    std::snprintf(b, sizeof(b), ", pipeline bubble %.0f %% of the step",
                  100 * median(measuredBubble));
    text += std::string(b) + " vs " + ms(p.bubbleS);
  }
  if (p.memoryBytesPerDevice > 0) {
    char m[96];
    std::snprintf(m, sizeof(m),
                  ", peak memory %.1f MiB above the process's %.1f MiB vs "
                  "%.1f MiB",
                  double(peakRssBytes() - baselineRss) / 1048576.0,
                  double(baselineRss) / 1048576.0,
                  p.memoryBytesPerDevice / 1048576.0);
    text += m;
  }
  return text;
}

Status Trainer::checkpoint(int64_t completed) {
  CheckpointMeta meta;
  meta.step = completed;
  // A batch fetched ahead for the next step is not consumed yet.
  meta.dataLoaderState =
      (haveAhead ? stateBeforeAhead : loader->state()).toJson();
  meta.modelJson = spec.modelJson;
  std::string path;
  auto t0 = std::chrono::steady_clock::now();
  const WeftRuntimeContext &ctx = *context.get();
  std::vector<CheckpointTensor> tensors;
  if (Status s = checkpointTensors(tensors); !s.ok())
    return s;
  if (Status s = writeCheckpoint(opts.checkpointDir, meta, tensors,
                                 layout, ctx.rank, ctx.worldSize,
                                 opts.keepCheckpoints, path);
      !s.ok())
    return s;
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", secs);
  out << "checkpoint " << path << " (" << buf << " s)\n";
  return Status::success();
}

int Trainer::run(bool seedGiven) {
  // The loop's place among the ranks comes from the context. Until steps
  // are partitioned (issue 9), N processes would each train the whole model
  // on the same data and race on the checkpoints: refuse.
  const WeftRuntimeContext &ctx = *context.get();
  // A step compiled for a mesh has joined its ranks (runTrainingImpl,
  // RuntimeContext::joinMesh).
  if (ctx.worldSize > 1 && spec.mesh.empty())
    return fail(Status::error(
        context.launch().launcher + "'s environment says this is rank " +
        std::to_string(ctx.rank) + " of " + std::to_string(ctx.worldSize) +
        ", but this executable was compiled for one process; compile it "
        "for a mesh (weftc --mesh dp=" + std::to_string(ctx.worldSize) +
        ") to train on several, or run one process"));
  // What the process holds before the step's tensors exist: the metrics
  // report it next to the peak, so the model's own memory is the
  // difference (docs/planner.md, "Memory model against measured peaks").
  // The GEMM library's code and buffers and the OpenMP team are the
  // process's, not the step's: made first, they are in the baseline
  // (5-7 MiB of the bench GPT's growth before).
  onDevice = spec.deviceType == WEFT_DEVICE_CUDA;
  if (!onDevice)
    weft_rt_warm_up();
  int64_t baselineRss = currentRssBytes();
  if (Status s = allocate(); !s.ok())
    return fail(s);
  for (const MeshAxisSpec &a : spec.mesh)
    layout.mesh.push_back({a.name, a.size});
  for (const auto &[name, split] : spec.shardings)
    layout.shardings[name] = {split.globalShape, split.dims, split.storedShape};
  for (const PipelineTensorSpec &t : spec.pipeline.tensors) {
    layout.pipelineRank[t.name] = t.rank;
    bool split = !t.storedShape.empty();
    for (const auto &axes : t.dims)
      split |= !axes.empty();
    if (split && !layout.shardings.count(t.name))
      layout.shardings[t.name] = {t.shape, t.dims, t.storedShape};
  }
  if (Status s = loadInitialWeights(model, spec, argPtrs, ctx.rank); !s.ok())
    return fail(s);
  for (size_t h = 0; h < spec.hyperParams.size(); ++h) {
    const HyperParamSpec &hp = spec.hyperParams[h];
    storeScalar(spec.args[hp.arg].dtype, argPtrs[hp.arg], opts.hyperParams[h]);
  }

  DataLoaderOptions dataOpts;
  if (Status s = resolveData(batchInputs, spec, opts, dataOpts); !s.ok())
    return fail(s);
  // Where each of the step's batch inputs is in the loader's batches.
  std::vector<size_t> batchSlot;
  for (int i : spec.batchArgs)
    for (size_t k = 0; k < batchInputs.size(); ++k)
      if (batchInputs[k].name == spec.args[i].name)
        batchSlot.push_back(k);
  // The ranks of the mesh axes splitting the batch each read their block
  // of every global batch, by their coordinate on those axes (row-major);
  // ranks that differ only on other axes read the same. Without a mesh, or
  // with the batch whole on every rank, one rank reads it all.
  dataOpts.rank = 0;
  dataOpts.numRanks = 1;
  for (const std::string &axis : dataLayout.axes)
    for (int a = 0; a < ctx.numAxes; ++a)
      if (axis == ctx.axes[a].name) {
        dataOpts.rank = dataOpts.rank * ctx.axes[a].size + ctx.axes[a].index;
        dataOpts.numRanks *= ctx.axes[a].size;
      }
  // [K, m/R, ...] inputs hold K micro-batches: to the loader, K m/R samples.
  dataOpts.microBatches = dataLayout.microBatches;
  if (dataOpts.microBatches > 1)
    for (BatchInputSpec &in : dataOpts.inputs) {
      in.shape[1] *= in.shape[0];
      in.shape.erase(in.shape.begin());
    }
  int labels = spec.findArg(dataOpts.labelsName,
                           weft::contract::roleName(weft::contract::Role::Input));
  if (labels >= 0 && spec.numClasses == 0 &&
      (spec.args[labels].dtype == DType::I64 ||
       spec.args[labels].dtype == DType::I32))
    err << "warning: the model JSON gives no num_classes / vocab_size; "
           "labels and tokens are not range-checked\n";

  int64_t start = 0;
  DataLoaderState dataState;
  dataState.seed = opts.seed;
  if (!opts.checkpointDir.empty()) {
    if (fault.action == Fault::SlowStart && fault.rank == ctx.rank) {
      err << "rank " << ctx.rank
          << ": WEFT_FAULT: sleeping 2 s before the checkpoint folder\n"
          << std::flush;
      std::this_thread::sleep_for(std::chrono::seconds(2));
    }
    Status prepared = prepareCheckpointDir(opts.checkpointDir, ctx.rank);
    // Rank 0 clears the folder's leftovers. No rank may write a part of a
    // checkpoint before that is done: where no collective holds the ranks
    // together first (a tp layout that splits nothing), a fast rank's part
    // of the first checkpoint went with the leftovers, and rank 0 waited
    // for it, or that rank's rename failed. Every rank also learns whether
    // the others could use the folder.
    std::vector<float> failed = {prepared.ok() ? 0.0f : 1.0f};
    if (Status s = context.allReduceSum(failed); !s.ok())
      return fail(Status::error("waiting for every rank to set up the "
                                "checkpoint folder " +
                                opts.checkpointDir + ": " + s.message));
    if (!prepared.ok())
      return fail(prepared);
    if (failed[0] > 0)
      return fail(
          Status::error("another rank could not set up the checkpoint folder " +
                        opts.checkpointDir + " (its error says why)"));
    RestoreResult restored;
    // Restoring writes into the host buffers, before uploadState.
    std::vector<CheckpointTensor> tensors;
    if (Status s = checkpointTensors(tensors); !s.ok())
      return fail(s);
    Status s = restoreLatestCheckpoint(opts.checkpointDir, tensors, layout,
                                       ctx.rank, spec.modelJson, restored);
    for (const std::string &w : restored.warnings)
      err << w << "\n";
    if (!s.ok())
      return fail(s);
    if (restored.found) {
      start = restored.meta.step;
      if (Status ds = DataLoaderState::fromJson(restored.meta.dataLoaderState,
                                                dataState);
          !ds.ok())
        return fail(Status::error(restored.path + ": " + ds.message));
      if (seedGiven && dataState.seed != opts.seed)
        err << "warning: --seed " << opts.seed << " ignored: resuming with "
            << "the checkpoint's data order (seed " << dataState.seed << ")\n";
      if (dataState.shuffle == opts.noShuffle)
        err << "warning: the checkpoint was written with"
            << (dataState.shuffle ? "" : " --no-shuffle") << " and this run "
            << "uses" << (opts.noShuffle ? " --no-shuffle" : " shuffling")
            << "; the data order will differ from an uninterrupted run\n";
      out << "resuming from " << restored.path << " at step " << start << "\n";
    }
  }
  if (start >= opts.steps) {
    out << "the checkpoint is at step " << start << ", which reaches --steps "
        << opts.steps << "; nothing to do\n";
    return 0;
  }

  // The weights and any checkpoint are in the host buffers: a device step
  // takes them from here on.
  if (Status s = uploadState(); !s.ok())
    return fail(s);

  int64_t savedSamples = dataState.numSamples;
  if (Status s = DataLoader::open(dataOpts, dataState, loader); !s.ok())
    return fail(s);
  // The loader state (epoch, position in the shuffled order) only means
  // something for the data it was written with.
  if (savedSamples && savedSamples != loader->numSamples())
    return fail(Status::error(
        "the checkpoint's data loader state is for " +
        std::to_string(savedSamples) + " samples, but the data has " +
        std::to_string(loader->numSamples()) +
        "; resume with the data the run started with, or start a new "
        "--checkpoint-dir"));

  MetricsWriter metrics;
  if (!opts.metrics.empty())
    if (Status s = metrics.open(opts.metrics, start); !s.ok())
      return fail(s);

  int64_t batch = loader->batchSize();
  int64_t tokensPerStep = loader->tokensPerSample() * batch;
  out << "data: " << loader->description() << "\n";
  out << "training " << spec.numParameters() << " parameters, batch " << batch
      << ", " << loader->batchesPerEpoch() << " batches per epoch, steps "
      << start << ".." << opts.steps << " (";
  if (onDevice) {
    std::string why;
    useGraphs = cuda::graphsAllowed(&why);
    // NCCL's collectives can be captured, but a step's capture with them
    // has not run on a machine of several GPUs yet (docs/gpu.md); a
    // pipeline's transfers wait on the host, which no graph can.
    if (useGraphs && !spec.mesh.empty()) {
      useGraphs = false;
      why = std::string(spec.pipeline.ranks > 1
                            ? "the step's pipeline transfers go through host "
                              "memory"
                            : "the step runs NCCL collectives") +
            " (--mesh " + spec.describeMesh() + ")";
    }
    out << "on GPU " << ctx.deviceIndex << ": " << cuda::deviceDescription()
        << (useGraphs ? "; the step as a CUDA graph"
                      : "; CUDA graphs off: " + why)
        << ")\n";
  } else
    out << ctx.numThreads << " threads, GEMMs on " << weft_rt_gemm_library()
        << ")\n";
  if (!spec.mesh.empty())
    out << "collectives: " << context.describeCollectives() << "\n";

  ProgressLog progress(opts.steps, batch, tokensPerStep);
  float *loss = reinterpret_cast<float *>(resultPtrs[spec.lossResult]);
  const float *lrOut =
      spec.lrResult >= 0
          ? reinterpret_cast<const float *>(resultPtrs[spec.lrResult])
          : nullptr;
  int64_t skippedSteps = 0;
  auto runStart = std::chrono::steady_clock::now();
  double lastLoss = 0;
  context.beat(2 * start);
  for (int64_t step = start; step < opts.steps; ++step) {
    if (fault.action != Fault::None && fault.action != Fault::SlowStart &&
        fault.rank == ctx.rank && fault.step == step + 1) {
      const char *what = fault.action == Fault::Exit   ? "exiting with code 3"
                         : fault.action == Fault::Kill ? "killing itself (SIGKILL)"
                                                       : "hanging";
      err << "rank " << ctx.rank << ": WEFT_FAULT: " << what
          << " before step " << step + 1 << "\n"
          << std::flush;
      if (fault.action == Fault::Exit)
        return 3;
      if (fault.action == Fault::Kill)
        std::raise(SIGKILL);
      // A hang ignores the stop signals too (they only set gStopSignal):
      // the launcher's SIGKILL ends it.
      for (;;)
        ::pause();
    }
    auto t0 = std::chrono::steady_clock::now();
    Batch b;
    if (haveAhead) {
      haveAhead = false;
      if (!aheadStatus.ok())
        return fail(aheadStatus);
      b = std::move(ahead);
    } else if (Status s = loader->next(b); !s.ok()) {
      return fail(s);
    } else if (onDevice) {
      if (Status st = stageBatch(b, batchSlot, nextSlot); !st.ok())
        return fail(st);
    }
    if (!onDevice)
      for (size_t k = 0; k < spec.batchArgs.size(); ++k)
        argPtrs[spec.batchArgs[k]] = b.inputs[batchSlot[k]].data();
    *reinterpret_cast<int64_t *>(argPtrs[spec.stepArg]) = step;
    // Dropout's masks derive from the run's seed (the checkpoint's on a
    // resume) and the step, so a resumed run repeats them.
    if (spec.seedArg >= 0)
      *reinterpret_cast<int64_t *>(argPtrs[spec.seedArg]) =
          int64_t(dataState.seed);
    *reinterpret_cast<float *>(argPtrs[spec.lrArg]) = float(opts.lr);

    // Started (its batch in hand), then done: a rank stuck before its step
    // shows as behind the ranks waiting for it in the step's collectives.
    context.beat(2 * step + 1);
    auto computeStart = std::chrono::steady_clock::now();
    context.beginStep();
    if (onDevice) {
      if (Status s = runDeviceStep(batchSlot, step + 1 < opts.steps); !s.ok())
        return fail(s);
    } else {
      model.trainStep(context.get(), argPtrs.data(), resultPtrs.data(),
                      workspace.data());
    }
    if (Status s = context.drainTransfers(); !s.ok())
      return fail(Status::error("rank " + std::to_string(ctx.rank) +
                                ": a pipeline send failed: " + s.message));
    auto computeEnd = std::chrono::steady_clock::now();
    double stepSeconds =
        std::chrono::duration<double>(computeEnd - computeStart).count();
    if (trace::enabled())
      trace::record("step " + std::to_string(step + 1), computeStart,
                    computeEnd, 0);
    context.beat(2 * step + 2);
    // A pipeline's bubble as run: the time its ranks spent in sends and
    // receives (waiting for a peer, or moving data) over the time they
    // spent in the step, summed over the ranks.
    // On a GPU the host never waits in a collective, so the exposed time
    // is not measured (-1: absent from the metrics).
    double commWait =
        spec.mesh.empty() || onDevice ? -1 : context.takeCollectiveSeconds();
    double bubble = -1;
    if (spec.pipeline.ranks > 0) {
      std::vector<float> sums = {float(context.takeTransferSeconds()),
                                 float(stepSeconds)};
      if (Status s = context.allReduceSum(sums); !s.ok())
        return fail(Status::error("summing the pipeline's idle time over "
                                  "the ranks: " + s.message));
      bubble = sums[1] > 0 ? double(sums[0]) / double(sums[1]) : 0;
    }

    // A step whose loss or gradient is not finite would poison every
    // parameter: its results are never swapped in. It stops the run, or,
    // with --skip-nonfinite, is dropped as mixed-precision trainers do.
    float stepLoss = *reinterpret_cast<const float *>(
        resultPtrs[spec.lossResult]);
    float gradNorm =
        spec.gradNormResult >= 0
            ? *reinterpret_cast<const float *>(resultPtrs[spec.gradNormResult])
            : 0.0f;
    bool finite = std::isfinite(stepLoss) && std::isfinite(gradNorm);
    if (!finite && !opts.skipNonFinite) {
      err << "error: step " << step + 1 << " has a non-finite "
          << (std::isfinite(stepLoss) ? "gradient norm (" : "loss (")
          << (std::isfinite(stepLoss) ? gradNorm : stepLoss)
          << "); training stopped before applying it"
          << (opts.checkpointDir.empty()
                  ? ""
                  : "; the checkpoints in " + opts.checkpointDir +
                        " hold the last good state")
          << ". Lower --lr, check the data, or pass --skip-nonfinite to "
             "skip such steps\n";
      return 1;
    }
    if (finite && onDevice) {
      for (size_t i = 0; i < spec.args.size(); ++i)
        if (int r = spec.resultForArg[i]; r >= 0)
          std::swap(deviceArgs[i], deviceResults[r]);
      mirrorCurrent = false;
    } else if (finite) {
      for (size_t i = 0; i < spec.args.size(); ++i) {
        int r = spec.resultForArg[i];
        if (r < 0)
          continue;
        argBufs[i].swap(resultBufs[r]);
        argPtrs[i] = argBufs[i].data();
        resultPtrs[r] = resultBufs[r].data();
      }
    } else {
      ++skippedSteps;
    }
    loss = reinterpret_cast<float *>(resultPtrs[spec.lossResult]);
    if (lrOut)
      lrOut = reinterpret_cast<const float *>(resultPtrs[spec.lrResult]);
    double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    StepMetrics m;
    m.step = step + 1;
    m.loss = *loss;
    m.skipped = !finite;
    if (spec.gradNormResult >= 0)
      m.gradNorm = gradNorm;
    m.lr = lrOut ? double(*lrOut) : double(float(opts.lr));
    m.stepTimeS = secs;
    m.dataWaitS = b.waitSeconds;
    m.peakRssBytes = peakRssBytes();
    m.baselineRssBytes = baselineRss;
    m.commWaitS = commWait;
    if (spec.prediction.stepTimeS >= 0)
      m.predictedStepTimeS = spec.prediction.stepTimeS;
    // The first step pays for first touches; the summary leaves it out.
    if (step > start || opts.steps - start == 1) {
      measuredStep.push_back(stepSeconds);
      measuredComm.push_back(std::max(commWait, 0.0));
      if (bubble >= 0)
        measuredBubble.push_back(bubble);
    }
    if (bubble >= 0) {
      m.bubble = bubble;
      m.bubblePredicted = spec.pipeline.predictedBubble;
    }
    m.samplesPerS = secs > 0 ? double(batch) / secs : 0;
    if (tokensPerStep)
      m.tokensPerS = secs > 0 ? double(tokensPerStep) / secs : 0;
    lastLoss = m.loss;
    if (!finite)
      err << "warning: skipped step " << m.step << ": non-finite "
          << (std::isfinite(stepLoss) ? "gradient norm" : "loss") << "\n";
    if (!opts.metrics.empty())
      if (Status s = metrics.write(m); !s.ok())
        return fail(s);
    if (progress.record(m, opts.logEvery))
      out << progress.line() << "\n" << std::flush;

    int64_t completed = step + 1;
    if (int sig = gStopSignal) {
      const char *name = sig == SIGINT    ? "SIGINT"
                         : sig == SIGHUP ? "SIGHUP"
                                         : "SIGTERM";
      if (!opts.checkpointDir.empty())
        if (Status s = checkpoint(completed); !s.ok())
          return fail(s);
      err << "stopped by " << name << " after step " << completed
          << (opts.checkpointDir.empty()
                  ? " (no --checkpoint-dir: progress is not saved)"
                  : "; rerun the same command to resume")
          << "\n";
      return 128 + sig;
    }
    if (!opts.checkpointDir.empty() && opts.checkpointEvery > 0 &&
        completed % opts.checkpointEvery == 0 && completed != opts.steps)
      if (Status s = checkpoint(completed); !s.ok())
        return fail(s);
  }
  if (!opts.checkpointDir.empty())
    if (Status s = checkpoint(opts.steps); !s.ok())
      return fail(s);
  // The run ends with the trained state on the host, and with any error the
  // device still holds reported.
  if (Status s = syncHostMirror(); !s.ok())
    return fail(s);
  if (Status s = trace::write(ctx.rank); !s.ok())
    return fail(s);
  double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - runStart)
          .count();
  char buf[96];
  std::snprintf(buf, sizeof(buf), "done: %lld steps in %s, final loss %.6g\n",
                (long long)(opts.steps - start), formatDuration(total).c_str(),
                lastLoss);
  out << buf;
  if (spec.prediction.stepTimeS >= 0 && !measuredStep.empty())
    out << predictionSummary(baselineRss) << "\n";
  if (skippedSteps)
    out << "skipped " << skippedSteps
        << " step(s) with a non-finite loss or gradient\n";
  return 0;
}

std::string formatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

/// CLI11 saturates integers that overflow and wraps negative values into
/// unsigned ones: the command line's own text is checked instead.
Status checkIntegerFlags(const CLI::App &app) {
  const char *const flags[] = {"--steps",       "--seed",
                               "--checkpoint-every", "--keep-checkpoints",
                               "--log-every",   "--threads"};
  for (const char *flag : flags) {
    const CLI::Option *o = app.get_option_no_throw(flag);
    if (!o)
      continue;
    bool isUnsigned = std::string(flag) == "--seed";
    for (const std::string &text : o->results()) {
      const char *begin = text.data(), *end = text.data() + text.size();
      std::from_chars_result r;
      if (isUnsigned) {
        uint64_t v;
        r = text.empty() || text[0] == '-' ? std::from_chars_result{begin, std::errc::invalid_argument}
                                           : std::from_chars(begin, end, v);
      } else {
        int64_t v;
        r = std::from_chars(begin, end, v);
      }
      if (r.ec == std::errc::result_out_of_range)
        return Status::error(std::string(flag) + " " + text +
                             " is out of range (at most " +
                             (isUnsigned ? "18446744073709551615"
                                         : "9223372036854775807") +
                             ")");
      if (r.ec != std::errc() || r.ptr != end)
        return Status::error(std::string(flag) + " must be a" +
                             (isUnsigned ? " non-negative" : "n") +
                             " integer (got " + quote(text) + ")");
    }
  }
  return Status::success();
}

/// Checks the parsed flags; the messages name the flag.
Status validate(const Options &o, const ModelSpec &spec) {
  if (o.data.empty())
    return Status::error("--data is required");
  if (o.steps <= 0)
    return Status::error("--steps must be positive (got " +
                         std::to_string(o.steps) + ")");
  if (!(o.lr > 0) || !std::isfinite(o.lr))
    return Status::error("--lr must be a positive number (got " +
                         std::to_string(o.lr) + ")");
  // The step takes the learning rate as f32.
  if (!std::isfinite(float(o.lr)) || float(o.lr) == 0.0f)
    return Status::error("--lr " + formatNumber(o.lr) +
                         " does not fit a 32-bit float (1.2e-38 to 3.4e38)");
  if (o.checkpointEvery < 0)
    return Status::error("--checkpoint-every must be >= 0 (0: only at the "
                         "end)");
  if (o.checkpointEvery > 0 && o.checkpointDir.empty())
    return Status::error("--checkpoint-every needs --checkpoint-dir");
  if (o.keepCheckpoints < 2)
    return Status::error("--keep-checkpoints must be at least 2, so that a "
                         "damaged newest checkpoint can fall back to the "
                         "previous one (got " +
                         std::to_string(o.keepCheckpoints) + ")");
  if (o.logEvery <= 0)
    return Status::error("--log-every must be positive (got " +
                         std::to_string(o.logEvery) + ")");
  if (o.threads < 0)
    return Status::error("--threads must be >= 0 (got " +
                         std::to_string(o.threads) + ")");
  if (!(o.collectiveTimeout > 0) || !(o.collectiveTimeout <= 1e9))
    return Status::error("--collective-timeout must be a positive number of "
                         "seconds (got " + formatNumber(o.collectiveTimeout) +
                         ")");
  for (size_t h = 0; h < spec.hyperParams.size(); ++h)
    if (!std::isfinite(o.hyperParams[h]))
      return Status::error(spec.hyperParams[h].flag +
                           " must be a finite number");
  return Status::success();
}

/// The program this process runs and its validated spec: a pipeline
/// executable holds one per pipeline rank (ModelABI.h), picked by the
/// launcher's rank; and the batch inputs of the whole model, which every
/// rank's loader reads.
Status selectProgram(const WeftModel &model, const WeftModel *&program,
                     ModelSpec &chosen,
                     std::vector<BatchInputSpec> &batchInputs,
                     BatchLayout &dataLayout) {
  int32_t count = std::max(model.numPrograms, 1);
  if (count > 1 && !model.programs)
    return Status::error("compiled model: a pipeline executable without "
                         "its program table");
  std::vector<const WeftModel *> all;
  std::vector<ModelSpec> specs(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) {
    all.push_back(count > 1 ? model.programs[i] : &model);
    if (!all.back())
      return Status::error("compiled model: a pipeline program is missing");
    if (Status s = loadModelSpec(*all.back(), specs[size_t(i)]); !s.ok())
      return s;
  }
  int64_t stage = 0;
  if (count > 1) {
    // The launch is checked again, with errors, once the flags are read.
    LaunchInfo launch;
    int64_t rank = 0;
    if (readLaunchInfo([](const char *name) { return std::getenv(name); },
                       launch)
            .ok())
      rank = launch.rank;
    // Pipeline rank = the coordinate on the mesh's pp axis (ranks are
    // numbered row-major over the mesh, its major axis first).
    int64_t ranks = specs.front().meshDevices(), stride = ranks;
    stage = -1;
    for (const MeshAxisSpec &a : specs.front().mesh) {
      stride /= a.size;
      if (a.name == "pp")
        stage = (rank / stride) % a.size;
    }
    if (stage < 0 || stage >= count)
      return Status::error("compiled model: a pipeline executable whose "
                           "mesh has no pp axis of " +
                           std::to_string(count) + " ranks");
    if (rank >= ranks)
      return Status::error(
          "this is rank " + std::to_string(rank) + " of " +
          std::to_string(launch.worldSize) + ", but the executable runs on " +
          std::to_string(ranks) + " (weftc --mesh " +
          specs.front().describeMesh() + "): launch " + std::to_string(ranks) +
          " processes, e.g. weftrun --nproc-per-node " + std::to_string(ranks));
  }
  bool haveLayout = false;
  for (const ModelSpec &spec : specs) {
    if (!spec.batchArgs.empty() && !haveLayout) {
      dataLayout = spec.batchLayout;
      haveLayout = true;
    }
    for (int i : spec.batchArgs)
      if (std::none_of(batchInputs.begin(), batchInputs.end(),
                       [&](const BatchInputSpec &b) {
                         return b.name == spec.args[i].name;
                       }))
        batchInputs.push_back(
            {spec.args[i].name, spec.args[i].dtype, spec.args[i].shape});
  }
  program = all[size_t(stage)];
  chosen = std::move(specs[size_t(stage)]);
  return Status::success();
}

int runTrainingImpl(const WeftModel &executable, int argc,
                    const char *const *argv, std::ostream &out,
                    std::ostream &err) {
  const WeftModel *program = nullptr;
  std::vector<BatchInputSpec> batchInputs;
  BatchLayout dataLayout;
  ModelSpec spec;
  Status loaded =
      selectProgram(executable, program, spec, batchInputs, dataLayout);
  if (!loaded.ok()) {
    err << ("error: " + loaded.message + "\n");
    return 1;
  }
  const WeftModel &model = *program;
  std::set<std::string> builtin(std::begin(kBuiltinFlags),
                                std::end(kBuiltinFlags));
  for (HyperParamSpec &hp : spec.hyperParams)
    if (builtin.count(hp.flag))
      hp.flag = "--hp-" + hp.flag.substr(2);

  Options opts;
  opts.hyperParams.resize(spec.hyperParams.size());
  CLI::App app("Trains the model compiled into this executable, one "
               "compiled step per batch.",
               argc > 0 && argv[0] ? argv[0] : "train");
  app.add_option("--data", opts.data,
                 "Training data: FILE.npy (samples along axis 0) for the "
                 "model's one non-label input, NAME=FILE.npy per batch "
                 "input, or token shards (llm.c or raw uint16 .bin files, a "
                 "directory of .bin files, or a glob such as 'data/*.bin', "
                 "read in name order)")
      ->expected(1, CLI::detail::expected_max_vector_size);
  app.add_option("--labels", opts.labels,
                 "Labels .npy for the input 'labels' (same as --data "
                 "labels=FILE)");
  app.add_option("--steps", opts.steps,
                 "Total number of steps to train (a resumed run continues "
                 "up to it)")
      ->required();
  app.add_option("--lr", opts.lr,
                 "Base learning rate; the compiled schedule scales it")
      ->required();
  app.add_option("--seed", opts.seed, "Seed of the data order")
      ->capture_default_str();
  app.add_flag("--no-shuffle", opts.noShuffle,
               "Visit samples in file order (batch i = samples [iB, "
               "(i+1)B))");
  app.add_flag("--skip-nonfinite", opts.skipNonFinite,
               "Skip a step whose loss or gradient norm is not finite "
               "(default: stop with an error)");
  app.add_option("--metrics", opts.metrics,
                 "Write one JSON object per step to this .jsonl file");
  app.add_option("--checkpoint-dir", opts.checkpointDir,
                 "Save checkpoints here and resume from the newest one");
  app.add_option("--checkpoint-every", opts.checkpointEvery,
                 "Also checkpoint every K steps (0: only at the end)")
      ->capture_default_str();
  app.add_option("--keep-checkpoints", opts.keepCheckpoints,
                 "Keep the newest K checkpoints (at least 2)")
      ->capture_default_str();
  app.add_option("--log-every", opts.logEvery,
                 "Print a progress line every K steps")
      ->capture_default_str();
  app.add_option("--threads", opts.threads,
                 "Compute threads: one OpenMP team runs the fused kernels and "
                 "BLAS (0: OMP_NUM_THREADS or OPENBLAS_NUM_THREADS if set, "
                 "else this process's CPUs divided by the ranks on its node)")
      ->capture_default_str();
  app.add_option("--collective-timeout", opts.collectiveTimeout,
                 "Seconds the ranks of a mesh wait for each other, to meet "
                 "and in every collective, before failing")
      ->capture_default_str();
  for (size_t h = 0; h < spec.hyperParams.size(); ++h) {
    const HyperParamSpec &hp = spec.hyperParams[h];
    CLI::Option *o =
        app.add_option(hp.flag, opts.hyperParams[h],
                       "Optimizer hyperparameter " + hp.name +
                           (hp.hasDefault ? " (compiled default)" : ""));
    if (hp.hasDefault) {
      opts.hyperParams[h] = hp.defaultValue;
      o->capture_default_str();
    } else {
      o->required();
    }
  }
  // A repeated flag takes its last value, as in most tools (so a wrapper
  // script can append overrides); --data collects all of its values.
  for (CLI::Option *o : app.get_options())
    if (o->get_name() != "--data" && o->get_expected_max() == 1)
      o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.footer(describeModel(spec) +
             "\nStopping with Ctrl-C (SIGINT), SIGTERM or SIGHUP finishes the current "
             "step and writes a checkpoint (with --checkpoint-dir); rerunning "
             "the same command resumes exactly where it stopped.");
  app.failure_message([](const CLI::App *, const CLI::Error &e) {
    return "error: " + std::string(e.what()) +
           "\nRun with --help for more information.\n";
  });
  // Hyperparameters the step was compiled without get a pointer to the
  // compiler flag instead of CLI11's "not expected".
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i] ? argv[i] : "";
    std::string flag = arg.substr(0, arg.find('='));
    if (flag != "--weight-decay" && flag != "--momentum" &&
        flag != "--clip-norm")
      continue;
    if (std::none_of(spec.hyperParams.begin(), spec.hyperParams.end(),
                     [&](const HyperParamSpec &hp) { return hp.flag == flag; })) {
      err << "error: " << flag << ": this executable was compiled without it "
          << "(weftc's default for its optimizer); compile with weftc "
          << flag << " VALUE to train with it\n";
      return 1;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    int code = app.exit(e, out, err);
    return code == 0 ? 0 : 1;
  }
  if (Status s = checkIntegerFlags(app); !s.ok()) {
    err << ("error: " + s.message + "\n");
    return 1;
  }
  if (Status s = validate(opts, spec); !s.ok()) {
    err << ("error: " + s.message + "\n");
    return 1;
  }
  LaunchInfo launch;
  if (Status s = readLaunchInfo(
          [](const char *name) { return std::getenv(name); }, launch);
      !s.ok()) {
    err << ("error: " + s.message + "\n");
    return 1;
  }
  Fault fault;
  if (const char *text = std::getenv("WEFT_FAULT"); text && *text) {
    if (Status s = parseFault(text, fault); !s.ok()) {
      err << ("error: " + s.message + "\n");
      return 1;
    }
    const char *restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
    if (restart && *restart && std::string(restart) != "0")
      fault.action = Fault::None;
  }
  RuntimeContext context(launch, opts.threads);
  if (spec.deviceType == WEFT_DEVICE_CUDA) {
    // Before anything else touches the device; without a GPU the run ends
    // here, saying what it needs.
    if (Status s = context.useCudaDevice(); !s.ok()) {
      err << ("error: " + s.message + "\n");
      return 1;
    }
  }
  // A partitioned step's ranks meet before anything else; a one-device
  // step never touches the network.
  std::ostream *progress = &out;
  std::ostringstream quiet;
  if (!spec.mesh.empty()) {
    auto timeout = std::chrono::milliseconds(
        int64_t(std::ceil(opts.collectiveTimeout * 1000)));
    if (Status s = context.joinMesh(spec.mesh, timeout); !s.ok()) {
      err << ("error: rank " + std::to_string(launch.rank) + ": " + s.message +
              "\n");
      return 1;
    }
    // One rank speaks for the run: the others' progress lines and metrics
    // would repeat rank 0's (their errors still go to stderr).
    if (launch.rank != 0) {
      progress = &quiet;
      opts.metrics.clear();
    }
  }

  SignalScope signals;
  Trainer trainer(model, spec, std::move(batchInputs), dataLayout, opts,
                  fault, context, *progress, err);
  int code = trainer.run(app.count("--seed") > 0);
  reportFailure(code);
  return code;
}

} // namespace

int weft::rt::runTraining(const WeftModel &model, int argc,
                          const char *const *argv, std::ostream &out,
                          std::ostream &err) {
  gFailureReported = false;
  int code = 1;
  try {
    code = runTrainingImpl(model, argc, argv, out, err);
  } catch (const std::exception &e) {
    err << (std::string("error: ") + e.what() + "\n");
  } catch (...) {
    err << "error: unexpected failure\n";
  }
  reportFailure(code);
  return code;
}

int weft::rt::runTraining(const WeftModel &model, int argc,
                          const char *const *argv) {
  return runTraining(model, argc, argv, std::cout, std::cerr);
}
