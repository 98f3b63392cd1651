#!/usr/bin/python3
"""`sluice serve` with Kafka's named listeners (kafka.listeners) and the tls: section,
against real clients (docs/design/0019-security.md, phase B). Certificates are made here
with the openssl CLI: a CA, the broker's (SAN IP:127.0.0.1), a client's, and a CA and a
client of another authority.

- PLAINTEXT, SSL and SASL_SSL listeners in one process; Metadata on each answers that
  listener's own address (kcat -L), so a client that bootstraps on one stays on it;
- kcat over SSL and over mutual TLS produces and consumes byte for byte;
- confluent-kafka over SASL_SSL (SCRAM-SHA-256): admin, an idempotent producer, a group;
- kafka-python over SSL: a producer and a consumer;
- kafkajs over mutual TLS and SASL_SSL (tls_kafkajs_clients.js), and trusting another CA refused;
- refused: a client that trusts another CA, a plaintext client on the SSL port, a
  client certificate of another CA when client_auth is required;
- SIGHUP reloads a renewed certificate for new connections, and a broken key file keeps
  the renewed one in use (openssl s_client shows which is served);
- 1,000 connections that never finish a handshake: a real client is served meanwhile and
  the broker closes each of them after its handshake timeout;
- bad configuration stops the start with the reason: a key file others may read,
  kafka.addr beside kafka.listeners, an SSL listener without the tls: section.

usage: /usr/bin/python3 tls_listeners_test.py path/to/sluice
"""

import os
import re
import resource
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from records import ck_produce, expect_offsets_in_order, expect_topic, kp_consume, make_records  # noqa: E402
from sluice_broker import FAST_GROUPS, Broker, TestFailure, check, kcat, run_test  # noqa: E402

from confluent_kafka import Consumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
import kafka  # noqa: E402


def openssl(*args, cwd):
    p = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True)
    check(p.returncode == 0, f"openssl {' '.join(args)}: {p.stderr.decode(errors='replace')}")


def make_certs(d):
    """ca.pem/ca.key, server.pem/server.key (127.0.0.1), client.pem/client.key (CN alice),
    other-ca.pem and other-client.pem/.key signed by it."""
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                f"/CN=sluice test {ca}", "-keyout", f"{ca}.key", "-out", f"{ca}.pem", cwd=d)
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, ca, subject, ext in (("server", "ca", "/CN=127.0.0.1", ["-extfile", "san.ext"]),
                                   ("client", "ca", "/CN=alice/OU=eng", []),
                                   ("other-client", "other-ca", "/CN=mallory", [])):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", f"{name}.key",
                "-out", f"{name}.csr", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", *ext, cwd=d)
    for f in os.listdir(d):
        if f.endswith(".key"):
            os.chmod(os.path.join(d, f), 0o600)


def config(d, client_auth="requested"):
    return FAST_GROUPS + f"""tls:
  cert_file: {d}/server.pem
  key_file: {d}/server.key
  ca_file: {d}/ca.pem
  client_auth: {client_auth}
kafka:
  listeners: ["PLAINTEXT://127.0.0.1:0", "SSL://127.0.0.1:0", "SASL_SSL://127.0.0.1:0"]
sasl:
  enabled: true
  mechanisms: [SCRAM-SHA-256]
  users: ["alice:alice-secret"]
"""


def listener_ports(broker):
    """{name: port} from the banner's "Kafka listeners:" line."""
    with open(broker.out_path) as f:
        text = f.read()
    m = re.search(r"^sluice: Kafka listeners:(.*)$", text, re.M)
    check(m is not None, f"no listeners line in: {text}")
    ports = {name: int(port) for name, port in re.findall(r"(\w+) 127\.0\.0\.1:(\d+) ", m.group(1))}
    check(set(ports) == {"PLAINTEXT", "SSL", "SASL_SSL"}, f"listeners: {m.group(1)}")
    return ports


def body(d):
    def run(broker):
        ports = listener_ports(broker)
        plain = f"127.0.0.1:{ports['PLAINTEXT']}"
        ssl_addr = f"127.0.0.1:{ports['SSL']}"
        sasl_ssl = f"127.0.0.1:{ports['SASL_SSL']}"
        check(broker.bootstrap == plain, f"the banner's first port {broker.bootstrap} is not {plain}")
        ssl_conf = {"security.protocol": "ssl", "ssl.ca.location": f"{d}/ca.pem"}
        mtls_conf = {**ssl_conf, "ssl.certificate.location": f"{d}/client.pem",
                     "ssl.key.location": f"{d}/client.key"}

        # A PLAINTEXT listener beside SASL ones takes large requests (a SASL listener caps
        # unauthenticated ones at 512 KiB; this one never authenticates).
        big = b"x" * (900 << 10) + b"\n"
        admin = AdminClient({"bootstrap.servers": plain})
        admin.create_topics([NewTopic("tls-big", 1, 1, config={"max.message.bytes": "2000000"})])[
            "tls-big"].result(30)
        with tempfile.TemporaryFile() as f:
            f.write(big)
            f.seek(0)
            p = kcat(plain, {"message.max.bytes": "2000000"}, ["-P", "-t", "tls-big", "-p", "0"],
                     stdin=f)
        check(p.returncode == 0, f"a 900 KiB record on PLAINTEXT: {p.stderr.decode(errors='replace')}")
        p = kcat(plain, {"fetch.message.max.bytes": "2000000"},
                 ["-C", "-t", "tls-big", "-e", "-q", "-o", "beginning"])
        check(p.stdout == big, f"the 900 KiB record read back: {len(p.stdout)} bytes")

        # Metadata answers each listener's own address.
        for what, addr, conf in (("PLAINTEXT", plain, {}), ("SSL", ssl_addr, ssl_conf)):
            p = kcat(addr, conf, ["-L", "-m", "10"])
            check(p.returncode == 0, f"kcat -L on {what}: {p.stderr.decode(errors='replace')}")
            check(f"broker 1 at {addr}" in p.stdout.decode(), f"kcat -L on {what}: {p.stdout.decode()}")

        # kcat over SSL and over mutual TLS, byte for byte.
        admin = AdminClient({"bootstrap.servers": plain})
        for f in admin.create_topics([NewTopic("tls-kcat", 1, 1)], operation_timeout=10,
                                     request_timeout=20).values():
            f.result(timeout=30)
        expected = b""
        for what, conf in (("SSL", ssl_conf), ("mutual TLS", mtls_conf)):
            lines = b"".join(b"%s-%04d-%s\n" % (what.encode(), i, b"x" * (i % 300)) for i in range(400))
            with tempfile.TemporaryFile() as f:
                f.write(lines)
                f.seek(0)
                p = kcat(ssl_addr, conf, ["-P", "-t", "tls-kcat", "-z", "zstd"], stdin=f)
            check(p.returncode == 0, f"kcat -P over {what}: {p.stderr.decode(errors='replace')}")
            expected += lines
            p = kcat(ssl_addr, conf, ["-C", "-t", "tls-kcat", "-e", "-o", "beginning", "-q"])
            check(p.returncode == 0, f"kcat -C over {what}: {p.stderr.decode(errors='replace')}")
            check(p.stdout == expected, f"kcat -C over {what}: {len(p.stdout.splitlines())} lines, "
                                        f"not {len(expected.splitlines())}")

        # confluent-kafka over SASL_SSL with SCRAM: admin, an idempotent producer, a group.
        ck = {"bootstrap.servers": sasl_ssl, "security.protocol": "SASL_SSL",
              "ssl.ca.location": f"{d}/ca.pem", "sasl.mechanisms": "SCRAM-SHA-256",
              "sasl.username": "alice", "sasl.password": "alice-secret"}
        admin = AdminClient(ck)
        for f in admin.create_topics([NewTopic("tls-ck", 2, 1)], operation_timeout=10,
                                     request_timeout=20).values():
            f.result(timeout=30)
        records = make_records("tls-ck", 2, 150, 17, 1_730_000_000_000, for_kafka_python=True)
        expect_offsets_in_order(records, ck_produce({**ck, "enable.idempotence": True,
                                                     "compression.type": "gzip"}, "tls-ck", records))
        c = Consumer({**ck, "group.id": "tls-group", "auto.offset.reset": "earliest"})
        c.subscribe(["tls-ck"])
        got = {}
        deadline = time.monotonic() + 30
        while sum(len(v) for v in got.values()) < len(records) and time.monotonic() < deadline:
            for msg in c.consume(num_messages=100, timeout=0.1):
                check(msg.error() is None, f"tls-group: {msg.error()}")
                got.setdefault(msg.partition(), []).append(
                    (msg.offset(), msg.key(), msg.value(), [tuple(h) for h in (msg.headers() or [])],
                     msg.timestamp()[1]))
        c.close()
        expect_topic("tls-ck over SASL_SSL", records, got)

        # kafka-python over SSL reads what confluent-kafka wrote, and writes.
        kp = dict(bootstrap_servers=ssl_addr, security_protocol="SSL", ssl_cafile=f"{d}/ca.pem",
                  ssl_check_hostname=False)
        producer = kafka.KafkaProducer(acks="all", **kp)
        producer.send("tls-kcat", value=b"from kafka-python").get(timeout=60)
        producer.close(30)
        consumer = kafka.KafkaConsumer(enable_auto_commit=False, **kp)
        consumer.assign([kafka.TopicPartition("tls-ck", p) for p in range(2)])
        consumer.seek_to_beginning()
        got = kp_consume(consumer, len(records))
        consumer.close()
        expect_topic("tls-ck read by kafka-python over SSL", records, got)

        # kafkajs over mutual TLS and SASL_SSL (its own TLS: Node's).
        node = shutil.which("node") or shutil.which("nodejs")
        check(node is not None, "node is missing (scripts/setup.sh installs nodejs)")
        p = subprocess.run([node, os.path.join(HERE, "tls_kafkajs_clients.js"), ssl_addr, sasl_ssl, d],
                           capture_output=True, timeout=180)
        check(p.returncode == 0, "kafkajs over TLS:\n" + p.stdout.decode(errors="replace")
              + p.stderr.decode(errors="replace"))

        # Refused: another CA's server trust, plaintext on the SSL port, SSL on plaintext.
        refused = [("a client trusting another CA", ssl_addr,
                    {"security.protocol": "ssl", "ssl.ca.location": f"{d}/other-ca.pem"}),
                   ("a plaintext client on the SSL port", ssl_addr, {}),
                   ("an SSL client on the PLAINTEXT port", plain, ssl_conf)]
        procs = []
        for what, addr, conf in refused:
            cmd = ["kcat", "-b", addr, "-L", "-m", "3"]
            for k, v in conf.items():
                cmd += ["-X", f"{k}={v}"]
            procs.append((what, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
        for what, proc in procs:
            out, err = proc.communicate(timeout=60)
            check(proc.returncode != 0, f"kcat -L with {what} succeeded: {out.decode(errors='replace')}")

        # SIGHUP: a renewed certificate for new connections; a broken key keeps it in use.
        check(served_subject(ssl_addr, d) == "CN = 127.0.0.1", "the first certificate")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1/O=renewed",
                "-keyout", "renewed.key", "-out", "renewed.csr", cwd=d)
        openssl("x509", "-req", "-in", "renewed.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-out", "renewed.pem", "-extfile", "san.ext", cwd=d)
        os.chmod(os.path.join(d, "renewed.key"), 0o600)
        os.replace(os.path.join(d, "renewed.pem"), os.path.join(d, "server.pem"))
        os.replace(os.path.join(d, "renewed.key"), os.path.join(d, "server.key"))
        broker.proc.send_signal(signal.SIGHUP)
        wait_for_line(broker, "TLS certificate and key reloaded")
        check(served_subject(ssl_addr, d) == "CN = 127.0.0.1, O = renewed", "the renewed certificate")
        with open(os.path.join(d, "server.key"), "rb") as f:
            good_key = f.read()
        with open(os.path.join(d, "server.key"), "wb") as f:
            f.write(b"-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
        broker.proc.send_signal(signal.SIGHUP)
        wait_for_line(broker, "TLS reload failed, the certificate in use stays")
        check(served_subject(ssl_addr, d) == "CN = 127.0.0.1, O = renewed", "after a broken key")
        with open(os.path.join(d, "server.key"), "wb") as f:
            f.write(good_key)
        p = kcat(ssl_addr, ssl_conf, ["-L", "-m", "10"])
        check(p.returncode == 0, f"kcat -L after the reloads: {p.stderr.decode(errors='replace')}")
    return run


def served_subject(addr, d):
    """The subject of the certificate the broker serves now (openssl s_client)."""
    p = subprocess.run(["openssl", "s_client", "-connect", addr, "-CAfile", f"{d}/ca.pem",
                        "-verify_return_error"], stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=30)
    m = re.search(r"^subject=(.*)$", p.stdout.decode(errors="replace"), re.M)
    check(m is not None, f"openssl s_client {addr}: {p.stdout.decode(errors='replace')} "
                         f"{p.stderr.decode(errors='replace')}")
    return m.group(1).strip()


def wait_for_line(broker, text, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(broker.out_path) as f:
            if text in f.read():
                return
        time.sleep(0.05)
    raise TestFailure(f"no '{text}' in the broker's output")


def required_client_auth(d):
    def run(broker):
        ssl_addr = f"127.0.0.1:{listener_ports(broker)['SSL']}"
        base = {"security.protocol": "ssl", "ssl.ca.location": f"{d}/ca.pem"}
        p = kcat(ssl_addr, {**base, "ssl.certificate.location": f"{d}/client.pem",
                            "ssl.key.location": f"{d}/client.key"}, ["-L", "-m", "10"])
        check(p.returncode == 0, f"mutual TLS with client_auth required: {p.stderr.decode(errors='replace')}")
        for what, extra in (("no client certificate", {}),
                            ("a client certificate of another CA",
                             {"ssl.certificate.location": f"{d}/other-client.pem",
                              "ssl.key.location": f"{d}/other-client.key"})):
            p = kcat(ssl_addr, {**base, **extra}, ["-L", "-m", "3"])
            check(p.returncode != 0, f"client_auth required let in {what}: {p.stdout.decode()}")
    return run


def count_closed(socks, seconds):
    """How many of `socks` the server closes (after an alert, maybe) within `seconds`;
    closes them all."""
    closed = 0
    deadline = time.monotonic() + seconds
    for s in socks:
        try:
            while True:
                s.settimeout(max(0.1, deadline - time.monotonic()))
                if s.recv(4096) == b"":
                    closed += 1
                    break
        except (ConnectionResetError, ssl.SSLError):
            closed += 1
        except socket.timeout:
            pass
        s.close()
    return closed


def half_open(d):
    """1,000 connections to the SSL listener that never finish a handshake (half of them
    silent, half sending the first bytes of a ClientHello and stopping): a real client is
    served meanwhile, and the broker closes every one of them after its 10 s handshake
    timeout."""
    def run(broker):
        ssl_addr = f"127.0.0.1:{listener_ports(broker)['SSL']}"
        port = int(ssl_addr.rsplit(":", 1)[1])
        socks = []
        for i in range(1000):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            if i % 2:
                s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello's start
            socks.append(s)
        conf = {"security.protocol": "ssl", "ssl.ca.location": f"{d}/ca.pem"}
        with tempfile.TemporaryFile() as f:
            f.write(b"".join(b"half-open-%d\n" % i for i in range(100)))
            f.seek(0)
            p = kcat(ssl_addr, conf, ["-P", "-t", "tls-half", "-p", "0"], stdin=f)
        check(p.returncode == 0, f"kcat -P beside 1,000 half-open connections: {p.stderr!r}")
        p = kcat(ssl_addr, conf, ["-C", "-t", "tls-half", "-e", "-q", "-o", "beginning"])
        check(p.returncode == 0 and len(p.stdout.splitlines()) == 100,
              f"kcat -C beside 1,000 half-open connections: {len(p.stdout.splitlines())} records")
        closed = count_closed(socks, 30)
        check(closed == 1000, f"{closed} of 1,000 half-open connections closed by the broker")
    return run


def refused_configs(sluice, d):
    """Each stops `sluice serve` before it listens, with a message naming the reason."""
    os.chmod(os.path.join(d, "loose.key"), 0o644)
    cases = [
        (config(d).replace(f"{d}/server.key", f"{d}/loose.key"), None, "loose.key"),
        (config(d), "127.0.0.1:0", "kafka.addr"),
        (FAST_GROUPS + "kafka:\n  listeners: ['SSL://127.0.0.1:0']\n", None, "tls: section"),
    ]
    for text, kafka_addr, needle in cases:
        b = Broker(sluice, text, kafka_addr=kafka_addr)
        try:
            started = False
            try:
                b.start(timeout=20)
                started = True
            except TestFailure:
                pass  # exited before listening, as it must
            if started:
                b.stop()
            check(not started, f"sluice serve started with a bad config ({needle})")
            logs = b.logs()
            check(needle in logs, f"the refusal does not name {needle}: {logs}")
        finally:
            b.cleanup()


def main():
    sluice = sys.argv[1]
    # 1,000 half-open connections here and in the broker (which inherits the limit).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    with tempfile.TemporaryDirectory(prefix="sluice-tls-") as d:
        make_certs(d)
        with open(os.path.join(d, "server.key"), "rb") as f, open(os.path.join(d, "loose.key"), "wb") as g:
            g.write(f.read())
        rc = run_test("Kafka listeners: PLAINTEXT, SSL, SASL_SSL with kcat, confluent-kafka, kafka-python, kafkajs",
                      sluice, body(d), config=config(d), kafka_addr=None)
        if rc == 0:
            rc = run_test("Kafka listeners: client_auth required", sluice, required_client_auth(d),
                          config=config(d, "required"), kafka_addr=None)
        if rc == 0:
            cfg = config(d).replace("kafka:\n", "topics:\n  auto_create: true\nkafka:\n", 1)
            rc = run_test("Kafka listeners: 1,000 half-open TLS connections", sluice, half_open(d),
                          config=cfg, kafka_addr=None)
        if rc == 0:
            refused_configs(sluice, d)
            print("PASS: bad TLS and listener configurations are refused with their reasons")
        sys.exit(rc)


if __name__ == "__main__":
    main()
