"""Gradient clipping (#train.adamw's max_grad_norm, shardc-gen's
--max-grad-norm), as torch.nn.utils.clip_grad_norm_.

usage: clipping.py SHARDC SHARDC_GEN OUT_DIR

1. The norm and the coefficient, against the gradient itself. With
   lr = eps = 1000 and no weight decay, AdamW's first update of an element is
   -lr g / (|g| + eps) = -g (1 - |g| / eps): the unclipped run's first step
   moves every param by minus its gradient (to 1e-5 relative), and the
   clipped run's by minus the clipped gradient. So the logged grad_norm must
   be the L2 norm of the unclipped step's moves, and the clipped moves the
   unclipped ones times max_norm / (norm + 1e-6).
2. Every strategy clips the whole gradient: K steps with clipping active in
   each give the single-rank loss, params and grad_norm within 1e-5, and the
   measured peak is the predicted one (the sums and the coefficient are in
   the ledger).
3. A max_grad_norm that never clips changes nothing: the params are bit for
   bit the unclipped run's, in f32 and in bf16.

Prints a row per check and exits 1 if any fails.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import lib  # noqa: E402

STEPS = 3
TOLERANCE = 1e-5
MAX_NORM = 0.1  # the MLP's gradient norm is about 0.46 in the first steps


def moves(before, after):
    """Every element's after - before, over every param, in one list."""
    out = []
    for name in sorted(before):
        out += [b - a for a, b in zip(before[name][1], after[name][1])]
    return out


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def check_against_gradient(shardc, shardc_gen, out_dir):
    linear = ["mlp", "--lr", "1000", "--eps", "1000", "--weight-decay", "0"]
    plain = lib.generate(shardc_gen, out_dir, "linear", linear)
    clipped = lib.generate(shardc_gen, out_dir, "linear-clipped",
                           linear + ["--max-grad-norm", str(MAX_NORM)])
    start, _ = lib.train(shardc, plain, out_dir, "linear-0", "ddp", "1", 0)
    start = lib.read_safetensors(start)
    plain_path, _ = lib.train(shardc, plain, out_dir, "linear-1", "ddp", "1",
                              1)
    clipped_path, log = lib.train(shardc, clipped, out_dir, "clipped-1", "ddp",
                                  "1", 1)
    grad = moves(start, lib.read_safetensors(plain_path))
    clipped_grad = moves(start, lib.read_safetensors(clipped_path))
    norm = math.sqrt(sum(g * g for g in grad))
    logged = log[0]["grad_norm"]
    ratio = sum(map(abs, clipped_grad)) / sum(map(abs, grad))
    coefficient = MAX_NORM / (logged + 1e-6)
    failures = 0
    for what, got, want in (("grad_norm", logged, norm),
                            ("clip coefficient", ratio, coefficient)):
        ok = relative(got, want) < 1e-3
        failures += not ok
        print("%-4s %-40s %.6g, expected %.6g" % ("ok" if ok else "FAIL",
                                                  what, got, want))
    return failures


def configurations():
    for n in ("2", "4"):
        yield "ddp", n, []
    yield "zero1", "4", []
    # A flat bucket per param: the buckets' updates move after the norm.
    yield "zero1", "2", ["--layout", "flat", "--bucket-mb", "0"]
    yield "zero2", "2", ["--grad-accum", "2"]
    yield "zero2", "4", ["--layout", "flat"]
    yield "zero3", "4", []
    yield "zero3", "2", ["--layout", "flat", "--grad-accum", "2"]
    yield "hsdp", "2x2", []
    yield "hsdp", "2x2", ["--layout", "flat"]
    # The norm of shards summed over micro-batches in the loop.
    yield "zero3", "2", ["--grad-accum", "2", "--grad-sync", "microbatch"]
    yield "hsdp", "2x2", ["--layout", "flat", "--grad-accum", "2",
                          "--grad-sync", "microbatch"]


def check_strategies(shardc, shardc_gen, out_dir):
    model = lib.generate(shardc_gen, out_dir, "mlp",
                         ["mlp", "--eps", "1e-6", "--max-grad-norm",
                          str(MAX_NORM)])
    ref_path, ref_log = lib.train(shardc, model, out_dir, "reference", "ddp",
                                  "1", STEPS)
    reference = (ref_log, lib.read_safetensors(ref_path))
    norms = [line["grad_norm"] for line in ref_log]
    print("reference (1 rank): grad_norm %s" %
          " ".join("%.6f" % n for n in norms))
    failures = 0
    if min(norms) <= MAX_NORM:
        print("FAIL the reference does not clip every step")
        failures += 1
    for strategy, mesh, extra in configurations():
        tag = "-".join([strategy, mesh] + [e.strip("-") for e in extra])
        params, log = lib.train(shardc, model, out_dir, tag, strategy, mesh,
                                STEPS, extra)
        close, loss_diff, param_diff = lib.follows(reference, log, params,
                                                   STEPS, TOLERANCE)
        norm_diff = max(relative(a["grad_norm"], b["grad_norm"])
                        for a, b in zip(log, ref_log))
        peaks = all(line["peak_bytes"] == line["predicted_peak_bytes"]
                    for line in log)
        ok = close and norm_diff <= TOLERANCE and peaks
        failures += not ok
        print("%-4s %-40s loss %.1e  param %.1e  norm %.1e  peak %s" %
              ("ok" if ok else "FAIL", tag, loss_diff, param_diff, norm_diff,
               "= predicted" if peaks else "!= predicted"))
    return failures


def check_no_op(shardc, shardc_gen, out_dir):
    failures = 0
    for dtype in ("f32", "bf16"):
        base = ["mlp", "--dtype", dtype]
        plain = lib.generate(shardc_gen, out_dir, "plain-" + dtype, base)
        loose = lib.generate(shardc_gen, out_dir, "loose-" + dtype,
                             base + ["--max-grad-norm", "1e30"])
        a, a_log = lib.train(shardc, plain, out_dir, "plain-" + dtype, "zero3",
                             "2", STEPS)
        b, b_log = lib.train(shardc, loose, out_dir, "loose-" + dtype, "zero3",
                             "2", STEPS)
        loss_diff, param_diff = lib.differences(a_log, lib.read_safetensors(a),
                                                b_log, b)
        ok = loss_diff == 0 and param_diff == 0 and "grad_norm" in b_log[0]
        failures += not ok
        print("%-4s %-40s loss %.1e  param %.1e" %
              ("ok" if ok else "FAIL", "max_grad_norm 1e30 " + dtype,
               loss_diff, param_diff))
    return failures


def main():
    shardc, shardc_gen, out_dir = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    failures = check_against_gradient(shardc, shardc_gen, out_dir)
    failures += check_strategies(shardc, shardc_gen, out_dir)
    failures += check_no_op(shardc, shardc_gen, out_dir)
    print("clipping: %d checks failed" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
