#!/usr/bin/env bash
# Training-step time of the CPU executables: the tiny GPT and a small GPT
# (4 layers, hidden 256, seq 128, batch 8) on 1 and 4 ranks under every
# strategy, and zero3 in bf16 mixed precision. Per configuration: median ms per step over the steps after a
# warm-up step, tokens/s, the share of the step inside BLAS gemm (rank 0),
# and communication exposed (time blocked in MPI_Wait) vs hidden (the rest of
# the collectives' start-to-wait time). Builds first (scripts/common.sh); the
# table goes to stdout, build output to stderr. About a minute here.
#
# Environment: TINY_STEPS, SMALL_STEPS (measured steps after the warm-up;
# default 30 and 8), SHARDC_BUILD_DIR (default build/).
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
shardc_bench_setup

TINY_STEPS="${TINY_STEPS:-30}"
SMALL_STEPS="${SMALL_STEPS:-8}"
WARMUP=1
export OPENBLAS_NUM_THREADS=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -x OPENBLAS_NUM_THREADS=1)

cp "$ROOT/examples/tiny-gpt.mlir" "$work/tiny.mlir"
"$bin/shardc-gen" gpt --layers 4 --hidden 256 --heads 4 --seq 128 --batch 8 \
  >"$work/small.mlir"

# "seq 32, batch 4" from the generator's first line.
header_field() { sed -nE "1s/.* $2 ([0-9]+).*/\1/p" "$1"; }

cores=$(nproc)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "# shardc CPU training step: $(uname -m), $cores cores (nproc), ${cpu:-unknown CPU}"
echo "# one OpenBLAS thread per rank; ranks > cores oversubscribe (4 ranks on $cores cores);"
echo "# median over steps after $WARMUP warm-up step (tiny: $TINY_STEPS, small: $SMALL_STEPS measured);"
echo "# gemm = gemm_ms / step_ms on rank 0; exposed = comm_wait_ms; hidden = comm_ms - comm_wait_ms"
echo "#   (comm_ms: the time any collective is in flight, from a start to the wait that empties the queue)"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (other work skews every column)"
for name in tiny small; do
  echo "# $name: $(head -n 1 "$work/$name.mlir" | sed 's|^// ||')"
done
echo

fmt='%-6s %5s %-9s %10s %10s %6s %12s %11s\n'
printf "$fmt" model ranks strategy ms/step tokens/s gemm exposed_ms hidden_ms
printf "$fmt" ------ ----- --------- ---------- ---------- ------ ------------ -----------

failed=0
run_one() {
  local name="$1" ranks="$2" strategy="$3" mesh="$4" steps="$5"
  local dtype="${6:-f32}"
  local model="$work/$name.mlir" exe="$work/$name-$strategy-$ranks-$dtype"
  local log="$exe.json" label="$strategy"
  [ "$strategy" = hsdp ] && label="hsdp $mesh"
  [ "$dtype" = bf16 ] && label="$label bf16"
  local batch seq
  batch=$(header_field "$model" batch)
  seq=$(header_field "$model" seq)
  if ! "$bin/shardc" build "$model" --strategy "$strategy" --mesh "$mesh" \
    --param-dtype "$dtype" --quiet -o "$exe" >"$exe.log" 2>&1; then
    printf "$fmt" "$name" "$ranks" "$label" "BUILD" "FAILED" "" "" ""
    sed 's/^/#   /' "$exe.log"
    failed=1
    return
  fi
  local cmd=("$exe")
  [ "$ranks" -gt 1 ] && cmd=("${MPIRUN[@]}" -np "$ranks" "$exe")
  if ! "${cmd[@]}" --steps $((WARMUP + steps)) --quiet --log-json "$log" \
    >"$exe.log" 2>&1; then
    printf "$fmt" "$name" "$ranks" "$label" "RUN" "FAILED" "" "" ""
    tail -n 5 "$exe.log" | sed 's/^/#   /'
    failed=1
    return
  fi
  python3 - "$log" "$WARMUP" "$batch" "$seq" "$fmt" "$name" "$ranks" \
    "$label" <<'EOF'
import json, statistics, sys
path, warmup, batch, seq, fmt = sys.argv[1], int(sys.argv[2]), \
    int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rows = [json.loads(line) for line in open(path) if line.strip()][warmup:]
med = lambda key: statistics.median(r[key] for r in rows)
step = med("step_ms")
gemm = statistics.median(r["gemm_ms"] / r["step_ms"] for r in rows)
exposed = med("comm_wait_ms")
hidden = statistics.median(r["comm_ms"] - r["comm_wait_ms"] for r in rows)
cells = sys.argv[6:9] + ["%.2f" % step, "%.0f" % (batch * seq / step * 1e3),
                         "%.0f%%" % (100 * gemm), "%.2f" % exposed,
                         "%.2f" % hidden]
print(fmt.replace("\\n", "") % tuple(cells))
EOF
}

for name in tiny small; do
  steps=$TINY_STEPS
  [ "$name" = small ] && steps=$SMALL_STEPS
  for strategy in ddp zero1 zero2 zero3; do
    run_one "$name" 1 "$strategy" 1 "$steps"
  done
  for strategy in ddp zero1 zero2 zero3; do
    run_one "$name" 4 "$strategy" 4 "$steps"
  done
  run_one "$name" 4 hsdp 2x2 "$steps"
  # bf16 mixed precision: on a CPU the f32 kernels on widened copies (the
  # maths of a GPU's bf16 kernels, not their speed).
  run_one "$name" 1 zero3 1 "$steps" bf16
  run_one "$name" 4 zero3 4 "$steps" bf16
done
echo
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$failed"
