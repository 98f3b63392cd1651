"""Transactions with confluent-kafka (librdkafka) against `sluice serve`: commit and abort
seen by read_committed and read_uncommitted consumers, fencing by a second producer with
the same transactional.id, the broker aborting a transaction past its timeout,
consume-transform-produce with the offsets in the transaction, DescribeTransactions /
ListTransactions through the admin client's raw requests, and bad input (WriteTxnMarkers
from a client, EndTxn for an unknown id, a stale epoch) answered with Kafka's errors on a
connection that keeps working.

Usage: /usr/bin/python3 txn_clients_test.py SLUICE
"""

import socket
import struct
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sluice_broker import FAST_GROUPS, _frame, _Reader, _recv_exact, check, run_test, wait_until

CONFIG = FAST_GROUPS + "transactions:\n  abort_check_interval: 100\n"


def create(bootstrap, name, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result()


def producer(bootstrap, txn_id, **extra):
    conf = {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5}
    conf.update(extra)
    p = Producer(conf)
    p.init_transactions(30)
    return p


def read_all(bootstrap, topic, partitions, isolation, expect_at_least, timeout=20):
    """Every value of the topic a consumer with `isolation` sees from the start."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values, eof = [], set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                eof.add(m.partition())
                if len(eof) == partitions and len(values) >= expect_at_least:
                    break
                continue
            raise KafkaException(m.error())
        values.append(m.value().decode())
    c.close()
    return sorted(values)


def test_commit_and_abort(b):
    bs = b.bootstrap
    create(bs, "t", 3)
    p = producer(bs, "tx-commit")
    p.begin_transaction()
    for i in range(30):
        p.produce("t", value=f"c{i}", partition=i % 3)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(9):
        p.produce("t", value=f"a{i}", partition=i % 3)
    p.flush(30)  # the records reach the partitions before the abort
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("t", value="last", partition=1)
    p.commit_transaction(30)
    committed = sorted([f"c{i}" for i in range(30)] + ["last"])
    got = read_all(bs, "t", 3, "read_committed", len(committed))
    check(got == committed, f"read_committed saw {got}")
    everything = sorted(committed + [f"a{i}" for i in range(9)])
    got = read_all(bs, "t", 3, "read_uncommitted", len(everything))
    check(got == everything, f"read_uncommitted saw {got}")


def test_open_transaction_holds_read_committed(b):
    bs = b.bootstrap
    create(bs, "open", 1)
    p = producer(bs, "tx-open")
    p.begin_transaction()
    p.produce("open", value="pending", partition=0)
    p.flush(30)
    check(read_all(bs, "open", 1, "read_committed", 0, timeout=3) == [],
          "read_committed saw an open transaction")
    check(read_all(bs, "open", 1, "read_uncommitted", 1) == ["pending"],
          "read_uncommitted did not see the open transaction")
    p.commit_transaction(30)
    check(read_all(bs, "open", 1, "read_committed", 1) == ["pending"], "commit not visible")


def test_fencing(b):
    bs = b.bootstrap
    create(bs, "fence", 1)
    old = producer(bs, "tx-fence")
    old.begin_transaction()
    old.produce("fence", value="zombie", partition=0)
    old.flush(30)
    new = producer(bs, "tx-fence")  # aborts the old one's transaction and bumps the epoch
    new.begin_transaction()
    new.produce("fence", value="fresh", partition=0)
    new.commit_transaction(30)
    try:
        old.produce("fence", value="zombie2", partition=0)
        old.commit_transaction(10)
        raise AssertionError("the fenced producer committed")
    except KafkaException as e:
        err = e.args[0]
        check(err.fatal() or err.txn_requires_abort() or "fenced" in str(err).lower(),
              f"unexpected error for the fenced producer: {err}")
    check(read_all(bs, "fence", 1, "read_committed", 1) == ["fresh"], "zombie records visible")


def test_timeout_abort(b):
    bs = b.bootstrap
    create(bs, "slow", 1)
    p = producer(bs, "tx-slow", **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce("slow", value="late", partition=0)
    p.flush(30)
    # The broker aborts it and bumps the epoch: read_committed moves past it.
    wait_until(lambda: describe_state(bs, "tx-slow") == "CompleteAbort", 30,
               "the timed-out transaction aborted")
    try:
        p.commit_transaction(10)
        raise AssertionError("a timed-out transaction committed")
    except KafkaException:
        pass
    q = producer(bs, "tx-after")
    q.begin_transaction()
    q.produce("slow", value="after", partition=0)
    q.commit_transaction(30)
    check(read_all(bs, "slow", 1, "read_committed", 1) == ["after"],
          "read_committed after a timeout abort")


def test_consume_transform_produce(b):
    bs = b.bootstrap
    create(bs, "in", 2)
    create(bs, "out", 2)
    plain = Producer({"bootstrap.servers": bs})
    for i in range(20):
        plain.produce("in", value=f"{i}", partition=i % 2)
    plain.flush(30)
    c = Consumer({"bootstrap.servers": bs, "group.id": "ctp", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.subscribe(["in"])
    p = producer(bs, "tx-ctp")
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 20 and time.monotonic() < deadline:
        msgs = c.consume(10, 1.0)
        msgs = [m for m in msgs if not m.error()]
        if not msgs:
            continue
        p.begin_transaction()
        for m in msgs:
            p.produce("out", value=f"x{m.value().decode()}", partition=m.partition())
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        seen += len(msgs)
    check(seen == 20, f"consumed {seen} of 20")
    committed = c.committed([TopicPartition("in", 0), TopicPartition("in", 1)], 30)
    check(sorted(tp.offset for tp in committed) == [10, 10], f"offsets {committed}")
    c.close()
    out = read_all(bs, "out", 2, "read_committed", 20)
    check(out == sorted(f"x{i}" for i in range(20)), f"out {out}")


# --- raw requests: what no client sends ---------------------------------------------


def kstr(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class Raw:
    def __init__(self, bootstrap):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.corr = 0

    def call(self, key, version, body, flexible=False):
        self.corr += 1
        self.sock.sendall(_frame(key, version, self.corr, body, flexible))
        size = struct.unpack(">i", _recv_exact(self.sock, 4))[0]
        r = _Reader(_recv_exact(self.sock, size))
        check(r.int32() == self.corr, "correlation id")
        if flexible:
            r.tagged_fields()
        return r

    def close(self):
        self.sock.close()


def describe_state(bootstrap, txn_id):
    raw = Raw(bootstrap)
    try:
        # DescribeTransactions v0 (flexible): [transactional ids]
        body = bytes([2, len(txn_id) + 1]) + txn_id.encode() + b"\x00"
        r = raw.call(65, 0, body, flexible=True)
        r.int32()  # throttle
        check(r.uvarint() == 2, "one transaction state")
        error = r.int16()
        r.compact_string()
        state = r.compact_string()
        return state if error == 0 else f"error {error}"
    finally:
        raw.close()


def test_bad_input(b):
    bs = b.bootstrap
    create(bs, "bad", 1)
    p = producer(bs, "tx-bad")
    p.begin_transaction()
    p.produce("bad", value="v", partition=0)
    p.flush(30)
    raw = Raw(bs)
    # WriteTxnMarkers v0 from a client: [markers: pid, epoch, result, [topic, [p]], coord epoch]
    body = struct.pack(">i", 1) + struct.pack(">qhb", 0, 0, 1) + struct.pack(">i", 1) + kstr("bad")
    body += struct.pack(">ii", 1, 0) + struct.pack(">i", 0)
    r = raw.call(27, 0, body)
    check(r.int32() == 1, "one marker result")
    r.int64 = lambda: struct.unpack(">q", r.take(8))[0]
    r.int64()
    check(r.int32() == 1 and r.take(struct.unpack(">h", r.take(2))[0]) == b"bad", "topic")
    check(r.int32() == 1 and r.int32() == 0, "partition")
    code = r.int16()
    check(code == 31, f"WriteTxnMarkers from a client: error {code}, want 31")
    # EndTxn v1 for an unknown transactional id: INVALID_PRODUCER_ID_MAPPING (49).
    r = raw.call(26, 1, kstr("nobody") + struct.pack(">qhb", 5, 0, 1))
    r.int32()
    code = r.int16()
    check(code == 49, f"EndTxn for an unknown id: error {code}, want 49")
    # The open transaction of tx-bad with a stale epoch: INVALID_PRODUCER_EPOCH (47) for
    # v1, PRODUCER_FENCED (90) from v2 (KIP-588). DescribeTransactions gives the id.
    state = describe_state(bs, "tx-bad")
    check(state == "Ongoing", f"tx-bad is {state}")
    pid = describe_producer_id(raw, "tx-bad")
    r = raw.call(26, 1, kstr("tx-bad") + struct.pack(">qhb", pid, 77, 1))
    r.int32()
    check(r.int16() == 47, "stale epoch, EndTxn v1")
    r = raw.call(26, 3, bytes([7]) + b"tx-bad" + struct.pack(">qhb", pid, 77, 1) + b"\x00",
                 flexible=True)
    r.int32()
    check(r.int16() == 90, "stale epoch, EndTxn v3")
    # ListTransactions v1 (flexible): states ["Ongoing", "Bogus"], no producer filter,
    # duration -1. tx-bad is Ongoing; Bogus comes back as an unknown filter.
    body = bytes([3, 8]) + b"Ongoing" + bytes([6]) + b"Bogus" + bytes([1]) + struct.pack(">q", -1)
    r = raw.call(66, 1, body + b"\x00", flexible=True)
    r.int32()  # throttle
    check(r.int16() == 0, "ListTransactions error")
    unknown = r.compact_array(r.compact_string)
    check(unknown == ["Bogus"], f"unknown state filters {unknown}")

    def listed():
        txn_id = r.compact_string()
        producer_id = struct.unpack(">q", r.take(8))[0]
        state = r.compact_string()
        r.tagged_fields()
        return txn_id, producer_id, state

    states = r.compact_array(listed)
    check(states == [("tx-bad", pid, "Ongoing")], f"ListTransactions {states}")
    # The connection still serves: ApiVersions v0.
    r = raw.call(18, 0, b"")
    check(r.int16() == 0, "ApiVersions after the errors")
    raw.close()
    p.commit_transaction(30)  # the real producer is untouched
    check(read_all(bs, "bad", 1, "read_committed", 1) == ["v"], "tx-bad's commit")


def describe_producer_id(raw, txn_id):
    body = bytes([2, len(txn_id) + 1]) + txn_id.encode() + b"\x00"
    r = raw.call(65, 0, body, flexible=True)
    r.int32()
    r.uvarint()
    check(r.int16() == 0, "describe")
    r.compact_string()
    r.compact_string()
    r.int32()  # timeout
    r.take(8)  # start time
    return struct.unpack(">q", r.take(8))[0]


def main():
    sluice = sys.argv[1]
    failures = 0
    for name, body in [("commit and abort", test_commit_and_abort),
                       ("an open transaction holds read_committed",
                        test_open_transaction_holds_read_committed),
                       ("fencing", test_fencing),
                       ("timeout abort", test_timeout_abort),
                       ("consume-transform-produce", test_consume_transform_produce),
                       ("bad input", test_bad_input)]:
        failures += run_test(name, sluice, body, config=CONFIG)
    print(f"{6 - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
