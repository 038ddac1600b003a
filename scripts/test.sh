#!/usr/bin/env bash
# Installs what is missing, builds, runs every test, and ends with one line
# `N passed, M failed`. Exits non-zero on any failure.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

shardc_install_missing
shardc_build

log="$BUILD/test.log"
echo "== lit: $BUILD/test"
set +e
"$LLVM_PREFIX/bin/lit" -v "$BUILD/test" 2>&1 | tee "$log"
lit_status=${PIPESTATUS[0]}
set -e

passed=$(grep -cE '^(PASS|XFAIL): ' "$log" || true)
failed=$(grep -cE '^(FAIL|XPASS|UNRESOLVED|TIMEOUT): ' "$log" || true)
skipped=$(grep -cE '^UNSUPPORTED: ' "$log" || true)
if [ "$lit_status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  failed=1 # lit itself failed (a config error): never report green
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
