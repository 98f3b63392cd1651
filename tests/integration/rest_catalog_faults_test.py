#!/usr/bin/python3
"""A pipeline into an Iceberg table through a faulty Iceberg REST catalog (issue 26): a second
`sluice serve --warehouse DIR` is the catalog (its warehouse a local directory), behind
tests/tools/s3_fault_proxy.py (any HTTP: its 500 bodies are S3 XML, which is still a 5xx),
and `sluice serve` as the broker. The sink's client retries reads and creates on 5xx, 429
and broken connections, never a commit: a commit failing with a 5xx or a broken connection
has an unknown outcome, so the table re-reads and finds its snapshot, or builds it again.

1. Faults everywhere: `sluice pipeline run` from a topic of several partitions into
   lake.db.events (partitioned by city) through the proxy, which answers a seeded fraction
   of the catalog's requests 503 and 500 (some after the catalog did the request), resets
   connections before and after the catalog saw the request, cuts replies short and delays
   some. Messages are produced while it runs. A pipeline that exits is started again, as a
   supervisor would, until the group's commit reaches the end of every partition;
   meanwhile the group's commit is never ahead of the offsets of the table's current
   snapshot (read straight from the catalog's directory). Then `sluice sql --warehouse DIR`
   (the directory, no catalog, no proxy) sees every message exactly once (count, distinct
   ids, distinct (partition, offset), the sum), and the current snapshot's offsets are the
   topic's ends. The same for an unpartitioned table (lake.db.plain, streamed files) fed by
   another group from the same topic.
2. Lost replies to the commit itself: only the commits (POST .../tables/events) fail, most
   of them after the catalog committed (500 after, reset after, cut reply), some 503s
   before. More messages, the same checks, and the proxy's log must show commits that
   landed with their reply lost (the phase cannot pass without faults).
3. The catalog unreachable: a new pipeline process (a new group) whose every catalog
   request is reset, answered 503, or whose catalog uri is a closed port must exit non-zero
   with an error naming the REST catalog, commit nothing to its group and add no table
   version.
Every phase runs whatever an earlier one found; the test fails if any did.

The seed is printed; SLUICE_REST_FAULTS_SEED=<seed> repeats its fault draws (which request
gets the n-th draw still depends on timing).

usage: /usr/bin/python3 rest_catalog_faults_test.py path/to/sluice
"""

import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))
from sluice_broker import TestFailure, check, run_test, wait_until  # noqa: E402
from s3_fault_proxy import FAULT_KINDS, S3FaultProxy  # noqa: E402

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PARTITIONS = 4
CITIES = ["Paris", "Lyon", "Oslo", "Lima", "Kyoto"]

# Phase 1's faults: about one catalog request in five fails, one in ten is slow.
FAULTS = {"err503": 0.06, "err500": 0.04, "err500_after": 0.03, "reset_before": 0.02,
          "reset_after": 0.03, "cut_body": 0.03, "delay_ms": 250, "delay_rate": 0.1}
# Phase 2's: the commit (POST /v1/namespaces/db/tables/events), mostly failing after the
# catalog committed: the reply is lost, the snapshot is there.
COMMIT_FAULTS = {"methods": "POST", "path_contains": "/tables/events", "reset_after": 0.3,
                 "err500_after": 0.3, "cut_body": 0.15, "err503": 0.1}
AFTER_KINDS = ("err500_after", "reset_after", "cut_body")

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
      table_name: db.{table}
      catalog:
        type: rest
        uri: '{uri}'
        max_retries: 3
        request_timeout_ms: 15000
      commit_interval_seconds: 1
{layout}  on_error:
    policy: RAISE
  duckdb: {{memory_limit: 256MiB, threads: 1}}
"""


def event(n):
    return {"id": n, "city": CITIES[n % len(CITIES)], "amount": n * 0.5}


def create_topic(bootstrap, topic, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                           replication_factor=1)]).values():
        f.result(timeout=30)


def produce(bootstrap, topic, ids):
    failed = []
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for n in ids:
        p.produce(topic, value=json.dumps(event(n)).encode(), partition=n % PARTITIONS,
                  on_delivery=lambda err, msg: err and failed.append(err))
    check(p.flush(30) == 0, "records not delivered")
    check(not failed, f"records not delivered: {failed[:3]}")


class Catalog:
    """The REST catalog: `sluice serve --warehouse DIR`, its HTTP port the catalog's."""

    def __init__(self, sluice, tmp):
        self.warehouse = os.path.join(tmp, "catalog-wh")
        self.out_path = os.path.join(tmp, "catalog.out")
        self.err_path = os.path.join(tmp, "catalog.err")
        os.makedirs(self.warehouse)
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sluice, "serve", "--warehouse", self.warehouse, "--http-addr", "127.0.0.1:0",
                 "--kafka-addr", "127.0.0.1:0", "--pg-addr", "off",
                 "--schema-registry-addr", "off", "--data-dir", os.path.join(tmp, "catalog-data")],
                stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        banner = re.compile(r"Iceberg REST catalog on http://127\.0\.0\.1:(\d+)/v1")

        def up():
            with open(self.out_path, errors="replace") as f:
                m = banner.search(f.read())
            if m:
                return m
            if self.proc.poll() is not None:
                raise TestFailure("the catalog's sluice serve exited before serving:\n" +
                                  self.logs())
            return None

        self.port = int(wait_until(up, 30, "the REST catalog serving").group(1))

    def logs(self, lines=40):
        out = []
        for path in (self.out_path, self.err_path):
            with open(path, errors="replace") as f:
                out.append(f"--- {os.path.basename(path)}:\n" +
                           "\n".join(f.read().splitlines()[-lines:]))
        return "\n".join(out)

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


class Committed:
    """The group's committed offsets, read by a consumer that never joins it."""

    def __init__(self, bootstrap, group, topic):
        self.topic = topic
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "enable.auto.commit": False})

    def get(self):
        tps = self.consumer.committed([TopicPartition(self.topic, p) for p in range(PARTITIONS)],
                                      timeout=20)
        return [max(tp.offset, 0) for tp in tps]

    def close(self):
        self.consumer.close()


def group_committed(ctx, group, topic):
    c = Committed(ctx.bootstrap, group, topic)
    try:
        return c.get()
    finally:
        c.close()


class Pipeline:
    """One `sluice pipeline run` process, its output in a file."""

    def __init__(self, sluice, path, log_path):
        e = dict(os.environ)
        e["TMPDIR"] = os.path.dirname(log_path)
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen([sluice, "pipeline", "run", path, "--no-progress"],
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=e)

    def output(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def running(self):
        return self.proc.poll() is None

    def stop(self, timeout=90):
        """SIGTERM: the exit status; a hang past `timeout` is a failure."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise TestFailure(f"the pipeline did not stop within {timeout} s of SIGTERM:\n" +
                              self.output()[-3000:])
        finally:
            self.log.close()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


def final_errors(text):
    """The lines `sluice pipeline run` ends with when it fails."""
    return [l for l in text.splitlines() if l.startswith("sluice pipeline run:")]


def last_error(text):
    lines = final_errors(text) or [l for l in text.splitlines()
                                   if re.search(r"error|fail|refus", l, re.I)]
    return lines[-1][:400] if lines else (text.strip().splitlines() or ["(no output)"])[-1][:400]


def supervise(ctx, spec, ends, what, max_starts=25, progress_timeout=120):
    """Runs the pipeline of `spec`, starting it again whenever it exits, until the group's
    commit reaches `ends`; then stops it (SIGTERM). Meanwhile the group's commit is never
    ahead of the offsets the table holds (read from the catalog's directory after it).
    Returns the outputs of the runs."""
    outputs = []
    committed = Committed(ctx.bootstrap, spec["group"], spec["topic"])
    try:
        while True:
            check(len(outputs) < max_starts,
                  f"{what}: the pipeline exited {max_starts} times without reaching the end")
            log = os.path.join(ctx.tmp, f"{spec['name']}-{len(outputs) + 1}.log")
            run = Pipeline(ctx.sluice, spec["path"], log)
            try:
                if watch_run(ctx, spec, ends, what, run, committed, outputs, progress_timeout):
                    return outputs
            finally:
                if run.running():
                    run.kill()
    finally:
        committed.close()


def watch_run(ctx, spec, ends, what, run, committed, outputs, progress_timeout):
    """Watches one run of supervise(): True when it reached the end (and was stopped),
    False when it exited by itself."""
    last, last_change = None, time.monotonic()
    while True:
        now = committed.get()
        if now != last:
            last, last_change = now, time.monotonic()
            held = table_offsets(ctx, spec)
            check(all(now[p] <= held[p] for p in range(PARTITIONS)),
                  f"{what}: the group committed {now}, ahead of the table's {held}")
        if now == ends:
            rc = run.stop()
            out = run.output()
            outputs.append(out)
            print(f"{what}: run {len(outputs)} reached the end; SIGTERM -> exit {rc}"
                  + ("" if rc == 0 else f" ({last_error(out)})"), flush=True)
            return True
        if not run.running():
            out = run.output()
            outputs.append(out)
            run.kill()
            print(f"{what}: run {len(outputs)} exited {run.proc.returncode} at {now}: "
                  f"{last_error(out)}", flush=True)
            return False
        if time.monotonic() - last_change > progress_timeout:
            out = run.output()
            run.kill()
            raise TestFailure(f"{what}: no progress for {progress_timeout} s at {now} "
                              f"of {ends} (a hang?):\n{out[-4000:]}")
        time.sleep(0.3)


def metadata_versions(table_dir):
    """{N: path} of the table's v<N>.metadata.json files in the catalog's directory."""
    out = {}
    try:
        names = os.listdir(os.path.join(table_dir, "metadata"))
    except FileNotFoundError:
        return out
    for name in names:
        m = re.fullmatch(r"v(\d+)\.metadata\.json", name)
        if m:
            out[int(m.group(1))] = os.path.join(table_dir, "metadata", name)
    return out


def current_metadata(table_dir):
    """The table's current metadata (None when there is none): the version the hint names,
    or a newer one (the hint is written after the version it names)."""
    versions = metadata_versions(table_dir)
    hint = 0
    try:
        with open(os.path.join(table_dir, "metadata", "version-hint.text")) as f:
            hint = int(f.read().strip() or 0)
    except (FileNotFoundError, ValueError):
        pass
    if not versions:
        check(hint == 0, f"{table_dir}: version-hint.text names v{hint}, no version there")
        return None, 0
    latest = max(versions)
    check(hint <= latest, f"{table_dir}: version-hint.text names v{hint}, newest is v{latest}")
    with open(versions[latest]) as f:
        return json.load(f), latest


def current_snapshot(meta):
    return next((s for s in meta.get("snapshots", [])
                 if s["snapshot-id"] == meta.get("current-snapshot-id")), None)


def table_offsets(ctx, spec):
    """The offsets of the table's current snapshot for the spec's group (zeros when there
    is none), read from the catalog's directory."""
    meta, _ = current_metadata(spec["table_dir"])
    snap = current_snapshot(meta) if meta else None
    key = f"sluice.offsets.{spec['group']}.{spec['topic']}"
    if snap is None or key not in snap["summary"]:
        return [0] * PARTITIONS
    held = json.loads(snap["summary"][key])
    return [held.get(str(p), 0) for p in range(PARTITIONS)]


def sluice_sql(ctx, query, timeout=120):
    """`sluice sql --warehouse <the catalog's directory> --json`: (exit status, stdout,
    stderr). A fresh TMPDIR each time."""
    tmp = tempfile.mkdtemp(dir=ctx.tmp, prefix="sql-")
    e = dict(os.environ, TMPDIR=tmp)
    try:
        r = subprocess.run([ctx.sluice, "sql", "--warehouse", ctx.catalog.warehouse, "--json",
                            query], capture_output=True, text=True, timeout=timeout, env=e)
    except subprocess.TimeoutExpired:
        raise TestFailure(f"sluice sql did not answer within {timeout} s (a hang?): {query}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return r.returncode, r.stdout, r.stderr


CHECK_SQL = ("SELECT count(*) AS n, count(DISTINCT id) AS ids, count(DISTINCT (p, o)) AS po, "
             "min(id) AS lo, max(id) AS hi, sum(amount) AS amount FROM lake.db.{table}")


def expected_row(total):
    return {"n": total, "ids": total, "po": total, "lo": 0, "hi": total - 1,
            "amount": sum(n * 0.5 for n in range(total))}


def check_table(ctx, spec, total, ends, when):
    """Every message exactly once, read from the catalog's directory; the current
    snapshot's offsets are the topic's ends."""
    rc, out, err = sluice_sql(ctx, CHECK_SQL.format(table=spec["table"]))
    check(rc == 0, f"{when}: sluice sql --warehouse failed ({rc}): {err}")
    rows = [json.loads(l) for l in out.splitlines() if l.strip()]
    check(len(rows) == 1, f"{when}: sluice sql printed {out!r}")
    row, want = rows[0], expected_row(total)
    if row != want:
        dup = sluice_sql(ctx, f"SELECT id, count(*) AS c FROM lake.db.{spec['table']} "
                              "GROUP BY id HAVING count(*) > 1 ORDER BY id LIMIT 20")[1]
        dups = ", ".join(f"{d['id']} x{d['c']}" for d in map(json.loads, dup.split()))
        raise TestFailure(f"{when}: the table holds {row}, expected {want} (every message "
                          f"once); ids more than once: {dups or 'none'}")
    meta, latest = current_metadata(spec["table_dir"])
    check(meta, f"{when}: no metadata version")
    snap = current_snapshot(meta)
    check(snap, f"{when}: no current snapshot in v{latest}")
    check(snap["summary"].get("total-records") == str(total),
          f"{when}: total-records {snap['summary'].get('total-records')} in v{latest}")
    offsets = json.loads(snap["summary"][f"sluice.offsets.{spec['group']}.{spec['topic']}"])
    check([offsets.get(str(p)) for p in range(PARTITIONS)] == ends,
          f"{when}: the snapshot's offsets {offsets}, the topic's ends {ends}")
    print(f"{when}: {total} messages exactly once in lake.db.{spec['table']} v{latest} "
          f"({len(meta.get('snapshots', []))} snapshots)", flush=True)
    return latest


def write_spec(ctx, name, table, uri, partitioned=True):
    spec = {"name": name, "group": f"{name}-group", "topic": "events", "table": table,
            "table_dir": os.path.join(ctx.catalog.warehouse, "db", table),
            "path": os.path.join(ctx.tmp, f"{name}.yml")}
    with open(spec["path"], "w") as f:
        f.write(PIPELINE.format(name=name, bootstrap=ctx.bootstrap, group=spec["group"],
                                topic=spec["topic"], table=table, uri=uri,
                                layout="      partition_by: [city]\n" if partitioned else ""))
    return spec


def fault_counts(before, after):
    keys = FAULT_KINDS + ("delayed",)
    return {k: after.get(k, 0) - before.get(k, 0) for k in keys if after.get(k, 0) - before.get(k, 0)}


class Ctx:
    """What the phases share: the broker, the catalog, the proxy, a scratch directory."""


def faults_test(sluice, seed):
    def body(broker):
        ctx = Ctx()
        ctx.sluice, ctx.bootstrap = sluice, broker.bootstrap
        ctx.tmp = tempfile.mkdtemp(prefix="sluice-restfaults-")
        ctx.rng = random.Random(seed)
        ctx.catalog = None
        proxy = None
        failed = []
        try:
            ctx.catalog = Catalog(sluice, ctx.tmp)
            proxy = S3FaultProxy("127.0.0.1", ctx.catalog.port).start()
            ctx.proxy_url = f"http://127.0.0.1:{proxy.port}"
            print(f"catalog on 127.0.0.1:{ctx.catalog.port} (warehouse {ctx.catalog.warehouse}), "
                  f"its fault proxy on {ctx.proxy_url}", flush=True)
            create_topic(ctx.bootstrap, "events", PARTITIONS)
            # Each phase runs, whatever an earlier one found; 1 and 2 share one table.
            for phase in (phase_faults, phase_commit_faults, phase_catalog_down):
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
            if proxy is not None:
                proxy.close()
                print("proxy totals: " + json.dumps({k: v for k, v in proxy.stats().items()
                                                     if k != "settings"}), flush=True)
            if ctx.catalog is not None:
                rc = ctx.catalog.stop()
                if rc != 0:
                    failed.append(f"the catalog's sluice serve exited {rc} after SIGTERM:\n"
                                  f"{ctx.catalog.logs()}")
            if failed:
                print(f"logs kept in {ctx.tmp}", flush=True)
            else:
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
    """1. Faults on every catalog request, messages arriving while the pipeline runs; then
    an unpartitioned table from the same messages under the same faults."""
    ctx.spec = write_spec(ctx, "lake", "events", ctx.proxy_url)
    ctx.total = 3600
    before = proxy.stats()
    proxy.set_faults(seed=ctx.rng.randrange(1 << 31), **FAULTS)
    print(f"faults: {proxy.settings()}", flush=True)
    t = producer_thread(ctx, "events", 0, ctx.total, 300, 0.8)
    runs = supervise(ctx, ctx.spec, ends_of(ctx.total), "faults")
    t.join()
    after = proxy.stats()
    print(f"faults: {len(runs)} run(s); injected {fault_counts(before, after)} in "
          f"{after['requests'] - before['requests']} requests", flush=True)
    check(sum(fault_counts(before, after).get(k, 0) for k in FAULT_KINDS) > 0,
          "faults: no fault was injected")
    proxy.set_faults()
    check_table(ctx, ctx.spec, ctx.total, ends_of(ctx.total), "after the faults")

    plain = write_spec(ctx, "plain", "plain", ctx.proxy_url, partitioned=False)
    before = proxy.stats()
    proxy.set_faults(seed=ctx.rng.randrange(1 << 31), **FAULTS)
    print(f"faults, unpartitioned: {proxy.settings()}", flush=True)
    runs = supervise(ctx, plain, ends_of(ctx.total), "faults, unpartitioned")
    after = proxy.stats()
    print(f"faults, unpartitioned: {len(runs)} run(s); injected {fault_counts(before, after)} "
          f"in {after['requests'] - before['requests']} requests", flush=True)
    proxy.set_faults()
    check_table(ctx, plain, ctx.total, ends_of(ctx.total), "after the faults, unpartitioned")


def phase_commit_faults(ctx, proxy):
    """2. The commits' replies lost: most commits fail after the catalog committed, so the
    table's re-read must find its snapshot there (and never append it twice)."""
    more = 600
    before = proxy.stats()
    proxy.set_faults(seed=ctx.rng.randrange(1 << 31), **COMMIT_FAULTS)
    print(f"commit faults: {proxy.settings()}", flush=True)
    t = producer_thread(ctx, "events", ctx.total, ctx.total + more, 100, 1.0)
    ctx.total += more
    runs = supervise(ctx, ctx.spec, ends_of(ctx.total), "commit faults")
    t.join()
    after = proxy.stats()
    commits = [e for e in proxy.log() if e["n"] > before["requests"] and e["method"] == "POST"
               and e["target"].split("?")[0].endswith("/tables/events")]
    landed_lost = [e for e in commits if e["fault"] in AFTER_KINDS and
                   (e.get("store_status", e.get("status")) == 200)]
    print(f"commit faults: {len(runs)} run(s); {len(commits)} commit requests, injected "
          f"{fault_counts(before, after)}; {len(landed_lost)} commits landed with their reply "
          f"lost", flush=True)
    proxy.set_faults()
    check(landed_lost, f"commit faults: no commit landed with its reply lost (faults "
                       f"{fault_counts(before, after)} on {len(commits)} commits)")
    check(after["err503"] > before["err503"] or after["err500_after"] > before["err500_after"],
          "commit faults: no 5xx answered to a commit")
    check_table(ctx, ctx.spec, ctx.total, ends_of(ctx.total), "after the commit faults")


def closed_port():
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def phase_catalog_down(ctx, proxy):
    """3. The catalog unreachable for a new pipeline process and group: exit non-zero with
    an error naming the REST catalog, nothing committed anywhere."""
    table_dir = ctx.spec["table_dir"]
    _, version = current_metadata(table_dir)
    for mode in ("reset", "503", "closed port"):
        name = "down-" + mode.replace(" ", "-")
        if mode == "closed port":
            proxy.set_faults()
            uri = f"http://127.0.0.1:{closed_port()}"
        else:
            uri = ctx.proxy_url
            proxy.set_faults(**({"reset_before": 1.0} if mode == "reset" else {"err503": 1.0}))
        spec = write_spec(ctx, name, "events", uri)
        before = proxy.stats()
        run = Pipeline(ctx.sluice, spec["path"], os.path.join(ctx.tmp, f"{name}.log"))
        try:
            wait_until(lambda: not run.running(), 120,
                       f"catalog down ({mode}): the pipeline exiting")
        except TestFailure:
            out = run.output()
            run.kill()
            raise TestFailure(f"catalog down ({mode}): the pipeline still runs after 120 s:\n"
                              + out[-3000:])
        run.log.close()
        out = run.output()
        rc = run.proc.returncode
        after = proxy.stats()
        print(f"catalog down ({mode}): the pipeline exited {rc}; {fault_counts(before, after)}",
              flush=True)
        check(rc not in (0, None) and rc > 0,
              f"catalog down ({mode}): the pipeline exited {rc}:\n{out[-3000:]}")
        errors = final_errors(out)
        check(errors, f"catalog down ({mode}): no `sluice pipeline run:` error:\n{out[-3000:]}")
        check("REST catalog" in errors[-1],
              f"catalog down ({mode}): the error does not name the REST catalog: {errors[-1]!r}")
        print(f"catalog down ({mode}): {errors[-1][:400]}", flush=True)
        if mode != "closed port":
            check(after["requests"] > before["requests"],
                  f"catalog down ({mode}): no request reached the proxy")
        group = group_committed(ctx, spec["group"], "events")
        check(group == [0] * PARTITIONS, f"catalog down ({mode}): the group committed {group}")
        _, now = current_metadata(table_dir)
        check(now == version, f"catalog down ({mode}): the table moved from v{version} to v{now}")
    proxy.set_faults()


def main():
    check(len(sys.argv) == 2, "usage: rest_catalog_faults_test.py path/to/sluice")
    seed = int(os.environ.get("SLUICE_REST_FAULTS_SEED") or
               random.SystemRandom().randrange(1 << 31))
    print(f"rest catalog faults test seed {seed} (SLUICE_REST_FAULTS_SEED={seed} repeats it)",
          flush=True)
    sluice = os.path.abspath(sys.argv[1])
    start = time.monotonic()
    rc = run_test("rest_catalog_faults_test", sluice, faults_test(sluice, seed))
    print(f"took {time.monotonic() - start:.0f} s", flush=True)
    if rc != 0:
        print(f"seed {seed}: SLUICE_REST_FAULTS_SEED={seed} repeats it")
    return rc


if __name__ == "__main__":
    sys.exit(main())
