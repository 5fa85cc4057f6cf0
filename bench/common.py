"""Shared pieces of Weft's benchmarks (bench/train_step.py, bench/gemm.py).

The benchmark models, their ONNX export, their training data, and one timed
training run each of Weft's executable and of PyTorch 1.13 on the same
model, initial weights, batches, optimizer and thread count.

Both sides train with AdamW (lr 1e-3, weight decay 0.01, no clipping,
constant schedule) and cross-entropy; both do their f32 matrix products
with the same OpenBLAS (Debian's 0.3.21: weftc's executables link
libopenblas.so.0, PyTorch's libblas.so.3 is the same library).

In bf16 (precision "bf16"): Weft's executable is compiled with `weftc
--precision bf16` (bf16 compute on f32 master weights; its products go to
the runtime's bf16 GEMM, which is oneDNN's on this machine: Debian's
OpenBLAS has no cblas_sbgemm), and PyTorch runs forward and loss under
torch.autocast("cpu", dtype=torch.bfloat16) (its bf16 products are
oneDNN's too).
"""

import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"  # Debian's PyTorch 1.13

# name -> configuration. Larger than the tests' models so that a step takes
# long enough to time and the matrix products are realistic.
CONFIGS = {
    "mlp": {"layers": [1024, 4096, 4096, 1024], "batch": 256},
    "gpt": {"vocab": 8192, "block": 128, "embd": 256, "heads": 4,
            "layers": 4, "batch": 8},
    # An LSTM language model: embeddings, a 2-layer LSTM over 64 tokens
    # (ONNX LSTM nodes, weft.lstm's time loop), a vocabulary head.
    "lstm": {"vocab": 4096, "block": 64, "embd": 256, "hidden": 512,
             "layers": 2, "batch": 16},
    # A small CNN on 32x32 RGB images: two 3x3 convolutions (ReLU, 2x2 max
    # pooling) and a linear classifier.
    "cnn": {"channels": [3, 32, 64], "image": 32, "classes": 10,
            "batch": 64},
}

PRECISIONS = ("f32", "bf16")

LR = 1e-3


def add_run_options(parser, steps, warmup, repeat_help):
    """The options every bench script shares: what to run and how often."""
    parser.add_argument("--models", default="mlp,gpt")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--warmup", type=int, default=warmup)
    parser.add_argument("--repeat", type=int, default=2, help=repeat_help)
    parser.add_argument("--work",
                        help="working folder (default: a temporary one)")
    parser.add_argument("--weftc",
                        default=os.path.join(ROOT, "build", "bin", "weftc"))


def recompute_flags(mode):
    """weftc's flags for a recomputation mode as weft-plan --recompute
    spells it: none, selective, full, or full:K (the first K layers, named
    h.0 .. h.K-1 as the bench GPTs' parameters number them)."""
    if mode.startswith("full:"):
        k = int(mode.split(":")[1])
        return ["--recompute=full", "--recompute-layers=" +
                ",".join("h.%d" % i for i in range(k))]
    return [] if mode == "none" else ["--recompute=" + mode]


def describe(name):
    c = CONFIGS[name]
    if name == "mlp":
        return "MLP %s (ReLU), batch %d, cross-entropy over %d classes" % (
            "-".join(map(str, c["layers"])), c["batch"], c["layers"][-1])
    if name == "cnn":
        ch = c["channels"]
        return ("CNN: %s conv3x3 + ReLU + maxpool2 on %dx%d images, linear to "
                "%d classes, batch %d" % ("-".join(map(str, ch)), c["image"],
                                          c["image"], c["classes"], c["batch"]))
    if name == "lstm":
        return ("LSTM language model: embedding %d, %d LSTM layers of %d, T %d, "
                "vocab %d, batch %d" % (c["embd"], c["layers"], c["hidden"],
                                        c["block"], c["vocab"], c["batch"]))
    return ("GPT decoder: %d layers, d_model %d, %d heads, T %d, vocab %d, "
            "batch %d (tied embeddings)" % (c["layers"], c["embd"], c["heads"],
                                           c["block"], c["vocab"], c["batch"]))


def build_model(name):
    """The PyTorch module, deterministic given the seed."""
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    c = CONFIGS[name]
    if name == "mlp":
        dims = c["layers"]
        layers = []
        for i in range(len(dims) - 1):
            layers.append(nn.Linear(dims[i], dims[i + 1]))
            if i + 2 < len(dims):
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)
    if name == "cnn":
        ch = c["channels"]
        layers = []
        for i in range(len(ch) - 1):
            layers += [nn.Conv2d(ch[i], ch[i + 1], 3, padding=1), nn.ReLU(),
                       nn.MaxPool2d(2)]
        side = c["image"] >> (len(ch) - 1)
        layers += [nn.Flatten(), nn.Linear(ch[-1] * side * side, c["classes"])]
        return nn.Sequential(*layers)
    if name == "lstm":
        class LstmLm(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(c["vocab"], c["embd"])
                self.rnn = nn.LSTM(c["embd"], c["hidden"],
                                   num_layers=c["layers"], batch_first=True)
                self.head = nn.Linear(c["hidden"], c["vocab"])

            def forward(self, idx):
                y, _ = self.rnn(self.emb(idx))
                return self.head(y)
        return LstmLm()
    sys.path.insert(0, os.path.join(ROOT, "examples", "models"))
    from export import GPT, make_params_distinct
    model = GPT(vocab=c["vocab"], block_size=c["block"], n_embd=c["embd"],
                n_head=c["heads"], n_layer=c["layers"])
    make_params_distinct(model, 0)
    return model


def example_input(name):
    import torch

    c = CONFIGS[name]
    if name == "mlp":
        return torch.zeros(c["batch"], c["layers"][0])
    if name == "cnn":
        return torch.zeros(c["batch"], c["channels"][0], c["image"], c["image"])
    return torch.zeros(c["batch"], c["block"], dtype=torch.int64)


def export(name, work):
    """Writes work/NAME.onnx (constant folding on, as users export)."""
    import torch

    path = os.path.join(work, name + ".onnx")
    model = build_model(name)
    model.eval()
    with torch.enable_grad():
        torch.onnx.export(model, (example_input(name),), path,
                          export_params=True, opset_version=17,
                          do_constant_folding=True, input_names=["input"],
                          output_names=["output"])
    return path


def write_data(name, work, steps):
    """Training data for `steps` batches, read in file order (--no-shuffle)
    by both sides: .npy arrays for the mlp and the cnn, a raw uint16 token
    stream (the nanoGPT format) for the gpt."""
    import numpy as np

    c = CONFIGS[name]
    rng = np.random.default_rng(1)
    if name in ("mlp", "cnn"):
        n = steps * c["batch"]
        if name == "mlp":
            shape, classes = (n, c["layers"][0]), c["layers"][-1]
        else:
            shape = (n, c["channels"][0], c["image"], c["image"])
            classes = c["classes"]
        x = rng.standard_normal(shape, dtype=np.float32)
        y = rng.integers(0, classes, n).astype(np.int64)
        np.save(os.path.join(work, "x.npy"), x)
        np.save(os.path.join(work, "y.npy"), y)
        return ["--data", os.path.join(work, "x.npy"),
                "--labels", os.path.join(work, "y.npy")]
    n = steps * c["batch"] * c["block"] + 1
    rng.integers(0, c["vocab"], n).astype("<u2").tofile(
        os.path.join(work, "tokens.bin"))
    return ["--data", os.path.join(work, "tokens.bin")]


def compile_exe(name, work, weftc, precision="f32", extra=()):
    """`extra`: more weftc flags (bench/train_step.py --weftc-arg)."""
    onnx_path = os.path.join(work, name + ".onnx")
    exe = os.path.join(work, "train_" + name)
    flags = list(extra)
    if precision != "f32":
        exe += "_" + precision
        flags += ["--precision", precision]
    start = time.time()
    subprocess.run([weftc, onnx_path, "--emit=exe", "--optimizer", "adamw",
                    "-o", exe] + flags, check=True, stderr=subprocess.DEVNULL)
    return exe, time.time() - start


def cpu_seconds(command, env):
    """User + system CPU seconds `command` (run to completion, stdout
    dropped) spent: steadier than wall time on a shared machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime +
                                                before.ru_stime)


def thread_env(threads, extra=None):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    env.update(extra or {})
    return env


def finish(results, json_path):
    """Ends a benchmark: the load at the end, and the results as JSON when
    asked for (--json). Returns the exit code."""
    print_load("end")
    if json_path:
        with open(json_path, "w") as f:
            json.dump(results, f, indent=1)
    return 0


def print_load(when):
    """Other processes on the machine distort the timings, the two-thread
    ones most: print the load average so that a run can be judged, and, at
    the start, which OpenBLAS kernels run (OPENBLAS_CORETYPE pins them; on
    the development machine the environment sets it to Haswell, half the
    speed of the AVX-512 kernels OpenBLAS picks by itself)."""
    print("-- load average at %s: %.2f %.2f %.2f (1, 5, 15 min; %d cores)"
          % ((when,) + os.getloadavg() + (os.cpu_count(),)), flush=True)
    if when == "start":
        import ctypes
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        lib.openblas_get_config.restype = ctypes.c_char_p
        print("-- %s, kernels %s; %s" % (
            lib.openblas_get_config().decode(),
            lib.openblas_get_corename().decode(),
            ", ".join("%s=%s" % kv for kv in sorted(os.environ.items())
                      if kv[0].startswith("OPENBLAS_")) or "no OPENBLAS_*"),
            flush=True)


def best_of(repeat, run):
    """Calls run() `repeat` times and keeps the result with the lowest median
    step time (other processes only ever slow a run down), recording every
    median under "medians_ms"."""
    results = [run() for _ in range(repeat)]
    best = min(results, key=lambda r: r["median_ms"])
    best["medians_ms"] = [r["median_ms"] for r in results]
    return best


def summarize(times, warmup):
    """Median and minimum step time in ms after `warmup` steps."""
    steady = times[warmup:] if len(times) > warmup else times
    return {"median_ms": 1e3 * statistics.median(steady),
            "min_ms": 1e3 * min(steady), "steps_timed": len(steady)}


def run_weft(exe, data_args, work, steps, threads, warmup, env_extra=None):
    metrics = os.path.join(work, "metrics-%s-%d.jsonl"
                           % (os.path.basename(exe), threads))
    if os.path.exists(metrics):
        os.remove(metrics)
    subprocess.run([exe] + data_args +
                   ["--steps", str(steps), "--lr", str(LR), "--no-shuffle",
                    "--threads", str(threads), "--log-every", "100000",
                    "--metrics", metrics],
                   check=True, stdout=subprocess.DEVNULL,
                   env=thread_env(threads, env_extra))
    with open(metrics) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    result = summarize([m["step_time_s"] for m in lines], warmup)
    result["data_wait_ms"] = 1e3 * statistics.median(
        [m["data_wait_s"] for m in lines[warmup:]])
    result["losses"] = [m["loss"] for m in lines]
    return result


def run_torch(name, work, steps, threads, warmup, env_extra=None,
              omp_threads=None, precision="f32"):
    """Runs torch_step() below in a fresh interpreter whose OpenMP and
    OpenBLAS thread counts are set before PyTorch loads (both `threads`,
    or OpenMP `omp_threads` when given)."""
    omp = threads if omp_threads is None else omp_threads
    out = os.path.join(work, "torch-%s-%d-%d.json" % (precision, threads, omp))
    # The model's configuration as this process has it (bench/train_step.py
    # --seq changes the GPT's).
    code = ("import sys; sys.path.insert(0, %r); import common; "
            "common.CONFIGS[%r].update(%r); "
            "common.torch_step(%r, %r, %d, %d, %r, %r)"
            % (HERE, name, CONFIGS[name], name, work, steps, omp, out,
               precision))
    env = thread_env(threads, env_extra)
    env["OMP_NUM_THREADS"] = str(omp)
    subprocess.run([PYTHON, "-c", code], check=True, env=env)
    with open(out) as f:
        times, losses = json.load(f)
    result = summarize(times, warmup)
    result["losses"] = losses
    return result


def torch_step(name, work, steps, threads, out, precision="f32"):
    """PyTorch's training loop over the same batches as the executable's,
    timing each step from batch to updated parameters. In bf16, forward
    and loss run under CPU autocast to bfloat16 (parameters, gradients and
    optimizer state stay f32, as in Weft's --precision bf16)."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    model = build_model(name)
    model.eval()  # as exported; neither model has dropout
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    c = CONFIGS[name]
    b = c["batch"]
    if name in ("mlp", "cnn"):
        xs = torch.from_numpy(np.load(os.path.join(work, "x.npy")))
        ys = torch.from_numpy(np.load(os.path.join(work, "y.npy")))

        def batch(s):
            return xs[s * b:(s + 1) * b], ys[s * b:(s + 1) * b]
    else:
        t = c["block"]
        tokens = torch.from_numpy(np.fromfile(
            os.path.join(work, "tokens.bin"), dtype="<u2").astype(np.int64))

        def batch(s):
            first = s * b * t
            x = tokens[first:first + b * t].view(b, t)
            y = tokens[first + 1:first + b * t + 1].view(b, t)
            return x, y

    times, losses = [], []
    for s in range(steps):
        start = time.perf_counter()
        x, y = batch(s)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16,
                            enabled=precision == "bf16"):
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                   y.reshape(-1))
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    with open(out, "w") as f:
        json.dump([times, losses], f)


def matmul_flops(name):
    """FLOPs (2 per multiply-add) of the matrix products one training step
    needs: forward, weight gradients and input gradients (none for the
    mlp's and the cnn's first layer, whose input is data; the gpt's
    embedding lookups are not products; the cnn's convolutions count as
    products)."""
    c = CONFIGS[name]
    if name == "cnn":
        ch, side, b = c["channels"], c["image"], c["batch"]
        convs = []
        for i in range(len(ch) - 1):
            convs.append(2 * b * side * side * ch[i] * ch[i + 1] * 9)
            side //= 2
        head = 2 * b * ch[-1] * side * side * c["classes"]
        return 3 * (sum(convs) + head) - convs[0]
    if name == "mlp":
        b, dims = c["batch"], c["layers"]
        fwd = sum(2 * b * dims[i] * dims[i + 1] for i in range(len(dims) - 1))
        first = 2 * b * dims[0] * dims[1]
        return 3 * fwd - first
    if name == "lstm":
        # Per layer the input projection and the recurrent product (4 gates),
        # then the head; backward doubles each.
        bt, e, h, v = c["batch"] * c["block"], c["embd"], c["hidden"], c["vocab"]
        fwd = 2 * bt * 4 * h * (e + h) + (c["layers"] - 1) * 2 * bt * 4 * h * 2 * h
        fwd += 2 * bt * h * v
        return 3 * fwd
    bt, d, t, v = c["batch"] * c["block"], c["embd"], c["block"], c["vocab"]
    per_layer = 2 * bt * (3 * d * d + d * d + 4 * d * d + 4 * d * d)
    attention = 2 * 2 * c["batch"] * t * t * d  # q k^T and att v, all heads
    fwd = c["layers"] * (per_layer + attention) + 2 * bt * d * v
    return 3 * fwd
