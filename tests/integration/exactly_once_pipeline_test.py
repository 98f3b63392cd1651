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
3. The pipeline's own transaction timed out on the broker mid-batch: the pipeline process
   is stopped (SIGSTOP) longer than its transaction.timeout.ms (3 s) and shorter than its
   session, then continued; the broker aborted the transaction and fenced the producer's
   epoch, the sink starts a new producer, the source is rewound to the group's commit.
4. A member that lost its group membership mid-batch: stopped longer than its session
   (6 s), then continued; its commit is refused (or not sent without a member id), it
   aborts, rewinds and rejoins.
   In 3 and 4 the sink's own librdkafka properties keep each batch's transaction open
   about half a second, so that a pause finds one open (a pause that does not is
   repeated); the pipeline goes on by itself (sluice_pipeline_txn_aborts_total{cause} and
   the logs show the abort and the rewind) and a read_committed consumer sees every
   result and dead letter exactly once.

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
from sluice_broker import FAST_GROUPS, check, run_test, wait_until  # noqa: E402

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


def produce_input(bootstrap, n, bad_every, partitions):
    """{"id": i} for i < n into topic "in", every `bad_every`th one not JSON (a dead
    letter); returns the ids of those."""
    bad = {i for i in range(n) if i % bad_every == bad_every - 1}
    produce(bootstrap, "in", [f"not json {i}" if i in bad else json.dumps({"id": i})
                              for i in range(n)], partitions)
    return bad


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
  batch_size: {batch_size}
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
      properties: {{group.instance.id: {group}-member, session.timeout.ms: {session_ms}}}
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
      properties: {{{sink_props}}}
  on_error:
    policy: DLQ
    dlq:
      type: kafka
      kafka:
        brokers: [{bootstrap}]
        topic: {dlq}
"""


def write_pipeline(directory, **keys):
    keys = {"batch_size": 50, "session_ms": 6000, "sink_props": "", **keys}
    path = os.path.join(directory, f"{keys['group']}.yml")
    with open(path, "w") as f:
        f.write(PIPELINE.format(**keys))
    return path


def check_exactly_once(bootstrap, n, bad, partitions, group, timeout=180):
    """A read_committed consumer sees the result of every good input record once and
    nothing else, every dead letter once, and the group's commit is the input's end."""
    results = read_committed(bootstrap, "out", n - len(bad), timeout=timeout)
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
    from confluent_kafka import TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    committed = c.committed([TopicPartition("in", p) for p in range(partitions)], timeout=20)
    c.close()
    check(sum(tp.offset for tp in committed) == n, f"committed {committed}")


def metric(port, name, **labels):
    """The value of a pipeline metric whose labels include `labels`, or None."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return None
    for m in re.finditer(r"^" + name + r"\{([^}]*)\} (\S+)$", text, re.M):
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(m.group(2))
    return None


def sigkill_at_random_points(sluice, seed, kills):
    def body(broker):
        rng = random.Random(seed)
        bootstrap = broker.bootstrap
        create_topics(bootstrap, {"in": 4, "out": 3, "dlq": 1})
        n = 3000
        bad = produce_input(bootstrap, n, 97, 4)
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
                read_committed(bootstrap, "out", n - len(bad), timeout=180)
            finally:
                rc = last.stop()
            check(rc == 0, f"the last run exited {rc}:\n{last.output()}")
        check_exactly_once(bootstrap, n, bad, 4, "eos-crash")
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


# Slow transactions on purpose, with the sink's own librdkafka properties: one record in
# the producer's queue at a time, each waiting linger.ms, so a batch of 10 rows keeps its
# transaction open about half a second and a pause of the process most likely finds one
# open.
SLOW_SINK = "linger.ms: 50, queue.buffering.max.messages: 1"


def paused_until_aborted(sluice, title, cause, pause, session_ms, sink_props, broker_config):
    """The pipeline process is stopped (SIGSTOP) for `pause` seconds, then continued
    (SIGCONT), until sluice_pipeline_txn_aborts_total{cause} shows that the pause lost a
    transaction (a pause between two transactions loses none: paused again, at most 5
    times); the pipeline goes on by itself and a read_committed consumer sees every result
    exactly once."""
    def body(broker):
        bootstrap = broker.bootstrap
        create_topics(bootstrap, {"in": 2, "out": 2, "dlq": 1})
        n = 600
        bad = produce_input(bootstrap, n, 53, 2)
        port = free_port()
        group = f"eos-{cause}"
        with tempfile.TemporaryDirectory() as d:
            path = write_pipeline(d, bootstrap=bootstrap, group=group, input="in", output="out",
                                  dlq="dlq", txn_id=group, batch_size=10, session_ms=session_ms,
                                  sink_props=f"{SLOW_SINK}, {sink_props}")
            p = PipelineProcess(sluice, path, http_port=port)
            try:
                wait_until(lambda: (metric(port, "sluice_pipeline_commits_total") or 0) >= 2,
                           60, "the pipeline's first commits", interval=0.2)
                aborted = 0
                for attempt in range(5):
                    check(p.proc.poll() is None, "the pipeline exited:\n" + p.output())
                    p.proc.send_signal(signal.SIGSTOP)
                    time.sleep(pause)
                    p.proc.send_signal(signal.SIGCONT)
                    deadline = time.monotonic() + 10
                    while time.monotonic() < deadline and not aborted:
                        aborted = metric(port, "sluice_pipeline_txn_aborts_total", cause=cause)
                        time.sleep(0.2)
                    if aborted:
                        break
                check(aborted, f"no transaction aborted ({cause}) after 5 pauses:\n"
                      + p.output())
                check((metric(port, "sluice_pipeline_source_rewinds_total") or 0) >= 1,
                      "the source was not rewound")
                check(p.proc.poll() is None, "the pipeline stopped:\n" + p.output())
                # It goes on by itself: every result arrives.
                read_committed(bootstrap, "out", n - len(bad), timeout=180)
                check(p.proc.poll() is None, "the pipeline stopped:\n" + p.output())
                out = p.output()
                check("the transaction was aborted (" + cause + ")" in out,
                      f"no log line of the abort:\n{out}")
                check("source rewound to the group's committed offsets" in out,
                      f"no log line of the rewind:\n{out}")
            finally:
                if p.proc.poll() is None:
                    p.proc.send_signal(signal.SIGCONT)
                rc = p.stop()
            check(rc == 0, f"the pipeline exited {rc}:\n{p.output()}")
        check_exactly_once(bootstrap, n, bad, 2, group)
    return run_test(title, sluice, body, config=broker_config)


def transaction_times_out(sluice):
    # transaction.timeout.ms 3 s, the member's session 30 s, paused 7 s: the broker aborts
    # the open transaction (checked every 100 ms) and fences the producer's epoch while the
    # member keeps its partitions.
    return paused_until_aborted(
        sluice, "a transaction the broker timed out mid-batch is read again", "timeout",
        pause=7, session_ms=30000, sink_props="transaction.timeout.ms: 3000",
        broker_config=FAST_GROUPS + "transactions:\n  abort_check_interval: 100\n")


def member_loses_its_membership(sluice):
    # The session (6 s) expires during a 10 s pause, the transaction (60 s) does not: the
    # group forgets the member, whose commit the group coordinator then refuses (or which
    # the sink does not send without a member id); it rejoins.
    return paused_until_aborted(
        sluice, "a member that lost its membership mid-batch rejoins and goes on", "rebalance",
        pause=10, session_ms=6000, sink_props="transaction.timeout.ms: 60000",
        broker_config=FAST_GROUPS)


def main():
    sluice = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else int(os.environ.get("SLUICE_SEED", "20"))
    kills = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    failed = sigkill_at_random_points(sluice, seed, kills)
    if kills <= 5:  # the long run (make test-slow) is the kills alone
        failed += open_transaction_times_out(sluice)
        failed += transaction_times_out(sluice)
        failed += member_loses_its_membership(sluice)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
