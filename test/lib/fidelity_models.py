"""PyTorch models for the training-fidelity tests (test/e2e/fidelity).

Each model is written the way users write them: PyTorch's default
initialization, LayerNorms of ones and zeros, zero biases where PyTorch
makes them, buffers registered with register_buffer, no perturbation before
export. They are small so that a test of 4 exports x 2 optimizers stays
within seconds.

MODELS[name] = (constructor, make_batch(batch, generator) -> (x, y), loss)
with loss "cross-entropy" (logits [..., C], int64 labels [...]) or "mse".
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# --------------------------------------------------------------------------
# decoder: a nanoGPT-style transformer decoder, tied embeddings, causal mask
# buffer (a float tril compared with 0, as nanoGPT does).
# --------------------------------------------------------------------------
VOCAB, SEQ, EMBD = 48, 8, 32


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, seq):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("bias", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        hd = C // self.n_head
        q = q.view(B, T, self.n_head, hd).transpose(1, 2)
        k = k.view(B, T, self.n_head, hd).transpose(1, 2)
        v = v.view(B, T, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class DecoderBlock(nn.Module):
    def __init__(self, n_embd, n_head, seq):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, seq)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.fc = nn.Linear(n_embd, 4 * n_embd)
        self.proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x))))


class Decoder(nn.Module):
    def __init__(self, n_layer=3):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, EMBD)
        self.wpe = nn.Embedding(SEQ, EMBD)
        self.h = nn.ModuleList([DecoderBlock(EMBD, 2, SEQ) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(EMBD)
        self.lm_head = nn.Linear(EMBD, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


# --------------------------------------------------------------------------
# encoder: nn.TransformerEncoder as users build it (its layers are deep
# copies of one prototype, so they start equal), mean-pooled classifier.
# --------------------------------------------------------------------------
class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, EMBD)
        layer = nn.TransformerEncoderLayer(d_model=EMBD, nhead=4, dim_feedforward=64,
                                           dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(EMBD, 5)

    def forward(self, idx):
        return self.head(self.encoder(self.emb(idx)).mean(dim=1))


# --------------------------------------------------------------------------
# llama: RMSNorm, SwiGLU, no biases, a causal mask buffer of -inf added to
# the scores.
# --------------------------------------------------------------------------
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaBlock(nn.Module):
    def __init__(self, dim, n_head, hidden):
        super().__init__()
        self.n_head = n_head
        self.attention_norm = RMSNorm(dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.ffn_norm = RMSNorm(dim)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x, mask):
        B, T, C = x.shape
        hd = C // self.n_head
        h = self.attention_norm(x)
        q = self.wq(h).view(B, T, self.n_head, hd).transpose(1, 2)
        k = self.wk(h).view(B, T, self.n_head, hd).transpose(1, 2)
        v = self.wv(h).view(B, T, self.n_head, hd).transpose(1, 2)
        scores = q @ k.transpose(2, 3) / math.sqrt(hd) + mask
        y = F.softmax(scores, dim=-1) @ v
        x = x + self.wo(y.transpose(1, 2).contiguous().view(B, T, C))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, EMBD)
        self.layers = nn.ModuleList([LlamaBlock(EMBD, 4, 64) for _ in range(2)])
        self.norm = RMSNorm(EMBD)
        self.output = nn.Linear(EMBD, VOCAB, bias=False)
        self.register_buffer("mask", torch.full((SEQ, SEQ), float("-inf")).triu(1))

    def forward(self, idx):
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x, self.mask)
        return self.output(self.norm(x))


# --------------------------------------------------------------------------
# cnn_bn: convolutions with BatchNorm (running statistics are buffers that
# train mode updates).
# --------------------------------------------------------------------------
class CnnBn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(x.mean(dim=(2, 3)))


# --------------------------------------------------------------------------
# dropout: an MLP with Dropout layers. p = 0 so that PyTorch's train mode is
# deterministic and comparable; test/e2e/exe checks p > 0 statistically.
# --------------------------------------------------------------------------
class DropoutMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.drop1 = nn.Dropout(0.0)
        self.ln = nn.LayerNorm(32)
        self.fc2 = nn.Linear(32, 32)
        self.drop2 = nn.Dropout(0.0)
        self.fc3 = nn.Linear(32, 4)

    def forward(self, x):
        x = self.drop1(F.relu(self.fc1(x)))
        x = self.drop2(F.relu(self.fc2(self.ln(x))))
        return self.fc3(x)


# --------------------------------------------------------------------------
# tcn: a temporal convolutional network: causal (left) padding with F.pad,
# dilations, a reflection-padded input layer, residual 1x1 convolutions.
# --------------------------------------------------------------------------
class TemporalBlock(nn.Module):
    def __init__(self, cin, cout, k, dilation):
        super().__init__()
        self.pad = (k - 1) * dilation
        self.conv1 = nn.Conv1d(cin, cout, k, dilation=dilation)
        self.conv2 = nn.Conv1d(cout, cout, k, dilation=dilation)
        self.down = nn.Conv1d(cin, cout, 1) if cin != cout else None

    def forward(self, x):
        h = F.relu(self.conv1(F.pad(x, (self.pad, 0))))
        h = F.relu(self.conv2(F.pad(h, (self.pad, 0))))
        return F.relu(h + (x if self.down is None else self.down(x)))


class Tcn(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Sequential(nn.ReflectionPad1d(1), nn.Conv1d(4, 8, 3))
        self.blocks = nn.Sequential(TemporalBlock(8, 8, 3, 1), TemporalBlock(8, 12, 3, 2))
        self.out = nn.Conv1d(12, 2, 1)

    def forward(self, x):
        return self.out(self.blocks(self.inp(x)))


# --------------------------------------------------------------------------
# einsum_moe: a soft mixture of experts written with torch.einsum (ONNX
# Einsum): per-expert projections "btd,edh->bteh" and "bteh,ehc->btec",
# then a gate-weighted sum over tokens and experts "btec,bte->bc" (labels
# shared by both operands and dropped from the output are contracted).
# --------------------------------------------------------------------------
class EinsumMoe(nn.Module):
    def __init__(self, d=12, experts=3, hidden=16, classes=5):
        super().__init__()
        self.gate = nn.Linear(d, experts)
        self.w1 = nn.Parameter(torch.empty(experts, d, hidden))
        self.w2 = nn.Parameter(torch.empty(experts, hidden, classes))
        # nn.Linear's default initialization, per expert.
        nn.init.uniform_(self.w1, -1 / math.sqrt(d), 1 / math.sqrt(d))
        nn.init.uniform_(self.w2, -1 / math.sqrt(hidden), 1 / math.sqrt(hidden))

    def forward(self, x):
        g = F.softmax(self.gate(x), dim=-1)
        h = F.relu(torch.einsum("btd,edh->bteh", x, self.w1))
        y = torch.einsum("bteh,ehc->btec", h, self.w2)
        return torch.einsum("btec,bte->bc", y, g)


# --------------------------------------------------------------------------
# cumsum: running sums over the sequence (torch.cumsum), forward and
# exclusive-reversed through flip-free arithmetic (total - inclusive), with
# rounded features (torch.round, torch.ceil: zero gradient) mixed in.
# --------------------------------------------------------------------------
class CumsumNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        h = torch.tanh(self.fc1(x))
        c = torch.cumsum(h, dim=1)
        rest = c[:, -1:, :] - c
        z = torch.cat([c, rest], dim=2)
        z = z + 0.05 * torch.round(2 * z) - 0.05 * torch.ceil(z)
        return self.fc2(z).mean(dim=1)


# --------------------------------------------------------------------------
# topk: the 4 largest hidden units (torch.topk values carry the gradient),
# floored features, and embeddings looked up by the argmax and argmin of
# the hidden layer.
# --------------------------------------------------------------------------
class TopkNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 24)
        self.fc2 = nn.Linear(4, 5)
        self.hi = nn.Embedding(24, 5)
        self.lo = nn.Embedding(24, 5)

    def forward(self, x):
        h = self.fc1(x)
        v, _ = torch.topk(h, 4, dim=-1)
        v = v + 0.1 * torch.floor(v)
        return self.fc2(v) + self.hi(torch.argmax(h, dim=-1)) + \
            self.lo(torch.argmin(h, dim=-1))


# --------------------------------------------------------------------------
# cnn3d: a 3-D CNN on NCDHW volumes: Conv3d, MaxPool3d, a strided padded
# Conv3d, AvgPool3d with padding counted (PyTorch's default), Linear.
# --------------------------------------------------------------------------
class Cnn3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv3d(2, 4, 3, padding=1)
        self.conv2 = nn.Conv3d(4, 6, (3, 3, 3), stride=(1, 2, 1), padding=(1, 1, 0))
        self.pool2 = nn.AvgPool3d((3, 2, 1), stride=1, padding=(1, 0, 0))
        self.fc = nn.Linear(6 * 3 * 1 * 1, 5)

    def forward(self, x):
        x = F.max_pool3d(F.relu(self.conv1(x)), 2)
        x = self.pool2(F.relu(self.conv2(x)))
        return self.fc(x.flatten(1))


# --------------------------------------------------------------------------
# Recurrent taggers and classifiers (ONNX LSTM and GRU nodes, one per layer).
# - lstm_tagger / gru_tagger: embeddings, a 2-layer bidirectional
#   batch_first RNN (a Transpose around each node, the layer-0 Y reshaped
#   into layer 1's input), a per-token head;
# - lstm_classifier: sequence-first 1-layer LSTM whose initial h and c are
#   trained parameters (initial_h/initial_c inputs), classifying from the
#   final h and c (Y_h, Y_c);
# - gru_classifier: batch_first 1-layer bidirectional GRU classifying from
#   both directions' final states (Y_h).
# --------------------------------------------------------------------------
RNN_SEQ, RNN_FEATURES = 7, 6


class RnnTagger(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 16)
        self.rnn = cell(16, 12, num_layers=2, bidirectional=True, batch_first=True)
        self.head = nn.Linear(24, VOCAB)

    def forward(self, idx):
        y, _ = self.rnn(self.emb(idx))
        return self.head(y)


class LstmClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(RNN_FEATURES, 10)
        self.h0 = nn.Parameter(torch.zeros(1, 1, 10))
        self.c0 = nn.Parameter(torch.zeros(1, 1, 10))
        self.head = nn.Linear(20, 4)

    def forward(self, x):
        b = x.shape[0]
        state = (self.h0.expand(1, b, 10).contiguous(),
                 self.c0.expand(1, b, 10).contiguous())
        _, (h, c) = self.rnn(x.transpose(0, 1), state)
        return self.head(torch.cat([h[-1], c[-1]], dim=-1))


class GruClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(RNN_FEATURES, 10, bidirectional=True, batch_first=True)
        self.head = nn.Linear(20, 4)

    def forward(self, x):
        _, h = self.rnn(x)
        return self.head(h.transpose(0, 1).reshape(x.shape[0], 20))


class LstmLm(nn.Module):
    """lstm_long: a one-layer LSTM language model over 512 tokens, for the
    test that a long recurrence stays one loop (test/e2e/fidelity);
    lstm_long2 the same with two layers, whose first layer's activations
    stay stored while the second runs (test/e2e/train/recurrent-recompute)."""

    def __init__(self, layers=1):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 16)
        self.rnn = nn.LSTM(16, 32, num_layers=layers, batch_first=True)
        self.head = nn.Linear(32, VOCAB)

    def forward(self, idx):
        y, _ = self.rnn(self.emb(idx))
        return self.head(y)


LONG_SEQ = 512


def _long_tokens(batch, g):
    return (torch.randint(0, VOCAB, (batch, LONG_SEQ), generator=g),
            torch.randint(0, VOCAB, (batch, LONG_SEQ), generator=g))


# --------------------------------------------------------------------------
def _tokens(batch, g):
    x = torch.randint(0, VOCAB, (batch, SEQ), generator=g)
    return x, torch.randint(0, VOCAB, (batch, SEQ), generator=g)


def _classes(shape, classes):
    def make(batch, g):
        x = torch.randn((batch,) + shape, generator=g)
        return x, torch.randint(0, classes, (batch,), generator=g)
    return make


def _encoder_batch(batch, g):
    return torch.randint(0, VOCAB, (batch, SEQ), generator=g), \
        torch.randint(0, 5, (batch,), generator=g)


def _tcn_batch(batch, g):
    return torch.randn(batch, 4, 24, generator=g), torch.randn(batch, 2, 24, generator=g)


MODELS = {
    "decoder": (Decoder, _tokens, "cross-entropy"),
    "encoder": (Encoder, _encoder_batch, "cross-entropy"),
    "llama": (Llama, _tokens, "cross-entropy"),
    "cnn_bn": (CnnBn, _classes((3, 8, 8), 10), "cross-entropy"),
    "dropout": (DropoutMlp, _classes((16,), 4), "cross-entropy"),
    "tcn": (Tcn, _tcn_batch, "mse"),
    "einsum_moe": (EinsumMoe, _classes((6, 12), 5), "cross-entropy"),
    "cumsum": (CumsumNet, _classes((7, 6), 4), "cross-entropy"),
    "topk": (TopkNet, _classes((12,), 5), "cross-entropy"),
    "cnn3d": (Cnn3d, _classes((2, 6, 8, 6), 5), "cross-entropy"),
    "lstm_tagger": (lambda: RnnTagger(nn.LSTM), _tokens, "cross-entropy"),
    "gru_tagger": (lambda: RnnTagger(nn.GRU), _tokens, "cross-entropy"),
    "lstm_classifier": (LstmClassifier, _classes((RNN_SEQ, RNN_FEATURES), 4),
                        "cross-entropy"),
    "gru_classifier": (GruClassifier, _classes((RNN_SEQ, RNN_FEATURES), 4),
                       "cross-entropy"),
    "lstm_long": (LstmLm, _long_tokens, "cross-entropy"),
    "lstm_long2": (lambda: LstmLm(2), _long_tokens, "cross-entropy"),
}
