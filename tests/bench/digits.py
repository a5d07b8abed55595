"""digits.py: real data that installs from Debian: scikit-learn's 8x8 digits
written to IDX by tools/digits_idx.py, trained on and evaluated held out.

  - the script writes four IDX files (1,797 images in all, stratified),
    the same bytes for the same seed and another split for another seed;
  - `bench --data idx:... --eval-data idx:...` trains mlp:64-64-10 on the
    training split and reports held-out accuracy (report.json and table)
    well above chance; --eval-data on a file that is missing or of another
    shape fails with a message naming it.
Skips (77) where python3-sklearn is not installed."""
import hashlib
import os
import struct

from common import check, digits, finish, report, run, tmpdir


def make(seed):
    return digits("digits", seed)


def idx(path):
    with open(path, "rb") as f:
        b = f.read()
    magic, n = struct.unpack(">II", b[:8])
    dims = [n] + list(struct.unpack(">" + "I" * ((magic & 0xff) - 1), b[8:4 * (magic & 0xff) + 4]))
    return magic, dims, hashlib.sha256(b).hexdigest()


a, b, c = make(0), make(0), make(1)
ti, tl = idx(os.path.join(a, "train-images.idx")), idx(os.path.join(a, "train-labels.idx"))
hi, hl = idx(os.path.join(a, "test-images.idx")), idx(os.path.join(a, "test-labels.idx"))
check(ti[0] == 0x803 and ti[1][1:] == [8, 8] and tl[0] == 0x801, f"headers {ti[:2]} {tl[:2]}")
check(ti[1][0] + hi[1][0] == 1797 and ti[1][0] == tl[1][0] and hi[1][0] == hl[1][0] == 360,
      f"split {ti[1][0]} + {hi[1][0]} of 1797")
same = all(idx(os.path.join(a, f))[2] == idx(os.path.join(b, f))[2]
           for f in ("train-images.idx", "test-labels.idx"))
check(same, "the same seed wrote different files")
check(idx(os.path.join(c, "test-images.idx"))[2] != hi[2], "another seed, the same split")

data = f"idx:{a}/train-images.idx,{a}/train-labels.idx"
held = f"idx:{a}/test-images.idx,{a}/test-labels.idx"
base = ["--model", "mlp:64-64-10", "--data", data, "--batch", "32", "--lr", "0.05",
        "--threads", "1", "--timeout", "20", "--link", "none", "--repeat", "1", "--steps", "300"]
for mode in (["--mode", "local"], ["--mode", "ring", "--world", "2"]):
    out = tmpdir()
    r = run(mode + base + ["--eval-data", held, "--out", out, "--log-every", "1000"])
    if check(r.returncode == 0, f"{mode}: exit {r.returncode}: {r.stderr[-600:]}"):
        run0 = report(out)["runs"][0]
        acc = run0["heldout_accuracy"]
        check(acc is not None and acc > 0.85, f"{mode}: held-out accuracy {acc}")
        check(run0["heldout_loss"] is not None and run0["heldout_loss"] < 0.6,
              f"{mode}: held-out loss {run0['heldout_loss']}")
        check("held-out accuracy" in r.stdout, f"{mode}: no held-out line in the table")
        check(run0["accuracy"] is None, f"{mode}: training accuracy without --eval")

r = run(["--mode", "local"] + base[:-1] + ["5", "--eval-data", f"idx:{a}/nope.idx,{a}/x.idx",
                                         "--out", tmpdir() + "/r"])
check(r.returncode != 0 and "nope.idx" in r.stderr,
      f"missing file: {r.returncode} {r.stderr[-300:]}")
r = run(["--mode", "local", "--model", "mlp:784-16-10", "--steps", "2", "--threads", "1",
         "--link", "none", "--eval-data", held, "--out", tmpdir() + "/r"])
check(r.returncode != 0 and "test-images.idx" in r.stderr,
      f"wrong shape: {r.returncode} {r.stderr[-300:]}")
finish("bench_digits")
