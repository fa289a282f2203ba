"""The log lines of `lstream train` (tests/train/train_test.sh, case logs).

Usage: logs_check.py TEXT JSON MPI
  TEXT  stderr of a replay in the default format, then of a usage error:
        every line is TIME LEVEL LOGGER: MESSAGE, TIME ISO 8601 UTC to the
        millisecond and now, LEVEL one of INFO WARN ERROR; among them a step
        line, the final figures, a rejected record's warning, the error
  JSON  the same with --log-format json: every line one JSON object of
        time, level, logger and msg (no rank outside mpirun)
  MPI   mpirun -np 2 with --log-format json: every line names its rank,
        and both ranks have lines

Exits 1 with a message on the first failure.
"""
import datetime
import json
import re
import sys

NOW = datetime.datetime.now(datetime.timezone.utc)


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def check_time(text):
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", text):
        fail(f"time {text!r} is not ISO 8601 UTC to the millisecond")
    t = datetime.datetime.fromisoformat(text[:-1] + "+00:00")
    # The runs took seconds before this check; 10 minutes tells a local
    # time or a wrong zone (hours off) from UTC.
    if abs((NOW - t).total_seconds()) > 600:
        fail(f"time {text} is not now ({NOW:%Y-%m-%dT%H:%M:%SZ})")


def need(lines, where, pattern):
    if not any(re.search(pattern, line) for line in lines):
        fail(f"{where}: no line matches {pattern!r}")


# What each run logs, as "LEVEL LOGGER: MESSAGE" (levels in lower case).
EXPECTED = [
    "info lstream train: step=5 ",
    "info lstream train: feature 0: final MSE",
    r"warn lstream train: rejected record .* \(future\)",
]


def check_text(path):
    lines = []
    for line in open(path, encoding="utf-8").read().splitlines():
        m = re.fullmatch(r"(\S+) (INFO|WARN|ERROR) (lstream(?: [a-z]+)?): (.+)", line)
        if not m:
            fail(f"{path}: a line without a time and a level: {line!r}")
        check_time(m.group(1))
        lines.append(f"{m.group(2).lower()} {m.group(3)}: {m.group(4)}")
    for pattern in EXPECTED + ["error lstream train: window: '0'"]:
        need(lines, path, pattern)
    return len(lines)


def check_json(path, ranks, error):
    lines, seen = [], set()
    for line in open(path, encoding="utf-8").read().splitlines():
        try:
            o = json.loads(line)
        except ValueError:
            fail(f"{path}: not a JSON line: {line!r}")
        keys = {"time", "level", "logger", "msg"} | ({"rank"} if ranks != {None} else set())
        if set(o) != keys or o["level"] not in ("info", "warn", "error"):
            fail(f"{path}: not the keys {sorted(keys)} with a level: {o}")
        check_time(o["time"])
        seen.add(o.get("rank"))
        lines.append(f'{o["level"]} {o["logger"]}: {o["msg"]}')
    if seen != ranks:
        fail(f"{path}: lines of ranks {sorted(seen, key=str)}, expected {sorted(ranks, key=str)}")
    for pattern in EXPECTED + (["error lstream train: window: '0'"] if error else []):
        need(lines, path, pattern)
    return len(lines)


def main():
    n = check_text(sys.argv[1])
    m = check_json(sys.argv[2], {None}, True)
    k = check_json(sys.argv[3], {0, 1}, False)
    print(f"logs_check: {n} text lines, {m} JSON lines, {k} JSON lines of 2 ranks: each with "
          f"an ISO 8601 UTC time and a level")


if __name__ == "__main__":
    main()
