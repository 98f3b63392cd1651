#!/usr/bin/python3
"""A pipeline into an Iceberg table on S3 through a faulty store (issue 26): Ceph's radosgw
on loopback (tests/integration/s3/with-rgw.sh makes the bucket SLUICE_S3_BUCKET and exports
AWS_* for it) behind tests/tools/s3_fault_proxy.py, and `sluice serve` as the broker.

1. Faults everywhere: `sluice pipeline run` from a topic of several partitions into
   lake.db.events (partitioned by city) with AWS_ENDPOINT_URL_S3 pointing at the proxy,
   which answers a seeded fraction of requests 503 SlowDown and 500 InternalError (some
   after the store did the request), resets connections before and after the store saw
   the request, cuts replies short and delays some. Messages are produced while it runs.
   A pipeline that exits is started again, as a supervisor would. Once the group's
   commit reaches the end of every partition: `sluice sql` straight to radosgw sees every
   message exactly once (count, distinct ids, distinct (partition, offset), the sum), and
   the latest snapshot's offsets are the topic's ends (botocore reads the metadata).
2. Lost replies to the commit itself: only the PUTs of metadata/v<N>.metadata.json
   (If-None-Match: *) fail, most of them after the store made the object (500 after, reset
   after, cut reply), so the writer's retry meets its own object (412). More messages, the
   same checks.
3. `sluice sql` through the faulty proxy: each run either answers exactly the right rows
   or fails with an error naming S3; never a wrong answer.
4. The table's offsets unreadable when partitions are assigned: a run SIGKILLed between
   the table's commit and the group's (SLUICE_TEST_CRASH_AT=iceberg-committed:1) leaves the
   table ahead of the group; the restart's reads of metadata/version-hint.text then fail
   (four 503s: every retry of one read) at its 2nd, 3rd or 4th read. The restart must
   resume from the table's offsets or fail, never from the group's lagging commit: every
   message exactly once after each round. (Fails today: sluice bug, duplicates.)
5. The probe's own first create loses its reply (500 after the store made the object), in
   a new table and process: every message still exactly once. The first run failing its
   commit with a misleading error and leaving the probe object is a known bug, printed
   as KNOWN BUG; SLUICE_S3_FAULTS_STRICT=1 makes it fail the test.
6. A store that ignores If-None-Match (the proxy's no_conditional mode): a new pipeline
   process (the probe runs once per process) into a new table must exit refusing to
   commit, with an error naming conditional PUTs and If-None-Match, and leave no metadata
   version and no group commit.
Every phase runs whatever an earlier one found; the test fails if any did.

The seed is printed; SLUICE_S3_FAULTS_SEED=<seed> repeats its fault draws (which request
gets the n-th draw still depends on timing).

usage: with-rgw.sh BUCKET /usr/bin/python3 s3_faults_test.py path/to/sluice
"""

import functools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))
from sluice_broker import TestFailure, check, run_test, wait_until  # noqa: E402
from s3_fault_proxy import FAULT_KINDS, S3FaultProxy  # noqa: E402
import supervised_pipeline  # noqa: E402
from supervised_pipeline import (PARTITIONS, Committed, Pipeline, create_topic, event,  # noqa: E402
                                 last_error)

from confluent_kafka import Producer  # noqa: E402
import botocore.session  # noqa: E402
from botocore.config import Config  # noqa: E402


# Phase 1's faults: about one request in five fails, one in ten is slow.
FAULTS = {"err503": 0.06, "err500": 0.04, "err500_after": 0.03, "reset_before": 0.02,
          "reset_after": 0.03, "cut_body": 0.03, "delay_ms": 250, "delay_rate": 0.1}
# Phase 2's: the commit's conditional PUT, mostly failing after the store made the object.
COMMIT_FAULTS = {"methods": "PUT", "path_contains": ".metadata.json", "reset_after": 0.3,
                 "err500_after": 0.3, "cut_body": 0.15, "err503": 0.1}
# Phase 3's, for queries: about one request in five fails (each is tried four times, and a
# query reads over a hundred objects: some queries fail, most answer).
QUERY_FAULTS = {"err503": 0.06, "err500": 0.04, "err500_after": 0.03, "reset_before": 0.03,
                "reset_after": 0.03, "cut_body": 0.03, "delay_ms": 100, "delay_rate": 0.1}

PIPELINE = """pipeline:
  name: {name}
  batch_size: 100
  flush_interval_seconds: 1
  source:
    type: kafka
    kafka:
      brokers: ['{bootstrap}']
      group_id: {group}
      auto_offset_reset: earliest
      topics: [{topic}]
      # A run that dies without leaving the group holds its partitions only this long.
      properties:
        fetch.wait.max.ms: 50
        session.timeout.ms: 6000
        heartbeat.interval.ms: 500
  handler:
    type: handlers.InferredMemBatch
    sql: |
      SELECT id::BIGINT AS id, city, amount::DOUBLE AS amount, kafka_partition AS p,
             kafka_offset AS o
      FROM batch
  sink:
    type: iceberg
    iceberg:
      catalog_name: sluice
      table_name: db.events
      warehouse: '{warehouse}'
      commit_interval_seconds: 1
      partition_by: [city]
  on_error:
    policy: RAISE
  duckdb: {{memory_limit: 256MiB, threads: 1}}
"""


def env(name):
    v = os.environ.get(name)
    check(v, f"{name} is not set: run under tests/integration/s3/with-rgw.sh")
    return v


def produce(bootstrap, topic, ids):
    failed = []
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for n in ids:
        p.produce(topic, value=json.dumps(event(n)).encode(), partition=n % PARTITIONS,
                  on_delivery=lambda err, msg: err and failed.append(err))
    check(p.flush(30) == 0, "records not delivered")
    check(not failed, f"records not delivered: {failed[:3]}")


def supervise(ctx, spec, ends, what):
    """supervised_pipeline.supervise through the proxy, the table's offsets read straight
    from radosgw."""
    return supervised_pipeline.supervise(ctx, spec, ends, what,
                                         lambda spec: table_offsets(ctx, spec),
                                         env={"AWS_ENDPOINT_URL_S3": ctx.proxy_url})


def table_offsets(ctx, spec):
    """The offsets of the table's current snapshot (zeros when there is none), read from
    radosgw directly."""
    versions = metadata_versions(ctx.bucket, spec["table_prefix"])
    if not versions:
        return [0] * PARTITIONS
    meta = json.loads(s3_client().get_object(Bucket=ctx.bucket,
                                             Key=versions[max(versions)])["Body"].read())
    snap = next((s for s in meta.get("snapshots", [])
                 if s["snapshot-id"] == meta.get("current-snapshot-id")), None)
    key = f"sluice.offsets.{spec['group']}.{spec['topic']}"
    if snap is None or key not in snap["summary"]:
        return [0] * PARTITIONS
    held = json.loads(snap["summary"][key])
    return [held.get(str(p), 0) for p in range(PARTITIONS)]


@functools.lru_cache(maxsize=None)
def s3_client():
    # One for the test: making one costs about 0.1 s of CPU, and the test polls listings.
    return botocore.session.get_session().create_client(
        "s3", endpoint_url=env("AWS_ENDPOINT_URL_S3"), region_name=os.environ.get("AWS_REGION"),
        aws_access_key_id=env("AWS_ACCESS_KEY_ID"),
        aws_secret_access_key=env("AWS_SECRET_ACCESS_KEY"),
        config=Config(s3={"addressing_style": "path"}))


def list_keys(bucket, prefix):
    client = s3_client()
    keys, token = [], None
    while True:
        kw = {"Bucket": bucket, "Prefix": prefix}
        if token:
            kw["ContinuationToken"] = token
        page = client.list_objects_v2(**kw)
        keys += [o["Key"] for o in page.get("Contents", [])]
        if not page.get("IsTruncated"):
            return keys
        token = page["NextContinuationToken"]


def metadata_versions(bucket, table_prefix):
    out = {}
    for k in list_keys(bucket, table_prefix + "/metadata/"):
        m = re.search(r"/metadata/v(\d+)\.metadata\.json$", k)
        if m:
            out[int(m.group(1))] = k
    return out


def sluice_sql(ctx, warehouse, query, endpoint, timeout=120):
    """`sluice sql --json` against `endpoint`: (exit status, stdout, stderr). A fresh
    TMPDIR each time: nothing is read from an earlier run's cache."""
    tmp = tempfile.mkdtemp(dir=ctx.tmp, prefix="sql-")
    e = dict(os.environ, AWS_ENDPOINT_URL_S3=endpoint, TMPDIR=tmp)
    try:
        r = subprocess.run([ctx.sluice, "sql", "--warehouse", warehouse, "--json", query],
                           capture_output=True, text=True, timeout=timeout, env=e)
    except subprocess.TimeoutExpired:
        raise TestFailure(f"sluice sql did not answer within {timeout} s (a hang?): {query}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return r.returncode, r.stdout, r.stderr


CHECK_SQL = ("SELECT count(*) AS n, count(DISTINCT id) AS ids, count(DISTINCT (p, o)) AS po, "
             "min(id) AS lo, max(id) AS hi, sum(amount) AS amount FROM lake.db.events")


def expected_row(total):
    return {"n": total, "ids": total, "po": total, "lo": 0, "hi": total - 1,
            "amount": sum(n * 0.5 for n in range(total))}


def check_table(ctx, spec, total, ends, when):
    """Every message exactly once, read straight from radosgw; the snapshot's offsets are
    the topic's ends."""
    rc, out, err = sluice_sql(ctx, spec["warehouse"], CHECK_SQL, env("AWS_ENDPOINT_URL_S3"))
    check(rc == 0, f"{when}: sluice sql against radosgw failed ({rc}): {err}")
    rows = [json.loads(l) for l in out.splitlines() if l.strip()]
    check(len(rows) == 1, f"{when}: sluice sql printed {out!r}")
    row, want = rows[0], expected_row(total)
    if row != want:
        dup = sluice_sql(ctx, spec["warehouse"],
                         "SELECT id, count(*) AS c FROM lake.db.events GROUP BY id "
                         "HAVING count(*) > 1 ORDER BY id LIMIT 20",
                         env("AWS_ENDPOINT_URL_S3"))[1]
        dups = ", ".join(f"{d['id']} x{d['c']}" for d in map(json.loads, dup.split()))
        raise TestFailure(f"{when}: the table holds {row}, expected {want} (every message "
                          f"once); ids more than once: {dups or 'none'}")
    versions = metadata_versions(ctx.bucket, spec["table_prefix"])
    check(versions, f"{when}: no metadata version")
    latest = max(versions)
    meta = json.loads(s3_client().get_object(Bucket=ctx.bucket, Key=versions[latest])["Body"].read())
    snap = next(s for s in meta["snapshots"] if s["snapshot-id"] == meta["current-snapshot-id"])
    check(snap["summary"].get("total-records") == str(total),
          f"{when}: total-records {snap['summary'].get('total-records')} in v{latest}")
    offsets = json.loads(snap["summary"][f"sluice.offsets.{spec['group']}.{spec['topic']}"])
    check([offsets.get(str(p)) for p in range(PARTITIONS)] == ends,
          f"{when}: the snapshot's offsets {offsets}, the topic's ends {ends}")
    print(f"{when}: {total} messages exactly once in v{latest} "
          f"({len(versions)} metadata versions)", flush=True)
    return latest


def write_spec(ctx, name, topic, table_prefix):
    spec = {"name": name, "group": f"{name}-group", "topic": topic,
            "table_prefix": f"{table_prefix}/db/events",
            "warehouse": f"s3://{ctx.bucket}/{table_prefix}"}
    spec["path"] = os.path.join(ctx.tmp, f"{name}.yml")
    with open(spec["path"], "w") as f:
        f.write(PIPELINE.format(name=name, bootstrap=ctx.bootstrap, group=spec["group"],
                                topic=topic, warehouse=spec["warehouse"]))
    return spec


def fault_counts(before, after):
    keys = FAULT_KINDS + ("delayed", "unconditional_rewrites")
    return {k: after.get(k, 0) - before.get(k, 0) for k in keys if after.get(k, 0) - before.get(k, 0)}


class Ctx:
    """What the phases share: the broker, the bucket, the proxy, a scratch directory."""


def faults_test(sluice, seed):
    def body(broker):
        ctx = Ctx()
        ctx.sluice, ctx.bootstrap = sluice, broker.bootstrap
        ctx.bucket = env("SLUICE_S3_BUCKET")
        ctx.tmp = tempfile.mkdtemp(prefix="sluice-s3faults-")
        ctx.rng = random.Random(seed)
        ctx.run_id = f"s3faults-{seed}-{uuid.uuid4().hex[:6]}"
        ctx.strict = os.environ.get("SLUICE_S3_FAULTS_STRICT") == "1"
        rgw = env("AWS_ENDPOINT_URL_S3").split("://", 1)[1]
        host, port = rgw.rsplit(":", 1)
        proxy = S3FaultProxy(host, int(port)).start()
        ctx.proxy_url = f"http://127.0.0.1:{proxy.port}"
        failed = []
        try:
            create_topic(ctx.bootstrap, "events", PARTITIONS)
            # Each phase runs, whatever an earlier one found; 1-3 share one table.
            for phase in (phase_faults, phase_commit_faults, phase_queries,
                          phase_offsets_unreadable, phase_probe_reply_lost,
                          phase_no_conditional):
                name = phase.__name__[len("phase_"):]
                try:
                    phase(ctx, proxy)
                    print(f"phase {name}: PASS", flush=True)
                except Exception as e:  # the phase's verdict; the others still run
                    if not isinstance(e, TestFailure):
                        traceback.print_exc()
                    print(f"phase {name}: FAIL: {e}", flush=True)
                    failed.append(f"{name}: {e}")
                finally:
                    proxy.set_faults()
        finally:
            proxy.close()
            print("proxy totals: " + json.dumps({k: v for k, v in proxy.stats().items()
                                                 if k != "settings"}), flush=True)
            shutil.rmtree(ctx.tmp, ignore_errors=True)
        check(not failed, "%d phase(s) failed:\n  %s" % (len(failed), "\n  ".join(failed)))

    return body


def producer_thread(ctx, topic, lo, hi, chunk, pause):
    """Produces ids [lo, hi) in chunks, a pause after each: the pipeline commits many
    times meanwhile."""
    def run():
        for n in range(lo, hi, chunk):
            produce(ctx.bootstrap, topic, range(n, min(n + chunk, hi)))
            time.sleep(pause)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def ends_of(total):
    return [len(range(p, total, PARTITIONS)) for p in range(PARTITIONS)]


def phase_faults(ctx, proxy):
    """1. Faults everywhere, messages arriving while the pipeline runs."""
    ctx.spec = write_spec(ctx, "lake", "events", f"{ctx.run_id}/wh")
    ctx.total = 4800
    before = proxy.stats()
    proxy.set_faults(seed=ctx.rng.randrange(1 << 31), **FAULTS)
    t = producer_thread(ctx, "events", 0, ctx.total, 300, 0.8)
    runs = supervise(ctx, ctx.spec, ends_of(ctx.total), "faults")
    t.join()
    after = proxy.stats()
    print(f"faults: {len(runs)} run(s); injected {fault_counts(before, after)} in "
          f"{after['requests'] - before['requests']} requests", flush=True)
    proxy.set_faults()
    check_table(ctx, ctx.spec, ctx.total, ends_of(ctx.total), "after the faults")


def phase_commit_faults(ctx, proxy):
    """2. The commit's replies lost: most conditional PUTs of a metadata version fail after
    the store made the object, so the writer's retry meets its own object (412)."""
    more = 600
    before = proxy.stats()
    proxy.set_faults(seed=ctx.rng.randrange(1 << 31), **COMMIT_FAULTS)
    t = producer_thread(ctx, "events", ctx.total, ctx.total + more, 100, 1.0)
    ctx.total += more
    runs = supervise(ctx, ctx.spec, ends_of(ctx.total), "commit faults")
    t.join()
    after = proxy.stats()
    print(f"commit faults: {len(runs)} run(s); injected {fault_counts(before, after)} on "
          f"{after['conditional_puts'] - before['conditional_puts']} conditional PUTs, "
          f"{after['upstream_412'] - before['upstream_412']} answered 412 by the store",
          flush=True)
    proxy.set_faults()
    check_table(ctx, ctx.spec, ctx.total, ends_of(ctx.total), "after the commit faults")


def phase_queries(ctx, proxy):
    """3. `sluice sql` through the faulty proxy: the right rows or a clear error."""
    before = proxy.stats()
    proxy.set_faults(seed=ctx.rng.randrange(1 << 31), **QUERY_FAULTS)
    want = expected_row(ctx.total)
    answered = refused = 0
    for i in range(6):
        rc, out, err = sluice_sql(ctx, ctx.spec["warehouse"], CHECK_SQL, ctx.proxy_url)
        if rc == 0:
            rows = [json.loads(l) for l in out.splitlines() if l.strip()]
            check(rows == [want], f"query {i} through the faults: a wrong answer {rows}, "
                  f"expected {want}; stderr: {err[-2000:]}")
            answered += 1
        else:
            final = (err.strip().splitlines() or [""])[-1]
            check(out.strip() == "", f"query {i} failed ({rc}) yet printed rows: {out!r}")
            check(re.search(r"\bS3\b", final),
                  f"query {i} failed ({rc}) without naming S3: {err[-2000:]!r}")
            refused += 1
            print(f"query {i}: failed, clearly: {final[:400]}", flush=True)
    after = proxy.stats()
    print(f"queries through the faults: {answered} answered right, {refused} failed with an "
          f"S3 error; injected {fault_counts(before, after)}", flush=True)


def phase_offsets_unreadable(ctx, proxy):
    """4. The table ahead of the group (a run SIGKILLed between the table's commit and the
    group's: SLUICE_TEST_CRASH_AT=iceberg-committed:1), then the restart's reads of the
    table's version hint fail (four 503s: one read's every retry) at the 2nd, 3rd or 4th
    read: the restart must resume from the table's offsets (or fail), never from the
    group's lagging commit. Every message exactly once after each round."""
    topic = "held"
    create_topic(ctx.bootstrap, topic, PARTITIONS)
    spec = write_spec(ctx, "held", topic, f"{ctx.run_id}/held")
    total = 0
    for skip in (1, 2, 3):
        produce(ctx.bootstrap, topic, range(total, total + 300))
        total += 300
        # base/crash_point.h: SIGKILL at the table's commit.
        crash = Pipeline(ctx.sluice, spec["path"], os.path.join(ctx.tmp, f"held-crash-{skip}.log"),
                         {"AWS_ENDPOINT_URL_S3": ctx.proxy_url,
                          "SLUICE_TEST_CRASH_AT": "iceberg-committed:1"})
        try:
            crash.proc.wait(90)
        except subprocess.TimeoutExpired:
            pass
        out = crash.output()
        crash.kill()
        check(crash.proc.returncode == -signal.SIGKILL,
              f"the run meant to die after its table commit exited {crash.proc.returncode}:\n"
              f"{out[-3000:]}")
        c = Committed(ctx.bootstrap, spec["group"], topic)
        try:
            group = c.get()
        finally:
            c.close()
        held = table_offsets(ctx, spec)
        check(any(g < h for g, h in zip(group, held)),
              f"the SIGKILL left the group at {group}, the table at {held}: not ahead")
        produce(ctx.bootstrap, topic, range(total, total + 100))
        total += 100
        proxy.set_faults(methods="GET", path_contains="/metadata/version-hint.text",
                         script=["pass"] * skip + ["err503"] * 4)
        what = f"table ahead ({held} > group {group}), hint read {skip + 1} failing"
        supervise(ctx, spec, ends_of(total), what)
        proxy.set_faults()
        check_table(ctx, spec, total, ends_of(total), f"after: {what}")


def phase_probe_reply_lost(ctx, proxy):
    """5. The probe's own first create loses its reply (the store made the object, the
    writer saw a 500): a new table, group and process. Every message still lands exactly
    once; that the first run fails the commit is a known bug (reported, not failed on,
    unless SLUICE_S3_FAULTS_STRICT=1)."""
    spec = write_spec(ctx, "probe", "events", f"{ctx.run_id}/probe")
    before = proxy.stats()
    proxy.set_faults(methods="PUT", path_contains=".sluice-probe-", script="err500_after")
    runs = supervise(ctx, spec, ends_of(ctx.total), "probe reply lost")
    after = proxy.stats()
    print(f"probe reply lost: {len(runs)} run(s); injected {fault_counts(before, after)}",
          flush=True)
    proxy.set_faults()
    check_table(ctx, spec, ctx.total, ends_of(ctx.total), "after the probe's lost reply")
    leftovers = [k for k in list_keys(ctx.bucket, spec["table_prefix"] + "/metadata/")
                 if ".sluice-probe-" in k]
    if len(runs) > 1 or leftovers:
        note = (f"the probe's first create, retried after its reply was lost, failed the "
                f"commit: run 1 exited with \"{last_error(runs[0])}\"; probe objects left: "
                f"{leftovers}")
        check(not ctx.strict, note)
        print(f"KNOWN BUG (not failing the test; SLUICE_S3_FAULTS_STRICT=1 does): {note}",
              flush=True)


def phase_no_conditional(ctx, proxy):
    """6. A store that ignores If-None-Match: a new pipeline process into a new table must
    refuse to commit, naming conditional PUTs and If-None-Match, with nothing committed."""
    spec = write_spec(ctx, "nocond", "events", f"{ctx.run_id}/nocond")
    before = proxy.stats()
    proxy.set_faults(no_conditional=True)
    run = Pipeline(ctx.sluice, spec["path"], os.path.join(ctx.tmp, "nocond.log"),
                   {"AWS_ENDPOINT_URL_S3": ctx.proxy_url})
    try:
        wait_until(lambda: not run.running(), 90,
                   "the pipeline refusing a store without conditional PUTs, exiting")
    except TestFailure:
        out = run.output()
        run.kill()
        raise TestFailure("no-conditional: the pipeline still runs after 90 s:\n" + out[-3000:])
    run.log.close()
    out = run.output()
    after = proxy.stats()
    rc = run.proc.returncode
    print(f"no-conditional: the pipeline exited {rc}; {fault_counts(before, after)}", flush=True)
    check(rc != 0, f"no-conditional: the pipeline exited 0:\n{out[-3000:]}")
    pattern = re.compile(r"conditional PUT.*If-None-Match|If-None-Match.*conditional PUT", re.I)
    lines = [l for l in out.splitlines() if pattern.search(l)]
    check(lines, f"no-conditional: no error naming conditional PUTs and If-None-Match:\n"
                 f"{out[-3000:]}")
    print(f"no-conditional: {lines[-1].strip()[:400]}", flush=True)
    check(after["unconditional_rewrites"] > before["unconditional_rewrites"],
          "no-conditional: the probe's second create never came")
    versions = metadata_versions(ctx.bucket, spec["table_prefix"])
    check(not versions, f"no-conditional: metadata versions written: {sorted(versions.values())}")
    c = Committed(ctx.bootstrap, spec["group"], "events")
    try:
        group = c.get()
    finally:
        c.close()
    check(group == [0] * PARTITIONS, f"no-conditional: the group committed {group}")
    rc, qout, qerr = sluice_sql(ctx, spec["warehouse"], "SELECT count(*) FROM lake.db.events",
                                env("AWS_ENDPOINT_URL_S3"))
    check(rc != 0 and qout.strip() == "", f"no-conditional: a table to query: {qout!r}")


def main():
    check(len(sys.argv) == 2, "usage: s3_faults_test.py path/to/sluice")
    seed = int(os.environ.get("SLUICE_S3_FAULTS_SEED") or random.SystemRandom().randrange(1 << 31))
    print(f"s3 faults test seed {seed} (SLUICE_S3_FAULTS_SEED={seed} repeats it)", flush=True)
    sluice = os.path.abspath(sys.argv[1])
    rc = run_test("s3_faults_test", sluice, faults_test(sluice, seed))
    if rc != 0:
        print(f"seed {seed}: SLUICE_S3_FAULTS_SEED={seed} repeats it")
    return rc


if __name__ == "__main__":
    sys.exit(main())
