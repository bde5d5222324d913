#!/usr/bin/env python3
"""qfold on x86 CPUs older than the build machine: the library picks its kernels per session from
the CPU's features, so the same binary must start, convert and run on a CPU without AVX-512 (Zen
2/3, most Intel client CPUs) and on one without AVX at all, without an illegal instruction, and
give the results of the kernels it picked. A dynamic initializer in an AVX-512 translation unit
once crashed every command at program start on such CPUs, a failure no native test could see on
an AVX-512 build machine.

Each CPU runs under qemu-x86_64 (user mode, TCG), which raises SIGILL for any instruction the
emulated model lacks (TCG implements no AVX-512 at all):
  - Nehalem: SSE4.2, no AVX: every kernel family must report `reference` or `portable`, and the
    outputs must equal, byte for byte, the native run with QFOLD_ISA=reference;
  - Haswell: AVX2 + FMA, no AVX-512: every family must report `avx2` (or none/portable/on), and
    the outputs must equal, byte for byte, the native run with QFOLD_ISA=avx2.
The emulated CPU converts the first model itself, which must give the same .qfm bytes.

Usage:
  compare_cpu_levels.py --qfold build/cli/qfold --model FILE.onnx [--model ...]
Exits 0 without running when the host is not x86-64 or qemu-x86_64 is missing (skipped, said).
"""

import argparse
import glob
import os
import platform
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx

from qfold_tools import feed_args, random_feeds

# (qemu CPU model, QFOLD_ISA of the native run it must equal, kernel variants allowed)
LEVELS = (
    ("Nehalem", "reference", {"reference", "portable", "off"}),
    ("Haswell", "avx2", {"avx2", "portable", "on", "off", "reference"}),
)
QEMU_TIMEOUT = 900


def run(cmd, env=None, timeout=QEMU_TIMEOUT):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                       timeout=timeout)
    # qemu warns about CPUID bits TCG cannot emulate (pcid, x2apic, ...): not errors.
    err = "\n".join(l for l in p.stderr.decode(errors="replace").splitlines()
                    if "TCG doesn't support requested feature" not in l)
    return p.returncode, p.stdout.decode(errors="replace"), err


def outputs_of(qfold_cmd, qfm, feeds, outdir, env):
    os.makedirs(outdir, exist_ok=True)
    args = feed_args(feeds, outdir, prefix="in")
    rc, _, err = run(qfold_cmd + ["run", qfm] + args + ["--output-dir", outdir], env)
    if rc != 0:
        return f"qfold run exited {rc}: {err.strip()[-400:]}", None
    outs = {}
    for f in sorted(glob.glob(os.path.join(outdir, "*.npy"))):
        if not os.path.basename(f).startswith("in_"):
            outs[os.path.basename(f)] = np.load(f)
    return None, outs


def kernel_variants(qfold_cmd, qfm, env):
    """The `kernels:` line of `qfold bench` (one untimed-free run): {family: variant}."""
    rc, out, err = run(qfold_cmd + ["bench", qfm, "--warmup", "0", "--iterations", "1"], env)
    if rc != 0:
        return f"qfold bench exited {rc}: {err.strip()[-400:]}", None
    for line in out.splitlines():
        if line.startswith("kernels:"):
            return None, dict(item.split("=", 1) for item in line.split()[1:])
    return "qfold bench printed no kernels line", None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qfold", required=True)
    ap.add_argument("--model", action="append", required=True)
    args = ap.parse_args()

    qemu = shutil.which("qemu-x86_64")
    if platform.machine() not in ("x86_64", "AMD64") or qemu is None:
        print("skipped: needs an x86-64 host with qemu-x86_64 (Debian's qemu-user)")
        return 0

    failures = passed = 0
    with tempfile.TemporaryDirectory() as work:
        native_env = dict(os.environ)
        rng = np.random.default_rng(29)
        prepared = []
        for i, path in enumerate(args.model):
            base = os.path.splitext(os.path.basename(path))[0]
            qfm = os.path.join(work, base + ".qfm")
            rc, _, err = run([args.qfold, "convert", path, "-o", qfm], native_env)
            if rc != 0:
                print(f"FAIL {base}: native conversion exited {rc}: {err.strip()[-400:]}")
                failures += 1
                continue
            feeds = random_feeds(onnx.load(path), rng)
            prepared.append((base, path, qfm, feeds))

        for cpu, isa, allowed in LEVELS:
            emulated = [qemu, "-cpu", cpu, args.qfold]
            env = dict(native_env, QFOLD_ISA=isa)
            for j, (base, path, qfm, feeds) in enumerate(prepared):
                name = f"{base} on {cpu}"
                if j == 0:
                    # The converter itself on the emulated CPU: the same file, byte for byte.
                    qfm_emu = os.path.join(work, f"{base}.{cpu}.qfm")
                    rc, _, err = run(emulated + ["convert", path, "-o", qfm_emu], native_env)
                    if rc != 0:
                        print(f"FAIL {name}: conversion exited {rc}: {err.strip()[-400:]}")
                        failures += 1
                        continue
                    with open(qfm, "rb") as a, open(qfm_emu, "rb") as b:
                        if a.read() != b.read():
                            print(f"FAIL {name}: the .qfm differs from the native conversion")
                            failures += 1
                            continue
                err, kernels = kernel_variants(emulated, qfm, native_env)
                if err:
                    print(f"FAIL {name}: {err}")
                    failures += 1
                    continue
                wrong = {k: v for k, v in kernels.items() if v not in allowed}
                if wrong:
                    print(f"FAIL {name}: kernels beyond the CPU: {wrong}")
                    failures += 1
                    continue
                err, ref = outputs_of([args.qfold], qfm, feeds, os.path.join(work, base, isa), env)
                if err:
                    print(f"FAIL {name}: native QFOLD_ISA={isa}: {err}")
                    failures += 1
                    continue
                err, got = outputs_of(emulated, qfm, feeds, os.path.join(work, base, cpu),
                                      native_env)
                if err:
                    print(f"FAIL {name}: {err}")
                    failures += 1
                    continue
                bad = [k for k in ref if k not in got or ref[k].dtype != got[k].dtype
                       or ref[k].shape != got[k].shape or ref[k].tobytes() != got[k].tobytes()]
                if bad or set(got) != set(ref):
                    print(f"FAIL {name}: outputs differ from native QFOLD_ISA={isa}: {bad}")
                    failures += 1
                    continue
                passed += 1
                print(f"ok   {name}: {len(ref)} outputs equal to native QFOLD_ISA={isa} "
                      f"({' '.join(sorted(set(kernels.values())))})")
    print(f"{passed} passed, {failures} failed")
    return 1 if failures or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
