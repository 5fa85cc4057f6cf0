#!/usr/bin/python3
"""Compare folders of .npy arrays name by name.

Usage:
  compare_dir.py ACTUAL_DIR EXPECTED_DIR [--rtol 1e-4] [--atol 0]
      [--names-from DIR] [--only GLOB]... [--exclude GLOB]... [--same-names]

Compares every .npy file of --names-from (default EXPECTED_DIR), filtered by
--only and --exclude (shell patterns on the file name), with the file of the
same name in ACTUAL_DIR and EXPECTED_DIR, using compare_npy.py's norm-style
relative error max|a - e| / max|e|. A file missing on either side fails.
Prints one line per file and the worst error overall; exits 0 when every
file is within --rtol, 1 otherwise, 2 when nothing was compared.

--same-names also fails when the two folders' filtered name sets differ
(e.g. to check that Weft's gradients are exactly PyTorch's parameters).
"""

import argparse
import fnmatch
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_npy import compare  # noqa: E402


def npy_names(folder, only, exclude):
    names = []
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".npy"):
            continue
        if only and not any(fnmatch.fnmatchcase(f, g) for g in only):
            continue
        if any(fnmatch.fnmatchcase(f, g) for g in exclude):
            continue
        names.append(f)
    return names


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("actual")
    p.add_argument("expected")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--atol", type=float, default=0.0)
    p.add_argument("--names-from", help="folder whose files are compared "
                   "(default: EXPECTED)")
    p.add_argument("--only", action="append", default=[], metavar="GLOB")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB")
    p.add_argument("--same-names", action="store_true")
    args = p.parse_args(argv)

    for folder in (args.actual, args.expected):
        if not os.path.isdir(folder):
            print("ERROR no such folder: %s" % folder)
            return 2
    names = npy_names(args.names_from or args.expected, args.only, args.exclude)
    if not names:
        print("ERROR no .npy files to compare in %s" % (args.names_from or args.expected))
        return 2

    failures = 0
    if args.same_names:
        a = set(npy_names(args.actual, args.only, args.exclude))
        e = set(npy_names(args.expected, args.only, args.exclude))
        for label, extra in (("only in " + args.actual, a - e),
                             ("only in " + args.expected, e - a)):
            if extra:
                failures += 1
                print("FAIL %s: %s" % (label, ", ".join(sorted(extra))))

    worst, worst_name = 0.0, None
    for name in names:
        paths = [os.path.join(args.actual, name), os.path.join(args.expected, name)]
        missing = [q for q in paths if not os.path.exists(q)]
        if missing:
            failures += 1
            print("FAIL %s: missing %s" % (name, ", ".join(missing)))
            continue
        actual, expected = (np.asarray(np.load(q, allow_pickle=False)) for q in paths)
        with np.errstate(all="ignore"):
            ok, msg = compare(actual, expected, args.rtol, args.atol)
        print("%s: %s" % (name, msg))
        if not ok:
            failures += 1
        if actual.shape != expected.shape:
            continue
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        finite = np.isfinite(e)
        diff = np.where(finite, np.abs(a - e), 0.0)
        denom = max(float(np.where(finite, np.abs(e), 0.0).max(initial=0.0)),
                    np.finfo(np.float64).tiny)
        err = float(diff.max(initial=0.0)) / denom
        if worst_name is None or err > worst:
            worst, worst_name = err, name

    summary = "%d files, worst rel_err=%.3e (%s)" % (len(names), worst, worst_name)
    if failures:
        print("FAIL %d of %d checks failed; %s" % (failures, len(names), summary))
        return 1
    print("OK %s" % summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
