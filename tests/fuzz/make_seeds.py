#!/usr/bin/env python3
"""Seed corpora for the fuzz targets in tests/fuzz.

  make_seeds.py --out DIR [--models models/] [--qfold build/cli/qfold] [--tiny-only]

writes DIR/onnx (tiny hand-built models plus models/*.onnx), DIR/qfm (each .onnx converted
with --qfold, when given), DIR/npy (small .npy/.npz files) and DIR/shape (a few byte strings
for fuzz_shape_inference). --tiny-only skips models/ so the result stays small enough to keep
in the repository (tests/fuzz/seeds/ is made that way). Deterministic: same inputs, same bytes.
"""
import argparse
import io
import pathlib
import shutil
import subprocess
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def tiny_models():
    """Small models that reach the interesting converter paths: folding, Shape chains, QDQ."""
    f = TensorProto.FLOAT
    models = {}

    def make(name, nodes, inputs, outputs, inits=(), opset=17):
        g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="qfold-fuzz-seed")
        m.ir_version = 8
        models[name] = m.SerializeToString()

    x = helper.make_tensor_value_info("x", f, [1, 3, 4, 4])
    y = helper.make_tensor_value_info("y", f, None)
    w = numpy_helper.from_array(np.arange(54, dtype=np.float32).reshape(2, 3, 3, 3) / 50, "w")
    b = numpy_helper.from_array(np.array([0.5, -0.5], np.float32), "b")
    make("conv_relu", [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                       helper.make_node("Relu", ["c"], ["y"])], [x], [y], [w, b])

    xs = helper.make_tensor_value_info("x", f, ["N", 3, 4, 4])
    idx = numpy_helper.from_array(np.array(0, np.int64), "i0")
    minus1 = numpy_helper.from_array(np.array([-1], np.int64), "m1")
    make("shape_chain", [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "zero"], ["n1"]),
        helper.make_node("Concat", ["n1", "m1"], ["shp"], axis=0),
        helper.make_node("Reshape", ["x", "shp"], ["y"])],
        [xs], [y], [idx, minus1, numpy_helper.from_array(np.array([0], np.int64), "zero")])

    s = numpy_helper.from_array(np.array(0.1, np.float32), "s")
    zp = numpy_helper.from_array(np.array(3, np.uint8), "zp")
    wq = numpy_helper.from_array(np.arange(54, dtype=np.int8).reshape(2, 3, 3, 3), "wq")
    ws = numpy_helper.from_array(np.array(0.02, np.float32), "ws")
    wz = numpy_helper.from_array(np.array(0, np.int8), "wz")
    make("qdq_conv", [
        helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "s", "zp"], ["xd"]),
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"]),
        helper.make_node("Conv", ["xd", "wd"], ["c"]),
        helper.make_node("QuantizeLinear", ["c", "s", "zp"], ["cq"]),
        helper.make_node("DequantizeLinear", ["cq", "s", "zp"], ["y"])],
        [x], [y], [s, zp, wq, ws, wz])

    a = helper.make_tensor_value_info("a", f, [2, 3])
    c = numpy_helper.from_array(np.ones((3, 2), np.float32), "c")
    make("matmul_softmax", [helper.make_node("MatMul", ["a", "c"], ["m"]),
                            helper.make_node("Softmax", ["m"], ["y"], axis=-1)], [a], [y], [c])

    shp = numpy_helper.from_array(np.array([2, 2], np.int64), "shp")
    make("folded_const", [
        helper.make_node("ConstantOfShape", ["shp"], ["k"],
                         value=numpy_helper.from_array(np.array([2.0], np.float32))),
        helper.make_node("Add", ["a2", "k"], ["y"])],
        [helper.make_tensor_value_info("a2", f, [2, 2])], [y], [shp])
    return models


def write_npy(out):
    arrays = {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
        "f16": np.array([1.5, -2.0], np.float16),
        "i64": np.array([[1, -2], [3, 4]], np.int64),
        "u8": np.arange(5, dtype=np.uint8),
        "bool": np.array([True, False]),
        "scalar": np.array(3.0, np.float64),
        "empty": np.zeros((0, 2), np.int32),
    }
    for k, v in arrays.items():
        np.save(out / f"{k}.npy", v)
    np.savez(out / "two.npz", a=arrays["f32"], b=arrays["i64"])
    # np.savez_compressed stamps the current time into the zip; write a fixed one instead.
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for k in ("f32", "u8"):
            b = io.BytesIO()
            np.save(b, arrays[k])
            z.writestr(zipfile.ZipInfo(f"{k}.npy", (1980, 1, 1, 0, 0, 0)), b.getvalue(),
                       compress_type=zipfile.ZIP_DEFLATED)
    (out / "compressed.npz").write_bytes(buf.getvalue())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", required=True, type=pathlib.Path)
    ap.add_argument("--models", type=pathlib.Path)
    ap.add_argument("--qfold", help="qfold CLI, to make the .qfm seeds")
    ap.add_argument("--tiny-only", action="store_true")
    args = ap.parse_args()
    dirs = {k: args.out / k for k in ("onnx", "qfm", "npy", "shape")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    for name, data in tiny_models().items():
        (dirs["onnx"] / f"{name}.onnx").write_bytes(data)
    if args.models and not args.tiny_only:
        for m in sorted(args.models.glob("*.onnx")):
            shutil.copyfile(m, dirs["onnx"] / m.name)
    if args.qfold:
        for m in sorted(dirs["onnx"].glob("*.onnx")):
            subprocess.run([args.qfold, "convert", str(m), "-o", str(dirs["qfm"] / (m.stem + ".qfm"))],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    write_npy(dirs["npy"])
    # fuzz_shape_inference: op index, attribute count, inputs... any bytes are valid.
    for i in range(8):
        (dirs["shape"] / f"seed{i}").write_bytes(bytes([i * 29 % 256, 1, 7, 2, 1, 3, 0, 4, 4, i]))


if __name__ == "__main__":
    main()
