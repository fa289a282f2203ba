#!/usr/bin/python3
"""Classical baselines on exactly lstream's targets, and the scoring they share
with the simulation (simulate.py) and the harness (run.py).

Targets: every record of a series after its first; for each target feature,
the forecast of its next value made from the series' records before it.
Scores: MSE in the data's own units, pooled over the series, per target
feature, over the whole stream (prequential) and over the last fifth of
event time (records whose time is past t0 + 0.8 (t1 - t0), t0 and t1 the
data set's first and last event times).

Baselines, per series and target feature:
  last value      x[t+1] = x[t]
  seasonal naive  x[t+1] = x[t+1-P], P the data set's period (last value
                  while the series is shorter than P)
  AR(p)           x[t+1] = a0 + sum_j a_j x[t+1-j], j = 1..p, fitted by least
                  squares on every (lags, next value) pair seen so far, refit
                  after every record (normal equations accumulated in double
                  on the values minus the series' first value; ridge 1e-9 of
                  their mean diagonal); last value until 2 (p + 1) pairs
                  have been seen. p = max(5, P + 1), capped at 64: a fixed
                  rule, no peeking.

Usage: baselines.py [NAME ...]   (default: every set that loads); prints the
table, and with --json FILE writes it.
"""
import json
import sys

import numpy as np

import datasets


def ar_order(ds):
    return min(64, max(5, ds.period + 1))


def forecast_last(x):
    """x [n]: forecasts [n] of x[i] from x[:i]; [0] is NaN (no target)."""
    f = np.full(len(x), np.nan)
    f[1:] = x[:-1]
    return f


def forecast_seasonal(x, P):
    f = forecast_last(x)
    if P > 1 and len(x) > P:
        f[P:] = x[:-P]
    return f


def forecast_ar(x, p):
    """Online AR(p) with intercept, refit by least squares after every record."""
    x = np.asarray(x, np.float64)
    n = len(x)
    f = forecast_last(x)
    z = x - x[0]
    d = p + 1
    A = np.zeros((d, d))
    b = np.zeros(d)
    pairs = 0
    coef = None
    for i in range(1, n):
        # Forecast x[i] from x[:i] with the coefficients fitted on pairs < i.
        if coef is not None and i >= p:
            lags = np.concatenate([[1.0], z[i - 1::-1][:p]])
            f[i] = x[0] + lags @ coef
        # Then learn the pair (x[i-p..i-1] -> x[i]).
        if i >= p:
            lags = np.concatenate([[1.0], z[i - 1::-1][:p]])
            A += np.outer(lags, lags)
            b += lags * z[i]
            pairs += 1
            if pairs >= 2 * d:
                ridge = 1e-9 * np.trace(A) / d
                try:
                    coef = np.linalg.solve(A + ridge * np.eye(d), b)
                except np.linalg.LinAlgError:
                    coef = None
    return f


# --------------------------------------------------------------------------
# Scoring

def tail_start(ds):
    t0 = min(int(t[0]) for t, _ in ds.series.values())
    t1 = max(int(t[-1]) for t, _ in ds.series.values())
    return t0 + 0.8 * (t1 - t0)


def score(ds, forecasts):
    """forecasts: key -> [n, len(ds.targets)] forecasts of each target feature
    (row 0 ignored). Returns {feature: {"mse", "tail_mse", "count",
    "tail_count", "finite"}} in data units."""
    cut = tail_start(ds)
    out = {}
    for j, f in enumerate(ds.targets):
        se = tse = 0.0
        cnt = tcnt = 0
        finite = True
        for k, (t, v) in ds.series.items():
            y = v[1:, f].astype(np.float64)
            p = np.asarray(forecasts[k], np.float64).reshape(len(t), -1)[1:, j]
            finite &= bool(np.all(np.isfinite(p)))
            e = (p - y) ** 2
            se += float(e.sum())
            cnt += len(e)
            m = t[1:] > cut
            tse += float(e[m].sum())
            tcnt += int(m.sum())
        out[ds.features[f]] = {"mse": se / max(cnt, 1), "tail_mse": tse / max(tcnt, 1),
                               "count": cnt, "tail_count": tcnt, "finite": finite}
    return out


def baseline_forecasts(ds):
    """{"last": ..., "seasonal": ..., "ar": ...}, each key -> [n, targets]."""
    p = ar_order(ds)
    res = {"last": {}, "seasonal": {}, "ar": {}}
    for k, (t, v) in ds.series.items():
        cols = {m: [] for m in res}
        for f in ds.targets:
            x = v[:, f].astype(np.float64)
            cols["last"].append(forecast_last(x))
            cols["seasonal"].append(forecast_seasonal(x, ds.period))
            cols["ar"].append(forecast_ar(x, p))
        for m in res:
            res[m][k] = np.stack(cols[m], 1)
    return res


def baseline_scores(ds):
    fc = baseline_forecasts(ds)
    return {m: score(ds, fc[m]) for m in fc}


def table(names):
    rows = {}
    print("%-9s %-10s %6s %13s %13s %9s %9s   %9s %9s   (tail: last fifth of event time)" %
          ("data", "feature", "AR p", "last MSE", "tail last", "seas/last", "AR/last",
           "tail seas", "tail AR"))
    for n in names:
        ds = datasets.load(n)
        sc = baseline_scores(ds)
        rows[n] = {"ar_p": ar_order(ds), "period": ds.period, "scores": sc}
        for feat in sc["last"]:
            L, S, A = sc["last"][feat], sc["seasonal"][feat], sc["ar"][feat]
            print("%-9s %-10s %6d %13.6g %13.6g %9.3f %9.3f   %9.3f %9.3f" %
                  (n, feat, ar_order(ds), L["mse"], L["tail_mse"], S["mse"] / L["mse"],
                   A["mse"] / L["mse"], S["tail_mse"] / L["tail_mse"],
                   A["tail_mse"] / L["tail_mse"]))
    return rows


def main(argv):
    out = None
    if "--json" in argv:
        i = argv.index("--json")
        out = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    names = argv or list(datasets.LOADERS)
    rows = table(names)
    if out:
        json.dump(rows, open(out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
