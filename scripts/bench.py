#!/usr/bin/env python3
"""Benchmarks qfold against ONNX Runtime, OpenVINO and MNN, engines interleaved round by round in
one process, and writes docs/BENCHMARKS.md.

Usage:
  python scripts/bench.py [--qfold build/cli/qfold] [--out docs/BENCHMARKS.md] [--quick]
                          [--set synthetic,ppocr,light,weightonly,recurrent|all] [--models a,b] [--threads 1,2]
                          [--rounds R] [--round-seconds S] [--warmup W] [--work DIR]
                          [--no-openvino] [--no-mnn] [--no-qfold-bf16] [--no-conv] [--note TEXT]

Model sets (--set, default all):
  synthetic  the float models of models/ and the pc_u8s8 QDQ variant (scripts/quantize_models.py,
             built into WORK/qdq when missing) of mobilenetv2_like, resnet_like and
             transformer_encoder;
  ppocr      PP-OCR det/cls/rec, float and QDQ, from models/cache (scripts/fetch_real_models.py;
             skipped with a note when absent), fed a synthetic page of printed text;
  light      the ONNX model zoo's light models (ResNet-50, DenseNet-121, Inception v1/v2, ...)
             with seeded random weights, float and QDQ (scripts/make_light_models.py, cached in
             WORK/light), fed a synthetic ImageNet-normalized image.
  a16        the light models quantized with 16-bit activations (QUInt16, per-channel int8
             weights; ONNX Runtime runs them as float), built in WORK/light on first use.
  weightonly an LLM-sized int4 MLP (4096 -> 11008 -> Relu -> 4096, blocks of 32, zero points;
             56 MB of weights: more than the L3 cache) built in WORK/weightonly: as ONNX
             Runtime's MatMulNBits with accuracy_level 4 (A quantized to int8, what its
             weight-only quantizer's CPU exports ask for) at 1 row (a decoder step) and 32 rows
             (a prompt), and with accuracy_level 0 (exact float) at 1 row; and as blocked
             DequantizeLinear -> MatMul at 1 row, converted by qfold as it is (exact) and with
             --int8-activations (ONNX Runtime fuses that form into MatMulNBits with accuracy
             level 4 by default).
  recurrent  the recurrent and control-flow models of models/ (crnn_text, gru_kws,
             loop_decoder; also in synthetic, measured once when both sets are chosen) and
             models/streaming/vad_like.onnx as one streaming step: sr = 16000, its state bound
             (stateN -> state) so that each run continues the stream. qfold binds it in the
             session (SessionOptions::state_bindings); ONNX Runtime and OpenVINO get the
             previous run's stateN as the next run's state from Python, inside the timed call.
             Twice: `vad_like` keeps the If (chosen per run), `vad_like.sr16k` is converted with
             --const sr=16000 (the If folded; ONNX Runtime runs the same ONNX file). MNN's
             runner binds no state: it skips these.
--models a,b keeps the models whose label or base name is listed (resnet50 selects resnet50 and
resnet50.pc_u8s8). --quick: mobilenetv2_like and its QDQ variant, one single convolution, two
short rounds, no probes (step 1 below): a smoke test (ctest bench_quick, < 30 s on an idle
machine) that needs neither OpenVINO nor MNN.

How one model is measured:
  1. probe: each engine, in its own spawned child process, loads the model, runs it once (at the
     first thread count) and returns its first output (compared with ONNX Runtime's: cosine) and
     that run's time. A peer that crashes there (OpenVINO segfaults on some QDQ models) or
     raises becomes a table entry;
  2. measure: for each thread count T in turn, every engine that passed the probe loads and
     warms up in a spawned worker process of its own (engines never share a process: one's
     allocator, thread runtime or pinning could slow another's), then R rounds. In each round every
     engine runs K timed inferences in turn (after 1 untimed one to re-warm caches, for runs
     under REWARM_BELOW_MS), the order rotating from round to round; K is per engine, so that
     its turn takes about --round-seconds. On a shared machine the noise then falls on all
     engines alike. Reported: each engine's median over all its timed runs, and ratios
     other/qfold computed per round (the engine's median in that round over qfold's), then
     median'd over rounds.
The child processes keep a crash in any engine from ending the whole run.

Engines (time.perf_counter around one inference call from Python, inputs set and outputs copied
as part of it, for all alike):
  * qfold: the `qfold` Python module (build/python, next to the CLI's build dir), Session.run;
    without the module, `qfold bench` subprocesses, one per round (round medians only);
  * qfold bf16 (fp32 models only; --no-qfold-bf16 skips it): the same with precision="bf16"
    (channels-last float convolutions on bfloat16-rounded values, AMX-BF16 or AVX-512 BF16,
    fp32 sums), an engine of its own (worker, probe, rounds) because OpenVINO runs fp32 models
    in bf16 on CPUs that have it. Ratios X/qfold-bf16 are computed per round like X/qfold, and
    its first output is compared with qfold fp32's (cosine, max abs error). Skipped with a note
    in the report's header where qfold's kernels line with precision bf16 lists no
    conv_nhwc_bf16 (no AVX-512 BF16; Intel without AMX-BF16, where bf16 would be slower),
    as bf16 mode then runs exactly the fp32 kernels;
  * ONNX Runtime: ORT_ENABLE_ALL, intra_op_num_threads=T, inter_op_num_threads=1, sess.run;
  * OpenVINO (when `openvino` imports): core.compile_model(onnx, "CPU", PERFORMANCE_HINT=LATENCY,
    INFERENCE_NUM_THREADS=T, NUM_STREAMS=1), InferRequest.infer. QDQ models run int8; the
    inference precision it chose and how many convolutions run int8 are recorded. Only the
    runtime is used, never openvino.convert_model/ovc (those send telemetry);
  * MNN (when `MNN` imports): the ONNX model converted by MNN's compiled converter
    (_tools.mnnconvert, not the `mnnconvert` entry point, which pip-installs a telemetry SDK),
    Interpreter/Session API (numThread=T, precision normal), runSession.

Also compiles (g++ -O2 -mavx512f -mavx512vnni -mfma) and runs a microbenchmark of the machine's
single-thread peak (independent vpdpbusd and vfmadd231ps on registers), and measures single int8
convolutions (QDQ Conv) the same interleaved way.
"""

import argparse
import datetime
import json
import multiprocessing
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import zlib

import numpy as np

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SCRIPTS = os.path.join(REPO, "scripts")
QDQ_SOURCES = ("mobilenetv2_like", "resnet_like", "transformer_encoder")
QDQ_VARIANT = "pc_u8s8"
QUICK_MODELS = ("mobilenetv2_like",)
MODEL_SETS = ("synthetic", "ppocr", "light", "a16", "weightonly", "recurrent")
RECURRENT_MODELS = ("crnn_text", "gru_kws", "loop_decoder")
PPOCR_MODELS = ("ppocr_mobile_v2_cls", "ppocrv4_det", "ppocrv4_rec")
ENGINES = ("qfold", "qfold_bf16", "ort", "openvino", "mnn")
# The engines qfold is compared with (ratios peer/qfold); "qfold_bf16" is qfold itself with
# precision="bf16", run on the fp32 models only.
PEERS = ("ort", "openvino", "mnn")
ENGINE_TITLES = {"qfold": "qfold", "qfold_bf16": "qfold bf16", "ort": "ORT",
                 "openvino": "OpenVINO", "mnn": "MNN"}
RATIO_TITLES = {"ort": "ORT/qfold", "openvino": "OV/qfold", "mnn": "MNN/qfold"}
BF16_RATIO_TITLES = {"ort": "ORT/qfold-bf16", "openvino": "OV/qfold-bf16",
                     "mnn": "MNN/qfold-bf16"}
MAX_ITERATIONS_PER_TURN = 50
# An engine's turn starts with an untimed run when its runs are shorter than this (first run,
# probe): for longer ones the cache state left by the previous engine hardly matters.
REWARM_BELOW_MS = 100
# Pause between two engines' turns: ORT's and OpenVINO's worker threads spin for a while after a
# run; on 2 cores they would otherwise steal time from the next engine.
TURN_PAUSE_S = 0.05

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


PEAK_AMX_SOURCE = r"""
// Single-thread peak of AMX-INT8 (tdpbusd: 16x16 int32 += 16x64 u8 . 64x16 s8 per tile op),
// best of 30 short runs: 4 independent accumulator tiles, 2 A and 2 B tiles (all 8 tiles),
// the operands loaded once. Linux grants the tile state only on request (arch_prctl).
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

struct TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 1000000;
  if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) != 0) {
    std::fprintf(stderr, "the OS did not grant the AMX tile state\n");
    return 1;
  }
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
  alignas(64) static uint8_t a[16 * 64], b[16 * 64];
  alignas(64) static int32_t c[16 * 16];
  for (int i = 0; i < 16 * 64; ++i) a[i] = uint8_t(i * 7 + argc), b[i] = uint8_t(i * 3);
  double best = 1e30;
  int64_t sink = 0;
  for (int rep = 0; rep < 30; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a, 64);
    _tile_loadd(6, b, 64);
    _tile_loadd(7, b, 64);
    for (long i = 0; i < n; ++i) {
      _tile_dpbusd(0, 4, 6);
      _tile_dpbusd(1, 4, 7);
      _tile_dpbusd(2, 5, 6);
      _tile_dpbusd(3, 5, 7);
    }
    _tile_stored(0, c, 64);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                              .count());
    for (int i = 0; i < 256; ++i) sink += c[i];
  }
  _tile_release();
  // tdpbusd: 16 x 16 x 64 multiply-adds = 32768 ops.
  std::printf("{\"int8_amx_gops\": %.1f, \"sink\": %lld}\n", 4.0 * double(n) * 32768 / best / 1e9,
              (long long)sink);
  return 0;
}
"""

# Engines: each opens one model for T threads and runs it on fixed feeds. ---------------------
# They run inside the child processes below; spec is a plain dict (picklable for spawn):
# {"engine", "onnx", "qfm", "mnn", "feeds" (npz path), "threads", "qfold_module_dir", "qfold_cli"}

class Runner:
    """One engine with one model loaded. run() is one inference on the fixed feeds."""
    info = {}

    def run(self):
        raise NotImplementedError

    def first_output(self):
        raise NotImplementedError

    def reset(self):
        """Starts a new stream (models with bound state; a no-op for the others)."""

    def timed_runs(self, k, rewarm=True):
        """k timed inferences, after one untimed one when rewarm (it re-warms the caches the
        other engines' turns evicted: it matters for short runs only); returns seconds per run."""
        if rewarm:
            self.run()
        times = []
        for _ in range(k):
            t0 = time.perf_counter()
            self.run()
            times.append(time.perf_counter() - t0)
        return times


def qfold_precision(spec):
    """The qfold session precision of an engine: "bf16" for qfold_bf16, else "fp32"."""
    return "bf16" if spec["engine"] == "qfold_bf16" else "fp32"


class QfoldModuleRunner(Runner):
    def __init__(self, spec, feeds):
        sys.path.insert(0, spec["qfold_module_dir"])
        import qfold
        bindings = spec.get("state_bindings") or {}
        precision = qfold_precision(spec)
        # The fp32 engine passes no precision: the benchmark keeps working with modules that
        # predate the keyword.
        self.sess = qfold.Session(spec["qfm"], num_threads=spec["threads"],
                                  state_bindings=bindings or None,
                                  **({"precision": precision} if precision != "fp32" else {}))
        # The session feeds the bound inputs itself; inputs bound by --const are gone.
        names = {i["name"] for i in self.sess.inputs}
        self.feeds = {k: v for k, v in feeds.items() if k in names and k not in bindings.values()}
        self.spec_bound = bool(bindings)
        self.info = {"api": "Python module", "arena_bytes": self.sess.arena_bytes,
                     "precision": precision}
        kernels = getattr(self.sess, "kernels", None)  # the session's kernels line, if exposed
        if isinstance(kernels, str):
            self.info["kernels"] = kernels
        self.out_name = self.sess.outputs[0]["name"]

    def run(self):
        self.out = self.sess.run(self.feeds)

    def reset(self):
        if self.spec_bound:
            self.sess.reset_state()

    def first_output(self):
        self.run()
        return self.out[self.out_name]


class QfoldCliRunner(Runner):
    """Without the Python module: one `qfold bench` process per turn, which reports only the
    median of its runs (so a turn contributes one time)."""

    def __init__(self, spec, feeds):
        self.spec = spec
        self.npys = []
        d = os.path.dirname(spec["feeds"])
        bindings = spec.get("state_bindings") or {}
        for i, (name, arr) in enumerate(feeds.items()):
            if name in bindings.values() or name in spec.get("const_inputs", ()):
                continue
            p = os.path.join(d, f"qfold_input{i}.npy")
            np.save(p, arr)
            self.npys += ["--input", f"{name}={p}"]
        for out, inp in bindings.items():
            self.npys += ["--bind-state", f"{out}={inp}"]
        self.precision = qfold_precision(spec)
        if self.precision != "fp32":
            self.npys += ["--precision", self.precision]
        self.info = {"api": "qfold bench CLI (round medians)", "precision": self.precision}

    def _bench(self, warmup, iterations):
        rc, out, err = sh([self.spec["qfold_cli"], "bench", self.spec["qfm"], "--json",
                           "--threads", str(self.spec["threads"]), "--warmup", str(warmup),
                           "--iterations", str(iterations)] + self.npys, 3600)
        if rc != 0:
            raise RuntimeError("qfold bench " + last_error_line(rc, out, err))
        return json.loads(out)

    def run(self):
        self._bench(0, 1)

    def timed_runs(self, k, rewarm=True):
        r = self._bench(1 if rewarm else 0, k)
        self.info["arena_bytes"] = r.get("arena_bytes")
        if r.get("kernels"):
            self.info["kernels"] = r["kernels"]
        return [r["median_ms"] / 1e3]

    def first_output(self):
        out_dir = os.path.join(os.path.dirname(self.spec["feeds"]), "qfold_out")
        rc, out, err = sh([self.spec["qfold_cli"], "run", self.spec["qfm"], "--output-dir",
                           out_dir] + self.npys, 3600)
        names = [ln.split(" -> ")[0] for ln in out.splitlines() if " -> " in ln]
        if rc != 0 or not names:
            raise RuntimeError("qfold run " + last_error_line(rc, out, err))
        sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
        from qfold_tools import safe_name
        return np.load(os.path.join(out_dir, safe_name(names[0]) + ".npy"))


class OrtRunner(Runner):
    def __init__(self, spec, feeds):
        import onnxruntime as ort
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = spec["threads"]
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.log_severity_level = 3
        self.sess = ort.InferenceSession(spec["onnx"], opts, providers=["CPUExecutionProvider"])
        self.names = [o.name for o in self.sess.get_outputs()]
        self.feeds = dict(feeds)
        self.initial = dict(feeds)
        # (index of the output, input it feeds) per bound state
        self.bound = [(self.names.index(o), i)
                      for o, i in (spec.get("state_bindings") or {}).items()]
        self.info = {"version": ort.__version__}

    def run(self):
        self.out = self.sess.run(self.names, self.feeds)
        for k, name in self.bound:
            self.feeds[name] = self.out[k]

    def reset(self):
        self.feeds = dict(self.initial)

    def first_output(self):
        self.run()
        return self.out[0]


class OpenVinoRunner(Runner):
    def __init__(self, spec, feeds):
        import openvino as ov
        core = ov.Core()
        config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": spec["threads"],
                  "NUM_STREAMS": 1}
        self.compiled = core.compile_model(spec["onnx"], "CPU", config)
        self.request = self.compiled.create_infer_request()
        self.feeds = dict(feeds)
        self.initial = dict(feeds)
        self.bound = [(self.compiled.output(o), i)
                      for o, i in (spec.get("state_bindings") or {}).items()]
        self.info = {"version": ov.__version__.split("-")[0],
                     "precision": self.compiled.get_property(
                         "INFERENCE_PRECISION_HINT").get_type_name(),
                     "int8_convs": self._int8_convs()}

    def _int8_convs(self):
        """'i of n': convolutions and fully connected layers of the compiled graph that the CPU
        plugin runs with int8 inputs (its runtime model's per-node rt_info)."""
        try:
            n = i8 = 0
            for op in self.compiled.get_runtime_model().get_ordered_ops():
                rt = op.get_rt_info()
                if rt["layerType"].astype(str) not in ("Convolution", "FullyConnected"):
                    continue
                n += 1
                i8 += rt["runtimePrecision"].astype(str) in ("i8", "u8")
            return f"{i8} of {n}"
        except Exception:  # noqa: BLE001 -- informational only
            return None

    def run(self):
        self.out = self.request.infer(self.feeds)
        for port, name in self.bound:
            self.feeds[name] = np.array(self.out[port])

    def reset(self):
        self.feeds = dict(self.initial)

    def first_output(self):
        self.run()
        return np.array(self.request.get_output_tensor(0).data)


class MnnRunner(Runner):
    def __init__(self, spec, feeds):
        import MNN
        if spec.get("state_bindings"):
            raise RuntimeError("streaming state is not bound in the MNN runner")
        self.MNN = MNN
        self.interp = MNN.Interpreter(spec["mnn"])
        self.sess = self.interp.createSession({"backend": "CPU", "numThread": spec["threads"],
                                               "precision": "normal"})
        inputs = self.interp.getSessionInputAll(self.sess)
        missing = set(feeds) - set(inputs)
        if missing:
            raise RuntimeError(f"MNN model lacks inputs {sorted(missing)}; has {sorted(inputs)}")
        resized = False
        for name, arr in feeds.items():
            if tuple(inputs[name].getShape()) != arr.shape:
                self.interp.resizeTensor(inputs[name], arr.shape)
                resized = True
        if resized:
            self.interp.resizeSession(self.sess)
        self.hosts = []
        for name, arr in feeds.items():
            is_float = np.issubdtype(arr.dtype, np.floating)
            data = np.ascontiguousarray(arr, np.float32 if is_float else np.int32)
            # Keep `data` alive with the tensor: MNN.Tensor may point into the numpy buffer.
            self.hosts.append((self.interp.getSessionInput(self.sess, name), data, MNN.Tensor(
                data.shape, MNN.Halide_Type_Float if is_float else MNN.Halide_Type_Int, data,
                MNN.Tensor_DimensionType_Caffe)))
        self.info = {"version": MNN.version()}

    def run(self):
        # A run may reuse the input tensor's memory for intermediates, so the inputs are copied
        # in before each run (inside the timed call: other engines bind their inputs there too).
        for dst, _, host in self.hosts:
            dst.copyFrom(host)
        # runSession returns an error code instead of raising: a failed run must not be timed
        # as a fast one.
        code = self.interp.runSession(self.sess)
        if code != 0:
            raise RuntimeError(f"MNN runSession returned error code {code}")

    def first_output(self):
        self.run()
        t = next(iter(self.interp.getSessionOutputAll(self.sess).values()))
        shape = tuple(t.getShape())
        host = self.MNN.Tensor(shape, self.MNN.Halide_Type_Float, np.zeros(shape, np.float32),
                               self.MNN.Tensor_DimensionType_Caffe)
        t.copyToHostTensor(host)
        return np.array(host.getData(), dtype=np.float32).reshape(shape)


def open_runner(spec, feeds):
    if spec["engine"] in ("qfold", "qfold_bf16"):
        if spec.get("qfold_module_dir"):
            return QfoldModuleRunner(spec, feeds)
        return QfoldCliRunner(spec, feeds)
    return {"ort": OrtRunner, "openvino": OpenVinoRunner, "mnn": MnnRunner}[spec["engine"]](
        spec, feeds)


def load_feeds(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


# Child processes ---------------------------------------------------------------------------

def quiet_stdout():
    """Engines print banners on stdout (MNN: "The device supports: ..."); results travel through
    a pipe, so the children's stdout can go."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def probe_child(spec, conn):
    """Loads one engine, runs once; sends {"output", "first_run_ms", "info"} or {"error"}."""
    quiet_stdout()
    try:
        feeds = load_feeds(spec["feeds"])
        t0 = time.perf_counter()
        runner = open_runner(spec, feeds)
        load_ms = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        out = runner.first_output()
        conn.send({"output": np.asarray(out), "load_ms": load_ms,
                   "first_run_ms": (time.perf_counter() - t0) * 1e3, "info": runner.info})
    except Exception as e:  # noqa: BLE001 -- reported as the engine's table entry
        conn.send({"error": f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"
                   if str(e).strip() else type(e).__name__})
    conn.close()


def engine_worker(spec, warmup, conn):
    """One engine in a process of its own for the interleaved rounds (measure_interleaved):
    loads, warms up, sends {"ready"} (or {"error"}), then answers the parent's commands on the
    duplex pipe: ("time", K, rewarm) -> {"times": [seconds per run]}; ("finish", want_output)
    -> {"output", "info"} after a reset (the same first step for every engine, however many it
    ran), and exits. Between commands it blocks on the pipe, so its own threads go idle as they
    would between a user's calls; engines never share a process, whose allocator, thread
    runtime or pinning could slow the others (OpenVINO's 2-thread model, loaded and idle, made
    qfold's 2-thread runs 1.1-2x slower in one process)."""
    quiet_stdout()
    try:
        runner = open_runner(spec, load_feeds(spec["feeds"]))
        for _ in range(warmup):
            runner.run()
        conn.send({"ready": True})
        while True:
            cmd = conn.recv()
            if cmd[0] == "time":
                conn.send({"times": runner.timed_runs(cmd[1], cmd[2])})
            elif cmd[0] == "finish":
                runner.reset()
                conn.send({"output": np.asarray(runner.first_output()) if cmd[1] else None,
                           "info": runner.info})
                break
    except EOFError:
        pass  # the parent went away
    except Exception as e:  # noqa: BLE001 -- reported as the engine's table entry
        conn.send({"error": f"{type(e).__name__}: {str(e)[:200]}"})
    conn.close()


def exit_description(code):
    """None for a normal exit, else what ended the process: the signal that killed it (a
    segfault in an engine) or its exit code."""
    if code is not None and code < 0:
        try:
            return f"crashes ({signal.Signals(-code).name})"
        except ValueError:
            return f"crashes (signal {-code})"
    return None if code == 0 else f"child exited with code {code}"


def receive(conn, proc, deadline):
    """The worker's next message, or (None, why) when it died or the deadline passed."""
    while True:
        if conn.poll(0.2):
            try:
                return conn.recv(), None
            except EOFError:
                break
        if not proc.is_alive():
            break
        if time.monotonic() > deadline:
            proc.kill()
            proc.join()
            return None, "timed out"
    proc.join(10)
    return None, exit_description(proc.exitcode) or "exited with code 0"


def measure_interleaved(specs_by_threads, plan, timeout):
    """Interleaved timing of several engines on one model (see the module docstring), for each
    thread count in turn, each engine in its own worker process (engine_worker) that the rounds
    drive one turn at a time. specs_by_threads: [(T, {engine: spec})]; plan: {"warmup",
    "rounds", "iterations": {engine: K}, "rewarm": {engine: bool}}. Returns per thread count
    {"threads", "times": {engine: [[seconds per run] per round]}, "orders", "outputs", "info",
    "engine_errors"}: an engine that fails to load, run or crashes is its own entry."""
    ctx = multiprocessing.get_context("spawn")
    deadline = time.monotonic() + timeout
    results = []
    for threads, specs in specs_by_threads:
        workers, errors = {}, {}
        # Loaded and warmed one at a time, so no load overlaps another engine's work.
        for e, spec in specs.items():
            conn, child = ctx.Pipe()
            proc = ctx.Process(target=engine_worker, args=(spec, plan["warmup"], child))
            proc.start()
            child.close()
            msg, why = receive(conn, proc, deadline)
            if msg is None or "error" in msg:
                errors[e] = why or msg["error"]
                if proc.is_alive():
                    proc.kill()
                proc.join()
                continue
            workers[e] = (proc, conn)
        engines = list(workers)
        times, orders = {e: [] for e in engines}, []
        for rnd in range(plan["rounds"]):
            order = engines[rnd % len(engines):] + engines[:rnd % len(engines)]
            orders.append(order)
            for e in order:
                if e not in workers:
                    continue
                time.sleep(TURN_PAUSE_S)
                proc, conn = workers[e]
                conn.send(("time", plan["iterations"][e], plan["rewarm"][e]))
                msg, why = receive(conn, proc, deadline)
                if msg is None or "error" in msg:
                    errors[e] = why or msg["error"]
                    del workers[e]
                    times.pop(e, None)
                    continue
                times[e].append(msg["times"])
        outputs, info = {}, {}
        for e, (proc, conn) in workers.items():
            conn.send(("finish", threads == specs_by_threads[0][0]))
            msg, why = receive(conn, proc, deadline)
            if msg is not None and "error" not in msg:
                info[e] = msg["info"]
                if msg["output"] is not None:
                    outputs[e] = msg["output"]
            proc.join(30)
            if proc.is_alive():
                proc.kill()
                proc.join()
        results.append({"threads": threads, "times": times, "orders": orders,
                        "outputs": outputs, "info": info, "engine_errors": errors})
    return results


def run_in_child(target, args, timeout):
    """Runs target(*args, conn) in a spawned process. Returns (messages it sent, error): error is
    None when it exited normally, else names the signal that killed it or the timeout (a
    segfault in an engine must not end the benchmark; messages sent before it are kept)."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    p = ctx.Process(target=target, args=args + (child,))
    p.start()
    child.close()  # so that the child's exit shows as EOF on our end
    messages, deadline = [], time.monotonic() + timeout
    while True:
        if parent.poll(1.0):
            try:
                messages.append(parent.recv())
                continue
            except EOFError:
                break  # the child closed its end: it exited or died
        if time.monotonic() > deadline:
            p.kill()
            p.join()
            return messages, f"timed out after {timeout:.0f}s"
    p.join(60)
    if p.is_alive():
        p.kill()
        p.join()
    return messages, exit_description(p.exitcode)


# Driver helpers ------------------------------------------------------------------------------

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


def load_average():
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


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
            "avx512_bf16": "avx512_bf16" in flags, "amx": "amx_tile" in flags,
            "amx_bf16": "amx_bf16" in flags,
            "kernel": platform.release(), "python": platform.python_version()}


# Without AVX-512 VNNI the exact int8 path is AVX2: u8 and s8 widened to 16 bits, vpmaddwd
# (16 multiply-adds into 8 int32 pairs) plus vpaddd into the accumulator, the pair qfold's AVX2
# kernels issue per 4 channels; vpmaddubsw is not used (it saturates). FMA on ymm.
PEAK_AVX2_SOURCE = r"""
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
  const int seed = argc;
  double best_int = 1e30, best_fma = 1e30;
  float fsink = 0;
  for (int rep = 0; rep < 30; ++rep) {
    best_int = std::min(best_int, Seconds([&] {
      // The kernels' instruction pair written out: the compiler would merge identical
      // vpmaddwd of intrinsics into one (and spill the accumulators), measuring vpaddd.
      for (long i = 0; i < n; ++i)
        asm volatile(
            "vpmaddwd %%ymm12, %%ymm15, %%ymm0\n vpmaddwd %%ymm13, %%ymm15, %%ymm1\n"
            "vpmaddwd %%ymm14, %%ymm15, %%ymm2\n vpmaddwd %%ymm12, %%ymm14, %%ymm3\n"
            "vpmaddwd %%ymm13, %%ymm14, %%ymm4\n vpmaddwd %%ymm12, %%ymm13, %%ymm5\n"
            "vpaddd %%ymm0, %%ymm6, %%ymm6\n vpaddd %%ymm1, %%ymm7, %%ymm7\n"
            "vpaddd %%ymm2, %%ymm8, %%ymm8\n vpaddd %%ymm3, %%ymm9, %%ymm9\n"
            "vpaddd %%ymm4, %%ymm10, %%ymm10\n vpaddd %%ymm5, %%ymm11, %%ymm11\n" ::
                : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                  "xmm9", "xmm10", "xmm11");
    }));
    best_fma = std::min(best_fma, Seconds([&] {
      __m256 x = _mm256_set1_ps(1.0f + 1e-7f * seed), y = _mm256_set1_ps(0.999999f);
      __m256 a[12];
      for (int k = 0; k < 12; ++k) a[k] = _mm256_set1_ps(float(seed + k));
      for (long i = 0; i < n; ++i) {
        asm volatile("" : "+x"(x), "+x"(y));
#pragma GCC unroll 12
        for (int k = 0; k < 12; ++k) a[k] = _mm256_fmadd_ps(x, y, a[k]);
      }
      __m256 s = a[0];
      for (int k = 1; k < 12; ++k) s = _mm256_add_ps(s, a[k]);
      alignas(32) float v[8];
      _mm256_store_ps(v, s);
      for (int k = 0; k < 8; ++k) fsink += v[k];
    }));
  }
  // vpmaddwd ymm: 16 multiply-adds = 32 ops (6 per loop step); vfmadd231ps ymm: 8 FMAs =
  // 16 flops (12 per loop step).
  std::printf("{\"int8_avx2_gops\": %.1f, \"fp32_fma_gflops\": %.1f, \"sink\": %d}\n",
              6.0 * double(n) * 32 / best_int / 1e9, 12.0 * double(n) * 16 / best_fma / 1e9,
              int(fsink != 0));
  return 0;
}
"""


def peak_int8_gops(pk):
    """The measured int8 peak (AMX, else VNNI, else the AVX2 exact path), or None."""
    if "error" in pk:
        return None
    return pk.get("int8_amx_gops") or pk.get("int8_vnni_gops") or pk.get("int8_avx2_gops")


def run_peak(work):
    """Compiles and runs the peak microbenchmark (AVX-512 VNNI, else AVX2); returns a dict or
    {"error": ...}."""
    vnni = machine_info()["avx512_vnni"]
    src = os.path.join(work, "peak.cc")
    exe = os.path.join(work, "peak")
    with open(src, "w") as f:
        f.write(PEAK_SOURCE if vnni else PEAK_AVX2_SOURCE)
    cxx = shutil.which("g++")
    if not cxx:
        return {"error": "g++ not found"}
    flags = ["-mavx512f", "-mavx512vnni", "-mfma"] if vnni else ["-mavx2", "-mfma"]
    rc, out, err = sh([cxx, "-O2"] + flags + ["-o", exe, src], 300)
    if rc != 0:
        return {"error": "compile failed: " + last_error_line(rc, out, err)}
    rc, out, err = sh([exe, "1000000"], 120)
    if rc != 0:
        return {"error": "run failed: " + last_error_line(rc, out, err)}
    peak = json.loads(out)
    if vnni and machine_info()["amx"]:
        # qfold's channels-last int8 convolutions use AMX here: their share of peak is of this.
        amx_src, amx_exe = os.path.join(work, "peak_amx.cc"), os.path.join(work, "peak_amx")
        with open(amx_src, "w") as f:
            f.write(PEAK_AMX_SOURCE)
        rc, out, err = sh([cxx, "-O2", "-mamx-tile", "-mamx-int8", "-o", amx_exe, amx_src], 300)
        if rc == 0:
            rc, out, err = sh([amx_exe, "200000"], 120)
        if rc == 0:
            peak["int8_amx_gops"] = json.loads(out)["int8_amx_gops"]
        else:
            peak["amx_error"] = last_error_line(rc, out, err)
    return peak


def git_state():
    rc, head, _ = sh(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], 30)
    rc2, dirty, _ = sh(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"], 30)
    if rc != 0:
        return "unknown"
    return head.strip() + (" + uncommitted changes" if rc2 == 0 and dirty.strip() else "")


def cosine(a, b):
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    if a.shape != b.shape:
        return None
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(a @ b / (na * nb))


def probe_python_module(code, timeout=120):
    """Output of `python -c code` (last line), or None if it fails: imports are tried in a child
    so that a broken install cannot take the benchmark down."""
    rc, out, _ = sh([sys.executable, "-c", code], timeout)
    return out.strip().splitlines()[-1] if rc == 0 and out.strip() else None


def qfold_module(qfold_cli):
    """(directory, version) of the `qfold` Python module in python/ of the CLI's build directory
    when this interpreter imports it, else (None, None)."""
    d = os.path.join(os.path.dirname(os.path.dirname(qfold_cli)), "python")
    code = f"import sys; sys.path.insert(0, {d!r}); import qfold; print(qfold.__version__)"
    version = probe_python_module(code) if os.path.isdir(d) else None
    return (d, version) if version else (None, None)


def qfold_bf16_kernels(qfold_cli, work):
    """The kernels line of a qfold session with precision bf16 (`qfold bench --precision bf16
    --json` on a one-convolution float model; the line depends on the CPU, not the model), or
    None when that fails. It lists conv_nhwc_bf16 only where bf16 mode changes anything."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    d = os.path.join(work, "bf16_check")
    os.makedirs(d, exist_ok=True)
    onnx_path, qfm = os.path.join(d, "conv.onnx"), os.path.join(d, "conv.qfm")
    w = np.random.default_rng(0).standard_normal((16, 16, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
        "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 16, 16])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, onnx_path)
    rc, out, err = sh([qfold_cli, "convert", onnx_path, "-o", qfm], 300)
    if rc == 0:
        rc, out, err = sh([qfold_cli, "bench", qfm, "--precision", "bf16", "--json",
                           "--warmup", "0", "--iterations", "1"], 300)
    if rc != 0:
        return None
    try:
        return json.loads(out).get("kernels")
    except ValueError:
        return None


def detect_qfold_bf16(args, work, machine):
    """None when the qfold bf16 engine runs, else why it is skipped: --no-qfold-bf16, or a CPU
    without AVX-512 BF16, where precision="bf16" changes nothing (qfold's kernels line lacks
    conv_nhwc_bf16; /proc/cpuinfo's avx512_bf16 flag when that line is unavailable)."""
    if args.no_qfold_bf16:
        return "--no-qfold-bf16"
    kernels = qfold_bf16_kernels(args.qfold, work)
    if kernels is not None:
        if "conv_nhwc_bf16" not in kernels:
            return ("qfold's kernels with precision bf16 list no conv_nhwc_bf16 on this CPU (no "
                    "AVX-512 BF16, or an Intel CPU without AMX-BF16, where vdpbf16ps runs at half "
                    "the FMA rate), so bf16 mode would run exactly the fp32 kernels")
        return None
    if not machine["avx512_bf16"]:
        return ("this CPU has no AVX-512 BF16 (no avx512_bf16 flag in /proc/cpuinfo), so bf16 "
                "mode would run exactly the fp32 kernels")
    return None


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


# Models ------------------------------------------------------------------------------------

class Model:
    """One benchmark model: label, group, ONNX path, precision, float counterpart label, and
    an optional feeds builder (default: fixed-seed standard normal inputs)."""

    def __init__(self, label, group, path, precision, float_of=None, feeds=None,
                 state_bindings=None, convert_args=()):
        self.label, self.group, self.path = label, group, path
        self.precision, self.float_of, self.feeds = precision, float_of, feeds
        # {output: input}: one run is one streaming step; extra `qfold convert` arguments
        self.state_bindings, self.convert_args = state_bindings or {}, list(convert_args)


def synthetic_models(args, work):
    import quantize_models
    names = QUICK_MODELS if args.quick else sorted(
        os.path.splitext(f)[0] for f in os.listdir(os.path.join(REPO, "models"))
        if f.endswith(".onnx"))
    models = [Model(n, "synthetic", os.path.join(REPO, "models", n + ".onnx"), "fp32")
              for n in names]
    qdq_dir = os.path.join(work, "qdq")
    os.makedirs(qdq_dir, exist_ok=True)
    variant = next(v for v in quantize_models.VARIANTS if v.name == QDQ_VARIANT)
    for n in (QUICK_MODELS if args.quick else QDQ_SOURCES):
        if not selected(args, f"{n}.{QDQ_VARIANT}"):
            continue
        dst = os.path.join(qdq_dir, f"{n}.{QDQ_VARIANT}.onnx")
        if not os.path.exists(dst):
            # The same calls and seeds as scripts/quantize_models.py, for one variant only.
            pre = os.path.join(qdq_dir, f"{n}.pre.onnx")
            quantize_models.preprocess(os.path.join(REPO, "models", n + ".onnx"), pre)
            quantize_models.quantize(pre, dst, variant, seed=zlib.crc32(f"calib:{n}".encode()))
            os.remove(pre)
        models.append(Model(f"{n}.{QDQ_VARIANT}", "synthetic", dst, "int8 QDQ", n))
    return models


def text_page_feeds(path, label):
    """The model's input drawn as printed text rather than noise: dark character-like bars
    (with strokes across some) in lines on a light, slightly noisy page, normalized as PP-OCR
    normalizes (the detector: ImageNet mean and std; the recognizer and the direction
    classifier, 48 pixels high: (x / 255 - 0.5) / 0.5). On noise the detector's probability map
    is near 0 everywhere (largest value 6e-5), so agreement between engines would weigh only the
    last bits of near-zero values; on a page it weighs the text it finds."""
    feeds = default_feeds(path, label)
    rng = np.random.default_rng(zlib.crc32(f"page:{label}".encode()))
    for name, x in feeds.items():
        if x.ndim != 4 or x.shape[1] != 3 or x.dtype != np.float32:
            continue
        n, _, h, w = x.shape
        line_h = h if h <= 64 else 38
        img = np.full((n, h, w, 3), 235.0, np.float32)
        for b in range(n):
            for y0 in range(max(2, line_h // 6), h - line_h // 2, line_h):
                col = 6 + int(rng.integers(0, 10))
                while col < w - 10:
                    cw, ch = int(rng.integers(3, 9)), int(rng.integers(line_h // 3, line_h * 3 // 5))
                    ink = float(rng.integers(10, 60))
                    img[b, y0:y0 + ch, col:col + cw] = ink
                    if rng.random() < 0.5:
                        mid = y0 + ch // 2
                        img[b, mid:mid + 3, col:col + int(rng.integers(6, 14))] = ink
                    col += cw + int(rng.integers(2, 12))
        img += rng.normal(0.0, 4.0, img.shape).astype(np.float32)
        if h > 64:
            mean = np.array([0.485, 0.456, 0.406], np.float32)
            std = np.array([0.229, 0.224, 0.225], np.float32)
            img = (img / 255.0 - mean) / std
        else:
            img = (img / 255.0 - 0.5) / 0.5
        feeds[name] = np.ascontiguousarray(img.transpose(0, 3, 1, 2), dtype=np.float32)
    return feeds


def ppocr_models(notes):
    cache = os.path.join(REPO, "models", "cache")
    have = [n for n in PPOCR_MODELS if os.path.exists(os.path.join(cache, "float", n + ".onnx"))]
    if len(have) < len(PPOCR_MODELS):
        notes.append("PP-OCR models missing from models/cache (run scripts/fetch_real_models.py): "
                     + ", ".join(n for n in PPOCR_MODELS if n not in have))
    models = []
    for n in have:
        path = os.path.join(cache, "float", n + ".onnx")
        models.append(Model(n, "PP-OCR", path, "fp32", None,
                            lambda path=path, n=n: text_page_feeds(path, n)))
    for n in have:
        q = os.path.join(cache, "qdq", f"{n}.{QDQ_VARIANT}.onnx")
        if os.path.exists(q):
            models.append(Model(f"{n}.{QDQ_VARIANT}", "PP-OCR", q, "int8 QDQ", n,
                                lambda q=q, n=n: text_page_feeds(q, n)))
    return models


def light_models(args, work, notes, log):
    import make_light_models as light
    names = [n for n in light.available_models()
             if not args.models or n in args.models or f"{n}.{QDQ_VARIANT}" in args.models]
    out_dir = os.path.join(work, "light")
    manifest = light.make_light_models(out_dir, names, log=log)
    for n, why in sorted(manifest["failed"].items()):
        if n in names:
            notes.append(f"light model {n} skipped: {why}")
    models = []
    for precision, key, suffix in (("fp32", "float", ""), ("int8 QDQ", "qdq", "." + QDQ_VARIANT)):
        for n in names:
            e = manifest["models"].get(n)
            if e:
                # A synthetic image (held out from the calibration set) rather than noise: the
                # QDQ model's activation ranges were calibrated on such images.
                feeds = (lambda e=e, n=n: light.sample_input(
                    e, zlib.crc32(f"bench:{n}".encode())))
                models.append(Model(n + suffix, "light", os.path.join(out_dir, e[key]),
                                    precision, n if suffix else None, feeds))
    return models


A16_VARIANT = "pc_u16s8"


def a16_models(args, work, notes, log):
    """The light models quantized with 16-bit activations (quantize_static QUInt16, per-channel
    int8 weights; the same calibration images as their u8 variant), built on first use."""
    import tempfile
    import make_light_models as light
    names = [n for n in light.available_models()
             if not args.models or n in args.models or f"{n}.{A16_VARIANT}" in args.models]
    out_dir = os.path.join(work, "light")
    manifest = light.make_light_models(out_dir, names, log=log)
    models = []
    for n in names:
        e = manifest["models"].get(n)
        if not e:
            continue
        dst = os.path.join(out_dir, f"{n}.{A16_VARIANT}.onnx")
        if not os.path.exists(dst):
            seed = zlib.crc32(f"light:{n}".encode())
            with tempfile.TemporaryDirectory(prefix="qfold-a16-") as tmp:
                try:
                    light.build_qdq(os.path.join(out_dir, e["float"]), dst + ".tmp", e["input"],
                                    e["input_shape"], seed, tmp, a16=True)
                except Exception as ex:  # noqa: BLE001 -- reported, not fatal
                    notes.append(f"a16 variant of {n} skipped: {type(ex).__name__}: {ex}"[:300])
                    continue
            os.replace(dst + ".tmp", dst)
        feeds = (lambda e=e, n=n: light.sample_input(e, zlib.crc32(f"bench:{n}".encode())))
        models.append(Model(f"{n}.{A16_VARIANT}", "light a16", dst, "a16w8 QDQ", n, feeds))
    return models


def weight_only_models(work):
    """The int4 MLP of the weightonly set (see the module docstring), built on first use."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from make_models import pack_codes
    out_dir = os.path.join(work, "weightonly")
    os.makedirs(out_dir, exist_ok=True)
    dims, block = (4096, 11008, 4096), 32

    def layers(rng):
        for i, (k, n) in enumerate(zip(dims, dims[1:])):
            blocks = k // block
            codes = rng.integers(0, 16, size=(n, k), dtype=np.uint8)
            zp = rng.integers(6, 11, size=(n, blocks), dtype=np.uint8)
            # He-like: the outputs keep the inputs' scale through the Relu.
            scale = (rng.random((n, blocks), dtype=np.float32) * 0.5 + 0.75) * \
                np.float32(np.sqrt(2.0 / k) / 4.6)
            yield i, k, n, blocks, codes, zp, scale

    def build(path, rows, form, level):
        rng = np.random.default_rng(zlib.crc32(b"bench:weightonly"))
        inits, nodes, x = [], [], "input"
        for i, k, n, blocks, codes, zp, scale in layers(rng):
            y = "output" if i == len(dims) - 2 else f"h{i}"
            if form == "nbits":
                inits += [numpy_helper.from_array(pack_codes(codes.reshape(n, blocks, block), 4),
                                                  f"w{i}"),
                          numpy_helper.from_array(scale, f"w{i}.scales"),
                          numpy_helper.from_array(pack_codes(zp, 4), f"w{i}.zp")]
                attrs = {"accuracy_level": level} if level else {}
                nodes.append(helper.make_node("MatMulNBits", [x, f"w{i}", f"w{i}.scales",
                                                              f"w{i}.zp"], [y], name=f"mm{i}",
                                              domain="com.microsoft", K=k, N=n, bits=4,
                                              block_size=block, **attrs))
            else:  # blocked DequantizeLinear (uint4 [K, N]) -> MatMul
                inits += [helper.make_tensor(f"w{i}", TensorProto.UINT4, [k, n],
                                             pack_codes(np.ascontiguousarray(codes.T), 4)
                                             .tobytes(), raw=True),
                          numpy_helper.from_array(np.ascontiguousarray(scale.T), f"w{i}.scales"),
                          helper.make_tensor(f"w{i}.zp", TensorProto.UINT4, [blocks, n],
                                             pack_codes(np.ascontiguousarray(zp.T), 4).tobytes(),
                                             raw=True)]
                nodes += [helper.make_node("DequantizeLinear", [f"w{i}", f"w{i}.scales",
                                                                f"w{i}.zp"], [f"w{i}.f"],
                                           name=f"dq{i}", axis=0, block_size=block),
                          helper.make_node("MatMul", [x, f"w{i}.f"], [y], name=f"mm{i}")]
            if y != "output":
                nodes.append(helper.make_node("Relu", [y], [y + ".relu"], name=f"relu{i}"))
                x = y + ".relu"
        graph = helper.make_graph(
            nodes, "weightonly_mlp",
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, [rows, dims[0]])],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, [rows, dims[-1]])], inits)
        opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
        onnx.save(helper.make_model(graph, opset_imports=opsets), path + ".tmp")
        os.replace(path + ".tmp", path)

    models = []
    for label, rows, form, level, extra in (("int4_mlp.nbits_acc4.r1", 1, "nbits", 4, ()),
                                            ("int4_mlp.nbits_acc4.r32", 32, "nbits", 4, ()),
                                            ("int4_mlp.nbits_acc0.r1", 1, "nbits", 0, ()),
                                            ("int4_mlp.dq.r1", 1, "dq", 0, ()),
                                            ("int4_mlp.dq.r1.int8a", 1, "dq", 0,
                                             ("--int8-activations",))):
        path = os.path.join(out_dir, label.replace(".int8a", "") + ".onnx")
        if not os.path.exists(path):
            build(path, rows, form, level)
        models.append(Model(label, "weight-only", path, "int4 weights", convert_args=extra))
    return models


def vad_step_feeds():
    """One 512-sample chunk at 16 kHz (fixed seed), sr = 16000, the state at zeros."""
    rng = np.random.default_rng(zlib.crc32(b"bench:vad_like"))
    return {"input": (0.1 * rng.standard_normal((1, 512))).astype(np.float32),
            "sr": np.array(16000, np.int64), "state": np.zeros((2, 1, 64), np.float32)}


def recurrent_models():
    models = [Model(n, "recurrent", os.path.join(REPO, "models", n + ".onnx"), "fp32")
              for n in RECURRENT_MODELS]
    vad = os.path.join(REPO, "models", "streaming", "vad_like.onnx")
    bind = {"stateN": "state"}
    models.append(Model("vad_like", "recurrent", vad, "fp32", feeds=vad_step_feeds,
                        state_bindings=bind))
    models.append(Model("vad_like.sr16k", "recurrent", vad, "fp32", feeds=vad_step_feeds,
                        state_bindings=bind, convert_args=["--const", "sr=16000"]))
    return models


def selected(args, label):
    if not args.models:
        return True
    return label in args.models or label.split(".")[0] in args.models


def prepare_models(args, work, notes, log):
    models = []
    if "synthetic" in args.sets:
        models += synthetic_models(args, work)
    if "ppocr" in args.sets and not args.quick:
        models += ppocr_models(notes)
    if "light" in args.sets and not args.quick:
        models += light_models(args, work, notes, log)
    if "a16" in args.sets and not args.quick:
        models += a16_models(args, work, notes, log)
    if "weightonly" in args.sets and not args.quick:
        models += weight_only_models(work)
    if "recurrent" in args.sets and not args.quick:
        have = {m.label for m in models}
        models += [m for m in recurrent_models() if m.label not in have]
    return [m for m in models if selected(args, m.label)]


def default_feeds(path, label):
    import onnx
    sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
    from qfold_tools import random_feeds
    return random_feeds(onnx.load(path), np.random.default_rng(zlib.crc32(label.encode())))


# Measuring one model -------------------------------------------------------------------------

def plan_iterations(args, first_run_ms):
    """Timed runs per turn for each engine: its turn should take about --round-seconds."""
    if args.quick:
        return {e: 3 for e in first_run_ms}
    return {e: int(max(1, min(MAX_ITERATIONS_PER_TURN, args.round_seconds * 1e3 / max(ms, 1e-3))))
            for e, ms in first_run_ms.items()}


def summarize_times(per_round):
    flat = np.sort(np.concatenate([np.asarray(r) for r in per_round]) * 1e3)
    rank = int(np.ceil(0.9 * len(flat)))  # nearest rank, like qfold bench
    return {"median_ms": float(np.median(flat)), "min_ms": float(flat[0]),
            "p90_ms": float(flat[max(rank, 1) - 1]), "runs": int(len(flat)),
            "round_medians_ms": [float(np.median(r) * 1e3) for r in per_round]}


def round_ratios(times, engine, base="qfold"):
    """median over rounds of (engine's median in the round / base's median in the round);
    base is qfold, or qfold_bf16 for the X/qfold-bf16 ratios."""
    if engine not in times or base not in times:
        return None
    v = [np.median(a) / np.median(b) for a, b in zip(times[engine], times[base])]
    return float(np.median(v)) if v else None


def max_abs_error(a, b):
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    if a.shape != b.shape:
        return None
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def bench_model(args, model, work, engines, ctx, log):
    """Probes and measures one model with every engine at every thread count (qfold bf16 on
    fp32 models only)."""
    if model.precision != "fp32":
        engines = [e for e in engines if e != "qfold_bf16"]
    res = {"label": model.label, "group": model.group, "precision": model.precision,
           "float_of": model.float_of, "onnx": model.path,
           "onnx_bytes": os.path.getsize(model.path), "engines": {}, "info": {},
           "ratios": {}, "load_before": load_average()}
    if "qfold_bf16" in engines:
        res["ratios_bf16"] = {}  # {T: {peer: peer/qfold-bf16}}
    start = time.monotonic()
    mdir = os.path.join(work, "runs", model.label)
    os.makedirs(mdir, exist_ok=True)
    feeds = model.feeds() if model.feeds else default_feeds(model.path, model.label)
    feeds_npz = os.path.join(mdir, "feeds.npz")
    np.savez(feeds_npz, **feeds)
    res["inputs"] = {k: f"{v.dtype} {'x'.join(map(str, v.shape))}" for k, v in feeds.items()}
    base = {"onnx": model.path, "feeds": feeds_npz, "qfold_cli": args.qfold,
            "qfold_module_dir": ctx["qfold_module_dir"], "threads": args.threads[0],
            "state_bindings": model.state_bindings,
            "const_inputs": [a.split("=")[0] for p, a in zip(model.convert_args,
                                                             model.convert_args[1:])
                             if p == "--const"]}
    failed = {}  # engine -> error, for every thread count

    qfm = os.path.join(mdir, "model.qfm")
    rc, out, err = sh([args.qfold, "convert", model.path, "-o", qfm] + model.convert_args, 900)
    if rc == 0:
        base["qfm"] = qfm
        res["qfm_bytes"] = os.path.getsize(qfm)
    else:
        failed["qfold"] = "convert " + last_error_line(rc, out, err)
        if "qfold_bf16" in engines:
            failed["qfold_bf16"] = failed["qfold"]
    if "mnn" in engines:
        mnn_path = os.path.join(mdir, "model.mnn")
        e = mnn_convert(model.path, mnn_path, mdir)
        if e:
            failed["mnn"] = e
        else:
            base["mnn"] = mnn_path
            res["mnn_bytes"] = os.path.getsize(mnn_path)

    # 1. Probe each engine alone in a child: crash isolation, first output, a time estimate.
    # --quick skips this (each probe costs a process start): the measuring child still keeps a
    # crash away from this process, but then takes all engines' results with it.
    outputs, first_ms = {}, {}
    for e in engines:
        if e in failed:
            continue
        if args.quick:
            first_ms[e], res["info"][e] = 1000.0, {}  # unknown: a generous timeout below
            continue
        msgs, crash = run_in_child(probe_child, (dict(base, engine=e),), args.probe_timeout)
        r = msgs[0] if msgs else {"error": crash}
        if "error" in r:
            failed[e] = r["error"]
            continue
        outputs[e], first_ms[e] = r["output"], r["first_run_ms"]
        res["info"][e] = dict(r["info"], load_ms=r["load_ms"], first_run_ms=r["first_run_ms"])
    # 2. Interleaved rounds per thread count, each probed engine in a worker process.
    iterations = plan_iterations(args, first_ms)
    slowest = max(first_ms.values(), default=0)
    plan = {"rounds": args.rounds, "iterations": iterations,
            "rewarm": {e: ms < REWARM_BELOW_MS for e, ms in first_ms.items()},
            "warmup": 1 if slowest > 1000 or args.quick else args.warmup}
    res["plan"] = plan
    if first_ms:
        specs = [(t, {e: dict(base, engine=e, threads=t) for e in first_ms}) for t in args.threads]
        budget = len(args.threads) * sum(
            (plan["warmup"] + plan["rounds"] * (iterations[e] + plan["rewarm"][e])) * first_ms[e] +
            res["info"][e].get("load_ms", 1000.0) for e in first_ms) / 1e3
        by_threads = {m["threads"]: m for m in measure_interleaved(specs, plan, 300 + 4 * budget)}
        for t in args.threads:
            m = by_threads.get(t) or {"error": "no result"}
            if "error" in m:
                for e in first_ms:
                    res["engines"].setdefault(e, {})[t] = {"error": "measurement " + m["error"]}
                continue
            for e, why in m.get("engine_errors", {}).items():
                res["engines"].setdefault(e, {})[t] = {"error": "measurement " + why}
            for e, per_round in m["times"].items():
                res["engines"].setdefault(e, {})[t] = summarize_times(per_round)
                res["info"][e].update(m["info"].get(e, {}))
            if "qfold" in m["times"]:
                # (also qfold_bf16/qfold: bf16 mode's time over fp32's, in results.json)
                res["ratios"][t] = {e: round_ratios(m["times"], e) for e in m["times"]
                                    if e != "qfold"}
            if "qfold_bf16" in m["times"]:
                res["ratios_bf16"][t] = {e: round_ratios(m["times"], e, "qfold_bf16")
                                         for e in m["times"] if e in PEERS}
            outputs.update(m["outputs"])
    ref = outputs.get("ort")
    res["cos"] = {e: cosine(o, ref) for e, o in outputs.items() if e != "ort" and ref is not None}
    if "qfold_bf16" in outputs and "qfold" in outputs:
        # bf16 mode's accuracy: its first output against fp32 mode's, same input
        res["bf16_vs_fp32"] = {"cos": cosine(outputs["qfold_bf16"], outputs["qfold"]),
                               "max_abs": max_abs_error(outputs["qfold_bf16"], outputs["qfold"])}
    for e, why in failed.items():
        res["engines"][e] = {"error": why}
    res["load_after"] = load_average()
    res["seconds"] = time.monotonic() - start
    log(f"  {model.label} ({res['seconds']:.0f}s, load {res['load_before']} -> "
        f"{res['load_after']}): " + ", ".join(
        f"{e}@{t}={v['median_ms']:.3f}ms" if "median_ms" in v else f"{e}@{t}: {v['error']}"
        for e, per in res["engines"].items() if "error" not in per for t, v in per.items())
        + "".join(f", {e}: {per['error']}" for e, per in res["engines"].items()
                  if "error" in per))
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
QUICK_CONV_SHAPES = 1


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


def bench_conv_kernels(args, work, engines, ctx, log):
    """Single int8 convolutions, measured like the models (MNN left out: its converter rejects
    QDQ convolutions)."""
    rows = []
    cdir = os.path.join(work, "conv_kernels")
    os.makedirs(cdir, exist_ok=True)
    shapes = CONV_SHAPES[:QUICK_CONV_SHAPES] if args.quick else CONV_SHAPES
    for label, c, m, k, s, g, h in shapes:
        tag = re.sub(r"[^0-9a-z]+", "_", label.lower()).strip("_")
        onnx_path = os.path.join(cdir, tag + ".onnx")
        ops = make_conv_model(onnx_path, c, m, k, s, g, h)
        feeds = (lambda c=c, h=h: {"x": np.random.default_rng(1).integers(
            0, 256, (1, c, h, h)).astype(np.uint8)})
        r = bench_model(args, Model("conv " + tag, "conv", onnx_path, "int8 QDQ", feeds=feeds),
                        os.path.join(work, "conv_kernels"),
                        [e for e in engines if e not in ("mnn", "qfold_bf16")], ctx, log)
        r["label"], r["ops"] = label, ops
        r["conv_node_ms"] = conv_node_ms(args, os.path.join(cdir, "runs", "conv " + tag, "model.qfm"),
                                         args.threads)
        rows.append(r)
    return rows


def conv_node_ms(args, qfm, threads):
    """{T: the QLinearConv node's fastest run in `qfold bench --profile`}: the kernel alone,
    without the model's boundary (the input's Transpose to channels-last, the output's back),
    which the end-to-end times above include for every engine. 3000 runs (0.15-1.5 s): when
    the thread pool has seen its worker come late it runs alone for 50 ms (KERNELS.md,
    Threads), longer than 300 runs of these convolutions took."""
    out = {}
    if not os.path.exists(qfm):
        return out
    for t in threads:
        rc, stdout, _ = sh([args.qfold, "bench", qfm, "--threads", str(t), "--iterations", "3000",
                            "--profile", "--json"], 300)
        if rc != 0:
            continue
        try:
            nodes = json.loads(stdout)["profile_nodes"]
        except (ValueError, KeyError):
            continue
        conv = [n["min_us"] for n in nodes if n.get("type") == "QLinearConv"]
        if conv:
            out[t] = conv[0] / 1000.0
    return out


# Markdown ------------------------------------------------------------------------------------

def conv_node_cells(r, t, pk_gops):
    """The QLinearConv node's ms and share of t x the int8 peak (results.json keys are strings)."""
    by_t = r.get("conv_node_ms") or {}
    ms = by_t.get(t, by_t.get(str(t)))
    if not ms:
        return ["—", "—"]
    pct = r["ops"] / (ms * 1e6) / (pk_gops * t) if pk_gops else None
    return [fmt_ms(ms), f"{100 * pct:.0f}%" if pct else "—"]


def med(res, eng, t):
    per = res["engines"].get(eng, {})
    return None if "error" in per else per.get(t, {}).get("median_ms")


def fmt_ms(v):
    if v is None:
        return "—"
    return f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 100 else f"{v:.0f}"


def fmt_ratio(v):
    return f"{v:.2f}×" if v else "—"


def fmt_size(b):
    if b is None:
        return "—"
    return f"{b / 1024:.0f} KiB" if b < 1048576 else f"{b / 1048576:.1f} MiB"


def gmean(values):
    v = [x for x in values if x]
    return f"{float(np.exp(np.mean(np.log(v)))):.2f}× (n={len(v)})" if v else "—"


class Footnotes:
    def __init__(self):
        self.items = []

    def ref(self, text):
        text = text.replace("|", "/")
        if text not in self.items:
            self.items.append(text)
        return self.items.index(text) + 1


def engine_cell(res, eng, t, notes):
    """Median ms, or what went wrong: a crash is written out, other errors are footnotes."""
    per = res["engines"].get(eng)
    if per is None:
        return "n/a"
    err = per.get("error") or per.get(t, {}).get("error")
    if not err:
        return fmt_ms(med(res, eng, t))
    if err.startswith("crashes") or "measurement crashes" in err:
        return err.replace("measurement ", "")
    label = res["label"]
    return f"error [{notes.ref(f'{label}, {ENGINE_TITLES[eng]}: {err}')}]"


def precision_cell(res):
    """The model's precision, plus what OpenVINO made of it (int8 convolutions for QDQ models,
    its inference precision for float ones: bf16 on CPUs that have it)."""
    ov = res["info"].get("openvino", {})
    if "int8" in res["precision"] and ov.get("int8_convs"):
        return f"{res['precision']} (OV: int8 conv/FC {ov['int8_convs']})"
    if ov.get("precision"):
        return f"{res['precision']} (OV: {ov['precision']})"
    return res["precision"]


def cos_cell(res, engines):
    parts = []
    for e in engines:
        if e != "ort" and e in res.get("cos", {}) and res["cos"][e] is not None:
            parts.append(f"{ENGINE_TITLES[e] if e != 'openvino' else 'OV'} {res['cos'][e]:.4f}")
    return ", ".join(parts) or "—"


def bf16_accuracy_cell(res):
    """qfold bf16's first output against qfold fp32's: cosine and max abs error."""
    a = res.get("bf16_vs_fp32")
    if not a or a.get("cos") is None:
        return "—"
    err = "—" if a.get("max_abs") is None else f"{a['max_abs']:.2g}"
    return f"cos {a['cos']:.6f}, max abs {err}"


def bf16_columns(results, engines):
    """Whether the latency tables get the qfold bf16 columns: the engine ran and some model is
    fp32."""
    return "qfold_bf16" in engines and any(r["precision"] == "fp32" for r in results)


def latency_table(w, results, t, engines, notes):
    """One row per model. With qfold bf16 (fp32 models only; "—" in the other rows): its
    latency next to qfold's, OV/qfold-bf16 next to OV/qfold, and its accuracy against qfold
    fp32 in the last column."""
    bf16 = bf16_columns(results, engines)
    timed = [e for e in engines if e != "qfold_bf16" or bf16]
    peers = [e for e in engines if e in PEERS]
    ratios = [(e, "ratios") for e in peers]
    if bf16 and "openvino" in peers:
        i = peers.index("openvino") + 1
        ratios[i:i] = [("openvino", "ratios_bf16")]
    hdr = (["model", "precision"] + [f"{ENGINE_TITLES[e]} ms" for e in timed]
           + [(BF16_RATIO_TITLES if k == "ratios_bf16" else RATIO_TITLES)[e] for e, k in ratios]
           + ["cos vs ORT"] + (["qfold bf16 vs fp32"] if bf16 else []))
    w("| " + " | ".join(hdr) + " |")
    w("|" + "---|" * len(hdr))
    for r in results:
        row = [r["label"], precision_cell(r)]
        row += ["—" if e == "qfold_bf16" and r["precision"] != "fp32" else
                engine_cell(r, e, t, notes) for e in timed]
        row += [fmt_ratio(r.get(k, {}).get(t, {}).get(e)) for e, k in ratios]
        row.append(cos_cell(r, engines))
        if bf16:
            row.append(bf16_accuracy_cell(r) if r["precision"] == "fp32" else "—")
        w("| " + " | ".join(row) + " |")
    w("")


def write_markdown(path, results, conv, meta, args):
    engines = meta["engines"]
    peers = [e for e in engines if e in PEERS]
    threads = args.threads
    notes = Footnotes()
    lines = []
    w = lines.append
    w("# Benchmarks")
    w("")
    w(f"Generated by `scripts/bench.py` on {meta['date']} (qfold {meta['git']}) in "
      f"{meta['seconds'] / 60:.0f} min. Regenerate with:")
    w("")
    w("    " + meta["command"])
    w("")
    m = meta["machine"]
    w(f"**Machine:** {m['cpu']}, {m['cores']} cores available to the process "
      f"(AVX-512 VNNI: {'yes' if m['avx512_vnni'] else 'no'}, AVX-512 BF16: "
      f"{'yes' if m['avx512_bf16'] else 'no'}, AMX: {'yes' if m['amx'] else 'no'}), "
      f"Linux {m['kernel']}, Python {m['python']}. Load average (1/5/15 min) at start / end: "
      f"{meta['load_start']} / {meta['load_end']}; per model in the last table.")
    w("")
    pk = meta["peak"]
    if "error" in pk:
        w(f"**Single-thread peak:** not measured ({pk['error']}).")
    elif "int8_vnni_gops" in pk:
        w(f"**Single-thread peak** (register-only microbenchmark, `g++ -O2 -mavx512f "
          f"-mavx512vnni -mfma`): int8 VNNI (vpdpbusd) {pk['int8_vnni_gops']:.0f} GOPS, fp32 FMA "
          f"(vfmadd231ps) {pk['fp32_fma_gflops']:.0f} GFLOPS.")
        if "int8_amx_gops" in pk:
            w(f"AMX-INT8 (`tdpbusd` on 4 accumulator tiles, `-mamx-tile -mamx-int8`): "
              f"{pk['int8_amx_gops']:.0f} GOPS; qfold's channels-last int8 convolutions use AMX "
              f"on this CPU, so their \"% of peak\" below is of the AMX peak.")
        elif "amx_error" in pk:
            w(f"AMX peak not measured ({pk['amx_error']}).")
    else:
        w(f"**Single-thread peak** (register-only microbenchmark, `g++ -O2 -mavx2 -mfma`; this "
          f"CPU has no AVX-512 VNNI): int8 through the exact AVX2 path (vpmaddwd + vpaddd) "
          f"{pk['int8_avx2_gops']:.0f} GOPS, fp32 FMA on ymm {pk['fp32_fma_gflops']:.0f} GFLOPS.")
    w("")
    w("**Engines:** " + "; ".join(
        "qfold bf16 (the same module, `precision=\"bf16\"`, fp32 models only)"
        if e == "qfold_bf16" else f"{ENGINE_TITLES[e]} {meta['versions'].get(e) or ''}".strip()
        for e in engines) + ".")
    w("")
    if meta.get("qfold_bf16_skipped"):
        w(f"**qfold bf16 not measured:** {meta['qfold_bf16_skipped']}.")
        w("")
    w("## How measured")
    w("")
    w("- Per model and thread count T, every engine is first **probed** alone in a child "
      "process (load, one run, first output): an engine that crashes or fails there is a table "
      "entry, not a failed benchmark. Then every engine that passed loads in a worker process "
      "of its own (engines never share a process: with OpenVINO's 2-thread model loaded and "
      "idle in the same process, qfold's 2-thread runs were 1.1-2x slower), and the parent "
      f"drives **{args.rounds} rounds**; in each round every engine, in turn (the order rotates "
      "by one each round), does K timed inferences (after one untimed to re-warm caches when "
      f"its runs take under {REWARM_BELOW_MS} ms), K chosen per engine so its "
      f"turn lasts about {args.round_seconds:g} s (at most {MAX_ITERATIONS_PER_TURN}), with a "
      f"{TURN_PAUSE_S * 1e3:.0f} ms pause between turns (other engines' spinning worker threads "
      "go idle). Load noise on this shared machine thus falls on all engines alike.")
    w("- Latency: median over all timed runs of an engine, in ms. Ratios X/qfold: in each round, "
      "the engine's median over qfold's, then the median over rounds: **> 1 means qfold is "
      "faster**. Each call is timed with `time.perf_counter` around one Python call (qfold "
      "`Session.run`, ORT `sess.run`, OpenVINO `InferRequest.infer`, MNN input copy + "
      "`runSession`), which includes binding inputs and copying outputs for every engine.")
    w("- Engines: qfold through its Python module (" + (meta["qfold_api"] or "") + "); ONNX "
      "Runtime with `ORT_ENABLE_ALL`, `intra_op_num_threads` = T, `inter_op_num_threads` = 1 "
      "(QDQ models run ORT's integer kernels); OpenVINO `compile_model(onnx, \"CPU\")` with "
      "`PERFORMANCE_HINT` LATENCY, `INFERENCE_NUM_THREADS` = T, `NUM_STREAMS` 1 (QDQ models run "
      "int8; the precision column shows its `INFERENCE_PRECISION_HINT` and how many of its "
      "convolutions run int8); MNN converted by its compiled converter (`_tools.mnnconvert`, "
      "not the telemetry-sending `mnnconvert` script), `numThread` = T, precision normal.")
    if "qfold_bf16" in engines:
        w("- qfold bf16: OpenVINO runs fp32 models in bf16 on CPUs that have it (its precision "
          "column), so fp32 models also run qfold with `precision=\"bf16\"` as an engine of its "
          "own, interleaved like the others: its channels-last float convolutions round "
          "activations and weights to bfloat16 and multiply on AMX-BF16 or AVX-512 BF16 "
          "(`vdpbf16ps`), summing in fp32. "
          "X/qfold-bf16 ratios are computed per round like X/qfold; \"qfold bf16 vs fp32\" is "
          "the cosine similarity and the largest absolute difference of its first output "
          "against qfold fp32's on the same input.")
    w("- \"cos vs ORT\": cosine similarity of the engine's first output with ONNX Runtime's on "
      "the same input, so that a fast but wrong result shows.")
    w("- Inputs: fixed-seed standard normal floats; the light models get a synthetic smooth "
      "image normalized like ImageNet (held out from their calibration images); the PP-OCR "
      "models a synthetic page of printed-text-like strokes, normalized as PP-OCR does "
      "(`text_page_feeds`: on noise the detector's map is near 0 everywhere). Light models: "
      "ONNX model-zoo architectures from the `onnx` wheel with seeded random weights "
      "(scripts/make_light_models.py), so accuracy means nothing, only speed and agreement.")
    w("")
    if conv:
        w("## Single int8 convolutions")
        w("")
        w("One QDQ convolution each (uint8 input and output, per-channel int8 weights, int32 "
          "bias), folded by qfold into one QLinearConv; measured like the models. GOPS counts a "
          "multiply and an add per MAC over qfold's median; \"% of peak\" divides it by the "
          "single-thread int8 peak above (dense dot products: depthwise convolutions cannot reach "
          "it). The model times include its boundary for every engine (the NCHW input and output "
          "each transposed, or read and written strided); \"conv op\" is the QLinearConv node "
          "alone, its fastest run in `qfold bench --profile` (run after the interleaved rounds, "
          "qfold only).")
        w("")
        pk_gops = peak_int8_gops(pk)
        conv_engines = [e for e in engines if e not in ("mnn", "qfold_bf16")]
        for t in threads:
            hdr = (["convolution", "MOPs"] + [f"{ENGINE_TITLES[e]} {t}T ms" for e in conv_engines]
                   + ["qfold GOPS", "% of peak", "conv op ms", "conv op % of peak"]
                   + [f"{RATIO_TITLES[e]} {t}T" for e in conv_engines if e != "qfold"])
            w("| " + " | ".join(hdr) + " |")
            w("|" + "---|" * len(hdr))
            for r in conv:
                q = med(r, "qfold", t)
                gops = r["ops"] / (q * 1e6) if q else None
                pct = gops / (pk_gops * t) if gops and pk_gops else None
                row = ([r["label"], f"{r['ops'] / 1e6:.0f}"]
                       + [engine_cell(r, e, t, notes) for e in conv_engines]
                       + [f"{gops:.0f}" if gops else "—", f"{100 * pct:.0f}%" if pct else "—"]
                       + conv_node_cells(r, t, pk_gops)
                       + [fmt_ratio(r["ratios"].get(t, {}).get(e))
                          for e in conv_engines if e != "qfold"])
                w("| " + " | ".join(row) + " |")
            w("")
        if len(threads) > 1:
            w(f"(% of peak at {threads[-1]}T is against {threads[-1]} × the single-thread peak.)")
            w("")
    w("## Summary")
    w("")
    w("Geometric means of the per-model ratios (> 1: qfold is faster), per model group and "
      "precision; n = models where both engines ran.")
    bf16_rows = "qfold_bf16" in engines and any(r.get("ratios_bf16") for r in results)
    if bf16_rows:
        w("Rows \"fp32, qfold bf16\": the same fp32 models with qfold's bf16 mode as the qfold "
          "side (ORT/qfold-bf16, OV/qfold-bf16, ...).")
    w("")
    hdr = ["group", "precision"] + [f"{RATIO_TITLES[e]} {t}T" for t in threads for e in peers]
    w("| " + " | ".join(hdr) + " |")
    w("|" + "---|" * len(hdr))
    def kind(precision):
        return "a16w8" if "a16w8" in precision else "int8" if "int8" in precision else "fp32"

    keys = []
    for r in results:
        k = (r["group"], kind(r["precision"]))
        if k not in keys:
            keys.append(k)
    for g, p in keys:
        rs = [r for r in results if r["group"] == g and kind(r["precision"]) == p]
        w("| " + " | ".join([g, p] + [gmean(r["ratios"].get(t, {}).get(e) for r in rs)
                                      for t in threads for e in peers]) + " |")
        if bf16_rows and p == "fp32" and any(r.get("ratios_bf16") for r in rs):
            w("| " + " | ".join(
                [g, "fp32, qfold bf16"] + [gmean(r.get("ratios_bf16", {}).get(t, {}).get(e)
                                                for r in rs) for t in threads for e in peers])
              + " |")
    w("")
    for t in threads:
        w(f"## Latency, {t} thread{'s' if t > 1 else ''} (median ms)")
        w("")
        latency_table(w, results, t, engines, notes)
    if len(threads) > 1:
        t1, t2 = threads[0], threads[1]
        w(f"## {t2}-thread speedup ({t1}T median / {t2}T median)")
        w("")
        w("| model | " + " | ".join(ENGINE_TITLES[e] for e in engines) + " |")
        w("|---|" + "---|" * len(engines))
        for r in results:
            cells = []
            for e in engines:
                a, b = med(r, e, t1), med(r, e, t2)
                cells.append(fmt_ratio(a / b) if a and b else "—")
            w(f"| {r['label']} | " + " | ".join(cells) + " |")
        w("")
    w("## Models")
    w("")
    w("| model | group | inputs | ONNX | .qfm | .mnn | qfold arena | rounds × timed runs per "
      "turn | load average before / after |")
    w("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        ins = "; ".join(f"{k} {v}" for k, v in r.get("inputs", {}).items())
        plan = r.get("plan", {})
        per_turn = ", ".join(f"{ENGINE_TITLES[e]} {k}"
                             for e, k in plan.get("iterations", {}).items())
        w(f"| {r['label']} | {r['group']} | {ins} | {fmt_size(r['onnx_bytes'])} | "
          f"{fmt_size(r.get('qfm_bytes'))} | {fmt_size(r.get('mnn_bytes'))} | "
          f"{fmt_size(r['info'].get('qfold', {}).get('arena_bytes'))} | "
          f"{plan.get('rounds', '—')} × ({per_turn}) | {r['load_before']} / "
          f"{r.get('load_after', '—')} |")
    w("")
    if notes.items or meta["notes"]:
        w("## Notes")
        w("")
        for i, f in enumerate(notes.items, 1):
            w(f"{i}. {f}")
        for n in meta["notes"]:
            w(f"- {n}")
        w("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


def detect_engines(args, notes, log):
    """Engines to run and their versions; peers that do not import are skipped with a note."""
    engines, versions = ["qfold", "ort"], {}
    import onnxruntime
    versions["ort"] = onnxruntime.__version__
    if args.no_openvino:
        notes.append("OpenVINO skipped: --no-openvino")
    else:
        v = probe_python_module("import openvino; print(openvino.__version__.split('-')[0])")
        if v:
            engines.append("openvino")
            versions["openvino"] = v
        else:
            notes.append("OpenVINO skipped: the `openvino` Python package does not import")
    if args.no_mnn:
        notes.append("MNN skipped: --no-mnn")
    else:
        v = probe_python_module("import MNN, _tools; print(MNN.version())")
        if v:
            engines.append("mnn")
            versions["mnn"] = v
        else:
            notes.append("MNN skipped: the `MNN` Python package is not installed")
    return engines, versions


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("--qfold", default=os.path.join(REPO, "build", "cli", "qfold"),
                    help="the qfold binary (default: build/cli/qfold); the Python module is "
                         "looked up in python/ of the same build directory")
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "BENCHMARKS.md"),
                    help="Markdown report to write (replaced)")
    ap.add_argument("--work", help="work directory (default: <qfold build dir>/bench)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: mobilenetv2_like and its QDQ variant, 1 convolution, "
                         "2 short rounds")
    ap.add_argument("--set", default="all",
                    help="comma-separated model sets: synthetic, ppocr, light, a16 (the light "
                         "models with 16-bit activations), weightonly, recurrent, or all")
    ap.add_argument("--models", help="comma-separated labels or base names to keep")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--rounds", type=int, default=10, help="interleaved rounds per model")
    ap.add_argument("--round-seconds", type=float, default=0.25,
                    help="about how long one engine's turn in a round lasts")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs per engine first")
    ap.add_argument("--probe-timeout", type=float, default=900,
                    help="seconds for one engine to load a model and run it once")
    ap.add_argument("--no-openvino", action="store_true", help="skip OpenVINO even if installed")
    ap.add_argument("--no-mnn", action="store_true", help="skip MNN even if installed")
    ap.add_argument("--no-qfold-bf16", action="store_true",
                    help="skip the qfold bf16 engine (qfold with precision=\"bf16\" on the fp32 "
                         "models)")
    ap.add_argument("--no-conv", action="store_true", help="skip the single convolutions")
    ap.add_argument("--note", action="append", default=[],
                    help="a sentence for the report's notes (e.g. the state of the kernels); "
                         "repeatable. It is part of the recorded command, so reruns keep it")
    args = ap.parse_args()
    try:
        args.threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        ap.error("--threads takes comma-separated numbers")
    args.sets = MODEL_SETS if args.set == "all" else args.set.split(",")
    unknown = set(args.sets) - set(MODEL_SETS)
    if unknown:
        ap.error(f"unknown model set(s) {sorted(unknown)}; known: {', '.join(MODEL_SETS)}, all")
    args.models = args.models.split(",") if args.models else None
    if args.quick:
        args.rounds, args.warmup = 2, 1
        args.note.insert(0, "--quick: 2 rounds of 3 runs per engine and no separate probes "
                         "(a smoke test, not a measurement).")
    return args


def main():
    args = parse_args()
    args.qfold = os.path.abspath(args.qfold)
    if not os.access(args.qfold, os.X_OK):
        print(f"bench.py: {args.qfold} is not an executable (pass --qfold)", file=sys.stderr)
        return 2
    work = os.path.abspath(args.work or os.path.join(os.path.dirname(args.qfold), "..", "bench"))
    os.makedirs(work, exist_ok=True)
    sys.path.insert(0, SCRIPTS)
    import logging
    logging.getLogger().setLevel(logging.ERROR)

    def log(msg):
        print(msg, flush=True)

    start = time.monotonic()
    notes = []
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "git": git_state(), "machine": machine_info(), "load_start": load_average(),
            "notes": notes}
    cmd = [os.path.relpath(sys.executable, REPO) if sys.executable.startswith(REPO)
           else sys.executable, os.path.relpath(os.path.abspath(__file__), REPO)]
    meta["command"] = " ".join(shlex.quote(c) for c in cmd + sys.argv[1:])
    module_dir, qfold_version = qfold_module(args.qfold)
    engines, meta["versions"] = detect_engines(args, notes, log)
    meta["versions"]["qfold"] = qfold_version
    meta["qfold_bf16_skipped"] = detect_qfold_bf16(args, work, meta["machine"])
    if meta["qfold_bf16_skipped"] is None:
        engines.insert(engines.index("qfold") + 1, "qfold_bf16")
        meta["versions"]["qfold_bf16"] = qfold_version
    else:
        log(f"qfold bf16 skipped: {meta['qfold_bf16_skipped']}")
    meta["engines"] = engines
    ctx = {"qfold_module_dir": module_dir}
    if ctx["qfold_module_dir"]:
        meta["qfold_api"] = f"`qfold.Session.run`, {os.path.relpath(ctx['qfold_module_dir'], REPO)}"
    else:
        meta["qfold_api"] = ("module not built: `qfold bench` subprocesses instead, one per "
                             "round, so qfold's figures are medians of round medians")
        notes.append("qfold's Python module was not found next to the CLI; qfold ran as one "
                     "`qfold bench` process per round")
    log("engines: " + ", ".join(f"{e} {meta['versions'].get(e) or ''}" for e in engines))
    log(f"machine: {meta['machine']}\nqfold: {meta['qfold_api']}")
    meta["peak"] = run_peak(work)
    log(f"peak: {meta['peak']}")
    conv = [] if args.no_conv else bench_conv_kernels(args, work, engines, ctx, log)
    models = prepare_models(args, work, notes, log)
    results = [bench_model(args, m, work, engines, ctx, log) for m in models]
    meta["load_end"] = load_average()
    notes.extend(args.note)
    meta["seconds"] = time.monotonic() - start
    raw = os.path.join(work, "results.json")
    with open(raw, "w") as f:
        json.dump({"meta": meta, "conv": conv, "results": results}, f, indent=1, default=str)
    write_markdown(args.out, results, conv, meta, args)
    log(f"wrote {args.out} (raw results: {raw}) in {meta['seconds']:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
