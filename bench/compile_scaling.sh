#!/usr/bin/env bash
# Compile time of the whole pipeline (autodiff, shard, schedule, ledger) for
# GPT-2-width models of 12 to 768 layers: total and per layer, measured side
# by side in one run. Targets: GPT-2 small under 1 s, 768 layers under 30 s,
# time per layer roughly flat.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${SHARDC_BUILD_DIR:-$ROOT/build}/bin"
PIPELINE="${PIPELINE:-strategy=zero3 mesh=8 param-dtype=bf16 output=/dev/null}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

now_ms() { echo $(($(date +%s%N) / 1000000)); }

printf '%-8s %12s %10s %12s %14s\n' layers params ops compile_ms ms_per_layer
for layers in 12 48 192 768; do
  "$BIN/shardc-gen" gpt --layers "$layers" --hidden 768 --heads 12 \
    --vocab 50257 --seq 1024 --batch 8 >"$work/model.mlir"
  params=$(head -n 1 "$work/model.mlir" | sed -E 's/.*: ([0-9]+) parameters.*/\1/')
  start=$(now_ms)
  "$BIN/shardc-opt" "$work/model.mlir" --shardc-pipeline="$PIPELINE" \
    -o "$work/step.mlir"
  end=$(now_ms)
  ops=$(grep -c ' = \| train\.\| dist\.' "$work/step.mlir" || true)
  ms=$((end - start))
  printf '%-8s %12s %10s %12s %14s\n' "$layers" "$params" "$ops" "$ms" \
    "$(awk -v m="$ms" -v l="$layers" 'BEGIN { printf "%.2f", m / l }')"
done
