#!/usr/bin/env bash
# Malformed inputs to the CLI: each must exit 2 with a message naming the file,
# never crash (exit >= 128 or ASan report), and never leave an output file.
set -u
QFOLD="$1"
MODELS="$2"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
pass=0
fail=0

expect_exit2() {  # description, expected substring, command...
  local what="$1" needle="$2"
  shift 2
  local err rc
  err="$("$@" 2>&1 >/dev/null)"
  rc=$?
  if [ "$rc" -eq 2 ] && grep -qF -- "$needle" <<<"$err"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL $what: exit $rc, stderr: $err"
  fi
}

no_output() {  # description, path
  if [ -e "$2" ]; then
    fail=$((fail + 1))
    echo "FAIL $1: output file $2 was left behind"
  else
    pass=$((pass + 1))
  fi
}

src="$MODELS/mobilenetv2_like.onnx"
size=$(stat -c %s "$src")
for cut in 1 10 100 1000 $((size / 2)) $((size - 1)); do
  head -c "$cut" "$src" >"$WORK/trunc.onnx"
  out="$WORK/trunc_$cut.qfm"
  expect_exit2 "truncated onnx ($cut bytes)" "trunc.onnx" "$QFOLD" convert "$WORK/trunc.onnx" -o "$out"
  no_output "truncated onnx ($cut bytes)" "$out"
done
head -c 4096 /dev/urandom >"$WORK/random.onnx"
expect_exit2 "random onnx" "random.onnx" "$QFOLD" convert "$WORK/random.onnx" -o "$WORK/random.qfm"
no_output "random onnx" "$WORK/random.qfm"
expect_exit2 "missing onnx" "nothere.onnx" "$QFOLD" convert "$WORK/nothere.onnx" -o "$WORK/x.qfm"
: >"$WORK/empty.onnx"
expect_exit2 "empty onnx" "empty.onnx" "$QFOLD" convert "$WORK/empty.onnx" -o "$WORK/empty.qfm"
no_output "empty onnx" "$WORK/empty.qfm"

"$QFOLD" convert "$src" -o "$WORK/good.qfm" >/dev/null || { echo "FAIL convert of a good model"; exit 1; }
qsize=$(stat -c %s "$WORK/good.qfm")
for cut in 0 4 8 64 $((qsize / 3)) $((qsize - 1)); do
  head -c "$cut" "$WORK/good.qfm" >"$WORK/trunc.qfm"
  expect_exit2 "truncated qfm ($cut bytes)" "trunc.qfm" "$QFOLD" inspect "$WORK/trunc.qfm"
  expect_exit2 "truncated qfm run ($cut bytes)" "trunc.qfm" "$QFOLD" run "$WORK/trunc.qfm"
done
for seed in 1 2 3 4 5; do
  head -c $((1000 * seed)) /dev/urandom >"$WORK/random.qfm"
  expect_exit2 "random qfm #$seed" "random.qfm" "$QFOLD" inspect "$WORK/random.qfm"
done
# A valid file with its identifier changed.
cp "$WORK/good.qfm" "$WORK/badid.qfm"
printf 'XXXX' | dd of="$WORK/badid.qfm" bs=1 seek=4 conv=notrunc 2>/dev/null
expect_exit2 "wrong identifier" "QFM1" "$QFOLD" inspect "$WORK/badid.qfm"
# Flip bytes across the file: must never crash.
for off in 16 64 256 1024 4096 20000; do
  cp "$WORK/good.qfm" "$WORK/flip.qfm"
  printf '\xff\xff\xff\x7f' | dd of="$WORK/flip.qfm" bs=1 seek="$off" conv=notrunc 2>/dev/null
  "$QFOLD" inspect "$WORK/flip.qfm" >/dev/null 2>&1
  rc=$?
  if [ "$rc" -ge 3 ]; then
    fail=$((fail + 1))
    echo "FAIL byte flip at $off: exit $rc"
  else
    pass=$((pass + 1))
  fi
done
# Usage errors.
expect_exit2 "unknown command" "unknown command" "$QFOLD" frobnicate
expect_exit2 "convert without -o" "needs an input model" "$QFOLD" convert "$src"
expect_exit2 "run without input data" "no data for input 'input'" "$QFOLD" run "$WORK/good.qfm"
# Numeric options: garbage, signs, out of range and past int64 (std::stoi used to throw
# and abort on 99999999999) are usage errors.
for bad in 99999999999 99999999999999999999999 100000 0 -1 +2 " 2" 2x "" abc 1e3; do
  expect_exit2 "run --threads '$bad'" "--threads" "$QFOLD" run "$WORK/good.qfm" --threads "$bad"
  expect_exit2 "bench --threads '$bad'" "--threads" "$QFOLD" bench "$WORK/good.qfm" --threads "$bad"
done
for bad in 99999999999 -1 x ""; do
  expect_exit2 "bench --iterations '$bad'" "--iterations" "$QFOLD" bench "$WORK/good.qfm" --iterations "$bad"
  expect_exit2 "bench --warmup '$bad'" "--warmup" "$QFOLD" bench "$WORK/good.qfm" --warmup "$bad"
  expect_exit2 "bench --seed '$bad'" "--seed" "$QFOLD" bench "$WORK/good.qfm" --seed "$bad"
done
for bad in 4294967296 99999999999999999999 -1 x; do
  expect_exit2 "verify --seed '$bad'" "--seed" "$QFOLD" verify "$src" --seed "$bad"
done
# --precision takes fp32, bf16 or fp16 only.
for bad in fp8 FP16 BF16 ""; do
  expect_exit2 "run --precision '$bad'" "--precision needs fp32, bf16 or fp16" "$QFOLD" run "$WORK/good.qfm" --precision "$bad"
  expect_exit2 "bench --precision '$bad'" "--precision needs fp32, bf16 or fp16" "$QFOLD" bench "$WORK/good.qfm" --precision "$bad"
  expect_exit2 "verify --precision '$bad'" "--precision needs fp32, bf16 or fp16" "$QFOLD" verify "$src" "$WORK/good.qfm" --precision "$bad"
done
expect_exit2 "run --precision without a value" "--precision" "$QFOLD" run "$WORK/good.qfm" --precision
for bad in 1x99999999999999999999 1x-3 1xx2 1x2x; do
  expect_exit2 "run --input-shape '$bad'" "--input-shape" "$QFOLD" run "$WORK/good.qfm" --input-shape "input=$bad"
  expect_exit2 "convert --input-shape '$bad'" "--input-shape" "$QFOLD" convert "$src" -o "$WORK/s.qfm" --input-shape "input=$bad"
  expect_exit2 "check --input-shape '$bad'" "--input-shape" "$QFOLD" check "$src" --input-shape "input=$bad"
done
expect_exit2 "convert --dim huge" "--dim" "$QFOLD" convert "$src" -o "$WORK/s.qfm" --dim "N=99999999999999999999"
printf '{"dims": {"N": 18446744073709551615}}' >"$WORK/dims.json"
expect_exit2 "convert --input-shapes unsigned dim" "non-negative" "$QFOLD" convert "$src" -o "$WORK/s.qfm" --input-shapes "$WORK/dims.json"
no_output "bad numeric options" "$WORK/s.qfm"

# Files that are not regular files: refused at once (a FIFO used to block open() forever).
mkfifo "$WORK/fifo.onnx" "$WORK/fifo.qfm" "$WORK/fifo.npy"
expect_exit2 "convert a FIFO" "FIFO" timeout 10 "$QFOLD" convert "$WORK/fifo.onnx" -o "$WORK/f.qfm"
expect_exit2 "run a FIFO" "FIFO" timeout 10 "$QFOLD" run "$WORK/fifo.qfm"
expect_exit2 "inspect a FIFO" "FIFO" timeout 10 "$QFOLD" inspect "$WORK/fifo.qfm"
expect_exit2 "a FIFO as run input" "FIFO" timeout 10 "$QFOLD" run "$WORK/good.qfm" --input "input=$WORK/fifo.npy"
expect_exit2 "convert a directory" "directory" "$QFOLD" convert "$WORK" -o "$WORK/f.qfm"

# Outputs that must not be written: the input itself, a device node, a symlink, a read-only file.
cp "$src" "$WORK/self.onnx"
expect_exit2 "convert -o the input" "input file" "$QFOLD" convert "$WORK/self.onnx" -o "$WORK/self.onnx"
expect_exit2 "convert -o the input (other spelling)" "input file" "$QFOLD" convert "$WORK/self.onnx" -o "$WORK/./self.onnx"
if cmp -s "$src" "$WORK/self.onnx"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL the input was overwritten"; fi
expect_exit2 "convert -o /dev/null" "character device" "$QFOLD" convert "$src" -o /dev/null
if [ -c /dev/null ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL /dev/null replaced"; fi
: >"$WORK/target.qfm"
ln -s "$WORK/target.qfm" "$WORK/link.qfm"
expect_exit2 "convert -o a symlink" "symbolic link" "$QFOLD" convert "$src" -o "$WORK/link.qfm"
if [ -L "$WORK/link.qfm" ] && [ ! -s "$WORK/target.qfm" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL the symlink or its target changed"; fi
: >"$WORK/ro.qfm"
chmod 444 "$WORK/ro.qfm"
expect_exit2 "convert -o a read-only file" "read-only" "$QFOLD" convert "$src" -o "$WORK/ro.qfm"
if [ ! -s "$WORK/ro.qfm" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL the read-only file was replaced"; fi
expect_exit2 "verify --report a device" "character device" "$QFOLD" verify "$src" "$WORK/good.qfm" --report /dev/null
# run --output-dir: an output named like one of the input files is refused before running.
{ printf '\x93NUMPY\x01\x00\x76\x00'; printf "%-117s\n" "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 64, 64), }"; head -c 49152 /dev/zero; } >"$WORK/x.npy"
mkdir -p "$WORK/od"
"$QFOLD" run "$WORK/good.qfm" --input "input=$WORK/x.npy" --output-dir "$WORK/od" >/dev/null || { fail=$((fail + 1)); echo "FAIL run of a good model"; }
cp "$WORK/od/probs.npy" "$WORK/probs_before.npy"
expect_exit2 "run output over its input" "input file" "$QFOLD" run "$WORK/good.qfm" --input "input=$WORK/od/probs.npy" --output-dir "$WORK/od"
if cmp -s "$WORK/od/probs.npy" "$WORK/probs_before.npy"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL run overwrote its input"; fi
# --precision bf16 is accepted wherever sessions are made (a no-op without AVX-512 BF16).
mkdir -p "$WORK/od_bf16"
if "$QFOLD" run "$WORK/good.qfm" --input "input=$WORK/x.npy" --output-dir "$WORK/od_bf16" --precision bf16 >/dev/null &&
  [ -s "$WORK/od_bf16/probs.npy" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL run --precision bf16"; fi
if "$QFOLD" bench "$WORK/good.qfm" --precision bf16 --warmup 0 --iterations 1 --json | grep -qF '"precision":"bf16"'; then
  pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL bench --precision bf16 --json"; fi
if "$QFOLD" verify "$src" "$WORK/good.qfm" --precision bf16 | grep -qF "precision (.qfm): bf16"; then
  pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL verify --precision bf16"; fi
# --precision fp16 likewise; without Armv8.2 fp16 arithmetic (every x86 CPU) the
# outputs are the fp32 run's, byte for byte.
mkdir -p "$WORK/od_fp16"
if "$QFOLD" run "$WORK/good.qfm" --input "input=$WORK/x.npy" --output-dir "$WORK/od_fp16" --precision fp16 >/dev/null &&
  [ -s "$WORK/od_fp16/probs.npy" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL run --precision fp16"; fi
if [ "$(uname -m)" = x86_64 ]; then
  if cmp -s "$WORK/od_fp16/probs.npy" "$WORK/probs_before.npy"; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL run --precision fp16 differs from fp32 on x86"; fi
fi
if "$QFOLD" bench "$WORK/good.qfm" --precision fp16 --warmup 0 --iterations 1 --json | grep -qF '"precision":"fp16"'; then
  pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL bench --precision fp16 --json"; fi
if "$QFOLD" verify "$src" "$WORK/good.qfm" --precision fp16 | grep -qF "precision (.qfm): fp16"; then
  pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL verify --precision fp16"; fi
# No temp file is left by any refused or finished write.
left=$(find "$WORK" -name '*.tmp.*' | wc -l)
if [ "$left" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $left temp files left"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
