#!/usr/bin/env python3
"""Builds the small test models in models/ (deterministic: fixed seeds, onnx.helper + numpy only).

Usage: python scripts/make_models.py --out models/

Each model is checked with onnx.checker (full_check, so shape inference runs too) and run once
through onnxruntime, so a broken builder fails here rather than in the end-to-end tests. Weights
use He initialization and mild BatchNorm statistics so activations stay in a realistic range
(the printed output statistics show it); a model whose outputs were all ~0 or saturated would make
the ONNX Runtime comparison meaningless.
"""

import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MAX_BYTES = 1_500_000


class GraphBuilder:
    """Accumulates nodes and initializers with unique, readable names."""

    def __init__(self, name, seed, dtype=np.float32):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.dtype = dtype
        self.nodes = []
        self.initializers = []
        self.counts = {}

    def unique(self, base):
        n = self.counts.get(base, 0)
        self.counts[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    def const(self, base, array):
        name = self.unique(base)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op, inputs, base=None, num_outputs=1, **attrs):
        base = base or op.lower()
        node_name = self.unique(base)
        outputs = [node_name if num_outputs == 1 else f"{node_name}_out{i}" for i in range(num_outputs)]
        self.nodes.append(helper.make_node(op, inputs, outputs, name=node_name, **attrs))
        return outputs[0] if num_outputs == 1 else outputs

    # Weight helpers ------------------------------------------------------------------------

    def he(self, shape, fan_in):
        return (self.rng.standard_normal(shape) * math.sqrt(2.0 / fan_in)).astype(self.dtype)

    def conv(self, x, cin, cout, k, stride=1, pad=0, group=1, bias=False, base="conv"):
        w = self.he((cout, cin // group, k, k), (cin // group) * k * k)
        inputs = [x, self.const(base + ".weight", w)]
        if bias:
            b = (self.rng.standard_normal(cout) * 0.05).astype(self.dtype)
            inputs.append(self.const(base + ".bias", b))
        return self.node("Conv", inputs, base, kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad] * 4, group=group)

    def bn(self, x, c, gamma_scale=1.0, base="bn"):
        # Running statistics close to what a trained net would hold for He-initialized inputs:
        # mean near 0, variance near 1, so BN neither blows activations up nor squashes them.
        gamma = (gamma_scale * self.rng.uniform(0.8, 1.2, c)).astype(self.dtype)
        beta = (self.rng.standard_normal(c) * 0.1).astype(self.dtype)
        mean = (self.rng.standard_normal(c) * 0.1).astype(self.dtype)
        var = self.rng.uniform(0.5, 1.5, c).astype(self.dtype)
        names = [self.const(f"{base}.{p}", a)
                 for p, a in (("scale", gamma), ("bias", beta), ("mean", mean), ("var", var))]
        return self.node("BatchNormalization", [x] + names, base, epsilon=1e-5)

    def model(self, inputs, outputs, opset):
        graph = helper.make_graph(self.nodes, self.name, inputs, outputs, self.initializers)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="qfold-make_models")
        m.ir_version = 8  # onnxruntime accepts up to 10; 8 is what opset 13..17 exporters write
        return m


# MobileNetV2-like ------------------------------------------------------------------------------

def mobilenetv2_like():
    g = GraphBuilder("mobilenetv2_like", seed=1)
    relu6_min = g.const("relu6.min", np.array(0.0, np.float32))
    relu6_max = g.const("relu6.max", np.array(6.0, np.float32))

    def relu6(x):
        return g.node("Clip", [x, relu6_min, relu6_max], "relu6")

    x = relu6(g.bn(g.conv("input", 3, 16, 3, stride=2, pad=1, base="stem.conv"), 16, base="stem.bn"))
    c = 16
    # (expansion, out channels, depthwise stride); residual when stride 1 and channels match.
    blocks = [(1, 16, 1), (4, 24, 2), (4, 24, 1), (4, 32, 2), (4, 32, 1), (4, 48, 1)]
    for i, (t, cout, s) in enumerate(blocks):
        p = f"block{i}"
        h = x
        hidden = c * t
        if t != 1:
            h = relu6(g.bn(g.conv(h, c, hidden, 1, base=p + ".expand"), hidden, base=p + ".expand_bn"))
        h = g.conv(h, hidden, hidden, 3, stride=s, pad=1, group=hidden, base=p + ".dw")
        h = relu6(g.bn(h, hidden, base=p + ".dw_bn"))
        # Smaller gamma on the linear projection, as trained residual nets tend to have.
        h = g.bn(g.conv(h, hidden, cout, 1, base=p + ".project"), cout, gamma_scale=0.5,
                 base=p + ".project_bn")
        if s == 1 and cout == c:
            h = g.node("Add", [x, h], p + ".add")
        x, c = h, cout
    x = relu6(g.bn(g.conv(x, c, 128, 1, base="head.conv"), 128, base="head.bn"))
    x = g.node("GlobalAveragePool", [x], "gap")
    x = g.node("Flatten", [x], "flatten", axis=1)
    w = (g.rng.standard_normal((10, 128)) * math.sqrt(1.0 / 128)).astype(np.float32)
    b = (g.rng.standard_normal(10) * 0.1).astype(np.float32)
    x = g.node("Gemm", [x, g.const("fc.weight", w), g.const("fc.bias", b)], "fc", transB=1)
    g.nodes.append(helper.make_node("Softmax", [x], ["probs"], name="softmax", axis=-1))
    return g.model([helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 64, 64])],
                   [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])], opset=13)


# ResNet-like -----------------------------------------------------------------------------------

def resnet_like():
    g = GraphBuilder("resnet_like", seed=2)
    x = g.node("Relu", [g.bn(g.conv("input", 3, 16, 7, stride=2, pad=3, base="conv1"), 16,
                             base="bn1")], "relu1")
    x = g.node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])

    def basic_block(x, cin, cout, stride, p):
        h = g.conv(x, cin, cout, 3, stride=stride, pad=1, base=p + ".conv1")
        h = g.node("Relu", [g.bn(h, cout, base=p + ".bn1")], p + ".relu1")
        h = g.bn(g.conv(h, cout, cout, 3, pad=1, base=p + ".conv2"), cout, gamma_scale=0.5,
                 base=p + ".bn2")
        shortcut = x
        if stride != 1 or cin != cout:
            shortcut = g.bn(g.conv(x, cin, cout, 1, stride=stride, base=p + ".downsample.conv"),
                            cout, base=p + ".downsample.bn")
        return g.node("Relu", [g.node("Add", [h, shortcut], p + ".add")], p + ".relu2")

    x = basic_block(x, 16, 16, 1, "layer1.0")
    x = basic_block(x, 16, 16, 1, "layer1.1")
    x = basic_block(x, 16, 32, 2, "layer2.0")
    x = basic_block(x, 32, 32, 1, "layer2.1")
    x = g.node("GlobalAveragePool", [x], "gap")
    shape = g.node("Constant", [], "flatten_shape",
                   value=numpy_helper.from_array(np.array([1, -1], np.int64)))
    x = g.node("Reshape", [x, shape], "flatten")
    w = (g.rng.standard_normal((10, 32)) * math.sqrt(1.0 / 32)).astype(np.float32)
    b = (g.rng.standard_normal(10) * 0.1).astype(np.float32)
    g.nodes.append(helper.make_node("Gemm", [x, g.const("fc.weight", w), g.const("fc.bias", b)],
                                    ["logits"], name="fc", transB=1))
    return g.model([helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 64, 64])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], opset=13)


# Transformer encoder ---------------------------------------------------------------------------

SEQ, HIDDEN, HEADS, HEAD_DIM, FFN = 16, 64, 4, 16, 256


def transformer_encoder():
    g = GraphBuilder("transformer_encoder", seed=3)
    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    f32 = lambda v: np.array(v, np.float32)  # noqa: E731

    def linear(x, din, dout, p):
        # Xavier-like scale for the linear layers of a transformer.
        w = (g.rng.standard_normal((din, dout)) * math.sqrt(1.0 / din)).astype(np.float32)
        b = (g.rng.standard_normal(dout) * 0.02).astype(np.float32)
        h = g.node("MatMul", [x, g.const(p + ".weight", w)], p + ".matmul")
        return g.node("Add", [h, g.const(p + ".bias", b)], p + ".add")

    def layer_norm(x, p):
        scale = g.rng.uniform(0.9, 1.1, HIDDEN).astype(np.float32)
        bias = (g.rng.standard_normal(HIDDEN) * 0.02).astype(np.float32)
        return g.node("LayerNormalization",
                      [x, g.const(p + ".scale", scale), g.const(p + ".bias", bias)], p,
                      axis=-1, epsilon=1e-5)

    def dynamic_head_shape(x, p):
        # What torch.onnx emits for x.view(x.size(0), x.size(1), heads, head_dim): a chain that
        # only constant folding (with the static input shape) reduces to a constant.
        shape = g.node("Shape", [x], p + ".shape")
        dims = []
        for axis in (0, 1):
            d = g.node("Gather", [shape, g.const(f"{p}.idx{axis}", np.array(axis, np.int64))],
                       f"{p}.gather{axis}", axis=0)
            dims.append(g.node("Unsqueeze", [d, g.const(f"{p}.unsq_axes{axis}", i64(0))],
                               f"{p}.unsqueeze{axis}"))
        heads = g.const(p + ".heads", i64(HEADS))
        head_dim = g.const(p + ".head_dim", i64(HEAD_DIM))
        return g.node("Concat", dims + [heads, head_dim], p + ".concat", axis=0)

    x = "tokens"
    for layer in range(2):
        p = f"layer{layer}"
        h = layer_norm(x, p + ".ln1")
        if layer == 0:
            head_shape = dynamic_head_shape(h, p + ".attn")
        else:
            # Reshape's 0 (copy the input dim) form, as other exporters write it.
            head_shape = g.const(p + ".attn.head_shape", i64(0, 0, HEADS, HEAD_DIM))
        heads = {}
        for name, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
            t = linear(h, HIDDEN, HIDDEN, f"{p}.attn.{name}")
            t = g.node("Reshape", [t, head_shape], f"{p}.attn.{name}_reshape")
            heads[name] = g.node("Transpose", [t], f"{p}.attn.{name}_transpose", perm=perm)
        scores = g.node("MatMul", [heads["q"], heads["k"]], p + ".attn.qk")
        if layer == 0:
            scores = g.node("Mul", [scores, g.const(p + ".attn.scale",
                                                    f32(1.0 / math.sqrt(HEAD_DIM)))], p + ".attn.scale")
        else:
            scores = g.node("Div", [scores, g.const(p + ".attn.sqrt_d", f32(math.sqrt(HEAD_DIM)))],
                            p + ".attn.scale")
        probs = g.node("Softmax", [scores], p + ".attn.softmax", axis=-1)
        ctx = g.node("MatMul", [probs, heads["v"]], p + ".attn.context")
        ctx = g.node("Transpose", [ctx], p + ".attn.context_transpose", perm=[0, 2, 1, 3])
        merged_shape = g.const(p + ".attn.merged_shape", i64(1, SEQ, HIDDEN))
        ctx = g.node("Reshape", [ctx, merged_shape], p + ".attn.merge")
        attn_out = linear(ctx, HIDDEN, HIDDEN, p + ".attn.out")
        x = g.node("Add", [x, attn_out], p + ".residual1")

        h = layer_norm(x, p + ".ln2")
        h = linear(h, HIDDEN, FFN, p + ".ffn.fc1")
        # Gelu as torch exports it for opsets without a Gelu op.
        e = g.node("Div", [h, g.const(p + ".gelu.sqrt2", f32(math.sqrt(2.0)))], p + ".gelu.div")
        e = g.node("Erf", [e], p + ".gelu.erf")
        e = g.node("Add", [e, g.const(p + ".gelu.one", f32(1.0))], p + ".gelu.add")
        e = g.node("Mul", [h, e], p + ".gelu.mul")
        h = g.node("Mul", [e, g.const(p + ".gelu.half", f32(0.5))], p + ".gelu.half")
        h = linear(h, FFN, HIDDEN, p + ".ffn.fc2")
        x = g.node("Add", [x, h], p + ".residual2")

    g.nodes.append(helper.make_node("Identity", [x], ["output"], name="output"))
    io = [1, SEQ, HIDDEN]
    return g.model([helper.make_tensor_value_info("tokens", TensorProto.FLOAT, io)],
                   [helper.make_tensor_value_info("output", TensorProto.FLOAT, io)], opset=17)


# float16 conv net ------------------------------------------------------------------------------

def fp16_convnet():
    g = GraphBuilder("fp16_convnet", seed=4, dtype=np.float16)
    x = g.conv("input", 3, 8, 3, pad=1, bias=True, base="conv1")
    x = g.node("Relu", [x], "relu1")
    x = g.node("MaxPool", [x], "maxpool", kernel_shape=[2, 2], strides=[2, 2])
    h = g.conv(x, 8, 8, 3, pad=1, bias=True, base="conv2")
    x = g.node("Add", [x, h], "add")
    g.nodes.append(helper.make_node("GlobalAveragePool", [x], ["output"], name="gap"))
    return g.model([helper.make_tensor_value_info("input", TensorProto.FLOAT16, [1, 3, 32, 32])],
                   [helper.make_tensor_value_info("output", TensorProto.FLOAT16, [1, 8, 1, 1])],
                   opset=13)


# Dynamic-shape conv net ------------------------------------------------------------------------

def dynamic_convnet():
    g = GraphBuilder("dynamic_convnet", seed=5)
    x = g.node("Relu", [g.conv("input", 3, 8, 3, pad=1, bias=True, base="conv1")], "relu1")
    scales = g.const("upsample.scales", np.array([1.0, 1.0, 2.0, 2.0], np.float32))
    x = g.node("Resize", [x, "", scales], "upsample", mode="nearest")
    g.nodes.append(helper.make_node(
        "Conv", [x, g.const("conv2.weight", g.he((4, 8, 3, 3), 8 * 9)),
                 g.const("conv2.bias", (g.rng.standard_normal(4) * 0.05).astype(np.float32))],
        ["output"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    return g.model(
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT,
                                       ["batch", 4, "out_height", "out_width"])],
        opset=13)


# Detector stem at 416x416 ------------------------------------------------------------------------

def detector_stem():
    """A YOLO-style stem at the (1,3,416,416) size detectors ship with: the size must survive
    conversion unchanged (NCHW, batch 1 first), float and quantized."""
    g = GraphBuilder("detector_stem", seed=7)
    x = g.node("Relu", [g.conv("images", 3, 8, 3, stride=2, pad=1, bias=True, base="stem")], "r1")
    x = g.node("Relu", [g.conv(x, 8, 16, 3, stride=2, pad=1, bias=True, base="down")], "r2")
    y = g.node("Sigmoid", [g.conv(x, 16, 16, 1, bias=True, base="mix")], "gate")
    x = g.node("Mul", [x, y], "attend")
    g.nodes.append(helper.make_node(
        "Conv", [x, g.const("head.weight", g.he((6, 16, 1, 1), 16)),
                 g.const("head.bias", (g.rng.standard_normal(6) * 0.05).astype(np.float32))],
        ["boxes"], name="head", kernel_shape=[1, 1]))
    return g.model([helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 416, 416])],
                   [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 6, 104, 104])],
                   opset=13)


# Weight-only int4 MLP ---------------------------------------------------------------------------

def int4_weight_mlp():
    """Two MatMuls whose weights are int4 and uint4, quantized in blocks of 32 along K (the
    layout weight-only LLM quantizers write), with a short last block (K = 80), then a Gemm
    (transB=1, bias, beta=0.5) whose int4 weight [N, K] is blocked along its axis 1."""
    rng = np.random.default_rng(6)
    inits, nodes = [], []
    x, k = "input", 80
    for i, (dt, lo, hi, n) in enumerate(((TensorProto.INT4, -8, 7, 48),
                                         (TensorProto.UINT4, 0, 15, 40))):
        blocks = (k + 31) // 32
        w = rng.integers(lo, hi + 1, size=(k, n))
        zp = rng.integers(lo, hi + 1, size=(blocks, n))
        scale = (rng.random((blocks, n)) * 0.05 + 0.01).astype(np.float32)
        inits += [helper.make_tensor(f"w{i}", dt, [k, n], w.flatten().tolist()),
                  helper.make_tensor(f"w{i}.zero_point", dt, [blocks, n], zp.flatten().tolist()),
                  numpy_helper.from_array(scale, f"w{i}.scale")]
        nodes.append(helper.make_node("DequantizeLinear", [f"w{i}", f"w{i}.scale",
                                                           f"w{i}.zero_point"], [f"w{i}.float"],
                                      name=f"dq{i}", axis=0, block_size=32))
        y = f"h{i}"
        nodes.append(helper.make_node("MatMul", [x, f"w{i}.float"], [y], name=f"matmul{i}"))
        x, k = y, n
    # Gemm: A [10, 40] (2-D), B int4 [16, 40] blocked along K (axis 1), C [16].
    n, blocks = 16, (k + 15) // 16
    w = rng.integers(-8, 8, size=(n, k))
    scale = (rng.random((n, blocks)) * 0.05 + 0.01).astype(np.float32)
    inits += [helper.make_tensor("w2", TensorProto.INT4, [n, k], w.flatten().tolist()),
              numpy_helper.from_array(scale, "w2.scale"),
              numpy_helper.from_array((rng.standard_normal(n)).astype(np.float32), "gemm.bias"),
              numpy_helper.from_array(np.array([10, k], np.int64), "flat.shape"),
              numpy_helper.from_array(np.array([2, 5, n], np.int64), "out.shape")]
    nodes += [helper.make_node("DequantizeLinear", ["w2", "w2.scale"], ["w2.float"], name="dq2",
                               axis=1, block_size=16),
              helper.make_node("Reshape", [x, "flat.shape"], ["flat"], name="flatten"),
              helper.make_node("Gemm", ["flat", "w2.float", "gemm.bias"], ["gemm"], name="gemm",
                               transB=1, beta=0.5),
              helper.make_node("Reshape", ["gemm", "out.shape"], ["output"], name="unflatten")]
    graph = helper.make_graph(nodes, "int4_weight_mlp",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [2, 5, 80])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [2, 5, 16])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                             producer_name="qfold make_models.py")


def pack_codes(codes, bits):
    """uint8 bytes of `bits`-bit codes packed low bits first along the last axis (MatMulNBits)."""
    per = 8 // bits
    c = codes.reshape(*codes.shape[:-1], -1, per).astype(np.uint8)
    out = np.zeros(c.shape[:-1], np.uint8)
    for i in range(per):
        out |= c[..., i] << (i * bits)
    return out


def matmul_nbits_mlp():
    """Three com.microsoft MatMulNBits in the layout ONNX Runtime's weight-only quantizer writes
    (B [N, k_blocks, block_size * bits / 8] packed low bits first along K, scales [N, k_blocks]):
    4-bit with packed uint8 zero points and a short last block (K = 80, blocks of 32) and
    accuracy_level 4 (A may be quantized to int8: ONNX Runtime and qfold both do), 8-bit without
    zero points (the default 128) and with a bias, 2-bit with float zero points."""
    rng = np.random.default_rng(11)
    inits, nodes = [], []
    x, k = "input", 80
    for i, (bits, block, n, zp_kind, bias) in enumerate(((4, 32, 48, "packed", False),
                                                         (8, 16, 40, None, True),
                                                         (2, 16, 24, "float", False))):
        blocks = (k + block - 1) // block
        codes = rng.integers(0, 2 ** bits, size=(n, blocks * block))
        codes[:, k:] = 0  # the padding past K
        inits.append(numpy_helper.from_array(
            pack_codes(codes.reshape(n, blocks, block), bits), f"w{i}.packed"))
        scale = (rng.random((n, blocks)) * 0.05 + 0.01).astype(np.float32)
        inits.append(numpy_helper.from_array(scale, f"w{i}.scales"))
        ins = [x, f"w{i}.packed", f"w{i}.scales"]
        zp = rng.integers(0, 2 ** bits, size=(n, blocks))
        if zp_kind == "packed":
            per = 8 // bits
            padded = np.zeros((n, (blocks + per - 1) // per * per), np.int64)
            padded[:, :blocks] = zp
            inits.append(numpy_helper.from_array(pack_codes(padded, bits), f"w{i}.zero_points"))
            ins.append(f"w{i}.zero_points")
        elif zp_kind == "float":
            inits.append(numpy_helper.from_array(zp.astype(np.float32), f"w{i}.zero_points"))
            ins.append(f"w{i}.zero_points")
        if bias:
            ins += ["", "", f"w{i}.bias"] if zp_kind is None else ["", f"w{i}.bias"]
            inits.append(numpy_helper.from_array(rng.standard_normal(n).astype(np.float32),
                                                 f"w{i}.bias"))
        y = f"h{i}"
        extra = {"accuracy_level": 4} if i == 0 else {}
        nodes.append(helper.make_node("MatMulNBits", ins, [y], name=f"matmul{i}",
                                      domain="com.microsoft", K=k, N=n, bits=bits,
                                      block_size=block, **extra))
        if i < 2:
            nodes.append(helper.make_node("Relu", [y], [y + ".relu"], name=f"relu{i}"))
            y += ".relu"
        x, k = y, n
    nodes[-1].output[0] = "output"
    graph = helper.make_graph(nodes, "matmul_nbits_mlp",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [2, 5, 80])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [2, 5, 24])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("com.microsoft", 1)],
                             producer_name="qfold make_models.py")


# Recurrent models ------------------------------------------------------------------------------

def lstm_weights(g, gates, hidden, inputs, dirs, base):
    """W, R, B initializers as PyTorch initializes recurrent layers: uniform(+-1/sqrt(hidden))."""
    k = 1.0 / math.sqrt(hidden)

    def u(shape):
        return g.rng.uniform(-k, k, shape).astype(np.float32)

    return [g.const(base + ".W", u((dirs, gates * hidden, inputs))),
            g.const(base + ".R", u((dirs, gates * hidden, hidden))),
            g.const(base + ".B", u((dirs, 2 * gates * hidden)))]


def crnn_text():
    """A CRNN text recognizer: a conv stack over a 32x100 grayscale line, the columns as a
    sequence into a bidirectional LSTM, a per-step Gemm over 37 classes and LogSoftmax (the
    CTC-style output captcha/OCR recognizers ship)."""
    g = GraphBuilder("crnn_text", seed=8)
    x = g.node("Relu", [g.conv("image", 1, 16, 3, pad=1, bias=True, base="conv1")], "relu1")
    x = g.node("MaxPool", [x], "pool1", kernel_shape=[2, 2], strides=[2, 2])
    x = g.node("Relu", [g.bn(g.conv(x, 16, 32, 3, pad=1, base="conv2"), 32, base="bn2")], "relu2")
    x = g.node("MaxPool", [x], "pool2", kernel_shape=[2, 2], strides=[2, 2])
    x = g.node("Relu", [g.bn(g.conv(x, 32, 64, 3, pad=1, base="conv3"), 64, base="bn3")], "relu3")
    x = g.node("MaxPool", [x], "pool3", kernel_shape=[2, 1], strides=[2, 1])  # (1, 64, 4, 25)
    # Columns become time steps: (N, C, H, W) -> (N, C*H, W) -> (W, N, C*H).
    x = g.node("Reshape", [x, g.const("seq.shape", np.array([1, 256, 25], np.int64))], "to_seq")
    x = g.node("Transpose", [x], "time_major", perm=[2, 0, 1])
    y = g.node("LSTM", [x] + lstm_weights(g, 4, 64, 256, 2, "blstm"), "blstm", num_outputs=1,
               hidden_size=64, direction="bidirectional")  # Y (25, 2, 1, 64)
    y = g.node("Transpose", [y], "join_dirs", perm=[0, 2, 1, 3])
    y = g.node("Reshape", [y, g.const("steps.shape", np.array([25, 128], np.int64))], "steps")
    w = (g.rng.standard_normal((37, 128)) * 3 * math.sqrt(1.0 / 128)).astype(np.float32)
    b = (g.rng.standard_normal(37) * 0.1).astype(np.float32)
    y = g.node("Gemm", [y, g.const("classifier.weight", w), g.const("classifier.bias", b)],
               "classifier", transB=1)
    g.nodes.append(helper.make_node("LogSoftmax", [y], ["log_probs"], name="log_softmax", axis=1))
    return g.model([helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 32, 100])],
                   [helper.make_tensor_value_info("log_probs", TensorProto.FLOAT, [25, 37])],
                   opset=14)


def gru_kws():
    """A GRU keyword spotter: 49 frames of 40 MFCCs, two stacked GRUs (linear_before_reset as
    PyTorch exports them), the last hidden state into a Gemm over 12 keywords, Softmax."""
    g = GraphBuilder("gru_kws", seed=9)
    x = g.node("Transpose", ["mfcc"], "time_major", perm=[1, 0, 2])  # (49, 1, 40)
    y = g.node("GRU", [x] + lstm_weights(g, 3, 64, 40, 1, "gru1"), "gru1", num_outputs=1,
               hidden_size=64, linear_before_reset=1)  # Y (49, 1, 1, 64)
    y = g.node("Squeeze", [y, g.const("dir.axis", np.array([1], np.int64))], "drop_dir")
    # Y omitted, Y_h (1, 1, 64) is also a graph output (the state a streaming caller keeps).
    g.nodes.append(helper.make_node("GRU", [y] + lstm_weights(g, 3, 64, 64, 1, "gru2"),
                                    ["", "state"], name="gru2", hidden_size=64,
                                    linear_before_reset=1))
    h = g.node("Reshape", ["state", g.const("state.shape", np.array([1, 64], np.int64))], "flat")
    w = (g.rng.standard_normal((12, 64)) * 4 * math.sqrt(1.0 / 64)).astype(np.float32)
    b = (g.rng.standard_normal(12) * 0.1).astype(np.float32)
    y = g.node("Gemm", [h, g.const("fc.weight", w), g.const("fc.bias", b)], "fc", transB=1)
    g.nodes.append(helper.make_node("Softmax", [y], ["probs"], name="softmax", axis=-1))
    return g.model([helper.make_tensor_value_info("mfcc", TensorProto.FLOAT, [1, 49, 40])],
                   [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 12]),
                    helper.make_tensor_value_info("state", TensorProto.FLOAT, [1, 1, 64])],
                   opset=14)


def loop_decoder():
    """A greedy decoder: a Loop of at most 16 steps carrying a GRU state and the last token; each
    step embeds the token, adds a projection of the encoder vector (read from the enclosing
    graph), runs one GRU step and a MatMul to 40 logits, and picks the ArgMax; the loop stops
    after emitting the end token 4. Scan outputs: the logits and tokens of every step."""
    g = GraphBuilder("loop_decoder", seed=21)
    hidden, embed, vocab, steps = 64, 32, 40, 16
    wi = g.he((32, hidden), 32)
    h0 = g.node("Tanh", [g.node("MatMul", ["enc", g.const("init.weight", wi)], "init")], "h0")
    h0 = g.node("Reshape", [h0, g.const("h0.shape", np.array([1, 1, hidden], np.int64))], "h0_3d")
    enc_proj = g.node("MatMul", ["enc", g.const("enc_proj.weight", g.he((32, embed), 32))],
                      "enc_proj")
    # The body has its own builder: its names and initializers live in the subgraph.
    b = GraphBuilder("step", seed=22)
    b.rng = g.rng
    emb = (g.rng.standard_normal((vocab, embed)) * 0.5).astype(np.float32)
    x = b.node("Gather", [b.const("embedding", emb), "token_in"], "embed", axis=0)  # (1, E)
    x = b.node("Add", [x, enc_proj], "with_context")
    x = b.node("Reshape", [x, b.const("x.shape", np.array([1, 1, embed], np.int64))], "x_3d")
    b.nodes.append(helper.make_node("GRU", [x] + lstm_weights(b, 3, hidden, embed, 1, "cell")
                                    + ["", "h_in"], ["", "h_out"], name="cell",
                                    hidden_size=hidden, linear_before_reset=1))
    h = b.node("Reshape", ["h_out", b.const("h.shape", np.array([1, hidden], np.int64))], "h_2d")
    wo = (g.rng.standard_normal((hidden, vocab)) * 2 * math.sqrt(1.0 / hidden)).astype(np.float32)
    b.nodes.append(helper.make_node("Gemm", [h, b.const("out.weight", wo),
                                             b.const("out.bias", np.zeros(vocab, np.float32))],
                                    ["logits"], name="out"))
    b.nodes.append(helper.make_node("ArgMax", ["logits"], ["token_out"], name="pick", axis=1,
                                    keepdims=0))
    end = b.node("Equal", ["token_out", b.const("eos", np.array([4], np.int64))], "is_end")
    keep = b.node("Not", [end], "keep")
    b.nodes.append(helper.make_node("Squeeze", [keep], ["cond_out"], name="cond"))
    b.nodes.append(helper.make_node("Identity", ["token_out"], ["token_scan"], name="emit"))
    body = helper.make_graph(
        b.nodes, "step",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [1, 1, hidden]),
         helper.make_tensor_value_info("token_in", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [1, 1, hidden]),
         helper.make_tensor_value_info("token_out", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, vocab]),
         helper.make_tensor_value_info("token_scan", TensorProto.INT64, [1])],
        b.initializers)
    g.nodes.append(helper.make_node(
        "Loop", [g.const("max_steps", np.array(steps, np.int64)),
                 g.const("start", np.array(True)), h0, g.const("bos", np.array([1], np.int64))],
        ["state", "last_token", "step_logits", "tokens"], name="decode", body=body))
    return g.model([helper.make_tensor_value_info("enc", TensorProto.FLOAT, [1, 32])],
                   [helper.make_tensor_value_info("step_logits", TensorProto.FLOAT,
                                                  ["steps", 1, vocab]),
                    helper.make_tensor_value_info("tokens", TensorProto.INT64, ["steps", 1]),
                    helper.make_tensor_value_info("state", TensorProto.FLOAT, [1, 1, hidden])],
                   opset=14)



# Ranking ops: TopK with a k read from the input's shape, ReverseSequence, NonZero -----------------

def ranking_ops():
    """Scores of shape (2, n): rounded to halves, so TopK sees ties (the lower index must come
    first). k = n // 2 comes from Shape, so it is a constant once n is fixed at conversion
    (`--dim n=12`) and computed at plan time otherwise. The 3 smallest per row, each row reversed
    over its first k (row 0) or 3 (row 1) entries, and the positions of scores above 1 (NonZero:
    a count known only at run time)."""
    g = GraphBuilder("ranking_ops", seed=23)
    q = g.node("Floor", [g.node("Mul", ["scores", g.const("two", np.array(2.0, np.float32))],
                                "double")], "rounded")
    n = g.node("Gather", [g.node("Shape", ["scores"], "shape"),
                          g.const("axis1", np.array([1], np.int64))], "n", axis=0)
    k = g.node("Div", [n, g.const("half", np.array(2, np.int64))], "k")
    g.nodes.append(helper.make_node("TopK", [q, k], ["top_values", "top_indices"], name="top",
                                    axis=-1))
    g.nodes.append(helper.make_node("TopK", [q, g.const("three", np.array([3], np.int64))],
                                    ["bottom_values", "bottom_indices"], name="bottom", axis=1,
                                    largest=0))
    lens = g.node("Concat", [k, g.const("row1_len", np.array([3], np.int64))], "lens", axis=0)
    g.nodes.append(helper.make_node("ReverseSequence", ["scores", lens], ["reversed"],
                                    name="reverse", batch_axis=0, time_axis=1))
    above = g.node("Greater", [q, g.const("one", np.array(1.0, np.float32))], "above")
    g.nodes.append(helper.make_node("NonZero", [above], ["positive_at"], name="where"))
    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    return g.model([helper.make_tensor_value_info("scores", f, [2, "n"])],
                   [helper.make_tensor_value_info("top_values", f, [2, "k"]),
                    helper.make_tensor_value_info("top_indices", i64, [2, "k"]),
                    helper.make_tensor_value_info("bottom_indices", i64, [2, 3]),
                    helper.make_tensor_value_info("reversed", f, [2, "n"]),
                    helper.make_tensor_value_info("positive_at", i64, [2, "count"])],
                   opset=13)


# Static sequences: split into sequences and taken apart again, as exports write them ------------

def static_sequences():
    """x (2, 6, 4) split into sequences three ways (chunks of one along axis 1, sizes [2, 4],
    chunks of 4 with a shorter last one) and along axis 2 without keepdims; elements picked by
    SequenceAt (a negative position too), rebuilt with SequenceConstruct, SequenceInsert and
    SequenceErase, joined by ConcatFromSequence (new_axis 0 and 1), and counted by
    SequenceLength. Every length is known at conversion, so qfold lowers it all to
    Split/Squeeze/Unsqueeze/Concat (converter/passes/lower_sequences.cc)."""
    g = GraphBuilder("static_sequences", seed=29)

    def const_i64(base, v):
        return g.const(base, np.array(v, np.int64))

    steps = g.node("SplitToSequence", ["x"], "steps", axis=1)
    g.nodes.append(helper.make_node("SequenceAt", [steps, const_i64("last", -1)], ["last_step"],
                                    name="last_step"))
    g.nodes.append(helper.make_node("SequenceLength", [steps], ["count"], name="count"))
    halves = g.node("SplitToSequence", ["x", const_i64("sizes", [2, 4])], "halves", axis=1)
    fours = g.node("SplitToSequence", ["x", const_i64("four", 4)], "fours", axis=1)
    columns = g.node("SplitToSequence", ["x"], "columns", axis=2, keepdims=0)
    g.nodes.append(helper.make_node("ConcatFromSequence", [columns], ["stacked"], name="stacked",
                                    axis=1, new_axis=1))
    first4 = g.node("SequenceAt", [fours, const_i64("zero", 0)], "first4")
    rest = g.node("Neg", [g.node("SequenceAt", [fours, const_i64("one", 1)], "rest")], "neg_rest")
    second = g.node("Relu", [g.node("SequenceAt", [halves, const_i64("one_", 1)], "second")],
                    "relu_second")
    pair = g.node("SequenceConstruct", [first4, second, first4], "pair")
    three = g.node("SequenceInsert", [pair, rest, const_i64("at1", 1)], "insert")
    kept = g.node("SequenceErase", [three], "erase_last")
    g.nodes.append(helper.make_node("ConcatFromSequence", [kept], ["joined"], name="joined",
                                    axis=1))
    f = TensorProto.FLOAT
    return g.model([helper.make_tensor_value_info("x", f, [2, 6, 4])],
                   [helper.make_tensor_value_info("last_step", f, [2, 1, 4]),
                    helper.make_tensor_value_info("count", TensorProto.INT64, []),
                    helper.make_tensor_value_info("stacked", f, [2, 4, 6]),
                    helper.make_tensor_value_info("joined", f, [2, 10, 4])],
                   opset=13)

def sequence_io():
    """A sequence graph input and sequence outputs, which run on sequence values
    (runtime/src/ops/sequence.cc): s (a sequence of float [?, 3]) and t [1, 3]; outputs
    grown = SequenceInsert(s, t), n = SequenceLength(s), all = ConcatFromSequence(s, axis 0).
    In models/sequences/ (the C API test reads it), apart from the tensor models of
    e2e_onnxruntime."""
    f = TensorProto.FLOAT
    elem = helper.make_sequence_type_proto(helper.make_tensor_type_proto(f, [None, 3]))
    nodes = [helper.make_node("SequenceInsert", ["s", "t"], ["grown"], name="grow"),
             helper.make_node("SequenceLength", ["s"], ["n"], name="length"),
             helper.make_node("ConcatFromSequence", ["s"], ["all"], name="join", axis=0)]
    graph = helper.make_graph(
        nodes, "sequence_io",
        [helper.make_value_info("s", elem), helper.make_tensor_value_info("t", f, [1, 3])],
        [helper.make_value_info("grown", elem),
         helper.make_tensor_value_info("n", TensorProto.INT64, []),
         helper.make_tensor_value_info("all", f, [None, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="qfold make_models.py")


MODELS = {
    "mobilenetv2_like": (mobilenetv2_like, {}),
    "resnet_like": (resnet_like, {}),
    "transformer_encoder": (transformer_encoder, {}),
    "fp16_convnet": (fp16_convnet, {}),
    "dynamic_convnet": (dynamic_convnet, {"batch": 2, "height": 20, "width": 24}),
    "int4_weight_mlp": (int4_weight_mlp, {}),
    "matmul_nbits_mlp": (matmul_nbits_mlp, {}),
    "detector_stem": (detector_stem, {}),
    "crnn_text": (crnn_text, {}),
    "gru_kws": (gru_kws, {}),
    "loop_decoder": (loop_decoder, {}),
    "ranking_ops": (ranking_ops, {"n": 12}),
    "static_sequences": (static_sequences, {}),
    "sequences/sequence_io": (sequence_io, {}),
}

NP_OF_ONNX = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16}


def smoke_run(model, dims):
    """Runs the model once in onnxruntime; returns a short description of each output."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for vi in model.graph.input:
        if vi.type.HasField("sequence_type"):  # two elements, unknown dims of 2
            tt = vi.type.sequence_type.elem_type.tensor_type
            shape = [d.dim_value if d.HasField("dim_value") else 2 for d in tt.shape.dim]
            feeds[vi.name] = [rng.standard_normal(shape).astype(NP_OF_ONNX[tt.elem_type])
                              for _ in range(2)]
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else dims[d.dim_param] for d in tt.shape.dim]
        feeds[vi.name] = rng.standard_normal(shape).astype(NP_OF_ONNX[tt.elem_type])
    outs = sess.run(None, feeds)
    desc = []
    for name, out in zip([o.name for o in sess.get_outputs()], outs):
        if isinstance(out, list):
            out = np.concatenate([np.ravel(e) for e in out])
        f = out.astype(np.float64)
        if not np.all(np.isfinite(f)):
            raise RuntimeError(f"output {name} has non-finite values")
        desc.append(f"{name}{list(out.shape)} {out.dtype} mean={f.mean():.3g} std={f.std():.3g} "
                    f"absmax={np.abs(f).max():.3g}")
    return desc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="models", help="output directory (default: models)")
    ap.add_argument("--no-run", action="store_true", help="skip the onnxruntime smoke run")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="build only this model (repeatable; default: all)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    failed = False
    for name, (build, dims) in MODELS.items():
        if args.only and name not in args.only:
            continue
        model = build()
        onnx.checker.check_model(model, full_check=True)
        path = os.path.join(args.out, name + ".onnx")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = model.SerializeToString()
        with open(path, "wb") as f:
            f.write(data)
        line = f"{path}: {len(data):,} bytes, {len(model.graph.node)} nodes"
        if len(data) > MAX_BYTES:
            line += f"  ERROR: larger than {MAX_BYTES:,} bytes"
            failed = True
        print(line)
        if not args.no_run:
            for d in smoke_run(model, dims):
                print("    " + d)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
