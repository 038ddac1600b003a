#!/usr/bin/env bash
# Runs a command as a GPU machine without this project's toolchain would:
# inside a private mount namespace (root only; nothing outside it changes)
# where OpenMPI, OpenBLAS, the reference BLAS and LLVM/MLIR are hidden, so
# shardc cannot run and the executables find MPI and BLAS only in a prepared
# bundle. What bench/gpu/run.sh --prepare bundles was checked this way:
#
#   bench/gpu/simulate_device.sh env SHARDC_BUILD_DIR=build-dev \
#     PHASES=check,shardc,torch bench/gpu/run.sh
#
# (PHASES leaves the build out: dpkg still lists the hidden packages, so the
# build phase would try to build rather than take the bundle as on a device.)
set -euo pipefail
if [ "${1:-}" != --inside ]; then
  [ "$(id -u)" = 0 ] || { echo "simulate_device.sh: needs root (unshare -m)" >&2; exit 2; }
  [ $# -gt 0 ] || { echo "usage: simulate_device.sh COMMAND..." >&2; exit 2; }
  over=$(mktemp -d /tmp/simulate-device.XXXXXX)
  rc=0
  unshare -m --propagation private "$0" --inside "$over" "$@" || rc=$?
  rm -rf "$over" # the namespace, and its mounts, are gone
  exit "$rc"
fi
over=$2
shift 2
lib=/usr/lib/x86_64-linux-gnu
mkdir -p "$over/upper" "$over/work"
# An overlay over the library directory: deleting there writes whiteouts to
# $over/upper only; the real directory is its read-only lower layer.
mount -t overlay overlay -o "lowerdir=$lib,upperdir=$over/upper,workdir=$over/work" "$lib"
(cd "$lib" && rm -rf libmpi* libopen-rte* libopen-pal* libopenblas* openmpi \
  openblas-pthread blas libblas* liblapack* libhwloc* libevent* libpmix* pmix2 \
  libmca_common* libnuma* liboshmem*)
[ -d /usr/lib/llvm-22 ] && mount -t tmpfs none /usr/lib/llvm-22
[ -d /etc/openmpi ] && mount -t tmpfs none /etc/openmpi
echo "simulate_device: OpenMPI, BLAS and LLVM hidden in this namespace" >&2
"$@"
