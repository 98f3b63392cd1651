#!/usr/bin/python3
"""The two Python Kafka clients against `sluice serve`, each verifying data end to end:
every record produced is consumed once per consumer group, in order within its
partition, byte for byte (key, value, headers, timestamp).

confluent-kafka (librdkafka): AdminClient creates a topic with a config override and
describes it; an idempotent gzip producer; a group of two members joined by a third
while records flow (commit on revoke), a second group reading everything again;
committed offsets; list_groups; delete_topics.

kafka-python (its own protocol code): KafkaAdminClient; producers with acks 0, 1 and
all, uncompressed and gzip; a group of two members joined by a third while records flow;
list/describe consumer groups and their offsets, delete the groups; records produced
by each client read by the other.

usage: /usr/bin/python3 python_clients_test.py path/to/sluice
"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from records import (ck_entry, ck_produce, ck_read_all, expect_offsets_in_order,  # noqa: E402
                     expect_topic, make_records)
from sluice_broker import check, run_test, wait_until  # noqa: E402

from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402
import kafka  # noqa: E402
from kafka.admin import ConfigResource as KpConfigResource  # noqa: E402
from kafka.admin import ConfigResourceType, KafkaAdminClient  # noqa: E402
from kafka.admin import NewTopic as KpNewTopic  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402


# --- groups -------------------------------------------------------------------------


class Ledger:
    """What the members of one group processed, shared by their threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.by_partition = {}
        self.total = 0
        self.errors = []

    def add(self, partition, entry):
        with self.lock:
            self.by_partition.setdefault(partition, []).append(entry)
            self.total += 1

    def error(self, text):
        with self.lock:
            self.errors.append(text)


def run_group(members, ledger, want_total, what, produce_more=None, join_later=None, timeout=90):
    """Starts member threads, then (once a third of want_total is processed) `join_later`
    and `produce_more()`; waits for want_total records, stops every member (each commits
    what it processed) and checks the ledger has no errors."""
    for m in members:
        m.start()
    try:
        wait_until(lambda: ledger.total >= want_total // 3, timeout, f"{what}: a third processed")
        if join_later:
            join_later.start()
            members.append(join_later)
        if produce_more:
            produce_more()
        wait_until(lambda: ledger.total >= want_total, timeout, f"{what}: {want_total} processed")
        if join_later:
            wait_until(lambda: join_later.owned_any, timeout, f"{what}: the late member owning partitions")
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(60)
            check(not m.is_alive(), f"{what}: {m.name} did not stop")
    check(not ledger.errors, f"{what}: " + "; ".join(ledger.errors))
    check(ledger.total == want_total, f"{what}: processed {ledger.total} records, want {want_total}")


# --- confluent-kafka ----------------------------------------------------------------


def ck_create_topics(admin, topics):
    for name, f in admin.create_topics(topics, operation_timeout=10, request_timeout=20).items():
        f.result(timeout=30)


class CkMember(threading.Thread):
    """A confluent-kafka group member: processes records, commits synchronously every
    100 records and before its partitions are revoked or it leaves."""

    def __init__(self, bootstrap, group, topic, name, ledger):
        super().__init__(name=name, daemon=True)
        self.topic, self.ledger = topic, ledger
        self.stop = threading.Event()
        self.owned, self.owned_any, self.next = set(), False, {}
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 250})

    def commit(self, why):
        if not self.next:
            return
        offsets = [TopicPartition(self.topic, p, o) for p, o in sorted(self.next.items())]
        try:
            for tp in self.consumer.commit(offsets=offsets, asynchronous=False):
                if tp.error is not None:
                    self.ledger.error(f"{self.name}: {why} commit [{tp.partition}]: {tp.error}")
        except Exception as e:
            self.ledger.error(f"{self.name}: {why} commit: {e}")

    def on_assign(self, consumer, partitions):
        self.owned = {tp.partition for tp in partitions}
        self.owned_any = self.owned_any or bool(self.owned)

    def on_revoke(self, consumer, partitions):
        self.commit("revoke")
        self.owned, self.next = set(), {}

    def run(self):
        try:
            self.consumer.subscribe([self.topic], on_assign=self.on_assign, on_revoke=self.on_revoke)
            since_commit = 0
            while not self.stop.is_set():
                # One record per poll, after any callback poll() serves: each record is
                # checked against the assignment it arrived under.
                msg = self.consumer.poll(0.05)
                if msg is None:
                    continue
                if msg.error() is not None:
                    self.ledger.error(f"{self.name}: {msg.error()}")
                    continue
                if msg.partition() not in self.owned:
                    self.ledger.error(f"{self.name}: a record of [{msg.partition()}], not owned")
                self.ledger.add(msg.partition(), ck_entry(msg))
                self.next[msg.partition()] = msg.offset() + 1
                since_commit += 1
                if since_commit >= 100:
                    self.commit("periodic")
                    since_commit = 0
        except Exception as e:
            self.ledger.error(f"{self.name}: {e!r}")
        finally:
            self.consumer.close()  # revokes (on_revoke commits), then leaves the group


def confluent_kafka_clients(bootstrap):
    topic, partitions = "ck-events", 4
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ck_create_topics(admin, [NewTopic(topic, partitions, 1, config={"retention.ms": "86400000"})])
    md = admin.list_topics(timeout=10)
    check(len(md.topics[topic].partitions) == partitions, f"{topic} partitions: {md.topics[topic].partitions}")
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([res], request_timeout=20)[res].result(timeout=30)
    check(configs["retention.ms"].value == "86400000", f"retention.ms: {configs['retention.ms']}")

    first = make_records("ck1", partitions, 250, 1, 1_700_000_000_000)
    second = make_records("ck2", partitions, 250, 2, 1_700_000_100_000)
    records = first + second
    producer_config = {"bootstrap.servers": bootstrap, "enable.idempotence": True,
                       "compression.type": "gzip", "linger.ms": 5}
    delivered = ck_produce(producer_config, topic, first)
    expect_offsets_in_order(first, delivered)

    # Group A: two members, a third joins while the second half is produced.
    ledger = Ledger()
    members = [CkMember(bootstrap, "ck-group-a", topic, f"ck-a-{i}", ledger) for i in range(2)]
    late = CkMember(bootstrap, "ck-group-a", topic, "ck-a-2", ledger)
    produced_second = []
    run_group(members, ledger, len(records), "ck-group-a", join_later=late,
              produce_more=lambda: produced_second.append(ck_produce(producer_config, topic, second)))
    expect_offsets_in_order(second, produced_second[0], first=250)
    expect_topic("ck-group-a", records, ledger.by_partition)

    # Group B: one member reads everything again.
    ledger_b = Ledger()
    run_group([CkMember(bootstrap, "ck-group-b", topic, "ck-b-0", ledger_b)], ledger_b, len(records), "ck-group-b")
    expect_topic("ck-group-b", records, ledger_b.by_partition)

    # The committed offsets are the partitions' ends, for both groups.
    for group in ("ck-group-a", "ck-group-b"):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        committed = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
        c.close()
        check([tp.offset for tp in committed] == [500] * partitions, f"{group} committed: {committed}")

    groups = {g.id: g for g in admin.list_groups(timeout=20)}
    for group in ("ck-group-a", "ck-group-b"):
        check(group in groups, f"list_groups: {sorted(groups)}")
        check(groups[group].state == "Empty" and not groups[group].members,
              f"{group}: {groups[group].state}, {groups[group].members}")

    # Another client's records: kafka-python wrote kp-events (uncompressed and gzip).
    return records


# --- kafka-python -------------------------------------------------------------------


def kp_produce(bootstrap, topic, records, acks, compression=None):
    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks=acks, compression_type=compression,
                            linger_ms=5, retries=0, max_in_flight_requests_per_connection=1)
    futures = [p.send(topic, value=rec.value, key=rec.key, partition=rec.partition,
                      headers=rec.headers, timestamp_ms=rec.timestamp) for rec in records]
    p.flush(60)
    out = []
    for i, f in enumerate(futures):
        md = f.get(timeout=60)
        out.append((md.partition, md.offset))
    p.close(30)
    return out


def kp_entry(m):
    return (m.offset, m.key, m.value, [tuple(h) for h in m.headers], m.timestamp)


class KpMember(threading.Thread):
    """A kafka-python group member (its poll blocks while the group rebalances, so each
    member has its own thread); commits every 100 records, on revoke and before leaving."""

    def __init__(self, bootstrap, group, topic, name, ledger):
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.group, self.topic, self.ledger = bootstrap, group, topic, ledger
        self.stop = threading.Event()
        self.owned, self.owned_any, self.next = set(), False, {}
        self.consumer = None

    def commit(self, why):
        if not self.next:
            return
        try:
            self.consumer.commit({kafka.TopicPartition(self.topic, p): OffsetAndMetadata(o, "")
                                  for p, o in self.next.items()})
        except Exception as e:
            self.ledger.error(f"{self.name}: {why} commit: {e!r}")

    def run(self):
        member = self

        class Listener(kafka.ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                member.commit("revoke")
                member.owned, member.next = set(), {}

            def on_partitions_assigned(self, assigned):
                member.owned = {tp.partition for tp in assigned}
                member.owned_any = member.owned_any or bool(member.owned)

        try:
            self.consumer = kafka.KafkaConsumer(
                bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.name,
                enable_auto_commit=False, auto_offset_reset="earliest",
                session_timeout_ms=10000, heartbeat_interval_ms=250)
            self.consumer.subscribe([self.topic], listener=Listener())
            since_commit = 0
            while not self.stop.is_set():
                for tp, msgs in self.consumer.poll(timeout_ms=50, max_records=5).items():
                    for m in msgs:
                        if m.partition not in self.owned:
                            self.ledger.error(f"{self.name}: a record of [{m.partition}], not owned")
                        self.ledger.add(m.partition, kp_entry(m))
                        self.next[m.partition] = m.offset + 1
                        since_commit += 1
                if since_commit >= 100:
                    self.commit("periodic")
                    since_commit = 0
            self.commit("leave")
        except Exception as e:
            self.ledger.error(f"{self.name}: {e!r}")
        finally:
            if self.consumer is not None:
                self.consumer.close(autocommit=False)  # LeaveGroup


def kp_read_all(bootstrap, topic, partitions, count):
    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    c.assign([kafka.TopicPartition(topic, p) for p in range(partitions)])
    c.seek_to_beginning()
    got, n = {}, 0
    deadline = time.monotonic() + 30
    while n < count and time.monotonic() < deadline:
        for tp, msgs in c.poll(timeout_ms=200, max_records=1000).items():
            for m in msgs:
                got.setdefault(m.partition, []).append(kp_entry(m))
                n += 1
    c.close()
    check(n == count, f"reading {topic}: {n} records, want {count}")
    return got


def kafka_python_clients(bootstrap, ck_records):
    topic, partitions = "kp-events", 3
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-admin")
    admin.create_topics([KpNewTopic(topic, partitions, 1, topic_configs={"segment.bytes": "1048576"})],
                        timeout_ms=20000)
    check(topic in admin.list_topics(), f"list_topics: {admin.list_topics()}")
    described = admin.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, topic)])
    entries = {e[0]: e[1] for e in described[0].resources[0][4]}
    check(entries.get("segment.bytes") == "1048576", f"segment.bytes: {entries.get('segment.bytes')}")

    parts = [make_records(f"kp{i}", partitions, 150, 10 + i, 1_710_000_000_000 + 10_000 * i,
                          for_kafka_python=True) for i in range(4)]
    delivered = kp_produce(bootstrap, topic, parts[0], acks="all", compression="gzip")
    expect_offsets_in_order(parts[0], delivered)
    delivered = kp_produce(bootstrap, topic, parts[1], acks=1)
    expect_offsets_in_order(parts[1], delivered, first=150)
    kp_produce(bootstrap, topic, parts[2], acks=0, compression="gzip")  # no offsets come back
    records = parts[0] + parts[1] + parts[2] + parts[3]

    ledger = Ledger()
    members = [KpMember(bootstrap, "kp-group", topic, f"kp-{i}", ledger) for i in range(2)]
    late = KpMember(bootstrap, "kp-group", topic, "kp-2", ledger)
    run_group(members, ledger, len(records), "kp-group", join_later=late,
              produce_more=lambda: kp_produce(bootstrap, topic, parts[3], acks="all"))
    expect_topic("kp-group", records, ledger.by_partition)

    listed = dict(admin.list_consumer_groups())
    check(listed.get("kp-group") == "consumer", f"list_consumer_groups: {listed}")
    info = admin.describe_consumer_groups(["kp-group"])[0]
    check(info.error_code == 0 and info.state == "Empty" and not info.members, f"describe: {info}")
    offsets = admin.list_consumer_group_offsets("kp-group")
    check({tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic} ==
          {p: 600 for p in range(partitions)}, f"committed: {offsets}")
    deleted = admin.delete_consumer_groups(["kp-group"])
    check([(g, e.errno) for g, e in deleted] == [("kp-group", 0)], f"delete_consumer_groups: {deleted}")
    check("kp-group" not in dict(admin.list_consumer_groups()), "kp-group still listed after deletion")

    # Each client reads what the other wrote.
    expect_topic("ck-events read by kafka-python", ck_records, kp_read_all(bootstrap, "ck-events", 4, len(ck_records)))
    expect_topic("kp-events read by confluent-kafka", records, ck_read_all({"bootstrap.servers": bootstrap}, topic, partitions, len(records)))

    admin.delete_topics([topic, "ck-events"], timeout_ms=20000)
    check(not {topic, "ck-events"} & set(admin.list_topics()), f"after delete_topics: {admin.list_topics()}")
    admin.close()


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} path/to/sluice")

    def body(broker):
        t = time.monotonic()
        ck_records = confluent_kafka_clients(broker.bootstrap)
        print(f"confluent-kafka: ok ({time.monotonic() - t:.1f} s)", flush=True)
        t = time.monotonic()
        kafka_python_clients(broker.bootstrap, ck_records)
        print(f"kafka-python: ok ({time.monotonic() - t:.1f} s)", flush=True)

    sys.exit(run_test("confluent-kafka and kafka-python end to end", sys.argv[1], body))


if __name__ == "__main__":
    main()
