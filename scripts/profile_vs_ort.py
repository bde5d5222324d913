#!/usr/bin/env python3
"""Compares one float model's speed in qfold and ONNX Runtime on one thread, in total and per
operator type, to find the operators that lose.

Usage: python scripts/profile_vs_ort.py MODEL.onnx [--qfold build/cli/qfold] [--rounds 15]
                                         [--runs 5] [--seed 0]

Totals: both engines in this process (qfold through its Python module next to the CLI's build
dir, ONNX Runtime with ORT_ENABLE_ALL, intra_op_num_threads=1), alternating round by round,
`--runs` inferences each per round, each timed with time.thread_time_ns (CPU time of the calling
thread: on a shared machine, time spent descheduled does not count). Reported: min and median
per inference of each engine, and the median over rounds of the ratio ORT/qfold (> 1: qfold is
faster).

Per operator type: `qfold bench --profile --json` (mean of each type over its timed runs) beside
ONNX Runtime's own profile (the kernel times of its nodes, summed per op type and run). ONNX
Runtime fuses its graph (FusedMatMul, SkipLayerNormalization, BiasGelu, ...), qfold too (Gelu):
the types differ where one engine fused, so compare the sums of the rows that correspond.
Inputs: seeded standard normal floats of the declared (static) shapes.
"""

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx


def static_inputs(model, seed):
    init = {i.name for i in model.graph.initializer}
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        if vi.name in init:
            continue
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if any(d <= 0 for d in dims):
            sys.exit(f"{vi.name}: only static input shapes are supported, got {dims}")
        feeds[vi.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def ort_session(path, profile_prefix=None):
    import onnxruntime as ort  # noqa: PLC0415
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def timed(fn, runs):
    out = []
    for _ in range(runs):
        t0 = time.thread_time_ns()
        fn()
        out.append((time.thread_time_ns() - t0) / 1e6)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--qfold", default="build/cli/qfold")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(args.qfold))),
                                    "python"))
    from qfold import _qfold  # noqa: PLC0415

    model = onnx.load(args.model)
    feeds = static_inputs(model, args.seed)
    work = tempfile.mkdtemp(prefix="profile_vs_ort_")
    qfm = os.path.join(work, "model.qfm")
    subprocess.run([args.qfold, "convert", args.model, "-o", qfm], check=True,
                   stdout=subprocess.DEVNULL)

    qs = _qfold.Session(qfm, 1)
    os_ = ort_session(args.model)
    engines = {"qfold": lambda: qs.run(feeds), "ort": lambda: os_.run(None, feeds)}
    for fn in engines.values():
        timed(fn, 3)
    times = {k: [] for k in engines}
    ratios = []
    for r in range(args.rounds):
        order = list(engines) if r % 2 == 0 else list(reversed(engines))
        med = {}
        for k in order:
            t = timed(engines[k], args.runs)
            times[k] += t
            med[k] = statistics.median(t)
        ratios.append(med["ort"] / med["qfold"])
    print(f"{os.path.basename(args.model)}: 1 thread, {args.rounds} rounds x {args.runs} runs, "
          f"thread CPU time, load average {os.getloadavg()[0]:.2f}")
    for k, t in times.items():
        print(f"  {k:6s} min {min(t):8.3f} ms  median {statistics.median(t):8.3f} ms")
    print(f"  ratio ORT/qfold (median of round ratios): {statistics.median(ratios):.3f}")

    prof = subprocess.run([args.qfold, "bench", qfm, "--threads", "1", "--profile", "--json",
                           "--iterations", str(args.rounds * args.runs)],
                          check=True, capture_output=True, text=True)
    q_types = {t["type"]: (t["mean_us"] / 1e3, t["nodes"])
               for t in json.loads(prof.stdout)["profile_by_type"]}

    ps = ort_session(args.model, os.path.join(work, "ort"))
    runs = args.rounds * args.runs
    for _ in range(3 + runs):
        ps.run(None, feeds)
    with open(ps.end_profiling()) as f:
        events = json.load(f)
    per_type = collections.defaultdict(float)
    nodes = collections.defaultdict(set)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            op = e["args"].get("op_name", "?")
            per_type[op] += e["dur"] / 1e3
            nodes[op].add(e["name"])
    o_types = {k: (v / (3 + runs), len(nodes[k])) for k, v in per_type.items()}

    print("  per operator type, mean ms per inference (nodes):")
    print(f"  {'type':28s} {'qfold':>16s} {'ORT':>16s}")
    for k in sorted(set(q_types) | set(o_types),
                    key=lambda k: -max(q_types.get(k, (0, 0))[0], o_types.get(k, (0, 0))[0])):
        cell = lambda d: f"{d[k][0]:9.3f} ({d[k][1]:3d})" if k in d else f"{'-':>16s}"  # noqa
        print(f"  {k:28s} {cell(q_types)} {cell(o_types)}")


if __name__ == "__main__":
    main()
