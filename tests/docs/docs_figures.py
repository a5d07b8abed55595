#!/usr/bin/python3
"""docs_figures.py: every figure in README.md and docs/ (its .md files in
every folder, docs/labs/ too) comes from a results file that its
paragraph cites, and that file holds it.

What a figure is (in prose and in tables; code blocks, inline `code`,
HTML comments and link targets are not read):
  1. a number followed by a unit: ns, µs, us, ms, s, KiB, MiB, GiB, kB, KB,
     MB, GB, Kbit/s, Mbit/s, Gbit/s, MB/s, GB/s, TFLOP/s, samples/s,
     images/s, steps/s (k or M before samples/s and images/s scales the
     number: "1.02 M samples/s");
  2. a ratio or a share: a number followed by "x" or "%" ("3.92x", "16%");
  3. a number in scientific notation ("2.7e-7"), or with a decimal point
     and at least three significant digits ("0.0867", "1.97": a loss, a
     ratio; "0.5 cores", "lr 0.02" are settings);
  4. in a table row (not its header), a number with a decimal point or a
     thousands separator that a cell, or a part of a cell between ", " or
     " / ", begins with ("43.2", "251,284", "0.119 (95%)", "0.85, 0.90").
A number inside a word or a name (sm_90, mlp:784-2048-2048-10, resnet50,
2026-11-27), or a version after its program's name (torch 1.13, Python
3.11), is none of these. Not figures either, being settings that no run
measures: a whole number of Gbit/s or Mbit/s (a link's rate, --link), a
power of two of KiB, MiB or GiB (a message or bucket size), the phrases of
CONSTANTS below (other settings and definitions: DDP's 25 MiB bucket), and
anything between the markers <!-- figures: none[: why] --> and
<!-- figures: end --> (a description of settings and limits, a test's
bounds, or an explanation whose numbers are worked examples, assumptions
or quotations of a cited publication, not measurements of ours).

Where its file is cited: a paragraph (lines between blank lines; a list
without blank lines is one, a table is one, code is none) cites the files
under docs/results/ that it links to (markdown links); a paragraph that
links none cites what the closest paragraph before it in the same section
(since the last heading) cites: a table's caption, a list's introduction.
A figure whose paragraph cites nothing fails, and so does a link to a
results file that does not exist.

Held: each figure must occur in one of the files its paragraph cites: the
number as written (thousands separators dropped); or, where the figure has
a decimal point or a k/M scale or is a whole number from 10 up, a number
in the file that rounds to it at the figure's precision ("43.2" is in a
file that says 43.21, "375 ms" in one that says 375.32); or the same
quantity in another unit of its kind that rounds to it ("7.46 MB" in a
file that says 7455416 B, "12.9 s" in one that says 12932.00 ms). A
percentage may also be found as its fraction ("16%" as 0.16). And in a
table row of two figures or more, each figure must be held by a line of a
cited file that has another of the row's figures within ROW_WINDOW lines
of it: a row is read from one place in one file, so that a figure changed
by hand to a number the file happens to hold elsewhere (another run's,
another file's) still fails.

The checker first checks itself on a page of its own (self_test): right as
written, failing when a figure is changed or a link dropped.

    docs_figures.py [FILE.md ...]   (default: README.md and every .md under docs/)

Exit 1 listing every figure that fails, with its file, line and why."""
import decimal
import glob
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
RESULTS = os.path.join(ROOT, "docs", "results")

# settings and definitions, as written in the docs: not measured by any run
CONSTANTS = [
    "25 MiB",             # DDP's default bucket size (bucket_cap_mb), bench's --bucket-mb
    "60 s",               # --timeout's default
    "50 ms of emulated compute",  # --compute-ms 50
    "50 ms compute",
    "50 ms of compute",
    "within 1e-5",        # the tests' bound on a summation order's difference
    "about 1e-5 relative",
]

NUM = r"(?<![\w.:/+-])[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
UNITS = (r"ns|µs|us|ms|s|KiB|MiB|GiB|kB|KB|MB|GB|Kbit/s|Mbit/s|Gbit/s|MB/s|GB/s|TFLOP/s|"
         r"steps/s|(?:[kM] )?samples/s|(?:[kM] )?images/s")
WITH_UNIT = re.compile(r"(" + NUM + r")[ \u00a0]?(" + UNITS + r")(?![\w/])")
RATIO = re.compile(r"(" + NUM + r")(x|×|%)(?![\w])")
SCI = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?[eE][-+]?\d+)(?![\w.])")
DECIMAL = re.compile(r"(?<![\w.:/+-])(\d+\.\d+)(?!\w|\.\d)")
VERSION = re.compile(r"(?:torch|PyTorch|Python|CUDA|NCCL|nvcc|Debian|MPI|MPICH|ZeroMQ|OpenBLAS|"
                     r"libsodium|jansson|protobuf-c|Slurm|Gloo|gcc|meson)\s+$")
CELL = re.compile(r"^[-−]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+)(?![\w.,])")
LINK = re.compile(r"\]\(([^)\s]+)\)")
FILE_NUM = re.compile(r"(?<![\w.])[-−]?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?")


# a unit's size in its kind's base unit: a figure may be written in one and
# its file say it in another ("7.46 MB" against 7455416 B)
UNIT_SIZE = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0,
             "B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9,
             "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30}
KIND = {u: ("time" if u in ("ns", "µs", "us", "ms", "s") else
            "binary" if u.endswith("iB") else "bytes") for u in UNIT_SIZE}


def conversions(unit):
    """factors f such that a file's number / f is the figure in its unit"""
    if unit not in UNIT_SIZE:
        return [1.0]
    kin = [u for u in UNIT_SIZE if KIND[u] == KIND[unit] or
           (KIND[unit] == "binary" and u == "B")]
    return sorted({UNIT_SIZE[unit] / UNIT_SIZE[u] for u in kin})


class Figure:
    def __init__(self, text, value, decimals, scale, percent, line, unit=None):
        self.text, self.value, self.decimals = text, value, decimals
        self.scale, self.percent, self.line = scale, percent, line
        self.factors = [scale * f for f in conversions(unit)]


def number(s):
    """(value, decimals written) of a number as the docs write it"""
    s = s.replace(",", "").replace("−", "-")
    if "e" in s.lower():
        mant = s.lower().split("e")[0]
        return float(s), len(mant.split(".")[1]) if "." in mant else 0
    return float(s), len(s.split(".")[1]) if "." in s else 0


def blank_out(text):
    """the text with code blocks, inline code, comments, marked spans and
    link targets replaced by spaces (line numbers kept)"""
    def spaces(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    text = re.sub(r"<!-- figures: none\b.*?-->.*?<!-- figures: end -->", spaces, text, flags=re.S)
    text = re.sub(r"<!--.*?-->", spaces, text, flags=re.S)
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", spaces, text, flags=re.S | re.M)
    text = re.sub(r"`(?:[^`\n]|\n(?!\s*\n))*`", spaces, text)
    text = re.sub(r"\]\([^)\s]*\)", lambda m: "]" + " " * (len(m.group(0)) - 1), text)
    for c in CONSTANTS:
        text = text.replace(c, " " * len(c))
    return text


def setting(text, unit):
    """a link rate or a size that a flag sets, not a measurement"""
    v, d = number(text)
    if unit in ("Gbit/s", "Mbit/s"):
        return d == 0 and "," not in text
    if unit in ("KiB", "MiB", "GiB"):
        return d == 0 and v >= 1 and int(v) & (int(v) - 1) == 0
    return False


def figures_of(line, lineno):
    out, taken = [], []

    def add(m, text, scale=1.0, percent=False):
        if any(a <= m.start() < b for a, b in taken):
            return
        taken.append((m.start(), m.end()))
        unit = m.group(2) if m.re is WITH_UNIT else None
        if unit and setting(text, unit):
            return
        v, d = number(text)
        out.append(Figure(m.group(0).strip(), v, d, scale, percent, lineno, unit))
    for m in SCI.finditer(line):
        add(m, m.group(1))
    for m in WITH_UNIT.finditer(line):
        unit = m.group(2)
        add(m, m.group(1), 1e6 if unit.startswith("M ") else 1e3 if unit.startswith("k ") else 1.0)
    for m in RATIO.finditer(line):
        add(m, m.group(1), percent=m.group(2) == "%")
    for m in DECIMAL.finditer(line):
        if len(m.group(1).replace(".", "").lstrip("0")) >= 3 and \
                not VERSION.search(line[:m.start()]):
            add(m, m.group(1))
    if line.lstrip().startswith("|"):
        pos = line.index("|") + 1
        for cell in line.strip().strip("|").split("|"):
            at = line.index(cell, pos)
            pos = at + len(cell)
            for part in re.split(r", | / ", cell):
                m = CELL.match(part.strip().strip("*"))
                if not m:
                    continue
                start = line.index(m.group(0), at + cell.index(part))
                if not any(a <= start < b for a, b in taken):
                    v, d = number(m.group(0))
                    out.append(Figure(m.group(0), v, d, 1.0, False, lineno))
    return out


def blocks(text):
    """[(first line number, [lines])]: paragraphs, lists and tables, split at
    blank lines and headings (a heading is a block of its own, []); a table
    apart from text right above it; indented code left out"""
    out, cur, start = [], [], 0

    def close():
        if cur and not all(line.startswith(("    ", "\t")) for line in cur):
            out.append((start, list(cur)))
        cur.clear()
    for i, line in enumerate(text.split("\n"), 1):
        table = line.lstrip().startswith("|")
        if not line.strip() or line.startswith("#") or \
                (cur and table != cur[-1].lstrip().startswith("|")):
            close()
            if line.startswith("#"):
                out.append((i, []))
            if not line.strip() or line.startswith("#"):
                continue
        if not cur:
            start = i
        cur.append(line)
    close()
    return out


def cited(lines, md, results):
    """the results files the lines link to (paths under docs/results/)"""
    files = []
    for line in lines:
        for target in LINK.findall(line):
            path = os.path.normpath(os.path.join(os.path.dirname(md), target.split("#")[0]))
            if path.startswith(results + os.sep):
                files.append(path)
    return files


_file_numbers = {}
# a table row's figures lie within this many lines of each other in its
# file: the widest rows of the docs span one run's summary (its step line
# and its rank rows) or one verdict, not a whole file
ROW_WINDOW = 40


def lines_in(path):
    """the numbers of each line of a results file; None: no such file"""
    if path not in _file_numbers:
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            text = None
        _file_numbers[path] = None if text is None else \
            [[number(n) for n in FILE_NUM.findall(line)] for line in text.split("\n")]
    return _file_numbers[path]


def numbers_in(path):
    lines = lines_in(path)
    return None if lines is None else [n for line in lines for n in line]


def holding(fig, lines):
    """the indices of the lines that hold fig: held() on the numbers that
    come within half a unit of its last digit (a cheap test first, as a
    row's figures are looked for in every line of large files)"""
    targets = [(abs(fig.value), fig.decimals)] + \
        ([(abs(fig.value) / 100, fig.decimals + 2)] if fig.percent else [])
    out = []
    for i, nums in enumerate(lines):
        for v, dv in nums:
            if any(abs(abs(v) / f - t) <= 0.50001 * 10.0 ** -d for f in fig.factors
                   for t, d in targets) and held(fig, [(v, dv)]):
                out.append(i)
                break
    return out


def apart(row, files):
    """the figures of a table row (each held somewhere) that no line of
    FILES holds within ROW_WINDOW lines of another of the row's (see the
    docstring)"""
    left = list(row)
    for path in files:
        where = [holding(f, lines_in(path) or []) for f in row]
        left = [f for k, f in enumerate(row) if f in left and not any(
            abs(i - j) <= ROW_WINDOW for m in range(len(row)) if m != k
            for i in where[k] for j in where[m])]
    return left


def rounds_to(x, d, target):
    """x rounded to d decimals (half up or half even: files print both) is target"""
    q = decimal.Decimal(1).scaleb(-d)
    x = decimal.Decimal(repr(x))
    try:
        t = decimal.Decimal(repr(target)).quantize(q, decimal.ROUND_HALF_EVEN)
        return t in (x.quantize(q, decimal.ROUND_HALF_UP), x.quantize(q, decimal.ROUND_HALF_EVEN))
    except decimal.InvalidOperation:
        # too many digits to round at d decimals: a file's "163e335" (a git
        # commit read as 1.63e337) rounds to no figure
        return False


def significant(text):
    """significant digits written ("0.88 MB": 2)"""
    digits = re.match(r"[-−]?[\d,.]+", text).group(0).replace(",", "").replace(".", "")
    return len(digits.lstrip("0-−"))


def held(fig, nums):
    targets = [fig.value] + ([fig.value / 100] if fig.percent else [])
    for v, dv in nums:
        for t in targets:
            d = fig.decimals + (2 if t is not fig.value else 0)
            for f in fig.factors:
                x = abs(v) / f
                if f == 1.0 and fig.decimals == 0 and t is fig.value and "e" not in fig.text:
                    # a whole number: as written, or a file's decimal that rounds to it
                    # (375.32 for "375 ms"), from 10 up only (a file's 2.6 is not "3x")
                    if x == abs(t) or (dv > 0 and abs(t) >= 10 and rounds_to(x, 0, abs(t))):
                        return True
                elif (f == 1.0 or significant(fig.text) >= 2) and rounds_to(x, d, abs(t)):
                    return True
    return False


def check_file(md, problems, results=RESULTS, root=ROOT):
    raw = open(md, encoding="utf-8").read()
    text = blank_out(raw)
    raw_lines = raw.split("\n")
    rel = os.path.relpath(md, root)
    last = []  # what the closest paragraph that cites anything cites, in this section
    for start, lines in blocks(text):
        if not lines:
            last = []
            continue
        is_table = lines[0].lstrip().startswith("|")
        real = raw_lines[start - 1:start - 1 + len(lines)]
        figs = []
        for k, line in enumerate(lines):
            if is_table and k < 2:
                continue  # the header and its separator
            figs += figures_of(line, start + k)
        own = cited(real, md, results)
        files = own or last
        last = files
        for path in own:
            if numbers_in(path) is None:
                problems.append(f"{rel}:{start}: cites {os.path.relpath(path, root)}, "
                                "which does not exist")
        if not figs:
            continue
        if not files:
            for f in figs:
                problems.append(f"{rel}:{f.line}: {f.text!r}: its paragraph cites no results "
                                "file (docs/results/...)")
            continue
        nums = [n for p in files for n in (numbers_in(p) or [])]
        names = ", ".join(os.path.relpath(p, root) for p in files)
        found = [f for f in figs if held(f, nums)]
        for f in figs:
            if f not in found:
                problems.append(f"{rel}:{f.line}: {f.text!r} is not in {names}")
        for line in sorted({f.line for f in found}) if is_table else []:
            row = [f for f in found if f.line == line]
            for f in apart(row, files) if len(row) > 1 else []:
                problems.append(f"{rel}:{f.line}: {f.text!r}: no line of {names} holds it "
                                f"within {ROW_WINDOW} lines of another figure of its row")


SELF_DOC = """# A page

Measured: 243 ms a step, 1.05x the other ([the run](results/run.txt)).

| size | step | ratio |
|---|---|---|
| 1 | 7.46 MB | 1.05 |

A bucket of 25 MiB on 1 Gbit/s links, 1 MiB first.
"""
SELF_RESULTS = "step median 243.31 ms, ratio 1.05; sent 7455416 B\n" + "\n" * 50 + "other 9.99\n"


def self_test():
    """the checker on a page of its own: right as written, and failing when
    a figure is changed, a link is dropped or a cited file is missing"""
    import tempfile
    bad = []
    with tempfile.TemporaryDirectory() as t:
        os.makedirs(os.path.join(t, "docs", "results"))
        with open(os.path.join(t, "docs", "results", "run.txt"), "w") as f:
            f.write(SELF_RESULTS)
        page = os.path.join(t, "docs", "page.md")
        for what, text, want in (
                ("as written", SELF_DOC, 0),
                ("a figure changed", SELF_DOC.replace("243 ms", "244 ms"), 1),
                ("a table's figure changed", SELF_DOC.replace("7.46 MB", "7.47 MB"), 1),
                ("a ratio changed", SELF_DOC.replace("1.05x", "1.50x"), 1),
                ("a row's figure from far away in its file",
                 SELF_DOC.replace("| 1.05 |", "| 9.99 |"), 2),
                ("the link dropped", SELF_DOC.replace("([the run](results/run.txt))", ""), 4),
                ("a cited file missing", SELF_DOC.replace("run.txt", "gone.txt"), 5)):
            with open(page, "w") as f:
                f.write(text)
            problems = []
            _file_numbers.clear()
            check_file(page, problems, os.path.join(t, "docs", "results"), t)
            if len(problems) != want:
                bad.append(f"self-test, {what}: {len(problems)} problem(s), want {want}: "
                           f"{problems}")
    _file_numbers.clear()
    return bad


def main(paths):
    problems = self_test()
    if not paths:
        paths = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(
            os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    for md in paths:
        check_file(os.path.abspath(md), problems)
    for p in problems:
        print("FAIL:", p)
    print(f"docs_figures: {len(paths)} files, {len(problems)} figure(s) failing")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
