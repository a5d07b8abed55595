"""ps_sync_sharded.py: the ps consistency models with a sharded ps
(--ps-servers K, and K servers in processes of their own with
--ps-server-hosts): each server applies on arrival or holds by its own
clock (its own version count), over its key range.

  - ssp:0 and --ps-backup 0 over 2 servers give, step by step (--verify's
    hashes) and at the end (saved .npy), the bits of bsp over 2 servers,
    in the ranks' threads and in processes of their own;
  - ssp:2 over 2 servers behind a 4x straggler: every gradient's staleness
    (steps.csv: the stalest server's) is 0..2 and some is stale; a worker
    that ignores the bound (GS_TEST_PS_SKIP_WAIT) makes a server fail the
    job, naming ssp;
  - --ps-backup 1 over 2 servers behind a 6x straggler: its gradients are
    dropped more than any other rank's (-1), and the run ends (the ranks
    finish far apart: each says goodbye to every server before it waits
    for its own);
  - async over 2 servers: every rank finishes every step, staleness
    recorded."""
import os

from gstest import SMALL, check, finish, load_params, run, same_bits, steps_csv, tmpdir

STEPS = 10


def train(world, extra, env=None):
    d, p = tmpdir(), tmpdir()
    r = run(["--mode", "ps", "--world", str(world), "--steps", str(STEPS), "--warmup", "1",
             "--verify", "--ps-servers", "2", "--out", d, "--save-params",
             os.path.join(p, "x")] + SMALL + extra, env=env)
    return r, d, os.path.join(p, "x")


def hashes(d):
    h = {}
    for row in steps_csv(d):
        h.setdefault(int(row["step"]), set()).add(row["param_hash"])
    return h


for own in ([], ["--ps-server-hosts"]):
    r, bsp_d, bsp_p = train(3, own)
    if not check(r.returncode == 0, f"bsp over 2 servers {own}: {r.stderr[-600:]}"):
        continue
    for extra in (["--ps-sync", "ssp:0"], ["--ps-backup", "0"]):
        r, d, p = train(3, own + extra)
        if not check(r.returncode == 0, f"{extra} {own}: {r.stderr[-600:]}"):
            continue
        check(hashes(d) == hashes(bsp_d) and all(len(v) == 1 for v in hashes(d).values()),
              f"{extra} over 2 servers {own}: every step's parameters are bsp's")
        check(same_bits(load_params(p), load_params(bsp_p)),
              f"{extra} over 2 servers {own}: the saved parameters are bsp's bits")


def staleness(d):
    by = {}
    for row in steps_csv(d):
        by.setdefault(int(row["rank"]), []).append(int(row["staleness"]))
    return by


r, d, _ = train(4, ["--ps-sync", "ssp:2", "--slow", "3:4"])
if check(r.returncode == 0, f"ssp:2 over 2 servers: {r.stderr[-600:]}"):
    s = [x for v in staleness(d).values() for x in v]
    check(len(s) == 4 * STEPS and 0 <= min(s) and max(s) <= 2 and max(s) > 0,
          f"ssp:2 over 2 servers: staleness {min(s)}..{max(s)} (bound 2, some stale)")
r, d, _ = train(4, ["--ps-sync", "ssp:1", "--slow", "3:4", "--timeout", "20"],
                env=dict(os.environ, GS_TEST_PS_SKIP_WAIT="1"))
check(r.returncode != 0 and "ssp:1" in r.stderr and "ps server" in r.stderr,
      f"a rank ignoring ssp:1 makes a server fail the job: rc {r.returncode} "
      f"{r.stderr.strip()[-400:]}")

r, d, _ = train(4, ["--ps-backup", "1", "--slow", "3:6"])
if check(r.returncode == 0, f"backup 1 over 2 servers: {r.stderr[-600:]}"):
    drops = {k: v.count(-1) for k, v in staleness(d).items()}
    check(drops[3] > max(drops[k] for k in (0, 1, 2)),
          f"backup 1 over 2 servers drops the straggler's gradients most: {drops}")

r, d, _ = train(4, ["--ps-sync", "async", "--slow", "3:3"])
if check(r.returncode == 0, f"async over 2 servers: {r.stderr[-600:]}"):
    by = staleness(d)
    check(all(len(v) == STEPS for v in by.values()) and max(max(v) for v in by.values()) > 0,
          f"async over 2 servers: every rank's {STEPS} steps, some stale")
finish("ps_sync_sharded")
