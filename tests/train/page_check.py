#!/usr/bin/python3
"""The live page as Chromium left it (report_test.sh live).

  page_check.py DIR

DIR holds dom.html (the page's DOM after its scripts ran) and live.png (a
screenshot). Checks: every chart drew points (its data-points), the series
picker lists series, the status line shows the step and health, and the
screenshot is 1280x1400 with the curves' blue in it. Exits 1 otherwise.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_check import blue_pixels, read_png  # noqa: E402

out = sys.argv[1]
dom = open(os.path.join(out, "dom.html")).read()
points = {k: int(v) for k, v in re.findall(r'id="points-(\w+)" data-points="(\d+)"', dom)}
for chart in ("loss", "ratio", "lag", "rps", "fc"):
    if points.get(chart, 0) < 2:
        sys.exit(f"FAIL: chart {chart} has {points.get(chart)} points: {points}")
options = re.findall(r'<option value="([^"]*)"', dom)
if not any(o.startswith("SYM") for o in options):
    sys.exit(f"FAIL: the series picker shows no series: {options}")
status = re.search(r'<div id="status">(.*?)</div>', dom, re.S).group(1)
if "step" not in status or "healthy" not in status:
    sys.exit(f"FAIL: the status line reads {status!r}")
w, h, rows = read_png(os.path.join(out, "live.png"))
blue = blue_pixels(rows, (0, 0, w, h))
# The curves' blue (#1f77b4) in lines 1.5 px wide: a chart with points has
# hundreds; 500 is less than the loss and forecast charts alone draw.
if (w, h) != (1280, 1400) or blue < 500:
    sys.exit(f"FAIL: the screenshot is {w}x{h} with {blue} pixels of the curves' blue")
print(f"page_check: charts' points {points}, {len(options)} series in the picker, "
      f"screenshot {w}x{h} ({blue} blue pixels)")
