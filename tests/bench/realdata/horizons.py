#!/usr/bin/python3
"""lstream's forecasts H records ahead and its quantiles, scored on real data
from its own predictions file (issue 25 item 5).

For each data set: written raw into the embedded broker (as run.py does),
`lstream train --until end --horizon H --quantiles L1,L2,.. --threads 1
--predictions-out FILE` with the default options otherwise, once per seed;
then FILE's `next` rows (one per series, source offset and h; columns read
by name: kind, series, time, h, forecast_J, q<level>_J) are scored against
the data set itself: the forecast made after a series' record i at horizon
h is of its record i + h (the file's actual column is left aside: it is
filled only where that record was known when the row was written). Scored:
the targets whose event time lies in the last fifth of the set's event time
(baselines.tail_start), per target feature and h = 1..H, pooled over the
series, in the data's units. Every baseline is scored on exactly the
targets lstream has a row for.

Baselines at horizon h, from x[:i + 1] only (x[i] the record the forecast
follows):
  last value      x[i] for x[i + h]
  seasonal naive  x[i + h - kP], k = ceil(h / P), P the set's period (the
                  last value while that record does not exist; P = 1 is the
                  last value)
  AR(p) iterated  baselines.py's online AR(p) (p = max(5, P + 1), at most
                  64), fitted on the pairs whose target is at most i, then
                  iterated h steps on its own forecasts
  empirical q     (the intervals' baseline) x[i] + the level's empirical
                  quantile (numpy's linear) of the last value's h-step errors
                  x[j] - x[j - h], j = i - W + 1 .. i (those known at i; W =
                  --error-window, 200: about 20 errors beyond each of the
                  0.1 and 0.9 quantiles, and a few days of hourly data or a
                  half-year of daily data, so the spread follows the series'
                  drift); a zero-width interval before any error is known

Printed per set and target, one row per h: the targets scored, lstream's
MSE (the seeds' median), each baseline's, lstream's ratio to the best of
them and which is best; with quantiles, the 80% interval's coverage (the
share of actual values within [q_lo, q_hi], the outermost levels, for
0.1,0.5,0.9 the 80% interval) of lstream (the seeds' median) and of the
empirical baseline, and per level lstream's mean pinball loss over the
baseline's (max(l (y - q), (l - 1) (y - q)), the seeds' median ratio);
then, per target, lstream's MSE over the last value's on the targets in
the forecast's training window (i mod T + h <= T, T = --window, 16: the
rows lstream's own summary scores) and on the others.
Marked '*': a figure that misses issue 25's acceptance on a set of 1,000
points or more (MSE over 1.00x the best baseline; coverage outside
0.77-0.83 for the 80% interval; pinball over 1.00x the baseline).

Usage: horizons.py [BUILD_DIR] [--sets a,b] [--seeds 1,2] [--horizon 12]
                   [--quantiles 0.1,0.5,0.9] [--error-window 200]
                   [--partitions N] [--keep DIR] [--from DIR] [--json FILE]
                   [--check] [--self-test] [-- extra lstream train options]
  --keep DIR   keep the predictions files (DIR/SET-seedN.csv)
  --from DIR   score the files --keep wrote, without running lstream
  --check      exit 1 when a figure misses the acceptance (above)
  --self-test  the scoring and the baselines on small synthetic series: no
               look-ahead (a forecast made at i does not change when the
               records after i do), the baselines' formulas, the file read by
               column name; no lstream, under a second (ctest
               realdata_horizons_selftest)
Default sets: taylor, tmy, glucose, weather, sunspots, treering, eustock,
msft, stocks (those of 1,000 points or more that load here).
Time: the nine default sets, seeds 1 and 2, about 4 minutes on 2 shared
cores (training about 1, scoring the files about 3; glucose's 627,000 rows
a seed the longest).
"""
import argparse
import csv
import json
import math
import os
import shutil
import sys
import tempfile

import numpy as np

import baselines
import datasets

DEFAULT_SETS = ["taylor", "tmy", "glucose", "weather", "sunspots", "treering", "eustock",
                "msft", "stocks"]
METHODS = ["last", "seasonal", "ar"]
NAMES = {"last": "last value", "seasonal": "seasonal", "ar": "AR(p) it."}


# --------------------------------------------------------------------------
# Baselines per horizon

def seasonal_h(x, P, H):
    """[n, H]: x[i + h - kP], k = ceil(h / P), else x[i]."""
    n = len(x)
    f = np.repeat(np.asarray(x, np.float64)[:, None], H, 1)
    if P > 1:
        for h in range(1, H + 1):
            back = math.ceil(h / P) * P - h  # i + h - kP = i - back
            src = np.arange(n) - back
            ok = src >= 0
            f[ok, h - 1] = x[src[ok]]
    return f


def empirical_q(x, H, levels, W):
    """[n, H, len(levels)]: x[i] + the empirical quantiles of the last value's
    h-step errors x[j] - x[j - h], j in (i - W, i] and j >= h."""
    x = np.asarray(x, np.float64)
    n = len(x)
    lv = np.asarray(levels, np.float64)
    out = np.repeat(np.repeat(x[:, None, None], H, 1), len(lv), 2)
    for h in range(1, H + 1):
        if n <= h:
            continue
        e = x[h:] - x[:-h]  # e[j - h] = x[j] - x[j - h]
        # Origins i = h .. h + W - 2: the errors j = h .. i (fewer than W).
        for i in range(h, min(n, h + W - 1)):
            out[i, h - 1] = x[i] + np.quantile(e[:i - h + 1], lv)
        if len(e) >= W:  # origins i >= h + W - 1: the window j = i - W + 1 .. i
            win = np.lib.stride_tricks.sliding_window_view(e, W)
            for a in range(0, len(win), 8192):
                q = np.quantile(win[a:a + 8192], lv, axis=1).T  # [rows, levels]
                i0 = h + W - 1 + a
                out[i0:i0 + len(q), h - 1] = x[i0:i0 + len(q), None] + q
    return out


def baseline_forecasts(ds, H, levels, W):
    """key -> {method: [n, H, targets]}, and 'q': [n, H, levels, targets]."""
    p = baselines.ar_order(ds)
    res = {}
    for k, (t, v) in ds.series.items():
        cols = {m: [] for m in METHODS + ["q"]}
        for f in ds.targets:
            x = v[:, f].astype(np.float64)
            cols["last"].append(np.repeat(x[:, None], H, 1))
            cols["seasonal"].append(seasonal_h(x, ds.period, H))
            cols["ar"].append(baselines.forecast_ar_iterated(x, p, H))
            if levels:
                cols["q"].append(empirical_q(x, H, levels, W))
        res[k] = {m: np.stack(c, -1) for m, c in cols.items() if c}
    return res


# --------------------------------------------------------------------------
# lstream's predictions file

def read_predictions(path, ds, H, levels):
    """key -> (F [n, H, targets], Q [n, H, levels, targets]) from a
    --predictions-out file's next rows, NaN where there is none; the origin
    i found by the row's event time in the series (exact)."""
    nt, nq = len(ds.targets), len(levels)
    out = {k: (np.full((len(t), H, nt), np.nan), np.full((len(t), H, max(nq, 1), nt), np.nan))
           for k, (t, v) in ds.series.items()}
    with open(path, newline="") as fh:
        rd = csv.reader(fh)
        head = next(rd)
        col = {c: j for j, c in enumerate(head)}
        jk, js, jt = col["kind"], col["series"], col["time"]
        jh = col.get("h")
        jf = [col["forecast_%d" % f] for f in ds.targets]
        jq = [[col["q%s_%d" % (lv, f)] for f in ds.targets] for lv in levels]
        for r in rd:
            if r[jk] != "next" or r[js] not in out:
                continue
            h = int(r[jh]) if jh is not None else 1
            if h > H:
                continue
            t = ds.series[r[js]][0]
            tm = int(r[jt])
            i = int(np.searchsorted(t, tm))
            if i >= len(t) or t[i] != tm:
                raise ValueError("%s: a row of series %s at time %d: no such record" %
                                 (path, r[js], tm))
            F, Q = out[r[js]]
            F[i, h - 1] = [float(r[j]) for j in jf]
            for a in range(nq):
                Q[i, h - 1, a] = [float(r[j]) for j in jq[a]]
    return out


# --------------------------------------------------------------------------
# Scoring

def targets_mask(t, H, cut):
    """[n, H]: origin i's target at h exists and its time is past cut."""
    n = len(t)
    m = np.zeros((n, H), bool)
    for h in range(1, H + 1):
        m[:n - h, h - 1] = t[h:] > cut
    return m


def actuals(x, H):
    n = len(x)
    y = np.full((n, H), np.nan)
    for h in range(1, H + 1):
        y[:n - h, h - 1] = x[h:]
    return y


def pinball(y, q, level):
    d = y - q
    return np.maximum(level * d, (level - 1) * d)


def score(ds, pred, base, H, levels, T=16):
    """{target feature name: {h: figures}} over the last fifth, on the
    targets lstream has a forecast for (missing: those it has none for).
    in_window / beyond: lstream's MSE over the last value's on the targets
    that lie in the forecast's training window (windows of T records from
    each series' first: i mod T + h <= T, the rows lstream's summary scores
    at h) and on the others."""
    cut = baselines.tail_start(ds)
    out = {}
    for j, f in enumerate(ds.targets):
        acc = {h: {"count": 0, "missing": 0, "lstream": 0.0, **{m: 0.0 for m in METHODS},
                   "cover": 0, "cover_b": 0, "pin": np.zeros(len(levels)),
                   "pin_b": np.zeros(len(levels)), "below": np.zeros(len(levels)),
                   "below_b": np.zeros(len(levels)), "win": np.zeros((2, 2))}
               for h in range(1, H + 1)}
        for k, (t, v) in ds.series.items():
            x = v[:, f].astype(np.float64)
            y = actuals(x, H)
            mask = targets_mask(t, H, cut)
            F, Q = pred[k]
            for h in range(1, H + 1):
                a = acc[h]
                m = mask[:, h - 1]
                fc = F[:, h - 1, j]
                have = m & np.isfinite(fc)
                a["missing"] += int((m & ~np.isfinite(fc)).sum())
                yy = y[have, h - 1]
                a["count"] += int(have.sum())
                a["lstream"] += float(((fc[have] - yy) ** 2).sum())
                inw = (np.arange(len(x)) % T + h <= T)[have]
                for w, sel in ((0, inw), (1, ~inw)):
                    a["win"][w, 0] += float(((fc[have][sel] - yy[sel]) ** 2).sum())
                    a["win"][w, 1] += float(((x[have][sel] - yy[sel]) ** 2).sum())
                for meth in METHODS:
                    a[meth] += float(((base[k][meth][have, h - 1, j] - yy) ** 2).sum())
                if levels:
                    ql = Q[have, h - 1, :, j]  # [rows, levels]
                    qb = base[k]["q"][have, h - 1, :, j]
                    a["cover"] += int(((yy >= ql[:, 0]) & (yy <= ql[:, -1])).sum())
                    a["cover_b"] += int(((yy >= qb[:, 0]) & (yy <= qb[:, -1])).sum())
                    for b, lv in enumerate(levels):
                        a["pin"][b] += float(pinball(yy, ql[:, b], lv).sum())
                        a["pin_b"][b] += float(pinball(yy, qb[:, b], lv).sum())
                        a["below"][b] += int((yy <= ql[:, b]).sum())
                        a["below_b"][b] += int((yy <= qb[:, b]).sum())
        res = {}
        for h, a in acc.items():
            c = max(a["count"], 1)
            r = {"count": a["count"], "missing": a["missing"], "lstream": a["lstream"] / c}
            for meth in METHODS:
                r[meth] = a[meth] / c
            r["best"] = min(METHODS, key=lambda meth: r[meth])
            r["in_window"], r["beyond"] = [w[0] / w[1] if w[1] > 0 else float("nan")
                                           for w in a["win"]]
            r["ratio"] = r["lstream"] / r[r["best"]] if r[r["best"]] > 0 else float("inf")
            if levels:
                r["coverage"] = a["cover"] / c
                r["coverage_b"] = a["cover_b"] / c
                r["pinball"] = (a["pin"] / c).tolist()
                r["pinball_b"] = (a["pin_b"] / c).tolist()
                r["pin_ratio"] = [p / pb if pb > 0 else float("inf")
                                  for p, pb in zip(r["pinball"], r["pinball_b"])]
                r["below"] = (a["below"] / c).tolist()
                r["below_b"] = (a["below_b"] / c).tolist()
            res[h] = r
        out[ds.features[f]] = res
    return out


def median_seed(per_seed, key, idx=None):
    """The seeds' median (of two seeds, their mean)."""
    return float(np.median([s[key] if idx is None else s[key][idx] for s in per_seed]))


def combine(per_seed_scores, levels):
    """The seeds' scores of one set into one: the seeds' median figures."""
    out = {}
    for feat in per_seed_scores[0]:
        out[feat] = {}
        for h in per_seed_scores[0][feat]:
            runs = [s[feat][h] for s in per_seed_scores]
            r = dict(runs[0])  # the baselines and counts: the same for every seed
            r["lstream"] = median_seed(runs, "lstream")
            r["ratio"] = median_seed(runs, "ratio")
            r["ratio_seeds"] = [x["ratio"] for x in runs]
            r["missing"] = max(x["missing"] for x in runs)
            r["in_window"] = median_seed(runs, "in_window")
            r["beyond"] = median_seed(runs, "beyond")
            if levels:
                r["coverage"] = median_seed(runs, "coverage")
                r["coverage_seeds"] = [x["coverage"] for x in runs]
                r["pin_ratio"] = [median_seed(runs, "pin_ratio", b) for b in range(len(levels))]
                r["below"] = [median_seed(runs, "below", b) for b in range(len(levels))]
            out[feat][h] = r
    return out


def misses(r, levels, long_set):
    """The acceptance's misses of one row (sets of 1,000 points or more)."""
    if not long_set:
        return set()
    bad = set()
    if not r["ratio"] <= 1.0:
        bad.add("ratio")
    eighty = levels and abs(levels[0] + levels[-1] - 1) < 1e-9 and \
        abs(levels[-1] - levels[0] - 0.8) < 1e-9
    if eighty:
        if not 0.77 <= r["coverage"] <= 0.83:
            bad.add("coverage")
    if levels:
        for b in range(len(levels)):
            if not r["pin_ratio"][b] <= 1.0:
                bad.add("pin%d" % b)
    return bad


def calibrated_outside(n, lo=0.77, hi=0.83, p=0.8):
    """The chance that an interval covering each actual value with
    probability p, independently, covers a share of n values outside
    [lo, hi] (exact binomial): what issue 25's coverage bound leaves to
    chance at a cell of n points (at 292, a fifth of a daily set's four
    years, about 0.2)."""
    if n <= 0:
        return 0.0
    # 1 - the band's terms: about 6% of the n + 1 (k near the band's edges
    # tested as k / n is, the same predicate as misses()).
    inside = 0.0
    for k in range(max(0, math.floor(lo * n) - 1), min(n, math.ceil(hi * n) + 1) + 1):
        if lo <= k / n <= hi:
            inside += math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) +
                               k * math.log(p) + (n - k) * math.log1p(-p))
    return max(0.0, 1.0 - inside)


def print_table(name, length, res, levels, seeds, W):
    long_set = length >= 1000
    for feat, rows in res.items():
        print("\n%s %s (%d points; seeds %s; the last fifth of event time; MSE in data units)" %
              (name, feat, length, ",".join(map(str, seeds))))
        head = "%3s %7s %11s %11s %11s %11s %7s %-10s" % (
            "h", "count", "lstream", NAMES["last"], NAMES["seasonal"], NAMES["ar"], "/best",
            "best")
        if levels:
            head += " %8s %8s  %s" % ("cov", "cov emp", "  ".join(
                "pin q%g/emp" % lv for lv in levels))
        print(head)
        for h, r in rows.items():
            bad = misses(r, levels, long_set)
            line = "%3d %7d %11.5g %11.5g %11.5g %11.5g %6.3f%s %-10s" % (
                h, r["count"], r["lstream"], r["last"], r["seasonal"], r["ar"], r["ratio"],
                "*" if "ratio" in bad else " ", NAMES[r["best"]])
            if levels:
                line += " %7.3f%s %8.3f  %s" % (
                    r["coverage"], "*" if "coverage" in bad else " ", r["coverage_b"],
                    "  ".join("%10.3f%s" % (p, "*" if "pin%d" % b in bad else " ")
                              for b, p in enumerate(r["pin_ratio"])))
            if r["missing"]:
                line += "  (%d targets without a forecast)" % r["missing"]
            print(line)
        print("lstream / last value, on the targets in their forecast's window (those "
              "lstream's summary scores) | beyond it: " + "  ".join(
                  "h%d %.3f|%.3f" % (h, r["in_window"], r["beyond"]) for h, r in rows.items()
                  if h in (1, 3, 6, 12)))
    if levels:
        print("cov: share of actual values in [q%g, q%g] (lstream, the seeds' median; emp: the "
              "empirical quantiles of the last %d h-step errors); pin: mean pinball loss over "
              "the empirical baseline's" % (levels[0], levels[-1], W))


# --------------------------------------------------------------------------
# Running lstream

def run_sets(lstream, sets, seeds, H, levels, parts, extra, keep):
    """Trains on each set, once per seed; yields (ds, [predictions file per seed])."""
    import produce
    import run
    opts = run.train_options(lstream)
    for o in ("--horizon", "--predictions-out") + (("--quantiles",) if levels else ()):
        if o not in opts:
            raise RuntimeError("this lstream has no %s" % o)
    with tempfile.TemporaryDirectory() as work:
        loaded = [datasets.load(s) for s in sets]
        broker = run.Broker(lstream, [("hz-" + ds.name, parts) for ds in loaded], work)
        try:
            for ds in loaded:
                produce.produce(broker.bootstrap, "hz-" + ds.name, ds, "f32", "time")
                files = []
                for s in seeds:
                    path = os.path.join(keep or work, "%s-seed%d.csv" % (ds.name, s))
                    if os.path.exists(path):
                        os.unlink(path)
                    args = ["--horizon", str(H), "--threads", "1", "--predictions-out", path]
                    if levels:
                        args += ["--quantiles", ",".join("%g" % lv for lv in levels)]
                    run._train_once(lstream, broker.bootstrap, ds, "hz-" + ds.name, "f32", opts,
                                    args + list(extra), s)
                    files.append(path)
                yield ds, files
        finally:
            broker.stop()


# --------------------------------------------------------------------------
# Self-test: no lstream

def _synthetic(n=400, P=7, seed=3):
    rng = np.random.default_rng(seed)
    x = np.zeros(n)
    for i in range(2, n):
        x[i] = 0.6 * x[i - 1] - 0.2 * x[i - 2] + 2 * math.sin(2 * math.pi * i / P) + rng.normal()
    return x + 50


def self_test():
    # At 20 points only 16 covered is within 77-83%: 1 - C(20, 16) .8^16 .2^4.
    assert abs(calibrated_outside(20) - (1 - math.comb(20, 16) * 0.8 ** 16 * 0.2 ** 4)) < 1e-12
    assert calibrated_outside(0) == 0.0 and calibrated_outside(20000) < 1e-6
    H, P, W, levels = 5, 7, 30, [0.1, 0.5, 0.9]
    x = _synthetic(P=P)
    n = len(x)
    p = 8

    def all_baselines(x):
        return (np.repeat(x[:, None], H, 1), seasonal_h(x, P, H),
                baselines.forecast_ar_iterated(x, p, H), empirical_q(x, H, levels, W))

    ref = all_baselines(x)
    # No look-ahead: the records after i changed, every forecast made at an
    # origin up to i is the same to the bit.
    rng = np.random.default_rng(7)
    for i in (0, 5, 20, 37, 150, 301, n - 2):
        y = x.copy()
        y[i + 1:] += rng.normal(0, 10, n - i - 1)
        for a, b, what in zip(ref, all_baselines(y), ("last", "seasonal", "AR", "empirical q")):
            assert np.array_equal(a[:i + 1], b[:i + 1]), "%s looks ahead at origin %d" % (what, i)
            if i < n - 2:
                assert not np.array_equal(a[i + 1:], b[i + 1:]), "%s ignores the data" % what
    last, seas, ar, eq = ref
    # The formulas, written out.
    for i in range(n):
        for h in range(1, H + 1):
            k = math.ceil(h / P)
            assert seas[i, h - 1] == (x[i + h - k * P] if i + h - k * P >= 0 else x[i])
            js = [j for j in range(max(h, i - W + 1), i + 1)]
            if js:
                e = np.array([x[j] - x[j - h] for j in js])
                assert np.allclose(eq[i, h - 1], x[i] + np.quantile(e, levels), rtol=0,
                                   atol=1e-9), (i, h)
            else:
                assert np.all(eq[i, h - 1] == x[i])
    assert np.all(seasonal_h(x, 1, H) == last)
    # Iterated AR: h = 1 is the one-step online AR; on a noiseless AR(1) the
    # h-step forecast is the recursion's.
    assert np.array_equal(ar[:-1, 0], baselines.forecast_ar(x, p)[1:])
    z = np.zeros(200)
    z[0] = 5
    for i in range(1, 200):
        z[i] = 0.9 * z[i - 1] + 1
    it = baselines.forecast_ar_iterated(z, 2, H)
    for i in (50, 100, 150):
        want = z[i]
        for h in range(1, H + 1):
            want = 0.9 * want + 1
            assert abs(it[i, h - 1] - want) < 1e-6, (i, h, it[i, h - 1], want)
    # The file: columns by name (in another order, with extra ones and an
    # eval row), forecasts made exact; scored on the last fifth.
    t = np.int64(1_000_000) + np.arange(n, dtype=np.int64) * 60000
    v = np.stack([x, x * 2], 1).astype(np.float32)
    ds = datasets.Dataset("syn", "test", "none", P, ["a", "b"], [1], {"s,1": (t, v)}, "")
    xs = v[:, 1].astype(np.float64)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "p.csv")
        with open(path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["kind", "series", "partition", "offset", "time", "step", "h",
                        "forecast_1", "q0.1_1", "q0.5_1", "q0.9_1", "actual_1", "extra"])
            for i in range(n):
                for h in range(1, H + 1):
                    y = xs[i + h] if i + h < n else 0.0
                    w.writerow(["next", "s,1", 0, i, t[i], 0, h, repr(y), repr(y - 1), repr(y),
                                repr(y + 1), "", "z"])
                    w.writerow(["eval", "s,1", 0, i, t[i], 0, h, "1e9", "0", "0", "0", "", ""])
        pred = read_predictions(path, ds, H, levels)
    base = baseline_forecasts(ds, H, levels, W)
    sc = score(ds, pred, base, H, levels)["b"]
    cut = baselines.tail_start(ds)
    for h in range(1, H + 1):
        r = sc[h]
        want = int((t[h:] > cut).sum())
        assert r["count"] == want and r["missing"] == 0, (h, r["count"], want)
        assert r["lstream"] == 0 and r["coverage"] == 1.0
        assert abs(r["pinball"][1]) < 1e-12 and abs(r["pinball"][0] - 0.1) < 1e-9
        m = t[h:] > cut
        assert abs(r["last"] - float(((xs[:-h][m] - xs[h:][m]) ** 2).mean())) < 1e-9
    print("horizons.py self-test: passed")
    return 0


# --------------------------------------------------------------------------

def main(argv):
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(usage=__doc__.split("Usage: ")[1].split("\n  --keep")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--sets", type=lambda v: v.split(","))
    ap.add_argument("--seeds", type=lambda v: [int(x) for x in v.split(",")], default=[1, 2])
    ap.add_argument("--horizon", type=int, default=12)
    ap.add_argument("--quantiles", default="0.1,0.5,0.9")
    ap.add_argument("--error-window", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--keep")
    ap.add_argument("--from", dest="src")
    ap.add_argument("--json")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--self-test", action="store_true")
    o = ap.parse_args(argv)
    if o.self_test:
        return self_test()
    build, sets, seeds, H, W = o.build, o.sets, o.seeds, o.horizon, o.error_window
    levels = [float(x) for x in o.quantiles.split(",")] if o.quantiles not in ("", "none") else []
    parts, keep, src, out, check = o.partitions, o.keep, o.src, o.json, o.check
    if sets is None:
        sets = [s for s in DEFAULT_SETS if _loads(s)]
    T = int(extra[extra.index("--window") + 1]) if "--window" in extra[:-1] else 16
    if keep:
        os.makedirs(keep, exist_ok=True)
    if src:
        def gen():
            for s in sets:
                yield datasets.load(s), [os.path.join(src, "%s-seed%d.csv" % (s, sd))
                                         for sd in seeds]
        runs = gen()
    else:
        lstream = os.path.abspath(os.path.join(build, "lstream"))
        if not os.access(lstream, os.X_OK):
            print("horizons.py: no lstream program at %s (build first)" % lstream,
                  file=sys.stderr)
            return 2
        runs = run_sets(lstream, sets, seeds, H, levels, parts, extra, keep)
    report, nbad = {}, 0
    cov_out, cov_cells, cov_chance = 0, 0, 0.0
    for ds, files in runs:
        base = baseline_forecasts(ds, H, levels, W)
        per = [score(ds, read_predictions(f, ds, H, levels), base, H, levels, T) for f in files]
        res = combine(per, levels)
        length = ds.shape()[1]
        print_table(ds.name, length, res, levels, seeds, W)
        sys.stdout.flush()
        nbad += sum(len(misses(r, levels, length >= 1000)) > 0
                    for rows in res.values() for r in rows.values())
        if length >= 1000 and levels and abs(levels[-1] - levels[0] - 0.8) < 1e-9:
            for rows in res.values():
                for r in rows.values():
                    cov_cells += 1
                    cov_out += "coverage" in misses(r, levels, True)
                    cov_chance += calibrated_outside(r["count"])
        report[ds.name] = {"length": length, "period": ds.period, "ar_p": baselines.ar_order(ds),
                           "seeds": seeds, "horizon": H, "levels": levels, "error_window": W,
                           "targets": {f: {str(h): r for h, r in rows.items()}
                                       for f, rows in res.items()}}
    if cov_cells:
        print("\ncoverage outside 77-83%%: %d of %d cells (sets of 1,000 points or more); an "
              "interval that covers 80%% of values, each independently, leaves %.1f outside "
              "by chance at these cells' counts (calibrated_outside)" %
              (cov_out, cov_cells, cov_chance))
    if out:
        json.dump(report, open(out, "w"), indent=1)
    if check:
        print("%d rows miss the acceptance" % nbad)
        return 1 if nbad else 0
    return 0


def _loads(name):
    try:
        datasets.load(name)
        return True
    except Exception as e:  # a PyPI set whose package is not installed here
        print("horizons.py: %s left out (%s)" % (name, str(e).splitlines()[0][:120]),
              file=sys.stderr)
        return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
