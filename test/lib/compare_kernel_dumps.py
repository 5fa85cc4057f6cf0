#!/usr/bin/python3
"""Compare two folders of kernel outputs, kernel by kernel.

Usage:
  compare_kernel_dumps.py REF_DIR DIR [--f32-tol 1e-5] [--bf16-tol 3e-2]
      [--top 20]
  compare_kernel_dumps.py --check-step REF_DIR --metrics METRICS.jsonl
      [--checkpoint MODEL.safetensors]

A step compiled with `weftc --dump-kernel-outputs` and run with
WEFT_DUMP_KERNELS=DIR writes every buffer each kernel call wrote as
DIR/<call>_<kernel>_<operand>.npy (include/weft/Runtime/KernelDump.h; bf16
as its bits, uint16). Two runs of the same model on the same inputs (the CPU
executable and the --target cuda one, whose kernels are the same, called in
the same order) give the same file names.

Both folders must hold the same files (else an error lists the missing
ones). Each output's error is max |x - ref| / max |ref| (REF_DIR is the
reference; normalized by the tensor's largest magnitude, so that elements
near zero do not blow up); a kernel call's error is its outputs' worst;
integer and bool outputs must be equal. The tolerance of a call is
--f32-tol until the first call that wrote a bf16 output and --bf16-tol from
there on: errors flow forward along the step, and after a bf16 rounding
every later value carries its error. 3e-2 is about 8 bf16 steps of a
tensor's largest element: a GEMM summing in another order rounds some bf16
elements the other way, and that compounds over the layers (the 2-layer
d256 GPT on an H100: 1.9e-2 at worst, its fp32 build 1.3e-6; the test GPT's
bf16 build 9e-7). A wrong kernel is off by far more. The table lists the --top worst calls;
the exit status is 1 with the first call in step order above its tolerance
named (where the outputs start to differ), 2 when the files differ.

--check-step checks a dump against what its executable reports for the
same step: the loss (and gradient norm) of METRICS.jsonl's line for step 1
(or WEFT_DUMP_KERNELS_STEP's) are scalar outputs of some kernel, and each
tensor of the checkpoint written after that step, if given, equals some
kernel's output bit for bit (buffers, by its manifest.json, left out).
"""

import argparse
import json
import os
import re
import sys

import numpy as np

NAME = re.compile(r"^(\d+)_(.+)_(\d+)\.npy$")


class Failure(Exception):
    pass


def list_dumps(folder):
    """{file name: (call, kernel, operand)} of the dumps in `folder`."""
    try:
        names = os.listdir(folder)
    except OSError as e:
        raise Failure("%s: %s" % (folder, e.strerror))
    dumps = {}
    for name in names:
        m = NAME.match(name)
        if m:
            dumps[name] = (int(m.group(1)), m.group(2), int(m.group(3)))
    if not dumps:
        raise Failure("%s: no kernel dumps (<call>_<kernel>_<operand>.npy)"
                      % folder)
    return dumps


def load(path):
    """The array and its dtype name; bf16 bits (uint16) widened to f32."""
    a = np.load(path)
    if a.dtype == np.uint16:
        return (a.astype(np.uint32) << 16).view(np.float32), "bf16"
    return a, a.dtype.name


def error(ref, other):
    """max |other - ref| / max |ref|; equal elements (infinities, NaNs at
    the same places) count 0, a NaN or an infinity on one side only inf."""
    if ref.shape != other.shape:
        return float("inf")
    if not ref.size:
        return 0.0
    if ref.dtype.kind in "biu":
        return 0.0 if np.array_equal(ref, other) else float("inf")
    a = ref.astype(np.float64)
    b = other.astype(np.float64)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    if not np.all(same | (np.isfinite(a) & np.isfinite(b))):
        return float("inf")
    finite = np.abs(a[np.isfinite(a)])
    scale = float(np.max(finite)) if finite.size else 0.0
    with np.errstate(invalid="ignore"):
        diff = float(np.max(np.where(same, 0.0, np.abs(a - b))))
    if diff == 0.0:
        return 0.0
    return diff / scale if scale > 0.0 else float("inf")


def compare(args):
    ref = list_dumps(args.ref)
    other = list_dumps(args.dir)
    missing = sorted(set(ref) - set(other))
    extra = sorted(set(other) - set(ref))
    if missing or extra:
        lines = ["%s lacks %s" % (args.dir, n) for n in missing[:20]]
        lines += ["%s lacks %s" % (args.ref, n) for n in extra[:20]]
        more = len(missing) + len(extra) - len(lines)
        if more > 0:
            lines.append("and %d more" % more)
        raise Failure("the folders hold different dumps (%d missing from %s, "
                      "%d from %s):\n  %s"
                      % (len(missing), args.dir, len(extra), args.ref,
                         "\n  ".join(lines)))

    # One row per kernel call: its worst output.
    calls = {}
    for name, (call, kernel, operand) in ref.items():
        a, dtype = load(os.path.join(args.ref, name))
        b, other_dtype = load(os.path.join(args.dir, name))
        err = error(a, b) if dtype == other_dtype else float("inf")
        row = calls.setdefault(call, {"call": call, "kernel": kernel,
                                      "error": -1.0, "dtypes": set()})
        row["dtypes"].add(dtype)
        if err > row["error"]:
            row.update(error=err, operand=operand, shape=a.shape, dtype=dtype)

    bf16 = False
    for call in sorted(calls):
        row = calls[call]
        bf16 = bf16 or "bf16" in row["dtypes"]
        row["tol"] = args.bf16_tol if bf16 else args.f32_tol
    rows = sorted(calls.values(), key=lambda r: (-r["error"], r["call"]))
    print("%-9s %-9s %5s %-12s %-7s %s"
          % ("error", "tolerance", "call", "shape", "dtype", "kernel:operand"))
    for row in rows[:args.top]:
        shape = "x".join(map(str, row["shape"])) or "scalar"
        print("%-9.2e %-9.0e %5d %-12s %-7s %s:%d%s"
              % (row["error"], row["tol"], row["call"], shape, row["dtype"],
                 row["kernel"], row["operand"],
                 "  ABOVE" if row["error"] > row["tol"] else ""))
    above = [calls[c] for c in sorted(calls)
             if calls[c]["error"] > calls[c]["tol"]]
    print("%d kernel calls, %d outputs; worst %.2e (call %d, %s)"
          % (len(calls), len(ref), rows[0]["error"], rows[0]["call"],
             rows[0]["kernel"]))
    if above:
        first = above[0]
        print("error: %d kernel calls above tolerance; the first: call %d, "
              "%s operand %d: %.2e > %g"
              % (len(above), first["call"], first["kernel"], first["operand"],
                 first["error"], first["tol"]), file=sys.stderr)
        return 1
    return 0


def check_step(args):
    # Only here: the comparison runs alone on a GPU machine.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import exe_check
    dumps = list_dumps(args.ref)
    arrays = []
    for name in sorted(dumps):
        a, dtype = load(os.path.join(args.ref, name))
        arrays.append((name, a))
    step = int(os.environ.get("WEFT_DUMP_KERNELS_STEP", "1"))
    metrics = exe_check.read_metrics(args.metrics)
    if step not in metrics:
        raise Failure("%s has no step %d" % (args.metrics, step))
    scalars = [(n, float(a)) for n, a in arrays if a.shape == ()
               and a.dtype.kind == "f"]
    for key in ("loss", "grad_norm"):
        if key not in metrics[step]:
            continue
        value = float(metrics[step][key])
        # The metrics hold the f32 value printed in full.
        found = [n for n, s in scalars if np.float32(s) == np.float32(value)]
        if not found:
            raise Failure("step %d's %s %r is no kernel's output in %s"
                          % (step, key, value, args.ref))
        print("%s %r: %s" % (key, value, found[-1]))
    if args.checkpoint:
        tensors = exe_check.read_safetensors(args.checkpoint)
        # Buffers (a causal mask) are inputs no kernel writes.
        manifest = os.path.join(os.path.dirname(args.checkpoint),
                                "manifest.json")
        if os.path.exists(manifest):
            with open(manifest) as f:
                kinds = {t["name"]: t["kind"] for t in json.load(f)["tensors"]}
            tensors = {n: t for n, t in tensors.items()
                       if kinds.get(n) != "buffer"}
        by_shape = {}
        for n, a in arrays:
            by_shape.setdefault(a.shape, []).append((n, a))
        for name, entry in tensors.items():
            t = exe_check.tensor_array(entry, name, args.checkpoint)
            if not any(np.array_equal(t, a)
                       for _, a in by_shape.get(t.shape, [])):
                raise Failure("%s: %s is no kernel's output in %s"
                              % (args.checkpoint, name, args.ref))
        print("checkpoint: %d params and state tensors, each a kernel's "
              "output" % len(tensors))
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("ref", metavar="REF_DIR")
    p.add_argument("dir", metavar="DIR", nargs="?")
    p.add_argument("--f32-tol", type=float, default=1e-5)
    p.add_argument("--bf16-tol", type=float, default=3e-2)
    p.add_argument("--top", type=int, default=20,
                   help="rows of the table (worst first)")
    p.add_argument("--check-step", action="store_true")
    p.add_argument("--metrics")
    p.add_argument("--checkpoint")
    args = p.parse_args(argv)
    try:
        if args.check_step:
            if not args.metrics or args.dir:
                p.error("--check-step takes one folder and --metrics")
            return check_step(args)
        if not args.dir:
            p.error("two folders to compare")
        return compare(args)
    except Exception as e:  # Failure, or exe_check's Unreadable and Failure
        if not isinstance(e, Failure) and type(e).__name__ not in (
                "Unreadable", "Failure"):
            raise
        print("error: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
