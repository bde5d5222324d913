#!/usr/bin/env python3
"""Per-operator check of a QDQ model along qfold's own path (teacher forcing).

Usage:
  .venv/bin/python scripts/qdq_op_check.py MODEL.onnx [--seed N] [--all]

End-to-end agreement of a deep quantized model with ONNX Runtime's literal graph
(DequantizeLinear -> float op -> QuantizeLinear) can be poor although every
operator is right: one-step rounding differences (at exact .5 ties, frequent with
symmetric scales, the fp32 literal graph is the one that is off) grow through the
layers. This separates the two. It exposes every QuantizeLinear output of MODEL,
runs qfold (build/python) on seeded standard-normal inputs, then for each
QuantizeLinear output T extracts the operators between T and the nearest quantized
tensors upstream and runs them in ONNX Runtime (all graph optimizations off) on
*qfold's* values of those tensors. Per T it prints the largest difference in
quantization steps between qfold and that literal step, the share of equal
elements, and how many elements qfold and that float32 step each get wrong against
the step evaluated exactly (float64, tests/e2e/qfold_tools.run_exact_literal);
--all prints every T, else those over 1 step, under 99% equal or off the exact one.
Exposing the tensors keeps qfold from collapsing element-wise chains into one
table, so the path differs slightly from the plain conversion's.
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, utils

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import qfold  # noqa: E402
from qfold_tools import run_exact_literal  # noqa: E402


def cosine(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return float(na == nb)
    return float(a @ b / (na * nb))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--all", action="store_true", help="print every quantized tensor")
    args = ap.parse_args()

    model = onnx.load(args.model)
    g = model.graph
    constants = {i.name for i in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    quantized = [n.output[0] for n in g.node if n.op_type == "QuantizeLinear"]
    outputs = {o.name for o in g.output}
    for t in quantized:
        if t not in outputs:
            g.output.append(helper.make_empty_tensor_value_info(t))

    literal = ort.SessionOptions()
    literal.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    literal.log_severity_level = 3
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory(prefix="qfold-opcheck-") as tmp:
        exposed = os.path.join(tmp, "exposed.onnx")
        onnx.save(model, exposed)
        ref = ort.InferenceSession(exposed, literal, providers=["CPUExecutionProvider"])
        feeds = {i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape])
                 .astype(np.float32) for i in ref.get_inputs()}
        lit = dict(zip([o.name for o in ref.get_outputs()], ref.run(None, feeds)))
        qfm = os.path.join(tmp, "exposed.qfm")
        qfold.convert(exposed, qfm)
        got = qfold.Session(qfm).run(feeds)
        got.update(feeds)
        for o in model.graph.output[:len(outputs)]:
            print(f"end to end: {o.name}: cos(qfold, literal) {cosine(got[o.name], lit[o.name]):.6f}")

        def sources(t):
            """Quantized tensors and graph inputs the operators before T's QuantizeLinear read."""
            found, seen, stack = set(), set(), [producer[t].input[0]]
            while stack:
                x = stack.pop()
                if not x or x in seen or x in constants:
                    continue
                seen.add(x)
                n = producer.get(x)
                if n is None or n.op_type == "QuantizeLinear":
                    found.add(x)
                elif n.op_type != "Constant":
                    stack.extend(n.input)
            return sorted(found)

        worst = None
        total_q = total_l = 0
        for t in quantized:
            ins = sources(t)
            if producer[t].input[0] in feeds:
                continue  # the graph input's own QuantizeLinear
            sub = os.path.join(tmp, "step.onnx")
            utils.extract_model(args.model, sub, ins, [t], check_model=False)
            step = ort.InferenceSession(sub, literal, providers=["CPUExecutionProvider"])
            step_feeds = {i: got[i] for i in ins}
            want = step.run(None, step_feeds)[0].astype(np.int64)
            mine = got[t].astype(np.int64)
            diff = np.abs(mine - want)
            equal = float((diff == 0).mean())
            exact = run_exact_literal(sub, step_feeds)[1][0].astype(np.int64)
            off_q, off_l = int((mine != exact).sum()), int((want != exact).sum())
            total_q, total_l = total_q + off_q, total_l + off_l
            op = producer.get(producer[t].input[0])
            line = (f"{t} ({op.op_type if op is not None else '?'}): max {int(diff.max())} steps, "
                    f"{100 * equal:.2f}% equal; off the exact step: qfold {off_q}, "
                    f"float32 literal {off_l} of {exact.size}")
            if args.all or diff.max() > 1 or equal < 0.99 or off_q:
                print(line)
            if worst is None or (diff.max(), -equal) > worst[0]:
                worst = ((diff.max(), -equal), line)
        if worst:
            print(f"{len(quantized)} quantized tensors; worst: {worst[1]}")
        print(f"elements off the exact step, all tensors: qfold {total_q}, "
              f"float32 literal {total_l}")


if __name__ == "__main__":
    main()
