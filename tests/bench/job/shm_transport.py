#!/usr/bin/python3
"""shm_transport.py BENCH: --transport shm trains both modes on one host
through shared memory, and nothing of the training crosses loopback TCP.

In a private network namespace (its own loopback, whose counters only this
test moves), ps and ring train at world 3 over --transport tcp and over
--transport shm, interleaved:
  - over shm the loopback carries less than one gradient in the whole run
    (the rendezvous and the gather of results; no step's bytes), where tcp
    carries at least one gradient per step; every rank's socket counters in
    report.json are 0;
  - report.json's config names the transport, and each run what trained on
    it: ps "local-reduce" (the host sums in shared memory, rank 0's server
    gets one push), ring "hier" (one host: the shared-memory all-reduce);
  - ps over shm saves the bits of the flat ps over tcp (one host: the same
    sum order, ranks in order); ring over shm agrees with the flat ring
    within 1e-5 (another order); ps and ring over shm agree within 1e-5.
Without namespaces it skips (exit 77) saying so."""
import json
import os
import subprocess

from gstest import SMALL, check, finish, in_namespaces, load_params, max_rel, run, same_bits, \
    tmpdir

in_namespaces("-n", "GS_SHM_TRANSPORT_NS", "shm_transport")
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)

STEPS = 8
BASE = SMALL + ["--steps", str(STEPS), "--warmup", "1", "--batch", "8", "--world", "3",
                "--seed", "11"]


def lo_bytes():
    """this namespace's loopback, sent bytes (/proc/net/dev: /sys shows the
    namespace that mounted it)"""
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                return int(rest.split()[8])
    raise SystemExit("shm_transport: no loopback in /proc/net/dev")


got, moved = {}, {}
for transport in ("tcp", "shm"):
    for mode in ("ps", "ring"):
        d = tmpdir()
        before = lo_bytes()
        r = run(BASE + ["--mode", mode, "--transport", transport, "--save-params", d + "/p",
                        "--out", d])
        moved[mode, transport] = lo_bytes() - before
        if not check(r.returncode == 0, f"{mode} over {transport}: {r.stderr}"):
            continue
        got[mode, transport] = load_params(d + "/p")
        j = json.load(open(os.path.join(d, "report.json")))
        run0 = j["runs"][0]
        S = run0["gradient_bytes"]
        check(j["config"]["transport"] == transport,
              f"{mode} over {transport}: config.transport {j['config'].get('transport')!r}")
        want = {("ps", "tcp"): "flat", ("ps", "shm"): "local-reduce", ("ring", "tcp"): "ring",
                ("ring", "shm"): "hier"}[mode, transport]
        check(run0["algo"] == want, f"{mode} over {transport}: algo {run0['algo']!r}, not {want}")
        sock = [(p["bytes_sent"], p["bytes_recv"]) for p in run0["per_rank"]]
        if transport == "shm":
            check(moved[mode, transport] < S,
                  f"{mode} over shm: loopback carried {moved[mode, transport]} bytes in "
                  f"{STEPS} steps, one gradient is {S}")
            check(all(s == 0 and v == 0 for s, v in sock),
                  f"{mode} over shm: the ranks' sockets moved {sock}")
        else:
            check(moved[mode, transport] >= STEPS * S,
                  f"{mode} over tcp: loopback carried only {moved[mode, transport]} bytes in "
                  f"{STEPS} steps of {S}-byte gradients: is it counting?")
        print(f"{mode} over {transport}: algo {run0['algo']}, loopback {moved[mode, transport]} "
              f"bytes ({moved[mode, transport] / S:.3f} gradients) in {STEPS} steps")

if ("ps", "shm") in got and ("ps", "tcp") in got:
    check(same_bits(got["ps", "shm"], got["ps", "tcp"]),
          "ps over shm (one host) does not save the flat ps' bits")
if ("ring", "shm") in got and ("ring", "tcp") in got:
    rel = max_rel(got["ring", "shm"], got["ring", "tcp"])
    check(rel <= 1e-5, f"ring over shm is {rel:.3g} from the flat ring")
if ("ps", "shm") in got and ("ring", "shm") in got:
    rel = max_rel(got["ps", "shm"], got["ring", "shm"])
    check(rel <= 1e-5, f"ps and ring over shm are {rel:.3g} apart")
    print(f"ps vs ring over shm: {rel:.3g} relative"
          f"{' (the same bits)' if same_bits(got['ps', 'shm'], got['ring', 'shm']) else ''}")
finish("shm_transport")
