#!/usr/bin/python3
"""Three `sluice serve --etcd` brokers and a real etcd (Debian's /usr/bin/etcd, data on
/dev/shm, through etcd_util.py), on loopback: the cluster as confluent-kafka (librdkafka) sees it
(docs/design/0018-cluster.md, phase C).

- Metadata from every broker lists the three brokers and one controller.
- CreateTopics spreads replication factor 3 evenly (each broker holds every partition
  and leads a third); a replication factor above the brokers is INVALID_REPLICATION_FACTOR.
- Replication factor 1 topics across the three: an idempotent producer and consumers
  (assigned, and in a group) through any one bootstrap broker read back every record.
- A second broker with a node id in use, and a broker whose data directory belongs to
  another cluster, refuse to start with a clear message; so does a broker whose etcd does
  not answer.
- SIGKILL of the controller: another broker becomes controller; the killed broker's
  replication factor 1 partitions go offline (leader -1) and its replication factor 3
  partitions get another leader; restarted, it leads its own partitions again.
- A broker paused (SIGSTOP) past its session, and etcd killed past the session and
  restarted: the brokers register again and the partitions return to their leaders.
- A single node's data directory joining a new cluster: its partition directories are set
  aside (-stray), not served as the cluster's topic of the same name.

usage: /usr/bin/python3 cluster_controller_test.py path/to/sluice
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_util import EtcdCluster, free_ports, unavailable  # noqa: E402
from sluice_broker import FAST_GROUPS, TestFailure, check, wait_until  # noqa: E402

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (AdminClient, ConfigResource, NewPartitions,  # noqa: E402
                                  NewTopic)

class ClusterBroker:
    """`sluice serve --node-id N --etcd URL` on a fixed free port."""

    def __init__(self, sluice, node, etcd_url, data_dir=None, cluster_name=None):
        self.sluice = sluice
        self.cluster_name = cluster_name
        self.node = node
        self.etcd_url = etcd_url
        self.tmp = tempfile.mkdtemp(prefix=f"sluice-cl{node}-")
        self.data_dir = data_dir or os.path.join(self.tmp, "data")
        self.port = free_ports(1)[0]
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc = None
        self.runs = 0

    def args(self, etcd=True):
        config = os.path.join(self.tmp, "sluice.yaml")
        with open(config, "w") as f:
            f.write(FAST_GROUPS)
            if etcd:
                f.write("cluster:\n  session_timeout: 2s\n")
                if self.cluster_name:
                    f.write(f"  name: {self.cluster_name}\n")
        a = [self.sluice, "serve", "--kafka-addr", self.bootstrap, "--data-dir", self.data_dir,
             "--shards", "2", "--http-addr", "off", "--pg-addr", "off", "--schema-registry-addr", "off", "--config", config]
        if etcd:
            a += ["--node-id", str(self.node), "--etcd", self.etcd_url]
        return a

    def spawn(self, etcd=True):
        self.runs += 1
        self.out_path = os.path.join(self.tmp, f"out.{self.runs}")
        self.err_path = os.path.join(self.tmp, f"err.{self.runs}")
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(self.args(etcd), stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL)

    def start(self, etcd=True, timeout=60):
        self.spawn(etcd)
        self.wait_listening(timeout)

    def wait_listening(self, timeout=60):
        pattern = re.compile(r"^sluice: serving Kafka on ", re.M)

        def listening():
            with open(self.out_path) as f:
                if pattern.search(f.read()):
                    return True
            if self.proc.poll() is not None:
                self.proc = None
                raise TestFailure(f"broker {self.node} exited before listening:\n" + self.logs())
            return False
        wait_until(listening, timeout, f"broker {self.node} listening", interval=0.05)

    def expect_refusal(self, timeout=60):
        """Starts it expecting a failed start: its stderr."""
        self.spawn()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise TestFailure(f"broker {self.node} did not exit")
        self.proc = None
        check(rc != 0, f"broker {self.node} exited {rc}")
        with open(self.err_path) as f:
            return f.read()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(60)
        self.proc = None
        return rc

    def kill(self):
        self.proc.kill()
        self.proc.wait()
        self.proc = None

    def logs(self, lines=40):
        text = []
        for path in sorted(p for p in os.listdir(self.tmp) if p.startswith(("out.", "err."))):
            with open(os.path.join(self.tmp, path), errors="replace") as f:
                tail = f.read().splitlines()[-lines:]
            text.append(f"--- broker {self.node} {path}:\n" + "\n".join(tail))
        return "\n".join(text)

    def cleanup(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        if os.environ.get("SLUICE_KEEP_TMP"):
            print(f"kept broker {self.node}'s files in {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def led_epochs(broker, topic, run=None):
    """[(partition, leader epoch)] of every leadership the broker's log (of one run, by
    default the last) shows for `topic`, in order."""
    path = os.path.join(broker.tmp, f"err.{run or broker.runs}")
    with open(path, errors="replace") as f:
        text = f.read()
    return [(int(m.group(1)), int(m.group(2))) for m in
            re.finditer(rf"replica: {re.escape(topic)}-(\d+): leader in epoch (\d+) ", text)]


def check_new_epochs(broker, topic, before, after_line=None):
    """A broker back (restarted, or registered again after its lease was lost) leads its
    partitions only in epochs written after its registration: above every epoch it led
    before (`before`: partition -> epoch). Leading an old epoch for the moment before the
    controller handled the registration served stale state (0018, "stalelead")."""
    path = os.path.join(broker.tmp, f"err.{broker.runs}")
    with open(path, errors="replace") as f:
        text = f.read()
    if after_line is not None:
        text = text[text.rfind(after_line):]
    seen = [(int(m.group(1)), int(m.group(2))) for m in
            re.finditer(rf"replica: {re.escape(topic)}-(\d+): leader in epoch (\d+) ", text)]
    check(seen, f"broker {broker.node} led no partition of {topic} after it came back")
    for p, epoch in seen:
        if p in before:
            check(epoch > before[p], f"broker {broker.node} led {topic}-{p} in epoch {epoch} "
                                     f"after it came back, not above its earlier {before[p]}")


def metadata(bootstrap, topic=None):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(topic=topic, timeout=10)


def wait_metadata(bootstrap, predicate, what, timeout=30):
    def ok():
        try:
            md = metadata(bootstrap)
        except Exception:
            return None
        return md if predicate(md) else None
    return wait_until(ok, timeout, what, interval=0.2)


def wait_controller(brokers, what="a controller every broker names", timeout=30, besides=()):
    """The elected controller: the node every one of `brokers` names in Metadata, not one of
    `besides`. A broker that has not seen a controller, or cannot reach it, names itself
    (so that librdkafka's admin API has a broker to send to), so agreement is the sign."""
    def agreed():
        named = set()
        for b in brokers:
            try:
                named.add(metadata(b.bootstrap).controller_id)
            except Exception:
                return None
        return next(iter(named)) if len(named) == 1 and named.isdisjoint((-1, *besides)) else None
    return wait_until(agreed, timeout, what, interval=0.2)


def create(bootstrap, topic, partitions, rf):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(topic, partitions, rf)], operation_timeout=10)
    try:
        fs[topic].result(30)
        return None
    except Exception as e:
        return e.args[0]


def test_cluster(sluice, etcd, brokers):
    # Every broker sees the same three brokers and one controller.
    for b in brokers:
        md = wait_metadata(b.bootstrap, lambda m: len(m.brokers) == 3,
                           f"three brokers through broker {b.node}")
        check(sorted(md.brokers) == [1, 2, 3], f"brokers {sorted(md.brokers)}")
        for node, info in md.brokers.items():
            check(info.port == brokers[node - 1].port, f"broker {node} at {info}")
    controller = wait_controller(brokers)
    print(f"controller: broker {controller}")
    # Each broker describes itself (librdkafka sends a broker's configs to that broker).
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    for node in (1, 2, 3):
        res = ConfigResource(ConfigResource.Type.BROKER, str(node))
        configs = admin.describe_configs([res])[res].result(30)
        check(configs["node.id"].value == str(node), f"broker {node}: node.id {configs['node.id']}")

    # Replication factor 3 across three brokers: every broker holds every partition, and
    # leads a third of them.
    err = create(brokers[0].bootstrap, "spread", 6, 3)
    check(err is None, f"create spread: {err}")
    md = wait_metadata(brokers[1].bootstrap,
                       lambda m: "spread" in m.topics and len(m.topics["spread"].partitions) == 6
                       and all(p.leader >= 0 for p in m.topics["spread"].partitions.values()),
                       "spread's leaders")
    leaders = {}
    for p in md.topics["spread"].partitions.values():
        check(sorted(p.replicas) == [1, 2, 3], f"spread-{p.id} replicas {p.replicas}")
        check(p.leader == p.replicas[0], f"spread-{p.id} leader {p.leader} of {p.replicas}")
        leaders[p.leader] = leaders.get(p.leader, 0) + 1
    check(leaders == {1: 2, 2: 2, 3: 2}, f"leaders per broker {leaders}")
    err = create(brokers[2].bootstrap, "too-wide", 1, 4)
    check(err is not None and err.code() == KafkaError.INVALID_REPLICATION_FACTOR,
          f"replication factor 4 of 3 brokers: {err}")

    # Replication factor 1 over three brokers, through one bootstrap broker each way.
    err = create(brokers[1].bootstrap, "orders", 6, 1)
    check(err is None, f"create orders: {err}")
    md = wait_metadata(brokers[2].bootstrap,
                       lambda m: "orders" in m.topics
                       and all(p.leader >= 0 for p in m.topics["orders"].partitions.values()),
                       "orders' leaders")
    owners = sorted({p.leader for p in md.topics["orders"].partitions.values()})
    check(owners == [1, 2, 3], f"orders' leaders {owners}")
    producer = Producer({"bootstrap.servers": brokers[1].bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5})
    sent = {}
    failures = []

    def delivered(err, msg):
        if err is not None:
            failures.append(err)
        else:
            sent.setdefault(msg.partition(), []).append(msg.value())
    for i in range(600):
        producer.produce("orders", key=str(i).encode(), value=f"order-{i}".encode(),
                         on_delivery=delivered)
    check(producer.flush(60) == 0, "producer did not flush")
    check(not failures, f"delivery failures {failures[:3]}")
    check(sum(len(v) for v in sent.values()) == 600, "not every record was acknowledged")

    def read_assigned(bootstrap):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                      "enable.auto.commit": False})
        c.assign([TopicPartition("orders", p, 0) for p in range(6)])
        got = {}
        deadline = time.monotonic() + 60
        while sum(len(v) for v in got.values()) < 600 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            got.setdefault(m.partition(), []).append(m.value())
        c.close()
        return got
    got = read_assigned(brokers[2].bootstrap)
    check(got == sent, "the records read back differ from those acknowledged")

    group = Consumer({"bootstrap.servers": brokers[0].bootstrap, "group.id": "g1",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
    group.subscribe(["orders"])
    n = 0
    deadline = time.monotonic() + 60
    while n < 600 and time.monotonic() < deadline:
        m = group.poll(0.5)
        if m is not None and not m.error():
            n += 1
    group.commit(asynchronous=False)
    group.close()
    check(n == 600, f"the group read {n} of 600")
    print("replication factor 1 across three brokers: 600 records produced and read back")

    # CreatePartitions and DeleteTopics through the controller.
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    fs = admin.create_partitions([NewPartitions("spread", 9)], operation_timeout=10)
    fs["spread"].result(30)
    md = wait_metadata(brokers[2].bootstrap,
                       lambda m: len(m.topics["spread"].partitions) == 9
                       and all(p.leader >= 0 for p in m.topics["spread"].partitions.values()),
                       "spread grown to 9 partitions")
    for p in md.topics["spread"].partitions.values():
        check(sorted(p.replicas) == [1, 2, 3], f"spread-{p.id} replicas {p.replicas}")
    check(create(brokers[0].bootstrap, "doomed", 3, 2) is None, "create doomed")
    wait_metadata(brokers[1].bootstrap, lambda m: "doomed" in m.topics, "doomed created")
    admin.delete_topics(["doomed"], operation_timeout=10)["doomed"].result(30)
    for b in brokers:
        wait_metadata(b.bootstrap, lambda m: "doomed" not in m.topics,
                      f"doomed gone from broker {b.node}")
    # The name is free again once the deletion is done.
    wait_until(lambda: create(brokers[0].bootstrap, "doomed", 1, 1) is None, 30,
               "doomed created again")

    # A second broker with a node id in use.
    dup = ClusterBroker(sluice, 2, etcd.endpoints_arg())
    try:
        err = dup.expect_refusal()
        check("node id 2 is in use by 127.0.0.1:" + str(brokers[1].port) in err,
              f"duplicate node id: {err}")
    finally:
        dup.cleanup()

    # A data directory of another cluster (a single node's, with its own cluster id).
    other = ClusterBroker(sluice, 7, etcd.endpoints_arg())
    try:
        other.start(etcd=False)
        check(other.stop() == 0, "single node did not stop cleanly")
        err = other.expect_refusal()
        check("belongs to cluster" in err and "etcd" in err, f"foreign data directory: {err}")
    finally:
        other.cleanup()

    # The controller dies: another takes over; its partitions move or go offline.
    victim = brokers[controller - 1]
    before = metadata(brokers[controller % 3].bootstrap)
    victim.kill()
    alive = [b for b in brokers if b is not victim]
    wait_metadata(alive[0].bootstrap, lambda m: victim.node not in m.brokers,
                  f"broker {victim.node} gone from Metadata", timeout=30)
    new_controller = wait_controller(alive, "a new controller both brokers name",
                                     besides=(victim.node,))
    print(f"controller after the kill: broker {new_controller}")

    def moved(m):
        if "orders" not in m.topics or "spread" not in m.topics:
            return False
        for p in m.topics["orders"].partitions.values():
            if p.replicas == [victim.node] and p.leader != -1:
                return False
        for p in m.topics["spread"].partitions.values():
            if p.leader in (-1, victim.node):
                return False
        return True
    md = wait_metadata(alive[0].bootstrap, moved, "leaders after the kill", timeout=30)
    for p in md.topics["spread"].partitions.values():
        old = before.topics["spread"].partitions[p.id]
        if old.leader == victim.node:
            check(victim.node not in p.isrs, f"spread-{p.id} isr {p.isrs} keeps the dead leader")

    # Restarted with its data: its replication factor 1 partitions come back, read whole,
    # each in a new epoch.
    led_before = dict(led_epochs(victim, "orders"))
    check(led_before, f"broker {victim.node} led no partition of orders")
    victim.start()
    md = wait_metadata(alive[0].bootstrap,
                       lambda m: all(p.leader >= 0 for p in m.topics["orders"].partitions.values())
                       and len(m.brokers) == 3, "orders back online", timeout=30)
    got = read_assigned(alive[1].bootstrap)
    check(got == sent, "after the restart the records read back differ")
    check_new_epochs(victim, "orders", led_before)
    print("failover: new controller, partitions moved or offline, back after the restart")

    # Paused past its session (SIGSTOP): the others see it gone; resumed, it learns its
    # lease is lost, registers again and leads its partitions again.
    controller = wait_controller(brokers)
    paused = next(b for b in brokers if b.node != controller)
    watcher = next(b for b in brokers if b is not paused)
    led_before = dict(led_epochs(paused, "orders"))
    paused.proc.send_signal(signal.SIGSTOP)
    try:
        wait_metadata(watcher.bootstrap, lambda m: paused.node not in m.brokers,
                      f"broker {paused.node} gone while paused", timeout=30)
    finally:
        paused.proc.send_signal(signal.SIGCONT)

    def back(m):
        if paused.node not in m.brokers:
            return False
        mine = [p for p in m.topics["orders"].partitions.values() if p.replicas == [paused.node]]
        return mine and all(p.leader == paused.node for p in mine)
    wait_metadata(watcher.bootstrap, back, f"broker {paused.node} back after its pause",
                  timeout=30)
    got = read_assigned(paused.bootstrap)
    check(got == sent, "after the pause the records read back differ")
    check_new_epochs(paused, "orders", led_before, after_line="lost its etcd lease")
    print(f"pause: broker {paused.node} re-registered and leads its partitions again")

    # etcd killed for longer than the session, then restarted on its data: every broker
    # loses its lease, registers again, and the partitions come back to their leaders.
    # Each leads its partitions again in new epochs, not the ones it held before.
    led_before = {(b.node, t): dict(led_epochs(b, t))
                  for b in brokers for t in ("orders", "spread")}
    etcd.kill(0)
    time.sleep(3)
    etcd.restart(0)

    def recovered(m):
        if sorted(m.brokers) != [1, 2, 3] or m.controller_id < 0:
            return False
        return all(p.leader == p.replicas[0] for p in m.topics["orders"].partitions.values())
    for b in brokers:
        wait_metadata(b.bootstrap, recovered, f"broker {b.node} after etcd's restart", timeout=60)
    got = read_assigned(brokers[0].bootstrap)
    check(got == sent, "after etcd's restart the records read back differ")
    for b in brokers:
        check_new_epochs(b, "orders", led_before[(b.node, "orders")],
                         after_line="lost its etcd lease")
    print("etcd restarted: every broker registered again, partitions back with their leaders")


def test_single_node_joins(sluice, etcd):
    """A single node's data directory joining a new cluster: the cluster takes its id, and
    the single node's partition directories (no topic id) are set aside, not served as a
    cluster topic of the same name."""
    b = ClusterBroker(sluice, 1, etcd.endpoints_arg(), cluster_name="solo")
    try:
        b.start(etcd=False)
        check(create(b.bootstrap, "orders", 1, 1) is None, "single node: create orders")
        p = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(5):
            p.produce("orders", value=b"old")
        check(p.flush(30) == 0, "single node: flush")
        check(b.stop() == 0, "single node did not stop cleanly")
        b.start()
        wait_metadata(b.bootstrap, lambda m: m.controller_id == 1, "solo's controller")
        check(create(b.bootstrap, "orders", 1, 1) is None, "cluster: create orders")
        wait_metadata(b.bootstrap, lambda m: "orders" in m.topics
                      and m.topics["orders"].partitions[0].leader == 1, "orders led")
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "x"})
        lo, hi = c.get_watermark_offsets(TopicPartition("orders", 0), timeout=10)
        c.close()
        check(hi == 0, f"the cluster's new topic serves the single node's records (end {hi})")
        strays = [d for d in os.listdir(b.data_dir) if d.endswith("-stray")]
        check(len(strays) == 1 and strays[0].startswith("orders-0-"), f"set aside: {strays}")
        check(b.stop() == 0, "solo did not stop cleanly")
    finally:
        b.cleanup()


def test_unreachable_etcd(sluice):
    port = free_ports(1)[0]
    b = ClusterBroker(sluice, 1, f"http://127.0.0.1:{port}")
    try:
        err = b.expect_refusal(timeout=60)
        check("etcd is not reachable at http://127.0.0.1:" + str(port) in err,
              f"unreachable etcd: {err}")
    finally:
        b.cleanup()


def three_brokers(sluice):
    """etcd and brokers 1-3 made (not started); None (after printing SKIP) without etcd."""
    why = unavailable()
    if why:
        print(f"SKIP: {why}")
        return None
    etcd = EtcdCluster().start()
    return etcd, [ClusterBroker(sluice, n, etcd.endpoints_arg()) for n in (1, 2, 3)]


def start_together(brokers):
    """Started together, as an operator would: each then waited for."""
    for b in brokers:
        b.spawn()
    for b in brokers:
        b.wait_listening()


def main():
    sluice = sys.argv[1]
    made = three_brokers(sluice)
    if made is None:
        return 0
    etcd, brokers = made
    passed = failed = 0
    try:
        start_together(brokers)
        test_cluster(sluice, etcd, brokers)
        for b in brokers:
            if b.proc is not None:
                check(b.stop() == 0, f"broker {b.node} did not stop cleanly")
        print("PASS: cluster_controller_test (three brokers)")
        passed += 1
        test_single_node_joins(sluice, etcd)
        print("PASS: cluster_controller_test (a single node joins)")
        passed += 1
    except Exception as e:  # the verdict: any exception fails it
        import traceback
        traceback.print_exc()
        print(f"FAIL: cluster_controller_test: {e}")
        for b in brokers:
            print(b.logs())
        failed += 1
    finally:
        for b in brokers:
            b.cleanup()
        etcd.close()
    try:
        test_unreachable_etcd(sluice)
        print("PASS: cluster_controller_test (unreachable etcd)")
        passed += 1
    except Exception as e:
        print(f"FAIL: unreachable etcd: {e}")
        failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
