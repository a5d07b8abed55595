"""replay.py: the apply-order log of a stale ps run and its replay in one
process (bench --mode local --replay FILE; worker/apply_log.c, replay.c).

  - async, world 3, rank 2 slowed 3x, with the server in rank 0, in rank 0's
    dedicated process (--ps-dedicated) and in a process of its own
    (--ps-server-hosts over loopback), each writing the log from the process
    that holds the server: runs/<id>/apply_order.txt (beside run.json) lists every
    gradient once, each rank's steps in order; its hash after each update
    is what the rank that pushed holds after that step (steps.csv's
    --verify hash: the server's real bits, not the log's own claim); the
    replay recomputes every gradient and gets the same bits after every
    update, and its saved final parameters hash to the last update's;
  - the same log with two updates' gradients swapped, or one gradient's
    base version changed, is not replayed: exit 1, naming the update;
  - ssp:2 (world 4, rank 3 slowed 3x): the bound holds in the log (each
    gradient of step s applied in update s+1 at most 2 versions stale, some
    of them stale) and the replay gives the bits; backup 1: each update
    sums world-1 gradients until ranks finish, and the replay gives the bits;
  - several servers (--ps-servers 2, in ranks and in processes of their
    own): each writes apply_order-shard<k>.txt of its range; async and
    ssp:2 replay together bitwise from either file, the saved parameters'
    ranges are each server's last bits; one server's log swapped or
    rebased fails naming the update and the shard, a missing sibling exits
    2 naming it; backup workers over 2 servers write no log;
  - bad input: a log that is not one, --replay without --mode local (exit 2,
    a message naming the file or the flag)."""
import os
import re
import shutil

import numpy as np

from gstest import SMALL, check, finish, run, steps_csv, tmpdir

STEPS = 12
BASE = ["--mode", "ps", "--steps", str(STEPS), "--warmup", "1", "--verify"] + SMALL
ORDER = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]   # SMALL's mlp:784-32-10


def fnv(data):
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def params_hash(d):
    return fnv(b"".join(np.load(os.path.join(d, k + ".npy")).astype("<f4").tobytes()
                        for k in ORDER))


def parse(path):
    ups = []
    with open(path) as f:
        for line in f:
            m = re.match(r"update (\d+) hash ([0-9a-f]{16}) grads (.*)", line)
            if m:
                ups.append((int(m.group(1)), m.group(2),
                            [tuple(int(x) for x in g.split(":")) for g in m.group(3).split()]))
    return ups


def ps_run(extra):
    d = tmpdir()
    r = run(BASE + ["--out", d] + extra)
    logs = [os.path.join(dp, f) for dp, _, fs in os.walk(d) for f in fs
            if f == "apply_order.txt"]
    return r, d, logs[0] if len(logs) == 1 else None


def replay(log, extra=()):
    return run(["--mode", "local", "--replay", log, "--quiet"] + list(extra))


def tampered(log, ups):
    """The log's lines with two updates' gradients swapped, and with one
    gradient's base changed: well-formed logs of another run."""
    lines = open(log).read().splitlines()
    idx = [i for i, l in enumerate(lines) if l.startswith("update ")]
    # two neighbours whose gradients differ, the second's computed on a
    # version the first update may use: a well-formed log in another order
    a, b = next((i, j) for n, (i, j) in enumerate(zip(idx, idx[1:]))
                if ups[n][2] != ups[n + 1][2] and ups[n + 1][2][0][2] < ups[n][0])
    swapped = list(lines)
    swapped[a] = lines[a].split(" grads ")[0] + " grads " + lines[b].split(" grads ")[1]
    swapped[b] = lines[b].split(" grads ")[0] + " grads " + lines[a].split(" grads ")[1]
    rebased = list(lines)
    j = next(i for i in idx if int(lines[i].split(":")[-1]) > 0)
    rebased[j] = re.sub(r":(\d+)$", lambda m: ":%d" % (int(m.group(1)) - 1), lines[j])
    return (("two updates swapped", swapped), ("a gradient's base changed", rebased))


# ---- async: the server in rank 0, in rank 0's dedicated process, in a process of its own ----
def async_case(where, extra):
    r, d, log = ps_run(["--ps-sync", "async", "--world", "3", "--slow", "2:3"] + extra)
    check(r.returncode == 0 and log, f"async ({where}) writes one apply-order log: "
          f"{r.stderr[-500:]}")
    if not log:
        return
    check(os.path.exists(os.path.join(os.path.dirname(log), "run.json")),
          f"async ({where}): the log is beside the run's run.json")
    ups = parse(log)
    grads = [g for _, _, gs in ups for g in gs]
    check([u for u, _, _ in ups] == list(range(1, len(ups) + 1)) and
          all(len(gs) == 1 for _, _, gs in ups) and len(grads) == 3 * STEPS,
          f"async ({where}): {len(ups)} updates of one gradient each, every gradient once")
    for rank in range(3):
        steps = [s for rk, s, _ in grads if rk == rank]
        check(steps == list(range(STEPS)), f"{where}: rank {rank}'s steps in order: {steps}")
    # what each rank held after its step t: the version its push made
    held = {(int(row["rank"]), int(row["step"])): row["param_hash"] for row in steps_csv(d)}
    made = {(gs[0][0], gs[0][1]): h for _, h, gs in ups}
    check(held and all(held[k] == made[k] for k in made),
          f"async ({where}): each update's logged hash is what its rank holds after that "
          "step (steps.csv)")
    stale = [u - 1 - b for u, _, gs in ups for _, _, b in gs]
    check(max(stale) > 0, f"async ({where}): some gradient was stale (at most {max(stale)})")
    p = tmpdir()
    r = replay(log, ["--save-params", p])
    check(r.returncode == 0 and f"replayed {len(ups)} updates" in r.stdout,
          f"async ({where}) replay: rc {r.returncode} {r.stdout[-300:]} {r.stderr[-500:]}")
    if r.returncode == 0:
        check("%016x" % params_hash(p) == ups[-1][1],
              f"async ({where}): the replay's saved parameters are the last update's bits "
              f"({ups[-1][1]})")
    for name, new in tampered(log, ups):
        bad = os.path.join(tmpdir(), "log.txt")
        with open(bad, "w") as f:
            f.write("\n".join(new) + "\n")
        r = replay(bad)
        check(r.returncode == 1 and re.search(r"after update \d+ .* not the run's bits",
                                              r.stderr),
              f"{where}: {name}: the replay fails naming the update (rc {r.returncode}, "
              f"{r.stderr.strip()[-300:]})")


async_case("rank 0's thread", [])
async_case("--ps-dedicated", ["--ps-dedicated"])
# the server's own process needs no namespace over loopback (--link none)
async_case("--ps-server-hosts", ["--ps-server-hosts"])

# ---- ssp:2 and backup 1 ----
for extra, name in ((["--ps-sync", "ssp:2"], "ssp:2"), (["--ps-backup", "1"], "backup 1")):
    r, d, log = ps_run(extra + ["--world", "4", "--slow", "3:3"])
    check(r.returncode == 0 and log, f"{name}: one apply-order log: {r.stderr[-500:]}")
    if not log:
        continue
    ups = parse(log)
    if name == "ssp:2":
        stale = [u - 1 - b for u, _, gs in ups for _, s, b in gs]
        check(len(ups) == STEPS and all(len(gs) == 4 and all(s == u - 1 for _, s, _ in gs)
                                        for u, _, gs in ups),
              "ssp: update u sums every rank's step u-1")
        check(0 <= min(stale) and max(stale) <= 2 and max(stale) > 0,
              f"ssp:2's bound holds in the log and binds: staleness {min(stale)}..{max(stale)}")
    else:
        check(all(len(gs) == 3 for _, _, gs in ups[:STEPS // 2]) and
              all(b == u - 1 for u, _, gs in ups for _, _, b in gs),
              "backup 1: updates sum 3 gradients of the current version")
    r = replay(log)
    check(r.returncode == 0 and f"replayed {len(ups)} updates" in r.stdout,
          f"{name} replay: rc {r.returncode} {r.stdout[-300:]} {r.stderr[-500:]}")

# ---- several servers: each writes the log of its range, replayed together ----
def header(log, key):
    with open(log) as f:
        return next(int(l.split()[1]) for l in f if l.startswith(key + " "))


def sharded_case(where, extra, world, async_):
    d = tmpdir()
    r = run(BASE + ["--out", d, "--world", str(world), "--ps-servers", "2"] + extra)
    logs = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(d) for f in fs
                  if f.startswith("apply_order"))
    names = [os.path.basename(x) for x in logs]
    check(r.returncode == 0 and names == ["apply_order-shard0.txt", "apply_order-shard1.txt"],
          f"{where}: one log per server: {names} {r.stderr[-500:]}")
    if len(logs) != 2:
        return
    check([header(x, "shard") for x in logs] == [0, 1] and
          [header(x, "shards") for x in logs] == [2, 2], f"{where}: shard k of 2 in each header")
    per = [parse(x) for x in logs]
    for k, ups in enumerate(per):
        grads = [g for _, _, gs in ups for g in gs]
        if async_:
            check(all(len(gs) == 1 for _, _, gs in ups) and len(grads) == world * STEPS,
                  f"{where}: server {k} applies every gradient once, alone")
        else:
            stale = [u - 1 - b for u, _, gs in ups for _, _, b in gs]
            check(len(ups) == STEPS and all(len(gs) == world and all(s == u - 1 for _, s, _ in gs)
                                            for u, _, gs in ups) and max(stale) <= 2,
                  f"{where}: server {k}'s update u sums every rank's step u-1, at most 2 "
                  f"of its versions stale ({min(stale)}..{max(stale)})")
        for rank in range(world):
            steps = [s for rk, s, _ in grads if rk == rank]
            check(steps == list(range(STEPS)), f"{where}: server {k}: rank {rank}'s steps "
                  f"in order: {steps}")
    p = tmpdir()
    total = sum(len(u) for u in per)
    r = replay(logs[1], ["--save-params", p])
    check(r.returncode == 0 and f"replayed {total} updates" in r.stdout,
          f"{where} replay: rc {r.returncode} {r.stdout[-300:]} {r.stderr[-500:]}")
    if r.returncode == 0:
        flat = b"".join(np.load(os.path.join(p, k + ".npy")).astype("<f4").tobytes()
                        for k in ORDER)
        n0 = header(logs[0], "params")
        parts = (flat[:4 * n0], flat[4 * n0:])
        check(len(flat) == 4 * (n0 + header(logs[1], "params")) and
              all("%016x" % fnv(parts[k]) == per[k][-1][1] for k in range(2)),
              f"{where}: the replay's saved parameters are each server's last update's bits "
              "in range order")
    if not async_:
        return
    # one server's log tampered with, the other beside it as written
    for name, new in tampered(logs[1], per[1]):
        t = tmpdir()
        shutil.copy(logs[0], t)
        with open(os.path.join(t, "apply_order-shard1.txt"), "w") as f:
            f.write("\n".join(new) + "\n")
        r = replay(os.path.join(t, "apply_order-shard0.txt"))
        # (a gradient's parameters are every server's: either may notice first)
        check(r.returncode == 1 and re.search(r"after update \d+ of shard [01] of 2 .* not "
                                              r"the run's bits", r.stderr),
              f"{where}: server 1's log with {name}: the replay fails naming the update "
              f"and the shard (rc {r.returncode}, {r.stderr.strip()[-300:]})")
    t = tmpdir()
    shutil.copy(logs[1], t)
    r = replay(os.path.join(t, "apply_order-shard1.txt"))
    check(r.returncode == 2 and "apply_order-shard0.txt" in r.stderr,
          f"{where}: server 0's log missing: exit 2 naming it ({r.returncode}, "
          f"{r.stderr.strip()[-300:]})")


sharded_case("async over 2 servers in ranks", ["--ps-sync", "async", "--slow", "2:3"], 3, True)
sharded_case("async over 2 servers of their own",
             ["--ps-sync", "async", "--slow", "2:3", "--ps-server-hosts"], 3, True)
sharded_case("ssp:2 over 2 servers", ["--ps-sync", "ssp:2", "--slow", "3:3"], 4, False)
# backup workers drop parts at one server that another applied: no log
d = tmpdir()
r = run(BASE + ["--out", d, "--world", "3", "--ps-servers", "2", "--ps-backup", "1"])
logs = [f for _, _, fs in os.walk(d) for f in fs if f.startswith("apply_order")]
check(r.returncode == 0 and not logs, f"backup over 2 servers writes no log: {logs} "
      f"{r.stderr[-300:]}")

# ---- bad input ----
junk = os.path.join(tmpdir(), "junk.txt")
with open(junk, "w") as f:
    f.write("hello\n")
r = replay(junk)
check(r.returncode == 2 and "not an apply-order log" in r.stderr, f"junk: {r.stderr.strip()}")
r = replay(os.path.join(tmpdir(), "missing.txt"))
check(r.returncode == 2 and "missing.txt" in r.stderr, f"missing file: {r.stderr.strip()}")
r = run(["--mode", "ps", "--replay", junk] + SMALL)
check(r.returncode == 2 and "--mode local" in r.stderr, f"ps --replay: {r.stderr.strip()}")
finish("replay")
