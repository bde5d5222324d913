#!/usr/bin/env python3
"""fp16 models keep their weights float16 in the .qfm, and that changes nothing but the file:

- each model is converted twice, by default (float16 weights) and with --widen-fp16-weights
  (float32 weights), and `qfold run` gives bit-identical outputs for both on the same inputs;
- per `qfold inspect --json`, the default file stores float16 constants and no more than half
  the widened file's float32 constant bytes, plus the constants the narrowing may not touch
  (weights changed by folding, such as a BatchNormalization fused into a Conv);
- both agree with ONNX Runtime on the fp16 model (2e-3 of the output's range, as compare_ort.py
  allows float16 models).

Models: every --model FILE and one built here (fp16 MatMul + bias, Gemm with transB,
ConvTranspose, Conv + BatchNormalization, output cast to float32 so that the comparison sees
every float32 bit).

Usage: compare_fp16_weights.py --qfold build/cli/qfold [--model models/fp16_convnet.onnx ...]
"""

import argparse
import json
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from qfold_tools import random_feeds, run_ort, run_qfold, run_qfold_output, safe_name

RTOL = 2e-3


def fp16_mixed_model(path):
    """A small fp16 graph with every weight-reading op the narrowing covers, and a fused
    BatchNormalization whose folded weights are not float16 values (they stay float32)."""
    rng = np.random.default_rng(16)

    def const(name, shape, scale=0.2):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float16), name)

    inits = [
        const("w_mm", [24, 40]), const("b_mm", [40]),
        const("w_gemm", [32, 40]), const("c_gemm", [32]),
        const("w_ct", [2, 3, 3, 3]), const("w_conv", [4, 3, 3, 3]),
        const("bn_scale", [4], 1.0), const("bn_bias", [4]), const("bn_mean", [4]),
        numpy_helper.from_array((np.abs(rng.standard_normal(4)) + 0.5).astype(np.float16),
                                "bn_var"),
        numpy_helper.from_array(np.array([1, 2, 4, 4], np.int64), "img_shape"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w_mm"], ["mm"], name="matmul"),
        helper.make_node("Add", ["mm", "b_mm"], ["mm_b"], name="bias"),
        helper.make_node("Gemm", ["mm_b", "w_gemm", "c_gemm"], ["gemm"], name="gemm", transB=1),
        helper.make_node("Reshape", ["gemm", "img_shape"], ["img"], name="to_image"),
        helper.make_node("ConvTranspose", ["img", "w_ct"], ["ct"], name="convtranspose",
                         strides=[2, 2]),
        helper.make_node("Conv", ["ct", "w_conv"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization",
                         ["conv", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["bn"], name="bn"),
        helper.make_node("Cast", ["bn"], ["y"], name="to_float", to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes, "fp16_mixed", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 24])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 9, 9])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def constants(qfold, qfm):
    err, out = run_qfold_output([qfold, "inspect", qfm, "--json"], 120)
    if err:
        raise RuntimeError(err)
    return json.loads(out)["constants"]


def run_model(qfold, qfm, feeds, outdir):
    os.makedirs(outdir, exist_ok=True)
    args = []
    for name, arr in feeds.items():
        path = os.path.join(outdir, "in_" + safe_name(name) + ".npy")
        np.save(path, arr)
        args += ["--input", f"{name}={path}"]
    err = run_qfold([qfold, "run", qfm] + args + ["--output-dir", outdir], 300)
    if err:
        raise RuntimeError(err)
    return {f: np.load(os.path.join(outdir, f)) for f in sorted(os.listdir(outdir))
            if f.endswith(".npy") and not f.startswith("in_")}


def check(qfold, path, work):
    base = os.path.splitext(os.path.basename(path))[0]
    half_qfm, wide_qfm = (os.path.join(work, base + s) for s in (".f16.qfm", ".f32.qfm"))
    for qfm, extra in ((half_qfm, []), (wide_qfm, ["--widen-fp16-weights"])):
        err = run_qfold([qfold, "convert", path, "-o", qfm] + extra, 300)
        if err:
            return "convert failed: " + err
    half, wide = constants(qfold, half_qfm), constants(qfold, wide_qfm)
    h16 = half["bytes_by_dtype"].get("float16", 0)
    if h16 == 0 or "float16" in wide["bytes_by_dtype"]:
        return f"float16 constants: {half['bytes_by_dtype']} vs widened {wide['bytes_by_dtype']}"
    # Narrowing halves exactly the bytes it touches and leaves the rest alone.
    if half["bytes"] != wide["bytes"] - h16:
        return f"constant bytes {half['bytes']} != {wide['bytes']} - {h16} (float16 bytes)"
    model = onnx.load(path)
    feeds = random_feeds(model, np.random.default_rng(7))
    a = run_model(qfold, half_qfm, feeds, os.path.join(work, base, "f16"))
    b = run_model(qfold, wide_qfm, feeds, os.path.join(work, base, "f32"))
    if not a or sorted(a) != sorted(b):
        return f"outputs {sorted(a)} vs {sorted(b)}"
    for name in a:
        if a[name].dtype != b[name].dtype or a[name].tobytes() != b[name].tobytes():
            return f"{name}: not bit-identical to the widened model's"
    names, ref = run_ort(path, feeds)
    for name, r in zip(names, ref):
        got = a[safe_name(name) + ".npy"].astype(np.float64)
        r = r.astype(np.float64)
        err = np.abs(got - r).max() / max(np.abs(r).max(), 1e-6)
        if not err < RTOL:
            return f"{name}: relative error {err:.3g} against ONNX Runtime"
    return (f"ok: constants {wide['bytes']} -> {half['bytes']} bytes "
            f"({h16} float16), outputs bit-identical, within {RTOL:g} of ONNX Runtime")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qfold", required=True)
    ap.add_argument("--model", action="append", default=[])
    args = ap.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as work:
        mixed = os.path.join(work, "fp16_mixed.onnx")
        fp16_mixed_model(mixed)
        for path in args.model + [mixed]:
            try:
                msg = check(args.qfold, path, work)
            except RuntimeError as e:
                msg = str(e)
            ok = msg.startswith("ok")
            failed += not ok
            print(f"{'PASS' if ok else 'FAIL'} {os.path.basename(path)}: {msg}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
