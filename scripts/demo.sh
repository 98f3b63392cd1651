#!/usr/bin/env bash
# `make demo`: sluice's main job end to end, on its embedded defaults, on loopback.
#   1. starts the broker (`sluice serve`) on a free port with a temporary data directory;
#   2. produces a stream of sample events to topic `events` with kcat (a real Kafka client);
#   3. runs two pipelines (`sluice pipeline run`) over it: one aggregates each batch with SQL
#      into an Apache Iceberg table (the iceberg sink: Parquet files, Avro manifests, one
#      snapshot per commit with the Kafka offsets it holds), one prints each batch's top
#      cities to the console;
#   4. shows the result: the table's snapshots, and a query over its Parquet files checked
#      against the same query over the raw events;
#   5. stops everything with SIGTERM and removes the temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-build/release/sluice}
EVENTS=${EVENTS:-200000}
PY=python3

work=$(mktemp -d "${TMPDIR:-/tmp}/sluice-demo-XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# The value of an unlabelled-by-phase counter of a pipeline's /metrics.
metric() {
  $PY - "$1" "$2" <<'PYEOF'
import sys, urllib.request
try:
    text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=2).read().decode()
except Exception:
    print(0); sys.exit()
for line in text.splitlines():
    if line.startswith(sys.argv[2] + "{"):
        print(int(float(line.rsplit(" ", 1)[1]))); break
else:
    print(0)
PYEOF
}
wait_for_line() {  # file, text, seconds
  for _ in $(seq 1 $(($3 * 10))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "demo: timed out waiting for '$2' in $1:" >&2; cat "$1" >&2; return 1
}

kafka_port=$(free_port)
brokers="127.0.0.1:$kafka_port"
mkdir -p "$work/lake" "$work/pipelines"
cat > "$work/sluice.yaml" <<YAML
topics:
  auto_create: true      # kcat's producer creates 'events' through Metadata
  num_partitions: 3
groups:
  initial_rebalance_delay: 0s
YAML

echo "[1/5] starting the broker on $brokers"
echo "      \$ sluice serve --config sluice.yaml --kafka-addr $brokers --data-dir $work/data --warehouse $work/lake"
$SLUICE serve --config "$work/sluice.yaml" --kafka-addr "$brokers" --http-addr 127.0.0.1:0 --pg-addr 127.0.0.1:0 --schema-registry-addr off --data-dir "$work/data" \
  --warehouse "$work/lake" \
  > "$work/broker.out" 2> "$work/broker.log" &
pids+=($!)
broker_pid=$!
wait_for_line "$work/broker.out" "Postgres wire protocol on" 30
pg_port=$(sed -n 's/.*Postgres wire protocol on 127.0.0.1:\([0-9]*\).*/\1/p' "$work/broker.out")
echo "      Kafka on $brokers, SQL for Postgres clients on 127.0.0.1:$pg_port"
echo

echo "[2/5] producing $EVENTS sample events to topic 'events' with kcat"
$PY - "$EVENTS" > "$work/events.jsonl" <<'PYEOF'
import json, random, sys
random.seed(7)
cities = ["Berlin", "Paris", "Lisbon", "Warsaw", "Oslo", "Madrid", "Rome", "Vienna"]
events = ["page_view", "add_to_cart", "checkout"]
for i in range(int(sys.argv[1])):
    print(json.dumps({
        "event": random.choice(events),
        "timestamp": "2026-11-30T12:%02d:%02d.%03dZ" % (i // 60000 % 60, i // 1000 % 60, i % 1000),
        "user_id": "u-%06d" % random.randrange(1000000),
        "properties": {"city": random.choice(cities), "amount": round(random.uniform(1, 200), 2)},
    }, separators=(",", ":")))
PYEOF
head -1 "$work/events.jsonl" | sed 's/^/      e.g. /'
kcat -b "$brokers" -P -t events -z lz4 -X linger.ms=20 -l "$work/events.jsonl"
echo

cat > "$work/pipelines/city-totals.yml" <<YAML
# Totals per city and event of each batch, appended to an Iceberg table (docs/sinks.md).
commands:
  - name: events table
    sql: |
      CREATE TABLE events (event VARCHAR, "timestamp" TIMESTAMPTZ, user_id VARCHAR,
                           properties STRUCT(city VARCHAR, amount DOUBLE));
pipeline:
  name: city-totals
  batch_size: 50000
  flush_interval_seconds: 1
  source:
    type: kafka
    kafka:
      brokers: [{{ DEMO_BROKERS }}]
      group_id: city-totals
      auto_offset_reset: earliest
      topics: [events]
  handler:
    type: handlers.StructuredBatch
    table: events
    sql: |
      SELECT properties.city AS city, event, count(*) AS n, sum(properties.amount) AS amount
      FROM events GROUP BY ALL
  sink:
    type: iceberg
    iceberg:
      catalog_name: sluice
      table_name: demo.city_totals
      warehouse: '{{ DEMO_LAKE }}'
      commit_interval_seconds: 2
      partition_by: [event]
YAML
cat > "$work/pipelines/top-cities.yml" <<YAML
# The three busiest cities of each batch, on the console (schema inferred from the JSON).
pipeline:
  name: top-cities
  batch_size: 100000
  flush_interval_seconds: 1
  source:
    type: kafka
    kafka:
      brokers: [{{ DEMO_BROKERS }}]
      group_id: top-cities
      auto_offset_reset: earliest
      topics: [events]
  handler:
    type: handlers.InferredMemBatch
    sql: |
      SELECT properties.city AS city, count(*) AS events, round(sum(properties.amount), 2) AS amount
      FROM batch GROUP BY 1 ORDER BY 2 DESC LIMIT 3
  sink:
    type: console
YAML

# Runs a pipeline until it has read every event, then stops it with SIGTERM.
run_pipeline() {  # name
  local port; port=$(free_port)
  DEMO_BROKERS=$brokers DEMO_LAKE=$work/lake $SLUICE pipeline run "$work/pipelines/$1.yml" \
    --http-addr "127.0.0.1:$port" > "$work/$1.out" 2> "$work/$1.log" &
  local pid=$!
  pids+=($pid)
  for _ in $(seq 1 1200); do
    [ "$(metric "$port" sluice_pipeline_messages_in_total)" -ge "$EVENTS" ] && \
      [ "$(metric "$port" sluice_pipeline_commits_total)" -ge 1 ] && break
    kill -0 $pid 2>/dev/null || { echo "demo: pipeline $1 stopped:" >&2; cat "$work/$1.log" >&2; exit 1; }
    sleep 0.25
  done
  kill -TERM $pid
  wait $pid || { echo "demo: pipeline $1 failed:" >&2; cat "$work/$1.log" >&2; exit 1; }
  tail -1 "$work/$1.log" | sed 's/^/      /'
}

echo "[3/5] running the pipelines (sqlflow-format files; docs/pipelines.md)"
echo "      \$ sluice pipeline run city-totals.yml    # StructuredBatch -> Iceberg table demo.city_totals"
run_pipeline city-totals
echo "      \$ sluice table history demo.city_totals --warehouse lake"
$SLUICE table history demo.city_totals --warehouse "$work/lake" | sed 's/^/      /'
echo "      \$ sluice table describe demo.city_totals --warehouse lake"
$SLUICE table describe demo.city_totals --warehouse "$work/lake" | sed 's/^/      /'
files=$(find "$work/lake/demo/city_totals/data" -name '*.parquet' | wc -l)
echo "      $files Parquet file(s) in lake/demo/city_totals/data (one per event type per commit)"
echo "      \$ sluice pipeline run top-cities.yml     # InferredMemBatch -> console; per batch:"
run_pipeline top-cities
sed 's/^/      /' "$work/top-cities.out" | head -12
echo

echo "[4/5] the result, with psql through the query server (Postgres wire protocol)"
psql_q() { PGCONNECT_TIMEOUT=10 psql -X -q -h 127.0.0.1 -p "$pg_port" -U sluice -d sluice "$@"; }
query="SELECT city, sum(n) AS events, round(sum(amount), 2) AS amount FROM lake.demo.city_totals GROUP BY city ORDER BY events DESC, city"
echo "      \$ psql -h 127.0.0.1 -p $pg_port -c \"$query\""
psql_q -c "$query" | sed 's/^/      /'
query="SELECT partition, count(*) AS messages, min(\"offset\") AS first, max(\"offset\") AS last FROM topic('events') GROUP BY ALL ORDER BY 1"
echo "      \$ psql -h 127.0.0.1 -p $pg_port -c \"$query\"    # the live topic"
psql_q -c "$query" | sed 's/^/      /'
lake="SELECT city, sum(n) AS events, sum(amount) AS amount FROM lake.demo.city_totals GROUP BY city"
raw="SELECT value::JSON->'properties'->>'city' AS city, count(*) AS events, sum((value::JSON->'properties'->>'amount')::DOUBLE) AS amount FROM topic('events') GROUP BY 1"
diff="SELECT count(*) AS differing FROM ($lake) l FULL JOIN ($raw) r USING (city) WHERE l.events IS DISTINCT FROM r.events OR abs(l.amount - r.amount) > 0.005"
if [ "$(psql_q -At -c "$diff")" == "0" ]; then
  echo "      = the same totals as a query over the raw events in the topic: every event counted once"
else
  echo "demo: the table's totals differ from the raw events':" >&2
  psql_q -c "$raw" >&2
  exit 1
fi
echo

echo "[5/5] stopping the broker (SIGTERM)"
kill -TERM $broker_pid
wait $broker_pid
echo "      it flushed its logs and exited with status 0"
echo
echo "Next: docs/pipelines.md (pipeline files), sluice pipeline invoke (test SQL on a file),"
echo "docs/queries.md (the query server, sluice sql), sluice bench kafka, sluice bench pipeline"
echo "and sluice bench query (docs/benchmarks.md); make deb to install it as a service"
echo "(docs/install.md)."
