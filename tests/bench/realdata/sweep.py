#!/usr/bin/python3
"""The sweep of lstream's defaults on real data (issues 17 and 24), with the
real binary: every data set of datasets.ACCEPTANCE written once into the
embedded broker, then `lstream train --until end` with the default options
and with one key changed at a time, once per seed; the table gives, per
set-up and target, the median seed's final MSE (last fifth of event time,
data units) over the best classical method's (over the last value's on
prices), the seeds' spread where it is over 5% on a set of 1,000 points or
more, and how many targets meet issue 24's acceptance (run.criterion).

Usage: sweep.py [BUILD_DIR] [--sets a,b] [--seeds 1,2,3] [--partitions N]
                [--setups LABEL,...] [--markdown]
Time: about 50 s per set-up with three seeds on 2 cores.
"""
import os
import sys
import tempfile

import baselines
import datasets
import produce
import run

# (label, extra options): the defaults, then one key at a time, then the
# set-up before issue 17 (raw inputs, the next level, window 32, lr 1e-3).
SETUPS = [
    ("defaults", []),
    ("mix-profile false", ["--mix-profile", "false"]),
    ("mix-profile-rows all", ["--mix-profile-rows", "all"]),
    ("season-levels false", ["--season-levels", "false"]),
    ("linear-blocks 0", ["--linear-blocks", "0"]),
    ("linear-wait 2", ["--linear-wait", "2"]),
    ("the defaults before them", ["--season-levels", "false", "--linear-blocks", "0",
                                  "--linear-wait", "2", "--mix-profile", "false",
                                  "--replay", "4"]),
    ("auto-seasons 1", ["--auto-seasons", "1"]),
    ("season none", ["--season", "none"]),
    ("linear false", ["--linear", "false"]),
    ("season none, linear false", ["--season", "none", "--linear", "false", "--replay", "4"]),
    ("window 8", ["--window", "8"]),
    ("window 32", ["--window", "32"]),
    ("lr 1e-3", ["--lr", "0.001"]),
    ("lr 1e-2", ["--lr", "0.01"]),
    ("hidden 32", ["--hidden", "32"]),
    ("hidden 128", ["--hidden", "128"]),
    ("layers 2", ["--layers", "2"]),
    ("norm-window 64", ["--norm-window", "64"]),
    ("norm-window 1024", ["--norm-window", "1024"]),
    ("replay 0", ["--replay", "0"]),
    ("replay 4", ["--replay", "4"]),
    ("replay 8", ["--replay", "8"]),
    ("replay 2", ["--replay", "2"]),
    ("horizon 12", ["--horizon", "12"]),
    ("horizon 12 quantiles", ["--horizon", "12", "--quantiles", "0.1,0.5,0.9"]),
    ("quantiles uncalibrated", ["--horizon", "12", "--quantiles", "0.1,0.5,0.9",
                                "--calibration-rate", "0"]),
    ("quantiles rate 0.01", ["--horizon", "12", "--quantiles", "0.1,0.5,0.9",
                             "--calibration-rate", "0.01"]),
    ("quantiles rate 0.02", ["--horizon", "12", "--quantiles", "0.1,0.5,0.9",
                             "--calibration-rate", "0.02"]),
    ("quantiles rate 0.1", ["--horizon", "12", "--quantiles", "0.1,0.5,0.9",
                            "--calibration-rate", "0.1"]),
    ("quantiles rate 0.2", ["--horizon", "12", "--quantiles", "0.1,0.5,0.9",
                            "--calibration-rate", "0.2"]),
    ("inputs level", ["--inputs", "level"]),
    ("target level", ["--target", "level"]),
    ("before issue 17", ["--normalize", "none", "--target", "level", "--inputs", "level",
                         "--calibrate", "false", "--replay", "0", "--window", "32",
                         "--lr", "0.001"]),
]


def cell(r):
    """final / best classical (/ last value on prices), the seeds' spread
    when over 5%; bold when it misses the acceptance."""
    txt = "%.3f" % (r["vs_last"] if r["data"] in run.STOCKS else r["vs_best"])
    if r["spread"] > 0.05 and r["length"] >= 1000:
        txt += " (±%.0f%%)" % (100 * r["spread"])
    return txt if r["pass"] else "**%s**" % txt


def main(argv):
    build, sets, parts, md, seeds, only = "build", datasets.ACCEPTANCE, 4, False, [1, 2, 3], None
    i = 0
    while i < len(argv):
        if argv[i] == "--sets":
            sets, i = argv[i + 1].split(","), i + 1
        elif argv[i] == "--seeds":
            seeds, i = [int(x) for x in argv[i + 1].split(",")], i + 1
        elif argv[i] == "--setups":
            only, i = argv[i + 1].split(","), i + 1
        elif argv[i] == "--partitions":
            parts, i = int(argv[i + 1]), i + 1
        elif argv[i] == "--markdown":
            md = True
        else:
            build = argv[i]
        i += 1
    lstream = os.path.abspath(os.path.join(build, "lstream"))
    loaded = [ds for ds in (datasets.load(s) for s in sets) if ds is not None]
    table = []
    with tempfile.TemporaryDirectory() as work:
        broker = run.Broker(lstream, [("sw-" + ds.name, parts) for ds in loaded], work)
        try:
            for ds in loaded:
                produce.produce(broker.bootstrap, "sw-" + ds.name, ds, "f32", "time")
            opts = run.train_options(lstream)
            for label, extra in SETUPS:
                if only is not None and label not in only:
                    continue
                rows = []
                for ds in loaded:
                    rows += run.train_set(lstream, broker.bootstrap, ds, "sw-" + ds.name, "f32",
                                          opts, extra + ["--threads", "1"], seeds=seeds)
                table.append((label, rows))
                print("%-18s %s  met %d/%d" % (label, " ".join(cell(r) for r in rows),
                                               sum(r["pass"] for r in rows), len(rows)),
                      file=sys.stderr)
        finally:
            broker.stop()
    heads = ["%s %s" % (r["data"], r["feature"]) for r in table[0][1]]
    if md:
        print("| set-up | " + " | ".join(heads) + " | met |")
        print("|---" * (len(heads) + 2) + "|")
    for label, rows in table:
        cells = [cell(r) for r in rows] + ["%d/%d" % (sum(r["pass"] for r in rows), len(rows))]
        print(("| %s | " % label + " | ".join(cells) + " |") if md else
              "%-18s %s" % (label, "  ".join(cells)))
    for label, rows in table:  # set-ups of several horizons: each against its baselines
        for r in rows:
            if not r["horizons"]:
                continue
            print("%s, %s %s: final MSE per horizon over the last value's / the seasonal "
                  "naive's at that horizon (lstream's summary: the targets in their window "
                  "only; horizons.py scores every forecast)" % (label, r["data"], r["feature"]))
            print("  " + "  ".join("h%d %.3f/%.3f" % (h, x["vs_last"], x["vs_snaive"])
                                   for h, x in sorted(r["horizons"].items())))
            if r["quantiles"]:
                q = r["quantiles"]
                print("  final coverage: " + "  ".join(
                    "q%g h%d %.3f" % (l, h, x["coverage"])
                    for (h, l), x in sorted(q.items()) if h in (1, 6, 12)))
                print("  final pinball (the empirical quantiles' of the last value's last "
                      "%d errors): " % baselines.QUANTILE_WINDOW + "  ".join(
                          "q%g h%d %.4g (%.4g)" % (l, h, x["pinball"], x["base_pinball"])
                          for (h, l), x in sorted(q.items()) if h in (1, 6, 12)))
                over = ["q%g h%d %.4g/%.4g" % (l, h, x["pinball"], x["base_pinball"])
                        for (h, l), x in sorted(q.items()) if not x["pinball"] <= x["base_pinball"]]
                print("  pinball at or below the baseline's: %d of %d levels x horizons%s" % (
                    len(q) - len(over), len(q), "; over: " + "  ".join(over) if over else ""))
                # The 0.1 to 0.9 interval's share (the quantiles never cross):
                # the medians' difference, each level's median seed.
                print("  final 80% interval: " + "  ".join(
                    "h%d %.3f" % (h, q[(h, 0.9)]["coverage"] - q[(h, 0.1)]["coverage"])
                    for h in (1, 6, 12) if (h, 0.9) in q and (h, 0.1) in q))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
