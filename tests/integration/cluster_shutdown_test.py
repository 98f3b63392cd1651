#!/usr/bin/python3
"""Controlled shutdown and topic creation through any broker, with three `sluice serve
--etcd` brokers, a real etcd and real clients (docs/design/0018-cluster.md, "shutdown
(session 13)").

- SIGTERM of a partition leader (not the controller) under an idempotent acks=all
  confluent-kafka producer: etcd's history shows every leadership and ISR membership of
  the broker moved before its registration went (the state at the revision before the
  deletion of brokers/<node>); the broker logs the controlled shutdown as done and exits
  0; the producer sees no delivery error and never NOT_ENOUGH_REPLICAS; every
  acknowledged record is read back exactly once, in order (history_checker.py).
- The broker restarted rejoins every ISR; then SIGTERM of the controller: its
  leaderships move the same way, it resigns (the controller key held by another broker,
  or none, before its registration goes), another broker becomes controller, and a
  replication factor 1 partition it led goes offline (leader -1) once it is gone; admin
  clients (kafka-python, confluent-kafka) that learnt the old controller create topics
  through it once it is back as an ordinary broker (forwarded).
- With etcd paused, a SIGTERMed broker still stops (exit 0) once the controlled shutdown
  gives up.
- Metadata with auto-creation through a broker that is not the controller creates the
  topic (the controller elects its leaders) and a producer writes to it.
- CreateTopics, CreatePartitions and DeleteTopics sent to a broker that is not the
  controller are forwarded (through etcd): the topic is created with leaders, grown,
  deleted; an existing topic is TOPIC_ALREADY_EXISTS, a replication factor above the
  brokers INVALID_REPLICATION_FACTOR, a deleted one UNKNOWN_TOPIC_OR_PARTITION;
  kafka-python's KafkaAdminClient and confluent-kafka's AdminClient bootstrapped with
  that broker alone create, grow and delete topics.

usage: /usr/bin/python3 cluster_shutdown_test.py path/to/sluice
"""

import json
import logging
import os
import shutil
import struct
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_replication_test as crt  # noqa: E402
from cluster_controller_test import (ClusterBroker, metadata, start_together,  # noqa: E402
                                     wait_metadata)
from etcd_util import EtcdCluster, b64, prefix_end, unavailable, unb64  # noqa: E402
from sluice_broker import check, wait_until  # noqa: E402

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # noqa: E402

TOPIC = "handover"
PARTITIONS = 6
TOPIC_ALREADY_EXISTS = 36
INVALID_REPLICATION_FACTOR = 38
UNKNOWN_TOPIC_OR_PARTITION = 3


class Broker(ClusterBroker):
    """A cluster broker with auto-creation on."""

    def args(self, etcd=True):
        a = super().args(etcd)
        config = a[a.index("--config") + 1]
        with open(config, "a") as f:
            f.write("topics:\n  auto_create: true\n")
        return a


def isr_of(md, topic=TOPIC):
    return {p.id: sorted(p.isrs) for p in md.topics[topic].partitions.values()}


def leaders_of(md, topic=TOPIC):
    return {p.id: p.leader for p in md.topics[topic].partitions.values()}


# ---- etcd's history

def exists_at(etcd, key, revision):
    r = etcd.call("kv/range", {"key": b64(key), "revision": str(revision)})
    return bool(r.get("kvs"))


def deleted_at(etcd, key, since):
    """The revision at which `key`, present at `since`, was deleted (binary search)."""
    check(exists_at(etcd, key, since), f"{key} absent at revision {since}")
    lo, hi = since, etcd.revision()
    check(not exists_at(etcd, key, hi), f"{key} still present")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if exists_at(etcd, key, mid):
            lo = mid
        else:
            hi = mid
    return hi


def values_at(etcd, prefix, revision):
    r = etcd.call("kv/range", {"key": b64(prefix), "range_end": b64(prefix_end(prefix)),
                               "revision": str(revision)})
    return {unb64(kv["key"]).decode(): json.loads(unb64(kv.get("value")))
            for kv in r.get("kvs", [])}


def check_moved_before_exit(etcd, node, since, cluster="sluice"):
    """Every partition's state just before brokers/<node> went: not led by `node`, and
    `node` in no ISR but as the last member. Returns those states."""
    gone = deleted_at(etcd, f"/sluice/{cluster}/brokers/{node}", since)
    states = values_at(etcd, f"/sluice/{cluster}/partitions/", gone - 1)
    check(states, "no partition states")
    for key, s in states.items():
        isr = [m[0] if isinstance(m, list) else m.get("node") for m in s["isr"]]
        if len(isr) == 1 and isr[0] == node:
            continue  # replication factor 1: nothing to move to
        check(s["leader"] != node, f"{key} still led by {node} when it went: {s}")
        check(node not in isr, f"{node} still in the ISR of {key} when it went: {s}")
    return gone, states


# ---- a producer running through a shutdown

class Background:
    """An idempotent acks=all producer writing TOPIC in a thread until stopped; librdkafka's
    debug lines kept to look for NOT_ENOUGH_REPLICAS."""

    def __init__(self, brokers, history):
        self.said = []
        outer = self

        class Said(logging.Handler):
            def emit(self, record):
                outer.said.append(record.getMessage())
        log = logging.getLogger(f"background-{id(self)}")
        log.propagate = False
        log.setLevel(logging.DEBUG)
        log.addHandler(Said())
        self.producer = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in brokers),
                                  "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                                  "message.timeout.ms": 120000, "debug": "msg,protocol"},
                                 logger=log)
        self.history = history
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            self.history.produce(self.producer, 20)
            self.producer.poll(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        check(self.producer.flush(120) == 0, "records not all acknowledged")

    def refusals(self):
        return [m for m in self.said if "NOT_ENOUGH_REPLICAS" in m or
                "Not enough in-sync replicas" in m]


def check_history(history, final_read, tmp):
    """The history checker over the acks with an offset and the final read; an ack without
    one (librdkafka's implicit ack: an idempotent batch whose own answer was an error,
    acknowledged by a later batch's success, since the broker takes sequences only in
    order) must be in the final read too, once (the checker finds duplicates)."""
    implicit = [a for a in history.acks if a["offset"] is None]
    crt.run_checker([a for a in history.acks if a["offset"] is not None] + final_read, tmp)
    read = {(e["partition"], e["value"]) for e in final_read if e["type"] == "read"}
    missing = [a for a in implicit if (a["partition"], a["value"]) not in read]
    check(not missing, f"implicitly acknowledged records lost: {missing[:3]}")
    if implicit:
        print(f"{len(implicit)} records acknowledged without an offset, all read back")


def sigterm_and_watch(victim, watcher, predicate):
    """SIGTERMs `victim` and polls Metadata through `watcher` while it runs: whether the
    new state was seen before the process ended."""
    victim.proc.send_signal(15)
    seen_alive = False
    while victim.proc.poll() is None:
        try:
            md = metadata(watcher.bootstrap)
            if predicate(md) and victim.proc.poll() is None:
                seen_alive = True
        except Exception:
            pass
        time.sleep(0.05)
    rc = victim.proc.wait()
    victim.proc = None
    return rc, seen_alive


def shutdown_logged(broker):
    with open(broker.out_path) as out, open(broker.err_path) as err:
        text = out.read() + err.read()
    return "controlled shutdown done" in text


def test_controlled_shutdown(etcd, brokers, tmp):
    by_node = {b.node: b for b in brokers}
    md = wait_metadata(brokers[0].bootstrap,
                       lambda m: len(m.brokers) == 3 and m.controller_id >= 0, "three brokers")
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    fs = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"}),
                              NewTopic("lonely", 3, 1)], operation_timeout=10)
    for f in fs.values():
        f.result(30)
    md = wait_metadata(brokers[1].bootstrap,
                       lambda m: TOPIC in m.topics and "lonely" in m.topics
                       and all(len(i) == 3 for i in isr_of(m).values())
                       and all(v >= 0 for v in leaders_of(m, "lonely").values()),
                       "ISRs of three", timeout=60)
    controller = md.controller_id
    led = {}
    for p, leader in leaders_of(md).items():
        led.setdefault(leader, []).append(p)
    victim = next(by_node[n] for n in led if n != controller)
    watcher = next(b for b in brokers if b is not victim)
    crt.TOPIC, crt.PARTITIONS = TOPIC, PARTITIONS  # History and read_all write/read TOPIC
    history = crt.History()

    # 1. A leader that is not the controller.
    with Background(brokers, history) as bg:
        time.sleep(1)
        since = etcd.revision()
        rc, seen = sigterm_and_watch(
            victim, watcher, lambda m: all(v != victim.node for v in leaders_of(m).values()))
        check(rc == 0, f"broker {victim.node} exited {rc}")
        time.sleep(1)
    check(shutdown_logged(victim), "the broker did not log its controlled shutdown as done")
    gone, states = check_moved_before_exit(etcd, victim.node, since)
    print(f"SIGTERM of broker {victim.node} (leader of {TOPIC} {led[victim.node]}): moved "
          f"before its registration went (revision {gone}); Metadata showed it while it ran: "
          f"{seen}")
    check(not history.failures, f"delivery failures {history.failures[:3]}")
    check(not bg.refusals(), f"NOT_ENOUGH_REPLICAS: {bg.refusals()[:2]}")
    check(len(history.acks) > 0, "nothing acknowledged")
    implicit = [m for m in bg.said if "mplicit" in m]
    if implicit:
        print(f"librdkafka: {len(implicit)} implicit acks, e.g. {implicit[0]}")
    check_history(history, crt.read_all(watcher.bootstrap), tmp)

    # 2. Back, caught up, in every ISR; then the controller itself.
    victim.start()
    md = wait_metadata(watcher.bootstrap,
                       lambda m: all(len(i) == 3 for i in isr_of(m).values()),
                       f"broker {victim.node} back in every ISR", timeout=60)
    controller = by_node[md.controller_id]
    others = [b for b in brokers if b is not controller]
    lonely_led = [p for p, n in leaders_of(md, "lonely").items() if n == controller.node]
    # Admin clients that learnt this controller keep sending there.
    from kafka.admin import KafkaAdminClient, NewTopic as KNewTopic
    stale = KafkaAdminClient(bootstrap_servers=controller.bootstrap, request_timeout_ms=30000)
    rd_stale = AdminClient({"bootstrap.servers": controller.bootstrap,
                            "topic.metadata.refresh.interval.ms": 600000})
    rd_stale.list_topics(timeout=10)
    check(stale._controller_id == controller.node, f"kafka-python's controller "
          f"{stale._controller_id}, not {controller.node}")
    with Background(others, history) as bg:
        time.sleep(1)
        since = etcd.revision()
        rc, seen = sigterm_and_watch(
            controller, others[0],
            lambda m: all(v != controller.node for v in leaders_of(m).values()))
        check(rc == 0, f"controller {controller.node} exited {rc}")
        time.sleep(1)
    check(shutdown_logged(controller), "the controller did not log its controlled shutdown")
    gone, states = check_moved_before_exit(etcd, controller.node, since)
    held = {k: v for k, v in values_at(etcd, "/sluice/sluice/controller", gone - 1).items()
            if k == "/sluice/sluice/controller"}
    check(all(v["node"] != controller.node for v in held.values()),
          f"broker {controller.node} still held the controller key when it went: {held}")
    md = wait_metadata(others[0].bootstrap,
                       lambda m: m.controller_id in [b.node for b in others],
                       "another controller")
    print(f"SIGTERM of the controller {controller.node}: moved and resigned before its "
          f"registration went; broker {md.controller_id} is the controller")
    check(not history.failures, f"delivery failures {history.failures[:3]}")
    check(not bg.refusals(), f"NOT_ENOUGH_REPLICAS: {bg.refusals()[:2]}")
    check_history(history, crt.read_all(others[0].bootstrap), tmp)
    # Replication factor 1: offline once its only broker is gone, as Kafka.
    if lonely_led:
        md = wait_metadata(others[0].bootstrap,
                           lambda m: all(leaders_of(m, "lonely")[p] == -1 for p in lonely_led),
                           "replication factor 1 partitions offline")
        print(f"lonely {lonely_led}: offline (leader -1)")
    controller.start()
    md = wait_metadata(others[0].bootstrap, lambda m: len(m.brokers) == 3,
                       "three brokers again")
    # The old controller, back as a broker that is not: the clients' requests go there
    # and are forwarded.
    try:
        check(md.controller_id != controller.node, "the old controller is controller again")
        from kafka.errors import KafkaConnectionError
        for attempt in range(5):
            try:  # its connection to the stopped broker is gone: the first send finds out
                stale.create_topics([KNewTopic("after-resign", 1, 3)])
                break
            except KafkaConnectionError:
                time.sleep(0.5)
    finally:
        stale.close()
    wait_metadata(others[0].bootstrap, lambda m: "after-resign" in m.topics, "after-resign")
    # librdkafka likewise.
    rd_stale.create_topics([NewTopic("rd-after-resign", 1, 3)],
                           operation_timeout=10)["rd-after-resign"].result(60)
    wait_metadata(others[0].bootstrap, lambda m: "rd-after-resign" in m.topics, "rd-after-resign")
    print(f"kafka-python: created through broker {stale._controller_id}, the controller "
          f"it knew (now {md.controller_id})")

    # 3. etcd away (paused): a SIGTERM still stops the broker, after the timeout.
    md = metadata(brokers[0].bootstrap)
    leaving = next(b for b in brokers if b.node != md.controller_id)
    etcd.pause(0)
    try:
        leaving.proc.send_signal(15)
        rc = leaving.proc.wait(120)
        leaving.proc = None
    finally:
        etcd.resume(0)
    check(rc == 0, f"broker {leaving.node} exited {rc} with etcd away")
    print(f"etcd paused: broker {leaving.node} stopped anyway (exit 0)")
    leaving.start()
    wait_metadata(brokers[0].bootstrap if leaving is not brokers[0] else brokers[1].bootstrap,
                  lambda m: len(m.brokers) == 3, "three brokers after etcd came back", timeout=60)


# ---- topics through a broker that is not the controller

def _ask(bootstrap, api_key, version, body):
    return crt._ask(bootstrap, api_key, version, body)


def _string(s):
    return struct.pack(">h", len(s)) + s.encode()


def create_topics_error(bootstrap, topic, replication_factor=1):
    # CreateTopics v0: [name, partitions, replication factor, [assignments], [configs]],
    # timeout -> [name, error].
    body = (struct.pack(">i", 1) + _string(topic) +
            struct.pack(">ihii", 1, replication_factor, 0, 0) + struct.pack(">i", 10000))
    r = _ask(bootstrap, 19, 0, body)
    n = struct.unpack(">h", r[4:6])[0]
    return struct.unpack(">h", r[6 + n:8 + n])[0]


def delete_topics_error(bootstrap, topic):
    body = struct.pack(">i", 1) + _string(topic) + struct.pack(">i", 10000)
    r = _ask(bootstrap, 20, 0, body)
    n = struct.unpack(">h", r[4:6])[0]
    return struct.unpack(">h", r[6 + n:8 + n])[0]


def create_partitions_error(bootstrap, topic):
    # v0: [name, count, assignment (null)], timeout, validate_only -> throttle, [name, error]
    body = (struct.pack(">i", 1) + _string(topic) + struct.pack(">ii", 4, -1) +
            struct.pack(">ib", 10000, 0))
    r = _ask(bootstrap, 37, 0, body)
    n = struct.unpack(">h", r[8:10])[0]
    return struct.unpack(">h", r[10 + n:12 + n])[0]


def test_topics_through_any_broker(brokers):
    md = wait_metadata(brokers[0].bootstrap,
                       lambda m: len(m.brokers) == 3 and m.controller_id >= 0,
                       "three brokers and a controller")
    other = next(b for b in brokers if b.node != md.controller_id)

    # Auto-creation through Metadata on a broker that is not the controller.
    p = Producer({"bootstrap.servers": other.bootstrap, "acks": "all",
                  "enable.idempotence": True, "message.timeout.ms": 60000})
    acked = []
    for i in range(50):
        p.produce("made-on-the-way", value=f"v{i}".encode(),
                  on_delivery=lambda err, msg: acked.append(err))
    check(p.flush(60) == 0, "records to the auto-created topic not acknowledged")
    check(len(acked) == 50 and all(e is None for e in acked), f"delivery: {acked[:3]}")
    md = wait_metadata(other.bootstrap,
                       lambda m: "made-on-the-way" in m.topics and
                       all(x.leader >= 0 for x in m.topics["made-on-the-way"].partitions.values()),
                       "the auto-created topic")
    print(f"auto-created through broker {other.node} (controller {md.controller_id}): "
          f"leaders {leaders_of(md, 'made-on-the-way')}")

    # Sent to it directly: forwarded (through etcd), as Kafka 2.8+ brokers forward them.
    def led(topic, partitions):
        return lambda m: (topic in m.topics and len(m.topics[topic].partitions) == partitions
                          and all(x.leader >= 0 for x in m.topics[topic].partitions.values()))
    check(create_topics_error(other.bootstrap, "raw", 3) == 0, "CreateTopics")
    wait_metadata(other.bootstrap, led("raw", 1), "raw's leader")
    check(create_topics_error(other.bootstrap, "raw") == TOPIC_ALREADY_EXISTS,
          "CreateTopics of an existing topic")
    check(create_topics_error(other.bootstrap, "too-wide", 4) == INVALID_REPLICATION_FACTOR,
          "CreateTopics with a replication factor above the brokers")
    check(create_partitions_error(other.bootstrap, "raw") == 0, "CreatePartitions")
    wait_metadata(other.bootstrap, led("raw", 4), "raw's four leaders")
    check(delete_topics_error(other.bootstrap, "raw") == 0, "DeleteTopics")
    wait_metadata(brokers[0].bootstrap, lambda m: "raw" not in m.topics, "raw deleted")
    check(delete_topics_error(other.bootstrap, "raw") == UNKNOWN_TOPIC_OR_PARTITION,
          "DeleteTopics of a deleted topic")
    print(f"CreateTopics, CreatePartitions, DeleteTopics to broker {other.node} (not the "
          f"controller): done")

    # kafka-python: it asks Metadata for the controller and sends there.
    from kafka.admin import KafkaAdminClient, NewTopic as KNewTopic
    from kafka.admin import NewPartitions as KNewPartitions
    ka = KafkaAdminClient(bootstrap_servers=other.bootstrap, request_timeout_ms=30000)
    try:
        ka.create_topics([KNewTopic("kp-made", 2, 3)])
        wait_metadata(other.bootstrap, lambda m: "kp-made" in m.topics and
                      len(m.topics["kp-made"].partitions) == 2, "kp-made")
        ka.create_partitions({"kp-made": KNewPartitions(4)})
        wait_metadata(other.bootstrap, lambda m: "kp-made" in m.topics and
                      len(m.topics["kp-made"].partitions) == 4, "kp-made with 4 partitions")
        ka.delete_topics(["kp-made", "made-on-the-way"])
        wait_metadata(other.bootstrap, lambda m: "kp-made" not in m.topics and
                      "made-on-the-way" not in m.topics, "kp-made deleted")
    finally:
        ka.close()
    print(f"kafka-python through broker {other.node}: created, grown, deleted")

    # librdkafka's AdminClient likewise.
    admin = AdminClient({"bootstrap.servers": other.bootstrap})
    admin.create_topics([NewTopic("rd-made", 1, 3)], operation_timeout=10)["rd-made"].result(30)
    admin.create_partitions([NewPartitions("rd-made", 3)])["rd-made"].result(30)
    wait_metadata(other.bootstrap, lambda m: "rd-made" in m.topics and
                  len(m.topics["rd-made"].partitions) == 3, "rd-made with 3 partitions")
    admin.delete_topics(["rd-made"], operation_timeout=10)["rd-made"].result(30)
    wait_metadata(other.bootstrap, lambda m: "rd-made" not in m.topics, "rd-made deleted")
    print(f"confluent-kafka through broker {other.node}: created, grown, deleted")


def main():
    why = unavailable()
    if why:
        print(f"SKIP: {why}")
        return 0
    sluice = sys.argv[1]
    etcd = EtcdCluster().start()
    brokers = [Broker(sluice, n, etcd.endpoints_arg()) for n in (1, 2, 3)]
    tmp = tempfile.mkdtemp(prefix="sluice-shutdown-")
    failed = 0
    try:
        start_together(brokers)
        test_topics_through_any_broker(brokers)
        print("PASS: cluster_shutdown_test (topics through any broker)")
        test_controlled_shutdown(etcd, brokers, tmp)
        print("PASS: cluster_shutdown_test (controlled shutdown)")
        for b in brokers:
            if b.proc is not None:
                check(b.stop() == 0, f"broker {b.node} did not stop cleanly")
    except Exception as e:  # the verdict: any exception fails it
        import traceback
        traceback.print_exc()
        print(f"FAIL: cluster_shutdown_test: {e}")
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
