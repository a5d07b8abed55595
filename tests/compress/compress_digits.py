#!/usr/bin/python3
"""compress_digits.py BENCH: PowerSGD with error feedback converges on real
data. scikit-learn's 8x8 digits (tools/digits_idx.py, 1,437 training and
360 held-out images), mlp:64-64-10 in the ring at world 2, the same budget
of 300 steps uncompressed and with --compress powersgd:2 (both weight
matrices sent as rank-2 factors, about 10x fewer bytes): the loss over the
training set (--eval) and over the held-out set (--eval-data) after the
budget is within 5% of the uncompressed run's, and the compressed run did
send fewer bytes (so the comparison is not of two plain runs).
Skips (77) where python3-sklearn is not installed."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

BENCH = os.path.abspath(sys.argv[1])
TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                    "digits_idx.py")
try:
    import sklearn  # noqa: F401
except ImportError:
    print("compress_digits: skipped: python3-sklearn is not installed (./install.sh --deps)")
    sys.exit(77)

failures = []
tmp = tempfile.mkdtemp(prefix="gs_compress_digits_")


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


env = {k: v for k, v in os.environ.items()
       if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                    "GS_LAUNCHED", "GS_RUN_DIR")}
d = os.path.join(tmp, "digits")
r = subprocess.run(["/usr/bin/python3", TOOL, d, "--seed", "0"], capture_output=True, text=True)
check(r.returncode == 0, f"digits_idx.py: {r.stderr}")


def train(extra):
    out = os.path.join(tmp, "run-" + "-".join(extra).replace(":", ""))
    r = subprocess.run(
        [BENCH, "--mode", "ring", "--world", "2", "--model", "mlp:64-64-10", "--data",
         f"idx:{d}/train-images.idx,{d}/train-labels.idx", "--eval-data",
         f"idx:{d}/test-images.idx,{d}/test-labels.idx", "--eval", "--batch", "32", "--lr",
         "0.05", "--seed", "1", "--steps", "300", "--threads", "1", "--link", "none",
         "--repeat", "1", "--timeout", "30", "--quiet", "--out", out] + extra,
        capture_output=True, text=True, timeout=200, env=env)
    if not check(r.returncode == 0, f"{extra}: exit {r.returncode}: {r.stderr[-1500:]}"):
        return None
    with open(os.path.join(out, "report.json")) as f:
        return json.load(f)["runs"][0]


if not failures:
    plain, psgd = train([]), train(["--compress", "powersgd:2"])
    if plain and psgd:
        for key in ("eval_loss", "heldout_loss"):
            a, b = plain[key], psgd[key]
            print(f"{key} after 300 steps: none {a:.5f}, powersgd:2 {b:.5f} "
                  f"({(b / a - 1) * 100:+.1f}%)")
            check(b <= 1.05 * a, f"{key}: powersgd:2 {b} is more than 5% above {a}")
        print(f"held-out accuracy: none {plain['heldout_accuracy']:.4f}, powersgd:2 "
              f"{psgd['heldout_accuracy']:.4f}")
        sent = [p["bytes_sent"] for p in psgd["per_rank"]]
        sent0 = [p["bytes_sent"] for p in plain["per_rank"]]
        print(f"sent per step: none {max(sent0):.0f} B, powersgd:2 {max(sent):.0f} B")
        check(max(sent) * 5 < min(sent0), f"powersgd:2 sent {sent} against {sent0}")
shutil.rmtree(tmp, ignore_errors=True)
if failures:
    print(f"compress_digits: {len(failures)} failure(s)")
    sys.exit(1)
print("compress_digits: all checks passed")
