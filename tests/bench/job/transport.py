#!/usr/bin/python3
"""transport.py BENCH: --transport ipc (Unix sockets between the ranks of one
machine) computes exactly what tcp does: ps (in rank 0 and dedicated) and
ring at world 3 save bitwise the same parameters over both; the collective
benchmark's all-reduce is exact over ipc (shared memory refused, GS_SHM=0, so
the sockets carry it: the table names rd and ring); and ipc is refused where ranks are
not all on this machine (emulated hosts, a MASTER_ADDR elsewhere) or with a
word that is not a transport, exit 2 naming the flag."""
from gstest import SMALL, check, finish, load_params, run, same_bits, tmpdir

BASE = SMALL + ["--steps", "6", "--batch", "8", "--world", "3", "--seed", "7"]
for mode, extra in (("ps", []), ("ps", ["--ps-dedicated"]), ("ring", [])):
    got = {}
    for transport in ("tcp", "ipc"):
        d = tmpdir()
        r = run(BASE + ["--mode", mode, "--transport", transport, "--save-params", d + "/p",
                        "--out", d] + extra)
        if check(r.returncode == 0, f"{mode} {extra} over {transport}: {r.stderr}"):
            got[transport] = load_params(d + "/p")
    if len(got) == 2:
        check(same_bits(got["tcp"], got["ipc"]),
              f"{mode} {extra}: ipc and tcp give different parameters")

d = tmpdir()
r = run(["--mode", "ring,ps", "--collective", "allreduce", "--transport", "ipc", "--world", "3",
         "-b", "8", "-e", "1M", "-f", "16", "-n", "2", "-w", "1", "--timeout", "20", "--out", d],
        env={"GS_SHM": "0"})
check(r.returncode == 0 and "# Out of bounds values : 0 OK" in r.stdout,
      f"the collective over ipc: exit {r.returncode}: {r.stdout[-400:]} {r.stderr}")
algos = {l.split()[-1] for l in r.stdout.splitlines() if l.strip()[:1].isdigit()}
check("ring" in algos and "shm" not in algos, f"the collective over ipc ran {algos}")

for args, words in ((["--transport", "udp"], "tcp, ipc or shm"),
                    (["--transport", "ipc", "--link", "1gbit"], "--transport ipc")):
    r = run(BASE + ["--mode", "ring"] + args)
    check(r.returncode == 2 and words in r.stderr, f"{args}: exit {r.returncode}: {r.stderr}")
env = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "10.255.255.1", "MASTER_PORT": "29999",
       "GS_JOB_SECRET": "s" * 32}
r = run(SMALL + ["--mode", "ring", "--transport", "ipc", "--bind", "0.0.0.0", "--out", tmpdir()],
        env=env)
check(r.returncode == 2 and "--transport ipc needs every rank on this machine" in r.stderr,
      f"ipc with a MASTER_ADDR elsewhere: exit {r.returncode}: {r.stderr}")
finish("transport")
