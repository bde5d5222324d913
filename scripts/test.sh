#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: once in a
# release build, once under AddressSanitizer + UndefinedBehaviorSanitizer.
#   QFOLD_SKIP_SANITIZE=1  skip the sanitizer pass (quicker local runs)
#   QFOLD_SKIP_FUZZ=1      skip the bounded fuzzing step (clang + libFuzzer, scripts/fuzz.sh)
#   QFOLD_FUZZ_SECONDS=N   seconds per fuzz target (default 45; 4 targets, run one at a time)
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

if [ "${QFOLD_SKIP_FUZZ:-0}" != "1" ]; then
  # Bounded: builds build-fuzz (clang) and runs each fuzz target for a fixed time;
  # any crash, sanitizer report, timeout or OOM fails the suite (see docs/RELIABILITY.md).
  echo "== fuzzing (${QFOLD_FUZZ_SECONDS:-45}s per target)"
  "$ROOT/scripts/fuzz.sh" "${QFOLD_FUZZ_SECONDS:-45}"
fi
