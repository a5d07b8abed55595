#!/usr/bin/python3
"""bind.py: where a job's sockets listen, as job.c's rule says.

Runs inside a private network namespace (unshare -rn: its own loopback,
plus 10.9.9.1 and 10.9.9.2 on it; nothing of the machine's network is
touched, and the namespace goes with the test), with ranks started as
torchrun starts them:

  - MASTER_ADDR 10.9.9.1 (a multi-node job): every socket listens on
    10.9.9.1, the address this host uses toward MASTER_ADDR, none on
    0.0.0.0; training and the collective benchmark complete;
  - MASTER_ADDR localhost: every socket listens on 127.0.0.1;
  - --bind 0.0.0.0: the wildcard, and yet every connection goes to
    10.9.9.1 (what peers are told), ps and ring alike;
  - --bind 10.9.9.2: the data sockets there, the rendezvous at MASTER_ADDR;
  - --bind with an address the host lacks: a usage error naming it;
  - without a secret, a rank that listens beyond loopback refuses to start,
    MASTER_ADDR 127.0.0.1 with --bind 0.0.0.0 included; a secret shorter
    than 16 bytes is refused.

Skipped (exit 77) where user namespaces are not allowed.

    bind.py BENCH"""
import os
import signal
import socket
import subprocess
import sys
import time

from gstest import in_namespaces

in_namespaces("-rn", "GS_BIND_NETNS", "bind")

from gstest import BENCH, SMALL, check, finish, free_port, steps_csv, tmpdir  # noqa: E402

for cmd in (["ip", "link", "set", "lo", "up"], ["ip", "addr", "add", "10.9.9.1/32", "dev", "lo"],
            ["ip", "addr", "add", "10.9.9.2/32", "dev", "lo"]):
    if subprocess.run(cmd).returncode != 0:
        print(f"bind: skipped: {' '.join(cmd)} failed")
        sys.exit(77)


def sockets():
    """(state, local address, remote address) of every TCP socket here"""
    out = []
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()

            def addr(x):
                ip, port = x.split(":")
                return socket.inet_ntoa(bytes.fromhex(ip)[::-1]), int(port, 16)
            out.append((fields[3], addr(fields[1]), addr(fields[2])))
    return out


def start(mode, master, extra, steps, out, secret="bind test secret"):
    procs = []
    port = free_port("10.9.9.1")
    for rank in (0, 1):
        env = {k: v for k, v in os.environ.items()
               if k not in ("GS_LAUNCHED", "GS_PORT_FD", "GS_JOB_SECRET")}
        env.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
                   MASTER_ADDR=master, MASTER_PORT=str(port))
        if secret is not None:
            env["GS_JOB_SECRET"] = secret
        procs.append(subprocess.Popen(
            [BENCH] + SMALL + ["--mode", mode, "--batch", "8", "--steps", str(steps),
                               "--out", out] + extra,
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs, port


def finish_all(procs, timeout=60):
    res = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        res.append((p.returncode, out, err))
    return res


def observe(mode, master, extra):
    """listening and connected sockets of a running 2-rank job, then stop it"""
    d = tmpdir()
    procs, port = start(mode, master, extra, 100000, d)
    t0 = time.time()
    while time.time() - t0 < 30:
        try:
            if len(steps_csv(d)) >= 4:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    seen = sockets()
    for p in procs:
        p.send_signal(signal.SIGINT)
    res = finish_all(procs)
    check(all(rc == 130 for rc, _, _ in res), f"{mode} {master} {extra}: exits "
          f"{[rc for rc, _, _ in res]}: {[e for _, _, e in res]}")
    listen = {(a, p) for st, (a, p), _ in seen if st == "0A"}
    conns = [(l, r) for st, l, r in seen if st == "01"]
    check(len(listen) >= 2, f"{mode} {master} {extra}: listening {listen}")
    return listen, conns, port


# a job across machines without a secret refuses to start, saying how to set one
procs, _ = start("ring", "10.9.9.1", [], 5, tmpdir(), secret=None)
for rc, _, err in finish_all(procs, timeout=30):
    check(rc == 2 and "GS_JOB_SECRET" in err and "--secret-file" in err,
          f"no secret on 10.9.9.1: exit {rc}, {err!r}")

# what is bound decides, not MASTER_ADDR: loopback's MASTER_ADDR with
# --bind 0.0.0.0 listens beyond loopback, so it needs a secret too
procs, _ = start("ring", "127.0.0.1", ["--bind", "0.0.0.0"], 5, tmpdir(), secret=None)
for rc, _, err in finish_all(procs, timeout=30):
    check(rc == 2 and "0.0.0.0" in err and "GS_JOB_SECRET" in err,
          f"no secret, --bind 0.0.0.0 on loopback: exit {rc}, {err!r}")

# a secret shorter than 16 bytes is refused, saying how to make one
procs, _ = start("ring", "10.9.9.1", [], 5, tmpdir(), secret="fifteen bytes!!")
for rc, _, err in finish_all(procs, timeout=30):
    check(rc == 2 and "at least 16" in err and "/dev/urandom" in err,
          f"a 15-byte secret: exit {rc}, {err!r}")

# the multi-node rule: the route's source toward MASTER_ADDR, here 10.9.9.1
for mode in ("ring", "ps"):
    listen, conns, port = observe(mode, "10.9.9.1", [])
    check(all(a == "10.9.9.1" for a, _ in listen),
          f"{mode} MASTER_ADDR=10.9.9.1: listening on {sorted(listen)}, not only 10.9.9.1")
    check(("10.9.9.1", port) in listen, f"{mode}: the rendezvous is not at MASTER_ADDR:{port}")

# a local job: loopback only
listen, conns, port = observe("ring", "localhost", [])
check(all(a == "127.0.0.1" for a, _ in listen),
      f"MASTER_ADDR=localhost: listening on {sorted(listen)}, not only 127.0.0.1")

# --bind 0.0.0.0: the wildcard, and peers told 10.9.9.1
for mode in ("ring", "ps"):
    listen, conns, port = observe(mode, "10.9.9.1", ["--bind", "0.0.0.0"])
    check(all(a == "0.0.0.0" for a, _ in listen), f"{mode} --bind 0.0.0.0: {sorted(listen)}")
    check(conns and all(l[0] == "10.9.9.1" and r[0] == "10.9.9.1" for l, r in conns),
          f"{mode} --bind 0.0.0.0: connections not to 10.9.9.1: {conns}")

# --bind 10.9.9.2: data sockets there, the rendezvous at MASTER_ADDR
listen, conns, port = observe("ring", "10.9.9.1", ["--bind", "10.9.9.2"])
check(listen == {("10.9.9.1", port)} | {(a, p) for a, p in listen if a == "10.9.9.2"} and
      len(listen) >= 3, f"--bind 10.9.9.2: listening {sorted(listen)}")

# whole runs across "hosts": training (with the ps server published) and
# the collective benchmark
for mode, extra in (("ps", ["--ps-dedicated"]), ("ring", []),
                    ("ring", ["--collective", "allreduce", "-b", "1K", "-e", "64K", "-n", "2"]),
                    ("ps", ["--collective", "allreduce", "-b", "1K", "-e", "64K", "-n", "2"])):
    procs, _ = start(mode, "10.9.9.1", extra, 4, tmpdir())
    res = finish_all(procs)
    check(all(rc == 0 for rc, _, _ in res),
          f"{mode} {extra} MASTER_ADDR=10.9.9.1: exits {[rc for rc, _, _ in res]}: "
          f"{[e.strip()[-300:] for _, _, e in res]}")
    if "--collective" in extra:
        check("Avg bus bandwidth" in res[0][1], f"{mode} collective: no table: {res[0][1]}")

procs, _ = start("ring", "10.9.9.1", ["--bind", "10.9.9.9"], 4, tmpdir())
for rc, out, err in finish_all(procs):
    check(rc == 2 and "--bind 10.9.9.9" in err, f"--bind 10.9.9.9: exit {rc}: {err.strip()}")

finish("bind")
