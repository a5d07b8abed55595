#!/usr/bin/python3
"""run_dirs.py: a job's results directory is its own.

Two jobs of another launcher (each 2 ranks started by hand with torchrun's
variables, no --out) started together in one working directory: both
succeed, and results/ holds two directories, one per job, each named
<time>-env-<the first 6 characters of its report.json's run_id>; the ranks
other than 0 write none. Started in the same second, they used to get the
same name, and the second job was refused as "an earlier run". The same
for two collective-benchmark jobs. A pair that straddles a second is
started again (a few times) so that the case is the same second.

    run_dirs.py BENCH"""
import json
import os
import re
import subprocess

from gstest import BENCH, SMALL, check, finish, free_port, tmpdir

TRAIN = SMALL + ["--steps", "4", "--mode", "ring"]
COLL = ["--mode", "ring", "--collective", "allreduce", "-b", "64", "-e", "1K", "-f", "4",
        "-n", "2", "-w", "1", "--timeout", "20", "--quiet"]
NAME = re.compile(r"^(\d{8}-\d{6})-env-([0-9a-f]{6})$")


def pair_of_jobs(cwd, args):
    """two 2-rank jobs started at once in cwd; [(rc, stderr)] of the 4 ranks"""
    procs = []
    for job in range(2):
        port = free_port()
        for rank in range(2):
            env = {k: v for k, v in os.environ.items()
                   if k not in ("GS_LAUNCHED", "GS_PORT_FD", "GS_RUN_DIR", "GS_RUN_ID")}
            env.update(RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port), GS_JOB_SECRET="run dirs test secret %d" % job)
            procs.append(subprocess.Popen([BENCH] + args, cwd=cwd, env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                          text=True))
    return [(p.wait(timeout=120), p.communicate()[1]) for p in procs]


def case(what, args, run_id_of):
    """up to 5 tries for a pair in the same second; checks the last try"""
    for attempt in range(5):
        cwd = tmpdir()
        res = pair_of_jobs(cwd, args)
        dirs = sorted(os.listdir(os.path.join(cwd, "results"))) \
            if os.path.isdir(os.path.join(cwd, "results")) else []
        names = [NAME.match(d) for d in dirs]
        same_second = len(dirs) == 2 and all(names) and names[0][1] == names[1][1]
        if same_second or not all(rc == 0 for rc, _ in res):
            break
        print(f"{what}: try {attempt + 1}: the jobs started in different seconds ({dirs}); again")
    check(all(rc == 0 for rc, _ in res),
          f"{what}: a rank failed: " + "; ".join(f"exit {rc}: {err.strip()[-300:]}"
                                                 for rc, err in res if rc))
    check(len(dirs) == 2, f"{what}: results/ holds {dirs}, want one directory per job")
    check(all(names), f"{what}: a directory not named <time>-env-<run id>: {dirs}")
    check(same_second, f"{what}: no two jobs started in one second in 5 tries: {dirs}")
    for d, m in zip(dirs, names):
        if not m:
            continue
        try:
            rid = run_id_of(os.path.join(cwd, "results", d))
        except (OSError, ValueError, KeyError, IndexError) as ex:
            check(False, f"{what}: {d}: no run id to read: {ex}")
            continue
        check(rid.startswith(m[2]), f"{what}: {d} holds run {rid}, not the one it is named by")
    print(f"{what}: {dirs}")


def training_run_id(d):
    with open(os.path.join(d, "report.json")) as f:
        return json.load(f)["runs"][0]["run_id"]


def collective_run_id(d):
    with open(os.path.join(d, "collective-ring-w2.json")) as f:
        return json.load(f)["run_id"]


case("training", TRAIN, training_run_id)
case("collective", COLL, collective_run_id)
finish("run_dirs")
