#!/usr/bin/python3
"""Tables in other writers' layouts, read by `sluice sql` and `sluice serve` (issue 26).

Usage: iceberg_layouts_test.py path/to/sluice

Written without sluice's lake code, by iceberg_deletes_test's writer (python3-avro for the
manifests, DuckDB through `sluice sql` for the Parquet files):

  db.t_catalog  the three snapshots of iceberg_deletes_test's table (v2, position and
                equality deletes) with metadata files as a REST or Hive catalog names them,
                00000-<uuid>.metadata.json .. 00003-<uuid>.metadata.json, and no
                version-hint.text. Such a table is reached by its metadata path, never by
                listing a directory: iceberg_scan('<path>') reads it; lake.db.t_catalog is
                no table. An older metadata file is the table as it was then.
  db.t_v1       format v1 (v1 manifests without sequence numbers, v1 manifest lists, the
                deprecated "schema" alone in the metadata), Hadoop's file:/ locations, two
                appends: read as lake.db.t_v1 and by iceberg_scan.

Checked: rows, counts, filters pruned to a partition, time travel (snapshot_from_id,
snapshot_from_timestamp; AT on lake.db.t_v1), a join of both, and wrong input (a missing
file, a file that is not metadata, unknown parameters, no location). Then a `sluice serve`
whose warehouse holds t_v1 and whose query.allowed_directories do not hold a third copy:
iceberg_scan of the warehouse's table answers through psql, of the copy outside it is
refused naming query.allowed_directories.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import iceberg_deletes_test as w

FAILURES = w.FAILURES


def sql(statement, warehouse=None, cwd=None):
    cmd = [w.SLUICE, "sql", "--json"]
    if warehouse is not None:
        cmd += ["--warehouse", warehouse]
    cmd.append("-")
    p = subprocess.run(cmd, input=statement, capture_output=True, text=True, timeout=120,
                       cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def rows(statement, warehouse=None, cwd=None):
    rc, out, err = sql(statement, warehouse, cwd)
    if rc != 0:
        raise AssertionError(f"query failed (rc {rc}): {statement}\n{err}")
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def refused(label, statement, must_name, warehouse=None):
    rc, out, err = sql(statement, warehouse)
    if rc != 0 and not out.strip() and all(n in err for n in must_name):
        print(f"ok   {label}: {err.strip().splitlines()[-1]}")
        return
    print(f"FAIL {label}: rc {rc}, stdout {out[:300]!r}, stderr {err[:500]!r}, "
          f"expected an error naming {must_name}")
    FAILURES.append(label)


def build_v1_table(warehouse):
    """Two appends of a v1 table; returns the expected rows after each."""
    t = w.TableWriter(warehouse, "t_v1", hadoop_uris=True, format_version=1)
    a = t.data_file("a", [w.std_row(i, "a") for i in range(0, 300)], "a")
    b = t.data_file("b", [w.std_row(i, "b") for i in range(300, 420)], "b")
    w.stamp([a, b], 0, w.S1)
    m1 = t.manifest(1, 0, [(1, a), (1, b)], 0, w.S1)
    t.commit(w.S1, 0, "append", [m1], [a, b], [a, b], w.T0)
    c = t.data_file("c", [w.std_row(i, "c") for i in range(1000, 1050)], "c")
    w.stamp([c], 0, w.S2)
    m2 = t.manifest(1, 0, [(1, c)], 0, w.S2)
    t.commit(w.S2, 0, "append", [m1, m2], [c], [a, b, c], w.T0 + 60000)
    return {w.S1: w.expected_rows([a, b], []), w.S2: w.expected_rows([a, b, c], [])}


def check_catalog_layout(top, warehouse):
    tw = w.TableWriter(warehouse, "t_catalog", catalog_layout=True)
    expected = w.build_good_table_with(tw)
    files = tw.metadata_files
    names = [os.path.basename(f) for f in files]
    assert len(files) == 4 and names[0].startswith("00000-") and names[3].startswith("00003-")
    assert not any(n.startswith("v") for n in os.listdir(os.path.dirname(files[0])))
    newest = files[-1]
    scan = f"iceberg_scan('{newest}')"
    now = expected[w.S3]
    w.check("t_catalog: SELECT * FROM iceberg_scan(00003-...)",
            w.canon(rows(f"SELECT * FROM {scan}")), w.canon(now))
    w.check("t_catalog: count(*)", rows(f"SELECT count(*) AS n FROM {scan}"), [{"n": len(now)}])
    w.check("t_catalog: WHERE category = 'a' (one partition)",
            w.canon(rows(f"SELECT * FROM {scan} WHERE category = 'a'")),
            w.canon([r for r in now if r["category"] == "a"]))
    w.check("t_catalog: a qualified filter through an alias",
            rows(f"SELECT count(*) AS n FROM {scan} AS s WHERE s.id BETWEEN 2000 AND 4100"),
            [{"n": sum(2000 <= r["id"] <= 4100 for r in now)}])
    w.check("t_catalog: aggregate by category",
            rows(f"SELECT category, count(*) AS n, count(name) AS names, sum(qty)::BIGINT AS s, "
                 f"min(id) AS lo, max(id) AS hi FROM {scan} GROUP BY category ORDER BY category"),
            w.group_by_category(now))
    w.check("t_catalog: the file:// form of the path",
            rows(f"SELECT count(*) AS n FROM iceberg_scan('file://{newest}')"), [{"n": len(now)}])
    rel = os.path.relpath(newest, top)
    w.check("t_catalog: a path relative to the working directory",
            rows(f"SELECT count(*) AS n FROM iceberg_scan('{rel}')", cwd=top), [{"n": len(now)}])
    # An older metadata file is the table as it was: 00001 after snapshot 1, 00002 after 2.
    for i, sid in ((1, w.S1), (2, w.S2)):
        w.check(f"t_catalog: iceberg_scan({names[i][:5]}-...) is snapshot {i}",
                w.canon(rows(f"SELECT * FROM iceberg_scan('{files[i]}')")),
                w.canon(expected[sid]))
    w.check("t_catalog: 00000-... (the table made, no snapshot) is empty",
            rows(f"SELECT count(*) AS n FROM iceberg_scan('{files[0]}')"), [{"n": 0}])
    w.check("t_catalog: snapshot_from_id => snapshot 2",
            w.canon(rows(f"SELECT * FROM iceberg_scan('{newest}', snapshot_from_id => {w.S2})")),
            w.canon(expected[w.S2]))
    w.check("t_catalog: snapshot_from_timestamp => snapshot 1's time + 30 s",
            rows(f"SELECT count(*) AS n FROM iceberg_scan('{newest}', snapshot_from_timestamp => "
                 f"TIMESTAMPTZ '{w.utc_text(w.T0 + 30000)}')"), [{"n": len(expected[w.S1])}])
    # Never found by listing: the directory holds no v<N>.metadata.json.
    refused("t_catalog: lake.db.t_catalog is no table (its metadata is found by path only)",
            "SELECT count(*) FROM lake.db.t_catalog", ["t_catalog", "does not exist"], warehouse)
    refused("t_catalog: iceberg_scan of its directory finds no v<N> file either",
            f"SELECT count(*) FROM iceberg_scan('{tw.dir}')", ["no table at", "v<N>"])
    return now


def check_v1(warehouse, catalog_rows):
    expected = build_v1_table(warehouse)
    t = "lake.db.t_v1"
    now = expected[w.S2]
    w.check("t_v1: SELECT *", w.canon(rows(f"SELECT * FROM {t}", warehouse)), w.canon(now))
    w.check("t_v1: WHERE category = 'c'",
            rows(f"SELECT count(*) AS n FROM {t} WHERE category = 'c'", warehouse), [{"n": 50}])
    w.check(f"t_v1: AT (VERSION => {w.S1})",
            w.canon(rows(f"SELECT * FROM {t} AT (VERSION => {w.S1})", warehouse)),
            w.canon(expected[w.S1]))
    table_dir = os.path.join(warehouse, "db", "t_v1")
    w.check("t_v1: iceberg_scan of the table directory",
            rows(f"SELECT count(*) AS n FROM iceberg_scan('{table_dir}')"), [{"n": len(now)}])
    w.check("t_v1: iceberg_scan of v1.metadata.json (no snapshot yet)",
            rows(f"SELECT count(*) AS n FROM iceberg_scan('{table_dir}/metadata/v1.metadata.json')"),
            [{"n": 0}])
    want = sum(1 for x in now for y in catalog_rows if x["id"] == y["id"])
    newest = sorted(os.listdir(os.path.join(warehouse, "db", "t_catalog", "metadata")))
    newest = [n for n in newest if n.startswith("00003-")][0]
    w.check("a join of lake.db.t_v1 and an iceberg_scan",
            rows(f"SELECT count(*) AS n FROM {t} JOIN iceberg_scan('{warehouse}/db/t_catalog/"
                 f"metadata/{newest}') c USING (id)", warehouse), [{"n": want}])
    return table_dir


def check_wrong_input(top):
    bad = os.path.join(top, "bad.metadata.json")
    with open(bad, "w") as f:
        f.write('{"format-version": 2, "table-uuid": ')
    refused("a truncated metadata file", f"SELECT * FROM iceberg_scan('{bad}')",
            ["bad.metadata.json"])
    with open(bad, "w") as f:
        f.write('{"format-version": 7}')
    refused("format-version 7", f"SELECT * FROM iceberg_scan('{bad}')", ["bad.metadata.json"])
    refused("a missing metadata file",
            f"SELECT * FROM iceberg_scan('{top}/nope/00001-x.metadata.json')",
            ["no table metadata at", "00001-x.metadata.json"])
    refused("a file that is no metadata file", "SELECT * FROM iceberg_scan('/etc/passwd')",
            ["/etc/passwd", "metadata"])
    refused("no location", "SELECT * FROM iceberg_scan()", ["needs the table's location"])
    refused("an unknown parameter",
            f"SELECT * FROM iceberg_scan('{bad}', allow_moved_paths => true)",
            ["allow_moved_paths", "not supported"])
    refused("a location that is not constant",
            "SELECT * FROM range(1) r, iceberg_scan(r.range::VARCHAR)", ["constant"])
    refused("NULL as the location", "SELECT * FROM iceberg_scan(NULL::VARCHAR)", ["NULL"])


def start_serve(top, warehouse, allowed):
    config = os.path.join(top, "serve.yaml")
    with open(config, "w") as f:
        f.write(f"query:\n  allowed_directories: ['{allowed}']\n")
    out = open(os.path.join(top, "serve.out"), "w+")
    proc = subprocess.Popen(
        [w.SLUICE, "serve", "--kafka-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
         "--pg-addr", "127.0.0.1:0", "--schema-registry-addr", "off", "--shards", "1",
         "--config", config, "--data-dir", os.path.join(top, "data"), "--warehouse", warehouse],
        stdout=out, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 30
    while time.time() < deadline:
        out.seek(0)
        for line in out.read().splitlines():
            prefix = "sluice: Postgres wire protocol on 127.0.0.1:"
            if line.startswith(prefix):
                return proc, int(line[len(prefix):])
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    out.seek(0)
    proc.kill()
    raise AssertionError(f"sluice serve did not listen:\n{out.read()[-3000:]}")


def psql(port, statement):
    exe = next(p for p in ("/usr/bin/psql", "/usr/lib/postgresql/15/bin/psql") if os.path.exists(p))
    p = subprocess.run([exe, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                        "-p", str(port), "-U", "tester", "-d", "sluice", "-c", statement],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PGCONNECT_TIMEOUT="10"))
    return p.returncode, p.stdout.strip(), p.stderr.strip()


def check_serve(top, warehouse, v1_dir):
    outside = os.path.join(top, "outside")
    shutil.copytree(v1_dir, os.path.join(outside, "t_v1"))
    allowed = os.path.join(top, "allowed")
    os.makedirs(allowed)
    proc, port = start_serve(top, warehouse, allowed)
    try:
        rc, out, err = psql(port, f"SELECT count(*) FROM iceberg_scan('{v1_dir}')")
        w.check("serve: iceberg_scan of a warehouse table", (rc, out, err), (0, "470", ""))
        rc, out, err = psql(port, f"SELECT count(*) FROM iceberg_scan('{outside}/t_v1')")
        ok = rc != 0 and "query.allowed_directories" in err
        print(f"{'ok  ' if ok else 'FAIL'} serve: iceberg_scan outside the allowed directories "
              f"refused: {err}")
        if not ok:
            FAILURES.append("serve: outside refused")
        # A metadata file inside the sandbox naming a manifest list outside it: refused too.
        inside = os.path.join(allowed, "t_v1", "metadata")
        os.makedirs(inside)
        meta = os.path.join(inside, "v3.metadata.json")
        with open(os.path.join(v1_dir, "metadata", "v3.metadata.json")) as f:
            text = f.read().replace(v1_dir, os.path.join(outside, "t_v1"))
        with open(meta, "w") as f:
            f.write(text)
        rc, out, err = psql(port, f"SELECT count(*) FROM iceberg_scan('{meta}')")
        ok = rc != 0 and "query.allowed_directories" in err and "outside" in err
        print(f"{'ok  ' if ok else 'FAIL'} serve: a manifest list outside the sandbox refused: "
              f"{err}")
        if not ok:
            FAILURES.append("serve: manifest list outside refused")
    finally:
        proc.kill()
        proc.wait()


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    w.SLUICE = os.path.abspath(sys.argv[1])
    top = tempfile.mkdtemp(prefix="iceberg_layouts_")
    try:
        warehouse = os.path.join(top, "wh")
        catalog_rows = check_catalog_layout(top, warehouse)
        v1_dir = check_v1(warehouse, catalog_rows)
        check_wrong_input(top)
        check_serve(top, warehouse, v1_dir)
    finally:
        w.done(top, "ICEBERG_LAYOUTS_KEEP")
    return w.report()


if __name__ == "__main__":
    sys.exit(main())
