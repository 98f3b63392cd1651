#!/usr/bin/python3
"""Topic administration in a cluster as Kafka answers it (docs/design/0018-cluster.md,
"controller (session 14)"), three `sluice serve --etcd` brokers and etcd, confluent-kafka:

- CreateTopics through every broker (the controller and the others, whose requests are
  forwarded through etcd) answers once the new partitions have leaders in that broker's
  metadata: a Metadata request right after names a leader for each, and an acks=all
  producer started right after writes without one LEADER_NOT_AVAILABLE or
  UNKNOWN_TOPIC_OR_PART on its way (librdkafka's debug log is read for them).
- CreatePartitions likewise; DeleteTopics once the topic is gone from that broker's
  metadata.
- With no controller to elect leaders (it is paused) CreateTopics answers
  REQUEST_TIMED_OUT at the request's timeout, and the topic is created once it is back;
  validate_only creates nothing and waits for nothing.
- The internal topics (__consumer_offsets, __transaction_state) cannot be deleted, grown or
  have records deleted: INVALID_TOPIC_EXCEPTION, as Kafka answers an append to them; on a
  single node too.

usage: /usr/bin/python3 cluster_admin_test.py path/to/sluice
"""

import logging
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_controller_test import (ClusterBroker, metadata, start_together,  # noqa: E402
                                     three_brokers, wait_controller, wait_metadata)
from sluice_broker import RawConnection, check, wait_until  # noqa: E402

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewPartitions  # noqa: E402
from kafka.protocol import admin  # noqa: E402  (kafka-python's request classes)

# What librdkafka logs when the broker's metadata lacks the topic or a partition's leader.
NOT_READY = re.compile(r"LEADER_NOT_AVAILABLE|UNKNOWN_TOPIC|Unknown topic|leader not available"
                       r"|Leader -1", re.I)
# A leader that had not yet taken the leadership etcd gave it when the first produce came
# (its watch behind the answering broker's): counted, not failed (0018, "controller
# (session 14)": Kafka's controller tells the leaders before the other brokers' metadata).
LEADER_BEHIND = re.compile(r"Not leader for partition|NOT_LEADER", re.I)


class Captured(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def admin_error(future):
    """The KafkaError an admin future ends with, or None."""
    try:
        future.result(60)
        return None
    except KafkaException as e:
        return e.args[0]


def led_now(bootstrap, topic, partitions):
    """This broker's metadata, asked once: every partition of `topic` led."""
    m = metadata(bootstrap, topic)
    t = m.topics.get(topic)
    if t is None or t.error is not None or len(t.partitions) != partitions:
        return False
    return all(p.leader >= 0 for p in t.partitions.values())


def produce_fresh(bootstrap, topic, partitions, tag):
    """An acks=all idempotent producer made now: one record per partition, its debug log
    searched for a topic or leader it did not find. Returns the lines that say so."""
    captured = Captured()
    logger = logging.getLogger(f"rdkafka-{tag}")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(captured)
    failures = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "debug": "topic,metadata,msg,protocol"}, logger=logger)
    for i in range(partitions):
        p.produce(topic, value=f"{tag}-{i}".encode(), partition=i,
                  on_delivery=lambda err, msg: err is not None and failures.append(err))
    check(p.flush(60) == 0, f"{tag}: not flushed")
    check(not failures, f"{tag}: delivery failures {failures[:3]}")
    behind = sum(1 for line in captured.lines if LEADER_BEHIND.search(line))
    if behind:
        print(f"{tag}: {behind} log lines of a leader not yet leading (retried)")
    return [line for line in captured.lines if NOT_READY.search(line)]


def raw_create(bootstrap, topic, partitions, rf, timeout_ms=30000, validate_only=False):
    """CreateTopics v2 sent to this very broker (librdkafka's admin client sends it to the
    controller): (error code, message)."""
    conn = RawConnection(bootstrap)
    try:
        r = conn.call(admin.CreateTopicsRequest_v2(
            create_topic_requests=[(topic, partitions, rf, [], [])], timeout=timeout_ms,
            validate_only=validate_only))
    finally:
        conn.close()
    _, code, message = r.topic_errors[0]
    return code, message


def raw_grow(bootstrap, topic, count, timeout_ms=30000):
    conn = RawConnection(bootstrap)
    try:
        r = conn.call(admin.CreatePartitionsRequest_v0(
            topic_partitions=[(topic, (count, None))], timeout=timeout_ms, validate_only=False))
    finally:
        conn.close()
    _, code, message = r.topic_errors[0]
    return code, message


def raw_delete(bootstrap, topic, timeout_ms=30000):
    conn = RawConnection(bootstrap)
    try:
        r = conn.call(admin.DeleteTopicsRequest_v1(topics=[topic], timeout=timeout_ms))
    finally:
        conn.close()
    return r.topic_error_codes[0][1]


def test_settled_answers(brokers):
    wait_metadata(brokers[0].bootstrap, lambda m: len(m.brokers) == 3, "three brokers")
    controller = wait_controller(brokers)
    order = sorted(brokers, key=lambda b: b.node != controller)  # the controller first
    for b in order:
        role = "the controller" if b.node == controller else "a non-controller"
        topic = f"fresh-{b.node}"
        code, message = raw_create(b.bootstrap, topic, 6, 3)
        check(code == 0, f"create {topic} through {role}: {code} {message}")
        check(led_now(b.bootstrap, topic, 6),
              f"CreateTopics through {role} (broker {b.node}) answered before its metadata "
              f"had a leader for every partition: {metadata(b.bootstrap, topic).topics}")
        noise = produce_fresh(b.bootstrap, topic, 6, topic)
        check(not noise, f"a producer right after CreateTopics through {role} met: {noise[:5]}")

        code, message = raw_grow(b.bootstrap, topic, 9)
        check(code == 0, f"grow {topic} through {role}: {code} {message}")
        check(led_now(b.bootstrap, topic, 9),
              f"CreatePartitions through {role} answered before the new partitions were led")

        code = raw_delete(b.bootstrap, topic)
        check(code == 0, f"delete {topic} through {role}: {code}")
        check(topic not in metadata(b.bootstrap).topics,
              f"DeleteTopics through {role} answered while its metadata still had {topic}")
        print(f"through {role} (broker {b.node}): created, grown and deleted, each answered "
              f"once settled; the producer met no missing leader")

    # validate_only: nothing created, nothing waited for.
    other = next(b for b in brokers if b.node != controller)
    code, message = raw_create(other.bootstrap, "dry", 3, 3, validate_only=True)
    check(code == 0, f"validate_only: {code} {message}")
    check("dry" not in metadata(other.bootstrap).topics, "validate_only created the topic")

    # No controller to elect leaders: the forwarded creation times out, and goes on.
    paused = brokers[controller - 1]
    paused.proc.send_signal(signal.SIGSTOP)
    try:
        code, message = raw_create(other.bootstrap, "slow", 3, 3, timeout_ms=1000)
    finally:
        paused.proc.send_signal(signal.SIGCONT)
    check(code == KafkaError.REQUEST_TIMED_OUT,
          f"CreateTopics with the controller paused: {code} {message}")
    wait_until(lambda: led_now(other.bootstrap, "slow", 3), 60, "slow created after the timeout",
               interval=0.2)
    print(f"REQUEST_TIMED_OUT while no controller elects ({message}); the topic created "
          f"after it")


def test_internal_topics(brokers):
    b = brokers[1]
    wait_metadata(b.bootstrap, lambda m: "__consumer_offsets" in m.topics
                  and "__transaction_state" in m.topics, "the internal topics", timeout=60)
    check_internal_refusals(b.bootstrap)
    md = metadata(b.bootstrap)
    for name in ("__consumer_offsets", "__transaction_state"):
        check(name in md.topics and len(md.topics[name].partitions) == 16,
              f"{name} changed: {md.topics.get(name)}")
    print("internal topics: delete, grow and delete-records refused (cluster)")


def check_internal_refusals(bootstrap):
    client = AdminClient({"bootstrap.servers": bootstrap})
    for name in ("__consumer_offsets", "__transaction_state"):
        code = raw_delete(bootstrap, name)  # this very broker, not only the controller
        check(code == KafkaError.TOPIC_EXCEPTION, f"delete {name} through {bootstrap}: {code}")
        code, message = raw_grow(bootstrap, name, 32)
        check(code == KafkaError.TOPIC_EXCEPTION and "internal topic" in (message or ""),
              f"grow {name} through {bootstrap}: {code} {message}")
        err = admin_error(client.delete_topics([name], operation_timeout=10)[name])
        check(err is not None and err.code() == KafkaError.TOPIC_EXCEPTION,
              f"delete {name}: {err}")
        err = admin_error(client.create_partitions([NewPartitions(name, 32)],
                                                  operation_timeout=10)[name])
        check(err is not None and err.code() == KafkaError.TOPIC_EXCEPTION
              and "internal topic" in err.str(), f"grow {name}: {err}")
        if hasattr(client, "delete_records"):  # confluent-kafka >= 2.4 only
            fs = client.delete_records([TopicPartition(name, 0, 0)])
            err = admin_error(next(iter(fs.values())))
            check(err is not None and err.code() == KafkaError.TOPIC_EXCEPTION,
                  f"delete records of {name}: {err}")


def test_single_node(sluice):
    b = ClusterBroker(sluice, 1, "unused")
    try:
        b.start(etcd=False)
        check_internal_refusals(b.bootstrap)
        check(b.stop() == 0, "the single node did not stop cleanly")
        print("internal topics: delete and grow refused (single node)")
    finally:
        b.cleanup()


def main():
    sluice = sys.argv[1]
    made = three_brokers(sluice)
    if made is None:
        return 0
    etcd, brokers = made
    failed = False
    try:
        start_together(brokers)
        test_settled_answers(brokers)
        test_internal_topics(brokers)
    except Exception as e:  # the verdict: any exception fails it
        import traceback
        traceback.print_exc()
        print(f"FAIL: cluster_admin_test: {e}")
        for b in brokers:
            print(b.logs())
        failed = True
    finally:
        for b in brokers:
            b.cleanup()
        etcd.close()
    if not failed:
        try:
            test_single_node(sluice)
        except Exception as e:
            import traceback
            traceback.print_exc()
            print(f"FAIL: cluster_admin_test (single node): {e}")
            failed = True
    if failed:
        return 1
    print("PASS: cluster_admin_test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
