#!/usr/bin/env python3
"""Fetches real models (PaddleOCR PP-OCR det/cls/rec from the rapidocr-onnxruntime wheel on PyPI)
and quantizes them to QDQ for tests/e2e/compare_qdq.py.

Usage:
  python scripts/fetch_real_models.py [--cache models/cache] [--force]

Steps (each skipped when its output already exists, unless --force):
  1. pip download --no-deps rapidocr-onnxruntime==VERSION from PyPI into CACHE/ and check the
     wheel's sha256;
  2. extract its three .onnx files into CACHE/rapidocr/;
  3. fix each model's input to a realistic static shape (MODELS) into CACHE/float/<name>.onnx
     (float, original opset: also a test for compare_ort.py), convert it to opset 13 (needed for
     per-channel DequantizeLinear) and quantize it with quantize_static (QDQ, per-channel,
     uint8 activations, int8 weights; calibration: fixed-seed random inputs) into
     CACHE/qdq/<name>.pc_u8s8.onnx;
  4. the same with the other producers' dialects (DIALECTS: contrib-domain Q/DQ, one Q/DQ pair
     per consumer, 16-bit activations, NNCF, symmetric int8 activations) into
     CACHE/qdq_dialects/<name>.<variant>.onnx.
Then: tests/e2e/compare_qdq.py --qfold build/cli/qfold --models CACHE/qdq (and CACHE/qdq_dialects)

CACHE is gitignored (models/cache/). Prints the file sizes and how long each step took.
"""

import argparse
import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import time
import zipfile

import onnx
import onnx.version_converter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quantize_models  # noqa: E402

PACKAGE = "rapidocr-onnxruntime"
VERSION = "1.4.4"
WHEEL = "rapidocr_onnxruntime-1.4.4-py3-none-any.whl"
WHEEL_SHA256 = "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf"
INDEX_URL = "https://pypi.org/simple"

# Short name -> (path inside the wheel, static input shape NCHW used for calibration and tests).
MODELS = {
    "ppocrv4_det": ("rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx", [1, 3, 320, 320]),
    "ppocr_mobile_v2_cls": ("rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                            [1, 3, 48, 192]),
    "ppocrv4_rec": ("rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx", [1, 3, 48, 320]),
}
MIN_OPSET = 13
VARIANT = next(v for v in quantize_models.VARIANTS if v.name == "pc_u8s8")
# Other producers' QDQ (issue 13): what must fold like quantize_static's default output.
DIALECTS = [v for v in quantize_models.VARIANTS if v.name in (
    "pc_u8s8_contrib", "pc_u8s8_dedicated", "pc_u16s8", "pt_s16s8_msdomain", "nncf_u8s8",
    "pc_s8s8_sym")]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_wheel(cache, force):
    wheel = os.path.join(cache, WHEEL)
    if os.path.exists(wheel) and not force:
        print(f"have {wheel}")
    else:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "--index-url", INDEX_URL,
               f"{PACKAGE}=={VERSION}", "-d", cache]
        print("running: " + " ".join(cmd))
        # PyPI only: drop extra wheel sources a pip configuration may add from the environment.
        env = {k: v for k, v in os.environ.items()
               if k not in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX")}
        subprocess.run(cmd, check=True, env=env)
    digest = sha256(wheel)
    if digest != WHEEL_SHA256:
        raise SystemExit(f"{wheel}: sha256 {digest}, expected {WHEEL_SHA256}")
    return wheel


def extract(wheel, cache, force):
    out_dir = os.path.join(cache, "rapidocr")
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    with zipfile.ZipFile(wheel) as z:
        for name, (member, _) in MODELS.items():
            dst = os.path.join(out_dir, os.path.basename(member))
            if force or not os.path.exists(dst):
                with z.open(member) as src, open(dst + ".tmp", "wb") as f:
                    f.write(src.read())
                os.replace(dst + ".tmp", dst)
            paths[name] = dst
    return paths


def fix_input_shape(src, dst, shape):
    """Writes src with its single graph input made static (the models have dynamic N/H/W)."""
    model = onnx.load(src)
    inits = {t.name for t in model.graph.initializer}
    inputs = [vi for vi in model.graph.input if vi.name not in inits]
    if len(inputs) != 1 or len(inputs[0].type.tensor_type.shape.dim) != len(shape):
        raise SystemExit(f"{src}: expected one input of rank {len(shape)}")
    for d, v in zip(inputs[0].type.tensor_type.shape.dim, shape):
        if d.HasField("dim_value") and d.dim_value > 0 and d.dim_value != v:
            raise SystemExit(f"{src}: input dim {d.dim_value} != {v}")
        d.Clear()
        d.dim_value = v
    # Inferred shapes of the dynamic model would conflict with the static input; re-infer them.
    del model.graph.value_info[:]
    for out in model.graph.output:
        out.type.tensor_type.ClearField("shape")
    onnx.save(model, dst)


def onnx_opset(model):
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def make_static(name, src, shape, cache, force):
    """CACHE/float/<name>.onnx: the float model with a static input shape (original opset); also
    usable with tests/e2e/compare_ort.py."""
    out_dir = os.path.join(cache, "float")
    os.makedirs(out_dir, exist_ok=True)
    dst = os.path.join(out_dir, name + ".onnx")
    if force or not os.path.exists(dst):
        fix_input_shape(src, dst + ".tmp", shape)
        os.replace(dst + ".tmp", dst)
    return dst


def quantize(name, float_path, cache, force, variant=VARIANT, subdir="qdq"):
    qdq_dir = os.path.join(cache, subdir)
    os.makedirs(qdq_dir, exist_ok=True)
    dst = os.path.join(qdq_dir, f"{name}.{variant.name}.onnx")
    if os.path.exists(dst) and not force:
        return dst, False
    with tempfile.TemporaryDirectory(prefix="qfold-real-") as tmp:
        static = os.path.join(tmp, "static.onnx")
        pre = os.path.join(tmp, "pre.onnx")
        model = onnx.load(float_path)
        # Per-channel QDQ needs DequantizeLinear's axis attribute, which exists from opset 13 on;
        # these exports are opset 11/12.
        if onnx_opset(model) < MIN_OPSET:
            model = onnx.version_converter.convert_version(model, MIN_OPSET)
        onnx.save(model, static)
        quantize_models.preprocess(static, pre)
        quantize_models.quantize(pre, dst + ".tmp.onnx", variant, seed=1234)
    os.replace(dst + ".tmp.onnx", dst)
    return dst, True


def mib(path):
    return f"{os.path.getsize(path) / (1 << 20):.2f} MiB"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("--cache", default="models/cache", help="cache directory (gitignored)")
    ap.add_argument("--force", action="store_true", help="redo every step")
    args = ap.parse_args()
    logging.getLogger().setLevel(logging.ERROR)
    os.makedirs(args.cache, exist_ok=True)

    t0 = time.monotonic()
    wheel = fetch_wheel(args.cache, args.force)
    paths = extract(wheel, args.cache, args.force)
    t1 = time.monotonic()
    print(f"{WHEEL}: {mib(wheel)}")
    for name, path in paths.items():
        print(f"  {name}: {path} {mib(path)}")
    print(f"fetch + extract: {t1 - t0:.1f}s")
    for name, path in paths.items():
        shape = MODELS[name][1]
        start = time.monotonic()
        static = make_static(name, path, shape, args.cache, args.force)
        for variant, subdir in [(VARIANT, "qdq")] + [(v, "qdq_dialects") for v in DIALECTS]:
            dst, made = quantize(name, static, args.cache, args.force, variant, subdir)
            what = f"quantized in {time.monotonic() - start:.1f}s" if made else "already present"
            print(f"  {dst} {mib(dst)} (input {shape}; {what})")
            start = time.monotonic()
    print(f"total: {time.monotonic() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
