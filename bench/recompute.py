#!/usr/bin/python3
"""Activation recomputation (weftc --recompute): memory saved and step time
paid, on a GPT whose activations dominate its memory.

  bench/recompute.py --work DIR [--layers 4] [--embd 128] [--heads 4]
      [--block 128] [--vocab 256] [--batch 8] [--rounds 4]

Exports the GPT (bench/export_gpt.py), compiles it with --recompute none,
selective and full, and full for the first K layers only (full:K:
--recompute=full --recompute-layers=h.0,..; what a plan recomputing the
first K blocks of each stage compiles to), unfused attention so that
selective has its T x T scores to drop, and for each prints: weftc's
planned peak memory and workspace (the IR's weft.peak_bytes), the
planner's prediction for the same layout and recomputation (weft-plan
search on weftc's --emit=weft, --recompute MODE, one device, micro-batch
= the batch, --executable-memory: the numbers weftc --emit=plan-json
gives, which cannot pin full:K), what the
executable measures (metrics' peak_rss_bytes minus baseline_rss_bytes: what
the step's tensors cost, the embedded weight image included), how far the
prediction is from that, the peak RSS itself, and CPU ms per step on one thread as bench/cpu_step.py
measures it: (user + sys of a LONG-step run - that of a SHORT-step run) /
(LONG - SHORT), the three executables alternating round after round so that
the machine's load hits all alike. Every run's losses must be bitwise those
of --recompute=none (the script fails otherwise).
"""

import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

BASE_MODES = ("none", "selective", "full")


def modes(layers):
    return (BASE_MODES[:2] + tuple("full:%d" % k for k in range(1, layers)) +
            BASE_MODES[2:])


def weftc():
    return os.path.join(HERE, "..", "build", "bin", "weftc")


def weft_plan():
    return os.path.join(HERE, "..", "build", "bin", "weft-plan")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", required=True)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--embd", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--block", type=int, default=128)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--long", type=int, default=12)
    p.add_argument("--short", type=int, default=4)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    onnx = os.path.join(args.work, "gpt.onnx")
    subprocess.run([common.PYTHON, os.path.join(HERE, "export_gpt.py"),
                    "--out", args.work, "--layers", str(args.layers),
                    "--embd", str(args.embd), "--heads", str(args.heads),
                    "--vocab", str(args.vocab), "--block", str(args.block),
                    "--batch", str(args.batch)], check=True)
    rng = np.random.default_rng(0)
    x, y = (os.path.join(args.work, n) for n in ("x.npy", "y.npy"))
    for path in (x, y):
        np.save(path, rng.integers(0, args.vocab,
                                   (args.batch * args.long, args.block)))

    cluster = os.path.join(HERE, "..", "examples", "clusters", "cpu-host.yaml")
    model = os.path.join(args.work, "gpt.weft.mlir")
    subprocess.run([weftc(), onnx, "--fused-attention=off", "--emit=weft",
                    "-o", model], check=True, stderr=subprocess.DEVNULL)
    all_modes = modes(args.layers)
    rows = {}
    for mode in all_modes:
        exe = os.path.join(args.work, "train_" + mode.replace(":", "_"))
        common_flags = ([onnx, "--fused-attention=off"] +
                        common.recompute_flags(mode))
        subprocess.run([weftc()] + common_flags + ["-o", exe], check=True,
                       stderr=subprocess.DEVNULL)
        memref = exe + ".memref.mlir"
        subprocess.run([weftc()] + common_flags +
                       ["--emit=memref", "-o", memref], check=True,
                       stderr=subprocess.DEVNULL)
        ir = open(memref).read()
        peak = int(re.search(r"weft.peak_bytes = (\d+)", ir).group(1))
        workspace = int(re.search(r"weft.workspace_bytes = (\d+)",
                                  ir).group(1))
        plan = exe + ".plan.json"
        subprocess.run([weft_plan(), "search", model, "--cluster", cluster,
                        "--devices", "1", "--micro-batch-size",
                        str(args.batch), "--dtype", "fp32",
                        "--executable-memory", "--recompute", mode,
                        "--emit", "plan-json", "-o", plan], check=True,
                       stderr=subprocess.DEVNULL)
        predicted = json.load(open(plan))["predicted"]
        metrics = exe + ".jsonl"
        if os.path.exists(metrics):
            os.remove(metrics)
        subprocess.run([exe, "--data", x, "--labels", y, "--steps", "4",
                        "--lr", "0.001", "--no-shuffle", "--threads", "1",
                        "--metrics", metrics], check=True,
                       stdout=subprocess.DEVNULL,
                       env=common.thread_env(1))
        lines = [json.loads(l) for l in open(metrics) if '"loss"' in l]
        rows[mode] = dict(exe=exe, peak=peak, workspace=workspace,
                          predicted=predicted["memory_bytes_per_device"],
                          activations=predicted["memory_bytes"]["activations"],
                          rss=lines[-1]["peak_rss_bytes"],
                          measured=lines[-1]["peak_rss_bytes"] -
                          lines[-1]["baseline_rss_bytes"],
                          losses=[l["loss"] for l in lines], ms=[])
    for mode in all_modes[1:]:
        if rows[mode]["losses"] != rows["none"]["losses"]:
            sys.exit("--recompute=%s: losses %s differ from none's %s"
                     % (mode, rows[mode]["losses"], rows["none"]["losses"]))

    env = common.thread_env(1)
    common.print_load("start")
    for r in range(args.rounds):
        for mode in (all_modes if r % 2 == 0 else all_modes[::-1]):
            run = [rows[mode]["exe"], "--data", x, "--labels", y, "--lr",
                   "0.001", "--no-shuffle", "--threads", "1",
                   "--log-every", "100000", "--steps"]
            long_s = common.cpu_seconds(run + [str(args.long)], env)
            short_s = common.cpu_seconds(run + [str(args.short)], env)
            rows[mode]["ms"].append(1e3 * (long_s - short_s) /
                                    (args.long - args.short))
    common.print_load("end")

    mib = lambda b: b / 2**20  # noqa: E731
    print("GPT L=%d d=%d heads=%d T=%d vocab=%d batch=%d, fp32, AdamW; "
          "losses of 4 steps bitwise equal across modes"
          % (args.layers, args.embd, args.heads, args.block, args.vocab,
             args.batch))
    print("%-10s %12s %10s %10s %12s %8s %10s %14s %8s"
          % ("recompute", "planned MiB", "workspace", "measured", "predicted",
             "miss", "peak RSS", "CPU ms/step", "vs none"))
    base = sorted(rows["none"]["ms"])[len(rows["none"]["ms"]) // 2]
    for mode in all_modes:
        row = rows[mode]
        ms = sorted(row["ms"])[len(row["ms"]) // 2]
        print("%-10s %12.1f %10.1f %10.1f %12.1f %+7.1f%% %10.1f %14.1f "
              "%+7.1f%%"
              % (mode, mib(row["peak"]), mib(row["workspace"]),
                 mib(row["measured"]), mib(row["predicted"]),
                 100 * (row["predicted"] - row["measured"]) / row["measured"],
                 mib(row["rss"]), ms, 100 * (ms - base) / base))
        print("%-10s rounds: %s; predicted activations %.1f MiB"
              % ("", " ".join("%.1f" % v for v in row["ms"]),
                 mib(row["activations"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
