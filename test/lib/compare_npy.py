#!/usr/bin/python3
"""Compare two .npy arrays with a norm-style relative error.

Usage:
  compare_npy.py ACTUAL.npy EXPECTED.npy [--rtol 1e-5] [--atol 0]

Passes (prints "OK rel_err=..." and exits 0) when the shapes match, nothing is
NaN, and

    max|a - e|  <=  rtol * max(max|e|, tiny)  +  atol

i.e. rel_err = max|a - e| / max(max|e|, tiny) <= rtol when atol is 0. The
error is normalized by the largest expected magnitude, not element-wise, so
values near zero do not blow it up. Otherwise prints FAIL with the worst
element and exits 1. Exit status 2 means the files could not be compared at
all (missing, unreadable). Only numpy is needed.
"""

import argparse
import sys

import numpy as np


def _fmt_index(idx):
    return "[" + ", ".join(str(int(i)) for i in idx) + "]"


def compare(actual, expected, rtol, atol):
    """Returns (ok, message)."""
    if actual.shape != expected.shape:
        return False, "FAIL shape mismatch: actual %s vs expected %s" % (
            tuple(actual.shape), tuple(expected.shape))

    kinds = "biufc"
    if actual.dtype.kind not in kinds or expected.dtype.kind not in kinds:
        return False, "FAIL non-numeric dtype: actual %s, expected %s" % (
            actual.dtype, expected.dtype)
    note = ""
    if actual.dtype != expected.dtype:
        note = " (dtypes differ: actual %s, expected %s)" % (actual.dtype, expected.dtype)

    # Compare in float64 (complex stays complex).
    wide = np.complex128 if "c" in (actual.dtype.kind, expected.dtype.kind) else np.float64
    a = actual.astype(wide)
    e = expected.astype(wide)

    if a.size == 0:
        return True, "OK rel_err=0 (empty arrays, shape %s)%s" % (tuple(a.shape), note)

    for label, arr in (("actual", a), ("expected", e)):
        nan = np.isnan(arr)
        if nan.any():
            idx = np.unravel_index(int(np.argmax(nan)), arr.shape)
            return False, "FAIL %s has %d NaN value(s), first at %s%s" % (
                label, int(nan.sum()), _fmt_index(idx), note)

    # Infinities: must match exactly (same sign, same place).
    ainf, einf = np.isinf(a), np.isinf(e)
    if ainf.any() or einf.any():
        bad = (ainf != einf) | (ainf & einf & (a != e))
        if bad.any():
            idx = np.unravel_index(int(np.argmax(bad)), a.shape)
            return False, "FAIL infinity mismatch at %s: actual %r, expected %r%s" % (
                _fmt_index(idx), a[idx].item(), e[idx].item(), note)
        finite = ~einf
    else:
        finite = None

    diff = np.abs(a - e)
    emag = np.abs(e)
    if finite is not None:
        diff = np.where(finite, diff, 0.0)
        emag = np.where(finite, emag, 0.0)
    tiny = np.finfo(np.float64).tiny
    denom = max(float(emag.max()), tiny)
    max_diff = float(diff.max())
    rel_err = max_diff / denom
    worst = np.unravel_index(int(np.argmax(diff)), a.shape)

    if max_diff <= rtol * denom + atol:
        return True, "OK rel_err=%.3e (max_abs_err=%.3e, max|expected|=%.3e, %d elements)%s" % (
            rel_err, max_diff, float(emag.max()), a.size, note)
    return False, ("FAIL rel_err=%.3e > rtol=%g (atol=%g): max_abs_err=%.3e, max|expected|=%.3e; "
                   "worst at %s: actual %r, expected %r; %d of %d elements off by more than "
                   "rtol*max|expected|+atol%s") % (
        rel_err, rtol, atol, max_diff, float(emag.max()), _fmt_index(worst),
        a[worst].item(), e[worst].item(),
        int((diff > rtol * denom + atol).sum()), a.size, note)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("actual")
    p.add_argument("expected")
    p.add_argument("--rtol", type=float, default=1e-5,
                   help="bound on max|a-e| / max|e| (default 1e-5)")
    p.add_argument("--atol", type=float, default=0.0,
                   help="absolute slack added to rtol*max|e| (default 0)")
    args = p.parse_args(argv)

    try:
        actual = np.load(args.actual, allow_pickle=False)
        expected = np.load(args.expected, allow_pickle=False)
    except (OSError, ValueError) as exc:
        print("ERROR cannot load arrays: %s" % exc)
        return 2

    with np.errstate(all="ignore"):
        ok, msg = compare(np.asarray(actual), np.asarray(expected), args.rtol, args.atol)
    print(msg)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
