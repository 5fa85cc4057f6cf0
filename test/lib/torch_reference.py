#!/usr/bin/python3
"""PyTorch reference numbers for Weft's training-step tests.

Usage:
  torch_reference.py COMMAND ARGS... [+ COMMAND ARGS...]...

  torch_reference.py export MODEL --out DIR [export.py options]
  torch_reference.py grads MODEL --onnx F --input X.npy --out DIR
      [--loss cross-entropy|mse] [--seed S]
  torch_reference.py train MODEL --onnx F --out DIR [--steps 10]
      [--optimizer sgd|adamw] [--lr LR] [--momentum M] [--nesterov]
      [--weight-decay W] [--beta1 B1] [--beta2 B2] [--eps E]
      [--clip-norm C] [--accum-steps K] [--lr-schedule constant|warmup|cosine]
      [--warmup-steps W] [--total-steps T] [--min-lr-ratio R]
      [--loss cross-entropy|mse] [--same-batch] [--seed S]

Several commands separated by `+` run in one process, which saves a
PyTorch import (about a second) per command. export runs
examples/models/export.py.

Rebuilds MODEL with examples/models/export.py's builders and loads every
parameter (and buffer) from the ONNX file's initializers by name, so the
numbers are the exported ones. That needs an export with
--no-constant-folding, which keeps PyTorch's names.

grads writes DIR/labels.npy (deterministic), DIR/loss.npy and
DIR/grad.<param>.npy from torch.autograd; the loss is
F.cross_entropy(out.reshape(-1, C), y.reshape(-1)) or F.mse_loss(out, y),
as --weft-attach-loss builds it.

train writes deterministic batches DIR/input_<s>.npy and DIR/labels_<s>.npy
(K micro-batches of the exported batch size along axis 0 with
--accum-steps K), runs torch.optim (foreach=False) with
clip_grad_norm_ and a LambdaLR using Weft's schedule formula, and writes
DIR/ref/loss_<s>.npy (the loss of step s, before its update, averaged over
micro-batches), DIR/ref/lr_<s>.npy (the learning rate step s used), the
final parameters DIR/ref/<name>.npy and optimizer state
DIR/ref/<key>.<name>.npy (momentum_buffer, exp_avg, exp_avg_sq: the names of
Weft's weft.state arguments).

Needs torch (1.13), onnx and numpy: Debian's /usr/bin/python3.
"""

import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "examples", "models"))
import export  # noqa: E402  (examples/models/export.py)


def load_model(name, onnx_path, dtype="float32"):
    """export.MODELS[name] with every parameter and buffer taken from the
    ONNX initializer of the same name."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(onnx_path).graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    model = export.MODELS[name]()
    missing = []
    with torch.no_grad():
        for pname, prm in model.named_parameters():
            if pname not in inits:
                missing.append(pname)
                continue
            value = torch.from_numpy(np.array(inits[pname]))
            if tuple(value.shape) != tuple(prm.shape):
                sys.exit("error: %s: initializer %s has shape %s, the model's "
                         "parameter %s" % (onnx_path, pname,
                                           tuple(value.shape), tuple(prm.shape)))
            prm.copy_(value)
        for bname, buf in model.named_buffers():
            if bname in inits:
                buf.copy_(torch.from_numpy(np.array(inits[bname])).reshape(buf.shape))
    if missing:
        sys.exit("error: %s has no initializer for parameter(s) %s; export "
                 "with --no-constant-folding to keep PyTorch's names"
                 % (onnx_path, ", ".join(missing)))
    # As exported; the models have no dropout, and with autograd on the
    # encoder takes its plain (non-fused) path.
    model.eval()
    if dtype == "float64":
        model.double()
    return model, graph


def loss_fn(kind, out, y):
    if kind == "cross-entropy":
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    return F.mse_loss(out, y)


def make_labels(kind, out_shape, seed):
    """Deterministic labels for an output of out_shape."""
    g = torch.Generator().manual_seed(seed)
    if kind == "cross-entropy":
        return torch.randint(0, out_shape[-1], tuple(out_shape[:-1]),
                             generator=g, dtype=torch.int64)
    return torch.randn(tuple(out_shape), generator=g, dtype=torch.float32)


def as_dtype(t, dtype):
    """Float tensors in the reference's precision; integers stay."""
    if dtype == "float64" and t.is_floating_point():
        return t.double()
    return t


def save(path, tensor):
    np.save(path, tensor.detach().cpu().numpy())


# --------------------------------------------------------------------------
def cmd_grads(args):
    model, _ = load_model(args.model, args.onnx, args.dtype)
    x = as_dtype(torch.from_numpy(np.load(args.input)), args.dtype)
    os.makedirs(args.out, exist_ok=True)
    out = model(x)
    y = as_dtype(make_labels(args.loss, out.shape, args.seed), args.dtype)
    loss = loss_fn(args.loss, out, y)
    loss.backward()
    save(os.path.join(args.out, "labels.npy"), y)
    save(os.path.join(args.out, "loss.npy"), loss)
    for pname, prm in model.named_parameters():
        grad = prm.grad if prm.grad is not None else torch.zeros_like(prm)
        save(os.path.join(args.out, "grad.%s.npy" % pname), grad)
    print("grads %s: loss %.6f, %d parameters -> %s"
          % (args.model, loss.item(), len(list(model.parameters())), args.out))
    return 0


def lr_factor(step, schedule, warmup, total, min_ratio):
    """Weft's schedule (lib/Transforms/Train/OptimizerSteps.cpp, scheduleLearningRate) for the 0-based step."""
    if schedule == "constant":
        return 1.0
    warm = min(1.0, (step + 1) / warmup) if warmup > 0 else 1.0
    if schedule == "warmup" or step < warmup:
        return warm
    progress = min(1.0, (step - warmup) / (total - warmup))
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


# torch.optim state tensors that Weft's train_step carries as weft.state.
STATE_KEYS = ("momentum_buffer", "exp_avg", "exp_avg_sq")


def batch_size(graph, model_name):
    dims = graph.input[0].type.tensor_type.shape.dim
    if not dims or not dims[0].HasField("dim_value"):
        sys.exit("error: %s's input has a dynamic batch; export without "
                 "--dynamic-batch" % model_name)
    return dims[0].dim_value


def cmd_train(args):
    model, graph = load_model(args.model, args.onnx, args.dtype)
    micro = batch_size(graph, args.model)
    k = args.accum_steps
    ref = os.path.join(args.out, "ref")
    os.makedirs(ref, exist_ok=True)

    params = list(model.parameters())  # a tied tensor once
    if args.optimizer == "sgd":
        wd = 0.0 if args.weight_decay is None else args.weight_decay
        opt = torch.optim.SGD(params, lr=args.lr, momentum=args.momentum,
                              nesterov=args.nesterov, weight_decay=wd,
                              foreach=False)
    else:
        wd = 0.01 if args.weight_decay is None else args.weight_decay
        opt = torch.optim.AdamW(params, lr=args.lr, betas=(args.beta1, args.beta2),
                                eps=args.eps, weight_decay=wd, foreach=False)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_factor(s, args.lr_schedule, args.warmup_steps,
                                 args.total_steps, args.min_lr_ratio))

    out_shape = None
    clipped = []
    for s in range(args.steps):
        seed = args.seed + (0 if args.same_batch else s)
        x = export.make_input(args.model, micro * k, seed)
        if out_shape is None:
            with torch.no_grad():
                out_shape = list(model(x[:1]).shape)
        y = make_labels(args.loss, [micro * k] + out_shape[1:], seed + 7919)
        np.save(os.path.join(args.out, "input_%d.npy" % s), x.numpy())
        np.save(os.path.join(args.out, "labels_%d.npy" % s), y.numpy())
        x, y = as_dtype(x, args.dtype), as_dtype(y, args.dtype)

        opt.zero_grad(set_to_none=True)
        losses = []
        for j in range(k):
            part = slice(j * micro, (j + 1) * micro)
            loss = loss_fn(args.loss, model(x[part]), y[part])
            (loss / k).backward()
            losses.append(loss.detach())
        np.save(os.path.join(ref, "loss_%d.npy" % s),
                np.float32(torch.stack(losses).mean().item()))
        np.save(os.path.join(ref, "lr_%d.npy" % s),
                np.float32(opt.param_groups[0]["lr"]))
        if args.clip_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, args.clip_norm)
            if norm.item() > args.clip_norm:
                clipped.append(s)
        opt.step()
        sched.step()

    for pname, prm in model.named_parameters():
        save(os.path.join(ref, "%s.npy" % pname), prm)
        # Optimizer state under Weft's weft.state names: <torch key>.<param>.
        for key, value in opt.state[prm].items():
            if key in STATE_KEYS and value is not None:
                save(os.path.join(ref, "%s.%s.npy" % (key, pname)), value)
    print("train %s: %s, %d steps of %d x %d, losses %s -> %s"
          % (args.model, args.optimizer, args.steps, k, micro,
             " ".join("%.4f" % float(np.load(os.path.join(ref, "loss_%d.npy" % s)))
                      for s in range(args.steps)), ref))
    if args.clip_norm > 0:
        # Tests check this line so that clipping is known to take effect.
        print("clipped %d of %d steps" % (len(clipped), args.steps))
    return 0


def make_parser():
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        usage="%(prog)s {export,grads,train} ... [+ {export,grads,train} ...]")
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="run examples/models/export.py",
                       add_help=False)
    e.add_argument("export_args", nargs=argparse.REMAINDER)

    def common(q):
        q.add_argument("model", choices=sorted(export.MODELS))
        q.add_argument("--onnx", required=True,
                       help="the model exported with --no-constant-folding")
        q.add_argument("--out", required=True, help="output directory")
        q.add_argument("--loss", choices=["cross-entropy", "mse"],
                       default="cross-entropy")
        q.add_argument("--seed", type=int, default=0)
        q.add_argument("--dtype", choices=["float32", "float64"],
                       default="float32",
                       help="precision of the reference computation")

    g = sub.add_parser("grads", help="loss and parameter gradients on one batch")
    common(g)
    g.add_argument("--input", required=True, help="input batch (.npy)")

    t = sub.add_parser("train", help="a training run with torch.optim")
    common(t)
    t.add_argument("--steps", type=int, default=10)
    t.add_argument("--optimizer", choices=["sgd", "adamw"], default="adamw")
    t.add_argument("--lr", type=float, default=0.01)
    t.add_argument("--momentum", type=float, default=0.0)
    t.add_argument("--nesterov", action="store_true")
    t.add_argument("--weight-decay", type=float, default=None,
                   help="default: 0 for sgd, 0.01 for adamw (as weftc)")
    t.add_argument("--beta1", type=float, default=0.9)
    t.add_argument("--beta2", type=float, default=0.999)
    t.add_argument("--eps", type=float, default=1e-8)
    t.add_argument("--clip-norm", type=float, default=0.0)
    t.add_argument("--accum-steps", type=int, default=1)
    t.add_argument("--lr-schedule", choices=["constant", "warmup", "cosine"],
                   default="constant")
    t.add_argument("--warmup-steps", type=int, default=0)
    t.add_argument("--total-steps", type=int, default=0)
    t.add_argument("--min-lr-ratio", type=float, default=0.0)
    t.add_argument("--same-batch", action="store_true",
                   help="train every step on the same batch")

    return p


def run(p, argv):
    args = p.parse_args(argv)
    if args.command == "export":
        return export.main(args.export_args)
    torch.manual_seed(args.seed)
    if args.command == "grads":
        return cmd_grads(args)
    if args.accum_steps < 1 or args.steps < 1:
        p.error("--steps and --accum-steps must be >= 1")
    if args.lr_schedule == "cosine" and args.total_steps <= args.warmup_steps:
        p.error("the cosine schedule needs --total-steps > --warmup-steps")
    return cmd_train(args)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = make_parser()
    commands = [[]]
    for arg in argv:
        if arg == "+":
            commands.append([])
        else:
            commands[-1].append(arg)
    # Parse everything first so that a typo fails before any work is done.
    for command in commands:
        if command and command[0] != "export":
            p.parse_args(command)
    for command in commands:
        status = run(p, command)
        if status:
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
