"""Mixed precision (param-dtype=bf16, FSDP2's MixedPrecisionPolicy): the
sharding strategy does not change the maths, and bf16 tracks f32.

usage: mixed_precision.py SHARDC MODEL.mlir OUT_DIR

1. For each rank count N (2, 4), reduce dtype (f32, bf16) and micro-batch
   count (1, 2), and for f32 params with a bf16 reduction on 4 ranks,
   every strategy and layout gives DDP's loss and params on N
   ranks with the same settings within 1e-5 after 3 AdamW steps (with
   --grad-sync microbatch, which sums reduced shards in f32 where DDP sums
   whole bf16 gradients, zero3 and flat hsdp give zero2's (but hsdp with a
   bf16 reduction, whose replicas all-reduce the summed shard once), and
   each tracks f32 as 2. says): each rank
   computes the same bf16 forward and backward on its rows whatever the
   strategy, and only the order of the cross-rank sums may differ. (A
   single-rank reference does not fit here: a rank's bf16 gradient of 2 rows
   rounds differently from one of 8, and for gradients near zero Adam turns
   that into a different sign of the update, up to 2 lr apart.)
2. Every configuration's loss at every step lies within 1e-3 relative of the
   single-rank f32 run's: bf16 keeps 8 bits of mantissa (2^-9 relative per
   rounding) and the loss averages over the batch, so the measured gap is
   about 2e-5; a wrong cast, offset or scale moves it by far more.
3. The exported params are the f32 masters, not their bf16 roundings: most
   of them are off the bf16 grid (AdamW's steps of lr = 1e-3 are below half
   a bf16 ulp for any |w| >= 0.26, so a bf16-only param would not move at
   all; layernorm weights start at 1).

Prints a row per configuration and exits 1 if any check fails.
"""

import os
import struct
import sys

sys.path.insert(0, os.path.dirname(__file__))
import lib  # noqa: E402

STEPS = 3
SAME_MATHS = 1e-5
TRACKS_F32 = 1e-3


def strategies(n, accum):
    yield "zero1", n, []
    yield "zero2", n, []
    yield "zero3", n, []
    yield "zero3", n, ["--reshard-after-forward", "false"]
    yield "zero3", n, ["--layout", "flat"]
    yield "zero2", n, ["--layout", "flat"]
    if n == "4":
        yield "hsdp", "2x2", []
    # Each micro-batch's gradients reduced, their shards summed in f32 (the
    # first of these is the others' reference).
    if n == "4" and accum == "2":
        yield "zero2", n, ["--grad-sync", "microbatch"]
        yield "zero3", n, ["--grad-sync", "microbatch"]
        yield "hsdp", "2x2", ["--layout", "flat", "--grad-sync", "microbatch"]


def main():
    shardc, model, out_dir = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    _, f32_log = lib.train(shardc, model, out_dir, "f32-1", "ddp", "1", STEPS)
    f32_loss = [line["loss"] for line in f32_log]
    print("f32 reference (1 rank): loss %s" %
          " ".join("%.6f" % l for l in f32_loss))
    failures = 0

    def tracks_f32(tag, log):
        gap = max(abs(a["loss"] - b) / abs(b) for a, b in zip(log, f32_loss))
        ok = len(log) == STEPS and gap <= TRACKS_F32
        print("%-4s %-44s loss vs f32 %.2e" % ("ok" if ok else "FAIL", tag,
                                                gap))
        return ok

    params, log = lib.train(shardc, model, out_dir, "bf16-1", "ddp", "1",
                            STEPS, ["--param-dtype", "bf16"])
    failures += not tracks_f32("ddp-1-bf16", log)
    values = [v for _, data in lib.read_safetensors(params).values()
              for v in data]
    off_grid = sum(struct.pack("<f", v)[:2] != b"\0\0" for v in values)
    ok = off_grid > len(values) // 2
    failures += not ok
    print("%-4s masters off the bf16 grid: %d of %d" %
          ("ok" if ok else "FAIL", off_grid, len(values)))
    groups = [(n, "bf16", reduce_dtype, accum) for n in ("2", "4")
              for reduce_dtype in ("f32", "bf16") for accum in ("1", "2")]
    # f32 params with gradients reduced in bf16: no masters, the optimizer
    # reads bf16 gradients.
    groups.append(("4", "f32", "bf16", "1"))
    for n, param_dtype, reduce_dtype, accum in groups:
        common = ["--param-dtype", param_dtype, "--reduce-dtype",
                  reduce_dtype, "--grad-accum", accum]
        group = "n%s-reduce-%s-accum%s" % (n, reduce_dtype, accum)
        if param_dtype != "bf16":
            group = "n%s-params-%s-reduce-%s" % (n, param_dtype, reduce_dtype)
        ref_params, ref_log = lib.train(shardc, model, out_dir, "ddp-" + group,
                                        "ddp", n, STEPS, common)
        failures += not tracks_f32("ddp-" + group, ref_log)
        references = {"ddp": (ref_log, lib.read_safetensors(ref_params))}
        for strategy, mesh, extra in strategies(n, accum):
            tag = "-".join([strategy, mesh, group] +
                           [e.strip("-") for e in extra])
            params, log = lib.train(shardc, model, out_dir, tag, strategy,
                                    mesh, STEPS, common + extra)
            # Shards summed in f32 round otherwise than DDP's bf16 sums of
            # whole gradients: such runs agree among themselves, but for
            # hsdp's, whose replicas then all-reduce the f32 sum in bf16
            # once, where zero2 rounds each micro-batch's reduction.
            against = "ddp"
            if "microbatch" in extra:
                against = "microbatch"
                if strategy == "hsdp" and reduce_dtype == "bf16":
                    against = "microbatch, replicas reduced once in bf16"
            if against not in references:
                references[against] = (log, lib.read_safetensors(params))
                failures += not tracks_f32(tag, log)
                continue
            ref_log_now, ref_now = references[against]
            loss_diff, param_diff = lib.differences(ref_log_now, ref_now, log,
                                                    params)
            ok = (len(log) == STEPS and loss_diff <= SAME_MATHS and
                  param_diff <= SAME_MATHS)
            failures += not ok
            print("%-4s %-44s vs %s: loss %.2e  params %.2e" %
                  ("ok" if ok else "FAIL", tag, against, loss_diff,
                   param_diff))
    print("mixed precision: %d checks failed" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
