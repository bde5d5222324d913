#!/usr/bin/env python3
"""Benchmarks qfold against ONNX Runtime and MNN on the models of models/ and writes
docs/BENCHMARKS.md.

Usage:
  python scripts/bench.py --qfold build/cli/qfold [--out docs/BENCHMARKS.md] [--quick]
                          [--warmup W] [--iterations I] [--threads 1,2] [--work DIR]

Models: the float models of models/; the pc_u8s8 QDQ variant (scripts/quantize_models.py, built
into WORK/qdq when missing) of mobilenetv2_like, resnet_like and transformer_encoder; the real
PP-OCR models of models/cache/float and models/cache/qdq (scripts/fetch_real_models.py; skipped
with a note when absent). --quick: mobilenetv2_like and its pc_u8s8 variant, 1 warm-up and 3
timed runs, for a smoke test.

Per model and thread count, each engine runs in its own process on the same fixed-seed inputs
(standard normal floats), with the same number of warm-up and timed runs:
  * qfold: `qfold convert`, then `qfold bench --json` (C++ steady_clock around Session::Run);
  * ONNX Runtime: InferenceSession with ORT_ENABLE_ALL, intra_op_num_threads=T,
    inter_op_num_threads=1, time.perf_counter around sess.run (includes Python binding overhead:
    input wrapping and output numpy allocation, some microseconds per run);
  * MNN (when the `MNN` package imports): the ONNX model converted with MNN's converter, run with
    the Interpreter/Session API (numThread=T, precision normal), time.perf_counter around
    runSession. Conversion or run failures are recorded, not fatal. MNN's converter is called
    through its compiled module (_tools.mnnconvert) and not through the `mnnconvert` Python entry
    point, which pip-installs a telemetry SDK into whatever `pip` is on PATH and reports usage to
    a remote server.
The MNN and qfold outputs are compared with ONNX Runtime's (cosine similarity of the first
output) so that a fast but wrong run is visible.

Also compiles (g++ -O2 -mavx512f -mavx512vnni -mfma) and runs a microbenchmark of the machine's
single-thread peak: independent vpdpbusd (int8 VNNI) and vfmadd231ps (fp32 FMA) on registers.
"""

import argparse
import datetime
import json
import os
import platform
import re
import resource
import shlex
import shutil
import subprocess
import sys
import time
import zlib

import numpy as np

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
QDQ_SOURCES = ("mobilenetv2_like", "resnet_like", "transformer_encoder")
QDQ_VARIANT = "pc_u8s8"
QUICK_MODELS = ("mobilenetv2_like",)
# Runs per model are cut so that one engine/thread setting takes about this long.
SECONDS_PER_SETTING = 6.0
MIN_ITERATIONS = 5

PEAK_SOURCE = r"""
// Single-thread peak of int8 VNNI (vpdpbusd) and fp32 FMA (vfmadd231ps) on zmm registers,
// best of 30 short runs (a shared machine preempts long ones):
// 12 independent accumulators hide the instruction latency; the asm barriers keep the compiler
// from hoisting or folding the loop.
#include <immintrin.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

template <class F>
double Seconds(F f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 20000000;
  const int seed = argc;  // not a compile-time constant
  double best_vnni = 1e30, best_fma = 1e30;
  int sink = 0;
  float fsink = 0;
  for (int rep = 0; rep < 30; ++rep) {
    best_vnni = std::min(best_vnni, Seconds([&] {
      __m512i x = _mm512_set1_epi8(char(seed)), y = _mm512_set1_epi8(char(seed + 1));
      // Distinct start values: equal accumulators would be merged into one chain.
      __m512i a0 = _mm512_set1_epi32(seed), a1 = _mm512_set1_epi32(seed + 1),
              a2 = _mm512_set1_epi32(seed + 2), a3 = _mm512_set1_epi32(seed + 3),
              a4 = _mm512_set1_epi32(seed + 4), a5 = _mm512_set1_epi32(seed + 5),
              a6 = _mm512_set1_epi32(seed + 6), a7 = _mm512_set1_epi32(seed + 7),
              a8 = _mm512_set1_epi32(seed + 8), a9 = _mm512_set1_epi32(seed + 9),
              a10 = _mm512_set1_epi32(seed + 10), a11 = _mm512_set1_epi32(seed + 11);
      for (long i = 0; i < n; ++i) {
        asm volatile("" : "+v"(x), "+v"(y));
        a0 = _mm512_dpbusd_epi32(a0, x, y); a1 = _mm512_dpbusd_epi32(a1, x, y);
        a2 = _mm512_dpbusd_epi32(a2, x, y); a3 = _mm512_dpbusd_epi32(a3, x, y);
        a4 = _mm512_dpbusd_epi32(a4, x, y); a5 = _mm512_dpbusd_epi32(a5, x, y);
        a6 = _mm512_dpbusd_epi32(a6, x, y); a7 = _mm512_dpbusd_epi32(a7, x, y);
        a8 = _mm512_dpbusd_epi32(a8, x, y); a9 = _mm512_dpbusd_epi32(a9, x, y);
        a10 = _mm512_dpbusd_epi32(a10, x, y); a11 = _mm512_dpbusd_epi32(a11, x, y);
      }
      __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1),
                                                    _mm512_add_epi32(a2, a3)),
                                   _mm512_add_epi32(_mm512_add_epi32(a4, a5),
                                                    _mm512_add_epi32(a6, a7)));
      s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(a8, a9),
                                               _mm512_add_epi32(a10, a11)));
      sink += _mm512_reduce_add_epi32(s);
    }));
    best_fma = std::min(best_fma, Seconds([&] {
      __m512 x = _mm512_set1_ps(1.0f + 1e-7f * seed), y = _mm512_set1_ps(0.999999f);
      __m512 a0 = _mm512_set1_ps(seed), a1 = _mm512_set1_ps(seed + 1),
             a2 = _mm512_set1_ps(seed + 2), a3 = _mm512_set1_ps(seed + 3),
             a4 = _mm512_set1_ps(seed + 4), a5 = _mm512_set1_ps(seed + 5),
             a6 = _mm512_set1_ps(seed + 6), a7 = _mm512_set1_ps(seed + 7),
             a8 = _mm512_set1_ps(seed + 8), a9 = _mm512_set1_ps(seed + 9),
             a10 = _mm512_set1_ps(seed + 10), a11 = _mm512_set1_ps(seed + 11);
      for (long i = 0; i < n; ++i) {
        asm volatile("" : "+v"(x), "+v"(y));
        a0 = _mm512_fmadd_ps(x, y, a0); a1 = _mm512_fmadd_ps(x, y, a1);
        a2 = _mm512_fmadd_ps(x, y, a2); a3 = _mm512_fmadd_ps(x, y, a3);
        a4 = _mm512_fmadd_ps(x, y, a4); a5 = _mm512_fmadd_ps(x, y, a5);
        a6 = _mm512_fmadd_ps(x, y, a6); a7 = _mm512_fmadd_ps(x, y, a7);
        a8 = _mm512_fmadd_ps(x, y, a8); a9 = _mm512_fmadd_ps(x, y, a9);
        a10 = _mm512_fmadd_ps(x, y, a10); a11 = _mm512_fmadd_ps(x, y, a11);
      }
      __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                               _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
      s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
      fsink += _mm512_reduce_add_ps(s);
    }));
  }
  // vpdpbusd zmm: 64 u8*s8 multiply-adds = 128 ops; vfmadd231ps zmm: 16 FMAs = 32 flops.
  const double instr = 12.0 * double(n);
  std::printf("{\"int8_vnni_gops\": %.1f, \"fp32_fma_gflops\": %.1f, \"sink\": %d}\n",
              instr * 128 / best_vnni / 1e9, instr * 32 / best_fma / 1e9,
              sink + int(fsink != 0));
  return 0;
}
"""


# Worker processes: one engine, one model, one thread count. -------------------------------------

def rss_bytes():
    """(ru_maxrss, VmHWM) of this process in bytes."""
    hwm = 0
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, hwm


def timing_stats(times_s):
    t = np.sort(np.asarray(times_s) * 1e3)
    rank = int(np.ceil(0.9 * len(t)))  # nearest rank, like qfold bench
    return {"median_ms": float(np.median(t)), "p90_ms": float(t[max(rank, 1) - 1]),
            "min_ms": float(t[0]), "mean_ms": float(t.mean()),
            "throughput_per_s": float(1e3 * len(t) / t.sum()) if t.sum() > 0 else 0.0}


def worker_ort(args, feeds):
    import onnxruntime as ort
    base_rss = rss_bytes()[0]
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = args.threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(args.model, opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    for _ in range(args.warmup):
        outs = sess.run(names, feeds)
    times = []
    for _ in range(args.iterations):
        t0 = time.perf_counter()
        outs = sess.run(names, feeds)
        times.append(time.perf_counter() - t0)
    return times, dict(zip(names, outs)), base_rss, {"version": ort.__version__}


def worker_mnn(args, feeds):
    import MNN
    base_rss = rss_bytes()[0]
    interp = MNN.Interpreter(args.model)
    sess = interp.createSession({"backend": "CPU", "numThread": args.threads,
                                 "precision": "normal"})
    inputs = interp.getSessionInputAll(sess)
    missing = set(feeds) - set(inputs)
    if missing:
        raise RuntimeError(f"MNN model lacks inputs {sorted(missing)}; has {sorted(inputs)}")
    resized = False
    for name, arr in feeds.items():
        if tuple(inputs[name].getShape()) != arr.shape:
            interp.resizeTensor(inputs[name], arr.shape)
            resized = True
    if resized:
        interp.resizeSession(sess)
    hosts = []
    for name, arr in feeds.items():
        is_float = np.issubdtype(arr.dtype, np.floating)
        data = np.ascontiguousarray(arr, np.float32 if is_float else np.int32)
        # Keep `data` alive with the tensor: MNN.Tensor may point into the numpy buffer.
        hosts.append((interp.getSessionInput(sess, name), data, MNN.Tensor(
            data.shape, MNN.Halide_Type_Float if is_float else MNN.Halide_Type_Int, data,
            MNN.Tensor_DimensionType_Caffe)))

    def set_inputs():
        # A run may reuse the input tensor's memory for intermediates (repeated runs without
        # this drift away from the right output), so the inputs are copied in before each run,
        # outside the timed region.
        for dst, _, host in hosts:
            dst.copyFrom(host)

    # runSession returns an error code instead of raising (e.g. when shape computation failed
    # while resizing): a failed run must not be timed as a fast one.
    for _ in range(args.warmup):
        set_inputs()
        code = interp.runSession(sess)
        if code != 0:
            raise RuntimeError(f"MNN runSession returned error code {code}")
    times = []
    for _ in range(args.iterations):
        set_inputs()
        t0 = time.perf_counter()
        code = interp.runSession(sess)
        times.append(time.perf_counter() - t0)
        if code != 0:
            raise RuntimeError(f"MNN runSession returned error code {code}")
    outs = {}
    for name, t in interp.getSessionOutputAll(sess).items():
        shape = tuple(t.getShape())
        host = MNN.Tensor(shape, MNN.Halide_Type_Float, np.zeros(shape, np.float32),
                          MNN.Tensor_DimensionType_Caffe)
        t.copyToHostTensor(host)
        outs[name] = np.array(host.getData(), dtype=np.float32).reshape(shape)
    return times, outs, base_rss, {"version": MNN.version()}


def run_worker(args):
    with np.load(args.feeds) as z:
        feeds = {k: z[k] for k in z.files}
    fn = worker_ort if args.worker == "ort" else worker_mnn
    times, outs, base_rss, extra = fn(args, feeds)
    if args.save_outputs:
        np.savez(args.save_outputs, **{f"o{i}": v for i, v in enumerate(outs.values())})
    peak, hwm = rss_bytes()
    result = timing_stats(times)
    result.update(extra)
    result.update({"peak_rss_bytes": peak, "vmhwm_bytes": hwm, "import_rss_bytes": base_rss,
                   "output_names": list(outs)})
    print(json.dumps(result))
    return 0


# Driver ----------------------------------------------------------------------------------------

def sh(cmd, timeout, cwd=None):
    """Runs a command; returns (returncode, stdout, stderr). Timeouts and start failures become
    returncode -1 with a message."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return -1, "", f"timed out after {timeout}s"
    except OSError as e:
        return -1, "", str(e)


def last_error_line(rc, out, err):
    lines = [ln.strip() for ln in (err + "\n" + out).splitlines() if ln.strip()]
    how = f"killed by signal {-rc}" if rc < -1 else f"exit {rc}"
    # Prefer an explicit error line over trailing noise.
    for ln in reversed(lines):
        if re.search(r"error|what\(\)|exception|failed|abort", ln, re.I):
            return f"{how}: {ln[:200]}"
    return f"{how}: {lines[-1][:200] if lines else '(no output)'}"


def machine_info():
    cpu = platform.processor() or "unknown"
    family = model = None
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                elif line.startswith("cpu family"):
                    family = line.split(":", 1)[1].strip()
                elif re.match(r"model\s*:", line):
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    if family and model:
        cpu += f" (family {family}, model {model})"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu, "cores": cores, "avx512_vnni": "avx512_vnni" in flags,
            "kernel": platform.release(), "python": platform.python_version()}


def run_peak(work):
    """Compiles and runs the peak microbenchmark; returns a dict or {"error": ...}."""
    src = os.path.join(work, "peak.cc")
    exe = os.path.join(work, "peak")
    with open(src, "w") as f:
        f.write(PEAK_SOURCE)
    cxx = shutil.which("g++")
    if not cxx:
        return {"error": "g++ not found"}
    rc, out, err = sh([cxx, "-O2", "-mavx512f", "-mavx512vnni", "-mfma", "-o", exe, src], 300)
    if rc != 0:
        return {"error": "compile failed: " + last_error_line(rc, out, err)}
    rc, out, err = sh([exe, "1000000"], 120)
    if rc != 0:
        return {"error": "run failed: " + last_error_line(rc, out, err)}
    return json.loads(out)


def git_state():
    rc, head, _ = sh(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], 30)
    rc2, dirty, _ = sh(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"], 30)
    if rc != 0:
        return "unknown"
    return head.strip() + (" + uncommitted changes" if rc2 == 0 and dirty.strip() else "")


def prepare_models(args, work, notes):
    """[(label, group, onnx path, float counterpart label or None)]"""
    import quantize_models
    models = []
    names = QUICK_MODELS if args.quick else sorted(
        os.path.splitext(f)[0] for f in os.listdir(os.path.join(REPO, "models"))
        if f.endswith(".onnx"))
    for n in names:
        models.append((n, "synthetic float", os.path.join(REPO, "models", n + ".onnx"), None))
    qdq_dir = os.path.join(work, "qdq")
    os.makedirs(qdq_dir, exist_ok=True)
    variant = next(v for v in quantize_models.VARIANTS if v.name == QDQ_VARIANT)
    for n in (QUICK_MODELS if args.quick else QDQ_SOURCES):
        dst = os.path.join(qdq_dir, f"{n}.{QDQ_VARIANT}.onnx")
        if not os.path.exists(dst):
            # The same calls and seeds as scripts/quantize_models.py, for one variant only.
            pre = os.path.join(qdq_dir, f"{n}.pre.onnx")
            quantize_models.preprocess(os.path.join(REPO, "models", n + ".onnx"), pre)
            quantize_models.quantize(pre, dst, variant, seed=zlib.crc32(f"calib:{n}".encode()))
            os.remove(pre)
        models.append((f"{n}.{QDQ_VARIANT}", "synthetic QDQ", dst, n))
    if args.quick:
        return models
    cache = os.path.join(REPO, "models", "cache")
    real = ("ppocr_mobile_v2_cls", "ppocrv4_det", "ppocrv4_rec")
    have = [n for n in real if os.path.exists(os.path.join(cache, "float", n + ".onnx"))]
    if len(have) < len(real):
        notes.append("PP-OCR models missing from models/cache (run scripts/fetch_real_models.py): "
                     + ", ".join(n for n in real if n not in have))
    for n in have:
        models.append((n, "PP-OCR float", os.path.join(cache, "float", n + ".onnx"), None))
    for n in have:
        q = os.path.join(cache, "qdq", f"{n}.{QDQ_VARIANT}.onnx")
        if os.path.exists(q):
            models.append((f"{n}.{QDQ_VARIANT}", "PP-OCR QDQ", q, n))
    return models


def cosine(a, b):
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    if a.shape != b.shape:
        return None
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(a @ b / (na * nb))


def run_engine_worker(engine, model, feeds_npz, threads, warmup, iterations, out_npz, timeout):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", engine, "--model", model,
           "--feeds", feeds_npz, "--threads", str(threads), "--warmup", str(warmup),
           "--iterations", str(iterations), "--save-outputs", out_npz]
    rc, out, err = sh(cmd, timeout)
    if rc != 0:
        return {"error": last_error_line(rc, out, err)}
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": "unparsable worker output: " + out[-200:]}


def mnn_available():
    rc, out, err = sh([sys.executable, "-c", "import MNN, _tools; print(MNN.version())"], 120)
    return out.strip().splitlines()[-1] if rc == 0 and out.strip() else None


def mnn_convert(onnx_path, mnn_path, work):
    """Converts with MNN's compiled converter. Returns an error string or None."""
    code = "import sys, _tools; _tools.mnnconvert(sys.argv)"
    rc, out, err = sh([sys.executable, "-c", code, "-f", "ONNX", "--modelFile", onnx_path,
                       "--MNNModel", mnn_path, "--bizCode", "qfold"], 900, cwd=work)
    if rc != 0 or not os.path.exists(mnn_path) or os.path.getsize(mnn_path) == 0:
        if os.path.exists(mnn_path):
            os.remove(mnn_path)
        return "converter " + last_error_line(rc, out, err)
    return None


def mnn_quant_summary(mnn_path, work):
    """What MNN's converter made of a QDQ model, from its JSON dump of the .mnn: a string like
    "2 of 439 ops int8-typed, 0 convs with int8 params", or None. Read with a regex: the dump
    is not strict JSON (it writes inf/nan)."""
    js = mnn_path + ".json"
    code = "import sys, _tools; _tools.mnnconvert(sys.argv)"
    rc, _, _ = sh([sys.executable, "-c", code, "-f", "MNN", "--modelFile", mnn_path,
                   "--JsonFile", js], 600, cwd=work)
    if rc != 0 or not os.path.exists(js):
        return None
    with open(js) as f:
        text = f.read()
    os.remove(js)
    types = re.findall(r'"type": "([A-Za-z0-9_]+)"', text)
    int8 = sum(1 for t in types if "Int8" in t or "Quant" in t)
    quant_params = len(re.findall(r'"(symmetricQuan|quanParameter)"', text))
    names = ", ".join(sorted(set(t for t in types if "Int8" in t or "Quant" in t))) or "none"
    return f"{int8} of {len(types)} ops int8-typed ({names}), {quant_params} with int8 weights"


def bench_model(args, label, path, work, engines, log):
    import onnx
    sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
    from qfold_tools import random_feeds
    res = {"label": label, "onnx": path, "onnx_bytes": os.path.getsize(path), "engines": {}}
    mdir = os.path.join(work, "runs", label)
    os.makedirs(mdir, exist_ok=True)
    feeds = random_feeds(onnx.load(path), np.random.default_rng(zlib.crc32(label.encode())))
    feeds_npz = os.path.join(mdir, "feeds.npz")
    np.savez(feeds_npz, **feeds)
    npys = []
    for i, (name, arr) in enumerate(feeds.items()):
        p = os.path.join(mdir, f"input{i}.npy")
        np.save(p, arr)
        npys += ["--input", f"{name}={p}"]
    res["inputs"] = {k: f"{v.dtype} {'x'.join(map(str, v.shape))}" for k, v in feeds.items()}

    qfm = os.path.join(mdir, "model.qfm")
    rc, out, err = sh([args.qfold, "convert", path, "-o", qfm], 900)
    qfold_ok = rc == 0
    if not qfold_ok:
        res["engines"]["qfold"] = {"error": "convert " + last_error_line(rc, out, err)}
    else:
        res["qfm_bytes"] = os.path.getsize(qfm)

    # Iterations for this model: from one qfold (or ORT) probe run, so every engine gets the same.
    iterations = args.iterations
    probe = None
    if qfold_ok:
        rc, out, err = sh([args.qfold, "bench", qfm, "--json", "--warmup", "0", "--iterations", "1"]
                          + npys, 900)
        if rc == 0:
            probe = json.loads(out)["median_ms"]
        else:
            res["engines"]["qfold"] = {"error": "bench " + last_error_line(rc, out, err)}
            qfold_ok = False
    if probe is None:
        r = run_engine_worker("ort", path, feeds_npz, 1, 0, 1, os.path.join(mdir, "probe.npz"),
                              900)
        probe = r.get("median_ms")
    if probe and not args.quick:
        iterations = int(max(MIN_ITERATIONS, min(args.iterations,
                                                 SECONDS_PER_SETTING * 1e3 / probe)))
    warmup = args.warmup
    if probe and probe * warmup > 3e3:
        warmup = max(1, min(warmup, 2))  # slow model: the first runs settle it as well
    res["warmup"], res["iterations"] = warmup, iterations
    timeout = 120 + 20 * (warmup + iterations) * (probe or 1000) / 1e3

    ort_ref = None
    for t in args.threads:
        if qfold_ok:
            rc, out, err = sh([args.qfold, "bench", qfm, "--json", "--threads", str(t),
                               "--warmup", str(warmup), "--iterations", str(iterations)] + npys,
                              timeout)
            r = json.loads(out) if rc == 0 else {"error": "bench " + last_error_line(rc, out, err)}
            res["engines"].setdefault("qfold", {})[t] = r
        o = os.path.join(mdir, f"ort_{t}.npz")
        r = run_engine_worker("ort", path, feeds_npz, t, warmup, iterations, o, timeout)
        res["engines"].setdefault("ort", {})[t] = r
        if "error" not in r and ort_ref is None:
            with np.load(o) as z:
                ort_ref = z["o0"]
    if ort_ref is not None and qfold_ok:
        first = os.path.join(mdir, "qfold_out")
        rc, out, err = sh([args.qfold, "run", qfm, "--output-dir", first] + npys, timeout)
        names = [ln.split(" -> ")[0] for ln in out.splitlines() if " -> " in ln]
        if rc == 0 and names:
            from qfold_tools import safe_name
            res["qfold_cos"] = cosine(np.load(os.path.join(first, safe_name(names[0]) + ".npy")),
                                      ort_ref)
    if "mnn" in engines:
        mnn_path = os.path.join(mdir, "model.mnn")
        e = mnn_convert(path, mnn_path, mdir)
        if e:
            res["engines"]["mnn"] = {"error": e}
        else:
            res["mnn_bytes"] = os.path.getsize(mnn_path)
            if QDQ_VARIANT in label:
                res["mnn_quant"] = mnn_quant_summary(mnn_path, mdir)
            for t in args.threads:
                o = os.path.join(mdir, f"mnn_{t}.npz")
                r = run_engine_worker("mnn", mnn_path, feeds_npz, t, warmup, iterations, o,
                                      timeout)
                res["engines"].setdefault("mnn", {})[t] = r
                if "error" not in r and ort_ref is not None and "mnn_cos" not in res:
                    with np.load(o) as z:
                        res["mnn_cos"] = cosine(z["o0"], ort_ref)
    log(f"  {label}: " + ", ".join(
        f"{eng}@{t}={r['median_ms']:.3f}ms" if "median_ms" in r else f"{eng}@{t}=error"
        for eng, per in res["engines"].items() if "error" not in per
        for t, r in per.items()) + "".join(
        f", {eng}: {per['error']}" for eng, per in res["engines"].items() if "error" in per))
    return res


# Single convolutions: kernel efficiency against the measured peak ---------------------------

# (label, in channels, out channels, kernel, stride, group, input height = width)
CONV_SHAPES = (
    ("1x1 256->256, 56x56", 256, 256, 1, 1, 1, 56),
    ("1x1 64->384, 28x28", 64, 384, 1, 1, 1, 28),
    ("3x3 64->64, 56x56", 64, 64, 3, 1, 1, 56),
    ("3x3 s2 128->256, 28x28", 128, 256, 3, 2, 1, 28),
    ("depthwise 3x3 144, 56x56", 144, 144, 3, 1, 144, 56),
    ("depthwise 3x3 s2 144, 56x56", 144, 144, 3, 2, 144, 56),
)


def make_conv_model(path, c, m, k, s, g, h):
    """uint8 in, uint8 out: DQ -> Conv (per-channel int8 weights, int32 bias) -> Q, which
    qfold folds into one QLinearConv and ONNX Runtime runs with its own QLinearConv."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(c * 1000 + m + k + s)
    xs, ys = 0.02, 0.05
    ws = rng.uniform(0.002, 0.01, m).astype(np.float32)
    inits = [
        numpy_helper.from_array(rng.integers(-127, 128, (m, c // g, k, k)).astype(np.int8), "w"),
        numpy_helper.from_array(ws, "w_scale"),
        numpy_helper.from_array(np.zeros(m, np.int8), "w_zp"),
        numpy_helper.from_array(rng.integers(-2000, 2000, m).astype(np.int32), "b"),
        numpy_helper.from_array((xs * ws).astype(np.float32), "b_scale"),
        numpy_helper.from_array(np.zeros(m, np.int32), "b_zp"),
        numpy_helper.from_array(np.array(xs, np.float32), "x_scale"),
        numpy_helper.from_array(np.array(128, np.uint8), "x_zp"),
        numpy_helper.from_array(np.array(ys, np.float32), "y_scale"),
        numpy_helper.from_array(np.array(128, np.uint8), "y_zp"),
    ]
    p = k // 2
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "x_scale", "x_zp"], ["xf"]),
        helper.make_node("DequantizeLinear", ["w", "w_scale", "w_zp"], ["wf"], axis=0),
        helper.make_node("DequantizeLinear", ["b", "b_scale", "b_zp"], ["bf"], axis=0),
        helper.make_node("Conv", ["xf", "wf", "bf"], ["yf"], kernel_shape=[k, k],
                         strides=[s, s], pads=[p, p, p, p], group=g),
        helper.make_node("QuantizeLinear", ["yf", "y_scale", "y_zp"], ["y"]),
    ]
    oh = (h + 2 * p - k) // s + 1
    graph = helper.make_graph(
        nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, c, h, h])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, m, oh, oh])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return 2 * m * (c // g) * k * k * oh * oh  # ops: a multiply and an add per MAC


def bench_conv_kernels(args, work, log):
    """qfold and ONNX Runtime on single int8 convolutions; GOPS and share of the int8 peak."""
    rows = []
    cdir = os.path.join(work, "conv_kernels")
    os.makedirs(cdir, exist_ok=True)
    runs = 3 if args.quick else 100
    for label, c, m, k, s, g, h in CONV_SHAPES:
        tag = re.sub(r"[^0-9a-z]+", "_", label.lower()).strip("_")
        onnx_path = os.path.join(cdir, tag + ".onnx")
        ops = make_conv_model(onnx_path, c, m, k, s, g, h)
        x = np.random.default_rng(1).integers(0, 256, (1, c, h, h)).astype(np.uint8)
        npy, npz = os.path.join(cdir, tag + ".x.npy"), os.path.join(cdir, tag + ".feeds.npz")
        np.save(npy, x)
        np.savez(npz, x=x)
        qfm = os.path.join(cdir, tag + ".qfm")
        row = {"label": label, "ops": ops}
        rc, out, err = sh([args.qfold, "convert", onnx_path, "-o", qfm], 300)
        for t in args.threads:
            if rc != 0:
                row[f"qfold_{t}"] = None
                continue
            rc2, out2, err2 = sh([args.qfold, "bench", qfm, "--json", "--threads", str(t),
                                  "--warmup", "10", "--iterations", str(runs), "--input",
                                  f"x={npy}"], 600)
            row[f"qfold_{t}"] = json.loads(out2)["median_ms"] if rc2 == 0 else None
            r = run_engine_worker("ort", onnx_path, npz, t, 10, runs,
                                  os.path.join(cdir, tag + f".ort{t}.npz"), 600)
            row[f"ort_{t}"] = r.get("median_ms")
        rows.append(row)
        log(f"  conv {label}: " + ", ".join(f"{k}={v:.3f}ms" for k, v in row.items()
                                            if k not in ("label", "ops") and v))
    return rows


# Markdown --------------------------------------------------------------------------------------

def stat(res, eng, t, key):
    r = res["engines"].get(eng, {})
    if "error" in r:
        return None
    return r.get(t, {}).get(key)


def med(res, eng, t):
    return stat(res, eng, t, "median_ms")


def fmt_ms(v):
    if v is None:
        return "—"
    return f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 100 else f"{v:.0f}"


def fmt_ratio(a, b):
    return f"{a / b:.2f}×" if a and b else "—"


def fmt_mib(b):
    return f"{b / 1048576:.1f}" if b else "—"


def fmt_size(b):
    if b is None:
        return "—"
    return f"{b / 1024:.0f} KiB" if b < 1048576 else f"{b / 1048576:.1f} MiB"


def engine_cell(res, eng, t, footnotes):
    r = res["engines"].get(eng)
    if r is None:
        return "n/a"
    err = r.get("error") or r.get(t, {}).get("error")
    if err:
        note = f"{res['label']}, {eng}: {err}"
        if note not in footnotes:
            footnotes.append(note)
        return f"error [{footnotes.index(note) + 1}]"
    return fmt_ms(med(res, eng, t))


def write_markdown(path, results, meta, args):
    t1 = args.threads[0]
    t2 = args.threads[1] if len(args.threads) > 1 else None
    by_label = {r["label"]: r for r in results}
    groups = []
    for r in results:
        if r["group"] not in groups:
            groups.append(r["group"])
    lines = []
    w = lines.append
    w("# Benchmarks")
    w("")
    w(f"Generated by `scripts/bench.py` on {meta['date']} (qfold {meta['git']}). "
      "Regenerate with:")
    w("")
    w("    " + meta["command"])
    w("")
    m = meta["machine"]
    w(f"**Machine:** {m['cpu']}, {m['cores']} cores available to the process "
      f"(AVX-512 VNNI: {'yes' if m['avx512_vnni'] else 'no'}), Linux {m['kernel']}, "
      f"Python {m['python']}. Load average at start / end: {meta['load_start']} / "
      f"{meta['load_end']}.")
    w("")
    pk = meta["peak"]
    if "error" in pk:
        w(f"**Single-thread peak:** not measured ({pk['error']}).")
    else:
        w(f"**Single-thread peak** (register-only microbenchmark, `g++ -O2 -mavx512f "
          f"-mavx512vnni -mfma`): int8 VNNI (vpdpbusd) {pk['int8_vnni_gops']:.0f} GOPS, fp32 FMA "
          f"(vfmadd231ps) {pk['fp32_fma_gflops']:.0f} GFLOPS.")
    w("")
    w(f"**Engines:** qfold (`qfold bench`), ONNX Runtime {meta['ort_version']} "
      f"(ORT_ENABLE_ALL), MNN {meta['mnn_version'] or 'not installed'}.")
    w("")
    w("## How measured")
    w("")
    w("- Every engine runs each model in its own process, on the same fixed-seed random inputs "
      "(standard normal floats), with the same number of warm-up and timed runs (listed per "
      "model; cut for slow models so one setting takes about "
      f"{SECONDS_PER_SETTING:.0f} s, at least {MIN_ITERATIONS} runs). Latency is the median of "
      "the timed runs, in milliseconds; the fastest run (min) is listed too, as it is the figure "
      "least disturbed by other jobs on the machine.")
    w("- qfold: `qfold convert`, then `qfold bench --json` (C++ `steady_clock` around "
      "`Session::Run`; inputs are set once before).")
    w("- ONNX Runtime: `InferenceSession` with `ORT_ENABLE_ALL` (QDQ models run ORT's own "
      "integer kernels), `intra_op_num_threads` = T, `inter_op_num_threads` = 1; "
      "`time.perf_counter` around `sess.run`, which **includes Python overhead** (binding the "
      "numpy inputs and allocating the numpy outputs, a few microseconds: it matters only for "
      "the smallest models).")
    w("- MNN: the ONNX model converted by MNN's converter (called as `_tools.mnnconvert`, not "
      "the `mnnconvert` script, which pip-installs a telemetry SDK and reports usage), run with "
      "the Interpreter/Session API (`numThread` = T, precision normal, CPU backend); "
      "`time.perf_counter` around `runSession` (inputs copied in before each run, untimed: "
      "MNN may overwrite them).")
    w("- Ratios: ORT/qfold and MNN/qfold divide the other engine's median by qfold's at the "
      "same thread count: **> 1 means qfold is faster**. \"int8/fp32\" is the qfold latency of "
      "the float model divided by that of its QDQ variant (> 1: the int8 model is faster). "
      "\"2T speedup\" is qfold's 1-thread over 2-thread median.")
    w("- Peak RSS: `VmHWM` of `/proc/self/status` of the process that ran the model (qfold: "
      "the `qfold bench` process; ORT and MNN: a Python process, so the interpreter, numpy and "
      "the engine's library are included; the RSS after importing them is in the raw JSON). "
      "Not `getrusage` `ru_maxrss`: Linux carries it over `exec` from the parent, so a child of "
      "the benchmark script would report at least the script's own RSS. "
      "Arena: qfold's planned activation memory (`Session::arena_bytes`).")
    w("- \"cos\" is the cosine similarity of the engine's first output with ONNX Runtime's on "
      "the same input, a check that a fast result is also a right one.")
    w("- The machine is shared (2 cores, other jobs running: see the load average), so "
      "differences under ~10% are noise; 2-thread numbers suffer most.")
    w("")
    footnotes = []
    conv = meta.get("conv_kernels") or []
    if conv:
        pk_gops = None if "error" in pk else pk["int8_vnni_gops"]
        w("## Single int8 convolutions")
        w("")
        w("One QDQ convolution each (uint8 input and output, per-channel int8 weights, int32 "
          "bias), which qfold folds into one QLinearConv and ONNX Runtime runs with its own "
          "QLinearConv; GOPS counts a multiply and an add per MAC over the median latency, and "
          "\"% of peak\" divides it by the single-thread int8 VNNI peak above (that peak is for "
          "dense vpdpbusd: depthwise convolutions cannot use it and are listed for their "
          "latency).")
        w("")
        w(f"| convolution | MOPs | qfold {t1}T ms | qfold GOPS | % of peak | ORT {t1}T ms | "
          f"ORT/qfold {t1}T" + (f" | qfold {t2}T ms | qfold {t2}T speedup" if t2 else "") + " |")
        w("|---|---|---|---|---|---|---|" + ("---|---|" if t2 else ""))
        for row in conv:
            q1, o1 = row.get(f"qfold_{t1}"), row.get(f"ort_{t1}")
            gops = row["ops"] / (q1 * 1e6) if q1 else None
            cells = [row["label"], f"{row['ops'] / 1e6:.0f}", fmt_ms(q1),
                     f"{gops:.0f}" if gops else "—",
                     f"{100 * gops / pk_gops:.0f}%" if gops and pk_gops else "—",
                     fmt_ms(o1), fmt_ratio(o1, q1)]
            if t2:
                q2 = row.get(f"qfold_{t2}")
                cells += [fmt_ms(q2), fmt_ratio(q1, q2)]
            w("| " + " | ".join(cells) + " |")
        w("")
    w("## Summary")
    w("")
    w("Geometric means over the models of each group (only models where both engines ran; "
      "> 1 means qfold is faster, or for int8/fp32 that qfold's QDQ model beats its float one). "
      "Ratios of medians, and one of the fastest runs (\"min\").")
    w("")
    w(f"| group | models | ORT/qfold {t1}T | MNN/qfold {t1}T | ORT/qfold {t1}T, min"
      + (f" | ORT/qfold {t2}T | qfold {t2}T speedup" if t2 else "") + " | qfold int8/fp32 |")
    w("|---|---|---|---|---|" + ("---|---|" if t2 else "") + "---|")
    for g in groups:
        rs = [x for x in results if x["group"] == g]

        def gmean(pairs):
            v = [a / b for a, b in pairs if a and b]
            return (f"{float(np.exp(np.mean(np.log(v)))):.2f}× (n={len(v)})" if v else "—")
        cells = [gmean((med(r, "ort", t1), med(r, "qfold", t1)) for r in rs),
                 gmean((med(r, "mnn", t1), med(r, "qfold", t1)) for r in rs),
                 gmean((stat(r, "ort", t1, "min_ms"), stat(r, "qfold", t1, "min_ms"))
                       for r in rs)]
        if t2:
            cells += [gmean((med(r, "ort", t2), med(r, "qfold", t2)) for r in rs),
                      gmean((med(r, "qfold", t1), med(r, "qfold", t2)) for r in rs)]
        cells.append(gmean((med(by_label[r["float_of"]], "qfold", t1), med(r, "qfold", t1))
                           for r in rs if r.get("float_of") in by_label) if "QDQ" in g else "—")
        w(f"| {g} | {len(rs)} | " + " | ".join(cells) + " |")
    w("")
    w("## Latency (median ms)")
    w("")
    for g in groups:
        w(f"### {g}")
        w("")
        hdr = ["model", "runs (warm-up+timed)"]
        for eng in ("qfold", "ORT", "MNN"):
            hdr += [f"{eng} {t1}T"] + ([f"{eng} {t2}T"] if t2 else [])
        hdr += [f"ORT/qfold {t1}T", f"MNN/qfold {t1}T"]
        if t2:
            hdr += [f"ORT/qfold {t2}T", f"qfold {t2}T speedup"]
        if "QDQ" in g:
            hdr += ["qfold int8/fp32"]
        hdr += [f"min ms {t1}T qfold / ORT / MNN"]
        w("| " + " | ".join(hdr) + " |")
        w("|" + "---|" * len(hdr))
        for r in (x for x in results if x["group"] == g):
            row = [r["label"], f"{r.get('warmup', '?')}+{r.get('iterations', '?')}"]
            for eng in ("qfold", "ort", "mnn"):
                for t in [t1] + ([t2] if t2 else []):
                    row.append(engine_cell(r, eng, t, footnotes))
            q1 = med(r, "qfold", t1)
            row += [fmt_ratio(med(r, "ort", t1), q1), fmt_ratio(med(r, "mnn", t1), q1)]
            if t2:
                q2 = med(r, "qfold", t2)
                row += [fmt_ratio(med(r, "ort", t2), q2), fmt_ratio(q1, q2)]
            if "QDQ" in g:
                f = by_label.get(r.get("float_of"))
                row.append(fmt_ratio(med(f, "qfold", t1) if f else None, q1))
            row.append(" / ".join(fmt_ms(stat(r, eng, t1, "min_ms"))
                                  for eng in ("qfold", "ort", "mnn")))
            w("| " + " | ".join(row) + " |")
        w("")
    w("## Memory and model size")
    w("")
    w("| model | inputs | ONNX | .qfm | .mnn | qfold arena | peak RSS MiB qfold / "
      f"ORT / MNN ({t1}T) | cos qfold | cos MNN | MNN's conversion of QDQ |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        rss = []
        for eng in ("qfold", "ort", "mnn"):
            e = r["engines"].get(eng, {})
            e = e.get(t1, {}) if "error" not in e else {}
            rss.append(fmt_mib(e.get("vmhwm_bytes")))
        q = r["engines"].get("qfold", {})
        arena = q.get(t1, {}).get("arena_bytes") if "error" not in q else None
        cosq = f"{r['qfold_cos']:.6f}" if r.get("qfold_cos") is not None else "—"
        cosm = f"{r['mnn_cos']:.6f}" if r.get("mnn_cos") is not None else "—"
        i8s = r.get("mnn_quant") or "—"
        ins = "; ".join(f"{k} {v}" for k, v in r.get("inputs", {}).items())
        w(f"| {r['label']} | {ins} | {fmt_size(r['onnx_bytes'])} | {fmt_size(r.get('qfm_bytes'))} "
          f"| {fmt_size(r.get('mnn_bytes'))} | {fmt_size(arena)} | "
          f"{' / '.join(rss)} | {cosq} | {cosm} | {i8s} |")
    w("")
    if footnotes or meta["notes"]:
        w("## Notes")
        w("")
        for i, f in enumerate(footnotes, 1):
            w(f"{i}. {f.replace('|', '/')}")
        for n in meta["notes"]:
            w(f"- {n}")
        w("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("--qfold", default=os.path.join(REPO, "build", "cli", "qfold"),
                    help="the qfold binary (default: build/cli/qfold)")
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "BENCHMARKS.md"),
                    help="Markdown report to write (replaced)")
    ap.add_argument("--work", help="work directory (default: <qfold build dir>/bench)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: mobilenetv2_like and its QDQ variant, 1+3 runs")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=200,
                    help="timed runs (at most; fewer for slow models, see SECONDS_PER_SETTING)")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--no-mnn", action="store_true", help="skip MNN even if installed")
    ap.add_argument("--note", action="append", default=[],
                    help="a sentence for the report's notes (e.g. the state of the kernels); "
                         "repeatable. It is part of the recorded command, so reruns keep it")
    # Worker mode (internal): one engine on one model, prints one JSON line.
    ap.add_argument("--worker", choices=["ort", "mnn"], help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--feeds", help=argparse.SUPPRESS)
    ap.add_argument("--save-outputs", help=argparse.SUPPRESS)
    args = ap.parse_args()
    try:
        args.threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        ap.error("--threads takes comma-separated numbers")
    if args.worker:
        args.threads = args.threads[0]
        return run_worker(args)

    if args.quick:
        args.warmup, args.iterations = 1, 3
    args.qfold = os.path.abspath(args.qfold)
    if not os.access(args.qfold, os.X_OK):
        print(f"bench.py: {args.qfold} is not an executable (pass --qfold)", file=sys.stderr)
        return 2
    work = os.path.abspath(args.work or os.path.join(os.path.dirname(args.qfold), "..", "bench"))
    os.makedirs(work, exist_ok=True)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import logging
    logging.getLogger().setLevel(logging.ERROR)

    def log(msg):
        print(msg, flush=True)

    start = time.monotonic()
    notes = []
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "git": git_state(), "machine": machine_info(),
            "load_start": " ".join(f"{x:.1f}" for x in os.getloadavg()), "notes": notes}
    cmd = [os.path.relpath(sys.executable, REPO) if sys.executable.startswith(REPO)
           else sys.executable, os.path.relpath(os.path.abspath(__file__), REPO)]
    meta["command"] = " ".join(shlex.quote(c) for c in cmd + sys.argv[1:])
    import onnxruntime
    meta["ort_version"] = onnxruntime.__version__
    engines = ["qfold", "ort"]
    meta["mnn_version"] = None if args.no_mnn else mnn_available()
    if meta["mnn_version"]:
        engines.append("mnn")
    else:
        notes.append("MNN skipped: " + ("--no-mnn" if args.no_mnn else
                                        "the `MNN` Python package is not installed"))
    log(f"machine: {meta['machine']}")
    meta["peak"] = run_peak(work)
    log(f"peak: {meta['peak']}")
    meta["conv_kernels"] = bench_conv_kernels(args, work, log)
    models = prepare_models(args, work, notes)
    results = []
    for label, group, path, float_of in models:
        r = bench_model(args, label, path, work, engines, log)
        r["group"], r["float_of"] = group, float_of
        results.append(r)
    meta["load_end"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    qdq = [r for r in results if "QDQ" in r["group"] and "mnn" in r["engines"]]
    if qdq:
        conv_fail = [r["label"] for r in qdq if r["engines"]["mnn"].get("error", "").startswith(
            "converter")]
        run_fail = [r["label"] for r in qdq if r["label"] not in conv_fail and (
            "error" in r["engines"]["mnn"]
            or any("error" in v for v in r["engines"]["mnn"].values()))]
        ok = [r["label"] for r in qdq if r["label"] not in conv_fail + run_fail]
        text = (f"MNN on QDQ models: its ONNX converter aborted on {len(conv_fail)} of {len(qdq)}"
                + (f" ({', '.join(conv_fail)})" if conv_fail else "")
                + "; the same converter failure is reported upstream as alibaba/MNN#3922.")
        for label in run_fail + ok:
            r = next(x for x in qdq if x["label"] == label)
            text += (f" {label}: converted ({r.get('mnn_quant') or 'op mix unknown'}; .mnn "
                     f"{fmt_size(r.get('mnn_bytes'))}), then "
                     + ("failed to run." if label in run_fail else "ran."))
        text += (" MNN's own int8 path (mnnquant, offline calibration on its own format) is a "
                 "different quantization and is not measured here.")
        notes.append(text)
    notes.extend(args.note)
    raw = os.path.join(work, "results.json")
    with open(raw, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1, default=str)
    write_markdown(args.out, results, meta, args)
    log(f"wrote {args.out} (raw results: {raw}) in {time.monotonic() - start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
