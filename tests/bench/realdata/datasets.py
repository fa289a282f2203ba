#!/usr/bin/python3
"""Real time series that packages ship offline, as lstream records.

Each data set is a `Dataset`: series (Kafka keys) of records (event time in
ms, F raw feature values as float32: no scaling, no differencing), the
features that are forecast (targets; the rest are covariates), and the
seasonal period used by the seasonal-naive baseline and by the AR(p) order
rule. Nothing is downloaded and no data file is in the repository: every
set is read from a package installed on this machine.

  source "debian": a Debian bookworm package (usable in CI)
    eustock    r-base-core (R's datasets::EuStockMarkets): daily closes of
               DAX, SMI, CAC, FTSE, 4 series x 1,860 business days, 1991-98
    sunspots   r-base-core (datasets::sunspot.month): monthly mean sunspot
               number 1749-2013, 1 series x 3,177
    treering   r-base-core (datasets::treering): yearly tree-ring width index,
               1 series x 7,980
    co2        r-base-core (datasets::co2): Mauna Loa CO2, monthly 1959-97,
               1 series x 468
    temps      python3-vega-datasets (seattle-temps.csv, sf-temps.csv): hourly
               temperatures (deg F) of 2010, 2 series x 8,759
  source "pypi": PyPI only (benchmarks outside CI)
    taylor     pmdarima (datasets/taylor.py): half-hourly electricity demand
               (MW), England and Wales, June-August 2000, 1 series x 4,032
    msft       pmdarima (datasets/data/msft.tar.gz): MSFT daily open, high,
               low, close, volume 1986-2017, 1 series x 7,983 x 5 features
               (volume around 1e7..1e9); target: the close

Usage as a program (for the producer and the harness):
  datasets.py list                 name, source, series, length, features
  datasets.py csv NAME [--order time|series]
                                   lines series,time_ms,v1,...,vF (the input
                                   of `lstream produce --csv`)

PyPI sets are found in the pmdarima package of any interpreter: import
pmdarima from this one, else $LSTREAM_PMDARIMA_DIR (its datasets/ folder),
else /work/venv-*/lib/python3*/site-packages/pmdarima/datasets.
"""
import ast
import csv
import datetime as dt
import glob
import io
import os
import subprocess
import sys
import tarfile

import numpy as np

VEGA_DIR = "/usr/lib/python3/dist-packages/vega_datasets/_data"


class Dataset:
    """series: dict key -> (times int64 [n] ms, values float32 [n, F])."""

    def __init__(self, name, source, package, period, features, targets, series, note):
        self.name, self.source, self.package = name, source, package
        self.period, self.features, self.targets = period, features, targets
        self.series, self.note = series, note

    @property
    def F(self):
        return len(self.features)

    def shape(self):
        lens = [len(t) for t, _ in self.series.values()]
        return len(lens), max(lens), self.F

    def records(self, order="time"):
        """(key, time_ms, values [F]) in event-time order across series (ties:
        series in key order), or series by series ('series': backfilled)."""
        keys = list(self.series)
        if order == "series":
            for k in keys:
                t, v = self.series[k]
                for i in range(len(t)):
                    yield k, int(t[i]), v[i]
            return
        if order != "time":
            raise ValueError("order must be 'time' or 'series'")
        rows = []
        for si, k in enumerate(keys):
            t, _ = self.series[k]
            rows.append(np.stack([t, np.full(len(t), si), np.arange(len(t))], 1))
        allr = np.concatenate(rows)
        allr = allr[np.lexsort((allr[:, 1], allr[:, 0]))]
        for t, si, i in allr:
            k = keys[si]
            yield k, int(t), self.series[k][1][i]


# --------------------------------------------------------------------------
# Sources

def _rscript(expr):
    try:
        out = subprocess.run(["Rscript", "-e", expr], check=True, capture_output=True, text=True)
    except FileNotFoundError:
        raise RuntimeError("Rscript not found: install the Debian package r-base-core")
    return out.stdout


def _r_ts(name, columns=None):
    """An R ts/mts from package datasets: (decimal-year times, values [n, k])."""
    expr = ("x <- datasets::%s; m <- as.matrix(x); "
            "write.csv(data.frame(t = as.numeric(time(x)), m), stdout(), row.names = FALSE)" % name)
    rows = list(csv.reader(io.StringIO(_rscript(expr))))
    head, body = rows[0], rows[1:]
    t = np.array([float(r[0]) for r in body])
    v = np.array([[float(c) for c in r[1:]] for r in body], dtype=np.float64)
    return t, v, [h.strip('"') for h in head[1:]]


# Kafka timestamps cannot be negative (and librdkafka reads 0 as "now"): a set
# that starts before 1970 is shifted to start on 2000-01-01, spacing kept.
SHIFT_TO_MS = 946684800000


def _year_ms(t):
    """Decimal years (R's time()) to ms since the epoch, 365.2425-day years;
    shifted to start on 2000-01-01 if the set starts before 1970."""
    ms = np.round((t - 1970.0) * 365.2425 * 86400000.0).astype(np.int64)
    return ms - ms[0] + SHIFT_TO_MS if ms[0] <= 0 else ms


def _pmdarima_dir():
    try:
        import pmdarima.datasets as pd_ds  # noqa: F401
        return os.path.dirname(pd_ds.__file__)
    except ImportError:
        pass
    env = os.environ.get("LSTREAM_PMDARIMA_DIR")
    if env and os.path.isdir(env):
        return env
    hits = sorted(glob.glob("/work/venv-*/lib/python3*/site-packages/pmdarima/datasets"))
    if hits:
        return hits[0]
    raise RuntimeError("pmdarima not found: pip install --no-deps pmdarima into a venv "
                       "and set LSTREAM_PMDARIMA_DIR to its pmdarima/datasets folder")


def _pmdarima_array(module):
    """The literal np.array([...]) in pmdarima/datasets/MODULE.py, read with ast
    (pmdarima itself, with its dependencies, need not import)."""
    path = os.path.join(_pmdarima_dir(), module + ".py")
    tree = ast.parse(open(path).read())
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "array"
                and node.args and isinstance(node.args[0], ast.List)):
            return np.array(ast.literal_eval(node.args[0]), dtype=np.float64)
    raise RuntimeError("no array literal in " + path)


def _ms(date):
    return int(date.replace(tzinfo=dt.timezone.utc).timestamp() * 1000)


def _one(key, t, v):
    return {key: (np.asarray(t, np.int64), np.asarray(v, np.float32).reshape(len(t), -1))}


# --------------------------------------------------------------------------
# Data sets

def load_eustock():
    t, v, names = _r_ts("EuStockMarkets")
    tm = _year_ms(t)
    series = {n: (tm.copy(), v[:, i:i + 1].astype(np.float32)) for i, n in enumerate(names)}
    return Dataset("eustock", "debian", "r-base-core", 5, ["close"], [0], series,
                   "daily closes of DAX, SMI, CAC, FTSE (business days, 1991-1998)")


def _r_single(name, rname, period, note):
    t, v, _ = _r_ts(rname)
    return Dataset(name, "debian", "r-base-core", period, ["value"], [0],
                   _one(name, _year_ms(t), v), note)


def load_sunspots():
    return _r_single("sunspots", "sunspot.month", 12,
                     "monthly mean relative sunspot number, 1749-2013")


def load_treering():
    return _r_single("treering", "treering", 1, "yearly tree-ring width index, -6000..1979")


def load_co2():
    return _r_single("co2", "co2", 12, "Mauna Loa atmospheric CO2 (ppm), monthly 1959-1997")


def _vega_temps(fname, key):
    t, v = [], []
    with open(os.path.join(VEGA_DIR, fname)) as f:
        for row in csv.DictReader(f):
            d = row["date"]
            fmt = "%Y/%m/%d %H:%M:%S" if d.count(":") == 2 else "%Y/%m/%d %H:%M"
            t.append(_ms(dt.datetime.strptime(d, fmt)))
            v.append(float(row["temp"]))
    t, v = np.array(t, np.int64), np.array(v)
    keep = np.concatenate([[True], np.diff(t) > 0])  # a repeated hour (none seen) would go back
    return key, (t[keep], v[keep].astype(np.float32).reshape(-1, 1))


def load_temps():
    if not os.path.isdir(VEGA_DIR):
        raise RuntimeError("vega_datasets not found: install the Debian package python3-vega-datasets")
    series = dict([_vega_temps("seattle-temps.csv", "seattle"), _vega_temps("sf-temps.csv", "sf")])
    return Dataset("temps", "debian", "python3-vega-datasets", 24, ["temp_f"], [0], series,
                   "hourly temperatures of Seattle and San Francisco, 2010")


def load_weather():
    if not os.path.isdir(VEGA_DIR):
        raise RuntimeError("vega_datasets not found: install the Debian package python3-vega-datasets")
    t, v = [], []
    cols = ["precipitation", "temp_max", "temp_min", "wind"]
    with open(os.path.join(VEGA_DIR, "seattle-weather.csv")) as f:
        for row in csv.DictReader(f):
            t.append(_ms(dt.datetime.strptime(row["date"], "%Y/%m/%d")))
            v.append([float(row[c]) for c in cols])
    return Dataset("weather", "debian", "python3-vega-datasets", 7, cols, [1, 2],
                   _one("seattle", t, v),
                   "Seattle daily weather 2012-2015: precipitation, max/min temperature (C), wind")


def load_taylor():
    v = _pmdarima_array("taylor")
    start = _ms(dt.datetime(2000, 6, 5))  # a Monday
    t = start + np.arange(len(v), dtype=np.int64) * 1800000
    return Dataset("taylor", "pypi", "pmdarima", 48, ["demand_mw"], [0], _one("taylor", t, v),
                   "half-hourly electricity demand, England and Wales, June-August 2000")


def load_msft():
    path = os.path.join(_pmdarima_dir(), "data", "msft.tar.gz")
    with tarfile.open(path) as tf:
        text = tf.extractfile("msft.csv").read().decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    cols = ["Open", "High", "Low", "Close", "Volume"]
    t = np.array([_ms(dt.datetime.strptime(r["Date"], "%Y-%m-%d")) for r in rows], np.int64)
    v = np.array([[float(r[c]) for c in cols] for r in rows])
    return Dataset("msft", "pypi", "pmdarima", 5, [c.lower() for c in cols], [3],
                   _one("MSFT", t, v), "MSFT daily open/high/low/close/volume, 1986-2017")


LOADERS = {
    "eustock": load_eustock,
    "temps": load_temps,
    "weather": load_weather,
    "sunspots": load_sunspots,
    "treering": load_treering,
    "co2": load_co2,
    "taylor": load_taylor,
    "msft": load_msft,
}
# Which sets come from Debian packages (CI may use them) and which from PyPI.
DEBIAN = ["eustock", "temps", "weather", "sunspots", "treering", "co2"]
PYPI = ["taylor", "msft"]
# The acceptance table's sets (fixed before any model was tried).
ACCEPTANCE = ["eustock", "msft", "weather", "sunspots", "treering", "taylor"]


def load(name):
    if name not in LOADERS:
        raise KeyError("unknown data set %r (known: %s)" % (name, ", ".join(LOADERS)))
    return LOADERS[name]()


def fmt_values(v):
    """csv text of float32 values: the shortest text that reads back to the same
    float32 (so csv and f32 records hold the same numbers)."""
    return ",".join(np.format_float_positional(x, unique=True, trim="-")
                    if abs(x) < 1e16 else repr(float(x)) for x in np.asarray(v, np.float32))


def _main(argv):
    if len(argv) >= 1 and argv[0] == "list":
        for n in LOADERS:
            try:
                d = load(n)
                s, l, f = d.shape()
                print("%-9s %-6s %-22s series=%d length=%d features=%d targets=%s period=%d  %s" %
                      (n, d.source, d.package, s, l, f, ",".join(map(str, d.targets)), d.period, d.note))
            except Exception as e:  # a missing package: say which
                print("%-9s unavailable: %s" % (n, e))
        return 0
    if len(argv) >= 2 and argv[0] == "csv":
        order = argv[3] if len(argv) >= 4 and argv[2] == "--order" else "time"
        d = load(argv[1])
        out = sys.stdout
        out.write("series,time_ms," + ",".join(d.features) + "\n")
        for k, t, v in d.records(order):
            out.write("%s,%d,%s\n" % (k, t, fmt_values(v)))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
