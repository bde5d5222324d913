#!/usr/bin/env python3
"""Integer convolutions with float outputs (QfConvDequant) against ONNX Runtime.

Usage: compare_float_output.py --qfold build/cli/qfold [--workdir DIR] [--keep]

Builds QDQ graphs whose Conv outputs stay float, the way AIMET and NNCF export them:
  aimet: per-channel QDQ convolutions (one depthwise) whose outputs are also graph outputs
         ("hidden_output", "hidden_output_1", ...), each re-quantized for the next layer;
  nncf:  Conv -> Sigmoid -> Mul (SiLU), depthwise Conv -> BatchNormalization -> Relu,
         Conv -> BatchNormalization -> Q, Conv -> Add (a float residual), Conv -> Relu,
         with quantized Conv inputs and float outputs.
The reference is ONNX Runtime with all graph optimizations disabled (the literal
DequantizeLinear -> Conv -> ... graph). qfold runs channels-last (the integer microkernels)
and --channels-first (the exact integer reference kernel), at 1 and 2 threads.

Criteria, per output, relative to the output's largest magnitude R:
  every element within 1e-5 * R of ONNX Runtime (float rounding; a QuantizeLinear between
  layers can round a value lying on a tie differently, moving one element of the next
  layer's input by a step: up to 0.1% of the elements may then differ by up to 2% of R);
  channels-last and channels-first results identical bit for bit;
and every Conv of the model runs on integer kernels (QfConvDequant or QLinearConv in
`qfold inspect --json`). Prints one line per model and output, then "N passed, M failed".
"""

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from qfold_tools import inspect_operators, run_ort, run_qfold, safe_name

TIGHT = 1e-5
LOOSE = 2e-2
LOOSE_SHARE = 1e-3


class Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.outputs = [], [], []
        self.count = 0

    def name(self, base):
        self.count += 1
        return f"{base}_{self.count}"

    def const(self, base, array):
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(array, n))
        return n

    def qdq(self, x, scale, zp, dtype=np.uint8):
        s = self.const("s", np.array(scale, np.float32))
        z = self.const("zp", np.array(zp, dtype))
        q, dq = self.name("q"), self.name("dq")
        self.nodes.append(helper.make_node("QuantizeLinear", [x, s, z], [q]))
        self.nodes.append(helper.make_node("DequantizeLinear", [q, s, z], [dq]))
        return dq

    def conv(self, x, x_scale, c, m, k=3, stride=1, group=1, out=None):
        """Per-channel int8 weights and an int32 bias (scale x_scale * w_scale) through DQ."""
        cg = c // group
        w = self.rng.integers(-127, 128, size=(m, cg, k, k)).astype(np.int8)
        ws = (self.rng.uniform(0.5, 1.5, size=m) / (cg * k * k) ** 0.5 / 40).astype(np.float32)
        wn, wsn = self.const("w", w), self.const("ws", ws)
        wz = self.const("wz", np.zeros(m, np.int8))
        wdq = self.name("wdq")
        self.nodes.append(helper.make_node("DequantizeLinear", [wn, wsn, wz], [wdq], axis=0))
        bs = (np.float32(x_scale) * ws).astype(np.float32)
        b = self.rng.integers(-2000, 2000, size=m).astype(np.int32)
        bn, bsn = self.const("b", b), self.const("bs", bs)
        bz = self.const("bz", np.zeros(m, np.int32))
        bdq = self.name("bdq")
        self.nodes.append(helper.make_node("DequantizeLinear", [bn, bsn, bz], [bdq], axis=0))
        y = out or self.name("conv")
        self.nodes.append(helper.make_node("Conv", [x, wdq, bdq], [y], pads=[k // 2] * 4,
                                           strides=[stride, stride], group=group))
        return y

    def batchnorm(self, x, m):
        p = [self.rng.uniform(-1.5, 1.5, m), self.rng.uniform(-0.5, 0.5, m),
             self.rng.uniform(-0.3, 0.3, m), self.rng.uniform(0.2, 2.0, m)]
        names = [self.const("bn", a.astype(np.float32)) for a in p]
        y = self.name("bn")
        self.nodes.append(helper.make_node("BatchNormalization", [x] + names, [y]))
        return y

    def op(self, op_type, inputs, **attrs):
        y = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [y], **attrs))
        return y

    def model(self, inp_shape, outputs):
        graph = helper.make_graph(
            self.nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, inp_shape)],
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
            self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        # Graph outputs get their shapes from ONNX shape inference (the checker wants them).
        inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
        shapes = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
        for out in m.graph.output:
            out.CopyFrom(shapes[out.name])
        onnx.checker.check_model(m, full_check=True)
        return m


def aimet_model():
    """Every Conv's output is a graph output and also re-quantized for the next layer."""
    b = Builder(1)
    x = b.qdq("x", 2 / 255, 128)
    h0 = b.conv(x, 2 / 255, 3, 16, out="hidden_output")
    h1 = b.conv(b.qdq(h0, 0.02, 128), 0.02, 16, 24, stride=2, out="hidden_output_1")
    r = b.op("Relu", [h1])
    d = b.conv(b.qdq(r, 0.01, 0), 0.01, 24, 24, group=24, out="hidden_output_2")  # depthwise
    y = b.conv(b.qdq(d, 0.01, 128), 0.01, 24, 32, k=1)
    y = b.conv(b.qdq(y, 0.02, 128, np.uint8), 0.02, 32, 32, group=2, out="output")
    return b.model([1, 3, 20, 24], ["hidden_output", "hidden_output_1", "hidden_output_2",
                                    "output"])


def nncf_model():
    """Quantized Conv inputs and weights, float Conv outputs."""
    b = Builder(2)
    x = b.qdq("x", 2 / 255, 128)
    c0 = b.conv(x, 2 / 255, 3, 16, stride=2)
    silu = b.op("Mul", [c0, b.op("Sigmoid", [c0])])                 # SiLU
    dw = b.conv(b.qdq(silu, 0.01, 30), 0.01, 16, 16, group=16)       # depthwise -> BN -> Relu
    dw = b.op("Relu", [b.batchnorm(dw, 16)])
    c1 = b.conv(b.qdq(dw, 0.01, 0), 0.01, 16, 24)
    bn = b.batchnorm(c1, 24)                                         # Conv -> BN -> Q
    c2 = b.conv(b.qdq(bn, 0.02, 128), 0.02, 24, 24, k=1)
    r = b.op("Relu", [c2])                                           # Conv -> Relu -> Q
    c3 = b.conv(b.qdq(r, 0.01, 0), 0.01, 24, 24)
    res = b.op("Add", [c3, bn])                                      # float residual
    c4 = b.conv(b.qdq(res, 0.03, 128), 0.03, 24, 8, k=1)
    b.op("Identity", [b.batchnorm(c4, 8)])
    b.nodes[-1].output[0] = "output"
    return b.model([1, 3, 24, 20], ["output"])


MODELS = {"aimet_style": aimet_model, "nncf_style": nncf_model}


def run_qfold_outputs(qfold, qfm, inp, outdir, threads):
    os.makedirs(outdir, exist_ok=True)
    err = run_qfold([qfold, "run", qfm, "--input", f"x={inp}", "--output-dir", outdir,
                     "--threads", str(threads)], 600)
    return err


def check(name, model, qfold, work):
    path = os.path.join(work, name + ".onnx")
    onnx.save(model, path)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    inp = os.path.join(work, name + "_x.npy")
    np.save(inp, x)
    out_names, refs = run_ort(path, {"x": x})
    results = {}
    for layout, extra in (("cl", []), ("cf", ["--channels-first"])):
        qfm = os.path.join(work, f"{name}_{layout}.qfm")
        err = run_qfold([qfold, "convert", path, "-o", qfm] + extra, 600)
        if err:
            print(f"FAIL {name}: convert ({layout}) failed: {err}")
            return False
        if layout == "cl":
            ops = inspect_operators(qfold, qfm) or {}
            integer = sum(n for t, n in ops.items() if t.split(".")[-1] in
                          ("QfConvDequant", "QLinearConv"))
            floats = sum(n for t, n in ops.items() if t.split(".")[-1] == "Conv")
            share = integer / max(1, integer + floats)
            print(f"{name}: Conv on integer kernels {integer}/{integer + floats} ({share:.0%}), "
                  f"QfConvDequant={sum(n for t, n in ops.items() if t.endswith('QfConvDequant'))}")
            if floats:
                print(f"FAIL {name}: {floats} Conv still float")
                return False
        for threads in (1, 2):
            outdir = os.path.join(work, f"{name}_{layout}_{threads}")
            err = run_qfold_outputs(qfold, qfm, inp, outdir, threads)
            if err:
                print(f"FAIL {name}: run ({layout}, {threads} threads) failed: {err}")
                return False
            results[(layout, threads)] = {
                o: np.load(os.path.join(outdir, safe_name(o) + ".npy")) for o in out_names}
    ok = True
    for o, ref in zip(out_names, refs):
        got = results[("cl", 1)][o]
        for key, res in results.items():
            if not np.array_equal(res[o], got, equal_nan=True):
                print(f"FAIL {name} '{o}': {key} differs from channels-last 1 thread")
                ok = False
        r = float(np.abs(ref).max())
        err = np.abs(got.astype(np.float64) - ref)
        loose_share = float(np.mean(err > TIGHT * r))
        passed = got.shape == ref.shape and err.max() <= LOOSE * r and loose_share <= LOOSE_SHARE
        print(f"{'ok  ' if passed else 'FAIL'} {name} '{o}' {list(ref.shape)}: max|err| = "
              f"{err.max():.3g} ({err.max() / r:.2g} of max|y| = {r:.3g}), "
              f"beyond {TIGHT:g}*R: {loose_share:.3%}")
        ok = ok and passed
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qfold", required=True)
    ap.add_argument("--workdir")
    args = ap.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="qfold_float_out_")
    os.makedirs(work, exist_ok=True)
    passed = failed = 0
    try:
        for name, make in MODELS.items():
            if check(name, make(), args.qfold, work):
                passed += 1
            else:
                failed += 1
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
