#!/usr/bin/python3
"""Checks a predictions topic as a consumer nobody here wrote sees it
(confluent-kafka, isolation.level=read_committed), against the source topic.

  predictions_check.py BROKERS SOURCE PREDICTIONS [options]

Every message must be a forecast (headers lstream-partition, -offset, -time,
-kind, -step, -run) of a record of SOURCE: its key that record's series, its
partition and event time that record's; exactly one per (series, offset,
kind). One message is no forecast: key "lstream", no headers, no value,
the record a publisher produces and aborts to end what its transactional id
left open (kafka_abort_left_open): a real cluster never shows it to
read_committed, the embedded broker (no isolation) does; it is left out.
Options:
  --features F --targets J,K   the values: len(targets) float32 (or numbers)
  --horizon H                  H forecasts of each target a message, h-major
                               (header lstream-horizon: H when above 1); the
                               file has a row per h (column h), its actual
                               the series' record h ahead, or empty
  --quantiles L1,L2,...        and per horizon the quantiles of these levels
                               after the points (header lstream-quantiles),
                               never crossing; the file's q<level>_J columns,
                               never crossing
  --format f32|csv
  --expect next,eval           every source record has a next forecast; every
                               record but each series' last an eval one
  --same-as TOPIC              the values equal TOPIC's, bit for bit, forecast
                               by forecast (an uninterrupted run's)
  --within TOPIC               each forecast is in TOPIC too, bit for bit
  --file CSV                   the predictions file holds the same forecasts
                               (the topic's values are its, as the format
                               rounds them), and its rows' actual values are
                               the series' next records
  --summary OUT                the eval rows of --file give the MSE the run
                               reported (its "target feature=" lines) to 1e-6
Prints one line of counts; exits 1 with the first problem found.
"""
import argparse
import collections
import csv
import math
import re
import struct
import sys

from confluent_kafka import Consumer, TopicPartition


def read_topic(brokers, topic):
    """Every message of topic, read_committed, to the high watermarks."""
    c = Consumer({'bootstrap.servers': brokers, 'group.id': 'predictions-check',
                  'isolation.level': 'read_committed', 'enable.auto.commit': False,
                  'enable.partition.eof': True, 'fetch.wait.max.ms': 20})
    md = c.list_topics(topic, timeout=30)
    parts = sorted(md.topics[topic].partitions)
    tps, left = [], set()
    for p in parts:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        if hi > lo:
            tps.append(TopicPartition(topic, p, lo))
            left.add(p)
    c.assign(tps)
    out = []
    highs = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in parts}
    while left:
        m = c.poll(30)
        if m is None:
            sys.exit(f'FAIL: {topic}: nothing for 30 s, partitions {sorted(left)} unread')
        if m.error():
            if m.partition() in left and m.offset() >= highs[m.partition()]:
                left.discard(m.partition())
            continue
        out.append(m)
        if m.offset() + 1 >= highs[m.partition()]:
            left.discard(m.partition())
    c.close()
    return out


def f32(v):
    return struct.unpack('<f', struct.pack('<f', v))[0]


def fail(msg):
    sys.exit('FAIL: ' + msg)


def decode(value, n, fmt):
    if fmt == 'f32':
        if len(value) != 4 * n:
            fail(f'a value of {len(value)} bytes, not {n} float32')
        return list(struct.unpack(f'<{n}f', value))
    return [float(x) for x in value.decode().split(',')]


def forecasts(msgs, n, fmt, horizon=1, quantiles=''):
    """{(key, offset, kind): (values, headers)}; duplicates fail."""
    out = {}
    for m in msgs:
        if m.key() == b'lstream' and not m.headers() and not m.value():
            continue  # an aborted record ending what was left open (above)
        h = {k: v.decode() for k, v in (m.headers() or [])}
        for name in ('lstream-partition', 'lstream-offset', 'lstream-time', 'lstream-kind',
                     'lstream-step', 'lstream-run'):
            if name not in h:
                fail(f'a message without header {name}: {h}')
        k = (m.key().decode(), int(h['lstream-offset']), h['lstream-kind'])
        if k in out:
            fail(f'forecast {k} published twice')
        if h.get('lstream-horizon', '1') != str(horizon):
            fail(f'forecast {k}: header lstream-horizon {h.get("lstream-horizon")}, not {horizon}')
        if h.get('lstream-quantiles', '') != quantiles:
            fail(f'forecast {k}: header lstream-quantiles {h.get("lstream-quantiles")}, not '
                 f'{quantiles}')
        nq = len(quantiles.split(',')) if quantiles else 0
        values = decode(m.value(), n * horizon * (1 + nq), fmt)
        # h-major: per horizon n points, then n per level; a target's
        # quantiles at a horizon never cross and are finite.
        for hz in range(horizon if nq else 0):
            base = hz * n * (1 + nq)
            for j in range(n):
                q = [values[base + (l + 1) * n + j] for l in range(nq)]
                if not all(math.isfinite(v) for v in q) or any(a > b for a, b in zip(q, q[1:])):
                    fail(f'forecast {k}: horizon {hz + 1} target {j}: quantiles {q} cross')
        out[k] = (values, h, m.value())
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('brokers')
    ap.add_argument('source')
    ap.add_argument('predictions')
    ap.add_argument('--features', type=int, required=True)
    ap.add_argument('--targets', default='all')
    ap.add_argument('--format', default='f32')
    ap.add_argument('--expect', default='')
    ap.add_argument('--same-as')
    ap.add_argument('--within')
    ap.add_argument('--file')
    ap.add_argument('--summary')
    ap.add_argument('--horizon', type=int, default=1)
    ap.add_argument('--quantiles', default='')
    a = ap.parse_args()
    targets = (list(range(a.features)) if a.targets == 'all'
               else [int(x) for x in a.targets.split(',')])
    src = {}  # (key, offset) -> (partition, time, values)
    series = collections.defaultdict(list)  # key -> [offset, ...] in order
    for m in read_topic(a.brokers, a.source):
        key = m.key().decode()
        src[(key, m.offset())] = (m.partition(), m.timestamp()[1],
                                  decode(m.value(), a.features, a.format))
        series[key].append(m.offset())
    fc = forecasts(read_topic(a.brokers, a.predictions), len(targets), a.format, a.horizon,
                   a.quantiles)
    runs = set()
    for (key, off, kind), (vals, h, _) in fc.items():
        if (key, off) not in src:
            fail(f'forecast {(key, off, kind)} of no record of {a.source}')
        part, time, _ = src[(key, off)]
        if int(h['lstream-partition']) != part or int(h['lstream-time']) != time:
            fail(f'forecast {(key, off, kind)}: partition/time headers {h} are not the '
                 f'record\'s {part}, {time}')
        if kind not in ('next', 'eval') or int(h['lstream-step']) < 0:
            fail(f'forecast {(key, off, kind)}: headers {h}')
        if not all(math.isfinite(v) for v in vals):
            fail(f'forecast {(key, off, kind)}: {vals}')
        runs.add(h['lstream-run'])
    if len(runs) > 1:
        fail(f'forecasts of {len(runs)} runs: {runs}')
    kinds = collections.Counter(k for (_, _, k) in fc)
    for kind in [k for k in a.expect.split(',') if k]:
        for key, offs in series.items():
            want = offs if kind == 'next' else offs[:-1]
            for off in want:
                if (key, off, kind) not in fc:
                    fail(f'no {kind} forecast after {key} offset {off}')
        n = sum(len(o) for o in series.values()) - (len(series) if kind == 'eval' else 0)
        if kinds[kind] != n:
            fail(f'{kinds[kind]} {kind} forecasts, {n} expected')
    if a.same_as:
        ref = forecasts(read_topic(a.brokers, a.same_as), len(targets), a.format, a.horizon,
                        a.quantiles)
        if set(ref) != set(fc):
            fail(f'{len(set(ref) ^ set(fc))} forecasts are in one topic only')
        for k, (_, h, raw) in fc.items():
            if raw != ref[k][2] or h['lstream-step'] != ref[k][1]['lstream-step']:
                fail(f'forecast {k}: {fc[k][0]} (step {h["lstream-step"]}), the uninterrupted '
                     f'run\'s {ref[k][0]} (step {ref[k][1]["lstream-step"]})')
    if a.within:
        ref = forecasts(read_topic(a.brokers, a.within), len(targets), a.format, a.horizon,
                        a.quantiles)
        for k, (_, h, raw) in fc.items():
            if k not in ref or raw != ref[k][2]:
                fail(f'forecast {k}: {fc[k][0]}, {a.within} holds '
                     f'{ref[k][0] if k in ref else "none"}')
    if a.file:
        check_file(a, fc, src, series, targets)
    print(f'predictions_check: {len(fc)} forecasts ({dict(kinds)}), each once, of '
          f'{len(src)} records of {len(series)} series')


def check_file(a, fc, src, series, targets):
    rows = list(csv.DictReader(open(a.file, newline='')))
    seen = set()
    sq = collections.defaultdict(float)
    n_eval = 0
    if (a.horizon > 1) != ('h' in (rows[0] if rows else {})):
        fail(f'{a.file}: an h column with --horizon {a.horizon} only above 1')
    n = len(targets)
    for r in rows:
        h = int(r.get('h', 1))
        k = (r['series'], int(r['offset']), r['kind'])
        if (k, h) in seen or not 1 <= h <= a.horizon:
            fail(f'{a.file}: row {k} h={h} twice, or h beyond 1..{a.horizon}')
        seen.add((k, h))
        levels = a.quantiles.split(',') if a.quantiles else []
        vals = [float(r[f'forecast_{j}']) for j in targets]
        qs = [[float(r[f'q{l}_{j}']) for j in targets] for l in levels]
        for lo, hi in zip(qs, qs[1:]):
            if any(x > y for x, y in zip(lo, hi)):
                fail(f'{a.file}: row {k} h={h}: crossing quantiles {qs}')
        vals += [x for q in qs for x in q]
        if k in fc:
            want = [f32(v) for v in vals] if a.format == 'f32' else vals
            vh = n * (1 + len(levels))
            if want != fc[k][0][(h - 1) * vh:h * vh]:
                fail(f'{a.file}: row {k} h={h}: {vals}, the topic holds {fc[k][0]}')
        offs = series[r['series']]
        i = offs.index(int(r['offset']))
        if r[f'actual_{targets[0]}'] == '':
            # Unknown when the row was written: h = 1's only at a series' end.
            if h == 1 and i + 1 < len(offs):
                fail(f'{a.file}: row {k} has no actual though the series has a next record')
            continue
        if i + h >= len(offs):
            fail(f'{a.file}: row {k} h={h} has an actual beyond the series\' last record')
        nxt = src[(r['series'], offs[i + h])][2]
        act = [f32(float(r[f'actual_{j}'])) for j in targets]  # written %.9g: float32's
        if act != [nxt[j] for j in targets]:
            fail(f'{a.file}: row {k} h={h}: actual {act}, the series\' record {h} ahead holds '
                 f'{[nxt[j] for j in targets]}')
        if h == 1 and r['kind'] == 'eval':
            n_eval += 1
            for j, (f, v) in zip(targets, zip(vals[:n], act)):
                sq[j] += (f - v) ** 2
    missing = {(k, h) for k in fc for h in range(1, a.horizon + 1)} - seen
    if a.file and missing:
        fail(f'{len(missing)} forecasts (per h) of the topic are not in {a.file}')
    if a.summary:
        lines = [l for l in open(a.summary) if l.startswith('target feature=')]
        for l in lines:
            j = int(re.search(r'feature=(\d+)', l).group(1))
            mse = float(re.search(r' mse_data=(\S+)', l).group(1))
            got = sq[j] / n_eval
            # The run sums in double, this in Python's double, in another
            # order: they agree to ~1e-12; the report prints 9 digits.
            if abs(got - mse) > 1e-6 * abs(mse):
                fail(f'feature {j}: the eval forecasts give MSE {got!r}, the run reported {mse}')
            print(f'predictions_check: feature {j}: MSE of the {n_eval} eval forecasts '
                  f'{got:.10g}, reported {mse}')


main()
