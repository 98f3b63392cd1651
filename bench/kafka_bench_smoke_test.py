#!/usr/bin/env python3
"""Smoke test of `sluice bench kafka --quick --json`: it starts its own broker, runs the
produce, consume and latency phases on two topics (--partitions 2 5), produce and latency
with acks=1 then acks=all, and prints one JSON object per phase; then with --tls, the
phases on a PLAINTEXT and a SASL_SSL listener, each row's "tls" saying which. Checks that
the run succeeds and the JSON has the phases with their fields and comparisons; never
checks a rate or a duration (benchmarks are not tests).

usage: kafka_bench_smoke_test.py path/to/sluice
"""
import json
import subprocess
import sys

FIELDS = ["phase", "records_per_s", "mb_per_s", "p50_ms", "p99_ms", "p999_ms",
          "loopback_mb_per_s", "acks", "partitions", "broker_cpu_s_per_million", "vs_acks_1",
          "vs_first_partitions"]


def fail(msg, proc=None):
    print(f"FAIL: {msg}")
    if proc is not None:
        print("--- stdout:\n" + proc.stdout)
        print("--- stderr:\n" + proc.stderr)
    sys.exit(1)


def json_rows(proc, fail):
    """The JSON object of each non-blank line of the bench's stdout; fail(msg, proc) on
    a line that is not JSON. Shared with kafka_cluster_bench_smoke_test.py."""
    rows = []
    for line in proc.stdout.splitlines():
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            fail(f"not JSON: {line!r}: {e}", proc)
    return rows


def main():
    sluice = sys.argv[1]
    # Small even for --quick: the test only needs every phase to run.
    cmd = [sluice, "bench", "kafka", "--quick", "--json", "--records", "20000",
           "--latency-records", "5000", "--latency-rate", "20000"]
    try:
        proc = subprocess.run(cmd + ["--partitions", "2", "5", "--acks", "all", "1"],
                              capture_output=True, text=True, timeout=200)
    except subprocess.TimeoutExpired:
        fail("sluice bench kafka did not finish within 200 s")
    if proc.returncode != 0:
        fail(f"sluice bench kafka exited with {proc.returncode}", proc)
    rows = json_rows(proc, fail)
    got = [(r.get("partitions"), r.get("acks"), r.get("phase")) for r in rows]
    want = [(n, a, p) for n in (2, 5) for a, p in
            (("1", "produce"), ("1", "consume"), ("1", "latency"), ("all", "produce"),
             ("all", "latency"))]
    if got != want:
        fail(f"rows {got}, expected {want} (acks=1 first, consume once per topic)", proc)
    for r in rows:
        missing = [f for f in FIELDS if f not in r]
        if missing:
            fail(f"{r['phase']}: missing {missing}", proc)
        if r["records"] <= 0 or r["records_per_s"] <= 0:
            fail(f"{r['phase']}: no records counted: {r}", proc)
        if r["broker_cpu_s_per_million"] is None or r["broker_cpu_s_per_million"] < 0:
            fail(f"{r['phase']}: no broker CPU per million records: {r}", proc)
        compared = r["acks"] == "all"
        if (r["vs_acks_1"] is not None) != compared:
            fail(f"{r['phase']}: vs_acks_1 should be {'set' if compared else 'null'}: {r}", proc)
        later = r["partitions"] == 5
        if (r["vs_first_partitions"] is not None) != later:
            fail(f"{r['phase']}: vs_first_partitions should be {'set' if later else 'null'}: {r}",
                 proc)
    if len({r["topic"] for r in rows}) != 2:
        fail("each partition count should have its own topic", proc)
    produce, consume, latency = rows[:3]
    if consume["records"] != produce["records"]:
        fail(f"consumed {consume['records']} records of {produce['records']} produced", proc)
    for r in (produce, consume):
        if any(r[f] is not None for f in ("p50_ms", "p99_ms", "p999_ms")):
            fail(f"{r['phase']}: latency percentiles should be null: {r}", proc)
    if any(latency[f] is None for f in ("p50_ms", "p99_ms", "p999_ms")):
        fail(f"latency: percentiles missing: {latency}", proc)
    if not latency["p50_ms"] <= latency["p99_ms"] <= latency["p999_ms"]:
        fail(f"latency: percentiles out of order: {latency}", proc)
    if any(r.get("tls") is not False for r in rows):
        fail("a plaintext run's rows must say \"tls\": false", proc)
    loop = [r["loopback_mb_per_s"] for r in rows]
    summary = ", ".join("{} {} records".format(r["phase"], r["records"]) for r in rows[:3])
    print(f"PASS: {summary}; loopback reference {loop[0]} MB/s")

    # --tls: the same phases on PLAINTEXT, then on SASL_SSL, each row saying which.
    proc = subprocess.run(cmd + ["--tls", "--phases", "produce,consume", "--acks", "1"],
                          capture_output=True, text=True, timeout=100)
    if proc.returncode != 0:
        fail(f"sluice bench kafka --tls exited with {proc.returncode}", proc)
    rows = json_rows(proc, fail)
    got = [(r.get("phase"), r.get("tls")) for r in rows]
    want = [("produce", False), ("consume", False), ("produce", True), ("consume", True)]
    if got != want:
        fail(f"--tls rows {got}, expected {want}", proc)
    if "AES_128_GCM" not in rows[2].get("tls_setup", ""):
        fail(f"--tls: the cipher is not named: {rows[2]}", proc)
    if rows[3]["records"] != rows[2]["records"]:
        fail("--tls: consumed a different number of records than produced", proc)
    print("PASS: --tls ran the phases on PLAINTEXT and SASL_SSL")


if __name__ == "__main__":
    main()
