#!/usr/bin/python3
"""confluent-kafka 1.7's Schema Registry clients against `sluice serve`
(docs/design/0022-schemas.md).

Debian's python3-confluent-kafka 1.7.0 with python3-protobuf, python3-jsonschema and
python3-requests; the Protobuf classes are those protoc would generate from READING_PROTO
below, built at run time from its FileDescriptorProto (no protoc needed). Debian has no
fastavro, so no Avro here (schema_clients_test.js covers Avro with the npm client).

1. Protobuf: SchemaRegistryClient + ProtobufSerializer register the schema (a base64
   FileDescriptorProto) under `readings-value` and its imports (timestamp.proto,
   wrappers.proto) as subjects of their own, referenced by name; messages (a nested
   message, a repeated field, an enum, a Timestamp, a oneof, a map, a wrapper) produced,
   consumed and decoded by ProtobufDeserializer, equal to what was sent; the schema by id
   served to a fresh client as .proto text with its references; a new client registering
   it again gets the same id; the client's compatibility check and a refused (409)
   registration. Read through sluice: `topic('readings')` over psql shows every field as a
   column of the right type.
2. JSON Schema: JSONSerializer (with a to_dict) registers under `payments-value`,
   JSONDeserializer (with a from_dict) reads back; a compatible next version (an optional
   property in a closed model: version 2) and an incompatible one (a property changing
   type: 409) through the client. Read through sluice: a `sluice serve --pipelines`
   pipeline with `source.kafka.format: json_schema` into a StructuredBatch table, writing
   a kafka topic (JSON) whose rows are checked.
3. Wrong input produced raw with confluent-kafka into the json_schema pipeline's topic
   (on_error DLQ to a kafka topic): an unknown schema id, a wrong magic byte, a truncated
   payload after a good framing, a value shorter than the framing, the Protobuf schema's
   id: each a dead letter whose reason says why, and a good message produced after them
   still reaches the output.

Client quirk worked around, not hidden: confluent-kafka before 1.8 writes the Protobuf
message indexes as unsigned varints, not the zigzag varints of Confluent's framing (its
later `use.deprecated.format`); the two agree only for the first message of a file (the
single byte 0), so the message produced here is its file's first.

usage: /usr/bin/python3 schema_python_clients_test.py path/to/sluice
"""

import json
import os
import socket
import struct
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sluice_broker import FAST_GROUPS, Broker, TestFailure, check, wait_until  # noqa: E402

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

try:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
    from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402
    from confluent_kafka.schema_registry.json_schema import (  # noqa: E402
        JSONDeserializer, JSONSerializer)
    from confluent_kafka.schema_registry.protobuf import (  # noqa: E402
        ProtobufDeserializer, ProtobufSerializer)
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # noqa: E402
    from google.protobuf import timestamp_pb2, wrappers_pb2  # noqa: E402,F401 (in the pool)
except ImportError as e:
    print(f"FAILED: {e} (scripts/setup.sh installs python3-requests, python3-protobuf, "
          "python3-jsonschema)", file=sys.stderr)
    sys.exit(1)

PSQL = next((p for p in ("/usr/bin/psql", "/usr/lib/postgresql/15/bin/psql")
             if os.path.exists(p)), None)

# What reading_module() builds, as protoc would read it.
READING_PROTO = """syntax = "proto3";
package sensors.v1;

import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message Reading {
  string sensor = 1;
  double level = 2;
  repeated int32 flags = 3;
  Place place = 4;
  Kind kind = 5;
  google.protobuf.Timestamp at = 6;
  oneof origin {
    string device = 7;
    int64 gateway = 8;
  }
  map<string, int32> counts = 9;
  google.protobuf.DoubleValue threshold = 10;

  message Place {
    string city = 1;
    int64 floor = 2;
  }
}

enum Kind { KIND_UNKNOWN = 0; TEMPERATURE = 1; HUMIDITY = 2; }
"""

# Not BACKWARD-compatible with the above: a string field becomes a message
# (FIELD_KIND_CHANGED).
READING_BAD = """syntax = "proto3";
package sensors.v1;

message Reading {
  Wrapped sensor = 1;
  message Wrapped { string v = 1; }
}
"""

PAYMENT_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Payment",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "payer": {"type": "string"},
        "amount": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "card": {"type": "object", "properties": {
            "brand": {"type": "string"}, "last4": {"type": "string"}}},
    },
    "required": ["id", "payer", "amount"],
    "additionalProperties": False,
}
# BACKWARD-compatible: an optional property more in a closed content model (old data cannot
# have had it).
PAYMENT_V2 = json.loads(json.dumps(PAYMENT_SCHEMA))
PAYMENT_V2["properties"]["memo"] = {"type": "string"}
# Not BACKWARD-compatible: amount changes type.
PAYMENT_BAD = json.loads(json.dumps(PAYMENT_SCHEMA))
PAYMENT_BAD["properties"]["amount"] = {"type": "string"}

PIPELINE = """
commands:
  - name: payments table
    sql: CREATE TABLE payments (id BIGINT, payer VARCHAR, amount DOUBLE, tags VARCHAR[],
         card STRUCT(brand VARCHAR, last4 VARCHAR), memo VARCHAR)
pipeline:
  name: payments
  batch_size: 100
  flush_interval_seconds: 1
  on_error:
    policy: DLQ
    dlq:
      type: kafka
      kafka:
        brokers: [{addr}]
        topic: payments_dlq
  source:
    type: kafka
    kafka:
      brokers: [{addr}]
      group_id: payments
      auto_offset_reset: earliest
      topics: [payments]
      format: json_schema
  handler:
    type: handlers.StructuredBatch
    table: payments
    sql: SELECT id, upper(payer) AS payer, amount * 2 AS doubled, len(tags) AS n_tags,
         card.brand AS brand, memo FROM payments
  sink:
    type: kafka
    kafka:
      brokers: [{addr}]
      topic: payments_out
      format: json
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reading_module():
    """The classes protoc would generate from READING_PROTO, built at run time: its
    FileDescriptorProto added to the default pool, where python3-protobuf's timestamp_pb2
    and wrappers_pb2 already are."""
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(
        name="sensors/v1/reading.proto", package="sensors.v1", syntax="proto3",
        dependency=["google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto"])

    def field(msg, name, number, type_, type_name=None, repeated=False, oneof=None):
        f = msg.field.add(name=name, number=number, type=type_, json_name=name,
                          label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
        if type_name:
            f.type_name = type_name
        if oneof is not None:
            f.oneof_index = oneof

    r = fdp.message_type.add(name="Reading")  # the file's first message: indexes [0]
    field(r, "sensor", 1, F.TYPE_STRING)
    field(r, "level", 2, F.TYPE_DOUBLE)
    field(r, "flags", 3, F.TYPE_INT32, repeated=True)
    field(r, "place", 4, F.TYPE_MESSAGE, ".sensors.v1.Reading.Place")
    field(r, "kind", 5, F.TYPE_ENUM, ".sensors.v1.Kind")
    field(r, "at", 6, F.TYPE_MESSAGE, ".google.protobuf.Timestamp")
    r.oneof_decl.add(name="origin")
    field(r, "device", 7, F.TYPE_STRING, oneof=0)
    field(r, "gateway", 8, F.TYPE_INT64, oneof=0)
    field(r, "counts", 9, F.TYPE_MESSAGE, ".sensors.v1.Reading.CountsEntry", repeated=True)
    field(r, "threshold", 10, F.TYPE_MESSAGE, ".google.protobuf.DoubleValue")
    place = r.nested_type.add(name="Place")
    field(place, "city", 1, F.TYPE_STRING)
    field(place, "floor", 2, F.TYPE_INT64)
    entry = r.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    field(entry, "key", 1, F.TYPE_STRING)
    field(entry, "value", 2, F.TYPE_INT32)
    kind = fdp.enum_type.add(name="Kind")
    for number, name in enumerate(["KIND_UNKNOWN", "TEMPERATURE", "HUMIDITY"]):
        kind.value.add(name=name, number=number)

    pool = descriptor_pool.Default()
    pool.AddSerializedFile(fdp.SerializeToString())
    factory = message_factory.MessageFactory(pool)

    class Module:
        Reading = factory.GetPrototype(pool.FindMessageTypeByName("sensors.v1.Reading"))
        Place = factory.GetPrototype(pool.FindMessageTypeByName("sensors.v1.Reading.Place"))
        Kind = pool.FindEnumTypeByName("sensors.v1.Kind")

    check(list(Module.Reading.DESCRIPTOR.file.message_types_by_name) == ["Reading"] and
          list(Module.Reading.DESCRIPTOR.oneofs_by_name) == ["origin"] and
          Module.Reading.DESCRIPTOR.fields_by_name["counts"].message_type.GetOptions().map_entry,
          "the run-time Protobuf classes: one top-level message with a oneof and a map")
    return Module


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


def produce(bootstrap, topic, values):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i, v in enumerate(values):
        p.produce(topic, v, key=f"k{i}".encode())
    check(p.flush(30) == 0, f"produce to {topic}")


def consume_all(bootstrap, topic, n, what):
    """The first n messages of topic (one partition) in offset order, waiting for them."""
    c = Consumer({"bootstrap.servers": bootstrap,
                  "group.id": f"check-{topic}-{os.urandom(4).hex()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out = []

    def got():
        m = c.poll(0.5)
        if m is not None and not m.error():
            out.append(m)
        return len(out) >= n

    try:
        wait_until(got, 90, f"{n} {what} on {topic} (have {len(out)})", interval=0)
    finally:
        c.close()
    return sorted(out, key=lambda m: m.offset())[:n]


def http_json(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def num(x):
    """A DOUBLE as psql shows it."""
    return str(int(x)) if x == int(x) else repr(x)


def reading(pb2, i):
    m = pb2.Reading(sensor=f"s{i}", level=i + 0.25, flags=[i, i * 10, -i],
                    place=pb2.Place(city=["Lima", "Quito", "Cusco"][i % 3], floor=i),
                    kind=pb2.Kind.values_by_name["TEMPERATURE" if i % 2 else "HUMIDITY"].number)
    m.at.seconds = 1_767_323_045 + i
    m.at.nanos = 125_000_000
    if i % 2:
        m.device = f"dev-{i}"
    else:
        m.gateway = 9000 + i
    m.counts["ok"] = i
    m.counts["err"] = 7 * i
    if i != 3:  # one reading without the wrapper: NULL, not 0
        m.threshold.value = i * 1.5
    return m


class Payment:
    """The application's object; JSONSerializer's to_dict and JSONDeserializer's from_dict
    map it to and from the JSON document."""

    def __init__(self, id, payer, amount, tags=(), card=None, memo=None):
        self.id, self.payer, self.amount = id, payer, amount
        self.tags, self.card, self.memo = list(tags), card, memo

    def to_dict(self, ctx=None):
        d = {"id": self.id, "payer": self.payer, "amount": self.amount, "tags": self.tags}
        if self.card is not None:
            d["card"] = dict(self.card)
        if self.memo is not None:
            d["memo"] = self.memo
        return d

    @staticmethod
    def from_dict(d, ctx=None):
        return Payment(**d)

    def __eq__(self, other):
        return isinstance(other, Payment) and self.to_dict() == other.to_dict()

    def __repr__(self):
        return f"Payment({self.to_dict()})"


def payment(i, memo=None):
    card = None
    if i % 2:
        card = {"brand": "visa" if i % 4 == 1 else "amex", "last4": f"{1000 + i}"}
    return Payment(i, f"payer-{i}", i * 3.5, [f"t{i}"] * (i % 3), card, memo)


def expected_out(p):
    return {"id": p.id, "payer": p.payer.upper(), "doubled": p.amount * 2,
            "n_tags": len(p.tags), "brand": (p.card or {}).get("brand"), "memo": p.memo}


def protobuf_clients(broker, pb2):
    """1: ProtobufSerializer/Deserializer, the registry's view of what they registered,
    topic() over psql. Returns the schema id."""
    addr = broker.bootstrap
    registry = SchemaRegistryClient({"url": broker.registry_url})
    ser = ProtobufSerializer(pb2.Reading, registry)
    ctx = SerializationContext("readings", MessageField.VALUE)
    sent = [reading(pb2, i) for i in range(1, 6)]
    values = [ser(m, ctx) for m in sent]
    produce(addr, "readings", values)

    subjects = registry.get_subjects()
    for s in ("readings-value", "google/protobuf/timestamp.proto",
              "google/protobuf/wrappers.proto"):
        check(s in subjects, f"subject {s} registered: {subjects}")
    for s in ("google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto"):
        check(registry.get_latest_version(s).schema.schema_type == "PROTOBUF",
              f"{s} is a Protobuf schema")
    latest = registry.get_latest_version("readings-value")
    check(latest.version == 1 and latest.schema.schema_type == "PROTOBUF",
          f"readings-value version 1, PROTOBUF: {latest.version} {latest.schema.schema_type}")
    # (1.7's get_latest_version gives the references as the REST answer's dicts.)
    refs = sorted((r["name"], r["subject"], r["version"]) for r in latest.schema.references)
    check(refs == [("google/protobuf/timestamp.proto", "google/protobuf/timestamp.proto", 1),
                   ("google/protobuf/wrappers.proto", "google/protobuf/wrappers.proto", 1)],
          f"readings-value references its imports: {refs}")
    sid = struct.unpack(">I", values[0][1:5])[0]
    check(latest.schema_id == sid,
          f"the messages carry the registered id {latest.schema_id}: {sid}")
    check(all(v[:6] == b"\x00" + struct.pack(">I", sid) + b"\x00" for v in values),
          "every value: magic byte 0, the id, message indexes [0]")

    # The schema by id, from a fresh client (`registry` caches what it registered): .proto
    # text, as Confluent's registry serves a schema registered as a descriptor.
    fetched = SchemaRegistryClient({"url": broker.registry_url}).get_schema(sid)
    text = fetched.schema_str
    check(fetched.schema_type == "PROTOBUF", f"schema {sid}'s type: {fetched.schema_type}")
    for part in ("package sensors.v1;", 'import "google/protobuf/timestamp.proto";',
                 'import "google/protobuf/wrappers.proto";', "message Reading",
                 "google.protobuf.Timestamp at = 6;", "oneof origin",
                 "map<string, int32> counts = 9;",
                 "google.protobuf.DoubleValue threshold = 10;", "message Place",
                 "enum Kind", "HUMIDITY = 2;"):
        check(part in text, f"the schema by id is .proto text with '{part}': {text}")
    check(sorted((r.name, r.subject, r.version) for r in fetched.references) == refs,
          f"the schema by id has its references: {fetched.references}")
    # The text served is the schema: registered (with those references) under another
    # subject it is the same schema, so the same id.
    copy = Schema(text, "PROTOBUF", fetched.references)
    check(SchemaRegistryClient({"url": broker.registry_url}).register_schema(
        "readings-copy-value", copy) == sid, "the served .proto text is the same schema")

    # The same descriptor from a new client and serializer: the same id, no new version.
    again = ProtobufSerializer(pb2.Reading, SchemaRegistryClient({"url": broker.registry_url}))
    check(struct.unpack(">I", again(sent[0], ctx)[1:5])[0] == sid, "the same schema, the same id")
    check(registry.get_versions("readings-value") == [1], "still one version")

    # Compatibility through the client: BACKWARD refuses a string field turned message.
    bad = Schema(READING_BAD, "PROTOBUF", [])
    check(registry.test_compatibility("readings-value", bad) is False,
          "test_compatibility says incompatible")
    try:
        registry.register_schema("readings-value", bad)
        raise TestFailure("an incompatible Protobuf schema was registered")
    except SchemaRegistryError as e:
        check(e.http_status_code == 409, f"409 for an incompatible schema: {e}")
    check(registry.get_versions("readings-value") == [1], "the refused schema made no version")

    deser = ProtobufDeserializer(pb2.Reading)
    got = [deser(m.value(), ctx) for m in consume_all(addr, "readings", len(sent), "readings")]
    check(got == sent, f"ProtobufDeserializer reads back what was sent: {got} != {sent}")

    # topic() over psql: every field a column, of the type docs/design/0022 gives.
    types = psql(broker, "SELECT typeof(sensor), typeof(level), typeof(flags), typeof(place), "
                         "typeof(kind), typeof(\"at\"), typeof(device), typeof(gateway), "
                         "typeof(counts), typeof(threshold) FROM topic('readings') LIMIT 1")
    check(types == [["VARCHAR", "DOUBLE", "INTEGER[]",
                     "STRUCT(city VARCHAR, floor BIGINT)", "VARCHAR",
                     "TIMESTAMP WITH TIME ZONE", "VARCHAR", "BIGINT",
                     "MAP(VARCHAR, INTEGER)", "DOUBLE"]],
          f"topic('readings')'s column types: {types}")
    rows = psql(broker, "SELECT sensor, level, flags, place.city, place.floor, kind, "
                        "epoch_us(\"at\"), device, gateway, map_extract(counts, 'ok')[1], "
                        "map_extract(counts, 'err')[1], cardinality(counts), "
                        "threshold, threshold IS NULL "
                        "FROM topic('readings') ORDER BY \"offset\"")
    check(len(rows) == len(sent), f"{len(sent)} rows: {rows}")
    for m, r in zip(sent, rows):
        expected = [m.sensor, num(m.level), "{" + ",".join(map(str, m.flags)) + "}",
                    m.place.city, str(m.place.floor), pb2.Kind.values_by_number[m.kind].name,
                    str(m.at.seconds * 1_000_000 + m.at.nanos // 1000),
                    m.device if m.HasField("device") else "",
                    str(m.gateway) if m.HasField("gateway") else "",
                    str(m.counts["ok"]), str(m.counts["err"]), "2",
                    num(m.threshold.value) if m.HasField("threshold") else "",
                    "f" if m.HasField("threshold") else "t"]
        check(r == expected, f"topic('readings'): {r} != {expected}")
    nulls = psql(broker, "SELECT count(*) FILTER (WHERE device IS NULL), "
                         "count(*) FILTER (WHERE gateway IS NULL) FROM topic('readings')")
    check(nulls == [["2", "3"]], f"the oneof's unset member is NULL: {nulls}")
    return sid


def json_clients(broker):
    """2: JSONSerializer/Deserializer and compatibility. Returns the payments produced and
    the first version's id."""
    addr = broker.bootstrap
    registry = SchemaRegistryClient({"url": broker.registry_url})
    ser = JSONSerializer(json.dumps(PAYMENT_SCHEMA), registry, Payment.to_dict)
    ctx = SerializationContext("payments", MessageField.VALUE)
    sent = [payment(i) for i in range(1, 7)]
    values = [ser(p, ctx) for p in sent]
    first = registry.get_latest_version("payments-value")
    sid = first.schema_id
    check(first.version == 1 and first.schema.schema_type == "JSON",
          f"payments-value version 1, JSON: {first.version} {first.schema.schema_type}")
    check(all(v[:5] == b"\x00" + struct.pack(">I", sid) for v in values), "framed with the id")
    check([json.loads(v[5:]) for v in values] == [p.to_dict() for p in sent],
          "the payloads are the JSON documents")
    fetched = http_json(f"{broker.registry_url}/schemas/ids/{sid}")
    check(fetched.get("schemaType") == "JSON" and json.loads(fetched["schema"]) == PAYMENT_SCHEMA,
          f"the schema by id over REST: {fetched}")

    bad = Schema(json.dumps(PAYMENT_BAD), "JSON", [])
    check(registry.test_compatibility("payments-value", bad) is False,
          "amount turned string is incompatible")
    try:
        registry.register_schema("payments-value", bad)
        raise TestFailure("an incompatible JSON schema was registered")
    except SchemaRegistryError as e:
        check(e.http_status_code == 409, f"409 for an incompatible schema: {e}")
    v2 = Schema(json.dumps(PAYMENT_V2), "JSON", [])
    check(registry.test_compatibility("payments-value", v2) is True,
          "an optional property in a closed model is compatible")
    v2_id = registry.register_schema("payments-value", v2)
    latest = registry.get_latest_version("payments-value")
    check(v2_id != sid and latest.version == 2 and latest.schema_id == v2_id,
          f"the compatible schema is version 2 with a new id: {v2_id} {latest.version}")
    check(registry.get_versions("payments-value") == [1, 2], "two versions")

    ser2 = JSONSerializer(json.dumps(PAYMENT_V2), registry, Payment.to_dict)
    sent.append(payment(7, memo="second version"))
    values.append(ser2(sent[-1], ctx))
    check(values[-1][:5] == b"\x00" + struct.pack(">I", v2_id), "v2 messages carry v2's id")
    produce(addr, "payments", values)

    deser = JSONDeserializer(json.dumps(PAYMENT_V2), Payment.from_dict)
    got = [deser(m.value(), ctx) for m in consume_all(addr, "payments", len(sent), "payments")]
    check(got == sent, f"JSONDeserializer reads back what was sent: {got} != {sent}")
    return sent, sid


def main():
    sluice = sys.argv[1]
    check(PSQL is not None, "psql is missing (scripts/setup.sh installs postgresql-client)")
    pb2 = reading_module()
    addr = f"127.0.0.1:{free_port()}"
    broker = Broker(sluice, FAST_GROUPS, kafka_addr=addr, schema_registry="127.0.0.1:0")
    pipelines = os.path.join(broker.tmp, "pipelines")
    os.makedirs(pipelines)
    with open(os.path.join(pipelines, "payments.yml"), "w") as f:
        f.write(PIPELINE.replace("{addr}", addr))
    try:
        # The topics first (serve does not create topics on use by default), then serve with
        # the pipeline on the same data.
        broker.start()
        admin = AdminClient({"bootstrap.servers": addr})
        topics = ["readings", "payments", "payments_out", "payments_dlq"]
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
            f.result(30)
        del admin  # its connection would outlive the broker's first run
        check(broker.stop() == 0, "sluice serve exits 0 after SIGTERM")
        broker.start(extra_args=["--pipelines", pipelines])

        proto_id = protobuf_clients(broker, pb2)
        sent, json_id = json_clients(broker)

        # 2: the json_schema pipeline's rows.
        out = [json.loads(m.value())
               for m in consume_all(addr, "payments_out", len(sent), "rows")]
        expected = [expected_out(p) for p in sent]
        check(sorted(out, key=lambda r: r["id"]) == expected,
              f"the json_schema pipeline's rows: {out} != {expected}")

        # 3: bad input after the good payments (offsets 7 to 11), a good one after them.
        good = json.dumps(payment(20).to_dict()).encode()
        frame = b"\x00" + struct.pack(">I", json_id)
        unknown = 987654
        produce(addr, "payments", [
            b"\x00" + struct.pack(">I", unknown) + good,   # an unknown schema id
            b"\x02" + struct.pack(">I", json_id) + good,   # a wrong magic byte
            frame + good[:-9],                             # a truncated payload
            b"\x00\x00\x01",                               # shorter than the framing
            b"\x00" + struct.pack(">I", proto_id) + good,  # a Protobuf schema's id
            frame + good,
        ])
        letters = [json.loads(m.value())
                   for m in consume_all(addr, "payments_dlq", 5, "dead letters")]
        check([d.get("offset") for d in letters] == [7, 8, 9, 10, 11],
              f"a dead letter for each bad message: {letters}")
        for d in letters:
            check(d.get("phase") == "decode" and d.get("topic") == "payments" and
                  d.get("partition") == 0, f"a dead letter: {d}")
        reasons = [d["error"] for d in letters]
        wanted = [[f"schema id {unknown} is unknown"],
                  ["not in the Confluent framing", "magic byte 2"],
                  ["invalid JSON"],
                  ["not in the Confluent framing", "3 bytes"],
                  [f"schema id {proto_id} is PROTOBUF, not JSON"]]
        for reason, words in zip(reasons, wanted):
            for w in words:
                check(w in reason, f"the dead letter says '{w}': {reason}")
        check(reasons[2] and not any(w in reasons[2] for w in ("framing", "schema id")),
              f"the truncated payload is a JSON error: {reasons[2]}")
        out = [json.loads(m.value())
               for m in consume_all(addr, "payments_out", len(sent) + 1, "rows")]
        check(out[-1] == expected_out(payment(20)),
              f"the good payment after the bad ones reaches the output: {out[-1]}")

        # The pipeline goes on with one produced later, too.
        produce(addr, "payments", [frame + json.dumps(payment(21).to_dict()).encode()])
        out = [json.loads(m.value())
               for m in consume_all(addr, "payments_out", len(sent) + 2, "rows")]
        check(out[-1] == expected_out(payment(21)), f"a later payment: {out[-1]}")
        check(broker.stop() == 0, "sluice serve exits 0 after SIGTERM")
    except Exception:
        print(broker.logs(80), file=sys.stderr)
        raise
    finally:
        broker.cleanup()
    print("schema_python_clients_test: ok")


if __name__ == "__main__":
    try:
        main()
    except TestFailure as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)
