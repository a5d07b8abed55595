#!/usr/bin/python3
"""cli.py: `bench` as a user meets it.

  - --help documents every flag; each bad flag or value is a usage error
    (exit 2) whose message names the flag;
  - file problems are clear errors (exit 1) naming the file;
  - numpy reads the .npy files bench writes, and bench reads numpy's
    (bit for bit), and refuses float64 ones naming the file;
  - same seed twice: byte-identical checkpoints; another seed: different;
  - progress lines and the final throughput line carry numbers; --eval;
  - SIGINT stops a long run promptly with a non-zero exit, no hang.

    cli.py BENCH
"""
import os
import re
import signal
import subprocess
import tempfile
import time

import numpy as np

import gstest
from gstest import BENCH, check, finish

# bench writes results/<stamp>-... under its working directory when no --out
# is given: run it in a directory of its own, never the source tree
WORK = gstest.tmpdir()


def run(args, timeout=120):
    return gstest.run(args, timeout, cwd=WORK)


# one process (--mode local): the single-process reference trainer
SMALL = ["--mode", "local", "--model", "mlp:784-16-10", "--synthetic-samples", "300",
         "--batch", "32", "--threads", "1"]

# ---- help and usage errors
r = run(["--help"])
check(r.returncode == 0, "--help exits 0")
for flag in ["--model", "--data", "--batch", "--steps", "--lr", "--momentum", "--weight-decay",
             "--seed", "--no-shuffle", "--drop-last", "--precision", "--loss-scale",
             "--load-params", "--save-params", "--threads", "--eval", "--compute-ms",
             "--bucket-mb", "--first-bucket-mb", "--device", "--synthetic-samples"]:
    check(flag in r.stdout, f"--help documents {flag}")

bad = [
    (["--batch", "0"], "--batch"), (["--batch", "abc"], "--batch"), (["--batch=-3"], "--batch"),
    (["--steps", "-1"], "--steps"), (["--lr", "x"], "--lr"), (["--lr", "nan"], "--lr"),
    (["--momentum", "-1"], "--momentum"), (["--weight-decay", "1e99"], "--weight-decay"),
    (["--precision", "fp8"], "--precision"), (["--loss-scale", "0"], "--loss-scale"),
    (["--loss-scale", "auto"], "--loss-scale"), (["--threads", "0"], "--threads"),
    (["--device", "tpu"], "--device"), (["--bucket-mb", "-1"], "--bucket-mb"),
    (["--first-bucket-mb", "x"], "--first-bucket-mb"), (["--compute-ms", "inf"], "--compute-ms"),
    (["--seed", "-5"], "--seed"), (["--synthetic-samples", "0"], "--synthetic-samples"),
    (["--warmup", "x"], "--warmup"), (["--log-every", "0"], "--log-every"),
    (["--save-params", ""], "--save-params"), (["--frobnicate"], "--frobnicate"),
    (["--batch"], "--batch"), (["stray"], "stray"),
    (["--model", "mlp:784-abc"], "mlp:784-abc"), (["--model", "alexnet"], "alexnet"),
    (["--model", "mlp:100-10"], "mlp:784-"),          # synthetic is fine, see below
]
for args, name in bad[:-1]:
    r = run(args)
    check(r.returncode == 2, f"{args}: exit {r.returncode}, expected 2 ({r.stderr.strip()})")
    check(name in r.stderr, f"{args}: message does not name {name}: {r.stderr.strip()}")

with tempfile.TemporaryDirectory(prefix="gs_cli_") as tmp:
    # ---- data errors
    r = run(SMALL + ["--data", f"idx:{tmp}/none.idx,{tmp}/none2.idx", "--steps", "1"])
    # found before any rank starts: a usage error
    check(r.returncode == 2 and f"{tmp}/none.idx" in r.stderr, f"missing file: {r.stderr}")
    img, lab = f"{tmp}/img", f"{tmp}/lab"
    with open(img, "wb") as f:
        f.write(bytes([0, 0, 8, 3]) + (10).to_bytes(4, "big") + (28).to_bytes(4, "big") * 2)
        f.write(bytes(10 * 28 * 28))
    with open(lab, "wb") as f:
        f.write(bytes([0, 0, 8, 1]) + (10).to_bytes(4, "big") + bytes(range(10)))
    r = run(["--mode", "local", "--model", "mlp:100-10", "--data", f"idx:{img},{lab}", "--steps", "1"])
    check(r.returncode == 2 and "mlp:784-" in r.stderr and img in r.stderr,
          f"input size mismatch: {r.returncode} {r.stderr}")
    r = run(["--mode", "local", "--model", "mlp:784-10", "--data", f"idx:{img},{lab}", "--steps",
             "3", "--threads", "1", "--batch", "4"])
    check(r.returncode == 0, f"small IDX run: {r.stderr}")

    # ---- numpy writes, bench reads and writes back, numpy reads
    rng = np.random.default_rng(1)
    src = f"{tmp}/np_params"
    os.makedirs(src)
    shapes = {"fc1.weight": (16, 784), "fc1.bias": (16,), "fc2.weight": (10, 16), "fc2.bias": (10,)}
    arrays = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    for k, a in arrays.items():
        np.save(f"{src}/{k}.npy", a)
    r = run(SMALL + ["--steps", "0", "--load-params", src, "--save-params", f"{tmp}/back"])
    check(r.returncode == 0, f"load/save: {r.stderr}")
    for k, a in arrays.items():
        b = np.load(f"{tmp}/back/{k}.npy")
        check(b.dtype == np.float32 and b.shape == a.shape and np.array_equal(a, b),
              f"{k} did not survive numpy -> bench -> numpy")
    np.save(f"{src}/fc2.bias.npy", np.zeros(10))  # float64
    r = run(SMALL + ["--steps", "0", "--load-params", src])
    check(r.returncode == 2 and "fc2.bias.npy" in r.stderr and "<f8" in r.stderr,
          f"float64 checkpoint: {r.stderr}")

    # ---- determinism: same seed, byte-identical checkpoints
    def ckpt(seed, name, extra=()):
        d = f"{tmp}/{name}"
        r = run(SMALL + ["--steps", "20", "--seed", str(seed), "--save-params", d, "--quiet"]
                + list(extra))
        check(r.returncode == 0, f"training run: {r.stderr}")
        return {f: open(f"{d}/{f}", "rb").read() for f in sorted(os.listdir(d))}
    a, b, c = ckpt(5, "a"), ckpt(5, "b"), ckpt(6, "c")
    check(a == b and len(a) == 4, "same seed: checkpoints differ")
    check(a != c, "different seeds: same checkpoints")
    check(ckpt(5, "d", ["--precision", "bf16"]) == ckpt(5, "e", ["--precision", "bf16"]),
          "bf16, same seed: checkpoints differ")
    # saving over an old checkpoint replaces it; over a foreign directory it refuses
    r = run(SMALL + ["--steps", "2", "--seed", "9", "--save-params", f"{tmp}/a", "--quiet"])
    check(r.returncode == 0 and ckpt(5, "a") == b, "replacing a checkpoint")
    open(f"{tmp}/a/README", "w").close()
    r = run(SMALL + ["--steps", "1", "--save-params", f"{tmp}/a", "--quiet"])
    check(r.returncode == 1 and "README" in r.stderr, f"foreign file in checkpoint dir: {r.stderr}")
    check(not [f for f in os.listdir(tmp) if ".tmp-" in f], "temporary directories left behind")

# ---- output
r = run(SMALL + ["--steps", "20", "--eval", "--log-every", "5"])
check(r.returncode == 0, f"run: {r.stderr}")
steps = re.findall(r"^step +(\d+)/20 .* loss (\d+\.\d+) .* (\d+) samples/s$", r.stdout, re.M)
check([s[0] for s in steps] == ["5", "10", "15", "20"], f"progress lines: {r.stdout}")
final = re.search(r"throughput (\d+) samples/s", r.stdout)
check(final is not None and int(final.group(1)) > 0, f"final line: {r.stdout}")
ev = re.search(r"eval accuracy (\d+\.\d+)% loss (\d+\.\d+)", r.stdout)
check(ev is not None, f"--eval line: {r.stdout}")

# ---- profiles run and report a dummy loss
r = run(["--mode", "local", "--model", "resnet50", "--compute-ms", "5", "--steps", "2", "--batch",
         "8", "--threads", "1", "--quiet"])
check(r.returncode == 0 and "throughput" in r.stdout, f"resnet50 profile: {r.stderr}")

# ---- --device cuda without a GPU is a clear error, not a crash
if not os.path.exists("/dev/nvidia0"):
    r = run(SMALL + ["--device", "cuda", "--steps", "1"])
    check(r.returncode == 1 and "cuda" in r.stderr.lower() and "Traceback" not in r.stderr,
          f"--device cuda without a GPU: exit {r.returncode}, {r.stderr}")

# ---- SIGINT: prompt, non-zero, says so
p = subprocess.Popen([BENCH] + SMALL + ["--steps", "100000000", "--quiet"], cwd=WORK,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
time.sleep(1.0)
t0 = time.time()
p.send_signal(signal.SIGINT)
try:
    out, err = p.communicate(timeout=20)
    check(p.returncode != 0 and "interrupted" in err, f"SIGINT: exit {p.returncode}, {err}")
    check(time.time() - t0 < 10, "SIGINT took too long")
except subprocess.TimeoutExpired:
    p.kill()
    check(False, "SIGINT: bench did not stop")

finish("cli")
