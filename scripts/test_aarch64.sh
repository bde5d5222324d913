#!/usr/bin/env bash
# Cross-builds the runtime, the unit tests and the C API tests/example for 64-bit
# Arm Linux (cmake/toolchains/aarch64-linux-gnu.cmake) and runs them under
# qemu-user:
#   1. CPU feature detection and QFOLD_ISA on four CPU models: cortex-a53 and
#      cortex-a72 (Armv8.0 NEON, no dotprod: neon), neoverse-n1 (dotprod:
#      neondot), max (dotprod + i8mm: neoni8mm), and the kernel variant each
#      family picks there (QFOLD_TEST_KERNELS: "family=variant" pairs the
#      default kernel configuration must hold);
#   2. the kernel tests (tc 'kernels:*') under -cpu max, which compare the
#      kernel configuration of every named feature set (reference, neon,
#      neondot, neoni8mm) with the reference kernels byte for byte (the float
#      ones, 'kernels f32:*', within their tolerance, also on cortex-a53);
#   3. the whole unit suite at every level (QFOLD_ISA=reference and neoni8mm
#      under -cpu max, neon on the Armv8.0 cortex-a72, where a dotprod
#      instruction would trap, neondot on the dotprod-only neoverse-n1), so the op tests
#      run through each level's prepared kernels (3-6 minutes each under qemu);
#   4. the fp16 precision's kernels (tc 'kernels fp16:*') on the CPU models
#      with Armv8.2 FEAT_FP16 (max, cortex-a76, neoverse-n1), which must pick
#      the neonfp16 variant and match its emulation, and on the Cortex-A72
#      (none), where fp16 mode must leave the fp32 kernels;
#   5. the C API tests, and the C/C++ examples on a model converted by the
#      host's CLI when a host build exists (BUILD_DIR of scripts/test.sh).
# The qemu runs go in parallel, one per core, their logs printed in order at the end.
# Speed is not measured: qemu emulates the vector instructions one by one.
# Needs g++-aarch64-linux-gnu and qemu-user (scripts/setup.sh installs them).
#   AARCH64_BUILD_DIR  cross build directory (default: build-aarch64)
#   HOST_QFOLD         host qfold CLI for step 4 (default: build/cli/qfold)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${AARCH64_BUILD_DIR:-$ROOT/build-aarch64}"
HOST_QFOLD="${HOST_QFOLD:-$ROOT/build/cli/qfold}"
SYSROOT=/usr/aarch64-linux-gnu

for tool in aarch64-linux-gnu-g++ aarch64-linux-gnu-gcc qemu-aarch64 cmake ninja; do
  if ! command -v "$tool" >/dev/null; then
    echo "test_aarch64: $tool not found (install g++-aarch64-linux-gnu and qemu-user," \
      "e.g. through scripts/setup.sh)" >&2
    exit 1
  fi
done

echo "== aarch64 cross build in $BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchains/aarch64-linux-gnu.cmake" \
  -DQFOLD_RUNTIME_ONLY=ON -DQFOLD_BUILD_TESTS=ON -DQFOLD_BUILD_EXAMPLES=ON >/dev/null
cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 2)" \
  --target qfold_unit_tests qfold_capi_tests classify classify_cpp

UNIT="$BUILD/tests/qfold_unit_tests"
LOGS="$BUILD/qemu-logs"
rm -rf "$LOGS"
mkdir -p "$LOGS"
JOBS="$(nproc 2>/dev/null || echo 2)"
labels=()

# run <label> <cpu> [VAR=value ...] -- <binary> [args...]: one qemu run in the
# background (qemu-user emulates on one thread: one run per core), its output and
# exit status kept in $LOGS; report() prints them in launch order.
run() {
  local label=$1 cpu=$2
  shift 2
  local envs=()
  while [ "$1" != "--" ]; do
    envs+=("$1")
    shift
  done
  shift
  labels+=("$label")
  echo "== [$label] ${envs[*]:-} qemu-aarch64 -cpu $cpu $(basename "$1") ${*:2}" >"$LOGS/$label.log"
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  (
    start=$SECONDS
    status=0
    env "${envs[@]}" timeout 1200 qemu-aarch64 -cpu "$cpu" -L "$SYSROOT" "$@" \
      >>"$LOGS/$label.log" 2>&1 || status=$?
    echo "$status $((SECONDS - start))" >"$LOGS/$label.status"
  ) &
}

report() {
  wait
  local failures=0 label status secs
  for label in "${labels[@]}"; do
    cat "$LOGS/$label.log"
    read -r status secs <"$LOGS/$label.status" || status=missing
    if [ "$status" = 0 ]; then
      echo "-- [$label] ok ($secs s)"
    else
      echo "-- [$label] FAILED (exit $status, ${secs:-?} s)"
      failures=$((failures + 1))
    fi
  done
  echo "$failures" >"$LOGS/failures"
}

ARM_CASE=(-tc='kernels: Arm ISA levels*')  # prints the detected and compared levels

# 3. The whole unit suite at every level, launched first as the longest runs. The
#    neon level runs on the Cortex-A72 only: under -cpu max it would repeat step
#    2's kernel comparisons and miss a dotprod instruction reached at that level.
#    Under -cpu max the kernel tests ('kernels:*', which compare every level the
#    CPU has, whatever QFOLD_ISA says) are step 2's and left out here; on the A72
#    and the N1 they stay: there a kernel using a missing extension would trap.
#    The neondot level runs on the dotprod-only Neoverse N1 alone, where an i8mm
#    instruction would trap (under -cpu max it would only repeat that run).
run unit-a72-neon cortex-a72 QFOLD_ISA=neon QFOLD_TEST_ACTIVE_ISA=neon -- "$UNIT"
run unit-n1 neoverse-n1 QFOLD_TEST_ACTIVE_ISA=neondot -- "$UNIT"
for isa in reference neoni8mm; do
  run "unit-max-$isa" max QFOLD_ISA=$isa QFOLD_TEST_ACTIVE_ISA=$isa -- "$UNIT" -tce='kernels:*'
done

# 1. Detection (HWCAP_ASIMD, HWCAP_ASIMDDP, HWCAP2_I8MM...) and QFOLD_ISA, which may
#    only remove features, and the kernels each CPU model selects.
# The float (both layouts' convolutions too), depthwise and quantization kernels
# need only Armv8.0 NEON; the int8 GEMM and the channels-last int8 convolution
# microkernels have a variant per feature set (smlal, sdot, usmmla).
ARMV80_KERNELS="gemm_f32=neon dwconv_f32=neon conv_nhwc_f32=neon gemm_s8=neon igemm_s8=neon"
ARMV80_KERNELS+=" dwconv_s8=neon"
ARMV80_KERNELS+=" dwconv_nhwc_s8=neon pool_nhwc_s8=neon pool_2d=generic quant_s8=neon a16w8=neon"
ARMV80_KERNELS+=" a16a16=neon rowops_f32=neon portable_loops=on gemm_wq_s8=neon"
kernels_with() {
  local k="${ARMV80_KERNELS/ gemm_s8=neon/ gemm_s8=$1}"
  k="${k/igemm_s8=neon/igemm_s8=$1}"
  echo "$k"
}
REFERENCE_KERNELS="gemm_f32=reference conv_nhwc_f32=reference gemm_s8=reference"
REFERENCE_KERNELS+=" igemm_s8=reference dwconv_s8=reference"
REFERENCE_KERNELS+=" quant_s8=reference a16a16=reference"
REFERENCE_KERNELS+=" pool_2d=reference rowops_f32=reference portable_loops=reference"
REFERENCE_KERNELS+=" gemm_wq_s8=portable"
for cpu in cortex-a53 cortex-a72; do
  run "detect-${cpu#cortex-}" $cpu QFOLD_TEST_DETECTED_ISA=neon QFOLD_TEST_ACTIVE_ISA=neon \
    "QFOLD_TEST_KERNELS=$ARMV80_KERNELS" -- "$UNIT" "${ARM_CASE[@]}"
done
run env-a72-neondot cortex-a72 QFOLD_ISA=neondot QFOLD_TEST_ACTIVE_ISA=neon \
  "QFOLD_TEST_KERNELS=$ARMV80_KERNELS" -- "$UNIT" "${ARM_CASE[@]}"
run detect-n1 neoverse-n1 QFOLD_TEST_DETECTED_ISA=neondot QFOLD_TEST_ACTIVE_ISA=neondot \
  "QFOLD_TEST_KERNELS=$(kernels_with neondot)" -- "$UNIT" "${ARM_CASE[@]}"
run detect-max max QFOLD_TEST_DETECTED_ISA=neoni8mm QFOLD_TEST_ACTIVE_ISA=neoni8mm \
  "QFOLD_TEST_KERNELS=$(kernels_with neoni8mm)" -- "$UNIT" "${ARM_CASE[@]}"
run env-n1-neoni8mm neoverse-n1 QFOLD_ISA=neoni8mm QFOLD_TEST_ACTIVE_ISA=neondot \
  "QFOLD_TEST_KERNELS=$(kernels_with neondot)" -- "$UNIT" "${ARM_CASE[@]}"
for isa in reference neon neondot neoni8mm; do
  want="$(kernels_with $isa)"
  [ $isa = reference ] && want="$REFERENCE_KERNELS"
  run "env-max-$isa" max QFOLD_ISA=$isa QFOLD_TEST_ACTIVE_ISA=$isa "QFOLD_TEST_KERNELS=$want" \
    -- "$UNIT" "${ARM_CASE[@]}"
done
run env-max-avx2 max QFOLD_ISA=avx2 QFOLD_TEST_ACTIVE_ISA=neoni8mm \
  "QFOLD_TEST_KERNELS=$(kernels_with neoni8mm)" -- "$UNIT" "${ARM_CASE[@]}"

# 2. Kernel tests: every level against the reference kernels; the float ones on
#    the Armv8.0 Cortex-A53 too, the oldest core the neon level serves.
run kernels-max max QFOLD_TEST_DETECTED_ISA=neoni8mm -- "$UNIT" -tc='kernels:*'
run kernels-f32-a53 cortex-a53 QFOLD_TEST_DETECTED_ISA=neon -- "$UNIT" -tc='kernels f32:*'

# 4. fp16 precision: the variant each CPU model picks, the kernels against
#    their emulation and the fp32 fallback (QFOLD_TEST_FP16: the variant or none).
for cpu in max cortex-a76 neoverse-n1; do
  run "fp16-$cpu" $cpu QFOLD_TEST_FP16=neonfp16 -- "$UNIT" -tc='kernels fp16:*'
done
run fp16-a72 cortex-a72 QFOLD_TEST_FP16=none -- "$UNIT" -tc='kernels fp16:*'

# 5. C API: the model-independent checks, then the examples on a converted model.
run capi max -- "$BUILD/tests/qfold_capi_tests"
report
failures=$(cat "$LOGS/failures")
runs=${#labels[@]}
if [ -x "$HOST_QFOLD" ]; then
  wrap="$BUILD/qemu-wrappers"
  mkdir -p "$wrap"
  for exe in classify classify_cpp; do
    printf '#!/bin/sh\nexec qemu-aarch64 -cpu max -L %s %s "$@"\n' "$SYSROOT" \
      "$BUILD/examples/$exe" >"$wrap/$exe"
    chmod +x "$wrap/$exe"
  done
  runs=$((runs + 1))
  echo "== [examples] tests/capi/run_example.sh with $HOST_QFOLD and the aarch64 examples"
  if "$ROOT/tests/capi/run_example.sh" "$HOST_QFOLD" "$wrap/classify" "$wrap/classify_cpp" \
    "$ROOT/models" "$BUILD/capi_examples"; then
    echo "-- [examples] ok"
  else
    echo "-- [examples] FAILED"
    failures=$((failures + 1))
  fi
else
  echo "== [examples] skipped: no host CLI at $HOST_QFOLD (build the host first)"
fi

echo "== aarch64 under qemu: $((runs - failures)) of $runs runs passed"
[ "$failures" -eq 0 ]
