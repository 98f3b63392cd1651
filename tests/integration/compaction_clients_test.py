#!/usr/bin/python3
"""Log compaction with a real client (confluent-kafka / librdkafka) against `sluice serve`.

A topic with cleanup.policy=compact and small segments gets keyed updates and tombstones;
the broker's cleaner thread compacts it while a consumer reads the partition from offset
0 over and over: every record that consumer sees is the one produced at that offset, in
offset order (a consistent log during the swaps). After cleaning, a consumer from offset
0 sees the latest value of each live key once, and, once delete.retention.ms has passed,
no deleted key; kafkajs reads the compacted log the same. The topic configs are validated (INVALID_CONFIG), described, and the
compacted log survives a restart. A record without a key is refused (INVALID_RECORD).

usage: /usr/bin/python3 compaction_clients_test.py path/to/sluice
"""

import json
import os
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sluice_broker import FAST_GROUPS, check, run_test, wait_until  # noqa: E402

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
    # horizons) the same. With plain producers: a producer's last batch kept empty at the
    # end of a segment makes kafkajs 2.x skip to the high watermark (its Batch.lastOffset()
    # of a fetch holding only an empty batch; docs/design/0017, "Not done").
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
    node = shutil.which("node") or shutil.which("nodejs")
    check(node is not None, "node is missing (scripts/setup.sh installs nodejs)")
    out = subprocess.run([node, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                             "compaction_kafkajs_reader.js"),
                          broker.bootstrap, js_topic, str(live)],
                         capture_output=True, text=True, timeout=90)
    check(out.returncode == 0, f"kafkajs reader: {out.stderr[-2000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    check(got["n"] == live, f"kafkajs read {got['n']} records, librdkafka {live}")
    want_js = {k.decode(): (v.decode() if v is not None else None)
               for k, v in latest_view(js_recs).items()}
    check(got["latest"] == want_js, "kafkajs sees other values than librdkafka")

    # The compacted log is what a restart finds.
    broker.stop()
    broker.start()
    again = read_from_start(broker.bootstrap)
    check(latest_view(again) == latest_view(recs), "the compacted log changed across a restart")
    print(f"compaction: {total_before} records produced, {len(recs)} left; reader passes "
          f"{passes[0]}")


if __name__ == "__main__":
    sys.exit(run_test("compaction_clients_test", sys.argv[1], body, CONFIG))
