#!/usr/bin/python3
"""topk_ps.py BENCH: --compress topk:FRACTION in --mode ps and in the ring, end
to end on the real bench, loopback.

  - topk:1 keeps every entry, and its push is then the dense bucket (2k >= n
    travels dense, compress.h): the parameters are bitwise those of
    --compress none, at world 2 and 3, with several buckets, with --overlap
    and with the dedicated server; topk:0.3 (sparse pushes) changes them and
    every rank still holds the same bits after every step (--verify);
  - in the ring (an all-gather of the kept entries, summed in rank order):
    the ps' bits at world 2 and 3, topk:1 the plain ring's at world 2, and
    N - 1 payloads of 8k bytes sent per step;
  - on scikit-learn's digits (mlp:64-64-10, world 2, 300 steps, the
    compress_digits budget) topk:0.1 with error feedback ends within 5% of
    the uncompressed run's loss over the training and the held-out set, and
    the worker's bytes pushed per step are about 2 x FRACTION of the dense
    push (an index and a value per kept entry: 0.9x to 1.15x of that);
  - what top-k does not run with is refused with a message naming the flag
    to give instead.
Skips the digits part (not the rest) where python3-sklearn is missing."""
from gstest import (check, digits, failures, finish, load_params, ranks_agree, report, run,
                    same_bits, skip_part, steps_csv, tmpdir)

BASE = ["--synthetic-samples", "2048", "--threads", "1", "--timeout", "20", "--quiet",
        "--link", "none", "--repeat", "1", "--no-shuffle", "--lr", "0.05", "--seed", "3",
        "--warmup", "0", "--batch", "16", "--model", "mlp:784-64-32-10", "--mode", "ps",
        "--verify"]


def train(world, extra, steps=6, mode="ps"):
    d = tmpdir()
    base = BASE[:-2] + [mode, "--verify"]
    r = run(base + ["--world", str(world), "--steps", str(steps), "--out", d, "--save-params",
                    d + "/p"] + extra)
    if not check(r.returncode == 0,
                 f"{mode} {world} {extra}: exit {r.returncode}: {r.stderr[-1500:]}"):
        return None, []
    return load_params(d + "/p"), steps_csv(d)


# topk:1 against none (0.05 MiB buckets: the model's 52,650 floats in 5)
for world, extra in ((2, []), (3, ["--bucket-mb", "0.05"]), (2, ["--bucket-mb", "0.05",
                                                                  "--overlap"]),
                     (2, ["--ps-dedicated"])):
    plain, _ = train(world, extra)
    top1, rows1 = train(world, extra + ["--compress", "topk:1"])
    ok = check(same_bits(plain, top1), f"world {world} {extra}: topk:1 is not bitwise none")
    check(ranks_agree(rows1), f"world {world} {extra}: topk:1 ranks disagree")
    top3, rows3 = train(world, extra + ["--compress", "topk:0.3"])
    check(top3 is not None and not same_bits(plain, top3),
          f"world {world} {extra}: topk:0.3 left the parameters as none")
    check(ranks_agree(rows3), f"world {world} {extra}: topk:0.3 ranks disagree")
    print(f"world {world} {' '.join(extra) or '(defaults)'}: topk:1 bitwise none: {ok}; "
          f"topk:0.3 differs, ranks agree")

# the ring: an all-gather of every rank's kept entries, summed in rank order
# as the ps server sums pushes (allreduce/topk_gather.h): the ps' bits at world
# 2 and 3, several buckets; topk:1 is the plain ring's bits at world 2 (a sum
# of two is the same either way)
for world in (2, 3):
    extra = ["--compress", "topk:0.3", "--bucket-mb", "0.05"]
    ps3, _ = train(world, extra)
    ring3, rrows = train(world, extra, mode="ring")
    ok = check(same_bits(ps3, ring3), f"world {world}: ring topk:0.3 is not the ps' bits")
    check(ranks_agree(rrows), f"world {world}: ring topk:0.3 ranks disagree")
    print(f"ring topk:0.3 world {world}: the ps' bits: {ok}")
plain_ring, _ = train(2, [], mode="ring")
ring1, _ = train(2, ["--compress", "topk:1"], mode="ring")
check(same_bits(plain_ring, ring1), "ring topk:1 at world 2 is not the plain ring's bits")
# bytes: every rank sends N - 1 payloads of 8k bytes per step (52,650 floats
# in one bucket at topk:0.01: k = 527), against 2(N-1)/N x 4n for the dense ring
_, rr = train(3, ["--compress", "topk:0.01"], mode="ring")
_, pr = train(3, [], mode="ring")
sent = [int(r["bytes_sent"]) for r in rr if r["rank"] == "0"]
dense = [int(r["bytes_sent"]) for r in pr if r["rank"] == "0"]
want = 2 * 8 * 527
got = sum(sent) / max(len(sent), 1)
print(f"ring topk:0.01 world 3: rank 0 sent {got:.0f} B per step, (N-1) x 8k = {want}; the dense "
      f"ring {sum(dense) / max(len(dense), 1):.0f} B")
check(want <= got <= 1.2 * want + 4096, f"ring topk:0.01 sent {got:.0f} B per step, not about "
      f"{want}")

# refusals, each naming what to give
for args, words in (
        (["--mode", "ring", "--compress", "topk:0.1", "--algo", "hier"], "--algo hier"),
        (["--mode", "ring", "--compress", "topk:0.1", "--ring-period", "2"], "--ring-period"),
        (["--mode", "local", "--world", "1", "--compress", "topk:0.1"], "--mode local"),
        (["--compress", "topk:0.1", "--ps-servers", "2"], "--ps-servers"),
        (["--compress", "topk:0.1", "--ps-sync", "ssp:1"], "--ps-sync"),
        (["--compress", "topk:0.1", "--ps-sync", "bsp", "--ps-backup", "1"], "--ps-backup"),
        (["--compress", "topk:0.1", "--ps-local-reduce"], "--ps-local-reduce"),
        (["--compress", "topk:0.1", "--loss-scale", "8"], "--loss-scale"),
        (["--compress", "topk:0.1", "--precision", "bf16"], "--precision fp32"),
        (["--compress", "topk:0.1", "--device", "cuda"], "--device cuda"),
        (["--compress", "topk:0"], "above 0 and at most 1"),
        (["--compress", "topk:1.5"], "above 0 and at most 1"),
        (["--compress", "topk:"], "topk:0.1")):
    r = run(BASE[:-1] + ["--world", "2", "--steps", "2", "--out", tmpdir()] + args)
    check(r.returncode != 0 and words in r.stderr and "Traceback" not in r.stderr
          and "Sanitizer" not in r.stderr,
          f"{args}: exit {r.returncode}, stderr {r.stderr.strip()[:300]}")

d = digits("topk_ps", seed=0, required=False)
if d is None:
    skip_part("the digits part", "python3-sklearn is not installed (./install.sh --deps)")
if d and not failures:
    def digits_run(extra):
        out = tmpdir()
        r = run(["--mode", "ps", "--world", "2", "--model", "mlp:64-64-10", "--data",
                 f"idx:{d}/train-images.idx,{d}/train-labels.idx", "--eval-data",
                 f"idx:{d}/test-images.idx,{d}/test-labels.idx", "--eval", "--batch", "32",
                 "--lr", "0.05", "--seed", "1", "--steps", "300", "--threads", "1", "--link",
                 "none", "--repeat", "1", "--timeout", "30", "--quiet", "--out", out] + extra,
                timeout=200)
        if not check(r.returncode == 0, f"{extra}: exit {r.returncode}: {r.stderr[-1500:]}"):
            return None, []
        return report(out)["runs"][0], steps_csv(out)

    (plain, prow), (top, trow) = digits_run([]), digits_run(["--compress", "topk:0.1"])
    if plain and top:
        for key in ("eval_loss", "heldout_loss"):
            a, b = plain[key], top[key]
            print(f"{key} after 300 steps: none {a:.5f}, topk:0.1 {b:.5f} "
                  f"({(b / a - 1) * 100:+.1f}%)")
            check(b <= 1.05 * a, f"{key}: topk:0.1 {b} is more than 5% above none's {a}")
        print(f"held-out accuracy: none {plain['heldout_accuracy']:.4f}, topk:0.1 "
              f"{top['heldout_accuracy']:.4f}")

        # rank 1 is a worker over TCP: what it sends is its pushes
        def pushed(rows):
            b = [int(r["bytes_sent"]) for r in rows if r["rank"] == "1"]
            return sum(b) / len(b) if b else 0.0

        bp, bt = pushed(prow), pushed(trow)
        ratio = bt / max(bp, 1)
        print(f"rank 1 pushed per step: none {bp:.0f} B, topk:0.1 {bt:.0f} B ({ratio:.3f} of "
              f"dense; 2 x FRACTION = 0.2)")
        check(0.9 * 0.2 <= ratio <= 1.15 * 0.2, f"topk:0.1 pushed {ratio:.3f} of dense, not "
              "about 0.2")
finish("topk_ps")
