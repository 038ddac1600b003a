"""The learning-rate schedule of train.adamw (warmup, decay_steps, min_lr)
drives every update, on every strategy, across a checkpoint.

usage: schedule.py SHARDC OUT_DIR

1. Each step's lr in --log-json is the schedule's, as train.adamw's
   description defines it (computed here in Python), through the warm-up,
   the cosine decay and after it.
2. The rate reaches the update: one step of the scheduled model is, to the
   bit, one step of the same model at a constant lr / warmup, and not one
   at lr.
3. zero3 on 2 ranks and hsdp 2x2 with 2 micro-batches train as one rank
   (within 1e-5, the equivalence contract).
4. A run saved after step 4 and resumed for 5 more continues the schedule:
   steps 5 to 9 have the uninterrupted run's lr and loss, and the params
   end the same, to the bit.

Prints a line per check and exits 1 if any fails.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import lib  # noqa: E402

LR, WARMUP, DECAY_STEPS, MIN_LR = 6e-4, 3, 7, 6e-5
STEPS = 9
TOLERANCE = 1e-5


def scheduled_lr(step):
    if step <= WARMUP:
        return LR * step / WARMUP
    if step >= DECAY_STEPS:
        return MIN_LR
    progress = (step - WARMUP) / (DECAY_STEPS - WARMUP)
    return MIN_LR + (LR - MIN_LR) * 0.5 * (1 + math.cos(math.pi * progress))


def generate(shardc, out_dir, name, flags):
    gen = os.path.join(os.path.dirname(shardc), "shardc-gen")
    path = os.path.join(out_dir, name + ".mlir")
    result = lib.run([gen, "gpt", "--layers", "2", "--batch", "8", "--eps",
                      "1e-6"] + flags)
    with open(path, "w") as f:
        f.write(result.stdout)
    return path


def main():
    shardc, out_dir = sys.argv[1:3]
    os.makedirs(out_dir, exist_ok=True)
    check = lib.Checks()

    model = generate(shardc, out_dir, "scheduled",
                     ["--lr", repr(LR), "--warmup", str(WARMUP),
                      "--decay-steps", str(DECAY_STEPS), "--min-lr",
                      repr(MIN_LR)])
    ref, ref_log = lib.train(shardc, model, out_dir, "ddp-1", "ddp", "1",
                             STEPS)
    worst = max(abs(line["lr"] - scheduled_lr(line["step"])) /
                scheduled_lr(line["step"]) for line in ref_log)
    # The log prints 9 significant digits.
    check(len(ref_log) == STEPS and worst <= 1e-8,
          "lr per step %s, schedule's within %.1e" %
          (" ".join("%.4g" % line["lr"] for line in ref_log), worst))

    one, _ = lib.train(shardc, model, out_dir, "one-step", "ddp", "1", 1)
    warm = generate(shardc, out_dir, "constant-warm",
                    ["--lr", repr(LR / WARMUP)])
    peak = generate(shardc, out_dir, "constant-peak", ["--lr", repr(LR)])
    one_warm, _ = lib.train(shardc, warm, out_dir, "one-step-warm", "ddp",
                            "1", 1)
    one_peak, _ = lib.train(shardc, peak, out_dir, "one-step-peak", "ddp",
                            "1", 1)
    scheduled = lib.read_safetensors(one)
    to_warm = lib.max_param_diff(scheduled, lib.read_safetensors(one_warm))
    to_peak = lib.max_param_diff(scheduled, lib.read_safetensors(one_peak))
    check(to_warm == 0 and to_peak > 0,
          "step 1 = a step at lr / warmup (param diff %.1e), not at lr "
          "(%.1e)" % (to_warm, to_peak))

    ref_params = lib.read_safetensors(ref)
    for tag, strategy, mesh, extra in (
            ("zero3-2", "zero3", "2", []),
            ("hsdp-2x2-grad-accum-2", "hsdp", "2x2", ["--grad-accum", "2"])):
        params, log = lib.train(shardc, model, out_dir, tag, strategy, mesh,
                                STEPS, extra)
        loss, param = lib.differences(ref_log, ref_params, log, params)
        check(len(log) == STEPS and loss <= TOLERANCE and param <= TOLERANCE,
              "%s as one rank: loss diff %.1e  param diff %.1e" %
              (tag, loss, param))

    whole, whole_log = lib.train(shardc, model, out_dir, "zero3-2-whole",
                                 "zero3", "2", STEPS)
    ckpt = os.path.join(out_dir, "ckpt")
    lib.train(shardc, model, out_dir, "zero3-2-first", "zero3", "2", 4,
              run_args=["--save", ckpt])
    resumed, log = lib.train(shardc, model, out_dir, "zero3-2-resumed",
                             "zero3", "2", STEPS - 4,
                             run_args=["--load", ckpt])
    same = [(a["step"], a["lr"], a["loss"]) for a in log] == \
        [(b["step"], b["lr"], b["loss"]) for b in whole_log[4:]]
    param = lib.max_param_diff(lib.read_safetensors(whole),
                               lib.read_safetensors(resumed))
    check(same and param == 0,
          "resumed after step 4: steps %s, lr and loss as uninterrupted; "
          "param diff %.1e" % (",".join(str(a["step"]) for a in log), param))
    print("schedule: %d checks failed" % check.failures)
    sys.exit(1 if check.failures else 0)


if __name__ == "__main__":
    main()
