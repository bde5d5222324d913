#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) in build-fuzz and runs each
# one in turn for SECONDS_PER_TARGET seconds (default 600) with -jobs=1.
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

if ! command -v clang++ >/dev/null; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clang libclang-rt-14-dev >/dev/null
fi

echo "== fuzz build ($BUILD)"
CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ -DQFOLD_FUZZ=ON >/dev/null
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

status=0
for t in "${TARGETS[@]}"; do
  s="$(seed_dir "$t")"
  mkdir -p "$BUILD/corpus/$t" "$BUILD/logs/$t"
  # -jobs=1 runs the fuzzer in one child whose output goes to fuzz-0.log.
  rc=0
  bound=(-max_total_time="$SECS")
  if [ -n "${QFOLD_FUZZ_RUNS:-}" ]; then
    runs="$QFOLD_FUZZ_RUNS"
    # Converts and runs every input at two thread counts: ~10x slower per input.
    [ "$t" = fuzz_convert_run ] && runs=$((runs / 10 > 0 ? runs / 10 : 1))
    bound=(-runs="$runs" -seed=1)
  fi
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
    status=1
  fi
done
exit $status
