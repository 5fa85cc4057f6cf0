#!/usr/bin/python3
"""Exports a residual MLP whose layers (h.0, h.1) run dropout inside:
x + fc2(tanh(dropout(fc1(x)))). tanh's adjoint reads tanh's output, which
only the layer reads, so --recompute=full reruns fc1, the dropout and tanh
in the backward: the recomputed dropout must draw the forward's mask.

  recompute_case.py OUT_DIR      writes OUT_DIR/model.onnx
"""

import os
import sys

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.drop = nn.Dropout(0.3)
        self.fc2 = nn.Linear(32, 16)

    def forward(self, x):
        return x + self.fc2(torch.tanh(self.drop(self.fc1(x))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.h = nn.ModuleList([Block(), Block()])
        self.out = nn.Linear(16, 10)

    def forward(self, x):
        x = self.inp(x)
        for block in self.h:
            x = block(x)
        return self.out(x)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    os.makedirs(sys.argv[1], exist_ok=True)
    torch.manual_seed(0)
    model = Net().train()
    torch.onnx.export(model, (torch.randn(4, 8),),
                      os.path.join(sys.argv[1], "model.onnx"),
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
