# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "Weft"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.weft_obj_root, "test")
config.excludes = ["lib", "Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]

# Captured variables must not leak across CHECK-LABEL blocks.
config.environment["FILECHECK_OPTS"] = "-enable-var-scope"
# Reference numbers come from Debian's PyTorch, which lives under the system
# interpreter, not whatever python3 is first on PATH.
python = "/usr/bin/python3"
config.substitutions.append(("%python", python))
config.substitutions.append(
    ("%compare", python + " " + os.path.join(config.test_source_root, "lib", "compare_npy.py")))
config.substitutions.append(
    ("%export", python + " " + os.path.join(config.weft_src_root, "examples", "models", "export.py")))
config.substitutions.append(("%weft_src", config.weft_src_root))

# PyTorch would otherwise grab both cores per process while lit runs two.
config.environment["OMP_NUM_THREADS"] = "1"
config.environment["MKL_NUM_THREADS"] = "1"

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
tool_dirs = [config.weft_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["weft-opt", "weftc", "weft-eval", "weftrun", "weft-ckpt", "weft-cluster", "weft-modelgen", "weft-plan", "weft-profile-cluster"], tool_dirs)

# Executing lowered code (test/Conversion/WeftToLinalg): mlir-runner with the
# runner utilities, and the driver comparing it against weft-eval.
llvm_lib_dir = os.path.join(os.path.dirname(config.llvm_tools_dir), "lib")
runner_libs = ",".join(
    os.path.join(llvm_lib_dir, lib)
    for lib in ["libmlir_c_runner_utils.so", "libmlir_runner_utils.so"])
mlir_runner = os.path.join(config.llvm_tools_dir, "mlir-runner")
config.substitutions.append(("%mlir_runner", mlir_runner))
config.substitutions.append(("%runner_libs", runner_libs))
config.substitutions.append(
    ("%check_lowering",
     "%s %s --tools %s --runner %s --runner-libs %s" % (
         python, os.path.join(config.test_source_root, "lib",
                              "check_lowering.py"),
         config.weft_tools_dir, mlir_runner, runner_libs)))

# Multi-node tests emulate nodes with network namespaces
# (scripts/cluster.sh); where they cannot be made the tests are reported
# UNSUPPORTED, and this says why.
import subprocess
cluster = os.path.join(config.weft_src_root, "scripts", "cluster.sh")
probe = subprocess.run([cluster, "check"], capture_output=True, text=True)
if probe.returncode == 0:
    config.available_features.add("netns")
else:
    lit_config.note("multi-node tests skipped: " + probe.stderr.strip())
config.substitutions.append(("%cluster", cluster))

# weftc --target cuda compiles its kernels with the CUDA toolkit's ptxas and
# fatbinary (docs/gpu.md); without them those tests are UNSUPPORTED, and
# this says why.
cuda_bin = "/usr/local/cuda/bin"
if all(os.access(os.path.join(cuda_bin, t), os.X_OK) for t in ["ptxas", "fatbinary"]):
    config.available_features.add("cuda-toolkit")
    config.substitutions.append(("%ptxas", os.path.join(cuda_bin, "ptxas")))
else:
    lit_config.note("--target cuda tests skipped: no CUDA toolkit (ptxas, "
                    "fatbinary) under /usr/local/cuda")
# A machine with the NVIDIA driver (and so, here, a GPU) runs the CUDA
# executables; elsewhere they must refuse to start with a clear message.
import ctypes
try:
    cuda = ctypes.CDLL("libcuda.so.1")
    config.available_features.add("cuda-driver")
    # NCCL puts each rank of a group on a GPU of its own: a mesh on GPUs
    # needs two of them.
    count = ctypes.c_int(0)
    if cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 \
            and count.value >= 2:
        config.available_features.add("cuda-multi-gpu")
    else:
        lit_config.note("GPU mesh tests not run: fewer than 2 CUDA devices")
except OSError:
    lit_config.note("CUDA executables not run: no NVIDIA driver (libcuda.so.1)")
