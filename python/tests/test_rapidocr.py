#!/usr/bin/env python3
"""A real application written for ONNX Runtime, unchanged, on qfold.

rapidocr-onnxruntime's OCR pipeline (PP-OCR detection, direction classification and
recognition, the models shipped in its wheel) reads a text image that Pillow renders,
once as published and once with the onnxruntime.InferenceSession class it imported
replaced by qfold.InferenceSession. Both must read the rendered text, and the same text.

Usage: PYTHONPATH=<build>/python python test_rapidocr.py
Exits 0 on success, 1 on a mismatch.
"""
import os
import sys
import tempfile

TMP = tempfile.mkdtemp(prefix="qfold_ocr_")
os.environ.setdefault("QFOLD_CACHE_DIR", os.path.join(TMP, "cache"))

import numpy as np  # noqa: E402
from PIL import Image, ImageDraw, ImageFont  # noqa: E402

import qfold  # noqa: E402
import rapidocr_onnxruntime  # noqa: E402
import rapidocr_onnxruntime.utils.infer_engine as infer_engine  # noqa: E402

LINES = ["qfold runs PP-OCR", "Invoice 2026-11-24 total 4817.50"]


def render():
    font = ImageFont.load_default(size=40)
    image = Image.new("RGB", (900, 60 + 80 * len(LINES)), "white")
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(LINES):
        draw.text((30, 30 + 80 * i), line, fill="black", font=font)
    return np.asarray(image)[:, :, ::-1].copy()  # BGR, as cv2.imread gives it


def read(image):
    engine = rapidocr_onnxruntime.RapidOCR()
    result, _ = engine(image)
    return [text for _, text, _ in (result or [])]


class CountingSession(qfold.InferenceSession):
    """qfold.InferenceSession that records the models it was given."""

    models = []

    def __init__(self, path_or_bytes, *args, **kwargs):
        CountingSession.models.append(os.path.basename(os.fspath(path_or_bytes)))
        super().__init__(path_or_bytes, *args, **kwargs)


def normalize(text):
    return "".join(text.split())


def main():
    image = render()
    with_ort = read(image)
    print("onnxruntime:", with_ort)
    original = infer_engine.InferenceSession
    infer_engine.InferenceSession = CountingSession
    try:
        with_qfold = read(image)
    finally:
        infer_engine.InferenceSession = original
    print("qfold:      ", with_qfold)
    print("qfold ran:  ", CountingSession.models)
    ok = True
    if len(CountingSession.models) != 3:
        print("FAIL: expected qfold sessions for det, cls and rec, got", CountingSession.models)
        ok = False
    # The image's text, read by the unmodified application (the detector may split a line
    # into several boxes): the comparison below is not vacuous.
    if normalize("".join(with_ort)) != normalize("".join(LINES)):
        print("FAIL: onnxruntime did not read the rendered text", with_ort)
        ok = False
    if with_qfold != with_ort:
        print("FAIL: qfold read", with_qfold, "where onnxruntime read", with_ort)
        ok = False
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
