#!/usr/bin/python3
"""Training fidelity: does Weft train what PyTorch trains?

Usage:
  fidelity.py MODEL... --out DIR --weftc WEFTC [--exports eval,train]
      [--opset N] [--optimizers sgd,adamw] [--steps 10] [--plain | --fold]
      [--sgd-lr LR] [--adamw-lr LR] [--rtol R]

For each export mode of each MODEL (test/lib/fidelity_models.py, or
zoo:NAME for examples/models/zoo.py's NAME) this does what a user does:
builds the model with PyTorch's default initialization and exports it, then
for each optimizer compiles it with `weftc MODEL.onnx -o train`, trains the
executable for --steps steps on fixed batches, and compares with PyTorch
training the same model in train mode on the same batches. Exports:

  --plain   torch.onnx.export alone: "eval" is `model.eval()` and the
            defaults, "train" is training=TrainingMode.TRAINING;
  (default) python/weft_export.py: "eval" calls it on a model in eval mode
            (it exports the training graph), "train" as above;
  --fold    the helper with torch.onnx.export's defaults (eval mode,
            constant folding), so weights come out folded and renamed.

Checks:
- every step's loss (from --metrics) within --rtol (1e-5) of PyTorch f32;
- every parameter, and every buffer PyTorch's training changes (BatchNorm's
  running statistics), by PyTorch's state_dict name in the final checkpoint
  (with --plain, those the export kept the name of), against PyTorch
  computed in float64, within max(rtol, 10 x PyTorch f32's own error
  against float64): a tensor whose update is decided by rounding noise (a
  key bias's structurally zero gradient under AdamW) cannot be closer to
  PyTorch than PyTorch f32 is.

Prints one line per run: MODEL EXPORT OPTIMIZER: losses <err>, params <err>
(<n> tensors) and "ok" or FAIL with the worst tensors, or the error of a
tool that failed. Exit 1 if any run failed, 2 if a tool failed.

Needs torch 1.13, onnx and numpy: Debian's /usr/bin/python3.
"""

import argparse
import copy
import json
import os
import shutil
import struct
import subprocess
import sys
import warnings

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "models"))
import fidelity_models  # noqa: E402
import zoo  # noqa: E402


def zoo_model(name):
    """examples/models/zoo.py's NAME as a fidelity model: its input, and an
    MSE loss against random targets of its output's shape. Dropout is set to
    p = 0, the only rate at which two frameworks' train modes can agree."""
    zoo_cls = zoo.MODELS[name]

    class cls(zoo_cls):
        def __init__(self):
            super().__init__()
            for m in self.modules():
                if isinstance(m, torch.nn.Dropout):
                    m.p = 0.0
                if isinstance(m, torch.nn.MultiheadAttention):
                    m.dropout = 0.0
                if isinstance(m, torch.nn.TransformerEncoderLayer):
                    m.dropout.p = m.dropout1.p = m.dropout2.p = 0.0

    if zoo.batch_dim(zoo_cls) != 0:
        sys.exit("error: zoo model %s is not batch-first" % name)

    def make_batch(batch, g):
        x = zoo.make_input(zoo_cls, batch, int(torch.randint(0, 1 << 30, (1,), generator=g)))
        with torch.no_grad():
            shape = cls()(x).shape
        return x, torch.randn(shape, generator=g)
    return cls, make_batch, "mse"

BATCH = 4
LR = {"sgd": 0.05, "adamw": 0.003}
SAFETENSORS_DTYPES = {"F64": np.float64, "F32": np.float32, "I64": np.int64,
                      "I32": np.int32}


class ToolFailed(Exception):
    pass


def export(model, x, path, mode, opset, plain, fold):
    """Exports as a user would: `model.eval()` and the export's defaults, or
    training=TrainingMode.TRAINING. Through the helper, "eval" leaves the
    mode to the helper (its default is the training graph) unless `fold`
    asks for torch.onnx.export's defaults (eval mode, constant folding)."""
    kwargs = {}
    if opset is not None:
        kwargs["opset_version"] = opset
    if mode == "train":
        kwargs["training"] = torch.onnx.TrainingMode.TRAINING
        model.train()
    else:
        model.eval()
        if fold:
            kwargs["training"] = torch.onnx.TrainingMode.EVAL
    if fold:
        kwargs["do_constant_folding"] = True
    if plain:
        torch.onnx.export(model, (x,), path, input_names=["input"],
                          output_names=["output"], **kwargs)
    else:
        import weft_export
        weft_export.export(model, (x,), path, input_names=["input"],
                           output_names=["output"], **kwargs)


def make_optimizer(kind, params):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=LR[kind], momentum=0.9, foreach=False)
    return torch.optim.AdamW(params, lr=LR[kind], foreach=False)


def loss_of(kind, out, y):
    if kind == "cross-entropy":
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    return F.mse_loss(out, y)


def train_torch(model, batches, loss_kind, optimizer, dtype):
    """PyTorch train mode; returns (losses, {state_dict name: array})."""
    model = copy.deepcopy(model)
    if dtype == torch.float64:
        model.double()
    model.train()
    opt = make_optimizer(optimizer, model.parameters())
    losses = []
    for x, y in batches:
        if x.is_floating_point():
            x = x.to(dtype)
        if y.is_floating_point():
            y = y.to(dtype)
        opt.zero_grad(set_to_none=True)
        loss = loss_of(loss_kind, model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    state = {k: v.detach().numpy().astype(np.float64)
             for k, v in model.state_dict(keep_vars=False).items()
             if v.is_floating_point()}
    return losses, state


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] not in SAFETENSORS_DTYPES:
            continue
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], SAFETENSORS_DTYPES[info["dtype"]]) \
            .reshape(info["shape"]).astype(np.float64)
    return out


def run(cmd, log):
    with open(log, "w") as f:
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        with open(log) as f:
            tail = f.read()[-3000:]
        raise ToolFailed("%s exited %d:\n%s" % (" ".join(cmd), p.returncode, tail))


def rel(a, e):
    scale = max(float(np.max(np.abs(e))) if e.size else 0.0, 1e-30)
    return float(np.max(np.abs(a - e))) / scale if e.size else 0.0


def weft_run(args, onnx_path, tag, optimizer, loss_kind, xs, ys, steps):
    exe = os.path.join(args.out, tag + ".exe")
    cmd = [args.weftc, onnx_path, "--emit=exe", "--optimizer", optimizer, "--loss", loss_kind,
           "-o", exe]
    if optimizer == "sgd":
        cmd += ["--momentum", "0.9"]
    cmd += args.weftc_arg
    run(cmd, os.path.join(args.out, tag + ".weftc.log"))
    ckpt = os.path.join(args.out, tag + ".ckpt")
    metrics = os.path.join(args.out, tag + ".jsonl")
    shutil.rmtree(ckpt, ignore_errors=True)
    if os.path.exists(metrics):
        os.remove(metrics)
    run([exe, "--data", xs, "--labels", ys, "--steps", str(steps),
         "--lr", repr(LR[optimizer]), "--no-shuffle", "--metrics", metrics,
         "--checkpoint-dir", ckpt], os.path.join(args.out, tag + ".run.log"))
    losses = {}
    with open(metrics) as f:
        for line in f:
            rec = json.loads(line)
            if "loss" in rec and "step" in rec:
                losses[rec["step"]] = rec["loss"]
    final = os.path.join(ckpt, "step-%08d" % steps, "model.safetensors")
    return [losses.get(s + 1) for s in range(steps)], read_safetensors(final)


def check(args, name, mode, optimizer, model, batches, loss_kind, onnx_path):
    tag = "%s-%s-%s" % (name.replace(":", "-"), mode, optimizer)
    xs = os.path.join(args.out, tag + ".x.npy")
    ys = os.path.join(args.out, tag + ".y.npy")
    np.save(xs, torch.cat([x for x, _ in batches]).numpy())
    np.save(ys, torch.cat([y for _, y in batches]).numpy())
    t32_losses, t32 = train_torch(model, batches, loss_kind, optimizer, torch.float32)
    _, t64 = train_torch(model, batches, loss_kind, optimizer, torch.float64)
    w_losses, w = weft_run(args, onnx_path, tag, optimizer, loss_kind, xs, ys,
                           len(batches))

    failures = []
    if any(v is None for v in w_losses):
        failures.append("metrics lack steps %s" % [s + 1 for s, v in enumerate(w_losses) if v is None])
        loss_err = float("inf")
    else:
        loss_err = rel(np.array(w_losses), np.array(t32_losses))
        if not np.isfinite(loss_err) or loss_err > args.rtol:
            worst = int(np.argmax(np.abs(np.array(w_losses) - np.array(t32_losses))))
            failures.append("loss of step %d: weft %.8g, torch %.8g"
                            % (worst + 1, w_losses[worst], t32_losses[worst]))

    # Parameters by PyTorch's name (a tied tensor under any of its names),
    # and the buffers PyTorch's training changes.
    init = {k: v.detach().numpy().astype(np.float64)
            for k, v in model.state_dict().items() if v.is_floating_point()}
    tied = {}
    for pname, prm in model.state_dict(keep_vars=True).items():
        if isinstance(prm, torch.nn.Parameter):
            tied.setdefault(id(prm), []).append(pname)
    expected = [names for names in tied.values()]
    expected += [[k] for k, v in t64.items()
                 if all(k not in n for n in expected) and not np.array_equal(v, init[k])]
    worst_err, worst_name = 0.0, None
    for names in expected:
        found = [n for n in names if n in w]
        if not found:
            # A plain export may rename a parameter (constant folding makes
            # `onnx::MatMul_N` copies); the losses still cover it.
            if not args.plain:
                failures.append("checkpoint has no tensor %s" % " or ".join(names))
            continue
        n = found[0]
        if w[n].shape != t64[n].shape:
            failures.append("%s: shape %s, PyTorch %s" % (n, w[n].shape, t64[n].shape))
            continue
        err = rel(w[n], t64[n])
        tol = max(args.rtol, 10 * rel(t32[n], t64[n]))
        if not np.isfinite(err) or err > tol:
            failures.append("%s: error %.3g > %.3g" % (n, err, tol))
        if err > worst_err or worst_name is None:
            worst_err, worst_name = err, n
    print("%s %s %s: losses %.2g, params %.2g (%d tensors, worst %s) %s"
          % (name, mode, optimizer, loss_err, worst_err, len(expected), worst_name,
             "ok" if not failures else "FAIL"))
    for f in failures[:8]:
        print("  " + f)
    return not failures


def run_model(p, args, name):
    if name.startswith("zoo:"):
        ctor, make_batch, loss_kind = zoo_model(name[4:])
    elif name in fidelity_models.MODELS:
        ctor, make_batch, loss_kind = fidelity_models.MODELS[name]
    else:
        p.error("unknown model %s" % name)
    torch.manual_seed(0)
    model = ctor()
    g = torch.Generator().manual_seed(1)
    batches = [make_batch(BATCH, g) for _ in range(args.steps)]

    status = 0
    for mode in args.exports.split(","):
        onnx_path = os.path.join(args.out, "%s-%s.onnx" % (name.replace(":", "-"), mode))
        # Tracing in train mode runs BatchNorm, which updates its running
        # statistics: PyTorch then trains on from the model as exported,
        # exactly as a user's model continues after torch.onnx.export.
        exported = copy.deepcopy(model)
        with warnings.catch_warnings():
            # The exporter's advice on constant folding and in-place ops.
            warnings.simplefilter("ignore")
            export(exported, batches[0][0], onnx_path, mode,
                   args.opset, args.plain, args.fold)
        for optimizer in args.optimizers.split(","):
            try:
                if not check(args, name, mode, optimizer, exported, batches,
                             loss_kind, onnx_path):
                    status = max(status, 1)
            except ToolFailed as e:
                print("%s %s %s: error: %s" % (name, mode, optimizer, e))
                status = 2
    return status


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+", metavar="MODEL",
                   help="a model of test/lib/fidelity_models.py "
                   "(%s), or zoo:NAME for examples/models/zoo.py's NAME"
                   % ", ".join(sorted(fidelity_models.MODELS)))
    p.add_argument("--out", required=True)
    p.add_argument("--weftc", required=True)
    p.add_argument("--exports", default="eval,train")
    p.add_argument("--optimizers", default="sgd,adamw")
    p.add_argument("--opset", type=int, default=None,
                   help="ONNX opset (default: the exporter's)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--sgd-lr", type=float, default=LR["sgd"])
    p.add_argument("--adamw-lr", type=float, default=LR["adamw"])
    p.add_argument("--weftc-arg", action="append", default=[],
                   help="one more weftc flag for every compile, e.g. "
                   "--weftc-arg=--recurrent-activations=recompute")
    p.add_argument("--plain", action="store_true",
                   help="export with torch.onnx.export alone, no metadata")
    p.add_argument("--fold", action="store_true",
                   help="export through the helper with torch's defaults: "
                   "constant folding, and in eval mode TrainingMode.EVAL")
    args = p.parse_args(argv)
    LR.update(sgd=args.sgd_lr, adamw=args.adamw_lr)
    os.makedirs(args.out, exist_ok=True)

    status = 0
    for name in args.models:
        status = max(status, run_model(p, args, name))
    return status


if __name__ == "__main__":
    sys.exit(main())
