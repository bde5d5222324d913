"""Helpers shared by the end-to-end scripts (compare_ort.py, compare_qdq.py) and
scripts/quantize_models.py: deterministic inputs, ONNX Runtime reference runs, qfold CLI calls.
"""

import json
import os
import re
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto

DEFAULT_DIMS = {"batch": 1, "batch_size": 1, "N": 1}
DEFAULT_OTHER_DIM = 32

# Operator types qfold runs in integer arithmetic (as listed by `qfold inspect --json`).
INTEGER_OP_PREFIXES = ("QLinear", "Qf", "ConvInteger", "MatMulInteger", "DynamicQuantizeMatMul",
                       "DynamicQuantizeLSTM")
QDQ_OPS = ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear")


def safe_name(name):
    """The file name qfold run uses for an output tensor (without .npy); see SafeFileName in
    cli/commands.cc."""
    # Byte-wise over UTF-8, like the C++ side: a non-ASCII character becomes one '_' per byte.
    out = re.sub(rb"[^A-Za-z0-9._-]", b"_", name.encode()).decode()
    return "_" + out if out == "" or out.startswith(".") else out


def graph_inputs(model):
    """Graph inputs that are not initializers (older exporters list weights as inputs too)."""
    inits = {t.name for t in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


def concrete_shape(vi, dims=None):
    """The shape of a graph input with symbolic dims replaced: by `dims` (name -> value), then
    DEFAULT_DIMS, else 1 for the first axis and DEFAULT_OTHER_DIM for the others."""
    dims = dims or {}
    shape = []
    for i, d in enumerate(vi.type.tensor_type.shape.dim):
        if d.HasField("dim_value"):
            shape.append(d.dim_value)
        elif d.HasField("dim_param") and d.dim_param in dims:
            shape.append(dims[d.dim_param])
        elif d.HasField("dim_param") and d.dim_param in DEFAULT_DIMS:
            shape.append(DEFAULT_DIMS[d.dim_param])
        else:
            # Unnamed or unknown-named dim: batch-like first axis gets 1, spatial ones get 32.
            shape.append(1 if i == 0 else DEFAULT_OTHER_DIM)
    return shape


def random_input(rng, elem_type, shape):
    np_type = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
    if elem_type == TensorProto.BOOL:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(np_type, np.integer):
        # Small non-negative values: valid as indices / token ids for most models.
        return rng.integers(0, 10, size=shape).astype(np_type)
    return rng.standard_normal(shape).astype(np_type)


def random_feeds(model, rng, dims=None):
    """One deterministic random array per (non-initializer) graph input, in input order."""
    feeds = {}
    for vi in graph_inputs(model):
        tt = vi.type.tensor_type
        feeds[vi.name] = random_input(rng, tt.elem_type, concrete_shape(vi, dims))
    return feeds


def run_ort(model_path, feeds):
    """Runs the literal graph (all ONNX Runtime graph optimizations disabled) on the CPU."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return names, sess.run(names, feeds)


def _exact_qdq_ops():
    """DequantizeLinear / QuantizeLinear for onnx.reference in float64: dequantized values are
    exact (an 8/16-bit code times a float32 scale fits a double), quantization divides and rounds
    half to even in float64. Also an inference-mode BatchNormalization."""
    from onnx.reference.op_run import OpRun

    def along(s, x, axis):
        if s.ndim == 1 and s.size > 1 and x.ndim > 1:
            shape = [1] * x.ndim
            shape[(1 if axis is None else axis) % x.ndim] = -1
            return s.reshape(shape)
        return s

    class DequantizeLinear(OpRun):
        def _run(self, x, scale, zero_point=None, axis=None, block_size=None, output_dtype=None):
            if block_size:
                raise NotImplementedError("blocked DequantizeLinear")
            s = along(scale.astype(np.float64), x, axis)
            z = 0 if zero_point is None else along(zero_point.astype(np.float64), x, axis)
            return ((x.astype(np.float64) - z) * s,)

    class QuantizeLinear(OpRun):
        def _run(self, x, scale, zero_point=None, axis=None, block_size=None, output_dtype=None,
                 saturate=None, precision=None):
            if block_size:
                raise NotImplementedError("blocked QuantizeLinear")
            dtype = zero_point.dtype if zero_point is not None else (
                onnx.helper.tensor_dtype_to_np_dtype(output_dtype) if output_dtype else np.uint8)
            if not np.issubdtype(dtype, np.integer):
                raise NotImplementedError(f"QuantizeLinear to {dtype}")
            s = along(scale.astype(np.float64), x, axis)
            z = 0 if zero_point is None else along(zero_point.astype(np.float64), x, axis)
            info = np.iinfo(dtype)
            q = np.rint(x.astype(np.float64) / s) + z
            return (np.clip(q, info.min, info.max).astype(dtype),)

    class BatchNormalization(OpRun):
        # onnx.reference's BatchNormalization-9 computes batch statistics whenever the
        # (ignored) momentum attribute is set; inference mode is what every engine runs.
        def _run(self, x, scale, bias, mean, var, epsilon=None, momentum=None,
                 training_mode=None, spatial=None, is_test=None):
            if training_mode:
                raise NotImplementedError("training-mode BatchNormalization")
            shape = (-1,) + (1,) * (x.ndim - 2)
            eps = 1e-5 if epsilon is None else epsilon
            y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
            return ((y * scale.reshape(shape) + bias.reshape(shape)).astype(x.dtype),)

    return [DequantizeLinear, QuantizeLinear, BatchNormalization]


def run_exact_literal(model_path, feeds):
    """The literal DequantizeLinear -> op -> QuantizeLinear graph evaluated in float64 by
    onnx.reference: ONNX Runtime's literal graph computes it in float32 and so rounds some
    exact .5 ties (common with symmetric scales) the other way. Float32 constants, inputs and
    Casts to float become float64. Returns (output names, outputs), or raises
    NotImplementedError for what it cannot evaluate (contrib-domain ops, blocked Q/DQ)."""
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator
    model = onnx.load(model_path)
    g = model.graph
    if any(n.domain not in ("", "ai.onnx") for n in g.node):
        raise NotImplementedError("non-standard domain")
    for i, init in enumerate(g.initializer):
        a = numpy_helper.to_array(init)
        if a.dtype == np.float32:
            g.initializer[i].CopyFrom(numpy_helper.from_array(a.astype(np.float64), init.name))
    for n in g.node:
        for attr in n.attribute:
            if n.op_type == "Cast" and attr.name == "to" and attr.i == TensorProto.FLOAT:
                attr.i = TensorProto.DOUBLE
            if n.op_type == "Constant" and attr.name == "value" and \
                    attr.t.data_type == TensorProto.FLOAT:
                attr.t.CopyFrom(numpy_helper.from_array(
                    numpy_helper.to_array(attr.t).astype(np.float64), attr.t.name))
    for vi in list(g.input) + list(g.output):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    del g.value_info[:]
    ref = ReferenceEvaluator(model, new_ops=_exact_qdq_ops())
    names = [o.name for o in g.output]
    ins = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in feeds.items()}
    return names, ref.run(names, ins)


def run_ort_optimized(model_path, feeds):
    """Runs with all ONNX Runtime graph optimizations: QDQ groups become ORT's own integer
    kernels (QLinearConv, ...), a second opinion on what integer execution yields."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return names, sess.run(names, feeds)


def feed_args(feeds, directory, prefix="input"):
    """Saves each feed as directory/<prefix>_<i>.npy; returns qfold run's --input arguments."""
    args = []
    for i, (name, value) in enumerate(feeds.items()):
        path = os.path.join(directory, f"{prefix}_{i}.npy")
        np.save(path, value)
        args += ["--input", f"{name}={path}"]
    return args


def run_qfold(cmd, timeout):
    """Runs one qfold command; returns an error description or None."""
    err, _ = run_qfold_output(cmd, timeout)
    return err


def run_qfold_output(cmd, timeout):
    """Runs one qfold command; returns (error description or None, stdout)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout}s: {' '.join(cmd)}", ""
    except OSError as e:
        return f"could not start {cmd[0]}: {e}", ""
    if proc.returncode != 0:
        msg = f"exit code {proc.returncode}: {' '.join(cmd)}"
        text = (proc.stderr.strip() or proc.stdout.strip() or "(no output)")
        return msg + "\n" + "\n".join("      | " + line for line in text.splitlines()), ""
    return None, proc.stdout


def first_error_line(err):
    """A one-line summary of a run_qfold error: the first line of the tool's own output; when that
    line introduces a list (ends with ':'), the list items' heads are appended."""
    lines = [line.strip().lstrip("|").strip() for line in err.splitlines()[1:]]
    lines = [line for line in lines if line]
    if not lines:
        return err.splitlines()[0] if err else err
    summary = lines[0]
    if summary.endswith(":") and len(lines) > 1:
        summary += " " + ", ".join(line.split(":")[0].strip() for line in lines[1:])
    return summary


def inspect_operators(qfold, qfm_path, timeout=120):
    """The `operators` map (op type -> count) of `qfold inspect --json`, or None if absent."""
    err, out = run_qfold_output([qfold, "inspect", qfm_path, "--json"], timeout)
    if err:
        return None
    try:
        ops = json.loads(out).get("operators")
    except (ValueError, AttributeError):
        return None
    return ops if isinstance(ops, dict) else None


def external_shape_errors(qfold, qfm_path, model, timeout=120, fixed_dims=None):
    """Differences between the model's declared graph inputs/outputs and the .qfm's: the
    converter may change layouts inside, never the shapes, names or dtypes users feed.
    fixed_dims: symbolic dims set at conversion (`qfold convert --dim`), expected as values."""
    fixed_dims = fixed_dims or {}
    err, out = run_qfold_output([qfold, "inspect", qfm_path, "--json"], timeout)
    if err:
        return [err]
    info = json.loads(out)
    errors = []
    declared = {vi.name: vi for vi in list(graph_inputs(model)) + list(model.graph.output)}
    for t in info.get("inputs", []) + info.get("outputs", []):
        vi = declared.get(t["name"])
        if vi is None:
            errors.append(f"'{t['name']}' is not an input or output of the ONNX model")
            continue
        want = []
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_value"):
                want.append(d.dim_value)
            else:
                want.append(fixed_dims.get(d.dim_param, d.dim_param or "?"))
        got = t["shape"]
        # Outputs' symbolic dims may be resolved by inference; inputs must stay as declared.
        is_input = any(vi.name == i.name for i in graph_inputs(model))
        for a, (w, g) in enumerate(zip(want, got)):
            if isinstance(w, int) and w != g or (is_input and not isinstance(w, int) and w != g):
                errors.append(f"'{t['name']}' axis {a}: ONNX declares {w}, the .qfm has {g}")
        if len(want) != len(got) and want:
            errors.append(f"'{t['name']}' has rank {len(got)} in the .qfm, {len(want)} in ONNX")
    return errors


def operator_mix(ops):
    """(integer ops, Q/DQ ops, other ops, total) from an `operators` map. "Other" ops are float
    ops or type-generic ones (MaxPool, Reshape, ...) that may also run on int8 tensors: the
    operators map has no dtypes."""
    integer = sum(n for t, n in ops.items() if t.split(".")[-1].startswith(INTEGER_OP_PREFIXES))
    qdq = sum(n for t, n in ops.items() if t.split(".")[-1] in QDQ_OPS)
    total = sum(ops.values())
    return integer, qdq, total - integer - qdq, total
