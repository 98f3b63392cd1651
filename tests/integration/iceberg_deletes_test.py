#!/usr/bin/python3
"""Iceberg v2 delete files made by an independent writer, read by `sluice sql` (issue 26).

Usage: iceberg_deletes_test.py path/to/sluice

The tables are written without sluice's own lake code: python3-avro writes the manifests
and manifest lists with the spec's manifest_entry and manifest_file Avro schemas (field
ids, key-value metadata), the metadata JSON is written by hand with the spec's table
metadata fields in the Hadoop catalog's layout (metadata/v<N>.metadata.json and
version-hint.text), and DuckDB (run through `sluice sql`, its only copy here) writes the
Parquet data and delete files with Iceberg field ids. The expected rows are computed here
from the rows written, by the spec's scan planning rules ("Scan Planning", "Delete File
Stats"):

- a position delete applies to a data file of its partition (spec id and values; every
  partition when the delete's spec is unpartitioned) whose data sequence number is not
  above the delete's, deleting the rows named by file_path and pos (0-based);
- an equality delete applies to a data file of its partition whose data sequence number
  is strictly below the delete's, deleting rows equal in every equality column, a NULL
  matching a NULL.

Tables (under a temporary warehouse):
  db.t          every entry with explicit snapshot_id, sequence_number, file_sequence_number;
                file:///... locations.
  db.t_inherit  ADDED entries with null snapshot_id and sequence numbers, inherited from the
                manifest list (as Spark writes them); its last data manifest is a merged one
                (EXISTING entries of snapshot 1 with explicit sequence number 1, ADDED ones of
                snapshot 3 inheriting 3).
  db.t_hadoop   as t_inherit, with Hadoop's file:/... locations (Spark on a local file system).
  db.t_evolved  partition spec evolution (data and deletes of spec 0 and spec 1) and data and
                delete files removed (DELETED entries) by a later snapshot.
  db.bad_*      malformed manifests, which must fail naming the file.

Snapshots of t, t_inherit and t_hadoop:
  1 (seq 1, append)  data files a1 (5000 rows, three row groups), a2 (partition a), b1, c1.
  2 (seq 2, delete)  position deletes in a (rows of a1 across row groups, of a2, and one
                     naming b1's row 3, which belongs to another partition and is not applied)
                     and in b; equality deletes: c by name (one row NULL), a by (id, qty) (a
                     row with qty NULL; a row matching only a data file of b); and an
                     unpartitioned (spec 0) one by id, applying to every partition, whose
                     Parquet column has another name than the table's (matched by field id).
  3 (seq 3, overwrite) data a3, b3, c3 holding rows equal to seq-2 equality deletes (kept);
                     a position delete at seq 3 on a3 (applies: not above) and on a1.
Each is queried through `sluice sql --warehouse W --json`: full scans, count(*), a filter
pruned to one partition, filters inside a file's row groups, aggregates, time travel to
snapshots 1 and 2 (by id, by a tag, by time), a join of two of them; the malformed tables
must fail naming the file, and a missing delete file must fail, not be skipped.
ICEBERG_DELETES_KEEP=1 keeps the warehouse (its path is printed).
"""

import datetime
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import uuid
import warnings

import avro.datafile
import avro.io
import avro.schema

warnings.filterwarnings("ignore", module="avro")  # "Unknown map, using array": Iceberg's maps

SLUICE = None
FAILURES = []

COLUMNS = [  # (field id, name, Iceberg type, DuckDB type, required)
    (1, "id", "long", "BIGINT", True),
    (2, "category", "string", "VARCHAR", False),
    (3, "name", "string", "VARCHAR", False),
    (4, "qty", "int", "INTEGER", False),
]
NAME_OF = {c[0]: c[1] for c in COLUMNS}
FILE_PATH_ID = 2147483546  # the spec's reserved ids of a position delete file's columns
POS_ID = 2147483545

SCHEMA_JSON = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": fid, "name": name, "required": req, "type": t} for fid, name, t, _, req in COLUMNS
    ],
}
SPEC_UNPARTITIONED = {"spec-id": 0, "fields": []}
SPEC_CATEGORY = {
    "spec-id": 1,
    "fields": [{"name": "category", "transform": "identity", "source-id": 2, "field-id": 1000}],
}
SPECS = {0: SPEC_UNPARTITIONED, 1: SPEC_CATEGORY}

S1, S2, S3 = 3051729675574597004, 7216480712339425555, 1208484211097424181
T0 = 1733400000000  # ms: snapshot 1; snapshot 2 a minute later, snapshot 3 two


# ---------------------------------------------------------------------------------------
# Running sluice


def run_sql(sql, warehouse=None):
    cmd = [SLUICE, "sql", "--json"]
    if warehouse is not None:
        cmd += ["--warehouse", warehouse]
    cmd.append("-")
    p = subprocess.run(cmd, input=sql, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def query(warehouse, sql):
    rc, out, err = run_sql(sql, warehouse)
    if rc != 0:
        raise AssertionError(f"query failed (rc {rc}): {sql}\n{err}")
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def lit(v):
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return str(v)


def qid(name):
    return '"' + name.replace('"', '""') + '"'


def write_parquet(path, columns, rows):
    """columns: [(name, DuckDB type, field id)]; rows: tuples in file order."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    names = ", ".join(qid(c[0]) for c in columns)
    values = ",\n".join(
        "(" + ", ".join([str(i)] + [lit(v) for v in row]) + ")" for i, row in enumerate(rows)
    )
    select = ", ".join(f"CAST({qid(n)} AS {t}) AS {qid(n)}" for n, t, _ in columns)
    ids = ", ".join(f"{lit(n)}: {fid}" for n, _, fid in columns)
    # One run: the file, then the fixture itself read back (rows at the positions written,
    # the columns' field ids).
    got = query(
        None,
        f"COPY (SELECT {select} FROM (VALUES {values}) AS v(__ord, {names}) ORDER BY __ord) "
        f"TO {lit(path)} (FORMAT parquet, ROW_GROUP_SIZE 2048, FIELD_IDS {{{ids}}});\n"
        f"SELECT file_row_number AS __pos, {names}, (SELECT string_agg(name || ':' || field_id, "
        f"',' ORDER BY name) FROM parquet_schema({lit(path)}) WHERE field_id IS NOT NULL) AS __ids "
        f"FROM read_parquet({lit(path)}, file_row_number = true, hive_partitioning = false) "
        "ORDER BY file_row_number",
    )
    want_ids = ",".join(f"{n}:{fid}" for n, _, fid in sorted(columns))
    want = [
        dict([("__pos", i)] + list(zip([c[0] for c in columns], r)) + [("__ids", want_ids)])
        for i, r in enumerate(rows)
    ]
    if got != want:
        raise AssertionError(f"fixture {path}: DuckDB wrote other rows or field ids than asked")
    return os.path.getsize(path)


# ---------------------------------------------------------------------------------------
# The spec's Avro schemas (manifest_entry with data_file, manifest_file)


def int_map(field_id, key_id, value_id, value_type):
    return {
        "name": None,  # set by the caller
        "type": [
            "null",
            {
                "type": "array",
                "logicalType": "map",
                "items": {
                    "type": "record",
                    "name": f"k{key_id}_v{value_id}",
                    "fields": [
                        {"name": "key", "type": "int", "field-id": key_id},
                        {"name": "value", "type": value_type, "field-id": value_id},
                    ],
                },
            },
        ],
        "default": None,
        "field-id": field_id,
    }


def named(name, field):
    field = dict(field)
    field["name"] = name
    return field


def manifest_entry_schema(spec):
    partition_fields = [
        {
            "name": f["name"],
            "type": ["null", "string"],  # identity of a string column
            "default": None,
            "field-id": f["field-id"],
        }
        for f in spec["fields"]
    ]
    data_file = {
        "type": "record",
        "name": "r2",
        "fields": [
            {"name": "content", "type": "int", "field-id": 134},
            {"name": "file_path", "type": "string", "field-id": 100},
            {"name": "file_format", "type": "string", "field-id": 101},
            {
                "name": "partition",
                "type": {"type": "record", "name": "r102", "fields": partition_fields},
                "field-id": 102,
            },
            {"name": "record_count", "type": "long", "field-id": 103},
            {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
            named("column_sizes", int_map(108, 117, 118, "long")),
            named("value_counts", int_map(109, 119, 120, "long")),
            named("null_value_counts", int_map(110, 121, 122, "long")),
            named("nan_value_counts", int_map(137, 138, 139, "long")),
            named("lower_bounds", int_map(125, 126, 127, "bytes")),
            named("upper_bounds", int_map(128, 129, 130, "bytes")),
            {"name": "key_metadata", "type": ["null", "bytes"], "default": None, "field-id": 131},
            {
                "name": "split_offsets",
                "type": ["null", {"type": "array", "items": "long", "element-id": 133}],
                "default": None,
                "field-id": 132,
            },
            {
                "name": "equality_ids",
                "type": ["null", {"type": "array", "items": "int", "element-id": 136}],
                "default": None,
                "field-id": 135,
            },
            {"name": "sort_order_id", "type": ["null", "int"], "default": None, "field-id": 140},
            {
                "name": "referenced_data_file",
                "type": ["null", "string"],
                "default": None,
                "field-id": 143,
            },
        ],
    }
    return {
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            {"name": "status", "type": "int", "field-id": 0},
            {"name": "snapshot_id", "type": ["null", "long"], "default": None, "field-id": 1},
            {"name": "sequence_number", "type": ["null", "long"], "default": None, "field-id": 3},
            {
                "name": "file_sequence_number",
                "type": ["null", "long"],
                "default": None,
                "field-id": 4,
            },
            {"name": "data_file", "type": data_file, "field-id": 2},
        ],
    }


def v1_manifest_entry_schema(spec):
    """Format v1's manifest_entry: snapshot_id required, no sequence numbers; its data_file
    has block_size_in_bytes (required in v1) and no content, equality_ids or
    referenced_data_file."""
    v2 = manifest_entry_schema(spec)
    data_file = dict(v2["fields"][4]["type"])
    fields = []
    for f in data_file["fields"]:
        if f["field-id"] in (134, 135, 143):
            continue
        fields.append(f)
        if f["field-id"] == 104:
            fields.append({"name": "block_size_in_bytes", "type": "long", "field-id": 105})
    data_file["fields"] = fields
    return {
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            {"name": "status", "type": "int", "field-id": 0},
            {"name": "snapshot_id", "type": "long", "field-id": 1},
            {"name": "data_file", "type": data_file, "field-id": 2},
        ],
    }


MANIFEST_FILE_SCHEMA = {
    "type": "record",
    "name": "manifest_file",
    "fields": [
        {"name": "manifest_path", "type": "string", "field-id": 500},
        {"name": "manifest_length", "type": "long", "field-id": 501},
        {"name": "partition_spec_id", "type": "int", "field-id": 502},
        {"name": "content", "type": "int", "field-id": 517},
        {"name": "sequence_number", "type": "long", "field-id": 515},
        {"name": "min_sequence_number", "type": "long", "field-id": 516},
        {"name": "added_snapshot_id", "type": "long", "field-id": 503},
        {"name": "added_files_count", "type": "int", "field-id": 504},
        {"name": "existing_files_count", "type": "int", "field-id": 505},
        {"name": "deleted_files_count", "type": "int", "field-id": 506},
        {"name": "added_rows_count", "type": "long", "field-id": 512},
        {"name": "existing_rows_count", "type": "long", "field-id": 513},
        {"name": "deleted_rows_count", "type": "long", "field-id": 514},
        {
            "name": "partitions",
            "type": [
                "null",
                {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "r508",
                        "fields": [
                            {"name": "contains_null", "type": "boolean", "field-id": 509},
                            {
                                "name": "contains_nan",
                                "type": ["null", "boolean"],
                                "default": None,
                                "field-id": 518,
                            },
                            {
                                "name": "lower_bound",
                                "type": ["null", "bytes"],
                                "default": None,
                                "field-id": 510,
                            },
                            {
                                "name": "upper_bound",
                                "type": ["null", "bytes"],
                                "default": None,
                                "field-id": 511,
                            },
                        ],
                    },
                    "element-id": 508,
                },
            ],
            "default": None,
            "field-id": 507,
        },
        {"name": "key_metadata", "type": ["null", "bytes"], "default": None, "field-id": 519},
    ],
}


# Format v1's manifest_file: no content or sequence numbers.
V1_MANIFEST_FILE_SCHEMA = dict(MANIFEST_FILE_SCHEMA, fields=[
    f for f in MANIFEST_FILE_SCHEMA["fields"] if f["field-id"] not in (515, 516, 517)
])


def write_avro(path, schema_json, records, metadata):
    schema = avro.schema.parse(json.dumps(schema_json))
    with open(path, "wb") as f:
        w = avro.datafile.DataFileWriter(f, avro.io.DatumWriter(), schema, codec="deflate")
        for k, v in metadata.items():
            w.set_meta(k, v.encode())
        for r in records:
            w.append(r)
        w.close()
    return os.path.getsize(path)


# ---------------------------------------------------------------------------------------
# Files of a table, and the expected rows


class ContentFile:
    """A data (content 0), position delete (1) or equality delete (2) file as written."""

    def __init__(self, content, uri, local, spec_id, partition, rows, size, columns, **kw):
        self.content = content
        self.uri = uri
        self.local = local
        self.spec_id = spec_id
        self.partition = partition  # tuple of values, in the spec's field order
        self.rows = rows  # dicts by column name (data, equality) or (file_path, pos) tuples
        self.size = size
        self.columns = columns  # [(name, DuckDB type, field id)] of the Parquet file
        self.equality_ids = kw.get("equality_ids")
        self.referenced = kw.get("referenced")
        self.seq = None  # data sequence number, given when committed
        self.snapshot_id = None

    def stats(self):
        """value_counts, null_value_counts, lower_bounds, upper_bounds as Iceberg writes them
        (single-value serialization: little-endian numbers, UTF-8 strings)."""
        if self.content == 1:
            values = {FILE_PATH_ID: [p for p, _ in self.rows], POS_ID: [q for _, q in self.rows]}
            types = {FILE_PATH_ID: "string", POS_ID: "long"}
        else:
            values = {fid: [r[n] for r in self.rows] for n, _, fid in self.columns}
            types = {fid: t for fid, _, t, _, _ in COLUMNS}
        vc, nc, lo, hi = [], [], [], []
        for fid, vs in values.items():
            vc.append({"key": fid, "value": len(vs)})
            nc.append({"key": fid, "value": sum(v is None for v in vs)})
            present = [v for v in vs if v is not None]
            if not present:
                continue

            def enc(v, t=types[fid]):
                if t == "long":
                    return struct.pack("<q", v)
                if t == "int":
                    return struct.pack("<i", v)
                return v.encode()

            if types[fid] == "string":
                lo.append({"key": fid, "value": min(present, key=lambda s: s.encode()).encode()})
                hi.append({"key": fid, "value": max(present, key=lambda s: s.encode()).encode()})
            else:
                lo.append({"key": fid, "value": enc(min(present))})
                hi.append({"key": fid, "value": enc(max(present))})
        return vc, nc, lo, hi

    def record(self):
        vc, nc, lo, hi = self.stats()
        spec = SPECS[self.spec_id]
        return {
            "content": self.content,
            "file_path": self.uri,
            "file_format": "PARQUET",
            "partition": {f["name"]: v for f, v in zip(spec["fields"], self.partition)},
            "record_count": len(self.rows),
            "file_size_in_bytes": self.size,
            "column_sizes": None,
            "value_counts": vc,
            "null_value_counts": nc,
            "nan_value_counts": None,
            "lower_bounds": lo,
            "upper_bounds": hi,
            "key_metadata": None,
            "split_offsets": None,
            "equality_ids": self.equality_ids,
            "sort_order_id": 0 if self.content == 0 else None,
            "referenced_data_file": self.referenced,
        }


def same_partition(delete, data):
    if not SPECS[delete.spec_id]["fields"]:
        return True  # an unpartitioned delete applies everywhere
    return delete.spec_id == data.spec_id and delete.partition == data.partition


def expected_rows(data_files, delete_files):
    """The rows of a snapshot by the spec's rules."""
    out = []
    for f in data_files:
        pos_deletes = [
            d for d in delete_files if d.content == 1 and same_partition(d, f) and f.seq <= d.seq
        ]
        eq_deletes = [
            d for d in delete_files if d.content == 2 and same_partition(d, f) and f.seq < d.seq
        ]
        gone = {q for d in pos_deletes for p, q in d.rows if p == f.uri}
        for i, row in enumerate(f.rows):
            if i in gone:
                continue
            if any(
                all(row[NAME_OF[fid]] == e[delete_column(d, fid)] for fid in d.equality_ids)
                for d in eq_deletes
                for e in d.rows
            ):
                continue  # None == None: NULL matches NULL
            out.append(dict(row))
    return out


def delete_column(d, fid):
    for n, _, i in d.columns:
        if i == fid:
            return n
    raise KeyError(fid)


def sort_key(row):
    return tuple((v is None, v if v is not None else 0) for v in row.values())


def canon(rows):
    return sorted(rows, key=lambda r: sort_key({k: r[k] for k in sorted(r)}))


# ---------------------------------------------------------------------------------------
# Writing a table


def std_row(i, category):
    return {
        "id": i,
        "category": category,
        "name": None if i % 11 == 0 else f"n{i % 7}",
        "qty": None if i % 13 == 0 else i % 10,
    }


DATA_COLUMNS = [(n, dt, fid) for fid, n, _, dt, _ in COLUMNS]


class TableWriter:
    """A table written as Iceberg's Java library lays it out. format_version 1: v1 manifests,
    lists and metadata (no delete files). catalog_layout: metadata files named
    <NNNNN>-<uuid>.metadata.json (a REST or Hive catalog's, found only by their path, in
    self.metadata_files) and no version-hint.text; else the Hadoop catalog's v<N>.metadata.json."""

    def __init__(self, warehouse, name, inherit=False, hadoop_uris=False, format_version=2,
                 catalog_layout=False):
        self.dir = os.path.join(warehouse, "db", name)
        self.name = name
        self.inherit = inherit
        self.hadoop = hadoop_uris
        self.format_version = format_version
        self.catalog_layout = catalog_layout
        self.metadata_files = []  # local paths, oldest first
        self.uuid = str(uuid.uuid4())
        os.makedirs(os.path.join(self.dir, "metadata"))
        self.snapshots = []  # dicts as in the metadata JSON
        self.metadata_log = []
        self.version = 0
        self.last_seq = 0
        self.manifest_counter = 0
        self.tags = {}  # name -> snapshot id, written in refs
        self.write_metadata(None)  # v1: the table made, no snapshot yet

    def uri(self, local):
        return ("file:" if self.hadoop else "file://") + local

    def data_file(self, category, rows, tag, spec_id=1):
        """A data file of partition category=<category> (spec 1), or unpartitioned (spec 0)."""
        sub = f"category={category}" if spec_id == 1 else ""
        local = os.path.join(self.dir, "data", sub, f"{tag}-{uuid.uuid4()}.parquet")
        size = write_parquet(local, DATA_COLUMNS,
                             [tuple(r[n] for n, _, _ in DATA_COLUMNS) for r in rows])
        partition = (category,) if spec_id == 1 else ()
        return ContentFile(0, self.uri(local), local, spec_id, partition, rows, size, DATA_COLUMNS)

    def position_deletes(self, spec_id, partition, targets, tag, referenced=None):
        """targets: (ContentFile, pos) pairs; written sorted by file_path then pos."""
        rows = sorted((f.uri, pos) for f, pos in targets)
        sub = f"category={partition[0]}" if partition else ""
        local = os.path.join(self.dir, "data", sub, f"{tag}-deletes-{uuid.uuid4()}.parquet")
        cols = [("file_path", "VARCHAR", FILE_PATH_ID), ("pos", "BIGINT", POS_ID)]
        size = write_parquet(local, cols, rows)
        return ContentFile(1, self.uri(local), local, spec_id, partition, rows, size, cols,
                           referenced=referenced)

    def equality_deletes(self, spec_id, partition, columns, rows, tag, equality_ids="from-columns"):
        """columns: [(Parquet column name, DuckDB type, field id)]; rows: tuples."""
        sub = f"category={partition[0]}" if partition else ""
        local = os.path.join(self.dir, "data", sub, f"{tag}-eq-deletes-{uuid.uuid4()}.parquet")
        size = write_parquet(local, columns, rows)
        dict_rows = [dict(zip([c[0] for c in columns], r)) for r in rows]
        ids = [c[2] for c in columns] if equality_ids == "from-columns" else equality_ids
        return ContentFile(2, self.uri(local), local, spec_id, partition, dict_rows, size, columns,
                           equality_ids=ids)

    def manifest(self, spec_id, content, entries, seq, snapshot_id):
        """entries: (status, ContentFile) with status 0 EXISTING, 1 ADDED, 2 DELETED (by
        snapshot_id); returns the manifest list's record for it."""
        self.manifest_counter += 1
        local = os.path.join(self.dir, "metadata", f"{uuid.uuid4()}-m{self.manifest_counter}.avro")
        spec = SPECS[spec_id]
        records = []
        v1 = self.format_version == 1
        for status, f in entries:
            explicit = status != 1 or not self.inherit
            if v1:
                data_file = f.record()
                for k in ("content", "equality_ids", "referenced_data_file"):
                    del data_file[k]
                data_file["block_size_in_bytes"] = 67108864
                records.append({
                    "status": status,
                    "snapshot_id": snapshot_id if status == 2 else f.snapshot_id,
                    "data_file": data_file,
                })
                continue
            records.append({
                "status": status,
                "snapshot_id": (snapshot_id if status == 2 else f.snapshot_id) if explicit else None,
                "sequence_number": f.seq if explicit else None,
                "file_sequence_number": f.seq if explicit else None,
                "data_file": f.record(),
            })
        kv = {
            "schema": json.dumps(SCHEMA_JSON),
            "schema-id": "0",
            "partition-spec": json.dumps(spec["fields"]),
            "partition-spec-id": str(spec_id),
            "format-version": str(self.format_version),
        }
        if not v1:
            kv["content"] = "data" if content == 0 else "deletes"
        length = write_avro(local, v1_manifest_entry_schema(spec) if v1 else
                            manifest_entry_schema(spec), records, kv)
        summaries = []
        for i, _ in enumerate(spec["fields"]):
            vals = [f.partition[i] for _, f in entries]
            present = [v for v in vals if v is not None]
            summaries.append({
                "contains_null": any(v is None for v in vals),
                "contains_nan": None,
                "lower_bound": min(present).encode() if present else None,
                "upper_bound": max(present).encode() if present else None,
            })
        added = [f for s, f in entries if s == 1]
        existing = [f for s, f in entries if s == 0]
        deleted = [f for s, f in entries if s == 2]
        record = {
            "manifest_path": self.uri(local),
            "manifest_length": length,
            "partition_spec_id": spec_id,
            "content": 0 if content == 0 else 1,
            "sequence_number": seq,
            "min_sequence_number": min(f.seq for _, f in entries),
            "added_snapshot_id": snapshot_id,
            "added_files_count": len(added),
            "existing_files_count": len(existing),
            "deleted_files_count": len(deleted),
            "added_rows_count": sum(len(f.rows) for f in added),
            "existing_rows_count": sum(len(f.rows) for f in existing),
            "deleted_rows_count": sum(len(f.rows) for f in deleted),
            "partitions": summaries,
            "key_metadata": None,
        }
        if v1:
            for k in ("content", "sequence_number", "min_sequence_number"):
                del record[k]
        return record

    def commit(self, snapshot_id, seq, operation, manifest_records, added, live, timestamp_ms):
        """added: files this snapshot adds; live: every data and delete file of it."""
        parent = self.snapshots[-1]["snapshot-id"] if self.snapshots else None
        local = os.path.join(self.dir, "metadata",
                             f"snap-{snapshot_id}-1-{uuid.uuid4()}.avro")
        v1 = self.format_version == 1
        kv = {
            "snapshot-id": str(snapshot_id),
            "parent-snapshot-id": str(parent) if parent is not None else "null",
            "format-version": str(self.format_version),
        }
        if not v1:
            kv["sequence-number"] = str(seq)
        write_avro(local, V1_MANIFEST_FILE_SCHEMA if v1 else MANIFEST_FILE_SCHEMA,
                   manifest_records, kv)

        def count(files, content):
            return sum(1 for f in files if f.content == content)

        def rows(files, content):
            return sum(len(f.rows) for f in files if f.content == content)

        summary = {
            "operation": operation,
            "added-data-files": str(count(added, 0)),
            "added-records": str(rows(added, 0)),
            "added-files-size": str(sum(f.size for f in added)),
            "added-delete-files": str(count(added, 1) + count(added, 2)),
            "added-position-delete-files": str(count(added, 1)),
            "added-equality-delete-files": str(count(added, 2)),
            "added-position-deletes": str(rows(added, 1)),
            "added-equality-deletes": str(rows(added, 2)),
            "changed-partition-count": str(len({f.partition for f in added})),
            # Java's totals: data records before any delete is applied.
            "total-records": str(rows(live, 0)),
            "total-files-size": str(sum(f.size for f in live)),
            "total-data-files": str(count(live, 0)),
            "total-delete-files": str(count(live, 1) + count(live, 2)),
            "total-position-deletes": str(rows(live, 1)),
            "total-equality-deletes": str(rows(live, 2)),
        }
        snap = {
            "snapshot-id": snapshot_id,
            "sequence-number": seq,
            "timestamp-ms": timestamp_ms,
            "manifest-list": self.uri(local),
            "summary": summary,
            "schema-id": 0,
        }
        if parent is not None:
            snap["parent-snapshot-id"] = parent
        if v1:
            del snap["sequence-number"]
        self.snapshots.append(snap)
        self.last_seq = seq
        self.write_metadata(timestamp_ms)

    def write_metadata(self, timestamp_ms):
        self.version += 1
        now = timestamp_ms if timestamp_ms is not None else T0 - 60000
        current = self.snapshots[-1]["snapshot-id"] if self.snapshots else None
        meta = {
            "format-version": 2,
            "table-uuid": self.uuid,
            "location": self.uri(self.dir),
            "last-sequence-number": self.last_seq,
            "last-updated-ms": now,
            "last-column-id": 4,
            "current-schema-id": 0,
            "schemas": [SCHEMA_JSON],
            "default-spec-id": 1,
            "partition-specs": [SPEC_UNPARTITIONED, SPEC_CATEGORY],
            "last-partition-id": 1000,
            "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "properties": {"write.format.default": "parquet", "write.delete.mode": "merge-on-read"},
            "current-snapshot-id": current if current is not None else -1,
            "refs": dict(
                [("main", {"snapshot-id": current, "type": "branch"})] if current else [],
                **{n: {"snapshot-id": sid, "type": "tag"} for n, sid in self.tags.items()}),
            "snapshots": list(self.snapshots),
            "snapshot-log": [
                {"snapshot-id": s["snapshot-id"], "timestamp-ms": s["timestamp-ms"]}
                for s in self.snapshots
            ],
            "metadata-log": list(self.metadata_log),
            "statistics": [],
        }
        if self.format_version == 1:
            # As Java writes v1: the deprecated "schema" alone (no "schemas"), "partition-spec"
            # beside "partition-specs"; no refs, sequence numbers or sort orders.
            for k in ("schemas", "current-schema-id", "last-sequence-number", "refs",
                      "sort-orders", "default-sort-order-id", "statistics"):
                del meta[k]
            meta["format-version"] = 1
            meta["schema"] = {k: v for k, v in SCHEMA_JSON.items() if k != "schema-id"}
            meta["partition-spec"] = SPEC_CATEGORY["fields"]
        if self.catalog_layout:
            name = f"{self.version - 1:05d}-{uuid.uuid4()}.metadata.json"
        else:
            name = f"v{self.version}.metadata.json"
        path = os.path.join(self.dir, "metadata", name)
        with open(path, "w") as f:
            json.dump(meta, f, indent=2)
        self.metadata_files.append(path)
        self.metadata_log.append({"metadata-file": self.uri(path), "timestamp-ms": now})
        if not self.catalog_layout:
            with open(os.path.join(self.dir, "metadata", "version-hint.text"), "w") as f:
                f.write(str(self.version))


def stamp(files, seq, snapshot_id):
    for f in files:
        f.seq = seq
        f.snapshot_id = snapshot_id


def build_good_table(warehouse, name, inherit, hadoop_uris):
    """The three snapshots of the module docstring; returns the expected rows of each."""
    return build_good_table_with(
        TableWriter(warehouse, name, inherit=inherit, hadoop_uris=hadoop_uris))


def build_good_table_with(w):
    """build_good_table's snapshots through writer `w`; also returns it ("writer")."""
    inherit = w.inherit

    # Snapshot 1 (seq 1): data.
    a1 = w.data_file("a", [std_row(i, "a") for i in range(0, 5000)], "a1")
    a2 = w.data_file("a", [std_row(i, "a") for i in range(5000, 5100)], "a2")
    b1 = w.data_file("b", [std_row(i, "b") for i in range(6000, 6200)], "b1")
    c1 = w.data_file("c", [std_row(i, "c") for i in range(7000, 7050)], "c1")
    data1 = [a1, a2, b1, c1]
    stamp(data1, 1, S1)
    m1 = w.manifest(1, 0, [(1, f) for f in data1], 1, S1)
    w.commit(S1, 1, "append", [m1], data1, data1, T0)
    w.tags["before_deletes"] = S1

    # Snapshot 2 (seq 2): row-level deletes.
    pos_a = w.position_deletes(1, ("a",), [
        (a1, 0), (a1, 5), (a1, 2047), (a1, 2048), (a1, 4095), (a1, 4096), (a1, 4999),
        (a2, 10), (a2, 11),
        (b1, 3),  # b1 is in partition b: this delete file (partition a) does not apply to it
    ], "s2-a")
    pos_b = w.position_deletes(1, ("b",), [(b1, 1), (b1, 2), (b1, 199)], "s2-b",
                               referenced=b1.uri)
    eq_c = w.equality_deletes(1, ("c",), [("name", "VARCHAR", 3)], [("n1",), (None,)], "s2-c")
    eq_a = w.equality_deletes(1, ("a",), [("id", "BIGINT", 1), ("qty", "INTEGER", 4)], [
        (3, 3),        # a1's id 3 (qty 3): deleted
        (26, None),    # a1's id 26 has qty NULL: NULL matches NULL, deleted
        (27, None),    # a1's id 27 has qty 7: kept
        (100, 5),      # a1's id 100 has qty 0: kept
        (5050, 0),     # a2's id 5050 (qty 0): deleted
        (6100, 0),     # only b1 has id 6100 (qty 0), another partition: kept
    ], "s2-a")
    # Unpartitioned (spec 0): every partition. Its column is called old_id in the file; the
    # spec matches equality columns by field id (a column renamed after the delete).
    eq_all = w.equality_deletes(0, (), [("old_id", "BIGINT", 1)], [(2,), (6001,), (7002,)], "s2")
    deletes2 = [pos_a, pos_b, eq_c, eq_a]
    stamp(deletes2 + [eq_all], 2, S2)
    m2 = w.manifest(1, 1, [(1, f) for f in deletes2], 2, S2)
    m2g = w.manifest(0, 1, [(1, eq_all)], 2, S2)
    live2 = data1 + deletes2 + [eq_all]
    w.commit(S2, 2, "delete", [m1, m2, m2g], deletes2 + [eq_all], live2, T0 + 60000)

    # Snapshot 3 (seq 3): data equal to seq-2 equality deletes (kept: they apply only to
    # older data), and a position delete at seq 3 on a seq-3 file and on a seq-1 file.
    a3 = w.data_file("a", [
        {"id": 3, "category": "a", "name": "n3", "qty": 3},
        {"id": 26, "category": "a", "name": None, "qty": None},
        {"id": 2, "category": "a", "name": "n2", "qty": 2},
    ] + [std_row(i, "a") for i in range(8000, 8020)], "a3")
    b3 = w.data_file("b", [{"id": 6001, "category": "b", "name": "x", "qty": 1}], "b3")
    c3 = w.data_file("c", [std_row(i, "c") for i in range(9000, 9010)] + [
        {"id": 9100, "category": "c", "name": "n1", "qty": 1},
        {"id": 9101, "category": "c", "name": None, "qty": 5},
        {"id": 7002, "category": "c", "name": "n4", "qty": 2},
    ], "c3")
    data3 = [a3, b3, c3]
    stamp(data3, 3, S3)
    pos_a3 = w.position_deletes(1, ("a",), [(a3, 5), (a3, 6), (a1, 1)], "s3-a")
    stamp([pos_a3], 3, S3)
    if inherit:
        # A merged data manifest (Spark's merge-append): snapshot 1's files EXISTING with
        # their own sequence number 1, snapshot 3's ADDED, inheriting 3 from the list.
        m3 = w.manifest(1, 0, [(0, f) for f in data1] + [(1, f) for f in data3], 3, S3)
        manifests3 = [m3, m2, m2g]
    else:
        m3 = w.manifest(1, 0, [(1, f) for f in data3], 3, S3)
        manifests3 = [m1, m2, m2g, m3]
    m3d = w.manifest(1, 1, [(1, pos_a3)], 3, S3)
    live3 = live2 + data3 + [pos_a3]
    w.commit(S3, 3, "overwrite", manifests3 + [m3d], data3 + [pos_a3], live3, T0 + 120000)

    return {
        "writer": w,
        "files": {"a1": a1, "b1": b1, "pos_b": pos_b, "pos_a": pos_a},
        S1: expected_rows(data1, []),
        S2: expected_rows(data1, deletes2 + [eq_all]),
        S3: expected_rows(data1 + data3, deletes2 + [eq_all, pos_a3]),
    }


# ---------------------------------------------------------------------------------------
# Checks


def check(label, got, want):
    if got == want:
        print(f"ok   {label}")
        return
    print(f"FAIL {label}")
    if isinstance(got, list) and isinstance(want, list):
        gs = [json.dumps(r, sort_keys=True) for r in got]
        ws = [json.dumps(r, sort_keys=True) for r in want]
        extra = [r for r in gs if r not in set(ws)]
        missing = [r for r in ws if r not in set(gs)]
        print(f"     got {len(got)} rows, want {len(want)}")
        print(f"     unexpected: {extra[:10]}")
        print(f"     missing:    {missing[:10]}")
    else:
        print(f"     got  {got!r}\n     want {want!r}")
    FAILURES.append(label)


def check_error(label, warehouse, sql, must_name):
    rc, out, err = run_sql(sql, warehouse)
    ok = rc != 0 and not out.strip() and all(n in err for n in must_name)
    if ok:
        print(f"ok   {label}: {err.strip().splitlines()[-1] if err.strip() else ''}")
        return
    print(f"FAIL {label}: rc {rc}, stdout {out[:300]!r}, stderr {err[:500]!r}, "
          f"expected an error naming {must_name}")
    FAILURES.append(label)


def utc_text(ms):
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S+00")


def group_by_category(rows):
    groups = {}
    for r in rows:
        groups.setdefault(r["category"], []).append(r)
    out = []
    for cat in sorted(groups, key=lambda c: (c is None, c or "")):
        rs = groups[cat]
        qtys = [r["qty"] for r in rs if r["qty"] is not None]
        out.append({
            "category": cat,
            "n": len(rs),
            "names": sum(r["name"] is not None for r in rs),
            "s": sum(qtys) if qtys else None,
            "lo": min(r["id"] for r in rs),
            "hi": max(r["id"] for r in rs),
        })
    return out


def check_table(warehouse, table, expected):
    t = f"lake.db.{table}"
    now = expected[S3]
    check(f"{table}: SELECT * (snapshot 3)", canon(query(warehouse, f"SELECT * FROM {t}")), canon(now))
    check(f"{table}: count(*)", query(warehouse, f"SELECT count(*) AS n FROM {t}"), [{"n": len(now)}])
    a = [r for r in now if r["category"] == "a"]
    check(f"{table}: WHERE category = 'a' (one partition)",
          canon(query(warehouse, f"SELECT * FROM {t} WHERE category = 'a'")), canon(a))
    check(f"{table}: count(*) WHERE category = 'c'",
          query(warehouse, f"SELECT count(*) AS n FROM {t} WHERE category = 'c'"),
          [{"n": sum(r["category"] == "c" for r in now)}])
    check(f"{table}: aggregate by category",
          query(warehouse, f"SELECT category, count(*) AS n, count(name) AS names, "
                           f"sum(qty)::BIGINT AS s, min(id) AS lo, max(id) AS hi FROM {t} "
                           f"GROUP BY category ORDER BY category"),
          group_by_category(now))
    # A filter inside the positions of a1 (row groups 0 and 1, pushed into the Parquet scan)
    sel = [r for r in now if 2000 <= r["id"] <= 4100]
    check(f"{table}: WHERE id BETWEEN 2000 AND 4100 (across row groups)",
          canon(query(warehouse, f"SELECT * FROM {t} WHERE id BETWEEN 2000 AND 4100")), canon(sel))
    check(f"{table}: ids with qty IS NULL",
          query(warehouse, f"SELECT id FROM {t} WHERE qty IS NULL ORDER BY id"),
          [{"id": r["id"]} for r in sorted(now, key=lambda r: r["id"]) if r["qty"] is None])
    check(f"{table}: names NULL or n1 in partition c",
          query(warehouse, f"SELECT id FROM {t} WHERE category = 'c' AND "
                           f"(name IS NULL OR name = 'n1') ORDER BY id"),
          [{"id": r["id"]} for r in sorted(now, key=lambda r: r["id"])
           if r["category"] == "c" and r["name"] in (None, "n1")])
    check(f"{table}: min/max id",
          query(warehouse, f"SELECT min(id) AS lo, max(id) AS hi FROM {t} WHERE category = 'a'"),
          [{"lo": min(r["id"] for r in a), "hi": max(r["id"] for r in a)}])
    # Time travel: before the deletes every row; after them, before snapshot 3.
    for sid, label in ((S1, "snapshot 1, before the deletes"), (S2, "snapshot 2")):
        rows = expected[sid]
        check(f"{table}: AT (VERSION => {sid}) ({label})",
              canon(query(warehouse, f"SELECT * FROM {t} AT (VERSION => {sid})")), canon(rows))
        check(f"{table}: count(*) AT (VERSION => {sid})",
              query(warehouse, f"SELECT count(*) AS n FROM {t} AT (VERSION => {sid})"),
              [{"n": len(rows)}])
    check(f"{table}: AT (VERSION => 'before_deletes') (a tag of snapshot 1)",
          canon(query(warehouse, f"SELECT * FROM {t} AT (VERSION => 'before_deletes')")),
          canon(expected[S1]))
    check(f"{table}: AT (TIMESTAMP => snapshot 1's time + 30 s)",
          query(warehouse, f"SELECT count(*) AS n FROM {t} AT (TIMESTAMP => "
                           f"TIMESTAMPTZ '{utc_text(T0 + 30000)}')"),
          [{"n": len(expected[S1])}])


def build_evolved_table(warehouse, name):
    """Partition spec evolution and removed files (explicit sequence numbers):

    1 (seq 1)  u1 under spec 0 (unpartitioned, written before the table was partitioned:
               categories a and b), p1 under spec 1 (partition a).
    2 (seq 2)  an equality delete of spec 1, partition a, by id, matching rows of both u1
               and p1: only p1's go (the partition compared is spec id and values, and u1
               is of spec 0); a position delete of spec 0 (unpartitioned: every partition)
               naming rows of u1 and of p1: both go.
    3 (seq 3)  u1 removed (DELETED in a rewritten data manifest, p1 EXISTING) and the
               equality delete removed (DELETED in a rewritten delete manifest): p1's rows it
               deleted are back.
    """
    w = TableWriter(warehouse, name)
    u1 = w.data_file(None, [std_row(i, "a" if i % 2 == 0 else "b") for i in range(0, 20)], "u1",
                     spec_id=0)
    p1 = w.data_file("a", [std_row(i, "a") for i in range(100, 120)], "p1")
    stamp([u1, p1], 1, S1)
    m_u = w.manifest(0, 0, [(1, u1)], 1, S1)
    m_p = w.manifest(1, 0, [(1, p1)], 1, S1)
    w.commit(S1, 1, "append", [m_u, m_p], [u1, p1], [u1, p1], T0)

    eq = w.equality_deletes(1, ("a",), [("id", "BIGINT", 1)], [(0,), (2,), (100,), (101,)], "s2")
    pos = w.position_deletes(0, (), [(u1, 1), (p1, 5)], "s2")
    stamp([eq, pos], 2, S2)
    m_eq = w.manifest(1, 1, [(1, eq)], 2, S2)
    m_pos = w.manifest(0, 1, [(1, pos)], 2, S2)
    w.commit(S2, 2, "delete", [m_u, m_p, m_eq, m_pos], [eq, pos], [u1, p1, eq, pos], T0 + 60000)

    m_u3 = w.manifest(0, 0, [(2, u1)], 3, S3)
    m_p3 = w.manifest(1, 0, [(0, p1)], 3, S3)
    m_eq3 = w.manifest(1, 1, [(2, eq)], 3, S3)
    w.commit(S3, 3, "overwrite", [m_u3, m_p3, m_eq3, m_pos], [], [p1, pos], T0 + 120000)
    return {
        S1: expected_rows([u1, p1], []),
        S2: expected_rows([u1, p1], [eq, pos]),
        S3: expected_rows([p1], [pos]),
    }


def build_bad_tables(warehouse):
    """Tables with malformed delete manifests; returns {table: [names the error must show]}."""
    out = {}

    def base(name):
        w = TableWriter(warehouse, name)
        d = w.data_file("a", [std_row(i, "a") for i in range(10)], "a")
        stamp([d], 1, S1)
        m1 = w.manifest(1, 0, [(1, d)], 1, S1)
        w.commit(S1, 1, "append", [m1], [d], [d], T0)
        return w, d, m1

    # An equality delete entry without equality_ids (null) and with an empty list.
    for name, ids in (("bad_eq_null", None), ("bad_eq_empty", [])):
        w, d, m1 = base(name)
        eq = w.equality_deletes(1, ("a",), [("id", "BIGINT", 1)], [(3,)], "bad", equality_ids=ids)
        stamp([eq], 2, S2)
        m2 = w.manifest(1, 1, [(1, eq)], 2, S2)
        w.commit(S2, 2, "delete", [m1, m2], [eq], [d, eq], T0 + 60000)
        out[name] = [os.path.basename(eq.local)]

    # A delete manifest (content 1 in the list, "deletes" in its metadata) whose entry is a
    # data file (content 0).
    w, d, m1 = base("bad_delete_manifest")
    d2 = w.data_file("a", [std_row(i, "a") for i in range(10, 20)], "a-more")
    stamp([d2], 2, S2)
    m2 = w.manifest(1, 1, [(1, d2)], 2, S2)
    w.commit(S2, 2, "delete", [m1, m2], [d2], [d, d2], T0 + 60000)
    out["bad_delete_manifest"] = [os.path.basename(d2.local)]

    # The converse: a data manifest whose entry is a position delete file.
    w, d, m1 = base("bad_data_manifest")
    pos = w.position_deletes(1, ("a",), [(d, 0)], "bad")
    stamp([pos], 2, S2)
    m2 = w.manifest(1, 0, [(1, pos)], 2, S2)
    w.commit(S2, 2, "overwrite", [m1, m2], [pos], [d, pos], T0 + 60000)
    out["bad_data_manifest"] = [os.path.basename(pos.local)]
    return out


def main():
    global SLUICE
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    SLUICE = os.path.abspath(sys.argv[1])
    top = tempfile.mkdtemp(prefix="iceberg_deletes_")
    try:
        warehouse = os.path.join(top, "wh")
        tables = {
            "t": build_good_table(warehouse, "t", inherit=False, hadoop_uris=False),
            "t_inherit": build_good_table(warehouse, "t_inherit", inherit=True, hadoop_uris=False),
            "t_hadoop": build_good_table(warehouse, "t_hadoop", inherit=True, hadoop_uris=True),
        }
        evolved = build_evolved_table(warehouse, "t_evolved")
        bad = build_bad_tables(warehouse)

        # The oracle itself: what the scenario is meant to show.
        e = tables["t"]
        ids3 = [r["id"] for r in e[S3]]
        assert len(e[S1]) == 5350 and 3 not in [r["id"] for r in e[S2]], "fixture"
        assert ids3.count(3) == 1 and ids3.count(26) == 1 and ids3.count(6001) == 1, "fixture"
        assert 8002 not in ids3 and 8003 not in ids3 and 1 not in ids3, "fixture"
        assert 6003 in ids3 and 27 in ids3 and 100 in ids3 and 6100 in ids3, "fixture"
        ev2 = [r["id"] for r in evolved[S2]]
        assert 0 in ev2 and 2 in ev2 and not {1, 100, 101, 105} & set(ev2), "fixture"
        assert sorted(r["id"] for r in evolved[S3]) == [i for i in range(100, 120) if i != 105]

        for name, expected in tables.items():
            check_table(warehouse, name, expected)
        for sid in (S1, S2, S3):
            check(f"t_evolved: AT (VERSION => {sid})",
                  canon(query(warehouse, f"SELECT * FROM lake.db.t_evolved AT (VERSION => {sid})")),
                  canon(evolved[sid]))
        check("t_evolved: SELECT * (snapshot 3)",
              canon(query(warehouse, "SELECT * FROM lake.db.t_evolved")), canon(evolved[S3]))
        check("t_evolved: WHERE category = 'a' (snapshot 2)",
              canon(query(warehouse, f"SELECT * FROM lake.db.t_evolved AT (VERSION => {S2}) "
                                     "WHERE category = 'a'")),
              canon([r for r in evolved[S2] if r["category"] == "a"]))

        # Two tables with deletes in one statement.
        want = sum(1 for x in tables["t"][S3] for y in tables["t_inherit"][S3] if x["id"] == y["id"])
        check("join of t and t_inherit",
              query(warehouse, "SELECT count(*) AS n FROM lake.db.t x JOIN lake.db.t_inherit y "
                               "USING (id)"), [{"n": want}])

        for name, must in bad.items():
            check_error(f"{name}: refused naming the file", warehouse,
                        f"SELECT * FROM lake.db.{name}", must)
            check_error(f"{name}: count(*) refused too", warehouse,
                        f"SELECT count(*) FROM lake.db.{name}", must)

        # A delete file that is missing is an error, not a delete ignored; a query pruned
        # to another partition does not need it.
        files = tables["t"]["files"]
        os.remove(files["pos_b"].local)
        check_error("t: partition b's position delete file missing", warehouse,
                    "SELECT count(*) FROM lake.db.t WHERE category = 'b'",
                    [os.path.basename(files["pos_b"].local)])
        check("t: partition a without partition b's delete file",
              query(warehouse, "SELECT count(*) AS n FROM lake.db.t WHERE category = 'a'"),
              [{"n": sum(r["category"] == "a" for r in tables["t"][S3])}])
    finally:
        done(top, "ICEBERG_DELETES_KEEP")
    return report()


def done(top, keep_variable):
    """Removes the test's directory, unless $keep_variable is set."""
    if os.environ.get(keep_variable):
        print(f"kept {top}")
    else:
        shutil.rmtree(top, ignore_errors=True)


def report():
    """Prints the failed checks; the exit status."""
    if FAILURES:
        print(f"\n{len(FAILURES)} check(s) failed:")
        for f in FAILURES:
            print(f"  {f}")
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
