#!/usr/bin/python3
"""Checks `lstream report`'s output against an independent computation.

  report_check.py OUT_DIR PREDICTIONS.csv... [--season M] [--kind next|eval]
                  [--plots N]

Reads the predictions files with Python's csv module, computes every
measure of the report (train/eval.h) with numpy, and compares them with
OUT_DIR/overall.csv and OUT_DIR/series.csv, number by number, to 1e-9
relative. Then reads back the PNGs (a PNG decoder of its own on zlib):
each of the expected size, its plot area holding at least N pixels of the
forecast's colour (the lines or bars drawn), and index.html naming each.
Prints what it checked; exits 1 on the first difference.
"""
import argparse
import csv
import math
import os
import struct
import sys
import zlib

import numpy as np

# Double sums taken in other orders (numpy's pairwise sums, the report's
# sequential ones) differ by a few units in the last place, ~1e-16 relative:
# 1e-9 leaves room for that and nothing else.
REL = 1e-9
ABS = 1e-12


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def read_rows(paths, kind_wanted):
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            r = csv.reader(f)
            head = next(r)
            targets = [c[len("forecast_"):] for c in head if c.startswith("forecast_")]
            col = {c: i for i, c in enumerate(head)}
            for rec in r:
                rows.append((rec[col["kind"]], rec[col["series"]], int(rec[col["h"]]) if "h" in col else 1,
                             int(rec[col["offset"]]), int(rec[col["time"]]),
                             [float(rec[col["forecast_" + t]]) for t in targets],
                             [rec[col["actual_" + t]] for t in targets]))
    kinds = {row[0] for row in rows}
    kind = kind_wanted if kind_wanted != "auto" else ("next" if "next" in kinds else "eval")
    kept = [r for r in rows if r[0] == kind and all(a != "" for a in r[6])]
    return targets, [(s, h, o, t, f, [float(a) for a in y]) for _, s, h, o, t, f, y in kept]


def stats(e, f, y, naive, snaive):
    """The measures of errors e, forecasts f, actuals y (arrays) with the
    naive and seasonal naive absolute errors of their rows."""
    out = {"n": len(e)}
    if len(e) == 0:
        return out
    out["mae"] = np.mean(np.abs(e))
    out["rmse"] = math.sqrt(np.mean(e * e))
    out["bias"] = np.mean(f - y)
    den = np.abs(f) + np.abs(y)
    out["smape"] = np.mean(np.where(den > 0, 200.0 * np.abs(e) / np.where(den > 0, den, 1), 0.0))
    if len(naive):
        out["naive_mae"] = np.mean(naive)
        out["mase"] = out["mae"] / out["naive_mae"] if out["naive_mae"] > 0 else None
    if len(snaive):
        m = np.mean(snaive)
        out["mase_seasonal"] = out["mae"] / m if m > 0 else None
    return out


def compute(targets, rows, season):
    times = np.array([r[3] for r in rows], dtype=np.int64)
    t0, t1 = int(times.min()), int(times.max())
    cut = t0 + 0.8 * (t1 - t0)
    by = {}
    for r in rows:
        by.setdefault((r[0], r[1]), []).append(r)
    series, overall = {}, {}
    for (s, h), rs in sorted(by.items()):
        rs.sort(key=lambda r: r[2])
        tm = np.array([r[3] for r in rs])
        for j, t in enumerate(targets):
            f = np.array([r[4][j] for r in rs])
            y = np.array([r[5][j] for r in rs])
            e = y - f
            naive = np.concatenate([[np.nan], np.abs(y[1:] - y[:-1])])
            snaive = np.full(len(y), np.nan)
            if season > 0 and len(y) > season:
                snaive[season:] = np.abs(y[season:] - y[:-season])
            for period, sel in (("all", np.ones(len(rs), bool)), ("final", tm > cut)):
                nv, sv = naive[sel], snaive[sel]
                series[(s, t, h, period)] = stats(e[sel], f[sel], y[sel], nv[~np.isnan(nv)],
                                                  sv[~np.isnan(sv)])
                acc = overall.setdefault((t, h, period), [[], [], [], [], [], []])
                acc[0].append(e[sel]), acc[1].append(f[sel]), acc[2].append(y[sel])
                acc[3].append(nv[~np.isnan(nv)]), acc[4].append(sv[~np.isnan(sv)])
                acc[5].append(series[(s, t, h, period)])
    result = {}
    for key, (es, fs, ys, ns, ss, per) in overall.items():
        st = stats(np.concatenate(es), np.concatenate(fs), np.concatenate(ys), np.concatenate(ns),
                   np.concatenate(ss))
        for m in ("mase", "mase_seasonal"):
            vals = [p[m] for p in per if p.get(m) is not None]
            st[m] = np.mean(vals) if vals else None
        result[key] = st
    return series, result


def close(a, b):
    return abs(a - b) <= max(REL * max(abs(a), abs(b)), ABS)


def compare(name, mine, table, keys):
    checked = 0
    with open(table, newline="") as f:
        r = csv.DictReader(f)
        seen = set()
        for rec in r:
            key = tuple(int(rec[k]) if k == "h" else rec[k] for k in keys)
            if key not in mine:
                fail(f"{name}: {key} is in the report, not in the independent computation")
            seen.add(key)
            want = mine[key]
            if int(rec["n"]) != want["n"]:
                fail(f"{name} {key}: n {rec['n']}, expected {want['n']}")
            for m in ("mae", "rmse", "mase", "mase_seasonal", "smape", "bias", "naive_mae"):
                got, exp = rec[m], want.get(m)
                if exp is None or (isinstance(exp, float) and math.isnan(exp)):
                    if got != "":
                        fail(f"{name} {key}: {m} {got}, expected none")
                    continue
                if got == "" or not close(float(got), float(exp)):
                    fail(f"{name} {key}: {m} {got!r}, expected {exp!r}")
                checked += 1
        missing = set(mine) - seen
        if missing:
            fail(f"{name}: {len(missing)} groups missing, e.g. {sorted(missing)[0]}")
    return checked


# ---------------------------------------------------------------------------
# PNG

def read_png(path):
    """(width, height, rows of RGB bytes) of an 8-bit RGB or RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path}: not a PNG")
    at, idat, w = 8, b"", 0
    while at < len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            if depth != 8 or ctype not in (2, 6):
                fail(f"{path}: depth {depth}, colour type {ctype}: not 8-bit RGB(A)")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        at += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        ft, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if ft == 1:
                line[x] = (line[x] + a) & 255
            elif ft == 2:
                line[x] = (line[x] + b) & 255
            elif ft == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line[i] for i in range(stride) if bpp == 3 or i % 4 != 3))
        prev = line
    return w, h, rows


def blue_pixels(rows, box):
    """Pixels inside box (x0, y0, x1, y1) near the forecast's colour
    (31, 120, 181; lighter where bars are translucent)."""
    x0, y0, x1, y1 = box
    n = 0
    for y in range(y0, y1):
        r = rows[y]
        for x in range(x0, x1):
            R, G, B = r[3 * x], r[3 * x + 1], r[3 * x + 2]
            n += B > 150 and R < 140 and B - R > 60
    return n


def check_plots(out, want_pixels):
    with open(os.path.join(out, "index.html")) as f:
        page = f.read()
    pngs = sorted(p for p in os.listdir(out) if p.endswith(".png"))
    if len(pngs) < 3:
        fail(f"{out}: {len(pngs)} plots, expected the series', ratio.png and errors.png")
    for p in pngs:
        w, h, rows = read_png(os.path.join(out, p))
        if (w, h) != (900, 420):
            fail(f"{p}: {w}x{h}, expected 900x420")
        # The plot area (train/eval_plot.c's margins), its frame left out.
        n = blue_pixels(rows, (80, 64, 874, 360))
        if n < want_pixels:
            fail(f"{p}: {n} pixels of the forecast's colour in the plot area, expected >= "
                 f"{want_pixels}: nothing drawn?")
        if f'src="{p}"' not in page:
            fail(f"index.html does not show {p}")
        print(f"report_check: {p} {w}x{h}, {n} forecast-coloured pixels in the plot area")
    return len(pngs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--season", type=int, default=24)
    ap.add_argument("--kind", default="auto")
    ap.add_argument("--plots", type=int, default=300, help="forecast-coloured pixels a plot needs")
    a = ap.parse_args()
    targets, rows = read_rows(a.files, a.kind)
    series, overall = compute(targets, rows, a.season)
    n1 = compare("overall.csv", overall, os.path.join(a.out, "overall.csv"),
                 ("target", "h", "period"))
    n2 = compare("series.csv", series, os.path.join(a.out, "series.csv"),
                 ("series", "target", "h", "period"))
    print(f"report_check: {len(rows)} forecasts, {len(series) // 2} series-target groups: "
          f"{n1} overall and {n2} per-series figures equal numpy's to {REL}")
    if a.plots > 0:
        check_plots(a.out, a.plots)


if __name__ == "__main__":
    main()
