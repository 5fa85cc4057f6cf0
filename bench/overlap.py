#!/usr/bin/python3
"""Gradient buckets overlapping the backward pass, across a shaped link.

  bench/overlap.py [--model mlp|gpt] [--rate 2gbit] [--buckets 0,25,4]
                   [--steps 12] [--warmup 3] [--repeat 2] [--build build]

Two emulated nodes (scripts/cluster.sh: network namespaces joined by a
`tc tbf`-shaped link; needs root), one rank each, train the model of
bench/common.py data-parallel (`weftc --mesh dp=2`) once per bucket size
(`--bucket-mb`; 0 = every reduction alone, waited for where it stands).
Prints rank 0's median step time per bucket size and its ratio to
`--bucket-mb 0`; the runs alternate between bucket sizes, and the fastest
median of --repeat runs is kept. Each rank has one thread.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

CLUSTER = os.path.join(common.ROOT, "scripts", "cluster.sh")
ENV = dict(os.environ, WEFT_CLUSTER_PREFIX="weftovl")


def cluster(*args, **kw):
    return subprocess.run([CLUSTER] + list(args), env=ENV, check=True, **kw)


def run_pair(build, exe, data_args, steps, port, metrics):
    """One run over both nodes; returns rank 0's step times."""
    procs = []
    for node in (1, 0):
        cmd = [CLUSTER, "run", str(node), os.path.join(build, "bin", "weftrun"),
               "--nnodes", "2", "--node-rank", str(node),
               "--nproc-per-node", "1", "--master-addr", "10.77.0.1",
               "--master-port", str(port), exe] + data_args + [
               "--steps", str(steps), "--lr", str(common.LR), "--no-shuffle",
               "--threads", "1", "--log-every", "100000"]
        if node == 0:
            cmd += ["--metrics", metrics]
        env = dict(ENV, GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS="1",
                   OPENBLAS_NUM_THREADS="1")
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            # The other node's ranks would wait for this one for ever.
            for other in procs:
                if other.poll() is None:
                    os.killpg(other.pid, signal.SIGKILL)
                    other.wait()
            sys.exit("error: a node's run failed:\n" + err[-2000:])
    with open(metrics) as f:
        return [json.loads(line)["step_time_s"] for line in f
                if "step_time_s" in line]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    p.add_argument("--model", default="mlp", choices=sorted(common.CONFIGS),
                   help="model of bench/common.py (default mlp)")
    p.add_argument("--rate", default="2gbit",
                   help="the link between the nodes, as tc tbf takes it "
                        "(default 2gbit)")
    p.add_argument("--buckets", default="0,25,4",
                   help="bucket sizes in MiB to compare, the first the "
                        "baseline (default 0,25,4)")
    p.add_argument("--steps", type=int, default=12, help="steps per run")
    p.add_argument("--warmup", type=int, default=3,
                   help="first steps left out of the median")
    p.add_argument("--repeat", type=int, default=2,
                   help="runs per bucket size; the fastest median is kept")
    p.add_argument("--port", type=int, default=29660,
                   help="first rendezvous port; each run takes the next")
    p.add_argument("--build", default=os.path.join(common.ROOT, "build"),
                   help="build folder holding bin/weftc and bin/weftrun")
    args = p.parse_args()
    if subprocess.run([CLUSTER, "check"], env=ENV).returncode != 0:
        sys.exit("error: cannot make network namespaces here (needs root)")

    work = tempfile.mkdtemp(prefix="weft-overlap-")
    common.export(args.model, work)
    data_args = common.write_data(args.model, work, args.steps)
    buckets = [b.strip() for b in args.buckets.split(",") if b.strip()]
    exes = {}
    for b in buckets:
        exe = os.path.join(work, "train_b" + b)
        subprocess.run([os.path.join(args.build, "bin", "weftc"),
                        os.path.join(work, args.model + ".onnx"),
                        "--optimizer", "adamw", "--mesh", "dp=2",
                        "--bucket-mb", b, "-o", exe],
                       check=True, stderr=subprocess.DEVNULL)
        exes[b] = exe

    cluster("down")
    cluster("up", "2", "--rate", args.rate)
    best = {b: None for b in buckets}
    port = args.port
    try:
        for _ in range(args.repeat):
            for b in buckets:
                times = run_pair(args.build, exes[b], data_args, args.steps,
                                 port, os.path.join(work, "m%s.jsonl" % b))
                port += 1
                median = statistics.median(times[args.warmup:])
                if best[b] is None or median < best[b]:
                    best[b] = median
    finally:
        cluster("down")
    print("model %s, dp=2 on 2 emulated nodes (1 rank each, 1 thread), "
          "link %s" % (args.model, args.rate))
    base = best[buckets[0]]
    for b in buckets:
        print("  --bucket-mb %-4s %8.1f ms   %.2f of --bucket-mb %s"
              % (b, best[b] * 1000, best[b] / base, buckets[0]))


if __name__ == "__main__":
    main()
