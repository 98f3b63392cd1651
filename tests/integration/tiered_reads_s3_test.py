#!/usr/bin/python3
"""Tiered storage's reads against radosgw (issue 27, docs/design/0025, decisions 5-7).

Usage: s3/with-rgw.sh BUCKET /usr/bin/python3 tiered_reads_s3_test.py path/to/sluice
(with-rgw.sh exports the AWS_* variables and SLUICE_S3_BUCKET).

A single `sluice serve` with `tiered_storage: {bucket: s3://BUCKET/reads}` and a topic
with remote.storage.enable=true, small segments and local.retention.bytes of one segment:
once uploaded, the old segments are deleted from the broker's disk, and every offset below
the local start is served from S3. Checked:
- the local log keeps about local.retention.bytes, its oldest segments gone from disk;
  the earliest offset clients see (ListOffsets -2) stays 0;
- confluent-kafka (librdkafka), kcat and kafkajs, read_committed, read every record from
  offset 0 exactly as produced (partition, offset, key, value), and none of an aborted
  transaction's (its abort marker and .txnindex entries in remote segments); kafka-python
  (read_uncommitted only) the same plus the aborted ones;
  a consumer placed at an offset inside a remote batch gets that offset first;
- offsets for times (ListOffsets by timestamp) below the local start, from confluent-kafka
  and kafka-python: the first offset dated at or past the time, not the local start;
- S3 refusing every PUT: nothing more is deleted locally (the disk grows instead), and
  once S3 is back the uploads and the local deletions catch up;
- S3 refusing every GET after a restart (the cache empty): a consumer from offset 0 gets no
  record (and no wrong one) while it lasts, then everything once S3 is back;
- retention.bytes over the whole log deletes the oldest remote segments, and the earliest
  offset clients see moves with it.
"""

import json
import os
import shutil
import subprocess
import sys
import time

import kafka
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

import tiered_util
from sluice_broker import FAST_GROUPS, Broker, TestFailure, check, kcat, wait_until
from tiered_util import env

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tools"))
from s3_fault_proxy import S3FaultProxy  # noqa: E402

TOPIC = "old"
PARTITIONS = 2
SEGMENT_BYTES = 64 * 1024
RGW = None


def manifests(partition):
    return [(b, n) for b, n, _ in tiered_util.manifests(RGW, f"reads/{TOPIC}-", partition)]


def produce(bootstrap, first, count, want):
    tiered_util.produce(bootstrap, TOPIC, PARTITIONS, first, count, want)


def produce_aborted(bootstrap, count):
    """A transaction of `count` records over every partition, aborted: no reader may see it."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tiered-aborts",
                  "linger.ms": 5, "batch.size": 16384})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(count):
        p.produce(TOPIC, key=f"aborted{i}".encode(), value=b"a" * 150, partition=i % PARTITIONS)
    p.flush(30)
    p.abort_transaction(30)


def local_segments(broker, partition):
    d = os.path.join(broker.data_dir, f"{TOPIC}-{partition}")
    return sorted(int(n[:20]) for n in os.listdir(d) if n.endswith(".log") and len(n) == 24)


def read_confluent(bootstrap, want, start=0, timeout=60):
    """librdkafka (read_committed, its default) from `start` on every partition to the end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "fetch.wait.max.ms": 100})
    got, eof = {}, set()
    try:
        c.assign([TopicPartition(TOPIC, p, start) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        while len(eof) < PARTITIONS and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    if len([k for k in got if k[0] == m.partition()]) >= \
                            len([k for k in want if k[0] == m.partition() and k[1] >= start]):
                        eof.add(m.partition())
                    continue
                continue  # retriable (a storage error while S3 is away): librdkafka retries
            got[(m.partition(), m.offset())] = (m.key(), m.value())
        return got
    finally:
        c.close()


def read_kafka_python(bootstrap):
    # Debian's kafka-python reads uncommitted only: the aborted records are there too.
    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                            consumer_timeout_ms=10000, fetch_max_wait_ms=100)
    try:
        parts = [kafka.TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        c.assign(parts)
        c.seek_to_beginning(*parts)
        return {(m.partition, m.offset): (m.key, m.value) for m in c}
    finally:
        c.close()


def read_kcat(bootstrap):
    out = kcat(bootstrap, {}, ["-C", "-t", TOPIC, "-o", "beginning", "-e", "-q",
                               "-f", "%p %o %k %s\\n"], timeout=120)
    check(out.returncode == 0, f"kcat: {out.stderr.decode()[-2000:]}")
    got = {}
    for line in out.stdout.decode().splitlines():
        p, o, k, v = line.split(" ", 3)
        got[(int(p), int(o))] = (k.encode(), v.encode())
    return got


def read_kafkajs(bootstrap, expected):
    node = shutil.which("node") or shutil.which("nodejs")
    check(node is not None, "node is missing (scripts/setup.sh installs nodejs)")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compaction_kafkajs_reader.js")
    out = subprocess.run([node, script, bootstrap, TOPIC, str(expected)], capture_output=True,
                         timeout=120)
    check(out.returncode == 0, f"kafkajs reader: {out.stderr.decode()[-2000:]}")
    return json.loads(out.stdout)


def timestamps(bootstrap, partition, upto):
    """{offset: timestamp} of `partition` from 0 through `upto`, aborted records too."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ts-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    out = {}
    try:
        c.assign([TopicPartition(TOPIC, partition, 0)])
        deadline = time.monotonic() + 60
        while upto not in out and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out[m.offset()] = m.timestamp()[1]
        check(upto in out, f"offset {upto} of partition {partition} not read")
        return out
    finally:
        c.close()


def check_offsets_for_times(bootstrap, partition, target):
    """Both clients' offsets for the time of record `target` (remote) and for a time before
    every record: the first offset dated at or past it."""
    dates = timestamps(bootstrap, partition, target)
    for ts in (dates[target], dates[0] - 1000):
        want = min(o for o, t in dates.items() if t >= ts)
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "oft"})
        try:
            got = c.offsets_for_times([TopicPartition(TOPIC, partition, ts)], timeout=30)[0]
        finally:
            c.close()
        check(got.error is None and got.offset == want,
              f"confluent-kafka: offset for time {ts}: {got.offset} ({got.error}), want {want}")
        kc = kafka.KafkaConsumer(bootstrap_servers=bootstrap)
        try:
            tp = kafka.TopicPartition(TOPIC, partition)
            found = kc.offsets_for_times({tp: ts})[tp]
        finally:
            kc.close()
        check(found is not None and found.offset == want and found.timestamp == dates[want],
              f"kafka-python: offset for time {ts}: {found}, want {want} at {dates[want]}")
    return dates[target]


def compare(label, got, want):
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    wrong = [k for k in want if k in got and got[k] != want[k]]
    check(not missing and not extra and not wrong,
          f"{label}: {len(missing)} missing (first {missing[:3]}), {len(extra)} unexpected "
          f"(first {extra[:3]}), {len(wrong)} different (first {wrong[:3]})")


def watermarks(bootstrap):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return [c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
                for p in range(PARTITIONS)]
    finally:
        c.close()


def wait_trimmed(broker, label, below):
    """Until every partition's oldest local segment is past `below` and at most three are left
    (uploaded, then deleted down to local.retention.bytes)."""
    for p in range(PARTITIONS):
        try:
            wait_until(lambda: local_segments(broker, p)[0] > below[p] and
                       len(local_segments(broker, p)) <= 3, 90,
                       f"{label}: partition {p}'s old segments deleted locally")
        except TestFailure as e:
            raise TestFailure(f"{e}; local segments {local_segments(broker, p)}, remote "
                              f"{manifests(p)}")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    global RGW
    bucket = env("SLUICE_S3_BUCKET")
    RGW = env("AWS_ENDPOINT_URL_S3")
    host, port = RGW.split("://", 1)[1].rsplit(":", 1)
    proxy = S3FaultProxy(host, int(port)).start()
    os.environ["AWS_ENDPOINT_URL_S3"] = f"http://127.0.0.1:{proxy.port}"  # the broker's
    config = FAST_GROUPS + (f"tiered_storage:\n  bucket: s3://{bucket}/reads\n"
                            "s3:\n  request_timeout: 5s\n  max_retries: 1\n"
                            "storage:\n  retention_check_interval: 1s\n")
    broker = Broker(sys.argv[1], config=config)
    want = {}
    try:
        broker.start()
        a = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic_config = {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
                        "local.retention.bytes": str(SEGMENT_BYTES)}
        a.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config=topic_config)])[TOPIC].result(30)
        produce(broker.bootstrap, 0, 3000, want)
        produce_aborted(broker.bootstrap, 400)
        produce(broker.bootstrap, 3000, 3000, want)
        wait_trimmed(broker, "first run", {p: 0 for p in range(PARTITIONS)})
        for p in range(PARTITIONS):
            segs = local_segments(broker, p)
            check(len(segs) <= 3, f"partition {p}: {len(segs)} local segments kept, "
                                  f"local.retention.bytes is one segment")
        check([lo for lo, _ in watermarks(broker.bootstrap)] == [0] * PARTITIONS,
              f"the earliest offsets moved: {watermarks(broker.bootstrap)}")
        firsts = {p: local_segments(broker, p)[0] for p in range(PARTITIONS)}
        print(f"     remote segments of partition 0: {manifests(0)}")
        print(f"ok   local segments deleted once uploaded: local starts {firsts}, "
              f"earliest offsets still 0")

        compare("confluent-kafka", read_confluent(broker.bootstrap, want), want)
        print(f"ok   confluent-kafka read all {len(want)} records from offset 0")
        got = read_kafka_python(broker.bootstrap)
        aborted = {k: v for k, v in got.items() if v[0].startswith(b"aborted")}
        # It also hands out the abort markers (control records, key version 0 type 0), as
        # it does from a local log: the same batches.
        markers = {k for k, v in got.items() if v[0] == b"\x00\x00\x00\x00"}
        check(len(markers) == PARTITIONS, f"kafka-python saw {len(markers)} abort markers")
        aborted.update({k: got[k] for k in markers})
        check(len(aborted) == 400 + PARTITIONS,
              f"kafka-python (read_uncommitted) saw {len(aborted)} of the 400 aborted records "
              f"and {PARTITIONS} markers")
        compare("kafka-python", {k: v for k, v in got.items() if k not in aborted}, want)
        print("ok   kafka-python read them all (and, reading uncommitted, the 400 aborted)")
        compare("kcat", read_kcat(broker.bootstrap), want)
        print("ok   kcat read them all")
        js = read_kafkajs(broker.bootstrap, len(want))
        by_key = {k.decode(): v.decode() for k, v in want.values()}
        check(js["n"] == len(want) and js["latest"] == by_key,
              f"kafkajs read {js['n']} records, {len(js['latest'])} keys")
        print("ok   kafkajs read them all")
        # Inside a remote batch: the consumer's first record is the one asked for.
        mid = min(o for p, o in want if p == 0 and o > firsts[0] // 2)  # a record's offset
        got = read_confluent(broker.bootstrap, want, start=mid)
        check(min(o for p, o in got if p == 0) == mid, f"from {mid}: first {min(got)}")
        print(f"ok   a consumer placed at offset {mid} (remote) starts there")
        ts = check_offsets_for_times(broker.bootstrap, 0, mid)
        print(f"ok   offsets for times below the local start: time {ts} -> offset {mid} or "
              f"the first of its millisecond, before everything -> 0 (confluent-kafka, "
              f"kafka-python)")

        # S3 refusing every PUT: the local log keeps what is not uploaded.
        remote_before = {p: manifests(p) for p in range(PARTITIONS)}
        uploaded = {p: remote_before[p][-1][1] for p in range(PARTITIONS)}
        proxy.set_faults(err503=1.0, methods="PUT,POST")
        produce(broker.bootstrap, 6000, 3000, want)
        time.sleep(5)
        for p in range(PARTITIONS):
            segs = local_segments(broker, p)
            check(segs[0] <= uploaded[p], f"partition {p}: local start {segs[0]} past the last "
                                          f"upload's end {uploaded[p]} while S3 refused uploads")
            check(len(segs) >= 4, f"partition {p}: only {len(segs)} local segments")
            check(manifests(p) == remote_before[p], f"partition {p}: uploaded while refused")
        print(f"ok   S3 refusing uploads: nothing deleted locally past the last upload "
              f"({sum(len(local_segments(broker, p)) for p in range(PARTITIONS))} segments kept)")
        proxy.set_faults()
        wait_trimmed(broker, "S3 back", uploaded)
        compare("confluent-kafka after the outage", read_confluent(broker.bootstrap, want), want)
        print(f"ok   S3 back: uploads and local deletions caught up; all {len(want)} records read")

        # S3 refusing GETs, the cache empty (a restart): no record, then all of them.
        check(broker.stop() == 0, "serve exited non-zero")
        proxy.set_faults(err503=1.0, methods="GET")
        broker.start()
        got = read_confluent(broker.bootstrap, want, timeout=6)
        check(all(o >= firsts[p] for p, o in got), "records below the local start while S3 "
                                                   "refused every GET")
        for k in got:
            check(got[k] == want[k], f"a wrong record at {k} while S3 was away")
        print(f"ok   S3 refusing reads: no remote record served ({len(got)} local ones read)")
        proxy.set_faults()
        compare("confluent-kafka after the read outage", read_confluent(broker.bootstrap, want),
                want)
        print("ok   S3 back: everything read again")

        # retention.bytes over the whole log: the oldest remote segments go; the earliest
        # offset follows.
        res = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, set_config=dict(
            topic_config, **{"retention.bytes": str(8 * SEGMENT_BYTES)}))
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.alter_configs([res])[res].result(30)

        def trimmed():
            lows = [lo for lo, _ in watermarks(broker.bootstrap)]
            ms = [manifests(p) for p in range(PARTITIONS)]
            if not all(m and len(m) <= 9 and m[0][0] == lo > 0 for m, lo in zip(ms, lows)):
                return None
            return lows

        lows = wait_until(trimmed, 60, "the earliest offsets moved by retention.bytes",
                          interval=0.5)
        kept = {k: v for k, v in want.items() if k[1] >= lows[k[0]]}
        compare("confluent-kafka after retention",
                read_confluent(broker.bootstrap, kept, start=OFFSET_BEGINNING), kept)
        print(f"ok   retention.bytes: remote segments deleted, earliest offsets {lows}, "
              f"{len(kept)} records left and read")
        check(broker.stop() == 0, "serve exited non-zero")
    except TestFailure as e:
        print(f"FAIL: {e}")
        print(broker.logs())
        return 1
    finally:
        broker.cleanup()
        proxy.close()
    print("PASS: tiered_reads_s3_test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
