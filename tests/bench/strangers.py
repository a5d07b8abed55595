#!/usr/bin/python3
"""strangers.py: a job that a stranger can neither join, stop nor read.

A 2-rank job started as torchrun starts one (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT, GS_JOB_SECRET), ps and ring. While rank 0 waits for rank 1, a
stranger (tests/bench/stranger: no secret) fires forged registrations,
wrong proofs, random and 4 MiB frames at MASTER_PORT; then rank 1 starts,
and the stranger fires at the rendezvous and every data port of both ranks
while they train. Both ranks must finish, rank 0 write its steps, and both hold
parameters bitwise equal to an undisturbed run of the same job; the
stranger must receive no welcome and no job token.

    strangers.py BENCH STRANGER"""
import os
import re
import subprocess
import sys
import time

from common import BENCH, SMALL, check, finish, free_port, load_params, tmpdir

STRANGER = os.path.abspath(sys.argv[2])
ARGS = SMALL + ["--world", "2", "--batch", "8", "--steps", "1500", "--warmup", "0", "--timeout", "30"]


def start(rank, mode, port, out, params):
    env = {k: v for k, v in os.environ.items() if k not in ("GS_LAUNCHED", "GS_PORT_FD")}
    env.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               GS_JOB_SECRET="strangers test secret")
    return subprocess.Popen([BENCH] + ARGS + ["--mode", mode, "--out", out,
                                              "--save-params", params],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def listening(pids):
    """tcp://127.0.0.1:PORT of every socket these processes listen on"""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    eps = []
    for line in out.splitlines():
        m = re.search(r"127\.0\.0\.1:(\d+).*pid=(\d+)", line)
        if m and int(m.group(2)) in pids:
            eps.append(f"tcp://127.0.0.1:{m.group(1)}")
    return eps


def stranger(seconds, eps):
    r = subprocess.run([STRANGER, str(seconds)] + eps, capture_output=True, text=True,
                       timeout=seconds + 30)
    print(r.stdout.strip())
    m = re.search(r"welcomes (\d+), with a job token (\d+)", r.stdout)
    check(m is not None and m.group(1) == "0" and m.group(2) == "0",
          f"the stranger learned something: {r.stdout.strip()}")


def job(mode, attack):
    port = free_port()
    out, params = tmpdir(), tmpdir()
    r0 = start(0, mode, port, out, params)
    procs = [r0]
    if attack:
        time.sleep(0.5)
        stranger(2, [f"tcp://127.0.0.1:{port}"])
        check(r0.poll() is None, f"{mode}: the stranger stopped rank 0 at the rendezvous")
    procs.append(start(1, mode, port, tmpdir(), tmpdir()))
    if attack:
        # the rendezvous and a data port on each rank (ps: the server's, on rank 0)
        want = 2 if mode == "ps" else 3
        eps = []
        t0 = time.time()
        while len(eps) < want and time.time() - t0 < 20:
            eps = listening({p.pid for p in procs})
            time.sleep(0.05)
        if check(len(eps) >= want, f"{mode}: found only {eps} listening"):
            stranger(2, eps)
    res = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    for rank, (o, e, rc) in enumerate(res):
        check(rc == 0, f"{mode}{' attacked' if attack else ''}: rank {rank} exit {rc}: {e}")
    if attack:
        err0 = res[0][1]
        check("refused a registration from 127.0.0.1" in err0,
              f"{mode}: rank 0 did not log the refused registrations: {err0[-500:]}")
    check(os.path.exists(os.path.join(out, "steps.csv")), f"{mode}: no steps.csv in {out}")
    return load_params(params)


for mode in ("ps", "ring"):
    calm = job(mode, False)
    attacked = job(mode, True)
    check(calm and calm.keys() == attacked.keys() and
          all((calm[k].view("u4") == attacked[k].view("u4")).all() for k in calm),
          f"{mode}: the attacked job's parameters differ from the undisturbed run's")
    print(f"{mode}: the job finished under attack with the undisturbed run's parameters")
finish("strangers")
