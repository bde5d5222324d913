#!/usr/bin/env python3
"""`pip install .` from a clean checkout into a fresh virtualenv, then use what it installed.

1. `git archive <ref>` of the repository into WORK/src: only committed files, no build tree.
2. A new virtualenv WORK/venv; `pip install WORK/src` (build isolation: scikit-build-core and
   pybind11 as pyproject.toml pins them, numpy as the package's dependency, from PyPI).
3. Outside the checkout, with that virtualenv's interpreter: `import qfold` comes from the
   virtualenv, its version is CMakeLists.txt's, qfold.InferenceSession converts and runs
   models/mobilenetv2_like.onnx and models/dynamic_convnet.onnx; the `qfold` console
   script and `python -m qfold` convert and inspect a model.
4. The outputs equal ONNX Runtime's (run here, in the test's own interpreter) within 1e-4.

Usage: python test_wheel.py --source REPO --work DIR [--ref HEAD] [--cxx COMPILER]
The compiler runs through ccache when it is installed, with paths relative to REPO
(CCACHE_BASEDIR): after the checkout's release build (scripts/setup.sh compiles through
ccache too) the same sources hit its objects, and a rerun hits its own. Without ccache, or
after a change, the whole converter and runtime are compiled.
"""
import argparse
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile

import numpy as np
import onnxruntime as ort

# Runs in the new virtualenv, from WORK: no path to the checkout or the build tree.
CHECK_INSTALLED = r'''
import os, sys
import numpy as np
import qfold
work, version = sys.argv[1], sys.argv[2]
venv = os.path.join(work, "venv")
assert os.path.realpath(qfold.__file__).startswith(os.path.realpath(venv)), qfold.__file__
assert qfold.__version__ == version, (qfold.__version__, version)
pkg = os.path.dirname(qfold.__file__)
for name in ("__init__.py", "__main__.py", "_session.py", "_qfold.pyi", "py.typed", "_bin/qfold"):
    assert os.path.exists(os.path.join(pkg, name)), name
assert any(f.startswith("_qfold.") and f.endswith(".so") for f in os.listdir(pkg)), os.listdir(pkg)
for stem in ("mobilenetv2_like", "dynamic_convnet"):
    sess = qfold.InferenceSession(os.path.join(work, "src", "models", stem + ".onnx"))
    feed = dict(np.load(os.path.join(work, stem + "_in.npz")))
    names = [o.name for o in sess.get_outputs()]
    np.savez(os.path.join(work, stem + "_out.npz"), **dict(zip(names, sess.run(None, feed))))
print("installed qfold", qfold.__version__, "at", pkg)
'''


def run(cmd, **kw):
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def project_version(src):
    with open(os.path.join(src, "CMakeLists.txt")) as f:
        return re.search(r"project\(qfold VERSION ([0-9.]+)", f.read()).group(1)


def ort_outputs(path, feed):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feed)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, help="the git repository")
    ap.add_argument("--work", required=True, help="scratch directory (emptied first)")
    ap.add_argument("--ref", default="HEAD", help="what to check out (default HEAD)")
    ap.add_argument("--cxx", help="C++ compiler (the checkout's build's: ccache hashes its name)")
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    src = os.path.join(work, "src")
    venv = os.path.join(work, "venv")
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(src)

    archive = subprocess.run(["git", "-C", args.source, "archive", "--format=tar", args.ref],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(src, filter="data")
    assert os.path.exists(os.path.join(src, "pyproject.toml")), "no pyproject.toml at " + args.ref
    assert not os.path.exists(os.path.join(src, "build")), "the archive holds a build tree"

    run([sys.executable, "-m", "venv", venv])
    python = os.path.join(venv, "bin", "python")
    env = dict(os.environ)
    for var in ("PYTHONPATH", "QFOLD_CACHE_DIR"):
        env.pop(var, None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["QFOLD_CACHE_DIR"] = os.path.join(work, "cache")
    cmake_args = ["-DCMAKE_CXX_COMPILER=" + args.cxx] if args.cxx else []
    if shutil.which("ccache"):
        cmake_args.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
        # The build directory sits where the checkout's own does (src/build beside
        # src/runtime, as build/ beside runtime/) and paths are hashed relative to the
        # checkout: the objects the checkout's release build compiled are hits.
        env["CCACHE_BASEDIR"] = os.path.realpath(args.source)
        env["CCACHE_NOHASHDIR"] = "1"
        run(["ccache", "--zero-stats"], env=env)
    env["CMAKE_ARGS"] = " ".join(cmake_args)
    run([python, "-m", "pip", "install", src, "--config-settings=build-dir=" + os.path.join(src, "build")],
        env=env, cwd=work)
    if shutil.which("ccache"):
        run(["ccache", "--show-stats"], env=env)

    rng = np.random.default_rng(7)
    feeds = {
        "mobilenetv2_like": {"input": rng.standard_normal((1, 3, 64, 64)).astype(np.float32)},
        "dynamic_convnet": {"input": rng.standard_normal((2, 3, 40, 24)).astype(np.float32)},
    }
    for stem, feed in feeds.items():
        np.savez(os.path.join(work, stem + "_in.npz"), **feed)
    run([python, "-c", CHECK_INSTALLED, work, project_version(src)], env=env, cwd=work)
    failures = 0
    for stem, feed in feeds.items():
        want = ort_outputs(os.path.join(src, "models", stem + ".onnx"), feed)
        have = dict(np.load(os.path.join(work, stem + "_out.npz")))
        assert set(have) == set(want), (stem, set(have), set(want))
        for name, w in want.items():
            h = have[name]
            rel = float(np.abs(h.astype(np.float64) - w).max()) / max(float(np.abs(w).max()), 1e-6)
            ok = h.shape == w.shape and rel < 1e-4
            failures += not ok
            print(f"{'PASS' if ok else 'FAIL'} {stem} '{name}' {list(h.shape)} max_rel={rel:.3g}")

    # The CLI, as the console script and as `python -m qfold`.
    qfm = os.path.join(work, "resnet_like.qfm")
    run([os.path.join(venv, "bin", "qfold"), "convert", os.path.join(src, "models", "resnet_like.onnx"),
         "-o", qfm], env=env, cwd=work)
    out = subprocess.run([python, "-m", "qfold", "inspect", qfm], env=env, cwd=work, check=True,
                         capture_output=True, text=True).stdout
    if "resnet_like" not in out and "input" not in out:
        print("FAIL: `python -m qfold inspect` printed\n" + out)
        failures += 1
    print("PASS" if not failures else f"FAIL ({failures})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
