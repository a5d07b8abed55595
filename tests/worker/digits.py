"""digits.py: real data that installs from Debian: scikit-learn's 8x8 digits
written to IDX by tools/digits_idx.py, trained on and evaluated held out.

  - the script writes four IDX files (1,797 images in all, stratified),
    the same bytes for the same seed and another split for another seed;
  - `bench --data idx:... --eval-data idx:...` trains mlp:64-64-10 on the
    training split and reports held-out accuracy (report.json and table)
    well above chance; --eval-data on a file that is missing or of another
    shape fails with a message naming it;
  - --size 32 writes the same images as lenet's 3 x 32 x 32 input, and lenet
    learns them (held-out accuracy above 0.7 after 150 steps).
Skips (77) where python3-sklearn is not installed."""
import hashlib
import os
import struct
import subprocess

from gstest import DIGITS_TOOL, check, digits, finish, report, run, tmpdir


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

# --size 32: the same digits as lenet's 3 x 32 x 32 input (4 x 4 blocks in three
# equal channels), which lenet learns: held-out accuracy after 150 steps
d32 = tmpdir()
r32 = subprocess.run(["/usr/bin/python3", DIGITS_TOOL, d32, "--seed", "0", "--size", "32"],
                     capture_output=True, text=True)
check(r32.returncode == 0, f"digits_idx.py --size 32: {r32.stderr}")
li = idx(os.path.join(d32, "train-images.idx"))
check(li[0] == 0x804 and li[1][1:] == [3, 32, 32] and li[1][0] == ti[1][0],
      f"--size 32 header {li[:2]}")
with open(os.path.join(a, "train-images.idx"), "rb") as f8, \
        open(os.path.join(d32, "train-images.idx"), "rb") as f32:
    p8, p32 = f8.read()[16:16 + 64], f32.read()[20:20 + 3 * 1024]
check(all(p32[c * 1024 + y * 32 + x] == p8[(y // 4) * 8 + x // 4]
          for c in range(3) for y in range(32) for x in range(32)),
      "--size 32: the first image is not the 8x8 one in 4x4 blocks, three times")
out = tmpdir()
r = run(["--mode", "local", "--model", "lenet", "--data",
         f"idx:{d32}/train-images.idx,{d32}/train-labels.idx", "--eval-data",
         f"idx:{d32}/test-images.idx,{d32}/test-labels.idx", "--batch", "32", "--lr", "0.05",
         "--threads", "1", "--timeout", "20", "--link", "none", "--steps", "150", "--out", out,
         "--log-every", "1000"])
if check(r.returncode == 0, f"lenet on --size 32: exit {r.returncode}: {r.stderr[-600:]}"):
    acc = report(out)["runs"][0]["heldout_accuracy"]
    print(f"lenet on the digits at 32 x 32, 150 steps: held-out accuracy {acc}")
    check(acc is not None and acc > 0.7, f"lenet: held-out accuracy {acc}")

r = run(["--mode", "local"] + base[:-1] + ["5", "--eval-data", f"idx:{a}/nope.idx,{a}/x.idx",
                                         "--out", tmpdir() + "/r"])
check(r.returncode != 0 and "nope.idx" in r.stderr,
      f"missing file: {r.returncode} {r.stderr[-300:]}")
r = run(["--mode", "local", "--model", "mlp:784-16-10", "--steps", "2", "--threads", "1",
         "--link", "none", "--eval-data", held, "--out", tmpdir() + "/r"])
check(r.returncode != 0 and "test-images.idx" in r.stderr,
      f"wrong shape: {r.returncode} {r.stderr[-300:]}")
finish("bench_digits")
