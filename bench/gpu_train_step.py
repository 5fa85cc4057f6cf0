#!/usr/bin/env python3
"""GPT-2 124M training steps on one GPU: Weft's `--target cuda` executable
against the same model in PyTorch, step time, tokens/s and MFU (issue 15).

Run on the GPU machine (docs/gpu.md, "Benchmark"; bench/gpu_bench.sh runs
it):

  python3 bench/gpu_train_step.py --exe DIR/train --pack DIR/train.weights.pack
      [--steps 30] [--warmup 5] [--heads 12] [--out $OUT]

The executable is compiled elsewhere (bench/gpu_bundle.sh: weftc --target cuda
--precision bf16 --optimizer adamw --embed-weights-limit 0) and its weights
file rebuilt here from the pack (bench/gpu_weights.py: every parameter is an
integer formula of its name and index, so the file is byte-identical and
passes the runtime's checksums). The model's size is read from the pack's header (wte, wpe, h.N)
and the batch from the executable's --help.

Both sides start from the same weights (PyTorch's parameters get the same
formula) and train on the same batches, in file order: random tokens (seed 0),
labels the tokens shifted by one. PyTorch runs examples/models/export.py's
GPT (the module weftc compiled: explicit causal-masked softmax attention,
block 0 erf GELU, the others tanh, lm_head tied to wte) with f32 master
weights, autocast to bf16, torch.optim.AdamW (fused when available) with
Weft's defaults (betas 0.9/0.999, eps 1e-8, weight decay 0.01 on every
parameter), eager and with the model under torch.compile (the optimizer
step eager, as nanoGPT), each in its own process under a time limit. Every step ends in a device synchronization on both sides.

Step time: the median over the steps after --warmup. MFU = model FLOP/s over
the GPU's dense bf16 peak (--peak-tflops, 989 for H100/H200 SXM), with model
FLOPs per token 6 * N + 12 * L * T * d (PaLM's appendix B, nanoGPT's
estimate_mfu): N the parameters without the position embedding (the tied
wte is counted once, as the lm_head GEMM), L layers, T the sequence, d the
width. Recomputation and the attention mask's wasted half are not counted.

--dry-run: no GPU: the Weft side as given (a CPU executable of a small GPT),
PyTorch eager on the CPU, to check the script itself.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpu_weights  # noqa: E402


def log(msg):
    print(msg, flush=True)


def model_dims(pack_path, heads):
    with open(pack_path, "rb") as f:
        blob = f.read()
    at = len(gpu_weights.MAGIC)
    (n,) = np.frombuffer(blob[at:at + 8], dtype="<u8")
    meta = json.loads(blob[at + 8:at + 8 + int(n)])
    hdr = blob[at + 8 + int(n):at + 8 + int(n) + meta["header"]]
    header = json.loads(hdr[8:])
    vocab, d = header["wte.weight"]["shape"]
    block = header["wpe.weight"]["shape"][0]
    layers = 1 + max(int(m.group(1)) for m in
                     (re.match(r"h\.(\d+)\.", k) for k in header) if m)
    params = sum(int(np.prod(v["shape"])) for k, v in header.items()
                 if k != "__metadata__"
                 and not re.match(r"h\.\d+\.attn\.bias$", k))
    return {"vocab": vocab, "embd": d, "block": block, "layers": layers,
            "heads": heads, "params": params}


def exe_batch(exe):
    out = subprocess.run([exe, "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    m = re.search(r"input: I64 (\d+)x(\d+)", out)
    if not m:
        sys.exit("%s --help names no 'input: I64 BxT' batch input:\n%s"
                 % (exe, out[-2000:]))
    return int(m.group(1)), int(m.group(2))


def flops_per_token(dims):
    n = dims["params"] - dims["block"] * dims["embd"]  # less wpe
    return 6 * n + 12 * dims["layers"] * dims["block"] * dims["embd"]


def make_data(path, dims, batch, steps):
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, dims["vocab"], (batch * steps, dims["block"] + 1),
                          dtype=np.int64)
    x, y = tokens[:, :-1].copy(), tokens[:, 1:].copy()
    np.save(os.path.join(path, "x.npy"), x)
    np.save(os.path.join(path, "y.npy"), y)
    return x, y


def summarize(name, times, losses, warmup, tokens, fpt, peak):
    kept, note = times[warmup:], None
    if not kept and len(times) >= 2:
        # Too slow for the time limit: the steps after the first still say
        # more than nothing, flagged.
        kept = times[1:]
        note = "only %d steps: timed all but the first" % len(times)
    if not kept:
        return {"name": name, "ok": False, "steps": len(times),
                "losses": losses,
                "error": "%d steps, none after the %d warm-up steps"
                         % (len(times), warmup)}
    ms = statistics.median(kept) * 1e3
    tps = tokens / (ms / 1e3)
    return {"name": name, "ok": True, "steps": len(times),
            "timed_steps": len(kept), "step_ms": ms,
            "step_ms_min": min(kept) * 1e3, "step_ms_max": max(kept) * 1e3,
            "tokens_per_s": tps, "tflops": tps * fpt / 1e12,
            "mfu": tps * fpt / (peak * 1e12), "losses": losses,
            "note": note}


def run_weft(args, dims, batch, work, exe=None, name="weft"):
    """Times `exe` (default --exe) as result `name`; only the main one is
    profiled."""
    main_run = exe is None
    exe = exe or args.exe
    weights = exe + ".weights.safetensors"
    t0 = time.time()
    gpu_weights.unpack(args.pack, weights)
    log("weights rebuilt in %.1f s" % (time.time() - t0))
    tag = name.replace(" ", "_")
    metrics = os.path.join(work, tag + ".jsonl")
    cmd = [exe, "--data", os.path.join(work, "x.npy"),
           "--labels", os.path.join(work, "y.npy"), "--steps",
           str(args.steps), "--lr", str(args.lr), "--no-shuffle",
           "--metrics", metrics, "--log-every", "5"]
    log("$ " + " ".join(cmd))
    t0 = time.time()
    # SIGTERM makes the trainer finish its step and stop: the steps done
    # are in the metrics either way.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=args.weft_timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        rc = "stopped after %d s (limit)" % args.weft_timeout
    wall = time.time() - t0
    log(out[-3000:].rstrip())
    log("%s: rc %s, %.1f s" % (name, rc, wall))
    rows = []
    if os.path.exists(metrics):
        with open(metrics) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    if args.out:
        with open(os.path.join(args.out, tag + ".log"), "w") as f:
            f.write(out)
        if os.path.exists(metrics):
            with open(metrics) as f, \
                    open(os.path.join(args.out, tag + ".jsonl"), "w") as g:
                g.write(f.read())
    r = summarize(name, [r["step_time_s"] for r in rows],
                  [r["loss"] for r in rows], args.warmup,
                  batch * dims["block"], flops_per_token(dims), args.peak_tflops)
    r["rc"], r["wall_s"] = str(rc), wall
    if main_run and args.profile_steps and args.out:
        profile_weft(args, cmd)
    if rc != 0 and not r.get("error"):
        r["note"] = "; ".join(filter(None, [
            r.get("note"), "exit %s after %d steps" % (rc, len(rows))]))
    return r


def profile_weft(args, cmd):
    """A second, short run with WEFT_CUDA_PROFILE: the device time of each
    kernel and GEMM (docs/gpu.md, "Profiling"), kept apart from the timed
    run because the events it records cost time on every launch."""
    path = os.path.join(args.out, "weft_profile.txt")
    steps = cmd.index("--steps") + 1
    cmd = cmd[:steps] + [str(args.profile_steps)] + cmd[steps + 1:]
    env = dict(os.environ, WEFT_CUDA_PROFILE=path)
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                           timeout=args.weft_timeout)
        log("weft profile (%d steps): rc %d, %s" % (
            args.profile_steps, p.returncode, path))
    except subprocess.TimeoutExpired:
        log("weft profile: stopped after %d s (limit)" % args.weft_timeout)
    if os.path.exists(path):
        with open(path) as f:
            log("".join(f.readlines()[:30]).rstrip())


# --------------------------------------------------------------------------
# PyTorch, in a child process per mode (--torch-child)
# --------------------------------------------------------------------------
def torch_child(args):
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(HERE, "..", "examples", "models"))
    from export import GPT

    dims = json.loads(args.dims)
    dev = "cpu" if args.dry_run else "cuda"
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model = GPT(vocab=dims["vocab"], block_size=dims["block"],
                n_embd=dims["embd"], n_head=dims["heads"],
                n_layer=dims["layers"])
    gpu_weights.set_formula_weights(model)
    model.to(dev).train()
    kw = {}
    if dev == "cuda":
        kw["fused"] = True
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999),
                            eps=1e-8, weight_decay=0.01, **kw)
    x = torch.from_numpy(np.load(os.path.join(args.work, "x.npy"))).to(dev)
    y = torch.from_numpy(np.load(os.path.join(args.work, "y.npy"))).to(dev)
    batch = args.batch

    def step(xb, yb):
        with torch.autocast(device_type=dev, dtype=torch.bfloat16):
            logits = model(xb)
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)),
                               yb.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    if args.torch_child == "compile":
        # The model, as nanoGPT does; the fused AdamW step stays eager.
        model = torch.compile(model)
    times, losses = [], []
    # An absolute time (set by the parent: its limit less a margin), so
    # that slow setup or compilation still leaves steps on the record.
    deadline = args.torch_deadline
    for i in range(args.steps):
        xb, yb = x[i * batch:(i + 1) * batch], y[i * batch:(i + 1) * batch]
        if dev == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = step(xb, yb)
        value = float(loss)  # synchronizes
        times.append(time.perf_counter() - t0)
        losses.append(value)
        print(json.dumps({"step": i + 1, "loss": value,
                          "step_time_s": times[-1]}), flush=True)
        if time.time() > deadline and i + 1 > args.warmup:
            break
    if dev == "cuda":
        print(json.dumps({"peak_mem_gib":
                          torch.cuda.max_memory_allocated() / 2**30,
                          "torch": torch.__version__,
                          "gpu": torch.cuda.get_device_name()}), flush=True)


def run_torch(args, mode, dims, batch, work):
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-child", mode,
           "--dims", json.dumps(dims), "--work", work, "--batch", str(batch),
           "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--lr", str(args.lr),
           "--torch-deadline", str(time.time() + args.torch_timeout - 6)]
    if args.dry_run:
        cmd.append("--dry-run")
    log("$ torch %s (limit %d s)" % (mode, args.torch_timeout))
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=args.torch_timeout)
        out, rc = p.stdout, p.returncode
        err = p.stderr
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace")
        err = (e.stderr or b"").decode(errors="replace")
        rc = "timeout after %d s" % args.torch_timeout
    wall = time.time() - t0
    rows, info = [], {}
    for line in out.splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            if "step" in j:
                rows.append(j)
            else:
                info.update(j)
    if args.out:
        with open(os.path.join(args.out, "torch-%s.log" % mode), "w") as f:
            f.write(out + "\n--- stderr\n" + err)
    log("torch %s: rc %s, %d steps, %.1f s%s" % (
        mode, rc, len(rows), wall,
        "" if rc == 0 else "\n" + err[-2000:].rstrip()))
    r = summarize("torch-" + mode, [r["step_time_s"] for r in rows],
                  [r["loss"] for r in rows], args.warmup,
                  batch * dims["block"], flops_per_token(dims), args.peak_tflops)
    r["rc"], r["wall_s"] = str(rc), wall
    r.update(info)
    return r


def table(results, dims, batch, fpt, args):
    lines = ["| run | steps timed | step ms (median) | min-max | tokens/s | "
             "TFLOP/s | MFU | loss step 1 | loss last |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        if not r["ok"]:
            lines.append("| %s | failed: %s (rc %s) | | | | | | | |"
                         % (r["name"], r.get("error", ""), r.get("rc")))
            continue
        lines.append("| %s | %d | %.1f | %.1f-%.1f | %.0f | %.1f | %.1f%% | "
                     "%.4f | %.4f |" % (
                         r["name"] + (" (%s)" % r["note"] if r.get("note")
                                      else ""),
                         r["timed_steps"], r["step_ms"],
                         r["step_ms_min"], r["step_ms_max"], r["tokens_per_s"],
                         r["tflops"], 100 * r["mfu"], r["losses"][0],
                         r["losses"][-1]))
    weft = next((r for r in results if r["name"] == "weft" and r["ok"]), None)
    for r in results:
        if weft and r["ok"] and r is not weft:
            lines.append("")
            lines.append("Weft / %s: step time %.2fx, tokens/s %.3fx" % (
                r["name"], weft["step_ms"] / r["step_ms"],
                weft["tokens_per_s"] / r["tokens_per_s"]))
            n = min(len(weft["losses"]), len(r["losses"]))
            if n:
                diff = max(abs(a - b) / abs(b) for a, b in
                           zip(weft["losses"][:n], r["losses"][:n]))
                lines.append("  losses of the first %d steps within %.2e "
                             "(relative) of %s" % (n, diff, r["name"]))
    head = ("GPT %d layers, d %d, %d heads, vocab %d, T %d, batch %d: "
            "%d parameters, %d tokens/step; model FLOPs/token 6N + 12LTd = "
            "%.1f M (N = %d without wpe); peak %.0f TFLOP/s bf16 dense"
            % (dims["layers"], dims["embd"], dims["heads"], dims["vocab"],
               dims["block"], batch, dims["params"], batch * dims["block"],
               fpt / 1e6, dims["params"] - dims["block"] * dims["embd"],
               args.peak_tflops))
    info = next((r for r in results if r.get("gpu")), None)
    if info:
        head += "\n%s, torch %s" % (info["gpu"], info["torch"])
    return head + "\n\n" + "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--exe")
    p.add_argument("--pack")
    p.add_argument("--also-exe", action="append", default=[],
                   metavar="PATH:LABEL",
                   help="another build of the same model, timed after --exe "
                        "as 'weft LABEL' (e.g. a --fused-attention=off build)")
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--peak-tflops", type=float, default=989.0)
    p.add_argument("--torch", default="eager,compile",
                   help="PyTorch modes to run: eager, compile, none")
    p.add_argument("--weft-timeout", type=int, default=75)
    p.add_argument("--torch-timeout", type=int, default=40,
                   help="seconds for eager; compile gets twice this")
    p.add_argument("--profile-steps", type=int, default=0,
                   help="after the timed run, this many steps again with "
                   "WEFT_CUDA_PROFILE (OUT/weft_profile.txt)")
    p.add_argument("--out", default=os.environ.get("OUT"))
    p.add_argument("--dry-run", action="store_true")
    # child process
    p.add_argument("--torch-child", help=argparse.SUPPRESS)
    p.add_argument("--dims", help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    p.add_argument("--torch-deadline", type=float, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.torch_child:
        torch_child(args)
        return 0
    if not args.exe or not args.pack:
        p.error("--exe and --pack are required")
    if args.out:
        os.makedirs(args.out, exist_ok=True)

    start = time.time()
    dims = model_dims(args.pack, args.heads)
    batch, block = exe_batch(args.exe)
    if block != dims["block"]:
        sys.exit("the executable's T is %d, the pack's wpe %d" % (
            block, dims["block"]))
    fpt = flops_per_token(dims)
    work = tempfile.mkdtemp(prefix="gpu-bench-")
    make_data(work, dims, batch, args.steps)
    if not args.dry_run:
        try:
            log(subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,"
                                "clocks.max.sm,power.limit",
                                "--format=csv,noheader"], capture_output=True,
                               text=True, timeout=20).stdout.strip())
        except (OSError, subprocess.TimeoutExpired) as e:
            log("nvidia-smi: %s" % e)

    results = [run_weft(args, dims, batch, work)]
    for also in args.also_exe:
        path, _, label = also.partition(":")
        results.append(run_weft(args, dims, batch, work, path,
                                "weft " + (label or os.path.basename(path))))
    base = args.torch_timeout
    for mode in [m for m in args.torch.split(",") if m and m != "none"]:
        if args.dry_run and mode == "compile":
            log("torch compile: skipped (--dry-run)")
            continue
        args.torch_timeout = int(base * (2 if mode == "compile" else 1))
        results.append(run_torch(args, mode, dims, batch, work))
    args.torch_timeout = base

    text = table(results, dims, batch, fpt, args)
    log("\n" + text)
    log("\ntotal %.0f s" % (time.time() - start))
    if args.out:
        with open(os.path.join(args.out, "gpu_bench.json"), "w") as f:
            json.dump({"dims": dims, "batch": batch, "flops_per_token": fpt,
                       "peak_tflops": args.peak_tflops,
                       "dry_run": args.dry_run, "results": results}, f,
                      indent=1)
        with open(os.path.join(args.out, "gpu_bench.md"), "w") as f:
            f.write(text + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
