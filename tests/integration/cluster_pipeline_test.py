#!/usr/bin/python3
"""Pipelines and queries against a replicated cluster (issue 21: "pipelines, the query
server's topic() and sluice sql --bootstrap work against a cluster through any broker";
docs/cluster.md). Three `sluice serve --etcd` brokers and a real etcd:

- `sluice pipeline run` beside broker 1 (the chosen broker whose machine holds the
  warehouse: tables are local until they live on shared storage) reads a topic of three
  partitions with replication factor 3 through broker 1 and appends to an Iceberg table,
  exactly once (docs/sinks.md); broker 1 also runs a pipeline of its own (`sluice serve
  --pipelines`, through {{ SLUICE_KAFKA_ADDR }}, started before the topic exists) into
  another table of the same warehouse: its source is the in-process one (docs/design/
  0023-native-path.md, decision 8), reading broker 1's partitions from its log and
  fetching the others from their leaders, its group at whichever broker coordinates it.
  A transaction over every partition is aborted among the records: neither table has it. An idempotent acks=all producer writes JSON
  records before and after the leader of one of the source partitions is SIGKILLed
  mid-run (a broker that is neither the pipeline's bootstrap nor the controller, where
  the group coordinator lives until phase D); the pipelines carry on by themselves, and
  each table ends with every acknowledged record exactly once (checked with `sluice sql
  --warehouse`).
- The query server's topic() on each surviving broker (its own listener as bootstrap)
  reads every record of that topic once, and of a replication-factor-1 topic led by
  another broker; `sluice sql --bootstrap` through a broker that leads none of a topic's
  partitions gives the same rows; the lake table and topic() join on broker 1.

usage: /usr/bin/python3 cluster_pipeline_test.py path/to/sluice
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_controller_test import (ClusterBroker, start_together,  # noqa: E402
                                     wait_controller, wait_metadata)
from cluster_clients_test import create_replicated_topic  # noqa: E402
from cluster_replication_test import isr_of, leaders_of  # noqa: E402
from etcd_util import free_ports, main_with_etcd  # noqa: E402
from sluice_broker import check, wait_until  # noqa: E402

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

TOPIC = "events"
SOLO = "solo"
PSQL = next((p for p in ("/usr/bin/psql", "/usr/lib/postgresql/15/bin/psql")
             if os.access(p, os.X_OK)), None)


class QueryBroker(ClusterBroker):
    """A cluster broker with the query server on a free port and, for broker 1, the
    warehouse the pipeline writes."""

    def __init__(self, sluice, node, etcd_url, warehouse=None, pipelines=None):
        super().__init__(sluice, node, etcd_url)
        self.pg_port = free_ports(1)[0]
        self.warehouse = warehouse
        self.pipelines = pipelines

    def args(self, etcd=True):
        a = super().args(etcd)
        a[a.index("--pg-addr") + 1] = f"127.0.0.1:{self.pg_port}"
        if self.warehouse:  # served as an Iceberg REST catalog on the HTTP port
            a[a.index("--http-addr") + 1] = "127.0.0.1:0"
            a += ["--warehouse", self.warehouse]
        if self.pipelines:
            a += ["--pipelines", self.pipelines]
        return a


def psql(broker, sql):
    r = subprocess.run([PSQL, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                        "-p", str(broker.pg_port), "-U", "tester", "-d", "sluice", "-c", sql],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PGCONNECT_TIMEOUT="10"))
    check(r.returncode == 0, f"psql on broker {broker.node}: {sql}: {r.stderr.strip()}")
    return r.stdout.strip()


def sluice_sql(sluice, args, sql):
    r = subprocess.run([sluice, "sql", "--json"] + args + [sql], capture_output=True, text=True,
                       timeout=120)
    check(r.returncode == 0, f"sluice sql {args}: {sql}: {r.stderr.strip()}")
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


PIPELINE = """\
commands:
  - name: events table
    sql: CREATE TABLE events (id BIGINT, city VARCHAR);
pipeline:
  name: {group}
  batch_size: 200
  flush_interval_seconds: 1
  source:
    type: kafka
    kafka:
      brokers: ["{bootstrap}"]
      group_id: {group}
      auto_offset_reset: earliest
      topics: [{topic}]
  handler:
    type: handlers.StructuredBatch
    table: events
    sql: SELECT * FROM events
  sink:
    type: iceberg
    iceberg:
      catalog_name: sluice
      table_name: db.{table}
      warehouse: "{warehouse}"
      commit_interval_seconds: 1
"""


class Acks:
    def __init__(self):
        self.ids, self.failures, self.next = [], [], 0

    def produce(self, producer, count):
        def done(err, msg):
            if err is not None:
                self.failures.append(err)
            else:
                self.ids.append(json.loads(msg.value())["id"])
        for _ in range(count):
            i = self.next
            self.next += 1
            value = json.dumps({"id": i, "city": ("rome", "oslo", "lima")[i % 3]})
            while True:
                try:
                    producer.produce(TOPIC, key=str(i).encode(), value=value.encode(),
                                     on_delivery=done)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)


def lake_ids(sluice, warehouse, table="events"):
    rows = sluice_sql(sluice, ["--warehouse", warehouse],
                      f"SELECT id FROM lake.db.{table} ORDER BY id")
    return [r["id"] for r in rows]


def lake_count(sluice, warehouse, table="events"):
    try:
        rows = sluice_sql(sluice, ["--warehouse", warehouse],
                          f"SELECT count(*) AS n FROM lake.db.{table}")
    except Exception:
        return 0  # no table yet
    return rows[0]["n"]


def run(sluice, etcd, tmp):
    warehouse = os.path.join(tmp, "wh")
    # Broker 1 also runs a pipeline of its own (serve --pipelines): the same topic into
    # another table, through its own listener ({{ SLUICE_KAFKA_ADDR }}).
    served = os.path.join(tmp, "pipelines")
    os.makedirs(served)
    with open(os.path.join(served, "served.yml"), "w") as f:
        f.write(PIPELINE.format(bootstrap="{{ SLUICE_KAFKA_ADDR }}", topic=TOPIC,
                                warehouse=warehouse, group="served", table="served"))
    brokers = [QueryBroker(sluice, n, etcd.endpoints_arg(), warehouse if n == 1 else None,
                           served if n == 1 else None)
               for n in (1, 2, 3)]
    pipeline = None
    try:
        start_together(brokers)
        by_node = {b.node: b for b in brokers}
        admin, md = create_replicated_topic(brokers, TOPIC, 3)
        controller = wait_controller(brokers)
        partition, leader = next((p, n) for p, n in sorted(leaders_of(md, TOPIC).items())
                                 if n not in (controller, 1))
        victim = by_node[leader]

        pipe_file = os.path.join(tmp, "pipeline.yml")
        with open(pipe_file, "w") as f:
            f.write(PIPELINE.format(bootstrap=brokers[0].bootstrap, topic=TOPIC,
                                    warehouse=warehouse, group="to-lake", table="events"))
        pipe_log = open(os.path.join(tmp, "pipeline.log"), "w")
        pipeline = subprocess.Popen([sluice, "pipeline", "run", pipe_file, "--no-progress"],
                                    stdout=pipe_log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)

        acks = Acks()
        producer = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in brokers),
                             "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                             "message.timeout.ms": 120000})
        acks.produce(producer, 600)
        check(producer.flush(60) == 0, "the first records were not all acknowledged")
        # An aborted transaction over every partition: read_committed keeps it out of both
        # tables, whichever broker leads the partition the in-process source reads.
        txp = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in brokers),
                        "transactional.id": "aborted-writer", "acks": "all"})
        txp.init_transactions(60)
        txp.begin_transaction()
        for i in range(30):
            txp.produce(TOPIC, key=str(10**6 + i).encode(),
                        value=json.dumps({"id": 10**6 + i, "city": "nowhere"}).encode())
        check(txp.flush(60) == 0, "the transaction's records were not all sent")
        txp.abort_transaction(60)
        wait_until(lambda: pipeline.poll() is None and lake_count(sluice, warehouse) > 0, 60,
                   "the pipeline's first commit", interval=0.5)
        acks.produce(producer, 200)
        producer.poll(0.1)
        victim.kill()
        print(f"killed broker {victim.node}, the leader of {TOPIC}-{partition} "
              f"(controller: broker {controller}), with the pipeline running")
        acks.produce(producer, 600)
        check(producer.flush(120) == 0, "records after the kill were not all acknowledged")
        check(not acks.failures, f"delivery failures {acks.failures[:3]}")
        want = sorted(acks.ids)
        check(want == list(range(1400)), f"{len(want)} of 1400 acknowledged")
        survivors = [b for b in brokers if b is not victim]
        md = wait_metadata(survivors[0].bootstrap,
                           lambda m: leaders_of(m, TOPIC)[partition] not in (-1, victim.node),
                           f"a new leader of {TOPIC}-{partition}")
        wait_until(lambda: (pipeline.poll() is None or _dead(pipeline, tmp))
                   and lake_count(sluice, warehouse) >= len(want), 120,
                   "the pipeline writing every record", interval=0.5)
        got = lake_ids(sluice, warehouse)
        check(got == want, f"the table has {len(got)} rows, {len(set(got))} distinct; "
              f"want each of the {len(want)} acknowledged ids once")
        print(f"pipeline: {len(got)} rows, every acknowledged record exactly once; "
              f"leaders {leaders_of(md, TOPIC)}")
        wait_until(lambda: lake_count(sluice, warehouse, "served") >= len(want), 120,
                   "broker 1's own pipeline writing every record", interval=0.5)
        got = lake_ids(sluice, warehouse, "served")
        check(got == want, f"broker 1's pipeline: {len(got)} rows, {len(set(got))} distinct; "
              f"want each of the {len(want)} acknowledged ids once")
        print("broker 1's own pipeline (serve --pipelines): every record exactly once")
        check("pipeline served: source in-process" in brokers[0].logs(1000000),
              "broker 1's own pipeline did not read in-process")

        # topic() of each surviving broker's query server (librdkafka to the leaders).
        for b in survivors:
            out = psql(b, f"SELECT count(*), count(DISTINCT (value::JSON->>'id')::BIGINT), "
                          f"min((value::JSON->>'id')::BIGINT), max((value::JSON->>'id')::BIGINT) "
                          f"FROM topic('{TOPIC}')")
            check(out == f"{len(want)}|{len(want)}|0|{len(want) - 1}",
                  f"topic('{TOPIC}') on broker {b.node}: {out}")
        # The lake table and the topic on the chosen broker.
        out = psql(brokers[0], f"SELECT count(*) FROM lake.db.events e JOIN topic('{TOPIC}') t "
                               f"ON e.id = (t.value::JSON->>'id')::BIGINT")
        check(out == str(len(want)), f"lake joined with topic() on broker 1: {out}")

        # The victim back: it leads none of the topic's partitions (nothing moves
        # leaderships back yet), and its ISRs are whole again.
        victim.start()
        md = wait_metadata(survivors[0].bootstrap,
                           lambda m: all(len(i) == 3 for i in isr_of(m, TOPIC).values()),
                           f"broker {victim.node} back in every ISR", timeout=90)
        check(victim.node not in leaders_of(md, TOPIC).values(),
              f"broker {victim.node} leads again: {leaders_of(md, TOPIC)}")
        # Replication factor 1: read through the brokers that do not hold it.
        fs = admin.create_topics([NewTopic(SOLO, 1, 1)], operation_timeout=10)
        fs[SOLO].result(30)
        md = wait_metadata(brokers[1].bootstrap,
                           lambda m: SOLO in m.topics and m.topics[SOLO].partitions[0].leader >= 0,
                           f"{SOLO}'s leader")
        solo_leader = leaders_of(md, SOLO)[0]
        p = Producer({"bootstrap.servers": brokers[0].bootstrap, "acks": "all"})
        for i in range(50):
            p.produce(SOLO, value=json.dumps({"n": i}).encode())
        check(p.flush(60) == 0, f"{SOLO}'s records not acknowledged")
        for b in brokers:
            if b.node == solo_leader:
                continue
            out = psql(b, f"SELECT count(*), sum((value::JSON->>'n')::BIGINT) FROM topic('{SOLO}')")
            check(out == "50|1225", f"topic('{SOLO}') on broker {b.node} (leader "
                  f"{solo_leader}): {out}")
            rows = sluice_sql(sluice, ["--bootstrap", b.bootstrap],
                              f"SELECT count(*) AS n, sum((value::JSON->>'n')::BIGINT) AS s "
                              f"FROM topic('{SOLO}')")
            check(rows == [{"n": 50, "s": 1225}], f"sluice sql --bootstrap {b.bootstrap}: {rows}")
        rows = sluice_sql(sluice, ["--bootstrap", victim.bootstrap],
                          f"SELECT count(*) AS n, count(DISTINCT key) AS k FROM topic('{TOPIC}')")
        check(rows == [{"n": len(want), "k": len(want)}],
              f"sluice sql --bootstrap {victim.bootstrap} (broker {victim.node}): {rows}")
        print("topic() and sluice sql --bootstrap: the right rows through every broker")

        pipeline.terminate()
        rc = pipeline.wait(60)
        check(rc == 0, f"the pipeline exited {rc} on SIGTERM")
        pipeline = None
        check(lake_ids(sluice, warehouse) == want, "the table changed at the pipeline's stop")
    except BaseException:
        for b in brokers:
            print(b.logs(60))
        if os.path.exists(os.path.join(tmp, "pipeline.log")):
            with open(os.path.join(tmp, "pipeline.log"), errors="replace") as f:
                print("--- pipeline:\n" + "".join(f.readlines()[-60:]))
        raise
    finally:
        if pipeline is not None:
            pipeline.kill()
            pipeline.wait()
        for b in brokers:
            b.cleanup()


def _dead(proc, tmp):
    with open(os.path.join(tmp, "pipeline.log"), errors="replace") as f:
        tail = "".join(f.readlines()[-30:])
    raise AssertionError(f"the pipeline exited ({proc.returncode}):\n{tail}")


def main():
    return main_with_etcd("cluster_pipeline_test", run, "sluice-clpipe-",
                          None if PSQL else "psql is missing (scripts/setup.sh installs postgresql-client)")


if __name__ == "__main__":
    sys.exit(main())
