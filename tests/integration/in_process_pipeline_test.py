#!/usr/bin/python3
"""The native path (docs/design/0023-native-path.md): pipelines of `sluice serve --pipelines`
reading the broker's log in-process, checked with real clients.

1. An in-process pipeline (source.kafka.in_process: auto) over a 4-partition topic with
   messages from confluent-kafka, some gzip- and zstd-compressed, and an aborted
   transaction among them: every committed message comes out of its kafka sink exactly
   once, none of the aborted ones; the log says `source in-process`, /metrics has
   sluice_pipeline_source_info{source="in_process"} 1; the group's committed offsets are
   the partitions' ends.
2. The same group shared: `sluice pipeline run` (librdkafka) joins the in-process member's
   group; DescribeGroups shows both members with the partitions split between them; more
   messages come out exactly once across the two.
3. Restart: after serve stops and starts again, the pipeline resumes at the committed
   offsets (no message twice).
4. Wrong input: `in_process: true` for a pipeline whose brokers are another server's stops
   that pipeline with the reason; `sluice pipeline run` with `in_process: true` is refused.
5. cooperative-sticky (KIP-429): an in-process member of another group reads everything
   alone; a remote member (librdkafka, cooperative-sticky too) joins and the in-process
   member gives up two partitions and keeps two (its log says so); new messages come out
   once across the two; the remote member leaves and the in-process one takes its two
   partitions back without giving up its own.

usage: /usr/bin/python3 in_process_pipeline_test.py path/to/sluice
"""

import json
import os
import re
import socket
import struct
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sluice_broker import FAST_GROUPS, Broker, TestFailure, check, wait_until  # noqa: E402

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PIPELINE = """
pipeline:
  name: {name}
  batch_size: 200
  flush_interval_seconds: 1
  source:
    type: kafka
    kafka:
      brokers: [{addr}]
      group_id: {group}
      auto_offset_reset: earliest
      topics: [events]
      in_process: {mode}{props}
  handler:
    type: handlers.InferredMemBatch
    sql: SELECT id, kafka_partition AS p FROM batch
  sink:
    type: kafka
    kafka:
      brokers: [{addr}]
      topic: {out}
"""


def produce(addr, ids, compression="none", transactional=None, abort=False):
    conf = {"bootstrap.servers": addr, "compression.type": compression, "linger.ms": 5}
    if transactional:
        conf["transactional.id"] = transactional
    p = Producer(conf)
    if transactional:
        p.init_transactions(30)
        p.begin_transaction()
    for i in ids:
        p.produce("events", json.dumps({"id": i}).encode(), key=str(i).encode(),
                  partition=i % 4)
    # Written before the transaction ends, so an aborted one's records are in the log.
    check(p.flush(30) == 0, "produce")
    if transactional:
        (p.abort_transaction if abort else p.commit_transaction)(30)


class Reader:
    """Reads the ids a pipeline's sink wrote, from the start of its topic."""

    def __init__(self, addr, topic):
        self.c = Consumer({"bootstrap.servers": addr, "group.id": f"check-{topic}-{time.time()}",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False,
                           "isolation.level": "read_committed"})
        self.c.subscribe([topic])
        self.ids = []

    def until(self, n, what, timeout=90, counted=lambda i: True):
        def got():
            for m in self.c.consume(500, 0.2):
                if not m.error():
                    self.ids.append(json.loads(m.value())["id"])
            return len([i for i in self.ids if counted(i)]) >= n
        wait_until(got, timeout, what, interval=0)
        # Anything more would be a duplicate: a moment to let it show.
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            for m in self.c.consume(500, 0.2):
                if not m.error():
                    self.ids.append(json.loads(m.value())["id"])
        return self.ids


def assigned_count(assignment):
    """Partitions in a ConsumerProtocolAssignment (DescribeGroups' member_assignment)."""
    if len(assignment) < 6:
        return 0
    pos, n = 2, struct.unpack_from(">i", assignment, 2)[0]
    pos += 4
    count = 0
    for _ in range(n):
        length = struct.unpack_from(">h", assignment, pos)[0]
        pos += 2 + length
        parts = struct.unpack_from(">i", assignment, pos)[0]
        pos += 4 + 4 * parts
        count += parts
    return count


def metrics(broker):
    with open(broker.out_path) as f:
        text = f.read()
    url = re.search(r"metrics on (http://[0-9.:]+)/metrics", text).group(1)
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        return r.read().decode()


def committed(addr, group, partitions):
    c = Consumer({"bootstrap.servers": addr, "group.id": group})
    got = c.committed([TopicPartition("events", p) for p in range(partitions)], timeout=20)
    c.close()
    return {tp.partition: tp.offset for tp in got}


def main():
    sluice = sys.argv[1]
    addr = f"127.0.0.1:{free_port()}"
    broker = Broker(sluice, FAST_GROUPS, kafka_addr=addr)
    pipelines = os.path.join(broker.tmp, "pipelines")
    os.makedirs(pipelines)
    with open(os.path.join(pipelines, "native.yml"), "w") as f:
        f.write(PIPELINE.format(name="native", addr=addr, group="shared", mode="auto",
                                out="native_out", props=""))
    try:
        broker.start()
        admin = AdminClient({"bootstrap.servers": addr})
        for f in admin.create_topics([NewTopic("events", 4, 1), NewTopic("native_out", 1, 1),
                                      NewTopic("remote_out", 1, 1), NewTopic("coop_out", 1, 1),
                                      NewTopic("coop_remote_out", 1, 1)]).values():
            f.result(30)
        # 1: committed messages in three codecs, an aborted transaction between them.
        produce(addr, range(0, 400))
        produce(addr, range(400, 600), compression="gzip")
        produce(addr, range(10_000, 10_100), transactional="t-aborted", abort=True)
        produce(addr, range(600, 800), compression="zstd", transactional="t-committed")
        check(broker.stop() == 0, "sluice serve exits 0 after SIGTERM")
        broker.start(extra_args=["--pipelines", pipelines])
        out = Reader(addr, "native_out")
        ids = out.until(800, "800 ids through the in-process pipeline")
        check(sorted(ids) == list(range(800)),
              f"each committed id once, no aborted one: {len(ids)} ids, "
              f"{len(set(ids))} distinct, max {max(ids)}")
        logs = broker.logs(200)
        check("pipeline native: source in-process" in logs, f"the log names the path: {logs}")
        m = metrics(broker)
        check(re.search(r'sluice_pipeline_source_info\{pipeline="native",source="in_process"\} 1',
                        m), "sluice_pipeline_source_info says in_process")

        # 800 committed records plus the 100 aborted ones and the markers: every offset
        # of each partition is past its last record.
        seen = {}

        def at_ends():
            seen.update(committed(addr, "shared", 4))
            return sum(seen.values()) >= 800 + 100
        try:
            wait_until(at_ends, 30, "the group's commits at the partitions' ends")
        except TestFailure:
            raise TestFailure(f"the group's commits at the partitions' ends: {seen}")

        # 2: a remote member (librdkafka) joins the same group.
        remote_file = os.path.join(broker.tmp, "remote.yml")
        with open(remote_file, "w") as f:
            f.write(PIPELINE.format(name="remote", addr=addr, group="shared", mode="auto",
                                    out="remote_out", props=""))
        remote = subprocess.Popen([sluice, "pipeline", "run", remote_file],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            def two_members():
                groups = admin.list_groups("shared", timeout=10)
                members = groups[0].members if groups else []
                return members if len(members) == 2 and \
                    all(assigned_count(mm.assignment) == 2 for mm in members) else None
            members = wait_until(two_members, 60,
                                 "two members of group shared, two partitions each", interval=0.5)
            clients = sorted(mm.client_id for mm in members)
            check("sluice-in-process" in clients, f"the in-process member: {clients}")
            produce(addr, range(800, 1200))
            native_more = Reader(addr, "native_out")
            remote_out = Reader(addr, "remote_out")

            def shared_done():
                for r in (native_more, remote_out):
                    for msg in r.c.consume(500, 0.2):
                        if not msg.error():
                            r.ids.append(json.loads(msg.value())["id"])
                return len([i for i in native_more.ids if i >= 800]) + len(remote_out.ids) >= 400
            wait_until(shared_done, 90, "400 more ids across the two members", interval=0)
            time.sleep(1.5)
            shared_done()
            later = sorted([i for i in native_more.ids if i >= 800] + remote_out.ids)
            check(later == list(range(800, 1200)),
                  f"each new id once across the members: {len(later)} ids, {len(set(later))} distinct")
            check(len(remote_out.ids) > 0 and len(later) - len(remote_out.ids) > 0,
                  f"both members took partitions: remote {len(remote_out.ids)}")
        finally:
            remote.terminate()
            remote.wait(30)

        # 3: a restart resumes at the committed offsets.
        check(broker.stop() == 0, "sluice serve exits 0 after SIGTERM")
        broker.start()
        produce(addr, range(1200, 1300))
        check(broker.stop() == 0, "sluice serve exits 0 after SIGTERM")
        broker.start(extra_args=["--pipelines", pipelines])
        again = Reader(addr, "native_out")
        ids = again.until(100, "the ids after a restart", timeout=90,
                          counted=lambda i: i >= 1200)
        new = [i for i in ids if i >= 1200]
        check(sorted(new) == list(range(1200, 1300)), f"each id after the restart once: {len(new)}")
        check(broker.stop() == 0, "sluice serve exits 0 after SIGTERM")

        # 4: in_process: true where it cannot be.
        with open(os.path.join(pipelines, "native.yml"), "w") as f:
            f.write(PIPELINE.format(name="elsewhere", addr="127.0.0.1:1", group="g", mode="true",
                                    out="native_out", props=""))
        broker.start(extra_args=["--pipelines", pipelines])
        wait_until(lambda: "in_process is true, but its brokers are not this server's"
                   in broker.logs(200), 30, "the refusal of in_process: true")
        rc = broker.stop()
        check(rc is not None and rc != 0, f"sluice serve exits with an error: {rc}")
        p = subprocess.run([sluice, "pipeline", "run", os.path.join(pipelines, "native.yml")],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 2 and "only a pipeline of sluice serve --pipelines" in p.stderr,
              f"pipeline run refuses in_process: true: {p.returncode} {p.stderr}")

        # 5: cooperative-sticky.
        os.remove(os.path.join(pipelines, "native.yml"))
        coop = "\n      properties:\n        partition.assignment.strategy: cooperative-sticky"
        with open(os.path.join(pipelines, "coop.yml"), "w") as f:
            f.write(PIPELINE.format(name="coop", addr=addr, group="coop", mode="auto",
                                    out="coop_out", props=coop))
        broker.start(extra_args=["--pipelines", pipelines])
        coop_out = Reader(addr, "coop_out")
        ids = coop_out.until(1300, "the cooperative member alone reading every committed id")
        check(sorted(ids) == list(range(1300)), f"each id once: {len(ids)}, {len(set(ids))} distinct")
        remote_file = os.path.join(broker.tmp, "coop_remote.yml")
        with open(remote_file, "w") as f:
            f.write(PIPELINE.format(name="coop_remote", addr=addr, group="coop", mode="auto",
                                    out="coop_remote_out", props=coop))
        remote = subprocess.Popen([sluice, "pipeline", "run", remote_file],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            def two_coop_members():
                groups = admin.list_groups("coop", timeout=10)
                members = groups[0].members if groups else []
                return members if len(members) == 2 and \
                    all(assigned_count(mm.assignment) == 2 for mm in members) else None
            wait_until(two_coop_members, 60, "two members of group coop, two partitions each",
                       interval=0.5)
            logs = broker.logs(400)
            check("cooperative: keeps 2, gives up 2, gets 0" in logs,
                  f"the in-process member kept two partitions and gave up two: {logs}")
            produce(addr, range(2000, 2400))
            coop_remote = Reader(addr, "coop_remote_out")

            def coop_done():
                for r in (coop_out, coop_remote):
                    for msg in r.c.consume(500, 0.2):
                        if not msg.error():
                            r.ids.append(json.loads(msg.value())["id"])
                return len([i for i in coop_out.ids if i >= 2000]) + len(coop_remote.ids) >= 400
            wait_until(coop_done, 90, "400 more ids across the cooperative members", interval=0)
            time.sleep(1.5)
            coop_done()
            later = sorted([i for i in coop_out.ids if i >= 2000] + coop_remote.ids)
            check(later == list(range(2000, 2400)),
                  f"each id once across the cooperative members: {len(later)} ids, "
                  f"{len(set(later))} distinct")
            check(len(coop_remote.ids) > 0 and len(later) - len(coop_remote.ids) > 0,
                  f"both cooperative members took partitions: remote {len(coop_remote.ids)}")
        finally:
            remote.terminate()
            remote.wait(30)
        wait_until(lambda: "cooperative: keeps 2, gives up 0, gets 2" in broker.logs(400), 60,
                   "the in-process member taking the remote member's partitions back")
        produce(addr, range(2400, 2500))
        ids = coop_out.until(100, "the ids after the remote member left", counted=lambda i: i >= 2400)
        new = [i for i in ids if i >= 2400]
        check(sorted(new) == list(range(2400, 2500)), f"each id once after it left: {len(new)}")
        check(broker.stop() == 0, "sluice serve exits 0 after SIGTERM")
    except Exception:
        print(broker.logs(120), file=sys.stderr)
        raise
    finally:
        broker.cleanup()
    print("in_process_pipeline_test: ok")


if __name__ == "__main__":
    try:
        main()
    except TestFailure as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)
