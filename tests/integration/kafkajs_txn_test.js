// KafkaJS transactions against `sluice serve`: a transactional producer commits and
// aborts (read_committed and read_uncommitted consumers see what Kafka shows them),
// sends a consumer group's offsets inside a transaction (visible once committed), and is
// fenced by a second producer with the same transactionalId.
//
// usage: node kafkajs_txn_test.js path/to/sluice   (kafkajs from the repository's node_modules)
'use strict'

const assert = require('node:assert/strict')
const { Broker, waitUntil, logCreator, FAST_GROUPS } = require('./kafkajs_test.js')
const { Kafka, logLevel } = require('kafkajs')

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

// Every value of `topic` a consumer sees from the start, once it has at least `want`.
async function readAll (kafka, topic, readUncommitted, want) {
  const consumer = kafka.consumer({ groupId: `reader-${Date.now()}-${Math.random()}`, readUncommitted })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const values = []
  await consumer.run({ eachMessage: async ({ message }) => { values.push(message.value.toString()) } })
  await waitUntil(() => values.length >= want, 30000, `${want} records of ${topic}`)
  await new Promise(resolve => setTimeout(resolve, 500))  // anything more would show now
  await consumer.disconnect()
  return values.sort()
}

async function transactions (kafka) {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic: 't', numPartitions: 2 }, { topic: 'in', numPartitions: 1 }] })

  const producer = kafka.producer({ transactionalId: 'js-tx', maxInFlightRequests: 1, idempotent: true })
  await producer.connect()
  let txn = await producer.transaction()
  await txn.send({ topic: 't', messages: [0, 1, 2, 3].map(i => ({ value: `c${i}`, partition: i % 2 })) })
  await txn.commit()
  txn = await producer.transaction()
  await txn.send({ topic: 't', messages: [0, 1].map(i => ({ value: `a${i}`, partition: i % 2 })) })
  await txn.abort()
  txn = await producer.transaction()
  await txn.send({ topic: 't', messages: [{ value: 'last', partition: 0 }] })
  await txn.commit()
  assert.deepEqual(await readAll(kafka, 't', false, 5), ['c0', 'c1', 'c2', 'c3', 'last'])
  assert.deepEqual(await readAll(kafka, 't', true, 7), ['a0', 'a1', 'c0', 'c1', 'c2', 'c3', 'last'])

  // Offsets inside a transaction: visible to the group only once committed.
  txn = await producer.transaction()
  await txn.send({ topic: 't', messages: [{ value: 'with-offsets', partition: 1 }] })
  await txn.sendOffsets({ consumerGroupId: 'js-group', topics: [{ topic: 'in', partitions: [{ partition: 0, offset: '42' }] }] })
  const before = await admin.fetchOffsets({ groupId: 'js-group', topics: ['in'] })
  assert.equal(before[0].partitions[0].offset, '-1', 'offsets visible before the commit')
  await txn.commit()
  const after = await admin.fetchOffsets({ groupId: 'js-group', topics: ['in'] })
  assert.equal(after[0].partitions[0].offset, '42')

  // A second producer with the same transactionalId fences the first.
  const zombie = producer
  const fresh = kafka.producer({ transactionalId: 'js-tx', maxInFlightRequests: 1, idempotent: true })
  await fresh.connect()
  const ft = await fresh.transaction()
  await ft.send({ topic: 't', messages: [{ value: 'fresh', partition: 0 }] })
  await ft.commit()
  let fenced = null
  try {
    const zt = await zombie.transaction()
    await zt.send({ topic: 't', messages: [{ value: 'zombie', partition: 0 }] })
    await zt.commit()
  } catch (e) {
    fenced = e
  }
  assert.ok(fenced, 'the fenced producer committed')
  assert.match(`${fenced.type || ''} ${fenced.message}`, /FENCED|EPOCH|fenced|epoch/)
  const committed = await readAll(kafka, 't', false, 7)
  assert.ok(!committed.includes('zombie'), 'a fenced record is visible')
  assert.ok(committed.includes('fresh'))
  await fresh.disconnect()
  await zombie.disconnect().catch(() => {})
  await admin.disconnect()
}

async function main () {
  const sluice = process.argv[2]
  const broker = new Broker(sluice, FAST_GROUPS)
  try {
    const bootstrap = await broker.start()
    const kafka = new Kafka({ clientId: 'sluice-it', brokers: [bootstrap], logLevel: logLevel.WARN, logCreator, retry: { retries: 10 } })
    await transactions(kafka)
    const code = await broker.stop()
    assert.equal(code, 0, `sluice serve after SIGTERM: ${code}`)
  } catch (e) {
    console.error(e)
    console.error(broker.logs())
    console.log(`FAIL: kafkajs transactions: ${e.message}`)
    process.exit(1)
  } finally {
    broker.cleanup()
  }
  console.log('PASS: kafkajs transactions')
  process.exit(0)
}

main()
