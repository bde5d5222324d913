#!/usr/bin/env python3
"""End-to-end check: runs ONNX models through qfold and ONNX Runtime and compares the outputs.

Usage:
  compare_ort.py --qfold build/cli/qfold --model models/a.onnx [--model models/b.onnx ...]
                 [--rtol 1e-4] [--atol 0] [--dim batch=1 --dim height=32] [--workdir DIR]
                 [--require-float-channels-last] [--convert-dims] [--expect-static OUTPUT ...]

For each model: deterministic random inputs (seeded by the model file name) are fed to ONNX
Runtime with all graph optimizations disabled (so the reference is the literal graph), saved to
DIR/<model>/inputs.npz and one .npy per input, and run through
  qfold convert model.onnx -o DIR/<model>/model.qfm
  qfold run DIR/<model>/model.qfm --input <name>=<file.npy> ... --output-dir DIR/<model>/out
which must write DIR/<model>/out/<output name>.npy (characters other than [A-Za-z0-9._-] in the
name's UTF-8 bytes replaced by '_', and '_' prepended to an empty name or one starting with
'.'). An output passes when
  max|qfold - ort| / max(max|ort|, 1e-6) < rtol   or   max|qfold - ort| <= atol (if atol > 0).
The default rtol is 1e-4, or 2e-3 for models with float16/bfloat16 inputs or outputs.
--convert-dims also passes each --dim to `qfold convert`, so the model is converted for those
sizes (shape chains fold to constants); --expect-static OUTPUT then fails a model whose .qfm
leaves a dim of that output symbolic (shape inference did not resolve it at conversion).

Prints one line per model output, then exactly "N passed, M failed" (counting models); exits
non-zero if any model failed.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import zlib

import numpy as np
import onnx
from onnx import TensorProto

from qfold_tools import (DEFAULT_OTHER_DIM, concrete_shape, external_shape_errors, graph_inputs,
                         random_input, run_ort, run_qfold, run_qfold_output, safe_name)

DEFAULT_RTOL = 1e-4
DEFAULT_RTOL_HALF = 2e-3

HALF_TYPES = {TensorProto.FLOAT16, TensorProto.BFLOAT16}


def compare(ref, got):
    """Returns (max_abs, max_rel). NaNs must match in position; inf must match exactly."""
    a = np.asarray(got).astype(np.float64)
    b = np.asarray(ref).astype(np.float64)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if not np.array_equal(nan_a, nan_b):
        return float("inf"), float("inf")
    inf_b = np.isinf(b)
    if not np.array_equal(a[inf_b], b[inf_b]) or np.isinf(a[~inf_b]).any():
        return float("inf"), float("inf")
    finite = ~(nan_b | inf_b)
    if not finite.any():
        return 0.0, 0.0
    diff = np.abs(a[finite] - b[finite])
    max_abs = float(diff.max())
    scale = max(float(np.abs(b[finite]).max()), 1e-6)
    return max_abs, max_abs / scale


def check_model(args, model_path, dims, stem):
    """Returns True if every output matches. Prints one line per output (or per failure)."""
    label = os.path.basename(model_path)
    workdir = os.path.join(args.workdir, stem)
    outdir = os.path.join(workdir, "out")
    if os.path.isdir(outdir):
        shutil.rmtree(outdir)
    os.makedirs(outdir, exist_ok=True)

    try:
        model = onnx.load(model_path)
    except Exception as e:  # noqa: BLE001 - any load failure is a test failure
        print(f"FAIL {label}: cannot load model: {e}")
        return False

    inputs = graph_inputs(model)
    io_types = [vi.type.tensor_type.elem_type for vi in list(inputs) + list(model.graph.output)]
    rtol = args.rtol
    if rtol is None:
        rtol = DEFAULT_RTOL_HALF if any(t in HALF_TYPES for t in io_types) else DEFAULT_RTOL

    rng = np.random.default_rng(zlib.crc32(label.encode()))
    feeds = {}
    for vi in inputs:
        tt = vi.type.tensor_type
        feeds[vi.name] = random_input(rng, tt.elem_type, concrete_shape(vi, dims))

    try:
        out_names, refs = run_ort(model_path, feeds)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL {label}: onnxruntime failed (the reference cannot be computed): {e}")
        return False

    np.savez(os.path.join(workdir, "inputs.npz"), **feeds)
    input_args = []
    for i, (name, value) in enumerate(feeds.items()):
        path = os.path.join(workdir, f"input_{i}.npy")
        np.save(path, value)
        input_args += ["--input", f"{name}={path}"]

    qfm = os.path.join(workdir, "model.qfm")
    convert_dims = []
    if args.convert_dims:
        for name, value in dims.items():
            convert_dims += ["--dim", f"{name}={value}"]
    for cmd in ([args.qfold, "convert", model_path, "-o", qfm] + convert_dims,
                [args.qfold, "run", qfm] + input_args + ["--output-dir", outdir]):
        err = run_qfold(cmd, args.timeout)
        if err:
            print(f"FAIL {label}: qfold {cmd[1]} failed, {err}")
            return False
    if args.require_float_channels_last and not float_channels_last_convs(args, qfm):
        print(f"FAIL {label}: no float Conv runs channels-last in the converted model")
        return False
    shape_errors = external_shape_errors(args.qfold, qfm, onnx.load(model_path),
                                         fixed_dims=dims if args.convert_dims else None)
    for e in shape_errors:
        print(f"FAIL {label}: external shape changed: {e}")
    static_errors = static_output_errors(args.qfold, qfm, args.expect_static)
    for e in static_errors:
        print(f"FAIL {label}: {e}")
    shape_errors += static_errors
    if shape_errors:
        return False

    ok = True
    for name, ref in zip(out_names, refs):
        path = os.path.join(outdir, safe_name(name) + ".npy")
        where = f"{label} output '{name}'"
        if not os.path.exists(path):
            print(f"FAIL {where}: qfold wrote no {path}")
            ok = False
            continue
        try:
            got = np.load(path, allow_pickle=False)
        except Exception as e:  # noqa: BLE001
            print(f"FAIL {where}: cannot read {path}: {e}")
            ok = False
            continue
        ref = np.asarray(ref)
        if got.shape != ref.shape:
            print(f"FAIL {where}: shape {list(got.shape)}, onnxruntime {list(ref.shape)}")
            ok = False
            continue
        note = ""
        dtype_ok = got.dtype == ref.dtype
        if not dtype_ok:
            note = f" (dtype {got.dtype}, onnxruntime {ref.dtype})"
            # Float widening (e.g. fp16 models computed in fp32) is tolerated unless --strict-dtype.
            both_float = got.dtype.kind == "f" and ref.dtype.kind == "f"
            dtype_ok = both_float and not args.strict_dtype
        max_abs, max_rel = compare(ref, got)
        passed = dtype_ok and (max_rel < rtol or (args.atol > 0 and max_abs <= args.atol))
        ok = ok and passed
        print(f"{'PASS' if passed else 'FAIL'} {where} {list(ref.shape)} {ref.dtype}: "
              f"max_abs={max_abs:.3e} max_rel={max_rel:.3e} (rtol {rtol:g}){note}")
    return ok


def static_output_errors(qfold, qfm, names):
    """One message per output in `names` whose .qfm shape keeps a symbolic dim."""
    if not names:
        return []
    err, out = run_qfold_output([qfold, "inspect", qfm, "--json"], 120)
    if err:
        return [err]
    shapes = {t["name"]: t["shape"] for t in json.loads(out).get("outputs", [])}
    errors = []
    for name in names:
        if name not in shapes:
            errors.append(f"no output '{name}' in the .qfm")
        elif not all(isinstance(d, int) for d in shapes[name]):
            errors.append(f"output '{name}' has shape {shapes[name]} after conversion, "
                          "expected every dim known")
    return errors


def float_channels_last_convs(args, qfm):
    """How many float Conv operators of `qfm` run channels-last, per `qfold inspect --json`."""
    err, out = run_qfold_output([args.qfold, "inspect", qfm, "--json"], args.timeout)
    if err:
        return 0
    details = json.loads(out).get("operator_details", [])
    return sum(1 for d in details if d.get("type") == "Conv" and d.get("precision") == "float"
               and d.get("layout") == "NHWC")


def parse_dims(items):
    dims = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not value.strip().isdigit():
            raise SystemExit(f"--dim expects name=value with a non-negative integer, got '{item}'")
        dims[name] = int(value)
    return dims


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("--qfold", required=True, help="path to the qfold CLI")
    ap.add_argument("--model", action="append", required=True, help="ONNX model (repeatable)")
    ap.add_argument("--rtol", type=float, default=None,
                    help=f"max relative error (default {DEFAULT_RTOL:g}, "
                         f"{DEFAULT_RTOL_HALF:g} for float16 models)")
    ap.add_argument("--atol", type=float, default=0.0,
                    help="also pass an output whose max absolute error is <= atol (default off)")
    ap.add_argument("--dim", action="append", default=[],
                    help="value for a symbolic input dim, name=value (repeatable; defaults: "
                         f"batch=1, others {DEFAULT_OTHER_DIM})")
    ap.add_argument("--workdir", help="where to keep inputs/outputs (default: a temp dir, removed)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per qfold command")
    ap.add_argument("--require-float-channels-last", action="store_true",
                    help="fail a model unless some float Conv of it runs channels-last")
    ap.add_argument("--convert-dims", action="store_true",
                    help="pass the --dim values to `qfold convert` too")
    ap.add_argument("--expect-static", action="append", default=[], metavar="OUTPUT",
                    help="fail unless this output's shape is fully known in the .qfm (repeatable)")
    ap.add_argument("--strict-dtype", action="store_true",
                    help="fail when qfold's output dtype differs from onnxruntime's")
    args = ap.parse_args()
    dims = parse_dims(args.dim)
    args.qfold = os.path.abspath(args.qfold)

    tmp = None
    if args.workdir is None:
        tmp = tempfile.mkdtemp(prefix="qfold-e2e-")
        args.workdir = tmp
    passed = failed = 0
    stems = set()
    try:
        for model_path in args.model:
            # One work subdirectory per model, unique even if two models share a file name.
            base = stem = os.path.splitext(os.path.basename(model_path))[0]
            n = 1
            while stem in stems:
                n += 1
                stem = f"{base}_{n}"
            stems.add(stem)
            if check_model(args, model_path, dims, stem):
                passed += 1
            else:
                failed += 1
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
