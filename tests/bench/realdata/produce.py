#!/usr/bin/python3
"""Writes a real data set (datasets.py) into a Kafka topic with a real client
(Debian's python3-confluent-kafka), as lstream reads it:

  key        the series id
  value      the record's F features, lstream's csv or f32 format
             (include/lstream/ingest.h): csv = the shortest decimal text of
             each float32 value, comma-separated; f32 = F little-endian
             float32
  timestamp  the record's event time (ms), CreateTime

Order: --order time (default) sends records in event-time order across the
series (ties in series order), as a live feed would arrive; --order series
sends all of one series, then the next ("backfilled", issue 17 item 6).
Producer settings match `lstream produce`: the Java client's murmur2
partitioner (a key always lands on the same partition, whichever client
wrote it), idempotence (order kept across retries), lz4, linger 20 ms.

Usage:
  produce.py --brokers HOST:PORT --topic NAME --dataset NAME
             [--format csv|f32] [--order time|series] [-X key=value]...
Prints one line: produce topic=... dataset=... records=N series=S features=F
Exit 1 if any record was not delivered.
"""
import argparse
import struct
import sys
import time

import numpy as np

import datasets


def encode(values, fmt):
    v = np.asarray(values, np.float32)
    if fmt == "f32":
        return struct.pack("<%df" % len(v), *v.tolist())
    return datasets.fmt_values(v).encode()


def produce(brokers, topic, ds, fmt="csv", order="time", extra=None):
    """Sends every record of ds; returns (records delivered, seconds)."""
    from confluent_kafka import Producer  # python3-confluent-kafka

    conf = {"bootstrap.servers": brokers, "partitioner": "murmur2_random",
            "enable.idempotence": True, "compression.type": "lz4", "linger.ms": 20,
            "queue.buffering.max.messages": 500000}
    conf.update(extra or {})
    p = Producer(conf)
    failed = []
    delivered = [0]

    def on_delivery(err, msg):
        if err is not None:
            failed.append(str(err))
        else:
            delivered[0] += 1

    t0 = time.time()
    for key, t_ms, values in ds.records(order):
        while True:
            try:
                p.produce(topic, key=key.encode(), value=encode(values, fmt), timestamp=t_ms,
                          on_delivery=on_delivery)
                break
            except BufferError:  # local queue full: let deliveries drain
                p.poll(0.1)
        p.poll(0)
    left = p.flush(60)
    if left or failed:
        raise RuntimeError("%d records not delivered (%d still queued); first error: %s" %
                           (len(failed) + left, left, failed[0] if failed else "timeout"))
    return delivered[0], time.time() - t0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--dataset", required=True, choices=sorted(datasets.LOADERS))
    ap.add_argument("--format", default="csv", choices=["csv", "f32"])
    ap.add_argument("--order", default="time", choices=["time", "series"])
    ap.add_argument("-X", action="append", default=[], metavar="KEY=VALUE",
                    help="a librdkafka producer property")
    a = ap.parse_args(argv)
    extra = dict(kv.split("=", 1) for kv in a.X)
    ds = datasets.load(a.dataset)
    try:
        n, sec = produce(a.brokers, a.topic, ds, a.format, a.order, extra)
    except RuntimeError as e:
        print("produce.py: %s" % e, file=sys.stderr)
        return 1
    s, _, f = ds.shape()
    print("produce topic=%s dataset=%s records=%d series=%d features=%d format=%s order=%s "
          "seconds=%.3f" % (a.topic, a.dataset, n, s, f, a.format, a.order, sec))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
