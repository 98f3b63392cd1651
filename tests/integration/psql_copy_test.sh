#!/usr/bin/env bash
# psql 15's \copy against the query server of `sluice serve`: `\copy (SELECT ...) TO 'file'
# CSV HEADER` and the text format to stdout (psql sends COPY ... TO STDOUT and writes the
# CopyData itself), compared byte for byte with what Postgres writes for the same values
# (quotes, delimiters, newlines, NULL and the empty string, a timestamp, a numeric, a bool,
# a bytea, non-ASCII); a large export streamed; and the refusals: COPY FROM STDIN (0A000),
# an unknown format (22023) or option (42601), PROGRAM and a server-side file (42501), an
# error in the middle of the rows.
#
# usage: psql_copy_test.sh path/to/sluice
set -euo pipefail

sluice=${1:?usage: $0 path/to/sluice}
psql=""
for p in /usr/bin/psql /usr/lib/postgresql/15/bin/psql; do
  [ -x "$p" ] && psql=$p && break
done
[ -n "$psql" ] || { echo "FAIL: psql is missing (scripts/setup.sh installs postgresql-client)"; exit 1; }

tmp=$(mktemp -d)
pid=""
cleanup() {
  [ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/*.out "$tmp"/*.err; do echo "--- $f:"; tail -40 "$f" 2>/dev/null || true; done
  exit 1
}

"$sluice" serve --kafka-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 --pg-addr 127.0.0.1:0 --schema-registry-addr off \
  --data-dir "$tmp/data" --shards 1 >"$tmp/serve.out" 2>"$tmp/serve.err" &
pid=$!
pg_port=""
for _ in $(seq 1 400); do
  pg_port=$(sed -n 's/^sluice: Postgres wire protocol on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$tmp/serve.out")
  [ -n "$pg_port" ] && break
  kill -0 "$pid" 2>/dev/null || fail "sluice serve exited before listening"
  sleep 0.05
done
[ -n "$pg_port" ] || fail "sluice serve did not print its Postgres port"

export PGCONNECT_TIMEOUT=10 PGSSLMODE=prefer
run() {  # run FILE: runs a psql script (one \copy per line), fails the test on an error
  "$psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U tester -d sluice -f "$1" 2>>"$tmp/psql.err" ||
    fail "psql -f $1: $(cat "$1")"
}
sqlstate() {  # sqlstate COMMAND: the SQLSTATE psql reports, or "none"
  local out
  out=$("$psql" -X -q -A -t -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -h 127.0.0.1 -p "$pg_port" -U tester \
        -d sluice -c "$1" 2>&1) && { echo none; return; }
  echo "$out" | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p' | head -1
}
same() {  # same WHAT FILE EXPECTED-FILE
  cmp -s "$2" "$3" || fail "$1: got
$(od -c "$2" | head -20)
expected
$(od -c "$3" | head -20)"
}

# The values: one row with everything that needs quoting or escaping, one of NULLs.
values="SELECT 1 AS id, 'say \"hi\", bye' AS s, NULL::VARCHAR AS n, '' AS e, E'two\\nlines\\ttab\\\\' AS nl,
  TIMESTAMP '2024-01-02 03:04:05.5' AS ts, 12.340::DECIMAL(10,3) AS num, true AS b, '\\xDE\\xAD'::BLOB AS by,
  'zürich 東京' AS u
  UNION ALL SELECT 2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL ORDER BY id"
values=$(echo "$values" | tr '\n' ' ')

cat >"$tmp/csv.psql" <<SQL
\\copy ($values) TO '$tmp/out.csv' CSV HEADER
\\copy ($values) TO '$tmp/out2.csv' WITH (FORMAT csv, HEADER true, FORCE_QUOTE (s, id))
\\copy ($values) TO '$tmp/out.txt'
SQL
run "$tmp/csv.psql"

printf '%s\n' 'id,s,n,e,nl,ts,num,b,by,u' \
  '1,"say ""hi"", bye",,"","two' 'lines	tab\",2024-01-02 03:04:05.5,12.340,t,\xdead,zürich 東京' \
  '2,,,,,,,,,' >"$tmp/expected.csv"
same "\\copy TO file CSV HEADER" "$tmp/out.csv" "$tmp/expected.csv"

printf '%s\n' 'id,s,n,e,nl,ts,num,b,by,u' \
  '"1","say ""hi"", bye",,"","two' 'lines	tab\",2024-01-02 03:04:05.5,12.340,t,\xdead,zürich 東京' \
  '"2",,,,,,,,,' >"$tmp/expected2.csv"
same "\\copy TO file WITH (FORMAT csv, FORCE_QUOTE ...)" "$tmp/out2.csv" "$tmp/expected2.csv"

printf '%s\n' '1	say "hi", bye	\N		two\nlines\ttab\\	2024-01-02 03:04:05.5	12.340	t	\\xdead	zürich 東京' \
  '2	\N	\N	\N	\N	\N	\N	\N	\N	\N' >"$tmp/expected.txt"
same "\\copy TO file (text)" "$tmp/out.txt" "$tmp/expected.txt"

# To psql's stdout, and the server-side form psql also runs.
"$psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U tester -d sluice \
  -c "\\copy ($values) TO STDOUT" >"$tmp/stdout.txt" 2>>"$tmp/psql.err" || fail "\\copy TO STDOUT"
same "\\copy TO STDOUT" "$tmp/stdout.txt" "$tmp/expected.txt"
"$psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U tester -d sluice \
  -c "COPY ($values) TO STDOUT (FORMAT csv, HEADER)" >"$tmp/server.csv" 2>>"$tmp/psql.err" || fail "COPY TO STDOUT"
same "COPY TO STDOUT (FORMAT csv, HEADER)" "$tmp/server.csv" "$tmp/expected.csv"

# A large export streams (the server holds a chunk, not the result).
echo "\\copy (SELECT range AS n, 'row ' || range AS s FROM range(300000)) TO '$tmp/big.csv' CSV" >"$tmp/big.psql"
run "$tmp/big.psql"
[ "$(wc -l <"$tmp/big.csv")" = 300000 ] || fail "big export: $(wc -l <"$tmp/big.csv") lines"
[ "$(tail -1 "$tmp/big.csv")" = "299999,row 299999" ] || fail "big export ends with $(tail -1 "$tmp/big.csv")"

# Refusals and errors, each with its SQLSTATE; the session goes on after each.
echo "1,x" >"$tmp/in.csv"
[ "$(sqlstate "CREATE TABLE t (a INT, b VARCHAR)")" = none ] || fail "CREATE TABLE"
[ "$(sqlstate "\\copy t FROM '$tmp/in.csv' CSV")" = 0A000 ] || fail "\\copy FROM: not 0A000"
[ "$(sqlstate "\\copy t TO '$tmp/t.csv' (FORMAT xml)")" = 22023 ] || fail "an unknown format: not 22023"
[ "$(sqlstate "\\copy t TO '$tmp/t.csv' (NOPE)")" = 42601 ] || fail "an unknown option: not 42601"
[ "$(sqlstate "COPY t TO PROGRAM 'true'")" = 42501 ] || fail "COPY TO PROGRAM: not 42501"
[ "$(sqlstate "COPY t TO '$tmp/server-side.csv'")" = 42501 ] || fail "COPY TO a file outside: not 42501"
[ ! -e "$tmp/server-side.csv" ] || fail "COPY wrote a file outside the allowed directories"
# DuckDB 1.5 sometimes loses a worker thread's error in a streamed result and reports an
# interrupt: the server says XX000 then (never 57014, a cancel nobody made), and a second
# run shows the error (docs/design/0010, decision 7).
for _ in 1 2 3; do
  state=$(sqlstate "\\copy (SELECT CASE WHEN range < 199000 THEN range ELSE error('boom') END FROM range(200000)) TO '$tmp/broken.txt'")
  [ "$state" = XX000 ] || break
done
[ "$state" = 22023 ] || fail "an error while streaming: '$state'"

kill -TERM "$pid"
wait "$pid" || fail "sluice serve exited $? after SIGTERM"
pid=""
echo "OK"
