#!/usr/bin/python3
"""collective.py: `bench --collective allreduce` read the way a script reads
nccl-tests' all_reduce_perf output.

The parser below knows only nccl-tests' layout: a data row is size, count,
type, redop, root, then time/algbw/busbw/#wrong out of place and the same in
place (an optional last column, as -T's timestamp: here the ring's
algorithm); the table closes with "# Out of bounds values : N OK|FAILED" and
"# Avg bus bandwidth    : X". For ring and ps at world 2 and 3 (and with
-o avg, -d half / bfloat16; on the ring -d double and int32, -o prod, min
and max, int32's avg): every line of the table parses, the sizes are
-b to -e by -f in whole elements of the type, the columns hold what was
asked, busbw = algbw x 2(N-1)/N, #wrong is 0 both ways, 0 out-of-bounds
values, the average is the mean busbw of both placements, and the JSON
holds the same rows. Wrong -o / -d values, or either without --collective,
are usage errors (exit 2) naming the flag; so are the types and ops --mode
ps cannot do (double, int32, prod, min, max), naming the flag and the mode.

The other collectives, by nccl-tests' names (reduce_scatter, all_gather,
broadcast, reduce; all_reduce as well as allreduce), on the ring at world
2 and 3, -b 8 -e 1M -f 8: every row parses, the sizes are whole multiples
of N elements for the parted ones (count = the part, as nccl-tests prints
it), redop "none" where nccl-tests prints it and the root column -r's root
(or -1), busbw = algbw x nccl-tests' factor for that collective, #wrong 0
both ways, "Out of bounds values : 0 OK", and the JSON beside; the same
with -d double / int32 and -o prod / min / max where the collective
reduces. --mode ps
refuses them (exit 2), naming --mode and what ps runs; so does an unknown
name or a root outside the world. With --device cuda (NCCL) every one of
them passes the flag checks: without a GPU the run fails at the device
(exit 1), never as a usage error; ps still refuses them there.

    collective.py BENCH"""
import json
import os
import re

from gstest import check, finish, run, tmpdir

NUM = r"([\d.]+(?:e[+-]?\d+)?)"
WRONG = r"(\d+|N/A)"
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)" +
                 (r"\s+" + NUM + r"\s+" + NUM + r"\s+" + NUM + r"\s+" + WRONG) * 2 +
                 r"(?:\s+(\S+))?\s*$")
OOB = re.compile(r"^# Out of bounds values : (\d+) (OK|FAILED)\s*$", re.M)
AVG = re.compile(r"^# Avg bus bandwidth    : " + NUM + r"\s*$", re.M)
HEAD1 = re.compile(r"^#\s+out-of-place\s+in-place\s*$", re.M)
HEAD2 = re.compile(r"^#\s+size\s+count\s+type\s+redop\s+root\s+time\s+algbw\s+busbw\s+#wrong"
                   r"\s+time\s+algbw\s+busbw\s+#wrong(?:\s+\S+)?\s*$", re.M)


def parse(out):
    """(rows, lines that are neither a row nor a comment, out-of-bounds, avg) of the table
    between its column header and its "Out of bounds" line, as nccl-tests scripts do"""
    lines = out.splitlines()
    start = next((i for i, l in enumerate(lines) if HEAD2.match(l)), None)
    end = next((i for i, l in enumerate(lines) if OOB.match(l)), None)
    if start is None or end is None:
        return [], ["no column header or no 'Out of bounds' line"], None, None
    rows, bad = [], []
    for l in lines[start + 1:end]:
        m = ROW.match(l)
        if m:
            g = m.groups()
            rows.append({"size": int(g[0]), "count": int(g[1]), "type": g[2], "redop": g[3],
                         "root": int(g[4]),
                         "oop": tuple(g[5:9]), "ip": tuple(g[9:13]), "extra": g[13]})
        elif not l.startswith("#"):
            bad.append(l)
    oob = OOB.search(out)
    avg = AVG.search(out)
    return rows, bad, (int(oob.group(1)), oob.group(2)), float(avg.group(1)) if avg else None


# the parser reads all_reduce_perf's own output (an older release: 5-wide #wrong)
NCCL = """#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
           8             2     float     sum      -1    36.29    0.00    0.00      0    35.02    0.00    0.00      0
   134217728      33554432     float     sum      -1   1563.5   85.85  150.23      0   1561.4   85.96  150.43      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 37.6657 
#
"""
rows, bad, oob, avg = parse(NCCL)
check(len(rows) == 2 and not bad and rows[1]["ip"] == ("1561.4", "85.96", "150.43", "0") and
      oob == (0, "OK") and avg == 37.6657, f"nccl-tests' own output: {rows} {bad} {oob} {avg}")
rows, bad, _, _ = parse(NCCL.replace("   85.85", ""))
check(len(rows) == 1 and len(bad) == 1, "a row with a column missing parses")


ELT = {"float": 4, "half": 2, "bfloat16": 2, "double": 8, "int32": 4}


def sizes(lo, hi, factor, elt):
    """nccl-tests' -b -e -f, in whole elements"""
    out, b = [], float(lo)
    while b <= hi + 0.5:
        s = int(b) // elt * elt
        if s and (not out or s != out[-1]):
            out.append(s)
        b *= factor
    return out


def collective(mode, world, lo, hi, factor, op="sum", dtype="float"):
    what = f"{mode} w{world} -o {op} -d {dtype}"
    d = tmpdir()
    args = ["--mode", mode, "--world", str(world), "--collective", "allreduce", "-b", str(lo),
            "-e", str(hi), "-f", str(factor), "-n", "3", "-w", "1", "--json", "--timeout", "20",
            "--threads", "1", "--out", d]
    if op != "sum":
        args += ["-o", op]
    if dtype != "float":
        args += ["-d", dtype]
    r = run(args)
    if not check(r.returncode == 0, f"{what}: exit {r.returncode}: {r.stderr}"):
        return
    out = r.stdout
    check("busbw = algbw x 2(n-1)/n" in out.lower(), f"{what}: no formula beside the table")
    check(HEAD1.search(out) and HEAD2.search(out), f"{what}: no nccl-tests header:\n{out}")
    rows, bad, oob, avg = parse(out)
    check(not bad, f"{what}: lines that do not parse: {bad}")
    elt = ELT[dtype]
    want = sizes(lo, hi, factor, elt)
    check([x["size"] for x in rows] == want, f"{what}: sizes {[x['size'] for x in rows]}, "
          f"expected {want}")
    bus = []
    for x in rows:
        check(x["count"] * elt == x["size"], f"{what}: count {x['count']} x {elt} != size")
        check((x["type"], x["redop"], x["root"]) == (dtype, op, -1),
              f"{what}: type/redop/root {x['type']} {x['redop']} {x['root']}")
        for where in ("oop", "ip"):
            t, alg, b, wrong = x[where]
            t, a, b = float(t), float(alg), float(b)
            check(t > 0, f"{what} {x['size']} {where}: time {t}")
            check(wrong == "0", f"{what} size {x['size']} {where}: {wrong} wrong")
            exp_alg = x["size"] / (t * 1e-6) / 1e9
            check(abs(a - exp_alg) <= 0.0051 + 0.01 * exp_alg,
                  f"{what}: algbw {a} != size/time {exp_alg}")
            check(abs(b - a * 2 * (world - 1) / world) <= 0.0126 + 0.01 * b,
                  f"{what}: busbw {b} vs algbw {a}")
            bus.append(b)
    check(oob == (0, "OK"), f"{what}: out of bounds line {oob}")
    check(avg is not None and bus and abs(avg - sum(bus) / len(bus)) <= 0.006 + 0.01 * avg,
          f"{what}: avg bus bandwidth {avg}, rows' mean {sum(bus) / max(len(bus), 1)}")
    path = os.path.join(d, f"collective-{mode}-w{world}.json")
    try:
        j = json.load(open(path))
        check(j["world"] == world and j["mode"] == mode and len(j["rows"]) == len(rows),
              f"{path}: {j.get('world')} {j.get('mode')} {len(j.get('rows', []))} rows")
        for x, jr in zip(rows, j["rows"]):
            check(jr["size"] == x["size"] and jr["type"] == dtype and jr["redop"] == op,
                  f"{path}: row {jr}")
            for where, key in (("oop", "out_of_place"), ("ip", "in_place")):
                p = jr[key]
                check(isinstance(p["bus_bw"], float) and p["nwrong"] == 0 and
                      abs(p["time"] - float(x[where][0])) <= 0.006 + 0.01 * p["time"],
                      f"{path}: {key} {p} vs the table's {x[where]}")
            check(jr["busbw_gbps"] == jr["out_of_place"]["bus_bw"], f"{path}: flat busbw")
        check(j["out_of_bounds"] == {"count": 0, "okay": True}, f"{path}: out_of_bounds")
    except (OSError, ValueError, KeyError, TypeError) as e:
        check(False, f"{path}: {e}")


for mode, world in (("ring", 2), ("ring", 3), ("ps", 2), ("ps", 3)):
    collective(mode, world, 8, 1 << 20, 4)
collective("ring", 3, 6, 40000, 5, "avg", "half")
collective("ps", 3, 6, 40000, 5, "avg", "bfloat16")
collective("ring", 2, 4, 4096, 8, "sum", "bfloat16")
# the other types and ops: rd below 256 KiB, the ring above (auto)
collective("ring", 3, 8, 1 << 20, 8, "prod", "double")
collective("ring", 2, 4, 1 << 20, 16, "min", "int32")
collective("ring", 3, 6, 40000, 5, "max", "half")
collective("ring", 3, 8, 40000, 5, "avg", "int32")
collective("ring", 2, 8, 40000, 5, "sum", "double")
collective("ring", 3, 4, 4096, 8, "prod", "bfloat16")

# nccl-tests' busbw factors, as its src/*.cu GetBw compute them
FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
          "all_gather": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0,
          "reduce": lambda n: 1.0}
PARTED = ("reduce_scatter", "all_gather")


def other(coll, world, root=None, lo=8, hi=1 << 20, factor=8, op=None, dtype="float"):
    what = (f"{coll} ring w{world}" + (f" -r {root}" if root is not None else "") +
            (f" -o {op}" if op else "") + f" -d {dtype}")
    d = tmpdir()
    args = ["--mode", "ring", "--world", str(world), "--collective", coll, "-b", str(lo), "-e",
            str(hi), "-f", str(factor), "-n", "3", "-w", "1", "--timeout", "20", "--threads", "1",
            "--out", d]
    if root is not None:
        args += ["-r", str(root)]
    if op:
        args += ["-o", op]
    if dtype != "float":
        args += ["-d", dtype]
    r = run(args)
    if not check(r.returncode == 0, f"{what}: exit {r.returncode}: {r.stderr}"):
        return
    out = r.stdout
    name = "all_reduce" if coll == "allreduce" else coll
    rows, bad, oob, avg = parse(out)
    check(not bad, f"{what}: lines that do not parse: {bad}")
    q = world if name in PARTED else 1
    elt = ELT[dtype]
    want, b = [], float(lo)
    while b <= hi + 0.5:
        sz = int(b) // elt // q * q * elt
        if sz and (not want or sz != want[-1]):
            want.append(sz)
        b *= factor
    check([x["size"] for x in rows] == want, f"{what}: sizes {[x['size'] for x in rows]}, "
          f"expected {want}")
    op = "none" if name in ("all_gather", "broadcast") else op or "sum"
    rt = (root or 0) if name in ("broadcast", "reduce") else -1
    for x in rows:
        check(x["count"] == x["size"] // elt // q,
              f"{what}: count {x['count']} for {x['size']} B")
        check((x["type"], x["redop"], x["root"]) == (dtype, op, rt),
              f"{what}: type/redop/root {x['type']} {x['redop']} {x['root']}")
        for where in ("oop", "ip"):
            t, a, bw, wrong = x[where]
            t, a, bw = float(t), float(a), float(bw)
            check(wrong == "0", f"{what} size {x['size']} {where}: {wrong} wrong")
            check(abs(bw - a * FACTOR[name](world)) <= 0.0126 + 0.01 * bw,
                  f"{what}: busbw {bw} vs algbw {a} x {FACTOR[name](world)}")
    check(oob == (0, "OK"), f"{what}: out of bounds line {oob}")
    check(avg is not None, f"{what}: no average line")
    path = os.path.join(d, "collective-ring-w%d.json" % world if name == "all_reduce"
                        else f"{name}-ring-w{world}.json")
    try:
        j = json.load(open(path))
        check(j["collective"] == ("allreduce" if name == "all_reduce" else name) and
              len(j["rows"]) == len(rows) and
              all(jr["root"] == str(rt) and jr["redop"] == op for jr in j["rows"]),
              f"{path}: {j.get('collective')} {j.get('rows')}")
    except (OSError, ValueError, KeyError, TypeError) as e:
        check(False, f"{path}: {e}")


for world in (2, 3):
    for coll in ("reduce_scatter", "all_gather", "broadcast", "reduce"):
        other(coll, world)
other("broadcast", 3, root=2)
other("reduce", 3, root=1)
other("all_reduce", 2, lo=8, hi=4096)
other("reduce_scatter", 3, op="min", dtype="double")
other("reduce_scatter", 2, op="prod", dtype="int32", hi=1 << 16)
other("reduce", 3, root=1, op="prod", dtype="int32")
other("reduce", 2, op="max", dtype="half", hi=1 << 16)
other("reduce", 3, root=2, op="avg", dtype="double", hi=1 << 16)
other("all_gather", 2, dtype="int32", hi=1 << 16)
other("broadcast", 3, root=2, dtype="double", hi=1 << 16)

# ps runs all_reduce only: the others are refused naming --mode and what it runs
for coll in ("reduce_scatter", "all_gather", "broadcast", "reduce"):
    r = run(["--mode", "ps", "--world", "2", "--collective", coll, "-e", "64"], timeout=60)
    check(r.returncode == 2 and "--mode ring" in r.stderr and "--mode ps runs all_reduce" in
          r.stderr, f"ps {coll}: exit {r.returncode}, {r.stderr}")
for args, words in ((["--collective", "gather"], "reduce_scatter, all_gather"),
                    (["--collective", "reduce", "-r", "2"], "-r 2"),
                    (["--collective", "all_gather", "-o", "avg"], "reduces nothing"),
                    (["--collective", "all_reduce", "-r", "1"], "has no root")):
    r = run(["--mode", "ring", "--world", "2", "-e", "64"] + args, timeout=60)
    check(r.returncode == 2 and words in r.stderr, f"{args}: exit {r.returncode}, {r.stderr}")

# usage errors name the flag and what it takes
for args, flag in ((["--collective", "allreduce", "-o", "mean"], "-o"),
                   (["--collective", "allreduce", "-d", "int64"], "-d"),
                   (["--steps", "2", "-o", "avg"], "-o"),
                   (["--steps", "2", "--datatype", "half"], "-d")):
    r = run(["--mode", "ring", "--world", "2"] + args, timeout=60)
    check(r.returncode == 2 and flag in r.stderr, f"{args}: exit {r.returncode}, {r.stderr}")
    if "--collective" in args:
        check("sum, avg, prod, min or max" in r.stderr or
              "float, half, bfloat16, double or int32" in r.stderr,
              f"{args}: the supported values are not named: {r.stderr}")

# --mode ps sums fp32 gradients: the other types and ops are refused, naming
# the flag and the mode (-o avg of int32 too: its type is the refusal)
for args, flag in ((["-d", "double"], "-d double"), (["-d", "int32", "-o", "avg"], "-d int32"),
                   (["-o", "prod"], "-o prod"), (["-o", "min"], "-o min"),
                   (["-o", "max", "-d", "half"], "-o max")):
    r = run(["--mode", "ps", "--world", "2", "--collective", "allreduce", "-e", "64"] + args,
            timeout=60)
    check(r.returncode == 2 and flag in r.stderr and "--mode ring" in r.stderr and
          "--mode ps" in r.stderr, f"ps {args}: exit {r.returncode}, {r.stderr}")

# --device cuda: NCCL runs every collective, type and op (allreduce/nccl/nccl_coll.c,
# tested against a CPU mock in tests/gpu/test_nccl_coll_mock.c), so none is a
# usage error any more: on a host without a GPU the run fails at the device
# (exit 1, naming --device cuda); on a GPU host it runs and checks its table
for args in (["--collective", "reduce_scatter", "-d", "double", "-o", "max"],
             ["--collective", "broadcast", "-r", "1", "-d", "int32"],
             ["--collective", "all_gather", "-d", "half"],
             ["--collective", "reduce", "-r", "1", "-o", "avg", "-d", "bfloat16"],
             ["--collective", "allreduce", "-o", "prod"]):
    out = tmpdir()
    r = run(["--mode", "ring", "--world", "2", "--device", "cuda", "-b", "8", "-e", "64",
             "--out", out] + args, timeout=120)
    if r.returncode == 0:
        check("Out of bounds values : 0 OK" in r.stdout, f"cuda {args}: {r.stdout}")
    else:
        check(r.returncode == 1 and "--device cuda" in r.stderr and "runs on" not in r.stderr,
              f"cuda {args}: exit {r.returncode}, {r.stderr}")
# ... and --mode ps still refuses what it cannot run, whatever the device
for args, words in ((["--collective", "reduce"], "--mode ps runs all_reduce"),
                    (["--collective", "allreduce", "-o", "max"], "-o max"),
                    (["--collective", "allreduce", "-d", "int32"], "-d int32")):
    r = run(["--mode", "ps", "--world", "2", "--device", "cuda", "-e", "64"] + args, timeout=60)
    check(r.returncode == 2 and words in r.stderr and "--mode ring" in r.stderr,
          f"ps cuda {args}: exit {r.returncode}, {r.stderr}")

finish("collective")
