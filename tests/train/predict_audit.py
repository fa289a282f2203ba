#!/usr/bin/python3
"""`lstream predict` against the trainer's own forecasts, bit for bit (every
horizon's, and the quantiles' where the run has them).

  predict_audit.py LSTREAM SNAPSHOT_DIR PREDICTIONS.csv RECORDS.csv

For every snapshot in SNAPSHOT_DIR (step S) and every series with next
forecasts of step S in PREDICTIONS.csv (made with that snapshot's model),
runs `lstream predict` on the series' records and requires each of those
forecasts, as text, to be the trainer's. Then `lstream export --states` of
the newest snapshot: each series' calibration factor (alpha) is the one
predict used, clamp(p y / p p, 0, 1) of the exported moments (1 where the
moments are all zero: with the linear path, each series' mixing weights
calibrate and the run-wide factor stays 1), and its
normaliser's count the records predict skipped. Exits 1 on a difference.
"""
import csv
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def trainer_rows(path):
    """{(step, series): {(time, h): [forecast texts]}} of the next forecasts
    (h 1 where the file has no h column: H = 1)."""
    out = {}
    with open(path, newline="") as f:
        r = csv.reader(f)
        head = next(r)
        # the point forecasts, then the quantiles' (q<level>_J), as predict writes them
        fc = [i for i, c in enumerate(head) if c.startswith("forecast_") or
              re.match(r"q[0-9.e-]+_[0-9]+$", c)]
        hc = head.index("h") if "h" in head else None
        for rec in r:
            if rec[0] == "next":
                h = int(rec[hc]) if hc is not None else 1
                out.setdefault((int(rec[5]), rec[1]), {})[(int(rec[4]), h)] = [rec[i] for i in fc]
    return out


def predict(lstream, snap, key, records):
    p = subprocess.run([lstream, "predict", "--snapshot", snap, "--series", key, "--records",
                        records], capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"predict {snap} {key}: exit {p.returncode}: {p.stderr}")
    rows = list(csv.reader(p.stdout.splitlines()))
    if "h" in rows[0]:  # series,record,time,step,h,forecast_J...
        got = {(int(r[2]), int(r[4])): r[5:] for r in rows[1:]}
    else:
        got = {(int(r[2]), 1): r[4:] for r in rows[1:]}
    alpha = [float(a) for a in re.findall(r"([-0-9.e+]+) \(target", p.stderr)]
    consumed = int(re.search(r"consumed (\d+) records", p.stderr).group(1))
    return got, alpha, consumed


def safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        dt = {"F32": np.float32, "F64": np.float64, "I64": np.int64}[t["dtype"]]
        out[name] = np.frombuffer(data[a:b], dtype=dt).reshape(t["shape"])
    return head["__metadata__"], out


def main():
    lstream, root, preds, records = sys.argv[1:5]
    made = trainer_rows(preds)
    snaps = sorted(d for d in os.listdir(root) if d.startswith("snap-"))
    compared, last = 0, None
    for d in snaps:
        step = int(d[5:])
        keys = sorted(k for s, k in made if s == step)
        if not keys:
            fail(f"no next forecast of step {step} in {preds}")
        for key in keys:
            got, alpha, consumed = predict(lstream, os.path.join(root, d), key, records)
            for t, want in made[(step, key)].items():
                if got.get(t) != want:
                    fail(f"step {step}, series {key}, time {t}: predict {got.get(t)}, "
                         f"the trainer {want}")
                compared += 1
            last = (d, key, alpha, consumed)
    print(f"predict_audit: {compared} forecasts of {len(snaps)} snapshots reproduced bit for bit")
    d, key, alpha, consumed = last
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "states.safetensors")
        subprocess.run([lstream, "export", os.path.join(root, d), "--states", out], check=True,
                       capture_output=True)
        meta, t = safetensors(out)
    keys = json.loads(meta["keys"])
    i = keys.index(key)
    m = t["calibration"]
    want = [min(1.0, max(0.0, m[j, 0] / m[j, 1])) if m[j, 1] > 0 else 0.0 for j in range(len(m))]
    if not m.any():  # no run-wide calibration (the linear path's mixing)
        want = [1.0] * len(m)
    if t["alpha"].shape != (len(keys), len(m)) or not all((t["alpha"] == want).all(axis=1)):
        fail(f"export: alpha {t['alpha'][:2]} is not each series' clamp(p y / p p) {want}")
    if list(t["alpha"][i]) != alpha:
        fail(f"export: {key}'s alpha {list(t['alpha'][i])}, predict used {alpha}")
    if int(t["norm_n"][i]) != consumed:
        fail(f"export: {key}'s normaliser consumed {t['norm_n'][i]}, predict says {consumed}")
    print(f"predict_audit: export --states of {d}: {len(keys)} series' alpha {alpha} and "
          f"normaliser counts as predict used them")


if __name__ == "__main__":
    main()
