#!/usr/bin/python3
"""bench_link_host.py BENCH CASE: a link of its own rate on emulated hosts
(--link-host H=RATE[,...]).

  bad   values bench refuses with exit 2 and a message naming --link-host:
        no --link, a host a world does not have, a rate that is not one, a
        host given twice, a missing '='. Runs everywhere (nothing is built).
  run   the ring at world 2 over --link 100mbit, then with --link-host
        1=20mbit: report.json has config.link_host, each link's rate_bps
        (100 and 20 Mbit/s) and the sentence naming host 1's rate; the links
        deliver the same bytes in both runs, but the run with the slow link
        takes at least twice as long per step (its 20 Mbit/s link is the
        ring's bottleneck: about 5x the communication); the cost model,
        which knows one rate for every link, predicts nothing there. Needs
        root (CAP_NET_ADMIN + CAP_SYS_ADMIN), else exit 77 saying why."""
import sys

from gstest import SMALL, check, finish, need_root, refused, report, run, tmpdir

CASE = sys.argv[2]
BASE = [a for a in SMALL if a not in ("--link", "none")]
BASE = BASE[:BASE.index("--model")] + BASE[BASE.index("--model") + 2:]
BASE += ["--model", "mlp:784-256-10", "--steps", "6", "--warmup", "1", "--batch", "8"]


def case_bad():
    for flags, why in (
            (["--link-host", "1=20mbit"], "--link"),
            (["--link", "1gbit", "--world", "2", "--link-host", "3=20mbit"], "host 3"),
            (["--link", "1gbit", "--world", "2,4", "--link-host", "3=20mbit"], "world 2"),
            (["--link", "1gbit", "--world", "4", "--hosts", "2", "--link-host", "2=1gbit"],
             "host 2"),
            (["--link", "1gbit", "--world", "2", "--link-host", "1=fast"], "not a rate"),
            (["--link", "1gbit", "--world", "2", "--link-host", "1=1mbit,1=2mbit"], "twice"),
            (["--link", "1gbit", "--world", "2", "--link-host", "1"], "HOST=RATE"),
            (["--link", "1gbit", "--world", "2", "--link-host", "x=1mbit"], "HOST=RATE"),
            (["--link", "1gbit", "--world", "2", "--link-host", "1=1kbit"], "too low")):
        refused(BASE + ["--mode", "ring"] + flags, "--link-host", why)


def case_run():
    need_root()
    got = {}
    for name, extra in (("even", []), ("slow", ["--link-host", "1=20mbit"])):
        d = tmpdir()
        r = run(BASE + ["--mode", "ring", "--algo", "ring", "--world", "2", "--link", "100mbit",
                        "--out", d] + extra)
        if not check(r.returncode == 0, f"ring world 2, {name} links: {r.stderr}"):
            continue
        rep = report(d)
        got[name] = rep["runs"][0]
        if name == "slow":
            check(rep["config"]["link_host"] == "1=20000000bit",
                  f"config.link_host: {rep['config'].get('link_host')!r}")
            sentence = rep["links_chosen"]["sentence"]
            check("100 Mbit/s (host 1: 20 Mbit/s)" in sentence, f"sentence: {sentence}")
    if len(got) < 2:
        return finish("bench_link_host run")
    even, slow = got["even"], got["slow"]
    rates = [l["rate_bps"] for l in slow["links"]]
    check(rates == [100e6, 20e6], f"each link's rate in report.json: {rates}")
    check([l["rate_bps"] for l in even["links"]] == [100e6, 100e6],
          f"without --link-host every link is at --link's rate: {even['links']}")
    # what reaches each host is the same either way; host 0's upload may
    # carry more (the retransmissions of what the slow port's queue dropped)
    for h, way in ((0, "rx_bytes"), (1, "rx_bytes"), (1, "tx_bytes")):
        a, b = even["links"][h][way], slow["links"][h][way]
        check(abs(a - b) <= 0.05 * a + 64 * 1024,
              f"link {h} {way} is the same per step either way: {a:.0f} vs {b:.0f}")
    te, ts = even["step_time_s_median"], slow["step_time_s_median"]
    print(f"step median: {te * 1e3:.1f} ms on even links, {ts * 1e3:.1f} ms with host 1 at "
          f"20 Mbit/s ({ts / te:.2f}x)")
    check(ts >= 2 * te, f"a 20 Mbit/s link slows the ring's step at least 2x: "
          f"{te * 1e3:.1f} ms -> {ts * 1e3:.1f} ms ({ts / te:.2f}x)")
    check(slow["cost_model"]["comm_s_predicted"] is None,
          "the cost model predicts nothing for links of different rates "
          f"({slow['cost_model']['comm_s_predicted']})")
    finish("bench_link_host run")


{"bad": case_bad, "run": case_run}[CASE]()
finish("bench_link_host " + CASE)
