#!/usr/bin/python3
"""Avro and Protobuf messages through `sluice serve --pipelines` (docs/design/0022-schemas.md).

Messages in the Confluent framing, their payloads encoded here byte by byte (Debian has no
fastavro; the encodings are the specifications'), produced with confluent-kafka; the
schemas registered with serve's own registry over HTTP.

1. Avro into a StructuredBatch pipeline (a declared table with DECIMAL, LIST and STRUCT
   columns) whose kafka sink writes `format: avro`: messages of two schema versions, the
   second adding a field with a default; read back with `topic()` over psql, decoded by the
   schema the sink registered under `avro_out-value`.
2. Protobuf (a nested message, a repeated field, an enum, a google.protobuf.Timestamp)
   into an InferredMemBatch pipeline whose columns come from the first message's schema,
   kafka sink `format: protobuf`, read back with `topic()`.
3. Bad input under on_error DLQ: a value that is not framed, a wrong magic byte, an unknown
   schema id, a truncated payload, trailing bytes: each becomes a dead letter (JSON, on a
   topic) whose error says why, and the pipeline goes on with the good messages after them.
4. `topic()` over the input topics decodes them too; an unframed value gives NULLs.
5. Framed keys: an InferredMemBatch pipeline with `key_format: avro` reads kafka_key as
   the `<topic>-key` subject's record (a STRUCT); a null key is NULL, a key that is not
   framed is a dead letter. `topic()` decodes the keys on its own (and `key_format =>
   'bytes'` does not).
6. The topic as a relation: psql's `\d kafka.keyed_in` shows its columns (the registered
   schema's among them), and `kafka.keyed_in` reads it as a table.

usage: /usr/bin/python3 schema_pipeline_test.py path/to/sluice
"""

import json
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sluice_broker import FAST_GROUPS, Broker, TestFailure, check, uvarint, wait_until  # noqa: E402

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PSQL = next((p for p in ("/usr/bin/psql", "/usr/lib/postgresql/15/bin/psql")
             if os.path.exists(p)), None)

ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "total", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10,
                               "scale": 2}},
    {"name": "items", "type": {"type": "array", "items": "string"}},
    {"name": "ship", "type": {"type": "record", "name": "Ship", "fields": [
        {"name": "city", "type": "string"}, {"name": "express", "type": "boolean"}]}},
]}
ORDER_V2 = json.loads(json.dumps(ORDER_V1))
ORDER_V2["fields"].append({"name": "status", "type": "string", "default": "new"})

PROTO = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Reading {
  string sensor = 1;
  double value = 2;
  repeated int32 flags = 3;
  Place place = 4;
  Kind kind = 5;
  google.protobuf.Timestamp at = 6;
}
message Place { string city = 1; int64 floor = 2; }
enum Kind { KIND_UNKNOWN = 0; TEMPERATURE = 1; HUMIDITY = 2; }
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- Avro's binary encoding (the specification's, section "Binary Encoding")
def zigzag(n):
    return uvarint((n << 1) ^ (n >> 63))


def a_long(n):
    return zigzag(n)


def a_str(s):
    b = s.encode()
    return zigzag(len(b)) + b


def a_decimal(cents):
    raw = cents.to_bytes((cents.bit_length() + 8) // 8 or 1, "big", signed=True)
    return zigzag(len(raw)) + raw


def a_array(items, enc):
    if not items:
        return zigzag(0)
    return zigzag(len(items)) + b"".join(enc(i) for i in items) + zigzag(0)


def avro_order(i, v2=False):
    body = (a_long(i) + a_str(f"c{i}") + a_decimal(i * 100 + 5) +
            a_array([f"item{i}", "gift"], a_str) + a_str(f"city{i % 3}") +
            (b"\x01" if i % 2 else b"\x00"))
    if v2:
        body += a_str("shipped")
    return body


def framed(schema_id, payload, indexes=None):
    out = b"\x00" + struct.pack(">i", schema_id)
    if indexes is not None:
        out += indexes
    return out + payload


# --- Protobuf's wire format
varint = uvarint


def p_len(field, data):
    return varint(field << 3 | 2) + varint(len(data)) + data


def p_varint(field, n):
    return varint(field << 3) + varint(n)


def proto_reading(i):
    place = p_len(1, f"room{i}".encode()) + p_varint(2, i)
    at = p_varint(1, 1_700_000_000 + i) + p_varint(2, 500_000_000)
    flags = p_len(3, varint(1) + varint(i))  # packed
    return (p_len(1, f"s{i}".encode()) + varint(2 << 3 | 1) + struct.pack("<d", i + 0.5) +
            flags + p_len(4, place) + p_varint(5, 1 + i % 2) + p_len(6, at))


class Registry:
    def __init__(self, url):
        self.url = url

    def register(self, subject, schema, schema_type=None):
        body = {"schema": schema if isinstance(schema, str) else json.dumps(schema)}
        if schema_type:
            body["schemaType"] = schema_type
        req = urllib.request.Request(
            f"{self.url}/subjects/{subject}/versions", data=json.dumps(body).encode(),
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"}, method="POST")
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())["id"]


def pg_port(broker):
    def find():
        with open(broker.out_path) as f:
            for line in f:
                if line.startswith("sluice: Postgres wire protocol on 127.0.0.1:"):
                    return int(line.strip().rsplit(":", 1)[1].split()[0])
        return None
    return wait_until(find, 30, "the Postgres port in serve's output")


def psql(broker, sql):
    p = subprocess.run([PSQL, "-X", "-q", "-A", "-t", "-F", "|", "-v", "ON_ERROR_STOP=1",
                        "-h", "127.0.0.1", "-p", str(pg_port(broker)), "-U", "sluice",
                        "-d", "sluice", "-c", sql],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PGCONNECT_TIMEOUT="10"))
    check(p.returncode == 0, f"psql: {sql}: {p.stderr}")
    return [line.split("|") for line in p.stdout.strip().splitlines() if line]


def produce(bootstrap, topic, values, keys=None):
    p = Producer({"bootstrap.servers": bootstrap})
    for i, v in enumerate(values):
        p.produce(topic, v, key=keys[i] if keys else None)
    check(p.flush(30) == 0, f"produce to {topic}")


def consume_all(bootstrap, topic, n, what):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    out = []

    def got():
        m = c.poll(0.5)
        if m is not None and not m.error():
            out.append(m.value())
        return len(out) >= n

    wait_until(got, 90, f"{n} {what} on {topic}", interval=0)
    c.close()
    return out


PIPELINES = {
    "avro_orders.yml": """
commands:
  - name: orders table
    sql: CREATE TABLE orders (id BIGINT, customer VARCHAR, total DECIMAL(10,2),
         items VARCHAR[], ship STRUCT(city VARCHAR, express BOOLEAN), status VARCHAR)
pipeline:
  name: avro_orders
  batch_size: 100
  flush_interval_seconds: 1
  on_error:
    policy: DLQ
    dlq:
      type: kafka
      kafka:
        brokers: [{addr}]
        topic: avro_dlq
  source:
    type: kafka
    kafka:
      brokers: [{addr}]
      group_id: avro-orders
      auto_offset_reset: earliest
      topics: [avro_in]
      format: avro
  handler:
    type: handlers.StructuredBatch
    table: orders
    sql: SELECT id, customer, total, len(items) AS n_items, ship.city AS city, status FROM orders
  sink:
    type: kafka
    kafka:
      brokers: [{addr}]
      topic: avro_out
      format: avro
""",
    "proto_readings.yml": """
pipeline:
  name: proto_readings
  batch_size: 100
  flush_interval_seconds: 1
  on_error:
    policy: DLQ
    dlq:
      type: kafka
      kafka:
        brokers: [{addr}]
        topic: proto_dlq
  source:
    type: kafka
    kafka:
      brokers: [{addr}]
      group_id: proto-readings
      auto_offset_reset: earliest
      topics: [proto_in]
      format: protobuf
  handler:
    type: handlers.InferredMemBatch
    sql: SELECT sensor, value, len(flags) AS n_flags, place.city AS city, kind, "at" FROM batch
  sink:
    type: kafka
    kafka:
      brokers: [{addr}]
      topic: proto_out
      format: protobuf
""",
    "keyed.yml": """
pipeline:
  name: keyed
  batch_size: 100
  flush_interval_seconds: 1
  on_error:
    policy: DLQ
    dlq:
      type: kafka
      kafka:
        brokers: [{addr}]
        topic: keyed_dlq
  source:
    type: kafka
    kafka:
      brokers: [{addr}]
      group_id: keyed
      auto_offset_reset: earliest
      topics: [keyed_in]
      format: avro
      key_format: avro
  handler:
    type: handlers.InferredMemBatch
    sql: SELECT kafka_key.shop AS shop, kafka_key.id AS key_id, id, customer FROM batch
  sink:
    type: kafka
    kafka:
      brokers: [{addr}]
      topic: keyed_out
      format: avro
""",
}

ORDER_KEY = {"type": "record", "name": "OrderKey", "namespace": "shop", "fields": [
    {"name": "shop", "type": "string"}, {"name": "id", "type": "long"}]}


def main():
    sluice = sys.argv[1]
    check(PSQL is not None, "psql is missing (scripts/setup.sh installs postgresql-client)")
    addr = f"127.0.0.1:{free_port()}"
    broker = Broker(sluice, FAST_GROUPS, kafka_addr=addr, schema_registry="127.0.0.1:0")
    pipelines = os.path.join(broker.tmp, "pipelines")
    os.makedirs(pipelines)
    for name, text in PIPELINES.items():
        with open(os.path.join(pipelines, name), "w") as f:
            f.write(text.replace("{addr}", addr))
    try:
        # The topics first (serve does not create topics on use by default), then serve with
        # the pipelines on the same data.
        broker.start()
        admin = AdminClient({"bootstrap.servers": addr})
        topics = ["avro_in", "avro_out", "avro_dlq", "proto_in", "proto_out", "proto_dlq",
                  "keyed_in", "keyed_out", "keyed_dlq"]
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
            f.result(30)
        check(broker.stop() == 0, "sluice serve exits 0 after SIGTERM")
        broker.start(extra_args=["--pipelines", pipelines])
        reg = Registry(broker.registry_url)

        # 1 and 3: Avro, two versions, and bad input between good messages.
        v1 = reg.register("avro_in-value", ORDER_V1)
        v2 = reg.register("avro_in-value", ORDER_V2)
        check(v2 == v1 + 1, f"v2's id {v2} after v1's {v1}")
        good = [framed(v1, avro_order(i)) for i in range(1, 6)]
        bad = [
            b'{"id": 99}',                                  # not framed
            b"\x01" + framed(v1, avro_order(7))[1:],        # wrong magic byte
            framed(9999, avro_order(8)),                    # unknown schema id
            framed(v1, avro_order(9))[:-6],                 # truncated
            framed(v1, avro_order(10) + b"\x02\x03"),       # trailing bytes
        ]
        later = [framed(v2, avro_order(i, v2=True)) for i in range(11, 14)]
        produce(addr, "avro_in", good + bad + later)
        out = consume_all(addr, "avro_out", 8, "avro rows")
        check(all(v[:1] == b"\x00" for v in out), "the sink's values are framed")
        letters = [json.loads(v) for v in consume_all(addr, "avro_dlq", 5, "dead letters")]
        errors = " | ".join(d["error"] for d in letters)
        for expected in ("Confluent framing", "magic byte 1", "schema id 9999",
                         "past the end", "after the end"):
            check(expected in errors, f"a dead letter says '{expected}': {errors}")
        rows = psql(broker, "SELECT id, customer, total, n_items, city, status "
                            "FROM topic('avro_out') ORDER BY id")
        check(len(rows) == 8, f"8 rows through the pipeline: {rows}")
        check(rows[0] == ["1", "c1", "1.05", "2", "city1", ""], f"v1's row: {rows[0]}")
        check(rows[-1] == ["13", "c13", "13.05", "2", "city1", "shipped"], f"v2's row: {rows[-1]}")
        # topic() over the input: decoded by each message's own schema; bad ones are NULL.
        rows = psql(broker, "SELECT \"offset\", id, ship.city, status FROM topic('avro_in') "
                            "ORDER BY \"offset\"")
        check(len(rows) == 13, f"13 messages in: {rows}")
        check(rows[0] == ["0", "1", "city1", "new"], f"a v1 message read with v2's default: {rows[0]}")
        check(rows[5][1:] == ["", "", ""], f"an unframed message is NULL: {rows[5]}")
        check(rows[12] == ["12", "13", "city1", "shipped"], f"a v2 message: {rows[12]}")

        # 2: Protobuf into an inferred handler.
        pid = reg.register("proto_in-value", PROTO, "PROTOBUF")
        produce(addr, "proto_in", [framed(pid, proto_reading(i), b"\x00") for i in range(1, 5)] +
                [framed(pid, b"\x0a\xff\x01", b"\x00")] +          # a length past the end
                [framed(pid, proto_reading(5), b"\x00")])
        out = consume_all(addr, "proto_out", 5, "protobuf rows")
        letters = [json.loads(v) for v in consume_all(addr, "proto_dlq", 1, "dead letters")]
        check(letters[0].get("phase") == "decode" and letters[0].get("offset") == 4 and
              letters[0].get("error"), f"the bad reading's dead letter: {letters}")
        # The sink's `value` column is value_value in topic(), whose own `value` is the text.
        rows = psql(broker, "SELECT sensor, value_value, n_flags, city, kind, "
                            "epoch_ms(\"at\") FROM topic('proto_out') ORDER BY sensor")
        check(len(rows) == 5, f"5 readings: {rows}")
        check(rows[0] == ["s1", "1.5", "2", "room1", "HUMIDITY", "1700000001500"], f"{rows[0]}")
        check(rows[1][4] == "TEMPERATURE", f"the enum by name: {rows[1]}")
        rows = psql(broker, "SELECT sensor, place.floor, flags FROM topic('proto_in') "
                            "WHERE sensor = 's3'")
        check(rows == [["s3", "3", "{1,3}"]], f"topic() over protobuf: {rows}")

        # 5: framed keys. First a batch none of whose messages decodes (no schema yet, no
        # columns): each is one decode error, and the handler does not run on nothing.
        produce(addr, "keyed_in", [b'{"id": 1}', b"\x00\x00"])
        early = Consumer({"bootstrap.servers": addr, "group.id": "check-keyed-early",
                          "auto.offset.reset": "earliest", "enable.auto.commit": False})
        early.subscribe(["keyed_dlq"])
        letters = []

        def two_letters():
            for m in early.consume(10, 0.2):
                if not m.error():
                    letters.append(json.loads(m.value()))
            return len(letters) >= 2
        wait_until(two_letters, 90, "2 dead letters on keyed_dlq", interval=0)
        time.sleep(1.5)  # a handler error would come in the same batch's letters
        two_letters()
        early.close()
        check([d.get("phase") for d in letters] == ["decode", "decode"],
              f"two decode errors, no handler error: {letters}")
        # The subjects come after the pipeline started: the first message finds them.
        vid = reg.register("keyed_in-value", ORDER_V1)
        kid = reg.register("keyed_in-key", ORDER_KEY)
        keys = [framed(kid, a_str(f"shop{i}") + a_long(i * 10)) for i in (1, 2, 3)]
        keys += [None, b"not framed", framed(kid, a_str("shop6") + a_long(60))]
        produce(addr, "keyed_in", [framed(vid, avro_order(i)) for i in range(1, 7)], keys)
        out = consume_all(addr, "keyed_out", 5, "keyed rows")
        letters = [json.loads(v) for v in consume_all(addr, "keyed_dlq", 3, "dead letters")][2:]
        check(letters[0].get("offset") == 6 and
              "key: not in the Confluent framing" in letters[0].get("error", ""),
              f"the unframed key's dead letter: {letters}")
        rows = psql(broker, "SELECT id, shop, key_id FROM topic('keyed_out') ORDER BY id")
        check(rows == [["1", "shop1", "10"], ["2", "shop2", "20"], ["3", "shop3", "30"],
                       ["4", "", ""], ["6", "shop6", "60"]], f"kafka_key decoded: {rows}")
        rows = psql(broker, "SELECT \"offset\", key.shop, key.id, typeof(key), customer "
                            "FROM topic('keyed_in') ORDER BY \"offset\"")
        check(rows[2] == ["2", "shop1", "10", 'STRUCT(shop VARCHAR, id BIGINT)', "c1"],
              f"topic() decodes the key: {rows[2]}")
        check(rows[5][1:3] == ["", ""] and rows[6][1:3] == ["", ""],
              f"a null key and an unframed one are NULL: {rows}")
        rows = psql(broker, "SELECT typeof(key), count(*) FROM topic('keyed_in', "
                            "key_format => 'bytes') GROUP BY ALL")
        check(rows == [["VARCHAR", "8"]], f"key_format => 'bytes' keeps the text: {rows}")

        # 6: the topic as a relation of schema kafka: \d shows topic()'s columns and the
        # registered schema's, and kafka.<topic> reads it.
        rows = psql(broker, "\\d kafka.keyed_in")
        check([r[0] for r in rows] == ["partition", "offset", "timestamp", "key", "value",
                                       "key_bytes", "value_bytes", "id", "customer", "total",
                                       "items", "ship"], f"\\d kafka.keyed_in: {rows}")
        types = {r[0]: r[1] for r in rows}
        check(types["id"] == "bigint" and types["items"] == "text[]" and
              types["total"].startswith("numeric"), f"\\d's types: {types}")
        rows = psql(broker, "\\dt kafka.*")
        check(["kafka", "keyed_in", "table", "sluice"] in rows, f"\\dt kafka.*: {rows}")
        rows = psql(broker, "SELECT count(*), min(key.shop), max(id) FROM kafka.keyed_in "
                            "WHERE \"offset\" >= 3")
        check(rows == [["5", "shop2", "6"]], f"kafka.keyed_in as a table: {rows}")
        check(broker.stop() == 0, "sluice serve exits 0 after SIGTERM")
    except Exception:
        print(broker.logs(80), file=sys.stderr)
        raise
    finally:
        broker.cleanup()
    print("schema_pipeline_test: ok")


if __name__ == "__main__":
    try:
        main()
    except TestFailure as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)
