#!/usr/bin/env python3
"""The Loop-based greedy decoder (models/loop_decoder.onnx, scripts/make_models.py) against ONNX
Runtime, and the Loop conversion errors.

Usage: PYTHONPATH=<dir with qfold*.so> compare_loop_decoder.py --qfold build/cli/qfold
           --model models/loop_decoder.onnx [--rtol 1e-5] [--bench 200]

- Several encoder vectors, chosen so that the loop stops at its end token after 1 and 2 steps
  and runs all 16 steps otherwise: tokens and output shapes equal, logits and state within
  --rtol (max |qfold - ort| / max |ort|).
- `qfold inspect` lists the body subgraph.
- A Loop whose carried value grows every iteration (Concat; the body re-planned per shape)
  reading a value of the enclosing graph, at 0, 1 and 4 iterations, against ONNX Runtime.
- Bad input, each with exit code 2, an error naming the Loop and no output file: the Loop
  without its trip count (unbounded: its condition comes from the body), the body reading a
  value no graph defines; `qfold check` reports the unbounded loop as dynamic_loop.
- --bench N: one thread each, qfold and ONNX Runtime interleaved, CPU time per run (min, median).

Prints one line per check, then "N passed, M failed"; exits non-zero on failure.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper

import qfold

RESULTS = []


def check(name, ok, detail=""):
    RESULTS.append(ok)
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))


def max_rel(ref, got):
    ref = np.asarray(ref, np.float64)
    return float(np.abs(np.asarray(got, np.float64) - ref).max()) / max(float(np.abs(ref).max()),
                                                                        1e-6)


def cli(qfold_bin, *args):
    return subprocess.run([qfold_bin, *args], capture_output=True, text=True, timeout=300)


def ort_session(model_bytes):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"])


def loop_node(model):
    return next(n for n in model.graph.node if n.op_type == "Loop")


def bad_model_checks(qfold_bin, model_path, tmp):
    # No trip count: only the body's condition (data) ends the loop.
    m = onnx.load(model_path)
    loop_node(m).input[0] = ""
    path = os.path.join(tmp, "unbounded.onnx")
    onnx.save(m, path)
    qfm = os.path.join(tmp, "unbounded.qfm")
    p = cli(qfold_bin, "convert", path, "-o", qfm)
    check("Loop without trip count: exit 2, names the Loop, unbounded, no file",
          p.returncode == 2 and "Loop 'decode'" in p.stderr and "unbounded loop" in p.stderr
          and not os.path.exists(qfm), f"exit {p.returncode}: {p.stderr}")
    p = cli(qfold_bin, "check", path, "--json")
    report = json.loads(p.stdout) if p.stdout.startswith("{") else {"issues": []}
    found = [i for i in report["issues"] if i["code"] == "dynamic_loop" and i["severity"] == "error"]
    check("check: the unbounded Loop is a dynamic_loop error, exit 2",
          p.returncode == 2 and len(found) == 1 and found[0]["node"] == "decode"
          and "trip count" in found[0]["fix"], p.stdout[-1500:] + p.stderr)
    # The body reads a value no enclosing graph defines.
    m = onnx.load(model_path)
    body = next(a.g for a in loop_node(m).attribute if a.name == "body")
    add = next(n for n in body.node if n.op_type == "Add")
    add.input[1] = "no_such_value"
    path = os.path.join(tmp, "missing_outer.onnx")
    with open(path, "wb") as f:  # onnx.save would run no checker; ONNX Runtime refuses it too
        f.write(m.SerializeToString())
    qfm = os.path.join(tmp, "missing_outer.qfm")
    p = cli(qfold_bin, "convert", path, "-o", qfm)
    check("body reading a missing value: exit 2, names the Loop and the value, no file",
          p.returncode == 2 and "Loop 'decode': subgraph 'body' reads 'no_such_value'" in p.stderr
          and not os.path.exists(qfm), f"exit {p.returncode}: {p.stderr}")


def growing_loop_checks(qfold_bin, tmp):
    body = helper.make_graph([
        helper.make_node("Unsqueeze", ["i", "axis0"], ["i1"]),
        helper.make_node("Cast", ["i1"], ["f"], to=T.FLOAT),
        helper.make_node("Mul", ["f", "scale"], ["step"]),  # 'scale': the enclosing graph's
        helper.make_node("Concat", ["acc_in", "step"], ["acc_out"], axis=0),
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        helper.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0),
    ], "body", [helper.make_tensor_value_info("i", T.INT64, []),
                helper.make_tensor_value_info("cond_in", T.BOOL, []),
                helper.make_tensor_value_info("acc_in", T.FLOAT, [None])],
        [helper.make_tensor_value_info("cond_out", T.BOOL, []),
         helper.make_tensor_value_info("acc_out", T.FLOAT, [None]),
         helper.make_tensor_value_info("total", T.FLOAT, [])],
        [helper.make_tensor("axis0", T.INT64, [1], [0])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "go", "acc0"], ["acc", "totals"], name="grow", body=body)],
        "grow", [helper.make_tensor_value_info("M", T.INT64, []),
                 helper.make_tensor_value_info("scale", T.FLOAT, [1]),
                 helper.make_tensor_value_info("acc0", T.FLOAT, [2])],
        [helper.make_tensor_value_info("acc", T.FLOAT, [None]),
         helper.make_tensor_value_info("totals", T.FLOAT, [None])],
        [helper.make_tensor("go", T.BOOL, [], [1])])
    path = os.path.join(tmp, "grow.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    qfm = os.path.join(tmp, "grow.qfm")
    p = cli(qfold_bin, "convert", path, "-o", qfm)
    check("growing Loop: convert", p.returncode == 0, p.stderr)
    if p.returncode:
        return
    with open(path, "rb") as f:
        ref = ort_session(f.read())
    sess = qfold.Session(qfm)
    for m in (0, 1, 4):
        feeds = {"M": np.array(m, np.int64), "scale": np.array([0.5], np.float32),
                 "acc0": np.array([1, 2], np.float32)}
        want = ref.run(None, feeds)
        got = sess.run(feeds)
        ok = all(np.array_equal(w, got[k]) for w, k in zip(want, ("acc", "totals")))
        check(f"growing Loop, M={m}: acc {got['acc'].tolist()}", ok,
              f"{[list(w) for w in want]} vs {[list(got[k]) for k in ('acc', 'totals')]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qfold", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--bench", type=int, default=0, help="timed runs of each (0: none)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        qfm = os.path.join(tmp, "loop_decoder.qfm")
        p = cli(args.qfold, "convert", args.model, "-o", qfm)
        check("convert", p.returncode == 0, p.stderr)
        p = cli(args.qfold, "inspect", qfm, "--json")
        info = json.loads(p.stdout) if p.returncode == 0 else {}
        subs = info.get("subgraphs", [])
        check("inspect lists the Loop body", len(subs) == 1
              and subs[0]["used_by"] == "Loop 'decode' body" and subs[0]["operators"].get("GRU") == 1,
              p.stdout[-1500:] + p.stderr)
        with open(args.model, "rb") as f:
            ref = ort_session(f.read())
        sess = qfold.Session(qfm, num_threads=1)
        lengths = set()
        for seed in range(6):
            enc = np.random.default_rng(seed).standard_normal((1, 32)).astype(np.float32)
            want = dict(zip([o.name for o in ref.get_outputs()], ref.run(None, {"enc": enc})))
            got = sess.run({"enc": enc})
            steps = want["tokens"].shape[0]
            lengths.add(steps)
            same = all(got[k].shape == want[k].shape for k in want)
            tokens = same and np.array_equal(got["tokens"], want["tokens"])
            err = max(max_rel(want[k], got[k]) for k in ("step_logits", "state")) if same else 1.0
            check(f"enc seed {seed}: {steps} step(s), tokens equal, max rel {err:.2g}",
                  tokens and err < args.rtol,
                  f"shapes {[got[k].shape for k in want]} vs {[want[k].shape for k in want]}, "
                  f"tokens {got['tokens'].ravel()} vs {want['tokens'].ravel()}, err {err:.3g}")
        check("the end token stops the loop early for some inputs, not for others",
              min(lengths) < 16 and max(lengths) == 16, str(sorted(lengths)))
        growing_loop_checks(args.qfold, tmp)
        bad_model_checks(args.qfold, args.model, tmp)
        if args.bench:
            enc = np.random.default_rng(0).standard_normal((1, 32)).astype(np.float32)
            times = {"qfold": [], "onnxruntime": []}
            for _ in range(5):
                sess.run({"enc": enc})
                ref.run(None, {"enc": enc})
            for _ in range(args.bench):
                t0 = time.thread_time_ns()
                sess.run({"enc": enc})
                t1 = time.thread_time_ns()
                ref.run(None, {"enc": enc})
                t2 = time.thread_time_ns()
                times["qfold"].append((t1 - t0) / 1e3)
                times["onnxruntime"].append((t2 - t1) / 1e3)
            for k, v in times.items():
                print(f"bench {k}: CPU time per run min {min(v):.1f} us, "
                      f"median {statistics.median(v):.1f} us ({args.bench} runs, interleaved)")
    failed = RESULTS.count(False)
    print(f"{len(RESULTS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
