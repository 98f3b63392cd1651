"""storage.file_idle_timeout (issue 21: "no open file descriptor" per idle partition):
`sluice serve` with a 1 s idle timeout, a topic of 50 partitions, acks=all records in
every one; once idle, the broker holds no descriptor on any segment or index file (counted
in /proc/<pid>/fd), and every record reads back from the closed files; a second round of
produce and read after that works the same, and the descriptors go again. With the
timeout off (0) the descriptors stay open, as the cache keeps them.

Run with /usr/bin/python3 (Debian's python3-confluent-kafka).
"""

import os
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sluice_broker import FAST_GROUPS, Broker, check, wait_until

PARTITIONS = 50
SEGMENT_FILES = (".log", ".index", ".timeindex", ".txnindex")


def segment_descriptors(broker):
    """The broker's open descriptors on segment and index files of its data directory."""
    fd_dir = f"/proc/{broker.proc.pid}/fd"
    n = 0
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue  # closed meanwhile
        if target.startswith(broker.data_dir + "/") and target.endswith(SEGMENT_FILES):
            n += 1
    return n


def produce(bootstrap, round_):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failures = []

    def report(err, msg):
        if err is not None:
            failures.append(str(err))
    for part in range(PARTITIONS):
        for i in range(10):
            p.produce("idle", value=f"r{round_}-p{part}-{i}".encode(), partition=part,
                      on_delivery=report)
    check(p.flush(60) == 0, "records not delivered")
    check(not failures, f"delivery failures: {failures[:3]}")


def read_all(bootstrap, expected):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                  "enable.auto.commit": False})
    c.assign([TopicPartition("idle", p, 0) for p in range(PARTITIONS)])
    got = {}
    deadline = time.monotonic() + 60
    while sum(len(v) for v in got.values()) < expected and time.monotonic() < deadline:
        m = c.poll(0.1)
        if m is None or m.error():
            continue
        got.setdefault(m.partition(), []).append(m.value().decode())
    c.close()
    return got


def expect(rounds):
    return {p: [f"r{r}-p{p}-{i}" for r in range(rounds) for i in range(10)]
            for p in range(PARTITIONS)}


def run(sluice, timeout):
    broker = Broker(sluice, FAST_GROUPS + f"storage:\n  file_idle_timeout: {timeout}\n")
    try:
        bootstrap = broker.start()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("idle", PARTITIONS, 1)])["idle"].result(30)
        for round_ in range(2):
            produce(bootstrap, round_)
            if timeout == "0":
                continue
            wait_until(lambda: segment_descriptors(broker) == 0, 30,
                       "no segment or index descriptor open once idle")
            got = read_all(bootstrap, PARTITIONS * 10 * (round_ + 1))
            check(got == expect(round_ + 1), f"round {round_}: the records read back differ")
            wait_until(lambda: segment_descriptors(broker) == 0, 30,
                       "no descriptor open once idle again after the reads")
        if timeout == "0":
            check(segment_descriptors(broker) >= PARTITIONS,
                  f"timeout 0: {segment_descriptors(broker)} descriptors, expected the cache's")
            got = read_all(bootstrap, PARTITIONS * 20)
            want = expect(2)
            bad = [p for p in range(PARTITIONS) if got.get(p) != want[p]]
            check(not bad, f"timeout 0: the records read back differ in {bad[:3]}: "
                  f"{[(got.get(p), want[p]) for p in bad[:1]]}")
        rc = broker.stop()
        check(rc == 0, f"sluice serve exited {rc} after SIGTERM")
        print(f"PASS: idle_files_test (file_idle_timeout {timeout})")
        return 0
    except Exception as e:  # the verdict: any exception fails it
        import traceback
        traceback.print_exc()
        print(f"FAIL: idle_files_test (file_idle_timeout {timeout}): {e}")
        print(broker.logs())
        return 1
    finally:
        broker.cleanup()


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} path/to/sluice")
    return run(sys.argv[1], "1s") | run(sys.argv[1], "0")


if __name__ == "__main__":
    sys.exit(main())
