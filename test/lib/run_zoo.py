#!/usr/bin/python3
"""Run the model zoo (examples/models/zoo.py) through weftc and weft-eval.

Usage:
  run_zoo.py --weftc PATH --weft-eval PATH --out DIR
      [--opset N ...] [--dynamic NAME ...] [--only NAME ...] [--jobs J]

For every opset, exports every zoo model that torch can export at that
opset (in this process, so torch is imported once), then for each one runs

  weftc NAME.onnx --emit=weft -o model.mlir
  weft-eval model.mlir --input input=input.npy -o out
  compare out.0.npy expected.npy --rtol 1e-5

Models named with --dynamic are also exported with a dynamic batch axis and
imported with --input-shape. A model that declares `expect_error` must make
weftc fail with that text in its message. Prints one PASS/FAIL line per
model and run, then a summary; exits 1 when anything failed.
"""

import argparse
import concurrent.futures
import contextlib
import io
import os
import subprocess
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "models"))

import compare_npy  # noqa: E402
import zoo  # noqa: E402

BATCH = 4


def first_error(text, limit=400):
    """The first line that reads like an error, shortened, for one-line
    reports."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    line = next((l for l in lines if "error" in l), lines[0] if lines else "(no output)")
    return line if len(line) <= limit else line[:limit] + "..."


def run_model(args, name, opset, dynamic, workdir):
    """Returns (ok, message) for one exported model."""
    cls = zoo.MODELS[name]
    onnx_path = os.path.join(workdir, name + ".onnx")
    mlir_path = os.path.join(workdir, "model.mlir")
    cmd = [args.weftc, onnx_path, "--emit=weft", "-o", mlir_path]
    if dynamic:
        shape = "x".join(str(d) for d in zoo.input_shape(cls, BATCH))
        cmd += ["--input-shape", "input=" + shape]
    p = subprocess.run(cmd, capture_output=True, text=True)
    expect = getattr(cls, "expect_error", None)
    if expect is not None:
        if p.returncode == 0:
            return False, "weftc succeeded, expected an error with %r" % expect
        if expect not in p.stderr:
            return False, "weftc failed without %r: %s" % (expect, first_error(p.stderr))
        return True, "expected error: " + first_error(p.stderr)
    if p.returncode != 0:
        return False, "weftc: " + first_error(p.stderr)
    with open(mlir_path) as f:
        if "weft.onnx.node" in f.read():
            return False, "weftc left weft.onnx.node ops in the output"
    out = os.path.join(workdir, "out")
    p = subprocess.run([args.weft_eval, mlir_path, "--input",
                        "input=" + os.path.join(workdir, "input.npy"), "-o", out],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return False, "weft-eval: " + first_error(p.stderr)
    actual = np.load(out + ".0.npy")
    expected = np.load(os.path.join(workdir, "expected.npy"))
    with np.errstate(all="ignore"):
        return compare_npy.compare(actual, expected, args.rtol, 0.0)


def export_quietly(name, workdir, opset, dynamic):
    """zoo.export with torch's export warnings and chatter swallowed."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        zoo.export(name, workdir, opset, BATCH, 0, dynamic)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--weftc", required=True)
    p.add_argument("--weft-eval", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--opset", type=int, action="append")
    p.add_argument("--dynamic", action="append", default=[],
                   help="also run this model with a dynamic batch (repeatable)")
    p.add_argument("--only", action="append", help="run only these models")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = p.parse_args(argv)
    for name in args.dynamic + (args.only or []):
        if name not in zoo.MODELS:
            p.error("unknown model %r (see zoo.py --list)" % name)

    runs = []  # (label, name, opset, dynamic, workdir)
    for opset in args.opset or [zoo.DEFAULT_OPSET]:
        for name in sorted(args.only or zoo.MODELS):
            if not zoo.exports_at(zoo.MODELS[name], opset):
                continue
            for dynamic in (False, True) if name in args.dynamic else (False,):
                label = "opset %d%s %s" % (opset, " dynamic" if dynamic else "", name)
                workdir = os.path.join(args.out, "opset%d%s" % (opset, "-dyn" if dynamic else ""),
                                       name)
                runs.append((label, name, opset, dynamic, workdir))

    start = time.time()
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        futures = {}
        # Exporting needs this process (torch); weftc and weft-eval of the
        # models already exported run meanwhile.
        for label, name, opset, dynamic, workdir in runs:
            try:
                export_quietly(name, workdir, opset, dynamic)
            except Exception as exc:  # a zoo model that does not export
                results[label] = (False, "export: %s: %s" % (type(exc).__name__,
                                                             str(exc).splitlines()[0]))
                continue
            futures[label] = pool.submit(run_model, args, name, opset, dynamic, workdir)
        for label, future in futures.items():
            results[label] = future.result()

    failed = 0
    for label, *_ in runs:
        ok, message = results[label]
        failed += not ok
        print("%s %s: %s" % ("PASS" if ok else "FAIL", label, message))
    print("%d of %d zoo runs passed (%.1f s)" % (len(runs) - failed, len(runs),
                                                  time.time() - start))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
