#!/usr/bin/python3
"""digits_idx.py: scikit-learn's bundled 8x8 digits (1,797 images, Debian's
python3-sklearn) as IDX files that `bench --data idx:...` reads, with a
seeded held-out split for `--eval-data`.

    /usr/bin/python3 tools/digits_idx.py DIR [--test 0.2] [--seed 0] [--size 8|32]
    bench --model mlp:64-64-10 --data idx:DIR/train-images.idx,DIR/train-labels.idx \\
          --eval-data idx:DIR/test-images.idx,DIR/test-labels.idx

Writes DIR/{train,test}-{images,labels}.idx: images as MNIST's unsigned-byte
IDX (magic 0x803, N x 8 x 8; 0x804, N x 3 x 32 x 32 with --size 32, for
lenet), labels 0x801. The digits' pixels are 0..16;
they are scaled to 0..255 (round(v * 255 / 16)) so that bench's byte / 255
gives v / 16. The split is stratified by label and fixed by --seed. Each
file is written to a temporary name and renamed, so a reader never sees a
half-written one."""
import argparse
import os
import struct
import sys

import numpy as np


def write_idx(path, arr, magic):
    """arr: uint8 array; magic 0x800 | its dimensions (0x803 images, 0x804 with
    channels, 0x801 labels)"""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack(">I", magic))
        for d in arr.shape:
            f.write(struct.pack(">I", d))
        f.write(np.ascontiguousarray(arr, dtype=np.uint8).tobytes())
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="where the four .idx files go (made if missing)")
    ap.add_argument("--test", type=float, default=0.2, help="held-out share, in (0, 1) [0.2]")
    ap.add_argument("--seed", type=int, default=0, help="the split's seed [0]")
    ap.add_argument("--size", type=int, default=8, choices=(8, 32),
                    help="8: the images as they are; 32: each pixel 4 x 4, in three equal "
                         "channels (lenet's 3 x 32 x 32 input) [8]")
    a = ap.parse_args()
    if not 0 < a.test < 1:
        sys.exit(f"digits_idx.py: --test {a.test}: a share in (0, 1), e.g. 0.2")
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError:
        sys.exit("digits_idx.py: scikit-learn is missing: apt-get install python3-sklearn "
                 "(or ./install.sh --deps), and run this with /usr/bin/python3")
    d = load_digits()
    x = np.rint(d.images * (255.0 / 16.0)).clip(0, 255).astype(np.uint8)
    if a.size == 32:  # N x 3 x 32 x 32: 4 x 4 blocks, grey in three channels
        x = np.repeat(np.kron(x, np.ones((1, 4, 4), dtype=np.uint8))[:, None], 3, axis=1)
    y = d.target.astype(np.uint8)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=a.test, random_state=a.seed,
                                          stratify=y)
    os.makedirs(a.dir, exist_ok=True)
    for name, arr in (("train-images.idx", xtr), ("train-labels.idx", ytr),
                      ("test-images.idx", xte), ("test-labels.idx", yte)):
        write_idx(os.path.join(a.dir, name), arr, 0x800 | arr.ndim)
    print(f"digits: {len(ytr)} training and {len(yte)} held-out {a.size}x{a.size} images "
          f"(seed {a.seed}) in {a.dir}")


if __name__ == "__main__":
    main()
