#!/usr/bin/python3
"""`sluice acl add|remove|list` (docs/design/0019-security.md, phase E) against a broker
with SASL and the authorizer (admin a super user), checked with a real client
(confluent-kafka) producing and consuming as alice:

1. alice can neither produce nor consume; `sluice acl add --producer` and `--consumer`
   (kafka-acls.sh's shorthands) let her, `sluice acl list` shows the bindings they made
   (filtered by topic, principal, pattern type MATCH), a PREFIXED ACL covers a new topic,
   a DENY wins, `sluice acl remove` takes exactly what it names and alice is refused
   again; the broker logs the first denial ("authorizer: User:alice from ... denied DESCRIBE
   on TOPIC orders");
2. bad input, each refused with its reason before anything is sent or by the broker:
   `user:alice` (a lowercase type would never match), a network as a host, an unknown
   operation, an operation the resource does not take, --consumer without --group, no
   principal, no resource, a remove that matches nothing, a user who is not a super user
   (CLUSTER_AUTHORIZATION_FAILED).

usage: /usr/bin/python3 acl_cli_test.py path/to/sluice
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sluice_broker import FAST_GROUPS, Broker, TestFailure, check  # noqa: E402

from acls_test import ck_consume, ck_produce_one  # noqa: E402
from confluent_kafka import KafkaError  # noqa: E402

USERS = ("admin", "alice", "bob")


def config():
    users = ", ".join(f'"{u}:{u}-secret"' for u in USERS)
    return FAST_GROUPS + f"""topics:
  auto_create: true
sasl:
  enabled: true
  mechanisms: [SCRAM-SHA-256]
  users: [{users}]
authorization:
  enabled: true
  super_users: ["User:admin"]
"""


def acl(sluice, addr, *args, user="admin"):
    env = dict(os.environ, SLUICE_SASL_PASSWORD=f"{user}-secret")
    p = subprocess.run([sluice, "acl", *args, "--bootstrap", addr, "--sasl-user", user],
                       capture_output=True, text=True, env=env, timeout=60)
    return p.returncode, p.stdout, p.stderr


def ok(sluice, addr, *args):
    rc, out, err = acl(sluice, addr, *args)
    check(rc == 0, f"sluice acl {' '.join(args)}: rc {rc}: {err}")
    return out


def refused(sluice, addr, args, needle, user="admin"):
    rc, out, err = acl(sluice, addr, *args, user=user)
    check(rc != 0, f"sluice acl {' '.join(args)} was not refused: {out}")
    check(needle in err, f"sluice acl {' '.join(args)}: want {needle!r} in {err!r}")
    print(f"ok: refused: sluice acl {' '.join(args)}: {err.strip()}")


def produce(addr, user, topic, value):
    return ck_produce_one(addr, user, topic, value, auto_create=True)


def consume(addr, user, group, topic, want):
    return ck_consume(addr, user, group, topic, want, commit=True)


def listing(sluice, addr, *args):
    """`sluice acl list`'s rows as tuples (header checked)."""
    out = ok(sluice, addr, "list", *args).splitlines()
    check(out and out[0].split() == ["RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST",
                                     "OPERATION", "PERMISSION"], f"list header: {out[:1]}")
    return {tuple(line.split()) for line in out[1:]}


def body(sluice, broker):
    addr = broker.bootstrap
    check(produce(addr, "admin", "orders", b"first") is None, "admin (super user) produces")
    check(produce(addr, "alice", "orders", b"x") == KafkaError.TOPIC_AUTHORIZATION_FAILED,
          "alice produces before any ACL")
    # The broker says why, as Kafka's authorizer log does.
    check("authorizer: User:alice from 127.0.0.1 denied DESCRIBE on TOPIC orders" in broker.logs(),
          "no denial line in the broker's log")

    out = ok(sluice, addr, "add", "--allow-principal", "User:alice", "--producer", "--topic",
             "orders")
    check(out.count("added: ALLOW User:alice from * ") == 3 and "WRITE on TOPIC orders" in out,
          f"add --producer: {out}")
    check(produce(addr, "alice", "orders", b"from alice") is None, "alice produces after --producer")
    values, error = consume(addr, "alice", "alice-g", "orders", 2)
    check(not values and error in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                   KafkaError.GROUP_AUTHORIZATION_FAILED),
          f"alice reads without READ: {values} {error}")

    ok(sluice, addr, "add", "--allow-principal", "User:alice", "--consumer", "--topic", "orders",
       "--group", "alice-g")
    values, error = consume(addr, "alice", "alice-g", "orders", 2)
    check(error is None and values == [b"first", b"from alice"],
          f"alice reads and commits after --consumer: {values} {error}")

    rows = listing(sluice, addr, "--topic", "orders")
    want = {("TOPIC", "orders", "LITERAL", "User:alice", "*", op, "ALLOW")
            for op in ("WRITE", "DESCRIBE", "CREATE", "READ")}
    check(rows == want, f"list --topic orders: {sorted(rows)}")
    rows = listing(sluice, addr, "--principal", "User:alice")
    check(rows == want | {("GROUP", "alice-g", "LITERAL", "User:alice", "*", "READ", "ALLOW")},
          f"list --principal User:alice: {sorted(rows)}")

    # PREFIXED, with Kafka's CamelCase names; MATCH lists what applies to one topic.
    ok(sluice, addr, "add", "--allow-principal", "User:alice", "--operation", "Write",
       "--operation", "describe", "--operation", "CREATE", "--topic", "logs-",
       "--resource-pattern-type", "prefixed")  # CREATE: the topic is auto-created
    check(produce(addr, "alice", "logs-app", b"prefixed") is None,
          "alice produces to logs-app under the prefixed ACL")
    rows = listing(sluice, addr, "--topic", "logs-app", "--resource-pattern-type", "match")
    check({r[5] for r in rows} == {"WRITE", "DESCRIBE", "CREATE"} and
          all(r[2] == "PREFIXED" for r in rows),
          f"list --resource-pattern-type match for logs-app: {sorted(rows)}")

    # DENY wins over the ALLOW.
    ok(sluice, addr, "add", "--deny-principal", "User:alice", "--operation", "WRITE", "--topic",
       "orders")
    check(produce(addr, "alice", "orders", b"denied") == KafkaError.TOPIC_AUTHORIZATION_FAILED,
          "alice produces under a DENY")
    out = ok(sluice, addr, "remove", "--deny-principal", "User:alice", "--operation", "WRITE",
             "--topic", "orders")
    check(out.strip() == "removed: DENY User:alice from * WRITE on TOPIC orders",
          f"remove the DENY: {out}")
    check(produce(addr, "alice", "orders", b"allowed again") is None, "alice produces again")

    # remove takes a principal's host as * unless told: another host's binding stays.
    ok(sluice, addr, "add", "--allow-principal", "User:alice", "--allow-host", "10.0.0.1",
       "--operation", "READ", "--topic", "orders")
    out = ok(sluice, addr, "remove", "--allow-principal", "User:alice", "--operation", "READ",
             "--topic", "orders")
    check(out.strip() == "removed: ALLOW User:alice from * READ on TOPIC orders",
          f"remove without --allow-host: {out}")
    rows = listing(sluice, addr, "--topic", "orders", "--principal", "User:alice")
    check(("TOPIC", "orders", "LITERAL", "User:alice", "10.0.0.1", "READ", "ALLOW") in rows,
          f"the 10.0.0.1 binding after remove: {sorted(rows)}")
    out = ok(sluice, addr, "remove", "--allow-principal", "User:alice", "--allow-host", "10.0.0.1",
             "--topic", "orders")
    check(out.strip() == "removed: ALLOW User:alice from 10.0.0.1 READ on TOPIC orders",
          f"remove --allow-host 10.0.0.1: {out}")
    ok(sluice, addr, "add", "--allow-principal", "User:alice", "--operation", "READ", "--topic",
       "orders")

    # remove --producer without a principal takes ALLOW bindings only, never a DENY.
    ok(sluice, addr, "add", "--deny-principal", "User:bob", "--operation", "WRITE", "--topic",
       "audit")
    ok(sluice, addr, "add", "--allow-principal", "User:bob", "--producer", "--topic", "audit")
    out = ok(sluice, addr, "remove", "--producer", "--topic", "audit")
    check("DENY" not in out and out.count("User:bob") == 3, f"remove --producer: {out}")
    out = ok(sluice, addr, "remove", "--deny-principal", "User:bob", "--topic", "audit")
    check(out.strip() == "removed: DENY User:bob from * WRITE on TOPIC audit",
          f"the DENY outlived remove --producer: {out}")

    # remove --producer takes the three bindings it made, nothing else.
    out = ok(sluice, addr, "remove", "--allow-principal", "User:alice", "--producer", "--topic",
             "orders")
    check(len(out.splitlines()) == 3, f"remove --producer: {out}")
    check(produce(addr, "alice", "orders", b"x") == KafkaError.TOPIC_AUTHORIZATION_FAILED,
          "alice produces after remove --producer")
    # Bindings are a set: the DESCRIBE both shorthands grant is one binding, and it went.
    rows = listing(sluice, addr, "--topic", "orders")
    check(rows == {("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW")},
          f"what --consumer left on orders: {sorted(rows)}")
    # A principal's every binding: READ on orders and alice-g, the three prefixed ones.
    out = ok(sluice, addr, "remove", "--allow-principal", "User:alice")
    check(len(out.splitlines()) == 5, f"remove every ALLOW of User:alice: {out}")
    check(listing(sluice, addr) == set(), "no ACL left")
    print("ok: add --producer/--consumer/--operation, list filters, prefixed, DENY, remove")

    # Bad input.
    refused(sluice, addr, ["add", "--allow-principal", "user:alice", "--operation", "READ",
                           "--topic", "t"], "case-sensitive")
    refused(sluice, addr, ["add", "--allow-principal", "User:alice", "--allow-host", "10.0.0.0/8",
                           "--operation", "READ", "--topic", "t"], "not networks")
    refused(sluice, addr, ["add", "--allow-principal", "User:alice", "--operation", "SLURP",
                           "--topic", "t"], "is not one of")
    refused(sluice, addr, ["add", "--allow-principal", "User:alice", "--operation", "READ",
                           "--cluster"], "not READ")
    refused(sluice, addr, ["add", "--allow-principal", "User:alice", "--consumer", "--topic", "t"],
            "--consumer needs --group")
    refused(sluice, addr, ["add", "--operation", "READ", "--topic", "t"], "name who")
    refused(sluice, addr, ["add", "--allow-principal", "User:alice", "--operation", "READ"],
            "name the resource")
    refused(sluice, addr, ["remove", "--topic", "nothing-here"], "no ACL matches")
    refused(sluice, addr, ["list"], "error 31", user="bob")  # CLUSTER_AUTHORIZATION_FAILED
    refused(sluice, addr, ["add", "--allow-principal", "User:bob", "--operation", "READ",
                           "--topic", "t"], "error 31", user="bob")


def main():
    sluice = os.path.abspath(sys.argv[1])
    broker = Broker(sluice, config())
    try:
        broker.start()
        body(sluice, broker)
        rc = broker.stop()
        check(rc == 0, f"sluice serve exited {rc} after SIGTERM")
    except Exception as e:
        print(broker.logs(), file=sys.stderr)
        if not isinstance(e, TestFailure):
            import traceback
            traceback.print_exc()
        print(f"FAIL: {e}")
        return 1
    finally:
        broker.cleanup()
    print("PASS: acl_cli_test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
