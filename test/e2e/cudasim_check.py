"""target=cuda's executables, run on the CPU by cudasim, train as target=host.

usage: cudasim_check.py SHARDC COMPARE_PY MODEL.mlir TOKENS.bin OUT_DIR
                        [CLIPPED.mlir]

For every configuration below, MODEL is built twice, --target host and
--target cudasim (target=cuda's emitted step and runtime: streams, events,
NCCL collectives over MPI, the CUDA kernels, cuBLAS and cuBLASLt), and each
trains STEPS steps from the same init on TOKENS; bench/gpu/compare.py check
then compares every step's loss and every exported param, as bench/gpu/run.sh
compares a GPU with the CPU: f32 with TF32 off within 1e-4 relative; bf16
mixed precision (flash attention's bf16 kernels) and f32 on TF32 (flash
attention's TF32 kernels) within 2e-2 relative + 3e-4 but for at most 12
elements, each within 3.6e-3 (run.sh's CHECK_BF16_* says why). Multi-rank
configurations run the target=cuda code for N > 1 that NCCL cannot run on
one GPU, with the streams' work in issue order and (CUDASIM_STREAMS=lazy)
the communication streams' as late as their events allow. Each step's
peak memory and bytes sent (NCCL's, counted as the host backend counts
MPI's) must be the ledger's predictions. CLIPPED, the model with gradient
clipping, trains in CLIPPED_CONFIGURATIONS, and each step's grad_norm must
also be target=host's within 1e-5 relative. Prints compare.py's lines per
configuration and exits 1 if any differs.
"""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import lib  # noqa: E402

STEPS = 3
EXACT = ["--rtol", "1e-4", "--atol", "1e-6"]
ROUNDED = ["--rtol", "2e-2", "--atol", "3e-4", "--outliers", "12",
           "--outlier-bound", "3.6e-3"]

# (label, strategy, mesh, build flags, cudasim's environment, tolerance)
CONFIGURATIONS = [
    ("zero3-1", "zero3", "1", [], {"SHARDC_TF32": "0"}, EXACT),
    ("ddp-1", "ddp", "1", [], {"SHARDC_TF32": "0"}, EXACT),
    ("zero3-2", "zero3", "2", [], {"SHARDC_TF32": "0"}, EXACT),
    ("zero2-2-flat", "zero2", "2", ["--layout", "flat"], {"SHARDC_TF32": "0"},
     EXACT),
    ("ddp-2", "ddp", "2", [], {"SHARDC_TF32": "0"}, EXACT),
    ("hsdp-2x2-accum-2", "hsdp", "2x2", ["--grad-accum", "2"],
     {"SHARDC_TF32": "0"}, EXACT),
    ("zero3-2-bf16", "zero3", "2", ["--param-dtype", "bf16"], {}, ROUNDED),
    ("zero3-1-tf32", "zero3", "1", [], {"SHARDC_TF32": "1"}, ROUNDED),
]
# The communication streams' work as late as their events allow
# (CUDASIM_STREAMS=lazy): a wait the step leaves out reads or overwrites a
# buffer too early, and the run differs.
LAZY = {"SHARDC_TF32": "0", "CUDASIM_STREAMS": "lazy"}
CONFIGURATIONS += [
    ("zero3-2-lazy", "zero3", "2", [], LAZY, EXACT),
    ("zero2-2-flat-lazy", "zero2", "2", ["--layout", "flat"], LAZY, EXACT),
    ("ddp-2-lazy", "ddp", "2", [], LAZY, EXACT),
    ("hsdp-2x2-accum-2-lazy", "hsdp", "2x2", ["--grad-accum", "2"], LAZY,
     EXACT),
    # Each micro-batch's reduce-scatters in the loop, read by its sums.
    ("zero3-2-accum-2-microbatch-lazy", "zero3", "2",
     ["--grad-accum", "2", "--grad-sync", "microbatch"], LAZY, EXACT),
    ("zero3-2-bf16-lazy", "zero3", "2", ["--param-dtype", "bf16"],
     {"CUDASIM_STREAMS": "lazy"}, ROUNDED),
    # reshard-after-forward=2 over mesh [node 2, local 2]: each kept shard
    # copied on the compute stream after its unit's forward, gathered on
    # the `local` communicator's stream before its backward.
    ("zero3-4-reshard-2-lazy", "zero3", "4",
     ["--reshard-after-forward", "2"], LAZY, EXACT),
    # Activation checkpointing: the backward's recomputed forward kernels.
    ("zero3-2-recompute-lazy", "zero3", "2", ["--recompute", "*"], LAZY,
     EXACT),
    # The optimizer offloaded: the step's gradients copied to the host, its
    # updates copied back, with the accounting of those copies. Lazy
    # streams hold each copy back until the compute stream's next operation
    # or synchronisation: an update that read its gradients before waiting
    # for them would differ; 2 KiB halves of staging make the updates runs
    # whose copies overlap.
    ("zero3-2-bf16-offload-lazy", "zero3", "2",
     ["--param-dtype", "bf16", "--offload-optimizer", "true"],
     {"CUDASIM_STREAMS": "lazy", "SHARDC_OFFLOAD_STAGING_KB": "2"}, ROUNDED),
    # The params offloaded too: each gather's shard copied from host memory
    # into its slot of the result on the communication stream, gathered in
    # place (NCCL reads only device memory: cudasim checks), the updates
    # writing host memory in place; on one rank, the gathers stay to make
    # those copies.
    ("zero3-2-bf16-offload-params-lazy", "zero3", "2",
     ["--param-dtype", "bf16", "--offload-optimizer", "true",
      "--offload-params", "true"],
     {"CUDASIM_STREAMS": "lazy", "SHARDC_OFFLOAD_STAGING_KB": "2"}, ROUNDED),
    ("zero3-1-offload-params-lazy", "zero3", "1",
     ["--offload-optimizer", "true", "--offload-params", "true"], LAZY,
     EXACT),
]
# Gradient clipping: the sum of squares and the coefficient's kernels, with
# the norm's all-reduce over the shards.
CLIPPED_CONFIGURATIONS = [
    ("clip-zero3-2-lazy", "zero3", "2", [], LAZY, EXACT),
    ("clip-hsdp-2x2-flat", "hsdp", "2x2", ["--layout", "flat"],
     {"SHARDC_TF32": "0"}, EXACT),
    ("clip-ddp-1-bf16", "ddp", "1", ["--param-dtype", "bf16"], {}, ROUNDED),
    # The coefficient copied to the host with the gradients; f32 values
    # both ways.
    ("clip-zero2-2-flat-offload-lazy", "zero2", "2",
     ["--layout", "flat", "--offload-optimizer", "true"], LAZY, EXACT),
]


def main():
    shardc, compare, model, tokens, out_dir = sys.argv[1:6]
    clipped = sys.argv[6] if len(sys.argv) > 6 else None
    if clipped:
        with open(clipped) as f:
            max_norm = float(re.search(r"max_grad_norm = ([0-9.e+-]+)",
                                       f.read()).group(1))
    os.makedirs(out_dir, exist_ok=True)
    data = ["--data", tokens, "--seed", "1234"]
    failures = 0
    runs_of = [(model, c) for c in CONFIGURATIONS]
    if clipped:
        runs_of += [(clipped, c) for c in CLIPPED_CONFIGURATIONS]
    for model, (label, strategy, mesh, flags, env, tolerance) in runs_of:
        runs = {}
        for target in ("host", "cudasim"):
            runs[target] = lib.train(
                shardc, model, out_dir, label + "-" + target, strategy, mesh,
                STEPS, flags + ["--target", target], data,
                env=dict(os.environ, **env) if target == "cudasim" else None)
        (ref_export, _), (export, _) = runs["host"], runs["cudasim"]
        base = os.path.join(out_dir, label)
        result = subprocess.run(
            [sys.executable, compare, "check",
             "--ref-log", base + "-host.jsonl", "--ref-export", ref_export,
             "--log", base + "-cudasim.jsonl", "--export", export,
             "--label", label] + tolerance,
            capture_output=True, text=True)
        print(result.stdout + result.stderr, end="")
        failures += result.returncode != 0
        # The runtime allocator's peak and NCCL's bytes (counted as the
        # host backend counts MPI's) are the ledger's predictions; so are an
        # offloaded optimizer's copies between host and device.
        log = lib.read_log(base + "-cudasim.jsonl")
        figures = ["peak_bytes", "bytes_sent"]
        if "--offload-optimizer" in flags:
            figures.append("host_copy_bytes")
        measured = [tuple(r[f] for f in figures) for r in log]
        predicted = [tuple(r["predicted_" + f] for f in figures) for r in log]
        failures += measured != predicted
        print("%s: peak and bytes sent per step %s, predicted %s: %s"
              % (label, measured, predicted,
                 "ok" if measured == predicted else "FAIL"))
        if model is clipped:
            # Every step clips (its norm is over the bound), on both targets.
            ref = lib.read_log(base + "-host.jsonl")
            norms = [(r["grad_norm"], h["grad_norm"]) for r, h in zip(log, ref)]
            bound = 1e-5 if tolerance is EXACT else 2e-2
            close = (len(norms) == STEPS and
                     all(abs(a - b) <= bound * abs(b) and b > max_norm
                         for a, b in norms))
            failures += not close
            print("%s: grad_norm per step (cudasim, host) %s, all over %g: %s"
                  % (label, norms, max_norm, "ok" if close else "FAIL"))
    print("cudasim: %d configurations differ from target=host" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
