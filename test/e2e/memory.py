"""Measured against predicted: each executable's allocator high-water mark
per rank against --shardc-ledger's peak, its params and optimizer state
against the ledger's, its bytes sent against the ledger's ring formulas.

usage: memory.py SHARDC MODEL.mlir OUT_DIR

Prints both figures per configuration; exits 1 unless the peak, params +
optimizer and bytes sent all agree to the byte: the executable allocates
and frees exactly the buffers the ledger walks (BufferLiveness), in-place
results included.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import lib  # noqa: E402

CONFIGS = [
    ("ddp", "4", []),
    ("zero1", "4", []),
    ("zero2", "4", []),
    ("zero3", "4", []),
    ("zero3", "4", ["--reshard-after-forward", "false"]),
    # The last unit gathers again for its backward.
    ("zero3", "4", ["--reshard-last-unit", "true"]),
    # The forward keeps its shard over 2 of the 4 ranks for the backward.
    ("zero3", "4", ["--reshard-after-forward", "2"]),
    ("hsdp", "1x4", ["--reshard-after-forward", "2", "--layout", "flat",
                     "--param-dtype", "bf16", "--grad-accum", "2"]),
    ("zero3", "2", ["--grad-accum", "2"]),
    ("hsdp", "2x2", []),
    ("zero3", "4", ["--layout", "flat"]),
    ("zero2", "4", ["--layout", "flat"]),
    ("hsdp", "2x2", ["--layout", "flat", "--grad-accum", "2"]),
    # Each micro-batch's gradients reduced in the loop, their shards summed.
    ("zero3", "2", ["--grad-accum", "2", "--grad-sync", "microbatch"]),
    ("hsdp", "2x2", ["--layout", "flat", "--grad-accum", "2", "--grad-sync",
                     "microbatch"]),
    # Mixed precision: bf16 params and activations, f32 masters, the casts
    # for the wire staged.
    ("ddp", "4", ["--param-dtype", "bf16"]),
    ("zero1", "4", ["--param-dtype", "bf16"]),
    ("zero2", "4", ["--param-dtype", "bf16", "--reduce-dtype", "bf16"]),
    ("zero3", "4", ["--param-dtype", "bf16"]),
    ("zero3", "4", ["--param-dtype", "bf16", "--layout", "flat"]),
    ("hsdp", "2x2", ["--param-dtype", "bf16", "--grad-accum", "2"]),
    ("zero2", "4", ["--param-dtype", "bf16", "--reduce-dtype", "bf16",
                    "--grad-accum", "2", "--grad-sync", "microbatch"]),
]


def main():
    shardc, model, out_dir = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    failures = 0
    print("%-28s %12s %12s %7s %12s %12s" %
          ("configuration", "peak", "predicted", "error", "state",
           "sent/step"))
    for strategy, mesh, extra in CONFIGS:
        tag = "-".join([strategy, mesh] + [e.strip("-") for e in extra])
        _, log = lib.train(shardc, model, out_dir, tag, strategy, mesh, 2,
                           extra)
        last = log[-1]
        error = (last["peak_bytes"] - last["predicted_peak_bytes"]) / \
            last["predicted_peak_bytes"]
        ok = (last["peak_bytes"] == last["predicted_peak_bytes"] and
              last["persistent_bytes"] == last["predicted_persistent_bytes"]
              and last["bytes_sent"] == last["predicted_bytes_sent"])
        failures += not ok
        print("%-28s %12d %12d %+6.1f%% %12d %12d %s" %
              (tag, last["peak_bytes"], last["predicted_peak_bytes"],
               100 * error, last["persistent_bytes"], last["bytes_sent"],
               "ok" if ok else "FAIL (predicted state %d, sent %d)" %
               (last["predicted_persistent_bytes"],
                last["predicted_bytes_sent"])))
    print("memory: %d configurations off the ledger" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
