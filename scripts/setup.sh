#!/usr/bin/env bash
# Installs what is missing (Debian packages, the Python venv) and builds qfold.
# Sourced by demo.sh and test.sh; safe to run again (does nothing when up to date).
#   BUILD_DIR       build directory (default: build)
#   QFOLD_SANITIZE  ON for an ASan+UBSan build
#   QFOLD_FUZZ      ON (with QFOLD_SANITIZE=ON) for the clang build with the libFuzzer
#                   targets, which scripts/test.sh also runs the sanitizer tests in
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
VENV="$ROOT/.venv"

APT_PACKAGES=(cmake ninja-build g++ python3 python3-venv zlib1g-dev
  libprotobuf-dev protobuf-compiler libflatbuffers-dev flatbuffers-compiler
  libfmt-dev nlohmann-json3-dev doctest-dev libonnx-dev pybind11-dev python3-dev
  g++-aarch64-linux-gnu qemu-user  # scripts/test_aarch64.sh
  clang libclang-rt-14-dev  # the sanitizer + libFuzzer build (QFOLD_FUZZ=ON)
  ccache)  # lets python_wheel's build of a clean checkout reuse the release build's objects

install_apt_packages() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "== installing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

pick_python() {
  # Any python3 >= 3.9 with venv support will do; prefer the one on PATH.
  for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null && "$py" -c 'import sys, venv; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
      echo "$py"
      return
    fi
  done
  echo "no usable python3 found" >&2
  exit 1
}

setup_venv() {
  local req="$ROOT/scripts/requirements.txt" stamp="$VENV/.requirements.stamp"
  if [ -x "$VENV/bin/python" ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then return 0; fi
  echo "== creating Python venv in $VENV"
  rm -rf "$VENV"
  "$(pick_python)" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$req"
  cp "$req" "$stamp"
}

node_test_dir() {
  "$VENV/bin/python" -c 'import os, onnx; print(os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/node"))'
}

build_qfold() {
  local jobs compiler=()
  jobs="$(nproc 2>/dev/null || echo 2)"
  # The compilers are fixed at the first configure (changing them empties the
  # cache); C too, since the examples get the same sanitizer and fuzzer flags.
  if [ "${QFOLD_FUZZ:-OFF}" = ON ] && [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    compiler=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
  fi
  # Through ccache, paths relative to the checkout (CCACHE_BASEDIR): the python_wheel
  # test compiles the same sources from a copy and hits the objects compiled here.
  command -v ccache >/dev/null && compiler+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${compiler[@]}" \
    -DQFOLD_SANITIZE="${QFOLD_SANITIZE:-OFF}" -DQFOLD_FUZZ="${QFOLD_FUZZ:-OFF}" \
    -DQFOLD_PYTHON="$VENV/bin/python" \
    -DQFOLD_ONNX_NODE_TESTS="$(node_test_dir)" >/dev/null
  cmake --build "$BUILD_DIR" -j "$jobs"
}

install_apt_packages
setup_venv
