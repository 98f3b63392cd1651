#!/usr/bin/python3
"""Kafka transactions across three `sluice serve --etcd` brokers and a real etcd
(docs/design/0018-cluster.md, "txncluster"): the transaction coordinator (on the
controller) sends WriteTxnMarkers to each partition's current leader, the leaders verify
transactional produces with the coordinator (AddPartitionsToTxn v4), and markers are
answered once replicated.

- WriteTxnMarkers (what brokers send each other) to a partition's followers:
  NOT_LEADER_OR_FOLLOWER; to its leader: written.
- A topic with replication factor 3 whose three partitions are led by three different
  brokers: a confluent-kafka transactional producer commits and aborts transactions
  spanning all of them; a read_committed consumer reads exactly the committed records,
  a read_uncommitted one both.
- The leader of one partition SIGKILLed while a commit's markers are being written (a
  crash point on the leader, as the marker request reaches it): the commit is answered,
  the coordinator keeps sending the marker, it reaches the partition's new leader, and
  read_committed consumers then see the whole transaction on every partition.

usage: /usr/bin/python3 cluster_txn_test.py path/to/sluice
"""

import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_controller_test import three_brokers, wait_metadata  # noqa: E402
from cluster_coordinator_test import coordinator  # noqa: E402
from cluster_replication_test import isr_of, leaders_of  # noqa: E402
from sluice_broker import _frame, _recv_exact, check, wait_until  # noqa: E402
from sluice_broker import uvarint as _uvarint  # noqa: E402

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "txns"
# A marker for "victim<N>" kills broker N when it reaches it (the crash point armed in
# broker N alone): only the chosen leader dies, not the one that leads after it.
VICTIM = "victim"
PARTITIONS = 3


def create_topics(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"})
                              for t in [TOPIC] + [f"{VICTIM}{n}" for n in (1, 2, 3)]],
                             operation_timeout=10)
    for f in fs.values():
        f.result(30)


def read_values(bootstrap, isolation, topics, until, timeout=120):
    """Every record of `topics` from the start under `isolation`, read until `until(values)`
    holds (then a little more, so nothing past it goes unseen): the values by topic and
    partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}-{time.time()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": isolation})
    got = {}
    try:
        c.assign([TopicPartition(t, p, 0) for t in topics for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        settle = None
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.setdefault((m.topic(), m.partition()), []).append(m.value().decode())
                continue
            if until(got):
                settle = settle or time.monotonic() + 1.0
                if time.monotonic() >= settle:
                    return got
    finally:
        c.close()
    raise AssertionError(f"{isolation}: not read within {timeout} s: {sorted(got.items())}")


def _read_uvarint(data, at):
    n = shift = 0
    while True:
        b = data[at]
        at += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, at
        shift += 7


def write_txn_marker(bootstrap, topic, partition, producer_id=999999):
    """WriteTxnMarkers v1, as a coordinator sends it (a commit of a producer with nothing
    open there: harmless): the partition's error code."""
    name = topic.encode()
    body = (_uvarint(2) + struct.pack(">qh?", producer_id, 0, True)
            + _uvarint(2) + _uvarint(len(name) + 1) + name
            + _uvarint(2) + struct.pack(">i", partition) + b"\x00"
            + struct.pack(">i", 0) + b"\x00" + b"\x00")
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(_frame(27, 1, 5, body, flexible=True))
        size = struct.unpack(">i", _recv_exact(sock, 4))[0]
        data = _recv_exact(sock, size)
    check(struct.unpack(">i", data[:4])[0] == 5, "correlation id")
    at = 5  # correlation id, header tags
    n, at = _read_uvarint(data, at)  # markers
    check(n == 2, f"{n - 1} markers answered")
    check(struct.unpack(">q", data[at:at + 8])[0] == producer_id, "the marker's producer id")
    at += 8
    n, at = _read_uvarint(data, at)  # topics
    length, at = _read_uvarint(data, at)
    check(data[at:at + length - 1] == name, "the topic answered")
    at += length - 1
    n, at = _read_uvarint(data, at)  # partitions
    index, error = struct.unpack(">ih", data[at:at + 6])
    check(index == partition, "the partition answered")
    return error


def test_write_txn_markers_on_followers(brokers, md):
    """The handler brokers send each other: a follower refuses, the leader writes."""
    by_node = {b.node: b for b in brokers}
    leader = leaders_of(md, TOPIC)[0]
    for b in brokers:
        # A broker may answer UNKNOWN_TOPIC_OR_PARTITION until it has applied the
        # controller's assignment, which the metadata of another broker can show first.
        deadline = time.monotonic() + 30
        e = write_txn_marker(b.bootstrap, TOPIC, 0)
        while e == 3 and time.monotonic() < deadline:
            time.sleep(0.1)
            e = write_txn_marker(b.bootstrap, TOPIC, 0)
        want = 0 if b.node == leader else 6  # NONE, NOT_LEADER_OR_FOLLOWER
        check(e == want, f"WriteTxnMarkers for {TOPIC}-0 on broker {b.node}: {e}, not {want}")
    e = write_txn_marker(by_node[leader].bootstrap, "no-such-topic", 0)
    check(e == 3, f"WriteTxnMarkers for an unknown topic: {e}")
    print("WriteTxnMarkers: followers answer NOT_LEADER_OR_FOLLOWER, the leader writes")


def flat(got):
    return sorted(v for values in got.values() for v in values)


def transaction(producer, tag, partitions, commit):
    producer.begin_transaction()
    values = []
    for topic, p in partitions:
        for k in range(2):
            v = f"{tag}:{topic}-{p}:{k}"
            producer.produce(topic, value=v.encode(), partition=p)
            values.append(v)
    # Delivered before the end (an abort would otherwise drop what is still queued in
    # the client, and read_uncommitted would have nothing aborted to read).
    check(producer.flush(60) == 0, f"{tag}: records not delivered")
    if commit:
        producer.commit_transaction(60)
    else:
        producer.abort_transaction(60)
    return values


def test_commit_and_abort(brokers):
    bootstrap = ",".join(b.bootstrap for b in brokers)
    md = wait_metadata(brokers[0].bootstrap,
                       lambda m: TOPIC in m.topics
                       and all(p.leader >= 0 for p in m.topics[TOPIC].partitions.values())
                       and all(len(i) == 3 for i in isr_of(m, TOPIC).values()),
                       "the topic's leaders and ISRs of three")
    leaders = leaders_of(md, TOPIC)
    check(len(set(leaders.values())) == PARTITIONS,
          f"the partitions are not led by three brokers: {leaders}")
    print(f"{TOPIC}: leaders {leaders}, controller (the coordinator) {md.controller_id}")
    test_write_txn_markers_on_followers(brokers, md)

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "cluster-txn",
                         "linger.ms": 5, "transaction.timeout.ms": 60000})
    producer.init_transactions(60)
    everywhere = [(TOPIC, p) for p in range(PARTITIONS)]
    committed, aborted = [], []
    for n in range(6):
        commit = n % 2 == 0
        values = transaction(producer, f"{'c' if commit else 'a'}{n}", everywhere, commit)
        (committed if commit else aborted).extend(values)
    # The last transaction is a commit: once it is read, everything before it is decided.
    last = committed[-2 * PARTITIONS:]

    def has_last(got):
        return set(last) <= set(flat(got))
    rc = read_values(bootstrap, "read_committed", [TOPIC], has_last)
    check(flat(rc) == sorted(committed),
          f"read_committed read {flat(rc)}, committed were {sorted(committed)}")
    ru = read_values(bootstrap, "read_uncommitted", [TOPIC], has_last)
    check(flat(ru) == sorted(committed + aborted),
          f"read_uncommitted read {flat(ru)}, written were {sorted(committed + aborted)}")
    print(f"{len(committed)} committed records read under read_committed, "
          f"{len(committed) + len(aborted)} under read_uncommitted")
    return producer, committed


def test_leader_killed_during_commit(brokers, producer, committed):
    # The transaction's coordinator (the leader of its __transaction_state partition)
    # writes its own partitions' markers itself: the victim is another broker, reached by
    # WriteTxnMarkers.
    controller = coordinator(brokers, "cluster-txn", 1)
    victim = next(b for b in brokers if b.node != controller)
    victim_node = victim.node
    victim_topic = f"{VICTIM}{victim_node}"
    md = wait_metadata(brokers[0].bootstrap,
                       lambda m: victim_topic in m.topics
                       and all(p.leader >= 0 for p in m.topics[victim_topic].partitions.values())
                       and all(len(i) == 3 for i in isr_of(m, victim_topic).values()),
                       f"{victim_topic}'s leaders and ISRs of three")
    led = [p for p, leader in sorted(leaders_of(md, victim_topic).items())
           if leader == victim_node]
    check(led, f"broker {victim_node} leads no partition of {victim_topic}: "
          f"{leaders_of(md, victim_topic)}")
    victim_p = led[0]
    survivors = [b for b in brokers if b is not victim]
    print(f"{victim_topic}-{victim_p} led by broker {victim_node}; coordinator {controller}")

    spans = [(TOPIC, p) for p in range(PARTITIONS)] + [(victim_topic, victim_p)]
    values = transaction(producer, "kill", spans, commit=True)
    # The commit was answered (its PrepareCommit is durable); the leader died as the
    # marker request reached it.
    wait_until(lambda: victim.proc.poll() is not None, 60,
               f"broker {victim_node} killed by the marker for {victim_topic}")
    victim.proc = None
    print(f"broker {victim_node} died as the commit's marker reached it")
    md = wait_metadata(survivors[0].bootstrap,
                       lambda m: leaders_of(m, victim_topic)[victim_p] not in (-1, victim_node),
                       f"a new leader for {victim_topic}-{victim_p}", timeout=60)
    print(f"{victim_topic}-{victim_p} now led by {leaders_of(md, victim_topic)[victim_p]}")

    expected = sorted(committed + values)
    bootstrap = ",".join(b.bootstrap for b in survivors)
    started = time.monotonic()
    rc = read_values(bootstrap, "read_committed", [TOPIC, victim_topic],
                     lambda got: set(values) <= set(flat(got)), timeout=180)
    check(flat(rc) == expected, f"read_committed after the kill read {flat(rc)}, "
          f"expected {expected}")
    print(f"the transaction completed on the new leaders: read_committed saw it "
          f"{time.monotonic() - started:.1f} s after the kill was seen")
    # The producer's next transaction (its coordinator completed the last) commits too.
    more = transaction(producer, "after", [(TOPIC, p) for p in range(PARTITIONS)], commit=True)
    rc = read_values(bootstrap, "read_committed", [TOPIC],
                     lambda got: set(more) <= set(flat(got)))
    check(set(more) <= set(flat(rc)), "the transaction after the kill")
    print("a transaction after the kill commits")


def main():
    made = three_brokers(sys.argv[1])
    if made is None:
        return 0
    etcd, brokers = made
    failed = 0
    try:
        # Each broker's hook names its own victim topic; only the one transaction that
        # writes a victim topic sends a marker for it.
        try:
            for b in brokers:
                os.environ["SLUICE_TEST_CRASH_AT"] = f"txn-marker-received-{VICTIM}{b.node}:1"
                b.spawn()
        finally:
            del os.environ["SLUICE_TEST_CRASH_AT"]
        for b in brokers:
            b.wait_listening()
        wait_metadata(brokers[0].bootstrap, lambda m: len(m.brokers) == 3, "three brokers")
        create_topics(brokers[0].bootstrap)
        producer, committed = test_commit_and_abort(brokers)
        test_leader_killed_during_commit(brokers, producer, committed)
        print("PASS: cluster_txn_test")
    except Exception as e:  # the verdict: any exception fails it
        import traceback
        traceback.print_exc()
        print(f"FAIL: cluster_txn_test: {e}")
        for b in brokers:
            print(b.logs(int(os.environ.get("LOG_LINES", "60"))))
        failed = 1
    finally:
        for b in brokers:
            b.cleanup()
        etcd.close()
    return failed


if __name__ == "__main__":
    sys.exit(main())
