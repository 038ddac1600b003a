#!/usr/bin/env bash
# Compile time of the whole pipeline (autodiff, shard, schedule, ledger) for
# GPT-2-width models of 12 to 768 layers under four strategies: total and
# per layer, measured side by side in one run. Targets: GPT-2 small under
# 1 s, 768 layers under 30 s, time per layer roughly flat. zero3 without
# resharding moves a free per gathered buffer, zero1 reduce-scatters each
# param after the backward and hsdp defers each all-reduce past the next
# backward: the schedule pass was quadratic in the first two until
# 2026-12-07 (its moves invalidated the block's op order, and each
# reduction walked the ops after it), and for a while that day in hsdp.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${SHARDC_BUILD_DIR:-$ROOT/build}/bin"
# Each pipeline's options, one per line; bf16, on 8 ranks where the line
# gives no mesh.
PIPELINES="${PIPELINES:-strategy=zero3
strategy=zero3 reshard-after-forward=false
strategy=zero1
strategy=hsdp mesh=2x4}"
LAYERS="${LAYERS:-12 48 192 768}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

now_ms() { echo $(($(date +%s%N) / 1000000)); }

printf '%-44s %-7s %12s %9s %11s %13s\n' pipeline layers params ops \
  compile_ms ms_per_layer
for layers in $LAYERS; do
  "$BIN/shardc-gen" gpt --layers "$layers" --hidden 768 --heads 12 \
    --vocab 50257 --seq 1024 --batch 8 >"$work/model-$layers.mlir"
done
while IFS= read -r pipeline; do
  for layers in $LAYERS; do
    model="$work/model-$layers.mlir"
    params=$(head -n 1 "$model" | sed -E 's/.*: ([0-9]+) parameters.*/\1/')
    start=$(now_ms)
    "$BIN/shardc-opt" "$model" -o "$work/step.mlir" \
      --shardc-pipeline="mesh=8 $pipeline param-dtype=bf16 output=/dev/null"
    end=$(now_ms)
    ops=$(grep -c ' = \| train\.\| dist\.' "$work/step.mlir" || true)
    ms=$((end - start))
    printf '%-44s %-7s %12s %9s %11s %13s\n' "$pipeline" "$layers" "$params" \
      "$ops" "$ms" \
      "$(awk -v m="$ms" -v l="$layers" 'BEGIN { printf "%.2f", m / l }')"
  done
done <<<"$PIPELINES"
