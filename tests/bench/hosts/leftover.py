"""leftover.py: what a run of emulated hosts leaves on the machine, for the
tests that check it leaves nothing: namespaces (by inode, with the
processes in them), veths and 10.77 addresses in the root namespace, names
in /run/netns, and processes that descend from the test."""
import os
import subprocess
import time


def netns_of(pid):
    try:
        return os.stat("/proc/%s/ns/net" % pid).st_ino
    except OSError:
        return None


def snapshot():
    """netns inode -> pids, the root namespace's veths and 10.77 addresses,
    and `ip netns list`."""
    ns = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            ino = netns_of(pid)
            if ino:
                ns.setdefault(ino, set()).add(int(pid))
    veth = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True,
                          text=True).stdout
    addrs = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return ns, sorted(l.split(":")[1].strip() for l in veth.splitlines()), \
        "10.77." in addrs, names


def reap():
    """We are the subreaper of whatever the killed tool left: collect it."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def ours(pid, me):
    """Whether pid descends from this test (the tool's orphans are ours)."""
    for _ in range(64):
        try:
            with open("/proc/%d/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if ppid == me:
            return True
        if ppid <= 1:
            return False
        pid = ppid
    return False


def leftovers(before, cluster_inos, pids):
    ns0, veth0, addr0, names0 = before
    ns1, veth1, addr1, names1 = snapshot()
    me = os.getpid()
    left = []
    for ino in cluster_inos:
        if ino in ns1:
            left.append("namespace %d of the run (processes %s)" % (ino, sorted(ns1[ino])))
    for ino, holders in ns1.items():
        if ino not in ns0 and any(ours(p, me) for p in holders):
            left.append("a new namespace %d held by our processes %s" % (ino, sorted(holders)))
    for pid in pids:
        if os.path.exists("/proc/%d" % pid) and ours(pid, me):
            left.append("process %d of the run" % pid)
    if set(veth1) - set(veth0):
        left.append("veths in the root namespace: %s" % sorted(set(veth1) - set(veth0)))
    if addr1 and not addr0:
        left.append("a 10.77 address in the root namespace")
    if names1 != names0 or os.path.exists("/run/netns") and os.listdir("/run/netns"):
        left.append("names in /run/netns: %r" % names1)
    return left


def wait_clean(before, cluster_inos, pids, what, check):
    deadline = time.time() + 10
    while True:
        reap()
        left = leftovers(before, cluster_inos, pids)
        if not left or time.time() > deadline:
            break
        time.sleep(0.05)
    check(not left, "after %s nothing of the run remains%s" %
          (what, (": " + "; ".join(left)) if left else ""))


