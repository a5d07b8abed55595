"""gstest.py: the one support module of the Python tests, for every folder
of tests/ (meson puts tests/support on PYTHONPATH; by hand:
PYTHONPATH=tests/support python3 tests/bench/job/faults.py build/bench/bench).

Most tests run the real `bench` binary (given as argv[1]) on small models
so a run takes a second or two, and assert on what it wrote: saved .npy
parameters, steps.csv, report.json, the SVGs and the trace. `check` records
a failure with its message and `finish` exits non-zero if any was recorded,
so one run reports every broken property at once; `require` stops at once
where what follows depends on it. Besides: running bench, the scenarios
several tests share (a rank killed under the launcher), and for emulated
hosts whether this process may build them and what a run left behind."""
import atexit
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import socket
import tempfile
import time

# the source tree's root
SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BENCH = os.path.abspath(sys.argv[1])
failures = []
skipped = []  # parts that could not run here: the test ends skipped, not passed

# loopback and one run per configuration unless a test asks otherwise: the
# default run (emulated links where root, three repetitions) has tests of
# its own (tests/bench/hosts/bench_hosts.py default)
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


def require(cond, what):
    """check, and on failure end the test at once (exit 1): for what the
    rest of the test depends on (C's REQUIRE)"""
    if not check(cond, what):
        sys.exit(1)
    return cond


def run(args, timeout=180, env=None, cwd=None):
    """bench ARGS, outside any launcher's environment, to its end"""
    e = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
              "MASTER_PORT", "GS_LAUNCHED", "GS_PORT_FD", "GS_RUN_DIR", "SLURM_PROCID",
              "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"):
        e.pop(k, None)
    if env:
        e.update(env)
    return subprocess.run([BENCH] + args, capture_output=True, text=True, timeout=timeout, env=e,
                          cwd=cwd)


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


# numpy is imported where it is used: tests that skip without it
# (kernels/sgd_torch.py) import this module first
def load_params(d):
    import numpy as np
    return {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".npy")}


def max_rel(a, b):
    """max over tensors of max|a-b| / max|b| (the relative error of a vs b)"""
    import numpy as np
    worst = 0.0
    for k in b:
        scale = float(np.max(np.abs(b[k]))) or 1.0
        worst = max(worst, float(np.max(np.abs(a[k].astype(np.float64) - b[k]))) / scale)
    return worst


def same_bits(a, b):
    """two load_params() results hold the same tensors, bit for bit (False
    where either run saved none, or failed: None)"""
    import numpy as np
    return bool(a) and bool(b) and a.keys() == b.keys() and all(
        np.array_equal(a[k].view(np.uint32), b[k].view(np.uint32)) for k in a)


def ranks_agree(rows):
    """steps.csv rows (of a --verify run): every step's ranks hold one
    parameter hash, and a real one"""
    by_step = {}
    for r in rows:
        by_step.setdefault(r["step"], set()).add(r["param_hash"])
    return bool(by_step) and all(len(h) == 1 and "0000000000000000" not in h
                                 for h in by_step.values())


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


DIGITS_TOOL = os.path.join(SRC, "tools", "digits_idx.py")


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


def finished(procs, what, timeout=180):
    """each of procs (ranks started by hand) ends with exit 0; their (out,
    err, exit code)"""
    res = [p.communicate(timeout=timeout) + (p.returncode,) for p in procs]
    for rank, (o, e, rc) in enumerate(res):
        check(rc == 0, f"{what}: rank {rank} exit {rc}: {e[-800:]}")
    return res


def kill_rank(args, victim, rows, what, wait=60):
    """A rank that dies: bench ARGS (our launcher; ARGS hold --out DIR and
    --timeout T) runs until DIR/steps.csv has ROWS rows, then rank VICTIM
    is SIGKILLed. The launcher must stop within wait seconds, exit
    non-zero, name the rank ("rank V was killed by signal 9"), and stop
    within T + 12 s of the kill. Returns the launcher's stderr, for the
    caller's checks of who else named it and what the run left."""
    out, timeout = args[args.index("--out") + 1], float(args[args.index("--timeout") + 1])
    p = subprocess.Popen([BENCH] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    check(wait_rows(out, rows), f"{what}: no steps recorded within 60 s")
    pid = rank_pid(p.pid, victim)
    check(pid is not None, f"{what}: cannot find rank {victim}'s process")
    t0 = time.time()
    if pid:
        os.kill(pid, signal.SIGKILL)
    try:
        _, err = p.communicate(timeout=wait)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        check(False, f"{what}: the launcher did not stop after rank {victim} was killed")
    took = time.time() - t0
    check(p.returncode not in (0, None), f"{what}: launcher exit {p.returncode} after a killed "
          f"rank: {err}")
    check(f"rank {victim} was killed by signal 9" in err,
          f"{what}: the launcher does not name rank {victim}: {err}")
    check(took < timeout + 12, f"{what}: stopping took {took:.1f} s with --timeout {timeout:g}")
    return err


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


# ---- emulated hosts (bench/hosts): who may build them, what a run leaves

def caps():
    """this process's effective capabilities, as a bit set"""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def have_caps():
    """whether this process may build emulated hosts (root with
    CAP_NET_ADMIN and CAP_SYS_ADMIN)"""
    return os.geteuid() == 0 and caps() & (1 << 12) and caps() & (1 << 21)


def need_root():
    """exit 77 (meson's skip), saying why, where emulated hosts cannot be built"""
    if not have_caps():
        print("SKIP: emulated hosts need root with CAP_NET_ADMIN and CAP_SYS_ADMIN "
              "(euid %d, CapEff %x)" % (os.geteuid(), caps()))
        sys.exit(77)


def run_procs(d):
    """pids of a run's processes (their command line holds d) and which is
    a spare host's summation server (GS_PS_SERVE=k in its environment;
    "" for the others)"""
    out = {}
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if os.fsencode(d) not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(x.split(b"=", 1) for x in f.read().split(b"\0") if b"=" in x)
            out[int(pid)] = env.get(b"GS_PS_SERVE", b"").decode()
        except (OSError, ValueError):
            pass
    return out


def netns_of(pid):
    try:
        return os.stat("/proc/%s/ns/net" % pid).st_ino
    except OSError:
        return None


def snapshot():
    """What a run of emulated hosts could leave, before it: netns inode ->
    pids, the root namespace's veths and 10.77 addresses, and `ip netns
    list`."""
    ns = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            ino = netns_of(pid)
            if ino:
                ns.setdefault(ino, set()).add(int(pid))
    veth = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True,
                          text=True).stdout
    addrs = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return ns, sorted(l.split(":")[1].strip() for l in veth.splitlines()), \
        "10.77." in addrs, names


def reap():
    """We are the subreaper of whatever the killed tool left: collect it."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def ours(pid, me):
    """Whether pid descends from this test (the tool's orphans are ours)."""
    for _ in range(64):
        try:
            with open("/proc/%d/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if ppid == me:
            return True
        if ppid <= 1:
            return False
        pid = ppid
    return False


def leftovers(before, cluster_inos, pids):
    """what is there now of a run that snapshot() saw before it: its
    namespaces, new namespaces and processes of this test, veths, 10.77
    addresses in the root namespace, names in /run/netns"""
    ns0, veth0, addr0, names0 = before
    ns1, veth1, addr1, names1 = snapshot()
    me = os.getpid()
    left = []
    for ino in cluster_inos:
        if ino in ns1:
            left.append("namespace %d of the run (processes %s)" % (ino, sorted(ns1[ino])))
    for ino, holders in ns1.items():
        if ino not in ns0 and any(ours(p, me) for p in holders):
            left.append("a new namespace %d held by our processes %s" % (ino, sorted(holders)))
    for pid in pids:
        if os.path.exists("/proc/%d" % pid) and ours(pid, me):
            left.append("process %d of the run" % pid)
    if set(veth1) - set(veth0):
        left.append("veths in the root namespace: %s" % sorted(set(veth1) - set(veth0)))
    if addr1 and not addr0:
        left.append("a 10.77 address in the root namespace")
    if names1 != names0 or os.path.exists("/run/netns") and os.listdir("/run/netns"):
        left.append("names in /run/netns: %r" % names1)
    return left


def wait_clean(before, cluster_inos, pids, what, check=check):
    """within 10 s nothing of the run is left (leftovers), through check"""
    deadline = time.time() + 10
    while True:
        reap()
        left = leftovers(before, cluster_inos, pids)
        if not left or time.time() > deadline:
            break
        time.sleep(0.05)
    check(not left, "after %s nothing of the run remains%s" %
          (what, (": " + "; ".join(left)) if left else ""))


# ---- the labs (tools/lab.py, docs/labs/): each lab's test runs it short

LAB_TOOL = os.path.join(SRC, "tools", "lab.py")


def lab(name, size="smoke", extra=(), timeout=180):
    """tools/lab.py NAME --size SIZE on BENCH in a fresh directory: (the
    finished process, the directory, table.csv's header and rows; [] and
    [] where it wrote none)"""
    d = tmpdir()
    r = subprocess.run([sys.executable, LAB_TOOL, name, "--size", size, "--bench", BENCH,
                        "--out", d] + list(extra), capture_output=True, text=True,
                       timeout=timeout)
    head, rows = [], []
    if os.path.exists(os.path.join(d, "table.csv")):
        with open(os.path.join(d, "table.csv")) as f:
            table = list(csv.reader(f))
        head, rows = (table[0], table[1:]) if table else ([], [])
    return r, d, head, rows


def lab_shape(name, r, d, head, rows, columns, nrows, positive, maybe=()):
    """the lab ended well and wrote its table (exactly these columns, nrows
    rows; in every row the columns named in positive, and those in maybe
    where not empty, positive numbers), a progress line per bench run, its
    chart, table.md and report.html"""
    if not require(r.returncode == 0, f"lab {name}: exit {r.returncode}: "
                   f"{(r.stdout + r.stderr).strip()[-600:]}"):
        return
    check(head == columns, f"lab {name}: columns {head}, expected {columns}")
    check(len(rows) == nrows, f"lab {name}: {len(rows)} rows, expected {nrows}: {rows}")
    for row in rows:
        for c in list(positive) + list(maybe):
            if c not in head:
                continue
            v = row[head.index(c)]
            if c in maybe and v == "":
                continue
            try:
                ok = float(v) > 0
            except ValueError:
                ok = False
            check(ok, f"lab {name}: {c} is '{v}' in {row}, not a positive number")
    runs = [x for x in r.stdout.splitlines() if re.match(rf"lab {name} \[ *\d+ s\] run \d+: ", x)]
    check(len(runs) >= 2 and any("done in" in x for x in runs),
          f"lab {name}: no progress line per bench run: {r.stdout[:400]}")
    for f in ("table.md", "chart.svg", "report.html"):
        p = os.path.join(d, f)
        check(os.path.exists(p) and os.path.getsize(p) > 200, f"lab {name}: no {f}")
    if os.path.exists(os.path.join(d, "chart.svg")):
        svg = open(os.path.join(d, "chart.svg")).read()
        check(svg.startswith("<svg") and svg.rstrip().endswith("</svg>") and
              ("<polyline" in svg or "<rect x" in svg or "<circle" in svg),
              f"lab {name}: chart.svg draws nothing")
    if os.path.exists(os.path.join(d, "report.html")):
        page = open(os.path.join(d, "report.html")).read()
        check("<table>" in page and "<svg" in page, f"lab {name}: report.html lacks the table "
              "or the chart")
