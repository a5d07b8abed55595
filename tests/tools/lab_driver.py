#!/usr/bin/python3
"""lab_driver.py BENCH: tools/lab.py itself (the labs' own tests run each
lab short, where its part is: tests/bench/coll, tests/worker,
tests/bench/hosts, tests/bench/cli, tests/ps):
  - --list names the six labs, each with its docs/labs/ page and key;
    teaching.md links every page;
  - an unknown lab, and a bench that does not exist, stop with exit 2
    naming what is wrong, before writing anything;
  - a bench run that fails ends the lab with exit 1 and the end of its log;
    an --out that holds a lab's runs is refused (exit 2), as bench does;
  - lab_report's writers on made-up figures: table.csv as given (empty for
    None), table.md's rows, an SVG line chart (log axes) and bar chart, and
    report.html with the table, the chart and a link to a run's report."""
import os
import subprocess
import sys

from gstest import BENCH, LAB_TOOL, SRC, check, finish, tmpdir

sys.path.insert(0, os.path.join(SRC, "tools"))
import lab_defs  # noqa: E402
import lab_report  # noqa: E402


def tool(args, timeout=60):
    return subprocess.run([sys.executable, LAB_TOOL] + args, capture_output=True, text=True,
                          timeout=timeout)


names = ["allreduce-sizes", "ddp-variants", "gather-allreduce-ddp", "strong-scaling",
         "master-link", "straggler"]
r = tool(["--list"])
check(r.returncode == 0 and [x.split()[0] for x in r.stdout.splitlines()] == names,
      f"--list: {r.returncode} {r.stdout}")
teaching = open(os.path.join(SRC, "docs", "teaching.md")).read()
for n in names:
    page = os.path.join(SRC, "docs", "labs", n + ".md")
    key = os.path.join(SRC, "docs", "labs", "key", n + "-key.md")
    check(os.path.exists(page) and os.path.exists(key), f"{n}: no page or key")
    if os.path.exists(page):
        text = open(page).read()
        first = text.split("```sh\n", 1)[1].split("```")[0].strip() if "```sh\n" in text else ""
        check(first.split()[-1:] == [n] and "tools/lab.py" in first,
              f"{n}: the page's first code block is not its command: {first!r}")
        check(f"key/{n}-key.md" in text, f"{n}: the page does not link its key")
    check(f"(labs/{n}.md)" in teaching, f"teaching.md does not lead to {n}")

d = tmpdir()
r = tool(["no-such-lab", "--out", d + "/x", "--bench", BENCH])
check(r.returncode == 2 and "no lab 'no-such-lab'" in r.stderr and not os.path.exists(d + "/x"),
      f"unknown lab: {r.returncode} {r.stderr}")
r = tool(["strong-scaling", "--out", d + "/y", "--bench", d + "/no-bench"])
check(r.returncode == 2 and "no bench" in r.stderr and not os.path.exists(d + "/y"),
      f"no bench: {r.returncode} {r.stderr}")
fake = os.path.join(d, "failing-bench")
with open(fake, "w") as f:
    f.write("#!/bin/sh\necho 'the last words of a failing bench'\nexit 3\n")
os.chmod(fake, 0o755)
r = tool(["strong-scaling", "--size", "smoke", "--out", d + "/z", "--bench", fake])
check(r.returncode == 1 and "exited with status 3" in r.stderr and
      "the last words of a failing bench" in r.stderr, f"failing bench: {r.returncode} {r.stderr}")
r = tool(["strong-scaling", "--size", "smoke", "--out", d + "/z", "--bench", BENCH])
check(r.returncode == 2 and "already holds a lab's results" in r.stderr,
      f"an --out that holds a lab's runs: {r.returncode} {r.stderr}")

out = tmpdir()
run_dir = os.path.join(out, "runs", "one")
os.makedirs(run_dir)
open(os.path.join(run_dir, "report.html"), "w").write("<html></html>")
cols, rows = ["name", "x", "y"], [["a", 1, 2.5], ["b", 10, None], ["c", 100, 1234.5678]]
line = lab_report.line_chart("t", "x", "y", [{"label": "s", "points": [(1, 2.5), (100, 1234.5)]},
                                             {"label": "d", "dashed": True,
                                              "points": [(1, 1), (10, 10)]}],
                             logx=True, logy=True)
bars = lab_report.bar_chart("t", "y", ["g1", "g2"], [{"label": "h0", "values": [1, 2]},
                                                    {"label": "h1", "values": [3, None]}])
check(line.startswith("<svg") and line.count("<polyline") == 2 and "stroke-dasharray" in line
      and "(log scale)" in line, "line chart")
check(bars.count("<rect x") == 3, f"bar chart: {bars.count('<rect x')} bars, expected 3")
lab_report.write(out, {"title": "A lab", "name": "made-up"}, cols, rows, line, ["a note"],
                 [("run one", run_dir)], [("course", "none")])
csv_text = open(os.path.join(out, "table.csv")).read().splitlines()
check(csv_text == ["name,x,y", "a,1,2.5", "b,10,", "c,100,1234.57"], f"table.csv: {csv_text}")
md = open(os.path.join(out, "table.md")).read()
check("| b | 10 | - |" in md and "| c | 100 | 1235 |" in md and "- a note" in md,
      f"table.md: {md}")
page = open(os.path.join(out, "report.html")).read()
check("<td>1235</td>" in page and "<svg" in page and 'href="runs/one/report.html"' in page and
      "docs/labs/made-up.md" in page, "report.html")
check([x["name"] for x in lab_defs.LABS] == names, "lab_defs.LABS order")
finish("lab_driver")
