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

    # DQ -> LRN -> MaxPool -> Q: one QfQLinearLRN, then the MaxPool on its codes.
    make("qdq_lrn_maxpool", [
        helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "s", "zp"], ["xd"]),
        helper.make_node("LRN", ["xd"], ["n"], size=3, alpha=0.1, beta=0.75, bias=1.0),
        helper.make_node("MaxPool", ["n"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("QuantizeLinear", ["p", "s", "zp"], ["pq"]),
        helper.make_node("DequantizeLinear", ["pq", "s", "zp"], ["y"])],
        [x], [y], [s, zp])

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

    # Sequence values at run time: a sequence input, data-dependent split sizes and
    # positions, sequence outputs.
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(f, [None, 2]))
    make("sequences", [
        helper.make_node("SplitToSequence", ["x2", "sizes"], ["parts"], axis=0),
        helper.make_node("SequenceInsert", ["s", "x2", "pos"], ["grown"]),
        helper.make_node("SequenceAt", ["parts", "pos"], ["picked"]),
        helper.make_node("SequenceErase", ["grown"], ["shrunk"]),
        helper.make_node("ConcatFromSequence", ["shrunk"], ["joined"], axis=1, new_axis=1),
        helper.make_node("SequenceLength", ["s"], ["n"])],
        [helper.make_value_info("s", seq), helper.make_tensor_value_info("x2", f, [None, 2]),
         helper.make_tensor_value_info("sizes", TensorProto.INT64, [None]),
         helper.make_tensor_value_info("pos", TensorProto.INT64, [])],
        [helper.make_value_info("parts", seq), helper.make_tensor_value_info("picked", f, None),
         helper.make_tensor_value_info("joined", f, None),
         helper.make_tensor_value_info("n", TensorProto.INT64, [])])

    # SequenceMap (expanded by the converter into a Loop over the elements): a body with a
    # sequence and a tensor input, two outputs.
    body = helper.make_graph(
        [helper.make_node("Mul", ["e", "k"], ["scaled"]), helper.make_node("Shape", ["e"], ["shp"])],
        "map_body", [helper.make_tensor_value_info("e", f, [None, 2]),
                     helper.make_tensor_value_info("k", f, [2])],
        [helper.make_tensor_value_info("scaled", f, [None, 2]),
         helper.make_tensor_value_info("shp", TensorProto.INT64, [2])])
    make("sequence_map", [
        helper.make_node("SequenceMap", ["s", "k2"], ["mapped", "shapes"], body=body),
        helper.make_node("ConcatFromSequence", ["mapped"], ["flat"], axis=0)],
        [helper.make_value_info("s", seq), helper.make_tensor_value_info("k2", f, [2])],
        [helper.make_tensor_value_info("flat", f, None),
         helper.make_value_info("shapes", helper.make_sequence_type_proto(
             helper.make_tensor_type_proto(TensorProto.INT64, [2])))])
    return models


def reproducers():
    """Every model-file reproducer of docs/RELIABILITY.md (issue 18's classes and the earlier
    fuzzer findings), small: CI's bounded fuzzing step replays them before it mutates."""
    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    big, max64 = 1 << 62, (1 << 63) - 1
    models = {}

    def make(name, nodes, inputs, outputs, inits=(), opset=17):
        g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="qfold-fuzz-repro")
        m.ir_version = 8
        models["repro_" + name] = m.SerializeToString()

    x = helper.make_tensor_value_info("x", f, [1, 1, 8, 8])
    x2 = helper.make_tensor_value_info("x", f, [1, 2, 8, 8])
    y = helper.make_tensor_value_info("y", f, None)
    yi = helper.make_tensor_value_info("y", TensorProto.INT32, None)
    u8 = lambda n, v: numpy_helper.from_array(np.array(v, np.uint8), n)
    s1 = numpy_helper.from_array(np.array(1.0, np.float32), "s")

    # Rank-0 integer weights and zero points (segfault in convert, check, run).
    xq = helper.make_tensor_value_info("xq", TensorProto.UINT8, [1, 1, 8, 8])
    make("qlinearconv_rank0_weight", [helper.make_node(
        "QLinearConv", ["xq", "s", "z", "w", "s", "z", "s", "z"], ["yq"], name="qconv")],
        [xq], [helper.make_tensor_value_info("yq", TensorProto.UINT8, None)],
        [s1, u8("z", 0), u8("w", 3)])
    make("convinteger_rank0_weight", [helper.make_node("ConvInteger", ["xq", "w"], ["y"],
                                                       name="convint")],
         [xq], [yi], [u8("w", 3)])
    make("matmulinteger_rank0_weight", [helper.make_node(
        "MatMulInteger", ["xq", "w", "z", "z"], ["y"], name="mmint")], [xq], [yi],
        [u8("w", 3), u8("z", 0)])

    # Window geometry: strides near 2^62 overflowed an index product, 1e9 strides sized
    # scratch by the stride; pads as large as the stride leave several windows.
    for op in ("MaxPool", "AveragePool"):
        for tag, attrs in (("stride_2p62", dict(strides=[big, big])),
                           ("stride_1e9", dict(strides=[10**9, 10**9])),
                           ("same_upper_2p62", dict(strides=[big, big], auto_pad="SAME_UPPER")),
                           ("huge_pads", dict(strides=[10**9] * 2, pads=[10**9] * 4)),
                           ("dilation_overflow", dict(dilations=[big, 1])),
                           ("pads_overflow", dict(pads=[max64, 0, max64, 0]))):
            make(f"{op.lower()}_{tag}", [helper.make_node(op, ["x"], ["y"], kernel_shape=[2, 2],
                                                          name="pool", **attrs)], [x], [y])
    w = numpy_helper.from_array(np.ones((2, 1, 2, 2), np.float32), "w")
    make("conv_stride_2p62", [helper.make_node("Conv", ["x", "w"], ["y"], strides=[big, big],
                                               group=2, name="conv")], [x2], [y], [w])
    make("conv_huge_pads", [helper.make_node("Conv", ["x", "w"], ["y"], strides=[10**9] * 2,
                                             pads=[10**9] * 4, group=2, name="conv")], [x2], [y], [w])

    # Opsets qfold does not know.
    relu = [helper.make_node("Relu", ["x"], ["y"])]
    make("opset_0", relu, [x], [y], opset=0)
    make("opset_1e12", relu, [x], [y], opset=10**12)

    # A Split into many outputs (the planner was quadratic; past its greedy limit here).
    n = 2100
    parts = [f"p{i}" for i in range(n)]
    make("split_many_outputs", [
        helper.make_node("Split", ["v", "sizes"], parts, axis=0),
        helper.make_node("Concat", parts, ["y"], axis=0)],
        [helper.make_tensor_value_info("v", f, [n])], [y],
        [numpy_helper.from_array(np.ones(n, np.int64), "sizes")])

    # Earlier fuzzer findings (docs/RELIABILITY.md, "operators").
    scalar = lambda name, v, dt=np.int64: numpy_helper.from_array(np.array(v, dt), name)
    make("range_int64_extremes", [helper.make_node("Range", ["a", "b", "d"], ["y"])], [],
         [helper.make_tensor_value_info("y", i64, None)],
         [scalar("a", -(1 << 63)), scalar("b", max64), scalar("d", 1)])
    make("reshape_overflow", [helper.make_node("Reshape", ["x", "shape"], ["y"])], [x], [y],
         [numpy_helper.from_array(np.array([204800, max64, -1], np.int64), "shape")])
    make("pad_int64_max", [helper.make_node("Pad", ["x", "pads"], ["y"])], [x], [y],
         [numpy_helper.from_array(np.array([0, 0, 0, max64, 0, 0, 0, 0], np.int64), "pads")])
    make("onehot_nan_depth", [helper.make_node("OneHot", ["idx", "depth", "vals"], ["y"])],
         [helper.make_tensor_value_info("idx", i64, [3])], [y],
         [scalar("depth", np.nan, np.float32),
          numpy_helper.from_array(np.array([0, 1], np.float32), "vals")])
    make("constantofshape_2p60", [helper.make_node("ConstantOfShape", ["shape"], ["y"])], [], [y],
         [numpy_helper.from_array(np.array([1 << 30, 1 << 30], np.int64), "shape")])
    for tag, scale in (("nan", np.nan), ("inf", np.inf), ("zero", 0.0), ("negative", -1.0)):
        make(f"quantize_scale_{tag}", [
            helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
            helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])], [x], [y],
            [scalar("s", scale, np.float32), u8("z", 3)])
    # A raw bool byte of 37 (CI's fuzz_convert_run): converted, then refused by the loader.
    mask = helper.make_tensor("m", TensorProto.BOOL, [3], b"\x01\x00\x25", raw=True)
    make("bool_byte_37", [helper.make_node("And", ["b", "m"], ["y"])],
         [helper.make_tensor_value_info("b", TensorProto.BOOL, [3])],
         [helper.make_tensor_value_info("y", TensorProto.BOOL, None)], [mask])
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
    for name, data in {**tiny_models(), **reproducers()}.items():
        (dirs["onnx"] / f"{name}.onnx").write_bytes(data)
    if args.models and not args.tiny_only:
        for m in sorted(args.models.glob("*.onnx")):
            shutil.copyfile(m, dirs["onnx"] / m.name)
    if args.qfold:
        for m in sorted(dirs["onnx"].glob("*.onnx")):
            qfm = dirs["qfm"] / (m.stem + ".qfm")
            subprocess.run([args.qfold, "convert", str(m), "-o", str(qfm)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            # The repository keeps small seeds only (the Split reproducer's .qfm is
            # ~140 KB; its .onnx stays and converts in fuzz_convert_run).
            if args.tiny_only and qfm.exists() and qfm.stat().st_size > 64 * 1024:
                qfm.unlink()
    write_npy(dirs["npy"])
    # fuzz_shape_inference: op index, attribute count, inputs... any bytes are valid.
    for i in range(8):
        (dirs["shape"] / f"seed{i}").write_bytes(bytes([i * 29 % 256, 1, 7, 2, 1, 3, 0, 4, 4, i]))


if __name__ == "__main__":
    main()
