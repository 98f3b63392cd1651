#!/usr/bin/python3
"""The coordinators move with leadership (docs/design/0018-cluster.md, decision 11 and
"coordmove"): three `sluice serve --etcd` brokers and a real etcd, confluent-kafka clients.

- __consumer_offsets and __transaction_state are replicated topics in etcd (16 partitions,
  replication factor 3, compacted, min.insync.replicas 2), made by the controller.
- FindCoordinator answers the leader of the key's partition, Kafka's
  Utils.abs(key.hashCode) % partitions, on every broker; the other brokers answer the
  group's requests NOT_COORDINATOR; a client's produce to an internal topic is refused
  (INVALID_TOPIC_EXCEPTION, as Kafka).
- A transactional producer commits, its coordinator's broker is SIGKILLed between two
  transactions: FindCoordinator names the new leader, the producer's next transaction
  commits, read_committed reads exactly the committed records (the aborted one not).
  The transactional id is chosen so that its output partition moves with its coordinator.
- A transaction whose group (send_offsets_to_transaction) is coordinated by another broker
  than the transaction and whose output partition is led by a third: its commit marker
  reaches the group's coordinator as WriteTxnMarkers for the group's __consumer_offsets
  partition; the committed offsets are the committed transaction's (not the aborted
  one's), read_committed sees its records only.
- A consumer group commits offsets, its coordinator's broker is SIGKILLed: FindCoordinator
  names another broker, the consumer rejoins by itself and resumes at its committed
  offsets (none lost, none backwards), and a new member of the group sees the commits.

usage: /usr/bin/python3 cluster_coordinator_test.py path/to/sluice
"""

import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_controller_test import start_together, three_brokers, wait_metadata  # noqa: E402
from cluster_replication_test import _ask, _watermarks, isr_of  # noqa: E402
from sluice_broker import TestFailure, check, wait_until  # noqa: E402

from confluent_kafka import (Consumer, KafkaError, KafkaException, Producer,  # noqa: E402
                             TopicPartition)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

OFFSETS = "__consumer_offsets"
TXN_STATE = "__transaction_state"
EVENTS = "events"
TXN_OUT = "txout"
TXN_OUT2 = "txout2"


def java_hash(text):
    """Java's String.hashCode: over UTF-16 code units, 32-bit two's complement."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def partition_for(key, partitions):
    h = java_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def find_coordinator(bootstrap, key, key_type):
    """FindCoordinator v1 -> (error, node)."""
    raw = key.encode()
    body = struct.pack(">h", len(raw)) + raw + struct.pack(">b", key_type)
    r = _ask(bootstrap, 10, 1, body)
    error = struct.unpack(">h", r[4:6])[0]
    at = 6
    n = struct.unpack(">h", r[at:at + 2])[0]  # error_message (nullable)
    at += 2 + max(n, 0)
    return error, struct.unpack(">i", r[at:at + 4])[0]


def heartbeat_error(bootstrap, group):
    """Heartbeat v0 of an unknown member -> its error."""
    raw = group.encode()
    body = (struct.pack(">h", len(raw)) + raw + struct.pack(">i", 1)
            + struct.pack(">h", 1) + b"m")
    return struct.unpack(">h", _ask(bootstrap, 12, 0, body)[:2])[0]


NOT_COORDINATOR = 16
UNKNOWN_MEMBER_ID = 25


def internal_topics_ready(md):
    for t in (OFFSETS, TXN_STATE):
        if t not in md.topics or len(md.topics[t].partitions) == 0:
            return False
        if any(p.leader < 0 or len(p.isrs) < 3 for p in md.topics[t].partitions.values()):
            return False
    return True


def coordinator(brokers, key, key_type, exclude=None):
    """The node every live broker names (waits until they agree, and not `exclude`)."""
    def agreed():
        nodes = set()
        for b in brokers:
            try:
                error, node = find_coordinator(b.bootstrap, key, key_type)
            except OSError:
                return None
            if error != 0:
                return None
            nodes.add(node)
        if len(nodes) != 1 or exclude in nodes:
            return None
        return nodes.pop()
    return wait_until(agreed, 60, f"the coordinator of {key}", interval=0.2)


def next_leader(partition_md, dead):
    """The replica an election picks when `dead` goes: the first live one in the
    assignment in the ISR (every broker clean here)."""
    for r in partition_md.replicas:
        if r != dead and r in partition_md.isrs:
            return r
    return -1


def test_layout(brokers):
    md = wait_metadata(brokers[0].bootstrap, internal_topics_ready,
                       "the internal topics with leaders and ISRs of three", timeout=60)
    for t in (OFFSETS, TXN_STATE):
        parts = md.topics[t].partitions
        check(len(parts) == 16, f"{t}: {len(parts)} partitions")
        check(all(len(p.replicas) == 3 for p in parts.values()), f"{t}: replication factor")
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, OFFSETS)
    configs = admin.describe_configs([res])[res].result(30)
    check(configs["cleanup.policy"].value == "compact", "cleanup.policy of the offsets topic")
    check(configs["min.insync.replicas"].value == "2", "min.insync.replicas of the offsets topic")
    # FindCoordinator on every broker: the leader of Kafka's partition for the key.
    for group in ("g-a", "grüppe", "😀-group", "x" * 40):
        p = partition_for(group, 16)
        want = md.topics[OFFSETS].partitions[p].leader
        for b in brokers:
            error, node = find_coordinator(b.bootstrap, group, 0)
            check(error == 0 and node == want,
                  f"FindCoordinator({group!r}) on {b.node}: {error}, {node}; leader of {p} {want}")
            # Only that broker coordinates the group; the others (followers of its
            # partition, or without a replica) answer NOT_COORDINATOR.
            e = heartbeat_error(b.bootstrap, group)
            check(e == (UNKNOWN_MEMBER_ID if b.node == want else NOT_COORDINATOR),
                  f"Heartbeat of {group!r} on broker {b.node} (coordinator {want}): {e}")
    # Only the coordinators write the internal topics: a client's produce is refused.
    refused = []
    p = Producer({"bootstrap.servers": brokers[0].bootstrap, "message.timeout.ms": 20000})
    p.produce(OFFSETS, value=b"not an offset", partition=0,
              on_delivery=lambda err, msg: refused.append(err))
    p.flush(30)
    check(len(refused) == 1 and refused[0] is not None
          and refused[0].code() == KafkaError.TOPIC_EXCEPTION,
          f"a client's produce to {OFFSETS}: {refused}")
    print("internal topics: 16 partitions, RF 3, compacted; FindCoordinator names their "
          "leaders; the other brokers answer NOT_COORDINATOR; clients cannot produce to them")
    return md


def read_committed(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rc-reader",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    values = []
    try:
        tp = TopicPartition(topic, 0)
        _, high = wait_until(lambda: _watermarks(c, tp), 60, f"watermarks of {topic}",
                             interval=0.5)
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                if c.position([tp])[0].offset >= high:
                    break
                continue
            if m.error():
                continue
            values.append(m.value().decode())
    finally:
        c.close()
    return values


def test_transactions(brokers, md):
    by_node = {b.node: b for b in brokers}
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    admin.create_topics([NewTopic(TXN_OUT, 1, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=10)[TXN_OUT].result(30)
    md = wait_metadata(brokers[0].bootstrap,
                       lambda m: TXN_OUT in m.topics and all(len(i) == 3 for i in isr_of(m, TXN_OUT).values())
                       and internal_topics_ready(m), "txout with an ISR of three")
    out = md.topics[TXN_OUT].partitions[0]
    after = next_leader(out, out.leader)
    # A transactional id whose state partition is led, before and after the kill, by the
    # broker that leads txout-0: its markers stay local (see the module docstring).
    txn_id = None
    for i in range(10000):
        candidate = f"tx-{i}"
        sp = md.topics[TXN_STATE].partitions[partition_for(candidate, 16)]
        if sp.leader == out.leader and next_leader(sp, out.leader) == after:
            txn_id = candidate
            break
    check(txn_id is not None, "no transactional id follows txout-0's leadership")
    before = coordinator(brokers, txn_id, 1)
    check(before == out.leader, f"the coordinator of {txn_id} is {before}, not {out.leader}")

    bootstrap = ",".join(b.bootstrap for b in brokers)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": 60000, "message.timeout.ms": 60000})
    p.init_transactions(30)
    committed = []

    def transaction(tag, n, commit):
        p.begin_transaction()
        values = [f"{tag}-{k}" for k in range(n)]
        for v in values:
            p.produce(TXN_OUT, value=v.encode(), partition=0)
        p.flush(30)
        if commit:
            p.commit_transaction(60)
            committed.extend(values)
        else:
            p.abort_transaction(60)

    transaction("t1", 10, True)
    transaction("t2", 5, False)
    transaction("t3", 10, True)
    victim = by_node[before]
    victim.kill()
    print(f"killed broker {victim.node}, the coordinator of {txn_id} and leader of txout-0")
    survivors = [b for b in brokers if b is not victim]
    now = coordinator(survivors, txn_id, 1, exclude=victim.node)
    check(now == after, f"the new coordinator of {txn_id} is {now}, expected {after}")

    def next_commit():
        try:
            transaction("t4", 10, True)
            return True
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                p.abort_transaction(60)
            elif not err.retriable():
                raise
            return False
    wait_until(next_commit, 90, "a transaction committed with the new coordinator", interval=1)
    transaction("t5", 5, True)
    got = read_committed(survivors[0].bootstrap, TXN_OUT)
    check(got == committed, f"read_committed {len(got)} records, {len(committed)} committed: "
          f"{[v for v in got if v not in committed][:3]} {[v for v in committed if v not in got][:3]}")
    print(f"transactions: coordinator {before} -> {now}; read_committed sees the "
          f"{len(committed)} committed records, not the aborted ones")
    p = None
    victim.start()
    wait_metadata(survivors[0].bootstrap,
                  lambda m: internal_topics_ready(m)
                  and all(len(i) == 3 for i in isr_of(m, EVENTS).values()),
                  f"broker {victim.node} back in the ISRs", timeout=90)


def test_offsets_across_brokers(brokers):
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    admin.create_topics([NewTopic(TXN_OUT2, 1, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=10)[TXN_OUT2].result(30)
    md = wait_metadata(brokers[0].bootstrap,
                       lambda m: TXN_OUT2 in m.topics
                       and all(len(i) == 3 for i in isr_of(m, TXN_OUT2).values())
                       and internal_topics_ready(m), "txout2 with an ISR of three")
    out_leader = md.topics[TXN_OUT2].partitions[0].leader
    group = txn_id = None
    for i in range(10000):
        g = f"eos-g-{i}"
        if md.topics[OFFSETS].partitions[partition_for(g, 16)].leader != out_leader:
            group = g
            break
    group_leader = md.topics[OFFSETS].partitions[partition_for(group, 16)].leader
    for i in range(10000):
        t = f"eos-tx-{i}"
        if md.topics[TXN_STATE].partitions[partition_for(t, 16)].leader not in (
                out_leader, group_leader):
            txn_id = t
            break
    check(group is not None and txn_id is not None, "no group / transactional id on other brokers")
    txn_node = coordinator(brokers, txn_id, 1)
    group_node = coordinator(brokers, group, 0)
    check(len({txn_node, group_node, out_leader}) == 3,
          f"coordinators {txn_node} (txn), {group_node} (group), leader {out_leader}")
    bootstrap = ",".join(b.bootstrap for b in brokers)
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "enable.auto.commit": False})
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": 60000, "message.timeout.ms": 60000})
    p.init_transactions(30)
    committed = []
    for tag, offset, commit in (("o1", 5, True), ("o2", 9, False), ("o3", 7, True)):
        p.begin_transaction()
        values = [f"{tag}-{k}" for k in range(4)]
        for v in values:
            p.produce(TXN_OUT2, value=v.encode(), partition=0)
        p.send_offsets_to_transaction([TopicPartition(EVENTS, 0, offset)],
                                      member.consumer_group_metadata(), 30)
        if commit:
            p.commit_transaction(60)
            committed.extend(values)
        else:
            p.abort_transaction(60)
    got = member.committed([TopicPartition(EVENTS, 0)], 30)[0].offset
    member.close()
    check(got == 7, f"group {group}: committed offset {got}, expected 7 (the aborted 9 not)")
    values = read_committed(brokers[0].bootstrap, TXN_OUT2)
    check(values == committed, f"read_committed {values} != {committed}")
    print(f"offsets in transactions: transaction coordinator {txn_node}, group coordinator "
          f"{group_node}, output leader {out_leader}: committed offset {got}, "
          f"{len(values)} committed records")


def commit(consumer, commits):
    """A synchronous commit of the consumer's position; False when it failed (a
    coordinator change, a rebalance: the caller polls, which rejoins, and tries again).
    The offsets committed are recorded: they must never go backwards."""
    try:
        done = consumer.commit(asynchronous=False)
    except KafkaException as e:
        return e.args[0].code() == KafkaError._NO_OFFSET  # nothing new to commit
    for tp in done or []:
        if tp.offset < 0:
            continue
        prev = commits.get(tp.partition, -1)
        check(tp.offset >= prev,
              f"committed offset of {tp.partition} went back: {prev} -> {tp.offset}")
        commits[tp.partition] = tp.offset
    return True


def test_groups(brokers):
    by_node = {b.node: b for b in brokers}
    bootstrap = ",".join(b.bootstrap for b in brokers)
    # One record a batch, and small fetches: the member reads every partition a little at a
    # time, so each has a commit in its middle when the coordinator dies.
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "batch.num.messages": 1})
    total = 400
    for i in range(total):
        producer.produce(EVENTS, key=str(i).encode(), value=f"e{i}".encode(), partition=i % 4)
    check(producer.flush(60) == 0, "events not acknowledged")
    group = "movers"
    before = coordinator(brokers, group, 0)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                  "max.partition.fetch.bytes": 512})
    c.subscribe([EVENTS])
    seen = {}     # partition -> offsets consumed, in order
    commits = {}  # partition -> last committed offset

    def poll():
        m = c.poll(0.5)
        if m is None or m.error():
            return False
        seen.setdefault(m.partition(), []).append(m.offset())
        return True

    # Each partition is read to its middle (50 of its 100 records) and paused there, so
    # that every one has a commit inside it when the coordinator dies, however the fetches
    # of the four interleave (one partition could be read to its end before another began).
    consumed = 0
    paused = set()
    deadline = time.monotonic() + 60
    while len(paused) < 4 and time.monotonic() < deadline:
        if poll():
            consumed += 1
            for p, offsets in seen.items():
                if len(offsets) >= 50 and p not in paused:
                    c.pause([TopicPartition(EVENTS, p)])
                    paused.add(p)
            if consumed % 25 == 0:
                commit(c, commits)
    while not commit(c, commits) and time.monotonic() < deadline:
        poll()
    check(consumed >= 200, f"consumed {consumed} of 200")
    check(sum(commits.values()) >= 200, f"commits {commits}")
    check(len(commits) == 4 and all(0 < o < 100 for o in commits.values()),
          f"a commit inside every partition before the kill: {commits}")
    at_kill = dict(commits)
    victim = by_node[before]
    victim.kill()
    c.resume([TopicPartition(EVENTS, p) for p in range(4)])
    print(f"group {group}: committed {at_kill}; killed broker {victim.node}, its coordinator")
    survivors = [b for b in brokers if b is not victim]
    now = coordinator(survivors, group, 0, exclude=victim.node)
    print(f"group {group}: FindCoordinator names broker {now}")
    # The member carries on: rejoins with the new coordinator, resumes at the commits.
    resumed = {}  # partition -> first offset fetched after the rejoin
    marks = {p: len(v) for p, v in seen.items()}
    deadline = time.monotonic() + 120
    while sum(commits.values()) < total and time.monotonic() < deadline:
        if poll():
            consumed += 1
            if consumed % 25 == 0:
                commit(c, commits)
        else:
            commit(c, commits)  # idle: what was read is committed
    check(sum(commits.values()) == total, f"final commits {commits} of {total}")
    for p, offsets in seen.items():
        # Every offset was read (nothing lost), and the reading after the kill went on
        # exactly at the committed offset (nothing read twice, nothing skipped).
        check(set(offsets) >= set(range(commits[p])), f"partition {p}: offsets missing")
        after = offsets[marks.get(p, 0):]
        if after:
            resumed[p] = after[0]
            check(after[0] == at_kill.get(p, 0),
                  f"partition {p}: resumed at {after[0]}, committed {at_kill.get(p, 0)}")
    c.close()
    print(f"group {group}: resumed at {resumed}, committed {commits}")
    # A new member sees what was committed (read from the replicated log by broker {now}).
    fresh = Consumer({"bootstrap.servers": ",".join(b.bootstrap for b in survivors),
                      "group.id": group, "enable.auto.commit": False})
    try:
        got = fresh.committed([TopicPartition(EVENTS, p) for p in range(4)], timeout=30)
        check({tp.partition: tp.offset for tp in got} == commits,
              f"committed as a new member sees it: {got}, expected {commits}")
    finally:
        fresh.close()
    print("groups: the coordinator moved, the commits survived")


def main():
    made = three_brokers(sys.argv[1])
    if made is None:
        return 0
    etcd, brokers = made
    failed = 0
    try:
        start_together(brokers)
        wait_metadata(brokers[0].bootstrap, lambda m: len(m.brokers) == 3, "three brokers")
        admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
        admin.create_topics([NewTopic(EVENTS, 4, 3, config={"min.insync.replicas": "2"})],
                            operation_timeout=10)[EVENTS].result(30)
        md = test_layout(brokers)
        test_offsets_across_brokers(brokers)
        test_transactions(brokers, md)
        test_groups(brokers)
        print("PASS: cluster_coordinator_test")
    except Exception as e:  # the verdict: any exception fails it
        import traceback
        traceback.print_exc()
        print(f"FAIL: cluster_coordinator_test: {e}")
        for b in brokers:
            print(b.logs(60))
        failed = 1
    finally:
        for b in brokers:
            b.cleanup()
        etcd.close()
    return failed


if __name__ == "__main__":
    sys.exit(main())
