#!/usr/bin/env python3
"""Times GPT-2's three logits GEMMs in bf16 with PyTorch on a GPU, at the
vocabulary's 50257 and padded to 50304 (a multiple of 64), to size what
padding the vocabulary would save Weft (its cuBLASLt GEMMs at 50257 take
4.5-6.6 ms each on an H100; bench/RESULTS.md). Run on the GPU machine:

  python3 bench/gpu_logits_gemm.py [--tokens 8192] [--embd 768]
"""
import argparse

import torch


def timed(fn, reps=20):
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(True), torch.cuda.Event(True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--embd", type=int, default=768)
    a = p.parse_args()
    t, d = a.tokens, a.embd
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    print("| vocab | forward X W^T ms | dX = dC W ms | dW = dC^T X ms | sum ms |")
    print("| --- | --- | --- | --- | --- |")
    for v in (50257, 50304):
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(t, d, device="cuda", generator=g).bfloat16()
        w = torch.randn(v, d, device="cuda", generator=g).bfloat16()
        dc = torch.randn(t, v, device="cuda", generator=g).bfloat16()
        f = timed(lambda: x @ w.t())
        dx = timed(lambda: dc @ w)
        dw = timed(lambda: dc.t() @ x)
        print("| %d | %.3f | %.3f | %.3f | %.3f |" % (v, f, dx, dw, f + dx + dw))
    # Padding inside a step: the product into a 50304-wide buffer, then the
    # 50257 columns copied out (what a runtime that pads would add).
    x = torch.randn(t, d, device="cuda").bfloat16()
    wp = torch.randn(50304, d, device="cuda").bfloat16()
    out = torch.empty(t, 50257, device="cuda", dtype=torch.bfloat16)
    full = torch.empty(t, 50304, device="cuda", dtype=torch.bfloat16)

    def padded():
        torch.mm(x, wp.t(), out=full)
        out.copy_(full[:, :50257])
    print("forward into a padded buffer and the columns copied out: %.3f ms"
          % timed(padded))
    print("the copy alone: %.3f ms" % timed(lambda: out.copy_(full[:, :50257])))


if __name__ == "__main__":
    main()
