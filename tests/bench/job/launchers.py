#!/usr/bin/python3
"""launchers.py: bench started by the launchers people already use.

Each case starts the real launcher, 2 nodes x 2 ranks on this machine, and
asserts that the job trains to bitwise the parameters of a local run of
the same world (bench --world 4 --save-params) and that rank 0 writes one
complete results directory (report.json naming the launcher, steps.csv
with every rank's rows and the same parameter hash on every rank,
runs/<id>/run.json, the trace with four ranks, the charts a local run
draws); a rerun writes a directory of its own (one that holds a run is
refused: results_links.py).

  torchrun        two `python3 -m torch.distributed.run` invocations
                  (--node_rank 0 and 1, static rendezvous: the agent's
                  store holds MASTER_PORT, gradsync's takes the next);
  torchrun-c10d   the same with --rdzv_backend c10d;
  openmpi         one mpirun over two hosts, each of them this machine
                  (an rsh agent that runs the command here), then a
                  single-node -np 4 rerun;
  mpich           one mpiexec.hydra over two hosts with its fork launcher;
  slurm           a private Slurm cluster of two nodes on this machine
                  (munged, slurmctld and two slurmd of our own, ports of
                  our own, torn down after), and srun -N 2
                  --ntasks-per-node 2; skipped where they do not start;
  slurm-env       srun's environment, faked: SLURM_* only, the master from
                  SLURM_STEP_NODELIST and its port from SLURM_JOB_ID;
  nnodes          two `bench --nnodes 2 --node-rank R` invocations;
  errors          inconsistent environments: a clear error naming the
                  variable, never a hang;
  readme          docs/launching.md's commands as they are written, with
                  node 0's 10.0.0.1 made 127.0.0.1 (both nodes of a
                  two-node command on this machine), a free port for 29500
                  and 29400, a small model and a results directory of the
                  test's; those over several real hosts (--host, -hosts,
                  srun) are left to the cases above.

A case whose launcher is not installed is skipped (exit 77, saying so).

    launchers.py BENCH CASE"""
import glob
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys

from gstest import (BENCH, SMALL, SRC, check, finish, load_params, same_bits, skip_part,
                    steps_csv, tmpdir)

CASE = sys.argv[2]
STEPS, B, WORLD = 6, 8, 4
ARGS = SMALL + ["--no-shuffle", "--steps", str(STEPS), "--batch", str(B), "--seed", "3",
                "--warmup", "0", "--mode", "ring", "--verify"]
PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch
RANK_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
             "MASTER_ADDR", "MASTER_PORT", "GS_LAUNCHED", "GS_PORT_FD", "GS_RUN_DIR",
             "GS_RENDEZVOUS_PORT", "GS_NODE_LAUNCH", "TORCHELASTIC_RUN_ID",
             "TORCHELASTIC_USE_AGENT_STORE")


def skip(why):
    print(f"launchers {CASE}: skipped: {why}")
    sys.exit(77)


_ompi_tmp = []


def clean_env(extra=None):
    e = {k: v for k, v in os.environ.items()
         if k not in RANK_VARS and not k.startswith(("SLURM_", "OMPI_", "PMI_", "PMIX_"))}
    # Open MPI's session directories of its own: concurrent jobs sharing
    # /tmp/ompi.HOST.UID race (one removes it as another creates its own)
    if not _ompi_tmp:
        _ompi_tmp.append(tmpdir())
    e["OMPI_MCA_orte_tmpdir_base"] = _ompi_tmp[0]
    e.update(extra or {})
    return e


def free_port_pair():
    """a port P with P+1 free too, below the ephemeral range, so that no
    outgoing connection takes P+1 meanwhile (torchrun's case)"""
    for _ in range(200):
        p = random.randrange(20000, 32000)
        socks = []
        try:
            for q in (p, p + 1):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", q))
            return p
        except OSError:
            pass
        finally:
            for s in socks:
                s.close()
    skip("no free pair of ports in 20000..32000")


def start(cmd, env):
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)


def wait_all(procs, what, timeout=50):
    """every process's exit code and output; a hang is killed and a failure"""
    out = []
    for p in procs:
        try:
            text, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            text, _ = p.communicate()
            check(False, f"{what}: still running after {timeout} s: killed")
        out.append((p.returncode, text))
    return out


def reference():
    d = tmpdir()
    r = subprocess.run([BENCH] + ARGS + ["--world", str(WORLD), "--save-params", d + "/p",
                                         "--out", d], capture_output=True, text=True,
                       timeout=60, env=clean_env())
    if not check(r.returncode == 0, f"local world {WORLD}: {r.stderr}"):
        finish(f"launchers {CASE}")
    return d


def complete(d, launcher, ref, what):
    """rank 0's results directory is a local run's, the launcher named"""
    check(same_bits(load_params(d + "/p"), load_params(ref + "/p")),
          f"{what}: parameters differ from a local run of world {WORLD}")
    try:
        rep = json.load(open(os.path.join(d, "report.json")))
    except (OSError, ValueError) as ex:
        check(False, f"{what}: no report.json: {ex}")
        return
    run0 = rep["runs"][0]
    check(len(rep["runs"]) == 1 and run0["launcher"] == launcher and run0["world"] == WORLD
          and run0["mode"] == "ring" and rep["config"]["worlds"] == [WORLD],
          f"{what}: report.json: {len(rep['runs'])} runs, launcher {run0['launcher']}, world "
          f"{run0['world']}, config worlds {rep['config']['worlds']}")
    check(sorted(p["rank"] for p in run0["per_rank"]) == list(range(WORLD)),
          f"{what}: report.json per_rank {[p['rank'] for p in run0['per_rank']]}")
    rows = steps_csv(d)
    check(len(rows) == WORLD * STEPS and {int(r["rank"]) for r in rows} == set(range(WORLD)),
          f"{what}: steps.csv has {len(rows)} rows of ranks {sorted({r['rank'] for r in rows})}, "
          f"expected {WORLD * STEPS} of 0..{WORLD - 1}")
    for step in range(STEPS):
        hashes = {r["param_hash"] for r in rows if int(r["step"]) == step}
        check(len(hashes) == 1 and "0000000000000000" not in hashes,
              f"{what}: step {step}: ranks' parameter hashes {hashes}")
    runs = glob.glob(os.path.join(d, "runs", "*", "run.json"))
    check(len(runs) == 1 and os.path.exists(os.path.join(os.path.dirname(runs[0]), "trace.json")),
          f"{what}: runs/: {runs}")
    try:
        tr = json.load(open(os.path.join(d, "trace.json")))
        pids = {ev["pid"] for ev in tr["traceEvents"] if ev.get("ph") == "X"}
        check(pids == set(range(WORLD)), f"{what}: trace.json spans of processes {pids}")
    except (OSError, ValueError, KeyError) as ex:
        check(False, f"{what}: trace.json: {ex}")
    want = sorted(os.path.basename(f) for f in glob.glob(ref + "/*.svg"))
    got = sorted(os.path.basename(f) for f in glob.glob(d + "/*.svg"))
    check(want and got == want, f"{what}: charts {got}, a local run draws {want}")


def ran(outs, what):
    ok = all(rc == 0 for rc, _ in outs)
    check(ok, f"{what}: exit codes {[rc for rc, _ in outs]}:\n" +
          "\n".join(text[-3000:] for _, text in outs))
    return ok


def torchrun(backend):
    if shutil.which(PYTHON) is None or subprocess.run(
            [PYTHON, "-c", "import torch.distributed.run"], capture_output=True).returncode:
        skip(f"{PYTHON} has no torch.distributed.run (apt install python3-torch)")
    ref = reference()
    port = free_port_pair()
    for attempt in ("first", "rerun"):
        d = tmpdir()
        procs = []
        for node in (0, 1):
            cmd = [PYTHON, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "2"]
            if backend == "static":
                cmd += ["--node_rank", str(node), "--master_addr", "127.0.0.1", "--master_port",
                        str(port)]
            else:  # which node is group 0 is the rendezvous' choice: same flags on both
                cmd += ["--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}",
                        "--rdzv_id", f"gs-{port}-{attempt}"]
            # Debian's torch 1.13 on Python 3.11 crashes without these (its Std enum)
            cmd += ["--redirects", "1", "--tee", "1", "--no_python", BENCH] + ARGS + \
                ["--save-params", d + "/p", "--out", d]
            procs.append(start(cmd, clean_env()))
        if not ran(wait_all(procs, f"torchrun {backend} {attempt}"), f"torchrun {backend}"):
            return
        complete(d, "torchrun", ref, f"torchrun {backend} {attempt}")
        port = free_port_pair()


# Open MPI's rsh agent for hosts that are all this machine: it drops ssh's
# options and the host name and runs the daemon here, in a session directory
# of that host's own (two daemons sharing one race on its files: hwloc's
# shared topology, the job's directories)
HERE_RSH = r"""#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) host=$1; shift; break;; esac; done
dir="@BASE@/$host"
mkdir -p "$dir"
cmd=$(printf '%s' "$*" | sed "s|orte_tmpdir_base \"[^\"]*\"|orte_tmpdir_base \"$dir\"|")
case "$cmd" in *"$dir"*) ;; *) cmd="$cmd -mca orte_tmpdir_base $dir";; esac
exec /bin/sh -c "$cmd"
"""


def openmpi():
    mpirun = shutil.which("mpirun.openmpi") or shutil.which("mpiexec.openmpi")
    if not mpirun:
        skip("Open MPI's mpirun is not installed (apt install openmpi-bin)")
    ref, d, t = reference(), tmpdir(), tmpdir()
    agent = os.path.join(t, "here-rsh")
    with open(agent, "w") as f:
        f.write(HERE_RSH.replace("@BASE@", t))
    os.chmod(agent, 0o755)
    port = free_port_pair()
    common = [mpirun, "--allow-run-as-root", "--oversubscribe"]
    job = ["-np", str(WORLD), "-x", "MASTER_ADDR=127.0.0.1", "-x", f"MASTER_PORT={port}",
           BENCH] + ARGS + ["--save-params", d + "/p", "--out", d]
    two = common + ["--mca", "plm_rsh_agent", agent, "--host", "nodea:2,nodeb:2"] + job
    if ran(wait_all([start(two, clean_env())], "mpirun 2 hosts"), "mpirun 2 hosts"):
        complete(d, "openmpi", ref, "mpirun 2 hosts x 2")
    d = tmpdir()
    job[job.index("--save-params") + 1:job.index("--out") + 2] = [d + "/p", "--out", d]
    if ran(wait_all([start(common + job, clean_env())], "mpirun -np 4"), "mpirun -np 4"):
        complete(d, "openmpi", ref, "mpirun -np 4 (rerun)")


def mpich():
    hydra = shutil.which("mpiexec.hydra") or shutil.which("mpiexec.mpich")
    if not hydra:
        skip("MPICH's mpiexec.hydra is not installed (apt install mpich)")
    ref, d = reference(), tmpdir()
    port = free_port_pair()
    cmd = [hydra, "-launcher", "fork", "-hosts", "nodea:2,nodeb:2", "-n", str(WORLD),
           "-genv", "MASTER_ADDR", "127.0.0.1", "-genv", "MASTER_PORT", str(port),
           BENCH] + ARGS + ["--save-params", d + "/p", "--out", d]
    if ran(wait_all([start(cmd, clean_env())], "mpiexec.hydra"), "mpiexec.hydra"):
        complete(d, "mpich", ref, "mpiexec.hydra 2 hosts x 2")


def slurm_env():
    ref, d = reference(), tmpdir()
    job = random.randrange(1, 1 << 20)
    # a job id whose derived port (job.c: 20000 + (id * 16 + step) % 40000) is free and below
    # the ephemeral range
    while not (20000 + job * 16 % 40000 < 32000 and socket_free(20000 + job * 16 % 40000)):
        job += 1
    procs = []
    for r in range(WORLD):
        env = clean_env({"SLURM_PROCID": str(r), "SLURM_NTASKS": str(WORLD),
                         "SLURM_LOCALID": str(r % 2), "SLURM_NODEID": str(r // 2),
                         "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
                         "SLURM_STEP_NODELIST": "localhost,localhost", "SLURM_JOB_ID": str(job),
                         "SLURM_STEP_ID": "0"})
        procs.append(start([BENCH] + ARGS + ["--save-params", d + "/p", "--out", d], env))
    if ran(wait_all(procs, "srun environment"), "srun environment"):
        complete(d, "slurm", ref, "srun environment 2 nodes x 2")


SLURM_CONF = """ClusterName=gstest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={p0}
SlurmdPort={p1}
AuthType=auth/munge
AuthInfo=socket={d}/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
NodeName=n[1-2] NodeHostname={host} NodeAddr=127.0.0.1 Port={p2}-{p3} CPUs=2 State=UNKNOWN
PartitionName=gs Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


def slurm():
    tools = ["munged", "munge", "slurmctld", "slurmd", "srun", "sinfo"]
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    missing = [t for t in tools if not shutil.which(t, path=path)]
    if missing:
        skip(f"Slurm or munge is not installed ({', '.join(missing)} missing: apt install "
             "slurm-wlm munge)")
    if os.geteuid() != 0:
        skip("a private Slurm cluster needs root (slurmd runs as root)")
    ref, d, t = reference(), tmpdir(), tmpdir()
    for sub in ("state", "spool"):
        os.mkdir(os.path.join(t, sub))
    with open(os.path.join(t, "munge.key"), "wb") as f:
        f.write(os.urandom(1024))
    os.chmod(os.path.join(t, "munge.key"), 0o600)
    base = free_port_pair()
    ports = [base] + [free_port_pair() for _ in range(3)]
    conf = os.path.join(t, "slurm.conf")
    with open(conf, "w") as f:
        f.write(SLURM_CONF.format(host=socket.gethostname(), d=t, p0=ports[0], p1=ports[1],
                                  p2=ports[2], p3=ports[2] + 1))
    env = clean_env({"SLURM_CONF": conf, "PATH": path})
    daemons = []

    def daemon(cmd):
        daemons.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.STDOUT, start_new_session=True))
    try:
        daemon([shutil.which("munged", path=path), "-F", "--force", f"--socket={t}/munge.sock",
                f"--key-file={t}/munge.key", f"--pid-file={t}/munged.pid",
                f"--log-file={t}/munged.log", f"--seed-file={t}/munge.seed"])
        daemon([shutil.which("slurmctld", path=path), "-D", "-i"])
        for n in ("n1", "n2"):
            daemon([shutil.which("slurmd", path=path), "-D", "-N", n])
        idle = False
        for _ in range(100):  # 20 s for both nodes to register
            r = subprocess.run(["sinfo", "-h", "-o", "%t %D"], env=env, capture_output=True,
                               text=True, timeout=10)
            if r.stdout.split() == ["idle", "2"]:
                idle = True
                break
            if any(p.poll() is not None for p in daemons):
                break
            subprocess.run(["sleep", "0.2"])
        if not idle:
            logs = " ".join(open(f).read()[-400:] for f in glob.glob(t + "/*.log"))
            skip(f"a private Slurm cluster did not come up here ({logs.strip()[-600:]})")
        port = free_port_pair()
        # MASTER_ADDR: the nodes' names (n1, n2) are not resolvable here
        cmd = ["srun", "-N", "2", "--ntasks-per-node", "2", "--export", "ALL", BENCH] + ARGS + \
            ["--save-params", d + "/p", "--out", d]
        job = dict(env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        if ran(wait_all([start(cmd, job)], "srun"), "srun -N 2 --ntasks-per-node 2"):
            complete(d, "slurm", ref, "srun 2 nodes x 2")
        for _ in range(50):  # the step's daemons report its end before slurmd goes
            r = subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True,
                               timeout=10)
            if r.returncode == 0 and not r.stdout.strip():
                break
            subprocess.run(["sleep", "0.2"])
    finally:
        for p in reversed(daemons):
            if p.poll() is None:
                p.terminate()
        for p in reversed(daemons):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        # a slurmstepd of this cluster (it carries our SLURM_CONF) that outlived its slurmd
        mark = f"SLURM_CONF={conf}".encode()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if mark in f.read().split(b"\0"):
                        os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def socket_free(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def nnodes():
    ref = reference()
    for attempt in ("first", "rerun"):
        d = tmpdir()
        port = free_port_pair()
        procs = [start([BENCH, "--nnodes", "2", "--node-rank", str(n), "--nproc-per-node", "2",
                        "--master-addr", "127.0.0.1", "--master-port", str(port)] + ARGS +
                       ["--save-params", d + "/p", "--out", d], clean_env()) for n in (0, 1)]
        if ran(wait_all(procs, f"bench --nnodes {attempt}"), "bench --nnodes"):
            complete(d, "bench --nnodes", ref, f"bench --nnodes {attempt}")


def fails(procs_env, what, *needles):
    """each process (env, extra flags) started; some exit non-zero, the
    output names every needle; none hangs"""
    port = free_port_pair()
    procs = []
    for env, flags in procs_env:
        env = dict(env)
        if env.get("MASTER_PORT") == "P":
            env["MASTER_PORT"] = str(port)
        procs.append(start([BENCH] + ARGS + ["--timeout", "5", "--out", tmpdir()] + flags,
                           clean_env(env)))
    outs = wait_all(procs, what, timeout=30)
    text = "\n".join(t for _, t in outs)
    check(any(rc not in (0, None) for rc, _ in outs) and all(n in text for n in needles),
          f"{what}: exit codes {[rc for rc, _ in outs]}, wanted {needles} in:\n{text[-2000:]}")


def errors():
    rk = lambda r, w, **kw: dict(RANK=str(r), WORLD_SIZE=str(w), MASTER_ADDR="127.0.0.1",
                                 MASTER_PORT="P", **kw)
    fails([(dict(RANK="1"), [])], "RANK alone", "RANK=1 is set but WORLD_SIZE is not",
          "set WORLD_SIZE")
    fails([(dict(OMPI_COMM_WORLD_SIZE="2"), [])], "OMPI size alone",
          "OMPI_COMM_WORLD_RANK is not")
    fails([(rk(4, 4), [])], "rank outside", "RANK=4 is outside the world", "WORLD_SIZE=4")
    fails([(rk(1, 4, LOCAL_RANK="2", LOCAL_WORLD_SIZE="2"), [])], "local rank outside",
          "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2")
    fails([(dict(PMI_RANK="1", PMI_SIZE="2"), [])], "mpich without a port",
          "MASTER_PORT is not set", "-genv MASTER_PORT")
    fails([(rk(0, 3), []), (rk(1, 3), []), (rk(1, 3), [])], "duplicated rank",
          "registered twice", "RANK=1")
    fails([(rk(0, 2), []), (rk(1, 3), [])], "world sizes disagree",
          "rank 1 was started with world size 3, rank 0 with 2", "same WORLD_SIZE")
    fails([(rk(0, 2), []), (rk(1, 2), ["--seed", "4"])], "configurations disagree",
          "differs from rank 0 in seed")
    fails([({}, ["--nnodes", "2", "--node-rank", "2", "--master-addr", "127.0.0.1",
                 "--master-port", "29500"])], "--node-rank outside", "--node-rank 2 is outside")
    fails([({}, ["--nnodes", "2", "--node-rank", "1"])], "--nnodes without a master",
          "give --master-addr")


def readme():
    section = open(os.path.join(SRC, "docs", "launching.md")).read()
    blocks = [b.split("```", 1)[0] for b in section.split("```sh\n")[1:]]
    cmds = []
    for b in blocks:
        for line in b.replace("\\\n", " ").splitlines():
            line = line.split(" # ", 1)[0].strip()
            if line and not line.startswith("#"):
                cmds.append(line)
    check(len(cmds) >= 8, f"docs/launching.md: {len(cmds)} launch commands found")
    small = ["--model", "mlp:784-32-10", "--synthetic-samples", "2048", "--threads", "1",
             "--timeout", "20", "--quiet"]
    openmpi = shutil.which("mpirun") and "Open MPI" in subprocess.run(
        ["mpirun", "--version"], capture_output=True, text=True).stdout
    have = {"torchrun": shutil.which("torchrun"), "mpirun": openmpi,
            "mpiexec.hydra": shutil.which("mpiexec.hydra"), "build/bench/bench": True}
    tried = 0
    for cmd in cmds:
        words = cmd.split()
        if words[0] == "srun" or "--host" in words or "-hosts" in words:
            continue
        if not have.get(words[0]):
            skip_part(f"docs/launching.md's {cmd}", f"{words[0]} is not installed")
            continue
        d = tmpdir()
        port = free_port_pair()
        words = [BENCH if w == "build/bench/bench" else
                 w.replace("10.0.0.1", "127.0.0.1").replace("29500", str(port))
                 .replace("29400", str(port)) for w in words] + small + ["--out", d]
        copies = [words]
        for flag in ("--node_rank", "--node-rank"):
            if flag in words:  # the other node, on this machine
                other = list(words)
                other[other.index(flag) + 1] = "1"
                copies.append(other)
        if "c10d" in words:
            copies.append(list(words))
        outs = wait_all([start(c, clean_env()) for c in copies], cmd)
        tried += 1
        if not ran(outs, f"docs/launching.md: {cmd}"):
            continue
        print(f"readme: ran x{len(copies)}: {cmd}")
        try:
            run0 = json.load(open(os.path.join(d, "report.json")))["runs"][0]
            check(run0["world"] == 4, f"docs/launching.md: {cmd}: world {run0['world']}, not 4")
        except (OSError, ValueError, KeyError, IndexError) as ex:
            check(False, f"docs/launching.md: {cmd}: no report.json in --out: {ex}")
    if tried == 0:
        skip("none of docs/launching.md's launchers is installed")


CASES = {"torchrun": lambda: torchrun("static"), "torchrun-c10d": lambda: torchrun("c10d"),
         "openmpi": openmpi, "mpich": mpich, "slurm": slurm, "slurm-env": slurm_env,
         "nnodes": nnodes,
         "errors": errors, "readme": readme}
CASES[CASE]()
finish(f"launchers {CASE}")
