#!/usr/bin/python3
"""Three brokers on a three-member etcd (issue 21: "three nodes in one test"), while etcd
members fail under them (docs/design/0018-cluster.md, "controller (session 14)").

Each broker's --etcd names all three members, each through a FaultProxy of its own (the
brokers talk to member 0 first). An idempotent acks=all producer and a consumer group
(cluster_faults.Workload) run throughout, over a topic of 3 partitions with replication
factor 3 and min.insync.replicas=2, while:

  1. member 0 (the one every broker talks to first) is SIGKILLed, left down past the
     brokers' session timeout, and restarted on its data;
  2. the etcd member that leads the raft group is SIGKILLed and restarted;
  3. the brokers' path to one member is cut (connections reset, new ones refused);
  4. the brokers' path to one member is held (connections open, silent: bytes kept back
     and delivered at the heal, as TCP would);

each healed before the next, the cluster whole again in between. Then: every
acknowledged record read back exactly once at its offset and in order
(tests/tools/history_checker.py), no broker lost its etcd lease or registered a second
time (the lease keeper renewed through another member each time), no broker exited, and
each broker's metadata still names the same three brokers and one controller.

usage: /usr/bin/python3 cluster_etcd3_test.py path/to/sluice
"""

import os
import re
import shutil
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import cluster_faults  # noqa: E402
from cluster_controller_test import ClusterBroker, metadata  # noqa: E402
from cluster_replication_test import isr_of, leaders_of, read_all  # noqa: E402
from etcd_util import EtcdCluster, unavailable  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402
import history_checker  # noqa: E402
from sluice_broker import TestFailure, check, wait_until  # noqa: E402

from confluent_kafka import KafkaError, KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "etcd3"
PARTITIONS = 3
# The workload (cluster_faults.Workload) writes to its module's topic.
cluster_faults.TOPIC, cluster_faults.PARTITIONS = TOPIC, PARTITIONS
log = cluster_faults.log


class Cluster:
    """etcd (three members, each behind a proxy) and three brokers naming every proxy."""

    def __init__(self, sluice):
        self.etcd = EtcdCluster(members=3).start()
        self.proxies = [FaultProxy("127.0.0.1", port).start() for port in self.etcd.client_ports]
        urls = ",".join(f"http://127.0.0.1:{p.port}" for p in self.proxies)
        self.brokers = [ClusterBroker(sluice, n, urls) for n in (1, 2, 3)]

    def start(self):
        for b in self.brokers:
            b.spawn()
        for b in self.brokers:
            b.wait_listening()
        wait_until(lambda: self.whole(need_topic=False), 60, "three brokers registered",
                   interval=0.2)
        admin = AdminClient({"bootstrap.servers": self.brokers[0].bootstrap})
        fs = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3,
                                           config={"min.insync.replicas": "2"})],
                                 operation_timeout=10)
        fs[TOPIC].result(30)
        self.wait_whole("the topic's creation")

    def whole(self, need_topic=True):
        """Every broker's own metadata: three brokers, one controller, and (need_topic)
        every partition led with an ISR of three, the same leaders everywhere."""
        seen = None
        for b in self.brokers:
            try:
                m = metadata(b.bootstrap)
            except Exception:
                return False
            if sorted(m.brokers) != [1, 2, 3] or m.controller_id < 0:
                return False
            if not need_topic:
                continue
            if TOPIC not in m.topics or len(m.topics[TOPIC].partitions) != PARTITIONS:
                return False
            leaders = leaders_of(m, TOPIC)
            if any(v < 0 for v in leaders.values()):
                return False
            if any(len(i) != 3 for i in isr_of(m, TOPIC).values()):
                return False
            key = (m.controller_id, tuple(sorted(leaders.items())))
            if seen is not None and key != seen:
                return False
            seen = key
        return True

    def wait_whole(self, what):
        started = time.monotonic()
        wait_until(self.whole, 60, f"the cluster whole again after {what}", interval=0.3)
        log(f"whole {time.monotonic() - started:.1f}s after {what}")

    def check_brokers_alive(self):
        for b in self.brokers:
            check(b.proc is not None and b.proc.poll() is None,
                  f"broker {b.node} exited:\n" + b.logs())

    def lease_events(self):
        """{node: (registrations, lease losses, watches moved off a silent member)} from each
    broker's log."""
        out = {}
        for b in self.brokers:
            text = ""
            for name in os.listdir(b.tmp):
                if name.startswith(("out.", "err.")):
                    with open(os.path.join(b.tmp, name), errors="replace") as f:
                        text += f.read()
            out[b.node] = (len(re.findall(r"registered as broker \d+ ", text)),
                           len(re.findall(r"lost its etcd lease", text)),
                           len(re.findall(r"did not answer a status probe", text)))
        return out

    def close(self):
        for b in self.brokers:
            b.cleanup()
        for p in self.proxies:
            p.close()
        self.etcd.close()


def faults(cl):
    session = cluster_faults.SESSION_S
    # 1. The member every broker talks to first, down past the session timeout.
    log("SIGKILL etcd member 0 (the brokers' first endpoint)")
    cl.etcd.kill(0)
    time.sleep(session + 2.0)
    cl.check_brokers_alive()
    cl.etcd.restart(0)
    cl.wait_whole("etcd member 0's restart")

    # 2. The raft leader (another election under the brokers' leases and watches).
    leader = wait_until(lambda: cl.etcd.leader(), 30, "an etcd leader", interval=0.2)
    log(f"SIGKILL etcd member {leader} (the raft leader)")
    cl.etcd.kill(leader)
    time.sleep(session + 1.0)
    cl.check_brokers_alive()
    cl.etcd.restart(leader)
    cl.wait_whole(f"etcd member {leader}'s restart")

    # 3. The brokers' path to the member they use now cut: resets and refused connects.
    log("the brokers' path to etcd member 0 cut")
    cl.proxies[0].cut()
    time.sleep(session + 2.0)
    cl.check_brokers_alive()
    cl.proxies[0].heal()
    cl.wait_whole("the cut's heal")

    # 4. A silent member: connections stay open, nothing comes back until the heal. Every
    # member is held in turn, so the one the brokers' watches are on is held too: a topic
    # created meanwhile must reach every broker's metadata before the heal (the watch left
    # the silent member), and no lease may be lost.
    for i in range(3):
        log(f"the brokers' path to etcd member {i} held (silent)")
        cl.proxies[i].set_mode("hold")
        topic = f"during-hold-{i}"
        create_topic(cl.brokers[i], topic)
        for b in cl.brokers:
            wait_until(lambda b=b: topic_led(b, topic), 30,
                       f"{topic} in broker {b.node}'s metadata while member {i} is held",
                       interval=0.2)
        time.sleep(session)
        cl.check_brokers_alive()
        cl.proxies[i].heal()
        cl.wait_whole(f"member {i}'s hold")


def create_topic(broker, topic):
    """CreateTopics until it is done (a controller whose etcd write met the silent member
    answers an error, the write's outcome unknown; the topic may exist on the next try)."""
    def created():
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        fs = admin.create_topics([NewTopic(topic, 1, 3)], operation_timeout=10)
        try:
            fs[topic].result(30)
            return True
        except KafkaException as e:
            if e.args and e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return True
            log(f"CreateTopics {topic}: {e}")
            return False
    wait_until(created, 60, f"{topic} created", interval=0.5)


def topic_led(broker, topic):
    try:
        m = metadata(broker.bootstrap)
    except Exception:
        return False
    return topic in m.topics and all(p.leader >= 0 for p in m.topics[topic].partitions.values())


def main():
    sluice = sys.argv[1]
    why = unavailable()
    if why:
        print(f"SKIP: {why}")
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    root = tempfile.mkdtemp(prefix="etcd3run-")
    tempfile.tempdir = root
    cl = None
    work = None
    failures = []
    try:
        cl = Cluster(sluice)
        cl.start()
        work = cluster_faults.Workload(",".join(b.bootstrap for b in cl.brokers), 2121)
        work.start()
        time.sleep(2)
        faults(cl)
        time.sleep(2)
        work.stop()
        cl.check_brokers_alive()
        log(f"clients stopped: {work.acked} acknowledged, {work.consumed} consumed, "
            f"{work.producers} producer(s); errors {work.errors}")
        history = list(work.events) + read_all(",".join(b.bootstrap for b in cl.brokers),
                                               TOPIC, PARTITIONS)
        report = history_checker.check(history)
        log(f"history: {report.acked} acknowledged, {report.read} read back, "
            f"{len(report.violations)} violations")
        failures += [f"{k}: {m}" for k, m in report.violations[:50]]
        for name, n in sorted(work.errors.items()):
            if name.startswith("producer fatal"):
                failures.append(f"client: {name} (x{n})")
        check(report.acked > 0, "nothing was acknowledged")
        check(work.consumed > 0, "the group consumed nothing")
        for node, (registered, lost, probed) in sorted(cl.lease_events().items()):
            log(f"broker {node}: registered {registered}x, lost its lease {lost}x, its watch "
                f"left a silent member {probed}x")
            # Every member was held once, so the watch's was too.
            if not probed:
                failures.append(f"broker {node}'s watch never left a held member")
            if registered != 1 or lost:
                failures.append(f"broker {node} lost its etcd lease {lost}x and registered "
                                f"{registered}x: the lease keeper did not renew through "
                                f"another member")
    except Exception as e:  # the verdict: any exception fails the run
        import traceback
        traceback.print_exc()
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        if work is not None:
            work.stopping.set()
        if failures and cl is not None:
            for b in cl.brokers:
                print(b.logs(60))
            # Every broker's whole log kept for the reader.
            keep = tempfile.mkdtemp(prefix="etcd3-logs-", dir="/tmp")
            for b in cl.brokers:
                for name in os.listdir(b.tmp):
                    if name.startswith(("out.", "err.")):
                        shutil.copy(os.path.join(b.tmp, name),
                                    os.path.join(keep, f"broker{b.node}.{name}"))
            print(f"the brokers' logs are kept in {keep}")
        if cl is not None:
            cl.close()
        shutil.rmtree(root, ignore_errors=True)
    if failures:
        print("FAIL: cluster_etcd3_test:")
        for f in failures:
            print(f"  {f}")
        return 1
    print("PASS: cluster_etcd3_test (three etcd members: kills, a cut and silent members)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
