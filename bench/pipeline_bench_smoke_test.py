#!/usr/bin/env python3
"""Smoke test of `sluice bench pipeline --sink postgres --quick --json`: it starts its own
broker and PostgreSQL server, runs the passthrough pipeline into a noop sink and into a
PostgreSQL table, loads the same rows back with a plain COPY FROM a file (the reference,
which also checks the table held exactly the events), and prints one JSON object per cell.
Checks that the run succeeds and the JSON has the cells with their fields and comparisons;
never checks a rate or a duration (benchmarks are not tests). Bad flag combinations are
refused with a message.

usage: pipeline_bench_smoke_test.py path/to/sluice
"""
import subprocess
import sys

from kafka_bench_smoke_test import fail, json_rows


def main():
    sluice = sys.argv[1]
    cmd = [sluice, "bench", "pipeline", "--quick", "--json", "--messages", "50000",
           "--batch-sizes", "5000", "--sink", "postgres"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        fail("sluice bench pipeline --sink postgres did not finish within 240 s")
    if proc.returncode != 0:
        fail(f"sluice bench pipeline exited with {proc.returncode}", proc)
    rows = json_rows(proc, fail)
    if [(r.get("sink"), r.get("batch_size")) for r in rows] != [("noop", 5000),
                                                                  ("postgres", 5000)]:
        fail(f"cells {[(r.get('sink'), r.get('batch_size')) for r in rows]}, expected noop "
             "then postgres at batch 5000", proc)
    pg = rows[1]
    for field in ["msgs_per_s", "vs_noop", "copy_from_file_rows_per_s", "vs_copy_from_file",
                  "peak_rss_mib", "batch_mean_ms", "flush_mean_ms", "messages", "commit"]:
        if field not in pg:
            fail(f"the postgres cell has no {field!r}: {pg}", proc)
    if not (pg["msgs_per_s"] > 0 and pg["copy_from_file_rows_per_s"] > 0):
        fail(f"a rate is not positive: {pg}", proc)
    if abs(pg["vs_copy_from_file"] - pg["msgs_per_s"] / pg["copy_from_file_rows_per_s"]) > 0.01:
        fail(f"vs_copy_from_file is not msgs_per_s / copy_from_file_rows_per_s: {pg}", proc)

    for bad, says in [(["--sink", "mysql"], "--sink"),
                      (["--sink", "postgres", "--handlers", "InferredMemBatch"], "StructuredBatch"),
                      (["--sink", "postgres", "--window"], "--window"),
                      (["--sink", "postgres", "--iceberg"], "--iceberg")]:
        proc = subprocess.run([sluice, "bench", "pipeline", "--quick"] + bad,
                              capture_output=True, text=True, timeout=60)
        if proc.returncode == 0 or says not in proc.stderr + proc.stdout:
            fail(f"{bad}: exit {proc.returncode}, expected a refusal naming {says!r}", proc)
    print("PASS: pipeline_bench_smoke_test")


if __name__ == "__main__":
    main()
