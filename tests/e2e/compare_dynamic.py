#!/usr/bin/env python3
"""Dynamically quantized models (onnxruntime.quantization.quantize_dynamic) against ONNX Runtime.

Usage: compare_dynamic.py --qfold PATH [--models DIR] [--rtol R] [--lstm-rtol R] [--workdir DIR]

quantize_dynamic writes DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul [-> Add] for every
MatMul with a constant weight, and com.microsoft DynamicQuantizeLSTM for LSTMs. For each model
below, per-tensor and per-channel weights, int8 and uint8 (7-bit, reduce_range: see VARIANTS),
the script converts with qfold and checks
  * that every MatMulInteger chain was fused (DynamicQuantizeMatMul or MatMulIntegerToFloat in the
    .qfm, no MatMulInteger left) and every DynamicQuantizeLSTM kept, printing the integer share of
    the MatMul/Gemm/LSTM work ("int=I/T");
  * every output bit for bit equal to the same model with the MatMulInteger results made graph
    outputs, which keeps the chains unfused (MatMulInteger, Cast, Mul and Add as separate kernels);
  * every output against ONNX Runtime running the same file with its optimizations off on one
    thread: max|qfold - ort| / max|ort| < rtol (the MatMul models) or < lstm-rtol (models with a
    DynamicQuantizeLSTM). Most outputs agree to 1e-7; the tolerances allow one quantization step
    (1/255 of a tensor's range) where a float op (LayerNorm, Softmax, the gates' sigmoid/tanh)
    differs in the last bit next to a rounding boundary of a later dynamic quantization.
Models: models/transformer_encoder.onnx and models/crnn_text.onnx (conv stack, bidirectional
LSTM, classifier), and LSTM test models built here: bidirectional with bias, sequence_lens,
initial states and peepholes; forward with a batch of three.
Also LSTMs (and GRUs) whose W and R are 8-bit initializers behind DequantizeLinear (QDQ_RECURRENT):
each LSTM must become a DynamicQuantizeLSTM or QfLSTMInteger on its 8-bit weights (int8 in
`qfold inspect`, the constants smaller than float weights), and a GRU with linear_before_reset a
QfGRUInteger, within a max abs error (QDQ_RECURRENT) and cosine 0.9999 of ONNX Runtime running the
literal QDQ graph on Y, Y_h and Y_c; a GRU without linear_before_reset stays float.
And malformed DynamicQuantizeLSTM / DynamicQuantizeMatMul nodes: exit code 2, the node and the
input named, no output file.

Prints one line per output; exits non-zero on any failure.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qfold_tools import (feed_args, inspect_operators, random_feeds, run_ort,  # noqa: E402
                         run_qfold, run_qfold_output, safe_name)

HEAVY_FLOAT = ("MatMul", "Gemm", "LSTM")
HEAVY_INT = ("DynamicQuantizeMatMul", "MatMulIntegerToFloat", "DynamicQuantizeLSTM",
             "QfMatMulWeightQ")


def inspect_json(qfold, qfm):
    """`qfold inspect --json` as a dict ({} on error)."""
    err, out = run_qfold_output([qfold, "inspect", qfm, "--json"], 120)
    return {} if err else json.loads(out)


def run_ort_1thread(path, feeds):
    """The literal graph on one thread: ONNX Runtime's DynamicQuantizeLSTM splits the batch
    between its threads and quantizes each part of H_{t-1} with its own scale, so its results
    depend on the thread count (5e-4 apart at 1 and 2 threads on lstm_forward with batch 3)."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return names, sess.run(names, feeds)


def lstm_model(path, seed, bidirectional, batch, seq_lens):
    """A one-LSTM model with constant weights (so quantize_dynamic quantizes them)."""
    rng = np.random.default_rng(seed)
    T, I, H = 7, 24, 16
    D = 2 if bidirectional else 1
    s = 1.0 / np.sqrt(H)
    inits = [numpy_helper.from_array(rng.uniform(-s, s, [D, 4 * H, I]).astype(np.float32), "W"),
             numpy_helper.from_array(rng.uniform(-s, s, [D, 4 * H, H]).astype(np.float32), "R"),
             numpy_helper.from_array(rng.uniform(-.3, .3, [D, 8 * H]).astype(np.float32), "B")]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, batch, I])]
    names = ["X", "W", "R", "B"]
    if seq_lens:
        lens = np.array([T] + [int(v) for v in rng.integers(1, T + 1, batch - 1)], np.int32)
        inits.append(numpy_helper.from_array(lens, "lens"))
        names.append("lens")
        for n in ("h0", "c0"):
            inputs.append(helper.make_tensor_value_info(n, TensorProto.FLOAT, [D, batch, H]))
        inits.append(numpy_helper.from_array(rng.uniform(-.5, .5, [D, 3 * H]).astype(np.float32),
                                             "P"))
        names += ["h0", "c0", "P"]
    node = helper.make_node("LSTM", names, ["Y", "Y_h", "Y_c"], name="lstm",
                            hidden_size=H,
                            direction="bidirectional" if bidirectional else "forward")
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
               for n in ("Y", "Y_h", "Y_c")]
    graph = helper.make_graph([node], "lstm", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.save(model, path)


# QDQ recurrent models: (name, LSTM direction, weight dtype, R per gate row, extras, X dtype,
# max abs error): extras are sequence_lens, initial states and peepholes (inputs h0, c0); an X
# dtype quantizes X statically (QuantizeLinear -> DequantizeLinear -> LSTM: QfLSTMInteger, exact
# input projection), None leaves it float (DynamicQuantizeLSTM: X quantized at run time).
# H_{t-1} is quantized at run time in both; "r0" models have R = 0, leaving only the input
# projection's error: float rounding. "gru" models have a GRU with a bias before the LSTM,
# "gru_lbr" ones with linear_before_reset = 1, "rnn" ones an RNN; they run as QfGRUInteger or
# QfRNNInteger on the 8-bit weights (X quantized at run time, or statically with an X dtype: then
# the LSTM after it reads a float X; without linear_before_reset r * H_{t-1} is quantized at run
# time for R_h's product). Errors seen: 5e-3 (dynamic X), 6e-4 (static X), 2e-7 (static X,
# R = 0).
QDQ_RECURRENT = (
    ("qdq_lstm_bidir_s8", "bidirectional", np.int8, False, True, None, 1e-2),
    ("qdq_lstm_forward_u8", "forward", np.uint8, True, False, None, 1e-2),
    ("qdq_gru_lstm_reverse_s8", "reverse", np.int8, True, False, None, 1e-2),
    ("qdq_gru_lbr_lstm_forward_u8", "forward", np.uint8, True, False, None, 1e-2),
    ("qdq_gru_lbr_static_x_s8_lstm_bidir", "bidirectional", np.int8, False, True, np.int8, 1e-2),
    ("qdq_gru_static_x_u8_lstm_forward", "forward", np.int8, True, False, np.uint8, 1e-2),
    ("qdq_rnn_lstm_bidir_u8", "bidirectional", np.uint8, False, True, None, 1e-2),
    ("qdq_rnn_static_x_s8_lstm_forward", "forward", np.int8, True, False, np.int8, 1e-2),
    ("qdq_lstm_static_x_u8_bidir", "bidirectional", np.int8, True, True, np.uint8, 2e-3),
    ("qdq_lstm_static_x_s8_forward", "forward", np.uint8, False, False, np.int8, 2e-3),
    ("qdq_lstm_static_x_r0_bidir", "bidirectional", np.int8, True, True, np.uint8, 1e-5),
    # W's scales along its input axis (2), which DynamicQuantizeLSTM cannot express: stays float.
    ("qdq_lstm_w_axis2_float", "forward", np.int8, True, False, None, 1e-5))


def qdq_recurrent_model(path, seed, direction, wtype, r_per_row, extras, x_type, first,
                        zero_r):
    """LSTM (after a GRU or RNN when `first` names one) whose W and R are 8-bit initializers behind
    DequantizeLinear, per gate row (axis 1) for W, per row or per tensor for R, as QDQ exporters
    write quantized recurrent weights. Returns the input feeds."""
    rng = np.random.default_rng(seed)
    T, B, I, H = 6, 3, 12, 10
    D = 2 if direction == "bidirectional" else 1
    inits, nodes = [], []
    lo, hi = (-127, 128) if wtype == np.int8 else (0, 256)

    def dq_weight(name, shape, per_row):
        q = rng.integers(lo, hi, shape).astype(wtype)
        scale = (rng.uniform(0.5, 1.5, shape[1] if per_row else [])
                 / (127 * np.sqrt(H))).astype(np.float32)
        zp = (np.zeros_like(scale, wtype) if wtype == np.int8
              else rng.integers(118, 138, scale.shape).astype(wtype))
        inits.append(numpy_helper.from_array(q, name + "_q"))
        inits.append(numpy_helper.from_array(scale, name + "_scale"))
        inits.append(numpy_helper.from_array(zp, name + "_zp"))
        nodes.append(helper.make_node("DequantizeLinear",
                                      [name + "_q", name + "_scale", name + "_zp"], [name],
                                      name=name + "_dq", axis=1))
        return name

    x_name, in_dim = "X", I
    if x_type is not None:
        inits.append(numpy_helper.from_array(np.array(0.025, np.float32), "x_scale"))
        inits.append(numpy_helper.from_array(np.array(128 if x_type == np.uint8 else -3, x_type),
                                             "x_zp"))
        nodes.append(helper.make_node("QuantizeLinear", ["X", "x_scale", "x_zp"], ["x_q"],
                                      name="x_quant"))
        nodes.append(helper.make_node("DequantizeLinear", ["x_q", "x_scale", "x_zp"], ["x_dq"],
                                      name="x_dequant"))
        x_name = "x_dq"
    if first:
        cell, gates = first.lower(), 3 if first == "GRU" else 1
        first_w = dq_weight(cell + "_W", [1, gates * H, I], True)
        first_r = dq_weight(cell + "_R", [1, gates * H, H], False)
        inits.append(numpy_helper.from_array(
            rng.uniform(-.3, .3, [1, 2 * gates * H]).astype(np.float32), cell + "_B"))
        attrs = {"linear_before_reset": int("_lbr_" in path)} if first == "GRU" else {}
        nodes.append(helper.make_node(first, [x_name, first_w, first_r, cell + "_B"],
                                      [cell + "_Y"], name=cell, hidden_size=H, **attrs))
        nodes.append(helper.make_node("Squeeze", [cell + "_Y", "axis1"], ["seq"], name="squeeze"))
        inits.append(numpy_helper.from_array(np.array([1], np.int64), "axis1"))
        x_name, in_dim = "seq", H
    names = [x_name, dq_weight("lstm_W", [D, 4 * H, in_dim], True),
             dq_weight("lstm_R", [D, 4 * H, H], r_per_row)]
    if zero_r:  # R's integers made its zero points
        r_q = next(t for t in inits if t.name == "lstm_R_q")
        r_zp = numpy_helper.to_array(next(t for t in inits if t.name == "lstm_R_zp"))
        r_q.CopyFrom(numpy_helper.from_array(
            np.broadcast_to(r_zp.reshape([1, -1, 1]) if r_zp.ndim else r_zp,
                            r_q.dims).astype(wtype), "lstm_R_q"))
    inits.append(numpy_helper.from_array(rng.uniform(-.3, .3, [D, 8 * H]).astype(np.float32),
                                         "lstm_B"))
    names.append("lstm_B")
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, I])]
    feeds = {"X": rng.standard_normal([T, B, I]).astype(np.float32)}
    if extras:
        inits.append(numpy_helper.from_array(np.array([T, 2, 5], np.int32), "lens"))
        inits.append(numpy_helper.from_array(
            rng.uniform(-.5, .5, [D, 3 * H]).astype(np.float32), "P"))
        for n in ("h0", "c0"):
            inputs.append(helper.make_tensor_value_info(n, TensorProto.FLOAT, [D, B, H]))
            feeds[n] = rng.uniform(-.5, .5, [D, B, H]).astype(np.float32)
        names += ["lens", "h0", "c0", "P"]
    nodes.append(helper.make_node("LSTM", names, ["Y", "Y_h", "Y_c"], name="lstm", hidden_size=H,
                                  direction=direction))
    graph = helper.make_graph(nodes, "qdq_recurrent", inputs,
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                               for n in ("Y", "Y_h", "Y_c")], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    if "_w_axis2_" in path:
        w_dq = next(n for n in model.graph.node if n.name == "lstm_W_dq")
        w_dq.attribute[0].i = 2
        for t in model.graph.initializer:
            if t.name in ("lstm_W_scale", "lstm_W_zp"):
                v = numpy_helper.to_array(t)
                t.CopyFrom(numpy_helper.from_array(np.resize(v, [in_dim]), t.name))
    onnx.save(model, path)
    return feeds


def check_qdq_recurrent(args, tmp):
    """An LSTM with QDQ weights runs as DynamicQuantizeLSTM on its 8-bit weights (the .qfm holds
    them as int8: smaller than the float weights), within the table's atol of ONNX Runtime
    running the literal QDQ graph (X and H_{t-1} are quantized at run time); a GRU before it
    runs as QfGRUInteger likewise."""
    ok = True
    for name, direction, wtype, r_per_row, extras, x_type, atol in QDQ_RECURRENT:
        first = {"qdq_gru": "GRU", "qdq_rnn": "RNN"}.get(name[:7])
        src, qfm = os.path.join(tmp, name + ".onnx"), os.path.join(tmp, name + ".qfm")
        feeds = qdq_recurrent_model(src, zlib.crc32(name.encode()), direction, wtype, r_per_row,
                                    extras, x_type, first, "_r0_" in name)
        err = run_qfold([args.qfold, "convert", src, "-o", qfm], 300)
        if err:
            print(f"FAIL {name}: {err}")
            ok = False
            continue
        details = inspect_json(args.qfold, qfm).get("operator_details", [])
        lstm = [d for d in details if d["name"] == "lstm"]
        cell = [d for d in details if first and d["name"] == first.lower()]
        kinds = {d["type"] for d in details}
        stays_float = "_w_axis2_" in name
        want = ("LSTM" if stays_float else "DynamicQuantizeLSTM" if x_type is None or first
                else "QfLSTMInteger")
        if (len(lstm) != 1 or lstm[0]["type"] != want or "DequantizeLinear" in kinds
                or lstm[0]["precision"] != ("float" if stays_float else "int8")
                or (first and (len(cell) != 1 or cell[0]["type"] != f"Qf{first}Integer"
                               or cell[0]["precision"] != "int8"))):
            print(f"FAIL {name}: the LSTM (or the GRU/RNN) does not run as expected: {details}")
            ok = False
        # The LSTM's weights stay 8-bit: the constants are 3 bytes per weight smaller than with
        # every 8-bit initializer made float32 (less the scales and zero points, repeated per
        # direction); float LSTM weights would save nothing. Checked with 2 bytes of slack.
        model = onnx.load(src)
        as_float = sum(int(np.prod(t.dims)) * (4 if t.name.endswith("_q") else
                                               numpy_helper.to_array(t).itemsize)
                       for t in model.graph.initializer)
        lstm_weights = sum(int(np.prod(t.dims)) for t in model.graph.initializer
                           if (t.name.startswith("lstm_") or (first and t.name.startswith(
                               first.lower() + "_"))) and t.name.endswith("_q"))
        const_bytes = inspect_json(args.qfold, qfm).get("constants", {}).get("bytes", as_float)
        if const_bytes >= as_float - 2 * lstm_weights and not stays_float:
            print(f"FAIL {name}: {const_bytes} bytes of constants, not less than {as_float} "
                  f"(all weights float32) - 2 * {lstm_weights} (the LSTM's weights)")
            ok = False
        names, refs = run_ort(src, feeds)
        outdir = os.path.join(tmp, name + "_out")
        cmd = [args.qfold, "run", qfm, "--output-dir", outdir]
        err = run_qfold(cmd + feed_args(feeds, tmp, f"{name}_in"), 300)
        if err:
            print(f"FAIL {name}: {err}")
            ok = False
            continue
        for n, ref in zip(names, refs):
            got = np.load(os.path.join(outdir, safe_name(n) + ".npy")).astype(np.float64)
            ref = np.asarray(ref, np.float64)
            diff = float(np.abs(got - ref).max())
            cos = float(np.dot(got.ravel(), ref.ravel())
                        / max(np.linalg.norm(got) * np.linalg.norm(ref), 1e-30))
            passed = got.shape == ref.shape and diff < atol and cos > 0.9999
            ok = ok and passed
            print(f"{'PASS' if passed else 'FAIL'} {name} '{n}' {list(ref.shape)}: "
                  f"max_abs={diff:.3e} cosine={cos:.7f} (atol {atol:g}, "
                  f"cosine > 0.9999) constants {const_bytes} bytes, {as_float} as float")
    return ok


# (per_channel, weight type), always with reduce_range (7-bit weights): ONNX Runtime's AVX2 u8s8
# GEMM (no VNNI) adds u8 x s8 products in pairs with int16 saturation, so with full-range int8
# weights its own sums are off (by 37% on a one-MatMul model; DynamicQuantizeLSTM, whose weights
# quantize_dynamic always makes int8, 0.19 absolute against the float LSTM where qfold is 0.006);
# qfold's are exact either way.
VARIANTS = ((False, QuantType.QInt8), (True, QuantType.QInt8), (False, QuantType.QUInt8),
            (True, QuantType.QUInt8))


def check_bad_inputs(args, tmp):
    """Malformed contrib nodes: exit code 2, a message naming the node and the input, no file."""
    D, I, H, N = 1, 8, 4, 6
    cases = []
    inits = [numpy_helper.from_array(np.zeros([D, I, 4 * H], np.int8), "W"),
             numpy_helper.from_array(np.zeros([D, H, 4 * H], np.int8), "R"),
             numpy_helper.from_array(np.ones([3], np.float32), "ws"),  # not [dirs] or [dirs, 4H]
             numpy_helper.from_array(np.zeros([D], np.int8), "wz"),
             numpy_helper.from_array(np.ones([D], np.float32), "rs"),
             numpy_helper.from_array(np.zeros([D], np.int8), "rz")]
    node = helper.make_node("DynamicQuantizeLSTM", ["X", "W", "R", "", "", "", "", "", "ws", "wz",
                                                    "rs", "rz"], ["Y"], name="bad_lstm",
                            domain="com.microsoft", hidden_size=H)
    cases.append(("bad_lstm", "W_scale", node, [5, 1, I], inits))
    inits = [numpy_helper.from_array(np.zeros([I, N], np.int8), "B"),
             numpy_helper.from_array(np.ones([N], np.float32), "bs"),
             numpy_helper.from_array(np.zeros([N], np.int8), "bz"),
             numpy_helper.from_array(np.ones([N + 1], np.float32), "bias")]  # one too many
    node = helper.make_node("DynamicQuantizeMatMul", ["X", "B", "bs", "bz", "bias"], ["Y"],
                            name="bad_matmul", domain="com.microsoft")
    cases.append(("bad_matmul", "bias", node, [3, I], inits))
    # qfold's own QfLSTMInteger (what a QDQ LSTM with a static X becomes), X_scale not one value.
    inits = [numpy_helper.from_array(np.zeros([D, I, 4 * H], np.int8), "W"),
             numpy_helper.from_array(np.zeros([D, H, 4 * H], np.int8), "R"),
             numpy_helper.from_array(np.ones([D], np.float32), "ws"),
             numpy_helper.from_array(np.ones([D], np.float32), "rs"),
             numpy_helper.from_array(np.ones([2], np.float32), "xs"),
             numpy_helper.from_array(np.zeros([D, 5, I], np.uint8), "xq")]
    node = helper.make_node("QfLSTMInteger", ["xq", "W", "R", "", "", "", "", "", "ws", "", "rs",
                                              "", "xs"], ["Y"], name="bad_static_lstm",
                            hidden_size=H)
    cases.append(("bad_static_lstm", "X_scale", node, [1], inits))
    ok = True
    for name, what, node, x_shape, inits in cases:
        graph = helper.make_graph(
            [node], name, [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)]
            if "X" in node.input else [],
            [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14),
                                                        helper.make_opsetid("com.microsoft", 1)])
        model.ir_version = 8
        src, qfm = os.path.join(tmp, name + ".onnx"), os.path.join(tmp, name + ".qfm")
        onnx.save(model, src)
        proc = subprocess.run([args.qfold, "convert", src, "-o", qfm], capture_output=True,
                              text=True, timeout=120)
        passed = (proc.returncode == 2 and f"'{name}'" in proc.stderr and what in proc.stderr
                  and not os.path.exists(qfm))
        ok = ok and passed
        print(f"{'PASS' if passed else 'FAIL'} {name}: exit {proc.returncode}, "
              f"{proc.stderr.strip()}")
    return ok


def check(args, src, per_channel, weight_type, tmp):
    wname = "s8" if weight_type == QuantType.QInt8 else "u8"
    label = f"{os.path.basename(src)} {'per-channel' if per_channel else 'per-tensor'} {wname}"
    stem = os.path.splitext(os.path.basename(src))[0] + ("_pc" if per_channel else "_pt") + wname
    dyn = os.path.join(tmp, stem + ".dyn.onnx")
    # quantize_dynamic writes "<input>-inferred.onnx" beside its input and deletes it: from a
    # private copy, so it never touches models/ or races the other variant of this test.
    private = os.path.join(tmp, stem + ".src.onnx")
    shutil.copyfile(src, private)
    quantize_dynamic(private, dyn, per_channel=per_channel, weight_type=weight_type,
                     reduce_range=True)
    model = onnx.load(dyn)
    onnx_ops = {}
    for n in model.graph.node:
        onnx_ops[n.op_type] = onnx_ops.get(n.op_type, 0) + 1
    qfm = os.path.join(tmp, stem + ".qfm")
    err = run_qfold([args.qfold, "convert", dyn, "-o", qfm], 300)
    if err:
        print(f"FAIL {label}: {err}")
        return False
    ops = inspect_operators(args.qfold, qfm) or {}
    short = {t.split(".")[-1]: n for t, n in ops.items()}
    ok = True
    fused = short.get("DynamicQuantizeMatMul", 0) + short.get("MatMulIntegerToFloat", 0)
    if short.get("MatMulInteger", 0) or fused != onnx_ops.get("MatMulInteger", 0):
        print(f"FAIL {label}: {onnx_ops.get('MatMulInteger', 0)} MatMulInteger in the model, "
              f"{fused} fused and {short.get('MatMulInteger', 0)} left in the .qfm")
        ok = False
    if short.get("DynamicQuantizeLSTM", 0) != onnx_ops.get("DynamicQuantizeLSTM", 0):
        print(f"FAIL {label}: DynamicQuantizeLSTM not kept")
        ok = False
    heavy_int = sum(short.get(t, 0) for t in HEAVY_INT)
    heavy = heavy_int + sum(short.get(t, 0) for t in HEAVY_FLOAT)
    rtol = args.lstm_rtol if onnx_ops.get("DynamicQuantizeLSTM") else args.rtol

    rng = np.random.default_rng(zlib.crc32(stem.encode()))
    feeds = random_feeds(model, rng)
    names, refs = run_ort_1thread(dyn, feeds)
    outdir = os.path.join(tmp, stem + "_out")
    os.makedirs(outdir, exist_ok=True)
    inputs = feed_args(feeds, tmp, f"{stem}_in")
    err = run_qfold([args.qfold, "run", qfm, "--output-dir", outdir] + inputs, 300)
    # The same model without the fusion (MatMulInteger, Cast, Mul, Add as separate kernels):
    # each MatMulInteger's sums made a graph output too, which keeps its chain apart.
    unfused = onnx.load(dyn)
    for n in [n for n in unfused.graph.node if n.op_type == "MatMulInteger"]:
        unfused.graph.output.append(helper.make_tensor_value_info(n.output[0], TensorProto.INT32,
                                                                  None))
    unfused_onnx = os.path.join(tmp, stem + "_unfused.onnx")
    onnx.save(unfused, unfused_onnx)
    unfused_qfm, unfused_out = os.path.join(tmp, stem + "_unfused.qfm"), outdir + "_unfused"
    err = err or run_qfold([args.qfold, "convert", unfused_onnx, "-o", unfused_qfm], 300)
    err = err or run_qfold([args.qfold, "run", unfused_qfm, "--output-dir", unfused_out] + inputs,
                           300)
    # Two threads: the same values bit for bit (a bidirectional DynamicQuantizeLSTM as large as
    # crnn_text's then runs its directions side by side, each quantizing its own H_{t-1}).
    outdir2 = outdir + "_2threads"
    err = err or run_qfold([args.qfold, "run", qfm, "--threads", "2", "--output-dir", outdir2]
                           + inputs, 300)
    if err:
        print(f"FAIL {label}: {err}")
        return False
    unfused_ops = {t.split(".")[-1]: n
                   for t, n in (inspect_operators(args.qfold, unfused_qfm) or {}).items()}
    if unfused_ops.get("MatMulInteger", 0) != onnx_ops.get("MatMulInteger", 0):
        print(f"FAIL {label}: the unfused variant has {unfused_ops.get('MatMulInteger', 0)} "
              f"MatMulInteger, the model {onnx_ops.get('MatMulInteger', 0)}")
        ok = False
    for name, ref in zip(names, refs):
        got = np.load(os.path.join(outdir, safe_name(name) + ".npy"))
        unfused = np.load(os.path.join(unfused_out, safe_name(name) + ".npy"))
        two = np.load(os.path.join(outdir2, safe_name(name) + ".npy"))
        if not np.array_equal(got, two):
            print(f"FAIL {label} '{name}': 2 threads differ from 1 by "
                  f"{float(np.abs(got - two).max()):.3e}")
            ok = False
        if not np.array_equal(got, unfused):
            print(f"FAIL {label} '{name}': the fused ops differ from the unfused chain by "
                  f"{float(np.abs(got - unfused).max()):.3e}")
            ok = False
        ref = np.asarray(ref, np.float64)
        diff = float(np.abs(got.astype(np.float64) - ref).max()) if ref.size else 0.0
        rel = diff / max(float(np.abs(ref).max()) if ref.size else 0.0, 1e-6)
        passed = got.shape == ref.shape and rel < rtol
        ok = ok and passed
        print(f"{'PASS' if passed else 'FAIL'} {label} '{name}' {list(ref.shape)}: "
              f"max_abs={diff:.3e} max_rel={rel:.3e} (rtol {rtol:g}) heavy int={heavy_int}/{heavy}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qfold", required=True)
    ap.add_argument("--models", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "models"))
    ap.add_argument("--rtol", type=float, default=2e-3)
    ap.add_argument("--lstm-rtol", type=float, default=2e-3)
    ap.add_argument("--workdir")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        srcs = [os.path.join(args.models, m)
                for m in ("transformer_encoder.onnx", "crnn_text.onnx")]
        for name, seed, bidir, batch, lens in (("lstm_bidir_lens", 1, True, 3, True),
                                               ("lstm_forward", 2, False, 3, False)):
            path = os.path.join(tmp, name + ".onnx")
            lstm_model(path, seed, bidir, batch, lens)
            srcs.append(path)
        ok = check_bad_inputs(args, tmp)
        ok = check_qdq_recurrent(args, tmp) and ok
        for src in srcs:
            for per_channel, weight_type in VARIANTS:
                ok = check(args, src, per_channel, weight_type, tmp) and ok
    print("all passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
