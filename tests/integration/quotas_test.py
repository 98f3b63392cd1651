#!/usr/bin/python3
"""Client quotas (docs/design/0019-security.md, phase F), against real clients.

1. `sluice quota set|remove|list` on a broker with SASL and the authorizer (admin a super
   user, every resource without ACLs open, an ACL on the cluster for admin): quotas set for
   a user and for every client id, listed back; bad input refused with Kafka's words (an
   unknown key, a fractional byte rate, a zero rate, no entity, --user with
   --default-user, controller_mutation_rate); bob, who may not ALTER_CONFIGS on the cluster, is refused.
2. A producer (confluent-kafka, acks=all) as alice, whose producer_byte_rate is 200 kB/s,
   sends as fast as it can for 12 s: after its first second the acknowledged bytes stay
   within 1.1x the quota (and above half of it: throttled, not stalled); bob, without a
   quota, gets more than three times the quota through meanwhile.
3. A consumer as bob with client id "reader" reads under the <default> client-id
   consumer_byte_rate of 150 kB/s for 11 s: within 1.1x after its first second.
4. The quotas survive a restart (meta/quotas.json, mode 0600).

usage: /usr/bin/python3 quotas_test.py path/to/sluice
"""

import os
import stat
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sluice_broker import FAST_GROUPS, Broker, TestFailure, check  # noqa: E402

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PRODUCE_QUOTA = 200_000
FETCH_QUOTA = 150_000
VALUE = b"q" * 1000

CONFIG = FAST_GROUPS + """
sasl:
  enabled: true
  mechanisms: [PLAIN, SCRAM-SHA-256]
  users: ["admin:admin-secret", "alice:alice-secret", "bob:bob-secret"]
authorization:
  enabled: true
  super_users: ["User:admin"]
  allow_everyone_if_no_acl_found: true
"""


def sasl(user):
    return {"bootstrap.servers": None, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN", "sasl.username": user,
            "sasl.password": f"{user}-secret"}


def client_config(broker, user, **extra):
    c = sasl(user)
    c["bootstrap.servers"] = broker.bootstrap
    c.update(extra)
    return c


def quota_cmd(sluice, broker, *args, user="admin"):
    env = dict(os.environ, SLUICE_SASL_PASSWORD=f"{user}-secret")
    cmd = [sluice, "quota", *args, "--bootstrap", broker.bootstrap,
           "--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN",
           "--sasl-user", user]
    return subprocess.run(cmd, capture_output=True, env=env, timeout=60, text=True)


def expect_refused(p, why, what):
    check(p.returncode != 0, f"{what}: accepted\n{p.stdout}")
    check(why in p.stderr, f"{what}: wanted '{why}' in: {p.stderr}")


def cli_part(sluice, broker):
    p = quota_cmd(sluice, broker, "list")
    check(p.returncode == 0 and p.stdout.strip() == "ENTITY  QUOTAS", f"empty list: {p}")
    p = quota_cmd(sluice, broker, "set", "--user", "alice", f"producer_byte_rate={PRODUCE_QUOTA}")
    check(p.returncode == 0, f"set alice: {p.stderr}")
    p = quota_cmd(sluice, broker, "set", "--default-client-id", f"consumer_byte_rate={FETCH_QUOTA}")
    check(p.returncode == 0, f"set default client: {p.stderr}")
    p = quota_cmd(sluice, broker, "set", "--user", "carol", "--client-id", "x",
                  "request_percentage=12.5", "consumer_byte_rate=1000")
    check(p.returncode == 0, f"set carol/x: {p.stderr}")
    p = quota_cmd(sluice, broker, "remove", "--user", "carol", "--client-id", "x",
                  "consumer_byte_rate")
    check(p.returncode == 0, f"remove: {p.stderr}")
    p = quota_cmd(sluice, broker, "list")
    lines = p.stdout.strip().splitlines()
    check(p.returncode == 0 and len(lines) == 4, f"list: {p.stdout}{p.stderr}")
    body = "\n".join(lines[1:])
    for want in [f"client-id=<default>  consumer_byte_rate={FETCH_QUOTA}",
                 f"user=alice           producer_byte_rate={PRODUCE_QUOTA}",
                 "user=carol, client-id=x  request_percentage=12.5"]:
        check(" ".join(want.split()) in "\n".join(" ".join(l.split()) for l in lines),
              f"list lacks '{want}':\n{p.stdout}")
    p = quota_cmd(sluice, broker, "list", "--user", "alice")
    check(p.returncode == 0 and len(p.stdout.strip().splitlines()) == 2 and "alice" in p.stdout,
          f"list alice: {p.stdout}")

    expect_refused(quota_cmd(sluice, broker, "remove", "--user", "alice", "consumer_byte_rate"),
                   "user=alice has no consumer_byte_rate quota", "removing what is not set")
    p = quota_cmd(sluice, broker, "remove", "--user", "carol", "--client-id", "x")
    check(p.returncode == 0 and "request_percentage" in p.stdout, f"remove all of carol/x: {p}")
    p = quota_cmd(sluice, broker, "list")
    check(p.returncode == 0 and len(p.stdout.strip().splitlines()) == 3 and "carol" not in p.stdout,
          f"list after removing carol/x: {p.stdout}")
    expect_refused(quota_cmd(sluice, broker, "set", "--user", "a", "bogus=1"),
                   "Invalid configuration key bogus", "an unknown key")
    expect_refused(quota_cmd(sluice, broker, "set", "--user", "a", "producer_byte_rate=1.5"),
                   "must be a whole number", "a fractional byte rate")
    expect_refused(quota_cmd(sluice, broker, "set", "--user", "a", "producer_byte_rate=0"),
                   "must be above zero", "a zero rate")
    expect_refused(quota_cmd(sluice, broker, "set", "producer_byte_rate=1"),
                   "name the entity", "no entity")
    expect_refused(quota_cmd(sluice, broker, "set", "--user", "a", "--default-user",
                             "producer_byte_rate=1"), "not both", "two users")
    expect_refused(quota_cmd(sluice, broker, "set", "--user", "a", "producer_byte_rate"),
                   "is not KEY=VALUE", "no value")
    # Byte rates with units, as people write them.
    p = quota_cmd(sluice, broker, "set", "--user", "dave", "consumer_byte_rate=2MiB/s",
                  "producer_byte_rate=512KiB")
    check(p.returncode == 0, f"set dave with units: {p.stderr}")
    p = quota_cmd(sluice, broker, "list", "--user", "dave")
    flat = " ".join(p.stdout.split())
    check("consumer_byte_rate=2097152" in flat and "producer_byte_rate=524288" in flat,
          f"dave's quotas in bytes: {p.stdout}")
    p = quota_cmd(sluice, broker, "remove", "--user", "dave")
    check(p.returncode == 0, f"remove dave: {p.stderr}")
    expect_refused(quota_cmd(sluice, broker, "set", "--user", "a", "producer_byte_rate=5XB"),
                   "unknown unit", "an unknown unit")
    expect_refused(quota_cmd(sluice, broker, "set", "--user", "a", "request_percentage=5MiB"),
                   "is not a number", "units on a percentage")
    expect_refused(quota_cmd(sluice, broker, "set", "--user", "a", "controller_mutation_rate=5"),
                   "controller_mutation_rate is not supported", "controller_mutation_rate")

    # The authorizer: once an ACL names the cluster, bob (no ALTER_CONFIGS there) is refused.
    from kafka.admin import (ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             KafkaAdminClient, ResourcePattern, ResourceType)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="admin",
                             sasl_plain_password="admin-secret")
    acl = ACL(principal="User:admin", host="*", operation=ACLOperation.ALTER_CONFIGS,
              permission_type=ACLPermissionType.ALLOW,
              resource_pattern=ResourcePattern(ResourceType.CLUSTER, "kafka-cluster",
                                               ACLResourcePatternType.LITERAL))
    result = admin.create_acls([acl])
    check(not result["failed"], f"create the cluster ACL: {result}")
    admin.close()
    expect_refused(quota_cmd(sluice, broker, "set", "--user", "bob", "producer_byte_rate=1",
                             user="bob"), "Cluster authorization failed. (error 31)", "bob")
    print("PASS: sluice quota set/remove/list, bad input, the authorizer")


def timed_produce(broker, user, topic, seconds, acked):
    """Produces VALUE as fast as the producer takes them for `seconds`; appends
    (time, bytes) for each acknowledged record to `acked`."""
    p = Producer(client_config(broker, user, **{"acks": "all", "linger.ms": 5,
                                                "batch.size": 16384,
                                                "queue.buffering.max.kbytes": 2048}))
    errors = []

    def done(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked.append((time.monotonic(), len(msg.value())))

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            p.produce(topic, VALUE, on_delivery=done)
        except BufferError:
            p.poll(0.05)
            continue
        p.poll(0)
    # What is still queued is not counted: the window ends at `end`.
    p.flush(60)
    check(not errors, f"{user}: delivery errors: {errors[:3]}")
    return end


def rate_after_first_second(samples, end):
    check(samples, "nothing acknowledged")
    start = samples[0][0] + 1.0
    got = sum(n for t, n in samples if start <= t <= end)
    return got / (end - start)


def produce_part(broker):
    admin = AdminClient(client_config(broker, "admin"))
    for f in admin.create_topics([NewTopic("q-alice", 1, 1), NewTopic("q-bob", 1, 1)]).values():
        f.result(30)
    alice, bob = [], []
    bob_thread = threading.Thread(target=lambda: timed_produce(broker, "bob", "q-bob", 3, bob))
    bob_thread.start()
    end = timed_produce(broker, "alice", "q-alice", 12, alice)
    bob_thread.join()
    rate = rate_after_first_second(alice, end)
    print(f"alice produced {rate:.0f} B/s of payload under a {PRODUCE_QUOTA} B/s quota")
    check(rate <= 1.1 * PRODUCE_QUOTA, f"alice over her quota: {rate:.0f} B/s")
    check(rate >= 0.5 * PRODUCE_QUOTA, f"alice stalled: {rate:.0f} B/s")
    bob_bytes = sum(n for _, n in bob)
    check(bob_bytes > 3 * 3 * PRODUCE_QUOTA,
          f"bob (no quota) got only {bob_bytes} bytes through in 3 s")
    print("PASS: a producer stays within 1.1x its byte-rate quota over 11 s; others unaffected")
    return sum(n for _, n in alice)


def consume_part(broker, available):
    c = Consumer(client_config(broker, "bob", **{
        "group.id": "q-readers", "client.id": "reader", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "fetch.max.bytes": 65536, "message.max.bytes": 65536,
        "max.partition.fetch.bytes": 65536, "fetch.wait.max.ms": 100}))
    c.subscribe(["q-alice"])
    got = []
    end = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        got.append((time.monotonic(), len(m.value())))
        if end is None:
            end = got[0][0] + 11
        if time.monotonic() >= end:
            break
    c.close()
    check(end is not None and time.monotonic() >= end, "the consumer did not read for 11 s")
    check(sum(n for _, n in got) < available, "the consumer ran out of records to read")
    rate = rate_after_first_second(got, end)
    print(f"bob read {rate:.0f} B/s of payload under a {FETCH_QUOTA} B/s quota")
    check(rate <= 1.1 * FETCH_QUOTA, f"the consumer over its quota: {rate:.0f} B/s")
    check(rate >= 0.5 * FETCH_QUOTA, f"the consumer stalled: {rate:.0f} B/s")
    print("PASS: a consumer stays within 1.1x the <default> client-id fetch quota over 10 s")


def restart_part(sluice, broker):
    check(broker.stop() == 0, "stop")
    path = os.path.join(broker.data_dir, "meta", "quotas.json")
    mode = stat.S_IMODE(os.stat(path).st_mode)
    check(mode == 0o600, f"quotas.json mode {oct(mode)}")
    broker.start()
    p = quota_cmd(sluice, broker, "list", "--user", "alice")
    check(p.returncode == 0 and f"producer_byte_rate={PRODUCE_QUOTA}" in p.stdout,
          f"after a restart: {p.stdout}{p.stderr}")
    print("PASS: quotas survive a restart (quotas.json 0600)")


def main():
    sluice = sys.argv[1]
    broker = Broker(sluice, CONFIG)
    try:
        broker.start()
        cli_part(sluice, broker)
        available = produce_part(broker)
        consume_part(broker, available)
        restart_part(sluice, broker)
        check(broker.stop() == 0, "stop")
        return 0
    except (TestFailure, Exception) as e:  # the verdict: any exception fails the test
        import traceback
        traceback.print_exc()
        print(f"FAIL: quotas_test: {e}")
        print(broker.logs())
        return 1
    finally:
        broker.cleanup()


if __name__ == "__main__":
    sys.exit(main())
