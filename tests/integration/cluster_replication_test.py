#!/usr/bin/python3
"""Replication across three `sluice serve --etcd` brokers and a real etcd, with real
clients (docs/design/0018-cluster.md: the ClusterController driving the ReplicaManager,
ISR changes by CAS in etcd).

- A topic with replication factor 3 and min.insync.replicas=2: an idempotent
  confluent-kafka producer with acks=all writes; Metadata shows an ISR of three; every
  follower's log holds the records.
- SIGKILL of a partition's leader: the producer carries on by itself once another broker
  leads; every acknowledged record is read back exactly once, in order, from the new
  leaders (tests/tools/history_checker.py over the acks and the final read).
- The killed broker restarted: it catches up and its leader adds it back to the ISR (a
  CAS in etcd), seen in Metadata.
- Two of the three brokers killed, the restarted one left: it leads every partition (its
  unclean registration was handled once, not again by the next controller), acks=all is
  refused (NOT_ENOUGH_REPLICAS, delivery
  errors) and nothing acknowledged before is lost.
- ListOffsets and Fetch to a broker without the partition (replication factor 1, led
  elsewhere): NOT_LEADER_OR_FOLLOWER (6), Kafka's answer, not UNKNOWN_TOPIC_OR_PARTITION.

usage: /usr/bin/python3 cluster_replication_test.py path/to/sluice
"""

import json
import logging
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_controller_test import start_together, three_brokers, wait_metadata  # noqa: E402
from sluice_broker import _frame, _recv_exact, check, wait_until  # noqa: E402

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "replicated"
PARTITIONS = 3
CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools",
                       "history_checker.py")


def isr_of(md, topic=TOPIC):
    return {p.id: sorted(p.isrs) for p in md.topics[topic].partitions.values()}


def leaders_of(md, topic=TOPIC):
    return {p.id: p.leader for p in md.topics[topic].partitions.values()}


class History:
    """The acks as the producer saw them (history_checker.py's events)."""

    def __init__(self):
        self.acks = []
        self.failures = []
        self.sequence = 0

    def produce(self, producer, count, tag="w"):
        def delivered(err, msg):
            if err is not None:
                self.failures.append(err)
            else:
                self.acks.append({"type": "ack", "topic": msg.topic(),
                                  "partition": msg.partition(), "offset": msg.offset(),
                                  "value": msg.value().decode()})
        for _ in range(count):
            value = f"{tag}:{self.sequence}"
            self.sequence += 1
            while True:
                try:
                    producer.produce(TOPIC, key=value.encode(), value=value.encode(),
                                     on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)


def read_all(bootstrap, topic=None, partitions=None):
    """Every partition from its start to its high watermark: the final read's events.
    The topic and its partition count default to the module's TOPIC and PARTITIONS as they
    are when called (other tests set them)."""
    topic = TOPIC if topic is None else topic
    partitions = PARTITIONS if partitions is None else partitions
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    events = []
    try:
        for p in range(partitions):
            tp = TopicPartition(topic, p)
            low, high = wait_until(lambda: _watermarks(c, tp), 60, f"watermarks of {topic}-{p}",
                                   interval=0.5)
            c.assign([TopicPartition(topic, p, low)])
            offset = low
            deadline = time.monotonic() + 60
            while offset < high and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None or m.error():
                    continue
                events.append({"type": "read", "topic": topic, "partition": p,
                               "offset": m.offset(), "value": m.value().decode()})
                offset = m.offset() + 1
            check(offset >= high, f"{topic}-{p}: read to {offset} of {high}")
            events.append({"type": "end", "topic": topic, "partition": p, "offset": offset})
            c.unassign()
    finally:
        c.close()
    return events


def _watermarks(consumer, tp):
    try:
        return consumer.get_watermark_offsets(tp, timeout=5)
    except Exception:
        return None


def run_checker(events, where):
    path = os.path.join(where, "history.jsonl")
    with open(path, "w") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")
    r = subprocess.run([sys.executable, CHECKER, path], capture_output=True, text=True)
    print(r.stdout.strip())
    check(r.returncode == 0, f"history checker: {r.stdout}{r.stderr}")


def follower_holds(broker, partition, at_least):
    """Bytes of records in `broker`'s log of the partition (a follower's copy)."""
    d = os.path.join(broker.data_dir, f"{TOPIC}-{partition}")
    if not os.path.isdir(d):
        return False
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".log"))
    return size >= at_least


NOT_LEADER_OR_FOLLOWER = 6


def _ask(bootstrap, api_key, version, body):
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(_frame(api_key, version, 11, body, flexible=False))
        size = struct.unpack(">i", _recv_exact(sock, 4))[0]
        data = _recv_exact(sock, size)
    check(struct.unpack(">i", data[:4])[0] == 11, "correlation id")
    return data[4:]


def _name(topic):
    return struct.pack(">h", len(topic)) + topic.encode()


def list_offsets_error(bootstrap, topic, partition):
    # ListOffsets v1: replica_id, [topic, [partition, timestamp]] -> the partition's error.
    body = struct.pack(">ii", -1, 1) + _name(topic) + struct.pack(">iiq", 1, partition, -1)
    r = _ask(bootstrap, 2, 1, body)
    n = struct.unpack(">h", r[4:6])[0]  # topics: 1; its name
    at = 6 + n + 4  # the partitions' count
    return struct.unpack(">h", r[at + 4:at + 6])[0]


def fetch_error(bootstrap, topic, partition):
    # Fetch v4: replica_id, max_wait, min_bytes, max_bytes, isolation, [topic, [partition,
    # fetch_offset, partition_max_bytes]] -> the partition's error.
    body = (struct.pack(">iiiib", -1, 0, 0, 1 << 20, 0) + struct.pack(">i", 1) + _name(topic)
            + struct.pack(">iiqi", 1, partition, 0, 1 << 20))
    r = _ask(bootstrap, 1, 4, body)
    n = struct.unpack(">h", r[8:10])[0]  # throttle, topics: 1; its name
    at = 10 + n + 4
    return struct.unpack(">h", r[at + 4:at + 6])[0]


def test_not_leader(brokers):
    # A broker that has not seen the controller yet answers Metadata with -1, and
    # librdkafka's admin then waits for the controller until its timeout.
    wait_metadata(brokers[0].bootstrap, lambda m: len(m.brokers) == 3 and m.controller_id >= 0,
                  "three brokers and a controller")
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    admin.create_topics([NewTopic("single", 3, 1)], operation_timeout=10)["single"].result(30)
    # Every broker's own view has the topic and its leaders (each follows etcd's watch).
    for b in brokers:
        md = wait_metadata(b.bootstrap,
                           lambda m: "single" in m.topics
                           and all(p.leader >= 0 for p in m.topics["single"].partitions.values()),
                           f"single's leaders through broker {b.node}")
    asked = 0
    for p, leader in leaders_of(md, "single").items():
        for b in brokers:
            if b.node == leader:
                # Serving once it took the leadership (clients retry until then).
                wait_until(lambda: list_offsets_error(b.bootstrap, "single", p) == 0, 30,
                           f"ListOffsets single-{p} on its leader", interval=0.1)
                continue
            asked += 1
            e = list_offsets_error(b.bootstrap, "single", p)
            check(e == NOT_LEADER_OR_FOLLOWER, f"ListOffsets single-{p} on broker {b.node}: {e}")
            e = fetch_error(b.bootstrap, "single", p)
            check(e == NOT_LEADER_OR_FOLLOWER, f"Fetch single-{p} on broker {b.node}: {e}")
    check(asked == 6, f"{asked} non-leaders asked")
    # A partition that does not exist stays unknown.
    check(list_offsets_error(brokers[0].bootstrap, "single", 7) == 3, "single-7 unknown")
    print("brokers without the partition answer NOT_LEADER_OR_FOLLOWER")


def test_replication(brokers, tmp):
    by_node = {b.node: b for b in brokers}
    wait_metadata(brokers[0].bootstrap, lambda m: len(m.brokers) == 3, "three brokers")
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    fs = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3,
                                       config={"min.insync.replicas": "2"})],
                             operation_timeout=10)
    fs[TOPIC].result(30)
    md = wait_metadata(brokers[1].bootstrap,
                       lambda m: TOPIC in m.topics and len(m.topics[TOPIC].partitions) == PARTITIONS
                       and all(p.leader >= 0 for p in m.topics[TOPIC].partitions.values()),
                       "the topic's leaders")
    # A broker's first registration may take it out of the ISRs of a topic made meanwhile
    # (the controller handles new incarnations); its leaders add it back once it fetched.
    md = wait_metadata(brokers[1].bootstrap,
                       lambda m: all(len(i) == 3 for i in isr_of(m).values()), "ISRs of three")

    history = History()
    producer = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in brokers),
                         "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 120000})
    history.produce(producer, 300)
    check(producer.flush(60) == 0, "the first records were not all acknowledged")
    check(not history.failures, f"delivery failures {history.failures[:3]}")
    check(len(history.acks) == 300, f"{len(history.acks)} of 300 acknowledged")
    # acks=all: each follower has its copy (its own log on its own disk).
    for p in range(PARTITIONS):
        for b in brokers:
            wait_until(lambda: follower_holds(b, p, 1), 30,
                       f"broker {b.node} holding records of {TOPIC}-{p}")
    print("RF=3: every broker holds every partition's records, ISR of three")

    # SIGKILL the leader of partition 0 while producing.
    victim = by_node[leaders_of(md)[0]]
    survivors = [b for b in brokers if b is not victim]
    history.produce(producer, 100)
    producer.poll(0.2)
    victim.kill()
    print(f"killed broker {victim.node}, the leader of {TOPIC}-0")
    history.produce(producer, 300)
    check(producer.flush(120) == 0, "records after the kill were not all acknowledged")
    check(not history.failures, f"delivery failures after the kill {history.failures[:3]}")
    check(len(history.acks) == 700, f"{len(history.acks)} of 700 acknowledged")
    md = wait_metadata(survivors[0].bootstrap,
                       lambda m: leaders_of(m)[0] not in (-1, victim.node),
                       "a new leader for partition 0")
    print(f"new leaders {leaders_of(md)}, ISR {isr_of(md)}")
    run_checker(history.acks + read_all(survivors[0].bootstrap), tmp)

    # The killed broker restarted: caught up, back in every ISR (its leaders' CAS in etcd).
    victim.start()
    md = wait_metadata(survivors[1].bootstrap,
                       lambda m: all(len(i) == 3 for i in isr_of(m).values()),
                       "the restarted broker back in every ISR", timeout=60)
    print(f"broker {victim.node} rejoined: ISR {isr_of(md)}")
    history.produce(producer, 100)
    check(producer.flush(60) == 0, "records after the rejoin were not all acknowledged")
    check(not history.failures, f"delivery failures after the rejoin {history.failures[:3]}")
    producer = None

    # Two of three down: acks=all with min.insync.replicas=2 is refused, nothing is lost.
    # The broker left is the one restarted after its SIGKILL (an unclean registration under
    # the interval flush policy): back in the ISRs caught up, it must stay electable when
    # another controller takes over.
    last = victim
    for b in survivors:
        b.kill()
    print(f"killed brokers {[b.node for b in survivors]}")
    md = wait_metadata(last.bootstrap,
                       lambda m: all(v == last.node for v in leaders_of(m).values())
                       and all(i == [last.node] for i in isr_of(m).values()),
                       f"broker {last.node} alone leading, alone in the ISR", timeout=60)
    lonely = History()
    lonely.sequence = history.sequence
    # librdkafka retries NOT_ENOUGH_REPLICAS until the message times out: its debug log
    # shows the broker's answer.
    said = []

    class Said(logging.Handler):
        def emit(self, record):
            said.append(record.getMessage())
    log = logging.getLogger("refused-producer")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    log.addHandler(Said())
    refused = Producer({"bootstrap.servers": last.bootstrap, "enable.idempotence": True,
                        "acks": "all", "message.timeout.ms": 8000, "debug": "msg"},
                       logger=log)
    lonely.produce(refused, 20, tag="x")
    refused.flush(30)
    check(any("NOT_ENOUGH_REPLICAS" in m or "Not enough in-sync replicas" in m for m in said),
          "the broker never answered NOT_ENOUGH_REPLICAS: " + " | ".join(said[-5:]))
    check(not lonely.acks, f"acks=all acknowledged below min.insync.replicas: {lonely.acks[:3]}")
    check(len(lonely.failures) == 20, f"{len(lonely.failures)} of 20 delivery errors")
    codes = {e.code() for e in lonely.failures}
    check(codes <= {KafkaError.NOT_ENOUGH_REPLICAS, KafkaError._MSG_TIMED_OUT},
          f"delivery errors {lonely.failures[:3]}")
    print(f"two brokers down: acks=all refused ({sorted(str(e) for e in lonely.failures)[:1]})")
    run_checker(history.acks + read_all(last.bootstrap), tmp)


def main():
    made = three_brokers(sys.argv[1])
    if made is None:
        return 0
    etcd, brokers = made
    tmp = tempfile.mkdtemp(prefix="sluice-repl-")
    failed = 0
    try:
        start_together(brokers)
        test_not_leader(brokers)
        test_replication(brokers, tmp)
        print("PASS: cluster_replication_test")
    except Exception as e:  # the verdict: any exception fails it
        import traceback
        traceback.print_exc()
        print(f"FAIL: cluster_replication_test: {e}")
        for b in brokers:
            print(b.logs(80))
        failed = 1
    finally:
        for b in brokers:
            b.cleanup()
        etcd.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
