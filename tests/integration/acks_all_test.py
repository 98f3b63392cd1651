"""acks=all (the default of librdkafka and the Java client) is acknowledged after the
fdatasync that covers it, and that sync starts as soon as the records are written: it
does not wait for the interval flush (flush.ms). The broker here runs with flush.ms at
ten minutes, so a produce request that waited for the timer would outlive the
producer's message.timeout.ms (60 s) and fail; no duration is asserted.

confluent-kafka sends 100 records of 500 KB with acks=all, then 2,000 small ones; every
delivery report must be a success and the topic must hold them all.

Run with /usr/bin/python3 (Debian's python3-confluent-kafka).
"""

import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sluice_broker import FAST_GROUPS, Broker, check


def produce(bootstrap, topic, count, size):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000,
                  "message.max.bytes": 1_000_000})
    failures, delivered = [], [0]

    def report(err, msg):
        if err is not None:
            failures.append(str(err))
        else:
            delivered[0] += 1

    value = b"x" * size
    for i in range(count):
        while True:
            try:
                p.produce(topic, value=value, key=str(i).encode(), on_delivery=report)
                break
            except BufferError:  # the producer's queue is full: let it drain
                p.poll(0.1)
        p.poll(0)
    left = p.flush(120)
    check(left == 0, f"{left} records not delivered")
    check(not failures, f"delivery failures: {failures[:3]}")
    check(delivered[0] == count, f"{delivered[0]} of {count} delivered")


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} path/to/sluice")
    broker = Broker(sys.argv[1], FAST_GROUPS, extra_args=["--flush-ms", "600000"])
    try:
        bootstrap = broker.start()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic("big", 1, 1), NewTopic("small", 4, 1)]).values():
            f.result(30)
        t = time.monotonic()
        produce(bootstrap, "big", 100, 500 * 1024)
        print(f"100 x 500 KB with acks=all: {time.monotonic() - t:.1f} s", flush=True)
        t = time.monotonic()
        produce(bootstrap, "small", 2000, 256)
        print(f"2,000 x 256 B with acks=all: {time.monotonic() - t:.1f} s", flush=True)

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "acks-all-check"})
        _, high = c.get_watermark_offsets(TopicPartition("big", 0), timeout=30)
        check(high == 100, f"topic big holds {high} records, not 100")
        small = sum(c.get_watermark_offsets(TopicPartition("small", p), timeout=30)[1] for p in range(4))
        check(small == 2000, f"topic small holds {small} records, not 2000")
        c.close()
        rc = broker.stop()
        check(rc == 0, f"sluice serve exited {rc} after SIGTERM")
        print("PASS: acks=all does not wait for flush.ms")
        return 0
    except Exception as e:
        import traceback
        traceback.print_exc()
        print(f"FAIL: acks=all: {e}")
        print(broker.logs())
        return 1
    finally:
        broker.cleanup()


if __name__ == "__main__":
    sys.exit(main())
