"""A vocabulary padded for alignment changes nothing but the padding.

usage: padded_vocab.py SHARDC PLAIN.mlir PADDED.mlir TOKENS.bin OUT_DIR

PLAIN is a GPT of V tokens; PADDED is the same GPT with its token embedding
padded to Vp > V rows (shardc-gen gpt --pad-vocab), its loss over V classes
(train.cross_entropy's `classes`). Fed the same tokens (TOKENS.bin, or the
executables' synthetic data, which draws tokens below V as well), for
every configuration below:
  - the losses of every step and every param but the embedding agree with
    PLAIN's within 1e-5 (the GEMMs over Vp columns may sum in another
    order);
  - the embedding's first V rows agree with PLAIN's within 1e-5;
  - the padding rows get exactly no gradient: AdamW only decays them, so
    after K steps they are their initial values times (1 - lr wd)^K, to
    f32 rounding.
Prints a row per configuration and exits 1 if any check fails.
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
import lib  # noqa: E402

STEPS = 3
TOLERANCE = 1e-5
WTE = "transformer.wte.weight"

# (strategy, mesh, build flags, whether the tokens come from TOKENS.bin)
CONFIGURATIONS = [
    ("ddp", "1", [], True),
    ("zero3", "2", [], True),
    ("zero2", "2", ["--layout", "flat"], True),
    ("hsdp", "2x2", ["--grad-accum", "2"], True),
    ("zero3", "2", [], False),
]


def optimizer(model):
    """lr and weight decay from the model's train.model line."""
    text = open(model).read()
    lr = float(re.search(r"lr = ([0-9.e+-]+)", text).group(1))
    wd = float(re.search(r"weight_decay = ([0-9.e+-]+)", text).group(1))
    return lr, wd


def rows(param, begin, end):
    """Rows [begin, end) of a 2-D param as read_safetensors returns it."""
    shape, values = param
    return values[begin * shape[1]:end * shape[1]]


def main():
    shardc, plain, padded, tokens, out_dir = sys.argv[1:6]
    os.makedirs(out_dir, exist_ok=True)
    data = ["--data", tokens]
    lr, wd = optimizer(padded)
    init_path, _ = lib.train(shardc, padded, out_dir, "init", "ddp", "1", 0,
                             run_args=data)
    init = lib.read_safetensors(init_path)[WTE]
    vp = init[0][0]
    failures = 0
    for strategy, mesh, extra, from_file in CONFIGURATIONS:
        tag = "-".join([strategy, mesh] + [a.lstrip("-") for a in extra] +
                       ([] if from_file else ["synthetic"]))
        runs = [lib.train(shardc, model, out_dir, tag + "-" + kind, strategy,
                          mesh, STEPS, extra, data if from_file else ())
                for kind, model in (("plain", plain), ("padded", padded))]
        (plain_path, plain_log), (padded_path, padded_log) = runs
        a = lib.read_safetensors(plain_path)
        b = lib.read_safetensors(padded_path)
        v = a[WTE][0][0]
        loss = max(abs(x["loss"] - y["loss"])
                   for x, y in zip(plain_log, padded_log))
        others = lib.max_param_diff({k: a[k] for k in a if k != WTE},
                                    {k: b[k] for k in b if k != WTE})
        classes = max(abs(x - y) for x, y in zip(rows(a[WTE], 0, v),
                                                 rows(b[WTE], 0, v)))
        decay = (1 - lr * wd) ** STEPS
        padding = max(abs(y - x * decay) / max(abs(x), 1e-30)
                      for x, y in zip(rows(init, v, vp),
                                      rows(b[WTE], v, vp)))
        ok = (len(plain_log) == len(padded_log) == STEPS and
              max(loss, others, classes) <= TOLERANCE and padding <= 1e-6)
        failures += not ok
        print("%s %-28s loss %.1e  params %.1e  wte[:%d] %.1e  "
              "padding rows vs decayed init %.1e (relative)"
              % ("ok  " if ok else "FAIL", tag, loss, others, v, classes,
                 padding))
    print("padded vocab: %d configurations differ" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
