"""compress_lib.py: what the scripts next to it share (docs/compression.md's
measurements): one bench run with a time limit, named in every error; its
report.json and the --compress forecast it printed; the run's lines kept in
the results file as bench printed them; and the figures written as
docs/compression.md writes them (ms, bytes, a median beside its runs).

Not a program: compress_table.py, compress_profiles.py and
knobs_time_to_target.py import it (compress_forecast_hosts.py too, for the
header and the run)."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import results_header  # noqa: E402  (the results files' first lines, the rule of issue 46)

BENCH = os.path.join(ROOT, "build", "bench", "bench")
# one BLAS thread per rank, as every original sitting ran (with --threads 1)
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1")

# the links of docs/compression.md: (its name in the tables, bench's flags at world 2)
LINKS = {
    "lo": ("loopback", ["--link", "none"]),
    "1g": ("1 Gbit/s", ["--hosts", "2", "--link", "1gbit"]),
    "100m": ("100 Mbit/s", ["--hosts", "2", "--link", "100mbit"]),
}

# bench's forecast (bench/cli/compress_forecast.c), before the runs and beside them after
FORECAST = re.compile(r"^  (?:ring|ps) world \d+, .*, buckets \S+ MiB: (should pay|should not pay|"
                      r"about even \(within 5%\)) on these links: step ([\d.]+) ms uncompressed, "
                      r"([\d.]+) ms with \S+ \(model\)$")
DETAIL = re.compile(r"^    gradient bytes per step ")
BESIDE = re.compile(r"^  (?:ring|ps) world \d+, .*, buckets \S+ MiB: model [\d.]+ ms \(.*\), "
                    r"measured [\d.]+ ms \([\d.]+x the model\)$")
RUNLINE = re.compile(r"^run \d+ of \d+: .* samples/s, step median .* ms")



def parse(doc, script, name, quick_help, rounds=True, out_help="bench's reports"):
    """the scripts' one command line: [--rounds N] --bench --out --results --quick --allow-dirty"""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    if rounds:
        ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bench", default=BENCH)
    ap.add_argument("--out", help=out_help + " [results/<time>-" + name + "]")
    ap.add_argument("--results", help="the results file [docs/results/compression/<date>-" +
                    name + ".txt]")
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("--allow-dirty", action="store_true")
    a = ap.parse_args()
    if rounds and a.rounds < 1:
        fail(script, f"--rounds {a.rounds}: at least 1")
    return a

def fail(script, msg):
    sys.exit(f"{script}: {msg}")


def need_root(script, links):
    """emulated hosts (--hosts) are network namespaces: root only"""
    if any("--hosts" in LINKS[k][1] for k in links) and os.geteuid() != 0:
        fail(script, "needs root: bench --hosts makes network namespaces (emulated hosts)")


def header(script, bench, allow_dirty):
    """tools/results_header.py's lines, with the command as it was typed"""
    cmd = os.path.relpath(os.path.join(HERE, script), ROOT) + "".join(" " + a for a in sys.argv[1:])
    return results_header.lines(cmd, bench, allow_dirty)


def out_dir(arg, name):
    """where bench's reports go: results/ (ignored by git) unless --out says"""
    d = arg or os.path.join(ROOT, "results", time.strftime("%Y%m%d-%H%M%S-") + name)
    os.makedirs(d, exist_ok=True)
    return d


def results_path(arg, head, name, quick):
    """docs/results/compression/<date>-<name>.txt, the header's date; a --quick
    trial goes to the temporary folder (never a file to commit), --results
    anywhere"""
    if arg:
        return os.path.abspath(arg)
    date = head[3].split(": ", 1)[1][:10]
    if quick:
        return os.path.join(tempfile.gettempdir(), f"{date}-{name}-quick.txt")
    return os.path.join(HERE, f"{date}-{name}.txt")


def rel(path):
    """a path as the repository's root sees it, where it lies under it"""
    path = os.path.abspath(path)
    return os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path


def write(script, path, lines):
    results_header.write(path, "\n".join(lines) + "\n")
    print(f"{script}: wrote {rel(path)}", file=sys.stderr)


class Run:
    """one bench run: its stdout and stderr, and report.json's single run"""

    def __init__(self, name, argv, stdout, stderr, report):
        self.name, self.argv, self.stdout, self.stderr = name, argv, stdout, stderr
        self.r = report

    def forecast(self):
        """(word, uncompressed ms, compressed ms) bench printed before the run,
        or None (--compress none prints none)"""
        for line in self.stdout.splitlines():
            m = FORECAST.match(line)
            if m:
                word = m.group(1).replace(" (within 5%)", "")
                return word, float(m.group(2)), float(m.group(3))
        return None

    def sent(self):
        """bytes rank 1 sent per measured step (ring: a rank's share; ps: the
        worker's pushes), as report.json counts them"""
        for p in self.r["per_rank"]:
            if p["rank"] == 1:
                return p["bytes_sent"]
        fail("compress_lib.py", f"{self.name}: report.json has no rank 1")

    def step_ms(self):
        return self.r["step_time_s_median"] * 1e3

    def lines(self):
        """what the results file keeps of the run: bench's own lines (its run
        line, the forecast before and beside), then report.json's figures"""
        kept = [line for line in self.stdout.splitlines()
                if RUNLINE.match(line) or FORECAST.match(line) or DETAIL.match(line) or
                BESIDE.match(line)]
        def g(key):  # a nullable figure of report.json
            v = self.r.get(key)
            return "null" if v is None else f"{v:.6g}"
        rep = (f"  report.json: step_time_s_median {g('step_time_s_median')} s; rank 1 bytes_sent "
               f"{self.sent():.0f} B per step; gradient_bytes {self.r['gradient_bytes']:.0f}")
        if "--target-loss" in self.argv:
            rep += (f"; target_loss {g('target_loss')}; time_to_target_s "
                    f"{g('time_to_target_s')}; final_loss {g('final_loss')}")
        return ["== " + self.name] + ["  " + line.strip() if RUNLINE.match(line) else line
                                      for line in kept] + [rep]


def run(script, name, argv, out, timeout):
    """bench ARGV --out OUT from the repository's root; a failure, a missing
    report or forecast (--compress other than none), or a run past TIMEOUT
    seconds stops the script, naming the run"""
    print(f"{script}: {name}", file=sys.stderr)
    try:
        r = subprocess.run(argv + ["--out", out], cwd=ROOT, env=ENV, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(script, f"{name} ran past {timeout} s and was stopped: {' '.join(argv)}")
    if r.returncode != 0:
        fail(script, f"{name} failed, exit {r.returncode}: {' '.join(argv)}\n"
             f"{r.stdout[-1500:]}{r.stderr[-1500:]}")
    try:
        with open(os.path.join(out, "report.json")) as f:
            runs = json.load(f)["runs"]
    except (OSError, ValueError, KeyError) as e:
        fail(script, f"{name}: no report.json in {out} ({e})")
    if len(runs) != 1:
        fail(script, f"{name}: report.json holds {len(runs)} runs, not 1")
    got = Run(name, argv, r.stdout, r.stderr, runs[0])
    knob = argv[argv.index("--compress") + 1] if "--compress" in argv else "none"
    if knob != "none" and (got.forecast() is None or
                           not any(BESIDE.match(x) for x in r.stdout.splitlines())):
        fail(script, f"{name}: bench printed no forecast before the run, or no measured step "
             f"beside it (its output: {out})")
    if got.r.get("step_time_s_median") is None:
        fail(script, f"{name}: report.json has no median step ({out})")
    return got


def rounds(script, n, cells, out, timeout):
    """every cell once a round, in CELLS' order, N rounds one after the
    other (interleaved, so that a slow minute falls on every cell); a cell
    is (its key, its name, bench's argv, its folder's name). Returns
    ({key: [Run, one a round]}, every run's kept lines, the load average
    before, the seconds taken)"""
    load0, t0 = os.getloadavg(), time.time()
    runs, every = {}, []
    for i in range(1, n + 1):
        for key, name, argv, folder in cells:
            r = run(script, f"round {i}, {name}", argv, os.path.join(out, slug(f"r{i}-{folder}")),
                    timeout)
            runs.setdefault(key, []).append(r)
            every += r.lines()
    return runs, every, load0, time.time() - t0


def slug(s):
    """a run's folder name: no colons"""
    return s.replace(":", "_")


def ms(x):
    """a step as the doc writes it: 13.2, 96.9, 382, 4017"""
    return f"{x:.1f}" if x < 100 else f"{x:.0f}"


def size(b):
    """bytes as the doc writes them: 4.51 MB, 901.2 kB"""
    return f"{b / 1e6:.2f} MB" if b >= 1e6 else f"{b / 1e3:.1f} kB"


def cell(values, fmt):
    """the median, then every run's value in order of size: 13.2 (10.3, 13.2, 14.1)"""
    med = fmt(statistics.median(values))
    return med if len(values) == 1 else f"{med} ({', '.join(fmt(v) for v in sorted(values))})"


def forecast_cell(runs):
    """the forecast's medians, uncompressed -> with the knob, and its word
    (each word with its count where the runs' words differ); empty for none"""
    fs = [r.forecast() for r in runs]
    if any(f is None for f in fs):
        return ""
    words = [f[0] for f in fs]
    word = words[0] if len(set(words)) == 1 else ", ".join(
        f"{w} ({words.count(w)} of {len(words)})" for w in sorted(set(words)))
    plain, comp = (statistics.median(f[i] for f in fs) for i in (1, 2))
    return f"{ms(plain)} → {ms(comp)} ms, {word}"
