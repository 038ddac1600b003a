#!/usr/bin/env bash
# When micro-batches' gradients are reduced (--grad-sync), side by side in
# one run:
# 1. memory and traffic, from the ledger (which the executables match to the
#    byte, test/e2e/memory.test): GPT-2 small (124M, T = 1024, global batch
#    64) per rank under zero2, zero3 (dim0 and flat) on 8 ranks and hsdp
#    2x4, f32, with 4 and 8 micro-batches: the gradients held, the peak and
#    the reduce-scatter bytes sent per step once per step (step) and each
#    micro-batch's (microbatch), and their ratios;
# 2. time, measured: the CPU executable of a small GPT (4 layers, hidden
#    256, seq 128, batch 8; zero3 on 2 ranks, 2 micro-batches): median ms
#    per step and the measured peak under each, the builds taking turns so
#    that a change in the machine's load falls on each.
# Builds first (scripts/common.sh); the table goes to stdout, build output
# to stderr. Under a minute here.
#
# Environment: STEPS and ROUNDS (runs of STEPS measured steps after a
# warm-up, per build; default 6 and 3), SHARDC_BUILD_DIR (default build/).
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
shardc_bench_setup

STEPS="${STEPS:-6}"
ROUNDS="${ROUNDS:-3}"
export OPENBLAS_NUM_THREADS=1

"$bin/shardc-gen" gpt --layers 12 --hidden 768 --heads 12 --vocab 50257 \
  --pad-vocab 128 --seq 1024 --batch 64 >"$work/gpt2.mlir"

# The ledger of GPT-2 small under pipeline options $1: "grads peak rs_bytes".
ledger() {
  "$bin/shardc-opt" "$work/gpt2.mlir" -o /dev/null \
    --shardc-pipeline="$1 format=json output=$work/ledger.json"
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); p = r["per_rank"]
print(p["grads_bytes"], p["peak_bytes"], r["comm"]["reduce_scatter_bytes"])' \
    "$work/ledger.json"
}

echo "# --grad-sync step (reduce once, after the loop) vs microbatch (each micro-batch's, summed in the shard)"
echo "# memory and traffic: the ledger per rank, GPT-2 small (124M params, T = 1024, global batch 64), f32, MB = 10^6 bytes"
fmt='%-11s %-5s %3s %9s %9s %9s %9s %6s %9s %9s %6s\n'
printf "$fmt" strategy mesh K grads_step grads_mb peak_step peak_mb ratio rs_step rs_mb ratio
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
for config in "zero2 8" "zero3 8" "zero3 8 flat" "hsdp 2x4"; do
  read -r strategy mesh layout <<<"$config"
  for accum in 4 8; do
    base="strategy=$strategy mesh=$mesh layout=${layout:-dim0} grad-accum=$accum"
    read -r g1 p1 r1 <<<"$(ledger "$base grad-sync=step")"
    read -r g2 p2 r2 <<<"$(ledger "$base grad-sync=microbatch")"
    printf "$fmt" "$strategy${layout:+-$layout}" "$mesh" "$accum" \
      "$(mb "$g1")" "$(mb "$g2")" "$(mb "$p1")" "$(mb "$p2")" \
      "$(ratio "$p2" "$p1")" "$(mb "$r1")" "$(mb "$r2")" "$(ratio "$r2" "$r1")"
  done
done

shardc_bench_small_gpt "zero3 on 2 ranks, 2 micro-batches"
for sync in step microbatch; do
  "$bin/shardc" build "$work/small.mlir" --strategy zero3 --mesh 2 \
    --grad-accum 2 --grad-sync "$sync" --quiet -o "$work/small-$sync" >&2
done
for round in $(seq "$ROUNDS"); do
  for sync in step microbatch; do
    mpirun --allow-run-as-root --oversubscribe -x OPENBLAS_NUM_THREADS=1 \
      -np 2 "$work/small-$sync" --steps $((STEPS + 1)) --quiet \
      --log-json "$work/$sync-$round.jsonl"
  done
done
python3 - "$work" "$ROUNDS" <<'PY'
import json, os, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
ms, peak, predicted = {}, {}, {}
for sync in ("step", "microbatch"):
    steps = []
    for round in range(1, rounds + 1):
        lines = [json.loads(l) for l in
                 open(os.path.join(work, "%s-%d.jsonl" % (sync, round)))]
        steps += [l["step_ms"] for l in lines[1:]]
        peak[sync] = lines[-1]["peak_bytes"]
        predicted[sync] = lines[-1]["predicted_peak_bytes"]
    ms[sync] = statistics.median(steps)
print("%-12s %10s %12s %12s" % ("grad-sync", "ms/step", "peak_bytes",
                                "predicted"))
for sync in ("step", "microbatch"):
    print("%-12s %10.2f %12d %12d" % (sync, ms[sync], peak[sync],
                                      predicted[sync]))
print("# microbatch / step: %.2fx the step time, %.2fx the peak"
      % (ms["microbatch"] / ms["step"], peak["microbatch"] / peak["step"]))
PY
