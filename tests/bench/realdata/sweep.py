#!/usr/bin/python3
"""The sweep of lstream's defaults on real data (issue 17, item 4), with the
real binary: every data set of datasets.ACCEPTANCE written once into the
embedded broker, then `lstream train --until end` with the default options
and with one key changed at a time; the table gives, per set-up and target,
the final MSE (last fifth of event time, data units) over AR(p)'s, and over
the last value's where the acceptance is about it (stock prices; sets where
AR(p) beats the last value by 20%: treering, taylor), and how many targets
meet issue 17's acceptance. FINDINGS.md has the simulation that chose the
set-up; this checks the choice on lstream itself.

Usage: sweep.py [BUILD_DIR] [--sets a,b] [--partitions N] [--markdown]
Time: about 2 s per set and set-up on 2 cores (3-4 min in all).
"""
import os
import sys
import tempfile

import datasets
import produce
import run

# (label, extra options): the defaults, then one key at a time, then the
# set-up before issue 17 (raw inputs, the next level, window 32, lr 1e-3).
SETUPS = [
    ("defaults", []),
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
    ("replay 8", ["--replay", "8"]),
    ("calibrate false", ["--calibrate", "false"]),
    ("inputs level", ["--inputs", "level"]),
    ("target level", ["--target", "level"]),
    ("before issue 17", ["--normalize", "none", "--target", "level", "--inputs", "level",
                         "--calibrate", "false", "--replay", "0", "--window", "32",
                         "--lr", "0.001"]),
]


def cell(r):
    """final/AR, with final/last in parentheses where the acceptance is on it;
    bold when it misses the acceptance."""
    txt = "%.3f" % r["vs_ar"]
    if r["data"] in run.STOCKS or r["ar"] / r["last"] <= 0.8:
        txt += " (%.3f)" % r["vs_last"]
    return txt if r["pass"] else "**%s**" % txt


def main(argv):
    build, sets, parts, md = "build", datasets.ACCEPTANCE, 4, False
    i = 0
    while i < len(argv):
        if argv[i] == "--sets":
            sets, i = argv[i + 1].split(","), i + 1
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
                rows = []
                for ds in loaded:
                    rows += run.train_set(lstream, broker.bootstrap, ds, "sw-" + ds.name, "f32",
                                          opts, extra)
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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
