"""test_npycmp.py: tests/gpu/npycmp, the comparator of tests/gpu/gpu_checks.sh,
accepts what it should and rejects what it should (numpy writes the files):
NaN or infinity on either side fails, also where both sides hold it (two
runs that both diverged are not equal), with a tolerance or --exact.
Usage: test_npycmp.py PATH_TO_NPYCMP"""
import os
import subprocess
import sys
import tempfile

import numpy as np

from gstest import check, finish

npycmp = sys.argv[1]


def run(*args):
    p = subprocess.run([npycmp, *args], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout + p.stderr


def expect(code, args, what):
    rc, out = run(*args)
    if check(rc == code, f"{what}: exit {rc}, expected {code}\n{out}"):
        print(f"ok   {what}: exit {rc}")


def save(d, tensors):
    os.makedirs(d, exist_ok=True)
    for name, a in tensors.items():
        np.save(os.path.join(d, name + ".npy"), np.asarray(a, dtype=np.float32))


with tempfile.TemporaryDirectory() as t:
    rng = np.random.default_rng(1)
    w = rng.standard_normal((120, 400)).astype(np.float32)
    b = rng.standard_normal(120).astype(np.float32)
    ref = os.path.join(t, "ref")
    save(ref, {"fc1.weight": w, "fc1.bias": b})
    save(os.path.join(t, "same"), {"fc1.weight": w, "fc1.bias": b})
    save(os.path.join(t, "close"), {"fc1.weight": w * (1 + 1e-6), "fc1.bias": b})
    far = w.copy()
    far[3, 7] += 0.5
    save(os.path.join(t, "far"), {"fc1.weight": far, "fc1.bias": b})
    save(os.path.join(t, "missing"), {"fc1.weight": w})
    save(os.path.join(t, "shape"), {"fc1.weight": w.reshape(400, 120), "fc1.bias": b})
    nan = b.copy()
    nan[0] = np.nan
    save(os.path.join(t, "nan"), {"fc1.weight": w, "fc1.bias": nan})
    save(os.path.join(t, "nan2"), {"fc1.weight": w, "fc1.bias": nan})  # diverged the same way
    inf = b.copy()
    inf[5] = np.inf
    save(os.path.join(t, "inf"), {"fc1.weight": w, "fc1.bias": inf})
    save(os.path.join(t, "inf2"), {"fc1.weight": w, "fc1.bias": inf})
    ninf = w.copy()
    ninf[0, 0] = -np.inf
    save(os.path.join(t, "ninf"), {"fc1.weight": ninf, "fc1.bias": b})
    allnan = {"fc1.weight": np.full_like(w, np.nan), "fc1.bias": np.full_like(b, np.nan)}
    save(os.path.join(t, "allnan"), allnan)
    save(os.path.join(t, "allnan2"), allnan)
    np.save(os.path.join(t, "f64.npy"), w.astype(np.float64))
    os.makedirs(os.path.join(t, "f64"))
    os.rename(os.path.join(t, "f64.npy"), os.path.join(t, "f64", "fc1.weight.npy"))
    np.save(os.path.join(t, "f64", "fc1.bias.npy"), b)

    expect(0, [os.path.join(t, "same"), ref], "identical, tolerance")
    expect(0, ["--exact", os.path.join(t, "same"), ref], "identical, bitwise")
    expect(0, [os.path.join(t, "close"), ref], "close within 1e-3")
    expect(1, ["--exact", os.path.join(t, "close"), ref], "close is not bitwise")
    expect(1, [os.path.join(t, "far"), ref], "one element off by 0.5")
    expect(0, ["--rtol", "0.2", os.path.join(t, "far"), ref], "off by 0.5 within rtol 0.2")
    expect(1, [os.path.join(t, "missing"), ref], "a tensor missing")
    expect(1, [os.path.join(t, "shape"), ref], "a shape differs")
    expect(1, [os.path.join(t, "nan"), ref], "a NaN where the reference has a number")
    expect(1, [ref, os.path.join(t, "nan")], "a number where the reference has a NaN")
    expect(1, [os.path.join(t, "nan2"), os.path.join(t, "nan")], "NaN on both sides, same place")
    expect(1, ["--exact", os.path.join(t, "nan2"), os.path.join(t, "nan")],
           "NaN on both sides, same bits, --exact")
    expect(1, ["--rtol", "1e9", os.path.join(t, "nan"), ref], "a NaN, whatever the tolerance")
    expect(1, [os.path.join(t, "inf"), ref], "an infinity where the reference has a number")
    expect(1, [os.path.join(t, "inf2"), os.path.join(t, "inf")], "infinity on both sides")
    expect(1, ["--exact", os.path.join(t, "inf2"), os.path.join(t, "inf")],
           "infinity on both sides, --exact")
    expect(1, [os.path.join(t, "ninf"), ref], "-inf where the reference has a number")
    expect(1, [os.path.join(t, "allnan2"), os.path.join(t, "allnan")],
           "two runs that both diverged everywhere")
    expect(1, ["--exact", os.path.join(t, "allnan2"), os.path.join(t, "allnan")],
           "two runs that both diverged everywhere, --exact")
    # --bound: the derived tolerances (npycmp.c): fp32 1.91e-6, fp16 9.78e-4, bf16 3.91e-3
    scale = float(np.max(np.abs(w)))
    for name, rel in (("b15e-7", 1.5e-6), ("b25e-7", 2.5e-6), ("b9e-4", 9e-4),
                      ("b11e-4", 1.1e-3), ("b35e-4", 3.5e-3), ("b45e-4", 4.5e-3)):
        off = w.copy()
        off[1, 2] += np.float32(rel * scale)
        save(os.path.join(t, name), {"fc1.weight": off, "fc1.bias": b})
    for prec, within, beyond in (("fp32", "b15e-7", "b25e-7"), ("fp16", "b9e-4", "b11e-4"),
                                 ("bf16", "b35e-4", "b45e-4")):
        expect(0, ["--bound", prec, os.path.join(t, within), ref], f"{prec}: within its bound")
        expect(1, ["--bound", prec, os.path.join(t, beyond), ref], f"{prec}: beyond its bound")
        expect(1, ["--bound", prec, os.path.join(t, "nan2"), os.path.join(t, "nan")],
               f"{prec}: NaN on both sides")
    expect(0, ["--bound", "fp32", "--world", "16", os.path.join(t, "b25e-7"), ref],
           "fp32 at world 16: 15 more roundings of the ranks' sum")
    expect(2, ["--bound", "fp64", os.path.join(t, "same"), ref], "--bound of no known precision")
    expect(2, ["--bound", "fp32", "--world", "0", os.path.join(t, "same"), ref], "--world 0")
    expect(2, [os.path.join(t, "f64"), ref], "float64 is refused")
    expect(2, [os.path.join(t, "nowhere"), ref], "no such directory")

finish("test_npycmp")
