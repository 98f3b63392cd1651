// KafkaJS over TLS against a running `sluice serve` (driven by tls_listeners_test.py, which
// makes the certificates and the broker): mutual TLS on the SSL listener (admin, an
// idempotent GZIP producer, a group reading every record back byte for byte), SCRAM-SHA-256
// on the SASL_SSL listener, and a client trusting another CA refused.
//
// usage: node tls_kafkajs_clients.js SSL_ADDR SASL_SSL_ADDR CERT_DIR
'use strict'

const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { makeRecords, produce, member, newLedger, expectTopic, waitUntil } = require('./kafkajs_test.js')
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

async function roundTrip (kafka, topic, seed) {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true })
  await admin.disconnect()
  const records = makeRecords(topic, 2, 100, seed, 1720000000000)
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  await produce(producer, topic, records, { acks: -1, compression: CompressionTypes.GZIP })
  await producer.disconnect()
  const ledger = newLedger()
  const reader = member(kafka, `${topic}-group`, topic, ledger)
  await reader.run(topic)
  await waitUntil(() => ledger.errors.length > 0 || ledger.total >= records.length, 30000, `${topic} consumed`)
  assert.deepEqual(ledger.errors, [])
  expectTopic(topic, records, ledger.got)
  await reader.consumer.disconnect()
}

async function main () {
  const [sslAddr, saslSslAddr, dir] = process.argv.slice(2)
  const pem = name => fs.readFileSync(path.join(dir, name), 'utf8')
  const base = { clientId: 'sluice-kafkajs-tls', logLevel: logLevel.NOTHING, retry: { retries: 2 } }

  await roundTrip(new Kafka({
    ...base,
    brokers: [sslAddr],
    ssl: { ca: [pem('ca.pem')], cert: pem('client.pem'), key: pem('client.key') },
  }), 'tls-kjs-mtls', 11)
  console.log('kafkajs over mutual TLS: ok')

  await roundTrip(new Kafka({
    ...base,
    brokers: [saslSslAddr],
    ssl: { ca: [pem('ca.pem')] },
    sasl: { mechanism: 'scram-sha-256', username: 'alice', password: 'alice-secret' },
  }), 'tls-kjs-sasl', 12)
  console.log('kafkajs over SASL_SSL: ok')

  const wrongCa = new Kafka({ ...base, brokers: [sslAddr], ssl: { ca: [pem('other-ca.pem')] } }).admin()
  await assert.rejects(wrongCa.connect(), e => /certificate|self.signed|verify/i.test(`${e.message} ${e.cause || ''}`),
    'a client trusting another CA')
  console.log('kafkajs trusting another CA: refused')
}

main().then(() => process.exit(0), e => {
  console.log(`FAIL: kafkajs over TLS: ${e.stack || e.message}`)
  process.exit(1)
})
