#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) in build-fuzz (also the build
# whose tests scripts/test.sh runs under the sanitizers) and runs each
# one for SECONDS_PER_TARGET seconds (default 600) with -jobs=1, one target per core.
#   ./scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   QFOLD_FUZZ_RUNS=N  instead of a time bound, N inputs per target from a fixed
#                      seed (what scripts/test.sh uses); N/10 for fuzz_convert_run,
#                      which converts and runs each input. The seed fixes the
#                      mutations, not the path: libFuzzer keeps inputs by coverage,
#                      and coverage varies a little from run to run (address-space
#                      layout inside protobuf, thread scheduling), so two runs explore
#                      different inputs after the first few hundred. A long campaign
#                      before a merge is what keeps this step green.
#                      The seed corpora (tests/fuzz/seeds, every reproducer of
#                      docs/RELIABILITY.md among them) are replayed first.
# Corpora grow in build-fuzz/corpus/<target>/ (seeded from tests/fuzz/seeds and
# models/); anything found is saved as build-fuzz/crashes/<target>-crash-<sha1>
# (or -timeout-, -oom-, -leak-) and makes this script exit 1. Reproduce one with
#   build-fuzz/tests/fuzz/<target> build-fuzz/crashes/<file>
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECS="${1:-600}"
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(fuzz_qfm_loader fuzz_onnx_reader fuzz_shape_inference fuzz_npy
  fuzz_convert_run fuzz_capi)
BUILD="$ROOT/build-fuzz"

if ! command -v clang++ >/dev/null ||
  ! dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "install ok installed"; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clang libclang-rt-14-dev >/dev/null
fi

# The same build as scripts/test.sh's sanitizer pass (Release, QFOLD_SANITIZE=ON,
# QFOLD_FUZZ=ON, clang): after test.sh only the fuzz targets are left to link.
echo "== fuzz build ($BUILD)"
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DQFOLD_SANITIZE=ON -DQFOLD_FUZZ=ON >/dev/null
elif ! grep -q '^QFOLD_FUZZ:BOOL=ON' "$BUILD/CMakeCache.txt"; then
  echo "fuzz.sh: $BUILD was configured without QFOLD_FUZZ=ON; remove it and run again" >&2
  exit 1
fi
cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 2)" --target qfold_fuzzers qfold

PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || PY=python3
mkdir -p "$BUILD/corpus" "$BUILD/crashes" "$BUILD/logs"
if [ ! -f "$BUILD/corpus/.seeded" ]; then
  echo "== seeding corpora from models/"
  ASAN_OPTIONS=detect_leaks=0 "$PY" "$ROOT/tests/fuzz/make_seeds.py" --out "$BUILD/seeds" \
    --models "$ROOT/models" --qfold "$BUILD/cli/qfold"
  touch "$BUILD/corpus/.seeded"
fi

seed_dir() {
  case "$1" in
    fuzz_qfm_loader | fuzz_capi) echo qfm ;;
    fuzz_onnx_reader | fuzz_convert_run) echo onnx ;;
    fuzz_shape_inference) echo shape ;;
    fuzz_npy) echo npy ;;
  esac
}

# fuzz_one <target>: one bounded campaign; its report goes to logs/<target>/report,
# a failure also to logs/<target>/failed.
fuzz_one() {
  local t=$1 s rc=0 runs log bound
  s="$(seed_dir "$t")"
  mkdir -p "$BUILD/corpus/$t" "$BUILD/logs/$t"
  rm -f "$BUILD/logs/$t/failed"
  # -jobs=1 runs the fuzzer in one child whose output goes to fuzz-0.log.
  bound=(-max_total_time="$SECS")
  if [ -n "${QFOLD_FUZZ_RUNS:-}" ]; then
    runs="$QFOLD_FUZZ_RUNS"
    # Converts and runs every input at two thread counts: ~10x slower per input.
    [ "$t" = fuzz_convert_run ] && runs=$((runs / 10 > 0 ? runs / 10 : 1))
    bound=(-runs="$runs" -seed=1)
  fi
  {
    if [ -n "${QFOLD_FUZZ_RUNS:-}" ]; then echo "== $t for $runs runs, seed 1"; else echo "== $t for ${SECS}s"; fi
    (cd "$BUILD/logs/$t" && rm -f fuzz-0.log &&
      ASAN_OPTIONS=abort_on_error=0:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      "$BUILD/tests/fuzz/$t" -jobs=1 "${bound[@]}" -timeout=20 \
        -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1 \
        -artifact_prefix="$BUILD/crashes/$t-" \
        "$BUILD/corpus/$t" "$ROOT/tests/fuzz/seeds/$s" "$BUILD/seeds/$s" >/dev/null 2>&1) || rc=$?
    log="$BUILD/logs/$t/fuzz-0.log"
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|Done [0-9]+ runs" "$log" || true
    if [ "$rc" -ne 0 ] || grep -qE "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|SUMMARY:" "$log"; then
      echo "!! $t found a problem (exit $rc); log: $log"
      grep -E "ERROR|runtime error|SUMMARY|Test unit written|artifact_prefix|^converted model|^#[0-9]+ +in " "$log" | head -30
      # The reproducer itself, so a failure on another machine (CI) can be replayed here:
      #   base64 -d > repro <<< '...'; build-fuzz/tests/fuzz/<target> repro
      for f in $(sed -n "s/.*Test unit written to \(.*\)$/\1/p" "$log"); do
        [ -f "$f" ] && [ "$(stat -c %s "$f")" -le 65536 ] && echo "reproducer (base64): $(base64 -w0 "$f")"
      done
      touch "$BUILD/logs/$t/failed"
    fi
  } >"$BUILD/logs/$t/report" 2>&1
}

# The targets run side by side, one per core (each fuzzer is one process); their
# reports are printed in order at the end.
jobs_max="$(nproc 2>/dev/null || echo 2)"
for t in "${TARGETS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  fuzz_one "$t" &
done
wait
status=0
for t in "${TARGETS[@]}"; do
  cat "$BUILD/logs/$t/report"
  [ -f "$BUILD/logs/$t/failed" ] && status=1
done
exit $status
