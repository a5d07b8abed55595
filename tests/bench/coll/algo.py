#!/usr/bin/python3
"""algo.py: `bench --collective allreduce --algo ring|rd|direct|shm|hier|auto`.

Every forced algorithm runs (world 2 and 3: a power of two and not),
checks exact, and is named on every row of the table and of the JSON;
auto on one host names shm at every size; with shared memory refused
(GS_SHM=0), rd for the small sizes and the ring for the large ones, one
switch in between (wherever the measured threshold puts it); the ranks
agree on it (the rendezvous compares it); a wrong value, --algo without
--collective, or --algo shm with a 16-bit -d, is a usage error (exit 2)
naming --algo.

    algo.py BENCH"""
import json
import os
import re

from gstest import check, finish, run, tmpdir

ROW = re.compile(r"^\s+(\d+)\s+\d+\s+float\s+sum\s+-1\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+(\d+)"
                 r"\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+0\s+(\S+)$", re.M)


def collective(world, algo, lo, hi, factor, env=None):
    d = tmpdir()
    args = ["--mode", "ring", "--world", str(world), "--collective", "allreduce", "-b", lo,
            "-e", hi, "-f", factor, "-n", "2", "-w", "1", "--json", "--timeout", "20",
            "--threads", "1", "--out", d]
    if algo:
        args += ["--algo", algo]
    r = run(args, env=env)
    if not check(r.returncode == 0, f"--algo {algo or 'auto'} w{world}: exit {r.returncode}: {r.stderr}"):
        return [], None
    rows = ROW.findall(r.stdout)
    check(rows and re.search(r"^#\s+size\s+count.*#wrong\s+algo$", r.stdout, re.M),
          f"--algo {algo or 'auto'} w{world}: no algo column:\n{r.stdout}")
    for size, wrong, _ in rows:
        check(int(wrong) == 0, f"--algo {algo or 'auto'} w{world} size {size}: {wrong} wrong")
    try:
        j = json.load(open(os.path.join(d, f"collective-ring-w{world}.json")))
    except (OSError, ValueError) as e:
        check(False, f"--algo {algo or 'auto'} w{world}: JSON: {e}")
        return rows, None
    check(j.get("algo") == (algo or "auto"), f"JSON algo {j.get('algo')}, asked {algo}")
    check([x.get("algo") for x in j["rows"]] == [a for _, _, a in rows],
          f"JSON rows' algo {[x.get('algo') for x in j['rows']]} != the table's")
    return rows, j


for world in (2, 3):
    for algo in ("ring", "rd", "direct", "shm", "hier"):
        rows, _ = collective(world, algo, "4", "64K", "8")
        check([int(s) for s, _, _ in rows] == [4, 32, 256, 2048, 16384],
              f"--algo {algo or 'auto'} w{world}: sizes {[s for s, _, _ in rows]}")
        check(all(a == algo for _, _, a in rows), f"--algo {algo or 'auto'} w{world}: rows say "
              f"{[a for _, _, a in rows]}")

# auto (the default): shm where every rank is on this host
rows, _ = collective(3, None, "8", "8M", "4")
names = [a for _, _, a in rows]
check(names and all(a == "shm" for a in names), f"auto on one host: {names}, expected shm")

# without shared memory: rd up to a size, the ring from the next one on
rows, _ = collective(3, None, "8", "8M", "4", env={"GS_SHM": "0"})
names = [a for _, _, a in rows]
check(names and names[0] == "rd" and names[-1] == "ring",
      f"auto: smallest size {names[:1]}, largest {names[-1:]}, expected rd and ring")
switches = sum(1 for x, y in zip(names, names[1:]) if x != y)
check(switches == 1, f"auto switches {switches} times: {names}")

# usage errors name the flag
for args, what in ((["--mode", "ring", "--world", "2", "--collective", "allreduce", "--algo",
                     "tree"], "a wrong value"),
                   (["--mode", "ring", "--world", "2", "--algo", "rd", "--steps", "2"],
                    "--algo in a training run")):
    r = run(args, timeout=60)
    check(r.returncode == 2, f"{what}: exit {r.returncode}, expected 2: {r.stderr}")
    check("--algo" in r.stderr, f"{what}: the message does not name --algo: {r.stderr}")
r = run(["--mode", "ring", "--world", "2", "--collective", "allreduce", "--algo", "shm", "-d",
         "half"], timeout=60)
check(r.returncode == 2 and "--algo shm" in r.stderr and "-d half" in r.stderr,
      f"--algo shm -d half: exit {r.returncode}: {r.stderr}")
r = run(["--collective", "allreduce", "--mode", "ring", "--algo", "tree"], timeout=60)
check("tree" in r.stderr, "the wrong value is not quoted")
check(all(a in r.stderr for a in ("ring", "rd", "direct", "shm", "hier", "auto")),
      f"the usage message does not list every algorithm: {r.stderr}")
# --algo picks the ring's all-reduce: refused where no ring runs, named
for args in (["--mode", "ps", "--world", "2", "--algo", "hier", "--steps", "2"],
             ["--mode", "ps", "--world", "2", "--collective", "allreduce", "--algo", "ring"]):
    r = run(args, timeout=60)
    check(r.returncode == 2 and "--algo" in r.stderr and "--mode ring" in r.stderr,
          f"{' '.join(args)}: exit {r.returncode}, expected 2 naming --algo: {r.stderr}")

# the resend log: off in the collective benchmark unless asked, and said so;
# the flag belongs to the ring
for flag, words in (([], "(no resend log"), (["--resend"], "(resend log on)")):
    r = run(["--mode", "ring", "--world", "2", "--collective", "allreduce", "-b", "1M", "-e", "1M",
             "-n", "2", "-w", "1", "--out", tmpdir()] + flag, timeout=120)
    check(r.returncode == 0 and words in r.stderr,
          f"{flag or 'default'}: exit {r.returncode}, no '{words}' in: {r.stderr[-300:]}")
r = run(["--mode", "ps", "--world", "2", "--steps", "2", "--resend"], timeout=60)
check(r.returncode == 2 and "--resend" in r.stderr and "--mode ring" in r.stderr,
      f"--mode ps --resend: exit {r.returncode}: {r.stderr}")

finish("algo")
