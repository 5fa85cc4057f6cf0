#!/usr/bin/python3
"""Gradients of single ONNX ops (and small compositions) against PyTorch.

Usage:
  op_grads.py CASE... --out DIR --weftc WEFTC --weft-eval WEFT_EVAL [--rtol R]

Each CASE is a small nn.Module around the op under test, with parameters
feeding it so that its gradient rule decides every parameter's gradient.
For each case this exports the module with torch.onnx.export (eval mode,
opset 14, no constant folding, so parameters keep PyTorch's names), builds
the training step's loss and gradient function (`weftc --emit=train --loss
mse`), runs its @loss_grad on a fixed input and target with weft-eval and
compares the loss and every parameter gradient with torch.autograd on the
same values (max |weft - torch| / max |torch| <= rtol, 1e-5 by default).
Prints "CASE: loss <err>, grads <err> (<n> tensors) ok" or FAIL; exit 1 if
any case failed.

Needs torch 1.13, onnx and numpy: Debian's /usr/bin/python3.
"""

import argparse
import os
import subprocess
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class EinsumForms(nn.Module):
    """Three operands, `...`, an implicit output, a batched contraction, a
    transpose-only and a sum-only equation, a diagonal and a trace."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(5, 5))
        self.v = nn.Parameter(torch.randn(5, 3))
        self.u = nn.Parameter(torch.randn(3))

    def forward(self, x):  # x: [4, 2, 5]
        a = torch.einsum("bti,ij,btj->bt", x, self.w, x)
        b = torch.einsum("...i,ik->...k", x, self.v)
        c = torch.einsum("btk,k", b, self.u)
        d = torch.einsum("bti,bsi->bts", b, b).sum(-1)
        e = torch.einsum("btk->kbt", b * b)
        f = torch.einsum("bti->b", x * self.w[0]).unsqueeze(1)
        g = (x * torch.einsum("ii->i", self.w)).sum(-1)
        h = torch.einsum("bii->b", torch.einsum("bti,btj->bij", x, x @ self.w))
        return a + c + d + e.sum(0) + f + g + h.unsqueeze(1)


class TopKSmallest(nn.Module):
    """The 2 smallest along a leading axis, scaled per column."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):  # x: [4, 5, 6]
        v, _ = torch.topk(self.fc(x), 2, dim=1, largest=False)
        return v * torch.arange(1, 7, dtype=torch.float32)


class CumSumAxes(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):  # x: [4, 5, 6]
        h = self.fc(x)
        return torch.cumsum(h, dim=1) * torch.cumsum(h, dim=2)


class Conv3dForms(nn.Module):
    """Grouped, strided, dilated, asymmetrically padded, no bias; and a
    plain one with bias."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv3d(4, 6, (2, 3, 2), stride=(2, 1, 2), padding=(1, 0, 2),
                           dilation=(1, 2, 1), groups=2, bias=False)
        self.b = nn.Conv3d(6, 3, 1)

    def forward(self, x):  # x: [2, 4, 5, 7, 6]
        return self.b(torch.tanh(self.a(x)))


class Pool3dForms(nn.Module):
    """MaxPool3d with padding and uneven strides; AvgPool3d with padding
    not counted (an AveragePool node with pads) and counted."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(2, 3, 3, padding=1)

    def forward(self, x):  # x: [2, 2, 5, 6, 7]
        h = self.conv(x)
        m = F.max_pool3d(h, 3, stride=(1, 2, 2), padding=1)
        a = F.avg_pool3d(h, (3, 2, 3), stride=(2, 1, 2), padding=(1, 1, 0),
                         count_include_pad=False)
        c = F.avg_pool3d(h, 2, stride=2)
        return torch.cat([m.flatten(1), a.flatten(1), c.flatten(1)], dim=1)


class LstmStates(nn.Module):
    """2-layer bidirectional sequence-first LSTM whose initial h and c are
    parameters; the output reads Y, Y_h and Y_c."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(5, 4, num_layers=2, bidirectional=True)
        self.h0 = nn.Parameter(torch.randn(4, 3, 4))
        self.c0 = nn.Parameter(torch.randn(4, 3, 4))

    def forward(self, x):  # x: [6, 3, 5]
        y, (h, c) = self.rnn(x, (self.h0, self.c0))
        return torch.cat([y.transpose(0, 1).flatten(1),
                          h.transpose(0, 1).flatten(1), (c * c).transpose(0, 1).flatten(1)], dim=1)


class GruStates(nn.Module):
    """Bidirectional batch_first GRU with a parameter initial state; the
    output reads Y and Y_h."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(5, 4, bidirectional=True, batch_first=True)
        self.h0 = nn.Parameter(torch.randn(2, 3, 4))

    def forward(self, x):  # x: [3, 6, 5]
        y, h = self.rnn(x, self.h0)
        return torch.cat([y.flatten(1), h.transpose(0, 1).flatten(1)], dim=1)


class RnnNoBias(nn.Module):
    """bias=False (no B input) and no initial state (zero states): an LSTM
    feeding a GRU, sequence-first."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(5, 4, bias=False)
        self.gru = nn.GRU(4, 3, bias=False)

    def forward(self, x):  # x: [6, 3, 5]
        y, _ = self.lstm(x)
        z, _ = self.gru(y)
        return z


CASES = {
    "einsum": (EinsumForms, (4, 2, 5)),
    "topk": (TopKSmallest, (4, 5, 6)),
    "cumsum": (CumSumAxes, (4, 5, 6)),
    "conv3d": (Conv3dForms, (2, 4, 5, 7, 6)),
    "pool3d": (Pool3dForms, (2, 2, 5, 6, 7)),
    "lstm": (LstmStates, (6, 3, 5)),
    "gru": (GruStates, (3, 6, 5)),
    "rnn_nobias": (RnnNoBias, (6, 3, 5)),
}


def rel_err(got, want):
    scale = max(float(np.max(np.abs(want))), 1e-30)
    return float(np.max(np.abs(got.astype(np.float64) - want))) / scale


def run_case(name, args):
    cls, shape = CASES[name]
    torch.manual_seed(0)
    model = cls()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(shape, generator=g)
    out = model(x)
    y = torch.randn(out.shape, generator=g)
    folder = os.path.join(args.out, name)
    os.makedirs(folder, exist_ok=True)
    onnx_path = os.path.join(folder, name + ".onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.eval(), (x,), onnx_path, input_names=["input"],
                          output_names=["output"], opset_version=14,
                          do_constant_folding=False)
    np.save(os.path.join(folder, "input.npy"), x.numpy())
    np.save(os.path.join(folder, "labels.npy"), y.numpy())

    model.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    want = {"loss": loss.detach().numpy()}
    for pname, p in model.named_parameters():
        want["grad." + pname] = p.grad.numpy()

    train = os.path.join(folder, "train.mlir")
    weft_dir = os.path.join(folder, "weft")
    for cmd in ([args.weftc, onnx_path, "--emit=train", "--loss", "mse", "-o", train],
                [args.weft_eval, train, "--fn", "loss_grad",
                 "--input", "input=" + os.path.join(folder, "input.npy"),
                 "--input", "labels=" + os.path.join(folder, "labels.npy"),
                 "--output-dir", weft_dir]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{name}: FAIL: {os.path.basename(cmd[0])} exited "
                  f"{r.returncode}: {r.stderr.strip()}")
            return False
    worst = {}
    for key, value in want.items():
        path = os.path.join(weft_dir, key + ".npy")
        if not os.path.exists(path):
            print(f"{name}: FAIL: weft wrote no {key}.npy")
            return False
        worst[key] = rel_err(np.load(path), value.astype(np.float64))
    grads = {k: v for k, v in worst.items() if k != "loss"}
    gworst = max(grads.values())
    bad = [k for k, v in worst.items() if v > args.rtol]
    status = "ok" if not bad else "FAIL " + ", ".join(
        f"{k} {worst[k]:.2g}" for k in bad)
    print(f"{name}: loss {worst['loss']:.2g}, grads {gworst:.2g} "
          f"({len(grads)} tensors) {status}")
    return not bad


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cases", nargs="+", choices=sorted(CASES))
    p.add_argument("--out", required=True)
    p.add_argument("--weftc", required=True)
    p.add_argument("--weft-eval", required=True)
    p.add_argument("--rtol", type=float, default=1e-5)
    args = p.parse_args()
    ok = all([run_case(c, args) for c in args.cases])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
