#!/usr/bin/env python3
"""The planner against Megatron-LM SC'21's weak-scaling GPTs.

Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM", SC'21 (arXiv 2104.04473), Table 1: GPT models
of 1.7B to 1T parameters (vocabulary 51,200, sequence 2048) trained on DGX
A100 80GB nodes (8 GPUs, NVSwitch, 8 x 200 Gb/s HDR InfiniBand) with the
tensor (tp), pipeline (pp) and data (dp) degrees below, mixed precision and
activation recomputation. The paper reports teraFLOP/s per GPU counted
with its own formula (section 5.1; recomputation included, so 4 passes):

    F = 96 B s l h^2 (1 + s / (6 h) + V / (16 l h))   FLOPs per iteration

so the published iteration time is F / (TFLOP/s x GPUs). For every row
this script writes the model with weft-modelgen and plans it with
weft-plan on a spec of GPUs/8 DGX nodes, first with the run's published
configuration forced, then unpinned, and reports the predicted TFLOP/s per
GPU in the paper's accounting (F / predicted step / GPUs) against the
published one.

The forced configuration is what Megatron-LM's own script for Table 1 ran
(examples/sc21/run_table_1.sh and CONFIG.sh in NVIDIA/Megatron-LM): the
mesh, the micro-batch size, the layers per virtual pipeline stage (the
interleaved schedule only where the script sets them; 1F1B elsewhere, the
39B and 1T rows included), full recomputation of every layer
("--recompute-method uniform"), fp16 with a static loss scale ("--fp16
--loss-scale 8192", not bf16), and the DDP implementation (see below).
Megatron then had neither ZeRO nor sequence parallelism.

Usage: bench/megatron_sc21.py [--build build | --bin DIR] [--rows 1.7B,18.4B]
       [--schedule published|interleaved|1f1b|any] [--cluster FILE]
       [--check PCT] [--weft-runtime]
--check PCT exits 1 if a forced row is off by more than PCT percent or
the unpinned search's pick is predicted slower than the forced layout.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# How Megatron-LM of 2021 reduced gradients, which the forced rows predict.
# "--DDP-impl torch" (the rows without a pipeline) is PyTorch's DDP: it
# all-reduces buckets under the backward of the last micro-batch (the
# others run under no_sync). "--DDP-impl local" (the pipelined rows)
# all-reduces after forward_backward_func returns
# (model_module.allreduce_gradients()), so nothing hides it. In fp16 both
# reduce in fp16 (accumulate_allreduce_grads_in_fp32 is off by default;
# Megatron forces it on only for bf16: weft-plan's --fp32-grad-reduce).
# The unpinned search predicts Weft's runtime, which reduces in buckets
# under the backward. --weft-runtime predicts the forced layouts with
# Weft's runtime too.
DDP_RUNTIME = {"torch": [], "local": ["--dp-overlap", "off"]}

# Table 1 of the paper: name, heads, hidden, layers, tp, pp, GPUs, batch,
# achieved teraFLOP/s per GPU, percent of the 312 TFLOP/s peak; then from
# run_table_1.sh: micro-batch size, layers per virtual pipeline stage (0:
# not set, so no interleaving) and the DDP implementation.
TABLE1 = [
    ("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137, 44, 16, 0, "torch"),
    ("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138, 44, 16, 0, "torch"),
    ("7.5B", 32, 4096, 36, 4, 1, 128, 512, 142, 46, 16, 0, "torch"),
    ("18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135, 43, 8, 0, "torch"),
    ("39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138, 44, 4, 0, "local"),
    ("76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140, 45, 2, 5, "local"),
    ("145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148, 47, 2, 5, "local"),
    ("310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155, 50, 1, 3, "local"),
    ("529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163, 52, 1, 1, "local"),
    ("1T", 160, 25600, 128, 8, 64, 3072, 3072, 163, 52, 1, 0, "local"),
]
SEQ, VOCAB = 2048, 51200


def paper_flops(batch, layers, hidden):
    s, l, h, v = SEQ, layers, hidden, VOCAB
    return 96.0 * batch * s * l * h * h * (1 + s / (6.0 * h) + v / (16.0 * l * h))


def cluster_for(base, gpus, tmp):
    """The spec with nodes = GPUs / 8 (the rest as in the file)."""
    nodes = gpus // 8
    out = os.path.join(tmp, "dgx-%d.yaml" % nodes)
    with open(base) as f:
        lines = f.read().splitlines()
    found = False
    for i, line in enumerate(lines):
        if line.startswith("nodes:"):
            lines[i] = "nodes: %d" % nodes
            found = True
    if not found:
        sys.exit("megatron_sc21: no 'nodes:' line in " + base)
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    return out


def plan(bindir, model, spec, gpus, pins):
    cmd = [os.path.join(bindir, "weft-plan"), "search", model,
           "--cluster", spec, "--devices", str(gpus), "--dtype", "fp16",
           "--alternatives", "0", "--emit", "plan-json"] + pins
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    secs = time.time() - t0
    if p.returncode != 0:
        return None, secs, p.stderr.strip().splitlines()[-1:], cmd
    return json.loads(p.stdout), secs, None, cmd


def describe(pl):
    s = pl["schedule"]
    if s == "interleaved":
        s += " v=%d" % pl["virtual_stages"]
    m = pl["mesh"]
    return ("dp=%d tp=%d pp=%d mbs=%d zero=%d %s%s %s" %
            (m["dp"], m["tp"], m["pp"], pl["micro_batch_size"],
             pl["zero_stage"], pl["recompute"],
             " sp" if pl["sequence_parallel"] else "", s))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--bin", default=None,
                    help="directory of weft-plan and weft-modelgen "
                    "(default BUILD/bin)")
    ap.add_argument("--cluster",
                    default=os.path.join(ROOT, "examples/clusters/dgx-a100-80gb.yaml"))
    ap.add_argument("--rows", default="", help="comma-separated names")
    ap.add_argument("--schedule", default="published",
                    choices=["published", "interleaved", "1f1b", "any"],
                    help="schedule of the pp > 1 rows: the run's (default), "
                    "pinned, or searched (any); with interleaved or any the "
                    "virtual stages are searched")
    ap.add_argument("--no-search", action="store_true",
                    help="skip the unpinned search")
    ap.add_argument("--check", type=float, default=None)
    ap.add_argument("--weft-runtime", action="store_true",
                    help="forced rows with Weft's gradient reduction "
                         "(overlapped), not Megatron's")
    args = ap.parse_args()
    rows = TABLE1
    if args.rows:
        want = args.rows.split(",")
        rows = [r for r in TABLE1 if r[0] in want]
        if len(rows) != len(want):
            sys.exit("megatron_sc21: unknown row in --rows; rows: " +
                     ", ".join(r[0] for r in TABLE1))
    bindir = args.bin or os.path.join(args.build, "bin")
    modelgen = os.path.join(bindir, "weft-modelgen")
    failures = []
    print("| model | layout forced | pick (forced) | published TFLOP/s | "
          "predicted TFLOP/s | error | published step (s) | predicted step (s) "
          "| search's pick | pick step (s) | pick >= forced |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for (name, heads, hidden, layers, tp, pp, gpus, batch, tflops,
             pct, mbs, layers_per_chunk, ddp) in rows:
            model = os.path.join(tmp, name + ".mlir")
            subprocess.run([modelgen, "gpt", "--layers", str(layers),
                            "--hidden", str(hidden), "--heads", str(heads),
                            "--seq", str(SEQ), "--vocab", str(VOCAB),
                            "--batch", str(batch), "-o", model],
                           check=True, capture_output=True)
            spec = cluster_for(args.cluster, gpus, tmp)
            dp = gpus // (tp * pp)
            F = paper_flops(batch, layers, hidden)
            published_step = F / (tflops * 1e12 * gpus)
            pins = ["--mesh", "dp=%d,tp=%d,pp=%d" % (dp, tp, pp),
                    "--micro-batch-size", str(mbs),
                    "--zero", "0", "--recompute", "full",
                    "--sequence-parallel", "off",
                    # Megatron-LM splits every layer over tp.
                    "--tp-replicated", "none"]
            if not args.weft_runtime:
                pins += DDP_RUNTIME[ddp]
            if pp > 1 and args.schedule == "published":
                if layers_per_chunk:
                    pins += ["--schedule", "interleaved", "--virtual-stages",
                             str(layers // pp // layers_per_chunk)]
                else:
                    pins += ["--schedule", "1f1b"]
            elif pp > 1 and args.schedule != "any":
                pins += ["--schedule", args.schedule]
            forced, _, err, _ = plan(bindir, model, spec, gpus, pins)
            if forced is None:
                print("| %s | dp=%d tp=%d pp=%d | refused: %s | %d | - | - | "
                      "%.2f | - | - | - | - |" %
                      (name, dp, tp, pp, " ".join(err), tflops, published_step))
                failures.append(name + ": forced layout refused")
                continue
            step = forced["predicted"]["step_time_s"]
            pred = F / step / gpus / 1e12
            error = 100.0 * (pred - tflops) / tflops
            feasible = "" if forced["feasible"] else " (over memory)"
            pick_cell, pick_tf, faster = "-", "-", "-"
            if not args.no_search:
                free, secs, err, _ = plan(bindir, model, spec, gpus, [])
                if free is None:
                    pick_cell = "refused: " + " ".join(err)
                    faster = "no"
                    failures.append(name + ": search refused")
                else:
                    fstep = free["predicted"]["step_time_s"]
                    pick_cell = describe(free) + " (%.2f s search)" % secs
                    pick_tf = "%.2f" % fstep
                    ok = fstep <= step * (1 + 1e-9)
                    faster = "yes" if ok else "no"
                    if not ok:
                        failures.append(name + ": pick slower than forced")
            print("| %s | dp=%d tp=%d pp=%d | %s%s | %d | %.1f | %+.1f %% | "
                  "%.2f | %.2f | %s | %s | %s |" %
                  (name, dp, tp, pp, describe(forced), feasible, tflops, pred,
                   error, published_step, step, pick_cell, pick_tf, faster))
            if args.check is not None and abs(error) > args.check:
                failures.append("%s: %+.1f %% (over %g %%)" %
                                (name, error, args.check))
            sys.stdout.flush()
    if args.check is not None and failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
