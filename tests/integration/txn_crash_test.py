"""The transaction coordinator killed at every step of a commit (SIGKILL through the crash
points of src/base/crash_point.h): before the Prepare record, once it is durable, between
the partitions' markers, before the Complete record, after it. After each kill the broker
restarts on the same data directory and a read_committed consumer must see every
transaction whole or not at all (never some partitions of it), and every transaction
whose commit a producer saw succeed.

Usage: /usr/bin/python3 txn_crash_test.py SLUICE [KILLS [SEED]]
  KILLS 0 (the default): one kill at each crash point (make test); more: that many kills
  at seeded random points and hit counts (make test-slow).
"""

import os
import random
import sys
import time
from collections import Counter

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sluice_broker import FAST_GROUPS, Broker, check

POINTS = ["txn-before-prepare", "txn-prepare-durable", "txn-partition-marker",
          "txn-markers-written", "txn-complete-durable"]
PARTITIONS = 4
PER_PARTITION = 2
TXNS_PER_RUN = 5


def until_done_or_dead(b, call):
    """call(1 s timeout) again while it fails retriably and the broker lives: True once it
    succeeds, False once the broker is dead."""
    while True:
        try:
            call(1)
            return True
        except KafkaException as e:
            if b.proc.poll() is not None:
                return False
            if not e.args[0].retriable():
                raise


def run_until_killed(b, point, hits, next_txn, acked, attempted):
    """Starts the broker armed to die at `point` on its `hits`-th pass, commits
    transactions until it dies (or TXNS_PER_RUN are done), returns the next txn number."""
    os.environ["SLUICE_TEST_CRASH_AT"] = f"{point}:{hits}"
    try:
        bs = b.start()
    finally:
        del os.environ["SLUICE_TEST_CRASH_AT"]
    p = Producer({"bootstrap.servers": bs, "transactional.id": "crash-tx", "linger.ms": 2,
                  "message.timeout.ms": 8000, "transaction.timeout.ms": 10000,
                  "reconnect.backoff.max.ms": 200})
    try:
        if not until_done_or_dead(b, p.init_transactions):
            raise KafkaException("the broker died in init_transactions")
        for _ in range(TXNS_PER_RUN if point != "none" else 1):
            if b.proc.poll() is not None:
                break
            n = next_txn
            next_txn += 1
            attempted.add(n)
            p.begin_transaction()
            for part in range(PARTITIONS):
                for k in range(PER_PARTITION):
                    p.produce("c", value=f"{n}:{part}:{k}", partition=part)
            if not until_done_or_dead(b, p.commit_transaction):
                break
            acked.add(n)
    except KafkaException:
        pass  # the broker died under it
    finally:
        p.purge()
        del p
    if point == "none":
        b.stop()
        return next_txn, False
    if b.proc.poll() is None:
        # Not reached this time: a clean stop.
        b.stop()
        return next_txn, False
    b.wait(10)
    return next_txn, True


def verify(b, acked, attempted, timeout=60):
    """Reads the whole topic read_committed: each transaction whole or absent, every
    acknowledged one present."""
    bs = b.bootstrap
    c = Consumer({"bootstrap.servers": bs, "group.id": f"v-{time.monotonic_ns()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": True})
    c.assign([TopicPartition("c", p, 0) for p in range(PARTITIONS)])
    counts = Counter()
    eof = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:
                eof.add(m.partition())
                # Done once every partition is at its end and every acknowledged
                # transaction is whole (a partition's LSO may still wait on a marker).
                if len(eof) == PARTITIONS and all(
                        counts[n] == PARTITIONS * PER_PARTITION for n in acked):
                    break
                continue
            raise KafkaException(m.error())
        n = int(m.value().decode().split(":")[0])
        counts[n] += 1
        eof.discard(m.partition())
    c.close()
    whole = PARTITIONS * PER_PARTITION
    for n, k in counts.items():
        check(n in attempted, f"transaction {n} was never sent")
        check(k == whole, f"transaction {n} is half visible: {k} of {whole} records")
    for n in acked:
        check(counts[n] == whole, f"acknowledged transaction {n} is missing ({counts[n]})")
    return len(counts)


def main():
    sluice = sys.argv[1]
    kills = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else int(time.time())
    rng = random.Random(seed)
    print(f"seed {seed}")
    def random_point():
        # Hit counts a run reaches: each transaction passes every point once, except the
        # partition markers (one per partition).
        point = rng.choice(POINTS)
        most = TXNS_PER_RUN * (PARTITIONS if point == "txn-partition-marker" else 1)
        return point, rng.randint(1, most)

    if kills == 0:
        plan = [(p, 1) for p in POINTS] + [("txn-partition-marker", 3)]
        wanted = len(plan)
    else:
        # Runs until `kills` kills (a run whose point is not reached stops cleanly).
        plan = [random_point() for _ in range(kills * 2)]
        wanted = kills
    b = Broker(sluice, FAST_GROUPS)
    acked, attempted = set(), set()
    next_txn, killed, visible = 0, 0, 0
    try:
        b.start()
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic("c", PARTITIONS, 1)]).values():
            f.result()
        b.stop()
        for i, (point, hits) in enumerate(plan):
            if killed >= wanted:
                break
            next_txn, died = run_until_killed(b, point, hits, next_txn, acked, attempted)
            killed += died
            b.start()
            visible = verify(b, acked, attempted)
            b.stop()
            if kills == 0 or killed % 20 == 0 and died:
                print(f"run {i + 1}, kill {killed}/{wanted}: {point}:{hits} {'killed' if died else 'not hit'}; "
                      f"{visible} transactions visible, {len(acked)} acknowledged")
        # A last transaction on every partition, acknowledged: read_committed reaching it
        # everywhere means no earlier transaction is left undecided (an invisible one is
        # aborted, not pending behind a marker that never came).
        next_txn, _ = run_until_killed(b, "none", 1, next_txn, acked, attempted)
        b.start()
        visible = verify(b, acked, attempted)
        check(next_txn - 1 in acked, "the last transaction was not acknowledged")
        b.stop()
        check(killed >= wanted, f"only {killed} kills, {wanted} wanted")
        print(f"PASS: {killed} kills, {visible} whole transactions, none half visible")
        print("1 passed, 0 failed")
        return 0
    except Exception as e:
        import traceback
        traceback.print_exc()
        print(f"FAIL: seed {seed}: {e}")
        print(b.logs())
        print("0 passed, 1 failed")
        return 1
    finally:
        b.cleanup()


if __name__ == "__main__":
    sys.exit(main())
