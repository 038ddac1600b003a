#!/usr/bin/env bash
# What offloading to host memory buys and costs, side by side in one run:
# the state on the device (plain), the optimizer state in host memory
# (--offload-optimizer true: ZeRO-Offload), and the stored params there too
# (--offload-params true: FSDP2's CPUOffloadPolicy).
# 1. memory and traffic, from the ledger (which the executables match to the
#    byte, test/e2e/offload.test): GPT-2 small (124M, T = 1024) per rank,
#    zero3 on 1 rank at batch 8 and on 8 ranks at batch 64, f32 and bf16:
#    the peak, the host memory and the bytes copied between host and device
#    per step, and the peak's ratio to the plain one;
# 2. time, measured: the CPU executable of a small GPT (4 layers, hidden
#    256, seq 128, batch 8; zero3 on 2 ranks), median ms per step, the
#    host's AdamW per step (--profile), the measured peak and host copies
#    against the ledger's, the builds taking turns so that a change in the
#    machine's load falls on each. On the CPU target the copies are
#    memcpys: the time column shows the mechanism's own cost, not a GPU's
#    PCIe transfers (bench/gpu/run.sh's offloaded row does).
# Builds first (scripts/common.sh); the table goes to stdout, build output
# to stderr. About 20 seconds here.
#
# Environment: STEPS and ROUNDS (runs of STEPS measured steps after a
# warm-up, per build; default 6 and 3), SHARDC_BUILD_DIR (default build/).
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
shardc_bench_setup

STEPS="${STEPS:-6}"
ROUNDS="${ROUNDS:-3}"
export OPENBLAS_NUM_THREADS=1
MODES=(plain optimizer params)
flags_of() {
  case "$1" in
  plain) echo "" ;;
  optimizer) echo "offload-optimizer=true" ;;
  params) echo "offload-optimizer=true offload-params=true" ;;
  esac
}

# The ledger of GPT-2 small at batch $1 under pipeline options $2:
# "peak host_bytes host_copy_bytes".
ledger() {
  "$bin/shardc-opt" "$work/gpt2-b$1.mlir" -o /dev/null \
    --shardc-pipeline="$2 format=json output=$work/ledger.json"
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); p = r["per_rank"]
host = (p["optimizer_bytes"] if r.get("offload_optimizer") else 0) + \
    (p["params_bytes"] if r.get("offload_params") else 0)
print(p["peak_bytes"], host, r["comm"].get("host_copy_bytes", 0))' \
    "$work/ledger.json"
}

echo "# offloading to host memory: plain, the optimizer state (offload-optimizer), and the params too (offload-params)"
echo "# memory and traffic: the ledger per rank, GPT-2 small (124M params, T = 1024), zero3, GB = 10^9 bytes"
fmt='%-6s %4s %5s %-10s %8s %8s %11s %6s\n'
printf "$fmt" dtype mesh batch offload peak host copies/step ratio
gb() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1e9 }'; }
for config in "1 8" "8 64"; do
  read -r mesh batch <<<"$config"
  [ -s "$work/gpt2-b$batch.mlir" ] ||
    "$bin/shardc-gen" gpt --layers 12 --hidden 768 --heads 12 --vocab 50257 \
      --pad-vocab 128 --seq 1024 --batch "$batch" >"$work/gpt2-b$batch.mlir"
  for dtype in f32 bf16; do
    plain_peak=""
    for mode in "${MODES[@]}"; do
      read -r peak host copies <<<"$(ledger "$batch" \
        "strategy=zero3 mesh=$mesh param-dtype=$dtype $(flags_of "$mode")")"
      plain_peak=${plain_peak:-$peak}
      printf "$fmt" "$dtype" "$mesh" "$batch" "$mode" "$(gb "$peak")" \
        "$(gb "$host")" "$(gb "$copies")" \
        "$(awk -v a="$peak" -v b="$plain_peak" 'BEGIN { printf "%.2f", a / b }')"
    done
  done
done

shardc_bench_small_gpt "zero3 on 2 ranks"
for mode in "${MODES[@]}"; do
  # shellcheck disable=SC2046
  "$bin/shardc" build "$work/small.mlir" --strategy zero3 --mesh 2 --quiet \
    $(flags_of "$mode" | sed -E 's/([a-z-]+)=/--\1 /g') -o "$work/small-$mode" >&2
done
for round in $(seq "$ROUNDS"); do
  for mode in "${MODES[@]}"; do
    mpirun --allow-run-as-root --oversubscribe -x OPENBLAS_NUM_THREADS=1 \
      -np 2 "$work/small-$mode" --steps $((STEPS + 1)) --quiet --profile \
      --log-json "$work/$mode-$round.jsonl" >"$work/$mode-$round.profile"
  done
done
python3 - "$work" "$ROUNDS" "${MODES[@]}" <<'PY'
import json, os, re, statistics, sys
work, rounds, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
row = "%-10s %9s %11s %11s %11s %12s %12s"
print(row % ("offload", "ms/step", "adamw_host", "peak", "predicted",
             "host_copies", "predicted"))
ms = {}
for mode in modes:
    steps, host = [], []
    for round in range(1, rounds + 1):
        base = os.path.join(work, "%s-%d" % (mode, round))
        lines = [json.loads(l) for l in open(base + ".jsonl")]
        steps += [l["step_ms"] for l in lines[1:]]
        found = re.search(r"\(AdamW on the host\)\s+([0-9.]+)",
                          open(base + ".profile").read())
        host.append(float(found.group(1)) if found else 0.0)
    last = lines[-1]
    ms[mode] = statistics.median(steps)
    print(row % (mode, "%.2f" % ms[mode], "%.2f" % statistics.median(host),
                 last["peak_bytes"], last["predicted_peak_bytes"],
                 last.get("host_copy_bytes", 0),
                 last.get("predicted_host_copy_bytes", 0)))
print("# against plain: %s" % ", ".join(
    "%s %.2fx the step time" % (m, ms[m] / ms["plain"]) for m in modes[1:]))
PY
