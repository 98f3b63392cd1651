#!/usr/bin/env bash
# SQL grants through psql against one `sluice serve` with authorization on
# (docs/design/0020-data-authorization.md): roles and grants managed by a superuser, lake
# namespaces and tables, a view and a macro over a denied directory, a CTE, topic() under
# SASL, read_parquet of an allowed and a denied directory, \dt and information_schema
# listing only what is granted, \dp, SHOW GRANTS, revocation, grants surviving a restart,
# and malformed or refused statements with their SQLSTATE.
#
# usage: sql_grants_test.sh path/to/sluice
set -euo pipefail

sluice=${1:?usage: $0 path/to/sluice}
psql=""
for p in /usr/bin/psql /usr/lib/postgresql/15/bin/psql; do
  [ -x "$p" ] && psql=$p && break
done
[ -n "$psql" ] || { echo "FAIL: psql is missing (scripts/setup.sh installs postgresql-client)"; exit 1; }
command -v kcat >/dev/null || { echo "FAIL: kcat is missing (scripts/setup.sh installs it)"; exit 1; }
command -v curl >/dev/null || { echo "FAIL: curl is missing"; exit 1; }

tmp=$(mktemp -d)
serve_pid=""
cleanup() {
  [ -n "$serve_pid" ] && kill -KILL "$serve_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/*.out "$tmp"/*.err; do echo "--- $f:"; tail -40 "$f" 2>/dev/null || true; done
  exit 1
}

mkdir -p "$tmp/open" "$tmp/secret"
"$sluice" sql "COPY (SELECT 1 AS x) TO '$tmp/open/x.parquet'; COPY (SELECT 2 AS x) TO '$tmp/secret/x.parquet'" \
  >/dev/null || fail "could not write the parquet files"
cat >"$tmp/sluice.yaml" <<YAML
sasl:
  enabled: true
  users: ["admin:admin-pw", "alice:alice-pw", "bob:bob-pw"]
authorization:
  enabled: true
  super_users: ["User:admin"]
query:
  allowed_directories: ["$tmp/open", "$tmp/secret"]
http:
  auth: basic
topics:
  auto_create: false
YAML

start_serve() {
  : >"$tmp/serve.out"
  "$sluice" serve --kafka-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 --pg-addr 127.0.0.1:0 --schema-registry-addr off --shards 1 \
    --config "$tmp/sluice.yaml" --data-dir "$tmp/data" --warehouse "$tmp/wh" \
    >"$tmp/serve.out" 2>>"$tmp/serve.err" &
  serve_pid=$!
  pg_port=""
  for _ in $(seq 1 400); do
    pg_port=$(sed -n 's/^sluice: Postgres wire protocol on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$tmp/serve.out")
    [ -n "$pg_port" ] && break
    kill -0 "$serve_pid" 2>/dev/null || fail "sluice serve exited before listening"
    sleep 0.05
  done
  [ -n "$pg_port" ] || fail "sluice serve did not print its Postgres port"
  brokers=$(sed -n 's/^sluice: serving Kafka on \([0-9.]*:[0-9]*\) .*/\1/p' "$tmp/serve.out")
  http=$(sed -n 's/^sluice: metrics on \(http:\/\/[0-9.]*:[0-9]*\)\/metrics$/\1/p' "$tmp/serve.out")
}
start_serve

export PGCONNECT_TIMEOUT=10
q() {  # q USER SQL: unaligned, tuples only; an error fails the test
  PGPASSWORD="$1-pw" "$psql" -X -q -A -t -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U "$1" \
    -d sluice -c "$2" 2>>"$tmp/psql.err" || fail "psql as $1: $2"
}
sqlstate() {  # sqlstate USER SQL: the SQLSTATE of its error, or "none"
  local out
  out=$(PGPASSWORD="$1-pw" "$psql" -X -q -A -t -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -h 127.0.0.1 \
        -p "$pg_port" -U "$1" -d sluice -c "$2" 2>&1) && { echo none; return; }
  echo "$out" | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p' | head -1
}
expect() {  # expect WHAT ACTUAL EXPECTED
  [ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"
}
denied() {  # denied USER SQL
  expect "$1: $2" "$(sqlstate "$1" "$2")" "42501"
}

# Tables through the REST catalog as the admin (empty: what is checked is who may read them).
for ns in sales hr; do
  curl -sf -u admin:admin-pw -X POST -H 'Content-Type: application/json' "$http/v1/namespaces" \
    -d "{\"namespace\":[\"$ns\"]}" >/dev/null || fail "create namespace $ns"
done
for t in sales/orders sales/returns hr/people; do
  curl -sf -u admin:admin-pw -X POST -H 'Content-Type: application/json' "$http/v1/namespaces/${t%/*}/tables" \
    -d "{\"name\":\"${t#*/}\",\"schema\":{\"type\":\"struct\",\"schema-id\":0,\"fields\":[{\"id\":1,\"name\":\"id\",\"type\":\"long\",\"required\":false}]}}" \
    >/dev/null || fail "create table $t"
done
# Topics as the admin over SASL.
kafka=(-b "$brokers" -X security.protocol=SASL_PLAINTEXT -X sasl.mechanism=PLAIN -X sasl.username=admin
       -X sasl.password=admin-pw)
/usr/bin/python3 - "$brokers" <<'PY' || fail "create topics"
import sys
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": sys.argv[1], "security.protocol": "SASL_PLAINTEXT",
                 "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-pw"})
for f in a.create_topics([NewTopic("orders", 1, 1), NewTopic("payments", 1, 1)]).values():
    f.result()
PY
seq 1 10 | kcat "${kafka[@]}" -P -t orders || fail "produce to orders"
seq 1 5 | kcat "${kafka[@]}" -P -t payments || fail "produce to payments"

# The superuser manages roles and grants; objects it makes for others.
q admin "CREATE ROLE analysts"
q admin "GRANT analysts TO alice"
q admin "GRANT SELECT ON lake.sales TO analysts"
q admin "GRANT SELECT ON TABLE lake.hr.people TO bob"
q admin "GRANT SELECT ON TOPIC orders TO alice"
q admin "GRANT READ ON DIRECTORY '$tmp/open' TO alice"
q admin "CREATE VIEW leak AS SELECT * FROM read_parquet('$tmp/secret/x.parquet')"
q admin "CREATE VIEW fine AS SELECT * FROM read_parquet('$tmp/open/x.parquet')"
q admin "CREATE MACRO secret_rows() AS TABLE SELECT * FROM read_parquet('$tmp/secret/x.parquet')"
expect "the superuser reads anything" "$(q admin "SELECT x FROM leak")" "2"

# alice: the namespace through her role, the topic, the open directory.
expect "a table of a granted namespace" "$(q alice "SELECT count(*) FROM lake.sales.orders")" "0"
expect "another table of it" "$(q alice "SELECT count(*) FROM lake.sales.returns")" "0"
expect "time travel on a granted table" \
  "$(sqlstate alice "SELECT count(*) FROM lake.sales.orders AT (VERSION => 1)")" "42P01"
denied alice "SELECT count(*) FROM lake.hr.people"
denied alice "SELECT count(*) FROM lake.hr.people AT (VERSION => 1)"
denied alice "WITH p AS (SELECT * FROM lake.hr.people) SELECT count(*) FROM p"
denied alice "SELECT count(*) FROM lake.sales.orders WHERE id IN (SELECT id FROM lake.hr.people)"
expect "a granted topic" "$(q alice "SELECT count(*) FROM topic('orders')")" "10"
denied alice "SELECT count(*) FROM topic('payments')"
# Topics as relations of schema kafka: read as tables, listed in the catalog only when granted.
expect "a granted topic as a table" "$(q alice "SELECT count(*) FROM kafka.orders")" "10"
denied alice "SELECT count(*) FROM kafka.payments"
expect "the topics alice sees in the catalog" "$(q alice "SELECT string_agg(c.relname, ',' \
  ORDER BY c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
  WHERE n.nspname = 'kafka'")" "orders"
expect "the topics the superuser sees" "$(q admin "SELECT string_agg(table_name, ',' \
  ORDER BY table_name) FROM information_schema.tables WHERE table_schema = 'kafka' \
  AND table_name NOT LIKE '\_%' ESCAPE '\\'")" "orders,payments"
expect "an allowed directory" "$(q alice "SELECT x FROM read_parquet('$tmp/open/x.parquet')")" "1"
expect "a view over an allowed directory" "$(q alice "SELECT x FROM fine")" "1"
denied alice "SELECT * FROM read_parquet('$tmp/secret/x.parquet')"
denied alice "SELECT * FROM read_parquet('$tmp/open/../secret/x.parquet')"
denied alice "SELECT * FROM '$tmp/secret/x.parquet'"
denied alice "SELECT * FROM leak"
denied alice "SELECT * FROM secret_rows()"
denied alice "COPY (SELECT * FROM leak) TO STDOUT"
denied alice "CREATE TEMP TABLE t AS SELECT * FROM read_parquet('$tmp/secret/x.parquet')"
denied alice "SELECT * FROM query('SELECT 1')"
# The denial names the object and comes before anything runs.
msg=$(PGPASSWORD=alice-pw "$psql" -X -q -A -t -h 127.0.0.1 -p "$pg_port" -U alice -d sluice \
      -c "SELECT * FROM leak" 2>&1 || true)
case "$msg" in
  *"permission denied for '$tmp/secret/x.parquet'"*"(through view leak)"*) ;;
  *) fail "the denial does not name the file and the view: $msg" ;;
esac

# What alice is shown: only what she may read.
expect "\\dt *.* as alice" "$(q alice '\dt *.*' | cut -d'|' -f1,2 | sort | tr '\n' ' ')" \
  "kafka|orders lake.sales|orders lake.sales|returns "
expect "information_schema as alice" \
  "$(q alice "SELECT table_schema || '.' || table_name FROM information_schema.tables WHERE table_schema LIKE 'lake%' ORDER BY 1" | tr '\n' ' ')" \
  "lake.sales.orders lake.sales.returns "
expect "\\dt *.* as the admin" "$(q admin '\dt *.*' | grep -c '^lake\.')" "3"
expect "\\dp shows the grantee" "$(q admin '\dp "lake.sales".orders' | cut -d'|' -f4)" "analysts=r/sluice"
expect "SHOW GRANTS as alice" "$(q alice "SHOW GRANTS" | sort | tr '\n' ' ')" \
  "alice|MEMBER|role|analysts| alice|READ|directory|DIRECTORY '$tmp/open'| alice|SELECT|namespace|lake.sales|analysts alice|SELECT|topic|TOPIC orders| "
denied alice "SHOW GRANTS FOR bob"
denied alice "GRANT SELECT ON lake.hr TO alice"
denied alice "CREATE ROLE mine"

# The REST catalog answers by the same grants.
rest() {  # rest USER METHOD PATH: the status, the body in $tmp/rest.body
  curl -s -o "$tmp/rest.body" -w '%{http_code}' -u "$1:$1-pw" -X "$2" "$http/v1/$3"
}
expect "REST namespaces as alice" "$(rest alice GET namespaces)" "200"
expect "alice sees her namespace alone" "$(tr -d ' \n' <"$tmp/rest.body")" '{"namespaces":[["sales"]]}'
expect "REST tables of sales as alice" "$(rest alice GET namespaces/sales/tables)" "200"
expect "REST a granted table" "$(rest alice GET namespaces/sales/tables/orders)" "200"
expect "REST a denied table" "$(rest alice GET namespaces/hr/tables/people)" "403"
grep -q ForbiddenException "$tmp/rest.body" || fail "403 without the spec's error: $(cat "$tmp/rest.body")"
expect "REST a denied namespace" "$(rest alice GET namespaces/hr)" "403"
expect "REST a drop without CREATE" "$(rest alice DELETE namespaces/sales/tables/orders)" "403"
expect "REST without a login" \
  "$(curl -s -o /dev/null -w '%{http_code}' "$http/v1/namespaces/sales/tables/orders")" "401"
# A bearer token of alice's (sluice user token asks /v1/oauth/tokens): the same grants.
token=$(printf 'alice-pw\n' | "$sluice" user token alice --password-stdin --http-addr "$http" 2>>"$tmp/token.err") ||
  fail "sluice user token: $(cat "$tmp/token.err")"
bearer() {  # bearer PATH: the status with alice's token
  curl -s -o "$tmp/rest.body" -w '%{http_code}' -H "Authorization: Bearer $token" "$http/v1/$1"
}
expect "a token on a granted table" "$(bearer namespaces/sales/tables/orders)" "200"
expect "a token on a namespace not granted" "$(bearer namespaces/hr)" "403"
expect "a token on a table not granted" "$(bearer namespaces/hr/tables/people)" "403"
expect "a tampered token" "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer ${token}x" \
  "$http/v1/namespaces/sales/tables/orders")" "401"
# iceberg-js with alice's token sees what the grants give her.
if command -v node >/dev/null; then
  js=$(cd "$(dirname "$0")/../.." && node -e "
const { IcebergRestCatalog } = require('iceberg-js')
const c = new IcebergRestCatalog({ baseUrl: '$http', auth: { type: 'bearer', token: '$token' } })
;(async () => {
  const { namespaces } = await c.listNamespaces()
  const tables = await c.listTables({ namespace: ['sales'] })
  await c.loadTable({ namespace: ['sales'], name: 'orders' })
  const denied = await c.loadTable({ namespace: ['hr'], name: 'people' }).then(() => 'loaded', e => e.status)
  console.log(JSON.stringify(namespaces.map(n => n.namespace)) + ' ' + (tables.identifiers || tables).length + ' ' + denied)
})().catch(e => { console.log('FAIL', e.status, e.message) })" 2>&1) || true
  expect "iceberg-js with alice's token" "$js" '[["sales"]] 2 403'
else
  fail "node is missing (scripts/setup.sh installs nodejs)"
fi
q admin "GRANT CREATE ON SCHEMA lake.sales TO alice"
expect "REST a table made with CREATE" "$(curl -s -o /dev/null -w '%{http_code}' -u alice:alice-pw -X POST \
  -H 'Content-Type: application/json' "$http/v1/namespaces/sales/tables" \
  -d '{"name":"mine","schema":{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"id","type":"long","required":false}]}}')" "200"
expect "REST a drop with CREATE" "$(rest alice DELETE namespaces/sales/tables/mine)" "204"
q admin "REVOKE CREATE ON SCHEMA lake.sales FROM alice"

# bob: one table.
expect "bob's table" "$(q bob "SELECT count(*) FROM lake.hr.people")" "0"
denied bob "SELECT count(*) FROM lake.sales.orders"
denied bob "SELECT count(*) FROM topic('orders')"

# Malformed and refused grant statements.
expect "a malformed grant" "$(sqlstate admin "GRANT SELECT ON lake.sales")" "42601"
expect "an unknown grantee" "$(sqlstate admin "GRANT SELECT ON lake.sales TO nobody")" "42704"
expect "an unknown lake object" "$(sqlstate admin "GRANT SELECT ON lake.nope TO alice")" "42P01"
expect "a relative directory" "$(sqlstate admin "GRANT READ ON DIRECTORY 'rel' TO alice")" "22023"
expect "SELECT on a directory" "$(sqlstate admin "GRANT SELECT ON DIRECTORY '/x' TO alice")" "0LP01"
expect "an unknown role" "$(sqlstate admin "DROP ROLE nope")" "42704"
expect "a role twice" "$(sqlstate admin "CREATE ROLE analysts")" "42710"
expect "a role named as a user" "$(sqlstate admin "CREATE ROLE alice")" "42710"
expect "a cycle of roles" "$(q admin "CREATE ROLE leads" && q admin "GRANT analysts TO leads" &&
  sqlstate admin "GRANT leads TO analysts")" "0LP01"

# Revocation takes effect at once; grants survive a restart.
q admin "REVOKE analysts FROM alice"
denied alice "SELECT count(*) FROM lake.sales.orders"
kill -TERM "$serve_pid"
wait "$serve_pid" 2>/dev/null || true
serve_pid=""
start_serve
expect "bob's grant after a restart" "$(q bob "SELECT count(*) FROM lake.hr.people")" "0"
denied alice "SELECT count(*) FROM lake.sales.orders"
expect "alice's topic after a restart" "$(q alice "SELECT count(*) FROM topic('orders')")" "10"
q admin "GRANT analysts TO alice"
expect "the role again" "$(q alice "SELECT count(*) FROM lake.sales.orders")" "0"
q admin "DROP ROLE analysts"
denied alice "SELECT count(*) FROM lake.sales.orders"

echo "PASS: sql grants"
