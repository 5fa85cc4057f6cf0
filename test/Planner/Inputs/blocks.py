#!/usr/bin/python3
"""Exports a small CNN with numbered blocks, as weft-plan stats reads
them: OUT/cnn.onnx, 2 blocks of Conv2d(4, 4, 3, padding 1) + ReLU on 8x8
and a Linear head; batch 2, eval mode, default initialization."""
import argparse
import os

import torch
import torch.nn as nn


class ConvBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


class Net(nn.Module):
    def __init__(self, block, features):
        super().__init__()
        self.blocks = nn.ModuleList([block(), block()])
        self.head = nn.Linear(features, 10)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x.flatten(1))


p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
out = p.parse_args().out
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
torch.onnx.export(Net(ConvBlock, 4 * 8 * 8).eval(),
                  (torch.zeros(2, 4, 8, 8),), os.path.join(out, "cnn.onnx"),
                  opset_version=17, input_names=["input"],
                  output_names=["output"])
