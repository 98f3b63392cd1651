// KafkaJS (a Kafka client written in JavaScript, its own protocol code) against
// `sluice serve`, verifying data end to end: every record produced is consumed once per
// consumer group, in order within its partition, byte for byte (key, value, headers,
// timestamp).
//
// Admin: createTopics with a config, metadata, describeConfigs, offsets by timestamp,
// setOffsets for an empty group, listGroups, describeGroups, fetchOffsets, deleteGroups,
// deleteTopics. Producers: idempotent with GZIP, acks=1 uncompressed. A group of two
// members runs eachMessage; a second group starts from offsets set by the admin. Then a
// second broker with SASL: SCRAM-SHA-256 and PLAIN logins, and a wrong password refused.
//
// usage: node kafkajs_test.js path/to/sluice   (kafkajs from the repository's node_modules)
'use strict'

const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
let kafkajs
try {
  kafkajs = require('kafkajs')
} catch (e) {
  console.log('FAIL: kafkajs is missing from node_modules (scripts/setup.sh runs npm ci)')
  process.exit(1)
}
const {
  Kafka, CompressionTypes, ConfigResourceTypes, logLevel, AclResourceTypes, ResourcePatternTypes,
  AclOperationTypes, AclPermissionTypes,
} = kafkajs

const FAST_GROUPS = 'groups:\n  initial_rebalance_delay: 0\n'
const SASL = FAST_GROUPS + 'sasl:\n  enabled: true\n  users: ["alice:alice-secret"]\n'

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

// KafkaJS's log lines at WARN and above, without those every rebalance brings (kafkajs
// logs a heartbeat answered REBALANCE_IN_PROGRESS as an error) and a warning about the
// retries this test configures.
const logCreator = () => ({ namespace, label, log }) => {
  if (/^Response Heartbeat/.test(log.message) && /rebalancing/.test(log.error)) return
  if (/^The group is rebalancing, re-joining|^Limiting retries/.test(log.message)) return
  console.error(JSON.stringify({ level: label, namespace, ...log }))
}

// Polls `predicate` (sync or async) until it returns a truthy value, or throws at the deadline.
async function waitUntil (predicate, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await predicate()
    if (value) return value
    if (Date.now() >= deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`)
    await sleep(20)
  }
}

// `sluice serve` on 127.0.0.1 and a port the kernel picks, printed once it listens.
class Broker {
  constructor (sluice, config) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-it-'))
    fs.writeFileSync(path.join(this.dir, 'sluice.yaml'), config)
    this.sluice = sluice
  }

  async start () {
    const out = path.join(this.dir, 'out')
    const err = path.join(this.dir, 'err')
    const fds = [fs.openSync(out, 'w'), fs.openSync(err, 'w')]
    this.proc = spawn(this.sluice, ['serve', '--kafka-addr', '127.0.0.1:0', '--http-addr', '127.0.0.1:0', '--pg-addr', '127.0.0.1:0', '--schema-registry-addr', 'off',
      '--data-dir', path.join(this.dir, 'data'),
      '--shards', '2', '--config', path.join(this.dir, 'sluice.yaml')], { stdio: ['ignore', fds[0], fds[1]] })
    fds.forEach(fd => fs.closeSync(fd))
    this.exit = new Promise(resolve => this.proc.on('exit', (code, signal) => resolve(signal ? signal : code)))
    let exited = false
    this.exit.then(() => { exited = true })
    const m = await waitUntil(() => {
      if (exited) throw new Error('sluice serve exited before listening:\n' + this.logs())
      return /^sluice: serving Kafka on (127\.0\.0\.1:\d+) /m.exec(fs.readFileSync(out, 'utf8'))
    }, 30000, 'sluice serve listening')
    this.bootstrap = m[1]
    return this.bootstrap
  }

  // SIGTERM; the exit code (a signal name if it died of one).
  async stop () {
    this.proc.kill('SIGTERM')
    const timeout = sleep(60000).then(() => 'no exit within 60 s')
    return Promise.race([this.exit, timeout])
  }

  logs () {
    return ['out', 'err'].map(f => {
      const p = path.join(this.dir, f)
      const lines = fs.existsSync(p) ? fs.readFileSync(p, 'utf8').split('\n').slice(-60).join('\n') : ''
      return `--- sluice serve ${f}:\n${lines}`
    }).join('\n')
  }

  cleanup () {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL')
    fs.rmSync(this.dir, { recursive: true, force: true })
  }
}

// --- records ---------------------------------------------------------------------------

// A small deterministic generator (mulberry32).
function rng (seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6D2B79F5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

// Interleaved across partitions: null and empty keys and values, text and random bytes,
// 0-2 headers.
function makeRecords (tag, partitions, perPartition, seed, firstTimestamp) {
  const r = rng(seed)
  const below = n => Math.floor(r() * n)
  const bytes = n => {
    const b = Buffer.alloc(n)
    if (below(2)) for (let i = 0; i < n; i++) b[i] = below(256)
    else for (let i = 0; i < n; i++) b[i] = 'kafkajs record batch '.charCodeAt((i + n) % 21)
    return b
  }
  const out = []
  for (let i = 0; i < partitions * perPartition; i++) {
    const k = below(20)
    const v = below(40)
    const headers = {}
    for (let h = below(3); h > 0; h--) headers[`h${h}`] = bytes(below(30))
    out.push({
      partition: i % partitions,
      key: k === 0 ? null : k === 1 ? Buffer.alloc(0) : Buffer.from(`${tag}-key-${i}`),
      value: v === 0 ? null : v === 1 ? Buffer.alloc(0) : bytes(below(8) === 0 ? below(3000) : below(200)),
      headers,
      timestamp: String(firstTimestamp + i),
    })
  }
  return out
}

function byPartition (records) {
  const out = new Map()
  for (const r of records) {
    if (!out.has(r.partition)) out.set(r.partition, [])
    out.get(r.partition).push(r)
  }
  return out
}

const same = (a, b) => (a === null || b === null) ? a === b : Buffer.compare(a, b) === 0

// `got`: {partition -> [{offset, key, value, headers, timestamp}]} in consumption order.
function expectTopic (what, records, got, firstOffset = 0) {
  for (const [p, want] of byPartition(records)) {
    const list = got.get(p) || []
    assert.equal(list.length, want.length, `${what} [${p}]: records consumed`)
    want.forEach((w, i) => {
      const g = list[i]
      const at = `${what} [${p}] record ${i}`
      assert.equal(g.offset, String(firstOffset + i), `${at}: offset`)
      assert.ok(same(g.key, w.key), `${at}: key`)
      assert.ok(same(g.value, w.value), `${at}: value`)
      assert.equal(g.timestamp, w.timestamp, `${at}: timestamp`)
      assert.deepEqual(Object.keys(g.headers).sort(), Object.keys(w.headers).sort(), `${at}: header names`)
      for (const h of Object.keys(w.headers)) assert.ok(same(g.headers[h], w.headers[h]), `${at}: header ${h}`)
    })
  }
  for (const p of got.keys()) assert.ok(byPartition(records).has(p), `${what}: records from partition ${p}`)
}

async function produce (producer, topic, records, options) {
  const metadata = await producer.send({
    topic,
    messages: records.map(r => ({ partition: r.partition, key: r.key, value: r.value, headers: r.headers, timestamp: r.timestamp })),
    ...options,
  })
  return metadata
}

// A group member that records what it processed (eachMessage) into `ledger`.
function member (kafka, groupId, name, ledger) {
  // Fetches wait at most 500 ms (not 5 s), so that disconnecting is quick.
  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 250, rebalanceTimeout: 20000, maxWaitTimeInMs: 500 })
  const state = { consumer, name, joins: [] }
  consumer.on(consumer.events.GROUP_JOIN, e => state.joins.push(e.payload))
  consumer.on(consumer.events.CRASH, e => ledger.errors.push(`${name} crashed: ${e.payload.error}`))
  state.run = async (topic, fromBeginning = true) => {
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning })
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        if (!ledger.got.has(partition)) ledger.got.set(partition, [])
        ledger.got.get(partition).push({
          offset: message.offset, key: message.key, value: message.value, headers: message.headers || {},
          timestamp: message.timestamp,
        })
        ledger.total++
      },
    })
  }
  return state
}

const newLedger = () => ({ got: new Map(), total: 0, errors: [] })

// --- the tests ---------------------------------------------------------------------------

async function plainClients (bootstrap) {
  const kafka = new Kafka({ clientId: 'sluice-kafkajs', brokers: [bootstrap], logLevel: logLevel.WARN, logCreator, retry: { retries: 8 } })
  const admin = kafka.admin()
  await admin.connect()
  const topic = 'kjs-events'
  assert.equal(await admin.createTopics({
    topics: [{ topic, numPartitions: 3, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: '86400000' }] }],
    waitForLeaders: true,
  }), true)
  assert.ok((await admin.listTopics()).includes(topic))
  const md = await admin.fetchTopicMetadata({ topics: [topic] })
  assert.deepEqual(md.topics[0].partitions.map(p => [p.partitionId, p.leader]).sort(), [[0, 1], [1, 1], [2, 1]])
  const described = await admin.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }], includeSynonyms: false })
  const retention = described.resources[0].configEntries.find(e => e.configName === 'retention.ms')
  assert.equal(retention.configValue, '86400000')

  // Two members join before any record exists; records flow once they share a generation
  // and own disjoint partitions covering the topic.
  const ledger = newLedger()
  const members = [member(kafka, 'kjs-group', 'kjs-0', ledger), member(kafka, 'kjs-group', 'kjs-1', ledger)]
  for (const m of members) await m.run(topic)
  await waitUntil(() => {
    const last = members.map(m => m.joins[m.joins.length - 1])
    if (last.some(j => !j) || last[0].generationId !== last[1].generationId) return false
    const owned = last.flatMap(j => (j.memberAssignment[topic] || []))
    return owned.length === 3 && new Set(owned).size === 3
  }, 30000, 'two members owning the partitions')
  const groups = await admin.describeGroups(['kjs-group'])
  assert.equal(groups.groups[0].state, 'Stable')
  assert.equal(groups.groups[0].members.length, 2)
  assert.deepEqual(groups.groups[0].members.map(m => m.clientId).sort(), ['sluice-kafkajs', 'sluice-kafkajs'])

  const first = makeRecords('kjs1', 3, 300, 1, 1700000000000)
  const second = makeRecords('kjs2', 3, 100, 2, 1700000100000)
  const idempotent = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await idempotent.connect()
  const meta = await produce(idempotent, topic, first, { acks: -1, compression: CompressionTypes.GZIP })
  assert.deepEqual(meta.map(m => [m.partition, m.errorCode, m.baseOffset]).sort(), [[0, 0, '0'], [1, 0, '0'], [2, 0, '0']])
  await idempotent.disconnect()
  const plain = kafka.producer({ allowAutoTopicCreation: false })
  await plain.connect()
  const meta2 = await produce(plain, topic, second, { acks: 1 })
  assert.deepEqual(meta2.map(m => [m.partition, m.errorCode, m.baseOffset]).sort(), [[0, 0, '300'], [1, 0, '300'], [2, 0, '300']])
  await plain.disconnect()
  const records = first.concat(second)

  await waitUntil(() => ledger.errors.length > 0 || ledger.total >= records.length, 60000, `${records.length} records consumed`)
  assert.deepEqual(ledger.errors, [])
  expectTopic('kjs-group', records, ledger.got)
  // kafkajs commits after each batch.
  let committed
  await waitUntil(async () => {
    committed = (await admin.fetchOffsets({ groupId: 'kjs-group', topics: [topic] }))[0].partitions
    return committed.every(p => p.offset === '400')
  }, 30000, 'kjs-group committing the ends').catch(e => {
    throw new Error(`${e.message}: committed ${JSON.stringify(committed)}`)
  })
  assert.equal(ledger.total, records.length, 'records consumed by kjs-group')
  for (const m of members) await m.consumer.disconnect()
  const listed = await admin.listGroups()
  assert.ok(listed.groups.some(g => g.groupId === 'kjs-group' && g.protocolType === 'consumer'))

  // Offsets by timestamp; a group started from offsets the admin set.
  const byTime = await admin.fetchTopicOffsetsByTimestamp(topic, 1700000000000 + 3 * 100)
  assert.deepEqual(byTime.map(p => [p.partition, p.offset]).sort(), [[0, '100'], [1, '100'], [2, '100']])
  const ends = await admin.fetchTopicOffsets(topic)
  assert.deepEqual(ends.map(p => [p.partition, p.low, p.high]).sort(), [[0, '0', '400'], [1, '0', '400'], [2, '0', '400']])
  await admin.setOffsets({ groupId: 'kjs-replay', topic, partitions: [{ partition: 0, offset: '350' }, { partition: 1, offset: '350' }, { partition: 2, offset: '350' }] })
  const replayLedger = newLedger()
  const replay = member(kafka, 'kjs-replay', 'kjs-replay', replayLedger)
  await replay.run(topic, false)
  await waitUntil(() => replayLedger.errors.length > 0 || replayLedger.total >= 150, 30000, 'kjs-replay reading 150 records')
  assert.deepEqual(replayLedger.errors, [])
  expectTopic('kjs-replay from offset 350', second.filter((r, i) => i >= 150), replayLedger.got, 350)
  await replay.consumer.disconnect()

  await admin.deleteGroups(['kjs-replay', 'kjs-group'])
  assert.ok(!(await admin.listGroups()).groups.some(g => g.groupId.startsWith('kjs-')))
  // No authorizer runs yet (docs/design/0019-security.md, phase E): the ACL APIs answer
  // SECURITY_DISABLED, as Kafka without one, rather than closing the connection.
  const acl = {
    resourceType: AclResourceTypes.TOPIC,
    resourceName: topic,
    resourcePatternType: ResourcePatternTypes.LITERAL,
    principal: 'User:alice',
    host: '*',
    operation: AclOperationTypes.READ,
    permissionType: AclPermissionTypes.ALLOW,
  }
  const disabled = e => e.type === 'SECURITY_DISABLED'
  await assert.rejects(admin.createAcls({ acl: [acl] }), disabled, 'createAcls')
  await assert.rejects(admin.describeAcls({ ...acl, resourceType: AclResourceTypes.ANY }), disabled,
    'describeAcls')
  await assert.rejects(admin.deleteAcls({ filters: [acl] }), disabled, 'deleteAcls')
  await admin.deleteTopics({ topics: [topic] })
  assert.ok(!(await admin.listTopics()).includes(topic))
  await admin.disconnect()
}

async function saslClients (bootstrap) {
  const client = (mechanism, password) => new Kafka({
    clientId: 'sluice-kafkajs-sasl',
    brokers: [bootstrap],
    logLevel: logLevel.NOTHING,
    retry: { retries: 2 },
    sasl: { mechanism, username: 'alice', password },
  })
  const scram = client('scram-sha-256', 'alice-secret')
  const admin = scram.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic: 'kjs-secure', numPartitions: 2 }], waitForLeaders: true })
  await admin.disconnect()
  const records = makeRecords('kjs-secure', 2, 100, 3, 1710000000000)
  const producer = scram.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  await produce(producer, 'kjs-secure', records, { acks: -1, compression: CompressionTypes.GZIP })
  await producer.disconnect()

  const ledger = newLedger()
  const reader = member(client('plain', 'alice-secret'), 'kjs-secure-group', 'kjs-secure', ledger)
  await reader.run('kjs-secure')
  await waitUntil(() => ledger.errors.length > 0 || ledger.total >= records.length, 30000, 'kjs-secure consumed')
  assert.deepEqual(ledger.errors, [])
  expectTopic('kjs-secure (SCRAM-SHA-256 producer, PLAIN consumer)', records, ledger.got)
  await reader.consumer.disconnect()

  for (const mechanism of ['plain', 'scram-sha-256']) {
    const bad = client(mechanism, 'wrong').admin()
    await assert.rejects(bad.connect(), e => /SASL|[Aa]uthentication/.test(e.message) || /SASL/.test(e.name),
      `${mechanism} with a wrong password`)
  }
}

async function withBroker (sluice, config, name, body) {
  const broker = new Broker(sluice, config)
  try {
    const bootstrap = await broker.start()
    const t = Date.now()
    await body(bootstrap)
    const code = await broker.stop()
    assert.equal(code, 0, `sluice serve after SIGTERM: ${code}`)
    console.log(`${name}: ok (${((Date.now() - t) / 1000).toFixed(1)} s)`)
  } catch (e) {
    console.error(e)
    console.error(broker.logs())
    throw e
  } finally {
    broker.cleanup()
  }
}

async function main () {
  const sluice = process.argv[2]
  if (!sluice) {
    console.error('usage: node kafkajs_test.js path/to/sluice')
    process.exit(2)
  }
  try {
    await withBroker(sluice, FAST_GROUPS, 'kafkajs', plainClients)
    await withBroker(sluice, SASL, 'kafkajs with SASL', saslClients)
  } catch (e) {
    console.log(`FAIL: kafkajs: ${e.message}`)
    process.exit(1)
  }
  console.log('PASS: kafkajs end to end')
  process.exit(0)
}

// kafkajs_txn_test.js reuses the broker launcher; tls_kafkajs_clients.js the records and members.
module.exports = { Broker, waitUntil, logCreator, FAST_GROUPS, makeRecords, produce, member, newLedger, expectTopic }
if (require.main === module) main()
