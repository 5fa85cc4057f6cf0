#!/usr/bin/python3
"""Run weft functions through the reference evaluator and the lowered code.

Usage:
  check_lowering.py FILE.mlir --tools DIR --runner MLIR_RUNNER
                    --runner-libs LIB[,LIB] [--fn NAME]... [--seed N]
                    [--float-range LO,HI] [--range NAME=LO,HI]...
                    [--keep DIR] [--verbose]

Every public function of FILE.mlir (or each --fn) is a test case. Its
arguments get deterministic random values, baked into a wrapper function as
`weft.constant`s, so both sides see identical data:

  @__check_F() calls @F on the constants and casts every result to f64
  (exact for every weft element type);

weft-eval runs each wrapper (the expected values); then a `@main` that calls
every wrapper and prints the results' bits (f64 bitcast to i64, printed with
printMemrefI64, so no digits are lost) is appended, the module goes through
`weft-opt --weft-lower-to-llvm-pipeline` and mlir-runner executes it.

Argument values: floats uniform in [-2, 2) (or --float-range), integers in
[-5, 5], i1 random. An argument attribute `check.range = [lo, hi]`
overrides the range (integers inclusive), e.g. positive inputs of log or
labels below the class count, and so does `--range NAME=LO,HI` for the
argument named NAME by its weft.input / weft.param / weft.state attribute
(for files this script does not write, such as weftc's training step).
Arguments tagged `weft.state = "exp_avg_sq..."` and 0-d float arguments (a
learning rate) default to [0.1, 1) so an optimizer step stays well defined.

Comparison, per result, as test/lib/compare_npy.py: NaN and infinities must
match exactly; otherwise

    rel_err = max|lowered - expected| / max(max|expected|, tiny) <= rtol

where rtol defaults from the result's element type before the cast: 1e-5
for f32, 2^-7 for bf16 (one rounding step: the evaluator computes in double,
the lowered code in f32, before rounding to bf16), 2^-10 for f16, 1e-12 for
f64, exact for integers and i1. Prints one line per function with the worst
error and exits 1 if any function fails, 2 if a tool fails.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

FLOAT_RANGE = (-2.0, 2.0)
RTOL = {"f32": 1e-5, "bf16": 2.0 ** -7, "f16": 2.0 ** -10, "f64": 1e-12}


def die(message):
    print("check_lowering: " + message, file=sys.stderr)
    sys.exit(2)


def matching_paren(text, start):
    """Index of the parenthesis closing the one at `start`."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    die("unbalanced parentheses")


def split_top_level(text):
    """Splits on commas outside <>, [], {}, () and quotes."""
    parts, depth, current, quoted = [], 0, "", False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in "<[{(":
            depth += 1
        elif not quoted and ch in ">]})":
            depth -= 1
        if ch == "," and depth == 0 and not quoted:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current)
    return parts


class TensorType:
    def __init__(self, text):
        m = re.fullmatch(r"tensor<([0-9x]*?)x?(f32|f64|bf16|f16|i64|i32|i1)>",
                         text.strip())
        if not m:
            die("unsupported type " + text)
        self.text = text.strip()
        self.shape = [int(d) for d in m.group(1).split("x") if d]
        self.element = m.group(2)

    def with_element(self, element):
        dims = "".join("%dx" % d for d in self.shape)
        return "tensor<%s%s>" % (dims, element)


class Function:
    """A public func.func of the file: name, argument and result types."""

    def __init__(self, name, args, arg_attrs, results):
        self.name, self.args, self.arg_attrs, self.results = (
            name, args, arg_attrs, results)


def parse_functions(text):
    functions = []
    for m in re.finditer(r"func\.func\s+(private\s+)?@([\w.$]+)\s*\(", text):
        if m.group(1):
            continue
        open_paren = m.end() - 1
        close = matching_paren(text, open_paren)
        args, attrs = [], []
        for part in split_top_level(text[open_paren + 1:close]):
            am = re.match(r"\s*%[\w.$]+\s*:\s*(tensor<[^>]*>)\s*(\{.*\})?\s*$",
                          part, re.S)
            if not am:
                die("cannot parse argument '%s' of @%s" % (part, m.group(2)))
            args.append(TensorType(am.group(1)))
            attrs.append(am.group(2) or "")
        rest = text[close + 1:]
        rm = re.match(r"\s*->\s*", rest)
        results = []
        if rm:
            rest = rest[rm.end():]
            if rest.startswith("("):
                end = matching_paren(rest, 0)
                chunk = rest[1:end]
            else:
                chunk = re.match(r"tensor<[^>]*>", rest).group(0)
            results = [TensorType(t)
                       for t in re.findall(r"tensor<[^>]*>", chunk)]
        functions.append(Function(m.group(2), args, attrs, results))
    return functions


def format_values(values, element):
    if element == "i1":
        return ", ".join("true" if v else "false" for v in values)
    if element in ("i32", "i64"):
        return ", ".join(str(int(v)) for v in values)
    return ", ".join("%.9g" % v for v in values)


def random_constant(rng, ty, attrs, ranges):
    n = int(np.prod(ty.shape)) if ty.shape else 1
    rm = re.search(r"check\.range\s*=\s*\[\s*([-0-9.eE+]+)\s*,\s*([-0-9.eE+]+)"
                   r"\s*\]", attrs)
    for name, (lo, hi) in ranges.items():
        if re.search(r'=\s*"%s"' % re.escape(name), attrs):
            rm = re.match(r"(.*),(.*)", "%s,%s" % (lo, hi))
    if ty.element == "i1":
        values = rng.integers(0, 2, n)
    elif ty.element in ("i32", "i64"):
        lo, hi = (int(float(rm.group(1))), int(float(rm.group(2)))) if rm \
            else (-5, 5)
        values = rng.integers(lo, hi + 1, n)
    else:
        if rm:
            lo, hi = float(rm.group(1)), float(rm.group(2))
        elif "exp_avg_sq" in attrs or not ty.shape:
            lo, hi = 0.1, 1.0
        else:
            lo, hi = FLOAT_RANGE
        values = rng.uniform(lo, hi, n).astype(np.float32)
    def nest(flat, shape):
        if not shape:
            return format_values(flat, ty.element)
        step = len(flat) // shape[0] if shape[0] else 0
        return "[" + ", ".join(nest(flat[i * step:(i + 1) * step], shape[1:])
                               for i in range(shape[0])) + "]"
    if n == 0:
        return "dense<> : %s" % ty.text
    return "dense<%s> : %s" % (nest(list(values), ty.shape), ty.text)


def wrapper(fn, rng, ranges):
    """@__check_F: constants, the call, results cast to f64."""
    lines = []
    args = []
    for i, (ty, attrs) in enumerate(zip(fn.args, fn.arg_attrs)):
        lines.append("    %%a%d = weft.constant %s" %
                     (i, random_constant(rng, ty, attrs, ranges)))
        args.append("%%a%d" % i)
    arg_types = ", ".join(t.text for t in fn.args)
    result_types = ", ".join(t.text for t in fn.results)
    count = len(fn.results)
    lhs = "%r" if count == 1 else "%%r:%d" % count
    lines.append("    %s = func.call @%s(%s) : (%s) -> (%s)" %
                 (lhs, fn.name, ", ".join(args), arg_types, result_types))
    outs, out_types = [], []
    for i, ty in enumerate(fn.results):
        value = "%r" if count == 1 else "%%r#%d" % i
        wide = ty.with_element("f64")
        if ty.element != "f64":
            lines.append("    %%c%d = weft.cast %s : %s -> %s" %
                         (i, value, ty.text, wide))
            value = "%%c%d" % i
        outs.append(value)
        out_types.append(wide)
    lines.append("    func.return %s : %s" % (", ".join(outs),
                                               ", ".join(out_types)))
    return ("  func.func @__check_%s() -> (%s) {\n%s\n  }\n" %
            (fn.name, ", ".join(out_types), "\n".join(lines)))


def printer(functions):
    """@main: calls every wrapper and prints each result's f64 bits."""
    lines = []
    k = 0
    for fn in functions:
        types = [t.with_element("f64") for t in fn.results]
        count = len(types)
        lhs = "%%m%d" % k if count == 1 else "%%m%d:%d" % (k, count)
        lines.append("    %s = func.call @__check_%s() : () -> (%s)" %
                     (lhs, fn.name, ", ".join(types)))
        for i, ty in enumerate(fn.results):
            value = "%%m%d" % k if count == 1 else "%%m%d#%d" % (k, i)
            rank = len(ty.shape)
            dims = ", ".join("d%d" % d for d in range(rank))
            amap = "affine_map<(%s) -> (%s)>" % (dims, dims)
            iters = ", ".join(['"parallel"'] * rank)
            f64 = ty.with_element("f64")
            i64 = ty.with_element("i64")
            memref = i64.replace("tensor", "memref")
            p = "%%p%d_%d" % (k, i)
            lines += [
                "    %s_e = tensor.empty() : %s" % (p, i64),
                "    %s_b = linalg.generic {indexing_maps = [%s, %s], "
                "iterator_types = [%s]} ins(%s : %s) outs(%s_e : %s) {" %
                (p, amap, amap, iters, value, f64, p, i64),
                "    ^bb0(%in: f64, %out: i64):",
                "      %bits = arith.bitcast %in : f64 to i64",
                "      linalg.yield %bits : i64",
                "    } -> %s" % i64,
                "    %s_m = bufferization.to_buffer %s_b : %s to %s" %
                (p, p, i64, memref),
                "    %s_u = memref.cast %s_m : %s to memref<*xi64>" %
                (p, p, memref),
                "    func.call @printMemrefI64(%s_u) : (memref<*xi64>) -> ()" % p,
            ]
        k += 1
    return ("  func.func private @printMemrefI64(memref<*xi64>)\n"
            "  func.func @main() {\n%s\n    func.return\n  }\n" %
            "\n".join(lines))


def insert_functions(text, functions_text):
    """Adds functions to the module (an explicit one or the implicit one)."""
    if re.search(r"^\s*module\b", text, re.M):
        end = text.rstrip().rfind("}")
        return text[:end] + functions_text + "}\n"
    return "module {\n" + text + "\n" + functions_text + "}\n"


def run(cmd, what):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])
        die("%s failed (exit %d): %s" % (what, p.returncode, " ".join(cmd)))
    return p.stdout


def parse_printed(output):
    """The integer data of every printed memref, in order."""
    arrays = []
    for chunk in output.split("Unranked Memref")[1:]:
        header, data = chunk.split("data =", 1)
        sizes = re.search(r"sizes = \[([^\]]*)\]", header).group(1)
        count = int(np.prod([int(d) for d in sizes.split(",") if d.strip()]))
        # printMemref prints a row of garbage for an empty memref.
        arrays.append([int(v) for v in re.findall(r"-?\d+", data)][:count])
    return arrays


def compare(actual, expected, element):
    """Returns (ok, rel_err, message)."""
    if actual.shape != expected.shape:
        return False, float("inf"), "shape %s vs %s" % (actual.shape,
                                                         expected.shape)
    special = ~np.isfinite(expected) | ~np.isfinite(actual)
    same_special = (np.isnan(expected) & np.isnan(actual)) | \
        (actual == expected)
    if np.any(special & ~same_special):
        i = np.argwhere(special & ~same_special)[0]
        return False, float("inf"), "non-finite mismatch at %s: %r vs %r" % (
            list(i), actual[tuple(i)], expected[tuple(i)])
    finite = ~special
    if not np.any(finite):
        return True, 0.0, ""
    a, e = actual[finite], expected[finite]
    scale = max(float(np.max(np.abs(e))), 1e-30)
    err = float(np.max(np.abs(a - e))) / scale
    rtol = RTOL.get(element, 0.0)
    if err > rtol:
        i = int(np.argmax(np.abs(a - e)))
        return False, err, "rel_err %.3g > rtol %.3g (worst: %r vs %r)" % (
            err, rtol, a[i], e[i])
    return True, err, ""


def check(args, functions, module, work):
    """Evaluates, lowers, runs and compares; exits with the status."""
    evaluated = os.path.join(work, "checked.mlir")
    with open(evaluated, "w") as f:
        f.write(module)
    weft_eval = os.path.join(args.tools, "weft-eval")
    weft_opt = os.path.join(args.tools, "weft-opt")
    expected = {}
    for fn in functions:
        prefix = os.path.join(work, fn.name)
        run([weft_eval, evaluated, "--fn", "__check_" + fn.name, "-o", prefix],
            "weft-eval @" + fn.name)
        expected[fn.name] = [np.load("%s.%d.npy" % (prefix, i))
                             for i in range(len(fn.results))]

    lowered = os.path.join(work, "main.mlir")
    with open(lowered, "w") as f:
        f.write(insert_functions(module, printer(functions)))
    llvm = os.path.join(work, "lowered.mlir")
    run([weft_opt, lowered, "--weft-lower-to-llvm-pipeline", "-o", llvm],
        "weft-opt --weft-lower-to-llvm-pipeline")
    output = run([args.runner, llvm, "-e", "main",
                  "-entry-point-result=void",
                  "-shared-libs=" + args.runner_libs], "mlir-runner")
    printed = parse_printed(output)
    total = sum(len(fn.results) for fn in functions)
    if len(printed) != total:
        die("expected %d printed results, got %d" % (total, len(printed)))

    failed = False
    k = 0
    for fn in functions:
        worst, bad, lines = 0.0, False, []
        for i, ty in enumerate(fn.results):
            bits = np.array(printed[k], dtype=np.int64)
            k += 1
            actual = bits.view(np.float64).reshape(ty.shape)
            ok, err, message = compare(actual, expected[fn.name][i],
                                       ty.element)
            worst = max(worst, err)
            bad |= not ok
            if not ok:
                lines.append("result %d (%s): %s" % (i, ty.text, message))
            elif args.verbose:
                lines.append("result %d (%s): rel_err=%.3g" % (i, ty.text,
                                                              err))
        failed |= bad
        print("%s @%s rel_err=%.3g%s" % ("FAIL" if bad else "OK", fn.name,
                                         worst,
                                         "".join("\n  " + m for m in lines)))
    sys.exit(1 if failed else 0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--tools", required=True,
                        help="folder holding weft-opt and weft-eval")
    parser.add_argument("--runner", required=True)
    parser.add_argument("--runner-libs", required=True)
    parser.add_argument("--fn", action="append", default=[])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--range", action="append", default=[],
                        help="NAME=LO,HI: value range of the argument named "
                        "NAME")
    parser.add_argument("--float-range", default="-2,2",
                        help="LO,HI: default range of float arguments")
    parser.add_argument("--keep", help="write the intermediate files here")
    parser.add_argument("--verbose", action="store_true",
                        help="print the error of every result")
    args = parser.parse_args()

    with open(args.file) as f:
        text = f.read()
    functions = [fn for fn in parse_functions(text)
                 if (not args.fn or fn.name in args.fn)]
    if args.fn and len(functions) != len(args.fn):
        die("not all of %s found" % args.fn)
    if not functions:
        die("no public function to check")
    global FLOAT_RANGE
    FLOAT_RANGE = tuple(float(v) for v in args.float_range.split(","))
    ranges = {}
    for spec in args.range:
        m = re.fullmatch(r"([^=]+)=([-0-9.eE+]+),([-0-9.eE+]+)", spec)
        if not m:
            die("bad --range " + spec)
        ranges[m.group(1)] = (m.group(2), m.group(3))
    rng = np.random.default_rng(args.seed)
    wrappers = "".join(wrapper(fn, rng, ranges) for fn in functions)
    module = insert_functions(text, wrappers)

    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        check(args, functions, module, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="check_lowering_") as work:
            check(args, functions, module, work)


if __name__ == "__main__":
    main()
