#!/usr/bin/env bash
# Runs the unit tests with the AVX-512 VNNI and AVX-VNNI kernels emulated by
# SIMDe (Debian's libsimde-dev) on top of native AVX2: every x86 kernel level
# is checked against the reference kernels on a CPU that lacks those levels.
# Slow (emulated vector instructions); not part of test.sh. Needs an AVX2 CPU.
#   BUILD_DIR  build directory (default: build-emulated)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-emulated}"
if ! dpkg-query -W -f='${Status}' libsimde-dev 2>/dev/null | grep -q "install ok installed"; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libsimde-dev >/dev/null
fi
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQFOLD_EMULATE_X86=ON \
  -DQFOLD_PYTHON_BINDINGS=OFF >/dev/null
cmake --build "$BUILD_DIR" --target qfold_unit_tests -j "$(nproc 2>/dev/null || echo 2)"
"$BUILD_DIR/tests/qfold_unit_tests" "$@"
