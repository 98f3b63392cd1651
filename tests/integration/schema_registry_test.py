#!/usr/bin/python3
"""The Schema Registry of `sluice serve` (docs/design/0022-schemas.md), through curl.

1. The REST surface: register (Avro, Protobuf with a reference, JSON Schema), the same
   schema gets one id in every subject, versions, schemas by id, lookup, compatibility
   (BACKWARD by default, a subject's own level, verbose messages), referencedby, soft and
   hard deletes, config and mode, and the API's error codes for wrong input (bad JSON,
   invalid schemas, unknown subjects, versions and ids, an invalid level); a form POST (a
   cross-site page) is refused.
2. Durable: the schemas live in the compacted topic `_schemas` (cleanup.policy=compact,
   checked with confluent-kafka's AdminClient); after a SIGKILL and a restart every answer
   is the same, and a hard-deleted schema's id is not given again.
3. With SASL on, the registry asks for HTTP Basic logins of the user store (401 without,
   200 with a user's password).

usage: /usr/bin/python3 schema_registry_test.py path/to/sluice
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sluice_broker import FAST_GROUPS, Broker, TestFailure, check  # noqa: E402

CT = "application/vnd.schemaregistry.v1+json"

USER_V1 = {"type": "record", "name": "User", "namespace": "acme",
           "fields": [{"name": "name", "type": "string"}]}
USER_V2 = {"type": "record", "name": "User", "namespace": "acme",
           "fields": [{"name": "name", "type": "string"},
                      {"name": "age", "type": "int", "default": 0}]}
USER_BAD = {"type": "record", "name": "User", "namespace": "acme",
            "fields": [{"name": "name", "type": "string"},
                       {"name": "email", "type": "string"}]}


class Registry:
    def __init__(self, url, user=None):
        self.url = url
        self.user = user

    def call(self, method, path, body=None, content_type=CT):
        args = ["curl", "-s", "-o", "-", "-w", "\n%{http_code}", "-X", method,
                self.url + path, "-H", f"Accept: {CT}"]
        if self.user:
            args += ["-u", self.user]
        if body is not None:
            args += ["-H", f"Content-Type: {content_type}",
                     "--data-binary", body if isinstance(body, str) else json.dumps(body)]
        out = subprocess.run(args, capture_output=True, text=True, timeout=30, check=True).stdout
        text, _, code = out.rpartition("\n")
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text
        return int(code), parsed

    def ok(self, method, path, body=None):
        code, answer = self.call(method, path, body)
        check(code == 200, f"{method} {path}: {code} {answer}")
        return answer

    def error(self, method, path, body, error_code, status=None):
        code, answer = self.call(method, path, body)
        check(isinstance(answer, dict) and answer.get("error_code") == error_code,
              f"{method} {path}: expected error_code {error_code}, got {code} {answer}")
        check(code == (status or (error_code // 100 if error_code > 999 else error_code)),
              f"{method} {path}: HTTP {code} for error {error_code}")
        return answer


def avro(schema):
    return {"schema": json.dumps(schema)}


def rest_surface(r):
    check(r.ok("GET", "/subjects") == [], "a new registry has no subjects")
    check(r.ok("GET", "/schemas/types") == ["JSON", "PROTOBUF", "AVRO"], "types")
    a = r.ok("POST", "/subjects/users-value/versions", avro(USER_V1))["id"]
    check(r.ok("POST", "/subjects/users-value/versions", avro(USER_V1))["id"] == a,
          "registering a schema again returns its id")
    check(r.ok("POST", "/subjects/copy-value/versions", avro(USER_V1))["id"] == a,
          "one schema, one id in every subject")
    got = r.ok("GET", f"/schemas/ids/{a}")
    check(json.loads(got["schema"])["name"] == "User" and "schemaType" not in got, got)
    code, raw = r.call("GET", f"/schemas/ids/{a}/schema")
    check(code == 200 and json.loads(raw if isinstance(raw, str) else json.dumps(raw))["name"] == "User", raw)
    check(r.ok("GET", f"/schemas/ids/{a}/versions") ==
          [{"subject": "copy-value", "version": 1}, {"subject": "users-value", "version": 1}],
          "the id's versions")
    # Compatibility: BACKWARD by default.
    r.error("POST", "/subjects/users-value/versions", avro(USER_BAD), 409)
    verbose = r.ok("POST", "/compatibility/subjects/users-value/versions/latest?verbose=true",
                   avro(USER_BAD))
    check(verbose["is_compatible"] is False and verbose["messages"], verbose)
    check(r.ok("POST", "/compatibility/subjects/users-value/versions/1", avro(USER_V2)) ==
          {"is_compatible": True}, "v2 reads v1's data")
    b = r.ok("POST", "/subjects/users-value/versions", avro(USER_V2))["id"]
    check(b == a + 1, f"the next id: {b}")
    check(r.ok("GET", "/subjects/users-value/versions") == [1, 2], "two versions")
    latest = r.ok("GET", "/subjects/users-value/versions/latest")
    check(latest["version"] == 2 and latest["id"] == b and latest["subject"] == "users-value", latest)
    found = r.ok("POST", "/subjects/users-value", avro(USER_V1))
    check(found["version"] == 1 and found["id"] == a, f"lookup: {found}")
    # A subject's own level.
    check(r.ok("PUT", "/config/users-value", {"compatibility": "NONE"}) == {"compatibility": "NONE"},
          "PUT config")
    check(r.ok("GET", "/config/users-value") == {"compatibilityLevel": "NONE"}, "GET config")
    check(r.ok("GET", "/config") == {"compatibilityLevel": "BACKWARD"}, "the global level")
    r.ok("POST", "/subjects/users-value/versions", avro(USER_BAD))
    # Protobuf with a reference, and JSON Schema.
    r.ok("POST", "/subjects/money.proto/versions",
         {"schemaType": "PROTOBUF",
          "schema": 'syntax = "proto3";\npackage acme;\nmessage Money { int64 cents = 1; string currency = 2; }\n'})
    order = r.ok("POST", "/subjects/orders-value/versions", {
        "schemaType": "PROTOBUF",
        "schema": 'syntax = "proto3";\npackage acme;\nimport "money.proto";\n'
                  'import "google/protobuf/timestamp.proto";\n'
                  'message Order { string id = 1; acme.Money total = 2; '
                  'google.protobuf.Timestamp at = 3; repeated string tags = 4; }\n',
        "references": [{"name": "money.proto", "subject": "money.proto", "version": 1}]})["id"]
    check(r.ok("GET", "/subjects/money.proto/versions/1/referencedby") == [order], "referencedby")
    got = r.ok("GET", f"/schemas/ids/{order}")
    check(got["schemaType"] == "PROTOBUF" and got["references"][0]["subject"] == "money.proto"
          and "message Order" in got["schema"], got)
    r.error("DELETE", "/subjects/money.proto/versions/1", None, 42206)
    j = r.ok("POST", "/subjects/events-value/versions",
             {"schemaType": "JSON", "schema": json.dumps(
                 {"type": "object", "properties": {"n": {"type": "integer"}}})})["id"]
    check(r.ok("GET", f"/schemas/ids/{j}")["schemaType"] == "JSON", "JSON Schema stored")
    # Wrong input.
    r.error("GET", "/subjects/nope/versions", None, 40401)
    r.error("GET", "/subjects/users-value/versions/99", None, 40402)
    r.error("GET", "/subjects/users-value/versions/x", None, 42202)
    r.error("GET", "/schemas/ids/9999", None, 40403)
    r.error("POST", "/subjects/bad-value/versions", {"schema": "{not json"}, 42201)
    r.error("POST", "/subjects/bad-value/versions",
            {"schemaType": "PROTOBUF", "schema": "message { int32 = ; }"}, 42201)
    r.error("POST", "/subjects/bad-value/versions", "[1, 2", 400)
    r.error("PUT", "/config", {"compatibility": "SOMETIMES"}, 42203)
    r.error("POST", "/subjects/users-value", avro({"type": "enum", "name": "E", "symbols": ["A"]}),
            40403)
    # A cross-site form cannot reach it.
    code, _ = r.call("POST", "/subjects/x/versions", "schema=1",
                     content_type="application/x-www-form-urlencoded")
    check(code == 403, f"a form POST: {code}")
    # Deletes: soft, then permanent.
    r.error("DELETE", "/subjects/copy-value?permanent=true", None, 40405)
    check(r.ok("DELETE", "/subjects/copy-value") == [1], "soft delete")
    r.error("DELETE", "/subjects/copy-value", None, 40404)
    check("copy-value" not in r.ok("GET", "/subjects"), "soft-deleted subjects are hidden")
    check("copy-value" in r.ok("GET", "/subjects?deleted=true"), "unless asked for")
    check(r.ok("DELETE", "/subjects/copy-value?permanent=true") == [1], "hard delete")
    check(r.ok("DELETE", "/subjects/events-value") == [1], "soft delete")
    check(r.ok("DELETE", "/subjects/events-value?permanent=true") == [1], "hard delete")
    r.error("GET", f"/schemas/ids/{j}", None, 40403)
    # Mode.
    check(r.ok("PUT", "/mode/users-value", {"mode": "READONLY"}) == {"mode": "READONLY"}, "mode")
    r.error("POST", "/subjects/users-value/versions", avro(USER_V1), 42205)
    check(r.ok("DELETE", "/mode/users-value") == {"mode": "READONLY"}, "mode removed")
    return j


def snapshot(r):
    paths = ["/subjects", "/subjects?deleted=true", "/schemas", "/config",
             "/config/users-value", "/subjects/users-value/versions",
             "/subjects/orders-value/versions/latest"]
    return {p: r.call("GET", p) for p in paths}


def main():
    sluice = sys.argv[1]
    broker = Broker(sluice, schema_registry="127.0.0.1:0")
    try:
        broker.start()
        r = Registry(broker.registry_url)
        deleted_id = rest_surface(r)
        before = snapshot(r)
        from confluent_kafka.admin import AdminClient, ConfigResource
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        res = ConfigResource(ConfigResource.Type.TOPIC, "_schemas")
        configs = admin.describe_configs([res])[res].result(timeout=30)
        check(configs["cleanup.policy"].value == "compact", "_schemas is compacted")
        broker.kill()
        broker.start()
        r = Registry(broker.registry_url)
        after = snapshot(r)
        for p in before:
            check(before[p] == after[p], f"{p} after a restart: {after[p]} != {before[p]}")
        new = r.ok("POST", "/subjects/fresh-value/versions", avro({"type": "fixed", "name": "F", "size": 3}))["id"]
        check(new > deleted_id, f"a hard-deleted id is not given again: {new} <= {deleted_id}")
        check(broker.stop() == 0, "sluice serve exits 0 after SIGTERM")
    finally:
        broker.cleanup()

    secure = Broker(sluice, schema_registry="127.0.0.1:0", config=FAST_GROUPS + """sasl:
  enabled: true
  mechanisms: [PLAIN]
  users: ["admin:admin-pw", "alice:alice-pw"]
""")
    try:
        secure.start()
        code, answer = Registry(secure.registry_url).call("GET", "/subjects")
        check(code == 401, f"no login: {code} {answer}")
        code, _ = Registry(secure.registry_url, "alice:wrong").call("GET", "/subjects")
        check(code == 401, f"a wrong password: {code}")
        check(Registry(secure.registry_url, "alice:alice-pw").ok("GET", "/subjects") == [],
              "a user of the store")
        Registry(secure.registry_url, "alice:alice-pw").ok("POST", "/subjects/s/versions",
                                                          avro(USER_V1))
        check(secure.stop() == 0, "sluice serve exits 0 after SIGTERM")
    finally:
        secure.cleanup()
    print("schema_registry_test: ok")


if __name__ == "__main__":
    try:
        main()
    except TestFailure as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)
