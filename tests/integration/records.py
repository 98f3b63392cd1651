"""Records for the Python integration tests: what is produced (Record, make_records),
checks that what came back is exactly that (expect_topic), and confluent-kafka helpers
that produce and read them."""

import random
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from sluice_broker import TestFailure, check


class Record:
    __slots__ = ("partition", "key", "value", "headers", "timestamp")

    def __init__(self, partition, key, value, headers, timestamp):
        self.partition, self.key, self.value = partition, key, value
        self.headers, self.timestamp = headers, timestamp

    def fields(self):
        return (self.key, self.value, self.headers, self.timestamp)


def make_records(tag, partitions, per_partition, seed, first_timestamp, for_kafka_python=False):
    """Interleaved across partitions; null and empty keys and values, compressible text
    and random bytes, 0-2 headers. No null header values: confluent-kafka 1.7 crashes
    the interpreter on them (its issue 1191: Message.headers() loses a reference to
    None), and KafkaProducer.send refuses them; rdkafka_test covers them. KafkaProducer
    also refuses a record whose key and value are both null."""
    r = random.Random(seed)
    out = []
    for i in range(partitions * per_partition):
        k = r.randrange(20)
        key = None if k == 0 else b"" if k == 1 else f"{tag}-key-{i}".encode()
        v = r.randrange(40)
        if v == 0:
            value = None
        elif v == 1:
            value = b""
        else:
            n = r.randrange(3000) if r.randrange(8) == 0 else r.randrange(200)
            value = r.randbytes(n) if r.randrange(2) else (b"sluice kafka record %d " % i) * (n // 20)
        headers = []
        for h in range(r.randrange(3)):
            headers.append((f"h{h}", r.randbytes(r.randrange(30))))
        if for_kafka_python and key is None and value is None:
            value = b""
        out.append(Record(i % partitions, key, value, headers, first_timestamp + i))
    return out


def by_partition(records):
    out = {}
    for rec in records:
        out.setdefault(rec.partition, []).append(rec)
    return out


def expect_partition(what, want, got, first_offset=0):
    """`got`: (offset, key, value, headers, timestamp) in consumption order."""
    check(len(got) == len(want), f"{what}: consumed {len(got)} records, want {len(want)}")
    for i, (w, g) in enumerate(zip(want, got)):
        offset, fields = g[0], g[1:]
        if offset != first_offset + i or fields != w.fields():
            diffs = [name for name, a, b in zip(("key", "value", "headers", "timestamp"), fields, w.fields())
                     if a != b]
            raise TestFailure(f"{what}: record {i}: offset {offset} (want {first_offset + i}), "
                              f"differs in {diffs or 'nothing but the offset'}")


def expect_topic(what, records, consumed):
    """`consumed`: {partition: [(offset, key, value, headers, timestamp), ...]}."""
    want = by_partition(records)
    check(set(consumed) <= set(want), f"{what}: records from partitions {set(consumed) - set(want)}")
    for p, recs in want.items():
        expect_partition(f"{what} [{p}]", recs, consumed.get(p, []))


def ck_produce(config, topic, records):
    """Produces with a confluent-kafka Producer of `config` and waits for every delivery:
    [(partition, offset)] by record (offset -1 with acks=0); any failure fails the test."""
    delivered = [None] * len(records)
    errors = []

    def on_delivery(i):
        def cb(err, msg):
            if err is not None:
                errors.append(f"record {i}: {err}")
            else:
                delivered[i] = (msg.partition(), msg.offset())
        return cb

    p = Producer(config)
    for i, rec in enumerate(records):
        while True:
            try:
                p.produce(topic, value=rec.value, key=rec.key, partition=rec.partition,
                          timestamp=rec.timestamp, headers=rec.headers, on_delivery=on_delivery(i))
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    check(p.flush(60) == 0, f"producing to {topic}: records left after flush")
    check(not errors, f"producing to {topic}: {errors[:5]}")
    return delivered


def expect_offsets_in_order(records, delivered, first=0):
    """Each partition's records were delivered at first, first + 1, ... in order."""
    nxt = {}
    for i, (rec, d) in enumerate(zip(records, delivered)):
        want = nxt.get(rec.partition, first)
        check(d == (rec.partition, want), f"record {i}: delivered at {d}, want {(rec.partition, want)}")
        nxt[rec.partition] = want + 1


def ck_entry(msg):
    return (msg.offset(), msg.key(), msg.value(), [tuple(h) for h in (msg.headers() or [])],
            msg.timestamp()[1])


def ck_read_all(config, topic, partitions, count, start=-2):
    """Reads `count` records from `start` (-2: the beginning) of each partition (a count
    or a list of partitions) with a confluent-kafka Consumer of `config`, without joining
    a group: {partition: [(offset, key, value, headers, timestamp)]}."""
    c = Consumer({"group.id": "reader", "enable.auto.commit": False, **config})
    if isinstance(partitions, int):
        partitions = range(partitions)
    c.assign([TopicPartition(topic, p, start) for p in partitions])
    got, n = {}, 0
    deadline = time.monotonic() + 30
    while n < count and time.monotonic() < deadline:
        for msg in c.consume(num_messages=500, timeout=0.2):
            check(msg.error() is None, f"reading {topic}: {msg.error()}")
            got.setdefault(msg.partition(), []).append(ck_entry(msg))
            n += 1
    c.close()
    check(n == count, f"reading {topic}: {n} records, want {count}")
    return got


def kp_consume(consumer, count, timeout=30):
    """Polls a kafka-python consumer until `count` records came or `timeout` s passed:
    {partition: [(offset, key, value, headers, timestamp), ...]}, for expect_topic."""
    got, n = {}, 0
    deadline = time.monotonic() + timeout
    while n < count and time.monotonic() < deadline:
        for _, msgs in consumer.poll(timeout_ms=100, max_records=1000).items():
            for m in msgs:
                got.setdefault(m.partition, []).append(
                    (m.offset, m.key, m.value, [tuple(h) for h in m.headers], m.timestamp))
                n += 1
    return got
