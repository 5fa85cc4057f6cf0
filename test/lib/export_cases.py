#!/usr/bin/python3
"""Small PyTorch exports for the importer's tensor classification tests
(test/Import/initializers.test).

Usage:
  export_cases.py CASE OUT_DIR

Writes OUT_DIR/model.onnx and OUT_DIR/state.safetensors-like .npy files
OUT_DIR/<state_dict name>.npy (PyTorch's initial values, for comparing what
weftc reads). Cases:

  merged    eval mode, torch.onnx.export's defaults: two LayerNorms and two
            zero biases that the exporter merges into Identity nodes
  helper    the same model through python/weft_export.py with
            torch.onnx.export's defaults (eval mode, constant folding), plus
            a -inf mask buffer and a Linear on 3-D input (a folded,
            transposed `onnx::MatMul_N` weight)
  mask      plain eval export of a model with a -inf mask buffer
  bn        training-mode export of a BatchNorm1d model
  dropout   training-mode export of an MLP with Dropout(0.3)
  folded    eval-mode export of Conv2d + BatchNorm2d (folded by the exporter),
            and OUT_DIR/freeze.rsp freezing the folded weights
"""

import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))


class Merged(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 6)
        self.ln1 = nn.LayerNorm(6)
        self.ln2 = nn.LayerNorm(6)
        self.fc2 = nn.Linear(6, 3)
        nn.init.zeros_(self.fc1.bias)
        nn.init.zeros_(self.fc2.bias)

    def forward(self, x):
        return self.fc2(self.ln2(self.ln1(self.fc1(x))))


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.ln = nn.LayerNorm(4)
        self.register_buffer("mask", torch.full((4, 4), float("-inf")).triu(1))

    def forward(self, x):  # x: [B, 4, 4]
        scores = self.proj(self.ln(x)) + self.mask
        return torch.softmax(scores, dim=-1)


class Bn(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 6)
        self.bn = nn.BatchNorm1d(6)

    def forward(self, x):
        return self.bn(self.fc(x))


class Dropped(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.drop = nn.Dropout(0.3)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


class Folded(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3)
        self.bn = nn.BatchNorm2d(3)
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(self.bn(self.conv(x)).mean(dim=(2, 3)))


def main():
    case, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    path = os.path.join(out, "model.onnx")
    warnings.simplefilter("ignore")
    if case in ("merged", "helper"):
        model, x = Merged(), torch.randn(2, 6)
        if case == "helper":
            import weft_export
            model, x = Masked(), torch.randn(2, 4, 4)
            model.eval()
            weft_export.export(model, (x,), path, do_constant_folding=True,
                               training=torch.onnx.TrainingMode.EVAL)
        else:
            model.eval()
            torch.onnx.export(model, (x,), path)
    elif case == "mask":
        model = Masked().eval()
        torch.onnx.export(model, (torch.randn(2, 4, 4),), path)
    elif case == "bn":
        model = Bn().train()
        torch.onnx.export(model, (torch.randn(4, 5),), path,
                          training=torch.onnx.TrainingMode.TRAINING)
    elif case == "dropout":
        model = Dropped().train()
        torch.onnx.export(model, (torch.randn(4, 8),), path,
                          training=torch.onnx.TrainingMode.TRAINING)
    elif case == "folded":
        model = Folded().eval()
        torch.onnx.export(model, (torch.randn(2, 2, 5, 5),), path)
        # The exporter numbers the folded weights: a response file that
        # freezes them, for `weftc @freeze.rsp`.
        import onnx
        names = [i.name for i in onnx.load(path).graph.initializer
                 if i.name.startswith("onnx::Conv")]
        with open(os.path.join(out, "freeze.rsp"), "w") as f:
            f.write("--freeze=%s\n" % ",".join(names))
    else:
        sys.exit("unknown case " + case)
    for name, value in model.state_dict().items():
        if value.is_floating_point():
            np.save(os.path.join(out, name + ".npy"), value.numpy())
    return 0


if __name__ == "__main__":
    sys.exit(main())
