// The ACL matrix through KafkaJS (driven by acls_test.py, which starts `sluice serve` with
// a PLAINTEXT and a SASL_PLAINTEXT listener, authorization.enabled, User:admin a super
// user and the SASL users admin, alice, bob and carol, passwords "<name>-secret").
//
// The super user creates the topics before any ACL exists (a principal no ACL names may do
// nothing: alice sees no topic), then the ACLs (ACLS below), and each principal tries each
// API KafkaJS sends: allowed calls succeed, denied ones fail with Kafka's error for that
// API (TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
// CLUSTER_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED), checked by name;
// what a denied call would have changed is checked unchanged through the super user.
// Covered: a PREFIXED ALLOW ("pay-": pay-1 yes, other no), DENY beating ALLOW (carol: READ
// on "*", DENY READ on "secret"), implied operations (READ implies DESCRIBE; ALTER_CONFIGS
// implies DESCRIBE_CONFIGS but not DESCRIBE), hosts (a binding for another host does not
// apply), `User:*`, User:ANONYMOUS on the PLAINTEXT listener, an ACL deleted while its
// group member runs (its next heartbeat is refused).
//
// KafkaJS hides FindCoordinator's errors (it tries another broker and reports none found)
// and sends some APIs only behind others: acls_test.py checks those with raw requests.
//
// usage: node acls_kafkajs_matrix.js SASL_PLAINTEXT_ADDR PLAINTEXT_ADDR
//        (kafkajs from the repository's node_modules); prints "ok: ..." or "FAIL: ..." per
//        check and exits 1 when any failed.
'use strict'

const assert = require('node:assert/strict')
let kafkajs
try {
  kafkajs = require('kafkajs')
} catch (e) {
  console.log('FAIL: kafkajs is missing from node_modules (scripts/setup.sh runs npm ci)')
  process.exit(1)
}
const {
  Kafka, logLevel, ConfigResourceTypes, AclResourceTypes, ResourcePatternTypes, AclOperationTypes,
  AclPermissionTypes,
} = kafkajs

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function waitUntil (predicate, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await predicate()
    if (value) return value
    if (Date.now() >= deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`)
    await sleep(20)
  }
}

// The topics the super user makes before any ACL exists, and their partitions.
const TOPICS = {
  'pay-1': 2, other: 1, shared: 1, secret: 1, public: 1, 'anon-topic': 1, hosty: 1, 'bob-desc': 1, cfg: 1, keep: 1,
}

const acl = (type, name, pattern, principal, op, perm = 'ALLOW', host = '*') => ({
  resourceType: AclResourceTypes[type],
  resourceName: name,
  resourcePatternType: ResourcePatternTypes[pattern],
  principal,
  host,
  operation: AclOperationTypes[op],
  permissionType: AclPermissionTypes[perm],
})

const BOB_HB = acl('GROUP', 'bob-hb', 'LITERAL', 'User:bob', 'READ')
const ACLS = [
  // alice: everything on pay-* topics and groups (PREFIXED), her transactional id, DESCRIBE
  // on the cluster (DescribeAcls, ListGroups of every group, no more).
  acl('TOPIC', 'pay-', 'PREFIXED', 'User:alice', 'ALL'),
  acl('GROUP', 'pay-', 'PREFIXED', 'User:alice', 'ALL'),
  acl('TRANSACTIONAL_ID', 'alice-tx', 'LITERAL', 'User:alice', 'WRITE'),
  acl('CLUSTER', 'kafka-cluster', 'LITERAL', 'User:alice', 'DESCRIBE'),
  // hosty: READ only from a host she is not on, DESCRIBE from 127.0.0.1.
  acl('TOPIC', 'hosty', 'LITERAL', 'User:alice', 'READ', 'ALLOW', '10.1.2.3'),
  acl('TOPIC', 'hosty', 'LITERAL', 'User:alice', 'DESCRIBE', 'ALLOW', '127.0.0.1'),
  // cfg: ALTER_CONFIGS, which implies DESCRIBE_CONFIGS and not DESCRIBE.
  acl('TOPIC', 'cfg', 'LITERAL', 'User:alice', 'ALTER_CONFIGS'),
  // bob: partial rights.
  acl('TOPIC', 'shared', 'LITERAL', 'User:bob', 'READ'),
  acl('TOPIC', 'bob-desc', 'LITERAL', 'User:bob', 'DESCRIBE'),
  acl('TOPIC', 'keep', 'LITERAL', 'User:bob', 'READ'),
  acl('GROUP', 'bob-group', 'LITERAL', 'User:bob', 'READ'),
  acl('GROUP', 'bob-view', 'LITERAL', 'User:bob', 'DESCRIBE'),
  BOB_HB,
  acl('TRANSACTIONAL_ID', 'bob-tx', 'LITERAL', 'User:bob', 'DESCRIBE'),
  // carol: DENY beats ALLOW.
  acl('TOPIC', '*', 'LITERAL', 'User:carol', 'READ'),
  acl('TOPIC', 'secret', 'LITERAL', 'User:carol', 'READ', 'DENY'),
  acl('GROUP', 'carol-', 'PREFIXED', 'User:carol', 'READ'),
  acl('GROUP', 'carol-blocked', 'LITERAL', 'User:carol', 'READ', 'DENY'),
  // Everybody, and the unauthenticated principal.
  acl('TOPIC', 'public', 'LITERAL', 'User:*', 'DESCRIBE'),
  acl('TOPIC', 'anon-topic', 'LITERAL', 'User:ANONYMOUS', 'WRITE'),
]

let saslAddr, plainAddr
const clients = []

function kafkaAs (user) {
  const k = new Kafka({
    clientId: `acl-${user || 'anonymous'}`,
    brokers: [user ? saslAddr : plainAddr],
    logLevel: logLevel.NOTHING,
    retry: { retries: 2, initialRetryTime: 50, maxRetryTime: 500 },
    ...(user ? {
      sasl: { mechanism: user === 'admin' ? 'scram-sha-256' : 'plain', username: user, password: `${user}-secret` },
    } : {}),
  })
  return k
}

// A connected admin client of `user` (null: anonymous on the PLAINTEXT listener). A fresh
// one per check where a refused topic would stay in KafkaJS's metadata targets.
async function adminAs (user) {
  const admin = kafkaAs(user).admin()
  await admin.connect()
  clients.push(admin)
  return admin
}

// The first Kafka error name found in `e` or what it wraps.
function errorType (e) {
  const seen = new Set()
  const queue = [e]
  while (queue.length) {
    const x = queue.shift()
    if (!x || typeof x !== 'object' || seen.has(x)) continue
    seen.add(x)
    if (typeof x.type === 'string') return x.type
    queue.push(x.cause, x.originalError, x.error)
    for (const list of [x.errors, x.partitions, x.groups]) {
      if (Array.isArray(list)) queue.push(...list)
    }
  }
  return `(no Kafka error type: ${e && e.name}: ${e && e.message})`
}

// Each check is a step: its failure is reported and the next step runs (most do not
// depend on each other), so that one run shows every check that fails.
const failures = []
async function step (what, fn) {
  try {
    await fn()
    console.log(`ok: ${what}`)
  } catch (e) {
    failures.push(what)
    console.log(`FAIL: ${what}: ${e instanceof assert.AssertionError ? e.message : (e.stack || e)}`)
  }
}

// Expects `promise` to fail with Kafka's error `type`.
async function denied (promise, type) {
  let result
  try {
    result = await promise
  } catch (e) {
    assert.equal(errorType(e), type, `${e.name}: ${e.message}`)
    return
  }
  assert.fail(`allowed (${JSON.stringify(result)}), not ${type}`)
}

// Expects `promise` to succeed; its result.
async function allowed (promise) {
  try {
    return await promise
  } catch (e) {
    assert.fail(`refused: ${errorType(e)} (${e.name}: ${e.message})`)
  }
}

// One record to `topic` with a fresh producer of `user`; the send's result.
async function produceAs (user, topic, { idempotent = false, auto = false } = {}) {
  const producer = kafkaAs(user).producer({
    idempotent,
    allowAutoTopicCreation: auto,
    maxInFlightRequests: idempotent ? 1 : undefined,
    retry: { retries: 2, initialRetryTime: 50, maxRetryTime: 500 },
  })
  try {
    await producer.connect()
    return await producer.send({ topic, acks: -1, messages: [{ key: 'k', value: `from ${user || 'anonymous'}` }] })
  } finally {
    await producer.disconnect().catch(() => {})
  }
}

// A group member of `user` in `groupId` reading `topic` from the beginning until it has
// `want` records (resolves {consumer, got}) or crashes (rejects with the crash's error).
// Offsets are committed only when asked.
async function consumeAs (user, groupId, topic, want) {
  const consumer = kafkaAs(user).consumer({
    groupId,
    sessionTimeout: 10000,
    rebalanceTimeout: 10000,
    heartbeatInterval: 100,
    maxWaitTimeInMs: 100,
    allowAutoTopicCreation: false,
    retry: { retries: 1, initialRetryTime: 50, restartOnFailure: async () => false },
  })
  let crash = null
  consumer.on(consumer.events.CRASH, e => { crash = e.payload.error })
  const got = []
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => { got.push({ partition, offset: message.offset }) },
  })
  await waitUntil(() => crash || got.length >= want, 30000, `${user} in ${groupId} reading ${topic}`)
  if (crash) {
    await consumer.disconnect().catch(() => {})
    throw crash
  }
  return { consumer, got }
}

// Expects a member of `user` in `groupId` reading `topic` to crash with Kafka's error
// `type` (a member that reads instead is stopped, and the check fails).
async function consumeDenied (user, groupId, topic, type) {
  let m
  try {
    m = await consumeAs(user, groupId, topic, 1)
  } catch (e) {
    assert.equal(errorType(e), type, `${e.name}: ${e.message}`)
    return
  }
  await m.consumer.disconnect().catch(() => {})
  assert.fail(`allowed (read ${JSON.stringify(m.got)}), not ${type}`)
}

async function waitCrash (consumer, what) {
  let crash = null
  consumer.on(consumer.events.CRASH, e => { crash = e.payload.error })
  await waitUntil(() => crash, 30000, what)
  return crash
}

const sorted = list => [...list].sort()

const any = {
  resourceType: AclResourceTypes.ANY,
  resourcePatternType: ResourcePatternTypes.ANY,
  operation: AclOperationTypes.ANY,
  permissionType: AclPermissionTypes.ANY,
}
const aclKey = (r, a) => JSON.stringify([r.resourceType, r.resourceName, r.resourcePatternType, a.principal, a.host,
  a.operation, a.permissionType])
const flat = resources => sorted(resources.flatMap(r => r.acls.map(a => aclKey(r, a))))

async function main () {
  [saslAddr, plainAddr] = process.argv.slice(2)
  const admin = await adminAs('admin')
  const { brokers } = await admin.describeCluster()
  const nodeId = String(brokers[0].nodeId)
  const all = sorted(Object.keys(TOPICS))
  const topicsNow = async () => sorted(await admin.listTopics())
  const partitionsOf = async topic => (await (await adminAs('admin')).fetchTopicMetadata({ topics: [topic] })).topics[0].partitions.length
  const lows = async topic => (await (await adminAs('admin')).fetchTopicOffsets(topic)).map(p => [p.partition, p.low]).sort()
  const ends = async topic => (await (await adminAs('admin')).fetchTopicOffsets(topic)).map(p => [p.partition, p.high]).sort()

  // --- before any ACL: the super user does everything, alice nothing --------------------
  // (setup: a failure here ends the run)
  await admin.createTopics({
    topics: Object.entries(TOPICS).map(([topic, numPartitions]) => ({ topic, numPartitions })),
    waitForLeaders: true,
  })
  const seed = kafkaAs('admin').producer({ allowAutoTopicCreation: false })
  await seed.connect()
  for (const [topic, partitions] of Object.entries(TOPICS)) {
    const messages = []
    for (let p = 0; p < partitions; p++) for (let i = 0; i < 3; i++) messages.push({ partition: p, value: `${topic}-${p}-${i}` })
    await seed.send({ topic, acks: -1, messages })
  }
  await seed.disconnect()
  console.log('ok: admin (super user, no ACL yet) creates the topics and produces to each')
  assert.deepEqual(await topicsNow(), all)
  await step('no ACL at all: alice lists no topic (allow_everyone_if_no_acl_found is false)', async () =>
    assert.deepEqual(await (await adminAs('alice')).listTopics(), []))
  await step('no ACL at all: alice producing to pay-1: TOPIC_AUTHORIZATION_FAILED', () =>
    denied(produceAs('alice', 'pay-1'), 'TOPIC_AUTHORIZATION_FAILED'))
  assert.deepEqual((await admin.describeAcls(any)).resources, [], 'ACLs before any was made')

  // --- the ACL APIs ------------------------------------------------------------------------
  await admin.createAcls({ acl: ACLS })
  const want = sorted(ACLS.map(a => aclKey(a, a)))
  await step(`admin creates ${ACLS.length} ACLs; DescribeAcls ANY answers them`, async () =>
    assert.deepEqual(flat((await admin.describeAcls(any)).resources), want))
  await step('alice (DESCRIBE on the cluster) describes the ACLs', async () =>
    assert.deepEqual(flat((await allowed((await adminAs('alice')).describeAcls(any))).resources), want))
  await step('alice (no ALTER on the cluster) creating an ACL: CLUSTER_AUTHORIZATION_FAILED', async () =>
    denied((await adminAs('alice')).createAcls({ acl: [acl('TOPIC', 'other', 'LITERAL', 'User:alice', 'ALL')] }),
      'CLUSTER_AUTHORIZATION_FAILED'))
  await step('alice deleting ACLs: CLUSTER_AUTHORIZATION_FAILED', async () =>
    denied((await adminAs('alice')).deleteAcls({ filters: [any] }), 'CLUSTER_AUTHORIZATION_FAILED'))
  await step('bob describing ACLs: CLUSTER_AUTHORIZATION_FAILED', async () =>
    denied((await adminAs('bob')).describeAcls(any), 'CLUSTER_AUTHORIZATION_FAILED'))
  await step('bob creating an ACL: CLUSTER_AUTHORIZATION_FAILED', async () =>
    denied((await adminAs('bob')).createAcls({ acl: [acl('TOPIC', '*', 'LITERAL', 'User:bob', 'ALL')] }),
      'CLUSTER_AUTHORIZATION_FAILED'))
  await step('the ACLs unchanged by the refused changes', async () =>
    assert.deepEqual(flat((await admin.describeAcls(any)).resources), want))

  // --- Metadata ------------------------------------------------------------------------
  await step('Metadata of every topic as admin: all', async () => assert.deepEqual(await topicsNow(), all))
  await step('Metadata of every topic as alice: pay-1 (PREFIXED pay-), hosty (DESCRIBE from 127.0.0.1), ' +
    'public (User:*); not cfg (ALTER_CONFIGS implies no DESCRIBE)', async () =>
    assert.deepEqual(sorted(await (await adminAs('alice')).listTopics()), ['hosty', 'pay-1', 'public']))
  await step('Metadata of every topic as bob: shared and keep (READ implies DESCRIBE), bob-desc, public', async () =>
    assert.deepEqual(sorted(await (await adminAs('bob')).listTopics()), ['bob-desc', 'keep', 'public', 'shared']))
  await step('Metadata of every topic as carol: all (READ on *; DENY READ on secret leaves DESCRIBE)', async () =>
    assert.deepEqual(sorted(await (await adminAs('carol')).listTopics()), all))
  await step('Metadata of every topic as User:ANONYMOUS on PLAINTEXT: anon-topic (WRITE implies DESCRIBE), public', async () =>
    assert.deepEqual(sorted(await (await adminAs(null)).listTopics()), ['anon-topic', 'public']))
  await step('Metadata of pay-1 as alice', async () => {
    const md = await allowed((await adminAs('alice')).fetchTopicMetadata({ topics: ['pay-1'] }))
    assert.equal(md.topics[0].partitions.length, 2)
  })
  await step('Metadata of other as alice: TOPIC_AUTHORIZATION_FAILED', async () =>
    denied((await adminAs('alice')).fetchTopicMetadata({ topics: ['other'] }), 'TOPIC_AUTHORIZATION_FAILED'))
  await step('Metadata of cfg as alice (ALTER_CONFIGS does not imply DESCRIBE): TOPIC_AUTHORIZATION_FAILED', async () =>
    denied((await adminAs('alice')).fetchTopicMetadata({ topics: ['cfg'] }), 'TOPIC_AUTHORIZATION_FAILED'))
  await step('Metadata of pay-1 as User:ANONYMOUS: TOPIC_AUTHORIZATION_FAILED', async () =>
    denied((await adminAs(null)).fetchTopicMetadata({ topics: ['pay-1'] }), 'TOPIC_AUTHORIZATION_FAILED'))
  // Auto-creation (topics.auto_create) needs CREATE on the cluster or the topic.
  await step('alice auto-creates pay-auto by producing (CREATE from ALL on pay-)', async () => {
    await allowed(produceAs('alice', 'pay-auto', { auto: true }))
    assert.ok((await topicsNow()).includes('pay-auto'))
  })
  await step('carol (DESCRIBE, no CREATE) auto-creating carol-auto: TOPIC_AUTHORIZATION_FAILED, not created', async () => {
    await denied(produceAs('carol', 'carol-auto', { auto: true }), 'TOPIC_AUTHORIZATION_FAILED')
    assert.ok(!(await topicsNow()).includes('carol-auto'))
  })
  await step('bob auto-creating bob-auto: TOPIC_AUTHORIZATION_FAILED, not created', async () => {
    await denied(produceAs('bob', 'bob-auto', { auto: true }), 'TOPIC_AUTHORIZATION_FAILED')
    assert.ok(!(await topicsNow()).includes('bob-auto'))
  })

  // --- CreateTopics, CreatePartitions, DeleteRecords, DeleteTopics -----------------------
  await step('CreateTopics as alice: pay-2', async () => {
    await allowed((await adminAs('alice')).createTopics({ topics: [{ topic: 'pay-2', numPartitions: 1 }], waitForLeaders: true }))
    assert.ok((await topicsNow()).includes('pay-2'))
  })
  await step('CreateTopics as alice: other-2: TOPIC_AUTHORIZATION_FAILED, not created', async () => {
    await denied((await adminAs('alice')).createTopics({ topics: [{ topic: 'other-2' }] }), 'TOPIC_AUTHORIZATION_FAILED')
    assert.ok(!(await topicsNow()).includes('other-2'))
  })
  await step('CreateTopics as bob: bob-new: TOPIC_AUTHORIZATION_FAILED, not created', async () => {
    await denied((await adminAs('bob')).createTopics({ topics: [{ topic: 'bob-new' }] }), 'TOPIC_AUTHORIZATION_FAILED')
    assert.ok(!(await topicsNow()).includes('bob-new'))
  })
  await step('CreatePartitions as alice: pay-2 to 3', async () => {
    await allowed((await adminAs('alice')).createPartitions({ topicPartitions: [{ topic: 'pay-2', count: 3 }] }))
    assert.equal(await partitionsOf('pay-2'), 3)
  })
  await step('DeleteRecords as alice: pay-1 partition 0 before 1', async () => {
    const a = await adminAs('alice')
    await a.fetchTopicOffsets('pay-1')
    await allowed(a.deleteTopicRecords({ topic: 'pay-1', partitions: [{ partition: 0, offset: '1' }] }))
    assert.deepEqual(await lows('pay-1'), [[0, '1'], [1, '0']])
  })
  await step('ListOffsets as bob: shared (READ implies DESCRIBE)', async () => {
    const offsets = await allowed((await adminAs('bob')).fetchTopicOffsets('shared'))
    assert.deepEqual(offsets.map(p => [p.partition, p.low, p.high]), [[0, '0', '3']])
  })
  await step('DeleteTopics as alice: pay-2', async () => {
    await allowed((await adminAs('alice')).deleteTopics({ topics: ['pay-2'] }))
    assert.ok(!(await topicsNow()).includes('pay-2'))
  })
  // --- ListOffsets -------------------------------------------------------------------------
  await step('ListOffsets as carol: secret (DENY READ leaves DESCRIBE)', async () =>
    allowed((await adminAs('carol')).fetchTopicOffsets('secret')))
  await step('ListOffsets as alice: other: TOPIC_AUTHORIZATION_FAILED', async () =>
    denied((await adminAs('alice')).fetchTopicOffsets('other'), 'TOPIC_AUTHORIZATION_FAILED'))

  // --- DescribeConfigs, AlterConfigs ----------------------------------------------------
  const topicRes = name => ({ type: ConfigResourceTypes.TOPIC, name })
  const brokerRes = { type: ConfigResourceTypes.BROKER, name: nodeId }
  const retention = async topic => (await admin.describeConfigs({ resources: [topicRes(topic)] }))
    .resources[0].configEntries.find(e => e.configName === 'retention.ms').configValue
  await step('DescribeConfigs as alice: cfg (ALTER_CONFIGS implies DESCRIBE_CONFIGS)', async () =>
    allowed((await adminAs('alice')).describeConfigs({ resources: [topicRes('cfg')] })))
  await step('DescribeConfigs as alice: pay-1', async () =>
    allowed((await adminAs('alice')).describeConfigs({ resources: [topicRes('pay-1')] })))
  await step('DescribeConfigs as alice: other: TOPIC_AUTHORIZATION_FAILED', async () =>
    denied((await adminAs('alice')).describeConfigs({ resources: [topicRes('other')] }), 'TOPIC_AUTHORIZATION_FAILED'))
  await step('DescribeConfigs as bob: shared (READ does not imply DESCRIBE_CONFIGS): TOPIC_AUTHORIZATION_FAILED', async () =>
    denied((await adminAs('bob')).describeConfigs({ resources: [topicRes('shared')] }), 'TOPIC_AUTHORIZATION_FAILED'))
  await step('DescribeConfigs as alice: the broker: CLUSTER_AUTHORIZATION_FAILED', async () =>
    denied((await adminAs('alice')).describeConfigs({ resources: [brokerRes] }), 'CLUSTER_AUTHORIZATION_FAILED'))
  await step('DescribeConfigs as admin: the broker', () => allowed(admin.describeConfigs({ resources: [brokerRes] })))
  await step('AlterConfigs as alice: cfg', async () => {
    await allowed((await adminAs('alice')).alterConfigs({
      resources: [{ ...topicRes('cfg'), configEntries: [{ name: 'retention.ms', value: '3600000' }] }],
    }))
    assert.equal(await retention('cfg'), '3600000')
  })
  await step('AlterConfigs as bob: shared: TOPIC_AUTHORIZATION_FAILED, unchanged', async () => {
    await denied((await adminAs('bob')).alterConfigs({
      resources: [{ ...topicRes('shared'), configEntries: [{ name: 'retention.ms', value: '1000' }] }],
    }), 'TOPIC_AUTHORIZATION_FAILED')
    assert.notEqual(await retention('shared'), '1000')
  })
  await step('AlterConfigs as alice: the broker: CLUSTER_AUTHORIZATION_FAILED', async () =>
    denied((await adminAs('alice')).alterConfigs({
      resources: [{ ...brokerRes, configEntries: [{ name: 'log.retention.ms', value: '1000' }] }],
    }), 'CLUSTER_AUTHORIZATION_FAILED'))

  // --- Produce, idempotent and transactional producers -----------------------------------
  await step('Produce as alice: pay-1', () => allowed(produceAs('alice', 'pay-1')))
  await step('Produce as alice: other: TOPIC_AUTHORIZATION_FAILED', () =>
    denied(produceAs('alice', 'other'), 'TOPIC_AUTHORIZATION_FAILED'))
  await step('Produce as bob: shared (READ, no WRITE): TOPIC_AUTHORIZATION_FAILED', () =>
    denied(produceAs('bob', 'shared'), 'TOPIC_AUTHORIZATION_FAILED'))
  await step('Produce as alice: hosty (DESCRIBE only): TOPIC_AUTHORIZATION_FAILED', () =>
    denied(produceAs('alice', 'hosty'), 'TOPIC_AUTHORIZATION_FAILED'))
  await step('Produce as User:ANONYMOUS: anon-topic', () => allowed(produceAs(null, 'anon-topic')))
  await step('Produce as User:ANONYMOUS: pay-1: TOPIC_AUTHORIZATION_FAILED', () =>
    denied(produceAs(null, 'pay-1'), 'TOPIC_AUTHORIZATION_FAILED'))
  await step('Produce as User:ANONYMOUS: public (DESCRIBE only): TOPIC_AUTHORIZATION_FAILED', () =>
    denied(produceAs(null, 'public'), 'TOPIC_AUTHORIZATION_FAILED'))
  await step('idempotent producer as alice (WRITE on some topic)', () => allowed(produceAs('alice', 'pay-1', { idempotent: true })))
  await step('idempotent producer as User:ANONYMOUS (WRITE on anon-topic)', () =>
    allowed(produceAs(null, 'anon-topic', { idempotent: true })))
  await step('idempotent producer as bob (no IDEMPOTENT_WRITE, no WRITE anywhere): CLUSTER_AUTHORIZATION_FAILED', () =>
    denied(produceAs('bob', 'shared', { idempotent: true }), 'CLUSTER_AUTHORIZATION_FAILED'))
  await step('the logs hold exactly the allowed records', async () => {
    const pay = (await ends('pay-1')).reduce((n, [, h]) => n + Number(h), 0)
    assert.equal(pay, 6 + 2, 'pay-1: 6 seeded, 2 produced by alice')
    assert.deepEqual(await ends('shared'), [[0, '3']])
    assert.deepEqual(await ends('other'), [[0, '3']])
    assert.deepEqual(await ends('hosty'), [[0, '3']])
    assert.deepEqual(await ends('public'), [[0, '3']])
    assert.deepEqual(await ends('anon-topic'), [[0, '5']])
  })

  await step('transactional producer as alice: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn', async () => {
    const p = kafkaAs('alice').producer({ transactionalId: 'alice-tx', idempotent: true, maxInFlightRequests: 1 })
    await p.connect()
    try {
      const txn = await allowed(p.transaction())
      await allowed(txn.send({ topic: 'pay-1', messages: [{ partition: 1, value: 'in a transaction' }] }))
      await allowed(txn.sendOffsets({
        consumerGroupId: 'pay-txgroup', topics: [{ topic: 'pay-1', partitions: [{ partition: 0, offset: '2' }] }],
      }))
      await allowed(txn.commit())
    } finally {
      await p.disconnect().catch(() => {})
    }
    const offsets = await (await adminAs('alice')).fetchOffsets({ groupId: 'pay-txgroup', topics: ['pay-1'] })
    assert.deepEqual(offsets[0].partitions.map(p => [p.partition, p.offset]).sort(), [[0, '2'], [1, '-1']])
  })
  await step('AddPartitionsToTxn as alice: hosty (no WRITE): TOPIC_AUTHORIZATION_FAILED', async () => {
    const p = kafkaAs('alice').producer({ transactionalId: 'alice-tx', idempotent: true, maxInFlightRequests: 1 })
    await p.connect()
    try {
      const txn = await p.transaction()
      await denied(txn.send({ topic: 'hosty', messages: [{ value: 'x' }] }), 'TOPIC_AUTHORIZATION_FAILED')
      await txn.abort().catch(() => {})
    } finally {
      await p.disconnect().catch(() => {})
    }
  })
  await step('AddOffsetsToTxn as alice: bob-group (no READ on the group): GROUP_AUTHORIZATION_FAILED', async () => {
    const p = kafkaAs('alice').producer({ transactionalId: 'alice-tx', idempotent: true, maxInFlightRequests: 1 })
    await p.connect()
    try {
      const txn = await p.transaction()
      await denied(txn.sendOffsets({
        consumerGroupId: 'bob-group', topics: [{ topic: 'pay-1', partitions: [{ partition: 0, offset: '1' }] }],
      }), 'GROUP_AUTHORIZATION_FAILED')
      await txn.abort().catch(() => {})
    } finally {
      await p.disconnect().catch(() => {})
    }
  })
  await step('InitProducerId as bob: bob-tx (DESCRIBE, no WRITE): TRANSACTIONAL_ID_AUTHORIZATION_FAILED', async () => {
    const p = kafkaAs('bob').producer({ transactionalId: 'bob-tx', maxInFlightRequests: 1 })
    await p.connect()
    try {
      await denied(p.transaction(), 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED')
    } finally {
      await p.disconnect().catch(() => {})
    }
  })

  // --- groups ----------------------------------------------------------------------------
  await step('alice in pay-group: JoinGroup, SyncGroup, Fetch, Heartbeat, OffsetCommit, LeaveGroup', async () => {
    const m = await allowed(consumeAs('alice', 'pay-group', 'pay-1', 2))
    try {
      await allowed(m.consumer.commitOffsets([{ topic: 'pay-1', partition: 1, offset: '2' }]))
    } finally {
      await m.consumer.disconnect()
    }
    const offsets = await (await adminAs('alice')).fetchOffsets({ groupId: 'pay-group', topics: ['pay-1'] })
    assert.deepEqual(offsets[0].partitions.map(p => [p.partition, p.offset]).sort(), [[0, '-1'], [1, '2']])
  })
  await step('bob in bob-group reads shared (READ on both) and commits', async () => {
    const m = await allowed(consumeAs('bob', 'bob-group', 'shared', 3))
    try {
      await allowed(m.consumer.commitOffsets([{ topic: 'shared', partition: 0, offset: '3' }]))
    } finally {
      await m.consumer.disconnect()
    }
  })
  await step('Fetch as bob: bob-desc (DESCRIBE, no READ): TOPIC_AUTHORIZATION_FAILED', () =>
    consumeDenied('bob', 'bob-group', 'bob-desc', 'TOPIC_AUTHORIZATION_FAILED'))
  await step('JoinGroup as bob: bob-view (DESCRIBE, no READ): GROUP_AUTHORIZATION_FAILED', () =>
    consumeDenied('bob', 'bob-view', 'shared', 'GROUP_AUTHORIZATION_FAILED'))
  await step('carol in carol-1 (PREFIXED carol-) reads other (READ on *)', async () => {
    const m = await allowed(consumeAs('carol', 'carol-1', 'other', 3))
    await m.consumer.disconnect()
  })
  await step('Fetch as carol: secret (DENY READ beats ALLOW READ on *): TOPIC_AUTHORIZATION_FAILED', () =>
    consumeDenied('carol', 'carol-1', 'secret', 'TOPIC_AUTHORIZATION_FAILED'))
  await step('JoinGroup as carol: carol-blocked (DENY READ beats the PREFIXED ALLOW): GROUP_AUTHORIZATION_FAILED', () =>
    consumeDenied('carol', 'carol-blocked', 'other', 'GROUP_AUTHORIZATION_FAILED'))
  await step('Fetch as alice: hosty (her READ is for host 10.1.2.3): TOPIC_AUTHORIZATION_FAILED', () =>
    consumeDenied('alice', 'pay-hosty', 'hosty', 'TOPIC_AUTHORIZATION_FAILED'))
  await step('bob in bob-hb: Heartbeat refused once the ACL is deleted: GROUP_AUTHORIZATION_FAILED', async () => {
    const m = await allowed(consumeAs('bob', 'bob-hb', 'shared', 3))
    try {
      const crashed = waitCrash(m.consumer, 'bob-hb refused after its ACL went')
      const removed = await admin.deleteAcls({ filters: [BOB_HB] })
      assert.equal(removed.filterResponses[0].matchingAcls.length, 1, 'deleteAcls: bindings matched')
      assert.equal(errorType(await crashed), 'GROUP_AUTHORIZATION_FAILED')
    } finally {
      await m.consumer.disconnect().catch(() => {})
    }
  })

  await step('OffsetFetch as bob: bob-group (READ implies DESCRIBE)', async () => {
    const offsets = await allowed((await adminAs('bob')).fetchOffsets({ groupId: 'bob-group', topics: ['shared'] }))
    assert.deepEqual(offsets[0].partitions.map(p => [p.partition, p.offset]), [[0, '3']])
  })
  await step('OffsetFetch as bob: bob-view (DESCRIBE)', async () =>
    allowed((await adminAs('bob')).fetchOffsets({ groupId: 'bob-view', topics: ['shared'] })))
  const groupsOf = async user => sorted((await (await adminAs(user)).listGroups()).groups.map(g => g.groupId))
  let everyGroup = []
  await step('ListGroups as admin: every group', async () => {
    everyGroup = await groupsOf('admin')
    for (const g of ['pay-group', 'pay-txgroup', 'bob-group', 'bob-hb', 'carol-1']) {
      assert.ok(everyGroup.includes(g), `groups: ${everyGroup}`)
    }
  })
  await step('ListGroups as alice (DESCRIBE on the cluster): every group', async () =>
    assert.deepEqual(await groupsOf('alice'), everyGroup))
  await step('ListGroups as bob: those he may DESCRIBE (bob-group; not bob-hb, its ACL gone)', async () =>
    assert.deepEqual(await groupsOf('bob'), ['bob-group']))
  await step('ListGroups as carol: those she may DESCRIBE', async () =>
    assert.deepEqual(await groupsOf('carol'), ['carol-1']))
  await step('ListGroups as User:ANONYMOUS: none', async () => assert.deepEqual(await groupsOf(null), []))
  await step('DescribeGroups as bob: bob-group', async () => {
    const described = await allowed((await adminAs('bob')).describeGroups(['bob-group']))
    assert.equal(described.groups[0].errorCode, 0)
    assert.equal(described.groups[0].state, 'Empty')
  })
  await step('DeleteGroups as bob: bob-group (no DELETE): GROUP_AUTHORIZATION_FAILED, kept', async () => {
    await denied((await adminAs('bob')).deleteGroups(['bob-group']), 'GROUP_AUTHORIZATION_FAILED')
    assert.ok((await groupsOf('admin')).includes('bob-group'))
  })
  await step('DeleteGroups as alice: pay-group', async () => {
    await allowed((await adminAs('alice')).deleteGroups(['pay-group']))
    assert.ok(!(await groupsOf('admin')).includes('pay-group'))
  })

  // --- refusals that would change what the checks above and acls_test.py's read: last, on
  // keep (bob: READ), so that a broker wrongly allowing one spoils no other check ----------
  await step('CreatePartitions as bob: keep (READ, no ALTER): TOPIC_AUTHORIZATION_FAILED, unchanged', async () => {
    await denied((await adminAs('bob')).createPartitions({ topicPartitions: [{ topic: 'keep', count: 2 }] }),
      'TOPIC_AUTHORIZATION_FAILED')
    assert.equal(await partitionsOf('keep'), 1)
  })
  await step('DeleteRecords as bob: keep (READ, no DELETE): TOPIC_AUTHORIZATION_FAILED, unchanged', async () => {
    const b = await adminAs('bob')
    await b.fetchTopicOffsets('keep')
    await denied(b.deleteTopicRecords({ topic: 'keep', partitions: [{ partition: 0, offset: '1' }] }), 'TOPIC_AUTHORIZATION_FAILED')
    assert.deepEqual(await lows('keep'), [[0, '0']])
  })
  await step('DeleteTopics as bob: keep (READ, no DELETE): TOPIC_AUTHORIZATION_FAILED, kept', async () => {
    await denied((await adminAs('bob')).deleteTopics({ topics: ['keep'] }), 'TOPIC_AUTHORIZATION_FAILED')
    assert.ok((await topicsNow()).includes('keep'))
  })
  await step('DeleteTopics as alice: keep (no ACL): TOPIC_AUTHORIZATION_FAILED, kept', async () => {
    await denied((await adminAs('alice')).deleteTopics({ topics: ['keep'] }), 'TOPIC_AUTHORIZATION_FAILED')
    assert.ok((await topicsNow()).includes('keep'))
  })

  // --- DescribeCluster (Metadata in KafkaJS): no error for anybody -------------------------
  for (const user of ['bob', null]) {
    await step(`describeCluster as ${user || 'User:ANONYMOUS'}`, async () => {
      const c = await allowed((await adminAs(user)).describeCluster())
      assert.equal(c.brokers.length, 1)
    })
  }

  for (const c of clients) await c.disconnect().catch(() => {})
  if (failures.length) throw new Error(`${failures.length} checks failed:\n  ${failures.join('\n  ')}`)
}

main().then(() => process.exit(0), e => {
  console.log(`FAIL: kafkajs ACL matrix: ${e.stack || e.message}`)
  process.exit(1)
})
