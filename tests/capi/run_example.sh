#!/usr/bin/env bash
# Converts models/mobilenetv2_like.onnx and runs the C and C++ examples on it; the
# probabilities for an all-0.5 input must match ONNX Runtime's.
#   run_example.sh <qfold CLI> <classify> <classify_cpp> <models dir> <work dir>
set -euo pipefail
qfold=$1 classify=$2 classify_cpp=$3 models=$4 work=$5
mkdir -p "$work"
"$qfold" convert "$models/mobilenetv2_like.onnx" -o "$work/mobilenet.qfm" >/dev/null

out=$("$classify" "$work/mobilenet.qfm")
echo "$out"
grep -q '^input input float32 \[1,3,64,64\]$' <<<"$out"
grep -q '^arena [1-9][0-9]* bytes$' <<<"$out"

# First five probabilities from ONNX Runtime for the same input.
check() {
  awk -v want="0.133678436 0.106195562 0.072522685 0.176204458 0.068454370" '
    { n = split(want, w, " "); seen = 1; for (i = 1; i <= n; ++i) { d = $i - w[i];
        if (d < -1e-4 || d > 1e-4) { print "value " i ": got " $i ", want " w[i]; bad = 1 } } }
    END { exit bad || !seen }'
}
grep '^output probs float32 \[1,10\]:' <<<"$out" | sed 's/^.*://' | check

out_cpp=$("$classify_cpp" "$work/mobilenet.qfm")
echo "$out_cpp"
grep '^probs:' <<<"$out_cpp" | sed 's/^.*://' | check

# Errors reach the user through qfold_last_error.
if msg=$("$classify" "$work/missing.qfm" 2>&1); then echo "missing file accepted"; exit 1; fi
grep -q "missing.qfm: cannot open" <<<"$msg"
echo "examples: ok"
