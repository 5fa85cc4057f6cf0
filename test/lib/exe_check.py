#!/usr/bin/python3
"""Helpers for the tests of Weft's training executables (test/e2e/exe).

Usage:
  exe_check.py COMMAND ARGS... [+ COMMAND ARGS...]...

  exe_check.py concat RUN_DIR --steps N --data OUT.npy --labels OUT.npy
  exe_check.py losses METRICS.jsonl REF_DIR [--rtol 1e-4] [--lr]
  exe_check.py params MODEL.safetensors REF_DIR [--rtol 1e-4]
  exe_check.py same-metrics A.jsonl B.jsonl
  exe_check.py same-tensors A.safetensors B.safetensors
  exe_check.py damage FILE (--truncate BYTES | --flip OFFSET)
  exe_check.py npy OUT.npy --shape D0,D1,... [--dtype float32] [--value V]
      [--high H]
  exe_check.py tokens gpt --onnx F --out DIR --tokens N --steps K --lr LR
      [--seed S]

Several commands separated by `+` run in one process.

concat joins torch_reference.py's per-step batches RUN_DIR/input_<s>.npy and
RUN_DIR/labels_<s>.npy (s < N) along axis 0, so that with `--no-shuffle`
the executable's batch s is PyTorch's batch s.

losses compares the executable's `--metrics` file with PyTorch's
REF_DIR/loss_<s>.npy (metrics line with "step" s + 1) and, with --lr, the
learning rate with REF_DIR/lr_<s>.npy; every step must be within --rtol
(|a - e| / |e|), and the file must hold exactly the steps REF_DIR has.

params compares every tensor of REF_DIR (<param>.npy and optimizer state
<key>.<param>.npy, torch_reference.py's names; loss_*/lr_* are skipped) with
the tensor of the same name in a checkpoint's safetensors file, by
compare_npy.py's norm-style relative error.

same-metrics passes when both files have the same steps with the same
"loss" and "lr" (9 significant digits: the same float32 bits);
same-tensors when both files hold the same tensor names, dtypes, shapes and
bytes.

damage truncates FILE by BYTES or inverts the byte at OFFSET (negative:
from the end).

npy writes an array of the given shape and dtype: --value V everywhere, or
without it deterministic standard-normal floats / integers in [0, HIGH)
(--high, default 10).

tokens writes a token stream of N uint16 tokens three ways, DIR/llmc_0.bin
and DIR/llmc_1.bin (llm.c shards: a 256 x int32 header with magic
20240520, version 1, token count; the stream split in two so that windows
span the shards) and DIR/raw.bin (nanoGPT: bare uint16), then trains
PyTorch's model (weights from --onnx) for K steps of plain SGD on the
windows the runtime defines -- sample i is tokens [iT, iT+T) predicting
[iT+1, iT+T+1), batch b is samples [bB, (b+1)B) of (N-1)//T, wrapping to the
next epoch -- and writes DIR/ref/loss_<s>.npy and DIR/ref/lr_<s>.npy.

Exit status: 0 pass, 1 a check failed, 2 a file could not be read.
"""

import argparse
import fnmatch
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_npy import compare  # noqa: E402


class Failure(Exception):
    """A check failed (exit 1)."""


class Unreadable(Exception):
    """An input could not be read (exit 2)."""


# --------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------
SAFETENSORS_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U8": np.uint8, "BOOL": np.bool_,
}


def read_safetensors(path):
    """{name: (dtype string, shape, raw bytes)} in file order."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise Unreadable("%s: %s" % (path, e.strerror))
    if len(blob) < 8:
        raise Unreadable("%s: too short for a safetensors file" % path)
    (n,) = struct.unpack("<Q", blob[:8])
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"))
    except ValueError as e:
        raise Unreadable("%s: bad header: %s" % (path, e))
    data = blob[8 + n:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        tensors[name] = (info["dtype"], tuple(info["shape"]), data[begin:end])
    return tensors


def tensor_array(entry, name, path):
    dtype, shape, raw = entry
    if dtype == "BF16":
        bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    if dtype not in SAFETENSORS_DTYPES:
        raise Unreadable("%s: tensor %s has unsupported dtype %s"
                         % (path, name, dtype))
    return np.frombuffer(raw, dtype=SAFETENSORS_DTYPES[dtype]).reshape(shape)


def read_metrics(path):
    """The metrics lines as dicts keyed by step."""
    try:
        with open(path) as f:
            lines = [line for line in f if line.strip()]
    except OSError as e:
        raise Unreadable("%s: %s" % (path, e.strerror))
    by_step = {}
    for i, line in enumerate(lines):
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise Failure("%s:%d: not JSON: %s" % (path, i + 1, e))
        if obj["step"] in by_step:
            raise Failure("%s:%d: step %d appears twice"
                          % (path, i + 1, obj["step"]))
        by_step[obj["step"]] = obj
    return by_step


def load_npy(path):
    try:
        return np.load(path)
    except OSError as e:
        raise Unreadable("%s: %s" % (path, e.strerror or e))


# --------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------
def cmd_concat(args):
    for kind, out in (("input", args.data), ("labels", args.labels)):
        parts = [load_npy(os.path.join(args.run_dir, "%s_%d.npy" % (kind, s)))
                 for s in range(args.steps)]
        np.save(out, np.concatenate(parts))
    print("concat: %d batches of %d -> %s, %s"
          % (args.steps, len(parts[0]), args.data, args.labels))


def ref_steps(ref_dir):
    steps = sorted(int(f[5:-4]) for f in os.listdir(ref_dir)
                   if f.startswith("loss_") and f.endswith(".npy"))
    if not steps:
        raise Unreadable("%s: no loss_<step>.npy files" % ref_dir)
    return steps


def cmd_losses(args):
    got = read_metrics(args.metrics)
    steps = ref_steps(args.ref_dir)
    if sorted(got) != [s + 1 for s in steps]:
        raise Failure("%s has steps %s, %s has %d steps"
                      % (args.metrics, sorted(got), args.ref_dir, len(steps)))
    keys = ["loss"] + (["lr"] if args.lr else [])
    worst = {k: (0.0, None) for k in keys}
    bad = []
    for s in steps:
        for key in keys:
            expected = float(load_npy(os.path.join(args.ref_dir,
                                                   "%s_%d.npy" % (key, s))))
            actual = got[s + 1][key]
            if actual is None:
                bad.append("step %d: %s is not finite" % (s + 1, key))
                continue
            err = abs(actual - expected) / max(abs(expected), 1e-30)
            if worst[key][1] is None or err > worst[key][0]:
                worst[key] = (err, s + 1)
            if err > args.rtol:
                bad.append("step %d: %s %.9g, PyTorch %.9g (rel err %.3g)"
                           % (s + 1, key, actual, expected, err))
    for line in bad:
        print("FAIL " + line)
    print("losses: %d steps, max rel err %s (rtol %g)"
          % (len(steps), ", ".join("%s %.3g at step %s" % (k, worst[k][0], worst[k][1])
                                   for k in keys), args.rtol))
    if bad:
        raise Failure("%s: %d value(s) differ from PyTorch's" % (args.metrics, len(bad)))


def cmd_params(args):
    tensors = read_safetensors(args.safetensors)
    names = sorted(f[:-4] for f in os.listdir(args.ref_dir)
                   if f.endswith(".npy")
                   and not fnmatch.fnmatchcase(f, "loss_*.npy")
                   and not fnmatch.fnmatchcase(f, "lr_*.npy"))
    failed, worst, worst_name = [], 0.0, None
    for name in names:
        expected = load_npy(os.path.join(args.ref_dir, name + ".npy"))
        if name not in tensors:
            failed.append("%s: missing from %s" % (name, args.safetensors))
            continue
        actual = tensor_array(tensors[name], name, args.safetensors)
        ok, message = compare(actual, expected, args.rtol, 0.0)
        if not ok:
            failed.append("%s: %s" % (name, message))
            continue
        rel = float(message.split("rel_err=")[1].split()[0])
        if worst_name is None or rel > worst:
            worst, worst_name = rel, name
    for line in failed:
        print("FAIL " + line)
    print("params: %d tensors, max rel err %.3g (%s) (rtol %g)"
          % (len(names), worst, worst_name, args.rtol))
    if failed:
        raise Failure("%s: %d tensor(s) differ from PyTorch's"
                      % (args.safetensors, len(failed)))


def cmd_same_metrics(args):
    a, b = read_metrics(args.a), read_metrics(args.b)
    if sorted(a) != sorted(b):
        raise Failure("%s has steps %s, %s has %s"
                      % (args.a, sorted(a), args.b, sorted(b)))
    for step in sorted(a):
        for key in ("loss", "lr"):
            if a[step][key] != b[step][key]:
                raise Failure("step %d: %s %r in %s, %r in %s"
                              % (step, key, a[step][key], args.a,
                                 b[step][key], args.b))
    print("same-metrics: %d steps, identical loss and lr" % len(a))


def cmd_same_tensors(args):
    a, b = read_safetensors(args.a), read_safetensors(args.b)
    if sorted(a) != sorted(b):
        raise Failure("tensor names differ: %s only in %s, %s only in %s"
                      % (sorted(set(a) - set(b)), args.a,
                         sorted(set(b) - set(a)), args.b))
    for name in sorted(a):
        if a[name] != b[name]:
            raise Failure("tensor %s differs between %s and %s"
                          % (name, args.a, args.b))
    print("same-tensors: %d tensors, bitwise identical" % len(a))


def cmd_same_npy_dirs(args):
    names = sorted(f for f in os.listdir(args.a) if f.endswith(".npy"))
    other = sorted(f for f in os.listdir(args.b) if f.endswith(".npy"))
    if names != other:
        raise Failure("files differ: %s only in %s, %s only in %s"
                      % (sorted(set(names) - set(other)), args.a,
                         sorted(set(other) - set(names)), args.b))
    if not names:
        raise Failure("no .npy files in %s" % args.a)
    near = {n: args.rtol for n in names} if args.rtol else {}
    for item in args.close:
        name, _, rtol = item.partition("=")
        if name + ".npy" not in names or not rtol:
            raise Failure("--close takes NAME=RTOL for an array of %s, not %r"
                          % (args.a, item))
        near[name + ".npy"] = float(rtol)
    for name in names:
        a = np.load(os.path.join(args.a, name))
        b = np.load(os.path.join(args.b, name))
        if a.shape != b.shape or a.dtype != b.dtype:
            raise Failure("%s differs between %s and %s" % (name, args.a, args.b))
        if name in near:
            err = close(a, b, near[name])
            if err > near[name]:
                raise Failure("%s differs between %s and %s by %.2e relative "
                              "(> %g)" % (name, args.a, args.b, err, near[name]))
        elif not np.array_equal(a, b):
            raise Failure("%s differs between %s and %s" % (name, args.a, args.b))
    if args.rtol:
        print("same-npy-dirs: %d arrays within %g (%d of them within their "
              "--close)" % (len(names), args.rtol, len(args.close)))
    elif near:
        print("same-npy-dirs: %d arrays, bitwise identical but %d within "
              "their --close" % (len(names), len(near)))
    else:
        print("same-npy-dirs: %d arrays, bitwise identical" % len(names))


def close(a, b, rtol):
    """Largest |a - b| relative to the largest finite |b| of the tensor.
    Equal elements count 0 (a -inf mask buffer matches itself); a NaN, or
    an infinity the other side lacks, counts inf (NaN would otherwise
    compare as "not greater than rtol", and pass)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if not a.size:
        return 0.0
    same = a == b
    if not np.all(same | (np.isfinite(a) & np.isfinite(b))):
        return float("inf")
    finite = np.abs(b[np.isfinite(b)])
    scale = max(float(np.max(finite)) if finite.size else 0.0, 1e-30)
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(a - b))
    return float(np.max(diff)) / scale


def cmd_close_metrics(args):
    a, b = read_metrics(args.a), read_metrics(args.b)
    if sorted(a) != sorted(b):
        raise Failure("%s has steps %s, %s has %s"
                      % (args.a, sorted(a), args.b, sorted(b)))
    worst = 0.0
    for step in sorted(a):
        err = close([a[step]["loss"]], [b[step]["loss"]], args.rtol)
        worst = max(worst, err)
        if err > args.rtol:
            raise Failure("step %d: loss %r in %s, %r in %s (relative %.2e > %g)"
                          % (step, a[step]["loss"], args.a, b[step]["loss"],
                             args.b, err, args.rtol))
    print("close-metrics: %d steps, losses within %g" % (len(a), args.rtol))
    return worst


def cmd_close_tensors(args):
    a, b = read_safetensors(args.a), read_safetensors(args.b)
    if sorted(a) != sorted(b):
        raise Failure("tensor names differ: %s only in %s, %s only in %s"
                      % (sorted(set(a) - set(b)), args.a,
                         sorted(set(b) - set(a)), args.b))
    unknown = sorted(set(getattr(args, "tensor_rtol", {})) - set(a))
    if unknown:
        raise Failure("no tensor %s in %s" % (", ".join(unknown), args.a))
    failed = []
    worst = (0.0, None)
    for name in sorted(a):
        ta, tb = tensor_array(a[name], name, args.a), tensor_array(b[name], name, args.b)
        if ta.shape != tb.shape:
            raise Failure("tensor %s: shape %s in %s, %s in %s"
                          % (name, ta.shape, args.a, tb.shape, args.b))
        err = close(ta, tb, args.rtol)
        own = getattr(args, "tensor_rtol", {})
        rtol = own.get(name, args.rtol)
        if name not in own and (worst[1] is None or err > worst[0]):
            worst = (err, name)
        if err > rtol:
            failed.append("%s (relative %.2e > %g)" % (name, err, rtol))
    if failed:
        raise Failure("%d tensor(s) differ beyond %g between %s and %s: %s"
                      % (len(failed), args.rtol, args.a, args.b,
                         ", ".join(failed)))
    print("close-tensors: %d tensors within %g" % (len(a), args.rtol))
    return worst


def cmd_damage(args):
    size = os.path.getsize(args.file)
    if args.truncate is not None:
        os.truncate(args.file, max(0, size - args.truncate))
        print("damage: %s truncated from %d to %d bytes"
              % (args.file, size, max(0, size - args.truncate)))
        return
    offset = args.flip if args.flip >= 0 else size + args.flip
    with open(args.file, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))
    print("damage: %s byte %d inverted" % (args.file, offset))


def cmd_npy(args):
    shape = tuple(int(d) for d in args.shape.split(","))
    dtype = np.dtype(args.dtype)
    if args.value is not None:
        array = np.full(shape, args.value, dtype=dtype)
    elif dtype.kind == "f":
        array = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    else:
        array = np.random.default_rng(0).integers(0, args.high,
                                                  shape).astype(dtype)
    np.save(args.out, array)


LLMC_MAGIC, LLMC_VERSION = 20240520, 1


def write_llmc(path, tokens):
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2] = LLMC_MAGIC, LLMC_VERSION, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype("<u2").tobytes())


def cmd_tokens(args):
    import torch
    import torch_reference

    model, graph = torch_reference.load_model(args.model, args.onnx)
    dims = graph.input[0].type.tensor_type.shape.dim
    batch, seq = dims[0].dim_value, dims[1].dim_value
    vocab = model.wte.weight.shape[0]
    stream = np.random.default_rng(args.seed).integers(
        0, vocab, args.tokens).astype(np.uint16)
    os.makedirs(os.path.join(args.out, "ref"), exist_ok=True)
    half = args.tokens // 2 + 3  # not a multiple of T: a window spans both
    write_llmc(os.path.join(args.out, "llmc_0.bin"), stream[:half])
    write_llmc(os.path.join(args.out, "llmc_1.bin"), stream[half:])
    stream.astype("<u2").tofile(os.path.join(args.out, "raw.bin"))

    windows = (args.tokens - 1) // seq
    per_epoch = windows // batch
    if per_epoch == 0:
        raise Failure("%d tokens make %d windows of %d, fewer than a batch of %d"
                      % (args.tokens, windows, seq, batch))
    tokens = torch.from_numpy(stream.astype(np.int64))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    losses = []
    for s in range(args.steps):
        first = (s % per_epoch) * batch
        x = torch.stack([tokens[i * seq:(i + 1) * seq]
                         for i in range(first, first + batch)])
        y = torch.stack([tokens[i * seq + 1:(i + 1) * seq + 1]
                         for i in range(first, first + batch)])
        opt.zero_grad(set_to_none=True)
        loss = torch_reference.loss_fn("cross-entropy", model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        np.save(os.path.join(args.out, "ref", "loss_%d.npy" % s),
                np.float32(loss.item()))
        np.save(os.path.join(args.out, "ref", "lr_%d.npy" % s),
                np.float32(args.lr))
    print("tokens: %d tokens, %d windows of %d, %d batches of %d per epoch; "
          "sgd %d steps, losses %s -> %s"
          % (args.tokens, windows, seq, per_epoch, batch, args.steps,
             " ".join("%.4f" % v for v in losses), args.out))


# --------------------------------------------------------------------------
def make_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    q = sub.add_parser("concat")
    q.add_argument("run_dir")
    q.add_argument("--steps", type=int, required=True)
    q.add_argument("--data", required=True)
    q.add_argument("--labels", required=True)

    q = sub.add_parser("losses")
    q.add_argument("metrics")
    q.add_argument("ref_dir")
    q.add_argument("--rtol", type=float, default=1e-4)
    q.add_argument("--lr", action="store_true", help="also compare lr")

    q = sub.add_parser("params")
    q.add_argument("safetensors")
    q.add_argument("ref_dir")
    q.add_argument("--rtol", type=float, default=1e-4)

    q = sub.add_parser("same-metrics")
    q.add_argument("a")
    q.add_argument("b")

    q = sub.add_parser("same-tensors")
    q.add_argument("a")
    q.add_argument("b")

    q = sub.add_parser("same-npy-dirs")
    q.add_argument("a")
    q.add_argument("b")
    q.add_argument("--close", action="append", default=[],
                   help="NAME=RTOL: the array NAME.npy may differ by RTOL "
                   "relative to its largest magnitude (a sum added in "
                   "another order); the rest must be bitwise equal")
    q.add_argument("--rtol", type=float, default=0.0,
                   help="every array may differ by this much relative "
                   "(default 0: bitwise equal); --close overrides it")

    for name in ("close-metrics", "close-tensors"):
        q = sub.add_parser(name)
        q.add_argument("a")
        q.add_argument("b")
        q.add_argument("--rtol", type=float, default=1e-5)

    q = sub.add_parser("damage")
    q.add_argument("file")
    g = q.add_mutually_exclusive_group(required=True)
    g.add_argument("--truncate", type=int)
    g.add_argument("--flip", type=int)

    q = sub.add_parser("npy")
    q.add_argument("out")
    q.add_argument("--shape", required=True)
    q.add_argument("--dtype", default="float32")
    q.add_argument("--value", type=float)
    q.add_argument("--high", type=int, default=10,
                   help="integers are drawn from [0, HIGH)")

    q = sub.add_parser("tokens")
    q.add_argument("model", choices=["gpt"])
    q.add_argument("--onnx", required=True)
    q.add_argument("--out", required=True)
    q.add_argument("--tokens", type=int, required=True)
    q.add_argument("--steps", type=int, required=True)
    q.add_argument("--lr", type=float, required=True)
    q.add_argument("--seed", type=int, default=0)
    return p


COMMANDS = {
    "concat": cmd_concat, "losses": cmd_losses, "params": cmd_params,
    "same-metrics": cmd_same_metrics, "same-tensors": cmd_same_tensors,
    "same-npy-dirs": cmd_same_npy_dirs,
    "close-metrics": cmd_close_metrics, "close-tensors": cmd_close_tensors,
    "damage": cmd_damage, "npy": cmd_npy, "tokens": cmd_tokens,
}


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
    parsed = [p.parse_args(c) for c in commands]
    try:
        for args in parsed:
            COMMANDS[args.command](args)
    except Failure as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    except Unreadable as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
