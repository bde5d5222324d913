#!/usr/bin/env python3
"""Activations spelled as several nodes, fused by the converter, against ONNX Runtime.

Usage: compare_fused_activations.py --qfold build/cli/qfold [--workdir DIR] [--keep]

Builds small float graphs with the spellings exporters use: x * Sigmoid(x) (SiLU, also with
Sigmoid(alpha * x) and the Mul's inputs swapped), x * HardSigmoid(x) (alpha 1/6),
x * Clip(x + 3, 0, 6) / 6 (and * (1/6)), 0.5 x (1 + Erf(x / sqrt2)) in both orders, and
these after a Conv (fused into it), Conv -> Mul -> Add by scalar or per-channel constants
(folded into the Conv's weights and bias), Mul/Add by scalars after a fused activation (joining
it), a residual Add (+ Relu) after a Conv (its epilogue
adds it); plus graphs that must not fuse (a Mul by a spatial
constant, the Sigmoid also a graph output, a HardSigmoid with another alpha). The reference is ONNX Runtime with all graph
optimizations disabled (the literal graph). Criteria per model: every output within
1e-5 * max|ort| of ONNX Runtime (inputs up to |x| = 12, both signs), and the operators of
`qfold inspect --json` exactly the expected ones (fewer nodes than the ONNX graph where
it fuses). Prints one line per model, then "N passed, M failed".
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from qfold_tools import inspect_operators, run_ort, run_qfold, run_qfold_output, safe_name

RTOL = 1e-5
# Cases whose activation takes an affine after it (format version 6).
AFFINE_CASES = {"conv_hardswish_affine", "conv_relu_scalar_chain"}
SHAPE = [1, 8, 9, 11]


def const(name, value):
    return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)


def model(name, nodes, inits, outputs=("y",)):
    out_info = [helper.make_tensor_value_info(o, TensorProto.FLOAT, SHAPE) for o in outputs]
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                          out_info, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def conv_front(rng):
    """Conv 8 -> 8, 3x3, pad 1: its output 'c' feeds the activation."""
    w = const("w", rng.standard_normal((8, 8, 3, 3)) * 0.3)
    b = const("b", rng.standard_normal(8))
    return [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])], [w, b]


def cases(rng):
    N = helper.make_node
    out = []
    out.append(("silu", model("silu", [N("Sigmoid", ["x"], ["s"]), N("Mul", ["x", "s"], ["y"])], []),
                {"Swish": 1}))
    out.append(("silu_alpha_swapped", model("silu_alpha_swapped", [
        N("Mul", ["x", "alpha"], ["ax"]), N("Sigmoid", ["ax"], ["s"]), N("Mul", ["s", "x"], ["y"])],
        [const("alpha", [1.702])]), {"Swish": 1}))
    out.append(("hardsigmoid_gate", model("hardsigmoid_gate", [
        N("HardSigmoid", ["x"], ["h"], alpha=1.0 / 6, beta=0.5), N("Mul", ["h", "x"], ["y"])], []),
        {"HardSwish": 1}))
    out.append(("clip_hardswish_div", model("clip_hardswish_div", [
        N("Add", ["x", "three"], ["a"]), N("Clip", ["a", "zero", "six"], ["c"]),
        N("Mul", ["x", "c"], ["m"]), N("Div", ["m", "six"], ["y"])],
        [const("three", 3.0), const("zero", 0.0), const("six", 6.0)]), {"HardSwish": 1}))
    out.append(("clip_hardswish_mul", model("clip_hardswish_mul", [
        N("Add", ["three", "x"], ["a"]), N("Clip", ["a", "zero", "six"], ["c"]),
        N("Mul", ["c", "x"], ["m"]), N("Mul", ["sixth", "m"], ["y"])],
        [const("three", [3.0]), const("zero", 0.0), const("six", 6.0), const("sixth", 1.0 / 6)]),
        {"HardSwish": 1}))
    out.append(("gelu_erf_div", model("gelu_erf_div", [
        N("Div", ["x", "sqrt2"], ["t"]), N("Erf", ["t"], ["e"]), N("Add", ["e", "one"], ["a"]),
        N("Mul", ["x", "a"], ["m"]), N("Mul", ["m", "half"], ["y"])],
        [const("sqrt2", 1.4142135), const("one", 1.0), const("half", 0.5)]), {"Gelu": 1}))
    out.append(("gelu_erf_half_first", model("gelu_erf_half_first", [
        N("Mul", ["x", "half"], ["h"]), N("Mul", ["rsqrt2", "x"], ["t"]), N("Erf", ["t"], ["e"]),
        N("Add", ["one", "e"], ["a"]), N("Mul", ["a", "h"], ["y"])],
        [const("rsqrt2", 0.70710678), const("one", 1.0), const("half", 0.5)]), {"Gelu": 1}))
    nodes, inits = conv_front(rng)
    out.append(("conv_silu", model("conv_silu", nodes + [
        N("Sigmoid", ["c"], ["s"]), N("Mul", ["c", "s"], ["y"])], inits), {"Conv": 1}))
    nodes, inits = conv_front(rng)
    out.append(("conv_clip_hardswish", model("conv_clip_hardswish", nodes + [
        N("Add", ["c", "three"], ["a"]), N("Clip", ["a", "zero", "six"], ["cl"]),
        N("Mul", ["c", "cl"], ["m"]), N("Div", ["m", "six"], ["y"])],
        inits + [const("three", 3.0), const("zero", 0.0), const("six", 6.0)]), {"Conv": 1}))
    # Conv -> Mul -> Add by scalars (PP-LCNet's affine blocks) -> HardSwish: all one Conv.
    nodes, inits = conv_front(rng)
    out.append(("conv_affine_hardswish", model("conv_affine_hardswish", nodes + [
        N("Mul", ["c", "s"], ["cs"]), N("Add", ["cs", "t"], ["ct"]),
        N("Add", ["ct", "three"], ["a"]), N("Clip", ["a", "zero", "six"], ["cl"]),
        N("Mul", ["ct", "cl"], ["m"]), N("Div", ["m", "six"], ["y"])],
        inits + [const("s", [0.8]), const("t", [0.3]), const("three", 3.0), const("zero", 0.0),
                 const("six", 6.0)]), {"Conv": 1}))
    # HardSwish -> Mul -> Add by scalars after it (PP-LCNetV3's learnable affine blocks): the
    # affine joins the Conv's fused activation; so does a longer scalar chain after a Relu.
    nodes, inits = conv_front(rng)
    out.append(("conv_hardswish_affine", model("conv_hardswish_affine", nodes + [
        N("Add", ["c", "three"], ["a"]), N("Clip", ["a", "zero", "six"], ["cl"]),
        N("Mul", ["c", "cl"], ["m"]), N("Div", ["m", "six"], ["h"]),
        N("Mul", ["s", "h"], ["hs"]), N("Add", ["hs", "t"], ["y"])],
        inits + [const("s", [0.63]), const("t", [-0.4]), const("three", 3.0), const("zero", 0.0),
                 const("six", 6.0)]), {"Conv": 1}))
    nodes, inits = conv_front(rng)
    out.append(("conv_relu_scalar_chain", model("conv_relu_scalar_chain", nodes + [
        N("Relu", ["c"], ["r"]), N("Add", ["r", "t"], ["rt"]), N("Mul", ["rt", "s"], ["rs"]),
        N("Add", ["u", "rs"], ["y"])],
        inits + [const("s", 1.7), const("t", [0.25]), const("u", [[[-0.5]]])]), {"Conv": 1}))
    # A per-channel Mul after the activation stays a node of its own (kernels fuse scalars only).
    nodes, inits = conv_front(rng)
    out.append(("conv_relu_channel_mul", model("conv_relu_channel_mul", nodes + [
        N("Relu", ["c"], ["r"]), N("Mul", ["r", "sc"], ["y"])],
        inits + [const("sc", rng.standard_normal((8, 1, 1)))]), {"Conv": 1, "Mul": 1}))
    nodes, inits = conv_front(rng)
    out.append(("conv_channel_affine", model("conv_channel_affine", nodes + [
        N("Mul", ["sc", "c"], ["cs"]), N("Add", ["cs", "t"], ["y"])],
        inits + [const("sc", rng.standard_normal((1, 8, 1, 1))),
                 const("t", rng.standard_normal((8, 1, 1)))]), {"Conv": 1}))
    def bn_params(prefix, c):
        return [const(prefix + "_s", rng.uniform(0.5, 1.5, c)), const(prefix + "_b", rng.standard_normal(c)),
                const(prefix + "_m", rng.standard_normal(c) * 0.1), const(prefix + "_v", rng.uniform(0.5, 2, c))]
    bn_in = lambda prefix, x: [x, prefix + "_s", prefix + "_b", prefix + "_m", prefix + "_v"]
    # A detection head (PP-OCR's DB head): ConvTranspose 2x2 stride 2 -> bias Add -> BN -> Relu
    # -> ConvTranspose -> bias Add -> Sigmoid: the Adds and BN fold into the ConvTransposes, the
    # activations join them, and each lowers to a 1x1 Conv and a DepthToSpace.
    out.append(("convtranspose_head", model("convtranspose_head", [
        N("Conv", ["x", "w0"], ["c"], pads=[1, 1, 1, 1]),
        N("ConvTranspose", ["c", "wt1"], ["t1"], kernel_shape=[2, 2], strides=[2, 2]),
        N("Add", ["t1", "b1"], ["a1"]), N("BatchNormalization", bn_in("bnh", "a1"), ["n1"]),
        N("Relu", ["n1"], ["r1"]),
        N("ConvTranspose", ["r1", "wt2"], ["t2"], kernel_shape=[2, 2], strides=[2, 2]),
        N("Add", ["t2", "b2"], ["a2"]), N("Sigmoid", ["a2"], ["s2"]),
        N("MaxPool", ["s2"], ["y"], kernel_shape=[4, 4], strides=[4, 4])],
        [const("w0", rng.standard_normal((8, 8, 3, 3)) * 0.3),
         const("wt1", rng.standard_normal((8, 6, 2, 2)) * 0.3),
         const("b1", rng.standard_normal((1, 6, 1, 1))),
         const("wt2", rng.standard_normal((6, 8, 2, 2)) * 0.3),
         const("b2", rng.standard_normal((1, 8, 1, 1)))] + bn_params("bnh", 6)),
        {"Conv": 3, "DepthToSpace": 2, "MaxPool": 1}))
    # Conv -> Mul by a channel constant -> BN -> Relu: one Conv.
    nodes, inits = conv_front(rng)
    out.append(("conv_mul_batchnorm_relu", model("conv_mul_batchnorm_relu", nodes + [
        N("Mul", ["c", "sc"], ["cs"]), N("BatchNormalization", bn_in("bnm", "cs"), ["n"]),
        N("Relu", ["n"], ["y"])],
        inits + [const("sc", rng.standard_normal((8, 1, 1)))] + bn_params("bnm", 8)), {"Conv": 1}))
    # BatchNormalization -> Mul -> Add by channel constants -> Relu (DenseNet's pre-activation
    # blocks): the constants fold into its scale and B, the Relu into its output.
    out.append(("batchnorm_affine_relu", model("batchnorm_affine_relu", [
        N("BatchNormalization", bn_in("bn", "x"), ["n"]), N("Mul", ["n", "sc"], ["ns"]),
        N("Add", ["ns", "t"], ["nt"]), N("Relu", ["nt"], ["y"])],
        bn_params("bn", 8) + [const("sc", rng.standard_normal((8, 1, 1))), const("t", [0.2])]),
        {"BatchNormalization": 1}))
    # The same between channels-last Convs after a Concat, then float MaxPool and
    # AveragePool: no Transpose but the input's and the output's.
    nodes, inits = conv_front(rng)
    out.append(("conv_concat_batchnorm_conv", model("conv_concat_batchnorm_conv", nodes + [
        N("Conv", ["x", "w"], ["c1"], pads=[1, 1, 1, 1]), N("Concat", ["c", "c1"], ["cc"], axis=1),
        N("BatchNormalization", bn_in("bn2", "cc"), ["n"]), N("Mul", ["n", "sc"], ["ns"]),
        N("Add", ["ns", "t"], ["nt"]), N("Relu", ["nt"], ["r"]), N("MaxPool", ["r"], ["p"],
        kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
        N("AveragePool", ["p"], ["a"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
        N("Conv", ["a", "w16"], ["y"], pads=[1, 1, 1, 1])],
        inits + bn_params("bn2", 16) + [const("sc", rng.standard_normal((1, 16, 1, 1))),
                                         const("t", rng.standard_normal((16, 1, 1))),
                                         const("w16", rng.standard_normal((8, 16, 3, 3)) * 0.2)]),
        {"Conv": 3, "Concat": 1, "BatchNormalization": 1, "MaxPool": 1, "AveragePool": 1,
         "Transpose": 2}))
    # A residual Add (and the Relu after it) joins the second Conv's epilogue
    # (FuseConvResidual); not when the Conv's output has another reader.
    def two_convs():
        nodes, inits = conv_front(rng)
        w2 = const("w2", rng.standard_normal((8, 8, 3, 3)) * 0.3)
        return nodes + [N("Conv", ["c", "w2"], ["c2"], pads=[1, 1, 1, 1])], inits + [w2]
    nodes, inits = two_convs()
    out.append(("conv_residual_relu", model("conv_residual_relu", nodes + [
        N("Add", ["c2", "c"], ["r"]), N("Relu", ["r"], ["y"])], inits), {"Conv": 2}))
    nodes, inits = two_convs()
    out.append(("conv_residual_swapped", model("conv_residual_swapped", nodes + [
        N("Add", ["c", "c2"], ["y"])], inits), {"Conv": 2}))
    # Grouped (ShuffleNet's 1x1 group convolutions before its Adds) fuses too;
    # depthwise does not (its kernels have no residual epilogue).
    nodes, inits = conv_front(rng)
    out.append(("conv_grouped_residual_relu", model("conv_grouped_residual_relu", nodes + [
        N("Conv", ["c", "wg"], ["c2"], group=2), N("Add", ["c2", "c"], ["r"]),
        N("Relu", ["r"], ["y"])], inits + [const("wg", rng.standard_normal((8, 4, 1, 1)) * 0.3)]),
        {"Conv": 2}))
    nodes, inits = conv_front(rng)
    out.append(("depthwise_residual_unfused", model("depthwise_residual_unfused", nodes + [
        N("Conv", ["c", "wd"], ["c2"], group=8, pads=[1, 1, 1, 1]), N("Add", ["c2", "c"], ["r"]),
        N("Relu", ["r"], ["y"])], inits + [const("wd", rng.standard_normal((8, 1, 3, 3)) * 0.3)]),
        {"Conv": 2, "Add": 1, "Relu": 1}))
    nodes, inits = two_convs()
    out.append(("conv_residual_shared", model("conv_residual_shared", nodes + [
        N("Add", ["c2", "c"], ["r"]), N("Relu", ["r"], ["y"])], inits, outputs=("y", "c2")),
        {"Conv": 2, "Add": 1, "Relu": 1}))
    # Must stay unfused: a Mul by a spatial (not per-channel) constant, the gate also a graph
    # output, a HardSigmoid whose alpha is not 1/6.
    nodes, inits = conv_front(rng)
    out.append(("conv_spatial_mul", model("conv_spatial_mul", nodes + [
        N("Mul", ["c", "sp"], ["y"])], inits + [const("sp", rng.standard_normal((1, 1, 9, 11)))]),
        {"Conv": 1, "Mul": 1}))
    # Must stay unfused: the gate is also a graph output; HardSigmoid's alpha is not 1/6.
    out.append(("silu_gate_is_output", model("silu_gate_is_output", [
        N("Sigmoid", ["x"], ["s"]), N("Mul", ["x", "s"], ["y"])], [], outputs=("y", "s")),
        {"Sigmoid": 1, "Mul": 1}))
    out.append(("hardsigmoid_other_alpha", model("hardsigmoid_other_alpha", [
        N("HardSigmoid", ["x"], ["h"], alpha=0.2, beta=0.5), N("Mul", ["h", "x"], ["y"])], []),
        {"HardSigmoid": 1, "Mul": 1}))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qfold", required=True)
    ap.add_argument("--workdir")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="qfold_fused_act_")
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(16)
    passed = failed = 0
    for name, m, want_ops in cases(rng):
        d = os.path.join(work, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.onnx")
        onnx.save(m, path)
        # Both signs out to |x| = 12: the tails where the fused kernels differ from the graph.
        x = (rng.uniform(-12, 12, SHAPE)).astype(np.float32)
        np.save(os.path.join(d, "x.npy"), x)
        names, ref = run_ort(path, {"x": x})
        qfm = os.path.join(d, "model.qfm")
        err = run_qfold([args.qfold, "convert", path, "-o", qfm], 300) or run_qfold(
            [args.qfold, "run", qfm, "--input", "x=" + os.path.join(d, "x.npy"), "--output-dir",
             os.path.join(d, "out")], 300)
        problems = []
        if err:
            problems.append(err)
        else:
            for n, r in zip(names, ref):
                got = np.load(os.path.join(d, "out", safe_name(n) + ".npy"))
                scale = max(float(np.max(np.abs(r))), 1e-6)
                rel = float(np.max(np.abs(got.astype(np.float64) - r))) / scale
                if got.shape != r.shape or not rel < RTOL:
                    problems.append(f"output {n}: max rel {rel:.3e} (shape {got.shape} vs {r.shape})")
            # The layout planner's Transposes (a float Conv runs channels-last
            # between the model's NCHW input and output) are not what is counted;
            # a "Transpose" entry in the expected map is an upper bound on them.
            all_ops = inspect_operators(args.qfold, qfm)
            ops = {k: v for k, v in all_ops.items() if k != "Transpose"}
            want = {k: v for k, v in want_ops.items() if k != "Transpose"}
            if ops != want:
                problems.append(f"operators {ops}, expected {want}")
            if all_ops.get("Transpose", 0) > want_ops.get("Transpose", all_ops.get("Transpose", 0)):
                problems.append(f"{all_ops['Transpose']} Transposes, at most {want_ops['Transpose']}")
            # An affine joined to an activation needs reader 6 (docs/FORMAT.md): an
            # older runtime would run the file without it.
            err, out = run_qfold_output([args.qfold, "inspect", qfm, "--json"], 120)
            min_reader = json.loads(out).get("min_reader_version") if not err else None
            want_reader = 6 if name in AFFINE_CASES else None
            if want_reader is None and (min_reader is None or min_reader >= 6):
                problems.append(f"min_reader_version {min_reader}, expected below 6")
            if want_reader is not None and min_reader != want_reader:
                problems.append(f"min_reader_version {min_reader}, expected {want_reader}")
        onnx_nodes = len(m.graph.node)
        if problems:
            failed += 1
            print(f"FAIL {name}: " + "; ".join(problems))
        else:
            passed += 1
            print(f"PASS {name}: {onnx_nodes} ONNX nodes -> {sum(want_ops.values())} qfold operators")
    if not args.keep and not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
