#!/usr/bin/python3
"""Offsets held by a transaction, end to end with confluent-kafka (librdkafka) against
`sluice serve`:

1. A read_committed consumer joining a group while a transactional producer holds offsets
   for that group in an open transaction (send_offsets_to_transaction, not yet ended):
   librdkafka's OffsetFetch asks require_stable, the broker answers
   UNSTABLE_OFFSET_COMMIT, the client retries (seen in its debug log, and it delivers
   nothing meanwhile); once the producer commits, the consumer starts at the offset the
   transaction committed; after an abort, at the offset committed before it.
2. The broker SIGKILLed between TxnOffsetCommit and EndTxn: after the restart the
   transaction is aborted by its timeout (transaction.timeout.ms), the offsets it held
   never become visible (the group's committed offset is the one before it), the records
   it produced are invisible to read_committed, and a new producer with the same
   transactional.id works.

Usage: /usr/bin/python3 txn_offsets_test.py SLUICE
"""

import logging
import struct
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from sluice_broker import check, run_test, wait_until
from txn_clients_test import CONFIG, Raw, create, describe_state, producer, read_all

RECORDS = 20
BEFORE = 5  # the group's offset committed outside any transaction
IN_TXN = 12  # the offset the transaction holds
UNSTABLE_OFFSET_COMMIT = 88


class DebugLog(logging.Handler):
    """Collects librdkafka's debug lines (a `logger` given to the client gets them)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []
        self.mu = threading.Lock()

    def emit(self, record):
        with self.mu:
            self.lines.append(record.getMessage())

    def matching(self, *words):
        with self.mu:
            return [l for l in self.lines if all(w.lower() in l.lower() for w in words)]


def _compact(s):
    b = s.encode()
    check(len(b) < 127, "a short name")
    return bytes([len(b) + 1]) + b


def offset_fetch_stable(bs, group, topic):
    """OffsetFetch v7 with require_stable for partition 0 of `topic`, as librdkafka sends
    it for a read_committed consumer: (error code, committed offset)."""
    raw = Raw(bs)
    try:
        body = (_compact(group) + bytes([2]) + _compact(topic) + bytes([2]) +
                struct.pack(">i", 0) + b"\x00" + b"\x01" + b"\x00")
        r = raw.call(9, 7, body, flexible=True)
        r.int32()  # throttle
        check(r.uvarint() == 2 and r.compact_string() == topic, "one topic in OffsetFetch")
        check(r.uvarint() == 2 and r.int32() == 0, "one partition in OffsetFetch")
        offset = struct.unpack(">q", r.take(8))[0]
        r.int32()  # leader epoch
        r.compact_string()  # metadata
        return r.int16(), offset
    finally:
        raw.close()


def fill_source(bs, topic):
    create(bs, topic, 1)
    p = Producer({"bootstrap.servers": bs})
    for i in range(RECORDS):
        p.produce(topic, value=f"{i}", partition=0)
    check(p.flush(30) == 0, "producing the source records")


def commit_plain(bs, group, topic, offset):
    """Commits `offset` for `group` outside any transaction (a consumer not in the group)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    got = c.committed([TopicPartition(topic, 0)], 30)[0].offset
    c.close()
    check(got == offset, f"plain commit of {offset} for {group}: committed {got}")


def hold_offsets(bs, txn_id, group, topic, offset, out_topic, **extra):
    """A transactional producer with a record to `out_topic` and `offset` for `group` in
    an open transaction; returns the producer."""
    meta_consumer = Consumer({"bootstrap.servers": bs, "group.id": group,
                              "enable.auto.commit": False})
    meta = meta_consumer.consumer_group_metadata()
    p = producer(bs, txn_id, **extra)
    p.begin_transaction()
    p.produce(out_topic, value=f"from {txn_id}", partition=0)
    check(p.flush(30) == 0, "the transaction's record")
    p.send_offsets_to_transaction([TopicPartition(topic, 0, offset)], meta, 30)
    meta_consumer.close()
    return p


def first_delivered(c, timeout):
    """The first record a subscribed consumer delivers, or None within `timeout` s."""
    deadline = time.monotonic() + timeout
    m = None
    while m is None and time.monotonic() < deadline:
        m = c.poll(0.2)
    if m is not None and m.error():
        raise KafkaException(m.error())
    return m


def join_behind_open_transaction(b, end):
    """Scenario 1 with the transaction ended by `end` ("commit" or "abort")."""
    bs = b.bootstrap
    topic, group, out = f"src-{end}", f"group-{end}", f"out-{end}"
    fill_source(bs, topic)
    create(bs, out, 1)
    commit_plain(bs, group, topic, BEFORE)
    check(offset_fetch_stable(bs, group, topic) == (0, BEFORE), "OffsetFetch before")
    p = hold_offsets(bs, f"tx-hold-{end}", group, topic, IN_TXN, out)
    # The broker's answer to require_stable while the transaction holds the offset.
    check(offset_fetch_stable(bs, group, topic) == (UNSTABLE_OFFSET_COMMIT, -1),
          f"OffsetFetch(require_stable) behind the open transaction: "
          f"{offset_fetch_stable(bs, group, topic)}")

    log = DebugLog()
    logger = logging.getLogger(f"rdkafka-{end}")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(log)
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                  "debug": "cgrp,protocol"}, logger=logger)
    try:
        c.subscribe([topic])
        # The client asks for the group's offsets (OffsetFetch v7, require_stable) and
        # retries while told they are unstable (librdkafka 2.0 logs the retries, not the
        # error); it delivers nothing meanwhile.
        deadline = time.monotonic() + 30
        while len(log.matching("Retrying OffsetFetchRequest")) < 3:
            check(time.monotonic() < deadline,
                  "librdkafka retrying OffsetFetch after UNSTABLE_OFFSET_COMMIT: not within 30 s")
            m = c.poll(0.1)
            check(m is None or m.error() is not None,
                  f"a record delivered behind the open transaction: offset "
                  f"{m.offset() if m else None}")
        check(log.matching("OffsetFetchRequest(v7)") or log.matching("OffsetFetchRequest (v7"),
              "librdkafka did not send OffsetFetch v7 (require_stable)")
        check(offset_fetch_stable(bs, group, topic) == (UNSTABLE_OFFSET_COMMIT, -1),
              "the offset stopped being unstable before the transaction ended")
        # Nothing is delivered while the transaction holds the offsets (neither the old
        # committed offset nor the earliest are used instead).
        m = first_delivered(c, 1.0)
        check(m is None, f"a record delivered behind the open transaction: offset "
                         f"{m.offset() if m else None}")
        if end == "commit":
            p.commit_transaction(30)
            want = IN_TXN
        else:
            p.abort_transaction(30)
            want = BEFORE
        m = first_delivered(c, 30)
        check(m is not None, f"nothing delivered after the {end}")
        check(m.offset() == want, f"after the {end} the consumer started at {m.offset()}, "
                                  f"expected {want}")
        committed = c.committed([TopicPartition(topic, 0)], 30)[0].offset
        check(committed == want, f"committed offset after the {end}: {committed}")
        check(offset_fetch_stable(bs, group, topic) == (0, want), f"OffsetFetch after the {end}")
        unstable = len(log.matching("Retrying OffsetFetchRequest"))
        print(f"{end}: librdkafka retried OffsetFetch {unstable} times; "
              f"started at {m.offset()}")
    finally:
        c.close()
    visible = read_all(bs, out, 1, "read_committed", 1 if end == "commit" else 0, timeout=10)
    check(visible == ([f"from tx-hold-{end}"] if end == "commit" else []),
          f"read_committed {out} after the {end}: {visible}")


def test_unstable_then_commit(b):
    join_behind_open_transaction(b, "commit")


def test_unstable_then_abort(b):
    join_behind_open_transaction(b, "abort")


def test_crash_between_offsets_and_end(b):
    bs = b.bootstrap
    topic, group, out, txn_id = "src-crash", "group-crash", "out-crash", "tx-crash"
    fill_source(bs, topic)
    create(bs, out, 1)
    commit_plain(bs, group, topic, BEFORE)
    p = hold_offsets(bs, txn_id, group, topic, IN_TXN, out, **{"transaction.timeout.ms": 3000})
    for i in range(3):
        p.produce(out, value=f"lost {i}", partition=0)
    check(p.flush(30) == 0, "the transaction's records")
    check(describe_state(bs, txn_id) == "Ongoing", "the transaction is open before the kill")
    b.kill()  # after TxnOffsetCommit, before EndTxn
    del p  # its broker is gone: nothing it does reaches the restarted one
    bs = b.start()
    # Recovered from __consumer_offsets: while the transaction is still open after the
    # restart, its offsets are pending (unstable), not committed and not lost.
    state = describe_state(bs, txn_id)
    fetched = offset_fetch_stable(bs, group, topic)
    if state == "Ongoing" and describe_state(bs, txn_id) == "Ongoing":
        check(fetched == (UNSTABLE_OFFSET_COMMIT, -1),
              f"the open transaction's offsets after the restart: {fetched}")
    print(f"after the restart: {state}, OffsetFetch(require_stable) {fetched}")

    # The restarted coordinator aborts the transaction by its timeout.
    wait_until(lambda: describe_state(bs, txn_id) == "CompleteAbort", 60,
               "the transaction aborted by its timeout after the restart")
    # Its offsets never became visible: the group still has the offset from before.
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    committed = c.committed([TopicPartition(topic, 0)], 30)[0].offset
    c.close()
    check(committed == BEFORE, f"committed offset after the aborted transaction: {committed}")
    check(offset_fetch_stable(bs, group, topic) == (0, BEFORE), "OffsetFetch after the abort")
    # A new producer with the same transactional.id works.
    q = producer(bs, txn_id)
    q.begin_transaction()
    q.produce(out, value="after", partition=0)
    q.commit_transaction(30)
    check(read_all(bs, out, 1, "read_committed", 1) == ["after"],
          "read_committed sees the crashed transaction's records")
    uncommitted = read_all(bs, out, 1, "read_uncommitted", 5)
    check(sorted(uncommitted) == sorted(["after", "from tx-crash"] + [f"lost {i}"
                                                                     for i in range(3)]),
          f"read_uncommitted: {uncommitted}")
    # A consumer of the group starts at the offset from before the transaction.
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    m = first_delivered(c, 30)
    c.close()
    check(m is not None and m.offset() == BEFORE,
          f"the group's consumer started at {m.offset() if m else None}, expected {BEFORE}")


def main():
    sluice = sys.argv[1]
    failures = 0
    tests = [("read_committed join behind an open transaction, then commit",
              test_unstable_then_commit),
             ("read_committed join behind an open transaction, then abort",
              test_unstable_then_abort),
             ("SIGKILL between TxnOffsetCommit and EndTxn", test_crash_between_offsets_and_end)]
    for name, body in tests:
        failures += run_test(name, sluice, body, config=CONFIG)
    print(f"{len(tests) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
