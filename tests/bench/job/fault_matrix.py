#!/usr/bin/python3
"""fault_matrix.py: faults through the real launcher, in a private network
and mount namespace (unshare -rnm: its own loopback and mounts; nothing of
the machine's is touched, and everything goes with the test).

  - a rank SIGSTOPped mid-run, ps and ring: every rank and the launcher
    exit non-zero within --timeout (plus the time to pass the news), the
    messages name the stopped rank and the phase, no process is left, and
    steps.csv's lines are whole;
  - a rank SIGSTOPped after it handed its measurements over: the launcher
    still ends, naming it, and report.json is complete;
  - SIGTERM and SIGINT to the launcher, ps and ring: exit 143 / 130, ranks
    gone, steps.csv kept;
  - every TCP connection of the job reset mid-run, twice (ss -K), ps and
    ring: ZeroMQ reconnects, what was in flight goes again, and the run
    ends with parameters equal to an undisturbed run's bit for bit;
  - a peer that becomes unreachable (nftables REJECT with a TCP reset on
    its port, and its connection reset): reported, naming the rank, within
    the timeout;
  - a full disk (a 96 KiB tmpfs): the run names the file and "No space
    left on device", leaves no temporary file, and every line of
    steps.csv is whole.

Skipped (exit 77) where the namespaces or a tool (ss, nft) are missing.

    fault_matrix.py BENCH"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from gstest import in_namespaces

in_namespaces("-rnm", "GS_FAULTS_NS", "fault_matrix")

from gstest import (BENCH, check, children_of, finish, load_params, rank_pid,  # noqa: E402
                    same_bits, skip_part, steps_csv, tmpdir, wait_rows)

if subprocess.run(["ip", "link", "set", "lo", "up"]).returncode != 0:
    print("fault_matrix: skipped: cannot bring up loopback in the namespace")
    sys.exit(77)

LONG = ["--model", "mlp:784-256-10", "--synthetic-samples", "4096", "--threads", "1",
        "--batch", "16", "--warmup", "0", "--quiet", "--link", "none", "--repeat", "1"]
TIMEOUT = 3


def start(mode, world, steps, out, extra=(), env=None):
    e = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GS_LAUNCHED", "GS_PORT_FD"):
        e.pop(k, None)
    e.update(env or {})
    return subprocess.Popen([BENCH] + LONG + ["--mode", mode, "--world", str(world), "--steps",
                                              str(steps), "--timeout", str(TIMEOUT), "--out", out]
                            + list(extra), env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def end(p, what, timeout=60):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        check(False, f"{what}: the launcher hung")
    return out, err


def whole_lines(d, what):
    path = os.path.join(d, "steps.csv")
    if not os.path.exists(path):
        return
    with open(path) as f:
        text = f.read()
    lines = text.split("\n")
    check(text.endswith("\n"), f"{what}: steps.csv ends in a partial line")
    ncol = lines[0].count(",")
    bad = [l for l in lines[1:-1] if l.count(",") != ncol]
    check(not bad, f"{what}: steps.csv has {len(bad)} torn lines, e.g. {bad[:1]}")


def no_temp(d, what):
    left = [f for _, _, fs in os.walk(d) for f in fs if ".tmp-" in f]
    check(not left, f"{what}: temporary files left: {left}")


# a rank stopped mid-run
for mode in ("ps", "ring"):
    d = tmpdir()
    p = start(mode, 3, 100000, d)
    check(wait_rows(d, 9), f"stop {mode}: no steps recorded")
    victim = rank_pid(p.pid, 1)
    t0 = time.time()
    if victim:
        os.kill(victim, signal.SIGSTOP)
    out, err = end(p, f"stop {mode}")
    took = time.time() - t0
    check(p.returncode not in (0, None), f"stop {mode}: launcher exit {p.returncode}")
    check(took < TIMEOUT + 12, f"stop {mode}: took {took:.1f} s with --timeout {TIMEOUT}")
    named = [l for l in err.splitlines() if "rank 1" in l and ("training" in l or "step" in l)]
    check(named, f"stop {mode}: no message names rank 1 and the phase: {err}")
    time.sleep(0.3)
    check(not children_of(p.pid), f"stop {mode}: processes left")
    whole_lines(d, f"stop {mode}")
    no_temp(d, f"stop {mode}")
    print(f"stop {mode}: ended in {took:.1f} s: {named[0][:160]}")

# a rank stopped after it handed over its measurements
for mode in ("ps", "ring"):
    d = tmpdir()
    t0 = time.time()
    p = start(mode, 2, 20, d, env={"GS_TEST_STOP_AFTER_GATHER": "1"})
    out, err = end(p, f"stop after gather {mode}")
    took = time.time() - t0
    check(took < TIMEOUT + 15, f"stop after gather {mode}: took {took:.1f} s")
    check("rank 1" in err, f"stop after gather {mode}: rank 1 not named: {err}")
    check(os.path.exists(os.path.join(d, "report.json")),
          f"stop after gather {mode}: report.json missing though every rank reported")
    time.sleep(0.3)
    check(not children_of(p.pid), f"stop after gather {mode}: processes left")
    print(f"stop after gather {mode}: exit {p.returncode} in {took:.1f} s")

# signals to the launcher
for mode in ("ps", "ring"):
    for sig, code in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
        d = tmpdir()
        p = start(mode, 2, 100000, d)
        check(wait_rows(d, 4), f"{sig.name} {mode}: no steps recorded")
        p.send_signal(sig)
        out, err = end(p, f"{sig.name} {mode}", timeout=30)
        check(p.returncode == code, f"{sig.name} {mode}: launcher exit {p.returncode}: {err}")
        time.sleep(0.3)
        check(not children_of(p.pid), f"{sig.name} {mode}: ranks left running")
        check(len(steps_csv(d)) >= 4, f"{sig.name} {mode}: steps.csv lost rows")
        whole_lines(d, f"{sig.name} {mode}")
        no_temp(d, f"{sig.name} {mode}")

# every connection reset mid-run, twice: the same bits as an undisturbed run
if shutil.which("ss"):
    for mode in ("ps", "ring"):
        calm, hit, d = tmpdir(), tmpdir(), tmpdir()
        pc = start(mode, 3, 1500, tmpdir(), ["--save-params", calm])
        end(pc, f"reset {mode} (undisturbed)", timeout=180)
        ph = start(mode, 3, 1500, d, ["--save-params", hit])
        resets = 0
        for rows in (100, 600):  # mid-run: once the steps are under way
            if not wait_rows(d, rows, timeout=60) or ph.poll() is not None:
                break
            r = subprocess.run(["ss", "-K", "-tn", "state", "established"], capture_output=True,
                               text=True)
            resets += r.returncode == 0 and r.stdout.count("\n") > 1
        out, err = end(ph, f"reset {mode}", timeout=180)
        check(pc.returncode == 0, f"reset {mode}: the undisturbed run failed")
        check(resets == 2, f"reset {mode}: {resets} of 2 rounds of resets hit the job (it ran "
              "too fast to reset mid-run?)")
        check(ph.returncode == 0, f"reset {mode}: the job did not survive its connections "
              f"being reset: {err[-600:]}")
        if ph.returncode == 0:
            check(same_bits(load_params(calm), load_params(hit)),
                  f"reset {mode}: finished, but its parameters differ from the undisturbed run's")
            again = [l for l in err.splitlines() if "dropped and came back" in l]
            print(f"reset {mode}: {resets} rounds of resets; the parameters equal the "
                  f"undisturbed run's; {len(again)} resend line(s), e.g. "
                  f"{again[0][:140] if again else '-'}")
    # the same over the mesh (recursive doubling's sockets to every rank):
    # every result is still checked against the exact sum
    d = tmpdir()
    p = subprocess.Popen([BENCH, "--mode", "ring", "--world", "3", "--collective", "allreduce",
                          "--algo", "rd", "--resend", "-b", "64K", "-e", "64K", "-n", "20000",
                          "-w", "1",
                          "--timeout", str(TIMEOUT), "--out", d], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    resets = 0
    for wait in (1.5, 1.0):
        time.sleep(wait)
        if p.poll() is not None:
            break
        r = subprocess.run(["ss", "-K", "-tn", "state", "established"], capture_output=True,
                           text=True)
        resets += r.returncode == 0 and r.stdout.count("\n") > 1
    out, err = end(p, "reset rd", timeout=300)
    check(resets == 2, f"reset rd: {resets} of 2 rounds of resets hit the job")
    check(p.returncode == 0 and "Out of bounds values : 0 OK" in out,
          f"reset rd: the collective did not survive its connections being reset: "
          f"{out[-400:]} {err[-600:]}")
    again = [l for l in err.splitlines() if "(mesh) dropped and came back" in l]
    print(f"reset rd: {resets} rounds of resets; every result exact; {len(again)} resend "
          f"line(s), e.g. {again[0][:140] if again else '-'}")
else:
    skip_part("the connection-reset case", "no ss here (iproute2: ./install.sh --deps)")

# a peer that becomes unreachable
if shutil.which("nft") and shutil.which("ss"):
    d = tmpdir()
    p = start("ring", 3, 100000, d)
    check(wait_rows(d, 9), "unreachable: no steps recorded")
    victim = rank_pid(p.pid, 1)
    port = None
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if victim and f"pid={victim}," in line:
            port = int(line.split()[3].rsplit(":", 1)[1])
    if check(port is not None, f"unreachable: rank 1's port not found in {out}"):
        t0 = time.time()
        for cmd in (["nft", "add", "table", "inet", "gsf"],
                    ["nft", "add", "chain", "inet", "gsf", "out",
                     "{ type filter hook output priority 0 ; }"],
                    ["nft", "add", "rule", "inet", "gsf", "out", "tcp", "dport", str(port),
                     "reject", "with", "tcp", "reset"]):
            check(subprocess.run(cmd).returncode == 0, f"unreachable: {' '.join(cmd)} failed")
        subprocess.run(["ss", "-K", "-tn", "dport", "=", f":{port}"], capture_output=True)
        out, err = end(p, "unreachable")
        took = time.time() - t0
        check(p.returncode not in (0, None), f"unreachable: launcher exit {p.returncode}")
        check(took < TIMEOUT + 12, f"unreachable: took {took:.1f} s")
        check("rank 1" in err, f"unreachable: rank 1 not named: {err}")
        subprocess.run(["nft", "delete", "table", "inet", "gsf"])
        print(f"unreachable: ended in {took:.1f} s")
else:
    skip_part("the unreachable-peer case", "no nft or ss here (nftables, iproute2: "
              "./install.sh --deps)")

# a full disk
mnt = tempfile.mkdtemp(prefix="gs_full_")
if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", mnt]).returncode == 0:
    for mode in ("ps", "ring"):
        d = os.path.join(mnt, mode)
        p = start(mode, 2, 800, d)
        out, err = end(p, f"full disk {mode}", timeout=120)
        check("No space left on device" in err and "steps.csv" in err,
              f"full disk {mode}: no word of the full disk naming the file: {err[-600:]}")
        whole_lines(d, f"full disk {mode}")
        no_temp(d, f"full disk {mode}")
        shutil.rmtree(d, ignore_errors=True)
    subprocess.run(["umount", mnt])
else:
    skip_part("the full-disk case", "cannot mount a tmpfs here (needs root)")
os.rmdir(mnt)
finish("fault_matrix")
