#!/usr/bin/env python3
"""Builds QDQ-quantized test models with onnxruntime.quantization.quantize_static.

Usage:
  python scripts/quantize_models.py --src models/ --out DIR [--ops] [--no-models]

Whole models: for each of mobilenetv2_like, resnet_like and transformer_encoder in --src, writes
DIR/<model>.<variant>.onnx for every variant in VARIANTS (per-tensor/per-channel, uint8/int8
activations, int8/uint8 weights, reduce_range, symmetric/asymmetric activations and weights;
together they cover each option at least once). The float model is pre-processed first
(quant_pre_process: ONNX shape inference plus ORT's basic graph optimizations, which fold
BatchNormalization into Conv so the Conv weights get quantized instead of a float BN staying).

--ops: also writes DIR/ops/op_<name>.<variant>.onnx, tiny one-operator models (fixed-seed weights)
quantized per-tensor and, where the operator has weights, per-channel, with uint8 and int8
activations; those ONNX Runtime writes as com.microsoft QLinear* ops (Add, Mul, Concat,
AveragePool, LeakyRelu, Sigmoid) also in QOperator format. Their graph output is the output of the final QuantizeLinear (the trailing
DequantizeLinear is cut off), so the quantized integers can be compared exactly.

Calibration uses a deterministic CalibrationDataReader: NUM_CALIB_SAMPLES standard-normal inputs
from a fixed seed, symbolic dims fixed like tests/e2e/compare_ort.py. The output is deterministic
and takes well under a minute.
"""

import argparse
import logging
import os
import sys
import tempfile
import time
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_dynamic, quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from qfold_tools import graph_inputs, random_feeds  # noqa: E402

NUM_CALIB_SAMPLES = 8
WHOLE_MODELS = ("mobilenetv2_like", "resnet_like", "transformer_encoder", "detector_stem")
OPS_OPSET = 17

U8, S8 = QuantType.QUInt8, QuantType.QInt8


class Variant:
    def __init__(self, name, per_channel, act, weight, reduce_range=False, fmt="qdq", **extra):
        self.name = name
        # "qdq" (QuantizeLinear/DequantizeLinear), "qoperator" (QLinearConv, QGemm, ...)
        # or "dynamic" (quantize_dynamic: MatMulInteger/ConvInteger, no calibration).
        self.fmt = fmt
        self.per_channel = per_channel
        self.act = act
        self.weight = weight
        self.reduce_range = reduce_range
        self.extra = extra

    def describe(self):
        bits = ["per-channel" if self.per_channel else "per-tensor",
                f"act {self.act.name}", f"weight {self.weight.name}"]
        if self.reduce_range:
            bits.append("reduce_range")
        if self.fmt != "qdq":
            bits.append(self.fmt)
        bits += [f"{k}={v}" for k, v in self.extra.items()]
        return ", ".join(bits)


# Naming: pt/pc = per-tensor/per-channel weights, then activation and weight type (u8/s8).
# Defaults of quantize_static: activations asymmetric; int8 weights symmetric, uint8 asymmetric.
VARIANTS = [
    Variant("pt_u8s8", False, U8, S8),
    Variant("pt_s8s8", False, S8, S8),
    Variant("pt_u8u8", False, U8, U8),
    Variant("pt_u8s8_asymw", False, U8, S8, WeightSymmetric=False),
    Variant("pt_u8s8_sym", False, U8, S8, ActivationSymmetric=True),
    Variant("pc_u8s8", True, U8, S8),
    Variant("pc_s8s8", True, S8, S8),
    Variant("pc_s8s8_sym", True, S8, S8, ActivationSymmetric=True),
    Variant("pc_u8s8_reducerange", True, U8, S8, reduce_range=True),
    Variant("qop_pc_u8s8", True, U8, S8, fmt="qoperator"),
    Variant("dyn_u8s8", False, U8, S8, fmt="dynamic"),
    # Other producers' dialects of the same QDQ graph (docs/QDQ.md, "Dialects"):
    # Q/DQ in domain com.microsoft; one Q -> DQ pair per consumer; 16-bit activations
    # (ONNX Runtime writes them as com.microsoft Q/DQ below opset 21); float weights
    # through QuantizeLinear -> DequantizeLinear as NNCF, AIMET and PyTorch exports write
    # them (see float_weights_through_q).
    Variant("pc_u8s8_contrib", True, U8, S8, UseQDQContribOps=True),
    Variant("pc_u8s8_dedicated", True, U8, S8, DedicatedQDQPair=True),
    Variant("pc_u16s8", True, QuantType.QUInt16, S8),
    Variant("pt_s16s8_msdomain", False, QuantType.QInt16, S8, UseQDQContribOps=True),
    Variant("pc_s8s8_qweight", True, S8, S8, fmt="qweight"),
    # NNCF's post-training quantization of the ONNX model (its defaults: per-channel symmetric
    # int8 weights, uint8 activations; Conv outputs left float; per-channel activations for
    # depthwise convolutions; no Q/DQ after MaxPool).
    Variant("nncf_u8s8", True, U8, S8, fmt="nncf"),
]
OP_VARIANTS_PT = [VARIANTS[0], VARIANTS[1]]
OP_VARIANTS_PC = [VARIANTS[5], VARIANTS[6]]
# QOperator format of the one-operator models ONNX Runtime writes as com.microsoft QLinear*
# ops (QLinearAdd, QLinearMul, QLinearConcat, QLinearAveragePool, QLinearLeakyRelu,
# QLinearSigmoid): qfold's kernels for them against ONNX Runtime's own.
OP_VARIANTS_QOP = [Variant("qop_pt_u8s8", False, U8, S8, fmt="qoperator"),
                   Variant("qop_pt_s8s8", False, S8, S8, fmt="qoperator")]
QOP_CONTRIB_OPS = ("add", "mul", "concat", "averagepool", "leakyrelu", "sigmoid")


class RandomReader(CalibrationDataReader):
    """NUM_CALIB_SAMPLES deterministic standard-normal feeds for the model's inputs."""

    def __init__(self, model, seed, dims=None, samples=NUM_CALIB_SAMPLES):
        rng = np.random.default_rng(seed)
        self.feeds = [random_feeds(model, rng, dims) for _ in range(samples)]
        self.pos = 0

    def get_next(self):
        if self.pos >= len(self.feeds):
            return None
        self.pos += 1
        return self.feeds[self.pos - 1]

    def rewind(self):
        self.pos = 0


def preprocess(src, dst):
    """quant_pre_process: ORT basic optimizations plus ONNX shape inference. Symbolic shape
    inference is skipped: it needs sympy, and the models' inputs have fixed shapes here."""
    quant_pre_process(src, dst, skip_symbolic_shape=True)


def quantize(src, dst, variant, seed, op_types=None, dims=None, force=False):
    """quantize_static in QDQ format with `variant`'s options and a fixed-seed calibration set.
    force: quantize data-movement ops (Transpose, MaxPool, ...) even if their input is float."""
    if variant.fmt == "nncf":
        quantize_nncf(src, dst, seed, dims)
        return
    if variant.fmt == "dynamic":
        quantize_dynamic(src, dst, per_channel=variant.per_channel, weight_type=variant.weight,
                         op_types_to_quantize=op_types)
        return
    model = onnx.load(src)
    reader = RandomReader(model, seed, dims)
    extra = dict(variant.extra)
    if force:
        extra["ForceQuantizeNoInputCheck"] = True
    fmt = QuantFormat.QOperator if variant.fmt == "qoperator" else QuantFormat.QDQ
    quantize_static(src, dst, reader, quant_format=fmt,
                    op_types_to_quantize=op_types, per_channel=variant.per_channel,
                    reduce_range=variant.reduce_range, activation_type=variant.act,
                    weight_type=variant.weight, extra_options=extra)
    if variant.fmt == "qweight":
        float_weights_through_q(dst, seed)


def quantize_nncf(src, dst, seed, dims=None):
    """nncf.quantize on the ONNX model with the same fixed-seed calibration feeds."""
    import logging
    import nncf
    logging.getLogger("nncf").setLevel(logging.ERROR)
    model = onnx.load(src)
    feeds = RandomReader(model, seed, dims).feeds
    quantized = nncf.quantize(model, nncf.Dataset(feeds), subset_size=len(feeds))
    onnx.save(quantized, dst)


def float_weights_through_q(path, seed):
    """Rewrites every constant 8-bit weight W_q read by a DequantizeLinear into a float
    constant W_f followed by QuantizeLinear with the DQ's own scale, zero point and axis, the
    form fake-quantization exports (NNCF, AIMET, PyTorch) write. W_f is chosen so that the
    quantization rounding matters: most elements sit at the code plus a random offset within
    (-0.45, 0.45) steps, one in eight exactly half a step off (a tie: half to even decides) and
    one in sixty-four several steps beyond the type's range (saturation)."""
    model = onnx.load(path)
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    rng = np.random.default_rng(seed)
    new_nodes = []
    for n in g.node:
        if n.op_type != "DequantizeLinear" or n.input[0] not in inits:
            new_nodes.append(n)
            continue
        w = inits[n.input[0]]
        if w.data_type not in (TensorProto.INT8, TensorProto.UINT8) or len(n.input) < 3:
            new_nodes.append(n)
            continue
        codes = numpy_helper.to_array(w).astype(np.int64)
        scale = numpy_helper.to_array(inits[n.input[1]]).astype(np.float64)
        zp = numpy_helper.to_array(inits[n.input[2]]).astype(np.int64)
        axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
        if scale.size > 1:
            shape = [1] * codes.ndim
            shape[axis % codes.ndim] = scale.size
            scale, zp = scale.reshape(shape), zp.reshape(shape)
        offset = rng.uniform(-0.45, 0.45, codes.shape)
        pick = rng.integers(0, 64, codes.shape)
        offset[pick < 8] = np.where(rng.integers(0, 2, codes.shape) == 0, -0.5, 0.5)[pick < 8]
        lo, hi = (-128, 127) if w.data_type == TensorProto.INT8 else (0, 255)
        offset[pick == 63] = np.where(codes >= (lo + hi) / 2, hi + 3 - codes, lo - 3 - codes)[
            pick == 63]
        real = ((codes - zp + offset) * scale).astype(np.float32)
        # A tie must be one in float32 division (as both runtimes compute x / scale); where
        # the product rounded it away, the element keeps its exact code instead.
        ratio = real / scale.astype(np.float32)
        tie = np.abs(offset) == 0.5
        exact = ratio.astype(np.float64) == (codes - zp + offset)
        real = np.where(tie & ~exact, ((codes - zp) * scale).astype(np.float32), real)
        fname = n.input[0] + "_float"
        g.initializer.append(numpy_helper.from_array(real, fname))
        q = helper.make_node("QuantizeLinear", [fname, n.input[1], n.input[2]],
                             [n.input[0] + "_requantized"], name=n.name + "_weight_quantize")
        if scale.size > 1:
            q.attribute.extend([helper.make_attribute("axis", axis)])
        n.input[0] = q.output[0]
        new_nodes += [q, n]
    del g.node[:]
    g.node.extend(new_nodes)
    used = {i for n in g.node for i in n.input}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def cut_trailing_dequantize(path):
    """Makes each graph output that a DequantizeLinear produces the DQ's quantized input instead,
    so the model outputs the integers of its final QuantizeLinear."""
    model = onnx.load(path)
    g = model.graph
    producers = {o: n for n in g.node for o in n.output}
    inits = {t.name: t for t in g.initializer}
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    for out in g.output:
        dq = producers.get(out.name)
        if dq is None or dq.op_type != "DequantizeLinear":
            raise RuntimeError(f"{path}: output {out.name} is not produced by DequantizeLinear")
        if len(dq.input) < 3 or dq.input[2] not in inits:
            raise RuntimeError(f"{path}: DequantizeLinear {dq.name} has no constant zero point")
        qname = dq.input[0]
        if consumers.get(out.name):
            raise RuntimeError(f"{path}: output {out.name} is also consumed inside the graph")
        g.node.remove(dq)
        # Keep the original output name so the comparison finds it; rename the Q output to it.
        for n in g.node:
            for lst in (n.input, n.output):
                for i, name in enumerate(lst):
                    if name == qname:
                        lst[i] = out.name
        out.type.tensor_type.elem_type = inits[dq.input[2]].data_type
    # Value infos may still describe the cut tensors as float.
    del g.value_info[:]
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


# Single-operator models ------------------------------------------------------------------------

def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _w(rng, shape, fan_in):
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def _conv(rng, name, cin, cout, k, group=1, stride=1, bias=True, relu=False):
    x = _vi("x", [1, cin, 16, 16])
    w = numpy_helper.from_array(_w(rng, (cout, cin // group, k, k), cin // group * k * k), "w")
    inits, inputs = [w], ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(cout) * 0.1).astype(np.float32), "b"))
        inputs.append("b")
    pad = k // 2
    nodes = [helper.make_node("Conv", inputs, ["c" if relu else "y"], kernel_shape=[k, k],
                              pads=[pad] * 4, strides=[stride] * 2, group=group)]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    return nodes, [x], inits, ["Conv", "Relu"] if relu else ["Conv"], True


def _gemm(rng):
    w = numpy_helper.from_array(_w(rng, (16, 32), 32), "w")
    b = numpy_helper.from_array((rng.standard_normal(16) * 0.1).astype(np.float32), "b")
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)
    return [node], [_vi("x", [4, 32])], [w, b], ["Gemm"], True


def _matmul(rng):
    w = numpy_helper.from_array(_w(rng, (32, 16), 32), "w")
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    return [node], [_vi("x", [1, 8, 32])], [w], ["MatMul"], True


def _binary(op):
    def build(rng):
        del rng
        node = helper.make_node(op, ["a", "b"], ["y"])
        return [node], [_vi("a", [1, 8, 8, 8]), _vi("b", [1, 8, 8, 8])], [], [op], False
    return build


def _unary(op, shape=(1, 8, 8, 8), **attrs):
    def build(rng):
        del rng
        node = helper.make_node(op, ["x"], ["y"], **attrs)
        return [node], [_vi("x", list(shape))], [], [op], False
    return build


def _concat(rng):
    del rng
    node = helper.make_node("Concat", ["a", "b"], ["y"], axis=1)
    return [node], [_vi("a", [1, 8, 8, 8]), _vi("b", [1, 4, 8, 8])], [], ["Concat"], False


def _reshape(rng):
    del rng
    shape = numpy_helper.from_array(np.array([1, 8, 16], np.int64), "shape")
    node = helper.make_node("Reshape", ["x", "shape"], ["y"])
    return [node], [_vi("x", [1, 8, 4, 4])], [shape], ["Reshape"], False


def _resize(rng):
    del rng
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")
    return [node], [_vi("x", [1, 8, 8, 8])], [scales], ["Resize"], False


def _convtranspose(rng, k, stride, pads):
    """ConvTranspose 8 -> 6 channels on 8x8 (k == stride: the 1x1 + DepthToSpace lowering)."""
    x = _vi("x", [1, 8, 8, 8])
    w = numpy_helper.from_array(_w(rng, (8, 6, k, k), 8 * k * k), "w")
    b = numpy_helper.from_array((rng.standard_normal(6) * 0.1).astype(np.float32), "b")
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[k, k],
                            strides=[stride] * 2, pads=pads)
    return [node], [x], [w, b], ["ConvTranspose"], True


def _conv_resize_conv(rng):
    """Conv -> nearest Resize x2 -> Conv: the Resize runs channels-last between the convs."""
    w1 = numpy_helper.from_array(_w(rng, (8, 4, 3, 3), 36), "w1")
    w2 = numpy_helper.from_array(_w(rng, (4, 8, 1, 1), 8), "w2")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Resize", ["c1", "", "scales"], ["r"], mode="nearest",
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
             helper.make_node("Conv", ["r", "w2"], ["y"], kernel_shape=[1, 1])]
    return nodes, [_vi("x", [1, 4, 8, 8])], [w1, w2, scales], ["Conv", "Resize"], True


def _conv_lrn_conv(rng, maxpool):
    """Conv -> LRN [-> MaxPool] -> Conv, AlexNet's and ZFNet's pattern: quantize_static
    leaves the LRN (and the MaxPool after it) float between the convolutions' Q/DQ."""
    w1 = numpy_helper.from_array(_w(rng, (24, 4, 3, 3), 36), "w1")
    w2 = numpy_helper.from_array(_w(rng, (8, 24, 1, 1), 24), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("LRN", ["c1"], ["n" if maxpool else "p"], size=5, alpha=0.05,
                              beta=0.75, bias=1.0)]
    if maxpool:
        nodes.append(helper.make_node("MaxPool", ["n"], ["p"], kernel_shape=[3, 3],
                                      strides=[2, 2]))
    nodes.append(helper.make_node("Conv", ["p", "w2"], ["y"], kernel_shape=[1, 1]))
    return nodes, [_vi("x", [1, 4, 12, 12])], [w1, w2], ["Conv"], True


# name -> builder(rng) returning (nodes, inputs, initializers, op types to quantize, has weights)
OP_MODELS = {
    "conv3x3_bias": lambda r: _conv(r, "conv3x3_bias", 8, 16, 3),
    "conv1x1": lambda r: _conv(r, "conv1x1", 16, 8, 1, bias=False),
    "conv_depthwise": lambda r: _conv(r, "conv_depthwise", 8, 8, 3, group=8, stride=2),
    "conv_relu": lambda r: _conv(r, "conv_relu", 8, 16, 3, relu=True),
    "gemm_transb_bias": _gemm,
    "matmul_const": _matmul,
    "add": _binary("Add"),
    "mul": _binary("Mul"),
    "globalaveragepool": _unary("GlobalAveragePool"),
    # 16x16 inputs: 512 outputs, so the ">= 99% exact" criterion allows a few rounding ties.
    "averagepool": _unary("AveragePool", shape=(1, 8, 16, 16), kernel_shape=[3, 3],
                          strides=[2, 2], pads=[1, 1, 1, 1]),
    "maxpool": _unary("MaxPool", shape=(1, 8, 16, 16), kernel_shape=[3, 3], strides=[2, 2],
                      pads=[1, 1, 1, 1]),
    "concat": _concat,
    "reshape": _reshape,
    "transpose": _unary("Transpose", perm=[0, 2, 3, 1]),
    "sigmoid": _unary("Sigmoid"),
    "hardswish": _unary("HardSwish"),
    "leakyrelu": _unary("LeakyRelu", alpha=0.1),
    "resize_nearest": _resize,
    "convtranspose_k2s2": lambda r: _convtranspose(r, 2, 2, [0, 0, 0, 0]),
    "convtranspose_k3s2": lambda r: _convtranspose(r, 3, 2, [1, 1, 1, 1]),
    "conv_resize_conv": _conv_resize_conv,
    "conv_lrn_conv": lambda r: _conv_lrn_conv(r, maxpool=False),
    "conv_lrn_maxpool_conv": lambda r: _conv_lrn_conv(r, maxpool=True),
}


def build_op_model(name, path):
    """Writes the float one-operator model; returns (op types to quantize, has weights)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    nodes, inputs, inits, op_types, has_weights = OP_MODELS[name](rng)
    graph = helper.make_graph(nodes, f"op_{name}", inputs, [_vi("y", None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPS_OPSET)],
                              producer_name="qfold quantize_models.py")
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    # Give the output its inferred type/shape (the quantizer needs a typed output).
    inferred = {vi.name: vi for vi in model.graph.value_info}
    if "y" in inferred:
        model.graph.output[0].CopyFrom(inferred["y"])
        model.graph.value_info.remove(inferred["y"])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return op_types, has_weights


def make_ops(out_dir, tmp):
    ops_dir = os.path.join(out_dir, "ops")
    os.makedirs(ops_dir, exist_ok=True)
    written = []
    for name in OP_MODELS:
        fp32 = os.path.join(tmp, f"op_{name}.onnx")
        op_types, has_weights = build_op_model(name, fp32)
        variants = OP_VARIANTS_PT + (OP_VARIANTS_PC if has_weights else [])
        if name in QOP_CONTRIB_OPS:
            variants = variants + OP_VARIANTS_QOP
        for v in variants:
            dst = os.path.join(ops_dir, f"op_{name}.{v.name}.onnx")
            quantize(fp32, dst, v, seed=zlib.crc32(f"calib:{name}".encode()), op_types=op_types,
                     force=True)
            cut_trailing_dequantize(dst)
            written.append(dst)
    return written


def make_whole(src_dir, out_dir, tmp):
    written = []
    for name in WHOLE_MODELS:
        src = os.path.join(src_dir, name + ".onnx")
        pre = os.path.join(tmp, name + ".pre.onnx")
        preprocess(src, pre)
        for v in VARIANTS:
            dst = os.path.join(out_dir, f"{name}.{v.name}.onnx")
            quantize(pre, dst, v, seed=zlib.crc32(f"calib:{name}".encode()))
            written.append(dst)
    return written


def summarize(path):
    model = onnx.load(path)
    counts = {}
    for n in model.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    q = counts.get("QuantizeLinear", 0)
    dq = counts.get("DequantizeLinear", 0)
    ins = ",".join(f"{vi.name}" for vi in graph_inputs(model))
    return f"{len(model.graph.node)} nodes ({q} Q, {dq} DQ), inputs {ins}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("--src", default="models", help="directory with the float models")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--ops", action="store_true", help="also build the one-operator models")
    ap.add_argument("--no-models", action="store_true",
                    help="skip the whole models (with --ops: only the one-operator models)")
    args = ap.parse_args()
    # The quantizer logs a pre-processing hint and per-tensor notes at WARNING level.
    logging.getLogger().setLevel(logging.ERROR)

    start = time.monotonic()
    os.makedirs(args.out, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(prefix="qfold-quant-") as tmp:
        if not args.no_models:
            written += make_whole(args.src, args.out, tmp)
        if args.ops:
            written += make_ops(args.out, tmp)
    for path in written:
        print(f"{os.path.relpath(path, args.out)}: {summarize(path)}")
    print(f"wrote {len(written)} models to {args.out} in {time.monotonic() - start:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
