#!/usr/bin/env python3
"""The planner's predicted step times against measured ones, on this host.

For a GPT (the example model of examples/models, or the bench GPT of
bench/common.py), plans it with `weftc --emit=plan-json --cluster SPEC`,
compiles the plan and each feasible alternative with `weftc --plan
plan.json --plan-alternative K --optimizer adamw`, runs each through
`weftrun --nproc-per-node 2` for --steps steps (AdamW, random tokens from
test/lib/exe_check.py), and compares the median measured step time (the
executable's --metrics `step_time_s`, the first step dropped as
weft-profile-cluster --from-metrics does: it pays page faults and
OpenBLAS's buffers) with the plan's `predicted.step_time_s`.

--profile first measures this host with weft-profile-cluster (its output,
written next to the runs, is then the spec planned with), so that the
spec and the runs see the same load on a shared machine.

--calibrate fits the spec's fp32 efficiency (or, for a run faster than
the plan at the full peak, its memory_bandwidth_GBps) and
update_bandwidth_GBps to 1-rank runs of the whole batch and of half of it
(a step is the optimizer's update, once a step, plus what each sample
costs), then
device.collective_overhead_us to a run of every rank in a layout the
comparison does not use (weft-profile-cluster --from-metrics --fit
efficiency or memory-bandwidth, update-bandwidth, collective-overhead).
A shared host's speed drifts between the calibration and the runs (this
one's by a quarter from one minute to the next), so with --calibrate each
round first runs the 1-rank calibration step again: the table then also
gives each measurement scaled to the host's speed at calibration (the
reference's time then over now) and the prediction's error against that.

--nodes N runs 2 ranks on each of N emulated nodes (scripts/cluster.sh:
network namespaces joined by a link shaped to --rate; needs root): the
spec's inter_node link is measured across them (weft-profile-cluster
--inter-node, one process per node), and the calibration's
1-rank run has as many twins as there are ranks (4 ranks on this host's 2
cores each get half of one).

--cpu-share (default auto: on when there are more ranks than cores) runs
every rank, the calibration run and its twins each in a CPU cgroup of its
own limited to cores / ranks (bench/cpu_share.sh; needs root): so that the
ranks are devices of fixed speed, as the plan assumes, and a pipeline's
idle rank does not lend its core to a busy one (uncapped, 4 ranks on 2
cores measured the same step with 1 micro-batch as with 4: the bubble the
plan prices was filled by other ranks' work).

Usage: bench/plan_vs_measured.py [--model example|bench] [--cluster SPEC |
       --profile | --calibrate] [--nodes N [--rate 400mbit]] [--steps 30]
       [--repeat R] [--cpu-share auto|on|off] [--work DIR] [--build build]
       [--port 29471]
"""
import argparse
import json
import os
import re
import statistics
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"  # Debian's PyTorch, which the exporters need


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit("plan_vs_measured: %s failed (%d):\n%s" %
                 (" ".join(cmd), p.returncode, p.stderr[-3000:]))
    return p


def export(model, work, batch=None):
    """The model with `batch` samples (default its own: 8 for both) in
    work/bBATCH/; returns the ONNX file, its sequence and vocabulary."""
    work = os.path.join(work, "b%s" % (batch or "default"))
    os.makedirs(work, exist_ok=True)
    if model == "example":
        run([PYTHON, os.path.join(ROOT, "examples/models/export.py"), "gpt",
             "--out", work, "--batch", str(batch or 8)])
        return os.path.join(work, "gpt.onnx"), 16, 64
    code = ("import sys; sys.path.insert(0, %r); import common; "
            "c = common.CONFIGS['gpt']; c['batch'] = %s or c['batch']; "
            "print(common.export('gpt', %r)); "
            "print(c['block'], c['vocab'])" % (HERE, batch, work))
    out = run([PYTHON, "-c", code]).stdout.split()
    return out[0], int(out[1]), int(out[2])


def describe(pl):
    m = pl["mesh"]
    s = "dp=%d tp=%d pp=%d" % (m["dp"], m["tp"], m["pp"])
    if pl["zero_stage"]:
        s += " zero=%d" % pl["zero_stage"]
    if pl["sequence_parallel"]:
        s += " sp"
    if m["pp"] > 1:
        s += " " + pl["schedule"]
        if pl["schedule"] == "interleaved":
            s += " v=%d" % pl["virtual_stages"]
    s += " mbs=%d m=%d" % (pl["micro_batch_size"], pl["micro_batches"])
    return s


CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")
CLUSTER_ENV = dict(os.environ, WEFT_CLUSTER_PREFIX="weftpvm")


def fresh(path):
    """`path`, removed if a run before left it (metrics files append)."""
    if os.path.exists(path):
        os.remove(path)
    return path


CPU_SHARE = os.path.join(HERE, "cpu_share.sh")
# Cores per rank when ranks are capped (--cpu-share), else None.
SHARE = None


def capped(cmd):
    """`cmd` run in a CPU cgroup of its rank's share, if capping."""
    return capped_share(1, cmd)


def capped_share(ranks, cmd):
    """`cmd`, a process of `ranks` ranks, in a CPU cgroup of their
    shares, if capping."""
    return [CPU_SHARE, "%g" % (SHARE * ranks)] + cmd if SHARE else cmd


def launch(b, nodes, exe, args, metrics, port, cwd, per_node=2):
    """Runs `exe` on `per_node` ranks per node, rank 0 writing `metrics`
    (none: no --metrics): through weftrun on this host, or over emulated
    nodes (scripts/cluster.sh, up already), one weftrun per node; fails
    naming the node whose run failed."""
    if metrics:
        args = args + ["--metrics", fresh(metrics)]
    rank_cmd = capped([exe]) + args
    if nodes == 1:
        run([os.path.join(b, "weftrun"), "--nproc-per-node", "2",
             "--master-port", str(port)] + rank_cmd, cwd=cwd)
        return
    procs = []
    for node in reversed(range(nodes)):
        cmd = [CLUSTER, "run", str(node), os.path.join(b, "weftrun"),
               "--nnodes", str(nodes), "--node-rank", str(node),
               "--nproc-per-node", str(per_node), "--master-addr", "10.77.0.1",
               "--master-port", str(port)] + rank_cmd
        procs.append((node, subprocess.Popen(
            cmd, cwd=cwd, env=dict(CLUSTER_ENV, GLOO_SOCKET_IFNAME="eth0"),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True)))
    failed = None
    for node, proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0 and failed is None:
            failed = (node, err)
            for _, other in procs:
                if other.poll() is None:
                    os.killpg(other.pid, signal.SIGKILL)
    if failed:
        sys.exit("plan_vs_measured: node %d's run of %s failed:\n%s"
                 % (failed[0], exe, failed[1][-3000:]))


def recalibrate(b, metrics, ir, spec, out, flags=(), quiet=False,
                may_fail=False):
    """weft-profile-cluster --from-metrics on `spec`, written to `out`;
    prints its finding (unless `quiet`) and returns `out`. With
    `may_fail`, a refused fit prints why and returns None instead of
    ending the bench. The efficiency's fit (no --fit) that a run faster
    than the plan at the full peak refuses fits the memory bandwidth in
    its place, as the refusal says to."""
    cmd = [os.path.join(b, "weft-profile-cluster"), "--from-metrics",
           metrics, "--model", ir, "--spec", spec, "--dtype", "fp32",
           "-o", out] + list(flags)
    p = subprocess.run(cmd, capture_output=True, text=True)
    line = p.stderr.strip().splitlines()[-1]
    if p.returncode != 0 and not flags and "--fit memory-bandwidth" in line:
        return recalibrate(b, metrics, ir, spec, out,
                           ["--fit", "memory-bandwidth"], quiet, may_fail)
    if p.returncode != 0:
        if not may_fail:
            sys.exit("plan_vs_measured: calibration refused: " + line)
        print("calibration refused: " + line)
        return None
    if not quiet:
        # The finding, and any warning after it (a fit stopped at a bound).
        lines = p.stderr.strip().splitlines()
        found = [l for l in lines if "warning:" not in l][-1:]
        for l in found + [l for l in lines if "warning:" in l]:
            print("calibration: " + l)
    return out


def timed_steps(metrics):
    """The step lines of a --metrics file, the first step left out (it
    pays page faults and OpenBLAS's buffers)."""
    with open(metrics) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    return [l for l in lines if "step_time_s" in l][1:]


def median_step(metrics):
    """The median step time of a --metrics file as weft-profile-cluster
    --from-metrics takes it: the first and skipped steps left out."""
    return statistics.median(l["step_time_s"] for l in timed_steps(metrics)
                             if not l.get("skipped"))


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="example", choices=["example", "bench"])
    ap.add_argument("--cluster",
                    default=os.path.join(ROOT, "examples/clusters/cpu-host.yaml"))
    ap.add_argument("--profile", action="store_true",
                    help="measure this host first and plan on that spec")
    ap.add_argument("--calibrate", action="store_true",
                    help="--profile, then set the spec's fp32 efficiency "
                    "and update bandwidth from 1-rank runs of the model at "
                    "its batch and half of it (weft-profile-cluster "
                    "--from-metrics), layouts not among those compared; then "
                    "device.collective_overhead_us from a run of every rank "
                    "at tp=2 (dp over the nodes; no sequence parallelism; "
                    "--fit collective-overhead)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run the layouts round-robin this many times and "
                    "take the median of their medians (a shared host's load "
                    "then falls on every layout alike)")
    ap.add_argument("--plan-flags", default="",
                    help="pins for weftc --emit=plan-json, e.g. "
                    "'--micro-batch-size 4'")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--work", default="/tmp/weft-plan-vs-measured")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--port", type=int, default=29471)
    ap.add_argument("--nodes", type=int, default=1,
                    help="emulated nodes of 2 ranks each (scripts/cluster.sh: "
                    "network namespaces joined by a link shaped to --rate; "
                    "needs root); 1: 2 ranks on this host")
    ap.add_argument("--rate", default="400mbit",
                    help="the link between emulated nodes, as tc tbf takes "
                    "it (default 400mbit)")
    ap.add_argument("--cpu-share", default="auto", choices=["auto", "on", "off"],
                    help="cap each rank at cores/ranks of this host's cores "
                    "(bench/cpu_share.sh, root): auto does when there are "
                    "more ranks than cores")
    args = ap.parse_args()
    ranks = 2 * args.nodes
    global SHARE
    cores = len(os.sched_getaffinity(0))
    if args.cpu_share == "on" or (args.cpu_share == "auto" and ranks > cores):
        SHARE = cores / ranks
    if args.nodes > 1:
        subprocess.run([CLUSTER, "up", str(args.nodes), "--rate", args.rate],
                       env=CLUSTER_ENV, check=True)
    try:
        return measure(args, ranks)
    finally:
        if args.nodes > 1:
            subprocess.run([CLUSTER, "down"], env=CLUSTER_ENV)
        if SHARE:
            subprocess.run([CPU_SHARE, "--clean"])


def measure(args, ranks):
    b = os.path.join(args.build, "bin")
    os.makedirs(args.work, exist_ok=True)
    work = os.path.abspath(args.work)
    onnx, seq, vocab = export(args.model, work)
    spec = os.path.abspath(args.cluster)
    if args.profile or args.calibrate:
        spec = os.path.join(work, "local.yaml")
        # Capped runs get a capped profile: the collectives' copies and
        # sums then run at the ranks' speed (gloo's all-reduce of 16 MB on
        # 2 ranks: 7.7 ms uncapped, 14.5 ms capped).
        run(capped_share(2, [os.path.join(b, "weft-profile-cluster"),
                             "--devices", "2", "-o", spec]))
        if args.nodes > 1:
            # The profile measures one host's loopback; the link between
            # the nodes is measured across it, one process per node.
            launch(b, args.nodes, os.path.join(b, "weft-profile-cluster"),
                   ["--inter-node", "--spec", spec, "-o", spec], None,
                   args.port + 8, work, per_node=1)
    plan_file = os.path.join(work, "plan.json")
    batch = 8  # both models' own batch
    n = batch * max(args.steps, 8)
    run([PYTHON, os.path.join(ROOT, "test/lib/exe_check.py"), "npy",
         os.path.join(work, "ids.npy"), "--shape", "%d,%d" % (n, seq),
         "--dtype", "int64", "--high", str(vocab), "+", "npy",
         os.path.join(work, "labels.npy"), "--shape", "%d,%d" % (n, seq),
         "--dtype", "int64", "--high", str(vocab)])
    data = ["--data", "input=" + os.path.join(work, "ids.npy"), "--labels",
            os.path.join(work, "labels.npy"), "--lr", "0.001"]
    if args.calibrate:
        # One rank, the whole batch and half of it: a step is the update,
        # once a step, plus what each sample costs, so the two runs fix
        # the efficiency and the update's bandwidth. Each fit holds the
        # other fixed, so they alternate until the bandwidth moves less
        # than 0.1 % (a dozen rounds at most, each well under a second).
        def one_rank(onnx_b, batch_size, name):
            exe = os.path.join(work, name)
            run([os.path.join(b, "weftc"), onnx_b, "--optimizer", "adamw",
                 "-o", exe])
            ir_b = os.path.join(work, name + ".weft.mlir")
            run([os.path.join(b, "weftc"), onnx_b, "--emit=weft", "-o", ir_b])
            return run_one_rank(exe, batch_size, name), ir_b

        def run_one_rank(exe, batch_size, name):
            metrics = fresh(os.path.join(work, name + ".jsonl"))
            # One thread: a device of the spec is one rank, and the
            # calibration prices one device. Twins of the run keep the
            # cores as busy as the runs compared do (shared cores, caches,
            # memory bandwidth, clocks: 4 ranks on this host's 2 cores each
            # get half of one); only the first one's metrics are read.
            twins = [fresh(os.path.join(work, "%s-twin%d.jsonl" % (name, i)))
                     for i in range(1, ranks)]
            procs = [subprocess.Popen(
                capped([exe] + data + ["--steps", str(args.steps),
                                       "--threads", "1", "--metrics", m]),
                cwd=work, env=dict(os.environ, WEFT_CPU_SHARE_ID=str(i)),
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                for i, m in enumerate([metrics] + twins)]
            for proc in procs:
                _, err = proc.communicate()
                if proc.returncode != 0:
                    sys.exit("plan_vs_measured: the 1-rank calibration run "
                             "(batch %d) failed (%d):\n%s"
                             % (batch_size, proc.returncode, err[-3000:]))
            return metrics
        m1, ir = one_rank(onnx, batch, "one")
        # The host's speed drifts (a shared VM: a quarter from one minute to
        # the next on this one), so each round of the comparison runs this
        # 1-rank step again first, as a reference of the host's speed then.
        reference = (lambda r: median_step(run_one_rank(
            os.path.join(work, "one"), batch, "reference%d" % r)))
        reference_at_calibration = median_step(m1)
        m_half, ir_half = one_rank(export(args.model, work, batch // 2)[0],
                                   batch // 2, "one-half")
        calibrated = os.path.join(work, "calibrated.yaml")
        previous = None
        for r in range(12):
            spec = recalibrate(b, m1, ir, spec, calibrated, quiet=True)
            if not recalibrate(b, m_half, ir_half, spec, calibrated,
                               ["--fit", "update-bandwidth"], quiet=r < 11,
                               may_fail=True):
                # The half batch took half the time or less: the update's
                # share is inside the runs' noise (capped runs vary by a
                # few %), so the last rate stands.
                print("calibration: update bandwidth kept at %s"
                      % (previous or "the memory bandwidth"))
                break
            with open(calibrated) as f:
                gbps = float(re.search(r"update_bandwidth_GBps: (\S+)",
                                       f.read()).group(1))
            if previous and abs(gbps - previous) < 1e-3 * previous:
                print("calibration: update_bandwidth_GBps %g after %d "
                      "rounds" % (gbps, r + 1))
                break
            previous = gbps
        spec = recalibrate(b, m1, ir, spec, calibrated)
        # Then what each collective costs a step beyond its idle time, from
        # a run of every rank in a layout the comparison does not use:
        # tp=2 without sequence parallelism, micro-batches of 4 (with 2
        # nodes, dp=2 over them, micro-batches of 2).
        dp = ranks // 2
        mesh = "tp=2" if dp == 1 else "dp=%d,tp=2" % dp
        mbs = 4 if dp == 1 else 2
        tp_exe = os.path.join(work, "calib-tp2")
        run([os.path.join(b, "weftc"), export(args.model, work, dp * mbs)[0],
             "--mesh", mesh, "--accum-steps", str(batch // (dp * mbs)),
             "--optimizer", "adamw", "-o", tp_exe])
        m2 = os.path.join(work, "calib-tp2.jsonl")
        launch(b, args.nodes, tp_exe, data + ["--steps", str(args.steps)], m2,
               args.port + 9, work)
        spec = recalibrate(b, m2, ir, spec,
                           os.path.join(work, "calibrated-overhead.yaml"),
                           ["--mesh", mesh, "--micro-batch-size", str(mbs),
                            "--fit", "collective-overhead"])
    run([os.path.join(b, "weftc"), onnx, "--emit=plan-json", "--cluster",
         spec, "-o", plan_file] + args.plan_flags.split())
    with open(plan_file) as f:
        plan = json.load(f)
    plans = [plan] + plan["alternatives"][:3]
    rows = []
    exes = {}
    for k, pl in enumerate(plans):
        if not pl["feasible"]:
            continue
        exe = os.path.join(work, "train%d" % k)
        # weftc compiles the model's batch as one micro-batch of the whole
        # data-parallel group, and the step runs micro_batches of them: so
        # each layout gets the model exported with dp x micro_batch_size
        # samples (the same global batch, the same parameters).
        mb = pl["mesh"]["dp"] * pl["micro_batch_size"]
        onnx_k = export(args.model, work, mb)[0] if mb != batch else onnx
        run([os.path.join(b, "weftc"), onnx_k, "--plan", plan_file,
             "--plan-alternative", str(k), "--optimizer", "adamw", "-o", exe])
        exes[k] = exe
    results = {k: [] for k in exes}
    speeds = []
    for r in range(args.repeat):
        # The host's speed this round against the calibration's: the
        # reference step's time then over now (1: as calibrated).
        speed = reference_at_calibration / reference(r) if args.calibrate \
            else 1.0
        speeds.append(speed)
        for k, exe in exes.items():
            metrics = os.path.join(work, "m%d.jsonl" % k)
            load = loadavg()
            launch(b, args.nodes, exe, data + ["--steps", str(args.steps)],
                   metrics, args.port + k, work)
            steps = timed_steps(metrics)
            results[k].append((
                statistics.median(l["step_time_s"] for l in steps),
                statistics.median(l.get("comm_wait_s", 0) for l in steps),
                float(load), speed))
    for k, pl in enumerate(plans):
        if k not in results:
            rows.append((k, pl, None, None, None, None))
            continue
        res = results[k]
        rows.append((k, pl, statistics.median(x[0] for x in res),
                     statistics.median(x[1] for x in res),
                     "%.1f-%.1f" % (min(x[2] for x in res),
                                    max(x[2] for x in res)),
                     statistics.median(x[0] * x[3] for x in res)))
    print("model: %s (%s), spec: %s, %d steps x %d runs, %d ranks%s%s%s" %
          (args.model, os.path.basename(onnx), os.path.relpath(spec, ROOT)
           if spec.startswith(ROOT) else spec, args.steps, args.repeat, ranks,
           " on %d emulated nodes (%s link)" % (args.nodes, args.rate)
           if args.nodes > 1 else "",
           ", each capped at %g core" % SHARE if SHARE else "",
           ", pins: " + args.plan_flags if args.plan_flags else ""))
    if args.calibrate:
        print("host speed against the calibration's (its 1-rank step, "
              "%.3f ms then, run again before each round): %s"
              % (reference_at_calibration * 1e3,
                 ", ".join("%.3f" % x for x in speeds)))
    print("| plan | layout | predicted step (ms) | measured median (ms) | "
          "error | at the calibration's speed (ms) | error there | "
          "predicted exposed comm (ms) | measured comm wait (ms) | "
          "load avg (1 min) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    measured = [r[2] for r in rows if r[2] is not None]
    for k, pl, step, comm, load, scaled in rows:
        pred = pl["predicted"]["step_time_s"]
        if step is None:
            print("| %s | %s | %.3f | - (infeasible) | - | - | - | - | - | - |"
                  % ("pick" if k == 0 else "alt %d" % k, describe(pl),
                     pred * 1e3))
            continue
        print("| %s | %s | %.3f | %.3f | %+.1f %% | %.3f | %+.1f %% | %.3f | "
              "%.3f | %s |" %
              ("pick" if k == 0 else "alt %d" % k, describe(pl), pred * 1e3,
               step * 1e3, 100.0 * (pred - step) / step, scaled * 1e3,
               100.0 * (pred - scaled) / scaled,
               pl["predicted"]["exposed_comm_s"] * 1e3, comm * 1e3, load))
    if rows[0][2] is not None:
        fastest = min(measured)
        print("pick is the fastest measured: %s (pick %.3f ms, fastest %.3f ms)"
              % ("yes" if rows[0][2] <= fastest else "no", rows[0][2] * 1e3,
                 fastest * 1e3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
