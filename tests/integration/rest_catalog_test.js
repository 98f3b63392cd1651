// The Iceberg REST catalog of `sluice serve --warehouse` with independent clients:
// iceberg-js (a REST catalog client, npm) creates, lists, loads, commits, renames,
// registers and drops namespaces and tables; a real pipeline (`sluice pipeline run`, the
// iceberg sink) writes a table into the same warehouse from Kafka (KafkaJS produces the
// input), and icebird (an Iceberg reader, npm) reads that table from the metadata the
// catalog serves, every row checked; then serve restarts and everything is still there.
//
// icebird fetches every file by URL; the tables' files are file:// URLs, so it gets a
// fetch that reads those from disk (Node's fetch has no file: scheme).
//
// usage: node rest_catalog_test.js path/to/sluice   (packages from the repository's node_modules)
'use strict'

const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { fileURLToPath } = require('node:url')

let IcebergRestCatalog, IcebergError, Kafka, logLevel
try {
  ({ IcebergRestCatalog, IcebergError } = require('iceberg-js'));
  ({ Kafka, logLevel } = require('kafkajs'))
} catch (e) {
  console.log('FAIL: iceberg-js or kafkajs is missing from node_modules (scripts/setup.sh runs npm ci): ' + e.message)
  process.exit(1)
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

async function waitUntil (predicate, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await predicate()
    if (value) return value
    if (Date.now() >= deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`)
    await sleep(50)
  }
}

// Rejects unless `promise` fails with an IcebergError of this status (and type, if given).
async function expectError (promise, status, type, what) {
  try {
    await promise
  } catch (e) {
    assert.ok(e instanceof IcebergError, `${what}: not an IcebergError: ${e}`)
    assert.equal(e.status, status, `${what}: status ${e.status} (${e.message})`)
    if (type) assert.equal(e.icebergType, type, `${what}: type`)
    return e
  }
  assert.fail(`${what}: succeeded, expected ${status}`)
}

const running = new Set()  // every child still running, stopped when the test fails

// A child process whose stdout and stderr go to files in `dir`.
class Proc {
  constructor (dir, name, args, env) {
    this.out = path.join(dir, name + '.out')
    this.err = path.join(dir, name + '.err')
    const fds = [fs.openSync(this.out, 'w'), fs.openSync(this.err, 'w')]
    this.proc = spawn(args[0], args.slice(1), { stdio: ['ignore', fds[0], fds[1]], env: { ...process.env, ...env } })
    fds.forEach(fd => fs.closeSync(fd))
    this.exited = false
    running.add(this)
    this.exit = new Promise(resolve => this.proc.on('exit', (code, signal) => {
      this.exited = true
      running.delete(this)
      resolve(signal || code)
    }))
  }

  logs () {
    return [this.out, this.err].map(f => `--- ${f}:\n` + fs.readFileSync(f, 'utf8').split('\n').slice(-40).join('\n')).join('\n')
  }

  async waitFor (re, what) {
    return waitUntil(() => {
      if (this.exited) throw new Error(`${what}: the process exited:\n${this.logs()}`)
      return re.exec(fs.readFileSync(this.out, 'utf8'))
    }, 60000, what)
  }

  async stop () {
    if (!this.exited) this.proc.kill('SIGTERM')
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 60000)
    const code = await this.exit
    clearTimeout(timer)
    return code
  }
}

// `sluice serve` with the catalog on a free port, over `dir`/data and `dir`/lake.
async function startServe (sluice, dir, run) {
  const p = new Proc(dir, `serve-${run}`, [sluice, 'serve', '--kafka-addr', '127.0.0.1:0', '--http-addr', '127.0.0.1:0', '--pg-addr', '127.0.0.1:0', '--schema-registry-addr', 'off',
    '--data-dir', path.join(dir, 'data'), '--warehouse', path.join(dir, 'lake'), '--shards', '2'])
  const kafka = await p.waitFor(/^sluice: serving Kafka on (127\.0\.0\.1:\d+) /m, 'sluice serve listening')
  const http = await p.waitFor(/^sluice: Iceberg REST catalog on (http:\/\/127\.0\.0\.1:\d+)\/v1 /m, 'the catalog')
  p.bootstrap = kafka[1]
  p.baseUrl = http[1]
  return p
}

// fetch for icebird: file:// URLs read from disk (the whole file, status 200, which
// hyparquet takes for a server without range requests); anything else is refused.
const realFetch = globalThis.fetch
async function fileFetch (url, init) {
  const u = typeof url === 'string' ? url : url.url
  if (!u.startsWith('file:')) return realFetch(url, init)
  const file = fileURLToPath(u)
  if (!fs.existsSync(file)) return new Response('not found', { status: 404 })
  const bytes = fs.readFileSync(file)
  if (init && init.method === 'HEAD') {
    return new Response(null, { status: 200, headers: { 'content-length': String(bytes.length) } })
  }
  return new Response(bytes, { status: 200, headers: { 'content-length': String(bytes.length) } })
}

const SCHEMA = {
  type: 'struct',
  'schema-id': 0,
  fields: [
    { id: 1, name: 'id', type: 'long', required: true },
    { id: 2, name: 'ts', type: 'timestamptz', required: false },
    { id: 3, name: 'city', type: 'string', required: false }
  ]
}

async function catalogRoutes (catalog, dir) {
  const config = await catalog.loadConfig()
  assert.ok(config.endpoints.includes('POST /v1/{prefix}/tables/rename'), JSON.stringify(config))

  // Namespaces, one and two levels (the path joins levels with %1F).
  await catalog.createNamespace({ namespace: ['sales'] }, { properties: { owner: 'ann' } })
  await catalog.createNamespace({ namespace: ['sales', 'eu'] }, { properties: { region: 'eu' } })
  await expectError(catalog.createNamespace({ namespace: ['sales'] }), 409, 'AlreadyExistsException', 'create twice')
  const { namespaces } = await catalog.listNamespaces()
  assert.deepEqual(namespaces, [{ namespace: ['sales'] }])
  const children = await catalog.listNamespaces({ parent: { namespace: ['sales'] } })
  assert.deepEqual(children.namespaces, [{ namespace: ['sales', 'eu'] }])
  assert.deepEqual((await catalog.loadNamespaceMetadata({ namespace: ['sales', 'eu'] })).properties, { region: 'eu' })
  assert.equal(await catalog.namespaceExists({ namespace: ['sales', 'eu'] }), true)
  assert.equal(await catalog.namespaceExists({ namespace: ['nope'] }), false)
  await expectError(catalog.loadNamespaceMetadata({ namespace: ['nope'] }), 404, 'NoSuchNamespaceException', 'load missing')
  const updated = await catalog.updateNamespaceProperties({ namespace: ['sales'] },
    { updates: { team: 'data' }, removals: ['owner', 'absent'] })
  assert.deepEqual(updated.updated, ['team'])
  assert.deepEqual(updated.removed, ['owner'])
  assert.deepEqual(updated.missing, ['absent'])
  assert.deepEqual((await catalog.loadNamespaceMetadata({ namespace: ['sales'] })).properties, { team: 'data' })

  // A table with a schema and a partition spec.
  const eu = { namespace: ['sales', 'eu'] }
  const orders = { namespace: ['sales', 'eu'], name: 'orders' }
  const created = await catalog.createTableResult(eu, {
    name: 'orders',
    schema: SCHEMA,
    'partition-spec': { 'spec-id': 0, fields: [{ 'source-id': 2, 'field-id': 1000, name: 'ts_day', transform: 'day' }] },
    'write-order': { 'order-id': 0, fields: [] },
    properties: { 'write.format.default': 'parquet' }
  })
  const root = path.join(dir, 'lake', 'sales', 'eu', 'orders')
  assert.equal(created['metadata-location'], 'file://' + path.join(root, 'metadata', 'v1.metadata.json'))
  assert.ok(fs.existsSync(path.join(root, 'metadata', 'v1.metadata.json')))
  const m1 = created.metadata
  assert.equal(m1['format-version'], 2)
  assert.equal(m1.location, 'file://' + root)
  assert.deepEqual(m1.schemas[0].fields.map(f => [f.id, f.name, f.type]), [[1, 'id', 'long'], [2, 'ts', 'timestamptz'], [3, 'city', 'string']])
  assert.deepEqual(m1['partition-specs'][0].fields, [{ name: 'ts_day', transform: 'day', 'source-id': 2, 'field-id': 1000 }])
  assert.equal(m1.properties['write.format.default'], 'parquet')
  await expectError(catalog.createTable(eu, { name: 'orders', schema: SCHEMA }), 409, 'AlreadyExistsException', 'create table twice')
  await expectError(catalog.createTable({ namespace: ['nope'] }, { name: 't', schema: SCHEMA }), 404, 'NoSuchNamespaceException', 'create in missing')
  await catalog.createTable(eu, { name: 'returns', schema: SCHEMA })
  assert.deepEqual((await catalog.listTables(eu)).identifiers,
    [{ namespace: ['sales', 'eu'], name: 'orders' }, { namespace: ['sales', 'eu'], name: 'returns' }])
  const page = await catalog.listTables(eu, { pageSize: 1 })
  assert.equal(page.identifiers.length, 1)
  assert.equal((await catalog.listTables(eu, { pageSize: 1, pageToken: page.nextPageToken })).identifiers[0].name, 'returns')

  const loaded = await catalog.loadTableResult(orders)
  assert.equal(loaded['metadata-location'], created['metadata-location'])
  assert.deepEqual(loaded.metadata, m1)
  assert.equal(await catalog.tableExists(orders), true)
  assert.equal(await catalog.tableExists({ namespace: ['sales', 'eu'], name: 'nope' }), false)
  await expectError(catalog.loadTable({ namespace: ['sales', 'eu'], name: 'nope' }), 404, 'NoSuchTableException', 'load missing table')

  // Commits: set-properties under assert-table-uuid; a stale uuid is a 409 and writes nothing.
  const uuid = m1['table-uuid']
  const c = await catalog.updateTable(orders, {
    requirements: [{ type: 'assert-table-uuid', uuid }],
    updates: [{ action: 'set-properties', updates: { owner: 'ann', 'commit.retry.num-retries': '3' } }]
  })
  assert.equal(c['metadata-location'], 'file://' + path.join(root, 'metadata', 'v2.metadata.json'))
  assert.equal(c.metadata.properties.owner, 'ann')
  assert.equal(c.metadata['metadata-log'][0]['metadata-file'], created['metadata-location'])
  await expectError(catalog.updateTable(orders, {
    requirements: [{ type: 'assert-table-uuid', uuid: '00000000-0000-4000-8000-000000000000' }],
    updates: [{ action: 'set-properties', updates: { owner: 'bob' } }]
  }), 409, 'CommitFailedException', 'stale assert-table-uuid')
  // Two clients that loaded schema 0 both add a column: the second one's base is stale.
  const addColumn = name => ({
    requirements: [{ type: 'assert-current-schema-id', 'current-schema-id': 0 }],
    updates: [{ action: 'add-schema', schema: { ...SCHEMA, 'schema-id': 1, fields: [...SCHEMA.fields, { id: 4, name, type: 'int', required: false }] } },
      { action: 'set-current-schema', 'schema-id': -1 }]
  })
  const first = await catalog.commitTable(orders, addColumn('qty'))
  assert.equal(first.metadata['current-schema-id'], 1)
  await expectError(catalog.commitTable(orders, addColumn('price')), 409, 'CommitFailedException', 'second commit from one base')
  const now = await catalog.loadTableResult(orders)
  assert.equal(now['metadata-location'], 'file://' + path.join(root, 'metadata', 'v3.metadata.json'))
  assert.equal(now.metadata.properties.owner, 'ann')
  await expectError(catalog.updateTable({ namespace: ['sales', 'eu'], name: 'nope' }, { requirements: [], updates: [] }),
    404, 'NoSuchTableException', 'commit to a missing table')

  // Rename across namespaces: the metadata moves, the data stays where it is.
  await catalog.renameTable({ source: orders, destination: { namespace: ['sales'], name: 'orders_2024' } })
  assert.equal(await catalog.tableExists(orders), false)
  const renamed = await catalog.loadTableResult({ namespace: ['sales'], name: 'orders_2024' })
  assert.equal(renamed.metadata['table-uuid'], uuid)
  assert.equal(renamed.metadata.location, 'file://' + root)
  assert.equal(renamed['metadata-location'], 'file://' + path.join(dir, 'lake', 'sales', 'orders_2024', 'metadata', 'v1.metadata.json'))
  await expectError(catalog.renameTable({ source: orders, destination: { namespace: ['sales'], name: 'x' } }),
    404, 'NoSuchTableException', 'rename a missing table')

  // Register a metadata file under a new name, then drop it.
  const reg = await catalog.registerTableResult({ namespace: ['sales'] },
    { name: 'orders_copy', 'metadata-location': renamed['metadata-location'] })
  assert.equal(reg.metadata['table-uuid'], uuid)
  await expectError(catalog.registerTable({ namespace: ['sales'] }, { name: 'orders_copy', 'metadata-location': renamed['metadata-location'] }),
    409, 'AlreadyExistsException', 'register twice')
  await catalog.dropTable({ namespace: ['sales'], name: 'orders_copy' })
  assert.equal(await catalog.tableExists({ namespace: ['sales'], name: 'orders_copy' }), false)
  await expectError(catalog.dropTable({ namespace: ['sales'], name: 'orders_copy' }), 404, 'NoSuchTableException', 'drop twice')
  await catalog.dropTable({ namespace: ['sales', 'eu'], name: 'returns' }, { purge: true })
  assert.ok(!fs.existsSync(path.join(dir, 'lake', 'sales', 'eu', 'returns')))

  // Namespaces drop only when empty.
  await expectError(catalog.dropNamespace({ namespace: ['sales'] }), 409, 'NamespaceNotEmptyException', 'drop a namespace with a table')
  await catalog.dropNamespace({ namespace: ['sales', 'eu'] })
  assert.equal(await catalog.namespaceExists({ namespace: ['sales', 'eu'] }), false)
  return { uuid }
}

// A pipeline appends the topic's messages to lake.clicks in the same warehouse.
async function pipelineTable (sluice, dir, serve, catalog) {
  const N = 600
  const cities = ['Berlin', 'Paris', 'Lisbon']
  const kafka = new Kafka({ clientId: 'rest-catalog-test', brokers: [serve.bootstrap], logLevel: logLevel.WARN })
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic: 'clicks', numPartitions: 2 }], waitForLeaders: true })
  await admin.disconnect()
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const events = []
  for (let i = 0; i < N; i++) events.push({ id: i, city: cities[i % 3], amount: i * 0.25 })
  await producer.send({ topic: 'clicks', acks: -1, messages: events.map(e => ({ key: String(e.id), value: JSON.stringify(e) })) })
  await producer.disconnect()

  const file = path.join(dir, 'clicks.yml')
  fs.writeFileSync(file, `pipeline:
  name: clicks
  batch_size: 100
  flush_interval_seconds: 1
  source:
    type: kafka
    kafka:
      brokers: [{{ REST_TEST_BROKERS }}]
      group_id: clicks-lake
      auto_offset_reset: earliest
      topics: [clicks]
  handler:
    type: handlers.InferredMemBatch
    sql: |
      SELECT id::BIGINT AS id, city, amount::DOUBLE AS amount FROM batch
  sink:
    type: iceberg
    iceberg:
      catalog_name: sluice
      table_name: lake.clicks
      warehouse: '${path.join(dir, 'lake')}'
      commit_interval_seconds: 1
      partition_by: [city]
`)
  const run = new Proc(dir, 'pipeline', [sluice, 'pipeline', 'run', file, '--http-addr', '127.0.0.1:0', '--no-progress'],
    { REST_TEST_BROKERS: serve.bootstrap })
  const clicks = { namespace: ['lake'], name: 'clicks' }
  // The table as the catalog serves it, once its last snapshot holds every message.
  const result = await waitUntil(async () => {
    if (run.exited) throw new Error('the pipeline exited:\n' + run.logs())
    if (!(await catalog.tableExists(clicks))) return null
    const r = await catalog.loadTableResult(clicks)
    const snap = (r.metadata.snapshots || []).find(s => s['snapshot-id'] === r.metadata['current-snapshot-id'])
    return snap && snap.summary['total-records'] === String(N) ? r : null
  }, 120000, `the pipeline's table holding ${N} rows`)
  assert.equal(await run.stop(), 0, 'pipeline run after SIGTERM:\n' + run.logs())
  assert.deepEqual((await catalog.listNamespaces()).namespaces, [{ namespace: ['lake'] }, { namespace: ['sales'] }])
  assert.deepEqual((await catalog.listTables({ namespace: ['lake'] })).identifiers, [clicks])

  // icebird reads it from the metadata the catalog answered.
  const { icebergRead } = await import('icebird')
  globalThis.fetch = fileFetch
  let rows
  try {
    rows = await icebergRead({ tableUrl: result.metadata.location, metadata: result.metadata })
  } finally {
    globalThis.fetch = realFetch
  }
  assert.equal(rows.length, N, 'rows icebird read')
  const got = rows.map(r => ({ id: Number(r.id), city: r.city, amount: Number(r.amount) })).sort((a, b) => a.id - b.id)
  assert.deepEqual(got, events)
  return { clicks, snapshot: result.metadata['current-snapshot-id'], n: N }
}

async function main () {
  const sluice = process.argv[2]
  if (!sluice) throw new Error('usage: node rest_catalog_test.js path/to/sluice')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-rest-'))
  let serve
  try {
    serve = await startServe(sluice, dir, 1)
    let catalog = new IcebergRestCatalog({ baseUrl: serve.baseUrl })
    const { uuid } = await catalogRoutes(catalog, dir)
    const lake = await pipelineTable(sluice, dir, serve, catalog)
    assert.equal(await serve.stop(), 0, 'sluice serve after SIGTERM:\n' + serve.logs())

    // A restart: the warehouse is the catalog's whole state.
    serve = await startServe(sluice, dir, 2)
    catalog = new IcebergRestCatalog({ baseUrl: serve.baseUrl })
    assert.deepEqual((await catalog.listNamespaces()).namespaces, [{ namespace: ['lake'] }, { namespace: ['sales'] }])
    assert.deepEqual((await catalog.loadNamespaceMetadata({ namespace: ['sales'] })).properties, { team: 'data' })
    assert.deepEqual((await catalog.listTables({ namespace: ['sales'] })).identifiers, [{ namespace: ['sales'], name: 'orders_2024' }])
    const orders = await catalog.loadTable({ namespace: ['sales'], name: 'orders_2024' })
    assert.equal(orders['table-uuid'], uuid)
    assert.equal(orders.properties.owner, 'ann')
    assert.equal(orders['current-schema-id'], 1)
    const clicks = await catalog.loadTable(lake.clicks)
    assert.equal(clicks['current-snapshot-id'], lake.snapshot)
    // And it still takes commits.
    await catalog.updateTable({ namespace: ['sales'], name: 'orders_2024' }, {
      requirements: [{ type: 'assert-table-uuid', uuid }],
      updates: [{ action: 'remove-properties', removals: ['owner'] }]
    })
    assert.equal((await catalog.loadTable({ namespace: ['sales'], name: 'orders_2024' })).properties.owner, undefined)
    assert.equal(await serve.stop(), 0, 'sluice serve after SIGTERM:\n' + serve.logs())
    serve = null
    console.log(`PASS: iceberg-js: namespaces (one and two levels, properties), tables (create with a partition spec, ` +
      `list with pages, load, HEAD, commits with a stale requirement and a stale base refused with 409, rename, register, ` +
      `drop); icebird read the ${lake.n} rows a pipeline appended, through the catalog's metadata; all of it there after a restart`)
    fs.rmSync(dir, { recursive: true, force: true })
  } catch (e) {
    console.log('FAIL: ' + (e.stack || e))
    for (const p of [...running]) {
      console.log(p.logs())
      await p.stop()
    }
    console.log(`(files kept in ${dir})`)
    process.exit(1)
  }
}

main()
