#!/usr/bin/python3
"""pp x dp: a stage's gradient reductions overlapping its last backward.

Usage:
  /usr/bin/python3 bench/pipeline_dp_overlap.py --weftc-before OLD_WEFTC
      [--weftc build/bin/weftc] [--weftrun build/bin/weftrun]
      [--micro-batches 8] [--layers 8] [--width 1024] [--micro-batch 64]
      [--schedule 1f1b] [--bucket-mb 4] [--steps 8] [--warmup 2]
      [--repeat 3] [--port 29660] [--work DIR] [--json OUT.json]

The deep MLP of bench/pipeline_bubble.py (LAYERS x Linear(WIDTH, WIDTH) +
ReLU, a 10-class head; PyTorch 1.13's eval-mode export, its batch one
micro-batch) is compiled by two weftc binaries with the same flags,
`--mesh pp=2,dp=2 --micro-batches M --schedule S --optimizer adamw
--bucket-mb B`: OLD_WEFTC (a build whose stage reductions run after the
schedule) and WEFTC. Each is trained for STEPS steps on 4 ranks under
weftrun, one BLAS thread per rank, the two alternating REPEAT times.
Printed per binary, from rank 0's metrics (stage 0, dp rank 0) without
the first WARMUP steps: the median step time, the median time the step
waited for its dp collectives (`comm_wait_s`: communication the
computation did not hide) and the mean pipeline bubble (time in pp sends
and receives, summed over the ranks), each run's medians and then their
median over the runs; the two binaries' final losses must agree.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from pipeline_bubble import export, write_data  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--weftc-before", required=True)
    p.add_argument("--weftc", default=os.path.join(ROOT, "build", "bin", "weftc"))
    p.add_argument("--weftrun",
                   default=os.path.join(ROOT, "build", "bin", "weftrun"))
    p.add_argument("--micro-batches", type=int, default=8)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--micro-batch", type=int, default=64)
    p.add_argument("--schedule", default="1f1b")
    p.add_argument("--bucket-mb", default="4")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--port", type=int, default=29660)
    p.add_argument("--work")
    p.add_argument("--json")
    args = p.parse_args()

    work = args.work or tempfile.mkdtemp(prefix="weft-ppdp-")
    os.makedirs(work, exist_ok=True)
    onnx_path = export(work, args.layers, args.width, args.micro_batch)
    m = args.micro_batches
    write_data(work, args.steps * m * args.micro_batch, args.width)
    flags = ["--mesh", "pp=2,dp=2", "--micro-batches", str(m),
             "--schedule", args.schedule, "--optimizer", "adamw",
             "--bucket-mb", args.bucket_mb]
    if args.schedule == "interleaved":
        flags += ["--virtual-stages", "2"]
    exes = {}
    for name, weftc in (("before", args.weftc_before), ("after", args.weftc)):
        exes[name] = os.path.join(work, "train-" + name)
        subprocess.run([weftc, onnx_path, "-o", exes[name]] + flags,
                       check=True, stderr=subprocess.DEVNULL)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    runs = {name: [] for name in exes}
    losses = {}
    for rep in range(args.repeat):
        for name, exe in exes.items():
            metrics = "%s-%d.jsonl" % (exe, rep)
            if os.path.exists(metrics):
                os.remove(metrics)
            subprocess.run([args.weftrun, "--nproc-per-node", "4",
                            "--master-port", str(args.port), exe,
                            "--data", os.path.join(work, "x.npy"),
                            "--labels", os.path.join(work, "y.npy"),
                            "--no-shuffle", "--steps", str(args.steps),
                            "--lr", "1e-3", "--threads", "1",
                            "--log-every", "100000", "--metrics", metrics],
                           check=True, env=env, stdout=subprocess.DEVNULL)
            lines = [json.loads(l) for l in open(metrics)]
            losses.setdefault(name, [l["loss"] for l in lines])
            lines = lines[args.warmup:]
            runs[name].append({
                "step_s": statistics.median(l["step_time_s"] for l in lines),
                "comm_wait_s": statistics.median(l["comm_wait_s"]
                                                 for l in lines),
                "bubble": statistics.mean(l["bubble"] for l in lines),
            })
    if losses["before"] != losses["after"]:
        sys.exit("error: the losses differ: before %s, after %s"
                 % (losses["before"], losses["after"]))
    print("deep MLP %d x %d, micro-batch %d, pp=2 x dp=2, %s, %d micro-batches, "
          "--bucket-mb %s, %d steps (first %d not counted), %d alternating "
          "runs, 1 thread per rank; losses identical"
          % (args.layers, args.width, args.micro_batch, args.schedule, m,
             args.bucket_mb, args.steps, args.warmup, args.repeat))
    print("%-7s %-28s %-28s %s" % ("weftc", "step ms (runs)",
                                  "comm wait ms (runs)", "bubble"))
    for name, rs in runs.items():
        step = [1000 * r["step_s"] for r in rs]
        wait = [1000 * r["comm_wait_s"] for r in rs]
        print("%-7s %-28s %-28s %.1f%%" % (
            name,
            "%.1f (%s)" % (statistics.median(step),
                           " ".join("%.0f" % s for s in step)),
            "%.1f (%s)" % (statistics.median(wait),
                           " ".join("%.1f" % s for s in wait)),
            100 * statistics.mean(r["bubble"] for r in rs)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=2, sort_keys=True)


if __name__ == "__main__":
    sys.exit(main())
