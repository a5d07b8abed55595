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
import os

from gstest import check, digits, failures, finish, report, run, tmpdir

d = digits("compress_digits", seed=0)


def train(extra):
    out = os.path.join(tmpdir(), "run")
    r = run(["--mode", "ring", "--world", "2", "--model", "mlp:64-64-10", "--data",
             f"idx:{d}/train-images.idx,{d}/train-labels.idx", "--eval-data",
             f"idx:{d}/test-images.idx,{d}/test-labels.idx", "--eval", "--batch", "32", "--lr",
             "0.05", "--seed", "1", "--steps", "300", "--threads", "1", "--link", "none",
             "--repeat", "1", "--timeout", "30", "--quiet", "--out", out] + extra, timeout=200)
    if not check(r.returncode == 0, f"{extra}: exit {r.returncode}: {r.stderr[-1500:]}"):
        return None
    return report(out)["runs"][0]


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
finish("compress_digits")
