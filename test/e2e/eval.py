"""The evaluation step (--eval-every K), as llm.c's validation loss and
PyTorch's model.eval() under torch.no_grad(): the loss of the current params
on batches, with no backward and no update.

usage: eval.py SHARDC SHARDC_GEN OUT_DIR

1. It is the step's forward: the evaluation before the first step, on the
   training data's first batch, is the first step's loss to the bit, for
   every strategy and layout, with micro-batches, bf16 and recomputation
   (a GPT under cudasim too); and every evaluation's measured peak is the
   one the ledger predicts for the evaluation step.
2. It changes nothing: evaluating after every step trains the same losses
   and params, bit for bit, as not evaluating.
3. It averages held-out batches (--eval-data): over two batches, the mean of
   each one's loss alone.
4. It evaluates a checkpoint: --load DIR --steps 0 gives the loss the saving
   run evaluated at that step.
5. It reads token files: --eval-data VAL.bin evaluates VAL's windows while
   the steps read --data's, and a file holding fewer batches than
   --eval-batches is evaluated once over, not around again.

Prints a row per check and exits 1 if any fails.
"""

import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(__file__))
import lib  # noqa: E402

EVAL_ONCE = ["--eval-every", "1", "--eval-batches", "1"]


def evals(log):
    return [line for line in log if "eval_loss" in line]


def steps(log):
    return [line for line in log if "loss" in line]


def peaks_predicted(log):
    return all(line["eval_peak_bytes"] == line["predicted_eval_peak_bytes"]
               for line in evals(log))


def report(ok, what, detail):
    print("%-4s %-44s %s" % ("ok" if ok else "FAIL", what, detail))
    return not ok


def configurations():
    yield "mlp", "ddp", "1", []
    yield "mlp", "ddp", "2", []
    yield "mlp", "zero1", "2", ["--layout", "flat"]
    yield "mlp", "zero2", "4", []
    yield "mlp", "zero3", "2", ["--grad-accum", "2"]
    yield "mlp", "zero3", "4", ["--layout", "flat"]
    yield "mlp", "hsdp", "2x2", ["--param-dtype", "bf16", "--reduce-dtype",
                                 "bf16"]
    yield "gpt", "zero3", "2", ["--recompute", "*"]
    yield "gpt", "zero2", "2", ["--target", "cudasim"]


def check_first_step(shardc, models, out_dir):
    failures = 0
    for model, strategy, mesh, extra in configurations():
        tag = "-".join([model, strategy, mesh] +
                       [e.strip("-*") for e in extra if e.strip("-*")])
        _, log = lib.train(shardc, models[model], out_dir, tag, strategy, mesh,
                           1, extra, EVAL_ONCE)
        before, first = evals(log)[0], steps(log)[0]
        ok = (before["step"] == 0 and before["eval_loss"] == first["loss"] and
              len(evals(log)) == 2 and peaks_predicted(log))
        failures += report(ok, tag, "eval %.9g  step 1 %.9g  peak %d%s" % (
            before["eval_loss"], first["loss"], before["eval_peak_bytes"],
            " = predicted" if peaks_predicted(log) else " != predicted"))
    return failures


def check_no_effect(shardc, models, out_dir):
    plain, plain_log = lib.train(shardc, models["mlp"], out_dir, "plain",
                                 "zero3", "2", 3)
    evaluated, log = lib.train(shardc, models["mlp"], out_dir, "evaluated",
                               "zero3", "2", 3, (),
                               ["--eval-every", "1", "--eval-batches", "2"])
    loss_diff, param_diff = lib.differences(plain_log,
                                            lib.read_safetensors(plain),
                                            steps(log), evaluated)
    ok = (loss_diff == 0 and param_diff == 0 and len(steps(log)) == 3 and
          [line["step"] for line in evals(log)] == [0, 1, 2, 3])
    return report(ok, "evaluating changes no step",
                  "loss %.1e  param %.1e" % (loss_diff, param_diff))


def write_batches(path, batches):
    """A --data file of the MLP's inputs: x [n, 32, 64] F32, y [n, 32] I32."""
    xs = b"".join(struct.pack("<%df" % len(x), *x) for x, _ in batches)
    ys = b"".join(struct.pack("<%di" % len(y), *y) for _, y in batches)
    lib.write_safetensors(path, {
        "x": ("F32", [len(batches), 32, 64], xs),
        "y": ("I32", [len(batches), 32], ys)})


def f32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


def check_held_out(shardc, models, out_dir):
    rng = random.Random(7)
    batches = [([rng.gauss(0, 1) for _ in range(32 * 64)],
                [rng.randrange(10) for _ in range(32)]) for _ in range(2)]
    paths = [os.path.join(out_dir, name + ".data.safetensors")
             for name in ("held-out-0", "held-out-1", "held-out")]
    write_batches(paths[0], batches[:1])
    write_batches(paths[1], batches[1:])
    write_batches(paths[2], batches)
    losses = []
    for i, (path, count) in enumerate(zip(paths, ("1", "1", "2"))):
        _, log = lib.train(shardc, models["mlp"], out_dir, "held-out-%d" % i,
                           "zero2", "2", 0, (),
                           ["--eval-every", "1", "--eval-batches", count,
                            "--eval-data", path])
        losses.append(evals(log)[0]["eval_loss"])
    mean = f32((losses[0] + losses[1]) / 2)
    ok = f32(losses[2]) == mean and losses[0] != losses[1]
    return report(ok, "two held-out batches",
                  "%.9g = (%.9g + %.9g) / 2" % (losses[2], losses[0],
                                                losses[1]))


def write_tokens(path, count, seed):
    """A token file (llm.c's header) of `count` tokens below the GPT's 64."""
    rng = random.Random(seed)
    lib.write_tokens(path, [rng.randrange(64) for _ in range(count)])


def check_tokens(shardc, models, out_dir):
    train, val = (os.path.join(out_dir, name + ".bin")
                  for name in ("train", "val"))
    write_tokens(train, 4096, 1)
    # Two batches of 8 windows of 16 (+1) tokens, and no third.
    write_tokens(val, 2 * 8 * 16 + 17, 2)
    runs = {}
    for tag, data, count in (("tokens-train", train, "5"),
                             ("tokens-val", val, "2")):
        _, runs[tag] = lib.train(shardc, models["gpt"], out_dir, tag, "zero3",
                                 "2", 1, (),
                                 ["--data", data, "--eval-every", "1",
                                  "--eval-batches", count, "--eval-data", val])
    held_out, alone = evals(runs["tokens-train"])[0], evals(runs["tokens-val"])[0]
    trained = [steps(runs[tag])[0]["loss"] for tag in runs]
    ok = (held_out["eval_batches"] == alone["eval_batches"] == 2 and
          held_out["eval_loss"] == alone["eval_loss"] and
          trained[0] != trained[1])
    return report(ok, "token files, capped at the batches held",
                  "%d batches: %.9g = %.9g; steps %.9g != %.9g" % (
                      held_out["eval_batches"], held_out["eval_loss"],
                      alone["eval_loss"], trained[0], trained[1]))


def check_checkpoint(shardc, models, out_dir):
    ck = os.path.join(out_dir, "ck")
    _, log = lib.train(shardc, models["mlp"], out_dir, "saving", "zero3", "2",
                       2, (), ["--eval-every", "2", "--save", ck])
    _, loaded = lib.train(shardc, models["mlp"], out_dir, "loaded", "zero3",
                          "2", 0, (), ["--eval-every", "1", "--load", ck])
    saved, again = evals(log)[-1], evals(loaded)[0]
    ok = (saved["step"] == again["step"] == 2 and
          saved["eval_loss"] == again["eval_loss"])
    return report(ok, "a checkpoint's evaluation",
                  "step %d: %.9g, loaded %.9g" % (again["step"],
                                                  saved["eval_loss"],
                                                  again["eval_loss"]))


def main():
    shardc, shardc_gen, out_dir = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    models = {
        "mlp": lib.generate(shardc_gen, out_dir, "mlp", ["mlp"]),
        "gpt": lib.generate(shardc_gen, out_dir, "gpt",
                            ["gpt", "--layers", "2", "--hidden", "32",
                             "--heads", "2", "--vocab", "64", "--seq", "16",
                             "--batch", "8"]),
    }
    failures = check_first_step(shardc, models, out_dir)
    failures += check_no_effect(shardc, models, out_dir)
    failures += check_held_out(shardc, models, out_dir)
    failures += check_checkpoint(shardc, models, out_dir)
    failures += check_tokens(shardc, models, out_dir)
    print("eval: %d checks failed" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
