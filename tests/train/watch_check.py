"""Checks for tests/train/watch_test.sh, each against an outside reader.

  metrics FILE RANK PARTITIONS TARGETS [H [LEVELS]]
                                   a /metrics scrape, parsed by Prometheus'
                                   own parser (prometheus_client, Debian's
                                   python3-prometheus-client): every family
                                   has HELP and TYPE, counters end in _total,
                                   every sample is labelled rank="RANK", the
                                   metrics lstream promises are there, the
                                   per-target ones labelled target= each of
                                   the features TARGETS ("0,1"), their ratios
                                   those of their losses; with H (the
                                   run's --horizon, > 1) the per-horizon
                                   families, one sample per target and
                                   h = 1..H (labels target=, h=); with
                                   LEVELS (the run's --quantiles) the
                                   quantile families, one sample per level,
                                   target and h (labels quantile=, target=,
                                   h=), coverages in [0, 1] (a live run
                                   part way: train_quantiles checks them
                                   against their levels); without, none
  clients URL                      slow and malformed clients: 8 connections
                                   that send half a request and wait, and 3
                                   bad requests (binary garbage, no version,
                                   a 64 KiB header); a scrape meanwhile is
                                   answered at once; the bad ones and a slow
                                   one are refused or dropped (timeout)
  slow URL                         80 clients from another address
                                   (127.0.0.2) each sending a request a
                                   byte every 0.2 s, never finishing it,
                                   reconnecting when dropped: once every
                                   one has sent 3 bytes or been dropped,
                                   20 /health requests from 127.0.0.1 are
                                   each answered within 1 s
  tensorboard DIR METRICS FROM     TensorBoard's own reader (the tensorboard
                                   package) over the event files of a run
                                   killed and resumed from the snapshot of
                                   step FROM: steps 1..N each once, strictly
                                   increasing, the values those of the
                                   --metrics file; the resumed file starts a
                                   session at FROM + 1, past which the killed
                                   run had written (the records TensorBoard
                                   must drop); per target feature its
                                   data-unit losses and ratio equal to the
                                   --metrics file's

Exits 1 with a message on the first failure.
"""
import json
import math
import os
import socket
import sys
import time
import urllib.request


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


# ---------------------------------------------------------------------------
# /metrics

# Families lstream serves on every rank with partitions (name without
# _total for counters, as the parser names them), and the per-label ones.
EXPECTED = [
    "lstream_steps", "lstream_updates", "lstream_windows_trained", "lstream_records_trained",
    "lstream_loss", "lstream_baseline_loss", "lstream_loss_ratio", "lstream_loss_smoothed",
    "lstream_baseline_loss_smoothed", "lstream_loss_ratio_smoothed", "lstream_gradient_norm",
    "lstream_learning_rate", "lstream_compute_seconds", "lstream_ingest_wait_seconds",
    "lstream_ingest_wait_ratio", "lstream_heartbeat_age_seconds", "lstream_consumer_connected",
    "lstream_consumer_records", "lstream_consumer_records_rejected", "lstream_queued_windows",
    "lstream_consumer_lag_records", "lstream_consumer_high_watermark", "lstream_series",
    "lstream_state_bytes", "lstream_snapshots", "lstream_snapshot_failures",
    "lstream_snapshot_age_seconds", "lstream_healthy", "lstream_nonfinite_steps",
    "lstream_lag_seconds",
]
REASONS = {"size", "parse", "nonfinite", "backwards", "key", "partition", "range", "field", "type",
           "time", "future"}
# Per target feature (label target="feature"), in the data's units: each
# ratio family and the loss and baseline families it divides.
TARGET_RATIOS = {
    "lstream_target_loss_ratio": ("lstream_target_loss", "lstream_target_baseline_loss"),
    "lstream_target_loss_ratio_smoothed": ("lstream_target_loss_smoothed",
                                           "lstream_target_baseline_loss_smoothed"),
}


def check_targets(families, targets):
    """The per-target families: one sample per target feature, losses >= 0,
    each ratio its loss over its baseline (all printed with 10 digits)."""
    for ratio, (loss, base) in TARGET_RATIOS.items():
        by = {}
        for name in (ratio, loss, base):
            if name not in families:
                fail(f"{name}: missing from /metrics")
            by[name] = {s.labels.get("target"): s.value for s in families[name].samples}
            if sorted(by[name]) != sorted(targets):
                fail(f"{name}: targets {sorted(by[name])}, expected {sorted(targets)}")
        for t in targets:
            lv, bv, rv = by[loss][t], by[base][t], by[ratio][t]
            if lv < 0 or bv <= 0 or abs(rv - lv / bv) > 1e-8 * max(rv, 1e-30):
                fail(f"target {t}: {ratio} {rv}, {loss} {lv}, {base} {bv}")


HORIZON_FAMILIES = ("lstream_horizon_loss_smoothed", "lstream_horizon_loss_ratio_last_smoothed",
                    "lstream_horizon_loss_ratio_snaive_smoothed")


def check_horizons(families, targets, H):
    """The per-horizon families: with H > 1 one sample per target and
    h = 1..H, losses >= 0, ratios > 0 (a model no worse than 10x the last
    value on a noiseless sine at every h); with H = 1 none."""
    for name in HORIZON_FAMILIES:
        fam = families.get(name)
        if H <= 1:
            if fam is not None:
                fail(f"{name}: served without --horizon")
            continue
        if fam is None:
            fail(f"{name}: missing from /metrics with --horizon {H}")
        got = {(s.labels.get("target"), s.labels.get("h")): s.value for s in fam.samples}
        want = {(t, str(h)) for t in targets for h in range(1, H + 1)}
        if set(got) != want:
            fail(f"{name}: (target, h) {sorted(got)}, expected {sorted(want)}")
        for key, v in got.items():
            if not (v >= 0) or ("ratio" in name and not 0 < v < 10):
                fail(f"{name}{key}: {v}")
    if H > 1:
        ratios = {k: round(v, 3) for k, v in (((s.labels["target"], s.labels["h"]), s.value)
                  for s in families[HORIZON_FAMILIES[1]].samples)}
        print(f"/metrics: horizons 1..{H}, smoothed ratio to the last value {ratios}")


QUANTILE_FAMILIES = ("lstream_quantile_coverage_smoothed", "lstream_quantile_pinball_loss_smoothed")


def check_quantiles(families, targets, H, levels):
    """The quantile families: with levels one sample per level, target and
    h = 1..H, a coverage that is a share (in [0, 1]) and a pinball loss >= 0;
    without, none. Not how near a coverage is to its level: the run is live,
    scraped at whichever step it has reached (its steps are formed from
    what has arrived), so the smoothed coverage there is the calibration
    part way (0.07-0.93 seen for 0.1 and 0.9; once 0.33 for 0.1 on the
    sanitizer build): train_quantiles checks the coverage on a replay,
    whose steps and figures do not depend on timing."""
    for name in QUANTILE_FAMILIES:
        fam = families.get(name)
        if not levels:
            if fam is not None:
                fail(f"{name}: served without --quantiles")
            continue
        if fam is None:
            fail(f"{name}: missing from /metrics with --quantiles {','.join(levels)}")
        got = {(s.labels.get("quantile"), s.labels.get("target"), s.labels.get("h")): s.value
               for s in fam.samples}
        want = {(q, t, str(h)) for q in levels for t in targets for h in range(1, H + 1)}
        if set(got) != want:
            fail(f"{name}: (quantile, target, h) {sorted(got)}, expected {sorted(want)}")
        for (q, t, h), v in got.items():
            if not (v >= 0) or ("coverage" in name and not v <= 1):
                fail(f"{name}{(q, t, h)}: {v}")
    if levels:
        cov = {k: round(v, 3) for k, v in (((s.labels["quantile"], s.labels["target"],
                                              s.labels["h"]), s.value)
               for s in families[QUANTILE_FAMILIES[0]].samples)}
        print(f"/metrics: quantiles {','.join(levels)}, smoothed coverage {cov}")


def check_metrics(path, rank, partitions, targets, H=1, levels=()):
    from prometheus_client.parser import text_string_to_metric_families

    text = open(path, encoding="utf-8").read()
    families = {}
    for fam in text_string_to_metric_families(text):
        if fam.name in families:
            fail(f"{fam.name}: two families of that name")
        families[fam.name] = fam
        if fam.type not in ("counter", "gauge"):
            fail(f"{fam.name}: type {fam.type} (no # TYPE line?)")
        if not fam.documentation:
            fail(f"{fam.name}: no # HELP text")
        for s in fam.samples:
            want = fam.name + "_total" if fam.type == "counter" else fam.name
            if s.name != want:
                fail(f"{fam.name}: sample {s.name}, expected {want}")
            if s.labels.get("rank") != rank:
                fail(f"{s.name}{s.labels}: not labelled rank=\"{rank}\"")
            if math.isnan(s.value):
                fail(f"{s.name}{s.labels}: NaN")
    for name in EXPECTED:
        if name not in families or not families[name].samples:
            fail(f"{name}: missing from /metrics")
    one = {n: f.samples[0].value for n, f in families.items() if len(f.samples) == 1}
    if one["lstream_steps"] < 1 or one["lstream_records_trained"] < 1:
        fail(f"nothing trained yet: steps {one['lstream_steps']}")
    if one["lstream_consumer_connected"] != 1 or one["lstream_healthy"] != 1:
        fail("not connected or not healthy while the broker is up")
    reasons = {s.labels["reason"] for s in families["lstream_consumer_records_rejected"].samples}
    if reasons != REASONS:
        fail(f"rejection reasons {sorted(reasons)}, expected {sorted(REASONS)}")
    lags = {s.labels["partition"]: s.value for s in families["lstream_consumer_lag_records"].samples}
    if sorted(lags) != [str(p) for p in range(partitions)] or min(lags.values()) < 0:
        fail(f"lag per partition: {lags}")
    check_targets(families, targets)
    check_horizons(families, targets, H)
    check_quantiles(families, targets, H, levels)
    smooth = {s.labels["target"]: round(s.value, 4)
              for s in families["lstream_target_loss_ratio_smoothed"].samples}
    print(f"/metrics: {len(families)} families, {sum(len(f.samples) for f in families.values())} "
          f"samples, steps {one['lstream_steps']:.0f}, lag {lags}, smoothed ratio per target "
          f"{smooth}")


# ---------------------------------------------------------------------------
# Slow and malformed clients

def first_line(sock, limit):
    """The status line the server sends on sock within limit seconds, or
    "closed" when it closes the connection."""
    sock.settimeout(limit)
    try:
        data = sock.recv(64)
    except (ConnectionResetError, BrokenPipeError):
        return "closed"
    except TimeoutError:
        fail(f"no answer and no close in {limit} s")
    return data.split(b"\r\n")[0].decode("latin-1") if data else "closed"


def check_clients(url):
    host, port = url.split("//")[1].rsplit(":", 1)
    addr = (host, int(port))
    slow = []
    for _ in range(8):  # half a request each, then silence
        s = socket.create_connection(addr, timeout=5)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        slow.append(s)
    bad = {}
    for name, request in (("binary garbage", b"\x00\x01\x02 nonsense \xff\r\n\r\n"),
                          ("no version", b"GET\r\n\r\n"),
                          ("64 KiB header", b"GET /metrics HTTP/1.1\r\nX-Big: " +
                           b"a" * 65536 + b"\r\n\r\n")):
        s = socket.create_connection(addr, timeout=5)
        try:
            s.sendall(request)
        except (ConnectionResetError, BrokenPipeError):
            pass
        bad[name] = s
    t0 = time.monotonic()
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        body = r.read()
        if r.status != 200 or b"lstream_steps_total" not in body:
            fail(f"a scrape beside slow and bad clients: status {r.status}")
    took = time.monotonic() - t0
    # Each bad request is refused or dropped, at the latest by the
    # server's inactivity timeout (10 s; 20 s leaves room for a loaded
    # machine); so is a slow client.
    answers = {name: first_line(s, 20) for name, s in bad.items()}
    answers["slow client"] = first_line(slow[0], 20)
    for name, line in answers.items():
        if line.startswith("HTTP/1.1 200"):
            fail(f"the {name} request was answered {line}")
    for s in slow + list(bad.values()):
        s.close()
    print(f"clients: {answers}; a scrape beside 8 slow and 3 bad clients took "
          f"{took * 1e3:.1f} ms")


ATTACKERS = 80
ATTACKER_ADDRESS = "127.0.0.2"  # loopback: any 127.x address reaches the server
TRICKLE_S = 0.2                 # a byte per client this often: far inside any idle timeout
HEALTH_BOUND_S = 1.0            # issue 23's requirement for /health under the attack
PROBES = 20


class Attacker:
    """A client that sends a request one byte at a time and never ends it;
    dropped by the server, it connects again."""

    REQUEST = b"GET /health HTTP/1.1\r\nHost: slow\r\nX-Slow: " + b"a" * 4096

    def __init__(self, addr):
        self.addr, self.sock, self.sent, self.dropped = addr, None, 0, 0

    def connect(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.bind((ATTACKER_ADDRESS, 0))
        try:
            s.connect(self.addr)
        except BlockingIOError:
            pass  # completes in the kernel; sends wait for it
        self.sock, self.sent = s, 0

    def trickle(self):
        """One more byte; a connection the server closed is replaced."""
        try:
            if self.sock.recv(1, socket.MSG_PEEK) == b"":
                raise ConnectionResetError
        except (BlockingIOError, OSError) as e:
            if not isinstance(e, BlockingIOError):
                self.drop()
                return
        try:
            self.sent += self.sock.send(self.REQUEST[self.sent % len(self.REQUEST):][:1])
        except BlockingIOError:
            pass  # not connected yet
        except OSError:
            self.drop()

    def drop(self):
        self.sock.close()
        self.dropped += 1
        self.connect()


def probe(url, limit):
    """Seconds until /health's status line arrived (a new connection each)."""
    host, port = url.split("//")[1].rsplit(":", 1)
    t0 = time.monotonic()
    s = socket.create_connection((host, int(port)), timeout=limit)
    try:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
        line = s.recv(64).split(b"\r\n")[0]
    except OSError as e:
        line = repr(e).encode()
    finally:
        s.close()
    took = time.monotonic() - t0
    if not line.startswith(b"HTTP/1.1 200") and not line.startswith(b"HTTP/1.1 503"):
        fail(f"/health beside {ATTACKERS} slow clients: {line!r} after {took:.2f} s")
    return took


def check_slow(url):
    import threading

    host, port = url.split("//")[1].rsplit(":", 1)
    attackers = [Attacker((host, int(port))) for _ in range(ATTACKERS)]
    for a in attackers:
        a.connect()
    stop = threading.Event()

    def run():
        while not stop.is_set():
            for a in attackers:
                a.trickle()
            stop.wait(TRICKLE_S)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        # The attack in full force before the first probe: every client
        # holds a connection the server accepted (3 bytes sent on it), or
        # was dropped by the server at least once. 60 s: a loaded machine.
        deadline = time.monotonic() + 60
        while not all(a.sent >= 3 or a.dropped for a in attackers):
            if time.monotonic() > deadline:
                fail("the slow clients did not get going in 60 s")
            time.sleep(0.05)
        times = []
        for _ in range(PROBES):
            # A probe that waits for a connection slot waits until the
            # server drops a slow client (never, or its idle timeout):
            # 5 s tells that apart from an answer within the bound.
            times.append(probe(url, 5.0))
        held = sum(1 for a in attackers if a.sent >= 3)
        dropped = sum(a.dropped for a in attackers)
    finally:
        stop.set()
        t.join()
        for a in attackers:
            a.sock.close()
    times.sort()
    print(f"slow: {ATTACKERS} slow clients from {ATTACKER_ADDRESS} ({held} connections held, "
          f"{dropped} dropped by the server); /health answered in median "
          f"{times[len(times) // 2] * 1e3:.1f} ms, max {times[-1] * 1e3:.1f} ms over {PROBES}")
    if times[-1] > HEALTH_BOUND_S:
        fail(f"/health took {times[-1]:.2f} s beside {ATTACKERS} slow clients (bound "
             f"{HEALTH_BOUND_S} s)")


# ---------------------------------------------------------------------------
# TensorBoard

# Scalars and the --metrics field each must equal, with the relative
# tolerance: event files hold float32 (1e-6 is ~16 float32 ulps, room for
# the %.9g text of the metrics file rounded again to float32); lr and
# grad_norm are printed with %.6g there (6 digits: 1e-5).
SCALARS = {
    "loss/model": ("loss", 1e-6),
    "loss/baseline": ("baseline", 1e-6),
    "optimizer/learning_rate": ("lr", 1e-5),
    "optimizer/gradient_norm": ("grad_norm", 1e-5),
}


def metrics_by_step(path):
    """The last line of each step in a --metrics file (a resumed run
    writes again the steps after its snapshot; a line torn by the kill is
    skipped)."""
    rows = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        rows[row["step"]] = row
    return rows


def check_session_start(directory, resumed):
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    files = sorted(f for f in os.listdir(directory) if "tfevents" in f)
    if len(files) != 2:
        fail(f"expected the killed run's event file and the resumed run's: {files}")
    killed = [e for e in EventFileLoader(os.path.join(directory, files[0])).Load()]
    last_killed = max(e.step for e in killed if e.summary.value)
    if last_killed <= resumed:
        fail(f"the killed run wrote up to step {last_killed}, not past the snapshot "
             f"({resumed}): nothing for TensorBoard to drop, the test proves nothing")
    head = [e for e in EventFileLoader(os.path.join(directory, files[1])).Load()][:2]
    if head[0].file_version != "brain.Event:2":
        fail(f"the first event is not the file version: {head[0]}")
    if head[1].session_log.status != 1 or head[1].step != resumed + 1:
        fail(f"the resumed file does not start a session at step {resumed + 1}: {head[1]}")
    return last_killed


def check_tensorboard(directory, metrics_path, resumed):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    last_killed = check_session_start(directory, resumed)
    acc = EventAccumulator(directory, size_guidance={"scalars": 0})
    acc.Reload()
    rows = metrics_by_step(metrics_path)
    n = max(rows)
    compared = 0
    for tag, (field, tol) in SCALARS.items():
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        if steps != list(range(1, n + 1)):
            bad = [b for a, b in zip(steps, steps[1:]) if b <= a][:5]
            fail(f"{tag}: steps are not 1..{n} once each (after {len(steps)} events; "
                 f"not increasing at {bad})")
        for e in events:
            row = rows.get(e.step)
            if row is None:
                continue
            want = row[field]
            if abs(e.value - want) > tol * max(abs(want), 1e-30):
                fail(f"{tag} step {e.step}: {e.value!r} in the events, {want!r} in --metrics")
            compared += 1
    # The kill loses the lines the metrics file had buffered: most steps
    # must still be there to compare.
    if len(rows) < 0.8 * n:
        fail(f"only {len(rows)} of {n} steps in the metrics file")
    ratio = acc.Scalars("loss/ratio")
    for e in ratio:
        row = rows.get(e.step)
        if row and abs(e.value - row["loss"] / row["baseline"]) > 1e-5 * row["loss"] / row["baseline"]:
            fail(f"loss/ratio step {e.step}: {e.value} vs {row['loss'] / row['baseline']}")
    for tag in ("throughput/records_per_second", "ingest/consumer_lag_records"):
        if [e.step for e in acc.Scalars(tag)] != list(range(1, n + 1)):
            fail(f"{tag}: not one value a step")
    compared += check_tensorboard_targets(acc, rows, n)
    print(f"tensorboard: steps 1..{n} strictly increasing across the restart (killed run wrote "
          f"to {last_killed}, resumed from {resumed}); {compared} values equal to --metrics")


def check_tensorboard_targets(acc, rows, n):
    """target_F/loss, /baseline and /ratio (data units) against the
    --metrics file's targets entries of the same step; returns how many
    values were compared."""
    features = [t["feature"] for t in rows[max(rows)]["targets"]]
    if not features:
        fail("the --metrics file names no target")
    compared = 0
    for j, f in enumerate(features):
        for what in ("loss", "baseline", "ratio"):
            tag = f"target_{f}/{what}"
            events = acc.Scalars(tag)
            if [e.step for e in events] != list(range(1, n + 1)):
                fail(f"{tag}: not one value a step")
            for e in events:
                row = rows.get(e.step)
                if row is None:
                    continue
                t = row["targets"][j]
                want = {"loss": t["mse_data"], "baseline": t["baseline_data"],
                        "ratio": t["mse_data"] / t["baseline_data"]}[what]
                # float32 in the events, %.9g in the metrics file (as SCALARS)
                if abs(e.value - want) > 1e-6 * max(abs(want), 1e-30):
                    fail(f"{tag} step {e.step}: {e.value!r} in the events, {want!r} in --metrics")
                compared += 1
    compared += check_tensorboard_horizons(acc, rows, features, n)
    return compared


def check_tensorboard_smoothed(acc, rows, features, n, field, key, tag, whats):
    """The smoothed per-entry scalars of the --metrics file's `field`
    entries (horizons, quantiles), one set per key(entry): tag(key, f, what)
    for each of whats, a finite value >= 0 at every step from the first
    that scored the key."""
    keys = sorted({key(z) for z in rows[max(rows)].get(field, [])})
    compared = 0
    for k in keys:
        first = min(s for s, r in rows.items()
                    if any(key(z) == k and z["count"] > 0 for z in r.get(field, [])))
        for f in features:
            for what in whats:
                name = tag(k, f, what)
                if name not in acc.Tags()["scalars"]:
                    fail(f"{name}: not in the event files with {field} {keys}")
                events = acc.Scalars(name)
                steps = [e.step for e in events]
                if steps != list(range(first, n + 1)):
                    fail(f"{name}: steps {steps[:3]}..{steps[-3:]}, expected {first}..{n}")
                if not all(math.isfinite(e.value) and e.value >= 0 for e in events):
                    fail(f"{name}: a value not finite or negative")
                compared += len(events)
    if keys:
        print(f"tensorboard: {field} {keys}: {compared} smoothed values")
    return compared


def check_tensorboard_horizons(acc, rows, features, n):
    """With --horizon H > 1 (the --metrics file's horizons entries):
    horizon_H_F/loss, /ratio_last and /ratio_snaive; with --quantiles (its
    quantiles entries) quantile_L_H_F/coverage and /pinball; smoothed."""
    return check_tensorboard_smoothed(
        acc, rows, features, n, "horizons", lambda z: z["h"],
        lambda h, f, what: f"horizon_{h}_{f}/{what}", ("loss", "ratio_last", "ratio_snaive")) + \
        check_tensorboard_smoothed(
            acc, rows, features, n, "quantiles", lambda z: (z["level"], z["h"]),
            lambda k, f, what: f"quantile_{k[0]:g}_{k[1]}_{f}/{what}", ("coverage", "pinball"))


def main():
    what = sys.argv[1]
    if what == "metrics":
        check_metrics(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5].split(","),
                      int(sys.argv[6]) if len(sys.argv) > 6 else 1,
                      sys.argv[7].split(",") if len(sys.argv) > 7 else ())
    elif what == "clients":
        check_clients(sys.argv[2])
    elif what == "slow":
        check_slow(sys.argv[2])
    elif what == "tensorboard":
        check_tensorboard(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        fail(f"unknown check {what}")


if __name__ == "__main__":
    main()
