#!/usr/bin/env python3
"""tests/bench/hosts/hosts.py TOOL CASE: emulated hosts (bench/hosts/hosts.h) through
hosts_tool's JSON lines.

  stream    2 hosts at 100 mbit: a ZeroMQ stream carries 85-100% of the
            rate; the sender's and receiver's link counters agree with the
            bytes sent (within 5% plus per-packet headers); the links were
            busy for the stream's span and idle the other way
  reach     4 hosts: each reaches every other from its own address; a
            stream 1 -> 2 shows on links 1 and 2, not on 0 and 3
  teardown  after a normal run, a SIGKILL of the tool mid-stream, and a
            build that fails halfway: no namespace, veth, address or
            process of the run remains, nothing in /run/netns
  linkhost  3 hosts at 100 mbit with --link-host 1=20mbit: each host's
            link reports its own rate; a stream from host 1 and one to it
            run at 85-105% of 20 Mbit/s (not 100), and link 1 is busy for
            the stream's span at its own rate; a stream 2 -> 0 still gets
            85-100% of 100 Mbit/s
  delay     with netem, --delay D makes host-to-host round trips >= 2D;
            without it (this project's kernels), a clear error naming netem
            and no cluster
  nocap     without CAP_NET_ADMIN: a clear error, non-zero exit, nothing
            left behind

All but nocap need root (CAP_NET_ADMIN + CAP_SYS_ADMIN) and exit 77 (skip)
elsewhere, saying why."""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import time

from gstest import finish, have_caps, need_root, require, snapshot, wait_clean

TOOL, CASE = sys.argv[1], sys.argv[2]
RATE = 100e6
MIB = 1 << 20
# per 1448-byte TCP segment the wire carries 66 bytes of Ethernet/IP/TCP
# headers; a GSO packet's are counted once, so counters are at most this
HEADERS = 66 / 1448
FIXED = 64 * 1024   # handshakes, ZMTP greetings, ARP


def run(args, timeout=60, prefix=()):
    p = subprocess.run(list(prefix) + [TOOL, "--json"] + args, capture_output=True,
                       text=True, timeout=timeout)
    events = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    return p.returncode, events, p.stderr


def event(events, name):
    found = [e for e in events if e["event"] == name]
    if not found:
        require(False, "no %s event in the tool's output: %s" % (name, events))
    return found[-1]


def links(ev):
    return {l["host"]: l for l in ev["links"]}


def counted_bounds(payload):
    return payload, payload * 1.05 * (1 + HEADERS) + FIXED


def case_stream():
    need_root()
    per = 4 * MIB
    rc, ev, err = run(["--hosts", "2", "--link", "100mbit", "--from", "0", "--to", "1",
                       "--bytes", str(4 * per), "--msg", str(per)])
    require(rc == 0, "2 hosts at 100 mbit build, stream and tear down (rc %d, %s)" % (rc, err.strip()))
    s = event(ev, "stream")
    payload = 4 * per
    require(s["bytes"] == payload, "the receiver got all %d bytes (%d)" % (payload, s["bytes"]))
    require(0.85 <= s["fraction"] <= 1.0,
          "the stream carries 85-100%% of the link: %.1f Mbit/s = %.3f" %
          (s["rate_bps"] / 1e6, s["fraction"]))
    lk = links(s)
    lo, hi = counted_bounds(payload)
    up, down = lk[0]["up_bytes"], lk[1]["down_bytes"]
    require(lo <= up <= hi, "sender's link counted %d bytes up, payload %d (bounds %d..%d)" %
          (up, payload, lo, hi))
    require(lo <= down <= hi, "receiver's link counted %d bytes down (bounds %d..%d)" %
          (down, lo, hi))
    require(abs(up - down) <= 0.01 * payload,
          "what left host 0 is what reached host 1 (%d vs %d)" % (up, down))
    require(lk[0]["down_bytes"] < 0.05 * payload and lk[1]["up_bytes"] < 0.05 * payload,
          "the reverse direction carries only acknowledgements (%d, %d bytes)" %
          (lk[0]["down_bytes"], lk[1]["up_bytes"]))
    span = s["span_s"]
    for h, d in ((0, "up"), (1, "down")):
        b = lk[h][d + "_busy_s"]
        require(0.85 * span <= b <= 1.05 * span,
              "link %d was busy %s for %.3f s of the stream's %.3f s" % (h, d, b, span))
    for h, d in ((0, "down"), (1, "up")):
        require(lk[h][d + "_busy"] < 0.1, "link %d was idle %s (busy %.3f)" % (h, d, lk[h][d + "_busy"]))


def case_reach():
    need_root()
    per = 2 * MIB
    rc, ev, err = run(["--hosts", "4", "--link", "100mbit", "--reach", "--from", "1", "--to", "2",
                       "--bytes", str(2 * per), "--msg", str(per)])
    require(rc == 0, "4 hosts build, reach each other, stream and tear down (rc %d, %s)" %
          (rc, err.strip()))
    c = event(ev, "cluster")
    addrs = [n["addr"] for n in c["nodes"] if n["host"] >= 0]
    require(len(set(addrs)) == 4 and all(a.startswith("10.77.0.") for a in addrs),
          "four distinct private addresses: %s" % addrs)
    reach = [e for e in ev if e["event"] == "reach"]
    require(len(reach) == 4 and all(e["ok"] for e in reach),
          "every host reached every other, seen from its own address: %s" % reach)
    s = event(ev, "stream")
    lk = links(s)
    payload = 2 * per
    require(lk[1]["up_bytes"] >= payload and lk[2]["down_bytes"] >= payload,
          "the stream 1 -> 2 shows on link 1 up (%d) and link 2 down (%d)" %
          (lk[1]["up_bytes"], lk[2]["down_bytes"]))
    for h in (0, 3):
        moved = lk[h]["up_bytes"] + lk[h]["down_bytes"]
        require(moved < 0.01 * payload, "and not on link %d (%d bytes: ARP at most)" % (h, moved))


def run_ids(events):
    inos, pids = [], []
    for e in events:
        if e["event"] == "cluster":
            inos += [n["netns_ino"] for n in e["nodes"]]
            pids += [n["holder"] for n in e["nodes"]]
        if e["event"] == "spawned":
            pids.append(e["pid"])
    return inos, pids


def case_teardown():
    need_root()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:   # PR_SET_CHILD_SUBREAPER
        require(False, "cannot become a subreaper: %s" % os.strerror(ctypes.get_errno()))
    before = snapshot()

    rc, ev, err = run(["--hosts", "3", "--bytes", str(2 * MIB), "--msg", str(MIB)])
    require(rc == 0, "a normal run succeeds (%s)" % err.strip())
    inos, pids = run_ids(ev)
    require(len(inos) == 4 and len(set(inos)) == 4, "it made four namespaces: %s" % inos)
    wait_clean(before, inos, pids, "a normal run", require)

    p = subprocess.Popen([TOOL, "--json", "--hosts", "3", "--bytes", str(64 * MIB),
                          "--msg", str(MIB)], stdout=subprocess.PIPE, text=True)
    events, deadline = [], time.time() + 20
    while time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        events.append(json.loads(line))
        if events[-1]["event"] == "spawned" and events[-1]["role"] == "push":
            break
    time.sleep(0.3)
    inos, pids = run_ids(events)
    alive = [q for q in pids if os.path.exists("/proc/%d" % q)]
    require(len(inos) == 4 and len(alive) == len(pids) == 6,
          "mid-stream the run has 4 namespaces and 6 processes (%s, %s)" % (inos, alive))
    p.kill()
    p.wait(timeout=10)
    p.stdout.close()
    wait_clean(before, inos, pids, "SIGKILL of the tool mid-stream", require)

    rc, ev, err = run(["--hosts", "3", "--burst", "10G"])
    require(rc != 0 and "tc" in err and "burst" in err,
          "a build that tc refuses halfway fails with tc's word: %s" % err.strip())
    require(not [e for e in ev if e["event"] == "cluster"], "and offers no cluster")
    wait_clean(before, [], [], "a build that failed halfway", require)


def case_delay():
    need_root()
    d = 0.005
    rc, ev, err = run(["--hosts", "2", "--reach", "--bytes", "0", "--delay", "5ms"])
    netem = subprocess.run([TOOL, "--json", "--hosts", "1", "--bytes", "0"], capture_output=True,
                           text=True)
    has = [json.loads(l)["netem"] for l in netem.stdout.splitlines() if '"cluster"' in l]
    require(len(has) == 1, "the tool says whether the kernel has netem: %s" % has)
    if has[0]:
        require(rc == 0, "with netem, a 5 ms delay builds (%s)" % err.strip())
        rtts = [e["rtt_s"] for e in ev if e["event"] == "reach"]
        require(len(rtts) == 2 and all(r >= 2 * d for r in rtts),
              "round trips take at least 2 x 5 ms: %s" % rtts)
    else:
        require(rc != 0 and "netem" in err, "without netem a delay is refused, naming netem: %s" %
              err.strip())
        require(not ev, "and nothing is built: %s" % ev)
        rc, ev, err = run(["--hosts", "2", "--reach", "--bytes", "0"])
        rtts = [e["rtt_s"] for e in ev if e["event"] == "reach"]
        require(rc == 0 and len(rtts) == 2 and all(0 < r < 2 * d for r in rtts),
              "without a delay round trips are short: %s" % rtts)


def case_linkhost():
    need_root()
    per = 1 * MIB
    flags = ["--hosts", "3", "--link", "100mbit", "--link-host", "1=20mbit"]
    for src, dst, want in ((1, 0, 20e6), (0, 1, 20e6), (2, 0, 100e6)):
        rc, ev, err = run(flags + ["--from", str(src), "--to", str(dst), "--bytes",
                                   str(4 * per), "--msg", str(per)])
        require(rc == 0, "stream %d -> %d builds and tears down (rc %d, %s)" %
              (src, dst, rc, err.strip()))
        nodes = {n["host"]: n for n in event(ev, "cluster")["nodes"]}
        require([nodes[h]["rate_bps"] for h in range(3)] == [100e6, 20e6, 100e6],
              "the hosts' links run at 100, 20, 100 Mbit/s (%s)" %
              [nodes[h]["rate_bps"] for h in range(3)])
        s = event(ev, "stream")
        # up to 5% over: tbf's bucket (96 KiB, 40 ms at 20 Mbit/s) goes at once
        require(0.85 * want <= s["rate_bps"] <= 1.05 * want,
              "stream %d -> %d carries 85-105%% of %g Mbit/s: %.1f Mbit/s" %
              (src, dst, want / 1e6, s["rate_bps"] / 1e6))
        lk = links(s)
        h, d = (1, "up") if src == 1 else (1, "down") if dst == 1 else (src, "up")
        b, span = lk[h][d + "_busy_s"], s["span_s"]
        require(0.85 * span <= b <= 1.05 * span,
              "link %d was busy %s for %.3f s of the stream's %.3f s, counted at its own rate" %
              (h, d, b, span))
    rc, ev, err = run(["--hosts", "2", "--link", "100mbit", "--link-host", "2=20mbit",
                       "--bytes", "0"])
    require(rc != 0 and "host 2" in err and "0..1" in err,
          "a rate for a host the cluster lacks is refused, naming it (%s)" % err.strip())


def case_nocap():
    before = snapshot()
    prefix = ()
    if have_caps():
        if not shutil.which("setpriv"):
            print("SKIP: setpriv (util-linux) is needed to drop CAP_NET_ADMIN")
            sys.exit(77)
        prefix = ("setpriv", "--inh-caps=-net_admin", "--bounding-set=-net_admin")
    rc, ev, err = run(["--hosts", "2"], prefix=prefix)
    require(rc != 0, "without CAP_NET_ADMIN the tool fails (rc %d)" % rc)
    require("CAP_NET_ADMIN" in err and "root" in err,
          "with an error that names the capability and how to get it: %s" % err.strip())
    require(not ev, "and builds nothing: %s" % ev)
    if have_caps():
        wait_clean(before, [], [], "the refused run", require)


{"stream": case_stream, "reach": case_reach, "teardown": case_teardown, "delay": case_delay,
 "linkhost": case_linkhost,
 "nocap": case_nocap}[CASE]()
finish("emulated hosts: " + CASE)
