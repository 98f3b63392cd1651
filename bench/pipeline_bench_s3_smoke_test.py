#!/usr/bin/env python3
"""Smoke test of `sluice bench pipeline --iceberg --storage s3 --quick --json` beside a
radosgw on loopback (tests/integration/s3/with-rgw.sh sets the AWS_* variables and
SLUICE_S3_BUCKET): per batch size a noop cell, an Iceberg cell into a local directory and
one into a table on S3, each a JSON object with its sink, storage and comparisons
(vs_noop; vs_local on the S3 cell), the S3 table's size read from the bucket. Never checks
a rate (benchmarks are not tests). --storage s3 without --iceberg, and a warehouse that is
not s3://, are refused with a message.

usage: pipeline_bench_s3_smoke_test.py path/to/sluice
"""
import subprocess
import sys

from kafka_bench_smoke_test import fail, json_rows


def main():
    sluice = sys.argv[1]
    cmd = [sluice, "bench", "pipeline", "--quick", "--json", "--messages", "30000",
           "--batch-sizes", "5000", "--iceberg", "--iceberg-commit-seconds", "1",
           "--storage", "s3"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    except subprocess.TimeoutExpired:
        fail("sluice bench pipeline --iceberg --storage s3 did not finish within 400 s")
    if proc.returncode != 0:
        fail(f"sluice bench pipeline --iceberg --storage s3 exited with {proc.returncode}", proc)
    rows = json_rows(proc, fail)
    cells = [(r.get("sink"), r.get("storage")) for r in rows]
    if cells != [("noop", None), ("iceberg", "local"), ("iceberg", "s3")]:
        fail(f"cells {cells}, expected noop, iceberg local, iceberg s3", proc)
    s3 = rows[2]
    for key in ("msgs_per_s", "vs_noop", "vs_local", "commits", "table_mib", "table_files"):
        if key not in s3:
            fail(f"the S3 cell has no {key}: {s3}", proc)
    if not s3["msgs_per_s"] > 0 or not s3["table_files"] >= 1 or not s3["table_mib"] > 0:
        fail(f"the S3 cell wrote nothing: {s3}", proc)

    for flags, words in ((["--storage", "s3"], "add --iceberg"),
                         (["--iceberg", "--storage", "s3", "--s3-warehouse", "/tmp/x"],
                          "not an s3:// location")):
        bad = subprocess.run([sluice, "bench", "pipeline", "--quick"] + flags,
                             capture_output=True, text=True, timeout=60)
        if bad.returncode == 0 or words not in bad.stderr:
            fail(f"{flags}: expected a refusal naming '{words}'", bad)
    print("ok")


if __name__ == "__main__":
    main()
