#!/usr/bin/env python3
"""Materializes the ONNX model zoo's "light" models with random weights and quantizes them to QDQ.

Usage:
  python scripts/make_light_models.py --out DIR [--models resnet50,squeezenet] [--force]

The `onnx` wheel ships model-zoo architectures (ResNet-50, DenseNet-121, Inception v1/v2,
ShuffleNet, SqueezeNet, AlexNet, VGG-19, ZFNet-512) in onnx/backend/test/data/light/ with every
weight replaced by a ConstantOfShape fill (0.02), which makes them small but numerically useless.
For each one this writes:
  DIR/<name>.onnx          float, opset 13, seeded random weights: He/Kaiming-normal by fan-in
                           for Conv/Gemm weights, BatchNormalization scale |1 + 0.1 N|, bias and
                           mean 0.1 N, variance 1 + 0.1 |N|, other biases 0.1 N; Dropout
                           (the identity at inference) is removed, and so is the trailing
                           Softmax, so that outputs are logits (a softmax over 1000 near-uniform
                           classes has cosine ~1 with anything, hiding errors);
  DIR/<name>.pc_u8s8.onnx  quantize_static: QDQ, per-channel int8 weights, uint8 activations,
                           MinMax calibration on CALIB_IMAGES seeded smooth synthetic images
                           normalized like ImageNet (after quant_pre_process, which folds
                           BatchNormalization into Conv like scripts/quantize_models.py);
  DIR/manifest.json        per model: files, input name and shape, float output std.
Every model is checked (onnx.checker, strict shape inference) and run with ONNX Runtime as float
and QDQ (output finite, std within STD_RANGE); a model whose materialization fails is skipped with
a printed note. The BatchNormalization statistics are random, not the activations' own, so
residual sums grow: ResNet-50's logits have std ~200 and ShuffleNet's ~1000 (the others ~0.1-2);
int8 calibration does not mind (QDQ vs float cosine >= 0.99 on a held-out image). Outputs are reused
while the manifest's GENERATOR_VERSION matches (--force rebuilds). Same seed, same bytes.
"""

import argparse
import hashlib
import json
import logging
import os
import sys
import tempfile
import time
import zlib

import numpy as np
import onnx
import onnx.version_converter
from onnx import TensorProto, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

GENERATOR_VERSION = 2  # bump when the weights, calibration or quantization change
OPSET = 13
CALIB_IMAGES = 8
QDQ_VARIANT = "pc_u8s8"
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)
# Float output std outside this range means activations vanished or exploded.
STD_RANGE = (1e-3, 1e4)


def light_dir():
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def available_models():
    """Names (without the light_ prefix) of the light models this onnx wheel ships."""
    d = light_dir()
    if not os.path.isdir(d):
        return []
    return sorted(f[len("light_"):-len(".onnx")] for f in os.listdir(d)
                  if f.startswith("light_") and f.endswith(".onnx"))


# Synthetic images ----------------------------------------------------------------------------

def _upsample(a, h, w):
    """Bilinear resize of (C, h0, w0) to (C, h, w) by separable interpolation."""
    c, h0, w0 = a.shape
    ys, xs = np.linspace(0, h0 - 1, h), np.linspace(0, w0 - 1, w)
    rows = np.stack([np.stack([np.interp(ys, np.arange(h0), a[k, :, j]) for j in range(w0)], 1)
                     for k in range(c)])
    return np.stack([np.stack([np.interp(xs, np.arange(w0), rows[k, i]) for i in range(h)])
                     for k in range(c)])


def synthetic_images(shape, seed, count):
    """count images of NCHW shape (N=1, C=3): smooth random colour fields plus finer texture
    and a little pixel noise in [0, 1], normalized with the ImageNet mean and std."""
    n, c, h, w = shape
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        img = (_upsample(rng.uniform(0, 1, (c, 4, 4)), h, w) * 0.6
               + _upsample(rng.uniform(0, 1, (c, 16, 16)), h, w) * 0.3
               + rng.uniform(0, 0.1, (c, h, w)))
        img = np.clip(img, 0, 1).astype(np.float32)
        if c == 3:
            img = (img - IMAGENET_MEAN[:, None, None]) / IMAGENET_STD[:, None, None]
        out.append(np.broadcast_to(img, (n, c, h, w)).astype(np.float32))
    return out


def sample_input(manifest_entry, seed):
    """One synthetic image feed {name: array} for a model of the manifest (held out from the
    calibration images when seed differs)."""
    shape = manifest_entry["input_shape"]
    return {manifest_entry["input"]: synthetic_images(shape, seed, 1)[0]}


# Weights -------------------------------------------------------------------------------------

def _consumers(graph):
    cons = {}
    for n in graph.node:
        for i, x in enumerate(n.input):
            cons.setdefault(x, []).append((n, i))
    return cons


def _role(name, cons, depth=0):
    """What a parameter tensor is, from how it is consumed: ('conv_w'|'gemm_w'|'bn_scale'|
    'bn_var'|'scale'|'bias', node). Follows pass-through Reshape/Unsqueeze (Inception v1 reshapes
    its classifier weight; DenseNet/Inception v2 unsqueeze their per-channel scale and shift)."""
    for node, idx in cons.get(name, []):
        op = node.op_type
        if op in ("Reshape", "Unsqueeze", "Flatten", "Identity") and idx == 0 and depth < 4:
            r = _role(node.output[0], cons, depth + 1)
            if r[0] != "unknown":
                return r
        if op == "Conv":
            return ("conv_w" if idx == 1 else "bias"), node
        if op == "Gemm" or op == "MatMul":
            return ("gemm_w" if idx == 1 else "bias"), node
        if op == "BatchNormalization":
            return {1: "bn_scale", 2: "bias", 3: "bias", 4: "bn_var"}.get(idx, "unknown"), node
        if op == "Mul":
            return "scale", node
        if op in ("Add", "Sum"):
            return "bias", node
    return "unknown", None


def _random_param(shape, role, node, rng):
    shape = tuple(int(d) for d in shape)
    n = rng.standard_normal(shape)
    if role == "conv_w":
        fan_in = int(np.prod(shape[1:]))
    elif role == "gemm_w":
        # Gemm with transB: B is [N, K] (here possibly [N, K, 1, 1] before a Reshape), so the
        # fan-in is everything but the first dim; without transB (and MatMul) B is [K, N].
        trans_b = node.op_type == "Gemm" and any(a.name == "transB" and a.i
                                                 for a in node.attribute)
        fan_in = int(np.prod(shape)) // shape[0] if trans_b else shape[-2 if len(shape) > 1 else 0]
    elif role in ("bn_scale", "scale"):
        return np.abs(1 + 0.1 * n).astype(np.float32)
    elif role == "bn_var":
        return (1 + 0.1 * np.abs(n)).astype(np.float32)
    else:  # biases, BN shift and mean, anything else
        return (0.1 * n).astype(np.float32)
    return (n * np.sqrt(2.0 / max(fan_in, 1))).astype(np.float32)


def materialize(model, seed):
    """Replaces every ConstantOfShape weight and every float initializer by seeded random values
    chosen by role; drops initializers from the graph inputs, Dropout and the trailing Softmax.
    Returns (model, notes)."""
    g = model.graph
    rng = np.random.default_rng(seed)
    inits = {t.name: t for t in g.initializer}
    cons = _consumers(g)
    notes = []
    params = {}  # name -> (shape, dtype)
    keep_nodes = []
    for n in g.node:
        if n.op_type == "ConstantOfShape" and n.input[0] in inits:
            params[n.output[0]] = tuple(numpy_helper.to_array(inits[n.input[0]]).tolist())
        else:
            keep_nodes.append(n)
    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT and t.name not in params:
            params[t.name] = tuple(t.dims)
    new_inits = []
    # Sorted: the draw order (hence the bytes) must not depend on the file's node order.
    for name in sorted(params):
        role, node = _role(name, cons)
        if role == "unknown" and name not in cons:
            continue  # unused
        if role == "unknown":
            notes.append(f"{name}: unknown role, 0.1 N")
        new_inits.append(numpy_helper.from_array(_random_param(params[name], role, node, rng),
                                                 name))
    # Keep non-float initializers that are still used (Reshape shapes); drop ConstantOfShape shapes.
    used = {x for n in keep_nodes for x in n.input}
    new_inits += [t for t in g.initializer
                  if t.name not in params and t.name in used]
    del g.node[:]
    g.node.extend(keep_nodes)
    del g.initializer[:]
    g.initializer.extend(new_inits)
    init_names = {t.name for t in new_inits}
    real_inputs = [i for i in g.input if i.name not in init_names and i.name in used]
    del g.input[:]
    g.input.extend(real_inputs)
    _drop_dropout(g)
    _drop_trailing_softmax(g)
    return model, notes


def _drop_dropout(g):
    """Dropout is the identity at inference; ORT and OpenVINO drop it, qfold rejects it."""
    for n in [n for n in g.node if n.op_type == "Dropout"]:
        src, dst = n.input[0], n.output[0]
        g.node.remove(n)
        for m in g.node:
            for i, x in enumerate(m.input):
                if x == dst:
                    m.input[i] = src
        for out in g.output:
            if out.name == dst:
                raise RuntimeError("a graph output comes from Dropout")


def _drop_trailing_softmax(g):
    producers = {o: n for n in g.node for o in n.output}
    for out in g.output:
        sm = producers.get(out.name)
        if sm is not None and sm.op_type == "Softmax":
            src = sm.input[0]
            g.node.remove(sm)
            for n in g.node:
                for i, x in enumerate(n.output):
                    if x == src:
                        n.output[i] = out.name
                for i, x in enumerate(n.input):
                    if x == src:
                        n.input[i] = out.name


def build_float(name, dst, seed):
    """Writes the materialized float model (opset OPSET); returns (input name, shape, notes)."""
    model = onnx.load(os.path.join(light_dir(), f"light_{name}.onnx"))
    model, notes = materialize(model, seed)
    model.ir_version = max(model.ir_version, 4)  # initializers outside the inputs need IR >= 4
    model = onnx.version_converter.convert_version(model, OPSET)
    model.ir_version = 8
    del model.graph.value_info[:]
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model, full_check=True)
    model.producer_name = "qfold make_light_models.py"
    onnx.save(model, dst)
    inp = model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    return inp.name, shape, notes


class _ImageReader:
    """quantize_static's CalibrationDataReader over fixed synthetic images."""

    def __init__(self, input_name, images):
        self.feeds = [{input_name: x} for x in images]
        self.pos = 0

    def get_next(self):
        if self.pos >= len(self.feeds):
            return None
        self.pos += 1
        return self.feeds[self.pos - 1]

    def rewind(self):
        self.pos = 0


def build_qdq(float_path, dst, input_name, shape, seed, tmp, a16=False):
    """quantize_static QDQ, per-channel int8 weights; uint8 activations, or uint16 with a16
    (the a16w8 variant scripts/bench.py's a16 set measures)."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, \
        quantize_static
    import quantize_models
    pre = os.path.join(tmp, "pre.onnx")
    quantize_models.preprocess(float_path, pre)
    reader = _ImageReader(input_name, synthetic_images(shape, seed, CALIB_IMAGES))
    quantize_static(pre, dst, reader, quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt16 if a16 else QuantType.QUInt8,
                    weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax)


def ort_run(path, feeds):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def make_one(name, out_dir):
    """Builds and checks one model; returns its manifest entry (raises on failure)."""
    seed = zlib.crc32(f"light:{name}".encode())
    fp = os.path.join(out_dir, f"{name}.onnx")
    qp = os.path.join(out_dir, f"{name}.{QDQ_VARIANT}.onnx")
    with tempfile.TemporaryDirectory(prefix="qfold-light-") as tmp:
        input_name, shape, notes = build_float(name, fp + ".tmp", seed)
        entry = {"input": input_name, "input_shape": shape}
        feeds = sample_input(entry, seed + 1)
        y = ort_run(fp + ".tmp", feeds)
        std = float(np.std(y))
        if not np.all(np.isfinite(y)) or not STD_RANGE[0] < std < STD_RANGE[1]:
            raise RuntimeError(f"float output not usable (finite: {np.all(np.isfinite(y))}, "
                               f"std {std:.3g})")
        build_qdq(fp + ".tmp", qp + ".tmp", input_name, shape, seed, tmp)
        yq = ort_run(qp + ".tmp", feeds)
    a, b = y.ravel().astype(np.float64), yq.ravel().astype(np.float64)
    cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))
    os.replace(fp + ".tmp", fp)
    os.replace(qp + ".tmp", qp)
    entry.update({"float": os.path.basename(fp), "qdq": os.path.basename(qp),
                  "output_shape": list(y.shape), "float_output_std": std,
                  "qdq_vs_float_cos": cos, "notes": notes,
                  "sha256": {os.path.basename(fp): sha256(fp), os.path.basename(qp): sha256(qp)}})
    return entry


def load_manifest(out_dir):
    path = os.path.join(out_dir, "manifest.json")
    try:
        with open(path) as f:
            m = json.load(f)
        if m.get("version") == GENERATOR_VERSION:
            return m
    except (OSError, ValueError):
        pass
    return {"version": GENERATOR_VERSION, "models": {}, "failed": {}}


def make_light_models(out_dir, names=None, force=False, log=print):
    """Builds the light models (all when names is None) into out_dir, reusing earlier outputs.
    Returns the manifest: {"models": {name: entry}, "failed": {name: reason}}."""
    logging.getLogger().setLevel(logging.ERROR)  # the quantizer warns per tensor
    os.makedirs(out_dir, exist_ok=True)
    manifest = load_manifest(out_dir)
    have = available_models()
    for name in names or have:
        if name not in have:
            manifest["failed"][name] = "not shipped by this onnx wheel"
            log(f"  light {name}: skipped, not in {light_dir()}")
            continue
        e = manifest["models"].get(name)
        if e and not force and all(os.path.exists(os.path.join(out_dir, e[k]))
                                   for k in ("float", "qdq")):
            continue
        start = time.monotonic()
        try:
            manifest["models"][name] = make_one(name, out_dir)
            manifest["failed"].pop(name, None)
            e = manifest["models"][name]
            log(f"  light {name}: built in {time.monotonic() - start:.0f}s (float output std "
                f"{e['float_output_std']:.3g}, QDQ vs float cos {e['qdq_vs_float_cos']:.4f})")
        except Exception as ex:  # noqa: BLE001 -- a model that fails is skipped, not fatal
            manifest["models"].pop(name, None)
            manifest["failed"][name] = f"{type(ex).__name__}: {str(ex)[:300]}"
            log(f"  light {name}: skipped, materialization failed: {manifest['failed'][name]}")
        with open(os.path.join(out_dir, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
    return manifest


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("--out", required=True, help="output directory (also the cache)")
    ap.add_argument("--models", help="comma-separated names (default: all): "
                    + ", ".join(available_models()))
    ap.add_argument("--force", action="store_true", help="rebuild even if present")
    args = ap.parse_args()
    start = time.monotonic()
    names = args.models.split(",") if args.models else None
    m = make_light_models(args.out, names, args.force)
    for name, e in sorted(m["models"].items()):
        if names and name not in names:
            continue
        print(f"{name}: input {e['input']} {e['input_shape']}, output {e['output_shape']}, "
              f"float std {e['float_output_std']:.3g}, QDQ/float cos {e['qdq_vs_float_cos']:.4f}, "
              f"{os.path.getsize(os.path.join(args.out, e['float'])) >> 20} MiB float / "
              f"{os.path.getsize(os.path.join(args.out, e['qdq'])) >> 20} MiB QDQ")
    for name, why in sorted(m["failed"].items()):
        print(f"{name}: FAILED: {why}")
    print(f"done in {time.monotonic() - start:.0f}s")
    return 0 if m["models"] else 1


if __name__ == "__main__":
    sys.exit(main())
