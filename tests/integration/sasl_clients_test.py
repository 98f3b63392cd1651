#!/usr/bin/python3
"""`sluice serve` with SASL (security.protocol=SASL_PLAINTEXT) against real clients:

- kcat (librdkafka 2.0.2: SaslHandshake v1 + SaslAuthenticate) with PLAIN and with
  SCRAM-SHA-256 produces and consumes, byte for byte;
- a wrong password, an unknown user, a mechanism that is not enabled, and no SASL at
  all each fail to get metadata (kcat exits non-zero); a request other than ApiVersions
  or SASL before authentication closes the connection;
- confluent-kafka with SCRAM-SHA-256: admin, an idempotent producer, a consumer group
  with commits;
- kafka-python (SaslHandshake v0, bare tokens) with PLAIN and with SCRAM-SHA-256:
  producer, a consumer group, admin.

usage: /usr/bin/python3 sasl_clients_test.py path/to/sluice
"""

import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from records import ck_produce, expect_offsets_in_order, expect_topic, kp_consume, make_records  # noqa: E402
from sluice_broker import FAST_GROUPS, RawConnection, TestFailure, check, kcat, run_test  # noqa: E402

from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
import kafka  # noqa: E402
from kafka.admin import KafkaAdminClient, NewTopic as KpNewTopic  # noqa: E402
from kafka.protocol.metadata import MetadataRequest  # noqa: E402

# bob's password has the separator in it (users split at the first ':'); carol's name
# has the two characters SCRAM escapes in names.
CONFIG = FAST_GROUPS + """sasl:
  enabled: true
  mechanisms: [PLAIN, SCRAM-SHA-256]
  users: ["alice:alice-secret", "bob:b0b:with:colons", "carol=x,y:carol-secret"]
"""


def sasl(mechanism, user, password):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mechanism,
            "sasl.username": user, "sasl.password": password}


def kcat_clients(bootstrap):
    alice = sasl("PLAIN", "alice", "alice-secret")
    admin = AdminClient({"bootstrap.servers": bootstrap, **alice})
    for f in admin.create_topics([NewTopic("secure-kcat", 1, 1)], operation_timeout=10,
                                 request_timeout=20).values():
        f.result(timeout=30)

    # Lines of varied lengths (kcat splits its input on newlines).
    r = random.Random(5)
    with tempfile.TemporaryDirectory() as tmp:
        expected = b""
        users = [("PLAIN alice", alice, "snappy"),
                 ("SCRAM-SHA-256 bob", sasl("SCRAM-SHA-256", "bob", "b0b:with:colons"), "zstd"),
                 ("SCRAM-SHA-256 carol", sasl("SCRAM-SHA-256", "carol=x,y", "carol-secret"), "gzip"),
                 ("PLAIN carol", sasl("PLAIN", "carol=x,y", "carol-secret"), "none")]
        for what, config, codec in users:
            lines = b"".join(b"%s-%04d-%s\n" % (codec.encode(), i,
                                                bytes(r.choice(b"abcxyz0123 .,:;{}=") for _ in range(r.randrange(300))))
                             for i in range(500))
            path = os.path.join(tmp, "in")
            with open(path, "wb") as f:
                f.write(lines)
            with open(path, "rb") as f:
                p = kcat(bootstrap, config, ["-P", "-t", "secure-kcat", "-z", codec], stdin=f)
            check(p.returncode == 0, f"kcat -P with {what}: {p.stderr.decode(errors='replace')}")
            expected += lines
            p = kcat(bootstrap, config, ["-C", "-t", "secure-kcat", "-e", "-o", "beginning", "-q"])
            check(p.returncode == 0, f"kcat -C with {what}: {p.stderr.decode(errors='replace')}")
            check(p.stdout == expected, f"kcat -C with {what}: {len(p.stdout.splitlines())} lines differ "
                                        f"from the {len(expected.splitlines())} produced")

    # Refused: each gets no metadata, and kcat exits non-zero.
    refused = [
        ("PLAIN with a wrong password", sasl("PLAIN", "alice", "wrong"), "Authentication failed"),
        ("SCRAM-SHA-256 with a wrong password", sasl("SCRAM-SHA-256", "alice", "wrong"), "Authentication failed"),
        ("SCRAM-SHA-256 for an unknown user", sasl("SCRAM-SHA-256", "mallory", "x"), "Authentication failed"),
        ("PLAIN for an unknown user", sasl("PLAIN", "mallory", "x"), "Authentication failed"),
        ("SCRAM-SHA-512, not enabled", sasl("SCRAM-SHA-512", "alice", "alice-secret"),
         "Unsupported SASL mechanism"),
        ("no SASL", {}, "Disconnected"),  # the broker closes the connection at Metadata
    ]
    # All at once: each waits out its metadata timeout (-m 3 s).
    procs = []
    for what, config, needle in refused:
        cmd = ["kcat", "-b", bootstrap, "-L", "-m", "3"]
        for k, v in config.items():
            cmd += ["-X", f"{k}={v}"]
        procs.append((what, needle, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
    for what, needle, proc in procs:
        out, err = proc.communicate(timeout=60)
        err = err.decode(errors="replace")
        check(proc.returncode != 0, f"kcat -L with {what} succeeded: {out.decode(errors='replace')}")
        check(needle in err, f"kcat -L with {what}: no '{needle}' in: {err}")

    # Before authentication only ApiVersions and SASL requests are served: a Metadata
    # request closes the connection.
    conn = RawConnection(bootstrap, timeout=20)
    req = MetadataRequest[1](topics=None)
    conn.send(req)
    try:
        conn.receive(req, 1)
        raise TestFailure("Metadata before authentication was answered")
    except TestFailure as e:
        check("connection closed" in str(e), str(e))
    except ConnectionResetError:
        pass
    conn.close()


def confluent_kafka_scram(bootstrap):
    config = {"bootstrap.servers": bootstrap, **sasl("SCRAM-SHA-256", "alice", "alice-secret")}
    admin = AdminClient(config)
    for f in admin.create_topics([NewTopic("secure-ck", 3, 1)], operation_timeout=10, request_timeout=20).values():
        f.result(timeout=30)
    records = make_records("secure-ck", 3, 200, 71, 1_720_000_000_000)
    # gzip: kafka-python reads these records later, and Debian's has no lz4 codec.
    expect_offsets_in_order(records, ck_produce({**config, "enable.idempotence": True, "compression.type": "gzip"},
                                                "secure-ck", records))

    c = Consumer({**config, "group.id": "secure-group", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.subscribe(["secure-ck"])
    got = {}
    deadline = time.monotonic() + 30
    while sum(len(v) for v in got.values()) < len(records) and time.monotonic() < deadline:
        for msg in c.consume(num_messages=100, timeout=0.1):
            check(msg.error() is None, f"secure-group: {msg.error()}")
            got.setdefault(msg.partition(), []).append(
                (msg.offset(), msg.key(), msg.value(), [tuple(h) for h in (msg.headers() or [])], msg.timestamp()[1]))
    c.commit(asynchronous=False)
    committed = [tp.offset for tp in c.committed([TopicPartition("secure-ck", p) for p in range(3)], timeout=20)]
    c.close()
    expect_topic("secure-ck by a SCRAM group member", records, got)
    check(committed == [200] * 3, f"secure-group committed: {committed}")
    groups = [g.id for g in admin.list_groups(timeout=20)]
    check("secure-group" in groups, f"list_groups: {groups}")
    return records


def kafka_python_sasl(bootstrap, ck_records):
    for mechanism in ("PLAIN", "SCRAM-SHA-256"):
        auth = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                    sasl_plain_username="bob", sasl_plain_password="b0b:with:colons")
        topic = "secure-kp-" + mechanism.lower()
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, **auth)
        admin.create_topics([KpNewTopic(topic, 2, 1)], timeout_ms=20000)
        check(topic in admin.list_topics(), f"kafka-python {mechanism}: list_topics")

        records = make_records(topic, 2, 200, 81, 1_725_000_000_000, for_kafka_python=True)
        producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="gzip",
                                       retries=0, max_in_flight_requests_per_connection=1, **auth)
        futures = [producer.send(topic, value=r.value, key=r.key, partition=r.partition, headers=r.headers,
                                 timestamp_ms=r.timestamp) for r in records]
        producer.flush(60)
        delivered = [(md.partition, md.offset) for md in (f.get(timeout=60) for f in futures)]
        producer.close(30)
        expect_offsets_in_order(records, delivered)

        group = f"secure-kp-group-{mechanism.lower()}"
        consumer = kafka.KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                       enable_auto_commit=False, auto_offset_reset="earliest", **auth)
        got = kp_consume(consumer, len(records))
        consumer.commit()
        consumer.close(autocommit=False)
        expect_topic(f"{topic} by a kafka-python group member ({mechanism})", records, got)
        offsets = admin.list_consumer_group_offsets(group)
        check({tp.partition: om.offset for tp, om in offsets.items()} == {0: 200, 1: 200},
              f"{group} committed: {offsets}")
        admin.close()

    # What confluent-kafka wrote with SCRAM, read by kafka-python with PLAIN.
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                   security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                   sasl_plain_username="alice", sasl_plain_password="alice-secret")
    consumer.assign([kafka.TopicPartition("secure-ck", p) for p in range(3)])
    consumer.seek_to_beginning()
    got = kp_consume(consumer, len(ck_records))
    consumer.close()
    expect_topic("secure-ck read by kafka-python", ck_records, got)

    # A kafka-python client with a wrong password gets no further than SASL.
    try:
        KafkaAdminClient(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                         sasl_plain_username="alice", sasl_plain_password="wrong",
                         request_timeout_ms=5000, api_version_auto_timeout_ms=5000).list_topics()
        raise TestFailure("kafka-python with a wrong password listed topics")
    except TestFailure:
        raise
    except Exception:  # kafka-python reports the failed authentication or a closed connection
        pass


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} path/to/sluice")

    def body(broker):
        for name, step in (("kcat", lambda: kcat_clients(broker.bootstrap)),
                           ("confluent-kafka", lambda: results.append(confluent_kafka_scram(broker.bootstrap))),
                           ("kafka-python", lambda: kafka_python_sasl(broker.bootstrap, results[0]))):
            t = time.monotonic()
            step()
            print(f"{name}: ok ({time.monotonic() - t:.1f} s)", flush=True)

    results = []
    sys.exit(run_test("SASL PLAIN and SCRAM-SHA-256 with kcat, confluent-kafka, kafka-python",
                      sys.argv[1], body, config=CONFIG))


if __name__ == "__main__":
    main()
