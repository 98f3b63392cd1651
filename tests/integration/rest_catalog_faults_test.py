#!/usr/bin/python3
"""A pipeline into an Iceberg table through a faulty Iceberg REST catalog (issue 26): a second
`sluice serve --warehouse DIR` is the catalog (its warehouse a local directory), behind
tests/tools/s3_fault_proxy.py (any HTTP: its 500 bodies are S3 XML, which is still a 5xx),
and `sluice serve` as the broker. The sink's client retries reads and creates on 5xx, 429
and broken connections, never a commit: a commit failing with a 5xx or a broken connection
has an unknown outcome, so the table re-reads and finds its snapshot, or builds it again.

1. Faults everywhere: three `sluice pipeline run`s from one topic of several partitions,
   each its own group, through the proxy: two into lake.db.events (partitioned by city;
   racing for every version, so lost races (409) meet lost replies), one into
   lake.db.plain (unpartitioned: streamed files). Each row says which pipeline wrote it.
   The proxy answers a seeded
   fraction of the catalog's requests 503 and 500 (some after the catalog did the
   request), resets connections before and after the catalog saw the request, cuts replies
   short and delays some. Messages are produced while they run. A pipeline that exits is
   started again, as a supervisor would (its last line must name the REST catalog), until
   its group's commit reaches the end of every partition; meanwhile the group's commit is
   never ahead of the offsets of the table's current snapshot (read straight from the
   catalog's directory: metadata/version-hint.text and the newest v<N>.metadata.json).
   Then `sluice sql --warehouse DIR` (the directory: no catalog, no proxy) sees every
   message exactly once from each pipeline (count, distinct ids, distinct (partition,
   offset), the sum), the current snapshot's total-records is the table's, and its offsets
   for each group are the topic's ends.
2. Lost replies to the commit itself: only the commits (POST .../tables/events) fail, most
   of them after the catalog committed (500 after, reset after, cut reply), some 503s
   before, and some are held past the sink's request timeout before they reach the
   catalog (they land, or meet a 409, after the sink re-read and built again). More
   messages for one pipeline into lake.db.events, the same checks; the proxy's log must
   show commits that landed with their reply lost and commits held past the timeout (the
   phase cannot pass without them).
   Then the create's lost reply: a new table (db.created, a new group) whose create the
   catalog makes but answers 500, and whose retried create loses its 409 to a reset: the
   same run must open the table and go on; every message exactly once.
3. The catalog unreachable: a new pipeline process (a new group) whose every catalog
   request is reset, answered 503, or whose catalog uri is a closed port must exit non-zero
   with an error naming the REST catalog, commit nothing to its group and add no table
   version.
4. A catalog outage under a running pipeline: every request reset for 10 s while messages
   arrive, then healed. Runs that exit meanwhile name the REST catalog and are started
   again; the group is never ahead of the table; every message exactly once.
Every phase runs whatever an earlier one found; the test fails if any did.

The seed is printed; SLUICE_REST_FAULTS_SEED=<seed> repeats its fault draws (which request
gets the n-th draw still depends on timing). The scratch directory (every run's output, the
proxy's request log) is kept when the test fails, or always with SLUICE_REST_FAULTS_KEEP=1.

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
import supervised_pipeline  # noqa: E402
from supervised_pipeline import (PARTITIONS, Committed, Pipeline, create_topic, event,  # noqa: E402
                                 final_errors, last_error)

from confluent_kafka import Producer  # noqa: E402


# Phase 1's faults: about one catalog request in five fails, one in ten is slow.
FAULTS = {"err503": 0.06, "err500": 0.04, "err500_after": 0.03, "reset_before": 0.02,
          "reset_after": 0.03, "cut_body": 0.03, "delay_ms": 250, "delay_rate": 0.1}
# The sink's catalog.request_timeout_ms in every pipeline here.
REQUEST_TIMEOUT_MS = 5000
# Phase 2's: the commit (POST /v1/namespaces/db/tables/events), mostly failing after the
# catalog committed: the reply is lost, the snapshot is there. Some commits are held past
# the sink's request timeout before the proxy sends them on: the sink gives up on them,
# re-reads, builds again, and the held one reaches the catalog after that.
COMMIT_FAULTS = {"methods": "POST", "path_contains": "/tables/events", "reset_after": 0.3,
                 "err500_after": 0.3, "cut_body": 0.15, "err503": 0.1,
                 "delay_ms": REQUEST_TIMEOUT_MS + 1500, "delay_rate": 0.05,
                 # The first commits' faults, before the draws: two held past the timeout,
                 # a reset and a 500 after the catalog saw them.
                 "script": ["pass", "delay", "reset_after", "err500_after", "delay"]}
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
             kafka_offset AS o, '{name}' AS w
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
        request_timeout_ms: {timeout_ms}
      commit_interval_seconds: 1
{layout}  on_error:
    policy: RAISE
  duckdb: {{memory_limit: 256MiB, threads: 1}}
"""


def new_producer(bootstrap):
    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                     "linger.ms": 5})


def produce(producer, topic, ids):
    """Produces the events of `ids` (event n to partition n % PARTITIONS), all delivered."""
    failed = []
    for n in ids:
        producer.produce(topic, value=json.dumps(event(n)).encode(), partition=n % PARTITIONS,
                         on_delivery=lambda err, msg: err and failed.append(err))
    check(producer.flush(30) == 0, "records not delivered")
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


def group_committed(ctx, group, topic):
    c = Committed(ctx.bootstrap, group, topic)
    try:
        return c.get()
    finally:
        c.close()


def supervise(ctx, spec, ends, what):
    """supervised_pipeline.supervise, the table's offsets read from the catalog's directory;
    a run that exits by itself must say why, naming the REST catalog (only the catalog
    fails here: a run gives up, it does not crash)."""
    def named(what, n, rc, out):
        errors = final_errors(out)
        check(rc > 0 and errors and "REST catalog" in errors[-1],
              f"{what}: run {n} exited {rc} without an error naming the REST catalog:\n"
              f"{out[-3000:]}")
    return supervised_pipeline.supervise(ctx, spec, ends, what,
                                         lambda spec: table_offsets(ctx, spec), on_exit=named)


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
             "min(id) AS lo, max(id) AS hi, sum(amount) AS amount FROM lake.db.{table} "
             "WHERE w = '{writer}'")


def expected_row(total):
    return {"n": total, "ids": total, "po": total, "lo": 0, "hi": total - 1,
            "amount": sum(n * 0.5 for n in range(total))}


def check_table(ctx, spec, total, ends, when, table_rows=None):
    """Every message exactly once among the rows of the spec's pipeline (the table may hold
    `table_rows` in all, when another writes it too), read from the catalog's directory;
    the current snapshot's offsets for its group are the topic's ends."""
    table_rows = total if table_rows is None else table_rows
    rc, out, err = sluice_sql(ctx, CHECK_SQL.format(table=spec["table"], writer=spec["name"]))
    check(rc == 0, f"{when}: sluice sql --warehouse failed ({rc}): {err}")
    rows = [json.loads(l) for l in out.splitlines() if l.strip()]
    check(len(rows) == 1, f"{when}: sluice sql printed {out!r}")
    row, want = rows[0], expected_row(total)
    if row != want:
        dup = sluice_sql(ctx, f"SELECT id, count(*) AS c FROM lake.db.{spec['table']} "
                              f"WHERE w = '{spec['name']}' "
                              "GROUP BY id HAVING count(*) > 1 ORDER BY id LIMIT 20")[1]
        dups = ", ".join(f"{d['id']} x{d['c']}" for d in map(json.loads, dup.split()))
        raise TestFailure(f"{when}: the table holds {row}, expected {want} (every message "
                          f"once); ids more than once: {dups or 'none'}")
    meta, latest = current_metadata(spec["table_dir"])
    check(meta, f"{when}: no metadata version")
    snap = current_snapshot(meta)
    check(snap, f"{when}: no current snapshot in v{latest}")
    check(snap["summary"].get("total-records") == str(table_rows),
          f"{when}: total-records {snap['summary'].get('total-records')} in v{latest}")
    offsets = json.loads(snap["summary"][f"sluice.offsets.{spec['group']}.{spec['topic']}"])
    check([offsets.get(str(p)) for p in range(PARTITIONS)] == ends,
          f"{when}: the snapshot's offsets {offsets}, the topic's ends {ends}")
    print(f"{when}: {total} messages exactly once from {spec['name']} in "
          f"lake.db.{spec['table']} v{latest} ({table_rows} rows, "
          f"{len(meta.get('snapshots', []))} snapshots)", flush=True)
    return latest


def write_spec(ctx, name, table, uri, partitioned=True):
    spec = {"name": name, "group": f"{name}-group", "topic": "events", "table": table,
            "table_dir": os.path.join(ctx.catalog.warehouse, "db", table),
            "path": os.path.join(ctx.tmp, f"{name}.yml")}
    with open(spec["path"], "w") as f:
        f.write(PIPELINE.format(name=name, bootstrap=ctx.bootstrap, group=spec["group"],
                                topic=spec["topic"], table=table, uri=uri,
                                timeout_ms=REQUEST_TIMEOUT_MS,
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
            # Each phase runs, whatever an earlier one found; 1, 2 and 4 share db.events.
            for phase in (phase_faults, phase_commit_faults, phase_create_reply_lost,
                          phase_catalog_down, phase_catalog_outage):
                name = phase.__name__[len("phase_"):]
                began = time.monotonic()
                try:
                    phase(ctx, proxy)
                    print(f"phase {name}: PASS ({time.monotonic() - began:.0f} s)", flush=True)
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
            if failed or os.environ.get("SLUICE_REST_FAULTS_KEEP") == "1":
                if proxy is not None:
                    with open(os.path.join(ctx.tmp, "proxy-log.json"), "w") as f:
                        json.dump(proxy.log(), f, indent=0)
                print(f"logs kept in {ctx.tmp}", flush=True)
            else:
                shutil.rmtree(ctx.tmp, ignore_errors=True)
        check(not failed, "%d phase(s) failed:\n  %s" % (len(failed), "\n  ".join(failed)))

    return body


def producer_thread(ctx, topic, lo, hi, chunk, pause):
    """Produces ids [lo, hi) in chunks, a pause after each: the pipeline commits many
    times meanwhile."""
    def run():
        producer = new_producer(ctx.bootstrap)
        for n in range(lo, hi, chunk):
            produce(producer, topic, range(n, min(n + chunk, hi)))
            time.sleep(pause)

    return Background(run)


def ends_of(total):
    return [len(range(p, total, PARTITIONS)) for p in range(PARTITIONS)]


class Background:
    """fn() in a thread of its own: join() returns its result or raises its failure."""

    def __init__(self, fn):
        self.result, self.error = None, None

        def run():
            try:
                self.result = fn()
            except BaseException as e:  # handed to join()
                self.error = e

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self):
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.result


def phase_faults(ctx, proxy):
    """1. Faults on every catalog request, messages arriving while three pipelines run, each
    its own group: two into the partitioned lake.db.events (racing for every version), one
    into the unpartitioned lake.db.plain."""
    ctx.spec = write_spec(ctx, "lake", "events", ctx.proxy_url)
    twin = write_spec(ctx, "twin", "events", ctx.proxy_url)
    plain = write_spec(ctx, "plain", "plain", ctx.proxy_url, partitioned=False)
    ctx.total = ctx.twin_total = 4000
    before = proxy.stats()
    proxy.set_faults(seed=ctx.rng.randrange(1 << 31), **FAULTS)
    print(f"faults: {proxy.settings()}", flush=True)
    t = producer_thread(ctx, "events", 0, ctx.total, 50, 0.4)
    ends = ends_of(ctx.total)
    supervisors = [Background(lambda s=s, w=w: supervise(ctx, s, ends, w))
                   for s, w in ((ctx.spec, "faults"), (twin, "faults, twin"),
                                (plain, "faults, unpartitioned"))]
    failures = []
    for s in supervisors:
        try:
            s.join()
        except Exception as e:  # reported once all are done
            failures.append(str(e) if isinstance(e, TestFailure) else repr(e))
    t.join()
    after = proxy.stats()
    injected = fault_counts(before, after)
    commits = [e for e in proxy.log() if e["n"] > before["requests"] and e["method"] == "POST"
               and "/tables/" in e["target"]]
    print(f"faults: {[len(s.result or []) for s in supervisors]} run(s); injected {injected} in "
          f"{after['requests'] - before['requests']} requests; "
          f"{sum(e.get('status') == 409 for e in commits)} of {len(commits)} commits refused "
          f"409 (lost races)", flush=True)
    check(not failures, "; ".join(failures))
    check(sum(injected.get(k, 0) for k in FAULT_KINDS) > 0, "faults: no fault was injected")
    proxy.set_faults()
    both = ctx.total + ctx.twin_total
    check_table(ctx, ctx.spec, ctx.total, ends, "after the faults", both)
    check_table(ctx, twin, ctx.twin_total, ends, "after the faults, twin", both)
    check_table(ctx, plain, ctx.total, ends, "after the faults, unpartitioned")


def phase_commit_faults(ctx, proxy):
    """2. The commits' replies lost: most commits fail after the catalog committed, so the
    table's re-read must find its snapshot there (and never append it twice)."""
    more = 1600
    before = proxy.stats()
    proxy.set_faults(seed=ctx.rng.randrange(1 << 31), **COMMIT_FAULTS)
    print(f"commit faults: {proxy.settings()}", flush=True)
    t = producer_thread(ctx, "events", ctx.total, ctx.total + more, 40, 0.6)
    ctx.total += more
    try:
        runs = supervise(ctx, ctx.spec, ends_of(ctx.total), "commit faults")
    finally:
        t.join()
    after = proxy.stats()
    commits = [e for e in proxy.log() if e["n"] > before["requests"] and e["method"] == "POST"
               and e["target"].split("?")[0].endswith("/tables/events")]
    landed_lost = [e for e in commits if e["fault"] in AFTER_KINDS and
                   (e.get("store_status", e.get("status")) == 200)]
    held = [e for e in commits if e["delay_ms"] > REQUEST_TIMEOUT_MS]
    print(f"commit faults: {len(runs)} run(s); {len(commits)} commit requests, injected "
          f"{fault_counts(before, after)}; {len(landed_lost)} commits landed with their reply "
          f"lost; {len(held)} held past the sink's timeout, then answered "
          f"{[e.get('store_status', e.get('status')) for e in held]} by the catalog; "
          f"{sum(e.get('status') == 409 for e in commits)} commits refused 409", flush=True)
    proxy.set_faults()
    check(landed_lost, f"commit faults: no commit landed with its reply lost (faults "
                       f"{fault_counts(before, after)} on {len(commits)} commits)")
    check(len(held) >= 2, f"commit faults: {len(held)} commits held past the sink's timeout")
    check(after["err503"] > before["err503"] or after["err500_after"] > before["err500_after"],
          "commit faults: no 5xx answered to a commit")
    check_table(ctx, ctx.spec, ctx.total, ends_of(ctx.total), "after the commit faults",
                ctx.total + ctx.twin_total)


def phase_create_reply_lost(ctx, proxy):
    """2, continued. The create's reply lost: a new table (a new group, the same messages) whose
    create the catalog does, answering 500; the client's retry of the create then loses
    its reply (409 from the catalog, the connection reset after it), and its next retry
    meets the table (409): the sink opens it and goes on, in the same run."""
    spec = write_spec(ctx, "created", "created", ctx.proxy_url)
    before = proxy.stats()
    proxy.set_faults(methods="POST", path_contains="/v1/namespaces/db/tables",
                     script=["err500_after", "reset_after"])
    runs = supervise(ctx, spec, ends_of(ctx.total), "create reply lost")
    after = proxy.stats()
    creates = [e for e in proxy.log() if e["n"] > before["requests"] and e["method"] == "POST"
               and e["target"].split("?")[0].endswith("/v1/namespaces/db/tables")]
    print(f"create reply lost: {len(runs)} run(s); injected {fault_counts(before, after)}; "
          f"creates answered {[(e['fault'], e.get('store_status', e.get('status'))) for e in creates]}",
          flush=True)
    proxy.set_faults()
    check(creates and creates[0]["fault"] == "err500_after" and
          creates[0].get("store_status") == 200,
          f"create reply lost: the first create was not made and its reply lost: {creates}")
    check_table(ctx, spec, ctx.total, ends_of(ctx.total), "after the create's lost reply")
    check(len(runs) == 1, f"create reply lost: the create's lost reply failed the run (the "
                          f"retry should meet the table and open it): run 1 exited with "
                          f"\"{last_error(runs[0])}\"")


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


def phase_catalog_outage(ctx, proxy):
    """4. The catalog gone for a while under a running pipeline (every request reset), then
    back: runs may exit meanwhile (naming the REST catalog) and are started again; the
    group is never ahead of the table, and every message lands exactly once."""
    more = 800
    before = proxy.stats()
    t = producer_thread(ctx, "events", ctx.total, ctx.total + more, 40, 0.5)
    ctx.total += more

    def outage():
        time.sleep(4)
        proxy.set_faults(reset_before=1.0)
        print("catalog outage: every catalog request reset from now", flush=True)
        time.sleep(10)
        proxy.set_faults()
        print("catalog outage: the catalog is back", flush=True)

    o = threading.Thread(target=outage, daemon=True)
    o.start()
    try:
        runs = supervise(ctx, ctx.spec, ends_of(ctx.total), "catalog outage")
    finally:
        o.join()
        t.join()
    after = proxy.stats()
    print(f"catalog outage: {len(runs)} run(s); injected {fault_counts(before, after)}",
          flush=True)
    check(after["reset_before"] > before["reset_before"],
          "catalog outage: no request reached the catalog during the outage")
    check_table(ctx, ctx.spec, ctx.total, ends_of(ctx.total), "after the catalog outage",
                ctx.total + ctx.twin_total)


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
