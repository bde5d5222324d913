#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: once in a
# release build, once under AddressSanitizer + UndefinedBehaviorSanitizer.
#   QFOLD_SKIP_SANITIZE=1  skip the sanitizer pass (quicker local runs)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/setup.sh"

echo "== release build"
BUILD_DIR="$ROOT/build" QFOLD_SANITIZE=OFF build_qfold
(cd "$ROOT/build" && ctest --output-on-failure)

if [ "${QFOLD_SKIP_SANITIZE:-0}" != "1" ]; then
  echo "== ASan+UBSan build"
  BUILD_DIR="$ROOT/build-asan" QFOLD_SANITIZE=ON build_qfold
  # detect_leaks: protobuf's arena keeps static allocations alive on purpose.
  (cd "$ROOT/build-asan" && ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure)
fi
