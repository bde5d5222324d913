#!/usr/bin/env python3
"""Tests for the qfold Python module against ONNX Runtime.

Usage: PYTHONPATH=<dir with qfold*.so> python test_python.py [models_dir]
Plain asserts, no pytest: prints "N passed, M failed" and exits non-zero on failure.
"""
import os
import platform
import sys
import tempfile
import threading
import traceback

import numpy as np
import onnxruntime as ort

import qfold

MODELS = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "models")
TMP = tempfile.mkdtemp(prefix="qfold_py_")
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def max_rel(ref, got):
    """max |got - ref| over max |ref|, as tests/e2e/compare_ort.py measures it."""
    ref = np.asarray(ref, np.float64)
    got = np.asarray(got, np.float64)
    assert ref.shape == got.shape, (ref.shape, got.shape)
    return float(np.abs(got - ref).max()) / max(float(np.abs(ref).max()), 1e-6)


def ort_run(onnx_path, feeds):
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def convert(stem, **kwargs):
    onnx_path = os.path.join(MODELS, stem + ".onnx")
    qfm_path = os.path.join(TMP, stem + ".qfm")
    if not os.path.exists(qfm_path):
        qfold.convert(onnx_path, qfm_path, **kwargs)
    return onnx_path, qfm_path


def expect_error(fn, *needles, code=None):
    try:
        fn()
    except qfold.Error as e:
        for n in needles:
            assert n in str(e), f"{n!r} not in {str(e)!r}"
        if code is not None:
            assert e.code == code, (e.code, code)
        return e
    raise AssertionError("no qfold.Error raised")


@test
def mobilenet_matches_onnxruntime():
    onnx_path, qfm_path = convert("mobilenetv2_like")
    sess = qfold.Session(qfm_path)
    (inp,) = sess.inputs
    assert inp["name"] == "input" and inp["dtype"] == "float32", inp
    assert inp["shape"] == [1, 3, 64, 64], inp
    assert [o["name"] for o in sess.outputs] == ["probs"]
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
    got = sess.run({"input": x})
    ref = ort_run(onnx_path, {"input": x})
    assert set(got) == {"probs"}
    assert got["probs"].dtype == np.float32 and got["probs"].shape == (1, 10)
    assert max_rel(ref["probs"], got["probs"]) < 1e-4
    assert sess.arena_bytes > 0


@test
def session_from_bytes_and_pathlike():
    import pathlib
    onnx_path, qfm_path = convert("mobilenetv2_like")
    x = np.random.default_rng(1).standard_normal((1, 3, 64, 64)).astype(np.float32)
    with open(qfm_path, "rb") as f:
        data = f.read()
    a = qfold.Session(data).run({"input": x})["probs"]
    b = qfold.Session(pathlib.Path(qfm_path), num_threads=2).run({"input": x})["probs"]
    np.testing.assert_array_equal(a, b)
    # Memoryviews: the model's bytes in logical order, whatever the strides
    # (a reversed view of the reversed bytes, every other byte of a spread copy).
    reversed_bytes = np.frombuffer(data, np.uint8)[::-1].copy()
    c = qfold.Session(memoryview(reversed_bytes)[::-1]).run({"input": x})["probs"]
    spread = np.zeros(2 * len(data), np.uint8)
    spread[::2] = np.frombuffer(data, np.uint8)
    d = qfold.Session(memoryview(spread)[::2]).run({"input": x})["probs"]
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(a, d)


@test
def bf16_precision_close_to_fp32():
    _, qfm_path = convert("mobilenetv2_like")
    x = np.random.default_rng(3).standard_normal((1, 3, 64, 64)).astype(np.float32)
    fp32 = qfold.Session(qfm_path).run({"input": x})["probs"]
    explicit = qfold.Session(qfm_path, precision="fp32").run({"input": x})["probs"]
    bf16 = qfold.Session(qfm_path, precision="bf16").run({"input": x})["probs"]
    np.testing.assert_array_equal(fp32, explicit)
    # fp16 arithmetic needs Armv8.2 FEAT_FP16: elsewhere the fp32 kernels, bit for bit.
    fp16 = qfold.Session(qfm_path, precision="fp16").run({"input": x})["probs"]
    if platform.machine() not in ("aarch64", "arm64"):
        np.testing.assert_array_equal(fp32, fp16)
    a32, a16 = fp32.astype(np.float64).ravel(), fp16.astype(np.float64).ravel()
    assert a32 @ a16 / (np.linalg.norm(a32) * np.linalg.norm(a16)) > 0.9999
    # Identical without AVX-512 BF16; otherwise bfloat16 products, fp32 sums.
    a, b = fp32.astype(np.float64).ravel(), bf16.astype(np.float64).ravel()
    cosine = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
    assert cosine > 0.999, cosine
    for bad in ("fp8", "FP16", "BF16", ""):
        try:
            qfold.Session(qfm_path, precision=bad)
        except ValueError as e:
            assert isinstance(e, qfold.InvalidArgument), type(e)
            assert "precision must be 'fp32', 'bf16' or 'fp16'" in str(e), str(e)
        else:
            raise AssertionError(f"precision={bad!r} accepted")


@test
def int8_activations_for_weight_only_matmuls():
    # models/int4_weight_mlp.onnx: blocked int4/uint4 DequantizeLinear -> MatMul. Exact by
    # default; int8_activations=True quantizes A per block: close to ONNX Runtime (which does
    # the same by default), not equal to the exact result.
    onnx_path, exact_path = convert("int4_weight_mlp")
    int8_path = os.path.join(TMP, "int4_weight_mlp.int8a.qfm")
    qfold.convert(onnx_path, int8_path, int8_activations=True)
    x = {"input": np.random.default_rng(5).standard_normal((2, 5, 80)).astype(np.float32)}
    exact = qfold.Session(exact_path).run(x)["output"]
    int8 = qfold.Session(int8_path).run(x)["output"]
    ref = ort_run(onnx_path, x)["output"]
    assert max_rel(ref, int8) < 2e-2, max_rel(ref, int8)
    assert max_rel(exact, int8) > 1e-6, "int8_activations changed nothing"


@test
def non_contiguous_input_is_converted():
    _, qfm_path = convert("mobilenetv2_like")
    sess = qfold.Session(qfm_path)
    x = np.random.default_rng(2).standard_normal((1, 64, 64, 3)).astype(np.float32)
    view = x.transpose(0, 3, 1, 2)  # NCHW view of NHWC data
    assert not view.flags["C_CONTIGUOUS"]
    a = sess.run({"input": view})["probs"]
    b = sess.run({"input": np.ascontiguousarray(view)})["probs"]
    np.testing.assert_array_equal(a, b)
    # Outputs are copies: a later run does not change them.
    c = sess.run({"input": np.zeros((1, 3, 64, 64), np.float32)})["probs"]
    assert not np.array_equal(a, c)
    np.testing.assert_array_equal(a, b)


@test
def dynamic_model_two_sizes():
    onnx_path, qfm_path = convert("dynamic_convnet")
    sess = qfold.Session(qfm_path)
    (inp,) = sess.inputs
    assert inp["shape"] == [-1, 3, -1, -1], inp
    assert inp["dim_names"] == ["batch", "", "height", "width"], inp
    assert inp["layout"] in ("NCHW", "plain"), inp
    rng = np.random.default_rng(3)
    for shape in ([1, 3, 32, 48], [2, 3, 64, 40]):
        sess.resize_input("input", shape)
        x = rng.standard_normal(shape).astype(np.float32)
        got = sess.run({"input": x})["output"]
        ref = ort_run(onnx_path, {"input": x})["output"]
        assert got.shape == ref.shape, (got.shape, ref.shape)
        assert max_rel(ref, got) < 1e-4
    # run() with a new shape re-plans by itself.
    x = rng.standard_normal((1, 3, 24, 24)).astype(np.float32)
    got = sess.run({"input": x})["output"]
    assert max_rel(ort_run(onnx_path, {"input": x})["output"], got) < 1e-4


@test
def convert_with_dims():
    onnx_path = os.path.join(MODELS, "dynamic_convnet.onnx")
    qfm_path = os.path.join(TMP, "dynamic_fixed.qfm")
    qfold.convert(onnx_path, qfm_path, dims={"batch": 1, "height": 32, "width": 32})
    sess = qfold.Session(qfm_path)
    assert sess.inputs[0]["shape"] == [1, 3, 32, 32], sess.inputs
    x = np.random.default_rng(4).standard_normal((1, 3, 32, 32)).astype(np.float32)
    assert max_rel(ort_run(onnx_path, {"input": x})["output"],
                   sess.run({"input": x})["output"]) < 1e-4


@test
def missing_onnx_file():
    missing = os.path.join(TMP, "no_such_model.onnx")
    out = os.path.join(TMP, "never.qfm")
    e = expect_error(lambda: qfold.convert(missing, out), missing)
    assert isinstance(e, RuntimeError) and isinstance(e.code, str) and e.code != "ok"
    assert not os.path.exists(out)


@test
def missing_qfm_file():
    missing = os.path.join(TMP, "no_such_model.qfm")
    expect_error(lambda: qfold.Session(missing), missing)


@test
def garbage_qfm_bytes():
    expect_error(lambda: qfold.Session(b"not a qfm model" * 10))


@test
def wrong_input_name():
    _, qfm_path = convert("mobilenetv2_like")
    sess = qfold.Session(qfm_path)
    x = np.zeros((1, 3, 64, 64), np.float32)
    expect_error(lambda: sess.run({"images": x}), "images", code="invalid_argument")
    expect_error(lambda: sess.run({}), "input", code="invalid_argument")
    expect_error(lambda: sess.resize_input("images", [1, 3, 64, 64]), "images",
                 code="invalid_argument")


@test
def wrong_dtype_and_shape():
    _, qfm_path = convert("mobilenetv2_like")
    sess = qfold.Session(qfm_path)
    expect_error(lambda: sess.run({"input": np.zeros((1, 3, 64, 64), np.float64)}),
                 "input", "float32", code="invalid_argument")
    expect_error(lambda: sess.run({"input": np.zeros((1, 3, 64, 64), ">f4")}),
                 "input", code="invalid_argument")
    expect_error(lambda: sess.run({"input": np.zeros((1, 3, 32, 64), np.float32)}),
                 "input", code="invalid_argument")
    # The session still works after the errors.
    out = sess.run({"input": np.zeros((1, 3, 64, 64), np.float32)})["probs"]
    assert out.shape == (1, 10)


@test
def threads_share_a_session():
    onnx_path, qfm_path = convert("mobilenetv2_like")
    sess = qfold.Session(qfm_path)
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((1, 3, 64, 64)).astype(np.float32) for _ in range(4)]
    refs = [sess.run({"input": x})["probs"] for x in xs]
    errors = []

    def worker(i):
        try:
            for _ in range(5):
                np.testing.assert_array_equal(sess.run({"input": xs[i]})["probs"], refs[i])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


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
