#!/usr/bin/python3
"""One user store for every port (docs/design/0019-security.md, phase D), against real
clients.

1. AlterUserScramCredentials / DescribeUserScramCredentials spoken raw (a broker without
   SASL): Kafka's error for too few and too many iterations, an unknown mechanism, a
   credential deleted that does not exist, a user twice in one request, an empty name, a
   user described that does not exist; a good upsertion is described back.
2. A broker with SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) seeded by sasl.users and
   query.users: `sluice user list|add|passwd|remove`; kcat logs in as the added user with
   SCRAM-SHA-512 and PLAIN and produces and consumes; psql logs in as it too (one store);
   passwd makes the old password fail; the store survives a restart (users.json, mode
   0600, no password in it or in the logs); remove locks the user out.
3. Refused at start: a malformed users.json (the file named), a user in sasl.users and
   query.users with two passwords.
4. A cluster of three brokers (real etcd): a user added through broker 1 logs in on
   broker 3 at once; removed, it is locked out everywhere.

usage: /usr/bin/python3 users_test.py path/to/sluice
"""

import os
import re
import shutil
import socket
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from records import ck_produce, ck_read_all, expect_offsets_in_order, expect_topic, make_records  # noqa: E402
from sluice_broker import (FAST_GROUPS, Broker, TestFailure, _frame, _Reader, _recv_exact,  # noqa: E402
                           carr, cbytes, check, cstr, kcat, wait_until)

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

MECHS = "[SCRAM-SHA-256, SCRAM-SHA-512, PLAIN]"


def ask(addr, api, body):
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=20) as s:
        s.sendall(_frame(api, 0, 9, body, flexible=True))
        size = struct.unpack(">i", _recv_exact(s, 4))[0]
        r = _Reader(_recv_exact(s, size))
    check(r.int32() == 9, "correlation id")
    r.tagged_fields()
    return r


def alter(addr, deletions=(), upsertions=()):
    """{user: (error_code, message)}; deletions (name, mech), upsertions (name, mech, iters)."""
    body = carr([cstr(n) + struct.pack(">b", m) + b"\0" for n, m in deletions])
    body += carr([cstr(n) + struct.pack(">bi", m, it) + cbytes(b"salt-salt") + cbytes(b"x" * size)
                  + b"\0" for n, m, it, size in upsertions])
    body += b"\0"
    r = ask(addr, 51, body)
    r.int32()

    def result():
        user, code, msg = r.compact_string(), r.int16(), r.compact_string()
        r.tagged_fields()
        return user, (code, msg)
    return dict(r.compact_array(result))


def describe(addr, users):
    body = (carr([cstr(u) + b"\0" for u in users]) if users is not None else b"\0") + b"\0"
    r = ask(addr, 50, body)
    r.int32()
    check(r.int16() == 0, "DescribeUserScramCredentials top-level error")
    r.compact_string()

    def result():
        user, code, msg = r.compact_string(), r.int16(), r.compact_string()

        def info():
            m, it = r.int8(), r.int32()
            r.tagged_fields()
            return m, it
        infos = r.compact_array(info)
        r.tagged_fields()
        return user, (code, msg, infos)
    return dict(r.compact_array(result))


def raw_errors(broker):
    addr = broker.bootstrap
    got = alter(addr, upsertions=[("few", 1, 1000, 32), ("many", 2, 20000, 64),
                                  ("mech", 3, 4096, 32), ("", 1, 4096, 32),
                                  ("short", 2, 4096, 32), ("ok", 2, 8192, 64)],
                deletions=[("ghost", 1)])
    want = {"few": (93, "Too few iterations"), "many": (93, "Too many iterations"),
            "mech": (33, "Unknown SCRAM mechanism"), "": (93, "Username must not be empty"),
            "short": (93, "A SCRAM-SHA-512 salted password is 64 bytes"),
            "ghost": (91, "Attempt to delete a user credential that does not exist"),
            "ok": (0, None)}
    check(got == want, f"AlterUserScramCredentials errors: {got}")
    got = alter(addr, upsertions=[("twice", 1, 4096, 32)], deletions=[("twice", 1)])
    check(got["twice"][0] == 92, f"a user altered twice: {got}")
    d = describe(addr, ["ok", "nobody", "ok2"])
    check(d["ok"] == (0, None, [(2, 8192)]), f"describe ok: {d}")
    check(d["nobody"][0] == 91, f"describe nobody: {d}")
    d = describe(addr, ["ok", "ok"])
    check(d["ok"][0] == 92, f"describe twice: {d}")
    check(set(describe(addr, None)) == {"ok"}, "describe all")
    print("PASS: AlterUserScramCredentials / DescribeUserScramCredentials errors, raw")


def user_cmd(sluice, broker, *args, password=None, admin="admin-secret"):
    env = dict(os.environ, SLUICE_SASL_PASSWORD=admin)
    cmd = [sluice, "user", *args, "--bootstrap", broker.bootstrap,
           "--security-protocol", "SASL_PLAINTEXT", "--sasl-user", "admin"]
    if password is not None:
        cmd.append("--password-stdin")
    return subprocess.run(cmd, input=(password + "\n").encode() if password else None,
                          capture_output=True, env=env, timeout=60)


def sasl(mech, user, password):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mech,
            "sasl.username": user, "sasl.password": password}


def can_login(broker, mech, user, password):
    p = kcat(broker.bootstrap, sasl(mech, user, password), ["-L", "-m", "5"], timeout=30)
    return p.returncode == 0


def pg_port(broker):
    def line():
        with open(broker.out_path) as f:
            m = re.search(r"Postgres wire protocol on 127\.0\.0\.1:(\d+)", f.read())
        return m
    return int(wait_until(line, 30, "the query server line").group(1))


def psql_as(broker, user, password):
    env = dict(os.environ, PGPASSWORD=password, PGCONNECT_TIMEOUT="10")
    return subprocess.run(["psql", f"host=127.0.0.1 port={pg_port(broker)} user={user} dbname={user}",
                           "-X", "-At", "-c", "SELECT 'hello ' || current_user"],
                          capture_output=True, env=env, timeout=60)


def http_status(broker, path, creds):
    """The status of GET `path` on the broker's HTTP port with curl (Basic `creds`)."""
    def line():
        with open(broker.out_path) as f:
            return re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", f.read())
    port = int(wait_until(line, 30, "the HTTP port line").group(1))
    cmd = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", f"http://127.0.0.1:{port}{path}"]
    if creds is not None:
        cmd += ["-u", creds]
    return int(subprocess.run(cmd, capture_output=True, timeout=30, text=True).stdout)


def single(sluice):
    cfg = FAST_GROUPS + f"""sasl:
  enabled: true
  mechanisms: {MECHS}
  users: ["admin:admin-secret"]
query:
  users: ["analyst:analyst-secret"]
http:
  auth: basic
  auth_metrics: true
"""
    broker = Broker(sluice, cfg)
    try:
        broker.start()
        p = user_cmd(sluice, broker, "list")
        check(p.returncode == 0 and b"admin" in p.stdout and b"analyst" in p.stdout,
              f"user list: {p.stdout!r} {p.stderr!r}")
        p = user_cmd(sluice, broker, "add", "bob", password="bob-1")
        check(p.returncode == 0, f"user add: {p.stderr!r}")
        p = user_cmd(sluice, broker, "add", "bob", password="bob-2")
        check(p.returncode == 1 and b"exists already" in p.stderr, f"user add twice: {p.stderr!r}")
        for mech in ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"):
            check(can_login(broker, mech, "bob", "bob-1"), f"bob with {mech}")
        check(not can_login(broker, "SCRAM-SHA-512", "bob", "bob-2"), "bob with a wrong password")
        # bob creates a topic, produces and reads back with SCRAM-SHA-512.
        conf = {"bootstrap.servers": broker.bootstrap, **sasl("SCRAM-SHA-512", "bob", "bob-1")}
        admin = AdminClient(conf)
        admin.create_topics([NewTopic("users-topic", 1, 1)])["users-topic"].result(30)
        records = make_records("users", 1, 50, 3, 1_733_000_000_000)
        expect_offsets_in_order(records, ck_produce(conf, "users-topic", records))
        expect_topic("users-topic as bob", records, ck_read_all(conf, "users-topic", 1, len(records)))
        # The query server takes the same users.
        p = psql_as(broker, "bob", "bob-1")
        check(p.returncode == 0 and p.stdout.strip() == b"hello bob", f"psql as bob: {p.stderr!r}")
        p = psql_as(broker, "analyst", "analyst-secret")
        check(p.returncode == 0, f"psql as analyst: {p.stderr!r}")
        check(can_login(broker, "SCRAM-SHA-256", "analyst", "analyst-secret"), "analyst on Kafka")
        # The HTTP port too (http.auth: basic, auth_metrics: /metrics and /healthz ask).
        check(http_status(broker, "/metrics", "bob:bob-1") == 200, "bob on the HTTP port")
        for creds in (None, "bob:wrong", "nobody:bob-1", "bob:"):
            check(http_status(broker, "/metrics", creds) == 401, f"HTTP as {creds}")
        check(http_status(broker, "/healthz", None) == 401, "/healthz without credentials")
        # passwd: the old password fails, the new one works, SHA-256 only now.
        p = user_cmd(sluice, broker, "passwd", "bob", "--mechanism", "SCRAM-SHA-256",
                     password="bob-2")
        check(p.returncode == 0, f"user passwd: {p.stderr!r}")
        check(not can_login(broker, "SCRAM-SHA-256", "bob", "bob-1"), "bob's old password")
        check(can_login(broker, "SCRAM-SHA-256", "bob", "bob-2"), "bob's new password")
        check(not can_login(broker, "SCRAM-SHA-512", "bob", "bob-2"), "bob has no SHA-512 now")
        p = user_cmd(sluice, broker, "passwd", "nobody", password="x")
        check(p.returncode == 1 and b"no user 'nobody'" in p.stderr, f"passwd nobody: {p.stderr!r}")
        p = user_cmd(sluice, broker, "list", admin="wrong")
        check(p.returncode == 1 and b"refused" in p.stderr, f"a wrong admin password: {p.stderr!r}")
        # Durable, private, no password written anywhere.
        check(broker.stop() == 0, "stop")
        path = os.path.join(broker.data_dir, "meta", "users.json")
        check(oct(os.stat(path).st_mode & 0o777) == "0o600", f"users.json mode {oct(os.stat(path).st_mode)}")
        texts = [open(path, "rb").read()]
        for f in os.listdir(broker.tmp):
            if f.startswith(("out.", "err.")):
                texts.append(open(os.path.join(broker.tmp, f), "rb").read())
        for secret in (b"bob-1", b"bob-2", b"admin-secret", b"analyst-secret"):
            check(all(secret not in t for t in texts), f"{secret!r} written to a file")
        broker.start()
        check(can_login(broker, "SCRAM-SHA-256", "bob", "bob-2"), "bob after a restart")
        p = user_cmd(sluice, broker, "remove", "bob")
        check(p.returncode == 0, f"user remove: {p.stderr!r}")
        check(not can_login(broker, "PLAIN", "bob", "bob-2"), "bob after remove")
        check(broker.stop() == 0, "stop")
        # A broken store stops the start and says which file.
        with open(path, "w") as f:
            f.write('{"version": 1, "users": {"x": {"MD5": {}}}}')
        try:
            broker.start(timeout=20)
            raise TestFailure("started with a malformed users.json")
        except TestFailure as e:
            check("users.json" in str(e) and "unknown mechanism 'MD5'" in str(e),
                  f"malformed users.json: {e}")
    except BaseException:
        print(broker.logs(), file=sys.stderr)
        raise
    finally:
        broker.cleanup()
    # Two passwords for one name.
    broker = Broker(sluice, FAST_GROUPS + 'sasl:\n  enabled: true\n  users: ["a:one"]\n'
                    'query:\n  users: ["a:two"]\n')
    try:
        try:
            broker.start(timeout=20)
            raise TestFailure("started with two passwords for one user")
        except TestFailure as e:
            check("with two passwords" in str(e), f"two passwords: {e}")
    finally:
        broker.cleanup()
    print("PASS: sluice user add/passwd/remove/list; SCRAM-SHA-512, PLAIN, psql, HTTP Basic on "
          "one store; durable and private")


def cluster(sluice):
    from cluster_controller_test import ClusterBroker, start_together
    from etcd_util import EtcdCluster, unavailable
    why = unavailable()
    if why:
        print(f"SKIP: cluster part: {why}")
        return

    class SaslBroker(ClusterBroker):
        def args(self, etcd=True):
            a = super().args(etcd)
            with open(os.path.join(self.tmp, "sluice.yaml"), "a") as f:
                f.write(f'sasl:\n  enabled: true\n  mechanisms: {MECHS}\n'
                        '  users: ["admin:admin-secret"]\n  inter_broker_user: admin\n')
            return a

    with EtcdCluster() as etcd:
        brokers = [SaslBroker(sluice, n, etcd.endpoints_arg()) for n in (1, 2, 3)]
        try:
            start_together(brokers)
            p = user_cmd(sluice, brokers[0], "add", "carol", password="carol-pw")
            check(p.returncode == 0, f"user add on broker 1: {p.stderr!r}")
            wait_until(lambda: can_login(brokers[2], "SCRAM-SHA-512", "carol", "carol-pw"), 20,
                       "carol logging in on broker 3")
            # Reads are each broker's copy, brought up to date by etcd's watch (milliseconds).
            for b in brokers[1:]:
                wait_until(lambda: b"carol" in user_cmd(sluice, b, "list").stdout, 20,
                           f"carol listed by broker {b.node}")
            p = user_cmd(sluice, brokers[1], "remove", "carol")
            check(p.returncode == 0, f"user remove on broker 2: {p.stderr!r}")
            wait_until(lambda: not can_login(brokers[0], "PLAIN", "carol", "carol-pw"), 20,
                       "carol locked out of broker 1")
            print("PASS: one user store across a cluster (etcd)")
        except BaseException:
            for b in brokers:
                print(b.logs(), file=sys.stderr)
            raise
        finally:
            for b in brokers:
                b.cleanup()


def main():
    sluice = os.path.abspath(sys.argv[1])
    try:
        broker = Broker(sluice)
        try:
            broker.start()
            raw_errors(broker)
        finally:
            broker.cleanup()
        single(sluice)
        cluster(sluice)
    except TestFailure as e:
        print(f"FAIL: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
