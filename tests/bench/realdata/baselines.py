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
                  rule, no peeking. Iterated h steps on its own forecasts
                  (forecast_ar_iterated), the h-step baseline of horizons.py.
  AR-S            the same online least squares on lags 1..p and the
                  seasonal lags P, P+1, 2P, 2P+1 (those beyond p; none when
                  P <= 1), p in 1..min(48, P+1) chosen by BIC on the series'
                  records before the last fifth of event time (a fit on the
                  past only, as issue 24 asks)
  Holt-Winters    exponential smoothing (statsmodels, Debian's
                  python3-statsmodels): a damped additive trend, and an
                  additive or (positive series) multiplicative season of
                  period P (none when P <= 1 or the past holds under 2P
                  records), the better by SSE; parameters fitted on the
                  series' records before the last fifth of event time, then
                  run over the whole series with them: each forecast from
                  the records before it, the scored part never fitted on

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


def _ar_fits(x, lags):
    """The online least squares of AR on lags (with intercept), on z = x -
    x[0]: yields (i, coef) for i = max(lags) .. len(x), coef fitted on the
    pairs (x[j - lags] -> x[j]) of every j < i (None until 2 (len(lags) + 1)
    pairs have been seen), so coef at i uses x[:i] only."""
    x = np.asarray(x, np.float64)
    n, top = len(x), int(lags.max())
    z = x - x[0]
    d = len(lags) + 1
    A = np.zeros((d, d))
    b = np.zeros(d)
    pairs = 0
    coef = None
    for i in range(top, n):
        yield i, coef
        row = np.concatenate([[1.0], z[i - lags]])
        A += np.outer(row, row)
        b += row * z[i]
        pairs += 1
        if pairs >= 2 * d:
            ridge = 1e-9 * np.trace(A) / d
            try:
                coef = np.linalg.solve(A + ridge * np.eye(d), b)
            except np.linalg.LinAlgError:
                coef = None
    yield n, coef


def forecast_ar(x, p, lags=None):
    """Online AR with intercept on lags (default 1..p), refit by least
    squares after every record."""
    x = np.asarray(x, np.float64)
    lags = np.arange(1, p + 1) if lags is None else np.asarray(lags)
    f = forecast_last(x)
    z = x - x[0]
    # Forecast x[i] from x[:i] with the coefficients fitted on pairs < i
    # (then _ar_fits learns the pair (x[i - lags] -> x[i])).
    for i, coef in _ar_fits(x, lags):
        if coef is not None and i < len(x):
            row = np.concatenate([[1.0], z[i - lags]])
            f[i] = x[0] + row @ coef
    return f


def forecast_ar_iterated(x, p, H, lags=None):
    """The same online AR iterated H steps: [n, H], [i, h - 1] the forecast
    of x[i + h] from x[:i + 1] (the coefficients fitted on the pairs whose
    target is at most i, each later value the previous steps' forecast);
    the last value x[i] at every h until the fit exists. [i, 0] is
    forecast_ar's [i + 1], bit for bit."""
    x = np.asarray(x, np.float64)
    lags = np.arange(1, p + 1) if lags is None else np.asarray(lags)
    n, top = len(x), int(lags.max())
    f = np.repeat(x[:, None], H, 1)
    z = x - x[0]
    buf = np.empty(top + H)
    for j, coef in _ar_fits(x, lags):
        i = j - 1  # the origin: x[:j] known
        if coef is None:
            continue
        buf[:top] = z[j - top:j]
        for s in range(H):
            row = np.concatenate([[1.0], buf[top + s - lags]])
            buf[top + s] = row @ coef
        f[i] = x[0] + buf[top:]
    return f


def seasonal_lags(p, P):
    extra = [k for k in (P, P + 1, 2 * P, 2 * P + 1) if P > 1 and k > p]
    return np.array(list(range(1, p + 1)) + extra)


def ars_order(x, P):
    """p of AR-S by BIC on x (a series' past): least squares in one fit."""
    x = np.asarray(x, np.float64)
    best, best_p = None, 1
    for p in range(1, min(48, max(P, 1) + 1) + 1):
        lags = seasonal_lags(p, P)
        top = int(lags.max())
        if len(x) - top < 4 * (len(lags) + 1):
            break
        X = np.stack([np.ones(len(x) - top)] + [x[top - k:len(x) - k] for k in lags], 1)
        y = x[top:]
        coef, *_ = np.linalg.lstsq(X, y, rcond=None)
        sse = float(((y - X @ coef) ** 2).sum())
        m = len(y)
        bic = m * np.log(max(sse / m, 1e-300)) + X.shape[1] * np.log(m)
        if best is None or bic < best:
            best, best_p = bic, p
    return best_p


def forecast_hw(x, P, n_fit):
    """Holt-Winters fitted on x[:n_fit], run over x with those parameters."""
    import warnings
    from statsmodels.tsa.holtwinters import ExponentialSmoothing
    x = np.asarray(x, np.float64)
    past = x[:n_fit]
    season = P if P > 1 and len(past) >= 2 * P + 2 else None
    kinds = ["add"] + (["mul"] if season and past.min() > 0 else []) if season else [None]
    best = None
    if len(past) < 10:
        return forecast_last(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in kinds:
            try:
                m = ExponentialSmoothing(past, trend="add", damped_trend=True, seasonal=k,
                                         seasonal_periods=season,
                                         initialization_method="estimated").fit()
            except (ValueError, np.linalg.LinAlgError):
                continue
            if best is None or m.sse < best[0]:
                best = (m.sse, k, m)
        if best is None:
            return forecast_last(x)
        _, k, m = best
        prm = m.params
        full = ExponentialSmoothing(
            x, trend="add", damped_trend=True, seasonal=k, seasonal_periods=season,
            initialization_method="known", initial_level=prm["initial_level"],
            initial_trend=prm["initial_trend"],
            initial_seasonal=prm["initial_seasons"] if k else None).fit(
                smoothing_level=prm["smoothing_level"], smoothing_trend=prm["smoothing_trend"],
                smoothing_seasonal=prm["smoothing_seasonal"] if k else None,
                damping_trend=prm["damping_trend"], optimized=False)
    f = forecast_last(x)
    fv = np.asarray(full.fittedvalues, np.float64)  # one step ahead, from the records before
    f[1:] = np.where(np.isfinite(fv[1:]), fv[1:], f[1:])
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


# The intervals' baseline (issue 25 item 5): the last value plus the
# empirical quantile of its own recent errors at that horizon.
QUANTILE_WINDOW = 200  # past errors per forecast (a rolling window)


def quantile_baseline(ds, levels, horizons, window=QUANTILE_WINDOW):
    """What a careful user does without a model: per series, target and
    horizon h, the forecast of x[t+h] at level l is x[t] plus the l
    quantile (numpy's linear) of the last `window` errors of the last value
    h records ahead whose actuals are known at t (x[s+h] - x[s], s + h <=
    t; at least 10). Returns {(feature index, h, level): {"coverage",
    "pinball", "count"}} over the targets past the last fifth's start
    (share of actuals at or below, mean pinball loss, data units)."""
    cut = tail_start(ds)
    acc = {}
    for t, v in ds.series.values():
        for f in ds.targets:
            x = v[:, f].astype(np.float64)
            for h in horizons:
                if len(x) <= h + 10:
                    continue
                e = x[h:] - x[:-h]  # e[i] = x[i+h] - x[i], known at time i + h
                ts = np.nonzero(t[h:] > cut)[0]  # forecasts after record i, target i + h
                ts = ts[ts - h + 1 >= 10]  # errors e[.. i - h] known: at least 10
                if len(ts) == 0:
                    continue
                lo = np.maximum(0, ts - h + 1 - window)
                for l in levels:
                    q = np.array([np.quantile(e[a:i - h + 1], l) for a, i in zip(lo, ts)])
                    fc, y = x[ts] + q, x[ts + h]
                    d = y - fc
                    a = acc.setdefault((f, h, l), [0.0, 0.0, 0])
                    a[0] += float((d <= 0).sum())
                    a[1] += float(np.maximum(l * d, (l - 1) * d).sum())
                    a[2] += len(ts)
    return {k: {"coverage": a[0] / a[2], "pinball": a[1] / a[2], "count": a[2]}
            for k, a in acc.items() if a[2] > 0}


# The classical methods, in the table's order.
METHODS = ["last", "seasonal", "ar", "ars", "hw"]


def baseline_forecasts(ds):
    """{method: key -> [n, targets]} for METHODS."""
    p = ar_order(ds)
    cut = tail_start(ds)
    res = {m: {} for m in METHODS}
    for k, (t, v) in ds.series.items():
        cols = {m: [] for m in res}
        n_fit = int((t <= cut).sum())
        for f in ds.targets:
            x = v[:, f].astype(np.float64)
            cols["last"].append(forecast_last(x))
            cols["seasonal"].append(forecast_seasonal(x, ds.period))
            cols["ar"].append(forecast_ar(x, p))
            cols["ars"].append(forecast_ar(x, 0, seasonal_lags(ars_order(x[:n_fit], ds.period),
                                                               ds.period)))
            cols["hw"].append(forecast_hw(x, ds.period, n_fit))
        for m in res:
            res[m][k] = np.stack(cols[m], 1)
    return res


def _cache_path(ds):
    """A file keyed by the data and this file's code: the baselines of a set
    are computed once (Holt-Winters and AR-S take seconds to a minute)."""
    import hashlib
    import os
    h = hashlib.sha256(open(__file__, "rb").read())
    for k, (t, v) in ds.series.items():
        h.update(k.encode()), h.update(np.ascontiguousarray(t).tobytes())
        h.update(np.ascontiguousarray(v).tobytes())
    h.update(repr((ds.period, ds.targets)).encode())
    root = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    return os.path.join(root, "lstream-realdata", "%s-%s.json" % (ds.name, h.hexdigest()[:16]))


def baseline_scores(ds):
    import os
    path = _cache_path(ds)
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        pass
    fc = baseline_forecasts(ds)
    sc = {m: score(ds, fc[m]) for m in fc}
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        json.dump(sc, open(path + ".tmp", "w"))
        os.replace(path + ".tmp", path)
    except OSError:
        pass
    return sc


def best_classical(B):
    """The method of least final MSE among METHODS, for one target's scores."""
    return min(METHODS, key=lambda m: B[m]["tail_mse"])


def table(names):
    rows = {}
    print("%-9s %-10s %6s %13s %13s %9s %9s   %9s %9s %9s %9s  (tail: last fifth of event "
          "time)" % ("data", "feature", "AR p", "last MSE", "tail last", "seas/last", "AR/last",
                     "tail seas", "tail AR", "tail AR-S", "tail HW"))
    for n in names:
        ds = datasets.load(n)
        sc = baseline_scores(ds)
        rows[n] = {"ar_p": ar_order(ds), "period": ds.period, "scores": sc}
        for feat in sc["last"]:
            L, S, A = sc["last"][feat], sc["seasonal"][feat], sc["ar"][feat]
            R, H = sc["ars"][feat], sc["hw"][feat]
            print("%-9s %-10s %6d %13.6g %13.6g %9.3f %9.3f   %9.3f %9.3f %9.3f %9.3f" %
                  (n, feat, ar_order(ds), L["mse"], L["tail_mse"], S["mse"] / L["mse"],
                   A["mse"] / L["mse"], S["tail_mse"] / L["tail_mse"],
                   A["tail_mse"] / L["tail_mse"], R["tail_mse"] / L["tail_mse"],
                   H["tail_mse"] / L["tail_mse"]))
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
