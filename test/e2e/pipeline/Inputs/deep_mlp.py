#!/usr/bin/python3
"""Exports a deep MLP (LAYERS x Linear(WIDTH, WIDTH) + ReLU, then a 10-class
head) from PyTorch as a user would (eval mode, default initialization),
with training data: OUT/deep.onnx, OUT/x.npy, OUT/y.npy."""
import argparse
import os

import numpy as np
import torch
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--layers", type=int, default=4)
p.add_argument("--width", type=int, default=512)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--samples", type=int, default=512)
a = p.parse_args()
os.makedirs(a.out, exist_ok=True)
torch.manual_seed(0)
mods = []
for _ in range(a.layers):
    mods += [nn.Linear(a.width, a.width), nn.ReLU()]
mods.append(nn.Linear(a.width, 10))
model = nn.Sequential(*mods).eval()
torch.onnx.export(model, (torch.zeros(a.batch, a.width),),
                  os.path.join(a.out, "deep.onnx"), opset_version=17,
                  input_names=["input"], output_names=["output"])
rng = np.random.default_rng(1)
np.save(os.path.join(a.out, "x.npy"),
        rng.standard_normal((a.samples, a.width), dtype=np.float32))
np.save(os.path.join(a.out, "y.npy"), rng.integers(0, 10, a.samples))
