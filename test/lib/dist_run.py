#!/usr/bin/python3
"""Train one model on 1 rank and on N ranks; require the same numbers.

  dist_run.py --weftc WEFTC --weftrun WEFTRUN --ckpt WEFT_CKPT
      --onnx M.onnx --out DIR --compile "FLAGS" --train "FLAGS"
      --layout "dp=2" [--layout "dp=2 tp=2 zero=1 sp" ...]
      [--launcher weftrun|torchrun|mpirun|slurm] [--port P] [--rtol R]
      [--tensor-rtol NAME=R ...] [--mesh-compile "FLAGS"]

Compiles M.onnx for one process with --compile's flags and trains it with
--train's flags (which must include --steps), then for every --layout
("[dp=N] [tp=M] [pp=P] [zero=K] [sp] [schedule=S] [v=V] [cuts=A,B]")
compiles it with --mesh dp=N,tp=M,pp=P [--zero K] [--sequence-parallel]
[--schedule S] [--virtual-stages V] [--stage-cuts A,B] (a pipeline's
micro-batches are --compile's --accum-steps, so the 1-rank run
accumulates the same global batch), trains it on N*M*P processes started by
the launcher (with --mesh-compile's flags too), and compares every step's loss (from
--metrics) and every final parameter and buffer (the last checkpoint,
through `weft-ckpt export`) with the 1-rank run's: the largest
difference relative to the tensor's largest magnitude must be <= R
(default 1e-5), or --tensor-rtol's R for the tensor NAME (one whose
update rounding noise decides: AdamW's step on a gradient that is
mathematically zero). Prints one line per layout; exits 1 on the first
mismatch, naming the layout, the step or tensor and the error; on a match
the line gives the largest loss and tensor errors and the worst tensor
(of those held to --rtol).

The launchers: weftrun --nproc-per-node N; torchrun (Debian's PyTorch:
python3 -m torch.distributed.run -r 1 -t 1 --no_python); mpirun (OpenMPI,
--oversubscribe, as root when run as root); slurm: the N processes started
here with the environment srun gives a job step's tasks on one node
(SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS, SLURM_NTASKS_PER_NODE,
SLURM_JOB_NODELIST; no Slurm daemons run here).
"""

import argparse
import os
import shlex
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import exe_check  # noqa: E402


def run(cmd, log):
    with open(log, "w") as f:
        result = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        with open(log) as f:
            tail = f.read()[-3000:]
        sys.exit("error: %s exited with %d:\n%s"
                 % (" ".join(shlex.quote(c) for c in cmd), result.returncode,
                    tail))


def run_slurm_tasks(ranks, cmd, port, log):
    """Starts `cmd` as srun would start the `ranks` tasks of a one-node job
    step, and waits for all of them."""
    procs = []
    for rank in range(ranks):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLURM_", "OMPI_")) and
               k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                         "LOCAL_WORLD_SIZE", "MASTER_ADDR")}
        env.update(SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank),
                   SLURM_NTASKS=str(ranks), SLURM_NTASKS_PER_NODE=str(ranks),
                   SLURM_JOB_NODELIST="localhost", MASTER_PORT=str(port))
        f = open("%s.%d" % (log, rank), "w")
        procs.append((subprocess.Popen(cmd, env=env, stdout=f,
                                       stderr=subprocess.STDOUT), f))
    failed = []
    for rank, (proc, f) in enumerate(procs):
        proc.wait()
        f.close()
        if proc.returncode != 0:
            failed.append(rank)
    if failed:
        with open("%s.%d" % (log, failed[0])) as f:
            tail = f.read()[-3000:]
        sys.exit("error: task %d of %s exited with %d:\n%s"
                 % (failed[0], " ".join(shlex.quote(c) for c in cmd),
                    procs[failed[0]][0].returncode, tail))


def launch(args, ranks, exe, train_args):
    if args.launcher == "weftrun":
        return [args.weftrun, "--nproc-per-node", str(ranks), "--master-port",
                str(args.port), exe] + train_args
    if args.launcher == "torchrun":
        return ["/usr/bin/python3", "-m", "torch.distributed.run", "-r", "1",
                "-t", "1", "--no_python", "--nproc_per_node", str(ranks),
                "--master_port", str(args.port), exe] + train_args
    cmd = ["mpirun", "-n", str(ranks), "--oversubscribe", "-x",
           "MASTER_PORT=%d" % args.port]
    if os.getuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd + [exe] + train_args


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--weftc", required=True)
    p.add_argument("--weftrun", required=True)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--onnx", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--compile", default="")
    p.add_argument("--mesh-compile", default="",
                   help="flags for the multi-rank builds only (--shard ...)")
    p.add_argument("--train", required=True)
    p.add_argument("--layout", action="append", required=True)
    p.add_argument("--launcher", default="weftrun",
                   choices=["weftrun", "torchrun", "mpirun", "slurm"])
    p.add_argument("--port", type=int, default=29500)
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--tensor-rtol", action="append", default=[],
                   metavar="NAME=R")
    args = p.parse_args()

    os.makedirs(args.out, exist_ok=True)
    tensor_rtol = {}
    for item in args.tensor_rtol:
        name, _, value = item.rpartition("=")
        if not name:
            p.error("--tensor-rtol takes NAME=R, not %r" % item)
        tensor_rtol[name] = float(value)
    compile_flags = shlex.split(args.compile)
    train_flags = shlex.split(args.train)

    def train(name, mesh, zero, ranks, extra=()):
        exe = os.path.join(args.out, name)
        flags = list(compile_flags)
        if mesh:
            flags += ["--mesh", mesh, "--zero", str(zero)] + list(extra) + \
                shlex.split(args.mesh_compile)
        run([args.weftc, args.onnx, "-o", exe] + flags, exe + ".compile.log")
        metrics = exe + ".jsonl"
        ckpt = exe + ".ckpt"
        # A checkpoint left by an earlier run would be resumed from.
        shutil.rmtree(ckpt, ignore_errors=True)
        if os.path.exists(metrics):
            os.remove(metrics)
        train_args = train_flags + ["--metrics", metrics, "--checkpoint-dir",
                                    ckpt]
        if mesh and args.launcher == "slurm":
            run_slurm_tasks(ranks, [exe] + train_args, args.port, exe + ".log")
        else:
            cmd = launch(args, ranks, exe, train_args) if mesh else \
                [exe] + train_args
            run(cmd, exe + ".log")
        state = exe + ".safetensors"
        run([args.ckpt, "export", ckpt, "-o", state], exe + ".export.log")
        return metrics, state

    one_metrics, one_state = train("one", "", 0, 1)
    for layout in args.layout:
        words = layout.split()
        fields = dict(f.split("=", 1) for f in words if "=" in f)
        mesh = ",".join("%s=%s" % (axis, fields[axis])
                        for axis in ("dp", "tp", "pp") if axis in fields)
        zero = int(fields.get("zero", 0))
        extra = []
        if "sp" in words:
            extra.append("--sequence-parallel")
        for key, flag in (("schedule", "--schedule"), ("v", "--virtual-stages"),
                          ("cuts", "--stage-cuts")):
            if key in fields:
                extra += [flag, fields[key]]
        ranks = 1
        for axis in ("dp", "tp", "pp"):
            ranks *= int(fields.get(axis, 1))
        name = "-".join(words).replace("=", "")
        name = name.replace(",", "_").replace(".", "")
        metrics, state = train(name, mesh, zero, ranks, extra)
        try:
            loss_err = exe_check.cmd_close_metrics(argparse.Namespace(
                a=metrics, b=one_metrics, rtol=args.rtol))
            tensor_err, worst = exe_check.cmd_close_tensors(
                argparse.Namespace(a=state, b=one_state, rtol=args.rtol,
                                   tensor_rtol=tensor_rtol))
        except exe_check.Failure as e:
            sys.exit("error: %s under %s against 1 rank: %s"
                     % (layout, args.launcher, e))
        print("%s under %s: matches 1 rank (losses %.2g, tensors %.2g, "
              "worst %s)" % (layout, args.launcher, loss_err, tensor_err,
                             worst))


if __name__ == "__main__":
    main()
