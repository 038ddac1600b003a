"""#train.adamw's decay_min_rank (shardc-gen --decay-min-rank): the weight
decay applies to params of that rank or more, as llm.c's and nanoGPT's
param groups (matrices and embeddings decay; biases and layer norms do not).

usage: decay.py SHARDC SHARDC_GEN OUT_DIR

1. After one step from the same init and data, with decay_min_rank = 2 every
   1-D param is bit for bit the run without weight decay's, and every 2-D
   param the run decaying everything's; the two runs differ in both (the
   decay is large enough to show).
2. Every strategy and layout (flat pieces mix decayed and undecayed members)
   gives one rank's loss and params within 1e-5 after 3 steps.

Prints a row per check and exits 1 if any fails.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import lib  # noqa: E402

STEPS = 3
TOLERANCE = 1e-5
OPTIMIZER = ["--eps", "1e-6"]


def generate(shardc_gen, out_dir, name, args):
    return lib.generate(shardc_gen, out_dir, name, ["mlp"] + OPTIMIZER + args)


def check_groups(shardc, shardc_gen, out_dir):
    runs = {}
    for name, args in (("groups", ["--weight-decay", "0.5",
                                   "--decay-min-rank", "2"]),
                       ("none", ["--weight-decay", "0"]),
                       ("all", ["--weight-decay", "0.5"])):
        model = generate(shardc_gen, out_dir, name, args)
        path, _ = lib.train(shardc, model, out_dir, name + "-1", "ddp", "1", 1)
        runs[name] = lib.read_safetensors(path)
    failures = 0
    for rank, same, other in ((1, "none", "all"), (2, "all", "none")):
        names = [n for n, (shape, _) in runs["groups"].items()
                 if len(shape) == rank]
        equal = all(runs["groups"][n] == runs[same][n] for n in names)
        differ = all(runs["groups"][n] != runs[other][n] for n in names)
        ok = bool(names) and equal and differ
        failures += not ok
        print("%-4s rank-%d params (%s) as with %s decay, unlike %s" %
              ("ok" if ok else "FAIL", rank, ", ".join(sorted(names)), same,
               other))
    return failures


def configurations():
    yield "ddp", "2", []
    yield "zero1", "2", ["--layout", "flat"]
    yield "zero2", "4", []
    yield "zero2", "2", ["--layout", "flat", "--bucket-mb", "0"]
    yield "zero3", "2", []
    yield "zero3", "4", ["--layout", "flat"]
    yield "hsdp", "2x2", ["--layout", "flat"]


def check_strategies(shardc, shardc_gen, out_dir):
    model = generate(shardc_gen, out_dir, "mlp",
                     ["--weight-decay", "0.5", "--decay-min-rank", "2"])
    ref_path, ref_log = lib.train(shardc, model, out_dir, "reference", "ddp",
                                  "1", STEPS)
    reference = (ref_log, lib.read_safetensors(ref_path))
    failures = 0
    for strategy, mesh, extra in configurations():
        tag = "-".join([strategy, mesh] + [e.strip("-") for e in extra])
        params, log = lib.train(shardc, model, out_dir, tag, strategy, mesh,
                                STEPS, extra)
        ok, loss_diff, param_diff = lib.follows(reference, log, params, STEPS,
                                                TOLERANCE)
        failures += not ok
        print("%-4s %-40s loss %.1e  param %.1e" %
              ("ok" if ok else "FAIL", tag, loss_diff, param_diff))
    return failures


def main():
    shardc, shardc_gen, out_dir = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    failures = check_groups(shardc, shardc_gen, out_dir)
    failures += check_strategies(shardc, shardc_gen, out_dir)
    print("decay: %d checks failed" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
