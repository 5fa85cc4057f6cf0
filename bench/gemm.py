#!/usr/bin/python3
"""How much of a training step is matrix products, and how fast they run.

Usage:
  /usr/bin/python3 bench/gemm.py [--models mlp,gpt] [--threads 1,2]
      [--steps 10] [--warmup 2] [--repeat 2] [--work DIR]
      [--weftc build/bin/weftc]
      [--json OUT.json]

1. OpenBLAS SGEMM peak on this machine: bench/sgemm_peak.c (compiled here,
   linked with -lopenblas, the library weftc's executables link) on square
   2048^3 and 4096^3 products, per thread count (best of three).
2. For each model of bench/common.py and thread count, trains --steps steps
   with Weft's executable and with PyTorch under bench/blas_trace.c, an
   LD_PRELOAD shim that times every cblas_sgemm / sgemm_ call. Per step
   (after --warmup steps): the products' GFLOP (2 M N K per call, compared
   with the model's analytic count, which shows products done outside
   BLAS), the time inside SGEMM and its GFLOP/s, the whole step's time and
   the GFLOP/s it achieves against the peak, and the rest of the step
   (everything that is not SGEMM: elementwise loops, reductions, softmax,
   layer norm, the optimizer, copies). Of --repeat runs the fastest is
   kept. Weft's slowest product shapes are listed with their in-step
   GFLOP/s.

This is a benchmark, not a test.
"""

import argparse
import collections
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def build_tools(work):
    peak = os.path.join(work, "sgemm_peak")
    shim = os.path.join(work, "blas_trace.so")
    subprocess.run(["cc", "-O2", "-o", peak,
                    os.path.join(common.HERE, "sgemm_peak.c"), "-lopenblas"],
                   check=True)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", shim,
                    os.path.join(common.HERE, "blas_trace.c"), "-ldl"],
                   check=True)
    return peak, shim


def sgemm_rates(peak, threads, shapes, tries=3):
    """GFLOP/s per shape, the best of `tries` runs."""
    rates = {}
    for _ in range(tries):
        out = subprocess.run([peak, str(threads)] + shapes, check=True,
                             capture_output=True, text=True,
                             env=common.thread_env(threads)).stdout
        for line in out.splitlines():
            shape, rate = line.split()[0], float(line.split()[1])
            rates[shape] = max(rate, rates.get(shape, 0.0))
    return rates


def read_trace(path, steps, warmup):
    """The calls of the steps after warmup, as (api, ta, tb, m, n, k, ns)."""
    with open(path) as f:
        lines = [line.split() for line in f if not line.startswith("#")]
    if len(lines) % steps:
        sys.exit("error: %s: %d SGEMM calls do not split into %d equal steps"
                 % (path, len(lines), steps))
    per_step = len(lines) // steps
    calls = [(a, ta, tb, int(m), int(n), int(k), int(ns))
             for a, ta, tb, m, n, k, ns in lines[warmup * per_step:]]
    return calls, per_step


def analyze(calls, steps, step_ms, analytic_gflop, peak):
    flop = sum(2.0 * m * n * k for _, _, _, m, n, k, _ in calls) / steps
    gemm_ms = sum(c[6] for c in calls) / steps / 1e6
    return {
        "calls_per_step": len(calls) // steps,
        "gflop_per_step": flop / 1e9,
        "captured_fraction": flop / 1e9 / analytic_gflop,
        "gemm_ms": gemm_ms,
        "gemm_gflops": flop / 1e9 / (gemm_ms / 1e3),
        "step_ms": step_ms,
        "step_gflops": flop / 1e9 / (step_ms / 1e3),
        "step_fraction_of_peak": flop / 1e9 / (step_ms / 1e3) / peak,
        "other_ms": step_ms - gemm_ms,
    }


def slowest_shapes(calls, steps, count=6):
    by_shape = collections.OrderedDict()
    for _, ta, tb, m, n, k, ns in calls:
        key = "%dx%dx%d:%s%s" % (m, n, k, ta, tb)
        entry = by_shape.setdefault(key, [0, 0, 2.0 * m * n * k])
        entry[0] += 1
        entry[1] += ns
    rows = sorted(by_shape.items(), key=lambda kv: -kv[1][1])[:count]
    return [{"shape": key, "calls_per_step": n // steps,
             "ms_per_step": ns / steps / 1e6,
             "gflops": flop * n / (ns / 1e9) / 1e9}
            for key, (n, ns, flop) in rows]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_run_options(p, steps=10, warmup=2,
                           repeat_help="runs per measurement; the fastest "
                                       "is kept")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    models = args.models.split(",")
    threads = [int(t) for t in args.threads.split(",")]

    work_root = args.work or tempfile.mkdtemp(prefix="weft-gemm-")
    common.print_load("start")
    os.makedirs(work_root, exist_ok=True)
    peak_exe, shim = build_tools(work_root)
    peaks = {}
    print("== OpenBLAS SGEMM peak (square products, row-major NN)")
    for n in threads:
        rates = sgemm_rates(peak_exe, n, ["2048x2048x2048", "4096x4096x4096"])
        peaks[n] = max(rates.values())
        print("   %d thread%s: %s -> peak %.1f GFLOP/s"
              % (n, " " if n == 1 else "s",
                 ", ".join("%s %.1f" % kv for kv in rates.items()), peaks[n]),
              flush=True)

    results = {"peak_gflops": peaks, "models": []}
    for name in models:
        work = os.path.join(work_root, name)
        os.makedirs(work, exist_ok=True)
        analytic = common.matmul_flops(name) / 1e9
        print("== %s: %.2f GFLOP of matrix products per step (analytic)"
              % (common.describe(name), analytic), flush=True)
        common.export(name, work)
        data = common.write_data(name, work, args.steps)
        exe, _ = common.compile_exe(name, work, args.weftc)
        for n in threads:
            rows = {}
            for side in ("weft", "torch"):
                trace = os.path.join(work, "trace-%s-%d.txt" % (side, n))
                # The shim sees cblas_sgemm only: Weft's runtime is held
                # to OpenBLAS here (its default is oneDNN where it loads).
                env = {"LD_PRELOAD": shim, "BLAS_TRACE": trace,
                       "WEFT_RT_GEMM": "openblas"}
                best = None
                for _ in range(args.repeat):
                    if side == "weft":
                        run = common.run_weft(exe, data, work, args.steps, n,
                                              args.warmup, env)
                    else:
                        run = common.run_torch(name, work, args.steps, n,
                                               args.warmup, env)
                    if best is None or run["median_ms"] < best[0]["median_ms"]:
                        best = (run, read_trace(trace, args.steps,
                                                args.warmup)[0])
                run, calls = best
                steady = args.steps - args.warmup
                rows[side] = analyze(calls, steady, run["median_ms"], analytic,
                                     peaks[n])
                rows[side]["slowest"] = slowest_shapes(calls, steady)
            print("   %d thread%s (peak %.0f GFLOP/s):" % (
                n, " " if n == 1 else "s", peaks[n]))
            print("     %-8s %6s %8s %9s %10s %9s %10s %7s %9s" % (
                "", "calls", "GFLOP", "SGEMM ms", "SGEMM GF/s", "step ms",
                "step GF/s", "%peak", "other ms"))
            for side, label in (("weft", "Weft"), ("torch", "PyTorch")):
                r = rows[side]
                print("     %-8s %6d %8.2f %9.1f %10.1f %9.1f %10.1f %6.0f%% %9.1f"
                      % (label, r["calls_per_step"], r["gflop_per_step"],
                         r["gemm_ms"], r["gemm_gflops"], r["step_ms"],
                         r["step_gflops"], 100 * r["step_fraction_of_peak"],
                         r["other_ms"]))
            print("     Weft's products by time per step: " + "; ".join(
                "%s x%d %.1f ms %.0f GF/s" % (s["shape"], s["calls_per_step"],
                                              s["ms_per_step"], s["gflops"])
                for s in rows["weft"]["slowest"]), flush=True)
            results["models"].append({"model": name, "threads": n,
                                      "analytic_gflop": analytic, **rows})
    return common.finish(results, args.json)


if __name__ == "__main__":
    sys.exit(main())
