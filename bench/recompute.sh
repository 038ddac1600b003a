#!/usr/bin/env bash
# Activation checkpointing (--recompute '*') side by side with keeping the
# activations, in one run:
# 1. memory, from the ledger (which the executables match to the byte,
#    test/e2e/memory.test and recompute.test): GPT-2 small (124M, T = 1024)
#    per rank, f32 and bf16 mixed precision, zero3 on 1 and 8 ranks and ddp
#    on 8: the predicted peak at a global batch of 8 and 32 kept and
#    recomputed, and the largest global batch (a multiple of 8) whose peak
#    fits CAPACITY_GIB per rank (default 139, an H200's usable memory);
#    then what recompute=auto chooses for f32 at batch 256 on one rank,
#    which does not fit with every activation kept;
# 2. time, measured: the CPU executable of a small GPT (4 layers, hidden
#    256, seq 128, batch 8; zero3 on 1 rank): median ms per step kept and
#    recomputed (all, and selective: recompute-policy=save-matmuls), and
#    their ratios (the second forward's cost), the builds taking turns so
#    that a change in the machine's load falls on each.
# Builds first (scripts/common.sh); the table goes to stdout, build output
# to stderr. About a minute and a half here.
#
# Environment: CAPACITY_GIB, STEPS and ROUNDS (runs of STEPS measured steps
# after a warm-up, per build; default 8 and 3), SHARDC_BUILD_DIR (default
# build/).
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
shardc_bench_setup

CAPACITY_GIB="${CAPACITY_GIB:-139}"
STEPS="${STEPS:-8}"
ROUNDS="${ROUNDS:-3}"
capacity=$((CAPACITY_GIB * 1024 * 1024 * 1024))
export OPENBLAS_NUM_THREADS=1

# GPT-2 small's IR at global batch $1, generated once: its path.
gpt2() {
  local model="$work/gpt2-b$1.mlir"
  [ -e "$model" ] || "$bin/shardc-gen" gpt --layers 12 --hidden 768 \
    --heads 12 --vocab 50257 --pad-vocab 128 --seq 1024 --batch "$1" \
    >"$model"
  echo "$model"
}

# The per-rank peak in the ledger JSON file $1.
ledger_peak() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["per_rank"]["peak_bytes"])' "$1"
}

# The ledger's predicted peak per rank for GPT-2 small at global batch $1
# under pipeline options $2.
peak() {
  "$bin/shardc-opt" "$(gpt2 "$1")" -o /dev/null \
    --shardc-pipeline="$2 format=json output=$work/ledger.json"
  ledger_peak "$work/ledger.json"
}

# The largest multiple of 8 whose peak fits (0 if batch 8 does not):
# doubling, then bisection (the peak grows with the batch).
largest_batch() {
  local options="$1" lo=0 hi=8
  while [ "$(peak "$hi" "$options")" -le "$capacity" ]; do
    lo=$hi
    hi=$((hi * 2))
  done
  while [ $((hi - lo)) -gt 8 ]; do
    local mid=$(((lo + hi) / 16 * 8))
    if [ "$(peak "$mid" "$options")" -le "$capacity" ]; then lo=$mid; else hi=$mid; fi
  done
  echo "$lo"
}

gb() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1e9 }'; }

echo "# activation checkpointing: every unit (--recompute '*') vs none"
echo "# memory: the ledger's peak per rank in GB, GPT-2 small (124M params, T = 1024);"
echo "#   batch: global (each of N ranks takes batch / N); max_batch: the largest"
echo "#   multiple of 8 with a peak per rank <= $CAPACITY_GIB GiB"
fmt='%-5s %-9s %5s %9s %9s %6s %9s %9s %6s %9s %9s\n'
printf "$fmt" dtype strategy ranks b8_kept b8_recomp ratio b32_kept b32_recomp ratio max_b_kept max_b_recomp
for dtype in f32 bf16; do
  for config in "zero3 1" "zero3 8" "ddp 8"; do
    read -r strategy ranks <<<"$config"
    base="strategy=$strategy mesh=$ranks param-dtype=$dtype"
    row=()
    for batch in 8 32; do
      kept=$(peak "$batch" "$base")
      recomputed=$(peak "$batch" "$base recompute=*")
      row+=("$(gb "$kept")" "$(gb "$recomputed")"
        "$(awk -v a="$recomputed" -v b="$kept" 'BEGIN { printf "%.2f", a / b }')")
    done
    printf "$fmt" "$dtype" "$strategy" "$ranks" "${row[@]}" \
      "$(largest_batch "$base")" "$(largest_batch "$base recompute=*")"
  done
done

# Selective recomputation at batch 32, f32, one rank.
echo "# f32 zero3, 1 rank, batch 32, recompute-policy=save-matmuls (GEMM and attention results kept):" \
  "peak $(gb "$(peak 32 "strategy=zero3 mesh=1 recompute=* recompute-policy=save-matmuls")") GB"

# recompute=auto at a batch that does not fit with every activation kept.
batch=256
"$bin/shardc-opt" "$(gpt2 $batch)" -o /dev/null \
  --shardc-pipeline="strategy=zero3 mesh=1 recompute=auto memory-budget=$capacity format=json output=$work/auto.json" \
  2>"$work/auto.err"
echo "# f32 zero3, 1 rank, batch $batch, memory-budget $CAPACITY_GIB GiB:" \
  "$(sed -nE 's/.*remark: (recompute=auto: [0-9]+ of [0-9]+ units).*/\1/p' "$work/auto.err")," \
  "peak $(gb "$(ledger_peak "$work/auto.json")") GB"

shardc_bench_small_gpt "zero3 on 1 rank"
for how in none all selective; do
  flags=()
  [ "$how" = all ] && flags=(--recompute '*')
  [ "$how" = selective ] && flags=(--recompute '*' --recompute-policy save-matmuls)
  "$bin/shardc" build "$work/small.mlir" --strategy zero3 --mesh 1 --quiet \
    "${flags[@]}" -o "$work/small-$how" >&2
done
for round in $(seq "$ROUNDS"); do
  for how in none all selective; do
    "$work/small-$how" --steps $((STEPS + 1)) --quiet \
      --log-json "$work/$how-$round.jsonl"
  done
done
python3 - "$work" "$ROUNDS" <<'PY'
import glob, json, os, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
ms, peak = {}, {}
for how in ("none", "all", "selective"):
    steps = []
    for round in range(1, rounds + 1):
        lines = [json.loads(l) for l in
                 open(os.path.join(work, "%s-%d.jsonl" % (how, round)))]
        steps += [l["step_ms"] for l in lines[1:]]
        peak[how] = lines[-1]["peak_bytes"]
    ms[how] = statistics.median(steps)
print("%-12s %10s %12s" % ("recompute", "ms/step", "peak_bytes"))
for how in ("none", "all", "selective"):
    print("%-12s %10.2f %12d" % (how, ms[how], peak[how]))
print("# recomputed / kept: %.2fx the step time (selective: %.2fx)"
      % (ms["all"] / ms["none"], ms["selective"] / ms["none"]))
PY
