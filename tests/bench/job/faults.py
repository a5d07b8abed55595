#!/usr/bin/python3
"""faults.py: docs/architecture.md's contract 9 through the real launcher.

  - a rank SIGKILLed mid-run (ps and ring): every other rank stops within
    the timeout with an error naming the dead rank, the launcher names it
    too and exits non-zero, steps.csv keeps every completed step and
    report.json is absent (never half-written);
  - SIGINT to the launcher: every rank stops, exit 130, steps.csv kept;
  - ranks started by hand (torchrun variables) with different seeds: both
    stop with an error naming the setting that differs;
  - a rank that never arrives: rank 0 names it after the timeout.

    faults.py BENCH"""
import os
import signal
import subprocess
import time

from gstest import (BENCH, SMALL, check, children_of, finish, free_port, kill_rank, steps_csv,
                    tmpdir, wait_rows)

LONG = ["--model", "mlp:784-256-10", "--synthetic-samples", "4096", "--threads", "1",
        "--batch", "16", "--steps", "100000", "--warmup", "0", "--link", "none", "--repeat", "1"]


for mode in ("ps", "ring"):
    d = tmpdir()
    err = kill_rank(LONG + ["--mode", mode, "--world", "3", "--timeout", "3", "--out", d], 2, 9,
                    mode, wait=40)
    survivors = [l for l in err.splitlines() if l.startswith("bench: rank ") and "rank 2" in l.split(":", 2)[-1]]
    check(len(survivors) >= 1, f"{mode}: no surviving rank named rank 2 in its error: {err}")
    rows = steps_csv(d)
    check(len(rows) >= 9, f"{mode}: steps.csv lost rows ({len(rows)})")
    check(not os.path.exists(os.path.join(d, "report.json")), f"{mode}: report.json written for a failed run")
    check(not [f for f in os.listdir(d) if ".tmp-" in f], f"{mode}: temporary files left")

# SIGINT to the launcher
d = tmpdir()
p = subprocess.Popen([BENCH] + LONG + ["--mode", "ring", "--world", "2", "--timeout", "5", "--out", d],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
check(wait_rows(d, 4), "SIGINT: no steps recorded")
t0 = time.time()
p.send_signal(signal.SIGINT)
try:
    out, err = p.communicate(timeout=30)
    check(p.returncode == 130, f"SIGINT: launcher exit {p.returncode}: {err}")
    check(time.time() - t0 < 10, "SIGINT: took too long")
    check("interrupted" in err, f"SIGINT: no word about the interrupt: {err}")
except subprocess.TimeoutExpired:
    p.kill()
    check(False, "SIGINT: the launcher did not stop")
time.sleep(0.3)
check(not children_of(p.pid), "SIGINT: ranks left running")
check(len(steps_csv(d)) >= 4, "SIGINT: steps.csv lost rows")

# torchrun-style ranks with a configuration mismatch (ephemeral port: rank
# 0 of our own launcher protocol is not used here, so pick one by binding)
port = free_port()
procs = []
for rank, seed in ((0, "1"), (1, "2")):
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    procs.append(subprocess.Popen([BENCH] + SMALL + ["--mode", "ps", "--seed", seed, "--steps", "3",
                                                     "--batch", "8", "--out", tmpdir()],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
for rank, q in enumerate(procs):
    try:
        out, err = q.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        q.kill()
        out, err = q.communicate()
        check(False, f"mismatch: rank {rank} hung")
    check(q.returncode != 0, f"mismatch: rank {rank} exit 0")
    check("seed" in err and "differs" in err or "seed:" in err,
          f"mismatch: rank {rank} does not name the setting: {err}")

# a rank that never comes: world 2, only rank 0 started
env = dict(os.environ, RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
           MASTER_PORT=str(port))
t0 = time.time()
r = subprocess.run([BENCH] + SMALL + ["--mode", "ring", "--steps", "2", "--batch", "8", "--timeout", "2",
                    "--out", tmpdir()], env=env, capture_output=True, text=True, timeout=60)
check(r.returncode != 0 and "missing rank(s) 1" in r.stderr, f"absent rank: {r.stderr}")
check(time.time() - t0 < 15, "absent rank: took too long")

finish("faults")
