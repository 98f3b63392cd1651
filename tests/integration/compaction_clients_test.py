#!/usr/bin/python3
"""Log compaction with a real client (confluent-kafka / librdkafka) against `sluice serve`.

A topic with cleanup.policy=compact and small segments gets keyed updates and tombstones;
the broker's cleaner thread compacts it while a consumer reads the partition from offset
0 over and over: every record that consumer sees is the one produced at that offset, in
offset order (a consistent log during the swaps). After cleaning, a consumer from offset
0 sees the latest value of each live key once, and, once delete.retention.ms has passed,
no deleted key; kafkajs reads the compacted log the same, also when idempotent producers'
last batches were kept empty (record-less) by the cleaner at the end of segments. The
topic configs are validated (INVALID_CONFIG), described, and the compacted log survives a
restart. A record without a key is refused (INVALID_RECORD).

usage: /usr/bin/python3 compaction_clients_test.py path/to/sluice
"""

import glob
import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sluice_broker import FAST_GROUPS, TestFailure, check, run_test, wait_until  # noqa: E402

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer  # noqa: E402
from confluent_kafka import TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

TOPIC = "compacted"
KEYS = 200
ROUNDS = 8
DELETED = set(range(0, KEYS, 10))  # every tenth key ends with a tombstone
CONFIG = FAST_GROUPS + ("storage:\n  retention_check_interval: 100ms\n"
                        "  cleaner:\n    backoff: 50ms\n")


def read_from_start(bootstrap, topic=TOPIC, timeout=30):
    """Every record of partition 0 from its start to the end: [(offset, key, value)]."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "fetch.wait.max.ms": 50})
    try:
        c.assign([TopicPartition(topic, 0, -2)])
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise KafkaException(m.error())
            out.append((m.offset(), m.key(), m.value()))
        raise AssertionError("reading the partition did not reach its end")
    finally:
        c.close()


def produce(bootstrap, items, topic=TOPIC, idempotent=True):
    """Produces (key, value) pairs in order; returns {offset: (key, value)}."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2,
                  "enable.idempotence": idempotent, "batch.num.messages": 20})
    produced = {}
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            produced[msg.offset()] = (msg.key(), msg.value())

    for k, v in items:
        p.produce(topic, key=k, value=v, partition=0, on_delivery=report)
        p.poll(0)
    p.flush(30)
    check(not errors, f"produce errors: {errors[:3]}")
    return produced


def segment_batches(data_dir, topic):
    """[(segment base, [(base offset, records count)])] of partition 0's .log files, read
    from the data directory (the log as stored: record-less batches included)."""
    out = []
    for path in sorted(glob.glob(os.path.join(data_dir, f"{topic}-0", "*.log"))):
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:  # swapped away by the cleaner meanwhile
            continue
        batches, pos = [], 0
        while pos + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            count = struct.unpack_from(">i", data, pos + 57)[0]
            batches.append((base, count))
            pos += 12 + length
        out.append((int(os.path.basename(path).split(".")[0]), batches))
    return out


def run_kafkajs_reader(bootstrap, topic, expected):
    """kafkajs (its own protocol code) reading `topic` from the start: {key: value}."""
    node = shutil.which("node") or shutil.which("nodejs")
    check(node is not None, "node is missing (scripts/setup.sh installs nodejs)")
    out = subprocess.run([node, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                             "compaction_kafkajs_reader.js"),
                          bootstrap, topic, str(expected)],
                         capture_output=True, text=True, timeout=90)
    check(out.returncode == 0, f"kafkajs reader: {out.stderr[-2000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    check(got["n"] == expected, f"kafkajs read {got['n']} records of {topic}, expected {expected}")
    return got["latest"]


def empty_batches(broker, admin):
    """Idempotent producers whose every key another producer overwrites: the cleaner keeps
    each one's last batch empty (record-less), here mostly at the end of a segment. kafkajs
    2.x cannot move past a fetch answer holding only such batches; the broker passes over
    them for consumers (docs/design/0017, "Each producer's last batch stays")."""
    topic = "compacted-idempotent"
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "4096",
        "min.cleanable.dirty.ratio": "0.01"})])[topic].result(20)
    want = {}
    for a in range(3):
        # Producer a's batch, larger than segment.bytes: a segment of its own. Then live
        # records each larger than segment.bytes, so that no cleaning can group the
        # producer's emptied batch with them, however librdkafka splits them into batches
        # (it sent the first record alone in CI, which a cleaning then grouped with the
        # empty batch before it).
        for idempotent, key, value in [(True, "a", b"old-" + b"o" * 150),
                                       (False, "live", b"live-" + b"o" * 4200)]:
            p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": idempotent,
                          "linger.ms": 200, "batch.num.messages": 1000})
            for k in range(30):
                p.produce(topic, key=f"{key}{a}-{k:02d}".encode(), value=value, partition=0)
                if not idempotent:
                    want[f"{key}{a}-{k:02d}".encode()] = value
            check(p.flush(30) == 0, f"the batch of {key}{a}")
    overwrite = []
    for a in range(3):
        for k in range(30):
            key = f"a{a}-{k:02d}".encode()
            want[key] = f"new-{a}-{k}".encode()
            overwrite.append((key, want[key]))
    produce(broker.bootstrap, overwrite, topic)
    fillers = [(f"filler-{i}".encode(), b"f" * 100) for i in range(100)]
    want.update(fillers)
    produce(broker.bootstrap, fillers, topic)

    last = {}

    def cleaned():
        recs = read_from_start(broker.bootstrap, topic)
        segs = segment_batches(broker.data_dir, topic)
        last.update(records=len(recs), latest=latest_view(recs) == want,
                    segments=[(base, len(b), sum(1 for _, c in b if c == 0)) for base, b in segs])
        if latest_view(recs) != want or len(recs) != len(want):
            return None
        # One record-less batch per producer a (its last); at least one ends a segment with
        # more after it (librdkafka may split a batch: not always all three), where a fetch
        # used to answer with that empty batch alone.
        empties = sum(1 for _, batches in segs for _, count in batches if count == 0)
        ending_empty = [base for base, batches in segs[:-1] if batches and batches[-1][1] == 0]
        return empties == 3 and ending_empty and (recs, segs)
    try:
        recs, segs = wait_until(cleaned, 60, "producers' last batches kept empty by the cleaner",
                                interval=0.3)
    except TestFailure as e:
        raise TestFailure(f"{e}; last seen: {last}") from None
    ending = sum(1 for _, batches in segs[:-1] if batches and batches[-1][1] == 0)
    # librdkafka read it above (every key's latest value once); kafkajs the same.
    got = run_kafkajs_reader(broker.bootstrap, topic, len(want))
    want_js = {k.decode(): v.decode() for k, v in want.items()}
    check(got == want_js, "kafkajs over empty batches sees other values than were produced")
    print(f"empty batches: {ending} segments of {len(segs)} end in a record-less batch; "
          f"librdkafka and kafkajs read {len(recs)} records")


def latest_view(records):
    view = {}
    for _, k, v in records:
        view[k] = v
    return view


def body(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    # Bad values are INVALID_CONFIG, named.
    for key, value in [("min.cleanable.dirty.ratio", "2"), ("cleanup.policy", "shred"),
                       ("delete.retention.ms", "-1"), ("max.compaction.lag.ms", "0")]:
        fut = admin.create_topics([NewTopic("bad", 1, 1, config={key: value})])["bad"]
        try:
            fut.result(20)
            raise AssertionError(f"{key}={value} was accepted")
        except KafkaException as e:
            check(e.args[0].code() == KafkaError.INVALID_CONFIG, f"{key}={value}: {e}")

    admin.create_topics([NewTopic(TOPIC, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "3000"})])[TOPIC].result(20)
    res = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    configs = admin.describe_configs([res])[res].result(20)
    check(configs["cleanup.policy"].value == "compact", f"{configs['cleanup.policy']}")
    check(configs["delete.retention.ms"].value == "3000", "delete.retention.ms")
    check(configs["min.cleanable.dirty.ratio"].value == "0.01", "min.cleanable.dirty.ratio")
    check(configs["min.compaction.lag.ms"].value == "0", "min.compaction.lag.ms")
    broker_res = ConfigResource(ConfigResource.Type.BROKER, "1")
    broker_configs = admin.describe_configs([broker_res])[broker_res].result(20)
    check(broker_configs["log.cleaner.threads"].value == "1", "log.cleaner.threads")
    check(broker_configs["log.cleaner.backoff.ms"].value == "50", "log.cleaner.backoff.ms")
    check(broker_configs["log.cleanup.policy"].value == "delete", "log.cleanup.policy")
    # AlterConfigs validates too.
    bad = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, set_config={
        "cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "-1"})
    try:
        admin.alter_configs([bad])[bad].result(20)
        raise AssertionError("min.cleanable.dirty.ratio=-1 was accepted by AlterConfigs")
    except KafkaException as e:
        check(e.args[0].code() == KafkaError.INVALID_CONFIG, f"alter: {e}")

    # A record without a key is refused, as Kafka does.
    p = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0})
    errs = []
    p.produce(TOPIC, value=b"no key", partition=0, on_delivery=lambda err, msg: errs.append(err))
    p.flush(20)
    check(len(errs) == 1 and errs[0] is not None and errs[0].code() == KafkaError.INVALID_RECORD,
          f"a null key on a compacted topic: {errs}")

    # Updates, then tombstones, then fillers that roll the segments holding them.
    items = []
    for r in range(ROUNDS):
        for k in range(KEYS):
            items.append((f"key-{k:04d}".encode(), f"round-{r}-{k}-".encode() + b"x" * 60))
    items += [(f"key-{k:04d}".encode(), None) for k in sorted(DELETED)]
    produced = produce(broker.bootstrap, items)

    # A reader goes over the partition again and again while the cleaner works.
    stop = threading.Event()
    problems = []
    passes = [0]

    def reader():
        while not stop.is_set():
            try:
                seen = read_from_start(broker.bootstrap)
            except Exception as e:  # noqa: BLE001
                problems.append(f"reader: {e}")
                return
            last = -1
            for off, k, v in seen:
                if off <= last:
                    problems.append(f"offset {off} after {last}")
                last = off
                if off in produced and produced[off] != (k, v):
                    problems.append(f"offset {off}: {k}={v!r}, produced {produced[off]}")
            passes[0] += 1

    t = threading.Thread(target=reader)
    t.start()
    produced.update(produce(broker.bootstrap, [(f"filler-{i}".encode(), b"f" * 100)
                                               for i in range(100)]))
    want = {}
    for k in range(KEYS):
        key = f"key-{k:04d}".encode()
        want[key] = None if k in DELETED else f"round-{ROUNDS - 1}-{k}-".encode() + b"x" * 60
    total_before = len(produced)

    def compacted():
        recs = read_from_start(broker.bootstrap)
        keyed = [r for r in recs if r[1].startswith(b"key-")]
        return len(keyed) == KEYS and recs
    recs = wait_until(compacted, 60, "the cleaner compacting the topic", interval=0.2)
    check(len(recs) < total_before, f"{len(recs)} records after cleaning, {total_before} before")
    view = latest_view(recs)
    for key, value in want.items():
        check(view.get(key, "missing") == value, f"{key}: {view.get(key, 'missing')!r}")
    wait_until(lambda: passes[0] >= 3, 60, "three passes of the reader")
    stop.set()
    t.join(60)
    check(not problems, f"reader during cleaning: {problems[:5]}")

    # Past delete.retention.ms the tombstones go too.
    def tombstones_gone():
        recs = read_from_start(broker.bootstrap)
        keys = {k for _, k, _ in recs}
        return all(f"key-{k:04d}".encode() not in keys for k in DELETED) and recs
    recs = wait_until(tombstones_gone, 60, "tombstones removed after delete.retention.ms",
                      interval=0.3)
    view = latest_view(recs)
    for key, value in want.items():
        if value is not None:
            check(view.get(key) == value, f"{key} after tombstone removal: {view.get(key)!r}")

    # Retention deletes old segments only when the policy includes delete.
    for topic, policy in [("compact-only", "compact"), ("compact-delete", "compact,delete")]:
        admin.create_topics([NewTopic(topic, 1, 1, config={
            "cleanup.policy": policy, "segment.bytes": "4096", "retention.ms": "1",
            "min.cleanable.dirty.ratio": "0.99"})])[topic].result(20)
        produce(broker.bootstrap, [(f"{policy}-{i}".encode(), b"r" * 200) for i in range(60)],
                topic)
    time.sleep(1)  # several retention passes (every 100 ms)
    kept = read_from_start(broker.bootstrap, "compact-only")
    check(len(kept) == 60 and kept[0][0] == 0, f"compact-only lost records: {len(kept)} left")
    wait_until(lambda: len(read_from_start(broker.bootstrap, "compact-delete")) < 60, 30,
               "retention deleting segments of a compact,delete topic")

    # kafkajs (its own protocol code) reads a compacted log (gaps, rewritten batches, delete
    # horizons) the same; then over producers' last batches kept empty (empty_batches).
    js_topic = "compacted-js"
    admin.create_topics([NewTopic(js_topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "1000"})])[js_topic].result(20)
    produce(broker.bootstrap, items, js_topic, idempotent=False)
    produce(broker.bootstrap, [(f"filler-{i}".encode(), b"f" * 100) for i in range(100)],
            js_topic, idempotent=False)
    live = KEYS - len(DELETED) + 100
    js_recs = wait_until(lambda: (lambda r: len(r) == live and r)(
        read_from_start(broker.bootstrap, js_topic)), 60, "compacting the kafkajs topic",
        interval=0.3)
    got = run_kafkajs_reader(broker.bootstrap, js_topic, live)
    want_js = {k.decode(): (v.decode() if v is not None else None)
               for k, v in latest_view(js_recs).items()}
    check(got == want_js, "kafkajs sees other values than librdkafka")
    empty_batches(broker, admin)

    # The compacted log is what a restart finds.
    broker.stop()
    broker.start()
    again = read_from_start(broker.bootstrap)
    check(latest_view(again) == latest_view(recs), "the compacted log changed across a restart")
    print(f"compaction: {total_before} records produced, {len(recs)} left; reader passes "
          f"{passes[0]}")


if __name__ == "__main__":
    sys.exit(run_test("compaction_clients_test", sys.argv[1], body, CONFIG))
