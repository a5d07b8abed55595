#!/usr/bin/python3
"""costmodel_cli.py: the cost model from the command line (bench --calibrate,
bench --project); neither starts a rank.

  - --calibrate writes a calibration that --project reads back (the strict
    reader of bench/costmodel/calib.c accepts it), every rate positive and finite,
    and the table it prints shows the very figures of the file; --link and
    --latency land in its "link" part;
  - --project with a calibration written here by hand prints a row for every
    mode and world, projection.json holds the same rows, projection.svg a
    curve per mode in each of its two panels; and at a fixed link the ps
    step grows with the world faster than the ring's;
  - readiness: a calibration holds one fraction per tensor; a projection
    takes a profile's from its layers' work (--ready-by bytes: in proportion
    to bytes, and the ring hides less), and --step-compute-ms projects a
    model the calibration did not measure, its readiness timed here;
  - bad input exits 2 with a message naming the flag.

    costmodel_cli.py BENCH"""
import json
import math
import os
import re
import xml.dom.minidom

from gstest import check, finish, run, tmpdir

MODEL = "mlp:784-64-10"

# ---- --calibrate ----
d = tmpdir()
cal = os.path.join(d, "sub", "c.json")
r = run(["--calibrate", "--model", MODEL, "--batch", "16", "--out", cal, "--quiet"], timeout=120)
check(r.returncode == 0, f"--calibrate: rc {r.returncode}: {r.stderr}")
check(f"wrote {cal}" in r.stdout, f"--calibrate names its file: {r.stdout}")
c = json.load(open(cal)) if os.path.exists(cal) else {}
fields = {
    "transport.alpha_s": c.get("transport", {}).get("alpha_s"),
    "transport.bandwidth_Bps": c.get("transport", {}).get("bandwidth_Bps"),
    "reduce_Bps": c.get("reduce_Bps"),
    "copy_Bps": c.get("copy_Bps"),
    "optimizer_params_per_s": c.get("optimizer_params_per_s"),
    "compute.forward_s_per_sample": c.get("compute", {}).get("forward_s_per_sample"),
    "compute.backward_s_per_sample": c.get("compute", {}).get("backward_s_per_sample"),
}
printed = {m.group(1): float(m.group(2))
           for m in re.finditer(r"^\s+(\S+)\s+([-+0-9.e]+)\s", r.stdout, re.M) if m.group(1) in fields}
for k, v in fields.items():
    ok = isinstance(v, (int, float)) and math.isfinite(v) and v > 0
    check(ok, f"calibration {k} = {v}: positive and finite")
    p = printed.get(k)
    check(ok and p is not None and abs(p - v) <= 1e-4 * v,
          f"calibration {k}: printed {p}, file {v}")
check(c.get("compute", {}).get("model") == MODEL, f"calibration's model: {c.get('compute')}")
# when each of the mlp's 4 tensors was ready in backward: the first layer's last
rf = c.get("compute", {}).get("ready_fraction", [])
check(len(rf) == 4 and all(0 <= v <= 1 for v in rf) and
      all(a >= b for a, b in zip(rf, rf[1:])) and rf[0] > rf[-1],
      f"calibration's ready_fraction, one per tensor, first layer last: {rf}")
check(re.search(r"compute.ready_fraction\s+4 tensors", r.stdout) is not None,
      f"the table shows the readiness: {r.stdout}")
check("link" not in c, "no --link: no link part")
# the strict reader accepts it: a projection from it runs
pd = os.path.join(d, "p0")
r = run(["--project", "--calibration", cal, "--model", MODEL, "--batch", "16", "--world", "1,2,4",
         "--link", "1gbit", "--out", pd, "--quiet"])
check(r.returncode == 0, f"--project reads --calibrate's file: {r.stderr}")

cal2 = os.path.join(d, "c2.json")
r = run(["--calibrate", "--model", MODEL, "--batch", "16", "--link", "100gbit", "--latency",
         "5us", "--out", cal2, "--quiet"], timeout=120)
c2 = json.load(open(cal2)) if r.returncode == 0 else {}
check(c2.get("link") == {"rate_Bps": 100e9 / 8, "latency_s": 5e-6},
      f"--link 100gbit --latency 5us in the link part: {c2.get('link')} ({r.stderr})")

# ---- --project ----
hand = {
    "format": "gradsync-calibration", "version": 1,
    "transport": {"name": "by hand", "alpha_s": 1e-5, "bandwidth_Bps": 5e10},
    "reduce_Bps": 1e11, "copy_Bps": 2e11, "optimizer_params_per_s": 1e10,
    "compute": {"model": "resnet50", "precision": "fp32",
                "forward_s_per_sample": 1e-3, "backward_s_per_sample": 2e-3},
}
hf = os.path.join(d, "hand.json")
with open(hf, "w") as f:
    json.dump(hand, f)
WORLDS = [8, 64, 512, 4096]
MODES = ["ps", "ring", "sps-colo", "sps-hosts"]
pd = os.path.join(d, "proj")
r = run(["--project", "--calibration", hf, "--model", "resnet50", "--world",
         ",".join(map(str, WORLDS)), "--hosts-per", "8", "--link", "100gbit", "--latency", "5us",
         "--out", pd])
check(r.returncode == 0, f"--project: rc {r.returncode}: {r.stderr}")
row_re = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\S+)\s+(on|off)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)"
                    r"\s+[0-9.]+\s+[0-9.]+\s+([0-9.]+)\s+[0-9.]+\s+(.+)$")
table = {}
for line in r.stdout.splitlines():
    m = row_re.match(line)
    if m:
        table[(int(m.group(1)), m.group(3))] = {
            "step_ms": float(m.group(5)), "sps": float(m.group(6)), "eff": float(m.group(7)),
            "link_mb": float(m.group(8)), "bottleneck": m.group(9).strip()}
for w in WORLDS:
    for mode in MODES:
        check((w, mode) in table, f"table row world {w} {mode}")
check(len(table) == len(WORLDS) * len(MODES), f"{len(table)} table rows")
pj = os.path.join(pd, "projection.json")
j = json.load(open(pj)) if os.path.exists(pj) else {"rows": []}
check(len(j["rows"]) == len(table), f"projection.json: {len(j['rows'])} rows")
check(j.get("ranks_per_host") == 8 and j.get("model") == "resnet50", "projection.json's job")
check(abs(j.get("machine", {}).get("link_Bps", 0) - 100e9 / 8) < 1, "--link in the machine")
for row in j["rows"]:
    t = table.get((row["world"], row["mode"]))
    if not check(t is not None, f"json row {row['world']} {row['mode']} in the table"):
        continue
    link = max(row["busiest_link_in_bytes"], row["busiest_link_out_bytes"],
               row["worker_link_in_bytes"], row["worker_link_out_bytes"]) / 1e6
    check(abs(row["step_s_predicted"] * 1e3 - t["step_ms"]) <= 0.051
          and abs(row["samples_per_s_predicted"] - t["sps"]) <= 0.51
          and abs(row["scaling_efficiency_predicted"] - t["eff"]) <= 0.0051
          and abs(link - t["link_mb"]) <= 0.051 and row["bottleneck"] == t["bottleneck"],
          f"world {row['world']} {row['mode']}: json {row} against table {t}")
# a property of the model that can fail: ps pays (N - n) S at the master's
# link, the ring 2 (N - 1) / N S per link; the ring's latency term grows
# too, but less than ps's bytes
if all((w, m) in table for w in (8, 4096) for m in ("ps", "ring")):
    ps = [table[(w, "ps")]["step_ms"] for w in WORLDS]
    check(all(a < b for a, b in zip(ps, ps[1:])), f"ps step grows with the world: {ps}")
    ring_f = table[(4096, "ring")]["step_ms"] / table[(8, "ring")]["step_ms"]
    ps_f = table[(4096, "ps")]["step_ms"] / table[(8, "ps")]["step_ms"]
    check(ring_f < ps_f and ring_f < 10, f"ring x{ring_f:.2f} from 8 to 4096, ps x{ps_f:.2f}")
svg = os.path.join(pd, "projection.svg")
try:
    doc = xml.dom.minidom.parse(svg)
    lines = doc.getElementsByTagName("polyline")
    check(len(lines) == 2 * len(MODES), f"projection.svg: {len(lines)} curves")
except Exception as ex:  # noqa: BLE001 (any parse failure is the finding)
    check(False, f"projection.svg: {ex}")

# a network from the flags overrides the file's; the file's link part is used without
hand["link"] = {"rate_Bps": 1.25e9, "latency_s": 1e-4}
with open(hf, "w") as f:
    json.dump(hand, f)
r = run(["--project", "--calibration", hf, "--model", "resnet50", "--world", "8", "--out",
         os.path.join(d, "p2"), "--quiet"])
check(r.returncode == 0 and "link 10 Gbit/s" in r.stdout and "latency 100 us" in r.stdout,
      f"the calibration's link: {r.stdout} {r.stderr}")

# ---- when gradients are ready ----
# the hand calibration has no readiness: resnet50's profile gives it, as it
# measured each layer's backward;
# --ready-by bytes the old way; layers hide more of the ring behind backward
def project(args):
    out = run(["--project", "--calibration", hf, "--world", "64", "--hosts-per", "8",
               "--link", "10gbit", "--quiet"] + args)
    rows = {}
    for line in out.stdout.splitlines():
        m = row_re.match(line)
        if m:
            rows[m.group(3)] = float(m.group(5))
    return out, rows


r, layers = project(["--model", "resnet50", "--out", os.path.join(d, "rl")])
check(r.returncode == 0 and "gradients ready: per layer, as the profile of resnet50 measured its "
      "backward" in r.stdout,
      f"resnet50's readiness from its layers: {r.stdout} {r.stderr}")
r, by_bytes = project(["--model", "resnet50", "--ready-by", "bytes", "--out",
                       os.path.join(d, "rb")])
check(r.returncode == 0 and "gradients ready: in proportion to bytes" in r.stdout,
      f"--ready-by bytes: {r.stdout} {r.stderr}")
check("ring" in layers and "ring" in by_bytes and layers["ring"] < by_bytes["ring"],
      f"ring step by layers {layers.get('ring')} ms, by bytes {by_bytes.get('ring')} ms")
rj = os.path.join(d, "rl", "projection.json")
jr = json.load(open(rj)) if os.path.exists(rj) else {}
br = jr.get("bucket_ready", [])
check(len(br) == jr.get("nbuckets") and br and br[-1] == 1.0 and "measured its backward" in jr.get(
    "ready_by", ""), f"projection.json's bucket_ready and ready_by: {br} {jr.get('ready_by')}")
# another model than the calibration's: refused, unless --step-compute-ms
# states its compute; lenet is timed here, per tensor
r, _ = project(["--model", "lenet", "--out", os.path.join(d, "never")])
check(r.returncode == 2 and "--step-compute-ms" in r.stderr,
      f"lenet from a resnet50 calibration: rc {r.returncode}: {r.stderr}")
r, rows = project(["--model", "lenet", "--batch", "32", "--step-compute-ms", "64", "--out",
                   os.path.join(d, "ln")])
check(r.returncode == 0 and "compute 2 ms per sample" in r.stdout and
      "compute from --step-compute-ms" in r.stdout and
      "gradients ready: per tensor, as lenet's backward timed on this machine now" in r.stdout,
      f"lenet with --step-compute-ms: rc {r.returncode}: {r.stdout} {r.stderr}")

# ---- bad input: exit 2, the flag named ----
bad = os.path.join(d, "bad.json")
with open(bad, "w") as f:
    json.dump(dict(hand, reduce_bps=1e9), f)
for args, flag in [
        (["--project", "--model", "resnet50", "--link", "1gbit"], "--world"),
        (["--project", "--world", "8", "--model", "nosuch", "--link", "1gbit"], "--model"),
        (["--project", "--world", "8", "--model", "resnet50", "--calibration",
          os.path.join(d, "none.json")], "--calibration"),
        (["--project", "--world", "8", "--model", "resnet50", "--calibration", bad],
         "reduce_bps"),
        (["--project", "--world", "8", "--model", "resnet50", "--calibration", hf, "--steps",
          "3"], "--steps"),
        (["--project", "--world", "8"], "--link"),
        (["--project", "--world", "8", "--model", "resnet50", "--calibration", hf,
          "--ready-by", "flops"], "--ready-by"),
        (["--project", "--world", "8", "--model", "resnet50", "--calibration", hf,
          "--step-compute-ms", "0"], "--step-compute-ms"),
        (["--world", "8", "--ready-by", "bytes"], "--ready-by"),
        (["--calibrate", "--model", "nosuch"], "--model"),
        (["--calibrate", "--world", "8"], "--world"),
        (["--hosts-per", "8"], "--hosts-per"),
        (["--world", "4096"], "--world")]:
    r = run(args + ["--out", os.path.join(d, "never")])
    check(r.returncode == 2 and flag in r.stderr,
          f"{' '.join(args)}: rc {r.returncode}, want 2 naming {flag}: {r.stderr.strip()}")
check(not os.path.exists(os.path.join(d, "never")), "bad input writes nothing")

finish("costmodel_cli")
