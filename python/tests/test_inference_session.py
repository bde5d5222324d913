#!/usr/bin/env python3
"""qfold.InferenceSession against onnxruntime.InferenceSession on the same models.

Same input/output metadata (names, shapes with dim names, types), same model metadata,
same outputs (within float rounding), the same bad inputs rejected with the same
messages, the conversion cache and the SessionOptions handling.

Usage: PYTHONPATH=<build>/python python test_inference_session.py [models_dir]
Plain asserts, no pytest: prints "N passed, M failed" and exits non-zero on failure.
"""
import glob
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import traceback
import warnings

import numpy as np
import onnx
import onnxruntime as ort

TMP = tempfile.mkdtemp(prefix="qfold_is_")
# Before importing qfold: conversions go to a scratch cache, never to $HOME.
os.environ["QFOLD_CACHE_DIR"] = os.path.join(TMP, "cache")

import qfold  # noqa: E402

MODELS = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "models")
ORT_PREFIX = "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : "
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def model(stem):
    return os.path.join(MODELS, stem + ".onnx")


def ort_session(path):
    """ONNX Runtime on the literal graph (as tests/e2e/compare_ort.py): its optimized graph
    runs the int4-weight MatMuls as MatMulNBits with int8 activations, ~1% off."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def max_rel(ref, got):
    ref = np.asarray(ref, np.float64)
    got = np.asarray(got, np.float64)
    assert ref.shape == got.shape, (ref.shape, got.shape)
    return float(np.abs(got - ref).max()) / max(float(np.abs(ref).max()), 1e-6)


def random_feed(sess, dims):
    """Random inputs for a session's inputs; symbolic dims from `dims`."""
    rng = np.random.default_rng(0)
    feed = {}
    for arg in sess.get_inputs():
        shape = [d if isinstance(d, int) else dims[d] for d in arg.shape]
        dtype = {"tensor(float)": np.float32, "tensor(float16)": np.float16}[arg.type]
        feed[arg.name] = rng.standard_normal(shape).astype(dtype)
    return feed


def args(nodeargs):
    return [(a.name, a.shape, a.type) for a in nodeargs]


# Every model of models/ that qfold converts: metadata and outputs against ONNX Runtime.
@test
def every_model_matches_onnxruntime():
    stems = sorted(pathlib.Path(p).stem for p in glob.glob(os.path.join(MODELS, "*.onnx")))
    assert "mobilenetv2_like" in stems, stems
    for stem in stems:
        ref = ort_session(model(stem))
        got = qfold.InferenceSession(model(stem), providers=["CPUExecutionProvider"])
        assert args(got.get_inputs()) == args(ref.get_inputs()), (stem, args(got.get_inputs()))
        assert args(got.get_outputs()) == args(ref.get_outputs()), (stem, args(got.get_outputs()))
        a, b = got.get_modelmeta(), ref.get_modelmeta()
        for field in ("producer_name", "graph_name", "domain", "description",
                      "graph_description", "version", "custom_metadata_map"):
            assert getattr(a, field) == getattr(b, field), (stem, field, getattr(a, field))
        feed = random_feed(ref, {"batch": 2, "height": 40, "width": 24, "seq": 5, "n": 10})
        names = [o.name for o in ref.get_outputs()]
        want = ref.run(names, feed)
        have = got.run(names, feed)
        assert len(have) == len(want)
        rtol = 2e-3 if "fp16" in stem else 1e-4
        for name, w, h in zip(names, want, have):
            assert isinstance(h, np.ndarray) and h.dtype == w.dtype, (stem, name, h.dtype)
            assert max_rel(w, h) < rtol, (stem, name, max_rel(w, h))


@test
def output_names_select_and_order():
    path = model("transformer_encoder")
    ref, got = ort_session(path), qfold.InferenceSession(path)
    feed = random_feed(ref, {"batch": 1, "seq": 7})
    names = [o.name for o in ref.get_outputs()]
    for request in (None, [], names[::-1], names[-1:], names[:1] * 2):
        want = ref.run(request, feed)
        have = got.run(request, feed)
        assert len(want) == len(have), (request, len(have))
        for w, h in zip(want, have):
            assert max_rel(w, h) < 1e-4, request


@test
def shapes_change_between_runs():
    path = model("dynamic_convnet")
    ref, got = ort_session(path), qfold.InferenceSession(path)
    rng = np.random.default_rng(1)
    for shape in ([1, 3, 32, 32], [2, 3, 48, 24], [1, 3, 16, 64], [1, 3, 32, 32]):
        x = rng.standard_normal(shape).astype(np.float32)
        (w,) = ref.run(None, {"input": x})
        (h,) = got.run(None, {"input": x})
        assert w.shape == h.shape and max_rel(w, h) < 1e-4, shape


def error_of(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the caller compares what was raised
        return e
    raise AssertionError("no exception")


@test
def bad_inputs_rejected_like_onnxruntime():
    for stem in ("mobilenetv2_like", "dynamic_convnet"):
        path = model(stem)
        ref, got = ort_session(path), qfold.InferenceSession(path)
        good = random_feed(ref, {"batch": 1, "height": 32, "width": 32})
        (name,) = good
        x = good[name]
        bad_feeds = [
            {name: x.astype(np.float64)},                # dtype
            {name: x.astype(np.int64)},
            {name: x[0]},                                # rank
            {name: np.concatenate([x, x], axis=1)},      # a fixed dim (channels)
            {},                                          # missing input
            {"images": x},                               # unknown name, input missing
            {name: x, "extra": x},                       # unknown extra name
        ]
        for feed in bad_feeds:
            want = error_of(lambda: ref.run(None, feed))
            have = error_of(lambda: got.run(None, feed))
            assert isinstance(have, qfold.InvalidArgument), (stem, type(have), have)
            assert isinstance(have, qfold.Error) and have.code == "invalid_argument"
            assert str(have) == str(want).replace(ORT_PREFIX, ""), (str(have), str(want))
            # ONNX Runtime's own Python layer raises ValueError for missing inputs.
            if isinstance(want, ValueError):
                assert isinstance(have, ValueError)
        want = error_of(lambda: ref.run(["nope"], good))
        have = error_of(lambda: got.run(["nope"], good))
        assert isinstance(have, qfold.InvalidArgument)
        assert str(have) == str(want).replace(ORT_PREFIX, ""), (str(have), str(want))
        # The session still runs after the errors.
        assert max_rel(ref.run(None, good)[0], got.run(None, good)[0]) < 1e-4


@test
def lists_are_accepted_as_inputs():
    path = model("mobilenetv2_like")
    ref, got = ort_session(path), qfold.InferenceSession(path)
    x = np.random.default_rng(2).standard_normal((1, 3, 64, 64)).astype(np.float32)
    want = ref.run(None, {"input": x.tolist()})[0]
    have = got.run(None, {"input": x.tolist()})[0]
    assert max_rel(want, have) < 1e-4


@test
def model_metadata_and_custom_map():
    m = onnx.load(model("mobilenetv2_like"))
    m.doc_string = "a doc string"
    m.domain = "ai.qfold.test"
    m.model_version = 7
    m.graph.name = "graph_x"
    m.graph.doc_string = "graph doc"
    onnx.helper.set_model_props(m, {"character": "a\nb\nc", "author": "qfold"})
    path = os.path.join(TMP, "with_meta.onnx")
    onnx.save(m, path)
    a = qfold.InferenceSession(path).get_modelmeta()
    b = ort_session(path).get_modelmeta()
    for field in ("producer_name", "graph_name", "domain", "description", "graph_description",
                  "version", "custom_metadata_map"):
        assert getattr(a, field) == getattr(b, field), (field, getattr(a, field), getattr(b, field))
    assert a.custom_metadata_map["character"].splitlines() == ["a", "b", "c"]
    # Bytes give the same session as the path.
    with open(path, "rb") as f:
        data = f.read()
    s = qfold.InferenceSession(data)
    assert s.get_modelmeta().custom_metadata_map == b.custom_metadata_map
    assert args(s.get_inputs()) == args(ort.InferenceSession(data).get_inputs())


@test
def conversion_is_cached_by_content():
    cache = os.path.join(TMP, "cache_a")
    os.environ["QFOLD_CACHE_DIR"] = cache
    try:
        assert qfold.cache_dir() == cache
        path = model("resnet_like")
        first = qfold.InferenceSession(path)
        qfms = glob.glob(os.path.join(cache, "*.qfm"))
        assert len(qfms) == 1, qfms
        stamp = os.stat(qfms[0]).st_mtime_ns
        # Same bytes under another name: a cache hit, no new conversion.
        copy = os.path.join(TMP, "renamed.onnx")
        with open(path, "rb") as src, open(copy, "wb") as dst:
            dst.write(src.read())
        second = qfold.InferenceSession(copy)
        assert glob.glob(os.path.join(cache, "*.qfm")) == qfms
        assert os.stat(qfms[0]).st_mtime_ns == stamp
        x = random_feed(first, {})
        np.testing.assert_array_equal(first.run(None, x)[0], second.run(None, x)[0])
        # Other conversion options: another entry.
        qfold.InferenceSession(model("dynamic_convnet"), dims={"batch": 1})
        qfold.InferenceSession(model("dynamic_convnet"))
        assert len(glob.glob(os.path.join(cache, "*.qfm"))) == 3
        # The cached .qfm loads directly, with the metadata of a .qfm.
        direct = qfold.InferenceSession(qfms[0])
        assert args(direct.get_inputs()) == args(first.get_inputs())
        np.testing.assert_array_equal(direct.run(None, x)[0], first.run(None, x)[0])
        with open(qfms[0], "rb") as f:
            from_bytes = qfold.InferenceSession(f.read())
        np.testing.assert_array_equal(from_bytes.run(None, x)[0], first.run(None, x)[0])
    finally:
        os.environ["QFOLD_CACHE_DIR"] = os.path.join(TMP, "cache")


@test
def conversion_notes_survive_the_cache():
    # A float8 weight through DequantizeLinear: no integer kernel, so the converter widens it
    # to float and says so in a note.
    from onnx import TensorProto, helper
    w = helper.make_tensor("w", TensorProto.FLOAT8E4M3FN, [4], [0.5, -1.0, 2.0, 0.25])
    nodes = [helper.make_node("DequantizeLinear", ["w", "scale"], ["wf"], name="dq_w"),
             helper.make_node("Add", ["x", "wf"], ["y"], name="add")]
    graph = helper.make_graph(
        nodes, "float8_weight", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [w, helper.make_tensor("scale", TensorProto.FLOAT, [], [0.5])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    path = os.path.join(TMP, "float8_weight.onnx")
    onnx.save(m, path)
    first = qfold.InferenceSession(path)
    assert any("dq_w" in n and "dequantized" in n for n in first.conversion_notes), first.conversion_notes
    second = qfold.InferenceSession(path)  # from the cache
    assert second.conversion_notes == first.conversion_notes
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_allclose(second.run(None, {"x": x})[0], ort_session(path).run(None, {"x": x})[0])


@test
def cache_location_follows_the_environment():
    code = "import qfold; print(qfold.cache_dir())"
    env = dict(os.environ)
    env.pop("QFOLD_CACHE_DIR", None)
    env["XDG_CACHE_HOME"] = os.path.join(TMP, "xdg")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout.strip()
    assert out == os.path.join(TMP, "xdg", "qfold"), out
    env.pop("XDG_CACHE_HOME")
    env["HOME"] = os.path.join(TMP, "home")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout.strip()
    assert out == os.path.join(TMP, "home", ".cache", "qfold"), out


@test
def session_options_and_providers():
    path = model("mobilenetv2_like")
    opts = qfold.SessionOptions()
    assert opts.intra_op_num_threads == 0 and opts.threads() >= 1
    opts.intra_op_num_threads = 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opts.graph_optimization_level = qfold.GraphOptimizationLevel.ORT_ENABLE_ALL  # default
        opts.enable_mem_pattern = False
        opts.enable_mem_pattern = False
        other = qfold.SessionOptions()
        other.enable_mem_pattern = False
        opts.log_severity_level = 3
    messages = [str(w.message) for w in caught]
    assert sum("enable_mem_pattern" in m for m in messages) == 1, messages
    assert sum("log_severity_level" in m for m in messages) == 1, messages
    assert not any("graph_optimization_level" in m for m in messages), messages
    providers = [("CUDAExecutionProvider", {"device_id": 0}), "TensorrtExecutionProvider",
                 "CPUExecutionProvider"]
    sess = qfold.InferenceSession(path, sess_options=opts, providers=providers)
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert qfold.get_available_providers() == ["CPUExecutionProvider"]
    assert qfold.get_device() == "CPU"
    one = qfold.InferenceSession(path, providers=["CPUExecutionProvider"])
    x = random_feed(one, {})
    np.testing.assert_array_equal(sess.run(None, x)[0], one.run(None, x)[0])
    try:
        opts.intra_op_num_threads = -1
        raise AssertionError("negative thread count accepted")
    except qfold.InvalidArgument:
        pass
    try:
        opts.no_such_option = 1
        raise AssertionError("unknown option accepted")
    except AttributeError:
        pass
    assert opts.precision == "fp32"
    opts.precision = "bf16"
    bf16 = qfold.InferenceSession(path, sess_options=opts).run(None, x)[0].ravel()
    fp32 = one.run(None, x)[0].ravel()
    assert fp32 @ bf16 / (np.linalg.norm(fp32) * np.linalg.norm(bf16)) > 0.999
    opts.precision = "fp16"
    fp16_session = qfold.InferenceSession(path, sess_options=opts)
    fp16 = fp16_session.run(None, x)[0].ravel()
    assert fp32 @ fp16 / (np.linalg.norm(fp32) * np.linalg.norm(fp16)) > 0.9999
    if platform.machine() not in ("aarch64", "arm64"):  # no FEAT_FP16: fp32 exactly
        np.testing.assert_array_equal(fp32, fp16)
    try:
        opts.precision = "fp8"
        raise AssertionError("precision 'fp8' accepted")
    except ValueError as e:
        assert "precision" in str(e), e


@test
def free_dimension_override_fixes_a_dim():
    path = model("dynamic_convnet")
    opts = qfold.SessionOptions()
    opts.add_free_dimension_override_by_name("batch", 1)
    sess = qfold.InferenceSession(path, opts)
    x = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)
    assert max_rel(ort_session(path).run(None, {"input": x})[0], sess.run(None, {"input": x})[0]) < 1e-4
    e = error_of(lambda: sess.run(None, {"input": np.zeros((2, 3, 32, 32), np.float32)}))
    assert isinstance(e, qfold.InvalidArgument), e


@test
def unreadable_models_raise_qfold_errors():
    e = error_of(lambda: qfold.InferenceSession(os.path.join(TMP, "missing.onnx")))
    assert isinstance(e, qfold.Error) and "missing.onnx" in str(e), e
    bad = os.path.join(TMP, "garbage.onnx")
    with open(bad, "wb") as f:
        f.write(b"\x08\x07garbage" * 20)
    e = error_of(lambda: qfold.InferenceSession(bad))
    assert isinstance(e, qfold.Error) and "garbage.onnx" in str(e), e
    e = error_of(lambda: qfold.InferenceSession(b"not a model"))
    assert isinstance(e, qfold.Error), e


@test
def cli_runs_as_python_module():
    out = subprocess.run([sys.executable, "-m", "qfold", "inspect", model("mobilenetv2_like")],
                         check=True, capture_output=True, text=True).stdout
    assert "input" in out and "probs" in out, out
    bad = subprocess.run([sys.executable, "-m", "qfold", "convert", os.path.join(TMP, "nope.onnx"),
                          "-o", os.path.join(TMP, "nope.qfm")], capture_output=True, text=True)
    assert bad.returncode == 2 and "nope.onnx" in bad.stderr, (bad.returncode, bad.stderr)


def main():
    passed = failed = 0
    for fn in TESTS:
        try:
            fn()
            passed += 1
            print(f"ok   {fn.__name__}")
        except Exception:  # noqa: BLE001 - every failure is reported, then counted
            failed += 1
            print(f"FAIL {fn.__name__}")
            traceback.print_exc()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
