#!/usr/bin/env bash
# Installs this build tree into a temporary prefix and builds examples/ against it,
# once with find_package(qfold) and once with pkg-config, then runs both builds.
#   consumer.sh <cmake> <generator> <C compiler> <build dir> <source dir> <work dir> <qfm> [flags]
#               [cc flags]
# flags: extra compiler and linker flags (the sanitizer build passes -fsanitize=...);
# cc flags: more of them for the direct build with <C compiler> only.
set -euo pipefail
cmake=$1 generator=$2 cc=$3 build=$4 src=$5 work=$6 qfm=$7 flags=${8:-} cc_flags=${9:-}
rm -rf "$work"
prefix=$work/prefix
"$cmake" --install "$build" --prefix "$prefix" >/dev/null

# Public headers must stand alone: no internal (src/) or generated includes.
if grep -h '#include "' "$prefix"/include/qfold/* | grep -v '"qfold/\(qfold\|runtime\|dtype\|status\)\.h"'; then
  echo "installed headers include non-public headers"; exit 1
fi

"$cmake" -S "$src/examples" -B "$work/build" -G "$generator" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" >/dev/null
"$cmake" --build "$work/build" >/dev/null
out=$("$work/build/classify" "$qfm")
grep -q '^output output float32 \[1,4,2,2\]:' <<<"$out"
out=$("$work/build/classify_cpp" "$qfm")
grep -q '^output:' <<<"$out"

# pkg-config, shared library.
if ! command -v pkg-config >/dev/null; then echo "consumer: ok (no pkg-config)"; exit 0; fi
export PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name qfold.pc)")
"$cc" -std=c99 -Wall -Werror $flags $cc_flags "$src/examples/classify.c" -o "$work/classify_pc" \
  $(pkg-config --cflags --libs qfold)
libdir=$(pkg-config --variable=libdir qfold)
out=$(LD_LIBRARY_PATH=$libdir "$work/classify_pc" "$qfm")
grep -q '^output output float32 \[1,4,2,2\]:' <<<"$out"
echo "consumer: ok"
