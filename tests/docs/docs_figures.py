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

Pinned: and each figure must be on the line of its file that KEY pins it
to (class Key): held anywhere in a dense file, a figure changed by hand to
a nearby number would often still pass. A figure new, changed or moved
along its line, or a pinned line rewritten, fails until --write-key pins
it again, printing the line it picked for the writer to check.

The checker first checks itself on a page of its own (self_test): right as
written, failing when a figure is changed (to a number its file also
holds, too) or a link dropped.

    docs_figures.py [FILE.md ...]   (default: README.md and every .md under docs/)
    docs_figures.py --write-key     (every page: keep the pins that hold, pin the rest)

Exit 1 listing every figure that fails, with its file, line and why."""
import decimal
import glob
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
RESULTS = os.path.join(ROOT, "docs", "results")
KEY = os.path.join(ROOT, "tests", "docs", "figures.key")
# words before a figure that name its place in the key (see context_of)
CONTEXT_WORDS = 4

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
    def __init__(self, text, value, decimals, scale, percent, line, unit=None, span=(0, 0)):
        self.text, self.value, self.decimals = text, value, decimals
        self.scale, self.percent, self.line = scale, percent, line
        self.factors = [scale * f for f in conversions(unit)]
        self.span, self.context = span, ""


def place(figs, line):
    """each figure's place on its line, as the key names it: the last
    CONTEXT_WORDS words before it, the line's other figures written "#"
    ("| 10 Gbit/s | # | # |" before a row's third figure), so that two
    figures swapped, or one moved along its line, no longer match their
    pins, while a figure beside it changed leaves its pin be"""
    for f in figs:
        before = line[:f.span[0]]
        for g in sorted((g for g in figs if g.span[1] <= f.span[0]), key=lambda g: -g.span[0]):
            before = before[:g.span[0]] + " # " + before[g.span[1]:]
        f.context = " ".join(before.split()[-CONTEXT_WORDS:])
    return figs


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
        out.append(Figure(m.group(0).strip(), v, d, scale, percent, lineno, unit,
                          (m.start(), m.end())))
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
                    out.append(Figure(m.group(0), v, d, 1.0, False, lineno, None,
                                      (start, start + len(m.group(0)))))
    return place(out, line)


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


def excerpt_full(path, i):
    """line i (0-based) of a results file, its spaces collapsed"""
    if path not in _file_text:
        _file_text[path] = open(path, encoding="utf-8", errors="replace").read().split("\n")
    text = _file_text[path]
    return " ".join(text[i].split()) if i < len(text) else ""


def excerpt(path, i):
    """the start of line i of a results file, as the key quotes it"""
    return excerpt_full(path, i)[:EXCERPT]


_file_text = {}
EXCERPT = 60


class Key:
    """tests/docs/figures.key: the line of a results file that each figure
    of the docs comes from. A figure is held by its pinned line, not by any
    number of its file: in a dense file some number rounds to almost any
    figure, so without a pin a figure changed by hand would still pass.

    One line per figure, tab-separated: the page, the figure as written,
    its context (context_of), FILE:LINE (under docs/results/, 1-based) and
    the start of that line as the key was written (EXCERPT characters; a
    file rewritten under its pins fails until they are checked again). A
    figure written twice in one place has a line per time, in the page's
    order. `--write-key` keeps every pin that still holds and pins the rest
    (pick); a pin it picks wrongly is corrected by editing its line number."""

    def __init__(self, path, root):
        self.path, self.root = path, root
        self.pins = {}       # (page, figure, context) -> [[file, line, excerpt]]
        self.used = {}       # the same -> how many of them the pages took
        self.rows = []       # what --write-key writes, in the pages' order
        self.picked = []     # the pins written anew, to show
        self.bad = []        # lines of the key that do not parse
        self.failed = set()  # (page, context) of the figures that failed: their old
        #                      pins are not reported again as stale
        try:
            text = open(path, encoding="utf-8").read()
        except OSError:
            text = ""
        for n, row in enumerate(text.split("\n"), 1):
            if not row.strip() or row.startswith("#"):
                continue
            parts = row.split("\t")
            where = parts[3].rsplit(":", 1) if len(parts) == 5 else []
            if len(where) != 2 or not where[1].isdigit():
                self.bad.append(f"{os.path.relpath(path, root)}:{n}: want 5 tab-separated fields "
                                "(page, figure, context, FILE:LINE, excerpt); run "
                                "docs_figures.py --write-key")
                continue
            self.pins.setdefault(tuple(parts[:3]), []).append([where[0], int(where[1]), parts[4]])

    def take(self, page, fig):
        """the next pin of this figure in this place, or None"""
        k = (page, fig.text, fig.context)
        i = self.used.get(k, 0)
        self.used[k] = i + 1
        pins = self.pins.get(k, [])
        return pins[i] if i < len(pins) else None

    def keep(self, page, fig, path, i):
        rel = os.path.relpath(path, self.root)
        self.rows.append("\t".join((page, fig.text, fig.context, f"{rel}:{i + 1}",
                                    excerpt(path, i))))

    def stale(self, pages):
        """the pins of these pages that no figure took"""
        return [f"{os.path.relpath(self.path, self.root)}: {k[0]}: {k[1]!r} after {k[2]!r}: "
                "no such figure on the page any more; run docs_figures.py --write-key"
                for k, pins in self.pins.items()
                if k[0] in pages and (k[0], k[2]) not in self.failed
                for _ in range(len(pins) - self.used.get(k, 0))]

    def write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("# docs_figures.py --write-key: the line of docs/results/ that each "
                    "figure of the docs comes from\n"
                    "# page\tfigure\tcontext\tFILE:LINE\tthe line's start\n")
            f.write("\n".join(self.rows) + "\n")
        os.replace(tmp, self.path)


WORD = re.compile(r"[A-Za-z][\w:./+-]*[\w]")


def pick(fig, others, files, words):
    """(file, line index) for a figure without a pin: of the lines of its
    cited files that hold it, one that writes it as the page does ("0.81x",
    not 0.810), then the one that holds the most of the other figures of
    its row or line of text, then shares the most of that line's WORDS (a
    run's name, a mode, a link), then lies closest to a line holding one
    of those figures; else the first"""
    best = None
    words = {w.lower() for w in words}
    for path in files:
        lines = lines_in(path) or []
        near = [holding(o, lines) for o in others]
        for i in holding(fig, lines):
            text = excerpt_full(path, i)
            shared = len(words & {w.lower() for w in WORD.findall(text)})
            d = min((abs(i - j) for n in near for j in n), default=10 ** 9)
            exact = re.search(r"(?<![\d.])" + re.escape(fig.text.replace(" ", "")) + r"(?![\d])",
                              text.replace(" ", "")) is not None
            score = (-exact, -sum(i in n for n in near), -shared, d)
            if best is None or score < best[0]:
                best = (score, path, i)
    return best and best[1:]


def pinned(fig, pin, files, root):
    """why a pin does not hold its figure, or None"""
    path = os.path.normpath(os.path.join(root, pin[0]))
    lines = lines_in(path)
    if path not in files:
        return f"is pinned to {pin[0]}, which its paragraph does not cite"
    if lines is None or not 1 <= pin[1] <= len(lines):
        return f"is pinned to {pin[0]}:{pin[1]}, which does not exist"
    if excerpt(path, pin[1] - 1) != pin[2]:
        return f"is pinned to {pin[0]}:{pin[1]}, which the key quotes as {pin[2]!r} but now " \
               f"reads {excerpt(path, pin[1] - 1)!r}"
    if not holding(fig, [lines[pin[1] - 1]]):
        return f"is not on the line it is pinned to, {pin[0]}:{pin[1]} ({pin[2]!r})"
    return None


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


def check_file(md, problems, key, results=RESULTS, root=ROOT, write=False):
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
                key.failed.add((rel, f.context))
                problems.append(f"{rel}:{f.line}: {f.text!r}: its paragraph cites no results "
                                "file (docs/results/...)")
            continue
        nums = [n for p in files for n in (numbers_in(p) or [])]
        names = ", ".join(os.path.relpath(p, root) for p in files)
        found = [f for f in figs if held(f, nums)]
        for f in figs:
            if f not in found:
                key.failed.add((rel, f.context))
                problems.append(f"{rel}:{f.line}: {f.text!r} is not in {names}")
        for line in sorted({f.line for f in found}) if is_table else []:
            row = [f for f in found if f.line == line]
            for f in apart(row, files) if len(row) > 1 else []:
                problems.append(f"{rel}:{f.line}: {f.text!r}: no line of {names} holds it "
                                f"within {ROW_WINDOW} lines of another figure of its row")
        for f in figs:
            pin = key.take(rel, f)
            if f in found:
                check_pin(f, pin, [o for o in found if o.line == f.line and o is not f],
                          WORD.findall(lines[f.line - start]), files, rel, key, problems,
                          root, write)


def check_pin(f, pin, others, words, files, rel, key, problems, root, write):
    """the figure against its pin in the key; --write-key pins it anew
    where the pin is missing or no longer holds"""
    why = pinned(f, pin, files, root) if pin else \
        "has no pin in tests/docs/figures.key (a figure new or changed)"
    if why is None:
        key.keep(rel, f, os.path.normpath(os.path.join(root, pin[0])), pin[1] - 1)
        return
    found = pick(f, others, files, words)
    if not found:
        problems.append(f"{rel}:{f.line}: {f.text!r}: its cited files hold it, but no line "
                        "of them does (a checker's bug: held() and holding() disagree)")
        return
    path, i = found
    where = f"{os.path.relpath(path, root)}:{i + 1} ({excerpt(path, i)!r})"
    if write:
        key.keep(rel, f, path, i)
        key.picked.append(f"{rel}:{f.line}: {f.text!r} pinned to {where}")
    else:
        key.failed.add((rel, f.context))
        problems.append(f"{rel}:{f.line}: {f.text!r} {why}; if the figure is right, "
                        f"docs_figures.py --write-key pins it to {where}: check that it "
                        "comes from there")


SELF_DOC = """# A page

Measured: 243 ms a step, 1.05x the other ([the run](results/run.txt)).

| size | step | ratio |
|---|---|---|
| 1 | 7.46 MB | 1.05 |

A bucket of 25 MiB on 1 Gbit/s links, 1 MiB first.
"""
SELF_RESULTS = "step median 243.31 ms, ratio 1.05; sent 7455416 B\n" + "\n" * 50 + \
    "other 9.99, 244.2 ms\n"


def self_test():
    """the checker on a page of its own: right as written, and failing when
    a figure is changed (to a number its file holds elsewhere too), a link
    is dropped or a cited file is missing"""
    import tempfile
    bad = []
    with tempfile.TemporaryDirectory() as t:
        os.makedirs(os.path.join(t, "docs", "results"))
        with open(os.path.join(t, "docs", "results", "run.txt"), "w") as f:
            f.write(SELF_RESULTS)
        page = os.path.join(t, "docs", "page.md")
        keyfile = os.path.join(t, "figures.key")
        with open(page, "w") as f:
            f.write(SELF_DOC)
        key = Key(keyfile, t)
        check_file(page, [], key, os.path.join(t, "docs", "results"), t, write=True)
        key.write()
        for what, text, want in (
                ("as written", SELF_DOC, 0),
                ("a figure changed", SELF_DOC.replace("243 ms", "245 ms"), 1),
                ("a figure changed to one its file holds elsewhere",
                 SELF_DOC.replace("243 ms", "244 ms"), 1),
                ("a table's figure changed", SELF_DOC.replace("7.46 MB", "7.47 MB"), 1),
                ("a ratio changed", SELF_DOC.replace("1.05x", "1.50x"), 1),
                ("a row's figure from far away in its file",
                 SELF_DOC.replace("| 1.05 |", "| 9.99 |"), 3),
                ("the link dropped", SELF_DOC.replace("([the run](results/run.txt))", ""), 4),
                ("a cited file missing", SELF_DOC.replace("run.txt", "gone.txt"), 5)):
            with open(page, "w") as f:
                f.write(text)
            problems = []
            _file_numbers.clear()
            _file_text.clear()
            key = Key(keyfile, t)
            check_file(page, problems, key, os.path.join(t, "docs", "results"), t)
            problems += key.stale({"docs/page.md"})
            if len(problems) != want:
                bad.append(f"self-test, {what}: {len(problems)} problem(s), want {want}: "
                           f"{problems}")
    _file_numbers.clear()
    _file_text.clear()
    return bad


def main(args):
    write = "--write-key" in args
    paths = [a for a in args if a != "--write-key"]
    if write and paths:
        print("docs_figures: --write-key pins the figures of every page; give no pages with it")
        return 2
    problems = self_test()
    if not paths:
        paths = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(
            os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    key = Key(KEY, ROOT)
    problems += key.bad
    for md in paths:
        check_file(os.path.abspath(md), problems, key, write=write)
    if write:
        key.write()
        for p in key.picked:
            print("pinned:", p)
        print(f"docs_figures: {len(key.rows)} pins written to {os.path.relpath(KEY, ROOT)}, "
              f"{len(key.picked)} of them new: check that each new one names the line its "
              "figure comes from")
    else:
        problems += key.stale({os.path.relpath(os.path.abspath(md), ROOT) for md in paths})
    for p in problems:
        print("FAIL:", p)
    print(f"docs_figures: {len(paths)} files, {len(problems)} figure(s) failing")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
