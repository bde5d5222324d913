#!/usr/bin/env python3
"""LSTM, GRU and RNN against ONNX Runtime over every attribute of the spec.

Usage: PYTHONPATH=<dir with qfold*.so> compare_recurrent.py [--cases N] [--rtol 1e-5] [--seed S]

Builds single-node models (seeded, so every run sees the same cases) that together cover
direction forward/reverse/bidirectional, activations with activation_alpha/beta (every function
of the spec), clip, input_forget, linear_before_reset, layout 0 and 1, sequence_lens (batch > 1,
lengths from 0 to the full sequence, some with every row shorter than the sequence), initial_h/initial_c, peepholes, B, every subset of the
outputs, opsets 7 and 14..22, and sizes across the GEMM tile edges. Each is converted and run by
the qfold Python module and compared with ONNX Runtime (optimizations off): an output passes when
max|qfold - ort| / max(max|ort|, 1e-6) < rtol. ONNX Runtime has no layout 1, so a layout-1 case
is compared with the layout-0 model run by ONNX Runtime on transposed inputs, its outputs
transposed back. Run it once per ISA level (QFOLD_ISA=reference for the reference kernels).

Prints a line per failure and per-op counts, then "N passed, M failed"; exits non-zero on failure.
"""

import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

import qfold

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
FUNCS = {"LSTM": 3, "GRU": 2, "RNN": 1}
# Each function with how many of alpha, beta it takes.
ACTIVATIONS = [("Sigmoid", 0), ("Tanh", 0), ("Relu", 0), ("Affine", 2), ("LeakyRelu", 1),
               ("ThresholdedRelu", 1), ("ScaledTanh", 2), ("HardSigmoid", 2), ("Elu", 1),
               ("Softsign", 0), ("Softplus", 0)]


def make_case(rng, op, index):
    """One random configuration; `index` cycles the attributes so each value occurs often."""
    dirs_name = ["forward", "reverse", "bidirectional"][index % 3]
    dirs = 2 if dirs_name == "bidirectional" else 1
    c = {
        "op": op,
        "direction": dirs_name,
        "dirs": dirs,
        "seq": int(rng.integers(1, 7)),
        "batch": int(rng.integers(1, 8)),
        "input": int(rng.choice([1, 3, 8, 17])),
        "hidden": int(rng.choice([1, 5, 16, 17, 24])),
        "layout": int(index // 3 % 2),
        "opset": int(rng.choice([14, 22])),
        "bias": rng.random() < 0.8,
        "init_h": rng.random() < 0.5,
        "init_c": op == "LSTM" and rng.random() < 0.5,
        "peepholes": op == "LSTM" and rng.random() < 0.5,
        "seq_lens": rng.random() < 0.4,
        "clip": float(rng.choice([0.5, 2.0])) if rng.random() < 0.3 else None,
        "input_forget": op == "LSTM" and index % 5 == 1,
        "lbr": op == "GRU" and index % 2 == 1,
        "outputs": [True] * (3 if op == "LSTM" else 2),
        "acts": None,
        "hidden_attr": rng.random() < 0.9,
        "seed": int(rng.integers(2**31)),
    }
    if c["layout"] == 0 and index % 7 == 3:
        c["opset"] = 7  # no layout attribute before opset 14
    if index % 4 == 2:
        # Every function in turn, with and without explicit alpha/beta.
        names, alphas, betas = [], [], []
        for k in range(FUNCS[op] * dirs):
            name, params = ACTIVATIONS[(index + 3 * k) % len(ACTIVATIONS)]
            names.append(name)
            if params >= 1 and rng.random() < 0.7:
                alphas.append(float(rng.uniform(0.1, 1.5)))
            if params >= 2 and rng.random() < 0.7 and len(alphas) > len(betas):
                betas.append(float(rng.uniform(-0.5, 0.5)))
        c["acts"] = (names, alphas, betas)
    # Each subset of the outputs with at least one present.
    while True:
        outs = [bool(rng.random() < 0.7) for _ in c["outputs"]]
        if any(outs):
            c["outputs"] = outs
            break
    return c


def build(c, layout, for_ort=False):
    """The ONNX model of case c with the given layout, and its feeds (in that layout). ONNX
    Runtime needs hidden_size; qfold also takes it from R."""
    rng = np.random.default_rng(c["seed"])
    op, H, I, T, B, D = c["op"], c["hidden"], c["input"], c["seq"], c["batch"], c["dirs"]
    G = GATES[op]
    scale = 1.0 / np.sqrt(max(H, I))
    inits, inputs, feeds = [], [], {}

    def const(name, arr):
        inits.append(onnx.numpy_helper.from_array(arr.astype(np.float32), name))
        return name

    x_shape = [B, T, I] if layout else [T, B, I]
    inputs.append(helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape))
    x = rng.standard_normal([T, B, I]).astype(np.float32)
    feeds["X"] = x.transpose(1, 0, 2).copy() if layout else x
    names = ["X", const("W", rng.uniform(-2, 2, [D, G * H, I]) * scale),
             const("R", rng.uniform(-2, 2, [D, G * H, H]) * scale)]
    names.append(const("B", rng.uniform(-0.5, 0.5, [D, 2 * G * H])) if c["bias"] else "")
    if c["seq_lens"]:
        lens = rng.integers(0 if T > 1 else 1, T + 1, B).astype(np.int32)
        if c["seed"] % 2:
            lens[0] = T  # a full-length row; otherwise the last steps may have no row at all
        inits.append(onnx.numpy_helper.from_array(lens, "sequence_lens"))
        names.append("sequence_lens")
    else:
        names.append("")
    state = [B, D, H] if layout else [D, B, H]

    def state_input(name):
        s = rng.standard_normal([D, B, H]).astype(np.float32) * 0.5
        inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, state))
        feeds[name] = s.transpose(1, 0, 2).copy() if layout else s
        return name

    names.append(state_input("initial_h") if c["init_h"] else "")
    if op == "LSTM":
        names.append(state_input("initial_c") if c["init_c"] else "")
        names.append(const("P", rng.uniform(-1, 1, [D, 3 * H])) if c["peepholes"] else "")
    while names and names[-1] == "":
        names.pop()
    out_names = ["Y", "Y_h", "Y_c"][:len(c["outputs"])]
    outs = [n if keep else "" for n, keep in zip(out_names, c["outputs"])]
    while outs and outs[-1] == "":
        outs.pop()
    attrs = {"direction": c["direction"]}
    if c["hidden_attr"] or for_ort:
        attrs["hidden_size"] = H
    if c["opset"] >= 14:
        attrs["layout"] = layout
    if c["clip"] is not None:
        attrs["clip"] = c["clip"]
    if c["input_forget"]:
        attrs["input_forget"] = 1
    if c["lbr"]:
        attrs["linear_before_reset"] = 1
    if c["acts"]:
        attrs["activations"] = c["acts"][0]
        if c["acts"][1]:
            attrs["activation_alpha"] = c["acts"][1]
        if c["acts"][2]:
            attrs["activation_beta"] = c["acts"][2]
    node = helper.make_node(op, names, outs, name=op.lower() + "_0", **attrs)
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outs if n]
    graph = helper.make_graph([node], "recurrent", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", c["opset"])])
    model.ir_version = 8
    return model, feeds


DEFAULTS = {"affine": (0.0, 0.0), "leakyrelu": (0.01, 0.0), "thresholdedrelu": (0.0, 0.0),
            "scaledtanh": (0.0, 0.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, 0.0)}
PARAMS = {n.lower(): p for n, p in ACTIVATIONS}


def act_fn(name, alpha, beta):
    n = name.lower()
    return {
        "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
        "tanh": np.tanh,
        "relu": lambda x: np.maximum(x, 0),
        "affine": lambda x: alpha * x + beta,
        "leakyrelu": lambda x: np.where(x >= 0, x, alpha * x),
        "thresholdedrelu": lambda x: np.where(x > alpha, x, 0),
        "scaledtanh": lambda x: alpha * np.tanh(beta * x),
        "hardsigmoid": lambda x: np.clip(alpha * x + beta, 0, 1),
        "elu": lambda x: np.where(x >= 0, x, alpha * np.expm1(np.minimum(x, 0))),
        "softsign": lambda x: x / (1 + np.abs(x)),
        "softplus": lambda x: np.logaddexp(0, x),
    }[n]


def reference64(c, model, feeds):
    """The spec's equations in float64 on the layout-0 model: the arbiter when ONNX Runtime's
    own approximations (its tanh in ScaledTanh, ...) differ from qfold by more than rtol."""
    init = {i.name: onnx.numpy_helper.to_array(i).astype(np.float64) for i in model.graph.initializer}
    op, H, D, T, B = c["op"], c["hidden"], c["dirs"], c["seq"], c["batch"]
    G = GATES[op]
    x = feeds["X"].astype(np.float64)
    names = c["acts"][0] if c["acts"] else {"LSTM": ["Sigmoid", "Tanh", "Tanh"],
                                            "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}[op]
    if len(names) == FUNCS[op] and D == 2:
        names = names * 2
    alphas = list(c["acts"][1]) if c["acts"] else []
    betas = list(c["acts"][2]) if c["acts"] else []
    fns = []
    for n in names:
        a, b = DEFAULTS.get(n.lower(), (0.0, 0.0))
        if PARAMS[n.lower()] >= 1 and alphas:
            a = alphas.pop(0)
        if PARAMS[n.lower()] >= 2 and betas:
            b = betas.pop(0)
        fns.append(act_fn(n, a, b))
    clip = (lambda v: np.clip(v, -c["clip"], c["clip"])) if c["clip"] is not None else (lambda v: v)
    lens = init["sequence_lens"] if "sequence_lens" in init else np.full(B, T)
    Y = np.zeros([T, D, B, H])
    Yh = np.zeros([D, B, H])
    Yc = np.zeros([D, B, H])
    for d in range(D):
        W, R = init["W"][d], init["R"][d]
        bias = init["B"][d] if "B" in init else np.zeros(2 * G * H)
        wb, rb = bias[:G * H], bias[G * H:]
        P = init["P"][d] if "P" in init else np.zeros(3 * H)
        f = fns[d * FUNCS[op]:(d + 1) * FUNCS[op]]
        for b in range(B):
            h = feeds["initial_h"][d, b].astype(np.float64) if "initial_h" in feeds else np.zeros(H)
            cs = feeds["initial_c"][d, b].astype(np.float64) if "initial_c" in feeds else np.zeros(H)
            n = int(lens[b])
            reverse = c["direction"] == "reverse" or d == 1
            for s in range(n):
                t = n - 1 - s if reverse else s
                xt = x[t, b]
                if op == "LSTM":
                    g = xt @ W.T + h @ R.T + wb + rb
                    gi, go, gf, gc = g[:H], g[H:2 * H], g[2 * H:3 * H], g[3 * H:]
                    i = f[0](clip(gi + P[:H] * cs))
                    fg = 1 - i if c["input_forget"] else f[0](clip(gf + P[2 * H:] * cs))
                    cs = fg * cs + i * f[1](clip(gc))
                    o = f[0](clip(go + P[H:2 * H] * cs))
                    h = o * f[2](cs)
                elif op == "GRU":
                    gx = xt @ W.T + wb
                    z = f[0](clip(gx[:H] + h @ R[:H].T + rb[:H]))
                    r = f[0](clip(gx[H:2 * H] + h @ R[H:2 * H].T + rb[H:2 * H]))
                    if c["lbr"]:
                        hh = f[1](clip(gx[2 * H:] + r * (h @ R[2 * H:].T + rb[2 * H:])))
                    else:
                        hh = f[1](clip(gx[2 * H:] + (r * h) @ R[2 * H:].T + rb[2 * H:]))
                    h = (1 - z) * hh + z * h
                else:
                    h = f[0](clip(xt @ W.T + h @ R.T + wb + rb))
                Y[t, d, b] = h
            Yh[d, b] = h if n else 0
            Yc[d, b] = cs if n else 0
    return {"Y": Y, "Y_h": Yh, "Y_c": Yc}


def max_rel(ref, got):
    return float(np.abs(got.astype(np.float64) - ref).max()) / max(float(np.abs(ref).max()), 1e-6)


def to_layout0_output(name, arr):
    """A layout-1 output in layout 0: Y (B,T,D,H) -> (T,D,B,H); states (B,D,H) -> (D,B,H)."""
    return arr.transpose(1, 2, 0, 3) if name == "Y" else arr.transpose(1, 0, 2)


ARBITRATED = []


def run_case(c, tmp, rtol):
    model, feeds = build(c, c["layout"])
    path = os.path.join(tmp, "case.onnx")
    qfm = os.path.join(tmp, "case.qfm")
    onnx.save(model, path)
    qfold.convert(path, qfm)
    got = qfold.Session(qfm).run(feeds)
    # ONNX Runtime on the layout-0 form of the same case.
    ref_model, ref_feeds = build(c, 0, for_ort=True)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(ref_model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    ref = dict(zip(names, sess.run(names, ref_feeds)))
    worst = 0.0
    exact = None
    for n in names:
        g = got[n]
        if c["layout"]:
            g = to_layout0_output(n, g)
        if g.shape != ref[n].shape:
            return f"{n} has shape {g.shape}, expected {ref[n].shape}", worst
        err = max_rel(ref[n], g)
        if not err < rtol:
            # ONNX Runtime approximates some functions more coarsely than rtol (its tanh
            # inside ScaledTanh): then qfold must be within rtol of the float64 equations
            # and ONNX Runtime within 10 rtol of them.
            exact = exact or reference64(c, ref_model, ref_feeds)
            e_q, e_o = max_rel(exact[n], g), max_rel(exact[n], ref[n])
            if not (e_q < rtol and e_o < 10 * rtol):
                return (f"{n}: max relative error {err:.3g} against ONNX Runtime, {e_q:.3g} "
                        f"against the float64 equations (ONNX Runtime: {e_o:.3g})"), worst
            ARBITRATED.append(f"{c['op']} {n}: ONNX Runtime {err:.3g}, float64 {e_q:.3g}")
            err = e_q
        worst = max(worst, err)
    return None, worst


def describe(c):
    keys = ["direction", "seq", "batch", "input", "hidden", "layout", "opset", "bias", "init_h",
            "init_c", "peepholes", "seq_lens", "clip", "input_forget", "lbr", "outputs", "acts"]
    return " ".join(f"{k}={c[k]}" for k in keys if c[k] not in (None, False))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=60, help="cases per op (default 60)")
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--seed", type=int, default=14)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    tmp = tempfile.mkdtemp(prefix="qfold_recurrent_")
    passed = failed = 0
    for op in ("LSTM", "GRU", "RNN"):
        op_pass = op_fail = 0
        worst = 0.0
        for i in range(args.cases):
            c = make_case(rng, op, i)
            try:
                why, err = run_case(c, tmp, args.rtol)
            except Exception as e:  # a qfold.Error or an ONNX Runtime refusal is a failure
                why, err = f"{type(e).__name__}: {e}", 0.0
            worst = max(worst, err)
            if why:
                op_fail += 1
                print(f"FAIL {op} case {i}: {why}\n    {describe(c)}")
            else:
                op_pass += 1
        print(f"{op}: {op_pass} passed, {op_fail} failed, max relative error {worst:.3g}")
        passed += op_pass
        failed += op_fail
    for a in ARBITRATED:
        print("decided by the float64 equations: " + a)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
