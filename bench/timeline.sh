#!/usr/bin/env bash
# The ledger's timeline (--shardc-ledger="machine=h200"), side by side: GPT-2
# small (124M, T = 1024, bf16 params, batch 4 per rank) on H200 nodes of 8,
# under each strategy and schedule choice, the predicted compute, the
# collectives' time on their streams, the exposed communication (the
# compute stream waiting), the step and its MFU, and the longest wait.
# A roofline of the scheduled IR (Passes.td, ShardcLedgerPass), not a
# measurement: it ranks schedules before anything runs. Builds first
# (scripts/common.sh); the table goes to stdout. Under a minute.
#
# Environment: SHARDC_BUILD_DIR (default build/).
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
shardc_bench_setup

echo "# predicted on h200 (8 ranks a node): GPT-2 small, T = 1024, bf16 params, batch 4 per rank; ms per step"
fmt='%-50s %8s %8s %8s %8s %8s %8s %6s  %s\n'
printf "$fmt" configuration compute gather scatter reduce exposed step MFU "longest wait"
row() { # ranks, pipeline options
  local ranks=$1 options=$2 batch=$((4 * $1))
  [ -s "$work/gpt2-b$batch.mlir" ] ||
    "$bin/shardc-gen" gpt --layers 12 --hidden 768 --heads 12 --vocab 50257 \
      --pad-vocab 128 --seq 1024 --batch "$batch" >"$work/gpt2-b$batch.mlir"
  "$bin/shardc-opt" "$work/gpt2-b$batch.mlir" -o /dev/null \
    --shardc-pipeline="$options param-dtype=bf16 machine=h200 format=json output=$work/t.json"
  python3 - "$work/t.json" "$options" "$fmt" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["timeline"]
wait = t["waits"][0] if t["waits"] else {"what": "-", "ms": 0}
print(sys.argv[3].replace("\\n", "") % (
    sys.argv[2], "%.3f" % (t["matmul_ms"] + t["memory_ms"]),
    "%.3f" % t["all_gather_ms"], "%.3f" % t["reduce_scatter_ms"],
    "%.3f" % t["all_reduce_ms"], "%.3f" % t["exposed_ms"],
    "%.3f" % t["step_ms"], "%.1f%%" % (100 * t["mfu"]),
    "%s %.3f" % (wait["what"], wait["ms"])))
PY
}
row 8 "strategy=ddp mesh=8"
row 8 "strategy=ddp mesh=8 bucket-mb=0"
row 8 "strategy=zero1 mesh=8"
row 8 "strategy=zero2 mesh=8"
row 8 "strategy=zero3 mesh=8 prefetch=0"
row 8 "strategy=zero3 mesh=8"
row 8 "strategy=zero3 mesh=8 prefetch=2"
row 8 "strategy=zero3 mesh=8 reduce-dtype=bf16"
row 8 "strategy=zero3 mesh=8 reshard-after-forward=false"
row 16 "strategy=zero3 mesh=16 reshard-last-unit=true"
row 16 "strategy=zero3 mesh=16"
row 16 "strategy=zero3 mesh=16 reshard-after-forward=8"
row 16 "strategy=zero3 mesh=16 reshard-after-forward=false"
row 16 "strategy=hsdp mesh=2x8"
row 16 "strategy=hsdp mesh=2x8 reduce-dtype=bf16"
