#!/usr/bin/env bash
# One prepared script for a lent GPU machine (one H200): build, check the GPU
# against the CPU (fp32, and bf16 mixed precision), time GPT-2 small under
# shardc (zero3, ddp; fp32 and bf16 mixed precision; last, zero3 bf16 with
# the optimizer state and params in host memory) and PyTorch (eager,
# torch.compile, FSDP2; torch.compile and FSDP2 in bf16 too), print one table
# last. Every phase runs under `timeout`, inside one overall budget; a phase
# that cannot run says why and the script goes on. Without a GPU it builds,
# runs the CPU half of the check and prints "no GPU: skipped ..." for the
# rest: exit 0 when what ran passed.
#
#   bench/gpu/run.sh             the run (here: a dry run; there: the real one)
#   bench/gpu/run.sh --prepare   here, before a device call: also compile every
#                                executable the device run needs and bundle
#                                them, with the CPU reference run, OpenMPI's
#                                libraries and a BLAS, into $BUILD/gpu-bundle
#                                (about 52 MiB, the executables gzipped);
#                                the GPU machine has no LLVM/MLIR to run
#                                shardc and may have no MPI: carry that.
#
# bench/gpu/README.md has the device call, the phases and their budgets.
# Environment (defaults in brackets): SHARDC_BUILD_DIR [build], BATCHES
# ["64 32 16 8"] (fp32), BF16_BATCHES ["128 64 32 16"], TOTAL_BUDGET [540 s],
# PHASES [build,check,shardc,torch; kernels times the heaviest kernels
# alone against PyTorch's, KERNEL_BATCH [16], and the bf16 rows take the
# kernel variants it timed faster], TIME_VARIANTS [zero3 ddp zero3+bf16
# ddp+bf16], TORCH_MODES [eager compile fsdp2 compile-bf16 fsdp2-bf16],
# SHARDC_WARMUP [2], SHARDC_STEPS [8], TORCH_WARMUP [3], TORCH_STEPS [10],
# PEAK_TFLOPS and BF16_PEAK_TFLOPS [the GPU's dense TF32 and BF16 peaks, from
# its name: H100/H200 SXM 494 and 989, PCIe 378 and 756, NVL 418 and 835,
# A100 156 and 312] for the fp32 and bf16 rows' MFU, the check
# tolerances CHECK_RTOL/CHECK_ATOL [1e-4/1e-6] and CHECK_BF16_RTOL/
# CHECK_BF16_ATOL [2e-2/3e-4] with CHECK_BF16_OUTLIERS/
# CHECK_BF16_OUTLIER_BOUND [12/3.6e-3], SHARDC_GEMM_EPILOGUES [on; run.sh sets it to
# off after the kernel test when its "[gemm epilogue on]" checks fail, to
# no-bias-grad when only matmul_bias_grad's do],
# SHARDC_ATTENTION [cudnn where the kernel test ran to its end and passed
# every flash and cudnn check; flash where cuDNN's checks did not pass or
# run; gemm where a flash check failed], and the per-phase budgets
# *_BUDGET below. $OUT (set on the device machine)
# receives run.log, rows.json, RESULTS-entry.md and logs.tar.gz.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/bench/gpu"
BUILD="${SHARDC_BUILD_DIR:-$ROOT/build}"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
BUNDLE="$BUILD/gpu-bundle"

PREPARE=0
for arg in "$@"; do
  case "$arg" in
  --prepare) PREPARE=1 ;;
  -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
  *) echo "run.sh: unknown argument '$arg' (--prepare, --help)" >&2; exit 2 ;;
  esac
done

# Budgets, seconds. TOTAL_BUDGET bounds the whole run (the device call's
# timeout_s is 30 s more, under the 600 s a command may run); each phase also
# has its own cap, and gets no more than what is left less TABLE_RESERVE. The
# caps add up to more than the total: they stop a hung phase, and the phases
# run in order of priority (the check, every fp32 row, then the bf16 rows,
# last the fp32 row of the other attention), so a slow early phase leaves
# the later ones what is left, or nothing.
# Expected on the H200 with a bundle: about 6 to 7 minutes.
TOTAL_BUDGET="${TOTAL_BUDGET:-540}"
TABLE_RESERVE="${TABLE_RESERVE:-15}"
BUILD_BUDGET="${BUILD_BUDGET:-300}"
CHECK_BUDGET="${CHECK_BUDGET:-120}"
KERNEL_TEST_BUDGET="${KERNEL_TEST_BUDGET:-75}"
SHARDC_BUDGET="${SHARDC_BUDGET:-150}"           # fp32 rows, both strategies
SHARDC_BF16_BUDGET="${SHARDC_BF16_BUDGET:-120}" # bf16 rows, both strategies
SHARDC_ATTEMPT_BUDGET="${SHARDC_ATTEMPT_BUDGET:-75}"
SHARDC_PROFILE_BUDGET="${SHARDC_PROFILE_BUDGET:-25}" # zero3's --profile run
TORCH_EAGER_BUDGET="${TORCH_EAGER_BUDGET:-60}"
TORCH_COMPILE_BUDGET="${TORCH_COMPILE_BUDGET:-150}"
TORCH_FSDP2_BUDGET="${TORCH_FSDP2_BUDGET:-75}"
TORCH_COMPILE_BF16_BUDGET="${TORCH_COMPILE_BF16_BUDGET:-150}"
TORCH_FSDP2_BF16_BUDGET="${TORCH_FSDP2_BF16_BUDGET:-75}"
KERNEL_BUDGET="${KERNEL_BUDGET:-90}"     # PHASES=kernels: both benches
KERNEL_BATCH="${KERNEL_BATCH:-16}"
PREPARE_BUDGET="${PREPARE_BUDGET:-1200}" # compiling here, no device time

# The largest batch first. By the ledger, GPT-2 small (padded) at world size
# 1 peaks at 54.1 GB in fp32 at batch 64 and 54.3 GB in bf16 at batch 128
# (the logits' gradient is written over the logits, the loss fused with
# it); shardc would fit twice that on an H200, but PyTorch eager keeps
# about 75 GB at fp32 batch 64 by estimate (activations, the logits, their
# log-softmax and gradient), so the lists start where both should fit;
# torch_gpt.py steps down by itself where it does not.
BATCHES="${BATCHES:-64 32 16 8}"
# bf16 halves the activations (and the gathered params): twice the batch.
BF16_BATCHES="${BF16_BATCHES:-128 64 32 16}"
PHASES="${PHASES:-build,check,shardc,torch}"
# Timing keys: STRATEGY, or STRATEGY+bf16 for --param-dtype bf16 (reduce
# dtype f32: FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)).
TIME_VARIANTS="${TIME_VARIANTS:-zero3 ddp zero3+bf16 ddp+bf16}"
TORCH_MODES="${TORCH_MODES:-eager compile fsdp2 compile-bf16 fsdp2-bf16}"
SHARDC_WARMUP="${SHARDC_WARMUP:-2}"
SHARDC_STEPS="${SHARDC_STEPS:-8}"
TORCH_WARMUP="${TORCH_WARMUP:-3}"
TORCH_STEPS="${TORCH_STEPS:-10}"
PEAK_TFLOPS="${PEAK_TFLOPS:-}"           # the fp32 rows' MFU (gpu_machine)
BF16_PEAK_TFLOPS="${BF16_PEAK_TFLOPS:-}" # the bf16 rows' MFU (gpu_machine)
CHECK_STRATEGIES="zero3 ddp zero3+bf16"
# fp32: the GPU and the CPU differ by the order of f32 sums only.
CHECK_RTOL="${CHECK_RTOL:-1e-4}" CHECK_ATOL="${CHECK_ATOL:-1e-6}"
# bf16: both compute in f32 on bf16-rounded values (params' bf16 copies, GEMM
# inputs, activations), so where an f32 sum ran in another order (cuBLAS's
# blocking, the reductions' trees) its rounding to bf16 can flip by one ulp
# (2^-8 relative), and such flips carry through the layers into the loss and
# the gradients, far beyond f32's rounding. The check model's AdamW eps 1e-4
# turns a gradient difference into an update difference of ~lr * 1e-2 per
# step, inside rtol 2e-2 of a weight (init std 0.02) plus atol 3e-4 (half an
# update, lr = 6e-4; the CPU's own bf16 runs on 1 and 2 ranks differ by up
# to 1.1e-4), while one update of the wrong sign (2 lr = 1.2e-3) still fails
# wherever |x| < 0.045. But an element whose gradient is within bf16
# rounding of 0 can still take its update of either sign: cudasim (target=
# cuda's kernels on the CPU, test/e2e/cudasim.test) measured this check's
# zero3+bf16 run against the CPU's with 2 elements of wte outside the bound,
# by up to 5.5e-4, and 2 others at 2 ranks. So up to 12 elements (1e-4 of
# the model's 118,528) may lie outside, each within 2 lr x 3 steps = 3.6e-3
# (an update of the other sign every step); a wrong kernel moves far more.
CHECK_BF16_RTOL="${CHECK_BF16_RTOL:-2e-2}" CHECK_BF16_ATOL="${CHECK_BF16_ATOL:-3e-4}"
CHECK_BF16_OUTLIERS="${CHECK_BF16_OUTLIERS:-12}"
CHECK_BF16_OUTLIER_BOUND="${CHECK_BF16_OUTLIER_BOUND:-3.6e-3}"
# GPT-2 small as the brief gives it, its vocabulary padded as llm.c and
# nanoGPT pad it (50304 rows of wte: every row of the vocabulary-wide GEMMs
# 16-byte aligned; shardc's loss still counts 50257 classes); the check
# model is a small GPT, padded too (250 to 256) so that the check covers it.
G_LAYERS=12 G_HIDDEN=768 G_HEADS=12 G_VOCAB=50257 G_PAD_VOCAB=128 G_SEQ=1024
# AdamW eps 1e-4 in the check: a gradient that is zero in exact arithmetic
# (the attention key bias's: softmax ignores a constant added to a row) is
# rounding noise, which eps 1e-8 turns into +-lr-sized updates whose sign
# differs between any two correct implementations (seen CPU against CPU,
# OpenBLAS against the reference BLAS); eps 1e-4 keeps every update a smooth
# function of its gradient (the e2e tests use 1e-6 for the same reason).
# Its learning-rate schedule gives the 3 steps 3e-4, 6e-4 and 3.3e-4 (warm-up,
# peak, mid-decay): the GPU's updates take each step's rate.
SMALL_ARGS="--layers 2 --hidden 64 --heads 4 --seq 32 --batch 4 --eps 1e-4 --pad-vocab 64 --warmup 2 --decay-steps 4 --min-lr 6e-5"
SMALL_VOCAB=250
SMALL="small-$(echo "$SMALL_ARGS --vocab $SMALL_VOCAB" | cksum | cut -d' ' -f1)"
CHECK_SEED=1234 CHECK_STEPS=3 TIME_SEED=1
[ "$PREPARE" = 1 ] && TOTAL_BUDGET=$((TOTAL_BUDGET + PREPARE_BUDGET))

START=$SECONDS
WORK="$(mktemp -d /tmp/shardc-gpu-bench.XXXXXX)"
mkdir -p "$WORK/rows" "$WORK/logs"
OUTDIR="${OUT:-}"
if [ -n "$OUTDIR" ] && [ -d "$OUTDIR" ] && [ -w "$OUTDIR" ]; then
  exec > >(tee "$OUTDIR/run.log") 2>&1
else
  OUTDIR=""
  exec 2>&1
fi

# --- small helpers ----------------------------------------------------------

FAILED=0          # something that ran failed
CHECK_LINES=()    # "what: verdict" for the summary and RESULTS.md
COMMANDS=()       # the commands whose numbers the table shows
NOTES=()
HAVE_GPU=0
GPU_DESC="no GPU"
GPU_MEM_MB=0
PRED_MACHINE=h200 # the timeline the table's pred ms is (pred_ledger)

# gpu_machine NAME: of the GPU nvidia-smi names NAME, PRED_MACHINE (the
# timeline its pred ms is: h100, a100, or h200 for any other), and the
# dense TF32 and BF16 tensor-core peaks in TFLOP/s (NVIDIA's data sheets;
# sparsity's doubling not counted) with PEAK_SOURCE, the part they are,
# where PEAK_TFLOPS and BF16_PEAK_TFLOPS do not set them. H100 and H200 SXM
# share them; an unknown GPU gets the H200's, and the notes say so.
gpu_machine() {
  local tf32 bf16
  case "$1" in *H100*) PRED_MACHINE=h100 ;; *A100*) PRED_MACHINE=a100 ;; esac
  if [ -n "$PEAK_TFLOPS" ] && [ -n "$BF16_PEAK_TFLOPS" ]; then
    PEAK_SOURCE="PEAK_TFLOPS and BF16_PEAK_TFLOPS"
    return
  fi
  case "$1" in
    *H100*PCIe*) tf32=378 bf16=756 PEAK_SOURCE="H100 PCIe" ;;
    *H100*NVL* | *H200*NVL*) tf32=418 bf16=835 PEAK_SOURCE="H100/H200 NVL" ;;
    *H100* | *H200* | *GH200*) tf32=494 bf16=989 PEAK_SOURCE="H100/H200 SXM" ;;
    *A100*) tf32=156 bf16=312 PEAK_SOURCE="A100" ;;
    *) tf32=494 bf16=989 PEAK_SOURCE="the H200 SXM's, this GPU's unknown" ;;
  esac
  [ -n "$PEAK_TFLOPS" ] || PEAK_TFLOPS=$tf32
  [ -n "$BF16_PEAK_TFLOPS" ] || BF16_PEAK_TFLOPS=$bf16
}

elapsed() { echo $((SECONDS - START)); }
left() { echo $((TOTAL_BUDGET - (SECONDS - START) - TABLE_RESERVE)); }
# cap SECONDS: min(SECONDS, what is left); 0 when nothing is.
cap() {
  local want=$1 rest
  rest=$(left)
  [ "$rest" -lt "$want" ] && want=$rest
  [ "$want" -lt 5 ] && want=0
  echo "$want"
}
phase() { printf '\n== [%3ds] %s\n' "$(elapsed)" "$*"; }
say() { echo "   $*"; }
record() { CHECK_LINES+=("$1: $2"); say "$1: $2"; }
fail() { FAILED=1; record "$1" "FAIL${2:+ ($2)}"; }
wants() { case ",$PHASES," in *,"$1",*) return 0 ;; esac; return 1; }
tail_of() { tail -n "${2:-12}" "$1" 2>/dev/null | sed 's/^/     | /'; }
one_line() { grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n 1 | cut -c1-160; }
# run_limited SECONDS LOG CMD...: the command's exit code, 124 on timeout.
run_limited() {
  local secs=$1 log=$2
  shift 2
  if [ "$secs" -le 0 ]; then
    echo "out of time budget" >"$log"
    return 124
  fi
  timeout -k 10 "$secs" "$@" >"$log" 2>&1
}
row() { # row FILE NAME STATUS [BATCH]: a table row with no numbers
  python3 - "$@" <<'EOF'
import json, sys
path, name, status = sys.argv[1:4]
batch = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] else None
json.dump({"name": name, "status": status, "batch": batch}, open(path, "w"))
EOF
}
json_get() { # json_get FILE EXPR (python over `d`)
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null
}
json_line_get() { # json_line_get FILE.jsonl LINE EXPR: over line LINE's `d` (sed's address: 2, $)
  sed -n "$2p" "$1" 2>/dev/null | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print($3)" 2>/dev/null
}

# nvidia-smi memory sampler: the largest device memory used while it runs.
SMI_PID=""
smi_start() {
  SMI_LOG="$1"
  : >"$SMI_LOG"
  [ "$HAVE_GPU" = 1 ] || return 0
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 \
    >"$SMI_LOG" 2>/dev/null &
  SMI_PID=$!
}
smi_stop() { # prints GB (10^9 bytes), or nothing
  if [ -n "$SMI_PID" ]; then
    kill "$SMI_PID" 2>/dev/null
    wait "$SMI_PID" 2>/dev/null
    SMI_PID=""
  fi
  awk '$1+0 > m { m = $1+0 } END { if (m > 0) printf "%.2f", m * 1048576 / 1e9 }' "$SMI_LOG"
}

finish() {
  [ -n "$SMI_PID" ] && kill "$SMI_PID" 2>/dev/null
  if [ -n "$OUTDIR" ]; then
    tar -czf "$OUTDIR/logs.tar.gz" -C "$WORK" --exclude='*.safetensors' \
      --exclude='*.bin' logs rows check 2>/dev/null
  fi
  rm -rf "$WORK"
}
trap finish EXIT

# --- phase 0: the machine ---------------------------------------------------

phase "0/5 machine"
say "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); host $(uname -n), $(uname -m), $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
say "tree: $ROOT; build dir: $BUILD; total budget ${TOTAL_BUDGET}s"
if command -v nvidia-smi >/dev/null 2>&1 &&
  GPU_LINE=$(timeout 20 nvidia-smi --query-gpu=name,memory.total,driver_version \
    --format=csv,noheader,nounits 2>/dev/null | head -n 1) && [ -n "$GPU_LINE" ]; then
  HAVE_GPU=1
  GPU_MEM_MB=$(echo "$GPU_LINE" | cut -d, -f2 | tr -d ' ')
  GPU_DESC="$(echo "$GPU_LINE" | cut -d, -f1 | sed 's/ *$//'), $GPU_MEM_MB MiB, driver $(echo "$GPU_LINE" | cut -d, -f3 | tr -d ' ')"
  say "GPU: $GPU_DESC"
else
  say "GPU: none (nvidia-smi missing or found no device)"
fi
gpu_machine "$GPU_DESC"
say "MFU peaks: TF32 $PEAK_TFLOPS, BF16 $BF16_PEAK_TFLOPS TFLOP/s ($PEAK_SOURCE)"
# Every run here is one rank, where NCCL only copies: keep it off cuMem
# (virtual memory) allocations, which some virtualised GPUs lack (shardc's
# runs and torch FSDP2's alike; set NCCL_CUMEM_ENABLE to choose).
export NCCL_CUMEM_ENABLE="${NCCL_CUMEM_ENABLE:-0}"
say "NCCL_CUMEM_ENABLE=$NCCL_CUMEM_ENABLE"
NVCC="$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)"
[ -n "$NVCC" ] && say "nvcc: $("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"

fingerprint() {
  # What the executables are built from, as a device's copy of the tree has
  # it (git-ignored files do not travel).
  (cd "$ROOT" && find CMakeLists.txt include lib tools runtime -type f \
    -not -path '*/__pycache__/*' -print0 2>/dev/null | LC_ALL=C sort -z |
    xargs -0 sha256sum | sha256sum | cut -c1-16)
}
TREE_FP=$(fingerprint)
BUNDLE_FP=$(cat "$BUNDLE/FINGERPRINT" 2>/dev/null || true)
# A prepared bundle carries its executables packed (prepare_bundle), by
# Python's tarfile and lzma, so that no xz need be installed.
if [ -f "$BUNDLE/exe.tar.xz" ] && [ ! -d "$BUNDLE/exe" ]; then
  if python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$BUNDLE/exe.tar.xz" "$BUNDLE"; then
    say "unpacked $BUNDLE/exe.tar.xz: $(ls "$BUNDLE/exe" | wc -l) executables"
  else
    say "cannot unpack $BUNDLE/exe.tar.xz: the run has no prepared executables"
  fi
fi
if [ -n "$BUNDLE_FP" ]; then
  say "prepared bundle: $BUNDLE ($(cat "$BUNDLE/INFO" 2>/dev/null || echo "not made by --prepare")); $([ "$BUNDLE_FP" = "$TREE_FP" ] && echo "matches this tree" || echo "built from ANOTHER tree ($BUNDLE_FP, this one $TREE_FP)")"
fi

# --- phase 1: build ---------------------------------------------------------

phase "1/5 build (budget ${BUILD_BUDGET}s)"
BIN="$BUILD/bin"
SHARDC_OK=0   # shardc and shardc-gen run here
CUDA_TARGET="unknown" # yes | no (why)

missing_packages() {
  (source "$ROOT/scripts/common.sh" >/dev/null 2>&1
   for p in "${SHARDC_PACKAGES[@]}"; do
     dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
       printf '%s ' "$p"
   done)
}
# Another ninja in the same build dir (a colleague's build) corrupts both:
# wait for it.
other_ninja() {
  local pid dir cwd real
  real=$(realpath -m "$BUILD")
  for pid in $(pgrep -x ninja 2>/dev/null); do
    dir=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | sed -n '/^-C$/{n;p;q}')
    cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null)
    [ -z "$dir" ] && dir=.
    case "$dir" in /*) ;; *) dir="$cwd/$dir" ;; esac
    [ "$(realpath -m "$dir")" = "$real" ] && return 0
  done
  return 1
}

wait_for_ninja() {
  local said=0
  while other_ninja && [ "$(cap 300)" -gt 0 ]; do
    [ "$said" = 0 ] && say "another ninja is building $BUILD: waiting for it"
    said=1
    sleep 5
  done
}

if wants build; then
  MISSING=$(missing_packages)
  if [ -n "$MISSING" ] && [ -n "$BUNDLE_FP" ]; then
    say "not building: packages missing here ($MISSING) and a prepared bundle is present; no registry is reachable from a device machine"
    if [ "$BUNDLE_FP" = "$TREE_FP" ]; then
      record "build" "skipped, using the prepared bundle (same tree)"
    else
      record "build" "skipped, using a prepared bundle from ANOTHER tree (rebuild it with --prepare)"
      NOTES+=("the bundle was prepared from another tree than this one")
    fi
  else
    wait_for_ninja
    if [ -n "$MISSING" ]; then
      # No registry on a device machine: fail fast there (carry a bundle).
      t=$(cap 150)
      say "installing: $MISSING (limit ${t}s; a device machine reaches no registry: prepare a bundle instead)"
      if ! run_limited "$t" "$WORK/logs/install.log" bash -c \
        'source "$1/scripts/common.sh" && shardc_install_missing' _ "$ROOT"; then
        tail_of "$WORK/logs/install.log" 5
        fail "install" "the packages could not be installed"
      fi
    fi
    t=$(cap "$BUILD_BUDGET")
    if run_limited "$t" "$WORK/logs/build.log" env SHARDC_BUILD_DIR="$BUILD" bash -c \
      'source "$1/scripts/common.sh" && shardc_build' _ "$ROOT"; then
      steps=$(grep -c "^\[" "$WORK/logs/build.log"); record "build" "ok ($([ "$steps" = 0 ] && echo "up to date" || echo "$steps ninja steps"), $(elapsed)s)"
    else
      rc=$?
      tail_of "$WORK/logs/build.log" 25
      if [ "$rc" = 124 ]; then fail "build" "timed out after ${t}s"; else fail "build" "exit $rc"; fi
      # The targets that do build (a colleague's half-added one must not stop
      # the timing run).
      if [ -f "$BUILD/build.ninja" ] && [ "$(cap 120)" -gt 0 ]; then
        say "building what does build: ninja -k 0"
        timeout -k 5 "$(cap 120)" ninja -C "$BUILD" -k 0 all >"$WORK/logs/build-k0.log" 2>&1
        grep -E '^FAILED: ' "$WORK/logs/build-k0.log" | head -n 5 | sed 's/^/     /'
      fi
    fi
  fi
else
  say "skipped (PHASES=$PHASES)"
fi
if "$BIN/shardc" --help >/dev/null 2>&1 && "$BIN/shardc-gen" --help >/dev/null 2>&1; then
  SHARDC_OK=1
  if grep -q '^SHARDC_RT_CUDA_AVAILABLE:INTERNAL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null &&
    [ -f "$BUILD/lib/libshardc_rt_cuda.a" ]; then
    CUDA_TARGET="yes"
  else
    CUDA_TARGET="no (this build has no target=cuda: no nvcc/NCCL at configure time, or the runtime's CUDA half is not in yet; see runtime/CMakeLists.txt)"
  fi
  say "shardc: $BIN/shardc runs; target=cuda: $CUDA_TARGET"
else
  say "shardc: cannot run $BIN/shardc here ($( { "$BIN/shardc" --help 2>&1 || true; } | head -n 1 | cut -c1-120))"
  if [ -n "$BUNDLE_FP" ]; then
    CUDA_TARGET=$([ -d "$BUNDLE/exe" ] && ls "$BUNDLE"/exe/*-cuda-* >/dev/null 2>&1 && echo "yes (prepared executables)" || echo "no (the bundle has no target=cuda executables)")
    say "using the executables prepared in $BUNDLE; target=cuda: $CUDA_TARGET"
  else
    CUDA_TARGET="no (no shardc and no prepared bundle)"
  fi
fi

# Refresh a bundle made from another tree when this machine can rebuild it.
if [ "$SHARDC_OK" = 1 ] && [ -n "$BUNDLE_FP" ] && [ "$BUNDLE_FP" != "$TREE_FP" ]; then
  say "the bundle is from another tree: dropping its executables, they are rebuilt as needed"
  rm -rf "$BUNDLE/exe" "$BUNDLE/exe.tar.xz" "$BUNDLE/ledger" "$BUNDLE/ref" "$BUNDLE/models" "$BUNDLE/bf16.txt" "$BUNDLE/INFO"
  BUNDLE_FP=""
fi
if [ "$SHARDC_OK" = 1 ]; then
  mkdir -p "$BUNDLE/exe" "$BUNDLE/ledger" "$BUNDLE/models" "$BUNDLE/ref"
  echo "$TREE_FP" >"$BUNDLE/FINGERPRINT"
fi

# --- executables ------------------------------------------------------------

# model_file NAME BATCH: sets MODEL to the MLIR of $SMALL or `gpt2` at
# BATCH (kept in the bundle, so a device run reads the header too).
MODEL=""
model_file() {
  local name=$1 batch=$2 f="$BUNDLE/models/$1-b$2.mlir"
  MODEL=""
  if [ ! -s "$f" ] && [ "$SHARDC_OK" = 1 ]; then
    if [ "$name" = "$SMALL" ]; then
      # shellcheck disable=SC2086
      "$BIN/shardc-gen" gpt $SMALL_ARGS --vocab $SMALL_VOCAB >"$f.tmp" && mv "$f.tmp" "$f"
    else
      "$BIN/shardc-gen" gpt --layers $G_LAYERS --hidden $G_HIDDEN --heads $G_HEADS \
        --vocab $G_VOCAB --pad-vocab $G_PAD_VOCAB --seq $G_SEQ --batch "$batch" >"$f.tmp" && mv "$f.tmp" "$f"
    fi
  fi
  [ -s "$f" ] && MODEL="$f"
  [ -n "$MODEL" ]
}
# get_exe NAME TARGET KEY BATCH: sets EXE to a built executable (built now
# when shardc runs here), or EXE_WHY to why there is none. KEY: STRATEGY, or
# STRATEGY+bf16 for --param-dtype bf16, either with +offload for the
# optimizer state and params in host memory.
EXE="" EXE_WHY=""
get_exe() {
  local name=$1 target=$2 key=$3 batch=$4
  local strategy=${3%%+*} exe="$BUNDLE/exe/$name-$target-$key-b$batch" log t
  local -a dtype=()
  case "$key" in *+bf16 | *+bf16+*) dtype=(--param-dtype bf16) ;; esac
  case "$key" in *+offload) dtype+=(--offload-optimizer true --offload-params true) ;; esac
  # GPT-2's ledger also predicts the step's time on an H200, set beside the
  # measured one in the table (the timeline refuses offloading: none there).
  case "$name,$key" in gpt2,*+offload) ;; gpt2,*) dtype+=(--machine h200) ;; esac
  EXE="" EXE_WHY=""
  if [ -x "$exe" ]; then EXE="$exe"; return 0; fi
  if [ "$SHARDC_OK" != 1 ]; then
    EXE_WHY="not prepared: no $exe (run bench/gpu/run.sh --prepare where shardc builds, and carry $BUNDLE)"
    return 1
  fi
  if [ "$target" = cuda ] && [ "${CUDA_TARGET%% *}" != yes ]; then
    EXE_WHY="target=cuda: $CUDA_TARGET"
    return 1
  fi
  model_file "$name" "$batch" || { EXE_WHY="shardc-gen failed"; return 1; }
  log="$WORK/logs/build-$name-$target-$key-b$batch.log"
  local _ ok=0
  for _ in 1 2; do
    # A colleague's ninja rewriting the runtime library mid-link leaves
    # undefined references: wait for it, and try once more.
    wait_for_ninja
    t=$(cap 300)
    if run_limited "$t" "$log" "$BIN/shardc" build "$MODEL" --strategy "$strategy" "${dtype[@]}" \
      --mesh 1 --target "$target" --ledger-json "$BUNDLE/ledger/$name-$target-$key-b$batch.json" \
      -o "$exe"; then
      ok=1
      break
    fi
    grep -q "undefined reference" "$log" || break
  done
  if [ "$ok" != 1 ]; then
    if grep -q "built without nvcc" "$log"; then
      EXE_WHY="target=cuda: not available in this build"
    else
      EXE_WHY="shardc build --target $target failed: $(grep -m1 -iE 'error|undefined|out of time' "$log" | cut -c1-140)"
    fi
    rm -f "$exe"
    return 1
  fi
  # The timeline on the other machines too (the ledger beside it, with
  # .h100 or .a100): the table's pred ms is the GPU's (pred_ledger).
  if [[ " ${dtype[*]} " == *" --machine h200 "* ]]; then
    for m in h100 a100; do
      run_limited 120 "$log.$m" "$BIN/shardc" emit "$MODEL" --strategy "$strategy" \
        "${dtype[@]/#h200/$m}" --mesh 1 --target "$target" \
        --ledger-json "$BUNDLE/ledger/$name-$target-$key-b$batch.$m.json" -o - >/dev/null || true
    done
  fi
  EXE="$exe"
}

# pred_ledger LEDGER: sets PRED to the ledger whose timeline is this GPU's
# (PRED_MACHINE, from nvidia-smi's name): LEDGER's sibling for it where the
# bundle has one, else LEDGER (an H200's, said in the notes: PRED_FALLBACK).
PRED="" PRED_FALLBACK=""
pred_ledger() {
  PRED="${1%.json}.$PRED_MACHINE.json"
  if [ "$PRED_MACHINE" = h200 ] || [ ! -f "$PRED" ]; then
    [ "$PRED_MACHINE" = h200 ] || PRED_FALLBACK=1
    PRED="$1"
  fi
}

# Libraries an executable needs that this machine lacks: the bundle's
# (OpenMPI, OpenBLAS), CUDA's, or those PyTorch's wheels carry.
PY_LIB_DIRS=""
# with_dirs DIRS: LD_LIBRARY_PATH with DIRS (a:b:) in front.
with_dirs() { local d=${1%:}; echo "$d${LD_LIBRARY_PATH:+${d:+:}$LD_LIBRARY_PATH}"; }
# find_py_lib_dirs: sets PY_LIB_DIRS (once) to the library directories of
# PyTorch's wheels (" " where none).
find_py_lib_dirs() {
  [ -n "$PY_LIB_DIRS" ] && return 0
  PY_LIB_DIRS=$(python3 - <<'EOF' 2>/dev/null
import glob, os, site
dirs = set()
for sp in site.getsitepackages() + [site.getusersitepackages()]:
    for pattern in ("nvidia/*/lib", "nvidia/*/*/lib", "torch/lib"):
        dirs.update(glob.glob(os.path.join(sp, pattern)))
print(" ".join(sorted(dirs)))
EOF
  )
  [ -z "$PY_LIB_DIRS" ] && PY_LIB_DIRS=" "
}
lib_dirs_for() { # prints directories to put in front, "a:b:" (may be empty)
  local exe=$1 extra="" _ lib dir
  for _ in 1 2 3 4; do
    local missing
    missing=$(LD_LIBRARY_PATH="$(with_dirs "$extra")" ldd "$exe" 2>/dev/null | awk '/not found/ { print $1 }' | sort -u)
    [ -z "$missing" ] && break
    find_py_lib_dirs
    local added=0
    for lib in $missing; do
      for dir in "$BUNDLE/lib/mpi" "$BUNDLE/lib/blas" /usr/local/cuda/lib64 /usr/local/cuda/lib \
        /usr/local/cuda/targets/x86_64-linux/lib $PY_LIB_DIRS; do
        if [ -e "$dir/$lib" ]; then
          case ":$extra" in *":$dir:"*) ;; *) extra="$dir:$extra"; added=1 ;; esac
          break
        fi
      done
    done
    [ "$added" = 0 ] && break
  done
  # cuDNN, which the runtime loads itself (ldd does not list it): where the
  # loader's cache lacks it, CUDA's directory with it, else PyTorch's
  # wheel's (the runtime declines a cuDNN older than its graphs need).
  # grep reads all of ldconfig's output: -q would stop early, and pipefail
  # would take the SIGPIPE for a miss.
  if ! ldconfig -p 2>/dev/null | grep 'libcudnn\.so\.9 ' >/dev/null; then
    find_py_lib_dirs
    for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib $PY_LIB_DIRS; do
      [ -e "$dir/libcudnn.so.9" ] || continue
      case ":$extra" in *":$dir:"*) ;; *) extra="$dir:$extra" ;; esac
      break
    done
  fi
  echo "$extra"
}
# The kernel variants the bf16 rows run with (choose_variants, after the
# kernel bench): VAR=VALUE words, none by default.
BF16_VARIANTS=()
# run_env PREC: the settings a PREC row ran under, as the commands list
# shows them before an executable.
run_env() {
  local words=()
  [ -n "${SHARDC_GEMM_EPILOGUES:-}" ] && words+=("SHARDC_GEMM_EPILOGUES=$SHARDC_GEMM_EPILOGUES")
  [ "$1" = bf16 ] && words+=("${BF16_VARIANTS[@]}")
  if [ "${#words[@]}" -gt 0 ]; then echo "${words[*]} "; fi
}
# exe_cmd EXE [PREC]: sets EXE_CMD to `env VARS... EXE`, with what the
# executable needs on this machine (for PREC bf16, BF16_VARIANTS too); run
# it as "${EXE_CMD[@]}" ARGS...
EXE_CMD=()
exe_cmd() {
  local exe=$1 extra
  extra=$(lib_dirs_for "$exe")
  EXE_CMD=(env OMPI_MCA_ess_singleton_isolated=1 OPENBLAS_NUM_THREADS=1)
  [ "${2:-}" = bf16 ] && EXE_CMD+=("${BF16_VARIANTS[@]}")
  if [ -n "$extra" ]; then
    EXE_CMD+=("LD_LIBRARY_PATH=$(with_dirs "$extra")")
    case "$extra" in
    *"$BUNDLE/lib/mpi"*)
      # The bundle's OpenMPI, relocated: its components and help files.
      # shellcheck disable=SC2054
      EXE_CMD+=("OPAL_PREFIX=$BUNDLE/ompi/usr" OMPI_MCA_mca_base_component_show_load_errors=0
        OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 "OMPI_MCA_mtl=^ofi" "OMPI_MCA_osc=^ucx,pt2pt"
        OMPI_MCA_btl_base_warn_component_unused=0)
      ;;
    esac
  fi
  EXE_CMD+=("$exe")
}
missing_libs() { # what is still missing after lib_dirs_for, or nothing
  LD_LIBRARY_PATH="$(with_dirs "$(lib_dirs_for "$1")")" ldd "$1" 2>/dev/null |
    awk '/not found/ { printf "%s%s", (n++ ? " " : ""), $1 }'
}


# --- phase 2: the GPU against the CPU ---------------------------------------

# The runtime's kernel test first (exit 77: no GPU): it checks every CUDA
# kernel against the CPU's, and its verdicts gate what the check and the
# timed runs after it use (the GEMM epilogues and the attention below).
kernel_test_finished() { # the test's summary line: it ran to its end
  grep -q '^cudakernels: [0-9]* passed, [0-9]* failed' "$WORK/logs/cudakernels.out" 2>/dev/null
}
run_kernel_test() {
  KT=""
  for c in "$BUILD/bin/shardc-rt-cudakernels" "$BUNDLE/bin/shardc-rt-cudakernels"; do
    [ -x "$c" ] && { KT=$c; break; }
  done
  if [ -z "$KT" ]; then
    record "cuda kernel test" "n/a: shardc-rt-cudakernels is not built (runtime/test/CudaKernelsTest.cu not in, or no target=cuda)"
  elif lacking=$(missing_libs "$KT") && [ -n "$lacking" ]; then
    fail "cuda kernel test" "cannot start: no $lacking"
  else
    exe_cmd "$KT"
    run_limited "$(cap "$KERNEL_TEST_BUDGET")" "$WORK/logs/cudakernels.out" "${EXE_CMD[@]}"
    rc=$?
    line=$(grep -o 'cudakernels: [0-9]* passed, [0-9]* failed' "$WORK/logs/cudakernels.out" | tail -n 1)
    [ "$HAVE_GPU" = 1 ] && COMMANDS+=("$BUILD/bin/shardc-rt-cudakernels")
    if [ "$rc" = 77 ] && [ "$HAVE_GPU" != 1 ]; then
      record "cuda kernel test" "no GPU: skipped (exit 77)"
    elif [ "$rc" = 0 ] && [ -n "$line" ] && [ "$(echo "$line" | sed -E 's/.* ([0-9]+) failed/\1/')" = 0 ]; then
      record "cuda kernel test" "PASS ($line)"
    else
      tail_of "$WORK/logs/cudakernels.out" 15
      fail "cuda kernel test" "exit $rc${line:+, $line}$([ "$rc" = 77 ] && echo ": it found no GPU where nvidia-smi did")"
    fi
  fi
}

# The GEMM epilogues (cuBLASLt's bias, GELU and GELU-derivative fusion in
# linear, linear_gelu and matmul_gelu_grad; on by default) stay on for the
# runs below only where the kernel test passed its "[gemm epilogue on]"
# checks, as the attention does on its flash checks: a failed or missing
# check, or a test that did not run to its end, exports
# SHARDC_GEMM_EPILOGUES=off for every later run, the GPU against the CPU
# check included. Where the kernel test did not run (PHASES without check),
# a setting the caller made stands; without one, off.
# gate_unchecked LABEL VARIABLE DEFAULT: where nothing can check the setting
# (no GPU; or the kernel test did not run and the caller set VARIABLE), says
# what stands and succeeds; else fails, and the gate decides.
gate_unchecked() {
  local value="${!2:-}"
  if [ "$HAVE_GPU" != 1 ]; then
    say "$1: ${value:-$3} (not checked: no GPU)"
    return 0
  fi
  if [ ! -s "$WORK/logs/cudakernels.out" ] && [ -n "$value" ]; then
    record "$1" "$value for the runs below, as set (the kernel test did not run)"
    return 0
  fi
  return 1
}

gate_epilogues() {
  local kt="$WORK/logs/cudakernels.out" passed failed others fused unfused why
  gate_unchecked "gemm epilogues" SHARDC_GEMM_EPILOGUES on && return 0
  if [ ! -s "$kt" ]; then
    export SHARDC_GEMM_EPILOGUES=off
    record "gemm epilogues" "OFF for every run below (SHARDC_GEMM_EPILOGUES=off): the kernel test did not run"
    NOTES+=("GEMM epilogues off (SHARDC_GEMM_EPILOGUES=off): the kernel test did not run")
    return 0
  fi
  passed=$(grep -c '^ok .*\[gemm epilogue on\]' "$kt")
  failed=$(grep -c '^FAIL.*\[gemm epilogue on\]' "$kt")
  # A test that stopped early (a fault, the time limit) checked too little.
  kernel_test_finished || failed=$((failed + 1))
  fused=$(grep -c '^shardc: gemm epilogue plan: .*: fused (' "$kt")
  unfused=$(grep -c '^shardc: gemm epilogue plan: .*: unfused: ' "$kt")
  say "cuBLASLt plans of the kernel test ($fused fused, $unfused unfused):"
  grep '^shardc: gemm epilogue plan: ' "$kt" | sed 's/^shardc: gemm epilogue plan: /     /' | head -n 60
  # Failures of matmul_bias_grad's alone (the newest epilogue, BGRADB)
  # turn that one off and keep the others.
  others=$(grep '^FAIL.*\[gemm epilogue on\]' "$kt" | grep -vc '^FAIL matmul_bias_grad ')
  if [ "$passed" -gt 0 ] && [ "$failed" = 0 ]; then
    record "gemm epilogues" "${SHARDC_GEMM_EPILOGUES:-on} for the runs below (the kernel test's $passed [gemm epilogue on] checks passed; cuBLASLt fused $fused of $((fused + unfused)) shapes)"
  elif [ "$passed" -gt 0 ] && [ "$others" = 0 ] && kernel_test_finished >/dev/null; then
    grep '^FAIL.*\[gemm epilogue on\]' "$kt" | head -n 10 | sed 's/^/     /'
    export SHARDC_GEMM_EPILOGUES=no-bias-grad
    record "gemm epilogues" "on but for matmul_bias_grad's bias gradient (SHARDC_GEMM_EPILOGUES=no-bias-grad) for the runs below: $failed of the kernel test's matmul_bias_grad [gemm epilogue on] checks failed, every other one passed"
    NOTES+=("GEMM epilogues on but for the bias gradient (SHARDC_GEMM_EPILOGUES=no-bias-grad): the kernel test's matmul_bias_grad [gemm epilogue on] checks failed")
  else
    grep '^FAIL.*\[gemm epilogue on\]' "$kt" | head -n 10 | sed 's/^/     /'
    why=$(kernel_test_finished || echo "the test did not run to its end")
    why=${why:-$([ "$failed" -gt 0 ] && echo "$failed of them failed" || echo "none passed: the test stopped before them")}
    export SHARDC_GEMM_EPILOGUES=off
    record "gemm epilogues" "OFF for every run below (SHARDC_GEMM_EPILOGUES=off): the kernel test's [gemm epilogue on] checks did not pass, $why"
    NOTES+=("GEMM epilogues off (SHARDC_GEMM_EPILOGUES=off) for every run after the kernel test: its [gemm epilogue on] checks did not pass ($why)")
  fi
}

# Attention: the fused (flash) kernels are the CUDA runtime's default; they
# stay on for the runs below only where the kernel test ran to its end and
# passed every one of its flash checks, bf16 ("(flash)", "(flash: ...)") and
# f32 on TF32 tensor cores ("(flash tf32"): otherwise SHARDC_ATTENTION=gemm
# is exported for every later run, the GPU against the CPU check included.
# Where the kernel test did not run (PHASES without check), a setting the
# caller made stands; without one, gemm.
checks_passed() { # checks_passed OK_RE FAIL_RE: some OK_RE line, no FAIL_RE one
  local kt="$WORK/logs/cudakernels.out"
  grep -q "$1" "$kt" 2>/dev/null && ! grep -q "$2" "$kt"
}
all_flash_checks_passed() {
  kernel_test_finished &&
    checks_passed '^ok .*(flash)' '^FAIL.*(flash[):]' &&
    checks_passed '^ok .*(flash tf32)' '^FAIL.*(flash tf32'
}
# cuDNN's fused attention (bf16; SHARDC_ATTENTION=cudnn) goes further: the
# runs below use it where the flash checks passed (its fallback) and the
# kernel test ran "(cudnn)" checks and passed every one, unless the caller
# set SHARDC_ATTENTION to flash or gemm.
gate_attention() {
  local kt="$WORK/logs/cudakernels.out" why
  gate_unchecked "attention" SHARDC_ATTENTION flash && return 0
  if all_flash_checks_passed && [ "${SHARDC_ATTENTION:-cudnn}" = cudnn ]; then
    if checks_passed '^ok .*(cudnn)' '^FAIL.*(cudnn'; then
      export SHARDC_ATTENTION=cudnn
      record "attention" "cudnn for the runs below (bf16 through cuDNN's fused attention, the flash kernels elsewhere: the kernel test's flash and cudnn checks passed)"
    else
      grep '^FAIL.*(cudnn' "$kt" 2>/dev/null | head -n 10 | sed 's/^/     /'
      why=$(grep -m1 '^note: cuDNN attention not checked: ' "$kt" 2>/dev/null | sed 's/^note: //')
      why=${why:-"the kernel test's cudnn checks did not pass"}
      export SHARDC_ATTENTION=flash
      record "attention" "flash for the runs below (the kernel test's flash checks passed; not cuDNN: $why)"
      NOTES+=("bf16 attention through the flash kernels, not cuDNN: $why")
    fi
  elif all_flash_checks_passed; then
    record "attention" "${SHARDC_ATTENTION:-flash} for the runs below (the kernel test's flash checks passed)"
  else
    grep '^FAIL.*(flash' "$kt" 2>/dev/null | head -n 10 | sed 's/^/     /'
    export SHARDC_ATTENTION=gemm
    record "attention" "GEMMs for every run below (SHARDC_ATTENTION=gemm): the kernel test did not run to its end with every flash check passed"
    NOTES+=("attention through GEMMs (SHARDC_ATTENTION=gemm) for every run after the kernel test: it did not run to its end with every flash check passed")
  fi
}

phase "2/5 check: the CUDA kernel test, then target=cuda against target=host, small GPT, world size 1, $CHECK_STRATEGIES (budget ${KERNEL_TEST_BUDGET}s + ${CHECK_BUDGET}s)"
wants check && run_kernel_test
gate_epilogues
gate_attention
CHECK_END=$((SECONDS + $(cap "$CHECK_BUDGET")))
# SHARDC_DETERMINISTIC=1 promises the same bits every run: two runs of the
# check's GPU executable (EXE_CMD, args; bf16, whose attention is the flash
# kernels') must export the same params and log the same losses, compared
# with no tolerance at all.
check_deterministic() {
  local strategy=$1 d=$2 run
  for run in 1 2; do
    if ! run_limited "$(check_left)" "$d/determ$run.out" env SHARDC_TF32=0 SHARDC_DETERMINISTIC=1 \
      "${EXE_CMD[@]}" "${args[@]}" --export "$d/determ$run.safetensors" --log-json "$d/determ$run.jsonl" --quiet; then
      tail_of "$d/determ$run.out"
      fail "check $strategy gpu deterministic" "run $run did not finish"
      return
    fi
  done
  if python3 "$HERE/compare.py" check --ref-log "$d/determ1.jsonl" --ref-export "$d/determ1.safetensors" \
    --log "$d/determ2.jsonl" --export "$d/determ2.safetensors" --rtol 0 --atol 0 --outliers 0 \
    --label "SHARDC_DETERMINISTIC=1, run 1 (cpu) against run 2 (gpu)" \
    >"$d/determ.out" 2>&1; then
    record "check $strategy gpu deterministic" "PASS (SHARDC_DETERMINISTIC=1 twice: the same losses and $(grep -o '[0-9]* elements' "$d/determ.out" | head -n 1), bit for bit)"
  else
    sed 's/^/     /' "$d/determ.out" | tail -n 8
    fail "check $strategy gpu deterministic" "two SHARDC_DETERMINISTIC=1 runs differ"
  fi
}
check_left() { local t=$((CHECK_END - SECONDS)); [ "$t" -lt 0 ] && t=0; echo "$t"; }
mkdir -p "$WORK/check"
TOKENS="$WORK/check/tokens.bin"
if wants check; then
  python3 "$HERE/compare.py" tokens "$TOKENS" --tokens 8192 --vocab $SMALL_VOCAB --seed 7
  say "model: shardc-gen gpt $SMALL_ARGS --vocab $SMALL_VOCAB; --steps $CHECK_STEPS --seed $CHECK_SEED --data (llm.c tokens, uniform, seed 7); GPU run with SHARDC_TF32=0"
  for strategy in $CHECK_STRATEGIES; do # zero3+bf16: --param-dtype bf16
    d="$WORK/check/$strategy"
    mkdir -p "$d"
    rtol=$CHECK_RTOL atol=$CHECK_ATOL flags="--strategy $strategy"
    outliers=(--outliers 0)
    case "$strategy" in
    *+bf16)
      rtol=$CHECK_BF16_RTOL atol=$CHECK_BF16_ATOL flags="--strategy ${strategy%%+*} --param-dtype bf16"
      outliers=(--outliers "$CHECK_BF16_OUTLIERS" --outlier-bound "$CHECK_BF16_OUTLIER_BOUND")
      ;;
    esac
    # Evaluations at steps 0 and CHECK_STEPS check the evaluation step too.
    args=(--steps "$CHECK_STEPS" --seed "$CHECK_SEED" --data "$TOKENS"
      --eval-every "$CHECK_STEPS" --eval-batches 2)
    # The CPU (target=host).
    ref_log="" ref_export=""
    if get_exe "$SMALL" host "$strategy" 4; then
      host=$EXE
      lacking=$(missing_libs "$host")
      if [ -n "$lacking" ]; then
        if [ -s "$BUNDLE/ref/$SMALL/$strategy/host.jsonl" ]; then
          ref_log="$BUNDLE/ref/$SMALL/$strategy/host.jsonl" ref_export="$BUNDLE/ref/$SMALL/$strategy/host.safetensors"
          record "check $strategy cpu" "not run here (no $lacking); the CPU run prepared with the bundle stands in"
        else
          fail "check $strategy cpu" "cannot start: no $lacking, and no prepared CPU run"
        fi
      else
        exe_cmd "$host"
        blas=""
        case "${EXE_CMD[*]}" in *"$BUNDLE/lib/blas"*) blas=" [CPU BLAS: $(cat "$BUNDLE/lib/blas/KIND" 2>/dev/null || echo "the bundle's")]" ;; esac
        if run_limited "$(check_left)" "$d/host.out" "${EXE_CMD[@]}" "${args[@]}" \
          --export "$d/host.safetensors" --log-json "$d/host.jsonl" --quiet; then
          ref_log="$d/host.jsonl" ref_export="$d/host.safetensors"
          if python3 "$HERE/compare.py" validate --log "$ref_log" --export "$ref_export" \
            --steps $CHECK_STEPS >"$d/validate.out" 2>&1; then
            record "check $strategy cpu" "ok, $(head -n 1 "$d/validate.out")$blas"
          else
            tail_of "$d/validate.out"
            fail "check $strategy cpu" "bad losses or export"
          fi
          if [ "$SHARDC_OK" = 1 ]; then # the reference a device run can use
            mkdir -p "$BUNDLE/ref/$SMALL/$strategy"
            cp "$ref_log" "$ref_export" "$BUNDLE/ref/$SMALL/$strategy/"
          fi
        else
          rc=$?
          tail_of "$d/host.out"
          fail "check $strategy cpu" "$([ $rc = 124 ] && echo "timed out" || echo "exit $rc")"
        fi
      fi
    else
      fail "check $strategy cpu" "$EXE_WHY"
    fi
    # The GPU (target=cuda).
    if ! get_exe "$SMALL" cuda "$strategy" 4; then
      case "$EXE_WHY" in
      target=cuda*) record "check $strategy gpu" "n/a: $EXE_WHY" ;;
      *) fail "check $strategy gpu" "$EXE_WHY" ;;
      esac
      continue
    fi
    cuda=$EXE
    exe_cmd "$cuda"
    if [ "$HAVE_GPU" != 1 ]; then
      record "check $strategy gpu" "no GPU: skipped (its target=cuda executable builds)"
      # Without a GPU it must refuse cleanly rather than crash.
      run_limited 30 "$d/cuda-nogpu.out" "${EXE_CMD[@]}" --steps 1 --quiet
      rc=$?
      if [ "$rc" != 0 ] && grep -q "no CUDA device" "$d/cuda-nogpu.out"; then
        say "  and here it exits $rc: $(grep -m1 -o 'no CUDA device[^;(]*' "$d/cuda-nogpu.out")"
      else
        say "  here it exited $rc: $(one_line "$d/cuda-nogpu.out")"
      fi
      continue
    fi
    if [ -z "$ref_log" ]; then
      fail "check $strategy gpu" "no CPU run to compare with"
      continue
    fi
    lacking=$(missing_libs "$cuda")
    if [ -n "$lacking" ]; then
      fail "check $strategy gpu" "cannot start: no $lacking"
      continue
    fi
    if run_limited "$(check_left)" "$d/cuda.out" env SHARDC_TF32=0 "${EXE_CMD[@]}" "${args[@]}" \
      --export "$d/cuda.safetensors" --log-json "$d/cuda.jsonl" --quiet; then
      COMMANDS+=("shardc-gen gpt $SMALL_ARGS --vocab $SMALL_VOCAB > small.mlir; shardc build small.mlir $flags --mesh 1 --target host|cuda; each: --steps $CHECK_STEPS --seed $CHECK_SEED --data tokens.bin --eval-every $CHECK_STEPS --eval-batches 2 --export F --log-json F (cuda: SHARDC_TF32=0); bench/gpu/compare.py check")
      if python3 "$HERE/compare.py" check --ref-log "$ref_log" --ref-export "$ref_export" \
        --log "$d/cuda.jsonl" --export "$d/cuda.safetensors" --rtol "$rtol" --atol "$atol" \
        "${outliers[@]}" >"$d/compare.out" 2>&1; then
        grep -E 'loss|params:|outliers:' "$d/compare.out" | sed 's/^/     /'
        record "check $strategy gpu vs cpu" "PASS ($(grep -o 'worst loss rel diff [^:]*' "$d/compare.out"); $(grep -o '[0-9]* elements, [0-9]* outside' "$d/compare.out") tolerance)"
        # bf16 runs the flash kernels (f32 under SHARDC_TF32=0 the GEMMs).
        case "$strategy" in *+bf16) check_deterministic "$strategy" "$d" ;; esac
      else
        sed 's/^/     /' "$d/compare.out" | tail -n 20
        fail "check $strategy gpu vs cpu" "see above"
      fi
    else
      rc=$?
      tail_of "$d/cuda.out"
      fail "check $strategy gpu" "$([ $rc = 124 ] && echo "timed out" || echo "exit $rc")"
    fi
  done
  say "tolerance: every loss and exported element (bf16: the f32 masters) within |gpu - cpu| <= rtol * max(|gpu|, |cpu|) + atol; fp32: rtol $CHECK_RTOL, atol $CHECK_ATOL; bf16: rtol $CHECK_BF16_RTOL, atol $CHECK_BF16_ATOL (one bf16 ulp is 2^-8 relative), all but at most $CHECK_BF16_OUTLIERS elements, each within $CHECK_BF16_OUTLIER_BOUND"
else
  say "skipped (PHASES=$PHASES)"
fi

# --- the kernels alone (PHASES=kernels; not in the default list) -------------

# shardc-rt-kernel-bench (bench/gpu/KernelBench.cu) times the heaviest bf16
# kernels of a GPT-2 small step one by one at its shapes, torch_kernels.py
# PyTorch's counterparts at the same shapes: a kernel change measured in
# seconds, side by side, where a whole step takes minutes.
# The runtime's kernel variants (SHARDC_RT_CUDA_FLASH_FORWARD_TILES=2 and
# the others of compare.py's VARIANTS) that the bench timed faster than
# their default, by over 3%, and the kernel test passed: the bf16 rows
# below run with them (the bench times bf16 kernels; fp32's keep the
# defaults), so that one run both measures the variants and times the step
# with the fastest.
choose_variants() {
  local line
  while IFS= read -r line; do
    case "$line" in
    "set "*)
      BF16_VARIANTS+=("$(echo "${line#set }" | cut -d: -f1)")
      record "kernel variant" "${line#set }"
      ;;
    *) say "kernel variant: ${line#keep }" ;;
    esac
  done < <(python3 "$HERE/compare.py" variants "$WORK/logs/kernel-bench.out" "$WORK/logs/cudakernels.out")
  [ "${#BF16_VARIANTS[@]}" -gt 0 ] && NOTES+=("bf16 rows with the kernel variants ${BF16_VARIANTS[*]}: the kernel bench timed them faster than the default")
}

if wants kernels; then
  phase "kernels: the runtime's bf16 kernels one by one, and PyTorch's, GPT-2 small's shapes at batch $KERNEL_BATCH (budget ${KERNEL_BUDGET}s)"
  KB=""
  if [ -x "$BUILD/bin/shardc-rt-kernel-bench" ]; then
    KB="$BUILD/bin/shardc-rt-kernel-bench"
  elif [ -f "$BUNDLE/bin/shardc-rt-kernel-bench.gz" ]; then
    KB="$WORK/shardc-rt-kernel-bench"
    gunzip -c "$BUNDLE/bin/shardc-rt-kernel-bench.gz" >"$KB" && chmod +x "$KB"
  fi
  kargs=(--batch "$KERNEL_BATCH" --seq $G_SEQ --channels $G_HIDDEN --heads $G_HEADS --vocab $G_VOCAB)
  if [ -z "$KB" ]; then
    record "kernel bench" "n/a: shardc-rt-kernel-bench is not built (no target=cuda)"
  elif [ "$HAVE_GPU" != 1 ]; then
    record "kernel bench" "no GPU: skipped"
  else
    exe_cmd "$KB"
    run_limited "$(cap $((KERNEL_BUDGET / 2)))" "$WORK/logs/kernel-bench.out" "${EXE_CMD[@]}" "${kargs[@]}"
    rc=$?
    run_limited "$(cap $((KERNEL_BUDGET / 2)))" "$WORK/logs/torch-kernels.out" python3 "$HERE/torch_kernels.py" "${kargs[@]}"
    trc=$?
    COMMANDS+=("$BUILD/bin/shardc-rt-kernel-bench ${kargs[*]}" "python3 bench/gpu/torch_kernels.py ${kargs[*]}")
    python3 "$HERE/compare.py" kernels "$WORK/logs/kernel-bench.out" "$WORK/logs/torch-kernels.out" \
      >"$WORK/logs/kernels.md" && sed 's/^/   /' "$WORK/logs/kernels.md"
    if [ "$rc" = 0 ]; then
      record "kernel bench" "ran (torch_kernels.py: $([ "$trc" = 0 ] && echo ran || echo "exit $trc, $(one_line "$WORK/logs/torch-kernels.out")"))"
      choose_variants
    else
      tail_of "$WORK/logs/kernel-bench.out"
      fail "kernel bench" "exit $rc"
    fi
  fi
fi

# --- phases 3 and 4: timing GPT-2 small, fp32 then bf16 ----------------------

# Phase 3 times every fp32 row (shardc, then PyTorch), phase 4 the bf16 ones:
# the fp32 rows come first, and the bf16 ones get what is left.
fpt_of() { echo $((6 * $1 + 6 * G_LAYERS * G_SEQ * G_HIDDEN)); }
G_PARAMS=124475904
if model_file gpt2 "${BATCHES%% *}"; then
  G_PARAMS=$(head -n 1 "$MODEL" | sed -E 's/.*: ([0-9]+) parameters.*/\1/')
fi
declare -A FOUND=() # timing key -> the batch that ran
ROWS="$WORK/rows"
ROW_N=0
# next_row KEY: sets ROWF to the next row file (the table keeps this order).
ROWF=""
next_row() { ROW_N=$((ROW_N + 1)); ROWF="$ROWS/$(printf '%02d' "$ROW_N")-$1.json"; }
prec_of() { case "$1" in *+bf16 | *-bf16) echo bf16 ;; *) echo fp32 ;; esac; }
of_prec() { # of_prec PREC WORDS: those of WORDS ("zero3+bf16", "compile-bf16") of PREC
  local w out=""
  for w in $2; do [ "$(prec_of "$w")" = "$1" ] && out="$out${out:+ }$w"; done
  echo "$out"
}
shardc_name() { echo "shardc ${1%%+*} $(prec_of "$1")"; }
declare -A PREC_DESC=([fp32]="fp32 (TF32 GEMMs)"
  [bf16]="bf16 mixed precision (bf16 compute, f32 masters, f32 reduce)")

# time_shardc PREC: the shardc rows of TIME_VARIANTS of precision PREC.
time_shardc() {
  local prec=$1 variants batches peak budget phase_no key batch exe ledger predicted
  local lacking t log rc smi done_steps why flags
  local -a tried
  variants=$(of_prec "$prec" "$TIME_VARIANTS")
  [ -z "$variants" ] && return 0
  if [ "$prec" = bf16 ]; then
    batches=$BF16_BATCHES peak=$BF16_PEAK_TFLOPS budget=$SHARDC_BF16_BUDGET phase_no=4
  else
    batches=$BATCHES peak=$PEAK_TFLOPS budget=$SHARDC_BUDGET phase_no=3
  fi
  phase "$phase_no/5 ${PREC_DESC[$prec]}: shardc target=cuda, GPT-2 small (124M, T=$G_SEQ), world size 1, $variants, batches tried: $batches (budget ${budget}s)"
  if ! wants shardc; then
    for key in $variants; do next_row "shardc-$key"; row "$ROWF" "$(shardc_name "$key")" "skipped (PHASES)"; done
    say "skipped (PHASES=$PHASES)"
    return 0
  elif [ "${CUDA_TARGET%% *}" != yes ]; then
    for key in $variants; do next_row "shardc-$key"; row "$ROWF" "$(shardc_name "$key")" "n/a: no target=cuda"; done
    say "target=cuda is not available: $CUDA_TARGET"
    return 0
  elif [ "$HAVE_GPU" != 1 ] && [ "$PREPARE" != 1 ]; then
    for key in $variants; do next_row "shardc-$key"; row "$ROWF" "$(shardc_name "$key")" "no GPU: skipped"; done
    say "no GPU: skipped timing shardc $variants (run with --prepare to compile their executables for a device run)"
    return 0
  fi
  [ "$HAVE_GPU" != 1 ] && budget=$PREPARE_BUDGET
  local shardc_end=$((SECONDS + $(cap "$budget")))
  for key in $variants; do
    next_row "shardc-$key"
    local rowf=$ROWF name
    name=$(shardc_name "$key")
    flags="--strategy ${key%%+*}$([ "$prec" = bf16 ] && echo " --param-dtype bf16")"
    tried=()
    for batch in $batches; do
      if [ $((shardc_end - SECONDS)) -lt 10 ]; then tried+=("b$batch: out of time"); break; fi
      if ! get_exe gpt2 cuda "$key" "$batch"; then
        tried+=("b$batch: $EXE_WHY")
        case "$EXE_WHY" in target=cuda* | "not prepared"*) ;; *) FAILED=1 ;; esac
        continue
      fi
      exe=$EXE
      ledger="$BUNDLE/ledger/gpt2-cuda-$key-b$batch.json"
      predicted=$(json_get "$ledger" 'd["per_rank"]["peak_bytes"]')
      if [ "$HAVE_GPU" != 1 ]; then
        tried+=("b$batch: built, predicted peak $(awk -v b="${predicted:-0}" 'BEGIN { printf "%.1f", b / 1e9 }') GB")
        continue
      fi
      if [ -n "$predicted" ] && awk -v p="$predicted" -v m="$GPU_MEM_MB" 'BEGIN { exit !(p > 0.97 * m * 1048576) }'; then
        tried+=("b$batch: skipped, predicted peak $(awk -v b="$predicted" 'BEGIN { printf "%.1f", b / 1e9 }') GB > the GPU's")
        continue
      fi
      lacking=$(missing_libs "$exe")
      if [ -n "$lacking" ]; then tried+=("b$batch: cannot start: no $lacking"); break; fi
      t=$((shardc_end - SECONDS))
      [ "$t" -gt "$SHARDC_ATTEMPT_BUDGET" ] && t=$SHARDC_ATTEMPT_BUDGET
      log="$WORK/logs/shardc-$key-b$batch"
      exe_cmd "$exe" "$prec"
      say "$key batch $batch: $((SHARDC_WARMUP + SHARDC_STEPS)) steps (limit ${t}s) ..."
      smi_start "$log.smi"
      run_limited "$t" "$log.out" "${EXE_CMD[@]}" --steps $((SHARDC_WARMUP + SHARDC_STEPS)) \
        --seed $TIME_SEED --log-json "$log.jsonl"
      rc=$?
      smi=$(smi_stop)
      done_steps=$(grep -c '"step"' "$log.jsonl" 2>/dev/null)
      done_steps=${done_steps:-0}
      pred_ledger "$ledger"
      if [ "$rc" = 0 ] || { [ "$rc" = 124 ] && [ "$done_steps" -gt "$SHARDC_WARMUP" ]; }; then
        # A run slower than its limit still counts the steps it finished.
        python3 "$HERE/compare.py" shardc-row --log "$log.jsonl" --name "$name" \
          --warmup "$SHARDC_WARMUP" --batch "$batch" --seq $G_SEQ --hidden $G_HIDDEN \
          --layers $G_LAYERS --params "$G_PARAMS" --peak-tflops "$peak" --precision "$prec" \
          ${smi:+--smi-gb "$smi"} --ledger "$PRED" --out "$rowf"
        if [ "$rc" = 124 ]; then
          python3 - "$rowf" "$done_steps" "$t" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
r["status"] = "ok (timed out after %ss: %s of the steps)" % (sys.argv[3], sys.argv[2])
json.dump(r, open(sys.argv[1], "w"))
EOF
        fi
        FOUND[$key]=$batch
        case "$(json_get "$rowf" 'd["status"]')" in FAILED*) FAILED=1 ;; esac
        tried+=("b$batch: ran$([ "$rc" = 124 ] && echo " $done_steps steps before the limit")")
        grep -E '^step ' "$log.out" | sed 's/^/     /' | head -n 12
        COMMANDS+=("shardc-gen gpt --layers $G_LAYERS --hidden $G_HIDDEN --heads $G_HEADS --vocab $G_VOCAB --pad-vocab $G_PAD_VOCAB --seq $G_SEQ --batch $batch > gpt2-b$batch.mlir")
        COMMANDS+=("shardc build gpt2-b$batch.mlir $flags --mesh 1 --target cuda -o gpt2-$key-b$batch")
        COMMANDS+=("$(run_env "$prec")./gpt2-$key-b$batch --steps $((SHARDC_WARMUP + SHARDC_STEPS)) --seed $TIME_SEED --log-json LOG   # median step_ms of steps $((SHARDC_WARMUP + 1))..$((SHARDC_WARMUP + SHARDC_STEPS))")
        # Where zero3's step goes: GPU time per kernel (--profile: events
        # around each call, so not in the timed run), for what to fuse next,
        # and its timeline (--trace, in logs.tar.gz: open it in Perfetto).
        t=$((shardc_end - SECONDS - 10))
        [ "$t" -gt "$SHARDC_PROFILE_BUDGET" ] && t=$SHARDC_PROFILE_BUDGET
        if [ "${key%%+*}" = zero3 ] && [ "$t" -ge 10 ]; then
          # Also: which of its GEMMs cuBLASLt fused (one line per shape).
          run_limited "$t" "$log.profile" env SHARDC_RT_CUDA_GEMM_EPILOGUE_LOG=1 \
            "${EXE_CMD[@]}" --steps 3 --seed $TIME_SEED --quiet --profile \
            --trace "$log.trace.json" --trace-steps 2:3
          sed -n '/^profile:/,$p' "$log.profile" | head -n 40 | sed 's/^/     /'
          grep '^shardc: gemm epilogue plan: ' "$log.profile" | sed 's/^shardc: gemm epilogue plan: /     epilogue plan: /' | head -n 20
          COMMANDS+=("$(run_env "$prec")./gpt2-$key-b$batch --steps 3 --seed $TIME_SEED --quiet --profile --trace TRACE.json --trace-steps 2:3   # the kernel table in run.log, the timeline in logs.tar.gz")
        fi
        break
      fi
      if [ "$rc" = 124 ]; then
        why="timed out after ${t}s, $done_steps steps"
      elif grep -qi "out of memory" "$log.out"; then
        why="out of memory"
      else
        why="exit $rc: $(one_line "$log.out")"
      fi
      tried+=("b$batch: $why")
      tail_of "$log.out" 6
    done
    say "$name: $(IFS=';'; echo "${tried[*]}")"
    if [ -z "${FOUND[$key]:-}" ]; then
      if [ "$HAVE_GPU" = 1 ]; then
        FAILED=1
        row "$rowf" "$name" "FAILED: $(IFS=';'; echo "${tried[*]}" | cut -c1-200)"
      else
        row "$rowf" "$name" "no GPU: skipped (prepared: $(IFS=';'; echo "${tried[*]}" | cut -c1-200))"
      fi
    fi
  done
}

# PyTorch: fp32 modes (eager, compile, fsdp2) at the batch shardc's fp32 rows
# ran; bf16 mixed precision modes (compile-bf16: autocast; fsdp2-bf16:
# MixedPrecisionPolicy) at the batch its bf16 rows ran.
declare -A TORCH_NAME=([eager]="torch eager fp32" [compile]="torch.compile fp32"
  [fsdp2]="torch FSDP2 fp32" [compile-bf16]="torch.compile bf16" [fsdp2-bf16]="torch FSDP2 bf16")
declare -A TORCH_BUDGET_OF=([eager]=$TORCH_EAGER_BUDGET [compile]=$TORCH_COMPILE_BUDGET
  [fsdp2]=$TORCH_FSDP2_BUDGET [compile-bf16]=$TORCH_COMPILE_BF16_BUDGET
  [fsdp2-bf16]=$TORCH_FSDP2_BF16_BUDGET)
TORCH_VERSION="" TORCH_STATE="" # TORCH_STATE: ok | none, asked once
torch_available() {
  if [ -z "$TORCH_STATE" ]; then
    TORCH_STATE=none
    TORCH_VERSION=$(timeout 60 python3 -c 'import torch; print(torch.__version__)' 2>/dev/null) &&
      TORCH_STATE=ok
  fi
  [ "$TORCH_STATE" = ok ]
}
TORCH_PORT=29517
# time_torch PREC: the PyTorch rows of TORCH_MODES of precision PREC.
time_torch() {
  local prec=$1 modes batches peak found tbatches b mode t log rc smi budgets="" phase_no=3
  modes=$(of_prec "$prec" "$TORCH_MODES")
  [ -z "$modes" ] && return 0
  if [ "$prec" = bf16 ]; then
    batches=$BF16_BATCHES peak=$BF16_PEAK_TFLOPS phase_no=4
    found="${FOUND[zero3+bf16]:-${FOUND[ddp+bf16]:-}}"
  else
    batches=$BATCHES peak=$PEAK_TFLOPS
    found="${FOUND[zero3]:-${FOUND[ddp]:-}}"
  fi
  if [ -n "$found" ]; then
    tbatches=$found
    for b in $batches; do [ "$b" -lt "$found" ] && tbatches="$tbatches,$b"; done
  else
    tbatches=$(echo "$batches" | tr ' ' ',')
  fi
  for mode in $modes; do budgets="$budgets${budgets:+, }$mode ${TORCH_BUDGET_OF[$mode]:-?}s"; done
  phase "$phase_no/5 ${PREC_DESC[$prec]}: PyTorch on the same model, batch ${found:-from $tbatches} (budgets: $budgets)"
  if ! wants torch; then
    for mode in $modes; do next_row "torch-$mode"; row "$ROWF" "${TORCH_NAME[$mode]:-torch $mode}" "skipped (PHASES)"; done
    say "skipped (PHASES=$PHASES)"
    return 0
  elif [ "$HAVE_GPU" != 1 ]; then
    for mode in $modes; do next_row "torch-$mode"; row "$ROWF" "${TORCH_NAME[$mode]:-torch $mode}" "no GPU: skipped"; done
    say "no GPU: skipped PyTorch $modes"
    return 0
  elif ! torch_available; then
    for mode in $modes; do next_row "torch-$mode"; row "$ROWF" "${TORCH_NAME[$mode]:-torch $mode}" "n/a: python3 has no torch"; done
    FAILED=1
    say "python3 cannot import torch"
    return 0
  fi
  say "torch $TORCH_VERSION"
  for mode in $modes; do
    next_row "torch-$mode"
    local rowf=$ROWF
    if [ -z "${TORCH_NAME[$mode]:-}" ]; then
      FAILED=1
      row "$rowf" "torch $mode" "FAILED: unknown mode (TORCH_MODES)"
      continue
    fi
    t=$(cap "${TORCH_BUDGET_OF[$mode]}")
    log="$WORK/logs/torch-$mode"
    local -a targs=(--mode "$mode" --batches "$tbatches" --layers "$G_LAYERS" --hidden "$G_HIDDEN"
      --heads "$G_HEADS" --vocab "$G_VOCAB" --pad-vocab "$G_PAD_VOCAB" --seq "$G_SEQ" --warmup "$TORCH_WARMUP"
      --steps "$TORCH_STEPS" --peak-tflops "$peak")
    say "${TORCH_NAME[$mode]} (limit ${t}s) ..."
    smi_start "$log.smi"
    # A port of its own for each run: the last one's may linger in TIME_WAIT.
    TORCH_PORT=$((TORCH_PORT + 1))
    run_limited "$t" "$log.out" env PYTHONUNBUFFERED=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$TORCH_PORT \
      RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 python3 "$HERE/torch_gpt.py" "${targs[@]}" --out "$rowf"
    rc=$?
    smi=$(smi_stop)
    [ -s "$rowf" ] || row "$rowf" "${TORCH_NAME[$mode]}" "FAILED: no result"
    python3 - "$rowf" "$rc" "$t" "${smi:-}" <<'EOF'
import json, sys
path, rc, limit, smi = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
r = json.load(open(path))
if rc == 124:
    r["status"] = "TIMEOUT after %ss (%s)" % (limit, r.get("status", ""))
if smi and r.get("status", "").startswith("ok"):
    r["smi_gb"] = float(smi)
json.dump(r, open(path, "w"))
EOF
    COMMANDS+=("python3 bench/gpu/torch_gpt.py ${targs[*]} --out ROW.json")
    if [ "$rc" = 0 ]; then
      grep -E "^${TORCH_NAME[$mode]}: batch" "$log.out" | sed 's/^/     /'
    else
      FAILED=1
      tail_of "$log.out" 10
      say "${TORCH_NAME[$mode]}: $([ "$rc" = 124 ] && echo "timed out after ${t}s" || echo "exit $rc")"
    fi
  done
}

# rerun_row ROWF NAME PREC PEAK BATCH LOG [VAR=VALUE...]: runs EXE_CMD
# (exe_cmd's) for the timed steps in the environment given, into LOG.out
# and LOG.jsonl, and makes ROWF its table row (MFU against PEAK); a failed
# run makes the row and the run FAILED, and returns 1.
rerun_row() {
  local rowf=$1 name=$2 prec=$3 peak=$4 batch=$5 log=$6 t rc
  shift 6
  t=$(cap "$SHARDC_ATTEMPT_BUDGET")
  say "$name batch $batch: $((SHARDC_WARMUP + SHARDC_STEPS)) steps (limit ${t}s) ..."
  run_limited "$t" "$log.out" env "$@" "${EXE_CMD[@]}" \
    --steps $((SHARDC_WARMUP + SHARDC_STEPS)) --seed $TIME_SEED --log-json "$log.jsonl"
  rc=$?
  if [ "$rc" != 0 ]; then
    tail_of "$log.out" 6
    row "$rowf" "$name" "FAILED: $([ "$rc" = 124 ] && echo "timed out after ${t}s" || echo "exit $rc: $(one_line "$log.out")")"
    FAILED=1
    return 1
  fi
  python3 "$HERE/compare.py" shardc-row --log "$log.jsonl" --name "$name" \
    --warmup "$SHARDC_WARMUP" --batch "$batch" --seq $G_SEQ --hidden $G_HIDDEN \
    --layers $G_LAYERS --params "$G_PARAMS" --peak-tflops "$peak" --precision "$prec" \
    --out "$rowf"
}

# check_loss ROWF WHAT LINE LOG REF_LOG RTOL WHY: the loss on line LINE of
# LOG within RTOL of REF_LOG's, relative to the reference's, is recorded as
# check WHAT; otherwise WHAT fails and ROWF's status is "FAILED: WHY".
check_loss() {
  local rowf=$1 what=$2 line=$3 loss ref_loss rtol=$6 why=$7
  loss=$(json_line_get "$4" "$line" 'd["loss"]')
  ref_loss=$(json_line_get "$5" "$line" 'd["loss"]')
  if [ -n "$loss" ] && [ -n "$ref_loss" ] &&
    awk -v a="$ref_loss" -v b="$loss" -v r="$rtol" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= r * (a < 0 ? -a : a)) }'; then
    record "$what" "ok ($loss against $ref_loss, within $rtol relative)"
  else
    fail "$what" "${loss:-none} against ${ref_loss:-none} (tolerance $rtol relative)"
    python3 - "$rowf" "$why" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
r["status"] = "FAILED: " + sys.argv[2]
json.dump(r, open(sys.argv[1], "w"))
EOF
  fi
}

# The other attention: time_other_attention PREC runs zero3's executable of
# precision PREC at its timed batch once more with the attention the timed
# rows did not use (timed with cuDNN's: the flash kernels; with the flash
# kernels, SHARDC_ATTENTION=flash, the default: GEMMs over the full T x T
# scores, SHARDC_ATTENTION=gemm; with GEMMs, where the kernel test's flash
# checks failed: the flash kernels), so that the table shows both, and
# checks its first loss against the timed run's (same executable, seed and
# data): bf16 within 1e-2 relative (bf16 noise: ~2.5 ulps of 2^-8); fp32,
# whose fused kernels run on TF32 tensor cores as its GEMMs do, within 1e-3
# (~2 ulps of TF32's 2^-11). A broken kernel gives a NaN or a loss off by
# far more.
time_other_attention() {
  local prec=$1 key peak rtol main other
  if [ "$prec" = bf16 ]; then
    key=zero3+bf16 peak=$BF16_PEAK_TFLOPS rtol=1e-2
  else
    key=zero3 peak=$PEAK_TFLOPS rtol=1e-3
  fi
  # cuDNN runs bf16 only: fp32's rows run the flash kernels under cudnn.
  main=${SHARDC_ATTENTION:-flash}
  [ "$prec" = fp32 ] && [ "$main" = cudnn ] && main=flash
  case "$main" in cudnn) other=flash ;; flash) other=gemm ;; *) other=flash ;; esac
  next_row "shardc-$key+$other-attn"
  local rowf=$ROWF name="shardc zero3 $prec $other-attn" batch=${FOUND[$key]:-}
  [ "$prec" = fp32 ] && phase "4/5 last: ${PREC_DESC[fp32]}: $name (SHARDC_ATTENTION=$other), in what is left of the budget"
  local log t
  case " $TIME_VARIANTS " in *" $key "*) ;; *) row "$rowf" "$name" "skipped (TIME_VARIANTS)"; return 0 ;; esac
  if [ "$HAVE_GPU" != 1 ]; then row "$rowf" "$name" "no GPU: skipped"; return 0; fi
  if [ -z "$batch" ]; then row "$rowf" "$name" "n/a: $(shardc_name "$key") did not run"; return 0; fi
  if [ "$prec" = fp32 ] && [ "${SHARDC_TF32:-1}" = 0 ]; then
    row "$rowf" "$name" "skipped: SHARDC_TF32=0 (fp32 attention is GEMMs either way: the f32 fused kernels run on TF32 tensor cores)"
    return 0
  fi
  if [ "$other" = flash ] && ! all_flash_checks_passed; then
    row "$rowf" "$name" "skipped: the kernel test's flash checks did not pass"
    return 0
  fi
  get_exe gpt2 cuda "$key" "$batch" || { row "$rowf" "$name" "FAILED: $EXE_WHY"; FAILED=1; return 0; }
  exe_cmd "$EXE" "$prec"
  log="$WORK/logs/shardc-$key+$other-attn-b$batch"
  rerun_row "$rowf" "$name" "$prec" "$peak" "$batch" "$log" SHARDC_ATTENTION=$other || return 0
  # Same executable, seed and data: the first step's loss is the timed
  # run's up to the precision's rounding.
  check_loss "$rowf" "$prec $other vs $main attention first loss" 1 "$log.jsonl" \
    "$WORK/logs/shardc-$key-b$batch.jsonl" "$rtol" "first loss differs from the $main attention's"
  grep -E '^step ' "$log.out" | sed 's/^/     /' | head -n 12
  t=$(cap "$SHARDC_PROFILE_BUDGET")
  if [ "$t" -ge 10 ]; then
    run_limited "$t" "$log.profile" env SHARDC_ATTENTION=$other "${EXE_CMD[@]}" --steps 3 --seed $TIME_SEED --quiet --profile
    sed -n '/^profile:/,$p' "$log.profile" | head -n 40 | sed 's/^/     /'
  fi
  COMMANDS+=("SHARDC_ATTENTION=$other $(run_env "$prec")./gpt2-$key-b$batch --steps $((SHARDC_WARMUP + SHARDC_STEPS)) --seed $TIME_SEED --log-json LOG")
}

# ZeRO-3 bf16 with the optimizer state and the params in host memory
# (--offload-optimizer true --offload-params true: FSDP2's
# CPUOffloadPolicy), at the batch its plain row ran, in what is left of the
# budget: what offloading costs per step, with the device's peak and the
# bytes copied between host and device measured against the ledger, and its
# second loss (after one update on the host) against the plain run's within
# bf16 rounding. (--prepare: built for the first bf16 batch.)
time_offload() {
  local key=zero3+bf16+offload plain=zero3+bf16 name="shardc zero3 bf16 offload"
  next_row "shardc-$key"
  local rowf=$ROWF batch=${FOUND[zero3+bf16]:-} log
  phase "4/5 last: $name (the optimizer state and params in host memory), in what is left of the budget"
  case " $TIME_VARIANTS " in *" $plain "*) ;; *) row "$rowf" "$name" "skipped (TIME_VARIANTS)"; return 0 ;; esac
  if [ "$HAVE_GPU" != 1 ]; then
    if [ "$PREPARE" = 1 ] && [ "${CUDA_TARGET%% *}" = yes ]; then
      batch=${BF16_BATCHES%% *}
      if get_exe gpt2 cuda "$key" "$batch"; then say "prepared: $name batch $batch"; else say "$name: $EXE_WHY"; fi
    fi
    row "$rowf" "$name" "no GPU: skipped"
    return 0
  fi
  if [ -z "$batch" ]; then row "$rowf" "$name" "n/a: $(shardc_name "$plain") did not run"; return 0; fi
  get_exe gpt2 cuda "$key" "$batch" || { row "$rowf" "$name" "n/a: $EXE_WHY"; return 0; }
  exe_cmd "$EXE" bf16
  log="$WORK/logs/shardc-$key-b$batch"
  rerun_row "$rowf" "$name" bf16 "$BF16_PEAK_TFLOPS" "$batch" "$log" || return 0
  local copies
  copies=$(json_line_get "$log.jsonl" "\$" '"%d (predicted %d)" % (d["host_copy_bytes"], d["predicted_host_copy_bytes"])')
  say "host copies per step: ${copies:-none}"
  # The second step's loss follows one update: on the host here, on the
  # device in the plain run; the same maths up to rounding.
  check_loss "$rowf" "bf16 offloaded vs plain second loss" 2 "$log.jsonl" \
    "$WORK/logs/shardc-$plain-b$batch.jsonl" 1e-2 "second loss differs from the plain run's"
  grep -E '^(@|step )' "$log.out" | sed 's/^/     /' | head -n 12
  COMMANDS+=("shardc build gpt2-b$batch.mlir --strategy zero3 --param-dtype bf16 --offload-optimizer true --offload-params true --mesh 1 --target cuda -o gpt2-$key-b$batch")
  COMMANDS+=("$(run_env bf16)./gpt2-$key-b$batch --steps $((SHARDC_WARMUP + SHARDC_STEPS)) --seed $TIME_SEED --log-json LOG   # median step_ms of steps $((SHARDC_WARMUP + 1))..$((SHARDC_WARMUP + SHARDC_STEPS))")
}

time_shardc fp32
time_torch fp32
time_shardc bf16
time_other_attention bf16
time_torch bf16
# Last: the fp32 row of the other attention, then the offloaded row, get
# what the rows above left.
time_other_attention fp32
time_offload

# --- --prepare: the bundle a device run carries -----------------------------

prepare_bundle() {
  phase "prepare: bundle for a device run"
  if [ "$SHARDC_OK" != 1 ]; then
    FAILED=1
    say "cannot prepare: shardc does not run here"
    return
  fi
  mkdir -p "$BUNDLE/bin" "$BUNDLE/lib/mpi" "$BUNDLE/lib/blas"
  [ -x "$BUILD/bin/shardc-rt-cudakernels" ] && cp "$BUILD/bin/shardc-rt-cudakernels" "$BUNDLE/bin/"
  [ -x "$BUILD/bin/shardc-rt-kernel-bench" ] &&
    gzip -c "$BUILD/bin/shardc-rt-kernel-bench" >"$BUNDLE/bin/shardc-rt-kernel-bench.gz"
  # Shared libraries of OpenMPI and OpenBLAS that the executables and MPI's
  # components load: a device machine may have neither. CUDA, cuBLAS and
  # NCCL are not bundled (too large): the device's CUDA or PyTorch's wheels
  # provide them.
  local ompi_pkglib ompi_data lib
  ompi_pkglib=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
  ompi_data=$(ompi_info --path pkgdatadir --parsable 2>/dev/null | sed -n 's/^path:pkgdatadir://p')
  ompi_pkglib=${ompi_pkglib:-/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3}
  ompi_data=${ompi_data:-/usr/share/openmpi}
  for lib in $( { ldd "$BUNDLE"/exe/* "$BUNDLE"/bin/* 2>/dev/null
    for f in "$ompi_pkglib"/*.so; do ldd "$f" 2>/dev/null; done; } |
    awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u); do
    case "$(basename "$lib")" in
    libmpi.so* | libopen-rte.so* | libopen-pal.so* | libhwloc.so* | libevent*.so* | \
      libmca_common_*.so* | libpmix.so* | libnuma.so* | libltdl.so*)
      cp -L "$lib" "$BUNDLE/lib/mpi/" ;;
    esac
  done
  # BLAS: OpenBLAS is 35 MiB, too much to carry; the CPU side (the check's
  # target=host run, the kernel test's reference) calls cblas_sgemm and
  # cblas_dgemm only, which the reference BLAS (Debian's libblas3, 0.4 MiB,
  # libc only) has too: it stands in under OpenBLAS's file name.
  rm -rf "$BUNDLE/lib/blas"
  mkdir -p "$BUNDLE/lib/blas"
  local refblas
  refblas=$(ls /usr/lib/x86_64-linux-gnu/blas/libblas.so.3 2>/dev/null || true)
  if [ -n "$refblas" ] && [ "$(nm -D "$refblas" 2>/dev/null | grep -c -E ' T cblas_[sd]gemm$')" = 2 ]; then
    cp -L "$refblas" "$BUNDLE/lib/blas/libopenblas.so.0"
    echo "reference BLAS ($refblas) standing in for OpenBLAS" >"$BUNDLE/lib/blas/KIND"
  else
    say "no reference BLAS with CBLAS here (libblas3): a device without libopenblas.so.0 uses the prepared CPU run, and cannot run the kernel test"
  fi
  # OpenMPI's components and help files, relocated with OPAL_PREFIX.
  rm -rf "$BUNDLE/ompi"
  local rel=${ompi_pkglib#/usr/}
  mkdir -p "$BUNDLE/ompi/usr/$(dirname "$rel")" "$BUNDLE/ompi/usr/share"
  cp -a "$ompi_pkglib" "$BUNDLE/ompi/usr/$rel"
  cp -a "$ompi_data" "$BUNDLE/ompi/usr/share/"
  # The executables differ mostly in their step: each carries the same
  # runtime and kernels (a fatbin each). An xz window wider than one
  # executable finds those across files where gzip's 32 KiB cannot: 64 MiB
  # (xz's default 8 MiB stopped finding them once the executables passed
  # 8 MiB: 23 of them, 192 MiB, took 60 MiB in it and take 3.8 in 64 MiB,
  # 2026-12-05). Python's lzma packs them and unpacks them where the run
  # needs them.
  local executables
  executables=$(ls "$BUNDLE/exe" | wc -l)
  rm -f "$BUNDLE/exe.tar.xz"
  if python3 -c 'import lzma, sys, tarfile
filters = [{"id": lzma.FILTER_LZMA2, "preset": 6, "dict_size": 64 << 20}]
with lzma.open(sys.argv[1], "w", filters=filters) as xz, \
    tarfile.open(fileobj=xz, mode="w|") as t:
    t.add(sys.argv[2], arcname="exe")' "$BUNDLE/exe.tar.xz" "$BUNDLE/exe"; then
    rm -rf "$BUNDLE/exe"
  else
    rm -f "$BUNDLE/exe.tar.xz"
    say "cannot pack $BUNDLE/exe: carried unpacked"
  fi
  echo "prepared $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n) ($(. /etc/os-release && echo "$PRETTY_NAME")), tree $TREE_FP" >"$BUNDLE/INFO"
  local mib tree
  mib=$(du -sm "$BUNDLE" | cut -f1)
  tree=$(git -C "$ROOT" ls-files -z | (cd "$ROOT" && xargs -0 du -cm --apparent-size 2>/dev/null) | tail -n 1 | cut -f1)
  say "bundle: $BUNDLE, ${mib} MiB ($executables executables, $(ls "$BUNDLE/lib/mpi" | wc -l) MPI libraries, BLAS: $(cat "$BUNDLE/lib/blas/KIND" 2>/dev/null || echo none)); with the working tree (${tree:-?} MiB) it must stay under 64 MiB"
  if [ $((mib + ${tree:-0})) -ge 64 ]; then
    say "the bundle and the working tree take $((mib + ${tree:-0})) MiB: more than the device call carries (64 MiB)"
    exit 1
  fi
  say "device call: run(command=\"SHARDC_BUILD_DIR=${BUILD#"$ROOT"/} bench/gpu/run.sh\", carry=[\"${BUNDLE#"$ROOT"/}\"], timeout_s=$((TOTAL_BUDGET - PREPARE_BUDGET + 30)))"
}
[ "$PREPARE" = 1 ] && prepare_bundle

# --- phase 5: the table -----------------------------------------------------

phase "5/5 results"
NOW=$(date -u '+%Y-%m-%d %H:%M UTC')
FPT=$(fpt_of "$G_PARAMS")
NOTES_OUT=(
  "GPU: $GPU_DESC${TORCH_VERSION:+; torch $TORCH_VERSION}"
  "model: GPT-2 small, $G_PARAMS parameters, T=$G_SEQ, world size 1; AdamW, fused in torch; vocabulary $G_VOCAB padded to a multiple of $G_PAD_VOCAB (wte and LM head of $(( (G_VOCAB + G_PAD_VOCAB - 1) / G_PAD_VOCAB * G_PAD_VOCAB )) rows) in both, as llm.c and nanoGPT: shardc's loss counts $G_VOCAB classes, torch's softmax runs over every row as nanoGPT's does"
  "fp32 rows: fp32 params, activations and gradients, TF32 GEMMs (shardc: default SHARDC_TF32; torch: matmul precision high); torch counterparts: eager, torch.compile, FSDP2 (fully_shard per block and root)"
  "bf16 rows: mixed precision, bf16 params' copies, activations and GEMMs (bf16 tensor cores, f32 accumulation) with f32 master weights and optimizer state, f32 gradient reduction and f32 loss: shardc --param-dtype bf16 (reduce dtype f32) = FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32); torch counterparts: torch.compile bf16 = torch.autocast(cuda, bf16) around forward and loss over fp32 params; torch FSDP2 bf16 = fully_shard with MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)"
  "MFU = tokens/s x FLOPs/token / peak: fp32 rows / ${PEAK_TFLOPS} TFLOP/s (dense TF32 peak), bf16 rows / ${BF16_PEAK_TFLOPS} TFLOP/s (dense BF16 peak): $PEAK_SOURCE"
  "FLOPs/token = 6N + 6LTC (llm.c) = $(awk -v f="$FPT" 'BEGIN { printf "%.1f", f / 1e6 }') MFLOP, N = $G_PARAMS = every parameter counted once (the tied wte once with its padding rows, wpe included), L=$G_LAYERS T=$G_SEQ C=$G_HIDDEN"
  "ms/step: median over the steps after the warm-up (shardc $SHARDC_WARMUP + $SHARDC_STEPS, torch $TORCH_WARMUP + $TORCH_STEPS), host clock around a synchronised step; batches tried largest first, fp32 $BATCHES, bf16 $BF16_BATCHES; torch at the batch shardc's rows of the same precision ran"
  "pred ms: the ledger's predicted step on this GPU's machine, $PRED_MACHINE${PRED_FALLBACK:+ (but h200 for rows whose bundle has no $PRED_MACHINE ledger)} (shardc build --machine $PRED_MACHINE; h200 for a GPU that is no H100 or A100: a roofline whose kernel efficiencies were measured on an H200 on 2026-12-04, lookupMachine in lib/Dialect/Dist/Analysis/Timeline.cpp)"
  "peak GB (10^9 B): shardc = measured allocator high-water mark / the ledger's prediction; torch = torch.cuda.max_memory_allocated; work GB = shardc's kernels' workspaces (cuBLAS's, cuBLASLt's, attention's, cuDNN's; outside the allocator and the ledger: the step line's workspace); smi GB = the largest nvidia-smi memory.used sampled during the run (whole process: CUDA context, cuBLAS workspace, caches)"
  "shardc GEMM epilogues (cuBLASLt bias/GELU/GELU-derivative fusion) in the timed runs: ${SHARDC_GEMM_EPILOGUES:-on}"
  "world size 1: shardc folds every collective over one rank away (a unit reads its params' storage, no DDP bucket copies: --shardc-shard step 7); torch FSDP2 at world size 1 still runs its all-gathers and reduce-scatters"
  "shardc attention in the timed runs: ${SHARDC_ATTENTION:-flash} (cudnn: bf16 through cuDNN's fused attention, runtime/cuda/CudnnAttention.cpp, fp32 as flash; flash: the fused kernels of runtime/cuda/FlashForward.cu and FlashBackward.cu, bf16 tensor cores for bf16, TF32 for fp32; gemm: GEMMs over the full T x T scores); the *-attn rows run another (cudnn: flash; flash: gemm)"
)
for note in "${NOTES[@]}"; do NOTES_OUT+=("note: $note"); done
for note in "${NOTES_OUT[@]}"; do say "$note"; done
echo
for line in "${CHECK_LINES[@]}"; do say "$line"; done
ROW_FILES=$(ls "$ROWS"/*.json 2>/dev/null)
if [ -n "$OUTDIR" ]; then
  # shellcheck disable=SC2086
  python3 - "$OUTDIR/rows.json" $ROW_FILES <<'EOF'
import json, sys
json.dump([json.load(open(p)) for p in sys.argv[2:]], open(sys.argv[1], "w"), indent=1)
EOF
fi
# Append to bench/RESULTS.md when a GPU ran (a dry run records nothing).
if [ "$HAVE_GPU" = 1 ]; then
  entry="$WORK/RESULTS-entry.md"
  {
    echo
    echo "## $NOW: $GPU_DESC"
    echo
    echo "- verdict: $([ "$FAILED" = 0 ] && echo "PASS" || echo "FAIL") (bench/gpu/run.sh, tree $TREE_FP${BUNDLE_FP:+, bundle: $(sed -n 1p "$BUNDLE/INFO" 2>/dev/null)})"
    echo "- machine: $(uname -n), $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1); nvcc ${NVCC:+$("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')}"
    for note in "${NOTES_OUT[@]}"; do echo "- $note"; done
    echo "- checks:"
    for line in "${CHECK_LINES[@]}"; do echo "  - $line"; done
    echo "- commands:"
    for c in "${COMMANDS[@]}"; do echo "  - \`$c\`"; done
    echo
    if [ -s "$WORK/logs/kernels.md" ]; then
      cat "$WORK/logs/kernels.md"
      echo
    fi
    # shellcheck disable=SC2086
    python3 "$HERE/compare.py" table --markdown $ROW_FILES
  } >"$entry"
  if [ -f "$ROOT/bench/RESULTS.md" ]; then
    cat "$entry" >>"$ROOT/bench/RESULTS.md"
    say "appended this run to bench/RESULTS.md"
  fi
  [ -n "$OUTDIR" ] && cp "$entry" "$OUTDIR/RESULTS-entry.md"
else
  say "bench/RESULTS.md: nothing appended (no GPU ran)"
fi
echo
echo "overall: $([ "$FAILED" = 0 ] && echo "PASS: everything that ran passed" || echo "FAIL") ($(elapsed)s of ${TOTAL_BUDGET}s)"
echo
# shellcheck disable=SC2086
python3 "$HERE/compare.py" table $ROW_FILES
exit "$FAILED"
