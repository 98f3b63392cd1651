#!/usr/bin/python3
"""Tiered storage in a cluster (issue 27, docs/design/0025, decisions 3, 4 and 9): three
`sluice serve --etcd` brokers sharing `tiered_storage: {bucket: s3://BUCKET/cluster}` on
radosgw, a topic of two partitions replicated three times with remote.storage.enable=true,
64 KiB segments and local.retention.bytes of one segment. Checked:
- the leaders upload each partition's committed segments, the manifests contiguous from
  offset 0, and every replica's disk keeps about local.retention.bytes (a follower deletes
  only what the leader uploaded: it lists the manifests);
- the leader of partition 0 SIGKILLed: the new leader goes on after the last upload (the
  manifests stay contiguous past the old end, overlapping at most), and confluent-kafka
  reads every record from offset 0 exactly as produced;
- the killed broker back: behind the new leader's local start, it is answered
  OFFSET_MOVED_TO_TIERED_STORAGE, starts its log at the leader's local start with the
  leader epochs and producers S3 recorded there, and rejoins the ISR.

Usage: s3/with-rgw.sh BUCKET /usr/bin/python3 tiered_cluster_s3_test.py path/to/sluice
"""

import os
import re
import sys
import time

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_controller_test import (ClusterBroker, metadata, start_together,  # noqa: E402
                                     wait_controller)
from etcd_util import EtcdCluster, unavailable  # noqa: E402
from sluice_broker import check, wait_until  # noqa: E402
import tiered_util  # noqa: E402
from tiered_util import env  # noqa: E402

TOPIC = "tc"
PARTITIONS = 2
SEGMENT_BYTES = 64 * 1024


class TieredBroker(ClusterBroker):
    """A cluster broker whose config also names the tiered storage bucket."""

    def args(self, etcd=True):
        a = super().args(etcd)
        with open(a[a.index("--config") + 1], "a") as f:
            f.write(f"tiered_storage:\n  bucket: s3://{env('SLUICE_S3_BUCKET')}/cluster\n"
                    "s3:\n  request_timeout: 5s\n  max_retries: 1\n"
                    "storage:\n  retention_check_interval: 1s\n")
        return a


def manifests(partition):
    """(base, next) of every manifest of the partition, by next."""
    return [(b, n) for b, n, _ in tiered_util.manifests(env("AWS_ENDPOINT_URL_S3"),
                                                        f"cluster/{TOPIC}-", partition)]


def contiguous(ranges):
    """The end of the remote part when the manifests cover [0, end) without a gap, else None."""
    end = 0
    for base, nxt in ranges:
        if base > end:
            return None
        end = max(end, nxt)
    return end


def local_segments(broker, partition):
    d = os.path.join(broker.data_dir, f"{TOPIC}-{partition}")
    if not os.path.isdir(d):
        return []
    return sorted(int(n[:20]) for n in os.listdir(d) if n.endswith(".log") and len(n) == 24)


def produce(bootstrap, first, count, want):
    tiered_util.produce(bootstrap, TOPIC, PARTITIONS, first, count, want, **{"enable.idempotence": True})


def read_all(bootstrap, want, timeout=90):
    """confluent-kafka from offset 0 of every partition until it has as many as produced."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    got = {}
    try:
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        while len(got) < len(want) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    print(f"     consumer: {m.error()}")
                continue
            got[(m.partition(), m.offset())] = (m.key(), m.value())
    finally:
        c.close()
    missing = [k for k in want if got.get(k) != want[k]]
    check(not missing and len(got) == len(want),
          f"read {len(got)} of {len(want)} records; wrong or missing: {missing[:5]}")


def leader_of(bootstrap, partition):
    t = metadata(bootstrap, TOPIC).topics.get(TOPIC)
    if t is None or partition not in t.partitions:
        return -1
    return t.partitions[partition].leader


def isr_of(bootstrap, partition):
    t = metadata(bootstrap, TOPIC).topics[TOPIC]
    return sorted(t.partitions[partition].isrs)


def wait_tiered(brokers, what, since=0):
    """Until each partition's manifests reach past `since` contiguously from 0 and every
    running replica keeps at most three local segments."""
    def done():
        for p in range(PARTITIONS):
            end = contiguous(manifests(p))
            if end is None or end <= since:
                return False
            for b in brokers:
                if b.proc is not None and len(local_segments(b, p)) > 3:
                    return False
        return True
    wait_until(done, 120, what, interval=0.5)


def test(brokers):
    start_together(brokers)
    wait_controller(brokers)
    bootstrap = ",".join(b.bootstrap for b in brokers)
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={
        "remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
        "local.retention.bytes": str(SEGMENT_BYTES), "min.insync.replicas": "2"})])[TOPIC].result(30)
    want = {}
    produce(bootstrap, 0, 4000, want)
    wait_tiered(brokers, "the leaders' uploads and every replica's local deletions")
    before = {p: contiguous(manifests(p)) for p in range(PARTITIONS)}
    print(f"ok   uploaded by the leaders, contiguous from 0 to {before}; every replica keeps "
          f"<= 3 local segments: {[[len(local_segments(b, p)) for p in range(PARTITIONS)] for b in brokers]}")

    old = leader_of(bootstrap, 0)
    killed = next(b for b in brokers if b.node == old)
    killed.kill()
    rest = [b for b in brokers if b is not killed]
    rest_bootstrap = ",".join(b.bootstrap for b in rest)
    wait_until(lambda: leader_of(rest_bootstrap, 0) not in (-1, old), 60, "a new leader of 0")
    produce(rest_bootstrap, 4000, 4000, want)
    wait_tiered(rest, "the new leader's uploads after the old one's", since=before[0])
    after = manifests(0)
    print(f"ok   broker {old} killed; the new leader {leader_of(rest_bootstrap, 0)} went on: "
          f"partition 0's manifests contiguous to {contiguous(after)} ({len(after)} of them)")
    read_all(rest_bootstrap, want)
    print(f"ok   confluent-kafka read all {len(want)} records from offset 0")

    killed.start()
    wait_until(lambda: old in isr_of(rest_bootstrap, 0) and old in isr_of(rest_bootstrap, 1),
               90, f"broker {old} back in the ISRs")
    with open(killed.out_path) as f:
        out = f.read()
    with open(killed.err_path) as f:
        out += f.read()
    restarted = re.findall(r"restarting it there", out)
    restored = re.findall(r"tiered storage's state at \d+: leader epochs (\S+), producers (\S+)",
                          out)
    check(restarted, f"broker {old} never started a log over at its leader's local start")
    check(restored == [("taken", "taken")] * len(restarted),
          f"broker {old} started {len(restarted)} logs over, taking tiered storage's state: "
          f"{restored}")
    segs = local_segments(killed, 0)
    check(len(segs) <= 4, f"broker {old} keeps {len(segs)} segments of partition 0")
    print(f"ok   broker {old} back in the ISRs ({len(restarted)} logs started over at the "
          f"leader's local start with the epochs and producers there from S3; partition 0's "
          f"local segments {segs[:1]}...)")


def main():
    why = unavailable()
    if why:
        print(f"SKIP: {why}")
        return 0
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    sluice = sys.argv[1]
    etcd = EtcdCluster().start()
    brokers = [TieredBroker(sluice, n, etcd.endpoints_arg()) for n in (1, 2, 3)]
    try:
        test(brokers)
    except Exception as e:  # the verdict: any exception fails it
        import traceback
        traceback.print_exc()
        print(f"FAIL: tiered_cluster_s3_test: {e}")
        for b in brokers:
            print(b.logs())
        return 1
    finally:
        for b in brokers:
            b.cleanup()
        etcd.close()
    print("PASS: tiered_cluster_s3_test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
