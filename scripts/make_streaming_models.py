#!/usr/bin/env python3
"""Builds the streaming models in models/streaming/ (deterministic: fixed seeds, onnx.helper + numpy).

Usage: python scripts/make_streaming_models.py --out models/streaming

vad_like.onnx is shaped like the voice-activity detectors users ship (silero-VAD style): a chunk of
512 audio samples, the sample rate as a scalar int64 input, the LSTM state as an input and an
output, and a top-level If on `sr == 16000` whose branches hold different front ends (the 16 kHz
one a wider first kernel and stride) and different LSTM weights. Both branches read the graph's
inputs and a value computed before the If (outer-scope references). qfold converts it with
--const sr=16000 (or 8000), keeping one branch. These models live apart from models/*.onnx, which
the generic end-to-end tests convert without options.

Each model is checked with onnx.checker (full_check) and run through onnxruntime for both rates.
"""

import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CHUNK = 512
HIDDEN = 64


class Branch:
    """Nodes and initializers of one graph, names prefixed so both branches stay distinct."""

    def __init__(self, prefix, rng):
        self.prefix = prefix
        self.rng = rng
        self.nodes = []
        self.initializers = []

    def const(self, name, array):
        name = self.prefix + name
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op, inputs, name, num_outputs=1, **attrs):
        name = self.prefix + name
        outputs = [name] if num_outputs == 1 else [f"{name}_out{i}" for i in range(num_outputs)]
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, **attrs))
        return outputs[0] if num_outputs == 1 else outputs

    def conv1d(self, x, cin, cout, k, stride, pad, name):
        w = (self.rng.standard_normal((cout, cin, k)) * math.sqrt(2.0 / (cin * k))).astype(np.float32)
        b = (self.rng.standard_normal(cout) * 0.05).astype(np.float32)
        return self.node("Conv", [x, self.const(name + ".weight", w), self.const(name + ".bias", b)],
                         name, kernel_shape=[k], strides=[stride], pads=[pad, pad])


def vad_branch(prefix, seed, k1, s1):
    """Front end (two 1-D convs), LSTM over the frames with the state from the `state` input,
    decoder on the last hidden state. Reads `audio` (computed before the If) and `state`."""
    b = Branch(prefix, np.random.default_rng(seed))
    x = b.node("Unsqueeze", ["audio", b.const("channel_axis", np.array([1], np.int64))],
               "to_ncw")  # (1, 1, 512)
    x = b.node("Relu", [b.conv1d(x, 1, 32, k1, s1, k1 // 2 - s1 // 2, "conv1")], "relu1")
    x = b.node("Relu", [b.conv1d(x, 32, 32, 3, 2, 1, "conv2")], "relu2")  # (1, 32, T)
    x = b.node("Transpose", [x], "time_major", perm=[2, 0, 1])  # (T, 1, 32)
    h0, c0 = b.node("Split", ["state", b.const("state_split", np.array([1, 1], np.int64))],
                    "split_state", num_outputs=2, axis=0)  # (1, 1, 64) each
    k = 1.0 / math.sqrt(HIDDEN)

    def u(shape):
        return b.rng.uniform(-k, k, shape).astype(np.float32)

    w = b.const("lstm.W", u((1, 4 * HIDDEN, 32)))
    r = b.const("lstm.R", u((1, 4 * HIDDEN, HIDDEN)))
    bias = b.const("lstm.B", u((1, 8 * HIDDEN)))
    _, yh, yc = b.node("LSTM", [x, w, r, bias, "", h0, c0], "lstm", num_outputs=3,
                       hidden_size=HIDDEN)
    new_state = b.node("Concat", [yh, yc], "new_state", axis=0)  # (2, 1, 64)
    h = b.node("Reshape", [yh, b.const("flat_shape", np.array([1, HIDDEN], np.int64))], "flat")
    h = b.node("Relu", [h], "relu_h")
    dw = (b.rng.standard_normal((1, HIDDEN)) * 6 * math.sqrt(2.0 / HIDDEN)).astype(np.float32)
    logit = b.node("Gemm", [h, b.const("decoder.weight", dw),
                            b.const("decoder.bias", np.array([0.1], np.float32))],
                   "decoder", transB=1)
    prob = b.node("Sigmoid", [logit], "prob")  # (1, 1)
    outputs = [helper.make_tensor_value_info(prob, TensorProto.FLOAT, [1, 1]),
               helper.make_tensor_value_info(new_state, TensorProto.FLOAT, [2, 1, HIDDEN])]
    return helper.make_graph(b.nodes, prefix + "graph", [], outputs, b.initializers)


def vad_like():
    # A normalization before the If: the branches read its result from the outer scope.
    top = Branch("", np.random.default_rng(21))
    audio = top.node("Mul", ["input", top.const("input_gain", np.array(0.5, np.float32))], "audio")
    is16k = top.node("Equal", ["sr", top.const("sr_16k", np.array(16000, np.int64))], "is_16k")
    then_g = vad_branch("k16_", 22, k1=32, s1=8)
    else_g = vad_branch("k8_", 23, k1=16, s1=4)
    top.nodes.append(helper.make_node("If", [is16k], ["output", "stateN"], name="If_sr",
                                      then_branch=then_g, else_branch=else_g))
    assert audio == "audio"
    graph = helper.make_graph(
        top.nodes, "vad_like",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, CHUNK]),
         helper.make_tensor_value_info("sr", TensorProto.INT64, []),
         helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, 1, HIDDEN])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1]),
         helper.make_tensor_value_info("stateN", TensorProto.FLOAT, [2, 1, HIDDEN])],
        top.initializers)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)],
                          producer_name="qfold make_streaming_models.py")
    m.ir_version = 8
    return m


MODELS = {"vad_like": vad_like}


def smoke_run(model):
    """Streams four chunks at each rate through onnxruntime; returns a description per rate."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    desc = []
    for sr in (16000, 8000):
        state = np.zeros((2, 1, HIDDEN), np.float32)
        probs = []
        for _ in range(4):
            chunk = (rng.standard_normal((1, CHUNK)) * 0.3).astype(np.float32)
            prob, state = sess.run(None, {"input": chunk, "sr": np.array(sr, np.int64),
                                          "state": state})
            probs.append(float(prob[0, 0]))
        if not all(np.isfinite(probs)) or not np.all(np.isfinite(state)):
            raise RuntimeError(f"non-finite outputs at sr={sr}")
        desc.append(f"sr={sr}: probs {' '.join(f'{p:.3f}' for p in probs)}, "
                    f"state absmax {np.abs(state).max():.3g}")
    return desc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="models/streaming", help="output directory")
    ap.add_argument("--no-run", action="store_true", help="skip the onnxruntime smoke run")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, build in MODELS.items():
        model = build()
        onnx.checker.check_model(model, full_check=True)
        path = os.path.join(args.out, name + ".onnx")
        onnx.save(model, path)
        print(f"{path}: {os.path.getsize(path)} bytes")
        if not args.no_run:
            for line in smoke_run(model):
                print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
