#!/usr/bin/python3
"""Measured pipeline bubbles: the same model and layout under each schedule.

Usage:
  /usr/bin/python3 bench/pipeline_bubble.py [--ranks 2] [--micro-batches 8]
      [--layers 8] [--width 1024] [--micro-batch 64] [--steps 12]
      [--warmup 2] [--schedules gpipe,1f1b,interleaved,zero-bubble]
      [--port 29620] [--work DIR] [--weftc build/bin/weftc]
      [--weftrun build/bin/weftrun] [--json OUT.json]

A deep MLP (LAYERS x Linear(WIDTH, WIDTH) + ReLU, then a 10-class head),
exported from PyTorch 1.13 in eval mode, is compiled with
`weftc --mesh pp=RANKS --micro-batches M --schedule S` (interleaved with 2
virtual stages) and trained for STEPS AdamW steps under weftrun, one
BLAS thread per rank. Each rank's executable measures the time its step
spends in pipeline sends and receives; rank 0's metrics carry `bubble`,
that time summed over the ranks over the ranks' summed step time, next to
`bubble_predicted`, weftc's simulation of the schedule. Printed per
schedule: the mean measured bubble (steps after WARMUP), the prediction,
the mean step time, and both relative to 1F1B's.
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


def write_data(work, samples, width):
    """x.npy (normal features) and y.npy (10 classes) for the deep MLP."""
    import numpy as np
    rng = np.random.default_rng(1)
    np.save(os.path.join(work, "x.npy"),
            rng.standard_normal((samples, width), dtype=np.float32))
    np.save(os.path.join(work, "y.npy"),
            rng.integers(0, 10, samples).astype(np.int64))


def export(work, layers, width, batch):
    import numpy as np
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.ReLU()]
    mods.append(nn.Linear(width, 10))
    model = nn.Sequential(*mods).eval()
    path = os.path.join(work, "deep_mlp.onnx")
    torch.onnx.export(model, (torch.zeros(batch, width),), path,
                      opset_version=17, input_names=["input"],
                      output_names=["output"])
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--micro-batches", type=int, default=8)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--micro-batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--schedules", default="gpipe,1f1b,interleaved,zero-bubble")
    p.add_argument("--port", type=int, default=29620)
    p.add_argument("--work")
    p.add_argument("--weftc", default=os.path.join(ROOT, "build", "bin", "weftc"))
    p.add_argument("--weftrun",
                   default=os.path.join(ROOT, "build", "bin", "weftrun"))
    p.add_argument("--json")
    args = p.parse_args()

    work = args.work or tempfile.mkdtemp(prefix="weft-bubble-")
    os.makedirs(work, exist_ok=True)
    onnx_path = export(work, args.layers, args.width, args.micro_batch)
    m = args.micro_batches
    write_data(work, args.steps * m * args.micro_batch, args.width)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    rows = {}
    for schedule in args.schedules.split(","):
        exe = os.path.join(work, "train-" + schedule)
        flags = ["--mesh", "pp=%d" % args.ranks, "--micro-batches", str(m),
                 "--schedule", schedule, "--optimizer", "adamw"]
        if schedule == "interleaved":
            flags += ["--virtual-stages", "2"]
        subprocess.run([args.weftc, onnx_path, "-o", exe] + flags, check=True,
                       stderr=subprocess.DEVNULL)
        metrics = exe + ".jsonl"
        if os.path.exists(metrics):
            os.remove(metrics)
        subprocess.run([args.weftrun, "--nproc-per-node", str(args.ranks),
                        "--master-port", str(args.port), exe,
                        "--data", os.path.join(work, "x.npy"),
                        "--labels", os.path.join(work, "y.npy"),
                        "--no-shuffle", "--steps", str(args.steps),
                        "--lr", "1e-3", "--threads", "1",
                        "--metrics", metrics],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        lines = [json.loads(l) for l in open(metrics)][args.warmup:]
        rows[schedule] = {
            "bubble": statistics.mean(l["bubble"] for l in lines),
            "predicted": lines[0]["bubble_predicted"],
            "step_s": statistics.mean(l["step_time_s"] for l in lines),
        }
    base = rows.get("1f1b")
    print("deep MLP %d x %d, micro-batch %d, pp=%d, %d micro-batches, "
          "%d steps (first %d not counted), 1 thread per rank"
          % (args.layers, args.width, args.micro_batch, args.ranks, m,
             args.steps, args.warmup))
    print("%-12s %9s %10s %9s %11s %13s" % ("schedule", "bubble", "predicted",
                                            "step ms", "bubble/1f1b",
                                            "step/1f1b"))
    for s, r in rows.items():
        print("%-12s %8.1f%% %9.1f%% %9.1f %11s %13s" % (
            s, 100 * r["bubble"], 100 * r["predicted"], 1000 * r["step_s"],
            "%.2f" % (r["bubble"] / base["bubble"]) if base else "-",
            "%.2f" % (r["step_s"] / base["step_s"]) if base else "-"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2, sort_keys=True)


if __name__ == "__main__":
    sys.exit(main())
