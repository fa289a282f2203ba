#!/usr/bin/python3
"""Checks a trainer snapshot's exported states (lstream export --states)
against the run's --series-out (ctest: snapshot_kill).

Every series' normaliser is in the export (norm_n [S] I64, norm [S, F, 4]
F64, errors [S, O, 2] F64) beside h and c: it consumed one input record per
target trained (norm_n == records), its statistics are finite, and its
error sums divided by its records are the MSEs --series-out printed.

Usage: states_check.py STATES.safetensors SERIES.csv
"""
import csv
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "state"))
from export_test import parse_safetensors  # noqa: E402 (the safetensors reader of that test)

# --series-out prints the MSEs with 9 significant digits.
TOL = 1e-7


def main(states_path, series_path):
    t, meta = parse_safetensors(states_path)
    for name in ("h", "c", "norm_n", "norm", "errors"):
        assert name in t, f"{states_path}: no tensor {name}"
    keys = json.loads(meta["keys"])
    rows = {r["series"]: r for r in csv.DictReader(open(series_path))}
    assert sorted(keys) == sorted(rows), "the export and --series-out list other series"
    O = t["errors"].shape[1]
    assert np.all(np.isfinite(t["norm"])) and np.all(np.isfinite(t["errors"])), "not finite"
    for i, key in enumerate(keys):
        r = rows[key]
        records = int(r["records"])
        assert int(t["norm_n"][i]) == records, f"{key}: consumed {t['norm_n'][i]}, {records} targets"
        mse = [float(v) for k, v in r.items() if k.startswith(("mse_data_", "baseline_data_"))]
        got = (t["errors"][i] / max(records, 1)).reshape(-1)  # model, last value per target
        want = np.array(mse)  # mse_data_K, baseline_data_K per target, in order
        rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-30)
        assert np.all(rel <= TOL), f"{key}: error sums {got} against --series-out {want}"
    print(f"states_check: {len(keys)} series, {O} targets: normalisers and error sums agree")


if __name__ == "__main__":
    main(*sys.argv[1:3])
