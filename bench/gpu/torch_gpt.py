#!/usr/bin/env python3
"""PyTorch baseline for bench/gpu/run.sh: the model `shardc-gen gpt` writes.

GPT-2 as tools/shardc-gen/shardc-gen.cpp builds it (nanoGPT's layout): token
embedding wte [V, C] tied to the LM head, learned position embedding wpe
[T, C], L pre-LN blocks (LayerNorm eps 1e-5 with bias; fused qkv Linear
[3C, C] with bias; causal softmax attention with scale 1/sqrt(C/H); output
projection; MLP C -> 4C -> C with GELU, tanh approximation), final LayerNorm,
logits = ln_f(x) wte^T (no bias), mean cross-entropy over B*T positions. No
dropout. Init: N(0, 0.02) for every Linear weight and both embeddings, the two
residual projections (attn.c_proj, mlp.c_proj) N(0, 0.02/sqrt(2L)), zero
biases, LayerNorm weight 1 and bias 0. AdamW lr 6e-4, betas (0.9, 0.95), eps
1e-8, weight decay 0.1 on every parameter (as shardc's train.adamw: no
no-decay group), fused when the build has it. fp32 parameters and
activations; TF32 matmuls allowed (torch.set_float32_matmul_precision
"high"). The loss is computed in fp32 (logits.float(): a no-op in fp32).
Random token batches, uniform in [0, V).

Modes, fp32: eager; compile (torch.compile, default mode; the first step,
which compiles, is a warm-up step); fsdp2 (torch.distributed.fsdp.fully_shard
on each block and then the root, a one-process NCCL group from MASTER_ADDR,
MASTER_PORT, RANK=0, WORLD_SIZE=1: FSDP2's FULL_SHARD at world size 1).
bf16 mixed precision, the counterparts of shardc --param-dtype bf16 (bf16
compute, f32 master weights and optimizer state, f32 gradient reduction, f32
loss): compile-bf16 (compile's model, fp32 parameters and fused AdamW, with
torch.autocast("cuda", dtype=torch.bfloat16) around forward and loss:
matmuls and attention in bf16, LayerNorm and the loss in fp32, as autocast
picks; backward outside it); fsdp2-bf16 (fsdp2 with
MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
on every fully_shard: bf16 parameter copies gathered for compute, bf16
activations, fp32 gradients reduced into the fp32 sharded parameters). Pass
the dense BF16 peak (989) as --peak-tflops for these.

Per step: host-to-device copy of the batch, forward, backward, optimizer
step, zero_grad, then torch.cuda.synchronize(); the step time is the host
clock around that (as the shardc executable times its step). Batches are
tried in the order given; the first that runs without running out of memory
is timed. Writes one JSON row (the format bench/gpu/compare.py table reads).
"""

import argparse
import contextlib
import gc
import json
import math
import os
import statistics
import sys
import time
import warnings


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=["eager", "compile", "fsdp2",
                                      "compile-bf16", "fsdp2-bf16"],
                   required=True)
    p.add_argument("--batches", default="16,8,4",
                   help="batch sizes to try, largest first")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--pad-vocab", type=int, default=1,
                   help="pad wte and the LM head to a multiple of this many "
                   "rows, as nanoGPT's vocab_size=50304 (shardc-gen gpt "
                   "--pad-vocab); tokens stay below --vocab")
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--attention", choices=["sdpa", "math"], default="sdpa",
                   help="sdpa: F.scaled_dot_product_attention(is_causal=True)"
                   " (nanoGPT's); math: softmax(q k^T) v with the scores "
                   "materialised")
    p.add_argument("--peak-tflops", type=float, default=494.0,
                   help="the MFU denominator (H200 dense TF32: 494; dense "
                   "BF16, for the -bf16 modes: 989)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--name", default=None)
    p.add_argument("--out", required=True, help="the JSON row to write")
    a = p.parse_args()
    if a.pad_vocab < 1:
        p.error("--pad-vocab must be positive, got %d" % a.pad_vocab)
    return a


def build_model_classes(torch):
    nn = torch.nn
    F = torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self, c, heads, attention):
            super().__init__()
            self.c_attn = nn.Linear(c, 3 * c)
            self.c_proj = nn.Linear(c, c)
            self.heads = heads
            self.attention = attention

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.c_attn(x).split(c, dim=2)
            shape = (b, t, self.heads, c // self.heads)
            q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
            if self.attention == "sdpa":
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
                mask = torch.ones(t, t, dtype=torch.bool,
                                  device=x.device).tril()
                scores = scores.masked_fill(~mask, float("-inf"))
                y = torch.softmax(scores, dim=-1) @ v
            y = y.transpose(1, 2).contiguous().view(b, t, c)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c_fc = nn.Linear(c, 4 * c)
            self.gelu = nn.GELU(approximate="tanh")
            self.c_proj = nn.Linear(4 * c, c)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self, c, heads, attention):
            super().__init__()
            self.ln_1 = nn.LayerNorm(c, eps=1e-5)
            self.attn = CausalSelfAttention(c, heads, attention)
            self.ln_2 = nn.LayerNorm(c, eps=1e-5)
            self.mlp = MLP(c)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, a):
            super().__init__()
            # nanoGPT's padding: the softmax runs over the padded rows too
            # (no token ever targets them, so training pushes their logits
            # down); shardc's loss skips them (train.cross_entropy's
            # `classes`). The GEMMs, most of the work, are the same.
            self.vocab = -(-a.vocab // a.pad_vocab) * a.pad_vocab
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(self.vocab, a.hidden),
                wpe=nn.Embedding(a.seq, a.hidden),
                h=nn.ModuleList(Block(a.hidden, a.heads, a.attention)
                                for _ in range(a.layers)),
                ln_f=nn.LayerNorm(a.hidden, eps=1e-5),
            ))
            self.lm_head = nn.Linear(a.hidden, self.vocab, bias=False)
            self.lm_head.weight = self.transformer.wte.weight  # tied
            proj_std = 0.02 / math.sqrt(2 * a.layers)
            with torch.no_grad():
                for name, p in self.named_parameters():
                    if name.endswith("c_proj.weight"):
                        p.normal_(0.0, proj_std)
                    elif name.endswith(".weight") and p.dim() == 2:
                        p.normal_(0.0, 0.02)  # Linear weights, wte, wpe
                    elif name.endswith(".bias"):
                        p.zero_()
                    # LayerNorm weights keep their ones.

        def forward(self, idx, targets):
            t = idx.shape[1]
            pos = torch.arange(t, device=idx.device)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            # fp32 loss: bf16 logits (fsdp2-bf16) widened, as shardc's
            # mixed precision does and as autocast does for cross_entropy.
            return F.cross_entropy(logits.reshape(-1, self.vocab).float(),
                                   targets.reshape(-1))

    return GPT


def main():
    a = parse()
    name = a.name or {"eager": "torch eager fp32",
                      "compile": "torch.compile fp32",
                      "fsdp2": "torch FSDP2 fp32",
                      "compile-bf16": "torch.compile bf16",
                      "fsdp2-bf16": "torch FSDP2 bf16"}[a.mode]
    base = a.mode.split("-")[0]  # eager | compile | fsdp2
    bf16 = a.mode.endswith("-bf16")
    row = {"name": name, "batch": None, "status": "FAILED: did not finish",
           "precision": "bf16" if bf16 else "fp32",
           "peak_tflops": a.peak_tflops}

    def write(status=None):
        if status:
            row["status"] = status
        with open(a.out, "w") as f:
            json.dump(row, f)

    write()
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        write("FAILED: import torch: %s" % e)
        print("torch: cannot import: %s" % e)
        return 1
    if not torch.cuda.is_available():
        write("skipped: torch sees no CUDA device")
        print("torch: no CUDA device")
        return 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.set_float32_matmul_precision("high")  # TF32 matmuls
        torch.backends.cudnn.allow_tf32 = True
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    print("torch %s, %s, matmul precision %s, mode %s, attention %s" %
          (torch.__version__, torch.cuda.get_device_name(dev),
           torch.get_float32_matmul_precision(), a.mode, a.attention),
          flush=True)

    fsdp_kwargs = {}
    if base == "fsdp2":
        import torch.distributed as dist
        for key, value in (("MASTER_ADDR", "127.0.0.1"),
                           ("MASTER_PORT", "29517"), ("RANK", "0"),
                           ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
            os.environ.setdefault(key, value)
        dist.init_process_group("nccl", device_id=dev)
        try:
            from torch.distributed.fsdp import (MixedPrecisionPolicy,
                                                fully_shard)
        except ImportError:  # before 2.6
            from torch.distributed._composable.fsdp import (
                MixedPrecisionPolicy, fully_shard)
        if bf16:
            fsdp_kwargs["mp_policy"] = MixedPrecisionPolicy(
                param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    autocast = contextlib.nullcontext
    if base == "compile" and bf16:
        def autocast():
            return torch.autocast("cuda", dtype=torch.bfloat16)

    GPT = build_model_classes(torch)
    batches = [int(b) for b in a.batches.split(",") if b]
    row["tried"] = []
    result = 0
    for batch in batches:
        model = opt = step_model = loss = chunk = data = None
        try:
            torch.manual_seed(a.seed)
            torch.cuda.reset_peak_memory_stats(dev)
            with torch.device(dev):
                model = GPT(a)
            n_params = sum(p.numel() for p in model.parameters())
            fpt = 6 * n_params + 6 * a.layers * a.seq * a.hidden
            if base == "fsdp2":
                for block in model.transformer.h:
                    fully_shard(block, **fsdp_kwargs)
                fully_shard(model, **fsdp_kwargs)
            step_model = model
            if base == "compile":
                step_model = torch.compile(model)
            fused = True
            try:
                opt = torch.optim.AdamW(model.parameters(), lr=6e-4,
                                        betas=(0.9, 0.95), eps=1e-8,
                                        weight_decay=0.1, fused=True)
            except (RuntimeError, TypeError, ValueError):
                fused = False
                opt = torch.optim.AdamW(model.parameters(), lr=6e-4,
                                        betas=(0.9, 0.95), eps=1e-8,
                                        weight_decay=0.1)
            gen = torch.Generator().manual_seed(a.seed)
            data = [torch.randint(0, a.vocab, (batch, a.seq + 1),
                                  generator=gen, dtype=torch.long).pin_memory()
                    for _ in range(4)]
            times, losses = [], []
            for i in range(a.warmup + a.steps):
                torch.cuda.synchronize(dev)
                t0 = time.perf_counter()
                chunk = data[i % len(data)].to(dev, non_blocking=True)
                with autocast():
                    loss = step_model(chunk[:, :-1], chunk[:, 1:])
                loss.backward()
                try:
                    opt.step()
                except RuntimeError as e:
                    # fused AdamW over DTensor parameters, where unsupported
                    if not fused or "out of memory" in str(e).lower():
                        raise
                    print("fused AdamW failed (%s); foreach instead" %
                          str(e).splitlines()[0], flush=True)
                    fused = False
                    opt = torch.optim.AdamW(model.parameters(), lr=6e-4,
                                            betas=(0.9, 0.95), eps=1e-8,
                                            weight_decay=0.1, foreach=True)
                    opt.step()
                opt.zero_grad(set_to_none=True)
                torch.cuda.synchronize(dev)
                times.append((time.perf_counter() - t0) * 1e3)
                losses.append(float(loss.item()))
                print("  batch %d step %d: %.1f ms, loss %.4f" %
                      (batch, i + 1, times[-1], losses[-1]), flush=True)
            measured = times[a.warmup:]
            ms = statistics.median(measured)
            tok_s = batch * a.seq / (ms / 1e3)
            row.update({
                "batch": batch,
                "status": "ok",
                "ms": ms,
                "ms_min": min(measured),
                "ms_max": max(measured),
                "tok_s": tok_s,
                "tflops": fpt * tok_s / 1e12,
                "mfu": fpt * tok_s / (a.peak_tflops * 1e12),
                "peak_gb": torch.cuda.max_memory_allocated(dev) / 1e9,
                "reserved_gb": torch.cuda.max_memory_reserved(dev) / 1e9,
                "first_loss": losses[0],
                "first_step_ms": times[0],
                "params": n_params,
                "fused_adamw": fused,
                "attention": a.attention,
                "torch": torch.__version__,
                "steps": len(measured),
            })
            if batch != batches[0]:
                row["status"] = "ok (batch %d ran out of memory)" % batches[0]
            if not all(math.isfinite(x) for x in losses):
                row["status"] = "FAILED: non-finite loss"
            row["tried"].append({"batch": batch, "result": "ok"})
            print("%s: batch %d, %d params, median %.1f ms/step, %.0f tokens/s,"
                  " %.1f TFLOP/s, MFU %.1f%% of %g, max allocated %.2f GB, "
                  "first step %.0f ms, fused AdamW %s" %
                  (name, batch, n_params, ms, tok_s, fpt * tok_s / 1e12,
                   100 * row["mfu"], a.peak_tflops, row["peak_gb"],
                   times[0], fused), flush=True)
            break
        except torch.cuda.OutOfMemoryError:
            row["tried"].append({"batch": batch, "result": "out of memory"})
            print("%s: batch %d: out of memory" % (name, batch), flush=True)
            row["status"] = "FAILED: out of memory at batch %s" % a.batches
            result = 1
        except Exception as e:  # noqa: BLE001
            first = (str(e).strip().splitlines() or [""])[0][:160]
            if "out of memory" in str(e).lower():  # wrapped, e.g. by dynamo
                row["tried"].append({"batch": batch, "result": "out of memory"})
                print("%s: batch %d: out of memory (%s)" %
                      (name, batch, type(e).__name__), flush=True)
                row["status"] = "FAILED: out of memory at batch %s" % a.batches
                result = 1
                continue
            row["tried"].append({"batch": batch,
                                 "result": type(e).__name__ + ": " + first})
            row["status"] = "FAILED: %s: %s" % (type(e).__name__, first)
            print("%s: batch %d: %s: %s" % (name, batch, type(e).__name__,
                                            str(e)[:2000]), flush=True)
            result = 1
            break
        finally:
            model = opt = step_model = loss = chunk = data = None
            if base == "compile":
                torch._dynamo.reset()
            gc.collect()
            torch.cuda.empty_cache()
    else:
        result = 1
    result = 0 if row["status"].startswith("ok") else 1
    write()
    if base == "fsdp2":
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
    return result


if __name__ == "__main__":
    sys.exit(main())
