#!/usr/bin/env python3
"""Smoke test of `sluice bench pipeline --sink postgres --in-process --quick --json` (and of `--in-process`,
each cell over Kafka and in-process beside the decoder's own ceiling): it starts its own
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


def run_json(sluice, flags, timeout):
    """`sluice bench pipeline --quick --json` of 50,000 events at batch 5000 with `flags`:
    the finished process and its JSON rows."""
    cmd = [sluice, "bench", "pipeline", "--quick", "--json", "--messages", "50000",
           "--batch-sizes", "5000"] + flags
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f"sluice bench pipeline {' '.join(flags)} did not finish within {timeout} s")
    if proc.returncode != 0:
        fail(f"sluice bench pipeline {' '.join(flags)} exited with {proc.returncode}", proc)
    return proc, json_rows(proc, fail)


def main():
    sluice = sys.argv[1]
    proc, rows = run_json(sluice, ["--sink", "postgres", "--in-process"], 300)
    cells = [(r.get("sink"), r.get("batch_size"), r.get("source")) for r in rows]
    if cells != [("noop", 5000, "kafka"), ("postgres", 5000, "kafka"),
                 ("noop", 5000, "in_process"), ("postgres", 5000, "in_process")]:
        fail(f"cells {cells}, expected noop then postgres at batch 5000, over kafka then "
             "in_process", proc)
    for pg in [rows[1], rows[3]]:
        for field in ["msgs_per_s", "vs_noop", "copy_from_file_rows_per_s", "vs_copy_from_file",
                      "peak_rss_mib", "batch_mean_ms", "flush_mean_ms", "messages", "commit"]:
            if field not in pg:
                fail(f"the postgres cell has no {field!r}: {pg}", proc)
        if not (pg["msgs_per_s"] > 0 and pg["copy_from_file_rows_per_s"] > 0):
            fail(f"a rate is not positive: {pg}", proc)
        if abs(pg["vs_copy_from_file"] - pg["msgs_per_s"] / pg["copy_from_file_rows_per_s"]) > 0.01:
            fail(f"vs_copy_from_file is not msgs_per_s / copy_from_file_rows_per_s: {pg}", proc)

    # --in-process: each cell over both sources, beside the decoder's own ceiling.
    proc, rows = run_json(sluice, ["--handlers", "StructuredBatch", "--in-process"], 180)
    if [r.get("source") for r in rows] != ["kafka", "in_process"]:
        fail(f"sources {[r.get('source') for r in rows]}, expected kafka then in_process", proc)
    for r in rows:
        if not (r.get("decoder_only_msgs_per_s", 0) > 0 and r.get("msgs_per_s", 0) > 0):
            fail(f"no decoder ceiling or rate: {r}", proc)
        if abs(r["vs_decoder_only"] - r["msgs_per_s"] / r["decoder_only_msgs_per_s"]) > 0.01:
            fail(f"vs_decoder_only is not msgs_per_s / decoder_only_msgs_per_s: {r}", proc)
    if abs(rows[1]["vs_kafka"] - rows[1]["msgs_per_s"] / rows[0]["msgs_per_s"]) > 0.01:
        fail(f"vs_kafka is not the in-process rate over the kafka cell's: {rows}", proc)

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
