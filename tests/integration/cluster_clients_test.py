#!/usr/bin/python3
"""Every real client against a replicated cluster (issue 21, docs/design/0018-cluster.md):
three `sluice serve --etcd` brokers and a real etcd, a topic of three partitions with
replication factor 3 and min.insync.replicas=2, and one client library at a time producing
with acks=all and consuming in a consumer group while the leader of a partition is
SIGKILLed and, later, restarted:

  kafka-python   Debian's python3-kafka 2.0.2, in this process (no idempotence in 2.0:
                 retries may write a record twice, so duplicates are allowed for it, and
                 only for it; max_in_flight 1 keeps each partition in order)
  kafkajs        node_modules' kafkajs, an idempotent producer and a group, in
                 cluster_kafkajs_clients.js driven from here over its stdin/stdout
(confluent-kafka: cluster_replication_test.py; librdkafka from C++:
cluster_rdkafka_clients_test.cc.)

Then the leader of a partition is paused (SIGSTOP) past its session timeout and continued:
its lease goes, another broker leads, and continued it steps down, registers again and
rejoins the ISRs. Then etcd is killed for longer than the session and started again. The client carries on by itself: the producer keeps sending at a steady
pace before, during and after each fault, and the test only waits for its
acknowledgements to grow (and for records sent after each fault to be acknowledged on the
partition that lost its leader). At the end the group has read every acknowledged record (at its acknowledged offset,
with its value), and a final read of every partition through a surviving broker, checked by
tests/tools/history_checker.py with the acks and the group's committed offsets (read every
half second), has every acknowledged record at its offset, each producer's records in
order, (idempotent clients) none twice, and no committed offset going backwards.

The victim is a partition leader that is not the controller: the group coordinator lives on
the controller until the coordinators' logs are replicated partitions (0018 phase D), which
this test does not cover.

usage: /usr/bin/python3 cluster_clients_test.py path/to/sluice kafka-python|kafkajs
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from cluster_controller_test import (start_together, three_brokers,  # noqa: E402
                                     wait_controller, wait_metadata)
from cluster_replication_test import PARTITIONS, TOPIC, isr_of, leaders_of, read_all  # noqa: E402
from sluice_broker import check, wait_until  # noqa: E402
import history_checker  # noqa: E402

from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

GROUP = "cluster-clients"


class KafkaPythonClient:
    """kafka-python's producer (acks=all, retries, one request in flight) on a thread of
    its own sending a record every few milliseconds, and a group member on another."""

    idempotent = False
    name = "kafka-python"

    def __init__(self, bootstrap, tmp):
        import kafka  # Debian's python3-kafka
        self.kafka = kafka
        self.bootstrap = bootstrap.split(",")
        self.lock = threading.Lock()
        self.acks, self.reads, self.failures, self.errors = [], [], [], []
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.sent = 0  # records handed to the producer so far
        self.producer_thread = threading.Thread(target=self._produce, daemon=True)
        self.consumer_thread = threading.Thread(target=self._consume, daemon=True)

    def start(self):
        self.consumer_thread.start()
        self.producer_thread.start()

    def acked(self):
        with self.lock:
            return len(self.acks)

    def sent_so_far(self):
        return self.sent

    def read(self):
        with self.lock:
            return len(self.reads)

    def _produce(self):
        p = self.kafka.KafkaProducer(
            bootstrap_servers=self.bootstrap, acks="all", retries=1000, retry_backoff_ms=200,
            max_in_flight_requests_per_connection=1, linger_ms=5, request_timeout_ms=10000,
            metadata_max_age_ms=5000, max_block_ms=120000)
        seq = 0

        def ok(value, md):
            with self.lock:
                self.acks.append({"type": "ack", "topic": TOPIC, "partition": md.partition,
                                  "offset": md.offset, "value": value})

        def failed(value, exc):
            with self.lock:
                self.failures.append(f"{value}: {exc!r}")
        try:
            while not self.stop_producing.is_set():
                value = f"kp:{seq}"
                seq += 1
                f = p.send(TOPIC, key=value.encode(), value=value.encode())
                self.sent = seq
                f.add_callback(lambda md, v=value: ok(v, md))
                f.add_errback(lambda e, v=value: failed(v, e))
                time.sleep(0.005)
            p.flush(120)
        except Exception as e:
            with self.lock:
                self.errors.append(f"producer: {e!r}")
        finally:
            p.close(30)

    def _consume(self):
        kafka = self.kafka
        try:
            c = kafka.KafkaConsumer(
                bootstrap_servers=self.bootstrap, group_id=GROUP, client_id="kp-member",
                enable_auto_commit=True, auto_commit_interval_ms=500,
                auto_offset_reset="earliest", session_timeout_ms=10000,
                heartbeat_interval_ms=500, metadata_max_age_ms=5000)
            c.subscribe([TOPIC])
            while not self.stop_consuming.is_set():
                for tp, msgs in c.poll(timeout_ms=200, max_records=500).items():
                    with self.lock:
                        for m in msgs:
                            self.reads.append((m.partition, m.offset, m.value.decode()))
            c.close(autocommit=True)
        except Exception as e:
            with self.lock:
                self.errors.append(f"consumer: {e!r}")

    def finish(self):
        """Stops producing; waits until the group read every acknowledged record."""
        self.stop_producing.set()
        self.producer_thread.join(180)
        check(not self.producer_thread.is_alive(), "kafka-python's producer did not finish")
        want = {a["value"] for a in self.acks}
        wait_until(lambda: want <= {r[2] for r in list(self.reads)}, 120,
                   "kafka-python's group reading every acknowledged record", interval=0.2)
        self.stop_consuming.set()
        self.consumer_thread.join(60)
        return self.acks, self.reads, self.failures, self.errors

    def close(self):
        self.stop_producing.set()
        self.stop_consuming.set()


class KafkaJsClient:
    """cluster_kafkajs_clients.js as a child process: `start`, then `finish` on its stdin;
    it prints `acked N read M` lines while it runs and writes its acks and reads as JSON
    lines to a file."""

    idempotent = True
    name = "kafkajs"

    def __init__(self, bootstrap, tmp):
        node = shutil.which("node") or shutil.which("nodejs")
        check(node is not None, "node is missing (scripts/setup.sh installs nodejs)")
        self.out = os.path.join(tmp, "kafkajs-events.jsonl")
        self.log = open(os.path.join(tmp, "kafkajs.log"), "w")
        self.proc = subprocess.Popen(
            [node, os.path.join(HERE, "cluster_kafkajs_clients.js"), bootstrap, TOPIC, GROUP,
             self.out], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            text=True, bufsize=1)
        self.counts = (0, 0)
        self.done = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            words = line.split()
            if len(words) == 4 and words[0] == "acked" and words[2] == "read":
                self.counts = (int(words[1]), int(words[3]))
            elif words[:1] == ["finished"]:
                self.done = line.strip()
            else:
                self.log.write("stdout: " + line)
                self.log.flush()

    def _tell(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def start(self):
        self._tell("start")

    def sent_so_far(self):
        # One record in flight at a time: sent at most one past the acks it printed.
        return self.counts[0] + 1

    def acked(self):
        check(self.proc.poll() is None, f"kafkajs exited ({self.proc.returncode}): {self.tail()}")
        return self.counts[0]

    def read(self):
        return self.counts[1]

    def finish(self):
        self._tell("finish")
        try:
            rc = self.proc.wait(240)
        except subprocess.TimeoutExpired:
            raise AssertionError("kafkajs did not finish: " + self.tail())
        check(rc == 0, f"kafkajs exited {rc}: {self.tail()}")
        acks, reads, failures, errors = [], [], [], []
        with open(self.out) as f:
            for line in f:
                e = json.loads(line)
                if e["type"] == "ack":
                    acks.append(e)
                elif e["type"] == "consumed":
                    reads.append((e["partition"], e["offset"], e["value"]))
                elif e["type"] == "failure":
                    failures.append(e["error"])
                else:
                    errors.append(e["error"])
        return acks, reads, failures, errors

    def tail(self):
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            return "".join(f.readlines()[-30:])

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


CLIENTS = {"kafka-python": KafkaPythonClient, "kafkajs": KafkaJsClient}


def wait_acks_past(client, n, what, timeout=120):
    """Until the client's acknowledgements pass n: it carries on by itself."""
    return wait_until(lambda: client.acked() > n and client.acked(), timeout, what, interval=0.1)


def check_group_reads(name, acks, reads):
    """Every acknowledged record was read by the group at its offset; an offset the group
    read twice (a rebalance, a restart from a commit) holds one value."""
    at = {}
    for p, o, v in reads:
        prev = at.setdefault((p, o), v)
        check(prev == v, f"{name}: {TOPIC}-{p} offset {o} read as {prev!r} and {v!r}")
    for a in acks:
        got = at.get((a["partition"], a["offset"]))
        check(got == a["value"], f"{name}: acknowledged {a['value']!r} at {TOPIC}-"
              f"{a['partition']} offset {a['offset']}, the group read {got!r}")


class CommitWatcher(threading.Thread):
    """The group's committed offsets, read every half second (OffsetFetch from a consumer
    that never joins the group), as history_checker.py's "commit" events: committed
    offsets must never go backwards."""

    def __init__(self, bootstrap):
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                                  "enable.auto.commit": False})
        self.events, self.stop = [], threading.Event()

    def run(self):
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        while not self.stop.wait(0.5):
            try:
                got = self.consumer.committed(tps, timeout=5)
            except Exception:
                continue  # the coordinator moving or unreachable: the next round
            for tp in got:
                if tp.error is None and tp.offset >= 0:
                    self.events.append({"type": "commit", "group": GROUP, "topic": TOPIC,
                                        "partition": tp.partition, "offset": tp.offset})

    def finish(self):
        self.stop.set()
        self.join(30)
        self.consumer.close()
        return self.events


def check_history(client, acks, final_read, commits):
    report = history_checker.check(acks + commits + final_read)
    allowed = set() if client.idempotent else {"duplicate"}
    bad = [(k, m) for k, m in report.violations if k not in allowed]
    dups = len(report.violations) - len(bad)
    extra = f" ({dups} duplicates of a non-idempotent producer)" if dups else ""
    print(f"history: {report.acked} acknowledged, {report.read} read back, "
          f"{report.commits} commits observed, {len(bad)} violations{extra}")
    check(not bad, "history checker: " + "; ".join(f"{k}: {m}" for k, m in bad[:10]))


def create_replicated_topic(brokers, topic, partitions):
    """Creates `topic` with replication factor 3 and min.insync.replicas=2 through broker 1
    once Metadata names a controller, and waits until every partition has a leader and an
    ISR of three. Returns the AdminClient and that Metadata."""
    wait_metadata(brokers[0].bootstrap, lambda m: len(m.brokers) == 3, "three brokers")
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=10)[topic].result(30)
    md = wait_metadata(brokers[1].bootstrap,
                       lambda m: topic in m.topics
                       and all(p.leader >= 0 for p in m.topics[topic].partitions.values())
                       and all(len(i) == 3 for i in isr_of(m, topic).values()),
                       f"{topic}'s leaders and ISRs of three")
    return admin, md


def run(sluice, which, tmp):
    made = three_brokers(sluice)
    if made is None:
        return
    etcd, brokers = made
    client = None
    try:
        start_together(brokers)
        by_node = {b.node: b for b in brokers}
        _, md = create_replicated_topic(brokers, TOPIC, PARTITIONS)
        controller = wait_controller(brokers)
        partition, leader = next((p, n) for p, n in sorted(leaders_of(md).items())
                                 if n != controller)
        victim = by_node[leader]
        survivor = next(b for b in brokers if b is not victim)

        client = CLIENTS[which](",".join(b.bootstrap for b in brokers), tmp)
        commits = CommitWatcher(",".join(b.bootstrap for b in brokers))
        commits.start()
        client.start()
        n = wait_acks_past(client, 200, f"{which}: the first acknowledgements")
        sent_before_kill = client.sent_so_far()
        victim.kill()
        print(f"{which}: {n} acknowledged; killed broker {victim.node}, the leader of "
              f"{TOPIC}-{partition} (controller: broker {controller})")
        md = wait_metadata(survivor.bootstrap,
                           lambda m: leaders_of(m)[partition] not in (-1, victim.node),
                           f"a new leader of {TOPIC}-{partition}")
        n = client.acked()
        n = wait_acks_past(client, n + 300, f"{which} producing after the kill")
        print(f"{which}: carried on, {n} acknowledged, {client.read()} read; "
              f"leaders {leaders_of(md)}")
        victim.start()
        md = wait_metadata(survivor.bootstrap,
                           lambda m: all(len(i) == 3 for i in isr_of(m).values()),
                           f"broker {victim.node} back in every ISR", timeout=90)
        n = wait_acks_past(client, client.acked() + 200, f"{which} producing after the restart")
        print(f"{which}: broker {victim.node} back in the ISRs, {n} acknowledged")

        # A leader paused past its session (SIGSTOP, then SIGCONT): its lease goes, another
        # broker leads; continued, it stops leading, registers again and catches up.
        controller = wait_controller(brokers)
        paused_partition, paused_node = next((p, n) for p, n in sorted(leaders_of(md).items())
                                             if n != controller)
        paused = by_node[paused_node]
        other = next(b for b in brokers if b is not paused)
        sent_before_pause = client.sent_so_far()
        os.kill(paused.proc.pid, signal.SIGSTOP)
        try:
            wait_metadata(other.bootstrap,
                          lambda m: leaders_of(m)[paused_partition] not in (-1, paused_node),
                          f"a new leader of {TOPIC}-{paused_partition}")
            n = wait_acks_past(client, client.acked() + 300, f"{which} producing while paused")
        finally:
            os.kill(paused.proc.pid, signal.SIGCONT)
        print(f"{which}: paused broker {paused.node}, the leader of {TOPIC}-{paused_partition}: "
              f"carried on, {n} acknowledged")
        md = wait_metadata(other.bootstrap,
                           lambda m: all(len(i) == 3 for i in isr_of(m).values()),
                           f"broker {paused.node} back in every ISR", timeout=90)
        n = wait_acks_past(client, client.acked() + 200, f"{which} producing after the pause")
        print(f"{which}: broker {paused.node} continued and back in the ISRs, {n} acknowledged")

        # etcd killed for longer than the session and started again: every broker loses
        # its lease and stops leading, then registers again and the controller elects.
        etcd.kill(0)
        time.sleep(6)
        etcd.restart(0)
        md = wait_metadata(survivor.bootstrap,
                           lambda m: all(p >= 0 for p in leaders_of(m).values())
                           and all(len(i) == 3 for i in isr_of(m).values()),
                           "leaders and ISRs of three after etcd's restart", timeout=90)
        n = wait_acks_past(client, client.acked() + 300, f"{which} producing after etcd's restart")
        print(f"{which}: etcd killed and restarted, {n} acknowledged; leaders {leaders_of(md)}")

        acks, reads, failures, errors = client.finish()
        check(not errors, f"{which}: {errors[:5]}")
        check(not failures, f"{which}: {len(failures)} delivery failures: {failures[:5]}")
        print(f"{which}: {len(acks)} acknowledged, the group read {len(reads)} "
              f"({len({(p, o) for p, o, _ in reads})} distinct offsets)")
        check_group_reads(which, acks, reads)
        later = [a for a in acks if a["partition"] == partition
                 and int(a["value"].split(":")[1]) > sent_before_kill]
        check(later, f"{which}: no record sent after the kill was acknowledged on "
              f"{TOPIC}-{partition}")
        later = [a for a in acks if a["partition"] == paused_partition
                 and int(a["value"].split(":")[1]) > sent_before_pause]
        check(later, f"{which}: no record sent after the pause was acknowledged on "
              f"{TOPIC}-{paused_partition}")
        observed = commits.finish()
        check(observed, f"{which}: no committed offset observed")
        check_history(client, acks, read_all(survivor.bootstrap), observed)
        print(f"PASS: cluster_clients_test ({which})")
    except BaseException:
        for b in brokers:
            print(b.logs(60))
        if client is not None and hasattr(client, "tail"):
            print(client.tail())
        raise
    finally:
        if client is not None:
            client.close()
        for b in brokers:
            b.cleanup()
        etcd.close()


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in CLIENTS:
        print(__doc__.strip().splitlines()[-1])
        return 2
    tmp = tempfile.mkdtemp(prefix="sluice-clients-")
    try:
        run(sys.argv[1], sys.argv[2], tmp)
        return 0
    except Exception as e:  # the verdict: any exception fails it
        import traceback
        traceback.print_exc()
        print(f"FAIL: cluster_clients_test ({sys.argv[2]}): {e}")
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
