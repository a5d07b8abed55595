"""common.py: helpers shared by the bench end-to-end tests.

Every test runs the real `bench` binary (given as argv[1]) on small models
so a run takes a second or two, and asserts on what it wrote: saved .npy
parameters, steps.csv, report.json, the SVGs and the trace. `check` records
a failure with its message and `finish` exits non-zero if any was recorded,
so one run reports every broken property at once."""
import atexit
import csv
import json
import os
import shutil
import subprocess
import sys
import socket
import tempfile
import time

import numpy as np

BENCH = os.path.abspath(sys.argv[1])
failures = []
skipped = []  # parts that could not run here: the test ends skipped, not passed

# loopback and one run per configuration unless a test asks otherwise: the
# default run (emulated links where root, three repetitions) has tests of
# its own (default_run.py, tests/hosts)
SMALL = ["--model", "mlp:784-32-10", "--synthetic-samples", "2048", "--threads", "1",
         "--timeout", "20", "--quiet", "--link", "none", "--repeat", "1"]


def skip_part(what, why):
    """a part of this test that cannot run here (its reference is missing):
    said now, and finish() ends the test as skipped (77) instead of passed"""
    skipped.append(f"{what}: {why}")
    print(f"SKIP {what}: {why}", flush=True)


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


def run(args, timeout=180, env=None):
    e = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
              "MASTER_PORT", "GS_LAUNCHED", "GS_PORT_FD", "GS_RUN_DIR", "SLURM_PROCID",
              "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"):
        e.pop(k, None)
    if env:
        e.update(env)
    return subprocess.run([BENCH] + args, capture_output=True, text=True, timeout=timeout, env=e)


def refused(args, flag, why, timeout=60):
    """bench ARGS must stop with exit 2 and a message naming FLAG and WHY"""
    r = run(args, timeout=timeout)
    return check(r.returncode == 2 and flag in r.stderr and why in r.stderr,
                 "bench %s: exit %d (want 2), message names %s and '%s': %s" %
                 (" ".join(args), r.returncode, flag, why, r.stderr.strip()[:300]))


_made = []
atexit.register(lambda: [shutil.rmtree(d, ignore_errors=True) for d in _made])


def tmpdir():
    """a fresh directory, removed when the test ends"""
    d = tempfile.mkdtemp(prefix="gs_bench_")
    _made.append(d)
    return d


def load_params(d):
    return {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".npy")}


def max_rel(a, b):
    """max over tensors of max|a-b| / max|b| (the relative error of a vs b)"""
    worst = 0.0
    for k in b:
        scale = float(np.max(np.abs(b[k]))) or 1.0
        worst = max(worst, float(np.max(np.abs(a[k].astype(np.float64) - b[k]))) / scale)
    return worst


def same_bits(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k].view(np.uint32), b[k].view(np.uint32)) for k in a)


def children_of(pid):
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(x) for x in out.stdout.split()]


def rank_pid(launcher, rank):
    """the pid of rank `rank` among the launcher's children (RANK in its environment)"""
    for pid in children_of(launcher):
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in env:
            return pid
    return None


def wait_rows(d, n, timeout=60):
    """whether d/steps.csv reaches n rows within timeout seconds"""
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            if len(steps_csv(d)) >= n:
                return True
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    return False


def free_port(host="127.0.0.1"):
    s = socket.socket()
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def in_namespaces(flags, marker, name):
    """re-run this script under `unshare FLAGS` (once: marker in the
    environment says it is there), or exit 77 saying why it cannot"""
    if os.environ.get(marker) == "1":
        return
    try:
        r = subprocess.run(["unshare", flags, "true"], capture_output=True)
    except OSError:
        r = None
    if r is None or r.returncode != 0:
        print(f"{name}: skipped: no private namespaces here (unshare {flags} failed)")
        sys.exit(77)
    env = dict(os.environ, **{marker: "1"})
    sys.exit(subprocess.run(["unshare", flags, sys.executable] + sys.argv, env=env).returncode)


def steps_csv(d):
    with open(os.path.join(d, "steps.csv")) as f:
        return list(csv.DictReader(f))


def report(d):
    with open(os.path.join(d, "report.json")) as f:
        return json.load(f)


DIGITS_TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                           "digits_idx.py")


def digits(name, seed=None, required=True):
    """scikit-learn's 8x8 digits written to IDX (tools/digits_idx.py) in a
    fresh directory, returned. Without python3-sklearn: a test that needs
    them is skipped (77) with a line naming it; otherwise None."""
    try:
        import sklearn  # noqa: F401
    except ImportError:
        if not required:
            return None
        print(f"{name}: skipped: python3-sklearn is not installed (./install.sh --deps)")
        sys.exit(77)
    d = tmpdir()
    args = ["/usr/bin/python3", DIGITS_TOOL, d] + ([] if seed is None else ["--seed", str(seed)])
    r = subprocess.run(args, capture_output=True, text=True)
    check(r.returncode == 0, f"digits_idx.py: {r.stderr}")
    return d


def finish(name):
    if failures:
        print(f"{name}: {len(failures)} failure(s)")
        sys.exit(1)
    if skipped:
        print(f"{name}: skipped (77): every check that ran passed, but {len(skipped)} part(s) "
              f"did not run: {'; '.join(skipped)}")
        sys.exit(77)
    print(f"{name}: all checks passed")
    sys.exit(0)
