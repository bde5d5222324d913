#!/usr/bin/env python3
"""ONNX optionals at run time (runtime/src/ops/optional.cc) against ONNX Runtime.

Usage: PYTHONPATH=<dir with qfold*.so> compare_optionals.py --qfold build/cli/qfold

One model built here, converted with `qfold convert` and run through the Python module at 1 and
2 threads: an optional tensor graph input `x` (fed an array, or None for none), read by
OptionalHasElement and, in an If on that answer, by OptionalGetElement; a second If returning
an optional, `x` itself in one branch and a none (Optional with a `type`) in the other. Every
output equals ONNX Runtime's, a none output coming back as None from both.
The same through qfold.InferenceSession (ONNX Runtime's interface: types such as
optional(tensor(float)), None fed and returned).
Bad input: OptionalGetElement of a none at run time fails naming the node.

Prints one line per check, then "N passed, M failed"; exits non-zero on failure.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper

import qfold

RESULTS = []


def check(name, ok, detail=""):
    RESULTS.append(bool(ok))
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + str(detail)[-2000:]))


def optional_tensor_type(elem, shape):
    return helper.make_optional_type_proto(helper.make_tensor_type_proto(elem, shape))


def optional_model(path):
    present = helper.make_graph(
        [helper.make_node("OptionalGetElement", ["x"], ["got"], name="get"),
         helper.make_node("Add", ["got", "one"], ["plus"], name="add_one")],
        "present", [], [helper.make_tensor_value_info("plus", T.FLOAT, [3])])
    absent = helper.make_graph(
        [helper.make_node("Constant", [], ["zeros"], name="zeros",
                          value=helper.make_tensor("z", T.FLOAT, [3], [0.0, 0.0, 0.0]))],
        "absent", [], [helper.make_tensor_value_info("zeros", T.FLOAT, [3])])
    pass_on = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["same"], name="pass_on")],
        "pass_on", [], [helper.make_value_info("same", optional_tensor_type(T.FLOAT, [3]))])
    make_none = helper.make_graph(
        [helper.make_node("Optional", [], ["nothing"], name="none",
                          type=helper.make_tensor_type_proto(T.FLOAT, [3]))],
        "make_none", [], [helper.make_value_info("nothing", optional_tensor_type(T.FLOAT, [3]))])
    nodes = [
        helper.make_node("OptionalHasElement", ["x"], ["has"], name="has"),
        helper.make_node("If", ["has"], ["value"], name="value_or_zeros",
                         then_branch=present, else_branch=absent),
        helper.make_node("If", ["flag"], ["maybe"], name="maybe",
                         then_branch=pass_on, else_branch=make_none),
    ]
    graph = helper.make_graph(
        nodes, "optionals",
        [helper.make_value_info("x", optional_tensor_type(T.FLOAT, [3])),
         helper.make_tensor_value_info("flag", T.BOOL, [])],
        [helper.make_tensor_value_info("has", T.BOOL, []),
         helper.make_tensor_value_info("value", T.FLOAT, [3]),
         helper.make_value_info("maybe", optional_tensor_type(T.FLOAT, [3]))],
        initializer=[helper.make_tensor("one", T.FLOAT, [], [1.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def get_none_model(path):
    graph = helper.make_graph(
        [helper.make_node("OptionalGetElement", ["x"], ["y"], name="unwrap")], "get_none",
        [helper.make_value_info("x", optional_tensor_type(T.FLOAT, [3]))],
        [helper.make_tensor_value_info("y", T.FLOAT, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def same(want, got):
    """Empty string when equal (None for none, else arrays), else what differs."""
    if want is None or got is None:
        return "" if want is None and got is None else f"{got!r} vs {want!r}"
    got = np.asarray(got)
    want = np.asarray(want)
    if want.shape != got.shape or want.dtype != got.dtype:
        return f"{got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}"
    return "" if np.array_equal(want, got) else f"values differ: {got.ravel()} vs {want.ravel()}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qfold", required=True)
    args = ap.parse_args()
    rng = np.random.default_rng(3)
    with tempfile.TemporaryDirectory() as tmp:
        path = optional_model(os.path.join(tmp, "optionals.onnx"))
        qfm = path[:-5] + ".qfm"
        p = subprocess.run([args.qfold, "convert", path, "-o", qfm], capture_output=True,
                           text=True, timeout=300)
        check("convert", p.returncode == 0, p.stderr)
        ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        names = [o.name for o in ref.get_outputs()]
        feeds_list = [{"x": rng.standard_normal(3).astype(np.float32), "flag": np.array(f)}
                      for f in (True, False)]
        feeds_list += [{"x": None, "flag": np.array(f)} for f in (True, False)]
        for threads in (1, 2):
            if p.returncode:
                break
            sess = qfold.Session(qfm, num_threads=threads)
            info = {i["name"]: i for i in sess.inputs}
            check(f"{threads} thread(s): input 'x' reported optional", info["x"]["optional"])
            for i, feeds in enumerate(feeds_list):
                want = dict(zip(names, ref.run(None, feeds)))
                try:
                    got = sess.run(feeds)
                except Exception as e:  # noqa: BLE001 - reported as a failed check
                    check(f"feeds {i}, {threads} thread(s)", False, e)
                    continue
                diffs = [f"{k}: {same(want[k], got.get(k))}" for k in names
                         if same(want[k], got.get(k))]
                label = "x none" if feeds["x"] is None else "x present"
                check(f"{label}, flag {bool(feeds['flag'])}, {threads} thread(s)", not diffs,
                      diffs)

        # The ONNX Runtime-like interface: the same types and outputs, None for none.
        wrapped = qfold.InferenceSession(path)
        check("InferenceSession: input and output types as ONNX Runtime's",
              [(a.name, a.type) for a in wrapped.get_inputs() + wrapped.get_outputs()] ==
              [(a.name, a.type) for a in ref.get_inputs() + ref.get_outputs()],
              [a.type for a in wrapped.get_inputs() + wrapped.get_outputs()])
        for feeds in feeds_list:
            want = ref.run(None, feeds)
            got = wrapped.run(None, feeds)
            diffs = [same(w, g) for w, g in zip(want, got) if same(w, g)]
            check(f"InferenceSession: x {'none' if feeds['x'] is None else 'present'}, "
                  f"flag {bool(feeds['flag'])}", not diffs and len(got) == len(want), diffs)

        bad = get_none_model(os.path.join(tmp, "get_none.onnx"))
        bad_qfm = bad[:-5] + ".qfm"
        p = subprocess.run([args.qfold, "convert", bad, "-o", bad_qfm], capture_output=True,
                           text=True, timeout=300)
        check("OptionalGetElement model: convert", p.returncode == 0, p.stderr)
        if p.returncode == 0:
            sess = qfold.Session(bad_qfm)
            try:
                sess.run({"x": None})
                check("OptionalGetElement of none fails", False, "no error")
            except Exception as e:  # noqa: BLE001 - the message is what is checked
                check("OptionalGetElement of none fails naming the node",
                      "unwrap" in str(e) and "none" in str(e), e)
            out = sess.run({"x": np.arange(3, dtype=np.float32)})
            check("OptionalGetElement of a value", same(np.arange(3, dtype=np.float32),
                                                        out["y"]) == "", out)
    passed = sum(RESULTS)
    print(f"{passed} passed, {len(RESULTS) - passed} failed")
    return 0 if passed == len(RESULTS) and RESULTS else 1


if __name__ == "__main__":
    sys.exit(main())
