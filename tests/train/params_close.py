#!/usr/bin/python3
"""Compares flat parameter files (`lstream train --params-out`, float32).

Usage: params_close.py TOLERANCE REFERENCE OTHER...
Prints max |other - reference| / max |reference| for each OTHER and exits 1
if any exceeds TOLERANCE (norm-relative: entries near zero make an
elementwise relative error meaningless).
"""
import sys

import numpy as np


def main():
    tol = float(sys.argv[1])
    ref = np.fromfile(sys.argv[2], dtype=np.float32)
    ok = True
    for path in sys.argv[3:]:
        got = np.fromfile(path, dtype=np.float32)
        if got.shape != ref.shape:
            print(f"{path}: {got.size} parameters, {sys.argv[2]} has {ref.size}")
            ok = False
            continue
        err = float(np.abs(got - ref).max() / np.abs(ref).max())
        print(f"{path}: max |difference| / max |parameter| = {err:.3g}")
        ok &= err <= tol
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
