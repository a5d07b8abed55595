#!/usr/bin/python3
"""strangers.py: a job that a stranger can neither join, stop nor read.

2-rank jobs started as torchrun starts them (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT, GS_JOB_SECRET), ps and ring, with and without --encrypt, each
attacked one way; every attacked job must finish with parameters bitwise
equal to an undisturbed run of the same job, rank 0 must write its steps,
and the attacker must learn nothing.

    strangers.py BENCH STRANGER CASE

  messages  tests/bench/job/stranger fires forged registrations, a forged Error
            "from rank 1" (the forged gather), a forged Welcome, huge
            Stats, random and 4 MiB frames over NULL, PLAIN and CURVE at
            the rendezvous while rank 0 waits, then at the rendezvous and
            every data port of both ranks while they train: no reply at
            all from the rendezvous, no welcome, no job token
  flood     while the ranks start and train, 200 connections at a time knock
            at the rendezvous with CURVE handshakes (the knock flood), and 3
            connections announce 400 MiB frames there and at every data
            port: the job runs, and rank 0's peak RSS stays within 100 MiB
            of the undisturbed run's
  rank0     a fake rank 0 without the secret holds MASTER_PORT first and
            would answer everything with a Welcome and an Error (a forged
            Welcome; rank 1's CURVE handshake fails before any message):
            rank 1 waits it out and joins the real rank 0
  otheruser a job started by hand on loopback without a secret (each rank
            uses the user's own secret file): another user of the machine
            (nobody, through setpriv) starting as rank 1 first does not get
            in; the real rank 1 does"""
import os
import re
import shutil
import subprocess
import sys
import time

from gstest import (BENCH, SMALL, check, finish, finished, free_port, load_params, report,
                    same_bits, tmpdir)

STRANGER = os.path.abspath(sys.argv[2])
CASE = sys.argv[3]
SECRET = "strangers test secret"
STEPS = {"messages": 1500, "flood": 800, "rank0": 200, "otheruser": 200}[CASE]
ARGS = SMALL + ["--world", "2", "--batch", "8", "--steps", str(STEPS), "--warmup", "0",
                "--timeout", "30"]


def env_of(rank, port, secret=SECRET, xdg=None):
    env = {k: v for k, v in os.environ.items()
           if k not in ("GS_LAUNCHED", "GS_PORT_FD", "GS_JOB_SECRET")}
    env.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if secret:
        env["GS_JOB_SECRET"] = secret
    if xdg:
        env["XDG_CONFIG_HOME"] = xdg
    if "ASAN_OPTIONS" in env:
        # AddressSanitizer keeps freed memory (256 MiB by default) to catch
        # its use: rank 0's RSS would measure that quarantine, not the job
        env["ASAN_OPTIONS"] += ":quarantine_size_mb=8"
    return env


def start(rank, mode, port, out, params, extra, **kw):
    return subprocess.Popen([BENCH] + ARGS + extra + ["--mode", mode, "--out", out,
                                                      "--save-params", params],
                            env=env_of(rank, port, **kw), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def listening(pids):
    """tcp://127.0.0.1:PORT of every socket these processes listen on"""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    eps = []
    for line in out.splitlines():
        m = re.search(r"127\.0\.0\.1:(\d+).*pid=(\d+)", line)
        if m and int(m.group(2)) in pids:
            eps.append(f"tcp://127.0.0.1:{m.group(1)}")
    return eps


def wait_listening(procs, want):
    eps, t0 = [], time.time()
    while len(eps) < want and time.time() - t0 < 20:
        eps = listening({p.pid for p in procs})
        time.sleep(0.05)
    return eps


def stranger(args, timeout=120):
    return subprocess.Popen([STRANGER] + [str(a) for a in args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def told(p, what):
    out, err = p.communicate(timeout=120)
    print(out.strip())
    check(p.returncode == 0, f"{what}: the stranger failed: {err[-300:]}")
    return out


def rank0_rss(out):
    try:
        return report(out)["runs"][0]["per_rank"][0]["peak_rss_bytes"]
    except (OSError, KeyError, IndexError, ValueError):
        return None


def job(mode, extra, attack=None):
    """one job; attack(r0, port, procs) runs while it does; its parameters
    and rank 0's peak RSS"""
    port = free_port()
    out, params = tmpdir(), tmpdir()
    r0 = start(0, mode, port, out, params, extra)
    procs = [r0]
    if attack:
        attack.before(mode, port, r0)
    procs.append(start(1, mode, port, tmpdir(), tmpdir(), extra))
    if attack:
        attack.during(mode, port, procs)
    what = f"{mode} {' '.join(extra)} {attack.name if attack else 'undisturbed'}"
    res = finished(procs, what)
    if attack:
        attack.after(mode, res)
    check(os.path.exists(os.path.join(out, "steps.csv")), f"{what}: no steps.csv in {out}")
    return load_params(params), rank0_rss(out)


class Messages:
    name = "messages"

    def __init__(self, encrypt):
        self.encrypt = encrypt

    def before(self, mode, port, r0):
        time.sleep(0.5)
        out = told(stranger([2, f"tcp://127.0.0.1:{port}"]), "rendezvous")
        m = re.search(r"replies (\d+): errors (\d+), welcomes (\d+), with a job token (\d+)", out)
        check(m is not None and m.groups() == ("0", "0", "0", "0"),
              f"{mode}: the rendezvous answered a stranger: {out.strip()}")
        check(r0.poll() is None, f"{mode}: the stranger stopped rank 0 at the rendezvous")

    def during(self, mode, port, procs):
        # the rendezvous and a data port on each rank (ps: the server's, on rank 0)
        want = 2 if mode == "ps" else 3
        eps = wait_listening(procs, want)
        if check(len(eps) >= want, f"{mode}: found only {eps} listening"):
            # long enough to reach the gather at the end of the job
            self.p = stranger([8] + eps)
        else:
            self.p = None

    def after(self, mode, res):
        if self.p:
            out = told(self.p, "ports")
            m = re.search(r"welcomes (\d+), with a job token (\d+)", out)
            check(m is not None and m.groups() == ("0", "0"),
                  f"{mode}: the stranger learned something: {out.strip()}")
        # PLAIN guesses reach the connection check, which says so (with
        # --encrypt they fail earlier, in CURVE)
        check(self.encrypt or "refused a connection from 127.0.0.1" in res[0][1] + res[1][1],
              f"{mode}: no rank logged the refused data connections")


class Flood:
    name = "flood"

    def before(self, mode, port, r0):
        time.sleep(0.3)
        ep = f"tcp://127.0.0.1:{port}"
        # the knocks go on while rank 1 joins and the job trains
        self.knock = stranger(["knock", 200, 6, ep])
        self.big = [stranger(["big", 3, 400, ep])]
        time.sleep(1.0)

    def during(self, mode, port, procs):
        want = 2 if mode == "ps" else 3
        eps = [e for e in wait_listening(procs, want) if not e.endswith(f":{port}")]
        for e in eps:
            self.big.append(stranger(["big", 3, 400, e]))

    def after(self, mode, res):
        out = told(self.knock, "knock")
        m = re.search(r"(\d+) connections made, (\d+) dropped by the server, (\d+) answered", out)
        check(m is not None and int(m.group(1)) >= 200 and m.group(3) == "0",
              f"{mode}: the knock flood: {out.strip()}")
        for b in self.big:
            out = told(b, "big")
            m = re.search(r"accepted ([\d.]+) MiB", out)
            check(m is not None and float(m.group(1)) < 64,
                  f"{mode}: rank 0's side took {m.group(1) if m else '?'} MiB of frames from "
                  f"strangers: {out.strip()}")


def rank0_job(mode, extra):
    """a fake rank 0 holds the port for 3 s, answering with forged Welcomes;
    rank 1 starts at once, the real rank 0 once the fake is gone"""
    port = free_port()
    out, params = tmpdir(), tmpdir()
    fake = stranger(["rank0", 3, f"tcp://127.0.0.1:{port}"])
    time.sleep(0.3)
    r1 = start(1, mode, port, tmpdir(), tmpdir(), extra)
    out_fake = told(fake, "fake rank 0")
    check(re.search(r"answered (\d+)", out_fake) is not None, f"fake rank 0: {out_fake}")
    check(r1.poll() is None, f"{mode}: rank 1 stopped at a fake rank 0's answer: "
          f"{r1.stderr.read() if r1.poll() is not None else ''}")
    r0 = start(0, mode, port, out, params, extra)
    finished([r0, r1], f"{mode} {' '.join(extra)} after a fake rank 0")
    return load_params(params)


def other_user_job(mode):
    """a hand-started loopback job without a secret; nobody tries to join
    it as rank 1 before the real rank 1 starts"""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        print("otheruser: skipped: needs root and setpriv to run a rank as another user")
        sys.exit(77)
    port = free_port()
    mine = tmpdir()
    os.chmod(mine, 0o700)
    theirs = tmpdir()
    os.chmod(theirs, 0o777)
    # the binary where nobody may run it
    exe = os.path.join(theirs, "bench")
    shutil.copy(BENCH, exe)
    os.chmod(exe, 0o755)
    out, params = tmpdir(), tmpdir()
    r0 = start(0, mode, port, out, params, [], secret=None, xdg=mine)
    time.sleep(0.5)
    env = env_of(1, port, secret=None, xdg=os.path.join(theirs, "xdg"))
    env["HOME"] = theirs
    intruder = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                 exe] + ARGS + ["--mode", mode, "--timeout", "4"],
                                env=env, cwd=theirs, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    r1 = start(1, mode, port, tmpdir(), tmpdir(), [], secret=None, xdg=mine)
    finished([r0, r1], f"{mode}: hand-started on loopback with another user about")
    o, e = intruder.communicate(timeout=60)
    print("the other user's rank 1:", e.strip()[-300:])
    check(intruder.returncode != 0, f"{mode}: another user's process ran as rank 1: {o[-300:]}")
    st = os.stat(os.path.join(mine, "gradsync", "secret"))
    check(st.st_mode & 0o077 == 0, f"the user's secret file has mode {st.st_mode & 0o777:o}")
    return load_params(params)


for mode in ("ps", "ring"):
    for extra in ([], ["--encrypt"]):
        if CASE == "otheruser" and extra:
            continue
        if CASE == "otheruser":
            calm = other_user_job(mode)
            attacked, calm_rss, rss = calm, None, None
            calm, _ = job(mode, [])
        elif CASE == "rank0":
            calm, _ = job(mode, extra)
            attacked, calm_rss, rss = rank0_job(mode, extra), None, None
        else:
            calm, calm_rss = job(mode, extra)
            attacked, rss = job(mode, extra, Messages(bool(extra)) if CASE == "messages"
                                else Flood())
        what = f"{mode} {' '.join(extra)}"
        check(same_bits(calm, attacked),
              f"{what}: the attacked job's parameters differ from the undisturbed run's")
        if CASE == "flood":
            check(calm_rss and rss and rss - calm_rss < 100 << 20,
                  f"{what}: rank 0's peak RSS {rss} vs {calm_rss} undisturbed")
            print(f"{what}: rank 0's peak RSS {(rss or 0) / 2**20:.1f} MiB attacked, "
                  f"{(calm_rss or 0) / 2**20:.1f} MiB undisturbed")
        print(f"{what}: the job finished under attack ({CASE}) with the undisturbed run's "
              f"parameters")
finish(f"strangers {CASE}")
