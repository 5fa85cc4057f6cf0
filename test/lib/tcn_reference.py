#!/usr/bin/python3
"""A small temporal convolutional network with every kind of padding, and
its gradients from torch.autograd, for Weft's gradient tests.

Usage:
  tcn_reference.py --out DIR [--opset 17] [--seed 0]
      [--train-steps N --lr LR --momentum M --weight-decay W]

Writes DIR/tcn.onnx (exported as a user would, in eval mode, with constant
folding off so initializers keep PyTorch's names), DIR/input.npy, and under
DIR/torch: labels.npy (an MSE target), loss.npy and grad.<param>.npy for
every named parameter, the loss being F.mse_loss(model(input), labels), as
weftc --loss mse builds it.

With --train-steps N it also trains a copy of the model N steps with
torch.optim.SGD (foreach=False) on fresh batches and writes, as
torch_reference.py's train command does, DIR/run/input_<s>.npy and
DIR/run/labels_<s>.npy, and under DIR/run/ref the loss of every step
(loss_<s>.npy), the final parameters (<name>.npy) and momentum buffers
(momentum_buffer.<name>.npy), for exe_check.py.

The model pads in every way PyTorch exports to ONNX: Conv1d's own padding
(Conv pads), F.pad for a causal dilated conv and nn.ConstantPad1d with a
non-zero value (Pad constant, weft.pad), nn.ReflectionPad1d (Pad reflect)
and nn.ReplicationPad1d (Pad edge), then upsamples with ConvTranspose1d.
Every parameter's only path to the loss crosses a pad, so each gradient
checks a pad's adjoint.

Needs torch (1.13), onnx and numpy: Debian's /usr/bin/python3.
"""

import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class TCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv0 = nn.Conv1d(3, 4, 3, padding=1)
        self.conv1 = nn.Conv1d(4, 4, 3, dilation=2)
        self.pad2 = nn.ConstantPad1d((1, 2), 0.5)
        self.conv2 = nn.Conv1d(4, 4, 3)
        self.pad3 = nn.ReflectionPad1d(2)
        self.conv3 = nn.Conv1d(4, 4, 5)
        self.pad4 = nn.ReplicationPad1d((2, 0))
        self.conv4 = nn.Conv1d(4, 4, 3)
        self.up = nn.ConvTranspose1d(4, 2, 3, stride=2, padding=1)

    def forward(self, x):                          # x: N x 3 x 12
        h = torch.relu(self.conv0(x))              # 12
        # Causal residual block: pad (k - 1) * dilation cells on the left.
        h = h + torch.tanh(self.conv1(F.pad(h, (4, 0))))  # 12
        h = torch.relu(self.conv2(self.pad2(h)))   # 15 -> 13
        h = torch.tanh(self.conv3(self.pad3(h)))   # 17 -> 13
        h = torch.relu(self.conv4(self.pad4(h)))   # 15 -> 13
        return self.up(h)                          # 25


def save(path, tensor):
    np.save(path, tensor.detach().cpu().numpy())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-steps", type=int, default=0)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.0)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    model = TCN().eval()
    x = torch.randn(2, 3, 12)
    ref = os.path.join(args.out, "torch")
    os.makedirs(ref, exist_ok=True)
    torch.onnx.export(model, (x,), os.path.join(args.out, "tcn.onnx"),
                      input_names=["input"], output_names=["output"],
                      opset_version=args.opset, do_constant_folding=False)
    save(os.path.join(args.out, "input.npy"), x)

    out = model(x)
    y = torch.randn(out.shape, generator=torch.Generator().manual_seed(7))
    loss = F.mse_loss(out, y)
    loss.backward()
    save(os.path.join(ref, "labels.npy"), y)
    save(os.path.join(ref, "loss.npy"), loss)
    for name, param in model.named_parameters():
        save(os.path.join(ref, "grad.%s.npy" % name), param.grad)
    print("tcn: loss %.6f, %d parameters -> %s"
          % (loss.item(), len(list(model.parameters())), args.out))
    if args.train_steps:
        train(model, x.shape, y.shape, args)
    return 0


def train(model, x_shape, y_shape, args):
    run = os.path.join(args.out, "run")
    ref = os.path.join(run, "ref")
    os.makedirs(ref, exist_ok=True)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr,
                          momentum=args.momentum,
                          weight_decay=args.weight_decay, foreach=False)
    g = torch.Generator().manual_seed(args.seed + 1)
    for s in range(args.train_steps):
        x = torch.randn(x_shape, generator=g)
        y = torch.randn(y_shape, generator=g)
        save(os.path.join(run, "input_%d.npy" % s), x)
        save(os.path.join(run, "labels_%d.npy" % s), y)
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        save(os.path.join(ref, "loss_%d.npy" % s), loss)
    for name, param in model.named_parameters():
        save(os.path.join(ref, "%s.npy" % name), param)
        if args.momentum > 0:
            save(os.path.join(ref, "momentum_buffer.%s.npy" % name),
                 opt.state[param]["momentum_buffer"])
    print("tcn: sgd, %d steps, final loss %.6f"
          % (args.train_steps, loss.item()))


if __name__ == "__main__":
    raise SystemExit(main())
