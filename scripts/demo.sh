#!/usr/bin/env bash
# Installs what is missing, builds, converts the sample MobileNetV2-like model
# from models/ and runs it on a random image, then checks it against ONNX Runtime.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/setup.sh"
BUILD_DIR="$ROOT/build" build_qfold

QFOLD="$ROOT/build/cli/qfold"
OUT="$ROOT/out/demo"
mkdir -p "$OUT"
MODEL="$ROOT/models/mobilenetv2_like.onnx"

echo "== qfold convert"
"$QFOLD" convert "$MODEL" -o "$OUT/mobilenetv2_like.qfm"
echo "== qfold inspect"
"$QFOLD" inspect "$OUT/mobilenetv2_like.qfm"
echo "== qfold run"
"$ROOT/.venv/bin/python" -c "
import numpy as np
np.save('$OUT/input.npy', np.random.default_rng(0).standard_normal((1, 3, 64, 64), dtype=np.float32))"
"$QFOLD" run "$OUT/mobilenetv2_like.qfm" --input input="$OUT/input.npy" --output-dir "$OUT"
"$ROOT/.venv/bin/python" -c "
import numpy as np, glob
for f in sorted(glob.glob('$OUT/*.npy')):
    if f.endswith('input.npy'): continue
    y = np.load(f)
    print(f'{f}: shape {y.shape}, top class {int(y.argmax())}, p={float(y.max()):.4f}')"
echo "== compare with ONNX Runtime"
"$ROOT/.venv/bin/python" "$ROOT/tests/e2e/compare_ort.py" --qfold "$QFOLD" --model "$MODEL" \
  --workdir "$OUT/compare"
