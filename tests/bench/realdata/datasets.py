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
    co2        (above) monthly, a trend and a yearly season: 468 points
    airpass    r-base-core (datasets::AirPassengers): monthly, 144, trend x
               season; lynx (datasets::lynx): yearly, 114, a ~10-year
               cycle; nottem (datasets::nottem): monthly, 240 (the holdout)
    sunyear    r-base-core (datasets::sunspot.year): yearly sunspot numbers
               1700-1988, 1 series x 289, a cycle of about 11 years
    WIDE       r-base-core, a wider holdout (2026-11-29): ukdriver
               (UKDriverDeaths, monthly, 192), seatfront (Seatbelts' front,
               monthly, 192), ukgas (UKgas, quarterly, 108), nile (Nile,
               yearly, 100), lakehuron (LakeHuron, yearly, 98), discover
               (discoveries, yearly counts, 100), bjsales (BJsales, 150),
               wwwusage (WWWusage, each minute, 100), beaver1/beaver2 (body
               temperature every 10 minutes, 114/100)
  source "pypi": PyPI only (benchmarks outside CI); each package's data
  files are in its wheel (nothing is downloaded at run time)
    taylor     pmdarima (datasets/taylor.py): half-hourly electricity demand
               (MW), England and Wales, June-August 2000, 1 series x 4,032
    msft       pmdarima (datasets/data/msft.tar.gz): MSFT daily open, high,
               low, close, volume 1986-2017, 1 series x 7,983 x 5 features
               (volume around 1e7..1e9); target: the close
    wineind    pmdarima (datasets/wineind.py): monthly Australian wine sales
               1980-1994, 1 series x 176, a trend and a strong yearly season
    tmy        pvlib (data/723170TYA.CSV, 703165TY.csv): typical
               meteorological years, hourly, of Greensboro NC and Sand Point
               AK, 2 series x 8,760 x 2 features (dry-bulb temperature C,
               global horizontal irradiance W/m2), a daily cycle; both targets
    glucose    bokeh_sampledata (_data/CGM.csv.gz): a continuous glucose
               monitor every 5 minutes, March-August 2010, 1 series x ~52,000
               (mg/dL), a weak daily cycle
    stocks     bokeh_sampledata (_data/stocks.csv.gz): daily adjusted closes
               of AAPL, GOOG, IBM, MSFT 2000-2013, 4 series x 2,148-3,270

Usage as a program (for the producer and the harness):
  datasets.py list                 name, source, series, length, features
  datasets.py csv NAME [--order time|series]
                                   lines series,time_ms,v1,...,vF (the input
                                   of `lstream produce --csv`)

PyPI sets are found in the package of any interpreter: imported from this
one, else $LSTREAM_PMDARIMA_DIR (pmdarima's datasets/ folder) or
$LSTREAM_PYPI_SITE (a site-packages folder holding them), else
/work/venv-*/lib/python3*/site-packages. `pip install --no-deps pmdarima
pvlib bokeh_sampledata` into a venv is enough: only their data files are read.
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


def _package_dir(sub):
    """The folder `sub` (such as pmdarima/datasets) of a PyPI package, found
    without importing the package (its dependencies need not be there)."""
    import importlib.util
    top = sub.split("/")[0]
    spec = importlib.util.find_spec(top)
    if spec is not None and spec.submodule_search_locations:
        d = os.path.join(os.path.dirname(list(spec.submodule_search_locations)[0]), sub)
        if os.path.isdir(d):
            return d
    env = os.environ.get("LSTREAM_PMDARIMA_DIR")
    if top == "pmdarima" and env and os.path.isdir(env):
        return env
    site = os.environ.get("LSTREAM_PYPI_SITE")
    if site and os.path.isdir(os.path.join(site, sub)):
        return os.path.join(site, sub)
    hits = sorted(glob.glob("/work/venv-*/lib/python3*/site-packages/" + sub))
    if hits:
        return hits[0]
    raise RuntimeError("%s not found: pip install --no-deps %s into a venv and set "
                       "LSTREAM_PYPI_SITE to its site-packages folder" % (top, top))


def _pmdarima_dir():
    return _package_dir("pmdarima/datasets")


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


def load_sunyear():
    return _r_single("sunyear", "sunspot.year", 11, "yearly sunspot numbers, 1700-1988")


def load_wineind():
    v = _pmdarima_array("wineind")
    t = np.array([_ms(dt.datetime(1980 + i // 12, 1 + i % 12, 1)) for i in range(len(v))])
    return Dataset("wineind", "pypi", "pmdarima", 12, ["sales"], [0], _one("wineind", t, v),
                   "monthly Australian wine sales (litres), 1980-1994")


def _tmy(path):
    """A TMY3 file: hourly (dry-bulb C, GHI W/m2), laid on the hours of 2001
    (a typical year's months come from different years)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))[2:]
    head = list(csv.reader(open(path, newline="")))[1]
    ti, gi = head.index("Dry-bulb (C)"), head.index("GHI (W/m^2)")
    v = np.array([[float(r[ti]), float(r[gi])] for r in rows])
    t = _ms(dt.datetime(2001, 1, 1, 1)) + np.arange(len(v), dtype=np.int64) * 3600000
    return t, v


def load_tmy():
    d = _package_dir("pvlib/data")
    series = {}
    for key, fname in (("greensboro", "723170TYA.CSV"), ("sandpoint", "703165TY.csv")):
        t, v = _tmy(os.path.join(d, fname))
        series[key] = (t, v.astype(np.float32))
    return Dataset("tmy", "pypi", "pvlib", 24, ["temp_c", "ghi"], [0, 1], series,
                   "hourly typical meteorological years of two US stations: temperature, irradiance")


def _bokeh_csv(fname):
    import gzip
    path = os.path.join(_package_dir("bokeh_sampledata/_data"), fname)
    with gzip.open(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


def load_glucose():
    rows = _bokeh_csv("CGM.csv.gz")
    t = np.array([_ms(dt.datetime.strptime(r["datetime"], "%Y-%m-%d %H:%M:%S")) for r in rows])
    v = np.array([float(r["glucose"]) for r in rows])
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    keep = np.concatenate([[True], np.diff(t) > 0])  # a repeated minute would go back
    return Dataset("glucose", "pypi", "bokeh_sampledata", 288, ["glucose"], [0],
                   _one("cgm", t[keep], v[keep]),
                   "continuous glucose monitor every 5 minutes (mg/dL), 2010")


def load_stocks():
    rows = _bokeh_csv("stocks.csv.gz")
    series = {}
    for key in ("AAPL", "GOOG", "IBM", "MSFT"):
        sel = [r for r in rows if r["Ticker"] == key]
        t = np.array([_ms(dt.datetime.strptime(r["Date"], "%Y-%m-%d")) for r in sel], np.int64)
        v = np.array([float(r["Adj Close"]) for r in sel])
        o = np.argsort(t)
        series[key] = (t[o], v[o].astype(np.float32).reshape(-1, 1))
    return Dataset("stocks", "pypi", "bokeh_sampledata", 5, ["adj_close"], [0], series,
                   "daily adjusted closes of AAPL, GOOG, IBM, MSFT, 2000-2013")


def load_airpass():
    return _r_single("airpass", "AirPassengers", 12,
                     "monthly airline passengers 1949-1960 (thousands), trend x season")


def load_lynx():
    return _r_single("lynx", "lynx", 10, "yearly Canadian lynx trappings 1821-1934, a ~10-year cycle")


def load_nottem():
    return _r_single("nottem", "nottem", 12, "monthly mean air temperature at Nottingham 1920-1939")


# A wider holdout: R's datasets of the kinds users send, added 2026-11-29
# after the defaults were fixed; no default was chosen on them. Chosen by
# kind before lstream ran on them, univariate, about 100 points or more:
# monthly seasonal (ukdriver, seatfront), quarterly seasonal (ukgas), yearly
# without a season (nile, lakehuron), a count (discover), a trend (bjsales,
# wwwusage), a sensor every 10 minutes with a level shift (beaver1, beaver2).

def load_ukdriver():
    return _r_single("ukdriver", "UKDriverDeaths", 12,
                     "monthly UK car drivers killed or seriously injured 1969-1984 (the 1983 "
                     "seat-belt law a level shift)")


def load_seatfront():
    t, v, names = _r_ts("Seatbelts")
    j = names.index("front")
    return Dataset("seatfront", "debian", "r-base-core", 12, ["value"], [0],
                   _one("seatfront", _year_ms(t), v[:, j]),
                   "monthly UK front-seat passengers killed or seriously injured 1969-1984 "
                   "(datasets::Seatbelts' front)")


def load_ukgas():
    return _r_single("ukgas", "UKgas", 4,
                     "quarterly UK gas consumption 1960-1986 (million therms), trend x season")


def load_nile():
    return _r_single("nile", "Nile", 1, "yearly flow of the Nile at Aswan 1871-1970, a level shift")


def load_lakehuron():
    return _r_single("lakehuron", "LakeHuron", 1, "yearly level of Lake Huron (feet) 1875-1972")


def load_discover():
    return _r_single("discover", "discoveries", 1,
                     "yearly counts of great inventions and discoveries 1860-1959")


def load_bjsales():
    return _r_single("bjsales", "BJsales", 1, "sales, Box and Jenkins' series M, 150 steps, a trend")


def load_wwwusage():
    return _r_single("wwwusage", "WWWusage", 1,
                     "users connected to a server, each minute, 100 minutes (a drifting level)")


def _r_beaver(name, rname):
    """datasets::beaver1/2 (a data frame: day of year, hhmm, temp, activ):
    the temperature at its own 10-minute times, laid on 2000's days."""
    rows = list(csv.DictReader(io.StringIO(_rscript(
        "write.csv(datasets::%s, stdout(), row.names = FALSE)" % rname))))
    minutes = np.array([(int(r["day"]) - 1) * 1440 + int(r["time"]) // 100 * 60 +
                        int(r["time"]) % 100 for r in rows], np.int64)
    t = SHIFT_TO_MS + minutes * 60000
    v = np.array([float(r["temp"]) for r in rows])
    return Dataset(name, "debian", "r-base-core", 1, ["temp"], [0], _one(name, t, v),
                   "a beaver's body temperature (C) every 10 minutes, rising with its activity")


def load_beaver1():
    return _r_beaver("beaver1", "beaver1")


def load_beaver2():
    return _r_beaver("beaver2", "beaver2")


LOADERS = {
    "eustock": load_eustock,
    "temps": load_temps,
    "weather": load_weather,
    "sunspots": load_sunspots,
    "treering": load_treering,
    "co2": load_co2,
    "taylor": load_taylor,
    "msft": load_msft,
    "sunyear": load_sunyear,
    "wineind": load_wineind,
    "tmy": load_tmy,
    "glucose": load_glucose,
    "stocks": load_stocks,
    "airpass": load_airpass,
    "lynx": load_lynx,
    "nottem": load_nottem,
    "ukdriver": load_ukdriver,
    "seatfront": load_seatfront,
    "ukgas": load_ukgas,
    "nile": load_nile,
    "lakehuron": load_lakehuron,
    "discover": load_discover,
    "bjsales": load_bjsales,
    "wwwusage": load_wwwusage,
    "beaver1": load_beaver1,
    "beaver2": load_beaver2,
}
# Which sets come from Debian packages (CI may use them) and which from PyPI.
DEBIAN = ["eustock", "temps", "weather", "sunspots", "treering", "co2", "sunyear", "airpass",
          "lynx", "nottem", "ukdriver", "seatfront", "ukgas", "nile", "lakehuron", "discover",
          "bjsales", "wwwusage", "beaver1", "beaver2"]
PYPI = ["taylor", "msft", "wineind", "tmy", "glucose", "stocks"]
# The acceptance table's sets: issue 17's six (fixed before any model was
# tried), then issue 24's (chosen by kind before lstream ran on them: hourly
# and 5-minute data with a daily cycle, monthly trend and season, a short
# series, a yearly cycle, another price).
ACCEPTANCE = ["eustock", "msft", "weather", "sunspots", "treering", "taylor",
              "tmy", "glucose", "co2", "wineind", "sunyear", "stocks"]
# Sets of the kinds above that no default was measured on before it was
# chosen (run once, after: a check that the defaults generalise).
HOLDOUT = ["airpass", "lynx", "nottem"]
# A wider holdout: R's datasets of the kinds users send, added 2026-11-29
# after the defaults were fixed; no default was chosen on them (run once,
# after; the kinds in the comment above load_ukdriver).
WIDE = ["ukdriver", "seatfront", "ukgas", "nile", "lakehuron", "discover", "bjsales",
        "wwwusage", "beaver1", "beaver2"]
# Known misses held to a looser bound where a CI check runs them (run.py
# --check, ci_sketch.sh), so that what fixed their worst stays: ukgas was
# 7.66x Holt-Winters (seeds' median; FINDINGS 19) before the level
# profile's weight was fitted beside the linear path, 1.80x after.
GUARDS = {"ukgas": 3.0}
# Prices (random walks): their acceptance is against the last value.
PRICES = {"eustock", "msft", "stocks"}


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
