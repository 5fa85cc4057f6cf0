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
config.excludes = ["lib", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]

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
llvm_config.add_tool_substitutions(["weft-opt", "weftc", "weft-eval"], tool_dirs)
