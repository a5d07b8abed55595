#!/usr/bin/python3
"""html_report.py: report.html opened in a real browser (headless Chromium).

A ps-vs-ring sweep writes report.html; Chromium loads it from disk with no
network, and: no console message is logged (an error in the page would
be), the rendered DOM holds the comparison table and one inline <svg> per
chart of the results directory, each non-empty with axis labels (<text>),
nothing is fetched from outside the file (no src= or href= to anything
but in-page anchors), and a screenshot is written (its path is printed).
Skipped (exit 77) without chromium.

    html_report.py BENCH"""
import os
import re
import shutil
import subprocess
import sys

from common import SMALL, check, finish, run, tmpdir

browser = shutil.which("chromium") or shutil.which("chromium-browser")
if not browser:
    print("html_report: skipped: no chromium here (Debian: apt-get install chromium)")
    sys.exit(77)

d = tmpdir()
r = run(SMALL + ["--mode", "ps,ring", "--world", "1,2", "--batch", "8", "--steps", "8",
                 "--warmup", "2", "--out", d])
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
dom = subprocess.run(common + ["--dump-dom", "file://" + page], capture_output=True, text=True,
                     timeout=120)
check(dom.returncode == 0, f"chromium --dump-dom failed: {dom.stderr[-400:]}")
console = [l for l in dom.stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]
check(not console, f"console messages: {console[:3]}")
svgs = re.findall(r"<svg\b.*?</svg>", dom.stdout, re.S)
check(len(svgs) == len(charts), f"{len(svgs)} charts rendered, {len(charts)} in the directory")
for i, s in enumerate(svgs):
    texts = re.findall(r"<text\b[^>]*>([^<]+)</text>", s)
    check(len(texts) >= 3, f"chart {i + 1} has {len(texts)} labels: no axes or title")
    check(re.search(r"<(rect|path|line|polyline|circle)\b", s), f"chart {i + 1} draws nothing")
check("<table" in dom.stdout and "samples/s" in dom.stdout, "no comparison table in the page")

shot = os.path.join(d, "report.png")
s = subprocess.run(common + [f"--screenshot={shot}", "--window-size=1200,2400",
                             "file://" + page], capture_output=True, text=True, timeout=120)
check(s.returncode == 0 and os.path.getsize(shot) > 10000 if os.path.exists(shot) else False,
      f"no screenshot: {s.stderr[-300:]}")
keep = os.path.join(os.environ.get("TMPDIR", "/tmp"), "gradsync-report.png")
if os.path.exists(shot):
    shutil.copy(shot, keep)
    print(f"html_report: {len(svgs)} charts rendered; screenshot {keep}")
finish("html_report")
