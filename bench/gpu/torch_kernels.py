#!/usr/bin/env python3
"""PyTorch's counterparts of shardc-rt-kernel-bench's rows, same shapes.

bench/gpu/KernelBench.cu times the runtime's heaviest bf16 kernels of a
GPT-2 small step one by one; this times what PyTorch runs for the same
work, in bf16 on the same inputs' shapes, so that bench/gpu/run.sh's
kernels phase prints the two side by side:

  attention               F.scaled_dot_product_attention(is_causal=True),
                          q, k, v strided views of one [B, T, 3C] qkv, as
                          the model's split (SDPA's flash backend on an
                          H200), forward only
  attention_grad          its backward alone: autograd.grad of the output
                          against q, k, v for a given dy (the forward
                          before it outside the timing)
  cross_entropy_and_grad  F.cross_entropy of bf16 logits [B T, V] and its
                          backward (eager: PyTorch's log_softmax and
                          nll_loss kernels), timed together
  layernorm_grad_add      F.layer_norm's backward alone (with a residual
                          add: the gradient plus an addend)
  add_layernorm           x + residual, then F.layer_norm
  sum_to                  a bias gradient: dy [B T, 4C] summed over rows
  add                     a residual add, x + residual
  embedding_grad          the token embedding's gradient: dy [B T, C]
                          summed by id into [V padded, C] (aten's
                          embedding_dense_backward: the ids sorted, then
                          summed by segment)
  embedding_grad (text ids)  the same, its ids as frequent as text's tokens
                          (id k about as 1 / (k + 1): id 0 6% of them)
  matmul (MLP proj)       hidden [B T, 4C] @ w^T [4C, C]
  matmul (MLP fc wgrad)   dy^T @ x: dy [B T, 4C], x [B T, C]
  matmul_bias_grad (MLP fc)  that and dy.sum(0), as autograd runs a
                          linear's weight and bias gradients (two kernels)

Milliseconds per call: CUDA events around `iters` calls after one warm-up.
Prints rows in KernelBench's layout ("torch" before each kernel's name).
"""

import argparse
import math
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--channels", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--iters", type=int, default=10)
    a = p.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(f"torch_kernels.py: no torch ({e})", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("torch_kernels.py: no CUDA device", file=sys.stderr)
        return 3
    dev, bf16 = "cuda", torch.bfloat16
    b, t, c, h = a.batch, a.seq, a.channels, a.heads
    n, d = b * t, c // h

    def ms_per_call(call):
        call()
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(a.iters):
            call()
        stop.record()
        torch.cuda.synchronize()
        return start.elapsed_time(stop) / a.iters

    def row(kernel, shape, ms):
        print(f"torch {kernel:<30} {shape:<26} {ms:10.3f}")

    def rand(*shape, grad=False):
        return (torch.rand(*shape, device=dev, dtype=torch.float32) * 2 - 1
                ).to(bf16).requires_grad_(grad)

    print(f"# torch_kernels.py: torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}, batch {b}, T {t}, C {c}, "
          f"{h} heads, vocabulary {a.vocab}, {a.iters} calls each")
    qkv = rand(b, t, 3 * c, grad=True)

    def heads(x):
        return x.view(b, t, h, d).transpose(1, 2)

    def attention():
        q, k, v = qkv.split(c, dim=2)
        return F.scaled_dot_product_attention(heads(q), heads(k), heads(v),
                                              is_causal=True)

    shape = f"{b}x{t}x{h}x{d}"
    with torch.no_grad():
        row("attention", shape, ms_per_call(attention))
    out = attention()
    dy = rand(*out.shape)
    row("attention_grad", shape, ms_per_call(
        lambda: torch.autograd.grad(out, qkv, dy, retain_graph=True)))
    del out, qkv

    logits = rand(n, a.vocab, grad=True)
    targets = torch.randint(0, a.vocab, (n,), device=dev)

    def cross_entropy():
        logits.grad = None
        F.cross_entropy(logits, targets).backward()

    row("cross_entropy_and_grad", f"{n}x{a.vocab}", ms_per_call(cross_entropy))
    del logits

    x, residual, addend = rand(n, c, grad=True), rand(n, c), rand(n, c)
    w, bias = rand(c, grad=True), rand(c, grad=True)
    y = F.layer_norm(x, (c,), w, bias, 1e-5)
    dy = rand(n, c)

    def layernorm_grad_add():
        dx, _, _ = torch.autograd.grad(y, (x, w, bias), dy, retain_graph=True)
        return dx + addend

    row("layernorm_grad_add", f"{n}x{c}", ms_per_call(layernorm_grad_add))
    with torch.no_grad():
        row("add_layernorm", f"{n}x{c}", ms_per_call(
            lambda: F.layer_norm(x + residual, (c,), w, bias, 1e-5)))
        hidden = rand(n, 4 * c)
        row("sum_to", f"{n}x{4 * c}", ms_per_call(lambda: hidden.sum(0)))
        row("add", f"{n}x{c}", ms_per_call(lambda: x + residual))
        ld = (a.vocab + 127) // 128 * 128
        ids = torch.randint(0, a.vocab, (n,), device=dev)
        row("embedding_grad", f"{n}x{c}x{ld}", ms_per_call(
            lambda: torch.ops.aten.embedding_dense_backward(
                dy, ids, ld, -1, False)))
        # KernelBench's textIdsKernel: P(id < k) = log(k + 1) / log(V + 1).
        text_ids = (torch.exp(torch.rand(n, device=dev, dtype=torch.float64)
                              * math.log(a.vocab + 1)) - 1).long().clamp(
                                  max=a.vocab - 1)
        row("embedding_grad (text ids)", f"{n}x{c}x{ld}", ms_per_call(
            lambda: torch.ops.aten.embedding_dense_backward(
                dy, text_ids, ld, -1, False)))
        fcw = rand(c, 4 * c)
        row("matmul (MLP proj)", f"{n}x{4 * c}x{c}",
            ms_per_call(lambda: hidden @ fcw.t()))
        row("matmul (MLP fc wgrad)", f"{n}x{4 * c}x{c}",
            ms_per_call(lambda: hidden.t() @ x))
        row("matmul_bias_grad (MLP fc)", f"{n}x{4 * c}x{c}",
            ms_per_call(lambda: (hidden.t() @ x, hidden.sum(0))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
