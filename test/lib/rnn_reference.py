#!/usr/bin/python3
"""ONNX LSTM and GRU recurrences in NumPy (float64), the oracle for the
evaluator's weft.lstm / weft.gru (test/Evaluator/recurrent.mlir).

Usage:
  rnn_reference.py lstm XG R H0 C0 OUT_PREFIX [--reverse]
  rnn_reference.py gru XG R RB H0 OUT_PREFIX [--reverse]

XG are the input gates [T, B, G*H] in ONNX gate order (LSTM i, o, f, c; GRU
z, r, h), R the recurrence [G*H, H]; writes OUT_PREFIX.hidden.npy (and
.cell.npy for the LSTM): the state after every step, in time order.
Written from the ONNX operator specification, independently of Weft.
"""

import sys

import numpy as np


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def main():
    args = [a for a in sys.argv[1:] if a != "--reverse"]
    reverse = "--reverse" in sys.argv
    kind, files, out = args[0], args[1:-1], args[-1]
    arrays = [np.load(f).astype(np.float64) for f in files]
    xg, r = arrays[0], arrays[1]
    t_len, h = xg.shape[0], r.shape[1]
    order = range(t_len - 1, -1, -1) if reverse else range(t_len)
    hidden = np.zeros(xg.shape[:2] + (h,))
    cell = np.zeros_like(hidden)
    if kind == "lstm":
        state, c = arrays[2], arrays[3]
        for t in order:
            a = xg[t] + state @ r.T
            i, o, f = sigmoid(a[:, :h]), sigmoid(a[:, h:2 * h]), sigmoid(a[:, 2 * h:3 * h])
            c = f * c + i * np.tanh(a[:, 3 * h:])
            state = o * np.tanh(c)
            hidden[t], cell[t] = state, c
        np.save(out + ".cell.npy", cell)
    else:
        rb, state = arrays[2], arrays[3]
        for t in order:
            p = state @ r.T + rb
            z = sigmoid(xg[t][:, :h] + p[:, :h])
            rg = sigmoid(xg[t][:, h:2 * h] + p[:, h:2 * h])
            n = np.tanh(xg[t][:, 2 * h:] + rg * p[:, 2 * h:])
            state = (1 - z) * n + z * state
            hidden[t] = state
    np.save(out + ".hidden.npy", hidden)


if __name__ == "__main__":
    main()
