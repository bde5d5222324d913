#!/usr/bin/env python3
"""The converter's layout planning changes where data lives, never what is computed: every model
converted with the default plan (quantized convolutions and pools channels-last inside) must give
outputs bit-identical to the same model converted with --channels-first. Float convolutions
planned channels-last run other kernels (conv_f32_nhwc) that sum in another order, so a model
with a channels-last float Conv compares its float outputs as compare_ort.py does instead:
max|a - b| / max(max|b|, 1e-6) < 1e-4.

Usage:
  compare_layouts.py --qfold build/cli/qfold --models DIR [--models DIR2 ...] [--model FILE ...]
                     [--threads 1,2] [--require-channels-last]

For each model (DIR/*.onnx and every --model FILE): convert twice, run both .qfm files with
`qfold run` on the same seeded random inputs at each thread count, and compare every output
byte for byte. The default conversion's `qfold inspect --json --ops` must list at least one
channels-last operator for every model with a QLinearConv or a 2-D float Conv
(--require-channels-last), so the test cannot pass by comparing the channels-first plan with
itself. Prints one line per model and
"N passed, M failed"; exits non-zero when a model failed.
"""

import argparse
import glob
import json
import os
import sys
import tempfile
import zlib

import numpy as np
import onnx

from qfold_tools import random_feeds, run_qfold, run_qfold_output, safe_name


def channels_last_ops(qfold, qfm):
    """Operators of a .qfm that run channels-last, per `qfold inspect --json`."""
    err, out = run_qfold_output([qfold, "inspect", qfm, "--json"], 120)
    if err:
        return None
    details = json.loads(out).get("operator_details", [])
    return [d for d in details if d.get("layout") == "NHWC"]


FLOAT_RTOL = 1e-4


def float_model_with_conv(model):
    """Whether a Conv of the graph has a float 4-D input per the model's declared input type
    (a float model's first Conv reads its float image input)."""
    inputs = {i.name: i for i in model.graph.input}
    for n in model.graph.node:
        if n.op_type != "Conv" or n.input[0] not in inputs:
            continue
        t = inputs[n.input[0]].type.tensor_type
        if t.elem_type == onnx.TensorProto.FLOAT and len(t.shape.dim) == 4:
            return True
    return False


def run_model(qfold, qfm, feeds, outdir, threads):
    os.makedirs(outdir, exist_ok=True)
    args = []
    for name, arr in feeds.items():
        path = os.path.join(outdir, "in_" + safe_name(name) + ".npy")
        np.save(path, arr)
        args += ["--input", f"{name}={path}"]
    err = run_qfold([qfold, "run", qfm] + args + ["--output-dir", outdir,
                                                  "--threads", str(threads)], 600)
    if err:
        return err, None
    outs = {}
    for f in sorted(glob.glob(os.path.join(outdir, "*.npy"))):
        if not os.path.basename(f).startswith("in_"):
            outs[os.path.basename(f)] = np.load(f)
    return None, outs


def check_model(qfold, path, threads, require_cl, work):
    base = os.path.splitext(os.path.basename(path))[0]
    model = onnx.load(path, load_external_data=False)
    rng = np.random.default_rng(zlib.crc32(base.encode()))
    feeds = random_feeds(model, rng)
    qfm_cl = os.path.join(work, base + ".cl.qfm")
    qfm_cf = os.path.join(work, base + ".cf.qfm")
    for qfm, extra in ((qfm_cl, []), (qfm_cf, ["--channels-first"])):
        err = run_qfold([qfold, "convert", path, "-o", qfm] + extra, 600)
        if err:
            return False, "convert failed: " + err.splitlines()[0]
    cl_ops = channels_last_ops(qfold, qfm_cl)
    if cl_ops is None:
        return False, "inspect failed"
    has_qconv = any(n.op_type == "QLinearConv" for n in model.graph.node)
    float_cl = any(d.get("type") == "Conv" and d.get("precision") == "float" for d in cl_ops)
    has_float_conv = float_model_with_conv(model)
    if require_cl and (has_qconv or has_float_conv) and not cl_ops:
        return False, "no channels-last operator in the default plan"
    msgs = []
    for t in threads:
        close = 0
        err, a = run_model(qfold, qfm_cl, feeds, os.path.join(work, base, f"cl{t}"), t)
        if err:
            return False, "run (channels-last) failed: " + err.splitlines()[0]
        err, b = run_model(qfold, qfm_cf, feeds, os.path.join(work, base, f"cf{t}"), t)
        if err:
            return False, "run (channels-first) failed: " + err.splitlines()[0]
        if sorted(a) != sorted(b):
            return False, f"different outputs {sorted(a)} vs {sorted(b)}"
        for name in a:
            if a[name].shape != b[name].shape or a[name].dtype != b[name].dtype:
                return False, f"{name}: {a[name].shape}/{a[name].dtype} vs {b[name].shape}/{b[name].dtype}"
            if a[name].tobytes() == b[name].tobytes():
                continue
            diff = np.abs(a[name].astype(np.float64) - b[name].astype(np.float64))
            if float_cl and a[name].dtype.kind == "f":
                scale = max(float(np.abs(b[name].astype(np.float64)).max()), 1e-6)
                if diff.max() / scale < FLOAT_RTOL:
                    close += 1
                    continue
            return False, f"{name} differs at {t} threads (max |diff| {diff.max():.3g})"
        msgs.append(f"{t}t identical" if not close else f"{t}t within rtol {FLOAT_RTOL}")
    return True, f"{len(cl_ops)} channels-last ops; " + ", ".join(msgs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qfold", required=True)
    ap.add_argument("--models", action="append", default=[])
    ap.add_argument("--model", action="append", default=[])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--require-channels-last", action="store_true")
    args = ap.parse_args()
    paths = list(args.model)
    for d in args.models:
        paths += sorted(glob.glob(os.path.join(d, "*.onnx")))
    if not paths:
        print("no models found")
        return 1
    threads = [int(t) for t in args.threads.split(",")]
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="qfold_layouts_") as work:
        for p in paths:
            ok, msg = check_model(args.qfold, p, threads, args.require_channels_last, work)
            print(f"{'PASS' if ok else 'FAIL'} {os.path.basename(p)}: {msg}", flush=True)
            passed += ok
            failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
