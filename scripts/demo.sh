#!/usr/bin/env bash
# Installs what is missing, builds, and takes the bundled GPT models through
# every pass that exists, printing what a user checks first.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

shardc_install_missing
shardc_build

bin="$BUILD/bin"
out="$BUILD/demo"
mkdir -p "$out"

step() {
  local name="$1" model="$2"
  echo
  echo "== $name: $model"
  echo "-- forward, as written"
  "$bin/shardc-opt" --train-summary "$model" -o /dev/null
  echo "-- the whole step: --train-autodiff"
  local start end
  start=$(date +%s%N)
  "$bin/shardc-opt" --train-autodiff --train-summary "$model" -o "$out/$name.step.mlir"
  end=$(date +%s%N)
  echo "-- $name: forward + backward + AdamW written to $out/$name.step.mlir" \
    "in $(((end - start) / 1000000)) ms"
}

# The bundled tiny GPT (2 layers, hidden 64), as checked in.
step tiny-gpt "$ROOT/examples/tiny-gpt.mlir"

# The tiny GPT sharded for 4 ranks: the whole schedule and its ledger.
echo
echo "== tiny-gpt, zero3 on 4 ranks, bf16 compute, f32 reduce"
"$bin/shardc-opt" "$ROOT/examples/tiny-gpt.mlir" -o "$out/tiny-gpt.zero3.mlir" \
  --shardc-pipeline="strategy=zero3 mesh=4 param-dtype=bf16 reduce-dtype=f32"
echo "-- schedule written to $out/tiny-gpt.zero3.mlir:" \
  "$(grep -c 'dist\.' "$out/tiny-gpt.zero3.mlir") dist ops"

# GPT-2 small (124M), generated.
"$bin/shardc-gen" gpt --layers 12 --hidden 768 --heads 12 --vocab 50257 \
  --seq 1024 --batch 8 >"$out/gpt2-small.mlir"
head -n 1 "$out/gpt2-small.mlir"
step gpt2-small "$out/gpt2-small.mlir"
echo
echo "== gpt2-small, every strategy on 8 ranks (hsdp 2x4), bf16"
for strategy in "ddp mesh=8" "zero1 mesh=8" "zero2 mesh=8" "zero3 mesh=8" \
  "hsdp mesh=2x4"; do
  "$bin/shardc-opt" "$out/gpt2-small.mlir" -o /dev/null \
    --shardc-pipeline="strategy=$strategy param-dtype=bf16 reduce-dtype=bf16"
done
