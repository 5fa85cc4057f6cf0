#!/usr/bin/python3
"""Time one data-parallel training step of Weft against PyTorch DDP (gloo).

Usage:
  /usr/bin/python3 bench/dist_step.py [--models mlp,gpt] [--layouts dp,zero1]
      [--steps 20] [--warmup 3] [--repeat 2] [--local]
      [--mlp-layers 1024,4096,4096,1024] [--mlp-batch 256] [--port 29600]
      [--work DIR] [--weftc build/bin/weftc] [--weftrun build/bin/weftrun]
      [--json OUT.json]

For each model (bench/common.py; the MLP's size can be changed with
--mlp-layers/--mlp-batch) and each layout, on 2 ranks of one thread each
(OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = 1, `--threads 1` /
torch.set_num_threads(1)), trains --steps AdamW steps (lr 1e-3, weight decay
0.01) from the same initial weights on the same global batches in file order,
rank r taking the r-th contiguous half of each global batch:

  dp     Weft `weftc --mesh dp=2`, run with `weftrun --nproc-per-node 2`,
         against PyTorch DistributedDataParallel (gloo) + torch.optim.AdamW;
  zero1  Weft `weftc --mesh dp=2 --zero 1` against DDP (gloo) +
         ZeroRedundancyOptimizer(optimizer_class=AdamW).

PyTorch's side is this script's --worker mode launched by torchrun
(`python3 -m torch.distributed.run --nproc_per_node 2`).

The step time is rank 0's wall time per step, measured the same way on both
sides and without extra barriers: Weft's `step_time_s` metric (taking the
batch from the loader, the compiled step with its collectives, swapping the
new state in); PyTorch: slicing the batch, zero_grad, forward,
cross-entropy, backward (DDP's bucketed all-reduces), optimizer step
(ZeRO: local shard update + parameter broadcasts) and an all-reduce of the
loss, which Weft's step also performs (so both print the global mean loss
and rank 0 cannot run ahead of rank 1). Reports the median after --warmup
steps, the best of --repeat runs, the two sides alternating within each
repeat so that load from other processes hits both; the ratio Weft / PyTorch
(below 1: Weft is faster); and the first losses of both sides, which must
agree for the comparison to be fair.

After its timed steps, PyTorch's job also times one gloo all-reduce of a
buffer as large as all the gradients together (median of 3): the
communication a dp step cannot avoid on this machine, printed for scale.

With --local, each side is also timed in one process (one thread) at the
per-rank batch with no communication: the difference to the dp step is what
2 ranks cost beyond their share of the compute (communication, waiting for
the other rank, contention for the 2 cores, the replicated optimizer step).

This is a benchmark, not a test: numbers depend on the machine and load.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

RANKS = 2
LAYOUTS = {
    "dp": {"weftc": [], "torch": "DDP + AdamW"},
    "zero1": {"weftc": ["--zero", "1"],
              "torch": "DDP + ZeroRedundancyOptimizer(AdamW)"},
}
TORCHRUN = [common.PYTHON, "-m", "torch.distributed.run", "-r", "1", "-t", "1"]


def set_mlp(layers, batch):
    """Resizes bench/common.py's MLP (in this process)."""
    common.CONFIGS["mlp"] = {"layers": [int(d) for d in layers.split(",")],
                             "batch": int(batch)}


class Ports:
    """A fresh rendezvous port per run, so that no run meets a socket the
    previous one left in TIME_WAIT. Weft under weftrun uses MASTER_PORT;
    torchrun's agent uses it and its ranks' store MASTER_PORT (gloo picks
    its own ports)."""

    def __init__(self, base):
        self.next = base

    def take(self):
        self.next += 2
        return self.next - 2


def compile_dist(name, work, weftc, layout):
    exe = os.path.join(work, "train_%s_%s" % (name, layout))
    subprocess.run([weftc, os.path.join(work, name + ".onnx"), "--emit=exe",
                    "--optimizer", "adamw", "--mesh", "dp=%d" % RANKS]
                   + LAYOUTS[layout]["weftc"] + ["-o", exe],
                   check=True, stderr=subprocess.DEVNULL)
    return exe


def run_weft(exe, data_args, work, args, port):
    metrics = os.path.join(work, os.path.basename(exe) + ".jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    subprocess.run([args.weftrun, "--nproc-per-node", str(RANKS),
                    "--master-port", str(port), exe] + data_args +
                   ["--steps", str(args.steps), "--lr", str(common.LR),
                    "--no-shuffle", "--threads", "1", "--log-every", "100000",
                    "--metrics", metrics],
                   check=True, stdout=subprocess.DEVNULL,
                   env=common.thread_env(1))
    with open(metrics) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    result = common.summarize([m["step_time_s"] for m in lines], args.warmup)
    result["losses"] = [m["loss"] for m in lines]
    return result


def run_torch(name, layout, work, args, port):
    out = os.path.join(work, "torch_%s_%s.json" % (name, layout))
    if os.path.exists(out):
        os.remove(out)
    subprocess.run(TORCHRUN + ["--nproc_per_node", str(RANKS),
                               "--master_port", str(port),
                               os.path.abspath(__file__), "--worker",
                               "--models", name, "--layouts", layout,
                               "--work", work, "--steps", str(args.steps),
                               "--mlp-layers", args.mlp_layers,
                               "--mlp-batch", str(args.mlp_batch),
                               "--json", out],
                   check=True, stdout=subprocess.DEVNULL,
                   env=common.thread_env(1))
    with open(out) as f:
        times, losses, probe = json.load(f)
    result = common.summarize(times, args.warmup)
    result["losses"] = losses
    result["allreduce_all_grads_ms"] = 1e3 * probe
    return result


def worker(args):
    """One PyTorch rank (under torchrun): DDP over gloo, the same batches
    as Weft's loader gives this rank; rank 0 writes its step times and the
    global mean losses to --json."""
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    name, layout = args.models, args.layouts
    model = common.build_model(name)
    model.eval()  # as exported; neither model has dropout
    ddp = DDP(model)
    if layout == "zero1":
        opt = ZeroRedundancyOptimizer(ddp.parameters(),
                                      optimizer_class=torch.optim.AdamW,
                                      lr=common.LR, weight_decay=0.01)
    else:
        opt = torch.optim.AdamW(ddp.parameters(), lr=common.LR,
                                weight_decay=0.01)
    c = common.CONFIGS[name]
    b = c["batch"] // world  # this rank's block of each global batch
    if name == "mlp":
        xs = torch.from_numpy(np.load(os.path.join(args.work, "x.npy")))
        ys = torch.from_numpy(np.load(os.path.join(args.work, "y.npy")))

        def batch(s):
            first = s * c["batch"] + rank * b
            return xs[first:first + b], ys[first:first + b]
    else:
        t = c["block"]
        tokens = torch.from_numpy(np.fromfile(
            os.path.join(args.work, "tokens.bin"), dtype="<u2").astype(np.int64))

        def batch(s):
            first = (s * c["batch"] + rank * b) * t
            x = tokens[first:first + b * t].view(b, t)
            y = tokens[first + 1:first + b * t + 1].view(b, t)
            return x, y

    times, losses = [], []
    for s in range(args.steps):
        start = time.perf_counter()
        x, y = batch(s)
        opt.zero_grad(set_to_none=True)
        logits = ddp(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               y.reshape(-1))
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        times.append(time.perf_counter() - start)
        losses.append(total.item() / world)
    # What one all-reduce of every gradient as one buffer costs here (the
    # communication a dp step cannot avoid), median of 3 after a warm-up.
    flat = torch.zeros(sum(p.numel() for p in model.parameters()))
    probe = []
    for _ in range(4):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(flat)
        probe.append(time.perf_counter() - start)
    if rank == 0:
        with open(args.json, "w") as f:
            json.dump([times, losses, sorted(probe[1:])[1]], f)
    dist.destroy_process_group()


def alternate(repeat, first, second):
    """Runs first() and second() in turn `repeat` times and keeps each
    side's run with the lowest median (as common.best_of)."""
    a, b = [], []
    for _ in range(repeat):
        a.append(first())
        b.append(second())
    out = []
    for runs in (a, b):
        best = min(runs, key=lambda r: r["median_ms"])
        best["medians_ms"] = [r["median_ms"] for r in runs]
        out.append(best)
    return out


def run_torch_local(name, work, steps, warmup):
    """common.run_torch with this process's configuration of `name` (the
    fresh interpreter would otherwise read bench/common.py's)."""
    out = os.path.join(work, "torch-local.json")
    code = ("import sys; sys.path.insert(0, %r); import common; "
            "common.CONFIGS[%r] = %r; common.torch_step(%r, %r, %d, 1, %r)"
            % (common.HERE, name, common.CONFIGS[name], name, work, steps, out))
    subprocess.run([common.PYTHON, "-c", code], check=True,
                   env=common.thread_env(1))
    with open(out) as f:
        times, losses = json.load(f)
    result = common.summarize(times, warmup)
    result["losses"] = losses
    return result


def local_baseline(name, work_root, args):
    """Both sides in one process, one thread, at the per-rank batch."""
    full = common.CONFIGS[name]
    common.CONFIGS[name] = dict(full, batch=full["batch"] // RANKS)
    try:
        work = os.path.join(work_root, name + "-local")
        os.makedirs(work, exist_ok=True)
        common.export(name, work)
        data = common.write_data(name, work, args.steps)
        exe, _ = common.compile_exe(name, work, args.weftc)
        return alternate(
            args.repeat,
            lambda: common.run_weft(exe, data, work, args.steps, 1,
                                    args.warmup),
            lambda: run_torch_local(name, work, args.steps, args.warmup))
    finally:
        common.CONFIGS[name] = full


def fmt_losses(r):
    return " ".join("%.5f" % v for v in r["losses"][:3])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="mlp,gpt",
                   help="comma-separated models of bench/common.py "
                        "(default mlp,gpt)")
    p.add_argument("--layouts", default="dp,zero1",
                   help="dp (DDP + AdamW) and/or zero1 (ZeRO-1 vs DDP + "
                        "ZeroRedundancyOptimizer)")
    p.add_argument("--steps", type=int, default=20,
                   help="steps per run (default 20)")
    p.add_argument("--warmup", type=int, default=3,
                   help="steps left out of the median")
    p.add_argument("--repeat", type=int, default=2,
                   help="runs per side and measurement, alternating the "
                        "sides; the fastest median is kept")
    p.add_argument("--local", action="store_true",
                   help="also time each side in one process at the per-rank "
                        "batch, without communication")
    p.add_argument("--mlp-layers", default="1024,4096,4096,1024",
                   help="the MLP's layer widths (default 1024,4096,4096,1024)")
    p.add_argument("--mlp-batch", type=int, default=256,
                   help="the MLP's global batch (split over the 2 ranks)")
    p.add_argument("--port", type=int, default=29600,
                   help="first rendezvous port; each run takes the next two")
    p.add_argument("--work", help="working folder (default: a temporary one)")
    p.add_argument("--weftc",
                   default=os.path.join(common.ROOT, "build", "bin", "weftc"),
                   help="the compiler (default build/bin/weftc)")
    p.add_argument("--weftrun",
                   default=os.path.join(common.ROOT, "build", "bin", "weftrun"),
                   help="the launcher (default build/bin/weftrun)")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    set_mlp(args.mlp_layers, args.mlp_batch)
    if args.worker:
        worker(args)
        return 0
    models = args.models.split(",")
    layouts = args.layouts.split(",")
    for m in models:
        if m not in common.CONFIGS:
            p.error("unknown model %s (have %s)" % (m, ", ".join(common.CONFIGS)))
        if common.CONFIGS[m]["batch"] % RANKS:
            p.error("%s: the global batch must divide by %d" % (m, RANKS))
    for lay in layouts:
        if lay not in LAYOUTS:
            p.error("unknown layout %s (have %s)" % (lay, ", ".join(LAYOUTS)))

    work_root = args.work or tempfile.mkdtemp(prefix="weft-dist-")
    ports = Ports(args.port)
    common.print_load("start")
    print("-- %d ranks x 1 thread; Weft: weftrun, PyTorch %s: torchrun, gloo"
          % (RANKS, __import__("torch").__version__), flush=True)
    results = []
    for name in models:
        work = os.path.join(work_root, name)
        os.makedirs(work, exist_ok=True)
        print("== %s (global batch; %d per rank)"
              % (common.describe(name), common.CONFIGS[name]["batch"] // RANKS),
              flush=True)
        common.export(name, work)
        data = common.write_data(name, work, args.steps)
        for layout in layouts:
            exe = compile_dist(name, work, args.weftc, layout)
            weft, torch = alternate(
                args.repeat,
                lambda: run_weft(exe, data, work, args, ports.take()),
                lambda: run_torch(name, layout, work, args, ports.take()))
            row = {"model": name, "layout": layout,
                   "torch_side": LAYOUTS[layout]["torch"], "weft": weft,
                   "torch": torch,
                   "ratio": weft["median_ms"] / torch["median_ms"]}
            results.append(row)
            print("   %-5s Weft %8.1f ms/step   PyTorch %s %8.1f ms/step   "
                  "Weft/PyTorch %.2f"
                  % (layout, weft["median_ms"], LAYOUTS[layout]["torch"],
                     torch["median_ms"], row["ratio"]), flush=True)
            print("         medians per repeat: Weft %s, PyTorch %s"
                  % (" ".join("%.1f" % v for v in weft["medians_ms"]),
                     " ".join("%.1f" % v for v in torch["medians_ms"])),
                  flush=True)
            print("         first losses: Weft %s, PyTorch %s"
                  % (fmt_losses(weft), fmt_losses(torch)), flush=True)
            print("         PyTorch gloo all-reduce of all %.1f MB of gradients "
                  "as one buffer, after training: %.1f ms"
                  % (4e-6 * sum(p.numel() for p in
                                common.build_model(name).parameters()),
                     torch["allreduce_all_grads_ms"]), flush=True)
        if args.local:
            weft, torch = local_baseline(name, work_root, args)
            results.append({"model": name, "layout": "local", "weft": weft,
                            "torch": torch,
                            "ratio": weft["median_ms"] / torch["median_ms"]})
            print("   local (1 process, per-rank batch, no communication): "
                  "Weft %8.1f ms/step   PyTorch %8.1f ms/step   "
                  "Weft/PyTorch %.2f"
                  % (weft["median_ms"], torch["median_ms"],
                     weft["median_ms"] / torch["median_ms"]), flush=True)
    return common.finish(results, args.json)


if __name__ == "__main__":
    sys.exit(main())
