#!/usr/bin/python3
"""Exactly-once Kafka -> SQL -> Kafka pipelines against `sluice serve`, with real clients
(confluent-kafka, librdkafka's transactions; docs/design/0006 #12):

1. SIGKILL at each step and at random points: `sluice pipeline run` over a topic of JSON
   records (some not JSON: dead letters) into an output topic with `exactly_once: true`
   and a dead-letter topic on the same broker, killed at the crash points of a batch's
   commit (SLUICE_TEST_CRASH_AT: after the batch, after the offsets were sent to the
   transaction, after the commit) and at seeded random moments, and restarted each time;
   the last run goes to the end. A read_committed consumer then sees every result exactly
   once, every dead letter exactly once, and nothing else; the group's committed offsets
   are the input's end.
2. A transaction left open upstream: a transactional producer writes records into the
   input topic and never commits; records produced after it wait behind it (the last
   stable offset), and the gauge sluice_pipeline_unstable_offsets shows it. Once the
   broker aborts the transaction at its timeout, the pipeline goes on: the later records
   arrive exactly once and none of the aborted ones.

Registered DISABLED in tests/integration/CMakeLists.txt until the broker serves
transactions (issue 20).

usage: /usr/bin/python3 exactly_once_pipeline_test.py path/to/sluice [seed [kills]]
"""

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sluice_broker import check, run_test, wait_until  # noqa: E402

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def create_topics(bootstrap, topics):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, num_partitions=n, replication_factor=1)
                                   for t, n in topics.items()])
    for f in futures.values():
        f.result(timeout=30)


def produce(bootstrap, topic, values, partitions):
    failed = []
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % partitions,
                  on_delivery=lambda err, msg: err and failed.append(err))
    check(p.flush(30) == 0, "records not delivered")
    check(not failed, f"records not delivered: {failed[:3]}")


def read_committed(bootstrap, topic, expect_at_least, timeout=60):
    """Everything a read_committed consumer sees of `topic` from the start, once at
    least `expect_at_least` records came and nothing more came for 2 s."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}-{time.time()}",
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    out = []
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        msgs = c.consume(1000, 0.5)
        for m in msgs:
            check(m.error() is None, f"consume: {m.error()}")
            out.append(m.value().decode())
        if msgs:
            quiet_since = time.monotonic()
        elif len(out) >= expect_at_least and time.monotonic() - quiet_since > 2:
            break
    c.close()
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PipelineProcess:
    def __init__(self, sluice, path, http_port=None, crash_at=None):
        args = [sluice, "pipeline", "run", path, "--no-progress"]
        if http_port:
            args += ["--http-addr", f"127.0.0.1:{http_port}"]
        env = dict(os.environ)
        if crash_at:
            env["SLUICE_TEST_CRASH_AT"] = crash_at  # base/crash_point.h: SIGKILL there
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=120)

    def output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]


PIPELINE = """pipeline:
  name: eos
  batch_size: 50
  flush_interval_seconds: 1
  source:
    type: kafka
    kafka:
      brokers: [{bootstrap}]
      group_id: {group}
      auto_offset_reset: earliest
      topics: [{input}]
      # A static member: a restarted run takes its place at once instead of waiting for
      # the killed one's session to time out.
      properties: {{group.instance.id: {group}-member, session.timeout.ms: 6000}}
  handler:
    type: handlers.InferredMemBatch
    sql: SELECT id, id * 2 AS doubled FROM batch
  sink:
    type: kafka
    kafka:
      brokers: [{bootstrap}]
      topic: {output}
      exactly_once: true
      transactional_id: {txn_id}
  on_error:
    policy: DLQ
    dlq:
      type: kafka
      kafka:
        brokers: [{bootstrap}]
        topic: {dlq}
"""


def write_pipeline(directory, **keys):
    path = os.path.join(directory, f"{keys['group']}.yml")
    with open(path, "w") as f:
        f.write(PIPELINE.format(**keys))
    return path


def sigkill_at_random_points(sluice, seed, kills):
    def body(broker):
        rng = random.Random(seed)
        bootstrap = broker.bootstrap
        create_topics(bootstrap, {"in": 4, "out": 3, "dlq": 1})
        n = 3000
        values = [f"not json {i}" if i % 97 == 96 else json.dumps({"id": i}) for i in range(n)]
        bad = {i for i in range(n) if i % 97 == 96}
        produce(bootstrap, "in", values, 4)
        with tempfile.TemporaryDirectory() as d:
            path = write_pipeline(d, bootstrap=bootstrap, group="eos-crash", input="in",
                                  output="out", dlq="dlq", txn_id="eos-crash")
            # First at each step of a batch's commit (the crash points of the runner and
            # the kafka sink), then at random moments.
            for point in ("batch-begun:3", "kafka-txn-offsets-sent:2", "kafka-txn-committed:4",
                          "sink-committed:5"):
                p = PipelineProcess(sluice, path, crash_at=point)
                try:
                    rc = p.proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    p.kill()
                    raise
                check(rc == -signal.SIGKILL, f"{point}: exited {rc}, not at the crash "
                      f"point:\n{p.output()}")
            for round_ in range(kills):
                p = PipelineProcess(sluice, path)
                time.sleep(rng.uniform(0.3, 2.5))
                check(p.proc.poll() is None, f"round {round_}: the pipeline exited early:\n"
                      + p.output())
                p.kill()
            last = PipelineProcess(sluice, path)
            try:
                results = read_committed(bootstrap, "out", n - len(bad), timeout=180)
            finally:
                rc = last.stop()
            check(rc == 0, f"the last run exited {rc}:\n{last.output()}")
        ids = [json.loads(r)["id"] for r in results]
        doubled = {json.loads(r)["id"]: json.loads(r)["doubled"] for r in results}
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        check(not dupes, f"visible twice to read_committed: {dupes[:20]}")
        missing = sorted(set(range(n)) - bad - set(ids))
        check(not missing, f"missing: {missing[:20]}")
        check(set(ids) == set(range(n)) - bad, "unexpected results")
        check(all(doubled[i] == 2 * i for i in doubled), "wrong results")
        letters = read_committed(bootstrap, "dlq", len(bad), timeout=60)
        sources = [(json.loads(r)["partition"], json.loads(r)["offset"]) for r in letters]
        check(len(sources) == len(set(sources)), f"a dead letter twice: {sorted(sources)[:20]}")
        check(len(sources) == len(bad), f"{len(sources)} dead letters, {len(bad)} expected")
        # The group's commit is the input's end: a restart reads nothing again.
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-crash"})
        from confluent_kafka import TopicPartition
        committed = c.committed([TopicPartition("in", p) for p in range(4)], timeout=20)
        c.close()
        check(sum(tp.offset for tp in committed) == n, f"committed {committed}")
    return run_test(f"exactly-once pipeline killed at {kills} random points (seed {seed})",
                    sluice, body)


def open_transaction_times_out(sluice):
    def body(broker):
        bootstrap = broker.bootstrap
        create_topics(bootstrap, {"up": 1, "down": 1, "down-dlq": 1})
        produce(bootstrap, "up", [json.dumps({"id": i}) for i in range(10)], 1)
        # A transaction left open: its records hold read_committed readers back.
        # (librdkafka refuses a message timeout above the transaction timeout.)
        # 20 s: long enough to see the pipeline held back before the broker aborts it.
        hanging = Producer({"bootstrap.servers": bootstrap, "transactional.id": "hanging",
                            "transaction.timeout.ms": 20000, "message.timeout.ms": 20000})
        hanging.init_transactions(30)
        hanging.begin_transaction()
        for i in range(100, 110):
            hanging.produce("up", value=json.dumps({"id": i}).encode(), partition=0)
        check(hanging.flush(30) == 0, "hanging records not delivered")
        produce(bootstrap, "up", [json.dumps({"id": i}) for i in range(200, 210)], 1)
        port = free_port()
        with tempfile.TemporaryDirectory() as d:
            path = write_pipeline(d, bootstrap=bootstrap, group="eos-hang", input="up",
                                  output="down", dlq="down-dlq", txn_id="eos-hang")
            p = PipelineProcess(sluice, path, http_port=port)
            try:
                def unstable():
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                                    timeout=2) as r:
                            text = r.read().decode()
                    except OSError:
                        return None
                    m = re.search(r'sluice_pipeline_unstable_offsets\{[^}]*\} (\d+)', text)
                    return m and int(m.group(1)) > 0
                # Waiting behind the open transaction shows in the lag metrics.
                wait_until(unstable, 30, "sluice_pipeline_unstable_offsets > 0", interval=0.5)
                early = read_committed(bootstrap, "down", 10, timeout=10)
                check(sorted(json.loads(r)["id"] for r in early) == list(range(10)),
                      f"before the timeout: {early}")
                # The broker aborts the transaction at its timeout; the pipeline goes on.
                results = read_committed(bootstrap, "down", 20, timeout=120)
            finally:
                rc = p.stop()
            check(rc == 0, f"the pipeline exited {rc}:\n{p.output()}")
        ids = sorted(json.loads(r)["id"] for r in results)
        check(ids == list(range(10)) + list(range(200, 210)), f"after the timeout: {ids}")
    return run_test("an open upstream transaction times out and the pipeline goes on", sluice,
                    body)


def main():
    sluice = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else int(os.environ.get("SLUICE_SEED", "20"))
    kills = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    failed = sigkill_at_random_points(sluice, seed, kills)
    if kills <= 5:  # the long run (make test-slow) is the kills alone
        failed += open_transaction_times_out(sluice)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
