#!/usr/bin/python3
"""Export of snapshots to PyTorch (ctest: snapshot_export), and inspect.

Runs tests/state/snapshot_dump, which trains a small model on 9 series,
writes a 2-rank snapshot and the engine's next-step predictions from every
series' state; then `lstream export` writes the model and the states as
safetensors files, and this script checks that
  - both files are valid safetensors (parsed here with json + numpy, and
    with the `safetensors` package too when it is importable);
  - the model loads into M.lstm = nn.LSTM(I, H, L), M.head = nn.Linear(H, O)
    with load_state_dict(strict=True);
  - the metadata lists the series' keys (binary ones included) and
    partitions in the order of h and c;
  - torch's LSTM + head run one step from each exported (h, c) on the same
    inputs reproduce lstream's predictions;
and that `lstream inspect` passes the snapshot and fails (exit 1, naming
the file) once a shard is damaged. torch is required: without it the test
FAILS; it never skips.

Usage: export_test.py --lstream PATH/lstream --dump PATH/snapshot_dump
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError as exc:  # a failure, not a skip
    print(f"export_test: FAIL: cannot import {exc.name}; install python3-torch and python3-numpy "
          f"for {sys.executable}", file=sys.stderr)
    sys.exit(1)

# Norm-relative tolerance, max|torch - lstream| / max|lstream|, of the
# predictions: the engine's oracle bound (tests/oracle/torch_oracle.py),
# room for float32 rounding in other summation orders (one step of a
# 2-layer LSTM here, measured ~1e-7), far below any real fault (a wrong
# tensor name or layout, a state of another series, or h and c swapped
# change predictions by 1e-2 or more).
TOL = 1e-5


def parse_safetensors(path):
    """Returns ({name: array}, metadata) of a safetensors file, checking its layout."""
    with open(path, "rb") as f:
        blob = f.read()
    assert len(blob) >= 8, f"{path}: {len(blob)} bytes"
    n = int.from_bytes(blob[:8], "little")
    assert n % 8 == 0, f"{path}: header of {n} bytes is not padded to 8"
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    assert all(isinstance(v, str) for v in meta.values()), "metadata values must be strings"
    spans = sorted((t["data_offsets"], name) for name, t in header.items())
    at = 0
    for (begin, end), name in spans:  # back to back, covering the data exactly
        assert begin == at, f"{path}: {name} starts at {begin}, not {at}"
        at = end
    assert at == len(data), f"{path}: tensors cover {at} of {len(data)} bytes"
    out = {}
    for name, t in header.items():
        kinds = {"F32": "<f4", "F64": "<f8", "I64": "<i8"}
        assert t["dtype"] in kinds, f"{name}: dtype {t['dtype']}"
        begin, end = t["data_offsets"]
        a = np.frombuffer(data[begin:end], dtype=kinds[t["dtype"]])
        assert a.size == int(np.prod(t["shape"])), f"{name}: {a.size} values for {t['shape']}"
        out[name] = a.reshape(t["shape"])
    return out, meta


def rel_err(a, b):
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def run(cmd, expect_rc=0):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != expect_rc:
        print(f"export_test: FAIL: {' '.join(cmd)} exited {p.returncode}, expected {expect_rc}\n"
              f"{p.stdout}{p.stderr}", file=sys.stderr)
        sys.exit(1)
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lstream", required=True)
    ap.add_argument("--dump", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lstream-export-") as tmp:
        snaps, prefix = os.path.join(tmp, "snaps"), os.path.join(tmp, "expect")
        run([args.dump, "--dir", snaps, "--out", prefix, "--world", "2"])
        with open(prefix + ".json") as f:
            want = json.load(f)
        raw = np.fromfile(prefix + ".bin", dtype="<f4")
        S, I, H, L, O = (want[k] for k in ("S", "I", "H", "L", "O"))
        x = raw[:S * I].reshape(1, S, I)
        pred = raw[S * I:].reshape(1, S, O)

        model_path, states_path = os.path.join(tmp, "model.st"), os.path.join(tmp, "states.st")
        run([args.lstream, "export", snaps, "--safetensors", model_path, "--states", states_path])
        tensors, meta = parse_safetensors(model_path)
        states, smeta = parse_safetensors(states_path)
        try:
            from safetensors.numpy import load_file
        except ImportError:
            load_file = None
        if load_file is not None:  # the reference reader agrees with ours
            for path, ours in ((model_path, tensors), (states_path, states)):
                theirs = load_file(path)
                assert theirs.keys() == ours.keys()
                assert all(np.array_equal(theirs[k], ours[k]) for k in ours)
        assert meta.get("format") == "pt" and meta.get("lstream.step") == "3", meta

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = torch.nn.LSTM(I, H, L)
                self.head = torch.nn.Linear(H, O)

        m = M()
        m.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in tensors.items()}, strict=True)

        keys = [bytes.fromhex(k) for k in want["keys_hex"]]
        got_keys = [k.encode("latin-1") for k in json.loads(smeta["keys"])]
        assert got_keys == keys, f"keys {got_keys} != {keys}"
        assert json.loads(smeta["partitions"]) == want["partitions"], smeta["partitions"]
        assert states["h"].shape == (S, L, H) and states["c"].shape == (S, L, H)

        h0 = torch.from_numpy(states["h"].transpose(1, 0, 2).copy())  # [S, L, H] -> [L, S, H]
        c0 = torch.from_numpy(states["c"].transpose(1, 0, 2).copy())
        with torch.no_grad():
            y, _ = m.lstm(torch.from_numpy(x.copy()), (h0, c0))
            torch_pred = m.head(y).numpy()
        err = rel_err(torch_pred, pred)
        print(f"export_test: S={S} I={I} H={H} L={L} O={O}: prediction error {err:.2e} "
              f"(tolerance {TOL:.0e})")
        if not err <= TOL:
            print("export_test: FAIL: torch with the exported weights and states disagrees",
                  file=sys.stderr)
            sys.exit(1)

        # inspect: passes the snapshot, fails on a damaged shard.
        p = run([args.lstream, "inspect", snaps])
        assert "verification: ok" in p.stdout and "rank 1: " in p.stdout, p.stdout
        # DIR/latest, the file naming the newest: that snapshot.
        p = run([args.lstream, "inspect", os.path.join(snaps, "latest")])
        assert "verification: ok" in p.stdout and "latest good snapshot" in p.stdout, p.stdout
        p = run([args.lstream, "inspect", os.path.join(snaps, "nope")], expect_rc=1)
        assert "nope: No such file or directory" in p.stderr, p.stderr
        snap = os.path.join(snaps, "snap-000000000003")
        with open(os.path.join(snap, "shard-1"), "r+b") as f:
            f.seek(60)
            b = f.read(1)
            f.seek(60)
            f.write(bytes([b[0] ^ 0x10]))
        p = run([args.lstream, "inspect", snap], expect_rc=1)
        assert "shard-1" in p.stderr and "FAILED" in p.stdout, p.stdout + p.stderr
        p = run([args.lstream, "inspect", snaps], expect_rc=1)  # no good snapshot left
        assert "passed over" in p.stderr and "shard-1" in p.stderr, p.stderr
    print("export_test: ok")


if __name__ == "__main__":
    main()
