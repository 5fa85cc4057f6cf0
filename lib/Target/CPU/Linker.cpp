//===- Linker.cpp - Link the model object with the Weft runtime -----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The system C++ compiler drives the link: the runtime is C++ and needs its
// standard library, and `c++` knows where the C runtime start files are.
// The runtime's `main` lives in libWeftRuntimeMain.a and pulls the model in
// through `weft_get_model()`.
//
//===----------------------------------------------------------------------===//

#include "weft/Target/CPU.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace {
constexpr const char *kRuntimeLibraries[] = {
    "libWeftRuntimeMain.a", "libWeftRuntime.a", "libWeftFormats.a"};

bool hasRuntime(llvm::StringRef dir) {
  for (const char *lib : kRuntimeLibraries) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, lib);
    if (!llvm::sys::fs::exists(path))
      return false;
  }
  return true;
}
} // namespace

mlir::FailureOr<std::string> weft::findRuntimeDir(llvm::StringRef argv0,
                                                  llvm::StringRef override,
                                                  mlir::Location loc) {
  std::vector<std::string> candidates;
  if (!override.empty()) {
    candidates.push_back(override.str());
  } else {
    // getMainExecutable resolves symlinks and PATH lookups.
    static int anchor;
    std::string exe =
        llvm::sys::fs::getMainExecutable(argv0.str().c_str(), &anchor);
    llvm::SmallString<256> bin(exe.empty() ? argv0 : llvm::StringRef(exe));
    llvm::sys::path::remove_filename(bin);
    for (const char *sub : {"../lib/Runtime", "../lib"}) {
      llvm::SmallString<256> dir(bin);
      llvm::sys::path::append(dir, sub);
      llvm::sys::path::remove_dots(dir, /*remove_dot_dot=*/true);
      candidates.push_back(std::string(dir));
    }
  }
  for (const std::string &dir : candidates)
    if (hasRuntime(dir))
      return dir;
  mlir::InFlightDiagnostic os = mlir::emitError(loc);
  os << "cannot find the Weft runtime (";
  for (const char *lib : kRuntimeLibraries)
    os << (lib == kRuntimeLibraries[0] ? "" : ", ") << lib;
  os << ") in ";
  for (size_t i = 0; i < candidates.size(); ++i)
    os << (i ? " or " : "") << candidates[i];
  os << "; build the runtime (ninja WeftRuntimeMain) or pass --runtime-dir";
  return mlir::failure();
}

bool weft::canLinkNccl() {
#ifdef WEFT_NCCL_LIBRARY
  return true;
#else
  return false;
#endif
}

mlir::LogicalResult weft::linkExecutable(const LinkOptions &options,
                                         mlir::Location loc) {
  if (options.nccl && !canLinkNccl())
    return mlir::emitError(loc)
           << "this Weft was built without NCCL, which a --target cuda "
              "executable on a mesh links; rebuild Weft with the CUDA "
              "toolkit and NCCL under /usr/local/cuda";
  llvm::ErrorOr<std::string> cxx = llvm::sys::findProgramByName("c++");
  if (!cxx)
    return mlir::emitError(loc)
           << "cannot find the C++ compiler 'c++' on PATH, which links the "
              "executable; install g++ or clang, or write an object with "
              "--emit=obj and link it yourself";
  std::vector<std::string> args = {*cxx, "-o", options.output};
  llvm::append_range(args, options.objects);
  args.push_back("-Wl,--start-group");
  std::vector<const char *> libs(std::begin(kRuntimeLibraries),
                                 std::end(kRuntimeLibraries));
  if (options.nccl)
    libs.push_back("libWeftRuntimeNccl.a");
  for (const char *lib : libs) {
    llvm::SmallString<256> path(options.runtimeDir);
    llvm::sys::path::append(path, lib);
    args.push_back(std::string(path));
  }
  args.push_back("-Wl,--end-group");
#ifdef WEFT_NCCL_LIBRARY
  // The toolkit's libraries by their full paths, found again at run time
  // through the rpath: a GPU machine has them where the toolkit is.
  if (options.nccl)
    for (llvm::StringRef lib : {WEFT_CUDART_LIBRARY, WEFT_NCCL_LIBRARY}) {
      args.push_back(lib.str());
      args.push_back("-Wl,-rpath," + llvm::sys::path::parent_path(lib).str());
    }
#endif
  // Fused kernels run their parallel loops on LLVM's OpenMP runtime, and
  // GEMMs on OpenBLAS's OpenMP build, so both share one team of threads
  // instead of two pools spinning against each other on the same cores.
  // That OpenBLAS needs libgomp.so.1, which LLVM's directory aliases to
  // libomp; DT_RPATH (not RUNPATH) makes the alias apply to OpenBLAS's own
  // dependency as well, so one OpenMP runtime is loaded.
  args.push_back("-L" WEFT_OPENBLAS_OPENMP_DIR);
  args.push_back("-L" WEFT_OPENMP_LIB_DIR);
  args.push_back("-Wl,--disable-new-dtags");
  args.push_back("-Wl,-rpath," WEFT_OPENBLAS_OPENMP_DIR ":" WEFT_OPENMP_LIB_DIR);
  for (const char *lib : {"-lgloo", "-lopenblas", "-lomp", "-lpthread", "-lm"})
    args.push_back(lib);
  llvm::append_range(args, options.extraArgs);

  std::vector<llvm::StringRef> argRefs(args.begin(), args.end());
  if (options.verbose) {
    for (llvm::StringRef arg : argRefs)
      llvm::errs() << arg << " ";
    llvm::errs() << "\n";
  }
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(*cxx, argRefs, std::nullopt, {}, 0, 0,
                                     &message);
  if (rc != 0)
    return mlir::emitError(loc)
           << "linking " << options.output << " with " << *cxx << " failed"
           << (message.empty() ? "" : ": " + message)
           << " (the linker's messages are above)";
  return mlir::success();
}

mlir::LogicalResult weft::appendWeights(llvm::StringRef executable,
                                        llvm::StringRef weightsPath,
                                        mlir::Location loc) {
  auto fail = [&](llvm::StringRef path, std::error_code ec) {
    return mlir::emitError(loc)
           << "cannot append the initial weights " << weightsPath << " to "
           << executable << ": " << path << ": " << ec.message();
  };
  auto lastError = [] { return std::error_code(errno, std::generic_category()); };
  int in = -1, out = -1;
  if (std::error_code ec = llvm::sys::fs::openFileForRead(weightsPath, in))
    return fail(weightsPath, ec);
  // Not O_APPEND, which copy_file_range refuses: written from the end.
  if (std::error_code ec = llvm::sys::fs::openFileForWrite(
          executable, out, llvm::sys::fs::CD_OpenExisting)) {
    llvm::sys::Process::SafelyCloseFileDescriptor(in);
    return fail(executable, ec);
  }
  auto finish = [&](llvm::StringRef path, std::error_code ec) {
    llvm::sys::Process::SafelyCloseFileDescriptor(in);
    if (std::error_code closed =
            llvm::sys::Process::SafelyCloseFileDescriptor(out);
        closed && !ec) {
      ec = closed;
      path = executable;
    }
    return ec ? fail(path, ec) : mlir::success();
  };
  auto writeAll = [&](const char *data, size_t size) -> std::error_code {
    while (size) {
      ssize_t n = ::write(out, data, size);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return lastError();
      data += n;
      size -= size_t(n);
    }
    return {};
  };
  // Page-aligned weights map onto page-aligned memory.
  off_t end = ::lseek(out, 0, SEEK_END);
  if (end < 0)
    return finish(executable, lastError());
  constexpr off_t kPage = 4096;
  std::string zeros(size_t((kPage - end % kPage) % kPage), '\0');
  if (std::error_code ec = writeAll(zeros.data(), zeros.size()))
    return finish(executable, ec);
#ifdef __linux__
  // In the kernel, without a round trip through this process's memory;
  // where the file systems cannot, through a buffer below.
  for (;;) {
    ssize_t n =
        ::copy_file_range(in, nullptr, out, nullptr, size_t(1) << 30, 0);
    if (n > 0)
      continue;
    if (n == 0)
      return finish(executable, {});
    if (errno == EINTR)
      continue;
    if (errno != EXDEV && errno != ENOSYS && errno != EINVAL &&
        errno != EOPNOTSUPP)
      return finish(executable, lastError());
    break;
  }
#endif
  std::vector<char> buffer(size_t(1) << 20);
  for (;;) {
    ssize_t n = ::read(in, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return finish(weightsPath, lastError());
    if (n == 0)
      return finish(executable, {});
    if (std::error_code ec = writeAll(buffer.data(), size_t(n)))
      return finish(executable, ec);
  }
}
