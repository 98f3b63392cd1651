"""What the tiered-storage tests share (issue 27, docs/design/0025): the S3 settings
tests/integration/s3/with-rgw.sh exports, and radosgw's listing of a partition's objects
read with botocore, an S3 client independent of sluice's.
"""

import functools
import os
import re

import botocore.session
from botocore.config import Config

from confluent_kafka import Producer

from sluice_broker import TestFailure, check


def env(name):
    value = os.environ.get(name)
    if not value:
        raise TestFailure(f"${name} is not set: run under tests/integration/s3/with-rgw.sh")
    return value


@functools.lru_cache(maxsize=None)
def s3(endpoint):
    """A botocore client of the store at `endpoint` (radosgw itself, not a fault proxy).
    One per endpoint: making one costs about 0.1 s of CPU, and the tests poll listings."""
    return botocore.session.get_session().create_client(
        "s3", endpoint_url=endpoint, region_name=os.environ.get("AWS_REGION"),
        aws_access_key_id=env("AWS_ACCESS_KEY_ID"),
        aws_secret_access_key=env("AWS_SECRET_ACCESS_KEY"),
        config=Config(s3={"addressing_style": "path"}))


def keys(endpoint, prefix):
    """Every key of the bucket under `prefix`."""
    client, out, token = s3(endpoint), [], None
    while True:
        kw = {"Bucket": env("SLUICE_S3_BUCKET"), "Prefix": prefix}
        if token:
            kw["ContinuationToken"] = token
        page = client.list_objects_v2(**kw)
        out += [o["Key"] for o in page.get("Contents", [])]
        if not page.get("IsTruncated"):
            return out
        token = page["NextContinuationToken"]


def manifests(endpoint, prefix, partition=None):
    """(base, next, key) of the segment manifests under `prefix` (of `partition` when given),
    by next offset (a new leader's segment may begin below the last one's end)."""
    out = []
    where = rf"/{partition}/" if partition is not None else r"/"
    for k in keys(endpoint, prefix):
        m = re.match(rf".*{where}(\d{{20}})-(\d{{20}})\.manifest\.json$", k)
        if m:
            out.append((int(m.group(1)), int(m.group(2)), k))
    return sorted(out, key=lambda r: (r[1], -r[0]))


def produce(bootstrap, topic, partitions, first, count, want, **config):
    """Records first..first+count-1 over the partitions (acks=all, and `config`); `want`
    gets (partition, offset) -> (key, value)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "batch.size": 16384, **config})
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            want[(msg.partition(), msg.offset())] = (msg.key(), msg.value())

    for i in range(first, first + count):
        p.produce(topic, key=f"k{i}".encode(), value=(f"{i:08d}-" + "v" * 150).encode(),
                  partition=i % partitions, on_delivery=report)
        if i % 500 == 0:
            p.poll(0)
    check(p.flush(60) == 0 and not errors, f"not every record was delivered: {errors[:3]}")
