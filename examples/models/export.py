#!/usr/bin/python3
"""Export Weft's example models from PyTorch to ONNX, with a reference I/O pair.

Usage:
  /usr/bin/python3 examples/models/export.py MODEL --out DIR
      [--opset N] [--batch B] [--seed S] [--dynamic-batch] [--external-data]
      [--no-constant-folding]

MODEL is one of: mlp, mlp_matmul, cnn, gpt, encoder.

Writes to DIR:
  MODEL.onnx        the exported model (eval mode, constant folding on unless
                    --no-constant-folding)
  MODEL.onnx.data   all initializers, only with --external-data
  input.npy         a deterministic input batch (float32, or int64 tokens)
  expected.npy      PyTorch's forward output on input.npy (float32)

Needs torch (1.13 tested), onnx and numpy; on the development machine that is
Debian's /usr/bin/python3.
"""

import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_OPSET = {"encoder": 13}
FALLBACK_OPSET = 17


# --------------------------------------------------------------------------
# mlp / mlp_matmul
# --------------------------------------------------------------------------
class MLP(nn.Module):
    """Linear layers on a 2-D input: ONNX Gemm (transB=1) + Relu/Tanh/Sigmoid."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(32, 64), nn.ReLU(),
            nn.Linear(64, 64), nn.Tanh(),
            nn.Linear(64, 16), nn.Sigmoid(),
            nn.Linear(16, 10),
        )

    def forward(self, x):
        return self.net(x)


class DenseMatMul(nn.Module):
    """y = x @ W + b with W stored as [in, out]: ONNX MatMul + Add."""

    def __init__(self, fan_in, fan_out):
        super().__init__()
        bound = 1.0 / math.sqrt(fan_in)
        self.weight = nn.Parameter(torch.empty(fan_in, fan_out).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(fan_out).uniform_(-bound, bound))

    def forward(self, x):
        return x @ self.weight + self.bias


class MLPMatMul(nn.Module):
    """Same shape as MLP, but every layer is MatMul + Add instead of Gemm."""

    def __init__(self):
        super().__init__()
        self.l1 = DenseMatMul(32, 64)
        self.l2 = DenseMatMul(64, 64)
        self.l3 = DenseMatMul(64, 16)
        self.l4 = DenseMatMul(16, 10)

    def forward(self, x):
        x = torch.relu(self.l1(x))
        x = torch.tanh(self.l2(x))
        x = torch.sigmoid(self.l3(x))
        return self.l4(x)


# --------------------------------------------------------------------------
# cnn
# --------------------------------------------------------------------------
class CNN(nn.Module):
    """3x16x16 -> 10 classes.

    conv1 3->8 (16x16) -> relu -> maxpool2 (8x8)
      main:     conv2 8->16 (8x8) -> relu -> avgpool2 (4x4)
      shortcut: 1x1 conv 8->16, stride 2 (4x4)
    add -> conv3 16->32 (4x4) -> relu -> global avg pool -> flatten -> linear 32->10
    """

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1, stride=1)
        # count_include_pad=False is numerically the same here (no padding),
        # but keeps torch 1.13 from emitting an all-zero ONNX Pad before the
        # AveragePool (it does so whenever count_include_pad is True).
        self.pool2 = nn.AvgPool2d(2, count_include_pad=False)
        self.shortcut = nn.Conv2d(8, 16, 1, stride=2)
        self.conv3 = nn.Conv2d(16, 32, 3, padding=1)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool1(F.relu(self.conv1(x)))
        y = self.pool2(F.relu(self.conv2(x)))
        x = y + self.shortcut(x)
        x = F.relu(self.conv3(x))
        x = self.gap(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


# --------------------------------------------------------------------------
# gpt (nanoGPT-style)
# --------------------------------------------------------------------------
GPT_VOCAB = 64
GPT_BLOCK = 16
GPT_EMBD = 32
GPT_HEADS = 2
GPT_LAYERS = 2


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_embd = n_embd
        self.n_head = n_head
        self.head_dim = n_embd // n_head  # a Python int, so the scale is a constant
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.register_buffer(
            "bias",
            torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        qkv = self.c_attn(x)
        # Split the fused projection by slicing the last dim.
        q = qkv[:, :, 0:C]
        k = qkv[:, :, C:2 * C]
        v = qkv[:, :, 2 * C:3 * C]
        hd = self.head_dim
        q = q.view(B, T, self.n_head, hd).transpose(1, 2)  # (B, nh, T, hd)
        k = k.view(B, T, self.n_head, hd).transpose(1, 2)
        v = v.view(B, T, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v  # (B, nh, T, hd)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class GPTMLP(nn.Module):
    def __init__(self, n_embd, gelu_approximate):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU(approximate=gelu_approximate)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class GPTBlock(nn.Module):
    def __init__(self, n_embd, n_head, block_size, gelu_approximate):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = GPTMLP(n_embd, gelu_approximate)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab=GPT_VOCAB, block_size=GPT_BLOCK, n_embd=GPT_EMBD,
                 n_head=GPT_HEADS, n_layer=GPT_LAYERS):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        # Block 0 uses exact (erf) GELU, the others the tanh approximation.
        self.h = nn.ModuleList([
            GPTBlock(n_embd, n_head, block_size, "none" if i == 0 else "tanh")
            for i in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        # Weight tying. Note: with constant folding (the default) the exporter
        # folds Transpose(wte.weight) into a separate initializer, so the ONNX
        # file no longer shows the tie; --no-constant-folding keeps it.
        self.lm_head.weight = self.wte.weight
        # nanoGPT-style init (deterministic given torch.manual_seed); the zero
        # biases and LayerNorm ones/zeros are then perturbed by
        # make_params_distinct() so that the exporter does not merge them.
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        return self.lm_head(x)


# --------------------------------------------------------------------------
# encoder
# --------------------------------------------------------------------------
ENC_VOCAB = 50
ENC_SEQ = 12


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(ENC_VOCAB, 32)
        layer = nn.TransformerEncoderLayer(
            d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
        # torch 1.13 fast path: in eval mode TransformerEncoder converts the
        # input to a nested tensor (only when a src_key_padding_mask is given
        # and enable_nested_tensor=True) and TransformerEncoderLayer calls the
        # fused torch._transformer_encoder_layer_fwd, which has no ONNX
        # symbolic. The layer only takes that path when autograd is off or no
        # weight requires grad, so main() traces the export under
        # torch.enable_grad() with requires_grad parameters, which keeps the
        # plain MultiheadAttention/Linear/LayerNorm path (this also holds if a
        # caller wraps main() in torch.no_grad()). Exporting under no_grad
        # instead fails with "Exporting the operator
        # 'aten::_transformer_encoder_layer_fwd' ... is not supported".
        # enable_nested_tensor=False turns the nested-tensor conversion off as
        # well, for good measure.
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        # TransformerEncoder deep-copies `layer`, so all layers start out
        # identical; re-initialize each one so they are independent.
        for lyr in self.encoder.layers:
            lyr.self_attn._reset_parameters()
            lyr.linear1.reset_parameters()
            lyr.linear2.reset_parameters()
        self.head = nn.Linear(32, 5)

    def forward(self, idx):
        x = self.emb(idx)
        x = self.encoder(x)
        x = x.mean(dim=1)
        return self.head(x)


# --------------------------------------------------------------------------
def make_params_distinct(model, seed):
    """Perturb parameters that would be merged by the ONNX exporter.

    In eval mode torch.onnx.export de-duplicates initializers *by value*
    (_jit_pass_onnx_deduplicate_initializers): all-zero biases or all-one
    LayerNorm weights of the same shape, or the weights of layers that were
    deep-copied from one prototype (nn.TransformerEncoder clones its layer),
    would collapse into one initializer plus Identity aliases, i.e. unrelated
    parameters would become one shared parameter for a training compiler.
    Every parameter that is constant-valued or equal to an earlier one gets a
    small deterministic N(0, 0.02) perturbation. Tied parameters (the same
    tensor object registered twice) are left tied.
    """
    g = torch.Generator().manual_seed(seed + 12345)
    seen_ids = set()
    seen_values = set()
    with torch.no_grad():
        for _, prm in model.named_parameters():  # yields each tensor once
            if id(prm) in seen_ids:
                continue
            seen_ids.add(id(prm))
            flat = prm.detach().reshape(-1)
            key = (tuple(prm.shape), flat.numpy().tobytes())
            if (prm.numel() > 1 and bool((flat == flat[0]).all())) or key in seen_values:
                prm.add_(0.02 * torch.randn(prm.shape, generator=g, dtype=prm.dtype))
                key = (tuple(prm.shape), prm.detach().reshape(-1).numpy().tobytes())
            seen_values.add(key)


MODELS = {
    "mlp": MLP,
    "mlp_matmul": MLPMatMul,
    "cnn": CNN,
    "gpt": GPT,
    "encoder": Encoder,
}


def make_input(name, batch, seed):
    g = torch.Generator().manual_seed(seed + 1)
    if name in ("mlp", "mlp_matmul"):
        return torch.randn(batch, 32, generator=g, dtype=torch.float32)
    if name == "cnn":
        return torch.randn(batch, 3, 16, 16, generator=g, dtype=torch.float32)
    if name == "gpt":
        return torch.randint(0, GPT_VOCAB, (batch, GPT_BLOCK), generator=g, dtype=torch.int64)
    if name == "encoder":
        return torch.randint(0, ENC_VOCAB, (batch, ENC_SEQ), generator=g, dtype=torch.int64)
    raise ValueError(name)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", choices=sorted(MODELS))
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    p.add_argument("--opset", type=int, default=None,
                   help="ONNX opset (13..17; default 17, 13 for encoder)")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dynamic-batch", action="store_true",
                   help="mark dim 0 of input and output as dynamic ('batch')")
    p.add_argument("--external-data", action="store_true",
                   help="store all initializers in MODEL.onnx.data next to MODEL.onnx")
    p.add_argument("--no-constant-folding", action="store_true",
                   help="export with do_constant_folding=False: keeps every "
                        "parameter as an initializer under its PyTorch name and "
                        "keeps gpt's lm_head tied to wte (Transpose of the "
                        "shared initializer), at the price of more shape ops")
    args = p.parse_args(argv)

    import onnx  # imported late so --help works without it

    name = args.model
    opset = args.opset if args.opset is not None else DEFAULT_OPSET.get(name, FALLBACK_OPSET)
    if args.batch < 1:
        p.error("--batch must be >= 1")

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    model = MODELS[name]()
    make_params_distinct(model, args.seed)
    model.eval()

    x = make_input(name, args.batch, args.seed)
    # Grad enabled on purpose: this is the path export() traces (see Encoder).
    with torch.enable_grad():
        expected = model(x).detach().cpu().numpy().astype(np.float32)

    os.makedirs(args.out, exist_ok=True)
    onnx_path = os.path.join(args.out, name + ".onnx")
    data_name = name + ".onnx.data"
    data_path = os.path.join(args.out, data_name)

    dynamic_axes = None
    if args.dynamic_batch:
        dynamic_axes = {"input": {0: "batch"}, "output": {0: "batch"}}

    with torch.enable_grad():
        torch.onnx.export(
            model, (x,), onnx_path,
            export_params=True,
            opset_version=opset,
            do_constant_folding=not args.no_constant_folding,
            input_names=["input"],
            output_names=["output"],
            dynamic_axes=dynamic_axes,
        )

    m = onnx.load(onnx_path)
    if args.external_data:
        if os.path.exists(data_path):
            os.remove(data_path)  # save_model appends to an existing file
        onnx.save_model(m, onnx_path, save_as_external_data=True,
                        all_tensors_to_one_file=True, location=data_name,
                        size_threshold=0, convert_attribute=False)
    elif os.path.exists(data_path):
        os.remove(data_path)  # stale side file from an earlier export
    onnx.checker.check_model(onnx_path)

    np.save(os.path.join(args.out, "input.npy"), x.numpy())
    np.save(os.path.join(args.out, "expected.npy"), expected)

    ops = sorted({n.op_type for n in m.graph.node})
    print("%s: opset %d, input %s %s -> output %s, %d nodes (%s)%s%s%s -> %s"
          % (name, opset, x.dtype, tuple(x.shape), tuple(expected.shape),
             len(m.graph.node), " ".join(ops),
             ", dynamic batch" if args.dynamic_batch else "",
             ", external data" if args.external_data else "",
             ", no constant folding" if args.no_constant_folding else "",
             onnx_path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
