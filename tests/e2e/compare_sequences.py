#!/usr/bin/env python3
"""Sequence values at run time (runtime/src/ops/sequence.cc) against ONNX Runtime.

Usage: PYTHONPATH=<dir with qfold*.so> compare_sequences.py --qfold build/cli/qfold

Models built here, each converted with `qfold convert` and run through the Python module at 1 and
2 threads, outputs equal to ONNX Runtime's (tensors and sequences: element count, shapes, values):
- SplitToSequence whose split sizes are a graph input (a length that depends on data), with
  SequenceAt at a position given as input, SequenceLength, ConcatFromSequence and the sequence
  itself as an output.
- A sequence built from SequenceEmpty by SequenceInsert at both ends and a given position, then
  SequenceErase, ConcatFromSequence with new_axis, SequenceConstruct of differently shaped
  tensors.
- A sequence graph input (lists of 1 to 5 tensors of different lengths) read by SequenceAt,
  SequenceLength, ConcatFromSequence, SequenceInsert and passed through Identity.
- SequenceMap over two sequences and a tensor, its body returning two values (a float tensor
  and an int64 shape), so two output sequences (the converter expands it into its ONNX
  function, a Loop).
- A Scan whose body reads a captured sequence at positions its scan input gives and makes and
  concatenates a sequence of its own.
Bad input, each an error naming the node or tensor: SequenceAt past the end at run time, a
sequence element of the wrong dtype or shape, a tensor op reading a sequence (`qfold convert`
exit 2, no output file), a Scan scanning a sequence, a SequenceMap
whose body takes fewer inputs than the node has.

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


def cli(qfold_bin, *args):
    return subprocess.run([qfold_bin, *args], capture_output=True, text=True, timeout=300)


def seq_info(name, elem, shape):
    return helper.make_value_info(
        name, helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem, shape)))


def save(graph, path, opset=17):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def same(want, got):
    """Empty string when equal (arrays, or lists of arrays), else what differs."""
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return f"{len(want)} elements expected, got {type(got).__name__} " \
                   f"{len(got) if isinstance(got, list) else ''}"
        for i, (w, g) in enumerate(zip(want, got)):
            d = same(w, g)
            if d:
                return f"element {i}: {d}"
        return ""
    got = np.asarray(got)
    if want.shape != got.shape or want.dtype != got.dtype:
        return f"{got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}"
    return "" if np.array_equal(want, got) else f"values differ: {got.ravel()[:8]} vs " \
                                                 f"{want.ravel()[:8]}"


def compare(qfold_bin, tmp, label, path, feeds_list):
    qfm = path[:-5] + ".qfm"
    p = cli(qfold_bin, "convert", path, "-o", qfm)
    check(f"{label}: convert", p.returncode == 0, p.stderr)
    if p.returncode:
        return None
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in ref.get_outputs()]
    for threads in (1, 2):
        sess = qfold.Session(qfm, num_threads=threads)
        for i, feeds in enumerate(feeds_list):
            want = dict(zip(names, ref.run(None, feeds)))
            try:
                got = sess.run(feeds)
            except Exception as e:  # noqa: BLE001 - reported as a failed check
                check(f"{label}: feeds {i}, {threads} thread(s)", False, e)
                continue
            diffs = [f"{k}: {same(want[k], got.get(k))}" for k in names if same(want[k], got.get(k))]
            shapes = {k: (len(v) if isinstance(v, list) else list(np.shape(v)))
                      for k, v in want.items()}
            check(f"{label}: feeds {i}, {threads} thread(s), {shapes}", not diffs, diffs)
    return qfm


def split_model(tmp):
    nodes = [
        helper.make_node("SplitToSequence", ["x", "sizes"], ["seq"], name="split", axis=0),
        helper.make_node("SequenceAt", ["seq", "pos"], ["piece"], name="at"),
        helper.make_node("SequenceLength", ["seq"], ["count"], name="length"),
        helper.make_node("ConcatFromSequence", ["seq"], ["joined"], name="concat", axis=0),
    ]
    graph = helper.make_graph(
        nodes, "split_data",
        [helper.make_tensor_value_info("x", T.FLOAT, [6, 4]),
         helper.make_tensor_value_info("sizes", T.INT64, [None]),
         helper.make_tensor_value_info("pos", T.INT64, [])],
        [helper.make_tensor_value_info("piece", T.FLOAT, [None, 4]),
         helper.make_tensor_value_info("count", T.INT64, []),
         helper.make_tensor_value_info("joined", T.FLOAT, [6, 4]),
         seq_info("seq", T.FLOAT, [None, 4])])
    return save(graph, os.path.join(tmp, "split_data.onnx"))


def build_model(tmp):
    nodes = [
        helper.make_node("SequenceEmpty", [], ["s0"], name="empty", dtype=T.FLOAT),
        helper.make_node("SequenceInsert", ["s0", "a"], ["s1"], name="insert_a"),
        helper.make_node("SequenceInsert", ["s1", "b", "zero"], ["s2"], name="insert_b_front"),
        helper.make_node("SequenceInsert", ["s2", "a", "pos"], ["s3"], name="insert_a_at"),
        helper.make_node("SequenceErase", ["s3", "erase"], ["s4"], name="erase"),
        helper.make_node("ConcatFromSequence", ["s4"], ["stacked"], name="stack", axis=1,
                         new_axis=1),
        helper.make_node("SequenceConstruct", ["a", "c"], ["mixed"], name="construct"),
        helper.make_node("ConcatFromSequence", ["mixed"], ["rows"], name="rows", axis=0),
        helper.make_node("SequenceErase", ["mixed"], ["last_gone"], name="erase_last"),
    ]
    graph = helper.make_graph(
        nodes, "build",
        [helper.make_tensor_value_info("a", T.FLOAT, [2, 3]),
         helper.make_tensor_value_info("b", T.FLOAT, [2, 3]),
         helper.make_tensor_value_info("c", T.FLOAT, [4, 3]),
         helper.make_tensor_value_info("pos", T.INT32, []),
         helper.make_tensor_value_info("erase", T.INT64, [])],
        [helper.make_tensor_value_info("stacked", T.FLOAT, [2, None, 3]),
         helper.make_tensor_value_info("rows", T.FLOAT, [6, 3]),
         seq_info("s4", T.FLOAT, [2, 3]), seq_info("last_gone", T.FLOAT, None)],
        [helper.make_tensor("zero", T.INT64, [], [0])])
    return save(graph, os.path.join(tmp, "build.onnx"))


def input_model(tmp):
    nodes = [
        helper.make_node("SequenceAt", ["s", "minus_one"], ["last"], name="last"),
        helper.make_node("SequenceLength", ["s"], ["n"], name="n"),
        helper.make_node("ConcatFromSequence", ["s"], ["all"], name="all", axis=0),
        helper.make_node("SequenceInsert", ["s", "t"], ["grown"], name="grow"),
        helper.make_node("Identity", ["s"], ["same"], name="pass"),
    ]
    graph = helper.make_graph(
        nodes, "seq_input",
        [seq_info("s", T.INT32, [None, 3]), helper.make_tensor_value_info("t", T.INT32, [1, 3])],
        [helper.make_tensor_value_info("last", T.INT32, [None, 3]),
         helper.make_tensor_value_info("n", T.INT64, []),
         helper.make_tensor_value_info("all", T.INT32, [None, 3]),
         seq_info("grown", T.INT32, [None, 3]), seq_info("same", T.INT32, [None, 3])],
        [helper.make_tensor("minus_one", T.INT64, [], [-1])])
    return save(graph, os.path.join(tmp, "seq_input.onnx"))


def bad_checks(qfold_bin, tmp, split_qfm, input_qfm):
    if split_qfm:
        sess = qfold.Session(split_qfm)
        feeds = {"x": np.zeros((6, 4), np.float32), "sizes": np.array([2, 4], np.int64),
                 "pos": np.array(2, np.int64)}
        try:
            sess.run(feeds)
            check("SequenceAt past the end is refused", False, "ran")
        except Exception as e:  # noqa: BLE001
            msg = str(e)
            check("SequenceAt past the end: error names the node and the range",
                  "SequenceAt 'at'" in msg and "[-2, 1]" in msg, msg)
        feeds["sizes"] = np.array([2, 3], np.int64)
        try:
            sess.run(feeds)
            check("split sizes that do not sum to the axis are refused", False, "ran")
        except Exception as e:  # noqa: BLE001
            msg = str(e)
            check("split sizes not summing to the axis: error names the node",
                  "SplitToSequence 'split'" in msg and "sums to 5" in msg, msg)
    if input_qfm:
        sess = qfold.Session(input_qfm)
        t = np.zeros((1, 3), np.int32)
        for label, elems, want in (
                ("dtype", [np.zeros((2, 3), np.float32)], "dtype float32, expected int32"),
                ("shape", [np.zeros((2, 4), np.int32)], "has shape (2,4)")):
            try:
                sess.run({"s": elems, "t": t})
                check(f"a sequence element of the wrong {label} is refused", False, "ran")
            except Exception as e:  # noqa: BLE001
                check(f"a sequence element of the wrong {label}: error names input 's'",
                      "input 's'" in str(e) and want in str(e), e)
    # A tensor op reading a sequence.
    graph = helper.make_graph(
        [helper.make_node("Relu", ["s"], ["y"], name="relu_of_seq")], "bad",
        [seq_info("s", T.FLOAT, [2])], [helper.make_tensor_value_info("y", T.FLOAT, [2])])
    path = os.path.join(tmp, "relu_seq.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    out = os.path.join(tmp, "relu_seq.qfm")
    p = cli(qfold_bin, "convert", path, "-o", out)
    check("a tensor op reading a sequence: exit 2 naming the node, no file",
          p.returncode == 2 and "Relu 'relu_of_seq'" in p.stderr and not os.path.exists(out),
          f"exit {p.returncode}: {p.stderr}")
    # A Scan scanning a sequence (its inputs are tensors; its body may capture one).
    body = helper.make_graph(
        [helper.make_node("Identity", ["x_in"], ["x_out"], name="keep")], "body",
        [helper.make_tensor_value_info("x_in", T.FLOAT, [2])],
        [helper.make_tensor_value_info("x_out", T.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("SequenceAt", ["s", "zero"], ["first"], name="first"),
         helper.make_node("Scan", ["s"], ["ys"], name="scan_over_seq", body=body,
                          num_scan_inputs=1)], "scan_seq",
        [seq_info("s", T.FLOAT, [3, 2])],
        [helper.make_tensor_value_info("ys", T.FLOAT, [3, 2]),
         helper.make_tensor_value_info("first", T.FLOAT, [3, 2])],
        [helper.make_tensor("zero", T.INT64, [], [0])])
    path = os.path.join(tmp, "scan_seq.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    out = os.path.join(tmp, "scan_seq.qfm")
    p = cli(qfold_bin, "convert", path, "-o", out)
    check("a Scan scanning a sequence: refused naming the Scan, no file",
          p.returncode != 0 and "Scan 'scan_over_seq'" in p.stderr and "sequence" in p.stderr
          and not os.path.exists(out), f"exit {p.returncode}: {p.stderr}")
    # A SequenceMap whose body takes fewer inputs than the node has.
    body = helper.make_graph(
        [helper.make_node("Neg", ["e"], ["n"], name="neg")], "map_body",
        [helper.make_tensor_value_info("e", T.FLOAT, [2])],
        [helper.make_tensor_value_info("n", T.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("SequenceMap", ["s", "w"], ["mapped"], name="bad_map", body=body)],
        "bad_map", [seq_info("s", T.FLOAT, [2]), helper.make_tensor_value_info("w", T.FLOAT, [2])],
        [seq_info("mapped", T.FLOAT, [2])])
    path = os.path.join(tmp, "bad_map.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    out = os.path.join(tmp, "bad_map.qfm")
    p = cli(qfold_bin, "convert", path, "-o", out)
    check("a SequenceMap whose body takes 1 of its 2 inputs: exit 2 naming it, no file",
          p.returncode == 2 and "SequenceMap 'bad_map'" in p.stderr and "1 inputs" in p.stderr
          and not os.path.exists(out), f"exit {p.returncode}: {p.stderr}")


def cli_checks(qfold_bin, tmp, qfm, ref, feeds):
    """`qfold run`: a sequence input from an .npz (its arrays in order), sequence outputs
    written as .npz (arrays 0, 1, ...), tensors as .npy; `inspect` shows seq(...) types."""
    seq_path = os.path.join(tmp, "s.npz")
    np.savez(seq_path, *feeds["s"])  # arr_0, arr_1, ... in order
    t_path = os.path.join(tmp, "t.npy")
    np.save(t_path, feeds["t"])
    out = os.path.join(tmp, "run_out")
    p = cli(qfold_bin, "run", qfm, "--input", f"s={seq_path}", "--input", f"t={t_path}",
            "-o", out)
    check("qfold run with a sequence input", p.returncode == 0, p.stdout + p.stderr)
    if p.returncode == 0:
        want = dict(zip([o.name for o in ref.get_outputs()], ref.run(None, feeds)))
        diffs = []
        for name, w in want.items():
            if isinstance(w, list):
                with np.load(os.path.join(out, name + ".npz")) as z:
                    got = [z[str(k)] for k in range(len(z.files))]
            else:
                got = np.load(os.path.join(out, name + ".npy"))
            d = same(w, got)
            if d:
                diffs.append(f"{name}: {d}")
        check("qfold run: sequence outputs as .npz, tensors as .npy, equal to ONNX Runtime's",
              not diffs, diffs)
    p = cli(qfold_bin, "run", qfm, "--input", f"t={t_path}")
    check("qfold run without the sequence: exit 2 saying how to pass it",
          p.returncode == 2 and "input 's', a sequence of int32" in p.stderr
          and "--input s=FILE.npz" in p.stderr, f"exit {p.returncode}: {p.stderr}")
    p = cli(qfold_bin, "inspect", qfm)
    check("qfold inspect shows seq(int32) for the sequence input and outputs",
          p.returncode == 0 and p.stdout.count("seq(int32)") == 3, p.stdout)


def control_flow_model(tmp):
    """A Loop carrying a sequence (one element appended per iteration) whose body also reads
    an outer sequence, then an If choosing between that sequence and a new one."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep"),
         helper.make_node("SequenceAt", ["outer", "i"], ["picked"], name="pick_outer"),
         helper.make_node("Mul", ["picked", "scale"], ["scaled"], name="scale_it"),
         helper.make_node("SequenceInsert", ["acc_in", "scaled"], ["acc_out"], name="append"),
         helper.make_node("SequenceLength", ["acc_out"], ["len_out"], name="count")],
        "body",
        [helper.make_tensor_value_info("i", T.INT64, []),
         helper.make_tensor_value_info("cond_in", T.BOOL, []),
         seq_info("acc_in", T.FLOAT, [None, 2])],
        [helper.make_tensor_value_info("cond_out", T.BOOL, []), seq_info("acc_out", T.FLOAT,
                                                                         [None, 2]),
         helper.make_tensor_value_info("len_out", T.INT64, [])])
    then_g = helper.make_graph(
        [helper.make_node("Identity", ["grown"], ["then_out"], name="take_grown")], "then",
        [], [seq_info("then_out", T.FLOAT, [None, 2])])
    else_g = helper.make_graph(
        [helper.make_node("SequenceConstruct", ["x", "x"], ["else_out"], name="pair")], "else",
        [], [seq_info("else_out", T.FLOAT, [None, 2])])
    nodes = [
        helper.make_node("SequenceEmpty", [], ["start"], name="start", dtype=T.FLOAT),
        helper.make_node("Loop", ["m", "", "start"], ["grown", "lengths"], name="grow_loop", body=body),
        helper.make_node("If", ["pick"], ["chosen"], name="choose", then_branch=then_g,
                         else_branch=else_g),
        helper.make_node("ConcatFromSequence", ["chosen"], ["flat"], name="flat", axis=0),
    ]
    graph = helper.make_graph(
        nodes, "control_flow_sequences",
        [seq_info("outer", T.FLOAT, [None, 2]), helper.make_tensor_value_info("m", T.INT64, []),
         helper.make_tensor_value_info("pick", T.BOOL, []),
         helper.make_tensor_value_info("x", T.FLOAT, [1, 2])],
        [seq_info("chosen", T.FLOAT, [None, 2]), helper.make_tensor_value_info("flat", T.FLOAT,
                                                                              [None, 2]),
         helper.make_tensor_value_info("lengths", T.INT64, [None])],
        [helper.make_tensor("scale", T.FLOAT, [], [2.0])])
    return save(graph, os.path.join(tmp, "control_flow.onnx"))


def scan_model(tmp):
    """A Scan whose body reads a sequence it captures (split from a graph input of unknown
    length, so it stays a sequence at run time) at the position its scan input gives, and
    builds and concatenates a sequence of its own."""
    body = helper.make_graph(
        [helper.make_node("SequenceAt", ["pieces", "i"], ["piece"], name="pick_piece"),
         helper.make_node("Add", ["s_in", "piece"], ["s_out"], name="accumulate"),
         helper.make_node("SequenceConstruct", ["s_in", "piece"], ["pair"], name="pair"),
         helper.make_node("ConcatFromSequence", ["pair"], ["stacked"], name="stack", axis=0,
                          new_axis=1)],
        "body",
        [helper.make_tensor_value_info("s_in", T.FLOAT, [3]),
         helper.make_tensor_value_info("i", T.INT64, [])],
        [helper.make_tensor_value_info("s_out", T.FLOAT, [3]),
         helper.make_tensor_value_info("stacked", T.FLOAT, [2, 3])])
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["pieces"], name="split", axis=0, keepdims=0),
        helper.make_node("Scan", ["s0", "idx"], ["total", "pairs"], name="scan_pieces",
                         body=body, num_scan_inputs=1)]
    graph = helper.make_graph(
        nodes, "scan_sequences",
        [helper.make_tensor_value_info("x", T.FLOAT, [None, 3]),
         helper.make_tensor_value_info("s0", T.FLOAT, [3]),
         helper.make_tensor_value_info("idx", T.INT64, [None])],
        [helper.make_tensor_value_info("total", T.FLOAT, [3]),
         helper.make_tensor_value_info("pairs", T.FLOAT, [None, 2, 3])])
    return save(graph, os.path.join(tmp, "scan_sequences.onnx"))


def sequence_map_model(tmp):
    body = helper.make_graph(
        [helper.make_node("Mul", ["e", "w"], ["scaled"], name="scale"),
         helper.make_node("Add", ["scaled", "f"], ["summed"], name="add_other"),
         helper.make_node("Shape", ["e"], ["shape"], name="shape")],
        "map_body",
        [helper.make_tensor_value_info("e", T.FLOAT, [None, 3]),
         helper.make_tensor_value_info("f", T.FLOAT, [None, 3]),
         helper.make_tensor_value_info("w", T.FLOAT, [3])],
        [helper.make_tensor_value_info("summed", T.FLOAT, [None, 3]),
         helper.make_tensor_value_info("shape", T.INT64, [2])])
    nodes = [helper.make_node("SequenceMap", ["s", "t", "w"], ["mapped", "shapes"], name="map",
                              body=body),
             helper.make_node("ConcatFromSequence", ["mapped"], ["flat"], name="flat", axis=0)]
    graph = helper.make_graph(
        nodes, "sequence_map",
        [seq_info("s", T.FLOAT, [None, 3]), seq_info("t", T.FLOAT, [None, 3]),
         helper.make_tensor_value_info("w", T.FLOAT, [3])],
        [seq_info("mapped", T.FLOAT, [None, 3]), seq_info("shapes", T.INT64, [2]),
         helper.make_tensor_value_info("flat", T.FLOAT, [None, 3])])
    return save(graph, os.path.join(tmp, "sequence_map.onnx"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qfold", required=True)
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        x = rng.standard_normal((6, 4)).astype(np.float32)
        split_feeds = [{"x": x, "sizes": np.array(s, np.int64), "pos": np.array(p, np.int64)}
                       for s, p in (([6], 0), ([1, 2, 3], 1), ([3, 0, 3], -2), ([1] * 6, 5),
                                    ([2, 4], -1))]
        split_qfm = compare(args.qfold, tmp, "SplitToSequence with data-dependent sizes",
                            split_model(tmp), split_feeds)
        build_feeds = []
        for pos, erase in ((0, 0), (1, -1), (-1, 2), (2, 1)):
            build_feeds.append({"a": rng.standard_normal((2, 3)).astype(np.float32),
                                "b": rng.standard_normal((2, 3)).astype(np.float32),
                                "c": rng.standard_normal((4, 3)).astype(np.float32),
                                "pos": np.array(pos, np.int32), "erase": np.array(erase, np.int64)})
        compare(args.qfold, tmp, "SequenceEmpty/Insert/Erase/Construct", build_model(tmp),
                build_feeds)
        input_feeds = []
        for lengths in ((1,), (2, 0, 5), (3, 1, 4, 1, 2)):
            input_feeds.append({"s": [rng.integers(-9, 9, (n, 3), dtype=np.int32) for n in lengths],
                                "t": rng.integers(-9, 9, (1, 3), dtype=np.int32)})
        cf_feeds = []
        for m, pick, lengths in ((3, True, (1, 2, 3)), (1, True, (2,)), (2, False, (1, 1)),
                                 (0, True, (1,))):
            cf_feeds.append({"outer": [rng.standard_normal((n, 2)).astype(np.float32)
                                       for n in lengths],
                             "m": np.array(m, np.int64), "pick": np.array(pick),
                             "x": rng.standard_normal((1, 2)).astype(np.float32)})
        compare(args.qfold, tmp, "Loop carrying a sequence, If choosing one",
                control_flow_model(tmp), cf_feeds[:3])
        scan_feeds = [{"x": rng.standard_normal((n, 3)).astype(np.float32),
                       "s0": rng.standard_normal(3).astype(np.float32),
                       "idx": np.array(idx, np.int64)}
                      for n, idx in ((4, [3, 1, -4, 2]), (6, [5, 0]), (2, [1, 1, 1, 0, -1]))]
        compare(args.qfold, tmp, "Scan body reading a captured sequence", scan_model(tmp),
                scan_feeds)
        map_feeds = []
        for lengths in ((1,), (2, 0, 5), (3, 1, 4, 1, 2)):
            map_feeds.append({"s": [rng.standard_normal((n, 3)).astype(np.float32)
                                    for n in lengths],
                              "t": [rng.standard_normal((n, 3)).astype(np.float32)
                                    for n in lengths],
                              "w": rng.standard_normal(3).astype(np.float32)})
        compare(args.qfold, tmp, "SequenceMap over two sequences and a tensor",
                sequence_map_model(tmp), map_feeds)
        input_path = input_model(tmp)
        input_qfm = compare(args.qfold, tmp, "sequence graph input", input_path, input_feeds)
        # The ONNX Runtime-compatible session: the same types and results as ONNX Runtime's.
        ref = ort.InferenceSession(input_path, providers=["CPUExecutionProvider"])
        sess = qfold.InferenceSession(input_path)
        types = [(a.name, a.type) for a in sess.get_inputs() + sess.get_outputs()]
        want_types = [(a.name, a.type) for a in ref.get_inputs() + ref.get_outputs()]
        check(f"InferenceSession: input and output types {types}", types == want_types,
              want_types)
        diffs = [same(w, g) for w, g in zip(ref.run(None, input_feeds[2]),
                                             sess.run(None, input_feeds[2]))]
        check("InferenceSession: sequence input and outputs equal ONNX Runtime's",
              not any(diffs), diffs)
        if input_qfm:
            cli_checks(args.qfold, tmp, input_qfm, ref, input_feeds[1])
        bad_checks(args.qfold, tmp, split_qfm, input_qfm)
    failed = RESULTS.count(False)
    print(f"{len(RESULTS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
