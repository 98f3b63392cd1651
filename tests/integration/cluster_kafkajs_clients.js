// KafkaJS against a replicated sluice cluster, driven by cluster_clients_test.py (which
// starts etcd and the three brokers, kills and restarts a leader, and checks what this
// script recorded). An idempotent producer (acks=-1, one request in flight) sends a record
// every few milliseconds, and a consumer group member reads the topic, from `start` on
// stdin until `finish`; then the producer stops, the member reads until it has every
// acknowledged record, and the script exits 0.
//
// stdout: `acked N read M` once a second (the driver waits on these), `finished ...` at
// the end. The events file gets one JSON line per acknowledged record
// ({"type":"ack",topic,partition,offset,value}), per record the group read
// ({"type":"consumed",partition,offset,value}), per delivery failure
// ({"type":"failure",error}) and per other error ({"type":"error",error}).
//
// usage: node cluster_kafkajs_clients.js BOOTSTRAP[,...] TOPIC GROUP EVENTS_FILE
'use strict'

const fs = require('node:fs')
const readline = require('node:readline')
const { Kafka, logLevel } = require('kafkajs')

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const [bootstrap, topic, groupId, eventsFile] = process.argv.slice(2)
if (!eventsFile) {
  console.error('usage: node cluster_kafkajs_clients.js BOOTSTRAP[,...] TOPIC GROUP EVENTS_FILE')
  process.exit(2)
}
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

// KafkaJS's own lines at WARN and above go to stderr (the driver keeps them in a file).
const logCreator = () => ({ namespace, label, log }) => {
  console.error(JSON.stringify({ level: label, namespace, ...log }))
}

const kafka = new Kafka({
  clientId: 'cluster-kafkajs',
  brokers: bootstrap.split(','),
  logLevel: logLevel.WARN,
  logCreator,
  connectionTimeout: 3000,
  requestTimeout: 10000,
  // A dead leader: connections refused until the controller elected another (the
  // session timeout, 2 s in the test, and an election).
  retry: { initialRetryTime: 200, maxRetryTime: 2000, retries: 30 },
})

const events = []
const acked = []
const consumed = new Set() // values the group read
let readCount = 0

// A paused leader (SIGSTOP) keeps its connections open and answers nothing: KafkaJS's
// requests to it time out, and it learns of the new leader only from a Metadata refresh,
// which comes every metadataMaxAge (5 minutes by default).
const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, metadataMaxAge: 5000 })
const consumer = kafka.consumer({
  groupId, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 500, metadataMaxAge: 5000,
  retry: { initialRetryTime: 200, maxRetryTime: 2000, retries: 30 },
})
consumer.on(consumer.events.CRASH, e => {
  events.push({ type: 'error', error: `consumer crashed: ${e.payload.error} (restart: ${e.payload.restart})` })
})

let producing = false
let stopped = null

// One record at a time, awaited: the producer carries on by itself through the kill (its
// retries), and a send that fails for good is recorded and the next one tried.
async function produceLoop () {
  let seq = 0
  while (producing) {
    const value = `kjs:${seq++}`
    try {
      const [md] = await producer.send({ topic, acks: -1, timeout: 10000, messages: [{ key: value, value }] })
      const e = { type: 'ack', topic, partition: md.partition, offset: Number(md.baseOffset), value }
      events.push(e)
      acked.push(e)
    } catch (e) {
      events.push({ type: 'failure', error: `${value}: ${e.name}: ${e.message}` })
    }
    await sleep(3)
  }
}

async function main () {
  await producer.connect()
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      const value = message.value.toString()
      events.push({ type: 'consumed', partition, offset: Number(message.offset), value })
      consumed.add(value)
      readCount++
    },
  })
  const progress = setInterval(() => console.log(`acked ${acked.length} read ${readCount}`), 1000)

  const lines = readline.createInterface({ input: process.stdin })
  for await (const line of lines) {
    if (line === 'start' && !producing) {
      producing = true
      stopped = produceLoop()
    } else if (line === 'finish') {
      break
    }
  }
  producing = false
  await stopped
  const deadline = Date.now() + 120000
  while (acked.some(e => !consumed.has(e.value)) && Date.now() < deadline) await sleep(100)
  clearInterval(progress)
  await consumer.disconnect()
  await producer.disconnect()
  fs.writeFileSync(eventsFile, events.map(e => JSON.stringify(e)).join('\n') + '\n')
  const missing = acked.filter(e => !consumed.has(e.value)).length
  console.log(`finished: ${acked.length} acknowledged, ${readCount} read, ${missing} not read`)
  process.exit(0) // stdin (the driver's pipe) would keep node running
}

main().catch(e => {
  events.push({ type: 'error', error: `${e.name}: ${e.message}` })
  try { fs.writeFileSync(eventsFile, events.map(x => JSON.stringify(x)).join('\n') + '\n') } catch (_) {}
  console.error(e.stack)
  process.exit(1)
})
