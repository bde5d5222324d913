#!/usr/bin/env python3
"""Seeded one-LSTM models for timing the integer recurrent step (docs/KERNELS.md): for each
H and batch, a float LSTM, the same LSTM with int8 W/R behind DequantizeLinear (qfold makes it
DynamicQuantizeLSTM) and with X also quantized statically (QfLSTMInteger). T = 100, in = 64.

  scripts/make_lstm_bench_models.py OUT_DIR
  for m in OUT_DIR/*.onnx; do qfold convert $m ${m%.onnx}.qfm; done
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

T, I = 100, 64


def make(path, H, B, kind, seed=7):
    rng = np.random.default_rng(seed)
    inits, nodes = [], []
    w = (rng.uniform(-1, 1, [1, 4 * H, I]) / np.sqrt(I)).astype(np.float32)
    r = (rng.uniform(-1, 1, [1, 4 * H, H]) / np.sqrt(H)).astype(np.float32)
    names = ["X", "W", "R"]
    if kind == "float":
        inits += [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R")]
    else:
        for name, v in (("W", w), ("R", r)):
            scale = (np.abs(v).max(axis=2)[0] / 127).astype(np.float32)
            q = np.clip(np.round(v / scale[None, :, None]), -127, 127).astype(np.int8)
            inits += [numpy_helper.from_array(q, name + "_q"),
                      numpy_helper.from_array(scale, name + "_s"),
                      numpy_helper.from_array(np.zeros_like(scale, np.int8), name + "_z")]
            nodes.append(helper.make_node("DequantizeLinear", [name + "_q", name + "_s",
                                                               name + "_z"], [name], axis=1))
        if kind == "static_x":
            inits += [numpy_helper.from_array(np.array(0.03, np.float32), "xs"),
                      numpy_helper.from_array(np.array(0, np.int8), "xz")]
            nodes += [helper.make_node("QuantizeLinear", ["X", "xs", "xz"], ["xq"]),
                      helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"])]
            names[0] = "xd"
    inits.append(numpy_helper.from_array(rng.uniform(-.3, .3, [1, 8 * H]).astype(np.float32), "B"))
    names.append("B")
    nodes.append(helper.make_node("LSTM", names, ["Y", "Y_h", "Y_c"], hidden_size=H))
    graph = helper.make_graph(
        nodes, "lstm", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, I])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h", "Y_c")],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.save(model, path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for H in (128, 256):
        for B in (1, 8):
            for kind in ("float", "dynamic_x", "static_x"):
                make(os.path.join(out, f"lstm_h{H}_b{B}_{kind}.onnx"), H, B, kind)


if __name__ == "__main__":
    main()
