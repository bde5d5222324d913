#!/usr/bin/env bash
# Quantizes the models of models/ with ONNX Runtime's quantize_static (QDQ) and
# checks qfold's folded int8 execution against ORT running the literal graph.
set -euo pipefail
PYTHON="$1"
QFOLD="$2"
OUT="$3"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
"$PYTHON" "$ROOT/scripts/quantize_models.py" --src "$ROOT/models" --out "$OUT" --ops >/dev/null
"$PYTHON" "$ROOT/tests/e2e/compare_qdq.py" --qfold "$QFOLD" --models "$OUT" --ops
