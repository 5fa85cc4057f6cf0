#!/usr/bin/python3
"""GPT weights from an integer formula, so that a weights file can be rebuilt
bit for bit on a machine it cannot be copied to.

GPT-2 124M's initial weights are ~500 MB of f32: too much to carry to the
GPU machine (bench/gpu_train_step.py). Every parameter is instead a function
of its name and element index (a 32-bit integer hash, exact in numpy on any
machine), so `weftc --embed-weights-limit 0`'s <exe>.weights.safetensors is
rebuilt there from its header and this formula. The header carries weftc's
chunk checksums, and the runtime checks them: a rebuilt file that differs by
one bit does not load.

  export --out DIR [--layers 12 --embd 768 --heads 12 --vocab 50257
         --block 1024 --batch 8]      the GPT of examples/models/export.py
                                      with formula weights -> DIR/gpt.onnx
                                      (external data; needs torch 1.13)
  pack WEIGHTS PACK                   header + recipe: each tensor the formula
                                      reproduces is recorded by name, any
                                      other byte range (the causal-mask
                                      buffer) verbatim, zlib-compressed
  unpack PACK WEIGHTS                 the file back, byte for byte

The formula (init_values): h = fmix32(element_index * 0x9E3779B1 +
fnv1a32(name)) (mod 2^32; MurmurHash3's finalizer), u = h / 2^32 in float64,
then cast to float32:
  - matrices and embeddings (2-D or more):  0.02 * sqrt(12) * (u - 0.5)
    (uniform with GPT-2's std 0.02)
  - LayerNorm weights (1-D, "ln" in the name, ".weight"): 1 + 0.02 * (u - 0.5)
  - other 1-D (biases):                     0.02 * (u - 0.5)
GPT-2 initializes LayerNorm to exactly 1 and biases to exactly 0; those
values are perturbed here (as make_params_distinct does) because
torch.onnx.export would merge equal-valued initializers into one shared
parameter.
"""

import argparse
import json
import math
import os
import struct
import sys
import zlib

import numpy as np

MAGIC = b"WEFTPACK1\n"


def fnv1a32(text):
    h = 0x811C9DC5
    for b in text.encode("utf-8"):
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def _hash(name, count, start=0):
    i = np.arange(start, start + count, dtype=np.uint64).astype(np.uint32)
    with np.errstate(over="ignore"):
        x = i * np.uint32(0x9E3779B1) + np.uint32(fnv1a32(name))
        x ^= x >> np.uint32(16)
        x *= np.uint32(0x85EBCA6B)
        x ^= x >> np.uint32(13)
        x *= np.uint32(0xC2B2AE35)
        x ^= x >> np.uint32(16)
    return x


def init_values(name, shape):
    """The float32 initial value of parameter `name` with `shape`."""
    count = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    out = np.empty(count, dtype=np.float32)
    step = 1 << 22
    for s in range(0, count, step):
        n = min(step, count - s)
        u = _hash(name, n, s).astype(np.float64) / 4294967296.0
        if len(shape) >= 2:
            v = (0.02 * math.sqrt(12.0)) * (u - 0.5)
        elif "ln" in name and name.endswith(".weight"):
            v = 1.0 + 0.02 * (u - 0.5)
        else:
            v = 0.02 * (u - 0.5)
        out[s:s + n] = v.astype(np.float32)
    return out.reshape(shape)


# --------------------------------------------------------------------------
# safetensors pack / unpack
# --------------------------------------------------------------------------
def read_header(path):
    with open(path, "rb") as f:
        head = f.read(8)
        (n,) = struct.unpack("<Q", head)
        raw = f.read(n)
    return head + raw, json.loads(raw)


def pack(weights, out):
    header_bytes, header = read_header(weights)
    base = len(header_bytes)
    size = os.path.getsize(weights)
    tensors = sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                     key=lambda kv: kv[1]["data_offsets"][0])
    segments, blobs, blob_at = [], [], 0
    formula_bytes = raw_bytes = 0
    with open(weights, "rb") as f:
        def raw(begin, end):
            nonlocal blob_at, raw_bytes
            f.seek(base + begin)
            z = zlib.compress(f.read(end - begin), 9)
            segments.append({"kind": "raw", "begin": begin, "end": end,
                             "blob": [blob_at, len(z)]})
            blobs.append(z)
            blob_at += len(z)
            raw_bytes += end - begin

        at = 0
        for name, t in tensors:
            begin, end = t["data_offsets"]
            if begin > at:
                raw(at, begin)
            f.seek(base + begin)
            data = f.read(end - begin)
            if t["dtype"] == "F32" and \
                    init_values(name, t["shape"]).tobytes() == data:
                segments.append({"kind": "formula", "begin": begin,
                                 "end": end, "name": name,
                                 "shape": t["shape"]})
                formula_bytes += end - begin
            else:
                raw(begin, end)
            at = end
        if base + at < size:
            raw(at, size - base)
    meta = json.dumps({"size": size, "header": len(header_bytes),
                       "segments": segments}).encode()
    with open(out, "wb") as f:
        f.write(MAGIC + struct.pack("<Q", len(meta)) + meta + header_bytes)
        for z in blobs:
            f.write(z)
    print("pack: %s: %d bytes, %.1f MB from the formula, %.1f MB verbatim "
          "-> %s (%d bytes)" % (weights, size, formula_bytes / 1e6,
                                raw_bytes / 1e6, out, os.path.getsize(out)))


def unpack(pack_path, out):
    with open(pack_path, "rb") as f:
        blob = f.read()
    if not blob.startswith(MAGIC):
        sys.exit("unpack: %s is not a gpu_weights.py pack" % pack_path)
    at = len(MAGIC)
    (n,) = struct.unpack("<Q", blob[at:at + 8])
    meta = json.loads(blob[at + 8:at + 8 + n])
    at += 8 + n
    header = blob[at:at + meta["header"]]
    blobs = at + meta["header"]
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header)
        for s in meta["segments"]:
            if s["kind"] == "formula":
                data = init_values(s["name"], s["shape"]).tobytes()
            else:
                o, zn = s["blob"]
                data = zlib.decompress(blob[blobs + o:blobs + o + zn])
            if len(data) != s["end"] - s["begin"] or \
                    f.tell() != len(header) + s["begin"]:
                sys.exit("unpack: segment at %d does not fit" % s["begin"])
            f.write(data)
    if os.path.getsize(tmp) != meta["size"]:
        sys.exit("unpack: wrote %d bytes, expected %d"
                 % (os.path.getsize(tmp), meta["size"]))
    os.replace(tmp, out)
    print("unpack: %s -> %s (%d bytes)" % (pack_path, out, meta["size"]))


# --------------------------------------------------------------------------
# export (torch 1.13, on the build machine)
# --------------------------------------------------------------------------
def set_formula_weights(model):
    """Sets every parameter of a torch module to init_values(its name)."""
    import torch
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(init_values(name, tuple(p.shape))))


def export(args):
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from export_gpt import GPT, export_onnx  # noqa: E402

    model = GPT(vocab=args.vocab, block_size=args.block, n_embd=args.embd,
                n_head=args.heads, n_layer=args.layers)
    set_formula_weights(model)
    model.eval()
    idx = torch.zeros((args.batch, args.block), dtype=torch.int64)
    # No constant folding: keeps every parameter under its PyTorch name
    # (the formula's key) and lm_head tied to wte, as GPT-2.
    path = export_onnx(model, idx, args.out, constant_folding=False)
    params = sum(p.numel() for p in model.parameters())
    print("export: gpt %d layers, d %d, %d heads, vocab %d, T %d, batch %d: "
          "%d parameters -> %s" % (args.layers, args.embd, args.heads,
                                   args.vocab, args.block, args.batch,
                                   params, path))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("--out", required=True)
    e.add_argument("--layers", type=int, default=12)
    e.add_argument("--embd", type=int, default=768)
    e.add_argument("--heads", type=int, default=12)
    e.add_argument("--vocab", type=int, default=50257)
    e.add_argument("--block", type=int, default=1024)
    e.add_argument("--batch", type=int, default=8)
    k = sub.add_parser("pack")
    k.add_argument("weights")
    k.add_argument("pack")
    u = sub.add_parser("unpack")
    u.add_argument("pack")
    u.add_argument("weights")
    args = p.parse_args(argv)
    if args.cmd == "export":
        export(args)
    elif args.cmd == "pack":
        pack(args.weights, args.pack)
    else:
        unpack(args.pack, args.weights)
    return 0


if __name__ == "__main__":
    sys.exit(main())
