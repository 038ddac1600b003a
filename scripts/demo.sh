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

# GPT-2 small (124M), generated.
"$bin/shardc-gen" gpt --layers 12 --hidden 768 --heads 12 --vocab 50257 \
  --seq 1024 --batch 8 >"$out/gpt2-small.mlir"
head -n 1 "$out/gpt2-small.mlir"
step gpt2-small "$out/gpt2-small.mlir"
