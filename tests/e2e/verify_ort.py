"""`qfold verify --reference ort --per-layer` end to end: a float model and, with --qdq-dir, a
QDQ variant of it are converted and verified against ONNX Runtime run by the CLI through
QFOLD_PYTHON (this interpreter). Also checks the exit code 2 and message for a Python without
onnxruntime.

  python verify_ort.py --qfold build/cli/qfold --model models/resnet_like.onnx [--qdq-dir DIR]
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile


def run(cmd, env):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


def verify(qfold, model, tmp, env):
    """Converts `model`, verifies it per layer against ONNX Runtime; returns a list of problems."""
    qfm = os.path.join(tmp, os.path.basename(model) + ".qfm")
    rc, out, err = run([qfold, "convert", model, "-o", qfm], env)
    if rc != 0:
        return [f"{model}: convert failed ({rc}): {err.strip()}"]
    problems = []
    cmd = [qfold, "verify", model, qfm, "--reference", "ort", "--per-layer"]
    rc, out, err = run(cmd, env)
    if rc != 0:
        problems.append(f"{model}: verify exit code {rc}\n{out}{err}")
    if "reference: onnxruntime" not in out:
        problems.append(f"{model}: the text output does not name onnxruntime:\n{out}")
    rc, out, err = run(cmd + ["--json"], env)
    try:
        j = json.loads(out)
    except ValueError:
        return problems + [f"{model}: --json output is not JSON:\n{out}{err}"]
    if not j["reference"].startswith("onnxruntime"):
        problems.append(f"{model}: json reference is {j['reference']!r}")
    if not j["outputs"] or not j["layers"]:
        problems.append(f"{model}: nothing compared (outputs {len(j['outputs'])}, "
                        f"layers {len(j['layers'])})")
    print(f"{model}: {len(j['outputs'])} outputs, {len(j['layers'])} layers compared, "
          f"min cosine {min(d['cosine'] for d in j['outputs'] + j['layers']):.6f}")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qfold", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--qdq-dir", help="directory of scripts/quantize_models.py outputs")
    a = ap.parse_args()
    env = dict(os.environ, QFOLD_PYTHON=sys.executable)
    models = [a.model]
    if a.qdq_dir:
        stem = os.path.splitext(os.path.basename(a.model))[0]
        qdq = sorted(glob.glob(os.path.join(a.qdq_dir, stem + ".*.onnx")))
        if not qdq:
            print(f"no QDQ variant of {stem} in {a.qdq_dir}")
            return 1
        static = [m for m in qdq if ".pc_s8s8." in m]  # per-channel int8, folded to QLinearConv
        models.append((static or qdq)[0])
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        env["TMPDIR"] = os.path.join(tmp, "tmpdir")  # where qfold makes (and removes) its own
        os.mkdir(env["TMPDIR"])
        for m in models:
            problems += verify(a.qfold, m, tmp, env)
        # A Python without onnxruntime: this one with -S (no site-packages) and -I (no
        # PYTHONPATH). Exit code 2 and a hint are expected.
        qfm = os.path.join(tmp, os.path.basename(a.model) + ".qfm")
        bare = os.path.join(tmp, "bare_python")
        with open(bare, "w") as f:
            f.write(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
        os.chmod(bare, 0o755)
        rc, out, err = run([a.qfold, "verify", a.model, qfm, "--reference", "ort"],
                           dict(os.environ, QFOLD_PYTHON=bare))
        if rc != 2 or "install onnxruntime" not in err or "QFOLD_PYTHON" not in err:
            problems.append(f"without onnxruntime: exit code {rc}, stderr:\n{err}")
        rc, out, err = run([a.qfold, "verify", a.model, qfm, "--reference", "ort"],
                           dict(os.environ, QFOLD_PYTHON=os.path.join(tmp, "no_such_python")))
        if rc != 2 or "QFOLD_PYTHON" not in err:
            problems.append(f"missing interpreter: exit code {rc}, stderr:\n{err}")
        # (ONNX Runtime may leave its own files there; only qfold's directories count.)
        left = [f for f in os.listdir(env["TMPDIR"]) if f.startswith("qfold-verify-")]
        if left:
            problems.append(f"temporary directories left behind: {left}")
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
