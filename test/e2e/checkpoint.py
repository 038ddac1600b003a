"""Sharded checkpoints reshard on load: save after step 2 with one strategy
and rank count, load with another, continue; the result matches an
uninterrupted run (bit for bit when nothing changes but the restart).
Under bf16 mixed precision the checkpoint holds the f32 masters: resumed on
the same ranks with any strategy it continues the uninterrupted bf16 run
(another rank count would round its bf16 gradients differently, see
mixed_precision.py).

usage: checkpoint.py SHARDC MODEL.mlir OUT_DIR
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import lib  # noqa: E402

TOLERANCE = 1e-5  # another strategy sums gradients in another order


def main():
    shardc, model, out = sys.argv[1:4]
    os.makedirs(out, exist_ok=True)
    ckpt = os.path.join(out, "ckpt")
    whole, whole_log = lib.train(shardc, model, out, "whole", "zero3", "4", 3)
    lib.train(shardc, model, out, "first", "zero3", "4", 2,
              run_args=["--save", ckpt])
    # FSDP1's flat pieces cut params anywhere: saved, they load as dim0.
    flat_ckpt = os.path.join(out, "flat-ckpt")
    lib.train(shardc, model, out, "first-flat", "zero3", "4", 2,
              ["--layout", "flat"], run_args=["--save", flat_ckpt])
    bf16 = ["--param-dtype", "bf16"]
    whole_bf16, whole_bf16_log = lib.train(shardc, model, out, "whole-bf16",
                                           "zero3", "4", 3, bf16)
    bf16_ckpt = os.path.join(out, "bf16-ckpt")
    lib.train(shardc, model, out, "first-bf16", "zero3", "4", 2, bf16,
              run_args=["--save", bf16_ckpt])
    print("saved:", " ".join(sorted(os.listdir(ckpt))))
    # Step 3 of the uninterrupted runs, read once.
    f32_reference = (lib.read_safetensors(whole), whole_log[2:])
    bf16_reference = (lib.read_safetensors(whole_bf16), whole_bf16_log[2:])
    failures = 0
    for tag, strategy, mesh, extra, source, tolerance in (
            ("zero3-4", "zero3", "4", [], ckpt, 0.0),
            # Stored over the mesh [node 2, local 2]: the same shards.
            ("zero3-4-reshard2", "zero3", "4",
             ["--reshard-after-forward", "2"], ckpt, 0.0),
            ("zero2-2", "zero2", "2", [], ckpt, TOLERANCE),
            ("hsdp-2x2", "hsdp", "2x2", [], ckpt, TOLERANCE),
            ("ddp-1", "ddp", "1", [], ckpt, TOLERANCE),
            ("zero1-2-flat", "zero1", "2", ["--layout", "flat"], ckpt,
             TOLERANCE),
            ("zero2-2", "zero2", "2", [], flat_ckpt, TOLERANCE),
            ("zero3-4-bf16", "zero3", "4", bf16, bf16_ckpt, 0.0),
            ("zero2-4-flat-bf16", "zero2", "4", bf16 + ["--layout", "flat"],
             bf16_ckpt, TOLERANCE),
            ("hsdp-2x2-bf16", "hsdp", "2x2", bf16, bf16_ckpt, TOLERANCE)):
        origin = {ckpt: "zero3-4", flat_ckpt: "zero3-4-flat",
                  bf16_ckpt: "zero3-4-bf16"}[source]
        reference, reference_log = \
            bf16_reference if source == bf16_ckpt else f32_reference
        resumed, log = lib.train(shardc, model, out,
                                 "resumed-%s-from-%s" % (tag, origin),
                                 strategy, mesh, 1, extra,
                                 run_args=["--load", source])
        loss_diff, param_diff = lib.differences(reference_log, reference, log,
                                                resumed)
        ok = log[0]["step"] == 3 and loss_diff <= tolerance and \
            param_diff <= tolerance
        failures += not ok
        print("%-4s %-12s -> %-17s step %d  loss diff %.2e  param diff %.2e"
              % ("ok" if ok else "FAIL", origin, tag, log[0]["step"],
                 loss_diff, param_diff))
    print("checkpoint: %d resumed runs differ" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
