#!/usr/bin/python3
"""Checks weft.dropout's masks statistically (test/Evaluator/dropout.test).

Usage: check_dropout.py RATIO SAME.npy AGAIN.npy OTHER.npy

SAME and AGAIN are dropout of ones with one seed, OTHER with another. Passes
when the kept fraction is within 5 standard deviations of 1 - RATIO, kept
values are exactly float32(1 / (1 - RATIO)), SAME and AGAIN are identical
and OTHER's mask differs.
"""
import sys

import numpy as np


def main():
    ratio = float(sys.argv[1])
    same, again, other = (np.load(p) for p in sys.argv[2:5])
    n = same.size
    kept = same != 0
    frac = kept.mean()
    sigma = np.sqrt(ratio * (1 - ratio) / n)
    scale = np.float32(1.0) / np.float32(1.0 - ratio)
    ok = True
    if abs(frac - (1 - ratio)) > 5 * sigma:
        print("FAIL kept %.5f of %d, expected %.5f +- %.5f" % (frac, n, 1 - ratio, 5 * sigma))
        ok = False
    if not np.all(same[kept] == scale):
        print("FAIL kept values are not %r" % scale)
        ok = False
    if not np.array_equal(same, again):
        print("FAIL the same seed gave another mask")
        ok = False
    if np.array_equal(same != 0, other != 0):
        print("FAIL another seed gave the same mask")
        ok = False
    print("dropout %g: kept %.4f of %d (expected %.4f), scale %r%s"
          % (ratio, frac, n, 1 - ratio, float(scale), "" if ok else " FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
