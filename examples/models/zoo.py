#!/usr/bin/python3
"""A zoo of small PyTorch models, exported the way a user would export them.

export.py holds the models Weft was written against; these are the ones it
was not: other activations, BatchNorm, depthwise and dilated convolutions,
pooling with padding and ceil_mode, nn.MultiheadAttention, hand-written
attention, RMSNorm, 1-D convolutions, transposed convolutions, upsampling
and a grab bag of tensor ops. Each model has a few thousand parameters.

Usage:
  /usr/bin/python3 examples/models/zoo.py NAME --out DIR
      [--opset N] [--batch B] [--seed S] [--dynamic-batch]
  /usr/bin/python3 examples/models/zoo.py --all --out DIR [same options]
  /usr/bin/python3 examples/models/zoo.py --list

Writes NAME.onnx, input.npy and expected.npy to DIR (with --all, to
DIR/NAME/ for every model that exports at that opset). Export settings match
export.py: eval mode, do_constant_folding=True, input "input", output
"output", opset 17 by default. --dynamic-batch makes the batch axis (dim 0,
or dim 1 for sequence-first models) symbolic; `--list` prints the static
input shape to give weftc as --input-shape.
"""

import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export import make_params_distinct  # noqa: E402

DEFAULT_OPSET = 17


# --------------------------------------------------------------------------
# MLPs
# --------------------------------------------------------------------------
class MLPActs(nn.Module):
    """LeakyReLU, ELU, SiLU, GELU, Softplus between Linear layers."""

    input_spec = ("float", (16,))

    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(16, 32), nn.Linear(32, 32)
        self.l3, self.l4 = nn.Linear(32, 32), nn.Linear(32, 8)
        self.acts = nn.ModuleList([nn.LeakyReLU(0.1), nn.ELU(), nn.SiLU()])

    def forward(self, x):
        x = self.acts[0](self.l1(x))
        x = self.acts[1](self.l2(x))
        x = self.acts[2](self.l3(x))
        return self.l4(F.softplus(F.gelu(x)))


class MLPActs2(nn.Module):
    """Hardtanh, ReLU6, Hardsigmoid, Hardswish, PReLU, SELU, Mish, Softsign,
    Hardshrink (Or of two comparisons), sign, Dropout and LogSoftmax."""

    input_spec = ("float", (16,))

    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(16, 32), nn.Linear(32, 32)
        self.l3 = nn.Linear(32, 10)
        self.prelu = nn.PReLU(32)
        self.drop = nn.Dropout(0.25)

    def forward(self, x):
        x = 2 * self.l1(x)
        x = F.hardtanh(x, -1.5, 1.5) + F.relu6(3 * x) + F.hardsigmoid(x) + F.hardswish(x)
        x = self.prelu(self.l2(x))
        x = F.selu(x) + F.mish(x) + F.softsign(x) + F.hardshrink(x, 0.5) + 0.1 * torch.sign(x)
        return F.log_softmax(self.l3(self.drop(x)), dim=-1)


class MLPBatchNorm(nn.Module):
    """BatchNorm1d after Linear stays a BatchNormalization node (nothing to
    fold it into)."""

    input_spec = ("float", (16,))

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(),
            nn.Linear(32, 32), nn.BatchNorm1d(32), nn.Tanh(),
            nn.Identity(), nn.Linear(32, 5))

    def forward(self, x):
        return self.net(x)


# --------------------------------------------------------------------------
# CNNs
# --------------------------------------------------------------------------
class CNNBatchNorm(nn.Module):
    """BatchNorm2d on the input (not foldable), Conv+BN (folded), stride 2,
    AdaptiveAvgPool2d((1, 1)) and x.view(B, -1)."""

    input_spec = ("float", (3, 12, 12))

    def __init__(self):
        super().__init__()
        self.bn0 = nn.BatchNorm2d(3)
        self.c1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, 6)

    def forward(self, x):
        x = F.relu(self.bn1(self.c1(self.bn0(x))))
        x = F.relu(self.bn2(self.c2(x)))
        x = self.pool(x)
        return self.fc(x.view(x.size(0), -1))


class CNNDepthwise(nn.Module):
    """Pointwise, depthwise (groups=C), dilated and grouped convs.
    (padding="same" does not export from torch 1.13: aten::_convolution_mode
    has no ONNX symbolic.)"""

    input_spec = ("float", (3, 10, 10))

    def __init__(self):
        super().__init__()
        self.pw1 = nn.Conv2d(3, 8, 1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pw2 = nn.Conv2d(8, 12, 1)
        self.dil = nn.Conv2d(12, 12, 3, dilation=2, padding=2)
        self.same = nn.Conv2d(12, 8, 3, padding=1)
        self.grouped = nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = F.relu6(self.dw(self.pw1(x)))
        x = F.relu(self.dil(self.pw2(x)))
        x = F.silu(self.grouped(self.same(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class CNNPool(nn.Module):
    """MaxPool with padding, AvgPool with ceil_mode and with
    count_include_pad (a Pad node), flatten(1)."""

    input_spec = ("float", (4, 11, 11))

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(4, 8, 3, padding=1)
        self.mp = nn.MaxPool2d(3, stride=2, padding=1)             # 11 -> 6
        self.ap = nn.AvgPool2d(3, stride=1, padding=1)             # 6 -> 6, counts pads
        self.apc = nn.AvgPool2d(2, ceil_mode=True)                 # 6 -> 3
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.mpc = nn.MaxPool2d(2, ceil_mode=True)                 # 3 -> 2
        self.fc = nn.Linear(8 * 2 * 2, 5)

    def forward(self, x):
        x = self.mp(F.relu(self.c1(x)))
        x = self.apc(self.ap(x))
        x = self.mpc(F.relu(self.c2(x)))
        return self.fc(torch.flatten(x, 1))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNetTiny(nn.Module):
    """ResNet stem (conv, BN, maxpool with padding), two basic blocks, the
    second downsampling, and a pre-activation BN that cannot be folded."""

    input_spec = ("float", (3, 16, 16))

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(3, stride=2, padding=1))
        self.block1 = BasicBlock(8, 8, 1)
        self.block2 = BasicBlock(8, 16, 2)
        self.post = nn.BatchNorm2d(16)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.block2(self.block1(self.stem(x)))
        x = self.pool(F.relu(self.post(x)))
        return self.fc(torch.flatten(x, 1))


class CNNChannelAttention(nn.Module):
    """Squeeze-and-excitation from average and max pooling: AdaptiveMaxPool2d
    (GlobalMaxPool), amax over H and W, a sigmoid gate and a broadcast mul."""

    input_spec = ("float", (4, 8, 8))

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(4, 16, 3, padding=1)
        self.fc1 = nn.Linear(16, 4)
        self.fc2 = nn.Linear(4, 16)
        self.head = nn.Linear(32, 3)

    def forward(self, x):
        x = F.relu(self.c1(x))
        avg = F.adaptive_avg_pool2d(x, 1).flatten(1)
        mx = F.adaptive_max_pool2d(x, 1).flatten(1)
        gate = torch.sigmoid(self.fc2(F.relu(self.fc1(avg))) +
                             self.fc2(F.relu(self.fc1(mx))))
        x = x * gate[:, :, None, None]
        return self.head(torch.cat([x.mean(dim=(2, 3)), x.amax(dim=(2, 3))], dim=1))


class Conv1dText(nn.Module):
    """A text CNN: Embedding, transpose to channels-first, Conv1d, MaxPool1d,
    ConvTranspose1d, AvgPool1d with ceil_mode, max over time."""

    input_spec = ("int", 40, (16,))

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(40, 12)
        self.conv = nn.Conv1d(12, 16, 3, padding=1)
        self.pool = nn.MaxPool1d(2)
        self.conv2 = nn.Conv1d(16, 16, 3, dilation=2, padding=2, groups=4)
        self.up = nn.ConvTranspose1d(16, 8, 3, stride=2, padding=1, output_padding=1)
        self.avg = nn.AvgPool1d(3, ceil_mode=True)
        self.fc = nn.Linear(8, 4)

    def forward(self, idx):
        x = self.emb(idx).transpose(1, 2)        # B, C, T=16
        x = self.pool(F.relu(self.conv(x)))       # T=8
        x = self.up(F.relu(self.conv2(x)))        # T=16
        x = self.avg(F.relu(x))                   # T=6
        return self.fc(x.max(dim=-1).values)


class AutoEncoder(nn.Module):
    """Strided conv down, ConvTranspose2d and nearest Upsample back up, a
    U-Net style skip concatenation."""

    input_spec = ("float", (2, 8, 8))

    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(2, 8, 3, stride=2, padding=1)        # 8 -> 4
        self.down2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)       # 4 -> 2
        self.up = nn.Upsample(scale_factor=2, mode="nearest")      # 2 -> 4
        self.mix = nn.Conv2d(16, 8, 1)
        self.deconv = nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1)  # 4 -> 8
        self.out = nn.Conv2d(4, 2, 3, padding=1)

    def forward(self, x):
        d1 = F.relu(self.down(x))
        d2 = F.relu(self.down2(d1))
        u = F.relu(self.mix(torch.cat([self.up(d2), d1], dim=1)))
        return torch.sigmoid(self.out(F.relu(self.deconv(u))))


class UpsampleModes(nn.Module):
    """Bilinear interpolation (align_corners False and True, by scale and
    by size), nearest to a size, PixelShuffle, and AdaptiveAvgPool2d and
    AdaptiveMaxPool2d to 2x2."""

    input_spec = ("float", (4, 6, 6))

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(4, 8, 3, padding=1)
        self.shuffle = nn.PixelShuffle(2)                    # 8x6x6 -> 2x12x12
        self.c2 = nn.Conv2d(2 + 8 + 8 + 8, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 2, 5)

    def forward(self, x):
        y = F.relu(self.c1(x))
        up = [self.shuffle(y),
              F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False),
              F.interpolate(y, size=(12, 12), mode="bilinear", align_corners=True),
              F.interpolate(y, size=(12, 12), mode="nearest")]
        z = F.relu(self.c2(torch.cat(up, dim=1)))
        pooled = torch.cat([F.adaptive_avg_pool2d(z, (2, 2)),
                            F.adaptive_max_pool2d(z, (2, 2))], dim=1)
        return self.fc(pooled.flatten(1))


class PaddingModes(nn.Module):
    """Conv2d(padding_mode="reflect"), ReplicationPad2d, ZeroPad2d,
    ConstantPad1d, F.pad with a negative (cropping) pad."""

    input_spec = ("float", (3, 7, 7))

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 6, 3, padding=1, padding_mode="reflect")
        self.rep = nn.ReplicationPad2d((1, 2, 0, 1))
        self.zero = nn.ZeroPad2d(1)
        self.c2 = nn.Conv2d(6, 4, 3, stride=2)
        self.fc = nn.Linear(4 * 5 * 4, 3)

    def forward(self, x):
        x = F.relu(self.c1(x))                       # 6x7x7
        x = self.zero(self.rep(x))                   # 6x10x12
        x = F.pad(F.relu(self.c2(x)), (0, -1))       # 4x4x5 -> 4x4x4
        x = F.pad(x, (0, 0, 1, 0), value=0.5)        # 4x5x4
        return self.fc(x.flatten(1))


class GroupNormCNN(nn.Module):
    """GroupNorm and InstanceNorm2d (affine) between convolutions."""

    input_spec = ("float", (4, 6, 6))

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(4, 8, 3, padding=1)
        self.gn = nn.GroupNorm(2, 8)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.inorm = nn.InstanceNorm2d(8, affine=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        x = F.silu(self.gn(self.c1(x)))
        x = F.relu(self.inorm(self.c2(x)))
        return self.fc(x.mean(dim=(2, 3)))


# --------------------------------------------------------------------------
# Sequence models
# --------------------------------------------------------------------------
class EmbedMean(nn.Module):
    """Embedding + mean pooling classifier (fastText style)."""

    input_spec = ("int", 50, (10,))

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.fc1 = nn.Linear(16, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, idx):
        return self.fc2(F.relu(self.fc1(self.emb(idx).mean(dim=1))))


class EmbedMaskedMean(nn.Module):
    """Mean over non-padding tokens: mask from idx != 0, sum / clamp(count)."""

    input_spec = ("int", 20, (10,))

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 16, padding_idx=0)
        self.fc = nn.Linear(16, 4)

    def forward(self, idx):
        mask = (idx != 0).unsqueeze(-1).float()
        x = (self.emb(idx) * mask).sum(dim=1)
        x = x / torch.clamp(mask.sum(dim=1), min=1.0)
        return self.fc(x)


class MHABatchFirst(nn.Module):
    """nn.MultiheadAttention(batch_first=True), need_weights=False, residual,
    LayerNorm."""

    input_spec = ("float", (8, 16))

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
        self.ln = nn.LayerNorm(16)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        y, _ = self.attn(x, x, x, need_weights=False)
        return self.fc(self.ln(x + y))


class MHASeqFirst(nn.Module):
    """nn.MultiheadAttention(batch_first=False) on [T, B, E], with the
    averaged attention weights used too."""

    input_spec = ("float", (8, 16))
    batch_dim = 1

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 2)
        self.fc = nn.Linear(16 + 8, 4)

    def forward(self, x):
        y, w = self.attn(x, x, x)                  # y: T,B,E  w: B,T,T
        return self.fc(torch.cat([y, w.permute(1, 0, 2)], dim=-1))


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class ManualAttention(nn.Module):
    """Fused qkv split with chunk(3, dim=-1), 4-D torch.matmul, a triu mask
    buffer with masked_fill(-1e9), softmax via Tensor.softmax."""

    def __init__(self, dim, heads, block):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.register_buffer("mask", torch.triu(torch.ones(block, block), diagonal=1).bool())

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(B, T, self.heads, -1).permute(0, 2, 1, 3)
        k = k.view(B, T, self.heads, -1).permute(0, 2, 1, 3)
        v = v.view(B, T, self.heads, -1).permute(0, 2, 1, 3)
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        att = att.masked_fill(self.mask[:T, :T], -1e9).softmax(-1)
        y = torch.matmul(att, v).permute(0, 2, 1, 3).reshape(B, T, C)
        return self.proj(y)


class GPTRMS(nn.Module):
    """Llama-style decoder: RMSNorm, manual attention, SwiGLU MLP."""

    input_spec = ("int", 32, (12,))

    def __init__(self, vocab=32, dim=16, block=12):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(0.02 * torch.randn(1, block, dim))
        self.n1, self.n2, self.nf = RMSNorm(dim), RMSNorm(dim), RMSNorm(dim)
        self.attn = ManualAttention(dim, 2, block)
        self.w1 = nn.Linear(dim, 32, bias=False)
        self.w3 = nn.Linear(dim, 32, bias=False)
        self.w2 = nn.Linear(32, dim, bias=False)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        T = idx.size(1)
        x = self.tok(idx) + self.pos[:, :T]
        x = x + self.attn(self.n1(x))
        h = self.n2(x)
        x = x + self.w2(F.silu(self.w1(h)) * self.w3(h))
        return self.head(self.nf(x))


class GPTBmm(nn.Module):
    """Attention over [B*H, T, hd] with torch.bmm, a tril mask built in
    forward() from torch.ones (folded), -inf fill, exact GELU, and
    mean-pooled output."""

    input_spec = ("float", (10, 16))
    min_opset = 14  # torch.tril in forward() exports as Trilu

    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.ln1 = nn.LayerNorm(dim)
        self.ln2 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 32), nn.GELU(), nn.Linear(32, dim))
        self.head = nn.Linear(dim, 3)

    def split(self, t, B, T):
        return t.view(B, T, self.heads, -1).transpose(1, 2).reshape(B * self.heads, T, -1)

    def forward(self, x):
        B, T, C = x.size()
        h = self.ln1(x)
        q, k, v = (self.split(f(h), B, T) for f in (self.q, self.k, self.v))
        att = torch.bmm(q, k.transpose(1, 2)) * (q.size(-1) ** -0.5)
        causal = torch.tril(torch.ones(T, T)) == 0
        att = F.softmax(att.masked_fill(causal, float("-inf")), dim=-1)
        y = torch.bmm(att, v).view(B, self.heads, T, -1).transpose(1, 2).reshape(B, T, C)
        x = x + self.o(y)
        x = x + self.ff(self.ln2(x))
        return self.head(x.mean(dim=1))


class ViTTiny(nn.Module):
    """Patch embedding by strided conv, flatten(2).transpose(1, 2), a class
    token expanded over the batch and concatenated, learned positions, a
    pre-norm GELU TransformerEncoderLayer, head on x[:, 0]."""

    input_spec = ("float", (3, 8, 8))

    def __init__(self, dim=16):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 4, stride=4)
        self.cls = nn.Parameter(0.02 * torch.randn(1, 1, dim))
        self.pos = nn.Parameter(0.02 * torch.randn(1, 5, dim))
        self.enc = nn.TransformerEncoderLayer(dim, 2, 32, dropout=0.0, activation="gelu",
                                              batch_first=True, norm_first=True)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 5)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.size(0), -1, -1), x], dim=1) + self.pos
        x = self.norm(self.enc(x))
        return self.head(x[:, 0])


class CausalTransformer(nn.Module):
    """Sequence-first nn.TransformerEncoder (batch_first=False) on int
    tokens [T, B] with a generate_square_subsequent_mask causal mask, and
    nn.MultiheadAttention with a boolean attn_mask."""

    input_spec = ("int", 24, (8,))
    batch_dim = 1

    def __init__(self, dim=16, block=8):
        super().__init__()
        self.emb = nn.Embedding(24, dim)
        self.pos = nn.Parameter(0.02 * torch.randn(block, 1, dim))
        layer = nn.TransformerEncoderLayer(dim, 2, 32, dropout=0.0)
        self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.attn = nn.MultiheadAttention(dim, 2)
        self.register_buffer("float_mask", nn.Transformer.generate_square_subsequent_mask(block))
        self.register_buffer("bool_mask", torch.triu(torch.ones(block, block, dtype=torch.bool), 1))
        self.head = nn.Linear(dim, 24)

    def forward(self, idx):
        T = idx.size(0)
        x = self.emb(idx) + self.pos[:T]
        x = self.enc(x, mask=self.float_mask[:T, :T])
        y, _ = self.attn(x, x, x, attn_mask=self.bool_mask[:T, :T], need_weights=False)
        return self.head(x + y)


class TensorOps2(nn.Module):
    """More tensor ops on [B, 6, 8]: x[:, -1], flip, step slices, var and
    std, cosine_similarity, GLU, LogSigmoid, Softmin, expand, a full
    mean, torch.maximum, zeros_like, new_ones, baddbmm and a broadcast outer
    product."""

    input_spec = ("float", (6, 8))

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(0.1 * torch.randn(8, 8))
        self.fc = nn.Linear(8 + 8 + 12 + 12 + 6 * 6 + 4 + 48, 4)

    def forward(self, x):
        B = x.shape[0]
        last = x[:, -1]                                                      # B,8
        flipped = x.flip(-1)[:, 0]                                           # B,8
        every_other = x[:, ::2, 1::2].reshape(B, -1)                         # B,12
        stats = torch.cat([x.var(dim=-1), x.std(dim=-1, unbiased=False)], dim=-1)  # B,12
        cos = F.cosine_similarity(x, x.flip(1), dim=-1)                      # B,6
        glu = F.glu(x, dim=-1)                                               # B,6,4
        soft = F.logsigmoid(glu).mean(-1) + F.softmin(x, dim=-1).amax(-1)    # B,6
        centered = torch.maximum(x - x.mean(), torch.zeros_like(x)).sum(-1)  # B,6
        bias = self.w[0].expand(B, 4, 8).mean(1)[:, :4]       # B,4
        mixed = torch.baddbmm(x.new_ones(B, 6, 6), x, x.transpose(1, 2),
                              beta=0.5, alpha=2.0).mean(1)                   # B,6
        outer = (x.mean(1).unsqueeze(-1) * x.mean(2).unsqueeze(1)).sum(1)    # B,6
        prod = (x.unsqueeze(-1) * x[:, :1].unsqueeze(-2)).mean(-1).reshape(B, -1)  # B,48
        return self.fc(torch.cat([last, flipped, every_other, stats, cos, glu.sum(-1),
                                  soft, centered, bias, mixed, outer, prod], dim=1))


class LayerNormNoAffine(nn.Module):
    """LayerNorm(elementwise_affine=False). torch 1.13 exports it only below
    opset 17 (at 17 it writes a LayerNormalization without its required
    Scale input, which the ONNX checker rejects), so as ReduceMean, Sub,
    Pow, Sqrt and Div."""

    input_spec = ("float", (6, 16))
    max_opset = 16

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 16)
        self.ln = nn.LayerNorm(16, elementwise_affine=False)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.gelu(self.ln(self.fc1(x)), approximate="tanh"))


class TensorOps(nn.Module):
    """A grab bag on [B, 4, 8]: permute, cat, mean, sum, max(dim).values,
    sqrt, pow, where, clamp, expand, repeat, unsqueeze/squeeze, normalize,
    softmax, 3-D matmul, stack, split, amin, prod, norm, logsumexp."""

    input_spec = ("float", (4, 8))

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4 * 8 * 6 + 4 * 4 + 8 + 2 * 4 + 4 * 5, 6)

    def forward(self, x):
        B = x.size(0)
        a = x.permute(0, 2, 1)                                   # B,8,4
        r = torch.sqrt(x.pow(2) + 1.0)
        w = torch.where(x > 0, x, 0.1 * x)
        c = torch.clamp(x, min=-0.5, max=0.5)
        e = x.sum(-1).unsqueeze(-1).expand(-1, -1, 8)            # B,4,8
        n = F.normalize(x, dim=-1)
        sm = x.softmax(-1)
        big = torch.cat([r, w, c, e, n, sm], dim=1)              # B,24,8
        mm = torch.matmul(x, a)                                  # B,4,4
        m = torch.cat([x, x * 2], dim=1).mean(dim=1)             # B,8
        rep = x.max(dim=-1).values.unsqueeze(1).repeat(1, 2, 1)  # B,2,4
        lo, hi = torch.split(x, [3, 5], dim=-1)
        stats = torch.stack([lo.amin(-1), hi.prod(-1), torch.norm(x, dim=-1),
                             torch.logsumexp(x, dim=-1), x.abs().sum(-1)], dim=-1)
        parts = [big.reshape(B, -1), mm.flatten(1), m, rep.view(B, -1),
                 stats.squeeze(-1).flatten(1)]
        return self.fc(torch.cat(parts, dim=1))


class LSTMTagger(nn.Module):
    """nn.LSTM, batch first: an ONNX LSTM node between the Transposes
    PyTorch puts around it."""

    input_spec = ("float", (6, 8))

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 8, batch_first=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y[:, -1])


class RNNTagger(nn.Module):
    """nn.RNN: an ONNX RNN node, which weft does not support (the import
    must fail with a clear error)."""

    input_spec = ("float", (6, 8))
    expect_error = "unsupported ONNX op 'RNN'"

    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(8, 8, batch_first=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])


MODELS = {
    "mlp_acts": MLPActs,
    "mlp_acts2": MLPActs2,
    "mlp_bn": MLPBatchNorm,
    "cnn_bn": CNNBatchNorm,
    "cnn_depthwise": CNNDepthwise,
    "cnn_pool": CNNPool,
    "resnet_tiny": ResNetTiny,
    "cnn_channel_attn": CNNChannelAttention,
    "conv1d_text": Conv1dText,
    "autoencoder": AutoEncoder,
    "upsample_modes": UpsampleModes,
    "padding_modes": PaddingModes,
    "groupnorm_cnn": GroupNormCNN,
    "embed_mean": EmbedMean,
    "embed_masked_mean": EmbedMaskedMean,
    "mha_batch_first": MHABatchFirst,
    "mha_seq_first": MHASeqFirst,
    "gpt_rms": GPTRMS,
    "gpt_bmm": GPTBmm,
    "vit_tiny": ViTTiny,
    "causal_transformer": CausalTransformer,
    "ln_noaffine": LayerNormNoAffine,
    "tensor_ops": TensorOps,
    "tensor_ops2": TensorOps2,
    "lstm": LSTMTagger,
    "rnn": RNNTagger,
}


def batch_dim(cls):
    return getattr(cls, "batch_dim", 0)


def input_shape(cls, batch):
    """The full input shape with the batch inserted at its axis."""
    spec = cls.input_spec
    shape = list(spec[-1])
    shape.insert(batch_dim(cls), batch)
    return tuple(shape)


def exports_at(cls, opset):
    """Whether torch 1.13 can export the model at `opset`."""
    return getattr(cls, "min_opset", 0) <= opset <= getattr(cls, "max_opset", 99)


def make_input(cls, batch, seed):
    g = torch.Generator().manual_seed(seed + 1)
    shape = input_shape(cls, batch)
    if cls.input_spec[0] == "int":
        # Token 0 shows up often enough to exercise padding masks.
        return torch.randint(0, cls.input_spec[1], shape, generator=g, dtype=torch.int64)
    return torch.randn(*shape, generator=g, dtype=torch.float32)


def randomize_buffers(model, seed):
    """Trained-looking BatchNorm statistics (fresh ones are 0 and 1, which
    would hide a mixed-up mean or variance)."""
    g = torch.Generator().manual_seed(seed + 777)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.copy_(0.2 * torch.randn(m.running_mean.shape, generator=g))
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))


def export(name, out, opset=DEFAULT_OPSET, batch=4, seed=0, dynamic_batch=False,
           training=False):
    """Exports one model to out/NAME.onnx with input.npy and expected.npy;
    returns a one-line summary."""
    import onnx  # imported late so --help and --list work without it

    cls = MODELS[name]
    torch.manual_seed(seed)
    model = cls()
    make_params_distinct(model, seed)
    randomize_buffers(model, seed)
    model.eval()
    x = make_input(cls, batch, seed)
    # Grad enabled, as in export.py: keeps TransformerEncoderLayer off its
    # fused fast path, which has no ONNX symbolic.
    with torch.enable_grad():
        expected = model(x).detach().numpy().astype(np.float32)

    os.makedirs(out, exist_ok=True)
    onnx_path = os.path.join(out, name + ".onnx")
    dynamic_axes = None
    if dynamic_batch:
        dynamic_axes = {"input": {batch_dim(cls): "batch"}, "output": {batch_dim(cls): "batch"}}
    # Training mode keeps BatchNorm (eval mode folds it into convolutions)
    # and Dropout; expected.npy stays the eval-mode output.
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    with torch.enable_grad():
        torch.onnx.export(model, (x,), onnx_path, export_params=True,
                          opset_version=opset, do_constant_folding=not training,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes=dynamic_axes, training=mode)
    onnx.checker.check_model(onnx_path)
    np.save(os.path.join(out, "input.npy"), x.numpy())
    np.save(os.path.join(out, "expected.npy"), expected)
    ops = sorted({n.op_type for n in onnx.load(onnx_path).graph.node})
    return "%s: opset %d, input %s -> output %s (%s)%s" % (
        name, opset, tuple(x.shape), tuple(expected.shape), " ".join(ops),
        ", dynamic batch" if dynamic_batch else "")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", nargs="?", choices=sorted(MODELS))
    p.add_argument("--list", action="store_true",
                   help="print NAME INPUT-SHAPE (for --input-shape) per model")
    p.add_argument("--all", action="store_true", help="export every model to OUT/NAME/")
    p.add_argument("--out", help="output directory (created if missing)")
    p.add_argument("--opset", type=int, default=DEFAULT_OPSET, help="ONNX opset (13..17)")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dynamic-batch", action="store_true",
                   help="mark the batch axis of input and output as dynamic")
    p.add_argument("--training", action="store_true",
                   help="export with training=TrainingMode.TRAINING (the graph "
                        "PyTorch trains; eval mode folds BatchNorm into convolutions)")
    args = p.parse_args(argv)

    if args.list:
        for name, cls in MODELS.items():
            shape = "x".join(str(d) for d in input_shape(cls, args.batch))
            note = "  (expected to fail: %s)" % cls.expect_error \
                if hasattr(cls, "expect_error") else ""
            print("%s %s%s" % (name, shape, note))
        return 0
    if not args.out or bool(args.model) == args.all:
        p.error("give one MODEL or --all, and --out")
    if args.batch < 1:
        p.error("--batch must be >= 1")
    names = [n for n in sorted(MODELS) if exports_at(MODELS[n], args.opset)] \
        if args.all else [args.model]
    for name in names:
        out = os.path.join(args.out, name) if args.all else args.out
        print(export(name, out, args.opset, args.batch, args.seed, args.dynamic_batch,
                     args.training))
    return 0


if __name__ == "__main__":
    sys.exit(main())
