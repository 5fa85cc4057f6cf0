#!/usr/bin/python3
"""Time one training step of Weft's executable against PyTorch 1.13 (CPU).

Usage:
  /usr/bin/python3 bench/train_step.py [--models mlp,gpt,cnn]
      [--precision f32,bf16] [--threads 1,2] [--steps 20] [--warmup 3]
      [--repeat 2] [--torch-omp K] [--work DIR] [--weftc build/bin/weftc]
      [--seq T] [--weftc-arg FLAG]... [--json OUT.json]

For each model (bench/common.py: an MLP 1024-4096-4096-1024 at batch 256,
a GPT decoder with 4 layers, d_model 256, T 128 at batch 8, a small CNN on
32x32 images at batch 64): exports it from PyTorch, compiles it with
`weftc --emit=exe --optimizer adamw` (and `--precision bf16` for bf16),
and for each thread count and precision trains --steps AdamW steps on the
same batches and initial weights, once with the executable (`--threads N
--no-shuffle`, step times from its --metrics file: batch wait + step) and
once with PyTorch (torch.set_num_threads(N), OMP_NUM_THREADS =
OPENBLAS_NUM_THREADS = N; zero_grad + forward + cross-entropy + backward +
AdamW.step; in bf16 forward and loss under torch.autocast("cpu",
dtype=torch.bfloat16)). Reports the median step time after --warmup steps
(the best of --repeat runs: other processes only slow a run down), the
ratio Weft / PyTorch (below 1: Weft is faster), the GFLOP/s the step's
matrix products reach, and with both precisions each side's bf16 / f32
step-time ratio (below 1: bf16 is faster). --seq T trains the GPT on
sequences of T tokens instead of 128 (longer sequences: attention's T x T
scores grow); --weftc-arg passes one more flag to every weftc compile (e.g.
--weftc-arg=--fused-attention=on). With
--torch-omp K, PyTorch is also timed with K OpenMP threads (OpenBLAS
keeping N), since OpenMP's and OpenBLAS's spinning threads can compete for
the same cores. The first losses of both sides are printed as a check that
they train the same thing.

This is a benchmark, not a test: numbers depend on the machine and load.
"""

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_run_options(p, steps=20, warmup=3,
                           repeat_help="runs per measurement; the fastest "
                                       "median is kept")
    p.add_argument("--torch-omp", type=int,
                   help="also time PyTorch with this many OpenMP threads "
                        "(OpenBLAS keeps the thread count), e.g. 1 to avoid "
                        "OpenMP and OpenBLAS threads competing for cores")
    p.set_defaults(models="mlp,gpt,cnn")
    p.add_argument("--precision", default="f32",
                   help="comma-separated: f32, bf16 (e.g. f32,bf16)")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--seq", type=int,
                   help="the GPT's sequence length (default %d)"
                   % common.CONFIGS["gpt"]["block"])
    p.add_argument("--weftc-arg", action="append", default=[],
                   help="one more weftc flag for every compile, e.g. "
                   "--weftc-arg=--fused-attention=off")
    args = p.parse_args(argv)
    if args.seq is not None:
        if args.seq < 1:
            p.error("--seq must be at least 1")
        common.CONFIGS["gpt"]["block"] = args.seq
    models = args.models.split(",")
    threads = [int(t) for t in args.threads.split(",")]
    precisions = args.precision.split(",")
    for m in models:
        if m not in common.CONFIGS:
            p.error("unknown model %s (have %s)" % (m, ", ".join(common.CONFIGS)))
    for x in precisions:
        if x not in common.PRECISIONS:
            p.error("unknown precision %s (have %s)"
                    % (x, ", ".join(common.PRECISIONS)))

    work_root = args.work or tempfile.mkdtemp(prefix="weft-bench-")
    common.print_load("start")
    results = []
    for name in models:
        work = os.path.join(work_root, name)
        os.makedirs(work, exist_ok=True)
        print("== %s" % common.describe(name), flush=True)
        common.export(name, work)
        data = common.write_data(name, work, args.steps)
        gflop = common.matmul_flops(name) / 1e9
        exes = {}
        for x in precisions:
            exes[x], seconds = common.compile_exe(name, work, args.weftc, x,
                                                  args.weftc_arg)
            print("   weftc --emit=exe --precision %s: %.1f s; matrix products "
                  "per step: %.1f GFLOP" % (x, seconds, gflop), flush=True)
        for n in threads:
            rows = {}
            for x in precisions:
                row = run_pair(args, name, work, data, exes[x], n, x, gflop)
                rows[x] = row
                results.append(row)
            if "f32" in rows and "bf16" in rows:
                f, h = rows["f32"], rows["bf16"]
                line = ("   %d thread%s bf16/f32: Weft %.2f   PyTorch %.2f"
                        % (n, " " if n == 1 else "s",
                           h["weft"]["median_ms"] / f["weft"]["median_ms"],
                           h["torch"]["median_ms"] / f["torch"]["median_ms"]))
                if "torch_omp" in f and "torch_omp" in h:
                    line += ("   PyTorch with %d OpenMP: %.2f"
                             % (args.torch_omp, h["torch_omp"]["median_ms"]
                                / f["torch_omp"]["median_ms"]))
                print(line, flush=True)
    return common.finish(results, args.json)


def run_pair(args, name, work, data, exe, n, precision, gflop):
    """Times Weft and PyTorch on one model, thread count and precision;
    prints one line (and one with --torch-omp) and the first losses."""
    weft = common.best_of(args.repeat, lambda: common.run_weft(
        exe, data, work, args.steps, n, args.warmup))
    torch = common.best_of(args.repeat, lambda: common.run_torch(
        name, work, args.steps, n, args.warmup, precision=precision))
    row = {"model": name, "precision": precision, "threads": n,
           "weft": weft, "torch": torch,
           "ratio": weft["median_ms"] / torch["median_ms"],
           "gflop_per_step": gflop}
    print("   %d thread%s %-4s: Weft %8.1f ms/step (%5.1f GFLOP/s)   "
          "PyTorch %8.1f ms/step (%5.1f GFLOP/s)   Weft/PyTorch %.2f"
          % (n, " " if n == 1 else "s", precision, weft["median_ms"],
             gflop / weft["median_ms"] * 1e3, torch["median_ms"],
             gflop / torch["median_ms"] * 1e3, row["ratio"]), flush=True)
    if args.torch_omp is not None and args.torch_omp != n:
        alt = common.best_of(args.repeat, lambda: common.run_torch(
            name, work, args.steps, n, args.warmup,
            omp_threads=args.torch_omp, precision=precision))
        row["torch_omp"] = alt
        print("      PyTorch with %d OpenMP thread%s: %8.1f ms/step   "
              "Weft/PyTorch %.2f"
              % (args.torch_omp, "" if args.torch_omp == 1 else "s",
                 alt["median_ms"], weft["median_ms"] / alt["median_ms"]),
              flush=True)
    print("      first losses: Weft %s, PyTorch %s"
          % (" ".join("%.5f" % v for v in weft["losses"][:3]),
             " ".join("%.5f" % v for v in torch["losses"][:3])), flush=True)
    return row


if __name__ == "__main__":
    sys.exit(main())
