"""Fusion (--fuse, the train-fuse pass) changes where values live, never
what they are: on the host target every configuration trains to the same
bits with and without it.

usage: fusion.py SHARDC MODEL.mlir LAYERS OUT_DIR

1. In every configuration below, the fused step calls the fused kernels:
   per GPT block one linear_gelu (c_fc and its GELU), one add_layernorm
   (the attention's residual and ln_2), one matmul_gelu_grad (GELU's
   derivative in the GEMM through c_proj), two layernorm_grad_add (each
   norm's input gradient joins the residual's) and four matmul_bias_grad
   (each linear's weight and bias gradients); the unfused step calls
   none.
2. For each strategy, dtype and micro-batch count below, the fused and the
   unfused builds give the same loss at every step and the same params after
   3 AdamW steps, to the bit (0, not a tolerance: the host's fused kernels
   run the pair's kernels on the stored intermediate).
3. Both measure the peak the ledger predicts, and on this GPT the fused
   one is no larger: the backward fusions drop two intermediates (the
   product before GELU's derivative, a norm's input gradient before the
   residual's), and the forward fusions' transient (a fused op keeps the
   first op's operands until its second result is written) falls inside a
   block, below the peak at the loss. Fusion is not free everywhere: the
   pass's description says where it can raise a peak.

Prints a row per configuration and exits 1 if any check fails.
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
import lib  # noqa: E402

STEPS = 3
CONFIGS = [
    ("ddp", "1", []),
    ("zero3", "2", []),
    ("zero2", "2", ["--layout", "flat", "--grad-accum", "2"]),
    ("hsdp", "2x2", ["--reshard-after-forward", "false"]),
    ("zero3", "2", ["--param-dtype", "bf16"]),
    ("ddp", "2", ["--param-dtype", "bf16", "--reduce-dtype", "bf16",
                  "--grad-accum", "2"]),
]
FUSED_CALLS = {"linear_gelu": 1, "add_layernorm": 1, "matmul_gelu_grad": 1,
               "layernorm_grad_add": 2, "matmul_bias_grad": 4}


def kernel_calls(shardc, model, out_dir, tag, strategy, mesh, flags):
    """{fused kernel: calls in the emitted step}, whatever its dtype."""
    step = lib.emitted_step(shardc, model, os.path.join(out_dir, tag + ".cpp"),
                            ["--strategy", strategy, "--mesh", mesh] + flags)
    return {name: len(re.findall(r"\bshardc_rt_%s_(?:f32|bf16)\(" % name,
                                 step))
            for name in FUSED_CALLS}


def main():
    shardc, model, layers, out_dir = sys.argv[1:5]
    layers = int(layers)
    os.makedirs(out_dir, exist_ok=True)
    expected = {name: n * layers for name, n in FUSED_CALLS.items()}
    failures = 0

    for strategy, mesh, extra in CONFIGS:
        tag = "-".join([strategy, mesh] + [a.lstrip("-") for a in extra])
        runs = {}
        for fuse in ("true", "false"):
            export, log = lib.train(shardc, model, out_dir,
                                    "%s-fuse-%s" % (tag, fuse), strategy, mesh,
                                    STEPS, list(extra) + ["--fuse", fuse])
            runs[fuse] = (export, log)
        calls = {fuse: kernel_calls(shardc, model, out_dir,
                                    "%s-fuse-%s" % (tag, fuse), strategy,
                                    mesh, list(extra) + ["--fuse", fuse])
                 for fuse in runs}
        ok = calls["true"] == expected and not any(calls["false"].values())
        failures += not ok
        print("%s %-52s fused kernel calls %s" %
              ("ok  " if ok else "FAIL", tag,
               " ".join("%s=%d" % item for item in calls["true"].items())))
        ref_export, ref_log = runs["false"]
        export, log = runs["true"]
        loss, params = lib.differences(
            ref_log, lib.read_safetensors(ref_export), log, export)
        peak = {fuse: runs[fuse][1][-1]["peak_bytes"] for fuse in runs}
        predicted = {fuse: runs[fuse][1][-1]["predicted_peak_bytes"]
                     for fuse in runs}
        ok = (loss == 0 and params == 0 and peak == predicted and
              peak["true"] <= peak["false"])
        failures += not ok
        print("%s %-52s loss diff %.1e  param diff %.1e  peak %d (unfused %d)"
              % ("ok  " if ok else "FAIL", tag, loss, params, peak["true"],
                 peak["false"]))
    print("fusion: %d checks failed" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
