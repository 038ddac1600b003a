#!/usr/bin/env bash
# Installs what is missing, builds, takes the bundled GPT models through
# every pass that exists, printing what a user checks first, then trains the
# tiny GPT with zero3 on 4 CPU ranks, in f32 and in bf16 mixed precision,
# and fails unless its loss falls.
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

# Training: the tiny GPT, zero3 on 4 CPU ranks, 20 steps on a token stream
# with learnable structure (repeated short phrases, byte-level), in f32 and
# in bf16 mixed precision (f32 masters and reduction). Ranks beyond the
# cores oversubscribe them. The demo fails unless the loss falls in both.
data="$(mktemp -d)"
trap 'rm -rf "$data"' EXIT
python3 "$ROOT/scripts/make_tokens.py" --tokens 65536 -o "$data/tokens.bin"
for precision in f32 bf16; do
  echo
  echo "== tiny-gpt trained: zero3 on 4 CPU ranks, --param-dtype $precision," \
    "20 steps, on phrases from scripts/make_tokens.py"
  "$bin/shardc" build "$ROOT/examples/tiny-gpt.mlir" --strategy zero3 --mesh 4 \
    --param-dtype "$precision" --quiet -o "$out/tiny-gpt.zero3.$precision"
  mpirun --allow-run-as-root --oversubscribe -x OPENBLAS_NUM_THREADS=1 -np 4 \
    "$out/tiny-gpt.zero3.$precision" --steps 20 --seed 1 \
    --data "$data/tokens.bin" --log-json "$data/log.$precision.json"
  python3 - "$data/log.$precision.json" <<'PY'
import json, sys
steps = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
first, last = steps[0], steps[-1]
size = lambda b: "%d B (%.2f MB)" % (b, b / 1e6)
peak = max(s["peak_bytes"] for s in steps)
sent = max(s["bytes_sent"] for s in steps)
same = lambda a, b: "equal" if a == b else "DIFFER by %+d B" % (a - b)
print("-- summary: %d steps" % len(steps))
print("   loss             first %.4f, last %.4f (%+.4f)" %
      (first["loss"], last["loss"], last["loss"] - first["loss"]))
print("   peak per rank    measured %s, predicted %s: %s" %
      (size(peak), size(last["predicted_peak_bytes"]),
       same(peak, last["predicted_peak_bytes"])))
print("   sent per step    measured %s, predicted %s: %s" %
      (size(sent), size(last["predicted_bytes_sent"]),
       same(sent, last["predicted_bytes_sent"])))
print("   (measured: the largest over ranks and steps)")
if not last["loss"] < first["loss"]:
    sys.exit("demo: FAILED: the loss did not fall (%.4f -> %.4f)" %
             (first["loss"], last["loss"]))
PY
done
