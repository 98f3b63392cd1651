#!/usr/bin/env bash
# `sluice serve` against real clients: librdkafka's admin client (python3-confluent-kafka)
# creates topics, `kcat -L -J` must list them with their partition counts, and SIGTERM
# must stop the broker with exit status 0.
#
# usage: kcat_metadata_test.sh path/to/sluice
set -euo pipefail

sluice=${1:?usage: $0 path/to/sluice}
python=/usr/bin/python3
for tool in kcat "$python"; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is missing (scripts/setup.sh)"; exit 1; }
done
"$python" -c 'import confluent_kafka' 2>/dev/null ||
  { echo "FAIL: python3-confluent-kafka is missing (scripts/setup.sh)"; exit 1; }

tmp=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  echo "--- sluice output:"; cat "$tmp/out" "$tmp/err" 2>/dev/null || true
  exit 1
}

# Port 0: the kernel picks a free port, which sluice prints once it listens.
"$sluice" serve --kafka-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 --pg-addr 127.0.0.1:0 --schema-registry-addr off --data-dir "$tmp/data" --shards 2 >"$tmp/out" 2>"$tmp/err" &
pid=$!
port=""
for _ in $(seq 1 200); do
  port=$(sed -n 's/^sluice: serving Kafka on 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$tmp/out")
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || fail "sluice serve exited before listening"
  sleep 0.05
done
[ -n "$port" ] || fail "sluice serve did not start listening"
broker=127.0.0.1:$port

"$python" - "$broker" <<'EOF' || fail "creating topics"
import sys
from confluent_kafka.admin import AdminClient, NewTopic
admin = AdminClient({"bootstrap.servers": sys.argv[1]})
futures = admin.create_topics([NewTopic("orders", 3, 1), NewTopic("audit.log", 1, 1)],
                              operation_timeout=10, request_timeout=15)
for name, f in futures.items():
    f.result(timeout=15)  # raises on a broker error
futures = admin.create_topics([NewTopic("orders", 1, 1)], request_timeout=15)
try:
    futures["orders"].result(timeout=15)
    sys.exit("creating 'orders' twice succeeded")
except Exception as e:
    if "TOPIC_ALREADY_EXISTS" not in str(e):
        sys.exit(f"creating 'orders' twice: {e}")
EOF

kcat -b "$broker" -L -J -m 10 >"$tmp/md.json" 2>"$tmp/kcat.err" || {
  cat "$tmp/kcat.err"; fail "kcat -L"; }
"$python" - "$tmp/md.json" "$port" <<'EOF' || fail "kcat -L -J output: $(cat "$tmp/md.json")"
import json, sys
md = json.load(open(sys.argv[1]))
port = int(sys.argv[2])
brokers = [(b["id"], b["name"]) for b in md["brokers"]]
assert brokers == [(1, f"127.0.0.1:{port}")], brokers
topics = {t["topic"]: t for t in md["topics"]}
assert sorted(topics) == ["audit.log", "orders"], sorted(topics)
assert len(topics["orders"]["partitions"]) == 3
assert len(topics["audit.log"]["partitions"]) == 1
for t in topics.values():
    assert "error" not in t, t
    for p in t["partitions"]:
        assert p["leader"] == 1 and p["replicas"] == [{"id": 1}] and p["isrs"] == [{"id": 1}], p
EOF

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[ "$rc" -eq 0 ] || fail "sluice serve exited $rc after SIGTERM"
[ -d "$tmp/data/orders-2" ] || fail "partition directory orders-2 is missing"
echo "PASS: kcat lists the topics; sluice serve stopped cleanly"
