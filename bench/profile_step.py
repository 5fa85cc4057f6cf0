#!/usr/bin/python3
"""Where a training executable's time goes: `perf record` over its run,
samples grouped into GEMM, generated kernels, libm, the OpenMP runtime,
the scheduler (threads spinning or yielding), Weft's runtime and the rest.

Usage:
  /usr/bin/python3 bench/profile_step.py -- ./train --data tokens.bin \\
      --steps 10 --lr 1e-3 --threads 2 --no-shuffle

Needs `perf` (Debian: linux-perf). Percentages are of all samples of the
process, over every thread: with two threads, 50 % is one core's worth.
Startup (loading weights) is included, so run enough steps to dwarf it.
This is a benchmark aid, not a test.
"""

import collections
import re
import subprocess
import sys
import tempfile

GROUPS = [
    ("GEMM (OpenBLAS / oneDNN)",
     re.compile(r"gemm|dnnl|jit_|\[JIT\]|openblas|_HASWELL|_COOPERLAKE|_SKYLAKEX",
                re.I)),
    ("generated kernels", re.compile(r"^train_step\.")),
    ("libm", re.compile(r"^(__)?(exp|log|tanh|erf|expm1|pow|sqrt)f?(_fma|_finite)?(@plt)?$")),
    ("OpenMP runtime (waiting)", re.compile(r"__kmp|__kmpc|omp_|libomp")),
    ("scheduler / yield", re.compile(r"sched|yield|futex|finish_task_switch|_raw_spin")),
    ("Weft runtime", re.compile(r"weft::|weft_rt_")),
    ("memset / memcpy", re.compile(r"mem(set|move|cpy)")),
]


def main():
    if "--" not in sys.argv:
        sys.exit(__doc__)
    command = sys.argv[sys.argv.index("--") + 1:]
    with tempfile.NamedTemporaryFile(suffix=".data") as data:
        subprocess.run(["perf", "record", "-q", "-o", data.name, "--"] + command,
                       check=True, stdout=subprocess.DEVNULL)
        report = subprocess.run(
            ["perf", "report", "-i", data.name, "--no-children", "--sort",
             "dso,symbol", "--stdio", "-q", "-g", "none"],
            check=True, capture_output=True, text=True).stdout
    totals = collections.OrderedDict((name, 0.0) for name, _ in GROUPS)
    totals["other"] = 0.0
    top = []
    for line in report.splitlines():
        # oneDNN's JIT-compiled GEMM kernels show as "[JIT] tid N".
        m = re.match(r"\s*([\d.]+)%\s+(.+?)\s+\[[.k]\]\s+(\S+)", line)
        if not m:
            continue
        share, dso, symbol = float(m.group(1)), m.group(2), m.group(3)
        # Stripped libraries show addresses: name them by their library.
        if symbol.startswith("0x"):
            symbol = dso
        for name, pattern in GROUPS:
            if pattern.search(symbol):
                totals[name] += share
                break
        else:
            totals["other"] += share
        if len(top) < 8:
            top.append((share, symbol))
    for name, share in totals.items():
        print("%-26s %5.1f %%" % (name, share))
    print("top symbols: " + ", ".join("%s %.1f%%" % (s, p) for p, s in top))


if __name__ == "__main__":
    main()
