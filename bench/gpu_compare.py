#!/usr/bin/python3
"""Reads what bench/gpu_device_check.sh brought back from a GPU machine:

  /usr/bin/python3 bench/gpu_compare.py OUT [--work /tmp/devprep]

OUT holds all.tgz (or its contents). For each small model, the largest
relative loss difference of the GPU executable's steps from the CPU
executable's, from the reference evaluator's and from PyTorch's reference
(bench/gpu_prepare.sh left them in WORK/small), against the tolerances of
issue 15 (fp32 1e-4, bf16 1e-2); the one-rank meshes' final parameters
against the CPU run's and the evaluator's;
then the benchmark's table and the profile's head. Exit status 1 when a
model is outside its tolerance or missing.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tarfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "test", "lib"))
import exe_check  # noqa: E402


def losses(path):
    with open(path) as f:
        return {r["step"]: r["loss"] for r in map(json.loads, f) if "loss" in r}


def worst(a, b):
    steps = sorted(set(a) & set(b))
    if not steps:
        return float("inf"), 0
    return max(abs(a[s] - b[s]) / abs(b[s]) for s in steps), len(steps)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--work", default="/tmp/devprep")
    p.add_argument("--ckpt", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "build", "bin",
        "weft-ckpt"))
    args = p.parse_args()
    out = args.out
    if os.path.exists(os.path.join(out, "all.tgz")):
        dest = os.path.join(out, "all")
        if not os.path.isdir(dest):
            with tarfile.open(os.path.join(out, "all.tgz")) as t:
                t.extractall(dest)
        out = dest
    small = os.path.join(args.work, "small")
    # The reference evaluator's run of the same steps (gpu_prepare.sh).
    evaluated = {"mlp_cuda": "mlp/eval", "gpt_cuda": "gpt/eval",
                 "gpt_cuda_bf16": "gpt/eval_bf16"}
    for m in ("mlp", "gpt"):
        for kind in ("", "_z3", "_z2"):
            evaluated["%s_cuda_mesh%s" % (m, kind)] = m + "/eval"

    def reference_losses(folder):
        return {int(os.path.basename(f)[5:-4]) + 1: float(np.load(f))
                for f in glob.glob(os.path.join(small, folder, "loss_*.npy"))}

    checks = [  # GPU metrics, CPU metrics, PyTorch reference, tolerance
        ("mlp_cuda", "mlp/cpu_fp32", "mlp/run/ref", 1e-4),
        ("gpt_cuda", "gpt/cpu_fp32", "gpt/run/ref", 1e-4),
        ("gpt_cuda_bf16", "gpt/cpu_bf16", "gpt/run/ref", 1e-2),
        ("mid_cuda_fp32", "mid/cpu_fp32", None, 1e-4),
        ("mid_cuda_bf16", "mid/cpu_bf16", None, 1e-2),
        # The GPU's fused attention kernels (--fused-attention=on).
        ("mid_cuda_fa_fp32", "mid/cpu_fp32", None, 1e-4),
        ("mid_cuda_fa_bf16", "mid/cpu_bf16", None, 1e-2),
        # One-rank meshes: every collective on NCCL (docs/gpu.md, "Meshes").
        ("mlp_cuda_mesh", "mlp/cpu_fp32", "mlp/run/ref", 1e-4),
        ("mlp_cuda_mesh_z3", "mlp/cpu_fp32", "mlp/run/ref", 1e-4),
        ("mlp_cuda_mesh_z2", "mlp/cpu_fp32", "mlp/run/ref", 1e-4),
        ("gpt_cuda_mesh", "gpt/cpu_fp32", "gpt/run/ref", 1e-4),
        ("gpt_cuda_mesh_z3", "gpt/cpu_fp32", "gpt/run/ref", 1e-4),
        ("gpt_cuda_mesh_z2", "gpt/cpu_fp32", "gpt/run/ref", 1e-4),
        # Pipelines, two ranks on one GPU, against the 1-rank CPU step
        # accumulating the same micro-batches.
        ("pipe_cuda_pp2", "pipe/cpu_fp32", None, 1e-4),
        ("pipe_cuda_pp2_interleaved", "pipe/cpu_fp32", None, 1e-4),
    ]
    ok = True
    for gpu, cpu, ref, tol in checks:
        path = os.path.join(out, gpu + ".jsonl")
        if not os.path.exists(path):
            print("%-14s missing" % gpu)
            ok = False
            continue
        g = losses(path)
        e, n = worst(g, losses(os.path.join(small, cpu + ".jsonl")))
        line = "%-14s %2d steps: vs CPU %.2e" % (gpu, n, e)
        bad = e > tol
        if gpu in evaluated:
            ev = reference_losses(evaluated[gpu])
            ee, ne = worst(g, ev)
            line += ", vs evaluator %.2e" % ee
            bad |= ee > tol or ne != n
        if ref:
            er, _ = worst(g, reference_losses(ref))
            line += ", vs PyTorch %.2e" % er
            bad |= er > tol
        print(line + " (tolerance %g)%s" % (tol, "  FAIL" if bad else ""))
        ok &= not bad
    # The one-rank meshes' final parameters (their checkpoints, exported
    # here) against the 1-rank CPU run's, as test/lib/dist_run.py does.
    for ck in sorted(d for d in glob.glob(os.path.join(out, "ck_*"))
                     if os.path.isdir(d)):
        gpu = os.path.basename(ck)[3:]
        model = gpu.split("_")[0]
        state = ck + ".safetensors"
        subprocess.run([args.ckpt, "export", ck, "-o", state], check=True,
                       stdout=subprocess.DEVNULL)
        try:
            err, name = exe_check.cmd_close_tensors(argparse.Namespace(
                a=state, b=os.path.join(small, model, "cpu_fp32.safetensors"),
                rtol=1e-4))
            print("%-14s final parameters vs CPU: worst %.2e (%s)"
                  % (gpu, err, name))
            # The evaluator writes each parameter it updates as a .npy;
            # buffers (an attention mask) are no result of the step. (The
            # pipelines' accumulating step has no evaluator run.)
            if gpu not in evaluated:
                continue
            params = exe_check.read_safetensors(state)
            worst_ev = (0.0, None)
            compared = 0
            for pname in sorted(params):
                path = os.path.join(small, evaluated[gpu], pname + ".npy")
                if not os.path.exists(path):
                    continue
                compared += 1
                got = exe_check.tensor_array(params[pname], pname, state)
                want = np.load(path)
                e = exe_check.close(got, want, 1e-4)
                if e > 1e-4:
                    raise exe_check.Failure(
                        "%s differs from the evaluator's by %.2e" % (pname, e))
                worst_ev = max(worst_ev, (e, pname))
            print("%-14s final parameters vs evaluator: %d of %d tensors, "
                  "worst %.2e (%s)" % (gpu, compared, len(params),
                                       worst_ev[0], worst_ev[1]))
        except exe_check.Failure as e:
            print("%-14s final parameters: %s  FAIL" % (gpu, e))
            ok = False
    # CUDA graphs off: the same losses, bit for bit (as printed).
    for gpu in ("gpt_cuda", "mid_cuda_bf16"):
        a = os.path.join(out, gpu + ".jsonl")
        b = os.path.join(out, gpu + "_nographs.jsonl")
        if not (os.path.exists(a) and os.path.exists(b)):
            print("%-14s graphs off: missing" % gpu)
            ok = False
            continue
        same = losses(a) == losses(b) and len(losses(a)) > 0
        print("%-14s graphs off: %s" % (gpu, "the same losses" if same
                                        else "DIFFERENT losses  FAIL"))
        ok &= same
    for m in ("gpt", "mid"):
        ms = []
        for g in (1, 0):
            path = os.path.join(out, "time_%s_graphs%d.jsonl" % (m, g))
            if not os.path.exists(path):
                ms.append(float("nan"))
                continue
            with open(path) as f:
                t = sorted(r["step_time_s"] for r in map(json.loads, f)
                           if "step_time_s" in r)[:]
            ms.append(1e3 * t[len(t) // 2] if t else float("nan"))
        print("%s step (median): %.3f ms as a CUDA graph, %.3f ms launch by "
              "launch (%.2fx)" % (m, ms[0], ms[1], ms[1] / ms[0]))
    full = os.path.join(out, "resume_full.jsonl")
    tail = os.path.join(out, "resume_tail.jsonl")
    if os.path.exists(full) and os.path.exists(tail):
        f, t = losses(full), losses(tail)
        same = sorted(t) == list(range(6, 13)) and all(
            t[s] == f[s] for s in t)
        print("resume after a checkpoint taken with a batch fetched ahead: "
              "steps %s %s" % (sorted(t), "match" if same
                               else "DIFFER from the uninterrupted run  FAIL"))
        ok &= same
    else:
        print("resume check: missing")
        ok = False
    for name in ("gpu_bench.md", "weft_profile.txt"):
        path = os.path.join(out, name)
        if os.path.exists(path):
            with open(path) as f:
                print("\n" + "".join(f.readlines()[:12]).rstrip())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
