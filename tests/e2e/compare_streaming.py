#!/usr/bin/env python3
"""If folding (--const), streaming state bindings, and their errors, against ONNX Runtime.

Usage: PYTHONPATH=<dir with qfold*.so> compare_streaming.py --qfold build/cli/qfold
                                                            --vad models/streaming/vad_like.onnx

- models/streaming/vad_like.onnx (scripts/make_streaming_models.py: a top-level If on the sample
  rate, an LSTM in each branch, its state an input and an output) converted with --const sr=16000
  and sr=8000, then streamed chunk after chunk with the state bound output -> input, by the Python
  Session (state_bindings) and by `qfold run --bind-state --steps`, against ONNX Runtime fed the
  state by hand: every chunk's probability and the final state within --rtol (1e-5).
- Nested Ifs (an If inside a branch reading values of both enclosing graphs) at every mode, and a
  --const given as a small tensor, against ONNX Runtime with the same values fed.
- Without --const the If stays and picks its branch per run, as the folded models compute.
- Bad input: a --const naming no input or a value that does not parse, branches whose outputs
  disagree in dtype or rank: exit code 2, an error naming the node, no output file; `qfold check`
  reports no error for the dynamic If.

Prints one line per check, then "N passed, M failed"; exits non-zero on failure.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

import qfold

RESULTS = []


def check(name, ok, detail=""):
    RESULTS.append(ok)
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))


def max_rel(ref, got):
    ref = np.asarray(ref, np.float64)
    return float(np.abs(np.asarray(got, np.float64) - ref).max()) / max(float(np.abs(ref).max()),
                                                                        1e-6)


def ort_session(model):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    data = model if isinstance(model, str) else model.SerializeToString()
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def cli(qfold_bin, *args):
    return subprocess.run([qfold_bin, *args], capture_output=True, text=True, timeout=300)


# The VAD-like model -----------------------------------------------------------------------------

def vad_checks(qfold_bin, vad, tmp, rtol, chunks=8):
    ref = ort_session(vad)
    state_shape = [d.dim_value for d in
                   next(i for i in onnx.load(vad).graph.input if i.name == "state")
                   .type.tensor_type.shape.dim]
    rng = np.random.default_rng(5)
    audio = (rng.standard_normal((chunks, 1, 512)) * 0.3).astype(np.float32)
    outs_by_rate = {}
    for sr in (16000, 8000):
        qfm = os.path.join(tmp, f"vad_{sr}.qfm")
        p = cli(qfold_bin, "convert", vad, "-o", qfm, "--const", f"sr={sr}")
        check(f"vad sr={sr}: convert --const", p.returncode == 0 and "If 'If_sr'" in p.stdout,
              p.stderr + p.stdout)
        if p.returncode:
            continue
        # ONNX Runtime, the state fed back by hand.
        state = np.zeros(state_shape, np.float32)
        want = []
        for k in range(chunks):
            prob, state = ref.run(None, {"input": audio[k], "sr": np.array(sr, np.int64),
                                         "state": state})
            want.append(prob)
        want = np.stack(want)
        # qfold, the state carried by the session.
        sess = qfold.Session(qfm, state_bindings={"stateN": "state"})
        names = [i["name"] for i in sess.inputs]
        check(f"vad sr={sr}: sr is no longer an input", names == ["input", "state"], str(names))
        got, last = [], None
        for k in range(chunks):
            out = sess.run({"input": audio[k]})
            got.append(out["output"])
            last = out["stateN"]
        got = np.stack(got)
        err = max(max_rel(want, got), max_rel(state, last))
        check(f"vad sr={sr}: {chunks} chunks streamed, state bound (max rel {err:.2g})",
              err < rtol, f"max relative error {err:.3g} >= {rtol}")
        outs_by_rate[sr] = got
        # reset_state starts a new stream: the first chunk again gives the first result.
        sess.reset_state()
        again = sess.run({"input": audio[0]})["output"]
        check(f"vad sr={sr}: reset_state restarts the stream",
              np.array_equal(again, got[0]), f"{again} != {got[0]}")
        # A state given explicitly overrides the carried one.
        given = sess.run({"input": audio[1], "state": np.zeros(state_shape, np.float32)})
        first_step = ref.run(None, {"input": audio[1], "sr": np.array(sr, np.int64),
                                    "state": np.zeros(state_shape, np.float32)})[0]
        err = max_rel(first_step, given["output"])
        check(f"vad sr={sr}: a given state overrides the carried one", err < rtol, f"{err:.3g}")
        # The CLI: all chunks in one session.
        np.save(os.path.join(tmp, "chunks.npy"), audio)
        out_dir = os.path.join(tmp, f"run_{sr}")
        p = cli(qfold_bin, "run", qfm, "--input", "input=" + os.path.join(tmp, "chunks.npy"),
                "--bind-state", "stateN=state", "--steps", str(chunks), "--output-dir", out_dir)
        ok = p.returncode == 0
        if ok:
            run_out = np.load(os.path.join(out_dir, "output.npy"))
            ok = run_out.shape == want.shape and max_rel(want, run_out) < rtol
        check(f"vad sr={sr}: qfold run --bind-state --steps {chunks}", ok,
              p.stderr + p.stdout if p.returncode else f"shape {run_out.shape}, "
              f"max rel {max_rel(want, run_out) if run_out.shape == want.shape else 'n/a'}")
        p = cli(qfold_bin, "bench", qfm, "--bind-state", "stateN=state", "--warmup", "1",
                "--iterations", "3", "--json")
        check(f"vad sr={sr}: qfold bench --bind-state", p.returncode == 0, p.stderr)
    if len(outs_by_rate) == 2:
        check("vad: the two rates run different branches",
              not np.allclose(outs_by_rate[16000], outs_by_rate[8000]), "same outputs")

    # Without --const the If stays and picks its branch per run from the sr input.
    dyn_qfm = os.path.join(tmp, "vad_dynamic.qfm")
    p = cli(qfold_bin, "convert", vad, "-o", dyn_qfm)
    check("vad without --const: converts, the If kept",
          p.returncode == 0 and os.path.exists(dyn_qfm), f"exit {p.returncode}: {p.stderr}")
    if p.returncode == 0:
        sess = qfold.Session(dyn_qfm, state_bindings={"stateN": "state"})
        for sr in (16000, 8000):
            sess.reset_state()
            got = np.stack([sess.run({"input": audio[k], "sr": np.array(sr, np.int64)})["output"]
                            for k in range(chunks)])
            want = outs_by_rate.get(sr)
            err = max_rel(want, got) if want is not None else float("inf")
            check(f"vad sr={sr} chosen at run time: as the folded model (max rel {err:.2g})",
                  err < rtol, f"{err:.3g}")
    # Errors: no output file, exit 2, the input named.
    qfm = os.path.join(tmp, "vad_bad.qfm")
    p = cli(qfold_bin, "convert", vad, "-o", qfm, "--const", "rate=16000")
    check("--const naming a missing input: exit 2, no file",
          p.returncode == 2 and "'rate', which is not a graph input" in p.stderr
          and not os.path.exists(qfm), f"exit {p.returncode}: {p.stderr}")
    p = cli(qfold_bin, "convert", vad, "-o", qfm, "--const", "sr=16k")
    check("--const value not of the input's dtype: exit 2, no file",
          p.returncode == 2 and "int64" in p.stderr and not os.path.exists(qfm),
          f"exit {p.returncode}: {p.stderr}")
    p = cli(qfold_bin, "check", vad, "--json")
    report = json.loads(p.stdout) if p.stdout.startswith("{") else {"issues": []}
    errors = [i for i in report["issues"] if i["severity"] == "error"]
    check("check without --const: no errors (the If runs at run time)",
          p.returncode in (0, 1) and not errors, p.stdout[-2000:] + p.stderr)
    p = cli(qfold_bin, "check", vad, "--json", "--const", "sr=8000")
    report = json.loads(p.stdout) if p.stdout.startswith("{") else {"issues": []}
    errors = [i for i in report["issues"] if i["severity"] == "error"]
    check("check --const sr=8000: no errors", p.returncode in (0, 1) and not errors,
          p.stdout[-2000:] + p.stderr)
    # Python convert(consts=...) as the CLI.
    qfm = os.path.join(tmp, "vad_py.qfm")
    notes = qfold.convert(vad, qfm, consts={"sr": 8000})
    sess = qfold.Session(qfm, state_bindings={"stateN": "state"})
    out = sess.run({"input": audio[0]})["output"]
    check("python convert(consts={'sr': 8000})",
          8000 in outs_by_rate and np.array_equal(out, outs_by_rate[8000][0])
          and any("If_sr" in n for n in notes), str(notes))
    try:
        qfold.Session(qfm, state_bindings={"stateN": "input"})
        check("state binding of a different shape is refused", False, "no error")
    except qfold.InvalidArgument as e:
        check("state binding of a different shape is refused", "stateN" in str(e), str(e))


# Nested Ifs and tensor consts -------------------------------------------------------------------

def nested_if_model():
    """mode > 0 ? (mode == 2 ? x*a + t : x - t) : x * 3, where t = x + 1 is computed in the outer
    then_branch and read by both inner branches, and a is an initializer of the top graph."""
    f = TensorProto.FLOAT
    t_node = helper.make_node("Add", ["x", "one"], ["t"], name="t_add")
    inner_then = helper.make_graph(
        [helper.make_node("Mul", ["x", "a"], ["xa"], name="xa"),
         helper.make_node("Add", ["xa", "t"], ["r2"], name="r2")],
        "inner_then", [], [helper.make_tensor_value_info("r2", f, [2, 3])])
    inner_else = helper.make_graph(
        [helper.make_node("Sub", ["x", "t"], ["r1"], name="r1")],
        "inner_else", [], [helper.make_tensor_value_info("r1", f, [2, 3])])
    outer_then = helper.make_graph(
        [t_node,
         helper.make_node("Equal", ["mode", "two"], ["is2"], name="is2"),
         helper.make_node("If", ["is2"], ["inner"], name="inner_if", then_branch=inner_then,
                          else_branch=inner_else)],
        "outer_then", [], [helper.make_tensor_value_info("inner", f, [2, 3])],
        [onnx.numpy_helper.from_array(np.array(1.0, np.float32), "one")])
    outer_else = helper.make_graph(
        [helper.make_node("Mul", ["x", "three"], ["r0"], name="r0")],
        "outer_else", [], [helper.make_tensor_value_info("r0", f, [2, 3])],
        [onnx.numpy_helper.from_array(np.array(3.0, np.float32), "three")])
    graph = helper.make_graph(
        [helper.make_node("Greater", ["mode", "zero"], ["pos"], name="pos"),
         helper.make_node("If", ["pos"], ["y"], name="outer_if", then_branch=outer_then,
                          else_branch=outer_else)],
        "nested", [helper.make_tensor_value_info("x", f, [2, 3]),
                   helper.make_tensor_value_info("mode", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", f, [2, 3])],
        [onnx.numpy_helper.from_array(np.array(0, np.int64), "zero"),
         onnx.numpy_helper.from_array(np.array(2, np.int64), "two"),
         onnx.numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5, "a")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def tensor_const_model():
    """y = x * w + b where b (shape [3]) and the condition's flags (shape [2]) are inputs."""
    f = TensorProto.FLOAT
    then_g = helper.make_graph([helper.make_node("Add", ["xw", "b"], ["p"], name="p")], "then",
                               [], [helper.make_tensor_value_info("p", f, [2, 3])])
    else_g = helper.make_graph([helper.make_node("Sub", ["xw", "b"], ["m"], name="m")], "else",
                               [], [helper.make_tensor_value_info("m", f, [2, 3])])
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["xw"], name="xw"),
         helper.make_node("ReduceMax", ["flags"], ["fmax"], name="fmax", keepdims=0),
         helper.make_node("Cast", ["fmax"], ["cond"], name="cond", to=TensorProto.BOOL),
         helper.make_node("If", ["cond"], ["y"], name="flag_if", then_branch=then_g,
                          else_branch=else_g)],
        "tensor_const",
        [helper.make_tensor_value_info("x", f, [2, 3]),
         helper.make_tensor_value_info("b", f, [3]),
         helper.make_tensor_value_info("flags", TensorProto.INT32, [None])],
        [helper.make_tensor_value_info("y", f, [2, 3])],
        [onnx.numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32), "w")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def disagreeing_model(kind):
    """An If whose branch outputs differ in dtype ("dtype") or rank ("rank")."""
    f = TensorProto.FLOAT
    then_g = helper.make_graph([helper.make_node("Identity", ["x"], ["a"], name="a")], "then",
                               [], [helper.make_tensor_value_info("a", f, [2, 3])])
    if kind == "dtype":
        else_g = helper.make_graph(
            [helper.make_node("Cast", ["x"], ["c"], name="c", to=TensorProto.INT32)], "else", [],
            [helper.make_tensor_value_info("c", TensorProto.INT32, [2, 3])])
    else:
        else_g = helper.make_graph(
            [helper.make_node("Flatten", ["x"], ["c"], name="c", axis=0)], "else", [],
            [helper.make_tensor_value_info("c", f, [1, 6, 1])])
    graph = helper.make_graph(
        [helper.make_node("If", ["flag"], ["y"], name="bad_if", then_branch=then_g,
                          else_branch=else_g)],
        "disagree", [helper.make_tensor_value_info("x", f, [2, 3]),
                     helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", f, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    return m


def graph_checks(qfold_bin, tmp, rtol):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    path = os.path.join(tmp, "nested.onnx")
    onnx.save(nested_if_model(), path)
    ref = ort_session(path)
    for mode in (-1, 1, 2):
        qfm = os.path.join(tmp, f"nested_{mode}.qfm")
        p = cli(qfold_bin, "convert", path, "-o", qfm, "--const", f"mode={mode}")
        if p.returncode:
            check(f"nested If, mode={mode}", False, p.stderr)
            continue
        want = ref.run(None, {"x": x, "mode": np.array(mode, np.int64)})[0]
        got = qfold.Session(qfm).run({"x": x})["y"]
        err = max_rel(want, got)
        check(f"nested If, mode={mode} (max rel {err:.2g})", err < rtol, f"{err:.3g}")

    path = os.path.join(tmp, "tensor_const.onnx")
    onnx.save(tensor_const_model(), path)
    ref = ort_session(path)
    for flags in ("0,0", "0,3,1"):
        qfm = os.path.join(tmp, "tensor_const.qfm")
        p = cli(qfold_bin, "convert", path, "-o", qfm, "--const", "b=1,-2,0.25",
                "--const", "flags=" + flags)
        if p.returncode:
            check(f"--const tensors b, flags={flags}", False, p.stderr)
            continue
        want = ref.run(None, {"x": x, "b": np.array([1, -2, 0.25], np.float32),
                              "flags": np.array(flags.split(","), np.int32)})[0]
        got = qfold.Session(qfm).run({"x": x})["y"]
        err = max_rel(want, got)
        check(f"--const tensors b, flags={flags} (max rel {err:.2g})", err < rtol, f"{err:.3g}")
    p = cli(qfold_bin, "convert", path, "-o", os.path.join(tmp, "tc_bad.qfm"), "--const",
            "b=1,2", "--const", "flags=1")
    check("--const with the wrong element count: exit 2",
          p.returncode == 2 and "gives 2 value(s)" in p.stderr, p.stderr)

    for kind in ("dtype", "rank"):
        path = os.path.join(tmp, f"disagree_{kind}.onnx")
        onnx.save(disagreeing_model(kind), path)
        qfm = os.path.join(tmp, f"disagree_{kind}.qfm")
        p = cli(qfold_bin, "convert", path, "-o", qfm, "--const", "flag=1")
        check(f"branches disagreeing in {kind}: exit 2, names the If, no file",
              p.returncode == 2 and "If 'bad_if'" in p.stderr
              and {"dtype": "int32 in else_branch", "rank": "rank 3 in else_branch"}[kind]
              in p.stderr
              and not os.path.exists(qfm), f"exit {p.returncode}: {p.stderr}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qfold", required=True, help="the qfold CLI")
    ap.add_argument("--vad", required=True, help="models/streaming/vad_like.onnx")
    ap.add_argument("--rtol", type=float, default=1e-5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="qfold_streaming_") as tmp:
        vad_checks(args.qfold, args.vad, tmp, args.rtol)
        graph_checks(args.qfold, tmp, args.rtol)
    failed = RESULTS.count(False)
    print(f"{len(RESULTS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
