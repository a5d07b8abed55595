#!/usr/bin/python3
"""sharded.py BENCH: the sharded parameter server (--ps-servers K).

  bits    K = 1, 2, 3 at world 3 and K = 2, 4 at world 4, one bucket and
          several (so that range boundaries cut through buckets), with and
          without overlap: the parameters are bitwise those of K = 1, and
          those of one process with the whole batch (to 1e-5: only the
          summation order differs); every rank holds the same bits after
          every step; report.json says ps_servers K (and the run's id
          "-sK"); each rank's bytes are the cost model's within 5%
  own     --ps-server-hosts: K = 1, 2, 3 servers in processes of their own
          at world 3: the same bits as one server in rank 0; every rank's
          bytes are S each way (the cost model's)
  flags   bad combinations exit 2 with a message naming the flag; in a sweep
          of ps and ring the flags shard the ps runs and leave the ring's
  kill    world 3, 3 servers, a rank SIGKILLed mid-run (rank 2, or rank 0;
          rank 1 with servers of their own): the others stop within the
          timeout with an error naming the dead rank and the server that
          noticed; the launcher exits non-zero and leaves no server behind

    sharded.py BENCH"""
import os
import re
import time

from gstest import (SMALL, check, finish, kill_rank, load_params, max_rel, report, run, same_bits,
                    steps_csv, tmpdir)

B, STEPS = 8, 6
BASE = SMALL + ["--no-shuffle", "--steps", str(STEPS), "--lr", "0.05", "--momentum", "0.9",
                "--weight-decay", "0.001", "--seed", "3", "--warmup", "0", "--batch", str(B)]
SMALL_BUCKETS = ["--bucket-mb", "0.03", "--first-bucket-mb", "0.01"]


def train(world, servers, extra):
    d = tmpdir()
    own = "--ps-server-hosts" in extra
    r = run(BASE + ["--mode", "ps", "--world", str(world), "--ps-servers", str(servers),
                    "--verify", "--save-params", d + "/p", "--out", d] + extra)
    what = f"ps world {world} --ps-servers {servers} {' '.join(extra)}"
    if not check(r.returncode == 0, f"{what}: exit {r.returncode}: {r.stderr}"):
        return None
    rows = steps_csv(d)
    for step in range(STEPS):
        hashes = {row["param_hash"] for row in rows if int(row["step"]) == step}
        check(len(hashes) == 1 and "0000000000000000" not in hashes,
              f"{what} step {step}: ranks hold different parameters: {hashes}")
    run0 = report(d)["runs"][0]
    check(run0["mode"] == "ps" and run0["world"] == world and run0["ps_servers"] == servers and
          run0["ps_server_hosts"] == own,
          f"{what}: report.json says {run0['mode']} world {run0['world']} ps_servers "
          f"{run0.get('ps_servers')} ps_server_hosts {run0.get('ps_server_hosts')}")
    tag = f"-s{servers}{'own' if own else ''}-"
    check((tag in run0["id"]) == (servers > 1 or own), f"{what}: run id {run0['id']}")
    S = run0["gradient_bytes"]
    if own:
        for pr in run0["per_rank"]:
            check(pr["model_bytes_sent"] == S and pr["model_bytes_recv"] == S,
                  f"{what} rank {pr['rank']}: the model's bytes are S = {S} each way: {pr}")
    for pr in run0["per_rank"]:
        model = pr["model_bytes_sent"] + pr["model_bytes_recv"]
        got = pr["bytes_sent"] + pr["bytes_recv"]
        check(model > 0 and abs(got / model - 1) <= 0.05,
              f"{what} rank {pr['rank']}: {got:.0f} bytes/step vs the cost model's {model:.0f} "
              f"(more than 5% apart)")
    return load_params(d + "/p")


def case_bits():
    for world, ks in ((3, (2, 3)), (4, (2, 4))):
        ref_dir = tmpdir()
        r = run(BASE[:-1] + [str(world * B), "--mode", "local", "--save-params", ref_dir + "/p",
                             "--out", ref_dir])
        if not check(r.returncode == 0, f"local batch {world * B}: {r.stderr}"):
            continue
        ref = load_params(ref_dir + "/p")
        for extra in ([], SMALL_BUCKETS, SMALL_BUCKETS + ["--overlap"]):
            one = train(world, 1, extra)
            if one is None:
                continue
            err = max_rel(one, ref)
            check(err <= 1e-5, f"ps world {world} vs one process: relative error {err:.2e}")
            for k in ks:
                got = train(world, k, extra)
                if got is not None:
                    check(same_bits(got, one), f"ps world {world} --ps-servers {k} "
                          f"{' '.join(extra)}: parameters differ from one server's")


def case_own():
    one = train(3, 1, [])
    for k in (1, 2, 3):
        got = train(3, k, ["--ps-server-hosts"])
        if one is not None and got is not None:
            check(same_bits(got, one), f"ps world 3 --ps-servers {k} --ps-server-hosts: "
                  f"parameters differ from one server's in rank 0")


def case_sweep():
    for own in ([], ["--ps-server-hosts"]):
        d = tmpdir()
        r = run(SMALL + ["--steps", "3", "--mode", "ps,ring", "--world", "2", "--ps-servers", "2",
                         "--out", d] + own)
        if check(r.returncode == 0, f"ps,ring --ps-servers 2 {own}: {r.stderr}"):
            got = {(x["mode"], x["ps_servers"], x["ps_server_hosts"]) for x in report(d)["runs"]}
            check(got == {("ps", 2, bool(own)), ("ring", 1, False)},
                  f"ps,ring --ps-servers 2 {own}: runs {got}")


def case_flags():
    for flags, why in (
            (["--mode", "ps", "--world", "2", "--ps-servers", "0"], "0 servers"),
            (["--mode", "ps", "--world", "3", "--ps-servers", "4"], "more servers than ranks"),
            (["--mode", "ring", "--world", "2", "--ps-servers", "2"], "not ps"),
            (["--mode", "ps", "--world", "2", "--ps-servers", "2", "--ps-dedicated"],
             "with a dedicated server"),
            (["--mode", "ps", "--world", "2", "--ps-servers", "2", "--precision", "fp16"],
             "loss scaling"),
            (["--mode", "ps", "--world", "2", "--ps-servers", "2", "--collective", "allreduce"],
             "the collective"),
            (["--mode", "ps", "--world", "2", "--ps-servers", "2", "--ps-server-hosts",
              "--transport", "ipc"], "servers of their own over ipc"),
            (["--mode", "ring", "--world", "2", "--ps-server-hosts"], "servers of their own, ring")):
        r = run(SMALL + ["--steps", "1"] + flags, timeout=60)
        flag = "--ps-server-hosts" if "--ps-server-hosts" in flags else "--ps-servers"
        check(r.returncode == 2 and flag in r.stderr,
              f"{why} ({' '.join(flags)}): exit {r.returncode}, expected 2 with a message naming "
              f"{flag}: {r.stderr.strip()[:300]}")


def processes_with(word):
    """pids whose command line holds word (the run's --out directory)"""
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if os.fsencode(word) in f.read().split(b"\0"):
                    found.append(int(pid))
        except (OSError, ValueError):
            pass
    return found


def case_kill():
    long = ["--model", "mlp:784-256-10", "--synthetic-samples", "4096", "--threads", "1",
            "--batch", "16", "--steps", "100000", "--warmup", "0", "--timeout", "3"]
    for victim, own in ((2, []), (0, []), (1, ["--ps-server-hosts"])):
        d = tmpdir()
        err = kill_rank(long + ["--mode", "ps", "--world", "3", "--ps-servers", "3", "--out", d] +
                        own, victim, 9, f"kill rank {victim}", wait=40)
        # after "bench: rank R:", the dead rank named (not as "ps rank R", the reporter)
        named = [l for l in err.splitlines() if l.startswith("bench: rank ") and
                 "ps server" in l and re.search(rf"(?<!ps )rank {victim}\b", l.split(":", 2)[-1])]
        check(named, f"kill rank {victim}: no surviving rank named it and a ps server: {err}")
        time.sleep(0.2)
        left = processes_with(d)
        check(not left, f"kill rank {victim}: processes of the run left: {left}")


case_flags()
case_sweep()
case_kill()
case_own()
case_bits()
finish("sharded ps")
