// @kafkajs/confluent-schema-registry 3.9.0 (npm, pinned) against the Schema Registry of a
// real `sluice serve` (docs/design/0022-schemas.md), with KafkaJS producing and consuming,
// the npm `pg` driver querying topic(), and serve's own pipelines:
//
// 1. Avro and Protobuf (a nested message, a repeated field, an enum, a
//    google.protobuf.Timestamp, which the client needs registered as a reference) schemas
//    registered with the client; messages encoded with it, produced with KafkaJS to
//    `avro_orders` / `proto_orders`, read back and decoded by a second client instance that
//    fetches each schema by id from sluice.
// 2. Compatibility through the client: an incompatible schema refused (409), a compatible
//    one the next version, the same schema under another subject the same id, the same
//    schema again the same id and version.
// 3. topic('avro_orders') / topic('proto_orders') through `pg`: the decoded fields as
//    columns (STRUCT fields, lists, enums, timestamps), messages of two schema versions, and
//    a message that is not framed giving NULL decoded columns.
// 4. serve restarted on the same data with `--pipelines`: InferredMemBatch pipelines read
//    `avro_orders` (format avro) and `proto_orders` (format protobuf) with serve's registry
//    in-process, write `avro_out` / `proto_out` with `format: avro|protobuf`; the client
//    decodes those with the schema the sink registered, fetched from sluice. A third
//    pipeline writes a TIMESTAMPTZ column as google.protobuf.Timestamp (`proto_times`):
//    checked by hand first, then through the client, which resolves the import only when
//    the registered schema references google/protobuf/timestamp.proto.
// 5. Bad input produced raw with KafkaJS into a pipeline's topic under on_error DLQ: an
//    unknown schema id, a wrong magic byte, a truncated payload, a value shorter than the
//    framing, a Protobuf message index that names no message: each a dead letter with its
//    reason, and the pipeline goes on with the good messages around and after them.
//
// Client quirk worked around, not hidden: the npm client's Protobuf encode writes no
// message-index array after the schema id (Confluent's framing has one: [0] as the single
// byte 0x00); the test inserts that byte before producing. Its decode strips leading zero
// bytes of the payload, so it reads Confluent-framed messages (and sluice's) as they are.
//
// usage: node schema_clients_test.js path/to/sluice   (packages from the repository's node_modules)
'use strict'

process.env.TZ = 'UTC'
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

let Kafka, logLevel, SchemaRegistry, SchemaType, Client, protobuf
try {
  ({ Kafka, logLevel } = require('kafkajs'));
  ({ SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry'));
  ({ Client } = require('pg'));
  // protobufjs: the client's own dependency (pinned through package-lock.json).
  protobuf = require('protobufjs')
} catch (e) {
  console.log('FAIL: a package is missing from node_modules (scripts/setup.sh runs npm ci): ' + e.message)
  process.exit(1)
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function waitUntil (predicate, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await predicate()
    if (value) return value
    if (Date.now() >= deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`)
    await sleep(50)
  }
}

// `sluice serve` with every port on 127.0.0.1 (Kafka's port 0 unless given), over one data
// directory that survives stop() for the next start().
class Serve {
  constructor (sluice, dir) {
    this.sluice = sluice
    this.dir = dir
    this.runs = 0
    fs.writeFileSync(path.join(dir, 'sluice.yaml'), 'groups:\n  initial_rebalance_delay: 0\n')
  }

  async start (kafkaAddr = '127.0.0.1:0', extra = []) {
    this.runs++
    this.out = path.join(this.dir, `out.${this.runs}`)
    this.err = path.join(this.dir, `err.${this.runs}`)
    const fds = [fs.openSync(this.out, 'w'), fs.openSync(this.err, 'w')]
    this.proc = spawn(this.sluice, ['serve', '--kafka-addr', kafkaAddr, '--http-addr', '127.0.0.1:0',
      '--pg-addr', '127.0.0.1:0', '--schema-registry-addr', '127.0.0.1:0',
      '--data-dir', path.join(this.dir, 'data'), '--shards', '2',
      '--config', path.join(this.dir, 'sluice.yaml'), ...extra], { stdio: ['ignore', fds[0], fds[1]] })
    fds.forEach(fd => fs.closeSync(fd))
    this.exit = new Promise(resolve => {
      this.proc.on('exit', (code, signal) => resolve(signal || code))
      this.proc.on('error', e => { this.spawnError = e; resolve(e.message) })
    })
    const line = re => re.exec(fs.readFileSync(this.out, 'utf8'))
    await waitUntil(() => {
      if (this.spawnError || this.proc.exitCode !== null || this.proc.signalCode !== null) {
        throw new Error(`sluice serve exited before listening (${this.spawnError || 'exit'}):\n` + this.logs())
      }
      return line(/^sluice: Postgres wire protocol on 127\.0\.0\.1:\d+$/m) &&
        line(/^sluice: Schema Registry on http:\/\/127\.0\.0\.1:\d+$/m)
    }, 30000, 'sluice serve listening')
    this.bootstrap = line(/^sluice: serving Kafka on (127\.0\.0\.1:\d+) /m)[1]
    this.registryUrl = line(/^sluice: Schema Registry on (http:\/\/127\.0\.0\.1:\d+)$/m)[1]
    this.pgPort = Number(line(/^sluice: Postgres wire protocol on 127\.0\.0\.1:(\d+)$/m)[1])
    this.kafka = new Kafka({ clientId: 'schema-clients-test', brokers: [this.bootstrap], logLevel: logLevel.ERROR, retry: { retries: 8 } })
  }

  running () {
    return !this.spawnError && this.proc.exitCode === null && this.proc.signalCode === null
  }

  async stop () {
    this.proc.kill('SIGTERM')
    let timer
    const timeout = new Promise(resolve => { timer = setTimeout(() => resolve('no exit within 60 s'), 60000) })
    try {
      return await Promise.race([this.exit, timeout])
    } finally {
      clearTimeout(timer)
    }
  }

  logs () {
    return fs.readdirSync(this.dir).filter(f => /^(out|err)\./.test(f)).sort().map(f => {
      const lines = fs.readFileSync(path.join(this.dir, f), 'utf8').split('\n').slice(-60).join('\n')
      return `--- sluice serve ${f}:\n${lines}`
    }).join('\n')
  }

  kill () {
    if (this.proc && this.running()) this.proc.kill('SIGKILL')
  }
}

// Every message of `topic` from its start, once `n` are there: [{ key, value, offset }].
async function readTopic (serve, topic, n) {
  const consumer = serve.kafka.consumer({ groupId: `read-${topic}-${Date.now()}`, maxWaitTimeInMs: 200 })
  const got = []
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({ eachMessage: async ({ message }) => { got.push(message) } })
    await waitUntil(() => got.length >= n, 60000, `${n} messages on ${topic} (have ${got.length})`)
  } finally {
    await consumer.disconnect()
  }
  got.sort((a, b) => Number(a.offset) - Number(b.offset))
  return got
}

async function produce (serve, topic, values) {
  const producer = serve.kafka.producer()
  await producer.connect()
  try {
    await producer.send({ topic, acks: -1, messages: values.map((value, i) => ({ key: `k${i}`, value })) })
  } finally {
    await producer.disconnect()
  }
}

async function query (serve, sql) {
  const c = new Client({ host: '127.0.0.1', port: serve.pgPort, user: 'tester', database: 'sluice' })
  await c.connect()
  try {
    return (await c.query(sql)).rows
  } finally {
    await c.end()
  }
}

// The versions of a subject (the client has no call for this listing).
async function versions (serve, subject) {
  const r = await fetch(`${serve.registryUrl}/subjects/${encodeURIComponent(subject)}/versions`)
  assert.equal(r.status, 200, `GET /subjects/${subject}/versions`)
  return r.json()
}

async function expectStatus (promise, status, what) {
  try {
    await promise
  } catch (e) {
    assert.equal(e.status, status, `${what}: ${e.message}`)
    return e
  }
  assert.fail(`${what}: succeeded, expected HTTP ${status}`)
}

// Plain data from a decoded Avro record (avsc returns instances of generated classes).
const plain = v => JSON.parse(JSON.stringify(v))

// --- schemas and messages -------------------------------------------------------------

const ORDER_V1 = {
  type: 'record',
  name: 'Order',
  namespace: 'shop',
  fields: [
    { name: 'id', type: 'long' },
    { name: 'customer', type: 'string' },
    { name: 'amount', type: 'double' },
    { name: 'items', type: { type: 'array', items: 'string' } },
    { name: 'ship', type: { type: 'record', name: 'Address', fields: [{ name: 'city', type: 'string' }, { name: 'zip', type: 'int' }] } },
    { name: 'status', type: { type: 'enum', name: 'Status', symbols: ['NEW', 'SHIPPED', 'CANCELLED'] } },
    { name: 'note', type: ['null', 'string'], default: null },
    { name: 'placed', type: { type: 'long', logicalType: 'timestamp-millis' } },
  ],
}
// BACKWARD-compatible: a field with a default.
const ORDER_V2 = { ...ORDER_V1, fields: [...ORDER_V1.fields, { name: 'coupon', type: 'string', default: 'none' }] }
// Not BACKWARD-compatible: a new field without a default cannot be read from v1 data.
const ORDER_BAD = { ...ORDER_V1, fields: [...ORDER_V1.fields, { name: 'priority', type: 'int' }] }

const PLACED0 = Date.UTC(2026, 0, 2, 3, 4, 5, 678)
const STATUSES = ['NEW', 'SHIPPED', 'CANCELLED']
function avroOrder (i) {
  return {
    id: i,
    customer: `cust-${i}`,
    amount: i * 10 + 0.25,
    items: Array.from({ length: i % 3 + 1 }, (_, j) => `item-${i}-${j}`),
    ship: { city: ['Lyon', 'Oslo', 'Porto'][i % 3], zip: 1000 + i },
    status: STATUSES[i % 3],
    note: i % 2 ? `note ${i}` : null,
    placed: PLACED0 + i * 1000,
  }
}

const TIMESTAMP_PROTO = `syntax = "proto3";
package google.protobuf;

option java_package = "com.google.protobuf";
option java_outer_classname = "TimestampProto";
option java_multiple_files = true;
option go_package = "google.golang.org/protobuf/types/known/timestamppb";

message Timestamp {
  int64 seconds = 1;
  int32 nanos = 2;
}
`
const TIMESTAMP_REF = { name: 'google/protobuf/timestamp.proto', subject: 'google/protobuf/timestamp.proto', version: 1 }

const PROTO_V1 = `syntax = "proto3";
package shop;

import "google/protobuf/timestamp.proto";

message Order {
  int64 id = 1;
  string customer = 2;
  repeated string items = 3;
  Address ship = 4;
  Status status = 5;
  google.protobuf.Timestamp placed = 6;
  double amount = 7;

  message Address {
    string city = 1;
    int32 zip = 2;
  }
}

enum Status {
  STATUS_UNKNOWN = 0;
  NEW = 1;
  SHIPPED = 2;
}
`
// Compatible: a new field.
const PROTO_V2 = PROTO_V1.replace('double amount = 7;', 'double amount = 7;\n  string coupon = 8;')
// Incompatible: a string field becomes an int64 (another kind of field).
const PROTO_BAD = PROTO_V1.replace('string customer = 2;', 'int64 customer = 2;')

function protoOrder (i) {
  return {
    id: 100 + i,
    customer: `p-${i}`,
    items: Array.from({ length: i % 3 + 1 }, (_, j) => `part-${i}-${j}`),
    ship: { city: ['Kyiv', 'Riga', 'Bern'][i % 3], zip: 2000 + i },
    status: 1 + i % 2,
    placed: { seconds: 1767323045 + i, nanos: 250000000 },
    amount: i + 0.5,
  }
}
const PROTO_STATUS = ['STATUS_UNKNOWN', 'NEW', 'SHIPPED']

// Confluent's Protobuf framing: magic byte, id, message indexes ([0] is the byte 0), payload.
// The npm client writes no indexes; insert them.
const withIndexes = (framed, indexes = Buffer.from([0])) => Buffer.concat([framed.subarray(0, 5), indexes, framed.subarray(5)])
const header = (magic, id) => { const b = Buffer.alloc(5); b[0] = magic; b.writeInt32BE(id, 1); return b }

// --- the test -------------------------------------------------------------------------

async function clients (serve) {
  const reg = new SchemaRegistry({ host: serve.registryUrl })
  const admin = serve.kafka.admin()
  await admin.connect()
  await admin.createTopics({
    waitForLeaders: true,
    topics: ['avro_orders', 'proto_orders', 'avro_out', 'proto_out', 'avro_dlq', 'proto_dlq', 'proto_times', 'bad_in', 'bad_out', 'bad_dlq']
      .map(topic => ({ topic, numPartitions: 1 })),
  })
  await admin.disconnect()

  // 1. Avro: register, encode, produce, read back, decode by id with a fresh client.
  const { id: avroV1 } = await reg.register({ type: SchemaType.AVRO, schema: JSON.stringify(ORDER_V1) }, { subject: 'avro_orders-value' })
  const avroIn = []
  for (let i = 1; i <= 5; i++) avroIn.push(avroOrder(i))
  const avroValues = []
  for (const o of avroIn) avroValues.push(await reg.encode(avroV1, o))

  // 2. Compatibility, Avro.
  await expectStatus(reg.register({ type: SchemaType.AVRO, schema: JSON.stringify(ORDER_BAD) }, { subject: 'avro_orders-value' }),
    409, 'a new field without a default under BACKWARD')
  const { id: avroV2 } = await reg.register({ type: SchemaType.AVRO, schema: JSON.stringify(ORDER_V2) }, { subject: 'avro_orders-value' })
  assert.notEqual(avroV2, avroV1, 'a new version gets a new id')
  const latest = (await reg.api.Subject.latestVersion({ subject: 'avro_orders-value' })).data()
  assert.equal(latest.version, 2, `the compatible schema is version 2: ${JSON.stringify(latest)}`)
  assert.equal(latest.id, avroV2)
  assert.equal(await reg.getRegistryId('avro_orders-value', 1), avroV1)
  // The client's own subject naming (namespace.name): another subject, the same schema.
  const { id: again } = await reg.register({ type: SchemaType.AVRO, schema: JSON.stringify(ORDER_V1) })
  assert.equal(again, avroV1, 'the same schema in subject shop.Order has the same id')
  assert.deepEqual(await versions(serve, 'shop.Order'), [1])
  // The same schema again under its subject: the same id, no new version.
  assert.equal((await reg.register({ type: SchemaType.AVRO, schema: JSON.stringify(ORDER_V1) }, { subject: 'avro_orders-value' })).id, avroV1)
  assert.deepEqual(await versions(serve, 'avro_orders-value'), [1, 2])
  assert.equal(await reg.getRegistryIdBySchema('avro_orders-value', { type: SchemaType.AVRO, schema: JSON.stringify(ORDER_V1) }), avroV1)

  // A message of v2, then one that is not framed at all.
  const v2Order = { ...avroOrder(6), coupon: 'SAVE10' }
  avroIn.push(v2Order)
  avroValues.push(await reg.encode(avroV2, v2Order))
  avroValues.push(Buffer.from('{"id": 99, "not": "framed"}'))
  await produce(serve, 'avro_orders', avroValues)

  const fresh = new SchemaRegistry({ host: serve.registryUrl })
  const avroRead = await readTopic(serve, 'avro_orders', avroValues.length)
  assert.equal(avroRead.length, avroValues.length)
  for (let i = 0; i < avroIn.length; i++) {
    assert.deepEqual(avroRead[i].value, avroValues[i], `avro_orders offset ${i} byte for byte`)
    assert.deepEqual(plain(await fresh.decode(avroRead[i].value)), avroIn[i], `avro_orders offset ${i} decoded`)
  }
  // Decoding v1 data with v2 as the reader schema (the client's resolver): the default.
  const asV2 = await fresh.decode(avroRead[0].value, { [SchemaType.AVRO]: { readerSchema: ORDER_V2 } })
  assert.equal(asV2.coupon, 'none')
  await assert.rejects(fresh.decode(header(0, 424242)), e => e.status === 404, 'an unknown id is 404 from sluice')

  // 1. Protobuf, with google/protobuf/timestamp.proto as a reference (the client resolves
  // imports only through references).
  const { id: tsId } = await reg.register({ type: SchemaType.PROTOBUF, schema: TIMESTAMP_PROTO }, { subject: TIMESTAMP_REF.subject })
  const { id: protoV1 } = await reg.register({ type: SchemaType.PROTOBUF, schema: PROTO_V1, references: [TIMESTAMP_REF] }, { subject: 'proto_orders-value' })
  assert.notEqual(protoV1, tsId)
  const refs = (await reg.api.Subject.version({ subject: 'proto_orders-value', version: 1 })).data().references
  assert.deepEqual(refs, [TIMESTAMP_REF], 'the reference is stored as given')
  const referencedBy = await fetch(`${serve.registryUrl}/subjects/${encodeURIComponent(TIMESTAMP_REF.subject)}/versions/1/referencedby`).then(r => r.json())
  assert.deepEqual(referencedBy, [protoV1])
  const protoIn = [1, 2, 3, 4].map(protoOrder)
  const protoValues = []
  for (const o of protoIn) protoValues.push(withIndexes(await reg.encode(protoV1, o)))

  // 2. Compatibility, Protobuf.
  await expectStatus(reg.register({ type: SchemaType.PROTOBUF, schema: PROTO_BAD, references: [TIMESTAMP_REF] }, { subject: 'proto_orders-value' }),
    409, 'a string field turned int64')
  const { id: protoV2 } = await reg.register({ type: SchemaType.PROTOBUF, schema: PROTO_V2, references: [TIMESTAMP_REF] }, { subject: 'proto_orders-value' })
  assert.equal((await reg.api.Subject.latestVersion({ subject: 'proto_orders-value' })).data().version, 2)
  const { id: protoCopy } = await reg.register({ type: SchemaType.PROTOBUF, schema: PROTO_V1, references: [TIMESTAMP_REF] }, { subject: 'proto_copy-value' })
  assert.equal(protoCopy, protoV1, 'the same Protobuf schema in another subject has the same id')
  const v2Proto = { ...protoOrder(5), coupon: 'P5' }
  protoIn.push(v2Proto)
  protoValues.push(withIndexes(await reg.encode(protoV2, v2Proto)))
  await produce(serve, 'proto_orders', protoValues)

  const protoRead = await readTopic(serve, 'proto_orders', protoValues.length)
  for (let i = 0; i < protoIn.length; i++) {
    assert.deepEqual(protoRead[i].value, protoValues[i], `proto_orders offset ${i} byte for byte`)
    const m = await fresh.decode(protoRead[i].value)
    const o = m.$type.toObject(m, { longs: Number, enums: Number })
    assert.deepEqual(o, protoIn[i], `proto_orders offset ${i} decoded`)
  }

  // 3. topic() through pg: Avro.
  let rows = await query(serve, 'SELECT "offset", id, customer, amount, items, (ship).city AS city, ship.zip AS zip, status, note, ' +
    "placed, coupon FROM topic('avro_orders') ORDER BY \"offset\"")
  assert.equal(rows.length, avroValues.length, JSON.stringify(rows))
  for (let i = 0; i < avroIn.length; i++) {
    const o = avroIn[i]
    const r = rows[i]
    const what = `topic('avro_orders') offset ${i}: ${JSON.stringify(r)}`
    assert.equal(Number(r.offset), i, what)
    assert.equal(Number(r.id), o.id, what)
    assert.equal(r.customer, o.customer, what)
    assert.equal(Number(r.amount), o.amount, what)
    assert.deepEqual(r.items, o.items, what)
    assert.equal(r.city, o.ship.city, what)
    assert.equal(Number(r.zip), o.ship.zip, what)
    assert.equal(r.status, o.status, what)
    assert.equal(r.note, o.note, what)
    assert.equal(new Date(r.placed).getTime(), o.placed, what)
    assert.equal(r.coupon, o.coupon || 'none', `${what}: v1 messages read with v2's default`)
  }
  const unframed = rows[avroIn.length]
  for (const col of ['id', 'customer', 'amount', 'items', 'city', 'status', 'placed']) {
    assert.equal(unframed[col], null, `the message that is not framed: ${col} is NULL: ${JSON.stringify(unframed)}`)
  }
  rows = await query(serve, `SELECT value FROM topic('avro_orders') WHERE "offset" = ${avroIn.length}`)
  assert.equal(rows[0].value, '{"id": 99, "not": "framed"}', 'the unframed message keeps its value')

  // topic() through pg: Protobuf.
  rows = await query(serve, "SELECT id, customer, items, ship.city AS city, (ship).zip AS zip, status, placed, amount, coupon FROM topic('proto_orders') ORDER BY \"offset\"")
  assert.equal(rows.length, protoIn.length, JSON.stringify(rows))
  for (let i = 0; i < protoIn.length; i++) {
    const o = protoIn[i]
    const r = rows[i]
    const what = `topic('proto_orders') offset ${i}: ${JSON.stringify(r)}`
    assert.equal(Number(r.id), o.id, what)
    assert.equal(r.customer, o.customer, what)
    assert.deepEqual(r.items, o.items, what)
    assert.equal(r.city, o.ship.city, what)
    assert.equal(Number(r.zip), o.ship.zip, what)
    assert.equal(r.status, PROTO_STATUS[o.status], what)
    assert.equal(new Date(r.placed).getTime(), o.placed.seconds * 1000 + 250, what)
    assert.equal(Number(r.amount), o.amount, what)
    assert.equal(r.coupon ?? '', o.coupon ?? '', what)
  }
  return { avroIn, protoIn, avroV1 }
}

const PIPELINES = {
  'avro_orders.yml': `
pipeline:
  name: avro_orders
  batch_size: 100
  flush_interval_seconds: 1
  on_error:
    policy: DLQ
    dlq: {type: kafka, kafka: {brokers: ['{addr}'], topic: avro_dlq}}
  source:
    type: kafka
    kafka:
      brokers: ['{addr}']
      group_id: avro-orders
      auto_offset_reset: earliest
      topics: [avro_orders]
      format: avro
  handler:
    type: handlers.InferredMemBatch
    sql: >-
      SELECT id, upper(customer) AS customer, amount * 2 AS doubled, items, ship.city AS city,
             status, note, coupon, placed, kafka_offset AS source_offset FROM batch
  sink:
    type: kafka
    kafka: {brokers: ['{addr}'], topic: avro_out, format: avro}
`,
  'proto_orders.yml': `
pipeline:
  name: proto_orders
  batch_size: 100
  flush_interval_seconds: 1
  on_error:
    policy: DLQ
    dlq: {type: kafka, kafka: {brokers: ['{addr}'], topic: proto_dlq}}
  source:
    type: kafka
    kafka:
      brokers: ['{addr}']
      group_id: proto-orders
      auto_offset_reset: earliest
      topics: [proto_orders]
      format: protobuf
  handler:
    type: handlers.InferredMemBatch
    sql: >-
      SELECT id, customer, len(items) AS n_items, ship.city AS city, ship.zip + 1 AS next_zip,
             status, amount, coupon FROM batch
  sink:
    type: kafka
    kafka: {brokers: ['{addr}'], topic: proto_out, format: protobuf}
`,
  // A TIMESTAMPTZ column out as google.protobuf.Timestamp.
  'proto_times.yml': `
pipeline:
  name: proto_times
  batch_size: 100
  flush_interval_seconds: 1
  on_error: {policy: IGNORE}
  source:
    type: kafka
    kafka:
      brokers: ['{addr}']
      group_id: proto-times
      auto_offset_reset: earliest
      topics: [proto_orders]
      format: protobuf
  handler:
    type: handlers.InferredMemBatch
    sql: SELECT id, placed FROM batch
  sink:
    type: kafka
    kafka: {brokers: ['{addr}'], topic: proto_times, format: protobuf}
`,
  'bad_in.yml': `
pipeline:
  name: bad_in
  batch_size: 1
  flush_interval_seconds: 1
  on_error:
    policy: DLQ
    dlq: {type: kafka, kafka: {brokers: ['{addr}'], topic: bad_dlq}}
  source:
    type: kafka
    kafka:
      brokers: ['{addr}']
      group_id: bad-in
      auto_offset_reset: earliest
      topics: [bad_in]
      format: avro
  handler:
    type: handlers.InferredMemBatch
    sql: SELECT id, customer, kafka_offset AS source_offset FROM batch
  sink:
    type: kafka
    kafka: {brokers: ['{addr}'], topic: bad_out}
`,
}

async function pipelines (serve, { avroIn, protoIn }) {
  // 4. Avro out: decoded by the client with the schema the sink registered.
  const fresh = new SchemaRegistry({ host: serve.registryUrl })
  const avroOut = await readTopic(serve, 'avro_out', avroIn.length)
  assert.equal(avroOut.length, avroIn.length, 'one row per good message, none for the unframed one')
  const outId = (await fresh.api.Subject.latestVersion({ subject: 'avro_out-value' })).data().id
  const decoded = []
  for (const m of avroOut) {
    assert.equal(m.value.readInt32BE(1), outId, 'the sink frames its rows with the id it registered')
    decoded.push(plain(await fresh.decode(m.value)))
  }
  decoded.sort((a, b) => a.source_offset - b.source_offset)
  for (let i = 0; i < avroIn.length; i++) {
    const o = avroIn[i]
    assert.deepEqual(decoded[i], {
      id: o.id,
      customer: o.customer.toUpperCase(),
      doubled: o.amount * 2,
      items: o.items,
      city: o.ship.city,
      status: o.status,
      note: o.note,
      coupon: o.coupon || 'none',
      placed: o.placed * 1000, // TIMESTAMPTZ out as timestamp-micros
      source_offset: i,
    }, `avro_out row ${i}`)
  }
  const dead = await readTopic(serve, 'avro_dlq', 1)
  const letter = JSON.parse(dead[0].value.toString())
  assert.equal(letter.offset, avroIn.length, `the unframed message's dead letter: ${JSON.stringify(letter)}`)
  assert.equal(letter.phase, 'decode')
  assert.ok(letter.error, 'the dead letter says why')

  // 5. Bad input, raw, with KafkaJS: good, bad x4, good; then more good ones.
  const reg = new SchemaRegistry({ host: serve.registryUrl })
  const id = await reg.getRegistryId('avro_orders-value', 1)
  const good = async i => reg.encode(id, avroOrder(i))
  const truncated = (await good(13)).subarray(0, 12)
  await produce(serve, 'bad_in', [
    await good(11),
    Buffer.concat([header(0, 777777), (await good(12)).subarray(5)]), // an unknown schema id
    Buffer.concat([header(1, id), (await good(12)).subarray(5)]), //     a wrong magic byte
    truncated, //                                                       a truncated payload
    Buffer.from([0, 0]), //                                             shorter than the framing
    await good(14),
  ])
  const letters = (await readTopic(serve, 'bad_dlq', 4)).map(m => JSON.parse(m.value.toString()))
  assert.deepEqual(letters.map(l => l.offset), [1, 2, 3, 4], JSON.stringify(letters))
  const reasons = letters.map(l => l.error)
  assert.match(reasons[0], /777777/, `an unknown schema id names it: ${reasons[0]}`)
  assert.match(reasons[1], /magic byte/i, `a wrong magic byte: ${reasons[1]}`)
  assert.match(reasons[2], /end|truncat|short/i, `a truncated payload: ${reasons[2]}`)
  assert.match(reasons[3], /framing|short/i, `a value shorter than the framing: ${reasons[3]}`)
  for (const l of letters) {
    assert.equal(l.topic, 'bad_in')
    assert.equal(l.phase, 'decode')
  }
  assert.ok(letters[1].message, `the dead letter carries the message: ${JSON.stringify(letters[1])}`)
  // The pipeline goes on.
  await produce(serve, 'bad_in', [await good(15)])
  const out = (await readTopic(serve, 'bad_out', 3)).map(m => JSON.parse(m.value.toString()))
  assert.deepEqual(out.map(r => [r.id, r.source_offset]), [[11, 0], [14, 5], [15, 6]], 'the good messages around the bad ones, and one after')
  assert.ok(serve.running(), 'serve still runs')
  // A Protobuf message index naming no message, into the Protobuf pipeline.
  const pid = await reg.getRegistryId('proto_orders-value', 1)
  const badIndex = withIndexes(await reg.encode(pid, protoOrder(9)), Buffer.from([2, 10])) // [5]
  await produce(serve, 'proto_orders', [badIndex])
  const protoLetters = (await readTopic(serve, 'proto_dlq', 1)).map(m => JSON.parse(m.value.toString()))
  assert.equal(protoLetters[0].offset, protoIn.length)
  assert.match(protoLetters[0].error, /index/i, `a bad message index: ${protoLetters[0].error}`)

  // Protobuf out.
  const protoOut = await readTopic(serve, 'proto_out', protoIn.length)
  const outProto = []
  for (const m of protoOut) {
    const msg = await fresh.decode(m.value)
    outProto.push(msg.$type.toObject(msg, { longs: Number, enums: String, defaults: true }))
  }
  outProto.sort((a, b) => a.id - b.id)
  for (let i = 0; i < protoIn.length; i++) {
    const o = protoIn[i]
    const got = outProto[i]
    // v1 messages have no coupon field: NULL (absent from the optional field) or "".
    if (!o.coupon && got.coupon === '') delete got.coupon
    // protobufjs names fields in camelCase unless told to keep their case.
    assert.deepEqual(got, {
      id: o.id,
      customer: o.customer,
      nItems: o.items.length,
      city: o.ship.city,
      nextZip: o.ship.zip + 1,
      status: PROTO_STATUS[o.status],
      amount: o.amount,
      ...(o.coupon ? { coupon: o.coupon } : {}),
    }, `proto_out row ${i}`)
  }

  // A Timestamp out: the sink's schema imports google/protobuf/timestamp.proto. The bytes
  // are checked first with the well-known type given to protobufjs by hand, then the client
  // must decode them from what sluice serves (it resolves imports only through references,
  // as Confluent's serializers register them).
  const times = await readTopic(serve, 'proto_times', protoIn.length)
  const registered = (await fresh.api.Subject.latestVersion({ subject: 'proto_times-value' })).data()
  const root = protobuf.parse(registered.schema).root
  protobuf.parse(TIMESTAMP_PROTO, root)
  const type = root.lookupType(root.nestedArray.find(n => n instanceof protobuf.Type).name)
  const byHand = times.map(m => {
    assert.deepEqual([...m.value.subarray(5, 6)], [0], 'message indexes [0]')
    return type.toObject(type.decode(m.value.subarray(6)), { longs: Number })
  }).sort((a, b) => a.id - b.id)
  assert.deepEqual(byHand, protoIn.map(o => ({ id: o.id, placed: o.placed })), 'proto_times by hand')
  const byClient = []
  try {
    for (const m of times) {
      const msg = await fresh.decode(m.value)
      byClient.push(msg.$type.toObject(msg, { longs: Number }))
    }
  } catch (e) {
    assert.fail('the npm client decodes the sink\'s Timestamp: ' + e.message +
      `; the schema sluice registered (references ${JSON.stringify(registered.references ?? [])}):\n${registered.schema}`)
  }
  assert.deepEqual(byClient.sort((a, b) => a.id - b.id), byHand)

}

async function main () {
  const sluice = process.argv[2]
  assert.ok(sluice, 'usage: node schema_clients_test.js path/to/sluice')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-schema-'))
  const serve = new Serve(sluice, dir)
  try {
    await serve.start()
    const data = await clients(serve)
    assert.equal(await serve.stop(), 0, 'sluice serve exits 0 after SIGTERM')

    // The pipelines name serve's Kafka address: the port the kernel gave the first run.
    const pdir = path.join(dir, 'pipelines')
    fs.mkdirSync(pdir)
    for (const [name, text] of Object.entries(PIPELINES)) fs.writeFileSync(path.join(pdir, name), text.replaceAll('{addr}', serve.bootstrap))
    await serve.start(serve.bootstrap, ['--pipelines', pdir])
    await pipelines(serve, data)
    assert.equal(await serve.stop(), 0, 'sluice serve exits 0 after SIGTERM')
    console.log('schema_clients_test: ok')
  } catch (e) {
    console.error(e)
    console.error(serve.logs())
    process.exitCode = 1
  } finally {
    serve.kill()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

main()
