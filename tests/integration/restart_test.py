#!/usr/bin/python3
"""`sluice serve` killed and restarted on the same data directory, with real clients
(confluent-kafka) and a few raw requests:

1. SIGKILL while a producer (acks=1, no retries) is writing: after the restart every
   topic, partition and topic id (Metadata v12) is back, every acknowledged record is
   there byte for byte (what a partition holds is a prefix of what was sent to it), the
   committed offsets of a consumer group and of a commit without a group are intact,
   the group resumes exactly where it committed, and new records follow the old ones.
2. SIGTERM while a Fetch waits (long poll) and an acks=all Produce waits for its
   fdatasync (--flush-ms 600000): both are answered, the produce with success, before
   sluice exits with status 0; after a restart the produced records are there.

usage: /usr/bin/python3 restart_test.py path/to/sluice
"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from records import (Record, by_partition, ck_produce, ck_read_all, expect_offsets_in_order,  # noqa: E402
                     expect_partition, expect_topic, make_records)
from sluice_broker import (RawConnection, check, raw_metadata, run_test, wait_read_by_broker,  # noqa: E402
                           wait_until)

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka.protocol.fetch import FetchRequest  # noqa: E402
from kafka.protocol.produce import ProduceRequest  # noqa: E402
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402


def watermarks(bootstrap, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    out = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=20, cached=False)
           for p in range(partitions)]
    c.close()
    return out


def committed(bootstrap, group, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    out = [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)]
    c.close()
    return out


class BackgroundProducer(threading.Thread):
    """Produces records to every partition of `topic` until stopped (acks=1, no retries,
    so nothing is reordered or sent twice); remembers each acknowledged record."""

    def __init__(self, bootstrap, topic, partitions):
        super().__init__(daemon=True)
        self.topic, self.partitions = topic, partitions
        self.sent = {p: [] for p in range(partitions)}  # records in send order
        self.acked = {p: {} for p in range(partitions)}  # index in sent -> offset
        self.stop = threading.Event()
        self.error = None
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 2,
                                  "message.send.max.retries": 0, "compression.type": "lz4"})

    def acked_count(self):
        return sum(len(a) for a in self.acked.values())

    def run(self):
        def on_delivery(p, i):
            def cb(err, msg):
                if err is None:
                    self.acked[p][i] = msg.offset()
            return cb

        try:
            n = 0
            while not self.stop.is_set():
                p = n % self.partitions
                rec = Record(p, b"k%d" % n, os.urandom(n % 700), [("n", b"%d" % n)], 1_720_000_000_000 + n)
                try:
                    self.producer.produce(self.topic, value=rec.value, key=rec.key, partition=p,
                                          headers=rec.headers, timestamp=rec.timestamp,
                                          on_delivery=on_delivery(p, len(self.sent[p])))
                except BufferError:
                    self.producer.poll(0.01)
                    continue
                self.sent[p].append(rec)
                n += 1
                self.producer.poll(0)
        except Exception as e:
            self.error = e
        finally:
            self.producer.purge()  # what was not acknowledged by now never will be
            self.producer.flush(10)


def sigkill_and_restart(broker):
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic("r-events", 3, 1), NewTopic("r-other", 1, 1, config={"retention.ms": "3600000"}),
              NewTopic("r-inflight", 2, 1)]
    for f in admin.create_topics(topics, operation_timeout=10, request_timeout=20).values():
        f.result(timeout=30)

    events = make_records("r-events", 3, 300, 61, 1_710_000_000_000)
    other = make_records("r-other", 1, 100, 62, 1_710_000_100_000)
    expect_offsets_in_order(events, ck_produce({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                                "compression.type": "zstd"}, "r-events", events))
    expect_offsets_in_order(other, ck_produce({"bootstrap.servers": bootstrap, "acks": 1}, "r-other", other))

    # A group member processes half of r-events and commits; a client outside any group
    # commits an offset of r-other.
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": "r-group", "enable.auto.commit": False,
                       "auto.offset.reset": "earliest"})
    member.subscribe(["r-events"])
    positions, processed = {}, 0
    deadline = time.monotonic() + 30
    while processed < 450 and time.monotonic() < deadline:
        msg = member.poll(0.1)
        if msg is None:
            continue
        check(msg.error() is None, f"r-group: {msg.error()}")
        positions[msg.partition()] = msg.offset() + 1
        processed += 1
    check(processed == 450, f"r-group processed {processed} records")
    member.commit(offsets=[TopicPartition("r-events", p, o) for p, o in positions.items()], asynchronous=False)
    member.close()
    group_committed = [positions.get(p, -1001) for p in range(3)]
    simple = Consumer({"bootstrap.servers": bootstrap, "group.id": "r-simple"})
    simple.commit(offsets=[TopicPartition("r-other", 0, 42)], asynchronous=False)
    simple.close()
    check(committed(bootstrap, "r-group", "r-events", 3) == group_committed, "r-group committed before the kill")

    before = raw_metadata(bootstrap)["topics"]
    marks_before = {"r-events": watermarks(bootstrap, "r-events", 3), "r-other": watermarks(bootstrap, "r-other", 1)}

    # SIGKILL while records stream in.
    producer = BackgroundProducer(bootstrap, "r-inflight", 2)
    producer.start()
    wait_until(lambda: producer.acked_count() >= 3000 or producer.error, 60, "3000 records acknowledged")
    broker.kill()
    producer.stop.set()
    producer.join(60)
    check(producer.error is None, f"background producer: {producer.error!r}")
    acked = producer.acked_count()

    bootstrap = broker.start()
    after = raw_metadata(bootstrap)["topics"]
    check(sorted(after) == sorted(before), f"topics after the restart: {sorted(after)}, before: {sorted(before)}")
    for name, t in before.items():
        a = after[name]
        check(a["error"] == 0 and a["id"] == t["id"], f"{name}: id {a['id']} (error {a['error']}), was {t['id']}")
        check(sorted(a["partitions"]) == sorted(t["partitions"]), f"{name}: partitions {sorted(a['partitions'])}")
        check(all(e == 0 and leader == 1 for e, leader, _ in a["partitions"].values()), f"{name}: {a['partitions']}")
    check(watermarks(bootstrap, "r-events", 3) == marks_before["r-events"], "r-events watermarks changed")
    check(watermarks(bootstrap, "r-other", 1) == marks_before["r-other"], "r-other watermarks changed")
    config = {"bootstrap.servers": bootstrap}
    expect_topic("r-events after SIGKILL", events, ck_read_all(config, "r-events", 3, len(events)))
    expect_topic("r-other after SIGKILL", other, ck_read_all(config, "r-other", 1, len(other)))

    # Each partition of r-inflight holds a prefix of what was sent, at least every
    # acknowledged record, at the offsets the acknowledgements gave.
    marks = watermarks(bootstrap, "r-inflight", 2)
    got = ck_read_all(config, "r-inflight", 2, sum(high for _, high in marks))
    for p in range(2):
        held = marks[p][1]
        acked_here = producer.acked[p]
        check(all(offset == i for i, offset in acked_here.items()), f"r-inflight [{p}]: acks at other offsets")
        check(held >= len(acked_here), f"r-inflight [{p}]: {held} records after the restart, {len(acked_here)} acknowledged")
        check(held <= len(producer.sent[p]), f"r-inflight [{p}]: {held} records, only {len(producer.sent[p])} sent")
        expect_partition(f"r-inflight [{p}] after SIGKILL", producer.sent[p][:held], got.get(p, []))
    print(f"SIGKILL: {acked} records acknowledged, {sum(h for _, h in marks)} kept", flush=True)

    check(committed(bootstrap, "r-group", "r-events", 3) == group_committed, "r-group committed after the restart")
    check(committed(bootstrap, "r-simple", "r-other", 1) == [42], "r-simple committed after the restart")

    # The group resumes where it committed: exactly the other half, once each.
    member = Consumer({**config, "group.id": "r-group", "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    member.subscribe(["r-events"])
    resumed = {}
    deadline = time.monotonic() + 30
    while sum(len(v) for v in resumed.values()) < 450 and time.monotonic() < deadline:
        msg = member.poll(0.1)
        if msg is None:
            continue
        check(msg.error() is None, f"r-group after the restart: {msg.error()}")
        resumed.setdefault(msg.partition(), []).append(
            (msg.offset(), msg.key(), msg.value(), [tuple(h) for h in (msg.headers() or [])], msg.timestamp()[1]))
    want = by_partition(events)
    for p in range(3):
        start = max(group_committed[p], 0)  # none committed (-1001): from the beginning
        expect_partition(f"r-group resumed [{p}]", want[p][start:], resumed.get(p, []), first_offset=start)
    member.commit(asynchronous=False)
    member.close()
    check(committed(bootstrap, "r-group", "r-events", 3) == [300] * 3, "r-group committed at the end")

    # New records follow the recovered ones.
    more = make_records("r-events-more", 3, 20, 63, 1_710_000_200_000)
    expect_offsets_in_order(more, ck_produce({**config, "enable.idempotence": True}, "r-events", more), first=300)
    got = ck_read_all(config, "r-events", 3, len(more), start=300)
    for p, recs in by_partition(more).items():
        expect_partition(f"r-events [{p}] after the restart", recs, got.get(p, []), first_offset=300)


def sigterm_answers_in_flight_requests(broker):
    """A long-poll Fetch is in flight and an acks=all Produce is sent just before SIGTERM
    comes; both must be answered before the exit, and the produced records survive.

    An acks=all append starts its group-commit sync as soon as it is written (it no longer
    waits for flush.ms, ten minutes here), so the Produce is usually answered before the
    signal; when it is not, the graceful stop's flush answers it."""
    rc = broker.stop()
    check(rc == 0, f"sluice serve exited {rc} after SIGTERM")
    bootstrap = broker.start(extra_args=["--flush-ms", "600000"])
    fetch_end = watermarks(bootstrap, "r-other", 1)[0][1]
    produce_at = watermarks(bootstrap, "r-events", 3)[1][1]

    fetcher = RawConnection(bootstrap)
    fetch = FetchRequest[4](replica_id=-1, max_wait_time=60000, min_bytes=1, max_bytes=1 << 20,
                            isolation_level=0, topics=[("r-other", [(0, fetch_end, 1 << 20)])])
    fetch_id = fetcher.send(fetch)
    wait_read_by_broker(fetcher, broker.port)

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    batch = [(b"in-flight-%d" % i, os.urandom(100 + i), 1_730_000_000_000 + i) for i in range(3)]
    for i, (key, value, ts) in enumerate(batch):
        builder.append(i, timestamp=ts, key=key, value=value, headers=[])
    producer = RawConnection(bootstrap)
    produce = ProduceRequest[3](transactional_id=None, required_acks=-1, timeout=120000,
                                topics=[("r-events", [(1, bytes(builder.build()))])])
    produce_id = producer.send(produce)
    check(not fetcher.readable(), "the long-poll fetch was answered before SIGTERM")

    broker.terminate()
    produced = producer.receive(produce, produce_id)
    (topic, [(partition, error, base_offset, *_)]), = produced.topics
    check((topic, partition, error, base_offset) == ("r-events", 1, 0, produce_at),
          f"produce answered: {produced}")
    fetched = fetcher.receive(fetch, fetch_id)
    (topic, [(partition, error, high, *_)]), = fetched.topics
    check((topic, partition, error, high) == ("r-other", 0, 0, fetch_end), f"fetch answered at SIGTERM: {fetched}")
    rc = broker.wait(60)
    check(rc == 0, f"sluice serve exited {rc} after SIGTERM with requests in flight")
    fetcher.close()
    producer.close()

    bootstrap = broker.start()
    got = ck_read_all({"bootstrap.servers": bootstrap}, "r-events", [1], 3, start=produce_at)
    rows = [(o, k, v, ts) for o, k, v, _, ts in got[1]]
    check(rows == [(produce_at + i, k, v, ts) for i, (k, v, ts) in enumerate(batch)],
          f"the records of the in-flight produce after a restart: {[(o, k) for o, k, *_ in rows]}")


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} path/to/sluice")

    def body(broker):
        t = time.monotonic()
        sigkill_and_restart(broker)
        print(f"SIGKILL and restart: ok ({time.monotonic() - t:.1f} s)", flush=True)
        t = time.monotonic()
        sigterm_answers_in_flight_requests(broker)
        print(f"SIGTERM with requests in flight: ok ({time.monotonic() - t:.1f} s)", flush=True)

    sys.exit(run_test("restart after SIGKILL and SIGTERM", sys.argv[1], body))


if __name__ == "__main__":
    main()
