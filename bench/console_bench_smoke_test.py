#!/usr/bin/env python3
"""Smoke test of `sluice bench console --quick --json`: it starts its own broker with 100
topics and 2 pipelines, times the API's list calls, loads each page in Debian's chromium
(puppeteer-core) and follows a topic it produces to. Checks that the run succeeds and that
the JSON has every list call, page and the following with their fields; never checks a
duration (benchmarks are not tests). Bad options are refused with a message. Skipped
without /usr/bin/chromium.

usage: console_bench_smoke_test.py path/to/sluice
"""
import json
import os
import subprocess
import sys

from kafka_bench_smoke_test import fail


def main():
    sluice = sys.argv[1]
    if not os.access("/usr/bin/chromium", os.X_OK):
        print("SKIP: no /usr/bin/chromium (scripts/setup.sh installs it)")
        return 0
    proc = subprocess.run([sluice, "bench", "console", "--quick", "--json"], capture_output=True,
                          text=True, timeout=280)
    if proc.returncode != 0:
        fail(f"sluice bench console --quick exited with {proc.returncode}", proc)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if len(lines) != 1:
        fail("not one JSON object on stdout", proc)
    out = json.loads(lines[0])
    for key in ("commit", "machine", "topics", "list_target_ms", "page_target_ms", "task_target_ms"):
        if key not in out:
            fail(f"no {key} in {out}", proc)
    if out.get("pipelines_running") != 2 or out.get("pipeline_files") != 10:
        fail(f"--quick: 2 pipelines running of 10 files, not {out}", proc)
    paths = [r["path"] for r in out["lists"]]
    if paths != ["/api/v1/topics", "/api/v1/groups", "/api/v1/pipelines", "/api/v1/overview",
                 "/api/v1/cluster"] or not all({"median_ms", "p95_ms", "max_ms", "bytes"} <= set(r)
                                               for r in out["lists"]):
        fail(f"list calls: {out['lists']}", proc)
    pages = [p["path"] for p in out["pages"]]
    if pages[:2] != ["/", "/topics"] or "/sql" not in pages or not all(
            {"cold_ms", "cold_runs_ms", "warm_median_ms", "longest_task_ms", "long_tasks"} <= set(p)
            and len(p["cold_runs_ms"]) == 1 and p["cold_ms"] == p["cold_runs_ms"][0]
            for p in out["pages"]):
        fail(f"pages: {out['pages']}", proc)
    f = out["follow"]
    if not {"rate_per_sec", "produced_per_sec", "longest_task_ms", "long_tasks", "rows_shown"} <= set(f):
        fail(f"follow: {f}", proc)
    if f["rows_shown"] <= 0:
        fail(f"the page showed none of the messages it followed: {f}", proc)
    bad = subprocess.run([sluice, "bench", "console", "--pipelines", "5", "--topics", "2"],
                         capture_output=True, text=True, timeout=60)
    if bad.returncode == 0 or "--pipelines" not in bad.stderr:
        fail("--pipelines above --topics was not refused with a message", bad)
    print("PASS: console_bench_smoke_test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
