"""lab_report.py: what a lab of tools/lab.py leaves in its directory, from
its table, its chart and its notes: table.csv (the numbers, for a
spreadsheet or a test), table.md (the table as a course hands it in, and
the notes), chart.svg (drawn here, with nothing but the standard library,
so a student's machine needs no plotting package) and report.html (all of
it on one page, with links to the reports of the bench runs it made).

A table is a list of columns and a list of rows; a cell is a number, a
word, or None (not measured: empty in the CSV, "-" elsewhere). A chart is
a list of series, each a label and its (x, y) points; lines or bars."""
import csv
import html
import math
import os

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#17becf", "#bcbd22"]


def cell(v):
    """a cell as the tables show it: 3 significant figures, whole from 1000"""
    if v is None:
        return "-"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.3g}"
    return str(v)


def markdown(columns, rows):
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(out)


# ---- charts ----

def _ticks(lo, hi, log):
    """tick values over [lo, hi]: powers of ten (log), or about six round steps"""
    if log:
        a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        return [10.0 ** k for k in range(a, b + 1)]
    span = hi - lo or abs(hi) or 1.0
    step = 10 ** math.floor(math.log10(span / 5))
    for m in (1, 2, 5, 10):
        if span / (step * m) <= 6:
            step *= m
            break
    t, out = math.floor(lo / step) * step, []
    while t <= hi + step * 1e-9:
        out.append(t)
        t += step
    return out


def _tick_text(v):
    if v == 0:
        return "0"
    if abs(v) >= 1e6 or abs(v) < 1e-3:
        return f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-")
    return f"{v:g}"


def line_chart(title, xlabel, ylabel, series, logx=False, logy=False, ymin0=True, xticks=None):
    """series: [{"label", "points": [(x, y)], "dashed": bool, "markers": bool, "line": bool,
    "color"}]; xticks: the x axis' ticks (default: round steps, or powers of ten)"""
    W, H, x0, y0, x1, y1 = 820, 460, 80, 400, 600, 50
    pts = [(x, y) for s in series for x, y in s["points"]
           if x is not None and y is not None and (not logx or x > 0) and (not logy or y > 0)]
    if not pts:
        return _svg(W, H, title, ['<text x="80" y="80">nothing measured</text>'])
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    xlo, xhi = min(xs), max(xs)
    ylo, yhi = (min(ys), max(ys))
    if ymin0 and not logy:
        ylo = min(0.0, ylo)
    if xlo == xhi:
        xlo, xhi = (xlo / 2, xhi * 2) if logx else (xlo - 1, xhi + 1)
    if ylo == yhi:
        ylo, yhi = (ylo / 2, yhi * 2) if logy else (ylo - 1, yhi + 1)
    if not logy:
        yhi *= 1.05
    xt, yt = xticks or _ticks(xlo, xhi, logx), _ticks(ylo, yhi, logy)
    xlo, xhi = min(xlo, xt[0]), max(xhi, xt[-1])
    ylo, yhi = min(ylo, yt[0]), max(yhi, yt[-1])
    f = (lambda v: math.log10(v)) if logx else (lambda v: v)
    g = (lambda v: math.log10(v)) if logy else (lambda v: v)

    def X(v):
        return x0 + (f(v) - f(xlo)) / ((f(xhi) - f(xlo)) or 1) * (x1 - x0)

    def Y(v):
        return y0 - (g(v) - g(ylo)) / ((g(yhi) - g(ylo)) or 1) * (y0 - y1)
    out = _axes(x0, y0, x1, y1, xlabel, ylabel, logx, logy)
    for v in xt:
        out.append(f'<line x1="{X(v):.1f}" y1="{y0}" x2="{X(v):.1f}" y2="{y0 + 5}" stroke="#000"/>'
                   + _text(X(v), y0 + 20, "middle", _tick_text(v)))
    out += [_grid(x0, x1, Y(v), v) for v in yt]
    for i, s in enumerate(series):
        col = s.get("color") or COLORS[i % len(COLORS)]
        p = [(X(x), Y(y)) for x, y in s["points"] if x is not None and y is not None and
             (not logx or x > 0) and (not logy or y > 0)]
        dash = ' stroke-dasharray="6,4"' if s.get("dashed") else ""
        if len(p) > 1 and s.get("line", True):
            out.append(f'<polyline points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in p)}" '
                       f'fill="none" stroke="{col}" stroke-width="2"{dash}/>')
        if s.get("markers", True):
            out += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="4" fill="{col}"/>' for a, b in p]
        out.append(_legend(x1 + 20, y1 + 20 * i, col, s["label"], s.get("dashed"),
                           dot=not s.get("line", True)))
    return _svg(W, H, title, out)


def bar_chart(title, ylabel, groups, series):
    """groups: the x labels; series: [{"label", "values": [one per group]}]"""
    W, H, x0, y0, x1, y1 = 820, 460, 80, 380, 600, 50
    vals = [v for s in series for v in s["values"] if v is not None]
    yhi = max(vals) * 1.05 if vals and max(vals) > 0 else 1.0
    yt = _ticks(0.0, yhi, False)
    yhi = max(yhi, yt[-1])

    def Y(v):
        return y0 - v / yhi * (y0 - y1)
    out = _axes(x0, y0, x1, y1, "", ylabel, False, False)
    out += [_grid(x0, x1, Y(v), v) for v in yt]
    n, m = len(groups), max(1, len(series))
    gw = (x1 - x0) / max(1, n)
    bw = gw * 0.8 / m
    for j, gname in enumerate(groups):
        gx = x0 + gw * j + gw * 0.1
        out.append(f'<text x="{x0 + gw * (j + 0.5):.1f}" y="{y0 + 18}" text-anchor="middle" '
                   f'font-size="11">{html.escape(str(gname))}</text>')
        for i, s in enumerate(series):
            v = s["values"][j]
            if v is None:
                continue
            col = s.get("color") or COLORS[i % len(COLORS)]
            out.append(f'<rect x="{gx + bw * i:.1f}" y="{Y(v):.1f}" width="{bw * 0.95:.1f}" '
                       f'height="{y0 - Y(v):.1f}" fill="{col}"><title>{html.escape(s["label"])}: '
                       f'{cell(v)}</title></rect>')
    for i, s in enumerate(series):
        out.append(_legend(x1 + 20, y1 + 20 * i, s.get("color") or COLORS[i % len(COLORS)],
                           s["label"]))
    return _svg(W, H, title, out)


def _axes(x0, y0, x1, y1, xlabel, ylabel, logx, logy):
    return [f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#000"/>',
            f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#000"/>',
            f'<text x="{(x0 + x1) / 2}" y="{y0 + 45}" text-anchor="middle">'
            f'{html.escape(xlabel)}{" (log scale)" if logx and xlabel else ""}</text>',
            f'<text x="20" y="{(y0 + y1) / 2}" text-anchor="middle" transform="rotate(-90 20 '
            f'{(y0 + y1) / 2})">{html.escape(ylabel)}{" (log scale)" if logy else ""}</text>']


def _text(x, y, anchor, text):
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{html.escape(text)}</text>'


def _grid(x0, x1, y, v):
    """a horizontal grid line at y and its value at the left"""
    return (f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#ddd"/>' +
            _text(x0 - 6, y + 4, "end", _tick_text(v)))


def _legend(x, y, col, label, dashed=False, dot=False):
    dash = ' stroke-dasharray="6,4"' if dashed else ""
    mark = (f'<circle cx="{x + 12}" cy="{y}" r="4" fill="{col}"/>' if dot else
            f'<line x1="{x}" y1="{y}" x2="{x + 24}" y2="{y}" stroke="{col}" '
            f'stroke-width="3"{dash}/>')
    return f'{mark}<text x="{x + 30}" y="{y + 4}" font-size="12">{html.escape(label)}</text>'


def _svg(W, H, title, body):
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
            f'font-family="sans-serif" font-size="13">\n<rect width="{W}" height="{H}" '
            f'fill="#fff"/>\n<text x="{W / 2}" y="24" text-anchor="middle" font-size="15">'
            f'{html.escape(title)}</text>\n' + "\n".join(body) + "\n</svg>\n")


# ---- the lab's directory ----

def write(out, lab, columns, rows, chart, notes, runs, meta):
    """table.csv, table.md, chart.svg and report.html in out; runs: [(tag, dir)] of the bench
    runs (their own report.html linked); meta: [(what, text)] heading the page"""
    with open(os.path.join(out, "table.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if v is None or (isinstance(v, float) and not math.isfinite(v))
                        else (f"{v:.6g}" if isinstance(v, float) else v) for v in r])
    md = ([f"# {lab['title']}", ""] + [f"- {k}: {v}" for k, v in meta] +
          ["", markdown(columns, rows), ""])
    md += [f"- {n}" for n in notes]
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(out, "chart.svg"), "w") as f:
        f.write(chart)
    e = html.escape
    head = "".join(f"<li>{e(k)}: {e(str(v))}</li>" for k, v in meta)
    table = ("<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in columns) + "</tr>" +
             "".join("<tr>" + "".join(f"<td>{e(cell(v))}</td>" for v in r) + "</tr>" for r in rows)
             + "</table>")
    links = "".join(f'<li><a href="{e(os.path.relpath(d, out))}/report.html">{e(t)}</a></li>'
                    for t, d in runs if os.path.exists(os.path.join(d, "report.html")))
    page = (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{e(lab['title'])}</title>"
            "<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto}"
            "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;"
            "text-align:right}th{background:#eee}</style></head><body>"
            f"<h1>{e(lab['title'])}</h1><ul>{head}</ul><h2>Table</h2>{table}"
            + (f"<ul>{''.join(f'<li>{e(n)}</li>' for n in notes)}</ul>" if notes else "")
            + f"<h2>Chart</h2>{chart}<p>What to observe and the questions: "
            f"<code>docs/labs/{e(lab['name'])}.md</code>.</p>"
            + (f"<h2>The bench runs</h2><ul>{links}</ul>" if links else "") + "</body></html>\n")
    with open(os.path.join(out, "report.html"), "w") as f:
        f.write(page)
