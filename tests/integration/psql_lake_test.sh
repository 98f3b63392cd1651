#!/usr/bin/env bash
# The query server's engine through psql against one `sluice serve --warehouse`: an
# Iceberg table a real pipeline writes (lake.<ns>.<table>, pruned, time travel), the live
# topic (topic()), psql's catalog commands (\dt, \d) over both DuckDB and lake tables, and
# errors with their SQLSTATE.
#
# usage: psql_lake_test.sh path/to/sluice
set -euo pipefail

sluice=${1:?usage: $0 path/to/sluice}
psql=""
for p in /usr/bin/psql /usr/lib/postgresql/15/bin/psql; do
  [ -x "$p" ] && psql=$p && break
done
[ -n "$psql" ] || { echo "FAIL: psql is missing (scripts/setup.sh installs postgresql-client)"; exit 1; }
command -v kcat >/dev/null || { echo "FAIL: kcat is missing (scripts/setup.sh installs it)"; exit 1; }

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/*.out "$tmp"/*.err "$tmp"/*.log; do echo "--- $f:"; tail -40 "$f" 2>/dev/null || true; done
  exit 1
}

cat >"$tmp/sluice.yaml" <<YAML
topics:
  auto_create: true      # kcat creates 'events' through Metadata
  num_partitions: 2
groups:
  initial_rebalance_delay: 0s
YAML
"$sluice" serve --kafka-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 --pg-addr 127.0.0.1:0 --schema-registry-addr off --shards 1 \
  --config "$tmp/sluice.yaml" --data-dir "$tmp/data" --warehouse "$tmp/wh" >"$tmp/serve.out" 2>"$tmp/serve.err" &
serve_pid=$!
pids+=("$serve_pid")
pg_port=""
for _ in $(seq 1 400); do
  pg_port=$(sed -n 's/^sluice: Postgres wire protocol on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$tmp/serve.out")
  [ -n "$pg_port" ] && break
  kill -0 "$serve_pid" 2>/dev/null || fail "sluice serve exited before listening"
  sleep 0.05
done
[ -n "$pg_port" ] || fail "sluice serve did not print its Postgres port"
brokers=$(sed -n 's/^sluice: serving Kafka on \([0-9.]*:[0-9]*\) .*/\1/p' "$tmp/serve.out")

export PGCONNECT_TIMEOUT=10
q() {  # q SQL: unaligned, tuples only; an error fails the test
  "$psql" -X -q -A -t -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U tester -d sluice -c "$1" 2>>"$tmp/psql.err" ||
    fail "psql: $1"
}
sqlstate() {  # the SQLSTATE of SQL's error, or "none"
  local out
  out=$("$psql" -X -q -A -t -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -h 127.0.0.1 -p "$pg_port" -U tester \
        -d sluice -c "$1" 2>&1) && { echo none; return; }
  echo "$out" | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p' | head -1
}
expect() {  # expect WHAT ACTUAL EXPECTED
  [ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"
}
# produce FROM TO: events id FROM..TO-1 into topic events, city by id parity.
produce() {
  seq "$1" $(($2 - 1)) | awk '{ printf "{\"id\":%d,\"city\":\"%s\",\"amount\":%d}\n", $1, ($1 % 2 ? "rome" : "oslo"), $1 % 7 }' \
    >"$tmp/events.jsonl"
  kcat -b "$brokers" -P -t events -l "$tmp/events.jsonl" || fail "kcat could not produce"
}
# wait_rows N: until the lake table holds N rows.
wait_rows() {
  for _ in $(seq 1 600); do
    [ "$("$psql" -X -q -A -t -h 127.0.0.1 -p "$pg_port" -U tester -d sluice \
         -c "SELECT count(*) FROM lake.db.events" 2>/dev/null)" = "$1" ] && return 0
    sleep 0.1
  done
  fail "the table did not reach $1 rows"
}

cat >"$tmp/pipeline.yml" <<YAML
commands:
  - name: events table
    sql: CREATE TABLE events (id BIGINT, city VARCHAR, amount BIGINT);
pipeline:
  name: to-lake
  batch_size: 1000
  flush_interval_seconds: 1
  source:
    type: kafka
    kafka:
      brokers: ["$brokers"]
      group_id: to-lake
      auto_offset_reset: earliest
      topics: [events]
  handler:
    type: handlers.StructuredBatch
    table: events
    sql: SELECT * FROM events
  sink:
    type: iceberg
    iceberg:
      catalog_name: sluice
      table_name: db.events
      warehouse: "$tmp/wh"
      commit_interval_seconds: 1
      partition_by: [city]
YAML
produce 0 1000
"$sluice" pipeline run "$tmp/pipeline.yml" --http-addr 127.0.0.1:0 >"$tmp/pipeline.out" 2>"$tmp/pipeline.log" &
pids+=($!)
wait_rows 1000
produce 1000 1500
wait_rows 1500

# The table: values, pruning by partition, the same as the topic's messages.
expect "lake rows" "$(q "SELECT count(*), count(DISTINCT id), sum(amount) FROM lake.db.events")" \
  "1500|1500|$(seq 0 1499 | awk '{ s += $1 % 7 } END { print s }')"
expect "a partition" "$(q "SELECT count(*), min(id) FROM lake.db.events WHERE city = 'rome'")" "750|1"
expect "\\copy of a lake query" \
  "$(q "\\copy (SELECT count(*), min(id) FROM lake.db.events WHERE city = 'rome') TO STDOUT CSV")" "750,1"
expect "COPY of a lake table by name" "$(q "COPY lake.db.events (id) TO STDOUT" | wc -l)" "1500"
expect "psql \\copy of a lake table by its catalog name" "$("$psql" -X -q -h 127.0.0.1 -p "$pg_port" -U tester -d sluice \
  -c '\copy "lake.db".events (id) TO STDOUT' 2>>"$tmp/psql.err" | wc -l)" "1500"
expect "a join of the table with the topic" \
  "$(q "SELECT count(*) FROM lake.db.events e JOIN topic('events') t ON e.id = (t.value::JSON->>'id')::BIGINT")" "1500"
# Offsets are per partition, and kcat's partitioner splits the messages unevenly.
expect "topic bounds" "$(q "SELECT count(*) FROM topic('events', from_offset => 100, to_offset => 400)")" \
  "$(q "SELECT count(*) FROM topic('events') WHERE \"offset\" >= 100 AND \"offset\" < 400")"
# Bounds from WHERE (the engine's topic planner): the scan expects only the rows they keep.
plan=$(q "EXPLAIN SELECT count(*) FROM topic('events') WHERE partition = 0 AND \"offset\" < 5")
expect "topic bounds from WHERE" "$(echo "$plan" | grep -o '~[0-9]*' | tail -1)" "~5"
# Typed value columns, declared and inferred.
expect "topic columns" "$(q "SELECT count(*), count(DISTINCT id), sum(amount) FROM topic('events',
  columns => 'id BIGINT, city VARCHAR, amount BIGINT') WHERE city = 'oslo'")" \
  "750|750|$(seq 0 2 1499 | awk '{ s += $1 % 7 } END { print s }')"
expect "topic inferred columns" "$(q "SELECT typeof(id), typeof(city), typeof(amount) FROM topic('events',
  format => 'json') LIMIT 1")" "BIGINT|VARCHAR|BIGINT"
# Time travel: the first snapshot held fewer rows than now.
snapshots=$("$sluice" table history db.events --warehouse "$tmp/wh" | awk '$2 ~ /^[0-9]+$/ { print $2 }')
oldest=$(echo "$snapshots" | head -1)
[ -n "$oldest" ] || fail "no snapshot id in: $("$sluice" table history db.events --warehouse "$tmp/wh")"
then_rows=$(q "SELECT count(*) FROM lake.db.events AT (VERSION => $oldest)")
[ "$then_rows" -gt 0 ] && [ "$then_rows" -lt 1500 ] || fail "the oldest snapshot holds $then_rows rows"

# psql's catalog commands see DuckDB's tables and the lake's.
q "CREATE TABLE local_t (a INT PRIMARY KEY, b VARCHAR)" >/dev/null
dt=$("$psql" -X -q -A -t -h 127.0.0.1 -p "$pg_port" -U tester -d sluice -c '\dt' 2>>"$tmp/psql.err")
echo "$dt" | grep -q '^main|local_t|table|' || fail "\\dt: $dt"
dtall=$("$psql" -X -q -A -t -h 127.0.0.1 -p "$pg_port" -U tester -d sluice -c '\dt *.*' 2>>"$tmp/psql.err")
echo "$dtall" | grep -q '^lake.db|events|table|' || fail "\\dt *.*: $dtall"
# Every new session sees the lake tables (a session's connection may reuse the address
# of an ended one's: it still gets its own lake relations).
for i in $(seq 1 12); do
  [ "$(q "SELECT count(*) FROM pg_class WHERE relname = 'events'")" -ge 1 ] || fail "session $i: no lake table in pg_class"
done
# A lake table inside CREATE TABLE ... AS and INSERT ... SELECT (one session).
expect "CREATE TABLE AS and INSERT from a lake table" "$(q "CREATE TEMP TABLE staged AS SELECT id, city FROM lake.db.events WHERE city = 'oslo'; INSERT INTO staged SELECT id, city FROM lake.db.events WHERE city = 'rome' AND id < 10; SELECT count(*) FROM staged")" "755"
# The schema name the catalog shows ("lake.db") names the table too, as tools build it.
expect "quoted catalog schema" "$(q "SELECT count(*) FROM \"lake.db\".events WHERE city = 'oslo'")" "750"
expect "a lake column's Postgres type in pg_attribute" "$(q "SELECT format_type(atttypid, atttypmod) FROM pg_attribute a JOIN pg_class c ON a.attrelid = c.oid WHERE c.relname = 'events' AND attname = 'id'")" "bigint"
# A lake table that appears while a session is open shows in its next \dt.
mkfifo "$tmp/live.in"
"$psql" -X -q -A -t -h 127.0.0.1 -p "$pg_port" -U tester -d sluice <"$tmp/live.in" >"$tmp/live.out" 2>>"$tmp/psql.err" &
live_pid=$!
pids+=("$live_pid")
exec 7>"$tmp/live.in"
echo '\dt *.*' >&7
for _ in $(seq 1 200); do grep -q '^lake.db|events|' "$tmp/live.out" && break; sleep 0.05; done
grep -q '^lake.db|events|' "$tmp/live.out" || fail "live session: \dt *.* before"
cp -r "$tmp/wh/db/events" "$tmp/wh/db/events_later"
echo '\dt *.*' >&7
exec 7>&-
wait "$live_pid" || fail "live psql session failed"
[ "$(grep -c '^lake.db|events|' "$tmp/live.out")" = 2 ] && [ "$(grep -c '^lake.db|events_later|' "$tmp/live.out")" = 1 ] ||
  fail "a table that appeared during the session is not in its next \dt: $(cat "$tmp/live.out")"
rm -rf "$tmp/wh/db/events_later"
d=$("$psql" -X -q -A -t -h 127.0.0.1 -p "$pg_port" -U tester -d sluice -c '\d "lake.db".events' 2>>"$tmp/psql.err")
echo "$d" | grep -q '^id|bigint' && echo "$d" | grep -q '^city|character varying\|^city|text' || fail "\\d: $d"

# Errors and their SQLSTATEs.
expect "unknown lake table" "$(sqlstate "SELECT * FROM lake.db.nothing")" "42P01"
expect "unknown topic" "$(sqlstate "SELECT * FROM topic('nothing')")" "42P01"
expect "a query does not create topics" "$(q "SELECT count(*) FROM topic('events')")" "1500"
"$sluice" table list --warehouse "$tmp/wh" >/dev/null || fail "table list"
expect "unknown snapshot" "$(sqlstate "SELECT * FROM lake.db.events AT (VERSION => 1)")" "42P01"

# The same from a terminal: sluice sql with the warehouse and the broker.
expect "sluice sql" "$("$sluice" sql --json --warehouse "$tmp/wh" --bootstrap "$brokers" \
  "SELECT (SELECT count(*) FROM lake.db.events WHERE city = 'oslo') AS lake, (SELECT count(*) FROM topic('events')) AS topic")" \
  '{"lake":750,"topic":1500}'
# kcat's keyless messages may all land in one partition (librdkafka's sticky
# partitioning): bound a partition that holds at least three.
full=$(q "SELECT partition FROM topic('events') GROUP BY 1 HAVING count(*) >= 3 ORDER BY 1 LIMIT 1")
[ -n "$full" ] || fail "no partition of 'events' holds three messages"
expect "sluice sql with topic bounds" "$("$sluice" sql --json --bootstrap "$brokers" \
  "SELECT count(*) AS n FROM topic('events', columns => 'id BIGINT') WHERE partition = $full AND \"offset\" < 3 AND id >= 0")" \
  '{"n":3}'
"$sluice" sql --warehouse "$tmp/wh" "SELECT * FROM lake.db.nothing" 2>"$tmp/sql.err" && fail "sluice sql: an unknown table passed"
grep -q "nothing" "$tmp/sql.err" || fail "sluice sql's error does not name the table: $(cat "$tmp/sql.err")"
# The aligned table holds psql's text forms; any statement runs, once (EXPLAIN's plan too).
expect "sluice sql table" "$("$sluice" sql "SELECT 1 AS a, NULL::INT AS b, DATE '2024-01-02' AS d, [1, 2] AS l, 'x' || chr(10) || 'y' AS m")" \
  "$(printf 'a | b    | d          | l     | m\n- | ---- | ---------- | ----- | -\n1 | NULL | 2024-01-02 | {1,2} | x\n  |      |            |       | y\n(1 row)')"
"$sluice" sql "EXPLAIN SELECT 42" | grep -q "PROJECTION" || fail "sluice sql: EXPLAIN shows no plan"
# Several statements: each planned in turn (the lake table in the last one), the last printed.
expect "sluice sql, several statements" "$("$sluice" sql --json --warehouse "$tmp/wh" \
  "CREATE TEMP TABLE k AS SELECT 'oslo' AS city; SELECT count(*) AS n FROM lake.db.events e JOIN k USING (city)")" \
  '{"n":750}'
[ -z "$("$sluice" sql "CREATE TABLE nothing_printed (a INT)")" ] || fail "sluice sql printed rows for a CREATE"
expect "sluice sql from stdin" "$(echo "SELECT 1 AS a; SELECT 2 AS n" | "$sluice" sql --json)" '{"n":2}'
"$sluice" sql "SELEC 1" 2>"$tmp/sql.err" && fail "sluice sql: a syntax error passed"
grep -q "syntax error" "$tmp/sql.err" || fail "sluice sql: no syntax error reported: $(cat "$tmp/sql.err")"

kill -TERM "$serve_pid"
wait "$serve_pid" || fail "sluice serve exited $? after SIGTERM"
echo "PASS"
