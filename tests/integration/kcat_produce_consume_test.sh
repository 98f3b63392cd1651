#!/usr/bin/env bash
# `sluice serve` against real clients: librdkafka's admin client (python3-confluent-kafka)
# creates a topic, `kcat -P` produces 1,000 messages to it uncompressed and once with each
# codec, `kcat -C -e -o beginning` (Fetch and ListOffsets, no groups) must read back every
# message byte for byte, `kcat -Q` must find the end offset, and SIGTERM must stop the
# broker with exit status 0.
#
# usage: kcat_produce_consume_test.sh path/to/sluice

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

"$python" - "$broker" <<'EOF' || fail "creating the topic"
import sys
from confluent_kafka.admin import AdminClient, NewTopic
admin = AdminClient({"bootstrap.servers": sys.argv[1]})
futures = admin.create_topics([NewTopic("events", 1, 1)], operation_timeout=10, request_timeout=15)
for name, f in futures.items():
    f.result(timeout=15)  # raises on a broker error
EOF

# 1,000 messages of varied lengths (no newlines: kcat splits its input on them).
"$python" - "$tmp/in" <<'EOF'
import random, sys
r = random.Random(7)
with open(sys.argv[1], "w") as f:
    for i in range(1000):
        body = "".join(r.choice("abcxyz0123 .,:;{}") for _ in range(r.randrange(0, 300)))
        f.write(f"msg-{i:04d}-{body}\n")
EOF

: >"$tmp/expected"
for codec in none gzip lz4 zstd snappy; do
  timeout 60 kcat -b "$broker" -P -t events -z "$codec" <"$tmp/in" 2>"$tmp/kcat.err" || {
    cat "$tmp/kcat.err"; fail "kcat -P -z $codec"; }
  cat "$tmp/in" >>"$tmp/expected"
  timeout 60 kcat -b "$broker" -C -t events -e -o beginning -q >"$tmp/got" 2>"$tmp/kcat.err" || {
    cat "$tmp/kcat.err"; fail "kcat -C after -z $codec"; }
  cmp "$tmp/expected" "$tmp/got" ||
    fail "consumed bytes differ after -z $codec ($(wc -l <"$tmp/got") lines)"
done

# An idempotent producer (InitProducerId, sequence numbers, acks=all).
timeout 60 kcat -b "$broker" -P -t events -X enable.idempotence=true <"$tmp/in" 2>"$tmp/kcat.err" || {
  cat "$tmp/kcat.err"; fail "kcat -P with enable.idempotence=true"; }
cat "$tmp/in" >>"$tmp/expected"
timeout 60 kcat -b "$broker" -C -t events -e -o beginning -q >"$tmp/got" 2>"$tmp/kcat.err" || {
  cat "$tmp/kcat.err"; fail "kcat -C after the idempotent producer"; }
cmp "$tmp/expected" "$tmp/got" || fail "consumed bytes differ after the idempotent producer"

# ListOffsets: the latest offset after 6,000 messages in one partition.
timeout 30 kcat -b "$broker" -Q -t events:0:-1 >"$tmp/q" 2>&1 || { cat "$tmp/q"; fail "kcat -Q"; }
grep -q "offset 6000" "$tmp/q" || fail "kcat -Q: $(cat "$tmp/q")"

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[ "$rc" -eq 0 ] || fail "sluice serve exited $rc after SIGTERM"
echo "PASS: kcat produced and consumed 6 x 1,000 messages (none, gzip, lz4, zstd, snappy, idempotent) byte for byte; sluice serve stopped cleanly"
