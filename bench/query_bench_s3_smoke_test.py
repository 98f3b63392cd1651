#!/usr/bin/env python3
"""Smoke test of `sluice bench query --storage s3` (issue 26), run beside a throwaway radosgw
by tests/integration/s3/with-rgw.sh (which exports AWS_* and SLUICE_S3_BUCKET): at 20,000
rows, one run, every query, the JSON has a local warm line and an s3 cold and an s3 warm line
per query with the fields the issue asks for (storage, cache, the bytes fetched, the measured
S3 bandwidth and the cold bound), the cold runs fetched something and the warm runs nothing,
and every answer, local and S3, equals DuckDB's; a second run finds the S3 copy complete;
without S3 configured, or without a place for the tables, `--storage s3` fails with a clear
message; malformed S3 options fail naming them. Never checks a duration (benchmarks are not
tests).

usage: with-rgw.sh BUCKET query_bench_s3_smoke_test.py path/to/sluice
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

QUERIES = ["q1", "q2", "q3", "q4"]
COMMON = ["storage", "cache", "engine", "query", "rows", "threads", "memory_setting", "median_s",
          "plan_s", "run_s", "times_s", "finished_runs", "runs", "answer_ok", "answer", "reference",
          "warehouse", "endpoint", "object_store", "s3_get_mb_per_s", "s3_get_parallel_mb_per_s",
          "cpu", "cores", "commit"]
COLD = ["downloaded_bytes", "downloads", "s3_mb_per_s", "local_s", "transfer_s", "bound_s",
        "ratio_to_bound", "target_met", "extra_plan_s", "extra_run_s"]
WARM = ["downloaded_bytes", "local_s", "ratio_to_local", "target_ratio", "target_met"]


def fail(msg, proc=None):
    print(f"FAIL: {msg}")
    if proc is not None:
        print("--- stdout:\n" + proc.stdout)
        print("--- stderr:\n" + proc.stderr)
    sys.exit(1)


def run(cmd, timeout, env=None):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        fail(f"{' '.join(cmd)} did not finish within {timeout} s")


def json_lines(proc):
    rows = []
    for line in proc.stdout.splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                fail(f"not JSON: {line!r}: {e}", proc)
    return rows


def main():
    sluice = sys.argv[1]
    if not os.environ.get("SLUICE_S3_BUCKET") or not os.environ.get("AWS_ENDPOINT_URL_S3"):
        fail("run me under tests/integration/s3/with-rgw.sh (no SLUICE_S3_BUCKET / AWS_* set)")
    data = tempfile.mkdtemp(prefix="sluice-query-bench-s3-test-")
    try:
        base = [sluice, "bench", "query", "--rows", "20000", "--runs", "1", "--data-dir", data,
                "--memory-settings", "1GB"]
        # DuckDB's answers first (kept beside the data): the S3 runs are checked against them.
        ref = run(base + ["--engines", "duckdb", "--queries", ",".join(QUERIES), "--json"], 120)
        if ref.returncode != 0:
            fail(f"the DuckDB reference run exited with {ref.returncode}", ref)

        proc = run(base + ["--storage", "s3", "--json"], 240)
        if proc.returncode != 0:
            fail(f"sluice bench query --storage s3 exited with {proc.returncode}", proc)
        rows = json_lines(proc)
        cells = sorted((r.get("query"), r.get("storage"), r.get("cache")) for r in rows)
        expected = sorted((q, s, c) for q in QUERIES
                          for s, c in [("local", "warm"), ("s3", "cold"), ("s3", "warm")])
        if cells != expected:
            fail(f"lines {cells}, expected {expected}", proc)
        for r in rows:
            what = f"{r['query']} {r['storage']} {r['cache']}"
            fields = COMMON + (COLD if r["storage"] == "s3" and r["cache"] == "cold" else
                               WARM if r["storage"] == "s3" else ["first_query_median_s"])
            missing = [f for f in fields if f not in r]
            if missing:
                fail(f"{what}: missing {missing}", proc)
            if r["rows"] != 20000 or r["memory_setting"] != "1GB" or r["runs"] != 1:
                fail(f"{what}: settings not as given: {r}", proc)
            if r["finished_runs"] != 1 or r["median_s"] is None:
                fail(f"{what}: did not finish: {r}", proc)
            if r["answer_ok"] is not True or r["reference_from"] != "duckdb" or \
                    r["answer"] != r["reference"]:
                fail(f"{what}: answer {r['answer']} vs DuckDB's {r['reference']}", proc)
            if not (r["s3_get_mb_per_s"] > 0 and r["s3_get_parallel_mb_per_s"] > 0):
                fail(f"{what}: no S3 bandwidth measured: {r}", proc)
            if r["endpoint"] != os.environ["AWS_ENDPOINT_URL_S3"]:
                fail(f"{what}: endpoint {r['endpoint']!r}", proc)
            if "radosgw" not in r["object_store"]:
                fail(f"{what}: the object store is not named: {r['object_store']!r}", proc)
            if r["storage"] == "s3":
                if not r["warehouse"].startswith(f"s3://{os.environ['SLUICE_S3_BUCKET']}/"):
                    fail(f"{what}: warehouse {r['warehouse']}", proc)
                if r["cache"] == "cold":
                    if not r["downloaded_bytes"] or r["downloaded_bytes"] <= 0 or \
                            not all(d > 0 for d in r["downloads"]):
                        fail(f"{what}: a cold run fetched nothing: {r}", proc)
                    if r["bound_s"] is None or r["transfer_s"] is None or r["local_s"] is None:
                        fail(f"{what}: no cold bound: {r}", proc)
                elif r["downloaded_bytes"] != 0:
                    fail(f"{what}: a warm run fetched {r['downloaded_bytes']} bytes", proc)
        # Every file of the sales table for q3 and q4 (no filter), fewer for q1 (pruned by ts).
        cold = {r["query"]: r["downloaded_bytes"] for r in rows
                if r["storage"] == "s3" and r["cache"] == "cold"}
        if not cold["q1"] < cold["q3"] == cold["q4"] < cold["q2"]:
            fail(f"bytes fetched per query not as the plans need: {cold}", proc)

        # The S3 copy is found complete the second time.
        again = run(base + ["--storage", "s3", "--queries", "q1", "--json"], 120)
        if again.returncode != 0 or "copying the tables" in again.stderr:
            fail("the second run did not reuse the S3 copy", again)
        # The table form names what it ran on.
        table = run(base + ["--storage", "s3", "--queries", "q1"], 120)
        if table.returncode != 0:
            fail(f"the table run exited with {table.returncode}", table)
        for needle in ["endpoint " + os.environ["AWS_ENDPOINT_URL_S3"], "radosgw", "s3 GET",
                       "machine", "targets (issue 26)"]:
            if needle not in table.stdout:
                fail(f"the table does not show {needle!r}", table)

        # Without S3 configured: a clear error, nothing run.
        bare = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        proc = run(base + ["--storage", "s3"], 30, env=bare)
        if proc.returncode == 0 or "AWS_ACCESS_KEY_ID" not in proc.stderr or proc.stdout.strip():
            fail("--storage s3 without S3 configured did not fail clearly", proc)
        nowhere = {k: v for k, v in os.environ.items() if k != "SLUICE_S3_BUCKET"}
        proc = run(base + ["--storage", "s3"], 30, env=nowhere)
        if proc.returncode == 0 or "--s3-warehouse" not in proc.stderr:
            fail("--storage s3 without a place for the tables did not fail clearly", proc)
        proc = run(base + ["--storage", "s3", "--s3-warehouse", "s3://no-such-bucket-here/x"], 60)
        if proc.returncode == 0 or "no-such-bucket-here" not in proc.stderr:
            fail("--storage s3 with a missing bucket did not fail clearly", proc)

        # Malformed options: a clear error naming the option, nothing run.
        bad = [
            (["--storage", "s4"], "--storage"),
            (["--s3-warehouse", "s3://b/p"], "--s3-warehouse"),
            (["--storage", "s3", "--s3-warehouse", "/tmp/x"], "--s3-warehouse"),
            (["--storage", "s3", "--engines", "duckdb"], "--engines"),
            (["--storage", "s3", "--chart", "out.png"], "--chart"),
        ]
        for args, needle in bad:
            proc = run([sluice, "bench", "query", "--data-dir", data] + args, 30)
            if proc.returncode == 0:
                fail(f"{args}: accepted", proc)
            if needle not in proc.stderr:
                fail(f"{args}: the error does not name {needle!r}", proc)
            if proc.stdout.strip():
                fail(f"{args}: printed results", proc)
    finally:
        shutil.rmtree(data, ignore_errors=True)
    print("OK")


if __name__ == "__main__":
    main()
