"""The console's /api/v1 and the `sluice topic|group|cluster` commands against a real
`sluice serve` (docs/design/0026-console.md), with python3-confluent-kafka as the other
client:

1. topics: create (201; a duplicate 409, a name Kafka refuses 400, a bad config 400 and
   no topic made), list with message counts and sizes, describe, add partitions (fewer
   refused), configs set and removed (others kept), unknown 404, delete 204;
2. messages: produced through the API (key, headers, a null value) and by
   confluent-kafka (binary value, headers); read newest and oldest first, from an offset,
   from a time, one partition, a limit, base64; the live stream (server-sent events)
   sees records produced while it is open; the live streams' cap (429);
3. groups: a confluent-kafka member's group listed and described with its lag; a reset
   while it has members is 409 NON_EMPTY_GROUP and changes nothing; once it left, a dry
   run changes nothing, then the reset does; delete;
4. bad input: malformed bodies and parameters (400 naming the field), the browser guard
   (a form POST and a foreign Origin refused), unknown paths (404), the OpenAPI document;
5. pipelines (a second broker with --pipelines DIR): a file checked line by line, its
   handler previewed over the topic's messages, written (then running, its rows in the
   sink's topic), refused when it does not check or names another pipeline (no file
   left), restarted, removed with its file;
6. where Kafka wants logins (SASL, ACLs): without http.auth the API refuses (403
   CONSOLE_NEEDS_LOGIN); with it, each HTTP user is their Kafka principal: a super user
   may do all, alice is refused a topic an ACL denies her (and sees only what she may),
   and may not check or preview a pipeline (it would run SQL as the process); her SQL runs
   as her in the query server; without a login no SQL runs where the query server asks
   passwords (403 SQL_NEEDS_LOGIN);
8. tables and SQL (a third broker with --warehouse and a pipeline writing an Iceberg
   table): the table listed, described (schema, partition spec, snapshots with their Kafka
   offsets) and its files; queries streamed as NDJSON in batches, several statements, values
   JSON cannot carry kept as strings, cut at max_rows, an error with its SQLSTATE and
   position, the sandbox, a cancel by the stream's id; CSV and Parquet downloads (the
   Parquet file read back by DuckDB); what the editor completes; bad input;
7. the terminal: topic create/list/describe --json/alter-config/produce/consume -e -f,
   group describe/reset-offsets (--execute)/delete, cluster info --json; errors exit 1 with
   the broker's reason; a bad -o exits 1; an unreachable cluster fails within its timeout.

usage: /usr/bin/python3 console_api_test.py path/to/sluice
"""

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sluice_broker import FAST_GROUPS, Broker, check, run_test, wait_until  # noqa: E402

from confluent_kafka import Consumer, Producer  # noqa: E402

SLUICE = None


def http_base(broker):
    def found():
        with open(broker.out_path) as f:
            m = re.search(r"^sluice: console on (http://127\.0\.0\.1:\d+)/ ", f.read(), re.M)
        return m.group(1) if m else None
    return wait_until(found, 30, "the console's banner")


def call(base, method, path, body=None, headers=None, raw=None):
    """(status, parsed JSON or text) of one request; a change carries the proof header."""
    h = dict(headers or {})
    data = None
    if raw is not None:
        data = raw
    elif body is not None:
        data = json.dumps(body).encode()
        h.setdefault("Content-Type", "application/json")
    if method not in ("GET", "HEAD"):
        h.setdefault("X-Sluice-Request", "1")
    req = urllib.request.Request(base + path, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text) if text else None
    except ValueError:
        return status, text


def expect(got, status, code=None, what=""):
    s, b = got
    check(s == status, f"{what}: status {s}, not {status}: {b}")
    if code is not None:
        check(isinstance(b, dict) and b.get("error", {}).get("code") == code,
              f"{what}: error code {b}, not {code}")
    return b


def topics_and_configs(base):
    b = expect(call(base, "POST", "/api/v1/topics",
                    {"name": "orders", "partitions": 3, "configs": {"retention.ms": "86400000"}}),
               201, what="create")
    check(b["name"] == "orders" and len(b["partitions"]) == 3, f"created: {b}")
    expect(call(base, "POST", "/api/v1/topics", {"name": "orders"}), 409, "TOPIC_ALREADY_EXISTS",
           "a duplicate")
    expect(call(base, "POST", "/api/v1/topics", {"name": "bad name!"}), 400, what="a bad name")
    expect(call(base, "POST", "/api/v1/topics",
                {"name": "half", "configs": {"retention.ms": "soon"}}), 400, "INVALID_CONFIG",
           "a bad config")
    names = [t["name"] for t in expect(call(base, "GET", "/api/v1/topics"), 200)["topics"]]
    check("half" not in names and "orders" in names, f"nothing half-created: {names}")
    d = expect(call(base, "GET", "/api/v1/topics/orders"), 200, what="describe")
    configs = {c["name"]: c for c in d["configs"]}
    check(configs["retention.ms"]["value"] == "86400000"
          and configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG", f"{configs['retention.ms']}")
    b = expect(call(base, "PUT", "/api/v1/topics/orders/configs",
                    {"set": {"cleanup.policy": "compact,delete"}}), 200, what="set a config")
    configs = {c["name"]: c for c in b["configs"]}
    check(configs["cleanup.policy"]["value"] == "compact,delete", f"{configs['cleanup.policy']}")
    check(configs["retention.ms"]["value"] == "86400000", "the other config kept")
    b = expect(call(base, "PUT", "/api/v1/topics/orders/configs", {"delete": ["cleanup.policy"]}),
               200, what="remove a config")
    configs = {c["name"]: c for c in b["configs"]}
    check(configs["cleanup.policy"]["source"] == "DEFAULT_CONFIG", f"{configs['cleanup.policy']}")
    expect(call(base, "PUT", "/api/v1/topics/orders/configs", {"set": {"retention.ms": "x"}}), 400,
           "INVALID_CONFIG", "a bad value")
    b = expect(call(base, "POST", "/api/v1/topics/orders/partitions", {"count": 4}), 200)
    check(len(b["partitions"]) == 4, f"4 partitions: {b['partitions']}")
    expect(call(base, "POST", "/api/v1/topics/orders/partitions", {"count": 2}), 400,
           "INVALID_PARTITIONS", "fewer partitions")
    expect(call(base, "GET", "/api/v1/topics/nope"), 404, "UNKNOWN_TOPIC_OR_PART")
    expect(call(base, "POST", "/api/v1/topics", {"name": "doomed"}), 201)
    expect(call(base, "DELETE", "/api/v1/topics/doomed"), 204)
    wait_until(lambda: call(base, "GET", "/api/v1/topics/doomed")[0] == 404, 30, "doomed gone")
    print("topics: created, refused, configured, extended, deleted")


def messages(base, broker):
    ts_before = int(time.time() * 1000)
    for i in range(6):
        b = expect(call(base, "POST", "/api/v1/topics/orders/messages",
                        {"partition": i % 2, "key": f"k{i}", "value": json.dumps({"n": i}),
                         "headers": {"source": "api", "empty": None}}), 201, what="produce")
        check(b["partition"] == i % 2, f"produced: {b}")
    expect(call(base, "POST", "/api/v1/topics/orders/messages", {"partition": 2, "key": "gone"}),
           201, what="a null value")
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce("orders", value=b"\x00\xff\x01", key=b"bin", partition=3, headers=[("h", b"\xfe")])
    p.flush(30)
    page = expect(call(base, "GET", "/api/v1/topics/orders/messages?limit=100"), 200)
    msgs = page["messages"]
    check(len(msgs) == 8, f"8 messages: {msgs}")
    stamps = [m["timestamp"] for m in msgs]
    check(stamps == sorted(stamps, reverse=True), "newest first")
    by_key = {m["key"]: m for m in msgs}
    check(by_key["k3"]["value_encoding"] == "json" and json.loads(by_key["k3"]["value"]) == {"n": 3},
          f"{by_key['k3']}")
    check({h["key"]: h["value"] for h in by_key["k3"]["headers"]} == {"source": "api", "empty": None},
          f"headers: {by_key['k3']['headers']}")
    check(by_key["gone"]["value"] is None, f"null value: {by_key['gone']}")
    check(by_key["bin"]["value_encoding"] == "hex" and by_key["bin"]["value"] == "00ff01",
          f"binary: {by_key['bin']}")
    b64 = expect(call(base, "GET", "/api/v1/topics/orders/messages?partition=3&binary=base64"), 200)
    check(b64["messages"][0]["value"] == "AP8B" and b64["messages"][0]["headers"][0]["value"] == "/g==",
          f"base64: {b64}")
    old = expect(call(base, "GET", "/api/v1/topics/orders/messages?partition=0&start=oldest"
                      "&order=oldest&limit=2"), 200)
    check([m["offset"] for m in old["messages"]] == [0, 1] and old["next"] == {"0": 2},
          f"oldest two of partition 0: {old}")
    at = expect(call(base, "GET", "/api/v1/topics/orders/messages?partition=1&offset=2&order=oldest"),
                200)
    check([m["key"] for m in at["messages"]] == ["k5"], f"from offset 2: {at}")
    later = expect(call(base, "GET", f"/api/v1/topics/orders/messages?timestamp={ts_before}"
                        "&order=oldest&limit=1000"), 200)
    check(len(later["messages"]) == 8, f"from a time: {len(later['messages'])}")
    future = expect(call(base, "GET", f"/api/v1/topics/orders/messages?timestamp={ts_before + 10**9}"),
                    200)
    check(future["messages"] == [], f"from the future: {future}")
    expect(call(base, "GET", "/api/v1/topics/orders/messages?partition=9"), 404,
           "UNKNOWN_TOPIC_OR_PART", "a partition past the count")
    expect(call(base, "GET", "/api/v1/topics/nope/messages"), 404, "UNKNOWN_TOPIC_OR_PART")
    # Reads create nothing, though this broker creates topics a Metadata request names.
    expect(call(base, "GET", "/api/v1/topics/typo-topic"), 404, "UNKNOWN_TOPIC_OR_PART")
    expect(call(base, "POST", "/api/v1/topics/typo-topic/messages", {"value": "x"}), 404,
           "UNKNOWN_TOPIC_OR_PART", "a produce to a missing topic")
    names = [t["name"] for t in expect(call(base, "GET", "/api/v1/topics"), 200)["topics"]]
    check("typo-topic" not in names, f"a read created the topic: {names}")
    lst = {t["name"]: t for t in expect(call(base, "GET", "/api/v1/topics"), 200)["topics"]}
    check(lst["orders"]["messages"] == 8 and lst["orders"]["size_bytes"] > 0, f"{lst['orders']}")
    # Page by page from the oldest, each page from `next`: every record once.
    seen_pages = set()
    nxt = None
    for _ in range(20):
        if nxt is None:
            page = expect(call(base, "GET", "/api/v1/topics/orders/messages?start=oldest&limit=3"), 200)
        else:
            # One partition at a time is how a page continues; all of them, from each next.
            page = {"messages": [], "next": {}}
            for p_, o_ in nxt.items():
                part = expect(call(base, "GET", f"/api/v1/topics/orders/messages?partition={p_}"
                                   f"&offset={o_}&limit=3"), 200)
                page["messages"] += part["messages"]
                page["next"].update(part["next"])
        for m in page["messages"]:
            check((m["partition"], m["offset"]) not in seen_pages, f"read twice: {m}")
            seen_pages.add((m["partition"], m["offset"]))
        if not page["messages"]:
            break
        nxt = page["next"]
    check(len(seen_pages) == 8, f"paging read {len(seen_pages)} of 8")
    # An open transaction's records are there to see (read_uncommitted), and the high
    # watermark counts them.
    tp = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "console-open"})
    tp.init_transactions(30)
    tp.begin_transaction()
    tp.produce("orders", value=b"uncommitted", partition=3)
    tp.flush(30)
    d = expect(call(base, "GET", "/api/v1/topics/orders"), 200)
    p3 = [p_ for p_ in d["partitions"] if p_["partition"] == 3][0]
    check(p3["high"] == 2, f"the high watermark counts the open transaction: {p3}")
    page = expect(call(base, "GET", "/api/v1/topics/orders/messages?partition=3"), 200)
    check(any(m["value"] == "uncommitted" for m in page["messages"]), f"uncommitted shown: {page}")
    tp.abort_transaction(30)
    print("messages: produced, browsed by position, time, partition and encoding")

    # The live stream: opened, then records produced show up in its events.
    events = []
    opened = threading.Event()

    def follow():
        req = urllib.request.Request(base + "/api/v1/topics/orders/messages/live")
        with urllib.request.urlopen(req, timeout=30) as r:
            check(r.headers["Content-Type"].startswith("text/event-stream"), "an event stream")
            opened.set()
            for line in r:
                line = line.decode().rstrip("\n")
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
                    if sum(len(e["messages"]) for e in events) >= 20:
                        return

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    check(opened.wait(30), "the live stream opened")
    time.sleep(1)  # its consumer is assigned at the end offsets
    for i in range(20):
        p.produce("orders", value=f"live{i}".encode(), partition=i % 4)
    p.flush(30)
    t.join(30)
    seen = sorted(m["value"] for e in events for m in e["messages"])
    check(seen == sorted(f"live{i}" for i in range(20)), f"the live stream saw {seen}")

    # The cap: kMaxLiveStreams at once, the next is 429.
    # (The stream above counts until the server writes to it again and finds it closed: a
    # keep-alive every 3 s.)
    streams = []

    def open_stream():
        try:
            streams.append(urllib.request.urlopen(base + "/api/v1/topics/orders/messages/live",
                                                  timeout=30))
        except urllib.error.HTTPError as e:
            check(e.code == 429, f"opening a stream: {e.code}")
        return len(streams) == 4

    wait_until(open_stream, 30, "four live streams", interval=0.5)
    expect(call(base, "GET", "/api/v1/topics/orders/messages/live"), 429, "TOO_MANY_STREAMS")
    for s in streams:
        s.close()
    print("live: followed, capped")


def committed(group):
    """A group's committed offsets (the partitions its members hold without one are listed
    too, with null)."""
    return {(o["topic"], o["partition"]): o["offset"] for o in group["offsets"]
            if o["offset"] is not None}


def groups(base, broker):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "readers",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["orders"])
    got = 0
    deadline = time.time() + 60
    while got < 10 and time.time() < deadline:
        m = c.poll(1)
        if m is not None and not m.error():
            got += 1
    c.commit(asynchronous=False)
    g = expect(call(base, "GET", "/api/v1/groups/readers"), 200)
    check(g["state"] == "Stable" and len(g["members"]) == 1, f"a member: {g}")
    check(g["members"][0]["assignments"][0]["topic"] == "orders", f"assignment: {g['members']}")
    before = committed(g)
    lst = expect(call(base, "GET", "/api/v1/groups"), 200)["groups"]
    check(any(x["group_id"] == "readers" and x["members"] == 1 for x in lst), f"listed: {lst}")
    expect(call(base, "POST", "/api/v1/groups/readers/reset-offsets",
                {"topic": "orders", "to": "earliest"}), 409, "NON_EMPTY_GROUP", "a reset with members")
    expect(call(base, "DELETE", "/api/v1/groups/readers"), 409, "NON_EMPTY_GROUP", "a delete")
    g = expect(call(base, "GET", "/api/v1/groups/readers"), 200)
    check(committed(g) == before,
          "nothing changed by the refused reset")
    c.close()
    wait_until(lambda: call(base, "GET", "/api/v1/groups/readers")[1]["state"] == "Empty", 30,
               "the group empty")
    dry = expect(call(base, "POST", "/api/v1/groups/readers/reset-offsets",
                      {"topic": "orders", "to": "earliest", "dry_run": True}), 200)
    check(not dry["executed"] and all(o["offset"] == 0 for o in dry["offsets"]), f"dry run: {dry}")
    g = expect(call(base, "GET", "/api/v1/groups/readers"), 200)
    check(committed(g) == before,
          "nothing changed by the dry run")
    done = expect(call(base, "POST", "/api/v1/groups/readers/reset-offsets",
                       {"topic": "orders", "partitions": [0], "to": "offset", "offset": 1}), 200)
    check(done["executed"] and done["offsets"] == [
        {"topic": "orders", "partition": 0, "previous": before.get(("orders", 0)), "offset": 1}],
        f"reset: {done}")
    g = expect(call(base, "GET", "/api/v1/groups/readers"), 200)
    p0 = [o for o in g["offsets"] if o["partition"] == 0][0]
    check(p0["offset"] == 1 and p0["lag"] == p0["high"] - 1, f"partition 0 after the reset: {p0}")
    expect(call(base, "DELETE", "/api/v1/groups/readers"), 204)
    expect(call(base, "GET", "/api/v1/groups/readers"), 404, "GROUP_ID_NOT_FOUND")
    print("groups: described, refused with members, reset after, deleted")


def bad_input(base):
    for body, field in ((None, "JSON object"), ("[", "not JSON"), ("{\"name\": 1}", "name"),
                        ("{\"name\": \"t\", \"partitions\": 0}", "partitions"),
                        ("{\"name\": \"t\", \"surprise\": 1}", "surprise")):
        s, b = call(base, "POST", "/api/v1/topics", raw=(body or "").encode(),
                    headers={"Content-Type": "application/json"})
        check(s == 400 and field in b["error"]["message"], f"{body!r}: {s} {b}")
    expect(call(base, "GET", "/api/v1/topics/orders/messages?limit=0"), 400, "INVALID_REQUEST")
    expect(call(base, "GET", "/api/v1/topics/orders/messages?offset=1&timestamp=1"), 400)
    expect(call(base, "GET", "/api/v1/nothing"), 404, "NOT_FOUND")
    expect(call(base, "PUT", "/api/v1/topics"), 405)
    # The browser guard: a form POST (no proof) and another site's page.
    req = urllib.request.Request(base + "/api/v1/topics", data=b"name=x", method="POST",
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    try:
        urllib.request.urlopen(req, timeout=30)
        check(False, "a form POST was served")
    except urllib.error.HTTPError as e:
        check(e.code == 403, f"a form POST: {e.code}")
    s, _ = call(base, "GET", "/api/v1/topics", headers={"Origin": "http://evil.example"})
    check(s == 403, f"a foreign origin: {s}")
    s, doc = call(base, "GET", "/api/v1/openapi.json")
    check(s == 200 and doc["openapi"].startswith("3.") and "/api/v1/topics/{topic}/messages" in doc["paths"],
          "the OpenAPI document")
    ov = expect(call(base, "GET", "/api/v1/overview"), 200)
    check(ov["topics"] >= 1 and ov["messages_in_total"] >= 8 and ov["memory_rss_bytes"] > 0
          and ov["disk_bytes"] > 0 and ov["cluster"]["brokers"], f"overview: {ov}")
    print("bad input: refused with the field named; guard, 404, 405, OpenAPI, overview")


def sluice(broker, *args, stdin=None, timeout=60):
    env = dict(os.environ, SLUICE_BROKERS=broker.bootstrap)
    return subprocess.run([SLUICE, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env)


def terminal(broker):
    r = sluice(broker, "topic", "create", "cli-t", "-p", "2", "-c", "retention.ms=60000")
    check(r.returncode == 0 and "OK" in r.stdout, f"topic create: {r}")
    r = sluice(broker, "topic", "create", "cli-t")
    check(r.returncode == 1 and "already exists" in r.stdout, f"a duplicate: {r}")
    r = sluice(broker, "topic", "list")
    check(r.returncode == 0 and re.search(r"^cli-t\s+2\s+1\s+0$", r.stdout, re.M), f"list: {r.stdout}")
    r = sluice(broker, "topic", "alter-config", "cli-t", "--set", "retention.ms=120000")
    check(r.returncode == 0, f"alter-config: {r}")
    r = sluice(broker, "topic", "describe", "cli-t", "--json")
    d = json.loads(r.stdout)
    check(len(d["partitions"]) == 2 and {c["name"]: c["value"] for c in d["configs"]}["retention.ms"]
          == "120000", f"describe --json: {d}")
    r = sluice(broker, "topic", "produce", "cli-t", "-K", ":", "-H", "via=cli", "-p", "1",
               stdin="a:1\nb:2\nc:3\n")
    check(r.returncode == 0 and r.stdout.count("Produced to partition 1") == 3, f"produce: {r}")
    r = sluice(broker, "topic", "consume", "cli-t", "-e", "-f", "%p %o %k=%v %h\\n")
    check(r.returncode == 0 and r.stdout == "1 0 a=1 via=cli\n1 1 b=2 via=cli\n1 2 c=3 via=cli\n",
          f"consume -e -f: {r}")
    r = sluice(broker, "topic", "consume", "cli-t", "-o", "-1", "-e")
    check(r.returncode == 0 and json.loads(r.stdout)["value"] == "3", f"consume -o -1: {r}")
    r = sluice(broker, "topic", "consume", "cli-t", "-o", "sideways")
    check(r.returncode == 1 and "-o 'sideways'" in r.stderr, f"a bad -o: {r}")
    r = sluice(broker, "topic", "consume", "cli-t", "-g", "cli-g", "-n", "3", "-f", "%v\\n")
    check(r.returncode == 0 and sorted(r.stdout.split()) == ["1", "2", "3"], f"consume -g: {r}")
    r = sluice(broker, "group", "describe", "cli-g", "--json")
    d = json.loads(r.stdout)
    check(d["members"] == 0 and d["total_lag"] == 0, f"group describe: {d}")
    r = sluice(broker, "group", "reset-offsets", "cli-g", "--topic", "cli-t:1", "--to-earliest")
    check(r.returncode == 0 and "preview" in r.stdout, f"a preview: {r}")
    r = sluice(broker, "group", "describe", "cli-g", "--json")
    check(json.loads(r.stdout)["total_lag"] == 0, "the preview changed nothing")
    r = sluice(broker, "group", "reset-offsets", "cli-g", "--topic", "cli-t:1", "--to-earliest",
               "--execute", "--json")
    check(r.returncode == 0 and json.loads(r.stdout)["offsets"][0]["offset"] == 0, f"reset: {r}")
    r = sluice(broker, "group", "describe", "cli-g", "--json")
    check(json.loads(r.stdout)["total_lag"] == 3, f"lag after the reset: {r.stdout}")
    r = sluice(broker, "group", "delete", "cli-g")
    check(r.returncode == 0, f"group delete: {r}")
    r = sluice(broker, "group", "describe", "cli-g")
    check(r.returncode == 1 and "GROUP_ID_NOT_FOUND" in r.stderr, f"a deleted group: {r}")
    r = sluice(broker, "cluster", "info", "--json")
    info = json.loads(r.stdout)
    check(info["brokers"][0]["port"] == broker.port and info["controller_id"] == 1, f"cluster: {info}")
    r = sluice(broker, "topic", "delete", "cli-t", "nope")
    check(r.returncode == 1 and re.search(r"^cli-t\s+OK$", r.stdout, re.M), f"delete: {r}")
    start = time.time()
    r = sluice(broker, "topic", "list", "--brokers", "127.0.0.1:1", "--timeout-ms", "1500")
    check(r.returncode == 1 and r.stderr.startswith("sluice topic list:"), f"unreachable: {r}")
    print(f"terminal: topic and group commands; unreachable fails in {time.time() - start:.1f} s")


def body(broker):
    base = http_base(broker)
    topics_and_configs(base)
    messages(base, broker)
    groups(base, broker)
    bad_input(base)
    terminal(broker)


PIPELINE = """pipeline:
  name: {name}
  batch_size: 100
  flush_interval_seconds: 1
  source:
    type: kafka
    kafka:
      brokers: [{bootstrap}]
      group_id: cities
      auto_offset_reset: earliest
      topics: [visits]
  handler:
    type: handlers.InferredMemBatch
    sql: SELECT city, count(*) AS visits FROM batch GROUP BY city ORDER BY city
  sink:
    type: kafka
    kafka:
      brokers: [{bootstrap}]
      topic: city-visits
"""


def pipelines(broker, folder):
    base = http_base(broker)
    listed = expect(call(base, "GET", "/api/v1/pipelines"), 200)
    check(listed["pipelines"] == [] and listed["dir"] == folder, f"an empty folder: {listed}")
    yaml = PIPELINE.format(name="cities", bootstrap=broker.bootstrap)
    v = expect(call(base, "POST", "/api/v1/pipelines/validate", {"yaml": yaml}), 200)
    check(v["valid"] and v["name"] == "cities" and v["topics"] == ["visits"], f"validate: {v}")
    bad = yaml.replace("batch_size: 100", "batch_size: many")
    v = expect(call(base, "POST", "/api/v1/pipelines/validate", {"yaml": bad}), 200)
    check(not v["valid"] and any(p["line"] == 3 for p in v["problems"]), f"a problem on line 3: {v}")
    expect(call(base, "POST", "/api/v1/topics", {"name": "visits", "partitions": 2}), 201)
    expect(call(base, "POST", "/api/v1/topics", {"name": "city-visits"}), 201)
    for i, city in enumerate(["Oslo", "Lima", "Oslo", "Pune", "Oslo", "Lima"]):
        expect(call(base, "POST", "/api/v1/topics/visits/messages",
                    {"partition": i % 2, "value": json.dumps({"city": city, "n": i})}), 201)
    pv = expect(call(base, "POST", "/api/v1/pipelines/preview", {"yaml": yaml}), 200)
    check(pv["messages"] == 6 and pv["rows"] == [{"city": "Lima", "visits": 2},
                                                 {"city": "Oslo", "visits": 3},
                                                 {"city": "Pune", "visits": 1}],
          f"preview: {pv}")
    expect(call(base, "POST", "/api/v1/pipelines/preview", {"yaml": bad}), 400, "INVALID_PIPELINE")
    # A preview is shut in: its SQL reads no file, its commands write none.
    snoop = yaml.replace("SELECT city, count(*) AS visits FROM batch GROUP BY city ORDER BY city",
                         "SELECT * FROM read_csv('/etc/passwd', header = false)")
    r = expect(call(base, "POST", "/api/v1/pipelines/preview", {"yaml": snoop}), 400, "PREVIEW_FAILED")
    check("root" not in json.dumps(r), f"a preview read /etc/passwd: {r}")
    written = os.path.join(folder, "..", "written-by-preview.csv")
    writer = yaml.replace("pipeline:\n", f"commands:\n  - name: w\n    sql: COPY (SELECT 1 AS x) TO '{written}'\npipeline:\n", 1)
    v = expect(call(base, "POST", "/api/v1/pipelines/validate", {"yaml": writer}), 200)
    check(v["valid"], f"the writer checks: {v}")
    expect(call(base, "POST", "/api/v1/pipelines/preview", {"yaml": writer}), 400, "PREVIEW_FAILED")
    check(not os.path.exists(written), "a preview's command wrote a file")
    # Refused: a file that does not check, a name that is not the file's; nothing left.
    expect(call(base, "PUT", "/api/v1/pipelines/cities", {"yaml": bad}), 400, "INVALID_PIPELINE")
    expect(call(base, "PUT", "/api/v1/pipelines/towns", {"yaml": yaml}), 400, "INVALID_PIPELINE_NAME")
    expect(call(base, "PUT", "/api/v1/pipelines/..%2Fescape", {"yaml": yaml}), 400,
           "INVALID_PIPELINE_NAME")
    check(os.listdir(folder) == [], f"no file left: {os.listdir(folder)}")
    made = expect(call(base, "PUT", "/api/v1/pipelines/cities", {"yaml": yaml}), 201)
    check(made["state"] == "running" and made["file"] == os.path.join(folder, "cities.yaml"),
          f"made: {made}")
    got = expect(call(base, "GET", "/api/v1/pipelines/cities"), 200)
    check(got["yaml"] == yaml, "the file holds what was sent")
    mode = os.stat(os.path.join(folder, "cities.yaml")).st_mode & 0o777
    check(mode == 0o600, f"a new pipeline file is private: {oct(mode)}")

    def counted():
        page = call(base, "GET", "/api/v1/topics/city-visits/messages?limit=100")[1]
        if not isinstance(page, dict) or "messages" not in page:
            return None
        rows = [json.loads(m["value"]) for m in page["messages"]]
        return rows if sum(r["visits"] for r in rows) >= 6 else None
    rows = wait_until(counted, 60, "the pipeline's rows in city-visits")
    totals = {}
    for r in rows:
        totals[r["city"]] = totals.get(r["city"], 0) + r["visits"]
    check(totals == {"Lima": 2, "Oslo": 3, "Pune": 1}, f"what the pipeline wrote: {rows}")
    listed = expect(call(base, "GET", "/api/v1/pipelines"), 200)["pipelines"]
    check([p["name"] for p in listed] == ["cities"] and listed[0]["messages_in"] >= 6, f"{listed}")
    ov = expect(call(base, "GET", "/api/v1/overview"), 200)
    check(ov["pipelines"] == {"running": 1, "total": 1}, f"overview: {ov['pipelines']}")
    # A change: written over the same file and restarted with it.
    changed = yaml.replace("ORDER BY city", "ORDER BY visits DESC")
    expect(call(base, "PUT", "/api/v1/pipelines/cities", {"yaml": changed}), 200)
    check(open(os.path.join(folder, "cities.yaml")).read() == changed, "the file changed")
    check(os.listdir(folder) == ["cities.yaml"], f"no temporary file left: {os.listdir(folder)}")
    expect(call(base, "POST", "/api/v1/pipelines/cities/restart"), 200)
    expect(call(base, "POST", "/api/v1/pipelines/nope/restart"), 404, "UNKNOWN_PIPELINE")
    activity(base, broker, folder, changed)
    expect(call(base, "DELETE", "/api/v1/pipelines/cities"), 204)
    check(os.listdir(folder) == [], "the file removed with the pipeline")
    check(expect(call(base, "GET", "/api/v1/pipelines"), 200)["pipelines"] == [], "none left")
    print("pipelines: checked, previewed, written, run, changed, removed")


def activity(base, broker, folder, yaml):
    """The pipeline's history and recent failures, its group's lag history, and a stop
    that keeps its file (renamed) and a start from it."""
    dlq = yaml.replace("  sink:\n", "  on_error:\n    policy: DLQ\n    dlq:\n      type: kafka\n"
                       f"      kafka:\n        brokers: [{broker.bootstrap}]\n"
                       "        topic: visits-dlq\n  sink:\n", 1)
    expect(call(base, "POST", "/api/v1/topics", {"name": "visits-dlq"}), 201)
    expect(call(base, "PUT", "/api/v1/pipelines/cities", {"yaml": dlq}), 200)
    lag = expect(call(base, "GET", "/api/v1/groups/cities/history"), 200)
    check(lag["group"] == "cities" and lag["step_ms"] == 2000 and len(lag["time_ms"]) >= 1
          and len(lag["total_lag"]) == len(lag["time_ms"]), f"the group's lag history: {lag}")
    expect(call(base, "GET", "/api/v1/groups/nobody-here/history"), 404, "GROUP_ID_NOT_FOUND")
    # Rates are counted from a sample to the next: the messages come after the first point.
    wait_until(lambda: expect(call(base, "GET", "/api/v1/pipelines/cities/history"),
                              200)["time_ms"], 30, "the pipeline's first sample")
    for i in range(20):
        expect(call(base, "POST", "/api/v1/topics/visits/messages",
                    {"partition": i % 2, "value": json.dumps({"city": "Rome", "n": i})}), 201)
    expect(call(base, "POST", "/api/v1/topics/visits/messages",
                {"partition": 0, "value": "not json {"}), 201)

    last = {}

    def failed():
        h = expect(call(base, "GET", "/api/v1/pipelines/cities/history"), 200)
        last["history"] = h
        rates = [v for v in h["series"]["messages_in_per_sec"] if v]
        return h if h["dead_letters"] and rates else None
    try:
        h = wait_until(failed, 60, "a dead letter and a rate in the pipeline's history")
    except Exception:
        print(f"the last history: {json.dumps(last.get('history'))}")
        print(f"the pipeline: {call(base, 'GET', '/api/v1/pipelines/cities')}")
        raise
    check(h["step_ms"] == 2000 and set(h["series"]) == {
        "messages_in_per_sec", "rows_out_per_sec", "bytes_in_per_sec", "errors_per_sec",
        "batch_seconds_mean", "batch_seconds_p99", "flush_seconds_mean", "flush_seconds_p99",
        "consumer_lag"} and all(len(v) == len(h["time_ms"]) for v in h["series"].values()),
        f"the series: {h}")
    letter = h["dead_letters"][0]
    check(letter["phase"] == "decode" and letter["dead_lettered"] and letter["topic"] == "visits"
          and letter["partition"] == 0 and letter["value"]["text"] == "not json {"
          and letter["error"], f"the dead letter: {letter}")
    check(h["errors_total"]["decode"] >= 1 and h["errors_total"]["sink"] == 0,
          f"errors by phase: {h['errors_total']}")
    lag = expect(call(base, "GET", "/api/v1/groups/cities/history"), 200)
    check({(p["topic"], p["partition"]) for p in lag["partitions"]} == {("visits", 0), ("visits", 1)},
          f"lag per partition: {lag}")
    expect(call(base, "GET", "/api/v1/pipelines/nope/history"), 404, "UNKNOWN_PIPELINE")

    # Stopped: kept, its file renamed; a change to it is kept and does not start it.
    expect(call(base, "GET", "/api/v1/pipelines/cities/stop"), 405)
    st = expect(call(base, "POST", "/api/v1/pipelines/cities/stop"), 200)
    check(st["state"] == "stopped" and st["stopped"] and st["file"].endswith("cities.yaml.stopped"),
          f"stopped: {st}")
    check(os.listdir(folder) == ["cities.yaml.stopped"], f"the folder: {os.listdir(folder)}")
    lst = expect(call(base, "GET", "/api/v1/pipelines"), 200)
    check(lst["memory_in_use_bytes"] == 0 and lst["pipelines"][0]["state"] == "stopped",
          f"a stopped pipeline holds no memory: {lst}")
    expect(call(base, "POST", "/api/v1/pipelines/cities/stop"), 200)
    expect(call(base, "PUT", "/api/v1/pipelines/cities", {"yaml": yaml}), 200)
    check(open(os.path.join(folder, "cities.yaml.stopped")).read() == yaml, "the stopped file changed")
    check(expect(call(base, "GET", "/api/v1/pipelines/cities"), 200)["state"] == "stopped",
          "still stopped after a change")
    # Stopped, it reads nothing: what comes meanwhile waits in the group's lag.
    for i in range(3):
        expect(call(base, "POST", "/api/v1/topics/visits/messages",
                    {"partition": 1, "value": json.dumps({"city": "Kyiv", "n": i})}), 201)
    time.sleep(3)

    def lag():
        g = expect(call(base, "GET", "/api/v1/groups/cities"), 200)
        return sum(o["lag"] or 0 for o in g["offsets"])
    check(lag() == 3, f"the stopped pipeline's lag: {lag()}")
    started = expect(call(base, "POST", "/api/v1/pipelines/cities/start"), 200)
    check(started["state"] == "running" and not started["stopped"], f"started: {started}")
    wait_until(lambda: lag() == 0, 60, "the started pipeline catching up")
    check(os.listdir(folder) == ["cities.yaml"], f"the folder: {os.listdir(folder)}")
    expect(call(base, "POST", "/api/v1/pipelines/nope/start"), 404, "UNKNOWN_PIPELINE")
    print("pipelines: history, dead letters, lag history, stopped and started")


def broker_test(name, body, *folders, registry="off"):
    """Runs body(broker, *paths) on a broker of its own started with `folders`: (flag, name)
    pairs of directories made under its tmp, passed as flag PATH."""
    broker = Broker(SLUICE, FAST_GROUPS, schema_registry=registry)
    paths = []
    for flag, folder in folders:
        path = os.path.join(broker.tmp, folder)
        os.makedirs(path, exist_ok=True)
        broker.extra_args += [flag, path]
        paths.append(path)
    try:
        broker.start()
        body(broker, *paths)
        check(broker.stop() == 0, "sluice serve stopped with 0")
        print(f"PASS: console_api_test ({name})")
        return 0
    except Exception as e:  # the verdict
        import traceback
        traceback.print_exc()
        print(f"FAIL: console_api_test ({name}): {e}")
        print(broker.logs())
        return 1
    finally:
        broker.cleanup()


def zigzag(v):
    z = (v << 1) ^ (v >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def register(broker, subject, schema, schema_type=None):
    body = {"schema": schema}
    if schema_type:
        body["schemaType"] = schema_type
    req = urllib.request.Request(f"{broker.registry_url}/subjects/{subject}/versions",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())["id"]


def schemas(broker):
    """Values in the Schema Registry's framing are shown decoded with their writer schema;
    framed bytes no schema decodes are shown as bytes, with why."""
    base = http_base(broker)
    avro_id = register(broker, "framed-value", json.dumps({
        "type": "record", "name": "Visit",
        "fields": [{"name": "city", "type": "string"}, {"name": "n", "type": "long"}]}))
    proto_id = register(broker, "framed-proto-value",
                        'syntax = "proto3";\nmessage Visit {\n  string city = 1;\n  int64 n = 2;\n}\n',
                        "PROTOBUF")
    expect(call(base, "POST", "/api/v1/topics", {"name": "framed", "partitions": 1}), 201)
    frame = b"\x00" + avro_id.to_bytes(4, "big")
    avro = frame + zigzag(4) + b"Oslo" + zigzag(7)
    proto = b"\x00" + proto_id.to_bytes(4, "big") + b"\x00" + b"\x0a\x04Lima" + b"\x10\x03"
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for value in (avro, proto, frame + zigzag(4) + b"Os"):
        p.produce("framed", value=value, partition=0)
    p.flush(30)
    msgs = expect(call(base, "GET", "/api/v1/topics/framed/messages?order=oldest&start=oldest"),
                  200)["messages"]
    check(len(msgs) == 3, f"three messages: {msgs}")
    a, b, bad = msgs
    check(a["value_encoding"] == "json" and json.loads(a["value"]) == {"city": "Oslo", "n": 7}
          and a["value_schema"] == {"format": "avro", "id": avro_id}, f"the Avro value: {a}")
    check(b["value_encoding"] == "json" and json.loads(b["value"]) == {"city": "Lima", "n": 3}
          and b["value_schema"]["format"] == "protobuf" and b["value_schema"]["message"] == "Visit",
          f"the Protobuf value: {b}")
    check(bad["value_encoding"] == "hex" and "value_schema" not in bad
          and bad["value_schema_error"], f"a framed value its schema does not decode: {bad}")
    print("schemas: Avro and Protobuf values decoded, a broken one shown as bytes")


def pipelines_test():
    return broker_test("pipelines", pipelines, ("--pipelines", "pipelines"))


LAKE_PIPELINE = """commands:
  - name: visits table
    sql: CREATE TABLE visits (city VARCHAR, ms BIGINT)
pipeline:
  name: lake-visits
  batch_size: 100
  flush_interval_seconds: 1
  source:
    type: kafka
    kafka:
      brokers: [{bootstrap}]
      group_id: lake-visits
      auto_offset_reset: earliest
      topics: [visits]
  handler:
    type: handlers.StructuredBatch
    table: visits
    sql: SELECT city, count(*) AS visits, max(ms) AS last_ms FROM visits GROUP BY city
  sink:
    type: iceberg
    iceberg:
      catalog_name: sluice
      table_name: web.visits
      warehouse: {warehouse}
      commit_interval_seconds: 1
      partition_by: [city]
"""


def sql_stream(base, sql, headers=None, **extra):
    """The NDJSON lines of POST /api/v1/sql, parsed, and the HTTP status."""
    status, body = call(base, "POST", "/api/v1/sql", {"sql": sql, **extra}, headers)
    if status != 200:
        return status, body
    return status, [json.loads(line) for line in body.splitlines() if line]


def lines_of(lines, kind):
    return [line[kind] for line in lines if kind in line]


def lake_and_sql(broker, folder, warehouse):
    base = http_base(broker)
    expect(call(base, "POST", "/api/v1/topics", {"name": "visits", "partitions": 2}), 201)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i, city in enumerate(["Oslo", "Lima", "Oslo", "Pune", "Oslo", "Lima"]):
        p.produce("visits", value=json.dumps({"city": city, "ms": 1000 + i}).encode(),
                  partition=i % 2)
    check(p.flush(30) == 0, "produced")
    yaml = LAKE_PIPELINE.format(bootstrap=broker.bootstrap, warehouse=warehouse)
    expect(call(base, "PUT", "/api/v1/pipelines/lake-visits", {"yaml": yaml}), 201)

    # Tables: the pipeline's table once it committed, with its Kafka offsets.
    def listed():
        t = expect(call(base, "GET", "/api/v1/tables"), 200)["tables"]
        return t if t and t[0]["records"] >= 3 else None
    tables = wait_until(listed, 60, "the pipeline's table in /api/v1/tables")
    check(expect(call(base, "GET", "/api/v1/tables"), 200)["warehouse"] == warehouse,
          "the warehouse a sink here writes to")
    t = tables[0]
    check(t["namespace"] == ["web"] and t["name"] == "visits" and t["sql_name"] ==
          'lake."web"."visits"' and t["data_files"] >= 3 and t["size_bytes"] > 0, f"{t}")
    d = expect(call(base, "GET", "/api/v1/tables/web/visits"), 200)
    check([f["name"] for f in d["schema"]["fields"]] == ["city", "visits", "last_ms"], f"{d['schema']}")
    check(d["records"] == t["records"], f"records {d['records']} beside the list's {t['records']}")
    check([(f["name"], f["transform"], f["source_name"]) for f in d["partition_spec"]["fields"]] ==
          [("city", "identity", "city")], f"{d['partition_spec']}")
    offsets = {(o["source"], o["partition"]): o["offset"]
               for s in d["snapshots"] for o in s["kafka_offsets"]}
    check(offsets.get(("lake-visits.visits", 0), 0) + offsets.get(("lake-visits.visits", 1), 0) == 6,
          f"the snapshots' offsets: {d['snapshots']}")
    files = expect(call(base, "GET", "/api/v1/tables/web/visits/files"), 200)
    check(files["snapshot_id"] == d["current_snapshot_id"] and
          sum(f["records"] for f in files["files"]) >= 3 and
          all(f["content"] == "data" and f["path"].endswith(".parquet") for f in files["files"]),
          f"files: {files}")
    expect(call(base, "GET", "/api/v1/tables/web/nope"), 404, "NO_SUCH_TABLE")
    expect(call(base, "GET", "/api/v1/tables/web/visits/files?snapshot=42"), 404, "NO_SUCH_SNAPSHOT")
    expect(call(base, "GET", "/api/v1/tables/web/visits/files?snapshot=x"), 400, "INVALID_REQUEST")
    expect(call(base, "GET", "/api/v1/tables/..web/visits"), 404, "NO_SUCH_TABLE")
    expect(call(base, "DELETE", "/api/v1/tables/web/visits"), 405)

    # SQL through the query server: the table, streamed in batches, several statements.
    status, lines = sql_stream(base, "SELECT city, visits FROM lake.web.visits ORDER BY city; "
                                     "SELECT range AS n FROM range(2500)")
    check(status == 200 and "query_id" in lines[0], f"{status} {lines[:2]}")
    columns = lines_of(lines, "columns")
    check([c["name"] for c in columns[0]] == ["city", "visits"] and columns[0][1]["numeric"],
          f"columns: {columns}")
    complete = lines_of(lines, "complete")
    check([c["tag"] for c in complete] == ["SELECT 3", "SELECT 2500"], f"tags: {complete}")
    rows = [r for batch in lines_of(lines, "rows") for r in batch]
    check(rows[:3] == [["Lima", 2], ["Oslo", 3], ["Pune", 1]] and rows[-1] == [2499], f"{rows[:4]}")
    check(len(lines_of(lines, "rows")) >= 4, "2,503 rows came in more than one batch")
    check("done" in lines[-1], f"the last line: {lines[-1]}")
    # Values JSON cannot carry exactly stay strings; NULL is null.
    status, lines = sql_stream(base, "SELECT 9007199254740993::BIGINT AS big, 'NaN'::DOUBLE AS nan, "
                                     "NULL::INTEGER AS nothing, 'a\"b' AS s")
    check(lines_of(lines, "rows") == [[["9007199254740993", "NaN", None, 'a\"b']]], f"{lines}")
    # max_rows cuts a result, said so.
    status, lines = sql_stream(base, "SELECT * FROM range(1000000)", max_rows=10)
    check(lines_of(lines, "complete") == [{"tag": "SELECT 10", "rows": 10, "truncated": True}],
          f"truncated: {lines}")
    # An error names its SQLSTATE and where it is.
    status, lines = sql_stream(base, "SELECT 1; SELECT * FROM no_such_table")
    err = lines[-1].get("error", {})
    check(err.get("sqlstate") == "42P01" and err.get("position") == 25 and  # in the whole text
          "no_such_table" in err.get("message", ""), f"the error: {lines}")
    # The query server's sandbox holds here too.
    status, lines = sql_stream(base, "SELECT * FROM read_csv('/etc/passwd')")
    check(lines[-1].get("error", {}).get("sqlstate") == "42501", f"the sandbox: {lines}")

    # A statement without rows counts none; a float is a number whatever its digits.
    status, lines = sql_stream(base, "SELECT * FROM range(3); CREATE TABLE z AS SELECT 1 AS x; "
                                     "SELECT 0.1::DOUBLE + 0.2::DOUBLE AS f")
    check([c["rows"] for c in lines_of(lines, "complete")] == [3, 0, 1], f"row counts: {lines}")
    check(lines_of(lines, "rows")[-1] == [[0.30000000000000004]], f"a float: {lines}")
    # Cut at max_rows, the statements after the cut are reported (or the cancel's 57014).
    status, lines = sql_stream(base, "SELECT * FROM range(100000); CREATE TABLE after_cut AS SELECT 1",
                               max_rows=1)
    tags = [c["tag"] for c in lines_of(lines, "complete")]
    check(tags[0] == "SELECT 1" and (len(tags) == 2 or lines[-1].get("error", {}).get("sqlstate") ==
                                     "57014" or any("did not run" in n for n in lines_of(lines, "notice"))),
          f"after a cut: {lines}")
    expect(call(base, "POST", "/api/v1/sql", {"sql": "DELETE FROM n\u0000 WHERE id = 3"}), 400,
           "INVALID_REQUEST", "a NUL in the SQL")

    # Cancel by the stream's id: it ends with 57014; the id is gone after.
    qid = cancelled_query(base)
    expect(call(base, "DELETE", f"/api/v1/sql/{qid}"), 404, "NOT_FOUND", "a finished query's id")
    expect(call(base, "DELETE", "/api/v1/sql/ffffffffffffffff"), 404, "NOT_FOUND")
    # A page that leaves mid-query: its stream's next write (a blank line each idle second)
    # fails, and the query is cancelled, its id gone.
    s, qid = open_long_query(base)
    s.close()
    wait_until(lambda: call(base, "DELETE", f"/api/v1/sql/{qid}")[0] == 404, 30,
               "the query of a client that left cancelled")
    # At most 8 queries stream at once: the ninth is 429, and a slot frees when one ends.
    held = [open_long_query(base) for _ in range(8)]
    expect(call(base, "POST", "/api/v1/sql", {"sql": "SELECT 1"}), 429, "TOO_MANY_QUERIES")
    for s, qid in held:
        expect(call(base, "DELETE", f"/api/v1/sql/{qid}"), 204, what="cancel a held query")
        s.close()
    wait_until(lambda: call(base, "POST", "/api/v1/sql", {"sql": "SELECT 1"})[0] == 200, 30,
               "a query once the others ended")

    # Downloads: CSV with its header and quoting; Parquet readable by DuckDB.
    csv_status, csv_text = call(base, "POST", "/api/v1/sql/download",
                                {"sql": "SELECT city, visits, NULL::VARCHAR AS n, '' AS e, 'x,y' AS q "
                                        "FROM lake.web.visits ORDER BY city", "format": "csv"})
    check(csv_status == 200 and csv_text.splitlines() ==
          ["city,visits,n,e,q", 'Lima,2,,"","x,y"', 'Oslo,3,,"","x,y"', 'Pune,1,,"","x,y"'],
          f"CSV: {csv_status} {csv_text!r}")
    req = urllib.request.Request(base + "/api/v1/sql/download", method="POST",
                                 data=json.dumps({"sql": "SELECT city, visits FROM lake.web.visits",
                                                  "format": "parquet"}).encode(),
                                 headers={"Content-Type": "application/json", "X-Sluice-Request": "1"})
    with urllib.request.urlopen(req, timeout=60) as r:
        parquet = r.read()
        check(r.headers["Content-Type"] == "application/vnd.apache.parquet", f"{r.headers}")
    check(parquet[:4] == b"PAR1" and parquet[-4:] == b"PAR1", "a Parquet file")
    path = os.path.join(broker.tmp, "result.parquet")
    with open(path, "wb") as f:
        f.write(parquet)
    r = subprocess.run([SLUICE, "sql", "--json", f"SELECT sum(visits) AS v FROM read_parquet('{path}')"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and json.loads(r.stdout) == {"v": 6}, f"the Parquet file read: {r}")
    # Types kept: a decimal beyond a double's digits, a huge integer, two names DuckDB
    # does not tell apart.
    req = urllib.request.Request(
        base + "/api/v1/sql/download", method="POST",
        data=json.dumps({"sql": "SELECT 12345678901234567.25::DECIMAL(20,2) AS d, "
                                "18446744073709551615::UBIGINT AS u, 1 AS \"A\", 2 AS a",
                         "format": "parquet"}).encode(),
        headers={"Content-Type": "application/json", "X-Sluice-Request": "1"})
    with urllib.request.urlopen(req, timeout=60) as resp, open(path, "wb") as f:
        f.write(resp.read())
    r = subprocess.run([SLUICE, "sql", "--json", f"SELECT d::VARCHAR AS d, u::VARCHAR AS u, "
                        f"\"A\" + a_2 AS s FROM read_parquet('{path}')"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and json.loads(r.stdout) ==
          {"d": "12345678901234567.25", "u": "18446744073709551615", "s": 3},
          f"the Parquet file's types: {r}")
    expect(call(base, "POST", "/api/v1/sql/download", {"sql": "SELECT * FROM nope", "format": "csv"}),
           400, "SQL_ERROR")
    expect(call(base, "POST", "/api/v1/sql/download", {"sql": "SELECT 1", "format": "xlsx"}), 400,
           "INVALID_REQUEST")
    # A file cut at max_rows says so; a download with the page's id is cancelled by it.
    req = urllib.request.Request(base + "/api/v1/sql/download", method="POST",
                                 data=json.dumps({"sql": "SELECT * FROM range(10)", "format": "csv",
                                                  "max_rows": 3}).encode(),
                                 headers={"Content-Type": "application/json", "X-Sluice-Request": "1"})
    with urllib.request.urlopen(req, timeout=60) as r:
        cut = r.read().decode().splitlines()
        check(r.headers["X-Sluice-Truncated"] == "max_rows" and cut == ["range", "0", "1", "2"],
              f"a cut download: {r.headers} {cut}")
    expect(call(base, "POST", "/api/v1/sql/download",
                {"sql": "SELECT 1", "format": "csv", "query_id": "no/slashes"}), 400, "INVALID_REQUEST")
    done = {}

    def long_download():
        done["answer"] = call(base, "POST", "/api/v1/sql/download",
                              {"sql": "SELECT count(*) FROM range(1000000000) a, range(1000) b",
                               "format": "csv", "query_id": "download-test-1"})
    t = threading.Thread(target=long_download)
    t.start()
    wait_until(lambda: call(base, "DELETE", "/api/v1/sql/download-test-1")[0] == 204, 30,
               "the download's query cancelled by its id")
    t.join(60)
    check(not t.is_alive() and done["answer"][0] == 400
          and done["answer"][1]["error"]["sqlstate"] == "57014", f"the cancelled download: {done}")

    # Bad input.
    expect(call(base, "POST", "/api/v1/sql", {}), 400, "INVALID_REQUEST", "no sql")
    expect(call(base, "POST", "/api/v1/sql", {"sql": " ; "}), 400, "INVALID_REQUEST", "empty sql")
    expect(call(base, "POST", "/api/v1/sql", {"sql": "SELECT 1", "max_rows": 0}), 400,
           "INVALID_REQUEST", "max_rows 0")
    expect(call(base, "POST", "/api/v1/sql", {"sql": 1}), 400, "INVALID_REQUEST", "sql a number")
    expect(call(base, "POST", "/api/v1/sql", raw=b"{", headers={"Content-Type": "application/json"}),
           400, "INVALID_REQUEST", "not JSON")
    expect(call(base, "GET", "/api/v1/sql"), 405)

    # What the editor completes: the lake table and the topic with their columns.
    rel = {r["sql_name"]: r for r in expect(call(base, "GET", "/api/v1/sql/schema"), 200)["relations"]}
    check(rel.get("lake.web.visits", {}).get("kind") == "lake" and
          [c["name"] for c in rel["lake.web.visits"]["columns"]] == ["city", "visits", "last_ms"],
          f"schema: {rel.keys()}")
    check(rel.get("kafka.visits", {}).get("kind") == "topic", f"the topic: {rel.keys()}")
    # Maintenance: a preview changes nothing; then run, it rewrites what it said.
    # A second batch of visits, so that each city's partition has two small files.
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i, city in enumerate(["Oslo", "Lima", "Oslo", "Pune", "Oslo", "Lima"]):
        p.produce("visits", value=json.dumps({"city": city, "ms": 2000 + i}).encode(),
                  partition=i % 2)
    check(p.flush(30) == 0, "produced")

    def committed():
        t = expect(call(base, "GET", "/api/v1/tables/web/visits"), 200)
        offsets = sum(o["offset"] for o in t["snapshots"][0]["kafka_offsets"]) if t["snapshots"] else 0
        return t if offsets == 12 else None
    d = wait_until(committed, 60, "the second batch in the table")
    snapshots_before = len(d["snapshots"])
    m = "/api/v1/tables/web/visits/maintenance"
    plan = expect(call(base, "POST", m, {"action": "compact"}), 200, what="a compaction preview")
    check(plan["dry_run"] and plan["snapshot_id"] is None and plan["files_rewritten"] >= 2,
          f"the preview: {plan}")
    check(len(expect(call(base, "GET", "/api/v1/tables/web/visits"), 200)["snapshots"]) ==
          snapshots_before, "a preview committed nothing")
    done = expect(call(base, "POST", m, {"action": "compact", "dry_run": False}), 200)
    check(not done["dry_run"] and done["snapshot_id"] is not None and done["files_rewritten"] >=
          plan["files_rewritten"], f"the compaction: {done} after {plan}")
    status, lines = sql_stream(base, "SELECT sum(visits) AS v FROM lake.web.visits")
    check(lines_of(lines, "rows") == [[[12]]], f"the rows after the compaction: {lines}")
    plan = expect(call(base, "POST", m, {"action": "expire", "older_than_ms": 0}), 200)
    check(len(plan["snapshots"]) >= 1 and plan["files"] >= 1, f"the expiry preview: {plan}")
    done = expect(call(base, "POST", m, {"action": "expire", "older_than_ms": 0, "dry_run": False}),
                  200)
    check(done["snapshots_removed"] >= len(plan["snapshots"]), f"the expiry: {done} after {plan}")
    status, lines = sql_stream(base, "SELECT sum(visits) AS v FROM lake.web.visits")
    check(lines_of(lines, "rows") == [[[12]]], f"the rows after the expiry: {lines}")
    expect(call(base, "POST", m, {"action": "vacuum"}), 400, "INVALID_REQUEST")
    expect(call(base, "POST", m, {"action": "compact", "dry_run": "yes"}), 400, "INVALID_REQUEST")
    expect(call(base, "POST", m, {"action": "compact", "target_file_size_bytes": 10}), 400,
           "INVALID_REQUEST")
    expect(call(base, "GET", m), 405)
    print("tables and SQL: the pipeline's table described with its offsets and files; queries "
          "streamed, cut, failed with their position, cancelled, downloaded as CSV and Parquet; "
          "compaction and expiry previewed, then run")


def open_long_query(base):
    """A long query on a raw socket (urllib reads a stream whole): (socket, query id) once
    the stream's first line came."""
    import socket
    host, port = base[len("http://"):].split(":")
    body = json.dumps({"sql": "SELECT count(*) FROM range(1000000000) a, range(1000) b"}).encode()
    s = socket.create_connection((host, int(port)), timeout=60)
    s.sendall(b"POST /api/v1/sql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"X-Sluice-Request: 1\r\nContent-Length: " + str(len(body)).encode() +
              b"\r\n\r\n" + body)
    data = b""
    while b"query_id" not in data or b"\n" not in data.split(b"query_id", 1)[1]:
        chunk = s.recv(4096)
        check(chunk != b"", f"the stream ended before its id: {data!r}")
        data += chunk
    return s, re.search(rb'"query_id":"([0-9a-f]+)"', data).group(1).decode()


def cancelled_query(base):
    """Starts a long query (open_long_query), cancels it by its id, and checks its stream
    ends with 57014. Returns the id."""
    s, qid = open_long_query(base)
    expect(call(base, "DELETE", f"/api/v1/sql/{qid}"), 204, what="cancel")
    data = b""
    while b"57014" not in data:
        chunk = s.recv(4096)
        check(chunk != b"", f"the cancelled stream ended without 57014: {data!r}")
        data += chunk
    s.close()
    return qid


def lake_test():
    return broker_test("tables and SQL", lake_and_sql, ("--pipelines", "pipelines"),
                       ("--warehouse", "warehouse"))


SECURED = FAST_GROUPS + """sasl:
  enabled: true
  mechanisms: [SCRAM-SHA-256]
  users: ["admin:admin-secret", "alice:alice-secret"]
authorization:
  enabled: true
  super_users: ["User:admin"]
"""


def secured_test():
    def run(http_auth, body):
        broker = Broker(SLUICE, SECURED + f"http:\n  auth: {http_auth}\n")
        try:
            broker.start()
            body(broker, http_base(broker))
            check(broker.stop() == 0, "sluice serve stopped with 0")
            return 0
        except Exception as e:  # the verdict
            import traceback
            traceback.print_exc()
            print(f"FAIL: console_api_test (secured, http.auth {http_auth}): {e}")
            print(broker.logs())
            return 1
        finally:
            broker.cleanup()

    def no_login(broker, base):
        expect(call(base, "GET", "/api/v1/topics"), 403, "CONSOLE_NEEDS_LOGIN", "no login")
        expect(call(base, "POST", "/api/v1/topics", {"name": "payroll"}), 403, "CONSOLE_NEEDS_LOGIN")

    def basic(name):
        import base64
        token = base64.b64encode(f"{name}:{name}-secret".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    def logins(broker, base):
        admin, alice = basic("admin"), basic("alice")
        expect(call(base, "POST", "/api/v1/topics", {"name": "pub", "partitions": 1}, admin), 201)
        expect(call(base, "POST", "/api/v1/topics/pub/messages", {"value": "confidential"}, admin), 201)
        page = expect(call(base, "GET", "/api/v1/topics/pub/messages", headers=admin), 200)
        check([m["value"] for m in page["messages"]] == ["confidential"], f"admin reads: {page}")
        expect(call(base, "GET", "/api/v1/topics/pub/messages", headers=alice), 403,
               "TOPIC_AUTHORIZATION_FAILED", "alice without an ACL")
        env = dict(os.environ, SLUICE_SASL_PASSWORD="admin-secret")
        for args in (["--allow-principal", "User:*", "--operation", "All", "--topic", "pub"],
                     ["--deny-principal", "User:alice", "--operation", "Read", "--topic", "pub"]):
            r = subprocess.run([SLUICE, "acl", "add", *args, "--bootstrap", broker.bootstrap,
                                "--sasl-user", "admin"], capture_output=True, text=True, env=env,
                               timeout=60)
            check(r.returncode == 0, f"acl add {args}: {r.stderr}")
        expect(call(base, "GET", "/api/v1/topics/pub/messages", headers=alice), 403,
               "TOPIC_AUTHORIZATION_FAILED", "alice denied by an ACL")
        listed = expect(call(base, "GET", "/api/v1/topics", headers=alice), 200)["topics"]
        check([t["name"] for t in listed] == ["pub"], f"alice lists what she may describe: {listed}")
        expect(call(base, "GET", "/api/v1/topics"), 401, what="no credentials")
        # Pipelines run SQL as the process: a super user may preview one, alice may not.
        yaml = PIPELINE.format(name="pubs", bootstrap=broker.bootstrap).replace("[visits]", "[pub]")
        expect(call(base, "POST", "/api/v1/pipelines/validate", {"yaml": yaml}, alice), 403,
               "PIPELINES_NEED_SUPER_USER", "alice checks a pipeline")
        expect(call(base, "POST", "/api/v1/pipelines/preview", {"yaml": yaml}, alice), 403,
               "PIPELINES_NEED_SUPER_USER", "alice previews a pipeline")
        v = expect(call(base, "POST", "/api/v1/pipelines/validate", {"yaml": yaml}, admin), 200)
        check(v["valid"], f"the admin checks it: {v}")
        # SQL runs in the query server as the login's user, under that user's grants.
        status, lines = sql_stream(base, "SELECT current_user AS u", alice)
        check(status == 200 and lines_of(lines, "rows") == [[["alice"]]], f"alice's SQL: {lines}")
        # The default warehouse (data_dir/warehouse) holds no table yet.
        tables = expect(call(base, "GET", "/api/v1/tables", headers=alice), 200)
        check(tables["tables"] == [] and tables["warehouse"].endswith("/warehouse"),
              f"the default warehouse: {tables}")

    rc = run("none", no_login) or run("basic", logins)
    if rc == 0:
        # No Kafka logins, but the query server asks passwords (its store has a user): the
        # console without a login runs no SQL, as psql without the password could not.
        broker = Broker(SLUICE, FAST_GROUPS + "query:\n  users: ['bob:bob-secret']\n")
        try:
            broker.start()
            base = http_base(broker)
            expect(call(base, "POST", "/api/v1/sql", {"sql": "SELECT 1"}), 403, "SQL_NEEDS_LOGIN")
            expect(call(base, "GET", "/api/v1/topics"), 200, what="the rest of the console")
            check(broker.stop() == 0, "sluice serve stopped with 0")
        except Exception as e:  # the verdict
            print(f"FAIL: console_api_test (SQL without a login): {e}")
            print(broker.logs())
            rc = 1
        finally:
            broker.cleanup()
    if rc == 0:
        print("PASS: console_api_test (secured)")
    return rc


def main():
    global SLUICE
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1])
        return 2
    SLUICE = sys.argv[1]
    config = FAST_GROUPS + "topics:\n  auto_create: true\n"
    return (run_test("console_api_test", SLUICE, body, config=config) or pipelines_test()
            or broker_test("schemas", schemas, registry="127.0.0.1:0")
            or lake_test() or secured_test())


if __name__ == "__main__":
    sys.exit(main())
