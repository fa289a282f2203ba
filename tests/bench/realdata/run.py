#!/usr/bin/python3
"""The real-data benchmark of lstream itself: starts `lstream broker`, writes
each data set into its own topic with a real Kafka client (produce.py), runs
`lstream train --until end` with default options, once per seed, and prints
the table (data set, lstream's median over the seeds, last value, seasonal
naive, AR(p), AR-S, Holt-Winters): final MSE (the last fifth) in the data's
units, lstream's ratio to the best classical method and to the last value,
and the spread of its seeds.

What it reads from lstream. Preferred, one line per target feature (the
format proposed to the C side in FINDINGS.md):
  target feature=K mse_data=.. baseline_data=.. final_mse_data=.. final_baseline_data=..
Until lstream prints those, it falls back to the summary's
  loss mse=.. baseline=.. final_mse=.. final_baseline=..
which is in data units only while lstream does not normalise, and pools all
features: the table marks such figures "pooled" for sets with several
features. The baselines are computed here (baselines.py) on exactly the
same targets; lstream's own last-value figure is printed beside ours as a
check that both score the same records.

Usage: run.py [BUILD_DIR] [--sets a,b] [--seeds 1,2,3] [--order time|series]
              [--format f32|csv] [--partitions N] [--check] [--json FILE]
              [-- extra lstream train options]
  --seeds  lstream's --seed values (default 1); the table gives the median
           final MSE and the spread (max / min - 1) of the seeds
  --partitions  the topics' partition count (4); 1 puts every series of a
           set into one partition, where a backfilled topic (--order series)
           is the hard case for step formation
  --check  exit 1 unless every target meets issue 24's acceptance on the
           median (criterion()): prices at most 1.005x the last value; series
           of 1,000 points or more at most 1.00x the best classical method
           (last value, seasonal naive, AR(p), AR-S, Holt-Winters), shorter
           ones at most 1.15x it; with several seeds, the seeds of 1,000+
           point sets within 5% of each other; all finite
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import baselines
import datasets
import produce

HERE = os.path.dirname(os.path.abspath(__file__))
STOCKS = datasets.PRICES


class Broker:
    def __init__(self, lstream, topics, workdir):
        self.file = os.path.join(workdir, "bootstrap")
        args = [lstream, "broker", "--bootstrap-file", self.file]
        for t, parts in topics:
            args += ["--topic", "%s:%d" % (t, parts)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            if os.path.exists(self.file) and os.path.getsize(self.file) > 0:
                break
            if self.proc.poll() is not None:
                raise RuntimeError("lstream broker exited %d" % self.proc.returncode)
            time.sleep(0.1)
        else:
            raise RuntimeError("lstream broker printed no address in 30 s")
        self.bootstrap = open(self.file).read().strip()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def train_options(lstream):
    """The options this lstream's train knows (from --help)."""
    out = subprocess.run([lstream, "train", "--help"], capture_output=True, text=True).stdout
    return {w for line in out.splitlines() for w in line.split() if w.startswith("--")}


def _num(v):
    try:
        return float(v)
    except ValueError:
        return v  # a label, such as units=normalised


def parse_summary(text):
    """{'loss': {...}, 'targets': {feature: {...}}, 'horizons': {(feature, h): {...}}} from
    lstream train's stdout (horizons: --horizon H > 1's lines)."""
    res = {"loss": None, "targets": {}, "horizons": {}, "quantiles": {}}
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        kv = {k: _num(v) for k, v in (w.split("=", 1) for w in words[1:] if "=" in w)}
        if words[0] == "loss":
            res["loss"] = kv
        elif words[0] == "forecast":
            res["forecast"] = kv
        elif words[0] == "target" and "feature" in kv:
            res["targets"][int(kv.pop("feature"))] = kv
        elif words[0] == "horizon" and "feature" in kv and "h" in kv:
            res["horizons"][(int(kv.pop("feature")), int(kv.pop("h")))] = kv
        elif words[0] == "quantile" and "feature" in kv and "h" in kv:
            key = (int(kv.pop("feature")), int(kv.pop("h")), kv.pop("level"))
            res["quantiles"][key] = kv
    return res


def run_set(lstream, bootstrap, name, topic, fmt, order, opts, extra, seeds=(1,)):
    """Writes data set `name` into topic, trains on it, and scores it: its rows."""
    ds = datasets.load(name)
    n, _ = produce.produce(bootstrap, topic, ds, fmt, order)
    return train_set(lstream, bootstrap, ds, topic, fmt, opts, extra, n, seeds)


_BASELINES = {}


def criterion(ds, B):
    """(what the target is held to, bound): issue 24's acceptance; a set of
    datasets.GUARDS (a known miss) to its guard instead."""
    if ds.name in STOCKS:
        return "last", 1.005
    if ds.name in datasets.GUARDS:
        return "best", datasets.GUARDS[ds.name]
    return "best", 1.00 if ds.shape()[1] >= 1000 else 1.15


def _train_once(lstream, bootstrap, ds, topic, fmt, opts, extra, seed):
    args = [lstream, "train", "--brokers", bootstrap, "--topic", topic, "--features",
            str(ds.F), "--format", fmt, "--until", "end", "--quiet"]
    if "--targets" in opts:
        args += ["--targets", ",".join(map(str, ds.targets))]
    if seed is not None:
        args += ["--seed", str(seed)]
    # A set shifted to start in 2000 (datasets.SHIFT_TO_MS) may end centuries
    # ahead (treering in 9980): the bound on the future, against this
    # machine's clock, is for live feeds; off for such a set.
    last = max(int(t[-1]) for t, _ in ds.series.values())
    if last > time.time() * 1000 and "--max-future-ms" in opts:
        args += ["--max-future-ms", "0"]
    p = subprocess.run(args + list(extra), capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("lstream train on %s exited %d: %s" % (ds.name, p.returncode,
                                                                   p.stderr.strip()[-500:]))
    return parse_summary(p.stdout)


def train_set(lstream, bootstrap, ds, topic, fmt, opts, extra, n=None, seeds=(None,)):
    """`lstream train --until end` on a topic holding data set ds (default
    options, then extra), once per seed, scored against the baselines: one
    row per target (the median seed's figures, every seed's final MSE)."""
    name = ds.name
    t0 = time.time()
    runs = [_train_once(lstream, bootstrap, ds, topic, fmt, opts, extra, s) for s in seeds]
    if name not in _BASELINES:
        _BASELINES[name] = baselines.baseline_scores(ds)
    bs = _BASELINES[name]
    rows = []
    for j, f in enumerate(ds.targets):
        feat = ds.features[f]
        B = {m: bs[m][feat] for m in bs}
        per = []
        for got in runs:
            t = got["targets"].get(f)
            if t is not None and "final_mse_data" in t:
                per.append((t["final_mse_data"], t["mse_data"], t.get("final_baseline_data"),
                            "per target"))
            else:
                L = got["loss"]
                per.append((L["final_mse"], L["mse"], L["final_baseline"],
                            "summary" if ds.F == 1 else "pooled over %d features" % ds.F))
        finals = [x[0] for x in per]
        tail, mse, lst_tail, how = sorted(per, key=lambda x: x[0])[(len(per) - 1) // 2]
        best = baselines.best_classical(B)
        r = dict(data=name, feature=feat, source=ds.source, records=n, how=how,
                 length=ds.shape()[1], seconds=(time.time() - t0) / len(runs), mse=mse,
                 final_mse=tail, seeds=list(seeds), final_seeds=finals,
                 lstream_final_last=lst_tail, ar_p=baselines.ar_order(ds), best=best)
        for m in baselines.METHODS:
            r[m] = B[m]["tail_mse"]
        r["vs_last"] = tail / r["last"]
        r["vs_ar"] = tail / r["ar"]
        r["vs_best"] = tail / r[best]
        r["spread"] = max(finals) / min(finals) - 1 if min(finals) > 0 else float("inf")
        against, bound = criterion(ds, B)
        r["criterion"] = "%s <= %.4g" % (against, bound)
        ratio = r["vs_last"] if against == "last" else r["vs_best"]
        ok = all(_finite(x) for x in finals) and _finite(mse) and ratio <= bound
        if len(finals) > 1 and r["length"] >= 1000:
            ok = ok and r["spread"] <= 0.05
        r["pass"] = bool(ok) and not how.startswith("pooled")  # pooled: not this target's
        # Per horizon (--horizon H > 1): the seeds' median final MSE over the
        # last value's and the seasonal naive's at that horizon (lstream's own
        # baselines, on the same forecasts: those whose actual was known in
        # their window).
        hs = sorted({h for got in runs for (ff, h) in got["horizons"] if ff == f})
        r["horizons"] = {}
        for h in hs:
            v = [got["horizons"].get((f, h)) for got in runs]
            v = [x for x in v if x is not None]
            med = lambda k: sorted(x[k] for x in v)[(len(v) - 1) // 2]
            r["horizons"][h] = dict(final_mse=med("final_mse_data"),
                                    vs_last=med("final_ratio_last"),
                                    vs_snaive=med("final_ratio_snaive"))
        # Per quantile level and horizon (--quantiles): the seeds' median final
        # coverage and pinball loss, and the empirical quantiles' of the last
        # value's recent errors (baselines.quantile_baseline) at that level
        # and horizon.
        r["quantiles"] = {}
        keys = sorted({k for got in runs for k in got["quantiles"] if k[0] == f})
        qb = baselines.quantile_baseline(ds, sorted({k[2] for k in keys}),
                                         sorted({k[1] for k in keys})) if keys else {}
        for key in keys:
            v = [got["quantiles"][key] for got in runs if key in got["quantiles"]]
            med = lambda k: sorted(x[k] for x in v)[(len(v) - 1) // 2]
            b = qb.get((f, key[1], key[2]), {})
            r["quantiles"][key[1:]] = dict(coverage=med("final_coverage"),
                                           pinball=med("final_pinball"),
                                           base_coverage=b.get("coverage", float("nan")),
                                           base_pinball=b.get("pinball", float("nan")))
        rows.append(r)
    return rows


def _jsonable(x):
    """x with its tuple keys (a quantile's (level, h)) as text: "0.1,12"."""
    if isinstance(x, dict):
        return {(",".join(str(e) for e in k) if isinstance(k, tuple) else k): _jsonable(v)
                for k, v in x.items()}
    if isinstance(x, list):
        return [_jsonable(v) for v in x]
    return x


def _finite(x):
    return x == x and abs(x) != float("inf")


def print_table(rows):
    print("final MSE (the last fifth of event time; lstream: the median seed's), data units")
    print("%-9s %-10s %6s %11s %11s %11s %11s %11s %11s %7s %7s %6s %-8s %s" %
          ("data", "feature", "length", "lstream", "last value", "seasonal", "AR(p)", "AR-S",
           "H-W", "/best", "/last", "spread", "best", "pass"))
    for r in rows:
        print("%-9s %-10s %6d %11.5g %11.5g %11.5g %11.5g %11.5g %11.5g %7.3f %7.3f %6.3f %-8s "
              "%s%s" % (r["data"], r["feature"], r["length"], r["final_mse"], r["last"],
                        r["seasonal"], r["ar"], r["ars"], r["hw"], r["vs_best"], r["vs_last"],
                        r["spread"], r["best"], "yes" if r["pass"] else "NO",
                        "" if r["how"] in ("per target", "summary") else "  (" + r["how"] + ")"))


def main(argv):
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    build = "build"
    sets, order, fmt, check, out, parts = datasets.ACCEPTANCE, "time", "f32", False, None, 4
    seeds = [1]
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--sets":
            sets, i = argv[i + 1].split(","), i + 1
        elif a == "--seeds":
            seeds, i = [int(x) for x in argv[i + 1].split(",")], i + 1
        elif a == "--order":
            order, i = argv[i + 1], i + 1
        elif a == "--format":
            fmt, i = argv[i + 1], i + 1
        elif a == "--partitions":
            parts, i = int(argv[i + 1]), i + 1
        elif a == "--json":
            out, i = argv[i + 1], i + 1
        elif a == "--check":
            check = True
        elif a.startswith("-"):
            sys.stderr.write(__doc__)
            return 2
        else:
            build = a
        i += 1
    lstream = os.path.abspath(os.path.join(build, "lstream"))
    if not os.access(lstream, os.X_OK):
        print("run.py: no lstream program at %s (build first)" % lstream, file=sys.stderr)
        return 2
    opts = train_options(lstream)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        topics = [("rd-" + s, parts) for s in sets]
        broker = Broker(lstream, topics, work)
        try:
            for s, (topic, _) in zip(sets, topics):
                rows += run_set(lstream, broker.bootstrap, s, topic, fmt, order, opts, extra,
                                seeds)
                sys.stderr.write("%s done\n" % s)
        finally:
            broker.stop()
    print_table(rows)
    if out:
        json.dump(_jsonable(rows), open(out, "w"), indent=1)
    if check:
        bad = [r["data"] + ":" + r["feature"] for r in rows if not r["pass"]]
        print("%d passed, %d failed" % (len(rows) - len(bad), len(bad)))
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
