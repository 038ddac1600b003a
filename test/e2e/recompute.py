"""Activation checkpointing (--recompute) changes what the step keeps, never
what it computes: on the host target every configuration trains to the same
bits with and without it, and keeps less.

usage: recompute.py SHARDC MODEL.mlir LAYERS OUT_DIR

For each configuration below, MODEL is built with --recompute '*' (every
unit) and without, and each trains 3 AdamW steps:
1. the step with recompute runs each block's attention twice (the forward's
   and the backward's recomputation), the step without once; under
   --recompute-policy save-matmuls, which keeps it, once;
2. both give the same loss at every step and the same params, to the bit (0,
   not a tolerance: the recomputation runs the forward's kernels on the
   forward's operands);
3. both measure the peak the ledger predicts, and the recomputing step's is
   smaller: it keeps each block's input, not its activations.
Then recomputing the first block only ('transformer.h.0') peaks as low as
recomputing both: the last block's activations are live when its backward
starts, kept or recomputed, so (as with torch.utils.checkpoint) recomputing
the unit just before the loss saves nothing.

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
    ("ddp", "2", ["--grad-accum", "2"]),
    ("zero1", "2", []),
    ("zero2", "2", ["--layout", "flat"]),
    ("zero3", "2", []),
    ("zero3", "2", ["--reshard-after-forward", "false"]),
    ("zero3", "4", ["--layout", "flat", "--unit-bucket-mb", "100"]),
    ("hsdp", "2x2", ["--grad-accum", "2"]),
    ("zero3", "2", ["--param-dtype", "bf16"]),
    ("zero3", "2", ["--fuse", "false"]),
    # Selective: GEMM and attention results kept, the rest recomputed.
    ("zero3", "2", ["--recompute-policy", "save-matmuls"]),
    # In bf16 with f32 reductions this tiny GPT's peak is the f32 staging
    # of its gradients' reductions, in flight over the next backward, which
    # recomputation cannot lower: reduced in bf16 too (FSDP2's bf16 policy).
    ("hsdp", "2x2", ["--recompute-policy", "save-matmuls", "--param-dtype",
                     "bf16", "--reduce-dtype", "bf16"]),
]


def attention_calls(shardc, model, out_dir, tag, strategy, mesh, flags):
    """Calls of the attention forward kernel in the emitted step."""
    step = lib.emitted_step(shardc, model, os.path.join(out_dir, tag + ".cpp"),
                            ["--strategy", strategy, "--mesh", mesh] + flags)
    return len(re.findall(r"\bshardc_rt_attention_(?:f32|bf16)\(", step))


def main():
    shardc, model, layers, out_dir = sys.argv[1:5]
    layers = int(layers)
    os.makedirs(out_dir, exist_ok=True)
    failures = 0

    def train(tag, strategy, mesh, flags):
        export, log = lib.train(shardc, model, out_dir, tag, strategy, mesh,
                                STEPS, flags)
        return export, log, log[-1]["peak_bytes"], \
            log[-1]["predicted_peak_bytes"]

    for strategy, mesh, extra in CONFIGS:
        tag = "-".join([strategy, mesh] + [a.lstrip("-") for a in extra])
        flags = {"kept": list(extra), "recomputed": extra + ["--recompute",
                                                             "*"]}
        calls = {how: attention_calls(shardc, model, out_dir,
                                      "%s-%s" % (tag, how), strategy, mesh,
                                      flags[how])
                 for how in flags}
        runs = {how: train("%s-%s" % (tag, how), strategy, mesh, flags[how])
                for how in flags}
        (ref_export, ref_log, ref_peak, ref_predicted) = runs["kept"]
        (export, log, peak, predicted) = runs["recomputed"]
        loss, params = lib.differences(
            ref_log, lib.read_safetensors(ref_export), log, export)
        selective = "save-matmuls" in extra
        ok = (calls == {"kept": layers,
                        "recomputed": layers if selective else 2 * layers} and
              loss == 0 and params == 0 and ref_peak == ref_predicted and
              peak == predicted and peak < ref_peak)
        failures += not ok
        print("%s %-44s attention calls %d (kept %d)  loss diff %.1e  "
              "param diff %.1e  peak %d (kept %d)" %
              ("ok  " if ok else "FAIL", tag, calls["recomputed"],
               calls["kept"], loss, params, peak, ref_peak))
        if (strategy, mesh, extra) == ("zero3", "2", []):
            all_peak, kept_peak = peak, ref_peak
        if selective and mesh == "2":
            selective_peak = peak

    # The first block of two: the peak is at the second's backward, whose
    # activations are live there either way.
    _, _, peak, predicted = train("zero3-2-one", "zero3", "2",
                                  ["--recompute", "transformer.h.0"])
    ok = peak == predicted and peak == all_peak < kept_peak
    failures += not ok
    print("%s %-44s peak %d (all %d, none %d)" %
          ("ok  " if ok else "FAIL", "zero3-2-recompute-transformer.h.0",
           peak, all_peak, kept_peak))
    # Selective keeps more than full recomputation, less than none.
    ok = all_peak < selective_peak < kept_peak
    failures += not ok
    print("%s %-44s peak %d (full %d, none %d)" %
          ("ok  " if ok else "FAIL", "zero3-2-save-matmuls-between",
           selective_peak, all_peak, kept_peak))
    print("recompute: %d checks failed" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
