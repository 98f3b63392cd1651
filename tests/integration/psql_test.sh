#!/usr/bin/env bash
# psql 15 (Debian's postgresql-client) against the query server of `sluice serve`:
# queries and their output, several statements in one line, errors with their SQLSTATE,
# the sandbox's refusals (SET memory_limit, COPY ... TO outside the allowed directories,
# ATTACH, INSTALL: SQLSTATE 42501), then SCRAM-SHA-256 and cleartext passwords, right
# and wrong.
#
# usage: psql_test.sh path/to/sluice
set -euo pipefail

sluice=${1:?usage: $0 path/to/sluice}
psql=""
for p in /usr/bin/psql /usr/lib/postgresql/15/bin/psql; do
  [ -x "$p" ] && psql=$p && break
done
[ -n "$psql" ] || { echo "FAIL: psql is missing (scripts/setup.sh installs postgresql-client)"; exit 1; }

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/*.out "$tmp"/*.err; do echo "--- $f:"; tail -40 "$f" 2>/dev/null || true; done
  exit 1
}

# start NAME [CONFIG]: starts serve, sets $pg_port (the kernel picks the port).
start() {
  local name=$1 config=${2:-}
  local args=(serve --kafka-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 --pg-addr 127.0.0.1:0 --schema-registry-addr off
              --data-dir "$tmp/$name-data" --shards 1)
  if [ -n "$config" ]; then
    printf '%s\n' "$config" >"$tmp/$name.yaml"
    args+=(--config "$tmp/$name.yaml")
  fi
  "$sluice" "${args[@]}" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  pid=$!
  pids+=("$pid")
  pg_port=""
  for _ in $(seq 1 400); do
    pg_port=$(sed -n 's/^sluice: Postgres wire protocol on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$tmp/$name.out")
    [ -n "$pg_port" ] && break
    kill -0 "$pid" 2>/dev/null || fail "sluice serve ($name) exited before listening"
    sleep 0.05
  done
  [ -n "$pg_port" ] || fail "sluice serve ($name) did not print its Postgres port"
}

stop() {
  kill -TERM "$pid"
  wait "$pid" || fail "sluice serve exited $? after SIGTERM"
}

export PGCONNECT_TIMEOUT=10 PGSSLMODE=prefer
q() {  # q SQL: runs SQL, unaligned and tuples only, fails the test on an error
  "$psql" -X -q -A -t -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U tester -d sluice -c "$1" 2>>"$tmp/psql.err" ||
    fail "psql: $1"
}
# sqlstate SQL: the SQLSTATE psql reports for SQL (verbose errors), or "none".
sqlstate() {
  local out
  out=$("$psql" -X -q -A -t -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -h 127.0.0.1 -p "$pg_port" -U tester \
        -d sluice -c "$1" 2>&1) && { echo none; return; }
  echo "$out" | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p' | head -1
}
expect() {  # expect WHAT ACTUAL EXPECTED
  [ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"
}

allowed="$tmp/allowed"
mkdir -p "$allowed"
start main "query:
  allowed_directories: [\"$allowed\"]"

expect "a SELECT" "$(q "SELECT 40 + 2")" "42"
expect "several statements" "$(q "CREATE TABLE t (a INT, b VARCHAR); INSERT INTO t VALUES (1, 'one'), (2, 'two'); SELECT b FROM t ORDER BY a")" "one
two"
expect "types" "$(q "SELECT 1.5::DOUBLE, DATE '2024-02-29', TIMESTAMP '2024-01-02 03:04:05.5', INTERVAL '26 hours', [1,2], 'x'::BLOB")" \
  "1.5|2024-02-29|2024-01-02 03:04:05.5|26:00:00|{1,2}|\\x78"
expect "NULL" "$(q "SELECT NULL IS NULL, NULL::INT")" "t|"
expect "a syntax error" "$(sqlstate "SELEC 1")" "42601"
expect "an unknown table" "$(sqlstate "SELECT * FROM missing")" "42P01"
expect "division by a bad cast" "$(sqlstate "SELECT 'abc'::INTEGER")" "22P02"

# The sandbox.
expect "SET memory_limit" "$(sqlstate "SET memory_limit = '64GB'")" "42501"
expect "COPY TO outside" "$(sqlstate "COPY (SELECT 1) TO '$tmp/escaped.csv'")" "42501"
[ ! -e "$tmp/escaped.csv" ] || fail "COPY wrote outside the allowed directories"
expect "ATTACH" "$(sqlstate "ATTACH '$allowed/x.db' AS x")" "42501"
expect "INSTALL" "$(sqlstate "INSTALL httpfs")" "42501"
expect "read outside" "$(sqlstate "SELECT * FROM read_text('/etc/hostname')")" "42501"
expect "COPY TO inside" "$(sqlstate "COPY (SELECT 7 AS seven) TO '$allowed/ok.csv'")" "none"
expect "reading it back" "$(q "SELECT seven FROM read_csv('$allowed/ok.csv')")" "7"
# An error's position (ErrorResponse 'P'): psql shows the line and a caret under it.
pos=$("$psql" -X -q -h 127.0.0.1 -p "$pg_port" -U tester -d sluice -c "SELECT 1,
  nosuch FROM range(3)" 2>&1) && fail "an unknown column passed"
echo "$pos" | grep -q "^LINE 2:   nosuch FROM range(3)$" || fail "no error position: $pos"
echo "$pos" | grep -q "^          ^$" || fail "the caret is not under nosuch: $pos"
# DuckDB's suggestions never name the catalog emulation's own views.
miss=$("$psql" -X -q -h 127.0.0.1 -p "$pg_port" -U tester -d sluice -c "SELECT * FROM nosuch" 2>&1) &&
  fail "an unknown table passed"
echo "$miss" | grep -q "sluice_" && fail "an error suggests an internal name: $miss"
# A failed transaction block runs nothing until its end; COMMIT ends it as a rollback.
tx=$(printf 'BEGIN;\nCREATE TEMP TABLE tx AS SELECT 1 AS a;\nSELECT nosuch;\nSELECT 1;\nCOMMIT;\nSELECT count(*) FROM tx;\n' |
  "$psql" -X -q -A -t -v VERBOSITY=verbose -h 127.0.0.1 -p "$pg_port" -U tester -d sluice 2>&1)
echo "$tx" | grep -q "25P02: current transaction is aborted" || fail "no 25P02 in a failed block: $tx"
echo "$tx" | grep -q "42P01" || fail "the failed block's table survived COMMIT: $tx"
stop

# SCRAM-SHA-256 (the default with users).
start scram 'query:
  users: ["alice:s3cret pass"]'
expect "SCRAM, right password" "$(PGPASSWORD='s3cret pass' "$psql" -X -A -t -h 127.0.0.1 -p "$pg_port" -U alice -d sluice -c "SELECT 'in'" 2>&1)" "in"
expect "the session's user" "$(PGPASSWORD='s3cret pass' "$psql" -X -A -t -h 127.0.0.1 -p "$pg_port" -U alice -d sluice \
  -c "SELECT current_user || ',' || session_user || ',' || user || ',' || pg_get_userbyid(10)" 2>&1)" "alice,alice,alice,alice"
expect "the database the client named" "$(PGPASSWORD='s3cret pass' "$psql" -X -A -t -h 127.0.0.1 -p "$pg_port" -U alice -d analytics \
  -c "SELECT current_database() || ',' || (SELECT string_agg(datname, ',') FROM pg_database)" 2>&1)" "analytics,analytics"
out=$(PGPASSWORD=wrong "$psql" -X -A -t -h 127.0.0.1 -p "$pg_port" -U alice -d sluice -c "SELECT 1" 2>&1) &&
  fail "SCRAM with a wrong password let psql in"
echo "$out" | grep -q 'password authentication failed for user "alice"' || fail "SCRAM, wrong password: $out"
stop

# Cleartext passwords.
start cleartext 'query:
  auth: password
  users: ["bob:hunter2"]'
expect "cleartext, right password" "$(PGPASSWORD=hunter2 "$psql" -X -A -t -h 127.0.0.1 -p "$pg_port" -U bob -d sluice -c "SELECT 'in'" 2>&1)" "in"
out=$(PGPASSWORD=hunter3 "$psql" -X -A -t -h 127.0.0.1 -p "$pg_port" -U bob -d sluice -c "SELECT 1" 2>&1) &&
  fail "a wrong cleartext password let psql in"
echo "$out" | grep -q 'password authentication failed for user "bob"' || fail "cleartext, wrong password: $out"
stop

echo "PASS: psql queries, errors with SQLSTATE, the sandbox's refusals (42501), SCRAM-SHA-256 and cleartext passwords"
