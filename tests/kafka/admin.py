#!/usr/bin/python3
"""Admin calls on a real Kafka cluster for the tests, through a real client
(Debian's python3-confluent-kafka, librdkafka's admin API): quicker than the
broker's Java tools (no JVM start) for what the tests only set up.

  admin.py ready BROKERS NODES SECONDS   wait until NODES brokers are in the
                                         metadata and the cluster takes a
                                         transaction and a group's offset commit
                                         (its internal topics exist and have
                                         leaders); exit 1 after SECONDS
  admin.py create BROKERS TOPIC:PARTITIONS[:REPLICAS] [--config K=V,...]
                                         (retried while an earlier topic of the
                                         name is still being deleted)
  admin.py partitions BROKERS TOPIC TOTAL   grow a topic to TOTAL partitions
  admin.py delete BROKERS TOPIC          delete, then wait until it is gone
  admin.py config BROKERS TOPIC K=V,...  set a topic's configuration (replaces
                                         the topic's other overrides)
  admin.py leader BROKERS TOPIC PARTITION   print the partition leader's node id
  admin.py watermarks BROKERS TOPIC      print "low high" per partition, a line each
  admin.py count BROKERS TOPIC           print "committed=C all=A open=P": the messages
                                         a read_committed and a read_uncommitted
                                         consumer read, and the partitions whose
                                         last stable offset is behind their high
                                         watermark (a transaction is open there)

Every call exits 1 with a message naming what failed.
"""
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

WARMUP = 'lstream-warmup'


def fail(msg):
    sys.exit(f'admin.py: {msg}')


def admin(brokers):
    # Errors come back as exceptions; the client's log (a node down) is noise here.
    return AdminClient({'bootstrap.servers': brokers, 'log_level': 2})


def result(futures, what):
    for name, f in futures.items():
        try:
            f.result()
        except KafkaException as e:
            fail(f'{what} {name}: {e}')


def create(brokers, spec, config, deadline):
    parts = spec.split(':')
    topic, n = parts[0], int(parts[1])
    rf = int(parts[2]) if len(parts) > 2 else -1  # the broker's default.replication.factor
    a = admin(brokers)
    while True:
        f = a.create_topics([NewTopic(topic, n, rf, config=config)], operation_timeout=30)[topic]
        try:
            f.result()
            return
        except KafkaException as e:
            code = e.args[0].code()
            # A topic of the name being deleted still exists for a while.
            if code == KafkaError.TOPIC_ALREADY_EXISTS and time.time() < deadline:
                time.sleep(0.2)
                continue
            fail(f'create {spec}: {e}')


def wait_gone(brokers, topic, deadline):
    a = admin(brokers)
    while topic in a.list_topics(timeout=10).topics:
        if time.time() > deadline:
            fail(f'topic {topic} still listed 60 s after its deletion')
        time.sleep(0.2)


def ready(brokers, nodes, seconds):
    deadline = time.time() + seconds
    a = admin(brokers)
    last = None
    while True:
        try:
            md = a.list_topics(timeout=5)
            if len(md.brokers) >= nodes:
                break
            last = f'{len(md.brokers)} of {nodes} brokers registered'
        except KafkaException as e:
            last = str(e)
        if time.time() > deadline:
            fail(f'the cluster at {brokers} is not up after {seconds} s: {last}')
        time.sleep(0.2)
    if WARMUP not in md.topics:
        create(brokers, f'{WARMUP}:1:{nodes}', {}, deadline)
    # A transaction and an offset commit: the first ones create the cluster's
    # __transaction_state and __consumer_offsets topics, which takes seconds.
    p = Producer({'bootstrap.servers': brokers, 'transactional.id': WARMUP})
    left = max(1.0, deadline - time.time())
    try:
        p.init_transactions(left)
        p.begin_transaction()
        p.produce(WARMUP, b'warm-up')
        p.commit_transaction(max(1.0, deadline - time.time()))
    except KafkaException as e:
        fail(f'the cluster at {brokers} takes no transaction within {seconds} s: {e}')
    c = Consumer({'bootstrap.servers': brokers, 'group.id': WARMUP, 'enable.auto.commit': False})
    while True:
        try:
            c.commit(offsets=[TopicPartition(WARMUP, 0, 1)], asynchronous=False)
            break
        except KafkaException as e:
            if time.time() > deadline:
                fail(f'the cluster at {brokers} takes no offset commit within {seconds} s: {e}')
            time.sleep(0.2)
    c.close()


def count(brokers, topic):
    """The messages a consumer of each isolation level reads, and the
    partitions where the two levels' end offsets differ (LSO < HW)."""
    got, ends = {}, {}
    for iso in ('read_committed', 'read_uncommitted'):
        c = Consumer({'bootstrap.servers': brokers, 'group.id': 'admin-count',
                      'isolation.level': iso, 'enable.partition.eof': True,
                      'enable.auto.commit': False})
        parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
        # For read_committed, ListOffsets' end is the last stable offset.
        ends[iso] = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                     for p in parts]
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        n, eof = 0, set()
        while len(eof) < len(parts):
            m = c.poll(30)
            if m is None:
                fail(f'{topic}: nothing read for 30 s ({iso}), partitions at their end: {eof}')
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    fail(f'{topic} ({iso}): {m.error()}')
                eof.add(m.partition())
                continue
            n += 1
        c.close()
        got[iso] = n
    n_open = sum(1 for a, b in zip(ends['read_committed'], ends['read_uncommitted']) if a < b)
    print(f"committed={got['read_committed']} all={got['read_uncommitted']} open={n_open}")


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    cmd, brokers, arg = sys.argv[1], sys.argv[2], sys.argv[3]
    rest = sys.argv[4:]
    if cmd == 'ready':
        ready(brokers, int(arg), float(rest[0]))
    elif cmd == 'create':
        config = {}
        if rest[:1] == ['--config']:
            config = dict(kv.split('=', 1) for kv in rest[1].split(','))
        create(brokers, arg, config, time.time() + 60)
    elif cmd == 'partitions':
        a = admin(brokers)  # kept until its futures are done
        result(a.create_partitions([NewPartitions(arg, int(rest[0]))], operation_timeout=30),
               'add partitions to')
    elif cmd == 'delete':
        a = admin(brokers)
        result(a.delete_topics([arg], operation_timeout=30), 'delete')
        wait_gone(brokers, arg, time.time() + 60)
    elif cmd == 'config':
        res = ConfigResource(ConfigResource.Type.TOPIC, arg,
                             set_config=dict(kv.split('=', 1) for kv in rest[0].split(',')))
        a = admin(brokers)
        result(a.alter_configs([res]), 'configure')
    elif cmd == 'leader':
        md = admin(brokers).list_topics(arg, timeout=10)
        t = md.topics.get(arg)
        if t is None or t.error is not None or int(rest[0]) not in t.partitions:
            fail(f'no partition {rest[0]} of topic {arg}')
        print(t.partitions[int(rest[0])].leader)
    elif cmd == 'watermarks':
        c = Consumer({'bootstrap.servers': brokers, 'group.id': 'admin-watermarks'})
        md = c.list_topics(arg, timeout=10)
        for p in sorted(md.topics[arg].partitions):
            lo, hi = c.get_watermark_offsets(TopicPartition(arg, p), timeout=10)
            print(lo, hi)
        c.close()
    elif cmd == 'count':
        count(brokers, arg)
    else:
        sys.exit(__doc__)


main()
