#!/usr/bin/env python3
"""Smoke test of `sluice bench query`: at 20,000 rows, one run, every query, engines duckdb,
polars, sluice-iceberg and sluice-parquet (each run a `sluice serve` queried over the
Postgres protocol), the JSON has a line per engine, query and memory setting with the fields the
issue asks for, and every answer agrees with DuckDB's; a cap far below any process kills
every run (the watchdog) without failing the bench; malformed options fail with an error
that names them. Never checks a duration (benchmarks are not tests).

usage: query_bench_smoke_test.py path/to/sluice
"""
import glob
import json
import shutil
import subprocess
import sys
import tempfile

FIELDS = ["engine", "query", "rows", "threads", "memory_setting", "median_s", "peak_rss_gib",
          "finished_runs", "runs", "answer_ok"]
QUERIES = ["q1", "q2", "q3", "q4"]
ENGINES = ["duckdb", "polars", "sluice-iceberg", "sluice-parquet"]


def fail(msg, proc=None):
    print(f"FAIL: {msg}")
    if proc is not None:
        print("--- stdout:\n" + proc.stdout)
        print("--- stderr:\n" + proc.stderr)
    sys.exit(1)


def run(cmd, timeout):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
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
    data = tempfile.mkdtemp(prefix="sluice-query-bench-test-")
    try:
        base = [sluice, "bench", "query", "--rows", "20000", "--runs", "1", "--data-dir", data,
                "--memory-settings", "1GB", "--json"]

        # Every query on every engine: answers agree with DuckDB's.
        proc = run(base + ["--engines", ",".join(ENGINES), "--queries", ",".join(QUERIES)], 240)
        if proc.returncode != 0:
            fail(f"sluice bench query exited with {proc.returncode}", proc)
        rows = json_lines(proc)
        cells = sorted((r.get("engine"), r.get("query")) for r in rows)
        expected = sorted((e, q) for e in ENGINES for q in QUERIES)
        if cells != expected:
            fail(f"cells {cells}, expected {expected}", proc)
        for r in rows:
            missing = [f for f in FIELDS if f not in r]
            if missing:
                fail(f"{r['engine']} {r['query']}: missing {missing}", proc)
            if r["rows"] != 20000 or r["threads"] != 2 or r["memory_setting"] != "1GB" or r["runs"] != 1:
                fail(f"settings not as given: {r}", proc)
            if r["finished_runs"] != 1 or r["answer_ok"] is not True or r["median_s"] is None:
                fail(f"{r['engine']} {r['query']}: not finished with the right answer: {r}", proc)
            if r["answer"] != r["reference"] or not all(v.lstrip("-").isdigit() for v in r["answer"]):
                fail(f"{r['engine']} {r['query']}: answer {r['answer']} vs reference {r['reference']}", proc)
            # The server's planning time, from its log: only the sluice engines have one.
            planning = r.get("planning_ms")
            if r["engine"].startswith("sluice-"):
                if not isinstance(planning, (int, float)) or planning < 0 or \
                        not 0 <= r.get("planning_share", -1) < 1:
                    fail(f"{r['engine']} {r['query']}: planning {planning}, share {r.get('planning_share')}", proc)
            elif planning is not None:
                fail(f"{r['engine']} {r['query']}: a planning time from an engine without one", proc)
        # The data was generated once and is reused (cached beside the reference answers).
        again = run(base + ["--engines", "duckdb", "--queries", "q1"], 60)
        if again.returncode != 0 or "generating" in again.stderr:
            fail("the second run did not reuse the cached data", again)

        # The watchdog: a cap no process fits under kills every run; that is a result.
        capped = run(base + ["--engines", "polars", "--queries", "q1", "--cap-gib", "0.001"], 60)
        if capped.returncode != 0:
            fail(f"a capped run exited with {capped.returncode}", capped)
        (r,) = json_lines(capped)
        if r["finished_runs"] != 0 or r["answer_ok"] is not None or r["outcomes"] != ["killed over cap"]:
            fail(f"the capped run was not killed over the cap: {r}", capped)

        # --small-statements: a line per statement with sluice's rate and PostgreSQL's beside
        # it (when installed), every statement answered by both.
        small = run([sluice, "bench", "query", "--data-dir", data, "--rows", "20000",
                     "--small-statements", "--clients", "2", "--statement-seconds", "1", "--json"],
                    180)
        if small.returncode != 0:
            fail(f"--small-statements exited with {small.returncode}", small)
        lines = json_lines(small)
        if [r.get("statement") for r in lines] != ["select_1", "catalog", "point_lookup"]:
            fail(f"--small-statements: statements {[r.get('statement') for r in lines]}", small)
        for r in lines:
            if r.get("mode") != "small_statements" or r.get("clients") != 2 or not r.get("statements_per_s"):
                fail(f"--small-statements: {r}", small)
            if "postgres_statements_per_s" not in r or "latency_avg_ms" not in r:
                fail(f"--small-statements: fields missing in {r}", small)
            if glob.glob("/usr/lib/postgresql/*/bin/initdb") and not r["postgres_statements_per_s"]:
                fail(f"--small-statements: PostgreSQL is installed but not measured: {r}", small)

        # Malformed options: a clear error naming the option, nothing run.
        bad = [
            (["--rows", "abc"], "--rows"),
            (["--rows", "0"], "--rows"),
            (["--queries", "q1,q5"], "q5"),
            (["--queries", "q1,q1"], "twice"),
            (["--engines", "spark"], "spark"),
            (["--engines", "sluice-lake"], "sluice-lake"),
            (["--memory-settings", "3XB"], "3XB"),
            (["--memory-settings", "GB"], "memory setting"),
            (["--threads", "0"], "--threads"),
            (["--runs", "0"], "--runs"),
            (["--cap-gib", "-1"], "--cap-gib"),
            (["--chart", "out.svg"], "--chart"),
            (["--small-statements", "--clients", "0"], "--clients"),
            (["--small-statements", "--statement-seconds", "0"], "--statement-seconds"),
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
