#!/usr/bin/python3
"""run.py: gradsync's cost model against Horovod's published scaling, with
nothing fitted. Writes docs/results/horovod/<date>-horovod.txt (its first
lines: the command, the commit, the machine, the date) from a clean commit.

    python3 docs/results/horovod/run.py [--bench build/bench/bench] [--reprofile]
                                        [--allow-dirty]

What is projected, and from where (docs/model.md, "Next to a published
figure: Horovod"):
  networks  ResNet-101, Inception V3 and VGG-16 from torchvision, profiled by
            tools/profile_model.py on this machine's CPU (PROFILES below; made
            again with --reprofile, or when missing): their parameters, the
            order backward makes their gradients, and each layer's share of
            forward and backward;
  compute   a P100's time per image from a published per-model training rate
            (RATES below, batch 64), spread over the layers by the measured
            proportions (bench --project --step-compute-ms);
  network   25 Gbit/s per host link as published; 4 GPUs per server; the flat
            ring over all GPUs with overlap (NCCL 2 as Horovod ran it), 64 MB
            buckets (Horovod's tensor fusion buffer);
  the rest  as docs/results/horovod/p100-25gbe.json states it (assumed: PCIe-
            class transport inside a server, the GPU's reduction, copy and
            optimizer rates, 3 us link latency, 5 us per message), not fitted.
The model's scaling efficiency at every GPU count the source gives is set
beside the published one (PUBLISHED below: the peer's numbers, quoted, not
ours), with the goal of 5 points, and the fall from 128 to 512 GPUs beside
the published fall."""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import results_header  # noqa: E402  (the results files' first lines)

# ---- the peer's numbers (quoted, with their sources) ----
# Horovod's docs/benchmarks.md (github.com/horovod/horovod): "4 Pascal GPUs each
# connected by RoCE-capable 25 Gbit/s network. Horovod achieves 90% scaling
# efficiency for both Inception V3 and ResNet-101, and 79% scaling efficiency for
# VGG-16" on 32 servers (128 GPUs; the page's text until commit 8318a898,
# 2018-05-10), and "90% ... and 68% scaling efficiency for VGG-16" on 128
# servers (512 GPUs; from that commit on). The paper (A. Sergeev, M. Del Balso,
# "Horovod: fast and easy distributed deep learning in TensorFlow",
# arXiv:1802.05799, 2018) plots the same benchmark over 25GbE TCP and RDMA: 88%
# for Inception V3 and ResNet-101 at 128 GPUs over TCP, RDMA 3-4% better for
# those two and about 30% faster for VGG-16 (its text); the figures' other bars
# are not given as numbers, so no other GPU count is compared.
PUBLISHED = {  # scaling efficiency over RoCE 25 Gbit/s, by GPUs
    "resnet101": {128: 0.90, 512: 0.90},
    "inception_v3": {128: 0.90, 512: 0.90},
    "vgg16": {128: 0.79, 512: 0.68},
}
PUBLISHED_TCP_128 = {"resnet101": 0.88, "inception_v3": 0.88}  # the paper's text; not compared

# ---- the P100's compute (published rates, images/s, 1 GPU, batch 64) ----
# TensorFlow's benchmarks page, "Details for NVIDIA DGX-1 (NVIDIA Tesla P100)",
# training with synthetic data (tensorflow/docs, site/en/r1/guide/performance/
# benchmarks.md): InceptionV3 142, ResNet-50 219, ResNet-152 91.8, VGG16 154.
# ResNet-101 is not on that page: its time per image is placed between
# ResNet-50's and ResNet-152's in proportion to torchvision's published
# multiply-adds (its model tables: 4.09, 7.80 and 11.51 GFLOPS per image at
# 224x224), an interpolation of two published rates, said as such.
P100 = {"inception_v3": 142.0, "resnet50": 219.0, "resnet152": 91.8, "vgg16": 154.0}
GMAC = {"resnet50": 4.09, "resnet101": 7.80, "resnet152": 11.51}
t50, t152 = 1 / P100["resnet50"], 1 / P100["resnet152"]
RATES = {
    "resnet101": 1 / (t50 + (GMAC["resnet101"] - GMAC["resnet50"]) /
                      (GMAC["resnet152"] - GMAC["resnet50"]) * (t152 - t50)),
    "inception_v3": P100["inception_v3"],
    "vgg16": P100["vgg16"],
}
RATE_SOURCE = {
    "resnet101": "interpolated between ResNet-50 (219) and ResNet-152 (91.8) by multiply-adds",
    "inception_v3": "published (InceptionV3, 142)",
    "vgg16": "published (VGG16, 154)",
}
PROFILES = {
    "resnet101": ("torchvision:resnet101", "docs/results/horovod/profiles/resnet101.json"),
    "inception_v3": ("torchvision:inception_v3", "docs/results/horovod/profiles/inception_v3.json"),
    "vgg16": ("torchvision:vgg16", "worker/profiles/vgg16.json"),
}
PROFILE_ARGS = ["--batch", "8", "--threads", "1", "--warmup", "1", "--steps", "3",
                "--clean-steps", "2"]
BATCH = 64
WORLDS = [1, 4, 8, 16, 32, 64, 128, 256, 512]
CALIBRATION = "docs/results/horovod/p100-25gbe.json"
GOAL = 0.05


def sh(args, **kw):
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, **kw)


def header(args, out):
    """the file's first lines (tools/results_header.py: refuses a dirty tree
    or a bench not built from this commit)"""
    now = datetime.datetime.now(datetime.timezone.utc)
    out.write("\n".join(results_header.lines(
        "python3 docs/results/horovod/run.py " + " ".join(sys.argv[1:]),
        args.bench, args.allow_dirty)) + "\n\n")
    return now


def ensure_profiles(args, out):
    for name, (spec, path) in PROFILES.items():
        full = os.path.join(ROOT, path)
        if args.reprofile or not os.path.exists(full):
            print(f"run.py: profiling {spec} (minutes on a CPU)", file=sys.stderr, flush=True)
            r = subprocess.run(["/usr/bin/python3", "tools/profile_model.py", spec, "-o", path] +
                               PROFILE_ARGS, cwd=ROOT)
            if r.returncode:
                sys.exit(f"run.py: profiling {spec} failed")
        p = json.load(open(full))
        env = p.get("environment", {})
        out.write("profile %-12s %s: %s, batch %d on %s (%s, torch %s, %s thread(s)); %s\n" % (
            name, path, p["model"], p["batch"], env.get("device", "?"), env.get("device_name", "?"),
            env.get("torch", "?"), env.get("threads", "?"), p.get("command", "")))


def project(args, name, tmp, worlds=WORLDS, link="25gbit"):
    path = PROFILES[name][1]
    step_ms = BATCH * 1e3 / RATES[name]
    d = os.path.join(tmp, "%s-%s-%s" % (name, link, worlds[0]))
    cmd = [args.bench, "--project", "--model", "profile:" + path, "--calibration", CALIBRATION,
           "--world", ",".join(map(str, worlds)), "--hosts-per", "4", "--batch", str(BATCH),
           "--first-bucket-mb", "64", "--bucket-mb", "64", "--link", link,
           "--no-ps-local-reduce", "--step-compute-ms", "%.4f" % step_ms, "--out", d, "--quiet"]
    r = sh(cmd)
    if r.returncode:
        sys.exit(f"run.py: {' '.join(cmd)}: {r.stderr}")
    rel = ["bench" if c == args.bench else c for c in cmd]
    rel[rel.index("--out") + 1] = "DIR"
    return rel, r.stdout, json.load(open(os.path.join(d, "projection.json")))


VERDICT = """
== what the model lacks ==
VGG-16's fall from 128 to 512 GPUs is not reproduced. The model runs every edge
of the ring at the link's full rate whatever the cluster's size (a
non-blocking fabric without congestion); a ring moves at its slowest edge, and
a fabric of 128 servers (more switches, uplinks shared by hashed flows, RoCE
congestion control) has slower slowest edges than one of 32. The term missing
is the ring's per-edge rate as a function of the number of servers. The
diagnosis above shows what it would take (about {r128:.1f} Gbit/s on 32 servers,
{r512:.1f} on 128) and that such a term leaves ResNet-101 and Inception V3 close to where the
model puts them, as the published figures do: their gradients (a third and a
fifth of VGG-16's) hide behind backward at either rate. The model has no
measurement of that fabric to give the term a value, so none is assumed.
ResNet-101 and Inception V3 come out {lo:.1f} to {hi:.1f} points above the published 90% at
both sizes: the model charges overlap nothing (all-reduce kernels beside
backward's on the same GPU slow it) and has no per-step coordination cost (a
framework's and Horovod's own); both would lower every point alike.
"""


def ring_eff(args, tmp, name, gpus, mbit):
    _, _, j = project(args, name, tmp, worlds=[1, gpus], link="%dmbit" % mbit)
    return [r for r in j["rows"] if r["mode"] == "ring" and r["world"] == gpus][0][
        "scaling_efficiency_predicted"]


def diagnose(args, out, results):
    """Not the comparison: what per-link rate the model's ring would need to
    give VGG-16's published points, and what those rates would do to the
    other two networks (a term that explains VGG-16's fall must leave them
    where they are)."""
    out.write("\n== diagnosis, not the comparison: the link rate that would give VGG-16's "
              "published points ==\n")
    with tempfile.TemporaryDirectory() as tmp:
        need = {}
        for gpus in (128, 512):
            lo, hi = 1000, 25000  # Mbit/s; efficiency grows with the rate
            for _ in range(12):
                mid = (lo + hi) // 2
                if ring_eff(args, tmp, "vgg16", gpus, mid) < PUBLISHED["vgg16"][gpus]:
                    lo = mid
                else:
                    hi = mid
            need[gpus] = hi
            out.write("vgg16 at %3d GPUs: %.1f%% needs the ring's links at %.2f Gbit/s "
                      "(published %.0f%%)\n" % (gpus, ring_eff(args, tmp, "vgg16", gpus, hi) * 100,
                                               hi / 1e3, PUBLISHED["vgg16"][gpus] * 100))
        for name in ("resnet101", "inception_v3"):
            for gpus in (128, 512):
                eff = ring_eff(args, tmp, name, gpus, need[gpus])
                out.write("%-12s at %3d GPUs with links at %.2f Gbit/s: %.1f%% (at 25 Gbit/s "
                          "%.1f%%, published %.0f%%)\n" % (
                              name, gpus, need[gpus] / 1e3, eff * 100,
                              results[name][gpus]["scaling_efficiency_predicted"] * 100,
                              PUBLISHED[name][gpus] * 100))
    return need


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "bench", "bench"))
    ap.add_argument("--reprofile", action="store_true", help="profile the networks again")
    ap.add_argument("--allow-dirty", action="store_true")
    args = ap.parse_args()
    args.bench = os.path.abspath(args.bench)
    buf = []

    class Out:
        def write(self, s):
            buf.append(s)
            sys.stdout.write(s)
    out = Out()
    now = header(args, out)
    ensure_profiles(args, out)
    out.write("\ncompute of a P100 at batch %d (images/s, TensorFlow's DGX-1 page):\n" % BATCH)
    for name in PROFILES:
        out.write("  %-12s %6.1f images/s = %.3f ms per image, %.1f ms per step: %s\n" % (
            name, RATES[name], 1e3 / RATES[name], BATCH * 1e3 / RATES[name], RATE_SOURCE[name]))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in PROFILES:
            cmd, table, j = project(args, name, tmp)
            out.write("\n== %s ==\n$ %s\n%s" % (name, " ".join(cmd), table))
            results[name] = {r["world"]: r for r in j["rows"] if r["mode"] == "ring"}
    out.write("\n== against the published scaling efficiency (Horovod, RoCE 25 Gbit/s; the "
              "peer's numbers) ==\n")
    out.write("%-12s %5s %10s %10s %8s %8s  %s\n" % ("network", "GPUs", "published", "model",
                                                     "diff", "exposed", "within 5 points"))
    within = total = 0
    for name in PROFILES:
        for gpus, pub in PUBLISHED[name].items():
            row = results[name][gpus]
            eff = row["scaling_efficiency_predicted"]
            ok = abs(eff - pub) <= GOAL + 1e-9
            within += ok
            total += 1
            out.write("%-12s %5d %9.0f%% %9.1f%% %+7.1f %6.0f ms  %s\n" % (
                name, gpus, pub * 100, eff * 100, (eff - pub) * 100,
                row["comm_s_predicted"] * 1e3, "yes" if ok else "no"))
    out.write("%d of %d points within 5 points of the published efficiency\n" % (within, total))
    out.write("(the paper's TCP figure, 88% at 128 GPUs for ResNet-101 and Inception V3, is not "
              "compared: the model has no term for a transport's own overhead)\n")
    out.write("\n== the fall from 128 to 512 GPUs ==\n")
    for name in PROFILES:
        pub = PUBLISHED[name][128] - PUBLISHED[name][512]
        mod = results[name][128]["scaling_efficiency_predicted"] - results[name][512]["scaling_efficiency_predicted"]
        out.write("%-12s published %4.1f points, model %4.1f points%s\n" % (
            name, pub * 100, mod * 100,
            "" if abs(pub - mod) <= GOAL else ": not reproduced"))
    need = diagnose(args, out, results)
    gaps = [(results[n][g]["scaling_efficiency_predicted"] - PUBLISHED[n][g]) * 100
            for n in ("resnet101", "inception_v3") for g in (128, 512)]
    out.write(VERDICT.format(lo=min(gaps), hi=max(gaps), r128=need[128] / 1e3,
                             r512=need[512] / 1e3))
    path = os.path.join(HERE, now.strftime("%Y-%m-%d") + "-horovod.txt")
    results_header.write(path, "".join(buf))
    print("run.py: wrote " + os.path.relpath(path, ROOT), file=sys.stderr)


if __name__ == "__main__":
    main()
