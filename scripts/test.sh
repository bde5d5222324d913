#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: once in a
# release build, once under AddressSanitizer + UndefinedBehaviorSanitizer (clang).
#   QFOLD_SKIP_SANITIZE=1  skip the sanitizer pass (quicker local runs)
#   QFOLD_SKIP_TSAN=1      skip the ThreadSanitizer step (the threaded tests only)
#   QFOLD_SKIP_FUZZ=1      skip the bounded fuzzing step (clang + libFuzzer, scripts/fuzz.sh)
#   QFOLD_SKIP_AARCH64=1   skip the aarch64 cross build and its tests under qemu
#   QFOLD_SKIP_WHEEL=1     skip python_wheel (pip install of a clean checkout, a second full build)
#   QFOLD_FUZZ_RUNS=N      inputs per fuzz target (default 20000, fixed seed)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/setup.sh"

# Each step's wall time, so a slow CI log tells where the time went.
step_start=$SECONDS
step_done() { echo "== $1 took $((SECONDS - step_start)) s (total $SECONDS s)"; step_start=$SECONDS; }

echo "== release build"
BUILD_DIR="$ROOT/build" QFOLD_SANITIZE=OFF build_qfold
step_done "release build"
skip_wheel=()
[ "${QFOLD_SKIP_WHEEL:-0}" = "1" ] && skip_wheel=(-E python_wheel)
# The tests are independent (shared inputs are ctest fixtures): one per core.
jobs="$(nproc 2>/dev/null || echo 2)"
(cd "$ROOT/build" && ctest -j "$jobs" --output-on-failure "${skip_wheel[@]}")
step_done "release tests"

if [ "${QFOLD_SKIP_AARCH64:-0}" != "1" ]; then
  # The NEON kernels: cross-built with g++-aarch64-linux-gnu, tested under
  # qemu-aarch64 at every Arm level against the reference kernels.
  echo "== aarch64 (cross build, tests under qemu)"
  HOST_QFOLD="$ROOT/build/cli/qfold" "$ROOT/scripts/test_aarch64.sh"
  step_done "aarch64"
fi

if [ "${QFOLD_SKIP_SANITIZE:-0}" != "1" ]; then
  # One sanitizer build serves both this pass and the fuzzing step below: clang,
  # ASan+UBSan at -O1, coverage instrumentation for libFuzzer (build-fuzz).
  echo "== ASan+UBSan build (clang, with the libFuzzer targets)"
  BUILD_DIR="$ROOT/build-fuzz" QFOLD_SANITIZE=ON QFOLD_FUZZ=ON build_qfold
  step_done "ASan+UBSan build"
  # detect_leaks: protobuf's arena keeps static allocations alive on purpose.
  # python_wheel builds its own release wheel and bench_quick only times the
  # release engines (it takes minutes under ASan): once, above, is enough.
  (cd "$ROOT/build-fuzz" && ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest -j "$jobs" --output-on-failure -E '^(python_wheel|bench_quick)$')
  step_done "ASan+UBSan tests"
fi

if [ "${QFOLD_SKIP_TSAN:-0}" != "1" ]; then
  # ThreadSanitizer on the tests that run threads against each other (the thread
  # pool's, two multi-threaded sessions of one model at once, conversions during
  # running sessions): only their target is built, which keeps the step to a few
  # minutes on 2 cores (docs/RELIABILITY.md has the measurement).
  echo "== ThreadSanitizer build (threaded tests)"
  cmake -S "$ROOT" -B "$ROOT/build-tsan" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DQFOLD_SANITIZE=thread -DQFOLD_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build "$ROOT/build-tsan" -j "$(nproc 2>/dev/null || echo 2)" --target qfold_thread_tests
  (cd "$ROOT/build-tsan" && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --output-on-failure -R '^threads_tsan$')
  step_done "ThreadSanitizer"
fi

if [ "${QFOLD_SKIP_FUZZ:-0}" != "1" ]; then
  # Bounded: builds build-fuzz (clang; already built by the sanitizer pass) and runs
  # each fuzz target for a fixed number of inputs;
  # any crash, sanitizer report, timeout or OOM fails the suite (see docs/RELIABILITY.md).
  # A fixed seed and input count, not a time bound (the path explored still varies
  # a little between runs: scripts/fuzz.sh); open-ended campaigns are
  # scripts/fuzz.sh with a time.
  echo "== fuzzing (${QFOLD_FUZZ_RUNS:-20000} inputs per target, seed 1)"
  QFOLD_FUZZ_RUNS="${QFOLD_FUZZ_RUNS:-20000}" "$ROOT/scripts/fuzz.sh" 0
  step_done "fuzzing"
fi
