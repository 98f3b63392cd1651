#!/usr/bin/python3
"""A pipeline of `sluice serve --pipelines` runs as its pipeline.principal
(docs/design/0020-data-authorization.md), with authorization and SASL on:

1. without INSERT on its Iceberg sink's table, serve refuses to start it, naming the grant;
2. with the grant but no Kafka ACL, it starts, and the broker denies User:alice (not the
   service) the topic: the pipeline's Kafka clients log in as its principal;
3. with `sluice acl add --consumer` for alice, it copies every message into the table.

usage: pipeline_principal_test.py path/to/sluice
"""

import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sluice_broker import Broker, TestFailure, check, wait_until  # noqa: E402

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PSQL = next((p for p in ("/usr/bin/psql", "/usr/lib/postgresql/15/bin/psql")
             if os.path.exists(p)), None)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sasl(addr, user):
    return {"bootstrap.servers": addr, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret"}


def pg_port(broker):
    def find():
        with open(broker.out_path) as f:
            for line in f:
                if line.startswith("sluice: Postgres wire protocol on 127.0.0.1:"):
                    return int(line.strip().rsplit(":", 1)[1].split()[0])
        return None
    return wait_until(find, 30, "the Postgres port in serve's output")


def psql(broker, user, sql):
    p = subprocess.run([PSQL, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                        "-p", str(pg_port(broker)), "-U", user, "-d", "sluice", "-c", sql],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PGPASSWORD=f"{user}-secret", PGCONNECT_TIMEOUT="10"))
    check(p.returncode == 0, f"psql as {user}: {sql}: {p.stderr}")
    return p.stdout.strip()


def main():
    sluice = sys.argv[1]
    check(PSQL is not None, "psql is missing (scripts/setup.sh installs postgresql-client)")
    port = free_port()
    addr = f"127.0.0.1:{port}"
    config = """
sasl:
  enabled: true
  users: ["admin:admin-secret", "alice:alice-secret"]
authorization:
  enabled: true
  super_users: ["User:admin"]
topics:
  auto_create: false
groups:
  initial_rebalance_delay: 0s
"""
    broker = Broker(sluice, config, kafka_addr=addr)
    wh = os.path.join(broker.tmp, "wh")
    pipelines = os.path.join(broker.tmp, "pipelines")
    os.makedirs(pipelines)
    with open(os.path.join(pipelines, "copy.yml"), "w") as f:
        f.write(f"""
pipeline:
  name: copy
  principal: alice
  batch_size: 100
  flush_interval_seconds: 1
  source:
    type: kafka
    kafka:
      brokers: ["{{{{ SLUICE_KAFKA_ADDR }}}}"]
      group_id: alice-copy
      auto_offset_reset: earliest
      topics: [orders]
  handler:
    type: handlers.InferredMemBatch
    sql: SELECT * FROM batch
  sink:
    type: iceberg
    iceberg:
      catalog_name: sluice
      table_name: sales.copy
      warehouse: "{wh}"
      commit_interval_seconds: 1
""")
    with_pipelines = ["--warehouse", wh, "--pipelines", pipelines]
    try:
        # The topic and its messages, as the admin.
        broker.start(extra_args=["--warehouse", wh])
        admin = AdminClient(sasl(addr, "admin"))
        for f in admin.create_topics([NewTopic("orders", 2, 1)]).values():
            f.result()
        producer = Producer(sasl(addr, "admin"))
        for i in range(20):
            producer.produce("orders", value=f'{{"id": {i}}}'.encode())
        check(producer.flush(30) == 0, "messages left unsent")
        del producer, admin
        broker.stop()

        # 1. No INSERT on the table: the pipeline is refused before it starts, and serve
        # with it.
        refused = ""
        try:
            broker.start(extra_args=with_pipelines)
            rc = broker.wait(30)
            check(rc not in (0, None), f"serve ran a pipeline its principal may not run (rc {rc})")
        except TestFailure as e:
            refused = str(e)
        refused += broker.logs()
        check("pipeline.principal alice: permission denied: INSERT on lake table sales.copy" in
              refused, f"serve did not name the missing grant:\n{refused}")

        # 2. The grant, no Kafka ACL: the broker refuses alice, not the service.
        broker.start(extra_args=["--warehouse", wh])
        psql(broker, "admin", "GRANT INSERT ON SCHEMA lake.sales TO alice")
        broker.stop()
        broker.start(extra_args=with_pipelines)

        def denied():
            with open(broker.err_path) as f:
                return "authorizer: User:alice from" in f.read()
        wait_until(denied, 60, "the broker denying User:alice")
        rc, _, err = acl(sluice, addr, "add", "--allow-principal", "User:alice", "--consumer",
                         "--topic", "orders", "--group", "alice-copy")
        check(rc == 0, f"sluice acl add: {err}")
        broker.stop()

        # 3. With the ACLs: every message reaches the table, under alice's name.
        broker.start(extra_args=with_pipelines)

        def copied():
            try:
                return psql(broker, "admin", "SELECT count(*) FROM lake.sales.copy") == "20"
            except TestFailure:
                return False
        wait_until(copied, 90, "20 rows in lake.sales.copy", interval=0.5)
        rc = broker.stop()
        check(rc == 0, f"sluice serve exited {rc} after SIGTERM")
        print("PASS: pipeline principal")
        return 0
    except Exception as e:  # the test's verdict
        import traceback
        traceback.print_exc()
        print(f"FAIL: pipeline principal: {e}")
        print(broker.logs())
        return 1
    finally:
        if broker.proc is not None:
            broker.kill()
        broker.cleanup()


def acl(sluice, addr, *args):
    env = dict(os.environ, SLUICE_SASL_PASSWORD="admin-secret")
    p = subprocess.run([sluice, "acl", *args, "--bootstrap", addr, "--sasl-user", "admin"],
                       capture_output=True, text=True, env=env, timeout=60)
    return p.returncode, p.stdout, p.stderr


if __name__ == "__main__":
    sys.exit(main())
