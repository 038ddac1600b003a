"""offload-optimizer (ZeRO-Offload): the optimizer state in host memory,
updated on the host CPU; and offload-params with it (FSDP2's
CPUOffloadPolicy): zero3's and hsdp's stored shards there too.

usage: offload.py SHARDC MODEL.mlir BIG.mlir OUT_DIR

For each configuration, trains it with and without --offload-optimizer
true (then --offload-params true too) and checks that

- the offloaded run's loss and params are the other's, bit for bit (on the
  CPU both update with the same loop; only where the state lives differs);
- its measured peak, device state, host state and bytes copied between
  host and device per step are the ledger's, to the byte;
- its peak is the other's less exactly the optimizer state, which is now in
  host memory; with the params offloaded too, the device keeps no state
  between steps, and the peak is lower by exactly the params too (each
  gather copies its shard into its own slot of the result), but on one
  rank, whose gathers stay as those copies: lower, by less.

BIG.mlir, a model of more params than one thread updates, is updated on
3 threads (OMP_NUM_THREADS=3), and through 64 KiB halves of staging
(SHARDC_OFFLOAD_STAGING_KB=64), to the bits of the plain run; a bad value
of either is named.

Then saves a checkpoint from an offloaded run after step 2 and resumes it
for step 3 with either offloading and without, and a plain run's
checkpoint with either: each gives the uninterrupted run's step 3, bit for
bit.

Exits 1 if anything differs.
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import lib  # noqa: E402

STEPS = 2
OFFLOAD = ["--offload-optimizer", "true"]
CONFIGS = [
    ("ddp", "2", []),
    ("zero1", "2", ["--layout", "flat"]),
    ("zero2", "4", []),
    ("zero3", "4", []),
    ("zero3", "4", ["--layout", "flat", "--param-dtype", "bf16"]),
    ("hsdp", "2x2", ["--param-dtype", "bf16", "--grad-accum", "2",
                     "--grad-sync", "microbatch"]),
]
OFFLOAD_PARAMS = OFFLOAD + ["--offload-params", "true"]
# One rank too: its gathers stay, each the copy of a shard to the device.
PARAM_CONFIGS = [
    ("zero3", "1", []),
    ("zero3", "4", []),
    ("zero3", "2", ["--reshard-after-forward", "false", "--recompute", "*"]),
    # The backward gathers the shards its forward kept on the device: only
    # the forward's gathers copy from host memory.
    ("zero3", "4", ["--reshard-after-forward", "2", "--recompute", "*"]),
    ("zero3", "4", ["--layout", "flat", "--param-dtype", "bf16"]),
    ("hsdp", "2x2", ["--param-dtype", "bf16", "--grad-accum", "2",
                     "--grad-sync", "microbatch"]),
]


def tag_of(strategy, mesh, extra):
    return "-".join([strategy, mesh] + [e.strip("-") for e in extra])


def compare_runs(shardc, model, out_dir, configs, offload):
    failures = 0
    params = "--offload-params" in offload
    print("%-44s %10s %10s %10s %10s %s" %
          ("configuration" + (" (params too)" if params else ""), "peak",
           "offloaded", "host", "copies", ""))
    for strategy, mesh, extra in configs:
        tag = tag_of(strategy, mesh, extra)
        kept_export, kept = lib.train(shardc, model, out_dir, tag, strategy,
                                      mesh, STEPS, extra)
        off_export, off = lib.train(shardc, model, out_dir,
                                    tag + ("-offload-params" if params
                                           else "-offload"),
                                    strategy, mesh, STEPS, extra + offload)
        last, plain = off[-1], kept[-1]
        problems = []
        if [r["loss"] for r in off] != [r["loss"] for r in kept]:
            problems.append("losses differ")
        diff = lib.max_param_diff(lib.read_safetensors(kept_export),
                                  lib.read_safetensors(off_export))
        if diff != 0:
            problems.append("params differ by %g" % diff)
        for measured in ("peak_bytes", "persistent_bytes", "host_bytes",
                         "host_copy_bytes"):
            if last[measured] != last["predicted_" + measured]:
                problems.append("%s %d, predicted %d" % (
                    measured, last[measured], last["predicted_" + measured]))
        # Exactly by what went to the host; but on one rank with the params
        # there, whose gathers then stay, as their copies to the device.
        fell = plain["peak_bytes"] - last["peak_bytes"]
        one_rank = params and mesh == "1"
        if not one_rank and fell != last["host_bytes"]:
            problems.append("the peak fell by %d, not the host's %d" % (
                fell, last["host_bytes"]))
        if one_rank and fell <= 0:
            problems.append("the peak fell by %d" % fell)
        if params and last["persistent_bytes"] != 0:
            problems.append("the device keeps %d bytes of state" %
                            last["persistent_bytes"])
        if "host_bytes" in plain:
            problems.append("the plain run reports host bytes")
        failures += bool(problems)
        print("%-44s %10d %10d %10d %10d %s" % (
            tag, plain["peak_bytes"], last["peak_bytes"], last["host_bytes"],
            last["host_copy_bytes"],
            "ok" if not problems else "FAIL: " + "; ".join(problems)))
    return failures


def compare_big(shardc, model, out_dir):
    """ddp on 2 ranks updates every param in one call: on 3 threads, runs
    of a third of the elements each; with 64 KiB halves of staging, in
    runs of 64 KiB, params cut across them, each run's copies to the host
    overlapping the previous run's update."""
    failures = 0
    plain_export, _ = lib.train(shardc, model, out_dir, "big", "ddp", "2", 2)
    exe = os.path.join(out_dir, "big-offload")
    lib.run([shardc, "build", model, "--strategy", "ddp", "--mesh", "2",
             "--quiet", "-o", exe] + OFFLOAD)
    mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
              exe, "--steps", "2"]
    for label, env in (("on 3 threads", {"OMP_NUM_THREADS": "3"}),
                       ("in 64 KiB runs", {"SHARDC_OFFLOAD_STAGING_KB": "64"})):
        base = exe + "-" + label.replace(" ", "-")
        result = lib.run(mpirun + ["--export", base + ".safetensors",
                                   "--log-json", base + ".jsonl"],
                         env=dict(os.environ, **env))
        last = lib.read_log(base + ".jsonl")[-1]
        problems = []
        if "OMP_NUM_THREADS" in env and \
                "updated on 3 threads" not in result.stdout:
            problems.append("3 threads not said")
        if last["host_copy_bytes"] != last["predicted_host_copy_bytes"]:
            problems.append("host copies %d, predicted %d" % (
                last["host_copy_bytes"], last["predicted_host_copy_bytes"]))
        diff = lib.max_param_diff(lib.read_safetensors(plain_export),
                                  lib.read_safetensors(base + ".safetensors"))
        if diff != 0:
            problems.append("params differ by %g" % diff)
        failures += bool(problems)
        print("%-4s big-ddp-2 %s: %s" % (
            "ok" if not problems else "FAIL", label,
            "; ".join(problems) or "the plain run's params"))
    for variable in ("OMP_NUM_THREADS", "SHARDC_OFFLOAD_STAGING_KB"):
        bad = subprocess.run(mpirun, capture_output=True, text=True,
                             env=dict(os.environ, **{variable: "many"}))
        named = ("%s: expected" % variable in bad.stderr and
                 "got 'many'" in bad.stderr)
        failures += bad.returncode == 0 or not named
        print("%-4s %s=many: exit %d, %s" % (
            "ok" if bad.returncode != 0 and named else "FAIL", variable,
            bad.returncode, "named" if named else "not named"))
    return failures


def compare_resumed(shardc, model, out_dir):
    """A checkpoint saved after step 2 by a zero3 run offloading the
    optimizer, or the params too, resumed for step 3 with either and with
    neither; and one saved by a plain run, resumed with either."""
    failures = 0
    whole_export, whole = lib.train(shardc, model, out_dir, "whole", "zero3",
                                    "4", 3)
    reference = (whole[2:], lib.read_safetensors(whole_export))
    for saved_flags, name in ((OFFLOAD, "saved-offload"),
                              (OFFLOAD_PARAMS, "saved-offload-params"),
                              ([], "saved")):
        ckpt = os.path.join(out_dir, name + ".ckpt")
        lib.train(shardc, model, out_dir, name, "zero3", "4", 2, saved_flags,
                  ["--save", ckpt])
        resumes = [("zero3", "4", OFFLOAD), ("zero3", "4", OFFLOAD_PARAMS)]
        if saved_flags:
            resumes.append(("zero3", "4", []))
        for strategy, mesh, extra in resumes:
            tag = "%s-to-%s" % (name, tag_of(strategy, mesh, extra))
            export, log = lib.train(shardc, model, out_dir, tag, strategy,
                                    mesh, 1, extra, ["--load", ckpt])
            ok, loss_diff, param_diff = lib.follows(reference, log, export, 1,
                                                    0.0)
            failures += not ok
            print("%-4s %-40s step 3  loss diff %.2e  param diff %.2e" % (
                "ok" if ok else "FAIL", tag, loss_diff, param_diff))
    return failures


def main():
    shardc, model, big, out_dir = sys.argv[1:5]
    os.makedirs(out_dir, exist_ok=True)
    failures = compare_runs(shardc, model, out_dir, CONFIGS, OFFLOAD)
    failures += compare_runs(shardc, model, out_dir, PARAM_CONFIGS,
                             OFFLOAD_PARAMS)
    failures += compare_big(shardc, big, out_dir)
    failures += compare_resumed(shardc, model, out_dir)
    print("offload: %d differences" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
