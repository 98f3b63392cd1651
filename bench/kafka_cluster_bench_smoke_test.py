#!/usr/bin/env python3
"""Smoke test of `sluice bench kafka --cluster 3 --quick --json` (kafka_cluster_bench.h):
it starts a single broker, then etcd (/usr/bin/etcd) and three brokers, and prints one
JSON object per phase. Checks that the run succeeds (which includes every record read
back, every acknowledged failover write at its own offset, every broker exiting 0 on
SIGTERM) and that the JSON has the phases with their fields, in the shape issue 21's
benchmark names; never checks a rate or a duration (benchmarks are not tests).
Skips (exit 0, SKIP) when etcd is not installed.

usage: kafka_cluster_bench_smoke_test.py path/to/sluice
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kafka_bench_smoke_test import json_rows  # noqa: E402

ETCD = "/usr/bin/etcd"
COMMON = ["phase", "records", "records_per_s", "mb_per_s", "p50_ms", "p99_ms", "brokers",
          "replication_factor", "acks", "broker_cpu_seconds", "other_cpu_seconds", "loopback_mb_per_s", "cpu", "cores", "load_1m"]
# (brokers, phase) in the order the bench prints them.
EXPECTED = [(1, "produce"), (1, "consume"), (1, "idle_replicas"), (3, "produce"),
            (3, "consume"), (3, "latency"), (3, "failover"), (3, "idle_replicas")]


def fail(msg, proc=None):
    print(f"FAIL: {msg}")
    if proc is not None:
        print("--- stdout:\n" + proc.stdout)
        print("--- stderr (last 60 lines):\n" + "\n".join(proc.stderr.splitlines()[-60:]))
    sys.exit(1)


def run(cmd, timeout=240):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f"{' '.join(cmd)} did not finish within {timeout} s")


def main():
    sluice = sys.argv[1]
    if not os.access(ETCD, os.X_OK):
        print(f"SKIP: {ETCD} is not installed (apt-get install etcd-server)")
        return
    # Bad options fail at once with a clear error, before anything starts.
    for bad, says in ((["--cluster", "2"], "--cluster must be 3 to 9"),
                      (["--cluster", "3", "--bootstrap", "127.0.0.1:1"], "--bootstrap"),
                      (["--cluster", "3", "--session-timeout-ms", "1000"], "session-timeout"),
                      (["--cluster", "3", "--etcd-binary", "/nonexistent/etcd", "--iperf-seconds",
                        "1", "--records", "1000"], "is not installed")):
        proc = run([sluice, "bench", "kafka", "--json"] + bad, timeout=120)
        if proc.returncode == 0 or says not in proc.stderr:
            fail(f"{bad}: expected a failure naming {says!r}", proc)

    cmd = [sluice, "bench", "kafka", "--cluster", "3", "--quick", "--json", "--records", "20000",
           "--latency-records", "2000", "--failover-kills", "2", "--failover-rate", "2000",
           "--idle-partitions", "20", "--iperf-seconds", "1"]
    proc = run(cmd)
    if proc.returncode != 0:
        fail(f"sluice bench kafka --cluster 3 exited with {proc.returncode}", proc)
    rows = json_rows(proc, fail)
    got = [(r.get("brokers"), r.get("phase")) for r in rows]
    if got != EXPECTED:
        fail(f"rows {got}, expected {EXPECTED}", proc)
    for r in rows:
        missing = [f for f in COMMON if f not in r]
        if missing:
            fail(f"{r['brokers']} broker(s) {r['phase']}: missing {missing}", proc)
        single = r["brokers"] == 1
        if r["replication_factor"] != (1 if single else 3):
            fail(f"{r['phase']}: replication_factor {r['replication_factor']}", proc)
        if r["acks"] != ("1" if single else "all"):
            fail(f"{r['phase']}: acks {r['acks']}", proc)
        # The failover phase restarts brokers: no per-broker CPU there.
        if r["phase"] != "failover" and len(r.get("broker_cpu_seconds_each", [])) != r["brokers"]:
            fail(f"{r['phase']}: broker_cpu_seconds_each {r.get('broker_cpu_seconds_each')}", proc)
        if not single and r["phase"] != "idle_replicas" and "etcd_cpu_seconds" not in r:
            fail(f"{r['phase']}: no etcd_cpu_seconds", proc)
    by = {(r["brokers"], r["phase"]): r for r in rows}
    for key in ((1, "produce"), (1, "consume"), (3, "produce"), (3, "consume")):
        # consume reads each partition again and again for its minimum time (--quick: 1 s)
        passes = by[key].get("passes") or 1
        if by[key]["records"] < 20000 * passes or by[key]["records_per_s"] <= 0:
            fail(f"{key}: records {by[key]['records']} with {passes} passes at least", proc)
        if key[1] == "produce" and by[key]["records"] != 20000:
            fail(f"{key}: records {by[key]['records']}", proc)
    for key in ((1, "consume"), (3, "consume")):
        if not by[key].get("passes") or by[key]["seconds"] < 1.0:
            fail(f"{key}: {by[key].get('passes')} passes in {by[key]['seconds']} s", proc)
    for key in ((3, "produce"), (3, "consume")):
        if not all(isinstance(by[key].get(f), (int, float))
                   for f in ("single_broker_ratio", "single_broker_cpu_ratio")):
            fail(f"{key}: no single_broker_ratio or single_broker_cpu_ratio", proc)
    latency = by[(3, "latency")]
    if any(latency[f] is None for f in ("p50_ms", "p99_ms", "p999_ms")) or \
            not latency["p50_ms"] <= latency["p99_ms"] <= latency["p999_ms"]:
        fail(f"latency percentiles: {latency}", proc)
    failover = by[(3, "failover")]
    for f in ("kills", "p50_s", "max_s", "election_p50_s", "election_max_s", "session_timeout_ms",
              "delivery_errors", "samples"):
        if f not in failover:
            fail(f"failover: missing {f}", proc)
    if failover["kills"] != 2 or len(failover["samples"]) != 2:
        fail(f"failover: {failover['kills']} kills, {len(failover['samples'])} samples", proc)
    if failover["session_timeout_ms"] != 2000:
        fail(f"failover: session timeout {failover['session_timeout_ms']}", proc)
    if not 0 < failover["p50_s"] <= failover["max_s"]:
        fail(f"failover: p50_s {failover['p50_s']} max_s {failover['max_s']}", proc)
    for s in failover["samples"]:
        if s["killed"] not in (1, 2, 3) or s["new_leader"] not in (1, 2, 3) or \
                s["new_leader"] == s["killed"] or s["acked_s"] <= 0:
            fail(f"failover sample: {s}", proc)
    if failover["records"] <= 0 or failover["delivery_errors"] != 0:
        fail(f"failover: {failover['records']} records, {failover['delivery_errors']} errors", proc)
    for brokers in (1, 3):
        idle = by[(brokers, "idle_replicas")]
        for f in ("partitions_idle", "replicas_per_broker", "rss_bytes_per_replica",
                  "fds_per_replica", "per_broker"):
            if f not in idle:
                fail(f"idle_replicas ({brokers}): missing {f}", proc)
        if idle["partitions_idle"] != 20 or idle["replicas_per_broker"] != 20 or \
                len(idle["per_broker"]) != brokers:
            fail(f"idle_replicas ({brokers}): {idle}", proc)
    print("PASS: " + ", ".join(f"{b} broker(s) {p}" for b, p in got) +
          f"; failover of {failover['kills']} kills with {failover['records']} records acknowledged")


if __name__ == "__main__":
    main()
