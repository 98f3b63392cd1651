#!/usr/bin/python3
"""Kafka's ACLs (docs/design/0019-security.md, phase E) against real clients: every API
with an allowed and a denied principal and Kafka's error on denial; PREFIXED and DENY
ACLs; implied operations; super users; User:ANONYMOUS; the ACL APIs themselves.

One broker for the matrix: a PLAINTEXT and a SASL_PLAINTEXT listener (127.0.0.1, ports
the kernel picks), SASL users admin, alice, bob and carol, authorization.enabled with
User:admin a super user, topics.auto_create on.

1. acls_kafkajs_matrix.js (KafkaJS): the super user makes topics and the ACLs, then each
   principal tries Metadata, CreateTopics, CreatePartitions, DeleteRecords, DeleteTopics,
   ListOffsets, Describe/AlterConfigs, Produce (plain, idempotent, transactional),
   AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, groups (Join/Sync/Heartbeat/Fetch/
   OffsetCommit/OffsetFetch/ListGroups/DescribeGroups/DeleteGroups), the ACL APIs.
2. kafka-python's admin: DescribeAcls filters (ANY, MATCH, LITERAL, PREFIXED, principal,
   host, operation, permission), CreateAcls with invalid bindings beside a good one
   (INVALID_REQUEST for each invalid one only), DeleteAcls answering the bindings it
   matched, a non-super user refused (CLUSTER_AUTHORIZATION_FAILED).
3. Raw requests for what the clients hide behind other calls: FindCoordinator (group and
   transactional id), ListOffsets, Join/Heartbeat/Sync/LeaveGroup, OffsetFetch,
   OffsetCommit, DescribeGroups per group, AddPartitionsToTxn/AddOffsetsToTxn/
   TxnOffsetCommit/EndTxn, InitProducerId, IncrementalAlterConfigs, DescribeCluster's
   authorized operations, Describe/AlterUserScramCredentials, Metadata v12 of
   User:ANONYMOUS.
4. The ACLs are durable: SIGKILL right after a change, acls.json (mode 0600) read back at
   the restart (super_users now given as Kafka's "User:admin;User:ops"); confluent-kafka
   (librdkafka) producing and consuming as alice, bob and carol after it.
5. Refused: a corrupt acls.json stops the start naming the file; authorization.super_users
   or allow_everyone_if_no_acl_found without authorization.enabled; without an authorizer
   the ACL APIs answer SECURITY_DISABLED.

usage: /usr/bin/python3 acls_test.py path/to/sluice
"""

import logging
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sluice_broker import (FAST_GROUPS, Broker, TestFailure, _frame, _Reader, _recv_exact,  # noqa: E402
                           carr, cbytes, check, cstr, raw_metadata)

import kafka.errors as Errors  # noqa: E402
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType,  # noqa: E402
                         ACLResourcePatternType, KafkaAdminClient, ResourcePattern,
                         ResourcePatternFilter, ResourceType)
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402

USERS = ("admin", "alice", "bob", "carol")


def config(super_users='["User:admin"]'):
    users = ", ".join(f'"{u}:{u}-secret"' for u in USERS)
    return FAST_GROUPS + f"""topics:
  auto_create: true
kafka:
  listeners: ["PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"]
sasl:
  enabled: true
  mechanisms: [PLAIN, SCRAM-SHA-256]
  users: [{users}]
authorization:
  enabled: true
  super_users: {super_users}
"""


# The bindings acls_kafkajs_matrix.js leaves (it deletes bob-hb's while testing a running
# member): (resource type, name, pattern, principal, host, operation, permission).
MATRIX_ACLS = {
    ("TOPIC", "pay-", "PREFIXED", "User:alice", "*", "ALL", "ALLOW"),
    ("GROUP", "pay-", "PREFIXED", "User:alice", "*", "ALL", "ALLOW"),
    ("TRANSACTIONAL_ID", "alice-tx", "LITERAL", "User:alice", "*", "WRITE", "ALLOW"),
    ("CLUSTER", "kafka-cluster", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"),
    ("TOPIC", "hosty", "LITERAL", "User:alice", "10.1.2.3", "READ", "ALLOW"),
    ("TOPIC", "hosty", "LITERAL", "User:alice", "127.0.0.1", "DESCRIBE", "ALLOW"),
    ("TOPIC", "cfg", "LITERAL", "User:alice", "*", "ALTER_CONFIGS", "ALLOW"),
    ("TOPIC", "shared", "LITERAL", "User:bob", "*", "READ", "ALLOW"),
    ("TOPIC", "bob-desc", "LITERAL", "User:bob", "*", "DESCRIBE", "ALLOW"),
    ("TOPIC", "keep", "LITERAL", "User:bob", "*", "READ", "ALLOW"),
    ("GROUP", "bob-group", "LITERAL", "User:bob", "*", "READ", "ALLOW"),
    ("GROUP", "bob-view", "LITERAL", "User:bob", "*", "DESCRIBE", "ALLOW"),
    ("TRANSACTIONAL_ID", "bob-tx", "LITERAL", "User:bob", "*", "DESCRIBE", "ALLOW"),
    ("TOPIC", "*", "LITERAL", "User:carol", "*", "READ", "ALLOW"),
    ("TOPIC", "secret", "LITERAL", "User:carol", "*", "READ", "DENY"),
    ("GROUP", "carol-", "PREFIXED", "User:carol", "*", "READ", "ALLOW"),
    ("GROUP", "carol-blocked", "LITERAL", "User:carol", "*", "READ", "DENY"),
    ("TOPIC", "public", "LITERAL", "User:*", "*", "DESCRIBE", "ALLOW"),
    ("TOPIC", "anon-topic", "LITERAL", "User:ANONYMOUS", "*", "WRITE", "ALLOW"),
}

# Kafka's error codes.
NONE, UNKNOWN_MEMBER, TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, TXN_AUTH = 0, 25, 29, 30, 31, 53
# AclOperation codes of what Kafka lists for the CLUSTER resource: CREATE, ALTER, DESCRIBE,
# CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE.
CLUSTER_OPS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
DESCRIBE_OP = 1 << 8


def listener_ports(broker):
    """{name: "127.0.0.1:port"} from the banner's "Kafka listeners:" line."""
    with open(broker.out_path) as f:
        text = f.read()
    m = re.search(r"^sluice: Kafka listeners:(.*)$", text, re.M)
    check(m is not None, f"no listeners line in: {text}")
    addrs = {name: f"127.0.0.1:{port}"
             for name, port in re.findall(r"(\w+) 127\.0\.0\.1:(\d+) ", m.group(1))}
    check(set(addrs) == {"PLAINTEXT", "SASL_PLAINTEXT"}, f"listeners: {m.group(1)}")
    return addrs["SASL_PLAINTEXT"], addrs["PLAINTEXT"]


# --- raw requests ------------------------------------------------------------------------

def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def string(s):
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def array(items):
    return i32(len(items)) + b"".join(items)


def r_i64(r):
    return struct.unpack(">q", r.take(8))[0]


def r_string(r):
    n = r.int16()
    return None if n < 0 else r.take(n).decode()


def r_array(r, item):
    n = r.int32()
    return [] if n < 0 else [item() for _ in range(n)]


class Conn:
    """One connection to the broker; with a user, authenticated with SASL PLAIN
    (SaslHandshake v1, SaslAuthenticate v0) before anything else."""

    def __init__(self, addr, user=None):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=20)
        self.cid = 0
        self.user = user or "ANONYMOUS"
        if user:
            r = self.call(17, 1, string("PLAIN"))
            check(r.int16() == 0, f"SaslHandshake PLAIN as {user}")
            token = b"\0" + user.encode() + b"\0" + f"{user}-secret".encode()
            r = self.call(36, 0, i32(len(token)) + token)
            check(r.int16() == 0, f"SaslAuthenticate as {user}")

    def call(self, api, version, body, flexible=False):
        self.cid += 1
        self.sock.sendall(_frame(api, version, self.cid, body, flexible))
        size = struct.unpack(">i", _recv_exact(self.sock, 4))[0]
        r = _Reader(_recv_exact(self.sock, size))
        check(r.int32() == self.cid, "correlation id")
        if flexible:
            r.tagged_fields()
        return r

    def close(self):
        self.sock.close()

    # Each returns what its check needs, decoded.

    def list_offsets(self, topics):
        """ListOffsets v1 (latest): {(topic, partition): error}."""
        body = i32(-1) + array([string(t) + array([i32(p) + i64(-1) for p in ps])
                                for t, ps in topics.items()])
        r = self.call(2, 1, body)
        out = {}
        for _ in range(r.int32()):
            t = r_string(r)
            for _ in range(r.int32()):
                p, err = r.int32(), r.int16()
                r_i64(r), r_i64(r)
                out[(t, p)] = err
        return out

    def find_coordinator(self, key, key_type):
        """FindCoordinator v1: the error."""
        r = self.call(10, 1, string(key) + i8(key_type))
        r.int32()
        return r.int16()

    def describe_groups(self, groups):
        """DescribeGroups v0: {group: error}."""
        r = self.call(15, 0, array([string(g) for g in groups]))
        out = {}
        for _ in range(r.int32()):
            err, group = r.int16(), r_string(r)
            r_string(r), r_string(r), r_string(r)  # state, protocol type, protocol
            for _ in range(r.int32()):  # members
                r_string(r), r_string(r), r_string(r)
                r.take(r.int32()), r.take(r.int32())
            out[group] = err
        return out

    def group_call(self, api, group, member="acls-test-member"):
        """JoinGroup, Heartbeat, SyncGroup or LeaveGroup v0 for `group` (generation 1 and
        a member the group does not have): the error."""
        if api == "JoinGroup":
            body = string(group) + i32(10000) + string("") + string("consumer") + array(
                [string("range") + i32(0)])
            r = self.call(11, 0, body)
        elif api == "Heartbeat":
            r = self.call(12, 0, string(group) + i32(1) + string(member))
        elif api == "SyncGroup":
            r = self.call(14, 0, string(group) + i32(1) + string(member) + array([]))
        else:
            r = self.call(13, 0, string(group) + string(member))
        return r.int16()

    def offset_fetch(self, group, topics):
        """OffsetFetch v2: (group error, {(topic, partition): (offset, error)})."""
        body = string(group) + array([string(t) + array([i32(p) for p in ps])
                                      for t, ps in topics.items()])
        r = self.call(9, 2, body)
        parts = {}
        for _ in range(r.int32()):
            t = r_string(r)
            for _ in range(r.int32()):
                p, offset = r.int32(), r_i64(r)
                r_string(r)
                parts[(t, p)] = (offset, r.int16())
        return r.int16(), parts

    def offset_commit(self, group, offsets):
        """OffsetCommit v2 outside any generation: {(topic, partition): error}."""
        by_topic = {}
        for (t, p), o in offsets.items():
            by_topic.setdefault(t, []).append(i32(p) + i64(o) + string(""))
        body = string(group) + i32(-1) + string("") + i64(-1) + array(
            [string(t) + array(ps) for t, ps in by_topic.items()])
        r = self.call(8, 2, body)
        out = {}
        for _ in range(r.int32()):
            t = r_string(r)
            for _ in range(r.int32()):
                p = r.int32()
                out[(t, p)] = r.int16()
        return out

    def init_producer_id(self, txn_id):
        """InitProducerId v0: the error."""
        r = self.call(22, 0, string(txn_id) + i32(60000))
        r.int32()
        return r.int16()

    def add_partitions_to_txn(self, txn_id, topics):
        """AddPartitionsToTxn v0 (producer 0, epoch 0): {(topic, partition): error}."""
        body = string(txn_id) + i64(0) + i16(0) + array(
            [string(t) + array([i32(p) for p in ps]) for t, ps in topics.items()])
        r = self.call(24, 0, body)
        r.int32()
        out = {}
        for _ in range(r.int32()):
            t = r_string(r)
            for _ in range(r.int32()):
                p = r.int32()
                out[(t, p)] = r.int16()
        return out

    def add_offsets_to_txn(self, txn_id, group):
        """AddOffsetsToTxn v0 (producer 0, epoch 0): the error."""
        r = self.call(25, 0, string(txn_id) + i64(0) + i16(0) + string(group))
        r.int32()
        return r.int16()

    def txn_offset_commit(self, txn_id, group, offsets):
        """TxnOffsetCommit v0 (producer 0, epoch 0): {(topic, partition): error}."""
        by_topic = {}
        for (t, p), o in offsets.items():
            by_topic.setdefault(t, []).append(i32(p) + i64(o) + string(None))
        body = string(txn_id) + string(group) + i64(0) + i16(0) + array(
            [string(t) + array(ps) for t, ps in by_topic.items()])
        r = self.call(28, 0, body)
        r.int32()
        out = {}
        for _ in range(r.int32()):
            t = r_string(r)
            for _ in range(r.int32()):
                p = r.int32()
                out[(t, p)] = r.int16()
        return out

    def end_txn(self, txn_id, commit):
        """EndTxn v0 (producer 0, epoch 0): the error."""
        r = self.call(26, 0, string(txn_id) + i64(0) + i16(0) + i8(1 if commit else 0))
        r.int32()
        return r.int16()

    def incremental_alter_configs(self, resources):
        """IncrementalAlterConfigs v0, SET of each (type, name, key, value):
        {(type, name): error}."""
        body = array([i8(t) + string(n) + array([string(k) + i8(0) + string(v)])
                      for t, n, k, v in resources]) + i8(0)
        r = self.call(44, 0, body)
        r.int32()
        out = {}
        for _ in range(r.int32()):
            err = r.int16()
            r_string(r)
            t, n = r.int8(), r_string(r)
            out[(t, n)] = err
        return out

    def describe_cluster_operations(self):
        """DescribeCluster v0 asking for the cluster's authorized operations: (error, ops)."""
        r = self.call(60, 0, i8(1) + b"\0", flexible=True)
        r.int32()
        err = r.int16()
        r.compact_string(), r.compact_string()
        r.int32()

        def broker():
            r.int32(), r.compact_string(), r.int32(), r.compact_string()
            r.tagged_fields()
        r.compact_array(broker)
        return err, r.int32()

    def describe_scram(self):
        """DescribeUserScramCredentials v0 of every user: (error, [users])."""
        r = self.call(50, 0, b"\0" + b"\0", flexible=True)
        r.int32()
        err = r.int16()
        r.compact_string()

        def result():
            user = r.compact_string()
            r.int16(), r.compact_string()

            def info():
                r.int8(), r.int32()
                r.tagged_fields()
            r.compact_array(info)
            r.tagged_fields()
            return user
        return err, r.compact_array(result) or []

    def alter_scram(self, user):
        """AlterUserScramCredentials v0 upserting `user` (SCRAM-SHA-256, 4096 iterations):
        {user: error}."""
        body = carr([]) + carr([cstr(user) + i8(1) + i32(4096) + cbytes(b"salt-salt")
                                + cbytes(b"x" * 32) + b"\0"]) + b"\0"
        r = self.call(51, 0, body, flexible=True)
        r.int32()

        def result():
            u, err = r.compact_string(), r.int16()
            r.compact_string()
            r.tagged_fields()
            return u, err
        return dict(r.compact_array(result) or [])


# Checks that fail are reported and the run goes on (most do not depend on each other),
# so that one run shows every check that fails; main() fails the test at the end.
FAILURES = []


def expect(got, want, what):
    if got == want:
        print(f"ok: {what}")
    else:
        FAILURES.append(what)
        print(f"FAIL: {what}: {got!r}, not {want!r}")


def raw_checks(sasl, plain):
    alice, bob, carol, admin = (Conn(sasl, u) for u in ("alice", "bob", "carol", "admin"))
    anon = Conn(plain)
    try:
        # ListOffsets: DESCRIBE on the topic.
        expect(alice.list_offsets({"pay-1": [0], "other": [0]}),
               {("pay-1", 0): NONE, ("other", 0): TOPIC_AUTH}, "ListOffsets as alice: pay-1, other")
        expect(carol.list_offsets({"secret": [0]}), {("secret", 0): NONE},
               "ListOffsets as carol: secret (DENY READ leaves DESCRIBE implied by READ on *)")
        expect(bob.list_offsets({"shared": [0]}), {("shared", 0): NONE},
               "ListOffsets as bob: shared (READ implies DESCRIBE)")
        expect(anon.list_offsets({"pay-1": [0]}), {("pay-1", 0): TOPIC_AUTH},
               "ListOffsets as User:ANONYMOUS: pay-1")
        # FindCoordinator: DESCRIBE on the group or the transactional id.
        expect(bob.find_coordinator("pay-group", 0), GROUP_AUTH, "FindCoordinator as bob: pay-group")
        expect(bob.find_coordinator("bob-view", 0), NONE, "FindCoordinator as bob: bob-view (DESCRIBE)")
        expect(alice.find_coordinator("other-tx", 1), TXN_AUTH, "FindCoordinator as alice: transactional id other-tx")
        expect(alice.find_coordinator("alice-tx", 1), NONE,
               "FindCoordinator as alice: alice-tx (WRITE implies DESCRIBE)")
        expect(bob.find_coordinator("bob-tx", 1), NONE, "FindCoordinator as bob: bob-tx (DESCRIBE)")
        # DescribeGroups: per group.
        expect(alice.describe_groups(["bob-group", "pay-txgroup"]),
               {"bob-group": GROUP_AUTH, "pay-txgroup": NONE}, "DescribeGroups as alice: bob-group, pay-txgroup")
        # JoinGroup, Heartbeat, SyncGroup, LeaveGroup: READ on the group, checked first (with
        # it, a member the group does not have is UNKNOWN_MEMBER_ID).
        for api in ("Heartbeat", "SyncGroup", "LeaveGroup"):
            expect(bob.group_call(api, "bob-group"), UNKNOWN_MEMBER, f"{api} as bob: bob-group (READ)")
        for api in ("JoinGroup", "Heartbeat", "SyncGroup", "LeaveGroup"):
            expect(bob.group_call(api, "bob-view"), GROUP_AUTH, f"{api} as bob: bob-view (DESCRIBE, no READ)")
            expect(carol.group_call(api, "carol-blocked"), GROUP_AUTH,
                   f"{api} as carol: carol-blocked (DENY READ beats the PREFIXED ALLOW)")
            expect(anon.group_call(api, "bob-group"), GROUP_AUTH, f"{api} as User:ANONYMOUS: bob-group")
        # OffsetFetch: DESCRIBE on the group, DESCRIBE on each topic.
        expect(bob.offset_fetch("bob-group", {"shared": [0], "pay-1": [0]}),
               (NONE, {("shared", 0): (3, NONE), ("pay-1", 0): (-1, TOPIC_AUTH)}),
               "OffsetFetch as bob: bob-group, shared and pay-1")
        expect(alice.offset_fetch("bob-group", {"pay-1": [0]})[0], GROUP_AUTH, "OffsetFetch as alice: bob-group")
        # OffsetCommit: READ on the group (every partition refused), READ on each topic.
        expect(bob.offset_commit("bob-view", {("shared", 0): 1}), {("shared", 0): GROUP_AUTH},
               "OffsetCommit as bob: bob-view (DESCRIBE, no READ)")
        expect(bob.offset_commit("bob-group", {("shared", 0): 2, ("bob-desc", 0): 1}),
               {("shared", 0): NONE, ("bob-desc", 0): TOPIC_AUTH},
               "OffsetCommit as bob: bob-group, shared and bob-desc (DESCRIBE, no READ)")
        expect(bob.offset_fetch("bob-group", {"shared": [0]}), (NONE, {("shared", 0): (2, NONE)}),
               "bob-group's offset after the commits")
        # Transactions: WRITE on the transactional id first, then the group or the topics.
        expect(bob.init_producer_id("bob-tx"), TXN_AUTH, "InitProducerId as bob: bob-tx (DESCRIBE, no WRITE)")
        expect(bob.init_producer_id(None), CLUSTER_AUTH, "InitProducerId as bob: idempotent (no WRITE anywhere)")
        expect(anon.init_producer_id(None), NONE, "InitProducerId as User:ANONYMOUS: idempotent (WRITE on anon-topic)")
        expect(bob.add_partitions_to_txn("bob-tx", {"shared": [0]}), {("shared", 0): TXN_AUTH},
               "AddPartitionsToTxn as bob: bob-tx")
        expect(bob.add_offsets_to_txn("bob-tx", "bob-group"), TXN_AUTH, "AddOffsetsToTxn as bob: bob-tx")
        expect(alice.add_offsets_to_txn("alice-tx", "bob-group"), GROUP_AUTH, "AddOffsetsToTxn as alice: bob-group")
        expect(bob.txn_offset_commit("bob-tx", "bob-group", {("shared", 0): 1}), {("shared", 0): TXN_AUTH},
               "TxnOffsetCommit as bob: bob-tx")
        expect(alice.txn_offset_commit("alice-tx", "bob-group", {("pay-1", 0): 1}), {("pay-1", 0): GROUP_AUTH},
               "TxnOffsetCommit as alice: alice-tx, bob-group")
        expect(bob.end_txn("bob-tx", True), TXN_AUTH, "EndTxn as bob: bob-tx")
        expect(alice.end_txn("other-tx", False), TXN_AUTH, "EndTxn as alice: other-tx")
        # IncrementalAlterConfigs: ALTER_CONFIGS on the topic, on the cluster for a broker.
        expect(alice.incremental_alter_configs([(2, "cfg", "retention.ms", "7200000"),
                                                (2, "other", "retention.ms", "7200000"),
                                                (4, "1", "log.retention.ms", "7200000")]),
               {(2, "cfg"): NONE, (2, "other"): TOPIC_AUTH, (4, "1"): CLUSTER_AUTH},
               "IncrementalAlterConfigs as alice: cfg, other, broker 1")
        expect(bob.incremental_alter_configs([(2, "shared", "retention.ms", "1000")]),
               {(2, "shared"): TOPIC_AUTH}, "IncrementalAlterConfigs as bob: shared")
        # DescribeCluster: never an error; the cluster's operations only with DESCRIBE on it.
        expect(admin.describe_cluster_operations(), (NONE, CLUSTER_OPS),
               "DescribeCluster as admin: every cluster operation")
        expect(alice.describe_cluster_operations(), (NONE, DESCRIBE_OP), "DescribeCluster as alice: DESCRIBE")
        expect(bob.describe_cluster_operations(), (NONE, 0), "DescribeCluster as bob: none")
        # SCRAM credentials: DESCRIBE / ALTER on the cluster.
        err, users = alice.describe_scram()
        expect((err, sorted(users)), (NONE, sorted(USERS)), "DescribeUserScramCredentials as alice (DESCRIBE)")
        expect(bob.describe_scram(), (CLUSTER_AUTH, []), "DescribeUserScramCredentials as bob")
        # (dave: a user nobody logs in as, so that a wrongly allowed change spoils nothing)
        expect(alice.alter_scram("dave"), {"dave": CLUSTER_AUTH}, "AlterUserScramCredentials as alice (no ALTER)")
        expect(bob.alter_scram("dave"), {"dave": CLUSTER_AUTH}, "AlterUserScramCredentials as bob")
        expect(admin.alter_scram("dave"), {"dave": NONE}, "AlterUserScramCredentials as admin")
    finally:
        for c in (alice, bob, carol, admin, anon):
            c.close()
    # Metadata v12 of every topic as User:ANONYMOUS: only what it may DESCRIBE.
    topics = raw_metadata(plain)["topics"]
    expect(sorted(topics), ["anon-topic", "public"], "Metadata v12 of every topic as User:ANONYMOUS")


# --- kafka-python's admin: the ACL APIs ------------------------------------------------------

def kp_admin(addr, user):
    return KafkaAdminClient(bootstrap_servers=addr, security_protocol="SASL_PLAINTEXT",
                            sasl_mechanism="PLAIN", sasl_plain_username=user,
                            sasl_plain_password=f"{user}-secret", request_timeout_ms=20000,
                            client_id=f"acls-test-{user}")


def as_tuple(a):
    return (a.resource_pattern.resource_type.name, a.resource_pattern.resource_name,
            a.resource_pattern.pattern_type.name, a.principal, a.host, a.operation.name,
            a.permission_type.name)


def kp_filter(rtype="ANY", name=None, pattern="ANY", principal=None, host=None, op="ANY",
              perm="ANY"):
    return ACLFilter(principal=principal, host=host, operation=ACLOperation[op],
                     permission_type=ACLPermissionType[perm],
                     resource_pattern=ResourcePatternFilter(ResourceType[rtype], name,
                                                            ACLResourcePatternType[pattern]))


def kp_acl(rtype, name, pattern, principal, host, op, perm):
    return ACL(principal=principal, host=host, operation=ACLOperation[op],
               permission_type=ACLPermissionType[perm],
               resource_pattern=ResourcePattern(ResourceType[rtype], name,
                                                ACLResourcePatternType[pattern]))


def described(admin, f):
    acls, error = admin.describe_acls(f)
    check(error is Errors.NoError, f"describe_acls: {error}")
    return {as_tuple(a) for a in acls}


def every_acl(admin):
    return described(admin, kp_filter())


def acl_apis(sasl):
    admin = kp_admin(sasl, "admin")
    try:
        expect(every_acl(admin), MATRIX_ACLS, "DescribeAcls ANY: the matrix's bindings")
        cases = [
            ("MATCH TOPIC pay-1", kp_filter("TOPIC", "pay-1", "MATCH"),
             {("TOPIC", "pay-", "PREFIXED", "User:alice", "*", "ALL", "ALLOW"),
              ("TOPIC", "*", "LITERAL", "User:carol", "*", "READ", "ALLOW")}),
            ("LITERAL TOPIC pay-1", kp_filter("TOPIC", "pay-1", "LITERAL"), set()),
            ("PREFIXED TOPIC pay-", kp_filter("TOPIC", "pay-", "PREFIXED"),
             {("TOPIC", "pay-", "PREFIXED", "User:alice", "*", "ALL", "ALLOW")}),
            ("LITERAL TOPIC secret", kp_filter("TOPIC", "secret", "LITERAL"),
             {("TOPIC", "secret", "LITERAL", "User:carol", "*", "READ", "DENY")}),
            ("MATCH TOPIC secret", kp_filter("TOPIC", "secret", "MATCH"),
             {("TOPIC", "secret", "LITERAL", "User:carol", "*", "READ", "DENY"),
              ("TOPIC", "*", "LITERAL", "User:carol", "*", "READ", "ALLOW")}),
            ("MATCH GROUP carol-blocked", kp_filter("GROUP", "carol-blocked", "MATCH"),
             {("GROUP", "carol-", "PREFIXED", "User:carol", "*", "READ", "ALLOW"),
              ("GROUP", "carol-blocked", "LITERAL", "User:carol", "*", "READ", "DENY")}),
            ("ANY, principal User:bob", kp_filter(principal="User:bob"),
             {a for a in MATRIX_ACLS if a[3] == "User:bob"}),
            ("ANY, host 10.1.2.3", kp_filter(host="10.1.2.3"),
             {("TOPIC", "hosty", "LITERAL", "User:alice", "10.1.2.3", "READ", "ALLOW")}),
            ("TOPIC, DESCRIBE ALLOW", kp_filter("TOPIC", op="DESCRIBE", perm="ALLOW"),
             {a for a in MATRIX_ACLS if a[0] == "TOPIC" and a[5] == "DESCRIBE"}),
            ("ANY, DENY", kp_filter(perm="DENY"), {a for a in MATRIX_ACLS if a[6] == "DENY"}),
            ("CLUSTER", kp_filter("CLUSTER"),
             {("CLUSTER", "kafka-cluster", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW")}),
        ]
        for what, f, want in cases:
            expect(described(admin, f), want, f"DescribeAcls {what}")

        # CreateAcls: each invalid binding refused alone, the good one made.
        good = ("TOPIC", "late", "LITERAL", "User:dave", "*", "WRITE", "ALLOW")
        bad = [("CLUSTER", "other", "LITERAL", "User:dave", "*", "ALTER", "ALLOW"),
               ("TOPIC", "late", "LITERAL", "dave", "*", "READ", "ALLOW"),
               ("GROUP", "late", "LITERAL", "User:dave", "*", "WRITE", "ALLOW"),
               ("TRANSACTIONAL_ID", "late", "LITERAL", "User:dave", "*", "READ", "ALLOW"),
               ("TOPIC", "late", "LITERAL", "User:dave", "*", "IDEMPOTENT_WRITE", "ALLOW")]
        result = admin.create_acls([kp_acl(*bad[0]), kp_acl(*good)] + [kp_acl(*b) for b in bad[1:]])
        expect([as_tuple(a) for a in result["succeeded"]], [good], "CreateAcls: the valid binding made")
        expect([(as_tuple(a), e) for a, e in result["failed"]],
               [(b, Errors.InvalidRequestError) for b in bad],
               "CreateAcls: INVALID_REQUEST for a CLUSTER not named kafka-cluster, a principal "
               "without a colon, WRITE on a GROUP, READ on a TRANSACTIONAL_ID, IDEMPOTENT_WRITE "
               "on a TOPIC")
        expect(every_acl(admin), MATRIX_ACLS | {good}, "DescribeAcls ANY after CreateAcls")

        # A non-super user may not change or read them.
        bob = kp_admin(sasl, "bob")
        try:
            result = bob.create_acls([kp_acl("TOPIC", "*", "LITERAL", "User:bob", "*", "ALL", "ALLOW")])
            expect([e for _, e in result["failed"]], [Errors.ClusterAuthorizationFailedError],
                   "CreateAcls as bob")
            try:
                bob.describe_acls(kp_filter())
                raise TestFailure("DescribeAcls as bob allowed")
            except Errors.ClusterAuthorizationFailedError:
                print("ok: DescribeAcls as bob: CLUSTER_AUTHORIZATION_FAILED")
            [(_, matched, error)] = bob.delete_acls([kp_filter()])
            expect((matched, error), ([], Errors.ClusterAuthorizationFailedError), "DeleteAcls as bob")
        finally:
            bob.close()
        expect(every_acl(admin), MATRIX_ACLS | {good}, "DescribeAcls ANY after bob's refused changes")

        # DeleteAcls: each filter answers the bindings it removed.
        hosty = {a for a in MATRIX_ACLS if a[1] == "hosty"}
        results = admin.delete_acls([kp_filter("TOPIC", "hosty", "LITERAL", principal="User:alice"),
                                     kp_filter("TOPIC", "nothing-here", "LITERAL")])
        expect([({as_tuple(a) for a, _ in matched}, [e for _, e in matched], error)
                for _, matched, error in results],
               [(hosty, [Errors.NoError] * 2, Errors.NoError), (set(), [], Errors.NoError)],
               "DeleteAcls: hosty's two bindings, and nothing for a filter matching nothing")
        expect(every_acl(admin), (MATRIX_ACLS | {good}) - hosty, "DescribeAcls ANY after DeleteAcls")
        # Put back: the restart check compares the whole set.
        result = admin.create_acls([kp_acl(*a) for a in sorted(hosty)])
        check(not result["failed"], f"hosty's bindings made again: {result['failed']}")
        return every_acl(admin)
    finally:
        admin.close()


# --- confluent-kafka, after the restart --------------------------------------------------

class _Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


# librdkafka's log, shown only when a check of it fails (closing a consumer while its
# coordinator connection is being made logs a transport failure, for one).
RDKAFKA_LOG = _Lines()
RDKAFKA = logging.getLogger("acls_test.rdkafka")
RDKAFKA.addHandler(RDKAFKA_LOG)
RDKAFKA.propagate = False
RDKAFKA.setLevel(logging.DEBUG)


def ck_conf(addr, user):
    return {"bootstrap.servers": addr, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": user,
            "sasl.password": f"{user}-secret"}


def ck_produce_one(addr, user, topic, value=b"after the restart", auto_create=False):
    """The delivery error's code (None when delivered)."""
    p = Producer({**ck_conf(addr, user), "message.timeout.ms": 15000, "acks": "all",
                  "allow.auto.create.topics": auto_create}, logger=RDKAFKA)
    errors = []
    p.produce(topic, value, callback=lambda err, msg: errors.append(err))
    p.flush(30)
    check(len(errors) == 1, f"{user} producing to {topic}: no delivery report")
    return errors[0].code() if errors[0] is not None else None


def ck_consume(addr, user, group, topic, want, commit=False):
    """(values, error code of the first error) reading partition 0 of `topic` from 0, and
    with `commit` committing what was read."""
    c = Consumer({**ck_conf(addr, user), "group.id": group, "enable.auto.commit": False},
                 logger=RDKAFKA)
    c.assign([TopicPartition(topic, 0, 0)])
    values, error = [], None
    deadline = time.monotonic() + 30
    try:
        while len(values) < want and error is None and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                error = msg.error().code()
            else:
                values.append(msg.value())
        if commit and values and error is None:
            try:
                c.commit(asynchronous=False)
            except KafkaException as e:  # GROUP_AUTHORIZATION_FAILED and the like
                error = e.args[0].code()
    finally:
        c.close()
    return values, error


def after_restart(sasl):
    failed = len(FAILURES)
    try:
        after_restart_checks(sasl)
    finally:
        if len(FAILURES) > failed:
            print("librdkafka's log:\n  " + "\n  ".join(RDKAFKA_LOG.lines))


def after_restart_checks(sasl):
    err = ck_produce_one(sasl, "alice", "pay-1")
    expect(err, None, "confluent-kafka: alice produces to pay-1 after the restart")
    err = ck_produce_one(sasl, "bob", "shared")
    expect(err, KafkaError.TOPIC_AUTHORIZATION_FAILED,
           "confluent-kafka: bob producing to shared after the restart")
    values, error = ck_consume(sasl, "carol", "carol-ck", "other", 3)
    expect((len(values), error), (3, None), "confluent-kafka: carol reads other after the restart")
    values, error = ck_consume(sasl, "carol", "carol-ck", "secret", 1)
    expect((values, error), ([], KafkaError.TOPIC_AUTHORIZATION_FAILED),
           "confluent-kafka: carol reading secret after the restart (DENY)")


# --- the parts -------------------------------------------------------------------------------

def run_matrix(sasl, plain):
    node = shutil.which("node") or shutil.which("nodejs")
    check(node is not None, "node is missing (scripts/setup.sh installs nodejs)")
    p = subprocess.run([node, os.path.join(HERE, "acls_kafkajs_matrix.js"), sasl, plain],
                       capture_output=True, timeout=180)
    out = p.stdout.decode(errors="replace")
    sys.stdout.write(out)
    sys.stdout.write(p.stderr.decode(errors="replace"))
    expect(p.returncode, 0, "the KafkaJS ACL matrix (acls_kafkajs_matrix.js) exits 0")


def matrix(sluice):
    broker = Broker(sluice, config(), kafka_addr=None)
    try:
        broker.start()
        sasl, plain = listener_ports(broker)
        run_matrix(sasl, plain)
        raw_checks(sasl, plain)
        acls = acl_apis(sasl)

        # Durable: persisted before CreateAcls answered, so a SIGKILL right after keeps it.
        admin = kp_admin(sasl, "admin")
        try:
            extra = ("GROUP", "ops-", "PREFIXED", "User:ops", "*", "DESCRIBE", "ALLOW")
            result = admin.create_acls([kp_acl(*extra)])
            check(not result["failed"], f"the last ACL: {result['failed']}")
            acls = acls | {extra}
        finally:
            admin.close()
        broker.kill()
        path = os.path.join(broker.data_dir, "meta", "acls.json")
        mode = os.stat(path).st_mode & 0o777
        expect(oct(mode), oct(0o600), "acls.json's mode")
        broker.config = config('"User:admin;User:ops"')
        broker.start()
        sasl, plain = listener_ports(broker)
        admin = kp_admin(sasl, "admin")
        try:
            expect(every_acl(admin), acls,
                   "every ACL back after a SIGKILL and a restart (admin a super user by "
                   "\"User:admin;User:ops\")")
        finally:
            admin.close()
        after_restart(sasl)
        rc = broker.stop()
        check(rc == 0, f"sluice serve exited {rc} after SIGTERM")

        # A corrupt acls.json stops the start and names the file.
        with open(path, "w") as f:
            f.write('{"version": 1, "acls": [{"resource_type": "TOPIC"}]}\n')
        try:
            broker.start(timeout=20)
            raise TestFailure("started with a corrupt acls.json")
        except TestFailure as e:
            check("exited before listening" in str(e), f"corrupt acls.json: {e}")
        with open(broker.err_path) as f:
            said = f.read()
        expect(f"{path}: acls: binding 0" in said, True,
               f"a corrupt acls.json stops the start, naming the file: {said.strip()[-200:]!r}")
        if FAILURES:
            print(broker.logs(), file=sys.stderr)
    except BaseException:
        print(broker.logs(), file=sys.stderr)
        raise
    finally:
        broker.cleanup()


def without_authorizer(sluice):
    # Keys that mean nothing without authorization.enabled are refused.
    for key, value in (("super_users", '["User:admin"]'), ("allow_everyone_if_no_acl_found", "true")):
        broker = Broker(sluice, FAST_GROUPS + f"authorization:\n  {key}: {value}\n")
        try:
            broker.start(timeout=20)
            raise TestFailure(f"started with authorization.{key} and no authorizer")
        except TestFailure as e:
            check(f"authorization.{key}" in str(e) and "authorization.enabled" in str(e),
                  f"authorization.{key} without authorization.enabled: {e}")
            print(f"ok: authorization.{key} without authorization.enabled refused at start")
        finally:
            broker.cleanup()
    # No authorizer: the ACL APIs answer SECURITY_DISABLED, as Kafka without one.
    broker = Broker(sluice)
    try:
        broker.start()
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="acls-test")
        try:
            result = admin.create_acls([kp_acl("TOPIC", "t", "LITERAL", "User:a", "*", "READ", "ALLOW")])
            expect([e for _, e in result["failed"]], [Errors.SecurityDisabledError],
                   "CreateAcls without an authorizer")
            try:
                admin.describe_acls(kp_filter())
                raise TestFailure("DescribeAcls without an authorizer answered")
            except Errors.SecurityDisabledError:
                print("ok: DescribeAcls without an authorizer: SECURITY_DISABLED")
            [(_, matched, error)] = admin.delete_acls([kp_filter()])
            expect((matched, error), ([], Errors.SecurityDisabledError), "DeleteAcls without an authorizer")
        finally:
            admin.close()
        rc = broker.stop()
        check(rc == 0, f"sluice serve exited {rc} after SIGTERM")
    except BaseException:
        print(broker.logs(), file=sys.stderr)
        raise
    finally:
        broker.cleanup()


def main():
    sluice = os.path.abspath(sys.argv[1])
    try:
        without_authorizer(sluice)
        matrix(sluice)
        check(not FAILURES, f"{len(FAILURES)} checks failed:\n  " + "\n  ".join(FAILURES))
    except Exception as e:  # the verdict: any exception fails the test
        if not isinstance(e, TestFailure):
            import traceback
            traceback.print_exc()
        print(f"FAIL: {e}")
        return 1
    print("PASS: acls_test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
