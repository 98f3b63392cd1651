#!/usr/bin/python3
"""Kafka's named listeners in a replicated cluster (docs/design/0019-security.md): three
`sluice serve --etcd` brokers and a real etcd, the other brokers reached on a secured
inter-broker listener.

1. Mutual TLS between brokers: listeners SSL and SASL_SSL on every broker and PLAINTEXT
   on brokers 1 and 2 only, `kafka.inter_broker_listener: SSL`, `client_auth: required`
   (a follower must show its certificate to fetch). A topic of three partitions with
   replication factor 3: confluent-kafka over SASL_SSL (SCRAM) produces with acks=all and
   every ISR reaches all three brokers (followers fetch over TLS); Metadata on each
   listener answers that listener's addresses; on PLAINTEXT, broker 3 (no such listener)
   is left out and a partition it leads is LISTENER_NOT_FOUND, as Kafka answers; broker 3
   is SIGKILLed and producing carries on, every acknowledged record read back in order.
2. SASL_SSL between brokers (SCRAM-SHA-256 as `sasl.inter_broker_user`) with Kafka's ACLs
   on (`authorization.enabled`, the brokers' user and an admin super users): alice sees no
   topic until the admin creates her ACLs through broker 1 (kafka-python); broker 3 then
   shows them (DescribeAcls) and lets her see the topic (etcd's `acls` key, its watch);
   the same produce (her records reach leaders on every broker) and full ISRs (followers
   fetch as the super user); then a broker whose own password for that user is wrong
   cannot follow (its log says the leader refused it) and stays out of every ISR.
3. Refused at start: an SSL inter-broker listener without tls.ca_file; an inter-broker
   listener the broker does not have.

usage: /usr/bin/python3 cluster_tls_test.py path/to/sluice
"""

import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster_controller_test import ClusterBroker, start_together  # noqa: E402
from etcd_util import EtcdCluster, free_ports, unavailable  # noqa: E402
from records import ck_produce, ck_read_all, expect_offsets_in_order, expect_topic, make_records  # noqa: E402
from sluice_broker import FAST_GROUPS, TestFailure, check, raw_metadata, wait_until  # noqa: E402
from tls_listeners_test import make_certs  # noqa: E402

from confluent_kafka import KafkaError  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "secured"
PARTITIONS = 3


class ListenerBroker(ClusterBroker):
    """A cluster broker configured with kafka.listeners (no --kafka-addr)."""

    def __init__(self, sluice, node, etcd_url, certs, listeners, extra):
        super().__init__(sluice, node, etcd_url)
        self.certs = certs
        self.ports = dict(zip(listeners, free_ports(len(listeners))))
        self.extra = extra
        first = listeners[0]
        self.bootstrap = f"127.0.0.1:{self.ports[first]}"

    def addr(self, listener):
        return f"127.0.0.1:{self.ports[listener]}"

    def args(self, etcd=True):
        config = os.path.join(self.tmp, "sluice.yaml")
        listeners = ", ".join(f'"{n}://127.0.0.1:{p}"' for n, p in self.ports.items())
        with open(config, "w") as f:
            f.write(FAST_GROUPS)
            f.write("cluster:\n  session_timeout: 2s\n")
            f.write(f"kafka:\n  listeners: [{listeners}]\n")
            f.write(self.extra)
        return [self.sluice, "serve", "--data-dir", self.data_dir, "--shards", "2",
                "--http-addr", "off", "--pg-addr", "off", "--schema-registry-addr", "off", "--config", config,
                "--node-id", str(self.node), "--etcd", self.etcd_url]


def step(what):
    """A line per step with the time, so a failure in CI says how far the test came."""
    print(f"{time.strftime('%H:%M:%S')} {what}", flush=True)


def tls_section(d, client_auth, ca=True):
    return (f"tls:\n  cert_file: {d}/server.pem\n  key_file: {d}/server.key\n"
            + (f"  ca_file: {d}/ca.pem\n" if ca else "")
            + f"  client_auth: {client_auth}\n")


def sasl_ssl_client(d, addr, mtls):
    conf = {"bootstrap.servers": addr, "security.protocol": "SASL_SSL",
            "ssl.ca.location": f"{d}/ca.pem", "sasl.mechanisms": "SCRAM-SHA-256",
            "sasl.username": "alice", "sasl.password": "alice-secret"}
    if mtls:
        conf.update({"ssl.certificate.location": f"{d}/client.pem",
                     "ssl.key.location": f"{d}/client.key"})
    return conf


def metadata(conf):
    return AdminClient(conf).list_topics(timeout=20)


def wait_full_isrs(conf, nodes, what):
    def full():
        md = metadata(conf)
        t = md.topics.get(TOPIC)
        return (t is not None and t.error is None and len(t.partitions) == PARTITIONS
                and all(sorted(p.isrs) == nodes for p in t.partitions.values()))
    wait_until(full, 60, what, interval=0.5)


def produce_and_check(conf, tag, seed, first_ts):
    """Produces 3 x 100 records with acks=all and returns them with their offsets."""
    records = make_records(tag, PARTITIONS, 100, seed, first_ts, for_kafka_python=True)
    delivered = ck_produce({**conf, "acks": "all", "enable.idempotence": True}, TOPIC, records)
    return records, delivered


def create_topic(conf):
    admin = AdminClient(conf)
    fs = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                             operation_timeout=10, request_timeout=30)
    fs[TOPIC].result(30)


def kp_admin(d, addr):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=addr, security_protocol="SASL_SSL",
                            ssl_cafile=f"{d}/ca.pem", ssl_check_hostname=False,
                            sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="admin",
                            sasl_plain_password="admin-secret")


def grant_alice(d, addr):
    """ALL on the topic and READ on every group, created through the broker at `addr`."""
    from kafka.admin import (ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             ResourcePattern, ResourceType)
    admin = kp_admin(d, addr)
    acls = [ACL("User:alice", "*", ACLOperation.ALL, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.TOPIC, TOPIC, ACLResourcePatternType.LITERAL)),
            ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.GROUP, "*", ACLResourcePatternType.LITERAL))]
    result = admin.create_acls(acls)
    admin.close()
    check(not result["failed"] and len(result["succeeded"]) == 2, f"create_acls: {result}")


def describe_acls(d, addr):
    from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             ResourcePatternFilter, ResourceType)
    admin = kp_admin(d, addr)
    acls, error = admin.describe_acls(ACLFilter(
        principal=None, host=None, operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(ResourceType.ANY, None,
                                               ACLResourcePatternType.ANY)))
    admin.close()
    check(error.errno == 0, f"describe_acls: {error}")
    return acls


def cluster(sluice, etcd, d, extra, listeners_of):
    brokers = [ListenerBroker(sluice, n, etcd.endpoints_arg(), d, listeners_of(n), extra)
               for n in (1, 2, 3)]
    return brokers


def test_mutual_tls(sluice, d):
    extra = tls_section(d, "required") + """sasl:
  enabled: true
  mechanisms: [SCRAM-SHA-256]
  users: ["alice:alice-secret"]
kafka.inter_broker_listener: SSL
"""
    with EtcdCluster() as etcd:
        brokers = cluster(sluice, etcd, d, extra,
                          lambda n: ["SSL", "SASL_SSL"] + (["PLAINTEXT"] if n < 3 else []))
        try:
            start_together(brokers)
            step("mutual TLS: brokers listening")
            conf = sasl_ssl_client(d, brokers[0].addr("SASL_SSL"), mtls=True)
            create_topic(conf)
            step("mutual TLS: topic created")
            records, delivered = produce_and_check(conf, "mtls", 5, 1_731_000_000_000)
            expect_offsets_in_order(records, delivered)
            step("mutual TLS: produced")
            wait_full_isrs(conf, [1, 2, 3], "every ISR [1, 2, 3] (followers fetch over mutual TLS)")

            # Each listener's Metadata names that listener's addresses.
            ssl_conf = {"bootstrap.servers": brokers[1].addr("SSL"), "security.protocol": "SSL",
                        "ssl.ca.location": f"{d}/ca.pem",
                        "ssl.certificate.location": f"{d}/client.pem",
                        "ssl.key.location": f"{d}/client.key"}
            for what, c, listener, nodes in (("SASL_SSL", conf, "SASL_SSL", [1, 2, 3]),
                                             ("SSL", ssl_conf, "SSL", [1, 2, 3])):
                md = metadata(c)
                got = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
                want = {b.node: b.addr(listener) for b in brokers if b.node in nodes}
                check(got == want, f"Metadata on {what}: brokers {got}, want {want}")
            plain = {"bootstrap.servers": brokers[0].addr("PLAINTEXT")}
            md = metadata(plain)
            got = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
            want = {b.node: b.addr("PLAINTEXT") for b in brokers[:2]}
            check(got == want, f"Metadata on PLAINTEXT: brokers {got}, want {want} (3 has none)")
            full = metadata(conf).topics[TOPIC].partitions
            led_by_3 = [p for p, pm in full.items() if pm.leader == 3]
            check(led_by_3, f"no partition led by broker 3: {[pm.leader for pm in full.values()]}")
            # librdkafka 2.0 asks Metadata v4: LEADER_NOT_AVAILABLE there; from v6 on
            # LISTENER_NOT_FOUND (72), as Kafka answers.
            raw = raw_metadata(brokers[0].addr("PLAINTEXT"))["topics"][TOPIC]["partitions"]
            for p, pm in md.topics[TOPIC].partitions.items():
                if p in led_by_3:
                    check(pm.error is not None and pm.error.code() == KafkaError.LEADER_NOT_AVAILABLE,
                          f"PLAINTEXT Metadata v4 of partition {p} (led by 3): {pm.error}")
                    check(raw[p][:2] == (72, -1),
                          f"PLAINTEXT Metadata v12 of partition {p} (led by 3): {raw[p]}")
                else:
                    check(pm.error is None and pm.leader == full[p].leader,
                          f"PLAINTEXT Metadata of partition {p}: {pm.error}, leader {pm.leader}")
                    check(raw[p][:2] == (0, full[p].leader), f"PLAINTEXT v12 partition {p}: {raw[p]}")

            # Broker 3 dies: its partitions move, producing carries on, nothing is lost.
            brokers[2].kill()
            wait_until(lambda: all(pm.leader in (1, 2) for pm in
                                   metadata(conf).topics[TOPIC].partitions.values()),
                       60, "leaders on brokers 1 and 2")
            more, more_delivered = produce_and_check(conf, "mtls-after", 6, 1_731_000_100_000)
            expect_offsets_in_order(more, more_delivered, first=100)
            got = ck_read_all({**conf, "bootstrap.servers": brokers[1].addr("SASL_SSL")}, TOPIC,
                              PARTITIONS, len(records) + len(more))
            expect_topic("after broker 3 died", records + more, got)
            print("PASS: mutual TLS between brokers; Metadata per listener; LISTENER_NOT_FOUND; "
                  "failover over TLS")
        except BaseException as e:
            # The reason first: CI shows the start and the end of a long output, not its middle.
            print(f"FAIL: {type(e).__name__}: {e}", flush=True)
            for b in brokers:
                print(b.logs(), file=sys.stderr)
            raise
        finally:
            for b in brokers:
                b.cleanup()


def test_sasl_ssl(sluice, d):
    def extra(password):
        return tls_section(d, "none") + f"""sasl:
  enabled: true
  mechanisms: [SCRAM-SHA-256]
  users: ["alice:alice-secret", "admin:admin-secret", "broker:{password}"]
  inter_broker_user: broker
kafka.inter_broker_listener: SASL_SSL
authorization:
  enabled: true
  super_users: ["User:broker", "User:admin"]
"""
    with EtcdCluster() as etcd:
        brokers = cluster(sluice, etcd, d, extra("broker-secret"), lambda n: ["SASL_SSL"])
        try:
            start_together(brokers)
            step("SASL_SSL: brokers listening")
            conf = sasl_ssl_client(d, brokers[0].addr("SASL_SSL"), mtls=False)
            admin_conf = {**conf, "sasl.username": "admin", "sasl.password": "admin-secret"}
            create_topic(admin_conf)
            step("SASL_SSL: topic created")
            check(TOPIC not in metadata(conf).topics, "alice sees the topic without an ACL")
            grant_alice(d, brokers[0].addr("SASL_SSL"))
            conf3 = {**conf, "bootstrap.servers": brokers[2].addr("SASL_SSL")}
            wait_until(lambda: TOPIC in metadata(conf3).topics, 30,
                       "broker 3 letting alice see the topic (the ACL through etcd)")
            check(len(describe_acls(d, brokers[2].addr("SASL_SSL"))) == 2,
                  "broker 3's DescribeAcls")
            records, delivered = produce_and_check(conf, "sasl", 7, 1_732_000_000_000)
            expect_offsets_in_order(records, delivered)
            wait_full_isrs(conf, [1, 2, 3], "every ISR [1, 2, 3] (followers fetch over SASL_SSL)")

            # Broker 3 comes back believing another password: the leaders refuse it.
            brokers[2].stop()
            wait_until(lambda: all(3 not in pm.isrs for pm in
                                   metadata(conf).topics[TOPIC].partitions.values()),
                       60, "broker 3 out of every ISR")
            brokers[2].extra = extra("not-the-password")
            brokers[2].start()
            more, more_delivered = produce_and_check(conf, "sasl-after", 8, 1_732_000_100_000)

            def refused():
                with open(brokers[2].out_path, errors="replace") as f1, \
                        open(brokers[2].err_path, errors="replace") as f2:
                    text = f1.read() + f2.read()
                return "SASL SCRAM-SHA-256 as 'broker' refused" in text
            wait_until(refused, 30, "broker 3's log saying the leader refused its SASL login")
            time.sleep(3)
            md = metadata(conf)
            isrs = {p: sorted(pm.isrs) for p, pm in md.topics[TOPIC].partitions.items()}
            check(all(3 not in isr for isr in isrs.values()),
                  f"broker 3 joined an ISR with a wrong password: {isrs}")
            got = ck_read_all(conf, TOPIC, PARTITIONS, len(records) + len(more))
            expect_topic("SASL_SSL cluster", records + more, got)
            print("PASS: SASL_SSL (SCRAM) between brokers with ACLs kept in etcd; a wrong "
                  "inter-broker password is refused")
        except BaseException as e:
            # The reason first: CI shows the start and the end of a long output, not its middle.
            print(f"FAIL: {type(e).__name__}: {e}", flush=True)
            for b in brokers:
                print(b.logs(), file=sys.stderr)
            raise
        finally:
            for b in brokers:
                b.cleanup()


def test_refusals(sluice, d):
    with EtcdCluster() as etcd:
        for extra, listeners, why in (
                (tls_section(d, "none", ca=False) + "kafka.inter_broker_listener: SSL\n", ["SSL"],
                 "checks the others' certificates against tls.ca_file, which is not set"),
                (tls_section(d, "none"), ["SSL"],
                 "'PLAINTEXT' is not one of this broker's listeners (SSL)"),
        ):
            b = ListenerBroker(sluice, 1, etcd.endpoints_arg(), d, listeners, extra)
            try:
                err = b.expect_refusal()
                check(why in err, f"refusal: want {why!r} in:\n{err}")
            finally:
                b.cleanup()
    print("PASS: inter-broker listener refusals")


def main():
    sluice = os.path.abspath(sys.argv[1])
    why = unavailable()
    if why:
        print(f"SKIP: {why}")
        return 0
    d = tempfile.mkdtemp(prefix="sluice-cluster-tls-")
    try:
        make_certs(d)
        test_refusals(sluice, d)
        test_mutual_tls(sluice, d)
        test_sasl_ssl(sluice, d)
    except Exception as e:  # noqa: BLE001 (a client's KafkaException fails the test too)
        print(f"FAIL: {type(e).__name__}: {e}")
        return 1
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
