# Shared by scripts/test.sh, scripts/demo.sh and bench/: install what is
# missing, configure once, build incrementally. Source it; it sets ROOT and
# BUILD.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${SHARDC_BUILD_DIR:-$ROOT/build}"
LLVM_PREFIX=/usr/lib/llvm-22

# Debian 12 packages (see ../shared/PLATFORM.md).
SHARDC_PACKAGES=(build-essential cmake ninja-build lld python3
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools libzstd-dev
  libopenmpi-dev openmpi-bin libopenblas-dev)

shardc_install_missing() {
  local missing=()
  for pkg in "${SHARDC_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" ||
      missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "== installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

shardc_build() {
  if [ ! -f "$BUILD/build.ninja" ]; then
    echo "== configuring $BUILD"
    cmake -G Ninja -S "$ROOT" -B "$BUILD" \
      -DMLIR_DIR="$LLVM_PREFIX/lib/cmake/mlir" \
      -DLLVM_EXTERNAL_LIT="$LLVM_PREFIX/bin/lit" \
      -DCMAKE_BUILD_TYPE=Release -DMLIR_LINK_MLIR_DYLIB=ON \
      -DLLVM_USE_LINKER=lld >"$BUILD.configure.log" 2>&1 ||
      { cat "$BUILD.configure.log"; return 1; }
  fi
  echo "== building"
  ninja -C "$BUILD" all
}

# For bench/ scripts: installs and builds (output to stderr), then sets bin
# (the built tools) and work (a scratch directory removed on exit).
shardc_bench_setup() {
  shardc_install_missing >&2
  shardc_build >&2
  bin="$BUILD/bin"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
}

# The time section of a bench: its header (what runs, "zero3 on 2 ranks";
# $ROUNDS runs of $STEPS steps, the builds taking turns; the machine's load)
# and the small GPT it times, written to $work/small.mlir.
shardc_bench_small_gpt() {
  echo
  echo "# time: CPU executable, gpt 4 layers, hidden 256, seq 128, batch 8, $1,"
  echo "#   median over $ROUNDS runs x $STEPS steps after a warm-up each, the builds taking"
  echo "#   turns; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
  "$bin/shardc-gen" gpt --layers 4 --hidden 256 --heads 4 --seq 128 --batch 8 \
    >"$work/small.mlir"
}
