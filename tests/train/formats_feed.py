"""Writes the same ticks into Kafka in several formats, with an outside
client (confluent-kafka; fastavro for Avro), for tests/train/formats_test.sh.

  formats_feed.py BROKERS TOPIC FORMAT SERIES RECORDS [--malformed] [--schema-id N]
                  [--bad-kafka-time] [--first I]

FORMAT: json | csv | avro | avro-cf (Confluent's framing, schema id N) |
jsonl (the JSON values as text on stdout, no Kafka) | schema (the Avro
schema on stdout). Every series is written
to partition (series % partitions); its values are float32-exact, so each
format carries exactly the same floats: px (a random walk near 100) and qty.
json and avro: the key is the field "sym" and the event time the field "ts"
(ISO 8601 for json, epoch ms for avro), with null Kafka keys; with
--bad-kafka-time the Kafka timestamps run backwards and far from the
payload's. --first I: the ticks' times go on from tick I (a feed written in
several runs). csv: key = sym, Kafka timestamp = the event time.
--malformed (json): after each partition's first 200 ticks, one tick
without px, one with qty as a string, one truncated object.
"""
import io
import json
import math
import struct
import sys

import numpy as np

SCHEMA = {
    "type": "record", "name": "Tick",
    "fields": [
        {"name": "sym", "type": "string"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "px", "type": "float"},
        {"name": "qty", "type": "double"},
        {"name": "venue", "type": ["null", "string"], "default": None},
    ],
}
T0 = 1704205800000  # 2024-01-02T14:30:00Z


def ticks(series, records, first=0):
    """(series, i, sym, ms, px, qty) in time order, float32-exact values;
    times from tick `first` on."""
    rng = np.random.default_rng(7)
    px = np.full(series, 100.0)
    for i in range(records):
        px += rng.normal(0, 0.5, series)
        qty = rng.integers(1, 500, series)
        for s in range(series):
            yield (s, i, f"SYM{s:03d}", T0 + 1000 * (first + i) + s,
                   float(np.float32(px[s])), float(np.float32(qty[s] + 0.25 * math.sin(i))))


def iso(ms):
    import datetime
    t = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def main():
    brokers, topic, fmt, series, records = sys.argv[1:6]
    series, records = int(series), int(records)
    malformed = "--malformed" in sys.argv
    bad_time = "--bad-kafka-time" in sys.argv
    schema_id = int(sys.argv[sys.argv.index("--schema-id") + 1]) if "--schema-id" in sys.argv else 7
    first = int(sys.argv[sys.argv.index("--first") + 1]) if "--first" in sys.argv else 0
    if fmt == "schema":
        print(json.dumps(SCHEMA))
        return
    if fmt == "jsonl":
        for s, i, sym, ms, px, qty in ticks(series, records):
            print(json.dumps({"sym": sym, "ts": iso(ms), "px": px, "qty": qty}))
        return
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": brokers, "linger.ms": 20, "compression.type": "lz4"})
    parts = len(p.list_topics(topic, timeout=10).topics[topic].partitions)
    if fmt.startswith("avro"):
        import fastavro
        parsed = fastavro.parse_schema(SCHEMA)
    n = 0
    for s, i, sym, ms, px, qty in ticks(series, records, first):
        kafka_ts = (T0 - 10**9 - n) if bad_time else ms
        key = None
        if fmt == "json":
            value = json.dumps({"sym": sym, "ts": iso(ms), "px": px, "qty": qty, "venue": "XNAS"})
        elif fmt == "csv":
            value, key = f"{px!r},{qty!r}", sym
        else:
            buf = io.BytesIO()
            if fmt == "avro-cf":
                buf.write(b"\0" + struct.pack(">I", schema_id))
            fastavro.schemaless_writer(buf, parsed,
                                       {"sym": sym, "ts": ms, "px": px, "qty": qty, "venue": None})
            value = buf.getvalue()
        p.produce(topic, value=value, key=key, partition=s % parts, timestamp=kafka_ts)
        n += 1
        if malformed and fmt == "json" and i == 200 and s < parts:
            for bad in ('{"sym":"%s","ts":"%s","qty":3}' % (sym, iso(ms + 1)),
                        '{"sym":"%s","ts":"%s","px":1.5,"qty":"many"}' % (sym, iso(ms + 1)),
                        '{"sym":"%s","ts":"%s","px":1.5,' % (sym, iso(ms + 1))):
                p.produce(topic, value=bad, partition=s % parts, timestamp=kafka_ts)
        p.poll(0)
    left = p.flush(30)
    if left:
        sys.exit(f"formats_feed: {left} records not delivered")


if __name__ == "__main__":
    main()
