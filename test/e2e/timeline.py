"""Properties of the ledger's timeline (machine=h200) on a GPT of GPT-2
small's width (4 layers, T = 1024, bf16), each of which a wrong schedule
or a wrong price would break.

usage: timeline.py SHARDC_OPT MODEL.mlir OUT_DIR

Prints a row per property and exits 1 if any fails.
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import lib  # noqa: E402


def timeline(shardc_opt, model, out_dir, options):
    path = os.path.join(out_dir, "ledger.json")
    subprocess.run([shardc_opt, model, "-o", os.devnull,
                    "--shardc-pipeline=param-dtype=bf16 machine=h200 "
                    "format=json output=%s %s" % (path, options)],
                   check=True)
    report = json.load(open(path))
    return report, report["timeline"]


def main():
    shardc_opt, model, out_dir = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    check = lib.Checks()

    def run(options):
        return timeline(shardc_opt, model, out_dir, options)

    # ddp's buckets overlap the backward: no backward waits on one, only
    # the updates on the last (the tied embedding's gradient, finished by
    # the backward's last op).
    _, ddp = run("strategy=ddp mesh=8")
    check(not any("backward" in w["what"] for w in ddp["waits"]) and
          ddp["exposed_ms"] < ddp["all_reduce_ms"],
          "ddp: no backward waits; exposed %.3f ms of %.3f ms of all-reduce"
          % (ddp["exposed_ms"], ddp["all_reduce_ms"]))

    # Prefetching hides gathers.
    _, zero3 = run("strategy=zero3 mesh=8")
    _, eager = run("strategy=zero3 mesh=8 prefetch=0")
    check(zero3["exposed_ms"] < eager["exposed_ms"],
          "zero3: prefetch 1 exposes less than prefetch 0")

    # The last unit kept gathered: fewer gathers, no more waiting.
    _, every = run("strategy=zero3 mesh=8 reshard-last-unit=true")
    check(zero3["all_gather_ms"] < every["all_gather_ms"] and
          zero3["exposed_ms"] <= every["exposed_ms"],
          "zero3: keeping the last unit gathers less, waits no more")

    # Across nodes (45 GB/s) a gather takes longer than inside one
    # (360 GB/s).
    _, across = run("strategy=zero3 mesh=16")
    _, inside = run("strategy=zero3 mesh=16 ranks-per-node=16")
    check(across["all_gather_ms"] > 4 * inside["all_gather_ms"],
          "zero3 16 ranks: across nodes %.3f ms of all-gather, in one "
          "node %.3f" % (across["all_gather_ms"], inside["all_gather_ms"]))

    # The books balance: every collective is waited on before the step
    # ends, so the step is the compute stream's kernels and waits; the
    # waits add up to the exposed time, longest first; the MFU is the
    # ledger's model FLOPs over the step at bf16's peak.
    report, t = run("strategy=zero3 mesh=8")
    compute = t["matmul_ms"] + t["memory_ms"]
    check(abs(t["step_ms"] - compute - t["exposed_ms"]) < 1e-9,
          "step = compute + exposed")
    waits = [w["ms"] for w in t["waits"]]
    check(abs(sum(waits) - t["exposed_ms"]) < 1e-9 and
          waits == sorted(waits, reverse=True),
          "waits sum to the exposed time, longest first")
    mfu = report["per_rank"]["model_flops"] / (t["step_ms"] * 1e-3 * 989e12)
    check(abs(mfu - t["mfu"]) < 1e-12, "MFU %.3f" % t["mfu"])

    print("timeline: %d properties fail" % check.failures)
    sys.exit(1 if check.failures else 0)


if __name__ == "__main__":
    main()
