#!/usr/bin/python3
"""CPU time per training step of Weft executables (and PyTorch 1.13) on one
thread, robust on a shared machine: wall time counts the other processes,
CPU time only ours. Each measurement is (user + sys of a LONG-step run) -
(user + sys of a SHORT-step run), divided by LONG - SHORT, so that start-up
(loading, compiling oneDNN's kernels, building the model) cancels out. The
executables (and PyTorch) alternate, round after round, so that a change in
the machine's load hits all of them alike.

  bench/cpu_step.py --work DIR [--rounds 4] [--torch] EXE...

DIR is a `bench/train_step.py --work` folder of the CNN or MLP (the model's
subfolder, holding x.npy and y.npy); the batches are repeated to LONG
steps in DIR/cpu_step/. --torch adds PyTorch's training loop
(common.torch_step) on the same batches with 1 OpenMP thread.
"""

import argparse
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True)
    parser.add_argument("--model", default="cnn", choices=["cnn", "mlp"])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--long", type=int, default=40)
    parser.add_argument("--short", type=int, default=10)
    parser.add_argument("--torch", action="store_true")
    parser.add_argument("exes", nargs="*")
    args = parser.parse_args()
    if args.long <= args.short:
        parser.error("--long must be more steps than --short")
    if not args.exes and not args.torch:
        parser.error("name at least one executable, or --torch")

    # Enough batches for LONG steps: PyTorch's loop does not wrap around.
    batch = common.CONFIGS[args.model]["batch"]
    data = os.path.join(args.work, "cpu_step")
    os.makedirs(data, exist_ok=True)
    for name in ("x.npy", "y.npy"):
        a = np.load(os.path.join(args.work, name))
        reps = -(-args.long * batch // len(a))
        np.save(os.path.join(data, name),
                np.concatenate([a] * reps)[:args.long * batch])

    env = common.thread_env(1)
    runs = list(args.exes) + (["torch"] if args.torch else [])

    def measure(run, steps):
        if run == "torch":
            # Counted inside the interpreter, after importing PyTorch: its
            # import takes a second or two of CPU and varies by more than
            # the steps' difference would average out.
            code = ("import resource, sys; sys.path.insert(0, %r); "
                    "import common, numpy, torch, torch.nn.functional; "
                    "u = lambda: sum(resource.getrusage("
                    "resource.RUSAGE_SELF)[:2]); t = u(); "
                    "common.torch_step(%r, %r, %d, 1, %r); print(u() - t)"
                    % (common.HERE, args.model, data, steps,
                       os.path.join(data, "torch.json")))
            out = subprocess.run([common.PYTHON, "-c", code], check=True,
                                 stdout=subprocess.PIPE, env=env, text=True)
            return float(out.stdout.split()[-1])
        return common.cpu_seconds(
            [run, "--data", os.path.join(data, "x.npy"), "--labels",
             os.path.join(data, "y.npy"), "--steps", str(steps), "--lr",
             str(common.LR), "--no-shuffle", "--threads", "1",
             "--log-every", "100000"], env)

    common.print_load("start")
    results = {run: [] for run in runs}
    for r in range(args.rounds):
        for run in (runs if r % 2 == 0 else runs[::-1]):
            long_s = measure(run, args.long)
            short_s = measure(run, args.short)
            results[run].append(1e3 * (long_s - short_s) /
                                (args.long - args.short))
    for run in runs:
        ms = sorted(results[run])
        print("%-40s CPU ms/step (1 thread): median %.1f; rounds %s"
              % (run, ms[len(ms) // 2],
                 " ".join("%.1f" % v for v in results[run])))
    common.print_load("end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
