// kafkajs reads a compacted topic from the beginning (gaps, empty batches, rewritten
// batches): prints {"n": records, "latest": {key: value}} as one JSON line.
// usage: node compaction_kafkajs_reader.js BOOTSTRAP TOPIC EXPECTED_RECORDS
const path = require('path');
const { Kafka, logLevel } = require(path.join(__dirname, '..', '..', 'node_modules', 'kafkajs'));

(async () => {
  const [bootstrap, topic, expected] = process.argv.slice(2);
  const kafka = new Kafka({ brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: `kjs-compaction-${Date.now()}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const latest = {};
  let n = 0;
  const done = new Promise((resolve) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        n++;
        latest[message.key.toString()] = message.value === null ? null : message.value.toString();
        if (n >= Number(expected)) resolve();
      },
    });
  });
  await Promise.race([done, new Promise((resolve) => setTimeout(resolve, 30000))]);
  await consumer.disconnect();
  console.log(JSON.stringify({ n, latest }));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
