#!/usr/bin/env bash
# What a unit keeps from its forward to its backward, side by side in one
# run: nothing (--reshard-after-forward true: zero3's gathers again, over
# every rank), everything (false: no second gather), or its shard over K
# consecutive ranks (K: FSDP2's reshard_after_forward=K, ZeRO++'s hpZ; the
# backward gathers over those K, inside a node of K GPUs). With true and K
# the unit whose forward runs last keeps its gather whole, its backward
# following at once (torchtitan's default); row `all` reshards it too
# (--reshard-last-unit true, FSDP2's fully_shard on every block), the
# baseline of the ratios.
# 1. memory and traffic, from the ledger (which the executables match to the
#    byte, test/e2e/memory.test): GPT-2 small (124M, T = 1024, bf16,
#    prefetch 1) under zero3 on 2 and 8 nodes of 8 ranks (batch 4 per
#    rank): the peak, the gathered params' high-water mark, the all-gather
#    bytes per step and how many of them stay inside a node (over `local`;
#    with true every gather spans the nodes, with false the backward has
#    none), and the bytes across nodes;
# 2. time, measured: the CPU executable of a small GPT (4 layers, hidden
#    256, seq 128, batch 8; zero3 on 4 ranks, all, true, K = 2 and false),
#    median ms per step, the measured peak against the ledger's and the
#    bytes sent, the builds taking turns. Every rank here shares one
#    machine, so no gather is cheaper for staying inside a "node": the
#    column shows the kept copy's own cost, not the network's.
# Builds first (scripts/common.sh); the table goes to stdout, build output
# to stderr. About 30 seconds here.
#
# Environment: STEPS and ROUNDS (runs of STEPS measured steps after a
# warm-up, per build; default 6 and 3), SHARDC_BUILD_DIR (default build/).
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
shardc_bench_setup

STEPS="${STEPS:-6}"
ROUNDS="${ROUNDS:-3}"
export OPENBLAS_NUM_THREADS=1

# The options of a row, as option=value: the pipeline's form, and the
# driver's with -- before each. `all` is true with the last unit resharded too.
keep_options() {
  if [ "$1" = all ]; then
    echo "reshard-after-forward=true reshard-last-unit=true"
  else
    echo "reshard-after-forward=$1"
  fi
}

# The ledger of GPT-2 small at batch $1 under pipeline options $2:
# "peak gathered all_gather_bytes local_all_gather_bytes".
ledger() {
  "$bin/shardc-opt" "$work/gpt2-b$1.mlir" -o /dev/null \
    --shardc-pipeline="$2 format=json output=$work/ledger.json"
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))
p, c = r["per_rank"], r["comm"]
print(p["peak_bytes"], p["gathered_bytes"], c["all_gather_bytes"],
      c.get("local_all_gather_bytes", 0))' "$work/ledger.json"
}

echo "# reshard-after-forward: true (gather again over every rank), false (keep), K (keep the shard over K, gather over K);"
echo "#   with true and K the last unit keeps its gather whole; all: true with --reshard-last-unit true"
echo "# memory and traffic: the ledger per rank, GPT-2 small (124M params, T = 1024), zero3, bf16, prefetch 1,"
echo "#   nodes of 8 ranks, batch 4 per rank; MB = 10^6 bytes, per step"
fmt='%5s %6s %8s %8s %9s %11s %11s %12s\n'
printf "$fmt" ranks keep peak_GB ratio gathered all_gather inside_node across_nodes
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }
for ranks in 16 64; do
  batch=$((4 * ranks))
  [ -s "$work/gpt2-b$batch.mlir" ] ||
    "$bin/shardc-gen" gpt --layers 12 --hidden 768 --heads 12 --vocab 50257 \
      --pad-vocab 128 --seq 1024 --batch "$batch" >"$work/gpt2-b$batch.mlir"
  all_peak=""
  for keep in all true 8 4 2 false; do
    read -r peak gathered gather local <<<"$(ledger "$batch" \
      "strategy=zero3 mesh=$ranks param-dtype=bf16 prefetch=1 $(keep_options "$keep")")"
    all_peak=${all_peak:-$peak}
    printf "$fmt" "$ranks" "$keep" \
      "$(awk -v b="$peak" 'BEGIN { printf "%.3f", b / 1e9 }')" \
      "$(awk -v a="$peak" -v b="$all_peak" 'BEGIN { printf "%.3f", a / b }')" \
      "$(mb "$gathered")" "$(mb "$gather")" "$(mb "$local")" \
      "$(mb $((gather - local)))"
  done
done

KEEPS=(all true 2 false)
shardc_bench_small_gpt "zero3 on 4 ranks"
for keep in "${KEEPS[@]}"; do
  "$bin/shardc" build "$work/small.mlir" --strategy zero3 --mesh 4 --quiet \
    $(keep_options "$keep" | sed 's/^/--/; s/ / --/g') -o "$work/small-$keep" >&2
done
for round in $(seq "$ROUNDS"); do
  for keep in "${KEEPS[@]}"; do
    mpirun --allow-run-as-root --oversubscribe -x OPENBLAS_NUM_THREADS=1 \
      -np 4 "$work/small-$keep" --steps $((STEPS + 1)) --quiet \
      --log-json "$work/$keep-$round.jsonl"
  done
done
python3 - "$work" "$ROUNDS" "${KEEPS[@]}" <<'PY'
import json, os, statistics, sys
work, rounds, keeps = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
row = "%-6s %9s %11s %11s %11s"
print(row % ("keep", "ms/step", "peak", "predicted", "sent"))
ms = {}
for keep in keeps:
    steps = []
    for round in range(1, rounds + 1):
        lines = [json.loads(l) for l in
                 open(os.path.join(work, "%s-%d.jsonl" % (keep, round)))]
        steps += [l["step_ms"] for l in lines[1:]]
    last = lines[-1]
    ms[keep] = statistics.median(steps)
    print(row % (keep, "%.2f" % ms[keep], last["peak_bytes"],
                 last["predicted_peak_bytes"], last["bytes_sent"]))
print("# against all: %s" % ", ".join(
    "%s %.2fx the step time" % (k, ms[k] / ms["all"]) for k in keeps[1:]))
PY
