#!/usr/bin/python3
"""html_report.py: report.html opened in a real browser (headless Chromium).

A ps-vs-ring sweep writes report.html; Chromium loads it from disk with no
network, and: the verdict and the first chart lie within the first 1000 px
of a 1280x1000 window, before the comparison table, whose numbers have 3
significant digits and their units; no "0.000x" where there is no model,
no dedicated server named where none ran, no efficiency chart without a
world-1 run; the timelines of one world share one time scale and their
titles say overlap and precision; no console message is logged (an error in the page would
be), the rendered DOM holds the comparison table and one inline <svg> per
chart of the results directory: scaling, efficiency, breakdown, bytes,
memory (one bar per rank, as report.json's peak RSS) and one timeline per
run (every rank's phases), each with a title, both axes, axis labels and
marks; nothing is fetched from outside the file (no src= or href= to
anything but in-page anchors), and a screenshot is written (its path is
printed). Where /usr/bin/python3 has torch, the sweep runs --peer torch as
well and scaling.svg draws it as its own labelled line, a point per world
at report.json's peer throughput (said, not checked, without torch). Ranks
outnumbering the cores put a notice beside the comparison
(report.json, the terminal, the page); the collective benchmark's page
shows busbw vs size (log2) with one line per collective and mode, and a
table per run; a second invocation into the same directory (a --collective
list, on the ring) draws its own collectives only, not the first's.
Skipped (exit 77) without chromium.

    html_report.py BENCH"""
import json
import os
import re
import shutil
import subprocess
import sys

from gstest import SMALL, check, finish, run, skip_part, tmpdir

browser = shutil.which("chromium") or shutil.which("chromium-browser")
if not browser:
    print("html_report: skipped: no chromium here (Debian: apt-get install chromium)")
    sys.exit(77)

have_torch = subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed"],
                            capture_output=True).returncode == 0
d = tmpdir()
r = run(SMALL + ["--mode", "ps,ring", "--world", "1,2", "--batch", "8", "--steps", "8",
                 "--warmup", "2", "--out", d] + (["--peer", "torch"] if have_torch else []))
check(r.returncode == 0, f"sweep: {r.stderr}")
page = os.path.join(d, "report.html")
check(os.path.exists(page), "no report.html")
html = open(page).read()
charts = sorted(f for f in os.listdir(d) if f.endswith(".svg"))
check(charts, "no charts in the results directory")
external = re.findall(r'(?:src|href)\s*=\s*"(?!#)([^"]*)"', html)
check(not external, f"report.html refers to files or the network: {external[:3]}")

profile = tmpdir()
common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
          f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0"]


def rendered(page):
    """the DOM Chromium renders from page, after checking it logged nothing"""
    dom = subprocess.run(common + ["--dump-dom", "file://" + page], capture_output=True,
                         text=True, timeout=120)
    check(dom.returncode == 0, f"chromium --dump-dom {page} failed: {dom.stderr[-400:]}")
    console = [l for l in dom.stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]
    check(not console, f"{page}: console messages: {console[:3]}")
    return dom.stdout


def figures(html):
    """{file name: its inline <svg>} from the page's figures"""
    return {name: svg for svg, name in re.findall(
        r"<figure>\s*(<svg\b.*?</svg>)\s*<figcaption>([^<]+)</figcaption>", html, re.S)}


def chart_ok(name, s):
    """a title, both axes drawn, labels on both, and marks"""
    texts = re.findall(r"<text\b[^>]*>([^<]+)</text>", s)
    check(re.search(r'<text\b[^>]*font-weight="bold"[^>]*>[^<]{8,}</text>', s),
          f"{name}: no title")
    check(len(re.findall(r'<line\b[^>]*stroke="black"', s)) >= 2, f"{name}: no axes")
    check(re.search(r'rotate\(-90\)"[^>]*>[^<]+</text>', s), f"{name}: no y axis label")
    check(len(texts) >= 6, f"{name}: {len(texts)} labels: no tick or x axis labels")
    check(re.search(r"<(rect|polyline|circle)\b[^>]*(fill|stroke)=\"#[0-9a-f]{6}\"", s),
          f"{name}: draws nothing")


dom = rendered(page)
figs = figures(dom)
check(sorted(figs) == charts, f"{sorted(figs)} rendered, {charts} in the directory")
rep = json.load(open(os.path.join(d, "report.json")))
want = {"scaling.svg", "efficiency.svg", "breakdown.svg", "bytes.svg", "memory.svg", "loss.svg"}
want |= {f"timeline-{x['id']}.svg" for x in rep["runs"]}
want |= {f"buckets-{x['id']}.svg" for x in rep["runs"] if x["bucket_timing"]}
check(set(charts) == want, f"charts {charts}, expected {sorted(want)}")
for name, s in figs.items():
    chart_ok(name, s)
for x in rep["runs"]:  # the timeline: one lane label per rank, every rank's phases drawn
    s = figs.get(f"timeline-{x['id']}.svg", "")
    for rank in range(x["world"]):
        check(re.search(rf"<title>rank {rank} step \d+ compute", s),
              f"timeline of {x['id']}: no compute of rank {rank}")
        check(x["mode"] != "ring" or x["world"] < 2 or
              re.search(rf"<title>rank {rank} backend: ", s),
              f"timeline of {x['id']}: no backend strip for rank {rank}")
for name, word in (("scaling.svg", "log2"), ("efficiency.svg", "ideal 1.0"),
                   ("memory.svg", "peak RSS")):
    check(word in figs.get(name, ""), f"{name} does not say {word!r}")
# the memory chart: one bar per rank of every run, as report.json's peak_rss_bytes
bars = re.findall(r"<title>([^<]+) rank (\d+): ([\d.]+) MiB</title>", figs.get("memory.svg", ""))
check(len(bars) == sum(x["world"] for x in rep["runs"]), f"memory.svg: {len(bars)} bars")
for rid, rank, mib in bars:
    run_ = next(x for x in rep["runs"] if x["id"] == rid)
    rss = run_["per_rank"][int(rank)]["peak_rss_bytes"]
    check(rss > 0 and abs(float(mib) - rss / 2**20) < 0.06, f"memory.svg {rid} rank {rank}: "
          f"{mib} MiB vs peak_rss_bytes {rss}")
check("<table" in dom and "samples/s" in dom, "no comparison table in the page")
# the peer on scaling.svg: its own labelled line, a point per world at its throughput
if have_torch:
    sc = figs.get("scaling.svg", "")
    label = "torch-ddp (gloo)"
    check(re.search(rf"<text [^>]*>{re.escape(label)}</text>", sc), "scaling.svg: no peer legend")
    pts = re.findall(rf"<title>{re.escape(label)} world (\d+): ([\d.e+-]+) samples/s</title>", sc)
    peers = {p["world"]: p["throughput_samples_per_s"] for p in rep.get("peers", [])}
    check(sorted(int(w) for w, _ in pts) == sorted(peers) == [1, 2],
          f"scaling.svg peer points {pts}, report.json peers at worlds {sorted(peers)}")
    for w, v in pts:
        tp = peers.get(int(w), 0)
        check(abs(float(v) - tp) <= 0.005 * tp, f"scaling.svg peer world {w}: {v} vs {tp}")
    check(len(re.findall(r"<polyline\b", sc)) >= 3, "scaling.svg: no peer line")
else:
    skip_part("the PyTorch peer on scaling.svg", "/usr/bin/python3 cannot import "
              "torch.distributed (python3-torch: ./install.sh --deps)")

# ranks outnumbering the cores: a notice beside the comparison
cores = os.sysconf("SC_NPROCESSORS_ONLN")
if cores + 1 <= 8:
    o = tmpdir()
    r = run(SMALL + ["--mode", "ps,ring", "--world", str(cores + 1), "--batch", "8", "--steps",
                     "4", "--warmup", "1", "--out", o])
    check(r.returncode == 0, f"oversubscribed sweep: {r.stderr}")
    j = json.load(open(os.path.join(o, "report.json")))
    check(j.get("oversubscribed") is True and "outnumber" in (j.get("oversubscribed_notice") or ""),
          f"world {cores + 1} on {cores} cores: report.json {j.get('oversubscribed')!r}")
    check("NOTE:" in r.stdout and "outnumber" in r.stdout, "no notice beside the table")
    odom = rendered(os.path.join(o, "report.html"))
    check(re.search(r'class="notice"[^>]*>.*?outnumber', odom, re.S),
          "report.html: no oversubscription notice")
else:
    print(f"html_report: the oversubscription notice not checked ({cores} cores)")

# the collective benchmark: busbw vs size, one line per mode, in its own report.html
c = tmpdir()
r = run(["--mode", "ps,ring", "--world", "2", "--collective", "allreduce", "-b", "8", "-e", "64K",
         "-f", "4", "-n", "2", "-w", "1", "--threads", "1", "--timeout", "20", "--out", c])
check(r.returncode == 0, f"collective sweep: {r.stderr}")
cfigs = figures(rendered(os.path.join(c, "report.html"))) if r.returncode == 0 else {}
bw = cfigs.get("busbw.svg", "")
check(bw, f"collective report.html charts: {sorted(cfigs)}")
if bw:
    chart_ok("busbw.svg", bw)
    check(len(re.findall(r"<polyline\b", bw)) == 2 and "all_reduce, ps, world 2" in bw and
          "all_reduce, ring, world 2" in bw, "busbw.svg: not one line per mode")
    check(len(re.findall(r"<circle\b", bw)) == 2 * 7, "busbw.svg: not one point per size")
    check("log2" in bw, "busbw.svg: no log2 size axis")

# the other collectives, a list of them, into the same directory: their lines
# (one per collective and mode), their tables, and nothing of the first run
r = run(["--mode", "ps,ring", "--world", "2", "--collective", "reduce_scatter,broadcast,allreduce",
         "-b", "8", "-e", "64K", "-f", "4", "-n", "2", "-w", "1", "--threads", "1", "--timeout",
         "20", "-d", "double", "--out", c])
check(r.returncode == 2 and "-d double" in r.stderr and "--mode ps" in r.stderr,
      f"a list with -d double on ps: exit {r.returncode}, {r.stderr}")
r = run(["--mode", "ring", "--world", "2", "--collective", "reduce_scatter,broadcast", "-b", "8",
         "-e", "64K", "-f", "4", "-n", "2", "-w", "1", "--threads", "1", "--timeout", "20",
         "-d", "int32", "-o", "max", "--out", c])
check(r.returncode == 0, f"collective list: {r.stderr}")
cdom = rendered(os.path.join(c, "report.html")) if r.returncode == 0 else ""
bw = figures(cdom).get("busbw.svg", "")
check(bw, "collective list: no busbw.svg in report.html")
if bw:
    chart_ok("busbw.svg", bw)
    lines = re.findall(r'<text x="\d+" y="\d+">(\w+, \w+, world \d+)</text>', bw)
    check(sorted(lines) == ["broadcast, ring, world 2", "reduce_scatter, ring, world 2"],
          f"busbw.svg of the list: legend {lines} (the first run's all_reduce must be gone)")
    check(len(re.findall(r"<polyline\b", bw)) == 2, "busbw.svg: not one line per collective")
    for name in ("broadcast", "reduce_scatter"):
        pts = re.findall(rf"<title>{name} ring w2, (\d+) bytes: [\d.e+-]+ GB/s</title>", bw)
        check(len(pts) == 7, f"busbw.svg: {name}: {len(pts)} points, 7 sizes")
    heads = re.findall(r"<h2>([^<]+)</h2>", cdom)
    check("reduce_scatter: ring, world 2, int32, max" in heads and
          "broadcast: ring, world 2, int32, none" in heads and
          not any(h.startswith("all_reduce") for h in heads), f"report.html sections: {heads}")

# the first screen, laid out by Chromium in a 1280x1000 window: the verdict
# and the first chart within its first 1000 px, the comparison after them.
# (A copy of the page gets a script that writes the boxes into the DOM;
# report.html itself has none.)
probe = os.path.join(tmpdir(), "probe.html")
with open(probe, "w") as f:
    f.write(html.replace("</body>", """<script>
var b = function (q) { var e = document.querySelector(q); if (!e) return null;
  var r = e.getBoundingClientRect(); return [r.top + scrollY, r.bottom + scrollY]; };
var p = document.createElement('pre'); p.id = 'layout';
p.textContent = JSON.stringify({verdict: b('#verdict'), chart: b('figure'),
  table: b('table.cmp'), caption: document.querySelector('figure figcaption').textContent});
document.body.appendChild(p);
</script></body>"""))
lay = subprocess.run(common + ["--window-size=1280,1000", "--dump-dom", "file://" + probe],
                     capture_output=True, text=True, timeout=120)
m = re.search(r'<pre id="layout">([^<]*)</pre>', lay.stdout)
box = json.loads(m.group(1).replace("&quot;", '"')) if m else {}
check(box.get("verdict") and box.get("chart") and box["verdict"][1] <= 1000 and
      box["chart"][1] <= 1000 and box["verdict"][0] < box["chart"][0] < box["table"][0],
      f"the first screen (1000 px): {box or lay.stderr[-300:]}")
check(box.get("caption") == "scaling.svg", f"the first chart on loopback: {box.get('caption')}")
# the verdict text is report.json's, and comes first
vtext = rep.get("verdict", {}).get("text", "")
check(vtext and vtext[:40] in re.sub(r"\s+", " ", dom[dom.find('id="verdict"'):][:3000]),
      "report.html's verdict is not report.json's")
# numbers for people in the comparison: 3 significant digits (whole numbers
# from 100), units beside them, percentages as %
cmp_table = re.search(r'<table class="cmp">(.*?)</table>', dom, re.S)
cells = re.findall(r"<td>([^<]*)</td>", cmp_table.group(1)) if cmp_table else []
check(cells, "no comparison table")
for c in cells:
    if c in ("n/a", "one run") or re.fullmatch(r"[a-z]+", c):
        continue
    for num in re.findall(r"\d+(?:\.\d+)?", c):
        digits = num.replace(".", "").lstrip("0")
        check("." not in num or len(digits) <= 3, f"comparison cell {c!r}: more than 3 digits")
check("0.000x" not in dom, "'vs model 0.000x' where there is no model (world 1)")
check("dedicated server" not in figs.get("bytes.svg", "") + figs.get("breakdown.svg", ""),
      "the charts name a dedicated server no run had")
# the timelines of one world share one time scale, and say overlap and precision
tl = {x["mode"]: figs.get(f"timeline-{x['id']}.svg", "") for x in rep["runs"] if x["world"] == 2}
ticks = {m: re.findall(r'<text x="[\d.]+" y="\d+" text-anchor="middle">([\d.]+)</text>', t)
         for m, t in tl.items()}
check(len(tl) == 2 and ticks["ps"] and ticks["ps"] == ticks["ring"],
      f"timelines of world 2 on different time scales: {ticks}")
for mode, words in (("ps", "no overlap"), ("ring", "overlap (each bucket")):
    check(words in tl.get(mode, "") and "fp32" in tl.get(mode, ""),
          f"the {mode} timeline's title does not say {words!r} and its precision")
# no efficiency chart where there is no world-1 run to compare with
e = tmpdir()
r = run(SMALL + ["--mode", "ps,ring", "--world", "2", "--batch", "8", "--steps", "3",
                 "--warmup", "1", "--out", e])
check(r.returncode == 0 and os.path.exists(os.path.join(e, "scaling.svg")) and
      not os.path.exists(os.path.join(e, "efficiency.svg")),
      f"--world 2 alone: efficiency.svg drawn without a world-1 run ({r.stderr[-200:]})")

shot = os.path.join(d, "report.png")
s = subprocess.run(common + [f"--screenshot={shot}", "--window-size=1200,2400",
                             "file://" + page], capture_output=True, text=True, timeout=120)
check(s.returncode == 0 and os.path.getsize(shot) > 10000 if os.path.exists(shot) else False,
      f"no screenshot: {s.stderr[-300:]}")
keep = os.path.join(os.environ.get("TMPDIR", "/tmp"), "gradsync-report.png")
if os.path.exists(shot):
    shutil.copy(shot, keep)
    print(f"html_report: {len(figs)} charts rendered; screenshot {keep}")
finish("html_report")
