#!/usr/bin/env python3
"""Turns a float32 ONNX model into a float16 one, for measuring fp16 models (docs/MODELS.md).

Usage: python scripts/make_fp16_model.py IN.onnx OUT.onnx

Every float32 initializer and Constant value becomes float16, and so do the float32 graph inputs
and outputs; nodes then compute in float16, as an fp16 export would. Intermediate value_info is
dropped (its dtypes are stale). The result is checked with onnx.checker and run once with ONNX
Runtime, which prints the largest relative difference to the float32 model on seeded inputs.
Only models whose float ops all accept float16 convert this way (Resize scales, for one, must
stay float32).
"""

import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, numpy_helper


def to_fp16(model):
    def narrow(t):
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))

    for t in model.graph.initializer:
        narrow(t)
    for n in model.graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                narrow(a.t)
    for vi in list(model.graph.input) + list(model.graph.output):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    del model.graph.value_info[:]
    return model


def main():
    src, dst = sys.argv[1], sys.argv[2]
    model = to_fp16(onnx.load(src))
    onnx.checker.check_model(model)
    onnx.save(model, dst)
    rng = np.random.default_rng(0)
    s32 = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    s16 = ort.InferenceSession(dst, providers=["CPUExecutionProvider"])
    feeds = {i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape])
             for i in s32.get_inputs()}
    a = s32.run(None, {k: v.astype(np.float32) for k, v in feeds.items()})
    b = s16.run(None, {k: v.astype(np.float16) for k, v in feeds.items()})
    for x, y in zip(a, b):
        rel = np.abs(x - y.astype(np.float32)).max() / max(np.abs(x).max(), 1e-6)
        print(f"wrote {dst}: max relative difference to float32 {rel:.3g}")


if __name__ == "__main__":
    main()
