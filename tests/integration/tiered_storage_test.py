#!/usr/bin/python3
"""Tiered storage's configuration through real clients (issue 27, docs/design/0025).

Usage: tiered_storage_test.py path/to/sluice

What is built so far, checked with confluent-kafka's admin client:
- a broker without a `tiered_storage:` section refuses remote.storage.enable=true
  (INVALID_CONFIG naming the missing section), at CreateTopics and at AlterConfigs;
- a broker with one creates a tiered topic; DescribeConfigs shows remote.storage.enable,
  local.retention.ms and local.retention.bytes (defaults -2, as Kafka's);
- refused as Kafka refuses them: tiering a compacted topic, a local retention longer
  than the whole, bad values, turning tiering off (also by an AlterConfigs leaving the
  key out); topics.defaults with remote.storage.enable on a broker
  without the section, a tiered_storage.bucket that is not s3://, and a bad
  tiered_storage.cache_bytes or cache_dir (or either without a bucket) refuse to start, as
  do a remote_fetch_max_wait_ms below 1 or not a number and a chunk_bytes outside 1MiB-1GiB.
(No S3 is needed: nothing is uploaded here; tiered_storage_s3_test checks the uploads.)
"""

import subprocess
import sys
import tempfile

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from sluice_broker import FAST_GROUPS, Broker, TestFailure, check

# An S3 endpoint nothing listens on: these checks upload nothing (no segment closes).
TIERED = (FAST_GROUPS + "tiered_storage:\n  bucket: s3://tiers/prefix/\n"
          "s3:\n  endpoint: http://127.0.0.1:9\n  access_key_id: k\n  secret_access_key: s\n")


def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create(a, name, configs):
    futures = a.create_topics([NewTopic(name, 1, 1, config=configs)], request_timeout=20)
    try:
        futures[name].result(timeout=30)
        return None
    except KafkaException as e:
        return e.args[0]


def expect_invalid(err, says, what):
    check(err is not None, f"{what}: created, not refused")
    check(err.name() == "INVALID_CONFIG", f"{what}: {err.name()}, not INVALID_CONFIG: {err}")
    check(says in err.str(), f"{what}: the error does not say '{says}': {err.str()}")
    print(f"ok   {what}: {err.str()}")


def describe(a, name):
    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    return {k: v.value for k, v in a.describe_configs([res])[res].result(timeout=30).items()}


def without_section(sluice):
    broker = Broker(sluice)
    try:
        broker.start()
        a = admin(broker)
        expect_invalid(create(a, "t1", {"remote.storage.enable": "true"}), "no tiered storage",
                       "remote.storage.enable=true without tiered_storage:")
        check(create(a, "t2", {}) is None, "a plain topic")
        # AlterConfigs cannot turn it on either.
        res = ConfigResource(ConfigResource.Type.TOPIC, "t2",
                             set_config={"remote.storage.enable": "true"})
        try:
            a.alter_configs([res])[res].result(timeout=30)
            raise TestFailure("AlterConfigs turned tiering on without tiered_storage:")
        except KafkaException as e:
            expect_invalid(e.args[0], "no tiered storage", "AlterConfigs remote.storage.enable")
        check(describe(a, "t2")["remote.storage.enable"] == "false", "t2 stays untiered")
        check(broker.stop() == 0, "serve exited non-zero")
    finally:
        broker.cleanup()


def with_section(sluice):
    broker = Broker(sluice, config=TIERED)
    try:
        broker.start()
        a = admin(broker)
        check(create(a, "tiered", {"remote.storage.enable": "true",
                                   "retention.ms": "86400000",
                                   "local.retention.ms": "60000"}) is None, "a tiered topic")
        c = describe(a, "tiered")
        check(c["remote.storage.enable"] == "true", f"remote.storage.enable: {c}")
        check(c["local.retention.ms"] == "60000", f"local.retention.ms: {c}")
        check(c["local.retention.bytes"] == "-2", f"local.retention.bytes: {c}")
        print("ok   a tiered topic created and described")
        check(describe(a, "tiered")["retention.ms"] == "86400000", "retention.ms")
        # Turning it off is refused, also by an AlterConfigs that merely leaves it out.
        for configs in ({"remote.storage.enable": "false"}, {"retention.ms": "86400000"}):
            res = ConfigResource(ConfigResource.Type.TOPIC, "tiered", set_config=configs)
            try:
                a.alter_configs([res])[res].result(timeout=30)
                raise TestFailure(f"AlterConfigs {configs} turned tiering off")
            except KafkaException as e:
                expect_invalid(e.args[0], "turning tiered storage off is not supported",
                               f"AlterConfigs {configs} on a tiered topic")
        check(describe(a, "tiered")["remote.storage.enable"] == "true", "still tiered")
        res = ConfigResource(ConfigResource.Type.TOPIC, "tiered", set_config={
            "remote.storage.enable": "true", "retention.ms": "86400000",
            "local.retention.ms": "120000"})
        a.alter_configs([res])[res].result(timeout=30)
        check(describe(a, "tiered")["local.retention.ms"] == "120000", "altered local.retention")
        expect_invalid(create(a, "c1", {"remote.storage.enable": "true",
                                        "cleanup.policy": "compact"}),
                       "cleanup.policy=compact", "a compacted tiered topic")
        expect_invalid(create(a, "c2", {"remote.storage.enable": "true", "retention.ms": "1000",
                                        "local.retention.ms": "5000"}),
                       "must not exceed retention.ms", "local.retention.ms > retention.ms")
        expect_invalid(create(a, "c3", {"remote.storage.enable": "true",
                                        "retention.bytes": "1000",
                                        "local.retention.bytes": "-1"}),
                       "must not exceed retention.bytes", "local.retention.bytes -1, whole 1000")
        expect_invalid(create(a, "c4", {"remote.storage.enable": "maybe"}), "true or false",
                       "remote.storage.enable=maybe")
        expect_invalid(create(a, "c5", {"local.retention.ms": "-7"}), "-2 (as retention)",
                       "local.retention.ms=-7")
        check(broker.stop() == 0, "serve exited non-zero")
        # The topic's configs survive a restart.
        broker.start()
        check(describe(admin(broker), "tiered")["local.retention.ms"] == "120000", "after restart")
        check(broker.stop() == 0, "serve exited non-zero")
    finally:
        broker.cleanup()


def refuses_to_start(sluice, config, says, what):
    broker = Broker(sluice, config=config)
    try:
        try:
            broker.start(timeout=20)
        except TestFailure as e:  # exited before listening: its logs are in the message
            check(says in str(e), f"{what}: the logs do not say '{says}': {str(e)[-800:]}")
            print(f"ok   {what}: refused at start")
            return
        raise TestFailure(f"{what}: serve started")
    finally:
        broker.cleanup()


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    sluice = sys.argv[1]
    try:
        without_section(sluice)
        with_section(sluice)
        refuses_to_start(sluice, FAST_GROUPS + "tiered_storage:\n  bucket: /var/tiers\n",
                         "not an S3 location", "tiered_storage.bucket: /var/tiers")
        refuses_to_start(sluice, FAST_GROUPS + "topics:\n  defaults:\n"
                         "    remote.storage.enable: true\n",
                         "no tiered storage", "topics.defaults remote.storage.enable without it")
        refuses_to_start(sluice, TIERED.replace("tiered_storage:\n", "tiered_storage:\n"
                                                "  cache_bytes: 1MiB\n"),
                         "must be at least 64MiB", "tiered_storage.cache_bytes of 1MiB")
        refuses_to_start(sluice, TIERED.replace("tiered_storage:\n", "tiered_storage:\n"
                                                "  cache_bytes: lots\n"),
                         "cache_bytes", "tiered_storage.cache_bytes not a size")
        for chunk in ("1KiB", "2GiB", "big"):
            refuses_to_start(sluice, TIERED.replace("tiered_storage:\n", "tiered_storage:\n"
                                                    f"  chunk_bytes: {chunk}\n"),
                             "chunk_bytes", f"tiered_storage.chunk_bytes of {chunk}")
        for wait in ("0", "soon"):
            refuses_to_start(sluice, TIERED.replace("tiered_storage:\n", "tiered_storage:\n"
                                                    f"  remote_fetch_max_wait_ms: {wait}\n"),
                             "remote_fetch_max_wait_ms",
                             f"tiered_storage.remote_fetch_max_wait_ms of {wait}")
        refuses_to_start(sluice, FAST_GROUPS + "tiered_storage:\n  cache_dir: /tmp/x\n",
                         "without tiered_storage.bucket", "tiered_storage.cache_dir alone")
        with tempfile.NamedTemporaryFile() as f:  # a file where the directory would be
            refuses_to_start(sluice, TIERED.replace("tiered_storage:\n", "tiered_storage:\n"
                                                    f"  cache_dir: {f.name}\n"),
                             "tiered_storage.cache_dir", "tiered_storage.cache_dir a file")
    except (TestFailure, subprocess.SubprocessError) as e:
        print(f"FAIL: {e}")
        return 1
    print("PASS: tiered_storage_test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
