//===- GpuFatbin.cpp - PTX to one fatbin for several GPU generations ------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// MLIR's NVVM target serializes a module for one chip. An executable
// should start on the GPUs people have (H100/H200 and A100), so the PTX is
// compiled by ptxas for each architecture and packed with fatbinary; the
// PTX itself rides along for newer GPUs, compiled by the driver at load.
//
//===----------------------------------------------------------------------===//

#include "weft/Target/CUDA/Passes.h"

#include "mlir/Dialect/GPU/IR/CompilationInterfaces.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

namespace weft {
#define GEN_PASS_DEF_GPUFATBINPASS
#include "weft/Target/CUDA/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// Removes its files when it goes out of scope.
struct TempFiles {
  SmallVector<std::string> paths;
  ~TempFiles() {
    for (const std::string &p : paths)
      llvm::sys::fs::remove(p);
  }
  FailureOr<std::string> create(StringRef suffix) {
    SmallString<128> path;
    if (llvm::sys::fs::createTemporaryFile("weft-cuda", suffix, path))
      return failure();
    paths.push_back(path.str().str());
    return paths.back();
  }
};

std::string readFile(StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

std::string commandLine(ArrayRef<std::string> args) {
  std::string line;
  for (const std::string &a : args)
    line += (line.empty() ? "" : " ") + a;
  return line;
}

struct GpuFatbinPass : weft::impl::GpuFatbinPassBase<GpuFatbinPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<std::string> archList(archs.begin(), archs.end());
    if (archList.empty())
      archList = {"sm_90", "sm_80"};
    WalkResult result = getOperation().walk([&](gpu::BinaryOp binary) {
      if (failed(rewrite(binary, archList)))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  LogicalResult rewrite(gpu::BinaryOp binary, ArrayRef<std::string> archList) {
    auto objects = binary.getObjects().getValue();
    if (objects.size() != 1)
      return binary.emitError("--weft-gpu-fatbin: expected one object, the "
                              "module's PTX");
    auto object = cast<gpu::ObjectAttr>(objects.front());
    if (object.getFormat() != gpu::CompilationTarget::Assembly)
      return binary.emitError("--weft-gpu-fatbin: the object is not PTX "
                              "(run --gpu-module-to-binary{format=isa})");
    std::string bin = (Twine(toolkit) + "/bin").str();
    std::string ptxas = bin + "/ptxas", fatbinary = bin + "/fatbinary";
    for (const std::string &tool : {ptxas, fatbinary})
      if (!llvm::sys::fs::can_execute(tool))
        return binary.emitError("--target cuda needs the CUDA toolkit: ")
               << tool
               << " is missing; install the CUDA toolkit (12.0 or newer) "
                  "under /usr/local/cuda, or leave out --target cuda to "
                  "compile for the CPU";
    TempFiles temps;
    FailureOr<std::string> ptx = temps.create("ptx");
    if (failed(ptx))
      return binary.emitError("cannot create a temporary file");
    {
      std::error_code ec;
      llvm::raw_fd_ostream os(*ptx, ec);
      if (ec)
        return binary.emitError("cannot write ")
               << *ptx << ": " << ec.message();
      os << object.getObject().getValue();
    }
    // One ptxas per architecture, at the same time.
    struct Job {
      std::vector<std::string> args;
      std::string cubin, log;
      llvm::sys::ProcessInfo process;
    };
    SmallVector<Job> jobs(archList.size());
    for (auto [job, arch] : llvm::zip(jobs, archList)) {
      FailureOr<std::string> cubin = temps.create("cubin");
      FailureOr<std::string> log = temps.create("log");
      if (failed(cubin) || failed(log))
        return binary.emitError("cannot create a temporary file");
      job.cubin = *cubin;
      job.log = *log;
      job.args = {ptxas, "-arch=" + arch, "-O3", *ptx, "-o", *cubin};
      SmallVector<StringRef> argv(job.args.begin(), job.args.end());
      std::optional<StringRef> redirects[] = {std::nullopt, StringRef(job.log),
                                              StringRef(job.log)};
      std::string error;
      job.process = llvm::sys::ExecuteNoWait(ptxas, argv, std::nullopt,
                                             redirects, 0, &error);
      if (!job.process.Pid)
        return binary.emitError("cannot run ") << ptxas << ": " << error;
    }
    for (Job &job : jobs) {
      std::string error;
      llvm::sys::ProcessInfo done =
          llvm::sys::Wait(job.process, std::nullopt, &error);
      if (done.ReturnCode != 0)
        return binary.emitError("ptxas failed on the kernels' PTX: ")
               << commandLine(job.args) << "\n"
               << readFile(job.log) << error;
    }
    FailureOr<std::string> fatbin = temps.create("fatbin");
    FailureOr<std::string> log = temps.create("log");
    if (failed(fatbin) || failed(log))
      return binary.emitError("cannot create a temporary file");
    std::vector<std::string> args = {fatbinary, "-64", "--create=" + *fatbin};
    for (auto [job, arch] : llvm::zip(jobs, archList))
      args.push_back(
          "--image3=kind=elf,sm=" + StringRef(arch).drop_front(3).str() +
          ",file=" + job.cubin);
    args.push_back("--image3=kind=ptx,sm=" +
                   StringRef(ptxArch).drop_front(8).str() + ",file=" + *ptx);
    SmallVector<StringRef> argv(args.begin(), args.end());
    std::optional<StringRef> redirects[] = {std::nullopt, StringRef(*log),
                                            StringRef(*log)};
    std::string error;
    if (llvm::sys::ExecuteAndWait(fatbinary, argv, std::nullopt, redirects, 0,
                                  0, &error) != 0)
      return binary.emitError("fatbinary failed: ") << commandLine(args) << "\n"
                                                    << readFile(*log) << error;
    std::string bytes = readFile(*fatbin);
    if (bytes.empty())
      return binary.emitError("fatbinary wrote nothing to ") << *fatbin;
    Builder b(binary.getContext());
    // In the section nvcc uses, where cuobjdump and the profilers look.
    NamedAttrList properties(object.getProperties());
    properties.set(gpu::elfSectionName, b.getStringAttr(".nv_fatbin"));
    auto packed = gpu::ObjectAttr::get(
        binary.getContext(), object.getTarget(), gpu::CompilationTarget::Fatbin,
        b.getStringAttr(bytes), properties.getDictionary(binary.getContext()),
        object.getKernels());
    binary.setObjectsAttr(b.getArrayAttr({packed}));
    return success();
  }
};

} // namespace
