"""The correctness contract: for every strategy, rank count, layout,
reshard-after-forward (true, false, and K: the backward gathering over K
ranks; the last unit keeping its gather, or resharding too: "all"),
micro-batch count and when micro-batches' gradients
are reduced (--grad-sync), K AdamW steps of the sharded
executable give the loss and every param of the single-rank executable.

usage: equivalence.py SHARDC MODEL.mlir OUT_DIR [--layouts dim0,flat]

Prints a row per configuration and exits 1 if any differs by more than
1e-5 (fp32), in the loss of any step or in any exported param.

The models use AdamW's eps = 1e-6. An update is lr * m / (sqrt(v) + eps):
for a gradient g of the size of eps it moves by about lr * dg / eps when
rounding moves g by dg. Sharding sums a gradient in another order (per rank,
then across ranks), so dg is a few ulps of the summands, about 1e-10 here;
with eps = 1e-8 and lr = 1e-3 that alone is 1e-5, at the tolerance, for the
few of ~1e5 elements whose gradient happens to be that small. eps = 1e-6
keeps that bound at 1e-7 and leaves the tolerance to what it is meant to
catch.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import lib  # noqa: E402

STEPS = 3
TOLERANCE = 1e-5


def configurations(layouts):
    """(strategy, mesh, layout, reshard-after-forward, micro-batches,
    grad-sync)."""
    for layout in layouts:
        # ddp shards nothing: it has no layout but dim0's.
        for strategy in ("ddp", "zero1", "zero2")[layout == "flat":]:
            for n in (1, 2, 4):
                for accum in (1, 2):
                    yield strategy, str(n), layout, "true", accum, "step"
        for n in ("1", "2", "4", "2x2"):
            strategy = "hsdp" if "x" in n else "zero3"
            # K = 2 of a shard axis of 4: mesh [node 2, local 2]; "all":
            # true with the last unit resharded too.
            for reshard in ("true", "false") + (("2", "all") if n == "4"
                                                else ()):
                for accum in (1, 2):
                    yield strategy, n, layout, reshard, accum, "step"
        # hsdp's mesh [replicate 2, node 2, local 2].
        yield "hsdp", "2x4", layout, "2", 1, "step"
        # Each micro-batch's gradients reduced into the shard.
        for strategy, n in (("zero2", "4"), ("zero3", "4"), ("hsdp", "2x2")):
            yield strategy, n, layout, "true", 2, "microbatch"
        yield "zero3", "4", layout, "2", 2, "microbatch"
    # Small units bucketed into one flat parameter.
    if "flat" in layouts:
        for strategy, n in (("zero3", "4"), ("hsdp", "2x2")):
            for reshard in ("true", "false"):
                yield strategy, n, "flat-merged", reshard, 2, "step"
        for reshard in ("2", "all"):
            yield "zero3", "4", "flat-merged", reshard, 2, "step"


def reshard_tag(reshard):
    """reshard1 (true), reshard0 (false), reshardK, reshardall."""
    return "reshard" + {"true": "1", "false": "0"}.get(reshard, reshard)


def main():
    shardc, model, out_dir = sys.argv[1:4]
    layouts = ["dim0"]
    if len(sys.argv) > 5 and sys.argv[4] == "--layouts":
        layouts = sys.argv[5].split(",")
    os.makedirs(out_dir, exist_ok=True)
    ref_path, ref_log = lib.train(shardc, model, out_dir, "reference", "ddp",
                                  "1", STEPS)
    ref_params = lib.read_safetensors(ref_path)
    print("reference (1 rank): loss %s" %
          " ".join("%.6f" % line["loss"] for line in ref_log))
    failures = 0
    for strategy, mesh, layout, reshard, accum, sync in configurations(
            layouts):
        tag = "%s-%s-%s-%s-accum%d" % (strategy, mesh, layout,
                                        reshard_tag(reshard), accum)
        extra = ["--grad-accum", str(accum)]
        if sync != "step":
            tag += "-" + sync
            extra += ["--grad-sync", sync]
        if layout == "flat":
            extra += ["--layout", "flat"]
        elif layout == "flat-merged":
            extra += ["--layout", "flat", "--unit-bucket-mb", "100"]
        if reshard == "all":
            extra += ["--reshard-last-unit", "true"]
        elif strategy in ("zero3", "hsdp"):
            extra += ["--reshard-after-forward", reshard]
        params, log = lib.train(shardc, model, out_dir, tag, strategy, mesh,
                                STEPS, extra)
        loss_diff, param_diff = lib.differences(ref_log, ref_params, log,
                                                params)
        ok = (len(log) == STEPS and loss_diff <= TOLERANCE and
              param_diff <= TOLERANCE)
        failures += not ok
        print("%-4s %-40s loss diff %.2e  param diff %.2e" %
              ("ok" if ok else "FAIL", tag, loss_diff, param_diff))
    print("equivalence: %d configurations differ by more than %g" %
          (failures, TOLERANCE))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
