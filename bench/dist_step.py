#!/usr/bin/python3
"""Time one distributed training step of Weft (data or tensor parallel)
against PyTorch DDP (gloo).

Usage:
  /usr/bin/python3 bench/dist_step.py [--models mlp,gpt]
      [--layouts dp,zero1,tp,tp-sp]
      [--steps 20] [--warmup 3] [--repeat 2] [--local]
      [--mlp-layers 1024,4096,4096,1024] [--mlp-batch 256] [--port 29600]
      [--work DIR] [--weftc build/bin/weftc] [--weftrun build/bin/weftrun]
      [--json OUT.json]

For each model (bench/common.py; the MLP's size can be changed with
--mlp-layers/--mlp-batch) and each layout, on 2 ranks of one thread each
(OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = 1, `--threads 1` /
torch.set_num_threads(1)), trains --steps AdamW steps (lr 1e-3, weight decay
0.01) from the same initial weights on the same global batches in file order:

  dp     Weft `weftc --mesh dp=2`, run with `weftrun --nproc-per-node 2`,
         against PyTorch DistributedDataParallel (gloo) + torch.optim.AdamW;
  zero1  Weft `weftc --mesh dp=2 --zero 1` against DDP (gloo) +
         ZeroRedundancyOptimizer(optimizer_class=AdamW);
  tp     Weft `weftc --mesh tp=2` (Megatron-style tensor parallelism: heads
         and MLP split column- then row-parallel over the 2 ranks, one
         all-reduce per attention / MLP block forward and one backward,
         plus the collectives the rest of weftc's plan needs: for the GPT
         a vocabulary-parallel embedding and cross-entropy;
         bench/RESULTS.md counts them)
         against the same DDP + AdamW job as dp: PyTorch 1.13 has no tensor
         parallelism (torch.distributed.tensor.parallel came with 2.0), so
         the peer on the same 2 ranks and global batch is data parallel;
  tp-sp  Weft `weftc --mesh tp=2 --sequence-parallel` (Megatron sequence
         parallelism: all-gathers / reduce-scatters instead of the
         all-reduces, layer norms and residuals on sequence shards) against
         the same DDP + AdamW job.

Under dp and zero1 (and on PyTorch's side always), rank r takes the r-th
contiguous half of each global batch; under tp and tp-sp both ranks take
the whole global batch (tp splits the layers, not the batch). Weft's
executable reads the global batch file itself and each rank takes the part
its compiled layout gives it, so the same data files serve every layout.

PyTorch's side is this script's --worker mode launched by torchrun
(`python3 -m torch.distributed.run --nproc_per_node 2`).

The step time is rank 0's wall time per step, measured the same way on both
sides and without extra barriers: Weft's `step_time_s` metric (taking the
batch from the loader, the compiled step with its collectives, swapping the
new state in); PyTorch: slicing the batch, zero_grad, forward,
cross-entropy, backward (DDP's bucketed all-reduces), optimizer step
(ZeRO: local shard update + parameter broadcasts) and an all-reduce of the
loss, which Weft's data-parallel step also performs (so both print the
global mean loss and rank 0 cannot run ahead of rank 1; under tp each Weft
rank computes the loss of the whole batch). Reports the median after --warmup
steps, the best of --repeat runs, the two sides alternating within each
repeat so that load from other processes hits both; the ratio Weft / PyTorch
(below 1: Weft is faster); and the first losses of both sides, which must
agree for the comparison to be fair. With dp among --layouts, each
tensor-parallel layout is also compared with Weft's own dp=2 (Weft tp /
Weft dp). All layouts of a model run in turn within each repeat (Weft, then
PyTorch, for each layout), so slow phases of the machine hit them all; the
ratios of each repeat's neighbouring runs are printed too ("per repeat"),
since on a shared 2-core machine a whole run can land in a phase where
another process holds a core and every step takes about twice as long.

For each Weft layout the script prints weftc's planned peak memory per rank
(`--summary`: workspace, parameters + optimizer state + batch, results)
and, for both sides, the largest peak resident set size of a rank (VmHWM
of the rank processes, read from /proc once a second while they run; it
includes code, shared libraries and, for Weft, the embedded initial
weights; PyTorch's includes the interpreter and torch itself). ru_maxrss
would not do: Linux carries it across exec, so every child of this
script would report at least this script's own size.

After its timed steps, PyTorch's job also times one gloo all-reduce of a
buffer as large as all the gradients together (median of 3): the
communication a dp step cannot avoid on this machine, printed for scale;
for the GPT also one all-reduce of an activation of the global batch
([batch, block, embd], median of 9), the size tp=2 all-reduces after each
attention and MLP block, forward and backward.

With --local, each side is also timed in one process (one thread) at the
per-rank batch with no communication: the difference to the dp step is what
2 ranks cost beyond their share of the compute (communication, waiting for
the other rank, contention for the 2 cores, the replicated optimizer step).

This is a benchmark, not a test: numbers depend on the machine and load.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

RANKS = 2
# layout -> weftc's options, PyTorch's side (its --worker layout and name).
LAYOUTS = {
    "dp": {"weftc": ["--mesh", "dp=%d" % RANKS], "peer": "dp",
           "torch": "DDP + AdamW"},
    "zero1": {"weftc": ["--mesh", "dp=%d" % RANKS, "--zero", "1"],
              "peer": "zero1", "torch": "DDP + ZeroRedundancyOptimizer(AdamW)"},
    "tp": {"weftc": ["--mesh", "tp=%d" % RANKS], "peer": "dp",
           "torch": "DDP + AdamW"},
    "tp-sp": {"weftc": ["--mesh", "tp=%d" % RANKS, "--sequence-parallel"],
              "peer": "dp", "torch": "DDP + AdamW"},
}
TENSOR_PARALLEL = ("tp", "tp-sp")
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
    """Compiles NAME for LAYOUT; returns the executable and weftc's planned
    peak memory per rank (the text after "planned peak memory" of
    --summary, or None)."""
    exe = os.path.join(work, "train_%s_%s" % (name, layout))
    done = subprocess.run([weftc, os.path.join(work, name + ".onnx"),
                           "--emit=exe", "--optimizer", "adamw", "--summary"]
                          + LAYOUTS[layout]["weftc"] + ["-o", exe],
                          stderr=subprocess.PIPE, universal_newlines=True)
    if done.returncode:
        sys.stderr.write(done.stderr)
        raise subprocess.CalledProcessError(done.returncode, done.args)
    match = re.search(r"planned peak memory ([^;\n]*)", done.stderr)
    return exe, match.group(1) if match else None


def run_weft(exe, data_args, work, args, port):
    metrics = os.path.join(work, os.path.basename(exe) + ".jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [args.weftrun, "--nproc-per-node", str(RANKS),
           "--master-port", str(port), exe] + data_args + \
          ["--steps", str(args.steps), "--lr", str(common.LR),
           "--no-shuffle", "--threads", "1", "--log-every", "100000",
           "--metrics", metrics]
    peak = run_watching(cmd, lambda argv: argv[:1] != [] and
                        os.path.basename(argv[0]) == os.path.basename(exe))
    with open(metrics) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    times = [m["step_time_s"] for m in lines]
    result = common.summarize(times, args.warmup)
    result["step_times_ms"] = [1e3 * t for t in times]
    result["losses"] = [m["loss"] for m in lines]
    result["peak_rss_mib"] = peak
    return result


def descendants(pid):
    """The processes below `pid` (parents from /proc/*/stat)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def run_watching(cmd, is_rank, env=None):
    """Runs cmd (stdout discarded, one thread per rank) and returns the
    largest VmHWM, in MiB, of its descendants whose argv is_rank()
    accepts, polled once a second (None if none was seen)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                            env=env or common.thread_env(1))
    peak = {}
    while True:
        try:
            proc.wait(timeout=1.0)
            break
        except subprocess.TimeoutExpired:
            pass
        for pid in descendants(proc.pid):
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    argv = [a.decode(errors="replace")
                            for a in f.read().split(b"\0")[:-1]]
                if not is_rank(argv):
                    continue
                with open("/proc/%d/status" % pid) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            peak[pid] = int(line.split()[1]) / 1024.0
            except OSError:
                pass
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return max(peak.values()) if peak else None


def run_torch(name, layout, work, args, port):
    """PyTorch's side of LAYOUT (its peer: DDP, or DDP + ZeRO) under
    torchrun."""
    out = os.path.join(work, "torch_%s_%s.json" % (name, layout))
    if os.path.exists(out):
        os.remove(out)
    peak = run_watching(TORCHRUN + ["--nproc_per_node", str(RANKS),
                                    "--master_port", str(port),
                                    os.path.abspath(__file__), "--worker",
                                    "--models", name,
                                    "--layouts", LAYOUTS[layout]["peer"],
                                    "--work", work, "--steps", str(args.steps),
                                    "--mlp-layers", args.mlp_layers,
                                    "--mlp-batch", str(args.mlp_batch),
                                    "--json", out],
                        lambda argv: "--worker" in argv)
    with open(out) as f:
        times, losses, probe, probe_act = json.load(f)
    result = common.summarize(times, args.warmup)
    result["step_times_ms"] = [1e3 * t for t in times]
    result["losses"] = losses
    result["allreduce_all_grads_ms"] = 1e3 * probe
    if probe_act is not None:
        result["allreduce_activation_ms"] = 1e3 * probe_act
    result["peak_rss_mib"] = peak
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
    # communication a dp step cannot avoid), median of 3 after a warm-up;
    # for the gpt also one of an activation of the global batch,
    # [batch, block, embd] (what tp all-reduces after each attention and
    # MLP block, forward and backward), median of 9. The buffers stay
    # alive until the end: a tensor whose last reference a gloo work
    # object drops on gloo's thread needs the GIL there, and if that
    # happens while the interpreter's exit tears DDP's process group down
    # (joining that thread, holding the GIL), the rank hangs.
    keep = []

    def probe(numel, runs):
        flat = torch.zeros(numel)
        keep.append(flat)
        took = []
        for _ in range(runs + 1):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(flat)
            took.append(time.perf_counter() - start)
        return sorted(took[1:])[runs // 2]

    grads = probe(sum(p.numel() for p in model.parameters()), 3)
    act = probe(c["batch"] * c["block"] * c["embd"], 9) \
        if name == "gpt" else None
    if rank == 0:
        with open(args.json, "w") as f:
            json.dump([times, losses, grads, act], f)
    dist.destroy_process_group()
    del ddp, keep


def interleave(repeat, runs):
    """Calls each of `runs` in turn, `repeat` times over, and keeps each
    one's result with the lowest median (as common.best_of), recording
    every median under "medians_ms"."""
    got = [[] for _ in runs]
    for _ in range(repeat):
        for i, run in enumerate(runs):
            got[i].append(run())
    out = []
    for results in got:
        best = min(results, key=lambda r: r["median_ms"])
        best["medians_ms"] = [r["median_ms"] for r in results]
        out.append(best)
    return out


def alternate(repeat, first, second):
    """Runs first() and second() in turn `repeat` times (interleave)."""
    return interleave(repeat, [first, second])


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


def fmt_mib(v):
    return "?" if v is None else "%.0f MiB" % v


def fmt_losses(r):
    return " ".join("%.5f" % v for v in r["losses"][:3])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="mlp,gpt",
                   help="comma-separated models of bench/common.py "
                        "(default mlp,gpt)")
    p.add_argument("--layouts", default="dp,zero1",
                   help="comma-separated: dp (dp=2 vs DDP + AdamW), zero1 "
                        "(ZeRO-1 vs DDP + ZeroRedundancyOptimizer), tp "
                        "(tp=2 vs DDP + AdamW), tp-sp (tp=2 "
                        "--sequence-parallel vs DDP + AdamW); default "
                        "dp,zero1")
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
        print("== %s (global batch; %d per rank under dp%s)"
              % (common.describe(name), common.CONFIGS[name]["batch"] // RANKS,
                 ", all of it on both ranks under tp"
                 if set(layouts) & set(TENSOR_PARALLEL) else ""),
              flush=True)
        common.export(name, work)
        data = common.write_data(name, work, args.steps)
        # Compile every layout first: the timed runs then alternate.
        exes, planned = {}, {}
        for layout in layouts:
            exes[layout], planned[layout] = compile_dist(name, work,
                                                         args.weftc, layout)
        runs = []
        for layout in layouts:
            runs.append(lambda layout=layout: run_weft(
                exes[layout], data, work, args, ports.take()))
            runs.append(lambda layout=layout: run_torch(
                name, layout, work, args, ports.take()))
        timed = interleave(args.repeat, runs)
        rows = {}
        for i, layout in enumerate(layouts):
            weft, torch = timed[2 * i], timed[2 * i + 1]
            row = {"model": name, "layout": layout,
                   "weftc": LAYOUTS[layout]["weftc"],
                   "torch_side": LAYOUTS[layout]["torch"], "weft": weft,
                   "torch": torch, "planned_peak_memory": planned[layout],
                   "ratio": weft["median_ms"] / torch["median_ms"]}
            rows[layout] = row
            results.append(row)
            print("   %-5s Weft %8.1f ms/step   PyTorch %s %8.1f ms/step   "
                  "Weft/PyTorch %.2f"
                  % (layout, weft["median_ms"], LAYOUTS[layout]["torch"],
                     torch["median_ms"], row["ratio"]), flush=True)
            row["ratios_per_repeat"] = [
                w / t for w, t in zip(weft["medians_ms"], torch["medians_ms"])]
            print("         medians per repeat: Weft %s, PyTorch %s; "
                  "Weft/PyTorch per repeat %s"
                  % (" ".join("%.1f" % v for v in weft["medians_ms"]),
                     " ".join("%.1f" % v for v in torch["medians_ms"]),
                     " ".join("%.2f" % v for v in row["ratios_per_repeat"])),
                  flush=True)
            print("         first losses: Weft %s, PyTorch %s"
                  % (fmt_losses(weft), fmt_losses(torch)), flush=True)
            print("         Weft `weftc %s`: planned peak memory per rank %s"
                  % (" ".join(LAYOUTS[layout]["weftc"]), planned[layout]),
                  flush=True)
            print("         largest rank's peak RSS (VmHWM): Weft %s, "
                  "PyTorch %s" % (fmt_mib(weft["peak_rss_mib"]),
                                  fmt_mib(torch["peak_rss_mib"])), flush=True)
            print("         PyTorch gloo all-reduce of all %.1f MB of gradients "
                  "as one buffer, after training: %.1f ms"
                  % (4e-6 * sum(p.numel() for p in
                                common.build_model(name).parameters()),
                     torch["allreduce_all_grads_ms"]), flush=True)
            if "allreduce_activation_ms" in torch:
                c = common.CONFIGS[name]
                print("         PyTorch gloo all-reduce of one activation "
                      "[%d, %d, %d] (%.1f MB; tp all-reduces one per block, "
                      "forward and backward): %.1f ms"
                      % (c["batch"], c["block"], c["embd"],
                         4e-6 * c["batch"] * c["block"] * c["embd"],
                         torch["allreduce_activation_ms"]), flush=True)
        if "dp" in rows:
            dp = rows["dp"]["weft"]
            for layout in layouts:
                if layout not in TENSOR_PARALLEL:
                    continue
                row = rows[layout]
                row["ratio_to_weft_dp"] = row["weft"]["median_ms"] / \
                    dp["median_ms"]
                row["ratios_to_weft_dp_per_repeat"] = [
                    a / b for a, b in zip(row["weft"]["medians_ms"],
                                          dp["medians_ms"])]
                print("   %-5s Weft %s / Weft dp: %.2f (%.1f / %.1f ms; per "
                      "repeat %s); first losses %s vs %s"
                      % (layout, layout, row["ratio_to_weft_dp"],
                         row["weft"]["median_ms"], dp["median_ms"],
                         " ".join("%.2f" % v for v in
                                  row["ratios_to_weft_dp_per_repeat"]),
                         fmt_losses(row["weft"]), fmt_losses(dp)),
                      flush=True)
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
