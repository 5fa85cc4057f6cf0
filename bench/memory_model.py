#!/usr/bin/python3
"""The planner's memory model against the measured peak of the same GPT.

Usage:
  /usr/bin/python3 bench/memory_model.py --build build --out DIR
      [--configs NAME,...] [--port 29461] [--json FILE]

For each configuration: exports a GPT (bench/export_gpt.py's model, random
weights), compiles it with weftc (AdamW, fp32; --mesh dp=2 --zero K for the
data-parallel rows; --recompute for the rows that recompute, full:K as
--recompute=full --recompute-layers=h.0,..,h.K-1), trains 3 steps (dp=2
through weftrun), and reads the executable's metrics: peak_rss_bytes minus
baseline_rss_bytes is what the step's tensors cost. The prediction is
weft-plan's for the same layout, pinned (mesh, ZeRO stage, micro-batch
size, recomputation, fp32) on the
model's weft IR (weftc --emit=weft), on a cluster spec of this host, with
--executable-memory (and without it, for comparison: the textbook parts
alone). Prints a markdown table; --json writes the rows for tests.
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import common  # noqa: E402
PYTHON = "/usr/bin/python3"

# name -> (layers, embd, heads, vocab, seq, global batch, dp, zero, recompute)
CONFIGS = {
    "L4-b8": (4, 256, 4, 4096, 128, 8, 1, 0, "none"),
    "L8-b8": (8, 256, 4, 4096, 128, 8, 1, 0, "none"),
    "L4-b16": (4, 256, 4, 4096, 128, 16, 1, 0, "none"),
    "L4-h512-b8": (4, 512, 8, 8192, 128, 8, 1, 0, "none"),
    "dp2-z0": (4, 256, 4, 4096, 128, 16, 2, 0, "none"),
    "dp2-z1": (4, 256, 4, 4096, 128, 16, 2, 1, "none"),
    "dp2-z2": (4, 256, 4, 4096, 128, 16, 2, 2, "none"),
    "dp2-z3": (4, 256, 4, 4096, 128, 16, 2, 3, "none"),
    "L4-b8-full": (4, 256, 4, 4096, 128, 8, 1, 0, "full"),
    "L8-b8-full:4": (8, 256, 4, 4096, 128, 8, 1, 0, "full:4"),
    "dp2-z1-full": (4, 256, 4, 4096, 128, 16, 2, 1, "full"),
    "dp2-z0-full:2": (4, 256, 4, 4096, 128, 16, 2, 0, "full:2"),
}



def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit("failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd),
                                            r.stdout, r.stderr))
    return r


def measure(name, cfg, args):
    layers, embd, heads, vocab, seq, batch, dp, zero, recompute = cfg
    bindir = os.path.join(args.build, "bin")
    d = os.path.join(args.out, name)
    os.makedirs(d, exist_ok=True)
    onnx = os.path.join(d, "gpt.onnx")
    if not os.path.exists(onnx):
        run([PYTHON, os.path.join(HERE, "export_gpt.py"), "--out", d,
             "--layers", str(layers), "--embd", str(embd), "--heads",
             str(heads), "--vocab", str(vocab), "--block", str(seq),
             "--batch", str(batch)])
    import numpy as np
    rng = np.random.default_rng(0)
    data = os.path.join(d, "x.npy")
    labels = os.path.join(d, "y.npy")
    np.save(data, rng.integers(0, vocab, (4 * batch, seq)).astype(np.int64))
    np.save(labels, rng.integers(0, vocab, (4 * batch, seq)).astype(np.int64))

    exe = os.path.join(d, "train")
    mesh = ["--mesh", "dp=%d" % dp, "--zero", str(zero)] if dp > 1 else []
    run([os.path.join(bindir, "weftc"), onnx, "--optimizer", "adamw",
         "-o", exe] + mesh + common.recompute_flags(recompute))
    weft = os.path.join(d, "gpt.weft.mlir")
    run([os.path.join(bindir, "weftc"), onnx, "--emit=weft", "-o", weft])
    metrics = os.path.join(d, "m.jsonl")
    train = ["--data", data, "--labels", labels, "--steps", "3", "--lr",
             "1e-4", "--metrics", metrics]
    if dp > 1:
        run([os.path.join(bindir, "weftrun"), "--nproc-per-node", str(dp),
             "--master-port", str(args.port), exe] + train)
    else:
        run([exe] + train)
    last = [json.loads(l) for l in open(metrics)][-1]
    help_text = run([exe, "--help"]).stdout
    weftc = {}
    for key in ("workspace_bytes", "peak_bytes"):
        for line in help_text.splitlines():
            if line.strip().startswith(key + ":"):
                weftc[key] = int(line.split(":")[1])

    def plan(extra):
        return json.loads(run([
            os.path.join(bindir, "weft-plan"), "search", weft, "--cluster",
            args.cluster, "--devices", str(dp), "--mesh",
            "dp=%d,tp=1,pp=1" % dp, "--zero", str(zero),
            "--micro-batch-size", str(batch // dp), "--recompute", recompute,
            "--dtype", "fp32", "--emit", "plan-json"] + extra).stdout)
    textbook = plan([])["predicted"]["memory_bytes_per_device"]
    planned = plan(["--executable-memory"])
    predicted = planned["predicted"]
    measured = last["peak_rss_bytes"] - last["baseline_rss_bytes"]
    return {
        "name": name, "layers": layers, "hidden": embd, "vocab": vocab,
        "seq": seq, "batch": batch, "dp": dp, "zero": zero,
        "recompute": recompute,
        "params": planned["params"],
        "peak_rss_bytes": last["peak_rss_bytes"],
        "baseline_rss_bytes": last["baseline_rss_bytes"],
        "measured_bytes": measured,
        "weftc_peak_bytes": weftc.get("peak_bytes"),
        "weftc_workspace_bytes": weftc.get("workspace_bytes"),
        "textbook_bytes": textbook,
        "predicted_bytes": predicted["memory_bytes_per_device"],
        "predicted_parts": predicted["memory_bytes"],
        "error": predicted["memory_bytes_per_device"] / measured - 1,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--out", required=True)
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--cluster",
                   default=os.path.join(ROOT, "examples", "clusters",
                                        "cpu-host.yaml"))
    p.add_argument("--port", type=int, default=29461)
    p.add_argument("--json")
    args = p.parse_args(argv)
    rows = []
    for name in args.configs.split(","):
        row = measure(name, CONFIGS[name], args)
        rows.append(row)
        print("%s: measured %.1f MB, predicted %.1f MB (%+.1f %%), weftc "
              "planned %.1f MB" % (name, row["measured_bytes"] / 1e6,
                                   row["predicted_bytes"] / 1e6,
                                   100 * row["error"],
                                   (row["weftc_peak_bytes"] or 0) / 1e6),
              file=sys.stderr, flush=True)
    print("| model | layout | measured peak − baseline (MB) | predicted (MB) "
          "| error | textbook parts only (MB) | weftc planned (MB) "
          "| baseline (MB) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        layout = ("dp=%d zero=%d" % (r["dp"], r["zero"]) if r["dp"] > 1
                  else "1 rank")
        if r.get("recompute", "none") != "none":
            layout += ", recompute " + r["recompute"]
        print("| GPT L=%d H=%d V=%d S=%d B=%d (%.1fM params) | %s | %.1f | "
              "%.1f | %+.1f %% | %.1f | %.1f | %.1f |"
              % (r["layers"], r["hidden"], r["vocab"], r["seq"], r["batch"],
                 r["params"] / 1e6, layout, r["measured_bytes"] / 1e6,
                 r["predicted_bytes"] / 1e6, 100 * r["error"],
                 r["textbook_bytes"] / 1e6,
                 (r["weftc_peak_bytes"] or 0) / 1e6,
                 r["baseline_rss_bytes"] / 1e6))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
