#!/usr/bin/python3
"""bench_hosts.py BENCH CASE: the real bench on emulated hosts (--hosts,
--link).

  equiv   2 and 4 hosts (one rank each), and 4 ranks on 2 hosts, in ps
          (--no-ps-local-reduce) and ring (--algo ring): the parameters are
          bitwise those of the same run over loopback, and those of one process with the whole batch (to 1e-5:
          only the summation order differs); report.json names the hosts
          and the link
  hier    4 ranks on 2 hosts, ring mode: auto trains with the hierarchical
          all-reduce (report.json's algo), every rank the same parameters
          every step, two runs bitwise alike, within 1e-5 of the flat ring;
          the collective --algo hier checks its sums; a rank killed mid-run
          is named by the launcher and by a surviving rank on each host,
          before the timeout, and nothing of the run is left
  local   4 ranks on 2 hosts, ps mode: the default aggregates each host
          (report.json's algo "local-reduce"), every rank the same parameters
          every step, two runs bitwise alike, within 1e-5 of the flat ps
          (--no-ps-local-reduce); each link carries what the cost model says
          for it ((H-1) S at the master's host); a rank killed mid-run
          is named by the launcher and by a surviving rank on each host,
          before the timeout, and nothing of the run is left
  bytes   each link's counters over the measured steps carry what the cost
          model says (within 5%, plus TCP/IP headers); in ps mode host 0's
          link is the busiest; the cost model's communication time is there
  delay   --latency D: each step of ps waits at least 2D (push and pull
          cross the links), the collective's recursive doubling 2D per
          all-reduce at world 4, forced or picked by auto (never shm across
          hosts); the report names how (netem or delay line)
  sharded --ps-servers K, one server per host (K = hosts): each link carries
          what the cost model's sps-colo says (the same bounds as bytes),
          every host alike; with --ps-server-hosts (servers on hosts of their
          own) each rank's host carries what sps-hosts says, S each way (its
          ranks' sum: the hosts aggregate by default), and each server's
          host (listed after them) H S / K; with --no-ps-local-reduce the
          parameters are bitwise those of one server over loopback
  kill    SIGKILL of the launcher mid-run: no namespace, veth or process of
          the run remains, nothing in /run/netns
  nocap   without CAP_NET_ADMIN: --link RATE is a clear error naming it,
          non-zero exit; the default (no --link) runs on loopback, its header
          and its verdict saying why (and, with more ranks than cores, that
          the comparison is not meaningful there)
  default bench's default sweep, short (as root): on emulated hosts, one per
          rank at 1 Gbit/s, said in the header; every multi-rank run in
          report.json with hosts, link and links[]; the verdict's figures are
          those of report.json's runs (host 0's link in ps, every link in the
          ring); nothing of the cluster left afterwards
  signals the default sweep stopped mid-run by SIGINT (exit 130, the runs
          that completed in report.json) and by SIGKILL of the launcher:
          nothing of the cluster left either way
  calibrate  --calibrate --hosts 2 --link RATE: the link part measured
          between two emulated hosts (its rate within what the link can
          carry), nothing left behind; other --hosts refused
  exec    -- CMD: a program of one's own, once per rank on the hosts: the
          torchrun variables and the host's address in its environment,
          what it sends counted on the right links, a failing rank named, one
          that outlives another by --timeout killed and named, nothing left
          behind; flags that do nothing there are refused

All but nocap need root (CAP_NET_ADMIN + CAP_SYS_ADMIN) and exit 77 (skip)
elsewhere, saying why."""
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from gstest import (BENCH, SMALL, check, finish, have_caps, kill_rank, load_params, max_rel,
                    need_root, ours, report, run, same_bits, snapshot, steps_csv, tmpdir,
                    wait_clean)


def ranks_naming(err, who):
    """the ranks whose "bench: rank N: ..." message names who; the ranks
    write stderr at once, so one message may start in the middle of
    another's line"""
    return {m.group(1) for m in re.finditer(r"bench: (rank \d+): (.*?)(?=bench: rank |\n|$)", err)
            if who in m.group(2)}


CASE = sys.argv[2]
HEADERS = 66 / 1448       # Ethernet/IP/TCP headers per full segment
FIXED = 64 * 1024         # per step: acknowledgements, ZMTP frames, ARP


B, STEPS = 8, 5
BASE = SMALL + ["--no-shuffle", "--steps", str(STEPS), "--lr", "0.05", "--momentum", "0.9",
                "--seed", "5", "--warmup", "0", "--batch", str(B)]


def case_equiv():
    need_root()
    for world, hosts in ((2, 2), (4, 4), (4, 2)):
        ref_dir = tmpdir()
        r = run(BASE[:-1] + [str(world * B), "--mode", "local", "--save-params", ref_dir + "/p",
                             "--out", ref_dir])
        if not check(r.returncode == 0, f"local batch {world * B}: {r.stderr}"):
            continue
        ref = load_params(ref_dir + "/p")
        for mode in ("ps", "ring"):
            got = {}
            for where in ("loopback", "hosts"):
                d = tmpdir()
                flags = ["--hosts", str(hosts), "--link", "1gbit"] if where == "hosts" else []
                algo = ["--algo", "ring"] if mode == "ring" else ["--no-ps-local-reduce"]
                r = run(BASE + ["--mode", mode, "--world", str(world), "--save-params", d + "/p",
                                "--out", d, "--verify"] + flags + algo)
                if check(r.returncode == 0, f"{mode} world {world} on {where}: {r.stderr}"):
                    got[where] = load_params(d + "/p")
                    run0 = report(d)["runs"][0]
                    want = hosts if where == "hosts" else 0
                    check(run0["hosts"] == want and len(run0["links"]) == want,
                          f"{mode} world {world} on {where}: report.json says hosts "
                          f"{run0['hosts']} with {len(run0['links'])} links, expected {want}")
                    if where == "hosts":
                        check(run0["link"]["rate_bps"] == 1e9,
                              f"report.json link: {run0['link']}")
                        hashes = {(row["step"], row["param_hash"]) for row in steps_csv(d)}
                        check(len(hashes) == STEPS,
                              f"{mode} world {world} on {hosts} hosts: ranks differ ({hashes})")
            if len(got) == 2:
                check(same_bits(got["hosts"], got["loopback"]),
                      f"{mode} world {world} on {hosts} hosts: parameters differ from loopback")
                err = max_rel(got["hosts"], ref)
                check(err <= 1e-5, f"{mode} world {world} on {hosts} hosts vs one process: "
                      f"relative error {err:.2e}")


def case_hier():
    need_root()
    flags = ["--hosts", "2", "--world", "4", "--link", "1gbit", "--mode", "ring"]
    got = {}
    for name, algo in (("hier", []), ("again", []), ("ring", ["--algo", "ring"])):
        d = tmpdir()
        r = run(BASE + flags + algo + ["--save-params", d + "/p", "--out", d, "--verify"])
        if not check(r.returncode == 0, f"{name}: {r.stderr}"):
            continue
        got[name] = load_params(d + "/p")
        run0 = report(d)["runs"][0]
        want = "ring" if algo else "hier"
        check(run0["algo"] == want, f"{name}: report.json says algo {run0['algo']!r}, not {want}")
        hashes = {(row["step"], row["param_hash"]) for row in steps_csv(d)}
        check(len(hashes) == STEPS, f"{name}: ranks differ ({hashes})")
    if len(got) == 3:
        check(same_bits(got["hier"], got["again"]), "hier: two runs differ")
        err = max_rel(got["hier"], got["ring"])
        check(0 < err <= 1e-5, f"hier vs the flat ring: relative difference {err:.2e} (0 would "
              "mean the flat ring ran twice)")
    d = tmpdir()
    r = run(SMALL[:-4] + flags[:-2] + ["--mode", "ring", "--collective", "allreduce", "--algo",
            "hier", "-b", "1K", "-e", "4M", "-f", "16", "-n", "3", "-w", "1", "--out", d])
    if check(r.returncode == 0, f"collective --algo hier: {r.stderr}"):
        rows = [l.split() for l in r.stdout.splitlines() if l.strip() and l.split()[0].isdigit()]
        check(len(rows) == 4 and all(x[-1] == "hier" and x[8] == "0" and x[12] == "0"
                                     for x in rows), f"collective --algo hier: {r.stdout}")
    killed_on_hosts(flags, "hier kill")


def killed_on_hosts(flags, what):
    """rank 3 of 4 on 2 hosts SIGKILLed mid-run (gstest.kill_rank): a
    survivor on each host names it too, and nothing of the run is left:
    no namespace, veth or process, nothing in /dev/shm"""
    before = snapshot()
    shm_before = sorted(os.listdir("/dev/shm"))
    d = tmpdir()
    err = kill_rank(SMALL[:-4] + flags + ["--timeout", "8", "--steps", "100000", "--warmup", "0",
                                          "--batch", "16", "--out", d], 3, 12, what)
    named = ranks_naming(err, "rank 3")
    check(named & {"rank 0", "rank 1"} and "rank 2" in named,
          f"{what}: a survivor on each host names rank 3 ({named}): {err}")
    wait_clean(before, [], [], what, check)
    left = sorted(set(os.listdir("/dev/shm")) - set(shm_before))
    check(not [f for f in left if "gradsync" in f], f"{what}: left in /dev/shm: {left}")


def case_local():
    need_root()
    flags = ["--hosts", "2", "--world", "4", "--link", "1gbit", "--mode", "ps"]
    # case_bytes' model and enough measured steps that a step in flight at
    # the window's edges is noise
    base = [a if a != "mlp:784-32-10" else "mlp:784-512-512-10" for a in BASE]
    longer = ["--steps", "14", "--warmup", "2"]
    got = {}
    for name, extra in (("local", []), ("again", []), ("flat", ["--no-ps-local-reduce"])):
        d = tmpdir()
        r = run(base + flags + extra + longer + ["--save-params", d + "/p", "--out", d,
                                                 "--verify"])
        if not check(r.returncode == 0, f"{name}: {r.stderr}"):
            continue
        got[name] = load_params(d + "/p")
        run0 = report(d)["runs"][0]
        want = "flat" if extra else "local-reduce"
        check(run0["algo"] == want, f"{name}: report.json says algo {run0['algo']!r}, not {want}")
        rows = steps_csv(d)
        hashes = {(row["step"], row["param_hash"]) for row in rows}
        check(len(hashes) == len({row["step"] for row in rows}) >= 12,
              f"{name}: ranks differ ({hashes})")
        check_links(f"ps {name}", 2, run0["links"])
    if len(got) == 3:
        check(same_bits(got["local"], got["again"]), "local-reduce: two runs differ")
        err = max_rel(got["local"], got["flat"])
        check(0 < err <= 1e-5, f"local-reduce vs the flat ps: relative difference {err:.2e} "
              "(0 would mean the flat ps ran twice)")
    killed_on_hosts(flags, "local kill")


def check_links(what, hosts, links):
    """one link per host, each carrying the cost model's bytes (protocol
    overhead aside), with sane busy fractions"""
    check([l["host"] for l in links] == list(range(hosts)),
          f"{what}: one link per host, in order: {[l['host'] for l in links]}")
    for l in links:
        for way in ("tx", "rx"):
            got, model = l[way + "_bytes"], l["model_" + way + "_bytes"]
            lo, hi = 0.95 * model, model * (1.05 + HEADERS) + FIXED
            check(model is not None and lo <= got <= hi,
                  f"{what} {hosts} hosts, host {l['host']} {way}: {got:.0f} bytes/step, the "
                  f"model says {model} (allowed {lo:.0f}..{hi:.0f})")
        check(0 < l["busy"] <= 1 and l["busy_tx"] <= l["busy"] + 1e-9 and
              l["busy_rx"] <= l["busy"] + 1e-9,
              f"{what} host {l['host']}: busy fractions {l['busy_tx']}, {l['busy_rx']}, "
              f"{l['busy']}")


def case_bytes():
    need_root()
    flags = ["--model", "mlp:784-512-512-10", "--synthetic-samples", "2048", "--threads", "1",
             "--timeout", "30", "--quiet", "--steps", "16", "--warmup", "2", "--batch", "16",
             "--link", "1gbit"]
    for mode, world, hosts in (("ps", 4, 4), ("ring", 4, 4), ("ps", 4, 2)):
        d = tmpdir()
        r = run(flags + ["--mode", mode, "--world", str(world), "--hosts", str(hosts),
                         "--out", d])
        if not check(r.returncode == 0, f"{mode} world {world} on {hosts} hosts: {r.stderr}"):
            continue
        run0 = report(d)["runs"][0]
        links = run0["links"]
        check_links(mode, hosts, links)
        if mode == "ps" and hosts == world:  # (N-1) S on host 0's link, S on the others
            check(all(links[0]["rx_bytes"] > 1.5 * l["rx_bytes"] for l in links[1:]),
                  f"ps: host 0's link carries the most: {[l['rx_bytes'] for l in links]}")
        for chart, words in (("hosts.svg", ("emulated hosts", "step time")),
                             ("links.svg", ("link busy", "host"))):
            try:
                with open(os.path.join(d, chart)) as f:
                    svg = f.read()
            except OSError as err:
                svg = str(err)
            check(svg.startswith("<?xml") and all(w in svg for w in words) and
                  ("<rect" in svg or "<circle" in svg),
                  f"{mode}: {chart} is drawn with its axes ({words}): {svg[:120]!r}")
        cm = run0["cost_model"]
        check(cm["comm_s_predicted"] and cm["comm_s_predicted"] > 0 and
              cm["comm_s_measured"] > 0 and cm["bottleneck"],
              f"{mode}: the cost model's time is in report.json: {cm}")
    # no step after --warmup: every step is measured, and the links'
    # counters must cover the same steps (not an empty window at the end)
    d = tmpdir()
    short = ["--model", "mlp:784-512-512-10", "--synthetic-samples", "2048", "--threads", "1",
             "--timeout", "30", "--batch", "16", "--link", "1gbit", "--steps", "5",
             "--warmup", "5"]
    r = run(short + ["--mode", "ps", "--world", "2", "--hosts", "2", "--out", d])
    if check(r.returncode == 0, f"ps, 5 steps under --warmup 5: {r.stderr}"):
        run0 = report(d)["runs"][0]
        check(run0["warmup_steps"] == 0, f"5 steps under --warmup 5: measured from step "
              f"{run0['warmup_steps']}")
        # every step is in the window, step 0 too, with the job's setup on
        # the wire (handshakes, the first pull): more than the model's
        # steady step, never none
        for l in run0["links"]:
            for way in ("tx", "rx"):
                got, model = l[way + "_bytes"], l["model_" + way + "_bytes"]
                check(model and 0.95 * model <= got <= 1.25 * model,
                      f"ps, 5 steps under --warmup 5, host {l['host']} {way}: {got:.0f} "
                      f"bytes/step, the model says {model} (allowed 0.95..1.25x)")
            check(0 < l["busy"] <= 1, f"ps, 5 steps under --warmup 5, host {l['host']}: busy "
                  f"{l['busy']}")
        check("nan" not in r.stdout, f"ps, 5 steps under --warmup 5: a NaN printed:\n{r.stdout}")


def case_sharded():
    need_root()
    # enough measured steps that a step in flight at the window's edges
    # (the servers' ranks finish their steps at different times) is noise
    flags = ["--model", "mlp:784-512-512-10", "--synthetic-samples", "4096", "--threads", "1",
             "--timeout", "30", "--quiet", "--steps", "20", "--warmup", "2", "--batch", "16",
             "--link", "1gbit"]
    for world, hosts, k, own in ((4, 4, 4, False), (4, 2, 2, False), (3, 3, 3, False),
                                 (4, 2, 2, True), (3, 3, 1, True)):
        d = tmpdir()
        what = f"ps world {world} --ps-servers {k}" + (" --ps-server-hosts" if own else "")
        r = run(flags + ["--mode", "ps", "--world", str(world), "--hosts", str(hosts),
                         "--ps-servers", str(k), "--out", d] +
                (["--ps-server-hosts"] if own else []))
        if not check(r.returncode == 0, f"{what} on {hosts} hosts: {r.stderr}"):
            continue
        run0 = report(d)["runs"][0]
        check(run0["ps_servers"] == k and run0["ps_server_hosts"] == own,
              f"{what}: report.json ps_servers {run0['ps_servers']}, ps_server_hosts "
              f"{run0['ps_server_hosts']}")
        links = run0["links"]
        if own:  # a host sends its ranks' sum and receives the parameters, no more
            S = run0["gradient_bytes"]
            check(all(l["model_tx_bytes"] == S and l["model_rx_bytes"] == S
                      for l in links[:hosts]),
                  f"{what}: the model's bytes are S = {S} each way: {links[:hosts]}")
            check(all(l["model_tx_bytes"] == hosts * S / k and
                      l["model_rx_bytes"] == hosts * S / k for l in links[hosts:]),
                  f"{what}: a server host's model bytes are H S / K = {hosts * S / k}: "
                  f"{links[hosts:]}")
        check_links(what, hosts + (k if own else 0), links)
        # no master link: every rank's host carries the same
        rx = [l["rx_bytes"] for l in links[:hosts]]
        check(max(rx) < 1.15 * min(rx), f"{what}: the ranks' links carry alike: {rx}")
        cm = run0["cost_model"]
        check(cm["comm_s_predicted"] and cm["comm_s_predicted"] > 0,
              f"{what}: the cost model's time is in report.json: {cm}")
    got = {}
    for where, k, extra in (("loopback", 1, []),
                            ("4 hosts", 4, ["--hosts", "4", "--link", "1gbit"]),
                            ("2 hosts and 2 of their own", 2,
                             ["--hosts", "2", "--link", "1gbit", "--ps-server-hosts"])):
        d = tmpdir()
        r = run(BASE + ["--mode", "ps", "--world", "4", "--ps-servers", str(k), "--verify",
                        "--no-ps-local-reduce", "--save-params", d + "/p", "--out", d] + extra)
        if check(r.returncode == 0, f"ps world 4 --ps-servers {k} on {where}: {r.stderr}"):
            got[where] = load_params(d + "/p")
    for where in got:
        check(same_bits(got[where], got["loopback"]), f"ps world 4: servers on {where} give "
              "other parameters than one server over loopback")


def case_delay():
    need_root()
    D = 0.004
    d = tmpdir()
    r = run(SMALL + ["--mode", "ps", "--world", "2", "--link", "1gbit", "--latency", "4ms",
                     "--steps", "12", "--warmup", "2", "--out", d])
    if check(r.returncode == 0, f"ps with --latency 4ms: {r.stderr}"):
        run0 = report(d)["runs"][0]
        check(run0["link"]["latency_s"] == D and run0["link"]["delay"] in ("netem", "delay line"),
              f"report.json link: {run0['link']}")
        check(run0["step_time_s_median"] >= 2 * D,
              f"a ps step waits for a push and a pull across the link: "
              f"{run0['step_time_s_median'] * 1e3:.2f} ms < 2 x 4 ms")
        check(run0["cost_model"]["comm_s_predicted"] >= 2 * D,
              f"the cost model counts the delay: {run0['cost_model']}")
    # rd forced, and auto: emulated hosts share no memory (never shm), so
    # auto picks rd at these sizes and crosses the links too
    for algo in (["--algo", "rd"], []):
        d = tmpdir()
        r = run(["--mode", "ring", "--collective", "allreduce", "-b", "8", "-e", "1K", "-n", "5",
                 "-w", "1", "--world", "4", "--link", "1gbit", "--latency", "4ms", "--timeout",
                 "30", "--out", d] + algo)
        # nccl-tests' row: size count type redop root time(out-of-place) ... algo
        rows = [l.split() for l in r.stdout.splitlines() if l.strip() and l.split()[0].isdigit()]
        times = [float(x[5]) for x in rows]
        check(r.returncode == 0 and times and all(t >= 2 * D * 1e6 for t in times),
              f"rd at world 4 crosses the links twice per all-reduce ({algo or 'auto'}): "
              f"{times} us ({r.stderr})")
        check(rows and all(x[-1] == "rd" for x in rows),
              f"{algo or 'auto'} on emulated hosts runs {[x[-1] for x in rows]}, not rd")


def case_kill():
    need_root()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:   # PR_SET_CHILD_SUBREAPER: the orphans are ours
        check(False, "cannot become a subreaper: %s" % os.strerror(ctypes.get_errno()))
        return
    before = snapshot()
    d = tmpdir()
    env = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GS_LAUNCHED"):
        env.pop(k, None)
    p = subprocess.Popen([BENCH] + SMALL + ["--mode", "ring", "--world", "3", "--link",
                                            "100mbit", "--steps", "100000", "--out", d],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if len(steps_csv(d)) >= 6:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    me = os.stat("/proc/self/ns/net").st_ino
    pids, inos, rank_inos = [], set(), set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            ino = os.stat(f"/proc/{pid}/ns/net").st_ino
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        # the cluster's holders are forks of the launcher, its ranks execs of
        # it (its descendants only: another test's cluster may be running)
        if ino != me and (cmd.startswith(os.fsencode(BENCH)) or
                          cmd.startswith(b"/proc/self/exe")) and ours(int(pid), p.pid):
            pids.append(int(pid))
            inos.add(ino)
            if cmd.startswith(b"/proc/self/exe"):
                rank_inos.add(ino)
    check(len(rank_inos) == 3 and len(inos) == 4,
          f"mid-run 3 ranks live in 3 host namespaces, beside the switch's ({len(rank_inos)} "
          f"of {len(inos)} namespaces; pids {pids})")
    p.kill()
    p.wait(timeout=10)
    wait_clean(before, sorted(inos), pids, "SIGKILL of the launcher mid-run", check)


# the default sweep, short: its model, batch, worlds, link and repetitions
DEFAULT = ["--steps", "4", "--warmup", "1", "--repeat", "2", "--synthetic-samples", "2048",
           "--timeout", "30"]


def case_default():
    need_root()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: what the run leaves is ours
    before = snapshot()
    d = tmpdir()
    r = run(DEFAULT + ["--out", d], timeout=240)
    if not check(r.returncode == 0, f"the default sweep: exit {r.returncode}: {r.stderr[-800:]}"):
        return
    head = r.stdout.split("\nbench: run")[0].splitlines()
    check(len(head) > 1 and head[1] == "emulated hosts: 1 per rank, 1 Gbit/s links (--link none "
          "for loopback)", f"the header's link line: {head[1:2]}")
    rep = report(d)
    check(rep.get("links_chosen", {}).get("choice") == "auto: emulated hosts",
          f"links_chosen {rep.get('links_chosen')}")
    runs = rep["runs"]
    for x in runs:
        n = x["world"] if x["world"] > 1 else 0
        check(x["hosts"] == n and len(x["links"]) == n and
              (x["link"] or {}).get("rate_bps", 1e9 if n else None) == (1e9 if n else None),
              f"{x['id']}: hosts {x['hosts']}, {len(x['links'])} links, link {x['link']}")
    v = rep["verdict"]
    text = v["text"]
    ps = next(x for x in runs if x["mode"] == "ps" and x["world"] == 4)
    ring = next(x for x in runs if x["mode"] == "ring" and x["world"] == 4)
    l0 = ps["links"][0]
    vs = (l0["tx_bytes"] + l0["rx_bytes"]) / (
        sum(l["tx_bytes"] + l["rx_bytes"] for l in ps["links"][1:]) / 3)
    busy = [l["busy"] for l in ring["links"]]
    ratio = ring["throughput_samples_per_s"] / ps["throughput_samples_per_s"]
    check(v["world"] == 4 and v["hosts"] == 4 and text.startswith("world 4 on 1 Gbit/s links"),
          f"the verdict's world: {v['world']}, {text[:60]}")
    check(abs(v["ps_link_busy"] - l0["busy"]) < 1e-9 and abs(v["ps_link_bytes_vs_worker"] - vs) < 1e-9
          and abs(v["ring_link_busy_lo"] - min(busy)) < 1e-9 and
          abs(v["ring_link_busy_hi"] - max(busy)) < 1e-9 and abs(v["ratio"] - ratio) < 1e-9,
          f"the verdict's figures {v} vs report.json's runs")
    for quoted in (f"host 0's link busy {100 * l0['busy']:.0f}%", f"carrying {vs:.2f}x",
                   f"{100 * min(busy):.0f}", f"{ratio:.2f}x"):
        check(quoted in text, f"the verdict does not quote {quoted!r}: {text}")
    check(v["ps_bottleneck"] and f"bottleneck: {v['ps_bottleneck']}" in text, f"verdict {v}")
    print("default:", text)
    wait_clean(before, [], [], "the default sweep", check)


def cluster_now(me, launcher):
    """the launcher's ranks in emulated hosts: their pids and namespaces
    (its descendants only: another test's cluster may be running)"""
    pids, inos = [], set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            ino = os.stat(f"/proc/{pid}/ns/net").st_ino
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if ino != me and cmd.startswith(b"/proc/self/exe") and ours(int(pid), launcher):
            pids.append(int(pid))
            inos.add(ino)
    return pids, inos


def mid_run(d):
    """the default sweep started and run until both ranks of its world-2 run
    train, each in its host: the launcher, and the pids (ranks and the
    holders of their hosts) and namespaces of the cluster"""
    # world 1 (loopback) completes first; world 2 is long enough to be stopped
    p = subprocess.Popen([BENCH] + DEFAULT[:1] + ["200"] + DEFAULT[2:] +
                         ["--world", "1,2", "--out", d], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    me = os.stat("/proc/self/ns/net").st_ino
    pids, inos, deadline = [], set(), time.time() + 120
    while time.time() < deadline and len(inos) < 2:
        time.sleep(0.2)
        pids, inos = cluster_now(me, p.pid)
    time.sleep(1.5)  # a little of training
    for pid in os.listdir("/proc"):  # and the holders of their hosts
        try:
            if pid.isdigit() and os.stat(f"/proc/{pid}/ns/net").st_ino in inos:
                pids.append(int(pid))
        except OSError:
            pass
    return p, sorted(set(pids)), sorted(inos)


def case_signals():
    need_root()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    before = snapshot()
    d = tmpdir()
    p, pids, inos = mid_run(d)
    check(len(inos) >= 2, f"mid-run the ranks live on emulated hosts ({inos})")
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    check(p.returncode == 130, f"SIGINT: exit {p.returncode}: {err[-400:]}")
    try:
        rep = report(d)
        check(rep.get("interrupted") is True and rep["runs"],
              f"SIGINT: report.json keeps the runs that completed, marked interrupted: "
              f"{rep.get('interrupted')}, {len(rep.get('runs', []))} runs")
    except OSError as e:
        check(False, f"SIGINT: no report.json: {e}")
    wait_clean(before, inos, pids, "SIGINT of the default sweep", check)
    d = tmpdir()
    p, pids, inos = mid_run(d)
    check(len(inos) >= 2, f"mid-run the ranks live on emulated hosts ({inos})")
    p.kill()
    p.wait(timeout=10)
    wait_clean(before, inos, pids, "SIGKILL of the default sweep's launcher", check)


def case_nocap():
    prefix = []
    if have_caps():
        if not shutil.which("setpriv"):
            print("SKIP: setpriv (util-linux) is needed to drop CAP_NET_ADMIN")
            sys.exit(77)
        prefix = ["setpriv", "--inh-caps=-net_admin", "--bounding-set=-net_admin"]
    d = tmpdir()
    r = subprocess.run(prefix + [BENCH] + SMALL + ["--mode", "ps", "--world", "2", "--link",
                                                   "1gbit", "--steps", "2", "--out", d],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode != 0, f"without CAP_NET_ADMIN bench fails (exit {r.returncode})")
    check("CAP_NET_ADMIN" in r.stderr, f"naming the capability: {r.stderr.strip()}")
    # the default sweep without the capability: loopback, saying why
    if prefix:
        prefix = ["setpriv", "--inh-caps=-all", "--bounding-set=-net_admin,-sys_admin"]
    d = tmpdir()
    r = subprocess.run(prefix + [BENCH] + DEFAULT + ["--out", d], capture_output=True, text=True,
                       timeout=240)
    if not check(r.returncode == 0, f"the default without CAP_NET_ADMIN: exit {r.returncode}: "
                 f"{r.stderr[-600:]}"):
        return
    head = r.stdout.splitlines()[1] if len(r.stdout.splitlines()) > 1 else ""
    check(head.startswith("loopback, no emulated hosts: ") and "CAP_NET_ADMIN" in head and
          "root" in head, f"the header says loopback and why: {head!r}")
    rep = report(d)
    check(rep["links_chosen"]["choice"] == "auto: loopback" and
          all(x["hosts"] == 0 for x in rep["runs"]), f"links_chosen {rep['links_chosen']}")
    text = rep["verdict"]["text"]
    if os.sysconf("SC_NPROCESSORS_ONLN") < 4:
        check(text.startswith("Not a meaningful comparison here") and "CAP_NET_ADMIN" in text,
              f"the verdict says why the comparison is weak, and how to get links: {text}")
    print("nocap:", text[:300])


PEER = r"""
import os, socket, sys, time
env = {k: os.environ.get(k, "") for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
       "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GS_HOST", "GS_HOST_ADDR",
       "GLOO_SOCKET_IFNAME")}
out, n = sys.argv[1], int(sys.argv[2])
with open(os.path.join(out, "rank%s" % env["RANK"]), "w") as f:
    f.write(repr(env))
rank, addr, port = int(env["RANK"]), env["MASTER_ADDR"], int(env["MASTER_PORT"])
if rank == 0:  # takes n bytes from rank 2, on host 1
    s = socket.socket()
    s.bind((addr, port))
    s.listen(1)
    c, _ = s.accept()
    got = 0
    while True:
        b = c.recv(1 << 20)
        if not b:
            break
        got += len(b)
    sys.exit(0 if got == n else 3)
if rank == 2:
    for _ in range(100):
        try:
            c = socket.create_connection((addr, port))
            break
        except OSError:
            time.sleep(0.05)
    c.sendall(bytes(n))
    c.close()
"""


def case_exec():
    for flags, want in ((["--", "true"], "--hosts K --link RATE"),
                        (["--hosts", "2", "--link", "1gbit", "--steps", "3", "--", "true"],
                         "does nothing with -- CMD"),
                        (["--link", "1gbit", "--world", "2,4", "--", "true"], "not a list")):
        r = subprocess.run([BENCH] + flags, capture_output=True, text=True, timeout=30)
        check(r.returncode == 2 and want in r.stderr,
              f"bench {' '.join(flags)}: exit 2 saying '{want}' (exit {r.returncode}: "
              f"{r.stderr.strip()})")
    need_root()
    before = snapshot()
    d, n = tmpdir(), 8 << 20
    with open(os.path.join(d, "peer.py"), "w") as f:
        f.write(PEER)
    r = subprocess.run([BENCH, "--hosts", "2", "--world", "4", "--link", "100mbit", "--timeout",
                        "30", "--", sys.executable, os.path.join(d, "peer.py"), d, str(n)],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"-- peer.py on 2 hosts, world 4: exit {r.returncode}: {r.stderr}")
    for rank in range(4):
        try:
            with open(os.path.join(d, f"rank{rank}")) as f:
                env = eval(f.read())
        except OSError:
            check(False, f"rank {rank} did not run")
            continue
        h = rank // 2
        want = {"RANK": str(rank), "WORLD_SIZE": "4", "LOCAL_RANK": str(rank % 2),
                "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "10.77.0.1", "MASTER_PORT": "29500",
                "GS_HOST": str(h), "GS_HOST_ADDR": f"10.77.0.{h + 1}",
                "GLOO_SOCKET_IFNAME": "eth0"}
        check(env == want, f"rank {rank}'s environment: {env}, expected {want}")
    rows = {int(l.split()[0]): [float(x) for x in l.split()[1:3]]
            for l in r.stdout.splitlines() if l.strip() and l.split()[0].isdigit()}
    hi = n * (1 + HEADERS) + FIXED
    check(set(rows) == {0, 1}, f"a link row per host: {r.stdout}")
    if set(rows) == {0, 1}:
        up1, down0 = rows[1][0] * 1e6, rows[0][1] * 1e6
        check(n * 0.99 <= up1 <= hi and n * 0.99 <= down0 <= hi,
              f"host 1's upload ({up1:.0f} B) and host 0's download ({down0:.0f} B) carry the "
              f"{n} bytes rank 2 sent rank 0 (plus headers, at most {hi:.0f})")
        print(f"exec: host 1 up {up1 / 1e6:.2f} MB, host 0 down {down0 / 1e6:.2f} MB for "
              f"{n / 1e6:.2f} MB sent")
    r = subprocess.run([BENCH, "--hosts", "2", "--link", "1gbit", "--timeout", "5", "--", "sh",
                        "-c", "exit $RANK"], capture_output=True, text=True, timeout=60)
    check(r.returncode != 0 and "rank 1 exited with status 1" in r.stderr,
          f"a failing rank is named: exit {r.returncode}: {r.stderr.strip()}")
    t0 = time.time()
    r = subprocess.run([BENCH, "--hosts", "2", "--link", "1gbit", "--timeout", "2", "--", "sh",
                        "-c", "[ $RANK = 0 ] || exec sleep 100"], capture_output=True, text=True,
                       timeout=60)
    check(r.returncode != 0 and "rank 1 still running" in r.stderr and time.time() - t0 < 20,
          f"a rank left running after another ended is killed after --timeout and named "
          f"({time.time() - t0:.1f} s, exit {r.returncode}: {r.stderr.strip()})")
    wait_clean(before, [], [], "-- CMD runs", check)


def case_calibrate():
    for flags in (["--hosts", "3", "--link", "1gbit"], ["--hosts", "2"]):
        r = subprocess.run([BENCH, "--calibrate", "--model", "mlp:784-32-10"] + flags,
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and "--hosts 2 --link RATE" in r.stderr,
              f"--calibrate {' '.join(flags)}: exit 2 asking for --hosts 2 --link RATE (exit "
              f"{r.returncode}: {r.stderr.strip()})")
    need_root()
    before = snapshot()
    f = os.path.join(tmpdir(), "cal.json")
    r = subprocess.run([BENCH, "--calibrate", "--hosts", "2", "--link", "100mbit", "--model",
                        "mlp:784-32-10", "--batch", "8", "--out", f], capture_output=True,
                       text=True, timeout=180)
    if check(r.returncode == 0, f"--calibrate --hosts 2 --link 100mbit: {r.stderr}"):
        with open(f) as fh:
            link = json.load(fh).get("link", {})
        rate = link.get("rate_Bps", 0)
        payload = 100e6 / 8 * 1448 / 1514  # TCP payload of a saturated 100 Mbit/s link
        check(0.8 * payload <= rate <= 100e6 / 8 * 1.02,
              f"the measured link rate {rate / 1e6:.2f} MB/s is what a 100 Mbit/s link carries "
              f"(payload {payload / 1e6:.2f} MB/s)")
        check(0 <= link.get("latency_s", -1) < 0.01, f"a link latency under 10 ms: {link}")
        print(f"calibrate: link {rate * 8 / 1e6:.1f} Mbit/s, latency "
              f"{link.get('latency_s', 0) * 1e6:.0f} us")
    wait_clean(before, [], [], "--calibrate --hosts 2", check)


{"equiv": case_equiv, "hier": case_hier, "local": case_local, "bytes": case_bytes, "sharded": case_sharded, "delay": case_delay,
 "kill": case_kill, "nocap": case_nocap, "exec": case_exec, "calibrate": case_calibrate,
 "default": case_default, "signals": case_signals}[CASE]()
finish("bench on emulated hosts: " + CASE)
