"""A paced live feed for tests/bench/live_latency.sh, written by a real
client (confluent-kafka): SERIES series keyed K0000, K0001, ..., RATE records
per second in all for SECONDS seconds, each from a series drawn at random
(seeded: series tick independently, so their windows complete spread over
time, not all at once), each record an f32 sine value stamped with the
wall-clock time it is sent (ms), so that a trainer's lag_ms is the time from
send to trained. linger.ms=5: batches of a few ms, so that the embedded
broker (one thread) is not handed thousands of one-record requests a second;
murmur2_random: lstream's partitioner.

Usage: /usr/bin/python3 live_producer.py BOOTSTRAP TOPIC SERIES RATE SECONDS
"""
import math
import random
import struct
import sys
import time

from confluent_kafka import Producer


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    series, rate, seconds = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                  "partitioner": "murmur2_random", "queue.buffering.max.messages": 1000000})
    keys = [("K%04d" % s).encode() for s in range(series)]
    steps = [0] * series
    rng = random.Random(1)
    start = time.time()
    i = 0
    while True:
        due = start + i / rate
        now = time.time()
        if due - start >= seconds:
            break
        if due > now:
            time.sleep(due - now)
        s = rng.randrange(series)
        value = struct.pack("<f", math.sin(steps[s] / 7.0 + s))
        steps[s] += 1
        p.produce(topic, key=keys[s], value=value, timestamp=int(time.time() * 1000))
        p.poll(0)
        i += 1
    left = p.flush(30)
    if left:
        sys.exit("%d records not delivered" % left)


if __name__ == "__main__":
    main()
