#!/usr/bin/env python3
"""Writes a float transformer encoder (seeded weights, onnx.helper + numpy only) for the
transformer-block kernels' end-to-end test and benchmark (too large for models/).

Usage: python scripts/make_transformer.py --out DIR/transformer.onnx
                                          [--layers 4] [--hidden 256] [--heads 4] [--seq 128]

Each layer: pre-LayerNorm self-attention (Q/K/V MatMul + Add, Reshape/Transpose to heads,
Q K^T scaled, Softmax over the last axis, context MatMul, merge, output projection), a residual
Add, LayerNorm, an FFN (4x hidden) with GELU in the Erf form torch exports, a residual Add.
Layer 0 writes its first LayerNorm decomposed as opset < 17 exporters do (ReduceMean, Sub, Pow,
ReduceMean, Add, Sqrt, Div, Mul, Add), so ReduceMean over the last axis runs too; the others use
LayerNormalization (opset 17). The model is run once through ONNX Runtime as a check.
"""

import argparse
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(layers, hidden, heads, seq, seed=7):
    rng = np.random.default_rng(seed)
    head_dim = hidden // heads
    nodes, inits = [], []
    f32 = lambda v: np.array(v, np.float32)  # noqa: E731
    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def linear(x, din, dout, p):
        w = (rng.standard_normal((din, dout)) * math.sqrt(1.0 / din)).astype(np.float32)
        b = (rng.standard_normal(dout) * 0.02).astype(np.float32)
        h = node("MatMul", [x, const(p + ".weight", w)], p + ".matmul")
        return node("Add", [h, const(p + ".bias", b)], p + ".add")

    def layer_norm(x, p, decomposed):
        scale = const(p + ".scale", rng.uniform(0.9, 1.1, hidden).astype(np.float32))
        bias = const(p + ".bias", (rng.standard_normal(hidden) * 0.02).astype(np.float32))
        if not decomposed:
            return node("LayerNormalization", [x, scale, bias], p, axis=-1, epsilon=1e-5)
        mean = node("ReduceMean", [x], p + ".mean", axes=[-1], keepdims=1)
        d = node("Sub", [x, mean], p + ".sub")
        sq = node("Pow", [d, const(p + ".two", f32(2.0))], p + ".pow")
        var = node("ReduceMean", [sq], p + ".var", axes=[-1], keepdims=1)
        std = node("Sqrt", [node("Add", [var, const(p + ".eps", f32(1e-5))], p + ".add_eps")],
                   p + ".sqrt")
        n = node("Div", [d, std], p + ".div")
        return node("Add", [node("Mul", [n, scale], p + ".mul"), bias], p + ".add")

    head_shape = const("head_shape", i64(1, seq, heads, head_dim))
    merged_shape = const("merged_shape", i64(1, seq, hidden))
    x = "tokens"
    for layer in range(layers):
        p = f"layer{layer}"
        h = layer_norm(x, p + ".ln1", decomposed=layer == 0)
        hd = {}
        for name, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
            t = linear(h, hidden, hidden, f"{p}.attn.{name}")
            t = node("Reshape", [t, head_shape], f"{p}.attn.{name}_reshape")
            hd[name] = node("Transpose", [t], f"{p}.attn.{name}_transpose", perm=perm)
        scores = node("MatMul", [hd["q"], hd["k"]], p + ".attn.qk")
        scores = node("Mul", [scores, const(p + ".attn.inv_sqrt_d", f32(1.0 / math.sqrt(head_dim)))],
                      p + ".attn.scale")
        probs = node("Softmax", [scores], p + ".attn.softmax", axis=-1)
        ctx = node("MatMul", [probs, hd["v"]], p + ".attn.context")
        ctx = node("Transpose", [ctx], p + ".attn.context_transpose", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, merged_shape], p + ".attn.merge")
        x = node("Add", [x, linear(ctx, hidden, hidden, p + ".attn.out")], p + ".residual1")

        h = layer_norm(x, p + ".ln2", decomposed=False)
        h = linear(h, hidden, 4 * hidden, p + ".ffn.fc1")
        e = node("Div", [h, const(p + ".gelu.c_sqrt2", f32(math.sqrt(2.0)))], p + ".gelu.div")
        e = node("Erf", [e], p + ".gelu.erf")
        e = node("Add", [e, const(p + ".gelu.c_one", f32(1.0))], p + ".gelu.add")
        e = node("Mul", [h, e], p + ".gelu.mul")
        h = node("Mul", [e, const(p + ".gelu.c_half", f32(0.5))], p + ".gelu.half")
        x = node("Add", [x, linear(h, 4 * hidden, hidden, p + ".ffn.fc2")], p + ".residual2")
    nodes.append(helper.make_node("Identity", [x], ["output"], name="output"))

    io = [1, seq, hidden]
    graph = helper.make_graph(nodes, "transformer", [
        helper.make_tensor_value_info("tokens", TensorProto.FLOAT, io)
    ], [helper.make_tensor_value_info("output", TensorProto.FLOAT, io)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="qfold-make_transformer")
    model.ir_version = 8
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    args = ap.parse_args()
    if args.hidden % args.heads:
        ap.error("--hidden must be a multiple of --heads")
    model = build(args.layers, args.hidden, args.heads, args.seq)
    onnx.checker.check_model(model, full_check=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    onnx.save(model, args.out)

    import onnxruntime as ort  # noqa: PLC0415 - only for the smoke run
    sess = ort.InferenceSession(args.out, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((1, args.seq, args.hidden)).astype(np.float32)
    y = sess.run(None, {"tokens": x})[0]
    print(f"{args.out}: {len(model.graph.node)} nodes, output std {float(y.std()):.3f}")


if __name__ == "__main__":
    main()
