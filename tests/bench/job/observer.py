#!/usr/bin/python3
"""observer.py: what a passive observer of the network gets from one job.

A raw socket on loopback (AF_PACKET: needs CAP_NET_RAW, else the test
skips) records a 2-rank job A (torchrun's variables, GS_JOB_SECRET) from
its start until it trains, ps and ring, with and without --encrypt. Then
every client-to-server byte stream of the recording (the rendezvous' and
every data port's: handshake, login and what followed) is replayed over a
new connection:
  - against job A itself, while it runs;
  - against job B, the next job with the same secret on the same
    MASTER_PORT (the rendezvous' stream at its port while rank 0 waits,
    every data port's stream at each of B's data ports).
No replay may be admitted (no READY command comes back). Then the forged
gather: with the job token the recording shows (the data ports carry it
in clear by default; the rendezvous never), a connection of its own sends
rank 0's rendezvous an Error "from rank 1", as the rendezvous once took
it, and holds it open until the end of the job. A and B must finish with
the parameters of an undisturbed run. The recording itself
must show what docs/security.md says crosses the wire: the rendezvous'
registration and welcome never in clear (no endpoint, no setting), and the
original connections were admitted (READY in the server's bytes: the
recording is not empty of what it should hold).

    observer.py BENCH [PCAP]   (PCAP: also write the recording there)"""
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time

from gstest import (BENCH, SMALL, check, finish, finished, free_port, load_params, report,
                    same_bits, tmpdir)

PCAP = sys.argv[2] if len(sys.argv) > 2 else None
SECRET = "observer test secret"
ARGS = SMALL + ["--world", "2", "--batch", "8", "--warmup", "0", "--timeout", "30"]
MODEL = "mlp:784-32-10"

if os.geteuid() != 0:
    print("observer: skipped: recording loopback needs CAP_NET_RAW (run as root)")
    sys.exit(77)


class Recorder:
    """every IPv4 TCP segment on lo, once (as received), while running"""

    def __init__(self):
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        # room for bursts of the data ports while this thread sorts them
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
        self.sock.bind(("lo", 0))
        self.sock.settimeout(0.1)
        self.segments = []   # (time, sport, dport, seq, flags, payload)
        self.raw = []
        self.stop = False
        self.th = threading.Thread(target=self.run)
        self.th.start()

    def run(self):
        while not self.stop:
            try:
                data, addr = self.sock.recvfrom(262144)
            except socket.timeout:
                continue
            if addr[2] != socket.PACKET_HOST or len(data) < 14 + 20:
                continue
            ip = data[14:]
            if ip[0] >> 4 != 4 or ip[9] != 6:
                continue
            ihl = (ip[0] & 15) * 4
            total = struct.unpack("!H", ip[2:4])[0]
            tcp = ip[ihl:total]
            sport, dport, seq = struct.unpack("!HHI", tcp[:8])
            off = (tcp[12] >> 4) * 4
            self.segments.append((time.time(), sport, dport, seq, tcp[13], bytes(tcp[off:])))
            self.raw.append((time.time(), bytes(data[14:total + 14])))

    def close(self):
        self.stop = True
        self.th.join()
        self.sock.close()

    def streams(self, server_ports):
        """{(client port, server port): (bytes to the server, bytes back)}: each
        direction from its SYN on, up to the first segment the raw socket
        missed (a busy ring outruns this thread), so that what is replayed is
        what the client sent; a stream whose SYN was missed is left out"""
        flows = {}
        for _, sp, dp, seq, flags, pay in self.segments:
            if dp in server_ports:
                key, way = (sp, dp), 0
            elif sp in server_ports:
                key, way = (dp, sp), 1
            else:
                continue
            f = flows.setdefault(key, [None, None, {}, {}])
            if flags & 2:  # SYN: the data starts at its sequence number + 1
                f[way] = (seq + 1) % 2 ** 32
            if pay:
                f[2 + way].setdefault(seq, pay)

        def prefix(isn, segs):
            out, pos = [], 0
            for off, p in sorted(((s - isn) % 2 ** 32, p) for s, p in segs.items()):
                if off > pos:
                    break
                if off + len(p) > pos:
                    out.append(p[pos - off:])
                    pos = off + len(p)
            return b"".join(out)

        return {k: (prefix(v[0], v[2]), prefix(v[1], v[3])) for k, v in flows.items()
                if v[0] is not None and v[1] is not None}

    def write_pcap(self, path, ports):
        with open(path, "wb") as f:
            f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 262144, 101))  # raw IP
            for t, pkt in self.raw:
                ihl = (pkt[0] & 15) * 4
                sp, dp = struct.unpack("!HH", pkt[ihl:ihl + 4])
                if sp in ports or dp in ports:
                    f.write(struct.pack("<IIII", int(t), int((t % 1) * 1e6), len(pkt), len(pkt)))
                    f.write(pkt)


def start(rank, mode, port, extra, steps, out=None, params=None):
    env = {k: v for k, v in os.environ.items() if k not in ("GS_LAUNCHED", "GS_PORT_FD")}
    env.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GS_JOB_SECRET=SECRET)
    return subprocess.Popen([BENCH] + ARGS + extra + [
        "--mode", mode, "--steps", str(steps), "--out", out or tmpdir(),
        "--save-params", params or tmpdir()], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def listening(pids):
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    ports = set()
    for line in out.splitlines():
        m = re.search(r"127\.0\.0\.1:(\d+).*pid=(\d+)", line)
        if m and int(m.group(2)) in pids:
            ports.add(int(m.group(1)))
    return ports


def wait_ports(procs, want):
    t0 = time.time()
    while time.time() - t0 < 20:
        ports = listening({p.pid for p in procs})
        if len(ports) >= want:
            return ports
        time.sleep(0.05)
    return set()


def zmtp_frames(data, at):
    """the ZMTP frames of data from at: (is a command, its bytes); stops at
    a frame cut short"""
    out = []
    while at + 2 <= len(data):
        flags = data[at]
        head, size = (9, int.from_bytes(data[at + 1:at + 9], "big")) if flags & 2 \
            else (2, data[at + 1])
        if at + head + size > len(data):
            break
        out.append((bool(flags & 4), data[at:at + head + size]))
        at += head + size
    return out


def replay(port, data):
    """play a recorded client's bytes over a new connection as its client
    did: the 64-byte greeting, then each handshake command after the
    server's answer to the one before (a server drops a client that runs
    ahead of its handshake), then everything after the handshake; what came
    back"""
    got = b""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError:
        return got

    def await_frame(before):
        """read until the server sent a whole frame more than before bytes
        past its greeting (or closed, or 5 s passed)"""
        nonlocal got
        t0 = time.time()
        while time.time() - t0 < 5:
            if len(got) >= 64 and len(zmtp_frames(got, 64)) > before:
                return True
            try:
                b = s.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return False
            if not b:
                return False
            got += b
        return False

    try:
        s.settimeout(0.2)
        s.sendall(data[:64])
        frames = zmtp_frames(data, 64)
        n = 0
        while frames and frames[0][0]:  # the handshake: commands
            s.sendall(frames.pop(0)[1])
            if not await_frame(n):
                break
            n += 1
        else:
            s.settimeout(5)
            s.sendall(b"".join(f for _, f in frames))
    except OSError:
        pass
    s.close()
    return got


def find_token(streams):
    """the job token of the first gradsync Envelope in clear in the recorded
    streams (a message frame after the greeting whose body starts with the
    version, 1 or 2, then field 2: the fixed64 token), or None"""
    for to, back in streams:
        for b in (to, back):
            for command, f in zmtp_frames(b, 64):
                body = f[9:] if f[0] & 2 else f[2:]
                if not command and len(body) >= 11 and body[0] == 8 and body[1] in (1, 2) \
                        and body[2] == 0x11:
                    return body[1], body[3:11]
    return None


def forged_error(port, token):
    """a ZMTP connection without a mechanism (NULL), as a DEALER, that sends
    an Error of rank 1 with the token; left open (the caller closes it)"""
    version, tok = token
    phase, text = b"training", b"forged by an observer"
    body = b"\x0a" + bytes([len(phase)]) + phase + b"\x12" + bytes([len(text)]) + text
    env = b"\x08" + bytes([version]) + b"\x11" + tok + b"\x18\x01\x92\x01" + bytes([len(body)]) + body
    greeting = b"\xff" + b"\x00" * 8 + b"\x7f\x03\x00NULL" + b"\x00" * 16 + b"\x00" + b"\x00" * 31
    ready = b"\x05READY\x0bSocket-Type\x00\x00\x00\x06DEALER"
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(greeting + b"\x04" + bytes([len(ready)]) + ready + b"\x00" +
                  bytes([len(env)]) + env)
        return s
    except OSError:
        return None


def admitted(reply):
    """the server finished the handshake (READY); a reply without even the
    server's greeting tested nothing, and fails the test too"""
    check(len(reply) >= 64, f"a replay got no greeting back ({len(reply)} bytes) from a port "
          "that listens")
    return b"\x05READY" in reply


def replay_live(port, data, procs):
    """replay(), or None where it tested nothing: the port closed before it
    answered (a port that listened only a while, a measurement before
    training, may be gone between listing it and connecting), or it still
    listens but sent not even its greeting, twice half a second apart (a
    socket that takes one peer and has it may drop another connection at
    once). The callers require at least one replay per job that tested
    something."""
    for attempt in range(2):
        reply = replay(port, data)
        if len(reply) >= 64:
            return reply
        if port not in listening({p.pid for p in procs}):
            return None
        time.sleep(0.5)
    return None


# job A still trains while its recording is replayed against it, so each
# job trains about this long on this machine and build: how many steps that
# is, a short job of the same kind measures first (a fixed count was 2 s of
# ring training in an optimized build, and over before the replays)
TRAIN_S = 10.0


def steps_for(mode, extra, what):
    port, out = free_port(), tmpdir()
    probe = [start(0, mode, port, extra, 500, out=out)]
    probe.append(start(1, mode, port, extra, 500))
    finished(probe, f"{what} timing")
    wall = report(out)["runs"][0]["wall_time_s"]
    return max(500, min(200000, int(500 * TRAIN_S / max(wall, 1e-3))))


def observe(mode, extra):
    what = f"{mode} {' '.join(extra)}".strip()
    steps = steps_for(mode, extra, what)
    # the undisturbed run
    port, pc = free_port(), tmpdir()
    calm = [start(0, mode, port, extra, steps, params=pc)]
    calm.append(start(1, mode, port, extra, steps))
    finished(calm, f"{what} undisturbed")

    # job A, recorded from its start
    rec = Recorder()
    port, pa = free_port(), tmpdir()
    a = [start(0, mode, port, extra, steps, params=pa)]
    time.sleep(0.3)
    a.append(start(1, mode, port, extra, steps))
    data_ports = wait_ports(a, 2 if mode == "ps" else 3) - {port}
    time.sleep(1.5)  # the data connections made and in use
    rec.close()
    server_ports = data_ports | {port}
    if PCAP:
        rec.write_pcap(f"{PCAP}-{mode}{'-encrypt' if extra else ''}.pcap", server_ports)
    streams = rec.streams(server_ports)
    # connections that carried something (not a dial refused before rank 0 listened)
    rdv = [v for k, v in streams.items() if k[1] == port and v[0]]
    data = [(k, v) for k, v in streams.items() if k[1] in data_ports and v[0]]
    check(rdv and data, f"{what}: recorded {len(rdv)} rendezvous and {len(data)} data streams")
    check(any(admitted(back) for _, back in rdv),
          f"{what}: no recorded rendezvous connection was admitted (READY)")
    check(any(admitted(back) for _, (_, back) in data),
          f"{what}: no recorded data connection was admitted (READY)")
    for to, back in rdv:
        for secret in (MODEL.encode(), b"tcp://127.0.0.1", b"mode", b"ring", b"steps"):
            check(secret not in to and secret not in back,
                  f"{what}: the rendezvous carries {secret!r} in clear")
    # replayed against A itself, while it runs
    for to, _ in rdv:
        check(not admitted(replay(port, to)), f"{what}: a recorded rendezvous handshake "
              "replayed against the same job was admitted")
    # a port that listened only a while (a measurement before training) is
    # gone: its stream is replayed at the ports that stay, below and in job B
    live = listening({p.pid for p in a})
    mine = [(sp, to) for (_, sp), (to, _) in data if sp in live]
    check(mine, f"{what}: none of the recorded data ports {sorted(data_ports)} still listens "
          f"({sorted(live)})")
    tested = 0
    for sp, to in mine:
        reply = replay_live(sp, to, a)
        tested += reply is not None
        check(reply is None or not admitted(reply), f"{what}: a recorded data port login "
              f"replayed against the same job (port {sp}) was admitted")
    check(tested > 0, f"{what}: every data port of job A closed before its replay")
    check(all(p.poll() is None for p in a), f"{what}: job A ended before the replays: they "
          "tested nothing (give it more steps)")
    # the forged gather, with the token the recording shows (or a guess)
    found = find_token([v for _, v in data] + rdv)
    print(f"{what}: the recording shows the job token: {'yes' if found else 'no'}")
    check(bool(found) != bool(extra), f"{what}: the job token is {'' if found else 'not '}"
          "in the recording (in clear on the data ports by default, nowhere with --encrypt)")
    forged = forged_error(port, found or (2, os.urandom(8)))
    finished(a, f"{what} recorded and replayed against")
    if forged:
        forged.close()
    check(same_bits(load_params(pc), load_params(pa)),
          f"{what}: job A's parameters differ from the undisturbed run's")

    # job B: the next job, same secret, same MASTER_PORT
    pb = tmpdir()
    b = [start(0, mode, port, extra, steps, params=pb)]
    t0 = time.time()  # a loaded machine may take a while to start rank 0
    while port not in listening({b[0].pid}) and time.time() - t0 < 20:
        time.sleep(0.05)
    for to, _ in rdv:
        check(not admitted(replay(port, to)), f"{what}: a recorded rendezvous handshake "
              "replayed against the next job was admitted")
    check(b[0].poll() is None, f"{what}: the replays stopped the next job's rank 0")
    b.append(start(1, mode, port, extra, steps))
    wait_ports(b, 2 if mode == "ps" else 3)
    time.sleep(1.5)  # as for job A: the data ports of training, not a passing one
    ports_b = listening({p.pid for p in b}) - {port}
    check(ports_b, f"{what}: job B has no data port")
    tested = 0
    for sp in ports_b:
        for _, (to, _) in data:
            reply = replay_live(sp, to, b)
            tested += reply is not None
            check(reply is None or not admitted(reply), f"{what}: a data port login recorded "
                  f"in job A was admitted at job B's port {sp}")
    check(tested > 0, f"{what}: every data port of job B closed before its replay")
    check(all(p.poll() is None for p in b), f"{what}: job B ended before the replays")
    finished(b, f"{what} next job")
    check(same_bits(load_params(pc), load_params(pb)),
          f"{what}: job B's parameters differ from the undisturbed run's")
    print(f"{what}: {len(rdv)} rendezvous and {len(data)} data streams recorded; none "
          f"admitted again, to this job or the next ({steps} steps a job)")


for mode in ("ps", "ring"):
    for extra in ([], ["--encrypt"]):
        observe(mode, extra)
finish("observer")
