// The npm `pg` driver (pinned in package.json) against the query server of a real
// `sluice serve`: the extended protocol with parameters, named prepared statements run
// again with new values, row limits (Execute with `rows`, PortalSuspended, Flush),
// text results parsed by pg-types, binary results (`binary: true`) checked value by
// value, errors with their SQLSTATE (the connection goes on), the sandbox, and SCRAM
// and cleartext passwords, right and wrong; the partitioned rewrites (latest row per key)
// run for extended-protocol statements too: with parameters, in row-limited batches,
// cancelled during their planning steps, with the simple protocol's answer.
//
// usage: node pg_driver_test.js path/to/sluice   (packages from the repository's node_modules)
'use strict'

process.env.TZ = 'UTC'
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const net = require('node:net')
const path = require('node:path')

let Client
try {
  ({ Client } = require('pg'))
} catch (e) {
  console.log('FAIL: pg is missing from node_modules (scripts/setup.sh runs npm ci): ' + e.message)
  process.exit(1)
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const running = new Set()

// `sluice serve` with its own data directory; resolves to { proc, port, logs() }.
async function startServe (sluice, dir, name, yaml) {
  const args = ['serve', '--kafka-addr', '127.0.0.1:0', '--http-addr', '127.0.0.1:0', '--pg-addr', '127.0.0.1:0', '--schema-registry-addr', 'off',
    '--data-dir', path.join(dir, name + '-data'), '--shards', '1']
  if (yaml) {
    fs.writeFileSync(path.join(dir, name + '.yaml'), yaml)
    args.push('--config', path.join(dir, name + '.yaml'))
  }
  const out = path.join(dir, name + '.out')
  const err = path.join(dir, name + '.err')
  const fds = [fs.openSync(out, 'w'), fs.openSync(err, 'w')]
  const proc = spawn(sluice, args, { stdio: ['ignore', fds[0], fds[1]] })
  fds.forEach(fd => fs.closeSync(fd))
  running.add(proc)
  const exit = new Promise(resolve => proc.on('exit', (code, signal) => { running.delete(proc); resolve(signal || code) }))
  const logs = () => [out, err].map(f => `--- ${f}:\n` + fs.readFileSync(f, 'utf8').split('\n').slice(-40).join('\n')).join('\n')
  // How many log lines so far contain `text`.
  const logCount = text => [out, err].map(f => fs.readFileSync(f, 'utf8').split('\n').filter(l => l.includes(text)).length)
    .reduce((a, b) => a + b, 0)
  const deadline = Date.now() + 30000
  for (;;) {
    const m = /^sluice: Postgres wire protocol on 127\.0\.0\.1:(\d+)$/m.exec(fs.readFileSync(out, 'utf8'))
    if (m) return { proc, port: Number(m[1]), logs, logCount, stop: async () => { proc.kill('SIGTERM'); return exit } }
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error('sluice serve did not start:\n' + logs())
    await sleep(50)
  }
}

async function expectCode (promise, code, what) {
  try {
    await promise
  } catch (e) {
    assert.equal(e.code, code, `${what}: ${e.message}`)
    return e
  }
  assert.fail(`${what}: succeeded, expected SQLSTATE ${code}`)
}

async function queries (port) {
  const c = new Client({ host: '127.0.0.1', port, user: 'tester', database: 'sluice' })
  await c.connect()
  try {
    // Parameters through the extended protocol.
    let r = await c.query('SELECT $1::INT + $2::INT AS s, $3::VARCHAR AS t, $4::BOOLEAN AS b', [2, 3, 'héllo', true])
    assert.deepEqual(r.rows, [{ s: 5, t: 'héllo', b: true }])
    assert.equal(r.command, 'SELECT')

    await c.query('CREATE TABLE orders (id INT, customer VARCHAR, amount DECIMAL(10,2), tags VARCHAR[], placed TIMESTAMP)')
    r = await c.query('INSERT INTO orders VALUES ($1, $2, $3, $4, $5)', [1, 'ann', '12.50', ['x', 'y z'], '2024-01-02 03:04:05'])
    assert.equal(r.rowCount, 1)
    assert.equal(r.command, 'INSERT')
    for (let i = 2; i <= 500; i++) {
      await c.query({ name: 'insert-order', text: 'INSERT INTO orders VALUES ($1, $2, $3, NULL, NULL)', values: [i, 'c' + (i % 7), i / 4] })
    }
    // A named statement, run again with new values.
    for (const customer of ['c1', 'c2']) {
      r = await c.query({ name: 'by-customer', text: 'SELECT count(*)::INT AS n FROM orders WHERE customer = $1', values: [customer] })
      assert.ok(r.rows[0].n > 60, `${customer}: ${r.rows[0].n}`)
    }

    // Text results parsed by pg-types.
    r = await c.query("SELECT 5000000000::BIGINT AS i8, 1.50::DECIMAL(4,2) AS n, DATE '2024-02-29' AS d, " +
      "TIMESTAMPTZ '2024-01-02 03:04:05.25+00' AS tz, '{\"a\": [1, 2]}'::JSON AS j, [1, NULL, 3] AS a, " +
      "['a', 'b c', NULL] AS ta, '\\x01\\xff'::BLOB AS by, '00112233-4455-6677-8899-aabbccddeeff'::UUID AS u, " +
      'INTERVAL 26 HOUR AS iv, 0.1::DOUBLE AS f')
    const row = r.rows[0]
    assert.equal(row.i8, '5000000000')
    assert.equal(row.n, '1.50')
    assert.equal(row.d.getTime(), Date.UTC(2024, 1, 29))
    assert.equal(row.tz.getTime(), Date.UTC(2024, 0, 2, 3, 4, 5, 250))
    assert.deepEqual(row.j, { a: [1, 2] })
    assert.deepEqual(row.a, [1, null, 3])
    assert.deepEqual(row.ta, ['a', 'b c', null])
    assert.deepEqual(row.by, Buffer.from([1, 255]))
    assert.equal(row.u, '00112233-4455-6677-8899-aabbccddeeff')
    assert.equal(row.iv.hours, 26)
    assert.equal(row.f, 0.1)
    assert.equal(r.fields.find(f => f.name === 'n').dataTypeID, 1700)

    // Binary results. pg 8.23.1 reads every DataRow field as a UTF-8 string before it
    // hands a binary one to its parser (pg-protocol's parseDataRowMessage), so bytes that
    // are not valid UTF-8 reach the parser altered: the values are picked so that their
    // binary forms are plain ASCII bytes (libpq, pg_libpq_test, checks the rest).
    r = await c.query({
      text: 'SELECT $1::SMALLINT AS i2, $2::INT AS i4, 4294967297::BIGINT AS i8, 2.0::FLOAT AS f4, 2.5::DOUBLE AS f8, ' +
        "false AS b, 12345.678::DECIMAL(10,3) AS n, TIMESTAMP '2000-01-01 01:11:34.967296' AS ts, " +
        "TIMESTAMPTZ '2000-01-13 17:25:11.627776+00' AS tz, 'text' AS t, [1, 2, 3]::INTEGER[] AS arr, NULL::INT AS nul",
      values: [7, 42],
      binary: true
    })
    const b = r.rows[0]
    assert.equal(b.i2, 7)
    assert.equal(b.i4, 42)
    assert.equal(String(b.i8), '4294967297')
    assert.equal(b.f4, 2)
    assert.equal(b.f8, 2.5)
    assert.equal(b.b, false)
    assert.equal(Number(b.n), 12345.678)
    assert.equal(b.ts.getTime(), Date.UTC(2000, 0, 1, 1, 11, 34, 967))
    assert.equal(b.tz.getTime(), Date.UTC(2000, 0, 13, 17, 25, 11, 627))
    assert.equal(b.t, 'text')
    assert.deepEqual(b.arr, [1, 2, 3])
    assert.equal(b.nul, null)
    assert.ok(r.fields.every(f => f.format === 'binary'), 'every column binary')

    // Row limits: Execute with `rows`, PortalSuspended, Execute again after Flush.
    r = await c.query({ text: 'SELECT range AS n FROM range(1000) WHERE range >= $1', values: [10], rows: 64 })
    assert.equal(r.rows.length, 990)
    assert.equal(r.rows[989].n, '999')  // BIGINT: a string, as pg gives int8

    // Errors and their SQLSTATE; the connection goes on.
    await expectCode(c.query('SELEC 1'), '42601', 'a syntax error')
    const unknown = await expectCode(c.query('SELECT * FROM nowhere WHERE id = $1', [1]), '42P01', 'an unknown table')
    assert.equal(unknown.position, '15', 'the position of the unknown table (extended protocol)')
    await expectCode(c.query('SELECT $1::INT', ['not a number']), '22P02', 'a bad parameter')
    await expectCode(c.query('SET memory_limit = \'1TB\''), '42501', 'SET memory_limit')
    await expectCode(c.query("COPY (SELECT 1) TO '/tmp/sluice-pg-escape.csv'"), '42501', 'COPY TO')
    await expectCode(c.query("ATTACH ':memory:' AS m"), '42501', 'ATTACH')
    await expectCode(c.query('INSTALL httpfs'), '42501', 'INSTALL')
    r = await c.query('SELECT count(*)::INT AS n FROM orders')
    assert.equal(r.rows[0].n, 500)
  } finally {
    await c.end()
  }
}

// A CancelRequest for `c`'s running query, as pg's own cancel sends it.
function cancel (port, c) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1', () => {
      const b = Buffer.alloc(16)
      b.writeInt32BE(16, 0)
      b.writeInt32BE(80877102, 4)
      b.writeInt32BE(c.processID, 8)
      b.writeInt32BE(c.secretKey, 12)
      sock.end(b)
    })
    sock.on('close', resolve)
    sock.on('error', reject)
  })
}

// Latest row per key through both protocols: the extended protocol's statements are
// rewritten too (the server logs each statement that ran planning steps), with the
// same answer.
async function rewrites (s) {
  const c = new Client({ host: '127.0.0.1', port: s.port, user: 'tester', database: 'sluice' })
  await c.connect()
  try {
    // Over DuckDB's 1M-row threshold (min_rows_to_rewrite); ids unique, so no ties.
    await c.query('CREATE TABLE events AS SELECT range AS id, range % 20000 AS k, (range * 7919) % 1000003 AS ts ' +
      'FROM range(1200000)')
    // The parameter is outside the window's input: DuckDB estimates a filter there at a
    // fifth of the rows, under the threshold (the one inside is in the next query).
    const latest = bound => 'SELECT k, id, ts FROM (SELECT k, id, ts, ' +
      'row_number() OVER (PARTITION BY k ORDER BY ts DESC, id DESC) AS rn FROM events) AS w ' +
      'WHERE rn = 1 AND k >= ' + bound + ' ORDER BY k'
    const simpleLine = 'simple-query statement ran planning steps'
    const extendedLine = 'extended-protocol statement ran planning steps'

    const simple = await c.query(latest('100'))  // no values: the simple protocol
    assert.equal(simple.rows.length, 19900)
    assert.equal(s.logCount(simpleLine), 1, 'the simple-protocol query was rewritten')

    const params = await c.query({ text: latest('$1'), values: [100] })
    assert.deepEqual(params.fields.map(f => [f.name, f.dataTypeID]), simple.fields.map(f => [f.name, f.dataTypeID]))
    assert.deepEqual(params.rows, simple.rows)
    assert.equal(s.logCount(extendedLine), 1, 'the extended-protocol query with a parameter was rewritten')

    // Row limits: Execute with 1000 rows at a time, PortalSuspended in between.
    const batched = await c.query({ text: latest('$1'), values: [100], rows: 1000 })
    assert.deepEqual(batched.rows, simple.rows)
    assert.equal(s.logCount(extendedLine), 2, 'the row-limited query was rewritten')

    // A named statement without parameters (still the extended protocol), twice.
    for (let i = 0; i < 2; i++) {
      const named = await c.query({ name: 'latest-all', text: latest('100') })
      assert.deepEqual(named.rows, simple.rows)
    }
    assert.equal(s.logCount(extendedLine), 4, 'the named statement was rewritten at each run')

    // A parameter inside the window's input (6M rows, a fifth estimated after the
    // filter): a constant once substituted, so the rewrite applies.
    const inside = await c.query({
      text: 'SELECT k, v FROM (SELECT r % 1000 AS k, r AS v, row_number() OVER (PARTITION BY r % 1000 ORDER BY r DESC, ' +
        'r % 7) AS rn FROM range(6000000) t(r) WHERE r >= $1) AS w WHERE rn = 1 ORDER BY k',
      values: [5]
    })
    assert.equal(inside.rows.length, 1000)
    inside.rows.forEach((row, k) => assert.deepEqual(row, { k: String(k), v: String(5999000 + k) }))
    assert.equal(s.logCount(extendedLine), 5, 'the query with a parameter in the window\'s input was rewritten')

    // A cancel while the statement plans and runs its steps (50M rows: seconds of work).
    const slow = 'SELECT k, v FROM (SELECT r % 100000 AS k, r AS v, ' +
      'row_number() OVER (PARTITION BY r % 100000 ORDER BY r DESC, r % 7) AS rn FROM range(50000000) t(r) ' +
      'WHERE r >= $1) AS w WHERE rn = 1'
    let settled = false
    const running = c.query({ text: slow, values: [0] }).finally(() => { settled = true })
    // Until it answers: a cancel that lands before the statement runs is dropped.
    const cancelling = (async () => {
      while (!settled) {
        await sleep(300)
        if (!settled) await cancel(s.port, c)
      }
    })()
    const e = await expectCode(running, '57014', 'a cancel during the planning steps')
    await cancelling
    assert.match(e.message, /canceling statement due to user request/)
    const left = await c.query("SELECT count(*)::INT AS n FROM duckdb_tables() WHERE table_name LIKE '__sluice_rewrite%'")
    assert.equal(left.rows[0].n, 0, 'the temp table of the cancelled plan was dropped')
    const after = await c.query({ text: 'SELECT $1::INT AS one', values: [1] })
    assert.equal(after.rows[0].one, 1)
  } finally {
    await c.end()
  }
}

async function auth (port, user, password) {
  const good = new Client({ host: '127.0.0.1', port, user, password, database: 'sluice' })
  await good.connect()
  const r = await good.query('SELECT 1 AS one')
  assert.equal(r.rows[0].one, 1)
  await good.end()
  const bad = new Client({ host: '127.0.0.1', port, user, password: password + 'x', database: 'sluice' })
  const e = await expectCode(bad.connect(), '28P01', `${user} with a wrong password`)
  assert.match(e.message, /password authentication failed/)
  await bad.end().catch(() => {})
}

// SQL grants through the extended protocol (docs/design/0020-data-authorization.md): grant
// statements prepared and executed (a Parse alone changes nothing), a denial before any row,
// a granted directory, and a user's max_statements holding its second statement while
// another user's run.
async function grants (s, dir) {
  const connect = async user => {
    const c = new Client({ host: '127.0.0.1', port: s.port, user, password: user + '-pw', database: 'sluice' })
    await c.connect()
    return c
  }
  const admin = await connect('admin')
  const alice = await connect('alice')
  const bob = await connect('bob')
  try {
    const open = path.join(dir, 'open')
    fs.mkdirSync(open, { recursive: true })
    await admin.query(`COPY (SELECT 42 AS x) TO '${open}/x.parquet'`)
    // Prepared grant statements: the tag, and the effect only once executed.
    let r = await admin.query({ name: 'g', text: `GRANT READ ON DIRECTORY '${open}' TO alice` })
    assert.equal(r.command, 'GRANT')
    r = await alice.query({ text: `SELECT x FROM read_parquet('${open}/x.parquet') WHERE x = $1`, values: [42] })
    assert.deepEqual(r.rows, [{ x: 42 }])
    await expectCode(bob.query({ text: `SELECT x FROM read_parquet('${open}/x.parquet') WHERE x = $1`, values: [42] }),
      '42501', 'bob without a grant, extended protocol')
    await expectCode(alice.query({ text: 'SELECT * FROM read_parquet($1)', values: [`${open}/x.parquet`] }),
      '42501', 'a path as a parameter')
    await expectCode(alice.query({ text: 'GRANT READ ON DIRECTORY $1 TO alice', values: ['/'] }),
      '42601', 'a grant with a parameter')
    await expectCode(alice.query({ text: `GRANT READ ON DIRECTORY '/' TO alice` }), '42501',
      'a grant by a user who is not a superuser')
    r = await alice.query({ text: 'SHOW GRANTS' })
    assert.deepEqual(r.rows.map(g => g.privilege + ' ' + g.object), [`READ DIRECTORY '${open}'`])
    r = await admin.query('REVOKE READ ON DIRECTORY \'' + open + '\' FROM alice')
    assert.equal(r.command, 'REVOKE')
    await expectCode(alice.query(`SELECT x FROM read_parquet('${open}/x.parquet')`), '42501', 'after the revoke')

    // max_statements: bob's second statement waits for his first (and gives up after
    // query.queue_timeout_seconds), alice's runs meanwhile.
    await admin.query('ALTER ROLE bob SET max_statements = 1')
    const bob2 = await connect('bob')
    const long = bob.query('SELECT count(*) FROM range(100000000000) t(i) WHERE i % 7 = 99')
    long.catch(() => {})
    // Until the long one holds bob's turn (a second that got in first just ran).
    let refused = null
    for (let i = 0; i < 50 && !refused; ++i) {
      await sleep(100)
      refused = await bob2.query('SELECT count(*) FROM range(10)').then(() => null, e => e)
    }
    assert.ok(refused, "bob's second statement was never held")
    assert.equal(refused.code, '53300', refused.message)
    assert.match(refused.message, /max_statements/)
    r = await alice.query('SELECT count(*) AS n FROM range(10)')
    assert.equal(Number(r.rows[0].n), 10)
    await bob2.end()
    await bob.end().catch(() => {})
  } finally {
    await admin.end().catch(() => {})
    await alice.end().catch(() => {})
    await bob.end().catch(() => {})
  }
}

async function main () {
  const sluice = process.argv[2]
  if (!sluice) throw new Error('usage: node pg_driver_test.js path/to/sluice')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-pg-'))
  try {
    let s = await startServe(sluice, dir, 'trust')
    try {
      await queries(s.port)
      await rewrites(s)
    } catch (e) {
      console.log(s.logs())
      throw e
    }
    assert.equal(await s.stop(), 0)
    s = await startServe(sluice, dir, 'scram', 'query:\n  users: ["alice:wonder land"]\n')
    await auth(s.port, 'alice', 'wonder land')
    assert.equal(await s.stop(), 0)
    s = await startServe(sluice, dir, 'cleartext', 'query:\n  auth: password\n  users: ["bob:builder"]\n')
    await auth(s.port, 'bob', 'builder')
    assert.equal(await s.stop(), 0)
    s = await startServe(sluice, dir, 'grants', 'query:\n  users: ["admin:admin-pw", "alice:alice-pw", "bob:bob-pw"]\n' +
      `  allowed_directories: ["${dir}"]\n  queue_timeout_seconds: 1\n` +
      'authorization:\n  enabled: true\n  super_users: ["User:admin"]\n')
    try {
      await grants(s, dir)
    } catch (e) {
      console.log(s.logs())
      throw e
    }
    s.proc.kill('SIGKILL')  // bob's long statement would hold the stop
  } finally {
    for (const p of running) p.kill('SIGKILL')
    fs.rmSync(dir, { recursive: true, force: true })
  }
  console.log('PASS: pg driver: parameters, prepared statements, row limits, text and binary results, errors, sandbox, SCRAM and cleartext auth, rewrites in both protocols, grants and per-user limits')
}

main().catch(e => {
  console.log('FAIL: ' + (e.stack || e))
  for (const p of running) p.kill('SIGKILL')
  process.exit(1)
})
