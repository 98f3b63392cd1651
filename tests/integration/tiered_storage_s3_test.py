#!/usr/bin/python3
"""Tiered storage's uploads against radosgw (issue 27, docs/design/0025, decisions 3-4).

Usage: s3/with-rgw.sh BUCKET /usr/bin/python3 tiered_storage_s3_test.py path/to/sluice
(with-rgw.sh exports the AWS_* variables and SLUICE_S3_BUCKET).

A single `sluice serve` with `tiered_storage: {bucket: s3://BUCKET/tiers}` and a topic
with remote.storage.enable=true and small segments; confluent-kafka produces with acks=all.
Checked with botocore, independently of sluice:
- every closed segment is uploaded: a manifest per segment, named by its base and next
  offsets, the manifests' ranges contiguous from offset 0, and each uploaded .log (and
  .index, .timeindex) byte for byte the broker's local file;
- the active segment is not uploaded; an untiered topic uploads nothing;
- after a SIGKILL and a restart the uploader goes on after the last manifest: more data,
  no manifest twice, still contiguous;
- /metrics shows sluice_tiered_remote_bytes and sluice_tiered_upload_lag_bytes;
- through tests/tools/s3_fault_proxy.py: S3 down (every PUT answered 503) while segments
  close: nothing new is uploaded, the failures are counted, the local segments stay; S3
  back: the uploads catch up. Then seeded faults on a third of the requests (500s, 503s,
  resets before and after the store acted, cut replies): every segment still lands once,
  contiguous, byte for byte;
- retention moving the log start (retention.bytes lowered): the remote segments wholly
  below it are deleted, manifest and files, the rest still contiguous;
- deleting the topic deletes every object it had in the bucket.
"""

import json
import os
import re
import sys
import time
import urllib.request

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

import tiered_util
from sluice_broker import FAST_GROUPS, Broker, TestFailure, check, wait_until
from tiered_util import env

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tools"))
from s3_fault_proxy import S3FaultProxy  # noqa: E402

TOPIC = "tiered"
PARTITIONS = 2
SEGMENT_BYTES = 64 * 1024


RGW = None  # the store itself (the broker goes through the fault proxy)


def s3():
    return tiered_util.s3(RGW)


def keys(prefix):
    return tiered_util.keys(RGW, prefix)


def get(key):
    return s3().get_object(Bucket=env("SLUICE_S3_BUCKET"), Key=key)["Body"].read()


def produce(bootstrap, first, count):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "batch.size": 16384})
    for i in range(first, first + count):
        p.produce(TOPIC, key=str(i).encode(), value=(f"{i:08d}-" + "x" * 200).encode(),
                  partition=i % PARTITIONS)
        if i % 1000 == 0:
            p.poll(0)
    check(p.flush(60) == 0, "not every record was delivered")


def local_segments(broker, partition):
    d = os.path.join(broker.data_dir, f"{TOPIC}-{partition}")
    return sorted(int(n[:20]) for n in os.listdir(d) if n.endswith(".log") and len(n) == 24)


def manifests(prefix):
    return sorted(tiered_util.manifests(RGW, prefix))


def partition_prefix(partition):
    # The topic id is in the name: find it from the listing.
    for k in keys(f"tiers/{TOPIC}-"):
        m = re.match(rf"(tiers/{TOPIC}-[A-Za-z0-9_-]{{22}}/{partition}/)", k)
        if m:
            return m.group(1)
    return None


def check_uploads(broker, label):
    """Every closed local segment has a manifest; the remote copies are the local bytes."""
    for p in range(PARTITIONS):
        segs = local_segments(broker, p)
        closed = segs[:-1]  # the last is the active one
        check(len(closed) >= 2, f"partition {p}: only {len(segs)} segments")
        prefix = wait_until(lambda: partition_prefix(p), 30, f"partition {p}'s prefix")

        def all_up():
            ms = manifests(prefix)
            return ms if {b for b, _, _ in ms} >= set(closed) else None

        ms = wait_until(all_up, 60, f"{label}: partition {p}'s {len(closed)} closed segments uploaded")
        bases = [b for b, _, _ in ms]
        check(len(bases) == len(set(bases)), f"{label}: a segment uploaded twice: {bases}")
        check(ms[0][0] == 0, f"{label}: the first remote segment starts at {ms[0][0]}")
        for (b1, n1, _), (b2, _, _) in zip(ms, ms[1:]):
            check(n1 == b2, f"{label}: remote segments not contiguous: [{b1},{n1}) then {b2}")
        check(segs[-1] not in bases, f"{label}: the active segment {segs[-1]} was uploaded")
        for base, nxt, key in ms:
            m = json.loads(get(key))
            check(m["base_offset"] == base and m["next_offset"] == nxt, f"manifest {key}: {m}")
            for f in m["files"]:
                ext = f[f.rindex("."):]
                local = os.path.join(broker.data_dir, f"{TOPIC}-{p}", f"{base:020d}{ext}")
                if not os.path.exists(local):
                    continue  # deleted locally since (retention): nothing to compare
                with open(local, "rb") as fh:
                    want = fh.read()
                got = get(prefix + f)
                check(got == want, f"{label}: {prefix + f} differs from {local} "
                                   f"({len(got)} vs {len(want)} bytes)")
            check(m["size"] == os.path.getsize(os.path.join(
                broker.data_dir, f"{TOPIC}-{p}", f"{base:020d}.log")), f"size of {key}")
        print(f"ok   {label}: partition {p}: {len(ms)} segments uploaded, byte for byte, "
              f"contiguous [0, {ms[-1][1]})")


def metrics(broker):
    text = open(broker.out_path).read()
    url = re.search(r"metrics on (http://[0-9.:]+)/metrics", text).group(1)
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        return r.read().decode()


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    global RGW
    bucket = env("SLUICE_S3_BUCKET")
    RGW = env("AWS_ENDPOINT_URL_S3")
    host, port = RGW.split("://", 1)[1].rsplit(":", 1)
    proxy = S3FaultProxy(host, int(port)).start()
    os.environ["AWS_ENDPOINT_URL_S3"] = f"http://127.0.0.1:{proxy.port}"  # the broker's
    config = FAST_GROUPS + (f"tiered_storage:\n  bucket: s3://{bucket}/tiers\n"
                            "s3:\n  request_timeout: 5s\n"
                            "storage:\n  retention_check_interval: 1s\n")
    broker = Broker(sys.argv[1], config=config)
    try:
        broker.start()
        a = AdminClient({"bootstrap.servers": broker.bootstrap})
        fs = a.create_topics([
            NewTopic(TOPIC, PARTITIONS, 1, config={"remote.storage.enable": "true",
                                                   "segment.bytes": str(SEGMENT_BYTES)}),
            NewTopic("plain", 1, 1, config={"segment.bytes": str(SEGMENT_BYTES)})])
        for f in fs.values():
            f.result(timeout=30)
        produce(broker.bootstrap, 0, 3000)
        p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        for i in range(1500):
            p.produce("plain", value=b"y" * 200)
        check(p.flush(60) == 0, "plain: not delivered")
        check_uploads(broker, "first run")
        check(not keys("tiers/plain-"), "the untiered topic uploaded something")
        m = metrics(broker)
        check(re.search(r'sluice_tiered_remote_bytes\{[^}]*topic="tiered"[^}]*\} [1-9]', m),
              "no sluice_tiered_remote_bytes for the topic")
        check("sluice_tiered_upload_lag_bytes" in m, "no sluice_tiered_upload_lag_bytes")
        print("ok   /metrics shows the remote bytes and the upload lag")

        # SIGKILL, restart, more data: the uploads go on after the last manifest.
        broker.kill()
        broker.start()
        produce(broker.bootstrap, 3000, 3000)
        check_uploads(broker, "after a SIGKILL and a restart")

        # S3 down: every PUT refused while more segments close.
        before = {p: manifests(partition_prefix(p)) for p in range(PARTITIONS)}
        proxy.set_faults(err503=1.0, methods="PUT,POST")
        produce(broker.bootstrap, 6000, 3000)
        time.sleep(4)
        for p in range(PARTITIONS):
            check(manifests(partition_prefix(p)) == before[p],
                  f"partition {p}: uploaded while S3 refused every PUT")
            closed = local_segments(broker, p)[:-1]
            check(max(closed) > before[p][-1][0], f"partition {p}: no new closed segment")
        errors = re.findall(r'sluice_tiered_upload_errors_total\{[^}]*\} (\d+)', metrics(broker))
        check(errors and sum(int(e) for e in errors) > 0, "the failed uploads were not counted")
        print(f"ok   S3 down: nothing uploaded, {sum(int(e) for e in errors)} failures counted")
        proxy.set_faults()
        check_uploads(broker, "S3 back")

        # Seeded faults on a third of the requests, some after the store acted.
        proxy.set_faults(seed=27, err500=0.06, err503=0.06, reset_before=0.06, reset_after=0.06,
                         err500_after=0.05, cut_body=0.04)
        produce(broker.bootstrap, 9000, 3000)
        check_uploads(broker, "seeded faults (seed 27)")
        proxy.set_faults()
        print(f"     proxy: {json.dumps(proxy.stats())}")

        # Retention moves the log start: the remote segments below it go, manifest and files.
        before = {p: manifests(partition_prefix(p)) for p in range(PARTITIONS)}
        files_of = {key: [partition_prefix(p) + f for f in json.loads(get(key))["files"]]
                    for p in range(PARTITIONS) for _, _, key in before[p]}
        res = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, set_config={
            "remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
            "retention.bytes": str(3 * SEGMENT_BYTES)})
        a = AdminClient({"bootstrap.servers": broker.bootstrap})
        a.alter_configs([res])[res].result(30)
        for p in range(PARTITIONS):
            def trimmed():
                segs = local_segments(broker, p)
                ms = manifests(partition_prefix(p))
                if len(segs) > 4 or not ms or ms[0][0] != segs[0]:
                    return None
                return segs, ms
            segs, ms = wait_until(trimmed, 60, f"partition {p}: remote segments below the start gone")
            gone = [(b, n, k) for b, n, k in before[p] if n <= segs[0]]
            check(gone, f"partition {p}: retention deleted nothing")
            left = set(keys(partition_prefix(p)))
            for _, _, key in gone:
                check(key not in left, f"{key} is still there")
                for f in files_of[key]:
                    check(f not in left, f"{f} of a deleted segment is still there")
            for (b1, n1, _), (b2, _, _) in zip(ms, ms[1:]):
                check(n1 == b2, f"partition {p}: not contiguous after retention")
            print(f"ok   retention: partition {p}: {len(gone)} remote segments below the log "
                  f"start {segs[0]} deleted with their files; {len(ms)} left, from {ms[0][0]}")

        # Deleting the topic deletes everything it had in the bucket.
        prefixes = [partition_prefix(p) for p in range(PARTITIONS)]
        a.delete_topics([TOPIC])[TOPIC].result(timeout=30)
        wait_until(lambda: not any(keys(pre) for pre in prefixes), 60,
                   "the deleted topic's objects gone")
        print("ok   a deleted topic's objects are gone from the bucket")
        check(broker.stop() == 0, "serve exited non-zero")
    except TestFailure as e:
        print(f"FAIL: {e}")
        print(broker.logs())
        return 1
    finally:
        broker.cleanup()
        proxy.close()
    print("PASS: tiered_storage_s3_test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
