"""caps.py: whether this process may build emulated hosts (root with
CAP_NET_ADMIN and CAP_SYS_ADMIN), for the tests that skip without them."""
import os
import sys


def caps():
    """this process's effective capabilities, as a bit set"""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def have_caps():
    return os.geteuid() == 0 and caps() & (1 << 12) and caps() & (1 << 21)


def need_root():
    """exit 77 (meson's skip), saying why, where emulated hosts cannot be built"""
    if not have_caps():
        print("SKIP: emulated hosts need root with CAP_NET_ADMIN and CAP_SYS_ADMIN "
              "(euid %d, CapEff %x)" % (os.geteuid(), caps()))
        sys.exit(77)
