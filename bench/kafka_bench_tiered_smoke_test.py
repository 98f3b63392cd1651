#!/usr/bin/env python3
"""Smoke test of `sluice bench kafka --tiered --quick --json` beside a radosgw on loopback
(tests/integration/s3/with-rgw.sh sets the AWS_* variables and SLUICE_S3_BUCKET): one JSON
object, phase "tiered_fetch", with the fields issue 27's benchmark names (mb_per_s,
s3_get_mb_per_s) and the records it read back; nothing of the run left in the bucket.
Never checks a rate (benchmarks are not tests). --tiered with --bootstrap, and without a
bucket, are refused with a message.

usage: kafka_bench_tiered_smoke_test.py path/to/sluice
"""
import os
import subprocess
import sys

from kafka_bench_smoke_test import fail, json_rows


def main():
    sluice = sys.argv[1]
    cmd = [sluice, "bench", "kafka", "--tiered", "--quick", "--json", "--partitions", "4"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    except subprocess.TimeoutExpired:
        fail("sluice bench kafka --tiered did not finish within 400 s")
    if proc.returncode != 0:
        fail(f"sluice bench kafka --tiered exited with {proc.returncode}", proc)
    rows = json_rows(proc, fail)
    if len(rows) != 1 or rows[0].get("phase") != "tiered_fetch":
        fail(f"expected one tiered_fetch line, got {[r.get('phase') for r in rows]}", proc)
    r = rows[0]
    for key in ("mb_per_s", "s3_get_mb_per_s", "s3_get_parallel_mb_per_s", "vs_s3_get",
                "records", "bytes", "segment_bytes", "partitions"):
        if key not in r:
            fail(f"the line has no {key}: {r}", proc)
    if not r["records"] > 0 or not r["bytes"] >= 100_000_000 or not r["s3_get_mb_per_s"] > 0:
        fail(f"nothing read from S3: {r}", proc)
    if r["partitions"] != 4:
        fail(f"partitions {r['partitions']}, asked 4", proc)

    env = dict(os.environ)
    env.pop("SLUICE_S3_BUCKET", None)
    for flags, words, e in ((["--bootstrap", "127.0.0.1:1"], "runs its own single broker", None),
                            ([], "SLUICE_S3_BUCKET", env)):
        bad = subprocess.run([sluice, "bench", "kafka", "--tiered", "--quick"] + flags,
                             capture_output=True, text=True, timeout=60, env=e)
        if bad.returncode == 0 or words not in bad.stderr:
            fail(f"{flags}: expected a refusal naming '{words}'", bad)
    print("ok")


if __name__ == "__main__":
    main()
